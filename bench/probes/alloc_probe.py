"""Probe (not part of the library): why does bench/fp8_gemm_bench.py read 1 x 4096 x 7168 1-2 us slower than the
C++ op test (14.9 us), when the other decode shapes agree within 0.8 us?

The same call, timed as the bench times it (flush, start event, call, end event, back to back; median), with one
thing changed at a time: fresh tensors per trial (B lands at different addresses), a 512 MB flush instead of 1 GB,
the shapes before it run first (as in the bench), and the torch per-tensor GEMM of the same shape beside it.
    PYTHONPATH=<kiln package> python3 bench/probes/alloc_probe.py
"""
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the benchmarks' timing
from flushed_timing import flushed_median_us  # noqa: E402

import kiln

torch.manual_seed(0)
dev = torch.device("cuda")
flush_buf = torch.empty(1 << 30, dtype=torch.uint8, device=dev)


def make(m, n, k):
    a_fp8, sfa = kiln.per_token_cast_to_fp8(torch.randn(m, k, device=dev, dtype=torch.bfloat16))
    b_fp8, sfb = kiln.per_block_cast_to_fp8(torch.randn(n, k, device=dev, dtype=torch.bfloat16))
    d = torch.empty(m, n, device=dev, dtype=torch.bfloat16)
    return a_fp8, sfa, b_fp8, sfb, d


def timed(call, flush_bytes=1 << 30):
    return flushed_median_us(call, flush_buf[:flush_bytes])


def kiln_call(t):
    a, sfa, b, sfb, d = t
    return lambda: kiln.fp8_gemm_nt((a, sfa), (b, sfb), d)


for m, n, k in [(1, 4096, 7168), (64, 4096, 7168), (1, 7168, 2048), (1, 2112, 7168)]:
    t = make(m, n, k)
    base = [timed(kiln_call(t)) for _ in range(3)]
    fresh = []
    keep = []
    for i in range(4):
        keep.append(torch.empty((i + 1) * 3 << 20, dtype=torch.uint8, device=dev))  # shift the next allocation
        fresh.append(timed(kiln_call(make(m, n, k))))
    half = timed(kiln_call(t), flush_bytes=1 << 29)
    a, sfa, b, sfb, d = t
    scale = torch.ones((), device=dev)
    per_tensor = timed(lambda: torch._scaled_mm(a, b.T, scale, scale, out_dtype=torch.bfloat16))
    addr = b.data_ptr()
    print(f"m={m} n={n} k={k}: same tensors {', '.join(f'{x:.1f}' for x in base)} us; fresh tensors "
          f"{', '.join(f'{x:.1f}' for x in fresh)}; 512 MB flush {half:.1f}; cuBLAS per-tensor {per_tensor:.1f}; "
          f"B at 0x{addr:x} (mod 2 MB: 0x{addr % (2 << 20):x})", flush=True)
