// Room for one CUtensorMap in a kernel's parameter struct, shared by the GEMM kernels' params (plain C++ on the
// host, device code in the JIT sources, which include no toolkit header).
#pragma once

namespace kiln {

// 128 bytes, 64-byte aligned: the host memcpy's an encoded map into it. Inside a `__grid_constant__` parameter
// struct its address is the parameter-space address TMA instructions want.
struct alignas(64) TmaDescriptor {
  unsigned long long opaque[16];
};

}  // namespace kiln
