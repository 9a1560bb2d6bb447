// Warpgroup matrix multiply-accumulate (sm_90a): shared-memory matrix descriptors, the fences and
// commit/wait of the asynchronous WGMMA pipeline, `wgmma.mma_async` for FP8 (e4m3 x e4m3 -> f32,
// m64nNk32) and BF16 (bf16 x bf16 -> f32, m64nNk16), both operands from shared memory, and `stmatrix`, which stores accumulator fragments. The wgmma
// instructions are `.sync.aligned`: all 128 threads of the warpgroup execute them together, with uniform
// operands (stmatrix is aligned per warp).
#pragma once

#include "kiln/ptx/types.cuh"

namespace kiln::ptx {

// Layout field of a matrix descriptor (bits 62-63).
enum class SmemSwizzle : u32 { kNone = 0, k128B = 1, k64B = 2, k32B = 3 };

// A WGMMA shared-memory matrix descriptor (the 64-bit operand of wgmma.mma_async):
//   bits  0-13 start address >> 4, bits 16-29 leading-dimension byte offset >> 4,
//   bits 32-45 stride-dimension byte offset >> 4, bits 49-51 base offset, bits 62-63 swizzle mode.
// For a K-major tile written by TMA with 128-byte swizzle, rows are 128 bytes and eight rows form a
// 1024-byte swizzle atom: stride offset 1024, leading offset unused (a k32 FP8 slice is 32 bytes, inside
// one swizzle row). The tile must start 1024-byte aligned so the base offset is 0. Moving along K by
// `bytes` (< 128) inside the atom is `desc + (bytes >> 4)`: the hardware applies the XOR swizzle to the
// final address, so the same advance works for every row.
// make_smem_desc_units takes the start address in 16-byte units, unmasked: the caller keeps it within the
// field's 14 bits. A CTA alone has shared-window addresses (__cvta_generic_to_shared) below 256 KB, which fit.
// In a CTA cluster they do not: a CTA of rank > 0 gets bits above 256 KB, which unmasked land in the leading
// byte offset. K-major 128-byte-swizzled operands do not read that field, so the FP8 kernel forms its
// descriptors per block from the unmasked window (masking per block cost its loops instructions:
// bench/RESULTS.md). An MN-major operand wider than one swizzle atom does read it: the BF16 GEMM's CTA pairs with an
// N-major B summed wrong in the second CTA's columns 64 and up until their start went through
// smem_desc_start_units (H100, 2026-12-07, bench/probes/n_major_pairs_probe.py).
__device__ __forceinline__ u32 smem_desc_start_units(u32 shared_address) { return (shared_address & 0x3FFFFu) >> 4; }

__device__ __forceinline__ u64 make_smem_desc_units(u32 start_units, SmemSwizzle swizzle, u32 leading_bytes,
                                                    u32 stride_bytes) {
  u64 desc = static_cast<u64>(start_units);
  desc |= static_cast<u64>((leading_bytes >> 4) & 0x3FFFu) << 16;
  desc |= static_cast<u64>((stride_bytes >> 4) & 0x3FFFu) << 32;
  desc |= static_cast<u64>(static_cast<u32>(swizzle)) << 62;
  return desc;
}

// `desc` moved `units` 16-byte units along K, as one 64-bit add. Written as PTX so that the front end cannot
// turn it into a 32-bit OR on the low word (it knows the tile is 1024-byte aligned): that form makes ptxas
// rebuild each descriptor pair in the same uniform registers, with the constant high word re-materialised,
// between WGMMAs that could otherwise issue back to back.
__device__ __forceinline__ u64 smem_desc_advance(u64 desc, u32 units) {
  u64 out;
  asm("add.s64 %0, %1, %2;" : "=l"(out) : "l"(desc), "l"(static_cast<u64>(units)));
  return out;
}

// wgmma.fence.sync.aligned: orders this warpgroup's earlier register accesses to the accumulators (and
// shared-memory writes to the operands) before the next wgmma.mma_async. Needed before the first WGMMA of a
// batch whenever the accumulator registers were touched by ordinary instructions.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }

// wgmma.commit_group.sync.aligned: closes the batch of WGMMAs issued since the last commit into one group.
__device__ __forceinline__ void wgmma_commit_group() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

// wgmma.wait_group.sync.aligned N: waits until at most N committed groups are still pending; their
// accumulators may be read, and their shared-memory operands reused, only after this.
template <int kPending>
__device__ __forceinline__ void wgmma_wait_group() {
  static_assert(kPending >= 0 && kPending <= 7, "wgmma.wait_group takes 0..7");
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}

// An empty asm that claims to read and write `r`: keeps the compiler from moving accesses of an
// accumulator register across the asynchronous WGMMA (whose reads and writes it cannot see).
__device__ __forceinline__ void fence_operand(float& r) { asm volatile("" : "+f"(r)::"memory"); }

template <u32 kCount>
__device__ __forceinline__ void fence_operands(float (&r)[kCount]) {
#pragma unroll
  for (u32 i = 0; i < kCount; ++i) fence_operand(r[i]);
}

// stmatrix.sync.aligned.m8n8.x4.shared.b16 [addr], {r0, r1, r2, r3}: stores four 8x8 matrices of 16-bit
// elements whose fragments are exactly the WGMMA accumulator's (register i of lane l holds row l / 4,
// columns 2 (l % 4) + {0, 1} of matrix i, packed). Lane l supplies the shared address of row l % 8 of matrix
// l / 8 (16 contiguous bytes), so a swizzled staging layout costs nothing extra. Used to stage a tile for a
// TMA store; fence_proxy_async_shared_cta before the store reads it.
__device__ __forceinline__ void stmatrix_x4(void* smem_row, u32 r0, u32 r1, u32 r2, u32 r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(
                   static_cast<u32>(__cvta_generic_to_shared(smem_row))),
               "r"(r0), "r"(r1), "r"(r2), "r"(r3)
               : "memory");
}

// wgmma.mma_async.sync.aligned.m64nNk32.f32.e4m3.e4m3 d, desc_a, desc_b, p, 1, 1:
// D[64 x N] (+)= A[64 x 32] * B[N x 32]^T with A and B K-major in shared memory. `accumulate` = 0 overwrites
// D (the scale-d predicate), so a fresh partial sum needs no zeroing. D's fragment, per thread t of the
// warpgroup (warp w = t / 32, lane l): d[4j + 0, 1] = row 16w + l/4, columns 8j + 2(l%4) + {0, 1};
// d[4j + 2, 3] = row 16w + l/4 + 8, same columns; j = 0 .. N/8 - 1.
// One specialisation per N (a multiple of 16 up to 256), in wgmma_e4m3_shapes.cuh, which
// scripts/gen_wgmma_shapes.py writes: inline PTX needs each operand numbered.
template <u32 kN>
struct WgmmaE4M3;

// wgmma.mma_async.sync.aligned.m64nNk16.f32.bf16.bf16 d, desc_a, desc_b, p, 1, 1, 0, 0: the same for bf16 inputs,
// both K-major (transpose immediates 0). K = 16 bf16 is 32 bytes, as K = 32 e4m3 is: one instruction reads the same
// bytes of a 128-byte swizzled row, so descriptors advance alike. Same fragment layout. The specialisations are in
// wgmma_bf16_shapes.cuh (generated likewise), which only the BF16 kernels include.
template <u32 kN>
struct WgmmaBF16;

}  // namespace kiln::ptx

// The specialisations, one per N (generated: inline PTX needs each operand numbered).
#include "kiln/ptx/wgmma_e4m3_shapes.cuh"
