// The BF16 m-grouped GEMMs (m_grouped_bf16_gemm_nt_contiguous, its nn form with each expert's weights stored [k, n],
// and m_grouped_bf16_gemm_nt_masked) on the host: every
// check of their grouped tensors and of expected_m (one case per check, each naming the function, the argument, what
// was expected and what was given), the checks they share with bf16_gemm_nt on group 0's views, a valid call reaching
// the device (which this machine lacks) only after all of them; their plans (64- and 128-row tiles, no pairs, a bf16
// D, K-major operands but the nn form's B); the registry's m_grouped=1, masked=1 and n_major_b=1; the source they
// render; and both compilers building their kernels for sm_90a.
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
#include "ops/registry.hpp"
#include "test_support.hpp"

namespace kiln {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using kiln::test::error_of;
using kiln::test::ptr;

constexpr int kMGrouped = static_cast<int>(kernels::kBf16GemmMGrouped);
constexpr int kMasked = static_cast<int>(kernels::kBf16GemmMasked);

// ---- m_grouped_bf16_gemm_nt_contiguous ---------------------------------------------------------------------------

// A valid problem at distinct, 256-byte-aligned fake device addresses: m rows of every expert together (A [m, k],
// D [m, n], m_indices [m]) over B [G, n, k], or with `nn` B [G, k, n] (m_grouped_bf16_gemm_nn_contiguous: each
// expert's weights stored N-major).
struct Contiguous {
  TensorView a, b, d, m_indices;
  bool nn;
  Contiguous(int64_t groups, int64_t m, int64_t n, int64_t k, bool nn_ = false) : nn(nn_) {
    a = TensorView::contiguous(ptr(0x10000000), DType::kBFloat16, {m, k});
    b = nn ? TensorView::contiguous(ptr(0x30000000), DType::kBFloat16, {groups, k, n})
           : TensorView::contiguous(ptr(0x30000000), DType::kBFloat16, {groups, n, k});
    d = TensorView::contiguous(ptr(0x50000000), DType::kBFloat16, {m, n});
    m_indices = TensorView::contiguous(ptr(0x60000000), DType::kInt32, {m});
  }
  void run() const {
    if (nn)
      m_grouped_bf16_gemm_nn_contiguous(a, b, d, m_indices);
    else
      m_grouped_bf16_gemm_nt_contiguous(a, b, d, m_indices);
  }
};

// The error after `change` of a valid problem: 4 experts, 512 rows in all, over 576 x 520 (`nn`: B stored [G, k, n]).
std::string contiguous_error(const std::function<void(Contiguous&)>& change, ErrorKind kind = ErrorKind::kValueError,
                             bool nn = false) {
  Contiguous g(4, 512, 576, 520, nn);
  change(g);
  const std::string e = error_of([&] { g.run(); }, kind);
  EXPECT_THAT(e, HasSubstr(nn ? "m_grouped_bf16_gemm_nn_contiguous: " : "m_grouped_bf16_gemm_nt_contiguous: "));
  return e;
}

// Whether `change` leaves a problem every check passes (the call then stops at the device query).
bool contiguous_passes(const std::function<void(Contiguous&)>& change, bool nn = false) {
  Contiguous g(4, 512, 576, 520, nn);
  change(g);
  return !error_of([&] { g.run(); }, ErrorKind::kCudaError).empty();
}

TEST(Bf16GemmMGroupedValidate, DtypesAndDevices) {
  EXPECT_THAT(contiguous_error([](Contiguous& g) { g.a.dtype = DType::kFloat8E4M3; }, ErrorKind::kTypeError),
              HasSubstr("a must be bfloat16, got float8_e4m3fn"));
  EXPECT_THAT(contiguous_error([](Contiguous& g) { g.b.dtype = DType::kFloat16; }, ErrorKind::kTypeError),
              HasSubstr("b must be bfloat16, got float16"));
  // A float32 D is bf16_gemm_nt's only: the grouped forms round to bfloat16, as DeepGEMM's do.
  EXPECT_THAT(contiguous_error([](Contiguous& g) { g.d.dtype = DType::kFloat32; }, ErrorKind::kTypeError),
              HasSubstr("d must be bfloat16, got float32"));
  EXPECT_THAT(contiguous_error([](Contiguous& g) { g.m_indices.dtype = DType::kInt64; }, ErrorKind::kTypeError),
              HasSubstr("m_indices must be int32, got int64"));
  EXPECT_THAT(contiguous_error([](Contiguous& g) { g.a.device_kind = DeviceKind::kCpu; }),
              HasSubstr("a must be on a CUDA device, got cpu"));
  EXPECT_THAT(contiguous_error([](Contiguous& g) { g.m_indices.device = 1; }),
              HasSubstr("m_indices must be on the same device as a (cuda:0), got cuda:1"));
  EXPECT_THAT(contiguous_error([](Contiguous& g) { g.b.device = 2; }), HasSubstr("b must be on the same device as a"));
}

TEST(Bf16GemmMGroupedValidate, RanksAndShapes) {
  EXPECT_THAT(contiguous_error([](Contiguous& g) { g.b.ndim = 2; }), HasSubstr("b must be 3-dimensional, got 2"));
  EXPECT_THAT(contiguous_error([](Contiguous& g) { g.a.ndim = 3; }), HasSubstr("a must be 2-dimensional, got 3"));
  EXPECT_THAT(contiguous_error([](Contiguous& g) { g.m_indices.ndim = 2; }),
              HasSubstr("m_indices must be 1-dimensional"));
  EXPECT_THAT(contiguous_error([](Contiguous& g) { g.b.shape[2] = 512; }),
              AllOf(HasSubstr("b must be of shape (groups, n, k) with k == 520 (a's k)"),
                    HasSubstr("got shape (4, 576, 512)")));
  EXPECT_THAT(contiguous_error([](Contiguous& g) { g.b.shape[0] = 0; }),
              AllOf(HasSubstr("b must be of shape (groups, n, k) with 1 <= groups <= 2147483647"),
                    HasSubstr("got groups == 0")));
  EXPECT_THAT(contiguous_error([](Contiguous& g) { g.m_indices.shape[0] = 511; }),
              AllOf(HasSubstr("m_indices must be of shape (512,) (m,): the group of each of a's rows"),
                    HasSubstr("got shape (511,)")));
  EXPECT_THAT(contiguous_error([](Contiguous& g) { g.d.shape[1] = 584; }),
              HasSubstr("d must be of shape (512, 576) (m of a, n of b)"));
}

TEST(Bf16GemmMGroupedValidate, LayoutsAndOverlaps) {
  EXPECT_THAT(contiguous_error([](Contiguous& g) { g.m_indices.strides[0] = 2; }),
              HasSubstr("m_indices must be contiguous"));
  EXPECT_THAT(contiguous_error([](Contiguous& g) { g.m_indices.data = ptr(0x60000002); }),
              HasSubstr("m_indices must be 4-byte aligned"));
  // B's groups one after the other at n rows of its row stride; a padded row stride is fine.
  EXPECT_THAT(contiguous_error([](Contiguous& g) { g.b.strides[0] += 8; }),
              AllOf(HasSubstr("b must be groups one after the other: strides (n * s, s, 1), here stride(0) == 299520"),
                    HasSubstr("got strides (299528, 520, 1)")));
  EXPECT_TRUE(contiguous_passes([](Contiguous& g) { g.b.strides = {576 * 528, 528, 1, 0}; }));
  // Operands K-major only: a transposed A or B is bf16_gemm_nt's (tn, nn), not the grouped forms'.
  EXPECT_THAT(contiguous_error([](Contiguous& g) { g.a.strides = {1, 512, 0, 0}; }),
              AllOf(HasSubstr("a must be K-major (stride(-1) == 1)"), HasSubstr("got strides (1, 512)")));
  EXPECT_THAT(contiguous_error([](Contiguous& g) { g.b.strides = {576 * 520, 1, 576, 0}; }),
              AllOf(HasSubstr("b must be K-major (stride(2) == 1)"), HasSubstr("got strides (299520, 1, 576)")));
  // bf16_gemm_nt's checks, on group 0's view of B, name this function.
  EXPECT_THAT(contiguous_error([](Contiguous& g) { g.b.strides = {576 * 524, 524, 1, 0}; }),
              HasSubstr("b must be rows 16-byte aligned"));
  EXPECT_THAT(contiguous_error([](Contiguous& g) { g.a.data = ptr(0x10000008); }),
              HasSubstr("a must be 16-byte aligned"));
  // D clear of A, of every group of B (not only group 0) and of m_indices.
  EXPECT_THAT(contiguous_error([](Contiguous& g) { g.d.data = ptr(0x30000000 + 3 * 576 * 520 * 2); }),
              HasSubstr("d must be memory that does not overlap b's"));
  EXPECT_THAT(contiguous_error([](Contiguous& g) { g.m_indices.data = ptr(0x50000000 + 1024); }),
              AllOf(HasSubstr("d must be memory that does not overlap m_indices's"), HasSubstr("got an overlap")));
  EXPECT_THAT(contiguous_error([](Contiguous& g) { g.d.data = ptr(0x10000000 + 4096); }),
              HasSubstr("d must be memory that does not overlap a's"));
}

TEST(Bf16GemmMGroupedValidate, EmptyProblemsAreNoOpsAndAValidCallReachesTheDevice) {
  EXPECT_NO_THROW(Contiguous(4, 0, 576, 520).run());
  EXPECT_NO_THROW(Contiguous(4, 512, 0, 520).run());
  EXPECT_TRUE(contiguous_passes([](Contiguous&) {}));
  EXPECT_TRUE(contiguous_passes([](Contiguous& g) { g = Contiguous(1, 128, 8, 8); }));
}

// ---- m_grouped_bf16_gemm_nn_contiguous ---------------------------------------------------------------------------

// The nn form's errors (contiguous_error and contiguous_passes with B stored [G, k, n]).
std::string nn_error(const std::function<void(Contiguous&)>& change, ErrorKind kind = ErrorKind::kValueError) {
  return contiguous_error(change, kind, true);
}
bool nn_passes(const std::function<void(Contiguous&)>& change) { return contiguous_passes(change, true); }

TEST(Bf16GemmMGroupedNnValidate, DtypesShapesAndLayouts) {
  EXPECT_THAT(nn_error([](Contiguous& g) { g.b.dtype = DType::kFloat16; }, ErrorKind::kTypeError),
              HasSubstr("b must be bfloat16, got float16"));
  EXPECT_THAT(nn_error([](Contiguous& g) { g.m_indices.dtype = DType::kInt64; }, ErrorKind::kTypeError),
              HasSubstr("m_indices must be int32, got int64"));
  EXPECT_THAT(nn_error([](Contiguous& g) { g.b.ndim = 2; }), HasSubstr("b must be 3-dimensional, got 2"));
  // B is [G, k, n]: its k is size(1).
  EXPECT_THAT(nn_error([](Contiguous& g) { g.b.shape[1] = 512; }),
              AllOf(HasSubstr("b must be of shape (groups, k, n) with k == 520 (a's k)"),
                    HasSubstr("got shape (4, 512, 576)")));
  EXPECT_THAT(nn_error([](Contiguous& g) { g.b.shape[0] = 0; }),
              HasSubstr("b must be of shape (groups, k, n) with 1 <= groups <= 2147483647"));
  EXPECT_THAT(nn_error([](Contiguous& g) { g.d.shape[1] = 584; }),
              HasSubstr("d must be of shape (512, 576) (m of a, n of b)"));
  // N-major: rows of n; a K-major B (a transposed [G, n, k]) is the nt form's.
  EXPECT_THAT(nn_error([](Contiguous& g) { g.b.strides = {520 * 576, 1, 520, 0}; }),
              AllOf(HasSubstr("b must be N-major (stride(2) == 1)"), HasSubstr("got strides (299520, 1, 520)")));
  // The groups one after the other at k rows of its row stride; a padded row stride is fine, a misaligned one not.
  EXPECT_THAT(nn_error([](Contiguous& g) { g.b.strides[0] += 8; }),
              AllOf(HasSubstr("b must be groups one after the other: strides (k * s, s, 1), here stride(0) == 299520"),
                    HasSubstr("got strides (299528, 576, 1)")));
  EXPECT_TRUE(nn_passes([](Contiguous& g) { g.b.strides = {520 * 584, 584, 1, 0}; }));
  EXPECT_THAT(nn_error([](Contiguous& g) { g.b.strides = {520 * 580, 580, 1, 0}; }),
              HasSubstr("b must be N-major with columns 16-byte aligned (stride(1) a multiple of 8)"));
  EXPECT_THAT(nn_error([](Contiguous& g) { g.b.shape[2] = 572; g.d.shape[1] = 572; }),
              AllOf(HasSubstr("b must be of a size(2) (n) that is a multiple of 8, got n == 572"),
                    HasSubstr("b is bfloat16[4, 520, 572]")));  // the caller's b, not group 0's view
  EXPECT_THAT(nn_error([](Contiguous& g) { g.a.strides = {1, 512, 0, 0}; }),
              HasSubstr("a must be K-major (stride(-1) == 1)"));
  EXPECT_THAT(nn_error([](Contiguous& g) { g.d.data = ptr(0x30000000 + 3 * 576 * 520 * 2); }),
              HasSubstr("d must be memory that does not overlap b's"));
}

TEST(Bf16GemmMGroupedNnValidate, EmptyProblemsAreNoOpsAndAValidCallReachesTheDevice) {
  EXPECT_NO_THROW(Contiguous(4, 0, 576, 520, true).run());
  EXPECT_NO_THROW(Contiguous(4, 512, 0, 520, true).run());
  EXPECT_TRUE(nn_passes([](Contiguous&) {}));
  EXPECT_TRUE(nn_passes([](Contiguous& g) { g = Contiguous(1, 128, 64, 8, true); }));
}

// ---- m_grouped_bf16_gemm_nt_masked -------------------------------------------------------------------------------

// A valid problem at distinct, 256-byte-aligned fake device addresses: `groups` experts of m rows each (A [G, m, k],
// D [G, m, n]) over B [G, n, k], masked_m [G].
struct Masked {
  TensorView a, b, d, masked_m;
  int64_t expected_m = 64;
  Masked(int64_t groups, int64_t m, int64_t n, int64_t k) {
    a = TensorView::contiguous(ptr(0x10000000), DType::kBFloat16, {groups, m, k});
    b = TensorView::contiguous(ptr(0x30000000), DType::kBFloat16, {groups, n, k});
    d = TensorView::contiguous(ptr(0x50000000), DType::kBFloat16, {groups, m, n});
    masked_m = TensorView::contiguous(ptr(0x60000000), DType::kInt32, {groups});
  }
  void run() const { m_grouped_bf16_gemm_nt_masked(a, b, d, masked_m, expected_m); }
};

// The error after `change` of a valid problem: 4 experts of 256 rows over 576 x 520.
std::string masked_error(const std::function<void(Masked&)>& change, ErrorKind kind = ErrorKind::kValueError) {
  Masked g(4, 256, 576, 520);
  change(g);
  const std::string e = error_of([&] { g.run(); }, kind);
  EXPECT_THAT(e, HasSubstr("m_grouped_bf16_gemm_nt_masked: "));
  return e;
}

bool masked_passes(const std::function<void(Masked&)>& change) {
  Masked g(4, 256, 576, 520);
  change(g);
  return !error_of([&] { g.run(); }, ErrorKind::kCudaError).empty();
}

TEST(Bf16GemmMaskedValidate, DtypesAndDevices) {
  EXPECT_THAT(masked_error([](Masked& g) { g.a.dtype = DType::kFloat32; }, ErrorKind::kTypeError),
              HasSubstr("a must be bfloat16, got float32"));
  EXPECT_THAT(masked_error([](Masked& g) { g.d.dtype = DType::kFloat32; }, ErrorKind::kTypeError),
              HasSubstr("d must be bfloat16, got float32"));
  EXPECT_THAT(masked_error([](Masked& g) { g.masked_m.dtype = DType::kInt64; }, ErrorKind::kTypeError),
              HasSubstr("masked_m must be int32, got int64"));
  EXPECT_THAT(masked_error([](Masked& g) { g.masked_m.device = 1; }),
              HasSubstr("masked_m must be on the same device as a (cuda:0), got cuda:1"));
  EXPECT_THAT(masked_error([](Masked& g) { g.d.device = 2; }), HasSubstr("d must be on the same device as a"));
}

TEST(Bf16GemmMaskedValidate, RanksShapesAndExpectedM) {
  // n and k named by the caller's tensors' own dimensions (b's size(1), a's size(2)), not group 0's views'.
  EXPECT_THAT(masked_error([](Masked& g) { g = Masked(4, 256, 572, 520); }),
              AllOf(HasSubstr("b must be of a size(1) (n) that is a multiple of 8, got n == 572"),
                    HasSubstr("b is bfloat16[4, 572, 520]")));
  EXPECT_THAT(masked_error([](Masked& g) { g = Masked(4, 256, 576, 516); }),
              AllOf(HasSubstr("a must be of a size(2) (k) that is a multiple of 8, got k == 516"),
                    HasSubstr("a is bfloat16[4, 256, 516]")));
  EXPECT_THAT(masked_error([](Masked& g) { g.a = TensorView::contiguous(g.a.data, DType::kBFloat16, {1024, 520}); }),
              HasSubstr("a must be 3-dimensional, got 2"));
  EXPECT_THAT(masked_error([](Masked& g) { g.d.ndim = 2; }), HasSubstr("d must be 3-dimensional, got 2"));
  EXPECT_THAT(masked_error([](Masked& g) { g.a.shape[0] = 0; }),
              AllOf(HasSubstr("a must be of shape (groups, m, k) with 1 <= groups"), HasSubstr("groups == 0")));
  EXPECT_THAT(masked_error([](Masked& g) { g.b.shape[0] = 3; }),
              AllOf(HasSubstr("b must be of shape (groups, n, k) with groups == 4 and k == 520 (a's)"),
                    HasSubstr("got shape (3, 576, 520)")));
  EXPECT_THAT(masked_error([](Masked& g) { g.d.shape[2] = 584; }),
              AllOf(HasSubstr("d must be of shape (4, 256, 576) (groups, m of a, n of b)"),
                    HasSubstr("got shape (4, 256, 584)")));
  EXPECT_THAT(masked_error([](Masked& g) { g.masked_m.shape[0] = 5; }),
              HasSubstr("masked_m must be of shape (4,) (groups,): each group's count of valid rows"));
  EXPECT_THAT(masked_error([](Masked& g) { g.masked_m.strides[0] = 2; }), HasSubstr("masked_m must be contiguous"));
  EXPECT_THAT(masked_error([](Masked& g) { g.expected_m = -1; }),
              HasSubstr("m_grouped_bf16_gemm_nt_masked: expected_m must be >= 0 (the rows a group is expected to hold, "
                        "which picks the kernel), got -1"));
  EXPECT_TRUE(masked_passes([](Masked& g) { g.expected_m = 0; }));
  EXPECT_TRUE(masked_passes([](Masked& g) { g.expected_m = 100000; }));
}

TEST(Bf16GemmMaskedValidate, LayoutsThatLetOneMapSpanTheGroups) {
  EXPECT_THAT(masked_error([](Masked& g) { g.a.strides[0] += 8; }),
              AllOf(HasSubstr("a must be groups one after the other: stride(0) == m * 520 (the row stride) == 133120"),
                    HasSubstr("got strides (133128, 520, 1)")));
  EXPECT_TRUE(masked_passes([](Masked& g) { g.a.strides = {256 * 528, 528, 1, 0}; }));
  EXPECT_THAT(masked_error([](Masked& g) { g.b.strides[0] += 8; }),
              HasSubstr("b must be groups one after the other: strides (n * s, s, 1)"));
  // D's groups are planes: any multiple of 8 elements apart, not overlapping.
  EXPECT_TRUE(masked_passes([](Masked& g) { g.d.strides[0] = 256 * 576 + 64; }));
  EXPECT_THAT(masked_error([](Masked& g) { g.d.strides[0] = 256 * 576 - 8; }),
              AllOf(HasSubstr("d must be groups apart by a multiple of 8 elements (16 bytes) and by at least m * 576 "
                              "(the row stride) == 147456 elements"),
                    HasSubstr("got strides (147448, 576, 1)")));
  EXPECT_THAT(masked_error([](Masked& g) { g.d.strides[0] = 256 * 576 + 4; }),
              HasSubstr("got strides (147460, 576, 1)"));
  // D clear of every group of A (group 3's rows, past group 0's view) and of masked_m.
  EXPECT_THAT(masked_error([](Masked& g) { g.d.data = ptr(0x10000000 + 3 * 256 * 520 * 2); }),
              HasSubstr("d must be memory that does not overlap a's"));
  EXPECT_THAT(masked_error([](Masked& g) { g.masked_m.data = ptr(0x50000000 + 3 * 256 * 576 * 2); }),
              HasSubstr("d must be memory that does not overlap masked_m's"));
  EXPECT_THAT(masked_error([](Masked& g) { g.a.strides = {256 * 520, 1, 256, 0}; }),
              HasSubstr("a must be K-major (stride(-1) == 1)"));
}

TEST(Bf16GemmMaskedValidate, EmptyProblemsAreNoOpsAndAValidCallReachesTheDevice) {
  EXPECT_NO_THROW(Masked(4, 0, 576, 520).run());
  EXPECT_NO_THROW(Masked(4, 256, 0, 520).run());
  EXPECT_TRUE(masked_passes([](Masked&) {}));
  EXPECT_TRUE(masked_passes([](Masked& g) { g = Masked(1, 7, 576, 520); }));
}

// ---- plans, registry, sources, compiles --------------------------------------------------------------------------

const ops::TargetInfo kH200{9, 0, 132, 232448};

TEST(Bf16GemmGroupedPlan, SixtyFourAndOneTwentyEightRowTilesWithoutPairs) {
  for (const int grouping : {kMGrouped, kMasked})
    for (const int64_t n : {576, 4096, 7168})
      for (const int64_t k : {520, 7168}) {
        const ops::Bf16GemmPlan plan = ops::bf16_gemm_plan(kH200, n, k, {}, 0, 0, grouping);
        ASSERT_FALSE(plan.kernels.empty());
        EXPECT_LE(plan.kernels.size(), 8u);
        EXPECT_EQ(plan.buckets.front().m_lo, 1);
        for (const ops::Bf16GemmConfig& c : plan.kernels) {
          EXPECT_TRUE(c.block_m == 64 || c.block_m == 128) << c.describe();
          EXPECT_EQ(c.cluster_m, 1) << c.describe();
          EXPECT_EQ(c.grouping, grouping);
          EXPECT_THAT(c.describe(), HasSubstr(grouping == kMasked ? ", m-grouped masked" : ", m-grouped"));
        }
        // Deterministic, and the masked plan is the contiguous one with its kernels marked masked.
        EXPECT_EQ(plan.kernels, ops::bf16_gemm_plan(kH200, n, k, {}, 0, 0, grouping).kernels);
        if (grouping == kMasked) {
          const ops::Bf16GemmPlan contiguous = ops::bf16_gemm_plan(kH200, n, k, {}, 0, 0, kMGrouped);
          ASSERT_EQ(plan.kernels.size(), contiguous.kernels.size());
          for (size_t i = 0; i < plan.kernels.size(); ++i) {
            ops::Bf16GemmConfig c = plan.kernels[i];
            c.grouping = kMGrouped;
            EXPECT_EQ(c, contiguous.kernels[i]);
          }
        }
      }
}

// The nn form (an N-major B): the contiguous form's tiles with BLOCK_N a multiple of 64 (B loads in 64-column boxes).
TEST(Bf16GemmGroupedPlan, TheNnFormsTilesLoadBInBoxesOf64Columns) {
  for (const int64_t n : {576, 4096, 7168})
    for (const int64_t k : {520, 7168}) {
      const ops::Bf16GemmPlan plan = ops::bf16_gemm_plan(kH200, n, k, {}, 0, 2, kMGrouped);
      ASSERT_FALSE(plan.kernels.empty());
      EXPECT_LE(plan.kernels.size(), 8u);
      for (const ops::Bf16GemmConfig& c : plan.kernels) {
        EXPECT_TRUE(c.block_m == 64 || c.block_m == 128) << c.describe();
        EXPECT_EQ(c.block_n % 64, 0) << c.describe();
        EXPECT_EQ(c.cluster_m, 1) << c.describe();
        EXPECT_EQ(c.mn_major, 2);
        EXPECT_THAT(c.describe(), HasSubstr(", N-major B, m-grouped"));
      }
    }
}

TEST(Bf16GemmGroupedPlan, OverridesAndFormsItCannotTake) {
  const ops::Bf16GemmPlan forced = ops::bf16_gemm_plan(kH200, 4096, 7168, {64, 128, 0, 0}, 0, 0, kMGrouped);
  ASSERT_EQ(forced.kernels.size(), 1u);
  EXPECT_EQ(forced.kernels[0].block_m, 64);
  EXPECT_EQ(forced.kernels[0].block_n, 128);
  EXPECT_THAT(error_of([] { ops::bf16_gemm_plan(kH200, 4096, 7168, {256, 128, 0, 0}, 0, 0, kMGrouped); }),
              HasSubstr("bf16_gemm_nt: block_m must be 0 (heuristic), 64 or 128 in the m-grouped forms (an m block "
                        "lies in one group, and groups are aligned to 128 rows), got 256"));
  EXPECT_THAT(error_of([] { ops::bf16_gemm_plan(kH200, 4096, 7168, {128, 128, 0, 2}, 0, 0, kMasked); }),
              HasSubstr("bf16_gemm_nt: cluster_m must be 0 (heuristic) or 1 in the m-grouped forms"));
  EXPECT_THAT(error_of([] { ops::bf16_gemm_plan(kH200, 4096, 7168, {}, 1, 0, kMGrouped); }),
              HasSubstr("bf16_gemm_nt: the m-grouped forms take a bfloat16 D and K-major operands (the contiguous "
                        "form's B may be N-major: mn_major 2), got epilogue 1 and mn_major 0"));
  EXPECT_THAT(error_of([] { ops::bf16_gemm_plan(kH200, 4096, 7168, {}, 0, 2, kMasked); }),
              HasSubstr("got epilogue 0 and mn_major 2"));
  EXPECT_THAT(error_of([] { ops::bf16_gemm_plan(kH200, 4096, 7168, {}, 0, 1, kMGrouped); }),
              HasSubstr("the m-grouped forms take a bfloat16 D and K-major operands (the contiguous form's B may be "
                        "N-major: mn_major 2), got epilogue 0 and mn_major 1"));
  EXPECT_THAT(error_of([] { ops::bf16_gemm_plan(kH200, 4096, 7168, {64, 96, 0, 0}, 0, 2, kMGrouped); }),
              HasSubstr("block_n must be 0 (heuristic) or a multiple of 64 with an N-major b"));
  EXPECT_THAT(error_of([] { ops::bf16_gemm_plan(kH200, 4096, 7168, {}, 0, 0, 4); }),
              HasSubstr("bf16_gemm_nt: grouping must be 0 (one GEMM), 1 (m-grouped contiguous), 2 (m-grouped "
                        "masked) or 3 (k-grouped), got 4"));
}

std::vector<ops::KernelUse> uses(const ops::Problem& problem) {
  return ops::kernel_uses(ops::find_op("bf16_gemm_nt"), problem, kH200);
}

TEST(Bf16GemmGroupedRegistry, PlanListsTheGroupedKernels) {
  for (const bool masked : {false, true}) {
    ops::Problem problem{{"m", ops::ProblemValue::range(1, 16384)}, {"n", 4096}, {"k", 7168}, {"m_grouped", 1}};
    if (masked) problem["masked"] = 1;
    const auto kernels = uses(problem);
    ASSERT_FALSE(kernels.empty());
    EXPECT_LE(kernels.size(), 8u);
    int64_t covered = 0;
    for (const ops::KernelUse& u : kernels) {
      EXPECT_THAT(u.detail, HasSubstr(masked ? ", m-grouped masked" : ", m-grouped"));
      EXPECT_THAT(u.spec.describe(),
                  HasSubstr(std::string("epilogue=0 mn_major=0 group_m=8 grouping=") + (masked ? "2" : "1")));
      EXPECT_THAT(codegen::render_source(u.spec), HasSubstr(masked ? ", 0, 0, 8, 2>::run(params);"
                                                                   : ", 0, 0, 8, 1>::run(params);"));
      for (const auto& [lo, hi] : u.ranges) covered += hi - lo + 1;
    }
    EXPECT_EQ(covered, 16384);
  }
  // The dense kernels' sources are unchanged: no grouping argument.
  for (const ops::KernelUse& u : uses({{"m", ops::ProblemValue::range(1, 16384)}, {"n", 4096}, {"k", 7168}}))
    EXPECT_THAT(u.spec.describe(), Not(HasSubstr("grouping")));
  EXPECT_THAT(error_of([] { uses({{"m", 64}, {"n", 4096}, {"k", 7168}, {"masked", 1}}); }),
              HasSubstr("bf16_gemm_nt: parameter masked=1 needs m_grouped=1 (the masked kernels are m-grouped ones), "
                        "got m_grouped=0"));
  EXPECT_THAT(error_of([] { uses({{"m", 64}, {"n", 4096}, {"k", 7168}, {"m_grouped", 2}}); }),
              HasSubstr("bf16_gemm_nt: parameter m_grouped must be 0 or 1"));
  EXPECT_THAT(error_of([] { uses({{"m", 64}, {"n", 4096}, {"k", 7168}, {"m_grouped", 1}, {"masked", 5}}); }),
              HasSubstr("bf16_gemm_nt: parameter masked must be 0 or 1"));
  EXPECT_THAT(error_of([] { uses({{"m", 64}, {"n", 4096}, {"k", 7168}, {"m_grouped", 1}, {"fp32", 1}}); }),
              HasSubstr("bf16_gemm_nt: parameter m_grouped=1 takes a bfloat16 D: it needs fp32=0 and accumulate=0"));
  EXPECT_THAT(error_of([] { uses({{"m", 64}, {"n", 4096}, {"k", 7168}, {"m_grouped", 1}, {"m_major_a", 1}}); }),
              HasSubstr("bf16_gemm_nt: parameter m_grouped=1 takes a K-major A: it needs m_major_a=0"));
  EXPECT_THAT(
      error_of([] { uses({{"m", 64}, {"n", 4096}, {"k", 7168}, {"m_grouped", 1}, {"masked", 1}, {"n_major_b", 1}}); }),
      HasSubstr("bf16_gemm_nt: parameter masked=1 takes K-major operands: it needs m_major_a=0 and n_major_b=0"));
  // m_grouped=1 n_major_b=1: the nn form's kernels.
  const ops::Problem nn{
      {"m", ops::ProblemValue::range(1, 16384)}, {"n", 4096}, {"k", 7168}, {"m_grouped", 1}, {"n_major_b", 1}};
  for (const ops::KernelUse& u : uses(nn)) {
    EXPECT_THAT(u.detail, HasSubstr(", N-major B, m-grouped"));
    EXPECT_THAT(u.spec.describe(), HasSubstr("epilogue=0 mn_major=2 group_m=8 grouping=1"));
  }
  EXPECT_THAT(error_of([] { uses({{"m", 64}, {"n", 4096}, {"k", 7168}, {"m_grouped", 1}, {"block_m", 256}}); }),
              HasSubstr("block_m must be 0 (heuristic), 64 or 128 in the m-grouped forms"));
}

TEST(Bf16GemmGroupedGolden, SourceOfEachForm) {
  const ops::Bf16GemmPlan contiguous = ops::bf16_gemm_plan(kH200, 7168, 2048, {128, 128, 0, 0}, 0, 0, kMGrouped);
  ASSERT_EQ(contiguous.kernels.size(), 1u);
  test::expect_golden_text("ops_bf16_gemm_m_grouped_golden.cu",
                           codegen::render_source(ops::bf16_gemm_spec(7168, 2048, contiguous.kernels[0])));
  const ops::Bf16GemmPlan masked = ops::bf16_gemm_plan(kH200, 7168, 2048, {64, 128, 0, 0}, 0, 0, kMasked);
  ASSERT_EQ(masked.kernels.size(), 1u);
  test::expect_golden_text("ops_bf16_gemm_masked_golden.cu",
                           codegen::render_source(ops::bf16_gemm_spec(7168, 2048, masked.kernels[0])));
  const ops::Bf16GemmPlan nn = ops::bf16_gemm_plan(kH200, 7168, 2048, {128, 128, 0, 0}, 0, 2, kMGrouped);
  ASSERT_EQ(nn.kernels.size(), 1u);
  test::expect_golden_text("ops_bf16_gemm_m_grouped_nn_golden.cu",
                           codegen::render_source(ops::bf16_gemm_spec(7168, 2048, nn.kernels[0])));
}

// Both compilers build the grouped kernels for sm_90a with no GPU, without spills, local memory or serialised WGMMAs:
// each form's plan for one (n, k) (the nn form's too), and forced 64x256 and 128x256 tiles at a ragged N and K.
class Bf16GemmGroupedCompile : public ::testing::TestWithParam<Backend> {
 protected:
  test::TempDir home_, state_;
};

TEST_P(Bf16GemmGroupedCompile, ThePlansKernelsAndForcedTilesBuild) {
  std::vector<std::pair<int64_t, ops::Bf16GemmConfig>> kernels;
  for (const auto& [grouping, mn_major] : {std::pair{kMGrouped, 0}, std::pair{kMasked, 0}, std::pair{kMGrouped, 2}}) {
    for (const ops::Bf16GemmConfig& c : ops::bf16_gemm_plan(kH200, 4096, 7168, {}, 0, mn_major, grouping).kernels)
      kernels.push_back({4096, c});
    for (const Bf16GemmOverrides o : {Bf16GemmOverrides{64, 256, 0, 0}, Bf16GemmOverrides{128, 256, 0, 0}})
      kernels.push_back({576, ops::bf16_gemm_plan(kH200, 576, 520, o, 0, mn_major, grouping).kernels.at(0)});
  }
  for (const auto& [n, c] : kernels) {
    const codegen::KernelSpec spec = ops::bf16_gemm_spec(n, n == 576 ? 520 : 7168, c);
    SCOPED_TRACE(spec.describe());
    const compiler::CompiledKernel k = test::compile_for_sm90a_and_check(GetParam(), spec, home_.path(), state_.path());
    EXPECT_LE(k.resources.registers, 240) << spec.describe();
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, Bf16GemmGroupedCompile, ::testing::Values(Backend::kNvcc, Backend::kNvrtc),
                         [](const auto& info) { return std::string(to_string(info.param)); });

}  // namespace
}  // namespace kiln
