"""kiln.fp8_gemm_nt's torch path without a GPU (skipped when PyTorch is not installed, as in CI): float8 and
bfloat16 host tensors reach the library's "must be on a CUDA device" error (in both forms: a float32 d is the
weight-gradient form), and the wrapper's handling of the per-row scales (A's, and B's for a float32 d): which
layouts the C++ operation takes as they are, and the MN-major copy made for the others."""

from __future__ import annotations

import pytest

import kiln

torch = pytest.importorskip("torch")

layout_ok = kiln._tensors.gemm_sfa_layout_ok
gemm_sfa = kiln._tensors.gemm_sfa


def host_operands(m=8, n=256, k=512):
    a = torch.zeros(m, k, dtype=torch.float8_e4m3fn)
    sfa = torch.ones(m, k // 128)
    b = torch.zeros(n, k, dtype=torch.float8_e4m3fn)
    sfb = torch.ones((n + 127) // 128, k // 128)
    d = torch.empty(m, n, dtype=torch.bfloat16)
    return a, sfa, b, sfb, d


def test_host_tensors_reach_the_library_device_check():
    a, sfa, b, sfb, d = host_operands()
    with pytest.raises(kiln.KilnValueError,
                       match=r"fp8_gemm_nt: a must be on a CUDA device, got cpu \(a is float8_e4m3fn\[8, 512\]"):
        kiln.fp8_gemm_nt((a, sfa), (b, sfb), d)
    with pytest.raises(TypeError, match="fp8_gemm_nt: d must be bfloat16, got float16"):
        kiln.fp8_gemm_nt((a, sfa), (b, sfb), d.half())
    with pytest.raises(ValueError, match="a must be on a CUDA device, got a tensor on 'meta'"):
        kiln.fp8_gemm_nt((a.to("meta"), sfa), (b, sfb), d)
    # A float32 d is the weight-gradient form, with or without c: the same device check speaks, naming
    # fp8_gemm_nt.
    sfb_rows = torch.ones(256, 4)
    for c in (None, "d", torch.zeros(8, 256)):
        f32 = d.float()
        with pytest.raises(kiln.KilnValueError, match=r"^fp8_gemm_nt: a must be on a CUDA device, got cpu"):
            kiln.fp8_gemm_nt((a, sfa), (b, sfb_rows), f32, c=f32 if c == "d" else c)
    with pytest.raises(TypeError, match="fp8_gemm_nt: d must be float32 when c is given"):
        kiln.fp8_gemm_nt((a, sfa), (b, sfb), d, c=d.float())


def test_b_scales_are_converted_only_for_a_float32_d():
    # The bf16 form's sfb is row-major by contract: never touched. The weight-gradient form's goes through the same
    # conversion as A's (which leaves host tensors for the library to judge).
    _, _, _, sfb, d = host_operands()
    gemm_sfb = kiln._tensors.gemm_sfb
    assert gemm_sfb(sfb, d) is sfb
    rows = torch.ones(256, 4)
    assert gemm_sfb(rows, d.float()) is rows  # on the host: not converted
    assert gemm_sfb(rows, object()) is rows


def test_a_tensor_is_not_taken_for_a_pair():
    a, sfa, b, sfb, d = host_operands(m=2)
    with pytest.raises(TypeError, match=r"a must be a pair \(a_fp8, sfa\) of tensors, got torch.Tensor"):
        kiln.fp8_gemm_nt(a, (b, sfb), d)  # two rows would unpack


def test_host_scales_are_left_for_the_library_to_judge():
    # Not on a GPU: no copy, so an error describes the caller's own tensor.
    _, sfa, _, _, _ = host_operands()
    assert sfa.stride() == (4, 1) and gemm_sfa(sfa) is sfa
    assert gemm_sfa(sfa.double()) is not None


def _mn_major(m, kb, s):
    return torch.empty(kb, s).T[:m]  # strides (1, s)


@pytest.mark.parametrize("m,kb,strides_of,ok", [
    (4096, 56, lambda m, kb: _mn_major(m, kb, m), True),           # per_token_cast_to_fp8's layout
    (37, 4, lambda m, kb: _mn_major(m, kb, 40), True),             # align(37, 4) = 40
    (37, 4, lambda m, kb: _mn_major(m, kb, 64), True),             # a wider column stride: fine
    (37, 4, lambda m, kb: _mn_major(m, kb, 37), False),            # MN-major, not TMA-aligned
    (37, 4, lambda m, kb: torch.empty(m, kb), False),              # row-major (DeepGEMM's per-token output)
    (1, 56, lambda m, kb: torch.empty(m, kb), False),              # m = 1, row-major: column stride 1
    (1, 56, lambda m, kb: _mn_major(m, kb, 4), True),
    (64, 1, lambda m, kb: torch.empty(m, kb), True),               # one k block, m-contiguous
    (0, 4, lambda m, kb: torch.empty(m, kb), True),                # empty: nothing is read
    (64, 4, lambda m, kb: _mn_major(m + 1, kb, 68)[1:], False),    # 4 bytes past a 16-byte boundary
])
def test_which_scale_layouts_the_library_takes_as_they_are(m, kb, strides_of, ok):
    sfa = strides_of(m, kb)
    assert sfa.shape == (m, kb)
    assert layout_ok(sfa) is ok, (sfa.stride(), sfa.data_ptr() % 16)


@pytest.mark.parametrize("m,kb", [(37, 4), (1, 56), (128, 56), (5, 3)])
def test_the_copy_is_mn_major_tma_aligned_with_equal_values(m, kb):
    sfa = torch.randn(m, kb)  # row-major
    t = kiln.get_mn_major_tma_aligned_tensor(sfa)
    assert t is not sfa and torch.equal(t, sfa) and layout_ok(t)
    assert kiln.get_mn_major_tma_aligned_tensor(t) is t


@pytest.mark.parametrize("recipe,is_sfa,shape", [((1, 128, 128), True, (37, 4)), ((1, 1, 128), False, (37, 4)),
                                                  ((1, 128), None, (37, 4))])
def test_transform_sf_gives_per_row_scales_mn_major(recipe, is_sfa, shape):
    sf = torch.randn(*shape)  # row-major [mn, k/128]
    t = kiln.transform_sf_into_required_layout(sf, 37, 512, recipe, is_sfa=is_sfa)
    assert torch.equal(t, sf) and layout_ok(t)
    assert kiln.transform_sf_into_required_layout(t, 37, 500, recipe, is_sfa=is_sfa) is t  # ceil(500/128) = 4
    grouped = torch.randn(3, 37, 4)
    g = kiln.transform_sf_into_required_layout(grouped, 37, 512, recipe, num_groups=3, is_sfa=is_sfa)
    assert torch.equal(g, grouped) and g.stride() == (40 * 4, 1, 40)


def test_transform_sf_keeps_block_scales_and_checks_them():
    sfb = torch.randn(3, 4)  # [ceil(300/128), 512/128]
    assert kiln.transform_sf_into_required_layout(sfb, 300, 512, (1, 128, 128), is_sfa=False) is sfb
    assert kiln.transform_sf_into_required_layout(sfb, 300, 512, (128, 128)) is sfb
    grouped = torch.randn(2, 3, 4)
    assert kiln.transform_sf_into_required_layout(grouped, 300, 512, (128, 128), num_groups=2) is grouped
    with pytest.raises(kiln.KilnValueError, match=r"block scales must be contiguous .* got strides \(1, 3\)"):
        kiln.transform_sf_into_required_layout(torch.randn(4, 3).T, 300, 512, (128, 128))
    with pytest.raises(kiln.KilnValueError,
                       match=r"sf must be \[ceil\(mn / 128\), ceil\(k / 128\)\] = \[3, 4\] for mn=300, k=512, got \[3, 5\]"):
        kiln.transform_sf_into_required_layout(torch.randn(3, 5), 300, 512, (128, 128))
    with pytest.raises(kiln.KilnValueError, match=r"sf must be \[num_groups, .* = \[2, 3, 4\]"):
        kiln.transform_sf_into_required_layout(sfb, 300, 512, (128, 128), num_groups=2)
    with pytest.raises(kiln.KilnTypeError, match=r"sf must be float32 .* packed UE8M0 is sm_100's\), got torch.int32"):
        kiln.transform_sf_into_required_layout(torch.zeros(3, 4, dtype=torch.int32), 300, 512, (128, 128))
    with pytest.raises(kiln.KilnValueError, match=r"granularity .* got \(1, 32\) from recipe \(1, 1, 32\)"):
        kiln.transform_sf_into_required_layout(sfb, 300, 512, (1, 1, 32), is_sfa=True)
