#include "cuda/kernel.hpp"

#include <chrono>
#include <cstdio>
#include <string>

#include "cuda/driver.hpp"
#include "cuda/launch_setup.hpp"
#include "cuda/runtime.hpp"
#include "kiln/error.hpp"

namespace kiln::cuda {

namespace detail {

std::string describe(const LaunchConfig& c) {
  auto dims = [](const uint32_t (&d)[3]) {
    return "(" + std::to_string(d[0]) + "," + std::to_string(d[1]) + "," + std::to_string(d[2]) + ")";
  };
  return "grid " + dims(c.grid) + ", block " + dims(c.block) + ", cluster " + dims(c.cluster) + ", " +
         std::to_string(c.shared_bytes) + " bytes of dynamic shared memory, PDL " + (c.pdl ? "on" : "off");
}

}  // namespace detail

namespace {

const char* api_name(LaunchApi api) { return api == LaunchApi::kDriver ? "driver" : "runtime"; }

// The handles that mean "the calling thread's default stream" rather than a stream object.
bool is_default_stream(CUstream stream) {
  return stream == nullptr || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD;
}

std::string kernel_context(const std::string& name, int device, LaunchApi api) {
  return " (kernel " + name + " on device " + std::to_string(device) + ", " + api_name(api) + " API)";
}

void print_load_time(const std::string& name, int device, LaunchApi api, size_t bytes,
                     std::chrono::steady_clock::time_point start) {
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(stderr, "kiln: loaded %s on device %d through the %s API in %.3f ms (%zu bytes of cubin)\n",
               name.c_str(), device, api_name(api), ms, bytes);
}

[[noreturn]] void throw_wrong_stream_device(const std::string& name, int device, long long stream_device,
                                            CUstream stream) {
  char address[32];
  std::snprintf(address, sizeof(address), "%p", static_cast<void*>(stream));
  throw Error(ErrorKind::kCudaError,
              "cannot launch kernel " + name + " on stream " + address + ": the stream belongs to device " +
                  std::to_string(stream_device) + " but the kernel was loaded for device " +
                  std::to_string(device) + "; launch it on a stream of device " + std::to_string(device));
}

// The device of a context that is not the one expected. Asked by making it current for a moment (and
// restoring the caller's), since cuStreamGetDevice / cudaStreamGetDevice are refused while the stream is
// being captured into a graph, and launching into a capture is exactly what must keep working.
CUresult device_of_context(const DriverApi& api, CUcontext context, CUdevice* device) {
  CUcontext previous = nullptr;
  CUresult r = api.cuCtxGetCurrent(&previous);
  if (r != CUDA_SUCCESS) return r;
  if (previous != context && (r = api.cuCtxSetCurrent(context)) != CUDA_SUCCESS) return r;
  r = api.cuCtxGetDevice(device);
  if (previous != context) (void)api.cuCtxSetCurrent(previous);
  return r;
}

// Loading may happen while another stream of the process is being captured in global mode, where the
// driver counts module loading as a potentially unsafe call and invalidates that capture. Loading from
// bytes does not touch any stream, so the calling thread relaxes its capture mode for the load.
class RelaxedCaptureMode {
 public:
  explicit RelaxedCaptureMode(const DriverApi& api) : driver_(&api) {
    saved_ = CU_STREAM_CAPTURE_MODE_RELAXED;
    active_ = api.cuThreadExchangeStreamCaptureMode(&saved_) == CUDA_SUCCESS;
  }
  explicit RelaxedCaptureMode(const RuntimeApi& api) : runtime_(&api) {
    saved_runtime_ = cudaStreamCaptureModeRelaxed;
    active_ = api.cudaThreadExchangeStreamCaptureMode(&saved_runtime_) == cudaSuccess;
  }
  ~RelaxedCaptureMode() {
    if (!active_) return;
    if (driver_ != nullptr) (void)driver_->cuThreadExchangeStreamCaptureMode(&saved_);
    if (runtime_ != nullptr) (void)runtime_->cudaThreadExchangeStreamCaptureMode(&saved_runtime_);
  }
  RelaxedCaptureMode(const RelaxedCaptureMode&) = delete;
  RelaxedCaptureMode& operator=(const RelaxedCaptureMode&) = delete;

 private:
  const DriverApi* driver_ = nullptr;
  const RuntimeApi* runtime_ = nullptr;
  CUstreamCaptureMode saved_ = CU_STREAM_CAPTURE_MODE_RELAXED;
  cudaStreamCaptureMode saved_runtime_ = cudaStreamCaptureModeRelaxed;
  bool active_ = false;
};

// ---------------------------------------------------------------------------------------------------------
// Driver API

class DriverKernel final : public LoadedKernel {
 public:
  DriverKernel(std::string name, int device, const DriverApi& api, CUlibrary library, CUkernel kernel,
               CUdevice handle, CUcontext primary)
      : LoadedKernel(std::move(name), device, LaunchApi::kDriver),
        driver_(&api),
        library_(library),
        kernel_(kernel),
        handle_(handle),
        primary_(primary) {}

  ~DriverKernel() override {
    // Ignored result: at process exit the driver may already be shutting down (CUDA_ERROR_DEINITIALIZED).
    (void)driver_->cuLibraryUnload(library_);
  }

  void launch(const LaunchConfig& c, void* params) const override {
    const DriverApi& api = *driver_;
    if (!shared_mark_.covers(c.shared_bytes)) raise_shared_memory(c);
    if (detail::needs_non_portable_cluster(c) && !non_portable_mark_.covers(1)) allow_non_portable_cluster(c);

    CUlaunchAttribute attributes[detail::kMaxLaunchAttributes];
    CUlaunchConfig lc;
    lc.gridDimX = c.grid[0];
    lc.gridDimY = c.grid[1];
    lc.gridDimZ = c.grid[2];
    lc.blockDimX = c.block[0];
    lc.blockDimY = c.block[1];
    lc.blockDimZ = c.block[2];
    lc.sharedMemBytes = c.shared_bytes;
    lc.hStream = c.stream;
    lc.numAttrs = detail::fill_attributes(c, attributes);
    lc.attrs = attributes;
    void* args[1] = {params};

    // A context-less CUkernel runs in the stream's context, or in the current one for the default stream:
    // make sure that context is on this kernel's device.
    CUcontext restore = nullptr;
    bool switched = false;
    if (!is_default_stream(c.stream)) {
      CUcontext stream_context = nullptr;
      CUresult r = api.cuStreamGetCtx(c.stream, &stream_context);
      if (r != CUDA_SUCCESS) fail(r, "cuStreamGetCtx", c);
      if (stream_context != primary_) check_stream_context(stream_context, c);
    } else {
      CUcontext current = nullptr;
      CUresult r = api.cuCtxGetCurrent(&current);
      if (r != CUDA_SUCCESS) fail(r, "cuCtxGetCurrent", c);
      if (current != primary_ && !on_this_device(current)) {
        r = api.cuCtxSetCurrent(primary_);
        if (r != CUDA_SUCCESS) fail(r, "cuCtxSetCurrent", c);
        restore = current;
        switched = true;
      }
    }
    CUresult r = api.cuLaunchKernelEx(&lc, reinterpret_cast<CUfunction>(kernel_), args, nullptr);
    if (switched) (void)api.cuCtxSetCurrent(restore);
    if (r != CUDA_SUCCESS) fail(r, "cuLaunchKernelEx", c);
  }

 private:
  bool on_this_device(CUcontext current) const {
    if (current == nullptr) return false;
    CUdevice device = -1;
    return driver_->cuCtxGetDevice(&device) == CUDA_SUCCESS && device == handle_;
  }

  [[gnu::noinline]] void check_stream_context(CUcontext context, const LaunchConfig& c) const {
    CUdevice device = -1;
    CUresult r = device_of_context(*driver_, context, &device);
    if (r != CUDA_SUCCESS) fail(r, "cuCtxGetDevice", c);
    if (device != handle_) throw_wrong_stream_device(name_, device_, device, c.stream);
  }

  [[gnu::noinline]] void raise_shared_memory(const LaunchConfig& c) const {
    shared_mark_.raise(c.shared_bytes, [&](uint32_t bytes) {
      CUresult r = driver_->cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                              static_cast<int>(bytes), kernel_, handle_);
      if (r == CUDA_SUCCESS) return;
      std::string limit;
      try {
        limit = "; device " + std::to_string(device_) + " allows at most " +
                std::to_string(device_info(device_).shared_memory_per_block_optin) +
                " bytes per block, static shared memory included";
      } catch (const Error&) {
      }
      check(r, "cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)",
            " raising kernel " + name_ + "'s dynamic shared memory to " + std::to_string(bytes) + " bytes" +
                limit);
    });
  }

  [[gnu::noinline]] void allow_non_portable_cluster(const LaunchConfig& c) const {
    non_portable_mark_.raise(1, [&](uint32_t) {
      check(driver_->cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1, kernel_, handle_),
            "cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED)",
            " allowing a cluster of " + std::to_string(detail::cluster_size(c)) + " CTAs" +
                kernel_context(name_, device_, api_));
    });
  }

  [[noreturn, gnu::noinline]] void fail(CUresult r, const char* call, const LaunchConfig& c) const {
    check(r, call, " launching kernel " + name_ + " on device " + std::to_string(device_) + " with " +
                       detail::describe(c));
    throw Error(ErrorKind::kInternal, "unreachable: check() returned on a failure");
  }

  const DriverApi* driver_;
  CUlibrary library_;
  CUkernel kernel_;
  CUdevice handle_;
  CUcontext primary_;
  mutable detail::RaisedMark shared_mark_;
  mutable detail::RaisedMark non_portable_mark_;
};

std::unique_ptr<LoadedKernel> load_driver(std::span<const uint8_t> cubin, const std::string& name, int device,
                                          bool print_time) {
  const DriverApi& api = DriverApi::get();
  const auto start = std::chrono::steady_clock::now();
  const std::string context = kernel_context(name, device, LaunchApi::kDriver);
  RelaxedCaptureMode relaxed(api);
  CUcontext primary = primary_context(device);  // validates the ordinal
  CUdevice handle = 0;
  check(api.cuDeviceGet(&handle, device), "cuDeviceGet", context);

  // A library is context-independent: the driver loads it into each context that uses it.
  CUlibrary library = nullptr;
  check(api.cuLibraryLoadData(&library, cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0),
        "cuLibraryLoadData", " loading " + std::to_string(cubin.size()) + " bytes of cubin" + context);
  CUkernel kernel = nullptr;
  CUresult r = api.cuLibraryGetKernel(&kernel, library, name.c_str());
  if (r != CUDA_SUCCESS) {
    (void)api.cuLibraryUnload(library);
    check(r, "cuLibraryGetKernel", " looking up '" + name + "' in the loaded cubin" + context);
  }
  // Load it into the device's primary context now, so that a cubin for another arch fails here, naming the
  // kernel and device, and the first launch (perhaps inside a graph capture) does no loading.
  CUcontext previous = nullptr;
  check(api.cuCtxGetCurrent(&previous), "cuCtxGetCurrent", context);
  if (previous != primary) check(api.cuCtxSetCurrent(primary), "cuCtxSetCurrent", context);
  CUfunction function = nullptr;
  r = api.cuKernelGetFunction(&function, kernel);
  if (previous != primary) (void)api.cuCtxSetCurrent(previous);
  if (r != CUDA_SUCCESS) {
    (void)api.cuLibraryUnload(library);
    check(r, "cuKernelGetFunction", " loading the cubin into device " + std::to_string(device) +
                                        "'s primary context (is it built for this device's arch?)" + context);
  }
  auto loaded = std::make_unique<DriverKernel>(name, device, api, library, kernel, handle, primary);
  if (print_time) print_load_time(name, device, LaunchApi::kDriver, cubin.size(), start);
  return loaded;
}

// ---------------------------------------------------------------------------------------------------------
// Runtime API

class RuntimeKernel final : public LoadedKernel {
 public:
  // `driver` (with `primary` and `handle`, device's primary context and handle) checks the context of a
  // launch's stream; null when the driver table is unavailable, and then nothing is checked.
  RuntimeKernel(std::string name, int device, const RuntimeApi& api, cudaLibrary_t library, cudaKernel_t kernel,
                const DriverApi* driver, CUcontext primary, CUdevice handle)
      : LoadedKernel(std::move(name), device, LaunchApi::kRuntime),
        runtime_(&api),
        library_(library),
        kernel_(kernel),
        driver_(driver),
        primary_(primary),
        handle_(handle) {}

  ~RuntimeKernel() override { (void)runtime_->cudaLibraryUnload(library_); }

  void launch(const LaunchConfig& c, void* params) const override {
    const RuntimeApi& api = *runtime_;
    if (!shared_mark_.covers(c.shared_bytes)) raise_shared_memory(c);
    if (detail::needs_non_portable_cluster(c) && !non_portable_mark_.covers(1)) allow_non_portable_cluster(c);

    cudaLaunchAttribute attributes[detail::kMaxLaunchAttributes];
    cudaLaunchConfig_t lc;
    lc.gridDim = dim3(c.grid[0], c.grid[1], c.grid[2]);
    lc.blockDim = dim3(c.block[0], c.block[1], c.block[2]);
    lc.dynamicSmemBytes = c.shared_bytes;
    lc.stream = c.stream;
    lc.numAttrs = detail::fill_attributes(c, attributes);
    lc.attrs = attributes;
    void* args[1] = {params};

    int restore = -1;
    if (!is_default_stream(c.stream)) {
      // The runtime launches a cudaKernel_t in the stream's context: the same check as the driver path,
      // through the driver (cudaStreamGetDevice is refused while the stream is being captured).
      if (driver_ != nullptr) {
        CUcontext stream_context = nullptr;
        CUresult r = driver_->cuStreamGetCtx(c.stream, &stream_context);
        if (r != CUDA_SUCCESS) fail_driver(r, "cuStreamGetCtx", c);
        if (stream_context != primary_) check_stream_context(stream_context, c);
      }
    } else {
      int current = -1;
      cudaError_t r = api.cudaGetDevice(&current);
      if (r != cudaSuccess) fail(r, "cudaGetDevice", c);
      if (current != device_) {
        r = api.cudaSetDevice(device_);
        if (r != cudaSuccess) fail(r, "cudaSetDevice", c);
        restore = current;
      }
    }
    cudaError_t r = api.cudaLaunchKernelExC(&lc, reinterpret_cast<const void*>(kernel_), args);
    if (restore >= 0) (void)api.cudaSetDevice(restore);
    if (r != cudaSuccess) fail(r, "cudaLaunchKernelExC", c);
  }

 private:
  [[gnu::noinline]] void raise_shared_memory(const LaunchConfig& c) const {
    shared_mark_.raise(c.shared_bytes, [&](uint32_t bytes) {
      check_runtime(runtime_->cudaKernelSetAttributeForDevice(kernel_, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                          static_cast<int>(bytes), device_),
                    "cudaKernelSetAttributeForDevice(cudaFuncAttributeMaxDynamicSharedMemorySize)",
                    " raising kernel " + name_ + "'s dynamic shared memory to " + std::to_string(bytes) +
                        " bytes on device " + std::to_string(device_));
    });
  }

  [[gnu::noinline]] void allow_non_portable_cluster(const LaunchConfig& c) const {
    non_portable_mark_.raise(1, [&](uint32_t) {
      check_runtime(runtime_->cudaKernelSetAttributeForDevice(kernel_, cudaFuncAttributeNonPortableClusterSizeAllowed,
                                                          1, device_),
                    "cudaKernelSetAttributeForDevice(cudaFuncAttributeNonPortableClusterSizeAllowed)",
                    " allowing a cluster of " + std::to_string(detail::cluster_size(c)) + " CTAs" +
                        kernel_context(name_, device_, api_));
    });
  }

  [[gnu::noinline]] void check_stream_context(CUcontext context, const LaunchConfig& c) const {
    CUdevice device = -1;
    CUresult r = device_of_context(*driver_, context, &device);
    if (r != CUDA_SUCCESS) fail_driver(r, "cuCtxGetDevice", c);
    if (device != handle_) throw_wrong_stream_device(name_, device_, device, c.stream);
  }

  [[noreturn, gnu::noinline]] void fail_driver(CUresult r, const char* call, const LaunchConfig& c) const {
    check(r, call, " launching kernel " + name_ + " on device " + std::to_string(device_) + " with " +
                       detail::describe(c));
    throw Error(ErrorKind::kInternal, "unreachable: check() returned on a failure");
  }

  [[noreturn, gnu::noinline]] void fail(cudaError_t r, const char* call, const LaunchConfig& c) const {
    check_runtime(r, call, " launching kernel " + name_ + " on device " + std::to_string(device_) + " with " +
                               detail::describe(c));
    throw Error(ErrorKind::kInternal, "unreachable: check_runtime() returned on a failure");
  }

  const RuntimeApi* runtime_;
  cudaLibrary_t library_;
  cudaKernel_t kernel_;
  const DriverApi* driver_;
  CUcontext primary_;
  CUdevice handle_;
  mutable detail::RaisedMark shared_mark_;
  mutable detail::RaisedMark non_portable_mark_;
};

std::unique_ptr<LoadedKernel> load_runtime(std::span<const uint8_t> cubin, const std::string& name, int device,
                                           bool print_time) {
  const RuntimeApi& api = RuntimeApi::get();
  const auto start = std::chrono::steady_clock::now();
  const std::string context = kernel_context(name, device, LaunchApi::kRuntime);
  RelaxedCaptureMode relaxed(api);
  int count = 0;
  check_runtime(api.cudaGetDeviceCount(&count), "cudaGetDeviceCount",
                context + "; the runtime API needs a CUDA driver (libcuda.so.1) and a GPU to load and launch "
                          "kernels (compiling ahead of time works without them: `kiln compile ... --arch sm_90a`)");
  if (device < 0 || device >= count) {
    throw Error(ErrorKind::kValueError, "device ordinal " + std::to_string(device) +
                                            " is out of range: expected 0 <= ordinal < " + std::to_string(count) +
                                            " (" + std::to_string(count) + " CUDA device(s) visible)" + context);
  }
  // The driver checks the context of each launch's stream (see RuntimeKernel::launch).
  const DriverApi* driver = nullptr;
  CUcontext primary = nullptr;
  CUdevice handle = 0;
  if (DriverApi::available()) {
    driver = &DriverApi::get();
    primary = primary_context(device);
    check(driver->cuDeviceGet(&handle, device), "cuDeviceGet", context);
  }
  cudaLibrary_t library = nullptr;
  check_runtime(api.cudaLibraryLoadData(&library, cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0),
                "cudaLibraryLoadData", " loading " + std::to_string(cubin.size()) + " bytes of cubin" + context);
  cudaKernel_t kernel = nullptr;
  cudaError_t r = api.cudaLibraryGetKernel(&kernel, library, name.c_str());
  if (r != cudaSuccess) {
    (void)api.cudaLibraryUnload(library);
    check_runtime(r, "cudaLibraryGetKernel", " looking up '" + name + "' in the loaded cubin" + context);
  }
  // Load it into the device now (see load_driver): cudaFuncGetAttributes on the device does that.
  int previous = -1;
  check_runtime(api.cudaGetDevice(&previous), "cudaGetDevice", context);
  if (previous != device) check_runtime(api.cudaSetDevice(device), "cudaSetDevice", context);
  cudaFuncAttributes attributes{};
  r = api.cudaFuncGetAttributes(&attributes, reinterpret_cast<const void*>(kernel));
  if (previous != device) (void)api.cudaSetDevice(previous);
  if (r != cudaSuccess) {
    (void)api.cudaLibraryUnload(library);
    check_runtime(r, "cudaFuncGetAttributes",
                  " loading the cubin onto device " + std::to_string(device) +
                      " (is it built for this device's arch?)" + context);
  }
  auto loaded = std::make_unique<RuntimeKernel>(name, device, api, library, kernel, driver, primary, handle);
  if (print_time) print_load_time(name, device, LaunchApi::kRuntime, cubin.size(), start);
  return loaded;
}

}  // namespace

std::unique_ptr<LoadedKernel> LoadedKernel::load(std::span<const uint8_t> cubin, const std::string& kernel_name,
                                                 int device, LaunchApi api, bool print_load_time) {
  if (cubin.empty()) {
    throw Error(ErrorKind::kValueError, "cannot load kernel " + kernel_name + " on device " +
                                            std::to_string(device) + ": the cubin is empty (0 bytes)");
  }
  if (kernel_name.empty()) {
    throw Error(ErrorKind::kValueError, "cannot load a kernel without a name: the kernel name is empty");
  }
  if (api == LaunchApi::kRuntime) return load_runtime(cubin, kernel_name, device, print_load_time);
  return load_driver(cubin, kernel_name, device, print_load_time);
}

}  // namespace kiln::cuda
