// The walk over output tiles that the persistent GEMM kernels share: the tile order (groups of m units, m fastest
// inside a group) and the ring of pipeline slots.
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

}  // namespace kiln::kernels
