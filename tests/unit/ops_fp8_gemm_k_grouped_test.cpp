// The k-grouped weight-gradient GEMM (k_grouped_fp8_gemm_nt_contiguous) on the host: every check of the grouped
// tensors (one case per check, each naming the function, the argument, what was expected and what was given), the
// per-group checks it inherits from fp8_gemm_nt_wgrad (naming the group), and that a valid call reaches the device
// (which this machine lacks) only after all of them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kiln/error.hpp"
#include "kiln/ops.hpp"
#include "test_support.hpp"

namespace kiln {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using kiln::test::error_of;
using kiln::test::ptr;

// A valid grouped problem at distinct, 256-byte-aligned fake device addresses: groups of ks tokens, a and b flat,
// their scales MN-major and TMA-aligned over all groups' K blocks, d and c float32 [G, m, n].
struct Grouped {
  TensorView a, sfa, b, sfb, d, c;
  std::vector<int64_t> ks;
  Grouped(int64_t m, int64_t n, std::vector<int64_t> counts) : ks(std::move(counts)) {
    int64_t total = 0;
    for (int64_t k : ks) total += k;
    const auto groups = static_cast<int64_t>(ks.size());
    a = TensorView::contiguous(ptr(0x10000000), DType::kFloat8E4M3, {m * total});
    b = TensorView::contiguous(ptr(0x20000000), DType::kFloat8E4M3, {n * total});
    sfa = TensorView::contiguous(ptr(0x30000000), DType::kFloat32, {m, total / 128});
    sfa.strides = {1, get_tma_aligned_size(m, 4), 0, 0};
    sfb = TensorView::contiguous(ptr(0x40000000), DType::kFloat32, {n, total / 128});
    sfb.strides = {1, get_tma_aligned_size(n, 4), 0, 0};
    d = TensorView::contiguous(ptr(0x50000000), DType::kFloat32, {groups, m, n});
    c = TensorView::contiguous(ptr(0x60000000), DType::kFloat32, {groups, m, n});
  }
  void run(const TensorView* with_c) const { k_grouped_fp8_gemm_nt_contiguous(a, sfa, b, sfb, d, ks, with_c); }
};

// The error after `change` of a valid 4-group problem (m = 256, n = 576, 1024, 384, 0 and 640 tokens), with C.
std::string error_with(const std::function<void(Grouped&)>& change, ErrorKind kind = ErrorKind::kValueError) {
  Grouped g(256, 576, {1024, 384, 0, 640});
  change(g);
  const std::string e = error_of([&] { g.run(&g.c); }, kind);
  EXPECT_THAT(e, HasSubstr("k_grouped_fp8_gemm_nt_contiguous: "));
  return e;
}

TEST(Fp8GemmKGroupedValidate, Dtypes) {
  EXPECT_THAT(error_with([](Grouped& g) { g.a.dtype = DType::kBFloat16; }, ErrorKind::kTypeError),
              HasSubstr("a must be float8_e4m3fn, got bfloat16"));
  EXPECT_THAT(error_with([](Grouped& g) { g.sfb.dtype = DType::kBFloat16; }, ErrorKind::kTypeError),
              HasSubstr("sfb must be float32"));
  EXPECT_THAT(error_with([](Grouped& g) { g.d.dtype = DType::kBFloat16; }, ErrorKind::kTypeError),
              HasSubstr("d must be float32"));
  EXPECT_THAT(error_with([](Grouped& g) { g.c.dtype = DType::kBFloat16; }, ErrorKind::kTypeError),
              HasSubstr("c must be float32"));
}

TEST(Fp8GemmKGroupedValidate, DevicesAndRanks) {
  EXPECT_THAT(error_with([](Grouped& g) { g.b.device = 1; }),
              HasSubstr("b must be on the same device as a (cuda:0), got cuda:1"));
  EXPECT_THAT(error_with([](Grouped& g) { g.a.device_kind = DeviceKind::kCpu; }), HasSubstr("a must be"));
  EXPECT_THAT(error_with([](Grouped& g) { g.a = TensorView::contiguous(g.a.data, g.a.dtype, {256, 2048}); }),
              HasSubstr("a must be 1-dimensional, got 2 dimensions"));
  EXPECT_THAT(error_with([](Grouped& g) { g.d = TensorView::contiguous(g.d.data, g.d.dtype, {256, 576}); }),
              HasSubstr("d must be 3-dimensional, got 2 dimensions"));
  EXPECT_THAT(error_with([](Grouped& g) { g.c = TensorView::contiguous(g.c.data, g.c.dtype, {4, 256, 584}); }),
              HasSubstr("c must be of shape (4, 256, 576) (groups, m, n), as d"));
}

TEST(Fp8GemmKGroupedValidate, TokenCounts) {
  EXPECT_THAT(error_with([](Grouped& g) { g.ks.pop_back(); }),
              HasSubstr("ks must hold one token count per group (d.size(0) == 4), got 3 counts"));
  EXPECT_THAT(error_with([](Grouped& g) { g.ks[1] = 400; }),
              HasSubstr("ks[1] must be a non-negative multiple of 128 (a group's tokens are whole blocks of the 1x128 "
                        "scales), got 400"));
  EXPECT_THAT(error_with([](Grouped& g) { g.ks[2] = -128; }),
              HasSubstr("ks[2] must be a token count in 0..2147483647, got -128"));
  // Counts past 32 bits, or summing past them, are refused before m * sum(ks) is formed (it used to wrap around:
  // ks = {2^62 x 4} summed to 0 and passed with empty operands).
  EXPECT_THAT(error_with([](Grouped& g) { g.ks[1] = int64_t{1} << 56; }),
              HasSubstr("ks[1] must be a token count in 0..2147483647, got 72057594037927936"));
  constexpr int64_t kHuge = int64_t{1} << 62;
  EXPECT_THAT(error_with([](Grouped& g) { g.ks = {kHuge, kHuge, kHuge, kHuge}; }),
              HasSubstr("ks[0] must be a token count in 0..2147483647, got 4611686018427387904"));
  EXPECT_THAT(error_with([](Grouped& g) { g.ks = {1024, 2147483520, 128, 0}; }),
              HasSubstr("ks must hold at most 2147483647 tokens in all, got 2147484544 in ks[0..1]"));
  EXPECT_THAT(error_with([](Grouped& g) { g.d.shape[1] = g.c.shape[1] = int64_t{1} << 40; }),
              HasSubstr("d must be at most 2147483647 rows and columns (m and n), got shape (4, 1099511627776, 576)"));
  // Counts that disagree with the operands' sizes.
  EXPECT_THAT(error_with([](Grouped& g) { g.ks[2] = 128; }),
              HasSubstr("a must be of 557056 elements (m * sum(ks): group g's rows of ks[g] tokens, row-major, after "
                        "the groups before it), got size 524288"));
}

TEST(Fp8GemmKGroupedValidate, OperandsAndScales) {
  EXPECT_THAT(error_with([](Grouped& g) { g.b = TensorView::contiguous(g.b.data, g.b.dtype, {576 * 2048 - 16}); }),
              HasSubstr("b must be of 1179648 elements (n * sum(ks)"));
  EXPECT_THAT(error_with([](Grouped& g) { g.a.strides[0] = 2; }), HasSubstr("a must be contiguous"));
  EXPECT_THAT(error_with([](Grouped& g) { g.sfa.shape[1] = 15; }),
              HasSubstr("sfa must be of shape (256, 16) (m, sum(ks) / 128), got shape (256, 15)"));
  EXPECT_THAT(error_with([](Grouped& g) { g.sfb.strides = {16, 1, 0, 0}; }), HasSubstr("sfb must be"));
}

TEST(Fp8GemmKGroupedValidate, GroupsOfDAndC) {
  EXPECT_THAT(error_with([](Grouped& g) { g.d.strides = {256 * 576 + 2, 576, 1, 0}; }),
              HasSubstr("d must be groups that do not overlap: stride(0) >= (m - 1) * stride(1) + n, a multiple of 4 "
                        "(each group's D 16-byte aligned), got strides (147458, 576, 1)"));
  EXPECT_THAT(error_with([](Grouped& g) { g.d.strides = {576 * 200, 576, 1, 0}; }),
              HasSubstr("d must be groups that do not overlap"));
  EXPECT_THAT(error_with([](Grouped& g) { g.d.strides = {256 * 576 * 2, 576 * 2, 2, 0}; }),
              HasSubstr("d must be of dense rows: stride(2) == 1, got strides (294912, 1152, 2)"));
  EXPECT_THAT(error_with([](Grouped& g) { g.c.strides = {256 * 576 * 2, 1, 256, 0}; }),
              HasSubstr("c must be of dense rows: stride(2) == 1, got strides (294912, 1, 256)"));
  EXPECT_THAT(error_with([](Grouped& g) { g.c.data = static_cast<char*>(g.d.data) + 4 * 576; }),
              HasSubstr("c must be d itself or memory that does not overlap d's"));
  // Each group's own checks (fp8_gemm_nt_wgrad's) name the group: D's rows 16-byte apart.
  EXPECT_THAT(error_with([](Grouped& g) { g.d.strides = {256 * 578, 578, 1, 0}; }),
              AllOf(HasSubstr("d must be"), HasSubstr("(group 0 of 4, ks[0] = 1024)")));
  // n a multiple of 8, through the first group's checks.
  EXPECT_THAT(error_of([] {
                Grouped g(64, 580, {128});
                g.run(nullptr);
              }),
              AllOf(HasSubstr("n) that is a multiple of 8"), HasSubstr("(group 0 of 1, ks[0] = 128)")));
}

// Every group's D may share memory with no group's A, B or scales (each group's views are checked again, but an
// overlap across groups would not show there).
TEST(Fp8GemmKGroupedValidate, DMustNotOverlapWhatTheKernelReads) {
  EXPECT_THAT(error_with([](Grouped& g) { g.d.data = ptr(0x10000000 + 256 * 2000); }),  // group 3's A, under D[0]
              HasSubstr("d must be memory that does not overlap a's (a is float8_e4m3fn[524288]"));
  EXPECT_THAT(error_with([](Grouped& g) { g.d.data = ptr(0x20000000 - 3 * 256 * 576 * 4); }),  // D[3] over group 0's B
              HasSubstr("d must be memory that does not overlap b's"));
  EXPECT_THAT(error_with([](Grouped& g) { g.d.data = ptr(0x30000000); }),
              HasSubstr("d must be memory that does not overlap sfa's"));
  EXPECT_THAT(error_with([](Grouped& g) { g.d.data = ptr(0x40000000 + 1024); }),
              HasSubstr("d must be memory that does not overlap sfb's"));
  // c = d is accumulation, not an overlap.
  const Grouped g(256, 576, {1024, 384, 0, 640});
  EXPECT_FALSE(error_of([&] { g.run(&g.d); }, ErrorKind::kCudaError).empty());
}

TEST(Fp8GemmKGroupedValidate, EmptyProblemsAreNoOpsAndValidCallsReachTheDevice) {
  EXPECT_NO_THROW(Grouped(0, 576, {128, 256}).run(nullptr));
  EXPECT_NO_THROW(Grouped(64, 0, {128, 256}).run(nullptr));
  EXPECT_NO_THROW(Grouped(64, 576, {}).run(nullptr));
  // Without a driver, a valid call fails with a CUDA error when it looks for the device: after every check.
  const Grouped g(256, 576, {1024, 384, 0, 640});
  EXPECT_FALSE(error_of([&] { g.run(&g.c); }, ErrorKind::kCudaError).empty());
  EXPECT_FALSE(error_of([&] { g.run(&g.d); }, ErrorKind::kCudaError).empty());
  EXPECT_FALSE(error_of([&] { g.run(nullptr); }, ErrorKind::kCudaError).empty());
  // All-empty groups launch nothing, but zeroing or copying D needs the device too.
  const Grouped empty(64, 576, {0, 0});
  EXPECT_NO_THROW(empty.run(&empty.d));
  EXPECT_FALSE(error_of([&] { empty.run(nullptr); }, ErrorKind::kCudaError).empty());
}

}  // namespace
}  // namespace kiln
