// The CUDA runtime API (libcudart), loaded lazily on first use: kiln launches through it instead of the
// driver API when DG_JIT_USE_RUNTIME_API=1, sharing the caller's runtime state (current device, primary
// contexts). Nothing here links against libcudart; the header gives only the types and signatures.
#pragma once

#include <cuda_runtime_api.h>

#include <string>
#include <vector>

namespace kiln::cuda {

// X(name): required; OPT(name): newer functions that stay null on an older runtime.
#define KILN_RUNTIME_FUNCTIONS(X, OPT)   \
  X(cudaGetErrorName)                    \
  X(cudaGetErrorString)                  \
  X(cudaGetDevice)                       \
  X(cudaSetDevice)                       \
  X(cudaGetDeviceCount)                  \
  X(cudaRuntimeGetVersion)               \
  X(cudaLibraryLoadData)                 \
  X(cudaLibraryUnload)                   \
  X(cudaLibraryGetKernel)                \
  X(cudaKernelSetAttributeForDevice)     \
  X(cudaFuncGetAttributes)               \
  X(cudaLaunchKernelExC)                 \
  X(cudaStreamIsCapturing)               \
  X(cudaThreadExchangeStreamCaptureMode)

// Function pointers into libcudart (libcudart.so.13, then .so.12, on the loader path, then under
// $CUDA_HOME/lib64 and the toolkit kiln was built with). get() loads it once (thread-safe) and throws
// Error(kCudaError) naming every file tried and why it failed, and saying that DG_JIT_USE_RUNTIME_API=1 is
// what asked for it; the failure is remembered.
struct RuntimeApi {
  static const RuntimeApi& get();
  static bool available() noexcept;  // never throws

  // Loads from an explicit list of candidates (tests; get() uses default_candidates()). Throws as get().
  static RuntimeApi load(const std::vector<std::string>& candidates);
  // The files get() tries, in order.
  static std::vector<std::string> default_candidates();

#define KILN_RUNTIME_FIELD(name) decltype(&::name) name = nullptr;
  KILN_RUNTIME_FUNCTIONS(KILN_RUNTIME_FIELD, KILN_RUNTIME_FIELD)
#undef KILN_RUNTIME_FIELD

  std::string library_name;  // the file that was loaded
  int version = 0;           // cudaRuntimeGetVersion: 13000 for CUDA 13.0
};

// Throws Error(kCudaError) "<call> failed: cudaErrorX (<string>)<context>" unless result is cudaSuccess.
void check_runtime(cudaError_t result, const char* call, const std::string& context = {});
std::string describe_runtime_failure(cudaError_t result, const char* call, const std::string& context = {});

}  // namespace kiln::cuda
