// dlopen wrapper. kiln loads libcuda, libcudart and NVRTC only when first needed, so the library loads,
// and compiles with NVCC, on a machine with no GPU or driver.
#pragma once

#include <string>
#include <vector>

namespace kiln::util {

class DynamicLibrary {
 public:
  // Tries each name in order (dlopen with RTLD_NOW | RTLD_LOCAL). Throws Error(kCudaError) listing every
  // name tried and dlerror() for each, prefixed with `purpose` ("the CUDA driver is needed to launch...").
  DynamicLibrary(const std::vector<std::string>& names, const std::string& purpose);
  ~DynamicLibrary();
  DynamicLibrary(const DynamicLibrary&) = delete;
  DynamicLibrary& operator=(const DynamicLibrary&) = delete;

  // The symbol's address, or nullptr when absent.
  void* find(const char* symbol) const noexcept;
  // The symbol's address; throws Error(kCudaError) naming the symbol and the library when absent.
  void* require(const char* symbol) const;
  const std::string& name() const { return name_; }

 private:
  void* handle_ = nullptr;
  std::string name_;
};

}  // namespace kiln::util
