"""Every validation error reachable without a GPU, with the exception kind and the library's message.

Host arrays come from numpy. Tensors "on a CUDA device" are DLPack producers that describe memory they do not
own (fakes.py): every precondition of the C++ API is checked before anything touches memory or the GPU, so
they reach each check. A call that passes every check needs a GPU; without one it is a CudaError.
"""

from __future__ import annotations

import pytest

import kiln
from fakes import FakeCAI, FakeDLPack, per_block_fakes, per_token_fakes

np = pytest.importorskip("numpy")

PT, PB = kiln.per_token_cast_to_fp8, kiln.per_block_cast_to_fp8
NO_GPU = not kiln.devices()


# ---- Host arrays (numpy) ---------------------------------------------------------------------------------

def test_a_host_array_must_be_on_a_cuda_device():
    for fn in (PT, PB):
        with pytest.raises(kiln.KilnValueError, match=r"x must be on a CUDA device.*float32\[4, 128\]"):
            fn(np.zeros((4, 128), np.float32))


def test_host_arrays_passed_as_outputs_reach_the_library_checks():
    x, out, scales = np.zeros((4, 128), np.float16), np.zeros((4, 128), np.uint8), np.zeros((4, 1), np.float32)
    with pytest.raises(TypeError, match="per_token_cast_to_fp8: x must be bfloat16, got float16"):
        PT(x, out=(x, scales))
    with pytest.raises(TypeError, match="per_block_cast_to_fp8: x must be bfloat16, got float16"):
        PB(x, out=(out, scales))


def test_an_unsupported_dtype_or_a_non_tensor_is_a_type_error():
    with pytest.raises(TypeError, match="x has dtype float64, which kiln does not handle"):
        PT(np.zeros((4, 128), np.float64))
    with pytest.raises(TypeError, match="x must be a tensor .* got list"):
        PT([[1.0] * 128])
    with pytest.raises(TypeError, match="got None"):
        PT(None)
    with pytest.raises(TypeError, match="out must be a pair"):
        PT(np.zeros((4, 128), np.float32), out=np.zeros(3))


def test_deepgemm_recipe_arguments_are_checked_as_bools_and_an_int():
    x = np.zeros((4, 128), np.float32)
    # A string is not a request for UE8M0 scales (bool('False') is True): a type error naming the argument.
    for fn in (PT, PB):
        name = fn.__name__
        with pytest.raises(kiln.KilnTypeError, match=rf"^{name}: use_ue8m0 must be a bool .*got str 'False'"):
            fn(x, "False")
        with pytest.raises(kiln.KilnTypeError, match=rf"^{name}: use_ue8m0 must be a bool .*got NoneType None"):
            fn(x, None)
        with pytest.raises(kiln.KilnTypeError, match=rf"^{name}: gran_k must be an int \(128\), got str '128'"):
            fn(x, gran_k="128")
        with pytest.raises(kiln.KilnTypeError, match=rf"^{name}: gran_k must be an int \(128\), got bool True"):
            fn(x, gran_k=True)
    with pytest.raises(kiln.KilnTypeError, match=r"^per_token_cast_to_fp8: use_packed_ue8m0 must be a bool"):
        PT(x, use_packed_ue8m0="no")
    # The defaults spelled otherwise still mean the defaults: the call reaches the library's checks of x.
    for args in ((0,), (np.bool_(False),), (False, 128, 0)):
        with pytest.raises(kiln.KilnValueError, match="x must be on a CUDA device"):
            PT(x, *args)


def test_deepgemm_recipe_arguments_other_than_the_defaults_are_value_errors():
    x = np.zeros((4, 128), np.float32)
    with pytest.raises(ValueError, match="use_ue8m0=True"):
        PT(x, True)
    with pytest.raises(ValueError, match="gran_k=64"):
        PT(x, gran_k=64)
    with pytest.raises(ValueError, match="use_packed_ue8m0=True"):
        PT(x, use_packed_ue8m0=True)
    with pytest.raises(ValueError, match="use_ue8m0=True"):
        PB(x, use_ue8m0=True)


def test_get_mn_major_tma_aligned_tensor_needs_a_torch_tensor():
    with pytest.raises(TypeError, match="sf must be a torch.Tensor"):
        kiln.get_mn_major_tma_aligned_tensor(np.zeros((4, 1), np.float32))


def test_to_mn_major_scales_checks_every_argument_before_the_gpu():
    sf = FakeDLPack((37, 56), "float32")
    out = FakeDLPack((37, 56), "float32", strides=(1, 40), ptr=0x7F0010000000)
    with pytest.raises(TypeError, match="to_mn_major_scales: sf must be float32, got bfloat16"):
        kiln.to_mn_major_scales(FakeDLPack((37, 56), "bfloat16"), out)
    with pytest.raises(ValueError, match=r"to_mn_major_scales: out must be of shape \(37, 56\)"):
        kiln.to_mn_major_scales(sf, FakeDLPack((37, 55), "float32", strides=(1, 40), ptr=0x7F0010000000))
    with pytest.raises(ValueError, match=r"out must be MN-major and TMA-aligned.*\(row-major\)"):
        kiln.to_mn_major_scales(sf, FakeDLPack((37, 56), "float32", ptr=0x7F0010000000))
    with pytest.raises(ValueError, match="out must be memory that does not overlap sf's"):
        kiln.to_mn_major_scales(sf, FakeDLPack((37, 56), "float32", strides=(1, 40), ptr=0x7F0000000040))
    with pytest.raises(ValueError, match="sf must be on a CUDA device"):
        kiln.to_mn_major_scales(np.zeros((37, 56), np.float32), out)
    # Nothing to convert: no GPU needed.
    kiln.to_mn_major_scales(FakeDLPack((0, 56), "float32"), FakeDLPack((0, 56), "float32", strides=(1, 0)))


# ---- Conversion of tensors -------------------------------------------------------------------------------

def test_numpy_strides_come_through_in_elements():
    a = np.zeros((6, 8), np.float32)[::2, 1::2]
    v = kiln._native._view(a)
    assert v["shape"] == (3, 4) and v["strides"] == (16, 2) and v["device"] == "cpu" and v["dtype"] == "float32"
    assert v["data_ptr"] == a.__array_interface__["data"][0]


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float8_e4m3fn", "int32", "int64", "uint8"])
def test_dlpack_dtypes_kiln_handles(dtype):
    v = kiln._native._view(FakeDLPack((2, 3), dtype, device="cuda:1", ptr=4096))
    assert v == {**v, "dtype": dtype, "device": "cuda:1", "shape": (2, 3), "strides": (3, 1), "data_ptr": 4096}


@pytest.mark.parametrize("dtype", ["float64", "int8", "float8_e5m2"])
def test_dlpack_dtypes_kiln_does_not_handle_are_named(dtype):
    with pytest.raises(TypeError, match=f"has dtype {dtype}, which kiln does not handle"):
        kiln.describe(FakeDLPack((2, 3), dtype))


def test_more_than_four_dimensions_is_a_value_error():
    with pytest.raises(ValueError, match="at most 4 dimensions, got 5"):
        kiln.describe(np.zeros((1, 1, 1, 1, 1), np.float32))


def test_cuda_array_interface():
    v = kiln._native._view(FakeCAI((4, 8), "<f4", strides_bytes=(64, 4), ptr=8192, device_id=0))
    assert v["strides"] == (16, 1) and v["device"] == "cuda:0" and v["data_ptr"] == 8192
    assert kiln._native._view(FakeCAI((4, 8), "|u1"))["strides"] == (8, 1)
    assert kiln._native._view(FakeCAI((2, 2), "<f2", device_id=3))["device"] == "cuda:3"
    with pytest.raises(ValueError, match="not a whole number of 4-byte elements"):
        kiln.describe(FakeCAI((4, 8), "<f4", strides_bytes=(64, 2)))
    with pytest.raises(TypeError, match="typestr '<f8'"):
        kiln.describe(FakeCAI((4, 8), "<f8"))


def test_stream_arguments():
    x, out, scales = per_token_fakes(4, 128)
    convert = kiln._native._convert_only
    assert convert(x, out, scales) == 0  # not a torch/CuPy tensor: the legacy default stream
    assert convert(x, out, scales, 1234) == 1234
    assert convert(x, out, scales, type("S", (), {"cuda_stream": 77})()) == 77
    assert convert(x, out, scales, type("S", (), {"ptr": 78})()) == 78
    assert convert(x, out, scales, type("S", (), {"__cuda_stream__": lambda self: (0, 79)})()) == 79
    with pytest.raises(ValueError, match="stream must be a CUstream handle"):
        convert(x, out, scales, -1)
    with pytest.raises(TypeError, match="stream must be None, an int"):
        convert(x, out, scales, "default")
    with pytest.raises(TypeError, match="stream must be None, an int"):
        convert(x, out, scales, True)


def _stream(**attributes):
    return type("Stream", (), attributes)()


@pytest.mark.parametrize("stream, error, message", [
    # A stream object's handle is checked as an int given directly would be (these were std::bad_cast, IndexError or
    # nanobind's TypeError, naming neither the call nor the argument).
    (_stream(cuda_stream="abc"), kiln.KilnTypeError,
     r"stream.cuda_stream must be an int CUstream handle \(from 0 to 2\*\*64 - 1\), got str 'abc'"),
    (_stream(cuda_stream=True), kiln.KilnTypeError, r"stream.cuda_stream must be an int .*, got bool True"),
    (_stream(cuda_stream=2 ** 64), kiln.KilnValueError,
     r"stream.cuda_stream must be a CUstream handle \(an int from 0 to 2\*\*64 - 1\), got 18446744073709551616"),
    (_stream(ptr=-1), kiln.KilnValueError, r"stream.ptr must be a CUstream handle \(an int from 0 to 2\*\*64 - 1\), "
                                           r"got -1"),
    (_stream(ptr=None), kiln.KilnTypeError, r"stream.ptr must be an int CUstream handle .*, got NoneType None"),
    (_stream(__cuda_stream__=lambda self: (0,)), kiln.KilnTypeError,
     r"stream.__cuda_stream__\(\) must return a pair \(version, CUstream handle\), got tuple \(0,\)"),
    (_stream(__cuda_stream__=lambda self: 5), kiln.KilnTypeError,
     r"stream.__cuda_stream__\(\) must return a pair \(version, CUstream handle\), got int 5"),
    (_stream(__cuda_stream__=lambda self: [0, 5]), kiln.KilnTypeError,
     r"stream.__cuda_stream__\(\) must return a pair .*got list \[0, 5\]"),
    (_stream(__cuda_stream__=lambda self: (0, "x")), kiln.KilnTypeError,
     r"stream.__cuda_stream__\(\)\[1\] must be an int CUstream handle .*, got str 'x'"),
    (_stream(__cuda_stream__=lambda self: (0, -5)), kiln.KilnValueError,
     r"stream.__cuda_stream__\(\)\[1\] must be a CUstream handle .*, got -5"),
])
def test_bad_stream_objects_name_the_stream(stream, error, message):
    x, out, scales = per_token_fakes(4, 128)
    with pytest.raises(error, match="^convert: " + message):
        kiln._native._convert_only(x, out, scales, stream)
    with pytest.raises(error, match="^per_token_cast_to_fp8: " + message):
        PT(x, out=(out, scales), stream=stream)


def _cai(**fields):
    interface = {"shape": (4, 4), "typestr": "<f4", "data": (1 << 40, False), "version": 3}
    interface.update(fields)
    return type("CAI", (), {"__cuda_array_interface__": interface})()


@pytest.mark.parametrize("fields, error, message", [
    # Malformed interfaces name the argument and the field (these were std::bad_cast).
    ({"shape": [4, 4]}, kiln.KilnTypeError,
     r"\['shape'\] must be a tuple of ints \(the sizes\), got list \[4, 4\]"),
    ({"shape": ("a",)}, kiln.KilnTypeError, r"\['shape'\] must be a tuple of ints \(the sizes\), got tuple \('a',\)"),
    ({"shape": (4, True)}, kiln.KilnTypeError, r"\['shape'\] must be a tuple of ints"),
    ({"shape": (2 ** 64,)}, kiln.KilnTypeError, r"\['shape'\] must be a tuple of ints"),
    ({"shape": (-4, 4)}, kiln.KilnValueError, r"\['shape'\] must hold sizes >= 0, got \(-4, 4\)"),
    ({"strides": [16, 4]}, kiln.KilnTypeError,
     r"\['strides'\] must be None or a tuple of ints \(strides in bytes\), got list \[16, 4\]"),
    ({"data": None}, kiln.KilnTypeError,
     r"\['data'\] must be a pair \(pointer, read-only flag\) with the pointer an int from 0 to 2\*\*64 - 1, got "
     r"NoneType None"),
    ({"data": (1 << 40,)}, kiln.KilnTypeError, r"\['data'\] must be a pair .*got tuple"),
    ({"data": ("0x10", False)}, kiln.KilnTypeError, r"\['data'\] must be a pair .*got tuple \('0x10', False\)"),
    ({"data": (-1, False)}, kiln.KilnValueError, r"\['data'\] must be a pair .*, got \(-1, False\)"),
    ({"typestr": 5}, kiln.KilnTypeError, r"\['typestr'\] must be a str such as '<f4', got int 5"),
])
def test_malformed_cuda_array_interfaces_name_the_field(fields, error, message):
    with pytest.raises(error, match=r"^describe: tensor.__cuda_array_interface__" + message):
        kiln.describe(_cai(**fields))
    x, out, scales = per_token_fakes(4, 128)
    with pytest.raises(error, match=r"^per_token_cast_to_fp8: out_scales.__cuda_array_interface__" + message):
        PT(x, out=(out, _cai(**fields)))
    # A well-formed one, for contrast (0 is the pointer of an empty array).
    assert kiln.describe(_cai(shape=(0, 4), data=(0, False))) == "float32[0, 4] strides (4, 1) on cuda:0"


# ---- Every precondition of the casts, through DLPack tensors "on the GPU" ---------------------------------

def _per_token(m=4, k=256, **changes):
    x, out, scales = per_token_fakes(m, k)
    for name, value in changes.items():
        if name == "x":
            x = value
        elif name == "out":
            out = value
        else:
            scales = value
    return x, out, scales


BASE = 0x7F0000000000
PER_TOKEN_CASES = [
    # (what, tensors, exception, message)
    ("x dtype", _per_token(x=FakeDLPack((4, 256), "float16")), TypeError, "x must be bfloat16, got float16"),
    ("out dtype", _per_token(out=FakeDLPack((4, 256), "uint8", ptr=BASE + 0x10000000)), TypeError,
     "out must be float8_e4m3fn, got uint8"),
    ("scales dtype", _per_token(scales=FakeDLPack((4, 2), "float16", strides=(1, 4))), TypeError,
     "out_scales must be float32, got float16"),
    ("x on the host", _per_token(x=FakeDLPack((4, 256), "bfloat16", device="cpu")), ValueError,
     "x must be on a CUDA device, got cpu"),
    ("out on another GPU", _per_token(out=FakeDLPack((4, 256), "float8_e4m3fn", device="cuda:1")), ValueError,
     "out must be on the same device as x"),
    ("x not 2-D", _per_token(x=FakeDLPack((2, 2, 256), "bfloat16")), ValueError, "x must be 2-dimensional"),
    ("k not a multiple of 128", _per_token(k=200), ValueError, "multiple of 128"),
    ("out shape", _per_token(out=FakeDLPack((4, 128), "float8_e4m3fn", ptr=BASE + 0x10000000)), ValueError,
     "out must be"),
    ("x columns not dense", _per_token(x=FakeDLPack((4, 256), "bfloat16", strides=(512, 2))), ValueError,
     r"dense along its last dimension"),
    ("x row stride below k", _per_token(x=FakeDLPack((4, 256), "bfloat16", strides=(128, 1))), ValueError,
     "x must be row-major"),
    ("x rows not 16-byte apart", _per_token(x=FakeDLPack((4, 256), "bfloat16", strides=(260, 1))), ValueError,
     "x must be"),
    ("x misaligned", _per_token(x=FakeDLPack((4, 256), "bfloat16", ptr=BASE + 2)), ValueError,
     "x must be 16-byte aligned"),
    ("out not contiguous", _per_token(out=FakeDLPack((4, 256), "float8_e4m3fn", strides=(512, 1))), ValueError,
     "out must be contiguous"),
    ("out misaligned", _per_token(out=FakeDLPack((4, 256), "float8_e4m3fn", ptr=BASE + 0x10000008)), ValueError,
     "out must be 16-byte aligned"),
    ("scales shape", _per_token(scales=FakeDLPack((4, 1), "float32", strides=(1, 4))), ValueError,
     "out_scales must be"),
    ("scales K-major (DeepGEMM's per_token output)",
     _per_token(scales=FakeDLPack((4, 2), "float32", ptr=BASE + 0x20000000)), ValueError, "MN-major"),
    ("scales not TMA-aligned", _per_token(m=5, scales=FakeDLPack((5, 2), "float32", strides=(1, 5))), ValueError,
     "MN-major, TMA-aligned"),
    ("scales misaligned", _per_token(scales=FakeDLPack((4, 2), "float32", strides=(1, 4), ptr=BASE + 4)),
     ValueError, "out_scales must be 16-byte aligned"),
    # The kernel reads x while it writes both outputs: no two of them may share memory.
    ("out over x (in place)", _per_token(out=FakeDLPack((4, 256), "float8_e4m3fn", ptr=BASE)), ValueError,
     r"out must be memory that does not overlap x's \(x is bfloat16\[4, 256\].*\), got an overlap"),
    ("scales over x", _per_token(scales=FakeDLPack((4, 2), "float32", strides=(1, 4), ptr=BASE + 1024)), ValueError,
     "out_scales must be memory that does not overlap x's"),
    ("scales over out", _per_token(scales=FakeDLPack((4, 2), "float32", strides=(1, 4), ptr=BASE + 0x10000000)),
     ValueError, "out_scales must be memory that does not overlap out's"),
]


@pytest.mark.parametrize("what,tensors,error,message", PER_TOKEN_CASES, ids=[c[0] for c in PER_TOKEN_CASES])
def test_per_token_preconditions(what, tensors, error, message):
    x, out, scales = tensors
    with pytest.raises(error, match=message) as info:
        PT(x, out=(out, scales))
    assert str(info.value).startswith("per_token_cast_to_fp8: "), str(info.value)
    assert isinstance(info.value, kiln.KilnError)


def _per_block(n=300, k=256, **changes):
    x, out, scales = per_block_fakes(n, k)
    return changes.get("x", x), changes.get("out", out), changes.get("scales", scales)


PER_BLOCK_CASES = [
    ("x dtype", _per_block(x=FakeDLPack((300, 256), "float32")), TypeError, "x must be bfloat16, got float32"),
    ("scales dtype", _per_block(scales=FakeDLPack((3, 2), "bfloat16")), TypeError, "out_scales must be float32"),
    ("x on the host", _per_block(x=FakeDLPack((300, 256), "bfloat16", device="cpu")), ValueError,
     "must be on a CUDA device"),
    ("k not a multiple of 128", _per_block(k=100), ValueError, "multiple of 128"),
    ("scales shape", _per_block(scales=FakeDLPack((2, 2), "float32")), ValueError, r"ceil\(n / 128\)"),
    ("scales not contiguous", _per_block(scales=FakeDLPack((3, 2), "float32", strides=(1, 3))), ValueError,
     "out_scales must be contiguous"),
    ("scales misaligned", _per_block(scales=FakeDLPack((3, 2), "float32", ptr=BASE + 2)), ValueError,
     "out_scales must be 4-byte aligned"),
    ("out over x (in place)", _per_block(out=FakeDLPack((300, 256), "float8_e4m3fn", ptr=BASE + 4096)), ValueError,
     "out must be memory that does not overlap x's"),
    ("scales over x", _per_block(scales=FakeDLPack((3, 2), "float32", ptr=BASE)), ValueError,
     "out_scales must be memory that does not overlap x's"),
    ("scales over out", _per_block(scales=FakeDLPack((3, 2), "float32", ptr=BASE + 0x10000000 + 300 * 256 - 16)),
     ValueError, "out_scales must be memory that does not overlap out's"),
]


@pytest.mark.parametrize("what,tensors,error,message", PER_BLOCK_CASES, ids=[c[0] for c in PER_BLOCK_CASES])
def test_per_block_preconditions(what, tensors, error, message):
    x, out, scales = tensors
    with pytest.raises(error, match=message) as info:
        PB(x, out=(out, scales))
    assert str(info.value).startswith("per_block_cast_to_fp8: "), str(info.value)


def test_an_empty_problem_passes_without_a_gpu():
    x, out, scales = per_token_fakes(0, 256)
    assert PT(x, out=(out, scales)) == (out, scales)
    x, out, scales = per_block_fakes(0, 256)
    assert PB(x, out=(out, scales)) == (out, scales)


@pytest.mark.skipif(not NO_GPU, reason="would launch on fake pointers: only meaningful without a GPU")
def test_a_valid_call_without_a_gpu_is_a_cuda_error():
    x, out, scales = per_token_fakes(4, 256)
    with pytest.raises(kiln.CudaError) as info:
        PT(x, out=(out, scales))
    assert isinstance(info.value, RuntimeError) and str(info.value)


@pytest.mark.skipif(not NO_GPU, reason="only meaningful without a GPU")
def test_outputs_are_allocated_only_with_torch():
    # A CUDA tensor that is not a torch tensor: without PyTorch kiln cannot allocate the outputs.
    try:
        import torch  # noqa: F401
        pytest.skip("PyTorch is installed")
    except ImportError:
        pass
    with pytest.raises(TypeError, match="allocates outputs with PyTorch"):
        PT(FakeDLPack((4, 256), "bfloat16"))


def test_transform_sf_into_required_layout_checks_its_recipe_first():
    call = kiln.transform_sf_into_required_layout
    with pytest.raises(ValueError, match=r"recipe must be a tuple of 3 ints .* or of 2 .* got 128"):
        call(None, 8, 128, 128)
    with pytest.raises(ValueError, match=r"is_sfa must be True or False with a recipe of 3 .* got None"):
        call(None, 8, 128, (1, 128, 128))
    with pytest.raises(ValueError, match=r"is_sfa must be None with a recipe of 2 .* got True"):
        call(None, 8, 128, (1, 128), is_sfa=True)
    with pytest.raises(ValueError, match=r"mn must be an int >= 0, got -1"):
        call(None, -1, 128, (1, 128))
    with pytest.raises(ValueError, match=r"recipe must be a tuple of 3 ints .* got \(1, 128.0\)"):
        call(None, 8, 128, (1, 128.0))
    with pytest.raises(ValueError, match=r"num_groups must be None or an int >= 1, got 0"):
        call(None, 8, 128, (1, 128), num_groups=0)
    with pytest.raises(TypeError, match=r"sf must be a torch.Tensor, got builtins.list"):
        call([1.0], 8, 128, (1, 128))
