// fp8_gemm_nt's argument checks, all made on the host before any device query: each error names the
// function, the argument, what was expected and what was given. Also: m = 0 and n = 0 are no-ops that need
// no GPU, and the tensor-map cache encodes a repeated map once.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "kiln/error.hpp"
#include "kiln/ops.hpp"
#include "ops/tensor_map.hpp"
#include "test_support.hpp"

namespace kiln {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using kiln::test::ptr;

// A valid problem (m x n x k) with distinct, 256-byte-aligned fake device addresses.
struct Args {
  TensorView a, sfa, b, sfb, d;
  Args(int64_t m, int64_t n, int64_t k) {
    const int64_t kb = (k + 127) / 128;
    a = TensorView::contiguous(ptr(0x100000), DType::kFloat8E4M3, {m, k});
    b = TensorView::contiguous(ptr(0x200000), DType::kFloat8E4M3, {n, k});
    sfb = TensorView::contiguous(ptr(0x300000), DType::kFloat32, {(n + 127) / 128, kb});
    d = TensorView::contiguous(ptr(0x400000), DType::kBFloat16, {m, n});
    sfa = TensorView::contiguous(ptr(0x500000), DType::kFloat32, {m, kb});
    sfa.strides = {1, get_tma_aligned_size(m, 4), 0, 0};  // MN-major, TMA-aligned
  }
  void call() const { fp8_gemm_nt(a, sfa, b, sfb, d); }
};

using kiln::test::error_of;

std::string error_with(const std::function<void(Args&)>& change, ErrorKind kind = ErrorKind::kValueError,
                       int64_t m = 256, int64_t n = 576, int64_t k = 512) {
  Args args(m, n, k);
  change(args);
  return error_of([&] { args.call(); }, kind);
}

TEST(Fp8GemmValidate, DtypesAreTypeErrorsNamingTheArgument) {
  EXPECT_THAT(error_with([](Args& x) { x.a.dtype = DType::kBFloat16; }, ErrorKind::kTypeError),
              AllOf(HasSubstr("fp8_gemm_nt: a must be float8_e4m3"), HasSubstr("got bfloat16")));
  EXPECT_THAT(error_with([](Args& x) { x.sfa.dtype = DType::kBFloat16; }, ErrorKind::kTypeError),
              HasSubstr("fp8_gemm_nt: sfa must be float32, got bfloat16"));
  EXPECT_THAT(error_with([](Args& x) { x.b.dtype = DType::kUInt8; }, ErrorKind::kTypeError),
              HasSubstr("fp8_gemm_nt: b must be float8_e4m3"));
  EXPECT_THAT(error_with([](Args& x) { x.sfb.dtype = DType::kFloat16; }, ErrorKind::kTypeError),
              HasSubstr("fp8_gemm_nt: sfb must be float32"));
  EXPECT_THAT(error_with([](Args& x) { x.d.dtype = DType::kFloat32; }, ErrorKind::kTypeError),
              HasSubstr("fp8_gemm_nt: d must be bfloat16, got float32"));
}

TEST(Fp8GemmValidate, Devices) {
  EXPECT_THAT(error_with([](Args& x) { x.a.device_kind = DeviceKind::kCpu; }),
              HasSubstr("fp8_gemm_nt: a must be on a CUDA device, got cpu"));
  EXPECT_THAT(error_with([](Args& x) { x.b.device = 1; }),
              HasSubstr("fp8_gemm_nt: b must be on the same device as a (cuda:0), got cuda:1"));
  EXPECT_THAT(error_with([](Args& x) { x.d.device_kind = DeviceKind::kCpu; }), HasSubstr("fp8_gemm_nt: d must be on a CUDA device"));
  EXPECT_THAT(error_with([](Args& x) { x.sfb.device = 2; }), HasSubstr("sfb must be on the same device as a"));
  EXPECT_THAT(error_with([](Args& x) { x.sfa.device = 3; }), HasSubstr("sfa must be on the same device as a"));
}

TEST(Fp8GemmValidate, Shapes) {
  EXPECT_THAT(error_with([](Args& x) { x.a.ndim = 3; }), HasSubstr("fp8_gemm_nt: a must be 2-dimensional, got 3"));
  EXPECT_THAT(error_with([](Args& x) { x.b.shape[1] = 640; }),
              AllOf(HasSubstr("fp8_gemm_nt: b must be of shape (n, k) with k == 512 (a's k)"), HasSubstr("(576, 640)")));
  EXPECT_THAT(error_with([](Args& x) { x.d.shape[1] = 584; }),
              AllOf(HasSubstr("fp8_gemm_nt: d must be of shape (256, 576)"), HasSubstr("(256, 584)")));
  EXPECT_THAT(error_with([](Args& x) { x.sfa.shape[1] = 5; }),
              AllOf(HasSubstr("sfa must be of shape (256, 4) (m, ceil(k / 128))"), HasSubstr("(256, 5)")));
  EXPECT_THAT(error_with([](Args& x) { x.sfb.shape[0] = 4; }),
              AllOf(HasSubstr("sfb must be of shape (5, 4) (ceil(n / 128), ceil(k / 128))"), HasSubstr("(4, 4)")));
  // n a multiple of 8, k a positive multiple of 16.
  EXPECT_THAT(error_of([] { Args(16, 572, 512).call(); }),
              AllOf(HasSubstr("b must be of a size(0) (n) that is a multiple of 8"), HasSubstr("n == 572")));
  EXPECT_THAT(error_of([] { Args(16, 576, 520).call(); }),
              AllOf(HasSubstr("a must be of a size(1) (k) that is a positive multiple of 16"), HasSubstr("k == 520")));
  EXPECT_THAT(error_of([] { Args(16, 576, 0).call(); }), HasSubstr("k == 0"));
}

TEST(Fp8GemmValidate, StridesAndRowStrideOfD) {
  // A K-major with a padded row stride is fine for the checks; a column-major one is not.
  EXPECT_THAT(error_with([](Args& x) { x.a.strides = {1, 256, 0, 0}; }),
              HasSubstr("fp8_gemm_nt: a must be dense along its last dimension (stride(1) == 1), got stride(1) == 256"));
  EXPECT_THAT(error_with([](Args& x) { x.a.strides = {520, 1, 0, 0}; }),
              AllOf(HasSubstr("a must be rows 16-byte aligned (stride(0) a multiple of 16)"), HasSubstr("stride(0) == 520")));
  EXPECT_THAT(error_with([](Args& x) { x.b.strides = {256, 1, 0, 0}; }),
              HasSubstr("b must be row-major with stride(0) >= size(1) == 512, got stride(0) == 256"));
  // d: any row stride >= n that keeps rows 16-byte aligned (a multiple of 8 bf16).
  EXPECT_THAT(error_with([](Args& x) { x.d.strides = {570, 1, 0, 0}; }),
              HasSubstr("d must be row-major with stride(0) >= size(1) == 576, got stride(0) == 570"));
  EXPECT_THAT(error_with([](Args& x) { x.d.strides = {580, 1, 0, 0}; }),
              AllOf(HasSubstr("d must be rows 16-byte aligned (stride(0) a multiple of 8)"), HasSubstr("1160 bytes")));
  EXPECT_THAT(error_with([](Args& x) { x.sfb.strides = {8, 1, 0, 0}; }),
              AllOf(HasSubstr("sfb must be contiguous (row-major strides (4, 1))"), HasSubstr("strides (8, 1)")));
}

TEST(Fp8GemmValidate, ScalesOfAMustBeMnMajorAndTmaAligned) {
  // Row-major scales: refused, saying what to do.
  EXPECT_THAT(error_with([](Args& x) { x.sfa.strides = {4, 1, 0, 0}; }),
              AllOf(HasSubstr("fp8_gemm_nt: sfa must be MN-major and TMA-aligned: strides (1, s) with s >= m and s a "
                              "multiple of 4, e.g. (1, 256)"),
                    HasSubstr("per_token_cast_to_fp8"), HasSubstr("got strides (4, 1) (row-major)")));
  EXPECT_THAT(error_of([] {
                Args x(37, 576, 512);
                x.sfa.strides = {1, 37, 0, 0};  // MN-major but not TMA-aligned
                x.call();
              }),
              AllOf(HasSubstr("sfa must be MN-major and TMA-aligned: stride(1) >= m == 37 and a multiple of 4"),
                    HasSubstr("e.g. 40"), HasSubstr("got stride(1) == 37")));
  EXPECT_THAT(error_with([](Args& x) { x.sfa.strides = {1, 128, 0, 0}; }), HasSubstr("got stride(1) == 128"));
  // m = 1: the decode case; a [1, kb] tensor with a stride of 4 per column is the aligned layout.
  EXPECT_THAT(error_of([] {
                Args x(1, 576, 512);
                x.sfa.strides = {4, 1, 0, 0};  // contiguous [1, 4]: not 16-byte rows
                x.call();
              }),
              HasSubstr("got stride(1) == 1"));
}

TEST(Fp8GemmValidate, Alignment) {
  EXPECT_THAT(error_with([](Args& x) { x.a.data = ptr(0x100008); }),
              HasSubstr("fp8_gemm_nt: a must be 16-byte aligned"));
  EXPECT_THAT(error_with([](Args& x) { x.b.data = ptr(0x200001); }), HasSubstr("b must be 16-byte aligned"));
  EXPECT_THAT(error_with([](Args& x) { x.sfa.data = ptr(0x500004); }), HasSubstr("sfa must be 16-byte aligned"));
  EXPECT_THAT(error_with([](Args& x) { x.d.data = ptr(0x400002); }), HasSubstr("d must be 16-byte aligned"));
  EXPECT_THAT(error_with([](Args& x) { x.sfb.data = ptr(0x300002); }), HasSubstr("sfb must be 4-byte aligned"));
}

// The kernel reads A, B and their scales while it stores D's tiles: D may share memory with none of them (each
// used to pass every check).
TEST(Fp8GemmValidate, DMustNotOverlapWhatTheKernelReads) {
  EXPECT_THAT(error_with([](Args& x) { x.d.data = x.a.data; }),
              HasSubstr("fp8_gemm_nt: d must be memory that does not overlap a's (a is float8_e4m3fn[256, 512] "
                        "strides (512, 1) on cuda:0), got an overlap (d is bfloat16[256, 576]"));
  EXPECT_THAT(error_with([](Args& x) { x.d.data = ptr(0x500000 - 16); }),  // d's last bytes over sfa's first
              HasSubstr("fp8_gemm_nt: d must be memory that does not overlap sfa's"));
  EXPECT_THAT(error_with([](Args& x) { x.d.data = ptr(0x200000 + 576 * 512 - 16); }),
              HasSubstr("fp8_gemm_nt: d must be memory that does not overlap b's"));
  EXPECT_THAT(error_with([](Args& x) { x.d.data = ptr(0x300000); }),
              HasSubstr("fp8_gemm_nt: d must be memory that does not overlap sfb's"));
  // Right after a's last byte, d passes every check and the call stops at the device query.
  EXPECT_FALSE(error_of([] {
                 Args x(256, 576, 512);
                 x.d.data = ptr(0x100000 + 256 * 512);
                 x.call();
               },
                        ErrorKind::kCudaError)
                   .empty());
}

TEST(Fp8GemmValidate, EmptyProblemsAreNoOpsWithoutAGpu) {
  EXPECT_NO_THROW(Args(0, 576, 512).call());
  EXPECT_NO_THROW(Args(16, 0, 512).call());
  // ... but still checked.
  EXPECT_THAT(error_of([] {
                Args x(0, 576, 512);
                x.d.dtype = DType::kFloat32;
                x.call();
              },
                       ErrorKind::kTypeError),
              HasSubstr("d must be bfloat16"));
}

TEST(Fp8GemmValidate, AValidCallWithoutADriverFailsCleanly) {
  // Everything checks out; the first device query is where a machine without a GPU stops.
  const std::string what = error_of([] { Args(256, 576, 512).call(); }, ErrorKind::kCudaError);
  EXPECT_FALSE(what.empty());
}

TEST(Fp8GemmValidate, OverridesAreCheckedWhenSet) {
  Fp8GemmOverrides o;
  o.block_n = 200;
  EXPECT_THAT(error_of([&] { set_fp8_gemm_overrides(o); }), HasSubstr("set_fp8_gemm_overrides: block_n must be"));
  o = {};
  o.block_m = 64;
  o.stages = 4;
  set_fp8_gemm_overrides(o);
  EXPECT_EQ(get_fp8_gemm_overrides().block_m, 64);
  EXPECT_EQ(get_fp8_gemm_overrides().stages, 4);
  set_fp8_gemm_overrides({128, 192, 16, 2});  // every field at its largest value round-trips
  Fp8GemmOverrides back = get_fp8_gemm_overrides();
  EXPECT_EQ(back.block_m, 128);
  EXPECT_EQ(back.block_n, 192);
  EXPECT_EQ(back.stages, 16);
  EXPECT_EQ(back.cluster_m, 2);
  EXPECT_EQ(back.cluster_n, 0);
  set_fp8_gemm_overrides({256, 128, 3, 1, 2});
  back = get_fp8_gemm_overrides();
  EXPECT_EQ(back.block_m, 256);
  EXPECT_EQ(back.cluster_m, 1);
  EXPECT_EQ(back.cluster_n, 2);
  EXPECT_EQ(back.split_k, 0);
  set_fp8_gemm_overrides({128, 64, 5, 1, 1, 2});
  back = get_fp8_gemm_overrides();
  EXPECT_EQ(back.block_n, 64);
  EXPECT_EQ(back.cluster_n, 1);
  EXPECT_EQ(back.split_k, 2);
  set_fp8_gemm_overrides({});
  EXPECT_EQ(get_fp8_gemm_overrides().block_m, 0);
}

// ---- the tensor-map cache --------------------------------------------------------------------------------------

int g_encodes = 0;
CUresult fake_encode(CUtensorMap* map, CUtensorMapDataType, cuuint32_t rank, void* address, const cuuint64_t* dims,
                     const cuuint64_t*, const cuuint32_t* box, const cuuint32_t*, CUtensorMapInterleave,
                     CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill) {
  ++g_encodes;
  if (box[0] > 256) return CUDA_ERROR_INVALID_VALUE;
  std::memset(map, 0, sizeof(*map));
  std::memcpy(map, &address, sizeof(address));
  std::memcpy(reinterpret_cast<char*>(map) + 8, dims, sizeof(cuuint64_t) * rank);
  return CUDA_SUCCESS;
}

TEST(TensorMapCache, ARepeatedMapIsEncodedOnce) {
  using ops::TensorMapKey;
  const TensorMapKey a{0x100000, 512, 256, 512, 128, 128, CU_TENSOR_MAP_DATA_TYPE_UINT8, CU_TENSOR_MAP_SWIZZLE_128B};
  g_encodes = 0;
  const uint64_t before = ops::tensor_map_encodes();
  const CUtensorMap& first = ops::tensor_map_2d(a, "a", fake_encode);
  uint64_t address = 0;
  std::memcpy(&address, &first, sizeof(address));
  EXPECT_EQ(address, 0x100000u);
  for (int i = 0; i < 100; ++i) ops::tensor_map_2d(a, "a", fake_encode);
  EXPECT_EQ(g_encodes, 1);
  EXPECT_EQ(ops::tensor_map_encodes() - before, 1u);
  // Anything that changes the map encodes again: pointer, shape, stride, box.
  TensorMapKey b = a;
  b.address += 256;
  ops::tensor_map_2d(b, "a", fake_encode);
  TensorMapKey c = a;
  c.outer = 255;
  ops::tensor_map_2d(c, "a", fake_encode);
  TensorMapKey d = a;
  d.box_outer = 64;
  ops::tensor_map_2d(d, "a", fake_encode);
  EXPECT_EQ(g_encodes, 4);
  // ... and the earlier ones are still cached.
  ops::tensor_map_2d(a, "a", fake_encode);
  ops::tensor_map_2d(b, "a", fake_encode);
  EXPECT_EQ(g_encodes, 4);
}

// One GEMM call needs up to five maps; a direct-mapped cache re-encoded two of them on every call whenever
// their keys collided. Keys that share a set stay cached together, up to the set's ways, and one more
// evicts the least recently used.
TEST(TensorMapCache, KeysSharingASetStayCachedUpToItsWays) {
  using ops::TensorMapKey;
  const TensorMapKey base{0x200000, 512, 256, 512, 128, 128, CU_TENSOR_MAP_DATA_TYPE_UINT8, CU_TENSOR_MAP_SWIZZLE_128B};
  std::vector<TensorMapKey> same_set;
  for (uint64_t i = 0; same_set.size() < ops::kTensorMapCacheWays + 1; ++i) {
    TensorMapKey k = base;
    k.address += i * 256;
    if (ops::tensor_map_cache_set(k) == ops::tensor_map_cache_set(base)) same_set.push_back(k);
  }
  g_encodes = 0;
  for (int round = 0; round < 10; ++round)
    for (int w = 0; w < ops::kTensorMapCacheWays; ++w) ops::tensor_map_2d(same_set[static_cast<size_t>(w)], "a", fake_encode);
  EXPECT_EQ(g_encodes, ops::kTensorMapCacheWays);
  // One more key in the set replaces the least recently used (the first), and only that one.
  ops::tensor_map_2d(same_set.back(), "a", fake_encode);
  EXPECT_EQ(g_encodes, ops::kTensorMapCacheWays + 1);
  for (int w = 1; w < ops::kTensorMapCacheWays; ++w) ops::tensor_map_2d(same_set[static_cast<size_t>(w)], "a", fake_encode);
  EXPECT_EQ(g_encodes, ops::kTensorMapCacheWays + 1);
  ops::tensor_map_2d(same_set.front(), "a", fake_encode);
  EXPECT_EQ(g_encodes, ops::kTensorMapCacheWays + 2);
}

// The weight-gradient form's B (fp8_gemm_interleaved_b): the same tensor viewed in five dimensions, so that row
// w = 8a + 2q + e of a box is row 4q + 2a + e of its 16; a map of its own in the cache.
struct EncodedGeometry {
  cuuint32_t rank = 0;
  std::vector<cuuint64_t> dims, strides;
  std::vector<cuuint32_t> box;
};
EncodedGeometry g_geometry;
CUresult recording_encode(CUtensorMap* map, CUtensorMapDataType type, cuuint32_t rank, void* address,
                          const cuuint64_t* dims, const cuuint64_t* strides, const cuuint32_t* box,
                          const cuuint32_t* element_strides, CUtensorMapInterleave interleave,
                          CUtensorMapSwizzle swizzle, CUtensorMapL2promotion promotion, CUtensorMapFloatOOBfill fill) {
  g_geometry = {rank, {dims, dims + rank}, {strides, strides + rank - 1}, {box, box + rank}};
  return fake_encode(map, type, rank, address, dims, strides, box, element_strides, interleave, swizzle, promotion,
                     fill);
}

TEST(TensorMapCache, RowsInterleavedInSixteensAreAFiveDimensionalView) {
  ops::TensorMapKey plain{0x300000, 4096, 2112, 4096, 128, 192, CU_TENSOR_MAP_DATA_TYPE_UINT8,
                         CU_TENSOR_MAP_SWIZZLE_128B};
  ops::tensor_map_2d(plain, "b", recording_encode);
  EXPECT_EQ(g_geometry.rank, 2u);
  EXPECT_EQ(g_geometry.dims, (std::vector<cuuint64_t>{4096, 2112}));
  EXPECT_EQ(g_geometry.box, (std::vector<cuuint32_t>{128, 192}));
  ops::TensorMapKey interleaved = plain;
  interleaved.interleave_rows16 = true;
  g_encodes = 0;
  ops::tensor_map_2d(interleaved, "b", recording_encode);
  EXPECT_EQ(g_encodes, 1);  // not the plain map's cache entry
  EXPECT_EQ(g_geometry.rank, 5u);
  // Innermost first: K, then e (one row), q (four rows), a (two rows), 16-row groups.
  EXPECT_EQ(g_geometry.dims, (std::vector<cuuint64_t>{4096, 2, 4, 2, 132}));
  EXPECT_EQ(g_geometry.strides, (std::vector<cuuint64_t>{4096, 4 * 4096, 2 * 4096, 16 * 4096}));
  EXPECT_EQ(g_geometry.box, (std::vector<cuuint32_t>{128, 2, 4, 2, 12}));
  // Box row w = e + 2q + 8a + 16p (the box's order) reads row e + 4q + 2a + 16p of the tensor.
  for (uint32_t w = 0; w < 192; ++w) {
    const uint64_t e = w % 2, q = w / 2 % 4, a = w / 8 % 2, p = w / 16;
    const uint64_t offset = e * g_geometry.strides[0] + q * g_geometry.strides[1] + a * g_geometry.strides[2] +
                            p * g_geometry.strides[3];
    const uint64_t g = w % 16;
    EXPECT_EQ(offset / 4096, w - g + 4 * (g % 8 / 2) + 2 * (g / 8) + g % 2) << w;
  }
  // Only whole 16-row groups can be viewed so (the launch never asks for others: a bug if it did).
  ops::TensorMapKey ragged = interleaved;
  ragged.outer = 2120;
  EXPECT_THAT(error_of([&] { ops::tensor_map_2d(ragged, "b", recording_encode); }, ErrorKind::kInternal),
              HasSubstr("b: rows interleaved in 16s need whole 16-row groups, got 2120 rows, boxes of 192"));
}

// The k-grouped call's D ([G, M, N] fp32): a third dimension of planes, one plane per box, with its own stride.
TEST(TensorMapCache, PlanesAreAThirdDimension) {
  ops::TensorMapKey d{0x400000, 2048, 7168, 2048 * 4, 16, 64, CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
                      CU_TENSOR_MAP_SWIZZLE_64B};
  ops::tensor_map_2d(d, "d", recording_encode);
  EXPECT_EQ(g_geometry.rank, 2u);
  d.planes = 8;
  d.plane_bytes = 7168 * 2048 * 4 + 4096;  // groups need not be packed
  g_encodes = 0;
  ops::tensor_map_2d(d, "d", recording_encode);
  EXPECT_EQ(g_encodes, 1);  // not the 2-D map's cache entry
  EXPECT_EQ(g_geometry.rank, 3u);
  EXPECT_EQ(g_geometry.dims, (std::vector<cuuint64_t>{2048, 7168, 8}));
  EXPECT_EQ(g_geometry.strides, (std::vector<cuuint64_t>{2048 * 4, 7168 * 2048 * 4 + 4096}));
  EXPECT_EQ(g_geometry.box, (std::vector<cuuint32_t>{16, 64, 1}));
  ops::TensorMapKey other = d;
  other.plane_bytes += 16;
  ops::tensor_map_2d(other, "d", recording_encode);
  EXPECT_EQ(g_encodes, 2);
  // A failure names the planes too.
  ops::TensorMapKey bad = d;
  bad.box_inner = 512;
  EXPECT_THAT(error_of([&] { ops::tensor_map_2d(bad, "d", fake_encode); }, ErrorKind::kCudaError),
              HasSubstr("for d (dims {2048, 7168, 8}, row stride 8192 bytes, plane stride 58724352 bytes, box {512, "
                        "64})"));
  ops::TensorMapKey both = d;
  both.interleave_rows16 = true;
  EXPECT_THAT(error_of([&] { ops::tensor_map_2d(both, "d", recording_encode); }, ErrorKind::kInternal),
              HasSubstr("d: rows interleaved in 16s and planes"));
}

TEST(TensorMapCache, AnEncodeFailureNamesTheTensorAndTheGeometry) {
  const ops::TensorMapKey bad{0x100000, 512, 256, 512, 512, 128, CU_TENSOR_MAP_DATA_TYPE_UINT8, CU_TENSOR_MAP_SWIZZLE_128B};
  EXPECT_THAT(error_of([&] { ops::tensor_map_2d(bad, "b", fake_encode); }, ErrorKind::kCudaError),
              AllOf(HasSubstr("cuTensorMapEncodeTiled"), HasSubstr("for b (dims {512, 256}, row stride 512 bytes, box {512, 128})")));
  // A failure is not cached.
  g_encodes = 0;
  EXPECT_THROW(ops::tensor_map_2d(bad, "b", fake_encode), Error);
  EXPECT_EQ(g_encodes, 1);
}

}  // namespace
}  // namespace kiln
