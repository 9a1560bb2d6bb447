// The m-grouped contiguous GEMM (m_grouped_fp8_gemm_nt_contiguous) on the host: every check of its grouped tensors
// (one case per check, each naming the function, the argument, what was expected and what was given), the checks it
// shares with fp8_gemm_nt, a valid call reaching the device (which this machine lacks) only after all of them; its
// plan (fp8_gemm_m_grouped_plan: the inference form's, one m block a CTA); the registry's m_grouped=1; and both
// compilers building its kernels for sm_90a.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
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

// A valid problem at distinct, 256-byte-aligned fake device addresses: m rows of A over `groups` experts of B [n, k].
struct MGrouped {
  TensorView a, sfa, b, sfb, d, m_indices;
  MGrouped(int64_t m, int64_t n, int64_t k, int64_t groups) {
    const int64_t kb = (k + 127) / 128;
    a = TensorView::contiguous(ptr(0x10000000), DType::kFloat8E4M3, {m, k});
    sfa = TensorView::contiguous(ptr(0x20000000), DType::kFloat32, {m, kb});
    sfa.strides = {1, get_tma_aligned_size(m, 4), 0, 0};
    b = TensorView::contiguous(ptr(0x30000000), DType::kFloat8E4M3, {groups, n, k});
    sfb = TensorView::contiguous(ptr(0x40000000), DType::kFloat32, {groups, (n + 127) / 128, kb});
    d = TensorView::contiguous(ptr(0x50000000), DType::kBFloat16, {m, n});
    m_indices = TensorView::contiguous(ptr(0x60000000), DType::kInt32, {m});
  }
  void run() const { m_grouped_fp8_gemm_nt_contiguous(a, sfa, b, sfb, d, m_indices); }
};

// The error after `change` of a valid problem: 512 rows over 4 experts of 576 x 512.
std::string error_with(const std::function<void(MGrouped&)>& change, ErrorKind kind = ErrorKind::kValueError) {
  MGrouped g(512, 576, 512, 4);
  change(g);
  const std::string e = error_of([&] { g.run(); }, kind);
  EXPECT_THAT(e, HasSubstr("m_grouped_fp8_gemm_nt_contiguous: "));
  return e;
}

TEST(Fp8GemmMGroupedValidate, Dtypes) {
  EXPECT_THAT(error_with([](MGrouped& g) { g.b.dtype = DType::kBFloat16; }, ErrorKind::kTypeError),
              HasSubstr("b must be float8_e4m3fn, got bfloat16"));
  EXPECT_THAT(error_with([](MGrouped& g) { g.sfb.dtype = DType::kBFloat16; }, ErrorKind::kTypeError),
              HasSubstr("sfb must be float32, got bfloat16"));
  EXPECT_THAT(error_with([](MGrouped& g) { g.m_indices.dtype = DType::kInt64; }, ErrorKind::kTypeError),
              HasSubstr("m_indices must be int32, got int64"));
  EXPECT_THAT(error_with([](MGrouped& g) { g.a.dtype = DType::kBFloat16; }, ErrorKind::kTypeError),
              HasSubstr("a must be float8_e4m3fn, got bfloat16"));
  EXPECT_THAT(error_with([](MGrouped& g) { g.d.dtype = DType::kFloat32; }, ErrorKind::kTypeError),
              HasSubstr("d must be bfloat16, got float32"));
}

TEST(Fp8GemmMGroupedValidate, Devices) {
  EXPECT_THAT(error_with([](MGrouped& g) { g.a.device_kind = DeviceKind::kCpu; }),
              HasSubstr("a must be on a CUDA device, got cpu"));
  EXPECT_THAT(error_with([](MGrouped& g) { g.m_indices.device = 1; }),
              HasSubstr("m_indices must be on the same device as a (cuda:0), got cuda:1"));
  EXPECT_THAT(error_with([](MGrouped& g) { g.b.device = 2; }), HasSubstr("b must be on the same device as a"));
}

TEST(Fp8GemmMGroupedValidate, ShapesOfTheGroupedTensors) {
  EXPECT_THAT(error_with([](MGrouped& g) { g.b = TensorView::contiguous(g.b.data, DType::kFloat8E4M3, {576, 512}); }),
              HasSubstr("b must be 3-dimensional, got 2"));
  EXPECT_THAT(error_with([](MGrouped& g) { g.b.shape[2] = 640; }),
              AllOf(HasSubstr("b must be of shape (groups, n, k) with k == 512 (a's k)"), HasSubstr("(4, 576, 640)")));
  EXPECT_THAT(error_with([](MGrouped& g) { g.b.shape[0] = 0; }),
              AllOf(HasSubstr("b must be of shape (groups, n, k) with 1 <= groups"), HasSubstr("groups == 0")));
  EXPECT_THAT(error_with([](MGrouped& g) { g.sfb.shape[0] = 3; }),
              AllOf(HasSubstr("sfb must be of shape (4, 5, 4) (groups, ceil(n / 128), ceil(k / 128))"),
                    HasSubstr("(3, 5, 4)")));
  EXPECT_THAT(error_with([](MGrouped& g) { g.sfb = TensorView::contiguous(g.sfb.data, DType::kFloat32, {5, 4}); }),
              HasSubstr("sfb must be 3-dimensional, got 2"));
  EXPECT_THAT(error_with([](MGrouped& g) { g.m_indices.shape[0] = 500; }),
              AllOf(HasSubstr("m_indices must be of shape (512,) (m,): the group of each of a's rows"),
                    HasSubstr("got shape (500,)")));
  EXPECT_THAT(error_with([](MGrouped& g) { g.m_indices.ndim = 2; }), HasSubstr("m_indices must be 1-dimensional"));
}

TEST(Fp8GemmMGroupedValidate, LayoutsOfTheGroupedTensors) {
  // Experts' B one after the other: one tensor map reads them all.
  EXPECT_THAT(error_with([](MGrouped& g) { g.b.strides = {576 * 512 + 16, 512, 1, 0}; }),
              AllOf(HasSubstr("b must be groups one after the other: strides (n * s, s, 1)"),
                    HasSubstr("got strides (294928, 512, 1)")));
  // A padded row stride is fine when the groups follow at n of those rows (the call gets as far as the device).
  EXPECT_FALSE(error_of([] {
                 MGrouped g(512, 576, 512, 4);
                 g.b.strides = {576 * 528, 528, 1, 0};
                 g.run();
               },
                        ErrorKind::kCudaError)
                   .empty());
  EXPECT_THAT(error_with([](MGrouped& g) { g.b.strides = {576 * 520, 520, 1, 0}; }),
              AllOf(HasSubstr("b must be rows 16-byte aligned"), HasSubstr("got stride(0) == 520")));
  EXPECT_THAT(error_with([](MGrouped& g) { g.sfb.strides = {20, 1, 5, 0}; }), HasSubstr("sfb must be contiguous"));
  EXPECT_THAT(error_with([](MGrouped& g) { g.m_indices.strides[0] = 2; }), HasSubstr("m_indices must be contiguous"));
  EXPECT_THAT(error_with([](MGrouped& g) { g.m_indices.data = ptr(0x60000002); }),
              HasSubstr("m_indices must be 4-byte aligned"));
}

TEST(Fp8GemmMGroupedValidate, TheChecksOfFp8GemmNtNameThisFunction) {
  EXPECT_THAT(error_with([](MGrouped& g) { g.d.shape[1] = 584; }),
              AllOf(HasSubstr("d must be of shape (512, 576) (m of a, n of b)"), HasSubstr("(512, 584)")));
  EXPECT_THAT(error_with([](MGrouped& g) { g.sfa.strides = {4, 1, 0, 0}; }), HasSubstr("sfa must be MN-major"));
  EXPECT_THAT(error_with([](MGrouped& g) {
                g.b.shape[1] = 580;
                g.b.strides[0] = 580 * 512;
                g.d.shape[1] = 580;
              }),
              AllOf(HasSubstr("b must be of a size(1) (n) that is a multiple of 8, got n == 580"),
                    HasSubstr("b is float8_e4m3fn[4, 580, 512]")));  // the caller's b, not group 0's view
  EXPECT_THAT(error_with([](MGrouped& g) {
                g.a.shape[1] = 504;
                g.a.strides[0] = 504;
                g.b.shape[2] = 504;
                g.b.strides = {576 * 504, 504, 1, 0};
              }),
              HasSubstr("a must be of a size(1) (k) that is a multiple of 16, got k == 504"));
  EXPECT_THAT(error_with([](MGrouped& g) { g.a.data = ptr(0x10000008); }), HasSubstr("a must be 16-byte aligned"));
}

// D may share memory with nothing the kernel reads: every expert's B and scales (not only group 0's, which
// fp8_gemm_nt's checks see), A and its scales, and the indices.
TEST(Fp8GemmMGroupedValidate, DMustNotOverlapWhatTheKernelReads) {
  EXPECT_THAT(error_with([](MGrouped& g) { g.d.data = ptr(0x10000000); }),
              HasSubstr("d must be memory that does not overlap a's"));
  EXPECT_THAT(error_with([](MGrouped& g) { g.d.data = ptr(0x30000000 + 3 * 576 * 512); }),  // expert 3's weights
              HasSubstr("d must be memory that does not overlap b's (b is float8_e4m3fn[4, 576, 512]"));
  EXPECT_THAT(error_with([](MGrouped& g) { g.d.data = ptr(0x40000000 + 256); }),  // expert 3's scales
              HasSubstr("d must be memory that does not overlap sfb's (sfb is float32[4, 5, 4]"));
  EXPECT_THAT(error_with([](MGrouped& g) { g.d.data = ptr(0x60000000 - 512 * 576 * 2 + 16); }),
              AllOf(HasSubstr("d must be memory that does not overlap m_indices's (m_indices is int32[512]"),
                    HasSubstr("got an overlap (d is bfloat16[512, 576]")));
}

TEST(Fp8GemmMGroupedValidate, EmptyProblemsAreNoOpsAndAValidCallReachesTheDevice) {
  EXPECT_NO_THROW(MGrouped(0, 576, 512, 4).run());
  EXPECT_NO_THROW(MGrouped(256, 0, 512, 4).run());
  // Every check passes; the first device query is where a machine without a GPU stops.
  EXPECT_FALSE(error_of([] { MGrouped(512, 576, 512, 4).run(); }, ErrorKind::kCudaError).empty());
}

const ops::TargetInfo kH200{9, 0, 132, 232448};

TEST(Fp8GemmMGroupedPlan, OneMBlockPerCtaAndAtMostEightKernels) {
  for (int64_t n : {576, 2112, 4096, 6144, 7168, 24576})
    for (int64_t k : {512, 2048, 7168}) {
      const ops::Fp8GemmPlan plan = ops::fp8_gemm_m_grouped_plan(kH200, n, k);
      ASSERT_FALSE(plan.kernels.empty());
      ASSERT_LE(plan.kernels.size(), static_cast<size_t>(ops::kFp8GemmMaxKernels)) << n << " x " << k;
      for (const ops::Fp8GemmConfig& c : plan.kernels) {
        EXPECT_TRUE(c.m_grouped);
        EXPECT_LE(c.block_m, 128) << n << " x " << k << ": " << c.describe();
        EXPECT_EQ(c.cluster_m, 1) << c.describe();
        EXPECT_THAT(c.describe(), HasSubstr(", m-grouped"));
      }
      EXPECT_EQ(plan.buckets.front().m_lo, 1);
      EXPECT_EQ(plan.buckets.back().m_hi, ops::kFp8GemmUnboundedM);
      for (size_t i = 1; i < plan.buckets.size(); ++i) {
        EXPECT_EQ(plan.buckets[i].m_lo, plan.buckets[i - 1].m_hi + 1);
        EXPECT_NE(plan.buckets[i].kernel, plan.buckets[i - 1].kernel);
      }
    }
  // Where the bf16 form takes 256x128 pairs the heuristic picks among the 128-row tiles: at the peers file's 4 experts
  // x 34304 rows x 6144 x 7168, 128x192, which an H100 ran in 2130 us against 128x128's 2620 (2026-12-06).
  const ops::Fp8GemmPlan big = ops::fp8_gemm_m_grouped_plan(kH200, 6144, 7168);
  const ops::Fp8GemmConfig& c = big.kernels[static_cast<size_t>(big.bucket_of(34304).kernel)];
  EXPECT_EQ(c.block_m, 128);
  EXPECT_EQ(c.block_n, 192);
}

// kMGroupedL2Weight's moves (bench/probes/m_grouped_plan_moves.txt): n, k, m, 128x128's time, the wider tile the plan
// takes now and its time, on an H100 (2026-12-06, m_grouped_fp8_gemm_nt_contiguous with the tiles forced, each the
// mean of two flushed medians in old-new-new-old order).
struct MGroupedMove {
  int64_t n, k, m;
  double old_us;
  int new_block_n;
  double new_us;
};
const MGroupedMove kMGroupedMovesH100[] = {
    {2112, 7168, 3712, 102.1, 176, 100.1}, {2112, 7168, 4864, 121.3, 176, 127.7}, {4096, 2048, 5504, 83.0, 160, 78.5},
    {4096, 2048, 10880, 151.9, 160, 142.0}, {4096, 2048, 3584, 56.8, 192, 55.3},
    {4096, 2048, 38784, 559.1, 192, 474.1}, {4096, 2048, 35328, 515.9, 192, 428.9},
    {4096, 4096, 5760, 154.8, 160, 145.0}, {4096, 4096, 9344, 253.7, 160, 230.8}, {4096, 4096, 2048, 61.1, 176, 61.2},
    {4096, 4096, 6272, 162.3, 176, 161.1}, {4096, 4096, 3584, 103.3, 192, 101.3},
    {4096, 4096, 12416, 360.4, 192, 300.3}, {4096, 4096, 8704, 244.5, 192, 218.4},
    {6144, 7168, 2688, 204.1, 176, 194.1}, {6144, 7168, 3712, 294.8, 176, 249.0},
    {6144, 7168, 2432, 167.7, 192, 164.9}, {6144, 7168, 4352, 306.6, 192, 274.6}, {7168, 2048, 1792, 47.9, 160, 45.9},
    {7168, 2048, 3584, 93.2, 160, 89.8}, {7168, 2048, 2048, 56.6, 192, 57.5}, {7168, 2048, 9856, 233.0, 192, 221.0},
    {7168, 2048, 12544, 288.5, 192, 272.6}, {7168, 3072, 1792, 63.7, 160, 61.9},
    {7168, 3072, 6272, 215.1, 160, 202.6}, {7168, 3072, 2048, 78.0, 192, 77.9},
    {7168, 3072, 10240, 350.1, 192, 318.7}, {7168, 3072, 12928, 475.4, 192, 399.9},
};

TEST(Fp8GemmMGroupedPlan, WiderTilesThan128x128AtLargeMAsTimed) {
  double log_ratio = 0;
  for (const MGroupedMove& mv : kMGroupedMovesH100) {
    const ops::Fp8GemmPlan plan = ops::fp8_gemm_m_grouped_plan(kH200, mv.n, mv.k);
    const ops::Fp8GemmConfig& c = plan.kernels[static_cast<size_t>(plan.bucket_of(mv.m).kernel)];
    EXPECT_EQ(c.block_m, 128) << mv.n << " x " << mv.k << " at m = " << mv.m << ": " << c.describe();
    EXPECT_EQ(c.block_n, mv.new_block_n) << mv.n << " x " << mv.k << " at m = " << mv.m << ": " << c.describe();
    EXPECT_LE(mv.new_us, mv.old_us * 1.06) << mv.n << " x " << mv.k << " at m = " << mv.m;
    log_ratio += std::log(mv.new_us / mv.old_us);
  }
  EXPECT_LT(log_ratio, 28 * std::log(0.94));  // 0.937
  // Below m = 1792 it moves nothing: 128x112 keeps its intervals (weighing every m-grouped tile took them, and lost).
  const ops::Fp8GemmPlan plan = ops::fp8_gemm_m_grouped_plan(kH200, 7168, 3072);
  for (const int64_t m : {192, 256, 512})
    EXPECT_EQ(plan.kernels[static_cast<size_t>(plan.bucket_of(m).kernel)].block_n, 112) << m;
}

TEST(Fp8GemmMGroupedPlan, TwoBlockOverridesAreRefused) {
  Fp8GemmOverrides o;
  o.block_m = 256;
  EXPECT_THAT(error_of([&] { ops::fp8_gemm_m_grouped_plan(kH200, 4096, 7168, o); }),
              HasSubstr("m_grouped_fp8_gemm_nt_contiguous: block_m must be 0 (heuristic), 64 or 128 for the m-grouped "
                        "form"));
  o = {};
  o.cluster_m = 2;
  EXPECT_THAT(error_of([&] { ops::fp8_gemm_m_grouped_plan(kH200, 4096, 7168, o); }),
              AllOf(HasSubstr("cluster_m must be 0 (heuristic) or 1 for the m-grouped form"), HasSubstr("got 2")));
  o = {};
  o.block_m = 64;
  o.block_n = 32;
  o.split_k = 2;
  const ops::Fp8GemmPlan plan = ops::fp8_gemm_m_grouped_plan(kH200, 576, 7168, o);
  ASSERT_EQ(plan.kernels.size(), 1u);
  EXPECT_EQ(plan.kernels[0].split_k, 2);
}

std::vector<ops::KernelUse> uses(const ops::Problem& problem) {
  return ops::kernel_uses(ops::find_op("fp8_gemm_nt"), problem, kH200);
}

TEST(Fp8GemmMGroupedRegistry, PlanListsTheMGroupedKernelsAndRefusesTheWeightGradientForm) {
  const auto kernels = uses({{"m", ops::ProblemValue::range(1, 65536)}, {"n", 4096}, {"k", 7168}, {"m_grouped", 1}});
  ASSERT_FALSE(kernels.empty());
  EXPECT_LE(kernels.size(), 8u);
  for (const ops::KernelUse& u : kernels) {
    EXPECT_THAT(u.detail, HasSubstr(", m-grouped"));
    EXPECT_THAT(u.spec.describe(), HasSubstr("m_grouped=true"));
    EXPECT_THAT(codegen::render_source(u.spec), HasSubstr(", false, true>::run(params);"));
  }
  EXPECT_THAT(error_of([] { uses({{"m", 64}, {"n", 4096}, {"k", 7168}, {"m_grouped", 1}, {"accumulate", 1}}); }),
              HasSubstr("fp8_gemm_nt: parameter m_grouped=1 needs accumulate=0"));
  EXPECT_THAT(error_of([] { uses({{"m", 64}, {"n", 4096}, {"k", 7168}, {"m_grouped", 2}}); }),
              HasSubstr("fp8_gemm_nt: parameter m_grouped must be 0 or 1"));
  EXPECT_THAT(error_of([] { uses({{"m", 64}, {"n", 4096}, {"k", 7168}, {"m_grouped", 1}, {"block_m", 256}}); }),
              HasSubstr("block_m must be 0 (heuristic), 64 or 128 for the m-grouped form"));
}

TEST(Fp8GemmMGroupedGolden, SourceOfOneSpec) {
  const ops::Fp8GemmPlan plan = ops::fp8_gemm_m_grouped_plan(kH200, 4096, 7168, {128, 128, 0, 0});
  ASSERT_EQ(plan.kernels.size(), 1u);
  test::expect_golden_text("ops_fp8_gemm_m_grouped_golden.cu",
                           codegen::render_source(ops::fp8_gemm_spec(4096, 7168, plan.kernels[0])));
}

// Both compilers build the m-grouped kernels for sm_90a with no GPU, without spills, local memory or serialised
// WGMMAs: the plan's for one (n, k) (split-K pairs, 64- and 128-row tiles, a column-mapped 144) and forced 160 and
// 192 columns at a ragged N and K.
class Fp8GemmMGroupedCompile : public ::testing::TestWithParam<Backend> {
 protected:
  test::TempDir home_, state_;
};

TEST_P(Fp8GemmMGroupedCompile, ThePlansKernelsAndForcedTilesBuild) {
  std::vector<std::pair<int64_t, ops::Fp8GemmConfig>> kernels;
  for (const ops::Fp8GemmConfig& c : ops::fp8_gemm_m_grouped_plan(kH200, 576, 7168).kernels)
    kernels.push_back({7168, c});
  for (int bn : {160, 192})
    kernels.push_back({720, ops::fp8_gemm_m_grouped_plan(kH200, 576, 720, {128, bn, 0, 0}).kernels.at(0)});
  ASSERT_GE(kernels.size(), 6u);
  for (const auto& [k, c] : kernels) {
    const codegen::KernelSpec spec = ops::fp8_gemm_spec(576, k, c);
    SCOPED_TRACE(spec.describe());
    test::compile_for_sm90a_and_check(GetParam(), spec, home_.path(), state_.path());
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, Fp8GemmMGroupedCompile, ::testing::Values(Backend::kNvcc, Backend::kNvrtc),
                         [](const auto& info) { return std::string(to_string(info.param)); });

}  // namespace
}  // namespace kiln
