// JIT benchmarks (issue 2, item 11). Figures, not assertions: recorded in bench/RESULTS.md.
//
//   cold compile per kernel, NVCC and NVRTC   fresh cache, the FP8 cast kernels at three K, one process each
//   warm disk, fresh process, first kernel   a child process from main() to "kernel ready" (loaded on a GPU,
//                                            fetched and verified from disk without one); CUDA context
//                                            creation is reported apart, as torch has done it already
//   in-memory hit                            the launch path's table lookup
//
// Runs without a GPU (the load step is then skipped and said so).
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "cuda/driver.hpp"
#include "compiler/internal.hpp"
#include "cuda/kernel.hpp"
#include "kiln/kernels/quantize_params.h"
#include "jit/jit_runtime.hpp"
#include "jit/kernel_table.hpp"
#include "kiln/kiln.hpp"
#include "ops/registry.hpp"
#include "util/sha256.hpp"

namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

kiln::codegen::KernelSpec cast_spec(int64_t k) {
  return kiln::ops::find_op("per_token_cast_to_fp8").kernels({{"m", 4096}, {"k", k}}, kiln::ops::TargetInfo{}).at(0);
}

fs::path fresh_dir(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("kiln-bench-" + name + "-" + std::to_string(getpid()));
  fs::remove_all(p);
  return p;
}

// The kernels timed cold: the FP8 cast at three K and, where registered, the FP8 GEMM at three (N, K).
std::vector<std::pair<std::string, kiln::ops::Problem>> bench_problems() {
  std::vector<std::pair<std::string, kiln::ops::Problem>> problems = {
      {"per_token_cast_to_fp8", {{"m", 4096}, {"k", 7168}}},
      {"per_token_cast_to_fp8", {{"m", 4096}, {"k", 2048}}},
      {"per_token_cast_to_fp8", {{"m", 4096}, {"k", 4096}}},
  };
  for (const auto& op : kiln::ops::all_ops())
    if (op.name == "fp8_gemm_nt")
      for (auto [n, k] : {std::pair{7168, 2048}, {4096, 7168}, {2112, 7168}})
        problems.push_back({op.name, {{"m", 4096}, {"n", n}, {"k", k}}});
  return problems;
}

void cold_compiles(kiln::Backend backend) {
  kiln::Config config = kiln::config();
  config.cache_dir = fresh_dir(std::string("cold-") + kiln::to_string(backend));
  config.backend = backend;
  if (backend == kiln::Backend::kNvcc && config.nvcc_path.empty()) {
    std::printf("cold %-5s: no nvcc found, skipped\n", kiln::to_string(backend));
    return;
  }
  kiln::jit::JitRuntime rt(config);
  kiln::jit::Target target{kiln::compiler::Arch::parse("sm_90a"), backend};
  std::vector<double> cast_times, gemm_times;
  for (const auto& [name, problem] : bench_problems()) {
    kiln::codegen::KernelSpec spec = kiln::ops::find_op(name).kernels(problem, kiln::ops::TargetInfo{}).at(0);
    auto t0 = Clock::now();
    kiln::jit::BuildResult r = rt.build(spec, target);
    double wall = ms_since(t0);
    (name == "fp8_gemm_nt" ? gemm_times : cast_times).push_back(r.compile_ms);
    std::printf("cold %-5s %-22s %-40s compile %8.1f ms (wall %8.1f ms, cubin %zu B)\n", kiln::to_string(backend),
                name.c_str(), spec.describe().substr(0, 40).c_str(), r.compile_ms, wall, r.binary->cubin.size());
  }
  std::vector<double> times = cast_times;
  if (!gemm_times.empty())
    std::printf("RESULT cold_compile_gemm_%s_ms median=%.1f max=%.1f\n", kiln::to_string(backend), median(gemm_times),
                *std::max_element(gemm_times.begin(), gemm_times.end()));
  std::printf("RESULT cold_compile_cast_%s_ms first=%.1f median=%.1f\n", kiln::to_string(backend), times.front(),
              median(times));
  fs::remove_all(config.cache_dir);
}

// NVRTC with and without automatic precompiled headers, compiling straight through the compiler (no cache),
// for every kernel the registry's FP8 ops need at one problem each: the first compile in a process and the
// median of the next ones.
void nvrtc_pch(bool use_pch) {
  kiln::Config config = kiln::config();
  kiln::compiler::detail::NvrtcSettings settings;
  settings.use_pch = use_pch;
  auto compiler = kiln::compiler::detail::make_nvrtc_compiler(config, fresh_dir(use_pch ? "pch" : "nopch"), settings);
  kiln::compiler::CompileOptions options;
  options.arch = kiln::compiler::Arch::parse("sm_90a");
  for (const auto& [name, problem] : bench_problems()) {
    kiln::codegen::KernelSpec spec = kiln::ops::find_op(name).kernels(problem, kiln::ops::TargetInfo{}).at(0);
    kiln::compiler::CompileInput input{kiln::codegen::render_source(spec), spec.kernel_name(), spec.op};
    kiln::compiler::CompiledKernel out = compiler->compile(input, options);
    std::printf("cold nvrtc %-7s %-22s %-40s %8.1f ms\n", use_pch ? "+pch" : "no-pch", name.c_str(),
                spec.describe().substr(0, 40).c_str(), out.compile_ms);
  }
}

// In a fresh process: how long from main() to the first kernel being ready, given a warm disk cache.
int warm_child() {
  auto t0 = Clock::now();
  const bool gpu = kiln::cuda::device_count() > 0;
  double context_ms = 0;
  if (gpu) {
    kiln::cuda::current_device();  // driver init + primary context: torch would have paid this already
    context_ms = ms_since(t0);
  }
  auto t1 = Clock::now();
  kiln::codegen::KernelSpec spec = cast_spec(7168);
  if (gpu) {
    kiln::jit::runtime().kernel(spec, 0, nullptr);
  } else {
    kiln::jit::runtime().build(spec, {kiln::jit::runtime().default_arch(), kiln::config().backend});
  }
  std::printf("%.4f %.4f %d\n", ms_since(t1), context_ms, gpu ? 1 : 0);
  return 0;
}

// The same steps one by one, in a fresh process, to see where a warm start's time goes.
int warm_breakdown_child() {
  const bool gpu = kiln::cuda::device_count() > 0;
  if (gpu) kiln::cuda::current_device();
  auto t = Clock::now();
  auto step = [&](const char* what) {
    std::printf("  %-44s %8.3f ms\n", what, ms_since(t));
    t = Clock::now();
  };
  const kiln::Config& config = kiln::config();
  step("configuration (environment, nvcc lookup)");
  kiln::codegen::KernelSpec spec = cast_spec(7168);
  step("op registry -> spec");
  kiln::jit::JitRuntime& rt = kiln::jit::runtime();
  step("runtime (disk cache opened)");
  kiln::compiler::Arch arch = gpu ? rt.arch_for_device(0) : rt.default_arch();
  step("target arch");
  kiln::util::sha256_hex("warm-up");
  step("SHA-256 first use (libcrypto start-up)");
  std::string key = rt.key_of(spec, {arch, config.backend});
  step("key (render, headers digest, compiler identity)");
  auto entry = rt.disk().load(key, false);
  step("disk entry read + verified");
  if (gpu && entry) {
    auto loaded = kiln::cuda::LoadedKernel::load(entry->cubin, entry->meta.kernel_name, 0, config.launch_api, false);
    step("module load (cuLibraryLoadData + kernel lookup)");
  }
  return 0;
}

void warm_start(const char* self) {
  fs::path dir = fresh_dir("warm");
  setenv("DG_JIT_CACHE_DIR", dir.c_str(), 1);
  {
    kiln::Config config = kiln::config();
    config.cache_dir = dir;
    kiln::jit::JitRuntime rt(config);
    rt.build(cast_spec(7168), {rt.default_arch(), config.backend});
  }
  std::vector<double> ready, context;
  bool gpu = false;
  for (int i = 0; i < 9; ++i) {
    int fds[2];
    if (pipe(fds) != 0) return;
    pid_t pid = fork();
    if (pid == 0) {
      dup2(fds[1], 1);
      close(fds[0]);
      execl(self, self, "--warm-child", static_cast<char*>(nullptr));
      _exit(127);
    }
    close(fds[1]);
    char buf[256] = {};
    ssize_t n = read(fds[0], buf, sizeof buf - 1);
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    double r = 0, c = 0;
    int g = 0;
    if (n > 0 && std::sscanf(buf, "%lf %lf %d", &r, &c, &g) == 3) {
      ready.push_back(r);
      context.push_back(c);
      gpu = g;
    }
  }
  std::printf("warm disk, fresh process, first kernel %s: median %.3f ms over %zu processes "
              "(CUDA context creation before it, not counted: %.1f ms)\n",
              gpu ? "loaded" : "fetched+verified (no GPU: not loaded)", median(ready), ready.size(), median(context));
  std::printf("RESULT warm_first_kernel_ms=%.3f gpu=%d\n", median(ready), gpu ? 1 : 0);
  std::printf("where a warm start's time goes (one fresh process, steps taken one by one):\n");
  std::fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    execl(self, self, "--warm-breakdown", static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  fs::remove_all(dir);
}

void table_hit() {
  using Table = kiln::jit::KernelTable<int, 8>;
  Table table;
  std::vector<int> values(32);
  for (int i = 0; i < 32; ++i) table.insert(Table::Key{{1, 0, 7168 + i, 0, 0, 0, 0, 0}}, &values[i]);
  const int iters = 5'000'000;
  std::vector<double> runs;
  int64_t sum = 0;
  for (int rep = 0; rep < 5; ++rep) {
    auto t0 = Clock::now();
    for (int i = 0; i < iters; ++i) sum += *table.find(Table::Key{{1, 0, 7168 + (i & 31), 0, 0, 0, 0, 0}});
    runs.push_back(ms_since(t0) * 1e6 / iters);
  }
  std::printf("in-memory hit (KernelTable::find): %.1f ns (median of 5 x %d; checksum %lld)\n", median(runs), iters,
              static_cast<long long>(sum));
  std::printf("RESULT memory_hit_ns=%.1f\n", median(runs));
}

// Host time per call of the whole operation (validation, table lookup, params, launch) against
// LoadedKernel::launch of the same kernel with the same parameters (whose own cost over a bare
// cuLaunchKernelEx is measured by tests/gpu/launch_overhead_bench). m = 1: the launch is all there is.
void op_overhead() {
  if (kiln::cuda::device_count() == 0) {
    std::printf("op host overhead: no GPU, skipped\n");
    return;
  }
  const auto& cu = kiln::cuda::DriverApi::get();
  kiln::cuda::current_device();
  const int64_t m = 1, k = 7168;
  CUdeviceptr x = 0, out = 0, scales = 0;
  KILN_CU_CHECK(cu.cuMemAlloc(&x, m * k * 2));
  KILN_CU_CHECK(cu.cuMemAlloc(&out, m * k));
  KILN_CU_CHECK(cu.cuMemAlloc(&scales, kiln::per_token_scales_storage(m, k) * 4));
  KILN_CU_CHECK(cu.cuMemsetD8(x, 0x3c, m * k * 2));
  auto tx = kiln::TensorView::contiguous(reinterpret_cast<void*>(x), kiln::DType::kBFloat16, {m, k});
  auto tout = kiln::TensorView::contiguous(reinterpret_cast<void*>(out), kiln::DType::kFloat8E4M3, {m, k});
  auto tsc = kiln::TensorView::contiguous(reinterpret_cast<void*>(scales), kiln::DType::kFloat32, {m, k / 128});
  tsc.strides = {1, kiln::get_tma_aligned_size(m, 4)};
  kiln::per_token_cast_to_fp8(tx, tout, tsc);  // warm: compiled/loaded
  const kiln::cuda::LoadedKernel& kernel = kiln::jit::runtime().kernel(cast_spec(k), 0, nullptr);
  kiln::PerTokenCastParams params{reinterpret_cast<void*>(x), reinterpret_cast<void*>(out),
                                  reinterpret_cast<float*>(scales), 1, static_cast<kiln::u64>(k),
                                  static_cast<kiln::u64>(kiln::get_tma_aligned_size(m, 4))};
  kiln::cuda::LaunchConfig config;
  config.block[0] = 256;
  KILN_CU_CHECK(cu.cuCtxSynchronize());

  auto per_call_ns = [&](auto&& call) {
    std::vector<double> batches;
    for (int b = 0; b < 60; ++b) {
      auto t0 = Clock::now();
      for (int i = 0; i < 200; ++i) call();
      batches.push_back(ms_since(t0) * 1e6 / 200);
      KILN_CU_CHECK(cu.cuCtxSynchronize());  // drain, so the launch queue never fills and blocks
    }
    return median(batches);
  };
  double launch_ns = per_call_ns([&] { kernel.launch(config, &params); });
  double op_ns = per_call_ns([&] { kiln::per_token_cast_to_fp8(tx, tout, tsc); });
  double launch_ns2 = per_call_ns([&] { kernel.launch(config, &params); });
  std::printf("host per call, m=1 k=7168: per_token_cast_to_fp8 %.0f ns, LoadedKernel::launch %.0f ns "
              "(again %.0f ns): the operation adds %.0f ns\n", op_ns, launch_ns, launch_ns2,
              op_ns - std::min(launch_ns, launch_ns2));
  std::printf("RESULT op_overhead_ns=%.0f\n", op_ns - std::min(launch_ns, launch_ns2));
  cu.cuMemFree(x);
  cu.cuMemFree(out);
  cu.cuMemFree(scales);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc > 1 && std::string(argv[1]) == "--warm-child") return warm_child();
    if (argc > 1 && std::string(argv[1]) == "--warm-breakdown") return warm_breakdown_child();
    nvrtc_pch(false);
    nvrtc_pch(true);
    cold_compiles(kiln::Backend::kNvrtc);
    cold_compiles(kiln::Backend::kNvcc);
    warm_start("/proc/self/exe");
    table_hit();
    op_overhead();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "jit_bench: %s\n", e.what());
    return 1;
  }
}
