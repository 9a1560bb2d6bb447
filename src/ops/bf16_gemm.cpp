// The BF16 GEMM (bf16_gemm_nt): plan, kernel spec, registry entry, validation, tensor maps and launch.
//
// The form D = C + A . B^T (bf16_gemm_nt_accumulate) first copies C into D where C is not D (ops/c_into_d).
//
// Launch path, as the FP8 GEMM's: validate every argument (no allocation, no string on success) -> compact key {op,
// device, n, k, usable SMs, packed overrides} -> lock-free table of per-shape plans -> the bucket of m -> the bucket's
// loaded kernel (an atomic pointer; loaded on first use) -> tensor maps from the per-thread cache -> POD params ->
// LoadedKernel::launch. No environment read, no string, no map lookup by string on a hit.
#include "ops/bf16_gemm.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "cuda/driver.hpp"
#include "cuda/kernel.hpp"
#include "jit/jit_runtime.hpp"
#include "jit/kernel_table.hpp"
#include "kiln/config.hpp"
#include "kiln/error.hpp"
#include "kiln/kernels/bf16_gemm_params.h"
#include "ops/c_into_d.hpp"
#include "ops/gemm_rounds.hpp"
#include "ops/grouped_checks.hpp"
#include "ops/k_groups.hpp"
#include "ops/plan_store.hpp"
#include "ops/tensor_map.hpp"
#include "ops/validate.hpp"

namespace kiln::ops {
namespace {

constexpr const char* kOp = "bf16_gemm_nt";
constexpr const char* kAccumulateOp = "bf16_gemm_nt_accumulate";
constexpr const char* kMGroupedOp = "m_grouped_bf16_gemm_nt_contiguous";
constexpr const char* kMGroupedNnOp = "m_grouped_bf16_gemm_nn_contiguous";
constexpr const char* kMaskedOp = "m_grouped_bf16_gemm_nt_masked";
constexpr int64_t kBlockK = kernels::kBf16GemmBlockK;

uint32_t w32(int64_t v) { return static_cast<uint32_t>(v); }
uint64_t w64(int64_t v) { return static_cast<uint64_t>(v); }

[[noreturn]] void invalid(const char* who, const std::string& what) {
  throw Error(ErrorKind::kValueError, std::string(who) + ": " + what);
}

// ---- the cost model -----------------------------------------------------------------------------------------------
//
// The FP8 GEMM's model (fp8_gemm_heuristic.cpp), whose rates were fitted on the H200, with the BF16 kernel's work per
// K block: a 64-wide bf16 K block is as many bytes per row as FP8's 128-wide one and as many tensor-core cycles (bf16
// runs at half FP8's rate), and it has no promotion on the CUDA cores. Three figures were then set from the first
// sweep of forced tiles (H100, 2026-12-06, bench/RESULTS.md, fiftieth session; 13 tiles on the 18 dense_bf16 shapes):
// the fixed cycles per wave, the epilogue's rate (it overlaps the next tile's main loop) and the L2 rate (128x128 read
// at least 11.6 TB/s from L2 at 4096 x 7168 x 2048). Over that sweep the model's pick is 1.009 of the fastest tile on
// geometric mean with them, 1.014 with the FP8 model's. They are a first calibration, on one card.

constexpr double kFixedUs = 4.22;             // one call's launch, prologue, pipeline fill and drain (events-timed)
constexpr double kFloorUsPerKBlock = 0.128;   // full-barrier wait -> WGMMA -> release: latency-bound at small tiles
// Tensor-core cycles per K block and 64-row wave: four m64nNk16 of N columns at 1024 bf16 multiply-adds a cycle per
// SM (N / 2 cycles each), plus a fixed issue and wait cost. The math warpgroups share the tensor cores.
constexpr double kCyclesPerColumn = 2.0;
constexpr double kFixedCyclesPerWave = 8.0;
constexpr double kCyclesPerUs = 1600.0;       // the sustained clock under tensor-core load
constexpr double kSmLoadBytesPerUs = 89.4e3;  // what one SM's producer streams into shared memory at most
constexpr double kDramBytesPerUs = 4.554e6;   // whole-device DRAM reads (the FP8 model's fit) and L2 -> SM fills
constexpr double kL2BytesPerUs = 12.5e6;
constexpr double kEpilogueFixedUs = 0.0333;   // per tile: convert, stmatrix, TMA store
constexpr double kEpilogueBytesPerUs = 90.0e3;
// Pruning bounds (see bf16_gemm.hpp): the mean loss over the intervals and the loss at any one interval.
constexpr double kPruneMeanLoss = 1.01;
constexpr double kPruneMaxLoss = 1.02;
constexpr int64_t kKGroupedCostedGroups = 8;  // groups a k-grouped launch is costed as (bf16_gemm_estimate_us)

bool two_waves(const Bf16GemmConfig& c) { return c.block_m > 64 * c.math_warpgroups; }

uint32_t out_bytes(int epilogue) { return kernels::bf16_gemm_out_bytes(w32(epilogue)); }

// Work units (clusters' tiles) of an m x n problem.
int64_t units_of(const Bf16GemmConfig& c, int64_t m, int64_t n) {
  return ceil_div(ceil_div(m, c.block_m), c.cluster_m) * ceil_div(n, c.block_n);
}

// The candidates a plan chooses among for N = n, narrowed by the overrides; stages as many as fit unless forced.
// Tiles left with fewer than kBf16GemmMinPlannedStages beside their staging are dropped while any other remains. An
// N-major B takes widths that are multiples of 64 (of 128 in pairs: each CTA loads whole boxes); the m-grouped forms
// 64- and 128-row tiles and no pairs, the k-grouped form no pairs.
std::vector<Bf16GemmConfig> candidates(const TargetInfo& target, int64_t n, const Bf16GemmOverrides& o, int epilogue,
                                       int mn_major, int grouping) {
  std::vector<Bf16GemmConfig> out;
  const bool n_major_b = (mn_major & static_cast<int>(kernels::kBf16GemmMnMajorB)) != 0;
  const uint32_t bytes = out_bytes(epilogue);
  const uint32_t smem = static_cast<uint32_t>(std::min<int64_t>(target.shared_memory_per_block, UINT32_MAX));
  const bool m_grouped = grouping == static_cast<int>(kernels::kBf16GemmMGrouped) ||
                         grouping == static_cast<int>(kernels::kBf16GemmMasked);
  for (const int block_m : {64, 128, 256}) {
    if ((o.block_m != 0 && o.block_m != block_m) || (m_grouped && block_m == 256)) continue;
    const int widest = block_m == 256 ? 128 : 256;
    for (int block_n = 16; block_n <= widest; block_n += 16) {
      if (o.block_n != 0 ? o.block_n != block_n : !bf16_gemm_offered(block_m, block_n, n)) continue;
      for (const int cluster_m : {1, 2}) {
        // Pairs sharing B only where B is worth sharing (unless asked for): 128- and 256-row tiles.
        if (o.cluster_m != 0 ? o.cluster_m != cluster_m : cluster_m == 2 && block_m == 64) continue;
        if (n_major_b && block_n % (64 * cluster_m) != 0) continue;
        if (grouping != 0 && cluster_m == 2) continue;
        Bf16GemmConfig c;
        c.block_m = block_m;
        c.block_n = block_n;
        c.math_warpgroups = block_m == 64 ? 1 : 2;
        c.cluster_m = cluster_m;
        c.epilogue = epilogue;
        c.mn_major = mn_major;
        c.grouping = grouping;
        // As many stages as fit beside a whole staging tile; a forced count may go further with a part of one (the
        // epilogue in passes, bf16_gemm_staging_cols).
        const uint32_t fit = kernels::bf16_gemm_max_stages(w32(block_m), w32(block_n), smem, bytes);
        const uint32_t forced_fit = kernels::bf16_gemm_max_forced_stages(w32(block_m), w32(block_n), smem, bytes);
        if (o.stages != 0 && static_cast<uint32_t>(o.stages) > forced_fit)
          invalid(kOp, "stages " + std::to_string(o.stages) + " do not fit in " + std::to_string(smem) +
                           " bytes of shared memory with a " + std::to_string(block_m) + "x" +
                           std::to_string(block_n) + " tile (at most " + std::to_string(forced_fit) + ")");
        // A float32 D takes the most stages beside a part of a staging tile: the pipeline's depth counts for more than
        // the epilogue's passes. The k-grouped form (k_grouped_tiles.py, H100, 2026-12-07): 128x256 with 4 stages and
        // four store passes ran 1.03-1.14x cuBLAS per expert where 128x192 with the 3 stages beside a whole float32
        // staging tile ran 0.89-1.00x. D += A . B^T at M = 4096 (--sweep-accumulate, H100, 2026-12-07): the fastest
        // forced tile was one with 4 stages at all six shapes, 2-16 % ahead of the plan's 3- and 4-stage tiles.
        const bool float32_d = epilogue != static_cast<int>(kernels::kBf16GemmStoreBf16);
        // With a bfloat16 D, 128x256 too (singly and in pairs): beside its whole staging tile it has 3 stages, and
        // with a fourth and its epilogue in two passes it ran 1.7-3.8 % faster at five of the six M = 4096 shapes and
        // level at K = 16384 (BF16_SWEEP, H100, 2026-12-07, fifty-eighth session). 128x192's fifth stage was not
        // (2.6 % slower at 4096 x 24576 x 1536, 5.8 % faster at 4096 x 32768 x 512).
        const bool deeper = float32_d || (block_m == 128 && block_n == 256);
        const uint32_t planned = deeper ? forced_fit : fit;
        if (planned == 0) continue;
        c.stages = o.stages != 0 ? o.stages : static_cast<int>(planned);
        out.push_back(c);
      }
    }
  }
  const auto shallow = [](const Bf16GemmConfig& c) { return c.stages < kBf16GemmMinPlannedStages; };
  if (!std::all_of(out.begin(), out.end(), shallow))
    out.erase(std::remove_if(out.begin(), out.end(), shallow), out.end());
  return out;
}

}  // namespace

// ---- the offered tiles ------------------------------------------------------------------------------------------

// The widths the plan offers per tile height (any multiple of 16 up to the register limit when forced): those the
// sweep timed (H100, fiftieth session) and found the fastest somewhere or close to it. Left out: 128 rows x 208, 224
// and 240 (3 stages beside their staging; never within 2 % of the fastest, 128x240 5.9 % behind 128x192 at 4096 x
// 24576 x 1536), 176 where it does not divide N (it ran 4.7 % behind 160 at 4096 x 7168 x 2048 and leads only where its
// tiles are whole: 2112 = 12 x 176), and 64 x 16 (8-9 % behind 64 x 32 at 1 x 2112 x 7168 in both runs).
bool bf16_gemm_offered(int block_m, int block_n, int64_t n) {
  switch (block_m) {
    case 64:
      return block_n == 32 || block_n == 48 || block_n == 64 || block_n == 96 || block_n == 128 || block_n == 192 ||
             block_n == 256;
    case 128:
      return block_n == 64 || block_n == 96 || block_n == 128 || block_n == 160 || block_n == 192 || block_n == 256 ||
             (block_n == 176 && n % 176 == 0);
    default:
      return block_n == 128;
  }
}

// ---- configs ---------------------------------------------------------------------------------------------------

std::string Bf16GemmConfig::describe() const {
  return std::to_string(block_m) + "x" + std::to_string(block_n) + ", " + std::to_string(stages) + " stages, " +
         std::to_string(math_warpgroups) + " math warpgroup" + (math_warpgroups == 1 ? "" : "s") +
         (cluster_m == 2 ? ", B multicast x2" : "") +
         (epilogue == static_cast<int>(kernels::kBf16GemmStoreF32)  ? ", float32 D"
          : epilogue == static_cast<int>(kernels::kBf16GemmAddF32) ? ", added into float32 D"
                                                                    : "") +
         ((mn_major & static_cast<int>(kernels::kBf16GemmMnMajorA)) != 0 ? ", M-major A" : "") +
         ((mn_major & static_cast<int>(kernels::kBf16GemmMnMajorB)) != 0 ? ", N-major B" : "") +
         (grouping == static_cast<int>(kernels::kBf16GemmMGrouped)   ? ", m-grouped"
          : grouping == static_cast<int>(kernels::kBf16GemmMasked)   ? ", m-grouped masked"
          : grouping == static_cast<int>(kernels::kBf16GemmKGrouped) ? ", k-grouped"
                                                                      : "");
}

uint32_t Bf16GemmConfig::grid(int64_t m, int64_t n, int sm_count) const {
  const int64_t clusters = std::max<int64_t>(1, std::min<int64_t>(units_of(*this, m, n), sm_count / cluster_m));
  return w32(clusters * cluster_m);
}

uint32_t Bf16GemmConfig::threads() const { return kernels::bf16_gemm_num_threads(w32(math_warpgroups)); }

uint32_t Bf16GemmConfig::shared_bytes() const {
  return kernels::bf16_gemm_layout(w32(block_m), w32(block_n), w32(stages), out_bytes(epilogue)).total_bytes;
}

// ---- the plan --------------------------------------------------------------------------------------------------

void check_bf16_gemm_overrides(const Bf16GemmOverrides& o, const char* who) {
  if (o.block_m != 0 && o.block_m != 64 && o.block_m != 128 && o.block_m != 256)
    invalid(who, "block_m must be 0 (heuristic), 64, 128 or 256, got " + std::to_string(o.block_m));
  if (o.block_n != 0 && (o.block_n < 16 || o.block_n > 256 || o.block_n % 16 != 0))
    invalid(who, "block_n must be 0 (heuristic) or a multiple of 16 in 16..256, got " + std::to_string(o.block_n));
  if (o.block_m == 256 && o.block_n > 128)
    invalid(who, "block_n must be 0 (heuristic) or at most 128 with block_m 256 (its two waves' accumulators fill the "
                 "registers), got " + std::to_string(o.block_n));
  if (o.stages < 0 || o.stages > static_cast<int>(kernels::kBf16GemmMaxStages))
    invalid(who, "stages must be 0 (heuristic) or 1.." + std::to_string(kernels::kBf16GemmMaxStages) + ", got " +
                     std::to_string(o.stages));
  if (o.cluster_m != 0 && o.cluster_m != 1 && o.cluster_m != 2)
    invalid(who, "cluster_m must be 0 (heuristic), 1 or 2, got " + std::to_string(o.cluster_m));
}

double bf16_gemm_estimate_us(const TargetInfo& target, int64_t m, int64_t n, int64_t k, const Bf16GemmConfig& c) {
  const double bn = c.block_n;
  const int64_t k_blocks = ceil_div(k, kBlockK);
  // A k-grouped launch walks many groups' tiles (up to 32): it is costed as kKGroupedCostedGroups groups' at once, then
  // per group, so that one group's wave quantization does not pick its tile (it picked 128x192 at 7168 x 2048, whose 11
  // n blocks fill 132 SMs in 4.7 rounds where 128x256's 8 take 3.4; over 8 and 32 experts 128x256 ran 2-11 % faster).
  const int64_t groups = c.grouping == static_cast<int>(kernels::kBf16GemmKGrouped) ? kKGroupedCostedGroups : 1;
  const int64_t units = units_of(c, m, n) * groups;
  const int64_t grid_units = std::max<int64_t>(1, std::min<int64_t>(units, target.sm_count / c.cluster_m));
  const int64_t rounds = ceil_div(units, grid_units);
  const double waves = two_waves(c) ? 2.0 : 1.0;
  const double cycles = waves * c.math_warpgroups * (kCyclesPerColumn * bn + kFixedCyclesPerWave);
  const double a_rows = std::min<double>(c.block_m, static_cast<double>(m));  // rows of A read from memory
  const double load_bytes = (a_rows + bn) * 128.0;
  const double l2_load_bytes = (a_rows + bn / c.cluster_m) * 128.0;  // a pair reads its shared B once
  const double per_k_block = std::max({kFloorUsPerKBlock, cycles / kCyclesPerUs, load_bytes / kSmLoadBytesPerUs});
  // A float32 D is twice the bytes to stage and store (an uncalibrated guess: the rates were fitted with bf16 D); one
  // added into is read from DRAM too, by the reduce-adds in L2.
  const double d_bytes = out_bytes(c.epilogue);
  const double epilogue = kEpilogueFixedUs + c.block_m * bn * d_bytes / kEpilogueBytesPerUs;
  const double tile_us = static_cast<double>(k_blocks) * per_k_block + epilogue;

  const double md = static_cast<double>(m), nd = static_cast<double>(n), kd = static_cast<double>(k);
  const double d_traffic = c.epilogue == static_cast<int>(kernels::kBf16GemmAddF32) ? 2.0 * d_bytes : d_bytes;
  const double dram_us =
      static_cast<double>(groups) * (2.0 * (md * kd + nd * kd) + d_traffic * md * nd) / kDramBytesPerUs;
  const double tiles = static_cast<double>(units * c.cluster_m);
  const double l2_us = tiles * static_cast<double>(k_blocks) * l2_load_bytes / kL2BytesPerUs;
  // DRAM by rounds of one unit per cluster (gemm_rounds.hpp, the FP8 model's term and figures).
  return kFixedUs +
         std::max(dram_bound_rounds_us(dram_us, tile_us, units, grid_units, rounds), l2_us) / static_cast<double>(groups);
}

Bf16GemmPlan bf16_gemm_plan(const TargetInfo& target, int64_t n, int64_t k, const Bf16GemmOverrides& overrides,
                            int epilogue, int mn_major, int grouping) {
  if (n <= 0 || n % 8 != 0) invalid(kOp, "n must be a positive multiple of 8, got " + std::to_string(n));
  if (k <= 0 || k % 8 != 0) invalid(kOp, "k must be a positive multiple of 8, got " + std::to_string(k));
  if (n > INT32_MAX || k > INT32_MAX) invalid(kOp, "n and k must be at most 2147483647");
  check_bf16_gemm_overrides(overrides, kOp);
  if (target.sm_count <= 0) invalid(kOp, "the target must have SMs to use");
  if (epilogue < 0 || epilogue > static_cast<int>(kernels::kBf16GemmAddF32))
    invalid(kOp, "epilogue must be 0 (bfloat16 D), 1 (float32 D) or 2 (added into float32 D), got " +
                     std::to_string(epilogue));
  if (mn_major < 0 || mn_major > static_cast<int>(kernels::kBf16GemmMnMajorA | kernels::kBf16GemmMnMajorB))
    invalid(kOp, "mn_major must be 0..3 (1: an M-major A, 2: an N-major B), got " + std::to_string(mn_major));
  if ((mn_major & static_cast<int>(kernels::kBf16GemmMnMajorB)) != 0) {
    if (overrides.block_n % 64 != 0)
      invalid(kOp, "block_n must be 0 (heuristic) or a multiple of 64 with an N-major b (whose tiles load in boxes of "
                   "64 columns), got " + std::to_string(overrides.block_n));
    if (overrides.cluster_m == 2 && overrides.block_n % 128 != 0)
      invalid(kOp, "block_n must be 0 (heuristic) or a multiple of 128 for CTA pairs (cluster_m 2) with an N-major b "
                   "(each CTA loads whole 64-column boxes), got " + std::to_string(overrides.block_n));
  }
  if (grouping < 0 || grouping > static_cast<int>(kernels::kBf16GemmKGrouped))
    invalid(kOp, "grouping must be 0 (one GEMM), 1 (m-grouped contiguous), 2 (m-grouped masked) or 3 (k-grouped), "
                 "got " + std::to_string(grouping));
  if (grouping == static_cast<int>(kernels::kBf16GemmKGrouped)) {
    if (epilogue == static_cast<int>(kernels::kBf16GemmStoreBf16) ||
        mn_major != static_cast<int>(kernels::kBf16GemmMnMajorA | kernels::kBf16GemmMnMajorB))
      invalid(kOp, "the k-grouped form takes a float32 D (epilogue 1 or 2) and MN-major operands (mn_major 3), got "
                   "epilogue " + std::to_string(epilogue) + " and mn_major " + std::to_string(mn_major));
    if (overrides.cluster_m == 2)
      invalid(kOp, "cluster_m must be 0 (heuristic) or 1 in the k-grouped form (its walk over the groups' tiles has "
                   "no CTA pairs), got 2");
  } else if (grouping != 0) {
    // The contiguous form's B may be N-major (m_grouped_bf16_gemm_nn_contiguous).
    const bool n_major_b_ok = grouping == static_cast<int>(kernels::kBf16GemmMGrouped) &&
                              mn_major == static_cast<int>(kernels::kBf16GemmMnMajorB);
    if (epilogue != 0 || (mn_major != 0 && !n_major_b_ok))
      invalid(kOp, "the m-grouped forms take a bfloat16 D and K-major operands (the contiguous form's B may be "
                   "N-major: mn_major 2), got epilogue " + std::to_string(epilogue) + " and mn_major " +
                       std::to_string(mn_major));
    if (overrides.block_m == 256)
      invalid(kOp, "block_m must be 0 (heuristic), 64 or 128 in the m-grouped forms (an m block lies in one group, "
                   "and groups are aligned to 128 rows), got 256");
    if (overrides.cluster_m == 2)
      invalid(kOp, "cluster_m must be 0 (heuristic) or 1 in the m-grouped forms (a CTA pair would take two m blocks, "
                   "perhaps of two groups), got 2");
  }
  const std::vector<Bf16GemmConfig> all = candidates(target, n, overrides, epilogue, mn_major, grouping);
  if (all.empty()) invalid(kOp, "no tile fits in the target's shared memory");

  // Intervals (64 (i - 1), 64 i] of M, costed at their upper end (a tile count is constant inside one), each weighed
  // by ln of its M range so that every doubling of M counts alike.
  const int64_t intervals = kBf16GemmSampledMaxM / 64;
  std::vector<std::vector<double>> cost(all.size(), std::vector<double>(static_cast<size_t>(intervals)));
  std::vector<double> best(static_cast<size_t>(intervals), INFINITY), weight(static_cast<size_t>(intervals));
  for (int64_t i = 0; i < intervals; ++i) {
    weight[static_cast<size_t>(i)] =
        std::log(64.0 * static_cast<double>(i + 1) / std::max(1.0, 64.0 * static_cast<double>(i)));
    for (size_t c = 0; c < all.size(); ++c) {
      cost[c][static_cast<size_t>(i)] = bf16_gemm_estimate_us(target, 64 * (i + 1), n, k, all[c]);
      best[static_cast<size_t>(i)] = std::min(best[static_cast<size_t>(i)], cost[c][static_cast<size_t>(i)]);
    }
  }
  // Each interval's cheapest among `kept`, and the mean and worst loss against the best of all.
  const auto assign = [&](const std::vector<size_t>& kept, std::vector<size_t>& choice, double& mean, double& worst) {
    double sum = 0.0, weights = 0.0;
    worst = 1.0;
    for (size_t i = 0; i < static_cast<size_t>(intervals); ++i) {
      size_t pick = kept[0];
      for (const size_t c : kept)
        if (cost[c][i] < cost[pick][i]) pick = c;
      choice[i] = pick;
      const double loss = cost[pick][i] / best[i];
      sum += weight[i] * loss;
      weights += weight[i];
      worst = std::max(worst, loss);
    }
    mean = sum / weights;
  };
  std::vector<size_t> choice(static_cast<size_t>(intervals));
  double mean = 0.0, worst = 0.0;
  std::vector<size_t> everyone(all.size());
  for (size_t c = 0; c < all.size(); ++c) everyone[c] = c;
  assign(everyone, choice, mean, worst);
  // Candidates no interval takes cost nothing to drop: the pruning starts from those that are the best somewhere.
  std::vector<size_t> kept;
  for (size_t c = 0; c < all.size(); ++c)
    if (std::find(choice.begin(), choice.end(), c) != choice.end()) kept.push_back(c);
  while (kept.size() > 1) {
    size_t drop = 0;
    double drop_mean = INFINITY, drop_worst = INFINITY;
    for (size_t j = 0; j < kept.size(); ++j) {
      std::vector<size_t> rest = kept;
      rest.erase(rest.begin() + static_cast<std::ptrdiff_t>(j));
      double m_loss = 0.0, w_loss = 0.0;
      assign(rest, choice, m_loss, w_loss);
      if (m_loss < drop_mean) {
        drop = j;
        drop_mean = m_loss;
        drop_worst = w_loss;
      }
    }
    const bool within = drop_mean <= kPruneMeanLoss && drop_worst <= kPruneMaxLoss;
    if (!within && kept.size() <= static_cast<size_t>(kBf16GemmMaxKernels)) break;
    kept.erase(kept.begin() + static_cast<std::ptrdiff_t>(drop));
  }
  assign(kept, choice, mean, worst);

  // Buckets: equal neighbours joined; kernels numbered in order of first use; the last bucket unbounded.
  Bf16GemmPlan plan;
  std::vector<int> index_of(all.size(), -1);
  for (size_t i = 0; i < static_cast<size_t>(intervals); ++i) {
    const size_t c = choice[i];
    if (index_of[c] < 0) {
      index_of[c] = static_cast<int>(plan.kernels.size());
      plan.kernels.push_back(all[c]);
    }
    const int64_t lo = i == 0 ? 1 : 64 * static_cast<int64_t>(i) + 1, hi = 64 * static_cast<int64_t>(i + 1);
    if (!plan.buckets.empty() && plan.buckets.back().kernel == index_of[c])
      plan.buckets.back().m_hi = hi;
    else
      plan.buckets.push_back(MBucket{lo, hi, index_of[c]});
  }
  plan.buckets.back().m_hi = kUnboundedM;
  return plan;
}

// ---- kernel specs and the registry -------------------------------------------------------------------------------

codegen::KernelSpec bf16_gemm_spec(int64_t n, int64_t k, const Bf16GemmConfig& c) {
  codegen::KernelSpec spec;
  spec.op = kOp;
  spec.header = "kiln/kernels/bf16_gemm.cuh";
  spec.kernel_template = "kiln::kernels::Bf16Gemm";
  // The k-grouped kernel takes each group's K at run time, and its table of groups as its parameter.
  const bool k_grouped = c.grouping == static_cast<int>(kernels::kBf16GemmKGrouped);
  spec.params_type = k_grouped ? "kiln::Bf16GemmKGroupedParams" : "kiln::Bf16GemmParams";
  spec.arg("n", n)
      .arg("k", k_grouped ? int64_t{kernels::kBf16GemmRunTimeK} : k)
      .arg("block_m", int64_t{c.block_m})
      .arg("block_n", int64_t{c.block_n})
      .arg("stages", int64_t{c.stages})
      .arg("math_warpgroups", int64_t{c.math_warpgroups})
      .arg("cluster_m", int64_t{c.cluster_m});
  // Template arguments are positional: mn_major needs the epilogue before it, the grouping all three before it.
  const bool grouped = c.grouping != static_cast<int>(kernels::kBf16GemmDense);
  if (c.epilogue != static_cast<int>(kernels::kBf16GemmStoreBf16) || c.mn_major != 0 || grouped)
    spec.arg("epilogue", int64_t{c.epilogue});
  if (c.mn_major != 0 || grouped) spec.arg("mn_major", int64_t{c.mn_major});
  if (grouped) spec.arg("group_m", int64_t{kernels::kBf16GemmDefaultGroupM}).arg("grouping", int64_t{c.grouping});
  spec.block_threads = static_cast<int>(c.threads());
  spec.min_blocks_per_sm = 1;
  return spec;
}

namespace {

int64_t value_of(const Problem& problem, const char* name) {
  const auto it = problem.find(name);
  if (it == problem.end()) return 0;
  if (it->second.lo > INT32_MAX)
    invalid(kOp, std::string("parameter ") + name + " is too large, got " + std::to_string(it->second.lo));
  return it->second.lo;
}

// The epilogue a problem names: fp32=1 a float32 D, accumulate=1 added into one (which fp32=0 contradicts). The
// k-grouped kernels' D is float32 whether or not fp32=1 is given.
int epilogue_of(const Problem& problem, bool k_grouped) {
  const bool fp32 = problem_flag(kOp, problem, "fp32", "0 (a bfloat16 D) or 1 (a float32 D)");
  const bool accumulate =
      problem_flag(kOp, problem, "accumulate", "0 (D = A . B^T) or 1 (D += A . B^T, a float32 D)");
  if (accumulate && problem.count("fp32") != 0 && !fp32)
    invalid(kOp, "parameter accumulate=1 adds into a float32 D: it needs fp32=1 or no fp32, got fp32=0");
  if (k_grouped && problem.count("fp32") != 0 && !fp32)
    invalid(kOp, "parameter k_grouped=1 writes a float32 D: it needs fp32=1 or no fp32, got fp32=0");
  return static_cast<int>(accumulate        ? kernels::kBf16GemmAddF32
                          : fp32 || k_grouped ? kernels::kBf16GemmStoreF32
                                              : kernels::kBf16GemmStoreBf16);
}

// The operands' layouts a problem names: m_major_a=1 (A stored [k, m]), n_major_b=1 (B stored [k, n]). The
// k-grouped kernels' are both MN-major (k_grouped_bf16_gemm_tn_contiguous's A and B are [tokens, m] and [tokens, n]),
// whether or not the flags are given.
int mn_major_of(const Problem& problem, bool k_grouped) {
  int bits = 0;
  for (const auto& [name, bit] : {std::pair<const char*, uint32_t>{"m_major_a", kernels::kBf16GemmMnMajorA},
                                  std::pair<const char*, uint32_t>{"n_major_b", kernels::kBf16GemmMnMajorB}}) {
    const bool mn = problem_flag(kOp, problem, name, "0 (K-major) or 1 (MN-major)");
    if (k_grouped && problem.count(name) != 0 && !mn)
      invalid(kOp, std::string("parameter k_grouped=1 takes MN-major operands: it needs ") + name + "=1 or no " +
                       name + ", got " + name + "=0");
    if (mn || k_grouped) bits |= static_cast<int>(bit);
  }
  return bits;
}

// The grouping a problem names: m_grouped=1 the contiguous m-grouped kernels (with n_major_b=1 those of
// m_grouped_bf16_gemm_nn_contiguous), with masked=1 the masked ones; neither with a float32 D or an M-major A, and the
// masked ones with a K-major B only.
int grouping_of(const Problem& problem, int epilogue, int mn_major, bool k_grouped) {
  const bool m_grouped =
      problem_flag(kOp, problem, "m_grouped", "0 or 1 (the kernels of m_grouped_bf16_gemm_nt_contiguous)");
  if (k_grouped && m_grouped) invalid(kOp, "parameters m_grouped=1 and k_grouped=1 name two forms: give one");
  if (k_grouped) return static_cast<int>(kernels::kBf16GemmKGrouped);
  const bool masked =
      problem_flag(kOp, problem, "masked", "0 or 1 (with m_grouped=1: the kernels of m_grouped_bf16_gemm_nt_masked)");
  if (masked && !m_grouped)
    invalid(kOp, "parameter masked=1 needs m_grouped=1 (the masked kernels are m-grouped ones), got m_grouped=0");
  if (m_grouped && epilogue != 0)
    invalid(kOp, "parameter m_grouped=1 takes a bfloat16 D: it needs fp32=0 and accumulate=0");
  if (m_grouped && (mn_major & static_cast<int>(kernels::kBf16GemmMnMajorA)) != 0)
    invalid(kOp, "parameter m_grouped=1 takes a K-major A: it needs m_major_a=0");
  if (masked && mn_major != 0)
    invalid(kOp, "parameter masked=1 takes K-major operands: it needs m_major_a=0 and n_major_b=0");
  return static_cast<int>(masked      ? kernels::kBf16GemmMasked
                          : m_grouped ? kernels::kBf16GemmMGrouped
                                      : kernels::kBf16GemmDense);
}

// The k-grouped kernels over a range of token counts k (m one value): each count's plan is made at
// k_grouped_plan_k(count, 64), as k_grouped_bf16_gemm_tn_contiguous makes it, so each power of two in the range's
// reach is planned once; a use per distinct kernel, with the counts it serves.
std::vector<KernelUse> token_count_uses(const ProblemValue& m, int64_t n, const ProblemValue& k,
                                        const Bf16GemmOverrides& overrides, const TargetInfo& target, int epilogue) {
  if (m.is_range())
    invalid(kOp, "give a range for m or for k, not both (got m=" + m.text() + " and k=" + k.text() + ")");
  if (k.lo < 1) invalid(kOp, "parameter k's range must hold positive token counts only, got " + k.text());
  const int mn_major = static_cast<int>(kernels::kBf16GemmMnMajorA | kernels::kBf16GemmMnMajorB);
  const int grouping = static_cast<int>(kernels::kBf16GemmKGrouped);
  std::vector<KernelUse> uses;
  std::vector<std::string> sources;  // each use's rendered source
  const int64_t first_plan_k = k_grouped_plan_k(k.lo, kBlockK);
  for (int64_t plan_k = first_plan_k; plan_k / 2 < k.hi; plan_k *= 2) {
    const Bf16GemmPlan plan = bf16_gemm_plan(target, n, plan_k, overrides, epilogue, mn_major, grouping);
    if (m.hi == 0) return uses;  // validated; nothing to launch
    const Bf16GemmConfig& config = plan.kernels[static_cast<size_t>(plan.bucket_of(m.lo).kernel)];
    codegen::KernelSpec spec = bf16_gemm_spec(n, plan_k, config);
    const int64_t lo = plan_k == first_plan_k ? k.lo : plan_k / 2 + 1, hi = std::min(k.hi, plan_k);
    std::string source = codegen::render_source(spec);
    auto same = uses.begin() + (std::find(sources.begin(), sources.end(), source) - sources.begin());
    if (same == uses.end()) {
      sources.push_back(std::move(source));
      same = uses.insert(uses.end(), KernelUse{std::move(spec), "k", {}, "n=" + std::to_string(n) + " m=" +
                                                   std::to_string(m.lo) + " (k at run time): " + config.describe()});
    }
    if (!same->ranges.empty() && same->ranges.back().second == lo - 1)
      same->ranges.back().second = hi;
    else
      same->ranges.emplace_back(lo, hi);
  }
  return uses;  // in order of first use as k grows
}

std::vector<KernelUse> uses_of(const Problem& problem, const TargetInfo& target) {
  validate_problem(find_op(kOp), problem);
  const ProblemValue m = problem.at("m"), k_value = problem.at("k");
  const int64_t n = problem.at("n").lo;
  const bool k_grouped = problem_flag(
      kOp, problem, "k_grouped", "0 or 1 (the kernels of k_grouped_bf16_gemm_tn_contiguous: k a group's tokens)");
  const int epilogue = epilogue_of(problem, k_grouped);
  const int mn_major = mn_major_of(problem, k_grouped);
  const int grouping = grouping_of(problem, epilogue, mn_major, k_grouped);
  if (k_value.is_range() && !k_grouped)
    invalid(kOp, "parameter k may be a range only with k_grouped=1 (whose kernels take k at run time), got k=" +
                     k_value.text());
  // A k-grouped call plans each group at its tokens rounded up (k_grouped_plan_k): so does a single k here.
  const int64_t k = k_grouped ? k_grouped_plan_k(k_value.lo, kBlockK) : k_value.lo;
  // A parameter the request leaves out takes the process-wide setting, as a launch does (set_bf16_gemm_overrides,
  // set_num_sms), so that plan() and precompile() in a process that set them list the kernels its launches use; the
  // grouped forms drop a process-wide cluster_m, as resolve_shape does.
  Bf16GemmOverrides process = get_bf16_gemm_overrides();
  if (grouping != 0) process.cluster_m = 0;
  const auto setting = [&](const char* name, int process_value) {
    return problem.contains(name) ? static_cast<int>(value_of(problem, name)) : process_value;
  };
  Bf16GemmOverrides overrides;
  overrides.block_m = setting("block_m", process.block_m);
  overrides.block_n = setting("block_n", process.block_n);
  overrides.stages = setting("stages", process.stages);
  overrides.cluster_m = setting("cluster_m", process.cluster_m);
  TargetInfo t = target;
  const int num_sms = setting("num_sms", get_num_sms());
  if (num_sms > 0) t.sm_count = std::min(num_sms, target.sm_count);
  if (k_grouped && k_value.is_range()) return token_count_uses(m, n, k_value, overrides, t, epilogue);
  // Validates n, k and the overrides.
  const Bf16GemmPlan plan = bf16_gemm_plan(t, n, k, overrides, epilogue, mn_major, grouping);
  std::vector<KernelUse> uses;
  if (m.hi == 0) return uses;  // m = 0: nothing to launch
  const std::vector<MBucket> covered = covering(plan.buckets, std::max<int64_t>(1, m.lo), m.hi);
  for (size_t index = 0; index < plan.kernels.size(); ++index) {
    std::vector<std::pair<int64_t, int64_t>> ranges;
    for (const MBucket& b : covered)
      if (b.kernel == static_cast<int>(index)) ranges.emplace_back(b.m_lo, b.m_hi);
    if (ranges.empty()) continue;
    const Bf16GemmConfig& config = plan.kernels[index];
    uses.push_back(KernelUse{bf16_gemm_spec(n, k, config), std::string(1, 'm'), std::move(ranges),
                             "n=" + std::to_string(n) + " k=" + std::to_string(k) + ": " + config.describe()});
  }
  return uses;  // the plan numbers its kernels in order of first use as m grows
}

}  // namespace

OpDescriptor bf16_gemm_nt_descriptor() {
  OpDescriptor op;
  op.name = kOp;
  op.arch = kWgmmaArchNeeds;
  op.summary = "D[m, n] (bf16 or fp32) (+)= A[m, k] (bf16) . B[n, k]^T (bf16), summed in FP32; m_grouped=1: MoE "
               "experts' GEMMs in one call";
  op.params = {
      {"m", "rows of A and D, or a range lo..hi (a serving warm-up: m=1..16384); m = 0 needs no kernel", true, true},
      {"n", "rows of B, columns of D: a positive multiple of 8 (the kernel is specialised on it)", true},
      {"k", "the reduction: a positive multiple of 8 (the kernel is specialised on it); with k_grouped=1 a group's "
            "tokens (any count >= 1; the kernel takes it at run time), or a range of them lo..hi",
       true, true},
      {"fp32", "1: a float32 D (D = A . B^T stored as summed); 0 (default): a bfloat16 D", false},
      {"accumulate", "1: D (float32) += A . B^T, as bf16_gemm_nt with c (implies fp32=1); 0 (default): D is written",
       false},
      {"m_major_a", "1: A stored M-major (a [k, m] tensor transposed: bf16_gemm_tn/_tt); 0 (default): K-major", false},
      {"n_major_b", "1: B stored N-major (a [k, n] tensor transposed: bf16_gemm_nn/_tn); 0 (default): K-major", false},
      {"m_grouped", "1: the kernels of m_grouped_bf16_gemm_nt_contiguous, MoE experts' rows in one call (m: every "
                    "expert's rows together)", false},
      {"masked", "1 (with m_grouped=1): the kernels of m_grouped_bf16_gemm_nt_masked (m: groups * expected_m, the rows "
                 "its plan picks a kernel at)", false},
      {"k_grouped", "1: the kernels of k_grouped_bf16_gemm_tn_contiguous, MoE experts' weight gradients (m, n: each "
                    "expert's D; k: an expert's tokens; a float32 D, MN-major operands; accumulate=1: with c)",
       false},
      {"block_m", "override: 64, 128 or 256 rows per tile (0: the plan's)", false},
      {"block_n", "override: columns per tile, a multiple of 16 in 16..256 (at most 128 with block_m 256)", false},
      {"stages", "override: pipeline stages, 1..32 (0: as many as fit)", false},
      {"cluster_m", "override: 1, or 2 for CTA pairs multicasting B (0: the plan's)", false},
      {"num_sms", "SMs the kernel may use, as set_num_sms (0: all of the target's)", false},
  };
  op.uses = uses_of;
  op.kernels = [](const Problem& problem, const TargetInfo& target) {
    std::vector<codegen::KernelSpec> specs;
    for (KernelUse& use : uses_of(problem, target)) specs.push_back(std::move(use.spec));
    return specs;
  };
  return op;
}

// ---- the launch path --------------------------------------------------------------------------------------------

namespace {

// The overrides in one word (16 bits each), read with one relaxed load per launch and used as a word of the table key.
std::atomic<uint64_t> g_overrides{0};

uint64_t pack(const Bf16GemmOverrides& o) {
  return static_cast<uint64_t>(o.block_m) | static_cast<uint64_t>(o.block_n) << 16 |
         static_cast<uint64_t>(o.stages) << 32 | static_cast<uint64_t>(o.cluster_m) << 48;
}

Bf16GemmOverrides unpack(uint64_t w) {
  Bf16GemmOverrides o;
  o.block_m = static_cast<int>(w & 0xffff);
  o.block_n = static_cast<int>((w >> 16) & 0xffff);
  o.stages = static_cast<int>((w >> 32) & 0xffff);
  o.cluster_m = static_cast<int>((w >> 48) & 0xffff);
  return o;
}

// A loaded kernel with its launch geometry, worked out once on the miss path rather than on every launch.
struct GemmKernel {
  const cuda::LoadedKernel* kernel = nullptr;
  Bf16GemmConfig config;
  uint32_t threads = 0;
  uint32_t shared_bytes = 0;
  uint32_t store_cols = 0;  // D's TMA store box columns
};

// Everything one (device, n, k, usable SMs, overrides, epilogue, operand layouts, grouping) needs: the plan and its kernels,
// loaded on first use.
struct ShapeEntry {
  Bf16GemmPlan plan;
  int device = 0;
  int sm_count = 0;  // the SMs the kernels may use
  int64_t n = 0, k = 0;
  std::string device_name;
  mutable std::array<std::atomic<const GemmKernel*>, kBf16GemmMaxKernels> kernels{};
  mutable std::mutex mutex;  // serialises loading
};

using Store = PlanStore<ShapeEntry, GemmKernel>;

using Table = jit::KernelTable<ShapeEntry>;
Table& table() {
  static Table t;
  return t;
}
Store& store() {
  static Store s;
  return s;
}

// The miss path for a shape: check the device, make the plan, publish it.
const ShapeEntry* resolve_shape(const char* function, const Table::Key& key, const TensorView& a, int64_t n, int64_t k,
                                int usable_limit, int epilogue, int mn_major, int grouping) {
  const cuda::DeviceInfo info = check_sm90_device(Arg{function, "a"}, a);
  check_dg_jit_arch(function, kWgmmaArchNeeds, config().arch);
  ShapeEntry* entry = store().add_entry();
  entry->device = a.device;
  entry->sm_count = usable_limit > 0 ? std::min(usable_limit, info.sm_count) : info.sm_count;
  entry->n = n;
  entry->k = k;
  entry->device_name = info.name;
  Bf16GemmOverrides overrides = unpack(w64(key.words[5]));
  // The m-grouped forms ignore cluster_m (as the FP8 ones do): pairs set for bf16_gemm_nt are left to their plan. A
  // block_m of 256 is refused by it.
  if (grouping != 0) overrides.cluster_m = 0;
  entry->plan =
      bf16_gemm_plan(device_target(info, entry->sm_count), n, k, overrides, epilogue, mn_major, grouping);
  return table().insert(key, entry);
}

// The miss path for a bucket's kernel: build (or fetch) and load it, once per entry and kernel.
const GemmKernel* resolve_kernel(const ShapeEntry& entry, int index, CUstream stream) {
  std::lock_guard<std::mutex> lock(entry.mutex);
  if (const GemmKernel* k = entry.kernels[static_cast<size_t>(index)].load(std::memory_order_acquire)) return k;
  const Bf16GemmConfig& cfg = entry.plan.kernels[static_cast<size_t>(index)];
  GemmKernel k;
  k.kernel = &jit::runtime().kernel(bf16_gemm_spec(entry.n, entry.k, cfg), entry.device, stream);
  k.config = cfg;
  k.threads = cfg.threads();
  k.shared_bytes = cfg.shared_bytes();
  k.store_cols = kernels::bf16_gemm_store_cols(w32(cfg.block_n), out_bytes(cfg.epilogue));
  const GemmKernel* stored = store().add_kernel(k);
  entry.kernels[static_cast<size_t>(index)].store(stored, std::memory_order_release);
  if (config().print_configs) {
    std::string ranges;
    for (const MBucket& b : entry.plan.buckets)
      if (b.kernel == index) ranges += (ranges.empty() ? "" : ", ") + describe_m_range(b.m_lo, b.m_hi);
    std::fprintf(stderr,
                 "kiln: %s on cuda:%d (%s, %d SMs usable): n=%lld k=%lld, m in %s: %s; %u threads/CTA, %u bytes "
                 "shared memory, persistent grid <= %d CTAs, PDL %s (kernel %d of %zu for this shape)\n",
                 kOp, entry.device, entry.device_name.c_str(), entry.sm_count, static_cast<long long>(entry.n),
                 static_cast<long long>(entry.k), ranges.c_str(), cfg.describe().c_str(), k.threads, k.shared_bytes,
                 entry.sm_count, get_pdl() ? "on" : "off", index + 1, entry.plan.kernels.size());
  }
  return stored;
}

struct Checked {
  int64_t m, n, k, lda, ldb, ldd, ldc;  // lda, ldb: the stride between rows of K (K-major) or of M or N (MN-major)
  int epilogue, mn_major;
};

// The m-grouped forms' extra: their groups (B is `groups` [n, k] one after the other) and, contiguous, each row's
// group, or, masked, each group's row count.
struct Grouped {
  int grouping = 0;  // kernels::kBf16GemmMGrouped or kBf16GemmMasked
  int64_t groups = 0;
  const int32_t* layout = nullptr;  // Bf16GemmParams::grouped_layout
  // The masked form: A and D are `groups` blocks of Checked::m rows each (A's one after the other, D's d_plane_stride
  // elements apart), and the call's kernel is the one its plan picks at M = plan_m (groups * expected_m).
  int64_t plan_m = 0;
  int64_t d_plane_stride = 0;
  // The stride between B's groups, in elements (their planes' when B is N-major).
  int64_t b_group_stride = 0;
};

// An operand's layout, for a [rows, k] view: K-major (stride(1) == 1, rows of k elements 16-byte aligned apart) or
// MN-major (stride(0) == 1: a transposed [k, rows] tensor, its rows of `rows` elements 16-byte aligned apart). Sets
// `mn_major` and returns the stride between those rows, in elements. `major` names the MN-major form ("M-major").
int64_t check_operand_layout(const Arg& arg, const TensorView& t, const char* major, bool& mn_major) {
  check_ndim(arg, t, 2);
  mn_major = false;
  const int64_t rows = t.shape[0], cols = t.shape[1];
  if (rows == 0 || cols == 0 || cols == 1 || t.strides[1] == 1) return check_rows_dense(arg, t, 16);
  if (rows > 1 && t.strides[0] != 1)
    fail(ErrorKind::kValueError, arg, t,
         std::string("K-major (stride(1) == 1) or ") + major + " (stride(0) == 1: a transposed [k, " +
             std::to_string(rows) + "] tensor)",
         "strides (" + std::to_string(t.strides[0]) + ", " + std::to_string(t.strides[1]) + ")");
  mn_major = true;
  const int64_t ld = t.strides[1];
  if (ld < rows)
    fail(ErrorKind::kValueError, arg, t,
         std::string(major) + " with stride(1) >= size(0) == " + std::to_string(rows),
         "stride(1) == " + std::to_string(ld));
  if (ld % 8 != 0)
    fail(ErrorKind::kValueError, arg, t,
         std::string(major) + " with columns 16-byte aligned (stride(1) a multiple of 8)",
         "stride(1) == " + std::to_string(ld) + " (" + std::to_string(ld * 2) + " bytes)");
  return ld;
}

// In the order errors are reported: dtypes, devices, shapes, strides, alignment, overlap. `c`: the accumulating
// form's C (which makes D float32); nullptr for bf16_gemm_nt, whose D may be bfloat16 or float32.
Checked check_arguments(const char* function, const TensorView& a, const TensorView& b, const TensorView& d,
                        const TensorView* c_tensor) {
  const Arg aa{function, "a"}, ab{function, "b"}, ad{function, "d"}, ac{function, "c"};
  check_dtype(aa, a, DType::kBFloat16);
  check_dtype(ab, b, DType::kBFloat16);
  Checked c{};
  if (c_tensor != nullptr) {
    check_dtype(ad, d, DType::kFloat32);
    check_dtype(ac, *c_tensor, DType::kFloat32);
    c.epilogue = static_cast<int>(kernels::kBf16GemmAddF32);
  } else if (d.dtype == DType::kFloat32) {
    c.epilogue = static_cast<int>(kernels::kBf16GemmStoreF32);
  } else if (d.dtype != DType::kBFloat16) {
    fail(ErrorKind::kTypeError, ad, d, "bfloat16 or float32", to_string(d.dtype));
  }
  check_on_cuda(aa, a);
  check_same_device(ab, b, aa, a);
  check_same_device(ad, d, aa, a);
  if (c_tensor != nullptr) check_same_device(ac, *c_tensor, aa, a);
  check_ndim(aa, a, 2);
  check_ndim(ab, b, 2);
  c.m = a.shape[0];
  c.k = a.shape[1];
  c.n = b.shape[0];
  if (b.shape[1] != c.k)
    fail(ErrorKind::kValueError, ab, b, "of shape (n, k) with k == " + std::to_string(c.k) + " (a's k)",
         "shape " + format_dims(b.shape.data(), 2));
  check_shape(ad, d, {c.m, c.n}, "(m of a, n of b)");
  if (c_tensor != nullptr) check_shape(ac, *c_tensor, {c.m, c.n}, "(m of a, n of b), as d");
  if (c.n % 8 != 0)
    fail(ErrorKind::kValueError, ab, b, "of a size(0) (n) that is a multiple of 8", "n == " + std::to_string(c.n));
  if (c.k % 8 != 0 || (c.k == 0 && c.m > 0 && c.n > 0))
    fail(ErrorKind::kValueError, aa, a, "of a size(1) (k) that is a positive multiple of 8",
         "k == " + std::to_string(c.k));
  if (c.m > INT32_MAX) fail(ErrorKind::kValueError, aa, a, "at most 2147483647 rows", "m == " + std::to_string(c.m));
  if (c.n > INT32_MAX || c.k > INT32_MAX)
    fail(ErrorKind::kValueError, ab, b, "at most 2147483647 rows and columns",
         "shape " + format_dims(b.shape.data(), 2));
  bool a_mn = false, b_mn = false;
  c.lda = check_operand_layout(aa, a, "M-major", a_mn);
  c.ldb = check_operand_layout(ab, b, "N-major", b_mn);
  c.mn_major = (a_mn ? static_cast<int>(kernels::kBf16GemmMnMajorA) : 0) |
               (b_mn ? static_cast<int>(kernels::kBf16GemmMnMajorB) : 0);
  c.ldd = check_rows_dense(ad, d, 16);
  if (c_tensor != nullptr) c.ldc = check_rows_dense(ac, *c_tensor, 4);  // copied with cuMemcpy2DAsync: any pitch
  check_pointer_aligned(aa, a, 16);
  check_pointer_aligned(ab, b, 16);
  check_pointer_aligned(ad, d, 16);
  if (c_tensor != nullptr) check_pointer_aligned(ac, *c_tensor, 4);
  if (c.m > 0 && c.n > 0) {
    // The tiles read A and B while others are stored: D sharing their memory would be read after being written.
    check_no_overlap(ad, d, "a", a);
    check_no_overlap(ad, d, "b", b);
  }
  return c;
}

// A bf16 operand (A or B) as the kernel loads it: K-major, `rows` rows of k elements with row stride `ld`, boxed
// {64 (one K block, 128 bytes), box_rows}; or MN-major, k rows of `rows` elements with row stride `ld`, boxed
// {64, 64}. A 128-byte swizzle either way.
TensorMapKey operand_key(const TensorView& x, bool mn_major, int64_t k, int64_t rows, int64_t ld, uint32_t box_rows) {
  if (mn_major)
    return {reinterpret_cast<uint64_t>(x.data), w64(rows), w64(k), w64(ld * 2), 64, w32(kBlockK),
            CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, CU_TENSOR_MAP_SWIZZLE_128B};
  return {reinterpret_cast<uint64_t>(x.data), w64(k), w64(rows), w64(ld * 2), w32(kBlockK), box_rows,
          CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, CU_TENSOR_MAP_SWIZZLE_128B};
}

// The kernel a call of (n, k, epilogue, operand layouts, grouping) runs at M = planned_m, and its shape's entry: one
// table lookup and two atomic loads on a hit. The plan's table key is the form (`form_key`), the device, n, k, the
// usable SMs and the overrides.
struct Resolved {
  const ShapeEntry* entry;
  const GemmKernel* kernel;
};
Resolved resolve(const char* function, int64_t form_key, const TensorView& a, int64_t n, int64_t k, int64_t planned_m,
                 int epilogue, int mn_major, int grouping, CUstream stream) {
  const int usable_limit = get_num_sms();
  Table::Key key;
  key.words[0] = form_key;
  key.words[1] = a.device;
  key.words[2] = n;
  key.words[3] = k;
  key.words[4] = usable_limit;
  key.words[5] = static_cast<int64_t>(g_overrides.load(std::memory_order_relaxed));
  const ShapeEntry* entry = table().find(key);
  if (!entry) entry = resolve_shape(function, key, a, n, k, usable_limit, epilogue, mn_major, grouping);
  const int index = entry->plan.bucket_of(planned_m).kernel;
  const GemmKernel* kernel = entry->kernels[static_cast<size_t>(index)].load(std::memory_order_acquire);
  if (!kernel) kernel = resolve_kernel(*entry, index, stream);
  return {entry, kernel};
}

// Every check has passed; for kCopy, C is copied into D after the kernel is resolved (a compile error leaves D as it
// was) and before the launch.
void launch(const char* function, const Checked& c, const TensorView& a, const TensorView& b, const TensorView& d,
            const TensorView* c_tensor, CMode mode, CUstream stream, const Grouped* grouped = nullptr) {
  const int grouping = grouped ? grouped->grouping : static_cast<int>(kernels::kBf16GemmDense);
  const bool masked = grouping == static_cast<int>(kernels::kBf16GemmMasked);
  // One plan per shape, epilogue and operand layouts (1..12), and one per m-grouped form (13 and 14; 15 the contiguous
  // form with an N-major B; the k-grouped form's are 16 and 17).
  const int64_t form_key = grouped ? 12 + grouping + (c.mn_major != 0 ? 2 : 0) : 1 + c.epilogue + 3 * c.mn_major;
  const int64_t planned_m = masked ? grouped->plan_m : c.m;  // the masked form picks at groups * expected_m rows
  const auto [entry, kernel] =
      resolve(function, form_key, a, c.n, c.k, planned_m, c.epilogue, c.mn_major, grouping, stream);
  const Bf16GemmConfig& cfg = kernel->config;

  Bf16GemmParams params;
  // A boxed whole (also what a pair's tile past M reads) and, for a last m block with fewer rows, boxed to them (a
  // K-major A only: an M-major one loads whole 64 x 64 boxes). The masked form's map spans every group's rows (g * m
  // + ..), always boxed whole: a box past a group's rows reads the next group's, whose rows of D are never stored.
  const int64_t groups = masked ? grouped->groups : 1;
  const uint32_t block_m = w32(cfg.block_m);
  const bool a_mn = (c.mn_major & static_cast<int>(kernels::kBf16GemmMnMajorA)) != 0;
  const bool b_mn = (c.mn_major & static_cast<int>(kernels::kBf16GemmMnMajorB)) != 0;
  const uint32_t last_box_rows = a_mn || masked ? block_m : kernels::bf16_gemm_last_box_rows(block_m, w32(c.m));
  copy_map(params.tma_a, tensor_map_2d(operand_key(a, a_mn, c.k, c.m * groups, c.lda, block_m), "a"));
  if (last_box_rows != block_m)
    copy_map(params.tma_a_last, tensor_map_2d(operand_key(a, a_mn, c.k, c.m, c.lda, last_box_rows), "a"));
  params.last_box_rows = last_box_rows;
  // The m-grouped forms' B: every group's rows in one map, or, N-major, every group's [k, n] a plane of a 3-D map (a
  // box at a K tail must not read the next group's rows).
  const bool b_planes = grouped && b_mn;
  const int64_t b_rows = grouped && !b_mn ? c.n * grouped->groups : c.n;
  TensorMapKey b_key = operand_key(b, b_mn, c.k, b_rows, c.ldb, w32(cfg.block_n / cfg.cluster_m));
  if (b_planes) {
    b_key.planes = w64(grouped->groups);
    b_key.plane_bytes = w64(grouped->b_group_stride * 2);
  }
  copy_map(params.tma_b, tensor_map_2d(b_key, "b"));
  const uint32_t d_bytes = out_bytes(cfg.epilogue);
  TensorMapKey d_key{reinterpret_cast<uint64_t>(d.data), w64(c.n), w64(c.m), w64(c.ldd * d_bytes),
                     kernel->store_cols, 64,
                     d_bytes == 2 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
                     static_cast<uint32_t>(row_swizzle(kernel->store_cols * d_bytes))};
  if (masked) {  // each group's rows a plane: a store past them is clipped, not written into the next group's
    d_key.planes = w64(groups);
    d_key.plane_bytes = w64(grouped->d_plane_stride * d_bytes);
  }
  copy_map(params.tma_d, tensor_map_2d(d_key, "d"));
  // B's policy by the m blocks that read each of its tiles: a group's rows (on average) in the m-grouped forms.
  params.b_cache_policy =
      kernels::bf16_gemm_b_cache_policy(w32(cfg.block_m), w32(grouped ? planned_m / grouped->groups : c.m));
  params.m = w32(c.m);
  params.grouped_layout = grouped ? grouped->layout : nullptr;
  params.num_groups = grouped ? w32(grouped->groups) : 0;

  cuda::LaunchConfig config;
  config.grid[0] = cfg.grid(c.m * groups, c.n, entry->sm_count);  // masked: the most m blocks there can be
  config.block[0] = kernel->threads;
  config.cluster[0] = w32(cfg.cluster_m);
  config.shared_bytes = kernel->shared_bytes;
  config.pdl = get_pdl();  // the kernel waits (griddepcontrol.wait) before its first global read
  config.stream = stream;
  if (mode == CMode::kCopy) prepare_d(function, mode, d, c_tensor, c.m, c.n, c.ldc, c.ldd, a.device, stream);
  kernel->kernel->launch(config, &params);
}

// ---- the m-grouped GEMMs (MoE experts) ------------------------------------------------------------------------

// What the m-grouped checks leave for the launch: bf16_gemm_nt's checked sizes and strides (of A, D and group 0's B,
// or in the masked form of group 0's A, B and D) and the groups.
struct GroupedChecked {
  Checked c{};
  Grouped grouped;
};

// The checks every m-grouped form shares, after bf16_gemm_nt's on group 0's views: a bfloat16 D (checked before them,
// in check_grouped_dtypes), a K-major A, B as the form stores it (`b_n_major`: [G, k, n] with rows of n, else [G, n,
// k] with rows of k; bf16_gemm_nt's check of group 0's view has found which, and its row stride c.ldb), B's groups
// one after the other (one map reads them all), and D clear of every group of A and B and of the device array of
// rows or counts.
void check_grouped_common(const char* fn, const Checked& c, const TensorView& a, const TensorView& b,
                          const TensorView& d, const TensorView& layout, const char* layout_name, bool b_n_major) {
  const Arg aa{fn, "a"}, ab{fn, "b"}, ad{fn, "d"};
  if ((c.mn_major & static_cast<int>(kernels::kBf16GemmMnMajorA)) != 0)
    fail(ErrorKind::kValueError, aa, a, "K-major (stride(-1) == 1)", strides_text(a));
  // (An empty B, which launches nothing, has no layout to check.)
  const bool empty = c.n == 0 || c.k == 0;
  if (((c.mn_major & static_cast<int>(kernels::kBf16GemmMnMajorB)) != 0) != b_n_major && !empty)
    fail(ErrorKind::kValueError, ab, b, b_n_major ? "N-major (stride(2) == 1)" : "K-major (stride(2) == 1)",
         strides_text(b));
  const int64_t groups = b.shape[0], rows = b_n_major ? c.k : c.n;
  if (groups > 1 && !empty && b.strides[0] != rows * c.ldb)
    fail(ErrorKind::kValueError, ab, b,
         std::string("groups one after the other: strides (") + (b_n_major ? "k" : "n") +
             " * s, s, 1), here stride(0) == " + std::to_string(rows * c.ldb),
         strides_text(b));
  if (c.m > 0 && c.n > 0) {
    check_no_overlap(ad, d, "a", a);
    check_no_overlap(ad, d, "b", b);
    check_no_overlap(ad, d, layout_name, layout);
  }
}

// The grouped tensors' dtypes and devices, reported before bf16_gemm_nt's checks of the views.
void check_grouped_dtypes(const char* fn, const TensorView& a, const TensorView& b, const TensorView& d,
                          const TensorView& layout, const char* layout_name) {
  const Arg aa{fn, "a"}, ab{fn, "b"}, ad{fn, "d"}, al{fn, layout_name};
  check_dtype(aa, a, DType::kBFloat16);
  check_dtype(ab, b, DType::kBFloat16);
  check_dtype(ad, d, DType::kBFloat16);
  check_dtype(al, layout, DType::kInt32);
  check_on_cuda(aa, a);
  check_same_device(al, layout, aa, a);
}

// Every check of m_grouped_bf16_gemm_nt_contiguous (`nn`: of m_grouped_bf16_gemm_nn_contiguous), in the order its
// errors are reported: dtypes and devices, ranks and shapes (b [G, n, k], or [G, k, n] for the nn form: each expert's
// weights stored N-major; m_indices [m]), then everything bf16_gemm_nt checks on a, group 0's [n, k] view of b (an
// N-major one for the nn form) and d, then the grouped layout (check_grouped_common).
GroupedChecked check_m_grouped(const TensorView& a, const TensorView& b, const TensorView& d,
                               const TensorView& m_indices, bool nn) {
  const char* fn = nn ? kMGroupedNnOp : kMGroupedOp;
  const Arg aa{fn, "a"}, ab{fn, "b"}, ai{fn, "m_indices"};
  check_grouped_dtypes(fn, a, b, d, m_indices, "m_indices");
  check_ndim(aa, a, 2);
  check_ndim(ab, b, 3);
  check_ndim(ai, m_indices, 1);
  const int64_t m = a.shape[0], k = a.shape[1], groups = b.shape[0], n = b.shape[nn ? 2 : 1];
  check_contiguous_b_shape(ab, b, k, nn);
  check_m_indices(ai, m_indices, m);
  check_grouped_n_and_k(aa, a, 1, 8, ab, b, nn ? 2 : 1);
  GroupedChecked out;
  const TensorView b0 = nn ? view_2d(b, 0, n, k, b.strides[2], b.strides[1])   // [n, k] with rows of n: N-major
                           : view_2d(b, 0, n, k, b.strides[1], b.strides[2]);
  out.c = check_arguments(fn, a, b0, d, nullptr);
  check_grouped_common(fn, out.c, a, b, d, m_indices, "m_indices", nn);
  out.grouped.grouping = static_cast<int>(kernels::kBf16GemmMGrouped);
  out.grouped.groups = groups;
  out.grouped.layout = static_cast<const int32_t*>(m_indices.data);
  out.grouped.b_group_stride = (nn ? k : n) * out.c.ldb;
  return out;
}

// Every check of m_grouped_bf16_gemm_nt_masked, in the order its errors are reported: dtypes and devices, ranks and
// shapes (a [G, m, k], b [G, n, k], d [G, m, n], masked_m [G]), expected_m, then everything bf16_gemm_nt checks on
// group 0's views, then the layouts that let one map span every group (A's groups one after the other, D's a
// multiple of 16 bytes apart and not overlapping, B's as in the contiguous form). Checked::m is one group's rows.
GroupedChecked check_m_grouped_masked(const TensorView& a, const TensorView& b, const TensorView& d,
                                      const TensorView& masked_m, int64_t expected_m) {
  const char* fn = kMaskedOp;
  const Arg aa{fn, "a"}, ab{fn, "b"}, ad{fn, "d"}, amask{fn, "masked_m"};
  check_grouped_dtypes(fn, a, b, d, masked_m, "masked_m");
  check_ndim(aa, a, 3);
  check_ndim(ab, b, 3);
  check_ndim(ad, d, 3);
  check_ndim(amask, masked_m, 1);
  const int64_t groups = a.shape[0], m = a.shape[1], k = a.shape[2], n = b.shape[1];
  check_group_count(aa, a, "(groups, m, k)");
  check_masked_b_shape(ab, b, groups, k);
  check_shape(ad, d, {groups, m, n}, "(groups, m of a, n of b)");
  check_masked_m(amask, masked_m, groups);
  check_expected_m(fn, expected_m);
  check_masked_rows(aa, a, groups, m);
  check_grouped_n_and_k(aa, a, 2, 8, ab, b, 1);
  GroupedChecked out;
  out.c = check_arguments(fn, view_2d(a, 0, m, k, a.strides[1], a.strides[2]),
                          view_2d(b, 0, n, k, b.strides[1], b.strides[2]),
                          view_2d(d, 0, m, n, d.strides[1], d.strides[2]), nullptr);
  const Checked& c = out.c;
  check_grouped_common(fn, c, a, b, d, masked_m, "masked_m", false);
  check_masked_a_and_d(fn, a, d, groups, m, n, c.lda, c.ldd);
  out.grouped.grouping = static_cast<int>(kernels::kBf16GemmMasked);
  out.grouped.groups = groups;
  out.grouped.layout = static_cast<const int32_t*>(masked_m.data);
  out.grouped.plan_m = masked_plan_m(groups, expected_m, m);
  out.grouped.d_plane_stride = groups > 1 ? d.strides[0] : m * c.ldd;
  out.grouped.b_group_stride = n * c.ldb;
  return out;
}

// An m-grouped call whose checks have passed: nothing to launch for an empty problem, else its kernel.
void launch_grouped(const char* function, const GroupedChecked& checked, const TensorView& a, const TensorView& b,
                    const TensorView& d, Stream stream) {
  if (checked.c.m == 0 || checked.c.n == 0) return;
  launch(function, checked.c, a, b, d, nullptr, CMode::kZero, static_cast<CUstream>(stream), &checked.grouped);
}

// ---- the k-grouped GEMM (MoE experts' weight gradients) ------------------------------------------------------------

constexpr const char* kKGroupedOp = "k_grouped_bf16_gemm_tn_contiguous";
constexpr int64_t kKGroupedStoreKey = 16;  // table keys of the k-grouped plans: D stored, or added into
constexpr int64_t kKGroupedAddKey = 17;

// What the k-grouped checks leave for the launch.
struct KGroupedChecked {
  int64_t groups = 0, m = 0, n = 0;
  int64_t lda = 0, ldb = 0, ldd = 0, ldc = 0;  // A's and B's rows of m and n; each group's D and C rows
  CMode mode = CMode::kZero;                   // what happens to D: C added into, copied first, or none
  std::vector<int64_t> first_token;            // each group's first row of A and B
};

[[noreturn]] void fail_k_grouped(const std::string& what) {
  throw Error(ErrorKind::kValueError, std::string(kKGroupedOp) + ": " + what);
}

// Every check of k_grouped_bf16_gemm_tn_contiguous, in the order its errors are reported: dtypes and devices, ranks
// and shapes (a [sum(ks), m], b [sum(ks), n], d and c [G, m, n], ks one count >= 0 per group), n a multiple of 8 and
// the 32-bit sizes the maps take, then layouts (A's and B's rows dense and 16-byte aligned apart: each group's maps
// start at a row; D's and C's planes), alignment and overlap.
KGroupedChecked check_k_grouped(const TensorView& a, const TensorView& b, const TensorView& d,
                                const std::vector<int64_t>& ks, const TensorView* c_tensor) {
  const char* fn = kKGroupedOp;
  const Arg aa{fn, "a"}, ab{fn, "b"}, ad{fn, "d"}, ac{fn, "c"};
  check_dtype(aa, a, DType::kBFloat16);
  check_dtype(ab, b, DType::kBFloat16);
  check_dtype(ad, d, DType::kFloat32);
  if (c_tensor) check_dtype(ac, *c_tensor, DType::kFloat32);
  check_on_cuda(aa, a);
  check_same_device(ab, b, aa, a);
  check_same_device(ad, d, aa, a);
  if (c_tensor) check_same_device(ac, *c_tensor, aa, a);
  check_ndim(aa, a, 2);
  check_ndim(ab, b, 2);
  check_ndim(ad, d, 3);
  KGroupedChecked out;
  out.groups = d.shape[0];
  out.m = d.shape[1];
  out.n = d.shape[2];
  const int64_t groups = out.groups, m = out.m, n = out.n;
  if (c_tensor) check_shape(ac, *c_tensor, {groups, m, n}, "(groups, m, n), as d");
  if (static_cast<int64_t>(ks.size()) != groups)
    fail_k_grouped("ks must hold one token count per group (d.size(0) == " + std::to_string(groups) + "), got " +
                   std::to_string(ks.size()) + " counts");
  int64_t total = 0;
  for (size_t g = 0; g < ks.size(); ++g) {
    if (ks[g] < 0 || ks[g] > INT32_MAX)
      fail_k_grouped("ks[" + std::to_string(g) + "] must be a token count in 0..2147483647, got " +
                     std::to_string(ks[g]));
    out.first_token.push_back(total);
    total += ks[g];
  }
  check_shape(aa, a, {total, m}, "(sum(ks), m of d): each group's tokens one after the other");
  check_shape(ab, b, {total, n}, "(sum(ks), n of d): each group's tokens one after the other");
  if (n % 8 != 0)
    fail(ErrorKind::kValueError, ad, d, "of a size(2) (n) that is a multiple of 8", "n == " + std::to_string(n));
  if (m > INT32_MAX || n > INT32_MAX || groups > INT32_MAX)
    fail(ErrorKind::kValueError, ad, d, "at most 2147483647 groups, rows and columns",
         "shape " + format_dims(d.shape.data(), 3));
  out.lda = check_rows_dense(aa, a, 16);
  out.ldb = check_rows_dense(ab, b, 16);
  // One token in all: A's one row has no stride to check (check_rows_dense gives m), but its map still needs a 16-byte
  // one, which addresses nothing past that row.
  if (total <= 1) out.lda = (m + 7) / 8 * 8;
  check_k_grouped_planes(ad, d, true);
  if (c_tensor) check_k_grouped_planes(ac, *c_tensor, false);
  out.ldd = check_rows_dense(ad, view_2d(d, 0, m, n, d.strides[1], 1), 16);
  if (c_tensor) out.ldc = check_rows_dense(ac, view_2d(*c_tensor, 0, m, n, c_tensor->strides[1], 1), 4);
  check_pointer_aligned(aa, a, 16);
  check_pointer_aligned(ab, b, 16);
  check_pointer_aligned(ad, d, 16);
  if (c_tensor) check_pointer_aligned(ac, *c_tensor, 4);
  if (groups > 0 && m > 0 && n > 0) {
    // The tiles read A and B while others are stored: D sharing their memory would be read after being written.
    check_no_overlap(ad, d, "a", a);
    check_no_overlap(ad, d, "b", b);
  }
  out.mode = check_k_grouped_c(ac, c_tensor, d);
  return out;
}

// One launch of the k-grouped kernel `r` for the groups `launch_groups` (each with tokens, ks[g]): D as [G, m, n]
// planes, each group's own maps of its rows of A and B, in one Bf16GemmKGroupedParams.
void launch_k_grouped(const KGroupedChecked& c, const std::vector<int64_t>& ks,
                      const std::vector<size_t>& launch_groups, const Resolved& r, const TensorView& a,
                      const TensorView& b, const TensorView& d, CUstream stream) {
  const Bf16GemmConfig& cfg = r.kernel->config;
  const uint32_t block_m = w32(cfg.block_m);
  Bf16GemmKGroupedParams params{};
  Bf16GemmParams& base = params.base;
  TensorMapKey d_key{reinterpret_cast<uint64_t>(d.data), w64(c.n), w64(c.m), w64(c.ldd * 4), r.kernel->store_cols, 64,
                     CU_TENSOR_MAP_DATA_TYPE_FLOAT32, static_cast<uint32_t>(row_swizzle(r.kernel->store_cols * 4))};
  d_key.planes = w64(c.groups);
  d_key.plane_bytes = w64((c.groups > 1 ? d.strides[0] : c.m * c.ldd) * 4);
  copy_map(base.tma_d, tensor_map_2d(d_key, "d"));
  base.b_cache_policy = kernels::bf16_gemm_b_cache_policy(block_m, w32(c.m));
  base.m = w32(c.m);
  base.last_box_rows = block_m;
  base.num_groups = w32(launch_groups.size());
  for (size_t i = 0; i < launch_groups.size(); ++i) {
    const size_t g = launch_groups[i];
    const int64_t k = ks[g], first = c.first_token[g];
    copy_map(params.tma_a[i], tensor_map_2d(operand_key(view_2d(a, first * c.lda, k, c.m, c.lda, 1), true, k, c.m,
                                                        c.lda, block_m),
                                            "a"));
    copy_map(params.tma_b[i], tensor_map_2d(operand_key(view_2d(b, first * c.ldb, k, c.n, c.ldb, 1), true, k, c.n,
                                                        c.ldb, w32(cfg.block_n)),
                                            "b"));
    params.k_blocks[i] = w32(ceil_div(k, kBlockK));
    params.d_group[i] = w32(g);
  }
  cuda::LaunchConfig config;
  const int64_t units = units_of(cfg, c.m, c.n) * static_cast<int64_t>(launch_groups.size());
  config.grid[0] = w32(std::max<int64_t>(1, std::min<int64_t>(units, r.entry->sm_count)));
  config.block[0] = r.kernel->threads;
  config.shared_bytes = r.kernel->shared_bytes;
  config.pdl = get_pdl();  // as launch(): the kernel waits for earlier work (D's preparation too) before reading
  config.stream = stream;
  r.kernel->kernel->launch(config, &params);
}

}  // namespace
}  // namespace kiln::ops

namespace kiln {

void set_bf16_gemm_overrides(const Bf16GemmOverrides& overrides) {
  ops::check_bf16_gemm_overrides(overrides, "set_bf16_gemm_overrides");
  ops::g_overrides.store(ops::pack(overrides), std::memory_order_relaxed);
}

Bf16GemmOverrides get_bf16_gemm_overrides() { return ops::unpack(ops::g_overrides.load(std::memory_order_relaxed)); }

void bf16_gemm_nt(const TensorView& a, const TensorView& b, const TensorView& d, Stream stream) {
  const ops::Checked c = ops::check_arguments(ops::kOp, a, b, d, nullptr);
  if (c.m == 0 || c.n == 0) return;  // nothing to do: no compile, no launch
  ops::launch(ops::kOp, c, a, b, d, nullptr, ops::CMode::kZero, static_cast<CUstream>(stream));
}

void bf16_gemm_nt_accumulate(const TensorView& a, const TensorView& b, const TensorView& d, const TensorView& c_tensor,
                             Stream stream) {
  const ops::Checked c = ops::check_arguments(ops::kAccumulateOp, a, b, d, &c_tensor);
  const ops::CMode mode = ops::check_c_against_d(ops::kAccumulateOp, &c_tensor, d, c.m, c.n, c.ldc, c.ldd);
  if (c.m == 0 || c.n == 0) return;
  ops::launch(ops::kAccumulateOp, c, a, b, d, &c_tensor, mode, static_cast<CUstream>(stream));
}

void m_grouped_bf16_gemm_nt_contiguous(const TensorView& a, const TensorView& b, const TensorView& d,
                                       const TensorView& m_indices, Stream stream) {
  ops::launch_grouped(ops::kMGroupedOp, ops::check_m_grouped(a, b, d, m_indices, false), a, b, d, stream);
}

void m_grouped_bf16_gemm_nn_contiguous(const TensorView& a, const TensorView& b, const TensorView& d,
                                       const TensorView& m_indices, Stream stream) {
  ops::launch_grouped(ops::kMGroupedNnOp, ops::check_m_grouped(a, b, d, m_indices, true), a, b, d, stream);
}

void m_grouped_bf16_gemm_nt_masked(const TensorView& a, const TensorView& b, const TensorView& d,
                                   const TensorView& masked_m, int64_t expected_m, Stream stream) {
  ops::launch_grouped(ops::kMaskedOp, ops::check_m_grouped_masked(a, b, d, masked_m, expected_m), a, b, d, stream);
}

void k_grouped_bf16_gemm_tn_contiguous(const TensorView& a, const TensorView& b, const TensorView& d,
                                       const std::vector<int64_t>& ks, const TensorView* c, Stream stream) {
  const ops::KGroupedChecked checked = ops::check_k_grouped(a, b, d, ks, c);
  if (checked.groups == 0 || checked.m == 0 || checked.n == 0) return;
  const auto s = static_cast<CUstream>(stream);
  // The kernels first (a first call plans and may compile), so that an error leaves D untouched. Each group runs on
  // the kernel its tokens' plan picks (k_grouped_plan_k: its count rounded up to 64 times a power of two); groups of
  // one kernel share launches.
  const bool store_d = checked.mode == ops::CMode::kZero;
  const int epilogue = static_cast<int>(store_d ? kernels::kBf16GemmStoreF32 : kernels::kBf16GemmAddF32);
  const int mn_major = static_cast<int>(kernels::kBf16GemmMnMajorA | kernels::kBf16GemmMnMajorB);
  std::vector<ops::Resolved> distinct;             // the call's kernels, in order of first use
  std::vector<std::pair<int64_t, int>> planned_at;  // plan k -> index into distinct: one lookup per plan
  std::vector<int> class_of(ks.size(), -1);
  for (size_t g = 0; g < ks.size(); ++g) {
    if (ks[g] == 0) continue;
    const int64_t plan_k = ops::k_grouped_plan_k(ks[g], ops::kBlockK);
    auto known = std::find_if(planned_at.begin(), planned_at.end(), [&](const auto& e) { return e.first == plan_k; });
    if (known == planned_at.end()) {
      const ops::Resolved r = ops::resolve(ops::kKGroupedOp, store_d ? ops::kKGroupedStoreKey : ops::kKGroupedAddKey,
                                           a, checked.n, plan_k, checked.m, epilogue, mn_major,
                                           static_cast<int>(kernels::kBf16GemmKGrouped), s);
      auto same = std::find_if(distinct.begin(), distinct.end(),
                               [&](const ops::Resolved& k) { return k.kernel->kernel == r.kernel->kernel; });
      if (same == distinct.end()) same = distinct.insert(distinct.end(), r);
      known = planned_at.insert(planned_at.end(), {plan_k, static_cast<int>(same - distinct.begin())});
    }
    class_of[g] = known->second;
  }
  // Every group's D where the kernel adds into it (a copy of C; nothing for c=d) or does not write it at all (zeros
  // for the groups without tokens when there is no C: the others' planes the kernel stores whole), then the launches.
  ops::prepare_k_grouped_d(ops::kKGroupedOp, checked.mode, d, c, ks, checked.ldd, checked.ldc, a.device, s);
  for (const std::vector<size_t>& launch : ops::k_grouped_launches(class_of, kBf16GemmMaxLaunchGroups))
    ops::launch_k_grouped(checked, ks, launch, distinct[static_cast<size_t>(class_of[launch.front()])], a, b, d, s);
}

}  // namespace kiln
