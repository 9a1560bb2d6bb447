// Register reallocation between warpgroups (sm_90a): a warp-specialised kernel moves registers from the
// TMA producer, which needs few, to the math warpgroups, which hold the accumulators.
//
// setmaxnreg takes effect only when the kernel starts with a register cap (__launch_bounds__(threads, 1))
// and each warpgroup's role is one branch of a single if/else; otherwise ptxas ignores it with warning
// C7508. The counts are multiples of 8 in 24..256, and the sum over the CTA's warps must fit the register
// file (64K registers): e.g. 128 x 40 + 256 x 232 = 64,512 for one producer and two math warpgroups.
#pragma once

#include "kiln/ptx/types.cuh"

namespace kiln::ptx {

// setmaxnreg.inc.sync.aligned.u32 N: raises this warpgroup's per-thread register limit to N (blocks until
// the registers are free in the pool). All threads of the warpgroup execute it.
template <u32 kRegisters>
__device__ __forceinline__ void setmaxnreg_inc() {
  static_assert(kRegisters % 8 == 0 && kRegisters >= 24 && kRegisters <= 256, "setmaxnreg: 24..256, step 8");
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
}

// setmaxnreg.dec.sync.aligned.u32 N: lowers this warpgroup's per-thread register limit to N, returning the
// rest to the pool.
template <u32 kRegisters>
__device__ __forceinline__ void setmaxnreg_dec() {
  static_assert(kRegisters % 8 == 0 && kRegisters >= 24 && kRegisters <= 256, "setmaxnreg: 24..256, step 8");
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
}

}  // namespace kiln::ptx
