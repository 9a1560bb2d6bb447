#include "cuda/driver.hpp"
#include "kiln/kiln.hpp"

namespace kiln {

std::vector<DeviceSummary> devices() {
  std::vector<DeviceSummary> out;
  const int n = cuda::device_count();  // 0 without a driver: never throws
  for (int i = 0; i < n; ++i) {
    cuda::DeviceInfo info = cuda::device_info(i);
    out.push_back({i, info.name,
                   "sm_" + std::to_string(info.cc_major) + std::to_string(info.cc_minor) + (info.cc_major >= 9 ? "a" : ""),
                   info.sm_count, info.memory_bytes});
  }
  return out;
}

}  // namespace kiln
