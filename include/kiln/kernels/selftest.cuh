// The self-test kernel: y = alpha * x + y * kScale. Tiny on purpose: `kiln doctor` compiles it to prove the
// toolchain works, and the JIT tests use it to exercise keys, races and faults without a long compile.
#pragma once

#include "kiln/kernels/selftest_params.h"

namespace kiln::kernels {

template <int kScale>
struct SelfTest {
  static __device__ void run(const SelfTestParams& p) {
    const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
    for (unsigned long long i = blockIdx.x * blockDim.x + threadIdx.x; i < p.n; i += stride)
      p.y[i] = p.alpha * p.x[i] + p.y[i] * static_cast<float>(kScale);
  }
};

}  // namespace kiln::kernels
