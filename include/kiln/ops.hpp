// The operations, with DeepGEMM's names and argument conventions. Outputs are passed in (kiln does not
// allocate device memory); helpers give their required shapes. `stream` is a CUstream / cudaStream_t
// (nullptr: the legacy default stream). Every precondition is checked before any launch.
#pragma once

#include <cstdint>
#include <utility>

#include "kiln/tensor.hpp"

namespace kiln {

using Stream = void*;

constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
constexpr int64_t align(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

// TMA needs 16-byte-aligned strides: the number of elements of `element_size` bytes a dimension of x is
// padded to (DeepGEMM's get_tma_aligned_size).
constexpr int64_t get_tma_aligned_size(int64_t x, int element_size) { return align(x, 16 / element_size); }

// ---- FP8 quantisation with DeepSeek-V3 fine-grained scaling ------------------------------------------------
// e4m3 values x / scale with scale = amax / 448 over each group (amax clamped below at 1e-4).

// Per token, per 128 channels. x: bfloat16 [m, k], row-major (row stride may exceed k), k % 128 == 0.
// out: float8_e4m3 [m, k] row-major contiguous. out_scales: float32 [m, k/128] in the MN-major,
// TMA-aligned layout the FP8 GEMM reads: strides (1, get_tma_aligned_size(m, 4)), i.e. storage of
// [k/128][aligned m] floats (per_token_scales_storage() elements).
void per_token_cast_to_fp8(const TensorView& x, const TensorView& out, const TensorView& out_scales,
                           Stream stream = nullptr);
int64_t per_token_scales_storage(int64_t m, int64_t k);  // floats needed behind out_scales

// Per 128x128 block. x: bfloat16 [n, k] row-major (row stride may exceed k), k % 128 == 0, any n.
// out: float8_e4m3 [n, k] row-major contiguous. out_scales: float32 [ceil(n/128), k/128] row-major contiguous.
void per_block_cast_to_fp8(const TensorView& x, const TensorView& out, const TensorView& out_scales,
                           Stream stream = nullptr);

// The number of SMs kernels may use (0: all of the device's), for leaving SMs to communication kernels.
void set_num_sms(int num_sms);
int get_num_sms();
// Programmatic dependent launch for kiln's kernels (default off).
void set_pdl(bool enabled);
bool get_pdl();

}  // namespace kiln
