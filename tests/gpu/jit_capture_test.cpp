// GPU test: a compile needed while the stream is being captured into a CUDA graph is a clear error that
// leaves the capture intact, and a kernel already compiled is served (and captured) normally.
// Prints PASS/FAIL lines; exit status 0 only when everything passes.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "cuda/driver.hpp"
#include "kiln/kiln.hpp"

namespace {

int failures = 0;

void report(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "PASS" : "FAIL", what.c_str());
  if (!ok) ++failures;
}

struct Buffers {
  CUdeviceptr x = 0, out = 0, scales = 0;
  int64_t m, k;
  kiln::TensorView tx, tout, tscales;
  Buffers(int64_t m_, int64_t k_) : m(m_), k(k_) {
    const auto& cu = kiln::cuda::DriverApi::get();
    KILN_CU_CHECK(cu.cuMemAlloc(&x, static_cast<size_t>(m * k * 2)));
    KILN_CU_CHECK(cu.cuMemAlloc(&out, static_cast<size_t>(m * k)));
    KILN_CU_CHECK(cu.cuMemAlloc(&scales, static_cast<size_t>(kiln::per_token_scales_storage(m, k)) * 4));
    std::vector<uint16_t> host(static_cast<size_t>(m * k));
    std::mt19937 rng(static_cast<unsigned>(k));
    for (auto& v : host) v = static_cast<uint16_t>(0x3c00 + (rng() & 0x3ff));  // bf16 values in [1, 2) .. signs vary below
    for (size_t i = 0; i < host.size(); i += 3) host[i] |= 0x8000;
    KILN_CU_CHECK(cu.cuMemcpyHtoD(x, host.data(), host.size() * 2));
    tx = kiln::TensorView::contiguous(reinterpret_cast<void*>(x), kiln::DType::kBFloat16, {m, k});
    tout = kiln::TensorView::contiguous(reinterpret_cast<void*>(out), kiln::DType::kFloat8E4M3, {m, k});
    tscales = kiln::TensorView::contiguous(reinterpret_cast<void*>(scales), kiln::DType::kFloat32, {m, k / 128});
    tscales.strides = {1, kiln::get_tma_aligned_size(m, 4)};
  }
  std::vector<uint8_t> output() const {
    std::vector<uint8_t> h(static_cast<size_t>(m * k));
    KILN_CU_CHECK(kiln::cuda::DriverApi::get().cuMemcpyDtoH(h.data(), out, h.size()));
    return h;
  }
  void poison() const { KILN_CU_CHECK(kiln::cuda::DriverApi::get().cuMemsetD8(out, 0xff, static_cast<size_t>(m * k))); }
};

}  // namespace

int main() {
  try {
    // A private, empty cache: the second shape below is guaranteed not to be compiled yet.
    std::string dir = (std::filesystem::temp_directory_path() / ("kiln-capture-" + std::to_string(getpid()))).string();
    setenv("DG_JIT_CACHE_DIR", dir.c_str(), 1);
    const auto& cu = kiln::cuda::DriverApi::get();
    kiln::cuda::current_device();
    CUstream stream = nullptr;
    KILN_CU_CHECK(cu.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));

    Buffers warm(256, 512), cold(256, 1024);
    kiln::per_token_cast_to_fp8(warm.tx, warm.tout, warm.tscales, stream);  // compiled and loaded: warm
    KILN_CU_CHECK(cu.cuStreamSynchronize(stream));
    const std::vector<uint8_t> expected = warm.output();

    for (CUstreamCaptureMode mode : {CU_STREAM_CAPTURE_MODE_GLOBAL, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
                                     CU_STREAM_CAPTURE_MODE_RELAXED}) {
      const std::string mode_name = mode == CU_STREAM_CAPTURE_MODE_GLOBAL ? "global"
                                    : mode == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL ? "thread-local" : "relaxed";
      warm.poison();
      KILN_CU_CHECK(cu.cuStreamSynchronize(stream));
      KILN_CU_CHECK(cu.cuStreamBeginCapture(stream, mode));
      bool refused = false;
      std::string message;
      try {
        kiln::per_token_cast_to_fp8(cold.tx, cold.tout, cold.tscales, stream);
      } catch (const kiln::Error& e) {
        refused = e.kind() == kiln::ErrorKind::kCaptureError;
        message = e.what();
      }
      report(refused && message.find("captured") != std::string::npos,
             "[" + mode_name + "] an uncompiled kernel during capture is a CaptureError: " + message.substr(0, 90));
      CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
      KILN_CU_CHECK(cu.cuStreamIsCapturing(stream, &status));
      report(status == CU_STREAM_CAPTURE_STATUS_ACTIVE, "[" + mode_name + "] the capture is still active after the refusal");

      kiln::per_token_cast_to_fp8(warm.tx, warm.tout, warm.tscales, stream);  // a cached kernel: captured
      CUgraph graph = nullptr;
      CUresult end = cu.cuStreamEndCapture(stream, &graph);
      report(end == CUDA_SUCCESS && graph, "[" + mode_name + "] the capture ends cleanly");
      if (end != CUDA_SUCCESS || !graph) continue;
      CUgraphExec exec = nullptr;
      KILN_CU_CHECK(cu.cuGraphInstantiateWithFlags(&exec, graph, 0));
      std::vector<uint8_t> before = warm.output();
      bool untouched = true;
      for (uint8_t b : before) untouched &= b == 0xff;
      report(untouched, "[" + mode_name + "] nothing ran during capture");
      KILN_CU_CHECK(cu.cuGraphLaunch(exec, stream));
      KILN_CU_CHECK(cu.cuStreamSynchronize(stream));
      report(warm.output() == expected, "[" + mode_name + "] the replayed graph gives the eager result");
      cu.cuGraphExecDestroy(exec);
      cu.cuGraphDestroy(graph);
    }

    // After the capture, the refused kernel compiles normally.
    kiln::per_token_cast_to_fp8(cold.tx, cold.tout, cold.tscales, stream);
    KILN_CU_CHECK(cu.cuStreamSynchronize(stream));
    std::vector<uint8_t> cold_out = cold.output();
    bool written = false;
    for (uint8_t b : cold_out) written |= b != 0;
    report(written, "the refused kernel compiles and runs once the capture is over");
    std::filesystem::remove_all(dir);
  } catch (const std::exception& e) {
    std::printf("FAIL exception: %s\n", e.what());
    return 1;
  }
  std::printf("%s: %d failure(s)\n", failures ? "FAILED" : "ALL PASSED", failures);
  return failures ? 1 : 0;
}
