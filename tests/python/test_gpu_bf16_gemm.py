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

The m-grouped calls (m_grouped_bf16_gemm_nt_contiguous and _masked), on fresh random bf16 data, each expert's rows
against its float32 product (calc_diff < 1e-5): contiguous with experts of ragged sizes (one empty) aligned to 128 and
padded with -1, n and k multiples of 8 but not of 64, blocks naming no expert (NaN rows; D poisoned with a finite
value for them to stand out), padding-only blocks, 64- and 128-row tiles, D's padding columns and the rows past m
untouched, a side stream; masked with counts of 0, m, above m and below 0, several expected_m, a group stride of D
wider than m rows (rows past a count's last 128-row block, and past m, must keep their NaN poison), an explicit
stream; CUDA graphs replayed after the routing (m_indices, masked_m) changed; refused calls that leave D as it was.

The k-grouped weight gradients (k_grouped_bf16_gemm_tn_contiguous), on random bf16 A [sum(ks), m] and B [sum(ks), n],
D poisoned with NaN: each group's D[g] against its float64 A_g^T . B_g (+ C[g]), calc_diff < 1e-7 as the float32-D
tests above; a group without tokens exactly zeros (c None) or C[g]. Token counts that are not multiples of 64 (K tails
inside a tile), c None, c = d and another c, an explicit stream, A, B and D as views of wider rows (the padding of A and
B NaN, never read; D's never written), refused calls that leave D as it was, 40 groups (more than one launch holds),
DeepSeek-V3's 4096 x 7168 expert gradient over 8 router-like counts (rows spread over every tile), CUDA graphs.

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


def test_cta_pairs_with_an_n_major_b():
    """Forced CTA pairs sharing an N-major B (each CTA loads half of the tile's 64-column boxes): every m block of the
    second CTA of a pair right too, in every 64 columns of its tiles (they summed wrong from column 64 until the WGMMA
    descriptors' start addresses were masked, 2026-12-07); M = 333 leaves a pair's second tile past M."""
    try:
        for m, n, k in ((512, 1024, 1024), (333, 1024, 1048)):
            g = torch.Generator(device="cuda").manual_seed(m + k)
            a = torch.randn(m, k, device="cuda", generator=g, dtype=torch.bfloat16)
            b = torch.randn(n, k, device="cuda", generator=g, dtype=torch.bfloat16)
            b_kn = b.T.contiguous()
            for tile in (dict(block_m=128, block_n=128), dict(block_m=256, block_n=128), dict(block_m=128, block_n=256)):
                kiln.set_bf16_gemm_overrides(cluster_m=2, **tile)
                d = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
                kiln.bf16_gemm_nn(a, b_kn, d)
                torch.cuda.synchronize()
                for first in range(0, m, 64):  # each 64 rows on their own: a wrong second CTA cannot hide in the mean
                    rows = slice(first, min(m, first + 64))
                    check(d[rows], a[rows], b, f"nn {m} x {n} x {k}, {tile} pairs, rows {first}..")
    finally:
        kiln.set_bf16_gemm_overrides()
    with raises(ValueError, r"bf16_gemm_nn: block_n must be 0 \(heuristic\) or a multiple of 128 for CTA pairs"):
        kiln.set_bf16_gemm_overrides(block_m=128, block_n=192, cluster_m=2)
        try:
            kiln.bf16_gemm_nn(a, b_kn, torch.empty(m, n, device="cuda", dtype=torch.bfloat16))
        finally:
            kiln.set_bf16_gemm_overrides()


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


# ---- The m-grouped GEMMs (MoE experts) ------------------------------------------------------------------------------

SENTINEL = 2.0 ** 14  # a finite poison (exact in bf16, far above any product here): NaN rows must stand out from it
# (n, k): multiples of 8; k = 520, n = 136 and k = 1048 not of 64 (partial tiles and K blocks), then a DeepSeek shape.
RAGGED_NK = ((576, 520), (136, 1048), (4096, 7168))


def check_rows(got, a, b, what: str) -> None:
    """Rows of D against their float32 product a . b^T: finite, and within calc_diff."""
    bad = (~torch.isfinite(got)).sum().item()
    assert bad == 0, f"{what}: {bad} elements NaN or Inf"
    reference = a.float() @ b.float().T
    diff = calc_diff(got, reference)
    assert diff < MAX_DIFF, f"{what}: calc_diff {diff:.2e} >= {MAX_DIFF}"


def contiguous_problem(sizes, n: int, k: int, seed: int, bad_indices=(), tail_blocks: int = 0):
    """DeepGEMM's contiguous layout for experts of `sizes` rows: A's rows one expert after another, each run padded
    to a multiple of get_mk_alignment_for_contiguous_layout() with rows marked -1, then one block of rows per index of
    `bad_indices` (naming no expert) and `tail_blocks` blocks of padding only; B [G, n, k]. D is the first m rows and
    n columns of a buffer with 128 more rows and 8 more columns, all SENTINEL. Returns a, b, d, the buffer,
    m_indices, the experts' row runs (first, size) and the bad blocks' (first, index)."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    align = kiln.get_mk_alignment_for_contiguous_layout()
    runs, m = [], 0
    for size in sizes:
        runs.append((m, size))
        m += (size + align - 1) // align * align
    bad = []
    for index in bad_indices:
        bad.append((m, index))
        m += align
    m += tail_blocks * align
    a = torch.randn(m, k, device="cuda", generator=g, dtype=torch.bfloat16)
    b = torch.randn(len(sizes), n, k, device="cuda", generator=g, dtype=torch.bfloat16)
    indices = torch.full((m,), -1, device="cuda", dtype=torch.int32)
    for expert, (first, size) in enumerate(runs):
        indices[first:first + size] = expert
    for first, index in bad:
        indices[first:first + align] = index
    buffer = torch.full((m + align, n + 8), SENTINEL, device="cuda", dtype=torch.bfloat16)
    return a, b, buffer[:m, :n], buffer, indices, runs, bad


def check_contiguous(d, buffer, a, b, runs, bad, what: str, experts=None) -> None:
    """Each expert's rows against its product (with B[experts[g]] where given: a changed routing), every bad block
    NaN, and D's padding columns, the blocks of padding only after the experts' and bad blocks (skipped by the kernel)
    and the buffer's rows past m SENTINEL. Padding rows inside an expert's last block are unspecified."""
    torch.cuda.synchronize()
    m, n = d.shape
    align = kiln.get_mk_alignment_for_contiguous_layout()
    ends = [first + (size + align - 1) // align * align for first, size in runs] + [first + align for first, _ in bad]
    end = max(ends)
    assert bool((d[end:] == SENTINEL).all()), f"{what}: blocks of padding only (rows {end}..{m}) were written"
    for g, (first, size) in enumerate(runs):
        if size:
            expert = g if experts is None else experts[g]
            check_rows(d[first:first + size], a[first:first + size], b[expert], f"{what}: expert {g} (B[{expert}])")
    for first, index in bad:
        assert bool(torch.isnan(d[first:first + align]).all()), f"{what}: the block of m_indices {index} is not NaN"
    assert bool((buffer[:, n:] == SENTINEL).all()), f"{what}: D's padding columns were written"
    assert bool((buffer[m:] == SENTINEL).all()), f"{what}: rows past m were written"


def test_m_grouped_contiguous():
    """Experts of ragged sizes (one empty) with -1 padding, blocks naming no expert (G, -2 and INT32_MAX: NaN),
    padding-only blocks at the end, on shapes whose n and k are not multiples of 64 and one of DeepSeek's."""
    sizes = [300, 0, 37, 128, 1000, 5]
    bad_indices = (len(sizes), -2, 2 ** 31 - 1)
    for n, k in RAGGED_NK:
        a, b, d, buffer, indices, runs, bad = contiguous_problem(sizes, n, k, seed=n + k, bad_indices=bad_indices,
                                                                 tail_blocks=2)
        kiln.m_grouped_bf16_gemm_nt_contiguous(a, b, d, indices)
        check_contiguous(d, buffer, a, b, runs, bad, f"m = {d.shape[0]}, n = {n}, k = {k}")
    print(f"  {len(sizes)} experts, n x k = {RAGGED_NK}: every expert within calc_diff {MAX_DIFF}, bad blocks NaN")


def test_m_grouped_contiguous_tiles_streams_and_refusals():
    """Both tile heights (forced: a 64-row block must take its own first row's expert too), the caller's current
    stream, compiled_dims, and refused calls that leave D as it was."""
    sizes = [64, 200, 0, 129, 7]
    n, k = 576, 520
    a, b, d, buffer, indices, runs, bad = contiguous_problem(sizes, n, k, seed=31, bad_indices=(-7,), tail_blocks=1)
    try:
        for block_m in (64, 128):
            kiln.set_bf16_gemm_overrides(block_m=block_m)
            buffer.fill_(SENTINEL)
            kiln.m_grouped_bf16_gemm_nt_contiguous(a, b, d, indices, "mn")
            check_contiguous(d, buffer, a, b, runs, bad, f"block_m {block_m}")
    finally:
        kiln.set_bf16_gemm_overrides()
    side = torch.cuda.Stream()
    buffer.fill_(SENTINEL)
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        kiln.m_grouped_bf16_gemm_nt_contiguous(a, b, d, indices)
    side.synchronize()
    check_contiguous(d, buffer, a, b, runs, bad, "on the current (side) stream")
    buffer.fill_(SENTINEL)
    torch.cuda.synchronize()
    with raises(ValueError, r"m_grouped_bf16_gemm_nt_contiguous: m_indices must be of shape \("):
        kiln.m_grouped_bf16_gemm_nt_contiguous(a, b, d, indices[:-1])
    with raises(TypeError, "m_grouped_bf16_gemm_nt_contiguous: m_indices must be int32, got int64"):
        kiln.m_grouped_bf16_gemm_nt_contiguous(a, b, d, indices.long())
    with raises(ValueError, "m_grouped_bf16_gemm_nt_contiguous: m_indices must be on the same device as a|"
                            "m_indices must be on a CUDA device"):
        kiln.m_grouped_bf16_gemm_nt_contiguous(a, b, d, indices.cpu())
    with raises(TypeError, "m_grouped_bf16_gemm_nt_contiguous: b must be bfloat16, got float32"):
        kiln.m_grouped_bf16_gemm_nt_contiguous(a, b.float(), d, indices)
    torch.cuda.synchronize()
    assert bool((buffer == SENTINEL).all()), "a refused call wrote D"
    kiln.m_grouped_bf16_gemm_nt_contiguous(a[:0], b, d[:0], indices[:0])  # m = 0: nothing launched


def test_m_grouped_nn_contiguous():
    """m_grouped_bf16_gemm_nn_contiguous (each expert's weights stored [k, n]): ragged experts with -1 padding, a bad
    block, padding-only blocks, K tails inside a 64-wide box (520, 1048: each expert's plane of B zero-fills them),
    both tile heights, and B with padded rows (a view of a wider buffer)."""
    sizes = [300, 0, 37, 128, 1000, 5]
    for n, k in RAGGED_NK:
        a, b, d, buffer, indices, runs, bad = contiguous_problem(sizes, n, k, seed=2 * n + k, bad_indices=(-3,),
                                                                 tail_blocks=2)
        b_nn = b.transpose(1, 2).contiguous()  # [G, k, n]
        kiln.m_grouped_bf16_gemm_nn_contiguous(a, b_nn, d, indices)
        check_contiguous(d, buffer, a, b, runs, bad, f"nn: m = {d.shape[0]}, n = {n}, k = {k}")
    n, k = 576, 520
    a, b, d, buffer, indices, runs, bad = contiguous_problem(sizes, n, k, seed=99, tail_blocks=1)
    wide = torch.full((len(sizes), k, n + 8), float("nan"), device="cuda", dtype=torch.bfloat16)
    b_nn = wide[:, :, :n]
    b_nn.copy_(b.transpose(1, 2))
    try:
        for block_m in (64, 128):
            kiln.set_bf16_gemm_overrides(block_m=block_m)
            buffer.fill_(SENTINEL)
            kiln.m_grouped_bf16_gemm_nn_contiguous(a, b_nn, d, indices)
            check_contiguous(d, buffer, a, b, runs, bad, f"nn with padded rows of B, block_m {block_m}")
    finally:
        kiln.set_bf16_gemm_overrides()
    with raises(ValueError, r"m_grouped_bf16_gemm_nn_contiguous: b must be N-major \(stride\(2\) == 1\)"):
        kiln.m_grouped_bf16_gemm_nn_contiguous(a, b.transpose(1, 2), d, indices)
    print(f"  nn: {len(sizes)} experts, n x k = {RAGGED_NK} and padded rows of B: every expert within calc_diff "
          f"{MAX_DIFF}")


def test_m_grouped_contiguous_in_a_graph():
    """Captured after a warm-up: the replay reads m_indices as they are at replay time, so moving rows between
    experts needs no new capture."""
    sizes = [256, 128, 0, 384]
    n, k = 4096, 7168
    a, b, d, buffer, indices, runs, bad = contiguous_problem(sizes, n, k, seed=321)
    kiln.m_grouped_bf16_gemm_nt_contiguous(a, b, d, indices)  # warm-up: compiled and loaded outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        kiln.m_grouped_bf16_gemm_nt_contiguous(a, b, d, indices)
    buffer.fill_(SENTINEL)
    graph.replay()
    check_contiguous(d, buffer, a, b, runs, bad, "replay")
    swapped = [3, 0, 1, 2]  # each run of rows given to another expert
    new_indices = indices.clone()
    for g, (first, size) in enumerate(runs):
        new_indices[first:first + size] = swapped[g]
    indices.copy_(new_indices)
    a.copy_(torch.randn_like(a))
    buffer.fill_(SENTINEL)
    graph.replay()
    check_contiguous(d, buffer, a, b, runs, bad, "replay after re-routing", experts=swapped)
    print("  replays follow m_indices (and A) as they are at replay time")


def masked_problem(counts, m: int, n: int, k: int, seed: int, extra_rows: int = 8):
    """m_grouped_bf16_gemm_nt_masked's operands for experts with `counts` rows (masked_m) in blocks of m: A [G, m, k],
    B [G, n, k], and D [G, m, n] the first m rows of each group of a NaN buffer [G, m + extra_rows, n] (its groups
    further apart than m rows). Returns a, b, d, the buffer and masked_m."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    groups = len(counts)
    a = torch.randn(groups, m, k, device="cuda", generator=g, dtype=torch.bfloat16)
    b = torch.randn(groups, n, k, device="cuda", generator=g, dtype=torch.bfloat16)
    masked_m = torch.tensor(counts, device="cuda", dtype=torch.int32)
    buffer = torch.full((groups, m + extra_rows, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    return a, b, buffer[:, :m], buffer, masked_m


def check_masked(d, buffer, a, b, counts, what: str) -> None:
    """Each expert's first min(max(count, 0), m) rows against its product; its rows from that count rounded up to 128
    on (the end of its last 64- or 128-row block, or m), and the buffer's rows past m, must keep their NaN poison."""
    torch.cuda.synchronize()
    m = d.shape[1]
    for g, count in enumerate(counts):
        rows = min(max(count, 0), m)
        untouched = buffer[g, min(m, (rows + 127) // 128 * 128):]
        assert bool(torch.isnan(untouched).all()), f"{what}: expert {g} (count {count}): rows past its last tile " \
                                                   f"were written"
        if rows:
            check_rows(d[g, :rows], a[g, :rows], b[g], f"{what}: expert {g} (count {count})")


def test_m_grouped_masked():
    """Ragged counts (one empty, one full, one past m and one negative, both clamped), several expected_m (0, a decode
    and a prefill count, one past m: clamped), m a multiple of 64 or not, n and k not multiples of 64."""
    cases = (([200, 0, 37, 256, 1, 300, -3, 129], 256, 576, 520), ([200, 64, 65, 0, 250, 129, -1, 7], 200, 136, 1048))
    for counts, m, n, k in cases:
        a, b, d, buffer, masked_m = masked_problem(counts, m, n, k, seed=m + n + k)
        for expected_m in (0, 8, 128, 4096):
            buffer.fill_(float("nan"))
            kiln.m_grouped_bf16_gemm_nt_masked(a, b, d, masked_m, expected_m)
            check_masked(d, buffer, a, b, counts, f"m = {m}, n = {n}, k = {k}, expected_m = {expected_m}")
    print(f"  {len(cases)} problems of 8 experts, 4 expected_m each: every expert within calc_diff {MAX_DIFF}")


def test_m_grouped_masked_stream_and_refusals():
    """An explicit stream argument, compiled_dims, refused calls that leave D as it was, and m = 0."""
    counts = [17, 128, 0, 90]
    a, b, d, buffer, masked_m = masked_problem(counts, 128, 2112, 7168, seed=44)
    stream = torch.cuda.Stream()
    torch.cuda.synchronize()
    kiln.m_grouped_bf16_gemm_nt_masked(a, b, d, masked_m, 64, "mnk", stream=stream)
    stream.synchronize()
    check_masked(d, buffer, a, b, counts, "an explicit stream")
    buffer.fill_(float("nan"))
    torch.cuda.synchronize()
    with raises(ValueError, r"m_grouped_bf16_gemm_nt_masked: masked_m must be of shape \(4,\)"):
        kiln.m_grouped_bf16_gemm_nt_masked(a, b, d, masked_m[:-1], 64)
    with raises(TypeError, "m_grouped_bf16_gemm_nt_masked: masked_m must be int32, got int64"):
        kiln.m_grouped_bf16_gemm_nt_masked(a, b, d, masked_m.long(), 64)
    with raises(ValueError, "m_grouped_bf16_gemm_nt_masked: masked_m must be on the same device as a|"
                            "masked_m must be on a CUDA device"):
        kiln.m_grouped_bf16_gemm_nt_masked(a, b, d, masked_m.cpu(), 64)
    with raises(ValueError, "m_grouped_bf16_gemm_nt_masked: expected_m must be >= 0"):
        kiln.m_grouped_bf16_gemm_nt_masked(a, b, d, masked_m, -1)
    with raises(TypeError, "m_grouped_bf16_gemm_nt_masked: expected_m must be an int, got Tensor"):
        kiln.m_grouped_bf16_gemm_nt_masked(a, b, d, masked_m, masked_m.float().mean())
    with raises(ValueError, r"m_grouped_bf16_gemm_nt_masked: d must be of shape \(4, 128, 2112\)"):
        kiln.m_grouped_bf16_gemm_nt_masked(a, b, buffer, masked_m, 64)
    torch.cuda.synchronize()
    assert bool(torch.isnan(buffer).all()), "a refused call wrote D"
    kiln.m_grouped_bf16_gemm_nt_masked(a[:, :0], b, d[:, :0], masked_m, 64)  # m = 0: nothing launched


def test_m_grouped_masked_in_a_graph():
    """Captured once, as a decode step is: the replay reads masked_m as it is at replay time, so each step's routing
    needs no new capture."""
    counts = [20, 3, 0, 64]
    m, n, k = 128, 4096, 7168
    a, b, d, buffer, masked_m = masked_problem(counts, m, n, k, seed=78)
    kiln.m_grouped_bf16_gemm_nt_masked(a, b, d, masked_m, 32)  # warm-up: compiled and loaded outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        kiln.m_grouped_bf16_gemm_nt_masked(a, b, d, masked_m, 32)
    for step in ([20, 3, 0, 64], [0, 128, 7, 1], [128, 128, 128, 128], [-5, 200, 65, 0]):
        masked_m.copy_(torch.tensor(step, dtype=torch.int32))
        buffer.fill_(float("nan"))
        graph.replay()
        check_masked(d, buffer, a, b, step, f"replay with masked_m {step}")
    print("  replays follow masked_m as it is at replay time")


# ---- The k-grouped weight gradients (k_grouped_bf16_gemm_tn_contiguous) -------------------------------------------

def k_grouped_problem(ks, m: int, n: int, seed: int):
    """DeepGEMM's k-grouped operands for groups of `ks` tokens: a [sum(ks), m] and b [sum(ks), n] random bf16, each
    group's tokens one after the other; ks_tensor (ks on the GPU, as DeepGEMM takes it; kiln does not read it); and a
    random float32 C [G, m, n] on the scale of the largest group's product."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(sum(ks), m, device="cuda", generator=g, dtype=torch.bfloat16)
    b = torch.randn(sum(ks), n, device="cuda", generator=g, dtype=torch.bfloat16)
    c = torch.randn(len(ks), m, n, device="cuda", generator=g) * max(ks) ** 0.5
    return a, b, torch.tensor(ks, dtype=torch.int32, device="cuda"), c


def check_k_groups(d, a, b, ks, c, what: str, rows=None) -> None:
    """D [G, m, n] against each group's float64 a[t:t+k]^T . b[t:t+k] plus C[g] (c None: plus nothing), on D's rows
    `rows` (None: all of them): finite everywhere, within calc_diff F32_MAX_DIFF per group, and a group without tokens
    exactly C[g] (zeros without c)."""
    torch.cuda.synchronize()
    assert bool(torch.isfinite(d).all()), f"{what}: NaN or Inf in D"
    every = slice(None) if rows is None else rows
    first = 0
    for g, k in enumerate(ks):
        if k == 0:
            expected = c[g] if c is not None else torch.zeros_like(d[g])
            assert torch.equal(d[g], expected), f"{what}: group {g} (no tokens) is not {'C[g]' if c is not None else 0}"
            continue
        reference = a[first:first + k, every].double().T @ b[first:first + k].double()
        if c is not None:
            reference += c[g, every].double()
        diff = calc_diff(d[g, every], reference)
        assert diff < F32_MAX_DIFF, f"{what}: group {g} (k = {k}) calc_diff {diff:.2e} >= {F32_MAX_DIFF}"
        first += k


def test_k_grouped_weight_gradients():
    """Token counts that are not multiples of 64 (1, 37, 65: K tails the loads zero-fill, never reading the next
    group's tokens) and a group without tokens, with c=None (its D zeroed), c=d (D += A_g^T . B_g) and another c (D = C
    + ..., C left as it was) on an explicit stream; A, B and D as views of wider rows; refused calls."""
    ks = [37, 0, 300, 64, 1, 65, 1000, 128]
    m, n = 256, 576
    a, b, ks_tensor, c = k_grouped_problem(ks, m, n, seed=91)
    groups = len(ks)
    d = torch.full((groups, m, n), float("nan"), device="cuda")
    kiln.k_grouped_bf16_gemm_tn_contiguous(a, b, d, ks, ks_tensor)
    check_k_groups(d, a, b, ks, None, "c=None")
    d.copy_(c)
    kiln.k_grouped_bf16_gemm_tn_contiguous(a, b, d, ks, ks_tensor, c=d)
    check_k_groups(d, a, b, ks, c, "c=d")
    d.fill_(float("nan"))
    c_before = c.clone()
    side = torch.cuda.Stream()
    torch.cuda.synchronize()
    kiln.k_grouped_bf16_gemm_tn_contiguous(a, b, d, ks, ks_tensor, c, "mn", stream=side)
    side.synchronize()
    check_k_groups(d, a, b, ks, c, "c separate, an explicit stream")
    assert torch.equal(c, c_before), "c was changed"
    # A and B rows padded with NaN (a read past m or n would show), D's rows with NaN that must stay.
    a_view = torch.full((sum(ks), m + 8), float("nan"), device="cuda", dtype=torch.bfloat16)[:, :m]
    b_view = torch.full((sum(ks), n + 8), float("nan"), device="cuda", dtype=torch.bfloat16)[:, :n]
    a_view.copy_(a)
    b_view.copy_(b)
    buffer = torch.full((groups, m, n + 4), float("nan"), device="cuda")
    kiln.k_grouped_bf16_gemm_tn_contiguous(a_view, b_view, buffer[:, :, :n], ks, ks_tensor, c=c)
    check_k_groups(buffer[:, :, :n], a, b, ks, c, "A, B and D views of wider rows")
    assert bool(torch.isnan(buffer[:, :, n:]).all()), "D's padding columns were written"
    # Refused before anything is enqueued: D keeps its values.
    expected = d.clone()
    function = "k_grouped_bf16_gemm_tn_contiguous"
    with raises(ValueError, rf"{function}: ks must hold one token count per group \(d.size\(0\) == 8\), got 7"):
        kiln.k_grouped_bf16_gemm_tn_contiguous(a, b, d, ks[:-1], ks_tensor, c=c)
    with raises(ValueError, rf"{function}: ks\[1\] must be a token count in 0..2147483647, got -1"):
        kiln.k_grouped_bf16_gemm_tn_contiguous(a, b, d, [37, -1, 301, 64, 1, 65, 1000, 128], ks_tensor, c=c)
    with raises(ValueError, rf"{function}: a must be of shape \(1595, 256\)"):
        kiln.k_grouped_bf16_gemm_tn_contiguous(a[1:], b, d, ks, ks_tensor, c=c)
    with raises(TypeError, f"{function}: a must be bfloat16, got float32"):
        kiln.k_grouped_bf16_gemm_tn_contiguous(a.float(), b, d, ks, ks_tensor, c=c)
    with raises(TypeError, f"{function}: d must be float32, got bfloat16"):
        kiln.k_grouped_bf16_gemm_tn_contiguous(a, b, d.bfloat16(), ks, ks_tensor)
    with raises(ValueError, f"{function}: compiled_dims must be a string of the letters m, n and k"):
        kiln.k_grouped_bf16_gemm_tn_contiguous(a, b, d, ks, ks_tensor, c=c, compiled_dims="mx")
    torch.cuda.synchronize()
    assert torch.equal(d, expected), "a refused call changed D"
    print(f"  ks {ks}, m = {m}, n = {n}: c None, c = d, another c and padded views within calc_diff {F32_MAX_DIFF}")


def test_k_grouped_forty_groups():
    """40 groups, more than one launch's table holds (32): token counts drawn from a fixed seed (1..700), the first, a
    middle and the last group without tokens; c=None, then c=d."""
    counts = torch.randint(1, 701, (40,), generator=torch.Generator().manual_seed(40))
    ks = [int(k) for k in counts]
    ks[0] = ks[17] = ks[39] = 0
    m, n = 256, 512
    a, b, ks_tensor, c = k_grouped_problem(ks, m, n, seed=94)
    d = torch.full((len(ks), m, n), float("nan"), device="cuda")
    kiln.k_grouped_bf16_gemm_tn_contiguous(a, b, d, ks, ks_tensor)
    check_k_groups(d, a, b, ks, None, "40 groups, c=None")
    d.copy_(c)
    kiln.k_grouped_bf16_gemm_tn_contiguous(a, b, d, ks, ks_tensor, c=d)
    check_k_groups(d, a, b, ks, c, "40 groups, c=d")
    print(f"  40 groups ({sum(ks)} tokens, {min(k for k in ks if k)}..{max(ks)} a group): within calc_diff "
          f"{F32_MAX_DIFF}")


def test_k_grouped_deepseek_expert_shape():
    """DeepSeek-V3's gate/up weight gradient, m = 4096 (twice the 2048 intermediate) by n = 7168 (hidden), for 8
    experts with router-like token counts (skewed, not multiples of 64, one expert without tokens): c=None, then c=d,
    each group checked on D rows spread over every 128-row block (all columns)."""
    ks = [1283, 415, 2750, 97, 603, 1911, 0, 381]
    m, n = 4096, 7168
    a, b, ks_tensor, c = k_grouped_problem(ks, m, n, seed=95)
    rows = torch.cat([torch.arange(0, m, 61), torch.tensor([m - 1])]).cuda()  # 2 or 3 rows in every 128-row block
    d = torch.full((len(ks), m, n), float("nan"), device="cuda")
    kiln.k_grouped_bf16_gemm_tn_contiguous(a, b, d, ks, ks_tensor)
    check_k_groups(d, a, b, ks, None, "4096 x 7168, c=None", rows)
    d.copy_(c)
    kiln.k_grouped_bf16_gemm_tn_contiguous(a, b, d, ks, ks_tensor, c=d)
    check_k_groups(d, a, b, ks, c, "4096 x 7168, c=d", rows)
    print(f"  4096 x 7168, ks {ks}: {rows.numel()} rows of every group within calc_diff {F32_MAX_DIFF}")


def test_k_grouped_in_a_graph():
    """Captured after a warm-up, with a C and without: each group's copy of C (or the zeroing of the group without
    tokens) and the launches are recorded, and replays recompute every group from A as it is at replay time."""
    ks = [200, 0, 77, 513]
    m, n = 256, 1024
    a, b, ks_tensor, c = k_grouped_problem(ks, m, n, seed=96)
    d = torch.empty(len(ks), m, n, device="cuda")
    for with_c in (c, None):
        kiln.k_grouped_bf16_gemm_tn_contiguous(a, b, d, ks, ks_tensor, c=with_c)  # warm-up: compiled and loaded
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            kiln.k_grouped_bf16_gemm_tn_contiguous(a, b, d, ks, ks_tensor, c=with_c)
        for replay in range(2):
            a.copy_(torch.randn_like(a))
            d.fill_(float("nan"))
            graph.replay()
            check_k_groups(d, a, b, ks, with_c, f"replay {replay}, c {'given' if with_c is not None else 'None'}")
    print("  replays with and without C: every group within calc_diff, the group without tokens C[g] or zeros")


if __name__ == "__main__":
    sys.exit(run_module(globals()))
