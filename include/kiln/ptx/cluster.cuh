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

}  // namespace kiln::ptx
