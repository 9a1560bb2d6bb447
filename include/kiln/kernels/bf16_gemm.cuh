// BF16 GEMM (sm_90a):  D[M, N] (bf16 or fp32) = A[M, K] (bf16) . B[N, K]^T (bf16), summed in FP32, or
// D[M, N] (fp32) += A . B^T (kEpilogue: bf16_gemm_params.h).
//
// A and B are K-major or MN-major ("Operands" below); parameters and shared-memory layout in bf16_gemm_params.h.
//
// Structure (persistent, warp-specialised), the FP8 GEMM's (fp8_gemm.cuh) without its scales:
//   * one CTA per SM walks output tiles unit = cluster, cluster + clusters, ...; tiles are ordered in groups of
//     kGroupM m units (m fastest inside a group) so that a wave of CTAs shares A and B panels in L2;
//   * the producer warpgroup's elected thread issues, per 64-wide K block, the TMA loads of the A and B tiles into
//     a kStages-deep ring of slots, each guarded by a "full" mbarrier (transaction bytes) and an "empty" mbarrier
//     (one arrival per math warp, of each CTA sharing the slot's B);
//   * math warpgroup w owns rows [64w, 64w + 64) of each 64 * kNumMathWarpgroups-row wave of the tile: per K block
//     it issues four wgmma m64nNk16 bf16 (128-byte swizzled operands straight from shared memory) into its FP32
//     accumulators, which the tensor cores keep summing across the whole K loop (bf16 products summed in FP32 need
//     no promotion on the CUDA cores, unlike FP8's), and frees the previous block's slot once that block's WGMMAs
//     are done, so that one block's WGMMAs are always queued behind the running ones;
//   * setmaxnreg moves registers from the producer (40) to the math warpgroups (232 / 240);
//   * kClusterM = 2: CTAs work in pairs on vertically adjacent tiles (same n block, m blocks 2u and 2u + 1); each
//     loads half of the shared B tile and multicasts it to both, halving B's traffic from L2; a slot is free once
//     the math warps of both CTAs have released it;
//   * epilogue: each math warpgroup writes its rows into a swizzled staging tile (converted to bf16 with stmatrix,
//     or fp32 as they are) and one thread issues TMA stores, or for kBf16GemmAddF32 TMA reduce-adds into D (both
//     clip rows >= M and columns >= N); the wait for them to finish reading the staging tile is deferred to the
//     next tile's epilogue, so it overlaps the next main loop. With more stages than fit beside a whole staging
//     tile, a part of one, in passes (kPasses).
//
// Operands: A and B each K-major (rows of K, the default) or MN-major (kMnMajor: columns of M or N, A^T or B^T
// stored row-major), loaded by TMA in boxes of 64 x 64 (128-byte rows of M or N, one per K) and fed to WGMMA with
// its transpose immediate; the shared-memory bytes and the offsets of warpgroups and waves are the K-major ones.
//
// Grouping (kGrouping, bf16_gemm_params.h): the MoE experts' GEMMs in one launch, with a bf16 D and K-major operands,
// tiles of 64 or 128 rows and no CTA pairs. B holds every group's [N, K] one after the other (one map over them all);
// the contiguous form's B may instead be N-major, every group's [K, N] (m_grouped_bf16_gemm_nn_contiguous), through a
// 3-D map whose plane is the group, so that a box at a K tail is zero-filled rather than read from the next group.
//   * m-grouped contiguous: A's rows are grouped by expert, each group's aligned to the m block; an m block takes its
//     first row's group (gemm_m_group_entry) and reads that group's rows of B; a block of padding only (first row -1)
//     is skipped by the producer and the math warps alike (GemmPaddingSkip), its rows of D not written; a block whose
//     first row names no group is made NaN before it is stored.
//   * masked: A [G, M, K] and D [G, M, N], group g's first masked_m[g] rows valid; the work units are the valid m
//     blocks' tiles, group after group (gemm_schedule.cuh's GemmMaskedTileWalk); A's map spans every group's rows,
//     D's is 3-D with the group as its plane, so no store crosses into the next group's rows.
//   * k-grouped (the experts' weight gradients, k_grouped_bf16_gemm_tn_contiguous): group g's D[M, N] (fp32, stored or
//     added into) = A_g^T . B_g with A_g [K_g, M] and B_g [K_g, N] (both MN-major), K_g at run time; every group's
//     M x N tiles in one walk (GemmKGroupedTileWalk), each tile through its group's own maps of A and B
//     (Bf16GemmKGroupedParams: TMA zero-fills a box at the group's K tail) and its group's plane of a 3-D D.
//
// Edges: M is a run-time value (TMA zero-fills rows of A beyond M, or loads only align(M, 8) rows of the last m block,
// bf16_gemm_last_box_rows; the stores clip them). N is compile-time,
// N % 8 == 0; K is compile-time, K % 8 == 0 (16-byte TMA strides), except in the k-grouped form (any K_g >= 1 at run
// time: K is the rows of its MN-major operands); a K tail inside the last 64-block is zero-filled by TMA and
// contributes nothing.
#pragma once

#include "kiln/kernels/bf16_gemm_params.h"
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
#include "kiln/ptx/wgmma_bf16_shapes.cuh"

namespace kiln::kernels {

// kN, kK: the problem's N and K. kBlockM = 64 * kNumMathWarpgroups rows, or twice that (two waves: each math
// warpgroup owns two 64-row pieces of the tile, rows 64 * kNumMathWarpgroups * v + 64 w for wave v), and kBlockN
// columns per tile; kStages pipeline slots (bf16_gemm_max_stages gives the most that fit). Launch with
// bf16_gemm_num_threads(kNumMathWarpgroups) threads, bf16_gemm_layout(...).total_bytes of dynamic shared memory, at
// most one CTA per SM, and with kClusterM = 2 clusters of (2, 1, 1), an even grid and a K-major B's tensor map boxed
// {64, kBlockN / 2} (an N-major B's stays {64, 64}).
// kEpilogue: kBf16GemmStoreBf16 (D bf16), kBf16GemmStoreF32 (D fp32) or kBf16GemmAddF32 (D fp32, added into).
// kMnMajor: kBf16GemmMnMajorA | kBf16GemmMnMajorB for MN-major operands (0: both K-major); an N-major B needs BLOCK_N
// a multiple of 64 (of 128 in pairs, each CTA loading whole 64-column boxes).
// kGrouping: kBf16GemmDense, kBf16GemmMGrouped or kBf16GemmMasked ("Grouping" above): 64- or 128-row tiles, no pairs,
// a bf16 D, K-major operands; or kBf16GemmKGrouped: kK = kBf16GemmRunTimeK, a float32 D, MN-major operands, no pairs,
// launched with Bf16GemmKGroupedParams.
template <u32 kN, u32 kK, u32 kBlockM, u32 kBlockN, u32 kStages, u32 kNumMathWarpgroups, u32 kClusterM,
          u32 kEpilogue = kBf16GemmStoreBf16, u32 kMnMajor = 0, u32 kGroupM = kBf16GemmDefaultGroupM,
          u32 kGrouping = kBf16GemmDense>
struct Bf16Gemm {
  static constexpr u32 kBlockK = kBf16GemmBlockK;
  static constexpr u32 kNumKBlocks = (kK + kBlockK - 1) / kBlockK;
  static constexpr u32 kNumNBlocks = (kN + kBlockN - 1) / kBlockN;
  static constexpr u32 kWgmmaK = 16;  // K of one wgmma.m64nNk16 for 16-bit inputs (32 bytes of a 128-byte row)
  static constexpr u32 kWaveRows = 64 * kNumMathWarpgroups;
  static constexpr u32 kWaves = kBlockM / kWaveRows;
  static constexpr u32 kAccumPerWave = kBlockN / 2;  // a 64 x kBlockN fp32 tile over 128 threads
  static constexpr u32 kNumThreads = bf16_gemm_num_threads(kNumMathWarpgroups);
  static constexpr u32 kProducerRegisters = kNumMathWarpgroups == 1 ? 56 : 40;
  static constexpr u32 kMathRegisters = kNumMathWarpgroups == 1 ? 240 : 232;
  static constexpr u32 kOutBytes = bf16_gemm_out_bytes(kEpilogue);
  static constexpr Bf16GemmLayout kLayout = bf16_gemm_layout(kBlockM, kBlockN, kStages, kOutBytes);
  static constexpr u32 kEmptyArrivals = kNumMathWarpgroups * 4 * kClusterM;
  static constexpr u32 kProducerWarp = kNumMathWarpgroups * 4;
  // TMA-store epilogue geometry: column groups of kStoreCols, staging rows of kStoreCols * kOutBytes bytes
  // swizzled in 16-byte units (kUnitsPerRow per row).
  static constexpr u32 kStoreCols = bf16_gemm_store_cols(kBlockN, kOutBytes);
  static constexpr u32 kStoreRowBytes = kStoreCols * kOutBytes;
  static constexpr u32 kUnitsPerRow = kStoreRowBytes / 16;
  static constexpr u32 kStoreGroupBytes = kBlockM * kStoreRowBytes;
  // The staging tile's columns (bf16_gemm_staging_cols): the whole tile's, or a part of them stored in kPasses passes
  // where a stage count beyond bf16_gemm_max_stages was asked for.
  static constexpr u32 kStagingCols = bf16_gemm_staging_cols(kBlockM, kBlockN, kStages, kOutBytes);
  static constexpr u32 kPasses = kBlockN / kStagingCols;
  static constexpr u32 kRowBytes = kBlockK * 2;  // one K block of one row of A or B
  static constexpr bool kAMnMajor = (kMnMajor & kBf16GemmMnMajorA) != 0;
  static constexpr bool kBMnMajor = (kMnMajor & kBf16GemmMnMajorB) != 0;
  // An MN-major operand's stage: boxes of 64 M or N (128 bytes) x 64 K, kMnBoxBytes each, one after the other along
  // M or N, so that box i holds rows 64 i.. of the K-major tile's bytes: warpgroup and wave offsets are the same.
  static constexpr u32 kMnBox = 64;
  static constexpr u32 kMnBoxBytes = kMnBox * kRowBytes;
  // One wgmma's K (16) further into a stage, in 16-byte units: 32 bytes along a K-major row, or two 8-row groups of
  // 128-byte MN-major rows.
  static constexpr u32 kAStepUnits = kAMnMajor ? 2 * 1024 / 16 : 2;
  static constexpr u32 kBStepUnits = kBMnMajor ? 2 * 1024 / 16 : 2;

  static_assert(kNumMathWarpgroups == 1 || kNumMathWarpgroups == 2, "one or two math warpgroups");
  static_assert(kEpilogue == kBf16GemmStoreBf16 || kEpilogue == kBf16GemmStoreF32 || kEpilogue == kBf16GemmAddF32,
                "epilogue: kBf16GemmStoreBf16, kBf16GemmStoreF32 or kBf16GemmAddF32");
  static_assert(kBlockM == kWaves * kWaveRows && (kWaves == 1 || kWaves == 2),
                "BLOCK_M: 64 rows per math warpgroup, or two waves of them");
  static_assert(kBlockN % 16 == 0 && kBlockN >= 16 && kBlockN <= 256, "BLOCK_N: a multiple of 16 in 16..256");
  static_assert(kWaves * kAccumPerWave <= 128, "at most 128 accumulators a thread (beside 232 registers)");
  static_assert(kClusterM == 1 || (kClusterM == 2 && kBlockN % 16 == 0), "pairs sharing B: halves of 8-row atoms");
  static_assert(kMnMajor <= (kBf16GemmMnMajorA | kBf16GemmMnMajorB), "kMnMajor: kBf16GemmMnMajorA | kBf16GemmMnMajorB");
  static_assert(!kBMnMajor || kBlockN % (kMnBox * kClusterM) == 0,
                "an N-major B: BLOCK_N a multiple of 64 (of 128 in pairs, each CTA loading whole boxes)");
  static_assert(kGroupM >= 1 && (kGroupM & (kGroupM - 1)) == 0, "a group holds a power of two of m units");
  static_assert(kGrouping <= kBf16GemmKGrouped,
                "kGrouping: kBf16GemmDense, kBf16GemmMGrouped, kBf16GemmMasked or kBf16GemmKGrouped");
  static_assert(kGrouping == kBf16GemmDense || kGrouping == kBf16GemmKGrouped ||
                    (kWaves == 1 && kClusterM == 1 && kEpilogue == kBf16GemmStoreBf16 &&
                     (kMnMajor == 0 || (kGrouping == kBf16GemmMGrouped && kMnMajor == kBf16GemmMnMajorB))),
                "the m-grouped forms: 64- or 128-row tiles, no CTA pairs, a bf16 D, K-major operands (the contiguous "
                "form's B may be N-major)");
  static_assert(kStages >= 1 && kStages <= kBf16GemmMaxStages, "stages: 1..32");
  static_assert(kLayout.total_bytes <= kBf16GemmSmemPerBlock, "the stages do not fit in shared memory");
  static_assert(kN % 8 == 0 && kN > 0, "N must be a positive multiple of 8");
  static_assert((kK == kBf16GemmRunTimeK) == (kGrouping == kBf16GemmKGrouped),
                "K at run time (kBf16GemmRunTimeK) in the k-grouped form, which takes each group's own, and only there");
  static_assert(kK % 8 == 0, "K must be a positive multiple of 8 (TMA strides are 16-byte units)");
  static_assert(kGrouping != kBf16GemmKGrouped || (kClusterM == 1 && kEpilogue != kBf16GemmStoreBf16 &&
                                                   kMnMajor == (kBf16GemmMnMajorA | kBf16GemmMnMajorB)),
                "the k-grouped form: no CTA pairs, a float32 D, MN-major operands");
  static_assert(kProducerRegisters * 128 + kMathRegisters * 128 * kNumMathWarpgroups <= 65536,
                "register reallocation exceeds the register file");

  static constexpr bool kMasked = kGrouping == kBf16GemmMasked;
  static constexpr bool kKGrouped = kGrouping == kBf16GemmKGrouped;
  // D's map is 3-D with the group as its plane (the masked and k-grouped forms).
  static constexpr bool kDPlanes = kMasked || kKGrouped;
  // The k-grouped form's table of groups (nullptr in the other forms).
  using Groups = Bf16GemmKGroupedParams;

  // The walk over tiles: the dense one (GemmTileWalk, also the contiguous m-grouped form's, over all of A's rows), or
  // the masked form's over each group's valid m blocks. Built by every thread of a role (the masked one counts the
  // groups' blocks with whole warps).
  static __device__ __forceinline__ auto make_walk(const Bf16GemmParams& p) {
    if constexpr (kMasked)
      return GemmMaskedTileWalk<kBlockM, gemm_log2(kGroupM)>(p, kNumNBlocks);
    else if constexpr (kKGrouped)
      return GemmKGroupedTileWalk<gemm_log2(kGroupM)>(p.m, kBlockM, kNumNBlocks, p.num_groups);
    else
      return GemmTileWalk<kClusterM, gemm_log2(kGroupM)>(p.m, kBlockM, kNumNBlocks);
  }
  using Walk = decltype(make_walk(*static_cast<const Bf16GemmParams*>(nullptr)));

  // The contiguous m-grouped form: each walker's units come through a GemmPaddingSkip (blocks of padding only passed
  // over; gemm_schedule.cuh's gemm_padding_skip, gemm_first_unit and gemm_next_unit), the other forms' through the
  // same calls take every unit of the walk. The producer reads ahead as it moves; the math warps move on with
  // gemm_next_unit<.., false> and read ahead once a tile's first block is issued. `skip.entry` is then the unit's
  // grouped_layout entry; entry_of(p, walk)(unit) reads a unit's.
  static constexpr bool kContiguous = kGrouping == kBf16GemmMGrouped;
  static __device__ __forceinline__ auto entry_of(const Bf16GemmParams& p, const Walk& walk) {
    return [&p, &walk](u32 unit) {
      u32 m_block, n_block;
      walk.coords(unit, m_block, n_block);
      return gemm_m_group_entry(p.grouped_layout, m_block * kBlockM);
    };
  }

  // The tile's maps of A and B and its K blocks: the kernel's, or in the k-grouped form those of the tile's group
  // (walk.group, after walk.coords()).
  struct TileOperands {
    const void* tma_a;
    const void* tma_b;
    u32 num_k_blocks;
  };
  static __device__ __forceinline__ TileOperands tile_operands(const Bf16GemmParams& p, const Groups* groups,
                                                               const Walk& walk, bool last_m_block) {
    if constexpr (kKGrouped)
      return {&groups->tma_a[walk.group], &groups->tma_b[walk.group], groups->k_blocks[walk.group]};
    else
      return {last_m_block ? &p.tma_a_last : &p.tma_a, &p.tma_b, kNumKBlocks};
  }

  static __device__ __forceinline__ void run(const Bf16GemmParams& p) {
    static_assert(!kKGrouped, "the k-grouped kernel takes Bf16GemmKGroupedParams");
    run_with(p, nullptr);
  }
  static __device__ __forceinline__ void run(const Bf16GemmKGroupedParams& groups) {
    static_assert(kKGrouped, "only the k-grouped kernel takes Bf16GemmKGroupedParams");
    run_with(groups.base, &groups);
  }

  static __device__ __forceinline__ void run_with(const Bf16GemmParams& p, const Groups* groups) {
    extern __shared__ __align__(1024) u8 smem[];
    u64* full = reinterpret_cast<u64*>(smem + kLayout.full_barrier_offset);
    u64* empty = reinterpret_cast<u64*>(smem + kLayout.empty_barrier_offset);
    const u32 warpgroup = threadIdx.x / 128;

    if (threadIdx.x == kNumMathWarpgroups * 128) {
      if constexpr (!kKGrouped) {  // the k-grouped form's are each group's
        ptx::tma_prefetch_descriptor(&p.tma_a);
        if (p.last_box_rows != kBlockM) ptx::tma_prefetch_descriptor(&p.tma_a_last);
        ptx::tma_prefetch_descriptor(&p.tma_b);
      }
      ptx::tma_prefetch_descriptor(&p.tma_d);
#pragma unroll
      for (u32 s = 0; s < kStages; ++s) {
        ptx::mbarrier_init(&full[s], 1);
        ptx::mbarrier_init(&empty[s], kEmptyArrivals);
      }
      ptx::fence_mbarrier_init();
    }
    // The peer CTA's multicasts and remote arrivals target these barriers: initialised cluster-wide first.
    if constexpr (kClusterM > 1)
      ptx::cluster_sync();
    else
      __syncthreads();

    // Programmatic dependent launch (no-ops without it): nothing the previous kernel writes is read before it has
    // completed; the next kernel may start launching now (it waits for our completion itself).
    ptx::grid_dependency_wait();
    ptx::launch_dependents();

    // One if/else over whole warpgroups, for setmaxnreg; each role builds its walk after it, so nothing stays live
    // across the register reallocation.
    if (warpgroup == kNumMathWarpgroups) {
      ptx::setmaxnreg_dec<kProducerRegisters>();
      const Walk walk = make_walk(p);
      // Its other warps, and this one once its loads are issued, exit: the loads complete on the full barriers
      // the math warps wait for, and the math warps keep the CTA alive until the peer is done with it.
      if (threadIdx.x / 32 == kProducerWarp) {
        GemmPaddingSkip skip = gemm_padding_skip<kContiguous>(walk, entry_of(p, walk));  // the whole warp counts
        if (ptx::elect_one_sync()) produce(p, groups, smem, full, empty, walk, skip);
      }
      return;
    } else {
      ptx::setmaxnreg_inc<kMathRegisters>();
      const Walk walk = make_walk(p);
      // Through a shuffle, so that the compiler knows it is warp-uniform: the operand descriptors built from it
      // stay in uniform registers.
      consume(p, groups, smem, full, empty, walk, __shfl_sync(0xffffffffu, warpgroup, 0));
    }
    // No CTA may exit while its peer can still multicast into its shared memory or arrive on its barriers.
    if constexpr (kClusterM > 1) ptx::cluster_sync();
  }

  static __device__ __forceinline__ void produce(const Bf16GemmParams& p, const Groups* groups, u8* smem, u64* full,
                                                 u64* empty, const Walk& walk, GemmPaddingSkip& skip) {
    const u64 b_policy = p.b_cache_policy;
    // The last m block's box of A may be shorter than BLOCK_M (bf16_gemm_last_box_rows): fewer bytes per stage,
    // through its own map.
    const u32 last_m_block = !kAMnMajor && p.last_box_rows != kBlockM ? (p.m - 1) / kBlockM : ~0u;
    const u32 last_stage_tx_bytes = kLayout.stage_tx_bytes - (kBlockM - p.last_box_rows) * kRowBytes;
    GemmSlot slot;
    for (u32 unit = gemm_first_unit<kContiguous>(walk, skip, entry_of(p, walk)); unit < walk.num_units;
         unit = gemm_next_unit<kContiguous>(walk, skip, unit, entry_of(p, walk))) {
      u32 m_block, n_block;
      walk.coords(unit, m_block, n_block);
      const bool last = m_block == last_m_block;
      const TileOperands operands = tile_operands(p, groups, walk, last);
      const u32 stage_tx_bytes = last ? last_stage_tx_bytes : kLayout.stage_tx_bytes;
      // The m-grouped forms: this tile's group's rows of B (its map spans every group's), and the masked form's of A.
      i32 a_row0 = 0, b_row0 = 0;
      [[maybe_unused]] i32 b_plane = 0;
      if constexpr (kMasked) {
        a_row0 = static_cast<i32>(walk.group * p.m);
        b_row0 = static_cast<i32>(walk.group * kN);
      } else if constexpr (kContiguous) {
        // An N-major B's map is 3-D with the group as its plane: a 2-D one over every group's [K, N] would let a
        // box at a K tail read the next group's rows.
        const i32 group = static_cast<i32>(gemm_m_group_of_entry(skip.entry, p.num_groups).group);
        if constexpr (kBMnMajor)
          b_plane = group;
        else
          b_row0 = group * static_cast<i32>(kN);
      }
      const i32 m0 = a_row0 + static_cast<i32>(m_block * kBlockM);
      const i32 n0 = b_row0 + static_cast<i32>(n_block * kBlockN);
      // Not unrolled: one thread issues, and an unrolled copy per K block overflows the producer's registers.
#pragma unroll 1
      for (u32 kb = 0; kb < operands.num_k_blocks; ++kb, slot.advance(kStages)) {
        const u32 stage = slot.stage;
        // Until every math warp (of both CTAs of a pair) has released the slot; passes at once on the first round.
        ptx::mbarrier_wait_parity_sleep(&empty[stage], slot.phase ^ 1);
        // TMA counts the zero fill past M, N and K as delivered bytes.
        ptx::mbarrier_arrive_expect_tx(&full[stage], stage_tx_bytes);
        const i32 k0 = static_cast<i32>(kb * kBlockK);
        u8* const a_tile = smem + kLayout.a_offset + stage * kLayout.a_stage_bytes;
        u8* const b_tile = smem + kLayout.b_offset + stage * kLayout.b_stage_bytes;
        if constexpr (kAMnMajor) {
#pragma unroll
          for (u32 i = 0; i < kBlockM / kMnBox; ++i)
            ptx::tma_load_2d_hint(a_tile + i * kMnBoxBytes, operands.tma_a, &full[stage],
                                  m0 + static_cast<i32>(i * kMnBox), k0, ptx::kL2EvictNormal);
        } else {
          ptx::tma_load_2d_hint(a_tile, operands.tma_a, &full[stage], k0, m0, ptx::kL2EvictNormal);
        }
        if constexpr (kBMnMajor && kContiguous) {
#pragma unroll
          for (u32 box = 0; box < kBlockN / kMnBox; ++box)
            ptx::tma_load_3d_hint(b_tile + box * kMnBoxBytes, &p.tma_b, &full[stage],
                                  n0 + static_cast<i32>(box * kMnBox), k0, b_plane, b_policy);
        } else if constexpr (kBMnMajor && kClusterM == 1) {
#pragma unroll
          for (u32 box = 0; box < kBlockN / kMnBox; ++box)
            ptx::tma_load_2d_hint(b_tile + box * kMnBoxBytes, operands.tma_b, &full[stage],
                                  n0 + static_cast<i32>(box * kMnBox), k0, b_policy);
        } else if constexpr (kBMnMajor) {
          // This CTA's half of the tile's 64-column boxes, into the same place in both CTAs.
          constexpr u32 kBoxes = kBlockN / kMnBox / kClusterM;
#pragma unroll
          for (u32 i = 0; i < kBoxes; ++i) {
            const u32 box = walk.rank * kBoxes + i;
            ptx::tma_load_2d_multicast(b_tile + box * kMnBoxBytes, operands.tma_b, &full[stage],
                                       n0 + static_cast<i32>(box * kMnBox), k0, u16{0b11});
          }
        } else if constexpr (kClusterM == 1) {
          ptx::tma_load_2d_hint(b_tile, &p.tma_b, &full[stage], k0, n0, b_policy);
        } else {
          // This CTA's half of the pair's B tile, into the same place in both CTAs.
          constexpr u32 kHalf = kBlockN / 2;
          ptx::tma_load_2d_multicast(b_tile + walk.rank * kHalf * kRowBytes, &p.tma_b, &full[stage], k0,
                                     n0 + static_cast<i32>(walk.rank * kHalf), u16{0b11});
        }
      }
    }
  }

  static __device__ __forceinline__ void release(u64* empty, u32 stage, u32 lane) {
    if constexpr (kClusterM == 1) {
      if (lane == 0) ptx::mbarrier_arrive(&empty[stage]);
    } else {
      // Lane r arrives on CTA r's barrier: one instruction for the pair.
      if (lane < kClusterM) ptx::mbarrier_arrive_cluster(&empty[stage], lane);
    }
  }

  static __device__ __forceinline__ void consume(const Bf16GemmParams& p, const Groups* groups, u8* smem, u64* full,
                                                 u64* empty, const Walk& walk, u32 warpgroup) {
    const u32 lane = threadIdx.x % 32;
    const u32 warp_in_group = (threadIdx.x / 32) % 4;
    const u32 window = static_cast<u32>(__cvta_generic_to_shared(smem));
    // Operand descriptors of stage 0 (in 16-byte units; a stage adds its stride): this warpgroup's 64 rows of A,
    // the whole B tile. 128-byte swizzle, 1024-byte 8-row atoms.
    // An MN-major operand: 8-row K groups 1024 bytes apart (the stride byte offset), boxes of 64 M or N kMnBoxBytes
    // apart (the leading byte offset, which a K-major swizzled operand does not use).
    // The start addresses masked to the descriptor's field (ptx::smem_desc_start_units): in a pair the second CTA's
    // window carries bits above it, which would land in the leading byte offset that an MN-major operand reads.
    const u64 desc_a0 =
        ptx::make_smem_desc_units(ptx::smem_desc_start_units(window + kLayout.a_offset + warpgroup * 64 * kRowBytes),
                                  ptx::SmemSwizzle::k128B, kAMnMajor ? kMnBoxBytes : 0, 1024);
    const u64 desc_b0 = ptx::make_smem_desc_units(ptx::smem_desc_start_units(window + kLayout.b_offset),
                                                  ptx::SmemSwizzle::k128B, kBMnMajor ? kMnBoxBytes : 0, 1024);
    float accum[kWaves][kAccumPerWave];
    GemmSlot slot;
    GemmPaddingSkip skip = gemm_padding_skip<kContiguous>(walk, entry_of(p, walk));
    for (u32 unit = gemm_first_unit<kContiguous>(walk, skip, entry_of(p, walk)); unit < walk.num_units;
         unit = gemm_next_unit<kContiguous, false>(walk, skip, unit, entry_of(p, walk))) {
      u32 m_block, n_block;
      walk.coords(unit, m_block, n_block);
      const u32 num_k_blocks = tile_operands(p, groups, walk, false).num_k_blocks;
      u32 previous_stage = 0;
#pragma unroll 1
      for (u32 kb = 0; kb < num_k_blocks; ++kb, slot.advance(kStages)) {
        const u32 stage = slot.stage;
        ptx::mbarrier_wait_parity(&full[stage], slot.phase);
        const u64 desc_a = ptx::smem_desc_advance(desc_a0, stage * (kLayout.a_stage_bytes >> 4));
        const u64 desc_b = ptx::smem_desc_advance(desc_b0, stage * (kLayout.b_stage_bytes >> 4));
#pragma unroll
        for (u32 v = 0; v < kWaves; ++v) ptx::fence_operands(accum[v]);
        ptx::wgmma_fence();
#pragma unroll
        for (u32 v = 0; v < kWaves; ++v) {
#pragma unroll
          for (u32 k = 0; k < kBlockK / kWgmmaK; ++k) {
            // The k-th 16 of K: k * 32 bytes along the 128-byte swizzled rows (K-major), or k * 16 rows further
            // (MN-major); wave v's rows kWaveRows further down A's tile. The first block of a tile overwrites the
            // accumulators (scale-d 0).
            ptx::WgmmaBF16<kBlockN>::template mma<kAMnMajor, kBMnMajor>(
                ptx::smem_desc_advance(desc_a, v * (kWaveRows * kRowBytes >> 4) + kAStepUnits * k),
                ptx::smem_desc_advance(desc_b, kBStepUnits * k), accum[v], kb > 0 || k > 0 ? 1u : 0u);
          }
        }
        ptx::wgmma_commit_group();
#pragma unroll
        for (u32 v = 0; v < kWaves; ++v) ptx::fence_operands(accum[v]);
        // The contiguous form reads the next unit's entry while the tile's first block runs (off the tile change; on
        // the first tile it repeats begin()'s read).
        if constexpr (kContiguous)
          if (kb == 0) skip.read_ahead(unit, entry_of(p, walk));
        // The previous block's WGMMAs are done once at most this block's group is pending: its slot is free.
        ptx::wgmma_wait_group<1>();
        if (kb > 0) release(empty, previous_stage, lane);
        previous_stage = stage;
      }
      ptx::wgmma_wait_group<0>();
#pragma unroll
      for (u32 v = 0; v < kWaves; ++v) ptx::fence_operands(accum[v]);
      release(empty, previous_stage, lane);
      // The contiguous m-grouped form: a block whose first row names no group was summed with group 0's B; it comes
      // out NaN rather than as plausible numbers (gemm_m_group_of_entry).
      if constexpr (kContiguous) {
        if (!gemm_m_group_of_entry(skip.entry, p.num_groups).valid) {
#pragma unroll
          for (u32 v = 0; v < kWaves; ++v)
#pragma unroll
            for (u32 i = 0; i < kAccumPerWave; ++i) accum[v][i] = __int_as_float(0x7fc00000);
        }
      }
      // The masked and k-grouped forms store into their group's plane of D.
      u32 plane = 0;
      if constexpr (kMasked) plane = walk.group;
      if constexpr (kKGrouped) plane = groups->d_group[walk.group];
      store_tile(p, smem, accum, warpgroup, warp_in_group, lane, m_block, n_block, plane);
    }
    // The last tile's stores must have read the staging tile before the CTA (and its shared memory) goes.
    if (warp_in_group == 0 && lane == 0) ptx::tma_store_wait_read<0>();
  }

  // Two adjacent fp32 (one 8-byte shared-memory write).
  struct alignas(8) F32x2 {
    float x, y;
  };

  // Byte offset in the staging tile of byte `byte` of 16-byte unit `unit` (counted along the pass's columns) of row
  // `row`: column groups of kStoreCols one after the other (kStoreGroupBytes each, one TMA box per 64 rows), rows of
  // kStoreRowBytes inside, the units of each row swizzled as the D map's swizzle of kStoreRowBytes expects (unit
  // index XOR the row's place in its 128-byte line group: bits 4.. XOR bits 7..).
  static __device__ __forceinline__ u32 staging_offset(u32 row, u32 unit, u32 byte) {
    const u32 linear = (unit / kUnitsPerRow) * kStoreGroupBytes + row * kStoreRowBytes + (unit % kUnitsPerRow) * 16;
    return (linear ^ (((linear >> 7) & (kUnitsPerRow - 1)) << 4)) + byte;
  }

  static __device__ __forceinline__ void store_tile(const Bf16GemmParams& p, u8* smem,
                                                    const float (&accum)[kWaves][kAccumPerWave], u32 warpgroup,
                                                    u32 warp_in_group, u32 lane, u32 m_block, u32 n_block,
                                                    u32 plane) {
    const bool issuer = warp_in_group == 0 && lane == 0;
    // stmatrix x4 writes column chunks j, j + 1 (8 columns each), top and bottom 8 rows of this warp's 16: lane l
    // addresses row l % 8 of matrix l / 8 = (chunk j + (l / 8) / 2, half (l / 8) % 2).
    const u32 matrix = lane / 8;
#pragma unroll
    for (u32 pass = 0; pass < kPasses; ++pass) {
      // The stores before (the previous pass's, or the previous tile's, whose wait is deferred to here so that it
      // overlaps this tile's main loop) must have finished reading the staging rows before they are overwritten.
      if (issuer) ptx::tma_store_wait_read<0>();
      ptx::named_barrier_sync(1 + warpgroup, 128);
#pragma unroll
      for (u32 v = 0; v < kWaves; ++v) {
        if constexpr (kOutBytes == 2) {
          const u32 row = v * kWaveRows + warpgroup * 64 + warp_in_group * 16 + (matrix & 1) * 8 + lane % 8;
#pragma unroll
          for (u32 j = pass * kStagingCols / 8; j < (pass + 1) * kStagingCols / 8; j += 2) {
            const u32 chunk = j - pass * kStagingCols / 8 + (matrix >> 1);  // within this pass's columns
            ptx::stmatrix_x4(smem + kLayout.d_offset + staging_offset(row, chunk, 0),
                             ptx::f32x2_to_bf16x2(accum[v][4 * j + 0], accum[v][4 * j + 1]),
                             ptx::f32x2_to_bf16x2(accum[v][4 * j + 2], accum[v][4 * j + 3]),
                             ptx::f32x2_to_bf16x2(accum[v][4 * j + 4], accum[v][4 * j + 5]),
                             ptx::f32x2_to_bf16x2(accum[v][4 * j + 6], accum[v][4 * j + 7]));
          }
        } else {
          // fp32 as the accumulators hold them: chunk j's columns 2 (lane % 4) and + 1 of rows lane / 4 and + 8 of
          // this warp's 16, one 8-byte write each (a 16-byte unit holds 4 columns: half of one).
          const u32 row = v * kWaveRows + warpgroup * 64 + warp_in_group * 16 + lane / 4;
#pragma unroll
          for (u32 j = pass * kStagingCols / 8; j < (pass + 1) * kStagingCols / 8; ++j) {
            const u32 col = (j - pass * kStagingCols / 8) * 8 + 2 * (lane % 4);  // within this pass's columns
            const u32 half = (col % 4) * 4;
#pragma unroll
            for (u32 h = 0; h < 2; ++h) {
              F32x2* dst = reinterpret_cast<F32x2*>(smem + kLayout.d_offset +
                                                    staging_offset(row + 8 * h, col / 4, half));
              *dst = F32x2{accum[v][4 * j + 2 * h], accum[v][4 * j + 2 * h + 1]};
            }
          }
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
          for (u32 g = 0; g < kStagingCols / kStoreCols; ++g) {
            const u8* const src = smem + kLayout.d_offset + g * kStoreGroupBytes + first_row * kStoreRowBytes;
            const i32 col = static_cast<i32>(n_block * kBlockN + pass * kStagingCols + g * kStoreCols);
            const i32 row = static_cast<i32>(m_block * kBlockM + first_row);
            if constexpr (kEpilogue == kBf16GemmAddF32 && kDPlanes)
              ptx::tma_reduce_add_3d(&p.tma_d, src, col, row, static_cast<i32>(plane));
            else if constexpr (kEpilogue == kBf16GemmAddF32)
              ptx::tma_reduce_add_2d(&p.tma_d, src, col, row);
            else if constexpr (kDPlanes)
              ptx::tma_store_3d(&p.tma_d, src, col, row, static_cast<i32>(plane));
            else
              ptx::tma_store_2d(&p.tma_d, src, col, row);
          }
        }
        ptx::tma_store_commit();
      }
    }
  }
};

}  // namespace kiln::kernels
