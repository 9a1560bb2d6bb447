// Probe (not part of the library): does a decode GEMM's weight stream read DRAM faster in longer row pieces? A decode
// tile's producer loads B one K block at a time: ROWS rows x 128 bytes per TMA box, so each row of B is read in
// 128-byte pieces spaced a K block's time apart. This streams B (N x K bytes, K-major) the way the decode tiles do
// (CTA c takes rows [ROWS c, ROWS c + ROWS), one thread issues TMA loads into a ring of stages) through a 3D view of
// B, {128 bytes, N rows, K / 128 blocks}, so that a box of {128, ROWS, J} loads J consecutive K blocks of every row
// (J x 128 contiguous bytes a row) into J consecutive 128B-swizzled tiles, the layout J stages of the kernel hold.
// Timed after the benchmark's asynchronous 1 GB write flush and after a read flush, with B's loads evict-first and
// without a hint, for J = 1, 2, 4, 8 at the same bytes in flight and at twice as many.
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o tma_piece_probe bench/probes/tma_piece_probe.cu -lcuda
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "probe_check.h"
#include "probe_stream.cuh"

constexpr int kMaxStages = 64;

// One thread per CTA: rows [rows * blockIdx.x, + rows) of B, K blocks in boxes of j, a ring of `stages` boxes.
__global__ void __launch_bounds__(32) tma_stream(const __grid_constant__ CUtensorMap map, int rows, int kblocks, int j,
                                                int stages, int evict_first, uint32_t* sink) {
  extern __shared__ __align__(1024) uint8_t tma_ring[];
  __shared__ __align__(8) uint64_t full[kMaxStages];
  if (threadIdx.x != 0) return;
  const uint32_t box_bytes = static_cast<uint32_t>(rows * 128 * j);
  for (int s = 0; s < stages; ++s) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_u32(&full[s])));
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  asm volatile("prefetch.tensormap [%0];" ::"l"(&map) : "memory");
  const uint64_t policy = 0x12F0000000000000ull;  // evict_first, as include/kiln/ptx/cache_policy.cuh
  const int row0 = rows * static_cast<int>(blockIdx.x);
  const int boxes = kblocks / j;
  const auto issue = [&](int b, int slot) {
    const uint32_t bar = smem_u32(&full[slot]);
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(box_bytes) : "memory");
    const uint32_t dst = smem_u32(tma_ring + static_cast<size_t>(slot) * box_bytes);
    if (evict_first)
      asm volatile(
          "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.L2::cache_hint"
          " [%0], [%1, {%2, %3, %4}], [%5], %6;" ::"r"(dst),
          "l"(&map), "r"(0), "r"(row0), "r"(b * j), "r"(bar), "l"(policy)
          : "memory");
    else
      asm volatile(
          "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
          " [%0], [%1, {%2, %3, %4}], [%5];" ::"r"(dst),
          "l"(&map), "r"(0), "r"(row0), "r"(b * j), "r"(bar)
          : "memory");
  };
  for (int b = 0; b < stages && b < boxes; ++b) issue(b, b);
  uint32_t x = 0;
  for (int b = 0; b < boxes; ++b) {
    const int slot = b % stages;
    const uint32_t bar = smem_u32(&full[slot]), phase = static_cast<uint32_t>((b / stages) & 1);
    uint32_t ok = 0;
    while (!ok)
      asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                   : "=r"(ok)
                   : "r"(bar), "r"(phase)
                   : "memory");
    x ^= *reinterpret_cast<const uint32_t*>(tma_ring + static_cast<size_t>(slot) * box_bytes);
    if (b + stages < boxes) issue(b + stages, slot);
  }
  if (x == 0x9e3779b9u) *sink = x;
}

int main() {
  CHECK(cudaFuncSetAttribute(tma_stream, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
  const FlushedTimer timer;
  struct Shape {
    int n, k, rows;  // rows: the decode tile's BLOCK_N (its B box rows)
  };
  std::printf("%-16s %4s %4s %6s %8s %-12s %-12s %8s %8s\n", "B (N x K)", "rows", "J", "stages", "flight", "policy",
              "flush", "us", "GB/s");
  for (const Shape sh : {Shape{4096, 7168, 32}, Shape{7168, 2048, 64}}) {
    uint8_t* b;
    const size_t bytes = static_cast<size_t>(sh.n) * sh.k;
    CHECK(cudaMalloc(&b, bytes));
    CHECK(cudaMemset(b, 0x5a, bytes));
    CUtensorMap map;
    const cuuint64_t dims[3] = {128, static_cast<cuuint64_t>(sh.n), static_cast<cuuint64_t>(sh.k / 128)};
    const cuuint64_t strides[2] = {static_cast<cuuint64_t>(sh.k), 128};  // bytes, dims 1 and 2
    const cuuint32_t elem[3] = {1, 1, 1};
    const int kblocks = sh.k / 128, ctas = sh.n / sh.rows;
    for (int j : {1, 2, 4, 8}) {
      const cuuint32_t box[3] = {128, static_cast<cuuint32_t>(sh.rows), static_cast<cuuint32_t>(j)};
      CU_CHECK(cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 3, b, dims, strides, box, elem,
                                      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
      const int box_bytes = sh.rows * 128 * j;
      for (int flight_kb : {64, 128}) {
        const int stages = flight_kb * 1024 / box_bytes;
        if (stages < 2 || stages > kMaxStages) continue;
        for (int evict_first = 1; evict_first >= 0; --evict_first)
          for (int write_flush = 1; write_flush >= 0; --write_flush) {
            const double us = timer.median_us(33, [&](int) { timer.flush_l2(write_flush); }, [&] {
              tma_stream<<<ctas, 32, static_cast<size_t>(stages) * box_bytes>>>(map, sh.rows, kblocks, j, stages,
                                                                                evict_first, timer.sink);
            });
            std::printf("%5d x %-8d %4d %4d %6d %5d KB %-12s %-12s %8.1f %8.0f\n", sh.n, sh.k, sh.rows, j, stages,
                        flight_kb, evict_first ? "evict_first" : "no hint", write_flush ? "write 1 GB" : "read 1 GB",
                        us, bytes / (us * 1e-6) / 1e9);
          }
      }
    }
    CHECK(cudaFree(b));
  }
  return 0;
}
