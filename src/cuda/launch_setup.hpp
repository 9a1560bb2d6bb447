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
// a shared attribute array would race between threads (DeepGEMM's static array does). One body serves the
// driver's CUlaunchAttribute and the runtime's cudaLaunchAttribute: they differ only in the names of the
// ids and of the value union (`value` / `val`), which the two overloads below pass in.
template <typename Attribute, typename Id, auto kValue>
unsigned fill_attributes(const LaunchConfig& c, Attribute (&out)[kMaxLaunchAttributes], Id cluster_id, Id pdl_id) {
  unsigned n = 0;
  if (has_cluster(c)) {
    out[n] = Attribute{};
    out[n].id = cluster_id;
    (out[n].*kValue).clusterDim.x = c.cluster[0];
    (out[n].*kValue).clusterDim.y = c.cluster[1];
    (out[n].*kValue).clusterDim.z = c.cluster[2];
    ++n;
  }
  if (c.pdl) {
    out[n] = Attribute{};
    out[n].id = pdl_id;
    (out[n].*kValue).programmaticStreamSerializationAllowed = 1;
    ++n;
  }
  return n;
}

inline unsigned fill_attributes(const LaunchConfig& c, CUlaunchAttribute (&out)[kMaxLaunchAttributes]) {
  return fill_attributes<CUlaunchAttribute, CUlaunchAttributeID, &CUlaunchAttribute::value>(
      c, out, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION);
}

inline unsigned fill_attributes(const LaunchConfig& c, cudaLaunchAttribute (&out)[kMaxLaunchAttributes]) {
  return fill_attributes<cudaLaunchAttribute, cudaLaunchAttributeID, &cudaLaunchAttribute::val>(
      c, out, cudaLaunchAttributeClusterDimension, cudaLaunchAttributeProgrammaticStreamSerialization);
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
