#include "util/dynlib.hpp"

#include <dlfcn.h>

#include "kiln/error.hpp"

namespace kiln::util {

DynamicLibrary::DynamicLibrary(const std::vector<std::string>& names, const std::string& purpose) {
  std::string tried;
  for (const auto& n : names) {
    handle_ = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle_) {
      name_ = n;
      return;
    }
    const char* why = dlerror();
    tried += "\n  " + n + ": " + (why ? why : "not found");
  }
  throw Error(ErrorKind::kCudaError, purpose + "; could not load any of:" + tried);
}

DynamicLibrary::~DynamicLibrary() {
  // Deliberately not dlclose'd: CUDA libraries keep process-wide state and must outlive static destructors.
}

void* DynamicLibrary::find(const char* symbol) const noexcept { return dlsym(handle_, symbol); }

void* DynamicLibrary::require(const char* symbol) const {
  void* p = find(symbol);
  if (!p) throw Error(ErrorKind::kCudaError, std::string("symbol ") + symbol + " not found in " + name_);
  return p;
}

}  // namespace kiln::util
