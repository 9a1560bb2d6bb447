// Probe (not part of the library): does an L2 eviction policy on a decode GEMM's weight stream avoid the cost of
// the benchmark's flush? The flush (an asynchronous 1 GB write) leaves L2 full of dirty lines; a stream of B read
// right after it runs about 3 us slower than after a read flush (29.4 MB: 14.0 against 11.1 us, twenty-first
// session), which is most of the distance between the M = 1 shapes and issue 3's target. If the lines a stream
// brings in are evicted before the dirty ones (evict_first), only the first miss of each L2 set writes one back.
// This times a plain stream of 29.4, 14.7 and 117 MB after a write flush and after a read flush, two ways: per-warp
// cp.async pieces without a hint, and one thread per SM issuing 16 KB bulk copies into an 8-deep ring (as a TMA
// producer does) with no cache hint and with L2::evict_first, L2::evict_unchanged and L2::evict_normal policies.
// (cp.async.cg with .L2::cache_hint stopped with "an illegal instruction" on the H200, driver 580, with either
// policy form; usage: evict_probe WAY POLICY runs one variant per process to try it.)
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o evict_probe bench/probes/evict_probe.cu
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <utility>
#include <vector>

#include "probe_check.h"
#include "probe_stream.cuh"

enum Policy { kNone, kEvictFirst, kEvictUnchanged, kEvictNormal };
constexpr const char* kPolicyNames[] = {"no hint", "evict_first", "evict_unchanged", "evict_normal"};

template <int P>
__device__ __forceinline__ uint64_t make_policy() {
  // evict_first and evict_normal as the library passes them (include/kiln/ptx/cache_policy.cuh); evict_unchanged
  // made by createpolicy here.
  uint64_t p = 0;
  if constexpr (P == kEvictFirst) p = 0x12F0000000000000ull;
  if constexpr (P == kEvictNormal) p = 0x1000000000000000ull;
  if constexpr (P == kEvictUnchanged)
    asm volatile("createpolicy.fractional.L2::evict_unchanged.b64 %0, 1.0;" : "=l"(p));
  return p;
}

// ---- one thread per SM issuing bulk copies into a ring (the TMA producer's pattern) ----
constexpr int kBulkBytes = 16384, kBulkStages = 8;

template <int P>
__global__ void __launch_bounds__(32) stream_bulk(const uint8_t* __restrict__ src, size_t chunks, uint32_t* sink) {
  extern __shared__ __align__(16) uint8_t bulk_ring[];
  __shared__ __align__(8) uint64_t full[kBulkStages];
  if (threadIdx.x != 0) return;
  const uint64_t policy = make_policy<P>();
  for (int s = 0; s < kBulkStages; ++s)
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_u32(&full[s])));
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  const auto issue = [&](size_t chunk, int slot) {
    const uint32_t bar = smem_u32(&full[slot]);
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(kBulkBytes) : "memory");
    const uint32_t dst = smem_u32(bulk_ring + slot * kBulkBytes);
    const uint8_t* g = src + chunk * kBulkBytes;
    if constexpr (P == kNone)
      asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst),
                   "l"(g), "r"(kBulkBytes), "r"(bar)
                   : "memory");
    else
      asm volatile(
          "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
          " [%0], [%1], %2, [%3], %4;" ::"r"(dst),
          "l"(g), "r"(kBulkBytes), "r"(bar), "l"(policy)
          : "memory");
  };
  const size_t mine = chunks > blockIdx.x ? (chunks - blockIdx.x + gridDim.x - 1) / gridDim.x : 0;
  const auto chunk_of = [&](size_t j) { return blockIdx.x + j * gridDim.x; };
  for (size_t j = 0; j < kBulkStages && j < mine; ++j) issue(chunk_of(j), static_cast<int>(j));
  uint32_t x = 0;
  for (size_t j = 0; j < mine; ++j) {
    const int slot = static_cast<int>(j % kBulkStages);
    const uint32_t bar = smem_u32(&full[slot]), phase = static_cast<uint32_t>((j / kBulkStages) & 1);
    uint32_t ok = 0;
    while (!ok)
      asm volatile(
          "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
          : "=r"(ok)
          : "r"(bar), "r"(phase)
          : "memory");
    x ^= *reinterpret_cast<const uint32_t*>(bulk_ring + slot * kBulkBytes);
    if (j + kBulkStages < mine) issue(chunk_of(j + kBulkStages), slot);
  }
  if (x == 0x9e3779b9u) *sink = x;
}

using Launch = void (*)(const uint8_t*, size_t, uint32_t*, int, cudaStream_t);

// The shared stream (probe_stream.cuh) with the policy as the library passes it (evict_unchanged has no such
// constant: bulk copies only).
template <int P>
void launch_cpasync(const uint8_t* src, size_t bytes, uint32_t* sink, int sms, cudaStream_t s) {
  constexpr uint64_t kPolicy = P == kEvictFirst ? 0x12F0000000000000ull : 0x1000000000000000ull;
  static_assert(P != kEvictUnchanged, "no evict_unchanged constant for cp.async");
  if constexpr (P == kNone)
    stream<><<<sms, kStreamWarps * 32, kStreamSmemBytes, s>>>(src, bytes / kStreamPiece, sink);
  else
    stream<true><<<sms, kStreamWarps * 32, kStreamSmemBytes, s>>>(src, bytes / kStreamPiece, sink, kPolicy);
}
template <int P>
void launch_bulk(const uint8_t* src, size_t bytes, uint32_t* sink, int sms, cudaStream_t s) {
  stream_bulk<P><<<sms, 32, kBulkStages * kBulkBytes, s>>>(src, bytes / kBulkBytes, sink);
}

template <int P>
void set_bulk_smem() {
  CHECK(cudaFuncSetAttribute(stream_bulk<P>, cudaFuncAttributeMaxDynamicSharedMemorySize, kBulkStages * kBulkBytes));
}

// Usage: evict_probe [WAY POLICY] (WAY 0 = cp.async, 1 = bulk; POLICY 0..3 as kPolicyNames, cp.async without 2):
// that variant only; without arguments cp.async without a hint and bulk with each policy.
int main(int argc, char** argv) {
  std::vector<std::pair<int, int>> variants = {{0, kNone}, {1, kNone}, {1, kEvictFirst}, {1, kEvictUnchanged},
                                               {1, kEvictNormal}};
  if (argc == 3) variants = {{std::atoi(argv[1]), std::atoi(argv[2])}};
  for (const auto& [way, p] : variants)
    if (way < 0 || way > 1 || p < 0 || p > 3 || (way == 0 && p == kEvictUnchanged)) {
      std::printf("usage: evict_probe [WAY POLICY]: WAY 0 (cp.async) or 1 (bulk), POLICY 0..3 (0, 1 or 3 for "
                  "cp.async), got %d %d\n", way, p);
      return 2;
    }
  CHECK(cudaFuncSetAttribute(stream<>, cudaFuncAttributeMaxDynamicSharedMemorySize, kStreamSmemBytes));
  CHECK(cudaFuncSetAttribute(stream<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, kStreamSmemBytes));
  set_bulk_smem<kNone>();
  set_bulk_smem<kEvictFirst>();
  set_bulk_smem<kEvictUnchanged>();
  set_bulk_smem<kEvictNormal>();
  const Launch cpasync[] = {launch_cpasync<kNone>, launch_cpasync<kEvictFirst>, nullptr, launch_cpasync<kEvictNormal>};
  const Launch bulk[] = {launch_bulk<kNone>, launch_bulk<kEvictFirst>, launch_bulk<kEvictUnchanged>,
                         launch_bulk<kEvictNormal>};
  const FlushedTimer timer;
  std::printf("%-9s %-8s %-16s %-12s %9s %9s\n", "MB", "loads", "policy", "flush", "us", "GB/s");
  for (const size_t bytes : {size_t{4096} * 7168, size_t{7168} * 2048, size_t{7168} * 16384}) {
    uint8_t* src;
    CHECK(cudaMalloc(&src, bytes));
    CHECK(cudaMemset(src, 0x5a, bytes));
    for (const auto& [way, p] : variants)
      for (int write_flush = 1; write_flush >= 0; --write_flush) {
        const Launch launch = (way == 0 ? cpasync : bulk)[p];
        const double us = timer.median_us(
            33, [&](int) { timer.flush_l2(write_flush); },
            [&] { launch(src, bytes, timer.sink, timer.sms, nullptr); });
        std::printf("%-9.1f %-8s %-16s %-12s %9.1f %9.0f\n", bytes / 1e6, way == 0 ? "cp.async" : "bulk",
                    kPolicyNames[p], write_flush ? "write 1 GB" : "read 1 GB", us, bytes / (us * 1e-6) / 1e9);
      }
    CHECK(cudaFree(src));
  }
  return 0;
}
