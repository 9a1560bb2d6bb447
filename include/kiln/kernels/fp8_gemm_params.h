// The parameter struct of the FP8 GEMM kernel (fp8_gemm.cuh), shared by the host launch code (plain C++)
// and the device template. POD with fixed-width fields, so both compilers lay it out alike. Two forms:
//
//   inference:        D[M, N] (bf16)  = (A[M, K] (e4m3) * sfa) . (B[N, K] (e4m3) * sfb)^T
//   weight gradient:  D[M, N] (fp32) += (A[M, K] (e4m3) * sfa) . (B[N, K] (e4m3) * sfb)^T
//
// A and B are K-major. A's scales: one fp32 per row per 128 K (1 x 128), MN-major and TMA-aligned: element
// (row m, K block kb) at sfa[kb * align(M, 4) + m]. B's scales, inference form: one fp32 per 128 x 128 block,
// row-major [ceil(N / 128)][ceil(K / 128)]; weight-gradient form: per row per 128 K (1 x 128), laid out like
// A's (sfb[kb * align(N, 4) + n]). N is a compile-time template argument of the kernel, and K in the inference
// form; M is here, and K in the weight-gradient form (num_k_blocks).
#pragma once

#include "kiln/kernels/tma_descriptor.h"
#include "kiln/ptx/types.cuh"

namespace kiln {

struct alignas(64) Fp8GemmParams {
  // A: e4m3 [M, K], dims {K, M}, box {128, BLOCK_M} (BLOCK_M / 2 for pairs sharing A), 128-byte swizzle,
  // out-of-bounds zero fill.
  TmaDescriptor tma_a;
  // B: e4m3 [N, K], dims {K, N}, box {128, BLOCK_N} (BLOCK_N / 2 for pairs sharing B), 128-byte swizzle,
  // out-of-bounds zero fill. Column-mapped tiles (fp8_gemm_column_map): box {128, piece 0's columns} (half for
  // pairs sharing B).
  TmaDescriptor tma_b;
  // A's scales: fp32, dims {align(M, 4), ceil(K / 128)}, box {BLOCK_M, 1}, no swizzle.
  TmaDescriptor tma_sfa;
  // The same two maps boxed {128, last_box_rows} and {last_box_rows, 1}, for the last m block (the same maps
  // as above where last_box_rows = BLOCK_M).
  TmaDescriptor tma_a_last;
  TmaDescriptor tma_sfa_last;
  // B's map boxed {128, last_b_box_rows}, for the last n block (the same map as tma_b where that is whole).
  // Column-mapped tiles: boxed {128, piece 1's columns}.
  TmaDescriptor tma_b_last;
  // D: bf16 [M, N] with row stride ldd, dims {N, M}, box {fp8_gemm_store_cols(BLOCK_N), 64}, swizzle of
  // store_cols * 2 bytes; used by the TMA-store epilogue (needs ldd * 2 and the base 16-byte aligned). In the
  // weight-gradient form: fp32, box {fp8_gemm_reduce_staging(...).cols, kFp8GemmReduceRows}, swizzle of a box row's
  // bytes (64 or 128), for the reduce-add epilogue (ldd * 4 and the base 16-byte aligned).
  TmaDescriptor tma_d;
  // B's scales in the weight-gradient form: fp32, dims {align(N, 4), ceil(K / 128)}, box {BLOCK_N, 1}, no
  // swizzle (unused by the inference form).
  TmaDescriptor tma_sfb;
  // Column-mapped tiles of three or four pieces: B boxed {128, the narrowest piece's columns}, for pieces 2 and 3
  // (unused otherwise).
  TmaDescriptor tma_b_narrow;
  // B's scales in the inference form: fp32 [ceil(N / 128)][ceil(K / 128)], row-major, read directly by the
  // math warpgroups (unused by the weight-gradient form).
  const float* sfb;
  // D: [M, N] with row stride ldd elements (ldd >= N); bf16 in the inference form, fp32 (added to through
  // tma_d) in the weight-gradient form. The plain-store epilogue needs ldd even and an 8-byte aligned base.
  void* d;
  u64 ldd;
  // Rows of A and D; > 0 (the host does not launch for M = 0).
  u32 m;
  // Rows of A's and A scales' TMA boxes for the last m block: fp8_gemm_last_box_rows(BLOCK_M, m, cluster_n)
  // (fp8_gemm_layout.h); the kernel derives that block's transaction bytes per stage from it.
  u32 last_box_rows;
  // Rows of B's TMA box for the last n block: fp8_gemm_last_box_rows(BLOCK_N, N, cluster_m) (BLOCK_N for
  // column-mapped tiles, which have no short box).
  u32 last_b_box_rows;
  // The L2 policy of B's loads (a value from kiln/ptx/cache_policy.cuh): fp8_gemm_b_cache_policy(BLOCK_M, m).
  u64 b_cache_policy;
  // Kernels that take K at run time (the weight-gradient form, kK = kFp8GemmRunTimeK): ceil(K / 128) >= 1, and
  // the tile order's group height in m units (a power of two; the compile-time kernels' kGroupM). Unused by the
  // others.
  u32 num_k_blocks;
  u32 group_m;
  // The weight-gradient form with no C (D = A . B^T): 1 makes its epilogue store D's boxes through tma_d instead
  // of adding them into D, which then needs no zeroing first (4 bytes of D traffic an element, not a memset's 4
  // and a read-modify-write's 8) and no prefetch. 0 everywhere else.
  u32 store_d;
  // The weight-gradient form: how many of the kernel's stages its pipeline uses, 1..kStages (0 or more: all). At
  // short K the host runs fewer than were compiled, so that the producer runs fewer tiles ahead
  // (fp8_gemm_ring_stages in src/ops/fp8_gemm_heuristic.hpp); the shared memory stays laid out for all of them.
  // Unused by the others, whose ring is always kStages.
  u32 ring_stages;
  // The m-grouped form (Fp8Gemm<..., kMGrouped = true>, m_grouped_fp8_gemm_nt_contiguous): each of the M rows'
  // group (int32, -1 for padding rows), read at each m block's first row, and the number of groups, whose B
  // ([N, K] each) and block scales lie one after the other in tma_b's rows and in sfb. Unused by the others.
  const i32* grouped_layout;
  u32 num_groups;
};

// The k-grouped weight-gradient GEMM in one launch (Fp8Gemm<..., kKGrouped = true>): group g computes
// D[d_group[g]] += A_g . B_g^T, where A_g is [M, K_g] and B_g [N, K_g], each row-major with its own row stride
// K_g, so each group has its own maps of A and B (boxed whole: no short last box, TMA zero-fills past M and N).
// Their scales are columns [kb_offset[g], + K_g / 128) of one MN-major tensor each (base.tma_sfa and
// base.tma_sfb over every group's K blocks), and D is [G, M, N] (base.tma_d: fp32, dims {N, M, G}, box
// {fp8_gemm_reduce_staging(...).cols, kFp8GemmReduceRows, 1}). Groups with no K are left out by the host (D[g] = C[g]
// needs no kernel), so every k_blocks[g] >= 1. One launch takes at most kFp8GemmMaxLaunchGroups groups: the struct is
// the kernel's only parameter, 8.8 KB of the 32 KB a launch may pass (CUDA 12.1 and later).
constexpr u32 kFp8GemmMaxLaunchGroups = 32;

struct alignas(64) Fp8GemmGroupedParams {
  Fp8GemmParams base;  // as above, less tma_a, tma_b and their last-block maps, which come per group
  TmaDescriptor tma_a[kFp8GemmMaxLaunchGroups];  // group g's A: u8 dims {K_g, M}, box {128, BLOCK_M}, 128B swizzle
  TmaDescriptor tma_b[kFp8GemmMaxLaunchGroups];  // its B: dims {K_g, N} box {128, BLOCK_N} (or the 5-D view)
  u32 k_blocks[kFp8GemmMaxLaunchGroups];         // K_g / 128 >= 1
  u32 kb_offset[kFp8GemmMaxLaunchGroups];        // the group's first K block in the scales
  u32 d_group[kFp8GemmMaxLaunchGroups];          // its index along D's first dimension
  u32 num_groups;                                // 1..kFp8GemmMaxLaunchGroups
  u32 units_per_group;                           // tiles (work units) of one group's M x N
};

}  // namespace kiln
