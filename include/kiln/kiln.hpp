// Kiln's public C++ API: JIT-compiled tensor-core kernels for Hopper, their cache, and the operations.
// Everything here is thread-safe. Errors are kiln::Error (see error.hpp) with a message that names the
// argument, what was expected and what was given.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kiln/config.hpp"
#include "kiln/error.hpp"
#include "kiln/ops.hpp"
#include "kiln/tensor.hpp"

namespace kiln {

const char* version() noexcept;

// ---- Ahead-of-time compilation (no GPU needed) ---------------------------------------------------------

// An inclusive range lo..hi of a problem parameter (m=1..16384 on the command line).
struct ParamRange {
  int64_t lo = 0;
  int64_t hi = 0;
};

struct CompileRequest {
  std::string op;                      // "per_token_cast_to_fp8"
  std::map<std::string, int64_t> problem;  // {"m": 4096, "k": 7168}
  std::optional<std::string> arch;     // "sm_90a"; default: DG_JIT_ARCH, else the current GPU, else sm_90a
  std::optional<Backend> backend;      // default: the configured one (DG_JIT_USE_NVRTC)
  // Parameters given as ranges instead ({"m", {1, 16384}}): the kernels every value in the range needs. Only
  // parameters that accept a range (list_ops() says which) may be here, and not also in `problem`.
  std::map<std::string, ParamRange> ranges = {};
};

struct KernelReport {
  std::string op;
  std::string spec;        // "k=7168 threads=256"
  std::string key;         // cache key
  std::string arch;        // "sm_90a"
  Backend backend = Backend::kNvcc;
  bool hit = false;        // found in the memory or disk cache: nothing compiled
  double compile_ms = 0;   // time spent compiling now (0 on a hit)
  uint64_t cubin_bytes = 0;
  std::string kernel_name;
  // When the request has a range: the ranged parameter and the inclusive pieces of the range this kernel
  // serves, in increasing order (a kernel may serve several disjoint pieces).
  std::string range_param;
  std::vector<std::pair<int64_t, int64_t>> ranges;
  bool cached = false;     // plan(): the disk cache holds an entry for the key; compile/precompile: == hit
  std::string detail;      // the op's description of the kernel (tile, stages, threads...); may be empty
};

// Compiles (or finds in the cache) every distinct kernel the problem needs. Throws Error(kNotFound) for an
// unknown op, Error(kValueError) for a bad problem, CompileError when a compile fails.
std::vector<KernelReport> compile(const CompileRequest& request);

// The kernels compile() would build for the same request, found without compiling or loading anything:
// op, spec, key, arch, backend, kernel_name, range_param, ranges, detail and cached (whether the disk cache
// holds a valid entry for the key: a read, counted neither as a hit nor a miss) are filled; hit,
// compile_ms and cubin_bytes are left at their defaults. Needs no GPU (the compiler's version, part of every key, is learnt once and
// memoised). Throws what compile() throws for a bad request.
std::vector<KernelReport> plan(const CompileRequest& request);
// The same for several requests at once (a serving warm-up: one per (n, k)), each distinct kernel once:
// a kernel two requests need is listed once, with both requests' pieces of the range. `cached` is filled.
std::vector<KernelReport> plan(const std::vector<CompileRequest>& requests);

// Ahead-of-time compilation of everything plan() lists, in parallel (no GPU needed).
struct PrecompileProgress {
  size_t done = 0;     // kernels finished so far, this one included
  size_t total = 0;    // kernels to build
  const KernelReport* kernel = nullptr;  // the one just finished (hit / compile_ms / cubin_bytes filled)
  std::string error;   // why it failed; empty when it was built or found
};
struct PrecompileOptions {
  int jobs = 0;  // compiles at once; 0: the machine's hardware threads
  // Called once per kernel as it finishes, from the worker threads but never concurrently.
  std::function<void(const PrecompileProgress&)> on_progress;
};
// Builds (or finds in the cache) every kernel plan(requests) lists, `jobs` at a time. Every kernel is
// attempted; if any failed, the first failure is thrown afterwards (CompileError for a compile), the others
// having been cached. Throws what plan() throws for a bad request, before compiling anything.
std::vector<KernelReport> precompile(const std::vector<CompileRequest>& requests, const PrecompileOptions& options = {});
std::vector<KernelReport> precompile(const CompileRequest& request, const PrecompileOptions& options = {});

struct OpInfo {
  std::string name;
  std::string summary;
  std::vector<std::pair<std::string, std::string>> params;  // (name, doc)
};
std::vector<OpInfo> list_ops();

// ---- The cache -------------------------------------------------------------------------------------------

struct CacheEntryInfo {
  std::string key, op, spec, arch, backend, compiler, kernel_name;
  uint64_t bytes = 0;
  double compile_ms = 0;
  int64_t created_unix = 0;
  int64_t last_use_unix = 0;
};

struct CacheStats {
  std::filesystem::path directory;
  bool writable = false;
  uint64_t entries = 0, bytes = 0, hits = 0, misses = 0, compiles = 0, corrupt = 0;
  double compile_seconds = 0;
  // This process only: kernels served from memory, and their count of launches' lookups.
  uint64_t memory_hits = 0;
};

struct CacheVerifyReport {
  uint64_t checked = 0, corrupt = 0, removed = 0;
};

std::vector<CacheEntryInfo> cache_list();
CacheStats cache_stats();
CacheVerifyReport cache_verify();
uint64_t cache_clear();  // entries removed

// ---- Devices -------------------------------------------------------------------------------------------

struct DeviceSummary {
  int ordinal = 0;
  std::string name;
  std::string arch;  // the target kiln builds for it: "sm_90a" on an H100/H200
  int sm_count = 0;
  int64_t memory_bytes = 0;
};
// The CUDA devices present; empty (never an error) on a machine without a GPU or driver.
std::vector<DeviceSummary> devices();

// ---- Diagnostics -----------------------------------------------------------------------------------------

struct DoctorCheck {
  std::string what;     // "NVRTC"
  std::string status;   // "ok", "warning" or "error"
  std::string detail;   // "13.0 (libnvrtc.so.13)"
  std::string advice;   // what to do when not ok
};
std::vector<DoctorCheck> doctor();

}  // namespace kiln
