// TMA (the tensor memory accelerator, sm_90): bulk tensor copies between global memory and shared memory,
// described by a CUtensorMap the host encodes (passed to the kernel inside a `__grid_constant__` parameter
// struct, so its address is a generic address into parameter space, as the instructions require). Loads
// complete on an mbarrier (complete_tx::bytes); stores and reductions complete in bulk groups.
#pragma once

#include "kiln/ptx/cache_policy.cuh"
#include "kiln/ptx/types.cuh"

namespace kiln::ptx {

// prefetch.tensormap: brings a tensor map into the descriptor cache ahead of its first use.
__device__ __forceinline__ void tma_prefetch_descriptor(const void* tensor_map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(tensor_map) : "memory");
}

// cp.async.bulk.prefetch.tensor.{2d,3d}.L2.global.tile: the box at the coordinates (c0 innermost) brought into
// L2 ahead of a later access; nothing signals its completion (a hint: out-of-bounds parts are ignored).
__device__ __forceinline__ void tma_prefetch_l2_2d(const void* tensor_map, i32 c0, i32 c1) {
  asm volatile("cp.async.bulk.prefetch.tensor.2d.L2.global.tile [%0, {%1, %2}];\n" ::"l"(tensor_map), "r"(c0),
               "r"(c1)
               : "memory");
}
__device__ __forceinline__ void tma_prefetch_l2_3d(const void* tensor_map, i32 c0, i32 c1, i32 c2) {
  asm volatile("cp.async.bulk.prefetch.tensor.3d.L2.global.tile [%0, {%1, %2, %3}];\n" ::"l"(tensor_map), "r"(c0),
               "r"(c1), "r"(c2)
               : "memory");
}

// cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes: the box at coordinates
// (c0 innermost, c1) of `tensor_map` into `smem_dst`, signalling `bar` with the bytes delivered (the full box:
// out-of-bounds elements are filled with zeros and counted). `smem_dst` 128-byte aligned (1024 with
// 128-byte swizzle, so the swizzle pattern matches the WGMMA descriptor's).
__device__ __forceinline__ void tma_load_2d(void* smem_dst, const void* tensor_map, u64* bar, i32 c0, i32 c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::
          "r"(static_cast<u32>(__cvta_generic_to_shared(smem_dst))),
      "l"(tensor_map), "r"(c0), "r"(c1), "r"(static_cast<u32>(__cvta_generic_to_shared(bar)))
      : "memory");
}

// The same with an L2 cache policy (.L2::cache_hint; a createpolicy value from cache_policy.cuh).
__device__ __forceinline__ void tma_load_2d_hint(void* smem_dst, const void* tensor_map, u64* bar, i32 c0, i32 c1,
                                                 u64 policy) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
      " [%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(static_cast<u32>(__cvta_generic_to_shared(smem_dst))),
      "l"(tensor_map), "r"(c0), "r"(c1), "r"(static_cast<u32>(__cvta_generic_to_shared(bar))), "l"(policy)
      : "memory");
}

// The same through a 3-D map (coordinates innermost first): the box at (c0, c1) of plane c2.
__device__ __forceinline__ void tma_load_3d_hint(void* smem_dst, const void* tensor_map, u64* bar, i32 c0, i32 c1,
                                                 i32 c2, u64 policy) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
      " [%0], [%1, {%2, %3, %4}], [%5], %6;\n" ::"r"(static_cast<u32>(__cvta_generic_to_shared(smem_dst))),
      "l"(tensor_map), "r"(c0), "r"(c1), "r"(c2), "r"(static_cast<u32>(__cvta_generic_to_shared(bar))), "l"(policy)
      : "memory");
}

// The same through a 5-D map (a 2-D tensor viewed in five dimensions, so that the box lands in another order):
// the box at (c0, 0, 0, 0, c4).
__device__ __forceinline__ void tma_load_5d_hint(void* smem_dst, const void* tensor_map, u64* bar, i32 c0, i32 c4,
                                                 u64 policy) {
  asm volatile(
      "cp.async.bulk.tensor.5d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
      " [%0], [%1, {%2, %3, %3, %3, %4}], [%5], %6;\n" ::"r"(static_cast<u32>(__cvta_generic_to_shared(smem_dst))),
      "l"(tensor_map), "r"(c0), "r"(0), "r"(c4), "r"(static_cast<u32>(__cvta_generic_to_shared(bar))), "l"(policy)
      : "memory");
}

// cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster: one load
// delivered to the same shared-memory offset, and signalled on the same barrier offset, in every CTA of the
// cluster whose bit is set in `cta_mask`.
__device__ __forceinline__ void tma_load_2d_multicast(void* smem_dst, const void* tensor_map, u64* bar, i32 c0,
                                                      i32 c1, u16 cta_mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(static_cast<u32>(__cvta_generic_to_shared(smem_dst))),
      "l"(tensor_map), "r"(c0), "r"(c1), "r"(static_cast<u32>(__cvta_generic_to_shared(bar))), "h"(cta_mask)
      : "memory");
}

// cp.async.bulk.tensor.2d.global.shared::cta.bulk_group: stores the box at (c0, c1) from `smem_src`; the
// elements outside the tensor are not written. The shared memory must have been made visible to the async
// proxy first (fence_proxy_async_shared_cta after the writes, then a barrier among the writers).
__device__ __forceinline__ void tma_store_2d(const void* tensor_map, const void* smem_src, i32 c0, i32 c1) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\n" ::"l"(tensor_map),
               "r"(static_cast<u32>(__cvta_generic_to_shared(smem_src))), "r"(c0), "r"(c1)
               : "memory");
}

// The same over a 3-D map (coordinates innermost first): the box at (c0, c1) of plane c2.
__device__ __forceinline__ void tma_store_3d(const void* tensor_map, const void* smem_src, i32 c0, i32 c1, i32 c2) {
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];\n" ::"l"(tensor_map),
               "r"(static_cast<u32>(__cvta_generic_to_shared(smem_src))), "r"(c0), "r"(c1), "r"(c2)
               : "memory");
}

// cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.bulk_group: element-wise D[box] += smem (the
// accumulating, FP32-output form of a GEMM).
__device__ __forceinline__ void tma_reduce_add_2d(const void* tensor_map, const void* smem_src, i32 c0, i32 c1) {
  asm volatile(
      "cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.bulk_group [%0, {%2, %3}], [%1];\n" ::"l"(tensor_map),
      "r"(static_cast<u32>(__cvta_generic_to_shared(smem_src))), "r"(c0), "r"(c1)
      : "memory");
}

// The same over a 3-D map (coordinates innermost first): D[c2][box at (c0, c1)] += smem.
__device__ __forceinline__ void tma_reduce_add_3d(const void* tensor_map, const void* smem_src, i32 c0, i32 c1,
                                                  i32 c2) {
  asm volatile(
      "cp.reduce.async.bulk.tensor.3d.global.shared::cta.add.bulk_group [%0, {%2, %3, %4}], [%1];\n" ::"l"(tensor_map),
      "r"(static_cast<u32>(__cvta_generic_to_shared(smem_src))), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}

// cp.async.bulk.commit_group: closes the bulk stores issued since the last commit into one group.
__device__ __forceinline__ void tma_store_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }

// cp.async.bulk.wait_group.read N: waits until at most N groups still read their shared-memory source, so
// the staging buffer may be overwritten (the global writes may still be in flight).
template <int kPending>
__device__ __forceinline__ void tma_store_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(kPending) : "memory");
}

// cp.async.bulk.wait_group N: waits until at most N groups are incomplete, global writes included.
template <int kPending>
__device__ __forceinline__ void tma_store_wait() {
  asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(kPending) : "memory");
}

}  // namespace kiln::ptx
