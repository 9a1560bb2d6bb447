// A non-owning view of a strided tensor, the currency of kiln's C++ API. Bindings build these from DLPack /
// the CUDA array interface; C++ users fill them directly.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace kiln {

enum class DType : uint8_t { kFloat32, kBFloat16, kFloat16, kFloat8E4M3, kInt32, kInt64, kUInt8 };
const char* to_string(DType dtype) noexcept;  // "float32", "bfloat16", ... as torch names them
int element_size(DType dtype) noexcept;

enum class DeviceKind : uint8_t { kCpu, kCuda };

struct TensorView {
  static constexpr int kMaxDims = 4;
  void* data = nullptr;
  DType dtype = DType::kFloat32;
  DeviceKind device_kind = DeviceKind::kCuda;
  int device = 0;  // CUDA ordinal when device_kind == kCuda
  int ndim = 0;
  std::array<int64_t, kMaxDims> shape{};
  std::array<int64_t, kMaxDims> strides{};  // in elements

  int64_t size(int dim) const { return shape[dim < 0 ? dim + ndim : dim]; }
  int64_t stride(int dim) const { return strides[dim < 0 ? dim + ndim : dim]; }
  int64_t numel() const;
  bool is_contiguous() const;  // row-major, dense
  std::string describe() const;  // "bfloat16[4096, 7168] strides (7168, 1) on cuda:0"

  // A row-major contiguous view.
  static TensorView contiguous(void* data, DType dtype, std::initializer_list<int64_t> shape, int device = 0);
};

}  // namespace kiln
