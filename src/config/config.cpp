// Reading the configuration: the environment is copied once into a map, every row of the settings table
// resolves its value from that map, and the result is one immutable Config. Nothing else in kiln calls getenv.
#include <cstdlib>
#include <cstring>
#include <exception>
#include <optional>
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

bool is_prefixed_variable(const char* entry) {
  return std::strncmp(entry, "DG_JIT_", 7) == 0 || std::strncmp(entry, "DG_PRINT_CONFIGS=", 17) == 0;
}

}  // namespace

Config Config::from_environment() {
  // Copy what resolution may read, once; afterwards nothing looks at the environment again.
  std::map<std::string, std::string> variables;
  for (char** entry = environ; entry && *entry; ++entry) {
    if (!is_prefixed_variable(*entry)) continue;
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
