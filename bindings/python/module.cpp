// kiln._native: the nanobind module over kiln's public C++ API. The Python package `kiln` (python/kiln/)
// wraps it with DeepGEMM's names, allocates outputs with torch, and documents every function; this layer
// only converts arguments (tensor_arg.hpp), releases the GIL around calls that may compile or launch, and
// turns kiln::Error into the package's exception classes.
//
// Adding an operation is one function here (convert the tensors, resolve the stream, release the GIL, call
// the C++ API) and one wrapper in python/kiln/__init__.py; see docs/PYTHON.md, "Adding an operation".
#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <initializer_list>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "kiln/kiln.hpp"
#include "tensor_arg.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace kiln::python {
namespace {

// ---- Errors ---------------------------------------------------------------------------------------------

constexpr size_t kErrorKinds = static_cast<size_t>(ErrorKind::kInternal) + 1;

// The Python class for each ErrorKind, registered by the package at import (python/kiln/_errors.py), so the
// classes are plain Python and can inherit from both kiln.KilnError and the builtin the issue asks for.
// Until then (someone importing kiln._native alone) the builtins are used. Guarded by the GIL.
std::array<PyObject*, kErrorKinds> g_error_types{};

PyObject* builtin_for(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kTypeError: return PyExc_TypeError;
    case ErrorKind::kValueError:
    case ErrorKind::kConfigError: return PyExc_ValueError;
    case ErrorKind::kNotFound: return PyExc_LookupError;
    default: return PyExc_RuntimeError;
  }
}

// Compiler logs and paths need not be UTF-8: undecodable bytes become U+FFFD rather than a second error.
nb::object text(const char* data, size_t size) {
  return nb::steal(PyUnicode_DecodeUTF8(data, static_cast<Py_ssize_t>(size), "replace"));
}

void raise(const Error& e) {
  const auto index = static_cast<size_t>(e.kind());
  PyObject* type = index < kErrorKinds && g_error_types[index] ? g_error_types[index] : builtin_for(e.kind());
  nb::object message = text(e.what(), std::strlen(e.what()));
  if (!message.is_valid()) return;  // the decode error is set instead
  PyObject* instance = PyObject_CallOneArg(type, message.ptr());
  if (!instance) return;  // the constructor's error is set instead
  if (auto* compile_error = dynamic_cast<const CompileError*>(&e)) {
    // Keep the parts apart too, as the C++ API does: scripts read .log without parsing the message.
    nb::object command = text(compile_error->command().data(), compile_error->command().size());
    nb::object log = text(compile_error->log().data(), compile_error->log().size());
    if (!command.is_valid() || !log.is_valid() || PyObject_SetAttrString(instance, "command", command.ptr()) != 0 ||
        PyObject_SetAttrString(instance, "log", log.ptr()) != 0) {
      Py_DECREF(instance);
      return;  // that error is set instead
    }
  }
  PyErr_SetObject(type, instance);
  Py_DECREF(instance);
}

void set_error_types(nb::dict types) {
  static const std::pair<const char*, ErrorKind> kinds[] = {
      {"type_error", ErrorKind::kTypeError},       {"value_error", ErrorKind::kValueError},
      {"config_error", ErrorKind::kConfigError},   {"compile_error", ErrorKind::kCompileError},
      {"cuda_error", ErrorKind::kCudaError},       {"cache_error", ErrorKind::kCacheError},
      {"capture_error", ErrorKind::kCaptureError}, {"not_found", ErrorKind::kNotFound},
      {"internal", ErrorKind::kInternal}};
  for (const auto& [name, kind] : kinds) {
    if (!types.contains(name)) continue;
    nb::object type = types[name];
    if (!PyType_Check(type.ptr()) || !PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(type.ptr()),
                                                       reinterpret_cast<PyTypeObject*>(PyExc_Exception)))
      throw nb::type_error(("_set_error_types: '" + std::string(name) + "' must be an exception class").c_str());
    PyObject*& slot = g_error_types[static_cast<size_t>(kind)];
    Py_XDECREF(slot);
    slot = type.release().ptr();
  }
}

// ---- Conversions of the API's records -------------------------------------------------------------------

std::optional<Backend> parse_backend(const std::optional<std::string>& text) {
  if (!text) return std::nullopt;
  if (*text == "nvcc") return Backend::kNvcc;
  if (*text == "nvrtc") return Backend::kNvrtc;
  throw Error(ErrorKind::kValueError, "backend must be 'nvcc' or 'nvrtc', got '" + *text + "'");
}

// Ranges come from Python as name -> (lo, hi), both included (kiln.plan's m=(1, 16384)).
using RangeMap = std::map<std::string, std::pair<int64_t, int64_t>>;

CompileRequest request_of(const std::string& op, const std::map<std::string, int64_t>& problem,
                          const std::optional<std::string>& arch, const std::optional<std::string>& backend,
                          const RangeMap& ranges = {}) {
  CompileRequest r;
  r.op = op;
  r.problem = problem;
  r.arch = arch;
  r.backend = parse_backend(backend);
  for (const auto& [name, range] : ranges) r.ranges[name] = ParamRange{range.first, range.second};
  return r;
}

nb::dict report_dict(const KernelReport& r, bool compiled) {
  nb::dict d;
  d["op"] = r.op;
  d["spec"] = r.spec;
  d["key"] = r.key;
  d["arch"] = r.arch;
  d["backend"] = to_string(r.backend);
  d["kernel_name"] = r.kernel_name;
  if (!r.range_param.empty() && !r.ranges.empty()) {
    // As `kiln plan --json`: the span this kernel serves of the ranged parameter, and its exact pieces.
    nb::list pieces;
    for (const auto& [lo, hi] : r.ranges) pieces.append(nb::make_tuple(lo, hi));
    const auto [lo, hi] = r.range_span();
    d[(r.range_param + "_range").c_str()] = nb::make_tuple(lo, hi);
    d[(r.range_param + "_ranges").c_str()] = pieces;
  }
  if (compiled) {
    d["hit"] = r.hit;
    d["compile_ms"] = r.compile_ms;
    d["cubin_bytes"] = r.cubin_bytes;
  }
  return d;
}

// Runs `f` with the GIL released (kiln's host work may compile, read the disk cache or probe the driver) and
// returns its result, a plain C++ value.
template <typename F>
auto without_gil(F&& f) {
  nb::gil_scoped_release release;
  return f();
}

// A list of one dict per item, filled by fill(dict, item).
template <typename T, typename Fill>
nb::list dict_list(const std::vector<T>& items, Fill&& fill) {
  nb::list out;
  for (const T& item : items) {
    nb::dict d;
    fill(d, item);
    out.append(d);
  }
  return out;
}

nb::list reports_list(const std::vector<KernelReport>& reports, bool compiled) {
  nb::list out;
  for (const KernelReport& r : reports) out.append(report_dict(r, compiled));
  return out;
}

// ---- Operations -----------------------------------------------------------------------------------------

// One cast: convert x, out and out_scales, pick the stream, release the GIL (a first call compiles), launch.
template <void (*Op)(const TensorView&, const TensorView&, const TensorView&, Stream)>
void cast_op(const char* function, nb::handle x, nb::handle out, nb::handle out_scales, nb::handle stream) {
  KeepAlive keep;
  const TensorView xv = to_view(x, function, "x", keep);
  const TensorView ov = to_view(out, function, "out", keep);
  const TensorView sv = to_view(out_scales, function, "out_scales", keep);
  const uintptr_t s = resolve_stream(stream, x, xv, function);
  nb::gil_scoped_release release;
  Op(xv, ov, sv, reinterpret_cast<Stream>(s));
}

// The FP8 GEMMs' operands as views, in argument order (a non-tensor or an unknown dtype is a TypeError naming the
// argument); c only when given.
struct GemmViews {
  TensorView a, sfa, b, sfb, d, c;
  GemmViews(nb::handle a_, nb::handle sfa_, nb::handle b_, nb::handle sfb_, nb::handle d_, const char* function,
            KeepAlive& keep)
      : a(to_view(a_, function, "a", keep)),
        sfa(to_view(sfa_, function, "sfa", keep)),
        b(to_view(b_, function, "b", keep)),
        sfb(to_view(sfb_, function, "sfb", keep)),
        d(to_view(d_, function, "d", keep)) {}
};

// fp8_gemm_nt's form against what the caller asked for: c (the accumulating form) needs a float32 d, and a
// recipe given explicitly must be the one d's dtype selects (1: DeepGEMM's (1, 1, 128), B per row; 128: its
// (1, 128, 128), B per 128x128 block; 0: none given).
void check_gemm_form(bool wgrad, bool has_c, int recipe, const TensorView& d) {
  if (!wgrad && has_c)
    throw Error(ErrorKind::kTypeError,
                "fp8_gemm_nt: d must be float32 when c is given (the accumulating form D = C + A . B^T, with B's "
                "scales per row per 128 K), got " + std::string(to_string(d.dtype)) + " (d is " + d.describe() + ")");
  if (recipe == 1 && !wgrad)
    throw Error(ErrorKind::kValueError,
                "fp8_gemm_nt: recipe=(1, 1, 128) (the weight-gradient form, B scaled per row) needs a float32 d, got " +
                    std::string(to_string(d.dtype)) + " (d is " + d.describe() + "); a bfloat16 d takes the default "
                    "recipe (1, 128, 128)");
  if (recipe == 128 && wgrad)
    throw Error(ErrorKind::kValueError,
                "fp8_gemm_nt: recipe=(1, 128, 128) (B scaled per 128x128 block) writes a bfloat16 d, got float32 (d is " +
                    d.describe() + "); a float32 d is the weight-gradient form, recipe (1, 1, 128) with B scaled per row");
}

// The C++ entry points name themselves in their argument errors (fp8_gemm_nt_wgrad, bf16_gemm_nt_accumulate, and
// bf16_gemm_nt where Python called bf16_gemm_tn on transposed views); from Python the call was another function, so
// those messages name that (`python_name`). Other errors (CUDA, compiles) keep their text and type. Call from a catch
// block: anything else is rethrown as it was.
[[noreturn]] void rethrow_as(const Error& e, std::initializer_list<std::string_view> cpp_names,
                             std::string_view python_name) {
  const std::string_view what = e.what();
  if (e.kind() == ErrorKind::kTypeError || e.kind() == ErrorKind::kValueError)
    for (const std::string_view cpp_name : cpp_names)
      if (what.substr(0, cpp_name.size()) == cpp_name && what.substr(cpp_name.size(), 2) == ": ")
        throw Error(e.kind(), std::string(python_name) + std::string(what.substr(cpp_name.size())));
  throw;
}

}  // namespace
}  // namespace kiln::python

NB_MODULE(_native, m) {
  using namespace kiln::python;
  m.doc() = "kiln's native module: the C++ API, bound with nanobind. Use the `kiln` package, not this module.";

  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const kiln::Error& e) {
      raise(e);
    }
  });

  m.def("_set_error_types", &set_error_types, "types"_a,
        "Registers the Python exception class for each kiln error kind (called by kiln/__init__.py).");
  m.def("version", &kiln::version, "kiln's library version.");

  // ---- Operations
  m.def(
      "per_token_cast_to_fp8",
      [](nb::handle x, nb::handle out, nb::handle out_scales, nb::handle stream) {
        cast_op<&kiln::per_token_cast_to_fp8>("per_token_cast_to_fp8", x, out, out_scales, stream);
      },
      "x"_a.none(), "out"_a.none(), "out_scales"_a.none(), "stream"_a.none() = nb::none(),
      "Per-token, per-128-channel FP8 cast into caller-provided outputs (see kiln.per_token_cast_to_fp8).");
  m.def(
      "per_block_cast_to_fp8",
      [](nb::handle x, nb::handle out, nb::handle out_scales, nb::handle stream) {
        cast_op<&kiln::per_block_cast_to_fp8>("per_block_cast_to_fp8", x, out, out_scales, stream);
      },
      "x"_a.none(), "out"_a.none(), "out_scales"_a.none(), "stream"_a.none() = nb::none(),
      "Per-128x128-block FP8 cast into caller-provided outputs (see kiln.per_block_cast_to_fp8).");
  m.def(
      "to_mn_major_scales",
      [](nb::handle sf, nb::handle out, nb::handle stream) {
        constexpr const char* function = "to_mn_major_scales";
        KeepAlive keep;
        const kiln::TensorView sv = to_view(sf, function, "sf", keep);
        const kiln::TensorView ov = to_view(out, function, "out", keep);
        const uintptr_t s = resolve_stream(stream, sf, sv, function);
        nb::gil_scoped_release release;
        kiln::to_mn_major_scales(sv, ov, reinterpret_cast<kiln::Stream>(s));
      },
      "sf"_a.none(), "out"_a.none(), "stream"_a.none() = nb::none(),
      "Row-major float32 scales into caller-provided MN-major, TMA-aligned ones (see kiln.to_mn_major_scales).");
  m.def(
      "fp8_gemm_nt",
      [](nb::handle a, nb::handle sfa, nb::handle b, nb::handle sfb, nb::handle d, nb::handle c, nb::handle stream,
         int recipe) {
        // Views first (a non-tensor or an unknown dtype is a TypeError naming the argument), then the stream
        // (the caller's current one on a's device), then the C++ API, which checks every precondition. d's
        // dtype picks the form: float32 is the weight-gradient form (D = C + A . B^T, B scaled per row).
        constexpr const char* kFunction = "fp8_gemm_nt";
        KeepAlive keep;
        GemmViews v(a, sfa, b, sfb, d, kFunction, keep);
        const bool wgrad = v.d.dtype == kiln::DType::kFloat32;
        check_gemm_form(wgrad, !c.is_none(), recipe, v.d);
        if (!c.is_none()) v.c = to_view(c, kFunction, "c", keep);
        const uintptr_t s = resolve_stream(stream, a, v.a, kFunction);
        nb::gil_scoped_release release;
        if (!wgrad) {
          kiln::fp8_gemm_nt(v.a, v.sfa, v.b, v.sfb, v.d, reinterpret_cast<kiln::Stream>(s));
          return;
        }
        try {
          kiln::fp8_gemm_nt_wgrad(v.a, v.sfa, v.b, v.sfb, v.d, c.is_none() ? nullptr : &v.c,
                                  reinterpret_cast<kiln::Stream>(s));
        } catch (const kiln::Error& e) {
          rethrow_as(e, {"fp8_gemm_nt_wgrad"}, "fp8_gemm_nt");
        }
      },
      "a"_a.none(), "sfa"_a.none(), "b"_a.none(), "sfb"_a.none(), "d"_a.none(), "c"_a.none() = nb::none(),
      "stream"_a.none() = nb::none(), "recipe"_a = 0,
      "D (bf16) = (A * sfa) . (B * sfb)^T, or for a float32 d D = C + (A * sfa) . (B * sfb)^T with sfb per row "
      "(c: None, d itself or another tensor); recipe 0: from d's dtype, 1: (1, 1, 128), 128: (1, 128, 128) "
      "(see kiln.fp8_gemm_nt).");
  m.def(
      "k_grouped_fp8_gemm_nt_contiguous",
      [](nb::handle a, nb::handle sfa, nb::handle b, nb::handle sfb, nb::handle d, const std::vector<int64_t>& ks,
         nb::handle c, nb::handle stream) {
        constexpr const char* kFunction = "k_grouped_fp8_gemm_nt_contiguous";
        KeepAlive keep;
        GemmViews v(a, sfa, b, sfb, d, kFunction, keep);
        if (!c.is_none()) v.c = to_view(c, kFunction, "c", keep);
        const uintptr_t s = resolve_stream(stream, a, v.a, kFunction);
        nb::gil_scoped_release release;
        kiln::k_grouped_fp8_gemm_nt_contiguous(v.a, v.sfa, v.b, v.sfb, v.d, ks, c.is_none() ? nullptr : &v.c,
                                               reinterpret_cast<kiln::Stream>(s));
      },
      "a"_a.none(), "sfa"_a.none(), "b"_a.none(), "sfb"_a.none(), "d"_a.none(), "ks"_a, "c"_a.none() = nb::none(),
      "stream"_a.none() = nb::none(),
      "D[g] (float32) = C[g] + A_g . B_g^T per group of ks[g] tokens, A and B flat (see "
      "kiln.k_grouped_fp8_gemm_nt_contiguous).");
  m.def(
      "m_grouped_fp8_gemm_nt_contiguous",
      [](nb::handle a, nb::handle sfa, nb::handle b, nb::handle sfb, nb::handle d, nb::handle m_indices,
         nb::handle stream) {
        constexpr const char* kFunction = "m_grouped_fp8_gemm_nt_contiguous";
        KeepAlive keep;
        GemmViews v(a, sfa, b, sfb, d, kFunction, keep);
        const kiln::TensorView indices = to_view(m_indices, kFunction, "m_indices", keep);
        const uintptr_t s = resolve_stream(stream, a, v.a, kFunction);
        nb::gil_scoped_release release;
        kiln::m_grouped_fp8_gemm_nt_contiguous(v.a, v.sfa, v.b, v.sfb, v.d, indices, reinterpret_cast<kiln::Stream>(s));
      },
      "a"_a.none(), "sfa"_a.none(), "b"_a.none(), "sfb"_a.none(), "d"_a.none(), "m_indices"_a.none(),
      "stream"_a.none() = nb::none(),
      "D[r] (bf16) = A[r] . B[m_indices[r]]^T for MoE experts' rows one after another, B [G, n, k] (see "
      "kiln.m_grouped_fp8_gemm_nt_contiguous).");
  m.def(
      "m_grouped_fp8_gemm_nt_masked",
      [](nb::handle a, nb::handle sfa, nb::handle b, nb::handle sfb, nb::handle d, nb::handle masked_m,
         int64_t expected_m, nb::handle stream) {
        constexpr const char* kFunction = "m_grouped_fp8_gemm_nt_masked";
        KeepAlive keep;
        GemmViews v(a, sfa, b, sfb, d, kFunction, keep);
        const kiln::TensorView counts = to_view(masked_m, kFunction, "masked_m", keep);
        const uintptr_t s = resolve_stream(stream, a, v.a, kFunction);
        nb::gil_scoped_release release;
        kiln::m_grouped_fp8_gemm_nt_masked(v.a, v.sfa, v.b, v.sfb, v.d, counts, expected_m,
                                           reinterpret_cast<kiln::Stream>(s));
      },
      "a"_a.none(), "sfa"_a.none(), "b"_a.none(), "sfb"_a.none(), "d"_a.none(), "masked_m"_a.none(), "expected_m"_a,
      "stream"_a.none() = nb::none(),
      "D[g, r] (bf16) = A[g, r] . B[g]^T for r < masked_m[g], A [G, m, k], B [G, n, k], D [G, m, n] (see "
      "kiln.m_grouped_fp8_gemm_nt_masked).");
  m.def(
      "bf16_gemm_nt",
      [](nb::handle a, nb::handle b, nb::handle d, nb::handle c, nb::handle stream, bool transpose_a,
         bool transpose_b) {
        // bf16_gemm_nn, _tn and _tt are bf16_gemm_nt on transposed views of a and/or b (DeepGEMM's definitions), and
        // their errors name them: the layout's letters are a's (t when transposed) and b's (n when transposed).
        const std::string function = std::string("bf16_gemm_") + (transpose_a ? 't' : 'n') + (transpose_b ? 'n' : 't');
        const char* kFunction = function.c_str();
        KeepAlive keep;
        kiln::TensorView av = to_view(a, kFunction, "a", keep);
        kiln::TensorView bv = to_view(b, kFunction, "b", keep);
        const kiln::TensorView dv = to_view(d, kFunction, "d", keep);
        const auto transpose = [](kiln::TensorView& t) {
          if (t.ndim != 2) return;  // the library's ndim check reports it
          std::swap(t.shape[0], t.shape[1]);
          std::swap(t.strides[0], t.strides[1]);
        };
        if (transpose_a) transpose(av);
        if (transpose_b) transpose(bv);
        kiln::TensorView cv;
        if (!c.is_none()) cv = to_view(c, kFunction, "c", keep);
        const uintptr_t s = resolve_stream(stream, a, av, kFunction);
        nb::gil_scoped_release release;
        try {
          if (c.is_none())
            kiln::bf16_gemm_nt(av, bv, dv, reinterpret_cast<kiln::Stream>(s));
          else
            kiln::bf16_gemm_nt_accumulate(av, bv, dv, cv, reinterpret_cast<kiln::Stream>(s));
        } catch (const kiln::Error& e) {
          rethrow_as(e, {"bf16_gemm_nt_accumulate", "bf16_gemm_nt"}, kFunction);
        }
      },
      "a"_a.none(), "b"_a.none(), "d"_a.none(), "c"_a.none() = nb::none(), "stream"_a.none() = nb::none(),
      "transpose_a"_a = false, "transpose_b"_a = false,
      "D = A . B^T (D bfloat16 or float32), or D (float32) = C + A . B^T with c (d itself or another tensor); "
      "A [m, k], B [n, k] bfloat16 (see kiln.bf16_gemm_nt).");
  // The contiguous m-grouped forms, nt and nn: the same arguments (b [G, n, k] or [G, k, n]). The C++ entry points'
  // errors already name them: nothing to rename.
  for (const auto& [name, gemm, doc] :
       {std::tuple{"m_grouped_bf16_gemm_nt_contiguous", &kiln::m_grouped_bf16_gemm_nt_contiguous,
                   "D[r] (bf16) = A[r] . B[m_indices[r]]^T for MoE experts' rows one after another, A [m, k], B [G, n, "
                   "k] bfloat16 (see kiln.m_grouped_bf16_gemm_nt_contiguous)."},
        std::tuple{"m_grouped_bf16_gemm_nn_contiguous", &kiln::m_grouped_bf16_gemm_nn_contiguous,
                   "D[r] (bf16) = A[r] . B[m_indices[r]] for MoE experts' rows one after another, A [m, k], B [G, k, "
                   "n] bfloat16 (see kiln.m_grouped_bf16_gemm_nn_contiguous)."}}) {
    m.def(
        name,
        [function = name, gemm = gemm](nb::handle a, nb::handle b, nb::handle d, nb::handle m_indices,
                                        nb::handle stream) {
          KeepAlive keep;
          const kiln::TensorView av = to_view(a, function, "a", keep);
          const kiln::TensorView bv = to_view(b, function, "b", keep);
          const kiln::TensorView dv = to_view(d, function, "d", keep);
          const kiln::TensorView indices = to_view(m_indices, function, "m_indices", keep);
          const uintptr_t s = resolve_stream(stream, a, av, function);
          nb::gil_scoped_release release;
          gemm(av, bv, dv, indices, reinterpret_cast<kiln::Stream>(s));
        },
        "a"_a.none(), "b"_a.none(), "d"_a.none(), "m_indices"_a.none(), "stream"_a.none() = nb::none(), doc);
  }
  m.def(
      "m_grouped_bf16_gemm_nt_masked",
      [](nb::handle a, nb::handle b, nb::handle d, nb::handle masked_m, int64_t expected_m, nb::handle stream) {
        constexpr const char* kFunction = "m_grouped_bf16_gemm_nt_masked";
        KeepAlive keep;
        const kiln::TensorView av = to_view(a, kFunction, "a", keep);
        const kiln::TensorView bv = to_view(b, kFunction, "b", keep);
        const kiln::TensorView dv = to_view(d, kFunction, "d", keep);
        const kiln::TensorView counts = to_view(masked_m, kFunction, "masked_m", keep);
        const uintptr_t s = resolve_stream(stream, a, av, kFunction);
        nb::gil_scoped_release release;
        kiln::m_grouped_bf16_gemm_nt_masked(av, bv, dv, counts, expected_m, reinterpret_cast<kiln::Stream>(s));
      },
      "a"_a.none(), "b"_a.none(), "d"_a.none(), "masked_m"_a.none(), "expected_m"_a, "stream"_a.none() = nb::none(),
      "D[g, r] (bf16) = A[g, r] . B[g]^T for r < masked_m[g], A [G, m, k], B [G, n, k], D [G, m, n] bfloat16 (see "
      "kiln.m_grouped_bf16_gemm_nt_masked).");
  m.def(
      "k_grouped_bf16_gemm_tn_contiguous",
      [](nb::handle a, nb::handle b, nb::handle d, const std::vector<int64_t>& ks, nb::handle c, nb::handle stream) {
        constexpr const char* kFunction = "k_grouped_bf16_gemm_tn_contiguous";
        KeepAlive keep;
        const kiln::TensorView av = to_view(a, kFunction, "a", keep);
        const kiln::TensorView bv = to_view(b, kFunction, "b", keep);
        const kiln::TensorView dv = to_view(d, kFunction, "d", keep);
        kiln::TensorView cv;
        if (!c.is_none()) cv = to_view(c, kFunction, "c", keep);
        const uintptr_t s = resolve_stream(stream, a, av, kFunction);
        nb::gil_scoped_release release;
        kiln::k_grouped_bf16_gemm_tn_contiguous(av, bv, dv, ks, c.is_none() ? nullptr : &cv,
                                                reinterpret_cast<kiln::Stream>(s));
      },
      "a"_a.none(), "b"_a.none(), "d"_a.none(), "ks"_a, "c"_a.none() = nb::none(), "stream"_a.none() = nb::none(),
      "D[g] (float32) = C[g] + A_g^T . B_g per group of ks[g] tokens, A [sum(ks), m], B [sum(ks), n] bfloat16 (see "
      "kiln.k_grouped_bf16_gemm_tn_contiguous).");
  m.def("per_token_scales_storage", &kiln::per_token_scales_storage, "m"_a, "k"_a,
        "Floats of storage behind per_token_cast_to_fp8's scales: (k / 128) * get_tma_aligned_size(m, 4).");
  m.def(
      "get_tma_aligned_size",
      [](int64_t x, int64_t element_size) {
        if (element_size != 1 && element_size != 2 && element_size != 4 && element_size != 8 && element_size != 16)
          throw kiln::Error(kiln::ErrorKind::kValueError,
                            "get_tma_aligned_size: element_size must be 1, 2, 4, 8 or 16 bytes, got " +
                                std::to_string(element_size));
        if (x < 0)
          throw kiln::Error(kiln::ErrorKind::kValueError,
                            "get_tma_aligned_size: x must be >= 0, got " + std::to_string(x));
        // x + 15 must not overflow inside kiln::get_tma_aligned_size (it came out negative for 2**63 - 1): the
        // largest x is the largest multiple of 16 in 64 bits, whose aligned size is itself.
        constexpr int64_t kLargest = INT64_MAX - 15;
        if (x > kLargest)
          throw kiln::Error(kiln::ErrorKind::kValueError,
                            "get_tma_aligned_size: x must be at most " + std::to_string(kLargest) +
                                " (its aligned size must fit in 64 bits), got " + std::to_string(x));
        return kiln::get_tma_aligned_size(x, static_cast<int>(element_size));
      },
      "x"_a, "element_size"_a, "x rounded up so that x elements of element_size bytes span a multiple of 16 bytes.");

  // ---- Settings
  m.def("set_num_sms", &kiln::set_num_sms, "num_sms"_a, "Limit the SMs kiln's kernels use (0: all).");
  m.def("get_num_sms", &kiln::get_num_sms, "The SM limit set with set_num_sms (0: none).");
  m.def("set_pdl", &kiln::set_pdl, "enabled"_a, "Programmatic dependent launch for kiln's kernels.");
  m.def("get_pdl", &kiln::get_pdl, "Whether programmatic dependent launch is on.");
  m.def(
      "set_fp8_gemm_overrides",
      [](int block_m, int block_n, int stages, int cluster_m, int cluster_n, int split_k) {
        kiln::set_fp8_gemm_overrides({block_m, block_n, stages, cluster_m, cluster_n, split_k});
      },
      "block_m"_a, "block_n"_a, "stages"_a, "cluster_m"_a, "cluster_n"_a, "split_k"_a,
      "Process-wide overrides of the FP8 GEMM heuristic (0: the heuristic decides).");
  m.def(
      "get_fp8_gemm_overrides",
      [] {
        const kiln::Fp8GemmOverrides o = kiln::get_fp8_gemm_overrides();
        nb::dict d;
        d["block_m"] = o.block_m;
        d["block_n"] = o.block_n;
        d["stages"] = o.stages;
        d["cluster_m"] = o.cluster_m;
        d["cluster_n"] = o.cluster_n;
        d["split_k"] = o.split_k;
        return d;
      },
      "The FP8 GEMM heuristic's overrides, as a dict (0: the heuristic decides).");
  m.def(
      "set_bf16_gemm_overrides",
      [](int block_m, int block_n, int stages, int cluster_m) {
        kiln::set_bf16_gemm_overrides({block_m, block_n, stages, cluster_m});
      },
      "block_m"_a, "block_n"_a, "stages"_a, "cluster_m"_a,
      "Process-wide overrides of the BF16 GEMM's plan (0: the plan decides).");
  m.def(
      "get_bf16_gemm_overrides",
      [] {
        const kiln::Bf16GemmOverrides o = kiln::get_bf16_gemm_overrides();
        nb::dict d;
        d["block_m"] = o.block_m;
        d["block_n"] = o.block_n;
        d["stages"] = o.stages;
        d["cluster_m"] = o.cluster_m;
        return d;
      },
      "The BF16 GEMM plan's overrides, as a dict (0: the plan decides).");

  // ---- Ahead of time
  m.def(
      "precompile",
      [](const std::string& op, const std::map<std::string, int64_t>& problem, const RangeMap& ranges,
         const std::optional<std::string>& arch, const std::optional<std::string>& backend, int jobs) {
        const kiln::CompileRequest request = request_of(op, problem, arch, backend, ranges);
        kiln::PrecompileOptions options;
        options.jobs = jobs;
        // A Ctrl-C must stop a long warm-up: Python runs its signal handlers only on the main thread, so the
        // calling thread (one of the workers) checks for them, with the GIL, before each kernel it starts. A
        // KeyboardInterrupt then stops the precompile after the kernels being built, and is raised here.
        const std::thread::id caller = std::this_thread::get_id();
        options.check_stop = [caller] {
          if (std::this_thread::get_id() != caller) return;
          nb::gil_scoped_acquire acquire;
          if (PyErr_CheckSignals() != 0) throw nb::python_error();
        };
        return reports_list(without_gil([&] { return kiln::precompile(request, options); }), true);
      },
      "op"_a, "problem"_a, "ranges"_a, "arch"_a = nb::none(), "backend"_a = nb::none(), "jobs"_a = 0,
      "Compile (or find in the cache) every kernel a problem or range needs, `jobs` at a time.");
  m.def(
      "plan",
      [](const std::string& op, const std::map<std::string, int64_t>& problem, const std::optional<std::string>& arch,
         const std::optional<std::string>& backend, const RangeMap& ranges) {
        const kiln::CompileRequest request = request_of(op, problem, arch, backend, ranges);
        return reports_list(without_gil([&] { return kiln::plan(request); }), false);
      },
      "op"_a, "problem"_a, "arch"_a = nb::none(), "backend"_a = nb::none(), "ranges"_a = RangeMap{},
      "The kernels a problem (or range) needs and their cache keys, without compiling.");
  m.def(
      "list_ops",
      [] {
        return dict_list(kiln::list_ops(), [](nb::dict& d, const kiln::OpInfo& op) {
          nb::dict params;
          d["name"] = op.name;
          d["summary"] = op.summary;
          d["targets"] = op.targets;
          for (const auto& [name, doc] : op.params) params[name.c_str()] = doc;
          d["params"] = params;
        });
      },
      "The operations kiln can compile, with their problem parameters.");

  // ---- Cache
  m.def(
      "cache_stats",
      [] {
        const kiln::CacheStats s = without_gil([] { return kiln::cache_stats(); });
        nb::dict d;
        d["directory"] = s.directory.string();
        d["writable"] = s.writable;
        d["entries"] = s.entries;
        d["bytes"] = s.bytes;
        d["hits"] = s.hits;
        d["misses"] = s.misses;
        d["compiles"] = s.compiles;
        d["corrupt"] = s.corrupt;
        d["compile_seconds"] = s.compile_seconds;
        d["memory_hits"] = s.memory_hits;
        d["mode"] = s.mode;
        d["max_bytes"] = s.max_bytes;
        d["publishes"] = s.publishes;
        d["evicted_entries"] = s.evicted_entries;
        d["evicted_bytes"] = s.evicted_bytes;
        d["layer_hits"] = s.layer_hits;
        d["remote_hits"] = s.remote_hits;
        d["compiles_after_warmup"] = s.compiles_after_warmup;
        d["warmup_done"] = s.warmup_done;
        d["process_compiles_after_warmup"] = s.process_compiles_after_warmup;
        nb::list tiers;
        for (const kiln::CacheTierStats& t : s.tiers) {
          nb::dict td;
          td["name"] = t.name;
          td["kind"] = t.kind;
          td["location"] = t.location;
          td["state"] = t.state;
          td["writable"] = t.writable;
          td["available"] = t.available;
          if (t.sized) {
            td["entries"] = t.entries;
            td["bytes"] = t.bytes;
          }
          td["hits"] = t.hits;
          td["misses"] = t.misses;
          td["corrupt"] = t.corrupt;
          td["errors"] = t.errors;
          td["publishes"] = t.publishes;
          tiers.append(td);
        }
        d["tiers"] = tiers;
        return d;
      },
      "Cache statistics (counted across processes), per tier, and this process's memory hits.");
  m.def(
      "declare_warmup_done", [] { kiln::declare_warmup_done(); },
      "Declare this process's warm-up done: later compiles are counted in compiles_after_warmup.");
  m.def(
      "cache_list",
      [] {
        return dict_list(without_gil([] { return kiln::cache_list(); }), [](nb::dict& d, const kiln::CacheEntryInfo& e) {
          d["key"] = e.key;
          d["op"] = e.op;
          d["spec"] = e.spec;
          d["arch"] = e.arch;
          d["backend"] = e.backend;
          d["compiler"] = e.compiler;
          d["kernel_name"] = e.kernel_name;
          d["bytes"] = e.bytes;
          d["compile_ms"] = e.compile_ms;
          d["created_unix"] = e.created_unix;
          d["last_use_unix"] = e.last_use_unix;
        });
      },
      "The cache's entries.");
  m.def(
      "cache_verify",
      [] {
        const kiln::CacheVerifyReport r = without_gil([] { return kiln::cache_verify(); });
        nb::dict d;
        d["checked"] = r.checked;
        d["corrupt"] = r.corrupt;
        d["removed"] = r.removed;
        nb::list problems;
        for (const std::string& p : r.problems) problems.append(p);
        d["problems"] = problems;
        return d;
      },
      "Check every cache entry, removing the bad ones.");
  m.def(
      "cache_clear",
      [] {
        nb::gil_scoped_release release;
        return kiln::cache_clear();
      },
      "Remove every cache entry; returns how many were removed.");

  // ---- Configuration, devices, diagnostics
  m.def(
      "config",
      [] {
        const kiln::Config& c = kiln::config();
        nb::dict out;
        for (const kiln::Config::Setting& s : c.settings()) {
          nb::dict d;
          d["value"] = s.value;
          d["variable"] = s.variable;
          d["origin"] = kiln::to_string(s.origin);
          d["doc"] = s.doc;
          d["detail"] = s.detail;
          out[s.name.c_str()] = d;
        }
        return out;
      },
      "Every effective setting: value, variable, origin, doc and detail.");
  m.def(
      "devices",
      [] {
        return dict_list(without_gil([] { return kiln::devices(); }), [](nb::dict& d, const kiln::DeviceSummary& s) {
          d["ordinal"] = s.ordinal;
          d["name"] = s.name;
          d["arch"] = s.arch;
          d["sm_count"] = s.sm_count;
          d["memory_bytes"] = s.memory_bytes;
        });
      },
      "The CUDA devices present (empty without a GPU or driver).");
  m.def(
      "doctor",
      [] {
        return dict_list(without_gil([] { return kiln::doctor(); }), [](nb::dict& d, const kiln::DoctorCheck& c) {
          d["what"] = c.what;
          d["status"] = c.status;
          d["detail"] = c.detail;
          d["advice"] = c.advice;
        });
      },
      "Toolkit, compilers, driver, GPUs and cache checks, with advice.");

  // ---- Tensors (for the package and its tests)
  m.def(
      "describe",
      [](nb::handle obj) { return nb::cast<std::string>(view_info(obj, "describe", "tensor")["describe"]); },
      "tensor"_a.none(), "How kiln sees a tensor: 'bfloat16[4096, 7168] strides (7168, 1) on cuda:0'.");
  m.def(
      "_view",
      [](nb::handle obj, const std::string& function, const std::string& name) {
        return view_info(obj, function.c_str(), name.c_str());
      },
      "tensor"_a.none(), "function"_a = "describe", "name"_a = "tensor",
      "The view kiln builds for a tensor, as a dict (for the package and its tests).");
  m.def("_is_torch_tensor", [](nb::handle obj) { return is_torch_tensor(obj); }, "obj"_a.none(),
        "Whether obj is a torch.Tensor (tests).");
  m.def(
      "_convert_only",
      [](nb::handle x, nb::handle out, nb::handle out_scales, nb::handle stream) {
        // Everything a cast call does on the host before the C++ API, for the overhead benchmark.
        KeepAlive keep;
        const kiln::TensorView xv = to_view(x, "convert", "x", keep);
        to_view(out, "convert", "out", keep);
        to_view(out_scales, "convert", "out_scales", keep);
        return resolve_stream(stream, x, xv, "convert");
      },
      "x"_a.none(), "out"_a.none(), "out_scales"_a.none(), "stream"_a.none() = nb::none());
}
