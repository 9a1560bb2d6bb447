// What the GPU test programs share: device buffers through kiln's lazily loaded driver table, the timing
// of a call as the benchmarks time it, strided views of their buffers, and the bf16 <-> float conversions their host
// references need.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cuda/driver.hpp"
#include "fp8_reference.hpp"
#include "kiln/tensor.hpp"

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

// CUDA-event timing of a call on the legacy stream, the way the peers file measured DeepGEMM (and the Python
// benchmark measures kiln): before each call an asynchronous 512 MB memset flushes the L2 (60 MB); all 23
// (flush, call) pairs are queued back to back and read after one synchronisation; the first three are
// warm-ups, the median of the other 20 is the time. Synchronising after each call instead lets the GPU idle
// between iterations, and reads decode-sized calls 1-1.5 us faster than the benchmark does (bench/RESULTS.md,
// sixth session).
//
// Before the 23 calls the GPU idles for idle_ms (300, or KILN_TEST_IDLE_MS), as the Python benchmark does
// before each measurement: the clocks of a heavy call depend on the load before it, and without the idle the
// first configuration timed on a shape (which followed the host reference's computation, an idle GPU) ran up to
// 9 % faster than the same kernel timed second (H200, 128-row tiles at 8064 x 7360 x 16384; twenty-ninth
// session, bench/RESULTS.md).
struct Timing {
  static constexpr int kWarmups = 3, kTimed = 20;
  static int idle_ms_from_env() {
    const char* v = std::getenv("KILN_TEST_IDLE_MS");
    if (v == nullptr || *v == 0) return 300;
    char* end = nullptr;
    const long ms = std::strtol(v, &end, 10);
    if (*end != 0 || ms < 0 || ms > 10000) {
      std::fprintf(stderr, "KILN_TEST_IDLE_MS must be a whole number of milliseconds in 0..10000, got '%s'\n", v);
      std::exit(2);
    }
    return static_cast<int>(ms);
  }
  int idle_ms = idle_ms_from_env();
  std::vector<CUevent> start, stop;
  std::unique_ptr<DeviceBuffer> flush;
  Timing() : start(kWarmups + kTimed), stop(kWarmups + kTimed) {
    for (int i = 0; i < kWarmups + kTimed; ++i) {
      KILN_CU_CHECK(cuda::DriverApi::get().cuEventCreate(&start[i], CU_EVENT_DEFAULT));
      KILN_CU_CHECK(cuda::DriverApi::get().cuEventCreate(&stop[i], CU_EVENT_DEFAULT));
    }
    flush = std::make_unique<DeviceBuffer>(512ull << 20);
  }
  ~Timing() {
    for (int i = 0; i < kWarmups + kTimed; ++i) {
      (void)cuda::DriverApi::get().cuEventDestroy(start[i]);
      (void)cuda::DriverApi::get().cuEventDestroy(stop[i]);
    }
  }
  Timing(const Timing&) = delete;
  Timing& operator=(const Timing&) = delete;

  double median_us(const std::function<void()>& call) {
    const cuda::DriverApi& api = cuda::DriverApi::get();
    KILN_CU_CHECK(api.cuCtxSynchronize());
    std::this_thread::sleep_for(std::chrono::milliseconds(idle_ms));
    for (int it = 0; it < kWarmups + kTimed; ++it) {
      KILN_CU_CHECK(api.cuMemsetD8Async(flush->ptr, static_cast<unsigned char>(it), flush->bytes, nullptr));
      KILN_CU_CHECK(api.cuEventRecord(start[it], nullptr));
      call();
      KILN_CU_CHECK(api.cuEventRecord(stop[it], nullptr));
    }
    KILN_CU_CHECK(api.cuEventSynchronize(stop.back()));
    std::vector<float> ms;
    for (int it = kWarmups; it < kWarmups + kTimed; ++it) {
      float t = 0;
      KILN_CU_CHECK(api.cuEventElapsedTime(&t, start[it], stop[it]));
      ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2] * 1e3;
  }
};

// A view of `data` with the given shape and strides (in elements): a grouped tensor's padded layout.
inline TensorView strided_view(void* data, DType dtype, std::initializer_list<int64_t> shape,
                               std::initializer_list<int64_t> strides) {
  TensorView t = TensorView::contiguous(data, dtype, shape);
  std::copy(strides.begin(), strides.end(), t.strides.begin());
  return t;
}

inline uint16_t f32_to_bf16(float f) {  // round to nearest even
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// A random bf16 input of the BF16 GEMM tests: in [-1, 1) times a per-row magnitude of 2^-4..2^4 (a token's, where the
// rows are K), rounded to bf16, never exactly zero.
inline uint16_t random_bf16(uint64_t seed, uint64_t row, uint64_t col) {
  const double row_magnitude = magnitude(mix(seed ^ (row * 0x9e37ull)));
  double u = static_cast<double>(mix(seed * 31 + (row << 24) + col) >> 11) / 9007199254740992.0 * 2.0 - 1.0;
  if (std::fabs(u) < 1e-3) u = 1e-3;
  return f32_to_bf16(static_cast<float>(u * row_magnitude));
}

inline float bf16_to_f32(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// The failures a GPU test has reported, and its result lines: "PASS <what>" or "FAIL <what>", one a case (device-run.sh
// counts them), flushed so that a crash leaves every line before it.
inline int g_failures = 0;
inline void report(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "PASS" : "FAIL", what.c_str());
  std::fflush(stdout);
  if (!ok) ++g_failures;
}

// The start of a GPU test's launches. Without a CUDA driver or a GPU: prints "SKIP <test> launches" with the
// failures so far and returns false (the test then exits 77, or 1 after failures). Otherwise makes device 0's
// primary context current (the allocations go there), prints what the device is, and returns true.
inline bool start_launches(const char* test, int failures) {
  if (!cuda::DriverApi::available() || cuda::device_count() == 0) {
    std::printf("SKIP %s launches: no CUDA driver or GPU (%d failures so far)\n", test, failures);
    return false;
  }
  cuda::current_device();
  const cuda::DeviceInfo info = cuda::device_info(0);
  std::printf("device 0: %s, %d SMs\n", info.name.c_str(), info.sm_count);
  return true;
}

}  // namespace kiln::gpu_test
