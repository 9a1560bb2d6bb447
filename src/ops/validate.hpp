// Precondition checks shared by the operations (the FP8 casts now, the FP8 GEMM next). Each check throws
// kiln::Error with a message of the form
//   "<function>: <argument> must be <expected>, got <given> (<argument> is <tensor description>)"
// ErrorKind::kTypeError for a wrong dtype, kValueError for everything else (shape, strides, alignment,
// device). On success a check does no allocation and builds no string: they run on every launch.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "kiln/error.hpp"
#include "kiln/tensor.hpp"

namespace kiln::cuda {
struct DeviceInfo;
}

namespace kiln::ops {

// The function and argument a check is about, for its message: {"per_token_cast_to_fp8", "x"}.
struct Arg {
  const char* function;
  const char* name;
};

// Throws Error(kind) "<function>: <name> must be <expected>, got <given> (<name> is <describe()>)".
[[noreturn]] void fail(ErrorKind kind, const Arg& arg, const TensorView& t, const std::string& expected,
                       const std::string& given);

// dtype == expected, else kTypeError.
void check_dtype(const Arg& arg, const TensorView& t, DType expected);

// On a CUDA device (device_kind kCuda, ordinal >= 0), else kValueError.
void check_on_cuda(const Arg& arg, const TensorView& t);

// `t` on the same CUDA device as `ref` (checked with check_on_cuda first), else kValueError naming both.
void check_same_device(const Arg& arg, const TensorView& t, const Arg& ref_arg, const TensorView& ref);

// `t` on an existing device of compute capability 9.0 (H100/H200: the GEMM kernels need sm_90a's WGMMA and TMA),
// else kValueError; that device's description. Without a driver, Error(kCudaError) saying what is missing.
cuda::DeviceInfo check_sm90_device(const Arg& arg, const TensorView& t);

// t.ndim == ndim, else kValueError.
void check_ndim(const Arg& arg, const TensorView& t, int ndim);

// t.shape == expected (ndim checked first), else kValueError showing both shapes. `what` explains where
// the expected shape comes from ("(m, k) of x"); may be null.
void check_shape(const Arg& arg, const TensorView& t, std::initializer_list<int64_t> expected, const char* what);

// t.size(dim) % divisor == 0, else kValueError naming the dimension as `dim_name` ("k").
void check_size_multiple(const Arg& arg, const TensorView& t, int dim, const char* dim_name, int64_t divisor);

// The data pointer is a multiple of `bytes` (skipped for a tensor with no elements), else kValueError.
void check_pointer_aligned(const Arg& arg, const TensorView& t, int bytes);

// A 2-D tensor whose rows are dense (stride(1) == 1) and each `row_align_bytes`-aligned apart
// (stride(0) >= size(1) and stride(0) * element_size a multiple of row_align_bytes), as 16-byte vector
// loads and TMA need. Strides of size-1 dimensions are ignored, as torch does. Returns the row stride to
// use, in elements (size(1) when there is at most one row or no element). kValueError otherwise.
int64_t check_rows_dense(const Arg& arg, const TensorView& t, int row_align_bytes);

// Row-major contiguous (size-1 dimensions ignored; an empty tensor passes), else kValueError.
void check_contiguous(const Arg& arg, const TensorView& t);

// t.strides == expected in every dimension of size > 1 (a size-1 dimension's stride is never used; an
// empty tensor passes), else
// kValueError showing both; `layout` names the layout in the message ("the MN-major, TMA-aligned layout").
void check_strides(const Arg& arg, const TensorView& t, std::initializer_list<int64_t> expected, const char* layout);

// Per-row scales as the FP8 kernels read them: float32 [rows, cols] (cols = ceil(k/128)), MN-major and
// TMA-aligned, i.e. strides (1, s) with s >= rows and s a multiple of 4 (16-byte TMA rows). `mn` names the
// rows in the message ("m" or "n"). Row-major scales get an error that names the conversion
// (to_mn_major_scales). Returns the column stride s to use (get_tma_aligned_size(rows, 4) when it is never
// used). kValueError otherwise.
int64_t check_mn_major_scales(const Arg& arg, const TensorView& sf, int64_t rows, int64_t cols, const char* mn);

// Whether the bytes two non-empty tensors span (each from its lowest-addressed element to one past its highest, by its
// shape and strides) meet: where an op must not read what it writes.
bool spans_overlap(const TensorView& a, const TensorView& b);

// `t`, which the op writes, and `other`, which it reads (or writes too), in memory that does not meet
// (spans_overlap), else kValueError "<function>: <name> must be memory that does not overlap <other_name>'s
// (<other_name> is <describe()>), got an overlap (<name> is <describe()>)". A tensor without elements addresses
// nothing and passes.
void check_no_overlap(const Arg& arg, const TensorView& t, const char* other_name, const TensorView& other);

// "(4096, 7168)": a shape or stride list as messages show it.
std::string format_dims(const int64_t* dims, int count);

// "strides (x, y, z)": a tensor's strides as messages show them.
std::string strides_text(const TensorView& t);

// A [rows, cols] view with strides (s0, s1) of `t`'s memory from element `offset` on: one group of a grouped tensor,
// checked as the single-GEMM form checks its operands.
TensorView view_2d(const TensorView& t, int64_t offset, int64_t rows, int64_t cols, int64_t s0, int64_t s1);

}  // namespace kiln::ops
