// The one table of settings. Each row names a setting, its environment variable, what it accepts, its
// default, whether it changes the compiled binary (and so is part of the cache key), its documentation, and
// how its value is resolved. Parsing (Config::from_variables), `kiln config` (Config::settings()) and the
// reference table in docs/CONFIGURATION.md (settings_markdown(), checked by config_docs_test) all come from
// this table, so they cannot drift apart.
#pragma once

#include <map>
#include <span>
#include <string>

#include "kiln/config.hpp"

namespace kiln::configuration {

// The variables one resolution reads. Empty values count as unset, as for every kiln variable.
class Variables {
 public:
  explicit Variables(const std::map<std::string, std::string>& variables) : variables_(variables) {}
  // The value, or nullptr when the variable is absent or empty.
  const std::string* get(const std::string& name) const;

 private:
  const std::map<std::string, std::string>& variables_;
};

// What resolving one row produced, beyond the field it set in Config.
struct Resolved {
  std::string value;   // the effective value as text ("" for an unset optional)
  Origin origin = Origin::kDefault;
  std::string detail;  // how the value was found, when that is not obvious ("$HOME/.deep_gemm")
};

struct SettingDef {
  const char* name;       // "cache_dir": the Config field
  const char* variable;   // "DG_JIT_CACHE_DIR"
  const char* accepted;   // "a directory path (created, mode 0700, when missing)"
  const char* default_text;
  const char* in_key;     // "yes", "no", or why not simply either
  const char* doc;
  // A boolean row sets this field; other rows resolve through `resolve`.
  bool Config::*flag = nullptr;
  Resolved (*resolve)(Config& config, const Variables& variables) = nullptr;
};

// Every setting, in the stable order of Config::settings().
std::span<const SettingDef> setting_table();

// The environment variables besides the settings' own that resolution reads (HOME, CUDA_HOME, ...).
std::span<const char* const> auxiliary_variables();

// The reference table of docs/CONFIGURATION.md, generated from setting_table().
std::string settings_markdown();

// Parses a boolean as every boolean variable accepts it: 1/0, true/false, yes/no, on/off (any case).
// Returns false for anything else (the caller names the variable).
bool parse_bool(const std::string& text, bool* value);

}  // namespace kiln::configuration
