"""GPU tests of the Python package (skipped without PyTorch and a CUDA GPU): every function against a reference,
the caller's stream (a non-default one), CUDA graph capture and replay, DLPack producers other than torch.

Runs under pytest, or alone: `python3 tests/python/test_gpu_ops.py` (one PASS/FAIL line per test).
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gpu_support import (HAVE_GPU, SKIP_REASON, assert_fp8_equal, assert_scales_equal, per_block_reference,  # noqa: E402
                         per_token_reference, raises, random_bf16, run_module, torch)

import kiln  # noqa: E402

try:
    import pytest
    pytestmark = pytest.mark.skipif(not HAVE_GPU, reason=SKIP_REASON)
except ImportError:
    pytest = None


def _check_per_token(x, what):
    q, s = kiln.per_token_cast_to_fp8(x)
    m, k = x.shape
    aligned = kiln.get_tma_aligned_size(m, 4)
    assert q.dtype == torch.float8_e4m3fn and q.shape == (m, k) and q.is_contiguous(), what
    assert s.dtype == torch.float32 and s.shape == (m, k // 128), what
    assert m <= 1 or s.stride() == (1, aligned), f"{what}: scales strides {s.stride()}"
    assert q.device == x.device and s.device == x.device
    torch.cuda.synchronize()
    ref_q, ref_s = per_token_reference(x)
    assert_scales_equal(s, ref_s, what)
    assert_fp8_equal(q, ref_q, what)
    return q, s


def test_per_token_cast_to_fp8_matches_the_reference():
    for m, k in [(1, 128), (1, 7168), (7, 512), (128, 7168), (4097, 1024), (3, 128)]:
        _check_per_token(random_bf16(m, k, seed=m * 31 + k), f"per_token m={m} k={k}")


def test_per_token_accepts_rows_wider_than_k():
    x = random_bf16(33, 512, seed=5, row_stride=640)
    assert x.stride() == (640, 1)
    _check_per_token(x, "per_token row stride 640")


def test_per_token_scales_are_already_mn_major_tma_aligned():
    _, s = kiln.per_token_cast_to_fp8(random_bf16(5, 256))
    assert kiln.get_mn_major_tma_aligned_tensor(s) is s


def test_per_token_empty_input():
    q, s = kiln.per_token_cast_to_fp8(torch.empty(0, 256, dtype=torch.bfloat16, device="cuda"))
    assert q.shape == (0, 256) and s.shape == (0, 2)


def test_per_block_cast_to_fp8_matches_the_reference():
    for n, k in [(1, 128), (128, 128), (129, 256), (300, 7168), (4096, 512)]:
        x = random_bf16(n, k, seed=n + k)
        q, s = kiln.per_block_cast_to_fp8(x)
        assert q.shape == (n, k) and q.is_contiguous() and s.shape == ((n + 127) // 128, k // 128) and s.is_contiguous()
        torch.cuda.synchronize()
        ref_q, ref_s = per_block_reference(x)
        assert_scales_equal(s, ref_s, f"per_block n={n} k={k}")
        assert_fp8_equal(q, ref_q, f"per_block n={n} k={k}")


def test_outputs_can_be_preallocated():
    x = random_bf16(64, 1024, seed=9)
    m, k = x.shape
    out = torch.full((m, k), 0x7F, dtype=torch.uint8, device="cuda").view(torch.float8_e4m3fn)
    scales = torch.empty(k // 128, kiln.get_tma_aligned_size(m, 4), device="cuda").T[:m]
    q, s = kiln.per_token_cast_to_fp8(x, out=(out, scales))
    assert q is out and s is scales
    torch.cuda.synchronize()
    ref_q, ref_s = per_token_reference(x)
    assert_fp8_equal(out, ref_q, "preallocated")
    assert_scales_equal(scales, ref_s, "preallocated")


def test_the_callers_current_stream_is_used():
    # On a side stream: a long sleep, then x is filled, then the cast. Launched on any other stream, the cast
    # would read x before it is filled.
    side = torch.cuda.Stream()
    src = random_bf16(256, 7168, seed=11)
    x = torch.zeros_like(src)
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        assert kiln._native._convert_only(x, x, x) == side.cuda_stream
        torch.cuda._sleep(200_000_000)  # ~0.1 s of GPU time
        x.copy_(src)
        q, s = kiln.per_token_cast_to_fp8(x)
    side.synchronize()
    ref_q, ref_s = per_token_reference(src)
    assert_scales_equal(s, ref_s, "side stream")
    assert_fp8_equal(q, ref_q, "side stream")


def test_an_explicit_stream_argument():
    side = torch.cuda.Stream()
    src = random_bf16(128, 1024, seed=12)
    x = torch.zeros_like(src)
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        torch.cuda._sleep(100_000_000)
        x.copy_(src)
    out = torch.empty(128, 1024, dtype=torch.float8_e4m3fn, device="cuda")
    scales = torch.empty(8, 128, device="cuda").T
    for stream in (side, side.cuda_stream):
        kiln.per_token_cast_to_fp8(x, out=(out, scales), stream=stream)
    side.synchronize()
    ref_q, ref_s = per_token_reference(src)
    assert_fp8_equal(out, ref_q, "stream=")
    assert_scales_equal(scales, ref_s, "stream=")


def test_graph_capture_and_replay_after_warm_up():
    x = random_bf16(16, 7168, seed=13)
    out = torch.empty(16, 7168, dtype=torch.float8_e4m3fn, device="cuda")
    scales = torch.empty(56, 16, device="cuda").T
    kiln.per_token_cast_to_fp8(x, out=(out, scales))  # warm-up: compiled and loaded outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        kiln.per_token_cast_to_fp8(x, out=(out, scales))
    new = random_bf16(16, 7168, seed=14)
    x.copy_(new)
    out.view(torch.uint8).zero_()
    graph.replay()
    torch.cuda.synchronize()
    ref_q, ref_s = per_token_reference(new)
    assert_fp8_equal(out, ref_q, "graph replay")
    assert_scales_equal(scales, ref_s, "graph replay")


_CAPTURE_SNIPPET = """
import sys
sys.path.insert(0, {here!r})
import torch, kiln
from gpu_support import assert_fp8_equal, per_token_reference, raises, random_bf16
k = 128 * 37
x = random_bf16(4, k, seed=15)
y = torch.zeros(4, device="cuda")
graph = torch.cuda.CUDAGraph()
cold = {cold}
with torch.cuda.graph(graph):
    y.add_(1)
    if cold:  # not in the cache: a compile would be needed, which kiln refuses during a capture
        with raises(kiln.CaptureError, match="captur"):
            kiln.per_token_cast_to_fp8(x)
    else:  # compiled by the first process: served from the disk cache, even during a capture
        q, s = kiln.per_token_cast_to_fp8(x)
    y.add_(1)
graph.replay()
torch.cuda.synchronize()
assert y.tolist() == [2.0] * 4, "the graph lost the work captured around the kiln call"
if cold:
    q, s = kiln.per_token_cast_to_fp8(x)  # outside a capture it compiles and runs
    torch.cuda.synchronize()
assert_fp8_equal(q, per_token_reference(x)[0], "after the capture")
print("ok")
"""


def test_capture_refuses_a_compile_keeps_the_graph_and_serves_cached_kernels():
    # Fresh processes with a cache of their own, so "not compiled yet" is certain: the first is refused
    # (CaptureError, the capture intact), the second finds the kernel on disk and captures it.
    import subprocess
    import tempfile
    here = os.path.dirname(os.path.abspath(__file__))
    with tempfile.TemporaryDirectory(prefix="kiln-capture-") as cache:
        env = dict(os.environ, DG_JIT_CACHE_DIR=cache)
        for cold in (True, False):
            code = _CAPTURE_SNIPPET.format(here=here, cold=cold)
            r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
            assert r.returncode == 0 and r.stdout.strip().endswith("ok"), (
                f"cold={cold}: exit {r.returncode}\n{r.stdout}\n{r.stderr}")


_ARCH_SNIPPET = """
import sys
sys.path.insert(0, {here!r})
import torch, kiln
from gpu_support import assert_fp8_equal, per_token_reference, raises, random_bf16
x = random_bf16(64, 256, seed=16)
setting = {setting!r}
if setting == "sm_90":  # runs on an H100/H200, but has no WGMMA: the casts build and run, the GEMMs refuse it by name
    assert_fp8_equal(kiln.per_token_cast_to_fp8(x)[0], per_token_reference(x)[0], "a cast for sm_90")
    a = torch.randn(64, 256, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(256, 256, device="cuda").to(torch.float8_e4m3fn)
    sa, sb = torch.ones(64, 2, device="cuda"), torch.ones(2, 2, device="cuda")
    d = torch.empty(64, 256, device="cuda", dtype=torch.bfloat16)
    with raises(kiln.ConfigError, match="fp8_gemm_nt: DG_JIT_ARCH=sm_90 is not an arch its kernels are written for: "
                                        "sm_90a only"):
        kiln.fp8_gemm_nt((a, sa), (b, sb), d)
    with raises(kiln.ConfigError, match="bf16_gemm_nt: DG_JIT_ARCH=sm_90 is not"):
        kiln.bf16_gemm_nt(x, random_bf16(256, 256, seed=17), d)
else:  # a later GPU's arch: nothing built for it loads here
    with raises(kiln.ConfigError, match=f"DG_JIT_ARCH={{setting}}: kernels built for it cannot run on device 0"):
        kiln.per_token_cast_to_fp8(x)
print("ok")
"""


def test_a_dg_jit_arch_the_gpu_or_the_op_cannot_use_is_refused_by_name():
    # DG_JIT_ARCH is read once per process: each setting in a process (and a cache) of its own.
    import subprocess
    import tempfile
    here = os.path.dirname(os.path.abspath(__file__))
    with tempfile.TemporaryDirectory(prefix="kiln-arch-") as cache:
        for setting in ("sm_90", "sm_100a"):
            env = dict(os.environ, DG_JIT_CACHE_DIR=cache, DG_JIT_ARCH=setting)
            code = _ARCH_SNIPPET.format(here=here, setting=setting)
            r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
            assert r.returncode == 0 and r.stdout.strip().endswith("ok"), (
                f"DG_JIT_ARCH={setting}: exit {r.returncode}\n{r.stdout}\n{r.stderr}")


def test_get_mn_major_tma_aligned_tensor():
    for shape in [(5, 3), (128, 56), (1, 1), (2, 7, 4)]:
        sf = torch.randn(*shape, device="cuda")
        t = kiln.get_mn_major_tma_aligned_tensor(sf)
        mn = shape[-2]
        a = kiln.get_tma_aligned_size(mn, 4)
        assert t.shape == sf.shape and torch.equal(t, sf), shape
        if len(shape) == 2 and mn > 1:
            assert t.stride() == (1, a), (shape, t.stride())
        if len(shape) == 3:
            assert t.stride()[1:] == (1, a), (shape, t.stride())
        assert kiln.get_mn_major_tma_aligned_tensor(t) is t
    with raises(TypeError, match="float32"):
        kiln.get_mn_major_tma_aligned_tensor(torch.zeros(4, 2, device="cuda", dtype=torch.bfloat16))
    with raises(ValueError, match="2-D"):
        kiln.get_mn_major_tma_aligned_tensor(torch.zeros(4, device="cuda"))


def test_to_mn_major_scales_into_a_callers_tensor():
    # kiln's own transposing kernel (the C++ API's way to convert row-major scales): bit-exact, any row stride,
    # and the padding rows between mn and the aligned stride are left as they were (poisoned here).
    for mn, g, row_stride in [(5, 3, 3), (128, 56, 56), (1, 1, 1), (4097, 56, 64), (33, 130, 133)]:
        base = torch.randn(mn, row_stride, device="cuda")
        sf = base[:, :g]
        a = kiln.get_tma_aligned_size(mn, 4)
        storage = torch.full((g * a,), float("nan"), device="cuda")
        out = storage.as_strided((mn, g), (1, a))
        kiln.to_mn_major_scales(sf, out)
        torch.cuda.synchronize()
        assert torch.equal(out, sf), (mn, g, row_stride)
        padding = storage.view(g, a)[:, mn:]
        assert torch.isnan(padding).all(), (mn, g, row_stride)
        assert torch.equal(out, kiln.get_mn_major_tma_aligned_tensor(sf))
    with raises(ValueError, match="out"):
        kiln.to_mn_major_scales(torch.randn(8, 4, device="cuda"), torch.empty(8, 4, device="cuda"))


def test_num_sms_and_pdl_keep_results_exact():
    try:
        kiln.set_num_sms(2)
        kiln.set_pdl(True)
        assert kiln.get_num_sms() == 2 and kiln.get_pdl()
        _check_per_token(random_bf16(1000, 2048, seed=16), "2 SMs, PDL on")
        x = random_bf16(1000, 1024, seed=17)
        q, s = kiln.per_block_cast_to_fp8(x)
        torch.cuda.synchronize()
        ref_q, ref_s = per_block_reference(x)
        assert_fp8_equal(q, ref_q, "per_block 2 SMs")
    finally:
        kiln.set_num_sms(0)
        kiln.set_pdl(False)
    assert kiln.get_num_sms() == torch.cuda.get_device_properties(0).multi_processor_count


class _DLPackOnly:
    """A DLPack producer that is not a torch tensor (exercises the generic path, including float8 outputs)."""

    def __init__(self, t):
        self.t = t

    def __dlpack__(self, *args, **kwargs):
        return self.t.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self.t.__dlpack_device__()


def test_any_dlpack_producer():
    x = random_bf16(40, 1024, seed=18)
    info = kiln._native._view(_DLPackOnly(x))
    assert info["dtype"] == "bfloat16" and info["device"] == f"cuda:{x.device.index}"
    out = torch.empty(40, 1024, dtype=torch.float8_e4m3fn, device="cuda")
    scales = torch.empty(8, 40, device="cuda").T
    assert kiln._native._view(_DLPackOnly(out))["dtype"] == "float8_e4m3fn"
    kiln.per_token_cast_to_fp8(_DLPackOnly(x), out=(_DLPackOnly(out), _DLPackOnly(scales)),
                               stream=torch.cuda.current_stream())
    # Without out=, outputs are allocated with torch next to a CUDA DLPack producer.
    q, s = kiln.per_token_cast_to_fp8(_DLPackOnly(x))
    torch.cuda.synchronize()
    ref_q, ref_s = per_token_reference(x)
    for a, b in ((out, scales), (q, s)):
        assert_fp8_equal(a, ref_q, "dlpack")
        assert_scales_equal(b, ref_s, "dlpack")


def test_gpu_validation_errors():
    x = random_bf16(4, 256)
    with raises(TypeError, match="x must be bfloat16, got float32"):
        kiln.per_token_cast_to_fp8(x.float())
    with raises(ValueError, match="x must be 16-byte aligned"):
        kiln.per_token_cast_to_fp8(random_bf16(4, 512)[:, 1:257])
    with raises(ValueError, match="multiple of 128"):
        kiln.per_token_cast_to_fp8(random_bf16(4, 200))
    with raises(ValueError, match="2-dimensional"):
        kiln.per_token_cast_to_fp8(random_bf16(8, 256).view(2, 4, 256))
    with raises(ValueError, match="out must be on the same device as x|out must be on a CUDA device"):
        kiln.per_token_cast_to_fp8(x, out=(torch.empty(4, 256, dtype=torch.float8_e4m3fn),
                                           torch.empty(2, 4, device="cuda").T))
    with raises(ValueError, match="MN-major"):
        kiln.per_token_cast_to_fp8(x, out=(torch.empty(4, 256, dtype=torch.float8_e4m3fn, device="cuda"),
                                           torch.empty(4, 2, device="cuda")))


def test_precompile_finds_what_a_launch_compiled():
    x = random_bf16(8, 128 * 41, seed=19)
    _check_per_token(x, "k=5248")
    reports = kiln.precompile("per_token_cast_to_fp8", m=8, k=128 * 41)
    assert len(reports) == 1 and reports[0]["hit"] is True
    assert reports[0]["arch"] == kiln.devices()[x.device.index]["arch"]
    assert kiln.plan("per_token_cast_to_fp8", m=8, k=128 * 41)[0]["key"] == reports[0]["key"]
    assert kiln.cache_stats()["memory_hits"] >= 0


def test_devices_and_doctor_see_the_gpu():
    devices = kiln.devices()
    assert len(devices) == torch.cuda.device_count()
    props = torch.cuda.get_device_properties(0)
    assert devices[0]["sm_count"] == props.multi_processor_count
    assert devices[0]["arch"].startswith(f"sm_{props.major}{props.minor}")
    assert all(c["status"] in ("ok", "warning", "error") for c in kiln.doctor())


if __name__ == "__main__":
    sys.exit(run_module(globals()))
