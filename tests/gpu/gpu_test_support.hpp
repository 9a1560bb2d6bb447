// What the GPU test programs share: device buffers through kiln's lazily loaded driver table, and the
// bf16 <-> float conversions their host references need.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "cuda/driver.hpp"

namespace kiln::gpu_test {

// Device memory that frees itself. Allocates at least 256 bytes, so an empty tensor still has a valid,
// aligned address.
struct DeviceBuffer {
  CUdeviceptr ptr = 0;
  size_t bytes = 0;
  explicit DeviceBuffer(size_t n) : bytes(n) {
    KILN_CU_CHECK(cuda::DriverApi::get().cuMemAlloc(&ptr, std::max<size_t>(n, 256)));
  }
  ~DeviceBuffer() {
    if (ptr) (void)cuda::DriverApi::get().cuMemFree(ptr);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data(size_t offset = 0) const { return reinterpret_cast<void*>(ptr + offset); }
  void upload(const void* host) const { upload(host, bytes); }
  void upload(const void* host, size_t n) const { KILN_CU_CHECK(cuda::DriverApi::get().cuMemcpyHtoD(ptr, host, n)); }
  void download(void* host) const { KILN_CU_CHECK(cuda::DriverApi::get().cuMemcpyDtoH(host, ptr, bytes)); }
  // Fills with 0xff (NaN as bf16 and fp32, -NaN... as e4m3) and waits: the memset runs on the legacy stream,
  // and a kernel on a non-blocking stream could otherwise race with it.
  void poison() const {
    KILN_CU_CHECK(cuda::DriverApi::get().cuMemsetD8(ptr, 0xff, std::max<size_t>(bytes, 1)));
    KILN_CU_CHECK(cuda::DriverApi::get().cuCtxSynchronize());
  }
};

inline uint16_t f32_to_bf16(float f) {  // round to nearest even
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

inline float bf16_to_f32(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace kiln::gpu_test
