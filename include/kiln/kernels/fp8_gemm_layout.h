// Shared-memory layout of the FP8 GEMM kernel, as constexpr arithmetic both the host (to size the launch
// and pick the stage count without instantiating the kernel) and the device template use.
//
// With the TMA-store epilogue, first a bf16 staging tile for D: BLOCK_N / store_cols column groups, each
// [BLOCK_M][store_cols] bf16 with a store_cols * 2-byte swizzle (the TMA store's box is {store_cols, 64}).
// Per pipeline stage: an A tile [BLOCK_M][128] e4m3, a B tile [BLOCK_N][128] e4m3 (both written by TMA with
// 128-byte swizzle, so each starts 1024-byte aligned), A's scales for the tile [BLOCK_M] fp32 and B's
// scales: the tile's one or two 128x128-block scales, or one per piece of a column-mapped tile (inference form),
// or [BLOCK_N] fp32 (weight-gradient form, B scaled per row). Then a "full" and an "empty" mbarrier per stage.
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
constexpr u32 kFp8GemmRunTimeK = 0;         // Fp8Gemm's kK for a kernel that takes K at run time (weight gradients)
constexpr u32 kFp8GemmMaxStages = 16;
constexpr u32 kHopperSmemPerBlock = 232448; // 227 KB: the opt-in dynamic shared memory limit of H100/H200
constexpr u32 kFp8GemmProducerThreads = 128;

constexpr u32 fp8_gemm_align_up(u32 x, u32 a) { return (x + a - 1) / a * a; }

// log2 of a power of two (the tile order's group height).
KILN_HOST_DEVICE constexpr u32 fp8_gemm_log2(u32 x) { return x <= 1 ? 0 : 1 + fp8_gemm_log2(x / 2); }

// Columns of D per TMA store box with the TMA-store epilogue: the widest of 64 / 32 / 16 that divides
// BLOCK_N, so a box never reaches into the next tile. The staging swizzle is store_cols * 2 bytes (128, 64
// or 32), which keeps the stmatrix writes free of bank conflicts.
constexpr u32 fp8_gemm_store_cols(u32 block_n) { return block_n % 64 == 0 ? 64 : block_n % 32 == 0 ? 32 : 16; }
// Rows per TMA store box: each math warpgroup stores its own 64 rows.
constexpr u32 kFp8GemmStoreRows = 64;

// gcd(BLOCK_N, 128): tiles start at multiples of it into B's 128-column scale blocks (BLOCK_N's lowest set bit,
// at most 128).
constexpr u32 fp8_gemm_gcd_128(u32 block_n) {
  const u32 low_bit = block_n & (0u - block_n);
  return low_bit < 128 ? low_bit : 128;
}

// Column map (fp8_gemm_column_map): a tile BLOCK_N wide is cut into pieces, the set bits of BLOCK_N from the
// highest (160 = 128 + 32, 176 = 128 + 32 + 16, 112 = 64 + 32 + 16), and piece j of tile t of T covers columns
// [O_j T + P_j t, + P_j) of D, where P_j is its width and O_j the widths before it. So piece 0 of every tile
// is a whole block of P_0 columns, and the narrower pieces of all tiles fill the columns after them in turn:
// 160-wide tiles are a 128-column block each, then a 32-column quarter of one of the blocks after 128 T. Each
// piece starts at a multiple of its own width (O_j is a sum of wider powers of two), so none straddles one of
// B's 128-column scale blocks, and a tile's B scale switches only at its pieces' fixed boundaries. T tiles
// cover [0, BLOCK_N T), all of N; pieces past N are never stored. At most four pieces (BLOCK_N < 256).
// (Straight-line code, no loops: the kernel evaluates these on constants inside unrolled loops, where they must
// fold to constants.)
KILN_HOST_DEVICE constexpr u32 fp8_gemm_high_bit(u32 x) {  // x < 256, pieces of at least 16 columns
  return x >= 128 ? 128 : x >= 64 ? 64 : x >= 32 ? 32 : x >= 16 ? 16 : 0;
}

// Width of piece j (the j-th set bit of BLOCK_N from the highest), 0 past the last.
KILN_HOST_DEVICE constexpr u32 fp8_gemm_map_piece_cols(u32 block_n, u32 j) {
  const u32 p0 = fp8_gemm_high_bit(block_n), p1 = fp8_gemm_high_bit(block_n - p0);
  const u32 p2 = fp8_gemm_high_bit(block_n - p0 - p1), p3 = fp8_gemm_high_bit(block_n - p0 - p1 - p2);
  return j == 0 ? p0 : j == 1 ? p1 : j == 2 ? p2 : j == 3 ? p3 : 0;
}

constexpr u32 fp8_gemm_map_pieces(u32 block_n) {
  return (fp8_gemm_map_piece_cols(block_n, 0) != 0 ? 1 : 0) + (fp8_gemm_map_piece_cols(block_n, 1) != 0 ? 1 : 0) +
         (fp8_gemm_map_piece_cols(block_n, 2) != 0 ? 1 : 0) + (fp8_gemm_map_piece_cols(block_n, 3) != 0 ? 1 : 0);
}

// The tile-local column where piece j starts (the widths of the pieces before it).
KILN_HOST_DEVICE constexpr u32 fp8_gemm_map_piece_first(u32 block_n, u32 j) {
  return (j > 0 ? fp8_gemm_map_piece_cols(block_n, 0) : 0) + (j > 1 ? fp8_gemm_map_piece_cols(block_n, 1) : 0) +
         (j > 2 ? fp8_gemm_map_piece_cols(block_n, 2) : 0);
}

// The piece that holds tile-local column c (< BLOCK_N).
KILN_HOST_DEVICE constexpr u32 fp8_gemm_map_piece_of(u32 block_n, u32 c) {
  return (c >= fp8_gemm_map_piece_first(block_n, 1) ? 1 : 0) +
         (fp8_gemm_map_piece_cols(block_n, 2) != 0 && c >= fp8_gemm_map_piece_first(block_n, 2) ? 1 : 0) +
         (fp8_gemm_map_piece_cols(block_n, 3) != 0 && c >= fp8_gemm_map_piece_first(block_n, 3) ? 1 : 0);
}

// The column of D that tile-local column c of tile `tile` (of `num_tiles` along N) maps to.
KILN_HOST_DEVICE constexpr u32 fp8_gemm_map_column(u32 block_n, u32 num_tiles, u32 tile, u32 c) {
  const u32 j = fp8_gemm_map_piece_of(block_n, c);
  const u32 first = fp8_gemm_map_piece_first(block_n, j);
  return first * num_tiles + fp8_gemm_map_piece_cols(block_n, j) * tile + (c - first);
}

// K groups in one launch (Fp8Gemm's kKGrouped): the K blocks a CTA walks whose work units are first, first +
// stride, ... below num_groups * units_per_group, group g's units being [g * units_per_group, (g + 1) *
// units_per_group) with k_blocks[g] blocks each. A closed form per group: below x the CTA has before(x) units.
KILN_HOST_DEVICE constexpr u32 fp8_gemm_grouped_blocks(const u32* k_blocks, u32 num_groups, u32 units_per_group,
                                                       u32 first, u32 stride) {
  const auto before = [first, stride](u32 x) -> u32 { return x > first ? (x - first - 1) / stride + 1 : 0; };
  u32 blocks = 0;
  for (u32 g = 0; g < num_groups; ++g)
    blocks += k_blocks[g] * (before((g + 1) * units_per_group) - before(g * units_per_group));
  return blocks;
}

// The weight-gradient form's epilogue adds each warpgroup's 64 rows of the tile into D through TMA's
// reduce-add (cp.reduce.async.bulk.tensor .add, done in L2), one box of 64 rows x `cols` fp32 at a time, staged in
// `buffers` alternating buffers per warpgroup at the front of shared memory, rows swizzled as wide as they are
// (64 or 128 bytes). Chosen by fp8_gemm_reduce_staging, after the stages:
//   - 32 columns (whole 128-byte lines a row) in two 8 KB buffers, where BLOCK_N is a multiple of 32 and the
//     tile's stages leave room for them (128x160 at 5 stages, 128x128 at 5, 128x192 at 4: the plans' counts,
//     fp8_gemm_accumulate_stages; not 128x128 at 6 or 128x192 at 5, which only a forced stage count gives);
//   - else, at BLOCK_N = 192, 32 columns through one 8 KB buffer, each box waiting for the previous box's read;
//   - else 16 columns in two 4 KB buffers.
// Each keeps to the 8 KB per warpgroup that the stage count is sized with, or to room the stages leave.
// Measured on the H200 against 16 columns everywhere (thirty-ninth session, A/B old-new-new-old, same bits):
// 128x160 with two buffers 4096 x 7168 x 512 / 1024 4.5 % / 2.8 % faster, the 32-expert gate/up gradient 5 %,
// level at K = 4096. One buffer is taken where it measured faster only: 128x192 1.8-3.1 % faster on seven of
// eight dense calls (level on the eighth) and 4 % on two 32-expert calls, but 128x160 6 % slower at K = 1024 and
// 128x128 2 % slower, for reasons not found. 64x128 with two buffers: 6-21 % faster than with 16 columns (fortieth
// session; 64x64 level).
// The fragment's 16-byte writes (B interleaved) take 15 % more wavefronts than the minimum at 64-byte rows; its
// 8-byte ones put two of each half-warp's four rows on the same banks at 64-byte rows (4.5 wavefronts a store
// where 2 would do; ncu on the H200), but staging those conflict-free, as two boxes of 8 columns, measured level
// (thirty-first session). At 128-byte rows odd rows write their pieces in another order (fp8_gemm_reduce_piece_flip).
constexpr u32 kFp8GemmReduceRows = 64;

struct Fp8GemmReduceStaging {
  u32 cols = 16;    // fp32 columns of a box (and of a staged row)
  u32 buffers = 2;  // alternating buffers per 64-row warpgroup
  constexpr u32 buffer_bytes() const { return kFp8GemmReduceRows * cols * 4; }
  constexpr u32 warpgroup_bytes() const { return buffers * buffer_bytes(); }
};
constexpr Fp8GemmReduceStaging kFp8GemmNarrowReduce{16, 2};
constexpr Fp8GemmReduceStaging kFp8GemmWideReduce{32, 2};
constexpr Fp8GemmReduceStaging kFp8GemmWideReduceOneBuffer{32, 1};

// The staging's addressing, shared by the kernel's writes (Fp8Gemm::reduce_tile_tma) and the unit test that checks
// them against TMA's swizzle and the WGMMA fragment (tests/unit/ops_fp8_gemm_reduce_staging_test.cpp).
//
// Byte offset of 16-byte unit `unit` of staged row `row` in a buffer of `cols`-fp32 rows (64 or 128 bytes),
// swizzled as the map declares (the swizzle spans a row): the unit index XOR the row's address bits above 128 bytes.
KILN_HOST_DEVICE constexpr u32 fp8_gemm_reduce_offset(u32 cols, u32 row, u32 unit) {
  const u32 row_bytes = cols * 4;
  return row * row_bytes + (unit ^ ((row * row_bytes >> 7) & (row_bytes / 16 - 1))) * 16;
}

// A thread stages its two rows of a box (r, r + 8 of its warp's 16) in pieces of the box's columns: with B's rows
// interleaved, 16-column groups, one 16-byte unit each (the group's columns 4q .. 4q + 3, q = lane % 4); else
// 8-column fragment chunks, 8 bytes each (the chunk's columns 2q, 2q + 1).
KILN_HOST_DEVICE constexpr u32 fp8_gemm_reduce_piece_cols(bool interleaved_b) { return interleaved_b ? 16 : 8; }

// At its step s a thread of an odd row (lane / 4 odd) writes piece s ^ flip. At 128-byte rows the swizzle puts the
// same piece of two adjacent rows on the same banks; odd rows starting half a row later spread a warp's writes over
// all of them. At 64-byte rows the swizzle alone does (flip 0).
KILN_HOST_DEVICE constexpr u32 fp8_gemm_reduce_piece_flip(u32 cols, bool interleaved_b) {
  return cols * 4 == 128 ? 16 / fp8_gemm_reduce_piece_cols(interleaved_b) : 0;
}

// The accumulator index of the first value of piece `piece` of box `box` in row half `r` (0: row r, 1: row r + 8).
// WGMMA's fragment holds 8-column chunk j's values of rows r, r + 8 at 4j + {0, 1}, 4j + {2, 3}. Interleaved, 16-column
// group g is chunks 2g and 2g + 1: its values are that index + {0, 1, 4, 5}; else chunk j's: + {0, 1}.
KILN_HOST_DEVICE constexpr u32 fp8_gemm_reduce_accum_index(u32 cols, bool interleaved_b, u32 box, u32 piece, u32 r) {
  const u32 piece_cols = fp8_gemm_reduce_piece_cols(interleaved_b);
  return (box * (cols / piece_cols) + piece) * piece_cols / 2 + 2 * r;
}

// Where the thread with q = lane % 4 writes piece `piece` of staged row `row`.
KILN_HOST_DEVICE constexpr u32 fp8_gemm_reduce_piece_offset(u32 cols, bool interleaved_b, u32 row, u32 piece, u32 q) {
  return interleaved_b ? fp8_gemm_reduce_offset(cols, row, 4 * piece + q)
                       : fp8_gemm_reduce_offset(cols, row, 2 * piece + q / 2) + (q % 2) * 8;
}

// The weight-gradient form's B tile with its rows interleaved (where N is a multiple of 16): within each 16 rows,
// shared-memory row w = 8a + 2q + e holds B's row 4q + 2a + e (a, e in {0, 1}, q in 0..3), loaded through a 5-D
// view of B (tma_b: dims {K, 2, 4, 2, N / 16} with row strides {1, 4, 2, 16}). WGMMA column w is then D's
// column 4q + 2a + e of its 16, so the thread that holds columns 8a + 2q + {0, 1} of the two 8-column chunks a
// = 0, 1 (lane % 4 = q) holds D's columns 4q .. 4q + 3: one 16-byte read of B's per-column scales serves two
// chunks of its promotion, and one 16-byte write a row of its epilogue's staging. Measured on the H200 against
// the plain order (thirty-first session, twelve weight-gradient shapes, every tile): 128x160 and 128x176 6 %
// faster (geometric mean 0.938 and 0.942), but 128x192 5 % slower and 128x128, 128x64, 64x128, 64x64 0-2 %
// slower, for reasons not found (the SASS of all of them lost 10-13 instructions and 30-40 static stall cycles
// a K block). So it is taken where it measured faster only.
constexpr bool fp8_gemm_interleaved_b(bool accumulate, u32 n, u32 block_n) {
  return accumulate && n % 16 == 0 && (block_n == 160 || block_n == 176);
}

struct Fp8GemmLayout {
  u32 d_offset = 0, d_bytes = 0;  // D staging (TMA-store or TMA reduce-add epilogue; 0 bytes without either)
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

// The layout for one (BLOCK_M, BLOCK_N, stages, B-scale form) with `d_bytes` of D staging in front (fp8_gemm_layout
// below says how many). BLOCK_M and BLOCK_N must be multiples of 8 (whole swizzle atoms) and of 4 (a scale box is
// 16-byte granular).
constexpr Fp8GemmLayout fp8_gemm_layout_with_d(u32 block_m, u32 block_n, u32 stages, u32 d_bytes,
                                               bool sfb_per_row, u32 split_k) {
  Fp8GemmLayout l;
  l.d_offset = 0;
  l.d_bytes = d_bytes;
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

// The weight-gradient form's reduce-add staging for a tile with `stages` stages (see kFp8GemmReduceRows): the wide
// boxes in two buffers where they fit beside the stages, else in one at BLOCK_N = 192, else the narrow ones.
constexpr Fp8GemmReduceStaging fp8_gemm_reduce_staging(u32 block_m, u32 block_n, u32 stages, u32 split_k = 1) {
  if (block_n % kFp8GemmWideReduce.cols != 0) return kFp8GemmNarrowReduce;
  const u32 wide_bytes = block_m / 64 * kFp8GemmWideReduce.warpgroup_bytes();
  if (fp8_gemm_layout_with_d(block_m, block_n, stages, wide_bytes, true, split_k).total_bytes <= kHopperSmemPerBlock)
    return kFp8GemmWideReduce;
  return block_n == 192 ? kFp8GemmWideReduceOneBuffer : kFp8GemmNarrowReduce;
}

// The layout for one (BLOCK_M, BLOCK_N, stages, epilogue, B-scale form). D's staging: the TMA-store epilogue's
// bf16 tile, or the weight-gradient form's reduce-add buffers (fp8_gemm_reduce_staging), or none (direct stores).
constexpr Fp8GemmLayout fp8_gemm_layout(u32 block_m, u32 block_n, u32 stages, bool tma_store,
                                        bool sfb_per_row = false, u32 split_k = 1) {
  const u32 d_bytes =
      tma_store     ? fp8_gemm_align_up(block_m * block_n * 2, 1024)
      : sfb_per_row ? block_m / 64 * fp8_gemm_reduce_staging(block_m, block_n, stages, split_k).warpgroup_bytes()
                    : 0;
  return fp8_gemm_layout_with_d(block_m, block_n, stages, d_bytes, sfb_per_row, split_k);
}

// The most stages (<= kFp8GemmMaxStages) whose layout fits `smem_bytes`; 0 when not even one fits.
constexpr u32 fp8_gemm_max_stages(u32 block_m, u32 block_n, bool tma_store, u32 smem_bytes = kHopperSmemPerBlock,
                                   bool sfb_per_row = false, u32 split_k = 1) {
  u32 best = 0;
  for (u32 s = 1; s <= kFp8GemmMaxStages; ++s)
    if (fp8_gemm_layout(block_m, block_n, s, tma_store, sfb_per_row, split_k).total_bytes <= smem_bytes) best = s;
  return best;
}

// The weight-gradient form's stages unless forced: for 128-row tiles at least 128 wide, the most that leave room
// for the wide boxes in two buffers (fp8_gemm_reduce_staging); else as many as fit. That is a stage fewer than fit
// at 128x128 (5 of 6, where 6 keeps the narrow boxes) and 128x192 (4 of 5, where 5 has one buffer); the stage costs
// less than the 32-column boxes repay. Measured on the H100 (forty-third session, bench/probes/wgrad_short_k_stages.py,
// each kernel forced to each count, 4096 x 7168, 7168 x 2048 and 2048 x 7168 at K = 1024..8192): 128x128 with five
// 0.969 of its six on geometric mean without C and with C, 128x192 with four 0.970 and 0.983 of its five; D's bits
// equal. 128x64 (7 of 8) and 64x64 (12 of 13) would gain the wide boxes the same way, but are not yet timed so.
constexpr u32 fp8_gemm_accumulate_stages(u32 block_m, u32 block_n, u32 smem_bytes = kHopperSmemPerBlock,
                                         u32 split_k = 1) {
  const u32 fit = fp8_gemm_max_stages(block_m, block_n, false, smem_bytes, true, split_k);
  if (block_m != 128 || block_n < 128) return fit;
  for (u32 s = fit; s > 0; --s) {
    const Fp8GemmReduceStaging staging = fp8_gemm_reduce_staging(block_m, block_n, s, split_k);
    const bool wide = staging.cols == kFp8GemmWideReduce.cols && staging.buffers == kFp8GemmWideReduce.buffers;
    if (wide && fp8_gemm_layout(block_m, block_n, s, false, true, split_k).total_bytes <= smem_bytes) return s;
  }
  return fit;
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


// Column-mapped tiles (the kernel's Schedule, loads, promotion and stores): the one-wave tiles of the inference
// form whose B scale would switch at more than two columns if tiles were contiguous (a tile starting at a
// multiple of gcd(BLOCK_N, 128) into a 128-column block: 4 columns for 96 and 160, 8 for 112, 144 and 176) take
// their columns by the column map above, so the switch columns are the pieces' fixed boundaries and one
// compiled walk serves every tile. (One-wave tiles of two columns, 192, and the two-wave tiles choose per slice.)
constexpr bool fp8_gemm_column_map(u32 block_m, u32 block_n, u32 num_math_warpgroups, bool accumulate) {
  const bool one_wave = block_m == 64 * num_math_warpgroups;
  return !accumulate && one_wave && 128 % block_n != 0 && 128 / fp8_gemm_gcd_128(block_n) > 2;
}

// B's TMA boxes for a column-mapped tile, one per piece where the tensor maps allow (a map's box is fixed): piece
// 0 through tma_b (or, in pairs sharing B, cluster_m boxes of its rows, one per CTA), piece 1 through
// tma_b_last, pieces 2 and 3 in boxes of the narrowest piece's rows through tma_b_narrow (160: 128 + 32, 176:
// 128 + 32 + 16, 240: 128 + 64 + 2 x 16 + 16). Boxes of the narrowest piece throughout (176: eleven of 16
// rows per stage) ran 128x176 20-28 % slower on the H200 than the class walks' one box, and 128x160's five 1.5-6 %;
// with 176's pieces 1 and 2 in 16-row boxes (four per stage) it was still 1.4-2.1 % slower (twenty-eighth session).
constexpr u32 fp8_gemm_map_big_box_rows(u32 block_n, u32 cluster_m) {
  return fp8_gemm_map_piece_cols(block_n, 0) / cluster_m;
}
constexpr u32 fp8_gemm_map_narrow_box_rows(u32 block_n) { return fp8_gemm_gcd_128(block_n); }

// B's TMA maps for one configuration at N columns, as the kernel reads them (the launch path and the kernel
// harness encode them from this): the rows of tma_b's, tma_b_last's and tma_b_narrow's boxes (0: not read) and
// Fp8GemmParams::last_b_box_rows. Contiguous tiles: the tile (each CTA of a pair sharing B half of it) and the
// last n block's short box (fp8_gemm_last_box_rows); column-mapped tiles: the boxes above, no short box.
struct Fp8GemmBBoxes {
  u32 b_rows = 0, b_last_rows = 0, narrow_rows = 0, last_b_box_rows = 0;
};
constexpr Fp8GemmBBoxes fp8_gemm_b_boxes(u32 block_m, u32 block_n, u32 num_math_warpgroups, bool accumulate,
                                         u32 cluster_m, u32 n) {
  Fp8GemmBBoxes boxes;
  if (fp8_gemm_column_map(block_m, block_n, num_math_warpgroups, accumulate)) {
    boxes.b_rows = fp8_gemm_map_big_box_rows(block_n, cluster_m);
    boxes.b_last_rows = fp8_gemm_map_piece_cols(block_n, 1);
    boxes.narrow_rows = fp8_gemm_map_pieces(block_n) > 2 ? fp8_gemm_map_narrow_box_rows(block_n) : 0;
    boxes.last_b_box_rows = block_n;
  } else {
    boxes.last_b_box_rows = fp8_gemm_last_box_rows(block_n, n, cluster_m);
    boxes.b_rows = block_n / cluster_m;
    boxes.b_last_rows = boxes.last_b_box_rows / cluster_m;
  }
  return boxes;
}

// Threads per CTA: one producer warpgroup plus the math warpgroups (one per 64 rows of BLOCK_M).
constexpr u32 fp8_gemm_num_threads(u32 num_math_warpgroups) {
  return kFp8GemmProducerThreads + 128 * num_math_warpgroups;
}

}  // namespace kiln::kernels
