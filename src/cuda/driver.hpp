// The CUDA driver and runtime APIs, loaded lazily (dlopen) on first use so kiln loads and compiles on a
// machine with no GPU or driver. Errors name the call, cuGetErrorName/cuGetErrorString and what was asked.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <string>

namespace kiln::cuda {

// Function pointers into libcuda.so.1, resolved with cuGetProcAddress for the toolkit version kiln was
// built with. get() loads the library and calls cuInit(0) once; it throws Error(kCudaError) saying that a
// CUDA driver (libcuda.so.1) is needed, and for what, when it is not there.
struct DriverApi {
  static const DriverApi& get();
  static bool available() noexcept;  // true when libcuda loads and cuInit succeeds; never throws

#define KILN_DRIVER_FN(name) decltype(&::name) name = nullptr
  KILN_DRIVER_FN(cuInit);
  KILN_DRIVER_FN(cuDriverGetVersion);
  KILN_DRIVER_FN(cuGetErrorName);
  KILN_DRIVER_FN(cuGetErrorString);
  KILN_DRIVER_FN(cuDeviceGetCount);
  KILN_DRIVER_FN(cuDeviceGet);
  KILN_DRIVER_FN(cuDeviceGetName);
  KILN_DRIVER_FN(cuDeviceGetAttribute);
  KILN_DRIVER_FN(cuDeviceTotalMem);
  KILN_DRIVER_FN(cuDevicePrimaryCtxRetain);
  KILN_DRIVER_FN(cuCtxGetCurrent);
  KILN_DRIVER_FN(cuCtxSetCurrent);
  KILN_DRIVER_FN(cuCtxGetDevice);
  KILN_DRIVER_FN(cuLibraryLoadData);
  KILN_DRIVER_FN(cuLibraryUnload);
  KILN_DRIVER_FN(cuLibraryGetKernel);
  KILN_DRIVER_FN(cuKernelGetFunction);
  KILN_DRIVER_FN(cuKernelSetAttribute);
  KILN_DRIVER_FN(cuFuncGetAttribute);
  KILN_DRIVER_FN(cuLaunchKernelEx);
  KILN_DRIVER_FN(cuStreamIsCapturing);
  KILN_DRIVER_FN(cuStreamGetCtx);
  KILN_DRIVER_FN(cuTensorMapEncodeTiled);
  KILN_DRIVER_FN(cuMemAlloc);
  KILN_DRIVER_FN(cuMemFree);
  KILN_DRIVER_FN(cuMemcpyHtoD);
  KILN_DRIVER_FN(cuMemcpyDtoH);
  KILN_DRIVER_FN(cuMemsetD8);
  KILN_DRIVER_FN(cuCtxSynchronize);
#undef KILN_DRIVER_FN
};

// Throws Error(kCudaError) "<call> failed: CUDA_ERROR_X (<string>)<context>" unless result is CUDA_SUCCESS.
void check(CUresult result, const char* call, const std::string& context = {});

#define KILN_CU_CHECK(expr) ::kiln::cuda::check((expr), #expr)

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  int cc_major = 0;
  int cc_minor = 0;
  int sm_count = 0;
  int64_t shared_memory_per_block_optin = 0;
  int64_t l2_bytes = 0;
  int64_t memory_bytes = 0;
};

int device_count();                  // 0 when no driver or no GPU; never throws
DeviceInfo device_info(int ordinal); // cached per ordinal after the first call
std::string driver_version();        // "13.0" ; throws when no driver

// The device of the calling thread's current context; when there is none, retains device 0's primary
// context and makes it current (what the runtime API does on first use).
int current_device();

// Whether `stream` is being captured into a graph (cuStreamIsCapturing). The legacy default stream (null)
// is checked too.
bool stream_is_capturing(CUstream stream);

}  // namespace kiln::cuda
