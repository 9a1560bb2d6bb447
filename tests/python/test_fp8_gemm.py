"""kiln.fp8_gemm_nt without a GPU: every validation error reachable on the host, with its exception kind and the
library's message, for both forms (bfloat16 d; float32 d, the weight-gradient form with c), the DeepGEMM arguments
kiln does not implement, and the argument conversion.

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


# ---- The forms and the recipe ------------------------------------------------------------------------------------

C = BASE + 0x50000000


def wgrad_fakes(m: int = 200, n: int = 576, k: int = 512, **changes):
    """a, sfa, b, sfb, d for the weight-gradient form: sfb per row (n, ceil(k/128)), MN-major and TMA-aligned, like
    sfa; d float32."""
    kb = cdiv(k, 128)
    base = {"sfb": FakeDLPack((n, kb), "float32", strides=(1, cdiv(n, 4) * 4), ptr=SFB),
            "d": FakeDLPack((m, n), "float32", ptr=D)}
    base.update(changes)
    return gemm_fakes(m, n, k, **base)


def test_c_needs_a_float32_d():
    tensors = gemm_fakes()
    c = FakeDLPack((200, 576), "float32", ptr=C)
    for c_arg in (c, tensors[4], np.zeros((200, 576), np.float32)):
        with pytest.raises(TypeError) as info:
            call(tensors, c=c_arg)
        message = str(info.value)
        assert message.startswith("fp8_gemm_nt: d must be float32 when c is given (the accumulating form"), message
        assert "got bfloat16 (d is bfloat16[200, 576]" in message
        assert isinstance(info.value, kiln.KilnTypeError)
    # As a keyword or positionally (DeepGEMM's order: a, b, d, c).
    with pytest.raises(TypeError, match="d must be float32 when c is given"):
        GEMM(tensors[:2], tensors[2:4], tensors[4], c)


@pytest.mark.parametrize("recipe", [(128, 1, 128), (1, 128), [1, 128, 64], "1,128,128", 7, (1, 1, 64)])
def test_recipes_kiln_does_not_have_are_value_errors(recipe):
    for tensors in (gemm_fakes(), wgrad_fakes()):
        with pytest.raises(ValueError, match=r"fp8_gemm_nt: recipe=.* is not supported by kiln: only recipe=None, "
                                             r"\(1, 128, 128\) .* or \(1, 1, 128\)") as info:
            call(tensors, recipe=recipe)
        assert isinstance(info.value, kiln.KilnValueError)
    # Before any tensor is looked at.
    with pytest.raises(ValueError, match="is not supported by kiln"):
        GEMM((None, None), (None, None), None, recipe=recipe)


def test_a_recipe_must_match_the_form_d_selects():
    with pytest.raises(ValueError, match=r"fp8_gemm_nt: recipe=\(1, 1, 128\) \(the weight-gradient form, B scaled "
                                         r"per row\) needs a float32 d, got bfloat16"):
        call(gemm_fakes(), recipe=(1, 1, 128))
    with pytest.raises(ValueError, match=r"fp8_gemm_nt: recipe=\(1, 128, 128\) \(B scaled per 128x128 block\) "
                                         r"writes a bfloat16 d, got float32"):
        call(wgrad_fakes(), recipe=[1, 128, 128])


@pytest.mark.skipif(not NO_GPU, reason="would launch on fake pointers: only meaningful without a GPU")
@pytest.mark.parametrize("kwargs", [{}, {"c": "d"}, {"c": "separate"}, {"recipe": (1, 1, 128)},
                                    {"recipe": [1, 1, 128], "c": "d"}, {"compiled_dims": "mnk"}])
def test_the_weight_gradient_form_passes_to_the_library(kwargs):
    # Everything valid: c None (D = A . B^T), d itself (D += A . B^T) or a separate tensor; the call gets as far as
    # the GPU, which this machine does not have.
    tensors = wgrad_fakes()
    if kwargs.get("c") == "d":
        kwargs = dict(kwargs, c=tensors[4])
    elif kwargs.get("c") == "separate":
        kwargs = dict(kwargs, c=FakeDLPack((200, 576), "float32", strides=(600, 1), ptr=C))  # padded rows: fine
    with pytest.raises(kiln.CudaError):
        call(tensors, **kwargs)


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
    ("d dtype (float16: neither form's output)", gemm_fakes(d=FakeDLPack((M, N), "float16", ptr=D)),
     TypeError, "d must be bfloat16, got float16"),
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
    # D is stored while A, B and their scales are read: it may overlap none of them.
    ("d overlapping a", gemm_fakes(d=FakeDLPack((M, N), "bfloat16", ptr=BASE)), ValueError,
     r"d must be memory that does not overlap a's \(a is float8_e4m3fn\[200, 512\].*\), got an overlap"),
    ("d overlapping sfa", gemm_fakes(d=FakeDLPack((M, N), "bfloat16", ptr=SFA + 64)), ValueError,
     "d must be memory that does not overlap sfa's"),
    ("d overlapping b", gemm_fakes(d=FakeDLPack((M, N), "bfloat16", ptr=B - 16)), ValueError,
     "d must be memory that does not overlap b's"),
    ("d overlapping sfb", gemm_fakes(d=FakeDLPack((M, N), "bfloat16", ptr=SFB)), ValueError,
     "d must be memory that does not overlap sfb's"),
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
    wgrad = kiln.plan("fp8_gemm_nt", n=576, k=512, m=200, accumulate=1, arch="sm_90a")
    assert wgrad and all("accumulate=true" in k["spec"] for k in wgrad)
    assert not {k["key"] for k in wgrad} & {k["key"] for k in kernels}
    # Calls without C (c=None) are planned apart: at short K another tile than calls with C.
    with_c = kiln.plan("fp8_gemm_nt", n=7168, k=512, m=4096, accumulate=1, arch="sm_90a")
    without_c = kiln.plan("fp8_gemm_nt", n=7168, k=512, m=4096, accumulate=1, no_c=1, arch="sm_90a")
    assert len(with_c) == 1 and len(without_c) == 1 and with_c[0]["key"] != without_c[0]["key"]
    assert "block_m=64 block_n=128 " in with_c[0]["spec"] and "block_m=128 " in without_c[0]["spec"]
    doc = kiln.fp8_gemm_nt.__doc__
    for words in ("MN-major", "get_mn_major_tma_aligned_tensor", "weight-gradient", "(1, 128, 128)", "(1, 1, 128)",
                  "c=None", "Differences from DeepGEMM", "accumulate=1"):
        assert words in doc


# ---- The weight-gradient form's preconditions (d float32), through DLPack tensors "on the GPU" -------------------

SFB_ROWS = FakeDLPack((N, 4), "float32", strides=(1, N), ptr=SFB)  # B's per-row scales, MN-major
WGRAD_CASES = [
    ("sfb 128x128 blocks (the bf16 form's)", wgrad_fakes(sfb=FakeDLPack((5, 4), "float32", ptr=SFB)), ValueError,
     r"sfb must be of shape \(576, 4\) \(n, ceil\(k / 128\)\): per-row 1x128 scales.*128x128-block scales .* are for "
     r"fp8_gemm_nt's bfloat16 form"),
    ("sfb row-major from a non-torch producer", wgrad_fakes(sfb=FakeDLPack((N, 4), "float32", ptr=SFB)), ValueError,
     r"sfb must be MN-major and TMA-aligned: strides \(1, s\) with s >= n.*get_mn_major_tma_aligned_tensor\(sfb\).*"
     r"got strides \(4, 1\) \(row-major\)"),
    ("sfb MN-major but not TMA-aligned", wgrad_fakes(sfb=FakeDLPack((N, 4), "float32", strides=(1, N + 2), ptr=SFB)),
     ValueError, r"sfb must be MN-major and TMA-aligned: stride\(1\) >= n == 576 and a multiple of 4"),
    ("sfb misaligned (TMA-loaded: 16 bytes)",
     wgrad_fakes(sfb=FakeDLPack((N, 4), "float32", strides=(1, N), ptr=SFB + 4)), ValueError,
     "sfb must be 16-byte aligned"),
    ("sfb dtype", wgrad_fakes(sfb=FakeDLPack((N, 4), "bfloat16", strides=(1, N), ptr=SFB)), TypeError,
     "sfb must be float32, got bfloat16"),
    ("d row stride not a multiple of 4 floats", wgrad_fakes(d=FakeDLPack((M, N), "float32", strides=(578, 1), ptr=D)),
     ValueError, r"d must be rows 16-byte aligned \(stride\(0\) a multiple of 4\)"),
    ("d misaligned", wgrad_fakes(d=FakeDLPack((M, N), "float32", ptr=D + 8)), ValueError, "d must be 16-byte aligned"),
    ("d on another GPU", wgrad_fakes(d=FakeDLPack((M, N), "float32", device="cuda:2", ptr=D)), ValueError,
     "d must be on the same device as a"),
    ("a dtype", wgrad_fakes(a=FakeDLPack((M, K), "bfloat16")), TypeError, "a must be float8_e4m3fn, got bfloat16"),
    ("sfa row-major", wgrad_fakes(sfa=FakeDLPack((M, 4), "float32", ptr=SFA)), ValueError,
     r"sfa must be MN-major and TMA-aligned"),
    ("k not a multiple of 16", wgrad_fakes(k=520), ValueError, r"a must be of a size\(1\) \(k\)"),
    ("d overlapping a", wgrad_fakes(d=FakeDLPack((M, N), "float32", ptr=BASE + 1024)), ValueError,
     "d must be memory that does not overlap a's"),
    ("d overlapping sfb", wgrad_fakes(d=FakeDLPack((M, N), "float32", ptr=SFB - 16)), ValueError,
     r"d must be memory that does not overlap sfb's \(sfb is float32\[576, 4\]"),
]

C_CASES = [
    ("c dtype", FakeDLPack((M, N), "bfloat16", ptr=C), TypeError, "c must be float32, got bfloat16"),
    ("c shape", FakeDLPack((M, 512), "float32", ptr=C), ValueError,
     r"c must be of shape \(200, 576\) \(m of a, n of b\), as d, got shape \(200, 512\)"),
    ("c on another GPU", FakeDLPack((M, N), "float32", device="cuda:1", ptr=C), ValueError,
     r"c must be on the same device as a \(cuda:0\), got cuda:1"),
    ("c on the host", FakeDLPack((M, N), "float32", device="cpu", ptr=C), ValueError, "c must be on a CUDA device"),
    ("c columns not dense", FakeDLPack((M, N), "float32", strides=(2 * N, 2), ptr=C), ValueError,
     r"c must be dense along its last dimension"),
    ("c misaligned", FakeDLPack((M, N), "float32", ptr=C + 2), ValueError, "c must be 4-byte aligned"),
    ("c overlapping d", FakeDLPack((M, N), "float32", ptr=D + 4 * N), ValueError,
     "c must be d itself or memory that does not overlap d's"),
    ("c at d's address with other strides", FakeDLPack((M, N), "float32", strides=(N + 8, 1), ptr=D), ValueError,
     r"c must be d itself when it starts at d's address: the same shape and strides"),
]


@pytest.mark.parametrize("what,tensors,error,message", WGRAD_CASES, ids=[c[0] for c in WGRAD_CASES])
def test_weight_gradient_preconditions(what, tensors, error, message):
    for kwargs in ({}, {"c": tensors[4]}, {"c": FakeDLPack((M, N), "float32", ptr=C)}):
        with pytest.raises(error, match=message) as info:
            call(tensors, **kwargs)
        text = str(info.value)
        assert text.startswith("fp8_gemm_nt: "), text  # not the C++ entry point's name
        assert isinstance(info.value, kiln.KilnError)


@pytest.mark.parametrize("what,c,error,message", C_CASES, ids=[c[0] for c in C_CASES])
def test_c_preconditions(what, c, error, message):
    with pytest.raises(error, match=message) as info:
        call(wgrad_fakes(), c=c)
    assert str(info.value).startswith("fp8_gemm_nt: c "), str(info.value)


def test_c_that_is_not_a_tensor():
    with pytest.raises(TypeError, match="fp8_gemm_nt: c must be a tensor"):
        call(wgrad_fakes(), c=[1.0, 2.0])


def test_weight_gradient_empty_problems_are_no_ops_without_a_gpu():
    for kwargs in ({}, {"c": "d"}):
        for m, n in ((0, 576), (200, 0)):
            tensors = wgrad_fakes(m=m, n=n)
            c = tensors[4] if kwargs else None
            assert call(tensors, c=c) is None
    with pytest.raises(ValueError, match=r"positive multiple of 16, got k == 0"):
        call(wgrad_fakes(k=0))


def test_numpy_float32_d_selects_the_weight_gradient_form():
    m, n, k = 4, 64, 128
    a, sfa = np.zeros((m, k), np.uint8), np.zeros((m, 1), np.float32)
    b, sfb, d = np.zeros((n, k), np.uint8), np.zeros((n, 1), np.float32), np.zeros((m, n), np.float32)
    with pytest.raises(TypeError, match=r"fp8_gemm_nt: a must be float8_e4m3fn, got uint8"):
        GEMM((a, sfa), (b, sfb), d, c=d)
    # A float32 d is left alone by the torch-only scale conversion.
    assert kiln._tensors.gemm_sfb(sfb, d) is sfb


# ---- The k-grouped weight-gradient GEMM (k_grouped_fp8_gemm_nt_contiguous), through DLPack tensors "on the GPU" ---

KGROUPED = kiln.k_grouped_fp8_gemm_nt_contiguous


def grouped_fakes(m: int = 256, n: int = 576, ks=(1024, 384, 0, 640), **changes):
    """(a, sfa), (b, sfb), d for DeepGEMM's k-grouped layout: a and b flat, their scales over every group's K
    blocks, MN-major and TMA-aligned; d float32 [G, m, n]."""
    total = sum(ks)
    t = {
        "a": FakeDLPack((m * total,), "float8_e4m3fn", ptr=BASE),
        "sfa": FakeDLPack((m, total // 128), "float32", strides=(1, cdiv(m, 4) * 4), ptr=SFA),
        "b": FakeDLPack((n * total,), "float8_e4m3fn", ptr=B),
        "sfb": FakeDLPack((n, total // 128), "float32", strides=(1, cdiv(n, 4) * 4), ptr=SFB),
        "d": FakeDLPack((len(ks), m, n), "float32", ptr=D),
    }
    t.update(changes)
    return (t["a"], t["sfa"]), (t["b"], t["sfb"]), t["d"], list(ks)


def test_k_grouped_arguments_kiln_checks_itself():
    a, b, d, ks = grouped_fakes()
    with pytest.raises(ValueError, match=r"k_grouped_fp8_gemm_nt_contiguous: recipe must be \(1, 1, 128\)"):
        KGROUPED(a, b, d, ks, None, recipe=(1, 128, 128))
    with pytest.raises(ValueError, match="compiled_dims must be a string of the letters m, n and k"):
        KGROUPED(a, b, d, ks, None, compiled_dims="x")
    with pytest.raises(TypeError, match="k_grouped_fp8_gemm_nt_contiguous: ks must be a sequence of ints"):
        KGROUPED(a, b, d, [1.5], None)
    with pytest.raises(TypeError, match=r"k_grouped_fp8_gemm_nt_contiguous: a must be a pair \(a_fp8, sfa\)"):
        KGROUPED(a[0], b, d, ks, None)


@pytest.mark.parametrize("changes, ks, message", [
    ({"d": FakeDLPack((3, 256, 576), "float32", ptr=D)}, (1024, 384, 0, 640),
     r"ks must hold one token count per group \(d.size\(0\) == 3\), got 4 counts"),
    ({}, (1024, 400, 0, 640), r"ks\[1\] must be a non-negative multiple of 128"),
    ({"a": FakeDLPack((256 * 2048 + 16,), "float8_e4m3fn", ptr=BASE)}, (1024, 384, 0, 640),
     r"a must be of 524288 elements \(m \* sum\(ks\)"),
    ({"d": FakeDLPack((256, 576), "float32", ptr=D)}, (1024, 384, 0, 640), "d must be 3-dimensional"),
    # Every group's D clear of every group's A (here D[0] over group 3's), B and scales.
    ({"d": FakeDLPack((4, 256, 576), "float32", ptr=BASE + 256 * 2000)}, (1024, 384, 0, 640),
     r"d must be memory that does not overlap a's \(a is float8_e4m3fn\[524288\]"),
    ({"d": FakeDLPack((4, 256, 576), "float32", ptr=SFB)}, (1024, 384, 0, 640),
     "d must be memory that does not overlap sfb's"),
])
def test_k_grouped_preconditions(changes, ks, message):
    a, b, d, _ = grouped_fakes(**changes)
    with pytest.raises(ValueError, match=message):
        KGROUPED(a, b, d, list(ks), None)


@pytest.mark.parametrize("ks, error, message", [
    # Counts whose sum wrapped around 64 bits used to pass (2**62 * 4 == 0 with empty a and b) or name a negative size.
    ([2 ** 62] * 4, ValueError, r"ks\[0\] must be a token count in 0..2147483647, got 4611686018427387904"),
    ([2 ** 56, 0, 0, 0], ValueError, r"ks\[0\] must be a token count in 0..2147483647, got 72057594037927936"),
    ([0, -128, 0, 0], ValueError, r"ks\[1\] must be a token count in 0..2147483647, got -128"),
    ([1024, 2147483520, 128, 0], ValueError, r"ks must hold at most 2147483647 tokens in all, got 2147484544"),
    # Beyond 64 bits, where the native call cannot take them: the same error, not nanobind's.
    ([2 ** 63, 0, 0, 0], ValueError, r"ks\[0\] must be a token count in 0..2147483647, got 9223372036854775808"),
    ([0, 0, -(2 ** 64), 0], ValueError, r"ks\[2\] must be a token count in 0..2147483647, got -18446744073709551616"),
    ([True, False, False, False], TypeError, r"ks must be a sequence of ints, got \[True, False, False, False\]"),
    (512, TypeError, r"ks must be a sequence of ints, got 512"),
])
def test_k_grouped_token_counts_are_bounded(ks, error, message):
    empty = FakeDLPack((0,), "float8_e4m3fn", ptr=BASE), FakeDLPack((256, 0), "float32", strides=(1, 256), ptr=SFA)
    empty_b = FakeDLPack((0,), "float8_e4m3fn", ptr=B), FakeDLPack((576, 0), "float32", strides=(1, 576), ptr=SFB)
    for a, b in ((empty, empty_b), grouped_fakes()[:2]):
        with pytest.raises(error, match="k_grouped_fp8_gemm_nt_contiguous: " + message) as info:
            KGROUPED(a, b, FakeDLPack((4, 256, 576), "float32", ptr=D), ks, None)
        assert isinstance(info.value, kiln.KilnError)


def test_k_grouped_group_errors_name_the_group():
    a, b, d, ks = grouped_fakes(d=FakeDLPack((4, 256, 576), "float32", strides=(256 * 578, 578, 1), ptr=D))
    with pytest.raises(ValueError, match=r"\(group 0 of 4, ks\[0\] = 1024\)"):
        KGROUPED(a, b, d, ks, None, c=d)


def test_k_grouped_empty_problems_are_no_ops_without_a_gpu():
    for m, n in ((0, 576), (256, 0)):
        a, b, d, ks = grouped_fakes(m=m, n=n)
        assert KGROUPED(a, b, d, ks, None) is None


@pytest.mark.skipif(not NO_GPU, reason="would launch on fake pointers: only meaningful without a GPU")
def test_k_grouped_valid_call_without_a_gpu_is_a_cuda_error():
    a, b, d, ks = grouped_fakes()
    with pytest.raises(kiln.CudaError):
        KGROUPED(a, b, d, ks, None, c=d)


# ---- The m-grouped contiguous GEMM (m_grouped_fp8_gemm_nt_contiguous), through DLPack tensors "on the GPU" --------

MGROUPED = kiln.m_grouped_fp8_gemm_nt_contiguous
IDX = BASE + 0x60000000


def m_grouped_fakes(m: int = 512, n: int = 576, k: int = 512, groups: int = 4, **changes):
    """(a, sfa), (b, sfb), d, m_indices for DeepGEMM's contiguous layout: m rows over `groups` experts' B [n, k]."""
    t = {
        "a": FakeDLPack((m, k), "float8_e4m3fn", ptr=BASE),
        "sfa": FakeDLPack((m, cdiv(k, 128)), "float32", strides=(1, cdiv(m, 4) * 4), ptr=SFA),
        "b": FakeDLPack((groups, n, k), "float8_e4m3fn", ptr=B),
        "sfb": FakeDLPack((groups, cdiv(n, 128), cdiv(k, 128)), "float32", ptr=SFB),
        "d": FakeDLPack((m, n), "bfloat16", ptr=D),
        "m_indices": FakeDLPack((m,), "int32", ptr=IDX),
    }
    t.update(changes)
    return (t["a"], t["sfa"]), (t["b"], t["sfb"]), t["d"], t["m_indices"]


def test_m_grouped_arguments_kiln_checks_itself():
    assert kiln.get_mk_alignment_for_contiguous_layout() == 128
    a, b, d, idx = m_grouped_fakes()
    with pytest.raises(ValueError, match=r"m_grouped_fp8_gemm_nt_contiguous: recipe must be None or \(1, 128, 128\)"):
        MGROUPED(a, b, d, idx, recipe=(1, 1, 128))
    with pytest.raises(ValueError, match="m_grouped_fp8_gemm_nt_contiguous: recipe=.* is not supported"):
        MGROUPED(a, b, d, idx, recipe=(1, 2, 3))
    with pytest.raises(ValueError, match="m_grouped_fp8_gemm_nt_contiguous: compiled_dims must be a string"):
        MGROUPED(a, b, d, idx, compiled_dims="x")
    with pytest.raises(TypeError, match=r"m_grouped_fp8_gemm_nt_contiguous: b must be a pair \(b_fp8, sfb\)"):
        MGROUPED(a, b[0], d, idx)


@pytest.mark.parametrize("changes, error, message", [
    ({"m_indices": FakeDLPack((512,), "int64", ptr=IDX)}, TypeError, "m_indices must be int32, got int64"),
    ({"m_indices": FakeDLPack((500,), "int32", ptr=IDX)}, ValueError, r"m_indices must be of shape \(512,\)"),
    ({"b": FakeDLPack((576, 512), "float8_e4m3fn", ptr=B)}, ValueError, "b must be 3-dimensional"),
    ({"sfb": FakeDLPack((4, 5, 5), "float32", ptr=SFB)}, ValueError,
     r"sfb must be of shape \(4, 5, 4\) \(groups, ceil\(n / 128\), ceil\(k / 128\)\)"),
    ({"b": FakeDLPack((4, 576, 512), "float8_e4m3fn", strides=(576 * 512 + 16, 512, 1), ptr=B)}, ValueError,
     r"b must be groups one after the other"),
    # D clear of every expert's weights and scales (here expert 3's), of A and of the indices.
    ({"d": FakeDLPack((512, 576), "bfloat16", ptr=B + 3 * 576 * 512)}, ValueError,
     r"d must be memory that does not overlap b's \(b is float8_e4m3fn\[4, 576, 512\]"),
    ({"d": FakeDLPack((512, 576), "bfloat16", ptr=SFB + 256)}, ValueError,
     "d must be memory that does not overlap sfb's"),
    ({"d": FakeDLPack((512, 576), "bfloat16", ptr=BASE)}, ValueError, "d must be memory that does not overlap a's"),
    ({"d": FakeDLPack((512, 576), "bfloat16", ptr=IDX - 512 * 576 * 2 + 16)}, ValueError,
     r"d must be memory that does not overlap m_indices's \(m_indices is int32\[512\]"),
])
def test_m_grouped_preconditions(changes, error, message):
    a, b, d, idx = m_grouped_fakes(**changes)
    with pytest.raises(error, match="m_grouped_fp8_gemm_nt_contiguous: " + message):
        MGROUPED(a, b, d, idx)


def test_m_grouped_empty_problems_are_no_ops_without_a_gpu():
    for m, n in ((0, 576), (256, 0)):
        a, b, d, idx = m_grouped_fakes(m=m, n=n)
        assert MGROUPED(a, b, d, idx) is None
    # DeepGEMM's other arguments, given explicitly, are accepted as they are.
    a, b, d, idx = m_grouped_fakes(m=0)
    assert MGROUPED(a, b, d, idx, compiled_dims="mn") is None
    assert MGROUPED(a, b, d, idx, recipe=(1, 128, 128), compiled_dims="nk", disable_ue8m0_cast=True) is None


@pytest.mark.skipif(not NO_GPU, reason="would launch on fake pointers: only meaningful without a GPU")
def test_m_grouped_valid_call_without_a_gpu_is_a_cuda_error():
    a, b, d, idx = m_grouped_fakes()
    with pytest.raises(kiln.CudaError):
        MGROUPED(a, b, d, idx)


def test_m_grouped_kernels_are_planned_without_a_gpu():
    kernels = kiln.plan("fp8_gemm_nt", n=4096, k=7168, m=4096, m_grouped=1, arch="sm_90a")
    assert len(kernels) == 1 and "m_grouped=true" in kernels[0]["spec"], kernels


# ---- The m-grouped masked GEMM (m_grouped_fp8_gemm_nt_masked), through DLPack tensors "on the GPU" ----------------

MASKED = kiln.m_grouped_fp8_gemm_nt_masked


def masked_fakes(groups: int = 4, m: int = 256, n: int = 576, k: int = 512, **changes):
    """(a, sfa), (b, sfb), d, masked_m for `groups` experts of m rows each: A [G, m, k] with its scales MN-major per
    group as get_mn_major_tma_aligned_tensor writes them, B [G, n, k], D [G, m, n]."""
    kb, aligned = cdiv(k, 128), cdiv(m, 4) * 4
    t = {
        "a": FakeDLPack((groups, m, k), "float8_e4m3fn", ptr=BASE),
        "sfa": FakeDLPack((groups, m, kb), "float32", strides=(kb * aligned, 1, aligned), ptr=SFA),
        "b": FakeDLPack((groups, n, k), "float8_e4m3fn", ptr=B),
        "sfb": FakeDLPack((groups, cdiv(n, 128), kb), "float32", ptr=SFB),
        "d": FakeDLPack((groups, m, n), "bfloat16", ptr=D),
        "masked_m": FakeDLPack((groups,), "int32", ptr=IDX),
    }
    t.update(changes)
    return (t["a"], t["sfa"]), (t["b"], t["sfb"]), t["d"], t["masked_m"]


def test_masked_arguments_kiln_checks_itself():
    a, b, d, counts = masked_fakes()
    with pytest.raises(ValueError, match=r"m_grouped_fp8_gemm_nt_masked: recipe must be None or \(1, 128, 128\)"):
        MASKED(a, b, d, counts, 64, recipe=(1, 1, 128))
    with pytest.raises(ValueError, match="m_grouped_fp8_gemm_nt_masked: compiled_dims must be a string"):
        MASKED(a, b, d, counts, 64, compiled_dims="x")
    with pytest.raises(TypeError, match=r"m_grouped_fp8_gemm_nt_masked: a must be a pair \(a_fp8, sfa\)"):
        MASKED(a[0], b, d, counts, 64)
    with pytest.raises(TypeError, match="m_grouped_fp8_gemm_nt_masked: expected_m must be an int, got float"):
        MASKED(a, b, d, counts, 64.0)
    with pytest.raises(ValueError, match="m_grouped_fp8_gemm_nt_masked: expected_m must be >= 0"):
        MASKED(a, b, d, counts, -1)
    # True is not 1 rows, and a count C cannot hold is an error naming expected_m (not nanobind's).
    with pytest.raises(kiln.KilnTypeError, match="m_grouped_fp8_gemm_nt_masked: expected_m must be an int, got bool"):
        MASKED(a, b, d, counts, True)
    with pytest.raises(kiln.KilnValueError, match="m_grouped_fp8_gemm_nt_masked: expected_m must be at most "
                                                  "9223372036854775807, got 9223372036854775808"):
        MASKED(a, b, d, counts, 2 ** 63)
    with pytest.raises(kiln.KilnValueError, match="m_grouped_fp8_gemm_nt_masked: expected_m must be >= 0, got "
                                                  "-1180591620717411303424"):
        MASKED(a, b, d, counts, -(2 ** 70))


@pytest.mark.parametrize("changes, error, message", [
    ({"masked_m": FakeDLPack((4,), "int64", ptr=IDX)}, TypeError, "masked_m must be int32, got int64"),
    ({"masked_m": FakeDLPack((5,), "int32", ptr=IDX)}, ValueError, r"masked_m must be of shape \(4,\)"),
    ({"a": FakeDLPack((1024, 512), "float8_e4m3fn", ptr=BASE)}, ValueError, "a must be 3-dimensional"),
    ({"d": FakeDLPack((4, 256, 584), "bfloat16", ptr=D)}, ValueError,
     r"d must be of shape \(4, 256, 576\) \(groups, m of a, n of b\)"),
    ({"a": FakeDLPack((4, 256, 512), "float8_e4m3fn", strides=(256 * 512 + 16, 512, 1), ptr=BASE)}, ValueError,
     r"a must be groups one after the other"),
    ({"d": FakeDLPack((4, 256, 576), "bfloat16", strides=(256 * 576 - 8, 576, 1), ptr=D)}, ValueError,
     r"d must be groups apart by a multiple of 8 elements"),
    # Every group's D clear of every group's A (here group 3's), B and scales, and of the counts.
    ({"d": FakeDLPack((4, 256, 576), "bfloat16", ptr=BASE + 3 * 256 * 512)}, ValueError,
     r"d must be memory that does not overlap a's \(a is float8_e4m3fn\[4, 256, 512\]"),
    ({"d": FakeDLPack((4, 256, 576), "bfloat16", ptr=SFA + 4096)}, ValueError,
     "d must be memory that does not overlap sfa's"),
    ({"d": FakeDLPack((4, 256, 576), "bfloat16", ptr=B + 2 * 576 * 512)}, ValueError,
     "d must be memory that does not overlap b's"),
    ({"d": FakeDLPack((4, 256, 576), "bfloat16", ptr=IDX - 4 * 256 * 576 * 2 + 16)}, ValueError,
     r"d must be memory that does not overlap masked_m's \(masked_m is int32\[4\]"),
])
def test_masked_preconditions(changes, error, message):
    a, b, d, counts = masked_fakes(**changes)
    with pytest.raises(error, match="m_grouped_fp8_gemm_nt_masked: " + message):
        MASKED(a, b, d, counts, 64)


def test_masked_empty_problems_are_no_ops_without_a_gpu():
    for m, n in ((0, 576), (256, 0)):
        a, b, d, counts = masked_fakes(m=m, n=n)
        assert MASKED(a, b, d, counts, 64) is None
    a, b, d, counts = masked_fakes(m=0)
    assert MASKED(a, b, d, counts, 0, recipe=(1, 128, 128), compiled_dims="mn", disable_ue8m0_cast=True) is None


@pytest.mark.skipif(not NO_GPU, reason="would launch on fake pointers: only meaningful without a GPU")
def test_masked_valid_call_without_a_gpu_is_a_cuda_error():
    a, b, d, counts = masked_fakes()
    with pytest.raises(kiln.CudaError):
        MASKED(a, b, d, counts, 64)


def test_masked_kernels_are_planned_without_a_gpu():
    kernels = kiln.plan("fp8_gemm_nt", n=7168, k=2048, m=32 * 20, m_grouped=1, masked=1, arch="sm_90a")
    assert len(kernels) == 1 and "masked=true" in kernels[0]["spec"], kernels
