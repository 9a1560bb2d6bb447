// The composer: the one place that strings the pieces together.
//
//   KernelSpec --render--> source --key--> memory? --> disk? --lock--> disk again? --compile--> publish --> load
//
// The compiler knows nothing of the cache, the cache knows bytes and not CUDA, the loader takes bytes.
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
};

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
  cache::DiskCache& disk() { return *disk_; }

  // The cache key of a spec for a target: SHA-256 over the rendered source, the content of the kiln headers
  // it includes, the compiler's identity, the binary-changing options, the arch and kiln's version.
  std::string key_of(const codegen::KernelSpec& spec, const Target& target);

  // Compile-or-fetch; needs no GPU. Compiles each key at most once across threads and processes.
  BuildResult build(const codegen::KernelSpec& spec, const Target& target);
  // The same; `before_compile` runs (with the key locked) just before a compile, and may throw to refuse it.
  BuildResult build_with_hook(const codegen::KernelSpec& spec, const Target& target,
                              const std::function<void()>& before_compile);

  // The loaded kernel for `device` (built for that device's arch with the configured backend). On a miss,
  // throws Error(kCaptureError) if `stream` is being captured into a graph and a compile would be needed.
  // The returned reference lives as long as the runtime.
  const cuda::LoadedKernel& kernel(const codegen::KernelSpec& spec, int device, CUstream stream);

  // The arch a kernel for `device` is built for (sm_90a on an H100/H200), or the configured DG_JIT_ARCH.
  compiler::Arch arch_for_device(int device) const;
  // The default AOT arch: DG_JIT_ARCH, else device 0 when there is one, else sm_90a.
  compiler::Arch default_arch() const;

  uint64_t memory_hits() const { return memory_hits_.load(std::memory_order_relaxed); }

 private:
  compiler::Compiler& compiler_for(Backend backend);
  std::string key_of_source(const std::string& source, const Target& target);
  std::shared_ptr<const Binary> compile_and_publish(const codegen::KernelSpec& spec, const Target& target,
                                                    const std::string& source, const std::string& key,
                                                    double* compile_ms);

  Config config_;
  std::unique_ptr<cache::DiskCache> disk_;
  std::mutex compilers_mutex_;
  std::unique_ptr<compiler::Compiler> compilers_[2];

  // Binaries by key (process memory tier), and in-flight builds so threads compile a key once.
  std::mutex binaries_mutex_;
  std::unordered_map<std::string, std::shared_ptr<const Binary>> binaries_;
  std::unordered_map<std::string, std::shared_ptr<std::mutex>> building_;

  // Loaded kernels by (key, device).
  std::mutex loaded_mutex_;
  std::unordered_map<std::string, std::unique_ptr<cuda::LoadedKernel>> loaded_;

  std::atomic<uint64_t> memory_hits_{0};
};

// The process-wide runtime, built from kiln::config() on first use.
JitRuntime& runtime();

}  // namespace kiln::jit
