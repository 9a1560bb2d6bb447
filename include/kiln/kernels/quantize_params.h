// Parameter structs of the FP8 quantisation kernels, shared by the host launch code (plain C++) and the
// device templates in quantize.cuh. POD, fixed-width fields only, so both compilers lay them out alike.
#pragma once

#include "kiln/ptx/types.cuh"

namespace kiln {

// The DeepSeek-V3 scaling constants: scale = max(amax, kFp8AmaxFloor) / kFp8E4M3Max over each group.
constexpr float kFp8E4M3Max = 448.0f;
constexpr float kFp8AmaxFloor = 1e-4f;
// Elements along k (and, per block, along n) that share one scale.
constexpr int kFp8GroupSize = 128;

// per_token_cast_to_fp8: x bf16 [m, K] (row stride x_row_stride elements) -> out e4m3 [m, K] contiguous,
// out_scales fp32 with element (row, g) at out_scales[g * scales_stride + row] (MN-major, TMA-aligned).
// K is the kernel's compile-time template argument.
struct PerTokenCastParams {
  const void* x;          // bfloat16, 16-byte aligned
  void* out;              // float8_e4m3, 16-byte aligned
  float* out_scales;      // float32
  u64 m;                  // rows
  u64 x_row_stride;       // elements between rows of x; a multiple of 8
  u64 scales_stride;      // floats between scale columns: get_tma_aligned_size(m, 4)
};

// per_block_cast_to_fp8: x bf16 [n, k] (row stride x_row_stride) -> out e4m3 [n, k] contiguous,
// out_scales fp32 [ceil(n/128), k/128] row-major contiguous. Rows at or beyond n count as zeros.
struct PerBlockCastParams {
  const void* x;          // bfloat16, 16-byte aligned
  void* out;              // float8_e4m3, 16-byte aligned
  float* out_scales;      // float32
  u64 n;                  // rows
  u64 k;                  // columns, a multiple of 128
  u64 x_row_stride;       // elements between rows of x; a multiple of 8
};

// to_mn_major_scales: in fp32 [rows, cols] row-major (row stride in_stride floats) -> out fp32 with element
// (row, col) at out[col * out_stride + row] (MN-major; out_stride >= rows). Rows rows..out_stride - 1 of out
// (the TMA padding) are not written.
struct MnMajorScalesParams {
  const float* in;   // 4-byte aligned
  float* out;        // 16-byte aligned
  u64 rows;
  u64 cols;
  u64 in_stride;     // floats between rows of in, >= cols
  u64 out_stride;    // floats between columns of out, >= rows
};

}  // namespace kiln
