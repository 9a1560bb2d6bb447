// The BF16 k-grouped GEMM (k_grouped_bf16_gemm_tn_contiguous: the MoE experts' weight gradients) on the host: every
// check of its arguments (one case per check, each naming the function, the argument, what was expected and what was
// given), a valid call reaching the device (which this machine lacks) only after all of them; the helpers it shares
// with the FP8 k-grouped form (the K a group is planned at, the launches of 32 groups); its plans (a float32 D,
// MN-major operands, no CTA pairs, 256-row tiles allowed); the registry's k_grouped=1 with k a token count or a range
// of them; the source it renders; and both compilers building its kernels for sm_90a.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "codegen/kernel_spec.hpp"
#include "compiler/compiler.hpp"
#include "kernel_compile_check.hpp"
#include "kiln/error.hpp"
#include "kiln/kernels/bf16_gemm_params.h"
#include "kiln/ops.hpp"
#include "ops/bf16_gemm.hpp"
#include "ops/k_groups.hpp"
#include "ops/registry.hpp"
#include "test_support.hpp"

namespace kiln {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using kiln::test::error_of;
using kiln::test::ptr;

constexpr int kKGrouped = static_cast<int>(kernels::kBf16GemmKGrouped);
constexpr int kBothMnMajor = static_cast<int>(kernels::kBf16GemmMnMajorA | kernels::kBf16GemmMnMajorB);
constexpr int kStoreF32 = static_cast<int>(kernels::kBf16GemmStoreF32);
constexpr int kAddF32 = static_cast<int>(kernels::kBf16GemmAddF32);

// A valid problem at distinct, 256-byte-aligned fake device addresses: 4 groups of 37, 0, 300 and 100 tokens (437 in
// all) over m x n = 256 x 576: a [437, 256], b [437, 576], d and c float32 [4, 256, 576].
struct KGrouped {
  TensorView a, b, d, c;
  std::vector<int64_t> ks{37, 0, 300, 100};
  enum { kNoC, kCIsD, kOtherC } c_mode = kNoC;
  KGrouped() {
    a = TensorView::contiguous(ptr(0x10000000), DType::kBFloat16, {437, 256});
    b = TensorView::contiguous(ptr(0x20000000), DType::kBFloat16, {437, 576});
    d = TensorView::contiguous(ptr(0x30000000), DType::kFloat32, {4, 256, 576});
    c = TensorView::contiguous(ptr(0x40000000), DType::kFloat32, {4, 256, 576});
  }
  void run() const {
    k_grouped_bf16_gemm_tn_contiguous(a, b, d, ks, c_mode == kNoC ? nullptr : c_mode == kCIsD ? &d : &c);
  }
};

// The error after `change` of the valid problem.
std::string error(const std::function<void(KGrouped&)>& change, ErrorKind kind = ErrorKind::kValueError) {
  KGrouped g;
  change(g);
  const std::string e = error_of([&] { g.run(); }, kind);
  EXPECT_THAT(e, HasSubstr("k_grouped_bf16_gemm_tn_contiguous: "));
  return e;
}

// Whether `change` leaves a problem every check passes (the call then stops at the device query).
bool passes(const std::function<void(KGrouped&)>& change) {
  KGrouped g;
  change(g);
  return !error_of([&] { g.run(); }, ErrorKind::kCudaError).empty();
}

TEST(Bf16GemmKGroupedValidate, DtypesAndDevices) {
  EXPECT_THAT(error([](KGrouped& g) { g.a.dtype = DType::kFloat8E4M3; }, ErrorKind::kTypeError),
              HasSubstr("a must be bfloat16, got float8_e4m3fn"));
  EXPECT_THAT(error([](KGrouped& g) { g.b.dtype = DType::kFloat16; }, ErrorKind::kTypeError),
              HasSubstr("b must be bfloat16, got float16"));
  // D is float32 (weight gradients are summed over many steps), as DeepGEMM's.
  EXPECT_THAT(error([](KGrouped& g) { g.d.dtype = DType::kBFloat16; }, ErrorKind::kTypeError),
              HasSubstr("d must be float32, got bfloat16"));
  EXPECT_THAT(error([](KGrouped& g) { g.c_mode = KGrouped::kOtherC, g.c.dtype = DType::kBFloat16; },
                    ErrorKind::kTypeError),
              HasSubstr("c must be float32, got bfloat16"));
  EXPECT_THAT(error([](KGrouped& g) { g.a.device_kind = DeviceKind::kCpu; }),
              HasSubstr("a must be on a CUDA device, got cpu"));
  EXPECT_THAT(error([](KGrouped& g) { g.d.device = 1; }), HasSubstr("d must be on the same device as a (cuda:0)"));
  EXPECT_THAT(error([](KGrouped& g) { g.c_mode = KGrouped::kOtherC, g.c.device = 2; }),
              HasSubstr("c must be on the same device as a"));
}

TEST(Bf16GemmKGroupedValidate, RanksShapesAndTokenCounts) {
  EXPECT_THAT(error([](KGrouped& g) { g.a.ndim = 3; }), HasSubstr("a must be 2-dimensional, got 3"));
  EXPECT_THAT(error([](KGrouped& g) { g.d.ndim = 2; }), HasSubstr("d must be 3-dimensional, got 2"));
  EXPECT_THAT(error([](KGrouped& g) { g.c_mode = KGrouped::kOtherC, g.c.shape[1] = 255; }),
              AllOf(HasSubstr("c must be of shape (4, 256, 576) (groups, m, n), as d"),
                    HasSubstr("got shape (4, 255, 576)")));
  EXPECT_THAT(error([](KGrouped& g) { g.ks.pop_back(); }),
              HasSubstr("ks must hold one token count per group (d.size(0) == 4), got 3 counts"));
  EXPECT_THAT(error([](KGrouped& g) { g.ks[2] = -1; }),
              HasSubstr("ks[2] must be a token count in 0..2147483647, got -1"));
  EXPECT_THAT(error([](KGrouped& g) { g.ks[1] = 1; }),
              AllOf(HasSubstr("a must be of shape (438, 256) (sum(ks), m of d): each group's tokens one after the "
                              "other"),
                    HasSubstr("got shape (437, 256)")));
  EXPECT_THAT(error([](KGrouped& g) { g.b.shape[1] = 584; }),
              HasSubstr("b must be of shape (437, 576) (sum(ks), n of d)"));
  EXPECT_THAT(error([](KGrouped& g) {
                g.d.shape[2] = g.b.shape[1] = 580;
                g.d.strides = {256 * 580, 580, 1, 0};
              }),
              AllOf(HasSubstr("d must be of a size(2) (n) that is a multiple of 8"), HasSubstr("got n == 580")));
}

TEST(Bf16GemmKGroupedValidate, LayoutsAlignmentAndOverlaps) {
  // A's and B's token rows dense and 16-byte aligned apart (each group's maps start at one of them); padded is fine.
  EXPECT_THAT(error([](KGrouped& g) { g.a.strides = {1, 437, 0, 0}; }), HasSubstr("a must be"));
  EXPECT_THAT(error([](KGrouped& g) { g.b.strides[0] = 580; }), HasSubstr("b must be rows 16-byte aligned"));
  EXPECT_TRUE(passes([](KGrouped& g) { g.a.strides[0] = 264, g.b.strides[0] = 600; }));
  // D's and C's planes: dense rows, apart from each other, D's 16-byte aligned.
  EXPECT_THAT(error([](KGrouped& g) { g.d.strides = {256 * 576, 576, 2, 0}; }),
              AllOf(HasSubstr("d must be of dense rows: stride(2) == 1"), HasSubstr("got strides (147456, 576, 2)")));
  EXPECT_THAT(error([](KGrouped& g) { g.d.strides[0] = 256 * 576 + 2; }),
              HasSubstr("d must be groups that do not overlap: stride(0) >= (m - 1) * stride(1) + n, a multiple of 4 "
                        "(each group's D 16-byte aligned)"));
  EXPECT_THAT(error([](KGrouped& g) { g.d.strides[0] = 255 * 576; }), HasSubstr("d must be groups that do not overlap"));
  EXPECT_THAT(error([](KGrouped& g) { g.c_mode = KGrouped::kOtherC, g.c.strides[0] = 100; }),
              HasSubstr("c must be groups that do not overlap: stride(0) >= (m - 1) * stride(1) + n, got"));
  EXPECT_TRUE(passes([](KGrouped& g) { g.d.strides = {256 * 600 + 4, 600, 1, 0}; }));
  EXPECT_TRUE(passes([](KGrouped& g) { g.c_mode = KGrouped::kOtherC, g.c.strides = {256 * 577 + 1, 577, 1, 0}; }));
  EXPECT_THAT(error([](KGrouped& g) { g.d.strides = {256 * 578, 578, 1, 0}; }), HasSubstr("d must be rows 16-byte"));
  EXPECT_THAT(error([](KGrouped& g) { g.a.data = ptr(0x10000008); }), HasSubstr("a must be 16-byte aligned"));
  EXPECT_THAT(error([](KGrouped& g) { g.d.data = ptr(0x30000004); }), HasSubstr("d must be 16-byte aligned"));
  // D clear of A and B; C either D itself or clear of it.
  EXPECT_THAT(error([](KGrouped& g) { g.d.data = ptr(0x10000000 + 1024); }),
              HasSubstr("d must be memory that does not overlap a's"));
  EXPECT_THAT(error([](KGrouped& g) { g.b.data = ptr(0x30000000 + 4096); }),
              HasSubstr("d must be memory that does not overlap b's"));
  EXPECT_THAT(error([](KGrouped& g) { g.c_mode = KGrouped::kOtherC, g.c.data = ptr(0x30000000 + 4096); }),
              AllOf(HasSubstr("c must be d itself or memory that does not overlap d's"),
                    HasSubstr("got a tensor overlapping d")));
  EXPECT_TRUE(passes([](KGrouped& g) { g.c_mode = KGrouped::kCIsD; }));
  EXPECT_TRUE(passes([](KGrouped& g) { g.c_mode = KGrouped::kOtherC; }));
}

TEST(Bf16GemmKGroupedValidate, EmptyProblemsAreNoOpsAndAValidCallReachesTheDevice) {
  EXPECT_TRUE(passes([](KGrouped&) {}));
  // No group, or D without rows or columns: nothing enqueued.
  KGrouped none;
  none.ks.clear();
  none.d.shape[0] = 0;
  none.a.shape[0] = none.b.shape[0] = 0;
  EXPECT_NO_THROW(none.run());
  for (const int dim : {1, 2}) {
    KGrouped g;
    g.d.shape[dim] = 0;
    (dim == 1 ? g.a : g.b).shape[1] = 0;
    EXPECT_NO_THROW(g.run()) << "dim " << dim;
  }
  // One token in all, over an m that is not a multiple of 8: A's one row needs no aligned stride.
  EXPECT_TRUE(passes([](KGrouped& g) {
    g.ks = {0, 1, 0, 0};
    g.a = TensorView::contiguous(ptr(0x10000000), DType::kBFloat16, {1, 300});
    g.b.shape[0] = 1;
    g.d = TensorView::contiguous(ptr(0x30000000), DType::kFloat32, {4, 300, 576});
  }));
  // No tokens anywhere: D is still zeroed (or C copied), which needs the device.
  EXPECT_TRUE(passes([](KGrouped& g) {
    g.ks = {0, 0, 0, 0};
    g.a.shape[0] = g.b.shape[0] = 0;
  }));
}

// ---- the helpers it shares with the FP8 k-grouped form ------------------------------------------------------------

TEST(KGroupedHelpers, PlanKIsTheTokensRoundedUpToTheSmallestKTimesAPowerOfTwo) {
  EXPECT_EQ(ops::k_grouped_plan_k(0, 64), 0);
  EXPECT_EQ(ops::k_grouped_plan_k(1, 64), 64);
  EXPECT_EQ(ops::k_grouped_plan_k(64, 64), 64);
  EXPECT_EQ(ops::k_grouped_plan_k(65, 64), 128);
  EXPECT_EQ(ops::k_grouped_plan_k(1000, 64), 1024);
  EXPECT_EQ(ops::k_grouped_plan_k(300, 128), 512);
}

TEST(KGroupedHelpers, LaunchesTakeAtMostTheGroupsTheirParametersHold) {
  std::vector<int> class_of(70, 0);
  class_of[5] = -1;
  class_of[6] = 1;
  const auto launches = ops::k_grouped_launches(class_of, kBf16GemmMaxLaunchGroups);
  ASSERT_EQ(launches.size(), 4u);
  EXPECT_EQ(launches[0].size(), 32u);
  EXPECT_EQ(launches[1].size(), 32u);
  EXPECT_EQ(launches[2].size(), 4u);
  EXPECT_EQ(launches[3], std::vector<size_t>{6});
  EXPECT_EQ(ops::k_grouped_launches(class_of, 100).size(), 2u);
  // Its parameters fit what a launch may pass (32764 bytes since CUDA 12.1).
  EXPECT_LE(sizeof(Bf16GemmKGroupedParams), 32764u);
}

// ---- plans, registry, sources, compiles --------------------------------------------------------------------------

const ops::TargetInfo kH200{9, 0, 132, 232448};

TEST(Bf16GemmKGroupedPlan, AFloat32DMnMajorOperandsAndNoPairs) {
  for (const int epilogue : {kStoreF32, kAddF32})
    for (const int64_t n : {576, 2048, 7168})
      for (const int64_t k : {64, 512, 4096}) {
        const ops::Bf16GemmPlan plan = ops::bf16_gemm_plan(kH200, n, k, {}, epilogue, kBothMnMajor, kKGrouped);
        ASSERT_FALSE(plan.kernels.empty());
        EXPECT_LE(plan.kernels.size(), 8u);
        for (const ops::Bf16GemmConfig& c : plan.kernels) {
          EXPECT_EQ(c.cluster_m, 1) << c.describe();
          EXPECT_EQ(c.block_n % 64, 0) << c.describe();  // B (N-major) loads in boxes of 64 columns
          EXPECT_EQ(c.grouping, kKGrouped);
          EXPECT_EQ(c.epilogue, epilogue);
          EXPECT_THAT(c.describe(), HasSubstr("M-major A, N-major B, k-grouped"));
          // The most stages beside a part of a float32 staging tile: depth over whole-tile stores.
          EXPECT_EQ(static_cast<uint32_t>(c.stages),
                    kernels::bf16_gemm_max_forced_stages(static_cast<uint32_t>(c.block_m),
                                                         static_cast<uint32_t>(c.block_n), 232448, 4))
              << c.describe();
        }
        EXPECT_EQ(plan.kernels, ops::bf16_gemm_plan(kH200, n, k, {}, epilogue, kBothMnMajor, kKGrouped).kernels);
      }
  // 256-row tiles may be forced (no group boundary lies inside an m block here).
  const ops::Bf16GemmPlan forced =
      ops::bf16_gemm_plan(kH200, 2048, 512, {256, 64, 0, 0}, kStoreF32, kBothMnMajor, kKGrouped);
  ASSERT_EQ(forced.kernels.size(), 1u);
  EXPECT_EQ(forced.kernels[0].block_m, 256);
}

// DeepSeek-V3's experts' weight gradients at hundreds of tokens and more take the tile the forced-tile run found
// fastest there (bench/RESULTS.md, fifty-fourth session: 1.03-1.14x cuBLAS per expert): 128x256 with 4 stages, the
// float32 tile stored in four passes. Costed one expert at a time, 7168 x 2048 took 128x192 for its wave quantization.
TEST(Bf16GemmKGroupedPlan, DeepSeekExpertsTakeTheMeasuredTile) {
  for (const auto& [m, n] : {std::pair<int64_t, int64_t>{4096, 7168}, std::pair<int64_t, int64_t>{7168, 2048}})
    for (const int64_t k : {512, 4096, 16384}) {
      const ops::Bf16GemmPlan plan = ops::bf16_gemm_plan(kH200, n, k, {}, kStoreF32, kBothMnMajor, kKGrouped);
      const ops::Bf16GemmConfig& c = plan.kernels.at(static_cast<size_t>(plan.bucket_of(m).kernel));
      EXPECT_EQ(c.block_m, 128) << m << " x " << n << " at " << k << " tokens: " << c.describe();
      EXPECT_EQ(c.block_n, 256) << m << " x " << n << " at " << k << " tokens: " << c.describe();
      EXPECT_EQ(c.stages, 4) << m << " x " << n << " at " << k << " tokens: " << c.describe();
    }
}

TEST(Bf16GemmKGroupedPlan, FormsItCannotTake) {
  EXPECT_THAT(error_of([] { ops::bf16_gemm_plan(kH200, 2048, 512, {}, 0, kBothMnMajor, kKGrouped); }),
              HasSubstr("bf16_gemm_nt: the k-grouped form takes a float32 D (epilogue 1 or 2) and MN-major operands "
                        "(mn_major 3), got epilogue 0 and mn_major 3"));
  EXPECT_THAT(error_of([] { ops::bf16_gemm_plan(kH200, 2048, 512, {}, kStoreF32, 2, kKGrouped); }),
              HasSubstr("got epilogue 1 and mn_major 2"));
  EXPECT_THAT(error_of([] { ops::bf16_gemm_plan(kH200, 2048, 512, {128, 128, 0, 2}, kStoreF32, kBothMnMajor,
                                                kKGrouped); }),
              HasSubstr("bf16_gemm_nt: cluster_m must be 0 (heuristic) or 1 in the k-grouped form (its walk over the "
                        "groups' tiles has no CTA pairs), got 2"));
  EXPECT_THAT(error_of([] { ops::bf16_gemm_plan(kH200, 2048, 512, {}, kStoreF32, kBothMnMajor, 4); }),
              HasSubstr("bf16_gemm_nt: grouping must be 0 (one GEMM), 1 (m-grouped contiguous), 2 (m-grouped masked) "
                        "or 3 (k-grouped), got 4"));
}

std::vector<ops::KernelUse> uses(const ops::Problem& problem) {
  return ops::kernel_uses(ops::find_op("bf16_gemm_nt"), problem, kH200);
}

TEST(Bf16GemmKGroupedRegistry, PlanListsTheKernelsOfATokenCountOrARangeOfThem) {
  // One count: the kernel its plan at the count rounded up (300 -> 512) picks at m, K at run time in its source.
  const auto one = uses({{"m", 4096}, {"n", 7168}, {"k", 300}, {"k_grouped", 1}});
  ASSERT_EQ(one.size(), 1u);
  const ops::Bf16GemmPlan at_512 = ops::bf16_gemm_plan(kH200, 7168, 512, {}, kStoreF32, kBothMnMajor, kKGrouped);
  EXPECT_EQ(codegen::render_source(one[0].spec),
            codegen::render_source(ops::bf16_gemm_spec(7168, 512, at_512.kernels.at(
                                                                      static_cast<size_t>(at_512.bucket_of(4096).kernel)))));
  EXPECT_THAT(one[0].spec.describe(), AllOf(HasSubstr("n=7168 k=0 "), HasSubstr("epilogue=1 mn_major=3 group_m=8 "
                                                                                "grouping=3")));
  EXPECT_THAT(codegen::render_source(one[0].spec), HasSubstr("kiln::Bf16GemmKGroupedParams"));
  // accumulate=1: the kernels that add into D.
  for (const ops::KernelUse& u : uses({{"m", 4096}, {"n", 7168}, {"k", 300}, {"k_grouped", 1}, {"accumulate", 1}}))
    EXPECT_THAT(u.spec.describe(), HasSubstr("epilogue=2 mn_major=3"));
  // A range of counts: every count in it served once, the kernels in order of first use.
  const auto range = uses({{"m", 7168}, {"n", 2048}, {"k", ops::ProblemValue::range(1, 16384)}, {"k_grouped", 1}});
  ASSERT_FALSE(range.empty());
  int64_t covered = 0, next = 1;
  for (const ops::KernelUse& u : range) {
    EXPECT_EQ(u.range_param, "k");
    EXPECT_THAT(u.detail, HasSubstr("(k at run time)"));
    for (const auto& [lo, hi] : u.ranges) {
      covered += hi - lo + 1;
      EXPECT_GE(lo, 1);
      EXPECT_LE(hi, 16384);
    }
    next = std::max(next, u.ranges.back().second + 1);
  }
  EXPECT_EQ(covered, 16384);
  EXPECT_EQ(next, 16385);
  const auto part = uses({{"m", 7168}, {"n", 2048}, {"k", ops::ProblemValue::range(100, 300)}, {"k_grouped", 1}});
  ASSERT_FALSE(part.empty());
  EXPECT_EQ(part.front().ranges.front().first, 100);
  EXPECT_EQ(part.back().ranges.back().second, 300);
  // Errors: forms the k-grouped kernels are not, and ranges where they cannot be.
  EXPECT_THAT(error_of([] { uses({{"m", 64}, {"n", 2048}, {"k", 512}, {"k_grouped", 1}, {"fp32", 0}}); }),
              HasSubstr("bf16_gemm_nt: parameter k_grouped=1 writes a float32 D: it needs fp32=1 or no fp32, got "
                        "fp32=0"));
  EXPECT_THAT(error_of([] { uses({{"m", 64}, {"n", 2048}, {"k", 512}, {"k_grouped", 1}, {"n_major_b", 0}}); }),
              HasSubstr("parameter k_grouped=1 takes MN-major operands: it needs n_major_b=1 or no n_major_b, got "
                        "n_major_b=0"));
  EXPECT_THAT(error_of([] { uses({{"m", 64}, {"n", 2048}, {"k", 512}, {"k_grouped", 1}, {"m_grouped", 1}}); }),
              HasSubstr("parameters m_grouped=1 and k_grouped=1 name two forms: give one"));
  EXPECT_THAT(error_of([] { uses({{"m", 64}, {"n", 2048}, {"k", 512}, {"k_grouped", 2}}); }),
              HasSubstr("parameter k_grouped must be 0 or 1"));
  EXPECT_THAT(error_of([] { uses({{"m", 64}, {"n", 2048}, {"k", ops::ProblemValue::range(8, 64)}}); }),
              HasSubstr("parameter k may be a range only with k_grouped=1 (whose kernels take k at run time), got "
                        "k=8..64"));
  EXPECT_THAT(error_of([] {
                uses({{"m", ops::ProblemValue::range(1, 64)}, {"n", 2048}, {"k", ops::ProblemValue::range(8, 64)},
                      {"k_grouped", 1}});
              }),
              HasSubstr("give a range for m or for k, not both"));
  EXPECT_THAT(error_of([] {
                uses({{"m", 64}, {"n", 2048}, {"k", ops::ProblemValue::range(0, 64)}, {"k_grouped", 1}});
              }),
              HasSubstr("parameter k's range must hold positive token counts only, got 0..64"));
}

TEST(Bf16GemmKGroupedGolden, SourceOfOneSpec) {
  const ops::Bf16GemmPlan plan =
      ops::bf16_gemm_plan(kH200, 2048, 1024, {128, 128, 0, 0}, kAddF32, kBothMnMajor, kKGrouped);
  ASSERT_EQ(plan.kernels.size(), 1u);
  test::expect_golden_text("ops_bf16_gemm_k_grouped_golden.cu",
                           codegen::render_source(ops::bf16_gemm_spec(2048, 1024, plan.kernels[0])));
}

// Both compilers build the k-grouped kernels for sm_90a with no GPU, without spills, local memory or serialised
// WGMMAs: the plans' kernels for DeepSeek-V3's expert shapes at short and long token counts, and forced 64x64, 256x64
// and 128x256 tiles at a ragged N.
class Bf16GemmKGroupedCompile : public ::testing::TestWithParam<Backend> {
 protected:
  test::TempDir home_, state_;
};

TEST_P(Bf16GemmKGroupedCompile, ThePlansKernelsAndForcedTilesBuild) {
  std::vector<std::pair<int64_t, ops::Bf16GemmConfig>> kernels;
  const auto add = [&](int64_t n, const ops::Bf16GemmConfig& c) {
    for (const auto& [known_n, known] : kernels)
      if (known_n == n && known == c) return;
    kernels.push_back({n, c});
  };
  for (const int epilogue : {kStoreF32, kAddF32})
    for (const int64_t n : {2048, 7168})
      for (const int64_t k : {128, 4096}) {
        const ops::Bf16GemmPlan plan = ops::bf16_gemm_plan(kH200, n, k, {}, epilogue, kBothMnMajor, kKGrouped);
        add(n, plan.kernels.at(static_cast<size_t>(plan.bucket_of(n == 2048 ? 7168 : 4096).kernel)));
      }
  for (const Bf16GemmOverrides o :
       {Bf16GemmOverrides{64, 64, 0, 0}, Bf16GemmOverrides{256, 64, 0, 0}, Bf16GemmOverrides{128, 256, 0, 0}})
    add(576, ops::bf16_gemm_plan(kH200, 576, 512, o, kStoreF32, kBothMnMajor, kKGrouped).kernels.at(0));
  for (const auto& [n, c] : kernels) {
    const codegen::KernelSpec spec = ops::bf16_gemm_spec(n, 512, c);
    SCOPED_TRACE(spec.describe());
    const compiler::CompiledKernel k = test::compile_for_sm90a_and_check(GetParam(), spec, home_.path(), state_.path());
    EXPECT_LE(k.resources.registers, 240) << spec.describe();
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, Bf16GemmKGroupedCompile, ::testing::Values(Backend::kNvcc, Backend::kNvrtc),
                         [](const auto& info) { return std::string(to_string(info.param)); });

}  // namespace
}  // namespace kiln
