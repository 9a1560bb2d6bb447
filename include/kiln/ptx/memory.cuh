// Global-memory access for memory-bound kernels: 16-byte vector loads and 8/16-byte vector stores with cache
// hints, warp shuffles, and the grid-dependency controls of programmatic dependent launch (PDL). Each wrapper
// names the PTX instruction it emits.
#pragma once

#include "kiln/ptx/types.cuh"

namespace kiln::ptx {

// Sixteen bytes in four registers (the unit of one vector load or store).
struct alignas(16) U32x4 {
  u32 x, y, z, w;
};

// 16-byte read-only load of data that is streamed once (ld.global.nc.L1::no_allocate.L2::256B.v4.u32): the
// non-coherent path is fine because nothing writes the input while the kernel runs; skipping L1 allocation
// keeps L1 for others, and the 256-byte L2 prefetch hint matches a half-warp reading a 256-byte run.
// `ptr` must be 16-byte aligned.
__device__ __forceinline__ U32x4 ld_global_nc_v4(const void* ptr) {
  U32x4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(ptr));
  return v;
}

// 16-byte store (st.global.v4.b32); `ptr` 16-byte aligned.
__device__ __forceinline__ void st_global_v4(void* ptr, const U32x4& v) {
  asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(ptr), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}

// 8-byte store (st.global.v2.b32); `ptr` 8-byte aligned.
__device__ __forceinline__ void st_global_v2(void* ptr, u32 a, u32 b) {
  asm volatile("st.global.v2.b32 [%0], {%1, %2};" ::"l"(ptr), "r"(a), "r"(b) : "memory");
}

// 4-byte fp32 store (st.global.f32).
__device__ __forceinline__ void st_global_f32(float* ptr, float v) {
  asm volatile("st.global.f32 [%0], %1;" ::"l"(ptr), "f"(v) : "memory");
}

// Butterfly shuffle across the full warp (shfl.sync.bfly.b32, all 32 lanes must take part).
__device__ __forceinline__ u32 shfl_xor(u32 v, int lane_mask) {
  u32 r;
  asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=r"(r) : "r"(v), "r"(lane_mask));
  return r;
}

// Lane `src_lane`'s value of `v`, to every lane (shfl.sync.idx.b32, all 32 lanes must take part).
__device__ __forceinline__ float shfl_idx(float v, u32 src_lane) {
  float r;
  asm volatile("shfl.sync.idx.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=f"(r) : "f"(v), "r"(src_lane));
  return r;
}

// One fp32 from shared memory by its shared-window address (ld.shared.f32).
__device__ __forceinline__ float ld_shared_f32(u32 addr) {
  float v;
  asm volatile("ld.shared.f32 %0, [%1];" : "=f"(v) : "r"(addr) : "memory");
  return v;
}

// PDL: wait until the preceding grid in the stream has completed and its writes are visible
// (griddepcontrol.wait). A no-op when the kernel was launched without programmatic stream serialization,
// so kernels call it unconditionally before reading anything a previous kernel may write.
__device__ __forceinline__ void grid_dependency_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }

// PDL: allow the next grid in the stream to start launching (griddepcontrol.launch_dependents). Safe at any
// point: a dependent kernel still waits for this grid's completion in its own grid_dependency_wait().
__device__ __forceinline__ void launch_dependents() { asm volatile("griddepcontrol.launch_dependents;" :::); }

}  // namespace kiln::ptx
