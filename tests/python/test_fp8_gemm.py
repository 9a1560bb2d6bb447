"""kiln.fp8_gemm_nt without a GPU: every validation error reachable on the host, with its exception kind and the
library's message, the DeepGEMM arguments kiln does not implement, and the argument conversion.

Host arrays come from numpy. Tensors "on a CUDA device" are DLPack producers that describe memory they do not own
(fakes.py): the C++ operation checks every precondition before it touches memory or a GPU, so they reach each
check. A call that passes every check needs a GPU; without one it is a CudaError.
"""

from __future__ import annotations

import pytest

import kiln
from fakes import FakeCAI, FakeDLPack

np = pytest.importorskip("numpy")

GEMM = kiln.fp8_gemm_nt
NO_GPU = not kiln.devices()
BASE = 0x7F0000000000
SFA, B, SFB, D = BASE + 0x10000000, BASE + 0x20000000, BASE + 0x30000000, BASE + 0x40000000


def cdiv(x: int, y: int) -> int:
    return (x + y - 1) // y


def gemm_fakes(m: int = 200, n: int = 576, k: int = 512, **changes):
    """a, sfa, b, sfb, d as fp8_gemm_nt wants them (sfa MN-major, TMA-aligned), at distinct aligned addresses;
    `changes` replaces any of them by name."""
    kb = cdiv(k, 128)
    t = {
        "a": FakeDLPack((m, k), "float8_e4m3fn", ptr=BASE),
        "sfa": FakeDLPack((m, kb), "float32", strides=(1, cdiv(m, 4) * 4), ptr=SFA),
        "b": FakeDLPack((n, k), "float8_e4m3fn", ptr=B),
        "sfb": FakeDLPack((cdiv(n, 128), kb), "float32", ptr=SFB),
        "d": FakeDLPack((m, n), "bfloat16", ptr=D),
    }
    t.update(changes)
    return t["a"], t["sfa"], t["b"], t["sfb"], t["d"]


def call(tensors, **kwargs):
    a, sfa, b, sfb, d = tensors
    return GEMM((a, sfa), (b, sfb), d, **kwargs)


# ---- The forms and arguments of DeepGEMM's fp8_gemm_nt kiln does not implement --------------------------------

def test_the_accumulating_form_is_not_implemented():
    tensors = gemm_fakes()
    c = FakeDLPack((200, 576), "float32", ptr=BASE + 0x50000000)
    for c_arg in (c, tensors[4], np.zeros((200, 576), np.float32)):
        with pytest.raises(NotImplementedError) as info:
            call(tensors, c=c_arg)
        message = str(info.value)
        assert message.startswith("fp8_gemm_nt: c ")
        assert "accumulating form" in message and "not implemented" in message
        assert "c=None" in message and "bfloat16" in message and "128x128" in message  # the supported form
        assert isinstance(info.value, kiln.KilnNotImplementedError) and isinstance(info.value, kiln.KilnError)
    # As a keyword or positionally (DeepGEMM's order: a, b, d, c), and before any tensor is looked at.
    with pytest.raises(NotImplementedError):
        GEMM((None, None), (None, None), None, c)


@pytest.mark.parametrize("recipe", [(1, 1, 128), (128, 1, 128), (1, 128), [1, 128, 64], "1,128,128", 7])
def test_recipes_other_than_the_default_are_value_errors(recipe):
    with pytest.raises(ValueError, match=r"fp8_gemm_nt: recipe=.* is not supported by kiln: only recipe=None or "
                                         r"\(1, 128, 128\)") as info:
        call(gemm_fakes(), recipe=recipe)
    assert isinstance(info.value, kiln.KilnValueError)
    if recipe == (1, 1, 128):
        assert "weight-gradient" in str(info.value)


@pytest.mark.skipif(not NO_GPU, reason="would launch on fake pointers: only meaningful without a GPU")
@pytest.mark.parametrize("kwargs", [{"recipe": (1, 128, 128)}, {"recipe": [1, 128, 128]}, {"recipe": None},
                                    {"compiled_dims": "mnk"}, {"compiled_dims": "k"},
                                    {"disable_ue8m0_cast": True}])
def test_the_default_recipe_and_hints_pass_to_the_library(kwargs):
    # Everything valid: the call gets as far as the GPU, which this machine does not have.
    with pytest.raises(kiln.CudaError):
        call(gemm_fakes(), **kwargs)


@pytest.mark.parametrize("dims", ["nkx", "NK", 3, None])
def test_compiled_dims_must_name_m_n_k(dims):
    with pytest.raises(ValueError, match="compiled_dims must be a string of the letters m, n and k"):
        call(gemm_fakes(), compiled_dims=dims)


def test_a_and_b_must_be_pairs():
    a, sfa, b, sfb, d = gemm_fakes()
    with pytest.raises(TypeError, match=r"fp8_gemm_nt: a must be a pair \(a_fp8, sfa\) of tensors, got fakes.FakeDLPack"):
        GEMM(a, (b, sfb), d)
    with pytest.raises(TypeError, match=r"b must be a pair \(b_fp8, sfb\) of tensors, got a tuple of 3"):
        GEMM((a, sfa), (b, sfb, sfb), d)
    with pytest.raises(TypeError, match="a must be a pair"):
        GEMM(None, (b, sfb), d)
    with pytest.raises(TypeError, match="sfa must be a tensor .* got None"):
        GEMM((a, None), (b, sfb), d)
    with pytest.raises(TypeError, match="d must be a tensor .* got list"):
        GEMM((a, sfa), [b, sfb], [1.0])  # a list is a pair too


def test_stream_argument_errors_name_the_function():
    with pytest.raises(TypeError, match="fp8_gemm_nt: stream must be None, an int"):
        call(gemm_fakes(), stream="default")
    with pytest.raises(ValueError, match="fp8_gemm_nt: stream must be a CUstream handle"):
        call(gemm_fakes(), stream=-1)


# ---- Host arrays (numpy) -------------------------------------------------------------------------------------

def test_numpy_arrays_reach_the_library_checks():
    m, n, k = 4, 64, 128
    a, sfa = np.zeros((m, k), np.uint8), np.zeros((m, 1), np.float32)
    b, sfb, d = np.zeros((n, k), np.uint8), np.zeros((1, 1), np.float32), np.zeros((m, n), np.float16)
    # numpy has no float8 or bfloat16: the first dtype check speaks.
    with pytest.raises(TypeError, match=r"fp8_gemm_nt: a must be float8_e4m3fn, got uint8 \(a is uint8\[4, 128\]"):
        GEMM((a, sfa), (b, sfb), d)
    with pytest.raises(TypeError, match="a has dtype float64, which kiln does not handle"):
        GEMM((np.zeros((m, k)), sfa), (b, sfb), d)


def test_a_host_array_must_be_on_a_cuda_device():
    # Host memory with the right dtypes (a DLPack kDLCPU producer): the device check speaks, for each argument.
    for name in ("a", "sfa", "b", "sfb", "d"):
        tensors = dict(zip(("a", "sfa", "b", "sfb", "d"), gemm_fakes()))
        fake = tensors[name]
        tensors[name] = FakeDLPack(fake.shape, fake.dtype, strides=fake.strides, device="cpu", ptr=fake.ptr)
        with pytest.raises(kiln.KilnValueError, match=f"fp8_gemm_nt: {name} must be on a CUDA device, got cpu"):
            call(tuple(tensors.values()))


# ---- Every precondition of the operation, through DLPack tensors "on the GPU" ---------------------------------

M, N, K = 200, 576, 512  # k blocks: 4; n blocks: 5 (576 is not a multiple of 128)
CASES = [
    # (what, tensors, exception, message)
    ("a dtype", gemm_fakes(a=FakeDLPack((M, K), "bfloat16")), TypeError,
     "a must be float8_e4m3fn, got bfloat16"),
    ("sfa dtype", gemm_fakes(sfa=FakeDLPack((M, 4), "bfloat16", strides=(1, M), ptr=SFA)), TypeError,
     "sfa must be float32, got bfloat16"),
    ("b dtype", gemm_fakes(b=FakeDLPack((N, K), "uint8", ptr=B)), TypeError, "b must be float8_e4m3fn, got uint8"),
    ("sfb dtype", gemm_fakes(sfb=FakeDLPack((5, 4), "float16", ptr=SFB)), TypeError, "sfb must be float32, got float16"),
    ("d dtype (float32: the accumulating form's output)", gemm_fakes(d=FakeDLPack((M, N), "float32", ptr=D)),
     TypeError, "d must be bfloat16, got float32"),
    ("b on another GPU", gemm_fakes(b=FakeDLPack((N, K), "float8_e4m3fn", device="cuda:1", ptr=B)), ValueError,
     r"b must be on the same device as a \(cuda:0\), got cuda:1"),
    ("d on another GPU", gemm_fakes(d=FakeDLPack((M, N), "bfloat16", device="cuda:3", ptr=D)), ValueError,
     "d must be on the same device as a"),
    ("a not 2-D", gemm_fakes(a=FakeDLPack((2, M, K), "float8_e4m3fn")), ValueError, "a must be 2-dimensional"),
    ("b not 2-D", gemm_fakes(b=FakeDLPack((N * K,), "float8_e4m3fn", ptr=B)), ValueError, "b must be 2-dimensional"),
    ("b's k differs from a's", gemm_fakes(b=FakeDLPack((N, 640), "float8_e4m3fn", ptr=B)), ValueError,
     r"b must be of shape \(n, k\) with k == 512 \(a's k\), got shape \(576, 640\)"),
    ("d shape", gemm_fakes(d=FakeDLPack((M, 512), "bfloat16", ptr=D)), ValueError,
     r"d must be of shape \(200, 576\) \(m of a, n of b\), got shape \(200, 512\)"),
    ("sfa shape", gemm_fakes(sfa=FakeDLPack((M, 5), "float32", strides=(1, M), ptr=SFA)), ValueError,
     r"sfa must be of shape \(200, 4\) \(m, ceil\(k / 128\)\)"),
    ("sfb shape (floor instead of ceil of n / 128)", gemm_fakes(sfb=FakeDLPack((4, 4), "float32", ptr=SFB)),
     ValueError, r"sfb must be of shape \(5, 4\) \(ceil\(n / 128\), ceil\(k / 128\)\)"),
    ("n not a multiple of 8", gemm_fakes(n=580), ValueError, r"b must be of a size\(0\) \(n\) that is a multiple of 8"),
    ("k not a multiple of 16", gemm_fakes(k=520), ValueError, r"a must be of a size\(1\) \(k\) that is a positive multiple of 16"),
    ("a columns not dense", gemm_fakes(a=FakeDLPack((M, K), "float8_e4m3fn", strides=(2 * K, 2))), ValueError,
     r"a must be dense along its last dimension"),
    ("a row stride not a multiple of 16", gemm_fakes(a=FakeDLPack((M, K), "float8_e4m3fn", strides=(K + 8, 1))),
     ValueError, r"a must be rows 16-byte aligned"),
    ("b row stride below k", gemm_fakes(b=FakeDLPack((N, K), "float8_e4m3fn", strides=(256, 1), ptr=B)), ValueError,
     r"b must be row-major with stride\(0\) >= size\(1\) == 512"),
    ("d row stride below n", gemm_fakes(d=FakeDLPack((M, N), "bfloat16", strides=(512, 1), ptr=D)), ValueError,
     r"d must be row-major with stride\(0\) >= size\(1\) == 576"),
    ("d row stride not a multiple of 8", gemm_fakes(d=FakeDLPack((M, N), "bfloat16", strides=(580, 1), ptr=D)),
     ValueError, r"d must be rows 16-byte aligned"),
    ("sfa row-major (DeepGEMM's per_token_cast_to_fp8 output) from a non-torch producer",
     gemm_fakes(sfa=FakeDLPack((M, 4), "float32", ptr=SFA)), ValueError,
     r"sfa must be MN-major and TMA-aligned.*get_mn_major_tma_aligned_tensor.*got strides \(4, 1\) \(row-major\)"),
    ("sfa MN-major but not TMA-aligned", gemm_fakes(m=201, sfa=FakeDLPack((201, 4), "float32", strides=(1, 201),
                                                                         ptr=SFA)),
     ValueError, r"sfa must be MN-major and TMA-aligned: stride\(1\) >= m == 201 and a multiple of 4"),
    ("sfb not contiguous", gemm_fakes(sfb=FakeDLPack((5, 4), "float32", strides=(1, 5), ptr=SFB)), ValueError,
     "sfb must be contiguous"),
    ("a misaligned", gemm_fakes(a=FakeDLPack((M, K), "float8_e4m3fn", ptr=BASE + 8)), ValueError,
     "a must be 16-byte aligned"),
    ("sfa misaligned", gemm_fakes(sfa=FakeDLPack((M, 4), "float32", strides=(1, M), ptr=SFA + 4)), ValueError,
     "sfa must be 16-byte aligned"),
    ("b misaligned", gemm_fakes(b=FakeDLPack((N, K), "float8_e4m3fn", ptr=B + 1)), ValueError,
     "b must be 16-byte aligned"),
    ("sfb misaligned", gemm_fakes(sfb=FakeDLPack((5, 4), "float32", ptr=SFB + 2)), ValueError,
     "sfb must be 4-byte aligned"),
    ("d misaligned", gemm_fakes(d=FakeDLPack((M, N), "bfloat16", ptr=D + 8)), ValueError, "d must be 16-byte aligned"),
]


@pytest.mark.parametrize("what,tensors,error,message", CASES, ids=[c[0] for c in CASES])
def test_preconditions(what, tensors, error, message):
    with pytest.raises(error, match=message) as info:
        call(tensors)
    text = str(info.value)
    assert text.startswith("fp8_gemm_nt: "), text
    assert " is " in text and " on cuda:" in text, f"the message describes no tensor: {text}"
    assert isinstance(info.value, kiln.KilnError)


def test_cuda_array_interface_operands_are_checked_too():
    # __cuda_array_interface__ has no float8 typestr: such an a is refused by dtype, naming the way in.
    a, sfa, b, sfb, d = gemm_fakes()
    with pytest.raises(TypeError, match="fp8_gemm_nt: a must be float8_e4m3fn, got uint8"):
        GEMM((FakeCAI((M, K), "|u1", device_id=0), sfa), (b, sfb), d)
    with pytest.raises(ValueError, match="sfa must be MN-major"):
        GEMM((a, FakeCAI((M, 4), "<f4", device_id=0)), (b, sfb), d)


def test_empty_problems_are_no_ops_without_a_gpu():
    assert call(gemm_fakes(m=0)) is None
    assert call(gemm_fakes(n=0)) is None
    # k == 0 with something to compute is an error, not a zero matrix.
    with pytest.raises(ValueError, match=r"positive multiple of 16, got k == 0"):
        call(gemm_fakes(k=0))


@pytest.mark.skipif(not NO_GPU, reason="would launch on fake pointers: only meaningful without a GPU")
def test_scales_strides_the_library_accepts():
    # Wider MN-major strides than get_tma_aligned_size(m, 4) are fine; m == 1 and one k block need no strides.
    for m, k, strides in [(200, 512, (1, 256)), (1, 512, (1, 4)), (1, 128, (1, 1)), (5, 128, (1, 5))]:
        kb = cdiv(k, 128)
        tensors = gemm_fakes(m=m, k=k, sfa=FakeDLPack((m, kb), "float32", strides=strides, ptr=SFA))
        with pytest.raises(kiln.CudaError):  # every check passed: the launch needs the GPU this machine lacks
            call(tensors)


@pytest.mark.skipif(not NO_GPU, reason="would launch on fake pointers: only meaningful without a GPU")
def test_a_valid_call_without_a_gpu_is_a_cuda_error():
    with pytest.raises(kiln.CudaError) as info:
        call(gemm_fakes())
    assert isinstance(info.value, RuntimeError) and str(info.value)


def test_plan_and_docstring():
    kernels = kiln.plan("fp8_gemm_nt", n=576, k=512, m=200, arch="sm_90a")
    assert kernels and all(k["op"] == "fp8_gemm_nt" for k in kernels)
    doc = kiln.fp8_gemm_nt.__doc__
    for words in ("MN-major", "get_mn_major_tma_aligned_tensor", "NotImplementedError", "(1, 128, 128)"):
        assert words in doc
