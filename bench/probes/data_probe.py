"""Probe (not part of the library): do the input values change the M = 4096 GEMM's time?

The C++ harness (uniform values per row or block) reads the M = 4096 shapes 2-3.5 % faster than the Python
benchmark (torch.randn, as DeepGEMM's tests and the peers file). Under the power limit the tensor cores' data
toggling could set the clock. Same shapes, same timing as the benchmark, inputs drawn three ways.
    PYTHONPATH=<kiln package> python3 bench/probes/data_probe.py
"""
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the benchmarks' timing
from flushed_timing import flushed_median_us  # noqa: E402

import kiln

dev = torch.device("cuda")
flush_buf = torch.empty(1 << 30, dtype=torch.uint8, device=dev)


def timed(call):
    return flushed_median_us(call, flush_buf, idle_s=0.3)


draws = {
    "randn": lambda r, c: torch.randn(r, c, device=dev, dtype=torch.bfloat16),
    "uniform": lambda r, c: (torch.rand(r, c, device=dev) * 2 - 1).to(torch.bfloat16),
    "randn/4": lambda r, c: (torch.randn(r, c, device=dev) / 4).to(torch.bfloat16),
}
for m, n, k in [(4096, 24576, 1536), (4096, 7168, 16384), (4096, 32768, 512)]:
    line = []
    for name, draw in draws.items():
        torch.manual_seed(0)
        a_fp8, sfa = kiln.per_token_cast_to_fp8(draw(m, k))
        b_fp8, sfb = kiln.per_block_cast_to_fp8(draw(n, k))
        d = torch.empty(m, n, device=dev, dtype=torch.bfloat16)
        one = torch.ones((), device=dev)
        us = timed(lambda: kiln.fp8_gemm_nt((a_fp8, sfa), (b_fp8, sfb), d))
        pt = timed(lambda: torch._scaled_mm(a_fp8, b_fp8.T, one, one, out_dtype=torch.bfloat16))
        line.append(f"{name} {us:.1f} (cuBLAS pt {pt:.1f})")
    print(f"{m}x{n}x{k}: " + "; ".join(line), flush=True)
