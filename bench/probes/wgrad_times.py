#!/usr/bin/env python3
"""Probe: the weight-gradient form's times on dense and k-grouped shapes, for A/B runs of two builds.

For each case prints the median of 30 flushed CUDA-event timings of D += A . B^T (c=d) and a checksum of D's bits
after one call on fixed inputs (each reduce-add is one fp32 add per element, so builds that differ only in how the
epilogue stages and issues them must print the same bits), and for the first case calc_diff against float64.
Usage: PYTHONPATH=<kiln package> python3 bench/probes/wgrad_times.py TAG
For an A/B, build the two trees' packages (`pip install --no-build-isolation --no-deps --target DIR .`; the other
tree from `git archive`, untracked under probe/ so that it travels to the device) and run old, new, new, old, each
with its own DG_JIT_CACHE_DIR (bench/RESULTS.md, thirty-ninth session)."""
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import kiln  # noqa: E402
from flushed_timing import flushed_median_us  # noqa: E402
from fp8_gemm_bench import calc_diff  # noqa: E402
from fp8_gemm_k_grouped_bench import token_counts  # noqa: E402
from wgrad_operands import operand  # noqa: E402

tag = sys.argv[1]
dev = torch.device("cuda")
flush = torch.empty(1 << 30, dtype=torch.uint8, device=dev)
gen = torch.Generator(device=dev)


cases = []
# 128x160 (interleaved B), 128x128 and 128x192 (plain order) and 128x176 among the plans' tiles.
for m, n, k in [(4096, 7168, 512), (4096, 7168, 1024), (7168, 2048, 1024), (7168, 2112, 4096), (2048, 7168, 8192),
                (24576, 1536, 4096), (4096, 7168, 4096)]:
    gen.manual_seed(m * 31 + n * 7 + k)
    a, sa = operand(m, k, gen)
    b, sb = operand(n, k, gen)
    c = torch.randn(m, n, device=dev, generator=gen)
    d = c.clone()
    cases.append((f"dense {m}x{n}x{k}", lambda a=a, sa=sa, b=b, sb=sb, d=d, m=m, n=n, k=k:
                  kiln.fp8_gemm_nt((a.view(m, k), sa), (b.view(n, k), sb), d, c=d), d, c, (a, sa, b, sb, m, n, k)))
for index, (m, n, groups) in enumerate([(4096, 7168, 32), (7168, 2048, 32), (4096, 7168, 8)]):
    ks = token_counts(groups, 32768, seed=index)
    gen.manual_seed(index)
    a, sa = operand(m, 32768, gen)
    b, sb = operand(n, 32768, gen)
    c = torch.randn(groups, m, n, device=dev, generator=gen)
    d = c.clone()
    cases.append((f"k-grouped {m}x{n} G{groups}", lambda a=a, sa=sa, b=b, sb=sb, d=d, ks=ks:
                  kiln.k_grouped_fp8_gemm_nt_contiguous((a, sa), (b, sb), d, ks, None, c=d), d, c, None))

for name, call, d, c, dense in cases:
    d.copy_(c)
    call()
    torch.cuda.synchronize()
    bits = int(d.view(torch.int32).to(torch.int64).sum())
    extra = ""
    if dense is not None and name == cases[0][0]:
        a, sa, b, sb, m, n, k = dense
        ra = a.view(m, k).double() * sa.double().repeat_interleave(128, dim=1)
        rb = b.view(n, k).double() * sb.double().repeat_interleave(128, dim=1)
        extra = f"  calc_diff {calc_diff(d, c.double() + ra @ rb.T):.1e}"
    us = flushed_median_us(call, flush, reps=30, warmup=3, idle_s=0.2)
    print(f"{tag:>6} {name:>28}: {us:9.1f} us  bits {bits}{extra}", flush=True)
