#!/usr/bin/env python3
"""Probe: the weight-gradient form's tiles at small K (token counts 256..1024), with C (c=d) and without (c=None),
against the plan's own choice: the data to refit the plan's model there (docs/FP8_GEMM.md, "Where it stands",
item 0; the fortieth session found 64x128 9-17 % faster than the plan at K <= 512 with C).

For each shape and K prints one line per tile (the plan's first, then every tile forced with set_fp8_gemm_overrides):
medians of 30 flushed CUDA-event timings with C and without, and each relative to the plan's. Every forced result is
compared with the plan's (every tile adds each K block's product in the same order, so D's bits have matched across
tiles so far; a difference is reported with its largest error, not taken as a failure). A tile the form refuses for
a shape is reported as such.
--shapes times those calls instead: MxNxK with every tile (e.g. the weight-gradient sweep's shapes at K = 4096 and
8192, to re-time every tile after a kernel change), MxNxK:RxC,RxC with those tiles only (a unit-test table's pairs).
--test-table NAME times the calls of that table of measured rows in tests/unit/ops_fp8_gemm_heuristic_test.cpp (e.g.
kAccumulateMoves, kReduceShortK), each with the tiles the table holds for it, to re-time a table on another card or
after a kernel change. --c-only leaves out the timings without C.
Usage: PYTHONPATH=<kiln package> python3 bench/probes/wgrad_small_k_tiles.py [--json FILE]
       [--shapes MxNxK[:RxC,...] ... | --test-table NAME] [--c-only]"""
import argparse
import json
import math
import re
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import kiln  # noqa: E402
from flushed_timing import flushed_median_us  # noqa: E402
from wgrad_operands import dense_call, probe_start  # noqa: E402

# The weight-gradient form's candidate tiles (fp8_gemm_heuristic.cpp: no 256-row tile, 128x176 and 128x192 among
# the wide ones; 64x32 left out, it never wins at these sizes).
TILES = [(64, 64), (64, 128), (128, 64), (128, 128), (128, 160), (128, 176), (128, 192)]
# DeepSeek-V3 weights (m x n of the gradient) whose token counts per expert or micro-batch are small.
WEIGHTS = [(4096, 7168), (7168, 2048), (2048, 7168), (7168, 2112), (1536, 7168)]
TOKENS = [256, 512, 768, 1024]


def shape(text: str):
    """'MxNxK' -> (m, n, k, TILES); 'MxNxK:RxC,RxC' -> (m, n, k, those tiles)."""
    dims, _, tiles = text.lower().partition(":")
    m, n, k = (int(x) for x in dims.split("x"))
    return m, n, k, [tuple(int(x) for x in t.split("x")) for t in tiles.split(",")] if tiles else TILES


HEURISTIC_TEST = Path(__file__).resolve().parents[2] / "tests" / "unit" / "ops_fp8_gemm_heuristic_test.cpp"


def test_table(name: str):
    """The calls of the unit tests' `const Measured NAME[] = {...};` rows ({m, n, k, block_m, block_n, us}), in
    order, each with the tiles the table times for it: [(m, n, k, [(rows, columns), ...]), ...]."""
    text = HEURISTIC_TEST.read_text()
    start = text.find(f"const Measured {name}[] = {{")
    if start < 0:
        raise argparse.ArgumentTypeError(f"no table {name} in {HEURISTIC_TEST}")
    body = text[start:text.index("};", start)]
    calls = []
    for m, n, k, rows, cols in re.findall(r"\{(\d+), (\d+), (\d+), (\d+), (\d+), [\d.]+", body):
        call, tile = (int(m), int(n), int(k)), (int(rows), int(cols))
        if calls and calls[-1][:3] == call:
            calls[-1][3].append(tile)
        else:
            calls.append((*call, [tile]))
    return calls


def add_arguments(parser):
    calls = parser.add_mutually_exclusive_group()
    calls.add_argument("--shapes", type=shape, nargs="+", help="time these calls instead of the weights at small K: "
                       "MxNxK (every tile) or MxNxK:RxC,RxC (those tiles)")
    calls.add_argument("--test-table", type=test_table, help="time the calls of this table of the unit tests "
                       "(e.g. kAccumulateMoves), each with its tiles")
    parser.add_argument("--c-only", action="store_true", help="time calls with C only")


args, flush, gen = probe_start(__doc__, add_arguments)
rows = []
differing = 0
for m, n, k, tiles in args.shapes or args.test_table or [(m, n, k, TILES) for m, n in WEIGHTS for k in TOKENS]:
    a, b, c, d = dense_call(m, n, k, gen)

    def with_c():
        kiln.fp8_gemm_nt(a, b, d, c=d)

    def without_c():
        kiln.fp8_gemm_nt(a, b, d)

    reference = None
    plan = None
    for tile in [None] + tiles:
        name = "plan" if tile is None else f"{tile[0]}x{tile[1]}"
        kiln.set_fp8_gemm_overrides(block_m=tile[0] if tile else 0, block_n=tile[1] if tile else 0)
        d.copy_(c)
        try:
            with_c()
        except Exception as e:  # noqa: BLE001 (a forced tile the form does not take: say so, go on)
            print(f"{m:>5} x {n:>5} x {k:>4} {name:>8}: not taken ({type(e).__name__}: {e})", flush=True)
            continue
        torch.cuda.synchronize()
        if reference is None:
            reference = d.clone()
        elif not torch.equal(d.view(torch.int32), reference.view(torch.int32)):
            differing += 1
            print(f"{m:>5} x {n:>5} x {k:>4} {name:>8}: D differs from the plan's, largest difference "
                  f"{(d - reference).abs().max().item():.3e}", flush=True)
        us_c = flushed_median_us(with_c, flush, reps=30, warmup=3, idle_s=0.1)
        us_none = math.nan if args.c_only else flushed_median_us(without_c, flush, reps=30, warmup=3,
                                                                   idle_s=0.1)
        if plan is None:
            plan = (us_c, us_none)
        rows.append({"m": m, "n": n, "k": k, "tile": name, "c_us": us_c, "none_us": us_none,
                     "c_vs_plan": us_c / plan[0], "none_vs_plan": us_none / plan[1]})
        print(f"{m:>5} x {n:>5} x {k:>4} {name:>8}: c=d {us_c:8.1f} us ({us_c / plan[0]:.3f})   "
              f"c=None {us_none:8.1f} us ({us_none / plan[1]:.3f})", flush=True)
kiln.set_fp8_gemm_overrides()
if args.json:
    args.json.write_text(json.dumps({"device": torch.cuda.get_device_name(), "rows": rows}, indent=1))
print(f"wgrad_small_k_tiles: {len(rows)} timings; {differing} forced results differ from the plan's bits")
