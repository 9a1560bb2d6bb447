// Python objects -> kiln::TensorView, and the stream a call is enqueued on.
//
// Three ways in, tried in this order:
//   1. torch.Tensor (and subclasses): read through a handful of attribute calls (data_ptr, dtype, shape,
//      stride, is_cuda, get_device). This is the hot path: torch's __dlpack__ is Python code that costs
//      several microseconds per tensor and may record events on the legacy default stream.
//   2. Any DLPack producer (__dlpack__ / __dlpack_device__, or the buffer protocol), through nanobind's
//      nb::ndarray. DLPack >= 1.0 dtype codes are understood, so float8_e4m3fn comes through as such.
//   3. Objects with __cuda_array_interface__ (version 2 or 3): shape, typestr, data, strides in bytes.
// Strides are converted to elements; a stride that is not a whole number of elements is an error.
// The binding never checks preconditions of an operation: that is the C++ API's job, so Python and C++
// users get the same messages.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/tensor.hpp"

namespace kiln::python {

namespace nb = nanobind;

// Holds the DLPack imports whose views are in use (their producers' memory stays alive and exported).
struct KeepAlive {
  std::vector<nb::ndarray<nb::ro>> arrays;
};

// Converts `obj`, the argument `name` of `function`, to a view. Throws kiln::Error(kTypeError) when obj is
// not a tensor or has a dtype kiln does not handle, kiln::Error(kValueError) for more than
// TensorView::kMaxDims dimensions, strides that are not whole elements, a device kiln cannot use, or a torch tensor
// that is not dense or whose memory does not hold its values (a negative or conjugate view).
TensorView to_view(nb::handle obj, const char* function, const char* name, KeepAlive& keep);

// True when obj is a torch.Tensor (torch must already be imported by someone; kiln never imports it here).
bool is_torch_tensor(nb::handle obj);

// The CUstream to enqueue on. `stream` may be None (the caller's current stream: torch's current stream on
// the tensor's device for a torch CUDA tensor, CuPy's current stream for a CuPy array, else the legacy
// default stream 0), an int (a CUstream / cudaStream_t handle), or an object with `cuda_stream`
// (torch.cuda.Stream), `ptr` (cupy.cuda.Stream) or `__cuda_stream__()` (the CUDA stream protocol).
uintptr_t resolve_stream(nb::handle stream, nb::handle x, const TensorView& x_view, const char* function);

// A dict describing the view kiln builds for obj (dtype, device, shape, strides in elements, data pointer):
// for tests and for error messages in the Python layer.
// `function` and `name` only shape the error messages.
nb::dict view_info(nb::handle obj, const char* function, const char* name);

}  // namespace kiln::python
