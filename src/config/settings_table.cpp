// The settings table and the resolution of the settings that are more than a boolean switch.
#include "config/settings_table.hpp"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <climits>
#include <filesystem>
#include <optional>
#include <regex>
#include <string_view>
#include <vector>

#include "kiln/error.hpp"
#include "util/redis_url.hpp"
#include "util/subprocess.hpp"

#ifndef KILN_DEFAULT_CUDA_HOME
#define KILN_DEFAULT_CUDA_HOME "/usr/local/cuda"
#endif

namespace kiln::configuration {

namespace fs = std::filesystem;

const std::string* Variables::get(const std::string& name) const {
  auto it = variables_.find(name);
  if (it == variables_.end()) return nullptr;
  const std::string& value = it->second;
  // Empty, or only spaces (`VAR=" "` from a template left blank): unset, as the docs promise.
  if (std::all_of(value.begin(), value.end(), [](char c) { return std::isspace(static_cast<unsigned char>(c)); }))
    return nullptr;
  return &value;
}

namespace {

constexpr const char* kBoolAccepted =
    "1/0, true/false, yes/no or on/off (any case); empty or unset means the default";

std::string trim(std::string_view text) {
  size_t begin = 0, end = text.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(text[begin]))) ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(text[end - 1]))) --end;
  return std::string(text.substr(begin, end - begin));
}

[[noreturn]] void bad_value(const char* variable, const std::string& value, const std::string& why) {
  throw Error(ErrorKind::kConfigError, std::string(variable) + "='" + value + "' " + why);
}

// A boolean variable: `fallback` when unset or empty.
bool read_bool(const Variables& vars, const char* variable, bool fallback, Origin* origin) {
  const std::string* text = vars.get(variable);
  if (!text) return fallback;
  bool value = false;
  if (!parse_bool(*text, &value)) bad_value(variable, *text, std::string("is not a valid boolean: expected ") + kBoolAccepted);
  *origin = Origin::kEnvironment;
  return value;
}

using util::is_executable_file;

// The first executable `name` in a PATH-style list (util::find_in_path_list: empty entries skipped, the find
// absolute), or nullopt.
std::optional<fs::path> search_path(const std::string* path_list, const std::string& name) {
  if (!path_list) return std::nullopt;
  fs::path found = util::find_in_path_list(*path_list, name);
  if (found.empty()) return std::nullopt;
  return found;
}

struct Home {
  fs::path path;
  std::string detail;
};

// A password database entry's (name, home directory), looked up by `lookup` (getpwuid_r or getpwnam_r), or
// nullopt when there is none or it has no home.
template <typename Lookup>
std::optional<std::pair<std::string, fs::path>> password_entry(Lookup&& lookup) {
  long size = ::sysconf(_SC_GETPW_R_SIZE_MAX);
  std::vector<char> buffer(size > 0 ? size_t(size) : 16384);
  struct passwd pwd {};
  struct passwd* result = nullptr;
  for (;;) {
    int rc = lookup(&pwd, buffer.data(), buffer.size(), &result);
    if (rc == ERANGE && buffer.size() < (size_t(1) << 20)) {
      buffer.resize(buffer.size() * 2);
      continue;
    }
    if (rc != 0 || !result || !pwd.pw_dir || !*pwd.pw_dir) return std::nullopt;
    return std::make_pair(std::string(pwd.pw_name), fs::path(pwd.pw_dir));
  }
}

// The password database's home directory of the current user, or nullopt.
std::optional<Home> password_home() {
  const uid_t uid = ::getuid();
  auto entry = password_entry([uid](struct passwd* pwd, char* buffer, size_t size, struct passwd** result) {
    return ::getpwuid_r(uid, pwd, buffer, size, result);
  });
  if (!entry) return std::nullopt;
  return Home{entry->second, "HOME is unset: the home directory of user " + entry->first + " from the password database"};
}

// The home directory of the user named `user` ("~user"), or nullopt.
std::optional<fs::path> home_of_user(const std::string& user) {
  auto entry = password_entry([&user](struct passwd* pwd, char* buffer, size_t size, struct passwd** result) {
    return ::getpwnam_r(user.c_str(), pwd, buffer, size, result);
  });
  if (!entry) return std::nullopt;
  return entry->second;
}

// A relative HOME is made absolute now, against the working directory at the time the configuration is read,
// so that a later chdir does not move the default cache (as for a relative DG_JIT_CACHE_DIR).
std::optional<Home> home_directory(const Variables& vars) {
  if (const std::string* home = vars.get("HOME")) {
    std::error_code ec;
    fs::path absolute = fs::absolute(fs::path(*home), ec);
    return Home{ec ? fs::path(*home) : absolute, "$HOME"};
  }
  return password_home();
}

// Refuses a cache directory that cannot be one: an existing non-directory, or a path below one.
void check_cache_dir(const fs::path& dir, const std::string& described) {
  std::error_code ec;
  fs::file_status status = fs::status(dir, ec);
  if (fs::exists(status)) {
    if (!fs::is_directory(status))
      throw Error(ErrorKind::kConfigError,
                  described + " exists and is not a directory; expected a directory (created when missing)");
    return;
  }
  for (fs::path parent = dir.parent_path(); !parent.empty(); parent = parent.parent_path()) {
    fs::file_status parent_status = fs::status(parent, ec);
    if (fs::exists(parent_status)) {
      if (!fs::is_directory(parent_status))
        throw Error(ErrorKind::kConfigError, described + " cannot be created: " + parent.string() +
                                                 " exists and is not a directory");
      return;
    }
    if (parent == parent.root_path()) return;
  }
}

// One directory of DG_JIT_CACHE_DIR: '~' and '~user' expanded, made absolute and normalised ("/a/b/" is "/a/b").
fs::path expand_cache_dir(const std::string& component, const std::string& whole, const Variables& vars) {
  fs::path dir = component;
  // A literal "~" reaches us when the variable was set without a shell (env files, launchers).
  if (component.starts_with("~")) {
    const size_t slash = component.find('/');
    const std::string user = component.substr(1, slash == std::string::npos ? std::string::npos : slash - 1);
    const std::string rest = slash == std::string::npos ? std::string() : component.substr(slash + 1);
    if (user.empty()) {
      std::optional<Home> home = home_directory(vars);
      if (!home)
        bad_value("DG_JIT_CACHE_DIR", whole,
                  "starts with '~' but there is no home directory (HOME is unset and the user has no password "
                  "entry); expected an absolute directory path");
      dir = home->path / rest;
    } else {
      std::optional<fs::path> home = home_of_user(user);
      if (!home)
        bad_value("DG_JIT_CACHE_DIR", whole,
                  "starts with '~" + user + "' but there is no user " + user +
                      " with a home directory in the password database; expected ~, ~<user> or a directory path");
      dir = *home / rest;
    }
  }
  std::error_code ec;
  fs::path absolute = fs::absolute(dir, ec);
  if (!ec) dir = absolute;
  dir = dir.lexically_normal();
  if (!dir.has_filename() && dir != dir.root_path()) dir = dir.parent_path();
  return dir;
}

Resolved resolve_cache_dir(Config& config, const Variables& vars) {
  Resolved r;
  config.cache_layers.clear();
  if (const std::string* text = vars.get("DG_JIT_CACHE_DIR")) {
    // "first:second:...": the first is written, the others are read-only layers searched in order.
    std::vector<std::string> components;
    for (size_t start = 0;;) {
      const size_t end = text->find(':', start);
      components.push_back(text->substr(start, end == std::string::npos ? std::string::npos : end - start));
      if (end == std::string::npos) break;
      start = end + 1;
    }
    std::vector<fs::path> dirs;
    for (size_t i = 0; i < components.size(); ++i) {
      if (trim(components[i]).empty())
        bad_value("DG_JIT_CACHE_DIR", *text,
                  "has an empty directory at position " + std::to_string(i + 1) +
                      "; expected one directory, or a ':'-separated list (the first written, the others read-only "
                      "layers)");
      // Spaces inside a path are the user's business; at either end they are a slip (a quoted template, a
      // list written "a: b") that would silently name another directory.
      if (trim(components[i]) != components[i])
        bad_value("DG_JIT_CACHE_DIR", *text,
                  "has spaces at the start or end of the directory at position " + std::to_string(i + 1) + " ('" +
                      components[i] + "'); expected the directory without them");
      fs::path dir = expand_cache_dir(components[i], *text, vars);
      for (const fs::path& earlier : dirs) {
        std::error_code same_ec;
        if (earlier == dir || fs::equivalent(earlier, dir, same_ec))  // also through a link, when both exist
          bad_value("DG_JIT_CACHE_DIR", *text,
                    "names " + dir.string() + (earlier == dir ? "" : " and " + earlier.string() + ", the same directory,") +
                        " twice; expected each directory once");
      }
      if (i == 0) {
        check_cache_dir(dir, "DG_JIT_CACHE_DIR='" + *text + "': " + dir.string());
      } else {
        // A read-only layer that is missing is skipped at run time with a warning (a network mount may come
        // later); one that exists as something else is a mistake worth stopping for.
        std::error_code ec;
        fs::file_status status = fs::status(dir, ec);
        if (fs::exists(status) && !fs::is_directory(status))
          bad_value("DG_JIT_CACHE_DIR", *text,
                    "names the read-only layer " + dir.string() + ", which exists and is not a directory");
      }
      dirs.push_back(dir);
    }
    r.origin = Origin::kEnvironment;
    config.cache_dir = dirs.front();
    config.cache_layers.assign(dirs.begin() + 1, dirs.end());
    std::string joined;
    for (const fs::path& dir : dirs) joined += (joined.empty() ? "" : ":") + dir.string();
    if (joined != *text) r.detail = "from '" + *text + "'";
    if (!config.cache_layers.empty())
      r.detail += std::string(r.detail.empty() ? "" : "; ") + "the first is written, the other " +
                  std::to_string(config.cache_layers.size()) + " read-only";
    r.value = joined;
    return r;
  }
  if (std::optional<Home> home = home_directory(vars)) {
    config.cache_dir = (home->path / ".deep_gemm").lexically_normal();
    r.detail = home->detail == "$HOME" ? "$HOME/.deep_gemm" : home->detail;
    check_cache_dir(config.cache_dir, "the default cache directory " + config.cache_dir.string() + " (" +
                                          r.detail + "; set DG_JIT_CACHE_DIR to use another)");
  } else {
    // No home at all (a container running as an unknown uid): a per-user directory in /tmp still works.
    const std::string uid = std::to_string(::getuid());
    config.cache_dir = "/tmp/kiln-cache-" + uid;
    r.detail = "HOME is unset and uid " + uid + " has no password entry: a per-user directory in /tmp";
    check_cache_dir(config.cache_dir, "the fallback cache directory " + config.cache_dir.string() +
                                          " (set DG_JIT_CACHE_DIR to use another)");
  }
  r.value = config.cache_dir.string();
  return r;
}

Resolved resolve_backend(Config& config, const Variables& vars) {
  Resolved r;
  config.backend = read_bool(vars, "DG_JIT_USE_NVRTC", false, &r.origin) ? Backend::kNvrtc : Backend::kNvcc;
  r.value = to_string(config.backend);
  return r;
}

Resolved resolve_cuda_home(Config& config, const Variables& vars) {
  Resolved r;
  if (const std::string* home = vars.get("CUDA_HOME")) {
    config.cuda_home = *home;
    r.origin = Origin::kEnvironment;
    r.detail = "from CUDA_HOME";
  } else if (const std::string* path = vars.get("CUDA_PATH")) {
    config.cuda_home = *path;
    r.origin = Origin::kEnvironment;
    r.detail = "from CUDA_PATH";
  } else {
    config.cuda_home = KILN_DEFAULT_CUDA_HOME;
    r.detail = "the toolkit kiln was built with";
  }
  r.value = config.cuda_home.string();
  return r;
}

Resolved resolve_nvcc(Config& config, const Variables& vars) {
  Resolved r;
  if (const std::string* text = vars.get("DG_JIT_NVCC_COMPILER")) {
    fs::path nvcc = *text;
    if (text->find('/') == std::string::npos) {
      // A bare name is looked up on PATH, as a shell would.
      std::optional<fs::path> found = search_path(vars.get("PATH"), *text);
      if (!found)
        bad_value("DG_JIT_NVCC_COMPILER", *text,
                  "was not found on PATH; expected the path of an executable nvcc, for example "
                  "/usr/local/cuda/bin/nvcc");
      nvcc = *found;
      r.detail = "found on PATH";
    }
    // Made absolute now: NVCC runs in a temporary working directory, where a relative path would name nothing
    // (one found on PATH already is).
    if (std::error_code abs_ec; nvcc.is_relative()) {
      fs::path absolute = fs::absolute(nvcc, abs_ec);
      if (!abs_ec) nvcc = absolute.lexically_normal();
    }
    std::error_code ec;
    fs::file_status status = fs::status(nvcc, ec);
    if (!fs::exists(status))
      bad_value("DG_JIT_NVCC_COMPILER", *text,
                "does not exist; expected the path of an executable nvcc, for example /usr/local/cuda/bin/nvcc");
    if (fs::is_directory(status))
      bad_value("DG_JIT_NVCC_COMPILER", *text,
                "is a directory; expected the path of the nvcc executable itself, for example "
                "/usr/local/cuda/bin/nvcc");
    if (!is_executable_file(nvcc))
      bad_value("DG_JIT_NVCC_COMPILER", *text, "is not an executable file; expected the path of an executable nvcc");
    config.nvcc_path = nvcc;
    r.origin = Origin::kEnvironment;
  } else {
    // Not finding nvcc is no error here: NVRTC and cached kernels do not need it. The NVCC compiler reports
    // the missing path when it is first asked to compile.
    std::vector<std::pair<fs::path, std::string>> candidates;
    if (const std::string* home = vars.get("CUDA_HOME")) candidates.emplace_back(fs::path(*home) / "bin/nvcc", "$CUDA_HOME/bin/nvcc");
    if (const std::string* path = vars.get("CUDA_PATH")) candidates.emplace_back(fs::path(*path) / "bin/nvcc", "$CUDA_PATH/bin/nvcc");
    for (const auto& [path, detail] : candidates) {
      if (is_executable_file(path)) {
        config.nvcc_path = path;
        r.detail = detail;
        break;
      }
    }
    if (config.nvcc_path.empty()) {
      if (std::optional<fs::path> found = search_path(vars.get("PATH"), "nvcc")) {
        config.nvcc_path = *found;
        r.detail = "found on PATH";
      }
    }
    if (config.nvcc_path.empty()) {
      fs::path built_with = fs::path(KILN_DEFAULT_CUDA_HOME) / "bin/nvcc";
      if (is_executable_file(built_with)) {
        config.nvcc_path = built_with;
        r.detail = "the toolkit kiln was built with";
      }
    }
    if (config.nvcc_path.empty())
      r.detail = "not found in $CUDA_HOME/bin, $CUDA_PATH/bin, PATH or " KILN_DEFAULT_CUDA_HOME
                 "/bin; NVCC compiles fail until DG_JIT_NVCC_COMPILER or CUDA_HOME is set";
  }
  r.value = config.nvcc_path.string();
  return r;
}

Resolved resolve_cpp_standard(Config& config, const Variables& vars) {
  Resolved r;
  if (const std::string* text = vars.get("DG_JIT_CPP_STANDARD")) {
    const std::string value = trim(*text);
    if (value == "17" || value == "20") {
      config.cpp_standard = value == "17" ? 17 : 20;
    } else {
      bad_value("DG_JIT_CPP_STANDARD", *text, "is not a supported C++ standard: expected 17 or 20");
    }
    r.origin = Origin::kEnvironment;
  }
  r.value = std::to_string(config.cpp_standard);
  return r;
}

Resolved resolve_print_compiler_command(Config& config, const Variables& vars) {
  Resolved r;
  // DG_JIT_DEBUG prints the compiler command too (as in DeepGEMM), unless this variable says otherwise.
  config.print_compiler_command = read_bool(vars, "DG_JIT_PRINT_COMPILER_COMMAND", false, &r.origin);
  if (r.origin == Origin::kDefault && config.debug) {
    config.print_compiler_command = true;
    r.origin = Origin::kEnvironment;
    r.detail = "implied by DG_JIT_DEBUG";
  }
  r.value = config.print_compiler_command ? "true" : "false";
  return r;
}

// DG_JIT_DUMP_PTX / DG_JIT_DUMP_SASS: the variable's own value, or on when DG_JIT_DUMP_ASM (both dumps) is, so
// that `kiln config` shows what is in effect. A bad DG_JIT_DUMP_ASM is reported by its own row, not here too.
Resolved resolve_dump(Config& config, const Variables& vars, const char* variable, bool Config::*field) {
  Resolved r;
  config.*field = read_bool(vars, variable, false, &r.origin);
  bool both = false;
  if (const std::string* asm_text = vars.get("DG_JIT_DUMP_ASM");
      !(config.*field) && asm_text && parse_bool(*asm_text, &both) && both) {
    config.*field = true;
    r.origin = Origin::kEnvironment;
    r.detail = "implied by DG_JIT_DUMP_ASM";
  }
  r.value = config.*field ? "true" : "false";
  return r;
}

Resolved resolve_dump_ptx(Config& config, const Variables& vars) {
  return resolve_dump(config, vars, "DG_JIT_DUMP_PTX", &Config::dump_ptx);
}

Resolved resolve_dump_sass(Config& config, const Variables& vars) {
  return resolve_dump(config, vars, "DG_JIT_DUMP_SASS", &Config::dump_sass);
}

Resolved resolve_launch_api(Config& config, const Variables& vars) {
  Resolved r;
  config.launch_api =
      read_bool(vars, "DG_JIT_USE_RUNTIME_API", false, &r.origin) ? LaunchApi::kRuntime : LaunchApi::kDriver;
  r.value = to_string(config.launch_api);
  return r;
}

Resolved resolve_arch(Config& config, const Variables& vars) {
  Resolved r;
  if (const std::string* text = vars.get("DG_JIT_ARCH")) {
    // The same rule as compiler::Arch::parse (config may not depend on the compiler).
    static const std::regex kArch(R"(sm_[1-9][0-9]{1,2}a?)");
    const std::string value = trim(*text);
    if (!std::regex_match(value, kArch))
      bad_value("DG_JIT_ARCH", *text,
                "is not a CUDA arch: expected sm_<major><minor>[a] without a leading 0, for example sm_90a");
    config.arch = value;
    r.origin = Origin::kEnvironment;
    r.value = value;
  } else {
    config.arch.reset();
    r.detail = "the current GPU's arch; sm_90a ahead of time when there is no GPU";
  }
  return r;
}

Resolved resolve_compile_timeout(Config& config, const Variables& vars) {
  Resolved r;
  if (const std::string* text = vars.get("DG_JIT_COMPILE_TIMEOUT")) {
    const std::string value = trim(*text);
    long long seconds = 0;
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), seconds);
    if (value.empty() || ec != std::errc() || end != value.data() + value.size() || seconds <= 0 ||
        seconds > INT_MAX)
      bad_value("DG_JIT_COMPILE_TIMEOUT", *text,
                "is not a valid timeout: expected a whole number of seconds from 1 to " + std::to_string(INT_MAX) +
                    ", for example 600");
    config.compile_timeout_s = int(seconds);
    r.origin = Origin::kEnvironment;
  }
  r.value = std::to_string(config.compile_timeout_s);
  return r;
}

Resolved resolve_mode(Config& config, const Variables& vars) {
  Resolved r;
  config.strict_mode = false;
  if (const std::string* text = vars.get("DG_JIT_MODE")) {
    std::string value = trim(*text);
    for (char& c : value) c = char(std::tolower(static_cast<unsigned char>(c)));
    if (value == "strict") config.strict_mode = true;
    else if (value != "normal")
      bad_value("DG_JIT_MODE", *text, "is not a JIT mode: expected normal or strict");
    r.origin = Origin::kEnvironment;
  }
  r.value = config.strict_mode ? "strict" : "normal";
  return r;
}

Resolved resolve_max_bytes(Config& config, const Variables& vars) {
  Resolved r;
  config.cache_max_bytes = 0;
  if (const std::string* text = vars.get("DG_JIT_CACHE_MAX_BYTES")) {
    std::optional<uint64_t> bytes = parse_byte_size(*text);
    if (!bytes)
      bad_value("DG_JIT_CACHE_MAX_BYTES", *text,
                "is not a size: expected a whole number of bytes, optionally with a K, M, G or T suffix (binary: "
                "1K = 1024; KiB and KB mean the same), for example 20G, below 16 EiB; 0 means no bound");
    config.cache_max_bytes = *bytes;
    r.origin = Origin::kEnvironment;
  }
  r.value = std::to_string(config.cache_max_bytes);
  if (config.cache_max_bytes == 0) r.detail = "no bound";
  return r;
}

Resolved resolve_remote_cache(Config& config, const Variables& vars) {
  Resolved r;
  config.remote_cache.clear();
  if (const std::string* text = vars.get("DG_JIT_REMOTE_CACHE")) {
    const std::string value = trim(*text);
    std::string why;
    std::optional<util::RedisUrl> url = util::parse_redis_url(value, &why);
    // The message shows the URL without its password: configuration errors end up in logs.
    if (!url) {
      std::string shown = value;
      if (const size_t at = shown.rfind('@'); at != std::string::npos) shown = shown.substr(0, shown.find("//") + 2) + "***@" + shown.substr(at + 1);
      bad_value("DG_JIT_REMOTE_CACHE", shown, why);
    }
    config.remote_cache = value;
    r.origin = Origin::kEnvironment;
    r.value = url->display();
  }
  return r;
}

// A whole number of milliseconds within [lo, hi].
int read_millis(const Variables& vars, const char* variable, int fallback, int lo, int hi, Origin* origin) {
  const std::string* text = vars.get(variable);
  if (!text) return fallback;
  const std::string value = trim(*text);
  long long ms = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), ms);
  if (value.empty() || ec != std::errc() || end != value.data() + value.size() || ms < lo || ms > hi)
    bad_value(variable, *text,
              "is not a valid time: expected a whole number of milliseconds from " + std::to_string(lo) + " to " +
                  std::to_string(hi));
  *origin = Origin::kEnvironment;
  return int(ms);
}

Resolved resolve_remote_timeout(Config& config, const Variables& vars) {
  Resolved r;
  config.remote_timeout_ms = read_millis(vars, "DG_JIT_REMOTE_TIMEOUT_MS", 100, 1, 600000, &r.origin);
  r.value = std::to_string(config.remote_timeout_ms);
  return r;
}

Resolved resolve_remote_wait(Config& config, const Variables& vars) {
  Resolved r;
  config.remote_wait_ms = read_millis(vars, "DG_JIT_REMOTE_WAIT_MS", 30000, 0, 3600000, &r.origin);
  r.value = std::to_string(config.remote_wait_ms);
  return r;
}

// clang-format off
const SettingDef kSettings[] = {
  {"cache_dir", "DG_JIT_CACHE_DIR", "a directory path (created private to the user when missing; a leading ~ is expanded)",
   "$HOME/.deep_gemm; when HOME is unset, the password database's home; failing that /tmp/kiln-cache-<uid>", "no",
   "Root of the persistent kernel cache; kiln keeps its entries under <dir>/kiln/, beside any DeepGEMM cache. "
   "An existing path that is not a directory is an error. The key holds no paths, so moving the cache keeps it valid.",
   nullptr, resolve_cache_dir},
  {"backend", "DG_JIT_USE_NVRTC", kBoolAccepted, "0 (NVCC)",
   "yes (through the compiler's name and exact version)",
   "1 compiles in-process with NVRTC (much faster cold compiles); 0 runs NVCC as a child process.",
   nullptr, resolve_backend},
  {"nvcc_path", "DG_JIT_NVCC_COMPILER", "the path of an executable nvcc, or a name looked up on PATH",
   "$CUDA_HOME/bin/nvcc, $CUDA_PATH/bin/nvcc, nvcc on PATH, then the build toolkit's nvcc", "no (its exact version is)",
   "The NVCC used by the NVCC backend. A value that does not exist or is not executable is an error; a default "
   "that finds no nvcc is not, until an NVCC compile is asked for.",
   nullptr, resolve_nvcc},
  {"cuda_home", "CUDA_HOME, CUDA_PATH", "the root of a CUDA toolkit", "the toolkit kiln was built with", "no",
   "Where NVRTC, cuobjdump and nvdisasm are looked for.",
   nullptr, resolve_cuda_home},
  {"cpp_standard", "DG_JIT_CPP_STANDARD", "17 or 20", "20", "yes",
   "The C++ standard kernels are compiled with (-std=c++NN).",
   nullptr, resolve_cpp_standard},
  {"debug", "DG_JIT_DEBUG", kBoolAccepted, "0", "no",
   "Log each lookup, compile, publish and load to stderr; also prints compiler commands.",
   &Config::debug, nullptr},
  {"print_compiler_command", "DG_JIT_PRINT_COMPILER_COMMAND", kBoolAccepted, "0 (1 when DG_JIT_DEBUG is on)", "no",
   "Print the NVCC command line or the NVRTC options of each compile.",
   nullptr, resolve_print_compiler_command},
  {"print_load_time", "DG_JIT_PRINT_LOAD_TIME", kBoolAccepted, "0", "no",
   "Print how long loading each kernel into a GPU context took.",
   &Config::print_load_time, nullptr},
  {"ptxas_verbose", "DG_JIT_PTXAS_VERBOSE", kBoolAccepted, "0", "no",
   "Print ptxas's resource report (registers, shared memory, spills) for each compile.",
   &Config::ptxas_verbose, nullptr},
  {"ptxas_check", "DG_JIT_PTXAS_CHECK", kBoolAccepted, "0", "no (it rejects kernels, it never changes one)",
   "Reject a kernel that uses local memory or spills registers, naming it and the figures.",
   &Config::ptxas_check, nullptr},
  {"dump_ptx", "DG_JIT_DUMP_PTX", kBoolAccepted, "0 (1 when DG_JIT_DUMP_ASM is on)", "no",
   "Write the PTX of each compiled kernel beside its cache entry (<key>.ptx).",
   nullptr, resolve_dump_ptx},
  {"dump_sass", "DG_JIT_DUMP_SASS", kBoolAccepted, "0 (1 when DG_JIT_DUMP_ASM is on)", "no",
   "Write the SASS of each compiled kernel beside its cache entry (<key>.sass); needs cuobjdump or nvdisasm.",
   nullptr, resolve_dump_sass},
  {"dump_asm", "DG_JIT_DUMP_ASM", kBoolAccepted, "0", "no",
   "Both DG_JIT_DUMP_PTX and DG_JIT_DUMP_SASS.",
   &Config::dump_asm, nullptr},
  {"launch_api", "DG_JIT_USE_RUNTIME_API", kBoolAccepted, "0 (driver API)", "no",
   "1 loads and launches kernels through the CUDA runtime API instead of the driver API. Read at run time, "
   "unlike DeepGEMM's build-time switch: one build serves both.",
   nullptr, resolve_launch_api},
  {"with_lineinfo", "DG_JIT_WITH_LINEINFO", kBoolAccepted, "0", "yes",
   "Compile with -lineinfo so profilers can map instructions to source lines.",
   &Config::with_lineinfo, nullptr},
  {"print_configs", "DG_PRINT_CONFIGS", kBoolAccepted, "0", "no",
   "Print each kernel choice (operation, shape and specialisation) once per process.",
   &Config::print_configs, nullptr},
  {"arch", "DG_JIT_ARCH", "sm_<major><minor>[a], for example sm_90a", "unset: the current GPU's arch, else sm_90a",
   "yes", "The arch kernels are built for, overriding the current GPU's; sets the default of `kiln compile --arch`.",
   nullptr, resolve_arch},
  {"compile_timeout_s", "DG_JIT_COMPILE_TIMEOUT", "a positive whole number of seconds", "600", "no",
   "An NVCC compile running longer than this is killed and reported as a compile error.",
   nullptr, resolve_compile_timeout},
  {"cache_copy_up", "DG_JIT_CACHE_COPY_UP", kBoolAccepted, "0", "no",
   "1 copies a kernel found in a read-only layer of DG_JIT_CACHE_DIR into the first (written) directory; 0 serves "
   "it from the layer without copying. Kernels found in the remote cache are always stored locally.",
   &Config::cache_copy_up, nullptr},
  {"cache_max_bytes", "DG_JIT_CACHE_MAX_BYTES", "a whole number of bytes, optionally with a K, M, G or T suffix (1K = 1024); 0 for no bound",
   "0 (no bound)", "no",
   "Bound of the written cache directory. When a publish takes it past the bound, the least recently used "
   "entries are evicted down to 90 % of it, by one process at a time. `kiln cache prune --max-bytes` does the "
   "same by hand.",
   nullptr, resolve_max_bytes},
  {"mode", "DG_JIT_MODE", "normal or strict", "normal", "no",
   "strict: a kernel that no cache tier holds is an error (kNotFound, naming the kernel and the `kiln` command "
   "that builds it) instead of a compile on the serving path. Ahead-of-time commands still compile.",
   nullptr, resolve_mode},
  {"remote_cache", "DG_JIT_REMOTE_CACHE", "redis://[[user]:password@]host[:port][/db], or rediss:// for TLS", "unset (no remote tier)", "no",
   "A Redis server shared by many machines: a local miss looks there before compiling, and compiles are "
   "published there; one machine compiles a kernel at a time. A Redis that is down, slow or returns garbage "
   "is skipped after one warning, never failing a kernel. Needs kiln built with hiredis.",
   nullptr, resolve_remote_cache},
  {"remote_timeout_ms", "DG_JIT_REMOTE_TIMEOUT_MS", "a whole number of milliseconds, 1 to 600000", "100", "no",
   "Timeout of each remote-cache request (and of connecting). The first timeout or failure marks the remote "
   "cache down for the rest of the process.",
   nullptr, resolve_remote_timeout},
  {"remote_wait_ms", "DG_JIT_REMOTE_WAIT_MS", "a whole number of milliseconds, 0 to 3600000", "30000", "no",
   "How long a machine waits for another machine that holds the remote compile lock of the same kernel before "
   "compiling it itself; also the expiry of that lock.",
   nullptr, resolve_remote_wait},
};
// clang-format on

constexpr const char* kAuxiliary[] = {"HOME", "CUDA_HOME", "CUDA_PATH", "PATH"};

// Table cells are Markdown: '|' ends a cell and "<dir>" would be read as an HTML tag, except in code spans.
std::string escape_cell(const std::string& text) {
  std::string out;
  bool in_code = false;
  for (char c : text) {
    if (c == '`') in_code = !in_code;
    if (c == '|') out += "\\|";
    else if (c == '<' && !in_code) out += "&lt;";
    else if (c == '>' && !in_code) out += "&gt;";
    else out += c;
  }
  return out;
}

}  // namespace

bool parse_bool(const std::string& text, bool* value) {
  std::string lowered = trim(text);
  for (char& c : lowered) c = char(std::tolower(static_cast<unsigned char>(c)));
  if (lowered == "1" || lowered == "true" || lowered == "yes" || lowered == "on") {
    *value = true;
    return true;
  }
  if (lowered == "0" || lowered == "false" || lowered == "no" || lowered == "off") {
    *value = false;
    return true;
  }
  return false;
}

std::span<const SettingDef> setting_table() { return kSettings; }

std::span<const char* const> auxiliary_variables() { return kAuxiliary; }

std::string settings_markdown() {
  std::string out =
      "| Variable | Setting | Accepted values | Default | Part of the cache key | Effect |\n"
      "|---|---|---|---|---|---|\n";
  for (const SettingDef& row : kSettings) {
    out += "| `" + std::string(row.variable) + "` | `" + row.name + "` | " + escape_cell(row.accepted) + " | " +
           escape_cell(row.default_text) + " | " + escape_cell(row.in_key) + " | " + escape_cell(row.doc) +
           " |\n";
  }
  return out;
}

}  // namespace kiln::configuration

namespace kiln {

std::optional<uint64_t> parse_byte_size(const std::string& text) {
  size_t begin = 0, end = text.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(text[begin]))) ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(text[end - 1]))) --end;
  const std::string_view value(text.data() + begin, end - begin);
  uint64_t number = 0;
  auto [stop, ec] = std::from_chars(value.data(), value.data() + value.size(), number);
  if (value.empty() || ec != std::errc() || stop == value.data()) return std::nullopt;
  std::string suffix(stop, value.data() + value.size());
  while (!suffix.empty() && std::isspace(static_cast<unsigned char>(suffix.front()))) suffix.erase(0, 1);
  for (char& c : suffix) c = char(std::tolower(static_cast<unsigned char>(c)));
  if (suffix.size() == 3 && suffix.ends_with("ib")) suffix.resize(1);  // "kib": a unit before the "ib"
  else if (suffix.size() == 2 && suffix.back() == 'b') suffix.resize(1);
  else if (suffix == "b") suffix.clear();
  int shift = 0;
  if (suffix.empty()) shift = 0;
  else if (suffix == "k") shift = 10;
  else if (suffix == "m") shift = 20;
  else if (suffix == "g") shift = 30;
  else if (suffix == "t") shift = 40;
  else return std::nullopt;
  if (shift && number > (UINT64_MAX >> shift)) return std::nullopt;
  return number << shift;
}

}  // namespace kiln
