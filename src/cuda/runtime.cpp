#include "cuda/runtime.hpp"

#include <filesystem>
#include <memory>

#include "kiln/config.hpp"
#include "kiln/error.hpp"
#include "util/dynlib.hpp"

namespace kiln::cuda {
namespace {

constexpr const char* kRuntimePurpose =
    "the CUDA runtime library (libcudart) is needed to load and launch kernels through the runtime API, "
    "which DG_JIT_USE_RUNTIME_API=1 selects (unset it to use the driver API)";

struct RuntimeState {
  RuntimeApi api;
  std::string error;  // empty when usable
};

const RuntimeState& state() {
  static const RuntimeState s = [] {
    RuntimeState st;
    try {
      st.api = RuntimeApi::load(RuntimeApi::default_candidates());
    } catch (const std::exception& e) {
      st.error = e.what();
    }
    return st;
  }();
  return s;
}

void add_toolkit(std::vector<std::string>& out, const std::filesystem::path& home) {
  if (home.empty()) return;
  for (const char* dir : {"lib64", "lib"}) {
    for (const char* file : {"libcudart.so.13", "libcudart.so.12"}) {
      std::string candidate = (home / dir / file).string();
      bool seen = false;
      for (const auto& c : out) seen = seen || c == candidate;
      if (!seen) out.push_back(std::move(candidate));
    }
  }
}

}  // namespace

std::vector<std::string> RuntimeApi::default_candidates() {
  std::vector<std::string> candidates = {"libcudart.so.13", "libcudart.so.12"};
  try {
    add_toolkit(candidates, kiln::config().cuda_home);
  } catch (const Error&) {
    // A bad configuration is reported where it is read; here it only costs one place to look.
  }
#ifdef KILN_DEFAULT_CUDA_HOME
  add_toolkit(candidates, KILN_DEFAULT_CUDA_HOME);
#endif
  return candidates;
}

RuntimeApi RuntimeApi::load(const std::vector<std::string>& candidates) {
  // Not closed on purpose (DynamicLibrary never dlcloses): the runtime keeps process-wide state.
  util::DynamicLibrary library(candidates, kRuntimePurpose);
  RuntimeApi api;
  api.library_name = library.name();
  std::string missing;
  auto resolve = [&](const char* name, void** slot, bool required) {
    *slot = library.find(name);
    if (*slot == nullptr && required) missing += std::string(missing.empty() ? "" : ", ") + name;
  };
#define KILN_RESOLVE_REQUIRED(name) resolve(#name, reinterpret_cast<void**>(&api.name), true);
#define KILN_RESOLVE_OPTIONAL(name) resolve(#name, reinterpret_cast<void**>(&api.name), false);
  KILN_RUNTIME_FUNCTIONS(KILN_RESOLVE_REQUIRED, KILN_RESOLVE_OPTIONAL)
#undef KILN_RESOLVE_REQUIRED
#undef KILN_RESOLVE_OPTIONAL
  if (!missing.empty()) {
    throw Error(ErrorKind::kCudaError, std::string(kRuntimePurpose) + "; " + library.name() +
                                           " lacks " + missing + " (a CUDA 12.0 or later runtime is needed)");
  }
  if (api.cudaRuntimeGetVersion(&api.version) != cudaSuccess) api.version = 0;
  return api;
}

const RuntimeApi& RuntimeApi::get() {
  const RuntimeState& s = state();
  if (!s.error.empty()) throw Error(ErrorKind::kCudaError, s.error);
  return s.api;
}

bool RuntimeApi::available() noexcept {
  try {
    return state().error.empty();
  } catch (...) {
    return false;
  }
}

std::string describe_runtime_failure(cudaError_t result, const char* call, const std::string& context) {
  std::string message = std::string(call) + " failed: ";
  const RuntimeState* s = nullptr;
  try {
    s = &state();
  } catch (...) {
    s = nullptr;
  }
  if (s != nullptr && s->error.empty()) {
    message += s->api.cudaGetErrorName(result);
    message += std::string(" (") + s->api.cudaGetErrorString(result) + ")";
  } else {
    message += "cudaError " + std::to_string(static_cast<int>(result));
  }
  return message + context;
}

void check_runtime(cudaError_t result, const char* call, const std::string& context) {
  if (result == cudaSuccess) return;
  throw Error(ErrorKind::kCudaError, describe_runtime_failure(result, call, context));
}

}  // namespace kiln::cuda
