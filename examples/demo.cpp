// `make demo`: the main job on a default workload.
//
// 1. Compiles the demo kernels ahead of time (for the GPU present, else sm_90a) through the public API.
// 2. Asks again from a fresh process, as a warm server would: every kernel must now come from the disk
//    cache, with no compile.
// 3. With an H100/H200 present, runs the main job on a DeepSeek-V3 shape: quantise activations (per token)
//    and weights (per 128x128 block) to FP8, multiply them with the FP8 GEMM, check against a CPU reference
//    computed from the dequantised inputs, and print times.
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cuda/driver.hpp"  // device memory for step 3 (kiln's API itself never allocates)
#include "kiln/kiln.hpp"

namespace {

struct DemoKernel {
  std::string op;
  std::map<std::string, int64_t> problem;
};

const std::vector<DemoKernel> kDemoKernels = {
    {"fp8_gemm_nt", {{"m", 4096}, {"n", 7168}, {"k", 2048}}},
    {"fp8_gemm_nt", {{"m", 128}, {"n", 7168}, {"k", 2048}}},
    {"per_token_cast_to_fp8", {{"m", 4096}, {"k", 7168}}},
    {"per_token_cast_to_fp8", {{"m", 4096}, {"k", 2048}}},
    {"per_block_cast_to_fp8", {{"n", 7168}, {"k", 2048}}},
    {"per_block_cast_to_fp8", {{"n", 2112}, {"k", 7168}}},
};

std::string problem_text(const DemoKernel& k) {
  std::string s;
  for (const auto& [name, value] : k.problem) s += (s.empty() ? "" : " ") + name + "=" + std::to_string(value);
  return s;
}

// Compiles every demo kernel; returns (kernels, hits, total compile ms).
std::tuple<int, int, double> compile_all(const std::string& arch, const char* title) {
  std::printf("\n%s\n", title);
  std::printf("  %-24s %-20s %-7s %-6s %10s %10s  %s\n", "op", "problem", "backend", "hit", "compile ms",
              "cubin B", "key");
  int kernels = 0, hits = 0;
  double total_ms = 0;
  for (const auto& k : kDemoKernels) {
    for (const kiln::KernelReport& r : kiln::compile({k.op, k.problem, arch, std::nullopt})) {
      std::printf("  %-24s %-20s %-7s %-6s %10.1f %10llu  %s\n", r.op.c_str(), problem_text(k).c_str(),
                  kiln::to_string(r.backend), r.hit ? "yes" : "no", r.compile_ms,
                  static_cast<unsigned long long>(r.cubin_bytes), r.key.c_str());
      ++kernels;
      hits += r.hit;
      total_ms += r.compile_ms;
    }
  }
  return {kernels, hits, total_ms};
}

uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

float from_bf16(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

float from_e4m3(uint8_t v) {
  int sign = v >> 7, exp = (v >> 3) & 15, man = v & 7;
  float mag = exp == 0 ? std::ldexp(static_cast<float>(man), -9) : std::ldexp(1.0f + static_cast<float>(man) / 8.0f, exp - 7);
  return sign ? -mag : mag;
}

// Runs per_token_cast_to_fp8 on [m, k] random data; checks the dequantised result; returns GB/s.
void run_on_gpu(int device) {
  const auto& cu = kiln::cuda::DriverApi::get();
  const int64_t m = 4096, k = 7168;
  std::vector<uint16_t> host_x(static_cast<size_t>(m * k));
  std::mt19937 rng(2026);
  std::normal_distribution<float> dist(0.0f, 2.0f);
  for (auto& v : host_x) v = to_bf16(dist(rng));

  kiln::cuda::current_device();
  CUdeviceptr x = 0, out = 0, scales = 0;
  const int64_t scale_floats = kiln::per_token_scales_storage(m, k);
  KILN_CU_CHECK(cu.cuMemAlloc(&x, host_x.size() * 2));
  KILN_CU_CHECK(cu.cuMemAlloc(&out, static_cast<size_t>(m * k)));
  KILN_CU_CHECK(cu.cuMemAlloc(&scales, static_cast<size_t>(scale_floats) * 4));
  KILN_CU_CHECK(cu.cuMemcpyHtoD(x, host_x.data(), host_x.size() * 2));
  KILN_CU_CHECK(cu.cuMemsetD8(out, 0xff, static_cast<size_t>(m * k)));  // poison

  kiln::TensorView tx = kiln::TensorView::contiguous(reinterpret_cast<void*>(x), kiln::DType::kBFloat16, {m, k}, device);
  kiln::TensorView tout = kiln::TensorView::contiguous(reinterpret_cast<void*>(out), kiln::DType::kFloat8E4M3, {m, k}, device);
  kiln::TensorView tscales = kiln::TensorView::contiguous(reinterpret_cast<void*>(scales), kiln::DType::kFloat32, {m, k / 128}, device);
  tscales.strides = {1, kiln::get_tma_aligned_size(m, 4)};

  auto t0 = std::chrono::steady_clock::now();
  kiln::per_token_cast_to_fp8(tx, tout, tscales);
  KILN_CU_CHECK(cu.cuCtxSynchronize());
  double first_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

  std::vector<uint8_t> host_out(static_cast<size_t>(m * k));
  std::vector<float> host_scales(static_cast<size_t>(scale_floats));
  KILN_CU_CHECK(cu.cuMemcpyDtoH(host_out.data(), out, host_out.size()));
  KILN_CU_CHECK(cu.cuMemcpyDtoH(host_scales.data(), scales, host_scales.size() * 4));
  double err = 0, ref = 0;
  for (int64_t r = 0; r < m; ++r)
    for (int64_t c = 0; c < k; ++c) {
      float s = host_scales[static_cast<size_t>((c / 128) * tscales.strides[1] + r)];
      double v = from_e4m3(host_out[static_cast<size_t>(r * k + c)]) * static_cast<double>(s);
      double x_ref = from_bf16(host_x[static_cast<size_t>(r * k + c)]);
      err += (v - x_ref) * (v - x_ref);
      ref += x_ref * x_ref;
    }
  const double rel = std::sqrt(err / ref);

  const int iters = 50;
  KILN_CU_CHECK(cu.cuCtxSynchronize());
  t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) kiln::per_token_cast_to_fp8(tx, tout, tscales);
  KILN_CU_CHECK(cu.cuCtxSynchronize());
  double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / iters;
  double bytes = static_cast<double>(m * k * 3 + m * (k / 128) * 4);
  std::printf("\nOn the GPU (device %d):\n", device);
  std::printf("  per_token_cast_to_fp8 %lldx%lld: first call %.2f ms (load + launch), then %.1f us/call, "
              "%.0f GB/s; dequantised vs input rel. error %.2e (%s)\n",
              static_cast<long long>(m), static_cast<long long>(k), first_ms, us, bytes / us / 1e3, rel,
              rel < 0.05 ? "ok" : "TOO LARGE");
  cu.cuMemFree(x);
  cu.cuMemFree(out);
  cu.cuMemFree(scales);
  if (rel >= 0.05) throw kiln::Error(kiln::ErrorKind::kInternal, "demo: quantisation result is wrong");
}

// The main job: y = x . w^T in FP8 with DeepSeek-V3 scaling. x [m, k] and w [n, k] are random bf16; both are
// quantised on the GPU, multiplied, and sampled rows are checked against a float64 product of the
// dequantised inputs (DeepGEMM's calc_diff).
void run_gemm_on_gpu(int device) {
  const auto& cu = kiln::cuda::DriverApi::get();
  const int64_t m = 4096, n = 7168, k = 2048;
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<uint16_t> hx(static_cast<size_t>(m * k)), hw(static_cast<size_t>(n * k));
  for (auto& v : hx) v = to_bf16(dist(rng));
  for (auto& v : hw) v = to_bf16(dist(rng));

  kiln::cuda::current_device();
  auto alloc = [&](size_t bytes) {
    CUdeviceptr p = 0;
    KILN_CU_CHECK(cu.cuMemAlloc(&p, bytes));
    return p;
  };
  const int64_t sfa_floats = kiln::per_token_scales_storage(m, k);
  const int64_t sfb_floats = kiln::ceil_div(n, 128) * (k / 128);
  CUdeviceptr x = alloc(hx.size() * 2), w = alloc(hw.size() * 2), a = alloc(static_cast<size_t>(m * k)),
              b = alloc(static_cast<size_t>(n * k)), sfa = alloc(static_cast<size_t>(sfa_floats) * 4),
              sfb = alloc(static_cast<size_t>(sfb_floats) * 4), d = alloc(static_cast<size_t>(m * n) * 2);
  KILN_CU_CHECK(cu.cuMemcpyHtoD(x, hx.data(), hx.size() * 2));
  KILN_CU_CHECK(cu.cuMemcpyHtoD(w, hw.data(), hw.size() * 2));
  KILN_CU_CHECK(cu.cuMemsetD8(d, 0xff, static_cast<size_t>(m * n) * 2));  // poison: bf16 NaN

  auto view = [&](CUdeviceptr p, kiln::DType t, int64_t r, int64_t c) {
    return kiln::TensorView::contiguous(reinterpret_cast<void*>(p), t, {r, c}, device);
  };
  kiln::TensorView tx = view(x, kiln::DType::kBFloat16, m, k), tw = view(w, kiln::DType::kBFloat16, n, k);
  kiln::TensorView ta = view(a, kiln::DType::kFloat8E4M3, m, k), tb = view(b, kiln::DType::kFloat8E4M3, n, k);
  kiln::TensorView tsfa = view(sfa, kiln::DType::kFloat32, m, k / 128);
  tsfa.strides = {1, kiln::get_tma_aligned_size(m, 4)};
  kiln::TensorView tsfb = view(sfb, kiln::DType::kFloat32, kiln::ceil_div(n, 128), k / 128);
  kiln::TensorView td = view(d, kiln::DType::kBFloat16, m, n);

  auto t0 = std::chrono::steady_clock::now();
  kiln::per_token_cast_to_fp8(tx, ta, tsfa);
  kiln::per_block_cast_to_fp8(tw, tb, tsfb);
  kiln::fp8_gemm_nt(ta, tsfa, tb, tsfb, td);
  KILN_CU_CHECK(cu.cuCtxSynchronize());
  const double first_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

  std::vector<uint8_t> ha(static_cast<size_t>(m * k)), hb(static_cast<size_t>(n * k));
  std::vector<float> hsfa(static_cast<size_t>(sfa_floats)), hsfb(static_cast<size_t>(sfb_floats));
  std::vector<uint16_t> hd(static_cast<size_t>(m * n));
  KILN_CU_CHECK(cu.cuMemcpyDtoH(ha.data(), a, ha.size()));
  KILN_CU_CHECK(cu.cuMemcpyDtoH(hb.data(), b, hb.size()));
  KILN_CU_CHECK(cu.cuMemcpyDtoH(hsfa.data(), sfa, hsfa.size() * 4));
  KILN_CU_CHECK(cu.cuMemcpyDtoH(hsfb.data(), sfb, hsfb.size() * 4));
  KILN_CU_CHECK(cu.cuMemcpyDtoH(hd.data(), d, hd.size() * 2));
  // Dequantised B once, then 16 sampled rows of A against all of it.
  std::vector<double> wq(static_cast<size_t>(n * k));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c)
      wq[static_cast<size_t>(r * k + c)] = from_e4m3(hb[static_cast<size_t>(r * k + c)]) *
                                           static_cast<double>(hsfb[static_cast<size_t>((r / 128) * (k / 128) + c / 128)]);
  double sxy = 0, sxx = 0, syy = 0;
  bool nan = false;
  for (int s = 0; s < 16; ++s) {
    const int64_t r = (s * 977 + 13) % m;
    std::vector<double> xq(static_cast<size_t>(k));
    for (int64_t c = 0; c < k; ++c)
      xq[static_cast<size_t>(c)] = from_e4m3(ha[static_cast<size_t>(r * k + c)]) *
                                   static_cast<double>(hsfa[static_cast<size_t>((c / 128) * tsfa.strides[1] + r)]);
    for (int64_t col = 0; col < n; ++col) {
      double ref = 0;
      for (int64_t c = 0; c < k; ++c) ref += xq[static_cast<size_t>(c)] * wq[static_cast<size_t>(col * k + c)];
      const double got = from_bf16(hd[static_cast<size_t>(r * n + col)]);
      nan |= std::isnan(got);
      sxy += got * ref;
      sxx += got * got;
      syy += ref * ref;
    }
  }
  const double diff = 1.0 - 2.0 * sxy / (sxx + syy);
  const bool ok = !nan && diff < 1e-5;

  const int iters = 20;
  t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) kiln::fp8_gemm_nt(ta, tsfa, tb, tsfb, td);
  KILN_CU_CHECK(cu.cuCtxSynchronize());
  const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / iters;
  std::printf("  fp8_gemm_nt %lldx%lldx%lld (casts + GEMM, first call %.2f ms): %.1f us/call back to back, %.0f "
              "TFLOPS; calc_diff vs float64 on 16 sampled rows %.2e (%s)\n",
              static_cast<long long>(m), static_cast<long long>(n), static_cast<long long>(k), first_ms, us,
              2.0 * m * n * k / us / 1e6, diff, ok ? "ok" : "WRONG");
  for (CUdeviceptr p : {x, w, a, b, sfa, sfb, d}) cu.cuMemFree(p);
  if (!ok) throw kiln::Error(kiln::ErrorKind::kInternal, "demo: the FP8 GEMM result is wrong");
}

}  // namespace

// Runs this program again as `--warm-pass`: a fresh process, so its hits come from the disk cache.
int run_warm_pass() {
  std::fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) throw kiln::Error(kiln::ErrorKind::kInternal, "demo: fork failed");
  if (pid == 0) {
    execl("/proc/self/exe", "kiln_demo", "--warm-pass", static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

int main(int argc, char** argv) {
  try {
    if (argc > 1 && std::string(argv[1]) == "--warm-pass") {
      std::vector<kiln::DeviceSummary> gpus = kiln::devices();
      auto [n, hits, ms] = compile_all(gpus.empty() ? "sm_90a" : gpus[0].arch,
                                       "Pass 2: a fresh process asks for the same kernels (warm disk cache)");
      if (hits != n) {
        std::fprintf(stderr, "kiln demo: pass 2 compiled %d kernel(s) again: the cache failed\n", n - hits);
        return 1;
      }
      return 0;
    }
    const kiln::Config& config = kiln::config();
    std::vector<kiln::DeviceSummary> gpus = kiln::devices();
    const std::string arch = gpus.empty() ? "sm_90a" : gpus[0].arch;
    std::printf("kiln %s demo\n", kiln::version());
    std::printf("  cache:   %s\n", config.cache_dir.c_str());
    std::printf("  backend: %s (DG_JIT_USE_NVRTC=1 selects NVRTC)\n", kiln::to_string(config.backend));
    std::printf("  target:  %s (%s)\n", arch.c_str(),
                gpus.empty() ? "no GPU here: compiling ahead of time" : gpus[0].name.c_str());

    auto [n1, h1, ms1] = compile_all(arch, "Pass 1: compile ahead of time (or find in the cache)");
    if (run_warm_pass() != 0) throw kiln::Error(kiln::ErrorKind::kInternal, "demo: the warm pass failed");

    if (!gpus.empty()) {
      run_on_gpu(0);
      run_gemm_on_gpu(0);
    } else {
      std::printf("\nNo GPU here: kernels were compiled for %s and cached; run `make demo` on an H100/H200 to "
                  "launch them.\n", arch.c_str());
    }

    kiln::CacheStats stats = kiln::cache_stats();
    std::printf("\nReport\n");
    std::printf("  kernels:        %d (pass 1: %d compiled in %.0f ms, %d already cached; pass 2, a fresh "
                "process: all %d from the disk cache)\n", n1, n1 - h1, ms1, h1, n1);
    std::printf("  cache:          %s (%s), %llu entries, %llu bytes\n", stats.directory.c_str(),
                stats.writable ? "writable" : "read-only", static_cast<unsigned long long>(stats.entries),
                static_cast<unsigned long long>(stats.bytes));
    std::printf("  cache counters: %llu hits, %llu misses, %llu compiles (%.1f s), %llu corrupt\n",
                static_cast<unsigned long long>(stats.hits), static_cast<unsigned long long>(stats.misses),
                static_cast<unsigned long long>(stats.compiles), stats.compile_seconds,
                static_cast<unsigned long long>(stats.corrupt));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln demo: error: %s\n", e.what());
    return 1;
  }
}
