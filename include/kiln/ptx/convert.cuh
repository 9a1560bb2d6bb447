// Number-format conversions for device code: bf16 <-> fp32, fp32 -> e4m3 (and back), and the correctly
// rounded fp32 divide / reciprocal the FP8 scaling uses. Inline PTX only, so JIT sources need no toolkit
// header (cuda_bf16.h and cuda_fp8.h cost NVRTC tens of milliseconds each).
#pragma once

#include "kiln/ptx/types.cuh"

namespace kiln::ptx {

// Reinterprets bits (mov.b32): the compiler folds these away.
__device__ __forceinline__ float bits_to_f32(u32 bits) {
  float f;
  asm("mov.b32 %0, %1;" : "=f"(f) : "r"(bits));
  return f;
}
__device__ __forceinline__ u32 f32_to_bits(float f) {
  u32 bits;
  asm("mov.b32 %0, %1;" : "=r"(bits) : "f"(f));
  return bits;
}

// The two bfloat16 values packed in a 32-bit word (element 0 in the low half, as in memory), widened to
// fp32. Exact: a bf16 is the upper half of an fp32.
__device__ __forceinline__ float bf16x2_lo_to_f32(u32 packed) { return bits_to_f32(packed << 16); }
__device__ __forceinline__ float bf16x2_hi_to_f32(u32 packed) { return bits_to_f32(packed & 0xffff0000u); }

// fp32 -> bf16, round to nearest even (cvt.rn.bf16.f32); the result in the low 16 bits.
__device__ __forceinline__ u16 f32_to_bf16(float x) {
  u16 r;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(x));
  return r;
}

// Two fp32 -> packed bf16x2 (cvt.rn.bf16x2.f32): `lo` lands in the low half (element 0 in memory).
__device__ __forceinline__ u32 f32x2_to_bf16x2(float lo, float hi) {
  u32 r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));  // PTX puts operand a in the upper half
  return r;
}

// Two fp32 -> packed float8 e4m3 (cvt.rn.satfinite.e4m3x2.f32; sm_89+): round to nearest even, finite
// values beyond +-448 saturate to +-448, NaN stays NaN. `lo` lands in the low byte (element 0 in memory).
__device__ __forceinline__ u16 f32x2_to_e4m3x2(float lo, float hi) {
  u16 r;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
  return r;
}

// Four fp32 -> four e4m3 in a 32-bit word, element 0 in the low byte.
__device__ __forceinline__ u32 f32x4_to_e4m3x4(float a, float b, float c, float d) {
  return static_cast<u32>(f32x2_to_e4m3x2(a, b)) | (static_cast<u32>(f32x2_to_e4m3x2(c, d)) << 16);
}

// Packed e4m3x2 (low byte = element 0) -> two fp32, exactly (through f16x2: cvt.rn.f16x2.e4m3x2, sm_89+).
__device__ __forceinline__ void e4m3x2_to_f32x2(u16 packed, float& lo, float& hi) {
  u32 halves;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(halves) : "h"(packed));
  asm("{\n .reg .b16 l, h;\n mov.b32 {l, h}, %2;\n cvt.f32.f16 %0, l;\n cvt.f32.f16 %1, h;\n}"
      : "=f"(lo), "=f"(hi)
      : "r"(halves));
}

// IEEE-754 fp32 division and reciprocal, correctly rounded (div.rn.f32, rcp.rn.f32) whatever the fast-math
// flags: the FP8 scales must match a host reference bit for bit.
__device__ __forceinline__ float div_rn(float a, float b) {
  float r;
  asm("div.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
__device__ __forceinline__ float rcp_rn(float a) {
  float r;
  asm("rcp.rn.f32 %0, %1;" : "=f"(r) : "f"(a));
  return r;
}

// fp32 multiply, round to nearest even, never fused into an FMA by the compiler (mul.rn.f32).
__device__ __forceinline__ float mul_rn(float a, float b) {
  float r;
  asm("mul.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}

// Fused multiply-add, one rounding (fma.rn.f32).
__device__ __forceinline__ float fma_rn(float a, float b, float c) {
  float r;
  asm("fma.rn.f32 %0, %1, %2, %3;" : "=f"(r) : "f"(a), "f"(b), "f"(c));
  return r;
}

// Lane-wise unsigned maximum of two 16-bit pairs (max.u16x2, sm_90). On the bit patterns of non-negative
// floats (bf16 with the sign cleared) this is the float maximum, with NaN ordered above infinity.
__device__ __forceinline__ u32 max_u16x2(u32 a, u32 b) {
  u32 r;
  asm("max.u16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
}

}  // namespace kiln::ptx
