"""The torch path without a GPU (skipped when PyTorch is not installed, as in CI): bfloat16 and float8_e4m3fn
tensors come through with their strides in elements, outputs are allocated in exactly the layouts the C++ API
checks, and host tensors get the library's "must be on a CUDA device" error."""

from __future__ import annotations

import pytest

import kiln

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float8_e4m3fn, torch.float32, torch.float16, torch.int32,
                                   torch.int64, torch.uint8])
def test_torch_dtypes_come_through(dtype):
    t = torch.zeros(6, 10, dtype=dtype)[1::2, 2:]
    v = kiln._native._view(t)
    assert v["dtype"] == str(dtype).replace("torch.", "")
    assert v["shape"] == (3, 8) and v["strides"] == (20, 1) and v["device"] == "cpu"
    assert v["data_ptr"] == t.data_ptr()


def test_parameters_and_tensors_requiring_grad_come_through():
    p = torch.nn.Parameter(torch.zeros(3, 4))
    assert kiln._native._view(p)["shape"] == (3, 4)
    assert kiln._native._is_torch_tensor(p) and not kiln._native._is_torch_tensor([1])


def test_unsupported_torch_dtypes_and_devices():
    with pytest.raises(TypeError, match="x has dtype torch.float64"):
        kiln.per_token_cast_to_fp8(torch.zeros(4, 128, dtype=torch.float64))
    with pytest.raises(TypeError, match="float8_e5m2"):
        kiln.describe(torch.zeros(4, 128, dtype=torch.float8_e5m2))
    with pytest.raises(ValueError, match="must be on a CUDA device, got a tensor on 'meta'"):
        kiln.per_token_cast_to_fp8(torch.zeros(4, 128, dtype=torch.bfloat16, device="meta"))
    with pytest.raises(ValueError, match="at most 4 dimensions"):
        kiln.describe(torch.zeros(1, 1, 1, 1, 1))


def test_tensors_without_strides_are_refused_by_name():
    # torch's own "sparse tensors do not have strides" named neither the call nor the argument.
    dense = torch.randn(4, 256).to(torch.bfloat16)
    with pytest.raises(kiln.KilnValueError, match=r"^describe: tensor must be a dense \(torch.strided\) tensor, got a "
                                                  r"torch.sparse_coo one; call .to_dense\(\) first$"):
        kiln.describe(dense.to_sparse())
    with pytest.raises(kiln.KilnValueError, match=r"^per_token_cast_to_fp8: x must be a dense \(torch.strided\)"):
        kiln.per_token_cast_to_fp8(dense.to_sparse())


def test_negative_views_are_refused_not_read_with_the_wrong_sign():
    # Their memory holds the values negated: kiln reads the memory, so such a tensor would be read with the wrong sign.
    x = torch.randn(4, 256).to(torch.bfloat16)
    imag = torch.randn(4, 256, dtype=torch.complex64).conj().imag  # a float32 negative view, as torch makes them
    for view, name, function in ((x._neg_view(), "x", kiln.per_token_cast_to_fp8), (imag, "tensor", kiln.describe)):
        assert view.is_neg()
        with pytest.raises(kiln.KilnValueError, match=rf"^{function.__name__}: {name} must be a tensor whose memory "
                                                       rf"holds its values, got a negative view \(is_neg\(\) is "
                                                       rf"True\): .* pass {name}.resolve_neg\(\) \(or "
                                                       rf"{name}.clone\(\)\)$"):
            function(view)
    assert kiln.describe(x._neg_view().resolve_neg()) == "bfloat16[4, 256] strides (256, 1) on cpu"
    # As outputs too: a GEMM would write through it.
    with pytest.raises(kiln.KilnValueError, match="^bf16_gemm_nt: d must be a tensor whose memory holds its values"):
        kiln.bf16_gemm_nt(x, x, torch.zeros(4, 4, dtype=torch.bfloat16)._neg_view())
    # A conjugate view is complex: refused by its dtype before anything else.
    with pytest.raises(kiln.KilnTypeError, match="has dtype torch.complex64, which kiln does not handle"):
        kiln.describe(torch.randn(4, dtype=torch.complex64).conj())


def test_host_tensors_reach_the_library_device_check():
    x = torch.randn(5, 256).to(torch.bfloat16)
    with pytest.raises(kiln.KilnValueError, match=r"per_token_cast_to_fp8: x must be on a CUDA device, got cpu"):
        kiln.per_token_cast_to_fp8(x)
    with pytest.raises(ValueError, match=r"per_block_cast_to_fp8: x must be on a CUDA device, got cpu"):
        kiln.per_block_cast_to_fp8(x)
    with pytest.raises(TypeError, match="x must be bfloat16, got float32"):
        kiln.per_token_cast_to_fp8(x.float())
    with pytest.raises(ValueError, match="must be on a CUDA device"):
        kiln.per_token_cast_to_fp8(torch.zeros(2, 3, 256, dtype=torch.bfloat16))  # placeholders, x's error


@pytest.mark.parametrize("m,k,row_stride", [(1, 7168, 7168), (5, 256, 256), (4, 128, 128), (3, 512, 640), (0, 256, 256)])
def test_per_token_outputs_have_the_layout_the_library_checks(m, k, row_stride):
    x = torch.zeros(m, row_stride, dtype=torch.bfloat16)[:, :k]
    _, out, scales = kiln._tensors.per_token_outputs(x)
    aligned = kiln.get_tma_aligned_size(m, 4)
    assert out.dtype == torch.float8_e4m3fn and out.shape == (m, k) and out.is_contiguous()
    assert scales.dtype == torch.float32 and scales.shape == (m, k // 128)
    for size, stride, want in zip(scales.shape, scales.stride(), (1, aligned)):
        assert size == 1 or stride == want
    # The C++ view of the outputs, as kiln hands them over:
    v = kiln._native._view(scales)
    assert v["shape"] == (m, k // 128)
    assert kiln.get_mn_major_tma_aligned_tensor(scales) is scales


@pytest.mark.parametrize("n,k", [(1, 128), (129, 256), (300, 7168)])
def test_per_block_outputs_have_the_layout_the_library_checks(n, k):
    _, out, scales = kiln._tensors.per_block_outputs(torch.zeros(n, k, dtype=torch.bfloat16))
    assert out.dtype == torch.float8_e4m3fn and out.shape == (n, k) and out.is_contiguous()
    assert scales.dtype == torch.float32 and scales.shape == ((n + 127) // 128, k // 128) and scales.is_contiguous()


def test_get_mn_major_tma_aligned_tensor_on_the_host():
    sf = torch.randn(5, 3)
    t = kiln.get_mn_major_tma_aligned_tensor(sf)
    assert torch.equal(t, sf) and t.stride() == (1, 8)
    assert kiln.get_mn_major_tma_aligned_tensor(t) is t
    sf3 = torch.randn(2, 5, 3)
    t3 = kiln.get_mn_major_tma_aligned_tensor(sf3)
    assert torch.equal(t3, sf3) and t3.stride() == (24, 1, 8)
    with pytest.raises(TypeError, match="sf must be float32, got torch.float64"):
        kiln.get_mn_major_tma_aligned_tensor(sf.double())
    with pytest.raises(ValueError, match="2-D"):
        kiln.get_mn_major_tma_aligned_tensor(torch.zeros(4))


def test_a_host_tensor_means_the_legacy_default_stream():
    x = torch.zeros(4, 128, dtype=torch.bfloat16)
    assert kiln._native._convert_only(x, x, x) == 0
