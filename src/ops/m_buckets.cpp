#include "ops/m_buckets.hpp"

#include <algorithm>

namespace kiln::ops {

const MBucket& bucket_of(const std::vector<MBucket>& buckets, int64_t m) {
  size_t lo = 0, hi = buckets.size() - 1;  // the answer is in [lo, hi]; the last bucket is unbounded
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (m <= buckets[mid].m_hi)
      hi = mid;
    else
      lo = mid + 1;
  }
  return buckets[lo];
}

std::vector<MBucket> covering(const std::vector<MBucket>& buckets, int64_t lo, int64_t hi) {
  std::vector<MBucket> out;
  for (const MBucket& b : buckets) {
    if (b.m_hi < lo || b.m_lo > hi) continue;
    MBucket clipped = b;
    clipped.m_lo = std::max(b.m_lo, lo);
    clipped.m_hi = std::min(b.m_hi, hi);
    out.push_back(clipped);
  }
  return out;
}

std::string describe_m_range(int64_t lo, int64_t hi) {
  return std::to_string(lo) + ".." + (hi == kUnboundedM ? std::string() : std::to_string(hi));
}

}  // namespace kiln::ops
