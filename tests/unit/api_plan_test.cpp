// The public API's plan() and precompile(): ranges, de-duplication across requests, the cache flag, the
// parallel build with its progress callback, and errors. The configuration is read once per process, so a
// global environment points it at a private cache (with NVRTC, the faster compiler) before any test runs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>

#include "kiln/kiln.hpp"
#include "kiln/ops.hpp"
#include "test_support.hpp"

namespace kiln {
namespace {

using ::testing::HasSubstr;

[[maybe_unused]] ::testing::Environment* const kPrivateCache =
    ::testing::AddGlobalTestEnvironment(new test::PrivateCacheEnvironment);

CompileRequest gemm(int64_t n, int64_t k, int64_t lo, int64_t hi) {
  CompileRequest r{"fp8_gemm_nt", {{"n", n}, {"k", k}}, "sm_90a", std::nullopt};
  r.ranges["m"] = {lo, hi};
  return r;
}

using kiln::test::error_of;

// The pieces of all reports, sorted: they must tile [lo, hi].
void expect_tiles(const std::vector<KernelReport>& reports, int64_t lo, int64_t hi) {
  std::vector<std::pair<int64_t, int64_t>> pieces;
  for (const auto& r : reports) {
    EXPECT_EQ(r.range_param, "m");
    pieces.insert(pieces.end(), r.ranges.begin(), r.ranges.end());
  }
  std::sort(pieces.begin(), pieces.end());
  ASSERT_FALSE(pieces.empty());
  EXPECT_EQ(pieces.front().first, lo);
  EXPECT_EQ(pieces.back().second, hi);
  for (size_t i = 1; i < pieces.size(); ++i) EXPECT_EQ(pieces[i].first, pieces[i - 1].second + 1);
}

// The keys of a plan's kernels, in order.
std::vector<std::string> keys_of(const std::vector<KernelReport>& reports) {
  std::vector<std::string> keys;
  for (const auto& r : reports) keys.push_back(r.key);
  return keys;
}

// plan() and precompile() map a request to kernels as a launch in this process would: a parameter left out takes
// the process-wide setting (set_num_sms, the overrides), one given overrides it. The Python audit of the fifty-ninth
// session found a process that set SMs aside precompiling the kernels of all SMs.
TEST(ApiPlan, ParametersLeftOutTakeTheProcessWideSettings) {
  const std::vector<std::string> plain = keys_of(plan(gemm(7168, 2048, 1, 16384)));
  CompileRequest eight_sms = gemm(7168, 2048, 1, 16384);
  eight_sms.problem["num_sms"] = 8;
  const std::vector<std::string> explicit_sms = keys_of(plan(eight_sms));
  ASSERT_NE(plain, explicit_sms);
  set_num_sms(8);
  EXPECT_EQ(keys_of(plan(gemm(7168, 2048, 1, 16384))), explicit_sms);
  CompileRequest all_sms = gemm(7168, 2048, 1, 16384);
  all_sms.problem["num_sms"] = 0;  // given: all of the target's, whatever the process set
  EXPECT_EQ(keys_of(plan(all_sms)), plain);
  set_num_sms(0);

  Fp8GemmOverrides tiles;
  tiles.block_m = 64;
  tiles.block_n = 64;
  tiles.cluster_n = 2;  // the bf16 form's; the weight-gradient form drops it, as its launch does
  set_fp8_gemm_overrides(tiles);
  CompileRequest forced = gemm(7168, 2048, 1, 16384);
  forced.problem["block_m"] = 64;
  forced.problem["block_n"] = 64;
  forced.problem["cluster_n"] = 2;
  EXPECT_EQ(keys_of(plan(gemm(7168, 2048, 1, 16384))), keys_of(plan(forced)));
  CompileRequest wgrad = gemm(7168, 2048, 1, 4096);
  wgrad.problem["accumulate"] = 1;
  CompileRequest wgrad_forced = wgrad;
  wgrad_forced.problem["block_m"] = 64;
  wgrad_forced.problem["block_n"] = 64;
  EXPECT_EQ(keys_of(plan(wgrad)), keys_of(plan(wgrad_forced)));
  set_fp8_gemm_overrides(Fp8GemmOverrides{});

  CompileRequest bf16{"bf16_gemm_nt", {{"n", 7168}, {"k", 2048}}, "sm_90a", std::nullopt};
  bf16.ranges["m"] = {1, 16384};
  CompileRequest bf16_forced = bf16;
  bf16_forced.problem["block_n"] = 128;
  Bf16GemmOverrides bf16_tiles;
  bf16_tiles.block_n = 128;
  set_bf16_gemm_overrides(bf16_tiles);
  EXPECT_EQ(keys_of(plan(bf16)), keys_of(plan(bf16_forced)));
  set_bf16_gemm_overrides(Bf16GemmOverrides{});
  EXPECT_NE(keys_of(plan(bf16)), keys_of(plan(bf16_forced)));
}

TEST(ApiPlan, ARangeListsTheDistinctKernelsWithoutCompiling) {
  const CacheStats before = cache_stats();
  const std::vector<KernelReport> reports = plan(gemm(7168, 2048, 1, 16384));
  ASSERT_GE(reports.size(), 1u);
  EXPECT_LE(reports.size(), 8u);
  std::set<std::string> keys;
  for (const auto& r : reports) {
    EXPECT_EQ(r.op, "fp8_gemm_nt");
    EXPECT_EQ(r.arch, "sm_90a");
    EXPECT_EQ(r.backend, Backend::kNvrtc);
    EXPECT_EQ(r.key.size(), 32u);
    EXPECT_EQ(r.kernel_name, "kiln_fp8_gemm_nt");
    EXPECT_FALSE(r.cached);
    EXPECT_FALSE(r.hit);
    EXPECT_THAT(r.detail, HasSubstr("n=7168 k=2048: "));
    EXPECT_THAT(r.spec, HasSubstr("n=7168 k=2048 block_m="));
    EXPECT_TRUE(keys.insert(r.key).second) << "each kernel once";
  }
  expect_tiles(reports, 1, 16384);
  const CacheStats after = cache_stats();
  EXPECT_EQ(after.compiles, before.compiles);
  EXPECT_EQ(after.entries, before.entries);
}

TEST(ApiPlan, RequestsSharingAKernelListItOnceWithBothRanges) {
  const std::vector<KernelReport> both = plan(std::vector<CompileRequest>{gemm(576, 512, 1, 32), gemm(576, 512, 33, 64)});
  const std::vector<KernelReport> one = plan(gemm(576, 512, 1, 64));
  ASSERT_EQ(both.size(), one.size());
  for (size_t i = 0; i < both.size(); ++i) EXPECT_EQ(both[i].key, one[i].key);
  expect_tiles(both, 1, 64);
  // Different (n, k): different kernels, in request order.
  const std::vector<KernelReport> two = plan(std::vector<CompileRequest>{gemm(576, 512, 1, 1), gemm(2112, 512, 1, 1)});
  ASSERT_EQ(two.size(), 2u);
  EXPECT_THAT(two[0].spec, HasSubstr("n=576 "));
  EXPECT_THAT(two[1].spec, HasSubstr("n=2112 "));
}

TEST(ApiPlan, PrecompileBuildsWhatPlanListsInParallelWithProgress) {
  const CompileRequest request = gemm(576, 512, 1, 16384);
  const std::vector<KernelReport> planned = plan(request);
  ASSERT_GE(planned.size(), 1u);

  std::mutex mutex;
  std::vector<size_t> done;
  size_t total = 0;
  PrecompileOptions options;
  options.jobs = 2;
  options.on_progress = [&](const PrecompileProgress& p) {
    std::lock_guard<std::mutex> lock(mutex);  // the API serialises calls; this checks nothing overlaps
    done.push_back(p.done);
    total = p.total;
    EXPECT_TRUE(p.error.empty()) << p.error;
    ASSERT_NE(p.kernel, nullptr);
    EXPECT_FALSE(p.kernel->hit);
    EXPECT_GT(p.kernel->cubin_bytes, 0u);
  };
  const std::vector<KernelReport> built = precompile(request, options);
  ASSERT_EQ(built.size(), planned.size());
  EXPECT_EQ(total, planned.size());
  ASSERT_EQ(done.size(), planned.size());
  for (size_t i = 0; i < done.size(); ++i) EXPECT_EQ(done[i], i + 1);
  for (size_t i = 0; i < built.size(); ++i) {
    EXPECT_EQ(built[i].key, planned[i].key);
    EXPECT_EQ(built[i].ranges, planned[i].ranges);
    EXPECT_FALSE(built[i].hit);
    EXPECT_GT(built[i].compile_ms, 0);
  }
  // Now the plan sees them cached, and a second precompile finds them all.
  for (const auto& r : plan(request)) EXPECT_TRUE(r.cached) << r.spec;
  for (const auto& r : precompile(request)) {
    EXPECT_TRUE(r.hit);
    EXPECT_EQ(r.compile_ms, 0);
  }
  // The same kernels as compile() of single values of m builds.
  for (const auto& r : planned) {
    CompileRequest single{"fp8_gemm_nt", {{"m", r.ranges.front().first}, {"n", 576}, {"k", 512}}, "sm_90a", std::nullopt};
    const auto compiled = compile(single);
    ASSERT_EQ(compiled.size(), 1u);
    EXPECT_EQ(compiled[0].key, r.key);
    EXPECT_TRUE(compiled[0].hit);
  }
}

// check_stop is asked before each kernel starts; what it throws stops the precompile (no further kernel starts,
// the one being built finishes and is cached) and is what precompile throws, ahead of any compile error.
TEST(ApiPlan, PrecompileStopsWhenCheckStopThrowsAndRethrowsIt) {
  struct Stop : std::runtime_error {
    using std::runtime_error::runtime_error;
  };
  const CompileRequest request = gemm(1536, 512, 1, 16384);
  const size_t kernels = plan(request).size();
  ASSERT_GE(kernels, 3u);
  std::atomic<int> asked{0};
  std::atomic<size_t> finished{0};
  PrecompileOptions options;
  options.jobs = 1;
  options.check_stop = [&] {
    if (++asked == 3) throw Stop("stop here");
  };
  options.on_progress = [&](const PrecompileProgress&) { ++finished; };
  try {
    precompile(request, options);
    ADD_FAILURE() << "precompile did not stop";
  } catch (const Stop& e) {
    EXPECT_STREQ(e.what(), "stop here");
  }
  EXPECT_EQ(asked.load(), 3);
  EXPECT_EQ(finished.load(), 2u) << "the two kernels started before the stop are built, no other";
  size_t cached = 0;
  for (const auto& r : plan(request)) cached += r.cached;
  EXPECT_EQ(cached, 2u);
  // Without a stop the rest are built; the two are hits.
  size_t hits = 0;
  for (const auto& r : precompile(request)) hits += r.hit;
  EXPECT_EQ(hits, 2u);
}

TEST(ApiPlan, TheCastsTakeARangeToo) {
  CompileRequest r{"per_token_cast_to_fp8", {{"k", 7168}}, "sm_90a", std::nullopt};
  r.ranges["m"] = {1, 16384};
  const auto reports = plan(r);
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].ranges, (std::vector<std::pair<int64_t, int64_t>>{{1, 16384}}));
  CompileRequest single{"per_token_cast_to_fp8", {{"m", 4096}, {"k", 7168}}, "sm_90a", std::nullopt};
  EXPECT_EQ(plan(single)[0].key, reports[0].key);
}

TEST(ApiPlan, BadRequestsAreRefusedBeforeAnyCompile) {
  CompileRequest both = gemm(7168, 2048, 1, 10);
  both.problem["m"] = 5;
  EXPECT_THAT(error_of([&] { plan(both); }),
              HasSubstr("fp8_gemm_nt: parameter m is given both as a value (5) and as a range (1..10)"));
  CompileRequest k_range{"fp8_gemm_nt", {{"m", 1}, {"n", 7168}}, "sm_90a", std::nullopt};
  k_range.ranges["k"] = {128, 256};
  EXPECT_THAT(error_of([&] { plan(k_range); }), HasSubstr("parameter k may be a range only with accumulate=1"));
  EXPECT_THAT(error_of([] { plan(gemm(7168, 2048, 9, 3)); }), HasSubstr("lo <= hi, got 9..3"));
  EXPECT_THAT(error_of([] { plan(CompileRequest{"fp8_gemm", {}, std::nullopt, std::nullopt}); }, ErrorKind::kNotFound),
              HasSubstr("fp8_gemm_nt"));
  PrecompileOptions bad;
  bad.jobs = -1;
  EXPECT_THAT(error_of([&] { precompile(gemm(7168, 2048, 1, 10), bad); }), HasSubstr("jobs must be >= 0"));
  // One bad request among good ones fails the whole call, and nothing is compiled.
  const CacheStats before = cache_stats();
  EXPECT_THAT(error_of([] { precompile(std::vector<CompileRequest>{gemm(7168, 2048, 1, 10), gemm(7168, 100, 1, 10)}); }),
              HasSubstr("k must be a positive multiple of 16, got 100"));
  EXPECT_EQ(cache_stats().compiles, before.compiles);
  CompileRequest bad_arch = gemm(7168, 2048, 1, 10);
  bad_arch.arch = "sm_9x";
  EXPECT_THAT(error_of([&] { plan(bad_arch); }), HasSubstr("arch: "));
}

// Each operation names the targets its kernels are written for: the GEMMs sm_90a alone, the casts sm_90 and later. A
// request for another is refused by name before any compile (ptxas would fail on WGMMA or griddepcontrol after it).
TEST(ApiPlan, ATargetTheKernelsAreNotWrittenForIsRefusedByName) {
  for (const char* arch : {"sm_90", "sm_89", "sm_100a"}) {
    CompileRequest request = gemm(7168, 2048, 1, 10);
    request.arch = arch;
    EXPECT_THAT(error_of([&] { plan(request); }),
                HasSubstr(std::string("fp8_gemm_nt: its kernels are written for sm_90a only (they use WGMMA, setmaxnreg "
                                      "and TMA), got ") + arch));
  }
  CompileRequest bf16{"bf16_gemm_nt", {{"n", 4096}, {"k", 7168}}, "sm_100a", std::nullopt};
  bf16.ranges["m"] = {1, 100};
  EXPECT_THAT(error_of([&] { plan(bf16); }), HasSubstr("bf16_gemm_nt: its kernels are written for sm_90a only"));
  CompileRequest cast{"per_token_cast_to_fp8", {{"k", 7168}}, "sm_89", std::nullopt};
  cast.ranges["m"] = {1, 100};
  EXPECT_THAT(error_of([&] { plan(cast); }),
              HasSubstr("per_token_cast_to_fp8: its kernels are written for sm_90 and later (they use griddepcontrol "
                        "for programmatic dependent launch), got sm_89"));
  for (const char* arch : {"sm_90", "sm_90a", "sm_100a"}) {
    cast.arch = arch;
    const std::vector<KernelReport> reports = plan(cast);
    ASSERT_EQ(reports.size(), 1u) << arch;
    EXPECT_EQ(reports[0].arch, arch);
  }
  // Among good requests, one for the wrong target fails the whole precompile, and nothing is compiled.
  const CacheStats before = cache_stats();
  CompileRequest wrong = gemm(7168, 2048, 1, 10);
  wrong.arch = "sm_100a";
  EXPECT_THAT(error_of([&] { precompile(std::vector<CompileRequest>{gemm(576, 7168, 1, 10), wrong}); }),
              HasSubstr("got sm_100a"));
  EXPECT_EQ(cache_stats().compiles, before.compiles);
}

}  // namespace
}  // namespace kiln
