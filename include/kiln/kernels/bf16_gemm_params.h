// The BF16 GEMM kernel's parameters and shared-memory layout (bf16_gemm.cuh), shared by the host launch code
// (plain C++) and the device template:
//
//   D[M, N] (bf16 or fp32) (+)= A[M, K] (bf16) . B[N, K]^T (bf16)        summed in FP32 by the tensor cores
//
// A and B are K-major or MN-major; one GEMM, or the m-grouped GEMMs of MoE experts (kGrouping). N and K are
// compile-time template arguments of the kernel, M is here.
//
// Shared memory: a staging tile for D's TMA stores (bf16 or fp32, as the epilogue writes D), then per pipeline stage
// an A tile [BLOCK_M][64] and a B tile [BLOCK_N][64] bf16 (one 128-byte swizzled row of K each, as TMA writes them;
// each tile 1024-byte aligned), then a "full" and an "empty" mbarrier per stage:
//
//   [D staging][A stages][B stages][full][empty]
#pragma once

#include "kiln/kernels/tma_descriptor.h"
#include "kiln/ptx/cache_policy.cuh"
#include "kiln/ptx/types.cuh"

namespace kiln {

struct alignas(64) Bf16GemmParams {
  // A: bf16 [M, K], dims {K, M}, box {64, BLOCK_M}, 128-byte swizzle, out-of-bounds zero fill. M-major (the kernel's
  // kBf16GemmMnMajorA): dims {M, K}, box {64, 64}. The masked form: every group's [M, K] one after the other, dims
  // {K, G * M}.
  TmaDescriptor tma_a;
  // The same map boxed {64, last_box_rows}, for the last m block (the same as tma_a where that is BLOCK_M; unused
  // for an M-major A).
  TmaDescriptor tma_a_last;
  // B: bf16 [N, K], dims {K, N}, box {64, BLOCK_N} (BLOCK_N / 2 for CTA pairs sharing B), 128-byte swizzle,
  // out-of-bounds zero fill. N-major (kBf16GemmMnMajorB): dims {N, K}, box {64, 64}. The m-grouped forms: every
  // group's [N, K] one after the other, dims {K, G * N}; the contiguous form's N-major B 3-D, dims {N, K, G}, box
  // {64, 64, 1}.
  TmaDescriptor tma_b;
  // D: bf16 (or fp32, per the kernel's epilogue) [M, N] with row stride ldd, dims {N, M}, box
  // {bf16_gemm_store_cols(BLOCK_N, out_bytes), 64}, a swizzle of store_cols * out_bytes bytes (ldd * out_bytes and
  // the base 16-byte aligned). The masked form's is 3-D, {N, M, G} with the group as its plane, so that a store past
  // a group's rows is clipped rather than written into the next group's.
  TmaDescriptor tma_d;
  // The L2 policy of B's loads (kiln/ptx/cache_policy.cuh): bf16_gemm_b_cache_policy(BLOCK_M, m).
  u64 b_cache_policy;
  // Rows of A and D; > 0 (the host does not launch for M = 0).
  u32 m;
  // Rows of A's box for the last m block: bf16_gemm_last_box_rows(BLOCK_M, m).
  u32 last_box_rows;
  // The m-grouped forms (the kernel's kGrouping; nullptr and 0 otherwise). Contiguous: each of A's rows' group
  // (m_indices, [m]). Masked: each group's valid rows (masked_m, [num_groups]), m being one group's rows.
  const i32* grouped_layout;
  u32 num_groups;
};

// The k-grouped kernel's parameters (Bf16Gemm<..., kGrouping = kBf16GemmKGrouped>): `base` as above with m, N's
// columns and D (fp32 [G, M, N]: tma_d 3-D, dims {N, M, G}, the group's plane d_group[g]); base.tma_a, tma_a_last,
// tma_b and grouped_layout unused, base.num_groups = num_groups. Groups without tokens are left out by the host (their
// D needs no kernel), so every k_blocks[g] >= 1. One launch takes at most kBf16GemmMaxLaunchGroups groups: the struct
// is the kernel's only parameter, 8.8 KB of the 32 KB a launch may pass (CUDA 12.1 and later).
constexpr u32 kBf16GemmMaxLaunchGroups = 32;

struct alignas(64) Bf16GemmKGroupedParams {
  Bf16GemmParams base;
  // Group g's A: its [K_g, M] rows of A, M-major, dims {M, K_g}, box {64, 64}, 128-byte swizzle; B likewise [K_g, N].
  TmaDescriptor tma_a[kBf16GemmMaxLaunchGroups];
  TmaDescriptor tma_b[kBf16GemmMaxLaunchGroups];
  u32 k_blocks[kBf16GemmMaxLaunchGroups];  // ceil(K_g / 64) >= 1
  u32 d_group[kBf16GemmMaxLaunchGroups];   // the group's plane of D
};

namespace kernels {

constexpr u32 kBf16GemmBlockK = 64;             // K per stage: one 128-byte swizzled row of bf16
constexpr u32 kBf16GemmMaxStages = 32;
constexpr u32 kBf16GemmDefaultGroupM = 8;       // the tile order's group height, in m units
constexpr u32 kBf16GemmSmemPerBlock = 232448;   // 227 KB: the opt-in dynamic shared memory limit of H100/H200
constexpr u32 kBf16GemmProducerThreads = 128;

// What the epilogue does with D (the kernel's kEpilogue): round to bf16 and store; store fp32; add fp32 into D (TMA
// reduce-adds: D = C + A . B^T with C already in D).
constexpr u32 kBf16GemmStoreBf16 = 0;
constexpr u32 kBf16GemmStoreF32 = 1;
constexpr u32 kBf16GemmAddF32 = 2;
constexpr u32 bf16_gemm_out_bytes(u32 epilogue) { return epilogue == kBf16GemmStoreBf16 ? 2 : 4; }

// The kernel's kGrouping: one GEMM; MoE experts' GEMMs in one launch, A's rows grouped contiguously by expert (B
// [G, N, K], grouped_layout naming each row's group); or each expert's rows in a block of its own of which the first
// masked_m[g] are valid (A [G, M, K], D [G, M, N]).
constexpr u32 kBf16GemmDense = 0;
constexpr u32 kBf16GemmMGrouped = 1;
constexpr u32 kBf16GemmMasked = 2;

// The k-grouped form (kBf16GemmKGrouped: the weight gradients of MoE experts, k_grouped_bf16_gemm_tn_contiguous):
// group g computes D[d_group[g]] (fp32 [M, N], stored or added into) = A_g^T . B_g, where A_g is [K_g, M] and B_g
// [K_g, N], each group's rows of tokens one after the other in A and B. Its K is the group's, at run time (the
// kernel's kK is kBf16GemmRunTimeK), and each group has its own maps of A and B, so that a box at a group's K tail is
// zero-filled by TMA instead of read from the next group's tokens.
constexpr u32 kBf16GemmKGrouped = 3;
constexpr u32 kBf16GemmRunTimeK = 0;

// The kernel's kMnMajor bits: A stored M-major (A^T row-major: [K, M]), B stored N-major ([K, N]).
constexpr u32 kBf16GemmMnMajorA = 1;
constexpr u32 kBf16GemmMnMajorB = 2;

constexpr u32 bf16_gemm_align_up(u32 x, u32 a) { return (x + a - 1) / a * a; }

// Columns of D per TMA store box: the widest of 128 / 64 / 32 bytes of them that divides BLOCK_N (64 / 32 / 16 bf16,
// 32 / 16 fp32, BLOCK_N being a multiple of 16), so a box never reaches into the next tile; the staging rows are
// swizzled by that many bytes, which keeps the epilogue's shared-memory writes free of bank conflicts.
constexpr u32 bf16_gemm_store_cols(u32 block_n, u32 out_bytes = 2) {
  const u32 widest = 128 / out_bytes;
  return block_n % widest == 0 ? widest : block_n % (widest / 2) == 0 ? widest / 2 : widest / 4;
}

struct Bf16GemmLayout {
  u32 d_offset = 0, d_bytes = 0;
  u32 a_offset = 0, a_stage_bytes = 0;
  u32 b_offset = 0, b_stage_bytes = 0;
  u32 full_barrier_offset = 0, empty_barrier_offset = 0;
  u32 total_bytes = 0;     // the dynamic shared memory a launch requests
  u32 stage_tx_bytes = 0;  // bytes the TMA loads of one stage deliver (the full barrier's transaction count)
};

// BLOCK_M and BLOCK_N multiples of 8 (whole 1024-byte swizzle atoms); a staging tile of `staging_cols` columns of
// `out_bytes` (2: bf16, 4: fp32).
constexpr Bf16GemmLayout bf16_gemm_layout_with_staging(u32 block_m, u32 block_n, u32 stages, u32 staging_cols,
                                                       u32 out_bytes = 2) {
  Bf16GemmLayout l;
  l.d_bytes = bf16_gemm_align_up(block_m * staging_cols * out_bytes, 1024);
  l.a_stage_bytes = block_m * kBf16GemmBlockK * 2;
  l.b_stage_bytes = block_n * kBf16GemmBlockK * 2;
  l.a_offset = l.d_offset + l.d_bytes;
  l.b_offset = bf16_gemm_align_up(l.a_offset + stages * l.a_stage_bytes, 1024);
  l.full_barrier_offset = l.b_offset + stages * l.b_stage_bytes;
  l.empty_barrier_offset = l.full_barrier_offset + stages * 8;
  l.total_bytes = l.empty_barrier_offset + stages * 8;
  l.stage_tx_bytes = l.a_stage_bytes + l.b_stage_bytes;
  return l;
}

// Columns of D's staging tile: the whole tile's, or, where that leaves no room for `stages` (a stage count asked for
// beyond bf16_gemm_max_stages), the most whole store boxes that fit and cut the tile into equal passes, which the
// epilogue stores one after the other (each waits for the previous one's stores to have read the staging tile).
constexpr u32 bf16_gemm_staging_cols(u32 block_m, u32 block_n, u32 stages, u32 out_bytes = 2) {
  const u32 box = bf16_gemm_store_cols(block_n, out_bytes), boxes = block_n / box;
  for (u32 g = boxes; g > 1; --g)
    if (boxes % g == 0 && bf16_gemm_layout_with_staging(block_m, block_n, stages, g * box, out_bytes).total_bytes <=
                              kBf16GemmSmemPerBlock)
      return g * box;
  return box;
}

constexpr Bf16GemmLayout bf16_gemm_layout(u32 block_m, u32 block_n, u32 stages, u32 out_bytes = 2) {
  return bf16_gemm_layout_with_staging(block_m, block_n, stages,
                                       bf16_gemm_staging_cols(block_m, block_n, stages, out_bytes), out_bytes);
}

// The most stages (<= kBf16GemmMaxStages) beside a whole staging tile that fit `smem_bytes` (what the plan uses); 0
// when not even one fits.
constexpr u32 bf16_gemm_max_stages(u32 block_m, u32 block_n, u32 smem_bytes = kBf16GemmSmemPerBlock,
                                   u32 out_bytes = 2) {
  u32 best = 0;
  for (u32 s = 1; s <= kBf16GemmMaxStages; ++s)
    if (bf16_gemm_layout_with_staging(block_m, block_n, s, block_n, out_bytes).total_bytes <= smem_bytes) best = s;
  return best;
}

// The most stages an override may ask for: with a part of a staging tile where a whole one leaves no room.
constexpr u32 bf16_gemm_max_forced_stages(u32 block_m, u32 block_n, u32 smem_bytes = kBf16GemmSmemPerBlock,
                                          u32 out_bytes = 2) {
  u32 best = 0;
  for (u32 s = 1; s <= kBf16GemmMaxStages; ++s)
    if (bf16_gemm_layout(block_m, block_n, s, out_bytes).total_bytes <= smem_bytes) best = s;
  return best;
}

// B's L2 policy: streamed (evict first) where each B tile is read by one or two m blocks only, so it does not push
// A's tiles, which every n block reads, out of L2; normal otherwise.
constexpr u64 bf16_gemm_b_cache_policy(u32 block_m, u32 m) {
  return (m + block_m - 1) / block_m <= 2 ? ptx::kL2EvictFirst : ptx::kL2EvictNormal;
}

// Rows of A's TMA box for the last m block: its rows rounded up to 8 (a whole swizzle atom), at most BLOCK_M. A box of
// BLOCK_M would have TMA zero-fill the rest, which costs the SM as much shared-memory bandwidth as loading it: at M = 1
// a 64-row tile's stage is then 8 KB of A's zeros for 2-32 KB of B. The rows past the box keep an earlier stage's data
// and come out as garbage in rows of the accumulators that are never stored (each row of D depends on its row of A
// only, and the stores clip at M).
constexpr u32 bf16_gemm_last_box_rows(u32 block_m, u32 m) {
  const u32 rows = m - (m - 1) / block_m * block_m;  // in the last m block, 1..block_m
  const u32 box = (rows + 7) / 8 * 8;
  return box < block_m ? box : block_m;
}

// Threads per CTA: one producer warpgroup plus the math warpgroups.
constexpr u32 bf16_gemm_num_threads(u32 num_math_warpgroups) {
  return kBf16GemmProducerThreads + 128 * num_math_warpgroups;
}

}  // namespace kernels
}  // namespace kiln
