// The one configuration value. Every DG_JIT_* variable (and DG_PRINT_CONFIGS) is read once, validated, and
// kept here with its origin; nothing in kiln calls getenv after that. See docs/CONFIGURATION.md.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kiln {

enum class Backend { kNvcc, kNvrtc };
const char* to_string(Backend backend) noexcept;  // "nvcc" or "nvrtc"

enum class LaunchApi { kDriver, kRuntime };
const char* to_string(LaunchApi api) noexcept;  // "driver" or "runtime"

// Where a setting's value came from.
enum class Origin { kDefault, kEnvironment };
const char* to_string(Origin origin) noexcept;  // "default" or "environment"

struct Config {
  // DG_JIT_CACHE_DIR. Default: $HOME/.deep_gemm (the password database's home when HOME is unset).
  std::filesystem::path cache_dir;
  Backend backend = Backend::kNvcc;               // DG_JIT_USE_NVRTC=1 selects NVRTC
  std::filesystem::path nvcc_path;                // DG_JIT_NVCC_COMPILER; default $CUDA_HOME/bin/nvcc, PATH
  std::filesystem::path cuda_home;                // CUDA_HOME / CUDA_PATH, else the toolkit kiln was built with
  int cpp_standard = 20;                          // DG_JIT_CPP_STANDARD: 17 or 20
  bool debug = false;                             // DG_JIT_DEBUG: log each lookup, compile, publish and load
  bool print_compiler_command = false;            // DG_JIT_PRINT_COMPILER_COMMAND
  bool print_load_time = false;                   // DG_JIT_PRINT_LOAD_TIME
  bool ptxas_verbose = false;                     // DG_JIT_PTXAS_VERBOSE: print ptxas's resource report
  bool ptxas_check = false;                       // DG_JIT_PTXAS_CHECK: reject kernels with local memory/spills
  bool dump_ptx = false;                          // DG_JIT_DUMP_PTX: write <entry>.ptx beside the cache entry
  bool dump_sass = false;                         // DG_JIT_DUMP_SASS: write <entry>.sass (needs cuobjdump/nvdisasm)
  bool dump_asm = false;                          // DG_JIT_DUMP_ASM: both of the above
  LaunchApi launch_api = LaunchApi::kDriver;      // DG_JIT_USE_RUNTIME_API=1 selects the runtime API
  bool with_lineinfo = false;                     // DG_JIT_WITH_LINEINFO: -lineinfo (changes the binary)
  bool print_configs = false;                     // DG_PRINT_CONFIGS: print each kernel choice once
  std::optional<std::string> arch;                // DG_JIT_ARCH (e.g. sm_90a); default: the current device's
  int compile_timeout_s = 600;                    // DG_JIT_COMPILE_TIMEOUT: seconds before a compile is killed
  // The cache tiers (docs/CACHE.md). DG_JIT_CACHE_DIR="first:second:...": cache_dir is the first (written),
  // cache_layers the others, read-only layers searched in order after it.
  std::vector<std::filesystem::path> cache_layers;
  bool cache_copy_up = false;                     // DG_JIT_CACHE_COPY_UP: copy a lower layer's hit into cache_dir
  uint64_t cache_max_bytes = 0;                   // DG_JIT_CACHE_MAX_BYTES: bound of cache_dir; 0 = none
  bool strict_mode = false;                       // DG_JIT_MODE=strict: never compile on the serving path
  std::string remote_cache;                       // DG_JIT_REMOTE_CACHE: redis://[:password@]host:port[/db]
  int remote_timeout_ms = 100;                    // DG_JIT_REMOTE_TIMEOUT_MS: per remote request
  int remote_wait_ms = 30000;                     // DG_JIT_REMOTE_WAIT_MS: wait for another machine's compile

  // Reads the process environment once. Throws Error(kConfigError) naming the variable, the value given and
  // what is accepted, for any bad value.
  static Config from_environment();
  // The same from an explicit variable map (tests, and `kiln config` with overrides).
  static Config from_variables(const std::map<std::string, std::string>& variables);

  // Each setting as (name, variable, value text, origin, documentation), in a stable order.
  struct Setting {
    std::string name;
    std::string variable;
    std::string value;
    Origin origin;
    std::string doc;
    std::string detail;  // how a derived value was found ("$HOME/.deep_gemm", "found on PATH"); may be empty
  };
  const std::vector<Setting>& settings() const { return settings_; }

  // The DG_JIT_* and DG_PRINT_* variables that were set but that no setting reads (a typo such as
  // DG_JIT_USE_NVRTX, or a DeepGEMM variable kiln does not have), each with a hint: " (did you mean
  // DG_JIT_USE_NVRTC?)" for a near miss of a known name, else empty. Sorted by name.
  struct UnknownVariable {
    std::string name;
    std::string hint;
    // "<name> is set but is not a kiln setting<hint> (ignored; see `kiln config`)": the one warning, whoever gives it.
    std::string warning() const;
  };
  const std::vector<UnknownVariable>& unknown_variables() const { return unknown_variables_; }

  // Effective dump switches (DG_JIT_DUMP_ASM implies both).
  bool wants_ptx() const { return dump_ptx || dump_asm; }
  bool wants_sass() const { return dump_sass || dump_asm; }

 private:
  std::vector<Setting> settings_;
  std::vector<UnknownVariable> unknown_variables_;
};

// The process-wide configuration, read from the environment on first use (thread-safe) and never again.
const Config& config();

// A size as DG_JIT_CACHE_MAX_BYTES and `kiln cache prune --max-bytes` accept it: a whole number of bytes,
// optionally followed by K, M, G or T (binary multiples: K = 1024; "KiB"/"KB" spellings and any case
// accepted). nullopt for anything else, or a value that does not fit 64 bits.
std::optional<uint64_t> parse_byte_size(const std::string& text);

}  // namespace kiln
