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

}  // namespace kiln::ops
