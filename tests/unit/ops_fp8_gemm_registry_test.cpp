// The FP8 GEMM's registry entry (problems with an m range -> the distinct kernels and the pieces of the
// range each serves), ranges for the casts, the golden source of one spec, and real compiles of two
// configurations with both NVCC and NVRTC for sm_90a: no local memory, no spills, setmaxnreg honoured.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>

#include "codegen/kernel_spec.hpp"
#include "compiler/compiler.hpp"
#include "kiln/config.hpp"
#include "kiln/error.hpp"
#include "ops/fp8_gemm.hpp"
#include "ops/registry.hpp"
#include "kernel_compile_check.hpp"
#include "test_support.hpp"

namespace kiln::ops {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

const TargetInfo kH200{9, 0, 132, 232448};

using kiln::test::error_of;

std::vector<KernelUse> uses(const Problem& problem, const TargetInfo& t = kH200) {
  return kernel_uses(find_op("fp8_gemm_nt"), problem, t);
}

TEST(Fp8GemmRegistry, IsRegisteredWithItsParameters) {
  const OpDescriptor& op = find_op("fp8_gemm_nt");
  std::vector<std::string> names;
  for (const auto& p : op.params) names.push_back(p.name);
  EXPECT_THAT(names, ::testing::ElementsAre("m", "n", "k", "block_m", "block_n", "stages", "cluster_m", "cluster_n",
                                            "split_k", "num_sms", "accumulate", "k_grouped", "no_c", "m_grouped",
                                            "masked"));
  EXPECT_TRUE(op.params[0].accepts_range);
  EXPECT_FALSE(op.params[1].accepts_range);
  EXPECT_FALSE(op.params[3].required);
  EXPECT_THAT(op.summary, HasSubstr("e4m3"));
}

TEST(Fp8GemmRegistry, ARangeListsEachDistinctKernelWithThePiecesItServes) {
  const Problem problem = {{"m", ProblemValue::range(1, 16384)}, {"n", 7168}, {"k", 2048}};
  const std::vector<KernelUse> all = uses(problem);
  const Fp8GemmPlan plan = fp8_gemm_plan(kH200, 7168, 2048);
  ASSERT_FALSE(all.empty());
  EXPECT_LE(all.size(), 8u);
  // The pieces tile [1, 16384] exactly, and each kernel's spec is the plan's.
  std::vector<std::pair<int64_t, int64_t>> pieces;
  std::set<std::string> sources;
  for (const KernelUse& u : all) {
    EXPECT_EQ(u.range_param, "m");
    EXPECT_THAT(u.detail, HasSubstr("n=7168 k=2048: "));
    EXPECT_TRUE(sources.insert(codegen::render_source(u.spec)).second) << "each kernel once";
    for (const auto& r : u.ranges) {
      pieces.push_back(r);
      const Fp8GemmConfig& c = plan.kernels[static_cast<size_t>(plan.bucket_of(r.first).kernel)];
      EXPECT_EQ(codegen::render_source(u.spec), codegen::render_source(fp8_gemm_spec(7168, 2048, c)));
    }
  }
  std::sort(pieces.begin(), pieces.end());
  EXPECT_EQ(pieces.front().first, 1);
  EXPECT_EQ(pieces.back().second, 16384);
  for (size_t i = 1; i < pieces.size(); ++i) EXPECT_EQ(pieces[i].first, pieces[i - 1].second + 1);
  // kernels() is the same list of specs.
  const auto specs = find_op("fp8_gemm_nt").kernels(problem, kH200);
  ASSERT_EQ(specs.size(), all.size());
  for (size_t i = 0; i < specs.size(); ++i) EXPECT_EQ(specs[i].describe(), all[i].spec.describe());
}

TEST(Fp8GemmRegistry, OneMIsOneKernelAndZeroIsNone) {
  const auto one = uses({{"m", 4096}, {"n", 2112}, {"k", 7168}});
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].ranges, (std::vector<std::pair<int64_t, int64_t>>{{4096, 4096}}));
  EXPECT_EQ(one[0].spec.describe(),
            "n=2112 k=7168 block_m=128 block_n=176 stages=4 math_warpgroups=2 tma_store=true cluster_m=1 cluster_n=1 overlap_promotion=true accumulate=false split_k=1");
  EXPECT_EQ(one[0].spec.kernel_name(), "kiln_fp8_gemm_nt");
  EXPECT_EQ(one[0].spec.block_threads, 384);
  EXPECT_TRUE(uses({{"m", 0}, {"n", 2112}, {"k", 7168}}).empty());
  // A range starting at 0 is the range from 1 (M = 1..16, the decode sizes, are one bucket).
  const auto from0 = uses({{"m", ProblemValue::range(0, 16)}, {"n", 2112}, {"k", 7168}});
  ASSERT_EQ(from0.size(), 1u);
  EXPECT_EQ(from0[0].ranges.front().first, 1);
}

TEST(Fp8GemmRegistry, OverridesAndSmCountAreProblemParameters) {
  const auto forced = uses({{"m", ProblemValue::range(1, 16384)}, {"n", 7168}, {"k", 2048}, {"block_m", 128},
                            {"block_n", 128}, {"stages", 3}});
  ASSERT_EQ(forced.size(), 1u);
  EXPECT_THAT(forced[0].spec.describe(), HasSubstr("block_m=128 block_n=128 stages=3"));
  // num_sms = 100 plans like a 100-SM target.
  TargetInfo t100 = kH200;
  t100.sm_count = 100;
  const auto a = uses({{"m", ProblemValue::range(1, 16384)}, {"n", 2112}, {"k", 7168}, {"num_sms", 100}});
  const auto b = uses({{"m", ProblemValue::range(1, 16384)}, {"n", 2112}, {"k", 7168}}, t100);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].spec.describe(), b[i].spec.describe());
    EXPECT_EQ(a[i].ranges, b[i].ranges);
  }
  EXPECT_THAT(error_of([] { uses({{"m", 1}, {"n", 7168}, {"k", 2048}, {"block_m", 96}}); }),
              HasSubstr("block_m must be 0 (heuristic), 64, 128 or 256, got 96"));
}

TEST(Fp8GemmRegistry, BadProblemsNameTheParameter) {
  EXPECT_THAT(error_of([] { uses({{"m", 1}, {"n", 7168}, {"k", ProblemValue::range(128, 256)}}); }),
              HasSubstr("fp8_gemm_nt: parameter k may be a range only with accumulate=1 (the weight-gradient form's "
                        "kernels take k at run time; the bf16 form's are specialised on it), got 128..256"));
  EXPECT_THAT(error_of([] { uses({{"m", 1}, {"n", 7168}, {"k", 128}, {"accumulate", ProblemValue::range(0, 1)}}); }),
              HasSubstr("fp8_gemm_nt: parameter accumulate must be a single value, got the range 0..1 (fp8_gemm_nt "
                        "accepts ranges for: m, k)"));
  EXPECT_THAT(error_of([] { uses({{"m", ProblemValue::range(10, 5)}, {"n", 7168}, {"k", 2048}}); }),
              HasSubstr("parameter m must be a range lo..hi with lo <= hi, got 10..5"));
  EXPECT_THAT(error_of([] { uses({{"m", ProblemValue::range(-3, 5)}, {"n", 7168}, {"k", 2048}}); }),
              HasSubstr("parameter m must be >= 0, got -3..5"));
  EXPECT_THAT(error_of([] { uses({{"m", 1}, {"n", 7168}}); }), HasSubstr("fp8_gemm_nt: missing parameter k"));
  EXPECT_THAT(error_of([] { uses({{"m", 1}, {"n", 7000 + 4}, {"k", 2048}}); }),
              HasSubstr("n must be a positive multiple of 8, got 7004"));
  EXPECT_THAT(error_of([] { uses({{"m", 1}, {"n", 7168}, {"k", 100}}); }),
              HasSubstr("k must be a positive multiple of 16, got 100"));
  EXPECT_THAT(error_of([] { uses({{"m", 1}, {"n", 7168}, {"k", 128}, {"q", 1}}); }),
              HasSubstr("unknown parameter 'q'"));
}

TEST(Fp8GemmRegistry, TheCastsAcceptARangeOfRows) {
  const auto token = kernel_uses(find_op("per_token_cast_to_fp8"), {{"m", ProblemValue::range(1, 16384)}, {"k", 7168}}, kH200);
  ASSERT_EQ(token.size(), 1u);
  EXPECT_EQ(token[0].range_param, "m");
  EXPECT_EQ(token[0].ranges, (std::vector<std::pair<int64_t, int64_t>>{{1, 16384}}));
  EXPECT_TRUE(kernel_uses(find_op("per_token_cast_to_fp8"), {{"m", ProblemValue::range(0, 0)}, {"k", 7168}}, kH200).empty());
  const auto block = kernel_uses(find_op("per_block_cast_to_fp8"), {{"n", ProblemValue::range(0, 300)}, {"k", 256}}, kH200);
  ASSERT_EQ(block.size(), 1u);
  EXPECT_THAT(error_of([] {
                kernel_uses(find_op("per_token_cast_to_fp8"), {{"m", 4}, {"k", ProblemValue::range(128, 256)}}, kH200);
              }),
              HasSubstr("parameter k must be a single value"));
}

// ---- golden source ---------------------------------------------------------------------------------------------

TEST(Fp8GemmGolden, SourceOfOneSpec) {
  Fp8GemmConfig c;
  c.block_m = 128;
  c.block_n = 128;
  c.stages = 5;
  c.math_warpgroups = 2;
  test::expect_golden_text("ops_fp8_gemm_golden.cu", codegen::render_source(fp8_gemm_spec(7168, 2048, c)));
}

// The 256-row kernels ask ptxas for its most register-hungry scheduling (measured faster there); the others
// keep ptxas's default (the overlapped-promotion kernels measured slower with it).
TEST(Fp8GemmSpec, RegisterUsageLevelOnlyForTwoWaveTiles) {
  Fp8GemmOverrides o;
  o.block_m = 256;
  const Fp8GemmPlan wide = fp8_gemm_plan(kH200, 7168, 16384, o);
  ASSERT_FALSE(wide.kernels.empty());
  for (const Fp8GemmConfig& c : wide.kernels) {
    ASSERT_EQ(c.block_m, 256);
    const codegen::KernelSpec spec = fp8_gemm_spec(7168, 16384, c);
    EXPECT_EQ(spec.register_usage_level, 10) << c.describe();
    // Told apart from a default-compiled entry of the same kernel in `kiln cache ls` and the logs.
    EXPECT_TRUE(spec.describe().ends_with(" split_k=1 register_usage_level=10")) << spec.describe();
  }
  for (const Fp8GemmConfig& c : fp8_gemm_plan(kH200, 2112, 7168).kernels)
    if (c.block_m < 256) {
      const codegen::KernelSpec spec = fp8_gemm_spec(2112, 7168, c);
      EXPECT_EQ(spec.register_usage_level, 0) << c.describe();
      EXPECT_EQ(spec.describe().find("register_usage_level"), std::string::npos) << spec.describe();
    }
}

// The group height is a template argument only where it is not the kernel's default (8): every other kernel's
// source, and so its cache entry, is what it was before the parameter existed.
TEST(Fp8GemmSpec, GroupHeightRenderedOnlyWhereItIsNotTheDefault) {
  Fp8GemmConfig c;
  c.stages = 5;
  const std::string plain = codegen::render_source(fp8_gemm_spec(7168, 2048, c));
  EXPECT_NE(plain.find("true, false, 1>::run"), std::string::npos) << plain;
  c.group_m = 16;
  const codegen::KernelSpec tall = fp8_gemm_spec(7168, 2048, c);
  EXPECT_NE(codegen::render_source(tall).find("true, false, 1, 16>::run"), std::string::npos)
      << codegen::render_source(tall);
  EXPECT_TRUE(tall.describe().ends_with(" split_k=1 group_m=16")) << tall.describe();
  EXPECT_TRUE(c.describe().ends_with(", groups of 16")) << c.describe();
}

// ---- real compiles -----------------------------------------------------------------------------------------------

// Lines of `ptx` holding `needle` (an instruction's name, one per line).
size_t ptx_lines_with(const std::string& ptx, std::string_view needle) {
  size_t count = 0;
  std::istringstream lines(ptx);
  for (std::string line; std::getline(lines, line);)
    if (line.find(needle) != std::string::npos) ++count;
  return count;
}

class Fp8GemmCompile : public ::testing::TestWithParam<Backend> {
 protected:
  void compile_and_check(const codegen::KernelSpec& spec) {
    compiler::CompiledKernel k = test::compile_for_sm90a_and_check(GetParam(), spec, home_.path(), state_.path());
    EXPECT_EQ(k.log.find("C7508"), std::string::npos) << "setmaxnreg ignored:\n" << k.log;
  }
  test::TempDir home_, state_;
};

// The two ends of what the heuristic picks: the small-M tile (one math warpgroup, many stages) and the
// widest large-M tile (two warpgroups, B scales straddling two blocks).
TEST_P(Fp8GemmCompile, SmallAndLargeTiles) {
  const Fp8GemmPlan plan = fp8_gemm_plan(kH200, 2112, 7168);
  compile_and_check(fp8_gemm_spec(2112, 7168, plan.kernels[static_cast<size_t>(plan.bucket_of(1).kernel)]));
  compile_and_check(fp8_gemm_spec(2112, 7168, plan.kernels[static_cast<size_t>(plan.bucket_of(4096).kernel)]));
}

// The plan's tall groups (24576 x 1536: 16 m units per group, B being read from DRAM once per group).
TEST_P(Fp8GemmCompile, TallGroups) {
  const Fp8GemmPlan plan = fp8_gemm_plan(kH200, 24576, 1536);
  for (const int64_t m : {2432, 4096}) {  // 128x192, 256x128 pairs
    const Fp8GemmConfig& c = plan.kernels[static_cast<size_t>(plan.bucket_of(m).kernel)];
    ASSERT_EQ(c.group_m, 16) << c.describe();
    compile_and_check(fp8_gemm_spec(24576, 1536, c));
  }
}

// 256-row tiles (asked for by override): two waves per math warpgroup, with and without B multicast, and one
// whose tiles straddle two of B's scale blocks.
TEST_P(Fp8GemmCompile, TwoWaveTiles) {
  // Without a cluster, in pairs sharing A (the heuristic's form; 17 n blocks: the last pair's second tile lies
  // past N) and in pairs sharing B.
  Fp8GemmOverrides o;
  o.block_m = 256;
  for (const auto& [cluster_m, cluster_n] : {std::pair{1, 1}, {0, 0}, {2, 0}}) {
    o.cluster_m = cluster_m;
    o.cluster_n = cluster_n;
    for (const Fp8GemmConfig& c : fp8_gemm_plan(kH200, 2112, 720, o).kernels)
      if (c.block_n == 128 || cluster_m == 1) compile_and_check(fp8_gemm_spec(2112, 720, c));
  }
}

// The two-wave K loop's unroll at one, two and three K blocks: an unroll that ptxas carries out wholly (two
// blocks unrolled twice) serialised the kernel's wgmmas and spilled (C7512).
TEST_P(Fp8GemmCompile, TwoWaveTilesAtShortK) {
  Fp8GemmOverrides o;
  o.block_m = 256;
  for (const int k : {128, 256, 384}) {
    const Fp8GemmPlan plan = fp8_gemm_plan(kH200, 7168, k, o);
    ASSERT_FALSE(plan.kernels.empty());
    for (const Fp8GemmConfig& c : plan.kernels)
      if (c.block_n == 128) compile_and_check(fp8_gemm_spec(7168, k, c));
  }
}

// The kernel's register-usage level reaches ptxas through both compilers: the same source compiled at ptxas's
// default gives another binary (a compiler that dropped the option would give the same one).
TEST_P(Fp8GemmCompile, RegisterUsageLevelReachesPtxas) {
  Fp8GemmOverrides o;
  o.block_m = 256;
  const Fp8GemmPlan plan = fp8_gemm_plan(kH200, 7168, 2048, o);
  ASSERT_FALSE(plan.kernels.empty());
  codegen::KernelSpec spec = fp8_gemm_spec(7168, 2048, plan.kernels[0]);
  ASSERT_EQ(spec.register_usage_level, 10);
  const compiler::CompiledKernel hungry = test::compile_for_sm90a_and_check(GetParam(), spec, home_.path(), state_.path());
  spec.register_usage_level = 0;
  const compiler::CompiledKernel plain = test::compile_for_sm90a_and_check(GetParam(), spec, home_.path(), state_.path());
  EXPECT_EQ(plain.command.find("register-usage-level"), std::string::npos) << plain.command;
  EXPECT_NE(hungry.cubin, plain.cubin);
}

// Split-K pairs forced on tiles other than the heuristic's 64x32 (one and two math warpgroups).
TEST_P(Fp8GemmCompile, SplitKTiles) {
  Fp8GemmOverrides o;
  o.split_k = 2;
  o.block_n = 64;
  const Fp8GemmPlan plan = fp8_gemm_plan(kH200, 2112, 720, o);
  ASSERT_EQ(plan.kernels.size(), 2u);
  for (const Fp8GemmConfig& c : plan.kernels) {
    EXPECT_EQ(c.split_k, 2);
    compile_and_check(fp8_gemm_spec(2112, 720, c));
  }
}

// What the kernel's PTX must keep, measured on the H200 (tenth session): the waits that last most of a block (the
// producer's and the B-scale loader's, for a free slot) carry a suspend-time hint, so the thread sleeps
// (NANOSLEEP.SYNCS) instead of re-issuing try_wait; the math warps' wait for a landed block has none. And a pair
// sharing A loads A's scales once, multicast like its halves of A: two multicast loads per stage, not one.
TEST_P(Fp8GemmCompile, ProducersSleepAndPairsShareAScales) {
  Fp8GemmOverrides o;
  o.block_m = 256;
  const Fp8GemmPlan plan = fp8_gemm_plan(kH200, 7168, 16384, o);
  ASSERT_FALSE(plan.kernels.empty());
  const Fp8GemmConfig& pairs = plan.kernels[0];
  ASSERT_EQ(pairs.cluster_n, 2) << pairs.describe();
  const compiler::CompiledKernel k =
      test::compile_for_sm90a_and_check(GetParam(), fp8_gemm_spec(7168, 16384, pairs), home_.path(), state_.path(),
                                        /*keep_ptx=*/true);
  ASSERT_FALSE(k.ptx.empty());
  size_t sleeping = 0, spinning = 0, multicasts = 0;
  std::istringstream lines(k.ptx);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("mbarrier.try_wait.parity") != std::string::npos)
      ++(std::count(line.begin(), line.end(), ',') == 3 ? sleeping : spinning);  // p, [bar], parity(, hint)
    const bool tensor_load = line.find("cp.async.bulk.tensor.2d") != std::string::npos;
    if (tensor_load && line.find(".multicast::cluster") != std::string::npos) ++multicasts;
  }
  EXPECT_GE(sleeping, 2u) << "the producer's and the scale loader's slot waits";
  EXPECT_GE(spinning, 1u) << "the math warps' wait for a landed block";
  EXPECT_EQ(multicasts, 2u) << "this CTA's half of A and, from the first CTA, A's scales";
}

// What the math loop's PTX must keep, measured on the H200 (twelfth session), for both compilers: the operand
// descriptors advance along K by 64-bit adds (a 32-bit OR on the low word made ptxas rebuild each descriptor
// pair between the WGMMAs: 4-6 % slower decode tiles), and shared memory is addressed in 32 bits (NVRTC's front
// end keeps shared pointers in 64 bits; its descriptors' start-address field, masked to 14 bits in 64-bit
// registers, and its scale loads through 64-bit addresses cost its build 1-3 %). One-wave tiles form the start
// field from 16-byte units on a hoisted base, without a per-block mask (fourteenth session: 10-11 fewer
// instructions per K block, 0.6-1.3 % faster at 128x160 and 128x192).
TEST_P(Fp8GemmCompile, DescriptorsAdvanceBy64BitAddsAndSharedAddressesAre32Bit) {
  Fp8GemmOverrides decode;
  decode.block_m = 64;
  decode.block_n = 32;
  decode.split_k = 1;
  Fp8GemmOverrides pairs;
  pairs.block_m = 256;
  Fp8GemmOverrides wide;
  wide.block_m = 128;
  wide.block_n = 192;
  for (const Fp8GemmOverrides& o : {decode, pairs, wide}) {
    const Fp8GemmPlan plan = fp8_gemm_plan(kH200, 2112, 7168, o);
    ASSERT_FALSE(plan.kernels.empty());
    const Fp8GemmConfig& c = plan.kernels[0];
    const compiler::CompiledKernel k = test::compile_for_sm90a_and_check(
        GetParam(), fp8_gemm_spec(2112, 7168, c), home_.path(), state_.path(), /*keep_ptx=*/true);
    ASSERT_FALSE(k.ptx.empty());
    size_t wgmmas = 0, advances = 0, wide_start_fields = 0, masked_start_fields = 0, wide_shared_loads = 0;
    std::istringstream lines(k.ptx);
    for (std::string line; std::getline(lines, line);) {
      if (line.find("wgmma.mma_async") != std::string::npos) ++wgmmas;
      if (line.find("add.s64 %rd") != std::string::npos) ++advances;  // smem_desc_advance's inline PTX
      if (line.find("and.b64") != std::string::npos && line.find(", 16383;") != std::string::npos) ++wide_start_fields;
      if (line.find("and.b32") != std::string::npos && line.find(", 16383;") != std::string::npos) ++masked_start_fields;
      if (line.find("ld.shared") != std::string::npos && line.find("[%rd") != std::string::npos) ++wide_shared_loads;
    }
    EXPECT_GT(wgmmas, 0u) << c.describe();
    EXPECT_GE(advances, 2 * wgmmas) << c.describe() << ": each WGMMA's two descriptors, advanced in PTX";
    EXPECT_EQ(wide_start_fields, 0u) << c.describe() << ": a descriptor's address field computed in 64 bits";
    EXPECT_EQ(wide_shared_loads, 0u) << c.describe() << ": a shared-memory load through a 64-bit address";
    // Every tile forms the start fields in 16-byte units on a hoisted base (make_smem_desc_units): no mask of
    // the address field per block.
    EXPECT_EQ(masked_start_fields, 0u) << c.describe() << ": a start field masked per block (the address form)";
  }
}

// Tiles that straddle B's scale blocks at more than two columns (160: four, 176: eight, some of its tiles
// spanning three blocks) take their columns by the column map, whose pieces never straddle a scale block: one
// math walk with the pieces' switch columns compiled in. It replaced a copy of the walk per switch column
// (column classes), whose four copies made 128x160 and 128x176 compile in 1.1-1.4 s with NVRTC on a 2-core
// machine against about 0.4 s now. So the PTX holds as many WGMMAs for them as for 192 (two columns, one walk,
// the switch chosen per slice), and all compile without spills.
TEST_P(Fp8GemmCompile, StraddlingTilesCompileOneWalk) {
  std::map<int, size_t> wgmmas;
  for (const int block_n : {192, 160, 176}) {
    Fp8GemmOverrides o;
    o.block_m = 128;
    o.block_n = block_n;
    const Fp8GemmPlan plan = fp8_gemm_plan(kH200, 2112, 7168, o);
    ASSERT_EQ(plan.kernels.size(), 1u);
    const Fp8GemmConfig& c = plan.kernels[0];
    ASSERT_TRUE(c.overlap_promotion) << c.describe();
    const compiler::CompiledKernel k = test::compile_for_sm90a_and_check(
        GetParam(), fp8_gemm_spec(2112, 7168, c), home_.path(), state_.path(), /*keep_ptx=*/true);
    wgmmas[block_n] = ptx_lines_with(k.ptx, "wgmma.mma_async");
  }
  ASSERT_GT(wgmmas[192], 0u);
  EXPECT_EQ(wgmmas[160], wgmmas[192]);
  EXPECT_EQ(wgmmas[176], wgmmas[192]);
}

// Split-K in CTA pairs: a tile's end (the hand-over, the store, the accumulators' zeroing) is one branch. With
// the zeroing in a branch of its own, the front end made it a select per accumulator (selp.f32) that ptxas ran
// on every K block (the kernels 3-7 % slower on the H200, twenty-first session). The plan's split-K kernels
// (64x32 at 2112 columns, 64x16 at 576) and a wider one-slice tile carry no such select; the two-slice tiles
// (176 and 192 columns, by override), which keep the previous form, compile without spills.
TEST_P(Fp8GemmCompile, SplitKTileEndIsOneBranch) {
  const auto split = [](int n, int k, int block_m, int block_n) {
    Fp8GemmOverrides o;
    o.block_m = block_m;
    o.block_n = block_n;
    o.split_k = 2;
    const Fp8GemmPlan plan = fp8_gemm_plan(kH200, n, k, o);
    EXPECT_EQ(plan.kernels.size(), 1u);
    return plan.kernels.at(0);
  };
  const Fp8GemmPlan decode = fp8_gemm_plan(kH200, 2112, 7168);
  const Fp8GemmConfig& plan_split = decode.kernels[static_cast<size_t>(decode.bucket_of(1).kernel)];
  ASSERT_EQ(plan_split.split_k, 2) << plan_split.describe();
  for (const auto& [n, c] : {std::pair{2112, plan_split}, std::pair{576, split(576, 7168, 64, 16)},
                             std::pair{2112, split(2112, 7168, 64, 64)}}) {
    const compiler::CompiledKernel k = test::compile_for_sm90a_and_check(
        GetParam(), fp8_gemm_spec(n, 7168, c), home_.path(), state_.path(), /*keep_ptx=*/true);
    ASSERT_FALSE(k.ptx.empty());
    EXPECT_EQ(ptx_lines_with(k.ptx, "selp.f32"), 0u) << c.describe() << ": accumulators selected, not zeroed in the tile end's branch";
  }
  for (const int block_n : {176, 192}) compile_and_check(fp8_gemm_spec(576, 720, split(576, 720, 64, block_n)));
}

INSTANTIATE_TEST_SUITE_P(Backends, Fp8GemmCompile, ::testing::Values(Backend::kNvcc, Backend::kNvrtc),
                         [](const auto& info) { return std::string(to_string(info.param)); });

}  // namespace
}  // namespace kiln::ops
