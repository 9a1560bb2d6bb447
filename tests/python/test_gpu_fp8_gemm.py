"""GPU tests of kiln.fp8_gemm_nt from Python (skipped without PyTorch and a CUDA GPU).

Inputs are random bfloat16 A [m, k] and B [n, k], quantised with kiln.per_token_cast_to_fp8 (A: per token per 128
channels, scales MN-major) and kiln.per_block_cast_to_fp8 (B: per 128x128 block); D is poisoned with NaN before
each call. Each result is compared, with DeepGEMM's calc_diff (1 - 2 sum(xy) / sum(x^2 + y^2)), against a float64
reference computed from the dequantised inputs (< 1e-5: the kernel's arithmetic) and against the float64 product of
the unquantised bf16 inputs (< 1e-3: the FP8 recipe's accuracy); no NaN or Inf may be left in D.

Covered: every dense_fp8 (N, K) of shared/bench/shapes.json at M = 1, 64, 128, 4096; ragged M (37, 1000) with
N = 576 among them; padded row strides of A, D and A's scales (D's padding must stay untouched); row-major A scales
(converted by the wrapper; bit-identical results); the caller's current stream (a non-default one) and an explicit
stream argument; CUDA graph capture and replay after warm-up (also with row-major scales, whose conversion is
captured too); m = 0; the casts feeding the GEMM with PDL on and fewer SMs; Python threads on their own streams;
errors that the wrapper raises on the GPU path.

The weight-gradient form (float32 d: D = C + A . B^T with B scaled per row too, both operands cast with
kiln.per_token_cast_to_fp8): c=None (D poisoned first: every element must be stored), c=d (D filled with a random C of
the product's size), c another tensor (C unchanged afterwards), a view sharing d's memory as c, recipe=(1, 1, 128),
row-major B scales (converted, bit-identical), a padded row stride of D, on typical weight-gradient shapes
(7168 x 2112 x 4096, 2048 x 7168 x 2048) and ragged ones; each against the float64 C + dequantised product
(< 1e-5), D - C against the dequantised product alone (< 1e-5) and against the bf16 inputs' product (< 1e-3).
The k-grouped call (k_grouped_fp8_gemm_nt_contiguous, every group in one launch of up to 32 groups): each group
against its float64 product, with an empty group, 70 groups in three launches, and replayed from a CUDA graph.
The m-grouped calls (m_grouped_fp8_gemm_nt_contiguous and _masked): each expert's rows against its float64 products,
padding and rows past a count left as the contract says, and CUDA graphs that follow the routing at replay time.

Runs under pytest, or alone: `python3 tests/python/test_gpu_fp8_gemm.py` (one PASS/FAIL line per test).
"""

from __future__ import annotations

import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gpu_support import HAVE_GPU, SKIP_REASON, calc_diff, raises, run_module, torch  # noqa: E402

import kiln  # noqa: E402

try:
    import pytest
    pytestmark = pytest.mark.skipif(not HAVE_GPU, reason=SKIP_REASON)
except ImportError:
    pytest = None

# shared/bench/shapes.json, "dense_fp8" (copied: the GPU machine gets the repository only).
DENSE_M = (1, 64, 128, 4096)
DENSE_NK = ((2112, 7168), (24576, 1536), (32768, 512), (7168, 16384), (4096, 7168), (7168, 2048), (576, 7168))
MAX_DIFF_DEQUANTISED = 1e-5  # DeepGEMM's test threshold against the dequantised reference
MAX_DIFF_EXACT = 1e-3  # against the unquantised product (all FP8 paths measure ~6.8e-4)


class Problem:
    """One GEMM's inputs: bf16 A and B, their FP8 casts through kiln, and a NaN-poisoned D."""

    def __init__(self, m: int, n: int, k: int, seed: int = 0, d_stride: int | None = None):
        torch.manual_seed(seed)
        self.m, self.n, self.k = m, n, k
        self.a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        self.b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        self.a_fp8, self.sfa = kiln.per_token_cast_to_fp8(self.a)
        self.b_fp8, self.sfb = kiln.per_block_cast_to_fp8(self.b)
        self.d = new_d(m, n, d_stride)

    def run(self, **kwargs):
        poison(self.d)
        kiln.fp8_gemm_nt((self.a_fp8, self.sfa), (self.b_fp8, self.sfb), self.d, **kwargs)
        return self.d


def new_d(m: int, n: int, stride: int | None = None):
    stride = stride or n
    return torch.full((m, stride), float("nan"), device="cuda", dtype=torch.bfloat16)[:, :n]


def fp8_zeros(rows: int, cols: int):
    # Made as bytes: fills are not implemented for float8 dtypes in every torch build.
    return torch.zeros(rows, cols, device="cuda", dtype=torch.uint8).view(torch.float8_e4m3fn)


def poison(d):
    d.fill_(float("nan"))


def dequantised(x_fp8, scales, rows_per_scale: int):
    """x_fp8 [r, k] times its scales (one per rows_per_scale rows and 128 columns), in float64."""
    r, k = x_fp8.shape
    s = scales.double().repeat_interleave(128, dim=1)[:, :k]
    if rows_per_scale > 1:
        s = s.repeat_interleave(rows_per_scale, dim=0)[:r]
    return x_fp8.float().double() * s


def check(d, a_fp8, sfa, b_fp8, sfb, a, b, what: str):
    """D against both references; returns (diff vs dequantised, diff vs exact)."""
    torch.cuda.synchronize()
    assert d.shape == (a_fp8.shape[0], b_fp8.shape[0]), f"{what}: D shape {tuple(d.shape)}"
    bad = (~torch.isfinite(d)).sum().item()
    assert bad == 0, f"{what}: {bad} of {d.numel()} elements of D are NaN or Inf (poisoned and not written?)"
    reference = dequantised(a_fp8, sfa, 1) @ dequantised(b_fp8, sfb, 128).T
    diff = calc_diff(d, reference)
    del reference
    exact = calc_diff(d, a.double() @ b.double().T)
    assert diff < MAX_DIFF_DEQUANTISED, f"{what}: calc_diff against the dequantised reference {diff:.3g}"
    assert exact < MAX_DIFF_EXACT, f"{what}: calc_diff against the unquantised product {exact:.3g}"
    return diff, exact


def check_problem(p: Problem, what: str):
    return check(p.d, p.a_fp8, p.sfa, p.b_fp8, p.sfb, p.a, p.b, what)


def run_shapes(shapes, label: str):
    failures = []
    for m, n, k in shapes:
        what = f"{label} m={m} n={n} k={k}"
        try:
            p = Problem(m, n, k, seed=m + 7 * n + 13 * k)
            p.run()
            diff, exact = check_problem(p, what)
            print(f"  {what}: calc_diff {diff:.2e} (dequantised), {exact:.2e} (exact)")
        except Exception as e:  # every shape runs; the assertion below lists the failures
            failures.append(f"{type(e).__name__}: {e}")
            print(f"  {what}: {type(e).__name__}: {e}")
        finally:
            p = None
    assert not failures, f"{len(failures)} of {len(shapes)} shapes failed: " + "; ".join(failures)


def _dense_test(n: int, k: int):
    def test():
        run_shapes([(m, n, k) for m in DENSE_M], "dense")
    test.__name__ = test.__qualname__ = f"test_dense_{n}x{k}"
    test.__doc__ = f"dense_fp8 N={n} K={k} at M = {', '.join(map(str, DENSE_M))}."
    return test


for _n, _k in DENSE_NK:
    globals()[f"test_dense_{_n}x{_k}"] = _dense_test(_n, _k)


def test_ragged_m():
    run_shapes([(m, n, k) for m in (37, 1000) for n, k in ((576, 7168), (7168, 2048), (2112, 7168))], "ragged")


def test_padded_strides():
    # A's rows 128 bytes apart beyond k, A's scales with a wider column stride, D's rows 64 columns wider:
    # D's padding columns must stay NaN (never written), everything else finite and right.
    m, n, k = 200, 576, 7168
    p = Problem(m, n, k, seed=3, d_stride=n + 64)
    wide_a = fp8_zeros(m, k + 128)[:, :k]
    wide_a.view(torch.uint8).copy_(p.a_fp8.view(torch.uint8))
    kb, column = k // 128, kiln.get_tma_aligned_size(m, 4) + 16
    wide_sfa = torch.full((kb, column), float("nan"), device="cuda").T[:m]
    wide_sfa.copy_(p.sfa)
    assert wide_a.stride() == (k + 128, 1) and wide_sfa.stride() == (1, column)
    assert kiln._tensors.gemm_sfa(wide_sfa) is wide_sfa, "a valid MN-major layout must not be copied"
    kiln.fp8_gemm_nt((wide_a, wide_sfa), (p.b_fp8, p.sfb), p.d)
    check(p.d, p.a_fp8, p.sfa, p.b_fp8, p.sfb, p.a, p.b, "padded strides")
    full = p.d.as_strided((m, n + 64), (n + 64, 1))
    assert torch.isnan(full[:, n:]).all(), "D's padding columns were written"


def test_row_major_scales_give_identical_results():
    for m, n, k in ((1, 7168, 2048), (37, 576, 7168), (128, 2112, 7168), (1000, 4096, 7168)):
        p = Problem(m, n, k, seed=m)
        assert kiln._tensors.gemm_sfa(p.sfa) is p.sfa, "per_token_cast_to_fp8's scales must pass as they are"
        expected = p.run().clone()
        row_major = p.sfa.contiguous()
        assert row_major.stride() == (k // 128, 1) and torch.equal(row_major, p.sfa)
        converted = kiln._tensors.gemm_sfa(row_major)
        assert converted is not row_major and kiln._tensors.gemm_sfa_layout_ok(converted)
        poison(p.d)
        kiln.fp8_gemm_nt((p.a_fp8, row_major), (p.b_fp8, p.sfb), p.d)
        torch.cuda.synchronize()
        assert torch.equal(p.d, expected), f"m={m} n={n} k={k}: row-major scales changed the result"
        check(p.d, p.a_fp8, p.sfa, p.b_fp8, p.sfb, p.a, p.b, f"row-major sfa m={m}")


def test_the_callers_current_stream_is_used():
    # On a side stream: a long sleep, then A is filled, then the GEMM. Launched on any other stream, the GEMM
    # would read A before it is filled (zeros: D would be all zeros, far from the reference).
    p = Problem(256, 2112, 7168, seed=11)
    a_fp8 = fp8_zeros(*p.a_fp8.shape)
    side = torch.cuda.Stream()
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        torch.cuda._sleep(200_000_000)  # ~0.1 s of GPU time
        a_fp8.view(torch.uint8).copy_(p.a_fp8.view(torch.uint8))
        poison(p.d)
        kiln.fp8_gemm_nt((a_fp8, p.sfa), (p.b_fp8, p.sfb), p.d)
    side.synchronize()
    check_problem(p, "current side stream")


def test_an_explicit_stream_argument():
    p = Problem(64, 7168, 2048, seed=12)
    a_fp8 = fp8_zeros(*p.a_fp8.shape)
    side = torch.cuda.Stream()
    for stream in (side, side.cuda_stream):
        a_fp8.view(torch.uint8).zero_()
        torch.cuda.synchronize()
        with torch.cuda.stream(side):
            torch.cuda._sleep(100_000_000)
            a_fp8.view(torch.uint8).copy_(p.a_fp8.view(torch.uint8))
            poison(p.d)
        # Called on the default stream, enqueued on `side` after the copy.
        kiln.fp8_gemm_nt((a_fp8, p.sfa), (p.b_fp8, p.sfb), p.d, stream=stream)
        side.synchronize()
        check_problem(p, f"stream={type(stream).__name__}")


def _graph_case(row_major: bool):
    m, n, k = 128, 4096, 7168
    p = Problem(m, n, k, seed=13)
    sfa = p.sfa.contiguous() if row_major else p.sfa
    args = ((p.a_fp8, sfa), (p.b_fp8, p.sfb), p.d)
    kiln.fp8_gemm_nt(*args)  # warm-up: compiled and loaded outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        kiln.fp8_gemm_nt(*args)
    # New inputs in the captured buffers, D poisoned: the replay must compute the new product.
    q = Problem(m, n, k, seed=14)
    p.a_fp8.view(torch.uint8).copy_(q.a_fp8.view(torch.uint8))
    sfa.copy_(q.sfa)
    p.b_fp8.view(torch.uint8).copy_(q.b_fp8.view(torch.uint8))
    p.sfb.copy_(q.sfb)
    poison(p.d)
    graph.replay()
    torch.cuda.synchronize()
    check(p.d, q.a_fp8, q.sfa, q.b_fp8, q.sfb, q.a, q.b, f"graph replay (row-major sfa: {row_major})")
    poison(p.d)
    graph.replay()  # and again
    check(p.d, q.a_fp8, q.sfa, q.b_fp8, q.sfb, q.a, q.b, "second replay")


def test_graph_capture_and_replay_after_warm_up():
    _graph_case(row_major=False)


def test_graph_capture_with_row_major_scales_captures_the_conversion():
    _graph_case(row_major=True)


def test_empty_m_is_a_no_op():
    b_fp8, sfb = kiln.per_block_cast_to_fp8(torch.randn(576, 512, device="cuda", dtype=torch.bfloat16))
    a_fp8, sfa = kiln.per_token_cast_to_fp8(torch.empty(0, 512, device="cuda", dtype=torch.bfloat16))
    d = torch.empty(0, 576, device="cuda", dtype=torch.bfloat16)
    assert kiln.fp8_gemm_nt((a_fp8, sfa), (b_fp8, sfb), d) is None
    torch.cuda.synchronize()


def test_casts_feeding_the_gemm_with_pdl_on_and_fewer_sms():
    # The casts release their dependents early under PDL; the GEMM must still read finished inputs.
    try:
        kiln.set_pdl(True)
        kiln.set_num_sms(40)
        for m, n, k in ((1, 7168, 2048), (300, 2112, 7168), (4096, 7168, 2048)):
            p = Problem(m, n, k, seed=21 + m)
            for _ in range(3):  # back to back on one stream: cast, cast, GEMM
                p.a_fp8, p.sfa = kiln.per_token_cast_to_fp8(p.a)
                p.b_fp8, p.sfb = kiln.per_block_cast_to_fp8(p.b)
                p.run()
            check_problem(p, f"PDL on, 40 SMs, m={m} n={n} k={k}")
    finally:
        kiln.set_pdl(False)
        kiln.set_num_sms(0)


def test_python_threads_on_their_own_streams():
    shapes = [(64, 7168, 2048), (128, 2112, 7168), (37, 576, 7168), (1000, 4096, 7168)] * 2
    problems = [Problem(m, n, k, seed=100 + i) for i, (m, n, k) in enumerate(shapes)]
    expected = [p.run().clone() for p in problems]
    torch.cuda.synchronize()
    errors = []
    barrier = threading.Barrier(len(problems))

    def work(i):
        try:
            p = problems[i]
            stream = torch.cuda.Stream()
            barrier.wait(timeout=60)
            with torch.cuda.stream(stream):
                for _ in range(20):
                    p.run()
            stream.synchronize()
            if not torch.equal(p.d, expected[i]):
                errors.append(f"thread {i}: result differs from the single-threaded one")
        except BaseException as e:  # reported by the main thread
            errors.append(f"thread {i}: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(problems))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a thread did not finish in 120 s"
    assert not errors, "; ".join(errors)


def test_errors_on_the_gpu():
    p = Problem(64, 576, 512, seed=31)
    a, b = (p.a_fp8, p.sfa), (p.b_fp8, p.sfb)
    # A float32 d is the weight-gradient form: the bf16 form's 128x128-block scales of B do not fit it.
    with raises(ValueError, match=r"fp8_gemm_nt: sfb must be of shape \(576, 4\) \(n, ceil\(k / 128\)\): per-row 1x128"):
        kiln.fp8_gemm_nt(a, b, p.d.float(), c=p.d.float())
    with raises(ValueError, match=r"per-row 1x128 scales"):
        kiln.fp8_gemm_nt(a, b, torch.empty(64, 576, device="cuda"))
    with raises(TypeError, match="d must be float32 when c is given"):
        kiln.fp8_gemm_nt(a, b, p.d, c=p.d.float())
    with raises(ValueError, match=r"recipe=\(1, 1, 128\) \(the weight-gradient form, B scaled per row\) needs a float32 d"):
        kiln.fp8_gemm_nt(a, b, p.d, recipe=(1, 1, 128))
    with raises(TypeError, match="d must be bfloat16, got float16"):
        kiln.fp8_gemm_nt(a, b, p.d.half())
    with raises(TypeError, match="a must be float8_e4m3fn, got bfloat16"):
        kiln.fp8_gemm_nt((p.a, p.sfa), b, p.d)
    with raises(ValueError, match=r"sfb must be of shape \(5, 4\)"):
        kiln.fp8_gemm_nt(a, (p.b_fp8, p.sfb[:4]), p.d)
    with raises(ValueError, match=r"sfa must be of shape \(64, 4\)"):
        kiln.fp8_gemm_nt((p.a_fp8, p.sfa[:, :3]), b, p.d)
    with raises(ValueError, match="b must be on the same device as a|b must be on a CUDA device"):
        kiln.fp8_gemm_nt(a, (p.b_fp8.cpu(), p.sfb), p.d)
    with raises(ValueError, match="d must be rows 16-byte aligned"):
        kiln.fp8_gemm_nt(a, b, new_d(64, 576, 580))


# ---- The weight-gradient form: float32 d, both operands scaled per 1x128 ------------------------------------------

class WgradProblem:
    """One weight-gradient GEMM: bf16 A [m, k] and B [n, k], both cast per row per 128 K with kiln (MN-major
    scales), and a random float32 C of the product's size."""

    def __init__(self, m: int, n: int, k: int, seed: int = 0, d_stride: int | None = None):
        torch.manual_seed(seed)
        self.m, self.n, self.k = m, n, k
        self.a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        # Row magnitudes over 2^-4..2^4: every per-row scale matters.
        self.b = (torch.randn(n, k, device="cuda") * torch.exp2(torch.randint(-4, 5, (n, 1), device="cuda"))).bfloat16()
        self.a_fp8, self.sfa = kiln.per_token_cast_to_fp8(self.a)
        self.b_fp8, self.sfb = kiln.per_token_cast_to_fp8(self.b)
        self.product = dequantised(self.a_fp8, self.sfa, 1) @ dequantised(self.b_fp8, self.sfb, 1).T
        self.exact = self.a.double() @ self.b.double().T
        self.c = (torch.rand(m, n, device="cuda", dtype=torch.float64) * 2 - 1) * self.product.std().clamp(min=1e-3)
        self.c = self.c.float()
        stride = d_stride or n
        self.d = torch.full((m, stride), float("nan"), device="cuda")[:, :n]

    def args(self, sfb=None):
        return (self.a_fp8, self.sfa), (self.b_fp8, self.sfb if sfb is None else sfb)

    def check(self, with_c: bool, what: str):
        torch.cuda.synchronize()
        d = self.d
        bad = (~torch.isfinite(d)).sum().item()
        assert bad == 0, f"{what}: {bad} of {d.numel()} elements of D are NaN or Inf"
        c = self.c.double() if with_c else torch.zeros_like(self.product)
        total = calc_diff(d, c + self.product)
        alone = calc_diff(d.double() - c, self.product)
        exact = calc_diff(d.double() - c, self.exact)
        assert total < MAX_DIFF_DEQUANTISED, f"{what}: calc_diff(D, C + dequantised product) {total:.3g}"
        assert alone < MAX_DIFF_DEQUANTISED, f"{what}: calc_diff(D - C, dequantised product) {alone:.3g}"
        assert exact < MAX_DIFF_EXACT, f"{what}: calc_diff(D - C, product of the bf16 inputs) {exact:.3g}"
        print(f"  {what}: calc_diff {total:.2e} (C + dequantised), {alone:.2e} (D - C), {exact:.2e} (exact)")


WGRAD_SHAPES = ((7168, 2112, 4096), (2048, 7168, 2048), (200, 576, 512), (37, 2112, 7168), (1, 576, 1024))


def test_weight_gradient_form_c_none_c_d_and_c_separate():
    failures = []
    for m, n, k in WGRAD_SHAPES:
        what = f"wgrad m={m} n={n} k={k}"
        try:
            p = WgradProblem(m, n, k, seed=m + 3 * n + k)
            a, b = p.args()
            kiln.fp8_gemm_nt(a, b, p.d)  # c=None: D = A . B^T over a NaN-poisoned D
            p.check(False, what + " c=None")
            p.d.copy_(p.c)
            kiln.fp8_gemm_nt(a, b, p.d, c=p.d)  # D += A . B^T
            p.check(True, what + " c=d")
            p.d.fill_(float("nan"))
            c_before = p.c.clone()
            kiln.fp8_gemm_nt(a, b, p.d, p.c)  # positionally, as DeepGEMM's (a, b, d, c)
            p.check(True, what + " c separate")
            assert torch.equal(p.c, c_before), f"{what}: C changed"
        except Exception as e:  # every shape runs; the assertion below lists the failures
            failures.append(f"{what}: {type(e).__name__}: {e}")
            print(f"  {what}: {type(e).__name__}: {e}")
        finally:
            p = None
    assert not failures, "; ".join(failures)


def test_weight_gradient_form_details():
    m, n, k = 300, 2112, 2048
    p = WgradProblem(m, n, k, seed=41, d_stride=n + 8)
    a, b = p.args()
    # A view sharing d's memory is d (DeepGEMM's rule: same data pointer, shape and strides), with the recipe given.
    p.d.copy_(p.c)
    kiln.fp8_gemm_nt(a, b, p.d, c=p.d.view(m, n), recipe=(1, 1, 128))
    p.check(True, "c = a view of d, recipe=(1, 1, 128), ldd = n + 8")
    full = p.d.as_strided((m, n + 8), (n + 8, 1))
    assert torch.isnan(full[:, n:]).all(), "D's padding columns were written"
    expected = p.d.clone()
    # Row-major B scales (DeepGEMM's per_token_cast_to_fp8 output): converted like A's, same bits.
    row_major = p.sfb.contiguous()
    assert row_major.stride() == (k // 128, 1) and kiln._tensors.gemm_sfb(row_major, p.d) is not row_major
    assert kiln._tensors.gemm_sfb(p.sfb, p.d) is p.sfb, "per_token_cast_to_fp8's scales must pass as they are"
    p.d.copy_(p.c)
    kiln.fp8_gemm_nt(a, (p.b_fp8, row_major), p.d, c=p.d)
    torch.cuda.synchronize()
    assert torch.equal(p.d, expected), "row-major B scales changed the result"
    # A separate C with padded rows, on an explicit stream.
    wide_c = torch.full((m, n + 64), float("nan"), device="cuda")[:, :n]
    wide_c.copy_(p.c)
    side = torch.cuda.Stream()
    p.d.fill_(float("nan"))
    torch.cuda.synchronize()
    kiln.fp8_gemm_nt(a, b, p.d, c=wide_c, stream=side)
    side.synchronize()
    p.check(True, "padded separate C on an explicit stream")
    assert torch.isnan(full[:, n:]).all(), "D's padding columns were written by the copy of C"
    # Errors that need the GPU path's tensors: c overlapping d, the block scales of the bf16 form.
    with raises(ValueError, match="c must be d itself or memory that does not overlap d's"):
        kiln.fp8_gemm_nt((p.a_fp8[: m - 1], p.sfa[: m - 1]), b, p.d[: m - 1], c=p.d[1:])
    block_sfb = kiln.per_block_cast_to_fp8(p.b)[1]
    with raises(ValueError, match="per-row 1x128 scales"):
        kiln.fp8_gemm_nt(a, (p.b_fp8, block_sfb), p.d)


def test_weight_gradient_form_token_slices_share_one_kernel():
    """Per-expert weight gradients over slices of one token axis (MoE): K differs per call, the kernel does not.

    A and B hold 4096 tokens; each expert's slice [k0, k1) (a multiple of 128 tokens) is a column view of the fp8
    tensors and of their MN-major scales, and its gradient D_e = A[:, k0:k1] . B[:, k0:k1]^T. After the first
    slice, the others (other K, the same forced tile) compile nothing and read nothing from the disk cache."""
    m, n, total = 512, 1536, 4096
    p = WgradProblem(m, n, total, seed=61)
    kiln.set_fp8_gemm_overrides(block_m=128, block_n=128)
    try:
        bounds = (0, 1024, 1408, 1536, 4096)  # 1024, 384, 128 and 2560 tokens
        stats = None
        for e, (k0, k1) in enumerate(zip(bounds, bounds[1:])):
            a = (p.a_fp8[:, k0:k1], p.sfa[:, k0 // 128 : k1 // 128])
            b = (p.b_fp8[:, k0:k1], p.sfb[:, k0 // 128 : k1 // 128])
            d = torch.full((m, n), float("nan"), device="cuda")
            kiln.fp8_gemm_nt(a, b, d)
            torch.cuda.synchronize()
            reference = dequantised(a[0], a[1], 1) @ dequantised(b[0], b[1], 1).T
            assert torch.isfinite(d).all(), f"expert {e} (tokens {k0}..{k1}): NaN or Inf in D"
            diff = calc_diff(d, reference)
            assert diff < MAX_DIFF_DEQUANTISED, f"expert {e} (tokens {k0}..{k1}): calc_diff {diff:.3g}"
            print(f"  expert {e}: tokens {k0}..{k1}, calc_diff {diff:.2e}")
            if stats is None:
                stats = kiln.cache_stats()
        after = kiln.cache_stats()
        for field in ("compiles", "hits", "misses"):
            assert after[field] == stats[field], f"{field}: {stats[field]} -> {after[field]} after the first expert"
    finally:
        kiln.set_fp8_gemm_overrides()


def grouped_operands(m: int, n: int, ks, seed: int):
    """DeepGEMM's k-grouped layout from per-group bf16 operands: a, b flat fp8 (group g's [rows, ks[g]] row-major
    after the groups before it), their scales MN-major and TMA-aligned over every group's K blocks; and per group
    the float64 product of the dequantised operands."""
    torch.manual_seed(seed)
    total_kb = sum(ks) // 128
    flats, scales, products = {}, {}, []
    for name, rows in (("a", m), ("b", n)):
        flats[name], buf = [], torch.empty(total_kb, kiln.get_tma_aligned_size(rows, 4), device="cuda")
        scales[name] = buf.T[:rows]  # [rows, total_kb], strides (1, s): the MN-major, TMA-aligned layout
    kb0 = 0
    for k in ks:
        group = {}
        for name, rows in (("a", m), ("b", n)):
            x = torch.randn(rows, k, device="cuda") * torch.exp2(torch.randint(-3, 4, (rows, 1), device="cuda"))
            x_fp8, sf = kiln.per_token_cast_to_fp8(x.bfloat16()) if k else (x.to(torch.float8_e4m3fn), x[:, :0])
            flats[name].append(x_fp8.reshape(-1))
            scales[name][:, kb0 : kb0 + k // 128] = sf
            group[name] = dequantised(x_fp8, sf, 1) if k else torch.zeros(rows, 0, device="cuda", dtype=torch.float64)
        products.append(group["a"] @ group["b"].T)
        kb0 += k // 128
    a = (torch.cat(flats["a"]), scales["a"])
    b = (torch.cat(flats["b"]), scales["b"])
    return a, b, products


def grouped_c(products, m: int, n: int):
    """A random float32 C [groups, m, n] on the scale of the groups' products."""
    scale = max(p.std().item() for p in products if p.numel())
    return ((torch.rand(len(products), m, n, device="cuda", dtype=torch.float64) * 2 - 1) * scale).float()


def check_groups(d, ks, products, c, what: str):
    """D [groups, m, n] against each group's float64 product plus C[g] (c None: plus nothing): finite everywhere,
    within calc_diff per group, and a group without tokens exactly C[g]."""
    torch.cuda.synchronize()
    assert torch.isfinite(d).all(), f"{what}: NaN or Inf in D"
    for g, k in enumerate(ks):
        expected = products[g] + (c[g].double() if c is not None else 0)
        if k == 0:
            assert torch.equal(d[g].double(), expected), f"{what}: group {g} (no tokens) is not C[g]"
            continue
        diff = calc_diff(d[g], expected)
        assert diff < MAX_DIFF_DEQUANTISED, f"{what}: group {g} (k = {k}) calc_diff {diff:.3g}"


def test_k_grouped_weight_gradients():
    """k_grouped_fp8_gemm_nt_contiguous against each group's float64 product: c=None, c=d and a separate c, an
    empty group (D[g] = C[g]), row-major scales (converted), and the calls with C sharing their kernels (calls
    without C plan apart: at short K their tiles differ)."""
    m, n = 384, 1536
    ks = [1024, 384, 0, 640, 128]
    a, b, products = grouped_operands(m, n, ks, seed=71)
    groups = len(ks)
    c = grouped_c(products, m, n)
    ks_tensor = torch.tensor(ks, dtype=torch.int32, device="cuda")

    def check(d, with_c: bool, what: str):
        check_groups(d, ks, products, c if with_c else None, what)
        print(f"  {what}: every group within calc_diff {MAX_DIFF_DEQUANTISED}")

    d = torch.full((groups, m, n), float("nan"), device="cuda")
    kiln.k_grouped_fp8_gemm_nt_contiguous(a, b, d, ks, ks_tensor)
    check(d, False, "c=None")
    d.copy_(c)
    kiln.k_grouped_fp8_gemm_nt_contiguous(a, b, d, ks, ks_tensor, c=d)
    check(d, True, "c=d")
    before = kiln.cache_stats()
    d.fill_(float("nan"))
    kiln.k_grouped_fp8_gemm_nt_contiguous(a, b, d, ks, ks_tensor, c=c, recipe=(1, 1, 128))
    check(d, True, "c separate")
    after = kiln.cache_stats()
    assert after["compiles"] == before["compiles"], "the call with a separate C compiled what c=d had not"
    # Row-major scales (DeepGEMM's own per_token_cast_to_fp8 returns those) are converted: the same bits.
    expected = d.clone()
    d.fill_(float("nan"))
    kiln.k_grouped_fp8_gemm_nt_contiguous((a[0], a[1].contiguous()), (b[0], b[1].contiguous()), d, ks, ks_tensor, c=c)
    torch.cuda.synchronize()
    assert torch.equal(d, expected), "row-major scales changed the result"
    # A bad group count is refused before anything is enqueued: D keeps its values.
    with raises(ValueError, match=r"ks\[2\] must be a non-negative multiple of 128"):
        kiln.k_grouped_fp8_gemm_nt_contiguous(a, b, d, [1024, 384, 64, 576, 128], ks_tensor, c=c)
    assert torch.equal(d, expected), "a refused call changed D"


def test_k_grouped_many_groups_in_several_launches():
    """More groups than one launch's parameter table holds (kFp8GemmMaxLaunchGroups = 32): 70 groups, some empty,
    token counts from 128 to 1536, so the call makes three launches of one k-grouped kernel; D accumulated into
    (c=d), then every group against its float64 product."""
    m, n = 256, 512
    rng = torch.Generator().manual_seed(97)
    ks = [int(x) * 128 for x in torch.randint(0, 13, (70,), generator=rng)]
    ks[0], ks[33], ks[69] = 0, 1536, 128
    a, b, products = grouped_operands(m, n, ks, seed=97)
    groups = len(ks)
    c = grouped_c(products, m, n)
    d = c.clone()
    kiln.k_grouped_fp8_gemm_nt_contiguous(a, b, d, ks, torch.tensor(ks, dtype=torch.int32, device="cuda"), c=d)
    check_groups(d, ks, products, c, "c=d")
    print(f"  {groups} groups ({sum(1 for k in ks if k)} with tokens): every group within calc_diff "
          f"{MAX_DIFF_DEQUANTISED}")

def test_weight_gradient_form_in_a_graph():
    m, n, k = 256, 2112, 4096
    p = WgradProblem(m, n, k, seed=51)
    a, b = p.args()
    kiln.fp8_gemm_nt(a, b, p.d, c=p.c)  # warm-up: compiled and loaded outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        kiln.fp8_gemm_nt(a, b, p.d, c=p.c)  # the copy of C and the kernel, both captured
    p.d.fill_(float("nan"))
    graph.replay()
    p.check(True, "graph replay: copy of C, then accumulate")
    p.d.fill_(float("nan"))
    graph.replay()
    p.check(True, "second replay")


def test_k_grouped_weight_gradients_in_a_graph():
    """The k-grouped call captured after a warm-up: each group's copy of C and its launch are recorded, and
    replays recompute every group (an empty one's D = C) from the same inputs."""
    m, n = 256, 1024
    ks = [512, 0, 256, 768]
    a, b, products = grouped_operands(m, n, ks, seed=83)
    groups = len(ks)
    ks_tensor = torch.tensor(ks, dtype=torch.int32, device="cuda")
    c = grouped_c(products, m, n)
    d = torch.empty(groups, m, n, device="cuda")
    kiln.k_grouped_fp8_gemm_nt_contiguous(a, b, d, ks, ks_tensor, c=c)  # warm-up: kernels compiled and loaded
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        kiln.k_grouped_fp8_gemm_nt_contiguous(a, b, d, ks, ks_tensor, c=c)
    for replay in range(2):
        d.fill_(float("nan"))
        graph.replay()
        check_groups(d, ks, products, c, f"replay {replay}")
    print(f"  two replays: every group within calc_diff {MAX_DIFF_DEQUANTISED}")



def m_grouped_problem(sizes, n: int, k: int, seed: int, tail_blocks: int = 0):
    """DeepGEMM's contiguous layout for experts of `sizes` rows: A's rows one expert after another, each run padded
    to a multiple of get_mk_alignment_for_contiguous_layout() with rows marked -1 (plus `tail_blocks` blocks of
    padding only), every expert's B cast per 128x128 block. Returns (a, sfa), (b, sfb), m_indices, the row runs
    and the float64 references (dequantised, exact) of each expert's rows."""
    torch.manual_seed(seed)
    align = kiln.get_mk_alignment_for_contiguous_layout()
    runs, m = [], 0
    for size in sizes:
        runs.append((m, size))
        m += (size + align - 1) // align * align
    m += tail_blocks * align
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    indices = torch.full((m,), -1, device="cuda", dtype=torch.int32)
    for g, (first, size) in enumerate(runs):
        indices[first:first + size] = g
    b = torch.randn(len(sizes), n, k, device="cuda", dtype=torch.bfloat16)
    a_fp8, sfa = kiln.per_token_cast_to_fp8(a)
    casts = [kiln.per_block_cast_to_fp8(b[g]) for g in range(len(sizes))]
    b_fp8 = torch.stack([x for x, _ in casts])
    sfb = torch.stack([s for _, s in casts]).contiguous()
    refs = []
    for g, (first, size) in enumerate(runs):
        rows = slice(first, first + size)
        refs.append((dequantised(a_fp8[rows], sfa[rows], 1) @ dequantised(b_fp8[g], sfb[g], 128).T,
                     a[rows].double() @ b[g].double().T))
    return (a_fp8, sfa), (b_fp8, sfb), indices, runs, refs


def check_expert_rows(rows, q, exact, what: str):
    """One expert's rows of D: finite, and within calc_diff of its float64 products (the exact one where given)."""
    bad = (~torch.isfinite(rows)).sum().item()
    assert bad == 0, f"{what}: {bad} elements NaN or Inf"
    diff = calc_diff(rows, q)
    assert diff < MAX_DIFF_DEQUANTISED, f"{what}: calc_diff {diff:.3g} against the dequantised product"
    if exact is not None:
        diff_exact = calc_diff(rows, exact)
        assert diff_exact < MAX_DIFF_EXACT, f"{what}: calc_diff {diff_exact:.3g} against the exact product"


def check_experts(d, runs, refs, what: str):
    """Each expert's rows against its products; the blocks of padding only after the experts' (m_grouped_problem's
    tail) must keep D's NaN poison: the kernel skips them and never writes there."""
    torch.cuda.synchronize()
    for g, ((first, size), (q, exact)) in enumerate(zip(runs, refs)):
        if size:
            check_expert_rows(d[first:first + size], q, exact, f"{what}: expert {g}")
    align = kiln.get_mk_alignment_for_contiguous_layout()
    end = max(first + (size + align - 1) // align * align for first, size in runs)
    assert bool(torch.isnan(d[end:]).all()), f"{what}: blocks of padding only (rows {end}..{d.shape[0]}) were written"


def test_m_grouped_contiguous():
    """m_grouped_fp8_gemm_nt_contiguous against each expert's float64 products: experts of ragged sizes (one empty),
    padding-only blocks at the end, row-major scales of A (converted), a call on another stream, and a refused call
    that leaves D as it was."""
    sizes = [300, 0, 37, 128, 1000, 5]
    n, k = 2112, 1536
    a, b, indices, runs, refs = m_grouped_problem(sizes, n, k, seed=123, tail_blocks=2)
    m = indices.shape[0]
    d = new_d(m, n)
    kiln.m_grouped_fp8_gemm_nt_contiguous(a, b, d, indices)
    check_experts(d, runs, refs, "default call")
    expected = d.clone()
    poison(d)
    kiln.m_grouped_fp8_gemm_nt_contiguous((a[0], a[1].contiguous()), b, d, indices, recipe=(1, 128, 128))
    torch.cuda.synchronize()
    for first, size in runs:  # the experts' rows bit for bit; padding rows inside an expert's last block unspecified
        assert torch.equal(d[first:first + size], expected[first:first + size]), "row-major scales changed the result"
    stream = torch.cuda.Stream()
    poison(d)
    torch.cuda.synchronize()
    with torch.cuda.stream(stream):
        kiln.m_grouped_fp8_gemm_nt_contiguous(a, b, d, indices)
    stream.synchronize()
    check_experts(d, runs, refs, "on a side stream")
    with raises(ValueError, match=r"m_indices must be of shape"):
        kiln.m_grouped_fp8_gemm_nt_contiguous(a, b, d, indices[:-1])
    print(f"  {len(sizes)} experts, m = {m}: every expert within calc_diff {MAX_DIFF_DEQUANTISED}")


def test_m_grouped_contiguous_in_a_graph():
    """Captured after a warm-up, as serving engines run it: the replay reads m_indices as they are at replay time, so
    moving rows between experts needs no new capture."""
    sizes = [256, 128, 0, 384]
    n, k = 4096, 7168
    a, b, indices, runs, refs = m_grouped_problem(sizes, n, k, seed=321)
    d = new_d(indices.shape[0], n)
    kiln.m_grouped_fp8_gemm_nt_contiguous(a, b, d, indices)  # warm-up: compiled and loaded outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        kiln.m_grouped_fp8_gemm_nt_contiguous(a, b, d, indices)
    poison(d)
    graph.replay()
    check_experts(d, runs, refs, "replay")
    # The same rows given to other experts, then replayed: each block reads its index at run time.
    swapped = [3, 0, 1, 2]
    new_indices = indices.clone()
    for g, (first, size) in enumerate(runs):
        new_indices[first:first + size] = swapped[g]
    indices.copy_(new_indices)
    poison(d)
    graph.replay()
    torch.cuda.synchronize()
    for g, (first, size) in enumerate(runs):
        if size == 0:
            continue
        target = swapped[g]
        rows = slice(first, first + size)
        q = dequantised(a[0][rows], a[1][rows], 1) @ dequantised(b[0][target], b[1][target], 128).T
        diff = calc_diff(d[first:first + size], q)
        assert diff < MAX_DIFF_DEQUANTISED, f"replay after moving expert {g}'s rows to {target}: calc_diff {diff:.3g}"
    print("  replays follow m_indices as they are at replay time")



def masked_problem(counts, m: int, n: int, k: int, seed: int):
    """m_grouped_fp8_gemm_nt_masked's operands for experts with `counts` rows (masked_m) in blocks of m: A [G, m, k]
    cast per group (its scales stacked row-major, as a caller who casts each expert would have them), every expert's B
    cast per 128x128 block, D [G, m, n] poisoned. Returns (a, sfa), (b, sfb), d, masked_m and each expert's float64
    references (dequantised, exact) of its first min(count, m) rows."""
    torch.manual_seed(seed)
    groups = len(counts)
    a = torch.randn(groups, m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(groups, n, k, device="cuda", dtype=torch.bfloat16)
    a_casts = [kiln.per_token_cast_to_fp8(a[g]) for g in range(groups)]
    a_fp8 = torch.stack([x for x, _ in a_casts])
    sfa = torch.stack([s for _, s in a_casts])  # row-major [G, m, kb]: the wrapper converts it
    b_casts = [kiln.per_block_cast_to_fp8(b[g]) for g in range(groups)]
    b_fp8 = torch.stack([x for x, _ in b_casts])
    sfb = torch.stack([s for _, s in b_casts]).contiguous()
    masked_m = torch.tensor(counts, device="cuda", dtype=torch.int32)
    refs = []
    for g, count in enumerate(counts):
        rows = min(max(count, 0), m)
        refs.append((dequantised(a_fp8[g, :rows], sfa[g, :rows], 1) @ dequantised(b_fp8[g], sfb[g], 128).T,
                     a[g, :rows].double() @ b[g].double().T))
    d = torch.full((groups, m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    return (a_fp8, sfa), (b_fp8, sfb), d, masked_m, refs


def check_masked(d, counts, refs, what: str):
    """Each expert's valid rows against its references (the exact one where given); its rows from the count rounded
    up to 128 on must keep their poison (only the valid rows and the rest of their last tile may be written)."""
    torch.cuda.synchronize()
    m = d.shape[1]
    for g, (count, (q, exact)) in enumerate(zip(counts, refs)):
        rows = min(max(count, 0), m)
        untouched = d[g, min(m, (rows + 127) // 128 * 128):]
        assert torch.isnan(untouched).all(), f"{what}: expert {g}: rows past its last tile were written"
        if rows:
            check_expert_rows(d[g, :rows], q, exact, f"{what}: expert {g}")


def test_m_grouped_masked():
    """m_grouped_fp8_gemm_nt_masked against each expert's float64 products: ragged counts (one empty, one full, one
    past m and one negative, both clamped), row-major scales of A (converted) against the MN-major layout (the same
    bits), a decode and a prefill expected_m (two kernels), a call on another stream, and a refused call."""
    counts = [200, 0, 37, 256, 1, 300, -3, 129]
    m, n, k = 256, 2112, 1536
    a, b, d, masked_m, refs = masked_problem(counts, m, n, k, seed=77)
    kiln.m_grouped_fp8_gemm_nt_masked(a, b, d, masked_m, 128)
    check_masked(d, counts, refs, "row-major scales")
    expected = d.clone()
    mn_major = (a[0], kiln.get_mn_major_tma_aligned_tensor(a[1]))
    poison(d)
    kiln.m_grouped_fp8_gemm_nt_masked(mn_major, b, d, masked_m, 128, recipe=(1, 128, 128))
    torch.cuda.synchronize()
    for g, count in enumerate(counts):
        rows = min(max(count, 0), m)
        assert torch.equal(d[g, :rows], expected[g, :rows]), "the scales' layout changed the result"
    for expected_m in (8, 256):
        poison(d)
        kiln.m_grouped_fp8_gemm_nt_masked(mn_major, b, d, masked_m, expected_m)
        check_masked(d, counts, refs, f"expected_m={expected_m}")
    stream = torch.cuda.Stream()
    poison(d)
    torch.cuda.synchronize()
    with torch.cuda.stream(stream):
        kiln.m_grouped_fp8_gemm_nt_masked(mn_major, b, d, masked_m, 128)
    stream.synchronize()
    check_masked(d, counts, refs, "on a side stream")
    with raises(ValueError, match=r"m_grouped_fp8_gemm_nt_masked: masked_m must be of shape \(8,\)"):
        kiln.m_grouped_fp8_gemm_nt_masked(mn_major, b, d, masked_m[:-1], 128)
    print(f"  {len(counts)} experts of up to {m} rows: every expert within calc_diff {MAX_DIFF_DEQUANTISED}")


def test_m_grouped_masked_in_a_graph():
    """Captured once, as a decode step is: the replay reads masked_m as it is at replay time, so each step's routing
    needs no new capture."""
    counts = [20, 3, 0, 64]
    m, n, k = 128, 4096, 7168
    a, b, d, masked_m, _ = masked_problem(counts, m, n, k, seed=78)
    a = (a[0], kiln.get_mn_major_tma_aligned_tensor(a[1]))  # converted outside the capture
    kiln.m_grouped_fp8_gemm_nt_masked(a, b, d, masked_m, 32)  # warm-up: compiled and loaded outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        kiln.m_grouped_fp8_gemm_nt_masked(a, b, d, masked_m, 32)
    for step in ([20, 3, 0, 64], [0, 128, 7, 1], [128, 128, 128, 128]):
        masked_m.copy_(torch.tensor(step, dtype=torch.int32))
        poison(d)
        graph.replay()
        torch.cuda.synchronize()
        refs = []
        for g, count in enumerate(step):
            rows = min(count, m)
            refs.append((dequantised(a[0][g, :rows], a[1][g, :rows], 1) @ dequantised(b[0][g], b[1][g], 128).T, None))
        check_masked(d, step, refs, f"replay with masked_m {step}")
    print("  replays follow masked_m as it is at replay time")

if __name__ == "__main__":
    sys.exit(run_module(globals()))
