// Probe (not part of the library): why the C++ harness times decode-sized GEMMs 1-1.5 us faster than the Python
// benchmark. The harness flushes L2 with a synchronous cuMemsetD8 (the GPU then idles while the host records
// the start event and launches), the benchmark with an asynchronous 1 GB write (the kernel starts right after
// it). This streams a decode-sized weight (the stream kernel of exp/next's stream_probe.cu) after each of:
// an asynchronous write flush; a write flush, a device synchronisation, then the launch; the same with the
// host waiting 20 or 200 us first; a read flush; nothing. If an idle GPU cleans L2's dirty lines, the
// synchronised flushes read like the read flush. Last, the memset API the harness flushes with (synchronous,
// and asynchronous): if it leaves the weight in L2, the harness times decode sizes warm. Also prints how many 384-thread, 211 KB clusters of 2 and of
// 4 CTAs can be resident at once (cudaOccupancyMaxActiveClusters): can a 2x2 cluster kernel use every SM?
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o flush_gap_probe bench/probes/flush_gap_probe.cu
#include <cuda_runtime.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "probe_check.h"
#include "probe_stream.cuh"

__global__ void __launch_bounds__(384, 1) cluster_dummy(int* p) {
  extern __shared__ int s[];
  if (p) p[threadIdx.x] = s[threadIdx.x];
}

int main() {
  CHECK(cudaFuncSetAttribute(stream<>, cudaFuncAttributeMaxDynamicSharedMemorySize, kStreamSmemBytes));
  const FlushedTimer timer;
  const int sms = timer.sms;
  const char* kinds[] = {"async write flush (Python bench)", "write flush, sync (harness)",
                         "write flush, sync, 20 us idle", "write flush, sync, 200 us idle",
                         "async read flush", "no flush", "cudaMemset 512 MB, sync (harness API)",
                         "cudaMemsetAsync 512 MB"};
  for (const size_t bytes : {size_t{4096} * 7168, size_t{2112} * 7168, size_t{7168} * 2048}) {
    uint8_t* src;
    CHECK(cudaMalloc(&src, bytes));
    CHECK(cudaMemset(src, 0x5a, bytes));
    const size_t pieces = bytes / kStreamPiece;
    for (int kind = 0; kind < 8; ++kind) {
      const auto prepare = [&](int i) {
        if (kind <= 3) timer.flush_l2(true);
        if (kind == 4) timer.flush_l2(false);
        if (kind == 6) CHECK(cudaMemset(timer.flush, i, size_t{512} << 20));
        if (kind == 7) CHECK(cudaMemsetAsync(timer.flush, i, size_t{512} << 20));
        if ((kind >= 1 && kind <= 3) || kind == 6) CHECK(cudaDeviceSynchronize());
        if (kind == 2 || kind == 3) {
          CHECK(cudaEventRecord(timer.e0));
          CHECK(cudaEventSynchronize(timer.e0));
          const auto t0 = std::chrono::steady_clock::now();
          while (std::chrono::steady_clock::now() - t0 < std::chrono::microseconds(kind == 2 ? 20 : 200)) {
          }
        }
      };
      const double us = timer.median_us(
          23, prepare, [&] { stream<><<<sms, kStreamWarps * 32, kStreamSmemBytes>>>(src, pieces, timer.sink); });
      std::printf("stream %6.1f MB after %-34s %7.1f us %7.0f GB/s\n", bytes / 1e6, kinds[kind], us,
                  bytes / (us * 1e-6) / 1e9);
    }
    CHECK(cudaFree(src));
  }
  const int cluster_smem = 211 * 1024;
  CHECK(cudaFuncSetAttribute(cluster_dummy, cudaFuncAttributeMaxDynamicSharedMemorySize, cluster_smem));
  CHECK(cudaFuncSetAttribute(cluster_dummy, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  for (int size : {1, 2, 4}) {
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3(static_cast<unsigned>(size * 64), 1, 1);
    config.blockDim = dim3(384, 1, 1);
    config.dynamicSmemBytes = cluster_smem;
    cudaLaunchAttribute attr;
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = static_cast<unsigned>(size);
    attr.val.clusterDim.y = 1;
    attr.val.clusterDim.z = 1;
    config.attrs = &attr;
    config.numAttrs = 1;
    int clusters = 0;
    CHECK(cudaOccupancyMaxActiveClusters(&clusters, cluster_dummy, &config));
    std::printf("clusters of %d (384 threads, %d KB each): %d resident at once = %d of %d SMs\n", size,
                cluster_smem / 1024, clusters, clusters * size, sms);
  }
  return 0;
}
