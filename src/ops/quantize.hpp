// The FP8 casts' kernel choices, shared by the registry (ahead of time) and the launch path (run time): one
// function per op maps the values a kernel is specialised on to its KernelSpec, so a kernel compiled by
// `kiln compile` is exactly the one a launch looks for.
#pragma once

#include <cstdint>

#include "codegen/kernel_spec.hpp"
#include "ops/registry.hpp"

namespace kiln::ops {

// How a cast kernel is built and launched: threads per CTA, 16-byte vectors each thread keeps in flight
// (per-token), and the CTAs per SM the kernel is compiled for (__launch_bounds__) and the grid is sized to.
struct CastPlan {
  int threads = 256;
  int vecs_per_thread = 1;
  int ctas_per_sm = 1;
};

// per_token_cast_to_fp8: specialised on k (a positive multiple of 128). Throws Error(kValueError) naming k
// otherwise.
CastPlan per_token_cast_plan(int64_t k, const TargetInfo& target);
codegen::KernelSpec per_token_cast_spec(int64_t k, const TargetInfo& target);

// per_block_cast_to_fp8: one kernel for every shape.
CastPlan per_block_cast_plan(const TargetInfo& target);
codegen::KernelSpec per_block_cast_spec(const TargetInfo& target);

// to_mn_major_scales: one kernel for every shape.
CastPlan mn_major_scales_plan(const TargetInfo& target);
codegen::KernelSpec mn_major_scales_spec(const TargetInfo& target);

// Registry entries.
OpDescriptor per_token_cast_descriptor();
OpDescriptor per_block_cast_descriptor();
OpDescriptor mn_major_scales_descriptor();

}  // namespace kiln::ops
