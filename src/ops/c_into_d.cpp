// C into D: the checks that C and D share, and D's preparation on the caller's stream (c_into_d.hpp).
#include "ops/c_into_d.hpp"

#include <cstring>
#include <string>

#include "kiln/error.hpp"
#include "ops/validate.hpp"

namespace kiln::ops {
namespace {

bool is_default_stream(CUstream stream) {
  return stream == nullptr || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD;
}

// Makes a context of `device` current for a driver memory operation on `stream`, and restores the caller's
// afterwards: the stream's own context, or for the default stream the current one when it is on the device (else the
// device's primary context, which kiln's kernels use too). Kernel launches do the same inside LoadedKernel::launch;
// memsets and copies are not context-less, so they need it here.
class StreamContext {
 public:
  StreamContext(int device, CUstream stream) : api_(cuda::DriverApi::get()) {
    cuda::check(api_.cuCtxGetCurrent(&previous_), "cuCtxGetCurrent");
    CUcontext want = nullptr;
    if (!is_default_stream(stream)) {
      cuda::check(api_.cuStreamGetCtx(stream, &want), "cuStreamGetCtx");
    } else {
      CUdevice current_device = -1;
      if (previous_ != nullptr && api_.cuCtxGetDevice(&current_device) == CUDA_SUCCESS && current_device == device)
        want = previous_;
      else
        want = cuda::primary_context(device);
    }
    if (want != previous_) {
      cuda::check(api_.cuCtxSetCurrent(want), "cuCtxSetCurrent");
      switched_ = true;
    }
  }
  ~StreamContext() {
    if (switched_) (void)api_.cuCtxSetCurrent(previous_);
  }
  StreamContext(const StreamContext&) = delete;
  StreamContext& operator=(const StreamContext&) = delete;

 private:
  const cuda::DriverApi& api_;
  CUcontext previous_ = nullptr;
  bool switched_ = false;
};

}  // namespace

CMode check_c_against_d(const char* function, const TensorView* c, const TensorView& d, int64_t m, int64_t n,
                        int64_t ldc, int64_t ldd) {
  if (c == nullptr) return CMode::kZero;
  if (m == 0 || n == 0) return CMode::kAccumulate;  // nothing is read or written
  const Arg ac{function, "c"};
  if (c->data == d.data) {
    if (m > 1 && ldc != ldd)
      fail(ErrorKind::kValueError, ac, *c,
           "d itself when it starts at d's address: the same shape and strides (d's row stride is " +
               std::to_string(ldd) + ")",
           "stride(0) == " + std::to_string(ldc));
    return CMode::kAccumulate;
  }
  if (spans_overlap(*c, d))
    fail(ErrorKind::kValueError, ac, *c, "d itself or memory that does not overlap d's (d is " + d.describe() + ")",
         "a tensor overlapping d");
  return CMode::kCopy;
}

void prepare_d(const char* function, CMode mode, const TensorView& d, const TensorView* c, int64_t m, int64_t n,
               int64_t ldc, int64_t ldd, int device, CUstream stream) {
  if (mode == CMode::kAccumulate) return;
  const cuda::DriverApi& api = cuda::DriverApi::get();
  const StreamContext context(device, stream);
  const std::string what = std::string(" (") + function + ", d is " + d.describe() + ")";
  const auto d_ptr = reinterpret_cast<CUdeviceptr>(d.data);
  if (mode == CMode::kZero) {
    cuda::check(api.cuMemsetD2D32Async(d_ptr, static_cast<size_t>(ldd) * 4, 0u, static_cast<size_t>(n),
                                       static_cast<size_t>(m), stream),
                "cuMemsetD2D32Async", what);
    return;
  }
  CUDA_MEMCPY2D copy;
  std::memset(&copy, 0, sizeof copy);
  copy.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  copy.srcDevice = reinterpret_cast<CUdeviceptr>(c->data);
  copy.srcPitch = static_cast<size_t>(ldc) * 4;
  copy.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  copy.dstDevice = d_ptr;
  copy.dstPitch = static_cast<size_t>(ldd) * 4;
  copy.WidthInBytes = static_cast<size_t>(n) * 4;
  copy.Height = static_cast<size_t>(m);
  cuda::check(api.cuMemcpy2DAsync(&copy, stream), "cuMemcpy2DAsync", what + ", copying c (" + c->describe() + ")");
}

}  // namespace kiln::ops
