// FP8 GEMM with DeepSeek-V3 fine-grained scaling (sm_90a), first version:
//
//   D[M, N] (bf16) = sum over K blocks kb of  sfa[m, kb] * sfb[n / 128, kb] * (A[m, kb] . B[n, kb])
//
// A [M, K] and B [N, K] are e4m3, K-major; the scales and layouts are described in fp8_gemm_params.h.
//
// Structure (persistent, warp-specialised):
//   * one CTA per SM walks output tiles tile = blockIdx.x, blockIdx.x + gridDim.x, ...; tiles are ordered in
//     groups of kGroupM m-blocks (m fastest inside a group) so a wave of CTAs shares A and B panels in L2
//   * warpgroup kNumMathWarpgroups is the producer: one elected thread issues, per 128-wide K block, the TMA
//     loads of the A tile, the B tile and A's scales into a kStages-deep ring of shared-memory slots, each
//     guarded by a "full" mbarrier (transaction bytes) and an "empty" mbarrier (one arrival per math warp);
//   * math warpgroup w owns rows [64w, 64w + 64) of the tile: per K block it runs four
//     wgmma m64nNk32 e4m3 (128-byte-swizzled operands straight from shared memory) into a fresh FP32
//     partial tile, waits for them, frees the slot, and promotes the partial into the FP32 accumulator
//     with sfa[row] * sfb on the CUDA cores. The tensor cores' FP8 accumulation is not full FP32;
//     this two-level accumulation keeps the error to one 128-long K block;
//   * setmaxnreg moves registers from the producer (40) to the math warpgroups (232 / 240);
//   * kClusterM = 2: CTAs work in clusters of two on vertically adjacent tiles (same n block, m blocks 2u and
//     2u + 1), and each CTA loads half of the shared B tile and multicasts it to both, halving B's traffic
//     from L2. A slot is then free only when the math warps of both CTAs have released it, so each math
//     warp arrives on the empty barrier of every CTA in the cluster;
//   * kClusterN = 2, the same along N: CTA pairs on horizontally adjacent tiles (same m block, n blocks 2u and
//     2u + 1) each load half of the shared A tile's rows and multicast them (A's scales, one small box, are
//     loaded whole by the first CTA and multicast). With 256-row tiles A is two thirds of a stage's bytes, so
//     this halves more traffic than B's;
//   * epilogue (kTmaStore): each math warpgroup converts its 64 rows to bf16, writes them with stmatrix into
//     a swizzled staging tile and one thread issues TMA stores (which clip rows >= M and columns >= N); the
//     wait for those stores to finish reading the staging tile is deferred to the next tile's epilogue, so it
//     overlaps with the next main loop. Without kTmaStore: bf16 pairs stored straight from the accumulator
//     fragment with masked plain stores (no staging memory, one more pipeline stage).
//
// Edges: M is a runtime value (TMA zero-fills rows of A beyond M, or loads only align(M, 8) rows when
// M < BLOCK_M; stores are masked). N is compile-time, N % 8 == 0; K is compile-time in the inference form and a
// run-time value in the weight-gradient form (kK = kFp8GemmRunTimeK), K % 16 == 0 (TMA strides are 16-byte
// multiples); a K tail inside the last 128-block is zero-filled by TMA and contributes nothing.
#pragma once

#include "kiln/kernels/fp8_gemm_layout.h"
#include "kiln/kernels/fp8_gemm_params.h"
#include "kiln/kernels/gemm_schedule.cuh"
#include "kiln/ptx/cluster.cuh"
#include "kiln/ptx/convert.cuh"
#include "kiln/ptx/fence.cuh"
#include "kiln/ptx/mbarrier.cuh"
#include "kiln/ptx/memory.cuh"
#include "kiln/ptx/regalloc.cuh"
#include "kiln/ptx/tma.cuh"
#include "kiln/ptx/types.cuh"
#include "kiln/ptx/wgmma.cuh"

namespace kiln::kernels {

// OnlyIf<kOn, T>: T, or an empty struct when !kOn. A base that adds members to a struct only in the kernels that
// use them (an empty base takes no room).
namespace detail {
template <bool kOn, typename T>
struct OnlyIfImpl {
  using type = T;
};
template <typename T>
struct OnlyIfImpl<false, T> {
  struct type {};
};
}  // namespace detail
template <bool kOn, typename T>
using OnlyIf = typename detail::OnlyIfImpl<kOn, T>::type;

// kN, kK: the problem's N and K, or for K kFp8GemmRunTimeK (0): K at run time (Fp8GemmParams::num_k_blocks),
// which only the weight-gradient form takes (its K is a token count: one kernel serves every count).
// kBlockM = 64 * kNumMathWarpgroups rows (or 256 with two warpgroups: two waves) and kBlockN columns per tile;
// kStages pipeline slots (fp8_gemm_max_stages gives the most that fit). Launch with
// fp8_gemm_num_threads(kNumMathWarpgroups) threads, fp8_gemm_layout(...).total_bytes of dynamic shared
// memory and at most one CTA per SM; with kClusterM = 2, clusters of (2, 1, 1), an even grid, and B's
// tensor map boxed {128, kBlockN / 2} and Fp8GemmParams::last_b_box_rows = kBlockN; with kClusterN = 2 the
// same with A's map boxed {128, kBlockM / 2} and Fp8GemmParams::last_box_rows = kBlockM (a shared operand's
// box is not cut for its last block).
//
// kOverlapPromotion: two partial accumulators, so that the WGMMAs of the next K block (of this tile or of
// the next tile) run on the tensor cores while the CUDA cores promote the current one and, at a tile's
// end, while the epilogue stores it. Up to kBlockN = 128 each partial holds a whole tile's K block; wider
// tiles (160, 176, 192) issue each K block in two column slices (96 + 80 for 176) that alternate between the
// partials, so the registers still hold them next to the FP32 accumulator. Without it, each K block's
// promotion waits for its WGMMAs and the next block's WGMMAs wait for it.
//
// kAccumulate: the weight-gradient form. B is scaled per row per 128 K (TMA-loaded per stage, like A's
// scales) and D is fp32, read, added to and written back (no TMA store, no cluster).
//
// kSplitK = 2: split-K for problems with fewer tiles than SMs (small M). CTA pairs (clusters of (2, 1, 1))
// take the same tiles, each half of the K blocks; at a tile's end the second CTA sends its fp32 partial sums
// into the first one's shared memory with st.async (counted on the first one's "ready" mbarrier), and the
// first adds them and stores the tile. No workspace in global memory, no second kernel.
//
// kGroupM: the tile order's group height, in m units (unit_coords). Taller groups read B from DRAM fewer
// times per call and hold more of A's panels in L2 at once: worth it where B is large and K short.
//
// kKGrouped: the k-grouped weight-gradient GEMM in one launch (Fp8GemmGroupedParams, run(const
// Fp8GemmGroupedParams&)): the work units of every group one after the other, each tile with its group's maps of
// A and B, its K count and its columns of the scales, and D's group as the third coordinate of its reduce-adds.
//
// kMGrouped: the m-grouped contiguous GEMM of MoE experts (the inference form): A's rows are grouped by expert,
// Fp8GemmParams::grouped_layout[row] naming each row's group, and B and its block scales are num_groups experts'
// [N, K] and [ceil(N / 128), ceil(K / 128)] one after the other. An m block takes the group of its first row
// (m_entry): B's rows from group * N on (B's maps span all the groups' rows) and that group's scales. The
// host aligns every group's rows to the m block (its tiles are 64 or 128 rows, never a pair sharing B, which
// would take two m blocks), so a block whose first row is padding (-1) is padding only: every walker passes over
// it (GemmPaddingSkip), and its rows of D are not written.
//
// kMasked (with kMGrouped): the m-grouped masked GEMM (m_grouped_fp8_gemm_nt_masked, MoE decode): A is [G, M, K]
// and D [G, M, N] (Fp8GemmParams::m = M, each group's room), and group g's first masked_m[g] rows are its rows
// (Fp8GemmParams::grouped_layout = masked_m, read on the device). The work units are those m blocks' tiles, group
// after group (Schedule's MaskedWalk: gemm_schedule.cuh's GemmMaskedGroups); A's and its scales' maps span all the
// groups (rows g * M + ..., K-block columns g * ceil(K / 128) + ...), D's is 3-D with the group as its plane, so no
// store crosses into the next group's rows.
template <u32 kN, u32 kK, u32 kBlockM, u32 kBlockN, u32 kStages, u32 kNumMathWarpgroups, bool kTmaStore,
          u32 kClusterM, u32 kClusterN, bool kOverlapPromotion, bool kAccumulate, u32 kSplitK,
          u32 kGroupM = kFp8GemmDefaultGroupM, bool kKGrouped = false, bool kMGrouped = false, bool kMasked = false>
struct Fp8Gemm {
  static constexpr u32 kBlockK = kFp8GemmBlockK;
  static constexpr u32 kNumThreads = fp8_gemm_num_threads(kNumMathWarpgroups);
  // K at run time: the K loop's count and the tile order's group height come from the params (Schedule);
  // kNumKBlocks is 0 and must not be used then. This form's one-wave tiles already walked their K blocks in a
  // run-time loop and took B's scales by TMA, so the code is nearly the same (9 more instructions in 128x160's
  // 706-instruction walk); on the H200 (thirty-sixth session, 3 A/B rounds) 128x160 ran 1.1-1.9 % slower than
  // with K compiled in at K = 4096 and 8192, 128x192 0-1.5 %, 128x176, 128x128 and 64x128 within 0.5 %.
  static constexpr bool kRunTimeK = kK == kFp8GemmRunTimeK;
  static constexpr u32 kNumKBlocks = (kK + kBlockK - 1) / kBlockK;
  static constexpr u32 kNumNBlocks = (kN + kBlockN - 1) / kBlockN;
  static constexpr u32 kNumSfbRows = (kN + 127) / 128;
  static constexpr u32 kWgmmaK = 32;                 // K of one wgmma.m64nNk32 for 8-bit inputs
  // Waves: with kBlockM = 256 each math warpgroup owns two 64-row pieces of the tile (rows 128 v + 64 w for
  // wave v of warpgroup w), issued and promoted one after the other through one partial accumulator.
  static constexpr u32 kWaveRows = 64 * kNumMathWarpgroups;
  static constexpr u32 kWaves = kBlockM / kWaveRows;
  static constexpr u32 kAccumPerThread = kWaves * kBlockN / 2;  // kWaves 64 x kBlockN fp32 tiles over 128 threads
  // Column slices a K block is issued in (1, or 2 for wide overlapped tiles); a partial accumulator holds one
  // slice.
  static constexpr u32 kSlices = kOverlapPromotion ? fp8_gemm_promotion_slices(kBlockN) : 1;
  // Slice s's columns of the tile: [kSliceFirstCol<s>, + kSliceCols<s>), whole-width WGMMAs of a multiple of 16
  // (176 -> 96 + 80). The partials are sized for the first, the wider.
  static constexpr u32 kFirstSliceCols = kSlices == 1 ? kBlockN : fp8_gemm_first_slice_cols(kBlockN);
  template <u32 kSlice>
  static constexpr u32 kSliceCols = kSlice == 0 ? kFirstSliceCols : kBlockN - kFirstSliceCols;
  template <u32 kSlice>
  static constexpr u32 kSliceFirstCol = kSlice == 0 ? 0 : kFirstSliceCols;
  static constexpr u32 kPartialPerThread = kFirstSliceCols / 2;
  // The producer warpgroup runs the TMA producer and the scale loader. With two math warpgroups the entry
  // cap is 168 and (168 - 40) * 128 registers freed here are exactly what raising 256 threads to 232 takes;
  // with one there is room to spare.
  static constexpr u32 kProducerRegisters = kNumMathWarpgroups == 1 ? 56 : 40;
  static constexpr u32 kMathRegisters = kNumMathWarpgroups == 1 ? 240 : 232;
  static constexpr Fp8GemmLayout kLayout = fp8_gemm_layout(kBlockM, kBlockN, kStages, kTmaStore, kAccumulate, kSplitK);
  // CTAs that share loads by multicast: pairs along M (sharing B) or along N (sharing A).
  static constexpr u32 kMulticast = kClusterM * kClusterN;
  // CTAs per cluster: a multicast pair, or a split-K pair.
  static constexpr u32 kClusterSize = kMulticast * kSplitK;
  // Work units: kClusterM x kClusterN tiles, one per CTA of a cluster; n units per row of units.
  static constexpr u32 kNumNUnits = (kNumNBlocks + kClusterN - 1) / kClusterN;
  // With an odd number of n blocks, a pair's last unit has a second tile beyond N: computed on stale shared
  // memory (no B is loaded for it) and never stored, so the column masks must not be compiled out for it.
  static constexpr bool kNTail = kN % kBlockN != 0 || kNumNUnits * kClusterN != kNumNBlocks;
  static constexpr u32 kKBlocksPerSplit = (kNumKBlocks + kSplitK - 1) / kSplitK;
  // TMA-store epilogue geometry: column groups of kStoreCols, staging rows of kStoreCols * 2 bytes swizzled
  // in 16-byte units (kUnitsPerRow per row).
  static constexpr u32 kStoreCols = fp8_gemm_store_cols(kBlockN);
  static constexpr u32 kStoreRowBytes = kStoreCols * 2;
  static constexpr u32 kUnitsPerRow = kStoreCols / 8;
  static constexpr u32 kStoreGroupBytes = kBlockM * kStoreRowBytes;
  // Every tile lies inside one 128-column scale block of B when kBlockN divides 128; otherwise a tile
  // straddles at most two (asserted below), switching at a multiple of 16 columns.
  static constexpr bool kUniformSfb = 128 % kBlockN == 0;
  static constexpr u32 kEmptyArrivals = kNumMathWarpgroups * 4 * kMulticast;
  // A slot is full once the TMA producer's loads have landed and, in the inference form, the scale loader
  // has written B's scales for it.
  static constexpr u32 kFullArrivals = kAccumulate ? 1 : 2;
  static constexpr u32 kProducerWarp = kNumMathWarpgroups * 4;  // first warp of the producer warpgroup
  static constexpr u32 kScaleLoaderWarp = kProducerWarp + 1;

  static_assert(kBlockM == kWaves * kWaveRows && (kWaves == 1 || kWaves == 2),
                "BLOCK_M: 64 rows per math warpgroup, or two waves of them (256 rows with two warpgroups)");
  static_assert(kWaves == 1 || (!kOverlapPromotion && kTmaStore && !kAccumulate && kSplitK == 1),
                "two waves: serial promotion (one partial beside the two waves' accumulators), TMA-store epilogue, "
                "bf16 form, no split-K");
  static_assert(kNumMathWarpgroups == 1 || kNumMathWarpgroups == 2, "one or two math warpgroups");
  static_assert(kGroupM >= 1 && (kGroupM & (kGroupM - 1)) == 0, "a group holds a power of two of m units");
  static constexpr u32 kGroupShift = fp8_gemm_log2(kGroupM);
  static_assert(kBlockN % 16 == 0 && kBlockN >= 16 && kBlockN <= 256, "BLOCK_N: a multiple of 16 in 16..256");
  // A tile starts at a multiple of kBlockN, so n0 % 128 <= 128 - gcd(kBlockN, 128): it spans at most two
  // 128-column blocks when kBlockN <= 128 + gcd(kBlockN, 128) (112, 144, 160, 192), and three in places
  // beyond (176: tiles starting 96 or 112 columns into a block). No width up to 256 spans four.
  static constexpr u32 kGcdBlockN128 = fp8_gemm_gcd_128(kBlockN);
  static constexpr bool kThreeSfb = !kAccumulate && !kUniformSfb && kBlockN > 128 + kGcdBlockN128;
  // Column-mapped tiles (one-wave tiles of the inference form whose B scale would switch at more than two
  // columns, 96, 112, 144, 160 and 176 among them: fp8_gemm_column_map). With contiguous tiles, where a tile's
  // scale switches depends on its first column modulo 128, one of 128 / gcd(BLOCK_N, 128) columns (4 for 160,
  // 8 for 176), and a choice per K block cost 3-8 % at 128x160 on the H200 (thirteenth session). A walk compiled
  // per switch column (column classes, one class per cluster) made four copies of the walk, 1.1-1.4 s of NVRTC
  // compile; one walk promoting each gcd-wide region by its own scale cost 2-8 % (twenty-seventh session). So
  // tiles take their columns by the column map instead (fp8_gemm_map_column): piece j of tile t lies inside
  // one of B's 128-column blocks wherever t is, and the switch columns are the pieces' fixed boundaries
  // (160: 128; 176: 128 and 160). B is loaded piece by piece (load_b_boxes), the scale loader writes each
  // piece's scale, the promotion multiplies each piece by its own a * b, and the stores follow the map. One
  // walk, nothing chosen at run time.
  static constexpr bool kColumnMap = fp8_gemm_column_map(kBlockM, kBlockN, kNumMathWarpgroups, kAccumulate);
  // The weight-gradient form's B rows interleaved within each 16 (fp8_gemm_interleaved_b, fp8_gemm_layout.h).
  static constexpr bool kInterleavedB = fp8_gemm_interleaved_b(kAccumulate, kN, kBlockN);
  static_assert(!kInterleavedB || (kBlockN % 16 == 0 && kMulticast == 1), "whole 16-row groups, no B multicast");
  // The weight-gradient form reads a slice's B scales (two floats per 8-column chunk and thread) before it waits
  // for the slice's WGMMAs (step()), so that their shared-memory latency passes under the wait instead of
  // holding up the promotion's first multiplies: on the H200 (thirty-second session) 5-7 % faster at 128x160,
  // 128x176 and 128x192, 16-20 % at 128x64 and 64x64. As many chunks as fit beside the accumulators and the
  // partials in the math registers less 16 (all 32 floats at 128x128, in 232 registers, spilled); the promotion
  // reads the rest when it reaches them. Where B is interleaved, whole 16-column groups (one 16-byte read serves
  // two chunks).
  // B-scale chunks one read serves: two where B is interleaved (a 16-byte read), else one (8 bytes).
  static constexpr u32 kScaleReadChunks = kInterleavedB ? 2 : 1;
  static constexpr u32 early_scale_chunks(u32 slice_cols) {
    const u32 budget = kMathRegisters - 16;
    const u32 held = kAccumPerThread + (kOverlapPromotion ? 2 : 1) * kPartialPerThread;
    const u32 room = budget > held ? (budget - held) / 2 : 0;  // in chunks, two floats each
    const u32 chunks = slice_cols / 8 < room ? slice_cols / 8 : room;
    return !kAccumulate ? 0 : chunks / kScaleReadChunks * kScaleReadChunks;
  }
  template <u32 kSlice>
  static constexpr u32 kEarlyScaleChunks = early_scale_chunks(kSliceCols<kSlice>);
  static constexpr u32 kPieces = kColumnMap ? fp8_gemm_map_pieces(kBlockN) : 1;
  // B's boxes of a column-mapped tile (fp8_gemm_map_big_box_rows): kBigBoxes of piece 0 (one per CTA of a pair
  // sharing B) through tma_b, piece 1 whole through tma_b_last, then pieces 2 and 3 in boxes of kNarrowBoxRows
  // through tma_b_narrow.
  static constexpr u32 kBigBoxRows = fp8_gemm_map_big_box_rows(kBlockN, kClusterM);
  static constexpr u32 kBigBoxes = kClusterM;
  static constexpr u32 kPiece1Rows = fp8_gemm_map_piece_cols(kBlockN, 1);
  static constexpr u32 kNarrowBoxRows = fp8_gemm_map_narrow_box_rows(kBlockN);
  static constexpr u32 kBBoxes =
      kBigBoxes + 1 + (kBlockN - fp8_gemm_map_piece_first(kBlockN, kPieces > 2 ? 2 : kPieces)) / kNarrowBoxRows;
  static_assert(kPieces <= 4 && kLayout.sfb_stage_bytes >= 4 * kPieces, "a slot holds every piece's scale");
  static_assert(!kThreeSfb || kColumnMap, "tiles spanning three scale blocks take their columns by the map");
  static_assert(kStages >= 1 && kStages <= kFp8GemmMaxStages, "stages: 1..16");
  static_assert(kLayout.total_bytes <= kHopperSmemPerBlock, "the stages do not fit in shared memory");
  static_assert(kN % 8 == 0 && kN > 0, "N must be a positive multiple of 8");
  static_assert(kRunTimeK || kK % 16 == 0, "K must be a positive multiple of 16 (TMA strides are 16-byte units)");
  static_assert(!kRunTimeK || kAccumulate,
                "K at run time is the weight-gradient form's (the inference form's two-wave tiles unroll a "
                "compile-time K loop, its B scales are indexed by it)");
  static_assert(kClusterM == 1 || kClusterM == 2, "clusters of one or two CTAs along M");
  static_assert(kClusterN == 1 || kClusterN == 2, "clusters of one or two CTAs along N");
  static_assert(kMulticast <= 2, "multicast in pairs: along M (B shared) or along N (A shared), not both");
  static_assert(kProducerRegisters * 128 + kMathRegisters * 128 * kNumMathWarpgroups <= 65536,
                "register reallocation exceeds the register file");
  static_assert(!kOverlapPromotion || fp8_gemm_can_overlap_promotion(kBlockN),
                "two partial accumulators fit in registers up to BLOCK_N 128");
  static_assert(!kAccumulate || (!kTmaStore && kMulticast == 1 && kSplitK == 1),
                "the weight-gradient form adds into fp32 D with plain stores, without a cluster");
  static_assert(kSplitK == 1 || kSplitK == 2, "split-K in halves or not at all");
  static_assert(!kKGrouped || (kAccumulate && kRunTimeK),
                "one launch for K groups is the weight-gradient form's, with K at run time");
  static_assert(kSplitK == 1 || kMulticast == 1, "split-K and multicast both use the cluster");
  static_assert(!kMGrouped || (!kAccumulate && kWaves == 1 && kClusterM == 1),
                "the m-grouped form: the inference form's one-wave tiles, each m block one group's (no pair sharing "
                "B across two m blocks)");
  static_assert(!kMasked || (kMGrouped && kTmaStore),
                "the masked form is an m-grouped form, storing through D's 3-D map (its plane the group)");
  static_assert(kSplitK == 1 || (kSplitK - 1) * kKBlocksPerSplit < kNumKBlocks, "every split of K needs K blocks");

  // The tile-local column where B's second 128-column scale block starts in the tile of n block `n_block` (a
  // multiple of gcd(BLOCK_N, 128); >= kBlockN: never).
  static __device__ __forceinline__ u32 switch_column_of(u32 n_block) { return 128 - n_block * kBlockN % 128; }
  // A tile's columns: `origin` is its first column of D (contiguous tiles) or its n block (column-mapped,
  // tile_origin); column_of gives the column of D its column c stores to.
  static __device__ __forceinline__ u32 tile_origin(u32 n_block) { return kColumnMap ? n_block : n_block * kBlockN; }
  static __device__ __forceinline__ u32 column_of(u32 origin, u32 c) {
    if constexpr (kColumnMap)
      return fp8_gemm_map_column(kBlockN, kNumNBlocks, origin, c);
    else
      return origin + c;
  }

  // Unit index -> (m unit, n unit) on the grid of num_m_units x kNumNUnits (gemm_unit_coords: groups of
  // 2^height_shift m units, kGroupM or with K at run time the params' group_m, m fastest inside a group).
  static __device__ __forceinline__ void unit_coords(u32 unit, u32 num_m_units, u32 num_n_units, u32 height_shift,
                                                     u32& m_unit, u32& n_unit) {
    gemm_unit_coords(unit, num_m_units, num_n_units, height_shift, m_unit, n_unit);
  }

  // What the walk keeps of K groups in one launch (kKGrouped): the table, and the work units of one group (group
  // g's are g * units_per_group ..). A base of Schedule only there, so that the other kernels' code stays as it was.
  struct ScheduleGroups {
    const Fp8GemmGroupedParams* groups;
    u32 units_per_group;
  };

  // What the walk keeps of the masked form (kMasked): a cursor over the groups (gemm_schedule.cuh). A base of
  // Schedule only there.
  using MaskedWalk = GemmMaskedGroups<kBlockM>;

  // The walk over output tiles, shared by the producer and the math warpgroups of a CTA (they must agree
  // exactly) and by the CTAs of a cluster (they must run the same number of K blocks). Work units are
  // kClusterM vertically or kClusterN horizontally adjacent tiles; unit u goes to cluster u mod (clusters),
  // and CTA `rank` of the cluster takes m block kClusterM * (unit's m) + rank (or n block kClusterN * (unit's
  // n) + rank). With an odd number of m (n) blocks the last units' second tile lies beyond M (N): it is
  // computed on TMA's zero fill (beyond N: on stale shared memory, B not loaded) and never stored.
  // With split-K, both CTAs of a cluster walk the same tiles, CTA `rank` over K blocks [kb_begin, kb_begin +
  // kb_count). K groups in one launch: group g's work units follow group g - 1's, each walked like a problem of its
  // own, with its own K count (kb_count_of).
  struct Schedule : OnlyIf<kKGrouped, ScheduleGroups>, OnlyIf<kMasked, MaskedWalk> {
    u32 num_m_units, num_n_units, num_units, first, stride, rank, kb_begin, kb_count, group_shift;
    __device__ __forceinline__ Schedule(const Fp8GemmParams& p, const Fp8GemmGroupedParams* grouped) {
      const u32 num_m_blocks = (p.m + kBlockM - 1) / kBlockM;
      num_m_units = (num_m_blocks + kClusterM - 1) / kClusterM;
      const u32 cluster = blockIdx.x / kClusterSize, clusters = gridDim.x / kClusterSize;
      rank = kClusterSize == 1 ? 0 : ptx::cluster_cta_rank();  // cluster (kClusterSize, 1, 1): consecutive blocks
      kb_begin = kSplitK == 1 ? 0 : rank * kKBlocksPerSplit;
      const u32 split_blocks = kNumKBlocks - kb_begin < kKBlocksPerSplit ? kNumKBlocks - kb_begin : kKBlocksPerSplit;
      kb_count = kRunTimeK ? p.num_k_blocks : kSplitK == 1 ? kNumKBlocks : split_blocks;
      group_shift = kRunTimeK ? __ffs(p.group_m) - 1 : kGroupShift;
      num_n_units = kNumNUnits;
      num_units = num_m_units * kNumNUnits;
      if constexpr (kKGrouped) {
        this->groups = grouped;
        this->units_per_group = num_units;
        num_units *= grouped->num_groups;
      }
      if constexpr (kMasked) {
        // Every group's m blocks, counted by the warp (whole warps build their schedules).
        num_units = this->start(p, kNumNUnits) * kNumNUnits;
      }
      first = cluster;
      stride = clusters;
    }
    // The K group of work unit `unit` (0 unless kKGrouped).
    __device__ __forceinline__ u32 group_of(u32 unit) const {
      if constexpr (kKGrouped)
        return unit / this->units_per_group;
      else
        return 0;
    }
    // The K blocks of the tile of work unit `unit`.
    __device__ __forceinline__ u32 kb_count_of(u32 unit) const {
      if constexpr (kKGrouped)
        return this->groups->k_blocks[group_of(unit)];
      else
        return kb_count;
    }
    __device__ __forceinline__ void coords(u32 unit, u32& m_block, u32& n_block) const {
      u32 m_unit, n_unit;
      if constexpr (kKGrouped) unit -= group_of(unit) * this->units_per_group;  // the unit within its group
      if constexpr (kMasked) {
        // On to the unit's group (groups without rows have no units and are passed over).
        unit_coords(this->seek(unit, kNumNUnits), this->group_m_units, num_n_units, group_shift, m_unit, n_unit);
      } else {
        unit_coords(unit, num_m_units, num_n_units, group_shift, m_unit, n_unit);
      }
      m_block = kClusterM == 1 ? m_unit : m_unit * kClusterM + rank;
      n_block = n_block_of(n_unit);
    }
    // The masked form: the group of the unit coords() was last asked for.
    __device__ __forceinline__ u32 masked_group() const {
      if constexpr (kMasked)
        return this->group;
      else
        return 0;
    }
    // This CTA's n block in n unit `n_unit`.
    __device__ __forceinline__ u32 n_block_of(u32 n_unit) const {
      return kClusterN == 1 ? n_unit : n_unit * kClusterN + rank;
    }
  };

  // The m-grouped contiguous form (kContiguous): each walker's units come through a GemmPaddingSkip, which passes
  // over blocks of padding only (gemm_schedule.cuh; built by a whole warp, padding_skip()); the other forms take
  // every unit of the schedule. first_walk_unit() and next_walk_unit() are the two ends of the producer's and the
  // scale loader's loops; the math warpgroups' walk moves with GemmPaddingSkip::advance and reads ahead once the next
  // tile's first block is issued (step()). A unit's group is its m block's (its first row's entry of grouped_layout,
  // `skip.entry` once the walker is on it); a block whose first row names no group gets NaN scales from the scale
  // loader, so its rows come out NaN.
  // These wrappers are this kernel's own, not gemm_schedule.cuh's shared gemm_first_unit / gemm_next_unit (which the
  // BF16 kernel uses): with those, ptxas scheduled this kernel's scale loader differently, and an A/B on an H100 put
  // the m-grouped GEMM at 4 x 34304 x 6144 x 7168 2.3 % slower (bench/RESULTS.md, fifty-fifth session).
  static constexpr bool kContiguous = kMGrouped && !kMasked;
  static __device__ __forceinline__ i32 m_entry(const Fp8GemmParams& p, const Schedule& schedule, u32 unit) {
    u32 m_block, n_block;
    schedule.coords(unit, m_block, n_block);
    return gemm_m_group_entry(p.grouped_layout, m_block * kBlockM);
  }
  static __device__ __forceinline__ GemmPaddingSkip padding_skip(const Fp8GemmParams& p, const Schedule& schedule) {
    if constexpr (kContiguous)
      return GemmPaddingSkip(schedule.first, schedule.num_units, schedule.stride,
                             [&](u32 u) { return m_entry(p, schedule, u); });
    else
      return {};
  }
  static __device__ __forceinline__ u32 first_walk_unit(const Fp8GemmParams& p, const Schedule& schedule,
                                                        GemmPaddingSkip& skip) {
    if constexpr (kContiguous)
      return skip.begin(schedule.first, [&](u32 u) { return m_entry(p, schedule, u); });
    else
      return schedule.first;
  }
  static __device__ __forceinline__ u32 next_walk_unit(const Fp8GemmParams& p, const Schedule& schedule,
                                                       GemmPaddingSkip& skip, u32 unit) {
    if constexpr (kContiguous)
      return skip.next(unit, [&](u32 u) { return m_entry(p, schedule, u); });
    else
      return unit + schedule.stride;
  }

  // A position in the ring of pipeline slots. The ring is kStages long, or in the weight-gradient form the launch's
  // ring_stages (see ring_length).
  using Slot = GemmSlot;
  // The pipeline's length: the compiled kStages (a constant: the inference kernels' code is as it was), or in the
  // weight-gradient form Fp8GemmParams::ring_stages where it is 1..kStages. Producer and math warps walk the same
  // ring, so its slots' barriers pair up as with kStages; the slots beyond it stay unused.
  static __device__ __forceinline__ u32 ring_length(const Fp8GemmParams& p) {
    if constexpr (kAccumulate)
      return p.ring_stages - 1u < kStages ? p.ring_stages : kStages;
    else
      return kStages;
  }

  static __device__ __forceinline__ void run(const Fp8GemmParams& p) {
    static_assert(!kKGrouped, "a k-grouped kernel takes Fp8GemmGroupedParams");
    run_with(p, nullptr);
  }
  static __device__ __forceinline__ void run(const Fp8GemmGroupedParams& grouped) {
    static_assert(kKGrouped, "only a k-grouped kernel takes Fp8GemmGroupedParams");
    run_with(grouped.base, &grouped);
  }

  static __device__ __forceinline__ void run_with(const Fp8GemmParams& p, const Fp8GemmGroupedParams* grouped) {
    extern __shared__ __align__(1024) u8 smem[];
    u64* full = reinterpret_cast<u64*>(smem + kLayout.full_barrier_offset);
    u64* empty = reinterpret_cast<u64*>(smem + kLayout.empty_barrier_offset);
    const u32 warpgroup = threadIdx.x / 128;

    if (threadIdx.x == kNumMathWarpgroups * 128) {
      // A's whole-box maps serve every m block but a last one with a short box (fp8_gemm_last_box_rows).
      const bool short_last = p.last_box_rows != kBlockM;
      if (!short_last || p.m > kBlockM) {
        if constexpr (!kKGrouped) ptx::tma_prefetch_descriptor(&p.tma_a);  // k-grouped: each group's own
        ptx::tma_prefetch_descriptor(&p.tma_sfa);
      }
      if (short_last) {
        ptx::tma_prefetch_descriptor(&p.tma_a_last);
        ptx::tma_prefetch_descriptor(&p.tma_sfa_last);
      }
      // B's likewise: the whole-box map serves every n block but a last one with a short box.
      // (Column-mapped tiles use both: piece 0's boxes and the narrower pieces'.)
      if constexpr (!kKGrouped) {
        if (kColumnMap || p.last_b_box_rows == kBlockN || kN > kBlockN) ptx::tma_prefetch_descriptor(&p.tma_b);
        if (kColumnMap || p.last_b_box_rows != kBlockN) ptx::tma_prefetch_descriptor(&p.tma_b_last);
      }
      if constexpr (kColumnMap && kPieces > 2) ptx::tma_prefetch_descriptor(&p.tma_b_narrow);
      if constexpr (kAccumulate) ptx::tma_prefetch_descriptor(&p.tma_sfb);
      if constexpr (kTmaStore || kAccumulate) ptx::tma_prefetch_descriptor(&p.tma_d);
#pragma unroll
      for (u32 s = 0; s < kStages; ++s) {
        ptx::mbarrier_init(&full[s], kFullArrivals);
        ptx::mbarrier_init(&empty[s], kEmptyArrivals);
      }
      if constexpr (kSplitK > 1) {
        u64* reduce = reinterpret_cast<u64*>(smem + kLayout.reduce_barrier_offset);
#pragma unroll
        for (u32 w = 0; w < 2 * kNumMathWarpgroups; ++w) ptx::mbarrier_init(&reduce[w], 1);
      }
      ptx::fence_mbarrier_init();
    }
    // The peer CTA's multicasts, st.async and remote arrivals target these barriers: initialised
    // cluster-wide first.
    if constexpr (kClusterSize > 1)
      ptx::cluster_sync();
    else
      __syncthreads();

    // Programmatic dependent launch: everything above overlapped the previous kernel's tail; nothing it
    // writes (A, B, the scales, D) is read before it has completed. The next kernel may start launching
    // now: its CTAs only fit on an SM once one of ours has exited, and it waits for our completion itself.
    // Both are no-ops without PDL.
    ptx::grid_dependency_wait();
    ptx::launch_dependents();

    // The role split must be one if/else over whole warpgroups for setmaxnreg to take effect. Each role
    // builds its own schedule after it, so nothing stays live across the register reallocation (the
    // producer's 40 registers would otherwise spill it).
    if (warpgroup == kNumMathWarpgroups) {
      ptx::setmaxnreg_dec<kProducerRegisters>();
      const Schedule schedule(p, grouped);
      const u32 warp = threadIdx.x / 32;
      if constexpr (kContiguous) {
        if (warp == kProducerWarp) {
          GemmPaddingSkip skip = padding_skip(p, schedule);  // the whole warp counts
          if (ptx::elect_one_sync()) produce(p, smem, full, empty, schedule, skip);
        }
      } else {
        GemmPaddingSkip unused;
        if (warp == kProducerWarp && ptx::elect_one_sync()) produce(p, smem, full, empty, schedule, unused);
      }
      if constexpr (!kAccumulate)
        if (warp == kScaleLoaderWarp) load_b_scales(p, smem, full, empty, schedule);
      // The producer warpgroup's threads exit as soon as their part is issued (its idle warps at once), as
      // DeepGEMM's do: 0.4-0.9 % faster at M = 4096 than keeping them for the final cluster barrier, which waits
      // only for threads that have not exited. Nothing is lost by leaving: the loads they issued complete on
      // the full barriers the math warps wait for, and the math warps keep the CTA (and its shared memory)
      // alive until the peer is done with it.
      return;
    } else {
      ptx::setmaxnreg_inc<kMathRegisters>();
      const Schedule schedule(p, grouped);
      // Read through a shuffle so that the compiler knows it is the same in every lane: the operand
      // descriptors built from it then stay in uniform registers, off the WGMMA issue path.
      consume(p, smem, full, empty, schedule, __shfl_sync(0xffffffffu, warpgroup, 0));
    }
    // No CTA may exit while its peer can still write to its shared memory or arrive on its barriers: the math
    // warps hold it here until the peer's math warps are done.
    if constexpr (kClusterSize > 1) ptx::cluster_sync();
  }

  static __device__ __forceinline__ void produce(const Fp8GemmParams& p, u8* smem, u64* full, u64* empty,
                                                 const Schedule& schedule, GemmPaddingSkip& skip) {
    // The last m block's boxes of A and its scales may be shorter than BLOCK_M (fp8_gemm_last_box_rows):
    // fewer bytes per stage, through their own maps (none when the box is whole).
    const u32 last_m_block = p.last_box_rows != kBlockM ? (p.m - 1) / kBlockM : ~0u;
    const u32 last_stage_tx_bytes = kLayout.stage_tx_bytes - (kBlockM - p.last_box_rows) * (kBlockK + 4);
    // So may the last n block's box of B (fp8_gemm_last_box_rows of N). A pair's second tile beyond N (pairs
    // sharing A with an odd number of n blocks) loads no B at all: it is computed on stale shared memory and
    // never stored, where TMA would zero-fill a whole box for it.
    // (Column-mapped tiles load B piece by piece and skip the boxes past N instead, load_b_boxes.)
    const u32 last_n_block = !kColumnMap && p.last_b_box_rows != kBlockN ? kNumNBlocks - 1 : ~0u;
    const u32 last_n_missing_bytes = (kBlockN - p.last_b_box_rows) * kBlockK;
    const u64 b_policy = p.b_cache_policy;
    const u32 ring = ring_length(p);
    Slot slot;
    for (u32 unit = first_walk_unit(p, schedule, skip); unit < schedule.num_units;
         unit = next_walk_unit(p, schedule, skip, unit)) {
      u32 m_block, n_block;
      schedule.coords(unit, m_block, n_block);
      const bool last = m_block == last_m_block;
      const bool last_n = n_block == last_n_block;
      const bool beyond_n = kClusterN > 1 && n_block >= kNumNBlocks;
      const u32 stage_tx_bytes = (last ? last_stage_tx_bytes : kLayout.stage_tx_bytes) -
                                 (beyond_n ? kLayout.b_stage_bytes
                                  : last_n ? last_n_missing_bytes
                                           : kColumnMap ? b_bytes_past_n(n_block) : 0);
      const void* tma_a = last ? &p.tma_a_last : &p.tma_a;
      const void* const tma_sfa = last ? &p.tma_sfa_last : &p.tma_sfa;
      const void* tma_b = last_n ? &p.tma_b_last : &p.tma_b;
      // K groups in one launch: the group's own maps of A and B (whole boxes: the host sets last_box_rows and
      // last_b_box_rows to BLOCK_M and BLOCK_N), its K count, its first K block in the scales and its plane of D.
      u32 scale_kb_offset = 0;
      [[maybe_unused]] u32 d_group = 0;
      if constexpr (kKGrouped) {
        const u32 g = schedule.group_of(unit);
        tma_a = &schedule.groups->tma_a[g];
        tma_b = &schedule.groups->tma_b[g];
        scale_kb_offset = schedule.groups->kb_offset[g];
        d_group = schedule.groups->d_group[g];
      }
      const u32 kb_count = schedule.kb_count_of(unit);
      const i32 m0 = static_cast<i32>(m_block * kBlockM);
      // The m-grouped form: the rows of this m block's group in B's maps, which span every group's N rows. The
      // masked form's A too spans every group's M rows, and its scales every group's K blocks.
      i32 b_row0 = 0, a_row0 = 0;
      if constexpr (kMasked) {
        const u32 g = schedule.masked_group();
        b_row0 = static_cast<i32>(g * kN);
        a_row0 = static_cast<i32>(g * p.m);
        scale_kb_offset = g * kNumKBlocks;
      } else if constexpr (kContiguous) {
        b_row0 = static_cast<i32>(gemm_m_group_of_entry(skip.entry, p.num_groups).group * kN);
      }
      const i32 n0 = static_cast<i32>(n_block * kBlockN);
      // The weight-gradient form reads D back in its epilogue (reduce-adds done in L2): without help each
      // reduce-add misses L2 and waits on DRAM, and D's traffic ran at half a copy's rate, behind the math at
      // small K. So D's tile is prefetched into L2 just before the producer waits for the slot of the tile's last
      // K block, about a pipeline's depth of K blocks before the epilogue: late enough that the lines neither
      // compete with A and B for the whole main loop nor get evicted, early enough to arrive in time. Measured on
      // the H200 (bench/RESULTS.md, thirty-eighth session) against prefetching 0-3, 4, 8 blocks earlier or at the
      // tile's first block: 16-19 % faster at K = 512-1024, 1-2 % at K = 4096-8192; issued after the last
      // block's loads instead, it gained nothing. With no C (store_d) D is only written: nothing to prefetch.
      [[maybe_unused]] const u32 d_prefetch_at = kb_count > 0 ? kb_count - 1 : 0;
      // Not unrolled: one thread issues, and an unrolled copy per K block overflows the 40 registers.
#pragma unroll 1
      for (u32 i = 0; i < kb_count; ++i, slot.advance(ring)) {
        const u32 kb = schedule.kb_begin + i;
        const u32 stage = slot.stage;
        if constexpr (kAccumulate)
          if (i == d_prefetch_at && !p.store_d) prefetch_d_tile(p, m_block, n_block, d_group);
        // Wait until every math warp has released this slot (passes at once on the first round), asleep: the
        // producer runs ahead and waits most of a block for each slot.
        ptx::mbarrier_wait_parity_sleep(&empty[stage], slot.phase ^ 1);
        ptx::mbarrier_arrive_expect_tx(&full[stage], stage_tx_bytes);
        const i32 k0 = static_cast<i32>(kb * kBlockK);
        load_operand<kBlockM, kClusterN>(smem + kLayout.a_offset + stage * kLayout.a_stage_bytes, tma_a,
                                         &full[stage], k0, a_row0 + m0, schedule.rank, ptx::kL2EvictNormal);
        if constexpr (kColumnMap) {
          if (!beyond_n)
            load_b_boxes(smem + kLayout.b_offset + stage * kLayout.b_stage_bytes, p, &full[stage], k0, n_block,
                         schedule.rank, b_policy, b_row0);
        } else if constexpr (kInterleavedB) {
          ptx::tma_load_5d_hint(smem + kLayout.b_offset + stage * kLayout.b_stage_bytes, tma_b, &full[stage], k0,
                                n0 / 16, b_policy);
        } else if (!beyond_n) {
          load_operand<kBlockN, kClusterM>(smem + kLayout.b_offset + stage * kLayout.b_stage_bytes, tma_b,
                                           &full[stage], k0, b_row0 + n0, schedule.rank, b_policy);
        }
        u8* const sfa_slot = smem + kLayout.sfa_offset + stage * kLayout.sfa_stage_bytes;
        if constexpr (kClusterN == 2) {
          // The pair shares the m block, so its A scales too: one load, multicast (0.1-0.4 % faster at M = 4096
          // than each CTA loading them, with less L2 traffic). Both full barriers count the bytes either way.
          if (schedule.rank == 0)
            ptx::tma_load_2d_multicast(sfa_slot, tma_sfa, &full[stage], m0, static_cast<i32>(kb + scale_kb_offset),
                                       u16{0b11});
        } else {
          ptx::tma_load_2d(sfa_slot, tma_sfa, &full[stage], m0, static_cast<i32>(kb + scale_kb_offset));
        }
        if constexpr (kAccumulate)
          ptx::tma_load_2d(smem + kLayout.sfb_offset + stage * kLayout.sfb_stage_bytes, &p.tma_sfb, &full[stage], n0,
                           static_cast<i32>(kb + scale_kb_offset));
      }
    }
  }

  // D's tile into L2, in the reduce-adds' boxes (64 rows x kReduceCols fp32) through D's map: 2-D, or 3-D
  // with the group's plane as the third coordinate when K groups share the launch. Parts past M and N are ignored.
  static __device__ __forceinline__ void prefetch_d_tile(const Fp8GemmParams& p, u32 m_block, u32 n_block,
                                                         u32 d_group) {
#pragma unroll 1
    for (u32 h = 0; h < kBlockM / 64; ++h)
#pragma unroll 1
      for (u32 c = 0; c < kReduceChunks; ++c) {
        const i32 col = static_cast<i32>(n_block * kBlockN + c * kReduceCols);
        const i32 row = static_cast<i32>(m_block * kBlockM + h * 64);
        if constexpr (kKGrouped)
          ptx::tma_prefetch_l2_3d(&p.tma_d, col, row, static_cast<i32>(d_group));
        else
          ptx::tma_prefetch_l2_2d(&p.tma_d, col, row);
      }
  }

  // One operand's tile of kRows K-major rows from row0: loaded whole, with L2 policy `policy`, or, shared by
  // a multicast pair (kPairs = 2), this CTA's rows of it, delivered to both CTAs (and counted by both full
  // barriers; pairs load with the default policy).
  template <u32 kRows, u32 kPairs>
  static __device__ __forceinline__ void load_operand(u8* tile, const void* tensor_map, u64* full, i32 k0, i32 row0,
                                                      u32 rank, u64 policy) {
    if constexpr (kPairs == 1) {
      ptx::tma_load_2d_hint(tile, tensor_map, full, k0, row0, policy);
    } else {
      constexpr u32 kRowsPerCta = kRows / kPairs;
      static_assert(kRowsPerCta % 8 == 0, "each CTA's share of a shared tile must be whole 8-row swizzle atoms");
      ptx::tma_load_2d_multicast(tile + rank * kRowsPerCta * kBlockK, tensor_map, full, k0,
                                 row0 + static_cast<i32>(rank * kRowsPerCta), static_cast<u16>((1u << kPairs) - 1));
    }
  }

  // A column-mapped tile's B box b: its first row in the tile, its rows and its map (each box inside one piece,
  // whole 8-row swizzle atoms).
  static __device__ __forceinline__ constexpr u32 b_box_first_row(u32 b) {
    return b < kBigBoxes    ? b * kBigBoxRows
           : b == kBigBoxes ? kBigBoxes * kBigBoxRows
                            : kBigBoxes * kBigBoxRows + kPiece1Rows + (b - kBigBoxes - 1) * kNarrowBoxRows;
  }
  static __device__ __forceinline__ constexpr u32 b_box_rows(u32 b) {
    return b < kBigBoxes ? kBigBoxRows : b == kBigBoxes ? kPiece1Rows : kNarrowBoxRows;
  }
  static __device__ __forceinline__ const void* b_box_map(const Fp8GemmParams& p, u32 b) {
    return b < kBigBoxes ? &p.tma_b : b == kBigBoxes ? &p.tma_b_last : &p.tma_b_narrow;
  }
  // Loads those boxes, each from the column map's row for its first tile row into its place in the slot. Boxes
  // that start at or past N are not loaded (nor counted: b_bytes_past_n); the rows past N in a box that starts
  // before N are TMA's zero fill. Pairs sharing B (kClusterM = 2) take alternate boxes, each delivered to both.
  // `row0`: the first of the tile's group's rows in the maps (the m-grouped form; 0 otherwise).
  static __device__ __forceinline__ void load_b_boxes(u8* tile, const Fp8GemmParams& p, u64* full, i32 k0, u32 n_block,
                                                      u32 rank, u64 policy, i32 row0) {
#pragma unroll
    for (u32 b = 0; b < kBBoxes; ++b) {
      if (kClusterM > 1 && b % kClusterM != rank) continue;
      const u32 row = column_of(tile_origin(n_block), b_box_first_row(b));
      if (row >= kN) continue;
      const void* const tensor_map = b_box_map(p, b);
      u8* const dst = tile + b_box_first_row(b) * kBlockK;
      if constexpr (kClusterM == 1)
        ptx::tma_load_2d_hint(dst, tensor_map, full, k0, row0 + static_cast<i32>(row), policy);
      else
        ptx::tma_load_2d_multicast(dst, tensor_map, full, k0, row0 + static_cast<i32>(row),
                                   static_cast<u16>((1u << kClusterM) - 1));
    }
  }
  // The bytes of a column-mapped tile's B boxes that start at or past N.
  static __device__ __forceinline__ u32 b_bytes_past_n(u32 n_block) {
    u32 past = 0;
#pragma unroll
    for (u32 b = 0; b < kBBoxes; ++b)
      past += column_of(tile_origin(n_block), b_box_first_row(b)) >= kN ? b_box_rows(b) * kBlockK : 0;
    return past;
  }

  // Two adjacent fp32 (one 8-byte access), four (one 16-byte access).
  struct alignas(8) F32x2 {
    float x, y;
  };
  struct alignas(16) float4_t {
    float x, y, z, w;
  };

  // The scale loader (inference form): one warp of the producer warpgroup writes, into each slot, B's scales
  // for the slot's K block: the tile's first 128-column block's and, when the tile straddles two, the
  // second's, or, for a column-mapped tile, each piece's; then it arrives on the slot's full barrier. This keeps
  // global loads out of the math warpgroups' loop, where their latency (L2, under the TMA traffic) would stall
  // the promotion. The lanes read 32 K blocks' scales at a time; the warp runs ahead of the math warpgroups by
  // up to the pipeline's depth, which hides those loads' latency.
  static __device__ __forceinline__ void load_b_scales(const Fp8GemmParams& p, u8* smem, u64* full, u64* empty,
                                                       const Schedule& schedule) {
    const u32 lane = threadIdx.x % 32;
    Slot slot;
    GemmPaddingSkip skip = padding_skip(p, schedule);
    for (u32 unit = first_walk_unit(p, schedule, skip); unit < schedule.num_units;
         unit = next_walk_unit(p, schedule, skip, unit)) {
      u32 m_block, n_block;
      schedule.coords(unit, m_block, n_block);
      // The m-grouped form: the block's group's scales, or NaN where grouped_layout names no group.
      const float* sfb_base = p.sfb;
      [[maybe_unused]] bool poison = false;
      if constexpr (kMasked) {
        sfb_base += schedule.masked_group() * kNumSfbRows * kNumKBlocks;
      } else if constexpr (kContiguous) {
        const GemmMGroup g = gemm_m_group_of_entry(skip.entry, p.num_groups);
        sfb_base += g.group * kNumSfbRows * kNumKBlocks;
        poison = !g.valid;
      }
      // Two copies of the walk below, not one over a row count: the shared form changed ptxas's schedule of
      // 128x128 and 128x192 (418 and 23 instructions differ, the epilogue's among them), where this leaves their
      // code as it was.
      if constexpr (kColumnMap) {
        // Piece r's scale row. Rows past the last one (a piece past N; a tile beyond N, the second of a pair's
        // last unit) read the last row: their columns are never stored.
        const float* rows[kPieces];
#pragma unroll
        for (u32 r = 0; r < kPieces; ++r) {
          const u32 row = column_of(tile_origin(n_block), fp8_gemm_map_piece_first(kBlockN, r)) / 128;
          rows[r] = sfb_base + (row < kNumSfbRows ? row : kNumSfbRows - 1) * kNumKBlocks;
        }
        for (u32 kb0 = 0; kb0 < schedule.kb_count; kb0 += 32) {
          const u32 kb = schedule.kb_begin + (kb0 + lane < schedule.kb_count ? kb0 + lane : schedule.kb_count - 1);
          float v[kPieces];
#pragma unroll
          for (u32 r = 0; r < kPieces; ++r) v[r] = rows[r][kb];
          if constexpr (kMGrouped)
            if (poison)
#pragma unroll
              for (u32 r = 0; r < kPieces; ++r) v[r] = __int_as_float(0x7fc00000);
          const u32 count = schedule.kb_count - kb0 < 32 ? schedule.kb_count - kb0 : 32;
#pragma unroll 1
          for (u32 i = 0; i < count; ++i, slot.advance(kStages)) {
            float scale[kPieces];
#pragma unroll
            for (u32 r = 0; r < kPieces; ++r) scale[r] = ptx::shfl_idx(v[r], i);
            if (lane == 0) {
              ptx::mbarrier_wait_parity_sleep(&empty[slot.stage], slot.phase ^ 1);
              float* sfb = reinterpret_cast<float*>(smem + kLayout.sfb_offset + slot.stage * kLayout.sfb_stage_bytes);
#pragma unroll
              for (u32 r = 0; r < kPieces; ++r) sfb[r] = scale[r];
              ptx::mbarrier_arrive(&full[slot.stage]);  // release: the math warps' acquiring wait sees the stores
            }
            __syncwarp();
          }
        }
      } else {
        // A tile beyond N (the second of a pair's last unit) reads the last row: it is never stored.
        const u32 sfb_row = n_block * kBlockN / 128 < kNumSfbRows ? n_block * kBlockN / 128 : kNumSfbRows - 1;
        const float* sfb0 = sfb_base + sfb_row * kNumKBlocks;
        // The second block's row; past the last row only for columns beyond N, which are never stored.
        const float* sfb1 = (sfb_row + 1 < kNumSfbRows) ? sfb0 + kNumKBlocks : sfb0;
        for (u32 kb0 = 0; kb0 < schedule.kb_count; kb0 += 32) {
          const u32 kb = schedule.kb_begin + (kb0 + lane < schedule.kb_count ? kb0 + lane : schedule.kb_count - 1);
          float v0 = sfb0[kb];
          float v1 = kUniformSfb ? v0 : sfb1[kb];
          if constexpr (kMGrouped)
            if (poison) v0 = v1 = __int_as_float(0x7fc00000);
          const u32 count = schedule.kb_count - kb0 < 32 ? schedule.kb_count - kb0 : 32;
#pragma unroll 1
          for (u32 i = 0; i < count; ++i, slot.advance(kStages)) {
            const float s0 = ptx::shfl_idx(v0, i);
            const float s1 = ptx::shfl_idx(v1, i);
            if (lane == 0) {
              ptx::mbarrier_wait_parity_sleep(&empty[slot.stage], slot.phase ^ 1);
              float* sfb = reinterpret_cast<float*>(smem + kLayout.sfb_offset + slot.stage * kLayout.sfb_stage_bytes);
              sfb[0] = s0;
              sfb[1] = s1;
              ptx::mbarrier_arrive(&full[slot.stage]);  // release: the math warps' acquiring wait sees the stores
            }
            __syncwarp();
          }
        }
      }
    }
  }

  // What the math warpgroups need to know about the tile they are on.
  // K groups in one launch: the tile's K blocks and its group's index in D (a base of Tile only there).
  struct TileGroup {
    u32 kb_count, d_group;
  };
  // The masked form: the tile's group, D's plane its stores go to (a base of Tile only there).
  struct TilePlane {
    u32 d_plane;
  };
  struct Tile : OnlyIf<kKGrouped, TileGroup>, OnlyIf<kMasked, TilePlane> {
    u32 m_block, n_origin;  // n_origin: tile_origin of its n block
    u32 sfb_switch;  // switch_column_of the tile (contiguous tiles)
    __device__ __forceinline__ Tile(const Schedule& schedule, u32 unit) {
      u32 n_block;
      schedule.coords(unit, m_block, n_block);
      n_origin = tile_origin(n_block);
      sfb_switch = switch_column_of(n_block);
      if constexpr (kKGrouped) {
        const u32 g = schedule.group_of(unit);
        this->kb_count = schedule.groups->k_blocks[g];
        this->d_group = schedule.groups->d_group[g];
      }
      if constexpr (kMasked) this->d_plane = schedule.masked_group();
    }
  };

  // The scales of one K block for this thread's two rows (and, in the inference form, the tile's one or two
  // B scales), read while the block's slot is held.
  // Column-mapped tiles hold a * b in `region` instead, for this thread's two rows and each piece, b being B's
  // scale there. Formed when the block is issued, the products take fewer registers across the block's two
  // slices than the scales would: 128x160 with b0 and b1 and its switch column compiled into the promotion had
  // six more instructions per K block (register copies of the A scales, both B scales moved to uniform
  // registers), with the products 156, as many as the column-class walks it replaced (154-157).
  struct BlockScales {
    float a0[kWaves], a1[kWaves], b0, b1;
    float region[kColumnMap ? kPieces : 1][2];
  };

  // The math warpgroups' walk: every (tile, K block, slice) of this CTA in order, one partial accumulator per
  // slice.
  struct MathState {
    const Fp8GemmParams& p;
    u8* smem;
    u64* full;
    u64* empty;
    const Schedule& schedule;
    u32 warpgroup, lane, row_in_tile;
    u32 unit, kb;  // the block being promoted
    Tile tile;
    Slot issue_slot;  // the slot of the next block to issue
    u32 current_stage;  // the slot of the block being promoted
    BlockScales scales;  // its scales
    u32 reduce_phase;  // split-K: the parity of this warpgroup's next hand-over
    float accum[kAccumPerThread];
    // Serial promotion: whether the next block's full barrier was already seen complete (looked at just before
    // the current block's promotion, see step()), so that issue() need not wait on it again.
    bool next_block_landed = false;
    // The contiguous m-grouped form's cursor past blocks of padding only (its units counted, its next read ahead).
    GemmPaddingSkip skip{};

    // The math loop's shared-memory addresses. NVRTC's front end does pointer arithmetic on shared memory in 64
    // bits (NVCC's PTX holds shared addresses in 32-bit registers), which left 64-bit shifts and carries in
    // NVRTC's operand descriptors, scale reads and barrier addresses every block. Under NVRTC they are formed
    // from one 32-bit shared-window base: 1-3 % faster on the H200, level with NVCC's build. NVCC keeps the
    // pointer forms, whose code this leaves byte-identical (with the converted base ptxas scheduled its 256x128
    // kernel 0.5-1 % slower).
#if defined(__CUDACC_RTC__)
    static constexpr bool kShared32 = true;
#else
    static constexpr bool kShared32 = false;
#endif
    __device__ __forceinline__ u32 shared_window_base() const {
      return static_cast<u32>(__cvta_generic_to_shared(smem));
    }
    // A pipeline barrier's shared-window address (NVRTC's form above).
    __device__ __forceinline__ u32 barrier_addr(u32 barriers_offset, u32 stage) const {
      return shared_window_base() + barriers_offset + stage * static_cast<u32>(sizeof(u64));
    }
    __device__ __forceinline__ void wait_full(u32 stage, u32 phase) const {
      if constexpr (kShared32)
        ptx::mbarrier_wait_parity(barrier_addr(kLayout.full_barrier_offset, stage), phase);
      else
        ptx::mbarrier_wait_parity(&full[stage], phase);
    }
    __device__ __forceinline__ bool test_full(u32 stage, u32 phase) const {
      if constexpr (kShared32)
        return ptx::mbarrier_test_wait_parity(barrier_addr(kLayout.full_barrier_offset, stage), phase);
      else
        return ptx::mbarrier_test_wait_parity(&full[stage], phase);
    }

    // Issues slice `kSlice` of the block in `stage` (four WGMMAs over its columns of B) into `partial` (its
    // first kSliceCols / 2 floats; scale-d 0 on the first WGMMA: no zeroing) as one committed group.
    template <u32 kSlice, u32 kWave = 0>
    __device__ __forceinline__ void issue_slice(u32 stage, float (&partial)[kPartialPerThread]) {
      // A's rows of this warpgroup (and wave); a slice starts kSliceFirstCol rows into the B tile: whole 8-row
      // (1024-byte) swizzle atoms.
      constexpr u32 kAFirstByte = kLayout.a_offset + kWave * kWaveRows * kBlockK;
      constexpr u32 kBFirstByte = kLayout.b_offset + kSliceFirstCol<kSlice> * kBlockK;
      // The start addresses in 16-byte units, the stage's offset added to a base the compiler hoists out of the
      // walk (one multiply-add per operand, where the address form took four: 10-11 fewer instructions per K
      // block, 0.6-1.3 % faster at 128x160 and 128x192 on the H200 with either compiler). The two-wave tiles
      // took it with their paired K loop (walk_two_wave_tiles()); alone it had measured 0.4 % slower there.
      static_assert(kLayout.a_stage_bytes % 16 == 0 && kLayout.b_stage_bytes % 16 == 0, "16-byte stage strides");
      const u32 window = shared_window_base();
      const u64 desc_a = ptx::make_smem_desc_units(((window + kAFirstByte + warpgroup * 64 * kBlockK) >> 4) +
                                                       stage * (kLayout.a_stage_bytes >> 4),
                                                   ptx::SmemSwizzle::k128B, 0, 1024);
      const u64 desc_b = ptx::make_smem_desc_units(
          ((window + kBFirstByte) >> 4) + stage * (kLayout.b_stage_bytes >> 4), ptx::SmemSwizzle::k128B, 0, 1024);
      ptx::fence_operands(partial);
      ptx::wgmma_fence();
#pragma unroll
      for (u32 k = 0; k < kBlockK / kWgmmaK; ++k) {
        // k * 32 bytes along the 128-byte swizzled row: +2 in the descriptor's 16-byte address units.
        ptx::WgmmaE4M3<kSliceCols<kSlice>>::mma(ptx::smem_desc_advance(desc_a, 2 * k),
                                                 ptx::smem_desc_advance(desc_b, 2 * k), slice_view<kSlice>(partial),
                                                 k == 0 ? 0u : 1u);
      }
      ptx::wgmma_commit_group();
    }

    // The first kSliceCols<kSlice> / 2 floats of a partial: the fragment of that slice's WGMMAs.
    template <u32 kSlice>
    using SliceFragment = float[kSliceCols<kSlice> / 2];
    template <u32 kSlice>
    static __device__ __forceinline__ SliceFragment<kSlice>& slice_view(float (&partial)[kPartialPerThread]) {
      return reinterpret_cast<SliceFragment<kSlice>&>(partial);
    }

    // This thread's two rows' A scales in wave kWave of the block in `stage`.
    template <u32 kWave>
    __device__ __forceinline__ void read_a_scales(u32 stage, BlockScales& sc) const {
      if constexpr (kShared32) {
        const u32 sfa = shared_window_base() + kLayout.sfa_offset + stage * kLayout.sfa_stage_bytes;
        sc.a0[kWave] = ptx::ld_shared_f32(sfa + (kWave * kWaveRows + row_in_tile) * 4);
        sc.a1[kWave] = ptx::ld_shared_f32(sfa + (kWave * kWaveRows + row_in_tile + 8) * 4);
      } else {
        const float* sfa = reinterpret_cast<const float*>(smem + kLayout.sfa_offset + stage * kLayout.sfa_stage_bytes);
        sc.a0[kWave] = sfa[kWave * kWaveRows + row_in_tile];
        sc.a1[kWave] = sfa[kWave * kWaveRows + row_in_tile + 8];
      }
    }

    // Waits for the block in slot `slot`, reads its (first wave's) scales, and issues its first slice into
    // `partial`. Two-wave tiles issue before reading, and read the second wave's A scales in its turn
    // (walk_waves()): the promotions need them, the WGMMAs do not, and read first they held the block's first
    // WGMMA back (with the K loop in pairs, 1.3-1.7 % faster on the H200 at M = 4096, eighteenth session).
    __device__ __forceinline__ BlockScales issue(Slot slot, float (&partial)[kPartialPerThread]) {
      if (!next_block_landed) wait_full(slot.stage, slot.phase);
      next_block_landed = false;
      if constexpr (kWaves > 1) issue_slice<0>(slot.stage, partial);
      BlockScales sc;
      read_a_scales<0>(slot.stage, sc);
      if constexpr (kShared32) {
        if constexpr (!kAccumulate) {
          const u32 sfb = shared_window_base() + kLayout.sfb_offset + slot.stage * kLayout.sfb_stage_bytes;
          if constexpr (kColumnMap) {
            float b[kPieces];
#pragma unroll
            for (u32 r = 0; r < kPieces; ++r) b[r] = ptx::ld_shared_f32(sfb + 4 * r);
            set_region_scales(sc, b);
          } else {
            sc.b0 = ptx::ld_shared_f32(sfb);
            sc.b1 = ptx::ld_shared_f32(sfb + 4);
          }
        }
      } else {
        if constexpr (!kAccumulate) {
          const float* sfb =
              reinterpret_cast<const float*>(smem + kLayout.sfb_offset + slot.stage * kLayout.sfb_stage_bytes);
          if constexpr (kColumnMap) {
            float b[kPieces];
#pragma unroll
            for (u32 r = 0; r < kPieces; ++r) b[r] = sfb[r];
            set_region_scales(sc, b);
          } else {
            sc.b0 = sfb[0];
            sc.b1 = sfb[1];
          }
        }
      }
      if constexpr (kWaves == 1) issue_slice<0>(slot.stage, partial);
      return sc;
    }

    // The pieces' a * b for this thread's two rows (one wave: column-mapped tiles have one).
    static __device__ __forceinline__ void set_region_scales(BlockScales& sc, const float (&b)[kPieces]) {
#pragma unroll
      for (u32 r = 0; r < kPieces; ++r) {
        sc.region[r][0] = sc.a0[0] * b[r];
        sc.region[r][1] = sc.a1[0] * b[r];
      }
    }

    // The K blocks of the tile being walked, and its group's index in D (0 but for K groups in one launch).
    __device__ __forceinline__ u32 tile_kb_count() const {
      if constexpr (kKGrouped)
        return tile.kb_count;
      else
        return schedule.kb_count;
    }
    __device__ __forceinline__ u32 tile_d_group() const {
      if constexpr (kKGrouped)
        return tile.d_group;
      else if constexpr (kMasked)
        return tile.d_plane;
      else
        return 0;
    }

    // Issues the block in the next slot (issue()) and makes it the block being promoted.
    __device__ __forceinline__ void issue_next_block(float (&partial)[kPartialPerThread]) {
      scales = issue(issue_slot, partial);
      current_stage = issue_slot.stage;
      issue_slot.advance(ring_length(p));
    }

    // Hands slot `stage` back to the producer, one arrival per warp; with a cluster the peer's producer
    // multicasts into this slot too, so it is released there as well.
    __device__ __forceinline__ void release(u32 stage) {
      if constexpr (kMulticast == 1) {
        if (lane == 0) {
          if constexpr (kShared32)
            ptx::mbarrier_arrive(barrier_addr(kLayout.empty_barrier_offset, stage));
          else
            ptx::mbarrier_arrive(&empty[stage]);
        }
      } else {
        // Lane r arrives on CTA r's barrier: one instruction for the pair, where one lane arriving on each CTA
        // in turn took two (and their address arithmetic). Measured with the two-wave loop's unroll: together
        // 0.3-1.1 % faster on the 256x128 kernels.
        if (lane < kMulticast) ptx::mbarrier_arrive_cluster(&empty[stage], lane);
      }
    }

    // The weight-gradient form's B scales of one slice that step() reads ahead of the WGMMA wait: chunk j's
    // two columns' scales at v[2 j], v[2 j + 1], for j < kEarlyScaleChunks<kSlice> (see there).
    template <u32 kSlice>
    struct EarlyBScales {
      float v[kEarlyScaleChunks<kSlice> > 0 ? 2 * kEarlyScaleChunks<kSlice> : 1];
    };

    // This thread's B scales of slice chunk j in `stage`, one read: columns 8c + 2 (lane % 4) + {0, 1} of the tile
    // (c = kSliceFirstCol / 8 + j) into out[0], out[1]; with B interleaved, D's columns 8c + 4 (lane % 4) .. + 3
    // of chunks c and c + 1 (c even) into out[0..3] (kScaleReadChunks).
    template <u32 kSlice>
    __device__ __forceinline__ void read_b_scales(u32 stage, u32 j, float* out) const {
      const float* sfb = reinterpret_cast<const float*>(smem + kLayout.sfb_offset + stage * kLayout.sfb_stage_bytes) +
                         (kSliceFirstCol<kSlice> / 8 + j) * 8 + (lane % 4) * 2 * kScaleReadChunks;
      if constexpr (kInterleavedB) {
        const float4_t sb = *reinterpret_cast<const float4_t*>(sfb);
        out[0] = sb.x;
        out[1] = sb.y;
        out[2] = sb.z;
        out[3] = sb.w;
      } else {
        const F32x2 sb = *reinterpret_cast<const F32x2*>(sfb);
        out[0] = sb.x;
        out[1] = sb.y;
      }
    }

    template <u32 kSlice>
    __device__ __forceinline__ void read_early_b_scales(u32 stage, EarlyBScales<kSlice>& early) const {
#pragma unroll
      for (u32 j = 0; j < kEarlyScaleChunks<kSlice>; j += kScaleReadChunks)
        read_b_scales<kSlice>(stage, j, &early.v[2 * j]);
    }

    // The weight-gradient form's promotion: accum += partial * sfa[row] * sfb[column] over slice kSlice's
    // columns, every column with its own B scale (B scaled per row), the early ones from `early`, the rest
    // read here from the block's slot (which is why the form releases the slot after the promotion).
    template <u32 kSlice>
    __device__ __forceinline__ void promote_weight_gradient(const float (&partial)[kPartialPerThread],
                                                            const EarlyBScales<kSlice>& early) {
      static_assert(kAccumulate && kWaves == 1, "the weight-gradient form's tiles have one wave");
      static_assert(!kInterleavedB || (kSliceFirstCol<kSlice> % 16 == 0 && kSliceCols<kSlice> % 16 == 0),
                    "whole 16-column groups");
      const float a0 = scales.a0[0], a1 = scales.a1[0];
#pragma unroll
      for (u32 j = 0; j < kSliceCols<kSlice> / 8; j += kScaleReadChunks) {
        float sb[2 * kScaleReadChunks];
        if (j < kEarlyScaleChunks<kSlice>) {
#pragma unroll
          for (u32 i = 0; i < 2 * kScaleReadChunks; ++i) sb[i] = early.v[2 * j + i];
        } else {
          read_b_scales<kSlice>(current_stage, j, sb);
        }
#pragma unroll
        for (u32 c = 0; c < kScaleReadChunks; ++c) {
          const u32 t = kSliceFirstCol<kSlice> / 8 + j + c;
          const float* p = partial + 4 * (j + c);
          const float b0 = sb[2 * c], b1 = sb[2 * c + 1];
          accum[4 * t + 0] += p[0] * b0 * a0;
          accum[4 * t + 1] += p[1] * b1 * a0;
          accum[4 * t + 2] += p[2] * b0 * a1;
          accum[4 * t + 3] += p[3] * b1 * a1;
        }
      }
    }

    // The bf16 form's promotion: accum += partial * sfa[row] * sfb over slice kSlice's columns of wave kWave, on
    // the CUDA cores (two-level accumulation). Fragment chunk j of the slice (8 columns) is column chunk c =
    // kSliceFirstCol / 8 + j of the tile, and accumulator chunk kWave * kBlockN / 8 + c.
    // Column-mapped tiles switch at their pieces' fixed boundaries; contiguous tiles that straddle two blocks
    // (192; the two-wave tiles) choose their switch column per slice at run time (with_switch_column).
    template <u32 kSlice, u32 kWave = kWaves - 1>
    __device__ __forceinline__ void promote(const float (&partial)[kPartialPerThread]) {
      static_assert(!kAccumulate, "the weight-gradient form promotes with promote_weight_gradient()");
      const float a0 = scales.a0[kWave], a1 = scales.a1[kWave];
      if constexpr (kUniformSfb) {
        promote_split<kSlice, kWave, kBlockN>(partial, a0 * scales.b0, a1 * scales.b0, 0.0f, 0.0f);
      } else if constexpr (kColumnMap) {
        promote_regions<kSlice, kWave>(partial);
      } else {
        const float s00 = a0 * scales.b0, s10 = a1 * scales.b0;
        const float s01 = a0 * scales.b1, s11 = a1 * scales.b1;
        with_switch_column(tile.sfb_switch, [&](auto column) {
          promote_split<kSlice, kWave, decltype(column)::value>(partial, s00, s10, s01, s11);
        });
      }
    }

    // A switch column as a compile-time value: the promotion with it compiled in instead of a select and two
    // multiplies per 8 columns. It lies at 128 - n0 % 128, a multiple of gcd(BLOCK_N, 128), so there are
    // 128 / gcd of them (2 for 192, 4 for the two-wave 96; one-wave tiles with more are column-mapped);
    // with_switch_column<kFirst>(column, f) calls f(SwitchColumn<column>{}), one branch per candidate from kFirst
    // down.
    template <u32 kColumn>
    struct SwitchColumn {
      static constexpr u32 value = kColumn;
    };
    template <u32 kSwitch = 128, typename F>
    static __device__ __forceinline__ void with_switch_column(u32 column, F&& f) {
      if constexpr (kSwitch <= kGcdBlockN128) {
        f(SwitchColumn<kSwitch>{});
      } else {
        if (column == kSwitch)
          f(SwitchColumn<kSwitch>{});
        else
          with_switch_column<kSwitch - kGcdBlockN128>(column, f);
      }
    }

    // Column-mapped tiles: accum += partial * a * b over the slice's columns, a * b formed per piece
    // (BlockScales).
    template <u32 kSlice, u32 kWave>
    __device__ __forceinline__ void promote_regions(const float (&partial)[kPartialPerThread]) {
      constexpr u32 kFirstColumnChunk = kSliceFirstCol<kSlice> / 8;
      constexpr u32 kWaveChunk = kWave * kBlockN / 8;
#pragma unroll
      for (u32 j = 0; j < kSliceCols<kSlice> / 8; ++j) {
        const u32 c = kFirstColumnChunk + j, t = kWaveChunk + c;
        const u32 region = fp8_gemm_map_piece_of(kBlockN, c * 8);
        const float s0 = scales.region[region][0], s1 = scales.region[region][1];
        accum[4 * t + 0] += s0 * partial[4 * j + 0];
        accum[4 * t + 1] += s0 * partial[4 * j + 1];
        accum[4 * t + 2] += s1 * partial[4 * j + 2];
        accum[4 * t + 3] += s1 * partial[4 * j + 3];
      }
    }

    // accum += partial * s over the slice's columns: (s00, s10) for rows r and r + 8 before tile column
    // kSwitch, (s01, s11) from it on (tiles that reach a third block are column-mapped).
    template <u32 kSlice, u32 kWave, u32 kSwitch>
    __device__ __forceinline__ void promote_split(const float (&partial)[kPartialPerThread], float s00, float s10,
                                                  float s01, float s11) {
      constexpr u32 kFirstColumnChunk = kSliceFirstCol<kSlice> / 8;
      constexpr u32 kWaveChunk = kWave * kBlockN / 8;
#pragma unroll
      for (u32 j = 0; j < kSliceCols<kSlice> / 8; ++j) {
        const u32 c = kFirstColumnChunk + j, t = kWaveChunk + c;
        const bool first = c * 8 < kSwitch;
        const float s0 = first ? s00 : s01;
        const float s1 = first ? s10 : s11;
        accum[4 * t + 0] += s0 * partial[4 * j + 0];
        accum[4 * t + 1] += s0 * partial[4 * j + 1];
        accum[4 * t + 2] += s1 * partial[4 * j + 2];
        accum[4 * t + 3] += s1 * partial[4 * j + 3];
      }
    }

    // Two waves, serial: the first wave's WGMMAs were issued with the block; wait for them, promote them and
    // issue the next wave's into the same partial. The caller waits for the last wave, releases the slot and
    // promotes it.
    template <u32 kWave = 0>
    __device__ __forceinline__ void walk_waves(float (&partial)[kPartialPerThread]) {
      if constexpr (kWave + 1 < kWaves) {
        ptx::wgmma_wait_group<0>();
        ptx::fence_operands(partial);
        read_a_scales<kWave + 1>(current_stage, scales);
        promote<0, kWave>(partial);
        issue_slice<0, kWave + 1>(current_stage, partial);
        walk_waves<kWave + 1>(partial);
      }
    }

    // Split-K, second CTA: once the first CTA has taken the previous tile's sums ("free"), write this
    // warpgroup's accumulator into its buffer, 16 bytes per st.async, counted on its "ready" barrier. The
    // layout is thread-major per 4 floats, so the first CTA's thread with the same index (which holds the same
    // fragment of the tile) reads exactly what this one wrote.
    __device__ __forceinline__ void send_partial() {
      u64* reduce = reinterpret_cast<u64*>(smem + kLayout.reduce_barrier_offset);
      ptx::mbarrier_wait_parity(&reduce[kNumMathWarpgroups + warpgroup], reduce_phase ^ 1);
      const u32 remote_ready = ptx::map_shared_to_rank(&reduce[warpgroup], 0);
      const u32 remote_buffer =
          ptx::map_shared_to_rank(smem + kLayout.reduce_offset + warpgroup * 64 * kBlockN * 4, 0);
      const u32 t = threadIdx.x % 128;
#pragma unroll
      for (u32 i = 0; i < kAccumPerThread / 4; ++i)
        ptx::st_async_v4(remote_buffer + (i * 128 + t) * 16, accum[4 * i + 0], accum[4 * i + 1], accum[4 * i + 2],
                         accum[4 * i + 3], remote_ready);
      reduce_phase ^= 1;
    }

    // Split-K, first CTA: wait for the other CTA's sums of this tile, add them, and free the buffer again.
    __device__ __forceinline__ void receive_partial() {
      u64* reduce = reinterpret_cast<u64*>(smem + kLayout.reduce_barrier_offset);
      const u32 t = threadIdx.x % 128;
      if (t == 0) ptx::mbarrier_arrive_expect_tx(&reduce[warpgroup], 64 * kBlockN * 4);
      ptx::mbarrier_wait_parity(&reduce[warpgroup], reduce_phase);
      const float* buffer = reinterpret_cast<const float*>(smem + kLayout.reduce_offset + warpgroup * 64 * kBlockN * 4);
#pragma unroll
      for (u32 i = 0; i < kAccumPerThread / 4; ++i) {
        const float4_t v = *reinterpret_cast<const float4_t*>(buffer + (i * 128 + t) * 4);
        accum[4 * i + 0] += v.x;
        accum[4 * i + 1] += v.y;
        accum[4 * i + 2] += v.z;
        accum[4 * i + 3] += v.w;
      }
      // Every thread of the warpgroup has its values in registers: the buffer may be overwritten.
      ptx::named_barrier_sync(1 + warpgroup, 128);
      if (t == 0) ptx::mbarrier_arrive_cluster(&reduce[kNumMathWarpgroups + warpgroup], 1);
      reduce_phase ^= 1;
    }

    // One slice: put the next slice's WGMMAs on their way (kIssueNext; into `next` before promoting
    // `current` when the promotion overlaps, into `current` after it otherwise), promote `current`, and,
    // after a block's last slice, release its slot and store the tile after its last block. The WGMMA issue
    // must not sit under a runtime condition: ptxas then cannot follow the pipeline and serialises every
    // wgmma (C7514), so the caller unrolls the walk into steps that always issue and one final step that
    // does not.
    template <bool kIssueNext, u32 kSlice>
    __device__ __forceinline__ void step(float (&current)[kPartialPerThread], float (&next)[kPartialPerThread]) {
      static_assert(kWaves == 1, "two-wave tiles walk their K blocks in walk_two_wave_tiles()");
      constexpr bool kLastSlice = kSlice + 1 == kSlices;
      u32 next_unit = unit, next_kb = kb;
      bool tile_ends = false;
      if constexpr (kLastSlice) {
        next_kb = kb + 1;
        if (next_kb == tile_kb_count()) {
          next_kb = 0;
          // The contiguous m-grouped form moves its cursor only where a next tile is issued (after the last tile it
          // would have no unit to go to), and reads ahead at the end of this step (GemmPaddingSkip).
          if constexpr (!kContiguous)
            next_unit += schedule.stride;
          else if constexpr (kIssueNext)
            next_unit = skip.advance(next_unit, [&](u32 u) { return m_entry(p, schedule, u); });
        }
        tile_ends = next_kb == 0;
      }
      const Tile next_tile = kIssueNext && tile_ends ? Tile(schedule, next_unit) : tile;
      BlockScales next_scales = scales;
      // The weight-gradient form's B scales, read before the wait below (kEarlyScaleChunks).
      [[maybe_unused]] EarlyBScales<kSlice> early_b;
      if constexpr (kAccumulate) read_early_b_scales<kSlice>(current_stage, early_b);

      if constexpr (kOverlapPromotion && kIssueNext) {
        if constexpr (kLastSlice)
          next_scales = issue(issue_slot, next);
        else
          issue_slice<kSlice + 1>(current_stage, next);
        ptx::wgmma_wait_group<1>();  // `current`'s group is complete; `next`'s runs on
      } else {
        ptx::wgmma_wait_group<0>();
      }
      ptx::fence_operands(current);
      // The inference form's scales are in registers: the slot can go back before the promotion. The
      // weight-gradient form reads B's scales from the slot while promoting.
      if constexpr (kLastSlice && !kAccumulate) release(current_stage);
      // Serial promotion: look at the next block's full barrier now, without blocking. The check's latency then
      // passes under the promotion's FMAs, and when the block has landed (the common case) issue() goes
      // straight to its WGMMAs; waiting there instead put the check's round trip between every two blocks
      // (1-3.6 % of the 256x128 kernel's time at M = 4096, measured on the H200 against DeepGEMM's
      // loop, whose unrolling gives its compiler the same order).
      if constexpr (!kOverlapPromotion && kIssueNext && kLastSlice)
        next_block_landed = test_full(issue_slot.stage, issue_slot.phase);
      if constexpr (kAccumulate)
        promote_weight_gradient<kSlice>(current, early_b);
      else
        promote<kSlice, kWaves - 1>(current);
      if constexpr (kLastSlice && kAccumulate) release(current_stage);

      if constexpr (kLastSlice) {
        const auto store_tile = [&] {
          // A pair's tile beyond N is never stored: contiguous, its columns lie past N (the stores' masks and
          // TMA's bounds drop them); column-mapped, they would be other tiles' columns.
          if constexpr (kColumnMap && kClusterN > 1)
            if (tile.n_origin >= kNumNBlocks) return;
          if constexpr (kTmaStore)
            store_tile_tma(p, smem, accum, warpgroup, (threadIdx.x / 32) % 4, lane, tile.m_block, tile.n_origin,
                           tile_d_group());
          else if constexpr (kAccumulate)
            reduce_tile_tma(p, smem, accum, warpgroup, (threadIdx.x / 32) % 4, lane, tile.m_block, tile.n_origin,
                            tile_d_group());
          else
            store_tile_direct(p, accum, tile.m_block * kBlockM + row_in_tile, tile.n_origin, (lane % 4) * 2);
        };
        if constexpr (kSplitK > 1 && kSlices == 1) {
          // Split-K: only the cluster's first CTA stores; the second hands its partial sums over. The whole tile
          // end is one branch with the accumulators' zeroing inside: with the zeroing in a branch of its own,
          // NVVM turned it into selects (selp.f32) that ran on every K block (1.5 FSEL per accumulator; these
          // kernels 3-7 % slower on the H200 at decode sizes, twenty-first session). Not for the two-slice
          // tiles (176, 192 columns), which spill 88-400 bytes in this form.
          if (tile_ends) {
            if (schedule.rank == 0) {
              receive_partial();
              store_tile();
            } else {
              send_partial();
            }
#pragma unroll
            for (u32 i = 0; i < kAccumPerThread; ++i) accum[i] = 0.0f;
          }
        } else {
          // The kernels without split-K (whose zeroing stays a branch) and the two-slice split-K tiles.
          bool store = true;
          if constexpr (kSplitK > 1) {
            if (tile_ends) {
              if (schedule.rank == 0)
                receive_partial();
              else
                send_partial();
              store = schedule.rank == 0;
            }
          }
          if (tile_ends && store) store_tile();
          if (tile_ends) {
#pragma unroll
            for (u32 i = 0; i < kAccumPerThread; ++i) accum[i] = 0.0f;
          }
        }
        if constexpr (!kOverlapPromotion && kIssueNext) next_scales = issue(issue_slot, next);
        // The next tile's first block is issued: the read ahead no longer delays it.
        if constexpr (kContiguous && kIssueNext)
          if (tile_ends) skip.read_ahead(next_unit, [&](u32 u) { return m_entry(p, schedule, u); });
        current_stage = issue_slot.stage;
        issue_slot.advance(ring_length(p));
        unit = next_unit;
        kb = next_kb;
        tile = next_tile;
        scales = next_scales;
      }
    }

    // One-wave tiles: every (tile, K block) of this CTA (see Schedule), in order, as one flattened walk of
    // step()s.
    __device__ __forceinline__ void walk_blocks(float (&partial0)[kPartialPerThread]) {
      u32 num_tiles = (schedule.num_units - schedule.first + schedule.stride - 1) / schedule.stride;
      if constexpr (kContiguous) num_tiles = skip.left;  // the tiles that are not padding only
      u32 num_blocks = num_tiles * schedule.kb_count;
      if constexpr (kKGrouped)  // each tile its group's K count
        num_blocks = fp8_gemm_grouped_blocks(schedule.groups->k_blocks, schedule.groups->num_groups,
                                             schedule.units_per_group, schedule.first, schedule.stride);
      issue_next_block(partial0);
      if constexpr (kOverlapPromotion) {
        // The steps alternate between two named partials, two per iteration, so every register index is
        // compile-time: whole K blocks up to BLOCK_N = 128 (both steps slice 0), a block's two halves for wider
        // tiles (slices 0 and 1; their count is even, so the odd branch of the tail is never taken there). The
        // tail keeps this shape for both: ptxas follows the WGMMA pipeline through it, and serialises every
        // wgmma (C7514) for a loop followed by a plain last step.
        constexpr u32 kSecond = kSlices - 1;  // the slice of each iteration's second step
        float partial1[kPartialPerThread];
        const u32 num_steps = kSlices * num_blocks;
        u32 i = 0;
        for (; i + 2 < num_steps; i += 2) {
          step<true, 0>(partial0, partial1);
          step<true, kSecond>(partial1, partial0);
        }
        if (i + 1 < num_steps) {
          step<true, 0>(partial0, partial1);
          step<false, kSecond>(partial1, partial0);
        } else {
          step<false, 0>(partial0, partial1);
        }
      } else {
        for (u32 b = 0; b + 1 < num_blocks; ++b) step<true, 0>(partial0, partial0);
        step<false, 0>(partial0, partial0);
      }
    }


    // Two-wave tiles (256 rows: serial promotion, TMA stores, no split-K): a loop over this CTA's tiles around
    // a counted loop over each tile's K blocks. The flattened walk of step() decides at every block whether a
    // tile ends (and, if so, where the next one is); here that bookkeeping and the epilogue sit outside the K
    // loop, whose body is only the block's waves. Measured on the H200 against the flattened walk in one call:
    // 2.0-2.2 % faster on every 256x128 shape tried (4096 x 7168 x 16384: 668.4 -> 653.4 µs). Its shape matters
    // more than its instruction count suggests: peeling each tile's last block (to issue the next tile's first
    // block before the epilogue) made it 5 % slower, with or without the early issue.
    __device__ __forceinline__ void walk_two_wave_tiles(float (&partial)[kPartialPerThread]) {
      const u32 warp_in_group = (threadIdx.x / 32) % 4;
      for (u32 u = schedule.first; u < schedule.num_units; u += schedule.stride) {
        tile = Tile(schedule, u);
        const auto block = [&] {
          issue_next_block(partial);
          walk_waves(partial);
          ptx::wgmma_wait_group<0>();
          ptx::fence_operands(partial);
          release(current_stage);
          // Look at the next block's full barrier now, without blocking, as step() does: the check's latency
          // passes under the promotion's FMAs. (After the last block of the last tile it looks at a slot that
          // is never filled again; the answer is unused.)
          next_block_landed = test_full(issue_slot.stage, issue_slot.phase);
          promote<0>(partial);
        };
        // Two blocks per trip, over the compile-time count (two-wave tiles have no split-K), so nothing tests
        // for the loop's end between them: 1.3-1.7 % faster on the H200 at M = 4096 with the reads above
        // (at 4096 x 7168 x 16384 the trip's static stalls 617 -> 583 cycles, the gap from the second wave's
        // wait to the next block's first WGMMA 135 -> 113; eighteenth session). Unrolling #pragma unroll 2 over
        // the run-time count kept an exit test after the first block. Never wholly: a loop that ptxas unrolls
        // away had its wgmmas serialised and spilled (C7512).
        if constexpr (kNumKBlocks >= 2) {
#pragma unroll 1
          for (u32 i = 0; i < kNumKBlocks / 2; ++i) {
            block();
            block();
          }
        }
        if constexpr (kNumKBlocks % 2 != 0) block();
        store_tile_tma(p, smem, accum, warpgroup, warp_in_group, lane, tile.m_block, tile.n_origin, 0);
#pragma unroll
        for (u32 i = 0; i < kAccumPerThread; ++i) accum[i] = 0.0f;
      }
    }
  };

  static __device__ __forceinline__ void consume(const Fp8GemmParams& p, u8* smem, u64* full, u64* empty,
                                                 const Schedule& schedule, u32 warpgroup) {
    const u32 lane = threadIdx.x % 32;
    const u32 warp_in_group = (threadIdx.x / 32) % 4;
    GemmPaddingSkip skip = padding_skip(p, schedule);
    const u32 first = first_walk_unit(p, schedule, skip);
    if (first < schedule.num_units) {
      // This thread's two rows of the tile (the WGMMA accumulator fragment: rows r and r + 8).
      MathState st{p, smem, full, empty, schedule, warpgroup, lane, warpgroup * 64 + warp_in_group * 16 + lane / 4,
                   first, 0, Tile(schedule, first), Slot{}, 0, BlockScales{}, 0, {}};
      if constexpr (kContiguous) st.skip = skip;
#pragma unroll
      for (u32 i = 0; i < kAccumPerThread; ++i) st.accum[i] = 0.0f;
      float partial0[kPartialPerThread];
      if constexpr (kWaves > 1) {
        st.walk_two_wave_tiles(partial0);
      } else {
        st.walk_blocks(partial0);
      }
    }
    // The staging tile must stay valid until the last stores (or reduce-adds) have read it. Only that: the
    // writes themselves complete with the grid, and waiting for them here would add their latency to every
    // call's tail.
    if ((kTmaStore || kAccumulate) && threadIdx.x % 128 == 0) ptx::tma_store_wait_read<0>();
  }

  // The plain-store epilogues' walk over this thread's accumulator fragment: visit(row, col, i) for each pair
  // of adjacent columns (col, col + 1) of D it holds inside D, accum[i] and accum[i + 1] their values. `row0`
  // is this thread's first row of D (the other is 8 below); its columns are `lane_col` into each 8-column chunk
  // of the tile at `n_origin` (column_of: a chunk never straddles a column-mapped tile's pieces, multiples of 16).
  // The masks at the M and N edges are the only conditions; without an N tail the column one is compiled out.
  template <typename Visit>
  static __device__ __forceinline__ void for_each_fragment_pair(const Fp8GemmParams& p, u32 row0, u32 n_origin,
                                                                u32 lane_col, Visit&& visit) {
    const u32 row1 = row0 + 8;
#pragma unroll
    for (u32 j = 0; j < kBlockN / 8; ++j) {
      const u32 col = column_of(n_origin, j * 8) + lane_col;
      if (!kNTail || col < kN) {
        if (row0 < p.m) visit(row0, col, 4 * j);
        if (row1 < p.m) visit(row1, col, 4 * j + 2);
      }
    }
  }

  // The weight-gradient epilogue: D (fp32) += accum through TMA's reduce-add, which reads, adds and writes D in
  // L2 while the math warps go on with the next tile (with no C, p.store_d: D = accum through TMA stores of the
  // same boxes). Each warpgroup stages its 64 rows kReduceCols columns at a time (fp8_gemm_reduce_staging: 32,
  // whole 128-byte lines a row, or 16) in its kReduceBuffers buffers (2, or 1 where BLOCK_N = 192 leaves no room
  // for two), swizzled as wide as a row (fp8_gemm_reduce_offset). Rows past M and columns past N are the map's
  // bounds.
  // Before: 8-byte read-add-writes from the fragment, by the math warps, at the tile's end: each round of tiles
  // waited for its reads of D (the writes fill L2), 7168 x 2112 x 4096 173 us on the H200 (234.8 with every
  // read waited behind the previous pair's write).
  static constexpr Fp8GemmReduceStaging kReduceStaging = fp8_gemm_reduce_staging(kBlockM, kBlockN, kStages, kSplitK);
  static constexpr u32 kReduceCols = kReduceStaging.cols;
  static constexpr u32 kReduceBuffers = kReduceStaging.buffers;
  static constexpr u32 kReduceChunkBytes = kReduceStaging.buffer_bytes();
  static constexpr u32 kReduceChunks = kBlockN / kReduceCols;
  static_assert(kBlockN % kReduceCols == 0, "whole reduce chunks");

  static __device__ __forceinline__ void reduce_tile_tma(const Fp8GemmParams& p, u8* smem,
                                                         const float (&accum)[kAccumPerThread], u32 warpgroup,
                                                         u32 warp_in_group, u32 lane, u32 m_block, u32 n_origin,
                                                         u32 d_group) {
    static_assert(!kColumnMap && kWaves == 1 && kFp8GemmReduceRows == 64,
                  "the weight-gradient form's tiles are contiguous, one 64-row wave per warpgroup");
    const bool issuer = warp_in_group == 0 && lane == 0;
    u8* const buffers = smem + kLayout.d_offset + warpgroup * kReduceBuffers * kReduceChunkBytes;
    const i32 first_row = static_cast<i32>(m_block * kBlockM + warpgroup * 64);
    const u32 q = lane % 4;
    const u32 rows[2] = {warp_in_group * 16 + lane / 4, warp_in_group * 16 + lane / 4 + 8};
    // The staging's pieces and their order (fp8_gemm_layout.h): odd rows write piece step ^ kFlip at step `step`.
    constexpr u32 kPieces = kReduceCols / fp8_gemm_reduce_piece_cols(kInterleavedB);
    constexpr u32 kFlip = fp8_gemm_reduce_piece_flip(kReduceCols, kInterleavedB);
    const bool odd_row = (lane / 4) % 2 == 1;
#pragma unroll
    for (u32 c = 0; c < kReduceChunks; ++c) {
      u8* const buffer = buffers + (c % kReduceBuffers) * kReduceChunkBytes;
      // The reduce that last read this buffer must be done reading it: at a tile's first chunk every earlier
      // one (they ran under the whole tile's main loop), later the one before the previous chunk (with one
      // buffer, the previous chunk's).
      if (issuer) {
        if (c == 0)
          ptx::tma_store_wait_read<0>();
        else
          ptx::tma_store_wait_read<kReduceBuffers - 1>();
      }
      ptx::named_barrier_sync(1 + warpgroup, 128);
#pragma unroll
      for (u32 step = 0; step < kPieces; ++step)
#pragma unroll
        for (u32 r = 0; r < 2; ++r) {
          const u32 piece = odd_row ? step ^ kFlip : step;
          const u32 mine = fp8_gemm_reduce_accum_index(kReduceCols, kInterleavedB, c, step, r);
          const u32 flipped = fp8_gemm_reduce_accum_index(kReduceCols, kInterleavedB, c, step ^ kFlip, r);
          // Selected between two compile-time indices (never indexed by the lane: no local memory).
          const auto value = [&](u32 k) { return kFlip != 0 && odd_row ? accum[flipped + k] : accum[mine + k]; };
          u8* const at = buffer + fp8_gemm_reduce_piece_offset(kReduceCols, kInterleavedB, rows[r], piece, q);
          if constexpr (kInterleavedB)
            *reinterpret_cast<float4_t*>(at) = float4_t{value(0), value(1), value(4), value(5)};
          else
            *reinterpret_cast<F32x2*>(at) = F32x2{value(0), value(1)};
        }
      // Generic-proxy writes -> visible to the TMA unit, then every writer is done before the issue.
      ptx::fence_proxy_async_shared_cta();
      ptx::named_barrier_sync(1 + warpgroup, 128);
      if (issuer) {
        const u32 col = n_origin + c * kReduceCols;
        if ((!kNTail || col < kN) && static_cast<u32>(first_row) < p.m) {
          // D is [G, M, N] when K groups share the launch: the group is the third coordinate. With no C the box
          // is stored, not added (store_d).
          const i32 c0 = static_cast<i32>(col);
          if constexpr (kKGrouped) {
            if (p.store_d)
              ptx::tma_store_3d(&p.tma_d, buffer, c0, first_row, static_cast<i32>(d_group));
            else
              ptx::tma_reduce_add_3d(&p.tma_d, buffer, c0, first_row, static_cast<i32>(d_group));
          } else if (p.store_d) {
            ptx::tma_store_2d(&p.tma_d, buffer, c0, first_row);
          } else {
            ptx::tma_reduce_add_2d(&p.tma_d, buffer, c0, first_row);
          }
        }
        ptx::tma_store_commit();
      }
    }
  }

  // Plain stores of packed bf16 pairs from the accumulator fragment.
  static __device__ __forceinline__ void store_tile_direct(const Fp8GemmParams& p, const float (&accum)[kAccumPerThread],
                                                           u32 row0, u32 n_origin, u32 lane_col) {
    u8* d = static_cast<u8*>(p.d);
    for_each_fragment_pair(p, row0, n_origin, lane_col, [&](u32 row, u32 col, u32 i) {
      *reinterpret_cast<u32*>(d + (static_cast<u64>(row) * p.ldd + col) * 2) =
          ptx::f32x2_to_bf16x2(accum[i], accum[i + 1]);
    });
  }

  // This warpgroup's 64 rows through shared memory and TMA stores. The staging tile holds kBlockN /
  // kStoreCols column groups of [kBlockM][kStoreCols] bf16, each swizzled like the TMA box expects (16-byte
  // unit u of row r sits at unit u ^ ((byte offset >> 7) & (kUnitsPerRow - 1))), which also spreads each
  // stmatrix over all banks.
  static __device__ __forceinline__ void store_tile_tma(const Fp8GemmParams& p, u8* smem,
                                                        const float (&accum)[kAccumPerThread], u32 warpgroup,
                                                        u32 warp_in_group, u32 lane, u32 m_block, u32 n_origin,
                                                        [[maybe_unused]] u32 d_plane) {
    const bool issuer = warp_in_group == 0 && lane == 0;
    // The previous tile's stores must have finished reading the staging rows before they are overwritten.
    if (issuer) ptx::tma_store_wait_read<0>();
    ptx::named_barrier_sync(1 + warpgroup, 128);

    // stmatrix x4 writes column chunks j, j + 1 (8 columns each), top and bottom 8 rows of this warp's 16:
    // lane l addresses row l % 8 of matrix l / 8 = (chunk j + (l / 8) / 2, half (l / 8) % 2). With two waves,
    // wave v's rows are kWaveRows * v further down and its accumulators kBlockN / 2 further on.
    const u32 matrix = lane / 8;
#pragma unroll
    for (u32 v = 0; v < kWaves; ++v) {
      const u32 row = v * kWaveRows + warpgroup * 64 + warp_in_group * 16 + (matrix & 1) * 8 + lane % 8;
      const float* wave_accum = accum + v * (kBlockN / 2);
#pragma unroll
      for (u32 j = 0; j < kBlockN / 8; j += 2) {
        const u32 chunk = j + (matrix >> 1);
        const u32 linear =
            (chunk / kUnitsPerRow) * kStoreGroupBytes + row * kStoreRowBytes + (chunk % kUnitsPerRow) * 16;
        const u32 swizzled = linear ^ (((linear >> 7) & (kUnitsPerRow - 1)) << 4);
        ptx::stmatrix_x4(smem + kLayout.d_offset + swizzled,
                         ptx::f32x2_to_bf16x2(wave_accum[4 * j + 0], wave_accum[4 * j + 1]),
                         ptx::f32x2_to_bf16x2(wave_accum[4 * j + 2], wave_accum[4 * j + 3]),
                         ptx::f32x2_to_bf16x2(wave_accum[4 * j + 4], wave_accum[4 * j + 5]),
                         ptx::f32x2_to_bf16x2(wave_accum[4 * j + 6], wave_accum[4 * j + 7]));
      }
    }
    // Generic-proxy writes -> visible to the TMA engine, then every writer is done before the issue.
    ptx::fence_proxy_async_shared_cta();
    ptx::named_barrier_sync(1 + warpgroup, 128);
    if (issuer) {
#pragma unroll
      for (u32 v = 0; v < kWaves; ++v) {
        const u32 first_row = v * kWaveRows + warpgroup * 64;
#pragma unroll
        for (u32 g = 0; g < kBlockN / kStoreCols; ++g) {
          const u8* const box = smem + kLayout.d_offset + g * kStoreGroupBytes + first_row * kStoreRowBytes;
          const i32 col = static_cast<i32>(column_of(n_origin, g * kStoreCols));
          const i32 row = static_cast<i32>(m_block * kBlockM + first_row);
          // The masked form's D is 3-D, the group its plane: rows past the group's M are clipped, not stored into
          // the next group's.
          if constexpr (kMasked)
            ptx::tma_store_3d(&p.tma_d, box, col, row, static_cast<i32>(d_plane));
          else
            ptx::tma_store_2d(&p.tma_d, box, col, row);
        }
      }
      ptx::tma_store_commit();
    }
  }
};

}  // namespace kiln::kernels
