// Kiln's public C++ API: JIT-compiled tensor-core kernels for Hopper, their cache, and the operations.
// Everything here is thread-safe. Errors are kiln::Error (see error.hpp) with a message that names the
// argument, what was expected and what was given.
#pragma once

#include <cstdint>
#include <filesystem>
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

struct CompileRequest {
  std::string op;                      // "per_token_cast_to_fp8"
  std::map<std::string, int64_t> problem;  // {"m": 4096, "k": 7168}
  std::optional<std::string> arch;     // "sm_90a"; default: DG_JIT_ARCH, else the current GPU, else sm_90a
  std::optional<Backend> backend;      // default: the configured one (DG_JIT_USE_NVRTC)
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
};

// Compiles (or finds in the cache) every distinct kernel the problem needs. Throws Error(kNotFound) for an
// unknown op, Error(kValueError) for a bad problem, CompileError when a compile fails.
std::vector<KernelReport> compile(const CompileRequest& request);

// The kernels compile() would build for the same request, found without compiling, loading or reading a
// cache entry: op, spec, key, arch, backend and kernel_name are filled; hit, compile_ms and cubin_bytes are
// left at their defaults. Needs no GPU (the compiler's version, part of every key, is learnt once and
// memoised). Throws what compile() throws for a bad request.
std::vector<KernelReport> plan(const CompileRequest& request);

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
