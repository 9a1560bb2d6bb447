#include "ops/grouped_checks.hpp"

#include <algorithm>
#include <string>

#include "kiln/error.hpp"

namespace kiln::ops {

void check_group_count(const Arg& arg, const TensorView& t, const char* shape) {
  const int64_t groups = t.shape[0];
  if (groups < 1 || groups > INT32_MAX)
    fail(ErrorKind::kValueError, arg, t, std::string("of shape ") + shape + " with 1 <= groups <= 2147483647",
         "groups == " + std::to_string(groups));
}

void check_grouped_n_and_k(const Arg& a_arg, const TensorView& a, int k_dim, int64_t k_multiple, const Arg& b_arg,
                           const TensorView& b, int n_dim) {
  const int64_t n = b.shape[n_dim], k = a.shape[k_dim];
  if (n % 8 != 0)
    fail(ErrorKind::kValueError, b_arg, b, "of a size(" + std::to_string(n_dim) + ") (n) that is a multiple of 8",
         "n == " + std::to_string(n));
  if (k % k_multiple != 0)
    fail(ErrorKind::kValueError, a_arg, a,
         "of a size(" + std::to_string(k_dim) + ") (k) that is a multiple of " + std::to_string(k_multiple),
         "k == " + std::to_string(k));
}

void check_contiguous_b_shape(const Arg& arg, const TensorView& b, int64_t k, bool stored_kn) {
  const char* shape = stored_kn ? "(groups, k, n)" : "(groups, n, k)";
  if (b.shape[stored_kn ? 1 : 2] != k)
    fail(ErrorKind::kValueError, arg, b,
         std::string("of shape ") + shape + " with k == " + std::to_string(k) + " (a's k)",
         "shape " + format_dims(b.shape.data(), 3));
  check_group_count(arg, b, shape);
}

void check_m_indices(const Arg& arg, const TensorView& m_indices, int64_t m) {
  check_shape(arg, m_indices, {m}, "(m,): the group of each of a's rows");
  check_contiguous(arg, m_indices);
  check_pointer_aligned(arg, m_indices, 4);
}

void check_masked_m(const Arg& arg, const TensorView& masked_m, int64_t groups) {
  check_shape(arg, masked_m, {groups}, "(groups,): each group's count of valid rows");
  check_contiguous(arg, masked_m);
  check_pointer_aligned(arg, masked_m, 4);
}

void check_masked_b_shape(const Arg& arg, const TensorView& b, int64_t groups, int64_t k) {
  if (b.shape[0] != groups || b.shape[2] != k)
    fail(ErrorKind::kValueError, arg, b,
         "of shape (groups, n, k) with groups == " + std::to_string(groups) + " and k == " + std::to_string(k) +
             " (a's)",
         "shape " + format_dims(b.shape.data(), 3));
}

void check_expected_m(const char* function, int64_t expected_m) {
  if (expected_m < 0)
    throw Error(ErrorKind::kValueError, std::string(function) + ": expected_m must be >= 0 (the rows a group is "
                                                                "expected to hold, which picks the kernel), got " +
                                            std::to_string(expected_m));
}

void check_masked_rows(const Arg& a_arg, const TensorView& a, int64_t groups, int64_t m) {
  if (groups * m > INT32_MAX)
    fail(ErrorKind::kValueError, a_arg, a, "at most 2147483647 rows in all (groups * m)",
         "groups * m == " + std::to_string(groups * m));
}

void check_masked_a_and_d(const char* function, const TensorView& a, const TensorView& d, int64_t groups, int64_t m,
                          int64_t n, int64_t lda, int64_t ldd) {
  if (groups <= 1 || m == 0 || n == 0) return;
  if (a.strides[0] != m * lda)
    fail(ErrorKind::kValueError, Arg{function, "a"}, a,
         "groups one after the other: stride(0) == m * " + std::to_string(lda) + " (the row stride) == " +
             std::to_string(m * lda),
         strides_text(a));
  if (d.strides[0] % 8 != 0 || d.strides[0] < m * ldd)
    fail(ErrorKind::kValueError, Arg{function, "d"}, d,
         "groups apart by a multiple of 8 elements (16 bytes) and by at least m * " + std::to_string(ldd) +
             " (the row stride) == " + std::to_string(m * ldd) + " elements",
         strides_text(d));
}

int64_t masked_plan_m(int64_t groups, int64_t expected_m, int64_t m) {
  return groups * std::clamp<int64_t>(expected_m, 1, std::max<int64_t>(m, 1));
}

}  // namespace kiln::ops
