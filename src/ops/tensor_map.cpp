#include "ops/tensor_map.hpp"

#include <atomic>
#include <cstring>
#include <string>

#include "cuda/driver.hpp"
#include "kiln/error.hpp"

namespace kiln::ops {
namespace {

struct Slot {
  CUtensorMap map;
  TensorMapKey key;
  uint64_t last_use = 0;  // the set's use counter when last hit or filled; 0: empty
};

struct Set {
  Slot ways[kTensorMapCacheWays];
  uint64_t uses = 0;
};

std::atomic<uint64_t> g_encodes{0};

uint64_t hash_key(const TensorMapKey& k) {
  uint64_t h = k.address * 0x9e3779b97f4a7c15ull;
  for (uint64_t w : {k.inner, k.outer, k.row_bytes, (uint64_t{k.box_inner} << 32) | k.box_outer,
                     (uint64_t{k.dtype} << 32) | k.swizzle, uint64_t{k.interleave_rows16}, k.planes, k.plane_bytes}) {
    h ^= w + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdull;
  }
  return h ^ (h >> 29);
}

CUresult driver_encode(CUtensorMap* map, CUtensorMapDataType type, cuuint32_t rank, void* address,
                       const cuuint64_t* dims, const cuuint64_t* strides, const cuuint32_t* box,
                       const cuuint32_t* element_strides, CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
                       CUtensorMapL2promotion promotion, CUtensorMapFloatOOBfill fill) {
  return cuda::DriverApi::get().cuTensorMapEncodeTiled(map, type, rank, address, dims, strides, box, element_strides,
                                                       interleave, swizzle, promotion, fill);
}

}  // namespace

static_assert(sizeof(CUtensorMap) == sizeof(TmaDescriptor), "TmaDescriptor must hold a CUtensorMap");
static_assert(alignof(TmaDescriptor) >= 64, "TMA descriptors must be 64-byte aligned");

CUtensorMapSwizzle row_swizzle(uint32_t row_bytes) {
  return row_bytes == 128  ? CU_TENSOR_MAP_SWIZZLE_128B
         : row_bytes == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                           : CU_TENSOR_MAP_SWIZZLE_32B;
}

void copy_map(TmaDescriptor& dst, const CUtensorMap& src) { std::memcpy(&dst, &src, sizeof(dst)); }

const CUtensorMap& tensor_map_2d(const TensorMapKey& key, const char* what) {
  return tensor_map_2d(key, what, driver_encode);
}

const CUtensorMap& tensor_map_2d(const TensorMapKey& key, const char* what, TensorMapEncoder encode) {
  thread_local Set sets[kTensorMapCacheSlots / kTensorMapCacheWays];
  Set& set = sets[tensor_map_cache_set(key)];
  const uint64_t now = ++set.uses;
  Slot* victim = &set.ways[0];
  for (Slot& way : set.ways) {
    if (way.last_use != 0 && way.key == key) {
      way.last_use = now;
      return way.map;
    }
    if (way.last_use < victim->last_use) victim = &way;
  }
  Slot& slot = *victim;

  if (key.interleave_rows16 && (key.outer % 16 != 0 || key.box_outer % 16 != 0))
    throw Error(ErrorKind::kInternal, std::string("tensor map for ") + what + ": rows interleaved in 16s need whole " +
                                          "16-row groups, got " + std::to_string(key.outer) + " rows, boxes of " +
                                          std::to_string(key.box_outer));
  if (key.interleave_rows16 && key.planes > 0)
    throw Error(ErrorKind::kInternal, std::string("tensor map for ") + what + ": rows interleaved in 16s and planes");
  const uint64_t r = key.row_bytes;
  cuuint64_t dims[5] = {key.inner, key.interleave_rows16 ? 2 : key.outer, 4, 2, key.outer / 16};
  cuuint64_t strides[4] = {r, 4 * r, 2 * r, 16 * r};
  cuuint32_t box[5] = {key.box_inner, key.interleave_rows16 ? 2 : key.box_outer, 4, 2, key.box_outer / 16};
  const cuuint32_t element_strides[5] = {1, 1, 1, 1, 1};
  const cuuint32_t rank = key.interleave_rows16 ? 5 : key.planes > 0 ? 3 : 2;
  if (key.planes > 0) {
    dims[2] = key.planes;
    strides[1] = key.plane_bytes;
    box[2] = 1;
  }
  slot.last_use = 0;  // empty until the encode succeeds
  const CUresult result =
      encode(&slot.map, static_cast<CUtensorMapDataType>(key.dtype), rank, reinterpret_cast<void*>(key.address), dims,
             strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, static_cast<CUtensorMapSwizzle>(key.swizzle),
             CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (result != CUDA_SUCCESS)
    cuda::check(result, "cuTensorMapEncodeTiled",
                std::string(" for ") + what + (key.interleave_rows16 ? ", rows interleaved in 16s" : "") + " (dims {" +
                    std::to_string(key.inner) + ", " + std::to_string(key.outer) +
                    (key.planes > 0 ? ", " + std::to_string(key.planes) : std::string()) + "}, row stride " +
                    std::to_string(key.row_bytes) + " bytes" +
                    (key.planes > 0 ? ", plane stride " + std::to_string(key.plane_bytes) + " bytes" : std::string()) +
                    ", box {" + std::to_string(key.box_inner) + ", " + std::to_string(key.box_outer) + "})");
  slot.key = key;
  slot.last_use = now;
  g_encodes.fetch_add(1, std::memory_order_relaxed);
  return slot.map;
}

uint64_t tensor_map_cache_set(const TensorMapKey& key) {
  return hash_key(key) % (kTensorMapCacheSlots / kTensorMapCacheWays);
}

uint64_t tensor_map_encodes() { return g_encodes.load(std::memory_order_relaxed); }

}  // namespace kiln::ops
