// mbarrier: the shared-memory barriers that pipeline TMA producers and WGMMA consumers. A barrier counts
// arrivals and, for TMA, transaction bytes; its phase completes when both reach zero, and waiters watch the
// parity of the phase. All barriers here live in the CTA's shared memory (8 bytes, 8-byte aligned).
#pragma once

#include "kiln/ptx/types.cuh"

namespace kiln::ptx {

__device__ __forceinline__ u32 mbarrier_addr(const u64* bar) {
  return static_cast<u32>(__cvta_generic_to_shared(bar));
}

// mbarrier.init.shared::cta.b64: `count` arrivals complete each phase. Make the initialisation visible to
// the async proxy (fence_mbarrier_init in fence.cuh) and to other threads (a CTA barrier) before use.
__device__ __forceinline__ void mbarrier_init(u64* bar, u32 count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(mbarrier_addr(bar)), "r"(count) : "memory");
}

// mbarrier.arrive.shared::cta.b64: one arrival (release semantics at CTA scope). By pointer, or by the
// barrier's shared-window address.
__device__ __forceinline__ void mbarrier_arrive(u32 bar_addr) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar_addr) : "memory");
}
__device__ __forceinline__ void mbarrier_arrive(u64* bar) { mbarrier_arrive(mbarrier_addr(bar)); }

// mbarrier.arrive.expect_tx.shared::cta.b64: one arrival, and `bytes` more transaction bytes expected in
// this phase (the bytes the TMA loads issued next will deliver with complete_tx).
__device__ __forceinline__ void mbarrier_arrive_expect_tx(u64* bar, u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(mbarrier_addr(bar)), "r"(bytes)
               : "memory");
}

// mbarrier.expect_tx.relaxed.cta.shared::cta.b64: expect `bytes` more transaction bytes, no arrival.
__device__ __forceinline__ void mbarrier_expect_tx(u64* bar, u32 bytes) {
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" ::"r"(mbarrier_addr(bar)),
               "r"(bytes)
               : "memory");
}

// mbarrier.test_wait.parity.shared::cta.b64: whether the phase with parity `parity` has completed, now, without
// blocking (acquire semantics when true, like the wait below; a fresh barrier is in phase 0, so parity 1 reads
// as completed at once: the "previous phase" trick that lets a producer pass its first round of empty-slot
// waits). Lets a consumer look at its next slot early and do other work while the answer comes back, instead
// of waiting at the point of use.
__device__ __forceinline__ bool mbarrier_test_wait_parity(u32 bar_addr, u32 parity) {
  u32 done;
  asm volatile(
      "{\n.reg .pred p;\n"
      "mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(bar_addr), "r"(parity)
      : "memory");
  return done != 0;
}
__device__ __forceinline__ bool mbarrier_test_wait_parity(u64* bar, u32 parity) {
  return mbarrier_test_wait_parity(mbarrier_addr(bar), parity);
}

// Spins on mbarrier.try_wait.parity until the phase with parity `parity` has completed (acquire semantics:
// data the phase guarded, such as a TMA load, is visible afterwards).
__device__ __forceinline__ void mbarrier_wait_parity(u32 bar_addr, u32 parity) {
  asm volatile(
      "{\n.reg .pred p;\n"
      "KILN_MBAR_WAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      "@!p bra KILN_MBAR_WAIT_%=;\n}\n" ::"r"(bar_addr),
      "r"(parity)
      : "memory");
}
__device__ __forceinline__ void mbarrier_wait_parity(u64* bar, u32 parity) {
  mbarrier_wait_parity(mbarrier_addr(bar), parity);
}

// The same wait with a suspend-time hint (the 10 ms CUTLASS uses): ptxas then emits TRYWAIT, NANOSLEEP.SYNCS and a
// re-check, so a thread whose phase has not completed sleeps until the barrier's unit wakes it instead of
// re-issuing try_wait in a loop. For waits that usually last long (a producer waiting for a slot to be
// released): measured 0.2-0.8 % faster on the 256x128 kernels than the plain loop above. The math warps keep
// the plain loop: their waits are short when they happen at all, and there the hint measured level to slower.
__device__ __forceinline__ void mbarrier_wait_parity_sleep(u64* bar, u32 parity) {
  asm volatile(
      "{\n.reg .pred p;\n"
      "KILN_MBAR_SLEEP_WAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1, %2;\n"
      "@!p bra KILN_MBAR_SLEEP_WAIT_%=;\n}\n" ::"r"(mbarrier_addr(bar)),
      "r"(parity), "r"(10000000u)
      : "memory");
}

// mbarrier.arrive.shared::cluster.b64 on the barrier at the same offset in CTA `cta_rank` of the cluster
// (address mapped with mapa): how a consumer frees a slot that a multicast TMA fills in every CTA of the
// cluster. Default (CTA-scope release) semantics on purpose: `.release.cluster` makes ptxas put a
// MEMBAR.ALL.GPU before every arrival, which measured 2.3x slower on the H200; the consumer has already
// waited for its WGMMA reads of the slot (wgmma.wait_group), which is all the producer's overwrite needs.
__device__ __forceinline__ void mbarrier_arrive_cluster(u64* bar, u32 cta_rank) {
  asm volatile(
      "{\n.reg .b32 remote;\n"
      "mapa.shared::cluster.u32 remote, %0, %1;\n"
      "mbarrier.arrive.shared::cluster.b64 _, [remote];\n}\n" ::"r"(mbarrier_addr(bar)),
      "r"(cta_rank)
      : "memory");
}

}  // namespace kiln::ptx
