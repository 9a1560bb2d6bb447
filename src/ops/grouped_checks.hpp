// Checks the m-grouped GEMMs share (m_grouped_fp8_gemm_nt_* and m_grouped_bf16_gemm_nt_*): the group count, the
// masked forms' expected_m and the layouts that let one tensor map span every group. Each throws kiln::Error
// (kValueError) in validate.hpp's form, naming the function and the argument.
#pragma once

#include <cstdint>

#include "kiln/tensor.hpp"
#include "ops/validate.hpp"

namespace kiln::ops {

// t.shape[0] (the groups) in 1..2147483647; `shape` names t's dimensions in the message ("(groups, n, k)").
void check_group_count(const Arg& arg, const TensorView& t, const char* shape);

// The contiguous forms' B: [groups, n, k], or with `stored_kn` [groups, k, n] (each group's weights stored N-major),
// with a's k and 1..2147483647 groups.
void check_contiguous_b_shape(const Arg& arg, const TensorView& b, int64_t k, bool stored_kn = false);

// The contiguous forms' m_indices: [m] (each of a's rows' group), contiguous, 4-byte aligned.
void check_m_indices(const Arg& arg, const TensorView& m_indices, int64_t m);

// The masked forms' masked_m: [groups] (each group's count of valid rows), contiguous, 4-byte aligned.
void check_masked_m(const Arg& arg, const TensorView& masked_m, int64_t groups);

// The masked forms' B: [groups, n, k] with a's groups and k.
void check_masked_b_shape(const Arg& arg, const TensorView& b, int64_t groups, int64_t k);

// expected_m >= 0: the rows a group is expected to hold, which picks the kernel.
void check_expected_m(const char* function, int64_t expected_m);

// groups * m within the 32-bit row coordinates of one map over every group's rows of A.
void check_masked_rows(const Arg& a_arg, const TensorView& a, int64_t groups, int64_t m);

// The masked forms' A and D after their group 0 views were checked (row strides lda and ldd): A's groups one after
// the other, so that one map reads them all; D's a multiple of 16 bytes apart and not overlapping, the planes of a
// 3-D map. Nothing to check with one group or an empty group.
void check_masked_a_and_d(const char* function, const TensorView& a, const TensorView& d, int64_t groups, int64_t m,
                          int64_t n, int64_t lda, int64_t ldd);

// n and k as the 2-D GEMM checks want them (n a multiple of 8, k of k_multiple), checked first on the grouped
// tensors themselves so that the message names their own dimension (b's size(n_dim), a's size(k_dim)): the 2-D
// checks run on group 0's views, whose size(0) and size(1) are not the caller's.
void check_grouped_n_and_k(const Arg& a_arg, const TensorView& a, int k_dim, int64_t k_multiple, const Arg& b_arg,
                           const TensorView& b, int n_dim);

// The M a masked call plans its kernel at: groups * expected_m, expected_m clamped into [1, m].
int64_t masked_plan_m(int64_t groups, int64_t expected_m, int64_t m);

}  // namespace kiln::ops
