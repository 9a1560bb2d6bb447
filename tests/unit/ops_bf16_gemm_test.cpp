// The BF16 GEMM (bf16_gemm_nt) on the host: every check (one case per check, each naming the function, the argument,
// what was expected and what was given), a valid call reaching the device (which this machine lacks) only after all
// of them; the overrides; its plan (deterministic, at most eight kernels, buckets covering every M, overrides
// honoured); the registry's bf16_gemm_nt; the source it renders; and both compilers building its kernels for sm_90a.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "codegen/kernel_spec.hpp"
#include "compiler/compiler.hpp"
#include "kernel_compile_check.hpp"
#include "kiln/error.hpp"
#include "kiln/kernels/bf16_gemm_params.h"
#include "kiln/ops.hpp"
#include "ops/bf16_gemm.hpp"
#include "ops/registry.hpp"
#include "test_support.hpp"

namespace kiln {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using kiln::test::error_of;

void* ptr(uint64_t address) { return reinterpret_cast<void*>(address); }

// A valid problem at distinct, 256-byte-aligned fake device addresses.
struct Problem {
  TensorView a, b, d;
  Problem(int64_t m, int64_t n, int64_t k) {
    a = TensorView::contiguous(ptr(0x10000000), DType::kBFloat16, {m, k});
    b = TensorView::contiguous(ptr(0x30000000), DType::kBFloat16, {n, k});
    d = TensorView::contiguous(ptr(0x50000000), DType::kBFloat16, {m, n});
  }
  void run() const { bf16_gemm_nt(a, b, d); }
};

// The error after `change` of a valid problem: 256 x 576 x 520.
std::string error_with(const std::function<void(Problem&)>& change, ErrorKind kind = ErrorKind::kValueError) {
  Problem p(256, 576, 520);
  change(p);
  const std::string e = error_of([&] { p.run(); }, kind);
  EXPECT_THAT(e, HasSubstr("bf16_gemm_nt: "));
  return e;
}

// Whether `change` leaves a problem every check passes (the call then stops at the device query).
bool passes_checks(const std::function<void(Problem&)>& change) {
  Problem p(256, 576, 520);
  change(p);
  return !error_of([&] { p.run(); }, ErrorKind::kCudaError).empty();
}

TEST(Bf16GemmValidate, Dtypes) {
  EXPECT_THAT(error_with([](Problem& p) { p.a.dtype = DType::kFloat8E4M3; }, ErrorKind::kTypeError),
              HasSubstr("a must be bfloat16, got float8_e4m3fn"));
  EXPECT_THAT(error_with([](Problem& p) { p.b.dtype = DType::kFloat16; }, ErrorKind::kTypeError),
              HasSubstr("b must be bfloat16, got float16"));
  EXPECT_THAT(error_with([](Problem& p) { p.d.dtype = DType::kFloat32; }, ErrorKind::kTypeError),
              HasSubstr("d must be bfloat16, got float32"));
}

TEST(Bf16GemmValidate, Devices) {
  EXPECT_THAT(error_with([](Problem& p) { p.a.device_kind = DeviceKind::kCpu; }),
              HasSubstr("a must be on a CUDA device, got cpu"));
  EXPECT_THAT(error_with([](Problem& p) { p.b.device = 1; }),
              HasSubstr("b must be on the same device as a (cuda:0), got cuda:1"));
  EXPECT_THAT(error_with([](Problem& p) { p.d.device = 3; }), HasSubstr("d must be on the same device as a"));
}

TEST(Bf16GemmValidate, ShapesAndSizes) {
  EXPECT_THAT(error_with([](Problem& p) { p.a.ndim = 3; }), HasSubstr("a must be 2-dimensional, got 3"));
  EXPECT_THAT(error_with([](Problem& p) { p.b = TensorView::contiguous(p.b.data, DType::kBFloat16, {576, 512}); }),
              AllOf(HasSubstr("b must be of shape (n, k) with k == 520 (a's k)"), HasSubstr("got shape (576, 512)")));
  EXPECT_THAT(error_with([](Problem& p) { p.d = TensorView::contiguous(p.d.data, DType::kBFloat16, {256, 584}); }),
              AllOf(HasSubstr("d must be of shape (256, 576) (m of a, n of b)"), HasSubstr("got shape (256, 584)")));
  EXPECT_THAT(error_with([](Problem& p) { p = Problem(256, 580, 520); }),
              HasSubstr("b must be of a size(0) (n) that is a multiple of 8, got n == 580"));
  EXPECT_THAT(error_with([](Problem& p) { p = Problem(256, 576, 516); }),
              HasSubstr("a must be of a size(1) (k) that is a positive multiple of 8, got k == 516"));
  EXPECT_THAT(error_with([](Problem& p) { p = Problem(256, 576, 0); }),
              HasSubstr("a must be of a size(1) (k) that is a positive multiple of 8, got k == 0"));
}

TEST(Bf16GemmValidate, StridesAlignmentAndOverlap) {
  EXPECT_THAT(error_with([](Problem& p) { p.a.strides = {1, 256, 0, 0}; }), HasSubstr("a must be "));
  EXPECT_THAT(error_with([](Problem& p) { p.b.strides[0] = 524; }), HasSubstr("b must be rows 16-byte aligned"));
  EXPECT_THAT(error_with([](Problem& p) { p.d.strides[0] = 580; }), HasSubstr("d must be rows 16-byte aligned"));
  EXPECT_THAT(error_with([](Problem& p) { p.a.data = ptr(0x10000008); }), HasSubstr("a must be 16-byte aligned"));
  EXPECT_THAT(error_with([](Problem& p) { p.d.data = ptr(0x50000004); }), HasSubstr("d must be 16-byte aligned"));
  EXPECT_THAT(error_with([](Problem& p) { p.d.data = ptr(0x10000000 + 1024); }),
              AllOf(HasSubstr("d must be memory that does not overlap a's"), HasSubstr("got an overlap")));
  EXPECT_THAT(error_with([](Problem& p) { p.d.data = p.b.data; }),
              HasSubstr("d must be memory that does not overlap b's"));
  // Padded row strides (multiples of 8 elements) are fine, and so is D right after A.
  EXPECT_TRUE(passes_checks([](Problem& p) {
    p.a.strides[0] = 528;
    p.b.strides[0] = 536;
    p.d.strides[0] = 584;
  }));
  EXPECT_TRUE(passes_checks([](Problem& p) { p.d.data = ptr(0x10000000 + 256 * 520 * 2); }));
}

TEST(Bf16GemmValidate, EmptyProblemsAreNoOpsAndAValidCallReachesTheDevice) {
  EXPECT_NO_THROW(Problem(0, 576, 520).run());
  EXPECT_NO_THROW(Problem(256, 0, 520).run());
  EXPECT_NO_THROW(Problem(0, 576, 0).run());
  EXPECT_TRUE(passes_checks([](Problem&) {}));
  EXPECT_TRUE(passes_checks([](Problem& p) { p = Problem(1, 8, 8); }));
}

TEST(Bf16GemmOverrides, SetGetAndErrorsNamingTheField) {
  set_bf16_gemm_overrides({128, 256, 3, 2});
  const Bf16GemmOverrides o = get_bf16_gemm_overrides();
  EXPECT_EQ(o.block_m, 128);
  EXPECT_EQ(o.block_n, 256);
  EXPECT_EQ(o.stages, 3);
  EXPECT_EQ(o.cluster_m, 2);
  set_bf16_gemm_overrides({});
  EXPECT_EQ(get_bf16_gemm_overrides().block_n, 0);
  EXPECT_THAT(error_of([] { set_bf16_gemm_overrides({96, 0, 0, 0}); }),
              HasSubstr("set_bf16_gemm_overrides: block_m must be 0 (heuristic), 64, 128 or 256, got 96"));
  EXPECT_THAT(error_of([] { set_bf16_gemm_overrides({0, 24, 0, 0}); }),
              HasSubstr("block_n must be 0 (heuristic) or a multiple of 16 in 16..256, got 24"));
  EXPECT_THAT(error_of([] { set_bf16_gemm_overrides({256, 192, 0, 0}); }),
              HasSubstr("block_n must be 0 (heuristic) or at most 128 with block_m 256"));
  EXPECT_THAT(error_of([] { set_bf16_gemm_overrides({0, 0, 33, 0}); }),
              HasSubstr("stages must be 0 (heuristic) or 1..32"));
  EXPECT_THAT(error_of([] { set_bf16_gemm_overrides({0, 0, 0, 3}); }),
              HasSubstr("cluster_m must be 0 (heuristic), 1 or 2"));
  EXPECT_EQ(get_bf16_gemm_overrides().block_m, 0);  // an error changes nothing
}

const ops::TargetInfo kH200{9, 0, 132, 232448};

// The dense_bf16 weights and a few ragged ones.
const int64_t kShapes[][2] = {{2112, 7168}, {24576, 1536}, {32768, 512}, {7168, 16384}, {4096, 7168},
                              {7168, 2048}, {576, 7168},   {136, 520},   {8, 8}};

TEST(Bf16GemmPlan, AtMostEightKernelsWhoseBucketsCoverEveryM) {
  for (const auto& [n, k] : kShapes) {
    SCOPED_TRACE(std::to_string(n) + " x " + std::to_string(k));
    const ops::Bf16GemmPlan plan = ops::bf16_gemm_plan(kH200, n, k);
    ASSERT_FALSE(plan.kernels.empty());
    EXPECT_LE(plan.kernels.size(), static_cast<size_t>(ops::kBf16GemmMaxKernels));
    ASSERT_FALSE(plan.buckets.empty());
    EXPECT_EQ(plan.buckets.front().m_lo, 1);
    EXPECT_EQ(plan.buckets.back().m_hi, ops::kUnboundedM);
    std::set<int> used;
    for (size_t i = 0; i < plan.buckets.size(); ++i) {
      const ops::MBucket& b = plan.buckets[i];
      EXPECT_LE(b.m_lo, b.m_hi);
      if (i > 0) {
        EXPECT_EQ(b.m_lo, plan.buckets[i - 1].m_hi + 1);
        EXPECT_NE(b.kernel, plan.buckets[i - 1].kernel);
      }
      ASSERT_LT(b.kernel, static_cast<int>(plan.kernels.size()));
      // Kernels are numbered in order of first use.
      if (!used.count(b.kernel)) EXPECT_EQ(b.kernel, static_cast<int>(used.size()));
      used.insert(b.kernel);
    }
    EXPECT_EQ(used.size(), plan.kernels.size());
    for (const int64_t m : {int64_t{1}, int64_t{64}, int64_t{65}, int64_t{4096}, int64_t{16385}, int64_t{1} << 40}) {
      const ops::MBucket& b = plan.bucket_of(m);
      EXPECT_LE(b.m_lo, m);
      EXPECT_GE(b.m_hi, m);
    }
    for (const ops::Bf16GemmConfig& c : plan.kernels) {
      EXPECT_GE(c.stages, 1);
      EXPECT_LE(c.shared_bytes(), static_cast<uint32_t>(kH200.shared_memory_per_block)) << c.describe();
      EXPECT_EQ(c.math_warpgroups, c.block_m == 64 ? 1 : 2);
    }
    EXPECT_EQ(ops::bf16_gemm_plan(kH200, n, k).kernels, plan.kernels);  // deterministic
  }
}

TEST(Bf16GemmPlan, SmallMTakesOneWarpgroupTilesAndLargeMTheWideOnes) {
  for (const auto& [n, k] : kShapes) {
    const ops::Bf16GemmPlan plan = ops::bf16_gemm_plan(kH200, n, k);
    EXPECT_EQ(plan.kernels[static_cast<size_t>(plan.bucket_of(1).kernel)].block_m, 64) << n << " x " << k;
    if (n >= 2048) {
      const ops::Bf16GemmConfig& large = plan.kernels[static_cast<size_t>(plan.bucket_of(8192).kernel)];
      EXPECT_GE(large.block_m * large.block_n, 128 * 128) << n << " x " << k << ": " << large.describe();
    }
  }
}

TEST(Bf16GemmPlan, OverridesNarrowTheCandidates) {
  const ops::Bf16GemmPlan forced = ops::bf16_gemm_plan(kH200, 4096, 7168, {128, 256, 0, 2});
  ASSERT_EQ(forced.kernels.size(), 1u);
  EXPECT_EQ(forced.kernels[0].describe(), "128x256, 3 stages, 2 math warpgroups, B multicast x2");
  const ops::Bf16GemmPlan staged = ops::bf16_gemm_plan(kH200, 4096, 7168, {64, 16, 5, 0});
  ASSERT_EQ(staged.kernels.size(), 1u);
  EXPECT_EQ(staged.kernels[0].stages, 5);
  for (const ops::Bf16GemmConfig& c : ops::bf16_gemm_plan(kH200, 4096, 7168, {256, 0, 0, 0}).kernels)
    EXPECT_EQ(c.block_m, 256);
  EXPECT_THAT(error_of([] { ops::bf16_gemm_plan(kH200, 4096, 7168, {128, 256, 9, 0}); }),
              HasSubstr("bf16_gemm_nt: stages 9 do not fit in 232448 bytes of shared memory with a 128x256 tile (at "
                        "most 4)"));
  // A fourth stage for 128x256 fits beside half a staging tile (two store passes); the plan's own count keeps a whole
  // one. 128x192 with five stages stores a third at a time.
  EXPECT_EQ(ops::bf16_gemm_plan(kH200, 4096, 7168, {128, 256, 0, 0}).kernels.at(0).stages, 3);
  const ops::Bf16GemmConfig four = ops::bf16_gemm_plan(kH200, 4096, 7168, {128, 256, 4, 0}).kernels.at(0);
  EXPECT_EQ(four.stages, 4);
  EXPECT_EQ(kernels::bf16_gemm_staging_cols(128, 256, 4), 128u);
  EXPECT_EQ(kernels::bf16_gemm_staging_cols(128, 256, 3), 256u);
  EXPECT_EQ(kernels::bf16_gemm_staging_cols(128, 192, 5), 64u);
  EXPECT_EQ(four.shared_bytes(), 32768u + 4 * (16384 + 32768) + 64);
  EXPECT_THAT(error_of([] { ops::bf16_gemm_plan(kH200, 4100, 7168); }),
              HasSubstr("bf16_gemm_nt: n must be a positive multiple of 8, got 4100"));
  EXPECT_THAT(error_of([] { ops::bf16_gemm_plan(kH200, 4096, 7170); }),
              HasSubstr("bf16_gemm_nt: k must be a positive multiple of 8, got 7170"));
}

TEST(Bf16GemmPlan, TheGridIsAWholeNumberOfClustersWithinTheSms) {
  ops::Bf16GemmConfig c;
  c.block_m = 128;
  c.block_n = 256;
  c.cluster_m = 2;
  EXPECT_EQ(c.grid(4096, 7168, 132), 132u);
  EXPECT_EQ(c.grid(128, 512, 132), 4u);  // one m unit of two tiles over two n blocks
  EXPECT_EQ(c.grid(4096, 7168, 67), 66u);
  EXPECT_EQ(c.threads(), 384u);
  c.block_m = 64;
  c.math_warpgroups = 1;
  c.cluster_m = 1;
  EXPECT_EQ(c.grid(1, 2112, 132), 9u);
  EXPECT_EQ(c.threads(), 256u);
  EXPECT_EQ(kernels::bf16_gemm_layout(128, 256, 3).total_bytes, c.block_n * 0 + 65536 + 3 * (16384 + 32768) + 48);
}

std::vector<ops::KernelUse> uses(const ops::Problem& problem) {
  return ops::kernel_uses(ops::find_op("bf16_gemm_nt"), problem, kH200);
}

TEST(Bf16GemmRegistry, PlanListsTheKernelsOfARange) {
  const auto kernels = uses({{"m", ops::ProblemValue::range(1, 16384)}, {"n", 7168}, {"k", 2048}});
  ASSERT_FALSE(kernels.empty());
  EXPECT_LE(kernels.size(), 8u);
  int64_t covered = 0;
  for (const ops::KernelUse& u : kernels) {
    EXPECT_EQ(u.range_param, "m");
    EXPECT_THAT(u.detail, HasSubstr("n=7168 k=2048: "));
    EXPECT_THAT(u.spec.describe(), HasSubstr("n=7168 k=2048 block_m="));
    for (const auto& [lo, hi] : u.ranges) covered += hi - lo + 1;
  }
  EXPECT_EQ(covered, 16384);
  const auto forced =
      uses({{"m", 4096}, {"n", 7168}, {"k", 2048}, {"block_m", 256}, {"block_n", 128}, {"cluster_m", 2}});
  ASSERT_EQ(forced.size(), 1u);
  EXPECT_THAT(forced[0].spec.describe(), HasSubstr("block_m=256 block_n=128 stages=3 math_warpgroups=2 cluster_m=2"));
  EXPECT_TRUE(uses({{"m", 0}, {"n", 7168}, {"k", 2048}}).empty());
  EXPECT_THAT(error_of([] { uses({{"m", 64}, {"n", 7168}, {"k", 2048}, {"block_n", 24}}); }),
              HasSubstr("bf16_gemm_nt: block_n must be 0 (heuristic) or a multiple of 16 in 16..256, got 24"));
  EXPECT_THAT(error_of([] { uses({{"m", 64}, {"n", 7168}}); }, ErrorKind::kValueError), HasSubstr("k"));
}

TEST(Bf16GemmGolden, SourceOfOneSpec) {
  const ops::Bf16GemmPlan plan = ops::bf16_gemm_plan(kH200, 7168, 2048, {128, 256, 0, 2});
  ASSERT_EQ(plan.kernels.size(), 1u);
  test::expect_golden_text("ops_bf16_gemm_golden.cu",
                           codegen::render_source(ops::bf16_gemm_spec(7168, 2048, plan.kernels[0])));
}

// Both compilers build the kernels for sm_90a with no GPU, without spills, local memory or serialised WGMMAs: the
// plan's for one (n, k), and every tile family forced at a ragged N and K (64x16, 64x256, 256x128 pairs, 128x256
// pairs, and with their epilogue in passes 128x256 with four stages and 128x192 pairs with five).
class Bf16GemmCompile : public ::testing::TestWithParam<Backend> {
 protected:
  test::TempDir home_, state_;
};

TEST_P(Bf16GemmCompile, ThePlansKernelsAndForcedTilesBuild) {
  std::vector<std::pair<int64_t, ops::Bf16GemmConfig>> kernels;
  for (const ops::Bf16GemmConfig& c : ops::bf16_gemm_plan(kH200, 2112, 7168).kernels) kernels.push_back({2112, c});
  for (const Bf16GemmOverrides o : {Bf16GemmOverrides{64, 16, 0, 0}, Bf16GemmOverrides{64, 256, 0, 0},
                                    Bf16GemmOverrides{256, 128, 0, 2}, Bf16GemmOverrides{128, 256, 0, 2},
                                    Bf16GemmOverrides{128, 256, 4, 0}, Bf16GemmOverrides{128, 192, 5, 2}})
    kernels.push_back({136, ops::bf16_gemm_plan(kH200, 136, 520, o).kernels.at(0)});
  for (const auto& [n, c] : kernels) {
    const codegen::KernelSpec spec = ops::bf16_gemm_spec(n, n == 136 ? 520 : 7168, c);
    SCOPED_TRACE(spec.describe());
    const compiler::CompiledKernel k = test::compile_for_sm90a_and_check(GetParam(), spec, home_.path(), state_.path());
    EXPECT_LE(k.resources.registers, 240) << spec.describe();
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, Bf16GemmCompile, ::testing::Values(Backend::kNvcc, Backend::kNvrtc),
                         [](const auto& info) { return std::string(to_string(info.param)); });

}  // namespace
}  // namespace kiln
