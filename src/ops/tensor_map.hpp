// TMA tensor maps for the launch path, encoded on the host (cuTensorMapEncodeTiled) and cached, so a call
// repeating the same tensors (same pointer, shape, strides and box) does not encode again.
//
// The cache is per thread and 4-way set-associative (kTensorMapCacheSlots slots in sets of
// kTensorMapCacheWays, the least recently used way replaced): a hit hashes and compares a few words, takes
// no lock and allocates nothing. Four ways, because one GEMM call needs up to five maps: with a
// direct-mapped cache two of them collided in about one run in twenty and were re-encoded on every call.
// The returned map is valid until this thread's next call.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "kiln/kernels/tma_descriptor.h"

namespace kiln::ops {

// Everything an encoded tiled map depends on (besides the constant choices: interleave none, L2 promotion 256 B,
// out-of-bounds fill with zeros, element strides 1): 2-D, or 5-D (rows interleaved) or 3-D (planes) below.
struct TensorMapKey {
  uint64_t address = 0;
  uint64_t inner = 0;      // elements along the contiguous dimension
  uint64_t outer = 0;      // rows
  uint64_t row_bytes = 0;  // stride between rows, a multiple of 16
  uint32_t box_inner = 0;
  uint32_t box_outer = 0;
  uint32_t dtype = 0;      // CUtensorMapDataType
  uint32_t swizzle = 0;    // CUtensorMapSwizzle
  // Rows read interleaved within each 16 (fp8_gemm_interleaved_b): a 5-D view {inner, 2, 4, 2, outer / 16} with
  // row strides {1, 4, 2, 16}, box {box_inner, 2, 4, 2, box_outer / 16}, so that box row w = 8a + 2q + e is row
  // 4q + 2a + e of its 16. outer and box_outer must be multiples of 16.
  bool interleave_rows16 = false;
  // A third dimension (planes > 0): a 3-D map {inner, outer, planes} with plane stride plane_bytes (a multiple of
  // 16), box {box_inner, box_outer, 1}: one plane per box, the plane its third coordinate. Not with interleaved rows.
  uint64_t planes = 0;
  uint64_t plane_bytes = 0;
  bool operator==(const TensorMapKey&) const = default;
};

constexpr int kTensorMapCacheSlots = 128;
constexpr int kTensorMapCacheWays = 4;

// The signature of cuTensorMapEncodeTiled, so tests can count encodes without a driver.
using TensorMapEncoder = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                      const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                      CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

// The map for `key`, from this thread's cache or encoded now with the driver's cuTensorMapEncodeTiled.
// Throws Error(kCudaError) "cuTensorMapEncodeTiled failed: ... for <what> (dims ..., box ...)" when the
// driver refuses (the op has checked what it can before).
const CUtensorMap& tensor_map_2d(const TensorMapKey& key, const char* what);
// The same with an explicit encoder (tests).
const CUtensorMap& tensor_map_2d(const TensorMapKey& key, const char* what, TensorMapEncoder encode);

// The swizzle of a staged box whose rows are `row_bytes` wide (32, 64 or 128): the kernels' staging writes follow it.
CUtensorMapSwizzle row_swizzle(uint32_t row_bytes);

// An encoded map into a kernel parameter struct's room for one.
void copy_map(TmaDescriptor& dst, const CUtensorMap& src);

// Encodes done by this process (all threads) so far: a repeated call that hits adds nothing.
uint64_t tensor_map_encodes();

// The cache set `key` lives in, 0 .. kTensorMapCacheSlots / kTensorMapCacheWays - 1 (tests).
uint64_t tensor_map_cache_set(const TensorMapKey& key);

}  // namespace kiln::ops
