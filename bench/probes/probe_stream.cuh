// What the decode-stream probes share (flush_gap_probe, evict_probe, tma_piece_probe; probes are standalone
// programs, one translation unit each): the benchmark's L2 flushes, a plain streaming read, and the timing of a
// kernel after a flush.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "probe_check.h"

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// The benchmark's flush: n16 16-byte words written, which leaves L2 full of dirty lines.
__global__ void flush_write(uint4* p, size_t n16) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n16;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    p[i] = make_uint4(0, 0, 0, 0);
}

// A flush by reading: L2 left full of clean lines.
__global__ void flush_read(const uint4* p, size_t n16, uint32_t* sink) {
  uint32_t x = 0;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n16;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const uint4 v = p[i];
    x ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (x == 0x9e3779b9u) *sink = x;
}

// A plain stream of `pieces` 4 KB pieces: warp w of the grid takes pieces w, w + warps, ..., each copied with
// cp.async (8 x 16 bytes per lane, 256-byte L2 prefetch) into a 4-deep ring of its own; with kHint, the copies carry
// the L2 cache policy `policy` (.L2::cache_hint). Launch with kStreamWarps * 32 threads and kStreamSmemBytes of
// shared memory.
constexpr int kStreamWarps = 8, kStreamPiece = 4096, kStreamRing = 4;
constexpr int kStreamSmemBytes = kStreamWarps * kStreamRing * kStreamPiece;  // 128 KB: one CTA per SM

template <bool kHint = false>
__global__ void __launch_bounds__(kStreamWarps * 32)
    stream(const uint8_t* __restrict__ src, size_t pieces, uint32_t* sink, uint64_t policy = 0) {
  extern __shared__ __align__(16) uint8_t ring[];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  uint8_t* mine = ring + static_cast<size_t>(warp) * kStreamRing * kStreamPiece;
  const size_t first = static_cast<size_t>(blockIdx.x) * kStreamWarps + warp;
  const size_t stride = static_cast<size_t>(gridDim.x) * kStreamWarps;
  const auto issue = [&](size_t piece, int slot) {
    if (piece < pieces) {
#pragma unroll
      for (int i = 0; i < kStreamPiece / 512; ++i) {
        const uint32_t dst = smem_u32(mine + slot * kStreamPiece + i * 512 + lane * 16);
        const uint8_t* g = src + piece * kStreamPiece + i * 512 + lane * 16;
        if constexpr (kHint)
          asm volatile("cp.async.cg.shared.global.L2::cache_hint.L2::256B [%0], [%1], 16, %2;" ::"r"(dst), "l"(g),
                       "l"(policy)
                       : "memory");
        else
          asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16;" ::"r"(dst), "l"(g) : "memory");
      }
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
  };
  for (int s = 0; s < kStreamRing - 1; ++s) issue(first + s * stride, s);
  uint32_t x = 0;
  int slot = 0;
  for (size_t p = first; p < pieces; p += stride) {
    issue(p + (kStreamRing - 1) * stride, (slot + kStreamRing - 1) % kStreamRing);
    asm volatile("cp.async.wait_group %0;" ::"n"(kStreamRing - 1) : "memory");
#pragma unroll
    for (int i = 0; i < kStreamPiece / 512; ++i) {
      const uint4 v = *reinterpret_cast<const uint4*>(mine + slot * kStreamPiece + i * 512 + lane * 16);
      x ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    slot = (slot + 1) % kStreamRing;
  }
  if (x == 0x9e3779b9u) *sink = x;  // keeps the reads
}

// What the probes time a kernel with: a 1 GB flush buffer, a sink for results kept alive, two events.
struct FlushedTimer {
  static constexpr size_t kFlushBytes = size_t{1} << 30;
  int sms = 0;
  uint4* flush = nullptr;
  uint32_t* sink = nullptr;
  cudaEvent_t e0{}, e1{};

  FlushedTimer() {
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    CHECK(cudaMalloc(&flush, kFlushBytes));
    CHECK(cudaMalloc(&sink, 4));
    CHECK(cudaMemset(flush, 1, kFlushBytes));
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));
  }

  // The benchmark's flush (write) or a read of the same bytes, queued on the default stream.
  void flush_l2(bool write) const {
    if (write)
      flush_write<<<sms * 8, 256>>>(flush, kFlushBytes / 16);
    else
      flush_read<<<sms * 8, 256>>>(flush, kFlushBytes / 16, sink);
  }

  // The median event time, in us, of `launch()` over `calls` calls less the first three, each after prepare(i)
  // (e.g. a flush, queued so that the kernel starts right after it, as the Python benchmark does).
  template <class Prepare, class Launch>
  double median_us(int calls, Prepare prepare, Launch launch) const {
    std::vector<float> ms;
    for (int i = 0; i < calls; ++i) {
      prepare(i);
      CHECK(cudaEventRecord(e0));
      launch();
      CHECK(cudaEventRecord(e1));
      CHECK(cudaEventSynchronize(e1));
      float t = 0;
      CHECK(cudaEventElapsedTime(&t, e0, e1));
      if (i >= 3) ms.push_back(t);
    }
    CHECK(cudaGetLastError());
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2] * 1000.0;
  }
};
