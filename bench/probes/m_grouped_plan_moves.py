#!/usr/bin/env python3
"""The m-grouped plan's moves under kMGroupedL2Weight (src/ops/fp8_gemm_heuristic.cpp): each call of
bench/probes/m_grouped_plan_moves.txt through kiln.m_grouped_fp8_gemm_nt_contiguous with the tile before and the tile
after forced (old, new, new, old; each the flushed median of 20), one expert below m = 2048 and four from there (rows
in multiples of 128), random e4m3 bytes and scales; prints new / old per call and on geometric mean. Needs PyTorch,
a GPU and the kiln package: PYTHONPATH=<package>:bench python3 bench/probes/m_grouped_plan_moves.py
"""
import math
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import kiln  # noqa: E402
from flushed_timing import flushed_median_us  # noqa: E402

MOVES = Path(__file__).with_suffix(".txt")

flush = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
ratios = []
for line in MOVES.read_text().splitlines():
    if not line or line.startswith("#"):
        continue
    n, k, m, old, new = line.split()
    n, k, m = int(n), int(k), int(m)
    groups = 4 if m >= 2048 else 1
    rows = [m // groups // 128 * 128] * groups
    rows[-1] += m - sum(rows)
    mm = sum((r + 127) // 128 * 128 for r in rows)
    kb = (k + 127) // 128
    a = torch.randint(0, 0x3f, (mm, k), device="cuda", dtype=torch.uint8).view(torch.float8_e4m3fn)
    sfa = kiln.get_mn_major_tma_aligned_tensor(torch.rand(mm, kb, device="cuda") + 0.5)
    b = torch.randint(0, 0x3f, (groups, n, k), device="cuda", dtype=torch.uint8).view(torch.float8_e4m3fn)
    sfb = torch.rand(groups, (n + 127) // 128, kb, device="cuda") + 0.5
    idx = torch.full((mm,), -1, dtype=torch.int32, device="cuda")
    first = 0
    for g, r in enumerate(rows):
        idx[first:first + r] = g
        first += (r + 127) // 128 * 128
    d = torch.empty(mm, n, device="cuda", dtype=torch.bfloat16)
    t = {}
    for tile in (old, new, new, old):
        bm, bn = map(int, tile.split("x"))
        kiln.set_fp8_gemm_overrides(block_m=bm, block_n=bn)
        us = flushed_median_us(lambda: kiln.m_grouped_fp8_gemm_nt_contiguous((a, sfa), (b, sfb), d, idx), flush,
                               reps=20, warmup=3, idle_s=0.1)
        t.setdefault(tile, []).append(us)
    kiln.set_fp8_gemm_overrides()
    o, w = sum(t[old]) / 2, sum(t[new]) / 2
    ratios.append(w / o)
    print(f"{n}x{k} m={m} ({groups} experts): {old} {o:.1f} us -> {new} {w:.1f} us  new/old {w / o:.3f}", flush=True)
    del a, sfa, b, sfb, d
print(f"geomean new/old {math.exp(sum(map(math.log, ratios)) / len(ratios)):.4f} over {len(ratios)}")
