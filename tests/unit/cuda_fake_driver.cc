// A fake libcuda.so.1 / libcudart.so.13 for tests/unit/cuda_fake_driver_test.cpp: compiled at test time
// into a temporary directory and found through LD_LIBRARY_PATH by a child test process, it lets the host
// tests drive kiln's driver table, loader and launch path (contexts, streams, attributes) with no GPU.
// It records each call in a log the test reads through fake_cuda_log(). Deliberately free of CUDA
// headers: the layouts it assumes are checked against cuda.h by static_asserts in the test.
//
// Devices: FAKE_CUDA_DEVICES (default 2). Contexts: primary context of device d = 0x1000+d, a second
// (non-primary) context on device d = 0x4000+d. Streams: 0x2000+d lives in device d's primary context,
// 0x3000+d in its second context, 0x5000+d in the primary context and is being captured.
// Behaviour switches: FAKE_CUDA_DRIVER_VERSION (default 13000), FAKE_CUDA_INIT (cuInit's result),
// FAKE_CUDA_MISSING (comma-separated functions cuGetProcAddress does not find), FAKE_CUDA_IMPLICIT (the
// legacy stream reports implicit capture).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

std::mutex g_mutex;
std::string g_log;
std::string g_log_copy;
thread_local void* g_current = nullptr;
thread_local int g_rt_device = 0;
thread_local int g_capture_mode = 0;  // CU_STREAM_CAPTURE_MODE_GLOBAL
std::map<std::string, int> g_requested_versions;  // what cuGetProcAddress was asked, per name
unsigned long long g_requested_flags = ~0ull;

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

void log_line(const std::string& line) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_log += line;
  g_log += '\n';
}

std::string hex(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%#llx", static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(p)));
  return buf;
}

int devices() { return env_int("FAKE_CUDA_DEVICES", 2); }
void* primary_of(int d) { return reinterpret_cast<void*>(static_cast<uintptr_t>(0x1000 + d)); }
int device_of_context(void* c) {
  uintptr_t v = reinterpret_cast<uintptr_t>(c);
  if (v >= 0x1000 && v < 0x1100) return static_cast<int>(v - 0x1000);
  if (v >= 0x4000 && v < 0x4100) return static_cast<int>(v - 0x4000);
  return -1;
}
std::string context_name(void* c) {
  if (c == nullptr) return "none";
  uintptr_t v = reinterpret_cast<uintptr_t>(c);
  return (v >= 0x4000 ? "second" : "primary") + std::to_string(device_of_context(c));
}
void* context_of_stream(void* s) {
  uintptr_t v = reinterpret_cast<uintptr_t>(s);
  if (v >= 0x2000 && v < 0x2100) return primary_of(static_cast<int>(v - 0x2000));
  if (v >= 0x3000 && v < 0x3100) return reinterpret_cast<void*>(0x4000 + (v - 0x3000));
  if (v >= 0x5000 && v < 0x5100) return primary_of(static_cast<int>(v - 0x5000));
  return nullptr;
}

// The layouts of CUlaunchConfig / cudaLaunchConfig_t and of a launch attribute (x86-64).
struct Attribute {
  int id;
  int pad;
  unsigned value[16];
};
struct DriverLaunchConfig {
  unsigned grid[3];
  unsigned block[3];
  unsigned shared;
  void* stream;
  Attribute* attrs;
  unsigned num_attrs;
};
struct RuntimeLaunchConfig {
  unsigned grid[3];
  unsigned block[3];
  size_t shared;
  void* stream;
  Attribute* attrs;
  unsigned num_attrs;
};

std::string describe_launch(const unsigned* grid, const unsigned* block, size_t shared, void* stream,
                            const Attribute* attrs, unsigned n, void** params) {
  std::string s = "grid=" + std::to_string(grid[0]) + "," + std::to_string(grid[1]) + "," + std::to_string(grid[2]) +
                  " block=" + std::to_string(block[0]) + "," + std::to_string(block[1]) + "," +
                  std::to_string(block[2]) + " smem=" + std::to_string(shared) + " stream=" + hex(stream) +
                  " attrs=";
  for (unsigned i = 0; i < n; ++i) {
    s += "[" + std::to_string(attrs[i].id) + ":";
    if (attrs[i].id == 4) {
      s += std::to_string(attrs[i].value[0]) + "," + std::to_string(attrs[i].value[1]) + "," +
           std::to_string(attrs[i].value[2]);
    } else {
      s += std::to_string(attrs[i].value[0]);
    }
    s += "]";
  }
  s += " param=" + hex(params ? params[0] : nullptr);
  return s;
}

const char* error_name(int r) {
  switch (r) {
    case 0: return "CUDA_SUCCESS";
    case 1: return "CUDA_ERROR_INVALID_VALUE";
    case 100: return "CUDA_ERROR_NO_DEVICE";
    case 101: return "CUDA_ERROR_INVALID_DEVICE";
    case 200: return "CUDA_ERROR_INVALID_IMAGE";
    case 201: return "CUDA_ERROR_INVALID_CONTEXT";
    case 500: return "CUDA_ERROR_NOT_FOUND";
    case 801: return "CUDA_ERROR_NOT_SUPPORTED";
    default: return nullptr;
  }
}
const char* error_string(int r) {
  switch (r) {
    case 0: return "no error";
    case 1: return "invalid argument";
    case 100: return "no CUDA-capable device is detected";
    case 101: return "invalid device ordinal";
    case 200: return "device kernel image is invalid";
    case 201: return "invalid device context";
    case 500: return "named symbol not found";
    case 801: return "operation not supported";
    default: return nullptr;
  }
}

}  // namespace

FAKE_EXPORT const char* fake_cuda_log() {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_log_copy = g_log;
  return g_log_copy.c_str();
}
FAKE_EXPORT void fake_cuda_clear() {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_log.clear();
}
FAKE_EXPORT int fake_cuda_requested_version(const char* name) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_requested_versions.find(name);
  return it == g_requested_versions.end() ? -1 : it->second;
}
FAKE_EXPORT unsigned long long fake_cuda_requested_flags() { return g_requested_flags; }
FAKE_EXPORT void fake_cuda_set_current(void* c) { g_current = c; }
FAKE_EXPORT void* fake_cuda_get_current() { return g_current; }
FAKE_EXPORT void fake_cuda_set_runtime_device(int d) { g_rt_device = d; }

// ----- driver -----
FAKE_EXPORT int cuInit(unsigned) { return env_int("FAKE_CUDA_INIT", 0); }
FAKE_EXPORT int cuDriverGetVersion(int* v) {
  *v = env_int("FAKE_CUDA_DRIVER_VERSION", 13000);
  return 0;
}
FAKE_EXPORT int cuGetErrorName(int r, const char** s) {
  *s = error_name(r);
  return *s ? 0 : 1;
}
FAKE_EXPORT int cuGetErrorString(int r, const char** s) {
  *s = error_string(r);
  return *s ? 0 : 1;
}
FAKE_EXPORT int cuDeviceGetCount(int* n) {
  *n = devices();
  return 0;
}
FAKE_EXPORT int cuDeviceGet(int* d, int ordinal) {
  if (ordinal < 0 || ordinal >= devices()) return 101;
  *d = ordinal;
  return 0;
}
FAKE_EXPORT int cuDeviceGetName(char* name, int len, int d) {
  std::snprintf(name, static_cast<size_t>(len), "Fake H200 #%d", d);
  return 0;
}
FAKE_EXPORT int cuDeviceGetAttribute(int* v, int attribute, int) {
  switch (attribute) {
    case 75: *v = 9; break;
    case 76: *v = 0; break;
    case 16: *v = 132; break;
    case 97: *v = 232448; break;
    case 38: *v = 52428800; break;
    default: *v = 0;
  }
  return 0;
}
FAKE_EXPORT int cuDeviceTotalMem(size_t* bytes, int) {
  *bytes = size_t{141} << 30;
  return 0;
}
FAKE_EXPORT int cuDevicePrimaryCtxRetain(void** c, int d) {
  log_line("retain " + std::to_string(d));
  *c = primary_of(d);
  return 0;
}
FAKE_EXPORT int cuCtxGetCurrent(void** c) {
  *c = g_current;
  return 0;
}
FAKE_EXPORT int cuCtxSetCurrent(void* c) {
  log_line("set_current " + context_name(c));
  g_current = c;
  return 0;
}
FAKE_EXPORT int cuCtxGetDevice(int* d) {
  if (!g_current) return 201;
  *d = device_of_context(g_current);
  return 0;
}
FAKE_EXPORT int cuLibraryLoadData(void** library, const void* code, void*, void*, unsigned, void*, void*, unsigned) {
  if (std::memcmp(code, "BAD", 3) == 0) return 200;
  log_line("library_load");
  *library = reinterpret_cast<void*>(0x7000);
  return 0;
}
FAKE_EXPORT int cuLibraryUnload(void*) {
  log_line("library_unload");
  return 0;
}
FAKE_EXPORT int cuLibraryGetKernel(void** kernel, void*, const char* name) {
  if (std::strcmp(name, "missing") == 0) return 500;
  log_line(std::string("get_kernel ") + name);
  *kernel = reinterpret_cast<void*>(0x8000);
  return 0;
}
FAKE_EXPORT int cuKernelGetFunction(void** f, void*) {
  if (!g_current) return 201;
  log_line("get_function in " + context_name(g_current));
  *f = reinterpret_cast<void*>(0x9000);
  return 0;
}
FAKE_EXPORT int cuKernelSetAttribute(int attribute, int value, void*, int d) {
  log_line("set_attribute " + std::to_string(attribute) + "=" + std::to_string(value) + " device " + std::to_string(d));
  return value > 232448 ? 1 : 0;
}
FAKE_EXPORT int cuLaunchKernelEx(const DriverLaunchConfig* c, void*, void** params, void**) {
  void* context = c->stream ? context_of_stream(c->stream) : g_current;
  if (context == nullptr) return 201;
  if (c->grid[0] == 0) return 1;
  log_line("launch in " + context_name(context) + " " +
           describe_launch(c->grid, c->block, c->shared, c->stream, c->attrs, c->num_attrs, params));
  return 0;
}
FAKE_EXPORT int cuStreamIsCapturing(void* s, int* status) {
  if (s == nullptr && std::getenv("FAKE_CUDA_IMPLICIT")) return 906;
  uintptr_t v = reinterpret_cast<uintptr_t>(s);
  *status = (v >= 0x5000 && v < 0x5100) ? 1 : 0;
  return 0;
}
FAKE_EXPORT int cuStreamGetCtx(void* s, void** c) {
  *c = context_of_stream(s);
  return *c ? 0 : 1;
}
FAKE_EXPORT int cuStreamGetDevice(void* s, int* d) {
  log_line("stream_get_device " + hex(s));
  void* c = context_of_stream(s);
  if (!c) return 1;
  *d = device_of_context(c);
  return 0;
}
FAKE_EXPORT int cuThreadExchangeStreamCaptureMode(int* mode) {
  log_line("capture_mode " + std::to_string(*mode));
  int old = g_capture_mode;
  g_capture_mode = *mode;
  *mode = old;
  return 0;
}
FAKE_EXPORT int fake_not_used() { return 801; }

// ----- cuGetProcAddress -----
namespace {
struct Entry {
  const char* name;
  void* fn;
};
#define FAKE_ENTRY(n) {#n, reinterpret_cast<void*>(&n)}
#define FAKE_UNUSED(n) {#n, reinterpret_cast<void*>(&fake_not_used)}
const Entry kEntries[] = {
    FAKE_ENTRY(cuInit), FAKE_ENTRY(cuDriverGetVersion), FAKE_ENTRY(cuGetErrorName), FAKE_ENTRY(cuGetErrorString),
    FAKE_ENTRY(cuDeviceGetCount), FAKE_ENTRY(cuDeviceGet), FAKE_ENTRY(cuDeviceGetName),
    FAKE_ENTRY(cuDeviceGetAttribute), FAKE_ENTRY(cuDeviceTotalMem), FAKE_ENTRY(cuDevicePrimaryCtxRetain),
    FAKE_ENTRY(cuCtxGetCurrent), FAKE_ENTRY(cuCtxSetCurrent), FAKE_ENTRY(cuCtxGetDevice),
    FAKE_ENTRY(cuLibraryLoadData), FAKE_ENTRY(cuLibraryUnload), FAKE_ENTRY(cuLibraryGetKernel),
    FAKE_ENTRY(cuKernelGetFunction), FAKE_ENTRY(cuKernelSetAttribute), FAKE_ENTRY(cuLaunchKernelEx),
    FAKE_ENTRY(cuStreamIsCapturing), FAKE_ENTRY(cuStreamGetCtx), FAKE_ENTRY(cuStreamGetDevice),
    FAKE_ENTRY(cuThreadExchangeStreamCaptureMode),
    FAKE_UNUSED(cuKernelGetAttribute), FAKE_UNUSED(cuFuncGetAttribute), FAKE_UNUSED(cuStreamCreate),
    FAKE_UNUSED(cuStreamDestroy), FAKE_UNUSED(cuStreamSynchronize), FAKE_UNUSED(cuStreamBeginCapture),
    FAKE_UNUSED(cuStreamEndCapture), FAKE_UNUSED(cuGraphInstantiateWithFlags), FAKE_UNUSED(cuGraphLaunch),
    FAKE_UNUSED(cuGraphDestroy), FAKE_UNUSED(cuGraphExecDestroy), FAKE_UNUSED(cuTensorMapEncodeTiled),
    FAKE_UNUSED(cuMemAlloc), FAKE_UNUSED(cuMemFree), FAKE_UNUSED(cuMemcpyHtoD), FAKE_UNUSED(cuMemcpyDtoH),
    FAKE_UNUSED(cuMemsetD8), FAKE_UNUSED(cuCtxSynchronize),
};

bool is_missing(const char* name) {
  const char* list = std::getenv("FAKE_CUDA_MISSING");
  if (!list) return false;
  std::string all = std::string(",") + list + ",";
  return all.find(std::string(",") + name + ",") != std::string::npos;
}
}  // namespace

FAKE_EXPORT int cuGetProcAddress_v2(const char* name, void** pfn, int version, unsigned long long flags, int* status) {
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_requested_versions[name] = version;
    g_requested_flags = flags;
  }
  *pfn = nullptr;
  if (version > env_int("FAKE_CUDA_DRIVER_VERSION", 13000)) {  // newer than this driver
    if (status) *status = 2;  // CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
    return 0;
  }
  if (!is_missing(name)) {
    for (const Entry& e : kEntries) {
      if (std::strcmp(e.name, name) == 0) {
        *pfn = e.fn;
        if (status) *status = 0;
        return 0;
      }
    }
  }
  // Any other public name (no versioned suffix such as _v2: callers must ask by public name) is a stub
  // that reports "not supported", so functions added to kiln's table later resolve here too.
  if (!is_missing(name) && std::strchr(name, '_') == nullptr && std::strncmp(name, "cu", 2) == 0) {
    *pfn = reinterpret_cast<void*>(&fake_not_used);
    if (status) *status = 0;
    return 0;
  }
  if (status) *status = 1;  // CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND
  return 500;
}

// ----- runtime -----
FAKE_EXPORT const char* cudaGetErrorName(int e) {
  return e == 1 ? "cudaErrorInvalidValue" : e == 101 ? "cudaErrorInvalidDevice" : "cudaErrorUnknown";
}
FAKE_EXPORT const char* cudaGetErrorString(int e) {
  return e == 1 ? "invalid argument" : e == 101 ? "invalid device ordinal" : "unknown error";
}
FAKE_EXPORT int cudaGetDevice(int* d) {
  *d = g_rt_device;
  return 0;
}
FAKE_EXPORT int cudaSetDevice(int d) {
  if (d < 0 || d >= devices()) return 101;
  log_line("rt_set_device " + std::to_string(d));
  g_rt_device = d;
  return 0;
}
FAKE_EXPORT int cudaGetDeviceCount(int* n) {
  *n = devices();
  return 0;
}
FAKE_EXPORT int cudaRuntimeGetVersion(int* v) {
  *v = 13000;
  return 0;
}
FAKE_EXPORT int cudaLibraryLoadData(void** library, const void* code, void*, void*, unsigned, void*, void*, unsigned) {
  if (std::memcmp(code, "BAD", 3) == 0) return 1;
  log_line("rt_library_load");
  *library = reinterpret_cast<void*>(0x7100);
  return 0;
}
FAKE_EXPORT int cudaLibraryUnload(void*) {
  log_line("rt_library_unload");
  return 0;
}
FAKE_EXPORT int cudaLibraryGetKernel(void** kernel, void*, const char* name) {
  if (std::strcmp(name, "missing") == 0) return 500;
  log_line(std::string("rt_get_kernel ") + name);
  *kernel = reinterpret_cast<void*>(0x8100);
  return 0;
}
FAKE_EXPORT int cudaKernelSetAttributeForDevice(void*, int attribute, int value, int d) {
  log_line("rt_set_attribute " + std::to_string(attribute) + "=" + std::to_string(value) + " device " +
           std::to_string(d));
  return 0;
}
FAKE_EXPORT int cudaFuncGetAttributes(void*, const void*) {
  log_line("rt_func_attributes on device " + std::to_string(g_rt_device));
  return 0;
}
FAKE_EXPORT int cudaLaunchKernelExC(const RuntimeLaunchConfig* c, const void*, void** params) {
  int d = c->stream ? device_of_context(context_of_stream(c->stream)) : g_rt_device;
  if (c->grid[0] == 0) return 1;
  log_line("rt_launch on device " + std::to_string(d) + " " +
           describe_launch(c->grid, c->block, c->shared, c->stream, c->attrs, c->num_attrs, params));
  return 0;
}
FAKE_EXPORT int cudaStreamIsCapturing(void*, int* status) {
  *status = 0;
  return 0;
}
FAKE_EXPORT int cudaThreadExchangeStreamCaptureMode(int* mode) {
  log_line("rt_capture_mode " + std::to_string(*mode));
  int old = g_capture_mode;
  g_capture_mode = *mode;
  *mode = old;
  return 0;
}
FAKE_EXPORT int cudaStreamGetDevice(void* s, int* d) {
  void* c = context_of_stream(s);
  if (!c) return 1;
  *d = device_of_context(c);
  return 0;
}
