// Probe (not part of the library): how fast can a tile epilogue add fp32 tiles into a D that lives in DRAM, and does
// it overlap with a main loop? The weight-gradient form (D fp32 += A . B^T) ends each 128-row tile with TMA
// reduce-adds of 64-row x 16-column boxes (64-byte rows), two warpgroups of 64 rows each. At small K (a token count
// per expert of 512-1024) the H200 ran 4096 x 7168 x 512 in 112 us with those reduce-adds and 50.5 us without them
// (thirty-seventh session): D's 235 MB of read and write at about 2.1 TB/s, half of a copy's 4.27. Neither more
// staging buffers nor staggering the CTAs' start changed it. This walks D the way the kernel does (one CTA per SM,
// persistent, 128 x TILE_N tiles, two groups of 64 rows, one thread of each issuing) with a main loop emulated by a
// spin of SPIN ns per tile, and times epilogues that differ in one thing each:
//   none        the spin only (the main loop's share)
//   reduceC/B   TMA reduce-add boxes of C columns (16: the kernel's; 32: one 128-byte line a row; 64: 256 bytes,
//               no swizzle) through a ring of B buffers
//   store16     TMA stores of the kernel's boxes instead (writes only: no read of D; the result is 1, not D + 1)
//   pf+reduceC  the tile's D prefetched into L2 (cp.async.bulk.prefetch.tensor) before the spin, in the boxes of
//               C columns, then reduceC/B (the kernel prefetches since ab07b1f: do wider boxes still help then? Two
//               8 KB buffers per warpgroup would cost 128x128 and 128x192 a stage; one would not)
//   pfnext      the next tile's D prefetched at each tile's start (the first tile's own too), then reduce16/2
//   pfrows      the tile's D prefetched into L2 row by row before the spin (cp.async.bulk.prefetch.L2, TILE_N x 4
//               contiguous bytes a row: each row's piece requested at once), then reduce16/2
//   red.v4      every thread adds its share with red.global.add.v4.f32 (no shared memory, no TMA), a warp covering
//               512 contiguous bytes of one row per instruction
//   red.v4frag  the same in the kernel's fragment order (interleaved B): a warp instruction covers 64 bytes of
//               each of 8 rows, and a thread issues its two rows' TILE_N / 16 pieces back to back
//   ldst/pf+ldst  (forty-second session) no reduce-add: each box of D is TMA-loaded into the staging ring (an
//               mbarrier a buffer, the load of box c + B - 1 issued while box c is added to), every thread adds to
//               its share in shared memory, and the box is TMA-stored back over D; pf+: the tile's D prefetched into
//               L2 first, as the kernel does. The same bytes of DRAM as a reduce-add, but plain L2 reads and writes
//               where the reduce is a read-modify-write done in L2: the way a C read in the epilogue would go.
// Each variant is checked once on a zeroed D (every element 1 after one call) before it is timed after the
// benchmark's 1 GB write flush. "TB/s" counts D's read and write (its write only for store16).
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o reduce_add_probe \
//     bench/probes/reduce_add_probe.cu -lcuda
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "probe_check.h"
#include "probe_stream.cuh"

enum Mode : int {
  kNone,
  kReduce,
  kStore,
  kPrefetchReduce,
  kPrefetchNextReduce,
  kPrefetchRowsReduce,
  kRed,
  kRedFragment,
  kLoadStore,
  kPrefetchLoadStore
};

constexpr int kGroupRows = 64, kGroups = 2, kThreads = kGroups * 128, kMaxBuffers = 8;

__device__ __forceinline__ void spin_ns(uint32_t ns) {
  uint64_t t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); while (t - t0 < ns);
}

// cp.async.bulk.wait_group.read with a run-time count (the instruction takes an immediate): at most `pending` bulk
// groups may still read their shared memory. Counts past 9 wait for 9, which is stricter and so as safe.
__device__ __forceinline__ void wait_reads_pending_at_most(int pending) {
  switch (pending < 9 ? pending : 9) {
    case 0: asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory"); break;
    case 1: asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory"); break;
    case 2: asm volatile("cp.async.bulk.wait_group.read 2;" ::: "memory"); break;
    case 3: asm volatile("cp.async.bulk.wait_group.read 3;" ::: "memory"); break;
    case 4: asm volatile("cp.async.bulk.wait_group.read 4;" ::: "memory"); break;
    case 5: asm volatile("cp.async.bulk.wait_group.read 5;" ::: "memory"); break;
    case 6: asm volatile("cp.async.bulk.wait_group.read 6;" ::: "memory"); break;
    case 7: asm volatile("cp.async.bulk.wait_group.read 7;" ::: "memory"); break;
    case 8: asm volatile("cp.async.bulk.wait_group.read 8;" ::: "memory"); break;
    default: asm volatile("cp.async.bulk.wait_group.read 9;" ::: "memory"); break;
  }
}

__device__ __forceinline__ void prefetch_box(const CUtensorMap* map, int col, int row) {
  asm volatile("cp.async.bulk.prefetch.tensor.2d.L2.global.tile [%0, {%1, %2}];" ::"l"(map), "r"(col), "r"(row)
               : "memory");
}

__device__ __forceinline__ void mbarrier_wait(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{\n .reg .pred p;\n WAIT_%=:\n mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n @!p bra WAIT_%=;\n}" ::"r"(
          bar),
      "r"(parity)
      : "memory");
}

// Grid: one CTA per SM; CTA c takes tiles c, c + grid, ... in row-major tile order.
__global__ void __launch_bounds__(kThreads, 1)
    epilogue_probe(const __grid_constant__ CUtensorMap map, float* d, int m, int n, int tile_n, int mode, int box_cols,
                   int buffers, uint32_t spin) {
  extern __shared__ __align__(1024) uint8_t staging[];
  __shared__ __align__(8) uint64_t bars[kGroups * kMaxBuffers];
  uint32_t phases = 0;  // the parity each slot's barrier is waited on next (load-add-store modes)
  const int group = threadIdx.x / 128, t = threadIdx.x % 128;
  if (threadIdx.x < kGroups * kMaxBuffers)
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_u32(&bars[threadIdx.x])) : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  const int box_bytes = kGroupRows * box_cols * 4;
  uint8_t* const ring = staging + group * buffers * box_bytes;
  for (int i = t * 4; i < buffers * box_bytes / 4; i += 128 * 4)
    *reinterpret_cast<float4*>(ring + i * 4) = make_float4(1.f, 1.f, 1.f, 1.f);
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  const int num_m = m / 128, num_n = (n + tile_n - 1) / tile_n, units = num_m * num_n;
  const bool issuer = t == 0;
  // This group's rows of unit u's tile into L2, in the reduce boxes.
  const auto prefetch_tile = [&](int u) {
    const int row = u / num_n * 128 + group * kGroupRows;
    for (int c = 0; c < tile_n; c += box_cols) prefetch_box(&map, u % num_n * tile_n + c, row);
  };
  for (int unit = blockIdx.x; unit < units; unit += gridDim.x) {
    const int m0 = unit / num_n * 128 + group * kGroupRows, n0 = unit % num_n * tile_n;
    if (issuer && (mode == kPrefetchReduce || mode == kPrefetchLoadStore || (mode == kPrefetchNextReduce && unit == static_cast<int>(blockIdx.x))))
      prefetch_tile(unit);
    if (issuer && mode == kPrefetchNextReduce && unit + static_cast<int>(gridDim.x) < units)
      prefetch_tile(unit + gridDim.x);
    if (mode == kPrefetchRowsReduce && t < kGroupRows) {
      const int cols = n0 + tile_n <= n ? tile_n : n - n0;
      asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(d + static_cast<size_t>(m0 + t) * n + n0),
                   "r"(cols * 4)
                   : "memory");
    }
    if (spin) spin_ns(spin);
    if (mode == kNone) continue;
    if (mode == kRedFragment) {
      // Warp w of the group holds rows 16w + lane / 4 and + 8; lane % 4 = q holds columns 16c + 4q .. + 3.
      const int w = t / 32, lane = t % 32, q = lane % 4;
      for (int r = 0; r < 2; ++r) {
        float* const row = d + static_cast<size_t>(m0 + 16 * w + lane / 4 + 8 * r) * n;
        for (int c = 0; c < tile_n / 16; ++c) {
          const int col = n0 + 16 * c + 4 * q;
          if (col < n)
            asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(row + col), "f"(1.f), "f"(1.f),
                         "f"(1.f), "f"(1.f)
                         : "memory");
        }
      }
      continue;
    }
    if (mode == kRed) {
      const int quads = tile_n / 4;
      for (int i = t; i < kGroupRows * quads; i += 128) {
        const int row = m0 + i / quads, col = n0 + i % quads * 4;
        if (col < n)
          asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(d + static_cast<size_t>(row) * n + col),
                       "f"(1.f), "f"(1.f), "f"(1.f), "f"(1.f)
                       : "memory");
      }
      continue;
    }
    if (mode == kLoadStore || mode == kPrefetchLoadStore) {
      // Boxes of this tile inside D, a ring of `buffers` slots, box j in slot j % buffers (restarting each tile).
      const int boxes = (min(tile_n, n - n0) + box_cols - 1) / box_cols;
      const auto load = [&](int j) {
        const uint32_t bar = smem_u32(&bars[group * kMaxBuffers + j % buffers]);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(box_bytes) : "memory");
        asm volatile(
            "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::
                "r"(smem_u32(ring + (j % buffers) * box_bytes)),
            "l"(&map), "r"(n0 + j * box_cols), "r"(m0), "r"(bar)
            : "memory");
      };
      if (issuer) {
        asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");  // the previous tile's stores have read
        for (int j = 0; j < buffers - 1 && j < boxes; ++j) load(j);
      }
      for (int c = 0; c < boxes; ++c) {
        if (issuer && c + buffers - 1 < boxes) {
          asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");  // box c - 1's store has read its slot
          load(c + buffers - 1);
        }
        const int slot = c % buffers;
        mbarrier_wait(smem_u32(&bars[group * kMaxBuffers + slot]), (phases >> slot) & 1u);
        phases ^= 1u << slot;
        float4* const box = reinterpret_cast<float4*>(ring + slot * box_bytes);
        for (int i = t; i < box_bytes / 16; i += 128) {
          float4 v = box[i];
          v.x += 1.f, v.y += 1.f, v.z += 1.f, v.w += 1.f;
          box[i] = v;
        }
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        asm volatile("bar.sync %0, 128;" ::"r"(group + 1) : "memory");
        if (issuer) {
          asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];" ::"l"(&map),
                       "r"(smem_u32(ring + slot * box_bytes)), "r"(n0 + c * box_cols), "r"(m0)
                       : "memory");
          asm volatile("cp.async.bulk.commit_group;" ::: "memory");
        }
      }
      continue;
    }
    if (!issuer) continue;
    for (int c = 0; c * box_cols < tile_n; ++c) {
      // As the kernel: a tile's first chunk waits for every earlier read of the ring, later ones for the one
      // before the previous chunk (a ring of `buffers`).
      wait_reads_pending_at_most(c == 0 ? 0 : buffers - 1);
      const uint32_t src = smem_u32(ring + (c % buffers) * box_bytes);
      const int col = n0 + c * box_cols;
      if (col < n) {
        if (mode == kStore)
          asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];" ::"l"(&map),
                       "r"(src), "r"(col), "r"(m0)
                       : "memory");
        else
          asm volatile("cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.bulk_group [%0, {%2, %3}], [%1];" ::"l"(
                           &map),
                       "r"(src), "r"(col), "r"(m0)
                       : "memory");
      }
      asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    }
  }
  if (issuer) asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}

struct Variant {
  const char* name;
  int mode, box_cols, buffers;
};

int main() {
  const FlushedTimer timer;
  CHECK(cudaFuncSetAttribute(epilogue_probe, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
  const Variant variants[] = {
      {"none", kNone, 16, 2},
      {"reduce16/2", kReduce, 16, 2},
      {"reduce16/10", kReduce, 16, 10},
      {"reduce32/2", kReduce, 32, 2},
      {"reduce32/5", kReduce, 32, 5},
      {"reduce64/2", kReduce, 64, 2},
      {"store16/2", kStore, 16, 2},
      {"pf+reduce16/2", kPrefetchReduce, 16, 2},
      {"pf+reduce32/2", kPrefetchReduce, 32, 2},
      {"pf+reduce32/1", kPrefetchReduce, 32, 1},
      {"pfnext+reduce16/2", kPrefetchNextReduce, 16, 2},
      {"pfrows+reduce16/2", kPrefetchRowsReduce, 16, 2},
      {"red.v4", kRed, 16, 2},
      {"red.v4frag", kRedFragment, 16, 2},
      {"ldst32/2", kLoadStore, 32, 2},
      {"ldst32/4", kLoadStore, 32, 4},
      {"pf+ldst32/2", kPrefetchLoadStore, 32, 2},
      {"pf+ldst32/4", kPrefetchLoadStore, 32, 4},
      {"pf+ldst16/4", kPrefetchLoadStore, 16, 4},
  };
  // VARIANTS=name,name,... times only those (all by default).
  const std::string only = std::getenv("VARIANTS") ? std::string(",") + std::getenv("VARIANTS") + "," : "";
  struct Shape {
    int m, n, tile_n;
  };
  std::printf("%-12s %6s %-18s %9s %9s %9s %s\n", "D (m x n)", "spin", "epilogue", "us", "us/round", "TB/s", "check");
  for (const Shape sh : {Shape{4096, 7168, 160}, Shape{7168, 2048, 128}}) {
    const size_t elems = static_cast<size_t>(sh.m) * sh.n, bytes = elems * 4;
    float* d;
    CHECK(cudaMalloc(&d, bytes));
    std::vector<float> host(elems);
    const int units = sh.m / 128 * ((sh.n + sh.tile_n - 1) / sh.tile_n);
    const int grid = std::min(units, timer.sms);
    const double rounds = static_cast<double>(units) / grid;
    for (const Variant& v : variants) {
      if (!only.empty() && only.find(std::string(",") + v.name + ",") == std::string::npos) continue;
      // A box wider than what divides the tile would reach into the next tile's columns (and add there twice):
      // 64-column boxes at 160-column tiles gave 20 % of D wrong on the H200 (thirty-eighth session).
      if (sh.tile_n % v.box_cols != 0) {
        std::printf("%5d x %-5d %6s %-18s (boxes of %d columns do not divide %d-column tiles)\n", sh.m, sh.n, "-",
                    v.name, v.box_cols, sh.tile_n);
        continue;
      }
      CUtensorMap map;
      const cuuint64_t dims[2] = {static_cast<cuuint64_t>(sh.n), static_cast<cuuint64_t>(sh.m)};
      const cuuint64_t strides[1] = {static_cast<cuuint64_t>(sh.n) * 4};
      const cuuint32_t box[2] = {static_cast<cuuint32_t>(v.box_cols), kGroupRows};
      const cuuint32_t elem[2] = {1, 1};
      const CUtensorMapSwizzle swizzle = v.box_cols == 16   ? CU_TENSOR_MAP_SWIZZLE_64B
                                         : v.box_cols == 32 ? CU_TENSOR_MAP_SWIZZLE_128B
                                                            : CU_TENSOR_MAP_SWIZZLE_NONE;
      CU_CHECK(cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, d, dims, strides, box, elem,
                                      CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
      const size_t smem = static_cast<size_t>(kGroups) * v.buffers * kGroupRows * v.box_cols * 4;
      // One call on a zeroed D: every element must be 1 afterwards (none: still 0).
      CHECK(cudaMemset(d, 0, bytes));
      epilogue_probe<<<grid, kThreads, smem>>>(map, d, sh.m, sh.n, sh.tile_n, v.mode, v.box_cols, v.buffers, 0);
      CHECK(cudaGetLastError());
      CHECK(cudaMemcpy(host.data(), d, bytes, cudaMemcpyDeviceToHost));
      const float want = v.mode == kNone ? 0.f : 1.f;
      size_t wrong = 0;
      for (size_t i = 0; i < elems; ++i) wrong += host[i] != want;
      for (uint32_t spin : {0u, 2000u, 4000u}) {
        const double us = timer.median_us(23, [&](int) { timer.flush_l2(true); }, [&] {
          epilogue_probe<<<grid, kThreads, smem>>>(map, d, sh.m, sh.n, sh.tile_n, v.mode, v.box_cols, v.buffers, spin);
        });
        const double traffic = v.mode == kNone ? 0.0 : v.mode == kStore ? bytes : 2.0 * bytes;
        std::printf("%5d x %-5d %6u %-18s %9.1f %9.2f %9.2f %s\n", sh.m, sh.n, spin, v.name, us, us / rounds,
                    traffic / (us * 1e-6) / 1e12, wrong ? "WRONG" : "ok");
      }
      if (wrong) std::printf("FAIL %s: %zu of %zu elements are not %g after one call\n", v.name, wrong, elems, want);
    }
    CHECK(cudaFree(d));
  }
  return 0;
}
