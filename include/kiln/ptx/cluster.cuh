// Thread-block clusters (sm_90): this CTA's rank and the cluster size, and the cluster-wide barrier that
// must separate the initialisation of barriers other CTAs signal (multicast TMA) from their first use, and
// the last remote access from a CTA's exit.
#pragma once

#include "kiln/ptx/types.cuh"

namespace kiln::ptx {

// mov.u32 %r, %cluster_ctarank: this CTA's rank within its cluster (0 without a cluster).
__device__ __forceinline__ u32 cluster_cta_rank() {
  u32 r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}

// mov.u32 %r, %cluster_nctarank: CTAs in this cluster (1 without a cluster).
__device__ __forceinline__ u32 cluster_num_ctas() {
  u32 r;
  asm volatile("mov.u32 %0, %%cluster_nctarank;\n" : "=r"(r));
  return r;
}

// barrier.cluster.arrive.release.aligned: this thread's arrival; its earlier writes are released to the
// cluster. Every thread of every CTA arrives once per phase.
__device__ __forceinline__ void cluster_arrive() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
}

// barrier.cluster.wait.acquire.aligned: waits until every thread of the cluster has arrived.
__device__ __forceinline__ void cluster_wait() { asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory"); }

// Both halves: a full cluster barrier.
__device__ __forceinline__ void cluster_sync() {
  cluster_arrive();
  cluster_wait();
}

// mapa.shared::cluster.u32: the shared::cluster address of the variable at `local`'s offset in CTA `cta_rank`
// of the cluster (for st.async and remote mbarrier operations).
__device__ __forceinline__ u32 map_shared_to_rank(const void* local, u32 cta_rank) {
  u32 remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n"
               : "=r"(remote)
               : "r"(static_cast<u32>(__cvta_generic_to_shared(local))), "r"(cta_rank));
  return remote;
}

// st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32: stores 16 bytes into another CTA's shared
// memory (`remote`, from map_shared_to_rank) and counts them on that CTA's mbarrier `remote_bar` (also a
// mapped address), which its consumer armed with the bytes to expect. No fence is needed on either side: the
// consumer's wait on the barrier makes the data visible.
__device__ __forceinline__ void st_async_v4(u32 remote, float a, float b, float c, float d, u32 remote_bar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%0], {%1, %2, %3, %4}, [%5];\n" ::"r"(
                   remote),
               "f"(a), "f"(b), "f"(c), "f"(d), "r"(remote_bar)
               : "memory");
}

}  // namespace kiln::ptx
