#!/usr/bin/env python3
"""Probe: the weight-gradient form with no C, which the kernel now stores (Fp8GemmParams::store_d), against what
the call did before: zero D, then add the product into it (here a d.zero_() and the c=d call, which is that path).

For dense and k-grouped shapes prints both medians (30 flushed CUDA-event timings each) and checks that the two
give equal D (0 + x is x: the stored and the added results agree, up to the sign of an exact zero).
Usage: PYTHONPATH=<kiln package> python3 bench/probes/wgrad_c_none.py"""
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import kiln  # noqa: E402
from flushed_timing import flushed_median_us  # noqa: E402
from fp8_gemm_k_grouped_bench import token_counts  # noqa: E402
from wgrad_operands import operand  # noqa: E402

dev = torch.device("cuda")
flush = torch.empty(1 << 30, dtype=torch.uint8, device=dev)
gen = torch.Generator(device=dev)


def compare(name, stored_call, added_call, d):
    stored_call()
    stored = d.clone()
    d.fill_(float("nan"))
    d.zero_()
    added_call()
    torch.cuda.synchronize()
    same = bool(torch.equal(stored, d)) and bool(torch.isfinite(stored).all())
    before = flushed_median_us(lambda: (d.zero_(), added_call()), flush, reps=30, warmup=3, idle_s=0.2)
    after = flushed_median_us(stored_call, flush, reps=30, warmup=3, idle_s=0.2)
    print(f"{name:>28}: zero + add {before:9.1f} us, stored {after:9.1f} us, ratio {after / before:.3f}, "
          f"{'equal' if same else 'DIFFERENT'}", flush=True)
    return same


ok = True
for m, n, k in [(4096, 7168, 512), (4096, 7168, 1024), (7168, 2048, 1024), (7168, 2112, 4096), (2048, 7168, 8192)]:
    gen.manual_seed(m + n + k)
    a, sa = operand(m, k, gen)
    b, sb = operand(n, k, gen)
    d = torch.full((m, n), float("nan"), device=dev)
    args = ((a.view(m, k), sa), (b.view(n, k), sb), d)
    ok &= compare(f"dense {m}x{n}x{k}", lambda args=args: kiln.fp8_gemm_nt(*args, c=None),
                  lambda args=args, d=d: kiln.fp8_gemm_nt(*args, c=d), d)
for index, (m, n, groups) in enumerate([(4096, 7168, 32), (7168, 2048, 32), (4096, 7168, 8), (7168, 2048, 8)]):
    ks = token_counts(groups, 32768, seed=index)
    ks[1] = 0  # a group without tokens: zeroed, not stored
    gen.manual_seed(index)
    total = sum(ks)
    a, sa = operand(m, total, gen)
    b, sb = operand(n, total, gen)
    d = torch.full((groups, m, n), float("nan"), device=dev)
    ok &= compare(f"k-grouped {m}x{n} G{groups}",
                  lambda a=a, sa=sa, b=b, sb=sb, d=d, ks=ks: kiln.k_grouped_fp8_gemm_nt_contiguous(
                      (a, sa), (b, sb), d, ks, None, c=None),
                  lambda a=a, sa=sa, b=b, sb=sb, d=d, ks=ks: kiln.k_grouped_fp8_gemm_nt_contiguous(
                      (a, sa), (b, sb), d, ks, None, c=d), d)
print("PASS wgrad_c_none" if ok else "FAIL wgrad_c_none: stored and added results differ")
sys.exit(0 if ok else 1)
