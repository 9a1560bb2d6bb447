#include "tensor_arg.hpp"

#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>

#include <array>
#include <string>
#include <vector>

#include "kiln/error.hpp"
#include "kiln/kiln.hpp"

namespace kiln::python {
namespace {

// Interned attribute names, created once (the module lives as long as the process).
PyObject* intern(const char* text) {
  PyObject* s = PyUnicode_InternFromString(text);
  if (!s) throw nb::python_error();
  return s;
}

struct Names {
  PyObject* dtype = intern("dtype");
  PyObject* data_ptr = intern("data_ptr");
  PyObject* shape = intern("shape");
  PyObject* stride = intern("stride");
  PyObject* is_cuda = intern("is_cuda");
  PyObject* get_device = intern("get_device");
  PyObject* device = intern("device");
  PyObject* layout = intern("layout");
  PyObject* is_neg = intern("is_neg");
  PyObject* is_conj = intern("is_conj");
};

const Names& names() {
  static const Names n;  // first use is under the GIL
  return n;
}

std::string python_type_name(nb::handle obj) {
  nb::handle tp = obj.type();
  std::string module = nb::hasattr(tp, "__module__") ? nb::cast<std::string>(nb::str(tp.attr("__module__"))) : "";
  std::string name = nb::cast<std::string>(nb::str(tp.attr("__qualname__")));
  return module.empty() || module == "builtins" ? name : module + "." + name;
}

std::string prefix(const char* function, const char* name) { return std::string(function) + ": " + name; }

constexpr const char* kSupportedDtypes = "float32, bfloat16, float16, float8_e4m3fn, int32, int64 or uint8";

// ---- torch ---------------------------------------------------------------------------------------------

// What kiln needs from torch, looked up once torch has been imported by the program (kiln never imports it
// from C++). Guarded by the GIL.
struct Torch {
  bool ready = false;
  PyTypeObject* tensor_type = nullptr;
  PyObject* to_dlpack = nullptr;       // torch._C._to_dlpack(tensor) -> "dltensor" capsule, when present
  std::array<std::pair<PyObject*, DType>, 7> dtypes{};
  PyObject* raw_stream = nullptr;      // torch._C._cuda_getCurrentRawStream(device) -> int, when present
  PyObject* current_stream = nullptr;  // torch.cuda.current_stream(device), the public fallback
  PyObject* strided = nullptr;         // torch.strided: the layout of a dense tensor (not sparse, not mkldnn)
};

Torch& torch_state() {
  static Torch t;
  if (t.ready) return t;
  PyObject* name = PyUnicode_FromString("torch");
  PyObject* module = name ? PyImport_GetModule(name) : nullptr;  // new reference, or null when not imported
  Py_XDECREF(name);
  if (!module) {
    PyErr_Clear();
    return t;
  }
  nb::object torch = nb::steal(module);
  nb::object tensor = torch.attr("Tensor");
  const std::pair<const char*, DType> dtype_names[] = {
      {"float32", DType::kFloat32}, {"bfloat16", DType::kBFloat16}, {"float16", DType::kFloat16},
      {"float8_e4m3fn", DType::kFloat8E4M3}, {"int32", DType::kInt32}, {"int64", DType::kInt64},
      {"uint8", DType::kUInt8}};
  for (size_t i = 0; i < t.dtypes.size(); ++i)
    t.dtypes[i] = {nb::object(torch.attr(dtype_names[i].first)).release().ptr(), dtype_names[i].second};
  nb::object c = torch.attr("_C");
  if (nb::hasattr(c, "_to_dlpack")) t.to_dlpack = nb::object(c.attr("_to_dlpack")).release().ptr();
  if (nb::hasattr(c, "_cuda_getCurrentRawStream")) t.raw_stream = nb::object(c.attr("_cuda_getCurrentRawStream")).release().ptr();
  t.current_stream = nb::object(torch.attr("cuda").attr("current_stream")).release().ptr();
  if (nb::hasattr(torch, "strided")) t.strided = nb::object(torch.attr("strided")).release().ptr();
  t.tensor_type = reinterpret_cast<PyTypeObject*>(tensor.release().ptr());
  t.ready = true;
  return t;
}

bool torch_tensor(PyObject* obj) {
  PyTypeObject* tp = Py_TYPE(obj);
  Torch& t = torch_state();
  return t.ready && (tp == t.tensor_type || PyType_IsSubtype(tp, t.tensor_type));
}

nb::object get(PyObject* obj, PyObject* attr) {
  PyObject* r = PyObject_GetAttr(obj, attr);
  if (!r) throw nb::python_error();
  return nb::steal(r);
}

nb::object call(PyObject* obj, PyObject* method) {
  PyObject* r = PyObject_CallMethodNoArgs(obj, method);
  if (!r) throw nb::python_error();
  return nb::steal(r);
}

int64_t as_int64(PyObject* v) {
  const long long r = PyLong_AsLongLong(v);
  if (r == -1 && PyErr_Occurred()) throw nb::python_error();
  return r;
}

void fill_dims(PyObject* tuple, std::array<int64_t, TensorView::kMaxDims>& dims, int ndim) {
  for (int i = 0; i < ndim; ++i) dims[static_cast<size_t>(i)] = as_int64(PyTuple_GET_ITEM(tuple, i));
}

// DLPack's ABI (stable since 0.x), for reading torch's unversioned capsule without nanobind's bookkeeping.
struct DLTensorAbi {
  void* data;
  int32_t device_type;
  int32_t device_id;
  int32_t ndim;
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
};

bool dtype_from_dlpack(const nb::dlpack::dtype& dt, DType& out);

// The fast path: torch._C._to_dlpack(t) makes a capsule in about 0.15 us (one call instead of six attribute
// lookups, and none of Tensor.__dlpack__'s Python-level stream handling); its fields are read here and the
// capsule is dropped unconsumed, so torch's destructor releases it. Returns false (nothing thrown) when the
// tensor cannot be exported (an older torch without float8 export, a meta tensor): the caller falls back to
// attributes.
bool torch_view_dlpack(PyObject* obj, const Torch& t, const char* function, const char* name, TensorView& v) {
  if (!t.to_dlpack) return false;
  PyObject* capsule = PyObject_CallOneArg(t.to_dlpack, obj);
  if (!capsule) {
    PyErr_Clear();
    return false;
  }
  nb::object owner = nb::steal(capsule);
  auto* dl = static_cast<DLTensorAbi*>(PyCapsule_GetPointer(capsule, "dltensor"));
  if (!dl) {
    PyErr_Clear();
    return false;
  }
  const nb::dlpack::dtype dt{dl->code, dl->bits, dl->lanes};
  if (!dtype_from_dlpack(dt, v.dtype)) return false;  // the attribute path names torch's dtype
  if (dl->ndim > TensorView::kMaxDims)
    throw Error(ErrorKind::kValueError, prefix(function, name) + " must have at most " +
                                            std::to_string(TensorView::kMaxDims) + " dimensions, got " +
                                            std::to_string(dl->ndim));
  if (dl->device_type == 2) {  // kDLCUDA
    v.device_kind = DeviceKind::kCuda;
    v.device = dl->device_id;
  } else if (dl->device_type == 1) {  // kDLCPU
    v.device_kind = DeviceKind::kCpu;
    v.device = 0;
  } else {
    return false;
  }
  v.ndim = dl->ndim;
  int64_t contiguous = 1;
  for (int i = v.ndim - 1; i >= 0; --i) {
    const size_t d = static_cast<size_t>(i);
    v.shape[d] = dl->shape[i];
    v.strides[d] = dl->strides ? dl->strides[i] : contiguous;
    contiguous *= dl->shape[i];
  }
  v.data = static_cast<char*>(dl->data) + dl->byte_offset;
  return true;
}

// A torch tensor whose values are not what its memory holds is read with the wrong sign, since kiln reads the memory:
// a negative view (is_neg(): z.conj().imag of a complex z, Tensor._neg_view()) or a conjugate one (is_conj(), which
// torch sets on complex tensors only: their dtype is refused first, so the check only guards the attribute path).
// Refused, asking for the resolved tensor; a tensor without the method (an older torch) passes.
struct LazyBit {
  PyObject* Names::*method;
  const char* what;
  const char* resolve;
};
constexpr LazyBit kNegBit{&Names::is_neg,
                          "a negative view (is_neg() is True): kiln reads the memory, whose values have the other sign",
                          "resolve_neg"};
constexpr LazyBit kConjBit{&Names::is_conj,
                           "a conjugate view (is_conj() is True): kiln reads the memory, whose imaginary parts have "
                           "the other sign",
                           "resolve_conj"};

void check_resolved(PyObject* obj, const LazyBit& bit, const char* function, const char* name) {
  PyObject* r = PyObject_CallMethodNoArgs(obj, names().*bit.method);
  if (!r) {
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) throw nb::python_error();
    PyErr_Clear();
    return;
  }
  const bool set = r == Py_True;
  Py_DECREF(r);
  if (set)
    throw Error(ErrorKind::kValueError,
                prefix(function, name) + " must be a tensor whose memory holds its values, got " + bit.what +
                    "; pass " + name + "." + bit.resolve + "() (or " + name + ".clone())");
}

TensorView torch_view(PyObject* obj, const char* function, const char* name) {
  const Names& n = names();
  const Torch& t = torch_state();
  TensorView v;
  if (torch_view_dlpack(obj, t, function, name, v)) {
    check_resolved(obj, kNegBit, function, name);  // exported: a real dtype, which cannot carry the conjugate bit
    return v;
  }
  v = TensorView{};
  // Not exportable: a sparse or mkldnn tensor has no strides (torch's own error would name neither the call nor the
  // argument), and a dense one falls through to its attributes.
  if (t.strided) {
    nb::object layout = get(obj, n.layout);
    if (layout.ptr() != t.strided)
      throw Error(ErrorKind::kValueError, prefix(function, name) + " must be a dense (torch.strided) tensor, got a " +
                                              nb::cast<std::string>(nb::str(layout)) +
                                              " one; call .to_dense() first");
  }
  nb::object dtype = get(obj, n.dtype);
  bool known = false;
  for (const auto& [object, kind] : t.dtypes) {
    if (object == dtype.ptr()) {
      v.dtype = kind;
      known = true;
      break;
    }
  }
  if (!known)
    throw Error(ErrorKind::kTypeError, prefix(function, name) + " has dtype " +
                                           nb::cast<std::string>(nb::str(dtype)) + ", which kiln does not handle (" +
                                           kSupportedDtypes + ")");
  nb::object shape = get(obj, n.shape);
  if (!PyTuple_Check(shape.ptr())) throw Error(ErrorKind::kTypeError, prefix(function, name) + ".shape is not a tuple");
  const Py_ssize_t ndim = PyTuple_GET_SIZE(shape.ptr());
  if (ndim > TensorView::kMaxDims)
    throw Error(ErrorKind::kValueError, prefix(function, name) + " must have at most " +
                                            std::to_string(TensorView::kMaxDims) + " dimensions, got " +
                                            std::to_string(ndim));
  v.ndim = static_cast<int>(ndim);
  fill_dims(shape.ptr(), v.shape, v.ndim);
  nb::object strides = call(obj, n.stride);
  if (!PyTuple_Check(strides.ptr()) || PyTuple_GET_SIZE(strides.ptr()) != ndim)
    throw Error(ErrorKind::kTypeError, prefix(function, name) + ".stride() did not return one stride per dimension");
  fill_dims(strides.ptr(), v.strides, v.ndim);

  nb::object is_cuda = get(obj, n.is_cuda);
  if (is_cuda.ptr() == Py_True) {
    v.device_kind = DeviceKind::kCuda;
    v.device = static_cast<int>(as_int64(call(obj, n.get_device).ptr()));
  } else {
    v.device_kind = DeviceKind::kCpu;
    v.device = 0;
    // A tensor on another device (meta, mps, xpu...) is not host memory either: say where it is.
    nb::object device = get(obj, n.device);
    std::string where = nb::cast<std::string>(nb::str(device.attr("type")));
    if (where != "cpu")
      throw Error(ErrorKind::kValueError, prefix(function, name) + " must be on a CUDA device, got a tensor on '" +
                                              nb::cast<std::string>(nb::str(device)) + "'");
  }
  v.data = PyLong_AsVoidPtr(call(obj, n.data_ptr).ptr());
  if (!v.data && PyErr_Occurred()) throw nb::python_error();
  check_resolved(obj, kNegBit, function, name);
  check_resolved(obj, kConjBit, function, name);
  return v;
}

uintptr_t torch_current_stream(int device) {
  const Torch& t = torch_state();
  nb::object index = nb::int_(device);
  if (t.raw_stream) {
    PyObject* r = PyObject_CallOneArg(t.raw_stream, index.ptr());
    if (!r) throw nb::python_error();
    nb::object handle = nb::steal(r);
    return static_cast<uintptr_t>(PyLong_AsUnsignedLongLong(handle.ptr()));
  }
  nb::object stream = nb::steal(PyObject_CallOneArg(t.current_stream, index.ptr()));
  if (!stream.is_valid()) throw nb::python_error();
  return nb::cast<uintptr_t>(stream.attr("cuda_stream"));
}

// ---- DLPack -----------------------------------------------------------------------------------------------

enum : int { kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3, kDLCUDAManaged = 13 };

std::string dlpack_dpython_type_name(const nb::dlpack::dtype& dt) {
  static const char* const fixed[] = {nullptr,        nullptr,         nullptr,
                                      nullptr,        nullptr,         nullptr,
                                      nullptr,        "float8_e3m4",   "float8_e4m3",
                                      "float8_e4m3b11fnuz", "float8_e4m3fn", "float8_e4m3fnuz",
                                      "float8_e5m2",  "float8_e5m2fnuz", "float8_e8m0fnu",
                                      "float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn"};
  std::string text;
  switch (dt.code) {
    case 0: text = "int" + std::to_string(dt.bits); break;
    case 1: text = "uint" + std::to_string(dt.bits); break;
    case 2: text = "float" + std::to_string(dt.bits); break;
    case 4: text = "bfloat" + std::to_string(dt.bits); break;
    case 5: text = "complex" + std::to_string(dt.bits); break;
    case 6: text = "bool"; break;
    case 18: text = "bcomplex" + std::to_string(dt.bits); break;
    default:
      text = dt.code < std::size(fixed) && fixed[dt.code] ? fixed[dt.code]
                                                          : "DLPack type code " + std::to_string(dt.code) + " with " +
                                                                std::to_string(dt.bits) + " bits";
  }
  if (dt.lanes != 1) text += "x" + std::to_string(dt.lanes);
  return text;
}

bool dtype_from_dlpack(const nb::dlpack::dtype& dt, DType& out) {
  if (dt.lanes != 1) return false;
  switch (dt.code) {
    case 0:  // int
      if (dt.bits == 32) return out = DType::kInt32, true;
      if (dt.bits == 64) return out = DType::kInt64, true;
      return false;
    case 1:  // uint
      if (dt.bits == 8) return out = DType::kUInt8, true;
      return false;
    case 2:  // float
      if (dt.bits == 32) return out = DType::kFloat32, true;
      if (dt.bits == 16) return out = DType::kFloat16, true;
      return false;
    case 4:  // bfloat
      if (dt.bits == 16) return out = DType::kBFloat16, true;
      return false;
    case 10:  // kDLFloat8_e4m3fn (DLPack >= 1.0)
      if (dt.bits == 8) return out = DType::kFloat8E4M3, true;
      return false;
    default:
      return false;
  }
}

template <typename Array>
TensorView dlpack_view(const Array& a, const char* function, const char* name) {
  TensorView v;
  if (!dtype_from_dlpack(a.dtype(), v.dtype))
    throw Error(ErrorKind::kTypeError, prefix(function, name) + " has dtype " + dlpack_dpython_type_name(a.dtype()) +
                                           ", which kiln does not handle (" + kSupportedDtypes + ")");
  if (a.ndim() > static_cast<size_t>(TensorView::kMaxDims))
    throw Error(ErrorKind::kValueError, prefix(function, name) + " must have at most " +
                                            std::to_string(TensorView::kMaxDims) + " dimensions, got " +
                                            std::to_string(a.ndim()));
  v.ndim = static_cast<int>(a.ndim());
  for (int i = 0; i < v.ndim; ++i) {
    v.shape[static_cast<size_t>(i)] = static_cast<int64_t>(a.shape(static_cast<size_t>(i)));
    v.strides[static_cast<size_t>(i)] = a.stride(static_cast<size_t>(i));  // DLPack strides are in elements
  }
  switch (a.device_type()) {
    case kDLCUDA:
    case kDLCUDAManaged:
      v.device_kind = DeviceKind::kCuda;
      v.device = a.device_id();
      break;
    case kDLCPU:
    case kDLCUDAHost:  // pinned host memory is still host memory
      v.device_kind = DeviceKind::kCpu;
      v.device = 0;
      break;
    default:
      throw Error(ErrorKind::kValueError, prefix(function, name) + " must be on a CUDA device, got DLPack device type " +
                                              std::to_string(a.device_type()));
  }
  v.data = const_cast<void*>(static_cast<const void*>(a.data()));
  return v;
}

// ---- __cuda_array_interface__ -------------------------------------------------------------------------

bool dtype_from_typestr(const std::string& typestr, DType& out) {
  // Byte order: '<' little endian, '|' not applicable, '=' native (little endian on every CUDA host).
  if (typestr.size() < 3 || (typestr[0] != '<' && typestr[0] != '|' && typestr[0] != '=')) return false;
  const std::string t = typestr.substr(1);
  if (t == "f4") return out = DType::kFloat32, true;
  if (t == "f2") return out = DType::kFloat16, true;
  if (t == "i4") return out = DType::kInt32, true;
  if (t == "i8") return out = DType::kInt64, true;
  if (t == "u1") return out = DType::kUInt8, true;
  return false;
}

int cai_device(nb::handle obj, const char* function, const char* name) {
  // The interface carries no device ordinal. CuPy arrays say it as .device.id; torch-like objects as
  // .device.index. Otherwise it is only unambiguous with a single GPU.
  if (nb::hasattr(obj, "device")) {
    nb::object device = obj.attr("device");
    for (const char* attr : {"id", "index"}) {
      if (nb::hasattr(device, attr)) {
        nb::object value = device.attr(attr);
        if (PyLong_Check(value.ptr())) return nb::cast<int>(value);
      }
    }
  }
  if (kiln::devices().size() <= 1) return 0;
  throw Error(ErrorKind::kValueError,
              prefix(function, name) + ": cannot tell which GPU its __cuda_array_interface__ memory is on (the object "
                                       "has no device.id) and this machine has several; pass a DLPack producer instead");
}

// "str 'abc'": a Python value's type and repr, for messages.
std::string typed_repr(nb::handle value) {
  return python_type_name(value) + " " + nb::cast<std::string>(nb::repr(value));
}

// A Python int (not a bool) as int64_t, or nothing when it is not one or does not fit.
bool int64_of(nb::handle value, int64_t& out) {
  PyObject* v = value.ptr();
  if (!PyLong_Check(v) || PyBool_Check(v)) return false;
  int overflow = 0;
  const long long r = PyLong_AsLongLongAndOverflow(v, &overflow);
  if (r == -1 && PyErr_Occurred()) throw nb::python_error();
  if (overflow != 0) return false;
  out = r;
  return true;
}

TensorView cai_view(nb::handle obj, nb::handle cai, const char* function, const char* name) {
  if (!PyDict_Check(cai.ptr()))
    throw Error(ErrorKind::kTypeError, prefix(function, name) + ".__cuda_array_interface__ is not a dict");
  nb::dict d = nb::borrow<nb::dict>(cai);
  const std::string where = prefix(function, name) + ".__cuda_array_interface__";
  auto field = [&](const char* key) -> nb::object {
    if (!d.contains(key)) throw Error(ErrorKind::kTypeError, where + " has no '" + key + "' entry");
    return d[key];
  };
  // A field that does not hold what the interface (version 2 or 3) says it holds: kTypeError naming it.
  auto malformed = [&](const char* key, const char* expected, nb::handle given) -> Error {
    return Error(ErrorKind::kTypeError,
                 where + "['" + key + "'] must be " + expected + ", got " + typed_repr(given));
  };
  // A tuple of ints in 64 bits (shape, strides): each of them.
  auto int_tuple = [&](const char* key, nb::handle value, const char* expected) {
    if (!PyTuple_Check(value.ptr())) throw malformed(key, expected, value);
    nb::tuple t = nb::borrow<nb::tuple>(value);
    std::vector<int64_t> out(t.size());
    for (size_t i = 0; i < t.size(); ++i)
      if (!int64_of(t[i], out[i])) throw malformed(key, expected, value);
    return out;
  };
  TensorView v;
  nb::object typestr_field = field("typestr");
  if (!PyUnicode_Check(typestr_field.ptr())) throw malformed("typestr", "a str such as '<f4'", typestr_field);
  const std::string typestr = nb::cast<std::string>(typestr_field);
  if (!dtype_from_typestr(typestr, v.dtype))
    throw Error(ErrorKind::kTypeError, prefix(function, name) + " has typestr '" + typestr +
                                           "', which kiln does not handle (" + kSupportedDtypes +
                                           "; bfloat16 and float8 have no typestr: use DLPack for them)");
  if (d.contains("mask") && !d["mask"].is_none())
    throw Error(ErrorKind::kValueError, prefix(function, name) + " is a masked array; kiln takes plain arrays");
  nb::object shape_field = field("shape");
  const std::vector<int64_t> shape = int_tuple("shape", shape_field, "a tuple of ints (the sizes)");
  if (shape.size() > static_cast<size_t>(TensorView::kMaxDims))
    throw Error(ErrorKind::kValueError, prefix(function, name) + " must have at most " +
                                            std::to_string(TensorView::kMaxDims) + " dimensions, got " +
                                            std::to_string(shape.size()));
  for (int64_t size : shape)
    if (size < 0)
      throw Error(ErrorKind::kValueError, where + "['shape'] must hold sizes >= 0, got " +
                                              nb::cast<std::string>(nb::repr(shape_field)));
  v.ndim = static_cast<int>(shape.size());
  for (int i = 0; i < v.ndim; ++i) v.shape[static_cast<size_t>(i)] = shape[static_cast<size_t>(i)];
  const int64_t item = element_size(v.dtype);
  nb::object strides = d.contains("strides") ? nb::object(d["strides"]) : nb::none();
  if (strides.is_none()) {
    int64_t s = 1;
    for (int i = v.ndim - 1; i >= 0; --i) {
      v.strides[static_cast<size_t>(i)] = s;
      s *= v.shape[static_cast<size_t>(i)];
    }
  } else {
    const std::vector<int64_t> st = int_tuple("strides", strides, "None or a tuple of ints (strides in bytes)");
    if (st.size() != shape.size())
      throw Error(ErrorKind::kValueError, where + " has " + std::to_string(st.size()) + " strides for " +
                                              std::to_string(shape.size()) + " dimensions");
    for (int i = 0; i < v.ndim; ++i) {
      const int64_t bytes = st[static_cast<size_t>(i)];
      if (bytes % item != 0)
        throw Error(ErrorKind::kValueError, prefix(function, name) + " has a stride of " + std::to_string(bytes) +
                                                " bytes in dimension " + std::to_string(i) +
                                                ", not a whole number of " + std::to_string(item) + "-byte elements");
      v.strides[static_cast<size_t>(i)] = bytes / item;
    }
  }
  // data: (pointer, read-only flag), the pointer an int in 0..2**64 - 1 (0 for an empty array).
  nb::object data = field("data");
  constexpr const char* kData = "a pair (pointer, read-only flag) with the pointer an int from 0 to 2**64 - 1";
  if (!PyTuple_Check(data.ptr()) || PyTuple_GET_SIZE(data.ptr()) != 2) throw malformed("data", kData, data);
  PyObject* pointer = PyTuple_GET_ITEM(data.ptr(), 0);
  if (!PyLong_Check(pointer) || PyBool_Check(pointer)) throw malformed("data", kData, data);
  const unsigned long long address = PyLong_AsUnsignedLongLong(pointer);
  if (address == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
    if (!PyErr_ExceptionMatches(PyExc_OverflowError)) throw nb::python_error();
    PyErr_Clear();
    throw Error(ErrorKind::kValueError, where + "['data'] must be " + kData + ", got " +
                                            nb::cast<std::string>(nb::repr(data)));
  }
  v.data = reinterpret_cast<void*>(static_cast<uintptr_t>(address));
  v.device_kind = DeviceKind::kCuda;
  v.device = cai_device(obj, function, name);
  return v;
}

}  // namespace

bool is_torch_tensor(nb::handle obj) { return torch_tensor(obj.ptr()); }

TensorView to_view(nb::handle obj, const char* function, const char* name, KeepAlive& keep) {
  if (torch_tensor(obj.ptr())) return torch_view(obj.ptr(), function, name);
  if (obj.is_none())
    throw Error(ErrorKind::kTypeError, prefix(function, name) +
                                           " must be a tensor (a torch.Tensor, a DLPack producer or an object with "
                                           "__cuda_array_interface__), got None");

  // DLPack (or the buffer protocol). The read-only variant accepts producers that flag their export
  // read-only; kiln does not write through inputs, and the caller owns the outputs it passes.
  nb::ndarray<nb::ro> array;
  if (nb::try_cast(obj, array, false)) {
    TensorView v = dlpack_view(array, function, name);
    keep.arrays.push_back(std::move(array));
    return v;
  }
  PyErr_Clear();

  if (nb::hasattr(obj, "__cuda_array_interface__"))
    return cai_view(obj, obj.attr("__cuda_array_interface__"), function, name);

  throw Error(ErrorKind::kTypeError, prefix(function, name) +
                                         " must be a tensor (a torch.Tensor, a DLPack producer or an object with "
                                         "__cuda_array_interface__), got " + python_type_name(obj));
}

namespace {

// A CUstream handle held by a Python int (not a bool): `what` names where it came from ("stream", "stream.cuda_stream",
// "stream.__cuda_stream__()[1]"). kTypeError for anything but an int, kValueError for one outside 0..2**64 - 1.
uintptr_t stream_handle(nb::handle value, const char* function, const std::string& what) {
  PyObject* v = value.ptr();
  if (!PyLong_Check(v) || PyBool_Check(v))
    throw Error(ErrorKind::kTypeError, std::string(function) + ": " + what +
                                           " must be an int CUstream handle (from 0 to 2**64 - 1), got " +
                                           typed_repr(value));
  const unsigned long long handle = PyLong_AsUnsignedLongLong(v);
  if (handle == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
    if (!PyErr_ExceptionMatches(PyExc_OverflowError)) throw nb::python_error();
    PyErr_Clear();
    throw Error(ErrorKind::kValueError, std::string(function) + ": " + what +
                                            " must be a CUstream handle (an int from 0 to 2**64 - 1), got " +
                                            nb::cast<std::string>(nb::repr(value)));
  }
  return static_cast<uintptr_t>(handle);
}

}  // namespace

uintptr_t resolve_stream(nb::handle stream, nb::handle x, const TensorView& x_view, const char* function) {
  if (stream.is_none()) {
    if (x_view.device_kind != DeviceKind::kCuda) return 0;
    if (torch_tensor(x.ptr())) return torch_current_stream(x_view.device);
    nb::handle tp = x.type();
    if (nb::hasattr(tp, "__module__")) {
      const std::string module = nb::cast<std::string>(nb::str(tp.attr("__module__")));
      if (module.rfind("cupy", 0) == 0) {
        nb::object cupy = nb::module_::import_("cupy");
        return nb::cast<uintptr_t>(cupy.attr("cuda").attr("get_current_stream")().attr("ptr"));
      }
    }
    return 0;  // the legacy default stream
  }
  PyObject* s = stream.ptr();
  if (PyLong_Check(s) && !PyBool_Check(s)) return stream_handle(stream, function, "stream");
  // A stream object: its handle, checked like an int given directly (a property or method that raises propagates).
  if (nb::hasattr(stream, "cuda_stream"))
    return stream_handle(stream.attr("cuda_stream"), function, "stream.cuda_stream");
  if (nb::hasattr(stream, "__cuda_stream__")) {
    // The CUDA stream protocol: __cuda_stream__() returns (version, handle).
    nb::object pair = stream.attr("__cuda_stream__")();
    if (!PyTuple_Check(pair.ptr()) || PyTuple_GET_SIZE(pair.ptr()) != 2)
      throw Error(ErrorKind::kTypeError, std::string(function) +
                                             ": stream.__cuda_stream__() must return a pair (version, CUstream "
                                             "handle), got " + typed_repr(pair));
    return stream_handle(nb::borrow(PyTuple_GET_ITEM(pair.ptr(), 1)), function, "stream.__cuda_stream__()[1]");
  }
  if (nb::hasattr(stream, "ptr")) return stream_handle(stream.attr("ptr"), function, "stream.ptr");
  throw Error(ErrorKind::kTypeError,
              std::string(function) + ": stream must be None, an int CUstream handle, a torch.cuda.Stream, a "
                                      "cupy.cuda.Stream or an object with __cuda_stream__, got " + python_type_name(stream));
}

nb::dict view_info(nb::handle obj, const char* function, const char* name) {
  KeepAlive keep;
  TensorView v = to_view(obj, function, name, keep);
  nb::dict d;
  d["dtype"] = to_string(v.dtype);
  d["device"] = v.device_kind == DeviceKind::kCuda ? "cuda:" + std::to_string(v.device) : std::string("cpu");
  nb::list shape, strides;
  for (int i = 0; i < v.ndim; ++i) {
    shape.append(v.shape[static_cast<size_t>(i)]);
    strides.append(v.strides[static_cast<size_t>(i)]);
  }
  d["shape"] = nb::steal(PySequence_Tuple(shape.ptr()));
  d["strides"] = nb::steal(PySequence_Tuple(strides.ptr()));
  d["data_ptr"] = reinterpret_cast<uintptr_t>(v.data);
  d["describe"] = v.describe();
  return d;
}

}  // namespace kiln::python
