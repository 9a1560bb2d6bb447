// The walk over output tiles that the persistent GEMM kernels share: the tile order (groups of m units, m fastest
// inside a group), the contiguous m-grouped form's skipping of padding, the masked form's cursor over its groups, the
// k-grouped form's groups of tiles, and the ring of pipeline slots.
#pragma once

#include "kiln/ptx/cluster.cuh"
#include "kiln/ptx/types.cuh"

namespace kiln::kernels {

// log2 of a power of two (a group height).
constexpr u32 gemm_log2(u32 x) { return x <= 1 ? 0 : 1 + gemm_log2(x / 2); }

// Unit index -> (m unit, n unit) on the grid of num_m_units x num_n_units. Groups of 2^height_shift m units; inside
// a group m varies fastest, so consecutive CTAs share B panels and a wave touches about that many A panels. The group
// is a shift and a division by num_n_units (a constant in the kernels), as cheap with a run-time height as with a
// compile-time one.
__device__ __forceinline__ void gemm_unit_coords(u32 unit, u32 num_m_units, u32 num_n_units, u32 height_shift,
                                                 u32& m_unit, u32& n_unit) {
  const u32 height = 1u << height_shift;
  const u32 group = (unit >> height_shift) / num_n_units;  // = unit / (height * num_n_units)
  const u32 first_m = group * height;
  const u32 group_m = num_m_units - first_m < height ? num_m_units - first_m : height;
  const u32 in_group = unit - group * (height * num_n_units);
  m_unit = first_m + in_group % group_m;
  n_unit = in_group / group_m;
}

// A position in a ring of pipeline slots; the parity flips each time the ring wraps.
struct GemmSlot {
  u32 stage = 0, phase = 0;
  __device__ __forceinline__ void advance(u32 ring) {
    if (++stage == ring) {
      stage = 0;
      phase ^= 1;
    }
  }
};

// A dense GEMM's walk, shared by a CTA's producer and math warps (they must agree exactly) and by the CTAs of a
// cluster (they must run the same number of tiles). Work units are kClusterM vertically adjacent tiles; unit u goes
// to cluster u mod (clusters), whose CTA `rank` takes m block kClusterM * (unit's m) + rank. With an odd number of m
// blocks the last units' second tile lies beyond M: computed on TMA's zero fill and never stored (the stores clip).
template <u32 kClusterM, u32 kGroupShift>
struct GemmTileWalk {
  u32 num_m_units, num_n_units, num_units, first, stride, rank;
  __device__ __forceinline__ GemmTileWalk(u32 m, u32 block_m, u32 num_n_blocks) {
    const u32 num_m_blocks = (m + block_m - 1) / block_m;
    num_m_units = (num_m_blocks + kClusterM - 1) / kClusterM;
    num_n_units = num_n_blocks;
    num_units = num_m_units * num_n_units;
    rank = kClusterM == 1 ? 0 : ptx::cluster_cta_rank();  // clusters (kClusterM, 1, 1): consecutive blocks
    first = blockIdx.x / kClusterM;
    stride = gridDim.x / kClusterM;
  }
  __device__ __forceinline__ void coords(u32 unit, u32& m_block, u32& n_block) const {
    u32 m_unit;
    gemm_unit_coords(unit, num_m_units, num_n_units, kGroupShift, m_unit, n_block);
    m_block = m_unit * kClusterM + rank;
  }
};

// The m-grouped contiguous form (MoE experts' rows one group after another in A, grouped_layout naming each row's
// group): an m block takes the group of its first row, its entry (gemm_m_group_entry). Padding rows name -1; a block
// that starts with one is all padding (the host aligns groups to m blocks) and is skipped by every walker of the CTA
// (GemmPaddingSkip): nothing computed, its rows of D not written. Any other value outside [0, num_groups) is a
// caller's error the host cannot see without reading device memory: the block reads group 0's B, and the kernel makes
// its rows NaN, never a plausible number and never a read outside B.
__device__ __forceinline__ i32 gemm_m_group_entry(const i32* grouped_layout, u32 first_row) {
  return __ldg(grouped_layout + first_row);
}
constexpr i32 kGemmPaddingEntry = -1;
struct GemmMGroup {
  u32 group;   // clamped into [0, num_groups)
  bool valid;  // the entry named a group
};
__device__ __forceinline__ GemmMGroup gemm_m_group_of_entry(i32 entry, u32 num_groups) {
  const bool in_range = entry >= 0 && static_cast<u32>(entry) < num_groups;
  return {in_range ? static_cast<u32>(entry) : 0u, in_range};
}

// One walker's cursor over its units (first, first + stride, ...) of the contiguous m-grouped form, passing over the
// units whose m block is padding only. Every walker of a CTA (the producer, a scale loader, the math warps) walks with
// one and skips the same units, so their pipeline slots stay in step. Built by a whole warp, which counts the units
// to walk (32 reads in flight at a time), so that a walker stops after its last one instead of reading its way
// through the padding after it (a serving engine's buffer ends in blocks of padding: read one by one, they kept the
// math warps waiting after their last tile). `entry` is the current unit's entry of grouped_layout; `ahead` the next
// unit's, read while the current one runs, so that its latency passes under the tile's main loop (read at the tile
// change instead, the FP8 kernel's math warps waited on it there: 2-5 % slower at shapes with no padding,
// bench/RESULTS.md). next() moves on and reads ahead at once; the math warps split it into advance(), at the tile
// change, and read_ahead(), once the next tile's first block is issued: the read's address (the next unit's
// coordinates, two run-time divisions) cost 2 % at 8 x 34048 x 4096 x 2048 where it delayed that issue (H100,
// bench/RESULTS.md, fifty-third session). Padding between a walker's units is read as it is reached: those waits are
// paid only where blocks are skipped. `entry_of(unit)`: the entry of the unit's m block.
struct GemmPaddingSkip {
  u32 num_units, stride;
  u32 left = 0;  // units still to walk, the current one included
  i32 entry = 0, ahead = 0;

  template <class EntryOf>
  __device__ __forceinline__ GemmPaddingSkip(u32 first, u32 num_units_, u32 stride_, const EntryOf& entry_of)
      : num_units(num_units_), stride(stride_) {
    u32 units = 0;
    for (u32 unit = first + (threadIdx.x % 32) * stride; unit < num_units; unit += 32 * stride)
      units += entry_of(unit) != kGemmPaddingEntry;
    left = __reduce_add_sync(0xffffffffu, units);
  }
  GemmPaddingSkip() = default;

  // The first unit to walk from `first` on (num_units when there is none), its next one read ahead.
  template <class EntryOf>
  __device__ __forceinline__ u32 begin(u32 first, const EntryOf& entry_of) {
    if (left == 0) return num_units;
    entry = entry_of(first);
    const u32 unit = settle(first, entry_of);
    read_ahead(unit, entry_of);
    return unit;
  }
  // The unit to walk after `unit` (begin()'s, next()'s or advance()'s last answer), or num_units after the last; its
  // next one read ahead.
  template <class EntryOf>
  __device__ __forceinline__ u32 next(u32 unit, const EntryOf& entry_of) {
    unit = advance(unit, entry_of);
    if (left > 0) read_ahead(unit, entry_of);
    return unit;
  }
  // next() without the read ahead: read_ahead(the answer) must follow before the next advance().
  template <class EntryOf>
  __device__ __forceinline__ u32 advance(u32 unit, const EntryOf& entry_of) {
    if (--left == 0) return num_units;
    entry = ahead;
    return settle(unit + stride, entry_of);
  }
  // Reads the entry of the unit after `unit` (the current one) into `ahead`, where there is one to walk.
  template <class EntryOf>
  __device__ __forceinline__ void read_ahead(u32 unit, const EntryOf& entry_of) {
    ahead = left > 1 && unit + stride < num_units ? entry_of(unit + stride) : 0;
  }

 private:
  // From `unit`, whose entry is in `entry`, on to the first unit that is not padding only (there is one, as left > 0,
  // unless grouped_layout changed under the kernel: then never a read past the units).
  template <class EntryOf>
  __device__ __forceinline__ u32 settle(u32 unit, const EntryOf& entry_of) {
    while (entry == kGemmPaddingEntry && unit + stride < num_units) {
      unit += stride;
      entry = entry_of(unit);
    }
    return unit;
  }
};

// A walker's loop over its units, one shape for the BF16 kernel's walkers (the FP8 kernel keeps wrappers of its own;
// fp8_gemm.cuh says why): through a GemmPaddingSkip where the kernel skips blocks of padding only (kSkip: the
// contiguous m-grouped form), else every unit of the walk (`walk`: its first, num_units and stride).
// gemm_padding_skip() is built by a whole warp; gemm_next_unit<kSkip, false> moves on without reading ahead
// (GemmPaddingSkip::advance: the caller reads ahead itself).
template <bool kSkip, class Walk, class EntryOf>
__device__ __forceinline__ GemmPaddingSkip gemm_padding_skip(const Walk& walk, const EntryOf& entry_of) {
  if constexpr (kSkip)
    return GemmPaddingSkip(walk.first, walk.num_units, walk.stride, entry_of);
  else
    return {};
}
template <bool kSkip, class Walk, class EntryOf>
__device__ __forceinline__ u32 gemm_first_unit(const Walk& walk, GemmPaddingSkip& skip, const EntryOf& entry_of) {
  if constexpr (kSkip)
    return skip.begin(walk.first, entry_of);
  else
    return walk.first;
}
template <bool kSkip, bool kReadAhead = true, class Walk, class EntryOf>
__device__ __forceinline__ u32 gemm_next_unit(const Walk& walk, GemmPaddingSkip& skip, u32 unit,
                                              const EntryOf& entry_of) {
  if constexpr (!kSkip)
    return unit + walk.stride;
  else if constexpr (kReadAhead)
    return skip.next(unit, entry_of);
  else
    return skip.advance(unit, entry_of);
}

// The masked m-grouped form (MoE decode: G groups of m rows, group g's first masked_m[g] rows valid, the counts on the
// device): its work units are the valid m blocks' tiles, numbered group after group, each group's walked like a
// problem of its own. A cursor over the groups: every walker asks for its units in increasing order, so it only moves
// forward, one load of masked_m per group passed (the array is a few lines, in L1 after the count in start()).
template <u32 kBlockM>
struct GemmMaskedGroups {
  const i32* masked_m;
  u32 m, num_groups;
  mutable u32 group, group_first_unit, group_units, group_m_units;

  // Group g's m blocks: its masked_m[g] rows, clamped into [0, m] (a count the host cannot see, so a bad one costs
  // rows, never a read or a store outside the group), over BLOCK_M.
  static __device__ __forceinline__ u32 m_blocks(const i32* masked_m, u32 m, u32 g) {
    const i32 rows = __ldg(masked_m + g);
    const u32 clamped = rows <= 0 ? 0u : static_cast<u32>(rows) < m ? static_cast<u32>(rows) : m;
    return (clamped + kBlockM - 1) / kBlockM;
  }
  // Every group's m blocks, counted by the whole warp (a group per lane; every warp must call it), and the cursor on
  // group 0. `p`: the kernel's parameters, with m (each group's rows), grouped_layout (masked_m) and num_groups.
  template <class Params>
  __device__ __forceinline__ u32 start(const Params& p, u32 num_n_units) {
    const u32 lane = threadIdx.x % 32;
    u32 blocks = 0;
    for (u32 g = lane; g < p.num_groups; g += 32) blocks += m_blocks(p.grouped_layout, p.m, g);
    const u32 total = __reduce_add_sync(0xffffffffu, blocks);
    masked_m = p.grouped_layout;
    m = p.m;
    num_groups = p.num_groups;
    group = 0;
    group_first_unit = 0;
    group_m_units = m_blocks(p.grouped_layout, p.m, 0);
    group_units = group_m_units * num_n_units;
    return total;
  }
  // Moves the cursor on to the group of `unit` (groups without rows have no units and are passed over); returns the
  // unit's index within its group.
  __device__ __forceinline__ u32 seek(u32 unit, u32 num_n_units) const {
    while (unit - group_first_unit >= group_units && group + 1 < num_groups) {
      group_first_unit += group_units;
      ++group;
      group_m_units = m_blocks(masked_m, m, group);
      group_units = group_m_units * num_n_units;
    }
    return unit - group_first_unit;
  }
};

// The masked m-grouped walk of a kernel without CTA clusters (GemmTileWalk's interface; rank 0): unit u goes to CTA
// u mod (CTAs); coords() moves the cursor, and `group` is then the unit's group.
template <u32 kBlockM, u32 kGroupShift>
struct GemmMaskedTileWalk : GemmMaskedGroups<kBlockM> {
  static constexpr u32 rank = 0;
  u32 num_n_units, num_units, first, stride;
  template <class Params>
  __device__ __forceinline__ GemmMaskedTileWalk(const Params& p, u32 num_n_blocks) {
    num_n_units = num_n_blocks;
    num_units = this->start(p, num_n_blocks) * num_n_blocks;
    first = blockIdx.x;
    stride = gridDim.x;
  }
  __device__ __forceinline__ void coords(u32 unit, u32& m_block, u32& n_block) const {
    const u32 in_group = this->seek(unit, num_n_units);
    gemm_unit_coords(in_group, this->group_m_units, num_n_units, kGroupShift, m_block, n_block);
  }
};

// The k-grouped walk (the weight gradients of G groups in one launch, each group's M x N tiles a problem of its own,
// on a kernel without CTA clusters; GemmTileWalk's interface, rank 0): group g's units follow group g - 1's, and
// coords() leaves the unit's group in `group`.
template <u32 kGroupShift>
struct GemmKGroupedTileWalk {
  static constexpr u32 rank = 0;
  u32 num_m_units, num_n_units, units_per_group, num_units, first, stride;
  mutable u32 group = 0;
  __device__ __forceinline__ GemmKGroupedTileWalk(u32 m, u32 block_m, u32 num_n_blocks, u32 num_groups) {
    num_m_units = (m + block_m - 1) / block_m;
    num_n_units = num_n_blocks;
    units_per_group = num_m_units * num_n_units;
    num_units = units_per_group * num_groups;
    first = blockIdx.x;
    stride = gridDim.x;
  }
  __device__ __forceinline__ void coords(u32 unit, u32& m_block, u32& n_block) const {
    group = unit / units_per_group;
    gemm_unit_coords(unit - group * units_per_group, num_m_units, num_n_units, kGroupShift, m_block, n_block);
  }
};

}  // namespace kiln::kernels
