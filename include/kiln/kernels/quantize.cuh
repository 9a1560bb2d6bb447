// FP8 (e4m3) quantisation with DeepSeek-V3 fine-grained scaling, as DeepGEMM's FP8 GEMM consumes it:
//   scale = max(amax, 1e-4) / 448 over each group (1x128 per token, 128x128 per block), fp32;
//   q     = e4m3(x / scale), round to nearest even, saturating at +-448.
// Both kernels are memory-bound streams: 16-byte loads, a half-warp reading one group row (128 bf16 = 256
// contiguous bytes) per instruction, several loads in flight per thread, and persistent grid-stride loops so
// the host can size the grid to the SMs it may use.
#pragma once

#include "kiln/kernels/quantize_params.h"
#include "kiln/ptx/convert.cuh"
#include "kiln/ptx/memory.cuh"
#include "kiln/ptx/types.cuh"

namespace kiln::kernels {
namespace quantize_detail {

// Elements of one 16-byte bf16 vector.
constexpr int kVecElems = 8;
// Vectors (threads) per 128-element group row: a half-warp.
constexpr int kVecsPerGroupRow = kFp8GroupSize / kVecElems;

// The larger absolute value of the eight bf16 in `v`, as bf16 bits (sign cleared). Bit patterns of
// non-negative floats order like the floats, so an integer maximum suffices; NaN orders above infinity and
// so propagates into the scale, as torch's amax does.
__device__ __forceinline__ u32 abs_max_bf16_bits(const ptx::U32x4& v) {
  constexpr u32 kAbs = 0x7fff7fffu;
  const u32 m = ptx::max_u16x2(ptx::max_u16x2(v.x & kAbs, v.y & kAbs), ptx::max_u16x2(v.z & kAbs, v.w & kAbs));
  const u32 lo = m & 0xffffu, hi = m >> 16;
  return lo > hi ? lo : hi;
}

__device__ __forceinline__ u32 max_u32(u32 a, u32 b) { return a > b ? a : b; }

// The group's scale from its amax (bf16 bits): max(amax, 1e-4) / 448, correctly rounded. A NaN amax
// fails the comparison and stays NaN.
__device__ __forceinline__ float scale_from_amax_bits(u32 amax_bits) {
  const float amax = ptx::bits_to_f32(amax_bits << 16);
  return ptx::div_rn(amax < kFp8AmaxFloor ? kFp8AmaxFloor : amax, kFp8E4M3Max);
}

// x / scale correctly rounded, from inv = rcp_rn(scale), with one Newton step (Markstein): q = x * inv,
// t = q * scale - x (exact, one FMA), q1 = q - t * inv. Exact for every quotient of magnitude above about
// 2^-100 (the smaller ones all round to zero in e4m3 anyway); three fp32 operations instead of the dozen of
// an IEEE division. The residual is formed as q * scale - x and negated inside the last FMA (a free operand
// modifier) rather than as x - q * scale: for x = -0 the latter gives +0 + -0 = +0 and loses the sign
// (-0 / scale is -0, e4m3 0x80), while this keeps it. Checked on the host against IEEE division for every
// bf16 x with amax from 2^-140 to 2^127 and 2e8 random pairs: same bits when |x / scale| > 2^-20, same sign
// always.
__device__ __forceinline__ float div_by_scale(float x, float scale, float inv) {
  const float q = ptx::mul_rn(x, inv);
  const float t = ptx::fma_rn(q, scale, -x);
  return ptx::fma_rn(-t, inv, q);
}

// Eight bf16 (one vector) divided by `scale` and rounded to e4m3: eight bytes, element 0 lowest.
__device__ __forceinline__ void quantize_vec(const ptx::U32x4& v, float scale, float inv, u32& lo, u32& hi) {
  lo = ptx::f32x4_to_e4m3x4(
      div_by_scale(ptx::bf16x2_lo_to_f32(v.x), scale, inv), div_by_scale(ptx::bf16x2_hi_to_f32(v.x), scale, inv),
      div_by_scale(ptx::bf16x2_lo_to_f32(v.y), scale, inv), div_by_scale(ptx::bf16x2_hi_to_f32(v.y), scale, inv));
  hi = ptx::f32x4_to_e4m3x4(
      div_by_scale(ptx::bf16x2_lo_to_f32(v.z), scale, inv), div_by_scale(ptx::bf16x2_hi_to_f32(v.z), scale, inv),
      div_by_scale(ptx::bf16x2_lo_to_f32(v.w), scale, inv), div_by_scale(ptx::bf16x2_hi_to_f32(v.w), scale, inv));
}

}  // namespace quantize_detail

// Per token, per 128 channels. The tensor is walked as one flat sequence of 16-byte vectors (row-major over
// [m, kK/8]); each thread owns kVecsPerThread vectors per step, a grid-stride apart, and issues all their
// loads before the first use. kK is a multiple of 128, so a 16-lane half-warp always covers exactly one
// group of one row: the group's amax is a 4-step butterfly inside the half-warp, and its first lane writes
// the scale. All 32 lanes run every step (lanes past the end carry zeros) so the shuffles stay converged.
template <int kK, int kThreads, int kVecsPerThread>
struct PerTokenCast {
  static_assert(kK > 0 && kK % kFp8GroupSize == 0, "k must be a positive multiple of 128");
  static_assert(kThreads % 32 == 0 && kThreads <= 1024, "whole warps, at most 1024 threads");
  static_assert(kVecsPerThread >= 1 && kVecsPerThread <= 8, "1 to 8 vectors in flight per thread");
  static constexpr u64 kVecsPerRow = kK / quantize_detail::kVecElems;

  static __device__ void run(const PerTokenCastParams& p) {
    ptx::grid_dependency_wait();
    ptx::launch_dependents();
    const u64 total = p.m * kVecsPerRow;
    const u64 step = static_cast<u64>(gridDim.x) * kThreads * kVecsPerThread;
    // 32-bit index arithmetic whenever every index of the walk fits (any m below about 2^32 / (k / 8)):
    // the row of a vector is then a 32-bit multiply-high by a constant instead of a 64-bit division
    // sequence, which is most of this memory-bound loop's integer work. Uniform across the grid.
    if (total + step <= 0xffffffffull && p.x_row_stride <= 0xffffffffull)
      walk<u32>(p, total);
    else
      walk<u64>(p, total);
  }

 private:
  template <typename Index>
  static __device__ __forceinline__ void walk(const PerTokenCastParams& p, u64 total_vecs) {
    using namespace quantize_detail;
    constexpr Index kRowVecs = static_cast<Index>(kVecsPerRow);
    const u8* x = static_cast<const u8*>(p.x);
    u8* out = static_cast<u8*>(p.out);
    const u32 lane = threadIdx.x & 31u;
    const Index total = static_cast<Index>(total_vecs);
    const Index row_stride = static_cast<Index>(p.x_row_stride);
    const Index stride = static_cast<Index>(gridDim.x) * kThreads;
    const Index step = stride * kVecsPerThread;

    for (Index first = static_cast<Index>(blockIdx.x) * kThreads + (threadIdx.x & ~31u); first < total;
         first += step) {
      ptx::U32x4 v[kVecsPerThread];
      Index row[kVecsPerThread];
      Index vec[kVecsPerThread];
#pragma unroll
      for (int u = 0; u < kVecsPerThread; ++u) {
        const Index idx = first + static_cast<Index>(u) * stride + lane;
        row[u] = idx / kRowVecs;  // a constant divisor: a multiply-high
        vec[u] = idx - row[u] * kRowVecs;
        v[u] = {0u, 0u, 0u, 0u};
        if (idx < total)
          v[u] = ptx::ld_global_nc_v4(x + (static_cast<u64>(row[u]) * row_stride + vec[u] * kVecElems) * 2);
      }
#pragma unroll
      for (int u = 0; u < kVecsPerThread; ++u) {
        u32 amax = abs_max_bf16_bits(v[u]);
#pragma unroll
        for (int mask = kVecsPerGroupRow / 2; mask > 0; mask >>= 1) amax = max_u32(amax, ptx::shfl_xor(amax, mask));
        const float scale = scale_from_amax_bits(amax);
        const float inv = ptx::rcp_rn(scale);
        u32 lo, hi;
        quantize_vec(v[u], scale, inv, lo, hi);
        if (first + static_cast<Index>(u) * stride + lane < total) {
          ptx::st_global_v2(out + static_cast<u64>(row[u]) * kK + vec[u] * kVecElems, lo, hi);
          if ((lane % kVecsPerGroupRow) == 0)
            ptx::st_global_f32(
                p.out_scales + static_cast<u64>(vec[u] / kVecsPerGroupRow) * p.scales_stride + row[u], scale);
        }
      }
    }
  }
};

// Per 128x128 block. Each CTA takes blocks in a grid-stride loop (block b covers rows 128*(b / (k/128)) and
// columns 128*(b % (k/128)), so consecutive CTAs read neighbouring column blocks of the same rows). A
// half-warp reads a 256-byte row run of the block; kThreads/16 rows per pass, all 128/(kThreads/16) passes'
// loads in flight before the block's amax is reduced (half-warp butterfly, then across warps through
// shared memory, double-buffered so one barrier per block suffices). The block stays in registers and is
// written as e4m3; rows at or beyond n are neither read nor written and count as zeros.
template <int kThreads>
struct PerBlockCast {
  static_assert(kThreads % 32 == 0 && kThreads >= 32 && kThreads <= 1024 &&
                    kFp8GroupSize % (kThreads / quantize_detail::kVecsPerGroupRow) == 0,
                "whole warps whose half-warps tile the 128 rows");
  static constexpr int kRowsPerPass = kThreads / quantize_detail::kVecsPerGroupRow;
  static constexpr int kPasses = kFp8GroupSize / kRowsPerPass;
  static constexpr int kWarps = kThreads / 32;

  static __device__ void run(const PerBlockCastParams& p) {
    using namespace quantize_detail;
    __shared__ u32 warp_amax[2][kWarps];
    ptx::grid_dependency_wait();
    ptx::launch_dependents();

    const u8* x = static_cast<const u8*>(p.x);
    u8* out = static_cast<u8*>(p.out);
    const u32 lane = threadIdx.x & 31u;
    const u32 warp = threadIdx.x / 32;
    const u32 col_vec = threadIdx.x % kVecsPerGroupRow;
    const u32 row_in_pass = threadIdx.x / kVecsPerGroupRow;
    const u64 col_blocks = p.k / kFp8GroupSize;
    const u64 blocks = (p.n + kFp8GroupSize - 1) / kFp8GroupSize * col_blocks;

    // Per pass, a thread moves kRowsPerPass rows down: hoisted byte strides keep the 64-bit address
    // arithmetic (and the register pressure) to one add per pass.
    const u64 src_pass_bytes = kRowsPerPass * p.x_row_stride * 2;
    const u64 dst_pass_bytes = kRowsPerPass * p.k;

    u32 parity = 0;
    for (u64 b = blockIdx.x; b < blocks; b += gridDim.x, parity ^= 1u) {
      const u64 block_row = b / col_blocks;
      const u64 block_col = b - block_row * col_blocks;
      const u64 row0 = block_row * kFp8GroupSize + row_in_pass;
      const u64 col = block_col * kFp8GroupSize + col_vec * kVecElems;
      // Passes whose row exists: pass i is valid while i * kRowsPerPass < n - row0.
      const i64 rows_left = static_cast<i64>(p.n) - static_cast<i64>(row0);

      ptx::U32x4 v[kPasses];
      const u8* src = x + (row0 * p.x_row_stride + col) * 2;
#pragma unroll
      for (int i = 0; i < kPasses; ++i) {
        v[i] = {0u, 0u, 0u, 0u};
        if (i * kRowsPerPass < rows_left) v[i] = ptx::ld_global_nc_v4(src);
        src += src_pass_bytes;
      }
      u32 amax = 0;
#pragma unroll
      for (int i = 0; i < kPasses; ++i) amax = max_u32(amax, abs_max_bf16_bits(v[i]));
#pragma unroll
      for (int mask = 16; mask > 0; mask >>= 1) amax = max_u32(amax, ptx::shfl_xor(amax, mask));
      if (lane == 0) warp_amax[parity][warp] = amax;
      __syncthreads();
      // A warp can write the other buffer for the next block only after passing the next barrier, which
      // every warp reaches only after reading this one: one barrier per block.
      amax = warp_amax[parity][0];
#pragma unroll
      for (int w = 1; w < kWarps; ++w) amax = max_u32(amax, warp_amax[parity][w]);

      const float scale = scale_from_amax_bits(amax);
      const float inv = ptx::rcp_rn(scale);
      u8* dst = out + row0 * p.k + col;
#pragma unroll
      for (int i = 0; i < kPasses; ++i) {
        u32 lo, hi;
        quantize_vec(v[i], scale, inv, lo, hi);
        if (i * kRowsPerPass < rows_left) ptx::st_global_v2(dst, lo, hi);
        dst += dst_pass_bytes;
      }
      if (threadIdx.x == 0) ptx::st_global_f32(p.out_scales + b, scale);
    }
  }
};

// to_mn_major_scales: a transpose through shared memory in 32 x 32 tiles (rows of 33 floats, so that
// reading a tile's column touches 32 different banks), kThreads / 32 rows of threads, grid-stride over the
// tiles. Reads are 128-byte runs of in's rows, writes 128-byte runs of out's columns. Out-of-range elements of
// edge tiles are neither read nor written.
template <int kThreads>
struct MnMajorScales {
  static_assert(kThreads % 32 == 0 && kThreads >= 32 && kThreads <= 1024, "whole warps");
  static constexpr u32 kTile = 32;
  static constexpr u32 kRowsPerPass = kThreads / 32;

  static __device__ void run(const MnMajorScalesParams& p) {
    __shared__ float tile[kTile][kTile + 1];
    ptx::grid_dependency_wait();
    ptx::launch_dependents();
    const u32 lane = threadIdx.x % 32, row_in_pass = threadIdx.x / 32;
    const u64 tile_cols = (p.cols + kTile - 1) / kTile;
    const u64 tiles = (p.rows + kTile - 1) / kTile * tile_cols;
    for (u64 t = blockIdx.x; t < tiles; t += gridDim.x) {
      const u64 r0 = t / tile_cols * kTile, c0 = t % tile_cols * kTile;
      for (u32 i = row_in_pass; i < kTile; i += kRowsPerPass) {
        const u64 r = r0 + i, c = c0 + lane;
        if (r < p.rows && c < p.cols) tile[i][lane] = p.in[r * p.in_stride + c];
      }
      __syncthreads();
      for (u32 i = row_in_pass; i < kTile; i += kRowsPerPass) {
        const u64 c = c0 + i, r = r0 + lane;
        if (r < p.rows && c < p.cols) p.out[c * p.out_stride + r] = tile[lane][i];
      }
      __syncthreads();  // the tile is refilled for the next t
    }
  }
};

}  // namespace kiln::kernels
