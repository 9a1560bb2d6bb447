// Reading the configuration: the environment is copied once into a map, every row of the settings table
// resolves its value from that map, and the result is one immutable Config. Nothing else in kiln calls getenv.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <optional>
#include <string_view>
#include <vector>

#include "config/settings_table.hpp"
#include "kiln/config.hpp"
#include "kiln/error.hpp"

extern char** environ;

namespace kiln {

const char* to_string(Backend backend) noexcept {
  switch (backend) {
    case Backend::kNvcc: return "nvcc";
    case Backend::kNvrtc: return "nvrtc";
  }
  return "unknown";
}

const char* to_string(LaunchApi api) noexcept {
  switch (api) {
    case LaunchApi::kDriver: return "driver";
    case LaunchApi::kRuntime: return "runtime";
  }
  return "unknown";
}

const char* to_string(Origin origin) noexcept {
  switch (origin) {
    case Origin::kDefault: return "default";
    case Origin::kEnvironment: return "environment";
  }
  return "unknown";
}

namespace {

using configuration::Resolved;
using configuration::SettingDef;
using configuration::Variables;

bool is_prefixed_variable(std::string_view entry) {
  return entry.starts_with("DG_JIT_") || entry.starts_with("DG_PRINT_");
}

// Edit distance (insertions, deletions, substitutions), for naming the setting a misspelt variable meant.
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

// The DG_JIT_* / DG_PRINT_* variables set that no setting reads, each with the nearest known name when it is a near
// miss (at most 3 edits): worth a warning, since kiln ignores them.
std::vector<Config::UnknownVariable> unknown_variables_of(const std::map<std::string, std::string>& variables) {
  std::vector<Config::UnknownVariable> unknown;
  const auto table = configuration::setting_table();
  for (const auto& [name, value] : variables) {
    if (!is_prefixed_variable(name)) continue;
    if (std::any_of(table.begin(), table.end(), [&](const SettingDef& row) { return name == row.variable; })) continue;
    Config::UnknownVariable u{name, ""};
    size_t best = 4;
    for (const SettingDef& row : table) {
      const size_t distance = edit_distance(name, row.variable);
      if (distance < best) {
        best = distance;
        u.hint = std::string(" (did you mean ") + row.variable + "?)";
      }
    }
    unknown.push_back(std::move(u));
  }
  return unknown;  // std::map: already sorted by name
}

}  // namespace

std::string Config::UnknownVariable::warning() const {
  return name + " is set but is not a kiln setting" + hint + " (ignored; see `kiln config`)";
}

Config Config::from_environment() {
  // Copy what resolution may read, once; afterwards nothing looks at the environment again.
  std::map<std::string, std::string> variables;
  for (char** entry = environ; entry && *entry; ++entry) {
    if (!is_prefixed_variable(*entry)) continue;  // every DG_JIT_/DG_PRINT_ one, so typos can be named
    const char* eq = std::strchr(*entry, '=');
    if (!eq) continue;
    variables.emplace(std::string(*entry, size_t(eq - *entry)), std::string(eq + 1));
  }
  for (const char* name : configuration::auxiliary_variables()) {
    if (const char* value = std::getenv(name)) variables.emplace(name, value);
  }
  return from_variables(variables);
}

Config Config::from_variables(const std::map<std::string, std::string>& variables) {
  Config config;
  const Variables vars(variables);
  std::vector<std::string> problems;
  for (const SettingDef& row : configuration::setting_table()) {
    try {
      Resolved resolved;
      if (row.flag) {
        // A plain boolean switch: unset or empty means false.
        bool value = false;
        if (const std::string* text = vars.get(row.variable)) {
          if (!configuration::parse_bool(*text, &value))
            throw Error(ErrorKind::kConfigError, std::string(row.variable) + "='" + *text +
                                                     "' is not a valid boolean: expected " + row.accepted);
          resolved.origin = Origin::kEnvironment;
        }
        config.*row.flag = value;
        resolved.value = value ? "true" : "false";
      } else {
        resolved = row.resolve(config, vars);
      }
      config.settings_.push_back(
          Setting{row.name, row.variable, resolved.value, resolved.origin, row.doc, resolved.detail});
    } catch (const Error& error) {
      if (error.kind() != ErrorKind::kConfigError) throw;
      // Report every bad variable at once rather than making the user fix them one run at a time.
      problems.emplace_back(error.what());
    }
  }
  config.unknown_variables_ = unknown_variables_of(variables);
  if (!problems.empty()) {
    std::string message = problems.front();
    for (size_t i = 1; i < problems.size(); ++i) message += "\n" + problems[i];
    throw Error(ErrorKind::kConfigError, message);
  }
  return config;
}

const Config& config() {
  // Read exactly once, even when it fails: a bad environment gives every caller the same error without
  // rereading the environment. Function-local statics are initialised thread-safely.
  struct Holder {
    std::optional<Config> config;
    std::exception_ptr error;
  };
  static const Holder holder = [] {
    Holder h;
    try {
      h.config.emplace(Config::from_environment());
    } catch (...) {
      h.error = std::current_exception();
    }
    return h;
  }();
  if (holder.error) std::rethrow_exception(holder.error);
  return *holder.config;
}

}  // namespace kiln
