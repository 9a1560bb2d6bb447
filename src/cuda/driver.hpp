// The CUDA driver and runtime APIs, loaded lazily (dlopen) on first use so kiln loads and compiles on a
// machine with no GPU or driver. Errors name the call, cuGetErrorName/cuGetErrorString and what was asked.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <string>

namespace kiln::cuda {

// Every driver function kiln calls. X(name) for functions every supported driver (CUDA 12.0 or later) has;
// OPT(name) for newer ones that stay null on an older driver (callers test them before use).
// The names are the header's public names: where cuda.h maps one to a versioned symbol (cuMemAlloc ->
// cuMemAlloc_v2), the field takes the versioned name too, so `api.cuMemAlloc(...)` calls the right ABI, and
// the function is resolved by its public name with cuGetProcAddress for the toolkit version kiln was built
// with (capped at the driver's version).
#define KILN_DRIVER_FUNCTIONS(X, OPT)  \
  X(cuInit)                            \
  X(cuDriverGetVersion)                \
  X(cuGetErrorName)                    \
  X(cuGetErrorString)                  \
  X(cuDeviceGetCount)                  \
  X(cuDeviceGet)                       \
  X(cuDeviceGetName)                   \
  X(cuDeviceGetAttribute)              \
  X(cuDeviceTotalMem)                  \
  X(cuDevicePrimaryCtxRetain)          \
  X(cuCtxGetCurrent)                   \
  X(cuCtxSetCurrent)                   \
  X(cuCtxGetDevice)                    \
  X(cuLibraryLoadData)                 \
  X(cuLibraryUnload)                   \
  X(cuLibraryGetKernel)                \
  X(cuKernelGetFunction)               \
  X(cuKernelSetAttribute)              \
  X(cuKernelGetAttribute)              \
  X(cuFuncGetAttribute)                \
  X(cuLaunchKernelEx)                  \
  X(cuStreamIsCapturing)               \
  X(cuStreamGetCtx)                    \
  X(cuStreamCreate)                    \
  X(cuStreamDestroy)                   \
  X(cuStreamSynchronize)               \
  X(cuStreamBeginCapture)              \
  X(cuStreamEndCapture)                \
  X(cuGraphInstantiateWithFlags)       \
  X(cuGraphLaunch)                     \
  X(cuGraphDestroy)                    \
  X(cuGraphExecDestroy)                \
  X(cuTensorMapEncodeTiled)            \
  X(cuMemAlloc)                        \
  X(cuMemFree)                         \
  X(cuMemcpyHtoD)                      \
  X(cuMemcpyDtoH)                      \
  X(cuMemsetD8)                        \
  X(cuCtxSynchronize)                  \
  X(cuEventCreate)                     \
  X(cuEventRecord)                     \
  X(cuEventSynchronize)                \
  X(cuEventElapsedTime)                \
  X(cuEventDestroy)                    \
  OPT(cuStreamGetDevice)

// Function pointers into libcuda.so.1, resolved with cuGetProcAddress for the toolkit version kiln was
// built with. get() loads the library and calls cuInit(0) once (thread-safe); it throws Error(kCudaError)
// saying that a CUDA driver (libcuda.so.1) is needed, and for what, when it is not there, and the cuInit
// error when the driver loads but cannot initialise (no GPU). A failure is remembered: later calls throw the
// same error without trying again.
struct DriverApi {
  static const DriverApi& get();
  static bool available() noexcept;  // true when libcuda loads and cuInit succeeds; never throws

#define KILN_DRIVER_FIELD(name) decltype(&::name) name = nullptr;
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
