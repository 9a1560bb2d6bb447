#!/usr/bin/env python3
"""Probe: how far ahead a weight-gradient pipeline should run with C at short K (fp8_gemm_ring_stages; forty-fifth
session, kLeadRing in the unit tests).

Each weight, token count and tile (forced with set_fp8_gemm_overrides; its stages are the plan's) runs with every
ring length from 2 to all of its stages: all of them first and last (their mean is the reference), the others in
between. Medians of 30 flushed CUDA-event timings after 3 warm-ups and 100 ms idle; every result's D is compared
bitwise with the call's first. The ring length is set through KILN_PROBE_RING, which only a build with
bench/probes/wgrad_ring_lengths.patch applied reads (the library has no such knob):
  git apply bench/probes/wgrad_ring_lengths.patch && pip install --target /tmp/pkg . && git apply -R ...
Usage: PYTHONPATH=<kiln package, patched> python3 bench/probes/wgrad_ring_lengths.py [--json FILE]"""
import json
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import kiln  # noqa: E402
from flushed_timing import flushed_median_us  # noqa: E402
from wgrad_operands import dense_call, first_or_compare, probe_start  # noqa: E402

WEIGHTS = [(4096, 7168), (7168, 2048), (2048, 7168), (7168, 2112)]
TOKENS = [256, 384, 512, 640, 768, 1024]
# (tile: ring lengths besides all of its stages; 64x128 compiles 8, 128x128 and 128x160 5, 64x64 13)
TILES = {(64, 128): [2, 3, 4, 5, 6, 7], (128, 128): [2, 3, 4], (64, 64): [3, 4, 6, 8, 10], (128, 160): [2, 3, 4]}
args, flush, gen = probe_start(__doc__)
props = torch.cuda.get_device_properties(0)
print(f"{props.name}: L2 {props.L2_cache_size} bytes, {props.multi_processor_count} SMs", flush=True)
rows = []
differing = 0
for m, n in WEIGHTS:
    for k in TOKENS:
        a, b, c, d = dense_call(m, n, k, gen)
        reference = None
        for (bm, bn), rings in TILES.items():
            kiln.set_fp8_gemm_overrides(block_m=bm, block_n=bn)
            times = {}
            for ring in ["all"] + rings + ["all2"]:
                os.environ["KILN_PROBE_RING"] = "99" if ring in ("all", "all2") else str(ring)
                d.copy_(c)
                reference, differs = first_or_compare(lambda: kiln.fp8_gemm_nt(a, b, d, c=d), d, reference,
                                                      f"{m} x {n} x {k} {bm}x{bn} ring {ring}")
                differing += differs
                times[ring] = flushed_median_us(lambda: kiln.fp8_gemm_nt(a, b, d, c=d), flush, reps=30, warmup=3,
                                                idle_s=0.1)
            full = (times.pop("all") + times.pop("all2")) / 2
            rows.append({"m": m, "n": n, "k": k, "tile": f"{bm}x{bn}", "all_us": full,
                         "ring_us": {str(r): t for r, t in times.items()}})
            print(f"{m:>5} x {n:>5} x {k:>4} {bm}x{bn:<4} all {full:7.1f} us  " +
                  "  ".join(f"{r}: {t / full:.3f}" for r, t in times.items()), flush=True)
os.environ.pop("KILN_PROBE_RING")
kiln.set_fp8_gemm_overrides()
if args.json:
    args.json.write_text(json.dumps({"device": props.name, "l2_bytes": props.L2_cache_size, "rows": rows}, indent=1))
print(f"wgrad_ring_lengths: {len(rows)} rows; {differing} results differ")
