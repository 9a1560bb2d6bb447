// The FP8 GEMM's kernel choice: a pure, deterministic function of the target (SM count, shared memory), N, K
// and the overrides, giving M buckets that cover every M >= 1, each served by one kernel. M is a run-time
// value of the kernel, so one compiled kernel serves a whole bucket: a serving warm-up over M = 1..16384
// compiles at most kFp8GemmMaxKernels kernels per (N, K), and usually fewer.
//
// How a choice is made (docs/FP8_GEMM.md, "Host side", has the numbers behind it):
//   1. candidates: the tiles the H200 sweep found useful -- 256 x 128 (two math warpgroups of two waves,
//      in CTA pairs sharing A), 128 x {128, 64, 160, 192} (two math warpgroups), 128 x 176 where it divides
//      N or K is long (offered_at), and 64 x {128, 64, 32} (one) -- with the most pipeline stages that fit and
//      the TMA-store epilogue, and 64 x 32, 64 x 16 and 128 x 32 split in K by CTA pairs (the bf16 form);
//      overrides narrow or replace them; after the pruning (4.), 128 x 144 replaces 128 x 160 where 144
//      divides N and the model puts it ahead everywhere 160 serves;
//   2. a cost model (fp8_gemm_estimate_us) calibrated on that sweep: per 128-wide K block a tile takes the
//      longest of a latency floor, its WGMMA + promotion time and its share of per-SM load bandwidth; each
//      tile adds an epilogue (and a split-K pair's CTAs half the K blocks each and a hand-over); the call
//      runs in rounds of one tile per CTA (wave quantisation), each as long as its tiles or its share of the
//      DRAM bytes; where DRAM bounds it a share of one tile's time adds to that; L2 traffic bounds it too;
//      256-row pairs at short K add a fill that fades with their rounds;
//   3. M is cut into intervals (64(i-1), 64i] up to 16384 (32768 for the weight-gradient form, whose M is a
//      weight's rows) -- inside one, every candidate's tile count is constant -- and each interval takes its
//      cheapest candidate;
//   4. candidates are then dropped, the cheapest loss first, while the intervals' cost stays within 1 %
//      of the best of all candidates on average (each interval weighed by ln of its M range, so that every
//      doubling of M counts alike) and within 2 % at every interval; the intervals are
//      re-assigned to the cheapest remaining one and equal neighbours joined into buckets; past the bounds,
//      while more than kFp8GemmMaxKernels remain, the cheapest loss goes anyway. M above that range
//      takes the remaining candidate with the lowest mean cost over its upper half (8193..16384), except that
//      the inference form's intervals up to kFp8GemmLongMaxM take another remaining one where the model puts it
//      over 3 % ahead, and its M beyond them the remaining one cheapest per output (at M = 2^20);
//   5. the inference form up to N = 6144 then swaps up to two kept kernels (never the tail) for fill tiles,
//      64 x {96, 144} and 128 x {80, 96}, where a swap lowers that mean by over 0.2 % and costs no interval over
//      2 %; a fill tile serves only intervals where it is over 3 % ahead, and never M above 16384;
//   6. a kernel that serves one m block only (a 64-row tile up to M = 64) runs with fewer stages than fit
//      (fewer bytes in flight per SM stream B faster after a flush of L2).
// DG_PRINT_CONFIGS=1 makes the op print each kernel choice once, when it is first loaded.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/kernels/fp8_gemm_layout.h"
#include "kiln/ops.hpp"
#include "ops/m_buckets.hpp"
#include "ops/registry.hpp"

namespace kiln::ops {

constexpr int kFp8GemmMaxKernels = 8;            // distinct kernels per (target, N, K) over all M, at most
constexpr int64_t kFp8GemmSampledMaxM = 16384;   // M is modelled (and kernels pruned) up to this
// The weight-gradient form's M is a weight's rows (up to 32768 in DeepSeek-V3: 32768 x 512, 24576 x 1536), not a
// token count, so its plans model M that far: one tail kernel for M = 16385.. ran 128x128 at 32768 x 512, 2.3 % (K =
// 4096) and 4.7 % (8192) slower than the 128x176 the model picks there (thirty-third session, H200).
constexpr int64_t kFp8GemmAccumulateSampledMaxM = 32768;
// The inference form's M from kFp8GemmSampledMaxM to here takes, per 64-row interval, the cheapest of the kernels
// kept for M <= kFp8GemmSampledMaxM where the model puts it clearly ahead of the tail kernel, and M above it the
// kept kernel cheapest per output (at M = 2^20): no kernel is added.
constexpr int64_t kFp8GemmLongMaxM = 65536;
constexpr int64_t kFp8GemmUnboundedM = kUnboundedM;  // the last bucket's upper end

// One kernel configuration: the template arguments of kiln::kernels::Fp8Gemm besides N and K.
struct Fp8GemmConfig {
  int block_m = 128;
  int block_n = 128;
  int stages = 1;
  int math_warpgroups = 2;  // block_m / 64 (2 for 256: two waves each)
  bool tma_store = true;
  int cluster_m = 1;  // 2: CTA pairs on vertically adjacent tiles, multicasting B
  int cluster_n = 1;  // 2: CTA pairs on horizontally adjacent tiles, multicasting A
  // Two partial accumulators: the next K block's WGMMAs run while the current one is promoted (and while a
  // finished tile is stored). Registers allow it up to block_n 128.
  bool overlap_promotion = true;
  // The weight-gradient form: B scaled per row (1 x 128), D fp32 accumulated into (direct stores only).
  bool accumulate = false;
  // 2: CTA pairs split K in halves and the second hands its partial sums to the first through distributed
  // shared memory (more CTAs when there are fewer tiles than SMs). Not combined with a multicast pair.
  int split_k = 1;
  // The tile order's group height in m units (the default unless the heuristic's tall-group rule applies): B
  // is read from DRAM about once per group.
  int group_m = static_cast<int>(kernels::kFp8GemmDefaultGroupM);
  // The weight-gradient form's k-grouped kernel (kiln::k_grouped_fp8_gemm_nt_contiguous): every group of one call
  // in one launch, each with its own maps of A and B and its own K (Fp8GemmGroupedParams). Set by the launch path
  // and the registry's k_grouped=1 on an accumulate plan's kernels; the heuristic never sets it.
  bool k_grouped = false;
  // The inference form's m-grouped kernel (kiln::m_grouped_fp8_gemm_nt_contiguous): each m block reads the B and the
  // scales of its rows' group (Fp8GemmParams::grouped_layout). Set by fp8_gemm_m_grouped_plan only.
  bool m_grouped = false;
  // The m-grouped masked kernel (kiln::m_grouped_fp8_gemm_nt_masked, with m_grouped): groups of A's and D's rows at a
  // fixed distance, each with its row count on the device (Fp8GemmParams::grouped_layout = masked_m). Set by
  // fp8_gemm_m_grouped_plan with `masked` only.
  bool masked = false;

  bool operator==(const Fp8GemmConfig&) const = default;
  // "128x128, 5 stages, 2 math warpgroups, TMA store, overlapped promotion" (+ ", B multicast x2", + ",
  // groups of 16" where the group height is not the default).
  std::string describe() const;
  // CTAs per cluster: a multicast pair (cluster_m or cluster_n 2), a split-K pair, or 1.
  int cluster_size() const { return cluster_m * cluster_n * split_k; }
  // Work units (one tile per CTA of a cluster) of an m x n problem.
  int64_t units(int64_t m, int64_t n) const;
};

// An inclusive range of M [m_lo, m_hi] (m_hi = kFp8GemmUnboundedM for the last) served by kernels[kernel].
using Fp8GemmBucket = MBucket;

// The heuristic's answer for one (target, N, K, overrides): the distinct kernels (at most
// kFp8GemmMaxKernels, in order of first use as M grows) and buckets in increasing M, contiguous from M = 1
// to unbounded, adjacent ones using different kernels.
struct Fp8GemmPlan {
  std::vector<Fp8GemmConfig> kernels;
  std::vector<Fp8GemmBucket> buckets;

  // The bucket serving m (m >= 1): a binary search over the buckets' upper ends.
  const Fp8GemmBucket& bucket_of(int64_t m) const;
  // The buckets intersecting [lo, hi] (1 <= lo <= hi), each clipped to it, in increasing M.
  std::vector<Fp8GemmBucket> covering(int64_t lo, int64_t hi) const;
};

// Which form of the operation a plan is for. The weight-gradient form (D fp32 += A . B^T, B scaled per row
// per 128 K) uses the same candidate tiles as the inference form, with its own epilogue (fp32 read-add-write
// stores, no TMA store), no cluster, and the stage count of its shared-memory layout (B's scales per stage).
// That form has two plans over the same kernels: with C (D += A . B^T, the epilogue's reduce-adds read D) and
// without (c=None: the kernel stores D, Fp8GemmParams::store_d), whose tiles differ at short K (kReduceShortK* in
// fp8_gemm_heuristic.cpp).
enum class Fp8GemmForm {
  kInference,   // D (bf16) = A . B^T
  kAccumulate,  // the weight-gradient form with C: D (fp32) += A . B^T by TMA reduce-adds
  kFp32Store,   // the weight-gradient form without C: D (fp32) = A . B^T, stored by the same kernels
};
// The weight-gradient form, with C or without: its kernels (Fp8GemmConfig::accumulate).
constexpr bool weight_gradient(Fp8GemmForm form) { return form != Fp8GemmForm::kInference; }

// Checks an override set against what the kernel supports (see Fp8GemmOverrides in kiln/ops.hpp). Throws
// Error(kValueError) "<who>: <field> must be ..., got ..." naming the field.
void check_fp8_gemm_overrides(const Fp8GemmOverrides& overrides, const char* who);

// The plan for a (target, n, k, form). n > 0, n % 8 == 0, k > 0, k % 16 == 0 (Error(kValueError) naming n or
// k otherwise); target.sm_count > 0 is the SMs the kernel may use (set_num_sms already applied). Overrides are
// checked as above (and cluster_m or cluster_n = 2 is refused for the accumulating form, whose kernel has no
// cluster variant); a forced stage count that does not fit in target.shared_memory_per_block is an error naming the
// tile. Pure: equal arguments give equal plans, on every machine.
Fp8GemmPlan fp8_gemm_plan(const TargetInfo& target, int64_t n, int64_t k, const Fp8GemmOverrides& overrides = {},
                          Fp8GemmForm form = Fp8GemmForm::kInference);

// The plan of the m-grouped contiguous form (kiln::m_grouped_fp8_gemm_nt_contiguous: MoE experts' rows one group
// after another, each group's rows aligned to 128), for every M (the rows of all groups together): the inference
// form's heuristic over the candidates that take one m block per CTA, since two m blocks may be two groups' (no
// 256-row tiles; the heuristic never pairs CTAs sharing B), every kernel marked m_grouped. At most kFp8GemmMaxKernels.
// The cost model is the inference form's: it does not see that each group reads its own B. Overrides as
// fp8_gemm_plan's, but block_m = 256 and cluster_m = 2 are refused (Error(kValueError) naming them).
// `masked`: the same plan for the masked form (kiln::m_grouped_fp8_gemm_nt_masked), its kernels marked masked too and
// its errors naming that function; its calls pick their kernel at M = groups * expected_m.
Fp8GemmPlan fp8_gemm_m_grouped_plan(const TargetInfo& target, int64_t n, int64_t k,
                                    const Fp8GemmOverrides& overrides = {}, bool masked = false);

// The cost model behind the choice: estimated kernel time in microseconds (including the fixed time that
// CUDA-event timings of the sweep contained) of `config` for an m x n x k problem on `target`. Fitted to the
// inference form's sweeps; the accumulating form (config.accumulate) scales its promotion cycles, wide tiles and
// epilogue by terms of its own, fitted to that form's sweeps (kAccumulate* and kReduceShortK* in
// fp8_gemm_heuristic.cpp). `stores_d`: that form without C (Fp8GemmForm::kFp32Store), whose epilogue stores D
// rather than adding to it (at short K: 4 bytes an element, and no reduce-add term).
double fp8_gemm_estimate_us(const TargetInfo& target, int64_t m, int64_t n, int64_t k, const Fp8GemmConfig& config,
                            bool stores_d = false);

// How many of `config`'s stages its pipeline runs for a call of k in `form` (Fp8GemmParams::ring_stages): all of them
// but in the weight-gradient form with C at K <= 256, where it runs 4 (measured 14 % faster on geometric mean;
// fp8_gemm_heuristic.cpp), and, for tiles of at least 128 columns on a device whose L2 is known (`l2_bytes`, 0 if not),
// K blocks + 1 at K = 257..384, and on from there where the L2 is an H100's rather than an H200's; unless the caller
// forced a stage count (`stages_forced`). The kernel is compiled with all of them, so a weight's kernels serve every K
// and every device.
int fp8_gemm_ring_stages(const Fp8GemmConfig& config, int64_t k, Fp8GemmForm form, bool stages_forced,
                         int64_t l2_bytes);

// The launch geometry shared by the op and the plan: CTAs for m rows (a whole number of clusters, at most
// the target's SMs), and the kernel's threads per CTA and dynamic shared memory.
uint32_t fp8_gemm_grid(const Fp8GemmConfig& config, int64_t m, int64_t n, int sm_count);
uint32_t fp8_gemm_threads(const Fp8GemmConfig& config);
uint32_t fp8_gemm_shared_bytes(const Fp8GemmConfig& config);

}  // namespace kiln::ops
