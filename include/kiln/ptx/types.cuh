// Fixed-width integer types for device code. Kiln's JIT sources include no toolkit headers (NVRTC has no
// standard library, and every header parsed costs compile time), so these come from builtin types.
#pragma once

// For the few functions both the host and the device call with run-time values (constexpr alone is host-only to
// NVCC and NVRTC without --expt-relaxed-constexpr).
#if defined(__CUDACC__)
#define KILN_HOST_DEVICE __host__ __device__
#else
#define KILN_HOST_DEVICE
#endif

namespace kiln {
using i8 = signed char;
using u8 = unsigned char;
using i16 = short;
using u16 = unsigned short;
using i32 = int;
using u32 = unsigned int;
using i64 = long long;
using u64 = unsigned long long;
static_assert(sizeof(u64) == 8 && sizeof(u32) == 4 && sizeof(u16) == 2, "unexpected builtin type sizes");
}  // namespace kiln
