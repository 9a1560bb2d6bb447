// The probes' CUDA runtime and driver checks: print the error with its place and exit (probes are standalone
// programs).
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define CHECK(x)                                                                           \
  do {                                                                                     \
    cudaError_t e_ = (x);                                                                  \
    if (e_ != cudaSuccess) {                                                               \
      std::printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); \
      std::exit(1);                                                                        \
    }                                                                                      \
  } while (0)

#define CU_CHECK(x)                                                             \
  do {                                                                          \
    CUresult r_ = (x);                                                          \
    if (r_ != CUDA_SUCCESS) {                                                   \
      std::printf("CUDA driver error %d at %s:%d\n", r_, __FILE__, __LINE__); \
      std::exit(1);                                                             \
    }                                                                           \
  } while (0)
