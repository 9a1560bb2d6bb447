// Parameters of the self-test kernel (host and device). Plain builtin types: this header is compiled by the
// host compiler and, embedded, by NVCC/NVRTC with no standard library.
#pragma once

namespace kiln {

struct SelfTestParams {
  const float* x;
  float* y;
  unsigned long long n;
  float alpha;
};

}  // namespace kiln
