// Ordering primitives: proxy fences between ordinary memory accesses and the async proxy (TMA, WGMMA),
// the fence that publishes mbarrier initialisation, named CTA barriers for subsets of warps, and the
// election of one lane of a warp.
#pragma once

#include "kiln/ptx/types.cuh"

namespace kiln::ptx {

// fence.proxy.async.shared::cta: makes this thread's ordinary (generic-proxy) shared-memory writes visible to
// later async-proxy operations (a TMA store reading them, WGMMA reading an operand), and vice versa. Each
// writing thread fences, then the writers synchronise, then one thread issues the async operation.
__device__ __forceinline__ void fence_proxy_async_shared_cta() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// fence.mbarrier_init.release.cluster: publishes earlier mbarrier.init operations to the whole cluster
// (including the async proxy that TMA completes transactions through). Follow with a CTA or cluster barrier.
__device__ __forceinline__ void fence_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// bar.sync id, count: a barrier among `count` threads (a multiple of 32) of the CTA that use the same id
// 1..15 (0 is __syncthreads's). Lets the math warpgroups synchronise without the producer.
__device__ __forceinline__ void named_barrier_sync(u32 id, u32 count) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}

// elect.sync _|p, 0xffffffff: true in exactly one active lane of the (converged) warp. Cheaper and clearer
// than comparing lane ids, and it keeps the warp converged for the compiler.
__device__ __forceinline__ bool elect_one_sync() {
  u32 elected;
  asm volatile(
      "{\n.reg .pred p;\n"
      "elect.sync _|p, 0xffffffff;\n"
      "selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(elected));
  return elected != 0;
}

}  // namespace kiln::ptx
