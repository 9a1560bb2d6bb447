#include "ops/k_groups.hpp"

#include <algorithm>

#include "kiln/error.hpp"

namespace kiln::ops {

int64_t k_grouped_plan_k(int64_t k, int64_t min_k) {
  if (k <= 0) return 0;
  int64_t plan_k = min_k;
  while (plan_k < k) plan_k *= 2;
  return plan_k;
}

std::vector<std::vector<size_t>> k_grouped_launches(const std::vector<int>& class_of_group, size_t max_groups) {
  std::vector<std::vector<size_t>> launches;
  const int classes =
      class_of_group.empty() ? 0 : *std::max_element(class_of_group.begin(), class_of_group.end()) + 1;
  for (int cls = 0; cls < classes; ++cls) {
    bool open = false;  // the last launch takes this class's groups
    for (size_t g = 0; g < class_of_group.size(); ++g) {
      if (class_of_group[g] != cls) continue;
      if (!open || launches.back().size() == max_groups) launches.emplace_back();
      open = true;
      launches.back().push_back(g);
    }
  }
  return launches;
}

void check_k_grouped_planes(const Arg& arg, const TensorView& t, bool aligned) {
  const int64_t groups = t.shape[0], m = t.shape[1], n = t.shape[2];
  if (groups > 0 && m > 0 && n > 1 && t.strides[2] != 1)
    fail(ErrorKind::kValueError, arg, t, "of dense rows: stride(2) == 1", "strides " + format_dims(t.strides.data(), 3));
  if (groups > 1 && m > 0 && n > 0 &&
      ((aligned && t.strides[0] % 4 != 0) || t.strides[0] < (m - 1) * t.strides[1] + n))
    fail(ErrorKind::kValueError, arg, t,
         std::string("groups that do not overlap: stride(0) >= (m - 1) * stride(1) + n") +
             (aligned ? ", a multiple of 4 (each group's D 16-byte aligned)" : ""),
         "strides " + format_dims(t.strides.data(), 3));
}

CMode check_k_grouped_c(const Arg& c_arg, const TensorView* c, const TensorView& d) {
  if (c == nullptr) return CMode::kZero;
  const bool same = c->data == d.data && c->strides == d.strides;
  if (!same && d.shape[0] > 0 && d.shape[1] > 0 && d.shape[2] > 0 && spans_overlap(*c, d))
    fail(ErrorKind::kValueError, c_arg, *c, "d itself or memory that does not overlap d's (d is " + d.describe() + ")",
         "a tensor overlapping d");
  return same ? CMode::kAccumulate : CMode::kCopy;
}

void prepare_k_grouped_d(const char* function, CMode mode, const TensorView& d, const TensorView* c,
                         const std::vector<int64_t>& ks, int64_t ldd, int64_t ldc, int device, CUstream stream) {
  const int64_t m = d.shape[1], n = d.shape[2];
  for (size_t g = 0; g < ks.size(); ++g) {
    if (mode != CMode::kCopy && !(mode == CMode::kZero && ks[g] == 0)) continue;
    const auto gi = static_cast<int64_t>(g);
    const TensorView d_g = view_2d(d, gi * d.strides[0], m, n, ldd, 1);
    const TensorView c_g = mode == CMode::kCopy ? view_2d(*c, gi * c->strides[0], m, n, ldc, 1) : TensorView{};
    prepare_d(function, mode, d_g, mode == CMode::kCopy ? &c_g : nullptr, m, n, ldc, ldd, device, stream);
  }
}

}  // namespace kiln::ops
