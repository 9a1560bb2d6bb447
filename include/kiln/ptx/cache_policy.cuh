// L2 cache policies for loads that take an .L2::cache_hint operand (TMA loads here), as
// createpolicy.fractional.L2::<priority>.b64 encodes them for a fraction of 1.0 (the values CUTLASS and
// DeepGEMM pass too). Plain constants: host code chooses a policy and passes it to kernels in their parameters.
#pragma once

#include "kiln/ptx/types.cuh"

namespace kiln::ptx {

constexpr u64 kL2EvictNormal = 0x1000000000000000ull;  // what a load without a hint gets
constexpr u64 kL2EvictFirst = 0x12F0000000000000ull;   // streamed data: the first lines to go
constexpr u64 kL2EvictLast = 0x14F0000000000000ull;

}  // namespace kiln::ptx
