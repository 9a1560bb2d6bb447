// The weight-gradient form of the FP8 GEMM (D fp32 += A . B^T, B scaled per row per 128 K) on the host:
// every argument check of fp8_gemm_nt_accumulate / fp8_gemm_nt_wgrad (one case per check, each naming the
// function, the argument, what was expected and what was given, all before any device query), the plan and
// registry entry for accumulate=1 (with k a range of token counts: its kernels take K at run time), the golden
// source of one spec, and real compiles of every candidate tile of
// the form for sm_90a with NVCC and NVRTC (no local memory or spills, setmaxnreg honoured, QGMMA in the SASS
// where a disassembler is available).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "codegen/kernel_spec.hpp"
#include "compiler/compiler.hpp"
#include "kernel_compile_check.hpp"
#include "kiln/error.hpp"
#include "kiln/kernels/fp8_gemm_layout.h"
#include "kiln/kernels/fp8_gemm_params.h"
#include "kiln/ops.hpp"
#include "ops/fp8_gemm.hpp"
#include "ops/k_groups.hpp"
#include "ops/registry.hpp"
#include "test_support.hpp"

namespace kiln {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using kiln::test::ptr;

// A valid weight-gradient problem (m x n x k) at distinct, 256-byte-aligned fake device addresses: sfa and sfb
// MN-major and TMA-aligned, d fp32 with dense rows, c a separate fp32 tensor.
struct Args {
  TensorView a, sfa, b, sfb, d, c;
  Args(int64_t m, int64_t n, int64_t k) {
    const int64_t kb = (k + 127) / 128;
    a = TensorView::contiguous(ptr(0x100000), DType::kFloat8E4M3, {m, k});
    b = TensorView::contiguous(ptr(0x200000), DType::kFloat8E4M3, {n, k});
    sfb = TensorView::contiguous(ptr(0x300000), DType::kFloat32, {n, kb});
    sfb.strides = {1, get_tma_aligned_size(n, 4), 0, 0};
    d = TensorView::contiguous(ptr(0x1000000), DType::kFloat32, {m, n});
    sfa = TensorView::contiguous(ptr(0x500000), DType::kFloat32, {m, kb});
    sfa.strides = {1, get_tma_aligned_size(m, 4), 0, 0};
    c = TensorView::contiguous(ptr(0x2000000), DType::kFloat32, {m, n});
  }
  void accumulate() const { fp8_gemm_nt_accumulate(a, sfa, b, sfb, d); }
  void with_c() const { fp8_gemm_nt_wgrad(a, sfa, b, sfb, d, &c); }
  void without_c() const { fp8_gemm_nt_wgrad(a, sfa, b, sfb, d, nullptr); }
};

using kiln::test::error_of;

// The error of fp8_gemm_nt_accumulate after `change`; the same check must also stop fp8_gemm_nt_wgrad with a
// separate c (the message then names fp8_gemm_nt_wgrad).
std::string error_with(const std::function<void(Args&)>& change, ErrorKind kind = ErrorKind::kValueError,
                       int64_t m = 256, int64_t n = 576, int64_t k = 512) {
  Args args(m, n, k);
  change(args);
  const std::string wgrad = error_of([&] { args.with_c(); }, kind);
  EXPECT_THAT(wgrad, HasSubstr("fp8_gemm_nt_wgrad: "));
  return error_of([&] { args.accumulate(); }, kind);
}

TEST(Fp8GemmWgradValidate, Dtypes) {
  EXPECT_THAT(error_with([](Args& x) { x.a.dtype = DType::kBFloat16; }, ErrorKind::kTypeError),
              HasSubstr("fp8_gemm_nt_accumulate: a must be float8_e4m3fn, got bfloat16"));
  EXPECT_THAT(error_with([](Args& x) { x.sfa.dtype = DType::kBFloat16; }, ErrorKind::kTypeError),
              HasSubstr("sfa must be float32, got bfloat16"));
  EXPECT_THAT(error_with([](Args& x) { x.b.dtype = DType::kUInt8; }, ErrorKind::kTypeError),
              HasSubstr("b must be float8_e4m3fn, got uint8"));
  EXPECT_THAT(error_with([](Args& x) { x.sfb.dtype = DType::kFloat16; }, ErrorKind::kTypeError),
              HasSubstr("sfb must be float32, got float16"));
  // A bf16 d: the inference form's output, not this one's.
  EXPECT_THAT(error_with([](Args& x) { x.d.dtype = DType::kBFloat16; }, ErrorKind::kTypeError),
              AllOf(HasSubstr("fp8_gemm_nt_accumulate: d must be float32 (the weight-gradient form adds into an fp32 D"),
                    HasSubstr("got bfloat16 (d is bfloat16[256, 576]")));
  Args x(256, 576, 512);
  x.c.dtype = DType::kBFloat16;
  EXPECT_THAT(error_of([&] { x.with_c(); }, ErrorKind::kTypeError),
              HasSubstr("fp8_gemm_nt_wgrad: c must be float32, got bfloat16 (c is bfloat16[256, 576]"));
}

TEST(Fp8GemmWgradValidate, Devices) {
  EXPECT_THAT(error_with([](Args& x) { x.a.device_kind = DeviceKind::kCpu; }), HasSubstr("a must be on a CUDA device, got cpu"));
  EXPECT_THAT(error_with([](Args& x) { x.sfa.device = 1; }), HasSubstr("sfa must be on the same device as a (cuda:0), got cuda:1"));
  EXPECT_THAT(error_with([](Args& x) { x.b.device = 1; }), HasSubstr("b must be on the same device as a"));
  EXPECT_THAT(error_with([](Args& x) { x.sfb.device = 2; }), HasSubstr("sfb must be on the same device as a"));
  EXPECT_THAT(error_with([](Args& x) { x.d.device_kind = DeviceKind::kCpu; }), HasSubstr("d must be on a CUDA device, got cpu"));
  Args x(256, 576, 512);
  x.c.device = 3;
  EXPECT_THAT(error_of([&] { x.with_c(); }), HasSubstr("fp8_gemm_nt_wgrad: c must be on the same device as a (cuda:0), got cuda:3"));
  x = Args(256, 576, 512);
  x.c.device_kind = DeviceKind::kCpu;
  EXPECT_THAT(error_of([&] { x.with_c(); }), HasSubstr("c must be on a CUDA device, got cpu"));
}

TEST(Fp8GemmWgradValidate, Shapes) {
  EXPECT_THAT(error_with([](Args& x) { x.a.ndim = 3; }), HasSubstr("a must be 2-dimensional, got 3"));
  EXPECT_THAT(error_with([](Args& x) { x.b.shape[1] = 640; }), HasSubstr("b must be of shape (n, k) with k == 512 (a's k)"));
  EXPECT_THAT(error_with([](Args& x) { x.d.shape[1] = 584; }),
              AllOf(HasSubstr("d must be of shape (256, 576) (m of a, n of b)"), HasSubstr("got shape (256, 584)")));
  EXPECT_THAT(error_with([](Args& x) { x.sfa.shape[1] = 5; }), HasSubstr("sfa must be of shape (256, 4) (m, ceil(k / 128))"));
  EXPECT_THAT(error_with([](Args& x) { x.sfb.shape[0] = 575; }),
              AllOf(HasSubstr("sfb must be of shape (576, 4) (n, ceil(k / 128)): per-row 1x128 scales"),
                    HasSubstr("got shape (575, 4)"), Not(HasSubstr("128x128"))));
  EXPECT_THAT(error_with([](Args& x) { x.sfb.ndim = 1; }), HasSubstr("sfb must be 2-dimensional"));
  // The inference form's 128x128-block scales: the message says why they do not fit.
  EXPECT_THAT(error_with([](Args& x) { x.sfb = TensorView::contiguous(ptr(0x300000), DType::kFloat32, {5, 4}); }),
              AllOf(HasSubstr("fp8_gemm_nt_accumulate: sfb must be of shape (576, 4) (n, ceil(k / 128)): per-row 1x128 "
                              "scales, one per row of B per 128 K"),
                    HasSubstr("128x128-block scales (ceil(n / 128), ceil(k / 128)) are for fp8_gemm_nt's bfloat16 form"),
                    HasSubstr("got shape (5, 4)")));
  EXPECT_THAT(error_of([] { Args(16, 572, 512).accumulate(); }), HasSubstr("b must be of a size(0) (n) that is a multiple of 8"));
  EXPECT_THAT(error_of([] { Args(16, 576, 520).accumulate(); }),
              AllOf(HasSubstr("a must be of a size(1) (k) that is a positive multiple of 16"), HasSubstr("k == 520")));
  // k == 0 with something to compute is an error, with or without c (not "D = C").
  EXPECT_THAT(error_of([] { Args(16, 576, 0).accumulate(); }), HasSubstr("k == 0"));
  EXPECT_THAT(error_of([] { Args(16, 576, 0).without_c(); }), HasSubstr("fp8_gemm_nt_wgrad: a must be of a size(1) (k)"));
  Args x(256, 576, 512);
  x.c.shape[0] = 255;
  EXPECT_THAT(error_of([&] { x.with_c(); }),
              AllOf(HasSubstr("fp8_gemm_nt_wgrad: c must be of shape (256, 576) (m of a, n of b), as d"),
                    HasSubstr("got shape (255, 576)")));
}

TEST(Fp8GemmWgradValidate, StridesOfDAndC) {
  EXPECT_THAT(error_with([](Args& x) { x.a.strides = {520, 1, 0, 0}; }), HasSubstr("a must be rows 16-byte aligned"));
  EXPECT_THAT(error_with([](Args& x) { x.b.strides = {256, 1, 0, 0}; }), HasSubstr("b must be row-major with stride(0) >= size(1) == 512"));
  // d: fp32 rows, any row stride >= n that keeps them 16-byte aligned (a multiple of 4 floats).
  EXPECT_THAT(error_with([](Args& x) { x.d.strides = {570, 1, 0, 0}; }),
              HasSubstr("fp8_gemm_nt_accumulate: d must be row-major with stride(0) >= size(1) == 576, got stride(0) == 570"));
  EXPECT_THAT(error_with([](Args& x) { x.d.strides = {578, 1, 0, 0}; }),
              AllOf(HasSubstr("d must be rows 16-byte aligned (stride(0) a multiple of 4)"), HasSubstr("2312 bytes")));
  EXPECT_THAT(error_with([](Args& x) { x.d.strides = {1, 256, 0, 0}; }), HasSubstr("d must be dense along its last dimension"));
  // c: dense rows, any row stride >= n (it is copied with a pitched copy).
  Args x(256, 576, 512);
  x.c.strides = {2, 1, 0, 0};
  EXPECT_THAT(error_of([&] { x.with_c(); }), HasSubstr("fp8_gemm_nt_wgrad: c must be row-major with stride(0) >= size(1) == 576"));
  x = Args(256, 576, 512);
  x.c.strides = {577, 2, 0, 0};
  EXPECT_THAT(error_of([&] { x.with_c(); }), HasSubstr("c must be dense along its last dimension (stride(1) == 1)"));
}

TEST(Fp8GemmWgradValidate, ScalesOfBArePerRowMnMajorAndTmaAligned) {
  // Row-major per-row scales: refused, saying what to do.
  EXPECT_THAT(error_with([](Args& x) { x.sfb.strides = {4, 1, 0, 0}; }),
              AllOf(HasSubstr("fp8_gemm_nt_accumulate: sfb must be MN-major and TMA-aligned: strides (1, s) with s >= n "
                              "and s a multiple of 4, e.g. (1, 576)"),
                    HasSubstr("get_mn_major_tma_aligned_tensor(sfb)"), HasSubstr("got strides (4, 1) (row-major)")));
  EXPECT_THAT(error_with([](Args& x) { x.sfb.strides = {1, 570, 0, 0}; }),
              AllOf(HasSubstr("sfb must be MN-major and TMA-aligned: stride(1) >= n == 576 and a multiple of 4"),
                    HasSubstr("got stride(1) == 570")));
  EXPECT_THAT(error_with([](Args& x) { x.sfb.strides = {1, 578, 0, 0}; }), HasSubstr("got stride(1) == 578"));
  // A's scales are checked as in the bf16 form.
  EXPECT_THAT(error_with([](Args& x) { x.sfa.strides = {4, 1, 0, 0}; }),
              AllOf(HasSubstr("sfa must be MN-major and TMA-aligned: strides (1, s) with s >= m"),
                    HasSubstr("get_mn_major_tma_aligned_tensor(sfa)")));
}

TEST(Fp8GemmWgradValidate, Alignment) {
  EXPECT_THAT(error_with([](Args& x) { x.a.data = ptr(0x100008); }), HasSubstr("a must be 16-byte aligned"));
  EXPECT_THAT(error_with([](Args& x) { x.sfa.data = ptr(0x500004); }), HasSubstr("sfa must be 16-byte aligned"));
  EXPECT_THAT(error_with([](Args& x) { x.b.data = ptr(0x200001); }), HasSubstr("b must be 16-byte aligned"));
  // B's scales are TMA-loaded in this form: 16 bytes, not the 4 of the bf16 form's.
  EXPECT_THAT(error_with([](Args& x) { x.sfb.data = ptr(0x300004); }), HasSubstr("sfb must be 16-byte aligned"));
  EXPECT_THAT(error_with([](Args& x) { x.d.data = ptr(0x1000008); }), HasSubstr("d must be 16-byte aligned"));
  Args x(256, 576, 512);
  x.c.data = ptr(0x2000002);
  EXPECT_THAT(error_of([&] { x.with_c(); }), HasSubstr("fp8_gemm_nt_wgrad: c must be 4-byte aligned"));
}

TEST(Fp8GemmWgradValidate, CIsDItselfOrDoesNotOverlapIt) {
  // d's own view, or another view with d's pointer, shape and strides: accumulation; passes every check and
  // stops at the first device query (no driver here).
  Args x(256, 576, 512);
  EXPECT_FALSE(error_of([&] { fp8_gemm_nt_wgrad(x.a, x.sfa, x.b, x.sfb, x.d, &x.d); }, ErrorKind::kCudaError).empty());
  TensorView same = x.d;
  EXPECT_FALSE(error_of([&] { fp8_gemm_nt_wgrad(x.a, x.sfa, x.b, x.sfb, x.d, &same); }, ErrorKind::kCudaError).empty());
  // d's pointer with other strides.
  TensorView padded_d = x.d;
  padded_d.strides = {640, 1, 0, 0};
  EXPECT_THAT(error_of([&] { fp8_gemm_nt_wgrad(x.a, x.sfa, x.b, x.sfb, padded_d, &x.d); }),
              AllOf(HasSubstr("fp8_gemm_nt_wgrad: c must be d itself when it starts at d's address: the same shape and "
                              "strides (d's row stride is 640)"),
                    HasSubstr("got stride(0) == 576")));
  // Overlapping d without being it: a row further down, and the end of c reaching into d.
  TensorView below = x.d;
  below.data = ptr(0x1000000 + 576 * 4);
  EXPECT_THAT(error_of([&] { fp8_gemm_nt_wgrad(x.a, x.sfa, x.b, x.sfb, x.d, &below); }),
              AllOf(HasSubstr("c must be d itself or memory that does not overlap d's (d is float32[256, 576]"),
                    HasSubstr("got a tensor overlapping d")));
  TensorView before = x.d;
  before.data = ptr(0x1000000 - 16);
  EXPECT_THAT(error_of([&] { fp8_gemm_nt_wgrad(x.a, x.sfa, x.b, x.sfb, x.d, &before); }), HasSubstr("overlapping d"));
  // Right after d's last element: no overlap, every check passes.
  TensorView after = x.d;
  after.data = ptr(0x1000000 + 256 * 576 * 4);
  EXPECT_FALSE(error_of([&] { fp8_gemm_nt_wgrad(x.a, x.sfa, x.b, x.sfb, x.d, &after); }, ErrorKind::kCudaError).empty());
}

// D is read and written while A, B and their scales are read: it may share memory with none of them (c may be d).
TEST(Fp8GemmWgradValidate, DMustNotOverlapWhatTheKernelReads) {
  EXPECT_THAT(error_with([](Args& x) { x.d.data = ptr(0x100000 + 4096); }),
              HasSubstr("fp8_gemm_nt_accumulate: d must be memory that does not overlap a's (a is float8_e4m3fn[256, "
                        "512]"));
  EXPECT_THAT(error_with([](Args& x) { x.d.data = ptr(0x500000); }),
              HasSubstr("d must be memory that does not overlap sfa's"));
  EXPECT_THAT(error_with([](Args& x) { x.d.data = ptr(0x200000); }),
              HasSubstr("d must be memory that does not overlap b's"));
  EXPECT_THAT(error_with([](Args& x) { x.d.data = ptr(0x300000 - 16); }),
              HasSubstr("d must be memory that does not overlap sfb's (sfb is float32[576, 4] strides (1, 576)"));
  Args x(256, 576, 512);
  x.d.data = ptr(0x100000);
  EXPECT_THAT(error_of([&] { fp8_gemm_nt_wgrad(x.a, x.sfa, x.b, x.sfb, x.d, &x.d); }),
              HasSubstr("fp8_gemm_nt_wgrad: d must be memory that does not overlap a's"));
  EXPECT_THAT(error_of([&] { x.without_c(); }),
              HasSubstr("fp8_gemm_nt_wgrad: d must be memory that does not overlap a's"));
}

TEST(Fp8GemmWgradValidate, EmptyProblemsAreNoOpsWithoutAGpu) {
  EXPECT_NO_THROW(Args(0, 576, 512).accumulate());
  EXPECT_NO_THROW(Args(16, 0, 512).accumulate());
  EXPECT_NO_THROW(Args(0, 576, 512).with_c());
  EXPECT_NO_THROW(Args(0, 576, 512).without_c());  // no memset either: nothing to zero
  EXPECT_NO_THROW(Args(16, 0, 512).without_c());
  // ... but still checked.
  EXPECT_THAT(error_of([] {
                Args x(0, 576, 512);
                x.d.dtype = DType::kBFloat16;
                x.accumulate();
              },
                       ErrorKind::kTypeError),
              HasSubstr("d must be float32"));
}

TEST(Fp8GemmWgradValidate, AValidCallWithoutADriverFailsCleanly) {
  EXPECT_FALSE(error_of([] { Args(256, 576, 512).accumulate(); }, ErrorKind::kCudaError).empty());
  EXPECT_FALSE(error_of([] { Args(256, 576, 512).with_c(); }, ErrorKind::kCudaError).empty());
  EXPECT_FALSE(error_of([] { Args(200, 576, 720).without_c(); }, ErrorKind::kCudaError).empty());
}

// ---- the plan and the registry entry ---------------------------------------------------------------------------

using ops::Fp8GemmConfig;
using ops::Fp8GemmForm;
using ops::Fp8GemmPlan;
using ops::KernelUse;
using ops::Problem;
using ops::ProblemValue;

const ops::TargetInfo kH200{9, 0, 132, 232448};

std::vector<KernelUse> uses(const Problem& problem, const ops::TargetInfo& t = kH200) {
  return ops::kernel_uses(ops::find_op("fp8_gemm_nt"), problem, t);
}

TEST(Fp8GemmWgradPlan, SameTilesAsTheBf16FormWithTheAccumulatingEpilogue) {
  for (const auto& [n, k] : std::vector<std::pair<int64_t, int64_t>>{{2112, 7168}, {7168, 2048}, {576, 720}, {2112, 4096}}) {
    const Fp8GemmPlan plan = ops::fp8_gemm_plan(kH200, n, k, {}, Fp8GemmForm::kAccumulate);
    ASSERT_FALSE(plan.kernels.empty());
    EXPECT_LE(plan.kernels.size(), static_cast<size_t>(ops::kFp8GemmMaxKernels));
    EXPECT_EQ(plan.buckets.front().m_lo, 1);
    EXPECT_EQ(plan.buckets.back().m_hi, ops::kFp8GemmUnboundedM);
    for (const Fp8GemmConfig& c : plan.kernels) {
      EXPECT_TRUE(c.accumulate);
      EXPECT_FALSE(c.tma_store);
      EXPECT_EQ(c.cluster_m, 1);
      EXPECT_EQ(c.overlap_promotion, kernels::fp8_gemm_can_overlap_promotion(static_cast<uint32_t>(c.block_n)));
      // The most stages that fit the layout with B's scales per stage beside the widest reduce staging.
      EXPECT_EQ(static_cast<uint32_t>(c.stages),
                kernels::fp8_gemm_accumulate_stages(static_cast<uint32_t>(c.block_m), static_cast<uint32_t>(c.block_n),
                                                    kernels::kHopperSmemPerBlock));
      EXPECT_LE(ops::fp8_gemm_shared_bytes(c), kernels::kHopperSmemPerBlock);
      EXPECT_THAT(c.describe(), HasSubstr("fp32 accumulate into D"));
    }
    // The bf16 form's plan is untouched by the form parameter's existence.
    for (const Fp8GemmConfig& c : ops::fp8_gemm_plan(kH200, n, k).kernels) EXPECT_FALSE(c.accumulate);
  }
  // Forced tile and stages: the launch requests the layout with B's per-row scales.
  const Fp8GemmPlan forced = ops::fp8_gemm_plan(kH200, 7168, 2048, {128, 128, 4, 0}, Fp8GemmForm::kAccumulate);
  ASSERT_EQ(forced.kernels.size(), 1u);
  EXPECT_EQ(forced.kernels[0].stages, 4);
  EXPECT_EQ(ops::fp8_gemm_shared_bytes(forced.kernels[0]), kernels::fp8_gemm_layout(128, 128, 4, false, true).total_bytes);
}

TEST(Fp8GemmWgradPlan, ClusterOverridesAreRefusedForThisForm) {
  try {
    ops::fp8_gemm_plan(kH200, 7168, 2048, {0, 0, 0, 2}, Fp8GemmForm::kAccumulate);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("cluster_m must be 0 (heuristic) or 1 for the accumulating form"));
  }
  EXPECT_NO_THROW(ops::fp8_gemm_plan(kH200, 7168, 2048, {0, 0, 0, 1}, Fp8GemmForm::kAccumulate));
  EXPECT_NO_THROW(ops::fp8_gemm_plan(kH200, 7168, 2048, {0, 0, 0, 2}));  // the bf16 form still takes it
}

TEST(Fp8GemmWgradRegistry, AccumulateIsAProblemParameter) {
  const ops::OpDescriptor& op = ops::find_op("fp8_gemm_nt");
  bool found = false;
  for (const auto& p : op.params)
    if (p.name == "accumulate") {
      found = true;
      EXPECT_FALSE(p.required);
      EXPECT_FALSE(p.accepts_range);
      EXPECT_THAT(p.doc, HasSubstr("weight-gradient"));
    }
  EXPECT_TRUE(found);
  EXPECT_THAT(op.summary, HasSubstr("accumulate=1"));

  const Problem problem = {{"m", ProblemValue::range(1, 16384)}, {"n", 2112}, {"k", 7168}, {"accumulate", 1}};
  const std::vector<KernelUse> all = uses(problem);
  const Fp8GemmPlan plan = ops::fp8_gemm_plan(kH200, 2112, 7168, {}, Fp8GemmForm::kAccumulate);
  ASSERT_EQ(all.size(), plan.kernels.size());
  std::vector<std::pair<int64_t, int64_t>> pieces;
  for (const KernelUse& u : all) {
    EXPECT_THAT(u.spec.describe(), HasSubstr("tma_store=false cluster_m=1"));
    EXPECT_THAT(u.spec.describe(), HasSubstr("accumulate=true"));
    EXPECT_THAT(u.detail, HasSubstr("fp32 accumulate into D"));
    for (const auto& r : u.ranges) {
      pieces.push_back(r);
      const Fp8GemmConfig& c = plan.kernels[static_cast<size_t>(plan.bucket_of(r.first).kernel)];
      EXPECT_EQ(codegen::render_source(u.spec), codegen::render_source(ops::fp8_gemm_spec(2112, 7168, c)));
    }
  }
  std::sort(pieces.begin(), pieces.end());
  EXPECT_EQ(pieces.front().first, 1);
  EXPECT_EQ(pieces.back().second, 16384);
  for (size_t i = 1; i < pieces.size(); ++i) EXPECT_EQ(pieces[i].first, pieces[i - 1].second + 1);

  // accumulate=0 is the default form; the two forms never share a kernel.
  const auto bf16 = uses({{"m", ProblemValue::range(1, 16384)}, {"n", 2112}, {"k", 7168}, {"accumulate", 0}});
  const auto plain = uses({{"m", ProblemValue::range(1, 16384)}, {"n", 2112}, {"k", 7168}});
  ASSERT_EQ(bf16.size(), plain.size());
  for (size_t i = 0; i < bf16.size(); ++i) {
    EXPECT_EQ(bf16[i].spec.describe(), plain[i].spec.describe());
    for (const KernelUse& u : all) EXPECT_NE(bf16[i].spec.describe(), u.spec.describe());
  }
  EXPECT_TRUE(uses({{"m", 0}, {"n", 2112}, {"k", 7168}, {"accumulate", 1}}).empty());
}

TEST(Fp8GemmWgradRegistry, BadValuesNameTheParameter) {
  try {
    uses({{"m", 1}, {"n", 2112}, {"k", 7168}, {"accumulate", 2}});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kValueError);
    EXPECT_THAT(e.what(), HasSubstr("fp8_gemm_nt: parameter accumulate must be 0 (the bf16 form) or 1"));
    EXPECT_THAT(e.what(), HasSubstr("got 2"));
  }
  try {
    uses({{"m", 1}, {"n", 2112}, {"k", 7168}, {"accumulate", 1}, {"cluster_m", 2}});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("cluster_m must be 0 (heuristic) or 1 for the accumulating form"));
  }
}

// The form's two plans (kAccumulate with C, kFp32Store without) differ only at short K: below kReduceShortKBlocks K
// blocks (7: the reduce-add term with C) and kStoredShortKBlocks (8: the stored epilogue's bytes without C), and below
// kRagged176ReduceMinKBlocks where 128x176 does not divide N (offered without C only). The registry's no_c=1 lists the
// plan without C, for a range of token counts too, and its errors name the parameter.
TEST(Fp8GemmWgradRegistry, CallsWithoutCHaveTheirOwnPlan) {
  // 4096 x 7168 x 512 (a weight's gradient over 512 tokens): with C a 64-row tile, without C the 128-row one both
  // plans took before the term (H200, forty-first session: 73.9 against 87.9 us with C; 53.2 against 70.8 without).
  const auto with_c = ops::fp8_gemm_plan(kH200, 7168, 512, {}, Fp8GemmForm::kAccumulate);
  const auto without_c = ops::fp8_gemm_plan(kH200, 7168, 512, {}, Fp8GemmForm::kFp32Store);
  const Fp8GemmConfig& c = with_c.kernels[static_cast<size_t>(with_c.bucket_of(4096).kernel)];
  const Fp8GemmConfig& s = without_c.kernels[static_cast<size_t>(without_c.bucket_of(4096).kernel)];
  EXPECT_EQ(c.block_m, 64);
  EXPECT_EQ(s.block_m, 128);
  EXPECT_TRUE(c.accumulate && s.accumulate);  // the same kernels: D stored or added to is a run-time choice
  // From kRagged176ReduceMinKBlocks K blocks on (K = 2048) the two plans are one, kernels and buckets; from
  // kStoredShortKBlocks (K = 1024) where 176 divides N.
  for (const int64_t n : {512, 576, 1536, 2112, 7168, 24576})
    for (const int64_t k : {n == 2112 ? 1024 : 2048, 4096, 16384}) {
      const auto a = ops::fp8_gemm_plan(kH200, n, k, {}, Fp8GemmForm::kAccumulate);
      const auto b = ops::fp8_gemm_plan(kH200, n, k, {}, Fp8GemmForm::kFp32Store);
      EXPECT_EQ(a.kernels, b.kernels) << n << " x " << k;
      ASSERT_EQ(a.buckets.size(), b.buckets.size()) << n << " x " << k;
      for (size_t i = 0; i < a.buckets.size(); ++i) {
        EXPECT_EQ(a.buckets[i].m_hi, b.buckets[i].m_hi);
        EXPECT_EQ(a.buckets[i].kernel, b.buckets[i].kernel);
      }
    }

  const auto listed = uses({{"m", 4096}, {"n", 7168}, {"k", 512}, {"accumulate", 1}, {"no_c", 1}});
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(codegen::render_source(listed[0].spec), codegen::render_source(ops::fp8_gemm_spec(7168, 512, s)));
  const auto listed_c = uses({{"m", 4096}, {"n", 7168}, {"k", 512}, {"accumulate", 1}, {"no_c", 0}});
  ASSERT_EQ(listed_c.size(), 1u);
  EXPECT_EQ(codegen::render_source(listed_c[0].spec), codegen::render_source(ops::fp8_gemm_spec(7168, 512, c)));
  // K at run time: the kernels over a range of token counts follow the plan without C at each of them.
  const auto range = uses({{"m", 4096}, {"n", 7168}, {"k", ProblemValue::range(256, 1024)}, {"accumulate", 1},
                           {"no_c", 1}});
  ASSERT_FALSE(range.empty());
  for (const KernelUse& u : range) EXPECT_THAT(u.detail, HasSubstr("128x"));

  EXPECT_THAT(error_of([] { uses({{"m", 1}, {"n", 7168}, {"k", 512}, {"accumulate", 1}, {"no_c", 2}}); },
                       ErrorKind::kValueError),
              HasSubstr("fp8_gemm_nt: parameter no_c must be 0 (calls with C) or 1 (calls without C, c=None), got 2"));
  EXPECT_THAT(error_of([] { uses({{"m", 1}, {"n", 7168}, {"k", 512}, {"no_c", 1}}); }, ErrorKind::kValueError),
              HasSubstr("parameter no_c=1 needs accumulate=1"));
}

// ---- K at run time ------------------------------------------------------------------------------------------------

// The form's kernels take K (a token count) and the tile order's group height at run time: the spec of a config is
// the same at every k, with kFp8GemmRunTimeK in K's place; the bf16 form's stays specialised on k.
TEST(Fp8GemmWgradRunTimeK, OneSpecServesEveryK) {
  Fp8GemmConfig c = ops::fp8_gemm_plan(kH200, 2112, 4096, {128, 128, 0, 0}, Fp8GemmForm::kAccumulate).kernels.at(0);
  const std::string source = codegen::render_source(ops::fp8_gemm_spec(2112, 4096, c));
  EXPECT_THAT(source, HasSubstr("Fp8Gemm<2112, " + std::to_string(kernels::kFp8GemmRunTimeK) + ", 128, 128,"));
  for (int64_t k : {16, 720, 8192, 1 << 20}) EXPECT_EQ(codegen::render_source(ops::fp8_gemm_spec(2112, k, c)), source);
  // Nor does the group height render (the launch passes it): a tall-group config compiles to the same kernel.
  c.group_m = 16;
  EXPECT_EQ(codegen::render_source(ops::fp8_gemm_spec(2112, 4096, c)), source);
  c.accumulate = false;
  c.tma_store = true;
  EXPECT_THAT(codegen::render_source(ops::fp8_gemm_spec(2112, 4096, c)), HasSubstr("Fp8Gemm<2112, 4096, "));
  EXPECT_THAT(codegen::render_source(ops::fp8_gemm_spec(2112, 4096, c)), HasSubstr("16>::run"));
  EXPECT_NE(codegen::render_source(ops::fp8_gemm_spec(2112, 4096, c)),
            codegen::render_source(ops::fp8_gemm_spec(2112, 8192, c)));
}

// What K at run time buys: the plans of every token count and every M of a weight share a handful of kernels. Over
// k = 16..65536 (every multiple of 16 at n = 2112, every seventh elsewhere) and M = 1..32768 each n here needs at
// most kFp8GemmMaxKernels, as one (n, k) does (with K compiled in, each k had its own).
TEST(Fp8GemmWgradRunTimeK, EveryTokenCountOfAWeightFitsTheKernelBudget) {
  // Calls with C and calls without (their own plans at short K) alike, each within the budget on its own.
  for (const Fp8GemmForm form : {Fp8GemmForm::kAccumulate, Fp8GemmForm::kFp32Store})
    for (const auto& [n, step] :
         {std::pair<int64_t, int64_t>{2112, 16}, {576, 112}, {1536, 112}, {7168, 112}, {24576, 112}}) {
      std::set<std::string> sources;
      for (int64_t k = 16; k <= 65536; k += step)
        for (const Fp8GemmConfig& c : ops::fp8_gemm_plan(kH200, n, k, {}, form).kernels)
          sources.insert(codegen::render_source(ops::fp8_gemm_spec(n, k, c)));
      EXPECT_LE(sources.size(), static_cast<size_t>(ops::kFp8GemmMaxKernels)) << "n = " << n;
      EXPECT_GE(sources.size(), 3u) << "n = " << n;  // the plans do vary with k and m: this is not one kernel
    }
}

// Ahead of time, k may be a range with accumulate=1: every multiple of 16 in it is planned at the one m, and each
// kernel is listed once with the pieces of the range it serves, which together cover it exactly.
TEST(Fp8GemmWgradRunTimeK, RegistryTakesARangeOfTokenCounts) {
  const std::vector<KernelUse> all =
      uses({{"m", 7168}, {"n", 2112}, {"k", ProblemValue::range(1, 65536)}, {"accumulate", 1}});
  ASSERT_FALSE(all.empty());
  EXPECT_LE(all.size(), 3u);
  std::vector<std::pair<int64_t, int64_t>> pieces;
  for (const KernelUse& u : all) {
    EXPECT_EQ(u.range_param, "k");
    EXPECT_THAT(u.detail, HasSubstr("n=2112 m=7168 (k at run time): "));
    for (const auto& [lo, hi] : u.ranges) {
      pieces.emplace_back(lo, hi);
      EXPECT_EQ(lo % 16, 0);
      EXPECT_EQ(hi % 16, 0);
      for (int64_t k : {lo, (lo + hi) / 32 * 16, hi}) {  // the plan at k agrees
        const Fp8GemmPlan plan = ops::fp8_gemm_plan(kH200, 2112, k, {}, Fp8GemmForm::kAccumulate);
        const Fp8GemmConfig& c = plan.kernels[static_cast<size_t>(plan.bucket_of(7168).kernel)];
        EXPECT_EQ(codegen::render_source(u.spec), codegen::render_source(ops::fp8_gemm_spec(2112, k, c)))
            << "k = " << k;
      }
    }
  }
  std::sort(pieces.begin(), pieces.end());
  EXPECT_EQ(pieces.front().first, 16);
  EXPECT_EQ(pieces.back().second, 65536);
  for (size_t i = 1; i < pieces.size(); ++i) EXPECT_EQ(pieces[i].first, pieces[i - 1].second + 16);
  // A single k lists the kernel its range lists there.
  const std::vector<KernelUse> one = uses({{"m", 7168}, {"n", 2112}, {"k", 4096}, {"accumulate", 1}});
  ASSERT_EQ(one.size(), 1u);
  EXPECT_TRUE(std::any_of(all.begin(), all.end(), [&](const KernelUse& u) {
    return codegen::render_source(u.spec) == codegen::render_source(one[0].spec);
  }));
  EXPECT_TRUE(uses({{"m", 0}, {"n", 2112}, {"k", ProblemValue::range(16, 4096)}, {"accumulate", 1}}).empty());
}

TEST(Fp8GemmWgradRunTimeK, RangeErrorsNameTheParameter) {
  const auto expect_error = [](const Problem& p, const std::string& what) {
    try {
      uses(p);
      ADD_FAILURE() << "no error for " << what;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kValueError);
      EXPECT_THAT(e.what(), HasSubstr(what));
    }
  };
  expect_error({{"m", 7168}, {"n", 2112}, {"k", ProblemValue::range(16, 4096)}},
               "fp8_gemm_nt: parameter k may be a range only with accumulate=1");
  expect_error(
      {{"m", ProblemValue::range(1, 64)}, {"n", 2112}, {"k", ProblemValue::range(16, 4096)}, {"accumulate", 1}},
      "give a range for m or for k, not both (got m=1..64 and k=16..4096)");
  expect_error({{"m", 64}, {"n", 2112}, {"k", ProblemValue::range(1, 15)}, {"accumulate", 1}},
               "parameter k must be a range holding a positive multiple of 16, got 1..15");
  expect_error({{"m", 64}, {"n", 2112}, {"k", ProblemValue::range(16, 16 * 65537)}, {"accumulate", 1}},
               "parameter k's range may hold at most 65536 multiples of 16, got 16..1048592 (65537)");
  expect_error({{"m", 64}, {"n", 2110}, {"k", ProblemValue::range(16, 64)}, {"accumulate", 1}},
               "n must be a positive multiple of 8, got 2110");
}

// ---- K groups in one launch (k_grouped_fp8_gemm_nt_contiguous) ----------------------------------------------------

// The plan of a k-grouped call is made at the groups' mean token count rounded up to a power of two (at least one K
// block), so that calls whose counts move from step to step share a few plans and kernels.
TEST(Fp8GemmKGroupedLaunch, PlanKIsTheGroupsTokensUpToAPowerOfTwo) {
  EXPECT_EQ(ops::k_grouped_plan_k(0, 128), 0);
  EXPECT_EQ(ops::k_grouped_plan_k(128, 128), 128);
  EXPECT_EQ(ops::k_grouped_plan_k(16, 128), 128);  // at least one scale block
  EXPECT_EQ(ops::k_grouped_plan_k(384, 128), 512);
  EXPECT_EQ(ops::k_grouped_plan_k(4096, 128), 4096);
  EXPECT_EQ(ops::k_grouped_plan_k(4224, 128), 8192);
}
TEST(Fp8GemmKGroupedLaunch, GroupsOfOneKernelGoInRunsOfTheParameterTablesSize) {
  EXPECT_TRUE(ops::k_grouped_launches({}, kFp8GemmMaxLaunchGroups).empty());
  EXPECT_TRUE(ops::k_grouped_launches({-1, -1, -1}, kFp8GemmMaxLaunchGroups).empty());
  EXPECT_EQ(ops::k_grouped_launches({0, -1, 0}, kFp8GemmMaxLaunchGroups), (std::vector<std::vector<size_t>>{{0, 2}}));
  // Two kernels: each one's groups in order, the first kernel's launches first.
  EXPECT_EQ(ops::k_grouped_launches({1, 0, -1, 1, 0}, kFp8GemmMaxLaunchGroups), (std::vector<std::vector<size_t>>{{1, 4}, {0, 3}}));
  std::vector<int> kernel_of(80, 0);
  kernel_of[3] = kernel_of[40] = -1;
  const auto launches = ops::k_grouped_launches(kernel_of, kFp8GemmMaxLaunchGroups);
  ASSERT_EQ(launches.size(), 3u);
  EXPECT_EQ(launches[0].size(), kFp8GemmMaxLaunchGroups);
  EXPECT_EQ(launches[1].size(), kFp8GemmMaxLaunchGroups);
  EXPECT_EQ(launches[2].size(), 78 - 2 * kFp8GemmMaxLaunchGroups);
  std::vector<size_t> all;
  for (const auto& l : launches) all.insert(all.end(), l.begin(), l.end());
  ASSERT_EQ(all.size(), 78u);
  for (size_t i = 1; i < all.size(); ++i) EXPECT_LT(all[i - 1], all[i]);
  EXPECT_EQ(std::count(all.begin(), all.end(), 3u), 0);
  EXPECT_EQ(std::count(all.begin(), all.end(), 40u), 0);
  // A second kernel's groups start launches of their own, never sharing one with the first's.
  kernel_of[79] = 1;
  const auto mixed = ops::k_grouped_launches(kernel_of, kFp8GemmMaxLaunchGroups);
  ASSERT_EQ(mixed.size(), 4u);
  EXPECT_EQ(mixed[2].size(), 77 - 2 * kFp8GemmMaxLaunchGroups);
  EXPECT_EQ(mixed[3], std::vector<size_t>{79});
  // Its parameters fit what a launch may pass (32764 bytes since CUDA 12.1).
  EXPECT_LE(sizeof(Fp8GemmGroupedParams), 32764u);
}

// The K blocks a CTA of the k-grouped kernel walks (a closed form per group) are those of its work units one by one,
// for grids smaller and larger than a group, and group sizes of one unit and more.
TEST(Fp8GemmKGroupedLaunch, ACtasBlocksAreItsUnitsBlocks) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 3000; ++trial) {
    const uint32_t groups = 1 + rng() % kFp8GemmMaxLaunchGroups, upg = 1 + rng() % 200, stride = 1 + rng() % 264;
    const uint32_t first = rng() % stride;
    std::vector<uint32_t> k_blocks(groups);
    for (uint32_t& k : k_blocks) k = 1 + rng() % 64;
    uint32_t expected = 0;
    for (uint32_t u = first; u < groups * upg; u += stride) expected += k_blocks[u / upg];
    ASSERT_EQ(kernels::fp8_gemm_grouped_blocks(k_blocks.data(), groups, upg, first, stride), expected)
        << groups << " groups of " << upg << " units, CTA " << first << " of " << stride;
  }
}

// The registry's k_grouped=1: the accumulate plan's kernels, k-grouped (their own sources and keys), and errors
// that name the parameter.
TEST(Fp8GemmKGroupedLaunch, RegistryTakesKGrouped) {
  const auto plain = uses({{"m", 7168}, {"n", 2112}, {"k", 1024}, {"accumulate", 1}});
  const auto grouped = uses({{"m", 7168}, {"n", 2112}, {"k", 1024}, {"accumulate", 1}, {"k_grouped", 1}});
  ASSERT_EQ(plain.size(), 1u);
  ASSERT_EQ(grouped.size(), 1u);
  EXPECT_THAT(grouped[0].spec.describe(), HasSubstr("group_m=8 k_grouped=true"));
  EXPECT_EQ(grouped[0].spec.params_type, "kiln::Fp8GemmGroupedParams");
  EXPECT_THAT(grouped[0].detail, HasSubstr("K groups in one launch"));
  EXPECT_NE(codegen::render_source(grouped[0].spec), codegen::render_source(plain[0].spec));
  // The same tile as the plain kernel.
  EXPECT_THAT(grouped[0].spec.describe(), HasSubstr(plain[0].spec.describe().substr(0, 40)));
  // A range of token counts too (the kernels take K at run time).
  const auto range =
      uses({{"m", 7168}, {"n", 2112}, {"k", ProblemValue::range(16, 8192)}, {"accumulate", 1}, {"k_grouped", 1}});
  ASSERT_FALSE(range.empty());
  for (const KernelUse& u : range) EXPECT_THAT(u.spec.describe(), HasSubstr("k_grouped=true"));
  EXPECT_THAT(error_of([] { uses({{"m", 7168}, {"n", 2112}, {"k", 1024}, {"accumulate", 1}, {"k_grouped", 2}}); },
                       ErrorKind::kValueError),
              HasSubstr("fp8_gemm_nt: parameter k_grouped must be 0 or 1"));
  EXPECT_THAT(error_of([] { uses({{"m", 7168}, {"n", 2112}, {"k", 1024}, {"k_grouped", 1}}); }, ErrorKind::kValueError),
              HasSubstr("parameter k_grouped=1 needs accumulate=1"));
}

// ---- golden source -----------------------------------------------------------------------------------------------

TEST(Fp8GemmWgradGolden, SourceOfOneSpec) {
  const Fp8GemmPlan plan = ops::fp8_gemm_plan(kH200, 2112, 4096, {128, 128, 0, 0}, Fp8GemmForm::kAccumulate);
  ASSERT_EQ(plan.kernels.size(), 1u);
  test::expect_golden_text("ops_fp8_gemm_wgrad_golden.cu", codegen::render_source(ops::fp8_gemm_spec(2112, 4096, plan.kernels[0])));
}

TEST(Fp8GemmWgradGolden, SourceOfOneKGroupedSpec) {
  Fp8GemmConfig c = ops::fp8_gemm_plan(kH200, 2112, 4096, {128, 128, 0, 0}, Fp8GemmForm::kAccumulate).kernels.at(0);
  c.k_grouped = true;
  test::expect_golden_text("ops_fp8_gemm_k_grouped_golden.cu",
                           codegen::render_source(ops::fp8_gemm_spec(2112, 4096, c)));
}

// ---- real compiles -------------------------------------------------------------------------------------------------

class Fp8GemmWgradCompile : public ::testing::TestWithParam<Backend> {
 protected:
  // The tensor-core FP8 MMA in the SASS (QGMMA), when nvdisasm or cuobjdump is installed (CUDA_HOME/bin or
  // PATH; `pip install triton` ships both); without one the check is skipped with a note.
  void expect_qgmma(const compiler::CompiledKernel& k, const std::string& what) {
    try {
      const std::string sass = compiler::disassemble_sass(k.cubin, Config::from_variables({{"HOME", home_.path().string()}}));
      EXPECT_NE(sass.find("QGMMA"), std::string::npos) << what << ": no QGMMA in the SASS";
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kNotFound) throw;
      if (!noted_) std::printf("[ note ] QGMMA not checked: no SASS disassembler here (%s)\n", e.what());
      noted_ = true;
    }
  }
  // Compiles `spec` with this test's backend and checks what every kernel of the form must have: no spills or local
  // memory, setmaxnreg honoured, no serialised WGMMA, QGMMA; and in the PTX D's prefetch into L2 ahead of the
  // reduce-adds, the reduce-adds and the stores that replace them with no C, through D's `dims` map ("2d", or "3d"
  // with the group's plane when K groups share the launch).
  void expect_form_kernel(const codegen::KernelSpec& spec, const std::string& dims) {
    SCOPED_TRACE(spec.describe());
    compiler::CompiledKernel k =
        test::compile_for_sm90a_and_check(GetParam(), spec, home_.path(), state_.path(), /*keep_ptx=*/true);
    EXPECT_EQ(k.log.find("C7508"), std::string::npos) << "setmaxnreg ignored:\n" << k.log;
    EXPECT_EQ(k.log.find("C7514"), std::string::npos) << "wgmma serialised:\n" << k.log;
    EXPECT_NE(k.ptx.find("cp.async.bulk.prefetch.tensor." + dims + ".L2.global.tile"), std::string::npos)
        << "no prefetch of D through its map";
    EXPECT_NE(k.ptx.find("cp.reduce.async.bulk.tensor." + dims + ".global.shared::cta.add"), std::string::npos);
    EXPECT_NE(k.ptx.find("cp.async.bulk.tensor." + dims + ".global.shared::cta.bulk_group"), std::string::npos);
    expect_qgmma(k, spec.describe());
  }
  test::TempDir home_, state_;
  bool noted_ = false;
};

// Every candidate tile of the heuristic in this form (the extremes: 64x32 with one math warpgroup and many
// stages; 128x192 without overlapped promotion, whose 96-float accumulators and per-column B scales press
// hardest on the registers), at a K with a tail block.
TEST_P(Fp8GemmWgradCompile, EveryCandidateTileFitsInRegisters) {
  static constexpr int kTiles[][2] = {{128, 128}, {128, 64}, {128, 160}, {128, 192}, {64, 128}, {64, 64}, {64, 32}};
  for (const auto& tile : kTiles) {
    const Fp8GemmPlan plan = ops::fp8_gemm_plan(kH200, 576, 720, {tile[0], tile[1], 0, 0}, Fp8GemmForm::kAccumulate);
    ASSERT_EQ(plan.kernels.size(), 1u);
    expect_form_kernel(ops::fp8_gemm_spec(576, 720, plan.kernels[0]), "2d");
  }
}

// The k-grouped kernels of the same tiles (each group's maps, K count and scale columns from the 9 KB parameter
// table, D's group as a third coordinate): the same register budget, no spills, QGMMA.
TEST_P(Fp8GemmWgradCompile, EveryKGroupedCandidateTileFitsInRegisters) {
  static constexpr int kTiles[][2] = {{128, 128}, {128, 64}, {128, 160}, {128, 176}, {128, 192}, {64, 128}, {64, 32}};
  for (const auto& tile : kTiles) {
    Fp8GemmConfig c =
        ops::fp8_gemm_plan(kH200, 576, 720, {tile[0], tile[1], 0, 0}, Fp8GemmForm::kAccumulate).kernels.at(0);
    c.k_grouped = true;
    expect_form_kernel(ops::fp8_gemm_spec(576, 720, c), "3d");
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, Fp8GemmWgradCompile, ::testing::Values(Backend::kNvcc, Backend::kNvrtc),
                         [](const auto& info) { return std::string(to_string(info.param)); });

}  // namespace
}  // namespace kiln
