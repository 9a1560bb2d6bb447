// The FP8 GEMM heuristic: a pure function of (target, N, K, overrides) whose buckets cover every M >= 1 with
// at most eight kernels per (N, K) -- checked for every (N, K) of the serving warm-up in
// shared/bench/shapes.json -- whose cost model reproduces the H200 sweep of docs/FP8_GEMM.md, and whose
// overrides are validated with errors that name the field.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "kiln/error.hpp"
#include "kiln/kernels/fp8_gemm_layout.h"
#include "ops/fp8_gemm_heuristic.hpp"
#include "test_support.hpp"

namespace kiln::ops {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

const TargetInfo kH200{9, 0, 132, 232448};

using kiln::test::error_of;

// The (N, K) pairs of the warm-up, read from the shapes file the benchmarks use.
std::vector<std::pair<int64_t, int64_t>> warmup_shapes() {
  std::vector<std::pair<int64_t, int64_t>> out;
  std::ifstream in(std::string(KILN_SOURCE_DIR) + "/../shared/bench/shapes.json");
  if (in) {
    const auto doc = nlohmann::json::parse(in);
    for (const auto& nk : doc["warmup_model"]["nk"]) out.emplace_back(nk[0].get<int64_t>(), nk[1].get<int64_t>());
  }
  if (out.empty())  // the file lives outside the repository; the same list, should it be absent
    out = {{2112, 7168}, {24576, 1536}, {32768, 512}, {7168, 16384}, {4096, 7168}, {7168, 2048}, {576, 7168}};
  return out;
}

const Fp8GemmConfig& config_at(const Fp8GemmPlan& plan, int64_t m) {
  return plan.kernels[static_cast<size_t>(plan.bucket_of(m).kernel)];
}

// The plan serves M = m with a block_m x block_n tile.
void expect_tile_at(const Fp8GemmPlan& plan, int64_t m, int block_m, int block_n) {
  const Fp8GemmConfig& c = config_at(plan, m);
  EXPECT_EQ(c.block_m, block_m) << "m = " << m << ": " << c.describe();
  EXPECT_EQ(c.block_n, block_n) << "m = " << m << ": " << c.describe();
}

void expect_well_formed(const Fp8GemmPlan& plan) {
  ASSERT_FALSE(plan.buckets.empty());
  ASSERT_FALSE(plan.kernels.empty());
  EXPECT_LE(plan.kernels.size(), static_cast<size_t>(kFp8GemmMaxKernels));
  EXPECT_EQ(plan.buckets.front().m_lo, 1);
  EXPECT_EQ(plan.buckets.back().m_hi, kFp8GemmUnboundedM);
  std::set<int> used;
  int next_new = 0;
  for (size_t i = 0; i < plan.buckets.size(); ++i) {
    const Fp8GemmBucket& b = plan.buckets[i];
    EXPECT_LE(b.m_lo, b.m_hi);
    ASSERT_GE(b.kernel, 0);
    ASSERT_LT(b.kernel, static_cast<int>(plan.kernels.size()));
    if (i > 0) {
      EXPECT_EQ(b.m_lo, plan.buckets[i - 1].m_hi + 1) << "buckets must be contiguous";
      EXPECT_NE(b.kernel, plan.buckets[i - 1].kernel) << "equal neighbours must be one bucket";
    }
    if (!used.count(b.kernel)) {
      EXPECT_EQ(b.kernel, next_new++) << "kernels are numbered in order of first use";
      used.insert(b.kernel);
    }
  }
  EXPECT_EQ(used.size(), plan.kernels.size()) << "every kernel serves some M";
  for (size_t i = 0; i < plan.kernels.size(); ++i)
    for (size_t j = i + 1; j < plan.kernels.size(); ++j) EXPECT_FALSE(plan.kernels[i] == plan.kernels[j]);
  for (const Fp8GemmConfig& c : plan.kernels) {
    EXPECT_EQ(c.math_warpgroups, std::min(2, c.block_m / 64));
    EXPECT_GE(c.stages, 1);
    EXPECT_LE(fp8_gemm_shared_bytes(c), 232448u) << c.describe();
    EXPECT_TRUE(c.tma_store);
  }
}

TEST(Fp8GemmHeuristic, EveryWarmupShapeNeedsAtMostEightKernelsForAllM) {
  size_t total = 0;
  for (const auto& [n, k] : warmup_shapes()) {
    SCOPED_TRACE("n=" + std::to_string(n) + " k=" + std::to_string(k));
    const Fp8GemmPlan plan = fp8_gemm_plan(kH200, n, k);
    expect_well_formed(plan);
    // The kernels M = 1..16384 touch: every kernel of the plan but, at most, the tail's.
    std::set<int> touched;
    for (int64_t m = 1; m <= 16384; ++m) touched.insert(plan.bucket_of(m).kernel);
    EXPECT_LE(touched.size(), 8u);
    EXPECT_GE(touched.size() + 1, plan.kernels.size());
    std::set<int> covered;
    for (const Fp8GemmBucket& b : plan.covering(1, 16384)) covered.insert(b.kernel);
    EXPECT_EQ(covered, touched);
    total += touched.size();
  }
  // DeepGEMM needs 102 for the same warm-up (shared/bench/peers-h200.md).
  EXPECT_LE(total, 7u * 8u);
  std::printf("kernels for the whole warm-up (7 shapes x M = 1..16384): %zu\n", total);
}

TEST(Fp8GemmHeuristic, IsDeterministicAndDependsOnTheTarget) {
  for (const auto& [n, k] : warmup_shapes()) {
    const Fp8GemmPlan a = fp8_gemm_plan(kH200, n, k), b = fp8_gemm_plan(kH200, n, k);
    ASSERT_EQ(a.kernels.size(), b.kernels.size());
    for (size_t i = 0; i < a.kernels.size(); ++i) EXPECT_EQ(a.kernels[i], b.kernels[i]);
    ASSERT_EQ(a.buckets.size(), b.buckets.size());
    for (size_t i = 0; i < a.buckets.size(); ++i) {
      EXPECT_EQ(a.buckets[i].m_lo, b.buckets[i].m_lo);
      EXPECT_EQ(a.buckets[i].m_hi, b.buckets[i].m_hi);
      EXPECT_EQ(a.buckets[i].kernel, b.buckets[i].kernel);
    }
  }
  // Fewer SMs (set_num_sms) change the wave arithmetic, hence (for this shape) the choice at M = 4096.
  TargetInfo fewer = kH200;
  fewer.sm_count = 100;
  const Fp8GemmPlan p132 = fp8_gemm_plan(kH200, 2112, 7168), p100 = fp8_gemm_plan(fewer, 2112, 7168);
  expect_well_formed(p100);
  bool differs = p132.buckets.size() != p100.buckets.size();
  for (int64_t m = 1; m <= 16384 && !differs; m += 64) differs = !(config_at(p132, m) == config_at(p100, m));
  EXPECT_TRUE(differs);
  // Less shared memory: fewer stages, the same tiles.
  TargetInfo small = kH200;
  small.shared_memory_per_block = 166912;  // an H100 PCIe-class budget... or any smaller one
  const Fp8GemmPlan ps = fp8_gemm_plan(small, 7168, 2048);
  expect_well_formed(ps);
  for (const Fp8GemmConfig& c : ps.kernels) EXPECT_LE(fp8_gemm_shared_bytes(c), 166912u);
}

TEST(Fp8GemmHeuristic, BucketLookupIsTheLinearScan) {
  const Fp8GemmPlan plan = fp8_gemm_plan(kH200, 2112, 7168);
  for (int64_t m = 1; m <= 20000; ++m) {
    int expected = -1;
    for (const Fp8GemmBucket& b : plan.buckets)
      if (m >= b.m_lo && m <= b.m_hi) expected = b.kernel;
    ASSERT_EQ(plan.bucket_of(m).kernel, expected) << "m=" << m;
  }
  EXPECT_EQ(plan.bucket_of(int64_t{1} << 40).m_hi, kFp8GemmUnboundedM);
  // covering() clips and keeps order.
  const auto pieces = plan.covering(100, 3000);
  ASSERT_FALSE(pieces.empty());
  EXPECT_EQ(pieces.front().m_lo, 100);
  EXPECT_EQ(pieces.back().m_hi, 3000);
  for (size_t i = 1; i < pieces.size(); ++i) EXPECT_EQ(pieces[i].m_lo, pieces[i - 1].m_hi + 1);
  EXPECT_EQ(plan.covering(5, 5).size(), 1u);
}

// The H200 sweep of 2026-11-29 (docs/FP8_GEMM.md, "Host side"; the overlapped-promotion kernel with the scale
// loader, TMA store, CUDA events with L2 flushed, median of 20): every candidate tile the sweep ran at M = 1, 64, 128,
// 256, 1024 and 4096 on the dense_fp8 shapes (64-row tiles up to M = 128, 128-row tiles from M = 64 on).
// The M = 1 rows are from the third session's sweep of the kernel whose A box is align(M, 8) rows.
struct Measured {
  int64_t m, n, k;
  int block_m, block_n;
  double us;
  int split_k = 1;  // 2: the tile in split-K pairs
};

// The plan's choice at each shape of a measurement table (rows of one shape adjacent) whose tile the table
// measured there, beside the best time the table has for that shape. With `match_split` the split must match
// too; without it (a table that ran no split kernels) a split choice is judged by its tile's unsplit time.
struct Judged {
  const Measured* shape;
  double chosen_us, best_us;
  std::string chosen;
};
// With `offered`, the best is taken over the rows whose tile the heuristic offers at that shape only (a table
// may measure more tiles than the candidates). `form` is the plan's (the weight-gradient form's own tables).
// A plan's 128x144 (a 128x160 kernel swapped where 144 divides N: kWhole144) is judged by the table's 128x160 row
// where the table has no 128x144 one: kWhole144 times the swap at or below 160 everywhere it happens.
template <size_t kRows>
std::vector<Judged> judge_plan(const Measured (&table)[kRows], bool match_split, size_t* shapes = nullptr,
                               bool (*offered)(const Measured&) = nullptr,
                               Fp8GemmForm form = Fp8GemmForm::kInference) {
  std::vector<Judged> out;
  if (shapes) *shapes = 0;
  for (const Measured& s : table) {
    if (&s != &table[0] && (&s)[-1].m == s.m && (&s)[-1].n == s.n && (&s)[-1].k == s.k) continue;  // once per shape
    if (shapes) ++*shapes;
    const Fp8GemmPlan plan = fp8_gemm_plan(kH200, s.n, s.k, {}, form);
    const Fp8GemmConfig& chosen = config_at(plan, s.m);
    double best = 0, chosen_us = 0, as_160_us = 0;
    for (const Measured& t : table) {
      if (t.m != s.m || t.n != s.n || t.k != s.k || (offered && !offered(t))) continue;
      best = best == 0 ? t.us : std::min(best, t.us);
      if (t.block_m == chosen.block_m && t.block_n == chosen.block_n && (!match_split || t.split_k == chosen.split_k))
        chosen_us = t.us;
      if (chosen.block_m == 128 && chosen.block_n == 144 && t.block_m == 128 && t.block_n == 160 && t.split_k == 1)
        as_160_us = t.us;
    }
    if (chosen_us == 0.0) chosen_us = as_160_us;
    if (chosen_us != 0.0) out.push_back({&s, chosen_us, best, chosen.describe()});  // else: not measured there
  }
  return out;
}
// The plan's tile at a judged shape took at most `allowed` times the best time measured there.
void expect_within(const Judged& j, double allowed) {
  EXPECT_LE(j.chosen_us, j.best_us * allowed) << j.shape->m << "x" << j.shape->n << "x" << j.shape->k
                                              << ": the plan chose " << j.chosen << " (" << j.chosen_us
                                              << " us), the best took " << j.best_us;
}
// A measured shape where the plan's tile may take longer over the best one than its table allows: a known miss of
// the model.
struct Miss {
  int64_t m, n, k;
  double allowed;
};
// Every judged shape within `within` times its best (3 % over unless given), or within its miss's allowance;
// returns the summed log loss.
double expect_within_misses(const std::vector<Judged>& judged, const std::vector<Miss>& misses,
                            double within = 1.03) {
  double log_loss = 0;
  for (const Judged& j : judged) {
    double allowed = within;
    for (const Miss& x : misses)
      if (x.m == j.shape->m && x.n == j.shape->n && x.k == j.shape->k) allowed = x.allowed;
    expect_within(j, allowed);
    log_loss += std::log(j.chosen_us / j.best_us);
  }
  return log_loss;
}
// For a table of moves (each shape's rows: the previous plan's tile, then the one the change moved it to): the plan
// of `form` takes the second row's tile at every judged shape.
void expect_moved_to_second_rows(const std::vector<Judged>& judged, Fp8GemmForm form = Fp8GemmForm::kInference) {
  for (const Judged& j : judged) {
    const Measured& moved_to = j.shape[1];
    expect_tile_at(fp8_gemm_plan(kH200, moved_to.n, moved_to.k, {}, form), moved_to.m, moved_to.block_m,
                   moved_to.block_n);
  }
}
const Measured kSweep[] = {
    {1, 576, 7168, 64, 32, 13.3}, {1, 576, 7168, 64, 64, 14.3}, {1, 576, 7168, 64, 128, 17.1},
    {1, 576, 7168, 128, 128, 25.7}, {1, 2112, 7168, 64, 32, 13.4}, {1, 2112, 7168, 64, 64, 15.1},
    {1, 2112, 7168, 64, 128, 17.1}, {1, 2112, 7168, 128, 128, 25.6}, {1, 4096, 7168, 64, 32, 15.5},
    {1, 4096, 7168, 64, 64, 15.6}, {1, 4096, 7168, 64, 128, 18.8}, {1, 4096, 7168, 128, 128, 25.8},
    {1, 7168, 2048, 64, 32, 11.2}, {1, 7168, 2048, 64, 64, 10.0}, {1, 7168, 2048, 64, 128, 9.9},
    {1, 7168, 2048, 128, 128, 12.3}, {1, 7168, 16384, 64, 32, 49.7}, {1, 7168, 16384, 64, 64, 42.0},
    {1, 7168, 16384, 64, 128, 41.5}, {1, 7168, 16384, 128, 128, 56.5}, {1, 24576, 1536, 64, 32, 20.8},
    {1, 24576, 1536, 64, 64, 17.4}, {1, 24576, 1536, 64, 128, 17.7}, {1, 24576, 1536, 128, 128, 20.0},
    {1, 32768, 512, 64, 32, 13.7}, {1, 32768, 512, 64, 64, 11.7}, {1, 32768, 512, 64, 128, 10.9},
    {1, 32768, 512, 128, 128, 11.5}, {64, 576, 7168, 64, 32, 13.4}, {64, 576, 7168, 64, 64, 15.0},
    {64, 576, 7168, 64, 128, 17.4}, {64, 576, 7168, 128, 128, 26.1}, {64, 2112, 7168, 64, 32, 14.2},
    {64, 2112, 7168, 64, 64, 15.8}, {64, 2112, 7168, 64, 128, 18.3}, {64, 2112, 7168, 128, 128, 26.6},
    {64, 4096, 7168, 64, 32, 16.4}, {64, 4096, 7168, 64, 64, 16.7}, {64, 4096, 7168, 64, 128, 20.0},
    {64, 4096, 7168, 128, 128, 27.0}, {64, 7168, 2048, 64, 32, 11.8}, {64, 7168, 2048, 64, 64, 10.8},
    {64, 7168, 2048, 64, 128, 10.8}, {64, 7168, 2048, 128, 128, 13.2}, {64, 7168, 16384, 64, 32, 50.7},
    {64, 7168, 16384, 64, 64, 42.5}, {64, 7168, 16384, 64, 128, 42.4}, {64, 7168, 16384, 128, 128, 60.5},
    {64, 24576, 1536, 64, 32, 21.5}, {64, 24576, 1536, 64, 64, 18.6}, {64, 24576, 1536, 64, 128, 18.8},
    {64, 24576, 1536, 128, 128, 21.7}, {64, 32768, 512, 64, 32, 15.0}, {64, 32768, 512, 64, 64, 12.6},
    {64, 32768, 512, 64, 128, 11.7}, {64, 32768, 512, 128, 128, 12.7}, {128, 576, 7168, 64, 32, 13.6},
    {128, 576, 7168, 64, 64, 15.2}, {128, 576, 7168, 64, 128, 17.7}, {128, 576, 7168, 128, 64, 20.0},
    {128, 576, 7168, 128, 128, 26.1}, {128, 2112, 7168, 64, 32, 14.5}, {128, 2112, 7168, 64, 64, 15.9},
    {128, 2112, 7168, 64, 128, 18.4}, {128, 2112, 7168, 128, 64, 20.6}, {128, 2112, 7168, 128, 128, 26.8},
    {128, 4096, 7168, 64, 32, 23.1}, {128, 4096, 7168, 64, 64, 17.0}, {128, 4096, 7168, 64, 128, 20.5},
    {128, 4096, 7168, 128, 64, 21.9}, {128, 4096, 7168, 128, 128, 27.6}, {128, 7168, 2048, 64, 32, 16.8},
    {128, 7168, 2048, 64, 64, 12.7}, {128, 7168, 2048, 64, 128, 11.3}, {128, 7168, 2048, 128, 64, 11.6},
    {128, 7168, 2048, 128, 128, 13.3}, {128, 7168, 16384, 64, 32, 88.9}, {128, 7168, 16384, 64, 64, 53.7},
    {128, 7168, 16384, 64, 128, 42.8}, {128, 7168, 16384, 128, 64, 44.8}, {128, 7168, 16384, 128, 128, 58.4},
    {128, 24576, 1536, 64, 32, 33.2}, {128, 24576, 1536, 64, 64, 23.0}, {128, 24576, 1536, 64, 128, 19.1},
    {128, 24576, 1536, 128, 64, 19.4}, {128, 24576, 1536, 128, 128, 21.5}, {128, 32768, 512, 64, 32, 21.2},
    {128, 32768, 512, 64, 64, 15.7}, {128, 32768, 512, 64, 128, 13.0}, {128, 32768, 512, 128, 64, 13.1},
    {128, 32768, 512, 128, 128, 12.4}, {256, 576, 7168, 128, 64, 20.2}, {256, 576, 7168, 128, 128, 26.4},
    {256, 2112, 7168, 128, 64, 20.7}, {256, 2112, 7168, 128, 128, 27.0}, {256, 4096, 7168, 128, 64, 22.5},
    {256, 4096, 7168, 128, 128, 27.8}, {256, 7168, 2048, 128, 64, 15.8}, {256, 7168, 2048, 128, 128, 13.8},
    {256, 7168, 16384, 128, 64, 77.3}, {256, 7168, 16384, 128, 128, 59.2}, {256, 24576, 1536, 128, 64, 28.6},
    {256, 24576, 1536, 128, 128, 25.1}, {256, 32768, 512, 128, 64, 18.5}, {256, 32768, 512, 128, 128, 16.5},
    {1024, 576, 7168, 128, 64, 20.8}, {1024, 576, 7168, 128, 128, 26.9}, {1024, 2112, 7168, 128, 64, 36.5},
    {1024, 2112, 7168, 128, 128, 49.0}, {1024, 4096, 7168, 128, 64, 69.1}, {1024, 4096, 7168, 128, 128, 50.8},
    {1024, 7168, 2048, 128, 64, 38.4}, {1024, 7168, 2048, 128, 128, 33.7}, {1024, 7168, 16384, 128, 64, 288.0},
    {1024, 7168, 16384, 128, 128, 215.0}, {1024, 24576, 1536, 128, 64, 93.2}, {1024, 24576, 1536, 128, 128, 71.3},
    {1024, 32768, 512, 128, 64, 53.0}, {1024, 32768, 512, 128, 128, 40.0},
    // The fourth session's sweep at M = 4096 (commit 79ba455: the scale switch at a compile-time column,
    // uniform descriptors), 128-row tiles and 256x128 in CTA pairs sharing A; it replaces the earlier M = 4096
    // rows, and the earlier 160/192 rows at M = 256 and 1024 are dropped (those tiles are 25-40 % faster now).
    {4096, 2112, 7168, 128, 128, 117.3}, {4096, 2112, 7168, 128, 160, 118.1}, {4096, 2112, 7168, 128, 192, 96.4},
    {4096, 2112, 7168, 128, 64, 126.8}, {4096, 24576, 1536, 128, 128, 250.4}, {4096, 24576, 1536, 128, 160, 253.8},
    {4096, 24576, 1536, 128, 192, 239.2}, {4096, 24576, 1536, 128, 64, 340.5}, {4096, 32768, 512, 128, 128, 138.0},
    {4096, 32768, 512, 128, 160, 135.0}, {4096, 32768, 512, 128, 192, 160.6}, {4096, 32768, 512, 128, 64, 170.8},
    {4096, 7168, 16384, 128, 128, 732.3}, {4096, 7168, 16384, 128, 160, 758.9}, {4096, 7168, 16384, 128, 192, 726.3},
    {4096, 7168, 16384, 128, 64, 1180.0}, {4096, 4096, 7168, 128, 128, 181.2}, {4096, 4096, 7168, 128, 160, 204.4},
    {4096, 4096, 7168, 128, 192, 187.8}, {4096, 4096, 7168, 128, 64, 277.8}, {4096, 7168, 2048, 128, 128, 98.2},
    {4096, 7168, 2048, 128, 160, 98.4}, {4096, 7168, 2048, 128, 192, 99.3}, {4096, 7168, 2048, 128, 64, 123.3},
    {4096, 576, 7168, 128, 128, 48.0}, {4096, 576, 7168, 128, 160, 33.8}, {4096, 576, 7168, 128, 192, 34.3},
    {4096, 576, 7168, 128, 64, 46.1}, {4096, 2112, 7168, 256, 128, 136.3}, {4096, 24576, 1536, 256, 128, 244.3},
    {4096, 32768, 512, 256, 128, 127.1}, {4096, 7168, 16384, 256, 128, 740.3}, {4096, 4096, 7168, 256, 128, 184.0},
    {4096, 7168, 2048, 256, 128, 98.5}, {4096, 576, 7168, 256, 128, 48.7},
    // 128x176 at 4096 x 2112 x 7168, the plan's tile there since the fifteenth session: the fourteenth
    // session's measurement (x-176.sh at 46d7662, the same harness and timing).
    {4096, 2112, 7168, 128, 176, 92.7},
};

// The candidate of that tile (256 rows: two warpgroups of two waves, in CTA pairs sharing A).
Fp8GemmConfig tile(int bm, int bn) {
  Fp8GemmConfig c;
  c.block_m = bm;
  c.block_n = bn;
  c.math_warpgroups = std::min(2, bm / 64);
  c.cluster_n = bm == 256 ? 2 : 1;
  c.overlap_promotion = bm <= 128;
  c.stages = 4;
  return c;
}

// The model's job is to rank; it need not be exact. It is within 25 % of most measurements and within 60 % of
// all (it overestimates 4096 x 32768 x 512 by 40-55 % for every tile alike, which does not change the choice
// there).
TEST(Fp8GemmHeuristic, CostModelReproducesTheH200Sweep) {
  size_t close = 0, total = 0;
  for (const Measured& s : kSweep) {
    const double est = fp8_gemm_estimate_us(kH200, s.m, s.n, s.k, tile(s.block_m, s.block_n));
    ++total;
    if (std::abs(est / s.us - 1.0) <= 0.25) ++close;
    EXPECT_NEAR(est / s.us, 1.0, 0.6) << s.m << "x" << s.n << "x" << s.k << " " << s.block_m << "x" << s.block_n
                                      << ": measured " << s.us << " us, estimated " << est;
  }
  EXPECT_GE(static_cast<double>(close), 0.85 * static_cast<double>(total)) << close << " of " << total << " within 25 %";
}

// What the model is for: at every shape of the sweep where the sweep ran the plan's tile, it is the best tile
// or within 3 % of it (the sweep ran 64-row tiles only up to M = 128, so a 64-row choice at M = 256 or 1024
// cannot be judged, nor a 160/192 choice at M = 256 or 1024, whose rows predate those tiles' faster
// promotion; seven shapes in ten can).
TEST(Fp8GemmHeuristic, PicksWhatTheSweepFoundBest) {
  size_t shapes = 0;
  const std::vector<Judged> judged = judge_plan(kSweep, /*match_split=*/false, &shapes);
  for (const Judged& j : judged) expect_within(j, 1.03);
  EXPECT_GE(judged.size() * 10, shapes * 7) << judged.size() << " of " << shapes << " shapes could be judged";
}

// A's TMA box for the last m block: its rows rounded up to the next whole swizzle atom (8 rows), so that
// neither decode sizes nor a ragged last block pay TMA's zero fill of the rest; pairs sharing A load whole tiles.
TEST(Fp8GemmLayout, LastMBlocksBoxStopsAtTheNextSwizzleAtomPastM) {
  using kernels::fp8_gemm_last_box_rows;
  EXPECT_EQ(fp8_gemm_last_box_rows(64, 1), 8u);
  EXPECT_EQ(fp8_gemm_last_box_rows(64, 8), 8u);
  EXPECT_EQ(fp8_gemm_last_box_rows(64, 9), 16u);
  EXPECT_EQ(fp8_gemm_last_box_rows(64, 63), 64u);
  EXPECT_EQ(fp8_gemm_last_box_rows(64, 64), 64u);
  EXPECT_EQ(fp8_gemm_last_box_rows(64, 65), 8u);  // two m blocks, the second of one row
  EXPECT_EQ(fp8_gemm_last_box_rows(64, 100), 40u);
  EXPECT_EQ(fp8_gemm_last_box_rows(128, 37), 40u);
  EXPECT_EQ(fp8_gemm_last_box_rows(128, 100), 104u);
  EXPECT_EQ(fp8_gemm_last_box_rows(128, 160), 32u);
  EXPECT_EQ(fp8_gemm_last_box_rows(128, 4095), 128u);
  EXPECT_EQ(fp8_gemm_last_box_rows(128, 4096), 128u);
  EXPECT_EQ(fp8_gemm_last_box_rows(128, 4097), 8u);
  EXPECT_EQ(fp8_gemm_last_box_rows(256, 9, 2), 256u);  // pairs sharing A load whole tiles, half each
  EXPECT_EQ(fp8_gemm_last_box_rows(128, 300, 2), 128u);
  for (uint32_t m = 1; m < 1024; ++m) {
    const uint32_t rows = fp8_gemm_last_box_rows(128, m);
    const uint32_t last_rows = m - (m - 1) / 128 * 128;  // rows of M in the last m block
    EXPECT_TRUE(rows >= last_rows && rows % 8 == 0 && rows - last_rows < 8 && rows <= 128) << m;
    // The kernel's transaction count for a stage of the last m block: the full layout's, less the rows (and
    // their scales) not loaded.
    const auto layout = kernels::fp8_gemm_layout(128, 128, 5, true);
    EXPECT_EQ(layout.stage_tx_bytes - (128 - rows) * (128 + 4), rows * 128 + 128 * 128 + rows * 4) << m;
  }
}

// B's box for the last n block, by the same rule over N and BLOCK_N: the wide tiles at ragged N load only the
// columns' rows there (on the H200 128x160 at 9472 x 1024 x 8192 ran 152.7 us with the whole box and 124.4 with
// 64 rows), and pairs sharing B (cluster_m = 2) load whole tiles.
TEST(Fp8GemmLayout, LastNBlocksBoxStopsAtTheNextSwizzleAtomPastN) {
  using kernels::fp8_gemm_last_box_rows;
  EXPECT_EQ(fp8_gemm_last_box_rows(160, 1024), 64u);   // six whole tiles and 64 columns
  EXPECT_EQ(fp8_gemm_last_box_rows(160, 992), 32u);
  EXPECT_EQ(fp8_gemm_last_box_rows(160, 1120), 160u);  // seven whole tiles
  EXPECT_EQ(fp8_gemm_last_box_rows(176, 2112), 176u);
  EXPECT_EQ(fp8_gemm_last_box_rows(192, 1024), 64u);
  EXPECT_EQ(fp8_gemm_last_box_rows(128, 2112), 64u);
  EXPECT_EQ(fp8_gemm_last_box_rows(160, 576), 96u);
  EXPECT_EQ(fp8_gemm_last_box_rows(128, 576, 2), 128u);  // pairs sharing B
  for (uint32_t n = 8; n < 2048; n += 8) {
    const uint32_t rows = fp8_gemm_last_box_rows(160, n);
    const uint32_t last_cols = n - (n - 1) / 160 * 160;  // columns of N in the last n block
    EXPECT_TRUE(rows == last_cols && rows <= 160) << n;  // N is a multiple of 8: the box ends at N exactly
    // The kernel's transaction count for a stage of the last n block: the full layout's less B's rows not loaded.
    const auto layout = kernels::fp8_gemm_layout(128, 160, 5, true);
    EXPECT_EQ(layout.stage_tx_bytes - (160 - rows) * 128, 128 * 128 + rows * 128 + 128 * 4) << n;
  }
}

// The weight-gradient form's layout: the reduce-add epilogue's staging at the front of shared memory, before A's
// stages, which it must not overlap; B's per-row scales in each stage. The staging: 32-column boxes in two 8 KB
// buffers per 64-row warpgroup where those fit beside the stages, else through one 8 KB buffer at BLOCK_N = 192,
// else 16-column boxes in two 4 KB; the stage count is that of 8 KB a warpgroup (5 at 128x160 and 128x192, 6 at
// 128x128, 8 at 64x128, 13 at 64x64), so the wide boxes cost no tile a stage. B's rows are interleaved only for 128x160 and 128x176 at an N that is a multiple
// of 16.
TEST(Fp8GemmLayout, WeightGradientFormStagesItsReduceAddAheadOfTheStages) {
  using kernels::fp8_gemm_layout;
  using kernels::kHopperSmemPerBlock;
  for (uint32_t block_m : {64u, 128u})
    for (uint32_t block_n : {32u, 64u, 128u, 160u, 176u, 192u})
      for (uint32_t stages = 1; stages <= kernels::fp8_gemm_max_stages(block_m, block_n, false, kHopperSmemPerBlock,
                                                                        true);
           ++stages) {
        const auto l = fp8_gemm_layout(block_m, block_n, stages, false, true);
        const auto staging = kernels::fp8_gemm_reduce_staging(block_m, block_n, stages);
        EXPECT_EQ(staging.buffer_bytes(), 64u * staging.cols * 4u);
        // Wide in two buffers exactly where BLOCK_N takes whole 32-column boxes and their 16 KB a warpgroup fit;
        // else through one at BLOCK_N = 192; else narrow in two.
        const uint32_t narrow_total = l.total_bytes - l.d_bytes + block_m / 64 * 8192u;
        const bool wide_fits = narrow_total + block_m / 64 * 8192u <= kHopperSmemPerBlock;
        const bool wide = block_n % 32 == 0 && (wide_fits || block_n == 192);
        EXPECT_EQ(staging.cols, wide ? 32u : 16u) << block_m << "x" << block_n << ", " << stages << " stages";
        EXPECT_EQ(staging.buffers, wide && !wide_fits ? 1u : 2u) << block_m << "x" << block_n << ", " << stages;
        EXPECT_LE(l.d_bytes, block_m / 64 * (wide_fits ? 16384u : 8192u));
        EXPECT_EQ(l.d_offset, 0u);
        EXPECT_EQ(l.d_bytes, block_m / 64 * staging.warpgroup_bytes()) << block_m << "x" << block_n;
        EXPECT_LE(l.total_bytes, kHopperSmemPerBlock);
        EXPECT_GE(l.a_offset, l.d_offset + l.d_bytes) << block_m << "x" << block_n;
        EXPECT_EQ(l.a_offset % 1024, 0u);  // A's stages stay 1024-byte aligned (128-byte swizzle)
        EXPECT_EQ(l.stage_tx_bytes, block_m * 128 + block_n * 128 + block_m * 4 + block_n * 4);
        EXPECT_EQ(fp8_gemm_layout(block_m, block_n, stages, false, false).d_bytes, 0u);  // the bf16 form's direct store
      }
  // The tiles at the stage counts that fit: 128x160 takes the wide boxes in two buffers, 128x192 in one, 128x128
  // and 128x176 the narrow ones.
  const auto staging = [](uint32_t block_m, uint32_t block_n, uint32_t stages) {
    const auto s = kernels::fp8_gemm_reduce_staging(block_m, block_n, stages);
    return std::pair{s.cols, s.buffers};
  };
  EXPECT_EQ(staging(128, 160, 5), std::pair(32u, 2u));
  EXPECT_EQ(staging(128, 192, 5), std::pair(32u, 1u));
  EXPECT_EQ(staging(128, 192, 4), std::pair(32u, 2u));
  EXPECT_EQ(staging(128, 128, 6), std::pair(16u, 2u));
  EXPECT_EQ(staging(128, 176, 5), std::pair(16u, 2u));
  EXPECT_EQ(kernels::fp8_gemm_max_stages(128, 192, false, kHopperSmemPerBlock, true), 5u);
  EXPECT_EQ(kernels::fp8_gemm_max_stages(128, 160, false, kHopperSmemPerBlock, true), 5u);
  EXPECT_EQ(kernels::fp8_gemm_max_stages(128, 128, false, kHopperSmemPerBlock, true), 6u);
  EXPECT_EQ(kernels::fp8_gemm_max_stages(64, 128, false, kHopperSmemPerBlock, true), 8u);
  EXPECT_EQ(kernels::fp8_gemm_max_stages(64, 64, false, kHopperSmemPerBlock, true), 13u);
  // The plans' counts (since the forty-third session): at 128 rows and 128 columns or more, a stage fewer where that
  // leaves room for the wide boxes in two buffers, so that every such tile has them but 128x176 (no multiple of 32
  // columns); the narrower tiles keep as many as fit (not yet timed with fewer).
  const auto planned = [](uint32_t block_m, uint32_t block_n) {
    return kernels::fp8_gemm_accumulate_stages(block_m, block_n, kHopperSmemPerBlock);
  };
  EXPECT_EQ(planned(128, 128), 5u);
  EXPECT_EQ(planned(128, 192), 4u);
  EXPECT_EQ(planned(128, 160), 5u);
  EXPECT_EQ(planned(128, 176), 5u);  // as many as fit, narrow boxes
  EXPECT_EQ(planned(128, 64), 8u);   // as many as fit, narrow boxes
  EXPECT_EQ(planned(64, 64), 13u);   // likewise
  EXPECT_EQ(planned(64, 128), 8u);
  for (const auto& [block_m, block_n] :
       {std::pair(128u, 128u), std::pair(128u, 192u), std::pair(128u, 160u), std::pair(64u, 128u)})
    EXPECT_EQ(staging(block_m, block_n, planned(block_m, block_n)), std::pair(32u, 2u)) << block_m << "x" << block_n;
  // A smaller shared memory leaves fewer stages, still beside the wide boxes.
  EXPECT_EQ(kernels::fp8_gemm_accumulate_stages(128, 128, 150 * 1024), 3u);
  using kernels::fp8_gemm_interleaved_b;
  EXPECT_TRUE(fp8_gemm_interleaved_b(true, 7168, 160));
  EXPECT_TRUE(fp8_gemm_interleaved_b(true, 2112, 176));
  EXPECT_FALSE(fp8_gemm_interleaved_b(true, 584, 160));  // N an odd multiple of 8
  EXPECT_FALSE(fp8_gemm_interleaved_b(true, 7168, 192));
  EXPECT_FALSE(fp8_gemm_interleaved_b(true, 7168, 128));
  EXPECT_FALSE(fp8_gemm_interleaved_b(false, 7168, 160));  // the bf16 form's B is never interleaved
}

// B's loads are marked evict-first exactly when there are at most two m blocks (each B tile then read by at
// most two CTAs at about the same time): the decode sizes. Beyond, B's tiles are reused from L2.
TEST(Fp8GemmLayout, BIsStreamedThroughL2OnlyForOneOrTwoMBlocks) {
  using kernels::fp8_gemm_b_cache_policy;
  EXPECT_EQ(fp8_gemm_b_cache_policy(64, 1), ptx::kL2EvictFirst);
  EXPECT_EQ(fp8_gemm_b_cache_policy(64, 128), ptx::kL2EvictFirst);
  EXPECT_EQ(fp8_gemm_b_cache_policy(64, 129), ptx::kL2EvictNormal);
  EXPECT_EQ(fp8_gemm_b_cache_policy(128, 256), ptx::kL2EvictFirst);
  EXPECT_EQ(fp8_gemm_b_cache_policy(128, 257), ptx::kL2EvictNormal);
  EXPECT_EQ(fp8_gemm_b_cache_policy(256, 4096), ptx::kL2EvictNormal);
  EXPECT_NE(ptx::kL2EvictFirst, ptx::kL2EvictNormal);
}

// Split-K (64x16, 64x32 and 128x32 in CTA pairs) serves little N at decode sizes and long K, where a tile's K
// chain sets the time, and only while the pairs fit on the SMs at once; never the accumulating form, never with a
// multicast asked for, never at a K too short to pay the hand-over back, and the plan still needs at most eight
// kernels with the three split candidates.
TEST(Fp8GemmHeuristic, SplitKServesLittleNAtDecodeSizes) {
  const Fp8GemmPlan mla_kv = fp8_gemm_plan(kH200, 576, 7168);
  expect_well_formed(mla_kv);
  for (int64_t m : {1, 16, 64, 128, 192}) EXPECT_EQ(config_at(mla_kv, m).split_k, 2) << m;
  for (int64_t m : {193, 448, 4096}) EXPECT_EQ(config_at(mla_kv, m).split_k, 1) << m;
  // 64x16 pairs while one m block gives 72 CTAs; with two m blocks they would take two rounds: 64x32 pairs.
  for (int64_t m : {1, 16, 64}) EXPECT_EQ(config_at(mla_kv, m).block_n, 16) << m;
  for (int64_t m : {65, 128, 192}) EXPECT_EQ(config_at(mla_kv, m).block_n, 32) << m;
  const Fp8GemmConfig& split = config_at(mla_kv, 128);
  EXPECT_EQ(split.block_m, 64);
  EXPECT_EQ(split.cluster_size(), 2);
  EXPECT_EQ(split.describe(), "64x32, 16 stages, 1 math warpgroup, TMA store, overlapped promotion, split-K x2");
  EXPECT_EQ(config_at(mla_kv, 1).describe(),
            "64x16, 12 stages, 1 math warpgroup, TMA store, overlapped promotion, split-K x2");
  for (const Fp8GemmConfig& c : mla_kv.kernels)
    EXPECT_LE(fp8_gemm_shared_bytes(c), static_cast<uint32_t>(kH200.shared_memory_per_block)) << c.describe();

  // 2112 x 7168: 64x32 pairs up to 64 rows (132 tiles of 64x16 would need two rounds), then 128x32 pairs: 66
  // tiles of 128 rows make one round of 132 CTAs where 64x32 pairs would take two (12.8 against 15.6 us at
  // M = 128, and 13.5 for 64x32 unsplit).
  // (12 of the 16 stages that fit: the kernel serves one m block, OneMBlockKernelsRunFewerStages.)
  const Fp8GemmPlan mla_q = fp8_gemm_plan(kH200, 2112, 7168);
  expect_well_formed(mla_q);
  EXPECT_EQ(config_at(mla_q, 64).describe(),
            "64x32, 12 stages, 1 math warpgroup, TMA store, overlapped promotion, split-K x2");
  for (int64_t m : {65, 96, 128})
    EXPECT_EQ(config_at(mla_q, m).describe(),
              "128x32, 9 stages, 2 math warpgroups, TMA store, overlapped promotion, split-K x2")
        << m;
  EXPECT_EQ(config_at(mla_q, 129).split_k, 1);

  // The cost: a pair's CTAs each run half of the tile's K blocks and the pair pays a hand-over per tile. With one
  // K block there is nothing to halve and the split costs just the hand-over; from there what it saves grows
  // with the chain.
  const Fp8GemmConfig& pairs128 = config_at(mla_q, 128);
  Fp8GemmConfig whole = pairs128;
  whole.split_k = 1;
  const auto saved = [&](int64_t k) {
    return fp8_gemm_estimate_us(kH200, 128, 2112, k, whole) - fp8_gemm_estimate_us(kH200, 128, 2112, k, pairs128);
  };
  EXPECT_LT(saved(128), 0.0);
  EXPECT_LT(saved(128), saved(1024));
  EXPECT_LT(saved(1024), saved(3584));
  EXPECT_LT(saved(3584), saved(7168));
  EXPECT_LT(saved(7168), saved(14336));
  EXPECT_GT(saved(7168), 0.0);

  // Short K has little chain to halve: no split there (1 x 512 x 512: 64x32 5.4 us, 64x16 pairs 6.8).
  for (const auto& [n, k] : std::vector<std::pair<int64_t, int64_t>>{{512, 512}, {1024, 512}, {768, 1024}, {256, 2048}})
    for (const Fp8GemmConfig& c : fp8_gemm_plan(kH200, n, k).kernels) EXPECT_EQ(c.split_k, 1) << n << "x" << k;

  // Block-size overrides bound the split candidates too: a block_n keeps its width, a block_m its rows.
  Fp8GemmOverrides n32;
  n32.block_n = 32;
  for (const Fp8GemmConfig& c : fp8_gemm_plan(kH200, 576, 7168, n32).kernels) EXPECT_EQ(c.block_n, 32);
  Fp8GemmOverrides m64, m128;
  m64.block_m = 64;
  m128.block_m = 128;
  for (const Fp8GemmConfig& c : fp8_gemm_plan(kH200, 2112, 7168, m64).kernels) EXPECT_EQ(c.block_m, 64);
  EXPECT_EQ(config_at(fp8_gemm_plan(kH200, 2112, 7168, m128), 128).split_k, 2);

  for (const auto& [n, k] : warmup_shapes()) {
    const Fp8GemmPlan wide = fp8_gemm_plan(kH200, n, k);
    if (n >= 4096)
      for (const Fp8GemmConfig& c : wide.kernels) EXPECT_EQ(c.split_k, 1) << n << "x" << k;
    for (const Fp8GemmConfig& c : fp8_gemm_plan(kH200, n, k, {}, Fp8GemmForm::kAccumulate).kernels)
      EXPECT_EQ(c.split_k, 1) << n << "x" << k;
    Fp8GemmOverrides pairs_share_b;
    pairs_share_b.cluster_m = 2;
    for (const Fp8GemmConfig& c : fp8_gemm_plan(kH200, n, k, pairs_share_b).kernels)
      EXPECT_EQ(c.split_k, 1) << n << "x" << k;
  }
}

// The split-K refit's measurements (H200, 2026-11-30, at 8e7e4c1 with the split-K tile end as one branch;
// fp8_gemm_test, CUDA events with a 512 MB flush before each call, median of 20; bench/RESULTS.md,
// "twenty-second session"): the decode sweep at M = 1, 64, 128 and 192 on the dense shapes with every split tile,
// then three checks of the ranges the structural split cost moved at other (N, K): short K (512-4096), long K
// (16384) and the low ends of the 128x32 pairs' ranges. Split-K pairs are marked by a trailing 2.
const Measured kSplitKRefit[] = {
    {1, 2112, 7168, 64, 128, 17.6}, {1, 2112, 7168, 64, 64, 14.4}, {1, 2112, 7168, 64, 32, 13.4},
    {1, 2112, 7168, 64, 16, 12.9}, {1, 2112, 7168, 64, 112, 17.5}, {1, 2112, 7168, 128, 128, 23.3},
    {1, 2112, 7168, 64, 128, 14.0, 2}, {1, 2112, 7168, 64, 64, 12.0, 2}, {1, 2112, 7168, 64, 32, 11.5, 2},
    {1, 2112, 7168, 64, 16, 14.4, 2}, {1, 24576, 1536, 64, 128, 17.1}, {1, 24576, 1536, 64, 64, 16.3},
    {1, 24576, 1536, 64, 32, 19.4}, {1, 24576, 1536, 64, 16, 29.3}, {1, 24576, 1536, 64, 112, 17.0},
    {1, 24576, 1536, 128, 128, 18.3}, {1, 24576, 1536, 64, 128, 18.3, 2}, {1, 24576, 1536, 64, 64, 18.6, 2},
    {1, 24576, 1536, 64, 32, 22.3, 2}, {1, 24576, 1536, 64, 16, 34.0, 2}, {1, 32768, 512, 64, 128, 11.3},
    {1, 32768, 512, 64, 64, 11.7}, {1, 32768, 512, 64, 32, 13.8}, {1, 32768, 512, 64, 16, 19.0},
    {1, 32768, 512, 64, 112, 12.2}, {1, 32768, 512, 128, 128, 11.9}, {1, 32768, 512, 64, 128, 15.1, 2},
    {1, 32768, 512, 64, 64, 15.4, 2}, {1, 32768, 512, 64, 32, 17.6, 2}, {1, 32768, 512, 64, 16, 25.4, 2},
    {1, 7168, 16384, 64, 128, 37.4}, {1, 7168, 16384, 64, 64, 37.2}, {1, 7168, 16384, 64, 32, 46.0},
    {1, 7168, 16384, 64, 16, 79.1}, {1, 7168, 16384, 64, 112, 37.6}, {1, 7168, 16384, 128, 128, 47.2},
    {1, 7168, 16384, 64, 128, 38.4, 2}, {1, 7168, 16384, 64, 64, 37.7, 2}, {1, 7168, 16384, 64, 32, 48.4, 2},
    {1, 7168, 16384, 64, 16, 73.1, 2}, {1, 4096, 7168, 64, 128, 17.8}, {1, 4096, 7168, 64, 64, 15.0},
    {1, 4096, 7168, 64, 32, 14.9}, {1, 4096, 7168, 64, 16, 20.4}, {1, 4096, 7168, 64, 112, 18.0},
    {1, 4096, 7168, 128, 128, 23.7}, {1, 4096, 7168, 64, 128, 16.1, 2}, {1, 4096, 7168, 64, 64, 15.6, 2},
    {1, 4096, 7168, 64, 32, 16.0, 2}, {1, 4096, 7168, 64, 16, 23.0, 2}, {1, 7168, 2048, 64, 128, 10.3},
    {1, 7168, 2048, 64, 64, 10.1}, {1, 7168, 2048, 64, 32, 11.3}, {1, 7168, 2048, 64, 16, 14.9},
    {1, 7168, 2048, 64, 112, 10.8}, {1, 7168, 2048, 128, 128, 12.3}, {1, 7168, 2048, 64, 128, 12.1, 2},
    {1, 7168, 2048, 64, 64, 12.2, 2}, {1, 7168, 2048, 64, 32, 13.5, 2}, {1, 7168, 2048, 64, 16, 16.4, 2},
    {1, 576, 7168, 64, 128, 17.3}, {1, 576, 7168, 64, 64, 13.6}, {1, 576, 7168, 64, 32, 13.1},
    {1, 576, 7168, 64, 16, 12.2}, {1, 576, 7168, 64, 112, 17.1}, {1, 576, 7168, 128, 128, 22.7},
    {1, 576, 7168, 64, 128, 13.8, 2}, {1, 576, 7168, 64, 64, 10.9, 2}, {1, 576, 7168, 64, 32, 10.6, 2},
    {1, 576, 7168, 64, 16, 9.9, 2}, {64, 2112, 7168, 64, 128, 18.0}, {64, 2112, 7168, 64, 64, 14.5},
    {64, 2112, 7168, 64, 32, 13.2}, {64, 2112, 7168, 64, 112, 17.5}, {64, 2112, 7168, 128, 128, 23.7},
    {64, 2112, 7168, 64, 128, 14.2, 2}, {64, 2112, 7168, 64, 64, 12.5, 2}, {64, 2112, 7168, 64, 32, 11.9, 2},
    {64, 2112, 7168, 64, 16, 14.6, 2}, {64, 24576, 1536, 64, 128, 17.6}, {64, 24576, 1536, 64, 64, 16.7},
    {64, 24576, 1536, 64, 32, 19.9}, {64, 24576, 1536, 64, 112, 17.2}, {64, 24576, 1536, 128, 128, 18.9},
    {64, 24576, 1536, 64, 128, 19.0, 2}, {64, 24576, 1536, 64, 64, 19.5, 2}, {64, 24576, 1536, 64, 32, 23.3, 2},
    {64, 24576, 1536, 64, 16, 35.1, 2}, {64, 32768, 512, 64, 128, 11.6}, {64, 32768, 512, 64, 64, 12.3},
    {64, 32768, 512, 64, 32, 14.3}, {64, 32768, 512, 64, 112, 12.4}, {64, 32768, 512, 128, 128, 12.2},
    {64, 32768, 512, 64, 128, 15.6, 2}, {64, 32768, 512, 64, 64, 15.8, 2}, {64, 32768, 512, 64, 32, 18.3, 2},
    {64, 32768, 512, 64, 16, 25.9, 2}, {64, 7168, 16384, 64, 128, 38.4}, {64, 7168, 16384, 64, 64, 38.3},
    {64, 7168, 16384, 64, 32, 46.2}, {64, 7168, 16384, 64, 112, 38.4}, {64, 7168, 16384, 128, 128, 48.8},
    {64, 7168, 16384, 64, 128, 39.4, 2}, {64, 7168, 16384, 64, 64, 39.0, 2}, {64, 7168, 16384, 64, 32, 49.0, 2},
    {64, 7168, 16384, 64, 16, 73.6, 2}, {64, 4096, 7168, 64, 128, 18.3}, {64, 4096, 7168, 64, 64, 15.0},
    {64, 4096, 7168, 64, 32, 15.0}, {64, 4096, 7168, 64, 112, 18.2}, {64, 4096, 7168, 128, 128, 23.8},
    {64, 4096, 7168, 64, 128, 16.5, 2}, {64, 4096, 7168, 64, 64, 15.9, 2}, {64, 4096, 7168, 64, 32, 16.3, 2},
    {64, 4096, 7168, 64, 16, 23.2, 2}, {64, 7168, 2048, 64, 128, 10.6}, {64, 7168, 2048, 64, 64, 10.3},
    {64, 7168, 2048, 64, 32, 11.4}, {64, 7168, 2048, 64, 112, 10.5}, {64, 7168, 2048, 128, 128, 12.4},
    {64, 7168, 2048, 64, 128, 12.2, 2}, {64, 7168, 2048, 64, 64, 12.3, 2}, {64, 7168, 2048, 64, 32, 13.6, 2},
    {64, 7168, 2048, 64, 16, 16.9, 2}, {64, 576, 7168, 64, 128, 17.8}, {64, 576, 7168, 64, 64, 14.1},
    {64, 576, 7168, 64, 32, 12.9}, {64, 576, 7168, 64, 112, 17.0}, {64, 576, 7168, 128, 128, 23.4},
    {64, 576, 7168, 64, 128, 13.6, 2}, {64, 576, 7168, 64, 64, 11.3, 2}, {64, 576, 7168, 64, 32, 10.3, 2},
    {64, 576, 7168, 64, 16, 9.9, 2}, {128, 2112, 7168, 128, 128, 23.7}, {128, 2112, 7168, 64, 128, 18.1},
    {128, 2112, 7168, 128, 64, 17.5}, {128, 2112, 7168, 64, 64, 14.6}, {128, 2112, 7168, 64, 32, 13.5},
    {128, 2112, 7168, 64, 112, 18.4}, {128, 2112, 7168, 128, 32, 15.1}, {128, 2112, 7168, 64, 128, 14.6, 2},
    {128, 2112, 7168, 64, 64, 14.0, 2}, {128, 2112, 7168, 64, 32, 15.6, 2}, {128, 2112, 7168, 64, 16, 23.0, 2},
    {128, 2112, 7168, 128, 128, 19.6, 2}, {128, 2112, 7168, 128, 64, 14.4, 2}, {128, 2112, 7168, 128, 32, 12.8, 2},
    {128, 24576, 1536, 128, 128, 19.9}, {128, 24576, 1536, 64, 128, 17.8}, {128, 24576, 1536, 128, 64, 17.8},
    {128, 24576, 1536, 64, 64, 20.8}, {128, 24576, 1536, 64, 32, 31.6}, {128, 24576, 1536, 64, 112, 20.4},
    {128, 24576, 1536, 128, 32, 20.6}, {128, 24576, 1536, 64, 128, 21.9, 2}, {128, 24576, 1536, 64, 64, 26.0, 2},
    {128, 24576, 1536, 64, 32, 36.9, 2}, {128, 24576, 1536, 64, 16, 61.1, 2}, {128, 24576, 1536, 128, 128, 23.2, 2},
    {128, 24576, 1536, 128, 64, 21.0, 2}, {128, 24576, 1536, 128, 32, 25.2, 2}, {128, 32768, 512, 128, 128, 12.3},
    {128, 32768, 512, 64, 128, 12.6}, {128, 32768, 512, 128, 64, 12.4}, {128, 32768, 512, 64, 64, 15.3},
    {128, 32768, 512, 64, 32, 20.3}, {128, 32768, 512, 64, 112, 13.7}, {128, 32768, 512, 128, 32, 14.9},
    {128, 32768, 512, 64, 128, 19.2, 2}, {128, 32768, 512, 64, 64, 20.8, 2}, {128, 32768, 512, 64, 32, 27.0, 2},
    {128, 32768, 512, 64, 16, 44.5, 2}, {128, 32768, 512, 128, 128, 18.0, 2}, {128, 32768, 512, 128, 64, 18.7, 2},
    {128, 32768, 512, 128, 32, 20.2, 2}, {128, 7168, 16384, 128, 128, 50.6}, {128, 7168, 16384, 64, 128, 39.4},
    {128, 7168, 16384, 128, 64, 39.4}, {128, 7168, 16384, 64, 64, 51.1}, {128, 7168, 16384, 64, 32, 82.3},
    {128, 7168, 16384, 64, 112, 38.9}, {128, 7168, 16384, 128, 32, 51.0}, {128, 7168, 16384, 64, 128, 53.2, 2},
    {128, 7168, 16384, 64, 64, 62.0, 2}, {128, 7168, 16384, 64, 32, 79.9, 2}, {128, 7168, 16384, 64, 16, 139.8, 2},
    {128, 7168, 16384, 128, 128, 44.4, 2}, {128, 7168, 16384, 128, 64, 44.8, 2}, {128, 7168, 16384, 128, 32, 56.4, 2},
    {128, 4096, 7168, 128, 128, 24.4}, {128, 4096, 7168, 64, 128, 18.5}, {128, 4096, 7168, 128, 64, 18.1},
    {128, 4096, 7168, 64, 64, 15.6}, {128, 4096, 7168, 64, 32, 21.3}, {128, 4096, 7168, 64, 112, 18.2},
    {128, 4096, 7168, 128, 32, 16.1}, {128, 4096, 7168, 64, 128, 18.8, 2}, {128, 4096, 7168, 64, 64, 18.9, 2},
    {128, 4096, 7168, 64, 32, 25.1, 2}, {128, 4096, 7168, 64, 16, 40.2, 2}, {128, 4096, 7168, 128, 128, 21.2, 2},
    {128, 4096, 7168, 128, 64, 16.8, 2}, {128, 4096, 7168, 128, 32, 18.2, 2}, {128, 7168, 2048, 128, 128, 12.4},
    {128, 7168, 2048, 64, 128, 10.7}, {128, 7168, 2048, 128, 64, 10.9}, {128, 7168, 2048, 64, 64, 11.7},
    {128, 7168, 2048, 64, 32, 16.1}, {128, 7168, 2048, 64, 112, 11.3}, {128, 7168, 2048, 128, 32, 12.0},
    {128, 7168, 2048, 64, 128, 14.3, 2}, {128, 7168, 2048, 64, 64, 15.3, 2}, {128, 7168, 2048, 64, 32, 18.0, 2},
    {128, 7168, 2048, 64, 16, 26.7, 2}, {128, 7168, 2048, 128, 128, 14.0, 2}, {128, 7168, 2048, 128, 64, 13.3, 2},
    {128, 7168, 2048, 128, 32, 14.1, 2}, {128, 576, 7168, 128, 128, 23.4}, {128, 576, 7168, 64, 128, 17.3},
    {128, 576, 7168, 128, 64, 17.0}, {128, 576, 7168, 64, 64, 14.0}, {128, 576, 7168, 64, 32, 12.6},
    {128, 576, 7168, 64, 112, 17.0}, {128, 576, 7168, 128, 32, 14.4}, {128, 576, 7168, 64, 128, 13.4, 2},
    {128, 576, 7168, 64, 64, 11.4, 2}, {128, 576, 7168, 64, 32, 10.5, 2}, {128, 576, 7168, 64, 16, 14.0, 2},
    {128, 576, 7168, 128, 128, 18.7, 2}, {128, 576, 7168, 128, 64, 13.5, 2}, {128, 576, 7168, 128, 32, 11.6, 2},
    {192, 2112, 7168, 128, 128, 24.0}, {192, 2112, 7168, 128, 64, 17.9}, {192, 2112, 7168, 64, 128, 18.1},
    {192, 2112, 7168, 64, 64, 15.0}, {192, 2112, 7168, 64, 32, 21.1}, {192, 2112, 7168, 128, 32, 15.7},
    {192, 2112, 7168, 64, 32, 20.4, 2}, {192, 2112, 7168, 64, 16, 32.0, 2}, {192, 2112, 7168, 128, 64, 15.0, 2},
    {192, 2112, 7168, 128, 32, 17.5, 2}, {192, 24576, 1536, 128, 128, 23.1}, {192, 24576, 1536, 128, 64, 24.8},
    {192, 24576, 1536, 64, 128, 24.0}, {192, 24576, 1536, 64, 64, 29.4}, {192, 24576, 1536, 64, 32, 46.1},
    {192, 24576, 1536, 128, 32, 34.1}, {192, 24576, 1536, 64, 32, 51.7, 2}, {192, 24576, 1536, 64, 16, 88.2, 2},
    {192, 24576, 1536, 128, 64, 32.6, 2}, {192, 24576, 1536, 128, 32, 42.1, 2}, {192, 32768, 512, 128, 128, 15.9},
    {192, 32768, 512, 128, 64, 16.3}, {192, 32768, 512, 64, 128, 15.2}, {192, 32768, 512, 64, 64, 19.0},
    {192, 32768, 512, 64, 32, 29.2}, {192, 32768, 512, 128, 32, 21.7}, {192, 32768, 512, 64, 32, 38.2, 2},
    {192, 32768, 512, 64, 16, 64.2, 2}, {192, 32768, 512, 128, 64, 28.7, 2}, {192, 32768, 512, 128, 32, 32.4, 2},
    {192, 7168, 16384, 128, 128, 51.8}, {192, 7168, 16384, 128, 64, 62.9}, {192, 7168, 16384, 64, 128, 69.2},
    {192, 7168, 16384, 64, 64, 74.1}, {192, 7168, 16384, 64, 32, 121.6}, {192, 7168, 16384, 128, 32, 93.8},
    {192, 7168, 16384, 64, 32, 123.0, 2}, {192, 7168, 16384, 64, 16, 208.6, 2}, {192, 7168, 16384, 128, 64, 75.6, 2},
    {192, 7168, 16384, 128, 32, 89.7, 2}, {192, 4096, 7168, 128, 128, 24.7}, {192, 4096, 7168, 128, 64, 18.7},
    {192, 4096, 7168, 64, 128, 20.1}, {192, 4096, 7168, 64, 64, 24.2}, {192, 4096, 7168, 64, 32, 30.0},
    {192, 4096, 7168, 128, 32, 25.1}, {192, 4096, 7168, 64, 32, 34.6, 2}, {192, 4096, 7168, 64, 16, 58.2, 2},
    {192, 4096, 7168, 128, 64, 22.1, 2}, {192, 4096, 7168, 128, 32, 28.3, 2}, {192, 7168, 2048, 128, 128, 12.8},
    {192, 7168, 2048, 128, 64, 14.0}, {192, 7168, 2048, 64, 128, 14.1}, {192, 7168, 2048, 64, 64, 14.9},
    {192, 7168, 2048, 64, 32, 21.5}, {192, 7168, 2048, 128, 32, 17.6}, {192, 7168, 2048, 64, 32, 24.1, 2},
    {192, 7168, 2048, 64, 16, 37.7, 2}, {192, 7168, 2048, 128, 64, 17.8, 2}, {192, 7168, 2048, 128, 32, 19.6, 2},
    {192, 576, 7168, 128, 128, 23.4}, {192, 576, 7168, 128, 64, 17.0}, {192, 576, 7168, 64, 128, 17.5},
    {192, 576, 7168, 64, 64, 13.9}, {192, 576, 7168, 64, 32, 12.7}, {192, 576, 7168, 128, 32, 14.5},
    {192, 576, 7168, 64, 32, 10.6, 2}, {192, 576, 7168, 64, 16, 14.2, 2}, {192, 576, 7168, 128, 64, 13.7, 2},
    {192, 576, 7168, 128, 32, 11.7, 2}, {1, 256, 2048, 64, 16, 7.4, 2}, {1, 256, 2048, 64, 32, 6.9},
    {1, 256, 2048, 64, 32, 7.8, 2}, {128, 512, 2048, 64, 16, 7.5, 2}, {128, 512, 2048, 64, 32, 7.3},
    {128, 512, 2048, 64, 32, 7.5, 2}, {1, 768, 1024, 64, 16, 7.2, 2}, {1, 768, 1024, 64, 32, 6.2},
    {1, 768, 1024, 64, 32, 7.3, 2}, {1, 1024, 512, 64, 16, 7.0, 2}, {1, 1024, 512, 64, 32, 5.7},
    {1, 1024, 512, 64, 32, 7.1, 2}, {64, 1024, 2048, 64, 16, 8.0, 2}, {64, 1024, 2048, 64, 32, 7.6},
    {64, 1024, 2048, 64, 32, 8.0, 2}, {128, 1024, 1024, 64, 32, 7.5, 2}, {128, 1024, 1024, 64, 32, 6.7},
    {128, 1024, 1024, 64, 16, 7.9, 2}, {1, 2048, 2048, 64, 32, 8.3, 2}, {1, 2048, 2048, 64, 32, 7.9},
    {1, 2048, 2048, 64, 64, 8.3}, {1, 1536, 512, 64, 32, 6.7, 2}, {1, 1536, 512, 64, 32, 6.0},
    {1, 1536, 512, 64, 64, 6.1}, {1, 512, 512, 64, 16, 6.8, 2}, {1, 512, 512, 64, 32, 5.4},
    {1, 512, 512, 64, 32, 6.9, 2}, {128, 1536, 7168, 64, 32, 13.6}, {128, 1536, 7168, 128, 32, 12.5, 2},
    {128, 1536, 7168, 64, 32, 15.1, 2}, {128, 2048, 4096, 64, 32, 10.4}, {128, 2048, 4096, 128, 32, 10.6, 2},
    {128, 2048, 4096, 64, 32, 12.4, 2}, {128, 2048, 7168, 64, 32, 13.7}, {128, 2048, 7168, 128, 32, 12.7, 2},
    {128, 2048, 7168, 64, 32, 15.4, 2}, {128, 1536, 16384, 64, 32, 23.3}, {128, 1536, 16384, 128, 32, 18.5, 2},
    {128, 1536, 16384, 64, 32, 26.9, 2}, {256, 1024, 16384, 64, 32, 23.7}, {256, 1024, 16384, 128, 32, 21.0, 2},
    {256, 1024, 16384, 64, 32, 27.0, 2}, {256, 1024, 7168, 64, 32, 13.2}, {256, 1024, 7168, 128, 32, 12.2, 2},
    {256, 1024, 7168, 64, 32, 16.3, 2}, {512, 512, 7168, 64, 32, 13.0}, {512, 512, 7168, 128, 32, 13.1, 2},
    {512, 512, 7168, 64, 32, 16.4, 2}, {512, 512, 16384, 64, 32, 23.6}, {512, 512, 16384, 128, 32, 23.4, 2},
    {512, 512, 16384, 64, 32, 27.6, 2}, {320, 768, 16384, 64, 32, 28.3, 2}, {320, 768, 16384, 64, 32, 23.6},
    {320, 768, 16384, 128, 32, 29.0, 2}, {96, 2112, 7168, 64, 32, 13.7}, {96, 2112, 7168, 128, 32, 12.6, 2},
    {96, 2112, 7168, 64, 32, 15.5, 2}, {160, 4096, 7168, 128, 64, 18.7}, {160, 4096, 7168, 64, 128, 20.3},
    {160, 4096, 7168, 64, 64, 24.3}, {256, 4096, 7168, 128, 64, 18.8}, {256, 4096, 7168, 64, 128, 20.2},
    {256, 4096, 7168, 128, 128, 24.8}, {1, 256, 4096, 64, 32, 9.8}, {1, 256, 4096, 64, 16, 8.1, 2},
    {1, 256, 4096, 64, 32, 8.9, 2}, {64, 256, 4096, 64, 32, 9.3}, {64, 256, 4096, 64, 16, 8.0, 2},
    {64, 256, 4096, 64, 32, 8.3, 2}, {256, 256, 4096, 64, 32, 9.6}, {256, 256, 4096, 64, 16, 8.5, 2},
    {64, 512, 4096, 64, 32, 9.5}, {64, 512, 4096, 64, 16, 8.5, 2}, {128, 512, 4096, 64, 32, 9.6},
    {128, 512, 4096, 64, 16, 8.7, 2}, {1, 1024, 4096, 64, 32, 10.1}, {1, 1024, 4096, 64, 16, 8.8, 2},
    {1, 1024, 4096, 64, 32, 9.6, 2}, {64, 1024, 4096, 64, 32, 9.9}, {64, 1024, 4096, 64, 16, 9.3, 2},
    {64, 1024, 4096, 64, 32, 9.2, 2}, {1, 1536, 4096, 64, 32, 9.9}, {1, 1536, 4096, 64, 32, 9.3, 2},
    {128, 1536, 4096, 64, 32, 10.3}, {128, 1536, 4096, 64, 32, 12.0, 2}, {128, 1536, 4096, 128, 32, 10.3, 2},
    {1, 1024, 7168, 64, 16, 10.9, 2}, {1, 1024, 7168, 64, 32, 13.0}, {1, 1024, 7168, 64, 32, 11.1, 2},
    {128, 1024, 7168, 64, 32, 10.7, 2}, {128, 1024, 7168, 64, 32, 12.9}, {128, 1024, 7168, 128, 32, 12.3, 2},
    {256, 512, 7168, 64, 32, 10.8, 2}, {256, 512, 7168, 64, 32, 12.8}, {256, 512, 7168, 128, 32, 11.8, 2},
    {200, 768, 16384, 64, 32, 23.3}, {200, 768, 16384, 64, 32, 26.6, 2}, {200, 768, 16384, 128, 32, 18.1, 2},
    {65, 2112, 7168, 64, 32, 13.7}, {65, 2112, 7168, 128, 32, 12.9, 2}, {65, 2112, 7168, 64, 32, 15.7, 2},
    {80, 2112, 7168, 64, 32, 13.8}, {80, 2112, 7168, 128, 32, 12.8, 2}, {65, 2048, 7168, 64, 32, 13.8},
    {65, 2048, 7168, 128, 32, 13.0, 2}, {128, 2048, 16384, 64, 32, 23.3}, {128, 2048, 16384, 128, 32, 19.5, 2},
    {129, 1024, 16384, 64, 32, 23.4}, {129, 1024, 16384, 128, 32, 18.3, 2}, {129, 1024, 16384, 64, 32, 26.3, 2},
    {257, 512, 16384, 64, 32, 23.0}, {257, 512, 16384, 128, 32, 18.0, 2}, {257, 512, 16384, 64, 32, 25.9, 2},
    {65, 576, 7168, 64, 32, 10.3, 2}, {65, 576, 7168, 128, 32, 11.8, 2}, {65, 576, 7168, 64, 16, 14.3, 2},
    {192, 512, 4096, 64, 32, 9.6}, {192, 512, 4096, 64, 32, 8.9, 2}, {192, 512, 4096, 64, 16, 10.8, 2},
    {256, 512, 4096, 64, 32, 9.6}, {256, 512, 4096, 64, 32, 8.9, 2}, {128, 768, 4096, 64, 32, 9.9},
    {128, 768, 4096, 64, 32, 9.3, 2}, {128, 768, 4096, 64, 16, 11.0, 2}, {128, 1024, 4096, 64, 32, 9.8},
    {128, 1024, 4096, 64, 32, 9.4, 2}, {128, 1024, 4096, 128, 32, 9.9, 2}, {1, 2048, 4096, 64, 32, 10.1},
    {1, 2048, 4096, 64, 32, 9.9, 2}, {64, 2048, 4096, 64, 32, 10.1}, {64, 2048, 4096, 64, 32, 9.9, 2},
    {384, 256, 4096, 64, 32, 9.6}, {384, 256, 4096, 64, 32, 9.1, 2}, {16, 256, 4096, 64, 32, 9.4},
    {16, 256, 4096, 64, 16, 7.9, 2}, {129, 1024, 7168, 64, 32, 13.1}, {129, 1024, 7168, 128, 32, 12.3, 2},
    {129, 1024, 7168, 64, 32, 15.0, 2}, {128, 768, 7168, 64, 32, 10.7, 2}, {128, 768, 7168, 64, 32, 13.1},
    {128, 768, 7168, 128, 32, 11.8, 2}, {300, 768, 16384, 64, 32, 28.3, 2}, {300, 768, 16384, 64, 32, 23.6},
    {300, 768, 16384, 128, 32, 29.6, 2}, {1, 576, 4096, 64, 16, 8.9, 2}, {1, 576, 4096, 64, 32, 9.4},
    {1, 576, 4096, 64, 32, 9.1, 2}, {128, 576, 2048, 64, 32, 7.7, 2}, {128, 576, 2048, 64, 32, 7.2},
    {128, 576, 2048, 64, 16, 8.4, 2},
};

// The plan is within 3 % of the best measured at 76 of the 79 shapes it can be judged at (the ratio model it
// replaced: 53 of 80, summed log loss 3.23 against 0.47; 128 x 24576 x 1536 is judged since the round-wise DRAM
// term took 64x128 there; 192 x 7168 x 2048 and 16384 run 128x112 since kFill112, timed in kFill112Moves). The
// misses: 128x32 pairs at 128 x 1536 x 7168 (12.5 us, the plan's 64x32 13.6); 64x32 unsplit at 300 and 320 x 768 x
// 16384 (23.6 us against 28.3 for the plan's 64x32 pairs): with twelve candidates the plan must drop four, and
// 64x32 serves only 257..320 there.
TEST(Fp8GemmHeuristic, SplitKRefitPicksWhatItsChecksFoundBest) {
  size_t shapes = 0;
  const std::vector<Judged> judged = judge_plan(kSplitKRefit, /*match_split=*/true, &shapes);
  EXPECT_EQ(shapes, 82u);
  EXPECT_EQ(judged.size(), 79u);  // 128x192, the plan's at 192 x 24576 x 1536, was not run; two 128x112 shapes
  EXPECT_LT(expect_within_misses(judged, {{128, 1536, 7168, 1.09},
                                          {300, 768, 16384, 1.20},
                                          {320, 768, 16384, 1.20}}),
            0.55);
}

// The decode sweep of 2026-11-30 (H200, fp8_gemm_test --shape, CUDA events back to back with a 512 MB flush
// before each call, median of 23; bench/RESULTS.md, "seventh session"): M = 1, 64, 128, the tiles worth a look
// at each shape, split-K pairs marked by a trailing 2 (split_k). The plan's choice is the best there or within
// 3 % of it, at every shape where the sweep ran it. 128 x 24576 x 1536 was a known miss (128x192 18.8 us, 64x128
// 17.9) until the DRAM term went round by round (kRoundsCheck).
const Measured kDecodeSweep[] = {
    {1, 24576, 1536, 128, 192, 17.9}, {1, 24576, 1536, 64, 128, 17.1}, {1, 24576, 1536, 128, 64, 16.9},
    {1, 24576, 1536, 128, 128, 18.5}, {1, 24576, 1536, 64, 64, 16.6}, {1, 24576, 1536, 64, 192, 17.2},
    {1, 576, 7168, 64, 32, 11.9, 2}, {1, 576, 7168, 64, 16, 10.6, 2}, {1, 576, 7168, 64, 16, 12.9},
    {1, 576, 7168, 64, 32, 12.9}, {1, 4096, 7168, 64, 64, 15.2}, {1, 4096, 7168, 64, 32, 15.1},
    {1, 4096, 7168, 64, 128, 18.5}, {1, 4096, 7168, 64, 16, 20.5}, {1, 7168, 2048, 64, 64, 10.1},
    {1, 7168, 2048, 64, 128, 10.3}, {1, 7168, 2048, 64, 32, 11.6}, {1, 32768, 512, 128, 128, 11.7},
    {1, 32768, 512, 64, 128, 11.3}, {1, 32768, 512, 128, 192, 13.1}, {64, 24576, 1536, 128, 192, 18.4},
    {64, 24576, 1536, 64, 128, 17.9}, {64, 24576, 1536, 128, 64, 17.1}, {64, 24576, 1536, 128, 128, 18.9},
    {64, 24576, 1536, 64, 64, 17.3}, {64, 24576, 1536, 64, 192, 17.5}, {64, 576, 7168, 64, 32, 11.6, 2},
    {64, 576, 7168, 64, 16, 10.8, 2}, {64, 576, 7168, 64, 16, 12.4}, {64, 576, 7168, 64, 32, 13.2},
    {64, 4096, 7168, 64, 64, 15.2}, {64, 4096, 7168, 64, 32, 15.4}, {64, 4096, 7168, 64, 128, 18.6},
    {64, 4096, 7168, 64, 16, 20.8}, {64, 7168, 2048, 64, 64, 10.4}, {64, 7168, 2048, 64, 128, 10.8},
    {64, 7168, 2048, 64, 32, 11.6}, {64, 32768, 512, 128, 128, 11.8}, {64, 32768, 512, 64, 128, 11.5},
    {64, 32768, 512, 128, 192, 13.6}, {128, 24576, 1536, 128, 192, 18.8}, {128, 24576, 1536, 64, 128, 17.9},
    {128, 24576, 1536, 128, 64, 18.1}, {128, 24576, 1536, 128, 128, 20.1}, {128, 24576, 1536, 64, 64, 21.6},
    {128, 24576, 1536, 64, 192, 18.8}, {128, 576, 7168, 64, 32, 11.7, 2}, {128, 576, 7168, 64, 16, 15.6, 2},
    {128, 576, 7168, 64, 16, 12.5}, {128, 576, 7168, 64, 32, 13.3}, {128, 4096, 7168, 64, 64, 15.5},
    {128, 4096, 7168, 64, 32, 22.7}, {128, 4096, 7168, 64, 128, 18.7}, {128, 4096, 7168, 64, 16, 36.1},
    {128, 7168, 2048, 64, 64, 11.9}, {128, 7168, 2048, 64, 128, 10.9}, {128, 7168, 2048, 64, 32, 16.8},
    {128, 32768, 512, 128, 128, 12.4}, {128, 32768, 512, 64, 128, 12.4}, {128, 32768, 512, 128, 192, 14.1},
    {128, 2112, 7168, 64, 32, 14.3}, {128, 2112, 7168, 64, 32, 17.7, 2}, {128, 2112, 7168, 128, 32, 14.1, 2},
    {128, 2112, 7168, 64, 64, 14.4, 2}, {128, 2112, 7168, 64, 16, 20.6},
};

TEST(Fp8GemmHeuristic, SplitKAndTheDramShareRankDecodeTiles) {
  const std::vector<Judged> judged = judge_plan(kDecodeSweep, /*match_split=*/true);
  for (const Judged& j : judged)
    expect_within(j, 1.03);
  EXPECT_GE(judged.size(), 15u);
  // What the DRAM share was introduced for: the wide tile no longer wins the DRAM-bound tie at 24576 x 1536.
  const Fp8GemmPlan wide = fp8_gemm_plan(kH200, 24576, 1536);
  for (int64_t m : {1, 16, 64}) EXPECT_EQ(config_at(wide, m).block_n, 64) << m;
}

// The fifteenth session's sweep of the wide tiles (H200, 2026-11-30, at 042c55b; fp8_gemm_test, events with
// L2 flushed, scripts/x-sweep-wide.sh): every warm-up (N, K) at eight M from 768 to 12288, 128x128, 128x160,
// 128x176, 128x192 and 256x128 in CTA pairs sharing A, all in one process per shape.
const Measured kWideSweep[] = {
    {768, 2112, 7168, 128, 128, 25.1}, {768, 2112, 7168, 128, 160, 29.7}, {768, 2112, 7168, 128, 176, 32.1},
    {768, 2112, 7168, 128, 192, 32.6}, {768, 2112, 7168, 256, 128, 43.4}, {1536, 2112, 7168, 128, 128, 44.9},
    {1536, 2112, 7168, 128, 160, 53.3}, {1536, 2112, 7168, 128, 176, 58.7}, {1536, 2112, 7168, 128, 192, 36.0},
    {1536, 2112, 7168, 256, 128, 45.1}, {2304, 2112, 7168, 128, 128, 66.3}, {2304, 2112, 7168, 128, 160, 57.2},
    {2304, 2112, 7168, 128, 176, 59.6}, {2304, 2112, 7168, 128, 192, 62.9}, {2304, 2112, 7168, 256, 128, 84.4},
    {3072, 2112, 7168, 128, 128, 88.4}, {3072, 2112, 7168, 128, 160, 80.7}, {3072, 2112, 7168, 128, 176, 87.4},
    {3072, 2112, 7168, 128, 192, 66.0}, {3072, 2112, 7168, 256, 128, 85.7}, {5120, 2112, 7168, 128, 128, 137.2},
    {5120, 2112, 7168, 128, 160, 136.5}, {5120, 2112, 7168, 128, 176, 118.3}, {5120, 2112, 7168, 128, 192, 125.1},
    {5120, 2112, 7168, 256, 128, 128.5}, {6400, 2112, 7168, 128, 128, 159.1}, {6400, 2112, 7168, 128, 160, 164.9},
    {6400, 2112, 7168, 128, 176, 146.3}, {6400, 2112, 7168, 128, 192, 155.1}, {6400, 2112, 7168, 256, 128, 168.0},
    {8192, 2112, 7168, 128, 128, 204.5}, {8192, 2112, 7168, 128, 160, 195.3}, {8192, 2112, 7168, 128, 176, 175.3},
    {8192, 2112, 7168, 128, 192, 186.3}, {8192, 2112, 7168, 256, 128, 208.9}, {12288, 2112, 7168, 128, 128, 297.0},
    {12288, 2112, 7168, 128, 160, 302.4}, {12288, 2112, 7168, 128, 176, 261.2}, {12288, 2112, 7168, 128, 192, 254.8},
    {12288, 2112, 7168, 256, 128, 292.4}, {768, 4096, 7168, 128, 128, 46.0}, {768, 4096, 7168, 128, 160, 54.0},
    {768, 4096, 7168, 128, 176, 59.3}, {768, 4096, 7168, 128, 192, 36.1}, {768, 4096, 7168, 256, 128, 45.4},
    {1536, 4096, 7168, 128, 128, 67.4}, {1536, 4096, 7168, 128, 160, 81.0}, {1536, 4096, 7168, 128, 176, 88.8},
    {1536, 4096, 7168, 128, 192, 65.7}, {1536, 4096, 7168, 256, 128, 85.2}, {2304, 4096, 7168, 128, 128, 110.3},
    {2304, 4096, 7168, 128, 160, 108.4}, {2304, 4096, 7168, 128, 176, 118.2}, {2304, 4096, 7168, 128, 192, 95.9},
    {2304, 4096, 7168, 256, 128, 127.3}, {3072, 4096, 7168, 128, 128, 133.4}, {3072, 4096, 7168, 128, 160, 135.0},
    {3072, 4096, 7168, 128, 176, 146.8}, {3072, 4096, 7168, 128, 192, 126.8}, {3072, 4096, 7168, 256, 128, 130.0},
    {5120, 4096, 7168, 128, 128, 223.3}, {5120, 4096, 7168, 128, 160, 214.3}, {5120, 4096, 7168, 128, 176, 232.2},
    {5120, 4096, 7168, 128, 192, 217.8}, {5120, 4096, 7168, 256, 128, 212.0}, {6400, 4096, 7168, 128, 128, 287.6},
    {6400, 4096, 7168, 128, 160, 268.4}, {6400, 4096, 7168, 128, 176, 294.0}, {6400, 4096, 7168, 128, 192, 279.0},
    {6400, 4096, 7168, 256, 128, 293.1}, {8192, 4096, 7168, 128, 128, 359.8}, {8192, 4096, 7168, 128, 160, 351.2},
    {8192, 4096, 7168, 128, 176, 354.3}, {8192, 4096, 7168, 128, 192, 343.8}, {8192, 4096, 7168, 256, 128, 338.0},
    {12288, 4096, 7168, 128, 128, 550.4}, {12288, 4096, 7168, 128, 160, 537.8}, {12288, 4096, 7168, 128, 176, 542.9},
    {12288, 4096, 7168, 128, 192, 515.3}, {12288, 4096, 7168, 256, 128, 509.2}, {768, 7168, 2048, 128, 128, 24.8},
    {768, 7168, 2048, 128, 160, 27.7}, {768, 7168, 2048, 128, 176, 24.7}, {768, 7168, 2048, 128, 192, 24.6},
    {768, 7168, 2048, 256, 128, 30.8}, {1536, 7168, 2048, 128, 128, 43.9}, {1536, 7168, 2048, 128, 160, 43.5},
    {1536, 7168, 2048, 128, 176, 41.1}, {1536, 7168, 2048, 128, 192, 43.0}, {1536, 7168, 2048, 256, 128, 42.5},
    {2304, 7168, 2048, 128, 128, 57.5}, {2304, 7168, 2048, 128, 160, 58.8}, {2304, 7168, 2048, 128, 176, 58.3},
    {2304, 7168, 2048, 128, 192, 61.3}, {2304, 7168, 2048, 256, 128, 55.4}, {3072, 7168, 2048, 128, 128, 76.4},
    {3072, 7168, 2048, 128, 160, 74.5}, {3072, 7168, 2048, 128, 176, 75.4}, {3072, 7168, 2048, 128, 192, 71.2},
    {3072, 7168, 2048, 256, 128, 79.2}, {5120, 7168, 2048, 128, 128, 118.2}, {5120, 7168, 2048, 128, 160, 114.6},
    {5120, 7168, 2048, 128, 176, 119.4}, {5120, 7168, 2048, 128, 192, 118.7}, {5120, 7168, 2048, 256, 128, 117.8},
    {6400, 7168, 2048, 128, 128, 150.1}, {6400, 7168, 2048, 128, 160, 145.3}, {6400, 7168, 2048, 128, 176, 145.3},
    {6400, 7168, 2048, 128, 192, 146.9}, {6400, 7168, 2048, 256, 128, 142.6}, {8192, 7168, 2048, 128, 128, 188.7},
    {8192, 7168, 2048, 128, 160, 177.2}, {8192, 7168, 2048, 128, 176, 180.4}, {8192, 7168, 2048, 128, 192, 184.2},
    {8192, 7168, 2048, 256, 128, 179.1}, {12288, 7168, 2048, 128, 128, 277.9}, {12288, 7168, 2048, 128, 160, 263.9},
    {12288, 7168, 2048, 128, 176, 267.9}, {12288, 7168, 2048, 128, 192, 269.2}, {12288, 7168, 2048, 256, 128, 265.2},
    {768, 7168, 16384, 128, 128, 147.5}, {768, 7168, 16384, 128, 160, 174.4}, {768, 7168, 16384, 128, 176, 133.2},
    {768, 7168, 16384, 128, 192, 139.7}, {768, 7168, 16384, 256, 128, 184.1}, {1536, 7168, 16384, 128, 128, 295.0},
    {1536, 7168, 16384, 128, 160, 295.6}, {1536, 7168, 16384, 128, 176, 260.4}, {1536, 7168, 16384, 128, 192, 279.6},
    {1536, 7168, 16384, 256, 128, 276.9}, {2304, 7168, 16384, 128, 128, 409.5}, {2304, 7168, 16384, 128, 160, 421.3},
    {2304, 7168, 16384, 128, 176, 395.3}, {2304, 7168, 16384, 128, 192, 432.0}, {2304, 7168, 16384, 256, 128, 377.8},
    {3072, 7168, 16384, 128, 128, 560.7}, {3072, 7168, 16384, 128, 160, 547.6}, {3072, 7168, 16384, 128, 176, 535.6},
    {3072, 7168, 16384, 128, 192, 519.0}, {3072, 7168, 16384, 256, 128, 562.2}, {5120, 7168, 16384, 128, 128, 918.4},
    {5120, 7168, 16384, 128, 160, 873.2}, {5120, 7168, 16384, 128, 176, 871.0}, {5120, 7168, 16384, 128, 192, 906.9},
    {5120, 7168, 16384, 256, 128, 854.3}, {6400, 7168, 16384, 128, 128, 1168.2},
    {6400, 7168, 16384, 128, 160, 1136.2}, {6400, 7168, 16384, 128, 176, 1143.6},
    {6400, 7168, 16384, 128, 192, 1169.5}, {6400, 7168, 16384, 256, 128, 1049.2},
    {8192, 7168, 16384, 128, 128, 1499.2}, {8192, 7168, 16384, 128, 160, 1404.2},
    {8192, 7168, 16384, 128, 176, 1530.9}, {8192, 7168, 16384, 128, 192, 1536.6},
    {8192, 7168, 16384, 256, 128, 1335.6}, {12288, 7168, 16384, 128, 128, 2296.3},
    {12288, 7168, 16384, 128, 160, 2234.2}, {12288, 7168, 16384, 128, 176, 2267.5},
    {12288, 7168, 16384, 128, 192, 2345.6}, {12288, 7168, 16384, 256, 128, 2011.0},
    {768, 24576, 1536, 128, 128, 51.9}, {768, 24576, 1536, 128, 160, 51.9}, {768, 24576, 1536, 128, 176, 54.4},
    {768, 24576, 1536, 128, 192, 50.6}, {768, 24576, 1536, 256, 128, 53.7}, {1536, 24576, 1536, 128, 128, 99.6},
    {1536, 24576, 1536, 128, 160, 96.1}, {1536, 24576, 1536, 128, 176, 98.4}, {1536, 24576, 1536, 128, 192, 96.8},
    {1536, 24576, 1536, 256, 128, 92.0}, {2304, 24576, 1536, 128, 128, 147.6}, {2304, 24576, 1536, 128, 160, 140.7},
    {2304, 24576, 1536, 128, 176, 148.9}, {2304, 24576, 1536, 128, 192, 142.3}, {2304, 24576, 1536, 256, 128, 141.3},
    {3072, 24576, 1536, 128, 128, 188.0}, {3072, 24576, 1536, 128, 160, 181.0}, {3072, 24576, 1536, 128, 176, 188.5},
    {3072, 24576, 1536, 128, 192, 179.5}, {3072, 24576, 1536, 256, 128, 177.0}, {5120, 24576, 1536, 128, 128, 308.4},
    {5120, 24576, 1536, 128, 160, 298.0}, {5120, 24576, 1536, 128, 176, 309.7}, {5120, 24576, 1536, 128, 192, 294.5},
    {5120, 24576, 1536, 256, 128, 290.7}, {6400, 24576, 1536, 128, 128, 389.9}, {6400, 24576, 1536, 128, 160, 375.2},
    {6400, 24576, 1536, 128, 176, 390.9}, {6400, 24576, 1536, 128, 192, 369.8}, {6400, 24576, 1536, 256, 128, 360.1},
    {8192, 24576, 1536, 128, 128, 495.6}, {8192, 24576, 1536, 128, 160, 476.2}, {8192, 24576, 1536, 128, 176, 492.6},
    {8192, 24576, 1536, 128, 192, 472.8}, {8192, 24576, 1536, 256, 128, 454.8}, {12288, 24576, 1536, 128, 128, 742.2},
    {12288, 24576, 1536, 128, 160, 721.4}, {12288, 24576, 1536, 128, 176, 742.8},
    {12288, 24576, 1536, 128, 192, 706.6}, {12288, 24576, 1536, 256, 128, 679.3}, {768, 32768, 512, 128, 128, 30.1},
    {768, 32768, 512, 128, 160, 30.4}, {768, 32768, 512, 128, 176, 36.8}, {768, 32768, 512, 128, 192, 35.1},
    {768, 32768, 512, 256, 128, 30.2}, {1536, 32768, 512, 128, 128, 56.1}, {1536, 32768, 512, 128, 160, 55.3},
    {1536, 32768, 512, 128, 176, 67.7}, {1536, 32768, 512, 128, 192, 66.0}, {1536, 32768, 512, 256, 128, 51.2},
    {2304, 32768, 512, 128, 128, 81.2}, {2304, 32768, 512, 128, 160, 80.7}, {2304, 32768, 512, 128, 176, 97.8},
    {2304, 32768, 512, 128, 192, 94.1}, {2304, 32768, 512, 256, 128, 76.0}, {3072, 32768, 512, 128, 128, 105.2},
    {3072, 32768, 512, 128, 160, 104.8}, {3072, 32768, 512, 128, 176, 124.7}, {3072, 32768, 512, 128, 192, 121.5},
    {3072, 32768, 512, 256, 128, 98.7}, {5120, 32768, 512, 128, 128, 171.6}, {5120, 32768, 512, 128, 160, 172.1},
    {5120, 32768, 512, 128, 176, 203.6}, {5120, 32768, 512, 128, 192, 198.1}, {5120, 32768, 512, 256, 128, 156.3},
    {6400, 32768, 512, 128, 128, 213.7}, {6400, 32768, 512, 128, 160, 214.6}, {6400, 32768, 512, 128, 176, 254.1},
    {6400, 32768, 512, 128, 192, 249.1}, {6400, 32768, 512, 256, 128, 196.0}, {8192, 32768, 512, 128, 128, 270.4},
    {8192, 32768, 512, 128, 160, 273.7}, {8192, 32768, 512, 128, 176, 320.9}, {8192, 32768, 512, 128, 192, 315.3},
    {8192, 32768, 512, 256, 128, 245.7}, {12288, 32768, 512, 128, 128, 404.6}, {12288, 32768, 512, 128, 160, 411.3},
    {12288, 32768, 512, 128, 176, 479.4}, {12288, 32768, 512, 128, 192, 467.8}, {12288, 32768, 512, 256, 128, 366.2},
    {768, 576, 7168, 128, 128, 23.7}, {768, 576, 7168, 128, 160, 28.6}, {768, 576, 7168, 128, 176, 30.1},
    {768, 576, 7168, 128, 192, 31.5}, {768, 576, 7168, 256, 128, 42.5}, {1536, 576, 7168, 128, 128, 24.3},
    {1536, 576, 7168, 128, 160, 28.6}, {1536, 576, 7168, 128, 176, 30.8}, {1536, 576, 7168, 128, 192, 31.8},
    {1536, 576, 7168, 256, 128, 43.1}, {2304, 576, 7168, 128, 128, 25.2}, {2304, 576, 7168, 128, 160, 29.4},
    {2304, 576, 7168, 128, 176, 31.3}, {2304, 576, 7168, 128, 192, 32.2}, {2304, 576, 7168, 256, 128, 43.4},
    {3072, 576, 7168, 128, 128, 27.2}, {3072, 576, 7168, 128, 160, 29.6}, {3072, 576, 7168, 128, 176, 32.5},
    {3072, 576, 7168, 128, 192, 32.9}, {3072, 576, 7168, 256, 128, 43.8}, {5120, 576, 7168, 128, 128, 50.0},
    {5120, 576, 7168, 128, 160, 56.9}, {5120, 576, 7168, 128, 176, 66.8}, {5120, 576, 7168, 128, 192, 36.4},
    {5120, 576, 7168, 256, 128, 46.1}, {6400, 576, 7168, 128, 128, 51.2}, {6400, 576, 7168, 128, 160, 57.2},
    {6400, 576, 7168, 128, 176, 72.6}, {6400, 576, 7168, 128, 192, 64.0}, {6400, 576, 7168, 256, 128, 83.9},
    {8192, 576, 7168, 128, 128, 72.3}, {8192, 576, 7168, 128, 160, 65.1}, {8192, 576, 7168, 128, 176, 82.8},
    {8192, 576, 7168, 128, 192, 64.9}, {8192, 576, 7168, 256, 128, 85.0}, {12288, 576, 7168, 128, 128, 100.6},
    {12288, 576, 7168, 128, 160, 92.7}, {12288, 576, 7168, 128, 176, 126.6}, {12288, 576, 7168, 128, 192, 97.1},
    {12288, 576, 7168, 256, 128, 125.7},
};
// The same session's check of the plan that offers 128x176 at N = 2112 (scripts/x-176-plan.sh): at an M in
// every range whose tile it changed, the fourteenth session's choice beside the new one, in one process each.
const Measured kWide176[] = {
    {1280, 2112, 7168, 128, 192, 34.2}, {1280, 2112, 7168, 128, 176, 34.0}, {1408, 2112, 7168, 128, 192, 35.1},
    {1408, 2112, 7168, 128, 176, 34.7}, {1600, 2112, 7168, 128, 128, 45.6}, {1600, 2112, 7168, 256, 128, 45.8},
    {1792, 2112, 7168, 128, 128, 46.1}, {1792, 2112, 7168, 256, 128, 46.8}, {2560, 2112, 7168, 128, 192, 63.4},
    {2560, 2112, 7168, 128, 176, 60.3}, {2816, 2112, 7168, 128, 192, 64.3}, {2816, 2112, 7168, 128, 176, 62.5},
    {3200, 2112, 7168, 128, 160, 82.1}, {3200, 2112, 7168, 256, 128, 86.5}, {3584, 2112, 7168, 128, 160, 87.0},
    {3584, 2112, 7168, 256, 128, 87.4}, {4096, 2112, 7168, 128, 192, 95.6}, {4096, 2112, 7168, 128, 176, 90.4},
    {4224, 2112, 7168, 128, 192, 95.4}, {4224, 2112, 7168, 128, 176, 91.2}, {5120, 2112, 7168, 128, 176, 118.6},
    {5120, 2112, 7168, 256, 128, 128.4}, {5632, 2112, 7168, 128, 176, 119.6}, {5632, 2112, 7168, 256, 128, 130.0},
    {6400, 2112, 7168, 128, 128, 162.1}, {6400, 2112, 7168, 128, 176, 146.0}, {6912, 2112, 7168, 128, 128, 163.9},
    {6912, 2112, 7168, 128, 176, 147.4}, {7040, 2112, 7168, 128, 192, 156.4}, {7040, 2112, 7168, 128, 176, 147.7},
    {8192, 2112, 7168, 128, 160, 199.1}, {8192, 2112, 7168, 128, 176, 175.5}, {8448, 2112, 7168, 128, 160, 210.9},
    {8448, 2112, 7168, 128, 176, 175.8}, {9600, 2112, 7168, 128, 128, 229.4}, {9600, 2112, 7168, 128, 176, 203.9},
    {11136, 2112, 7168, 128, 176, 233.7}, {11136, 2112, 7168, 256, 128, 253.2}, {12544, 2112, 7168, 128, 128, 298.8},
    {12544, 2112, 7168, 128, 176, 261.4}, {13056, 2112, 7168, 128, 192, 279.2}, {13056, 2112, 7168, 256, 128, 293.6},
    {14080, 2112, 7168, 128, 192, 308.4}, {14080, 2112, 7168, 128, 176, 291.3}, {15488, 2112, 7168, 128, 128, 378.2},
    {15488, 2112, 7168, 128, 176, 319.8},
};

// 128x176 is a candidate where it divides N, and at ragged N only from K = 4096 (32 K blocks) and N = 2048 on
// (twenty-ninth session): at short K a ragged last column block cost it up to 20 % beyond the model.
bool offered_at(const Measured& s) {
  return s.block_n != 176 || s.n % 176 == 0 || ((s.k + 127) / 128 >= 32 && s.n >= 2048);
}

// At every shape of both tables the plan's tile is within 3 % of the best candidate measured there. Where
// 128x176 divides N (2112) it was 3-17 % faster than the fourteenth session's choice at M >= 2304 (12 of 23
// points), and the plan takes it there.
TEST(Fp8GemmHeuristic, PicksTheWideTilesTheSweepFoundBest) {
  const std::vector<Judged> wide = judge_plan(kWideSweep, false, nullptr, offered_at);
  const std::vector<Judged> at_176 = judge_plan(kWide176, false, nullptr, offered_at);
  EXPECT_EQ(wide.size() + at_176.size(), 77u);  // 54 of the 56 shapes and all 23
  for (const std::vector<Judged>* judged : {&wide, &at_176})
    for (const Judged& j : *judged) expect_within(j, 1.03);
  // The 128x176 kernel at N = 2112 serves most large M.
  const Fp8GemmPlan plan = fp8_gemm_plan(kH200, 2112, 7168);
  for (int64_t m : {4096, 6400, 8192, 9600, 12544}) EXPECT_EQ(config_at(plan, m).block_n, 176) << m;
  // Not where it would leave a ragged tile at short K or little N (24576 x 1536, 32768 x 512, 7168 x 2048, 576 x
  // 7168); at 7168 x 16384 and 4096 x 7168 it serves some ranges (kRagged176Check).
  for (const auto& [n, k] : warmup_shapes()) {
    bool has_176 = false;
    for (const Fp8GemmConfig& c : fp8_gemm_plan(kH200, n, k).kernels) has_176 = has_176 || c.block_n == 176;
    EXPECT_EQ(has_176, n % 176 == 0 || ((k + 127) / 128 >= 32 && n >= 2048)) << n << "x" << k;
  }
}

// The same session's check of the short-K penalty (kShortKWidePenalty; scripts/x-shortk.sh): at 32768 x 512, at
// an M in every range where the plan had 128x192, that tile, the plan's new one and 256x128 pairs (or 128x128).
const Measured kShortK[] = {
    {320, 32768, 512, 128, 192, 19.7}, {320, 32768, 512, 128, 128, 18.8}, {320, 32768, 512, 256, 128, 26.9},
    {384, 32768, 512, 128, 192, 21.0}, {384, 32768, 512, 128, 128, 20.2}, {384, 32768, 512, 256, 128, 24.4},
    {1344, 32768, 512, 128, 192, 60.7}, {1344, 32768, 512, 128, 128, 51.6}, {1344, 32768, 512, 256, 128, 49.8},
    {1408, 32768, 512, 128, 192, 62.3}, {1408, 32768, 512, 128, 128, 52.8}, {1408, 32768, 512, 256, 128, 50.3},
    {1600, 32768, 512, 128, 192, 68.2}, {1600, 32768, 512, 128, 128, 59.3}, {1600, 32768, 512, 256, 128, 57.2},
    {1664, 32768, 512, 128, 192, 70.6}, {1664, 32768, 512, 128, 128, 59.9}, {1664, 32768, 512, 256, 128, 58.0},
    {1856, 32768, 512, 128, 192, 76.6}, {1856, 32768, 512, 128, 160, 64.4}, {1856, 32768, 512, 256, 128, 65.2},
    {1920, 32768, 512, 128, 192, 80.5}, {1920, 32768, 512, 128, 160, 65.7}, {1920, 32768, 512, 256, 128, 65.3},
    {2368, 32768, 512, 128, 192, 99.6}, {2368, 32768, 512, 128, 128, 84.3}, {2368, 32768, 512, 256, 128, 84.5},
    {2432, 32768, 512, 128, 192, 101.2}, {2432, 32768, 512, 128, 128, 84.9}, {2432, 32768, 512, 256, 128, 83.5},
    {2624, 32768, 512, 128, 192, 106.2}, {2624, 32768, 512, 128, 128, 92.4}, {2624, 32768, 512, 256, 128, 90.8},
    {2880, 32768, 512, 128, 192, 115.9}, {2880, 32768, 512, 128, 160, 100.3}, {2880, 32768, 512, 256, 128, 98.4},
    {3136, 32768, 512, 128, 192, 128.9}, {3136, 32768, 512, 128, 160, 109.7}, {3136, 32768, 512, 256, 128, 105.8},
    {3200, 32768, 512, 128, 192, 129.6}, {3200, 32768, 512, 128, 160, 110.1}, {3200, 32768, 512, 256, 128, 106.1},
    {3392, 32768, 512, 128, 192, 137.8}, {3392, 32768, 512, 128, 160, 117.7}, {3392, 32768, 512, 256, 128, 113.4},
    {3456, 32768, 512, 128, 192, 139.9}, {3456, 32768, 512, 128, 160, 119.3}, {3456, 32768, 512, 256, 128, 113.3},
    {3648, 32768, 512, 128, 192, 145.4}, {3648, 32768, 512, 128, 128, 126.6}, {3648, 32768, 512, 256, 128, 120.5},
    {3712, 32768, 512, 128, 192, 146.8}, {3712, 32768, 512, 128, 128, 126.2}, {3712, 32768, 512, 256, 128, 120.4},
};

// At K = 512 the four-stage tiles (128x176, 128x192) are 16-26 % slower than the model without the penalty; with
// it the plan leaves 128x192 at every one of those points, each 3-19 % faster. 256x128 pairs are still 1-5 %
// faster than the plan's 128x128 / 128x160 at M >= 1344 (the model costs their epilogues too high at K = 512; a
// cheaper epilogue constant fixes these but moves decode-sized choices the wrong way: bench/RESULTS.md).
TEST(Fp8GemmHeuristic, ShortKKeepsTheFourStageTilesOut) {
  const std::vector<Judged> judged = judge_plan(kShortK, false);
  EXPECT_EQ(judged.size(), 18u);
  for (const Judged& j : judged) {
    double wide = 0;
    for (const Measured& t : kShortK)
      if (t.m == j.shape->m && t.block_n == 192) wide = t.us;
    EXPECT_LT(j.chosen_us, wide * 0.97) << j.shape->m << ": " << j.chosen;
    expect_within(j, 1.06);
  }
  const Fp8GemmPlan plan = fp8_gemm_plan(kH200, 32768, 512);
  for (int64_t m = 1; m <= 16384; m += 64) EXPECT_LE(config_at(plan, m).block_n, 160) << m;
}

// The sixteenth session's check of the plan-level refit of the cost model (H200, 2026-11-30, scripts/x-fit on
// branch exp/refit-15): at the top M of each of the 80 ranges where either of two candidate fits changed the
// plan, the previous constants' tile and the fits' (the constants now in the heuristic are the fit that held
// every choice at M <= 128), in one process per shape. Every shape of this table, the next and the two above
// with a ragged-M row of a 64- or 128-row tile (90 shapes, 194 times) was measured again, all its tiles in one
// process, by the eighteenth session (H200, 2026-11-30, at 067236d; scripts/x-ragged/remeasure.sh on branch
// exp/ragged-remeasure) after the last m block's A box was cut (kRaggedM below): those rows are the new times.
const Measured kRefitCheck[] = {
    {448, 2112, 7168, 128, 64, 18.8}, {448, 2112, 7168, 64, 128, 18.8}, {512, 2112, 7168, 128, 64, 18.8},
    {512, 2112, 7168, 64, 64, 24.2}, {960, 2112, 7168, 128, 64, 30.9}, {960, 2112, 7168, 64, 128, 31.6},
    {960, 2112, 7168, 128, 160, 29.9}, {1024, 2112, 7168, 128, 64, 31.5}, {1024, 2112, 7168, 128, 160, 30.7},
    {1984, 2112, 7168, 128, 64, 56.4}, {1984, 2112, 7168, 64, 128, 63.1}, {1984, 2112, 7168, 128, 160, 55.2},
    {2048, 2112, 7168, 128, 64, 56.5}, {2048, 2112, 7168, 128, 160, 55.2}, {3968, 2112, 7168, 128, 128, 91.2},
    {3968, 2112, 7168, 128, 176, 89.4}, {4736, 2112, 7168, 128, 128, 113.2}, {4736, 2112, 7168, 128, 160, 115.0},
    {7936, 2112, 7168, 128, 128, 182.6}, {7936, 2112, 7168, 128, 176, 173.6}, {12800, 2112, 7168, 128, 128, 298.5},
    {12800, 2112, 7168, 128, 192, 275.0}, {15872, 2112, 7168, 128, 128, 364.8}, {15872, 2112, 7168, 128, 192, 336.1},
    {64, 24576, 1536, 64, 64, 16.7}, {64, 24576, 1536, 64, 128, 17.5}, {192, 24576, 1536, 128, 192, 22.8},
    {192, 24576, 1536, 64, 128, 23.9}, {1792, 24576, 1536, 128, 192, 111.0}, {1792, 24576, 1536, 256, 128, 110.5},
    {2304, 24576, 1536, 128, 192, 142.2}, {2304, 24576, 1536, 256, 128, 140.7}, {2944, 24576, 1536, 128, 192, 173.5},
    {2944, 24576, 1536, 256, 128, 175.0}, {3456, 24576, 1536, 128, 192, 202.1}, {3456, 24576, 1536, 256, 128, 202.4},
    {3968, 24576, 1536, 128, 192, 228.6}, {3968, 24576, 1536, 256, 128, 229.8}, {4224, 24576, 1536, 128, 192, 248.3},
    {4224, 24576, 1536, 256, 128, 247.6}, {4736, 24576, 1536, 128, 192, 272.5}, {4736, 24576, 1536, 256, 128, 268.9},
    {5248, 24576, 1536, 128, 192, 302.3}, {5248, 24576, 1536, 256, 128, 296.0}, {5760, 24576, 1536, 128, 192, 326.3},
    {5760, 24576, 1536, 256, 128, 323.6}, {6272, 24576, 1536, 128, 192, 359.3}, {6272, 24576, 1536, 256, 128, 358.9},
    {320, 32768, 512, 128, 128, 18.8}, {320, 32768, 512, 64, 128, 19.7}, {2688, 32768, 512, 128, 128, 92.0},
    {2688, 32768, 512, 128, 160, 93.4}, {448, 7168, 16384, 64, 128, 96.5}, {448, 7168, 16384, 256, 128, 95.0},
    {576, 7168, 16384, 64, 128, 142.3}, {576, 7168, 16384, 128, 160, 120.4}, {704, 7168, 16384, 128, 192, 140.0},
    {704, 7168, 16384, 64, 128, 159.3}, {1024, 7168, 16384, 128, 160, 176.4}, {1024, 7168, 16384, 256, 128, 185.2},
    {1408, 7168, 16384, 128, 128, 244.4}, {1408, 7168, 16384, 128, 160, 235.3}, {2560, 7168, 16384, 128, 160, 415.9},
    {2560, 7168, 16384, 128, 192, 419.1}, {2944, 7168, 16384, 128, 128, 511.5}, {2944, 7168, 16384, 128, 160, 478.8},
    {3328, 7168, 16384, 128, 160, 539.6}, {3328, 7168, 16384, 256, 128, 553.1}, {3840, 7168, 16384, 128, 128, 668.5},
    {3840, 7168, 16384, 128, 192, 635.2}, {3968, 7168, 16384, 128, 192, 638.1}, {3968, 7168, 16384, 256, 128, 648.0},
    {4224, 7168, 16384, 128, 128, 731.6}, {4224, 7168, 16384, 128, 192, 710.4}, {4480, 7168, 16384, 128, 160, 776.2},
    {4480, 7168, 16384, 256, 128, 741.4}, {4736, 7168, 16384, 128, 128, 836.8}, {4736, 7168, 16384, 128, 192, 781.9},
    {5632, 7168, 16384, 128, 160, 962.7}, {5632, 7168, 16384, 256, 128, 928.0}, {6016, 7168, 16384, 128, 128, 1052.8},
    {6016, 7168, 16384, 128, 192, 1001.2}, {6144, 7168, 16384, 128, 192, 1005.1},
    {6144, 7168, 16384, 256, 128, 1020.9}, {6528, 7168, 16384, 128, 128, 1165.2},
    {6528, 7168, 16384, 128, 192, 1088.4}, {7808, 7168, 16384, 128, 128, 1376.1},
    {7808, 7168, 16384, 128, 192, 1295.8}, {7936, 7168, 16384, 128, 192, 1295.6},
    {7936, 7168, 16384, 256, 128, 1303.4}, {9728, 7168, 16384, 128, 192, 1599.7},
    {9728, 7168, 16384, 256, 128, 1586.1}, {1920, 4096, 7168, 128, 160, 82.7}, {1920, 4096, 7168, 256, 128, 87.2},
    {2560, 4096, 7168, 128, 128, 111.4}, {2560, 4096, 7168, 128, 160, 108.7}, {4480, 4096, 7168, 128, 160, 185.7},
    {4480, 4096, 7168, 128, 192, 185.6}, {5248, 4096, 7168, 128, 128, 219.6}, {5248, 4096, 7168, 128, 192, 216.4},
    {6784, 4096, 7168, 128, 128, 285.7}, {6784, 4096, 7168, 128, 192, 276.3}, {6912, 4096, 7168, 128, 192, 276.5},
    {6912, 4096, 7168, 256, 128, 290.4}, {9728, 4096, 7168, 128, 160, 414.1}, {9728, 4096, 7168, 256, 128, 412.6},
    {10752, 4096, 7168, 128, 192, 430.0}, {10752, 4096, 7168, 256, 128, 454.1}, {11648, 4096, 7168, 128, 160, 493.5},
    {11648, 4096, 7168, 256, 128, 495.5}, {12672, 4096, 7168, 128, 128, 545.2}, {12672, 4096, 7168, 256, 128, 537.2},
    {13696, 4096, 7168, 128, 128, 593.1}, {13696, 4096, 7168, 128, 192, 557.6}, {13824, 4096, 7168, 128, 192, 555.2},
    {13824, 4096, 7168, 256, 128, 579.2}, {14720, 4096, 7168, 128, 128, 640.6}, {14720, 4096, 7168, 256, 128, 620.6},
    {448, 7168, 2048, 64, 128, 18.2}, {448, 7168, 2048, 256, 128, 19.6}, {576, 7168, 2048, 64, 128, 22.3},
    {576, 7168, 2048, 128, 160, 21.2}, {704, 7168, 2048, 128, 192, 24.2}, {704, 7168, 2048, 64, 128, 25.6},
    {1024, 7168, 2048, 128, 160, 28.7}, {1024, 7168, 2048, 256, 128, 31.3}, {1408, 7168, 2048, 128, 128, 38.4},
    {1408, 7168, 2048, 128, 160, 36.7}, {2560, 7168, 2048, 128, 160, 59.6}, {2560, 7168, 2048, 128, 192, 61.9},
    {2944, 7168, 2048, 128, 128, 71.0}, {2944, 7168, 2048, 128, 160, 67.6}, {3328, 7168, 2048, 128, 160, 75.6},
    {3328, 7168, 2048, 256, 128, 80.2}, {3968, 7168, 2048, 128, 192, 90.4}, {3968, 7168, 2048, 256, 128, 92.2},
    {4480, 7168, 2048, 128, 160, 105.6}, {4480, 7168, 2048, 256, 128, 105.1}, {4736, 7168, 2048, 128, 128, 111.2},
    {4736, 7168, 2048, 128, 192, 109.5}, {5632, 7168, 2048, 128, 160, 128.8}, {5632, 7168, 2048, 256, 128, 129.3},
    {6144, 7168, 2048, 128, 192, 137.1}, {6144, 7168, 2048, 256, 128, 140.9}, {6528, 7168, 2048, 128, 128, 150.1},
    {6528, 7168, 2048, 128, 192, 147.0}, {7936, 7168, 2048, 128, 192, 174.3}, {7936, 7168, 2048, 256, 128, 177.6},
    {9728, 7168, 2048, 128, 192, 211.4}, {9728, 7168, 2048, 256, 128, 213.9}, {1664, 576, 7168, 128, 64, 18.9},
    {1664, 576, 7168, 64, 128, 22.0}, {1792, 576, 7168, 128, 64, 19.4}, {1792, 576, 7168, 64, 64, 24.0},
    {1856, 576, 7168, 64, 64, 23.9}, {1856, 576, 7168, 128, 128, 24.8}, {3712, 576, 7168, 128, 64, 34.7},
    {3712, 576, 7168, 128, 160, 31.2}, {6720, 576, 7168, 128, 64, 66.2}, {6720, 576, 7168, 64, 128, 73.8},
    {6720, 576, 7168, 128, 160, 59.7}, {7424, 576, 7168, 128, 64, 67.3}, {7424, 576, 7168, 128, 160, 59.3},
};

// The same session's second check, at the bottom M of each run of 64-row intervals where the refit changed the
// tile (and the middle of runs longer than 200 rows), 81 shapes: the previous constants' tile, then the refit's.
const Measured kRefitCheckLow[] = {
    {897, 2112, 7168, 128, 64, 31.0}, {897, 2112, 7168, 128, 160, 30.2}, {1921, 2112, 7168, 128, 64, 56.3},
    {1921, 2112, 7168, 128, 160, 55.1}, {3841, 2112, 7168, 128, 128, 92.0}, {3841, 2112, 7168, 128, 176, 91.2},
    {4609, 2112, 7168, 128, 128, 115.4}, {4609, 2112, 7168, 128, 160, 117.6}, {7809, 2112, 7168, 128, 128, 184.3},
    {7809, 2112, 7168, 128, 176, 176.9}, {12673, 2112, 7168, 128, 128, 302.8}, {12673, 2112, 7168, 128, 192, 279.6},
    {15489, 2112, 7168, 128, 128, 377.6}, {15489, 2112, 7168, 128, 192, 342.2}, {15680, 2112, 7168, 128, 128, 372.0},
    {15680, 2112, 7168, 128, 192, 342.8}, {1665, 24576, 1536, 128, 192, 110.0}, {1665, 24576, 1536, 256, 128, 109.6},
    {2177, 24576, 1536, 128, 192, 142.8}, {2177, 24576, 1536, 256, 128, 142.3}, {2817, 24576, 1536, 128, 192, 173.3},
    {2817, 24576, 1536, 256, 128, 175.7}, {3329, 24576, 1536, 128, 192, 202.8}, {3329, 24576, 1536, 256, 128, 203.2},
    {3841, 24576, 1536, 128, 192, 229.9}, {3841, 24576, 1536, 256, 128, 230.4}, {4097, 24576, 1536, 128, 192, 249.2},
    {4097, 24576, 1536, 256, 128, 254.6}, {4481, 24576, 1536, 128, 192, 268.5}, {4481, 24576, 1536, 256, 128, 262.7},
    {4608, 24576, 1536, 128, 192, 265.1}, {4608, 24576, 1536, 256, 128, 260.3}, {5121, 24576, 1536, 128, 192, 307.1},
    {5121, 24576, 1536, 256, 128, 298.8}, {5633, 24576, 1536, 128, 192, 331.4}, {5633, 24576, 1536, 256, 128, 326.0},
    {6145, 24576, 1536, 128, 192, 364.0}, {6145, 24576, 1536, 256, 128, 360.1}, {513, 7168, 16384, 64, 128, 141.2},
    {513, 7168, 16384, 128, 160, 120.0}, {897, 7168, 16384, 128, 160, 177.5}, {897, 7168, 16384, 256, 128, 184.7},
    {1281, 7168, 16384, 128, 128, 247.0}, {1281, 7168, 16384, 128, 160, 239.8}, {2305, 7168, 16384, 128, 160, 424.7},
    {2305, 7168, 16384, 128, 192, 428.3}, {2432, 7168, 16384, 128, 160, 413.2}, {2432, 7168, 16384, 128, 192, 415.3},
    {2817, 7168, 16384, 128, 128, 511.3}, {2817, 7168, 16384, 128, 160, 490.5}, {3201, 7168, 16384, 128, 160, 554.8},
    {3201, 7168, 16384, 256, 128, 561.7}, {3713, 7168, 16384, 128, 128, 670.9}, {3713, 7168, 16384, 128, 192, 656.6},
    {3841, 7168, 16384, 128, 192, 655.5}, {3841, 7168, 16384, 256, 128, 658.6}, {4097, 7168, 16384, 128, 128, 734.7},
    {4097, 7168, 16384, 128, 192, 730.5}, {4353, 7168, 16384, 128, 160, 790.2}, {4353, 7168, 16384, 256, 128, 756.8},
    {4609, 7168, 16384, 128, 128, 838.4}, {4609, 7168, 16384, 128, 192, 827.9}, {5377, 7168, 16384, 128, 160, 934.8},
    {5377, 7168, 16384, 256, 128, 942.8}, {5504, 7168, 16384, 128, 160, 905.0}, {5504, 7168, 16384, 256, 128, 927.5},
    {5889, 7168, 16384, 128, 128, 1067.7}, {5889, 7168, 16384, 128, 192, 1072.5},
    {6017, 7168, 16384, 128, 192, 1034.0}, {6017, 7168, 16384, 256, 128, 1040.0},
    {6401, 7168, 16384, 128, 128, 1166.3}, {6401, 7168, 16384, 128, 192, 1112.6},
    {7681, 7168, 16384, 128, 128, 1399.3}, {7681, 7168, 16384, 128, 192, 1333.8},
    {7809, 7168, 16384, 128, 192, 1332.7}, {7809, 7168, 16384, 256, 128, 1330.6},
    {9473, 7168, 16384, 128, 192, 1639.0}, {9473, 7168, 16384, 256, 128, 1621.5},
    {9600, 7168, 16384, 128, 192, 1583.6}, {9600, 7168, 16384, 256, 128, 1598.5}, {1537, 4096, 7168, 128, 160, 82.0},
    {1537, 4096, 7168, 256, 128, 85.7}, {1728, 4096, 7168, 128, 160, 82.0}, {1728, 4096, 7168, 256, 128, 86.8},
    {2305, 4096, 7168, 128, 128, 110.8}, {2305, 4096, 7168, 128, 160, 109.3}, {2432, 4096, 7168, 128, 128, 110.3},
    {2432, 4096, 7168, 128, 160, 108.2}, {4225, 4096, 7168, 128, 160, 187.6}, {4225, 4096, 7168, 128, 192, 187.9},
    {4352, 4096, 7168, 128, 160, 185.6}, {4352, 4096, 7168, 128, 192, 185.5}, {5121, 4096, 7168, 128, 128, 218.7},
    {5121, 4096, 7168, 128, 192, 219.9}, {6657, 4096, 7168, 128, 128, 282.8}, {6657, 4096, 7168, 128, 192, 281.3},
    {6785, 4096, 7168, 128, 192, 281.5}, {6785, 4096, 7168, 256, 128, 294.0}, {9473, 4096, 7168, 128, 160, 405.0},
    {9473, 4096, 7168, 256, 128, 420.0}, {9600, 4096, 7168, 128, 160, 395.3}, {9600, 4096, 7168, 256, 128, 413.1},
    {10497, 4096, 7168, 128, 192, 441.3}, {10497, 4096, 7168, 256, 128, 462.4}, {10624, 4096, 7168, 128, 192, 429.9},
    {10624, 4096, 7168, 256, 128, 455.4}, {11521, 4096, 7168, 128, 160, 505.1}, {11521, 4096, 7168, 256, 128, 504.2},
    {12545, 4096, 7168, 128, 128, 531.6}, {12545, 4096, 7168, 256, 128, 547.5}, {13569, 4096, 7168, 128, 128, 576.6},
    {13569, 4096, 7168, 128, 192, 571.1}, {13697, 4096, 7168, 128, 192, 570.6}, {13697, 4096, 7168, 256, 128, 590.6},
    {14593, 4096, 7168, 128, 128, 623.0}, {14593, 4096, 7168, 256, 128, 632.8}, {385, 7168, 2048, 64, 128, 18.0},
    {385, 7168, 2048, 256, 128, 19.6}, {513, 7168, 2048, 64, 128, 22.0}, {513, 7168, 2048, 128, 160, 21.3},
    {897, 7168, 2048, 128, 160, 28.6}, {897, 7168, 2048, 256, 128, 30.8}, {1281, 7168, 2048, 128, 128, 38.0},
    {1281, 7168, 2048, 128, 160, 36.7}, {2305, 7168, 2048, 128, 160, 59.4}, {2305, 7168, 2048, 128, 192, 62.0},
    {2432, 7168, 2048, 128, 160, 59.3}, {2432, 7168, 2048, 128, 192, 61.3}, {2817, 7168, 2048, 128, 128, 70.9},
    {2817, 7168, 2048, 128, 160, 67.6}, {3201, 7168, 2048, 128, 160, 75.5}, {3201, 7168, 2048, 256, 128, 79.8},
    {3841, 7168, 2048, 128, 192, 90.9}, {3841, 7168, 2048, 256, 128, 92.6}, {4353, 7168, 2048, 128, 160, 105.9},
    {4353, 7168, 2048, 256, 128, 105.2}, {4609, 7168, 2048, 128, 128, 111.6}, {4609, 7168, 2048, 128, 192, 110.1},
    {5377, 7168, 2048, 128, 160, 123.1}, {5377, 7168, 2048, 256, 128, 129.2}, {5504, 7168, 2048, 128, 160, 121.8},
    {5504, 7168, 2048, 256, 128, 128.6}, {6017, 7168, 2048, 128, 192, 138.6}, {6017, 7168, 2048, 256, 128, 141.3},
    {6401, 7168, 2048, 128, 128, 151.6}, {6401, 7168, 2048, 128, 192, 147.7}, {7809, 7168, 2048, 128, 192, 175.8},
    {7809, 7168, 2048, 256, 128, 178.6}, {9473, 7168, 2048, 128, 192, 213.9}, {9473, 7168, 2048, 256, 128, 215.7},
    {9600, 7168, 2048, 128, 192, 210.8}, {9600, 7168, 2048, 256, 128, 213.1}, {1793, 576, 7168, 64, 64, 24.0},
    {1793, 576, 7168, 128, 128, 25.0}, {3329, 576, 7168, 128, 64, 33.2}, {3329, 576, 7168, 128, 160, 30.7},
    {3520, 576, 7168, 128, 64, 34.8}, {3520, 576, 7168, 128, 160, 30.1}, {6657, 576, 7168, 128, 64, 68.5},
    {6657, 576, 7168, 128, 160, 58.4}, {7040, 576, 7168, 128, 64, 67.1}, {7040, 576, 7168, 128, 160, 61.0},
};

// With the refitted constants the plan's tile is within 3 % of the best one measured at every shape of both
// checks but ten. With the ragged-M rows re-measured after the box cut the summed log loss is 0.33 over the first
// (0.47 with the old rows: 448 x 2112 x 7168's 128x64, 15 % behind 64x128 then, is level with it now; the
// previous constants': 2.72, up to 29 % at 960 x 2112 x 7168, where 128x64 took two rounds) and 0.46 over the
// second (0.34 with the old rows; the previous constants': 3.96, up to 39 % at 897 x 2112 x 7168). The second
// rose because the cut made 128x128 faster at 12545 and 14593 x 4096 x 7168 (M = 1 past a multiple of 256), 1.6
// and 2.9 % ahead of the pairs the plan keeps there, whose box stays whole. The ten misses (within 9 %) are the
// fit's own; refitting the constants to the re-measured tables (planopt.py) moves no choice.
//
// The nineteenth session's refit (kPairsCheck below) moved seven of these shapes to 256x128 pairs, which these
// rows, measured before the two-wave loop made pairs 2.3 % faster against the other tiles, put 4-6 % behind
// (1024 x 7168 x 16384, 1920 x 4096 x 7168, 897 x 7168 x 16384, 1537, 1728, 9473 and 9600 x 4096 x 7168); the
// same day's rows (kPairsCheck) put them 1.6-3.5 % behind. The summed losses rose from 0.33 and 0.46 to 0.38 and
// 0.65 by them. The twenty-fifth session's first-round term took 385 and 448 x 7168 x 2048 (pairs here, 8-9 %
// behind 64x128) to 128x128, which these rows did not measure (kRaggedM did at 448: 18.8 us against the best 18.6,
// and kFirstRoundsCheck at 512), so they are no longer judged here; nor, since the twenty-ninth session, 704 x
// 7168 x 16384 (top) and 2305 and 2432 x 7168 x 16384 (bottom), where the plan takes 128x176 at a ragged N
// (kRagged176Check times them).
TEST(Fp8GemmHeuristic, RefitPicksWhatItsChecksFoundBest) {
  const std::vector<Miss> misses = {
      {1856, 576, 7168, 1.04},  {2560, 7168, 2048, 1.04},  {4480, 7168, 16384, 1.05},
      {5632, 7168, 16384, 1.04}, {1793, 576, 7168, 1.05},   {2305, 7168, 2048, 1.05},
      {2432, 7168, 2048, 1.04}, {4353, 7168, 16384, 1.05}, {1024, 7168, 16384, 1.06}, {1920, 4096, 7168, 1.06},
      {897, 7168, 16384, 1.05}, {1537, 4096, 7168, 1.05},  {1728, 4096, 7168, 1.06},  {9473, 4096, 7168, 1.04},
      {9600, 4096, 7168, 1.05}};
  const std::vector<Judged> top = judge_plan(kRefitCheck, false, nullptr, offered_at);
  const std::vector<Judged> low = judge_plan(kRefitCheckLow, false, nullptr, offered_at);
  EXPECT_EQ(top.size(), 78u);
  EXPECT_EQ(low.size(), 78u);
  EXPECT_LT(expect_within_misses(top, misses), 0.4);
  EXPECT_LT(expect_within_misses(low, misses), 0.7);
}

// The nineteenth session's measurements (H200, 2026-11-30, at eae2482 and later kernels identical to it;
// scripts/x-pairs18 on branch exp/pairs-remeasure), each shape's two tiles in one process: 256x128 pairs
// against the plan's 128-row tile at the 51 interval tops where the model put them within 3 % after the two-wave
// loop (fe62e9b), then the previous constants' tile and the refit's at the bottom (and middle) M of every range
// the first refit moved (68 shapes), then at the ranges the second refit moved that neither had measured, with
// five shapes timed again (a later row replaces an earlier one). At the 43 shapes the older tables also hold,
// pairs' time relative to the other tile fell by a factor of 0.977 (0.964-0.991) while both drifted with the
// machine: the refit scaled the older tables' pairs rows by it (scripts/x-fit/merge19.py on exp/refit-15).
const Measured kPairsCheck[] = {
    {1793, 576, 7168, 64, 64, 23.9}, {1793, 576, 7168, 128, 128, 24.9}, {1792, 2112, 7168, 128, 128, 45.8},
    {1792, 2112, 7168, 256, 128, 45.3}, {3584, 2112, 7168, 128, 160, 86.9}, {3584, 2112, 7168, 256, 128, 85.2},
    {3585, 2112, 7168, 128, 128, 90.4}, {3585, 2112, 7168, 128, 176, 90.6}, {3712, 2112, 7168, 128, 128, 90.8},
    {3712, 2112, 7168, 128, 176, 90.9}, {7681, 2112, 7168, 128, 128, 190.9}, {7681, 2112, 7168, 128, 176, 177.4},
    {13056, 2112, 7168, 128, 192, 282.5}, {13056, 2112, 7168, 256, 128, 291.2}, {1537, 4096, 7168, 128, 160, 81.7},
    {1537, 4096, 7168, 256, 128, 84.6}, {1728, 4096, 7168, 128, 160, 82.4}, {1728, 4096, 7168, 256, 128, 85.2},
    {1920, 4096, 7168, 128, 160, 83.9}, {1920, 4096, 7168, 256, 128, 86.7}, {4736, 4096, 7168, 128, 128, 198.0},
    {4736, 4096, 7168, 256, 128, 209.1}, {5377, 4096, 7168, 128, 128, 238.3}, {5377, 4096, 7168, 256, 128, 247.2},
    {5568, 4096, 7168, 128, 128, 238.4}, {5568, 4096, 7168, 256, 128, 247.5}, {5760, 4096, 7168, 128, 128, 243.3},
    {5760, 4096, 7168, 256, 128, 252.0}, {6401, 4096, 7168, 128, 128, 282.4}, {6401, 4096, 7168, 256, 128, 288.3},
    {6528, 4096, 7168, 128, 128, 281.0}, {6528, 4096, 7168, 256, 128, 288.7}, {6529, 4096, 7168, 128, 128, 286.3},
    {6529, 4096, 7168, 128, 192, 284.8}, {6656, 4096, 7168, 128, 128, 286.3}, {6656, 4096, 7168, 128, 192, 285.5},
    {6657, 4096, 7168, 128, 192, 281.6}, {6657, 4096, 7168, 256, 128, 289.4}, {6784, 4096, 7168, 128, 192, 282.2},
    {6784, 4096, 7168, 256, 128, 289.8}, {6912, 4096, 7168, 128, 192, 284.1}, {6912, 4096, 7168, 256, 128, 292.3},
    {9473, 4096, 7168, 128, 160, 406.8}, {9473, 4096, 7168, 256, 128, 413.4}, {9600, 4096, 7168, 128, 160, 410.8},
    {9600, 4096, 7168, 256, 128, 420.9}, {9728, 4096, 7168, 128, 160, 430.9}, {9728, 4096, 7168, 256, 128, 418.7},
    {10497, 4096, 7168, 128, 192, 444.3}, {10497, 4096, 7168, 256, 128, 456.1}, {10624, 4096, 7168, 128, 192, 441.5},
    {10624, 4096, 7168, 256, 128, 455.8}, {10752, 4096, 7168, 128, 192, 447.6}, {10752, 4096, 7168, 256, 128, 461.4},
    {11521, 4096, 7168, 128, 160, 506.9}, {11521, 4096, 7168, 256, 128, 498.0}, {11648, 4096, 7168, 128, 160, 514.4},
    {11648, 4096, 7168, 256, 128, 503.4}, {13569, 4096, 7168, 128, 192, 572.5}, {13569, 4096, 7168, 256, 128, 582.0},
    {13696, 4096, 7168, 128, 192, 571.4}, {13696, 4096, 7168, 256, 128, 582.8}, {13824, 4096, 7168, 128, 192, 578.1},
    {13824, 4096, 7168, 256, 128, 588.3}, {897, 7168, 2048, 128, 160, 28.7}, {897, 7168, 2048, 256, 128, 30.0},
    {1024, 7168, 2048, 128, 160, 28.5}, {1024, 7168, 2048, 256, 128, 30.6}, {3073, 7168, 2048, 128, 128, 77.4},
    {3073, 7168, 2048, 256, 128, 78.6}, {3200, 7168, 2048, 128, 128, 77.6}, {3200, 7168, 2048, 256, 128, 77.6},
    {3201, 7168, 2048, 128, 160, 76.1}, {3201, 7168, 2048, 256, 128, 78.8}, {3328, 7168, 2048, 128, 160, 74.8},
    {3328, 7168, 2048, 256, 128, 77.7}, {3713, 7168, 2048, 128, 128, 92.0}, {3713, 7168, 2048, 256, 128, 90.9},
    {3840, 7168, 2048, 128, 128, 90.9}, {3840, 7168, 2048, 256, 128, 90.4}, {3841, 7168, 2048, 128, 192, 91.2},
    {3841, 7168, 2048, 256, 128, 91.5}, {3968, 7168, 2048, 128, 192, 90.6}, {3968, 7168, 2048, 256, 128, 90.9},
    {4353, 7168, 2048, 128, 160, 106.5}, {4353, 7168, 2048, 256, 128, 103.5}, {4480, 7168, 2048, 128, 160, 106.4},
    {4480, 7168, 2048, 256, 128, 103.5}, {5377, 7168, 2048, 128, 160, 123.8}, {5377, 7168, 2048, 256, 128, 127.9},
    {5504, 7168, 2048, 128, 160, 123.7}, {5504, 7168, 2048, 256, 128, 128.1}, {5632, 7168, 2048, 128, 160, 130.4},
    {5632, 7168, 2048, 256, 128, 128.1}, {5889, 7168, 2048, 128, 128, 139.4}, {5889, 7168, 2048, 256, 128, 139.5},
    {6017, 7168, 2048, 128, 192, 138.9}, {6017, 7168, 2048, 256, 128, 139.1}, {6144, 7168, 2048, 128, 192, 139.0},
    {6144, 7168, 2048, 256, 128, 139.6}, {7681, 7168, 2048, 128, 128, 180.2}, {7681, 7168, 2048, 256, 128, 175.7},
    {7808, 7168, 2048, 128, 128, 178.6}, {7808, 7168, 2048, 256, 128, 175.6}, {7809, 7168, 2048, 128, 192, 176.5},
    {7809, 7168, 2048, 256, 128, 175.5}, {7936, 7168, 2048, 128, 192, 176.5}, {7936, 7168, 2048, 256, 128, 175.6},
    {9473, 7168, 2048, 128, 192, 214.4}, {9473, 7168, 2048, 256, 128, 211.6}, {9600, 7168, 2048, 128, 192, 215.0},
    {9600, 7168, 2048, 256, 128, 212.2}, {9728, 7168, 2048, 128, 192, 215.4}, {9728, 7168, 2048, 256, 128, 212.6},
    {897, 7168, 16384, 128, 160, 177.7}, {897, 7168, 16384, 256, 128, 180.7}, {1024, 7168, 16384, 128, 160, 181.6},
    {1024, 7168, 16384, 256, 128, 184.6}, {2561, 7168, 16384, 128, 128, 463.0}, {2561, 7168, 16384, 256, 128, 460.0},
    {2688, 7168, 16384, 128, 128, 467.6}, {2688, 7168, 16384, 256, 128, 466.8}, {3073, 7168, 16384, 128, 128, 568.6},
    {3073, 7168, 16384, 256, 128, 551.9}, {3200, 7168, 16384, 128, 128, 573.6}, {3200, 7168, 16384, 256, 128, 558.8},
    {3201, 7168, 16384, 128, 160, 553.7}, {3201, 7168, 16384, 256, 128, 552.8}, {3328, 7168, 16384, 128, 160, 563.0},
    {3328, 7168, 16384, 256, 128, 561.0}, {3713, 7168, 16384, 128, 192, 655.5}, {3713, 7168, 16384, 256, 128, 646.9},
    {3840, 7168, 16384, 128, 192, 659.8}, {3840, 7168, 16384, 256, 128, 648.2}, {3968, 7168, 16384, 128, 192, 667.8},
    {3968, 7168, 16384, 256, 128, 659.6}, {4097, 7168, 16384, 128, 128, 740.6}, {4097, 7168, 16384, 128, 192, 729.3},
    {4353, 7168, 16384, 128, 160, 794.1}, {4353, 7168, 16384, 256, 128, 744.8}, {4480, 7168, 16384, 128, 160, 805.9},
    {4480, 7168, 16384, 256, 128, 759.6}, {5377, 7168, 16384, 128, 160, 935.1}, {5377, 7168, 16384, 256, 128, 927.6},
    {5504, 7168, 16384, 128, 160, 936.0}, {5504, 7168, 16384, 256, 128, 929.9}, {5632, 7168, 16384, 128, 160, 1006.0},
    {5632, 7168, 16384, 256, 128, 943.7}, {5889, 7168, 16384, 128, 192, 1031.5}, {5889, 7168, 16384, 256, 128, 1021.3},
    {6016, 7168, 16384, 128, 192, 1034.8}, {6016, 7168, 16384, 256, 128, 1022.7}, {6144, 7168, 16384, 128, 192, 1050.3},
    {6144, 7168, 16384, 256, 128, 1038.3}, {7681, 7168, 16384, 128, 192, 1338.9}, {7681, 7168, 16384, 256, 128, 1307.8},
    {7808, 7168, 16384, 128, 192, 1343.6}, {7808, 7168, 16384, 256, 128, 1314.9}, {7936, 7168, 16384, 128, 192, 1368.2},
    {7936, 7168, 16384, 256, 128, 1327.0}, {9473, 7168, 16384, 128, 192, 1652.0}, {9473, 7168, 16384, 256, 128, 1597.8},
    {9600, 7168, 16384, 128, 192, 1649.6}, {9600, 7168, 16384, 256, 128, 1599.9}, {9728, 7168, 16384, 128, 192, 1677.2},
    {9728, 7168, 16384, 256, 128, 1617.9}, {1665, 24576, 1536, 128, 192, 110.6}, {1665, 24576, 1536, 256, 128, 107.9},
    {1792, 24576, 1536, 128, 192, 112.6}, {1792, 24576, 1536, 256, 128, 108.8}, {2177, 24576, 1536, 128, 192, 143.3},
    {2177, 24576, 1536, 256, 128, 140.7}, {2432, 24576, 1536, 128, 192, 149.9}, {2432, 24576, 1536, 256, 128, 151.2},
    {2817, 24576, 1536, 128, 192, 174.6}, {2817, 24576, 1536, 256, 128, 173.7}, {2944, 24576, 1536, 128, 192, 176.0},
    {2944, 24576, 1536, 256, 128, 174.2}, {3329, 24576, 1536, 128, 192, 202.6}, {3329, 24576, 1536, 256, 128, 200.5},
    {3456, 24576, 1536, 128, 192, 205.0}, {3456, 24576, 1536, 256, 128, 202.1}, {3841, 24576, 1536, 128, 192, 229.6},
    {3841, 24576, 1536, 256, 128, 228.2}, {3968, 24576, 1536, 128, 192, 233.6}, {3968, 24576, 1536, 256, 128, 230.3},
    {4097, 24576, 1536, 128, 192, 248.1}, {4097, 24576, 1536, 256, 128, 251.7}, {4224, 24576, 1536, 128, 192, 252.6},
    {4224, 24576, 1536, 256, 128, 246.2}, {4481, 24576, 1536, 128, 192, 266.5}, {4481, 24576, 1536, 256, 128, 258.6},
    {4608, 24576, 1536, 128, 192, 269.7}, {4608, 24576, 1536, 256, 128, 258.3}, {4736, 24576, 1536, 128, 192, 279.8},
    {4736, 24576, 1536, 256, 128, 269.2}, {4992, 24576, 1536, 128, 192, 294.4}, {4992, 24576, 1536, 256, 128, 286.8},
    {5121, 24576, 1536, 128, 192, 306.6}, {5121, 24576, 1536, 256, 128, 294.5}, {5248, 24576, 1536, 128, 192, 310.5},
    {5248, 24576, 1536, 256, 128, 297.6}, {5633, 24576, 1536, 128, 192, 330.8}, {5633, 24576, 1536, 256, 128, 322.8},
    {5760, 24576, 1536, 128, 192, 335.9}, {5760, 24576, 1536, 256, 128, 325.5}, {6145, 24576, 1536, 128, 192, 363.7},
    {6145, 24576, 1536, 256, 128, 355.6}, {6272, 24576, 1536, 128, 192, 369.2}, {6272, 24576, 1536, 256, 128, 359.5},
    {129, 32768, 512, 64, 128, 15.0}, {129, 32768, 512, 256, 128, 18.3}, {513, 32768, 512, 128, 128, 26.1},
    {513, 32768, 512, 128, 160, 24.8}, {640, 32768, 512, 128, 128, 26.3}, {640, 32768, 512, 128, 160, 26.1},
    {769, 32768, 512, 128, 128, 33.8}, {769, 32768, 512, 128, 160, 32.6}, {896, 32768, 512, 128, 128, 34.1},
    {896, 32768, 512, 128, 160, 33.9}, {1025, 32768, 512, 128, 128, 44.4}, {1025, 32768, 512, 128, 160, 44.1},
    {1152, 32768, 512, 128, 128, 45.7}, {1152, 32768, 512, 128, 160, 45.1}, {1537, 32768, 512, 128, 128, 59.0},
    {1537, 32768, 512, 256, 128, 56.2}, {1664, 32768, 512, 128, 128, 59.1}, {1664, 32768, 512, 256, 128, 56.6},
    {1793, 32768, 512, 128, 128, 67.3}, {1793, 32768, 512, 128, 160, 64.4}, {1920, 32768, 512, 128, 128, 67.6},
    {1920, 32768, 512, 128, 160, 65.5}, {2305, 32768, 512, 128, 128, 85.0}, {2305, 32768, 512, 256, 128, 81.5},
    {2432, 32768, 512, 128, 128, 84.3}, {2432, 32768, 512, 256, 128, 80.4}, {2561, 32768, 512, 128, 128, 93.1},
    {2561, 32768, 512, 256, 128, 89.2}, {2688, 32768, 512, 128, 128, 92.3}, {2688, 32768, 512, 256, 128, 88.6},
    {2817, 32768, 512, 128, 128, 101.6}, {2817, 32768, 512, 128, 160, 100.9}, {2944, 32768, 512, 128, 128, 102.1},
    {2944, 32768, 512, 128, 160, 101.4}, {3073, 32768, 512, 128, 128, 112.2}, {3073, 32768, 512, 128, 160, 110.3},
    {3200, 32768, 512, 128, 128, 113.1}, {3200, 32768, 512, 128, 160, 111.0}, {3329, 32768, 512, 128, 128, 119.0},
    {3329, 32768, 512, 128, 160, 118.2}, {3456, 32768, 512, 128, 128, 120.0}, {3456, 32768, 512, 128, 160, 119.3},
};

// Against the day's own rows the refitted plan's summed log loss is 1.21 (the previous constants': 1.68); 17
// of the 126 shapes are 3.1-5.0 % behind their best: pairs where 128-row tiles win at N = 4096 (K = 7168), and
// 128x128 or 128x192 where pairs win by 3-5 % at 32768 x 512 and 24576 x 1536, which the model puts level. Three
// shapes are no longer judged: 3073 and 3200 x 7168 x 16384 and 5568 x 4096 x 7168 take 128x176 at a ragged N
// since the twenty-ninth session (kRagged176Check times them).
TEST(Fp8GemmHeuristic, RefitPicksWhatThePairsCheckFoundBest) {
  size_t shapes = 0;
  const std::vector<Judged> judged = judge_plan(kPairsCheck, false, &shapes, offered_at);
  EXPECT_EQ(shapes, 126u);
  EXPECT_EQ(judged.size(), 123u);
  const std::vector<Miss> misses = {
      {1792, 24576, 1536, 1.04}, {4736, 24576, 1536, 1.04}, {5121, 24576, 1536, 1.05}, {5248, 24576, 1536, 1.05},
      {5760, 24576, 1536, 1.04}, {1537, 32768, 512, 1.05},  {1664, 32768, 512, 1.05},  {2305, 32768, 512, 1.05},
      {2432, 32768, 512, 1.05},  {2561, 32768, 512, 1.05},  {2688, 32768, 512, 1.05},  {7936, 7168, 16384, 1.04},
      {1537, 4096, 7168, 1.04},  {1728, 4096, 7168, 1.04},  {1920, 4096, 7168, 1.04},  {5760, 4096, 7168, 1.04},
      {1793, 576, 7168, 1.05}};
  EXPECT_LT(expect_within_misses(judged, misses), 1.25);
}

// The seventeenth session's re-measurement (H200, 2026-11-30, at d2c295d) of the mid-M sweep at the M where the
// last m block of 128-row tiles is partial (160, 448, 960), after that block's A box was cut to its rows
// (fp8_gemm_last_box_rows); one process per shape, five tiles each (256x128 as CTA pairs sharing A), and the
// plan's own tile where it is none of those (160 x 2112 x 7168 64x64, 160 x 24576 x 1536 128x192, 160 x 576 x
// 7168 64x32 split in two: the same session's sweep of the plan's tiles at ragged M). The tables above had
// ragged-M rows measured before the cut, up to 47 % slower (897 x 2112 x 7168 128x64: 49.5 us, 31.0 after); they
// now hold the re-measured ones.
const Measured kRaggedM[] = {
    {160, 2112, 7168, 64, 128, 18.1}, {160, 2112, 7168, 128, 64, 18.0}, {160, 2112, 7168, 128, 128, 24.2},
    {160, 2112, 7168, 128, 160, 28.2}, {160, 2112, 7168, 256, 128, 42.5}, {160, 2112, 7168, 64, 64, 15.1},
    {160, 4096, 7168, 64, 128, 20.3}, {160, 4096, 7168, 128, 64, 18.7}, {160, 4096, 7168, 128, 128, 24.7},
    {160, 4096, 7168, 128, 160, 29.1}, {160, 4096, 7168, 256, 128, 42.8}, {160, 7168, 2048, 64, 128, 14.3},
    {160, 7168, 2048, 128, 64, 14.0}, {160, 7168, 2048, 128, 128, 12.9}, {160, 7168, 2048, 128, 160, 14.2},
    {160, 7168, 2048, 256, 128, 18.6}, {160, 7168, 16384, 64, 128, 68.5}, {160, 7168, 16384, 128, 64, 62.3},
    {160, 7168, 16384, 128, 128, 51.8}, {160, 7168, 16384, 128, 160, 58.3}, {160, 7168, 16384, 256, 128, 89.1},
    {160, 24576, 1536, 64, 128, 23.8}, {160, 24576, 1536, 128, 64, 24.5}, {160, 24576, 1536, 128, 128, 23.1},
    {160, 24576, 1536, 128, 160, 25.2}, {160, 24576, 1536, 256, 128, 28.2}, {160, 24576, 1536, 128, 192, 22.9},
    {160, 32768, 512, 64, 128, 15.1}, {160, 32768, 512, 128, 64, 16.3}, {160, 32768, 512, 128, 128, 15.7},
    {160, 32768, 512, 128, 160, 16.7}, {160, 32768, 512, 256, 128, 17.2}, {160, 576, 7168, 64, 128, 17.6},
    {160, 576, 7168, 128, 64, 17.1}, {160, 576, 7168, 128, 128, 23.4}, {160, 576, 7168, 128, 160, 28.2},
    {160, 576, 7168, 256, 128, 41.8}, {160, 576, 7168, 64, 32, 11.5}, {448, 2112, 7168, 64, 128, 18.8},
    {448, 2112, 7168, 128, 64, 18.7}, {448, 2112, 7168, 128, 128, 24.5}, {448, 2112, 7168, 128, 160, 28.7},
    {448, 2112, 7168, 256, 128, 42.9}, {448, 4096, 7168, 64, 128, 31.3}, {448, 4096, 7168, 128, 64, 30.9},
    {448, 4096, 7168, 128, 128, 27.6}, {448, 4096, 7168, 128, 160, 30.1}, {448, 4096, 7168, 256, 128, 43.6},
    {448, 7168, 2048, 64, 128, 18.6}, {448, 7168, 2048, 128, 64, 21.6}, {448, 7168, 2048, 128, 128, 18.8},
    {448, 7168, 2048, 128, 160, 21.2}, {448, 7168, 2048, 256, 128, 19.7}, {448, 7168, 16384, 64, 128, 98.9},
    {448, 7168, 16384, 128, 64, 124.1}, {448, 7168, 16384, 128, 128, 100.6}, {448, 7168, 16384, 128, 160, 117.6},
    {448, 7168, 16384, 256, 128, 96.6}, {448, 24576, 1536, 64, 128, 40.2}, {448, 24576, 1536, 128, 64, 42.3},
    {448, 24576, 1536, 128, 128, 36.4}, {448, 24576, 1536, 128, 160, 36.1}, {448, 24576, 1536, 256, 128, 36.9},
    {448, 32768, 512, 64, 128, 24.7}, {448, 32768, 512, 128, 64, 25.6}, {448, 32768, 512, 128, 128, 22.3},
    {448, 32768, 512, 128, 160, 23.2}, {448, 32768, 512, 256, 128, 24.9}, {448, 576, 7168, 64, 128, 18.1},
    {448, 576, 7168, 128, 64, 17.5}, {448, 576, 7168, 128, 128, 23.6}, {448, 576, 7168, 128, 160, 28.2},
    {448, 576, 7168, 256, 128, 42.4}, {960, 2112, 7168, 64, 128, 31.7}, {960, 2112, 7168, 128, 64, 31.4},
    {960, 2112, 7168, 128, 128, 44.1}, {960, 2112, 7168, 128, 160, 30.5}, {960, 2112, 7168, 256, 128, 43.7},
    {960, 4096, 7168, 64, 128, 57.5}, {960, 4096, 7168, 128, 64, 56.2}, {960, 4096, 7168, 128, 128, 47.6},
    {960, 4096, 7168, 128, 160, 54.5}, {960, 4096, 7168, 256, 128, 48.2}, {960, 7168, 2048, 64, 128, 33.7},
    {960, 7168, 2048, 128, 64, 33.2}, {960, 7168, 2048, 128, 128, 31.4}, {960, 7168, 2048, 128, 160, 28.8},
    {960, 7168, 2048, 256, 128, 30.7}, {960, 7168, 16384, 64, 128, 220.6}, {960, 7168, 16384, 128, 64, 258.1},
    {960, 7168, 16384, 128, 128, 195.0}, {960, 7168, 16384, 128, 160, 179.5}, {960, 7168, 16384, 256, 128, 186.6},
    {960, 24576, 1536, 64, 128, 75.9}, {960, 24576, 1536, 128, 64, 81.6}, {960, 24576, 1536, 128, 128, 66.3},
    {960, 24576, 1536, 128, 160, 65.0}, {960, 24576, 1536, 256, 128, 63.0}, {960, 32768, 512, 64, 128, 45.8},
    {960, 32768, 512, 128, 64, 44.5}, {960, 32768, 512, 128, 128, 38.1}, {960, 32768, 512, 128, 160, 36.7},
    {960, 32768, 512, 256, 128, 36.9}, {960, 576, 7168, 64, 128, 18.3}, {960, 576, 7168, 128, 64, 17.8},
    {960, 576, 7168, 128, 128, 23.9}, {960, 576, 7168, 128, 160, 28.3}, {960, 576, 7168, 256, 128, 42.5},
};

// The model never charged a partial last m block for TMA's zero fill; with the box cut the device no longer
// pays it either, and the plan's tile is within 3 % of the best measured at 15 of the 17 shapes it could be
// judged at (the sixteenth session's worst miss, 448 x 2112 x 7168 at 15 %, is gone: 128x64 18.7 us, 64x128
// 18.8; 160 x 4096 x 7168 takes 128x64 since kNarrowL2Weight). The misses left then: 256x128 pairs at 448 x 32768 x
// 512 (12 %; 128x128 since kThinPairsPenalty) and at 960 x 7168 x 16384 (below). 160 x 7168 x 2048 and 16384 and 448
// x 7168 x 2048 (a miss before, 6 % over the best) run 128x112 since kFill112, which kFill112Moves timed there, and
// 448 x 24576 x 1536 128x192 since kThinPairsPenalty (on an H100 the fastest there, kThinPairsH100).
TEST(Fp8GemmHeuristic, RaggedMAfterTheLastBoxCut) {
  size_t shapes = 0;
  const std::vector<Judged> judged = judge_plan(kRaggedM, false, &shapes);
  EXPECT_EQ(shapes, 21u);
  EXPECT_EQ(judged.size(), 16u);  // 448 x 576 x 7168's 64x32 was not measured there, nor 128x112 at three, nor 128x192
  // 960 x 7168 x 16384: the nineteenth session's refit runs pairs at 897-1024 (1.7-2.6 % behind 128x160 by that
  // day's rows, 4 % by these).
  EXPECT_LT(expect_within_misses(judged, {{960, 7168, 16384, 1.05}}), 0.35);
  expect_tile_at(fp8_gemm_plan(kH200, 32768, 512), 448, 128, 128);
}

// 128x64 against 64x128 (H200, 2026-11-30, fp8_gemm_test --shape, two passes averaged): at the bottom, middle
// and top M of every run of M where an L2 weight of 0.85 for 128x64 (at any N, K) moved the plan between the
// two, or (2112 x 2048 at 1537..1792) between 128x128 and 256x128 pairs. The weight is kept only where these
// rows found 128x64 faster (kNarrowL2Weight's conditions). The last twelve rows (2560 x 7168 and 16384) time the
// one run the kept weight moves beyond the first grid, measured after it landed.
const Measured kNarrowCheck[] = {
    {2113, 256, 2048, 64, 128, 9.8}, {2113, 256, 2048, 128, 64, 9.7}, {3168, 256, 2048, 64, 128, 10.3},
    {3168, 256, 2048, 128, 64, 10.3}, {4224, 256, 2048, 64, 128, 10.4}, {4224, 256, 2048, 128, 64, 10.6},
    {2113, 256, 3072, 64, 128, 11.7}, {2113, 256, 3072, 128, 64, 11.7}, {3168, 256, 3072, 64, 128, 12.0},
    {3168, 256, 3072, 128, 64, 12.1}, {4224, 256, 3072, 64, 128, 12.1}, {4224, 256, 3072, 128, 64, 12.6},
    {2113, 256, 4096, 64, 128, 13.2}, {2113, 256, 4096, 128, 64, 13.2}, {3168, 256, 4096, 64, 128, 13.6},
    {3168, 256, 4096, 128, 64, 14.1}, {4224, 256, 4096, 64, 128, 14.5}, {4224, 256, 4096, 128, 64, 15.1},
    {2113, 256, 7168, 64, 128, 18.3}, {2113, 256, 7168, 128, 64, 18.0}, {3168, 256, 7168, 64, 128, 19.6},
    {3168, 256, 7168, 128, 64, 20.4}, {4224, 256, 7168, 64, 128, 21.2}, {4224, 256, 7168, 128, 64, 22.4},
    {2113, 256, 16384, 64, 128, 34.0}, {2113, 256, 16384, 128, 64, 34.3}, {3168, 256, 16384, 64, 128, 36.1},
    {3168, 256, 16384, 128, 64, 40.1}, {4224, 256, 16384, 64, 128, 38.0}, {4224, 256, 16384, 128, 64, 46.0},
    {705, 768, 2048, 64, 128, 9.4}, {705, 768, 2048, 128, 64, 9.6}, {1056, 768, 2048, 64, 128, 9.9},
    {1056, 768, 2048, 128, 64, 9.8}, {1408, 768, 2048, 64, 128, 10.1}, {1408, 768, 2048, 128, 64, 10.1},
    {705, 768, 3072, 64, 128, 11.1}, {705, 768, 3072, 128, 64, 11.1}, {1056, 768, 3072, 64, 128, 11.5},
    {1056, 768, 3072, 128, 64, 11.4}, {1408, 768, 3072, 64, 128, 11.8}, {1408, 768, 3072, 128, 64, 11.8},
    {705, 768, 4096, 64, 128, 12.9}, {705, 768, 4096, 128, 64, 12.9}, {1056, 768, 4096, 64, 128, 13.3},
    {1056, 768, 4096, 128, 64, 13.2}, {1408, 768, 4096, 64, 128, 13.4}, {1408, 768, 4096, 128, 64, 13.4},
    {705, 768, 7168, 64, 128, 18.2}, {705, 768, 7168, 128, 64, 17.9}, {1056, 768, 7168, 64, 128, 18.6},
    {1056, 768, 7168, 128, 64, 18.2}, {1408, 768, 7168, 64, 128, 18.9}, {1408, 768, 7168, 128, 64, 18.8},
    {705, 768, 16384, 64, 128, 33.5}, {705, 768, 16384, 128, 64, 32.5}, {1056, 768, 16384, 64, 128, 34.1},
    {1056, 768, 16384, 128, 64, 33.5}, {1408, 768, 16384, 64, 128, 35.0}, {1408, 768, 16384, 128, 64, 36.5},
    {513, 1024, 3072, 64, 128, 11.3}, {513, 1024, 3072, 128, 64, 11.2}, {768, 1024, 3072, 64, 128, 11.7},
    {768, 1024, 3072, 128, 64, 11.5}, {1024, 1024, 3072, 64, 128, 11.8}, {1024, 1024, 3072, 128, 64, 11.6},
    {513, 1024, 4096, 64, 128, 13.2}, {513, 1024, 4096, 128, 64, 13.0}, {768, 1024, 4096, 64, 128, 13.2},
    {768, 1024, 4096, 128, 64, 13.1}, {1024, 1024, 4096, 64, 128, 13.7}, {1024, 1024, 4096, 128, 64, 13.6},
    {513, 1024, 7168, 64, 128, 18.0}, {513, 1024, 7168, 128, 64, 18.0}, {768, 1024, 7168, 64, 128, 18.4},
    {768, 1024, 7168, 128, 64, 17.9}, {1024, 1024, 7168, 64, 128, 18.9}, {1024, 1024, 7168, 128, 64, 18.8},
    {513, 1024, 16384, 64, 128, 33.2}, {513, 1024, 16384, 128, 64, 32.4}, {768, 1024, 16384, 64, 128, 33.7},
    {768, 1024, 16384, 128, 64, 33.4}, {1024, 1024, 16384, 64, 128, 34.8}, {1024, 1024, 16384, 128, 64, 36.8},
    {257, 2048, 3072, 64, 128, 11.6}, {257, 2048, 3072, 128, 64, 11.6}, {384, 2048, 3072, 64, 128, 11.6},
    {384, 2048, 3072, 128, 64, 11.6}, {512, 2048, 3072, 64, 128, 11.9}, {512, 2048, 3072, 128, 64, 12.1},
    {257, 2048, 4096, 64, 128, 13.2}, {257, 2048, 4096, 128, 64, 13.3}, {384, 2048, 4096, 64, 128, 13.4},
    {384, 2048, 4096, 128, 64, 13.3}, {512, 2048, 4096, 64, 128, 13.4}, {512, 2048, 4096, 128, 64, 13.3},
    {257, 2048, 7168, 64, 128, 18.4}, {257, 2048, 7168, 128, 64, 18.1}, {384, 2048, 7168, 64, 128, 18.4},
    {384, 2048, 7168, 128, 64, 18.1}, {512, 2048, 7168, 64, 128, 18.8}, {512, 2048, 7168, 128, 64, 18.8},
    {257, 2048, 16384, 64, 128, 33.8}, {257, 2048, 16384, 128, 64, 33.3}, {384, 2048, 16384, 64, 128, 34.5},
    {384, 2048, 16384, 128, 64, 33.9}, {512, 2048, 16384, 64, 128, 35.0}, {512, 2048, 16384, 128, 64, 34.9},
    {257, 2112, 2048, 64, 128, 9.9}, {257, 2112, 2048, 128, 64, 9.9}, {352, 2112, 2048, 64, 128, 9.9},
    {352, 2112, 2048, 128, 64, 9.9}, {448, 2112, 2048, 64, 128, 9.9}, {448, 2112, 2048, 128, 64, 10.1},
    {1537, 2112, 2048, 128, 128, 18.6}, {1537, 2112, 2048, 256, 128, 19.1}, {1664, 2112, 2048, 128, 128, 18.6},
    {1664, 2112, 2048, 256, 128, 19.2}, {1792, 2112, 2048, 128, 128, 18.7}, {1792, 2112, 2048, 256, 128, 19.4},
    {129, 4096, 2048, 64, 128, 10.1}, {129, 4096, 2048, 128, 64, 10.1}, {192, 4096, 2048, 64, 128, 10.1},
    {192, 4096, 2048, 128, 64, 10.2}, {256, 4096, 2048, 64, 128, 10.4}, {256, 4096, 2048, 128, 64, 10.4},
    {129, 4096, 3072, 64, 128, 11.9}, {129, 4096, 3072, 128, 64, 12.1}, {192, 4096, 3072, 64, 128, 11.9},
    {192, 4096, 3072, 128, 64, 12.0}, {256, 4096, 3072, 64, 128, 12.1}, {256, 4096, 3072, 128, 64, 12.1},
    {129, 4096, 4096, 64, 128, 13.9}, {129, 4096, 4096, 128, 64, 13.8}, {192, 4096, 4096, 64, 128, 13.8},
    {192, 4096, 4096, 128, 64, 13.6}, {256, 4096, 4096, 64, 128, 13.9}, {256, 4096, 4096, 128, 64, 13.7},
    {129, 4096, 7168, 64, 128, 20.2}, {129, 4096, 7168, 128, 64, 18.9}, {192, 4096, 7168, 64, 128, 20.4},
    {192, 4096, 7168, 128, 64, 18.9}, {256, 4096, 7168, 64, 128, 20.4}, {256, 4096, 7168, 128, 64, 18.9},
    {129, 4096, 16384, 64, 128, 37.4}, {129, 4096, 16384, 128, 64, 34.2}, {192, 4096, 16384, 64, 128, 37.5},
    {192, 4096, 16384, 128, 64, 34.4}, {256, 4096, 16384, 64, 128, 37.9}, {256, 4096, 16384, 128, 64, 34.6},
    {193, 2560, 7168, 64, 128, 19.0}, {193, 2560, 7168, 128, 64, 18.3}, {288, 2560, 7168, 64, 128, 19.2},
    {288, 2560, 7168, 128, 64, 18.8}, {384, 2560, 7168, 64, 128, 19.3}, {384, 2560, 7168, 128, 64, 18.8},
    {193, 2560, 16384, 64, 128, 35.2}, {193, 2560, 16384, 128, 64, 33.0}, {288, 2560, 16384, 64, 128, 35.7},
    {288, 2560, 16384, 128, 64, 34.8}, {384, 2560, 16384, 64, 128, 36.4}, {384, 2560, 16384, 128, 64, 35.5},
};

// The plan moves only where 128x64 was measured faster or level: 129..256 x 4096 x K >= 4096 (7-9 % at K =
// 7168 and 16384), 257..512 x 2048 x K >= 4096 and 193..384 x 2560 x K >= 7168 (2-6 %); 256 x K at M >= 2113,
// where A is the operand streamed, and K <= 3072 keep 64x128. Within 3 % of the best at 80 of the 81 shapes
// (summed log loss 0.29); the miss is 705 x 768 x 16384 (128x64 32.5 us against 64x128's 33.5), where N is
// barely above M and the weight does not apply. 2113 x 256 x 2048 and 3072 are 64x96's since the fill tiles
// (kFillMoves timed them: 5.4 and 5.6 % faster than 64x128), so 79 shapes are judged.
TEST(Fp8GemmHeuristic, NarrowTilesWhereBIsStreamed) {
  size_t shapes = 0;
  const std::vector<Judged> judged = judge_plan(kNarrowCheck, false, &shapes);
  EXPECT_EQ(shapes, 81u);
  EXPECT_EQ(judged.size(), 79u);
  EXPECT_LT(expect_within_misses(judged, {{705, 768, 16384, 1.04}}), 0.35);
  const Fp8GemmPlan b_streamed = fp8_gemm_plan(kH200, 4096, 7168);
  for (int64_t m : {129, 192, 256}) expect_tile_at(b_streamed, m, 128, 64);
  const Fp8GemmPlan a_streamed = fp8_gemm_plan(kH200, 256, 16384);
  for (int64_t m : {2113, 4224}) expect_tile_at(a_streamed, m, 64, 128);
}

// The round-wise DRAM term against the one before it (H200, 2026-11-30, fp8_gemm_test --shape, two passes
// averaged): every run of M that the refitted form moved over the N x K grid (N 256..32768, K 512..16384), the
// previous plan's tile against the new one, at the run's top M (and at two M for the decode runs).
const Measured kRoundsCheck[] = {
    {16384, 256, 1024, 256, 128, 15.9}, {16384, 256, 1024, 128, 128, 14.7}, {13568, 2048, 4096, 128, 128, 171.1},
    {13568, 2048, 4096, 128, 192, 166.5}, {15616, 2048, 4096, 128, 128, 197.6}, {15616, 2048, 4096, 256, 128, 191.6},
    {11392, 2048, 7168, 128, 128, 239.0}, {11392, 2048, 7168, 256, 128, 247.9}, {12672, 2048, 7168, 128, 128, 263.1},
    {12672, 2048, 7168, 128, 160, 265.6}, {14720, 2048, 7168, 128, 128, 309.2}, {14720, 2048, 7168, 128, 192, 309.8},
    {13184, 2048, 8192, 128, 128, 325.9}, {13184, 2048, 8192, 128, 192, 323.6}, {3968, 2112, 4096, 128, 128, 56.2},
    {3968, 2112, 4096, 128, 176, 54.7}, {7936, 2112, 4096, 128, 128, 107.9}, {7936, 2112, 4096, 128, 176, 105.3},
    {12800, 2112, 4096, 128, 128, 173.3}, {12800, 2112, 4096, 128, 192, 165.8}, {5888, 2560, 7168, 128, 128, 153.6},
    {5888, 2560, 7168, 128, 192, 156.9}, {7040, 3072, 4096, 128, 128, 128.9}, {7040, 3072, 4096, 128, 192, 129.8},
    {8832, 3072, 7168, 128, 128, 281.2}, {8832, 3072, 7168, 128, 192, 282.3}, {6784, 4096, 4096, 128, 128, 170.1},
    {6784, 4096, 4096, 128, 192, 166.4}, {7808, 4096, 4096, 128, 128, 196.2}, {7808, 4096, 4096, 256, 128, 191.8},
    {12672, 4096, 4096, 128, 128, 312.9}, {12672, 4096, 4096, 256, 128, 308.3}, {10112, 5120, 4096, 128, 128, 304.1},
    {10112, 5120, 4096, 256, 128, 309.0}, {10880, 5120, 4096, 128, 128, 328.9}, {10880, 5120, 4096, 128, 192, 327.7},
    {2944, 5120, 7168, 128, 128, 153.9}, {2944, 5120, 7168, 128, 192, 156.9}, {7040, 6144, 4096, 128, 128, 254.1},
    {7040, 6144, 4096, 128, 192, 254.9}, {6784, 8192, 4096, 128, 128, 340.5}, {6784, 8192, 4096, 128, 192, 329.4},
    {3456, 24576, 512, 128, 160, 90.1}, {3456, 24576, 512, 256, 128, 84.1}, {1, 16384, 512, 64, 128, 8.8},
    {1, 16384, 512, 64, 64, 8.9}, {64, 16384, 512, 64, 128, 8.8}, {64, 16384, 512, 64, 64, 8.8},
    {1, 16384, 2048, 64, 128, 15.4}, {1, 16384, 2048, 64, 64, 15.2}, {64, 16384, 2048, 64, 128, 15.7},
    {64, 16384, 2048, 64, 64, 15.6}, {1, 16384, 7168, 64, 128, 37.5}, {1, 16384, 7168, 64, 64, 37.1},
    {64, 16384, 7168, 64, 128, 38.2}, {64, 16384, 7168, 64, 64, 37.5}, {1, 16384, 16384, 64, 128, 75.8},
    {1, 16384, 16384, 64, 64, 75.7}, {64, 16384, 16384, 64, 128, 76.5}, {64, 16384, 16384, 64, 64, 76.7},
    {1, 24576, 2048, 64, 128, 20.4}, {1, 24576, 2048, 64, 64, 19.6}, {64, 24576, 2048, 64, 128, 21.2},
    {64, 24576, 2048, 64, 64, 20.1}, {1, 24576, 16384, 64, 128, 115.4}, {1, 24576, 16384, 64, 64, 109.1},
    {64, 24576, 16384, 64, 128, 119.2}, {64, 24576, 16384, 64, 64, 111.0}, {1, 32768, 1024, 64, 128, 15.6},
    {1, 32768, 1024, 64, 64, 16.1}, {64, 32768, 1024, 64, 128, 16.1}, {64, 32768, 1024, 64, 64, 16.7},
    {1, 32768, 4096, 64, 128, 40.6}, {1, 32768, 4096, 64, 64, 40.5}, {64, 32768, 4096, 64, 128, 42.0},
    {64, 32768, 4096, 64, 64, 41.2}, {1, 32768, 16384, 64, 128, 142.4}, {1, 32768, 16384, 64, 64, 141.1},
    {64, 32768, 16384, 64, 128, 144.8}, {64, 32768, 16384, 64, 64, 145.1}, {80, 16384, 512, 128, 128, 9.2},
    {80, 16384, 512, 64, 128, 9.4}, {128, 16384, 512, 128, 128, 9.7}, {128, 16384, 512, 64, 128, 9.4},
    {80, 24576, 512, 128, 192, 11.2}, {80, 24576, 512, 64, 128, 10.8}, {128, 24576, 512, 128, 192, 11.4},
    {128, 24576, 512, 64, 128, 10.8}, {128, 24576, 1024, 128, 192, 14.9}, {128, 24576, 1024, 64, 128, 14.6},
    {80, 24576, 2048, 128, 192, 21.6}, {80, 24576, 2048, 64, 128, 20.4}, {128, 24576, 2048, 128, 192, 22.0},
    {128, 24576, 2048, 64, 128, 21.4}, {128, 24576, 1536, 128, 192, 18.6}, {128, 24576, 1536, 64, 128, 17.8},
    {160, 16384, 3072, 256, 128, 29.5}, {160, 16384, 3072, 128, 128, 26.1}, {192, 16384, 3072, 256, 128, 26.9},
    {192, 16384, 3072, 128, 128, 26.1}, {192, 16384, 8192, 256, 128, 57.3}, {192, 16384, 8192, 128, 128, 55.0},
    {192, 32768, 4096, 256, 128, 58.0}, {192, 32768, 4096, 128, 128, 57.8}, {160, 32768, 8192, 256, 128, 118.3},
    {160, 32768, 8192, 128, 128, 108.8}, {256, 16384, 512, 256, 128, 12.4}, {256, 16384, 512, 128, 128, 10.8},
    {320, 6144, 512, 128, 160, 9.4}, {320, 6144, 512, 64, 128, 8.9},
};

// The plan's tile is within 3 % of the best measured at 52 of the 55 shapes (summed log loss 0.22). The misses
// are the form's moves that lost: 64x64 at 1 and 64 x 32768 x 1024 (3-4 % behind 64x128), and 256x128 pairs at
// 11392 x 2048 x 7168 (4 %). The benchmark's decode shape of 24576 x 1536 runs 64x128 at M = 65..128 now.
TEST(Fp8GemmHeuristic, DramByRoundsMovesWhatItsChecksTimed) {
  size_t shapes = 0;
  const std::vector<Judged> judged = judge_plan(kRoundsCheck, false, &shapes);
  EXPECT_EQ(shapes, 55u);
  EXPECT_EQ(judged.size(), 55u);
  EXPECT_LT(expect_within_misses(judged, {{1, 32768, 1024, 1.04}, {64, 32768, 1024, 1.04}, {11392, 2048, 7168, 1.04}}),
            0.3);
  const Fp8GemmPlan wide = fp8_gemm_plan(kH200, 24576, 1536);
  for (int64_t m : {65, 128}) expect_tile_at(wide, m, 64, 128);
}

// The two-wave tiles' first rounds at short K and the column classes' busiest class at long K, against the
// plan before them (H200, 2026-11-30, fp8_gemm_test --shapes, one pass, both tiles of a shape in one process;
// scripts/x-twowave on branch exp/twowave): every run of M the two terms move over the N x K grid (N 256..32768,
// K 512..16384), the previous plan's tile against the new one, at the run's top M and, for runs longer than 512,
// its bottom M (2048 x 4096 at 15361..15488 in a fourth call, on another machine). The 27 shapes whose tile moves to
// 128x160 without the class term (the twenty-eighth session's column map has no classes) were re-timed then, both
// tiles in one call (scripts/x-cmap/list-refit.txt): their 128x160 rows had been timed on the column-class walks,
// up to 18 % slower where a class's share cost a round (10112 x 768 x 4096 63.4 -> 51.2 us).
const Measured kFirstRoundsCheck[] = {
    {8449, 256, 1024, 256, 128, 14.4}, {8449, 256, 1024, 64, 128, 12.5}, {12672, 256, 1024, 256, 128, 15.1},
    {12672, 256, 1024, 64, 128, 13.0}, {12673, 256, 1024, 256, 128, 15.1}, {12673, 256, 1024, 128, 128, 14.3},
    {16320, 256, 1024, 256, 128, 15.7}, {16320, 256, 1024, 128, 128, 15.0}, {8449, 256, 1536, 256, 128, 16.8},
    {8449, 256, 1536, 64, 128, 15.1}, {12224, 256, 1536, 256, 128, 18.0}, {12224, 256, 1536, 64, 128, 16.3},
    {12225, 256, 1536, 256, 128, 18.3}, {12225, 256, 1536, 128, 128, 17.2}, {16384, 256, 1536, 256, 128, 19.2},
    {16384, 256, 1536, 128, 128, 18.9}, {8449, 256, 2048, 256, 128, 19.5}, {8449, 256, 2048, 64, 128, 18.4},
    {11776, 256, 2048, 256, 128, 21.0}, {11776, 256, 2048, 64, 128, 19.3}, {11777, 256, 2048, 256, 128, 20.9},
    {11777, 256, 2048, 128, 128, 20.8}, {16384, 256, 2048, 256, 128, 22.6}, {16384, 256, 2048, 128, 128, 23.1},
    {8449, 256, 3072, 256, 128, 25.2}, {8449, 256, 3072, 128, 128, 26.0}, {16384, 256, 3072, 256, 128, 29.7},
    {16384, 256, 3072, 128, 128, 29.8}, {6337, 512, 512, 256, 128, 11.6}, {6337, 512, 512, 128, 128, 10.3},
    {8448, 512, 512, 256, 128, 12.1}, {8448, 512, 512, 128, 128, 10.3}, {12673, 512, 512, 256, 128, 15.1},
    {12673, 512, 512, 128, 128, 14.2}, {16384, 512, 512, 256, 128, 15.8}, {16384, 512, 512, 128, 128, 14.7},
    {5633, 512, 1024, 256, 128, 14.0}, {5633, 512, 1024, 64, 128, 12.6}, {6336, 512, 1024, 256, 128, 14.3},
    {6336, 512, 1024, 64, 128, 12.6}, {6337, 512, 1024, 256, 128, 14.3}, {6337, 512, 1024, 128, 128, 13.5},
    {8448, 512, 1024, 256, 128, 14.9}, {8448, 512, 1024, 128, 128, 13.8}, {12673, 512, 1024, 256, 128, 20.8},
    {12673, 512, 1024, 128, 128, 20.5}, {16384, 512, 1024, 256, 128, 21.8}, {16384, 512, 1024, 128, 128, 21.6},
    {6080, 512, 1536, 256, 128, 16.8}, {6080, 512, 1536, 64, 128, 15.4}, {6081, 512, 1536, 256, 128, 16.8},
    {6081, 512, 1536, 128, 128, 16.3}, {8448, 512, 1536, 256, 128, 18.0}, {8448, 512, 1536, 128, 128, 17.0},
    {12673, 512, 1536, 256, 128, 26.1}, {12673, 512, 1536, 128, 128, 26.2}, {16384, 512, 1536, 256, 128, 27.6},
    {16384, 512, 1536, 128, 128, 27.7}, {5824, 512, 2048, 256, 128, 19.1}, {5824, 512, 2048, 64, 128, 18.0},
    {5825, 512, 2048, 256, 128, 19.3}, {5825, 512, 2048, 128, 128, 19.3}, {8448, 512, 2048, 256, 128, 21.1},
    {8448, 512, 2048, 128, 128, 20.2}, {5633, 512, 3072, 256, 128, 24.4}, {5633, 512, 3072, 128, 128, 24.7},
    {8448, 512, 3072, 256, 128, 27.3}, {8448, 512, 3072, 128, 128, 26.5}, {4225, 768, 512, 256, 128, 11.1},
    {4225, 768, 512, 128, 128, 10.0}, {5632, 768, 512, 256, 128, 11.8}, {5632, 768, 512, 128, 128, 10.0},
    {10113, 768, 512, 256, 128, 15.2}, {10113, 768, 512, 128, 128, 14.4}, {11264, 768, 512, 256, 128, 15.9},
    {11264, 768, 512, 128, 128, 14.6}, {14081, 768, 512, 256, 128, 18.7}, {14081, 768, 512, 128, 128, 18.2},
    {16384, 768, 512, 256, 128, 19.3}, {16384, 768, 512, 128, 128, 18.8}, {4225, 768, 1024, 256, 128, 13.8},
    {4225, 768, 1024, 128, 128, 13.2}, {5632, 768, 1024, 256, 128, 14.7}, {5632, 768, 1024, 128, 128, 13.7},
    {10113, 768, 1024, 256, 128, 20.6}, {10113, 768, 1024, 128, 128, 20.8}, {11264, 768, 1024, 256, 128, 21.5},
    {11264, 768, 1024, 128, 128, 21.1}, {14081, 768, 1024, 256, 128, 27.1}, {14081, 768, 1024, 128, 192, 27.5},
    {16384, 768, 1024, 256, 128, 27.6}, {16384, 768, 1024, 128, 192, 28.4}, {4225, 768, 1536, 256, 128, 16.5},
    {4225, 768, 1536, 128, 128, 16.2}, {5632, 768, 1536, 256, 128, 17.7}, {5632, 768, 1536, 128, 128, 16.5},
    {10113, 768, 1536, 256, 128, 26.2}, {10113, 768, 1536, 128, 128, 26.7}, {11264, 768, 1536, 256, 128, 27.2},
    {11264, 768, 1536, 128, 128, 27.3}, {14081, 768, 1536, 256, 128, 35.1}, {14081, 768, 1536, 128, 192, 35.7},
    {16384, 768, 1536, 256, 128, 36.1}, {16384, 768, 1536, 128, 192, 36.6}, {4225, 768, 2048, 256, 128, 19.1},
    {4225, 768, 2048, 128, 128, 19.0}, {5632, 768, 2048, 256, 128, 20.6}, {5632, 768, 2048, 128, 128, 19.4},
    {128, 768, 3072, 64, 32, 8.5}, {128, 768, 3072, 64, 32, 8.7, 2}, {4225, 768, 3072, 256, 128, 24.3},
    {4225, 768, 3072, 128, 128, 24.5}, {5632, 768, 3072, 256, 128, 26.5}, {5632, 768, 3072, 128, 128, 25.6},
    {10113, 768, 3072, 256, 128, 42.8}, {10113, 768, 3072, 128, 128, 43.8}, {11264, 768, 3072, 256, 128, 44.1},
    {11264, 768, 3072, 128, 128, 44.6}, {14081, 768, 3072, 256, 128, 59.7}, {14081, 768, 3072, 128, 192, 60.1},
    {16384, 768, 3072, 256, 128, 60.8}, {16384, 768, 3072, 128, 192, 61.5}, {10112, 768, 4096, 128, 160, 51.2},
    {10112, 768, 4096, 128, 128, 55.1}, {13440, 768, 4096, 128, 160, 66.3}, {13440, 768, 4096, 128, 128, 68.8},
    {10112, 768, 7168, 128, 160, 105.6}, {10112, 768, 7168, 128, 128, 91.4}, {13440, 768, 7168, 128, 160, 113.8},
    {13440, 768, 7168, 128, 128, 118.1}, {10112, 768, 8192, 128, 160, 119.7}, {10112, 768, 8192, 128, 128, 104.1},
    {13440, 768, 8192, 128, 160, 129.2}, {13440, 768, 8192, 128, 128, 133.8}, {10112, 768, 16384, 128, 160, 228.8},
    {10112, 768, 16384, 128, 128, 215.7}, {13440, 768, 16384, 128, 160, 253.2}, {13440, 768, 16384, 128, 128, 259.6},
    {3137, 1024, 512, 256, 128, 11.1}, {3137, 1024, 512, 128, 128, 10.2}, {4096, 1024, 512, 256, 128, 11.7},
    {4096, 1024, 512, 128, 128, 10.2}, {7169, 1024, 512, 256, 128, 15.0}, {7169, 1024, 512, 128, 128, 14.3},
    {8448, 1024, 512, 256, 128, 15.6}, {8448, 1024, 512, 128, 128, 14.3}, {3136, 1024, 1024, 256, 128, 13.8},
    {3136, 1024, 1024, 64, 128, 12.5}, {3137, 1024, 1024, 256, 128, 13.9}, {3137, 1024, 1024, 128, 128, 13.2},
    {4096, 1024, 1024, 256, 128, 14.4}, {4096, 1024, 1024, 128, 128, 13.6}, {3008, 1024, 1536, 256, 128, 16.4},
    {3008, 1024, 1536, 64, 128, 15.4}, {3009, 1024, 1536, 256, 128, 16.2}, {3009, 1024, 1536, 128, 128, 15.9},
    {4096, 1024, 1536, 256, 128, 17.3}, {4096, 1024, 1536, 128, 128, 16.2}, {2880, 1024, 2048, 256, 128, 19.1},
    {2880, 1024, 2048, 64, 128, 18.0}, {2881, 1024, 2048, 256, 128, 18.8}, {2881, 1024, 2048, 128, 128, 18.9},
    {4096, 1024, 2048, 256, 128, 20.0}, {4096, 1024, 2048, 128, 128, 19.5}, {2817, 1024, 3072, 256, 128, 24.0},
    {2817, 1024, 3072, 128, 128, 24.1}, {4096, 1024, 3072, 256, 128, 25.6}, {4096, 1024, 3072, 128, 128, 25.0},
    {2113, 1536, 512, 256, 128, 10.8}, {2113, 1536, 512, 128, 128, 9.9}, {2816, 1536, 512, 256, 128, 11.6},
    {2816, 1536, 512, 128, 128, 10.1}, {4993, 1536, 512, 256, 128, 14.7}, {4993, 1536, 512, 128, 128, 14.1},
    {5632, 1536, 512, 256, 128, 15.0}, {5632, 1536, 512, 128, 128, 14.3}, {10496, 1536, 512, 256, 128, 22.0},
    {10496, 1536, 512, 128, 192, 21.9}, {2112, 1536, 1024, 256, 128, 13.6}, {2112, 1536, 1024, 64, 128, 12.4},
    {2113, 1536, 1024, 256, 128, 13.6}, {2113, 1536, 1024, 128, 128, 13.2}, {2816, 1536, 1024, 256, 128, 14.3},
    {2816, 1536, 1024, 128, 128, 13.2}, {2049, 1536, 1536, 256, 128, 16.1}, {2049, 1536, 1536, 128, 128, 16.0},
    {2816, 1536, 1536, 256, 128, 17.1}, {2816, 1536, 1536, 128, 128, 16.0}, {2049, 1536, 2048, 256, 128, 18.6},
    {2049, 1536, 2048, 128, 128, 18.5}, {2816, 1536, 2048, 256, 128, 19.7}, {2816, 1536, 2048, 128, 128, 19.0},
    {2049, 1536, 3072, 256, 128, 24.1}, {2049, 1536, 3072, 128, 128, 23.9}, {2816, 1536, 3072, 256, 128, 25.6},
    {2816, 1536, 3072, 128, 128, 24.7}, {2048, 2048, 512, 256, 128, 11.5}, {2048, 2048, 512, 128, 128, 10.1},
    {4096, 2048, 512, 256, 128, 15.1}, {4096, 2048, 512, 128, 128, 14.4}, {2048, 2048, 1024, 256, 128, 14.0},
    {2048, 2048, 1024, 128, 128, 13.2}, {2048, 2048, 1536, 256, 128, 16.9}, {2048, 2048, 1536, 128, 128, 16.0},
    {2048, 2048, 2048, 256, 128, 19.8}, {2048, 2048, 2048, 128, 128, 19.0}, {2048, 2048, 3072, 256, 128, 25.2},
    {2048, 2048, 3072, 128, 128, 24.5}, {11648, 2048, 4096, 128, 160, 144.5}, {11648, 2048, 4096, 256, 128, 147.9},
    {12928, 2048, 4096, 128, 160, 167.2}, {12928, 2048, 4096, 128, 128, 170.2}, {12928, 2048, 7168, 128, 160, 276.1},
    {12928, 2048, 7168, 128, 128, 299.7}, {12928, 2048, 8192, 128, 160, 317.2}, {12928, 2048, 8192, 128, 128, 340.5},
    {12928, 2048, 16384, 128, 160, 655.5}, {12928, 2048, 16384, 128, 128, 660.8}, {1792, 2112, 512, 256, 128, 11.2},
    {1792, 2112, 512, 128, 128, 10.0}, {7424, 2112, 512, 256, 128, 21.8}, {7424, 2112, 512, 128, 192, 22.0},
    {1792, 2112, 1024, 256, 128, 13.8}, {1792, 2112, 1024, 128, 128, 13.2}, {448, 2112, 1536, 128, 64, 9.2},
    {448, 2112, 1536, 64, 128, 9.0}, {1792, 2112, 1536, 256, 128, 16.6}, {1792, 2112, 1536, 128, 128, 15.7},
    {1536, 2560, 512, 256, 128, 11.3}, {1536, 2560, 512, 128, 128, 10.0}, {3328, 2560, 512, 256, 128, 15.1},
    {3328, 2560, 512, 128, 128, 14.2}, {1216, 2560, 1024, 256, 128, 13.4}, {1216, 2560, 1024, 64, 128, 12.3},
    {1536, 2560, 1024, 256, 128, 13.9}, {1536, 2560, 1024, 128, 128, 13.0}, {1536, 2560, 1536, 256, 128, 16.8},
    {1536, 2560, 1536, 128, 128, 15.9}, {1536, 2560, 2048, 256, 128, 19.5}, {1536, 2560, 2048, 128, 128, 18.6},
    {1536, 2560, 3072, 256, 128, 24.8}, {1536, 2560, 3072, 128, 128, 24.3}, {1280, 3072, 512, 256, 128, 11.4},
    {1280, 3072, 512, 128, 128, 10.0}, {2816, 3072, 512, 256, 128, 15.1}, {2816, 3072, 512, 128, 128, 14.2},
    {5248, 3072, 512, 256, 128, 21.7}, {5248, 3072, 512, 128, 192, 21.2}, {1280, 3072, 1024, 256, 128, 14.0},
    {1280, 3072, 1024, 128, 128, 13.0}, {1280, 3072, 1536, 256, 128, 16.8}, {1280, 3072, 1536, 128, 128, 15.9},
    {1280, 3072, 2048, 256, 128, 19.4}, {1280, 3072, 2048, 128, 128, 18.7}, {1280, 3072, 3072, 256, 128, 24.9},
    {1280, 3072, 3072, 128, 128, 24.4}, {1024, 4096, 512, 256, 128, 11.6}, {1024, 4096, 512, 128, 128, 10.2},
    {2048, 4096, 512, 256, 128, 15.3}, {2048, 4096, 512, 128, 128, 14.5}, {1024, 4096, 1024, 256, 128, 14.5},
    {1024, 4096, 1024, 128, 128, 13.3}, {1024, 4096, 1536, 256, 128, 17.4}, {1024, 4096, 1536, 128, 128, 16.2},
    {1024, 4096, 2048, 256, 128, 20.0}, {1024, 4096, 2048, 128, 128, 19.2}, {1024, 4096, 3072, 256, 128, 25.5},
    {1024, 4096, 3072, 128, 128, 24.9}, {9728, 4096, 4096, 128, 160, 238.7}, {9728, 4096, 4096, 256, 128, 243.9},
    {11648, 4096, 4096, 128, 160, 286.4}, {11648, 4096, 4096, 256, 128, 292.0}, {3456, 6144, 4096, 128, 160, 129.3},
    {3456, 6144, 4096, 128, 128, 133.7}, {3456, 6144, 7168, 128, 160, 220.2}, {3456, 6144, 7168, 128, 192, 225.6},
    {3456, 6144, 8192, 128, 160, 250.6}, {3456, 6144, 8192, 128, 192, 257.0}, {3456, 6144, 16384, 128, 160, 510.9},
    {3456, 6144, 16384, 128, 192, 519.3}, {512, 7168, 512, 256, 128, 11.3}, {512, 7168, 512, 128, 128, 10.4},
    {448, 7168, 1024, 256, 128, 14.0}, {448, 7168, 1024, 64, 128, 12.4}, {512, 7168, 1024, 256, 128, 14.2},
    {512, 7168, 1024, 128, 128, 13.4}, {512, 7168, 1536, 256, 128, 16.8}, {512, 7168, 1536, 128, 128, 16.4},
    {512, 7168, 2048, 256, 128, 19.4}, {512, 7168, 2048, 128, 128, 18.9}, {512, 7168, 3072, 256, 128, 24.6},
    {512, 7168, 3072, 128, 128, 24.6}, {4480, 7168, 4096, 128, 160, 192.1}, {4480, 7168, 4096, 256, 128, 194.9},
    {5632, 7168, 4096, 128, 160, 239.8}, {5632, 7168, 4096, 256, 128, 243.1}, {512, 8192, 512, 256, 128, 11.8},
    {512, 8192, 512, 128, 128, 10.5}, {1024, 8192, 512, 256, 128, 15.3}, {1024, 8192, 512, 128, 128, 14.2},
    {512, 8192, 1024, 256, 128, 14.6}, {512, 8192, 1024, 128, 128, 13.7}, {512, 8192, 1536, 256, 128, 17.4},
    {512, 8192, 1536, 128, 128, 16.5}, {512, 8192, 2048, 256, 128, 20.8}, {512, 8192, 2048, 128, 128, 19.6},
    {512, 8192, 3072, 256, 128, 25.8}, {512, 8192, 3072, 128, 128, 25.7}, {2176, 12288, 4096, 128, 160, 162.1},
    {2176, 12288, 4096, 128, 128, 171.8}, {3456, 12288, 4096, 128, 160, 256.2}, {3456, 12288, 4096, 128, 128, 264.4},
    {2176, 12288, 7168, 128, 160, 277.6}, {2176, 12288, 7168, 128, 128, 291.2}, {3456, 12288, 7168, 128, 160, 448.1},
    {3456, 12288, 7168, 128, 192, 455.4}, {2176, 12288, 8192, 128, 160, 316.8}, {2176, 12288, 8192, 128, 128, 333.5},
    {3456, 12288, 8192, 128, 160, 513.8}, {3456, 12288, 8192, 128, 192, 521.3}, {2176, 12288, 16384, 128, 160, 649.2},
    {2176, 12288, 16384, 128, 192, 668.7}, {3456, 12288, 16384, 128, 160, 1051.0},
    {3456, 12288, 16384, 128, 192, 1070.2}, {512, 16384, 512, 256, 128, 16.2}, {512, 16384, 512, 128, 128, 14.8},
    {128, 16384, 1024, 128, 128, 11.9}, {128, 16384, 1024, 64, 128, 11.7}, {192, 16384, 1024, 256, 128, 15.1},
    {192, 16384, 1024, 64, 128, 13.9}, {256, 16384, 1024, 256, 128, 15.3}, {256, 16384, 1024, 128, 128, 14.5},
    {512, 16384, 1024, 256, 128, 22.0}, {512, 16384, 1024, 128, 128, 21.2}, {256, 16384, 1536, 256, 128, 18.4},
    {256, 16384, 1536, 128, 128, 17.6}, {256, 16384, 2048, 256, 128, 20.9}, {256, 16384, 2048, 128, 128, 20.6},
    {256, 16384, 3072, 256, 128, 26.9}, {256, 16384, 3072, 128, 128, 26.9}, {256, 32768, 512, 256, 128, 17.2},
    {256, 32768, 512, 128, 128, 16.4}, {192, 32768, 1024, 256, 128, 22.8}, {192, 32768, 1024, 64, 128, 22.4},
    {256, 32768, 1024, 256, 128, 23.7}, {256, 32768, 1024, 128, 128, 23.2}, {256, 32768, 1536, 256, 128, 29.3},
    {256, 32768, 1536, 128, 128, 29.4}, {192, 32768, 2048, 256, 128, 34.4}, {192, 32768, 2048, 128, 128, 34.6},
    {640, 32768, 7168, 128, 160, 214.3}, {640, 32768, 7168, 128, 128, 217.5}, {896, 32768, 7168, 128, 160, 304.8},
    {896, 32768, 7168, 128, 128, 321.6}, {640, 32768, 8192, 128, 160, 244.2}, {640, 32768, 8192, 128, 128, 248.2},
    {896, 32768, 8192, 128, 160, 352.2}, {896, 32768, 8192, 128, 128, 352.4}, {640, 32768, 16384, 128, 160, 490.4},
    {640, 32768, 16384, 128, 192, 503.8}, {896, 32768, 16384, 128, 160, 706.8}, {896, 32768, 16384, 128, 128, 733.0},
    {15361, 2048, 4096, 128, 160, 191.8}, {15361, 2048, 4096, 256, 128, 195.2}, {15488, 2048, 4096, 128, 160, 191.4},
    {15488, 2048, 4096, 256, 128, 195.4},
};

// The plan's tile is within 3 % of the best at 179 of the 180 shapes judged (summed log loss 0.29; with the
// class term, on the re-timed rows, 1.33; when the terms were fitted 0.42, where the plan before them had 8.7).
// The miss is a move that lost: 8449 x 256 x 3072 (pairs to 128x128, 3.2 %). Since the bounded forced drop,
// 10112 x 768 x K >= 7168 runs pairs, which this table did not time (kForcedDropCheck did: 6-8 % ahead of
// 128x128 there), so 180 of the 183 shapes are judged. Since the fill tiles nine more are 128x96's, which this
// table did not time (kFillMoves did: 8449 x 256 x K, the miss among them, 3-14 % faster than the tile before;
// 14081 x 768 x 512, 3008 and 3009 x 1024 x 1536, 2880 and 2881 x 1024 x 2048 3-9 %): 171 are judged. Since
// kFill112 three more are 128x112's (512 x 7168 x 1536, 2048 and 3072; kFill112Moves timed them): 168.
TEST(Fp8GemmHeuristic, FirstRoundsMovesWhatItsChecksTimed) {
  size_t shapes = 0;
  const std::vector<Judged> judged = judge_plan(kFirstRoundsCheck, true, &shapes);
  EXPECT_EQ(shapes, 183u);
  EXPECT_EQ(judged.size(), 168u);
  EXPECT_LT(expect_within_misses(judged, {{8449, 256, 3072, 1.04}}), 0.32);
  // The warm-up shapes' moves: one m block more than a round of pairs at 7168 x 2048 (128x112 there since kFill112,
  // 112 columns filling the SMs 128 would leave idle) and 32768 x 512.
  for (int64_t m : {385, 512}) expect_tile_at(fp8_gemm_plan(kH200, 7168, 2048), m, 128, 112);
  for (int64_t m : {193, 256}) expect_tile_at(fp8_gemm_plan(kH200, 32768, 512), m, 128, 128);
}

// Column-mapped tiles (the one-wave tiles whose B scale would switch at more than two columns if tiles were
// contiguous: 96, 112, 144, 160, 176) take their columns by the column map: BLOCK_N's set bits as pieces, piece
// j of tile t at O_j T + P_j t. Over T tiles the map must hit every column of [0, BLOCK_N T) exactly once (so
// every column of N is computed and stored once), no piece may straddle one of B's 128-column scale blocks, B's
// boxes (piece 0's, piece 1's, then the narrowest piece's rows) must lie inside one piece, and the slot must hold
// every piece's scale.
TEST(Fp8GemmHeuristic, ColumnMapCoversEveryColumnOnceAndNoPieceStraddlesAScaleBlock) {
  using kernels::fp8_gemm_column_map;
  using kernels::fp8_gemm_map_column;
  using kernels::fp8_gemm_map_piece_cols;
  using kernels::fp8_gemm_map_piece_first;
  using kernels::fp8_gemm_map_piece_of;
  using kernels::fp8_gemm_map_pieces;
  EXPECT_EQ(fp8_gemm_map_pieces(160), 2u);
  EXPECT_EQ(fp8_gemm_map_piece_cols(160, 0), 128u);
  EXPECT_EQ(fp8_gemm_map_piece_cols(160, 1), 32u);
  EXPECT_EQ(fp8_gemm_map_pieces(176), 3u);
  EXPECT_EQ(fp8_gemm_map_piece_first(176, 2), 160u);
  EXPECT_EQ(fp8_gemm_map_pieces(112), 3u);
  EXPECT_EQ(fp8_gemm_map_piece_cols(112, 0), 64u);
  EXPECT_EQ(fp8_gemm_map_pieces(240), 4u);
  EXPECT_EQ(fp8_gemm_map_piece_of(176, 159), 1u);
  EXPECT_EQ(fp8_gemm_map_piece_of(176, 160), 2u);
  // 160-wide tiles over N = 4096 (T = 26): tile 3 is columns 384..511, then 3328 + 96..127.
  EXPECT_EQ(fp8_gemm_map_column(160, 26, 3, 0), 384u);
  EXPECT_EQ(fp8_gemm_map_column(160, 26, 3, 127), 511u);
  EXPECT_EQ(fp8_gemm_map_column(160, 26, 3, 128), 26u * 128 + 3 * 32);
  EXPECT_TRUE(fp8_gemm_column_map(128, 160, 2, false));
  EXPECT_TRUE(fp8_gemm_column_map(64, 176, 1, false));
  EXPECT_FALSE(fp8_gemm_column_map(128, 160, 2, true));  // the accumulating form scales B per row
  EXPECT_FALSE(fp8_gemm_column_map(256, 96, 2, false));  // two waves: the switch chosen per slice
  EXPECT_FALSE(fp8_gemm_column_map(128, 192, 2, false));  // two switch columns: chosen per slice
  EXPECT_FALSE(fp8_gemm_column_map(128, 128, 2, false));  // uniform
  EXPECT_FALSE(fp8_gemm_column_map(64, 64, 1, false));
  int mapped = 0;
  for (uint32_t block_n = 16; block_n <= 240; block_n += 16) {
    if (!fp8_gemm_column_map(128, block_n, 2, false)) continue;
    ++mapped;
    const uint32_t pieces = fp8_gemm_map_pieces(block_n);
    EXPECT_LE(pieces, 4u);
    EXPECT_GE(kernels::fp8_gemm_layout(128, block_n, 1, true).sfb_stage_bytes, 4 * pieces) << block_n;
    // B's boxes: piece 0 whole or halved for a pair, piece 1 whole, then boxes of the narrowest piece.
    const uint32_t box = kernels::fp8_gemm_map_narrow_box_rows(block_n);
    EXPECT_EQ(box, fp8_gemm_map_piece_cols(block_n, pieces - 1));
    for (uint32_t cluster_m : {1u, 2u}) {
      const uint32_t big = kernels::fp8_gemm_map_big_box_rows(block_n, cluster_m);
      EXPECT_EQ(big * cluster_m, fp8_gemm_map_piece_cols(block_n, 0));
      EXPECT_EQ(big % 8, 0u);  // whole swizzle atoms
    }
    for (uint32_t tiles = 1; tiles <= 70; ++tiles) {
      std::vector<int> hits(block_n * tiles, 0);
      for (uint32_t t = 0; t < tiles; ++t)
        for (uint32_t c = 0; c < block_n; ++c) {
          const uint32_t col = fp8_gemm_map_column(block_n, tiles, t, c);
          ASSERT_LT(col, block_n * tiles) << block_n << " T " << tiles << " tile " << t << " column " << c;
          ++hits[col];
          const uint32_t j = fp8_gemm_map_piece_of(block_n, c);
          const uint32_t first = fp8_gemm_map_column(block_n, tiles, t, fp8_gemm_map_piece_first(block_n, j));
          // Contiguous inside the piece, and the piece inside one scale block.
          EXPECT_EQ(col, first + c - fp8_gemm_map_piece_first(block_n, j));
          EXPECT_EQ(col / 128, first / 128) << block_n << " T " << tiles << " tile " << t << " column " << c;
          // The narrow box holding column c of pieces 2 and 3 lies inside that piece.
          if (j > 1) EXPECT_EQ(fp8_gemm_map_piece_of(block_n, c / box * box), j);
        }
      for (uint32_t col = 0; col < block_n * tiles; ++col)
        ASSERT_EQ(hits[col], 1) << block_n << " T " << tiles << " column " << col;
    }
  }
  EXPECT_EQ(mapped, 10);  // 48, 80, 96, 112, 144, 160, 176, 208, 224, 240
  // The maps the launch path encodes (fp8_gemm_b_boxes): tma_b, tma_b_last and tma_b_narrow boxes, last_b_box_rows.
  const auto boxes = [](uint32_t block_n, uint32_t cluster_m, uint32_t n) {
    const kernels::Fp8GemmBBoxes b = kernels::fp8_gemm_b_boxes(128, block_n, 2, false, cluster_m, n);
    return std::vector<uint32_t>{b.b_rows, b.b_last_rows, b.narrow_rows, b.last_b_box_rows};
  };
  EXPECT_EQ(boxes(160, 1, 1024), (std::vector<uint32_t>{128, 32, 0, 160}));  // no short box for mapped tiles
  EXPECT_EQ(boxes(176, 1, 2112), (std::vector<uint32_t>{128, 32, 16, 176}));
  EXPECT_EQ(boxes(160, 2, 1000), (std::vector<uint32_t>{64, 32, 0, 160}));   // pairs sharing B halve piece 0
  EXPECT_EQ(boxes(128, 1, 576), (std::vector<uint32_t>{128, 64, 0, 64}));    // contiguous: the short last box
  EXPECT_EQ(boxes(192, 2, 1024), (std::vector<uint32_t>{96, 96, 0, 192}));   // pairs sharing B load whole tiles
}

// The wide tiles against pairs at small N and long K (first timed 2026-11-30 at 3df295c, scripts/x-smalln on branch
// exp/twowave; re-timed on the H200 2026-12-01 after B's last n block got a short box, fp8_gemm_test --shapes at
// 47e42cd's kernels, one pass, a shape's four tiles in one process, scripts/x-short-b/run-recheck.sh on exp/short-b):
// N = 768, 1024, 1536 x K = 4096, 8192 x M = 2304, 4736, 9472, 16384, where the ragged last tiles of 128x160 and
// 128x192 and the column classes' shares (five, seven or ten n units for 160) weigh most. The first timing's 128x160
// at N = 1024 carried TMA's zero fill of 96 rows per K block (9472 x 1024 x 8192: 151.4 us then, 124.7 now); every
// other row moved by 0-3 %.
const Measured kSmallNCheck[] = {
    {2304, 768, 4096, 256, 128, 27.9}, {2304, 768, 4096, 128, 128, 18.1}, {2304, 768, 4096, 128, 160, 20.2},
    {2304, 768, 4096, 128, 192, 22.2}, {4736, 768, 4096, 256, 128, 30.5}, {4736, 768, 4096, 128, 128, 30.3},
    {4736, 768, 4096, 128, 160, 34.4}, {4736, 768, 4096, 128, 192, 39.6}, {9472, 768, 4096, 256, 128, 52.4},
    {9472, 768, 4096, 128, 128, 55.4}, {9472, 768, 4096, 128, 160, 50.6}, {9472, 768, 4096, 128, 192, 58.5},
    {16384, 768, 4096, 256, 128, 78.0}, {16384, 768, 4096, 128, 128, 82.1}, {16384, 768, 4096, 128, 160, 81.8},
    {16384, 768, 4096, 128, 192, 78.1}, {2304, 768, 8192, 256, 128, 47.7}, {2304, 768, 8192, 128, 128, 29.9},
    {2304, 768, 8192, 128, 160, 32.6}, {2304, 768, 8192, 128, 192, 37.3}, {4736, 768, 8192, 256, 128, 51.1},
    {4736, 768, 8192, 128, 128, 54.1}, {4736, 768, 8192, 128, 160, 61.9}, {4736, 768, 8192, 128, 192, 72.8},
    {9472, 768, 8192, 256, 128, 98.1}, {9472, 768, 8192, 128, 128, 105.1}, {9472, 768, 8192, 128, 160, 94.9},
    {9472, 768, 8192, 128, 192, 110.7}, {16384, 768, 8192, 256, 128, 146.2}, {16384, 768, 8192, 128, 128, 156.5},
    {16384, 768, 8192, 128, 160, 155.8}, {16384, 768, 8192, 128, 192, 148.9}, {2304, 1024, 4096, 256, 128, 28.7},
    {2304, 1024, 4096, 128, 128, 28.9}, {2304, 1024, 4096, 128, 160, 21.1}, {2304, 1024, 4096, 128, 192, 22.7},
    {4736, 1024, 4096, 256, 128, 51.2}, {4736, 1024, 4096, 128, 128, 42.2}, {4736, 1024, 4096, 128, 160, 36.0},
    {4736, 1024, 4096, 128, 192, 40.1}, {9472, 1024, 4096, 256, 128, 75.4}, {9472, 1024, 4096, 128, 128, 68.0},
    {9472, 1024, 4096, 128, 160, 66.0}, {9472, 1024, 4096, 128, 192, 76.4}, {16384, 1024, 4096, 256, 128, 100.7},
    {16384, 1024, 4096, 128, 128, 107.2}, {16384, 1024, 4096, 128, 160, 111.6}, {16384, 1024, 4096, 128, 192, 114.0},
    {2304, 1024, 8192, 256, 128, 48.3}, {2304, 1024, 8192, 128, 128, 52.4}, {2304, 1024, 8192, 128, 160, 35.0},
    {2304, 1024, 8192, 128, 192, 38.1}, {4736, 1024, 8192, 256, 128, 94.8}, {4736, 1024, 8192, 128, 128, 78.8},
    {4736, 1024, 8192, 128, 160, 64.5}, {4736, 1024, 8192, 128, 192, 73.0}, {9472, 1024, 8192, 256, 128, 142.3},
    {9472, 1024, 8192, 128, 128, 131.3}, {9472, 1024, 8192, 128, 160, 124.7}, {9472, 1024, 8192, 128, 192, 144.1},
    {16384, 1024, 8192, 256, 128, 191.8}, {16384, 1024, 8192, 128, 128, 208.0}, {16384, 1024, 8192, 128, 160, 214.7},
    {16384, 1024, 8192, 128, 192, 216.8}, {2304, 1536, 4096, 256, 128, 29.5}, {2304, 1536, 4096, 128, 128, 29.8},
    {2304, 1536, 4096, 128, 160, 33.9}, {2304, 1536, 4096, 128, 192, 38.9}, {4736, 1536, 4096, 256, 128, 52.3},
    {4736, 1536, 4096, 128, 128, 55.1}, {4736, 1536, 4096, 128, 160, 50.3}, {4736, 1536, 4096, 128, 192, 57.4},
    {9472, 1536, 4096, 256, 128, 99.5}, {9472, 1536, 4096, 128, 128, 93.8}, {9472, 1536, 4096, 128, 160, 95.7},
    {9472, 1536, 4096, 128, 192, 95.1}, {16384, 1536, 4096, 256, 128, 147.0}, {16384, 1536, 4096, 128, 128, 158.4},
    {16384, 1536, 4096, 128, 160, 156.3}, {16384, 1536, 4096, 128, 192, 149.6}, {2304, 1536, 8192, 256, 128, 50.5},
    {2304, 1536, 8192, 128, 128, 52.9}, {2304, 1536, 8192, 128, 160, 61.2}, {2304, 1536, 8192, 128, 192, 72.2},
    {4736, 1536, 8192, 256, 128, 97.5}, {4736, 1536, 8192, 128, 128, 103.0}, {4736, 1536, 8192, 128, 160, 93.9},
    {4736, 1536, 8192, 128, 192, 109.2}, {9472, 1536, 8192, 256, 128, 188.9}, {9472, 1536, 8192, 128, 128, 177.6},
    {9472, 1536, 8192, 128, 160, 183.2}, {9472, 1536, 8192, 128, 192, 180.9}, {16384, 1536, 8192, 256, 128, 283.4},
    {16384, 1536, 8192, 128, 128, 303.1}, {16384, 1536, 8192, 128, 160, 304.2}, {16384, 1536, 8192, 128, 192, 289.7},
};

// The plan's tile is the best measured at 20 of the 24 shapes and within 3 % at 21 (summed log loss 0.135; before
// the bounded forced drop, kForcedDropMaxLoss, 128x192 and 128x128 stood where 128x160 is 9-13 % faster at
// N = 1024). The misses: 16384 x 1024 x 4096, where the bound dropped the pairs (6.5 % ahead of 128x128), 9472 x
// 768 x 8192, where it keeps them and 128x160 is 3.4 % ahead, and 4736 x 1536 x 8192 (pairs, 128x160 3.8 % ahead).
TEST(Fp8GemmHeuristic, SmallNPicksWhatItsCheckTimed) {
  size_t shapes = 0;
  const std::vector<Judged> judged = judge_plan(kSmallNCheck, false, &shapes);
  EXPECT_EQ(shapes, 24u);
  EXPECT_EQ(judged.size(), 24u);
  EXPECT_LT(expect_within_misses(judged, {{16384, 1024, 4096, 1.07}, {9472, 768, 8192, 1.04}, {4736, 1536, 8192, 1.04}}),
            0.15);
}

// The plan after B's last n block got a short box (H200, 2026-12-01, fp8_gemm_test --shapes at 47e42cd, one pass,
// a shape's tiles in one process, us; scripts/x-short-b on branch exp/short-b): the top M of every range of the
// plan from 513 on at the warm-up's three ragged-N shapes (2112, 576 and 4096 x 7168), the plan's tile, the
// model's runner-up among the large-M tiles, and 128x160, the tile the short box sped up most (its last tile at
// N = 2112 holds 32 of 160 columns). Before it, 128x160 ran up to a third slower at ragged N than the model
// says; the model never charged B's zero fill, so the plan did not change with it.
const Measured kShortBoxCheck[] = {
    {896, 2112, 7168, 128, 128, 25.9}, {896, 2112, 7168, 128, 160, 29.4}, {1152, 2112, 7168, 128, 160, 31.5},
    {1152, 2112, 7168, 128, 176, 33.0}, {1408, 2112, 7168, 128, 176, 34.7}, {1408, 2112, 7168, 128, 192, 35.2},
    {1408, 2112, 7168, 128, 160, 53.5}, {1536, 2112, 7168, 128, 192, 36.2}, {1536, 2112, 7168, 128, 160, 53.6},
    {1536, 2112, 7168, 256, 128, 44.5}, {1920, 2112, 7168, 128, 128, 47.3}, {1920, 2112, 7168, 128, 160, 54.4},
    {2304, 2112, 7168, 128, 160, 56.4}, {2304, 2112, 7168, 128, 176, 60.3}, {2816, 2112, 7168, 128, 176, 63.3},
    {2816, 2112, 7168, 128, 192, 64.3}, {2816, 2112, 7168, 128, 160, 81.0}, {3072, 2112, 7168, 128, 192, 66.4},
    {3072, 2112, 7168, 128, 160, 81.5}, {3072, 2112, 7168, 256, 128, 84.2}, {3584, 2112, 7168, 128, 160, 82.8},
    {3584, 2112, 7168, 256, 128, 85.8}, {3840, 2112, 7168, 128, 128, 89.6}, {3840, 2112, 7168, 128, 176, 91.1},
    {3840, 2112, 7168, 128, 160, 107.4}, {4224, 2112, 7168, 128, 176, 92.1}, {4224, 2112, 7168, 128, 192, 96.2},
    {4224, 2112, 7168, 128, 160, 108.6}, {4608, 2112, 7168, 128, 192, 96.9}, {4608, 2112, 7168, 128, 160, 109.2},
    {4736, 2112, 7168, 128, 160, 109.4}, {4736, 2112, 7168, 128, 128, 111.5}, {4864, 2112, 7168, 128, 128, 111.8},
    {4864, 2112, 7168, 128, 176, 119.6}, {4864, 2112, 7168, 128, 160, 131.5}, {5632, 2112, 7168, 128, 176, 121.3},
    {5632, 2112, 7168, 128, 160, 134.6}, {5632, 2112, 7168, 256, 128, 128.3}, {6144, 2112, 7168, 128, 192, 128.3},
    {6144, 2112, 7168, 128, 176, 148.8}, {6144, 2112, 7168, 128, 160, 159.4}, {7040, 2112, 7168, 128, 176, 149.5},
    {7040, 2112, 7168, 128, 192, 157.0}, {7040, 2112, 7168, 128, 160, 161.0}, {7680, 2112, 7168, 128, 192, 158.3},
    {7680, 2112, 7168, 128, 128, 175.3}, {7680, 2112, 7168, 128, 160, 186.2}, {8448, 2112, 7168, 128, 176, 178.2},
    {8448, 2112, 7168, 128, 192, 187.0}, {8448, 2112, 7168, 128, 160, 207.9}, {9216, 2112, 7168, 128, 192, 189.2},
    {9216, 2112, 7168, 128, 160, 213.1}, {9216, 2112, 7168, 256, 128, 208.7}, {9856, 2112, 7168, 128, 176, 207.6},
    {9856, 2112, 7168, 128, 192, 218.0}, {9856, 2112, 7168, 128, 160, 238.2}, {10752, 2112, 7168, 128, 192, 219.3},
    {10752, 2112, 7168, 128, 176, 235.4}, {10752, 2112, 7168, 128, 160, 239.7}, {11264, 2112, 7168, 128, 176, 235.8},
    {11264, 2112, 7168, 128, 160, 266.1}, {11264, 2112, 7168, 256, 128, 249.8}, {12288, 2112, 7168, 128, 192, 250.1},
    {12288, 2112, 7168, 128, 176, 265.0}, {12288, 2112, 7168, 128, 160, 291.5}, {12672, 2112, 7168, 128, 176, 264.5},
    {12672, 2112, 7168, 128, 192, 278.8}, {12672, 2112, 7168, 128, 160, 291.8}, {13824, 2112, 7168, 128, 192, 280.9},
    {13824, 2112, 7168, 128, 176, 293.3}, {13824, 2112, 7168, 128, 160, 319.2}, {14080, 2112, 7168, 128, 176, 294.0},
    {14080, 2112, 7168, 128, 192, 309.5}, {14080, 2112, 7168, 128, 160, 321.5}, {15360, 2112, 7168, 128, 192, 312.0},
    {15360, 2112, 7168, 128, 176, 322.5}, {15360, 2112, 7168, 128, 160, 349.0}, {15488, 2112, 7168, 128, 176, 323.0},
    {15488, 2112, 7168, 128, 192, 341.1}, {15488, 2112, 7168, 128, 160, 348.2}, {16384, 2112, 7168, 128, 192, 342.1},
    {16384, 2112, 7168, 128, 176, 352.6}, {16384, 2112, 7168, 128, 160, 374.1}, {896, 576, 7168, 64, 64, 14.7},
    {896, 576, 7168, 128, 128, 23.6}, {896, 576, 7168, 128, 160, 28.3}, {1792, 576, 7168, 128, 64, 19.5},
    {1792, 576, 7168, 128, 128, 24.8}, {1792, 576, 7168, 128, 160, 29.2}, {3328, 576, 7168, 128, 128, 27.7},
    {3328, 576, 7168, 128, 160, 30.3}, {4224, 576, 7168, 128, 160, 31.9}, {4224, 576, 7168, 128, 176, 34.8},
    {5632, 576, 7168, 128, 192, 37.4}, {5632, 576, 7168, 128, 160, 54.5}, {5632, 576, 7168, 256, 128, 46.4},
    {6656, 576, 7168, 128, 128, 48.9}, {6656, 576, 7168, 128, 160, 54.9}, {8448, 576, 7168, 128, 160, 57.3},
    {8448, 576, 7168, 128, 176, 62.0}, {11264, 576, 7168, 128, 192, 68.2}, {11264, 576, 7168, 128, 160, 82.9},
    {11264, 576, 7168, 256, 128, 86.1}, {12672, 576, 7168, 128, 160, 83.4}, {12672, 576, 7168, 128, 128, 93.2},
    {13440, 576, 7168, 128, 128, 93.5}, {13440, 576, 7168, 128, 192, 98.4}, {13440, 576, 7168, 128, 160, 110.0},
    {16384, 576, 7168, 128, 192, 99.7}, {16384, 576, 7168, 128, 160, 111.6}, {640, 4096, 7168, 128, 160, 31.9},
    {640, 4096, 7168, 128, 176, 33.9}, {768, 4096, 7168, 128, 192, 36.1}, {768, 4096, 7168, 128, 160, 53.7},
    {768, 4096, 7168, 256, 128, 44.5}, {1024, 4096, 7168, 128, 128, 47.6}, {1024, 4096, 7168, 128, 160, 54.3},
    {1024, 4096, 7168, 256, 128, 47.5}, {1280, 4096, 7168, 128, 160, 57.2}, {1280, 4096, 7168, 128, 176, 61.2},
    {1536, 4096, 7168, 128, 192, 66.3}, {1536, 4096, 7168, 128, 128, 68.5}, {1536, 4096, 7168, 128, 160, 82.3},
    {2048, 4096, 7168, 128, 128, 91.2}, {2048, 4096, 7168, 128, 160, 108.3}, {2048, 4096, 7168, 256, 128, 86.8},
    {2304, 4096, 7168, 128, 192, 96.9}, {2304, 4096, 7168, 128, 160, 109.2}, {2560, 4096, 7168, 128, 160, 109.6},
    {2560, 4096, 7168, 128, 128, 113.3}, {3072, 4096, 7168, 128, 192, 128.1}, {3072, 4096, 7168, 128, 160, 135.4},
    {3072, 4096, 7168, 256, 128, 128.4}, {3200, 4096, 7168, 128, 160, 135.8}, {3200, 4096, 7168, 128, 176, 148.6},
    {3584, 4096, 7168, 128, 128, 157.8}, {3584, 4096, 7168, 128, 192, 157.5}, {3584, 4096, 7168, 128, 160, 161.6},
    {3840, 4096, 7168, 128, 192, 158.9}, {3840, 4096, 7168, 128, 160, 162.8}, {3840, 4096, 7168, 256, 128, 167.2},
    {4096, 4096, 7168, 128, 128, 180.6}, {4096, 4096, 7168, 128, 160, 187.2}, {4096, 4096, 7168, 256, 128, 168.2},
    {4224, 4096, 7168, 128, 128, 180.3}, {4224, 4096, 7168, 128, 176, 178.2}, {4224, 4096, 7168, 128, 160, 187.9},
    {4608, 4096, 7168, 128, 192, 189.0}, {4608, 4096, 7168, 128, 128, 201.9}, {4608, 4096, 7168, 128, 160, 210.8},
    {4736, 4096, 7168, 128, 128, 204.5}, {4736, 4096, 7168, 128, 160, 214.3}, {4736, 4096, 7168, 256, 128, 208.3},
    {5120, 4096, 7168, 128, 160, 214.8}, {5120, 4096, 7168, 256, 128, 209.7}, {5376, 4096, 7168, 128, 192, 220.1},
    {5376, 4096, 7168, 128, 176, 235.5}, {5376, 4096, 7168, 128, 160, 240.4}, {5632, 4096, 7168, 128, 128, 245.7},
    {5632, 4096, 7168, 128, 176, 235.1}, {5632, 4096, 7168, 128, 160, 241.1}, {6144, 4096, 7168, 128, 192, 250.4},
    {6144, 4096, 7168, 128, 160, 267.8}, {6144, 4096, 7168, 256, 128, 250.4}, {6272, 4096, 7168, 128, 128, 273.7},
    {6272, 4096, 7168, 128, 176, 264.1}, {6272, 4096, 7168, 128, 160, 267.9}, {6400, 4096, 7168, 128, 160, 267.9},
    {6400, 4096, 7168, 128, 128, 291.6}, {6528, 4096, 7168, 128, 128, 291.1}, {6528, 4096, 7168, 128, 192, 280.6},
    {6528, 4096, 7168, 128, 160, 288.7}, {6912, 4096, 7168, 128, 192, 281.4}, {6912, 4096, 7168, 128, 160, 294.2},
    {6912, 4096, 7168, 256, 128, 290.7}, {7168, 4096, 7168, 128, 128, 318.7}, {7168, 4096, 7168, 128, 160, 315.6},
    {7168, 4096, 7168, 256, 128, 291.5}, {7296, 4096, 7168, 128, 128, 320.7}, {7296, 4096, 7168, 128, 192, 310.8},
    {7296, 4096, 7168, 128, 160, 322.3}, {7680, 4096, 7168, 128, 192, 312.9}, {7680, 4096, 7168, 128, 176, 323.1},
    {7680, 4096, 7168, 128, 160, 322.8}, {10496, 4096, 7168, 128, 176, 442.7}, {10496, 4096, 7168, 128, 160, 453.9},
    {10496, 4096, 7168, 256, 128, 418.3}, {10752, 4096, 7168, 128, 192, 439.9}, {10752, 4096, 7168, 128, 160, 461.4},
    {10752, 4096, 7168, 256, 128, 456.5}, {13568, 4096, 7168, 128, 192, 567.7}, {13568, 4096, 7168, 128, 160, 592.2},
    {13568, 4096, 7168, 256, 128, 544.9}, {13824, 4096, 7168, 128, 192, 569.1}, {13824, 4096, 7168, 128, 160, 597.4},
    {13824, 4096, 7168, 256, 128, 583.7}, {16384, 4096, 7168, 128, 192, 694.7}, {16384, 4096, 7168, 128, 160, 707.9},
    {16384, 4096, 7168, 256, 128, 669.4},
};

TEST(Fp8GemmHeuristic, RaggedNPlanIsWhatItsCheckFoundBestAfterTheShortBox) {
  size_t shapes = 0;
  const std::vector<Judged> judged = judge_plan(kShortBoxCheck, false, &shapes);
  EXPECT_EQ(shapes, 73u);
  EXPECT_EQ(judged.size(), 73u);
  // The misses: 128x128 at N = 4096 where a wide tile's one round fewer shows (the model's 128x128 L2 cost).
  EXPECT_LT(expect_within_misses(judged, {{5632, 4096, 7168, 1.05}, {6272, 4096, 7168, 1.04},
                                          {6528, 4096, 7168, 1.04}, {7296, 4096, 7168, 1.04}}),
            0.2);
}

// The bounded forced drop (kForcedDropMaxLoss) timed where it moves the plan (H200, 2026-12-01, fp8_gemm_test
// --shapes at 47e42cd's kernels, one pass, the previous plan's tile and the new one in one process, us; split-K
// pairs marked by a trailing 2; scripts/x-short-b/run-forced.sh and run-recheck.sh on exp/short-b): every run of M
// it moves at N = 768 and 1024 (K = 4096, 7168, 8192, 16384), at its top and bottom M and M = 1 for the decode runs,
// and 10112 x 768 x K (three shapes of kFirstRoundsCheck that it moves to pairs). Its 128x160 rows are the
// column-class walks', but at 7041 x 1024 x 4096, where the plan takes 128x160 since the class term went, and at
// 10112 x 768 x K, where a class's share had cost a round: those shapes were re-timed, all their tiles in one call,
// on the column map in the twenty-eighth session (scripts/x-cmap/list-refit.txt and a second call for 10112 x 768).
const Measured kForcedDropCheck[] = {
    {1, 768, 7168, 64, 16, 10.4, 2}, {1, 768, 7168, 64, 32, 10.4, 2}, {64, 768, 7168, 64, 16, 10.1, 2},
    {64, 768, 7168, 64, 32, 10.4, 2}, {4225, 768, 7168, 128, 128, 47.5}, {4225, 768, 7168, 256, 128, 45.2},
    {5632, 768, 7168, 128, 128, 49.4}, {5632, 768, 7168, 256, 128, 49.0}, {8449, 768, 7168, 128, 160, 82.9},
    {8449, 768, 7168, 256, 128, 86.4}, {9984, 768, 7168, 128, 160, 84.3}, {9984, 768, 7168, 256, 128, 87.8},
    {9985, 768, 7168, 128, 128, 93.5}, {9985, 768, 7168, 256, 128, 87.9}, {11264, 768, 7168, 128, 128, 94.9},
    {11264, 768, 7168, 256, 128, 89.3}, {14081, 768, 7168, 128, 192, 131.2}, {14081, 768, 7168, 256, 128, 128.4},
    {16384, 768, 7168, 128, 192, 132.5}, {16384, 768, 7168, 256, 128, 130.3}, {1, 768, 8192, 64, 16, 11.1, 2},
    {1, 768, 8192, 64, 32, 11.0, 2}, {64, 768, 8192, 64, 16, 10.7, 2}, {64, 768, 8192, 64, 32, 11.0, 2},
    {4225, 768, 8192, 128, 128, 53.6}, {4225, 768, 8192, 256, 128, 50.1}, {5632, 768, 8192, 128, 128, 55.6},
    {5632, 768, 8192, 256, 128, 54.3}, {8449, 768, 8192, 128, 160, 94.6}, {8449, 768, 8192, 256, 128, 97.8},
    {9984, 768, 8192, 128, 160, 95.8}, {9984, 768, 8192, 256, 128, 99.1}, {9985, 768, 8192, 128, 128, 106.8},
    {9985, 768, 8192, 256, 128, 99.6}, {11264, 768, 8192, 128, 128, 107.4}, {11264, 768, 8192, 256, 128, 100.9},
    {14081, 768, 8192, 128, 192, 148.7}, {14081, 768, 8192, 256, 128, 145.0}, {16384, 768, 8192, 128, 192, 150.0},
    {16384, 768, 8192, 256, 128, 147.2}, {1, 768, 16384, 64, 16, 15.9, 2}, {1, 768, 16384, 64, 32, 15.8, 2},
    {64, 768, 16384, 64, 16, 15.4, 2}, {64, 768, 16384, 64, 32, 15.7, 2}, {4225, 768, 16384, 128, 128, 101.6},
    {4225, 768, 16384, 256, 128, 92.8}, {5632, 768, 16384, 128, 128, 105.0}, {5632, 768, 16384, 256, 128, 99.3},
    {8449, 768, 16384, 128, 160, 179.6}, {8449, 768, 16384, 256, 128, 183.2}, {9984, 768, 16384, 128, 160, 184.4},
    {9984, 768, 16384, 256, 128, 186.7}, {9985, 768, 16384, 128, 128, 203.7}, {9985, 768, 16384, 256, 128, 187.3},
    {11264, 768, 16384, 128, 128, 205.9}, {11264, 768, 16384, 256, 128, 192.5}, {14081, 768, 16384, 128, 192, 284.6},
    {14081, 768, 16384, 256, 128, 276.4}, {16384, 768, 16384, 128, 192, 290.8}, {16384, 768, 16384, 256, 128, 283.2},
    {2304, 1024, 4096, 128, 192, 22.8}, {2304, 1024, 4096, 128, 160, 21.0}, {2817, 1024, 4096, 128, 128, 29.9},
    {2817, 1024, 4096, 256, 128, 28.7}, {4096, 1024, 4096, 128, 128, 30.8}, {4096, 1024, 4096, 256, 128, 31.1},
    {4736, 1024, 4096, 128, 192, 39.9}, {4736, 1024, 4096, 128, 160, 35.9}, {6273, 1024, 4096, 128, 160, 49.3},
    {6273, 1024, 4096, 256, 128, 51.9}, {7040, 1024, 4096, 128, 160, 50.5}, {7040, 1024, 4096, 256, 128, 52.0},
    {7041, 1024, 4096, 128, 128, 53.7}, {7041, 1024, 4096, 256, 128, 51.7}, {7041, 1024, 4096, 128, 160, 50.4},
    {8448, 1024, 4096, 128, 128, 56.0},
    {8448, 1024, 4096, 256, 128, 54.5}, {8449, 1024, 4096, 128, 128, 66.4}, {8449, 1024, 4096, 128, 160, 64.5},
    {9472, 1024, 4096, 128, 128, 67.6}, {9472, 1024, 4096, 128, 160, 65.5}, {10497, 1024, 4096, 128, 192, 77.4},
    {10497, 1024, 4096, 256, 128, 76.5}, {11264, 1024, 4096, 128, 192, 78.2}, {11264, 1024, 4096, 256, 128, 76.4},
    {11265, 1024, 4096, 128, 128, 80.8}, {11265, 1024, 4096, 256, 128, 76.3}, {12544, 1024, 4096, 128, 128, 81.5},
    {12544, 1024, 4096, 256, 128, 77.9}, {14721, 1024, 4096, 128, 128, 106.0}, {14721, 1024, 4096, 256, 128, 100.7},
    {16384, 1024, 4096, 128, 128, 107.9}, {16384, 1024, 4096, 256, 128, 101.4}, {1, 1024, 7168, 64, 16, 10.7, 2},
    {1, 1024, 7168, 64, 32, 10.7, 2}, {64, 1024, 7168, 64, 16, 10.6, 2}, {64, 1024, 7168, 64, 32, 10.7, 2},
    {2304, 1024, 7168, 128, 192, 33.6}, {2304, 1024, 7168, 128, 160, 31.3}, {4736, 1024, 7168, 128, 192, 63.3},
    {4736, 1024, 7168, 128, 160, 56.8}, {8449, 1024, 7168, 128, 128, 113.5}, {8449, 1024, 7168, 128, 160, 109.8},
    {9472, 1024, 7168, 128, 128, 115.8}, {9472, 1024, 7168, 128, 160, 110.6}, {1, 1024, 8192, 64, 16, 11.3, 2},
    {1, 1024, 8192, 64, 32, 11.2, 2}, {64, 1024, 8192, 64, 16, 11.0, 2}, {64, 1024, 8192, 64, 32, 11.2, 2},
    {2304, 1024, 8192, 128, 192, 38.0}, {2304, 1024, 8192, 128, 160, 34.7}, {4736, 1024, 8192, 128, 192, 73.2},
    {4736, 1024, 8192, 128, 160, 64.1}, {8449, 1024, 8192, 128, 128, 131.0}, {8449, 1024, 8192, 128, 160, 124.5},
    {9472, 1024, 8192, 128, 128, 132.7}, {9472, 1024, 8192, 128, 160, 125.5}, {1, 1024, 16384, 64, 16, 16.1, 2},
    {1, 1024, 16384, 64, 32, 15.8, 2}, {64, 1024, 16384, 64, 16, 15.6, 2}, {64, 1024, 16384, 64, 32, 16.1, 2},
    {2304, 1024, 16384, 128, 192, 69.1}, {2304, 1024, 16384, 128, 160, 62.1}, {4736, 1024, 16384, 128, 192, 140.4},
    {4736, 1024, 16384, 128, 160, 122.7}, {8449, 1024, 16384, 128, 128, 251.6}, {8449, 1024, 16384, 128, 160, 238.1},
    {9472, 1024, 16384, 128, 128, 259.7}, {9472, 1024, 16384, 128, 160, 241.9}, {10112, 768, 7168, 128, 128, 93.6},
    {10112, 768, 7168, 128, 160, 85.5}, {10112, 768, 7168, 256, 128, 87.4}, {10112, 768, 8192, 128, 128, 106.4},
    {10112, 768, 8192, 128, 160, 96.6}, {10112, 768, 8192, 256, 128, 99.1}, {10112, 768, 16384, 128, 128, 204.4},
    {10112, 768, 16384, 128, 160, 187.8}, {10112, 768, 16384, 256, 128, 188.0},
};

// The plan is within 3 % of the better tile at 57 of the 67 shapes (summed log loss 0.68; before the bounded forced
// drop 2.39, within 3 % at 38), 0.975 of the previous plan's time on geometric mean. The misses are the moves that
// lost: 128x160 to pairs at 8449..9984 x 768 (3-4 %), the pairs dropped at 1024 x 4096 from M = 2817 (4-6.4 %),
// and 64x32 split-K at 64 x 1024 x 16384 (3.2 %, where 64x16 split-K went to keep 128x160). At 10112 x 768 x 7168
// and 8192 the plan's pairs are within 3 % of the column-mapped 128x160 (2.2 % and 2.5 % behind).
TEST(Fp8GemmHeuristic, BoundedForcedDropPicksWhatItsCheckTimed) {
  size_t shapes = 0;
  const std::vector<Judged> judged = judge_plan(kForcedDropCheck, true, &shapes);
  EXPECT_EQ(shapes, 67u);
  EXPECT_EQ(judged.size(), 67u);
  EXPECT_LT(expect_within_misses(judged, {{8449, 768, 7168, 1.05},
                                          {9984, 768, 7168, 1.05},
                                          {8449, 768, 8192, 1.04},
                                          {9984, 768, 8192, 1.04},
                                          {2817, 1024, 4096, 1.05},
                                          {11265, 1024, 4096, 1.06},
                                          {12544, 1024, 4096, 1.05},
                                          {14721, 1024, 4096, 1.06},
                                          {16384, 1024, 4096, 1.07},
                                          {64, 1024, 16384, 1.04}}),
            0.7);
}

// The model's term for the column classes' busiest class (twenty-fifth to twenty-seventh sessions: half a tile per
// round a class's share of the clusters took beyond the grid's, at K >= 4096) went with the classes: dropping
// it moves 1046 runs of M at K >= 4096 (N 256..32768) to 128x160. A sample of 35 of them, the previous plan's
// tile against the column-mapped 128x160 at the run's top M (H200, 2026-12-01, twenty-eighth session,
// fp8_gemm_test --shapes, two passes in one call, their mean; scripts/x-cmap on branch exp/column-map): 128x160
// faster by over 1 % at 26, slower by over 1 % at 3, 0.973 of the previous plan's time on geometric mean.
// The two shapes at K = 16384 where 128x192 had come out 5-7 % ahead (14848 x 3968 and 8064 x 7360) were timed
// again in the twenty-ninth session (2026-12-01, one process, the two tiles in three orders, the pairs beside
// them): without an idle GPU before each timing, the tile timed second on a shape ran 1.4-9.7 % slower than the
// same kernel timed first; with the harness's 300 ms idle (since then the default) every order agreed within
// 0.6 %, and the three tiles are within 1 % at both shapes. Those rows are the idle runs' medians.
const Measured kColumnMapMovesCheck[] = {
    {11776, 1600, 12288, 256, 128, 347.4}, {11776, 1600, 12288, 128, 160, 322.1}, {12928, 2048, 16384, 128, 128, 681.5},
    {12928, 2048, 16384, 128, 160, 625.5}, {13184, 2176, 4096, 128, 128, 182.3}, {13184, 2176, 4096, 128, 160, 172.4},
    {12032, 2176, 5120, 128, 128, 204.6}, {12032, 2176, 5120, 128, 160, 193.7}, {15616, 2176, 12288, 128, 128, 612.7},
    {15616, 2176, 12288, 128, 160, 617.3}, {13184, 2176, 16384, 128, 128, 719.9}, {13184, 2176, 16384, 128, 160, 690.8},
    {9600, 2240, 5120, 128, 192, 158.7}, {9600, 2240, 5120, 128, 160, 156.6}, {15616, 2240, 16384, 256, 128, 833.4},
    {15616, 2240, 16384, 128, 160, 814.5}, {4480, 2304, 8192, 128, 128, 128.1}, {4480, 2304, 8192, 128, 160, 125.0},
    {10112, 2368, 7168, 128, 192, 247.4}, {10112, 2368, 7168, 128, 160, 241.8}, {4480, 2368, 12288, 256, 128, 206.7},
    {4480, 2368, 12288, 128, 160, 185.3}, {7808, 2368, 16384, 128, 128, 450.0}, {7808, 2368, 16384, 128, 160, 430.6},
    {8832, 2944, 12288, 128, 128, 485.3}, {8832, 2944, 12288, 128, 160, 462.1}, {7040, 3008, 7168, 128, 192, 220.2},
    {7040, 3008, 7168, 128, 160, 215.1}, {10368, 3328, 8192, 128, 128, 399.8}, {10368, 3328, 8192, 128, 160, 399.1},
    {14848, 3968, 7168, 128, 192, 594.9}, {14848, 3968, 7168, 128, 160, 600.5}, {2688, 3968, 16384, 128, 128, 246.3},
    {2688, 3968, 16384, 128, 160, 242.8}, {14848, 3968, 16384, 128, 192, 1416.3},
    {14848, 3968, 16384, 128, 160, 1420.6}, {14848, 3968, 16384, 256, 128, 1409.0},
    {4992, 4224, 16384, 128, 192, 495.6}, {4992, 4224, 16384, 128, 160, 491.1},
    {1664, 4736, 5120, 128, 128, 65.6}, {1664, 4736, 5120, 128, 160, 61.7}, {2176, 4864, 7168, 128, 128, 113.0},
    {2176, 4864, 7168, 128, 160, 109.6}, {6912, 6208, 6144, 128, 192, 371.9}, {6912, 6208, 6144, 128, 160, 368.4},
    {6400, 6720, 16384, 128, 192, 1010.2}, {6400, 6720, 16384, 128, 160, 1015.5}, {6272, 6784, 4096, 128, 128, 253.4},
    {6272, 6784, 4096, 128, 160, 248.8}, {8064, 7360, 16384, 128, 192, 1413.7}, {8064, 7360, 16384, 128, 160, 1416.0},
    {8064, 7360, 16384, 256, 128, 1406.8},
    {3584, 7424, 12288, 128, 128, 482.1}, {3584, 7424, 12288, 128, 160, 462.9}, {7808, 7488, 8192, 128, 192, 685.5},
    {7808, 7488, 8192, 128, 160, 693.5}, {896, 32768, 7168, 128, 128, 313.2}, {896, 32768, 7168, 128, 160, 294.4},
    {10112, 768, 4096, 128, 128, 55.2}, {10112, 768, 4096, 128, 160, 51.0}, {13440, 768, 4096, 128, 128, 68.3},
    {13440, 768, 4096, 128, 160, 66.1}, {11648, 2048, 4096, 256, 128, 145.7}, {11648, 2048, 4096, 128, 160, 142.2},
    {3456, 6144, 4096, 128, 128, 131.4}, {3456, 6144, 4096, 128, 160, 127.1}, {3456, 6144, 7168, 128, 192, 220.4},
    {3456, 6144, 7168, 128, 160, 214.7}, {4480, 7168, 4096, 256, 128, 190.8}, {4480, 7168, 4096, 128, 160, 187.7},
    {13440, 768, 8192, 128, 128, 131.2}, {13440, 768, 8192, 128, 160, 127.2},
};

// The plan takes 128x160 at every shape of kColumnMapMovesCheck but 8832 x 2944 x 12288 (128x176 at a ragged N
// since the twenty-ninth session, timed in kRagged176Check), within 3 % of the best at all 34 (the two re-timed
// shapes at K = 16384 within 1 % of their pairs).
TEST(Fp8GemmHeuristic, ColumnMappedTilesTakeTheRunsTheirCheckTimed) {
  size_t shapes = 0;
  const std::vector<Judged> judged = judge_plan(kColumnMapMovesCheck, false, &shapes);
  EXPECT_EQ(shapes, 35u);
  EXPECT_EQ(judged.size(), 34u);
  for (const Judged& j : judged) {
    const Fp8GemmPlan plan = fp8_gemm_plan(kH200, j.shape->n, j.shape->k);
    EXPECT_EQ(plan.kernels[static_cast<size_t>(plan.bucket_of(j.shape->m).kernel)].block_n, 160)
        << j.shape->m << " x " << j.shape->n << " x " << j.shape->k;
  }
  EXPECT_LT(expect_within_misses(judged, {}), 0.05);
}

// 128x176 at ragged N from K = 4096 on (kRagged176MinKBlocks, kRagged176MinN, kRagged176Penalty; twenty-ninth
// session, H200, 2026-12-01, fp8_gemm_test --shapes with the 300 ms idle before each timing, a shape's tiles in
// one process, us). First 45 shapes: after the rule, 30 runs of M drawn at random from the 10320 it moves to
// 128x176 (N 2048..32768, K 4096..16384), at their top M, the previous plan's tile against 128x176; 6 of the 308
// runs it moves elsewhere (the pruning to eight kernels drops another tile where 128x176 joins), the previous
// tile against the new; and the nine shapes of the earlier tables the rule moved to 128x176 (kRefitCheck,
// kRefitCheckLow, kPairsCheck and kColumnMapMovesCheck, where they are no longer judged, their rows being other
// days'; and 768 and 1536 x 7168 x 16384 of kWideSweep, which timed 128x176 too), the best tile of their table
// (or the previous plan's) against 128x176. Then 52 shapes of the first probe, before the penalty and the N
// bound: 48 runs drawn from what offering 128x176 at every N from K = 4096 would have moved, and four M of 4096 x
// 7168 with 128x128, 128x176 and 128x192. On those the model's 128x176 estimate had been 2 % short against
// every other tile, which kRagged176Penalty now charges.
const Measured kRagged176Check[] = {
    {1920, 7296, 5120, 128, 128, 112.9}, {1920, 7296, 5120, 128, 176, 111.6}, {384, 22976, 7168, 128, 192, 100.6},
    {384, 22976, 7168, 128, 176, 97.1}, {768, 14848, 6144, 128, 176, 106.4}, {768, 14848, 6144, 256, 128, 111.2},
    {1152, 22656, 4096, 128, 160, 160.6}, {1152, 22656, 4096, 128, 176, 164.5}, {3840, 6080, 8192, 128, 176, 269.1},
    {3840, 6080, 8192, 256, 128, 277.8}, {640, 22720, 6144, 128, 128, 136.4}, {640, 22720, 6144, 128, 176, 133.1},
    {768, 14336, 16384, 128, 176, 263.1}, {768, 14336, 16384, 256, 128, 272.3}, {2048, 11456, 12288, 128, 176, 400.0},
    {2048, 11456, 12288, 256, 128, 410.1}, {1664, 14208, 7168, 128, 176, 238.4}, {1664, 14208, 7168, 256, 128, 244.6},
    {8960, 2560, 7168, 128, 128, 240.4}, {8960, 2560, 7168, 128, 176, 236.4}, {2304, 15424, 6144, 128, 176, 306.7},
    {2304, 15424, 6144, 256, 128, 315.7}, {640, 22656, 7168, 128, 128, 156.4}, {640, 22656, 7168, 128, 176, 152.6},
    {1152, 28224, 12288, 128, 192, 595.0}, {1152, 28224, 12288, 128, 176, 571.5}, {768, 15104, 4096, 128, 176, 74.3},
    {768, 15104, 4096, 256, 128, 76.7}, {1664, 12416, 4096, 128, 160, 127.5}, {1664, 12416, 4096, 128, 176, 126.3},
    {384, 30464, 4096, 128, 192, 79.8}, {384, 30464, 4096, 128, 176, 76.9}, {768, 30080, 8192, 128, 128, 272.8},
    {768, 30080, 8192, 128, 176, 270.3}, {1280, 4416, 6144, 128, 192, 55.9}, {1280, 4416, 6144, 128, 176, 55.3},
    {2560, 10048, 7168, 128, 128, 260.3}, {2560, 10048, 7168, 128, 176, 265.4}, {896, 9792, 12288, 128, 192, 158.0},
    {896, 9792, 12288, 128, 176, 153.3}, {1664, 6528, 5120, 128, 176, 89.6}, {1664, 6528, 5120, 256, 128, 92.4},
    {4352, 3200, 7168, 128, 128, 153.6}, {4352, 3200, 7168, 128, 176, 149.0}, {3200, 8128, 12288, 128, 160, 458.0},
    {3200, 8128, 12288, 128, 176, 452.4}, {512, 11072, 5120, 128, 192, 48.7}, {512, 11072, 5120, 128, 176, 47.8},
    {1280, 17856, 6144, 128, 128, 208.4}, {1280, 17856, 6144, 128, 176, 207.7}, {384, 7296, 4096, 128, 192, 24.8},
    {384, 7296, 4096, 128, 176, 24.6}, {1280, 18176, 7168, 128, 128, 241.4}, {1280, 18176, 7168, 128, 176, 239.4},
    {2560, 6848, 7168, 128, 192, 186.2}, {2560, 6848, 7168, 128, 176, 179.6}, {896, 15168, 4096, 128, 128, 92.8},
    {896, 15168, 4096, 128, 176, 90.5}, {384, 22208, 7168, 128, 128, 95.7}, {384, 22208, 7168, 128, 176, 97.0},
    {1664, 17856, 6144, 128, 128, 262.8}, {1664, 17856, 6144, 128, 192, 265.6}, {512, 15296, 5120, 128, 160, 61.4},
    {512, 15296, 5120, 256, 128, 64.5}, {640, 15872, 5120, 128, 160, 80.7}, {640, 15872, 5120, 128, 128, 83.3},
    {640, 15744, 12288, 128, 160, 184.2}, {640, 15744, 12288, 128, 128, 187.2}, {640, 15232, 7168, 128, 160, 111.0},
    {640, 15232, 7168, 128, 128, 113.6}, {640, 15296, 8192, 128, 160, 126.0}, {640, 15296, 8192, 128, 128, 128.6},
    {1536, 7168, 16384, 128, 176, 263.4}, {1536, 7168, 16384, 256, 128, 270.0}, {2305, 7168, 16384, 128, 192, 420.9},
    {2305, 7168, 16384, 128, 160, 419.9}, {2305, 7168, 16384, 128, 176, 399.5}, {2432, 7168, 16384, 128, 192, 422.4},
    {2432, 7168, 16384, 128, 160, 420.8}, {2432, 7168, 16384, 128, 176, 400.2}, {3073, 7168, 16384, 128, 176, 535.7},
    {3073, 7168, 16384, 256, 128, 543.6}, {3200, 7168, 16384, 128, 176, 535.5}, {3200, 7168, 16384, 256, 128, 546.6},
    {5568, 4096, 7168, 128, 128, 243.6}, {5568, 4096, 7168, 128, 176, 236.2}, {704, 7168, 16384, 128, 192, 140.0},
    {704, 7168, 16384, 128, 176, 133.3}, {768, 7168, 16384, 128, 192, 140.2}, {768, 7168, 16384, 128, 176, 134.4},
    {8832, 2944, 12288, 128, 160, 458.9}, {8832, 2944, 12288, 128, 176, 453.9}, {384, 28608, 16384, 128, 192, 291.6},
    {384, 28608, 16384, 128, 176, 276.9}, {2688, 31424, 4096, 128, 192, 501.5}, {2688, 31424, 4096, 128, 176, 508.6},
    {8704, 9792, 8192, 128, 192, 998.0}, {8704, 9792, 8192, 128, 176, 1013.9}, {640, 18112, 7168, 128, 192, 128.8},
    {640, 18112, 7168, 128, 176, 124.4}, {11904, 4160, 5120, 128, 192, 360.8}, {11904, 4160, 5120, 128, 176, 366.2},
    {4992, 11136, 16384, 128, 192, 1331.3}, {4992, 11136, 16384, 128, 176, 1307.7}, {6144, 9088, 8192, 128, 192, 660.5},
    {6144, 9088, 8192, 128, 176, 656.6}, {384, 30656, 8192, 128, 192, 151.7}, {384, 30656, 8192, 128, 176, 145.2},
    {12160, 6976, 12288, 128, 192, 1497.2}, {12160, 6976, 12288, 128, 176, 1532.1}, {768, 7168, 4096, 128, 192, 40.5},
    {768, 7168, 4096, 128, 176, 39.7}, {4992, 11200, 4096, 128, 192, 332.1}, {4992, 11200, 4096, 128, 176, 327.5},
    {4864, 8832, 5120, 128, 192, 315.8}, {4864, 8832, 5120, 128, 176, 322.7}, {3456, 28288, 8192, 128, 176, 1149.9},
    {3456, 28288, 8192, 256, 128, 1136.9}, {2048, 25728, 16384, 128, 176, 1259.6},
    {2048, 25728, 16384, 256, 128, 1217.4}, {3200, 16448, 6144, 128, 176, 469.5}, {3200, 16448, 6144, 256, 128, 461.8},
    {2048, 31808, 7168, 128, 176, 662.1}, {2048, 31808, 7168, 256, 128, 662.3}, {14208, 4544, 5120, 128, 176, 476.8},
    {14208, 4544, 5120, 256, 128, 478.8}, {3200, 10112, 12288, 128, 176, 570.9}, {3200, 10112, 12288, 256, 128, 563.1},
    {1152, 19904, 7168, 128, 176, 245.4}, {1152, 19904, 7168, 256, 128, 247.2}, {4864, 10880, 16384, 128, 176, 1260.4},
    {4864, 10880, 16384, 256, 128, 1227.3}, {6016, 23104, 12288, 128, 176, 2500.6},
    {6016, 23104, 12288, 256, 128, 2426.6}, {3200, 16320, 8192, 128, 176, 624.3}, {3200, 16320, 8192, 256, 128, 615.5},
    {1152, 9408, 6144, 128, 176, 107.0}, {1152, 9408, 6144, 256, 128, 109.5}, {3200, 30528, 8192, 128, 176, 1156.9},
    {3200, 30528, 8192, 256, 128, 1139.4}, {5632, 2496, 6144, 128, 128, 135.0}, {5632, 2496, 6144, 128, 176, 129.7},
    {1536, 14912, 6144, 128, 128, 209.2}, {1536, 14912, 6144, 128, 176, 207.8}, {1280, 11072, 12288, 128, 128, 264.8},
    {1280, 11072, 12288, 128, 176, 254.0}, {5760, 3968, 12288, 128, 128, 418.2}, {5760, 3968, 12288, 128, 176, 409.4},
    {640, 26624, 16384, 128, 128, 410.6}, {640, 26624, 16384, 128, 176, 411.4}, {3072, 7424, 6144, 128, 128, 210.0},
    {3072, 7424, 6144, 128, 176, 206.0}, {1920, 7296, 12288, 128, 128, 260.4}, {1920, 7296, 12288, 128, 176, 252.7},
    {896, 15424, 7168, 128, 128, 154.6}, {896, 15424, 7168, 128, 176, 151.3}, {1664, 8512, 7168, 128, 128, 155.2},
    {1664, 8512, 7168, 128, 176, 151.7}, {896, 16064, 16384, 128, 128, 349.9}, {896, 16064, 16384, 128, 176, 336.9},
    {896, 15104, 6144, 128, 128, 134.5}, {896, 15104, 6144, 128, 176, 130.8}, {3840, 4480, 12288, 128, 128, 301.9},
    {3840, 4480, 12288, 128, 176, 304.7}, {1664, 15616, 12288, 128, 160, 469.9}, {1664, 15616, 12288, 128, 176, 463.8},
    {15744, 2624, 16384, 128, 160, 1024.8}, {15744, 2624, 16384, 128, 176, 986.8}, {1536, 17216, 5120, 128, 160, 196.9},
    {1536, 17216, 5120, 128, 176, 197.0}, {1664, 16000, 7168, 128, 160, 272.6}, {1664, 16000, 7168, 128, 176, 270.0},
    {1792, 14464, 7168, 128, 160, 269.7}, {1792, 14464, 7168, 128, 176, 268.7}, {896, 29312, 16384, 128, 160, 627.6},
    {896, 29312, 16384, 128, 176, 621.4}, {3968, 14848, 12288, 128, 160, 1058.1},
    {3968, 14848, 12288, 128, 176, 1047.7}, {1664, 17536, 8192, 128, 160, 340.8}, {1664, 17536, 8192, 128, 176, 342.3},
    {7552, 3456, 5120, 128, 160, 195.0}, {7552, 3456, 5120, 128, 176, 194.7}, {2688, 9728, 8192, 128, 160, 309.1},
    {2688, 9728, 8192, 128, 176, 307.6}, {2688, 15872, 5120, 128, 160, 312.0}, {2688, 15872, 5120, 128, 176, 323.4},
    {13056, 3136, 7168, 128, 160, 435.0}, {13056, 3136, 7168, 128, 176, 420.8}, {5632, 4096, 7168, 128, 128, 247.5},
    {5632, 4096, 7168, 128, 176, 238.7}, {5632, 4096, 7168, 128, 192, 249.7}, {6272, 4096, 7168, 128, 128, 273.3},
    {6272, 4096, 7168, 128, 176, 267.2}, {6272, 4096, 7168, 128, 192, 280.8}, {6528, 4096, 7168, 128, 128, 292.3},
    {6528, 4096, 7168, 128, 176, 295.9}, {6528, 4096, 7168, 128, 192, 281.4}, {7296, 4096, 7168, 128, 128, 319.6},
    {7296, 4096, 7168, 128, 176, 326.3}, {7296, 4096, 7168, 128, 192, 312.6},
};

// The sampled moves to 128x176 run at 0.981 of the previous plan's time (22 of 30 faster by over 1 %, 3 slower,
// by at most 2.4 %); the moves elsewhere at 1.011-1.050 (the pruning's cost); the nine table shapes at
// 0.947-0.989 (4096 x 7168 at M = 5568, 7168 x 16384 at M = 704, 768, 1536, 2305, 2432, 3073, 3200, 8832 x 2944
// x 12288). The plan is within 3 % of the best tile timed at 93 of the 96 shapes it can be judged at; the misses
// are two of the pruning's moves and 128x128 at 6528 x 4096 x 7168 (128x192 3.9 % faster; kShortBoxCheck's miss
// before), summed log loss 0.35.
TEST(Fp8GemmHeuristic, Ragged176WhereItsCheckTimed) {
  size_t shapes = 0;
  const std::vector<Judged> judged = judge_plan(kRagged176Check, false, &shapes, offered_at);
  EXPECT_EQ(shapes, 97u);
  EXPECT_EQ(judged.size(), 96u);  // at 2688 x 15872 x 5120 the plan takes neither tile timed there (128x128)
  const std::vector<Miss> misses = {{512, 15296, 5120, 1.06}, {640, 15872, 5120, 1.04}, {6528, 4096, 7168, 1.04}};
  EXPECT_LT(expect_within_misses(judged, misses), 0.36);
}

// A kernel that serves one m block only (the 64-row tiles of M <= 64) runs 64x16 and 64x32 with 12 stages, 64x64
// with 10 and 64x128 with 6, fewer than fit (H200, 2026-12-01, thirtieth session, fp8_gemm_test --shapes, four
// passes in alternating orders averaged: 0.990 of the stages that fit on geometric mean over 28 decode shapes for
// 64x32 and 64x64, 0.987 over 6 for 64x128, 0.976 over 2 for 64x16 split-K). Where the same tile also serves two m
// blocks, where the caller forces a stage count, and in the accumulating form (not measured), the stages stay as
// many as fit.
TEST(Fp8GemmHeuristic, OneMBlockKernelsRunFewerStages) {
  const Fp8GemmPlan ffn = fp8_gemm_plan(kH200, 4096, 7168);
  EXPECT_EQ(config_at(ffn, 1).describe(), "64x32, 12 stages, 1 math warpgroup, TMA store, overlapped promotion");
  EXPECT_EQ(config_at(ffn, 128).describe(), "64x64, 13 stages, 1 math warpgroup, TMA store, overlapped promotion");
  const Fp8GemmPlan down = fp8_gemm_plan(kH200, 7168, 16384);
  EXPECT_EQ(config_at(down, 64).describe(), "64x64, 10 stages, 1 math warpgroup, TMA store, overlapped promotion");
  EXPECT_EQ(config_at(fp8_gemm_plan(kH200, 12288, 4096), 64).stages, 6);  // 64x128
  EXPECT_EQ(config_at(fp8_gemm_plan(kH200, 576, 7168), 1).stages, 12);    // 64x16 split-K
  // 32768 x 512 takes 64x128 for M = 1..64 and 129..192: one kernel over more than one m block keeps 8.
  EXPECT_EQ(config_at(fp8_gemm_plan(kH200, 32768, 512), 1).stages, 8);
  Fp8GemmOverrides forced;
  forced.stages = 16;
  EXPECT_EQ(config_at(fp8_gemm_plan(kH200, 4096, 7168, forced), 1).stages, 16);
  Fp8GemmOverrides tile;  // one tile for every M: it serves more than one m block
  tile.block_m = 64;
  tile.block_n = 32;
  EXPECT_EQ(config_at(fp8_gemm_plan(kH200, 4096, 7168, tile), 1).stages, 16);
  const Fp8GemmPlan wgrad = fp8_gemm_plan(kH200, 4096, 7168, {}, Fp8GemmForm::kAccumulate);
  const Fp8GemmConfig& w = config_at(wgrad, 1);
  EXPECT_EQ(w.stages, static_cast<int>(kernels::fp8_gemm_max_stages(
                          static_cast<uint32_t>(w.block_m), static_cast<uint32_t>(w.block_n), w.tma_store,
                          static_cast<uint32_t>(kH200.shared_memory_per_block), true, 1)));
  for (const Fp8GemmPlan* plan : {&ffn, &down}) expect_well_formed(*plan);
}

// The earlier tables' heavy shapes timed again without the order bias (thirtieth session, H200, 2026-12-01,
// fp8_gemm_test --shapes with the 300 ms idle before each timing, a shape's tiles in one process, two passes in
// opposite orders averaged: they agreed within 0.7 %, median 0.15 %; us). Every shape of kSweep, kWideSweep,
// kRefitCheck, kRefitCheckLow, kPairsCheck, kFirstRoundsCheck and kShortBoxCheck where the plan's tile took 400 us
// or more and another tile timed within 3 % of it: those tables were timed before the idle, when the tile timed
// first on a 1-ms shape ran up to 9.7 % faster than the same kernel timed second (twenty-ninth session). Timed: the
// plan's tile, every tile the table had within 6 % of it, and 128x176 (a candidate at these N and K since then).
const Measured kIdleRetime[] = {
    {4096, 7168, 16384, 128, 176, 682.1}, {4096, 7168, 16384, 128, 192, 719.0}, {4096, 7168, 16384, 128, 160, 682.0},
    {4096, 7168, 16384, 128, 128, 725.8}, {4096, 7168, 16384, 256, 128, 651.1}, {12288, 4096, 7168, 128, 176, 534.0},
    {12288, 4096, 7168, 128, 192, 502.4}, {12288, 4096, 7168, 128, 160, 516.5}, {12288, 4096, 7168, 256, 128, 497.5},
    {5120, 7168, 16384, 128, 176, 884.9}, {5120, 7168, 16384, 128, 160, 869.6}, {5120, 7168, 16384, 256, 128, 835.0},
    {2560, 7168, 16384, 128, 176, 466.1}, {2560, 7168, 16384, 128, 160, 427.5}, {2560, 7168, 16384, 128, 192, 430.4},
    {3328, 7168, 16384, 128, 176, 604.2}, {3328, 7168, 16384, 128, 160, 554.8}, {3328, 7168, 16384, 256, 128, 552.4},
    {3968, 7168, 16384, 128, 176, 678.0}, {3968, 7168, 16384, 128, 192, 654.6}, {3968, 7168, 16384, 256, 128, 647.7},
    {4224, 7168, 16384, 128, 176, 745.1}, {4224, 7168, 16384, 128, 128, 735.2}, {4224, 7168, 16384, 128, 192, 724.0},
    {6144, 7168, 16384, 128, 176, 1031.6}, {6144, 7168, 16384, 128, 192, 1026.0}, {6144, 7168, 16384, 256, 128, 1020.5},
    {7936, 7168, 16384, 128, 176, 1373.8}, {7936, 7168, 16384, 128, 192, 1325.7}, {7936, 7168, 16384, 256, 128, 1305.1},
    {9728, 7168, 16384, 128, 176, 1661.6}, {9728, 7168, 16384, 128, 192, 1629.8}, {9728, 7168, 16384, 256, 128, 1593.7},
    {9728, 4096, 7168, 128, 176, 414.3}, {9728, 4096, 7168, 128, 160, 405.2}, {9728, 4096, 7168, 256, 128, 412.0},
    {11648, 4096, 7168, 128, 176, 503.5}, {11648, 4096, 7168, 128, 160, 488.3}, {11648, 4096, 7168, 256, 128, 494.9},
    {12672, 4096, 7168, 128, 176, 535.0}, {12672, 4096, 7168, 128, 128, 560.0}, {12672, 4096, 7168, 256, 128, 537.0},
    {3201, 7168, 16384, 128, 176, 603.0}, {3201, 7168, 16384, 128, 160, 554.5}, {3201, 7168, 16384, 256, 128, 550.3},
    {3713, 7168, 16384, 128, 176, 672.9}, {3713, 7168, 16384, 128, 128, 680.1}, {3713, 7168, 16384, 128, 192, 649.2},
    {3713, 7168, 16384, 256, 128, 642.5}, {3841, 7168, 16384, 128, 176, 678.2}, {3841, 7168, 16384, 128, 192, 653.0},
    {3841, 7168, 16384, 256, 128, 645.9}, {4097, 7168, 16384, 128, 176, 744.3}, {4097, 7168, 16384, 128, 128, 744.7},
    {4097, 7168, 16384, 128, 192, 722.6}, {4609, 7168, 16384, 128, 176, 815.3}, {4609, 7168, 16384, 128, 128, 837.4},
    {4609, 7168, 16384, 128, 192, 798.5}, {5377, 7168, 16384, 128, 176, 954.9}, {5377, 7168, 16384, 128, 160, 934.2},
    {5377, 7168, 16384, 256, 128, 924.0}, {5504, 7168, 16384, 128, 176, 956.2}, {5504, 7168, 16384, 128, 160, 935.1},
    {5504, 7168, 16384, 256, 128, 926.5}, {5889, 7168, 16384, 128, 176, 1027.8}, {5889, 7168, 16384, 128, 128, 1080.7},
    {5889, 7168, 16384, 128, 192, 1019.5}, {5889, 7168, 16384, 256, 128, 1015.5}, {6017, 7168, 16384, 128, 176, 1031.7},
    {6017, 7168, 16384, 128, 192, 1026.2}, {6017, 7168, 16384, 256, 128, 1018.2}, {7809, 7168, 16384, 128, 176, 1373.2},
    {7809, 7168, 16384, 128, 192, 1325.6}, {7809, 7168, 16384, 256, 128, 1304.7}, {9473, 7168, 16384, 128, 176, 1658.5},
    {9473, 7168, 16384, 128, 192, 1621.0}, {9473, 7168, 16384, 256, 128, 1588.3}, {9600, 7168, 16384, 128, 176, 1663.7},
    {9600, 7168, 16384, 128, 192, 1623.3}, {9600, 7168, 16384, 256, 128, 1591.0}, {11521, 4096, 7168, 128, 176, 504.8},
    {11521, 4096, 7168, 128, 160, 488.9}, {11521, 4096, 7168, 256, 128, 495.0}, {12545, 4096, 7168, 128, 176, 535.6},
    {12545, 4096, 7168, 128, 128, 562.3}, {12545, 4096, 7168, 256, 128, 537.0}, {13569, 4096, 7168, 128, 176, 594.7},
    {13569, 4096, 7168, 128, 128, 609.5}, {13569, 4096, 7168, 128, 192, 565.6}, {13569, 4096, 7168, 256, 128, 579.2},
    {14593, 4096, 7168, 128, 176, 626.0}, {14593, 4096, 7168, 128, 128, 659.1}, {14593, 4096, 7168, 256, 128, 620.2},
    {9473, 4096, 7168, 128, 176, 414.4}, {9473, 4096, 7168, 128, 160, 405.4}, {9473, 4096, 7168, 256, 128, 411.3},
    {9600, 4096, 7168, 128, 176, 414.4}, {9600, 4096, 7168, 128, 160, 404.6}, {9600, 4096, 7168, 256, 128, 411.7},
    {10497, 4096, 7168, 128, 176, 471.7}, {10497, 4096, 7168, 128, 192, 437.9}, {10497, 4096, 7168, 256, 128, 453.5},
    {13696, 4096, 7168, 128, 176, 594.2}, {13696, 4096, 7168, 128, 192, 565.5}, {13696, 4096, 7168, 256, 128, 578.1},
    {13824, 4096, 7168, 128, 160, 598.0}, {13824, 4096, 7168, 128, 176, 595.3}, {13824, 4096, 7168, 128, 192, 566.2},
    {13824, 4096, 7168, 256, 128, 580.0}, {2561, 7168, 16384, 128, 176, 468.4}, {2561, 7168, 16384, 128, 128, 459.2},
    {2561, 7168, 16384, 256, 128, 457.6}, {2688, 7168, 16384, 128, 176, 469.6}, {2688, 7168, 16384, 128, 128, 459.1},
    {2688, 7168, 16384, 256, 128, 459.5}, {3840, 7168, 16384, 128, 176, 675.6}, {3840, 7168, 16384, 128, 192, 650.5},
    {3840, 7168, 16384, 256, 128, 645.2}, {6016, 7168, 16384, 128, 176, 1028.3}, {6016, 7168, 16384, 128, 192, 1020.9},
    {6016, 7168, 16384, 256, 128, 1018.6}, {7681, 7168, 16384, 128, 176, 1319.3}, {7681, 7168, 16384, 128, 192, 1321.4},
    {7681, 7168, 16384, 256, 128, 1300.5}, {7808, 7168, 16384, 128, 176, 1315.0}, {7808, 7168, 16384, 128, 192, 1318.8},
    {7808, 7168, 16384, 256, 128, 1303.7}, {12928, 2048, 16384, 128, 176, 672.2}, {12928, 2048, 16384, 128, 128, 683.6},
    {12928, 2048, 16384, 128, 160, 624.9}, {3456, 6144, 16384, 128, 176, 534.6}, {3456, 6144, 16384, 128, 192, 498.6},
    {3456, 6144, 16384, 128, 160, 492.5}, {3456, 12288, 7168, 128, 176, 445.3}, {3456, 12288, 7168, 128, 192, 440.2},
    {3456, 12288, 7168, 128, 160, 432.9}, {3456, 12288, 8192, 128, 176, 510.6}, {3456, 12288, 8192, 128, 192, 503.0},
    {3456, 12288, 8192, 128, 160, 495.3}, {3456, 12288, 16384, 128, 176, 1024.8},
    {3456, 12288, 16384, 128, 192, 1010.6}, {3456, 12288, 16384, 128, 160, 1003.3},
    {640, 32768, 16384, 128, 176, 538.0}, {640, 32768, 16384, 128, 192, 503.1}, {640, 32768, 16384, 128, 160, 496.6},
};

// Without the bias the plan is within 2 % of the best at all 46 shapes (1.0045 on geometric mean). The largest
// gaps: 128x192 at 7168 x 16384 for M = 3713..3968 and 7681..7936, 1.1-1.6 % behind the pairs; the pairs at
// 4096 x 7168 for M = 9473..9728 and 11521..11648, 1.2-1.7 % behind 128x160. 128x176 is level with the best at
// 12545 and 12672 x 4096 x 7168 (the plan's pairs 0.1-0.4 % behind it) and up to 10 % behind at the others.
TEST(Fp8GemmHeuristic, HeavyShapesRetimedWithoutTheOrderBias) {
  size_t shapes = 0;
  const std::vector<Judged> judged = judge_plan(kIdleRetime, false, &shapes, offered_at);
  EXPECT_EQ(shapes, 46u);
  EXPECT_EQ(judged.size(), 46u);
  double log_loss = 0;
  for (const Judged& j : judged) {
    expect_within(j, 1.02);
    log_loss += std::log(j.chosen_us / j.best_us);
  }
  EXPECT_LT(log_loss, 46 * std::log(1.006));
}

// The weight-gradient form's own sweep (Python, `fp8_gemm_nt` with a float32 d and c = d, D += A . B^T, the 1 GB
// write flush before each call, us): weight-gradient shapes (M x N a weight's shape, K the tokens) with every tile the
// form offers there. Fitted first on the H200 of 2026-12-01 (thirty-second session); re-timed on the H200 on
// 2026-12-06 (forty-fourth session, bench/probes/wgrad_small_k_tiles.py --shapes: the median of 30 after 3 warm-ups
// and 100 ms idle, every forced tile's D bitwise equal to the plan's) once 128x128 and 128x192 had given up a stage
// for the reduce staging's wide boxes (fp8_gemm_accumulate_stages), which made them 4-8 % faster against the other
// tiles than in the first sweep: the rows below are the re-timing.
const Measured kAccumulateSweep[] = {
    {2112, 7168, 4096, 64, 64, 215.6}, {2112, 7168, 4096, 64, 128, 170.2}, {2112, 7168, 4096, 128, 64, 172.9},
    {2112, 7168, 4096, 128, 128, 159.4}, {2112, 7168, 4096, 128, 160, 155.4}, {2112, 7168, 4096, 128, 176, 165.9},
    {2112, 7168, 4096, 128, 192, 150.8}, {24576, 1536, 4096, 64, 64, 524.5}, {24576, 1536, 4096, 64, 128, 406.3},
    {24576, 1536, 4096, 128, 64, 396.7}, {24576, 1536, 4096, 128, 128, 345.6}, {24576, 1536, 4096, 128, 160, 364.2},
    {24576, 1536, 4096, 128, 176, 368.8}, {24576, 1536, 4096, 128, 192, 340.1}, {32768, 512, 4096, 64, 64, 244.9},
    {32768, 512, 4096, 64, 128, 193.9}, {32768, 512, 4096, 128, 64, 187.2}, {32768, 512, 4096, 128, 128, 163.5},
    {32768, 512, 4096, 128, 160, 202.9}, {32768, 512, 4096, 128, 176, 169.1}, {32768, 512, 4096, 128, 192, 178.5},
    {7168, 16384, 4096, 64, 64, 1610.8}, {7168, 16384, 4096, 64, 128, 1236.3}, {7168, 16384, 4096, 128, 64, 1207.3},
    {7168, 16384, 4096, 128, 128, 1044.0}, {7168, 16384, 4096, 128, 160, 1076.0}, {7168, 16384, 4096, 128, 176, 1042.8},
    {7168, 16384, 4096, 128, 192, 1026.0}, {4096, 7168, 4096, 64, 64, 414.7}, {4096, 7168, 4096, 64, 128, 325.9},
    {4096, 7168, 4096, 128, 64, 306.8}, {4096, 7168, 4096, 128, 128, 272.9}, {4096, 7168, 4096, 128, 160, 274.5},
    {4096, 7168, 4096, 128, 176, 269.4}, {4096, 7168, 4096, 128, 192, 285.8}, {7168, 2048, 4096, 64, 64, 216.0},
    {7168, 2048, 4096, 64, 128, 169.6}, {7168, 2048, 4096, 128, 64, 162.1}, {7168, 2048, 4096, 128, 128, 141.3},
    {7168, 2048, 4096, 128, 160, 152.6}, {7168, 2048, 4096, 128, 176, 164.4}, {7168, 2048, 4096, 128, 192, 149.2},
    {576, 7168, 4096, 64, 64, 66.2}, {576, 7168, 4096, 64, 128, 52.6}, {576, 7168, 4096, 128, 64, 60.2},
    {576, 7168, 4096, 128, 128, 62.4}, {576, 7168, 4096, 128, 160, 55.4}, {576, 7168, 4096, 128, 176, 61.7},
    {576, 7168, 4096, 128, 192, 63.1}, {2112, 7168, 8192, 64, 64, 415.3}, {2112, 7168, 8192, 64, 128, 315.8},
    {2112, 7168, 8192, 128, 64, 328.1}, {2112, 7168, 8192, 128, 128, 296.2}, {2112, 7168, 8192, 128, 160, 286.8},
    {2112, 7168, 8192, 128, 176, 304.1}, {2112, 7168, 8192, 128, 192, 276.1}, {7168, 2048, 8192, 64, 64, 408.0},
    {7168, 2048, 8192, 64, 128, 314.3}, {7168, 2048, 8192, 128, 64, 310.0}, {7168, 2048, 8192, 128, 128, 262.5},
    {7168, 2048, 8192, 128, 160, 285.1}, {7168, 2048, 8192, 128, 176, 303.2}, {7168, 2048, 8192, 128, 192, 272.9},
    {4096, 7168, 8192, 64, 64, 792.5}, {4096, 7168, 8192, 64, 128, 610.7}, {4096, 7168, 8192, 128, 64, 619.5},
    {4096, 7168, 8192, 128, 128, 516.9}, {4096, 7168, 8192, 128, 160, 520.0}, {4096, 7168, 8192, 128, 176, 503.8},
    {4096, 7168, 8192, 128, 192, 538.3}, {7168, 2112, 4096, 64, 64, 215.3}, {7168, 2112, 4096, 64, 128, 181.0},
    {7168, 2112, 4096, 128, 64, 163.7}, {7168, 2112, 4096, 128, 128, 155.7}, {7168, 2112, 4096, 128, 160, 153.6},
    {7168, 2112, 4096, 128, 176, 165.6}, {7168, 2112, 4096, 128, 192, 151.1}, {2048, 7168, 8192, 64, 64, 411.4},
    {2048, 7168, 8192, 64, 128, 312.6}, {2048, 7168, 8192, 128, 64, 308.7}, {2048, 7168, 8192, 128, 128, 261.4},
    {2048, 7168, 8192, 128, 160, 287.0}, {2048, 7168, 8192, 128, 176, 256.9}, {2048, 7168, 8192, 128, 192, 274.4},
};

// The bf16 form's model, used for this form before, chose the fastest tile at seven of the twelve shapes and lost
// up to 7 % (thirty-first session). With the form's own terms (kAccumulate* in the heuristic), refitted after
// the early scale reads made the wide and narrow tiles faster than 128x128, the plan's tile is within 0.5 % of
// the fastest at every shape (24576 x 1536 x 4096 on 128x192, 343.3 us against 128x128's 360.0). 32768 x 512 x 4096
// was the one miss (128x128, 2.4 % behind 128x176) until the form's plans modelled M to 32768 and offered 128x176
// at every N from K = 4096 (thirty-third session, kAccumulateMoves). Re-timed (forty-fourth session), that model was
// 1.6 % from the fastest on geometric mean and up to 5.3 % (128x160 or 128x176 where 128x192, 128x128 or 64x128 was
// faster, at six of the twelve); with kAccumulateWidePenalty the plan takes the fastest tile at all twelve.
TEST(Fp8GemmHeuristic, AccumulatingFormPicksItsFastestTile) {
  size_t shapes = 0;
  const std::vector<Judged> judged =
      judge_plan(kAccumulateSweep, true, &shapes, nullptr, Fp8GemmForm::kAccumulate);
  EXPECT_EQ(shapes, 12u);
  EXPECT_EQ(judged.size(), 12u);  // the plan's tile was measured at every shape
  expect_within_misses(judged, {}, 1.005);
}

// The weight-gradient form at short K (H200, first timed 2026-12-02, forty-first session; the rows below re-timed
// 2026-12-06, forty-sixth session, after the forty-third session's stage counts made 128x128 and 128x192 4-8 %
// faster: bench/probes/wgrad_small_k_tiles.py through the Python package, a 1 GB write flushing L2 before every
// call, the median of 30 CUDA-event timings after 3 warm-ups and 100 ms idle, us; every forced tile's D bitwise
// equal to the plan's): five weights' gradients (M x N) over K = 256..1024 tokens, every tile the form offers there
// but 64x32, with C (c=d: D += A . B^T, kReduceShortK) and without (c=None: D stored, kStoreShortK), timed one after
// the other.
const Measured kReduceShortK[] = {
    {4096, 7168, 256, 64, 64, 82.0}, {4096, 7168, 256, 64, 128, 70.9}, {4096, 7168, 256, 128, 64, 77.5},
    {4096, 7168, 256, 128, 128, 84.1}, {4096, 7168, 256, 128, 160, 93.5}, {4096, 7168, 256, 128, 176, 102.9},
    {4096, 7168, 256, 128, 192, 101.2}, {4096, 7168, 512, 64, 64, 107.4}, {4096, 7168, 512, 64, 128, 73.6},
    {4096, 7168, 512, 128, 64, 84.2}, {4096, 7168, 512, 128, 128, 82.3}, {4096, 7168, 512, 128, 160, 89.3},
    {4096, 7168, 512, 128, 176, 95.4}, {4096, 7168, 512, 128, 192, 93.0}, {4096, 7168, 768, 64, 64, 130.0},
    {4096, 7168, 768, 64, 128, 92.7}, {4096, 7168, 768, 128, 64, 90.1}, {4096, 7168, 768, 128, 128, 86.1},
    {4096, 7168, 768, 128, 160, 94.1}, {4096, 7168, 768, 128, 176, 98.3}, {4096, 7168, 768, 128, 192, 91.2},
    {4096, 7168, 1024, 64, 64, 148.8}, {4096, 7168, 1024, 64, 128, 109.9}, {4096, 7168, 1024, 128, 64, 106.7},
    {4096, 7168, 1024, 128, 128, 95.4}, {4096, 7168, 1024, 128, 160, 93.5}, {4096, 7168, 1024, 128, 176, 95.3},
    {4096, 7168, 1024, 128, 192, 100.0}, {7168, 2048, 256, 64, 64, 44.8}, {7168, 2048, 256, 64, 128, 36.1},
    {7168, 2048, 256, 128, 64, 38.6}, {7168, 2048, 256, 128, 128, 40.9}, {7168, 2048, 256, 128, 160, 46.8},
    {7168, 2048, 256, 128, 176, 53.8}, {7168, 2048, 256, 128, 192, 48.9}, {7168, 2048, 512, 64, 64, 57.3},
    {7168, 2048, 512, 64, 128, 39.6}, {7168, 2048, 512, 128, 64, 44.6}, {7168, 2048, 512, 128, 128, 41.7},
    {7168, 2048, 512, 128, 160, 45.7}, {7168, 2048, 512, 128, 176, 51.5}, {7168, 2048, 512, 128, 192, 46.8},
    {7168, 2048, 768, 64, 64, 68.7}, {7168, 2048, 768, 64, 128, 49.4}, {7168, 2048, 768, 128, 64, 47.5},
    {7168, 2048, 768, 128, 128, 44.1}, {7168, 2048, 768, 128, 160, 50.1}, {7168, 2048, 768, 128, 176, 57.6},
    {7168, 2048, 768, 128, 192, 47.8}, {7168, 2048, 1024, 64, 64, 78.5}, {7168, 2048, 1024, 64, 128, 58.0},
    {7168, 2048, 1024, 128, 64, 55.7}, {7168, 2048, 1024, 128, 128, 48.2}, {7168, 2048, 1024, 128, 160, 51.1},
    {7168, 2048, 1024, 128, 176, 57.9}, {7168, 2048, 1024, 128, 192, 52.4}, {2048, 7168, 256, 64, 64, 44.3},
    {2048, 7168, 256, 64, 128, 37.3}, {2048, 7168, 256, 128, 64, 40.0}, {2048, 7168, 256, 128, 128, 42.6},
    {2048, 7168, 256, 128, 160, 47.9}, {2048, 7168, 256, 128, 176, 50.2}, {2048, 7168, 256, 128, 192, 49.7},
    {2048, 7168, 512, 64, 64, 57.2}, {2048, 7168, 512, 64, 128, 42.6}, {2048, 7168, 512, 128, 64, 45.4},
    {2048, 7168, 512, 128, 128, 44.4}, {2048, 7168, 512, 128, 160, 48.2}, {2048, 7168, 512, 128, 176, 50.1},
    {2048, 7168, 512, 128, 192, 48.9}, {2048, 7168, 768, 64, 64, 68.8}, {2048, 7168, 768, 64, 128, 49.5},
    {2048, 7168, 768, 128, 64, 48.2}, {2048, 7168, 768, 128, 128, 46.3}, {2048, 7168, 768, 128, 160, 51.9},
    {2048, 7168, 768, 128, 176, 52.1}, {2048, 7168, 768, 128, 192, 49.9}, {2048, 7168, 1024, 64, 64, 78.8},
    {2048, 7168, 1024, 64, 128, 57.8}, {2048, 7168, 1024, 128, 64, 55.0}, {2048, 7168, 1024, 128, 128, 52.6},
    {2048, 7168, 1024, 128, 160, 53.8}, {2048, 7168, 1024, 128, 176, 51.8}, {2048, 7168, 1024, 128, 192, 55.2},
    {7168, 2112, 256, 64, 64, 45.7}, {7168, 2112, 256, 64, 128, 36.7}, {7168, 2112, 256, 128, 64, 37.9},
    {7168, 2112, 256, 128, 128, 43.4}, {7168, 2112, 256, 128, 160, 46.0}, {7168, 2112, 256, 128, 176, 54.7},
    {7168, 2112, 256, 128, 192, 49.8}, {7168, 2112, 512, 64, 64, 57.9}, {7168, 2112, 512, 64, 128, 41.6},
    {7168, 2112, 512, 128, 64, 43.6}, {7168, 2112, 512, 128, 128, 43.1}, {7168, 2112, 512, 128, 160, 45.2},
    {7168, 2112, 512, 128, 176, 52.4}, {7168, 2112, 512, 128, 192, 47.8}, {7168, 2112, 768, 64, 64, 69.0},
    {7168, 2112, 768, 64, 128, 52.6}, {7168, 2112, 768, 128, 64, 48.3}, {7168, 2112, 768, 128, 128, 47.9},
    {7168, 2112, 768, 128, 160, 48.5}, {7168, 2112, 768, 128, 176, 58.0}, {7168, 2112, 768, 128, 192, 48.6},
    {7168, 2112, 1024, 64, 64, 79.4}, {7168, 2112, 1024, 64, 128, 61.6}, {7168, 2112, 1024, 128, 64, 55.1},
    {7168, 2112, 1024, 128, 128, 55.0}, {7168, 2112, 1024, 128, 160, 51.9}, {7168, 2112, 1024, 128, 176, 57.7},
    {7168, 2112, 1024, 128, 192, 52.7}, {1536, 7168, 256, 64, 64, 34.8}, {1536, 7168, 256, 64, 128, 29.6},
    {1536, 7168, 256, 128, 64, 31.6}, {1536, 7168, 256, 128, 128, 34.8}, {1536, 7168, 256, 128, 160, 38.4},
    {1536, 7168, 256, 128, 176, 38.5}, {1536, 7168, 256, 128, 192, 39.6}, {1536, 7168, 512, 64, 64, 44.5},
    {1536, 7168, 512, 64, 128, 32.6}, {1536, 7168, 512, 128, 64, 36.4}, {1536, 7168, 512, 128, 128, 35.7},
    {1536, 7168, 512, 128, 160, 38.6}, {1536, 7168, 512, 128, 176, 39.4}, {1536, 7168, 512, 128, 192, 38.9},
    {1536, 7168, 768, 64, 64, 53.1}, {1536, 7168, 768, 64, 128, 39.6}, {1536, 7168, 768, 128, 64, 38.3},
    {1536, 7168, 768, 128, 128, 39.2}, {1536, 7168, 768, 128, 160, 42.8}, {1536, 7168, 768, 128, 176, 42.4},
    {1536, 7168, 768, 128, 192, 41.3}, {1536, 7168, 1024, 64, 64, 60.5}, {1536, 7168, 1024, 64, 128, 46.5},
    {1536, 7168, 1024, 128, 64, 44.6}, {1536, 7168, 1024, 128, 128, 45.3}, {1536, 7168, 1024, 128, 160, 45.5},
    {1536, 7168, 1024, 128, 176, 42.6}, {1536, 7168, 1024, 128, 192, 45.2},
};
const Measured kStoreShortK[] = {
    {4096, 7168, 256, 64, 64, 79.0}, {4096, 7168, 256, 64, 128, 52.0}, {4096, 7168, 256, 128, 64, 50.6},
    {4096, 7168, 256, 128, 128, 41.5}, {4096, 7168, 256, 128, 160, 41.5}, {4096, 7168, 256, 128, 176, 42.9},
    {4096, 7168, 256, 128, 192, 43.5}, {4096, 7168, 512, 64, 64, 103.5}, {4096, 7168, 512, 64, 128, 70.2},
    {4096, 7168, 512, 128, 64, 67.3}, {4096, 7168, 512, 128, 128, 52.7}, {4096, 7168, 512, 128, 160, 54.2},
    {4096, 7168, 512, 128, 176, 57.6}, {4096, 7168, 512, 128, 192, 58.0}, {4096, 7168, 768, 64, 64, 123.8},
    {4096, 7168, 768, 64, 128, 89.0}, {4096, 7168, 768, 128, 64, 84.7}, {4096, 7168, 768, 128, 128, 68.7},
    {4096, 7168, 768, 128, 160, 70.0}, {4096, 7168, 768, 128, 176, 72.2}, {4096, 7168, 768, 128, 192, 74.6},
    {4096, 7168, 1024, 64, 64, 143.4}, {4096, 7168, 1024, 64, 128, 106.1}, {4096, 7168, 1024, 128, 64, 101.9},
    {4096, 7168, 1024, 128, 128, 84.6}, {4096, 7168, 1024, 128, 160, 85.7}, {4096, 7168, 1024, 128, 176, 87.7},
    {4096, 7168, 1024, 128, 192, 90.4}, {7168, 2048, 256, 64, 64, 42.9}, {7168, 2048, 256, 64, 128, 28.9},
    {7168, 2048, 256, 128, 64, 28.0}, {7168, 2048, 256, 128, 128, 23.0}, {7168, 2048, 256, 128, 160, 24.2},
    {7168, 2048, 256, 128, 176, 28.0}, {7168, 2048, 256, 128, 192, 24.6}, {7168, 2048, 512, 64, 64, 55.4},
    {7168, 2048, 512, 64, 128, 38.5}, {7168, 2048, 512, 128, 64, 37.7}, {7168, 2048, 512, 128, 128, 30.4},
    {7168, 2048, 512, 128, 160, 32.8}, {7168, 2048, 512, 128, 176, 36.9}, {7168, 2048, 512, 128, 192, 32.4},
    {7168, 2048, 768, 64, 64, 62.1}, {7168, 2048, 768, 64, 128, 47.7}, {7168, 2048, 768, 128, 64, 46.4},
    {7168, 2048, 768, 128, 128, 38.0}, {7168, 2048, 768, 128, 160, 41.4}, {7168, 2048, 768, 128, 176, 45.6},
    {7168, 2048, 768, 128, 192, 40.4}, {7168, 2048, 1024, 64, 64, 75.0}, {7168, 2048, 1024, 64, 128, 56.6},
    {7168, 2048, 1024, 128, 64, 53.8}, {7168, 2048, 1024, 128, 128, 44.9}, {7168, 2048, 1024, 128, 160, 49.3},
    {7168, 2048, 1024, 128, 176, 54.3}, {7168, 2048, 1024, 128, 192, 47.9}, {2048, 7168, 256, 64, 64, 43.2},
    {2048, 7168, 256, 64, 128, 29.2}, {2048, 7168, 256, 128, 64, 28.1}, {2048, 7168, 256, 128, 128, 23.3},
    {2048, 7168, 256, 128, 160, 24.6}, {2048, 7168, 256, 128, 176, 24.9}, {2048, 7168, 256, 128, 192, 24.8},
    {2048, 7168, 512, 64, 64, 55.4}, {2048, 7168, 512, 64, 128, 38.4}, {2048, 7168, 512, 128, 64, 36.6},
    {2048, 7168, 512, 128, 128, 30.6}, {2048, 7168, 512, 128, 160, 32.6}, {2048, 7168, 512, 128, 176, 32.3},
    {2048, 7168, 512, 128, 192, 32.8}, {2048, 7168, 768, 64, 64, 65.1}, {2048, 7168, 768, 64, 128, 47.5},
    {2048, 7168, 768, 128, 64, 45.7}, {2048, 7168, 768, 128, 128, 38.1}, {2048, 7168, 768, 128, 160, 41.3},
    {2048, 7168, 768, 128, 176, 39.5}, {2048, 7168, 768, 128, 192, 40.8}, {2048, 7168, 1024, 64, 64, 75.9},
    {2048, 7168, 1024, 64, 128, 56.4}, {2048, 7168, 1024, 128, 64, 53.4}, {2048, 7168, 1024, 128, 128, 45.3},
    {2048, 7168, 1024, 128, 160, 49.1}, {2048, 7168, 1024, 128, 176, 46.9}, {2048, 7168, 1024, 128, 192, 48.8},
    {7168, 2112, 256, 64, 64, 43.6}, {7168, 2112, 256, 64, 128, 30.7}, {7168, 2112, 256, 128, 64, 27.9},
    {7168, 2112, 256, 128, 128, 23.6}, {7168, 2112, 256, 128, 160, 23.9}, {7168, 2112, 256, 128, 176, 28.1},
    {7168, 2112, 256, 128, 192, 24.8}, {7168, 2112, 512, 64, 64, 55.9}, {7168, 2112, 512, 64, 128, 40.8},
    {7168, 2112, 512, 128, 64, 35.5}, {7168, 2112, 512, 128, 128, 31.9}, {7168, 2112, 512, 128, 160, 32.7},
    {7168, 2112, 512, 128, 176, 36.7}, {7168, 2112, 512, 128, 192, 32.6}, {7168, 2112, 768, 64, 64, 65.6},
    {7168, 2112, 768, 64, 128, 50.7}, {7168, 2112, 768, 128, 64, 45.2}, {7168, 2112, 768, 128, 128, 41.1},
    {7168, 2112, 768, 128, 160, 41.0}, {7168, 2112, 768, 128, 176, 45.3}, {7168, 2112, 768, 128, 192, 41.1},
    {7168, 2112, 1024, 64, 64, 76.1}, {7168, 2112, 1024, 64, 128, 60.5}, {7168, 2112, 1024, 128, 64, 52.1},
    {7168, 2112, 1024, 128, 128, 49.3}, {7168, 2112, 1024, 128, 160, 49.1}, {7168, 2112, 1024, 128, 176, 53.6},
    {7168, 2112, 1024, 128, 192, 48.7}, {1536, 7168, 256, 64, 64, 33.6}, {1536, 7168, 256, 64, 128, 23.8},
    {1536, 7168, 256, 128, 64, 23.1}, {1536, 7168, 256, 128, 128, 20.4}, {1536, 7168, 256, 128, 160, 21.2},
    {1536, 7168, 256, 128, 176, 21.1}, {1536, 7168, 256, 128, 192, 21.1}, {1536, 7168, 512, 64, 64, 43.0},
    {1536, 7168, 512, 64, 128, 31.2}, {1536, 7168, 512, 128, 64, 29.8}, {1536, 7168, 512, 128, 128, 26.7},
    {1536, 7168, 512, 128, 160, 28.1}, {1536, 7168, 512, 128, 176, 27.0}, {1536, 7168, 512, 128, 192, 27.6},
    {1536, 7168, 768, 64, 64, 50.8}, {1536, 7168, 768, 64, 128, 38.7}, {1536, 7168, 768, 128, 64, 36.9},
    {1536, 7168, 768, 128, 128, 33.2}, {1536, 7168, 768, 128, 160, 35.0}, {1536, 7168, 768, 128, 176, 32.7},
    {1536, 7168, 768, 128, 192, 33.9}, {1536, 7168, 1024, 64, 64, 58.9}, {1536, 7168, 1024, 64, 128, 45.4},
    {1536, 7168, 1024, 128, 64, 43.0}, {1536, 7168, 1024, 128, 128, 39.4}, {1536, 7168, 1024, 128, 160, 41.7},
    {1536, 7168, 1024, 128, 176, 38.7}, {1536, 7168, 1024, 128, 192, 40.1},
};

// 128x176 at an N it does not divide, as the weight-gradient form's plans offer it (offered_at in the heuristic): with
// C from K = 2048 (16 K blocks, kRagged176ReduceMinKBlocks), without C at every K (forty-second session).
bool offered_with_c(const Measured& s) { return s.block_n != 176 || s.n % 176 == 0 || (s.k + 127) / 128 >= 16; }
bool offered_without_c(const Measured&) { return true; }

// With C the plan had taken 128-row tiles at every shape, 13-23 % behind 64x128 or 64x64 at K <= 512. With the
// short-K reduce-add term (kReduceShortKSlowdown) it takes 64x128 up to K = 512, the fastest tile there.
// At K = 768 the forty-third session's stage counts made 128x128 the H200's fastest (the forty-first session's 64x128
// took 1.03-1.12x its time at four weights); the term fading out at 7 K blocks rather than 8 takes 128-row tiles there
// since the forty-seventh session: 0.8 % from the fastest on geometric mean over the twenty calls (1.7 % before). Its
// misses: 128x160 where 128x128 is 9 % faster at 4096 x 7168 x 768, and 64x128 3 % behind 128x64 at 1536 x 7168 x 768.
TEST(Fp8GemmHeuristic, AccumulatingFormWithCTakes64RowTilesAtShortK) {
  size_t shapes = 0;
  const std::vector<Judged> judged =
      judge_plan(kReduceShortK, true, &shapes, offered_with_c, Fp8GemmForm::kAccumulate);
  EXPECT_EQ(shapes, 20u);
  EXPECT_EQ(judged.size(), 20u);
  const double log_loss = expect_within_misses(judged, {{4096, 7168, 768, 1.10}, {1536, 7168, 768, 1.04}}, 1.02);
  EXPECT_LT(log_loss, 20 * std::log(1.009));  // 1.0083
  // 64x128 to K = 512, 128-row tiles from 1024 (at 768 both, as above).
  for (const Judged& j : judged)
    if (j.shape->k != 768)
      EXPECT_EQ(j.chosen.rfind(j.shape->k <= 512 ? "64x128, " : "128x", 0), 0u) << j.shape->k << ": " << j.chosen;
  // 7168 x 2112 at K = 768 and 1024 moved from 128x160 to 128x192 (kAccumulateWidePenalty): 1.5 % from the fastest.
  for (const int64_t k : {768, 1024})
    expect_tile_at(fp8_gemm_plan(kH200, 2112, k, {}, Fp8GemmForm::kAccumulate), 7168, 128, 192);
}

// The same five weights with C on an H100 (2026-12-06, forty-fifth session at K = 256..1024 with the H100's ring
// lengths, bench/wgrad_small_k_tiles_2026-12-06_h100_short_k_lead_ring.json; forty-seventh at K = 1280..2048,
// ..._h100_short_k_long.json; bench/probes/wgrad_small_k_tiles.py, as kReduceShortK), us. 64x128 is the fastest tile or
// within 4 % of 64x64 at K <= 1024 at every weight; from K = 1280 128-row tiles are, 64x128 taking 1.04-1.17x the
// fastest time at four of the five weights (1.009 at 1536 x 7168 x 1280). Random calls did not bear that out (below).
const Measured kReduceShortKH100[] = {
    {4096, 7168, 256, 64, 64, 94.4}, {4096, 7168, 256, 64, 128, 97.6}, {4096, 7168, 256, 128, 64, 101.8},
    {4096, 7168, 256, 128, 128, 115.4}, {4096, 7168, 256, 128, 160, 128.0}, {4096, 7168, 256, 128, 176, 139.3},
    {4096, 7168, 256, 128, 192, 136.8}, {4096, 7168, 512, 64, 64, 101.5}, {4096, 7168, 512, 64, 128, 98.3},
    {4096, 7168, 512, 128, 64, 108.0}, {4096, 7168, 512, 128, 128, 112.7}, {4096, 7168, 512, 128, 160, 119.0},
    {4096, 7168, 512, 128, 176, 128.7}, {4096, 7168, 512, 128, 192, 126.4}, {4096, 7168, 768, 64, 64, 128.0},
    {4096, 7168, 768, 64, 128, 103.6}, {4096, 7168, 768, 128, 64, 111.1}, {4096, 7168, 768, 128, 128, 115.1},
    {4096, 7168, 768, 128, 160, 123.7}, {4096, 7168, 768, 128, 176, 129.0}, {4096, 7168, 768, 128, 192, 117.2},
    {4096, 7168, 1024, 64, 64, 143.4}, {4096, 7168, 1024, 64, 128, 110.4}, {4096, 7168, 1024, 128, 64, 123.6},
    {4096, 7168, 1024, 128, 128, 114.5}, {4096, 7168, 1024, 128, 160, 119.3}, {4096, 7168, 1024, 128, 176, 123.0},
    {4096, 7168, 1024, 128, 192, 125.1}, {4096, 7168, 1280, 64, 64, 174.9}, {4096, 7168, 1280, 64, 128, 129.1},
    {4096, 7168, 1280, 128, 64, 132.6}, {4096, 7168, 1280, 128, 128, 121.3}, {4096, 7168, 1280, 128, 160, 120.7},
    {4096, 7168, 1280, 128, 176, 125.8}, {4096, 7168, 1280, 128, 192, 125.8}, {4096, 7168, 1536, 64, 64, 188.6},
    {4096, 7168, 1536, 64, 128, 146.4}, {4096, 7168, 1536, 128, 64, 147.5}, {4096, 7168, 1536, 128, 128, 133.4},
    {4096, 7168, 1536, 128, 160, 128.8}, {4096, 7168, 1536, 128, 176, 131.7}, {4096, 7168, 1536, 128, 192, 138.0},
    {4096, 7168, 2048, 64, 64, 231.3}, {4096, 7168, 2048, 64, 128, 181.6}, {4096, 7168, 2048, 128, 64, 176.8},
    {4096, 7168, 2048, 128, 128, 159.9}, {4096, 7168, 2048, 128, 160, 157.4}, {4096, 7168, 2048, 128, 176, 159.2},
    {4096, 7168, 2048, 128, 192, 167.3}, {7168, 2048, 256, 64, 64, 45.9}, {7168, 2048, 256, 64, 128, 48.4},
    {7168, 2048, 256, 128, 64, 49.6}, {7168, 2048, 256, 128, 128, 55.5}, {7168, 2048, 256, 128, 160, 62.0},
    {7168, 2048, 256, 128, 176, 70.4}, {7168, 2048, 256, 128, 192, 63.8}, {7168, 2048, 512, 64, 64, 54.2},
    {7168, 2048, 512, 64, 128, 49.0}, {7168, 2048, 512, 128, 64, 55.1}, {7168, 2048, 512, 128, 128, 55.9},
    {7168, 2048, 512, 128, 160, 59.7}, {7168, 2048, 512, 128, 176, 67.0}, {7168, 2048, 512, 128, 192, 61.3},
    {7168, 2048, 768, 64, 64, 66.6}, {7168, 2048, 768, 64, 128, 49.6}, {7168, 2048, 768, 128, 64, 57.5},
    {7168, 2048, 768, 128, 128, 57.2}, {7168, 2048, 768, 128, 160, 62.8}, {7168, 2048, 768, 128, 176, 67.5},
    {7168, 2048, 768, 128, 192, 58.4}, {7168, 2048, 1024, 64, 64, 76.5}, {7168, 2048, 1024, 64, 128, 56.8},
    {7168, 2048, 1024, 128, 64, 65.8}, {7168, 2048, 1024, 128, 128, 59.0}, {7168, 2048, 1024, 128, 160, 61.6},
    {7168, 2048, 1024, 128, 176, 69.5}, {7168, 2048, 1024, 128, 192, 63.5}, {7168, 2048, 1280, 64, 64, 87.2},
    {7168, 2048, 1280, 64, 128, 65.7}, {7168, 2048, 1280, 128, 64, 72.4}, {7168, 2048, 1280, 128, 128, 61.1},
    {7168, 2048, 1280, 128, 160, 65.3}, {7168, 2048, 1280, 128, 176, 73.2}, {7168, 2048, 1280, 128, 192, 65.4},
    {7168, 2048, 1536, 64, 64, 99.3}, {7168, 2048, 1536, 64, 128, 74.8}, {7168, 2048, 1536, 128, 64, 78.9},
    {7168, 2048, 1536, 128, 128, 65.2}, {7168, 2048, 1536, 128, 160, 70.8}, {7168, 2048, 1536, 128, 176, 80.7},
    {7168, 2048, 1536, 128, 192, 71.8}, {7168, 2048, 2048, 64, 64, 121.3}, {7168, 2048, 2048, 64, 128, 93.7},
    {7168, 2048, 2048, 128, 64, 93.0}, {7168, 2048, 2048, 128, 128, 80.3}, {7168, 2048, 2048, 128, 160, 86.0},
    {7168, 2048, 2048, 128, 176, 97.9}, {7168, 2048, 2048, 128, 192, 88.0}, {2048, 7168, 256, 64, 64, 49.9},
    {2048, 7168, 256, 64, 128, 51.5}, {2048, 7168, 256, 128, 64, 54.5}, {2048, 7168, 256, 128, 128, 59.3},
    {2048, 7168, 256, 128, 160, 64.5}, {2048, 7168, 256, 128, 176, 68.9}, {2048, 7168, 256, 128, 192, 66.1},
    {2048, 7168, 512, 64, 64, 55.6}, {2048, 7168, 512, 64, 128, 52.3}, {2048, 7168, 512, 128, 64, 57.2},
    {2048, 7168, 512, 128, 128, 57.8}, {2048, 7168, 512, 128, 160, 61.8}, {2048, 7168, 512, 128, 176, 65.4},
    {2048, 7168, 512, 128, 192, 64.0}, {2048, 7168, 768, 64, 64, 67.3}, {2048, 7168, 768, 64, 128, 55.3},
    {2048, 7168, 768, 128, 64, 58.4}, {2048, 7168, 768, 128, 128, 62.1}, {2048, 7168, 768, 128, 160, 65.8},
    {2048, 7168, 768, 128, 176, 66.7}, {2048, 7168, 768, 128, 192, 62.4}, {2048, 7168, 1024, 64, 64, 76.3},
    {2048, 7168, 1024, 64, 128, 59.1}, {2048, 7168, 1024, 128, 64, 65.2}, {2048, 7168, 1024, 128, 128, 61.0},
    {2048, 7168, 1024, 128, 160, 65.1}, {2048, 7168, 1024, 128, 176, 64.4}, {2048, 7168, 1024, 128, 192, 66.4},
    {2048, 7168, 1280, 64, 64, 89.8}, {2048, 7168, 1280, 64, 128, 69.4}, {2048, 7168, 1280, 128, 64, 70.7},
    {2048, 7168, 1280, 128, 128, 66.7}, {2048, 7168, 1280, 128, 160, 68.6}, {2048, 7168, 1280, 128, 176, 67.5},
    {2048, 7168, 1280, 128, 192, 70.1}, {2048, 7168, 1536, 64, 64, 100.0}, {2048, 7168, 1536, 64, 128, 77.4},
    {2048, 7168, 1536, 128, 64, 77.9}, {2048, 7168, 1536, 128, 128, 72.2}, {2048, 7168, 1536, 128, 160, 74.3},
    {2048, 7168, 1536, 128, 176, 72.6}, {2048, 7168, 1536, 128, 192, 76.4}, {2048, 7168, 2048, 64, 64, 120.8},
    {2048, 7168, 2048, 64, 128, 95.8}, {2048, 7168, 2048, 128, 64, 94.6}, {2048, 7168, 2048, 128, 128, 85.6},
    {2048, 7168, 2048, 128, 160, 89.8}, {2048, 7168, 2048, 128, 176, 86.1}, {2048, 7168, 2048, 128, 192, 91.6},
    {7168, 2112, 256, 64, 64, 50.7}, {7168, 2112, 256, 64, 128, 51.4}, {7168, 2112, 256, 128, 64, 52.0},
    {7168, 2112, 256, 128, 128, 59.2}, {7168, 2112, 256, 128, 160, 63.5}, {7168, 2112, 256, 128, 176, 73.2},
    {7168, 2112, 256, 128, 192, 67.3}, {7168, 2112, 512, 64, 64, 56.9}, {7168, 2112, 512, 64, 128, 49.1},
    {7168, 2112, 512, 128, 64, 56.0}, {7168, 2112, 512, 128, 128, 58.7}, {7168, 2112, 512, 128, 160, 61.1},
    {7168, 2112, 512, 128, 176, 69.9}, {7168, 2112, 512, 128, 192, 63.8}, {7168, 2112, 768, 64, 64, 67.6},
    {7168, 2112, 768, 64, 128, 52.4}, {7168, 2112, 768, 128, 64, 57.3}, {7168, 2112, 768, 128, 128, 61.4},
    {7168, 2112, 768, 128, 160, 63.5}, {7168, 2112, 768, 128, 176, 70.0}, {7168, 2112, 768, 128, 192, 59.9},
    {7168, 2112, 1024, 64, 64, 77.8}, {7168, 2112, 1024, 64, 128, 60.9}, {7168, 2112, 1024, 128, 64, 65.4},
    {7168, 2112, 1024, 128, 128, 62.7}, {7168, 2112, 1024, 128, 160, 61.3}, {7168, 2112, 1024, 128, 176, 70.1},
    {7168, 2112, 1024, 128, 192, 64.0}, {7168, 2112, 1280, 64, 64, 89.8}, {7168, 2112, 1280, 64, 128, 72.0},
    {7168, 2112, 1280, 128, 64, 71.3}, {7168, 2112, 1280, 128, 128, 68.4}, {7168, 2112, 1280, 128, 160, 64.6},
    {7168, 2112, 1280, 128, 176, 74.1}, {7168, 2112, 1280, 128, 192, 67.9}, {7168, 2112, 1536, 64, 64, 101.7},
    {7168, 2112, 1536, 64, 128, 80.5}, {7168, 2112, 1536, 128, 64, 77.8}, {7168, 2112, 1536, 128, 128, 75.7},
    {7168, 2112, 1536, 128, 160, 70.3}, {7168, 2112, 1536, 128, 176, 80.6}, {7168, 2112, 1536, 128, 192, 72.9},
    {7168, 2112, 2048, 64, 64, 122.4}, {7168, 2112, 2048, 64, 128, 100.1}, {7168, 2112, 2048, 128, 64, 92.1},
    {7168, 2112, 2048, 128, 128, 91.5}, {7168, 2112, 2048, 128, 160, 87.9}, {7168, 2112, 2048, 128, 176, 98.1},
    {7168, 2112, 2048, 128, 192, 88.8}, {1536, 7168, 256, 64, 64, 38.2}, {1536, 7168, 256, 64, 128, 39.6},
    {1536, 7168, 256, 128, 64, 41.1}, {1536, 7168, 256, 128, 128, 45.9}, {1536, 7168, 256, 128, 160, 49.4},
    {1536, 7168, 256, 128, 176, 50.2}, {1536, 7168, 256, 128, 192, 49.3}, {1536, 7168, 512, 64, 64, 43.2},
    {1536, 7168, 512, 64, 128, 41.2}, {1536, 7168, 512, 128, 64, 44.1}, {1536, 7168, 512, 128, 128, 46.4},
    {1536, 7168, 512, 128, 160, 48.5}, {1536, 7168, 512, 128, 176, 50.6}, {1536, 7168, 512, 128, 192, 49.8},
    {1536, 7168, 768, 64, 64, 52.4}, {1536, 7168, 768, 64, 128, 41.6}, {1536, 7168, 768, 128, 64, 46.3},
    {1536, 7168, 768, 128, 128, 49.1}, {1536, 7168, 768, 128, 160, 51.9}, {1536, 7168, 768, 128, 176, 51.9},
    {1536, 7168, 768, 128, 192, 50.4}, {1536, 7168, 1024, 64, 64, 59.8}, {1536, 7168, 1024, 64, 128, 47.3},
    {1536, 7168, 1024, 128, 64, 51.1}, {1536, 7168, 1024, 128, 128, 51.2}, {1536, 7168, 1024, 128, 160, 53.9},
    {1536, 7168, 1024, 128, 176, 51.6}, {1536, 7168, 1024, 128, 192, 53.6}, {1536, 7168, 1280, 64, 64, 69.6},
    {1536, 7168, 1280, 64, 128, 55.9}, {1536, 7168, 1280, 128, 64, 57.4}, {1536, 7168, 1280, 128, 128, 57.3},
    {1536, 7168, 1280, 128, 160, 58.9}, {1536, 7168, 1280, 128, 176, 55.4}, {1536, 7168, 1280, 128, 192, 58.5},
    {1536, 7168, 1536, 64, 64, 77.3}, {1536, 7168, 1536, 64, 128, 62.3}, {1536, 7168, 1536, 128, 64, 62.0},
    {1536, 7168, 1536, 128, 128, 62.4}, {1536, 7168, 1536, 128, 160, 63.0}, {1536, 7168, 1536, 128, 176, 59.6},
    {1536, 7168, 1536, 128, 192, 63.1}, {1536, 7168, 2048, 64, 64, 92.5}, {1536, 7168, 2048, 64, 128, 76.6},
    {1536, 7168, 2048, 128, 64, 75.0}, {1536, 7168, 2048, 128, 128, 73.9}, {1536, 7168, 2048, 128, 160, 75.9},
    {1536, 7168, 2048, 128, 176, 71.6}, {1536, 7168, 2048, 128, 192, 75.6},
};

// The plan (the same on both cards: SMs and shared memory) at these calls: 3.6 % from an H100's fastest tile on
// geometric mean. Its misses are the 128-row tiles at K = 768 and 1024, where 64x128 was 3-19 % faster on the H100,
// 64x64 3-5 % ahead of 64x128 at K = 256 (the model overcosts 64x64's promotion, AccumulatingFormPicksItsFastestTile)
// and 128x192 where 128x160 was 4-5 % faster at 7168 x 2112. Random calls do not bear these weights out on the H100
// (bench/probes/wgrad_plan_moves.py): a term fading out at 13 K blocks, which they ask for (0.9 % here), took 24 calls it
// moved to 1.068 of their previous time (fade_13_c), and fading out at 7 rather than 8 (3.6 % here, 2.3 % with 8) took
// 20 to 0.974 (fade_7_c) and 20 more at K = 641..896 to 0.964 (fade_7_bulk_c).
TEST(Fp8GemmHeuristic, AccumulatingFormWithCAtShortKOnAnH100) {
  size_t shapes = 0;
  const std::vector<Judged> judged =
      judge_plan(kReduceShortKH100, true, &shapes, offered_with_c, Fp8GemmForm::kAccumulate);
  EXPECT_EQ(shapes, 35u);
  EXPECT_EQ(judged.size(), 35u);
  const double log_loss = expect_within_misses(
      judged,
      {{1536, 7168, 256, 1.04}, {2048, 7168, 256, 1.04}, {4096, 7168, 256, 1.04}, {7168, 2048, 256, 1.06},
       {2048, 7168, 768, 1.13}, {4096, 7168, 768, 1.20}, {7168, 2048, 768, 1.16}, {7168, 2112, 768, 1.15},
       {1536, 7168, 1024, 1.14}, {2048, 7168, 1024, 1.04}, {4096, 7168, 1024, 1.09}, {7168, 2048, 1024, 1.04},
       {7168, 2112, 1024, 1.06}, {7168, 2112, 1280, 1.06}, {1536, 7168, 1280, 1.05}, {7168, 2112, 1536, 1.04}},
      1.02);
  EXPECT_LT(log_loss, 35 * std::log(1.036));  // 1.0359
}

// Without C the epilogue reads nothing of D: the reduce-add term does not apply, and at short K the plan counts the
// 4 bytes an element it stores (kStoredShortKBytes). With 8, as both kinds of call were planned before, it was 2.7 %
// from the fastest on geometric mean, 11-13 % at 7168 x 2112 x 256 (128x64) and 1536 x 7168 x 256 and 512 (64x128);
// with 4, 1.5 % from the fastest tile it offered, but 3.5 % from the fastest timed: 128x176 at N = 7168, which it
// did not offer below K = 4096, was 7-11 % faster than its choice at the 1536- and 2048-row shapes. Offered there
// since the forty-second session (kRagged176WithoutC), it is the plan's tile at eight of the twenty calls. Re-timed
// after the forty-third session's stage counts, 128x128 is the H200's fastest tile at most of these calls, and
// 3.4-5.1 % ahead of the plan's 128x176 at 4096 and 2048 x 7168 x 768 and 1024 and 1536 x 7168 x 256: 1.4 % from the
// fastest on geometric mean over the twenty (0.6 % on the rows before).
TEST(Fp8GemmHeuristic, AccumulatingFormWithoutCCountsItsStoresAtShortK) {
  size_t shapes = 0;
  const std::vector<Judged> judged =
      judge_plan(kStoreShortK, true, &shapes, offered_without_c, Fp8GemmForm::kFp32Store);
  EXPECT_EQ(shapes, 20u);
  EXPECT_EQ(judged.size(), 20u);
  const double log_loss = expect_within_misses(judged, {{4096, 7168, 768, 1.06},
                                                        {4096, 7168, 1024, 1.04},
                                                        {2048, 7168, 768, 1.04},
                                                        {2048, 7168, 1024, 1.04},
                                                        {1536, 7168, 256, 1.04}},
                                               1.03);
  EXPECT_LT(log_loss, 20 * std::log(1.014));  // 1.0136
}

// 128x144 in place of 128x160 where 144 divides N, from K = 4096 (kWhole144Penalty, kWhole144MinKBlocks; H200,
// 2026-12-01, thirty-third session, probes through the Python package: the L2 flushed by a 1 GB write before every
// call, the median of 20 after 3 warm-ups and 100 ms idle, two passes of opposite order averaged, the two tiles'
// results bitwise equal): every shape of a random sample of the runs of M the swap moves (N = 576 and 1152, K =
// 4096..16384; 4096 x 576 x 7168 is a benchmark shape) and of N = 17856..36288 at M <= 384, each 128x160 then
// 128x144: 0.961 on geometric mean over 33 shapes (0.935-1.004). At N = 144..1296 at M the plan serves with other
// tiles, 144 timed 0.941-0.984 of 160 too. Offered as a candidate (not kept), 128x144 moved 1523 runs through the
// pruning, 0.999 over 40 timed moves to 144 (0.917-1.230: up to 23 % slower at K = 512) and 1.036 over 30 moves
// elsewhere; swapped where the model put it ahead only on average, it lost 2-5 % at 1088 and 3200 x 18432.
const Measured kWhole144[] = {
    {7744, 576, 4096, 128, 160, 35.6}, {7744, 576, 4096, 128, 144, 34.4}, {7040, 576, 4096, 128, 160, 35.0},
    {7040, 576, 4096, 128, 144, 33.6}, {12416, 576, 4096, 128, 160, 51.2}, {12416, 576, 4096, 128, 144, 48.9},
    {6912, 576, 4096, 128, 160, 34.7}, {6912, 576, 4096, 128, 144, 33.6}, {3648, 576, 7168, 128, 160, 30.8},
    {3648, 576, 7168, 128, 144, 30.0}, {7936, 576, 7168, 128, 160, 57.2}, {7936, 576, 7168, 128, 144, 54.4},
    {7296, 576, 7168, 128, 160, 56.2}, {7296, 576, 7168, 128, 144, 53.6}, {3456, 576, 7168, 128, 160, 30.2},
    {3456, 576, 7168, 128, 144, 29.4}, {7104, 576, 16384, 128, 160, 125.4}, {7104, 576, 16384, 128, 144, 119.2},
    {3520, 576, 16384, 128, 160, 61.2}, {3520, 576, 16384, 128, 144, 57.7}, {7552, 576, 16384, 128, 160, 126.8},
    {7552, 576, 16384, 128, 144, 120.6}, {11392, 576, 16384, 128, 160, 188.4}, {11392, 576, 16384, 128, 144, 178.9},
    {4224, 1152, 4096, 128, 160, 36.0}, {4224, 1152, 4096, 128, 144, 34.8}, {6016, 1152, 4096, 128, 160, 50.3},
    {6016, 1152, 4096, 128, 144, 48.0}, {1856, 1152, 4096, 128, 160, 20.5}, {1856, 1152, 4096, 128, 144, 20.1},
    {5696, 1152, 4096, 128, 160, 49.9}, {5696, 1152, 4096, 128, 144, 47.4}, {1984, 1152, 7168, 128, 160, 31.4},
    {1984, 1152, 7168, 128, 144, 30.2}, {3776, 1152, 7168, 128, 160, 56.1}, {3776, 1152, 7168, 128, 144, 53.0},
    {3840, 1152, 7168, 128, 160, 56.2}, {3840, 1152, 7168, 128, 144, 53.1}, {4032, 1152, 16384, 128, 160, 126.6},
    {4032, 1152, 16384, 128, 144, 119.5}, {5824, 1152, 16384, 128, 160, 185.6}, {5824, 1152, 16384, 128, 144, 175.8},
    {4160, 1152, 16384, 128, 160, 127.6}, {4160, 1152, 16384, 128, 144, 120.2}, {5696, 1152, 16384, 128, 160, 184.9},
    {5696, 1152, 16384, 128, 144, 175.2}, {4096, 576, 7168, 128, 160, 31.8}, {4096, 576, 7168, 128, 144, 30.9},
    {9000, 144, 7168, 128, 160, 33.7}, {9000, 144, 7168, 128, 144, 33.2}, {12000, 288, 4096, 128, 160, 36.8},
    {12000, 288, 4096, 128, 144, 35.8}, {9000, 720, 4096, 128, 160, 50.9}, {9000, 720, 4096, 128, 144, 48.6},
    {32, 17856, 7168, 128, 160, 41.0}, {32, 17856, 7168, 128, 144, 41.1}, {64, 17856, 4096, 128, 160, 26.5},
    {64, 17856, 4096, 128, 144, 26.5}, {256, 17856, 16384, 128, 160, 131.9}, {256, 17856, 16384, 128, 144, 125.3},
    {384, 19008, 7168, 128, 160, 89.2}, {384, 19008, 7168, 128, 144, 83.4}, {128, 35712, 7168, 128, 160, 80.4},
    {128, 35712, 7168, 128, 144, 78.6}, {100, 36288, 4096, 128, 160, 48.4}, {100, 36288, 4096, 128, 144, 47.7},
};

TEST(Fp8GemmHeuristic, Whole144TilesReplace160WhereTheyDivideN) {
  size_t shapes = 0;
  const std::vector<Judged> judged = judge_plan(kWhole144, false, &shapes);
  EXPECT_EQ(shapes, 33u);
  EXPECT_EQ(judged.size(), 33u);
  EXPECT_LT(expect_within_misses(judged, {}, 1.005), 0.01);
  for (const Judged& j : judged) EXPECT_EQ(j.chosen.rfind("128x144, ", 0), 0u) << j.chosen;
  // A swap, never an addition: 144 where 160 was (from K = 4096; at 2304 x 7168 no 160 kernel is ahead of it
  // at every interval it serves), and the plans stay well formed.
  for (const auto& [n, k] : {std::pair{576, 7168}, {1152, 4096}, {576, 2048}, {2304, 7168}}) {
    const Fp8GemmPlan plan = fp8_gemm_plan(kH200, n, k);
    bool has_144 = false, has_160 = false;
    for (const Fp8GemmConfig& c : plan.kernels) {
      has_144 = has_144 || c.block_n == 144;
      has_160 = has_160 || c.block_n == 160;
    }
    EXPECT_FALSE(has_144 && has_160) << n << " x " << k;
    EXPECT_EQ(has_144, k >= 4096 && (n == 576 || n == 1152)) << n << " x " << k;
    expect_well_formed(plan);
  }
  // Never in the weight-gradient form, nor where the caller picks the tile.
  for (const Fp8GemmConfig& c : fp8_gemm_plan(kH200, 576, 7168, {}, Fp8GemmForm::kAccumulate).kernels)
    EXPECT_NE(c.block_n, 144);
  Fp8GemmOverrides forced;
  forced.block_m = 128;
  forced.block_n = 160;
  for (const Fp8GemmConfig& c : fp8_gemm_plan(kH200, 576, 7168, forced).kernels) EXPECT_EQ(c.block_n, 160);
}

// The weight-gradient form's plans over M to 32768 (its M is a weight's rows, kFp8GemmAccumulateSampledMaxM) and
// with 128x176 at every N from K = 4096 (offered_at): where they moved a run of M against the thirty-second
// session's plans (N 256..16384 x K 2048..8192, M 64..32768 in steps of 64), one M drawn at random from each run
// (and from the part above 16384, where a single tail kernel served before, separately), timed on the H200
// (2026-12-01, thirty-third session, probe through the Python package: the L2 flushed by a 1 GB write before
// every call, the median of 20 after 3 warm-ups and 100 ms idle, two passes of opposite order averaged; the two
// tiles' results bitwise equal): the previous plan's tile, then the new one. 0.966 on geometric mean over 74
// shapes (0.864-1.016); 53 faster by over 1 %, 3 slower by over 1 % (at most 1.6 %). Of bench/fp8_gemm_wgrad_bench.py's
// shapes 32768 x 512 moved (128x128 to 128x176: 171.6 -> 167.7 us at K = 4096, 317.0 -> 302.1 at 8192).
// The rows below are the same pairs re-timed on the H200 after the forty-third session's stage counts made 128x128
// and 128x192 faster (forty-sixth session, 2026-12-06, bench/probes/wgrad_small_k_tiles.py --c-only --test-table
// kAccumulateMoves, the median of 30 after 100 ms idle, D's bits equal): the new tile 0.987 of the previous one on
// geometric mean (0.915-1.074), and no pair's order flipped against the forty-fourth session's H100 rows.
const Measured kAccumulateMoves[] = {
    {30016, 256, 2048, 128, 64, 54.4}, {30016, 256, 2048, 128, 128, 51.6}, {18304, 256, 4096, 128, 128, 65.8},
    {18304, 256, 4096, 128, 64, 62.5}, {22464, 512, 2048, 128, 128, 69.8}, {22464, 512, 2048, 128, 192, 70.4},
    {13632, 512, 4096, 128, 128, 84.0}, {13632, 512, 4096, 128, 176, 87.8}, {31552, 512, 4096, 128, 128, 162.5},
    {31552, 512, 4096, 128, 176, 169.2}, {9344, 512, 4096, 128, 192, 63.6}, {9344, 512, 4096, 128, 176, 60.8},
    {14656, 512, 8192, 128, 128, 155.3}, {14656, 512, 8192, 128, 176, 160.0}, {30208, 512, 8192, 128, 128, 299.2},
    {30208, 512, 8192, 128, 176, 308.0}, {8576, 512, 8192, 128, 192, 114.4}, {8576, 512, 8192, 128, 176, 108.0},
    {23232, 576, 2048, 128, 192, 86.2}, {23232, 576, 2048, 128, 128, 79.4}, {29184, 576, 2048, 128, 192, 102.9},
    {29184, 576, 2048, 128, 160, 101.2}, {17984, 576, 2048, 128, 192, 70.8}, {17984, 576, 2048, 128, 64, 67.1},
    {23552, 576, 4096, 128, 192, 152.4}, {23552, 576, 4096, 128, 128, 140.9}, {28224, 576, 4096, 128, 192, 179.2},
    {28224, 576, 4096, 128, 160, 179.3}, {23168, 576, 8192, 128, 192, 275.3}, {23168, 576, 8192, 128, 128, 261.1},
    {29184, 576, 8192, 128, 192, 328.6}, {29184, 576, 8192, 128, 160, 333.2}, {26432, 768, 2048, 128, 128, 111.4},
    {26432, 768, 2048, 128, 160, 112.0}, {20352, 768, 2048, 128, 128, 89.2}, {20352, 768, 2048, 128, 192, 86.0},
    {23296, 768, 4096, 128, 128, 178.3}, {23296, 768, 4096, 128, 160, 177.2}, {28352, 768, 4096, 128, 128, 213.0},
    {28352, 768, 4096, 128, 192, 205.2}, {23296, 768, 8192, 128, 128, 334.2}, {23296, 768, 8192, 128, 160, 331.9},
    {29248, 768, 8192, 128, 128, 408.2}, {29248, 768, 8192, 128, 192, 380.2}, {21376, 1024, 2048, 128, 128, 119.6},
    {21376, 1024, 2048, 128, 160, 125.9}, {7616, 1024, 4096, 128, 128, 82.4}, {7616, 1024, 4096, 128, 176, 87.0},
    {30976, 1024, 4096, 128, 128, 288.2}, {30976, 1024, 4096, 128, 176, 295.1}, {5376, 1024, 4096, 128, 192, 63.2},
    {5376, 1024, 4096, 128, 176, 60.1}, {14016, 1024, 8192, 128, 128, 262.2}, {14016, 1024, 8192, 128, 176, 257.2},
    {31680, 1024, 8192, 128, 128, 576.8}, {31680, 1024, 8192, 128, 176, 601.2}, {5248, 1024, 8192, 128, 192, 114.8},
    {5248, 1024, 8192, 128, 176, 107.7}, {20224, 1536, 2048, 128, 128, 160.3}, {20224, 1536, 2048, 128, 160, 162.5},
    {18752, 1536, 2048, 128, 128, 151.2}, {18752, 1536, 2048, 128, 192, 146.3}, {9152, 1536, 4096, 128, 128, 141.0},
    {9152, 1536, 4096, 128, 176, 139.8}, {12992, 1536, 4096, 128, 160, 198.1}, {12992, 1536, 4096, 128, 176, 192.0},
    {17792, 1536, 4096, 128, 192, 257.7}, {17792, 1536, 4096, 128, 128, 253.3}, {21312, 1536, 4096, 128, 192, 309.1},
    {21312, 1536, 4096, 128, 160, 316.2}, {7296, 1536, 4096, 128, 192, 120.7}, {7296, 1536, 4096, 128, 176, 114.3},
    {26048, 1536, 4096, 128, 192, 365.5}, {26048, 1536, 4096, 128, 176, 368.4}, {5504, 1536, 8192, 128, 128, 153.9},
    {5504, 1536, 8192, 128, 176, 158.6}, {13056, 1536, 8192, 128, 160, 374.6}, {13056, 1536, 8192, 128, 176, 353.6},
    {19456, 1536, 8192, 128, 192, 535.0}, {19456, 1536, 8192, 128, 128, 517.4}, {30144, 1536, 8192, 128, 192, 805.3},
    {30144, 1536, 8192, 128, 160, 846.9}, {3520, 1536, 8192, 128, 192, 115.8}, {3520, 1536, 8192, 128, 176, 107.9},
    {20544, 1536, 8192, 128, 192, 538.1}, {20544, 1536, 8192, 128, 176, 553.4}, {18112, 1792, 2048, 128, 128, 166.0},
    {18112, 1792, 2048, 128, 160, 173.9}, {19712, 1792, 4096, 128, 128, 322.5}, {19712, 1792, 4096, 128, 160, 339.1},
    {8832, 1792, 4096, 128, 128, 159.0}, {8832, 1792, 4096, 128, 176, 167.4}, {29056, 1792, 4096, 128, 128, 462.3},
    {29056, 1792, 4096, 128, 176, 496.3}, {21760, 1792, 4096, 128, 128, 352.3}, {21760, 1792, 4096, 128, 192, 362.8},
    {6080, 1792, 4096, 128, 192, 119.6}, {6080, 1792, 4096, 128, 176, 116.3}, {19584, 1792, 8192, 128, 128, 619.6},
    {19584, 1792, 8192, 128, 160, 655.4}, {8960, 1792, 8192, 128, 128, 298.1}, {8960, 1792, 8192, 128, 176, 304.0},
    {19840, 1792, 8192, 128, 128, 622.0}, {19840, 1792, 8192, 128, 176, 649.3}, {18496, 1792, 8192, 128, 128, 585.4},
    {18496, 1792, 8192, 128, 192, 589.4}, {13568, 1792, 8192, 128, 160, 466.2}, {13568, 1792, 8192, 128, 176, 450.0},
    {15104, 1792, 8192, 128, 192, 485.1}, {15104, 1792, 8192, 128, 176, 503.9}, {22144, 2048, 2048, 128, 160, 236.6},
    {22144, 2048, 2048, 128, 128, 219.0}, {19520, 2048, 2048, 128, 160, 209.9}, {19520, 2048, 2048, 128, 192, 202.5},
    {18752, 2048, 4096, 128, 160, 364.4}, {18752, 2048, 4096, 128, 128, 341.5}, {21120, 2048, 4096, 128, 160, 410.2},
    {21120, 2048, 4096, 128, 176, 394.7}, {19840, 2048, 4096, 128, 160, 386.8}, {19840, 2048, 4096, 128, 192, 364.4},
    {29056, 2048, 8192, 128, 160, 1087.1}, {29056, 2048, 8192, 128, 176, 1053.2}, {18368, 2048, 8192, 128, 160, 702.9},
    {18368, 2048, 8192, 128, 192, 647.3}, {19840, 2112, 2048, 128, 176, 220.0}, {19840, 2112, 2048, 128, 192, 206.4},
    {24384, 2112, 4096, 128, 176, 472.1}, {24384, 2112, 4096, 128, 192, 451.4}, {22912, 2112, 8192, 128, 176, 854.0},
    {22912, 2112, 8192, 128, 192, 818.9}, {24704, 4096, 2048, 128, 160, 497.8}, {24704, 4096, 2048, 128, 128, 472.9},
    {18304, 4096, 2048, 128, 160, 376.2}, {18304, 4096, 2048, 128, 192, 363.8}, {32448, 4096, 4096, 128, 160, 1220.3},
    {32448, 4096, 4096, 128, 176, 1220.2}, {17664, 4096, 4096, 128, 160, 674.6}, {17664, 4096, 4096, 128, 192, 639.4},
    {27712, 4096, 8192, 128, 176, 2009.6}, {27712, 4096, 8192, 128, 160, 2082.0}, {26112, 4096, 8192, 128, 176, 2001.1},
    {26112, 4096, 8192, 128, 192, 1831.2}, {20160, 7168, 4096, 128, 176, 1330.4}, {20160, 7168, 4096, 128, 160, 1331.3},
    {20608, 7168, 8192, 128, 176, 2535.0}, {20608, 7168, 8192, 128, 160, 2669.8},
    {20224, 16384, 2048, 128, 160, 1621.0}, {20224, 16384, 2048, 128, 192, 1551.5},
};

// Since kAccumulateWidePenalty (forty-fourth session) the plan takes one of a pair's tiles at 56 of the 74 shapes
// (the new one at 36; the previous one at 20, 18 of them 128x128 that the pair had left for a wider tile) and is
// within 0.3 % of the faster one there; at the other 18 it takes a tile not timed here.
TEST(Fp8GemmHeuristic, AccumulatingFormPlansWeightRowsTo32768) {
  size_t shapes = 0;
  const std::vector<Judged> judged = judge_plan(kAccumulateMoves, true, &shapes, nullptr, Fp8GemmForm::kAccumulate);
  EXPECT_EQ(shapes, 74u);
  EXPECT_EQ(judged.size(), 56u);  // the plan takes one of the pair's tiles there
  EXPECT_LT(expect_within_misses(judged, {}, 1.01), 0.01);  // 0.0006 (0.003 on the H100 rows)
  // Beyond the modelled M the last kernel still serves, and every plan keeps to eight kernels.
  for (const auto& [n, k] : {std::pair{512, 4096}, {1536, 8192}, {7168, 4096}, {2112, 8192}}) {
    const Fp8GemmPlan plan = fp8_gemm_plan(kH200, n, k, {}, Fp8GemmForm::kAccumulate);
    EXPECT_LE(plan.kernels.size(), static_cast<size_t>(kFp8GemmMaxKernels));
    EXPECT_EQ(plan.buckets.back().m_hi, kFp8GemmUnboundedM);
    EXPECT_EQ(&config_at(plan, 1 << 20), &config_at(plan, kFp8GemmAccumulateSampledMaxM + 1));
  }
}

// 128x176 at an N it does not divide, in the weight-gradient form below K = 4096 (offered_at's
// kRagged176ReduceMinKBlocks). First timed on the H200 on 2026-12-02 (forty-second session, bench/probes/
// wgrad_plan_moves.py): each call's tile before 176 was offered against 128x176, one M drawn at random from each of
// 30 (N, K) whose plan moved, with C (N 1024..24576, K 1024..3968, and the six shapes of kAccumulateMoves at K = 2048
// that moved) and without C (N 512..24576, K 256..3456). With C 176 took 0.972 of the time on geometric mean from
// K = 2048 on (26 calls) but 1.022 below it (10 calls, up to 14 % slower), so with C it is offered from K = 2048;
// without C 0.944 at every K. The same calls re-timed on the H200 on 2026-12-06 (forty-fourth session, the same probe:
// the L2 flushed by a 1 GB write before every call, the median of 30 after 3 warm-ups and 100 ms idle, old, new,
// new, old averaged; D's bits equal between the two tiles at every call), after the forty-third session's stage
// counts made 128x128 and 128x192 faster: these rows (with C, the 26 from K = 2048). Each pair: the previous tile,
// then 128x176. Against 128x128 and 128x192 176 now lost at 30 of 34 calls (up to 11 %); against 128x160 it was
// level (0.94-1.03).
const Measured kRagged176WithC[] = {
    {5504, 1536, 3072, 128, 128, 65.8}, {5504, 1536, 3072, 128, 176, 69.8},
    {5568, 3072, 3072, 128, 128, 126.4}, {5568, 3072, 3072, 128, 176, 132.4},
    {30464, 6144, 2304, 128, 192, 970.6}, {30464, 6144, 2304, 128, 176, 992.5},
    {28800, 4096, 2432, 128, 160, 677.7}, {28800, 4096, 2432, 128, 176, 677.4},
    {22272, 18432, 2176, 128, 192, 2072.2}, {22272, 18432, 2176, 128, 176, 2136.5},
    {31104, 18432, 2432, 128, 192, 3320.3}, {31104, 18432, 2432, 128, 176, 3445.1},
    {16128, 16384, 2048, 128, 160, 1305.9}, {16128, 16384, 2048, 128, 176, 1291.2},
    {19648, 2048, 2688, 128, 192, 255.5}, {19648, 2048, 2688, 128, 176, 261.4},
    {30336, 16384, 2176, 128, 160, 2711.1}, {30336, 16384, 2176, 128, 176, 2794.8},
    {19392, 1024, 2048, 128, 128, 110.7}, {19392, 1024, 2048, 128, 176, 111.5},
    {24640, 12288, 3584, 128, 160, 2550.4}, {24640, 12288, 3584, 128, 176, 2388.2},
    {13184, 2304, 3200, 128, 160, 237.2}, {13184, 2304, 3200, 128, 176, 241.2},
    {4096, 2048, 3200, 128, 128, 68.2}, {4096, 2048, 3200, 128, 176, 71.6},
    {21504, 4096, 3584, 128, 192, 688.8}, {21504, 4096, 3584, 128, 176, 718.0},
    {9280, 4608, 3712, 128, 128, 353.5}, {9280, 4608, 3712, 128, 176, 359.1},
    {27904, 7168, 3456, 128, 160, 1580.5}, {27904, 7168, 3456, 128, 176, 1530.1},
    {12800, 1024, 3968, 128, 128, 138.9}, {12800, 1024, 3968, 128, 176, 139.0},
    {24256, 12288, 3968, 128, 160, 2797.4}, {24256, 12288, 3968, 128, 176, 2716.9},
    {29632, 3072, 3712, 128, 192, 736.6}, {29632, 3072, 3712, 128, 176, 763.3},
    {26240, 1536, 3968, 128, 192, 357.8}, {26240, 1536, 3968, 128, 176, 359.6},
    {22464, 512, 2048, 128, 192, 70.8}, {22464, 512, 2048, 128, 176, 68.1},
    {21376, 1024, 2048, 128, 160, 127.4}, {21376, 1024, 2048, 128, 176, 126.5},
    {20224, 1536, 2048, 128, 160, 162.9}, {20224, 1536, 2048, 128, 176, 167.6},
    {19520, 2048, 2048, 128, 192, 204.0}, {19520, 2048, 2048, 128, 176, 210.4},
    {18304, 4096, 2048, 128, 192, 362.9}, {18304, 4096, 2048, 128, 176, 376.6},
    {20224, 16384, 2048, 128, 192, 1550.5}, {20224, 16384, 2048, 128, 176, 1636.8},
};
const Measured kRagged176WithoutC[] = {
    {9600, 6144, 512, 128, 128, 99.3}, {9600, 6144, 512, 128, 176, 107.1},
    {12352, 2048, 768, 128, 128, 58.9}, {12352, 2048, 768, 128, 176, 65.4},
    {1600, 12288, 256, 128, 160, 32.0}, {1600, 12288, 256, 128, 176, 32.2},
    {29632, 512, 896, 128, 128, 45.7}, {29632, 512, 896, 128, 176, 50.7},
    {19968, 4608, 768, 128, 192, 202.6}, {19968, 4608, 768, 128, 176, 212.2},
    {5376, 1024, 384, 128, 128, 15.4}, {5376, 1024, 384, 128, 176, 15.3},
    {3200, 6144, 384, 128, 160, 36.0}, {3200, 6144, 384, 128, 176, 37.1},
    {768, 18432, 384, 128, 128, 27.1}, {768, 18432, 384, 128, 176, 28.6},
    {28160, 12288, 768, 128, 192, 724.8}, {28160, 12288, 768, 128, 176, 751.7},
    {21056, 6144, 896, 128, 192, 305.2}, {21056, 6144, 896, 128, 176, 317.9},
    {26816, 7168, 1792, 128, 160, 800.2}, {26816, 7168, 1792, 128, 176, 811.5},
    {30336, 7168, 1664, 128, 160, 842.2}, {30336, 7168, 1664, 128, 176, 857.2},
    {29888, 3072, 1536, 128, 192, 335.2}, {29888, 3072, 1536, 128, 176, 352.6},
    {27840, 7168, 1536, 128, 160, 724.6}, {27840, 7168, 1536, 128, 176, 737.9},
    {10176, 24576, 1152, 128, 192, 685.3}, {10176, 24576, 1152, 128, 176, 735.9},
    {11776, 7168, 1408, 128, 160, 294.1}, {11776, 7168, 1408, 128, 176, 302.8},
    {13184, 2304, 1408, 128, 160, 119.8}, {13184, 2304, 1408, 128, 176, 120.1},
    {29312, 2048, 1920, 128, 160, 282.4}, {29312, 2048, 1920, 128, 176, 279.5},
    {31808, 6144, 1792, 128, 192, 791.4}, {31808, 6144, 1792, 128, 176, 811.6},
    {3584, 4608, 1280, 128, 128, 59.1}, {3584, 4608, 1280, 128, 176, 62.4},
    {32128, 7168, 2816, 128, 160, 1433.5}, {32128, 7168, 2816, 128, 176, 1429.6},
    {3584, 4608, 2176, 128, 128, 91.5}, {3584, 4608, 2176, 128, 176, 94.7},
    {7936, 1024, 2304, 128, 128, 49.8}, {7936, 1024, 2304, 128, 176, 52.5},
    {21248, 4608, 2560, 128, 160, 571.4}, {21248, 4608, 2560, 128, 176, 565.0},
    {30464, 16384, 3456, 128, 160, 4133.8}, {30464, 16384, 3456, 128, 176, 4179.6},
    {30528, 1024, 2432, 128, 128, 180.9}, {30528, 1024, 2432, 128, 176, 186.2},
    {25664, 16384, 2688, 128, 160, 2583.9}, {25664, 16384, 2688, 128, 176, 2582.2},
    {22912, 16384, 2304, 128, 160, 1927.9}, {22912, 16384, 2304, 128, 176, 1936.0},
    {5504, 2048, 2816, 128, 192, 84.6}, {5504, 2048, 2816, 128, 176, 80.2},
    {29248, 18432, 2688, 128, 192, 3404.3}, {29248, 18432, 2688, 128, 176, 3192.6},
};

// Where the plan takes one of a pair's tiles (13 calls with C, 22 without), it is within 1 % of the faster one with
// C, and without C within 3.5 % but at 29248 x 18432 x 2688, where 176 is 6 % ahead of the 128x192 it takes. The other
// calls move to a tile not timed here (mostly from 128x160 to 128x128 or 128x192: kAccumulateWidePenalty). With C,
// 176 stays unoffered below K = 2048.
TEST(Fp8GemmHeuristic, WeightGradientFormRanks176AtARaggedN) {
  size_t shapes = 0;
  const std::vector<Judged> with_c =
      judge_plan(kRagged176WithC, true, &shapes, nullptr, Fp8GemmForm::kAccumulate);
  EXPECT_EQ(shapes, 26u);
  EXPECT_EQ(with_c.size(), 13u);
  expect_within_misses(with_c, {}, 1.01);
  const std::vector<Judged> without_c =
      judge_plan(kRagged176WithoutC, true, &shapes, nullptr, Fp8GemmForm::kFp32Store);
  EXPECT_EQ(shapes, 30u);
  EXPECT_EQ(without_c.size(), 22u);
  expect_within_misses(without_c, {{29248, 18432, 2688, 1.07}}, 1.035);
  EXPECT_TRUE(offered_with_c({4096, 7168, 4096, 128, 176, 0}));
  EXPECT_TRUE(offered_with_c({4096, 7168, 2048, 128, 176, 0}));
  EXPECT_FALSE(offered_with_c({4096, 7168, 1920, 128, 176, 0}));
}

// The L2 sizes the devices report (CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE): how far ahead a weight-gradient pipeline runs
// with C depends on it (fp8_gemm_ring_stages).
constexpr int64_t kH200L2Bytes = int64_t{60} << 20;
constexpr int64_t kH100L2Bytes = int64_t{50} << 20;

// The weight-gradient form with C at K <= 256 runs 4 of its kernel's stages (fp8_gemm_ring_stages; H200, 2026-12-02,
// forty-second session, bench/probes/wgrad_plan_moves.py through the Python package, old/new/new/old, medians of 30
// flushed CUDA-event timings after 100 ms idle, D's bits equal): 20 random calls, each on the plan's kernel with all
// of its stages (forced) and then with four, us. 0.863 on geometric mean (0.805-1.001).
struct RingTimed {
  int64_t m, n, k;
  int block_m, block_n, stages;
  double all_stages_us, ring_us;
};
const RingTimed kShortRing[] = {
    {18048, 1024, 128, 64, 128, 8, 61.8, 51.0}, {9152, 3072, 128, 64, 128, 8, 94.6, 76.3},
    {27712, 1024, 128, 64, 128, 8, 96.6, 77.9}, {6144, 512, 128, 64, 128, 8, 12.5, 12.5},
    {1792, 2112, 128, 64, 64, 13, 15.5, 15.3}, {14464, 2112, 256, 64, 128, 8, 83.0, 69.5},
    {448, 18432, 256, 64, 128, 8, 28.4, 25.2}, {22336, 2048, 256, 64, 128, 8, 125.7, 106.4},
    {14144, 4096, 128, 64, 128, 8, 198.8, 160.4}, {6080, 6144, 128, 64, 128, 8, 128.3, 103.3},
    {23552, 12288, 128, 64, 128, 8, 1013.4, 852.5}, {2880, 7168, 256, 64, 128, 8, 58.2, 49.4},
    {24832, 18432, 128, 64, 128, 8, 1610.9, 1368.9}, {23744, 576, 256, 64, 64, 13, 42.1, 40.0},
    {3008, 2112, 128, 64, 64, 13, 22.6, 21.4}, {5248, 3072, 256, 64, 128, 8, 44.8, 38.8},
    {24960, 3072, 128, 64, 128, 8, 262.8, 214.6}, {23936, 4096, 256, 64, 128, 8, 274.0, 232.5},
    {23296, 2048, 256, 64, 128, 8, 131.7, 108.0}, {4736, 2112, 256, 64, 128, 8, 29.0, 26.1},
};

TEST(Fp8GemmHeuristic, WeightGradientCallsWithCRunFewerStagesAtShortK) {
  // Every timed call: the plan's kernel is the one timed, and its launch runs four of its stages.
  for (const RingTimed& t : kShortRing) {
    const Fp8GemmPlan plan = fp8_gemm_plan(kH200, t.n, t.k, {}, Fp8GemmForm::kAccumulate);
    const Fp8GemmConfig& c = config_at(plan, t.m);
    EXPECT_EQ(c.block_m, t.block_m) << t.m << "x" << t.n << "x" << t.k;
    EXPECT_EQ(c.block_n, t.block_n) << t.m << "x" << t.n << "x" << t.k;
    EXPECT_EQ(c.stages, t.stages) << t.m << "x" << t.n << "x" << t.k;
    EXPECT_EQ(fp8_gemm_ring_stages(c, t.k, Fp8GemmForm::kAccumulate, false, kH200L2Bytes), 4);
  }
  const Fp8GemmConfig c = config_at(fp8_gemm_plan(kH200, 7168, 256, {}, Fp8GemmForm::kAccumulate), 4096);
  EXPECT_EQ(c.stages, 8);                                                                     // 64x128
  EXPECT_EQ(fp8_gemm_ring_stages(c, 272, Fp8GemmForm::kAccumulate, false, kH200L2Bytes), 4);  // 3 K blocks: 3 + 1
  EXPECT_EQ(fp8_gemm_ring_stages(c, 400, Fp8GemmForm::kAccumulate, false, kH200L2Bytes), 8);  // 4: all (the H200)
  EXPECT_EQ(fp8_gemm_ring_stages(c, 272, Fp8GemmForm::kAccumulate, false, 0), 8);             // L2 unknown: all
  EXPECT_EQ(fp8_gemm_ring_stages(c, 256, Fp8GemmForm::kAccumulate, true, kH200L2Bytes), 8);   // forced stages: all
  EXPECT_EQ(fp8_gemm_ring_stages(c, 256, Fp8GemmForm::kFp32Store, false, kH200L2Bytes), 8);   // without C: all
  const Fp8GemmConfig bf16 = config_at(fp8_gemm_plan(kH200, 7168, 256), 4096);
  EXPECT_EQ(fp8_gemm_ring_stages(bf16, 256, Fp8GemmForm::kInference, false, kH200L2Bytes), bf16.stages);
  Fp8GemmConfig three = c;
  three.stages = 3;
  EXPECT_EQ(fp8_gemm_ring_stages(three, 128, Fp8GemmForm::kAccumulate, false, kH200L2Bytes), 3);  // never more
}

// On an H100 (50 MiB of L2) the weight-gradient form with C runs K blocks + 1 of its stages from K = 384 on tiles of at
// least 128 columns (fp8_gemm_ring_stages). Timed there (2026-12-06, forty-fifth session, through the Python package
// with the ring length set by a probe-only build: the L2 flushed by a 1 GB write before every call, the median of 30
// after 3 warm-ups and 100 ms idle; D's bits equal at every length): each (weight, K, tile) with all of its stages (the
// mean of a run before and one after the others) and with 2 .. stages - 1 of them, us.
struct LeadRingTimed {
  int64_t m, n, k;
  int block_m, block_n, stages;
  double all_stages_us;
  std::vector<double> ring_us;  // [i]: i + 2 stages
};
const LeadRingTimed kLeadRing[] = {
    {4096, 7168, 384, 64, 128, 8, 107.1, {110.7, 95.9, 95.3, 99.0, 100.2, 101.1}},
    {4096, 7168, 384, 128, 128, 5, 111.9, {114.5, 109.0, 108.0}},
    {4096, 7168, 384, 128, 160, 5, 120.3, {111.8, 116.9, 114.9}},
    {4096, 7168, 512, 64, 128, 8, 106.4, {123.3, 102.6, 97.1, 98.4, 98.9, 104.2}},
    {4096, 7168, 512, 128, 128, 5, 111.5, {126.0, 109.3, 112.4}},
    {4096, 7168, 512, 128, 160, 5, 118.5, {123.6, 117.3, 120.2}},
    {4096, 7168, 640, 64, 128, 8, 103.0, {143.2, 115.4, 107.0, 99.4, 102.2, 103.3}},
    {4096, 7168, 640, 128, 128, 5, 116.0, {134.7, 111.9, 113.7}},
    {4096, 7168, 640, 128, 160, 5, 123.1, {129.5, 112.0, 120.6}},
    {4096, 7168, 768, 64, 128, 8, 103.6, {154.8, 122.0, 113.6, 106.1, 97.5, 102.7}},
    {4096, 7168, 768, 128, 128, 5, 114.9, {143.3, 119.2, 109.4}},
    {4096, 7168, 768, 128, 160, 5, 123.5, {136.3, 115.0, 113.8}},
    {4096, 7168, 1024, 64, 128, 8, 110.4, {195.1, 142.3, 131.3, 124.3, 118.0, 113.8}},
    {4096, 7168, 1024, 128, 128, 5, 115.3, {172.3, 133.3, 121.9}},
    {4096, 7168, 1024, 128, 160, 5, 118.8, {154.8, 125.9, 118.7}},
    {7168, 2048, 384, 64, 128, 8, 53.3, {56.2, 46.9, 47.6, 50.3, 50.6, 50.7}},
    {7168, 2048, 384, 128, 128, 5, 55.2, {52.8, 53.5, 52.7}}, {7168, 2048, 384, 128, 160, 5, 60.5, {58.2, 58.3, 57.0}},
    {7168, 2048, 512, 64, 128, 8, 52.2, {62.3, 50.8, 47.6, 48.6, 49.5, 51.2}},
    {7168, 2048, 512, 128, 128, 5, 54.3, {57.6, 54.0, 54.7}}, {7168, 2048, 512, 128, 160, 5, 58.7, {62.5, 59.0, 59.2}},
    {7168, 2048, 640, 64, 128, 8, 50.4, {71.9, 57.6, 52.7, 48.8, 49.8, 49.9}},
    {7168, 2048, 640, 128, 128, 5, 57.4, {61.8, 57.5, 57.0}}, {7168, 2048, 640, 128, 160, 5, 61.6, {63.4, 59.4, 61.8}},
    {7168, 2048, 768, 64, 128, 8, 49.5, {75.1, 60.3, 56.6, 53.1, 50.6, 49.5}},
    {7168, 2048, 768, 128, 128, 5, 58.6, {65.1, 57.9, 55.7}}, {7168, 2048, 768, 128, 160, 5, 63.9, {68.8, 60.4, 59.1}},
    {7168, 2048, 1024, 64, 128, 8, 57.8, {91.7, 68.3, 63.1, 60.5, 58.5, 58.1}},
    {7168, 2048, 1024, 128, 128, 5, 59.2, {74.5, 59.8, 59.6}},
    {7168, 2048, 1024, 128, 160, 5, 62.6, {74.5, 64.1, 63.8}},
    {2048, 7168, 384, 64, 128, 8, 54.8, {57.2, 49.6, 48.8, 50.5, 51.4, 52.0}},
    {2048, 7168, 384, 128, 128, 5, 56.9, {60.9, 56.0, 55.2}}, {2048, 7168, 384, 128, 160, 5, 61.9, {61.3, 60.3, 58.7}},
    {2048, 7168, 512, 64, 128, 8, 55.0, {66.5, 54.6, 51.2, 51.2, 51.6, 54.3}},
    {2048, 7168, 512, 128, 128, 5, 57.1, {66.9, 57.5, 57.4}}, {2048, 7168, 512, 128, 160, 5, 61.2, {67.2, 61.9, 62.0}},
    {2048, 7168, 640, 64, 128, 8, 54.4, {74.6, 60.7, 56.1, 52.0, 52.3, 53.3}},
    {2048, 7168, 640, 128, 128, 5, 59.8, {74.4, 61.9, 59.7}}, {2048, 7168, 640, 128, 160, 5, 63.8, {72.5, 62.4, 63.9}},
    {2048, 7168, 768, 64, 128, 8, 53.6, {82.6, 65.3, 61.5, 56.4, 52.2, 53.1}},
    {2048, 7168, 768, 128, 128, 5, 60.4, {78.3, 64.0, 59.4}}, {2048, 7168, 768, 128, 160, 5, 66.1, {76.4, 64.6, 61.7}},
    {2048, 7168, 1024, 64, 128, 8, 58.8, {105.1, 77.1, 70.9, 67.2, 64.4, 60.7}},
    {2048, 7168, 1024, 128, 128, 5, 61.2, {92.3, 72.5, 66.1}},
    {2048, 7168, 1024, 128, 160, 5, 64.7, {87.8, 70.5, 66.8}},
    {7168, 2112, 384, 64, 128, 8, 54.7, {68.7, 54.6, 48.5, 52.4, 53.0, 51.7}},
    {7168, 2112, 384, 128, 128, 5, 58.1, {61.1, 56.7, 55.5}}, {7168, 2112, 384, 128, 160, 5, 61.3, {58.0, 58.8, 57.2}},
    {7168, 2112, 512, 64, 128, 8, 53.8, {77.9, 60.0, 52.3, 49.3, 50.3, 53.1}},
    {7168, 2112, 512, 128, 128, 5, 57.9, {69.3, 57.9, 58.1}}, {7168, 2112, 512, 128, 160, 5, 60.2, {61.9, 59.9, 60.4}},
    {7168, 2112, 640, 64, 128, 8, 52.6, {92.4, 72.9, 63.5, 54.4, 50.7, 51.7}},
    {7168, 2112, 640, 128, 128, 5, 61.8, {78.6, 63.6, 60.9}}, {7168, 2112, 640, 128, 160, 5, 63.0, {63.7, 59.2, 62.7}},
    {7168, 2112, 768, 64, 128, 8, 52.2, {96.7, 74.9, 71.9, 60.4, 53.9, 52.3}},
    {7168, 2112, 768, 128, 128, 5, 61.6, {82.4, 65.3, 59.0}}, {7168, 2112, 768, 128, 160, 5, 63.5, {67.1, 59.7, 58.6}},
    {7168, 2112, 1024, 64, 128, 8, 60.8, {119.0, 87.4, 78.0, 74.4, 72.2, 62.8}},
    {7168, 2112, 1024, 128, 128, 5, 63.3, {95.4, 73.7, 68.3}},
    {7168, 2112, 1024, 128, 160, 5, 61.5, {78.8, 64.4, 62.2}}
};

// A row of a ring-length sweep as the launch would run it on a device with `l2_bytes` of L2: the length
// fp8_gemm_ring_stages gives its call, that length's time, and the fastest time the row holds.
struct RingPick {
  int ring;
  double us, best_us;
};
Fp8GemmConfig swept_config(const LeadRingTimed& t) {
  Fp8GemmConfig c = tile(t.block_m, t.block_n);
  c.stages = t.stages;
  c.accumulate = true;
  return c;
}
RingPick ring_pick(const LeadRingTimed& t, int64_t l2_bytes) {
  EXPECT_EQ(t.ring_us.size(), static_cast<size_t>(t.stages - 2)) << t.m << "x" << t.n << "x" << t.k;
  const int ring = fp8_gemm_ring_stages(swept_config(t), t.k, Fp8GemmForm::kAccumulate, false, l2_bytes);
  const double us = ring == t.stages ? t.all_stages_us : t.ring_us.at(static_cast<size_t>(ring - 2));
  const double best = std::min(t.all_stages_us, *std::min_element(t.ring_us.begin(), t.ring_us.end()));
  return {ring, us, best};
}

TEST(Fp8GemmHeuristic, WeightGradientPipelineLeadFollowsTheL2) {
  double log_vs_all = 0, log_vs_best = 0, log_all_vs_best = 0, worst_vs_all = 0;
  for (const LeadRingTimed& t : kLeadRing) {
    const Fp8GemmConfig c = swept_config(t);
    const auto [ring, us, best] = ring_pick(t, kH100L2Bytes);
    EXPECT_EQ(ring, std::min<int>(t.stages, static_cast<int>(t.k / 128) + 1)) << t.m << "x" << t.n << "x" << t.k;
    // The H200 runs them all from K = 512 (kLeadRingH200); a device of unknown L2 and a forced stage count always.
    EXPECT_EQ(fp8_gemm_ring_stages(c, t.k, Fp8GemmForm::kAccumulate, false, kH200L2Bytes),
              t.k <= 384 ? ring : t.stages);
    EXPECT_EQ(fp8_gemm_ring_stages(c, t.k, Fp8GemmForm::kAccumulate, false, 0), t.stages);
    EXPECT_EQ(fp8_gemm_ring_stages(c, t.k, Fp8GemmForm::kAccumulate, true, kH100L2Bytes), t.stages);
    log_vs_all += std::log(us / t.all_stages_us);
    log_vs_best += std::log(us / best);
    log_all_vs_best += std::log(t.all_stages_us / best);
    worst_vs_all = std::max(worst_vs_all, us / t.all_stages_us);
  }
  const double rows = static_cast<double>(std::size(kLeadRing));
  EXPECT_EQ(std::size(kLeadRing), 60u);
  EXPECT_LT(std::exp(log_vs_all / rows), 0.98);       // 0.979 of all the stages' time on geometric mean
  EXPECT_LT(worst_vs_all, 1.003);                     // and never slower than them beyond the timings' noise
  EXPECT_LT(std::exp(log_vs_best / rows), 1.017);     // 1.0166 of the fastest length's time
  EXPECT_GT(std::exp(log_all_vs_best / rows), 1.038);  // all the stages (the H200's rule from K = 512): 1.0384
  // Tiles narrower than 128 columns keep the H200's rule (64x64 ran K blocks + 1 of 13 1.03-1.14x slower at K = 384),
  // as does every tile at K <= 256 (four stages) and without C (all).
  Fp8GemmConfig narrow = tile(64, 64);
  narrow.stages = 13;
  narrow.accumulate = true;
  EXPECT_EQ(fp8_gemm_ring_stages(narrow, 384, Fp8GemmForm::kAccumulate, false, kH100L2Bytes), 13);
  EXPECT_EQ(fp8_gemm_ring_stages(narrow, 256, Fp8GemmForm::kAccumulate, false, kH100L2Bytes), 4);
  Fp8GemmConfig wide = narrow;
  wide.block_n = 128;
  wide.stages = 8;
  EXPECT_EQ(fp8_gemm_ring_stages(wide, 256, Fp8GemmForm::kAccumulate, false, kH100L2Bytes), 4);
  EXPECT_EQ(fp8_gemm_ring_stages(wide, 384, Fp8GemmForm::kAccumulate, false, kH100L2Bytes), 4);
  EXPECT_EQ(fp8_gemm_ring_stages(wide, 400, Fp8GemmForm::kAccumulate, false, kH100L2Bytes), 5);  // 4 K blocks
  EXPECT_EQ(fp8_gemm_ring_stages(wide, 384, Fp8GemmForm::kFp32Store, false, kH100L2Bytes), 8);
  EXPECT_EQ(fp8_gemm_ring_stages(wide, 1024, Fp8GemmForm::kAccumulate, false, kH100L2Bytes), 8);
}

// The same sweep on the H200 (forty-sixth session, 2026-12-06, bench/wgrad_ring_lengths_2026-12-06_h200.json; 64x64,
// timed at some lengths only, left out): K = 256..1024 over the same four weights, the tiles of at least 128 columns.
// The shorter lead pays at K = 384 (three K blocks) only; from K = 512 all the stages are within a few per cent of the
// fastest length.
const LeadRingTimed kLeadRingH200[] = {
    {4096, 7168, 256, 64, 128, 8, 83.3, {74.7, 69.2, 71.2, 76.1, 78.0, 82.5}},
    {4096, 7168, 256, 128, 128, 5, 93.3, {78.2, 81.8, 84.0}}, {4096, 7168, 256, 128, 160, 5, 98.7, {84.1, 88.8, 93.7}},
    {4096, 7168, 384, 64, 128, 8, 77.9, {91.1, 75.3, 68.0, 69.8, 70.8, 72.0}},
    {4096, 7168, 384, 128, 128, 5, 84.3, {89.9, 80.2, 80.1}}, {4096, 7168, 384, 128, 160, 5, 90.1, {91.3, 85.8, 85.3}},
    {4096, 7168, 512, 64, 128, 8, 74.0, {107.2, 85.0, 76.7, 73.7, 74.5, 72.7}},
    {4096, 7168, 512, 128, 128, 5, 83.2, {98.9, 82.2, 82.7}}, {4096, 7168, 512, 128, 160, 5, 88.0, {97.2, 85.2, 88.5}},
    {4096, 7168, 640, 64, 128, 8, 82.6, {124.9, 97.3, 88.6, 81.8, 83.5, 81.5}},
    {4096, 7168, 640, 128, 128, 5, 86.6, {111.8, 91.7, 84.8}},
    {4096, 7168, 640, 128, 160, 5, 91.8, {102.7, 88.4, 90.2}},
    {4096, 7168, 768, 64, 128, 8, 92.9, {141.8, 108.2, 100.2, 93.3, 91.4, 92.7}},
    {4096, 7168, 768, 128, 128, 5, 87.9, {123.8, 101.4, 87.9}},
    {4096, 7168, 768, 128, 160, 5, 94.9, {111.7, 96.7, 88.4}},
    {4096, 7168, 1024, 64, 128, 8, 109.6, {174.4, 125.3, 114.5, 111.9, 109.0, 108.4}},
    {4096, 7168, 1024, 128, 128, 5, 95.9, {148.0, 110.7, 102.7}},
    {4096, 7168, 1024, 128, 160, 5, 93.3, {126.9, 103.6, 96.8}},
    {7168, 2048, 256, 64, 128, 8, 41.1, {37.7, 35.1, 35.4, 37.6, 38.3, 39.6}},
    {7168, 2048, 256, 128, 128, 5, 44.4, {38.3, 39.6, 40.5}}, {7168, 2048, 256, 128, 160, 5, 48.4, {42.3, 44.4, 46.4}},
    {7168, 2048, 384, 64, 128, 8, 39.6, {48.1, 38.0, 36.9, 37.3, 37.4, 38.3}},
    {7168, 2048, 384, 128, 128, 5, 42.5, {41.2, 40.9, 40.8}}, {7168, 2048, 384, 128, 160, 5, 47.4, {46.2, 45.2, 44.3}},
    {7168, 2048, 512, 64, 128, 8, 39.5, {54.8, 43.5, 40.5, 40.2, 39.9, 39.5}},
    {7168, 2048, 512, 128, 128, 5, 41.1, {47.4, 41.3, 41.3}}, {7168, 2048, 512, 128, 160, 5, 45.8, {50.7, 45.9, 45.8}},
    {7168, 2048, 640, 64, 128, 8, 44.6, {63.6, 49.3, 44.8, 44.3, 45.0, 44.7}},
    {7168, 2048, 640, 128, 128, 5, 43.4, {51.6, 44.4, 42.8}}, {7168, 2048, 640, 128, 160, 5, 47.4, {49.8, 47.8, 48.2}},
    {7168, 2048, 768, 64, 128, 8, 48.8, {69.3, 52.2, 49.9, 48.5, 48.6, 49.5}},
    {7168, 2048, 768, 128, 128, 5, 43.5, {55.4, 46.5, 44.0}}, {7168, 2048, 768, 128, 160, 5, 48.6, {53.1, 49.5, 47.0}},
    {7168, 2048, 1024, 64, 128, 8, 57.6, {86.1, 61.5, 58.2, 58.2, 57.7, 57.5}},
    {7168, 2048, 1024, 128, 128, 5, 48.4, {65.9, 51.5, 49.5}},
    {7168, 2048, 1024, 128, 160, 5, 51.0, {60.5, 54.3, 51.9}},
    {2048, 7168, 256, 64, 128, 8, 42.8, {38.9, 37.2, 37.3, 39.5, 40.4, 42.3}},
    {2048, 7168, 256, 128, 128, 5, 45.7, {40.8, 42.0, 42.6}}, {2048, 7168, 256, 128, 160, 5, 49.3, {44.4, 46.1, 47.6}},
    {2048, 7168, 384, 64, 128, 8, 40.0, {47.2, 38.4, 37.2, 37.4, 36.8, 37.9}},
    {2048, 7168, 384, 128, 128, 5, 43.1, {48.0, 42.3, 41.3}}, {2048, 7168, 384, 128, 160, 5, 47.6, {48.8, 45.8, 44.7}},
    {2048, 7168, 512, 64, 128, 8, 42.9, {59.2, 46.0, 41.1, 40.6, 40.4, 42.6}},
    {2048, 7168, 512, 128, 128, 5, 43.8, {56.2, 45.1, 44.1}}, {2048, 7168, 512, 128, 160, 5, 48.3, {55.6, 48.4, 48.2}},
    {2048, 7168, 640, 64, 128, 8, 44.5, {64.9, 52.2, 47.3, 44.5, 44.9, 44.6}},
    {2048, 7168, 640, 128, 128, 5, 44.5, {61.6, 50.6, 46.1}}, {2048, 7168, 640, 128, 160, 5, 49.2, {58.4, 51.8, 49.4}},
    {2048, 7168, 768, 64, 128, 8, 49.6, {72.0, 55.0, 52.4, 48.9, 48.8, 49.4}},
    {2048, 7168, 768, 128, 128, 5, 46.1, {66.0, 53.3, 48.5}}, {2048, 7168, 768, 128, 160, 5, 51.2, {61.5, 54.3, 50.2}},
    {2048, 7168, 1024, 64, 128, 8, 57.8, {91.9, 66.0, 61.2, 59.6, 58.7, 57.3}},
    {2048, 7168, 1024, 128, 128, 5, 52.0, {79.5, 59.7, 55.0}},
    {2048, 7168, 1024, 128, 160, 5, 53.9, {72.3, 59.6, 55.9}},
    {7168, 2112, 256, 64, 128, 8, 42.8, {44.9, 37.7, 37.4, 39.5, 40.5, 42.4}},
    {7168, 2112, 256, 128, 128, 5, 47.3, {41.2, 42.8, 43.4}}, {7168, 2112, 256, 128, 160, 5, 48.3, {42.6, 45.2, 46.5}},
    {7168, 2112, 384, 64, 128, 8, 39.0, {59.0, 44.4, 39.5, 37.7, 38.0, 38.0}},
    {7168, 2112, 384, 128, 128, 5, 43.8, {49.1, 40.9, 41.2}}, {7168, 2112, 384, 128, 160, 5, 46.4, {44.9, 44.2, 43.4}},
    {7168, 2112, 512, 64, 128, 8, 41.3, {69.3, 49.8, 44.2, 42.5, 42.7, 41.3}},
    {7168, 2112, 512, 128, 128, 5, 42.7, {57.2, 45.7, 43.6}}, {7168, 2112, 512, 128, 160, 5, 45.7, {50.4, 45.4, 45.3}},
    {7168, 2112, 640, 64, 128, 8, 47.3, {83.4, 64.1, 52.6, 47.2, 47.6, 47.6}},
    {7168, 2112, 640, 128, 128, 5, 45.2, {67.3, 53.9, 48.0}}, {7168, 2112, 640, 128, 160, 5, 46.2, {50.6, 47.8, 46.8}},
    {7168, 2112, 768, 64, 128, 8, 52.3, {90.4, 66.1, 61.5, 51.7, 51.8, 52.5}},
    {7168, 2112, 768, 128, 128, 5, 47.8, {72.0, 55.5, 50.6}}, {7168, 2112, 768, 128, 160, 5, 48.3, {54.3, 48.5, 46.7}},
    {7168, 2112, 1024, 64, 128, 8, 61.4, {111.4, 78.4, 69.2, 64.9, 62.2, 60.7}},
    {7168, 2112, 1024, 128, 128, 5, 55.1, {85.2, 64.3, 58.6}},
    {7168, 2112, 1024, 128, 160, 5, 52.1, {61.9, 55.0, 53.3}},
};

TEST(Fp8GemmHeuristic, WeightGradientPipelineLeadOnTheH200AtThreeKBlocks) {
  double log_at_384 = 0, log_vs_all = 0, log_vs_best = 0, log_all_vs_best = 0;
  size_t at_384 = 0, from_384 = 0;
  for (const LeadRingTimed& t : kLeadRingH200) {
    const auto [ring, us, best] = ring_pick(t, kH200L2Bytes);
    const int64_t k_blocks = (t.k + 127) / 128;
    // Four stages up to K = 384 (every tile here compiles at least five), all of them from K = 512.
    EXPECT_EQ(ring, k_blocks <= 3 ? 4 : t.stages) << t.m << "x" << t.n << "x" << t.k;
    if (k_blocks < 3) continue;  // K <= 256: four stages on every card (kShortRing)
    if (k_blocks == 3) {
      log_at_384 += std::log(us / t.all_stages_us);
      ++at_384;
    }
    log_vs_all += std::log(us / t.all_stages_us);
    log_vs_best += std::log(us / best);
    log_all_vs_best += std::log(t.all_stages_us / best);
    ++from_384;
  }
  EXPECT_EQ(std::size(kLeadRingH200), 72u);
  EXPECT_EQ(at_384, 12u);
  EXPECT_EQ(from_384, 60u);
  EXPECT_LT(std::exp(log_at_384 / 12), 0.945);   // 0.943 of all the stages' time at K = 384
  EXPECT_LT(std::exp(log_vs_all / 60), 0.989);   // 0.988 over K = 384..1024
  EXPECT_LT(std::exp(log_vs_best / 60), 1.009);  // 1.0089 of the fastest length's time
  EXPECT_GT(std::exp(log_all_vs_best / 60), 1.020);  // all the stages at every K: 1.0209
}

// The inference form's long M (kFp8GemmSampledMaxM < M <= kFp8GemmLongMaxM), each 64-row interval served by the
// model's cheapest kept kernel where it is over 3 % ahead of the tail kernel (kLongMMargin): one M drawn at random
// from each of 36 intervals so moved up to 32768 and of 30 from 32769 to 65536 (N 256..2304 x K 512..16384; drawn
// from the grid N 256..32768 x nine K from 512 to 16384), timed on the H200 (2026-12-01, thirty-fourth session,
// probe through the Python package: the L2 flushed by a 1 GB write before every call, the median of 20 after 3
// warm-ups and 100 ms idle, two passes of opposite order averaged; the two tiles' results bitwise equal): the
// tail's tile, then the new one. Up to 32768 0.943 on geometric mean (0.835-1.019; 32 faster by over 1 %, one
// slower: 24283 x 448 x 2048, 1.9 %), above it 0.928 (0.889-0.983, all faster).
const Measured kLongMMoves[] = {
    {32413, 1024, 512, 128, 128, 38.65}, {32413, 1024, 512, 256, 128, 37.90}, {30230, 384, 8192, 128, 128, 169.55},
    {30230, 384, 8192, 128, 192, 155.40}, {31857, 1024, 1536, 128, 128, 88.40}, {31857, 1024, 1536, 256, 128, 82.45},
    {22754, 256, 16384, 256, 128, 194.75}, {22754, 256, 16384, 128, 128, 166.90}, {25309, 384, 2048, 128, 128, 41.15},
    {25309, 384, 2048, 128, 192, 37.15}, {24261, 768, 4096, 128, 128, 121.70}, {24261, 768, 4096, 128, 192, 116.40},
    {25924, 1280, 1024, 128, 128, 63.20}, {25924, 1280, 1024, 256, 128, 60.10}, {24720, 1408, 3072, 128, 128, 169.35},
    {24720, 1408, 3072, 128, 176, 162.95}, {23702, 640, 4096, 128, 128, 107.85}, {23702, 640, 4096, 128, 160, 99.85},
    {16500, 1472, 1024, 128, 128, 48.40}, {16500, 1472, 1024, 256, 128, 46.45}, {20772, 1536, 2048, 256, 128, 105.20},
    {20772, 1536, 2048, 128, 192, 101.05}, {23747, 384, 8192, 128, 128, 142.55}, {23747, 384, 8192, 128, 192, 119.00},
    {21296, 704, 2048, 128, 176, 58.85}, {21296, 704, 2048, 256, 128, 55.90}, {29135, 1024, 3072, 128, 128, 145.55},
    {29135, 1024, 3072, 256, 128, 134.45}, {26191, 1216, 2048, 128, 128, 113.45},
    {26191, 1216, 2048, 256, 128, 105.85}, {27010, 960, 4096, 128, 192, 169.90}, {27010, 960, 4096, 128, 160, 162.30},
    {23683, 1792, 512, 128, 128, 46.80}, {23683, 1792, 512, 256, 128, 44.90}, {23691, 256, 7168, 256, 128, 94.35},
    {23691, 256, 7168, 128, 128, 79.60}, {19655, 1088, 3072, 128, 160, 111.40}, {19655, 1088, 3072, 128, 192, 101.90},
    {29088, 1024, 1024, 128, 128, 56.80}, {29088, 1024, 1024, 256, 128, 53.45}, {32090, 1216, 1536, 128, 128, 107.65},
    {32090, 1216, 1536, 256, 128, 101.45}, {24283, 448, 2048, 128, 160, 45.60}, {24283, 448, 2048, 128, 128, 46.45},
    {21980, 1536, 1024, 128, 128, 62.85}, {21980, 1536, 1024, 256, 128, 59.80}, {21078, 1152, 4096, 128, 128, 156.95},
    {21078, 1152, 4096, 128, 192, 153.10}, {20820, 1280, 16384, 256, 128, 651.40},
    {20820, 1280, 16384, 128, 160, 635.55}, {19395, 1088, 1024, 128, 160, 43.35}, {19395, 1088, 1024, 128, 192, 42.90},
    {18988, 1216, 2048, 128, 128, 84.85}, {18988, 1216, 2048, 256, 128, 80.20}, {27161, 1216, 8192, 256, 128, 423.50},
    {27161, 1216, 8192, 128, 160, 406.20}, {20978, 2304, 2048, 256, 128, 153.95},
    {20978, 2304, 2048, 128, 192, 149.60}, {22479, 1088, 2048, 128, 160, 85.55}, {22479, 1088, 2048, 128, 192, 82.05},
    {20480, 640, 4096, 128, 128, 94.40}, {20480, 640, 4096, 128, 160, 83.45}, {19094, 1792, 512, 128, 128, 38.85},
    {19094, 1792, 512, 256, 128, 37.80}, {29533, 1216, 2048, 128, 128, 126.50}, {29533, 1216, 2048, 256, 128, 118.05},
    {22485, 1088, 1024, 128, 160, 48.05}, {22485, 1088, 1024, 128, 192, 48.30}, {28725, 1344, 512, 128, 128, 44.55},
    {28725, 1344, 512, 128, 192, 44.30}, {24985, 448, 4096, 128, 160, 84.40}, {24985, 448, 4096, 256, 128, 79.55},
    {46657, 512, 8192, 128, 128, 321.55}, {46657, 512, 8192, 256, 128, 291.25}, {47631, 512, 8192, 128, 128, 321.50},
    {47631, 512, 8192, 256, 128, 291.30}, {35852, 1024, 3072, 128, 128, 181.70}, {35852, 1024, 3072, 256, 128, 169.35},
    {41979, 448, 7168, 128, 160, 228.65}, {41979, 448, 7168, 256, 128, 214.80}, {39888, 768, 2048, 128, 128, 107.85},
    {39888, 768, 2048, 128, 192, 103.00}, {54731, 1280, 2048, 128, 128, 230.05}, {54731, 1280, 2048, 256, 128, 215.60},
    {54420, 256, 16384, 256, 128, 393.25}, {54420, 256, 16384, 128, 128, 386.45}, {42036, 640, 512, 128, 128, 33.15},
    {42036, 640, 512, 128, 160, 30.40}, {33257, 1216, 2048, 128, 128, 141.00}, {33257, 1216, 2048, 256, 128, 130.55},
    {63547, 768, 16384, 128, 128, 1279.35}, {63547, 768, 16384, 256, 128, 1137.35},
    {63201, 1408, 4096, 128, 128, 549.75}, {63201, 1408, 4096, 128, 176, 519.45},
    {40704, 640, 16384, 128, 128, 702.35}, {40704, 640, 16384, 128, 160, 644.15}, {64106, 1792, 512, 128, 128, 121.50},
    {64106, 1792, 512, 256, 128, 111.90}, {40168, 512, 7168, 128, 128, 233.30}, {40168, 512, 7168, 256, 128, 216.00},
    {59834, 1664, 7168, 128, 128, 1122.25}, {59834, 1664, 7168, 128, 192, 1029.35},
    {44568, 1152, 2048, 128, 128, 169.80}, {44568, 1152, 2048, 128, 192, 160.60},
    {35622, 1408, 2048, 128, 128, 166.85}, {35622, 1408, 2048, 128, 176, 159.55},
    {62978, 768, 16384, 128, 128, 1282.75}, {62978, 768, 16384, 128, 192, 1141.85},
    {57545, 512, 2048, 128, 128, 106.35}, {57545, 512, 2048, 256, 128, 97.75}, {40787, 256, 7168, 256, 128, 139.95},
    {40787, 256, 7168, 128, 128, 129.90}, {33635, 768, 3072, 128, 128, 126.05}, {33635, 768, 3072, 128, 192, 118.70},
    {32947, 1024, 1536, 128, 128, 90.95}, {32947, 1024, 1536, 256, 128, 82.75}, {62654, 384, 3072, 128, 128, 128.90},
    {62654, 384, 3072, 128, 192, 124.20}, {41729, 640, 8192, 128, 128, 353.05}, {41729, 640, 8192, 128, 160, 319.85},
    {50110, 1024, 3072, 128, 128, 243.65}, {50110, 1024, 3072, 256, 128, 223.60}, {40644, 512, 4096, 128, 128, 141.50},
    {40644, 512, 4096, 256, 128, 130.55}, {46254, 1408, 4096, 128, 128, 400.20}, {46254, 1408, 4096, 128, 176, 379.70},
    {63325, 1024, 7168, 128, 128, 710.55}, {63325, 1024, 7168, 256, 128, 667.85}, {64896, 512, 2048, 128, 128, 120.25},
    {64896, 512, 2048, 256, 128, 110.85}, {41359, 448, 16384, 128, 160, 515.40}, {41359, 448, 16384, 256, 128, 472.35},
};

TEST(Fp8GemmHeuristic, LongMTakesTheKeptKernelsPerInterval) {
  size_t shapes = 0;
  const std::vector<Judged> judged = judge_plan(kLongMMoves, true, &shapes);
  EXPECT_EQ(shapes, 66u);
  EXPECT_EQ(judged.size(), 66u);
  EXPECT_LT(expect_within_misses(judged, {}, 1.02), 0.03);  // 0.024: the four that were not faster
  expect_moved_to_second_rows(judged);  // each shape's rows: the tail's tile, then the new one
  // No kernel is added for long M: every kernel serving M above kFp8GemmSampledMaxM serves some M at or below it,
  // and above kFp8GemmLongMaxM the tail kernel serves alone.
  for (const int64_t n : {256, 576, 1536, 2112, 4096, 7168, 24576})
    for (const int64_t k : {512, 2048, 7168, 16384}) {
      const Fp8GemmPlan plan = fp8_gemm_plan(kH200, n, k);
      expect_well_formed(plan);
      std::set<int> below;
      for (const Fp8GemmBucket& b : plan.buckets)
        if (b.m_lo <= kFp8GemmSampledMaxM) below.insert(b.kernel);
      for (const Fp8GemmBucket& b : plan.covering(kFp8GemmSampledMaxM + 1, kFp8GemmUnboundedM))
        EXPECT_TRUE(below.count(b.kernel)) << n << " x " << k << ": kernel " << b.kernel << " at M = " << b.m_lo;
      EXPECT_EQ(&config_at(plan, int64_t{1} << 40), &config_at(plan, kFp8GemmLongMaxM + 1)) << n << " x " << k;
    }
}

// Above kFp8GemmLongMaxM, the kept kernel the model puts cheapest per output (kAsymptoticM) instead of the tail:
// ten of the 86 (N, K) it moves (of N 256..32768 x nine K), each at an M drawn at random from 70000..200000, timed
// as kLongMMoves: 0.937 of the tail's time on geometric mean (0.888-0.986, all ten faster).
const Measured kBeyondLongM[] = {
    {140299, 640, 1536, 128, 128, 237.25}, {140299, 640, 1536, 128, 160, 226.95},
    {125751, 384, 7168, 128, 128, 574.05}, {125751, 384, 7168, 128, 192, 528.15},
    {189011, 768, 1024, 128, 128, 266.10}, {189011, 768, 1024, 128, 192, 252.85},
    {127811, 1024, 2048, 128, 128, 437.15}, {127811, 1024, 2048, 256, 128, 397.60},
    {160435, 896, 8192, 128, 128, 1927.80}, {160435, 896, 8192, 128, 192, 1885.55},
    {167126, 512, 4096, 128, 128, 572.50}, {167126, 512, 4096, 256, 128, 513.70},
    {159238, 1408, 1536, 128, 128, 575.10}, {159238, 1408, 1536, 128, 176, 554.80},
    {89717, 1088, 2048, 128, 160, 322.20}, {89717, 1088, 2048, 128, 192, 317.60},
    {168289, 512, 7168, 128, 128, 1000.05}, {168289, 512, 7168, 256, 128, 888.10},
    {125442, 1664, 16384, 128, 128, 6314.35}, {125442, 1664, 16384, 128, 192, 5848.20},
};

TEST(Fp8GemmHeuristic, BeyondLongMTheKeptKernelCheapestPerOutputServes) {
  size_t shapes = 0;
  const std::vector<Judged> judged = judge_plan(kBeyondLongM, true, &shapes);
  EXPECT_EQ(shapes, 10u);
  EXPECT_EQ(judged.size(), 10u);
  EXPECT_EQ(expect_within_misses(judged, {}, 1.0), 0.0);  // the new tile is the faster at every shape
  expect_moved_to_second_rows(judged);
}

// The fill tiles (64x96, 64x144, 128x80, 128x96), swapped into a pruned plan where they lower its mean by over
// 0.2 %, cost no interval over 2 %, and serve only intervals where they are over 3 % ahead (N <= 6144, and the
// 128-row ones above M = 128). Timed on the H200 (2026-12-01, thirty-fifth session, probe through the Python
// package forcing each configuration: the L2 flushed by a 1 GB write before every call, the median of 15 after 3
// warm-ups, two passes of opposite order averaged; the two results bitwise equal): the little-N sweep's moves
// (N 256..2112 x K 512..16384 x M 512..3072), one M drawn at random from each of 134 intervals the rule moves
// (drawn from the grid N 256..8192 x nine K), and the nine shapes of kFirstRoundsCheck and two of kNarrowCheck
// it moves. Each shape's rows: the previous plan's tile, then the fill tile. 149 shapes: 0.933 of the previous
// plan's time on geometric mean (0.843-1.005; 148 faster by over 1 %).
const Measured kFillMoves[] = {
    {9879, 256, 512, 64, 128, 10.05}, {9879, 256, 512, 128, 96, 9.90}, {5055, 256, 1024, 128, 128, 9.92},
    {5055, 256, 1024, 128, 96, 9.34}, {8449, 256, 1024, 64, 128, 12.66}, {8449, 256, 1024, 128, 96, 12.21},
    {2554, 256, 1536, 64, 128, 9.18}, {2554, 256, 1536, 64, 96, 8.94}, {8449, 256, 1536, 64, 128, 15.28},
    {8449, 256, 1536, 128, 96, 14.80}, {9057, 256, 1536, 64, 128, 15.70}, {9057, 256, 1536, 128, 96, 14.86},
    {10604, 256, 1536, 64, 128, 16.03}, {10604, 256, 1536, 128, 96, 15.14}, {2113, 256, 2048, 64, 128, 9.79},
    {2113, 256, 2048, 64, 96, 9.26}, {8449, 256, 2048, 64, 128, 18.24}, {8449, 256, 2048, 128, 96, 16.91},
    {9680, 256, 2048, 64, 128, 18.83}, {9680, 256, 2048, 128, 96, 17.18}, {2113, 256, 3072, 64, 128, 11.49},
    {2113, 256, 3072, 64, 96, 10.85}, {2199, 256, 3072, 64, 128, 11.68}, {2199, 256, 3072, 64, 96, 10.86},
    {2429, 256, 3072, 64, 128, 11.79}, {2429, 256, 3072, 64, 96, 11.15}, {4704, 256, 3072, 128, 128, 15.89},
    {4704, 256, 3072, 128, 96, 14.06}, {8449, 256, 3072, 128, 128, 25.95}, {8449, 256, 3072, 128, 96, 22.35},
    {9580, 256, 3072, 128, 128, 27.15}, {9580, 256, 3072, 128, 96, 22.88}, {9692, 256, 3072, 128, 128, 26.88},
    {9692, 256, 3072, 128, 96, 22.66}, {10954, 256, 3072, 128, 128, 27.58}, {10954, 256, 3072, 128, 96, 23.63},
    {11234, 256, 3072, 128, 128, 27.66}, {11234, 256, 3072, 128, 96, 23.60}, {9146, 256, 4096, 256, 128, 31.01},
    {9146, 256, 4096, 128, 96, 27.84}, {9678, 256, 8192, 256, 128, 52.00}, {9678, 256, 8192, 128, 96, 48.34},
    {10209, 256, 8192, 256, 128, 52.48}, {10209, 256, 8192, 128, 96, 48.78}, {5241, 256, 16384, 128, 128, 53.12},
    {5241, 256, 16384, 128, 96, 46.93}, {12094, 320, 1024, 128, 160, 15.33}, {12094, 320, 1024, 128, 80, 14.19},
    {12123, 320, 1536, 128, 160, 19.02}, {12123, 320, 1536, 128, 80, 18.19}, {11405, 320, 2048, 128, 160, 22.03},
    {11405, 320, 2048, 128, 80, 21.46}, {11714, 320, 3072, 128, 160, 29.79}, {11714, 320, 3072, 128, 80, 28.75},
    {3841, 384, 1024, 128, 128, 9.81}, {3841, 384, 1024, 128, 96, 9.28}, {11354, 384, 1024, 128, 192, 17.14},
    {11354, 384, 1024, 128, 96, 15.14}, {1536, 384, 2048, 64, 128, 9.95}, {1536, 384, 2048, 64, 96, 9.26},
    {2048, 384, 2048, 64, 128, 9.74}, {2048, 384, 2048, 64, 96, 9.25}, {3072, 384, 2048, 128, 128, 12.67},
    {3072, 384, 2048, 128, 96, 11.78}, {4037, 384, 3072, 128, 128, 15.25}, {4037, 384, 3072, 128, 96, 14.03},
    {12568, 384, 3072, 128, 192, 34.72}, {12568, 384, 3072, 128, 96, 31.07}, {12109, 384, 4096, 128, 192, 43.28},
    {12109, 384, 4096, 128, 96, 38.05}, {3072, 384, 7168, 128, 128, 26.10}, {3072, 384, 7168, 128, 96, 23.42},
    {2591, 448, 512, 128, 128, 8.21}, {2591, 448, 512, 128, 96, 7.76}, {1536, 448, 1024, 128, 64, 7.94},
    {1536, 448, 1024, 64, 96, 7.65}, {3148, 448, 1024, 128, 128, 9.90}, {3148, 448, 1024, 128, 96, 9.10},
    {12778, 448, 1024, 128, 160, 19.26}, {12778, 448, 1024, 128, 96, 18.22}, {2384, 448, 1536, 128, 128, 10.99},
    {2384, 448, 1536, 128, 96, 10.14}, {1024, 576, 512, 128, 64, 7.18}, {1024, 576, 512, 64, 96, 6.74},
    {2048, 576, 512, 128, 128, 7.76}, {2048, 576, 512, 128, 96, 7.39}, {1955, 576, 1024, 128, 128, 9.15},
    {1955, 576, 1024, 128, 96, 8.51}, {1149, 576, 1536, 128, 64, 8.83}, {1149, 576, 1536, 64, 96, 8.26},
    {1024, 576, 2048, 128, 64, 9.44}, {1024, 576, 2048, 64, 96, 8.94}, {1027, 576, 2048, 128, 64, 9.92},
    {1027, 576, 2048, 64, 96, 9.17}, {2048, 576, 2048, 128, 128, 12.13}, {2048, 576, 2048, 128, 96, 11.18},
    {2098, 576, 2048, 128, 128, 12.18}, {2098, 576, 2048, 128, 96, 11.25}, {13879, 576, 2048, 128, 192, 35.09},
    {13879, 576, 2048, 128, 96, 33.36}, {848, 640, 2048, 64, 128, 9.94}, {848, 640, 2048, 64, 96, 9.15},
    {2015, 640, 2048, 128, 128, 12.16}, {2015, 640, 2048, 128, 96, 11.55}, {4239, 640, 3072, 128, 128, 24.43},
    {4239, 640, 3072, 128, 96, 21.90}, {1817, 704, 2048, 128, 128, 12.30}, {1817, 704, 2048, 128, 96, 11.26},
    {1648, 768, 512, 128, 128, 8.14}, {1648, 768, 512, 128, 96, 7.36}, {14081, 768, 512, 128, 128, 18.46},
    {14081, 768, 512, 128, 96, 17.98}, {1680, 768, 1024, 128, 128, 9.23}, {1680, 768, 1024, 128, 96, 8.62},
    {1536, 768, 2048, 128, 128, 12.21}, {1536, 768, 2048, 128, 96, 11.33}, {2048, 768, 2048, 128, 128, 12.19},
    {2048, 768, 2048, 128, 96, 11.23}, {1722, 832, 512, 128, 128, 8.02}, {1722, 832, 512, 128, 96, 7.55},
    {7257, 832, 512, 128, 160, 13.14}, {7257, 832, 512, 128, 96, 12.83}, {12509, 832, 512, 128, 128, 18.42},
    {12509, 832, 512, 128, 96, 18.10}, {1425, 832, 1024, 128, 128, 9.60}, {1425, 832, 1024, 128, 96, 8.74},
    {1695, 832, 1024, 128, 128, 9.41}, {1695, 832, 1024, 128, 96, 9.09}, {14527, 832, 2048, 128, 128, 49.89},
    {14527, 832, 2048, 128, 96, 49.23}, {1494, 896, 512, 128, 128, 7.98}, {1494, 896, 512, 128, 96, 7.33},
    {1592, 896, 512, 128, 128, 8.18}, {1592, 896, 512, 128, 96, 7.57}, {1646, 896, 2048, 128, 128, 12.29},
    {1646, 896, 2048, 128, 96, 11.54}, {702, 960, 1536, 64, 128, 8.96}, {702, 960, 1536, 64, 96, 8.51},
    {1511, 1024, 512, 128, 128, 7.95}, {1511, 1024, 512, 128, 96, 7.58}, {1267, 1024, 1024, 128, 128, 9.33},
    {1267, 1024, 1024, 128, 96, 8.61}, {1528, 1024, 1536, 128, 128, 10.75}, {1528, 1024, 1536, 128, 96, 10.16},
    {3008, 1024, 1536, 64, 128, 15.31}, {3008, 1024, 1536, 128, 96, 14.53}, {3009, 1024, 1536, 128, 128, 15.89},
    {3009, 1024, 1536, 128, 96, 14.40}, {1536, 1024, 2048, 128, 128, 12.37}, {1536, 1024, 2048, 128, 96, 11.54},
    {2880, 1024, 2048, 64, 128, 17.95}, {2880, 1024, 2048, 128, 96, 16.86}, {2881, 1024, 2048, 128, 128, 18.51},
    {2881, 1024, 2048, 128, 96, 16.78}, {3072, 1024, 2048, 128, 128, 18.98}, {3072, 1024, 2048, 128, 96, 17.36},
    {1318, 1088, 1024, 128, 128, 9.57}, {1318, 1088, 1024, 128, 96, 8.91}, {624, 1088, 2048, 64, 128, 9.84},
    {624, 1088, 2048, 64, 96, 9.15}, {1273, 1088, 2048, 128, 128, 12.22}, {1273, 1088, 2048, 128, 96, 11.34},
    {1221, 1152, 1024, 128, 128, 9.33}, {1221, 1152, 1024, 128, 96, 8.82}, {457, 1152, 1536, 64, 128, 8.69},
    {457, 1152, 1536, 64, 96, 8.11}, {1408, 1152, 1536, 128, 128, 10.69}, {1408, 1152, 1536, 128, 96, 10.08},
    {1024, 1152, 2048, 128, 128, 11.87}, {1024, 1152, 2048, 128, 96, 11.04}, {878, 1216, 1536, 128, 128, 10.58},
    {878, 1216, 1536, 128, 96, 9.81}, {418, 1280, 1536, 64, 128, 8.91}, {418, 1280, 1536, 64, 96, 8.30},
    {8190, 1344, 512, 128, 128, 18.24}, {8190, 1344, 512, 128, 96, 18.34}, {922, 1344, 1536, 128, 128, 10.72},
    {922, 1344, 1536, 128, 96, 10.08}, {869, 1408, 1024, 128, 128, 9.22}, {869, 1408, 1024, 128, 96, 8.83},
    {882, 1536, 512, 128, 128, 7.84}, {882, 1536, 512, 128, 96, 7.41}, {1024, 1536, 512, 128, 128, 8.10},
    {1024, 1536, 512, 128, 96, 7.63}, {512, 1536, 2048, 64, 128, 10.00}, {512, 1536, 2048, 64, 96, 9.20},
    {660, 1600, 1024, 128, 128, 9.10}, {660, 1600, 1024, 128, 96, 8.54}, {3955, 1600, 1024, 128, 160, 18.53},
    {3955, 1600, 1024, 128, 96, 17.79}, {704, 1600, 2048, 128, 128, 12.10}, {704, 1600, 2048, 128, 96, 11.23},
    {741, 1664, 1024, 128, 128, 9.20}, {741, 1664, 1024, 128, 96, 8.50}, {647, 1664, 1536, 128, 128, 10.48},
    {647, 1664, 1536, 128, 96, 10.00}, {688, 1728, 512, 128, 128, 7.76}, {688, 1728, 512, 128, 80, 7.30},
    {376, 1728, 2048, 64, 128, 9.73}, {376, 1728, 2048, 64, 96, 9.17}, {309, 1792, 1024, 64, 128, 7.97},
    {309, 1792, 1024, 64, 96, 7.60}, {302, 1792, 1536, 64, 128, 8.93}, {302, 1792, 1536, 64, 96, 8.56},
    {575, 1984, 512, 128, 128, 7.58}, {575, 1984, 512, 128, 96, 7.39}, {514, 1984, 2048, 128, 128, 11.98},
    {514, 1984, 2048, 128, 96, 11.22}, {3135, 1984, 2048, 128, 160, 28.85}, {3135, 1984, 2048, 128, 96, 27.71},
    {737, 2048, 1024, 128, 128, 9.54}, {737, 2048, 1024, 128, 96, 9.06}, {619, 2112, 1024, 128, 128, 9.34},
    {619, 2112, 1024, 128, 96, 8.77}, {677, 2112, 1024, 128, 128, 9.30}, {677, 2112, 1024, 128, 96, 8.80},
    {236, 2176, 2048, 64, 128, 9.74}, {236, 2176, 2048, 64, 96, 9.15}, {208, 2176, 3072, 64, 128, 11.44},
    {208, 2176, 3072, 64, 96, 10.62}, {242, 2240, 512, 64, 128, 6.85}, {242, 2240, 512, 64, 96, 6.54},
    {292, 2240, 1024, 64, 128, 8.03}, {292, 2240, 1024, 64, 96, 7.60}, {198, 2240, 1536, 64, 128, 8.91},
    {198, 2240, 1536, 64, 96, 8.43}, {195, 2240, 2048, 64, 128, 9.89}, {195, 2240, 2048, 64, 96, 9.18},
    {229, 2240, 3072, 64, 128, 11.50}, {229, 2240, 3072, 64, 96, 10.85}, {250, 2304, 2048, 64, 128, 9.74},
    {250, 2304, 2048, 64, 96, 9.36}, {458, 2560, 1024, 128, 128, 9.30}, {458, 2560, 1024, 128, 80, 8.51},
    {396, 2560, 2048, 128, 128, 12.18}, {396, 2560, 2048, 128, 80, 10.74}, {406, 2560, 3072, 128, 128, 14.72},
    {406, 2560, 3072, 128, 80, 12.78}, {173, 3072, 512, 64, 128, 6.88}, {173, 3072, 512, 64, 96, 6.78},
    {164, 3072, 1536, 64, 128, 9.14}, {164, 3072, 1536, 64, 96, 8.69}, {130, 3328, 3072, 64, 128, 12.10},
    {130, 3328, 3072, 64, 96, 11.12}, {333, 3584, 1536, 128, 128, 11.02}, {333, 3584, 1536, 128, 96, 10.22},
    {300, 3584, 2048, 128, 128, 12.42}, {300, 3584, 2048, 128, 96, 11.34}, {370, 3584, 2048, 128, 128, 12.48},
    {370, 3584, 2048, 128, 96, 11.39}, {316, 3584, 3072, 128, 128, 15.07}, {316, 3584, 3072, 128, 96, 13.92},
    {313, 3840, 3072, 128, 128, 15.01}, {313, 3840, 3072, 128, 96, 13.98}, {322, 3840, 3072, 128, 128, 15.14},
    {322, 3840, 3072, 128, 96, 14.05}, {375, 4096, 512, 128, 128, 8.14}, {375, 4096, 512, 128, 96, 7.78},
    {277, 4096, 3072, 128, 128, 15.22}, {277, 4096, 3072, 128, 96, 13.90}, {119, 4352, 512, 64, 128, 7.28},
    {119, 4352, 512, 64, 96, 7.06}, {209, 4352, 1536, 128, 128, 10.91}, {209, 4352, 1536, 64, 144, 9.50},
    {79, 4352, 2048, 64, 128, 10.29}, {79, 4352, 2048, 64, 96, 9.76}, {69, 4352, 8192, 64, 128, 20.35},
    {69, 4352, 8192, 64, 96, 19.22}, {128, 4352, 16384, 64, 128, 34.06}, {128, 4352, 16384, 64, 96, 32.59},
    {232, 4608, 512, 128, 128, 8.11}, {232, 4608, 512, 64, 144, 7.39}, {205, 4864, 3072, 128, 128, 15.04},
    {205, 4864, 3072, 128, 80, 13.14}, {81, 5120, 512, 64, 128, 7.68}, {81, 5120, 512, 64, 96, 7.18},
    {100, 5120, 4096, 64, 128, 13.89}, {100, 5120, 4096, 64, 96, 13.06}, {79, 5120, 7168, 64, 128, 19.07},
    {79, 5120, 7168, 64, 96, 18.26}, {252, 5120, 8192, 128, 128, 28.37}, {252, 5120, 8192, 128, 80, 23.98},
    {74, 5376, 512, 64, 128, 7.28}, {74, 5376, 512, 64, 96, 6.99}, {117, 5376, 512, 64, 128, 7.79},
    {117, 5376, 512, 64, 96, 7.54}, {122, 5376, 4096, 64, 128, 14.03}, {122, 5376, 4096, 64, 96, 13.22},
    {118, 5376, 16384, 64, 128, 35.20}, {118, 5376, 16384, 64, 96, 33.44}, {83, 5632, 512, 64, 128, 7.46},
    {83, 5632, 512, 64, 96, 7.15}, {110, 5632, 7168, 64, 128, 19.42}, {110, 5632, 7168, 64, 96, 18.82},
    {100, 6144, 8192, 64, 128, 21.62}, {100, 6144, 8192, 64, 96, 20.78}, {255, 6144, 16384, 128, 128, 51.41},
    {255, 6144, 16384, 128, 96, 46.18},
};

TEST(Fp8GemmHeuristic, FillTilesTakeTheRunsTheirChecksTimed) {
  size_t shapes = 0;
  const std::vector<Judged> judged = judge_plan(kFillMoves, false, &shapes);
  EXPECT_EQ(shapes, 149u);
  EXPECT_EQ(judged.size(), 149u);
  EXPECT_LT(expect_within_misses(judged, {}, 1.01), 0.01);  // 0.005: 8190 x 1344 x 512, 0.5 % slower
  expect_moved_to_second_rows(judged);
}

// Where the fill tiles of kFillTiles were timed slower or not at all, plans do not take them (128x112, the one fill
// tile above N = 6144, has Fill112StaysWhereItWasNotTimed): above N = 6144 (at N = 9216..12288 64x96 for 64x128's
// one-m-block kernel was 0-2.6 % slower at M <= 64, the model 3 % faster), at M <= 128 with 128 rows (128x96 at
// 128 x 24576 x 1536 1.9 % slower than 64x128), in the weight-gradient form, under tile, split or cluster
// overrides, and past the sampled range (the tail, long M and beyond: 128x80 at 27407 and 36336 x 320 x 512 15-23 %
// slower than the tail's 128x160). The warm-up's seven (N, K) keep their plans: at 576 x 7168 each swap
// costs the decode kernels more of the pruning's mean than 64x144 gains at M = 1793..2112 (20 % there).
TEST(Fp8GemmHeuristic, FillTilesStayWhereTheyWereNotTimed) {
  const auto is_fill = [](const Fp8GemmConfig& c) {
    return (c.block_m == 64 && (c.block_n == 96 || c.block_n == 144)) ||
           (c.block_m == 128 && (c.block_n == 80 || c.block_n == 96));
  };
  const auto has_fill = [&](const Fp8GemmPlan& plan) {
    return std::any_of(plan.kernels.begin(), plan.kernels.end(), is_fill);
  };
  size_t with_fill = 0;
  for (int64_t n = 256; n <= 12288; n += 256)
    for (const int64_t k : {512, 2048, 7168}) {
      const Fp8GemmPlan plan = fp8_gemm_plan(kH200, n, k);
      expect_well_formed(plan);
      if (n > 6144) EXPECT_FALSE(has_fill(plan)) << n << " x " << k;
      with_fill += has_fill(plan) ? 1 : 0;
      for (const Fp8GemmBucket& b : plan.buckets) {
        const Fp8GemmConfig& c = plan.kernels[static_cast<size_t>(b.kernel)];
        if (is_fill(c) && c.block_m == 128) EXPECT_GT(b.m_lo, 128) << n << " x " << k << ": " << c.describe();
        if (is_fill(c)) EXPECT_LE(b.m_hi, kFp8GemmSampledMaxM) << n << " x " << k << ": " << c.describe();
      }
      EXPECT_FALSE(has_fill(fp8_gemm_plan(kH200, n, k, {}, Fp8GemmForm::kAccumulate))) << n << " x " << k;
    }
  EXPECT_GT(with_fill, 20u);  // they do serve, as at 1536 x 2048 (M = 321..512)
  EXPECT_TRUE(has_fill(fp8_gemm_plan(kH200, 1536, 2048)));
  expect_tile_at(fp8_gemm_plan(kH200, 1536, 2048), 512, 64, 96);
  expect_tile_at(fp8_gemm_plan(kH200, 24576, 1536), 128, 64, 128);
  Fp8GemmOverrides rows;
  rows.block_m = 128;
  Fp8GemmOverrides split;
  split.split_k = 2;
  Fp8GemmOverrides pairs;
  pairs.cluster_n = 2;
  for (const Fp8GemmOverrides& o : {rows, split, pairs})
    EXPECT_FALSE(has_fill(fp8_gemm_plan(kH200, 1536, 2048, o)));
  for (const auto& [n, k] : warmup_shapes()) EXPECT_FALSE(has_fill(fp8_gemm_plan(kH200, n, k))) << n << " x " << k;
}

// 128x112 above N = 6144 where 112 divides N, from K = 1536 (kFill112): at M = 129..256 7168 columns make 56 tiles of
// 128x128 an m block (112 CTAs busy) and 64 of 128x112 (128). Timed on the H200 and on an H100 (2026-12-06,
// forty-sixth session, fp8_gemm_test --shapes, the idle harness, the two tiles in alternating order): 49 shapes of
// the runs it moves (N 6272..14336, K 1536..18432, M 129..512; 14336 x 3072 in groups of 16, as the plan), among
// them every shape of the tables above that it moved (kSweep's 256 x 7168 x 2048 and 16384, kSplitKRefit's 192 x
// 7168 x 2048 and 16384, kRefitCheck's 448 and kRefitCheckLow's 385 x 7168 x 2048, kRaggedM's 160 x 7168 x 2048
// and 16384 and 448 x 7168 x 2048, kFirstRoundsCheck's 512 x 7168 x 1536, 2048 and 3072). Each shape's rows: 128x128
// (the tile before), then 128x112. 0.949 of 128x128's time on geometric mean on the H200 (0.913-0.988); on the H100
// 0.946 (0.893-0.988) at 44 of them (all but 160 and 192 x 7168 x 2048 and 16384 and 448 x 7168 x 2048).
const Measured kFill112Moves[] = {
    {129, 6272, 2048, 128, 128, 12.9}, {129, 6272, 2048, 128, 112, 12.4}, {256, 6272, 2048, 128, 128, 13.0},
    {256, 6272, 2048, 128, 112, 12.6}, {129, 7168, 1536, 128, 128, 11.7}, {129, 7168, 1536, 128, 112, 11.3},
    {167, 7168, 1536, 128, 128, 11.8}, {167, 7168, 1536, 128, 112, 11.4}, {192, 7168, 1536, 128, 128, 11.8},
    {192, 7168, 1536, 128, 112, 11.3}, {385, 7168, 1536, 128, 128, 16.2}, {385, 7168, 1536, 128, 112, 15.5},
    {455, 7168, 1536, 128, 128, 16.2}, {455, 7168, 1536, 128, 112, 15.7}, {512, 7168, 1536, 128, 128, 16.4},
    {512, 7168, 1536, 128, 112, 16.2}, {129, 7168, 2048, 128, 128, 13.1}, {129, 7168, 2048, 128, 112, 12.6},
    {160, 7168, 2048, 128, 128, 13.1}, {160, 7168, 2048, 128, 112, 12.4}, {192, 7168, 2048, 128, 128, 13.0},
    {192, 7168, 2048, 128, 112, 12.5}, {199, 7168, 2048, 128, 128, 13.1}, {199, 7168, 2048, 128, 112, 12.5},
    {256, 7168, 2048, 128, 128, 13.1}, {256, 7168, 2048, 128, 112, 12.6}, {385, 7168, 2048, 128, 128, 19.1},
    {385, 7168, 2048, 128, 112, 18.0}, {448, 7168, 2048, 128, 128, 19.0}, {448, 7168, 2048, 128, 112, 18.3},
    {455, 7168, 2048, 128, 128, 19.0}, {455, 7168, 2048, 128, 112, 18.3}, {512, 7168, 2048, 128, 128, 19.2},
    {512, 7168, 2048, 128, 112, 18.5}, {129, 7168, 3072, 128, 128, 15.8}, {129, 7168, 3072, 128, 112, 15.2},
    {199, 7168, 3072, 128, 128, 15.9}, {199, 7168, 3072, 128, 112, 15.0}, {256, 7168, 3072, 128, 128, 15.9},
    {256, 7168, 3072, 128, 112, 15.2}, {385, 7168, 3072, 128, 128, 24.6}, {385, 7168, 3072, 128, 112, 23.3},
    {455, 7168, 3072, 128, 128, 24.7}, {455, 7168, 3072, 128, 112, 23.6}, {512, 7168, 3072, 128, 128, 24.9},
    {512, 7168, 3072, 128, 112, 23.8}, {129, 7168, 4096, 128, 128, 18.5}, {129, 7168, 4096, 128, 112, 17.6},
    {199, 7168, 4096, 128, 128, 18.5}, {199, 7168, 4096, 128, 112, 17.6}, {256, 7168, 4096, 128, 128, 18.8},
    {256, 7168, 4096, 128, 112, 17.7}, {129, 7168, 7168, 128, 128, 27.3}, {129, 7168, 7168, 128, 112, 25.5},
    {199, 7168, 7168, 128, 128, 27.5}, {199, 7168, 7168, 128, 112, 25.7}, {200, 7168, 7168, 128, 128, 27.8},
    {200, 7168, 7168, 128, 112, 25.9}, {256, 7168, 7168, 128, 128, 27.5}, {256, 7168, 7168, 128, 112, 25.8},
    {129, 7168, 8192, 128, 128, 29.4}, {129, 7168, 8192, 128, 112, 28.4}, {199, 7168, 8192, 128, 128, 29.5},
    {199, 7168, 8192, 128, 112, 28.1}, {256, 7168, 8192, 128, 128, 30.1}, {256, 7168, 8192, 128, 112, 28.2},
    {129, 7168, 16384, 128, 128, 51.3}, {129, 7168, 16384, 128, 112, 48.8}, {160, 7168, 16384, 128, 128, 51.8},
    {160, 7168, 16384, 128, 112, 49.4}, {192, 7168, 16384, 128, 128, 52.3}, {192, 7168, 16384, 128, 112, 49.3},
    {199, 7168, 16384, 128, 128, 52.8}, {199, 7168, 16384, 128, 112, 49.5}, {256, 7168, 16384, 128, 128, 53.8},
    {256, 7168, 16384, 128, 112, 50.4}, {129, 7168, 18432, 128, 128, 57.5}, {129, 7168, 18432, 128, 112, 54.2},
    {199, 7168, 18432, 128, 128, 59.1}, {199, 7168, 18432, 128, 112, 55.2}, {256, 7168, 18432, 128, 128, 60.2},
    {256, 7168, 18432, 128, 112, 55.5}, {257, 8960, 16384, 128, 128, 104.7}, {257, 8960, 16384, 128, 112, 95.7},
    {320, 8960, 16384, 128, 128, 105.4}, {320, 8960, 16384, 128, 112, 96.2}, {384, 8960, 16384, 128, 128, 106.2},
    {384, 8960, 16384, 128, 112, 97.0}, {129, 14336, 2048, 128, 128, 19.6}, {129, 14336, 2048, 128, 112, 18.6},
    {199, 14336, 2048, 128, 128, 20.0}, {199, 14336, 2048, 128, 112, 18.8}, {256, 14336, 2048, 128, 128, 20.3},
    {256, 14336, 2048, 128, 112, 19.2}, {129, 14336, 3072, 128, 128, 25.4}, {129, 14336, 3072, 128, 112, 23.9},
    {256, 14336, 3072, 128, 128, 26.1}, {256, 14336, 3072, 128, 112, 24.5},
};
// 44 of the shapes on the H100 (the same SMs and shared memory, so the same plans).
const Measured kFill112MovesH100[] = {
    {129, 6272, 2048, 128, 128, 13.5}, {129, 6272, 2048, 128, 112, 13.2}, {256, 6272, 2048, 128, 128, 13.8},
    {256, 6272, 2048, 128, 112, 13.1}, {129, 7168, 1536, 128, 128, 12.7}, {129, 7168, 1536, 128, 112, 12.3},
    {167, 7168, 1536, 128, 128, 12.6}, {167, 7168, 1536, 128, 112, 12.1}, {192, 7168, 1536, 128, 128, 12.7},
    {192, 7168, 1536, 128, 112, 12.3}, {385, 7168, 1536, 128, 128, 16.9}, {385, 7168, 1536, 128, 112, 16.3},
    {455, 7168, 1536, 128, 128, 17.0}, {455, 7168, 1536, 128, 112, 16.8}, {512, 7168, 1536, 128, 128, 17.2},
    {512, 7168, 1536, 128, 112, 16.9}, {129, 7168, 2048, 128, 128, 14.1}, {129, 7168, 2048, 128, 112, 13.3},
    {199, 7168, 2048, 128, 128, 14.0}, {199, 7168, 2048, 128, 112, 13.5}, {256, 7168, 2048, 128, 128, 14.0},
    {256, 7168, 2048, 128, 112, 13.4}, {385, 7168, 2048, 128, 128, 19.8}, {385, 7168, 2048, 128, 112, 19.0},
    {455, 7168, 2048, 128, 128, 19.8}, {455, 7168, 2048, 128, 112, 19.3}, {512, 7168, 2048, 128, 128, 20.0},
    {512, 7168, 2048, 128, 112, 19.6}, {129, 7168, 3072, 128, 128, 17.4}, {129, 7168, 3072, 128, 112, 16.4},
    {199, 7168, 3072, 128, 128, 17.3}, {199, 7168, 3072, 128, 112, 16.5}, {256, 7168, 3072, 128, 128, 17.4},
    {256, 7168, 3072, 128, 112, 16.6}, {385, 7168, 3072, 128, 128, 26.0}, {385, 7168, 3072, 128, 112, 24.7},
    {455, 7168, 3072, 128, 128, 26.1}, {455, 7168, 3072, 128, 112, 24.9}, {512, 7168, 3072, 128, 128, 26.5},
    {512, 7168, 3072, 128, 112, 25.4}, {129, 7168, 4096, 128, 128, 20.4}, {129, 7168, 4096, 128, 112, 19.1},
    {199, 7168, 4096, 128, 128, 20.2}, {199, 7168, 4096, 128, 112, 19.2}, {256, 7168, 4096, 128, 128, 20.5},
    {256, 7168, 4096, 128, 112, 19.3}, {129, 7168, 7168, 128, 128, 30.3}, {129, 7168, 7168, 128, 112, 28.1},
    {199, 7168, 7168, 128, 128, 30.2}, {199, 7168, 7168, 128, 112, 28.5}, {200, 7168, 7168, 128, 128, 30.0},
    {200, 7168, 7168, 128, 112, 28.6}, {256, 7168, 7168, 128, 128, 30.7}, {256, 7168, 7168, 128, 112, 29.0},
    {129, 7168, 8192, 128, 128, 32.6}, {129, 7168, 8192, 128, 112, 30.8}, {199, 7168, 8192, 128, 128, 32.6},
    {199, 7168, 8192, 128, 112, 31.6}, {256, 7168, 8192, 128, 128, 33.3}, {256, 7168, 8192, 128, 112, 30.9},
    {129, 7168, 16384, 128, 128, 59.2}, {129, 7168, 16384, 128, 112, 55.3}, {199, 7168, 16384, 128, 128, 59.6},
    {199, 7168, 16384, 128, 112, 55.7}, {256, 7168, 16384, 128, 128, 61.0}, {256, 7168, 16384, 128, 112, 57.0},
    {129, 7168, 18432, 128, 128, 65.4}, {129, 7168, 18432, 128, 112, 60.4}, {199, 7168, 18432, 128, 128, 66.8},
    {199, 7168, 18432, 128, 112, 61.6}, {256, 7168, 18432, 128, 128, 67.9}, {256, 7168, 18432, 128, 112, 62.4},
    {257, 8960, 16384, 128, 128, 109.6}, {257, 8960, 16384, 128, 112, 99.1}, {320, 8960, 16384, 128, 128, 110.0},
    {320, 8960, 16384, 128, 112, 100.3}, {384, 8960, 16384, 128, 128, 110.6}, {384, 8960, 16384, 128, 112, 100.4},
    {129, 14336, 2048, 128, 128, 21.6}, {129, 14336, 2048, 128, 112, 19.8}, {199, 14336, 2048, 128, 128, 21.5},
    {199, 14336, 2048, 128, 112, 20.4}, {256, 14336, 2048, 128, 128, 22.2}, {256, 14336, 2048, 128, 112, 21.1},
    {129, 14336, 3072, 128, 128, 29.0}, {129, 14336, 3072, 128, 112, 25.9}, {256, 14336, 3072, 128, 128, 29.0},
    {256, 14336, 3072, 128, 112, 27.2},
};

TEST(Fp8GemmHeuristic, Fill112TakesTheRunsItsChecksTimedOnBothCards) {
  size_t shapes = 0;
  const std::vector<Judged> h200 = judge_plan(kFill112Moves, false, &shapes);
  EXPECT_EQ(shapes, 49u);
  EXPECT_EQ(h200.size(), 49u);
  EXPECT_EQ(expect_within_misses(h200, {}, 1.0), 0.0);  // 128x112 the faster at every shape
  expect_moved_to_second_rows(h200);
  const std::vector<Judged> h100 = judge_plan(kFill112MovesH100, false, &shapes);
  EXPECT_EQ(shapes, 44u);
  EXPECT_EQ(h100.size(), 44u);
  EXPECT_EQ(expect_within_misses(h100, {}, 1.0), 0.0);
}

// Pairs (256x128 sharing A) where M has at most two of their m blocks, against the 128-row tiles (an H100, 2026-12-06,
// forty-seventh session, fp8_gemm_test --shapes: medians of 20 flushed CUDA-event timings, each call in both orders and
// the two averaged, us; every result checked against float64): 36 calls where the plan took pairs at M <= 512 (30
// drawn at random, seed 512, and six chosen; N 6656..65536, K 256..16384), 24576 x 1536 at M = 400..512 (groups of 16,
// as planned) and 32768 x 512 at M = 448..1024 (one order). Pairs took 1.063x the best 128-row tile's time on geometric
// mean over the first 36 (and 448 x 24576 x 1536 in groups of 8), 1.10-1.25x at K <= 1024; from K = 7168 0.89-1.02x.
const Measured kThinPairsH100[] = {
    {491, 41984, 256, 256, 128, 27.8}, {491, 41984, 256, 128, 128, 23.8}, {491, 41984, 256, 128, 160, 24.1},
    {454, 38400, 256, 256, 128, 25.5}, {454, 38400, 256, 128, 128, 21.9}, {454, 38400, 256, 128, 160, 22.2},
    {424, 58368, 256, 256, 128, 35.1}, {424, 58368, 256, 128, 128, 29.2}, {386, 49152, 512, 256, 128, 41.8},
    {386, 49152, 512, 128, 128, 33.4}, {441, 24576, 512, 256, 128, 22.6}, {441, 24576, 512, 128, 128, 20.4},
    {399, 48640, 512, 256, 128, 38.8}, {399, 48640, 512, 128, 128, 33.9}, {243, 65536, 768, 256, 128, 40.3},
    {243, 65536, 768, 128, 128, 40.0}, {505, 38400, 768, 256, 128, 41.8}, {505, 38400, 768, 128, 128, 39.9},
    {505, 38400, 768, 128, 160, 37.4}, {445, 57856, 768, 256, 128, 54.6}, {445, 57856, 768, 128, 128, 51.2},
    {445, 57856, 768, 128, 160, 48.3}, {249, 45568, 1024, 256, 128, 36.7}, {249, 45568, 1024, 128, 128, 36.2},
    {249, 45568, 1024, 128, 192, 35.7}, {207, 48640, 1024, 256, 128, 37.2}, {207, 48640, 1024, 128, 128, 35.7},
    {207, 48640, 1024, 128, 192, 38.1}, {397, 47104, 1024, 256, 128, 55.8}, {397, 47104, 1024, 128, 128, 50.7},
    {397, 47104, 1024, 128, 160, 46.2}, {194, 50688, 1536, 256, 128, 48.2}, {194, 50688, 1536, 128, 128, 46.6},
    {194, 50688, 1536, 128, 192, 48.8}, {397, 64512, 1536, 256, 128, 100.6}, {397, 64512, 1536, 128, 128, 91.2},
    {397, 64512, 1536, 128, 192, 88.7}, {238, 42496, 1536, 256, 128, 45.1}, {238, 42496, 1536, 128, 128, 44.5},
    {238, 42496, 1536, 128, 192, 43.9}, {398, 39424, 2048, 256, 128, 81.2}, {398, 39424, 2048, 128, 128, 73.2},
    {398, 39424, 2048, 128, 176, 71.6}, {425, 58368, 2048, 256, 128, 104.6}, {425, 58368, 2048, 128, 128, 103.0},
    {510, 25088, 2048, 256, 128, 49.0}, {510, 25088, 2048, 128, 128, 48.9}, {510, 25088, 2048, 128, 192, 47.5},
    {199, 47104, 3072, 256, 128, 77.2}, {199, 47104, 3072, 128, 128, 76.2}, {199, 47104, 3072, 128, 192, 75.8},
    {495, 64512, 3072, 256, 128, 164.3}, {495, 64512, 3072, 128, 128, 164.8}, {495, 64512, 3072, 128, 192, 163.3},
    {454, 40448, 3072, 256, 128, 104.1}, {454, 40448, 3072, 128, 128, 105.3}, {454, 40448, 3072, 128, 160, 102.0},
    {140, 14336, 4096, 256, 128, 38.5}, {140, 14336, 4096, 128, 128, 34.4}, {227, 46592, 4096, 256, 128, 95.2},
    {227, 46592, 4096, 128, 128, 96.2}, {227, 46592, 4096, 128, 192, 93.7}, {411, 16896, 4096, 256, 128, 63.7},
    {411, 16896, 4096, 128, 128, 57.8}, {411, 16896, 4096, 128, 176, 58.8}, {235, 33280, 7168, 256, 128, 113.0},
    {235, 33280, 7168, 128, 128, 111.7}, {247, 63488, 7168, 256, 128, 210.4}, {247, 63488, 7168, 128, 128, 211.1},
    {477, 6656, 7168, 256, 128, 45.3}, {477, 6656, 7168, 128, 128, 50.6}, {196, 15872, 16384, 256, 128, 120.7},
    {196, 15872, 16384, 128, 128, 118.8}, {435, 24064, 16384, 256, 128, 291.9}, {435, 24064, 16384, 128, 128, 320.8},
    {435, 24064, 16384, 128, 192, 291.4}, {385, 65536, 16384, 256, 128, 833.2}, {385, 65536, 16384, 128, 128, 883.5},
    {385, 65536, 16384, 128, 192, 815.8}, {500, 24576, 512, 256, 128, 23.4}, {500, 24576, 512, 128, 128, 21.1},
    {448, 7168, 7168, 256, 128, 46.1}, {448, 7168, 7168, 128, 112, 47.2}, {448, 7168, 7168, 128, 128, 51.3},
    {480, 16384, 2048, 256, 128, 34.3}, {480, 16384, 2048, 128, 128, 34.8}, {480, 32768, 512, 256, 128, 28.9},
    {480, 32768, 512, 128, 128, 26.0}, {448, 7168, 16384, 256, 128, 96.9}, {448, 7168, 16384, 128, 128, 104.2},
    {448, 7168, 16384, 64, 128, 104.7}, {400, 32768, 2048, 256, 128, 66.0}, {400, 32768, 2048, 128, 128, 60.1},
    {400, 24576, 1536, 256, 128, 41.0}, {400, 24576, 1536, 128, 128, 38.7}, {400, 24576, 1536, 128, 160, 38.1},
    {400, 24576, 1536, 128, 192, 37.5}, {448, 24576, 1536, 256, 128, 39.5}, {448, 24576, 1536, 128, 128, 39.1},
    {448, 24576, 1536, 128, 160, 38.2}, {448, 24576, 1536, 128, 192, 38.0}, {512, 24576, 1536, 256, 128, 40.4},
    {512, 24576, 1536, 128, 128, 40.5}, {512, 24576, 1536, 128, 160, 39.0}, {512, 24576, 1536, 128, 192, 39.4},
    {448, 32768, 512, 256, 128, 28.2}, {448, 32768, 512, 128, 128, 25.3}, {448, 32768, 512, 128, 160, 25.9},
    {512, 32768, 512, 256, 128, 30.1}, {512, 32768, 512, 128, 128, 26.7}, {512, 32768, 512, 128, 160, 27.3},
    {576, 32768, 512, 256, 128, 31.6}, {576, 32768, 512, 128, 128, 28.8}, {576, 32768, 512, 128, 160, 28.2},
    {704, 32768, 512, 256, 128, 32.7}, {704, 32768, 512, 128, 128, 32.9}, {704, 32768, 512, 128, 160, 33.7},
    {768, 32768, 512, 256, 128, 33.5}, {768, 32768, 512, 128, 128, 34.7}, {768, 32768, 512, 128, 160, 34.6},
    {896, 32768, 512, 256, 128, 39.6}, {896, 32768, 512, 128, 128, 38.0}, {896, 32768, 512, 128, 160, 36.8},
    {960, 32768, 512, 256, 128, 39.8}, {960, 32768, 512, 128, 128, 40.9}, {960, 32768, 512, 128, 160, 40.7},
    {1024, 32768, 512, 256, 128, 40.9}, {1024, 32768, 512, 128, 128, 43.0}, {1024, 32768, 512, 128, 160, 42.2},
};

// 24 random calls the thin-pairs term (kThinPairsPenalty) moves, six per band of K (to 1024, 2048, 3072, 8192; seed
// 4707; M 48..1608, those above 512 the pruning's knock-on swaps), each on its previous tile and then the new one, as
// kThinPairsH100 was timed: 0.964 of the previous time on geometric mean (0.883-1.018).
const Measured kThinPairsMovesH100[] = {
    {48, 64256, 896, 64, 64, 31.1}, {48, 64256, 896, 64, 128, 31.0}, {496, 25088, 896, 256, 128, 30.6},
    {496, 25088, 896, 128, 192, 29.1}, {392, 39936, 384, 256, 128, 28.5}, {392, 39936, 384, 128, 160, 25.1},
    {408, 38656, 1024, 256, 128, 46.4}, {408, 38656, 1024, 128, 160, 41.4}, {216, 64768, 640, 256, 128, 36.7},
    {216, 64768, 640, 128, 128, 34.5}, {416, 32000, 512, 256, 128, 28.1}, {416, 32000, 512, 128, 128, 24.9},
    {456, 49152, 2048, 256, 128, 89.7}, {456, 49152, 2048, 128, 192, 84.2}, {136, 33024, 1536, 256, 128, 36.1},
    {136, 33024, 1536, 128, 128, 34.1}, {192, 31744, 2048, 256, 128, 38.7}, {192, 31744, 2048, 128, 128, 38.7},
    {512, 65536, 1664, 256, 128, 104.3}, {512, 65536, 1664, 128, 192, 101.1}, {448, 48128, 1280, 256, 128, 63.9},
    {448, 48128, 1280, 128, 192, 59.8}, {248, 43776, 1152, 256, 128, 38.5}, {248, 43776, 1152, 128, 192, 37.0},
    {448, 65024, 3072, 256, 128, 162.0}, {448, 65024, 3072, 128, 192, 159.9}, {456, 39936, 2944, 256, 128, 100.7},
    {456, 39936, 2944, 128, 160, 98.8}, {464, 16896, 2944, 256, 128, 44.8}, {464, 16896, 2944, 128, 128, 45.6},
    {208, 42496, 2176, 256, 128, 56.2}, {208, 42496, 2176, 128, 192, 55.5}, {512, 39168, 2944, 256, 128, 102.4},
    {512, 39168, 2944, 128, 160, 100.0}, {1568, 46848, 3072, 128, 192, 346.1}, {1568, 46848, 3072, 128, 160, 347.1},
    {1400, 28416, 3584, 128, 192, 216.9}, {1400, 28416, 3584, 128, 160, 211.3}, {424, 6656, 3200, 256, 128, 25.9},
    {424, 6656, 3200, 128, 128, 26.2}, {216, 49152, 3968, 256, 128, 97.8}, {216, 49152, 3968, 128, 192, 94.4},
    {232, 33792, 3968, 256, 128, 69.8}, {232, 33792, 3968, 128, 128, 68.2}, {1608, 46848, 4096, 128, 192, 464.2},
    {1608, 46848, 4096, 128, 160, 459.9}, {472, 24576, 3200, 256, 128, 67.6}, {472, 24576, 3200, 128, 192, 65.5},
};

// With kThinPairsPenalty the plan leaves pairs at M <= 512 up to K = 4096: 0.5 % from the fastest tile over 46 of the
// 47 calls of kThinPairsH100 (6.2 % before; misses of 5-7 % where it takes 128x192 at M = 194 and 207 and 128x128 was
// faster), and its moves are 3.6 % faster. The H200 agrees where it was timed: at 448 x 32768 x 512 pairs took 1.117x
// 128x128's time (kRaggedM), now the plan's tile, and at 448 x 7168 x 16384 pairs were 2.3 % ahead, which the plan
// keeps (K beyond kThinPairsMaxKBlocks). The moves' check on an H200 is owed.
TEST(Fp8GemmHeuristic, ThinPairsGiveWayTo128RowTilesUpToK4096) {
  size_t shapes = 0;
  const std::vector<Judged> judged = judge_plan(kThinPairsH100, false, &shapes);
  EXPECT_EQ(shapes, 47u);
  EXPECT_EQ(judged.size(), 46u);  // 128x192 not timed at one
  const double log_loss = expect_within_misses(judged, {{207, 48640, 1024, 1.07}, {194, 50688, 1536, 1.05}}, 1.03);
  EXPECT_LT(log_loss, 46 * std::log(1.006));  // 1.0047
  const std::vector<Judged> moves = judge_plan(kThinPairsMovesH100, false, &shapes);
  EXPECT_EQ(shapes, 24u);
  EXPECT_EQ(moves.size(), 24u);
  expect_moved_to_second_rows(moves);
  double moved_log = 0;
  for (const Judged& j : moves) {
    EXPECT_LE(j.shape[1].us, j.shape[0].us * 1.02) << j.shape->m << "x" << j.shape->n << "x" << j.shape->k;
    moved_log += std::log(j.shape[1].us / j.shape[0].us);
  }
  EXPECT_LT(moved_log, 24 * std::log(0.97));  // 0.964
  expect_tile_at(fp8_gemm_plan(kH200, 32768, 512), 448, 128, 128);
  expect_tile_at(fp8_gemm_plan(kH200, 7168, 16384), 448, 256, 128);
  for (const int64_t m : {400, 448, 512}) expect_tile_at(fp8_gemm_plan(kH200, 24576, 1536), m, 128, 192);
}

// Where 128x112 was timed slower or not at all, plans do not take it: below K = 1536 (at 14336 x 512 on an H100 it
// gained nothing at M = 193..384 and lost 8-9 % to the pairs at M = 641..768), where 112 does not divide N, at N <=
// 6144 (beside the other fill tiles it changed their swaps), at M <= 128 (a 128-row fill tile never serves there),
// in the weight-gradient form and under tile, split or cluster overrides. The warm-up's 7168 x 2048 and 7168 x
// 16384 take it, each within eight kernels.
TEST(Fp8GemmHeuristic, Fill112StaysWhereItWasNotTimed) {
  const auto is_112 = [](const Fp8GemmConfig& c) { return c.block_m == 128 && c.block_n == 112; };
  const auto has_112 = [&](const Fp8GemmPlan& plan) {
    return std::any_of(plan.kernels.begin(), plan.kernels.end(), is_112);
  };
  for (const int64_t k : {2048, 16384}) {
    const Fp8GemmPlan plan = fp8_gemm_plan(kH200, 7168, k);
    expect_well_formed(plan);
    EXPECT_TRUE(has_112(plan)) << k;
    EXPECT_LE(plan.kernels.size(), static_cast<size_t>(kFp8GemmMaxKernels));
    for (const Fp8GemmBucket& b : plan.buckets)
      if (is_112(plan.kernels[static_cast<size_t>(b.kernel)])) EXPECT_GT(b.m_lo, 128) << k;
    EXPECT_FALSE(has_112(fp8_gemm_plan(kH200, 7168, k, {}, Fp8GemmForm::kAccumulate))) << k;
    EXPECT_FALSE(has_112(fp8_gemm_plan(kH200, 7168, k, {}, Fp8GemmForm::kFp32Store))) << k;
  }
  expect_tile_at(fp8_gemm_plan(kH200, 7168, 2048), 200, 128, 112);
  for (const int64_t n : {7168, 14336})
    for (const int64_t k : {512, 1024, 1408}) EXPECT_FALSE(has_112(fp8_gemm_plan(kH200, n, k))) << n << " x " << k;
  for (const int64_t n : {2688, 4480, 5376, 4096, 8192, 24576, 32768})
    for (const int64_t k : {2048, 7168}) EXPECT_FALSE(has_112(fp8_gemm_plan(kH200, n, k))) << n << " x " << k;
  Fp8GemmOverrides rows;
  rows.block_m = 128;
  Fp8GemmOverrides split;
  split.split_k = 2;
  Fp8GemmOverrides pairs;
  pairs.cluster_n = 2;
  for (const Fp8GemmOverrides& o : {rows, split, pairs}) EXPECT_FALSE(has_112(fp8_gemm_plan(kH200, 7168, 2048, o)));
}
// The tile order's group height, 8 (the kernel's default) against 16 m units (H200, 2026-11-30, fp8_gemm_test
// --shape, two passes averaged, us): the plan's tile at each shape (256 rows: pairs sharing A), where B is at
// least 32 MiB and K short.
struct GroupTiming {
  int64_t m, n, k;
  int block_m, block_n;
  double us_groups_of_8, us_groups_of_16;
};
const GroupTiming kTallGroups[] = {
    {1408, 24576, 1536, 128, 192, 90.6, 89.3},   {2432, 24576, 1536, 128, 192, 149.8, 144.4},
    {2816, 24576, 1536, 256, 128, 157.0, 155.6}, {3456, 24576, 1536, 128, 192, 204.3, 200.6},
    {4096, 24576, 1536, 256, 128, 228.7, 228.2}, {4992, 24576, 1536, 128, 192, 290.5, 282.5},
    {2432, 24576, 2048, 128, 192, 186.4, 181.5}, {4096, 24576, 2048, 256, 128, 295.1, 294.4},
    {4992, 24576, 2048, 128, 192, 365.1, 359.6}, {1920, 32768, 1024, 128, 192, 118.7, 118.7},
    {2560, 32768, 1024, 256, 128, 140.4, 137.9}, {3968, 32768, 1024, 128, 192, 231.8, 228.1},
    {1920, 16384, 2048, 128, 192, 102.5, 102.1}, {4352, 16384, 2048, 256, 128, 212.3, 211.6},
    {2688, 16384, 3072, 128, 192, 197.0, 196.6},
};

// Groups of 16 were faster or level (within 0.5 %) at every measured shape, and the plan takes them at all of
// them but pairs at 16384 x 3072 (sixteen 256-row panels of A, 12 MiB, exceed the rule's 8; not measured).
// Of the warm-up shapes only 24576 x 1536 takes them; 7168 x 16384, where 16 was 0.5-2 % slower for 128x192
// (long A panels), keeps 8.
TEST(Fp8GemmHeuristic, TallGroupsWhereBIsLargeAndKShort) {
  for (const GroupTiming& t : kTallGroups) {
    EXPECT_LE(t.us_groups_of_16, t.us_groups_of_8 * 1.005) << t.m << " x " << t.n << " x " << t.k;
    const Fp8GemmPlan plan = fp8_gemm_plan(kH200, t.n, t.k);
    expect_tile_at(plan, t.m, t.block_m, t.block_n);
    EXPECT_EQ(config_at(plan, t.m).group_m, 16) << t.m << " x " << t.n << " x " << t.k;
  }
  for (const auto& [n, k] : warmup_shapes())
    for (const Fp8GemmConfig& c : fp8_gemm_plan(kH200, n, k).kernels)
      EXPECT_EQ(c.group_m, n == 24576 && k == 1536 ? 16 : 8) << n << " x " << k << ": " << c.describe();
  Fp8GemmOverrides pairs;
  pairs.block_m = 256;
  for (const Fp8GemmConfig& c : fp8_gemm_plan(kH200, 16384, 3072, pairs).kernels) EXPECT_EQ(c.group_m, 8);
}

// split_k overrides the choice both ways: 2 splits every candidate (and leaves out the 256-row tiles, which have
// no split kernel), 1 never splits; what it cannot go with is refused naming the field.
TEST(Fp8GemmHeuristic, SplitKOverride) {
  Fp8GemmOverrides always;
  always.split_k = 2;
  for (const auto& [n, k] : warmup_shapes()) {
    const Fp8GemmPlan plan = fp8_gemm_plan(kH200, n, k, always);
    expect_well_formed(plan);
    for (const Fp8GemmConfig& c : plan.kernels) {
      EXPECT_EQ(c.split_k, 2) << c.describe();
      EXPECT_NE(c.block_m, 256) << c.describe();
      EXPECT_EQ(c.cluster_size(), 2) << c.describe();
      EXPECT_LE(fp8_gemm_shared_bytes(c), static_cast<uint32_t>(kH200.shared_memory_per_block)) << c.describe();
    }
  }
  Fp8GemmOverrides never;
  never.split_k = 1;
  for (const Fp8GemmConfig& c : fp8_gemm_plan(kH200, 576, 7168, never).kernels) EXPECT_EQ(c.split_k, 1);

  const auto with = [](auto set) {
    Fp8GemmOverrides o;
    set(o);
    return o;
  };
  EXPECT_THAT(error_of([&] { check_fp8_gemm_overrides(with([](auto& o) { o.split_k = 3; }), "x"); }),
              HasSubstr("x: split_k must be 0 (heuristic), 1 (never split) or 2 (CTA pairs split K in halves), got 3"));
  EXPECT_THAT(error_of([&] {
                check_fp8_gemm_overrides(with([](auto& o) { o.split_k = 2, o.cluster_m = 2; }), "x");
              }),
              HasSubstr("split_k must be 0 or 1 when cluster_m is 2"));
  EXPECT_THAT(error_of([&] {
                check_fp8_gemm_overrides(with([](auto& o) { o.split_k = 2, o.cluster_n = 2; }), "x");
              }),
              HasSubstr("split_k must be 0 or 1 when cluster_n is 2"));
  EXPECT_THAT(error_of([&] {
                check_fp8_gemm_overrides(with([](auto& o) { o.split_k = 2, o.block_m = 256; }), "x");
              }),
              HasSubstr("split_k must be 0 or 1 with block_m 256"));
  EXPECT_THAT(error_of([&] { fp8_gemm_plan(kH200, 2112, 7168, always, Fp8GemmForm::kAccumulate); }),
              HasSubstr("split_k must be 0 (heuristic) or 1 for the accumulating form"));
  EXPECT_NO_THROW(fp8_gemm_plan(kH200, 2112, 7168, never, Fp8GemmForm::kAccumulate));
}

// 256-row tiles serve large M (the sweep found them best at M = 4096 on four shapes), always as CTA pairs
// sharing A, never for the accumulating form; block_m = 256 alone asks for the narrower 256-row tiles too.
TEST(Fp8GemmHeuristic, TwoHundredFiftySixRowTilesServeLargeMInPairs) {
  EXPECT_EQ(config_at(fp8_gemm_plan(kH200, 7168, 16384), 4096).block_m, 256);
  EXPECT_EQ(config_at(fp8_gemm_plan(kH200, 24576, 1536), 4096).block_m, 256);
  EXPECT_EQ(config_at(fp8_gemm_plan(kH200, 2112, 7168), 4096).block_m, 128);  // 17 n blocks: pairs waste a tile
  for (const auto& [n, k] : warmup_shapes()) {
    EXPECT_LE(config_at(fp8_gemm_plan(kH200, n, k), 64).block_m, 128) << n << "x" << k;
    for (const Fp8GemmConfig& c : fp8_gemm_plan(kH200, n, k).kernels)
      if (c.block_m == 256) {
        EXPECT_EQ(c.cluster_n, 2) << c.describe();
        EXPECT_EQ(c.cluster_size(), 2) << c.describe();
      }
    for (const Fp8GemmConfig& c : fp8_gemm_plan(kH200, n, k, {}, Fp8GemmForm::kAccumulate).kernels) {
      EXPECT_LE(c.block_m, 128) << c.describe();
      EXPECT_EQ(c.cluster_size(), 1) << c.describe();
    }
  }
  Fp8GemmOverrides o;
  o.block_m = 256;
  const Fp8GemmPlan plan = fp8_gemm_plan(kH200, 7168, 16384, o);
  expect_well_formed(plan);
  for (const Fp8GemmConfig& c : plan.kernels) {
    EXPECT_EQ(c.block_m, 256);
    EXPECT_LE(c.block_n, 128);
    EXPECT_EQ(c.math_warpgroups, 2);
    EXPECT_FALSE(c.overlap_promotion) << "two waves promote serially";
    EXPECT_GE(c.stages, 3) << c.describe();
  }
  // Pairs go one way: B multicast asked for replaces the tile's A multicast; cluster_n = 1 turns it off.
  o.cluster_m = 2;
  for (const Fp8GemmConfig& c : fp8_gemm_plan(kH200, 7168, 16384, o).kernels) {
    EXPECT_EQ(c.cluster_m, 2);
    EXPECT_EQ(c.cluster_n, 1);
  }
  o.cluster_m = 0;
  o.cluster_n = 1;
  for (const Fp8GemmConfig& c : fp8_gemm_plan(kH200, 7168, 16384, o).kernels) EXPECT_EQ(c.cluster_size(), 1);
  o.cluster_n = 0;
  o.block_n = 128;
  const Fp8GemmConfig c = fp8_gemm_plan(kH200, 7168, 16384, o).kernels.at(0);
  EXPECT_EQ(c.stages, 3);  // 48.5 KB per stage beside a 64 KB staging tile
  EXPECT_EQ(fp8_gemm_threads(c), 384u);
  o.block_n = 160;
  EXPECT_THAT(error_of([&] { fp8_gemm_plan(kH200, 7168, 16384, o); }),
              HasSubstr("block_n must be 0 (heuristic) or at most 128 with block_m 256"));
  o.block_n = 0;
  EXPECT_THAT(error_of([&] { fp8_gemm_plan(kH200, 7168, 16384, o, Fp8GemmForm::kAccumulate); }),
              HasSubstr("block_m must be 0 (heuristic), 64 or 128 for the accumulating form"));
}

TEST(Fp8GemmHeuristic, OverridesNarrowTheChoice) {
  Fp8GemmOverrides o;
  o.block_n = 128;
  Fp8GemmPlan plan = fp8_gemm_plan(kH200, 7168, 2048, o);
  expect_well_formed(plan);
  for (const Fp8GemmConfig& c : plan.kernels) EXPECT_EQ(c.block_n, 128);

  o = {};
  o.block_m = 64;
  o.block_n = 96;  // outside the measured set: still allowed
  plan = fp8_gemm_plan(kH200, 7168, 2048, o);
  ASSERT_EQ(plan.kernels.size(), 1u);
  ASSERT_EQ(plan.buckets.size(), 1u);
  EXPECT_EQ(plan.kernels[0].block_m, 64);
  EXPECT_EQ(plan.kernels[0].block_n, 96);
  EXPECT_EQ(plan.kernels[0].math_warpgroups, 1);

  o = {};
  o.block_m = 128;
  o.block_n = 128;
  o.stages = 3;
  o.cluster_m = 2;
  plan = fp8_gemm_plan(kH200, 7168, 2048, o);
  ASSERT_EQ(plan.kernels.size(), 1u);
  EXPECT_EQ(plan.kernels[0].stages, 3);
  EXPECT_EQ(plan.kernels[0].cluster_m, 2);
  EXPECT_THAT(plan.kernels[0].describe(), HasSubstr("B multicast x2"));
  o.cluster_m = 0;
  o.cluster_n = 2;
  const Fp8GemmPlan pairs_on_a = fp8_gemm_plan(kH200, 7168, 2048, o);
  ASSERT_EQ(pairs_on_a.kernels.size(), 1u);
  EXPECT_EQ(pairs_on_a.kernels[0].cluster_n, 2);
  EXPECT_THAT(pairs_on_a.kernels[0].describe(), HasSubstr("A multicast x2"));
  // A cluster's grid is a whole number of clusters, never more CTAs than SMs; a pair's units are two tiles.
  for (const Fp8GemmConfig& c : {plan.kernels[0], pairs_on_a.kernels[0]})
    for (int64_t m : {1, 128, 129, 4096, 16384}) {
      const uint32_t grid = fp8_gemm_grid(c, m, 7168, 131);
      EXPECT_EQ(grid % 2, 0u);
      EXPECT_LE(grid, 131u);
    }
  EXPECT_EQ(pairs_on_a.kernels[0].units(128, 7168), 28);  // 56 n blocks in pairs
  EXPECT_EQ(pairs_on_a.kernels[0].units(129, 2112), 2 * 9);  // 17 n blocks: the last pair's second tile is past N
  EXPECT_EQ(plan.kernels[0].units(129, 2112), 17);
}

// Every tile runs on any number of SMs (set_num_sms): column-mapped tiles need no cluster per column class, as
// the class walks they replaced did (a forced 128x176 at N = 576 then needed four SMs).
TEST(Fp8GemmHeuristic, WideTilesRunOnAnySmCount) {
  Fp8GemmOverrides forced;
  forced.block_m = 128;
  forced.block_n = 176;
  TargetInfo few = kH200;
  few.sm_count = 1;
  const Fp8GemmPlan plan = fp8_gemm_plan(few, 576, 7168, forced);
  ASSERT_EQ(plan.kernels.size(), 1u);
  EXPECT_EQ(plan.kernels[0].block_n, 176);
  EXPECT_EQ(fp8_gemm_grid(plan.kernels[0], 4096, 576, 1), 1u);
  forced.cluster_n = 2;
  few.sm_count = 2;
  const Fp8GemmPlan pairs = fp8_gemm_plan(few, 2112, 7168, forced);
  ASSERT_EQ(pairs.kernels.size(), 1u);
  EXPECT_EQ(fp8_gemm_grid(pairs.kernels[0], 4096, 2112, 2), 2u);
  for (const int sms : {1, 2, 3, 5, 7, 132})
    for (const auto& [n, k] : warmup_shapes()) {
      TargetInfo t = kH200;
      t.sm_count = sms;
      const Fp8GemmPlan p = fp8_gemm_plan(t, n, k);
      expect_well_formed(p);
      for (const Fp8GemmConfig& c : p.kernels) EXPECT_LE(c.cluster_size(), sms) << c.describe();
    }
}

TEST(Fp8GemmHeuristic, BadOverridesAndProblemsNameTheField) {
  auto with = [](auto set) {
    Fp8GemmOverrides o;
    set(o);
    return o;
  };
  EXPECT_THAT(error_of([&] { check_fp8_gemm_overrides(with([](auto& o) { o.block_m = 96; }), "set_fp8_gemm_overrides"); }),
              HasSubstr("set_fp8_gemm_overrides: block_m must be 0 (heuristic), 64, 128 or 256, got 96"));
  EXPECT_THAT(error_of([&] { check_fp8_gemm_overrides(with([](auto& o) { o.block_n = 200; }), "x"); }),
              HasSubstr("block_n must be 0 (heuristic) or a multiple of 16 in 16..192"));
  EXPECT_THAT(error_of([&] { check_fp8_gemm_overrides(with([](auto& o) { o.block_n = 256; }), "x"); }),
              HasSubstr("got 256"));
  EXPECT_THAT(error_of([&] { check_fp8_gemm_overrides(with([](auto& o) { o.stages = 17; }), "x"); }),
              HasSubstr("stages must be 0 (heuristic) or 1..16, got 17"));
  EXPECT_THAT(error_of([&] { check_fp8_gemm_overrides(with([](auto& o) { o.cluster_m = 4; }), "x"); }),
              HasSubstr("cluster_m must be 0 (heuristic), 1 or 2, got 4"));
  EXPECT_THAT(error_of([&] { check_fp8_gemm_overrides(with([](auto& o) { o.cluster_n = 3; }), "x"); }),
              HasSubstr("cluster_n must be 0 (heuristic), 1 or 2, got 3"));
  EXPECT_THAT(error_of([&] { check_fp8_gemm_overrides(with([](auto& o) { o.cluster_m = o.cluster_n = 2; }), "x"); }),
              HasSubstr("cluster_n must be 0 or 1 when cluster_m is 2"));
  const Fp8GemmOverrides pairs = with([](auto& o) { o.cluster_n = 2; });
  EXPECT_THAT(error_of([&] { fp8_gemm_plan(kH200, 7168, 2048, pairs, Fp8GemmForm::kAccumulate); }),
              HasSubstr("cluster_n must be 0 (heuristic) or 1 for the accumulating form"));
  // 16 stages of 128x192 do not fit in 227 KB.
  EXPECT_THAT(error_of([&] {
                fp8_gemm_plan(kH200, 7168, 2048, with([](auto& o) {
                                o.block_m = 128;
                                o.block_n = 192;
                                o.stages = 16;
                              }));
              }),
              AllOf(HasSubstr("no kernel configuration fits in 232448 bytes"), HasSubstr("tile 128x192: at most 4 stages"),
                    HasSubstr("16 were asked for")));
  // A forced pair on one SM: the cluster does not fit, and the error names the tile, its cluster and the SMs.
  TargetInfo one_sm = kH200;
  one_sm.sm_count = 1;
  EXPECT_THAT(error_of([&] {
                fp8_gemm_plan(one_sm, 2112, 7168, with([](auto& o) {
                                o.block_m = 128;
                                o.block_n = 176;
                                o.cluster_n = 2;
                              }));
              }),
              HasSubstr("tile 128x176 runs in clusters of 2 CTAs; 1 SM(s) are usable"));
  EXPECT_THAT(error_of([] { fp8_gemm_plan(kH200, 100, 2048); }), HasSubstr("n must be a positive multiple of 8, got 100"));
  EXPECT_THAT(error_of([] { fp8_gemm_plan(kH200, 128, 40); }), HasSubstr("k must be a positive multiple of 16, got 40"));
  EXPECT_THAT(error_of([] { fp8_gemm_plan(kH200, 128, 0); }), HasSubstr("got 0"));
}

TEST(Fp8GemmHeuristic, UnusualShapesStillPlan) {
  for (auto [n, k] : {std::pair<int64_t, int64_t>{8, 16}, {16, 128}, {576, 512}, {65536, 7168}, {2112, 720}}) {
    SCOPED_TRACE(std::to_string(n) + "x" + std::to_string(k));
    expect_well_formed(fp8_gemm_plan(kH200, n, k));
  }
}

}  // namespace
}  // namespace kiln::ops
