// Private to the compiler component: what nvcc.cpp, nvrtc.cpp, toolchain.cpp and sass.cpp share, plus two
// hooks the tests and benchmarks use (PCH on/off, whether NVRTC is loaded). Not installed, not public API.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/compiler.hpp"

namespace kiln::compiler::detail {

// Flags each backend always passes that change the binary: they are part of CompileOptions::key_text(), so
// editing them here invalidates old cache entries by construction.
inline constexpr std::array<std::string_view, 2> kNvccFixedFlags = {"-O3", "--expt-relaxed-constexpr"};
inline constexpr std::array<std::string_view, 1> kNvrtcFixedFlags = {"-default-device"};

// The ptxas option CompileOptions::register_usage_level asks for ("--register-usage-level=10"), empty for ptxas's
// default. Throws Error(kValueError) outside 0..10, before anything runs.
std::string register_usage_level_option(const CompileOptions& options);

// Config::cuda_home when set, else the toolkit kiln was built with (KILN_DEFAULT_CUDA_HOME), else
// /usr/local/cuda when it exists, else the directory above an nvcc found on PATH. Empty when none is known.
std::filesystem::path resolve_cuda_home(const Config& config);

// The nvcc to run: Config::nvcc_path (which must be an executable file: else Error(kConfigError) naming
// DG_JIT_NVCC_COMPILER), else <cuda_home>/bin/nvcc, else nvcc on PATH. Error(kNotFound) saying where it
// looked when there is none.
std::filesystem::path resolve_nvcc(const Config& config, const std::filesystem::path& cuda_home);

// "13.0.88" from `nvcc --version` output ("... release 13.0, V13.0.88"); nullopt when unrecognised.
std::optional<std::string> parse_nvcc_version(std::string_view output);

// Identity of the nvcc at `nvcc`, memoised in <state_dir>/versions.json (and in memory for the process)
// under the binary's canonical path, size and mtime: a warm start stats one file and reads one small file,
// and runs nothing. Throws Error(kNotFound) when nvcc is missing and Error(kCompileError) with the output
// when `nvcc --version` fails or says something unrecognised.
ToolchainId nvcc_identity(const std::filesystem::path& nvcc, const std::filesystem::path& state_dir);

// Identity of the NVRTC library that compile() would load, memoised like nvcc_identity under the library
// file's canonical path, size and mtime; loads NVRTC (once per process) only when no memo answers.
ToolchainId nvrtc_identity(const std::filesystem::path& cuda_home, const std::filesystem::path& state_dir);

// The libraries NVRTC is loaded from, in order: <cuda_home>/lib64/libnvrtc.so.{13,12}, then the dynamic
// loader's search for libnvrtc.so.13, libnvrtc.so.12, libnvrtc.so.
std::vector<std::string> nvrtc_library_candidates(const std::filesystem::path& cuda_home);

// Whether this process has loaded NVRTC through kiln (tests: NVCC users must never need it).
bool nvrtc_loaded() noexcept;

// The full toolkit version ("13.0.88") that an NVCC-family binary (libnvrtc, nvcc) records in its read-only
// data ("Cuda compilation tools, release 13.0, V13.0.88"): reads the ELF .rodata section only.
std::optional<std::string> embedded_toolkit_version(const std::filesystem::path& elf_file);

// Memo of toolchain versions in <state_dir>/versions.json: {"format": 1, "entries": {key: value}}.
// Lookups never throw (a missing or damaged file is an empty memo); stores are atomic (unique temporary in
// the same directory, then rename), so concurrent writers never leave a torn file: at worst one entry is
// lost and recomputed later. An empty state_dir disables the disk memo.
std::optional<std::string> memo_lookup(const std::filesystem::path& state_dir, const std::string& key);
void memo_store(const std::filesystem::path& state_dir, const std::string& key, const std::string& value);
// Forgets the in-process copy of the memo (tests: make the next lookup read versions.json as a fresh process).
void clear_process_memo();

// "<canonical path>|<size>|<mtime ns>" for a memo key; nullopt when the file cannot be stat'ed.
std::optional<std::string> file_stamp(const std::filesystem::path& file);

// A directory "<base>/<prefix>XXXXXX" created by mkdtemp (mode 0700), removed with its content on
// destruction; base defaults to $TMPDIR, else /tmp. Throws Error(kInternal) with strerror when it cannot be
// created.
class PrivateTempDir {
 public:
  explicit PrivateTempDir(const std::string& prefix, const std::filesystem::path& base = {});
  ~PrivateTempDir();
  PrivateTempDir(const PrivateTempDir&) = delete;
  PrivateTempDir& operator=(const PrivateTempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Removes the entries of `dir` whose names start with `prefix` and that were last modified more than
// `max_age_s` seconds ago: temporaries of processes killed before their destructors ran. Never throws.
void remove_stale_entries(const std::filesystem::path& dir, std::string_view prefix, int64_t max_age_s);

// Writes bytes to a file (O_CREAT|O_TRUNC, mode 0600). Throws Error(kInternal) naming the path on failure.
void write_whole_file(const std::filesystem::path& path, std::string_view bytes);
// Reads a whole file; nullopt when it cannot be opened.
std::optional<std::string> read_whole_file(const std::filesystem::path& path);

// Whether the cubin's string tables hold `symbol` as a whole NUL-terminated name.
bool cubin_has_symbol(const std::vector<uint8_t>& cubin, const std::string& symbol);

// A file name stem made of the kernel name's [A-Za-z0-9_] characters ("kernel" when none).
std::string source_stem(const std::string& kernel_name);

// The CompileError message: a summary, then the command and the full log.
std::string compile_error_message(const std::string& summary, const std::string& command, const std::string& log);

// The end of a compile, the same for both backends once `out.cubin` holds what `compiler` ("NVCC", "NVRTC")
// built for `what`: checks that the cubin defines input.kernel_name (else CompileError with the command and
// log), then fills in the log, the command, the kernel name, ptxas's resource report when `report` (printed
// on stderr too under DG_JIT_PTXAS_VERBOSE) and the time since `start`.
void finish_compile(CompiledKernel& out, const char* compiler, const std::string& what, const CompileInput& input,
                    const CompileOptions& options, bool report, std::string command, std::string log,
                    std::chrono::steady_clock::time_point start);

// Backend-specific knobs that are not configuration (tests and benchmarks).
struct NvrtcSettings {
  bool use_pch = true;  // automatic precompiled headers where NVRTC supports them (12.8+)
};

std::unique_ptr<Compiler> make_nvcc_compiler(const Config& config, const std::filesystem::path& state_dir);
std::unique_ptr<Compiler> make_nvrtc_compiler(const Config& config, const std::filesystem::path& state_dir,
                                              NvrtcSettings settings = {});

// A compiler's identity, computed on first use and then read with one atomic load. Not std::call_once: a
// failure (the tool missing) must leave the next call free to try again.
class LazyIdentity {
 public:
  template <typename Make>
  const ToolchainId& get(Make&& make) {
    if (ready_.load(std::memory_order_acquire)) return value_;
    std::lock_guard<std::mutex> lock(mutex_);
    if (!ready_.load(std::memory_order_relaxed)) {
      value_ = make();
      ready_.store(true, std::memory_order_release);
    }
    return value_;
  }

 private:
  std::mutex mutex_;
  std::atomic<bool> ready_{false};
  ToolchainId value_;
};

}  // namespace kiln::compiler::detail
