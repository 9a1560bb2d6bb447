// The FP8 casts' preconditions: every bad argument is a precise error (function, argument, expected, given)
// raised before any kernel is looked up, so these run without a GPU or driver on fake device pointers.
// Also the reusable checks in ops/validate.hpp, the empty-problem no-ops and the process-wide settings.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>

#include "kiln/error.hpp"
#include "kiln/ops.hpp"
#include "kiln/tensor.hpp"
#include "ops/validate.hpp"
#include "test_support.hpp"

namespace kiln {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// Fake, well-aligned device addresses: validation never dereferences them, and no test here gets past it.
void* fake(uintptr_t address) { return reinterpret_cast<void*>(address); }
constexpr uintptr_t kX = 0x7f0000000000, kOut = 0x7f1000000000, kScales = 0x7f2000000000;

TensorView view(uintptr_t address, DType dtype, std::initializer_list<int64_t> shape) {
  return TensorView::contiguous(fake(address), dtype, shape, 0);
}

// A valid per-token problem [m, k] (scales in the MN-major, TMA-aligned layout).
struct PerToken {
  int64_t m, k;
  TensorView x, out, scales;
  PerToken(int64_t m_, int64_t k_) : m(m_), k(k_) {
    x = view(kX, DType::kBFloat16, {m, k});
    out = view(kOut, DType::kFloat8E4M3, {m, k});
    scales = view(kScales, DType::kFloat32, {m, k / 128});
    scales.strides = {1, get_tma_aligned_size(m, 4)};
  }
  void run() const { per_token_cast_to_fp8(x, out, scales); }
};

struct PerBlock {
  int64_t n, k;
  TensorView x, out, scales;
  PerBlock(int64_t n_, int64_t k_) : n(n_), k(k_) {
    x = view(kX, DType::kBFloat16, {n, k});
    out = view(kOut, DType::kFloat8E4M3, {n, k});
    scales = view(kScales, DType::kFloat32, {ceil_div(n, 128), k / 128});
  }
  void run() const { per_block_cast_to_fp8(x, out, scales); }
};

// The message of the kiln::Error `fn` throws, after checking its kind; fails when nothing is thrown.
using kiln::test::error_of;

// ---- per_token_cast_to_fp8 ---------------------------------------------------------------------------------

TEST(PerTokenValidation, DtypeOfEachArgumentIsATypeError) {
  PerToken p(64, 256);
  p.x.dtype = DType::kFloat16;
  EXPECT_THAT(error_of([&] { p.run(); }, ErrorKind::kTypeError),
              AllOf(HasSubstr("per_token_cast_to_fp8: x must be bfloat16, got float16"), HasSubstr("x is float16[64, 256]")));
  p = PerToken(64, 256);
  p.out.dtype = DType::kUInt8;
  EXPECT_THAT(error_of([&] { p.run(); }, ErrorKind::kTypeError),
              HasSubstr("per_token_cast_to_fp8: out must be float8_e4m3fn, got uint8"));
  p = PerToken(64, 256);
  p.scales.dtype = DType::kBFloat16;
  EXPECT_THAT(error_of([&] { p.run(); }, ErrorKind::kTypeError),
              HasSubstr("per_token_cast_to_fp8: out_scales must be float32, got bfloat16"));
}

TEST(PerTokenValidation, EveryArgumentMustBeOnTheSameCudaDevice) {
  PerToken p(64, 256);
  p.x.device_kind = DeviceKind::kCpu;
  EXPECT_THAT(error_of([&] { p.run(); }, ErrorKind::kValueError),
              AllOf(HasSubstr("per_token_cast_to_fp8: x must be on a CUDA device, got cpu"), HasSubstr("on cpu")));
  p = PerToken(64, 256);
  p.out.device_kind = DeviceKind::kCpu;
  EXPECT_THAT(error_of([&] { p.run(); }, ErrorKind::kValueError), HasSubstr("out must be on a CUDA device, got cpu"));
  p = PerToken(64, 256);
  p.scales.device_kind = DeviceKind::kCpu;
  EXPECT_THAT(error_of([&] { p.run(); }, ErrorKind::kValueError),
              HasSubstr("out_scales must be on a CUDA device, got cpu"));
  p = PerToken(64, 256);
  p.out.device = 1;
  EXPECT_THAT(error_of([&] { p.run(); }, ErrorKind::kValueError),
              HasSubstr("per_token_cast_to_fp8: out must be on the same device as x (cuda:0), got cuda:1"));
  p = PerToken(64, 256);
  p.scales.device = 3;
  EXPECT_THAT(error_of([&] { p.run(); }, ErrorKind::kValueError),
              HasSubstr("out_scales must be on the same device as x (cuda:0), got cuda:3"));
  p = PerToken(64, 256);
  p.x.device = -1;
  p.out.device = -1;
  p.scales.device = -1;
  EXPECT_THAT(error_of([&] { p.run(); }, ErrorKind::kValueError), HasSubstr("ordinal >= 0, got device ordinal -1"));
}

TEST(PerTokenValidation, ShapesAndKMultipleOf128) {
  PerToken p(64, 256);
  p.x = view(kX, DType::kBFloat16, {64, 256, 1});
  EXPECT_THAT(error_of([&] { p.run(); }, ErrorKind::kValueError),
              HasSubstr("per_token_cast_to_fp8: x must be 2-dimensional, got 3 dimensions"));

  PerToken q(64, 256);
  q.x = view(kX, DType::kBFloat16, {64, 200});
  q.out = view(kOut, DType::kFloat8E4M3, {64, 200});
  EXPECT_THAT(error_of([&] { q.run(); }, ErrorKind::kValueError),
              HasSubstr("per_token_cast_to_fp8: x.size(1) (k) must be a multiple of 128, got 200"));

  p = PerToken(64, 256);
  p.out = view(kOut, DType::kFloat8E4M3, {64, 128});
  EXPECT_THAT(error_of([&] { p.run(); }, ErrorKind::kValueError),
              HasSubstr("out must be of shape (64, 256) (the shape of x), got shape (64, 128)"));

  p = PerToken(64, 256);
  p.scales = view(kScales, DType::kFloat32, {64, 1});
  EXPECT_THAT(error_of([&] { p.run(); }, ErrorKind::kValueError),
              HasSubstr("out_scales must be of shape (64, 2) (m, k / 128), got shape (64, 1)"));
  p = PerToken(64, 256);
  p.scales = view(kScales, DType::kFloat32, {128});
  EXPECT_THAT(error_of([&] { p.run(); }, ErrorKind::kValueError),
              HasSubstr("out_scales must be 2-dimensional, got 1 dimensions"));
}

TEST(PerTokenValidation, StridesOfX) {
  PerToken p(64, 256);
  p.x.strides = {256, 2};
  EXPECT_THAT(error_of([&] { p.run(); }, ErrorKind::kValueError),
              HasSubstr("x must be dense along its last dimension (stride(1) == 1), got stride(1) == 2"));
  p = PerToken(64, 256);
  p.x.strides = {128, 1};
  EXPECT_THAT(error_of([&] { p.run(); }, ErrorKind::kValueError),
              HasSubstr("x must be row-major with stride(0) >= size(1) == 256, got stride(0) == 128"));
  p = PerToken(64, 256);
  p.x.strides = {260, 1};
  EXPECT_THAT(error_of([&] { p.run(); }, ErrorKind::kValueError),
              HasSubstr("x must be rows 16-byte aligned (stride(0) a multiple of 8), got stride(0) == 260 (520 bytes)"));
}

TEST(PerTokenValidation, OutMustBeContiguous) {
  PerToken p(64, 256);
  p.out.strides = {512, 1};
  EXPECT_THAT(error_of([&] { p.run(); }, ErrorKind::kValueError),
              HasSubstr("out must be contiguous (row-major strides (256, 1)), got strides (512, 1)"));
}

TEST(PerTokenValidation, PointersMustBe16ByteAligned) {
  PerToken p(64, 256);
  p.x.data = fake(kX + 8);
  EXPECT_THAT(error_of([&] { p.run(); }, ErrorKind::kValueError),
              AllOf(HasSubstr("per_token_cast_to_fp8: x must be 16-byte aligned, got data pointer"),
                    HasSubstr("8 bytes past a 16-byte boundary")));
  p = PerToken(64, 256);
  p.out.data = fake(kOut + 1);
  EXPECT_THAT(error_of([&] { p.run(); }, ErrorKind::kValueError), HasSubstr("out must be 16-byte aligned"));
  p = PerToken(64, 256);
  p.scales.data = fake(kScales + 4);
  EXPECT_THAT(error_of([&] { p.run(); }, ErrorKind::kValueError), HasSubstr("out_scales must be 16-byte aligned"));
}

TEST(PerTokenValidation, ScalesMustBeMnMajorAndTmaAligned) {
  PerToken p(100, 512);  // aligned m = 100
  p.scales.strides = {4, 1};  // row-major [m, k/128]
  EXPECT_THAT(error_of([&] { p.run(); }, ErrorKind::kValueError),
              AllOf(HasSubstr("out_scales must be in the MN-major, TMA-aligned layout"),
                    HasSubstr("with strides (1, 100), got strides (4, 1)")));
  PerToken q(101, 512);  // aligned m = 104: a column stride of m is not enough
  q.scales.strides = {1, 101};
  EXPECT_THAT(error_of([&] { q.run(); }, ErrorKind::kValueError),
              HasSubstr("with strides (1, 104), got strides (1, 101)"));
}

// The kernel reads x while it writes the values and the scales: none of the three may share memory (an in-place cast
// into x's own bytes used to pass every check).
TEST(PerTokenValidation, OutputsMustNotOverlapXOrEachOther) {
  PerToken p(64, 256);
  p.out.data = fake(kX);
  EXPECT_THAT(error_of([&] { p.run(); }, ErrorKind::kValueError),
              AllOf(HasSubstr("per_token_cast_to_fp8: out must be memory that does not overlap x's (x is "
                              "bfloat16[64, 256] strides (256, 1) on cuda:0), got an overlap (out is "),
                    HasSubstr("float8_e4m3fn[64, 256]")));
  p = PerToken(64, 256);
  p.out.data = fake(kX + 64 * 256 * 2 - 16);  // its first bytes over x's last
  EXPECT_THAT(error_of([&] { p.run(); }, ErrorKind::kValueError),
              HasSubstr("out must be memory that does not overlap x's"));
  p = PerToken(64, 256);
  p.scales.data = fake(kX + 1024);
  EXPECT_THAT(error_of([&] { p.run(); }, ErrorKind::kValueError),
              HasSubstr("out_scales must be memory that does not overlap x's"));
  p = PerToken(64, 256);
  p.scales.data = fake(kOut + 64 * 256 - 16);  // the values' last 16 bytes
  EXPECT_THAT(error_of([&] { p.run(); }, ErrorKind::kValueError),
              HasSubstr("out_scales must be memory that does not overlap out's (out is float8_e4m3fn[64, 256]"));
  // Right after x, and right after out: every check passes (no driver here).
  p = PerToken(64, 256);
  p.out.data = fake(kX + 64 * 256 * 2);
  p.scales.data = fake(kX + 64 * 256 * 3);
  EXPECT_FALSE(error_of([&] { p.run(); }, ErrorKind::kCudaError).empty());
}

TEST(PerTokenValidation, ChecksComeInOrderDtypeDeviceShapeLayout) {
  // Several things wrong at once: the dtype is reported first.
  PerToken p(64, 256);
  p.x.dtype = DType::kFloat32;
  p.x.device_kind = DeviceKind::kCpu;
  p.x.data = fake(kX + 2);
  EXPECT_THAT(error_of([&] { p.run(); }, ErrorKind::kTypeError), HasSubstr("x must be bfloat16"));
}

TEST(PerTokenValidation, EmptyProblemsAreNoOpsWithoutAGpu) {
  // m == 0: nothing is compiled or launched (this machine has no driver: reaching the JIT would throw).
  PerToken p(0, 7168);
  EXPECT_NO_THROW(p.run());
  p.x.data = nullptr;  // torch may hand out null for empty tensors
  p.out.data = nullptr;
  p.scales.data = nullptr;
  EXPECT_NO_THROW(p.run());
  PerToken q(16, 0);
  EXPECT_NO_THROW(q.run());
  // An empty problem is still validated.
  PerToken r(0, 7168);
  r.x.dtype = DType::kFloat32;
  EXPECT_THAT(error_of([&] { r.run(); }, ErrorKind::kTypeError), HasSubstr("x must be bfloat16"));
}

TEST(PerTokenValidation, ScalesStorageHelper) {
  EXPECT_EQ(per_token_scales_storage(4096, 7168), 56 * 4096);
  EXPECT_EQ(per_token_scales_storage(1, 128), 4);
  EXPECT_EQ(per_token_scales_storage(4097, 512), 4 * 4100);
  EXPECT_EQ(per_token_scales_storage(0, 512), 0);
  EXPECT_THAT(error_of([] { per_token_scales_storage(16, 100); }, ErrorKind::kValueError),
              HasSubstr("per_token_scales_storage: k must be a non-negative multiple of 128, got 100"));
  EXPECT_THAT(error_of([] { per_token_scales_storage(-1, 128); }, ErrorKind::kValueError),
              HasSubstr("m must be >= 0, got -1"));
}

// ---- per_block_cast_to_fp8 ---------------------------------------------------------------------------------

TEST(PerBlockValidation, DtypesDevicesShapes) {
  PerBlock p(300, 256);
  p.x.dtype = DType::kFloat32;
  EXPECT_THAT(error_of([&] { p.run(); }, ErrorKind::kTypeError),
              HasSubstr("per_block_cast_to_fp8: x must be bfloat16, got float32"));
  p = PerBlock(300, 256);
  p.scales.device_kind = DeviceKind::kCpu;
  EXPECT_THAT(error_of([&] { p.run(); }, ErrorKind::kValueError),
              HasSubstr("per_block_cast_to_fp8: out_scales must be on a CUDA device, got cpu"));
  p = PerBlock(300, 256);
  p.out.device = 2;
  EXPECT_THAT(error_of([&] { p.run(); }, ErrorKind::kValueError),
              HasSubstr("out must be on the same device as x (cuda:0), got cuda:2"));
  p = PerBlock(300, 256);
  p.x = view(kX, DType::kBFloat16, {300, 320});
  p.out = view(kOut, DType::kFloat8E4M3, {300, 320});
  EXPECT_THAT(error_of([&] { p.run(); }, ErrorKind::kValueError),
              HasSubstr("per_block_cast_to_fp8: x.size(1) (k) must be a multiple of 128, got 320"));
  p = PerBlock(300, 256);
  p.scales = view(kScales, DType::kFloat32, {2, 2});  // ceil(300 / 128) == 3
  EXPECT_THAT(error_of([&] { p.run(); }, ErrorKind::kValueError),
              HasSubstr("out_scales must be of shape (3, 2) (ceil(n / 128), k / 128), got shape (2, 2)"));
}

TEST(PerBlockValidation, LayoutAndAlignment) {
  PerBlock p(300, 256);
  p.x.strides = {300, 1};
  EXPECT_THAT(error_of([&] { p.run(); }, ErrorKind::kValueError),
              HasSubstr("x must be rows 16-byte aligned (stride(0) a multiple of 8), got stride(0) == 300"));
  p = PerBlock(300, 256);
  p.scales.strides = {1, 3};  // column-major
  EXPECT_THAT(error_of([&] { p.run(); }, ErrorKind::kValueError),
              HasSubstr("per_block_cast_to_fp8: out_scales must be contiguous (row-major strides (2, 1)), got strides (1, 3)"));
  p = PerBlock(300, 256);
  p.scales.data = fake(kScales + 2);
  EXPECT_THAT(error_of([&] { p.run(); }, ErrorKind::kValueError), HasSubstr("out_scales must be 4-byte aligned"));
  p = PerBlock(300, 256);
  p.x.data = fake(kX + 4);
  EXPECT_THAT(error_of([&] { p.run(); }, ErrorKind::kValueError), HasSubstr("x must be 16-byte aligned"));
}

TEST(PerBlockValidation, OutputsMustNotOverlapXOrEachOther) {
  PerBlock p(300, 256);
  p.out.data = fake(kX + 4096);
  EXPECT_THAT(error_of([&] { p.run(); }, ErrorKind::kValueError),
              HasSubstr("per_block_cast_to_fp8: out must be memory that does not overlap x's (x is "
                        "bfloat16[300, 256]"));
  p = PerBlock(300, 256);
  p.scales.data = fake(kX);
  EXPECT_THAT(error_of([&] { p.run(); }, ErrorKind::kValueError),
              HasSubstr("out_scales must be memory that does not overlap x's"));
  p = PerBlock(300, 256);
  p.scales.data = fake(kOut + 300 * 256 - 4);
  EXPECT_THAT(error_of([&] { p.run(); }, ErrorKind::kValueError),
              HasSubstr("out_scales must be memory that does not overlap out's"));
  p = PerBlock(300, 256);
  p.scales.data = fake(kOut + 300 * 256);  // right after the values: no overlap
  EXPECT_FALSE(error_of([&] { p.run(); }, ErrorKind::kCudaError).empty());
  // Nothing is written for an empty problem: nothing can overlap.
  PerBlock q(0, 256);
  q.out.data = fake(kX);
  EXPECT_NO_THROW(q.run());
}

TEST(PerBlockValidation, EmptyProblemsAreNoOps) {
  PerBlock p(0, 7168);
  EXPECT_NO_THROW(p.run());
  PerBlock q(7168, 0);
  EXPECT_NO_THROW(q.run());
}

// ---- to_mn_major_scales --------------------------------------------------------------------------------------

// A valid conversion [mn, g]: row-major sf, MN-major TMA-aligned out.
struct MnMajor {
  int64_t mn, g;
  TensorView sf, out;
  MnMajor(int64_t mn_, int64_t g_) : mn(mn_), g(g_) {
    sf = view(kX, DType::kFloat32, {mn, g});
    out = view(kScales, DType::kFloat32, {mn, g});
    out.strides = {1, get_tma_aligned_size(mn, 4)};
  }
  void run() const { to_mn_major_scales(sf, out); }
};

TEST(MnMajorScalesValidation, DtypesDevicesShapes) {
  MnMajor p(37, 56);
  p.sf.dtype = DType::kBFloat16;
  EXPECT_THAT(error_of([&] { p.run(); }, ErrorKind::kTypeError),
              HasSubstr("to_mn_major_scales: sf must be float32, got bfloat16"));
  p = MnMajor(37, 56);
  p.out.device = 1;
  EXPECT_THAT(error_of([&] { p.run(); }, ErrorKind::kValueError), HasSubstr("to_mn_major_scales: out must be on the same device as sf (cuda:0), got cuda:1"));
  p = MnMajor(37, 56);
  p.out.shape = {37, 55};
  EXPECT_THAT(error_of([&] { p.run(); }, ErrorKind::kValueError),
              HasSubstr("to_mn_major_scales: out must be of shape (37, 56) (the shape of sf), got shape (37, 55)"));
}

TEST(MnMajorScalesValidation, Layouts) {
  MnMajor p(37, 56);
  p.sf.strides = {1, 40};  // sf already MN-major: its rows are not dense
  EXPECT_THAT(error_of([&] { p.run(); }, ErrorKind::kValueError), HasSubstr("to_mn_major_scales: sf must be"));
  p = MnMajor(37, 56);
  p.out.strides = {56, 1};  // out row-major
  EXPECT_THAT(error_of([&] { p.run(); }, ErrorKind::kValueError),
              AllOf(HasSubstr("to_mn_major_scales: out must be MN-major and TMA-aligned"), HasSubstr("(row-major)")));
  p = MnMajor(37, 56);
  p.out.strides = {1, 38};  // not a multiple of 4
  EXPECT_THAT(error_of([&] { p.run(); }, ErrorKind::kValueError),
              HasSubstr("to_mn_major_scales: out must be MN-major and TMA-aligned: stride(1) >= mn == 37 and a "
                        "multiple of 4"));
  // Padded rows of sf and a wider column stride of out are accepted (the checks the function runs, called
  // directly: a valid problem would go on to launch, which these fake pointers must never reach).
  TensorView sf = view(kX, DType::kFloat32, {37, 56});
  sf.strides = {60, 1};
  EXPECT_EQ(ops::check_rows_dense(ops::Arg{"f", "sf"}, sf, 4), 60);
  TensorView out = view(kScales, DType::kFloat32, {37, 56});
  out.strides = {1, 64};
  EXPECT_EQ(ops::check_mn_major_scales(ops::Arg{"f", "out"}, out, 37, 56, "mn"), 64);
  out.strides = {1, 40};
  EXPECT_EQ(ops::check_mn_major_scales(ops::Arg{"f", "out"}, out, 37, 56, "mn"), 40);
}

TEST(MnMajorScalesValidation, AlignmentAndOverlap) {
  MnMajor p(37, 56);
  p.out.data = fake(kScales + 4);
  EXPECT_THAT(error_of([&] { p.run(); }, ErrorKind::kValueError),
              HasSubstr("to_mn_major_scales: out must be 16-byte aligned"));
  p = MnMajor(37, 56);
  p.sf.data = fake(kX + 2);
  EXPECT_THAT(error_of([&] { p.run(); }, ErrorKind::kValueError),
              HasSubstr("to_mn_major_scales: sf must be 4-byte aligned"));
  p = MnMajor(37, 56);
  p.out.data = fake(kX + 64);  // inside sf's 37 x 56 floats
  EXPECT_THAT(error_of([&] { p.run(); }, ErrorKind::kValueError),
              AllOf(HasSubstr("to_mn_major_scales: out must be memory that does not overlap sf's (sf is "
                              "float32[37, 56]"),
                    HasSubstr("got an overlap")));
}

TEST(MnMajorScalesValidation, EmptyProblemsAreNoOpsWithoutAGpu) {
  MnMajor p(0, 56);
  EXPECT_NO_THROW(p.run());
  MnMajor q(37, 0);
  EXPECT_NO_THROW(q.run());
}

// ---- the reusable checks ------------------------------------------------------------------------------------

TEST(ValidateHelpers, RowsDenseIgnoresStridesThatAreNeverUsed) {
  const ops::Arg a{"f", "t"};
  TensorView one_row = view(kX, DType::kBFloat16, {1, 256});
  one_row.strides = {3, 1};  // the stride of a single row is never used
  EXPECT_EQ(ops::check_rows_dense(a, one_row, 16), 256);
  TensorView padded = view(kX, DType::kBFloat16, {4, 256});
  padded.strides = {264, 1};
  EXPECT_EQ(ops::check_rows_dense(a, padded, 16), 264);
  TensorView empty = view(kX, DType::kBFloat16, {0, 256});
  empty.strides = {0, 0};
  EXPECT_EQ(ops::check_rows_dense(a, empty, 16), 256);
}

TEST(ValidateHelpers, StridesOfSizeOneDimensionsAreIgnored) {
  const ops::Arg a{"f", "scales"};
  TensorView s = view(kScales, DType::kFloat32, {1, 56});  // m == 1: stride(0) unused
  s.strides = {56, 4};
  EXPECT_NO_THROW(ops::check_strides(a, s, {1, 4}, "the layout"));
  TensorView c = view(kScales, DType::kFloat32, {4096, 1});  // one column: stride(1) unused
  c.strides = {1, 1};
  EXPECT_NO_THROW(ops::check_strides(a, c, {1, 4096}, "the layout"));
}

// Byte spans run from the first element to one past the last, by shape and strides of any layout: touching
// spans do not overlap, a transposed view inside another's span does, size-one dimensions add nothing.
TEST(ValidateHelpers, SpansOverlapByShapeAndStrides) {
  const TensorView rows = view(kScales, DType::kFloat32, {4, 8});  // 32 floats: [kScales, kScales + 128)
  EXPECT_FALSE(ops::spans_overlap(rows, view(kScales + 128, DType::kFloat32, {4, 8})));
  EXPECT_TRUE(ops::spans_overlap(rows, view(kScales + 124, DType::kFloat32, {4, 8})));
  TensorView mn_major = view(kScales - 128, DType::kFloat32, {4, 8});  // strides (1, 4): 32 floats again
  mn_major.strides = {1, 4};
  EXPECT_FALSE(ops::spans_overlap(rows, mn_major));
  mn_major.strides = {1, 5};  // a padded column stride: 39 floats, 28 bytes into rows' span
  EXPECT_TRUE(ops::spans_overlap(mn_major, rows));
  TensorView one_row = view(kScales + 128, DType::kFloat32, {1, 8});
  one_row.strides = {1 << 20, 1};  // stride(0) of a single row is never stepped along
  EXPECT_FALSE(ops::spans_overlap(rows, one_row));
}

// Negative strides span downwards from the data pointer; a tensor without elements overlaps nothing.
TEST(ValidateHelpers, CheckNoOverlapSeesEitherDirectionAndSkipsEmptyTensors) {
  const ops::Arg out{"my_op", "out"};
  const TensorView rows = view(kScales, DType::kFloat32, {4, 8});  // [kScales, kScales + 128)
  TensorView reversed = view(kScales + 256, DType::kFloat32, {4, 8});
  reversed.strides = {-8, 1};  // rows from kScales + 256 down to kScales + 160
  EXPECT_NO_THROW(ops::check_no_overlap(out, reversed, "x", rows));
  reversed.data = fake(kScales + 200);  // down to kScales + 104: into rows' last 24 bytes
  EXPECT_TRUE(ops::spans_overlap(reversed, rows));
  EXPECT_THAT(error_of([&] { ops::check_no_overlap(out, reversed, "x", rows); }, ErrorKind::kValueError),
              HasSubstr("my_op: out must be memory that does not overlap x's (x is float32[4, 8] strides (8, 1) on "
                        "cuda:0), got an overlap (out is float32[4, 8] strides (-8, 1) on cuda:0)"));
  EXPECT_NO_THROW(ops::check_no_overlap(out, view(kScales, DType::kFloat32, {0, 8}), "x", rows));
  EXPECT_NO_THROW(ops::check_no_overlap(out, rows, "x", view(kScales, DType::kFloat32, {4, 0})));
  // Made-up shapes spanning more bytes than 64 bits count (nothing is read) are measured without overflowing: they
  // meet whatever lies above their start, and nothing below it.
  TensorView huge = view(kX, DType::kBFloat16, {4, int64_t{1} << 60});
  huge.strides = {int64_t{1} << 62, 1};
  EXPECT_TRUE(ops::spans_overlap(huge, view(kOut, DType::kFloat32, {4})));
  EXPECT_FALSE(ops::spans_overlap(huge, view(kX - 64, DType::kFloat32, {16})));
}

TEST(ValidateHelpers, MessagesNameFunctionArgumentExpectedAndGiven) {
  const ops::Arg a{"my_gemm", "b"};
  TensorView t = view(kX, DType::kFloat32, {2, 3});
  EXPECT_THAT(error_of([&] { ops::check_dtype(a, t, DType::kFloat8E4M3); }, ErrorKind::kTypeError),
              HasSubstr("my_gemm: b must be float8_e4m3fn, got float32 (b is float32[2, 3] strides (3, 1) on cuda:0)"));
  EXPECT_THAT(error_of([&] { ops::check_shape(a, t, {2, 4}, nullptr); }, ErrorKind::kValueError),
              HasSubstr("my_gemm: b must be of shape (2, 4), got shape (2, 3)"));
  int64_t dims[] = {7};
  EXPECT_EQ(ops::format_dims(dims, 1), "(7,)");
}

// ---- settings -------------------------------------------------------------------------------------------------

TEST(Settings, NumSmsAndPdl) {
  EXPECT_EQ(get_num_sms(), 0);
  set_num_sms(100);
  EXPECT_EQ(get_num_sms(), 100);
  set_num_sms(0);
  EXPECT_EQ(get_num_sms(), 0);
  EXPECT_THAT(error_of([] { set_num_sms(-3); }, ErrorKind::kValueError),
              HasSubstr("set_num_sms: num_sms must be >= 0 (0: all of the device's SMs), got -3"));
  EXPECT_EQ(get_num_sms(), 0);
  EXPECT_FALSE(get_pdl());
  set_pdl(true);
  EXPECT_TRUE(get_pdl());
  set_pdl(false);
  EXPECT_FALSE(get_pdl());
}

}  // namespace
}  // namespace kiln
