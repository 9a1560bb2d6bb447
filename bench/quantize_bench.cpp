// Bandwidth of the FP8 casts against the device's own copy bandwidth, measured in the same run.
//
// For each shape: 3 warm-up calls (the first compiles or loads the kernel), then 50 timed calls, each after
// writing a 512 MB buffer to flush the 60 MB L2, each timed alone with CUDA events on the legacy stream;
// the median is reported. Bytes = bf16 read + e4m3 written + scales written. The reference is a
// device-to-device copy (cuMemcpyDtoDAsync) moving the same bytes (half read, half written), timed the same
// way. The target: >= 80 % of the copy for large tensors; a PASS/FAIL line says whether it was met.
// Also prints the host cost of one call on the hit path (validation + table lookup + launch), and sweeps
// per-token variants (16-byte vectors in flight per thread x CTAs per SM) through the same JIT path on the largest
// shape, each checked byte for byte against the default kernel's output, to inform the plan in
// src/ops/quantize.cpp.
//
// Exit status 0 when it ran (whatever the figures), 1 on an error, 77 when there is no GPU.
#include <cuda.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "cuda/driver.hpp"
#include "cuda/kernel.hpp"
#include "jit/jit_runtime.hpp"
#include "kiln/error.hpp"
#include "kiln/kernels/quantize_params.h"
#include "ops/quantize.hpp"
#include "kiln/ops.hpp"
#include "kiln/tensor.hpp"

namespace {

const kiln::cuda::DriverApi& cu() { return kiln::cuda::DriverApi::get(); }

constexpr size_t kFlushBytes = size_t{512} << 20;
constexpr int kWarmup = 3;
constexpr int kRuns = 50;
constexpr double kTarget = 0.80;

struct Buffer {
  CUdeviceptr ptr = 0;
  explicit Buffer(size_t bytes) { KILN_CU_CHECK(cu().cuMemAlloc(&ptr, bytes)); }
  ~Buffer() { (void)cu().cuMemFree(ptr); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  void* data() const { return reinterpret_cast<void*>(ptr); }
};

// Median milliseconds of `fn` over kRuns, L2 flushed before each run.
double time_median_ms(const Buffer& flush, const std::function<void()>& fn) {
  CUevent start = nullptr, stop = nullptr;
  KILN_CU_CHECK(cu().cuEventCreate(&start, CU_EVENT_DEFAULT));
  KILN_CU_CHECK(cu().cuEventCreate(&stop, CU_EVENT_DEFAULT));
  for (int i = 0; i < kWarmup; ++i) fn();
  std::vector<double> ms;
  for (int i = 0; i < kRuns; ++i) {
    KILN_CU_CHECK(cu().cuMemsetD8(flush.ptr, static_cast<unsigned char>(i), kFlushBytes));
    KILN_CU_CHECK(cu().cuEventRecord(start, nullptr));
    fn();
    KILN_CU_CHECK(cu().cuEventRecord(stop, nullptr));
    KILN_CU_CHECK(cu().cuEventSynchronize(stop));
    float t = 0;
    KILN_CU_CHECK(cu().cuEventElapsedTime(&t, start, stop));
    ms.push_back(t);
  }
  (void)cu().cuEventDestroy(start);
  (void)cu().cuEventDestroy(stop);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// Random finite bf16 (|x| in about 2^-8 .. 2^8, both signs), generated fast on the host.
void fill_random_bf16(const Buffer& x, size_t elements) {
  std::vector<uint16_t> host(elements);
  uint64_t s = 0x9e3779b97f4a7c15ull;
  for (auto& v : host) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    const uint16_t sign = static_cast<uint16_t>((s >> 40) & 1) << 15;
    const uint16_t exponent = static_cast<uint16_t>(119 + (s >> 41) % 17) << 7;
    v = static_cast<uint16_t>(sign | exponent | (s & 0x7f));
  }
  KILN_CU_CHECK(cu().cuMemcpyHtoD(x.ptr, host.data(), elements * 2));
}

struct Row {
  std::string op, shape;
  double us, gbps, copy_gbps;
  bool large;
};

void print_row(const Row& r) {
  std::printf("%-24s %-12s %9.1f %9.0f %10.0f %7.3f\n", r.op.c_str(), r.shape.c_str(), r.us, r.gbps, r.copy_gbps,
              r.gbps / r.copy_gbps);
  std::fflush(stdout);
}

}  // namespace

int main() {
  if (!kiln::cuda::DriverApi::available() || kiln::cuda::device_count() == 0) {
    std::printf("SKIP quantize_bench: no CUDA driver or GPU on this machine\n");
    return 77;
  }
  try {
    const int device = kiln::cuda::current_device();
    const kiln::cuda::DeviceInfo info = kiln::cuda::device_info(device);
    std::printf("quantize_bench on %s (%d SMs, %.0f MB L2), median of %d runs, L2 flushed (%zu MB write) before each\n",
                info.name.c_str(), info.sm_count, static_cast<double>(info.l2_bytes) / 1e6, kRuns, kFlushBytes >> 20);

    struct Shape {
      bool per_token;
      int64_t rows, k;
      bool large;  // counts against the >= 80 % target
    };
    const Shape shapes[] = {
        {true, 16384, 7168, true}, {true, 4096, 7168, true}, {true, 8192, 2048, true}, {true, 128, 7168, false},
        {false, 7168, 16384, true}, {false, 4096, 7168, true}, {false, 24576, 1536, true}, {false, 2112, 7168, false},
    };
    int64_t max_elements = 0;
    for (const auto& s : shapes) max_elements = std::max(max_elements, s.rows * s.k);
    Buffer flush(kFlushBytes), x(static_cast<size_t>(max_elements) * 2), out(static_cast<size_t>(max_elements)),
        scales(static_cast<size_t>(max_elements / 128 + 1024) * 4);
    // The copy moves as many bytes as the largest cast: read max*2 + write max*1 (+ scales), half each way.
    Buffer copy_src(static_cast<size_t>(max_elements) * 2), copy_dst(static_cast<size_t>(max_elements) * 2);
    fill_random_bf16(x, static_cast<size_t>(max_elements));

    std::printf("%-24s %-12s %9s %9s %10s %7s\n", "op", "shape", "us", "GB/s", "copy GB/s", "ratio");
    std::vector<Row> rows;
    for (const auto& s : shapes) {
      const int64_t m = s.rows, k = s.k;
      const kiln::TensorView tx = kiln::TensorView::contiguous(x.data(), kiln::DType::kBFloat16, {m, k}, device);
      const kiln::TensorView tout = kiln::TensorView::contiguous(out.data(), kiln::DType::kFloat8E4M3, {m, k}, device);
      kiln::TensorView tscales;
      int64_t scale_floats = 0;
      std::function<void()> op;
      if (s.per_token) {
        tscales = kiln::TensorView::contiguous(scales.data(), kiln::DType::kFloat32, {m, k / 128}, device);
        tscales.strides = {1, kiln::get_tma_aligned_size(m, 4)};
        scale_floats = m * (k / 128);
        op = [&] { kiln::per_token_cast_to_fp8(tx, tout, tscales); };
      } else {
        tscales = kiln::TensorView::contiguous(scales.data(), kiln::DType::kFloat32, {kiln::ceil_div(m, 128), k / 128},
                                               device);
        scale_floats = kiln::ceil_div(m, 128) * (k / 128);
        op = [&] { kiln::per_block_cast_to_fp8(tx, tout, tscales); };
      }
      const double bytes = static_cast<double>(m * k * 2 + m * k + scale_floats * 4);
      const double ms = time_median_ms(flush, op);
      const auto half = static_cast<size_t>(bytes / 2);
      const double copy_ms =
          time_median_ms(flush, [&] { KILN_CU_CHECK(cu().cuMemcpyDtoDAsync(copy_dst.ptr, copy_src.ptr, half, nullptr)); });
      Row r{s.per_token ? "per_token_cast_to_fp8" : "per_block_cast_to_fp8",
            std::to_string(m) + "x" + std::to_string(k),
            ms * 1e3,
            bytes / (ms * 1e-3) / 1e9,
            static_cast<double>(2 * half) / (copy_ms * 1e-3) / 1e9,
            s.large};
      print_row(r);
      rows.push_back(r);
    }

    // Host cost of a call on the hit path: many small launches, wall-clock per call (the GPU queue absorbs
    // them: 1000 calls stay well inside it).
    {
      const int64_t m = 1, k = 7168;
      const kiln::TensorView tx = kiln::TensorView::contiguous(x.data(), kiln::DType::kBFloat16, {m, k}, device);
      const kiln::TensorView tout = kiln::TensorView::contiguous(out.data(), kiln::DType::kFloat8E4M3, {m, k}, device);
      kiln::TensorView tscales = kiln::TensorView::contiguous(scales.data(), kiln::DType::kFloat32, {m, k / 128}, device);
      tscales.strides = {1, 4};
      std::vector<double> per_call;
      for (int rep = 0; rep < 5; ++rep) {
        KILN_CU_CHECK(cu().cuCtxSynchronize());
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < 1000; ++i) kiln::per_token_cast_to_fp8(tx, tout, tscales);
        per_call.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / 1000);
        KILN_CU_CHECK(cu().cuCtxSynchronize());
      }
      std::sort(per_call.begin(), per_call.end());
      std::printf("host cost per call (per_token_cast_to_fp8 1x7168, hit path: validation + lookup + launch): "
                  "%.2f us median of 5 x 1000 calls\n",
                  per_call[per_call.size() / 2]);
    }

    // Per-token variants on 16384x7168 (x holds it from the first shape; the default's output is in `out`).
    {
      const int64_t m = 16384, k = 7168;
      const kiln::TensorView tx = kiln::TensorView::contiguous(x.data(), kiln::DType::kBFloat16, {m, k}, device);
      const kiln::TensorView tout = kiln::TensorView::contiguous(out.data(), kiln::DType::kFloat8E4M3, {m, k}, device);
      kiln::TensorView tscales = kiln::TensorView::contiguous(scales.data(), kiln::DType::kFloat32, {m, k / 128}, device);
      tscales.strides = {1, kiln::get_tma_aligned_size(m, 4)};
      kiln::per_token_cast_to_fp8(tx, tout, tscales);
      KILN_CU_CHECK(cu().cuCtxSynchronize());
      std::vector<uint8_t> want(static_cast<size_t>(m * k)), got(want.size());
      std::vector<float> want_scales(static_cast<size_t>(m * (k / 128))), got_scales(want_scales.size());
      KILN_CU_CHECK(cu().cuMemcpyDtoH(want.data(), out.ptr, want.size()));
      KILN_CU_CHECK(cu().cuMemcpyDtoH(want_scales.data(), scales.ptr, want_scales.size() * 4));
      Buffer out2(want.size()), scales2(want_scales.size() * 4);
      const double bytes = static_cast<double>(m * k * 3 + m * (k / 128) * 4);
      std::printf("per-token variants, %lldx%lld (default: %s):\n", static_cast<long long>(m),
                  static_cast<long long>(k), kiln::ops::per_token_cast_spec(k, {}).describe().c_str());
      const int variants[][2] = {{2, 8}, {4, 3}, {4, 4}, {8, 2}, {8, 3}};
      for (const auto& var : variants) {
        const int vecs_per_thread = var[0], ctas_per_sm = var[1];
        kiln::codegen::KernelSpec spec = kiln::ops::per_token_cast_spec(k, {});
        spec.args.clear();
        spec.arg("k", k).arg("threads", int64_t{256}).arg("vecs_per_thread", int64_t{vecs_per_thread});
        spec.min_blocks_per_sm = ctas_per_sm;
        const kiln::cuda::LoadedKernel& kernel = kiln::jit::runtime().kernel(spec, device, nullptr);
        kiln::PerTokenCastParams params{x.data(), out2.data(), reinterpret_cast<float*>(scales2.ptr),
                                        static_cast<kiln::u64>(m), static_cast<kiln::u64>(k),
                                        static_cast<kiln::u64>(kiln::get_tma_aligned_size(m, 4))};
        kiln::cuda::LaunchConfig config;
        const int64_t vectors = m * (k / 8), per_cta = int64_t{256} * vecs_per_thread;
        config.grid[0] = static_cast<uint32_t>(
            std::min<int64_t>((vectors + per_cta - 1) / per_cta, int64_t{info.sm_count} * ctas_per_sm));
        config.block[0] = 256;
        KILN_CU_CHECK(cu().cuMemsetD8(out2.ptr, 0xff, want.size()));
        KILN_CU_CHECK(cu().cuMemsetD8(scales2.ptr, 0xff, want_scales.size() * 4));
        const double ms = time_median_ms(flush, [&] { kernel.launch(config, &params); });
        KILN_CU_CHECK(cu().cuMemcpyDtoH(got.data(), out2.ptr, got.size()));
        KILN_CU_CHECK(cu().cuMemcpyDtoH(got_scales.data(), scales2.ptr, got_scales.size() * 4));
        const bool same = got == want && std::memcmp(got_scales.data(), want_scales.data(), got_scales.size() * 4) == 0;
        std::printf("  vecs_per_thread=%d ctas_per_sm=%d grid=%u: %7.1f us %6.0f GB/s %s\n", vecs_per_thread,
                    ctas_per_sm, config.grid[0], ms * 1e3, bytes / (ms * 1e-3) / 1e9,
                    same ? "(output identical to the default's)" : "OUTPUT DIFFERS FROM THE DEFAULT'S");
        std::fflush(stdout);
      }
    }

    for (const Row& r : rows) {
      if (!r.large) continue;
      const double ratio = r.gbps / r.copy_gbps;
      std::printf("%s %s %s: %.0f GB/s = %.1f %% of the copy's %.0f GB/s (target >= %.0f %%)\n",
                  ratio >= kTarget ? "PASS" : "FAIL", r.op.c_str(), r.shape.c_str(), r.gbps, ratio * 100, r.copy_gbps,
                  kTarget * 100);
    }
  } catch (const std::exception& e) {
    std::printf("FAIL quantize_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
