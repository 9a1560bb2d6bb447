// The self-test kernel's spec, shared by the JIT tests and the helper program they start: a tiny kernel
// whose template argument makes each key distinct.
#pragma once

#include <cstdint>

#include "codegen/kernel_spec.hpp"

namespace kiln::test {

inline codegen::KernelSpec selftest_spec(int scale) {
  codegen::KernelSpec spec;
  spec.op = "selftest";
  spec.header = "kiln/kernels/selftest.cuh";
  spec.kernel_template = "kiln::kernels::SelfTest";
  spec.params_type = "kiln::SelfTestParams";
  spec.block_threads = 256;
  spec.arg("scale", static_cast<int64_t>(scale));
  return spec;
}

}  // namespace kiln::test
