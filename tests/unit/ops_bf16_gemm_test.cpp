// The BF16 GEMM (bf16_gemm_nt, and bf16_gemm_nt_accumulate with its C) on the host: every check (one case per check,
// each naming the function, the argument, what was expected and what was given), a valid call reaching the device
// (which this machine lacks) only after all of them; the overrides; its plans (deterministic, at most eight kernels,
// buckets covering every M, overrides honoured, a float32 D's plan of its own); the registry's bf16_gemm_nt; the
// sources it renders; and both compilers building its kernels, of every epilogue, for sm_90a.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
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
using kiln::test::ptr;

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
  EXPECT_THAT(error_with([](Problem& p) { p.d.dtype = DType::kFloat16; }, ErrorKind::kTypeError),
              HasSubstr("d must be bfloat16 or float32, got float16"));
  // A float32 D is the other epilogue: the sums stored as they are (its rows 16-byte aligned: 4 floats).
  EXPECT_TRUE(passes_checks([](Problem& p) { p.d = TensorView::contiguous(p.d.data, DType::kFloat32, {256, 576}); }));
  EXPECT_THAT(error_with([](Problem& p) {
                p.d = TensorView::contiguous(p.d.data, DType::kFloat32, {256, 576});
                p.d.strides[0] = 578;
              }),
              HasSubstr("d must be rows 16-byte aligned"));
}

// bf16_gemm_nt_accumulate: D (float32) = C + A . B^T, C being D itself or another float32 tensor.
struct AccumulateProblem : Problem {
  TensorView c;
  AccumulateProblem() : Problem(256, 576, 520) {
    d = TensorView::contiguous(ptr(0x50000000), DType::kFloat32, {256, 576});
    c = d;
  }
  void run() const { bf16_gemm_nt_accumulate(a, b, d, c); }
};

std::string accumulate_error(const std::function<void(AccumulateProblem&)>& change,
                             ErrorKind kind = ErrorKind::kValueError) {
  AccumulateProblem p;
  change(p);
  const std::string e = error_of([&] { p.run(); }, kind);
  EXPECT_THAT(e, HasSubstr("bf16_gemm_nt_accumulate: "));
  return e;
}

bool accumulate_passes(const std::function<void(AccumulateProblem&)>& change) {
  AccumulateProblem p;
  change(p);
  return !error_of([&] { p.run(); }, ErrorKind::kCudaError).empty();
}

TEST(Bf16GemmAccumulateValidate, EveryCheckOfDAndC) {
  EXPECT_THAT(accumulate_error([](AccumulateProblem& p) { p.d.dtype = p.c.dtype = DType::kBFloat16; },
                               ErrorKind::kTypeError),
              HasSubstr("d must be float32, got bfloat16"));
  EXPECT_THAT(accumulate_error([](AccumulateProblem& p) { p.c.dtype = DType::kBFloat16; }, ErrorKind::kTypeError),
              HasSubstr("c must be float32, got bfloat16"));
  EXPECT_THAT(accumulate_error([](AccumulateProblem& p) { p.c.device = 2; }),
              HasSubstr("c must be on the same device as a (cuda:0), got cuda:2"));
  EXPECT_THAT(accumulate_error([](AccumulateProblem& p) {
                p.c = TensorView::contiguous(ptr(0x70000000), DType::kFloat32, {256, 568});
              }),
              AllOf(HasSubstr("c must be of shape (256, 576) (m of a, n of b), as d"),
                    HasSubstr("got shape (256, 568)")));
  EXPECT_THAT(accumulate_error([](AccumulateProblem& p) { p.c.strides[1] = 2; }), HasSubstr("c must be "));
  EXPECT_THAT(accumulate_error([](AccumulateProblem& p) { p.c.data = ptr(0x50000002); }),
              HasSubstr("c must be 4-byte aligned"));
  // C at D's address must be D itself; elsewhere it must not overlap D.
  EXPECT_THAT(accumulate_error([](AccumulateProblem& p) { p.c.strides[0] = 580; }),
              AllOf(HasSubstr("c must be d itself when it starts at d's address"), HasSubstr("got stride(0) == 580")));
  EXPECT_THAT(accumulate_error([](AccumulateProblem& p) { p.c.data = ptr(0x50000000 + 4096); }),
              AllOf(HasSubstr("c must be d itself or memory that does not overlap d's"),
                    HasSubstr("got a tensor overlapping d")));
  EXPECT_TRUE(accumulate_passes([](AccumulateProblem&) {}));
  EXPECT_TRUE(accumulate_passes([](AccumulateProblem& p) {
    p.c = TensorView::contiguous(ptr(0x70000000), DType::kFloat32, {256, 576});
    p.c.strides[0] = 577;  // copied with cuMemcpy2DAsync: any pitch
  }));
  // The operands' checks name this function too.
  EXPECT_THAT(accumulate_error([](AccumulateProblem& p) { p.a.dtype = DType::kFloat16; }, ErrorKind::kTypeError),
              HasSubstr("a must be bfloat16, got float16"));
  EXPECT_THAT(accumulate_error([](AccumulateProblem& p) { p.d.data = p.a.data; }),
              HasSubstr("d must be memory that does not overlap a's"));
  // m = 0 or n = 0: nothing is read or written, nothing is enqueued.
  AccumulateProblem empty;
  empty.a = TensorView::contiguous(empty.a.data, DType::kBFloat16, {0, 520});
  empty.d = empty.c = TensorView::contiguous(empty.d.data, DType::kFloat32, {0, 576});
  EXPECT_NO_THROW(empty.run());
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
  EXPECT_THAT(error_with([](Problem& p) { p.a.strides = {2, 1040, 0, 0}; }),
              AllOf(HasSubstr("a must be K-major (stride(1) == 1) or M-major (stride(0) == 1: a transposed [k, 256] "
                              "tensor)"),
                    HasSubstr("got strides (2, 1040)")));
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

// MN-major operands (DeepGEMM's nn, tn and tt layouts: a [k, m] or b [k, n] tensor, transposed): stride(0) == 1 and
// 16-byte columns at least as long as the rows.
TEST(Bf16GemmValidate, MnMajorOperands) {
  EXPECT_TRUE(passes_checks([](Problem& p) { p.a.strides = {1, 256, 0, 0}; }));
  EXPECT_TRUE(passes_checks([](Problem& p) { p.b.strides = {1, 584, 0, 0}; }));
  EXPECT_TRUE(passes_checks([](Problem& p) {
    p.a.strides = {1, 264, 0, 0};
    p.b.strides = {1, 576, 0, 0};
  }));
  EXPECT_THAT(error_with([](Problem& p) { p.a.strides = {1, 200, 0, 0}; }),
              AllOf(HasSubstr("a must be M-major with stride(1) >= size(0) == 256"),
                    HasSubstr("got stride(1) == 200")));
  EXPECT_THAT(error_with([](Problem& p) { p.b.strides = {1, 580, 0, 0}; }),
              AllOf(HasSubstr("b must be N-major with columns 16-byte aligned (stride(1) a multiple of 8)"),
                    HasSubstr("got stride(1) == 580 (1160 bytes)")));
  EXPECT_THAT(error_with([](Problem& p) { p.b.strides = {3, 600, 0, 0}; }),
              HasSubstr("b must be K-major (stride(1) == 1) or N-major (stride(0) == 1: a transposed [k, 576] "
                        "tensor)"));
  // The overlap checks see the transposed spans too.
  EXPECT_THAT(error_with([](Problem& p) {
                p.a.strides = {1, 256, 0, 0};
                p.d.data = ptr(0x10000000 + 1024);
              }),
              HasSubstr("d must be memory that does not overlap a's"));
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

// The second sweep of forced tiles (H100, 2026-12-06, d0d45ef, bench/bf16_gemm_bench_2026-12-06_h100_d0d45ef.json):
// per dense_bf16 shape, each tile's median µs ({block_m, block_n, cluster_m, us}, as many stages as fit).
struct SweptTile {
  int block_m, block_n, cluster_m;
  double us;
};
struct SweptShape {
  int64_t m, n, k;
  std::vector<SweptTile> tiles;
};
const std::vector<SweptShape> kSweep = {
    {1, 2112, 7168,
     {{64, 16, 1, 20.1}, {64, 32, 1, 18.5}, {64, 48, 1, 20.4}, {64, 64, 1, 20.3}, {64, 96, 1, 20.9},
      {64, 128, 1, 24.0}, {64, 192, 1, 31.3}, {64, 256, 1, 40.9}, {128, 64, 1, 23.9}, {128, 96, 1, 31.2},
      {128, 128, 1, 38.9}, {128, 128, 2, 40.4}, {128, 160, 1, 47.0}, {128, 176, 1, 51.6}, {128, 192, 1, 55.0},
      {128, 208, 1, 59.6}, {128, 224, 1, 63.8}, {128, 240, 1, 68.4}, {128, 256, 1, 71.2}, {128, 256, 2, 73.0},
      {256, 128, 1, 71.8}, {256, 128, 2, 83.6}}},
    {1, 24576, 1536,
     {{64, 16, 1, 42.3}, {64, 32, 1, 34.3}, {64, 48, 1, 34.6}, {64, 64, 1, 34.4}, {64, 96, 1, 35.2},
      {64, 128, 1, 36.1}, {64, 192, 1, 37.9}, {64, 256, 1, 38.2}, {128, 64, 1, 34.6}, {128, 96, 1, 35.4},
      {128, 128, 1, 37.1}, {128, 128, 2, 43.6}, {128, 160, 1, 41.8}, {128, 176, 1, 46.7}, {128, 192, 1, 38.5},
      {128, 208, 1, 39.7}, {128, 224, 1, 37.5}, {128, 240, 1, 38.5}, {128, 256, 1, 38.1}, {128, 256, 2, 52.0},
      {256, 128, 1, 44.5}, {256, 128, 2, 73.6}}},
    {1, 32768, 512,
     {{64, 16, 1, 25.6}, {64, 32, 1, 20.0}, {64, 48, 1, 20.4}, {64, 64, 1, 19.4}, {64, 96, 1, 20.1},
      {64, 128, 1, 20.5}, {64, 192, 1, 22.2}, {64, 256, 1, 22.2}, {128, 64, 1, 19.5}, {128, 96, 1, 20.5},
      {128, 128, 1, 21.2}, {128, 128, 2, 24.8}, {128, 160, 1, 22.3}, {128, 176, 1, 23.3}, {128, 192, 1, 23.5},
      {128, 208, 1, 25.6}, {128, 224, 1, 26.2}, {128, 240, 1, 28.1}, {128, 256, 1, 23.0}, {128, 256, 2, 26.1},
      {256, 128, 1, 22.4}, {256, 128, 2, 36.8}}},
    {1, 7168, 16384,
     {{64, 16, 1, 118.8}, {64, 32, 1, 91.5}, {64, 48, 1, 111.7}, {64, 64, 1, 92.2}, {64, 96, 1, 92.3},
      {64, 128, 1, 92.7}, {64, 192, 1, 94.9}, {64, 256, 1, 108.3}, {128, 64, 1, 93.3}, {128, 96, 1, 94.3},
      {128, 128, 1, 95.7}, {128, 128, 2, 115.3}, {128, 160, 1, 102.8}, {128, 176, 1, 112.5}, {128, 192, 1, 118.4},
      {128, 208, 1, 127.7}, {128, 224, 1, 141.3}, {128, 240, 1, 147.6}, {128, 256, 1, 154.8}, {128, 256, 2, 164.6},
      {256, 128, 1, 158.7}, {256, 128, 2, 204.3}}},
    {1, 4096, 7168,
     {{64, 16, 1, 32.7}, {64, 32, 1, 29.0}, {64, 48, 1, 29.1}, {64, 64, 1, 28.7}, {64, 96, 1, 28.9},
      {64, 128, 1, 30.0}, {64, 192, 1, 34.0}, {64, 256, 1, 44.0}, {128, 64, 1, 30.0}, {128, 96, 1, 32.5},
      {128, 128, 1, 39.8}, {128, 128, 2, 45.9}, {128, 160, 1, 47.8}, {128, 176, 1, 52.3}, {128, 192, 1, 55.5},
      {128, 208, 1, 60.3}, {128, 224, 1, 64.6}, {128, 240, 1, 69.0}, {128, 256, 1, 71.5}, {128, 256, 2, 76.8},
      {256, 128, 1, 72.3}, {256, 128, 2, 87.8}}},
    {1, 7168, 2048,
     {{64, 16, 1, 22.2}, {64, 32, 1, 17.8}, {64, 48, 1, 20.5}, {64, 64, 1, 18.0}, {64, 96, 1, 18.0},
      {64, 128, 1, 18.2}, {64, 192, 1, 18.7}, {64, 256, 1, 20.7}, {128, 64, 1, 18.2}, {128, 96, 1, 18.5},
      {128, 128, 1, 19.0}, {128, 128, 2, 23.7}, {128, 160, 1, 20.0}, {128, 176, 1, 22.0}, {128, 192, 1, 21.8},
      {128, 208, 1, 23.8}, {128, 224, 1, 25.3}, {128, 240, 1, 26.7}, {128, 256, 1, 26.7}, {128, 256, 2, 32.2},
      {256, 128, 1, 27.4}, {256, 128, 2, 35.1}}},
    {128, 2112, 7168,
     {{64, 16, 1, 31.4}, {64, 32, 1, 19.8}, {64, 48, 1, 20.9}, {64, 64, 1, 21.4}, {64, 96, 1, 22.2},
      {64, 128, 1, 25.3}, {64, 192, 1, 32.2}, {64, 256, 1, 43.0}, {128, 64, 1, 25.3}, {128, 96, 1, 31.7},
      {128, 128, 1, 39.6}, {128, 128, 2, 41.0}, {128, 160, 1, 47.7}, {128, 176, 1, 51.7}, {128, 192, 1, 55.6},
      {128, 208, 1, 59.9}, {128, 224, 1, 65.4}, {128, 240, 1, 68.8}, {128, 256, 1, 72.4}, {128, 256, 2, 75.2},
      {256, 128, 1, 74.4}, {256, 128, 2, 84.5}}},
    {128, 24576, 1536,
     {{64, 16, 1, 76.3}, {64, 32, 1, 39.7}, {64, 48, 1, 38.1}, {64, 64, 1, 36.7}, {64, 96, 1, 36.9},
      {64, 128, 1, 36.9}, {64, 192, 1, 37.6}, {64, 256, 1, 41.1}, {128, 64, 1, 36.9}, {128, 96, 1, 37.3},
      {128, 128, 1, 40.1}, {128, 128, 2, 45.8}, {128, 160, 1, 42.9}, {128, 176, 1, 47.4}, {128, 192, 1, 39.7},
      {128, 208, 1, 40.2}, {128, 224, 1, 38.8}, {128, 240, 1, 39.2}, {128, 256, 1, 39.2}, {128, 256, 2, 52.9},
      {256, 128, 1, 47.7}, {256, 128, 2, 77.0}}},
    {128, 32768, 512,
     {{64, 16, 1, 44.2}, {64, 32, 1, 23.6}, {64, 48, 1, 24.3}, {64, 64, 1, 23.2}, {64, 96, 1, 23.5},
      {64, 128, 1, 22.3}, {64, 192, 1, 23.7}, {64, 256, 1, 23.9}, {128, 64, 1, 22.6}, {128, 96, 1, 23.9},
      {128, 128, 1, 23.0}, {128, 128, 2, 26.6}, {128, 160, 1, 23.7}, {128, 176, 1, 24.8}, {128, 192, 1, 25.9},
      {128, 208, 1, 26.8}, {128, 224, 1, 27.7}, {128, 240, 1, 29.0}, {128, 256, 1, 24.0}, {128, 256, 2, 27.5},
      {256, 128, 1, 25.4}, {256, 128, 2, 38.7}}},
    {128, 7168, 16384,
     {{64, 16, 1, 202.5}, {64, 32, 1, 135.8}, {64, 48, 1, 120.8}, {64, 64, 1, 102.0}, {64, 96, 1, 119.1},
      {64, 128, 1, 95.8}, {64, 192, 1, 100.7}, {64, 256, 1, 119.6}, {128, 64, 1, 96.3}, {128, 96, 1, 97.4},
      {128, 128, 1, 102.4}, {128, 128, 2, 131.5}, {128, 160, 1, 111.6}, {128, 176, 1, 123.7}, {128, 192, 1, 125.2},
      {128, 208, 1, 129.9}, {128, 224, 1, 155.3}, {128, 240, 1, 157.2}, {128, 256, 1, 160.6}, {128, 256, 2, 166.0},
      {256, 128, 1, 172.4}, {256, 128, 2, 232.0}}},
    {128, 4096, 7168,
     {{64, 16, 1, 56.0}, {64, 32, 1, 32.2}, {64, 48, 1, 38.8}, {64, 64, 1, 30.0}, {64, 96, 1, 30.4},
      {64, 128, 1, 32.8}, {64, 192, 1, 36.9}, {64, 256, 1, 46.5}, {128, 64, 1, 32.6}, {128, 96, 1, 35.1},
      {128, 128, 1, 40.3}, {128, 128, 2, 47.5}, {128, 160, 1, 48.2}, {128, 176, 1, 52.4}, {128, 192, 1, 56.2},
      {128, 208, 1, 60.0}, {128, 224, 1, 66.7}, {128, 240, 1, 69.7}, {128, 256, 1, 73.2}, {128, 256, 2, 77.9},
      {256, 128, 1, 76.2}, {256, 128, 2, 88.2}}},
    {128, 7168, 2048,
     {{64, 16, 1, 33.2}, {64, 32, 1, 20.4}, {64, 48, 1, 21.5}, {64, 64, 1, 18.5}, {64, 96, 1, 21.0},
      {64, 128, 1, 18.4}, {64, 192, 1, 19.5}, {64, 256, 1, 21.6}, {128, 64, 1, 18.5}, {128, 96, 1, 18.8},
      {128, 128, 1, 19.4}, {128, 128, 2, 24.3}, {128, 160, 1, 20.9}, {128, 176, 1, 22.4}, {128, 192, 1, 22.8},
      {128, 208, 1, 24.0}, {128, 224, 1, 27.1}, {128, 240, 1, 27.5}, {128, 256, 1, 28.0}, {128, 256, 2, 33.3},
      {256, 128, 1, 29.0}, {256, 128, 2, 36.6}}},
    {4096, 2112, 7168,
     {{64, 16, 1, 797.1}, {64, 32, 1, 683.1}, {64, 48, 1, 511.8}, {64, 64, 1, 409.5}, {64, 96, 1, 318.7},
      {64, 128, 1, 332.5}, {64, 192, 1, 192.9}, {64, 256, 1, 266.3}, {128, 64, 1, 319.5}, {128, 96, 1, 253.7},
      {128, 128, 1, 231.5}, {128, 128, 2, 221.9}, {128, 160, 1, 204.3}, {128, 176, 1, 164.5}, {128, 192, 1, 171.9},
      {128, 208, 1, 196.6}, {128, 224, 1, 205.9}, {128, 240, 1, 214.0}, {128, 256, 1, 222.3}, {128, 256, 2, 222.0},
      {256, 128, 1, 243.9}, {256, 128, 2, 249.7}}},
    {4096, 24576, 1536,
     {{64, 16, 1, 2315.0}, {64, 32, 1, 1766.4}, {64, 48, 1, 1263.2}, {64, 64, 1, 1140.8}, {64, 96, 1, 895.6},
      {64, 128, 1, 716.7}, {64, 192, 1, 457.2}, {64, 256, 1, 473.2}, {128, 64, 1, 868.9}, {128, 96, 1, 637.3},
      {128, 128, 1, 475.5}, {128, 128, 2, 469.8}, {128, 160, 1, 402.5}, {128, 176, 1, 413.4}, {128, 192, 1, 397.2},
      {128, 208, 1, 408.5}, {128, 224, 1, 422.8}, {128, 240, 1, 420.5}, {128, 256, 1, 408.4}, {128, 256, 2, 407.9},
      {256, 128, 1, 441.6}, {256, 128, 2, 434.5}}},
    {4096, 32768, 512,
     {{64, 16, 1, 1170.5}, {64, 32, 1, 605.6}, {64, 48, 1, 435.6}, {64, 64, 1, 337.9}, {64, 96, 1, 276.8},
      {64, 128, 1, 256.3}, {64, 192, 1, 253.2}, {64, 256, 1, 262.5}, {128, 64, 1, 363.3}, {128, 96, 1, 265.5},
      {128, 128, 1, 215.5}, {128, 128, 2, 211.6}, {128, 160, 1, 211.9}, {128, 176, 1, 240.7}, {128, 192, 1, 225.4},
      {128, 208, 1, 228.7}, {128, 224, 1, 229.2}, {128, 240, 1, 241.6}, {128, 256, 1, 217.3}, {128, 256, 2, 216.7},
      {256, 128, 1, 225.8}, {256, 128, 2, 228.3}}},
    {4096, 7168, 16384,
     {{64, 16, 1, 8612.5}, {64, 32, 1, 5614.9}, {64, 48, 1, 4357.5}, {64, 64, 1, 3679.0}, {64, 96, 1, 2832.6},
      {64, 128, 1, 2484.5}, {64, 192, 1, 1689.9}, {64, 256, 1, 1353.1}, {128, 64, 1, 2736.5}, {128, 96, 1, 2089.4},
      {128, 128, 1, 1564.8}, {128, 128, 2, 1403.8}, {128, 160, 1, 1213.5}, {128, 176, 1, 1202.0},
      {128, 192, 1, 1279.9}, {128, 208, 1, 1256.4}, {128, 224, 1, 1217.3}, {128, 240, 1, 1274.5},
      {128, 256, 1, 1190.4}, {128, 256, 2, 1195.8}, {256, 128, 1, 1344.0}, {256, 128, 2, 1284.6}}},
    {4096, 4096, 7168,
     {{64, 16, 1, 2098.8}, {64, 32, 1, 1365.8}, {64, 48, 1, 1048.5}, {64, 64, 1, 841.0}, {64, 96, 1, 666.1},
      {64, 128, 1, 550.8}, {64, 192, 1, 458.2}, {64, 256, 1, 357.2}, {128, 64, 1, 664.8}, {128, 96, 1, 508.4},
      {128, 128, 1, 382.6}, {128, 128, 2, 361.2}, {128, 160, 1, 343.8}, {128, 176, 1, 328.3}, {128, 192, 1, 337.4},
      {128, 208, 1, 310.6}, {128, 224, 1, 344.0}, {128, 240, 1, 366.2}, {128, 256, 1, 304.8}, {128, 256, 2, 301.9},
      {256, 128, 1, 347.9}, {256, 128, 2, 339.7}}},
    {4096, 7168, 2048,
     {{64, 16, 1, 818.8}, {64, 32, 1, 680.4}, {64, 48, 1, 492.7}, {64, 64, 1, 419.0}, {64, 96, 1, 335.1},
      {64, 128, 1, 250.1}, {64, 192, 1, 214.3}, {64, 256, 1, 189.1}, {128, 64, 1, 327.8}, {128, 96, 1, 239.3},
      {128, 128, 1, 164.0}, {128, 128, 2, 186.5}, {128, 160, 1, 157.6}, {128, 176, 1, 164.9}, {128, 192, 1, 169.2},
      {128, 208, 1, 174.2}, {128, 224, 1, 170.1}, {128, 240, 1, 178.8}, {128, 256, 1, 162.3}, {128, 256, 2, 164.0},
      {256, 128, 1, 178.1}, {256, 128, 2, 177.5}}},
};

// Among the offered tiles the sweep timed, the model's pick is within 2 % of the fastest on geometric mean and 7 % at
// worst (1.014 and 1.065 when it was calibrated): what the model's figures were set by, kept.
TEST(Bf16GemmPlan, TheModelsPickAmongTheSweptTilesIsCloseToTheFastest) {
  double log_sum = 0.0, worst = 1.0;
  for (const SweptShape& shape : kSweep) {
    const SweptTile* pick = nullptr;
    double pick_us = INFINITY, fastest = INFINITY;
    for (const SweptTile& t : shape.tiles) {
      if (!ops::bf16_gemm_offered(t.block_m, t.block_n, shape.n)) continue;
      fastest = std::min(fastest, t.us);
      const ops::Bf16GemmConfig c =
          ops::bf16_gemm_plan(kH200, shape.n, shape.k, {t.block_m, t.block_n, 0, t.cluster_m}).kernels.at(0);
      const double estimate = ops::bf16_gemm_estimate_us(kH200, shape.m, shape.n, shape.k, c);
      if (estimate < pick_us) {
        pick_us = estimate;
        pick = &t;
      }
    }
    ASSERT_NE(pick, nullptr);
    const double loss = pick->us / fastest;
    EXPECT_LE(loss, 1.07) << shape.m << " x " << shape.n << " x " << shape.k << ": " << pick->block_m << "x"
                          << pick->block_n;
    log_sum += std::log(loss);
    worst = std::max(worst, loss);
  }
  EXPECT_LE(std::exp(log_sum / static_cast<double>(kSweep.size())), 1.02);
  EXPECT_GT(worst, 1.0);  // the table is read: some shape's pick is not its fastest
}

TEST(Bf16GemmPlan, OverridesNarrowTheCandidates) {
  const ops::Bf16GemmPlan forced = ops::bf16_gemm_plan(kH200, 4096, 7168, {128, 256, 0, 2});
  ASSERT_EQ(forced.kernels.size(), 1u);
  EXPECT_EQ(forced.kernels[0].describe(), "128x256, 4 stages, 2 math warpgroups, B multicast x2");
  const ops::Bf16GemmPlan staged = ops::bf16_gemm_plan(kH200, 4096, 7168, {64, 16, 5, 0});
  ASSERT_EQ(staged.kernels.size(), 1u);
  EXPECT_EQ(staged.kernels[0].stages, 5);
  for (const ops::Bf16GemmConfig& c : ops::bf16_gemm_plan(kH200, 4096, 7168, {256, 0, 0, 0}).kernels)
    EXPECT_EQ(c.block_m, 256);
  EXPECT_THAT(error_of([] { ops::bf16_gemm_plan(kH200, 4096, 7168, {128, 256, 9, 0}); }),
              HasSubstr("bf16_gemm_nt: stages 9 do not fit in 232448 bytes of shared memory with a 128x256 tile (at "
                        "most 4)"));
  // A fourth stage for 128x256 fits beside half a staging tile (two store passes), and the plan takes it (the sweep:
  // faster than three beside a whole one); 256x128 and 128x192 keep a whole one. 128x192 with five stages stores a
  // third at a time.
  EXPECT_EQ(ops::bf16_gemm_plan(kH200, 4096, 7168, {128, 256, 0, 0}).kernels.at(0).stages, 4);
  EXPECT_EQ(ops::bf16_gemm_plan(kH200, 4096, 7168, {256, 128, 0, 0}).kernels.at(0).stages, 3);
  EXPECT_EQ(ops::bf16_gemm_plan(kH200, 4096, 7168, {128, 192, 0, 0}).kernels.at(0).stages, 4);
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

// A float32 D: twice the staging bytes, so fewer stages beside it; 128x256 and 256x128 (two stages there) are not
// offered, and every kernel keeps the epilogue it was planned for.
TEST(Bf16GemmPlan, AFloat32DHasAPlanOfItsOwn) {
  using kernels::kBf16GemmAddF32;
  using kernels::kBf16GemmStoreF32;
  for (const int epilogue : {static_cast<int>(kBf16GemmStoreF32), static_cast<int>(kBf16GemmAddF32)}) {
    for (const auto& [n, k] : kShapes) {
      SCOPED_TRACE(std::to_string(n) + " x " + std::to_string(k) + ", epilogue " + std::to_string(epilogue));
      const ops::Bf16GemmPlan plan = ops::bf16_gemm_plan(kH200, n, k, {}, epilogue);
      ASSERT_FALSE(plan.kernels.empty());
      EXPECT_LE(plan.kernels.size(), static_cast<size_t>(ops::kBf16GemmMaxKernels));
      for (const ops::Bf16GemmConfig& c : plan.kernels) {
        EXPECT_EQ(c.epilogue, epilogue);
        EXPECT_GE(c.stages, ops::kBf16GemmMinPlannedStages) << c.describe();
        // As many stages as fit beside a part of a float32 staging tile (the epilogue in passes where need be).
        EXPECT_EQ(static_cast<uint32_t>(c.stages),
                  kernels::bf16_gemm_max_forced_stages(static_cast<uint32_t>(c.block_m),
                                                       static_cast<uint32_t>(c.block_n),
                                                       static_cast<uint32_t>(kH200.shared_memory_per_block), 4))
            << c.describe();
        EXPECT_LE(c.shared_bytes(), static_cast<uint32_t>(kH200.shared_memory_per_block)) << c.describe();
        const bool stored = epilogue == static_cast<int>(kBf16GemmStoreF32);
        EXPECT_THAT(c.describe(), HasSubstr(stored ? ", float32 D" : ", added into float32 D"));
      }
      EXPECT_EQ(ops::bf16_gemm_plan(kH200, n, k, {}, epilogue).kernels, plan.kernels);
    }
  }
  // fp32 staging: 32-column boxes of 128-byte rows (16 where 32 does not divide BLOCK_N), twice the bytes.
  EXPECT_EQ(kernels::bf16_gemm_store_cols(256, 4), 32u);
  EXPECT_EQ(kernels::bf16_gemm_store_cols(48, 4), 16u);
  EXPECT_EQ(kernels::bf16_gemm_store_cols(48, 2), 16u);
  EXPECT_EQ(kernels::bf16_gemm_store_cols(192, 2), 64u);
  EXPECT_EQ(kernels::bf16_gemm_max_stages(128, 256, 232448, 4), 2u);
  EXPECT_EQ(kernels::bf16_gemm_max_stages(128, 192, 232448, 4), 3u);
  EXPECT_EQ(kernels::bf16_gemm_layout(128, 192, 3, 4).total_bytes, 98304u + 3 * (16384 + 24576) + 48);
  // 128x256 takes two stages beside a whole fp32 staging tile (when forced), or, as planned, four beside a quarter of
  // one (64 columns, four store passes).
  const ops::Bf16GemmConfig two = ops::bf16_gemm_plan(kH200, 4096, 7168, {128, 256, 2, 0}, kBf16GemmAddF32).kernels[0];
  EXPECT_EQ(two.stages, 2);
  EXPECT_EQ(two.shared_bytes(), 131072u + 2 * (16384 + 32768) + 32);
  const ops::Bf16GemmConfig four = ops::bf16_gemm_plan(kH200, 4096, 7168, {128, 256, 0, 0}, kBf16GemmAddF32).kernels[0];
  EXPECT_EQ(four.stages, 4);
  EXPECT_EQ(kernels::bf16_gemm_staging_cols(128, 256, 4, 4), 64u);
  EXPECT_EQ(four.shared_bytes(), 32768u + 4 * (16384 + 32768) + 64);
  EXPECT_THAT(error_of([] { ops::bf16_gemm_plan(kH200, 4096, 7168, {128, 256, 5, 0}, kBf16GemmStoreF32); }),
              HasSubstr("stages 5 do not fit in 232448 bytes of shared memory with a 128x256 tile (at most 4)"));
  EXPECT_THAT(error_of([] { ops::bf16_gemm_plan(kH200, 4096, 7168, {}, 3); }),
              HasSubstr("bf16_gemm_nt: epilogue must be 0 (bfloat16 D), 1 (float32 D) or 2 (added into float32 D), "
                        "got 3"));
  // The model charges a float32 D's bytes: the same tile costs more with it, and more again added into.
  ops::Bf16GemmConfig c;
  c.block_n = 192;
  c.stages = 3;
  const double bf16 = ops::bf16_gemm_estimate_us(kH200, 4096, 7168, 256, c);
  c.epilogue = static_cast<int>(kBf16GemmStoreF32);
  const double fp32 = ops::bf16_gemm_estimate_us(kH200, 4096, 7168, 256, c);
  c.epilogue = static_cast<int>(kBf16GemmAddF32);
  const double add = ops::bf16_gemm_estimate_us(kH200, 4096, 7168, 256, c);
  EXPECT_LT(bf16, fp32);
  EXPECT_LT(fp32, add);
}

// MN-major operands: a plan per layout; an N-major B's widths are multiples of 64, of 128 in CTA pairs.
TEST(Bf16GemmPlan, MnMajorOperandsHavePlansOfTheirOwn) {
  const int a_mn = static_cast<int>(kernels::kBf16GemmMnMajorA), b_mn = static_cast<int>(kernels::kBf16GemmMnMajorB);
  for (const int mn_major : {a_mn, b_mn, a_mn | b_mn}) {
    for (const auto& [n, k] : kShapes) {
      SCOPED_TRACE(std::to_string(n) + " x " + std::to_string(k) + ", mn_major " + std::to_string(mn_major));
      const ops::Bf16GemmPlan plan = ops::bf16_gemm_plan(kH200, n, k, {}, 0, mn_major);
      ASSERT_FALSE(plan.kernels.empty());
      EXPECT_LE(plan.kernels.size(), static_cast<size_t>(ops::kBf16GemmMaxKernels));
      for (const ops::Bf16GemmConfig& c : plan.kernels) {
        EXPECT_EQ(c.mn_major, mn_major);
        if (mn_major & b_mn) EXPECT_EQ(c.block_n % (64 * c.cluster_m), 0) << c.describe();
        EXPECT_THAT(c.describe(), HasSubstr(mn_major == a_mn ? ", M-major A" : ", N-major B"));
      }
    }
  }
  // An M-major A takes every width; the K-major plan is unchanged by the layouts' existence.
  EXPECT_EQ(ops::bf16_gemm_plan(kH200, 2112, 7168, {}, 0, a_mn).kernels.size(),
            ops::bf16_gemm_plan(kH200, 2112, 7168).kernels.size());
  EXPECT_THAT(error_of([&] { ops::bf16_gemm_plan(kH200, 4096, 7168, {64, 48, 0, 0}, 0, b_mn); }),
              HasSubstr("bf16_gemm_nt: block_n must be 0 (heuristic) or a multiple of 64 with an N-major b"));
  // Pairs with an N-major B: each CTA loads half of the tile's 64-column boxes, so the width is a multiple of 128.
  EXPECT_THAT(error_of([&] { ops::bf16_gemm_plan(kH200, 4096, 7168, {128, 192, 0, 2}, 0, b_mn); }),
              HasSubstr("bf16_gemm_nt: block_n must be 0 (heuristic) or a multiple of 128 for CTA pairs (cluster_m 2) "
                        "with an N-major b (each CTA loads whole 64-column boxes), got 192"));
  for (const int mn_major : {a_mn, b_mn, a_mn | b_mn})
    EXPECT_EQ(ops::bf16_gemm_plan(kH200, 4096, 7168, {128, 256, 0, 2}, 0, mn_major).kernels.at(0).cluster_m, 2);
  EXPECT_THAT(error_of([] { ops::bf16_gemm_plan(kH200, 4096, 7168, {}, 0, 4); }),
              HasSubstr("bf16_gemm_nt: mn_major must be 0..3"));
  // The spec names the epilogue (0) and the layouts: the template's arguments are positional.
  const ops::Bf16GemmConfig tn = ops::bf16_gemm_plan(kH200, 4096, 7168, {128, 256, 0, 1}, 0, a_mn | b_mn).kernels[0];
  EXPECT_THAT(ops::bf16_gemm_spec(4096, 7168, tn).describe(), HasSubstr("cluster_m=1 epilogue=0 mn_major=3"));
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
  // The float32 forms: fp32=1 stores, accumulate=1 adds (with fp32=1 or alone); their kernels name the epilogue.
  for (const auto& [problem, epilogue] :
       std::vector<std::pair<ops::Problem, std::string>>{
           {{{"m", ops::ProblemValue::range(1, 16384)}, {"n", 7168}, {"k", 2048}, {"fp32", 1}}, "epilogue=1"},
           {{{"m", ops::ProblemValue::range(1, 16384)}, {"n", 7168}, {"k", 2048}, {"accumulate", 1}}, "epilogue=2"},
           {{{"m", 4096}, {"n", 7168}, {"k", 2048}, {"fp32", 1}, {"accumulate", 1}}, "epilogue=2"}}) {
    const auto float32 = uses(problem);
    ASSERT_FALSE(float32.empty());
    EXPECT_LE(float32.size(), 8u);
    for (const ops::KernelUse& u : float32) EXPECT_THAT(u.spec.describe(), HasSubstr(epilogue));
  }
  for (const ops::KernelUse& u : kernels) EXPECT_THAT(u.spec.describe(), ::testing::Not(HasSubstr("epilogue")));
  EXPECT_THAT(error_of([] { uses({{"m", 64}, {"n", 7168}, {"k", 2048}, {"fp32", 2}}); }),
              HasSubstr("bf16_gemm_nt: parameter fp32 must be 0 (a bfloat16 D) or 1 (a float32 D), got 2"));
  EXPECT_THAT(error_of([] { uses({{"m", 64}, {"n", 7168}, {"k", 2048}, {"accumulate", 3}}); }),
              HasSubstr("bf16_gemm_nt: parameter accumulate must be 0"));
  for (const ops::KernelUse& u : uses({{"m", ops::ProblemValue::range(1, 16384)}, {"n", 7168}, {"k", 2048},
                                       {"m_major_a", 1}, {"n_major_b", 1}, {"accumulate", 1}}))
    EXPECT_THAT(u.spec.describe(), HasSubstr("epilogue=2 mn_major=3"));
  EXPECT_THAT(uses({{"m", 64}, {"n", 7168}, {"k", 2048}, {"n_major_b", 1}})[0].spec.describe(),
              HasSubstr("epilogue=0 mn_major=2"));
  EXPECT_THAT(error_of([] { uses({{"m", 64}, {"n", 7168}, {"k", 2048}, {"m_major_a", 2}}); }),
              HasSubstr("bf16_gemm_nt: parameter m_major_a must be 0 (K-major) or 1 (MN-major), got 2"));
  EXPECT_THAT(error_of([] { uses({{"m", 64}, {"n", 7168}, {"k", 2048}, {"fp32", 0}, {"accumulate", 1}}); }),
              HasSubstr("bf16_gemm_nt: parameter accumulate=1 adds into a float32 D: it needs fp32=1 or no fp32, got "
                        "fp32=0"));
}

TEST(Bf16GemmGolden, SourceOfOneSpec) {
  const ops::Bf16GemmPlan plan = ops::bf16_gemm_plan(kH200, 7168, 2048, {128, 256, 0, 2});
  ASSERT_EQ(plan.kernels.size(), 1u);
  test::expect_golden_text("ops_bf16_gemm_golden.cu",
                           codegen::render_source(ops::bf16_gemm_spec(7168, 2048, plan.kernels[0])));
  const ops::Bf16GemmPlan add =
      ops::bf16_gemm_plan(kH200, 7168, 2048, {128, 192, 0, 2}, static_cast<int>(kernels::kBf16GemmAddF32));
  ASSERT_EQ(add.kernels.size(), 1u);
  test::expect_golden_text("ops_bf16_gemm_accumulate_golden.cu",
                           codegen::render_source(ops::bf16_gemm_spec(7168, 2048, add.kernels[0])));
}

// Both compilers build the kernels for sm_90a with no GPU, without spills, local memory or serialised WGMMAs: the
// plan's for one (n, k), and every tile family forced at a ragged N and K (64x16, 64x256, 256x128 pairs, 128x256
// pairs, and with their epilogue in passes 128x256 with four stages and 128x192 pairs with five); with a float32 D,
// the accumulating plan's for one (n, k) and, stored or added, 64x48 (16-column boxes), 256x128 pairs and 128x256 in
// four passes; with MN-major operands, each layout's plan for one (n, k) and forced 256x128 and 128x256 pairs.
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
  const int store = static_cast<int>(kernels::kBf16GemmStoreF32), add = static_cast<int>(kernels::kBf16GemmAddF32);
  for (const ops::Bf16GemmConfig& c : ops::bf16_gemm_plan(kH200, 2112, 7168, {}, add).kernels)
    kernels.push_back({2112, c});
  for (const auto& [o, epilogue] : std::vector<std::pair<Bf16GemmOverrides, int>>{
           {{64, 48, 0, 0}, store}, {{256, 128, 0, 2}, add}, {{128, 256, 4, 0}, store}, {{128, 256, 4, 0}, add}})
    kernels.push_back({136, ops::bf16_gemm_plan(kH200, 136, 520, o, epilogue).kernels.at(0)});
  for (const int mn_major : {1, 2, 3}) {
    for (const ops::Bf16GemmConfig& c : ops::bf16_gemm_plan(kH200, 2112, 7168, {}, 0, mn_major).kernels)
      kernels.push_back({2112, c});
    for (const Bf16GemmOverrides o : {Bf16GemmOverrides{256, 128, 0, 2}, Bf16GemmOverrides{128, 256, 0, 2}})
      kernels.push_back({2112, ops::bf16_gemm_plan(kH200, 2112, 7168, o, add, mn_major).kernels.at(0)});
  }
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
