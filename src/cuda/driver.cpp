#include "cuda/driver.hpp"

#include <cudaTypedefs.h>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "kiln/error.hpp"
#include "util/dynlib.hpp"

namespace kiln::cuda {
namespace {

// Each field's type must be the ABI it is resolved at (see KILN_DRIVER_FUNCTIONS).
#define KILN_DRIVER_ABI_CHECK(name, abi)                                            \
  static_assert(std::is_same_v<decltype(&::name), PFN_##name##_v##abi>,             \
                #name ": cuda.h's prototype is not the ABI of version " #abi "; use " \
                "the version of the PFN_" #name "_v<N> typedef that matches it");
KILN_DRIVER_FUNCTIONS(KILN_DRIVER_ABI_CHECK, KILN_DRIVER_ABI_CHECK)
#undef KILN_DRIVER_ABI_CHECK

constexpr const char* kDriverPurpose = "a CUDA driver (libcuda.so.1) is needed to load and launch kernels";
constexpr const char* kAheadOfTimeHint =
    "Compiling ahead of time works without one: `kiln compile OP NAME=VALUE ... --arch sm_90a`.";

// The driver as loaded once per process: the table, or the reason it cannot be used.
struct DriverState {
  std::unique_ptr<util::DynamicLibrary> library;
  DriverApi api;
  std::string error;  // empty when the table is usable
};

std::string version_text(int version) {
  return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

std::string describe_with(const DriverApi* api, CUresult result, const char* call, const std::string& context) {
  std::string message = std::string(call) + " failed: ";
  const char* name = nullptr;
  const char* text = nullptr;
  if (api != nullptr) {
    if (api->cuGetErrorName(result, &name) != CUDA_SUCCESS) name = nullptr;
    if (api->cuGetErrorString(result, &text) != CUDA_SUCCESS) text = nullptr;
  }
  if (name != nullptr) {
    message += name;
  } else {
    message += "CUresult " + std::to_string(static_cast<int>(result));
  }
  if (text != nullptr) message += std::string(" (") + text + ")";
  message += context;
  return message;
}

void load_into(DriverState& state) {
  try {
    state.library = std::make_unique<util::DynamicLibrary>(std::vector<std::string>{"libcuda.so.1"},
                                                           kDriverPurpose);
  } catch (const Error& e) {
    state.error = std::string(e.what()) + "\n" + kAheadOfTimeHint;
    return;
  }
  // cuGetProcAddress is exported as cuGetProcAddress_v2 since CUDA 12.0 (the header renames it).
  using GetProcAddress = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
  auto get_proc = reinterpret_cast<GetProcAddress>(state.library->find("cuGetProcAddress_v2"));
  auto driver_get_version = reinterpret_cast<decltype(&::cuDriverGetVersion)>(state.library->find("cuDriverGetVersion"));
  if (get_proc == nullptr || driver_get_version == nullptr) {
    state.error = std::string(kDriverPurpose) + ", and the " + state.library->name() +
                  " found has no cuGetProcAddress_v2: it predates CUDA 12.0; install a current NVIDIA driver. " +
                  kAheadOfTimeHint;
    return;
  }
  int version = 0;
  if (driver_get_version(&version) != CUDA_SUCCESS) version = 0;
  std::string missing;
  auto resolve = [&](const char* name, int abi_version, void** slot, bool required) {
    CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    CUresult r = get_proc(name, slot, abi_version, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &status);
    if (r != CUDA_SUCCESS || status != CU_GET_PROC_ADDRESS_SUCCESS) {
      *slot = nullptr;
      if (required) missing += std::string(missing.empty() ? "" : ", ") + name;
    }
  };
#define KILN_RESOLVE_REQUIRED(name, abi) resolve(#name, abi, reinterpret_cast<void**>(&state.api.name), true);
#define KILN_RESOLVE_OPTIONAL(name, abi) resolve(#name, abi, reinterpret_cast<void**>(&state.api.name), false);
  KILN_DRIVER_FUNCTIONS(KILN_RESOLVE_REQUIRED, KILN_RESOLVE_OPTIONAL)
#undef KILN_RESOLVE_REQUIRED
#undef KILN_RESOLVE_OPTIONAL
  state.api.version = version;
  if (!missing.empty()) {
    state.error = "the CUDA driver " + version_text(version) + " (" + state.library->name() +
                  ") lacks functions kiln needs to load and launch kernels (" + missing +
                  "); kiln was built with CUDA " + version_text(CUDA_VERSION) +
                  " and needs a driver for CUDA 12.0 or later. " + kAheadOfTimeHint;
    return;
  }
  CUresult init = state.api.cuInit(0);
  if (init != CUDA_SUCCESS) {
    state.error = describe_with(&state.api, init, "cuInit(0)",
                                "; the CUDA driver " + version_text(version) + " (" + state.library->name() +
                                    ") loaded but cannot initialise, so kernels cannot be loaded or launched "
                                    "(is a GPU visible? check nvidia-smi and CUDA_VISIBLE_DEVICES). ") +
                  kAheadOfTimeHint;
  }
}

const DriverState& state() {
  // A function-local static: initialised once, thread-safely, on first use.
  static const DriverState s = [] {
    DriverState st;
    try {
      load_into(st);
    } catch (const std::exception& e) {
      st.error = std::string(kDriverPurpose) + ": " + e.what();
    }
    return st;
  }();
  return s;
}

std::string ordinal_range_error(int ordinal, int count) {
  return "device ordinal " + std::to_string(ordinal) + " is out of range: expected 0 <= ordinal < " +
         std::to_string(count) + " (" + std::to_string(count) + " CUDA device(s) visible)";
}

void check_ordinal(int ordinal) {
  const int count = device_count();
  if (ordinal < 0 || ordinal >= count) throw Error(ErrorKind::kValueError, ordinal_range_error(ordinal, count));
}

}  // namespace

const DriverApi& DriverApi::get() {
  const DriverState& s = state();
  if (!s.error.empty()) throw Error(ErrorKind::kCudaError, s.error);
  return s.api;
}

bool DriverApi::available() noexcept {
  try {
    return state().error.empty();
  } catch (...) {
    return false;
  }
}

std::string describe_failure(CUresult result, const char* call, const std::string& context) {
  const DriverState* s = nullptr;
  try {
    s = &state();
  } catch (...) {
    s = nullptr;
  }
  // The naming functions are usable once resolved, even when cuInit failed.
  const DriverApi* api = (s != nullptr && s->api.cuGetErrorName != nullptr && s->api.cuGetErrorString != nullptr)
                             ? &s->api
                             : nullptr;
  return describe_with(api, result, call, context);
}

void check(CUresult result, const char* call, const std::string& context) {
  if (result == CUDA_SUCCESS) return;
  throw Error(ErrorKind::kCudaError, describe_failure(result, call, context));
}

int device_count() {
  try {
    if (!DriverApi::available()) return 0;
    int count = 0;
    if (DriverApi::get().cuDeviceGetCount(&count) != CUDA_SUCCESS) return 0;
    return count;
  } catch (...) {
    return 0;
  }
}

DeviceInfo device_info(int ordinal) {
  static std::mutex mutex;
  static std::map<int, DeviceInfo> cache;
  const DriverApi& api = DriverApi::get();
  check_ordinal(ordinal);
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = cache.find(ordinal);
    if (it != cache.end()) return it->second;
  }
  const std::string context = " (querying device " + std::to_string(ordinal) + ")";
  CUdevice device = 0;
  check(api.cuDeviceGet(&device, ordinal), "cuDeviceGet", context);
  DeviceInfo info;
  info.ordinal = ordinal;
  char name[256] = {};
  check(api.cuDeviceGetName(name, sizeof(name) - 1, device), "cuDeviceGetName", context);
  info.name = name;
  auto attribute = [&](CUdevice_attribute which, const char* what) {
    int value = 0;
    check(api.cuDeviceGetAttribute(&value, which, device), "cuDeviceGetAttribute",
          " (" + std::string(what) + " of device " + std::to_string(ordinal) + ")");
    return value;
  };
  info.cc_major = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "compute capability major");
  info.cc_minor = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "compute capability minor");
  info.sm_count = attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "multiprocessor count");
  info.shared_memory_per_block_optin =
      attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, "opt-in shared memory per block");
  info.l2_bytes = attribute(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, "L2 cache size");
  size_t bytes = 0;
  check(api.cuDeviceTotalMem(&bytes, device), "cuDeviceTotalMem", context);
  info.memory_bytes = static_cast<int64_t>(bytes);
  std::lock_guard<std::mutex> lock(mutex);
  return cache.emplace(ordinal, std::move(info)).first->second;
}

std::string driver_version() { return version_text(DriverApi::get().version); }

CUcontext primary_context(int ordinal) {
  static std::mutex mutex;
  static std::map<int, CUcontext> contexts;
  const DriverApi& api = DriverApi::get();
  std::lock_guard<std::mutex> lock(mutex);
  auto it = contexts.find(ordinal);
  if (it != contexts.end()) return it->second;
  check_ordinal(ordinal);
  const std::string context = " (device " + std::to_string(ordinal) + ")";
  CUdevice device = 0;
  check(api.cuDeviceGet(&device, ordinal), "cuDeviceGet", context);
  CUcontext primary = nullptr;
  check(api.cuDevicePrimaryCtxRetain(&primary, device), "cuDevicePrimaryCtxRetain", context);
  contexts.emplace(ordinal, primary);
  return primary;
}

int current_device() {
  const DriverApi& api = DriverApi::get();
  CUcontext current = nullptr;
  check(api.cuCtxGetCurrent(&current), "cuCtxGetCurrent");
  if (current == nullptr) {
    check(api.cuCtxSetCurrent(primary_context(0)), "cuCtxSetCurrent", " (making device 0's primary context current)");
  }
  CUdevice device = 0;
  check(api.cuCtxGetDevice(&device), "cuCtxGetDevice");
  return static_cast<int>(device);
}

bool stream_is_capturing(CUstream stream) {
  const DriverApi& api = DriverApi::get();
  if (stream == nullptr) {
    // The legacy stream belongs to the current context; with none there is nothing to capture into.
    CUcontext current = nullptr;
    if (api.cuCtxGetCurrent(&current) != CUDA_SUCCESS || current == nullptr) return false;
  }
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  CUresult r = api.cuStreamIsCapturing(stream, &status);
  // Asking about the legacy stream while another blocking stream captures is itself "implicit capture".
  if (r == CUDA_ERROR_STREAM_CAPTURE_IMPLICIT) return true;
  check(r, "cuStreamIsCapturing");
  return status != CU_STREAM_CAPTURE_STATUS_NONE;
}

}  // namespace kiln::cuda
