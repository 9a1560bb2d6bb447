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
  // The span of the range this kernel serves: the lowest and highest value of `ranges` ({0, 0} when it is empty).
  std::pair<int64_t, int64_t> range_span() const;
  bool cached = false;     // plan(): a local cache tier holds an entry for the key; compile/precompile: == hit
  std::string detail;      // the op's description of the kernel (tile, stages, threads...); may be empty
};

// A problem parameter that mirrors a process-wide setting (the GEMMs' num_sms, as set_num_sms, and their overrides,
// as set_fp8_gemm_overrides / set_bf16_gemm_overrides) takes that setting when the request leaves it out, so the
// kernels below are the ones this process's launches use; given, it overrides the setting.
//
// Compiles (or finds in the cache) every distinct kernel the problem needs. Throws Error(kNotFound) for an
// unknown op, Error(kValueError) for a bad problem, CompileError when a compile fails.
std::vector<KernelReport> compile(const CompileRequest& request);

// The kernels compile() would build for the same request, found without compiling or loading anything:
// op, spec, key, arch, backend, kernel_name, range_param, ranges, detail and cached (whether the cache
// directory or a read-only layer holds a valid entry for the key: a read, counted neither as a hit nor a
// miss, never a remote round trip) are filled; hit,
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
  // Called before each kernel is started, from the worker threads (the calling thread among them), possibly at
  // once. What it throws stops the precompile: no further kernel is started, those already being built finish
  // (and are cached), and precompile rethrows it. For a Ctrl-C seen by an embedding interpreter (the Python
  // package checks for signals here).
  std::function<void()> check_stop;
};
// Builds (or finds in the cache) every kernel plan(requests) lists, `jobs` at a time. Every kernel is
// attempted (unless check_stop stops it); if any failed, the first failure is thrown afterwards (CompileError for
// a compile), the others having been cached. Throws what plan() throws for a bad request, before compiling anything.
std::vector<KernelReport> precompile(const std::vector<CompileRequest>& requests, const PrecompileOptions& options = {});
std::vector<KernelReport> precompile(const CompileRequest& request, const PrecompileOptions& options = {});

// Kills (SIGKILL) every compiler child process this process is running, with whatever they started (each runs
// in a process group of its own, so a Ctrl-C on the terminal does not reach it). Async-signal-safe: for a
// SIGINT/SIGTERM handler, so that a compile or precompile that is stopped leaves no compiler behind. The
// compiles it ends fail; their temporaries are swept from the cache later. The `kiln` command does this.
void kill_compiler_processes() noexcept;

struct OpInfo {
  std::string name;
  std::string summary;
  std::vector<std::pair<std::string, std::string>> params;  // (name, doc)
  std::string targets;  // the archs its kernels are written for: "sm_90a only (they use WGMMA, ...)"
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

// One cache tier (docs/CACHE.md): the writable directory, a read-only layer, or the remote cache.
struct CacheTierStats {
  std::string name;      // "local", "layer 1", "remote"
  std::string kind;      // "local", "layer" or "remote"
  std::string location;  // a directory, or redis://host:port/db (never a password)
  std::string state;     // "ok", "read-only layer", "unavailable: ...", "down: ...", "ok (PING 0.20 ms)"
  bool writable = false;
  bool available = true;
  bool sized = false;    // entries and bytes were counted (local directories)
  uint64_t entries = 0, bytes = 0;
  // Shared by this machine's processes: hits served (layers: all layers together), and for the remote tier
  // its misses, bad values found, failures (each marks it down for a process) and publishes.
  uint64_t hits = 0, misses = 0, corrupt = 0, errors = 0, publishes = 0;
};

struct CacheStats {
  std::filesystem::path directory;
  bool writable = false;
  uint64_t entries = 0, bytes = 0, hits = 0, misses = 0, compiles = 0, corrupt = 0;
  double compile_seconds = 0;
  // This process only: kernels served from memory, and their count of launches' lookups.
  uint64_t memory_hits = 0;
  // Tiers and policies (shared counters unless said otherwise).
  std::string mode;                        // "normal" or "strict" (DG_JIT_MODE)
  uint64_t max_bytes = 0;                  // DG_JIT_CACHE_MAX_BYTES, 0 for no bound
  uint64_t publishes = 0;                  // entries the writable directory gained
  uint64_t evicted_entries = 0, evicted_bytes = 0;
  uint64_t layer_hits = 0, remote_hits = 0;  // of `hits`
  uint64_t compiles_after_warmup = 0;      // compiles by processes after declare_warmup_done()
  bool warmup_done = false;                // this process declared its warm-up done
  uint64_t process_compiles_after_warmup = 0;  // this process only
  std::vector<CacheTierStats> tiers;       // in search order
};

struct CacheVerifyReport {
  uint64_t checked = 0, corrupt = 0, removed = 0;
  std::vector<std::string> problems;  // one line per bad entry: "<file>: <why it was rejected>"
};

// The usable entries of the writable directory, most recently used first. With `unreadable`, also the count of entry
// files it skipped because they cannot be read or fail their checks (cache_verify names and removes them). Like
// every cache call, throws Error(kConfigError) when the directory is one kiln refuses: owned by another user, or
// writable by its group or others (docs/CACHE.md, "Who may write the cache").
std::vector<CacheEntryInfo> cache_list(uint64_t* unreadable = nullptr);
CacheStats cache_stats();
CacheVerifyReport cache_verify();
uint64_t cache_clear();  // entries removed

// Declares this process's warm-up done: every compile after it is counted (CacheStats::compiles_after_warmup,
// `kiln cache stats`), so a deployment can see kernels its warm-up or precompile step missed. Idempotent.
void declare_warmup_done();

struct CachePruneReport {
  uint64_t removed_entries = 0, removed_bytes = 0;  // least recently used first
  uint64_t remaining_entries = 0, remaining_bytes = 0;
  uint64_t temporaries_removed = 0;  // strays of killed processes
};
// Evicts least-recently-used entries of the writable cache directory until it holds at most max_bytes
// (entries and their dumps), waiting for a cleaner already running. Throws Error(kCacheError) when the
// directory cannot be written.
CachePruneReport cache_prune(uint64_t max_bytes);

struct CacheExportOptions {
  std::string op;    // only this op's entries; empty: all
  std::string arch;  // only this arch's ("sm_90a"); empty: all
};
struct CacheExportReport {
  std::filesystem::path file;
  uint64_t bytes = 0;
  std::vector<CacheEntryInfo> entries;  // metadata of each entry written (bytes and last use are not set)
};
// Writes the selected entries of every local tier (the writable directory, then the read-only layers) into
// one pack file (format in docs/CACHE.md), atomically. Throws Error(kCacheError) when it cannot be written.
CacheExportReport cache_export(const std::filesystem::path& file, const CacheExportOptions& options = {});

struct CacheImportItem {
  std::string key, op, spec, arch;
  std::string outcome;  // "imported", "present" (already cached) or "rejected"
  std::string reason;   // why it was rejected
};
struct CacheImportReport {
  uint64_t imported = 0, present = 0, rejected = 0;
  std::vector<CacheImportItem> items;
};
// Verifies every entry of a pack and adds the good ones to the writable cache directory; idempotent. A
// damaged entry is rejected by name and the others imported. Throws Error(kCacheError) when the file is not a
// readable pack or the cache cannot be written.
CacheImportReport cache_import(const std::filesystem::path& file);

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
