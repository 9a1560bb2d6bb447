// The BF16 GEMM (bf16_gemm_nt): its kernel choice, kernel specs and registry entry, shared by the registry (ahead of
// time) and the launch path (run time), so a kernel built by `kiln precompile` is exactly the one a launch looks for.
//
// How a choice is made: candidates are tiles of 64 rows (one math warpgroup), 128 rows (two, alone or in CTA pairs
// multicasting B) and 256 rows (two warpgroups of two waves, alone or in pairs), at the widths a sweep found fast
// (bf16_gemm_offered), each with as many pipeline stages as fit beside a whole staging tile (128x256 one more, beside
// half of one: measured faster). A cost model (bf16_gemm_estimate_us)
// estimates each at every 64-row interval of M up to kBf16GemmSampledMaxM; each interval takes its cheapest, and
// candidates are dropped, the cheapest loss first, while the intervals stay within 1 % of the best on average
// (weighed by ln of M, so every doubling counts alike) and 2 % at every interval, and anyway while more than
// kBf16GemmMaxKernels remain. M above that range takes the last interval's kernel.
//
// A float32 D (stored, or added into: the epilogue, Bf16GemmConfig::epilogue) makes a plan of its own: its staging
// tile is twice the bytes, so a tile has fewer stages beside it, and tiles left with fewer than
// kBf16GemmMinPlannedStages are not offered (128x256 and 256x128 with a float32 D). So do MN-major operands
// (Bf16GemmConfig::mn_major): an N-major B is loaded in boxes of 64 columns, so only widths that are multiples of 64
// are offered (of 128 in CTA pairs, each CTA loading half of the boxes).
//
// The m-grouped forms (m_grouped_bf16_gemm_nt_contiguous and _masked, Bf16GemmConfig::grouping) make plans of their
// own: tiles of 64 and 128 rows only (an m block must lie in one group, and the groups are aligned to 128 rows), no
// CTA pairs, a bfloat16 D and K-major operands. The contiguous form is planned over A's rows (every group's), the
// masked one at G * expected_m rows (the call's kernel is the plan's at that M), with the dense model.
//
// The k-grouped form (k_grouped_bf16_gemm_tn_contiguous, grouping 3: a float32 D, MN-major operands, K at run time)
// is planned per expert at its token count rounded up (ops/k_groups.hpp's k_grouped_plan_k) and over m, each expert's
// D rows: its tiles take the most stages beside a part of a staging tile (its float32 epilogue in passes: long K wants
// depth), no CTA pairs, and a launch is costed as several experts' tiles together (bf16_gemm_estimate_us).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "codegen/kernel_spec.hpp"
#include "kiln/ops.hpp"
#include "ops/m_buckets.hpp"
#include "ops/registry.hpp"

namespace kiln::ops {

constexpr int kBf16GemmMaxKernels = 8;             // distinct kernels per (target, N, K) over all M, at most
constexpr int64_t kBf16GemmSampledMaxM = 16384;    // M is modelled (and kernels pruned) up to this
constexpr int kBf16GemmMinPlannedStages = 3;       // fewer stages cannot keep the tensor cores fed across a K block

// One kernel configuration: the template arguments of kiln::kernels::Bf16Gemm besides N and K.
struct Bf16GemmConfig {
  int block_m = 128;
  int block_n = 128;
  int stages = 1;
  int math_warpgroups = 2;  // 1 for 64 rows, else 2 (256 rows: two waves each)
  int cluster_m = 1;        // 2: CTA pairs on vertically adjacent tiles, multicasting B
  int epilogue = 0;         // kernels::kBf16GemmStoreBf16, kBf16GemmStoreF32 or kBf16GemmAddF32 (bf16_gemm_params.h)
  int mn_major = 0;         // kernels::kBf16GemmMnMajorA | kBf16GemmMnMajorB: A stored M-major, B N-major
  int grouping = 0;         // kernels::kBf16GemmDense, kBf16GemmMGrouped, kBf16GemmMasked or kBf16GemmKGrouped

  bool operator==(const Bf16GemmConfig&) const = default;
  // "128x256, 3 stages, 2 math warpgroups" (+ ", B multicast x2") (+ ", float32 D" or ", added into float32 D")
  // (+ ", M-major A", ", N-major B") (+ ", m-grouped", ", m-grouped masked" or ", k-grouped").
  std::string describe() const;
  // CTAs for an m x n problem on `sm_count` SMs: one per tile, at most the SMs, a whole number of clusters.
  uint32_t grid(int64_t m, int64_t n, int sm_count) const;
  uint32_t threads() const;
  uint32_t shared_bytes() const;
};

// The heuristic's answer for one (target, N, K, overrides): the distinct kernels (at most kBf16GemmMaxKernels, in
// order of first use as M grows) and buckets in increasing M, contiguous from M = 1 to unbounded.
struct Bf16GemmPlan {
  std::vector<Bf16GemmConfig> kernels;
  std::vector<MBucket> buckets;
  const MBucket& bucket_of(int64_t m) const { return ops::bucket_of(buckets, m); }
};

// Whether the plan offers a block_m x block_n tile for N = n (overrides may force any other width): the widths a sweep
// found the fastest somewhere or close to it (bf16_gemm.cpp says which were left out, and why).
bool bf16_gemm_offered(int block_m, int block_n, int64_t n);

// Checks an override set (see Bf16GemmOverrides in kiln/ops.hpp). Throws Error(kValueError) "<who>: <field> must
// be ..., got ..." naming the field.
void check_bf16_gemm_overrides(const Bf16GemmOverrides& overrides, const char* who);

// The plan for (target, n, k, epilogue, operand layouts, grouping). n > 0, n % 8 == 0, k > 0, k % 8 == 0 (Error(kValueError) naming n or k
// otherwise); target.sm_count > 0 is the SMs the kernels may use. A forced stage count that does not fit in
// target.shared_memory_per_block is an error naming the tile; so are overrides an m-grouped plan cannot take (256-row
// tiles, CTA pairs) and an m-grouped plan of another epilogue or operand layout, and a k-grouped plan with a bfloat16 D
// or K-major operands. Pure: equal arguments give equal plans.
Bf16GemmPlan bf16_gemm_plan(const TargetInfo& target, int64_t n, int64_t k, const Bf16GemmOverrides& overrides = {},
                            int epilogue = 0, int mn_major = 0, int grouping = 0);

// The cost model behind the choice: estimated kernel time in microseconds of `config` (its tile and its epilogue)
// for an m x n x k problem.
double bf16_gemm_estimate_us(const TargetInfo& target, int64_t m, int64_t n, int64_t k, const Bf16GemmConfig& config);

// The spec of kiln::kernels::Bf16Gemm<n, k, block_m, block_n, stages, math_warpgroups, cluster_m[, epilogue[,
// mn_major[, group_m, grouping]]]> (the trailing arguments only where they are not the defaults, so the source of a
// K-major, bf16-D kernel is what it was before there was a choice): op "bf16_gemm_nt", the config's threads per CTA and
// one CTA per SM.
codegen::KernelSpec bf16_gemm_spec(int64_t n, int64_t k, const Bf16GemmConfig& config);

// Registry entry: m (a value or a range), n, k, the form (fp32=1: a float32 D; accumulate=1: added into one;
// m_major_a=1, n_major_b=1: MN-major operands; m_grouped=1: m_grouped_bf16_gemm_nt_contiguous's kernels, with
// masked=1 m_grouped_bf16_gemm_nt_masked's, m then being G * expected_m; k_grouped=1
// k_grouped_bf16_gemm_tn_contiguous's, k an expert's tokens or a range of them), and the optional overrides block_m,
// block_n, stages, cluster_m and num_sms (as set_num_sms: 0 for all of the target's SMs).
OpDescriptor bf16_gemm_nt_descriptor();

}  // namespace kiln::ops
