// The operation registry: problem descriptions -> kernel specs (the same specs the launch path builds),
// unknown operations and parameters, golden generated sources, and real compiles of every cast kernel to
// sm_90a cubin with both NVCC and NVRTC, with no local memory and no spills.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "codegen/kernel_spec.hpp"
#include "compiler/compiler.hpp"
#include "kiln/config.hpp"
#include "kiln/error.hpp"
#include "ops/quantize.hpp"
#include "ops/registry.hpp"
#include "kernel_compile_check.hpp"
#include "test_support.hpp"

namespace kiln::ops {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

using kiln::test::error_of;

std::vector<codegen::KernelSpec> kernels(const std::string& op, const Problem& problem, const TargetInfo& t = {}) {
  return find_op(op).kernels(problem, t);
}

TEST(Registry, ListsTheCastsSortedByName) {
  std::vector<std::string> names;
  for (const auto& op : all_ops()) names.push_back(op.name);
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  EXPECT_THAT(names, ::testing::IsSupersetOf({"per_block_cast_to_fp8", "per_token_cast_to_fp8"}));
  const OpDescriptor& op = find_op("per_token_cast_to_fp8");
  ASSERT_EQ(op.params.size(), 2u);
  EXPECT_EQ(op.params[0].name, "m");
  EXPECT_EQ(op.params[1].name, "k");
  EXPECT_FALSE(op.summary.empty());
  const OpDescriptor& block = find_op("per_block_cast_to_fp8");
  ASSERT_EQ(block.params.size(), 2u);
  EXPECT_EQ(block.params[0].name, "n");
  EXPECT_EQ(block.params[1].name, "k");
}

// Every operation says which targets its kernels are written for; kernel_uses() checks it first.
TEST(Registry, EachOperationNamesTheTargetsItsKernelsAreWrittenFor) {
  const auto target = [](int major, int minor, bool arch_specific) {
    TargetInfo t;
    t.arch_major = major;
    t.arch_minor = minor;
    t.arch_specific = arch_specific;
    return t;
  };
  for (const OpDescriptor& op : all_ops()) {
    SCOPED_TRACE(op.name);
    EXPECT_FALSE(op.arch.uses.empty());
    EXPECT_NO_THROW(check_target_arch(op, target(9, 0, true)));
    EXPECT_THAT(error_of([&] { check_target_arch(op, target(8, 9, false)); }, ErrorKind::kValueError),
                AllOf(HasSubstr(op.name + ": its kernels are written for sm_90"), HasSubstr("got sm_89")));
    const bool gemm = op.name == "fp8_gemm_nt" || op.name == "bf16_gemm_nt";
    EXPECT_EQ(op.arch.sm90a_only, gemm);
    for (const TargetInfo& later : {target(9, 0, false), target(10, 0, true), target(12, 0, true)}) {
      if (gemm)
        EXPECT_THAT(error_of([&] { check_target_arch(op, later); }), HasSubstr("written for sm_90a only"));
      else
        EXPECT_NO_THROW(check_target_arch(op, later));
    }
  }
  EXPECT_THAT(error_of([&] { kernel_uses(find_op("per_token_cast_to_fp8"), {{"m", 1}, {"k", 128}}, target(8, 0, false)); }),
              HasSubstr("got sm_80"));
}

// A launch checks DG_JIT_ARCH against the op's targets before its first build: sm_90 runs on an H100 (Arch::runs_on)
// but has no WGMMA, so the GEMMs refuse it by name rather than reaching ptxas.
TEST(Registry, ALaunchChecksDgJitArchAgainstTheOpsTargets) {
  const ArchNeeds& gemm = find_op("fp8_gemm_nt").arch;
  const ArchNeeds& cast = find_op("per_token_cast_to_fp8").arch;
  EXPECT_NO_THROW(check_dg_jit_arch("fp8_gemm_nt", gemm, std::nullopt));  // unset: the device's own arch
  EXPECT_NO_THROW(check_dg_jit_arch("fp8_gemm_nt", gemm, "sm_90a"));
  EXPECT_NO_THROW(check_dg_jit_arch("per_token_cast_to_fp8", cast, "sm_90"));
  EXPECT_THAT(error_of([&] { check_dg_jit_arch("m_grouped_fp8_gemm_nt_contiguous", gemm, "sm_90"); },
                       ErrorKind::kConfigError),
              HasSubstr("m_grouped_fp8_gemm_nt_contiguous: DG_JIT_ARCH=sm_90 is not an arch its kernels are written "
                        "for: sm_90a only (they use WGMMA, setmaxnreg and TMA); set DG_JIT_ARCH to one of those, or unset it"));
  EXPECT_THAT(error_of([&] { check_dg_jit_arch("per_token_cast_to_fp8", cast, "sm_89"); }, ErrorKind::kConfigError),
              HasSubstr("DG_JIT_ARCH=sm_89 is not an arch its kernels are written for: sm_90 and later"));
}

TEST(Registry, UnknownOperationListsTheKnownOnes) {
  EXPECT_THAT(error_of([] { find_op("per_tensor_cast"); }, ErrorKind::kNotFound),
              AllOf(HasSubstr("unknown operation 'per_tensor_cast'"), HasSubstr("per_block_cast_to_fp8"),
                    HasSubstr("per_token_cast_to_fp8")));
}

TEST(Registry, ProblemParametersAreChecked) {
  const OpDescriptor& op = find_op("per_token_cast_to_fp8");
  EXPECT_NO_THROW(validate_problem(op, {{"m", 4096}, {"k", 7168}}));
  EXPECT_THAT(error_of([&] { validate_problem(op, {{"m", 1}, {"k", 128}, {"n", 5}}); }, ErrorKind::kValueError),
              HasSubstr("per_token_cast_to_fp8: unknown parameter 'n'; its parameters are m, k"));
  EXPECT_THAT(error_of([&] { validate_problem(op, {{"m", 1}}); }, ErrorKind::kValueError),
              HasSubstr("per_token_cast_to_fp8: missing parameter k (columns of x"));
  EXPECT_THAT(error_of([&] { validate_problem(op, {{"m", -1}, {"k", 128}}); }, ErrorKind::kValueError),
              HasSubstr("per_token_cast_to_fp8: parameter m must be >= 0, got -1"));
  // kernels() validates too.
  EXPECT_THAT(error_of([] { kernels("per_block_cast_to_fp8", {{"m", 1}, {"k", 128}}); }, ErrorKind::kValueError),
              HasSubstr("per_block_cast_to_fp8: unknown parameter 'm'; its parameters are n, k"));
}

TEST(Registry, KMustBeAPositiveMultipleOf128) {
  EXPECT_THAT(error_of([] { kernels("per_token_cast_to_fp8", {{"m", 16}, {"k", 100}}); }, ErrorKind::kValueError),
              HasSubstr("per_token_cast_to_fp8: k must be a positive multiple of 128, got 100"));
  EXPECT_THAT(error_of([] { kernels("per_token_cast_to_fp8", {{"m", 16}, {"k", 0}}); }, ErrorKind::kValueError),
              HasSubstr("k must be a positive multiple of 128, got 0"));
  EXPECT_THAT(error_of([] { kernels("per_block_cast_to_fp8", {{"n", 16}, {"k", 130}}); }, ErrorKind::kValueError),
              HasSubstr("per_block_cast_to_fp8: k must be a positive multiple of 128, got 130"));
}

TEST(Registry, PerTokenProblemMapsToOneKernelSpecialisedOnK) {
  auto specs = kernels("per_token_cast_to_fp8", {{"m", 4096}, {"k", 7168}});
  ASSERT_EQ(specs.size(), 1u);
  const auto& s = specs[0];
  EXPECT_EQ(s.op, "per_token_cast_to_fp8");
  EXPECT_EQ(s.kernel_name(), "kiln_per_token_cast_to_fp8");
  EXPECT_EQ(s.header, "kiln/kernels/quantize.cuh");
  EXPECT_EQ(s.describe(), "k=7168 threads=256 vecs_per_thread=4");
  // m does not change the kernel; k does.
  auto other_m = kernels("per_token_cast_to_fp8", {{"m", 3}, {"k", 7168}});
  ASSERT_EQ(other_m.size(), 1u);
  EXPECT_EQ(codegen::render_source(other_m[0]), codegen::render_source(s));
  auto other_k = kernels("per_token_cast_to_fp8", {{"m", 4096}, {"k", 512}});
  ASSERT_EQ(other_k.size(), 1u);
  EXPECT_NE(codegen::render_source(other_k[0]), codegen::render_source(s));
  // m == 0 needs no kernel, as at run time.
  EXPECT_TRUE(kernels("per_token_cast_to_fp8", {{"m", 0}, {"k", 7168}}).empty());
}

TEST(Registry, PerBlockProblemMapsToOneKernelForEveryShape) {
  auto a = kernels("per_block_cast_to_fp8", {{"n", 7168}, {"k", 2048}});
  auto b = kernels("per_block_cast_to_fp8", {{"n", 129}, {"k", 128}});
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(a[0].kernel_name(), "kiln_per_block_cast_to_fp8");
  EXPECT_EQ(codegen::render_source(a[0]), codegen::render_source(b[0]));
  EXPECT_TRUE(kernels("per_block_cast_to_fp8", {{"n", 0}, {"k", 2048}}).empty());
}

TEST(Registry, SpecsAreTheOnesTheLaunchPathBuilds) {
  const TargetInfo h200{9, 0, 132, 232448};
  auto specs = kernels("per_token_cast_to_fp8", {{"m", 1}, {"k", 1536}}, h200);
  ASSERT_EQ(specs.size(), 1u);
  EXPECT_EQ(codegen::render_source(specs[0]), codegen::render_source(per_token_cast_spec(1536, h200)));
  const CastPlan plan = per_token_cast_plan(1536, h200);
  EXPECT_EQ(specs[0].block_threads, plan.threads);
  EXPECT_EQ(specs[0].min_blocks_per_sm, plan.ctas_per_sm);
  auto block = kernels("per_block_cast_to_fp8", {{"n", 1}, {"k", 1536}}, h200);
  ASSERT_EQ(block.size(), 1u);
  EXPECT_EQ(codegen::render_source(block[0]), codegen::render_source(per_block_cast_spec(h200)));
  // Deterministic.
  EXPECT_EQ(codegen::render_source(per_block_cast_spec(h200)), codegen::render_source(per_block_cast_spec(h200)));
}

// The scales' layout conversion: one kernel for every shape, none for mn = 0; k must be positive.
TEST(Registry, MnMajorScalesIsOneKernelForEveryShape) {
  const TargetInfo h200{9, 0, 132, 232448};
  auto a = kernels("to_mn_major_scales", {{"mn", 4096}, {"k", 7168}}, h200);
  auto b = kernels("to_mn_major_scales", {{"mn", 7}, {"k", 128}}, h200);
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(a[0].kernel_name(), "kiln_to_mn_major_scales");
  EXPECT_EQ(codegen::render_source(a[0]), codegen::render_source(b[0]));
  EXPECT_EQ(codegen::render_source(a[0]), codegen::render_source(mn_major_scales_spec(h200)));
  EXPECT_EQ(a[0].block_threads, mn_major_scales_plan(h200).threads);
  EXPECT_TRUE(kernels("to_mn_major_scales", {{"mn", 0}, {"k", 7168}}).empty());
  EXPECT_THAT(test::error_of([&] { kernels("to_mn_major_scales", {{"mn", 4}, {"k", 0}}); }, ErrorKind::kValueError),
              ::testing::HasSubstr("to_mn_major_scales: k must be positive, got 0"));
}

// ---- golden sources -------------------------------------------------------------------------------------------

TEST(Golden, PerTokenSource) {
  test::expect_golden_text("ops_quantize_golden_per_token.cu", codegen::render_source(per_token_cast_spec(7168, {})));
}

TEST(Golden, PerBlockSource) {
  test::expect_golden_text("ops_quantize_golden_per_block.cu", codegen::render_source(per_block_cast_spec({})));
}

TEST(Golden, MnMajorScalesSource) {
  test::expect_golden_text("ops_quantize_golden_mn_major_scales.cu", codegen::render_source(mn_major_scales_spec({})));
}

// ---- real compiles --------------------------------------------------------------------------------------------

class CastCompile : public ::testing::TestWithParam<Backend> {
 protected:
  void compile_and_check(const codegen::KernelSpec& spec) {
    compiler::CompiledKernel k = test::compile_for_sm90a_and_check(GetParam(), spec, home_.path(), state_.path());
    // The register budget __launch_bounds__ gives: 64K registers / (threads x CTAs per SM).
    EXPECT_LE(k.resources.registers, 65536 / (spec.block_threads * spec.min_blocks_per_sm)) << spec.describe();
  }
  test::TempDir home_, state_;
};

TEST_P(CastCompile, PerTokenKernelsForSeveralK) {
  for (int64_t k : {128, 512, 7168}) compile_and_check(per_token_cast_spec(k, {}));
}

TEST_P(CastCompile, PerBlockKernel) { compile_and_check(per_block_cast_spec({})); }

TEST_P(CastCompile, MnMajorScalesKernel) { compile_and_check(mn_major_scales_spec({})); }

INSTANTIATE_TEST_SUITE_P(Backends, CastCompile, ::testing::Values(Backend::kNvcc, Backend::kNvrtc),
                         [](const auto& info) { return std::string(to_string(info.param)); });

}  // namespace
}  // namespace kiln::ops
