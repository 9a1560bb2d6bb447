// The pure parts of a launch, kept apart so they are tested without a GPU: the launch attributes a
// LaunchConfig asks for, and the per-kernel "largest dynamic shared memory granted so far" mark.
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

#include "cuda/kernel.hpp"

namespace kiln::cuda::detail {

// At most a cluster dimension and programmatic stream serialization.
inline constexpr unsigned kMaxLaunchAttributes = 2;

inline bool has_cluster(const LaunchConfig& c) { return c.cluster[0] * c.cluster[1] * c.cluster[2] != 1; }
inline uint32_t cluster_size(const LaunchConfig& c) { return c.cluster[0] * c.cluster[1] * c.cluster[2]; }
// Clusters above 8 CTAs (Hopper allows 16) are "non-portable" and must be allowed per kernel.
inline bool needs_non_portable_cluster(const LaunchConfig& c) { return cluster_size(c) > 8; }

// Fills the caller's (stack) array; returns how many attributes were written. Each launch builds its own:
// a shared attribute array would race between threads (DeepGEMM's static array does).
inline unsigned fill_attributes(const LaunchConfig& c, CUlaunchAttribute (&out)[kMaxLaunchAttributes]) {
  unsigned n = 0;
  if (has_cluster(c)) {
    out[n] = CUlaunchAttribute{};
    out[n].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    out[n].value.clusterDim.x = c.cluster[0];
    out[n].value.clusterDim.y = c.cluster[1];
    out[n].value.clusterDim.z = c.cluster[2];
    ++n;
  }
  if (c.pdl) {
    out[n] = CUlaunchAttribute{};
    out[n].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    out[n].value.programmaticStreamSerializationAllowed = 1;
    ++n;
  }
  return n;
}

inline unsigned fill_attributes(const LaunchConfig& c, cudaLaunchAttribute (&out)[kMaxLaunchAttributes]) {
  unsigned n = 0;
  if (has_cluster(c)) {
    out[n] = cudaLaunchAttribute{};
    out[n].id = cudaLaunchAttributeClusterDimension;
    out[n].val.clusterDim.x = c.cluster[0];
    out[n].val.clusterDim.y = c.cluster[1];
    out[n].val.clusterDim.z = c.cluster[2];
    ++n;
  }
  if (c.pdl) {
    out[n] = cudaLaunchAttribute{};
    out[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    out[n].val.programmaticStreamSerializationAllowed = 1;
    ++n;
  }
  return n;
}

// "grid (64,1,1), block (128,1,1), cluster (2,1,1), 102400 bytes of dynamic shared memory, PDL on"
std::string describe(const LaunchConfig& c);

// The largest value a per-kernel attribute has been raised to. Launches read it without a lock (one
// acquire load); the first launch that needs more takes the lock, looks again, sets the attribute and only
// then publishes the new mark, so no launch can proceed on a mark whose attribute is not yet set, and a
// smaller concurrent request can never lower what a larger one set.
class RaisedMark {
 public:
  bool covers(uint32_t value) const { return value <= mark_.load(std::memory_order_acquire); }
  uint32_t value() const { return mark_.load(std::memory_order_acquire); }

  // Calls set(value) (which may throw; then nothing changes) unless a mark >= value is already published.
  // Returns whether set was called.
  template <typename Set>
  bool raise(uint32_t value, Set&& set) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (value <= mark_.load(std::memory_order_relaxed)) return false;
    set(value);
    mark_.store(value, std::memory_order_release);
    return true;
  }

 private:
  std::atomic<uint32_t> mark_{0};
  std::mutex mutex_;
};

}  // namespace kiln::cuda::detail
