#!/usr/bin/env python3
"""Plan moves timed tile against tile: each call of a moves file (lines "n k m old new", '#' comments; a tile is
"<block_m>x<block_n>", "a" appended for CTA pairs sharing A) with the tile before and the tile after forced (old, new,
new, old; each the flushed median of 20), random e4m3 bytes and scales; prints new / old per call and on geometric
mean.

  --m-grouped (default: bench/probes/m_grouped_plan_moves.txt) kiln.m_grouped_fp8_gemm_nt_contiguous, one expert
              below m = 2048 and four from there (rows in multiples of 128): kMGroupedL2Weight's moves, landed;
  --dense     (default: bench/probes/dense_l2_weight_moves.txt) kiln.fp8_gemm_nt: what the same weight would move in
              the dense plans, not landed (bench/RESULTS.md, forty-ninth session).

Needs PyTorch, a GPU and the kiln package: PYTHONPATH=<package>:bench python3 bench/probes/l2_weight_moves.py --dense
"""
import argparse
import math
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import kiln  # noqa: E402
from flushed_timing import flushed_median_us  # noqa: E402

HERE = Path(__file__).resolve().parent


def tile_overrides(tile: str) -> dict:
    bm, bn = map(int, tile.rstrip("a").split("x"))
    return {"block_m": bm, "block_n": bn, "cluster_n": 2 if tile.endswith("a") else 1}


def operands(n: int, k: int, m: int, grouped: bool):
    """The call's operands and the call itself: the m-grouped form over its experts, or the dense GEMM."""
    groups = (4 if m >= 2048 else 1) if grouped else 1
    rows = [m // groups // 128 * 128] * groups
    rows[-1] += m - sum(rows)
    padded = sum((r + 127) // 128 * 128 for r in rows) if grouped else m
    kb = (k + 127) // 128
    a = torch.randint(0, 0x3f, (padded, k), device="cuda", dtype=torch.uint8).view(torch.float8_e4m3fn)
    sfa = kiln.get_mn_major_tma_aligned_tensor(torch.rand(padded, kb, device="cuda") + 0.5)
    b = torch.randint(0, 0x3f, (groups, n, k), device="cuda", dtype=torch.uint8).view(torch.float8_e4m3fn)
    sfb = torch.rand(groups, (n + 127) // 128, kb, device="cuda") + 0.5
    d = torch.empty(padded, n, device="cuda", dtype=torch.bfloat16)
    if not grouped:
        return lambda: kiln.fp8_gemm_nt((a, sfa), (b[0], sfb[0]), d)
    idx = torch.full((padded,), -1, dtype=torch.int32, device="cuda")
    first = 0
    for g, r in enumerate(rows):
        idx[first:first + r] = g
        first += (r + 127) // 128 * 128
    return lambda: kiln.m_grouped_fp8_gemm_nt_contiguous((a, sfa), (b, sfb), d, idx)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    form = parser.add_mutually_exclusive_group()
    form.add_argument("--m-grouped", nargs="?", const=HERE / "m_grouped_plan_moves.txt", type=Path)
    form.add_argument("--dense", nargs="?", const=HERE / "dense_l2_weight_moves.txt", type=Path)
    args = parser.parse_args()
    grouped = args.dense is None
    moves = args.m_grouped or args.dense or HERE / "m_grouped_plan_moves.txt"
    flush = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    ratios = []
    for line in moves.read_text().splitlines():
        if not line or line.startswith("#"):
            continue
        n, k, m, old, new = line.split()
        call = operands(int(n), int(k), int(m), grouped)
        times = {}
        for tile in (old, new, new, old):
            kiln.set_fp8_gemm_overrides(**tile_overrides(tile))
            times.setdefault(tile, []).append(flushed_median_us(call, flush, reps=20, warmup=3, idle_s=0.1))
        kiln.set_fp8_gemm_overrides()
        before, after = sum(times[old]) / 2, sum(times[new]) / 2
        ratios.append(after / before)
        print(f"{n}x{k} m={m}: {old} {before:.1f} us -> {new} {after:.1f} us  new/old {after / before:.3f}", flush=True)
        del call
        torch.cuda.empty_cache()
    print(f"geomean new/old {math.exp(sum(map(math.log, ratios)) / len(ratios)):.4f} over {len(ratios)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
