// What the k-grouped GEMMs (the weight gradients of MoE experts: k_grouped_fp8_gemm_nt_contiguous,
// k_grouped_bf16_gemm_tn_contiguous) share on the host: the K a group's kernel is chosen at, which groups share a
// launch, the checks of their D and C ([G, m, n], one plane per group) and D's preparation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cuda/driver.hpp"
#include "kiln/tensor.hpp"
#include "ops/c_into_d.hpp"
#include "ops/validate.hpp"

namespace kiln::ops {

// The K a group of a k-grouped call is planned at (and so its kernel chosen): its token count rounded up to
// `min_k` times a power of two, so that calls whose counts change from step to step share a handful of plans. 0 for a
// group without tokens.
int64_t k_grouped_plan_k(int64_t k, int64_t min_k);

// The launches of a k-grouped call, given each group's launch class (an index into the call's distinct launch
// configurations, -1 for a group without tokens): for each class in order of first use, its groups in order, cut
// into runs of at most `max_groups` (one launch each: the groups a kernel's parameters have room for).
std::vector<std::vector<size_t>> k_grouped_launches(const std::vector<int>& class_of_group, size_t max_groups);

// A k-grouped call's D or C, `t` ([groups, m, n], checked by the caller to be so): each group's rows dense
// (stride(2) == 1) and the groups apart, stride(0) >= (m - 1) * stride(1) + n; with `aligned` (D, whose planes a TMA
// map addresses) stride(0) a multiple of 4 (16-byte aligned float32 planes). Nothing to check where a dimension is 0
// or (for stride(0)) with one group. The row strides are each group's view's to check.
void check_k_grouped_planes(const Arg& arg, const TensorView& t, bool aligned);

// What a k-grouped call does with D, given its C (checked by the caller to be float32 [G, m, n] like d): none is
// kZero; d itself (same address and strides) kAccumulate; another tensor kCopy, which must not overlap d (a partial
// overlap would make the copies read what they have already overwritten). Errors name `c_arg`.
CMode check_k_grouped_c(const Arg& c_arg, const TensorView* c, const TensorView& d);

// Each group's D before a k-grouped call's launches, on `stream` (of `device`): with another C (kCopy) every group's C
// copied into its plane of D; with no C (kZero) the planes of the groups without tokens (ks[g] == 0) zeroed, the
// kernels storing the others whole; nothing when C is D. `ldd`, `ldc`: the planes' row strides, as checked.
void prepare_k_grouped_d(const char* function, CMode mode, const TensorView& d, const TensorView* c,
                         const std::vector<int64_t>& ks, int64_t ldd, int64_t ldc, int device, CUstream stream);

}  // namespace kiln::ops
