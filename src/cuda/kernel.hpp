// A kernel loaded from cubin bytes for one device, through the driver API (default) or the runtime API
// (DG_JIT_USE_RUNTIME_API=1), and its launch: grid, block, cluster, dynamic shared memory and programmatic
// dependent launch. The dynamic-shared-memory attribute is raised once per kernel, not per call.
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "kiln/config.hpp"

namespace kiln::cuda {

struct LaunchConfig {
  uint32_t grid[3] = {1, 1, 1};
  uint32_t block[3] = {1, 1, 1};
  uint32_t cluster[3] = {1, 1, 1};   // {1,1,1}: no cluster attribute
  uint32_t shared_bytes = 0;         // dynamic shared memory
  bool pdl = false;                  // programmatic stream serialization (PDL)
  CUstream stream = nullptr;
};

class LoadedKernel {
 public:
  // Loads `cubin` on `device` and finds `kernel_name` in it. Prints the load time when print_load_time.
  // Throws Error(kCudaError) naming the kernel, the device and the driver's error.
  static std::unique_ptr<LoadedKernel> load(std::span<const uint8_t> cubin, const std::string& kernel_name,
                                            int device, LaunchApi api, bool print_load_time);
  virtual ~LoadedKernel() = default;

  // Launches with one argument: a pointer to the kernel's parameter struct. Thread-safe. Throws
  // Error(kCudaError) on launch failure; the caller has validated everything else. The calling thread's
  // current context must be on device(); if it is not, the device's primary context is used for the call.
  virtual void launch(const LaunchConfig& config, void* params) const = 0;

  int device() const { return device_; }
  const std::string& name() const { return name_; }
  LaunchApi api() const { return api_; }

 protected:
  LoadedKernel(std::string name, int device, LaunchApi api) : name_(std::move(name)), device_(device), api_(api) {}
  std::string name_;
  int device_;
  LaunchApi api_;
};

}  // namespace kiln::cuda
