"""kiln.bf16_gemm_nt without a GPU: the arguments the wrapper checks itself, every validation error the library
reports on the host (its exception kind and message, naming bf16_gemm_nt with or without c), empty problems, the
overrides, and the plans of each dtype of d. The same for the m-grouped forms, m_grouped_bf16_gemm_nt_contiguous, its
nn form (m_grouped_bf16_gemm_nn_contiguous) and m_grouped_bf16_gemm_nt_masked (errors naming the function and the
argument, expected_m, their plans), and the k-grouped weight gradients, k_grouped_bf16_gemm_tn_contiguous (its
signature and export, the ks and compiled_dims the wrapper checks, every host check of the library naming the function
and the argument, empty problems, ks_tensor left unread, its plans per token count).

Tensors "on a CUDA device" are DLPack producers that describe memory they do not own (fakes.py): the C++ operation
checks every precondition before it touches memory or a GPU. A call that passes every check needs a GPU; without one
it is a CudaError.
"""

from __future__ import annotations

import inspect

import pytest

import kiln
from fakes import FakeDLPack

GEMM = kiln.bf16_gemm_nt
NO_GPU = not kiln.devices()
BASE = 0x7F0000000000
B, D, C = BASE + 0x20000000, BASE + 0x40000000, BASE + 0x60000000


def fakes(m: int = 200, n: int = 576, k: int = 520, **changes):
    t = {"a": FakeDLPack((m, k), "bfloat16", ptr=BASE), "b": FakeDLPack((n, k), "bfloat16", ptr=B),
         "d": FakeDLPack((m, n), "bfloat16", ptr=D)}
    t.update(changes)
    return t["a"], t["b"], t["d"]


def test_arguments_kiln_checks_itself():
    a, b, d = fakes()
    with pytest.raises(ValueError, match="bf16_gemm_nt: compiled_dims must be a string of the letters m, n and k"):
        GEMM(a, b, d, compiled_dims="nx")
    with pytest.raises(TypeError, match="bf16_gemm_nt: a must be"):
        GEMM(3, b, d)


@pytest.mark.parametrize("changes, error, message", [
    ({"a": FakeDLPack((200, 520), "float8_e4m3fn", ptr=BASE)}, TypeError, "a must be bfloat16, got float8_e4m3fn"),
    ({"d": FakeDLPack((200, 576), "float16", ptr=D)}, TypeError, "d must be bfloat16 or float32, got float16"),
    ({"b": FakeDLPack((576, 512), "bfloat16", ptr=B)}, ValueError, r"b must be of shape \(n, k\) with k == 520"),
    ({"d": FakeDLPack((200, 584), "bfloat16", ptr=D)}, ValueError, r"d must be of shape \(200, 576\)"),
    ({"b": FakeDLPack((580, 520), "bfloat16", ptr=B), "d": FakeDLPack((200, 580), "bfloat16", ptr=D)}, ValueError,
     r"b must be of a size\(0\) \(n\) that is a multiple of 8"),
    ({"a": FakeDLPack((200, 520), "bfloat16", ptr=BASE + 8)}, ValueError, "a must be 16-byte aligned"),
    ({"d": FakeDLPack((200, 576), "bfloat16", ptr=BASE + 4096)}, ValueError, "d must be memory that does not overlap a"),
])
def test_preconditions(changes, error, message):
    a, b, d = fakes(**changes)
    with pytest.raises(error, match="bf16_gemm_nt: " + message):
        GEMM(a, b, d)


D32 = FakeDLPack((200, 576), "float32", ptr=D)


@pytest.mark.parametrize("d, c, error, message", [
    (FakeDLPack((200, 576), "bfloat16", ptr=D), FakeDLPack((200, 576), "float32", ptr=C), TypeError,
     "d must be float32, got bfloat16"),
    (D32, FakeDLPack((200, 576), "bfloat16", ptr=C), TypeError, "c must be float32, got bfloat16"),
    (D32, FakeDLPack((200, 568), "float32", ptr=C), ValueError,
     r"c must be of shape \(200, 576\) \(m of a, n of b\), as d"),
    (D32, FakeDLPack((200, 576), "float32", ptr=D, strides=(580, 1)), ValueError,
     "c must be d itself when it starts at d's address"),
    (D32, FakeDLPack((200, 576), "float32", ptr=D + 4096), ValueError,
     "c must be d itself or memory that does not overlap d's"),
    (D32, FakeDLPack((200, 576), "float32", ptr=C + 2), ValueError, "c must be 4-byte aligned"),
])
def test_c_preconditions_name_bf16_gemm_nt(d, c, error, message):
    a, b, _ = fakes()
    with pytest.raises(error, match="^bf16_gemm_nt: " + message):
        GEMM(a, b, d, c)


@pytest.mark.skipif(not NO_GPU, reason="would launch on fake pointers: only meaningful without a GPU")
def test_float32_d_with_or_without_c_passes_every_check():
    a, b, _ = fakes()
    for c in (None, D32, FakeDLPack((200, 576), "float32", ptr=C, strides=(577, 1))):
        with pytest.raises(kiln.CudaError):
            GEMM(a, b, D32, c)


@pytest.mark.skipif(not NO_GPU, reason="would launch on fake pointers: only meaningful without a GPU")
def test_the_nn_tn_and_tt_layouts_pass_every_check_on_row_major_tensors():
    a_km, b_nk = FakeDLPack((200, 520), ptr=BASE), FakeDLPack((576, 520), ptr=B)
    a_km_t, b_kn = FakeDLPack((520, 200), ptr=BASE), FakeDLPack((520, 576), ptr=B)
    d = FakeDLPack((200, 576), ptr=D)
    for function, a, b in ((kiln.bf16_gemm_nn, a_km, b_kn), (kiln.bf16_gemm_tn, a_km_t, b_kn),
                           (kiln.bf16_gemm_tt, a_km_t, b_nk), (GEMM, a_km, b_nk)):
        with pytest.raises(kiln.CudaError):
            function(a, b, d)
    # bf16_gemm_nt itself takes transposed views (stride(0) == 1): MN-major operands.
    with pytest.raises(kiln.CudaError):
        GEMM(FakeDLPack((200, 520), ptr=BASE, strides=(1, 200)), FakeDLPack((576, 520), ptr=B, strides=(1, 576)), d)


@pytest.mark.parametrize("function, a, b, error, message", [
    ("bf16_gemm_tn", FakeDLPack((520, 200), ptr=BASE), FakeDLPack((576, 520), ptr=B), ValueError,
     r"b must be of shape \(n, k\) with k == 520"),
    ("bf16_gemm_nn", FakeDLPack((200, 520), ptr=BASE), FakeDLPack((520, 576), ptr=B, strides=(580, 1)), ValueError,
     r"b must be N-major with columns 16-byte aligned"),
    ("bf16_gemm_tt", FakeDLPack((520, 200), ptr=BASE, strides=(2, 1040)), FakeDLPack((576, 520), ptr=B), ValueError,
     r"a must be K-major \(stride\(1\) == 1\) or M-major"),
    ("bf16_gemm_tn", FakeDLPack((520, 200), "float16", ptr=BASE), FakeDLPack((520, 576), ptr=B), TypeError,
     "a must be bfloat16, got float16"),
])
def test_layout_errors_name_the_function_called(function, a, b, error, message):
    with pytest.raises(error, match=f"^{function}: " + message):
        getattr(kiln, function)(a, b, FakeDLPack((200, 576), ptr=D))
    with pytest.raises(ValueError, match=f"^{function}: compiled_dims must be"):
        getattr(kiln, function)(a, b, FakeDLPack((200, 576), ptr=D), compiled_dims="x")


def test_k_must_be_a_multiple_of_8():
    a, b, d = fakes(k=516)
    with pytest.raises(ValueError, match=r"bf16_gemm_nt: a must be of a size\(1\) \(k\) that is a positive multiple of 8"):
        GEMM(a, b, d)


def test_empty_problems_are_no_ops_without_a_gpu():
    for m, n in ((0, 576), (200, 0)):
        assert GEMM(*fakes(m=m, n=n)) is None


@pytest.mark.skipif(not NO_GPU, reason="would launch on fake pointers: only meaningful without a GPU")
def test_a_valid_call_without_a_gpu_is_a_cuda_error():
    with pytest.raises(kiln.CudaError):
        GEMM(*fakes())


def test_overrides():
    try:
        kiln.set_bf16_gemm_overrides(block_m=128, block_n=256, cluster_m=2)
        assert kiln.get_bf16_gemm_overrides() == {"block_m": 128, "block_n": 256, "stages": 0, "cluster_m": 2}
        with pytest.raises(ValueError, match="set_bf16_gemm_overrides: block_n must be 0 .* or at most 128 with "
                                             "block_m 256"):
            kiln.set_bf16_gemm_overrides(block_m=256, block_n=256)
        assert kiln.get_bf16_gemm_overrides()["block_n"] == 256  # an error changes nothing
    finally:
        kiln.set_bf16_gemm_overrides()
    assert kiln.get_bf16_gemm_overrides() == {"block_m": 0, "block_n": 0, "stages": 0, "cluster_m": 0}


def test_kernels_are_planned_without_a_gpu():
    kernels = kiln.plan("bf16_gemm_nt", n=7168, k=2048, m=4096, arch="sm_90a")
    assert len(kernels) == 1 and kernels[0]["spec"].startswith("n=7168 k=2048 block_m="), kernels
    forced = kiln.plan("bf16_gemm_nt", n=7168, k=2048, m=4096, block_m=256, block_n=128, cluster_m=2, arch="sm_90a")
    assert "block_m=256 block_n=128" in forced[0]["spec"] and "cluster_m=2" in forced[0]["spec"], forced
    assert "bf16_gemm_nt" in [op["name"] for op in kiln.list_ops()]
    assert all("epilogue" not in k["spec"] for k in kiln.plan("bf16_gemm_nt", n=7168, k=2048, m=4096, arch="sm_90a"))
    stored = kiln.plan("bf16_gemm_nt", n=7168, k=2048, m=4096, fp32=1, arch="sm_90a")
    added = kiln.plan("bf16_gemm_nt", n=7168, k=2048, m=1, accumulate=1, arch="sm_90a")
    assert stored and all("epilogue=1" in k["spec"] for k in stored), stored
    assert added and all("epilogue=2" in k["spec"] for k in added), added
    tn = kiln.plan("bf16_gemm_nt", n=7168, k=2048, m=4096, m_major_a=1, n_major_b=1, arch="sm_90a")
    assert tn and all("mn_major=3" in k["spec"] for k in tn), tn


# ---- The m-grouped GEMMs (m_grouped_bf16_gemm_nt_contiguous and _masked), through DLPack tensors "on the GPU" -------

MGROUPED = kiln.m_grouped_bf16_gemm_nt_contiguous
MASKED = kiln.m_grouped_bf16_gemm_nt_masked
IDX = BASE + 0x70000000


def test_m_grouped_names_are_exported():
    namespace: dict = {}
    exec("from kiln import *", namespace)
    for name in ("m_grouped_bf16_gemm_nt_contiguous", "m_grouped_bf16_gemm_nn_contiguous",
                 "m_grouped_bf16_gemm_nt_masked"):
        assert name in kiln.__all__ and namespace[name] is getattr(kiln, name)
        assert callable(getattr(kiln._native, name))
    assert kiln.get_mk_alignment_for_contiguous_layout() == 128
    assert "m_grouped_bf16_gemm_nt_contiguous" in kiln.get_mk_alignment_for_contiguous_layout.__doc__


def m_grouped_fakes(m: int = 512, n: int = 576, k: int = 520, groups: int = 4, nn: bool = False, **changes):
    """a, b, d, m_indices for DeepGEMM's contiguous layout: m rows over `groups` experts' B [n, k] (n and k multiples
    of 8, not of 64), or with `nn` B [k, n] (each expert's weights stored N-major)."""
    t = {
        "a": FakeDLPack((m, k), "bfloat16", ptr=BASE),
        "b": FakeDLPack((groups, k, n) if nn else (groups, n, k), "bfloat16", ptr=B),
        "d": FakeDLPack((m, n), "bfloat16", ptr=D),
        "m_indices": FakeDLPack((m,), "int32", ptr=IDX),
    }
    t.update(changes)
    return t["a"], t["b"], t["d"], t["m_indices"]


def test_m_grouped_arguments_kiln_checks_itself():
    a, b, d, idx = m_grouped_fakes()
    for dims in ("x", "nkq", 3, None):
        with pytest.raises(ValueError, match="^m_grouped_bf16_gemm_nt_contiguous: compiled_dims must be a string of "
                                             "the letters m, n and k"):
            MGROUPED(a, b, d, idx, compiled_dims=dims)
    with pytest.raises(TypeError, match="^m_grouped_bf16_gemm_nt_contiguous: a must be"):
        MGROUPED(3, b, d, idx)
    with pytest.raises(TypeError, match="^m_grouped_bf16_gemm_nt_contiguous: m_indices must be"):
        MGROUPED(a, b, d, [0] * 512)


@pytest.mark.parametrize("changes, error, message", [
    ({"a": FakeDLPack((512, 520), "float8_e4m3fn", ptr=BASE)}, TypeError, "a must be bfloat16, got float8_e4m3fn"),
    ({"b": FakeDLPack((4, 576, 520), "float16", ptr=B)}, TypeError, "b must be bfloat16, got float16"),
    ({"d": FakeDLPack((512, 576), "float32", ptr=D)}, TypeError, "d must be bfloat16, got float32"),
    ({"m_indices": FakeDLPack((512,), "int64", ptr=IDX)}, TypeError, "m_indices must be int32, got int64"),
    ({"m_indices": FakeDLPack((512,), "int32", ptr=IDX, device="cpu")}, ValueError,
     "m_indices must be on a CUDA device"),
    ({"a": FakeDLPack((4, 128, 520), "bfloat16", ptr=BASE)}, ValueError, "a must be 2-dimensional"),
    ({"b": FakeDLPack((576, 520), "bfloat16", ptr=B)}, ValueError, "b must be 3-dimensional"),
    ({"m_indices": FakeDLPack((512, 1), "int32", ptr=IDX)}, ValueError, "m_indices must be 1-dimensional"),
    ({"b": FakeDLPack((4, 576, 512), "bfloat16", ptr=B)}, ValueError,
     r"b must be of shape \(groups, n, k\) with k == 520 \(a's k\)"),
    ({"b": FakeDLPack((0, 576, 520), "bfloat16", ptr=B)}, ValueError, "b must be of shape .* with 1 <= groups"),
    ({"m_indices": FakeDLPack((500,), "int32", ptr=IDX)}, ValueError, r"m_indices must be of shape \(512,\)"),
    ({"m_indices": FakeDLPack((512,), "int32", strides=(2,), ptr=IDX)}, ValueError, "m_indices must be contiguous"),
    ({"d": FakeDLPack((512, 584), "bfloat16", ptr=D)}, ValueError, r"d must be of shape \(512, 576\)"),
    ({"b": FakeDLPack((4, 580, 520), "bfloat16", ptr=B), "d": FakeDLPack((512, 580), "bfloat16", ptr=D)}, ValueError,
     r"b must be of a size\(1\) \(n\) that is a multiple of 8"),
    ({"a": FakeDLPack((512, 520), "bfloat16", strides=(1, 512), ptr=BASE)}, ValueError, "a must be K-major"),
    ({"b": FakeDLPack((4, 576, 520), "bfloat16", strides=(576 * 520 + 8, 520, 1), ptr=B)}, ValueError,
     "b must be groups one after the other"),
    ({"d": FakeDLPack((512, 576), "bfloat16", ptr=IDX - 4096)}, ValueError,
     "d must be memory that does not overlap m_indices's"),
])
def test_m_grouped_preconditions(changes, error, message):
    a, b, d, idx = m_grouped_fakes(**changes)
    with pytest.raises(error, match="^m_grouped_bf16_gemm_nt_contiguous: " + message):
        MGROUPED(a, b, d, idx)


def test_m_grouped_empty_problems_are_no_ops_without_a_gpu():
    for m, n in ((0, 576), (256, 0)):
        assert MGROUPED(*m_grouped_fakes(m=m, n=n)) is None
    # DeepGEMM's compiled_dims, given explicitly (any string of m, n and k), is accepted as it is.
    assert MGROUPED(*m_grouped_fakes(m=0), compiled_dims="mnk") is None
    assert MGROUPED(*m_grouped_fakes(m=0), "nk", stream=None) is None


@pytest.mark.skipif(not NO_GPU, reason="would launch on fake pointers: only meaningful without a GPU")
def test_m_grouped_valid_call_without_a_gpu_is_a_cuda_error():
    with pytest.raises(kiln.CudaError):
        MGROUPED(*m_grouped_fakes())


def test_m_grouped_kernels_are_planned_without_a_gpu():
    kernels = kiln.plan("bf16_gemm_nt", n=4096, k=7168, m=4096, m_grouped=1, arch="sm_90a")
    assert len(kernels) == 1 and "grouping=1" in kernels[0]["spec"], kernels
    assert any(f"block_m={bm} " in kernels[0]["spec"] for bm in (64, 128)), kernels
    dense = kiln.plan("bf16_gemm_nt", n=4096, k=7168, m=4096, arch="sm_90a")
    assert dense[0]["key"] != kernels[0]["key"], "the m-grouped kernel must be keyed apart from the dense one"


NN = kiln.m_grouped_bf16_gemm_nn_contiguous


@pytest.mark.parametrize("changes, error, message", [
    ({"b": FakeDLPack((4, 520, 576), "float16", ptr=B)}, TypeError, "b must be bfloat16, got float16"),
    ({"b": FakeDLPack((4, 512, 576), "bfloat16", ptr=B)}, ValueError,
     r"b must be of shape \(groups, k, n\) with k == 520 \(a's k\)"),
    ({"b": FakeDLPack((4, 520, 576), "bfloat16", strides=(520 * 576, 1, 520), ptr=B)}, ValueError,
     r"b must be N-major \(stride\(2\) == 1\)"),
    ({"b": FakeDLPack((4, 520, 576), "bfloat16", strides=(520 * 576 + 8, 576, 1), ptr=B)}, ValueError,
     r"b must be groups one after the other: strides \(k \* s, s, 1\)"),
    ({"b": FakeDLPack((4, 520, 576), "bfloat16", strides=(520 * 580, 580, 1), ptr=B)}, ValueError,
     "b must be N-major with columns 16-byte aligned"),
    ({"d": FakeDLPack((512, 584), "bfloat16", ptr=D)}, ValueError, r"d must be of shape \(512, 576\)"),
])
def test_m_grouped_nn_preconditions(changes, error, message):
    a, b, d, idx = m_grouped_fakes(nn=True, **changes)
    with pytest.raises(error, match="^m_grouped_bf16_gemm_nn_contiguous: " + message):
        NN(a, b, d, idx)
    with pytest.raises(ValueError, match="^m_grouped_bf16_gemm_nn_contiguous: compiled_dims must be"):
        NN(*m_grouped_fakes(nn=True), compiled_dims="x")


def test_m_grouped_nn_empty_problems_padded_rows_and_plans():
    for m, n in ((0, 576), (256, 0)):
        assert NN(*m_grouped_fakes(nn=True, m=m, n=n)) is None
    if NO_GPU:  # every check passes: B's rows padded to 584 elements, then the launch needs a GPU
        with pytest.raises(kiln.CudaError):
            NN(*m_grouped_fakes(nn=True, b=FakeDLPack((4, 520, 576), "bfloat16", strides=(520 * 584, 584, 1), ptr=B)))
    kernels = kiln.plan("bf16_gemm_nt", n=4096, k=7168, m=4096, m_grouped=1, n_major_b=1, arch="sm_90a")
    assert len(kernels) == 1 and "mn_major=2" in kernels[0]["spec"] and "grouping=1" in kernels[0]["spec"], kernels
    nt = kiln.plan("bf16_gemm_nt", n=4096, k=7168, m=4096, m_grouped=1, arch="sm_90a")
    assert nt[0]["key"] != kernels[0]["key"]


def masked_fakes(groups: int = 4, m: int = 256, n: int = 576, k: int = 520, **changes):
    """a, b, d, masked_m for `groups` experts of m rows each: A [G, m, k], B [G, n, k], D [G, m, n]."""
    t = {
        "a": FakeDLPack((groups, m, k), "bfloat16", ptr=BASE),
        "b": FakeDLPack((groups, n, k), "bfloat16", ptr=B),
        "d": FakeDLPack((groups, m, n), "bfloat16", ptr=D),
        "masked_m": FakeDLPack((groups,), "int32", ptr=IDX),
    }
    t.update(changes)
    return t["a"], t["b"], t["d"], t["masked_m"]


def test_masked_arguments_kiln_checks_itself():
    a, b, d, counts = masked_fakes()
    for dims in ("x", 3, None):
        with pytest.raises(ValueError, match="^m_grouped_bf16_gemm_nt_masked: compiled_dims must be a string"):
            MASKED(a, b, d, counts, 64, compiled_dims=dims)
    for expected_m, given in ((64.0, "float"), ("64", "str"), (None, "NoneType"), (True, "bool")):
        with pytest.raises(TypeError, match=f"^m_grouped_bf16_gemm_nt_masked: expected_m must be an int, got {given}"):
            MASKED(a, b, d, counts, expected_m)
    with pytest.raises(kiln.KilnValueError, match="^m_grouped_bf16_gemm_nt_masked: expected_m must be at most "
                                                  "9223372036854775807, got 9223372036854775808$"):
        MASKED(a, b, d, counts, 2 ** 63)
    with pytest.raises(ValueError, match=r"^m_grouped_bf16_gemm_nt_masked: expected_m must be >= 0 .*got -1"):
        MASKED(a, b, d, counts, -1)
    with pytest.raises(TypeError, match="^m_grouped_bf16_gemm_nt_masked: masked_m must be"):
        MASKED(a, b, d, [64] * 4, 64)


@pytest.mark.parametrize("changes, error, message", [
    ({"a": FakeDLPack((4, 256, 520), "float32", ptr=BASE)}, TypeError, "a must be bfloat16, got float32"),
    ({"b": FakeDLPack((4, 576, 520), "float8_e4m3fn", ptr=B)}, TypeError, "b must be bfloat16, got float8_e4m3fn"),
    ({"d": FakeDLPack((4, 256, 576), "float16", ptr=D)}, TypeError, "d must be bfloat16, got float16"),
    ({"masked_m": FakeDLPack((4,), "int64", ptr=IDX)}, TypeError, "masked_m must be int32, got int64"),
    ({"a": FakeDLPack((1024, 520), "bfloat16", ptr=BASE)}, ValueError, "a must be 3-dimensional"),
    ({"b": FakeDLPack((576, 520), "bfloat16", ptr=B)}, ValueError, "b must be 3-dimensional"),
    ({"d": FakeDLPack((1024, 576), "bfloat16", ptr=D)}, ValueError, "d must be 3-dimensional"),
    ({"masked_m": FakeDLPack((4, 1), "int32", ptr=IDX)}, ValueError, "masked_m must be 1-dimensional"),
    ({"b": FakeDLPack((4, 576, 512), "bfloat16", ptr=B)}, ValueError,
     r"b must be of shape \(groups, n, k\) with groups == 4 and k == 520 \(a's\)"),
    ({"b": FakeDLPack((3, 576, 520), "bfloat16", ptr=B)}, ValueError,
     r"b must be of shape \(groups, n, k\) with groups == 4"),
    ({"d": FakeDLPack((4, 256, 584), "bfloat16", ptr=D)}, ValueError,
     r"d must be of shape \(4, 256, 576\) \(groups, m of a, n of b\)"),
    ({"d": FakeDLPack((4, 200, 576), "bfloat16", ptr=D)}, ValueError, r"d must be of shape \(4, 256, 576\)"),
    ({"masked_m": FakeDLPack((5,), "int32", ptr=IDX)}, ValueError, r"masked_m must be of shape \(4,\)"),
    ({"masked_m": FakeDLPack((4,), "int32", strides=(2,), ptr=IDX)}, ValueError, "masked_m must be contiguous"),
    ({"a": FakeDLPack((4, 256, 520), "bfloat16", strides=(256 * 520 + 8, 520, 1), ptr=BASE)}, ValueError,
     "a must be groups one after the other"),
    ({"d": FakeDLPack((4, 256, 576), "bfloat16", strides=(256 * 576 - 8, 576, 1), ptr=D)}, ValueError,
     "d must be groups apart by a multiple of 8 elements"),
    ({"d": FakeDLPack((4, 256, 576), "bfloat16", strides=(256 * 576 + 4, 576, 1), ptr=D)}, ValueError,
     "d must be groups apart by a multiple of 8 elements"),
])
def test_masked_preconditions(changes, error, message):
    a, b, d, counts = masked_fakes(**changes)
    with pytest.raises(error, match="^m_grouped_bf16_gemm_nt_masked: " + message):
        MASKED(a, b, d, counts, 64)


def test_masked_empty_problems_are_no_ops_without_a_gpu():
    for m, n in ((0, 576), (256, 0)):
        assert MASKED(*masked_fakes(m=m, n=n), 64) is None
    # expected_m 0 is allowed (clamped to 1 when the plan is asked), and DeepGEMM's compiled_dims is accepted.
    assert MASKED(*masked_fakes(m=0), 0, compiled_dims="mn") is None


@pytest.mark.skipif(not NO_GPU, reason="would launch on fake pointers: only meaningful without a GPU")
def test_masked_valid_call_without_a_gpu_is_a_cuda_error():
    for expected_m in (0, 64, 10 ** 6):  # every expected_m picks a kernel (clamped into [1, m])
        with pytest.raises(kiln.CudaError):
            MASKED(*masked_fakes(), expected_m)


def test_masked_kernels_are_planned_without_a_gpu():
    kernels = kiln.plan("bf16_gemm_nt", n=7168, k=2048, m=32 * 20, m_grouped=1, masked=1, arch="sm_90a")
    assert len(kernels) == 1 and "grouping=2" in kernels[0]["spec"], kernels
    contiguous = kiln.plan("bf16_gemm_nt", n=7168, k=2048, m=32 * 20, m_grouped=1, arch="sm_90a")
    assert contiguous[0]["key"] != kernels[0]["key"], "the masked kernel must be keyed apart from the contiguous one"
    with pytest.raises(ValueError, match="masked"):
        kiln.plan("bf16_gemm_nt", n=7168, k=2048, m=640, m_grouped=1, masked=2, arch="sm_90a")


# ---- The k-grouped weight-gradient GEMM (k_grouped_bf16_gemm_tn_contiguous), through DLPack tensors "on the GPU" --

KGROUPED = kiln.k_grouped_bf16_gemm_tn_contiguous
KS = [37, 0, 300, 64, 1]  # counts that are not multiples of 64, and a group without tokens
TOKENS = sum(KS)


def k_grouped_fakes(m: int = 256, n: int = 576, **changes):
    """a [sum(KS), m], b [sum(KS), n] bfloat16, d float32 [G, m, n], ks (KS) and c (None) for DeepGEMM's k-grouped
    layout: each group's tokens one after the other. `changes` replace any of them (ks without changing the shapes)."""
    t = {
        "a": FakeDLPack((TOKENS, m), "bfloat16", ptr=BASE),
        "b": FakeDLPack((TOKENS, n), "bfloat16", ptr=B),
        "d": FakeDLPack((len(KS), m, n), "float32", ptr=D),
        "ks": list(KS),
        "c": None,
    }
    t.update(changes)
    return t["a"], t["b"], t["d"], t["ks"], t["c"]


def test_k_grouped_name_is_exported_with_deepgemms_signature():
    namespace: dict = {}
    exec("from kiln import *", namespace)
    assert "k_grouped_bf16_gemm_tn_contiguous" in kiln.__all__
    assert namespace["k_grouped_bf16_gemm_tn_contiguous"] is KGROUPED
    assert callable(kiln._native.k_grouped_bf16_gemm_tn_contiguous)
    parameters = inspect.signature(KGROUPED).parameters
    assert list(parameters) == ["a", "b", "d", "ks", "ks_tensor", "c", "compiled_dims", "stream"]
    assert [parameters[p].default for p in ("ks_tensor", "c", "compiled_dims", "stream")] == [None, None, "mn", None]
    assert parameters["stream"].kind is inspect.Parameter.KEYWORD_ONLY


def test_k_grouped_arguments_kiln_checks_itself():
    a, b, d, ks, _ = k_grouped_fakes()
    for dims in ("x", "nkq", 3, None):
        with pytest.raises(ValueError, match=r"^k_grouped_bf16_gemm_tn_contiguous: compiled_dims must be a string of "
                                             r"the letters m, n and k \(DeepGEMM's default is 'mn'\)"):
            KGROUPED(a, b, d, ks, None, compiled_dims=dims)
    for bad in ([37, 0, 300.0, 64, 1], 5, None, ["37"], [37, 0, True, 64, 1]):
        with pytest.raises(TypeError, match="^k_grouped_bf16_gemm_tn_contiguous: ks must be a sequence of ints"):
            KGROUPED(a, b, d, bad)
    # Counts the native call cannot take (beyond 64 bits): the library's error for any count out of range.
    for g, bad in ((4, 2 ** 63), (0, -(2 ** 63) - 1)):
        counts = list(ks)
        counts[g] = bad
        with pytest.raises(kiln.KilnValueError, match=rf"^k_grouped_bf16_gemm_tn_contiguous: ks\[{g}\] must be a "
                                                      rf"token count in 0..2147483647, got {bad}$"):
            KGROUPED(a, b, d, counts)
    with pytest.raises(TypeError, match="^k_grouped_bf16_gemm_tn_contiguous: a must be a tensor"):
        KGROUPED(3, b, d, ks)
    with pytest.raises(TypeError, match="^k_grouped_bf16_gemm_tn_contiguous: c must be a tensor"):
        KGROUPED(a, b, d, ks, None, [1.0])


@pytest.mark.parametrize("changes, error, message", [
    ({"a": FakeDLPack((TOKENS, 256), "float16", ptr=BASE)}, TypeError, "a must be bfloat16, got float16"),
    ({"a": FakeDLPack((TOKENS, 256), "float8_e4m3fn", ptr=BASE)}, TypeError, "a must be bfloat16, got float8_e4m3fn"),
    ({"b": FakeDLPack((TOKENS, 576), "float32", ptr=B)}, TypeError, "b must be bfloat16, got float32"),
    ({"d": FakeDLPack((5, 256, 576), "bfloat16", ptr=D)}, TypeError, "d must be float32, got bfloat16"),
    ({"c": FakeDLPack((5, 256, 576), "bfloat16", ptr=C)}, TypeError, "c must be float32, got bfloat16"),
    ({"ks": KS[:-1]}, ValueError, r"ks must hold one token count per group \(d.size\(0\) == 5\), got 4 counts"),
    ({"ks": KS + [0]}, ValueError, r"ks must hold one token count per group \(d.size\(0\) == 5\), got 6 counts"),
    ({"ks": [37, 0, -1, 365, 1]}, ValueError, r"ks\[2\] must be a token count in 0..2147483647, got -1"),
    ({"ks": [37, 0, 300, 64, 2 ** 31]}, ValueError, r"ks\[4\] must be a token count in 0..2147483647, got 2147483648"),
    ({"a": FakeDLPack((TOKENS + 1, 256), "bfloat16", ptr=BASE)}, ValueError,
     r"a must be of shape \(402, 256\) \(sum\(ks\), m of d\): each group's tokens one after the other, got shape "
     r"\(403, 256\)"),
    ({"a": FakeDLPack((256, TOKENS), "bfloat16", strides=(1, 256), ptr=BASE)}, ValueError,
     r"a must be of shape \(402, 256\) \(sum\(ks\), m of d\)"),
    ({"b": FakeDLPack((TOKENS, 568), "bfloat16", ptr=B)}, ValueError,
     r"b must be of shape \(402, 576\) \(sum\(ks\), n of d\)"),
    ({"d": FakeDLPack((256, 576), "float32", ptr=D)}, ValueError, "d must be 3-dimensional"),
    ({"c": FakeDLPack((5, 256, 568), "float32", ptr=C)}, ValueError, r"c must be of shape \(5, 256, 576\)"),
    ({"b": FakeDLPack((TOKENS, 580), "bfloat16", ptr=B), "d": FakeDLPack((5, 256, 580), "float32", ptr=D)},
     ValueError, r"d must be of a size\(2\) \(n\) that is a multiple of 8, got n == 580"),
    ({"a": FakeDLPack((TOKENS, 256), "bfloat16", strides=(260, 1), ptr=BASE)}, ValueError,
     r"a must be rows 16-byte aligned \(stride\(0\) a multiple of 8\), got stride\(0\) == 260"),
    ({"a": FakeDLPack((TOKENS, 256), "bfloat16", ptr=BASE + 8)}, ValueError, "a must be 16-byte aligned"),
    ({"d": FakeDLPack((5, 256, 576), "float32", strides=(256 * 576 + 2, 576, 1), ptr=D)}, ValueError,
     r"d must be groups that do not overlap: stride\(0\) >= \(m - 1\) \* stride\(1\) \+ n, a multiple of 4"),
    ({"d": FakeDLPack((5, 256, 576), "float32", strides=(256 * 576 - 4, 576, 1), ptr=D)}, ValueError,
     "d must be groups that do not overlap"),
    ({"d": FakeDLPack((5, 256, 576), "float32", ptr=BASE + 64)}, ValueError,
     "d must be memory that does not overlap a's"),
    ({"c": FakeDLPack((5, 256, 576), "float32", ptr=D + 4096)}, ValueError,
     "c must be d itself or memory that does not overlap d's"),
    ({"c": FakeDLPack((5, 256, 576), "float32", ptr=C, device="cpu")}, ValueError, "c must be on a CUDA device"),
    ({"b": FakeDLPack((TOKENS, 576), "bfloat16", ptr=B, device="cuda:1")}, ValueError,
     r"b must be on the same device as a \(cuda:0\), got cuda:1"),
])
def test_k_grouped_preconditions(changes, error, message):
    a, b, d, ks, c = k_grouped_fakes(**changes)
    with pytest.raises(error, match="^k_grouped_bf16_gemm_tn_contiguous: " + message):
        KGROUPED(a, b, d, ks, None, c)


def test_k_grouped_empty_problems_are_no_ops_without_a_gpu():
    for m, n in ((0, 576), (256, 0)):
        a, b, d, ks, _ = k_grouped_fakes(m=m, n=n)
        assert KGROUPED(a, b, d, ks) is None
        assert KGROUPED(a, b, d, ks, c=d) is None
    # No groups: a and b of no tokens, d [0, m, n].
    assert KGROUPED(FakeDLPack((0, 256), ptr=BASE), FakeDLPack((0, 576), ptr=B),
                    FakeDLPack((0, 256, 576), "float32", ptr=D), []) is None
    # ks_tensor is not read (anything goes), and DeepGEMM's compiled_dims given explicitly is accepted as it is.
    a, b, d, ks, _ = k_grouped_fakes(m=0)
    assert KGROUPED(a, b, d, ks, object(), None, "mnk", stream=None) is None
    assert KGROUPED(a, b, d, tuple(ks), ks_tensor="not read", compiled_dims="") is None


@pytest.mark.skipif(not NO_GPU, reason="would launch on fake pointers: only meaningful without a GPU")
def test_k_grouped_valid_calls_without_a_gpu_are_cuda_errors():
    a, b, d, ks, _ = k_grouped_fakes()
    padded = (FakeDLPack((TOKENS, 256), strides=(264, 1), ptr=BASE), FakeDLPack((TOKENS, 576), strides=(584, 1), ptr=B),
              FakeDLPack((5, 256, 576), "float32", strides=(256 * 580, 580, 1), ptr=D))
    for args, c in (((a, b, d), None), ((a, b, d), d), ((a, b, d), FakeDLPack((5, 256, 576), "float32", ptr=C)),
                    (padded, padded[2]), (padded, FakeDLPack((5, 256, 576), "float32", strides=(256 * 577, 577, 1),
                                                             ptr=C))):
        with pytest.raises(kiln.CudaError):  # every check passed: the kernel's load needs the driver
            KGROUPED(*args, ks, None, c)
    with pytest.raises(kiln.CudaError):  # no group with tokens: D[g] zeroed on the stream, which needs the driver too
        KGROUPED(FakeDLPack((0, 256), ptr=BASE), FakeDLPack((0, 576), ptr=B), d, [0] * 5)


def test_k_grouped_kernels_are_planned_without_a_gpu():
    def plan(k, **flags):
        return kiln.plan("bf16_gemm_nt", n=7168, k=k, m=4096, k_grouped=1, arch="sm_90a", **flags)

    stored, added = plan(300), plan(300, accumulate=1)
    assert len(stored) == 1 and all(f in stored[0]["spec"] for f in ("epilogue=1", "mn_major=3", "grouping=3"))
    assert len(added) == 1 and "epilogue=2" in added[0]["spec"] and "grouping=3" in added[0]["spec"], added
    # A group is planned at its tokens rounded up to 64 times a power of two: 1..64 tokens share one kernel, 65..128
    # another.
    assert plan(1)[0]["key"] == plan(37)[0]["key"] == plan(64)[0]["key"]
    assert plan(65)[0]["key"] == plan(100)[0]["key"] == plan(128)[0]["key"]
    dense_tn = kiln.plan("bf16_gemm_nt", n=7168, k=320, m=4096, m_major_a=1, n_major_b=1, fp32=1, arch="sm_90a")
    assert dense_tn[0]["key"] != plan(320)[0]["key"], "the k-grouped kernel must be keyed apart from the dense one"
    with pytest.raises(ValueError, match="k_grouped=1 writes a float32 D"):
        plan(300, fp32=0)
