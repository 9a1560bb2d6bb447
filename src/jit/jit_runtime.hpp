// The composer: the one place that strings the pieces together.
//
//   KernelSpec --render--> source --key--> memory? --> tiers? --lock--> local tiers again? --(strict: error)-->
//     --remote claim (or wait for another machine's compile)--> compile --> publish (local + remote) --> load
//
// The tiers (cache::TieredCache) are the writable cache directory, its read-only layers and the remote
// cache. The compiler knows nothing of the cache, the cache knows bytes and not CUDA, the loader takes bytes.
// Everything here is thread-safe; a process-wide instance is built from the configuration on first use.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "cache/disk_cache.hpp"
#include "cache/tiered_cache.hpp"
#include "codegen/kernel_spec.hpp"
#include "compiler/compiler.hpp"
#include "cuda/kernel.hpp"
#include "kiln/config.hpp"

namespace kiln::jit {

struct Target {
  compiler::Arch arch;
  Backend backend = Backend::kNvcc;
};

// A compiled kernel as the cache holds it: the cubin and its metadata. Shared, immutable.
struct Binary {
  cache::EntryMetadata meta;
  std::vector<uint8_t> cubin;
  // A persistent tier holds it (it came from one, or the publish after its compile succeeded): a later process
  // finds it without compiling. False for a kernel compiled into a read-only or full cache: memory only.
  bool stored = false;
};

// `options` with the compile options a kernel spec carries itself (KernelSpec::register_usage_level): what the
// runtime compiles `spec` with, so that a tool compiling specs directly builds the very same binary.
compiler::CompileOptions with_kernel_options(compiler::CompileOptions options, const codegen::KernelSpec& spec);

// Why a kernel is built: ahead of time (`kiln compile`, precompile) always compiles a missing kernel; the
// serving path (an op about to launch) refuses to in strict mode (DG_JIT_MODE=strict).
enum class Purpose { kAheadOfTime, kServing };

struct BuildResult {
  std::string key;
  bool hit = false;          // nothing was compiled by this call
  double compile_ms = 0;     // time this call spent compiling
  std::shared_ptr<const Binary> binary;
};

class JitRuntime {
 public:
  explicit JitRuntime(Config config);
  ~JitRuntime();

  const Config& config() const { return config_; }
  // The writable cache directory (the first of DG_JIT_CACHE_DIR).
  cache::DiskCache& disk() { return tiers_->local(); }
  // Every persistent tier: the writable directory, the read-only layers, the remote cache.
  cache::TieredCache& tiers() { return *tiers_; }

  // The cache key of a spec for a target: SHA-256 over the rendered source, the content of the kiln headers
  // it includes, the compiler's identity, the binary-changing options, the arch and kiln's version.
  std::string key_of(const codegen::KernelSpec& spec, const Target& target);

  // Compile-or-fetch; needs no GPU. Compiles each key at most once across threads and processes.
  // With Purpose::kServing in strict mode, a kernel that no tier holds is Error(kNotFound) naming the kernel
  // and the command that builds it ahead of time, instead of a compile.
  BuildResult build(const codegen::KernelSpec& spec, const Target& target, Purpose purpose = Purpose::kAheadOfTime);
  // The same; `before_compile` runs (with the key locked) just before a compile, and may throw to refuse it.
  BuildResult build_with_hook(const codegen::KernelSpec& spec, const Target& target,
                              const std::function<void()>& before_compile, Purpose purpose = Purpose::kAheadOfTime);

  // The loaded kernel for `device` (built for that device's arch with the configured backend). On a miss,
  // throws Error(kCaptureError) if `stream` is being captured into a graph and a compile would be needed.
  // The returned reference lives as long as the runtime.
  const cuda::LoadedKernel& kernel(const codegen::KernelSpec& spec, int device, CUstream stream);

  // The arch a kernel for `device` is built for (sm_90a on an H100/H200), or the configured DG_JIT_ARCH (kernel()
  // refuses one whose kernels would not load on the device: Error(kConfigError), before a compile or a load).
  compiler::Arch arch_for_device(int device) const;
  // The default AOT arch: DG_JIT_ARCH, else device 0 when there is one, else sm_90a.
  compiler::Arch default_arch() const;

  uint64_t memory_hits() const { return memory_hits_.load(std::memory_order_relaxed); }

  // Declares this process's warm-up done: every later compile is counted in the shared counter
  // kCompilesAfterWarmup (and in compiles_after_warmup() for this process). Idempotent.
  void declare_warmup_done() { warmup_done_.store(true, std::memory_order_relaxed); }
  bool warmup_done() const { return warmup_done_.load(std::memory_order_relaxed); }
  uint64_t compiles_after_warmup() const { return compiles_after_warmup_.load(std::memory_order_relaxed); }

 private:
  compiler::Compiler& compiler_for(Backend backend);
  // With DG_JIT_ARCH set: Error(kConfigError) naming it and the device when `arch`'s kernels would not load there.
  void check_runs_on(const compiler::Arch& arch, int device) const;
  // The key of `source`, rendered from `spec` (which also brings the kernel's own compile options).
  std::string key_of_source(const std::string& source, const codegen::KernelSpec& spec, const Target& target);
  std::shared_ptr<const Binary> compile_and_publish(const codegen::KernelSpec& spec, const Target& target,
                                                    const std::string& source, const std::string& key,
                                                    double* compile_ms);

  [[noreturn]] void refuse_strict(const codegen::KernelSpec& spec, const Target& target, const std::string& key);

  Config config_;
  std::unique_ptr<cache::TieredCache> tiers_;
  std::mutex compilers_mutex_;
  std::unique_ptr<compiler::Compiler> compilers_[2];

  // Binaries by key (process memory tier), and in-flight builds so threads compile a key once.
  std::mutex binaries_mutex_;
  std::unordered_map<std::string, std::shared_ptr<const Binary>> binaries_;
  std::unordered_map<std::string, std::shared_ptr<std::mutex>> building_;

  // Loaded kernels by (key, device). The map's lock is held only to find or add a slot; each slot has its own
  // lock for the load itself (~0.5 ms), so threads loading different kernels do not wait for each other and
  // threads asking for the same one load it once.
  struct LoadSlot {
    std::mutex mutex;
    std::unique_ptr<cuda::LoadedKernel> kernel;
  };
  std::mutex loaded_mutex_;
  std::unordered_map<std::string, std::unique_ptr<LoadSlot>> loaded_;

  std::atomic<uint64_t> memory_hits_{0};
  std::atomic<bool> warmup_done_{false};
  std::atomic<uint64_t> compiles_after_warmup_{0};
};

// The process-wide runtime, built from kiln::config() on first use.
JitRuntime& runtime();

}  // namespace kiln::jit
