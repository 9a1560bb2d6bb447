// The m-grouped masked GEMM (m_grouped_fp8_gemm_nt_masked) on the host: every check of its grouped tensors and of
// expected_m (one case per check, each naming the function, the argument, what was expected and what was given), the
// checks it shares with fp8_gemm_nt on group 0's views, a valid call reaching the device (which this machine lacks)
// only after all of them; its plan (the m-grouped form's, its kernels masked); the registry's masked=1; the source it
// renders; and both compilers building its kernels for sm_90a.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "codegen/kernel_spec.hpp"
#include "compiler/compiler.hpp"
#include "kernel_compile_check.hpp"
#include "kiln/error.hpp"
#include "kiln/ops.hpp"
#include "ops/fp8_gemm.hpp"
#include "ops/fp8_gemm_heuristic.hpp"
#include "ops/registry.hpp"
#include "test_support.hpp"

namespace kiln {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using kiln::test::error_of;
using kiln::test::ptr;

// A valid problem at distinct, 256-byte-aligned fake device addresses: `groups` experts of m rows each (A [G, m, k],
// its scales MN-major per group as get_mn_major_tma_aligned_tensor writes them, D [G, m, n]) over B [G, n, k].
struct Masked {
  TensorView a, sfa, b, sfb, d, masked_m;
  int64_t expected_m = 64;
  Masked(int64_t groups, int64_t m, int64_t n, int64_t k) {
    const int64_t kb = (k + 127) / 128, aligned = get_tma_aligned_size(m, 4);
    a = TensorView::contiguous(ptr(0x10000000), DType::kFloat8E4M3, {groups, m, k});
    sfa = TensorView::contiguous(ptr(0x20000000), DType::kFloat32, {groups, m, kb});
    sfa.strides = {kb * aligned, 1, aligned, 0};
    b = TensorView::contiguous(ptr(0x30000000), DType::kFloat8E4M3, {groups, n, k});
    sfb = TensorView::contiguous(ptr(0x40000000), DType::kFloat32, {groups, (n + 127) / 128, kb});
    d = TensorView::contiguous(ptr(0x50000000), DType::kBFloat16, {groups, m, n});
    masked_m = TensorView::contiguous(ptr(0x60000000), DType::kInt32, {groups});
  }
  void run() const { m_grouped_fp8_gemm_nt_masked(a, sfa, b, sfb, d, masked_m, expected_m); }
};

// The error after `change` of a valid problem: 4 experts of 256 rows over 576 x 512.
std::string error_with(const std::function<void(Masked&)>& change, ErrorKind kind = ErrorKind::kValueError) {
  Masked g(4, 256, 576, 512);
  change(g);
  const std::string e = error_of([&] { g.run(); }, kind);
  EXPECT_THAT(e, HasSubstr("m_grouped_fp8_gemm_nt_masked: "));
  return e;
}

// Whether `change` leaves a problem every check passes (the call then stops at the device query).
bool passes_checks(const std::function<void(Masked&)>& change) {
  Masked g(4, 256, 576, 512);
  change(g);
  return !error_of([&] { g.run(); }, ErrorKind::kCudaError).empty();
}

TEST(Fp8GemmMaskedValidate, Dtypes) {
  EXPECT_THAT(error_with([](Masked& g) { g.a.dtype = DType::kBFloat16; }, ErrorKind::kTypeError),
              HasSubstr("a must be float8_e4m3fn, got bfloat16"));
  EXPECT_THAT(error_with([](Masked& g) { g.sfa.dtype = DType::kBFloat16; }, ErrorKind::kTypeError),
              HasSubstr("sfa must be float32, got bfloat16"));
  EXPECT_THAT(error_with([](Masked& g) { g.b.dtype = DType::kBFloat16; }, ErrorKind::kTypeError),
              HasSubstr("b must be float8_e4m3fn, got bfloat16"));
  EXPECT_THAT(error_with([](Masked& g) { g.sfb.dtype = DType::kBFloat16; }, ErrorKind::kTypeError),
              HasSubstr("sfb must be float32, got bfloat16"));
  EXPECT_THAT(error_with([](Masked& g) { g.d.dtype = DType::kFloat32; }, ErrorKind::kTypeError),
              HasSubstr("d must be bfloat16, got float32"));
  EXPECT_THAT(error_with([](Masked& g) { g.masked_m.dtype = DType::kInt64; }, ErrorKind::kTypeError),
              HasSubstr("masked_m must be int32, got int64"));
}

TEST(Fp8GemmMaskedValidate, Devices) {
  EXPECT_THAT(error_with([](Masked& g) { g.a.device_kind = DeviceKind::kCpu; }),
              HasSubstr("a must be on a CUDA device, got cpu"));
  EXPECT_THAT(error_with([](Masked& g) { g.masked_m.device = 1; }),
              HasSubstr("masked_m must be on the same device as a (cuda:0), got cuda:1"));
  EXPECT_THAT(error_with([](Masked& g) { g.d.device = 2; }), HasSubstr("d must be on the same device as a"));
}

TEST(Fp8GemmMaskedValidate, RanksAndShapes) {
  EXPECT_THAT(error_with([](Masked& g) { g.a = TensorView::contiguous(g.a.data, DType::kFloat8E4M3, {1024, 512}); }),
              HasSubstr("a must be 3-dimensional, got 2"));
  EXPECT_THAT(error_with([](Masked& g) { g.d.ndim = 2; }), HasSubstr("d must be 3-dimensional, got 2"));
  EXPECT_THAT(error_with([](Masked& g) { g.masked_m.ndim = 2; }), HasSubstr("masked_m must be 1-dimensional"));
  EXPECT_THAT(error_with([](Masked& g) { g.a.shape[0] = 0; }),
              AllOf(HasSubstr("a must be of shape (groups, m, k) with 1 <= groups"), HasSubstr("groups == 0")));
  EXPECT_THAT(error_with([](Masked& g) { g.b.shape[0] = 3; }),
              AllOf(HasSubstr("b must be of shape (groups, n, k) with groups == 4 and k == 512 (a's)"),
                    HasSubstr("got shape (3, 576, 512)")));
  EXPECT_THAT(error_with([](Masked& g) { g.b.shape[2] = 640; }), HasSubstr("got shape (4, 576, 640)"));
  EXPECT_THAT(error_with([](Masked& g) { g.sfa.shape[1] = 255; }),
              AllOf(HasSubstr("sfa must be of shape (4, 256, 4) (groups, m, ceil(k / 128))"),
                    HasSubstr("got shape (4, 255, 4)")));
  EXPECT_THAT(error_with([](Masked& g) { g.sfb.shape[1] = 4; }),
              HasSubstr("sfb must be of shape (4, 5, 4) (groups, ceil(n / 128), ceil(k / 128))"));
  EXPECT_THAT(error_with([](Masked& g) { g.d.shape[2] = 584; }),
              AllOf(HasSubstr("d must be of shape (4, 256, 576) (groups, m of a, n of b)"),
                    HasSubstr("got shape (4, 256, 584)")));
  EXPECT_THAT(error_with([](Masked& g) { g.masked_m.shape[0] = 5; }),
              AllOf(HasSubstr("masked_m must be of shape (4,) (groups,): each group's count of valid rows"),
                    HasSubstr("got shape (5,)")));
}

TEST(Fp8GemmMaskedValidate, MaskedMAndExpectedM) {
  EXPECT_THAT(error_with([](Masked& g) { g.masked_m.strides[0] = 2; }), HasSubstr("masked_m must be contiguous"));
  EXPECT_THAT(error_with([](Masked& g) { g.masked_m.data = ptr(0x60000002); }),
              HasSubstr("masked_m must be 4-byte aligned"));
  EXPECT_THAT(error_with([](Masked& g) { g.expected_m = -1; }),
              HasSubstr("m_grouped_fp8_gemm_nt_masked: expected_m must be >= 0 (the rows a group is expected to hold, "
                        "which picks the kernel), got -1"));
  // 0 and more than m are fine: the plan's M is clamped.
  EXPECT_TRUE(passes_checks([](Masked& g) { g.expected_m = 0; }));
  EXPECT_TRUE(passes_checks([](Masked& g) { g.expected_m = 100000; }));
}

TEST(Fp8GemmMaskedValidate, LayoutsThatLetOneMapSpanTheGroups) {
  // A's groups one after the other at m rows of its row stride (a padded row stride is fine).
  EXPECT_THAT(error_with([](Masked& g) { g.a.strides[0] += 16; }),
              AllOf(HasSubstr("a must be groups one after the other: stride(0) == m * 512 (the row stride) == 131072"),
                    HasSubstr("got strides (131088, 512, 1)")));
  EXPECT_TRUE(passes_checks([](Masked& g) { g.a.strides = {256 * 528, 528, 1, 0}; }));
  // The scales' groups one after the other, each MN-major.
  EXPECT_THAT(error_with([](Masked& g) { g.sfa.strides[0] += 4; }),
              AllOf(HasSubstr("sfa must be groups one after the other, each MN-major: strides (ceil(k / 128) * s, 1, "
                              "s), here stride(0) == 1024"),
                    HasSubstr("get_mn_major_tma_aligned_tensor(sfa)"), HasSubstr("got strides (1028, 1, 256)")));
  EXPECT_THAT(error_with([](Masked& g) { g.sfa.strides = {1024, 4, 1, 0}; }), HasSubstr("sfa must be MN-major"));
  EXPECT_TRUE(passes_checks([](Masked& g) { g.sfa.strides = {4 * 260, 1, 260, 0}; }));
  // One K block: the groups are the scale map's columns, any 16 bytes apart past m.
  const auto one_k_block = [](Masked& g) {
    g = Masked(4, 256, 576, 128);
    g.sfa.strides = {272, 1, 1, 0};
  };
  EXPECT_TRUE(passes_checks(one_k_block));
  EXPECT_THAT(error_with([&](Masked& g) {
                one_k_block(g);
                g.sfa.strides[0] = 254;
              }),
              AllOf(HasSubstr("sfa must be groups at least m == 256 floats apart and a multiple of 4"),
                    HasSubstr("got strides (254, 1, 1)")));
  // B's groups as the contiguous form's.
  EXPECT_THAT(error_with([](Masked& g) { g.b.strides[0] += 16; }),
              HasSubstr("b must be groups one after the other: strides (n * s, s, 1)"));
  EXPECT_THAT(error_with([](Masked& g) { g.sfb.strides = {20, 1, 5, 0}; }), HasSubstr("sfb must be contiguous"));
  // D's groups are planes: any multiple of 8 elements apart, not overlapping.
  EXPECT_TRUE(passes_checks([](Masked& g) { g.d.strides[0] = 256 * 576 + 64; }));
  EXPECT_THAT(error_with([](Masked& g) { g.d.strides[0] = 256 * 576 - 8; }),
              AllOf(HasSubstr("d must be groups apart by a multiple of 8 elements (16 bytes) and by at least m * 576 "
                              "(the row stride) == 147456 elements"),
                    HasSubstr("got strides (147448, 576, 1)")));
  EXPECT_THAT(error_with([](Masked& g) { g.d.strides[0] = 256 * 576 + 4; }), HasSubstr("got strides (147460, 576, 1)"));
}

TEST(Fp8GemmMaskedValidate, TheChecksOfFp8GemmNtNameThisFunction) {
  EXPECT_THAT(error_with([](Masked& g) {
                g.b.shape[1] = 580;
                g.b.strides[0] = 580 * 512;
                g.d.shape[2] = 580;
                g.d.strides = {256 * 580, 580, 1, 0};
              }),
              AllOf(HasSubstr("b must be of a size(1) (n) that is a multiple of 8, got n == 580"),
                    HasSubstr("b is float8_e4m3fn[4, 580, 512]")));  // the caller's b, not group 0's view
  EXPECT_THAT(error_with([](Masked& g) { g.a.data = ptr(0x10000008); }), HasSubstr("a must be 16-byte aligned"));
  EXPECT_THAT(error_with([](Masked& g) { g.d.strides = {256 * 580, 580, 1, 0}; }),
              HasSubstr("d must be rows 16-byte aligned"));
}

// D (every group's) may share memory with nothing the kernel reads: every group's A, B and scales (not only group
// 0's, which fp8_gemm_nt's checks see) and the counts.
TEST(Fp8GemmMaskedValidate, DMustNotOverlapWhatTheKernelReads) {
  EXPECT_THAT(error_with([](Masked& g) { g.d.data = ptr(0x10000000 + 3 * 256 * 512); }),  // group 3's A
              HasSubstr("d must be memory that does not overlap a's (a is float8_e4m3fn[4, 256, 512]"));
  EXPECT_THAT(error_with([](Masked& g) { g.d.data = ptr(0x20000000 + 3 * 4 * 256 * 4); }),  // group 3's scales
              HasSubstr("d must be memory that does not overlap sfa's"));
  EXPECT_THAT(error_with([](Masked& g) { g.d.data = ptr(0x30000000 + 2 * 576 * 512); }),
              HasSubstr("d must be memory that does not overlap b's"));
  EXPECT_THAT(error_with([](Masked& g) { g.d.data = ptr(0x40000000 - 16); }),
              HasSubstr("d must be memory that does not overlap sfb's"));
  // Group 3's D over the counts, group 0's clear of them.
  EXPECT_THAT(error_with([](Masked& g) { g.d.data = ptr(0x60000000 - 4 * 256 * 576 * 2 + 16); }),
              HasSubstr("d must be memory that does not overlap masked_m's (masked_m is int32[4]"));
  EXPECT_TRUE(passes_checks([](Masked& g) { g.d.data = ptr(0x60000000 - 4 * 256 * 576 * 2); }));
}

TEST(Fp8GemmMaskedValidate, EmptyProblemsAreNoOpsAndAValidCallReachesTheDevice) {
  EXPECT_NO_THROW(Masked(4, 0, 576, 512).run());
  EXPECT_NO_THROW(Masked(4, 256, 0, 512).run());
  EXPECT_TRUE(passes_checks([](Masked&) {}));
  EXPECT_TRUE(passes_checks([](Masked& g) { g = Masked(1, 7, 576, 512); }));
}

const ops::TargetInfo kH200{9, 0, 132, 232448};

TEST(Fp8GemmMaskedPlan, TheMGroupedPlanWithItsKernelsMasked) {
  for (int64_t n : {576, 4096, 7168})
    for (int64_t k : {512, 7168}) {
      const ops::Fp8GemmPlan contiguous = ops::fp8_gemm_m_grouped_plan(kH200, n, k);
      const ops::Fp8GemmPlan masked = ops::fp8_gemm_m_grouped_plan(kH200, n, k, {}, true);
      ASSERT_EQ(masked.kernels.size(), contiguous.kernels.size());
      ASSERT_EQ(masked.buckets.size(), contiguous.buckets.size());
      for (size_t i = 0; i < masked.kernels.size(); ++i) {
        ops::Fp8GemmConfig c = masked.kernels[i];
        EXPECT_TRUE(c.m_grouped && c.masked);
        EXPECT_THAT(c.describe(), HasSubstr(", m-grouped masked"));
        c.masked = false;
        EXPECT_EQ(c, contiguous.kernels[i]);
      }
    }
  Fp8GemmOverrides o;
  o.block_m = 256;
  EXPECT_THAT(error_of([&] { ops::fp8_gemm_m_grouped_plan(kH200, 4096, 7168, o, true); }),
              HasSubstr("m_grouped_fp8_gemm_nt_masked: block_m must be 0 (heuristic), 64 or 128 for the m-grouped form "
                        "(each m block must lie in one group), got 256"));
}

std::vector<ops::KernelUse> uses(const ops::Problem& problem) {
  return ops::kernel_uses(ops::find_op("fp8_gemm_nt"), problem, kH200);
}

TEST(Fp8GemmMaskedRegistry, PlanListsTheMaskedKernels) {
  const auto kernels =
      uses({{"m", ops::ProblemValue::range(1, 8192)}, {"n", 4096}, {"k", 7168}, {"m_grouped", 1}, {"masked", 1}});
  ASSERT_FALSE(kernels.empty());
  EXPECT_LE(kernels.size(), 8u);
  for (const ops::KernelUse& u : kernels) {
    EXPECT_THAT(u.detail, HasSubstr(", m-grouped masked"));
    EXPECT_THAT(u.spec.describe(), HasSubstr("m_grouped=true masked=true"));
    EXPECT_THAT(codegen::render_source(u.spec), HasSubstr(", false, true, true>::run(params);"));
  }
  EXPECT_THAT(error_of([] { uses({{"m", 64}, {"n", 4096}, {"k", 7168}, {"masked", 1}}); }),
              HasSubstr("fp8_gemm_nt: parameter masked=1 needs m_grouped=1 (the masked kernels are m-grouped ones), "
                        "got m_grouped=0"));
  EXPECT_THAT(error_of([] { uses({{"m", 64}, {"n", 4096}, {"k", 7168}, {"m_grouped", 1}, {"masked", 3}}); }),
              HasSubstr("fp8_gemm_nt: parameter masked must be 0 or 1"));
}

TEST(Fp8GemmMaskedGolden, SourceOfOneSpec) {
  const ops::Fp8GemmPlan plan = ops::fp8_gemm_m_grouped_plan(kH200, 7168, 3072, {64, 128, 0, 0}, true);
  ASSERT_EQ(plan.kernels.size(), 1u);
  test::expect_golden_text("ops_fp8_gemm_m_grouped_masked_golden.cu",
                           codegen::render_source(ops::fp8_gemm_spec(7168, 3072, plan.kernels[0])));
}

// Both compilers build the masked kernels for sm_90a with no GPU, without spills, local memory or serialised WGMMAs:
// the plan's for one (n, k) (split-K pairs, 64- and 128-row tiles, pairs sharing A) and forced 160 and 192 columns
// at a ragged N and K.
class Fp8GemmMaskedCompile : public ::testing::TestWithParam<Backend> {
 protected:
  test::TempDir home_, state_;
};

TEST_P(Fp8GemmMaskedCompile, ThePlansKernelsAndForcedTilesBuild) {
  std::vector<std::pair<int64_t, ops::Fp8GemmConfig>> kernels;
  for (const ops::Fp8GemmConfig& c : ops::fp8_gemm_m_grouped_plan(kH200, 576, 7168, {}, true).kernels)
    kernels.push_back({7168, c});
  for (int bn : {160, 192})
    kernels.push_back({720, ops::fp8_gemm_m_grouped_plan(kH200, 576, 720, {128, bn, 0, 0}, true).kernels.at(0)});
  Fp8GemmOverrides pairs;
  pairs.block_m = 64;
  pairs.block_n = 128;
  pairs.cluster_n = 2;
  kernels.push_back({7168, ops::fp8_gemm_m_grouped_plan(kH200, 4096, 7168, pairs, true).kernels.at(0)});
  ASSERT_GE(kernels.size(), 6u);
  for (const auto& [k, c] : kernels) {
    const codegen::KernelSpec spec = ops::fp8_gemm_spec(c.cluster_n > 1 ? 4096 : 576, k, c);
    SCOPED_TRACE(spec.describe());
    test::compile_for_sm90a_and_check(GetParam(), spec, home_.path(), state_.path());
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, Fp8GemmMaskedCompile, ::testing::Values(Backend::kNvcc, Backend::kNvrtc),
                         [](const auto& info) { return std::string(to_string(info.param)); });

}  // namespace
}  // namespace kiln
