// Loading and launching on a real GPU: both launch APIs (driver, runtime) with cubins from both compilers
// (NVCC, NVRTC), dynamic shared memory above 48 KB, clusters (2 and, where the GPU allows, 16 CTAs),
// programmatic dependent launch, launches captured into a CUDA graph, and, with two or more GPUs, launches
// from one thread while another device's context is current. Results are checked against a host reference,
// and NVCC and NVRTC results must be bit-identical.
//
// Prints one "PASS <check>" / "FAIL <check>: <why>" line per check (and "NOTE" lines that count for
// neither); exits 0 when nothing failed.
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "compiler/compiler.hpp"
#include "cuda/driver.hpp"
#include "cuda/kernel.hpp"
#include "cuda/runtime.hpp"
#include "kiln/config.hpp"
#include "kiln/error.hpp"

namespace {

using kiln::Backend;
using kiln::LaunchApi;
using kiln::cuda::DriverApi;
using kiln::cuda::LaunchConfig;
using kiln::cuda::LoadedKernel;

// The kernel under test. Self-contained (no includes) so NVRTC needs nothing. Every block fills the whole
// dynamic shared memory, so a launch that did not really get it faults or reads garbage; it records its
// cluster rank and size; as a PDL consumer it waits on the previous grid before reading.
constexpr const char* kKernelName = "kiln_launch_test";
constexpr const char* kKernelSource = R"(
typedef unsigned int u32;
typedef unsigned long long u64;
struct LaunchTestParams {
  const float* in;
  float* out;
  u32* cluster_info;
  u32 n_per_block;
  u32 smem_floats;
  u32 wait_prior;
  float scale;
  float bias;
};
extern "C" __global__ void __launch_bounds__(128, 1) kiln_launch_test(const __grid_constant__ LaunchTestParams p) {
  extern __shared__ float smem[];
  if (p.wait_prior) asm volatile("griddepcontrol.wait;" ::: "memory");
  const u32 tid = threadIdx.x;
  for (u32 i = tid; i < p.smem_floats; i += blockDim.x) smem[i] = (float)(i % 1024u);
  __syncthreads();
  u32 rank, size;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(size));
  if (size > 1) asm volatile("barrier.cluster.arrive.aligned;\n\tbarrier.cluster.wait.aligned;" ::: "memory");
  const u64 base = (u64)blockIdx.x * p.n_per_block;
  for (u32 j = tid; j < p.n_per_block; j += blockDim.x)
    p.out[base + j] = p.in[base + j] * p.scale + smem[p.smem_floats - 1 - j] + p.bias;
  if (tid == 0) p.cluster_info[blockIdx.x] = (rank << 16) | size;
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}
)";

struct LaunchTestParams {  // the host mirror
  const float* in;
  float* out;
  uint32_t* cluster_info;
  uint32_t n_per_block;
  uint32_t smem_floats;
  uint32_t wait_prior;
  float scale;
  float bias;
};

constexpr uint32_t kBlocks = 64;
constexpr uint32_t kPerBlock = 256;
constexpr uint32_t kElements = kBlocks * kPerBlock;
constexpr uint32_t kBigShared = 100 * 1024;  // above the 48 KB default: needs the attribute

int g_failures = 0;
int g_passes = 0;

void pass(const std::string& name) {
  ++g_passes;
  std::printf("PASS %s\n", name.c_str());
  std::fflush(stdout);
}
void fail(const std::string& name, const std::string& why) {
  ++g_failures;
  std::printf("FAIL %s: %s\n", name.c_str(), why.c_str());
  std::fflush(stdout);
}
void note(const std::string& text) {
  std::printf("NOTE %s\n", text.c_str());
  std::fflush(stdout);
}

// Runs `body`; it returns "" on success or why it failed. Exceptions are failures with their message.
void check(const std::string& name, const std::function<std::string()>& body) {
  try {
    std::string why = body();
    if (why.empty()) {
      pass(name);
    } else {
      fail(name, why);
    }
  } catch (const std::exception& e) {
    fail(name, e.what());
  }
}

const DriverApi& drv() { return DriverApi::get(); }

// Device memory in the current context.
template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t count) : bytes_(count * sizeof(T)) {
    KILN_CU_CHECK(drv().cuMemAlloc(&ptr_, bytes_));
  }
  ~DeviceBuffer() { (void)drv().cuMemFree(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  T* get() const { return reinterpret_cast<T*>(ptr_); }
  void upload(const std::vector<T>& host) { KILN_CU_CHECK(drv().cuMemcpyHtoD(ptr_, host.data(), bytes_)); }
  std::vector<T> download() const {
    std::vector<T> host(bytes_ / sizeof(T));
    KILN_CU_CHECK(drv().cuMemcpyDtoH(host.data(), ptr_, bytes_));
    return host;
  }
  void poison() { KILN_CU_CHECK(drv().cuMemsetD8(ptr_, 0xFF, bytes_)); }  // NaN floats, 0xFFFFFFFF ints

 private:
  CUdeviceptr ptr_ = 0;
  size_t bytes_;
};

// Buffers of one device (allocated in its primary context).
struct Buffers {
  DeviceBuffer<float> in{kElements};
  DeviceBuffer<float> mid{kElements};
  DeviceBuffer<float> out{kElements};
  DeviceBuffer<uint32_t> info{kBlocks};
  DeviceBuffer<uint32_t> mid_info{kBlocks};
  std::vector<float> host_in;

  explicit Buffers(uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    host_in.resize(kElements);
    for (auto& x : host_in) x = dist(rng);
    in.upload(host_in);
    KILN_CU_CHECK(drv().cuCtxSynchronize());
  }
  // The memsets run on the legacy stream, which a non-blocking stream does not wait for: finish them.
  void poison() {
    mid.poison();
    out.poison();
    info.poison();
    mid_info.poison();
    KILN_CU_CHECK(drv().cuCtxSynchronize());
  }
};

float smem_value(uint32_t smem_floats, uint32_t j) { return static_cast<float>((smem_floats - 1 - j) % 1024u); }

// One launch's reference, applied to `in`.
std::vector<float> reference(const std::vector<float>& in, uint32_t blocks, uint32_t smem_floats, float scale,
                             float bias) {
  std::vector<float> out(in.size(), 0.0f);
  for (uint32_t b = 0; b < blocks; ++b) {
    for (uint32_t j = 0; j < kPerBlock; ++j) {
      const size_t i = size_t{b} * kPerBlock + j;
      out[i] = in[i] * scale + smem_value(smem_floats, j) + bias;  // scale 2: exact, so FMA cannot differ
    }
  }
  return out;
}

std::string compare(const std::vector<float>& got, const std::vector<float>& want, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0) {
      char buf[160];
      std::snprintf(buf, sizeof(buf), "element %zu is %.9g, expected %.9g", i, static_cast<double>(got[i]),
                    static_cast<double>(want[i]));
      return buf;
    }
  }
  return {};
}

std::string check_cluster_info(const std::vector<uint32_t>& info, uint32_t blocks, uint32_t cluster) {
  for (uint32_t b = 0; b < blocks; ++b) {
    const uint32_t want = ((b % cluster) << 16) | cluster;
    if (info[b] != want) {
      char buf[160];
      std::snprintf(buf, sizeof(buf), "block %u reports cluster rank %u of %u, expected rank %u of %u", b,
                    info[b] >> 16, info[b] & 0xFFFF, want >> 16, cluster);
      return buf;
    }
  }
  return {};
}

LaunchConfig make_config(uint32_t blocks, uint32_t shared, uint32_t cluster, bool pdl, CUstream stream) {
  LaunchConfig c;
  c.grid[0] = blocks;
  c.block[0] = 128;
  c.cluster[0] = cluster;
  c.shared_bytes = shared;
  c.pdl = pdl;
  c.stream = stream;
  return c;
}

LaunchTestParams make_params(const float* in, float* out, uint32_t* info, uint32_t shared, bool wait, float bias) {
  return LaunchTestParams{in, out, info, kPerBlock, shared / 4, wait ? 1u : 0u, 2.0f, bias};
}

void synchronize(CUstream stream) {
  if (stream != nullptr) {
    KILN_CU_CHECK(drv().cuStreamSynchronize(stream));
  } else {
    KILN_CU_CHECK(drv().cuCtxSynchronize());
  }
}

// The outputs each (compiler, API) produced, per case, for the NVCC == NVRTC comparison.
std::map<std::string, std::vector<float>> g_results;

// The single-GPU checks for one loaded kernel.
void run_cases(const LoadedKernel& kernel, const std::string& tag, Buffers& buf, CUstream stream) {
  // One launch with 100 KB of dynamic shared memory (above the 48 KB default) in clusters of `cluster` CTAs:
  // the output and each CTA's cluster placement checked; the output kept under `key` for the comparison.
  const auto check_big_shared = [&](const std::string& name, uint32_t cluster, const std::string& key) {
    check(name, [&] {
      buf.poison();
      auto p = make_params(buf.in.get(), buf.out.get(), buf.info.get(), kBigShared, false, 1.0f);
      kernel.launch(make_config(kBlocks, kBigShared, cluster, false, stream), &p);
      synchronize(stream);
      auto got = buf.out.download();
      g_results[key] = got;
      std::string why = compare(got, reference(buf.host_in, kBlocks, kBigShared / 4, 2.0f, 1.0f), kElements);
      return why.empty() ? check_cluster_info(buf.info.download(), kBlocks, cluster) : why;
    });
  };
  check_big_shared(tag + " smem=100KB", 1, tag + " smem");  // no cluster
  check_big_shared(tag + " cluster=2x1x1 smem=100KB", 2, tag + " cluster");

  // Programmatic dependent launch: the second grid may start early and waits (griddepcontrol.wait) for the
  // first one's results.
  check(tag + " PDL chain (cluster 2, smem 100KB)", [&] {
    buf.poison();
    auto first = make_params(buf.in.get(), buf.mid.get(), buf.mid_info.get(), kBigShared, false, 1.0f);
    auto second = make_params(buf.mid.get(), buf.out.get(), buf.info.get(), kBigShared, true, 3.0f);
    kernel.launch(make_config(kBlocks, kBigShared, 2, false, stream), &first);
    kernel.launch(make_config(kBlocks, kBigShared, 2, true, stream), &second);
    synchronize(stream);
    auto got = buf.out.download();
    g_results[tag + " pdl"] = got;
    auto mid = reference(buf.host_in, kBlocks, kBigShared / 4, 2.0f, 1.0f);
    return compare(got, reference(mid, kBlocks, kBigShared / 4, 2.0f, 3.0f), kElements);
  });

  // A 16-CTA cluster needs CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED. Whether the GPU can place
  // one depends on the part; a launch the hardware refuses is a note, a wrong result a failure.
  {
    const std::string name = tag + " cluster=16x1x1 (non-portable)";
    try {
      buf.poison();
      const uint32_t shared = 4096;
      auto p = make_params(buf.in.get(), buf.out.get(), buf.info.get(), shared, false, 0.5f);
      kernel.launch(make_config(32, shared, 16, false, stream), &p);
      synchronize(stream);
      std::string why = compare(buf.out.download(), reference(buf.host_in, 32, shared / 4, 2.0f, 0.5f),
                                size_t{32} * kPerBlock);
      if (why.empty()) why = check_cluster_info(buf.info.download(), 32, 16);
      if (why.empty()) {
        pass(name);
      } else {
        fail(name, why);
      }
    } catch (const kiln::Error& e) {
      note(name + " not run: " + e.what());
    }
  }
}

// Begins a capture on a fresh stream, launches already-loaded kernels into it (their first launch, so the
// shared-memory attribute is raised during the capture), ends it, replays the graph twice and verifies.
void run_capture(const LoadedKernel& fresh, const std::string& tag, Buffers& buf) {
  check(tag + " graph capture (smem 100KB, cluster 2, PDL) and replay", [&]() -> std::string {
    CUstream stream = nullptr;
    KILN_CU_CHECK(drv().cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    std::string why;
    CUgraph graph = nullptr;
    CUgraphExec exec = nullptr;
    try {
      if (kiln::cuda::stream_is_capturing(stream)) why = "a fresh stream reports capturing";
      KILN_CU_CHECK(drv().cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
      if (why.empty() && !kiln::cuda::stream_is_capturing(stream)) why = "stream_is_capturing is false during capture";
      auto first = make_params(buf.in.get(), buf.mid.get(), buf.mid_info.get(), kBigShared, false, 1.0f);
      auto second = make_params(buf.mid.get(), buf.out.get(), buf.info.get(), kBigShared, true, 3.0f);
      fresh.launch(make_config(kBlocks, kBigShared, 2, false, stream), &first);
      fresh.launch(make_config(kBlocks, kBigShared, 2, true, stream), &second);
      KILN_CU_CHECK(drv().cuStreamEndCapture(stream, &graph));
      if (why.empty() && kiln::cuda::stream_is_capturing(stream)) why = "stream_is_capturing is true after capture";
      KILN_CU_CHECK(drv().cuGraphInstantiateWithFlags(&exec, graph, 0));
      auto mid = reference(buf.host_in, kBlocks, kBigShared / 4, 2.0f, 1.0f);
      auto want = reference(mid, kBlocks, kBigShared / 4, 2.0f, 3.0f);
      for (int replay = 0; replay < 2 && why.empty(); ++replay) {
        buf.poison();
        KILN_CU_CHECK(drv().cuGraphLaunch(exec, stream));
        KILN_CU_CHECK(drv().cuStreamSynchronize(stream));
        why = compare(buf.out.download(), want, kElements);
        if (why.empty()) why = check_cluster_info(buf.info.download(), kBlocks, 2);
        if (!why.empty()) why = "replay " + std::to_string(replay) + ": " + why;
      }
    } catch (...) {
      CUgraph ignored = nullptr;
      (void)drv().cuStreamEndCapture(stream, &ignored);
      if (ignored) (void)drv().cuGraphDestroy(ignored);
      if (exec) (void)drv().cuGraphExecDestroy(exec);
      if (graph) (void)drv().cuGraphDestroy(graph);
      (void)drv().cuStreamDestroy(stream);
      throw;
    }
    if (exec) (void)drv().cuGraphExecDestroy(exec);
    if (graph) (void)drv().cuGraphDestroy(graph);
    (void)drv().cuStreamDestroy(stream);
    return why;
  });
}

// A kernel served from the disk cache is loaded, not only launched, while the caller's stream captures —
// in global mode (PyTorch's default), where potentially unsafe calls from any thread invalidate the
// capture. The load must leave the capture intact, and the kernel must launch into it.
void run_load_during_capture(const std::vector<uint8_t>& cubin, const std::string& kernel_name, LaunchApi api,
                             Buffers& buf) {
  check(std::string(kiln::to_string(api)) + " load during a global-mode capture, launch into it, replay",
        [&]() -> std::string {
          CUstream stream = nullptr;
          KILN_CU_CHECK(drv().cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
          KILN_CU_CHECK(drv().cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
          std::string why;
          std::unique_ptr<LoadedKernel> kernel;
          try {
            kernel = LoadedKernel::load(cubin, kernel_name, 0, api, false);
            auto p = make_params(buf.in.get(), buf.out.get(), buf.info.get(), kBigShared, false, 1.0f);
            kernel->launch(make_config(kBlocks, kBigShared, 2, true, stream), &p);
          } catch (const std::exception& e) {
            why = e.what();
          }
          CUgraph graph = nullptr;
          CUresult end = drv().cuStreamEndCapture(stream, &graph);
          if (end != CUDA_SUCCESS) {
            why += (why.empty() ? "" : "; ") + kiln::cuda::describe_failure(end, "cuStreamEndCapture");
          } else if (why.empty()) {
            CUgraphExec exec = nullptr;
            try {
              KILN_CU_CHECK(drv().cuGraphInstantiateWithFlags(&exec, graph, 0));
              buf.poison();
              KILN_CU_CHECK(drv().cuGraphLaunch(exec, stream));
              KILN_CU_CHECK(drv().cuStreamSynchronize(stream));
              why = compare(buf.out.download(), reference(buf.host_in, kBlocks, kBigShared / 4, 2.0f, 1.0f), kElements);
              if (why.empty()) why = check_cluster_info(buf.info.download(), kBlocks, 2);
            } catch (const std::exception& e) {
              why = e.what();
            }
            if (exec) (void)drv().cuGraphExecDestroy(exec);
          }
          if (graph) (void)drv().cuGraphDestroy(graph);
          (void)drv().cuStreamDestroy(stream);
          return why;
        });
}

// With two or more GPUs: per device, load and launch from this one thread while the other device's context
// (or runtime device) is current; the result must land on the kernel's device and the caller's context must
// be unchanged afterwards. A stream of the other device must be refused.
void run_multi_gpu(const std::vector<uint8_t>& cubin, const std::string& kernel_name, LaunchApi api) {
  const int n = std::min(kiln::cuda::device_count(), 4);
  const std::string tag = std::string(kiln::to_string(api)) + " multi-GPU";
  std::vector<std::unique_ptr<Buffers>> buffers(static_cast<size_t>(n));
  std::vector<std::unique_ptr<LoadedKernel>> kernels(static_cast<size_t>(n));
  for (int d = 0; d < n; ++d) {
    KILN_CU_CHECK(drv().cuCtxSetCurrent(kiln::cuda::primary_context(d)));
    buffers[static_cast<size_t>(d)] = std::make_unique<Buffers>(1000u + static_cast<uint32_t>(d));
    buffers[static_cast<size_t>(d)]->poison();
    KILN_CU_CHECK(drv().cuCtxSynchronize());
  }
  KILN_CU_CHECK(drv().cuCtxSetCurrent(kiln::cuda::primary_context(0)));
  for (int d = 0; d < n; ++d) kernels[static_cast<size_t>(d)] = LoadedKernel::load(cubin, kernel_name, d, api, true);

  auto make_current = [&](int d) {
    if (api == LaunchApi::kRuntime) {
      kiln::cuda::check_runtime(kiln::cuda::RuntimeApi::get().cudaSetDevice(d), "cudaSetDevice");
    } else {
      KILN_CU_CHECK(drv().cuCtxSetCurrent(kiln::cuda::primary_context(d)));
    }
  };
  for (int d = 0; d < n; ++d) {
    const int other = (d + 1) % n;
    check(tag + " launch on device " + std::to_string(d) + " while device " + std::to_string(other) + " is current",
          [&]() -> std::string {
            Buffers& b = *buffers[static_cast<size_t>(d)];
            make_current(other);
            auto p = make_params(b.in.get(), b.out.get(), b.info.get(), kBigShared, false, 1.0f);
            kernels[static_cast<size_t>(d)]->launch(make_config(kBlocks, kBigShared, 2, true, nullptr), &p);
            if (kiln::cuda::current_device() != other)
              return "the caller's current device changed to " + std::to_string(kiln::cuda::current_device());
            KILN_CU_CHECK(drv().cuCtxSetCurrent(kiln::cuda::primary_context(d)));
            KILN_CU_CHECK(drv().cuCtxSynchronize());
            std::string why =
                compare(b.out.download(), reference(b.host_in, kBlocks, kBigShared / 4, 2.0f, 1.0f), kElements);
            return why.empty() ? check_cluster_info(b.info.download(), kBlocks, 2) : why;
          });
    check(tag + " a stream of device " + std::to_string(other) + " is refused by device " + std::to_string(d) +
              "'s kernel",
          [&]() -> std::string {
            KILN_CU_CHECK(drv().cuCtxSetCurrent(kiln::cuda::primary_context(other)));
            CUstream stream = nullptr;
            KILN_CU_CHECK(drv().cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
            Buffers& b = *buffers[static_cast<size_t>(d)];
            auto p = make_params(b.in.get(), b.out.get(), b.info.get(), kBigShared, false, 1.0f);
            std::string why = "the launch was accepted";
            try {
              kernels[static_cast<size_t>(d)]->launch(make_config(kBlocks, kBigShared, 2, false, stream), &p);
            } catch (const kiln::Error& e) {
              why = std::strstr(e.what(), "belongs to device") ? "" : std::string("unexpected error: ") + e.what();
            }
            (void)drv().cuStreamDestroy(stream);
            return why;
          });
  }
  KILN_CU_CHECK(drv().cuCtxSetCurrent(kiln::cuda::primary_context(0)));
  if (api == LaunchApi::kRuntime) make_current(0);
}

}  // namespace

int main() {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  if (kiln::cuda::device_count() == 0) {
    try {
      DriverApi::get();
      fail("GPU present", "the driver loads but reports no CUDA device");
    } catch (const std::exception& e) {
      fail("GPU present", e.what());
    }
    return 1;
  }
  const int device = kiln::cuda::current_device();  // makes device 0's primary context current
  kiln::cuda::DeviceInfo info = kiln::cuda::device_info(device);
  std::printf("device %d: %s, sm_%d%d, %d SMs, %lld bytes opt-in shared memory; driver %s; %d GPU(s)\n", device,
              info.name.c_str(), info.cc_major, info.cc_minor, info.sm_count,
              static_cast<long long>(info.shared_memory_per_block_optin), kiln::cuda::driver_version().c_str(),
              kiln::cuda::device_count());

  // Compile the test kernel with both compilers for this device.
  char state_template[] = "/tmp/kiln-launch-test-XXXXXX";
  const char* state_dir = mkdtemp(state_template);
  kiln::Config config = kiln::Config::from_variables({});
  kiln::compiler::CompileOptions options;
  options.arch = kiln::compiler::Arch::parse("sm_" + std::to_string(info.cc_major) + std::to_string(info.cc_minor) +
                                             (info.cc_major >= 9 ? "a" : ""));
  kiln::compiler::CompileInput input{kKernelSource, kKernelName, "cuda launch test kernel"};
  std::map<Backend, kiln::compiler::CompiledKernel> compiled;
  for (Backend backend : {Backend::kNvcc, Backend::kNvrtc}) {
    check(std::string("compile with ") + kiln::to_string(backend), [&] {
      auto compiler = kiln::compiler::make_compiler(backend, config, state_dir ? state_dir : "");
      compiled[backend] = compiler->compile(input, options);
      const auto& k = compiled[backend];
      std::printf("     %s: %zu bytes of cubin in %.1f ms, kernel name %s\n", kiln::to_string(backend), k.cubin.size(),
                  k.compile_ms, k.kernel_name.c_str());
      return k.cubin.empty() ? std::string("empty cubin") : std::string();
    });
  }
  if (compiled.empty()) return 1;

  Buffers buffers(42);
  CUstream stream = nullptr;
  KILN_CU_CHECK(drv().cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  for (const auto& [backend, kernel] : compiled) {
    for (LaunchApi api : {LaunchApi::kDriver, LaunchApi::kRuntime}) {
      const std::string tag = std::string(kiln::to_string(api)) + " " + kiln::to_string(backend);
      std::unique_ptr<LoadedKernel> loaded;
      check(tag + " load (kernel " + kernel.kernel_name + ")", [&] {
        loaded = LoadedKernel::load(kernel.cubin, kernel.kernel_name, device, api, /*print_load_time=*/true);
        return std::string();
      });
      if (!loaded) continue;
      run_cases(*loaded, tag + " stream", buffers, stream);
      run_cases(*loaded, tag + " default-stream", buffers, nullptr);
      std::unique_ptr<LoadedKernel> fresh;
      check(tag + " load for capture", [&] {
        fresh = LoadedKernel::load(kernel.cubin, kernel.kernel_name, device, api, false);
        return std::string();
      });
      if (fresh) run_capture(*fresh, tag, buffers);
    }
  }

  // The same launches from NVCC and NVRTC cubins must give bit-identical results.
  if (compiled.size() == 2) {
    for (const char* api : {"driver", "runtime"}) {
      for (const char* stream_kind : {"stream", "default-stream"}) {
        for (const char* what : {"smem", "cluster", "pdl"}) {
          const std::string a = std::string(api) + " nvcc " + stream_kind + " " + what;
          const std::string b = std::string(api) + " nvrtc " + stream_kind + " " + what;
          check(std::string(api) + " " + stream_kind + " " + what + ": NVCC and NVRTC results identical", [&] {
            auto ia = g_results.find(a);
            auto ib = g_results.find(b);
            if (ia == g_results.end() || ib == g_results.end()) return std::string("a result is missing");
            return ia->second.size() == ib->second.size() &&
                           std::memcmp(ia->second.data(), ib->second.data(), ia->second.size() * sizeof(float)) == 0
                       ? std::string()
                       : std::string("the outputs differ");
          });
        }
      }
    }
  }

  for (LaunchApi api : {LaunchApi::kDriver, LaunchApi::kRuntime})
    run_load_during_capture(compiled.begin()->second.cubin, compiled.begin()->second.kernel_name, api, buffers);

  if (kiln::cuda::device_count() >= 2) {
    const auto& k = compiled.begin()->second;
    for (LaunchApi api : {LaunchApi::kDriver, LaunchApi::kRuntime}) {
      try {
        run_multi_gpu(k.cubin, k.kernel_name, api);
      } catch (const std::exception& e) {
        fail(std::string(kiln::to_string(api)) + " multi-GPU setup", e.what());
      }
    }
  } else {
    note("multi-GPU checks skipped: 1 GPU visible (they run where 2 or more are)");
  }

  (void)drv().cuStreamDestroy(stream);
  std::printf("%s: %d passed, %d failed\n", g_failures == 0 ? "ALL PASSED" : "FAILURES", g_passes, g_failures);
  return g_failures == 0 ? 0 : 1;
}
