// The FP8 GEMM (fp8_gemm_nt): kernel specs shared by the registry (ahead of time) and the launch path (run
// time), so a kernel built by `kiln precompile` is exactly the one a launch looks for. The kernel choice
// itself is ops/fp8_gemm_heuristic.hpp.
#pragma once

#include <cstdint>
#include <vector>

#include "codegen/kernel_spec.hpp"
#include "ops/fp8_gemm_heuristic.hpp"
#include "ops/registry.hpp"

namespace kiln::ops {

// The spec of kiln::kernels::Fp8Gemm<n, k, config...>: op "fp8_gemm_nt" (both forms), template arguments n,
// k, block_m, block_n, stages, math_warpgroups, tma_store, cluster_m, cluster_n, overlap_promotion, accumulate,
// split_k (in that order) and group_m where it is not the kernel's default, the config's threads per CTA and one
// CTA per SM. The weight-gradient form's (config.accumulate) renders k as kernels::kFp8GemmRunTimeK and no group_m:
// its kernels take both at run time, so the spec (and the compiled kernel) is the same for every k. A k-grouped
// kernel (config.k_grouped) also renders group_m (the default: read at run time) and k_grouped, and takes
// kiln::Fp8GemmGroupedParams.
codegen::KernelSpec fp8_gemm_spec(int64_t n, int64_t k, const Fp8GemmConfig& config);

// Registry entry: m (a value or a range), n, k, and the optional overrides block_m, block_n, stages,
// cluster_m, cluster_n and num_sms (as set_num_sms: 0 for all of the target's SMs), accumulate (1: the
// weight-gradient form's kernels, as fp8_gemm_nt_accumulate / fp8_gemm_nt_wgrad launch them) and k_grouped (1, with
// accumulate=1: those kernels k-grouped, as k_grouped_fp8_gemm_nt_contiguous launches them, each group's at k =
// k_grouped_plan_k(its tokens, 128): ops/k_groups.hpp).
OpDescriptor fp8_gemm_nt_descriptor();

}  // namespace kiln::ops
