// The CUDA driver and runtime APIs, loaded lazily (dlopen) on first use so kiln loads and compiles on a
// machine with no GPU or driver. Errors name the call, cuGetErrorName/cuGetErrorString and what was asked.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <string>

namespace kiln::cuda {

// Every driver function kiln calls, with the CUDA version of the ABI kiln calls it with: X(name, version)
// for functions every supported driver (CUDA 12.0 or later) has; OPT(name, version) for newer ones that
// stay null on an older driver (callers test them before use).
//
// Each is resolved with cuGetProcAddress by its public name AT THAT VERSION, never at the toolkit's:
// asking for "cuCtxGetDevice" at 13000 returns cuCtxGetDevice_v2(CUdevice*, CUcontext), a different
// signature from the cuCtxGetDevice(CUdevice*) that cuda.h declares (likewise cuCtxSynchronize,
// cuStreamGetCtx), and calling it through the wrong type crashes. driver.cpp checks at compile time that
// each field's type (the prototype cuda.h declares, after its own renames such as cuMemAlloc ->
// cuMemAlloc_v2) is exactly cudaTypedefs.h's PFN_<name>_v<version>; when adding a function, take the
// version from the PFN_<name>_v<N> typedef that matches cuda.h's prototype.
#define KILN_DRIVER_FUNCTIONS(X, OPT)         \
  X(cuInit, 2000)                             \
  X(cuDriverGetVersion, 2020)                 \
  X(cuGetErrorName, 6000)                     \
  X(cuGetErrorString, 6000)                   \
  X(cuDeviceGetCount, 2000)                   \
  X(cuDeviceGet, 2000)                        \
  X(cuDeviceGetName, 2000)                    \
  X(cuDeviceGetAttribute, 2000)               \
  X(cuDeviceTotalMem, 3020)                   \
  X(cuDevicePrimaryCtxRetain, 7000)           \
  X(cuCtxGetCurrent, 4000)                    \
  X(cuCtxSetCurrent, 4000)                    \
  X(cuCtxGetDevice, 2000)                     \
  X(cuLibraryLoadData, 12000)                 \
  X(cuLibraryUnload, 12000)                   \
  X(cuLibraryGetKernel, 12000)                \
  X(cuKernelGetFunction, 12000)               \
  X(cuKernelSetAttribute, 12000)              \
  X(cuKernelGetAttribute, 12000)              \
  X(cuFuncGetAttribute, 2020)                 \
  X(cuLaunchKernelEx, 11060)                  \
  X(cuStreamIsCapturing, 10000)               \
  X(cuThreadExchangeStreamCaptureMode, 10010) \
  X(cuStreamGetCtx, 9020)                     \
  X(cuStreamCreate, 2000)                     \
  X(cuStreamDestroy, 4000)                    \
  X(cuStreamSynchronize, 2000)                \
  X(cuStreamBeginCapture, 10010)              \
  X(cuStreamEndCapture, 10000)                \
  X(cuGraphInstantiateWithFlags, 11040)       \
  X(cuGraphLaunch, 10000)                     \
  X(cuGraphDestroy, 10000)                    \
  X(cuGraphExecDestroy, 10000)                \
  X(cuTensorMapEncodeTiled, 12000)            \
  X(cuMemAlloc, 3020)                         \
  X(cuMemFree, 3020)                          \
  X(cuMemcpyHtoD, 3020)                       \
  X(cuMemcpyDtoH, 3020)                       \
  X(cuMemsetD8, 3020)                         \
  X(cuMemsetD8Async, 3020)                    \
  X(cuCtxSynchronize, 2000)                   \
  X(cuEventCreate, 2000)                      \
  X(cuEventRecord, 2000)                      \
  X(cuEventSynchronize, 2000)                 \
  X(cuEventElapsedTime, 2000)                 \
  X(cuEventDestroy, 4000)                     \
  X(cuMemcpyDtoDAsync, 3020)                  \
  X(cuMemcpy2DAsync, 3020)                    \
  X(cuMemsetD2D32Async, 3020)                 \
  OPT(cuStreamGetDevice, 12080)

// Function pointers into libcuda.so.1, resolved with cuGetProcAddress (see above). get() loads the library
// and calls cuInit(0) once (thread-safe); it throws Error(kCudaError) saying that a CUDA driver (libcuda.so.1) is needed, and for what, when it is not there, and the cuInit
// error when the driver loads but cannot initialise (no GPU). A failure is remembered: later calls throw the
// same error without trying again.
struct DriverApi {
  static const DriverApi& get();
  static bool available() noexcept;  // true when libcuda loads and cuInit succeeds; never throws

#define KILN_DRIVER_FIELD(name, version) decltype(&::name) name = nullptr;
  KILN_DRIVER_FUNCTIONS(KILN_DRIVER_FIELD, KILN_DRIVER_FIELD)
#undef KILN_DRIVER_FIELD

  int version = 0;  // cuDriverGetVersion: 13000 for CUDA 13.0
};

// Throws Error(kCudaError) "<call> failed: CUDA_ERROR_X (<string>)<context>" unless result is CUDA_SUCCESS.
// Without a driver to name the code, the number is given instead ("CUresult 999").
void check(CUresult result, const char* call, const std::string& context = {});

// The message check() throws, without throwing it.
std::string describe_failure(CUresult result, const char* call, const std::string& context = {});

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
// Cached per ordinal after the first call. Throws Error(kValueError) for an ordinal outside
// [0, device_count()), Error(kCudaError) when there is no driver.
DeviceInfo device_info(int ordinal);
std::string driver_version();        // "13.0" ; throws when no driver

// The device of the calling thread's current context; when there is none, retains device 0's primary
// context and makes it current (what the runtime API does on first use).
int current_device();

// The primary context of device `ordinal`, retained once per process and never released (kiln's kernels
// and the caller's runtime-API work share it). Thread-safe; does not change the current context. Throws
// Error(kValueError) for an ordinal outside [0, device_count()), Error(kCudaError) when the driver fails.
CUcontext primary_context(int ordinal);

// Whether `stream` is being captured into a graph (cuStreamIsCapturing). The legacy default stream (null)
// is checked too: it counts as capturing while a blocking stream of the current context is being captured.
bool stream_is_capturing(CUstream stream);

}  // namespace kiln::cuda
