#!/usr/bin/env python3
"""Probe: does the D prefetch's lead cost 128-row tiles at short K with C? (forty-second session)

The weight-gradient form prefetches a tile's D into L2 just before the producer waits for the slot of the tile's
last K block: a pipeline's depth (the stage count) of K blocks ahead of the math. At short K that is several tiles
and their epilogues ahead (6 stages at 128x128 and K = 256: three tiles), and ncu at 4096 x 7168 x 256 with C found
128x128's reduce-adds missing L2 on 10 % of their sectors (11 MB) and reading 20 % more from DRAM than 64x128 (1.5 MB
of misses). Fewer stages shorten that lead without a kernel change: each call with C is timed with the tile's own
stage count and with fewer, 128-row tiles and 64x128 alike; without C (no prefetch) as a control. Medians of 30
flushed CUDA-event timings after 100 ms idle; every result's D bitwise compared with the first one of its call.
A forced stage count runs all of its stages (fp8_gemm_ring_stages), so this times kernels compiled with each count.
For the forty-second revision's next sweep (128-row tiles against 64x128 at K = 384..768 with C), e.g.
  --tokens 384 512 640 768 --tiles 128x128:0,4,3 128x160:0,4,3 64x128:0,4 --with-c-only
Usage: PYTHONPATH=<kiln package> python3 bench/probes/wgrad_short_k_stages.py [--json FILE] [--tokens K ...]
       [--tiles RxC:S,S ...] [--with-c-only]"""
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import kiln  # noqa: E402
from flushed_timing import flushed_median_us  # noqa: E402
from wgrad_operands import dense_call, first_or_compare, probe_start  # noqa: E402

WEIGHTS = [(4096, 7168), (7168, 2048), (2048, 7168)]
TOKENS = [256, 512, 1024]
# (tile, stage counts: 0 = as many as fit)
TILES = [((128, 160), [0, 3, 2]), ((128, 128), [0, 4, 3, 2]), ((64, 128), [0, 4, 2])]


def tile_stages(text: str):
    """'128x160:0,3,2' -> ((128, 160), [0, 3, 2])."""
    tile, counts = text.split(":")
    rows, cols = tile.split("x")
    return (int(rows), int(cols)), [int(s) for s in counts.split(",")]


def add_arguments(parser):
    parser.add_argument("--tokens", type=int, nargs="+", default=TOKENS, help="K values (tokens)")
    parser.add_argument("--tiles", type=tile_stages, nargs="+", default=TILES,
                        help="tiles and their stage counts, e.g. 128x160:0,3,2 (0: as many as fit)")
    parser.add_argument("--with-c-only", action="store_true", help="time calls with C only (no c=None control)")


args, flush, gen = probe_start(__doc__, add_arguments)
rows, differing = [], 0
for m, n in WEIGHTS:
    for k in args.tokens:
        a, b, c, d = dense_call(m, n, k, gen)
        reference = None
        for (bm, bn), stage_counts in args.tiles:
            for stages in stage_counts:
                kiln.set_fp8_gemm_overrides(block_m=bm, block_n=bn, stages=stages)
                d.copy_(c)
                reference, differs = first_or_compare(lambda: kiln.fp8_gemm_nt(a, b, d, c=d), d, reference,
                                                      f"{m} x {n} x {k} {bm}x{bn}/{stages}")
                differing += differs
                us_c = flushed_median_us(lambda: kiln.fp8_gemm_nt(a, b, d, c=d), flush, reps=30, warmup=3, idle_s=0.1)
                us_none = None if args.with_c_only else flushed_median_us(lambda: kiln.fp8_gemm_nt(a, b, d), flush,
                                                                             reps=30, warmup=3, idle_s=0.1)
                rows.append({"m": m, "n": n, "k": k, "tile": f"{bm}x{bn}", "stages": stages, "c_us": us_c,
                             "none_us": us_none})
                control = "" if us_none is None else f"   c=None {us_none:7.1f} us"
                print(f"{m:>5} x {n:>5} x {k:>4} {bm}x{bn:<4} stages {stages or 'max':>3}: c=d {us_c:7.1f} us{control}",
                      flush=True)
kiln.set_fp8_gemm_overrides()
if args.json:
    args.json.write_text(json.dumps({"device": torch.cuda.get_device_name(), "rows": rows}, indent=1))
print(f"wgrad_short_k_stages: {len(rows)} timings; {differing} results differ from their call's first")
