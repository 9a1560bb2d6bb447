// Host cost per call of LoadedKernel::launch against a bare launch of the same kernel (cuLaunchKernelEx /
// cudaLaunchKernelExC with a configuration built once, outside the loop). Launches are timed in batches
// small enough never to fill the GPU's launch queue (the stream is drained between batches, untimed), so
// the figures are host time, not kernel throughput. Bare and kiln batches alternate; each figure is the
// median over batches (100k calls per variant in all), in ns per call.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

#include "compiler/compiler.hpp"
#include "cuda/driver.hpp"
#include "cuda/kernel.hpp"
#include "cuda/runtime.hpp"
#include "kiln/config.hpp"
#include "kiln/error.hpp"

namespace {

using kiln::cuda::DriverApi;
using kiln::cuda::LaunchConfig;
using kiln::cuda::LoadedKernel;

constexpr const char* kKernelName = "kiln_empty";
constexpr const char* kKernelSource = R"(
struct EmptyParams { float* out; unsigned flag; };
extern "C" __global__ void kiln_empty(const __grid_constant__ EmptyParams p) {
  if (p.flag == 12345u) *p.out = 1.0f;
}
)";
struct EmptyParams {
  float* out;
  unsigned flag;
};

constexpr int kBatch = 200;       // launches per timed batch: far below the launch queue's depth
constexpr int kCalls = 100000;    // per variant
constexpr int kBatches = kCalls / kBatch;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Result {
  double bare_ns;
  double kiln_ns;
};

// Times `bare` and `kiln` (each launches once) in alternating batches; `drain` waits for the GPU.
Result measure(const std::function<void()>& bare, const std::function<void()>& kiln_launch,
               const std::function<void()>& drain) {
  for (int i = 0; i < 1000; ++i) {  // warm up both paths (first-launch attribute raises, caches)
    bare();
    kiln_launch();
    if (i % kBatch == 0) drain();
  }
  drain();
  std::vector<double> bare_ns, kiln_ns;
  for (int b = 0; b < kBatches; ++b) {
    for (int which = 0; which < 2; ++which) {
      const auto& f = which == 0 ? bare : kiln_launch;
      auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < kBatch; ++i) f();
      auto t1 = std::chrono::steady_clock::now();
      drain();
      (which == 0 ? bare_ns : kiln_ns).push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / kBatch);
    }
  }
  return {median(bare_ns), median(kiln_ns)};
}

void report(const char* name, const Result& r) {
  std::printf("%-58s bare %7.1f ns/call   kiln %7.1f ns/call   difference %+7.1f ns\n", name, r.bare_ns, r.kiln_ns,
              r.kiln_ns - r.bare_ns);
  std::fflush(stdout);
}

}  // namespace

int main() {
  try {
    if (kiln::cuda::device_count() == 0) {
      DriverApi::get();  // throws the reason
      std::fprintf(stderr, "no CUDA device\n");
      return 1;
    }
    const DriverApi& api = DriverApi::get();
    const int device = kiln::cuda::current_device();
    kiln::cuda::DeviceInfo info = kiln::cuda::device_info(device);
    std::printf("launch overhead on %s (driver %s): %d calls per variant, batches of %d, median ns per call\n",
                info.name.c_str(), kiln::cuda::driver_version().c_str(), kCalls, kBatch);

    char state_template[] = "/tmp/kiln-launch-bench-XXXXXX";
    const char* state_dir = mkdtemp(state_template);
    kiln::Config config = kiln::Config::from_variables({});
    kiln::compiler::CompileOptions options;
    options.arch = kiln::compiler::Arch::parse("sm_" + std::to_string(info.cc_major) +
                                               std::to_string(info.cc_minor) + (info.cc_major >= 9 ? "a" : ""));
    kiln::compiler::CompiledKernel compiled;
    try {
      compiled = kiln::compiler::make_compiler(kiln::Backend::kNvrtc, config, state_dir ? state_dir : "")
                     ->compile({kKernelSource, kKernelName, "empty kernel"}, options);
    } catch (const kiln::Error& e) {
      std::printf("NVRTC compile failed (%s); using NVCC\n", e.what());
      compiled = kiln::compiler::make_compiler(kiln::Backend::kNvcc, config, state_dir ? state_dir : "")
                     ->compile({kKernelSource, kKernelName, "empty kernel"}, options);
    }

    // The bare kernel: the same cubin, loaded straight through the driver.
    CUlibrary library = nullptr;
    KILN_CU_CHECK(api.cuLibraryLoadData(&library, compiled.cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
    CUkernel bare_kernel = nullptr;
    KILN_CU_CHECK(api.cuLibraryGetKernel(&bare_kernel, library, compiled.kernel_name.c_str()));
    auto kernel = LoadedKernel::load(compiled.cubin, compiled.kernel_name, device, kiln::LaunchApi::kDriver, false);

    CUstream stream = nullptr;
    KILN_CU_CHECK(api.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    CUdeviceptr scratch = 0;
    KILN_CU_CHECK(api.cuMemAlloc(&scratch, 256));
    EmptyParams params{reinterpret_cast<float*>(scratch), 0};
    void* args[1] = {&params};
    auto drain_stream = [&] { KILN_CU_CHECK(api.cuStreamSynchronize(stream)); };
    auto drain_context = [&] { KILN_CU_CHECK(api.cuCtxSynchronize()); };

    auto bare_driver = [&](CUstream s, CUlaunchAttribute* attrs, unsigned n, unsigned grid, unsigned smem) {
      CUlaunchConfig c{};
      c.gridDimX = grid;
      c.gridDimY = c.gridDimZ = 1;
      c.blockDimX = 128;
      c.blockDimY = c.blockDimZ = 1;
      c.sharedMemBytes = smem;
      c.hStream = s;
      c.attrs = attrs;
      c.numAttrs = n;
      return c;
    };

    {  // 1. Plain launch on a stream.
      CUlaunchConfig c = bare_driver(stream, nullptr, 0, 1, 0);
      LaunchConfig k;
      k.block[0] = 128;
      k.stream = stream;
      report("driver API, stream, no attributes",
             measure([&] { KILN_CU_CHECK(api.cuLaunchKernelEx(&c, reinterpret_cast<CUfunction>(bare_kernel), args, nullptr)); },
                     [&] { kernel->launch(k, &params); }, drain_stream));
    }
    {  // 2. Cluster 2 + PDL + 100 KB of dynamic shared memory (attribute raised once, outside the timing).
      CUlaunchAttribute attrs[2] = {};
      attrs[0].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
      attrs[0].value.clusterDim.x = 2;
      attrs[0].value.clusterDim.y = attrs[0].value.clusterDim.z = 1;
      attrs[1].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
      attrs[1].value.programmaticStreamSerializationAllowed = 1;
      KILN_CU_CHECK(api.cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 100 * 1024, bare_kernel,
                                             static_cast<CUdevice>(device)));
      CUlaunchConfig c = bare_driver(stream, attrs, 2, 2, 100 * 1024);
      LaunchConfig k;
      k.grid[0] = 2;
      k.block[0] = 128;
      k.cluster[0] = 2;
      k.pdl = true;
      k.shared_bytes = 100 * 1024;
      k.stream = stream;
      report("driver API, stream, cluster 2 + PDL + 100 KB smem",
             measure([&] { KILN_CU_CHECK(api.cuLaunchKernelEx(&c, reinterpret_cast<CUfunction>(bare_kernel), args, nullptr)); },
                     [&] { kernel->launch(k, &params); }, drain_stream));
    }
    {  // 3. The legacy default stream (current-context check instead of the stream's).
      CUlaunchConfig c = bare_driver(nullptr, nullptr, 0, 1, 0);
      LaunchConfig k;
      k.block[0] = 128;
      report("driver API, default stream, no attributes",
             measure([&] { KILN_CU_CHECK(api.cuLaunchKernelEx(&c, reinterpret_cast<CUfunction>(bare_kernel), args, nullptr)); },
                     [&] { kernel->launch(k, &params); }, drain_context));
    }
    // 4. Runtime API.
    if (kiln::cuda::RuntimeApi::available()) {
      const auto& rt = kiln::cuda::RuntimeApi::get();
      auto rt_kernel = LoadedKernel::load(compiled.cubin, compiled.kernel_name, device, kiln::LaunchApi::kRuntime, false);
      cudaLibrary_t rt_library = nullptr;
      kiln::cuda::check_runtime(rt.cudaLibraryLoadData(&rt_library, compiled.cubin.data(), nullptr, nullptr, 0,
                                                       nullptr, nullptr, 0),
                                "cudaLibraryLoadData");
      cudaKernel_t rt_bare = nullptr;
      kiln::cuda::check_runtime(rt.cudaLibraryGetKernel(&rt_bare, rt_library, compiled.kernel_name.c_str()),
                                "cudaLibraryGetKernel");
      cudaLaunchConfig_t c{};
      c.gridDim = dim3(1, 1, 1);
      c.blockDim = dim3(128, 1, 1);
      c.stream = stream;
      LaunchConfig k;
      k.block[0] = 128;
      k.stream = stream;
      report("runtime API, stream, no attributes (vs bare cudaLaunchKernelExC)",
             measure([&] {
                       kiln::cuda::check_runtime(rt.cudaLaunchKernelExC(&c, reinterpret_cast<const void*>(rt_bare), args),
                                                 "cudaLaunchKernelExC");
                     },
                     [&] { rt_kernel->launch(k, &params); }, drain_stream));
      c.stream = nullptr;
      k.stream = nullptr;
      report("runtime API, default stream, no attributes",
             measure([&] {
                       kiln::cuda::check_runtime(rt.cudaLaunchKernelExC(&c, reinterpret_cast<const void*>(rt_bare), args),
                                                 "cudaLaunchKernelExC");
                     },
                     [&] { rt_kernel->launch(k, &params); }, drain_context));
    } else {
      std::printf("runtime API: libcudart not found, skipped\n");
    }
    (void)api.cuMemFree(scratch);
    (void)api.cuStreamDestroy(stream);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "launch_overhead_bench failed: %s\n", e.what());
    return 1;
  }
}
