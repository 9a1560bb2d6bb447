#include "ops/validate.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>

#include "cuda/driver.hpp"
#include "kiln/ops.hpp"

namespace kiln::ops {
namespace {

std::string device_text(const TensorView& t) {
  return t.device_kind == DeviceKind::kCuda ? "cuda:" + std::to_string(t.device) : std::string("cpu");
}

}  // namespace

std::string format_dims(const int64_t* dims, int count) {
  std::string s = "(";
  for (int i = 0; i < count; ++i) {
    if (i) s += ", ";
    s += std::to_string(dims[i]);
  }
  if (count == 1) s += ',';
  return s + ')';
}

void fail(ErrorKind kind, const Arg& arg, const TensorView& t, const std::string& expected, const std::string& given) {
  throw Error(kind, std::string(arg.function) + ": " + arg.name + " must be " + expected + ", got " + given + " (" +
                        arg.name + " is " + t.describe() + ")");
}

void check_dtype(const Arg& arg, const TensorView& t, DType expected) {
  if (t.dtype != expected) fail(ErrorKind::kTypeError, arg, t, to_string(expected), to_string(t.dtype));
}

void check_on_cuda(const Arg& arg, const TensorView& t) {
  if (t.device_kind != DeviceKind::kCuda) fail(ErrorKind::kValueError, arg, t, "on a CUDA device", "cpu");
  if (t.device < 0)
    fail(ErrorKind::kValueError, arg, t, "on a CUDA device with an ordinal >= 0",
         "device ordinal " + std::to_string(t.device));
}

cuda::DeviceInfo check_sm90_device(const Arg& arg, const TensorView& t) {
  // Without a driver device_count() is 0 and device_info() says what is missing (kCudaError).
  const int count = cuda::device_count();
  if (count > 0 && t.device >= count)
    fail(ErrorKind::kValueError, arg, t, "on an existing CUDA device (0 <= ordinal < " + std::to_string(count) + ")",
         "cuda:" + std::to_string(t.device));
  cuda::DeviceInfo info = cuda::device_info(t.device);
  if (info.cc_major != 9 || info.cc_minor != 0)
    fail(ErrorKind::kValueError, arg, t,
         "on a GPU of compute capability 9.0 (H100/H200: the kernel needs sm_90a's WGMMA and TMA)",
         "cuda:" + std::to_string(t.device) + " = " + info.name + " (compute capability " +
             std::to_string(info.cc_major) + "." + std::to_string(info.cc_minor) + ")");
  return info;
}

void check_same_device(const Arg& arg, const TensorView& t, const Arg& ref_arg, const TensorView& ref) {
  check_on_cuda(arg, t);
  if (t.device != ref.device)
    fail(ErrorKind::kValueError, arg, t, std::string("on the same device as ") + ref_arg.name + " (" + device_text(ref) + ")",
         device_text(t));
}

void check_ndim(const Arg& arg, const TensorView& t, int ndim) {
  if (t.ndim != ndim)
    fail(ErrorKind::kValueError, arg, t, std::to_string(ndim) + "-dimensional", std::to_string(t.ndim) + " dimensions");
}

void check_shape(const Arg& arg, const TensorView& t, std::initializer_list<int64_t> expected, const char* what) {
  check_ndim(arg, t, static_cast<int>(expected.size()));
  int i = 0;
  for (int64_t e : expected) {
    if (t.shape[i] != e) {
      std::string want = "of shape " + format_dims(expected.begin(), static_cast<int>(expected.size()));
      if (what) want += std::string(" ") + what;
      fail(ErrorKind::kValueError, arg, t, want, "shape " + format_dims(t.shape.data(), t.ndim));
    }
    ++i;
  }
}

void check_size_multiple(const Arg& arg, const TensorView& t, int dim, const char* dim_name, int64_t divisor) {
  const int64_t size = t.size(dim);
  if (size % divisor != 0)
    throw Error(ErrorKind::kValueError, std::string(arg.function) + ": " + arg.name + ".size(" + std::to_string(dim) +
                                            ") (" + dim_name + ") must be a multiple of " + std::to_string(divisor) +
                                            ", got " + std::to_string(size) + " (" + arg.name + " is " +
                                            t.describe() + ")");
}

void check_pointer_aligned(const Arg& arg, const TensorView& t, int bytes) {
  if (t.numel() == 0) return;
  const auto address = reinterpret_cast<uintptr_t>(t.data);
  if (address % static_cast<uintptr_t>(bytes) != 0) {
    char given[96];
    std::snprintf(given, sizeof(given), "data pointer %p (%llu bytes past a %d-byte boundary)", t.data,
                  static_cast<unsigned long long>(address % static_cast<uintptr_t>(bytes)), bytes);
    fail(ErrorKind::kValueError, arg, t, std::to_string(bytes) + "-byte aligned", given);
  }
}

int64_t check_rows_dense(const Arg& arg, const TensorView& t, int row_align_bytes) {
  check_ndim(arg, t, 2);
  const int64_t rows = t.shape[0], cols = t.shape[1];
  if (rows == 0 || cols == 0) return cols;  // no element is ever addressed
  if (cols > 1 && t.strides[1] != 1)
    fail(ErrorKind::kValueError, arg, t, "dense along its last dimension (stride(1) == 1)",
         "stride(1) == " + std::to_string(t.strides[1]));
  if (rows <= 1) return cols;
  const int64_t row_stride = t.strides[0];
  if (row_stride < cols)
    fail(ErrorKind::kValueError, arg, t, "row-major with stride(0) >= size(1) == " + std::to_string(cols),
         "stride(0) == " + std::to_string(row_stride));
  const int esize = element_size(t.dtype);
  if ((row_stride * esize) % row_align_bytes != 0)
    fail(ErrorKind::kValueError, arg, t,
         "rows " + std::to_string(row_align_bytes) + "-byte aligned (stride(0) a multiple of " +
             std::to_string(row_align_bytes / esize) + ")",
         "stride(0) == " + std::to_string(row_stride) + " (" + std::to_string(row_stride * esize) + " bytes)");
  return row_stride;
}

void check_contiguous(const Arg& arg, const TensorView& t) {
  if (t.numel() != 0 && !t.is_contiguous()) {
    int64_t expected[TensorView::kMaxDims] = {};
    int64_t stride = 1;
    for (int d = t.ndim - 1; d >= 0; --d) {
      expected[d] = stride;
      stride *= t.shape[d];
    }
    fail(ErrorKind::kValueError, arg, t, "contiguous (row-major strides " + format_dims(expected, t.ndim) + ")",
         "strides " + format_dims(t.strides.data(), t.ndim));
  }
}

int64_t check_mn_major_scales(const Arg& arg, const TensorView& sf, int64_t rows, int64_t cols, const char* mn) {
  const int64_t aligned = get_tma_aligned_size(rows, 4);
  if (rows == 0 || cols == 0) return aligned;
  if (rows > 1 && sf.strides[0] != 1) {
    std::string given = "strides " + format_dims(sf.strides.data(), 2);
    if (sf.strides[1] == 1) given += " (row-major)";
    const int64_t example[2] = {1, aligned};
    fail(ErrorKind::kValueError, arg, sf,
         std::string("MN-major and TMA-aligned: strides (1, s) with s >= ") + mn + " and s a multiple of 4, e.g. " +
             format_dims(example, 2) + " as per_token_cast_to_fp8 writes; row-major scales need a transposing "
             "copy first, which to_mn_major_scales makes (DeepGEMM's get_mn_major_tma_aligned_tensor(" + arg.name +
             "))",
         given);
  }
  if (cols == 1) return std::max<int64_t>(aligned, 4);  // the column stride is never used
  const int64_t s = sf.strides[1];
  if (s < rows || s % 4 != 0)
    fail(ErrorKind::kValueError, arg, sf,
         std::string("MN-major and TMA-aligned: stride(1) >= ") + mn + " == " + std::to_string(rows) +
             " and a multiple of 4 (16-byte TMA rows), e.g. " + std::to_string(aligned),
         "stride(1) == " + std::to_string(s));
  return s;
}

bool spans_overlap(const TensorView& a, const TensorView& b) {
  // In 128 bits: the checks run before anything touches memory, so a shape and strides may claim more bytes than 64
  // bits count (such a span meets everything, as it should), and the arithmetic must not overflow on them.
  using Wide = __int128;
  const auto span = [](const TensorView& t) {
    Wide first = 0, last = 0;  // the offsets of the lowest- and highest-addressed elements, in elements
    for (int d = 0; d < t.ndim; ++d) (t.strides[d] < 0 ? first : last) += (Wide{t.shape[d]} - 1) * t.strides[d];
    const Wide data = reinterpret_cast<uintptr_t>(t.data);
    const Wide size = element_size(t.dtype);
    return std::pair<Wide, Wide>{data + first * size, data + (last + 1) * size};
  };
  const auto [a_lo, a_hi] = span(a);
  const auto [b_lo, b_hi] = span(b);
  return a_lo < b_hi && b_lo < a_hi;
}

void check_no_overlap(const Arg& arg, const TensorView& t, const char* other_name, const TensorView& other) {
  if (t.numel() == 0 || other.numel() == 0 || !spans_overlap(t, other)) return;
  fail(ErrorKind::kValueError, arg, t,
       std::string("memory that does not overlap ") + other_name + "'s (" + other_name + " is " + other.describe() +
           ")",
       "an overlap");
}

void check_strides(const Arg& arg, const TensorView& t, std::initializer_list<int64_t> expected, const char* layout) {
  check_ndim(arg, t, static_cast<int>(expected.size()));
  if (t.numel() == 0) return;  // no element is ever addressed
  int i = 0;
  for (int64_t e : expected) {
    if (t.shape[i] > 1 && t.strides[i] != e)
      fail(ErrorKind::kValueError, arg, t,
           std::string("in ") + layout + " with strides " + format_dims(expected.begin(), static_cast<int>(expected.size())),
           "strides " + format_dims(t.strides.data(), t.ndim));
    ++i;
  }
}

TensorView view_2d(const TensorView& t, int64_t offset, int64_t rows, int64_t cols, int64_t s0, int64_t s1) {
  TensorView v = t;
  v.data = static_cast<char*>(t.data) + offset * element_size(t.dtype);
  v.ndim = 2;
  v.shape = {rows, cols, 0, 0};
  v.strides = {s0, s1, 0, 0};
  return v;
}

std::string strides_text(const TensorView& t) { return "strides " + format_dims(t.strides.data(), t.ndim); }

}  // namespace kiln::ops
