#include "kiln/tensor.hpp"

#include <sstream>

namespace kiln {

const char* to_string(DType dtype) noexcept {
  switch (dtype) {
    case DType::kFloat32: return "float32";
    case DType::kBFloat16: return "bfloat16";
    case DType::kFloat16: return "float16";
    case DType::kFloat8E4M3: return "float8_e4m3fn";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kUInt8: return "uint8";
  }
  return "unknown";
}

int element_size(DType dtype) noexcept {
  switch (dtype) {
    case DType::kFloat32: case DType::kInt32: return 4;
    case DType::kBFloat16: case DType::kFloat16: return 2;
    case DType::kFloat8E4M3: case DType::kUInt8: return 1;
    case DType::kInt64: return 8;
  }
  return 0;
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int i = 0; i < ndim; ++i) n *= shape[i];
  return n;
}

bool TensorView::is_contiguous() const {
  int64_t expected = 1;
  for (int i = ndim - 1; i >= 0; --i) {
    if (shape[i] != 1 && strides[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

std::string TensorView::describe() const {
  std::ostringstream s;
  s << to_string(dtype) << '[';
  for (int i = 0; i < ndim; ++i) s << (i ? ", " : "") << shape[i];
  s << "] strides (";
  for (int i = 0; i < ndim; ++i) s << (i ? ", " : "") << strides[i];
  s << (ndim == 1 ? ",)" : ")") << " on " << (device_kind == DeviceKind::kCuda ? "cuda:" : "cpu");
  if (device_kind == DeviceKind::kCuda) s << device;
  return s.str();
}

TensorView TensorView::contiguous(void* data, DType dtype, std::initializer_list<int64_t> shape, int device) {
  TensorView t;
  t.data = data;
  t.dtype = dtype;
  t.device = device;
  t.ndim = static_cast<int>(shape.size());
  int i = 0;
  for (int64_t s : shape) t.shape[i++] = s;
  int64_t stride = 1;
  for (int d = t.ndim - 1; d >= 0; --d) {
    t.strides[d] = stride;
    stride *= t.shape[d];
  }
  return t;
}

}  // namespace kiln
