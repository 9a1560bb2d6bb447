// M buckets: how a GEMM's plan cuts M >= 1 into inclusive ranges, each served by one of the plan's kernels (M is a
// run-time value of the kernels, so one compiled kernel serves a whole bucket). Shared by the FP8 and BF16 plans.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::ops {

constexpr int64_t kUnboundedM = INT64_MAX;  // the last bucket's upper end

// An inclusive range of M [m_lo, m_hi] (m_hi = kUnboundedM for the last) served by a plan's kernels[kernel].
struct MBucket {
  int64_t m_lo = 1;
  int64_t m_hi = kUnboundedM;
  int kernel = 0;
};

// The bucket serving m (m >= 1) among buckets contiguous from M = 1 to unbounded: a binary search over their upper
// ends.
const MBucket& bucket_of(const std::vector<MBucket>& buckets, int64_t m);
// The buckets intersecting [lo, hi] (1 <= lo <= hi), each clipped to it, in increasing M.
std::vector<MBucket> covering(const std::vector<MBucket>& buckets, int64_t lo, int64_t hi);

// "1..64" or "4097.." (unbounded).
std::string describe_m_range(int64_t lo, int64_t hi);

}  // namespace kiln::ops
