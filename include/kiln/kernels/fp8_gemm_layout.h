// Shared-memory layout of the FP8 GEMM kernel, as constexpr arithmetic both the host (to size the launch
// and pick the stage count without instantiating the kernel) and the device template use.
//
// With the TMA-store epilogue, first a bf16 staging tile for D: BLOCK_N / store_cols column groups, each
// [BLOCK_M][store_cols] bf16 with a store_cols * 2-byte swizzle (the TMA store's box is {store_cols, 64}).
// Per pipeline stage: an A tile [BLOCK_M][128] e4m3, a B tile [BLOCK_N][128] e4m3 (both written by TMA with
// 128-byte swizzle, so each starts 1024-byte aligned), A's scales for the tile [BLOCK_M] fp32 and B's
// scales: the tile's one to three 128x128-block scales (inference form), or [BLOCK_N] fp32 (weight-gradient
// form, B scaled per row). Then a "full" and an "empty" mbarrier per stage.
//
// With split-K (the CTAs of a cluster each take a share of K of the same tile), the cluster's leader also
// has an fp32 buffer of the tile into which the other CTA writes its partial sums, and each math warpgroup
// a "ready" and a "free" mbarrier for that hand-over.
//
//   [D staging][split-K buffer][A stages][B stages][sfa stages][sfb stages][full][empty][ready][free]
#pragma once

#include "kiln/ptx/cache_policy.cuh"
#include "kiln/ptx/types.cuh"

namespace kiln::kernels {

constexpr u32 kFp8GemmBlockK = 128;         // K per stage: one scale block, one 128-byte swizzle row
constexpr u32 kFp8GemmDefaultGroupM = 8;    // the tile order's group height, m units (Fp8Gemm's kGroupM)
constexpr u32 kFp8GemmMaxStages = 16;
constexpr u32 kHopperSmemPerBlock = 232448; // 227 KB: the opt-in dynamic shared memory limit of H100/H200
constexpr u32 kFp8GemmProducerThreads = 128;

constexpr u32 fp8_gemm_align_up(u32 x, u32 a) { return (x + a - 1) / a * a; }

// Columns of D per TMA store box with the TMA-store epilogue: the widest of 64 / 32 / 16 that divides
// BLOCK_N, so a box never reaches into the next tile. The staging swizzle is store_cols * 2 bytes (128, 64
// or 32), which keeps the stmatrix writes free of bank conflicts.
constexpr u32 fp8_gemm_store_cols(u32 block_n) { return block_n % 64 == 0 ? 64 : block_n % 32 == 0 ? 32 : 16; }
// Rows per TMA store box: each math warpgroup stores its own 64 rows.
constexpr u32 kFp8GemmStoreRows = 64;

struct Fp8GemmLayout {
  u32 d_offset = 0, d_bytes = 0;  // D staging (0 bytes without the TMA-store epilogue)
  u32 reduce_offset = 0, reduce_bytes = 0;  // split-K partial sums (0 bytes without split-K)
  u32 a_offset = 0, a_stage_bytes = 0;
  u32 b_offset = 0, b_stage_bytes = 0;
  u32 sfa_offset = 0, sfa_stage_bytes = 0;
  u32 sfb_offset = 0, sfb_stage_bytes = 0;
  u32 full_barrier_offset = 0, empty_barrier_offset = 0;
  u32 reduce_barrier_offset = 0;  // split-K: "ready" per math warpgroup, then "free" per math warpgroup
  u32 total_bytes = 0;  // the dynamic shared memory a launch requests
  u32 stage_tx_bytes = 0;  // bytes the TMA loads of one stage deliver (the full barrier's transaction count)
};

// The layout for one (BLOCK_M, BLOCK_N, stages, epilogue, B-scale form). BLOCK_M and BLOCK_N must be
// multiples of 8 (whole swizzle atoms) and of 4 (a scale box is 16-byte granular).
constexpr Fp8GemmLayout fp8_gemm_layout(u32 block_m, u32 block_n, u32 stages, bool tma_store,
                                        bool sfb_per_row = false, u32 split_k = 1) {
  Fp8GemmLayout l;
  l.d_offset = 0;
  l.d_bytes = tma_store ? fp8_gemm_align_up(block_m * block_n * 2, 1024) : 0;
  l.reduce_offset = l.d_offset + l.d_bytes;
  l.reduce_bytes = split_k > 1 ? fp8_gemm_align_up(block_m * block_n * 4, 1024) : 0;
  l.a_stage_bytes = block_m * kFp8GemmBlockK;
  l.b_stage_bytes = block_n * kFp8GemmBlockK;
  l.sfa_stage_bytes = fp8_gemm_align_up(block_m * 4, 128);
  l.a_offset = l.reduce_offset + l.reduce_bytes;
  l.b_offset = fp8_gemm_align_up(l.a_offset + stages * l.a_stage_bytes, 1024);
  l.sfa_offset = fp8_gemm_align_up(l.b_offset + stages * l.b_stage_bytes, 128);
  // Inference form: the tile's one to three 128x128-block scales of B for this K block (written by the
  // scale-loader warp); weight-gradient form: BLOCK_N per-row scales, loaded by TMA.
  l.sfb_stage_bytes = sfb_per_row ? fp8_gemm_align_up(block_n * 4, 128) : 16;
  l.sfb_offset = l.sfa_offset + stages * l.sfa_stage_bytes;
  l.full_barrier_offset = fp8_gemm_align_up(l.sfb_offset + stages * l.sfb_stage_bytes, 8);
  l.empty_barrier_offset = l.full_barrier_offset + stages * 8;
  l.reduce_barrier_offset = l.empty_barrier_offset + stages * 8;
  l.total_bytes = l.reduce_barrier_offset + (split_k > 1 ? 2 * (block_m / 64) * 8 : 0);
  l.stage_tx_bytes = l.a_stage_bytes + l.b_stage_bytes + block_m * 4 + (sfb_per_row ? block_n * 4 : 0);
  return l;
}

// The most stages (<= kFp8GemmMaxStages) whose layout fits `smem_bytes`; 0 when not even one fits.
constexpr u32 fp8_gemm_max_stages(u32 block_m, u32 block_n, bool tma_store, u32 smem_bytes = kHopperSmemPerBlock,
                                   bool sfb_per_row = false, u32 split_k = 1) {
  u32 best = 0;
  for (u32 s = 1; s <= kFp8GemmMaxStages; ++s)
    if (fp8_gemm_layout(block_m, block_n, s, tma_store, sfb_per_row, split_k).total_bytes <= smem_bytes) best = s;
  return best;
}

// Rows of an operand's TMA box for its last block along M (A and A's scales: block = BLOCK_M, rows = M) or N
// (B: block = BLOCK_N, rows = N): that block's rows rounded up to a whole swizzle atom (8 rows); every other
// block loads them all. TMA zero-fills a box's rows beyond the tensor, and the H200 measured that fill as
// costly as loading real data or more. For A: with whole boxes 64x32 at M = 1 took 24.0 us against 16.4 at
// M = 64 (4096 x 7168), and 160 x 7168 x 16384 (a last block of 32 rows) took longer than 256 x 7168 x 16384.
// Cutting the last box (seventeenth session, same binary): 160 x 7168 x 16384 128x128 72.8 -> 51.4 us, 128x64
// 117 -> 62; 400 x 2112 x 7168 128x64 27.5 -> 18.5; 100 x 2112 x 7168 64x32 15.2 -> 13.5; level where the last
// block is nearly whole. For B (twenty-sixth session): 128x160 at 9472 x N x 8192 with five n blocks ran
// 95.5 us at N = 800 (whole), 97.9 / 109.7 / 118.9 / 128.9 with 32 / 64 / 96 / 128 rows of the last block zero-
// filled, and 125.9 -> 163.3 from N = 1120 to 992 with seven: less work, a third more time.
// With the short box the rows after it keep stale shared memory; the WGMMAs compute garbage for them, row by
// row (a row of A is a row of D, a row of B a column of D), and those rows and columns are never stored. 8 rows
// are one 128-byte swizzle atom, so the rows that are loaded land exactly where a full box would put them; 8
// floats keep the scales' box 16-byte granular. CTA pairs sharing the operand (cluster_n = 2 for A,
// cluster_m = 2 for B) always load whole tiles (each CTA half of the rows).
constexpr u32 fp8_gemm_last_box_rows(u32 block, u32 rows, u32 pairs = 1) {
  if (pairs > 1 || rows == 0) return block;
  return fp8_gemm_align_up(rows - (rows - 1) / block * block, 8);
}

// The L2 policy for B's loads. With one or two m blocks (decode sizes) each B tile is read by at most two
// CTAs, at about the same time, and never again: its lines are marked evict-first, so that streaming B evicts
// B's own used lines rather than other data, such as the dirty lines a previous kernel left in L2 (whose
// write-back would share DRAM with B's reads). Measured on the H200 (2026-11-29, fifth session): 4-8 % faster
// on long-K decode shapes (M = 64 and 128 at 4096 x 7168, 128 x 7168 x 16384), level elsewhere at M <= 128.
// With more m blocks B's tiles are reused from L2 by later CTAs, and evict-first cost 4 % at M = 4096.
constexpr u64 fp8_gemm_b_cache_policy(u32 block_m, u32 m) {
  return (m + block_m - 1) / block_m <= 2 ? ptx::kL2EvictFirst : ptx::kL2EvictNormal;
}

// How many column slices a tile's K block is issued in when the promotion overlaps the WGMMAs: up to
// BLOCK_N = 128 the partial accumulators cover whole tiles (K blocks alternate between two of them); wider
// tiles are issued in two slices of about half the columns (fp8_gemm_first_slice_cols; the slices alternate),
// so two partial accumulators of about BLOCK_N / 4 floats plus the FP32 one still fit the math warpgroups'
// 232-240 registers.
constexpr u32 fp8_gemm_promotion_slices(u32 block_n) { return block_n <= 128 ? 1 : 2; }

// Columns of a two-slice tile's first slice: half the tile, rounded up to a multiple of 16 (176 -> 96 + 80).
// WGMMAs of a width that is an odd multiple of 8 ran slowly on the H200: 128x176 in halves of 88 took 129 us
// at 4096 x 2112 x 7168 against 124.6 in slices of 96 + 80 (same kernel otherwise), and 128x144 in halves of
// 72 was slower than its serial twin.
constexpr u32 fp8_gemm_first_slice_cols(u32 block_n) { return (block_n / 2 + 15) / 16 * 16; }

// Whether the kernel can overlap the promotion with the WGMMAs for this tile width: whole tiles up to 128
// columns, two slices (fp8_gemm_first_slice_cols) up to 192.
constexpr bool fp8_gemm_can_overlap_promotion(u32 block_n) { return block_n <= 192 && block_n % 16 == 0; }

// gcd(BLOCK_N, 128): tiles start at multiples of it into B's 128-column scale blocks (BLOCK_N's lowest set bit,
// at most 128).
constexpr u32 fp8_gemm_gcd_128(u32 block_n) {
  const u32 low_bit = block_n & (0u - block_n);
  return low_bit < 128 ? low_bit : 128;
}

// Column classes (the kernel's Schedule and promotion): the one-wave tiles of the inference form whose B scale
// switches at more than two possible columns (a tile starts at a multiple of gcd(BLOCK_N, 128) into a
// 128-column block: 4 columns for 160, 8 for 112, 144 and 176) are walked per class, one class per cluster,
// with the class's switch column compiled into the math walk: a copy of the walk per class.
constexpr bool fp8_gemm_column_walk(u32 block_m, u32 block_n, u32 num_math_warpgroups, bool accumulate) {
  const bool one_wave = block_m == 64 * num_math_warpgroups;
  return !accumulate && 128 % block_n != 0 && one_wave && 128 / fp8_gemm_gcd_128(block_n) > 2;
}

// Column pairs: where a copy per column would make eight copies (128x176 then compiled in 1.9 s with NVRTC),
// a class holds the tiles of two columns {c, c + 64} and its walk has c compiled in, the tile's member of the
// pair choosing B's scale in the 64 columns between them (and 128 further on). That costs two scale products
// per K block (128x176 2 % slower on the H200, sixteenth session), so four columns (160) keep a copy each.
constexpr bool fp8_gemm_column_pairs(u32 block_m, u32 block_n, u32 num_math_warpgroups, bool accumulate) {
  return fp8_gemm_column_walk(block_m, block_n, num_math_warpgroups, accumulate) &&
         128 / fp8_gemm_gcd_128(block_n) > 4;
}

// The classes: class k holds the n units k, k + C, ... Tiles C * cluster_n n blocks apart start
// (C * cluster_n * BLOCK_N) % 128 columns apart: with C = columns / cluster_n that is 0 (one column per
// class), with C = columns / 2 / cluster_n it is 64 (BLOCK_N / gcd being odd): a pair per class. With pairs
// along N (cluster_n = 2) a unit's two tiles differ by one n block: classes of units, half as many, each CTA's
// column then fixed by its rank too. 1: no classes.
constexpr u32 fp8_gemm_column_classes(u32 block_m, u32 block_n, u32 num_math_warpgroups, u32 cluster_n,
                                      bool accumulate) {
  if (!fp8_gemm_column_walk(block_m, block_n, num_math_warpgroups, accumulate)) return 1;
  const u32 columns = 128 / fp8_gemm_gcd_128(block_n);
  const bool pairs = fp8_gemm_column_pairs(block_m, block_n, num_math_warpgroups, accumulate);
  const u32 classes = (pairs ? columns / 2 : columns) / cluster_n;
  return classes > 1 ? classes : 1;
}

// The clusters a grid needs for N columns: one per column class that has tiles (fewer than the classes when
// N has fewer n units than there are classes), else one.
constexpr u32 fp8_gemm_min_clusters(u32 block_m, u32 block_n, u32 num_math_warpgroups, u32 cluster_n, bool accumulate,
                                    u32 n) {
  const u32 classes = fp8_gemm_column_classes(block_m, block_n, num_math_warpgroups, cluster_n, accumulate);
  const u32 n_units = ((n + block_n - 1) / block_n + cluster_n - 1) / cluster_n;
  return classes < n_units ? classes : n_units;
}

// N units in column class k of `classes` (class k holds the n units k, k + classes, ...; k < n_units).
KILN_HOST_DEVICE constexpr u32 fp8_gemm_class_n_units(u32 k, u32 classes, u32 n_units) {
  return (n_units - k + classes - 1) / classes;
}

// The clusters the kernel's Schedule gives column class k when `clusters` clusters walk `classes` classes, the
// first `classes_with_units` of which have n units (fp8_gemm_min_clusters; clusters >= classes_with_units): one
// each, the spare ones in proportion to the class's n units (every class has the same m units), and the
// remainder one each to the first classes, which have the most. The shares add up to `clusters`. A class walks
// its units round by round, so the busiest class (its units over its share, rounded up) can take a round more
// than the grid's units over its clusters; the host's cost model counts that.
KILN_HOST_DEVICE constexpr u32 fp8_gemm_class_clusters(u32 k, u32 classes, u32 classes_with_units, u32 n_units,
                                                       u32 clusters) {
  const u32 spare = clusters - classes_with_units;
  u32 given = 0;
  for (u32 j = 0; j < classes_with_units; ++j)
    given += 1 + spare * fp8_gemm_class_n_units(j, classes, n_units) / n_units;
  return 1 + spare * fp8_gemm_class_n_units(k, classes, n_units) / n_units + (k < clusters - given ? 1 : 0);
}

// Threads per CTA: one producer warpgroup plus the math warpgroups (one per 64 rows of BLOCK_M).
constexpr u32 fp8_gemm_num_threads(u32 num_math_warpgroups) {
  return kFp8GemmProducerThreads + 128 * num_math_warpgroups;
}

}  // namespace kiln::kernels
