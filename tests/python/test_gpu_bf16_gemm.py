"""GPU tests of kiln.bf16_gemm_nt from Python (skipped without PyTorch and a CUDA GPU).

Inputs are random bfloat16 A [m, k] and B [n, k] (torch.randn, never zeros); D is poisoned with NaN before each call.
Each result is compared with DeepGEMM's calc_diff (1 - 2 sum(xy) / sum(x^2 + y^2)) against the float64 product of the
same bf16 inputs (< 1e-5); no NaN or Inf may be left in D.

Covered: every dense_bf16 (N, K) of shared/bench/shapes.json at M = 1, 128 and 4096; ragged M, N and K; a padded row
stride of A, B and D (D's padding must stay untouched); the caller's current stream and an explicit stream argument;
CUDA graph capture and replay after warm-up; m = 0; overrides (a forced tile, and a stage count that stores the
epilogue in passes); the nn, tn and tt layouts and bf16_gemm_nt on transposed views (MN-major operands, no copy),
and tn's weight gradient added into float32; a float32 d with c None (D = A . B^T), c = d (D += A . B^T) and another
c (D = C + A . B^T, C left as it was), compared with calc_diff < 1e-7 (a D rounded to bf16 would fail it); errors the
wrapper and the library raise on the GPU path.

Runs under pytest, or alone: `python3 tests/python/test_gpu_bf16_gemm.py` (one PASS/FAIL line per test).
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gpu_support import HAVE_GPU, SKIP_REASON, calc_diff, raises, run_module, torch  # noqa: E402

import kiln  # noqa: E402

try:
    import pytest
    pytestmark = pytest.mark.skipif(not HAVE_GPU, reason=SKIP_REASON)
except ImportError:
    pytest = None

# shared/bench/shapes.json, "dense_bf16" (copied: the GPU machine gets the repository only).
DENSE_M = (1, 128, 4096)
DENSE_NK = ((2112, 7168), (24576, 1536), (32768, 512), (7168, 16384), (4096, 7168), (7168, 2048))
MAX_DIFF = 1e-5
CHECK_ROWS = 64  # rows compared against float64 (the first ones, and the last)


def operands(m: int, n: int, k: int, seed: int, pad: int = 0):
    """a [m, k], b [n, k] (row strides k + pad), d [m, n] (row stride n + pad, poisoned), all bf16 on the GPU."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(m, k + pad, device="cuda", generator=g, dtype=torch.bfloat16)[:, :k]
    b = torch.randn(n, k + pad, device="cuda", generator=g, dtype=torch.bfloat16)[:, :k]
    d = torch.full((m, n + pad), float("nan"), device="cuda", dtype=torch.bfloat16)[:, :n]
    return a, b, d


def check(d, a, b, what: str) -> None:
    m = a.shape[0]
    rows = sorted(set(range(min(m, CHECK_ROWS // 2))) | set(range(max(0, m - CHECK_ROWS // 2), m)))
    index = torch.tensor(rows, device="cuda", dtype=torch.long)
    reference = a.index_select(0, index).double() @ b.double().T
    got = d.index_select(0, index)
    assert bool(torch.isfinite(got).all()), f"{what}: NaN or Inf in D"
    diff = calc_diff(got, reference)
    assert diff < MAX_DIFF, f"{what}: calc_diff {diff:.2e} >= {MAX_DIFF}"


def _dense_test(n: int, k: int):
    def test():
        for m in DENSE_M:
            a, b, d = operands(m, n, k, seed=m + n + k)
            kiln.bf16_gemm_nt(a, b, d)
            torch.cuda.synchronize()
            check(d, a, b, f"{m} x {n} x {k}")
        print(f"  M = {DENSE_M} x {n} x {k}: within calc_diff {MAX_DIFF}")
    test.__name__ = f"test_dense_{n}x{k}"
    return test


for _n, _k in DENSE_NK:
    globals()[f"test_dense_{_n}x{_k}"] = _dense_test(_n, _k)


def test_ragged_shapes():
    for m, n, k in ((1, 8, 8), (37, 576, 520), (1000, 136, 1048), (300, 2112, 7176)):
        a, b, d = operands(m, n, k, seed=m)
        kiln.bf16_gemm_nt(a, b, d)
        torch.cuda.synchronize()
        check(d, a, b, f"{m} x {n} x {k}")


def test_padded_strides_leave_the_padding_alone():
    m, n, k, pad = 200, 2112, 1024, 24
    a, b, d = operands(m, n, k, seed=5, pad=pad)
    kiln.bf16_gemm_nt(a, b, d)
    torch.cuda.synchronize()
    check(d, a, b, "padded strides")
    padding = d.as_strided((m, pad), (n + pad, 1), d.storage_offset() + n)
    assert bool(torch.isnan(padding).all()), "D's padding columns were written"


def test_the_callers_current_stream_and_an_explicit_one():
    a, b, d = operands(256, 4096, 2048, seed=6)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        kiln.bf16_gemm_nt(a, b, d)
    side.synchronize()
    check(d, a, b, "the current stream")
    d.fill_(float("nan"))
    other = torch.cuda.Stream()
    kiln.bf16_gemm_nt(a, b, d, stream=other)
    other.synchronize()
    check(d, a, b, "an explicit stream")


def test_graph_capture_and_replay_after_warm_up():
    a, b, d = operands(128, 7168, 2048, seed=7)
    kiln.bf16_gemm_nt(a, b, d)  # compiled and loaded outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        kiln.bf16_gemm_nt(a, b, d)
    for seed in (8, 9):
        a.copy_(torch.randn_like(a))
        d.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        check(d, a, b, f"replay {seed}")


def test_empty_m_is_a_no_op():
    a, b, d = operands(0, 4096, 2048, seed=10)
    kiln.bf16_gemm_nt(a, b, d)


def test_overrides_a_forced_tile_and_an_epilogue_in_passes():
    a, b, d = operands(1000, 4096, 1024, seed=11)
    try:
        for tile in (dict(block_m=256, block_n=128, cluster_m=2), dict(block_m=128, block_n=256, stages=4),
                     dict(block_m=128, block_n=192, cluster_m=2, stages=5)):
            kiln.set_bf16_gemm_overrides(**tile)
            d.fill_(float("nan"))
            kiln.bf16_gemm_nt(a, b, d)
            torch.cuda.synchronize()
            check(d, a, b, f"forced {tile}")
    finally:
        kiln.set_bf16_gemm_overrides()


F32_MAX_DIFF = 1e-7


def check_f32(d, a, b, c, what: str) -> None:
    """d (float32) against C + A . B^T in float64 (c None: no C)."""
    assert d.dtype == torch.float32
    reference = a.double() @ b.double().T
    if c is not None:
        reference += c.double()
    assert bool(torch.isfinite(d).all()), f"{what}: NaN or Inf in D"
    diff = calc_diff(d, reference)
    assert diff < F32_MAX_DIFF, f"{what}: calc_diff {diff:.2e} >= {F32_MAX_DIFF}"


def test_float32_d_without_c_in_place_and_from_another_c():
    for m, n, k in ((1, 2112, 7168), (128, 7168, 2048), (4096, 4096, 7168), (37, 576, 520), (300, 136, 72)):
        a, b, _ = operands(m, n, k, seed=20 + m)
        g = torch.Generator(device="cuda").manual_seed(m + n)
        c = torch.randn(m, n, device="cuda", generator=g)
        # c None: D = A . B^T into a poisoned float32 D, its padding left alone.
        d = torch.full((m, n + 4), float("nan"), device="cuda")[:, :n]
        kiln.bf16_gemm_nt(a, b, d)
        torch.cuda.synchronize()
        check_f32(d, a, b, None, f"{m} x {n} x {k}, float32 D")
        assert bool(torch.isnan(d.as_strided((m, 4), (n + 4, 1), n)).all()), "D's padding was written"
        # c = d: D += A . B^T.
        d = c.clone()
        kiln.bf16_gemm_nt(a, b, d, c=d)
        torch.cuda.synchronize()
        check_f32(d, a, b, c, f"{m} x {n} x {k}, D += A . B^T")
        # Another c: D = C + A . B^T, C unchanged.
        d = torch.full((m, n), float("nan"), device="cuda")
        c_before = c.clone()
        kiln.bf16_gemm_nt(a, b, d, c)
        torch.cuda.synchronize()
        check_f32(d, a, b, c, f"{m} x {n} x {k}, D = C + A . B^T")
        assert torch.equal(c, c_before), "c was changed"
    print(f"  float32 D, three forms: within calc_diff {F32_MAX_DIFF}")


def test_float32_d_on_a_side_stream_and_with_a_forced_tile_in_passes():
    a, b, _ = operands(1000, 4096, 1024, seed=21)
    c = torch.randn(1000, 4096, device="cuda")
    stream = torch.cuda.Stream()
    d = c.clone()
    torch.cuda.current_stream().synchronize()
    kiln.bf16_gemm_nt(a, b, d, d, stream=stream)
    stream.synchronize()
    check_f32(d, a, b, c, "side stream, D += A . B^T")
    try:
        kiln.set_bf16_gemm_overrides(block_m=128, block_n=256, stages=4)
        d = torch.full((1000, 4096), float("nan"), device="cuda")
        kiln.bf16_gemm_nt(a, b, d, c)
        torch.cuda.synchronize()
        check_f32(d, a, b, c, "128x256, 4 stages (four store passes), D = C + A . B^T")
    finally:
        kiln.set_bf16_gemm_overrides()


def test_the_nn_tn_and_tt_layouts():
    """DeepGEMM's layouts on row-major tensors (no copy): nn takes b [k, n], tn a [k, m] and b [k, n] (a weight
    gradient), tt a [k, m]; and bf16_gemm_nt on the same transposed views. A row-major [k, m] a needs m a multiple of 8
    (16-byte rows), as TMA does: m = 37 is refused with the alignment named."""
    for m, n, k in ((1, 2112, 7168), (256, 7168, 2048), (4096, 4096, 1024), (40, 576, 520), (296, 136, 72)):
        g = torch.Generator(device="cuda").manual_seed(m * 7 + k)
        a = torch.randn(m, k, device="cuda", generator=g, dtype=torch.bfloat16)
        b = torch.randn(n, k, device="cuda", generator=g, dtype=torch.bfloat16)
        a_km, b_kn = a.T.contiguous(), b.T.contiguous()  # [k, m], [k, n]
        for function, x, y in ((kiln.bf16_gemm_nn, a, b_kn), (kiln.bf16_gemm_tn, a_km, b_kn),
                               (kiln.bf16_gemm_tt, a_km, b), (kiln.bf16_gemm_nt, a_km.T, b_kn.T)):
            d = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
            function(x, y, d)
            torch.cuda.synchronize()
            check(d, a, b, f"{function.__name__} {m} x {n} x {k}")
    a_km = torch.randn(520, 37, device="cuda", dtype=torch.bfloat16)
    with raises(ValueError, r"bf16_gemm_tn: a must be M-major with columns 16-byte aligned \(stride\(1\) a multiple "
                            r"of 8\), got stride\(1\) == 37"):
        kiln.bf16_gemm_tn(a_km, torch.randn(520, 576, device="cuda", dtype=torch.bfloat16),
                          torch.empty(37, 576, device="cuda", dtype=torch.bfloat16))
    # A weight gradient accumulated in float32: dW (n_out x n_in) += dY^T . X, dY [t, n_out] and X [t, n_in].
    g = torch.Generator(device="cuda").manual_seed(5)
    dy = torch.randn(4096, 2112, device="cuda", generator=g, dtype=torch.bfloat16)
    x = torch.randn(4096, 1024, device="cuda", generator=g, dtype=torch.bfloat16)
    c = torch.randn(2112, 1024, device="cuda", generator=g)
    dw = c.clone()
    kiln.bf16_gemm_tn(dy, x, dw, c=dw)
    torch.cuda.synchronize()
    check_f32(dw, dy.T, x.T, c, "bf16_gemm_tn, dW += dY^T . X")
    print("  nn, tn, tt and transposed nt views: within calc_diff; tn into float32 with c: within 1e-7")


def test_errors_on_the_gpu():
    a, b, d = operands(64, 256, 512, seed=12)
    with raises(TypeError, "bf16_gemm_nt: a must be bfloat16, got float32"):
        kiln.bf16_gemm_nt(a.float(), b, d)
    with raises(ValueError, "bf16_gemm_nt: d must be memory that does not overlap a"):
        kiln.bf16_gemm_nt(a, b, a[:, :256])
    with raises(TypeError, "bf16_gemm_nt: d must be float32, got bfloat16"):
        kiln.bf16_gemm_nt(a, b, d, c=d.float())
    storage = torch.zeros(65 * 256, device="cuda")
    d32, shifted = storage[:64 * 256].view(64, 256), storage[4:4 + 64 * 256].view(64, 256)
    with raises(ValueError, "bf16_gemm_nt: c must be d itself or memory that does not overlap d's"):
        kiln.bf16_gemm_nt(a, b, d32, c=shifted)
    with raises(ValueError, r"bf16_gemm_nt: b must be on the same device as a|b must be on a CUDA device"):
        kiln.bf16_gemm_nt(a, b.cpu(), d)


if __name__ == "__main__":
    sys.exit(run_module(globals()))
