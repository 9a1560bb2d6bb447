// Probe (not part of the library): how much of a decode-sized call's fixed time is the launch itself, and does
// it grow with the dynamic shared memory a kernel asks for, or with a cluster? An empty persistent-shaped kernel
// (132 CTAs of 384 threads) is timed as the FP8 GEMM benchmark times a call: an asynchronous 1 GB write flush,
// then the start event, the launch and the stop event, queued back to back (no synchronisation between reps),
// median of 30. The flush kernel runs with the device's default carveout, so a kernel that needs more shared
// memory than the carveout left may wait for the SMs to be reconfigured.
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o launch_smem_probe bench/probes/launch_smem_probe.cu
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "probe_check.h"

__global__ void __launch_bounds__(384, 1) empty_kernel(int* never) {
  extern __shared__ int smem[];
  if (never != nullptr && threadIdx.x == 1000) *never = smem[0];  // keeps the parameter and shared memory used
}

float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// One configuration: `reps` (flush?, start, launch, stop) groups queued back to back; the median of the events.
float time_launch(size_t smem, int cluster, bool flush, void* flush_buf, size_t flush_bytes, cudaStream_t s) {
  constexpr int kReps = 30;
  std::vector<cudaEvent_t> start(kReps), stop(kReps);
  for (int i = 0; i < kReps; ++i) {
    CHECK(cudaEventCreate(&start[i]));
    CHECK(cudaEventCreate(&stop[i]));
  }
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(132);
  cfg.blockDim = dim3(384);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = cluster;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  for (int i = 0; i < 3 + kReps; ++i) {  // three warm-ups first
    if (flush) CHECK(cudaMemsetAsync(flush_buf, i & 0xff, flush_bytes, s));
    if (i >= 3) CHECK(cudaEventRecord(start[i - 3], s));
    CHECK(cudaLaunchKernelEx(&cfg, empty_kernel, static_cast<int*>(nullptr)));
    if (i >= 3) CHECK(cudaEventRecord(stop[i - 3], s));
  }
  CHECK(cudaStreamSynchronize(s));
  std::vector<float> ms(kReps);
  for (int i = 0; i < kReps; ++i) {
    CHECK(cudaEventElapsedTime(&ms[i], start[i], stop[i]));
    CHECK(cudaEventDestroy(start[i]));
    CHECK(cudaEventDestroy(stop[i]));
  }
  return median(ms) * 1000.0f;
}

int main() {
  CHECK(cudaFuncSetAttribute(empty_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 227 * 1024));
  CHECK(cudaFuncSetAttribute(empty_kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  const size_t flush_bytes = size_t(1) << 30;
  void* flush_buf = nullptr;
  CHECK(cudaMalloc(&flush_buf, flush_bytes));
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  std::printf("empty kernel, 132 x 384 threads; us, CUDA events, median of 30\n");
  std::printf("%10s %8s %12s %12s\n", "smem KB", "cluster", "after flush", "no flush");
  for (const int cluster : {1, 2})
    for (const size_t kb : {0, 48, 100, 160, 200, 227}) {
      const float f = time_launch(kb * 1024, cluster, true, flush_buf, flush_bytes, s);
      const float n = time_launch(kb * 1024, cluster, false, flush_buf, flush_bytes, s);
      std::printf("%10zu %8d %12.2f %12.2f\n", kb, cluster, f, n);
    }
  CHECK(cudaFree(flush_buf));
  return 0;
}
