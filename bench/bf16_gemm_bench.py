#!/usr/bin/env python3
"""BF16 GEMM from Python: kiln.bf16_gemm_nt against cuBLAS (torch.matmul) on every dense_bf16 shape.

Every shape of shared/bench/shapes.json's dense_bf16 set (M = 1, 128, 4096 over six (N, K) of DeepSeek-V3), D = A . B^T
with A [M, K] and B [N, K] bfloat16 (torch.randn), D bfloat16:

  kiln      kiln.bf16_gemm_nt(a, b, d): the plan's kernel for the shape
  cuBLAS    torch.matmul(a, b.T, out=d): the same product through torch's cuBLAS
  DeepGEMM  the peers file's BF16 table (shared/bench/peers-h200.md), shown on an H200 only (the card it was measured
            on)

Timing as bench/fp8_gemm_bench.py: the L2 flushed by a 1 GB write before every call, CUDA events, the median of --reps
(>= 30) after --warmup calls, each measurement after --idle-ms of idle GPU. TFLOPS = 2 M N K / t; GB/s counts A, B and
D once. Every kiln result is verified first: up to 64 rows against the float64 product, calc_diff < 1e-5.

--layouts: the M = 4096 shapes also timed in DeepGEMM's nn, tn and tt layouts (kiln.bf16_gemm_nn/tn/tt on row-major
b [K, N] and/or a [K, M]: MN-major operands, no copy) against cuBLAS on the same views (torch.mm(a.T, b, out=d),
...); those rows have "layout" nn, tn or tt (the others nt) and are verified as the nt rows.

--sweep: each shape also timed with every tile in SWEEP_TILES forced (set_bf16_gemm_overrides), for the plan's cost
model; the rows get a "sweep" dict of tile -> µs.

--accumulate: each shape also timed in DeepGEMM's accumulating form, a float32 D += A . B^T
(kiln.bf16_gemm_nt(a, b, d, c=d)), against cuBLAS's beta = 1 GEMM into the same float32 D (torch.addmm with
out_dtype=float32 and out=d; where this torch lacks that, torch.mm with out_dtype then add_, two kernels, named in
the JSON's "accumulate_peer"). Those rows have "form": "add_f32" (the others "bf16"), are verified against C + the
float64 product with calc_diff < 1e-7 (a D rounded to bf16 would fail it), and count A, B and D twice (read and
written) in GB/s. --sweep-accumulate: its M = 4096 rows also time ACCUMULATE_SWEEP_TILES forced (a float32 staging
tile leaves the widest tiles 2 stages, or more with the epilogue in passes).

--m-grouped: DeepGEMM's m_grouped_bf16_gemm_nt_contiguous (kiln.m_grouped_bf16_gemm_nt_contiguous, one call) on the
FP8 contiguous benchmark's MoE shapes (bench/fp8_gemm_m_grouped_bench.py: G experts' rows, multiples of 128, one after
the other in A, each expert its own B [n, k], the last shape with as many padding-only rows again) in bf16, against
cuBLAS per expert (torch.mm(A_g, B_g^T, out=D_g) into its rows of D, the loop timed as one unit) and against kiln's
dense GEMM over the same rows with one B ("kiln dense": the same arithmetic). Rows "form": "m_grouped"; TFLOPS count
the experts' rows only; the padding-only rows must keep their NaN (the kernel skips them). Then the same shapes in the
nn form (m_grouped_bf16_gemm_nn_contiguous, each B given [k, n]; cuBLAS per expert multiplies by the same views): rows
"form": "m_grouped_nn". --masked: m_grouped_bf16_gemm_nt_masked the same way on the FP8 masked benchmark's shapes
(bench/fp8_gemm_masked_bench.py: G experts in blocks of 4096 rows, masked_m[g] of them valid), cuBLAS per expert on
its valid rows; rows "form": "masked", "m" the valid rows in all. Both verified first: up to 64 rows of each expert
against the float64 product, calc_diff < 1e-5, and every valid row finite. --no-dense leaves out the dense shapes (and
what --layouts, --accumulate and --sweep add to them): only the grouped modes run, and the JSON is
bf16_gemm_grouped_bench.json (bf16_gemm_k_grouped_bench.json for --k-grouped alone), so that it does not replace a
dense run's or another grouped run's.

--k-grouped: DeepGEMM's k_grouped_bf16_gemm_tn_contiguous (kiln.k_grouped_bf16_gemm_tn_contiguous, one call), the MoE
experts' weight gradients D[g] (float32 [m, n]) = C[g] + A_g^T . B_g with A [tokens, m] and B [tokens, n] bf16, each
expert's tokens one after the other, on DeepSeek-V3's expert shapes (bench/fp8_gemm_k_grouped_bench.py's: the gate/up
weight's 4096 x 7168 and the down weight's 7168 x 2048, 8 and 32 experts, 32768 routed tokens split with a fixed seeded
router-like skew, no count a multiple of 64), with c=None (rows "form": "k_grouped") and c=d ("k_grouped_add"), against
cuBLAS per expert through torch: one torch.mm per expert of a[t:t+k].T and b[t:t+k] (views, no copy) into D[g] in
float32 (out_dtype=float32 and out=D[g], or where this torch lacks that, a GEMM then a copy; with c=d the --accumulate
peer), the loop timed as one unit; the peer is named in the row's "cublas_peer". Verified first: each expert's first
64 rows of D against C + the float64 product, calc_diff < 1e-7, and all of D finite. TFLOPS = 2 m n tokens / t; GB/s
count A and B once and D once (c=None) or twice (read and written).

Writes bf16_gemm_bench.json to --out (default $OUT; nothing when neither is set); prints a line per shape, a RESULT line
(geometric mean against cuBLAS), one PASS/FAIL line and a table. Exit 0 when every result verified, 1 otherwise, 77
without a GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fp8_gemm_bench import (MAX_DIFF, PEERS_CARD, add_timing_arguments, calc_diff, geomean,  # noqa: E402
                            start_gpu_bench, time_into)
from fp8_gemm_m_grouped_bench import SHAPES as FP8_M_GROUPED_SHAPES, expert_rows  # noqa: E402
from fp8_gemm_masked_bench import (MAX_M, SHAPES as FP8_MASKED_SHAPES, expert_counts,  # noqa: E402
                                   masked_rows_diff)

SHAPES_FILE = Path(__file__).resolve().parents[2] / "shared" / "bench" / "shapes.json"
PEERS_FILE = Path(__file__).resolve().parents[2] / "shared" / "bench" / "peers-h200.md"
# The shapes file's dense_bf16 set, in case the shared folder is not beside the repository (the device machine).
DEFAULT_M = [1, 128, 4096]
DEFAULT_NK = [(2112, 7168), (24576, 1536), (32768, 512), (7168, 16384), (4096, 7168), (7168, 2048)]
# The peers file's BF16 table, in case it is not there either: (M, N, K) -> DeepGEMM µs on the H200.
DEFAULT_PEERS = {(4096, 7168, 2048): 162.0, (4096, 2112, 7168): 164.9, (128, 7168, 2048): 15.7}
# The FP8 grouped benchmarks' MoE shapes, without their DeepGEMM figures (FP8 ones): --m-grouped's (experts, rows in
# all, n, k, rows of padding only after them) and --masked's (experts, expected rows per expert, valid rows in all or
# None (drawn), n, k).
M_GROUPED_SHAPES = [(groups, m, n, k, tail) for groups, m, n, k, _, tail in FP8_M_GROUPED_SHAPES]
MASKED_SHAPES = [(groups, expected, total, n, k) for groups, expected, total, n, k, _ in FP8_MASKED_SHAPES]
# --k-grouped's DeepSeek-V3 expert weight gradients, the FP8 k-grouped benchmark's at 32768 routed tokens: (weight, m,
# n, experts, tokens in all), each timed with c=None and c=d.
K_GROUPED_SHAPES = [("gate/up", 4096, 7168, 8, 32768), ("down", 7168, 2048, 8, 32768),
                    ("gate/up", 4096, 7168, 32, 32768), ("down", 7168, 2048, 32, 32768)]
# (block_m, block_n, cluster_m, stages; 0: the plan's count, as many as fit beside a whole staging tile, 128x256 one
# more beside half of one) forced by --sweep: each tile family at a few widths, 128x192 and 256x128 with a stage more
# than a whole staging tile leaves room for (the epilogue in passes), and 128x256 with the 3 beside a whole one.
SWEEP_TILES = [(64, 16, 1, 0), (64, 32, 1, 0), (64, 48, 1, 0), (64, 64, 1, 0), (64, 96, 1, 0), (64, 128, 1, 0),
               (64, 192, 1, 0), (64, 256, 1, 0), (128, 64, 1, 0), (128, 96, 1, 0), (128, 128, 1, 0), (128, 128, 2, 0),
               (128, 160, 1, 0), (128, 176, 1, 0), (128, 192, 1, 0), (128, 192, 1, 5), (128, 208, 1, 0),
               (128, 224, 1, 0), (128, 240, 1, 0), (128, 256, 1, 0), (128, 256, 2, 0), (128, 256, 1, 3),
               (128, 256, 2, 3), (256, 128, 1, 0), (256, 128, 2, 0), (256, 128, 1, 4), (256, 128, 2, 4)]


def load_shapes(path: Path) -> tuple[list[int], list[tuple[int, int]]]:
    if not path.exists():
        return DEFAULT_M, DEFAULT_NK
    dense = json.loads(path.read_text())["dense_bf16"]
    return list(dense["m"]), [tuple(nk) for nk in dense["nk"]]


def load_peers(path: Path) -> dict:
    """DeepGEMM µs per (M, N, K) from the peers file's BF16 table: rows '| M × N × K | µs / TFLOPS | ...'."""
    if not path.exists():
        return DEFAULT_PEERS
    table = {}
    for line in path.read_text().split("## BF16 GEMM", 1)[-1].split("\n## ", 1)[0].splitlines():
        match = re.match(r"\|\s*(\d+)\s*×\s*(\d+)\s*×\s*(\d+)\s*\|\s*([\d.]+)\s*/", line)
        if match:
            table[tuple(int(v) for v in match.groups()[:3])] = float(match.group(4))
    return table


def tile_name(tile: tuple[int, int, int, int]) -> str:
    return f"{tile[0]}x{tile[1]}" + (" pair" if tile[2] == 2 else "") + (f" s{tile[3]}" if tile[3] else "")


def add_speedups(row: dict, *peers: str) -> None:
    """Each peer's time over kiln's, as row["speedup_vs_<peer>"], where both were timed."""
    for peer in peers:
        if row.get("kiln_us") and row.get(f"{peer}_us"):
            row[f"speedup_vs_{peer}"] = row[f"{peer}_us"] / row["kiln_us"]


def row_status(row: dict) -> str:
    """The end of a result line: the row's error, or that its result was not verified; empty when all is well."""
    return f" ERROR {row['error']}" if "error" in row else "" if row["verified"] else " NOT VERIFIED"


def sweep_tiles(kiln, timed_us, tiles, call) -> dict:
    """`call` timed with each of `tiles` forced (set_bf16_gemm_overrides, cleared after each): tile name -> µs, or
    the error of a tile that cannot run (e.g. too little shared memory)."""
    sweep = {}
    for tile in tiles:
        kiln.set_bf16_gemm_overrides(block_m=tile[0], block_n=tile[1], cluster_m=tile[2], stages=tile[3])
        try:
            sweep[tile_name(tile)] = timed_us(call)
        except Exception as e:  # noqa: BLE001 - reported in the row
            sweep[tile_name(tile)] = f"{type(e).__name__}: {e}"
        finally:
            kiln.set_bf16_gemm_overrides()
    return sweep


def argument_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_timing_arguments(parser)
    parser.add_argument("--sweep", action="store_true", help="also time every tile of SWEEP_TILES on every shape")
    parser.add_argument("--layouts", action="store_true",
                        help="also time the nn, tn and tt layouts at M = 4096 against cuBLAS on the same views")
    parser.add_argument("--accumulate", action="store_true",
                        help="also time D (float32) += A . B^T against cuBLAS's beta = 1 GEMM")
    parser.add_argument("--sweep-accumulate", action="store_true",
                        help="--accumulate, and its M = 4096 rows with every tile of ACCUMULATE_SWEEP_TILES forced")
    parser.add_argument("--m-grouped", action="store_true",
                        help="also time m_grouped_bf16_gemm_nt_contiguous against cuBLAS per expert")
    parser.add_argument("--masked", action="store_true",
                        help="also time m_grouped_bf16_gemm_nt_masked against cuBLAS per expert")
    parser.add_argument("--k-grouped", action="store_true",
                        help="also time k_grouped_bf16_gemm_tn_contiguous against cuBLAS per expert")
    parser.add_argument("--m", type=int, action="append", metavar="M",
                        help="only the dense shapes of this M (repeatable): --m 4096 --sweep-accumulate fits a step")
    parser.add_argument("--no-dense", action="store_true",
                        help="leave out the dense shapes: only --m-grouped / --masked / --k-grouped (see json_name)")
    parser.add_argument("--jobs", type=int, default=min(16, os.cpu_count() or 1), help="parallel precompile threads")
    return parser


def json_name(args) -> str:
    """The JSON a run writes: bf16_gemm_bench.json with the dense shapes (bf16_gemm_bench_m4096.json with --m 4096, and
    so on); without them bf16_gemm_k_grouped_bench.json for --k-grouped alone and bf16_gemm_grouped_bench.json
    otherwise, so that no run's replaces another's."""
    if not args.no_dense:
        return "bf16_gemm_bench.json" if not args.m else \
            "bf16_gemm_bench_m" + "_".join(str(m) for m in sorted(set(args.m))) + ".json"
    return "bf16_gemm_k_grouped_bench.json" if args.k_grouped and not (args.m_grouped or args.masked) else \
        "bf16_gemm_grouped_bench.json"


def main() -> int:
    args = argument_parser().parse_args()
    args.reps = max(args.reps, 30)

    ms, nks = load_shapes(SHAPES_FILE)
    shapes = [] if args.no_dense else [(m, n, k) for m in ms for n, k in nks if not args.m or m in args.m]
    grouped_count = (2 * len(M_GROUPED_SHAPES) * args.m_grouped + len(MASKED_SHAPES) * args.masked
                     + 2 * len(K_GROUPED_SHAPES) * args.k_grouped)
    bench = start_gpu_bench("bf16_gemm_bench", args, len(shapes) + grouped_count)
    if bench is None:
        return 77
    torch, kiln, device, props, timed_us = bench.torch, bench.kiln, bench.device, bench.props, bench.timed_us
    peers = load_peers(PEERS_FILE) if PEERS_CARD in props.name else {}

    t0 = time.perf_counter()
    requests = [dict(n=n, k=k, m=m) for m, n, k in shapes]
    if args.sweep:
        requests += [dict(n=n, k=k, m=m, block_m=t[0], block_n=t[1], cluster_m=t[2], stages=t[3])
                     for m, n, k in shapes for t in SWEEP_TILES]
    args.accumulate = args.accumulate or args.sweep_accumulate
    if args.accumulate:
        requests += [dict(n=n, k=k, m=m, accumulate=1) for m, n, k in shapes]
        if args.sweep_accumulate:
            requests += [dict(n=n, k=k, m=m, accumulate=1, block_m=t[0], block_n=t[1], cluster_m=t[2], stages=t[3])
                         for m, n, k in shapes if m == 4096 for t in ACCUMULATE_SWEEP_TILES]
    layout_shapes = [(m, n, k) for m, n, k in shapes if m == 4096] if args.layouts else []
    requests += [dict(n=n, k=k, m=m, **LAYOUT_PLAN[layout]) for m, n, k in layout_shapes for layout in LAYOUT_PLAN]
    requests += grouped_requests(args.m_grouped, args.masked)
    requests += k_grouped_requests() if args.k_grouped else []
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        list(pool.map(lambda r: kiln.precompile("bf16_gemm_nt", **r), requests))
    print(f"precompile: {len(requests)} requests in {time.perf_counter() - t0:.1f} s", flush=True)

    rows, failures = [], 0
    for index, (m, n, k) in enumerate(shapes):
        torch.manual_seed(index)
        a = torch.randn(m, k, device=device, dtype=torch.bfloat16)
        b = torch.randn(n, k, device=device, dtype=torch.bfloat16)
        d = torch.empty(m, n, device=device, dtype=torch.bfloat16)
        row = {"m": m, "n": n, "k": k}
        if (m, n, k) in peers:
            row["deepgemm_us"] = peers[(m, n, k)]
        d.fill_(float("nan"))
        failures += verify_into(row, torch, lambda: kiln.bf16_gemm_nt(a, b, d), d,
                                lambda rows: a[:rows].double() @ b.double().T, MAX_DIFF)
        flops = 2.0 * m * n * k
        nbytes = 2.0 * (m * k + n * k + m * n)
        if "error" not in row:
            time_into(row, "kiln", timed_us, lambda: kiln.bf16_gemm_nt(a, b, d), flops, nbytes)
        time_into(row, "cublas", timed_us, lambda: torch.matmul(a, b.T, out=d), flops, nbytes)
        if args.sweep and "error" not in row:
            row["sweep"] = sweep_tiles(kiln, timed_us, SWEEP_TILES, lambda: kiln.bf16_gemm_nt(a, b, d))
        add_speedups(row, "cublas", "deepgemm")
        row["form"], row["layout"] = "bf16", "nt"
        rows.append(row)
        nan = float("nan")
        sweep = ""
        if row.get("sweep"):
            timed = {t: us for t, us in row["sweep"].items() if isinstance(us, float)}
            fastest = min(timed, key=timed.get) if timed else None
            sweep = f"; fastest forced {fastest} {timed[fastest]:.1f} µs" if fastest else ""
        print(f"{m} x {n} x {k}: kiln {row.get('kiln_us', nan):.1f} µs ({row.get('kiln_tflops', nan):.0f} TFLOPS, "
              f"{row.get('kiln_gbps', nan):.0f} GB/s), cuBLAS {row.get('cublas_us', nan):.1f} µs, "
              f"x cuBLAS {row.get('speedup_vs_cublas', nan):.3f}"
              + (f", x DeepGEMM {row['speedup_vs_deepgemm']:.3f}" if "speedup_vs_deepgemm" in row else "")
              + f", calc_diff {row.get('diff_reference', nan):.1e}{sweep}" + (f" ERROR {row['error']}" if "error" in row
                                                                             else ""), flush=True)

    if layout_shapes:
        failures += bench_layouts(torch, kiln, device, layout_shapes, timed_us, rows)
    accumulate_peer = None
    if args.accumulate:
        accumulate_peer, failed = bench_accumulate(torch, kiln, device, shapes, timed_us, rows, args.sweep_accumulate)
        failures += failed
    if args.m_grouped:
        failures += bench_grouped(torch, kiln, device, timed_us, rows, "m_grouped_bf16_gemm_nt_contiguous",
                                  M_GROUPED_SHAPES, m_grouped_row)
        failures += bench_grouped(torch, kiln, device, timed_us, rows, "m_grouped_bf16_gemm_nn_contiguous",
                                  M_GROUPED_SHAPES, m_grouped_nn_row)
    if args.masked:
        failures += bench_grouped(torch, kiln, device, timed_us, rows, "m_grouped_bf16_gemm_nt_masked",
                                  MASKED_SHAPES, masked_row)
    if args.k_grouped:
        failures += bench_k_grouped(torch, kiln, device, timed_us, rows)

    bf16_rows = [r for r in rows if r["form"] == "bf16" and r["layout"] == "nt"]
    summary = {"geomean_vs_cublas": geomean([r["speedup_vs_cublas"] for r in bf16_rows if "speedup_vs_cublas" in r])}
    for m in ms:
        summary[f"geomean_vs_cublas_m{m}"] = geomean([r["speedup_vs_cublas"] for r in bf16_rows
                                                      if r["m"] == m and "speedup_vs_cublas" in r])
    for layout in LAYOUT_PLAN if layout_shapes else ():
        summary[f"geomean_vs_cublas_{layout}_m4096"] = geomean([r["speedup_vs_cublas"] for r in rows
                                                               if r["layout"] == layout and "speedup_vs_cublas" in r])
    if args.accumulate:
        summary["geomean_vs_cublas_add_f32"] = geomean([r["speedup_vs_cublas"] for r in rows
                                                        if r["form"] == "add_f32" and "speedup_vs_cublas" in r])
    for form in ("m_grouped", "m_grouped_nn", "masked"):
        for peer in ("cublas", "kiln_dense"):
            if any(r["form"] == form for r in rows):
                summary[f"geomean_{form}_vs_{peer}"] = geomean([r.get(f"speedup_vs_{peer}") for r in rows
                                                                if r["form"] == form])
    for form in ("k_grouped", "k_grouped_add"):  # cuBLAS per expert is their only peer
        if any(r["form"] == form for r in rows):
            summary[f"geomean_{form}_vs_cublas"] = geomean([r.get("speedup_vs_cublas") for r in rows
                                                            if r["form"] == form])
    if any("speedup_vs_deepgemm" in r for r in rows):
        summary["geomean_vs_deepgemm"] = geomean([r["speedup_vs_deepgemm"] for r in rows if "speedup_vs_deepgemm" in r])
    print("RESULT bf16_gemm_bench: " + ", ".join(f"{key} {value:.3f}" for key, value in summary.items()
                                                  if value is not None))
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / json_name(args)).write_text(json.dumps(
            {"device": props.name, "torch": torch.__version__, "kiln": kiln.__version__, "reps": args.reps,
             "l2_flush_bytes": 1 << 30, "max_calc_diff": MAX_DIFF, "accumulate_peer": accumulate_peer, "rows": rows,
             "summary": summary}, indent=1))
    print(("PASS" if failures == 0 else "FAIL") + f" bf16_gemm_bench: {len(rows) - failures} of {len(rows)} results "
          f"verified against float64 (calc_diff < {MAX_DIFF:g})")
    print(f"{'form':>7} {'layout':>6} {'M':>5} {'N':>6} {'K':>6} {'kiln µs':>9} {'TFLOPS':>7} {'cuBLAS µs':>9} "
          f"{'x cuBLAS':>8} {'x DeepGEMM':>10}")
    for r in rows:
        print(f"{r['form']:>7} {r['layout']:>6} {r['m']:>5} {r['n']:>6} {r['k']:>6} "
              f"{r.get('kiln_us', float('nan')):>9.1f} "
              f"{r.get('kiln_tflops', float('nan')):>7.0f} {r.get('cublas_us', float('nan')):>9.1f} "
              f"{r.get('speedup_vs_cublas', float('nan')):>8.3f} {r.get('speedup_vs_deepgemm', float('nan')):>10.3f}")
    return 0 if failures == 0 else 1


ACCUMULATE_MAX_DIFF = 1e-7


def verify_into(row: dict, torch, call, d, reference, max_diff: float) -> int:
    """Runs `call` once and compares D's first (up to) 64 rows with reference(rows), the float64 result: the row gets
    diff_reference (calc_diff) and verified (finite and below max_diff), or the error. Returns 1 for a failure."""
    try:
        call()
        torch.cuda.synchronize()
        rows = min(row["m"], 64)
        row["diff_reference"] = calc_diff(d[:rows], reference(rows))
        row["verified"] = bool(torch.isfinite(d).all()) and row["diff_reference"] < max_diff
    except Exception as e:  # noqa: BLE001 - reported, counted as a failure
        row["error"] = f"{type(e).__name__}: {e}"
        row["verified"] = False
    return 0 if row["verified"] else 1


def time_row(row: dict, label: str, timed_us, kiln_call, peer_call, nbytes: float) -> None:
    """Times kiln (unless the row has an error) and the cuBLAS peer (unless None) into a verified --layouts or
    --accumulate row, with the ratio, and prints its line."""
    m, n, k = row["m"], row["n"], row["k"]
    flops = 2.0 * m * n * k
    if "error" not in row:
        time_into(row, "kiln", timed_us, kiln_call, flops, nbytes)
    if peer_call is not None:
        time_into(row, "cublas", timed_us, peer_call, flops, nbytes)
    add_speedups(row, "cublas")
    nan = float("nan")
    print(f"{label} {m} x {n} x {k}: kiln {row.get('kiln_us', nan):.1f} µs ({row.get('kiln_tflops', nan):.0f} "
          f"TFLOPS), cuBLAS {row.get('cublas_us', nan):.1f} µs, x cuBLAS {row.get('speedup_vs_cublas', nan):.3f}, "
          f"calc_diff {row.get('diff_reference', nan):.1e}" + (f" ERROR {row['error']}" if "error" in row else ""),
          flush=True)


# DeepGEMM's layouts: the problem parameters of their plans (what precompile needs).
LAYOUT_PLAN = {"nn": dict(n_major_b=1), "tn": dict(m_major_a=1, n_major_b=1), "tt": dict(m_major_a=1)}


def bench_layouts(torch, kiln, device, shapes, timed_us, rows) -> int:
    """The --layouts rows (layouts nn, tn, tt of each shape), appended to `rows`; returns the failures."""
    failures = 0
    for index, (m, n, k) in enumerate(shapes):
        torch.manual_seed(2000 + index)
        a = torch.randn(m, k, device=device, dtype=torch.bfloat16)
        b = torch.randn(n, k, device=device, dtype=torch.bfloat16)
        a_km, b_kn = a.T.contiguous(), b.T.contiguous()
        d = torch.empty(m, n, device=device, dtype=torch.bfloat16)
        views = {"nn": (kiln.bf16_gemm_nn, a, b_kn, lambda: torch.mm(a, b_kn, out=d)),
                 "tn": (kiln.bf16_gemm_tn, a_km, b_kn, lambda: torch.mm(a_km.T, b_kn, out=d)),
                 "tt": (kiln.bf16_gemm_tt, a_km, b, lambda: torch.mm(a_km.T, b.T, out=d))}
        for layout, (function, x, y, peer) in views.items():
            row = {"form": "bf16", "layout": layout, "m": m, "n": n, "k": k}
            d.fill_(float("nan"))
            failures += verify_into(row, torch, lambda: function(x, y, d), d,
                                    lambda rows: a[:rows].double() @ b.double().T, MAX_DIFF)
            time_row(row, layout, timed_us, lambda: function(x, y, d), peer, 2.0 * (m * k + n * k + m * n))
            rows.append(row)
    return failures


def first_float32_peer(torch, candidates, accumulate: bool):
    """The first of `candidates` ((name, callable(a, b, d)): D (float32) = A . B^T for bf16 A and B, or += with
    `accumulate`) that runs through this torch and is right on a small problem: (name, callable), or (None, None)."""
    a = torch.randn(64, 128, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(256, 128, device="cuda", dtype=torch.bfloat16)
    expected = (1.0 if accumulate else 0.0) + a.double() @ b.double().T
    for name, peer in candidates:
        d = torch.ones(64, 256, device="cuda") if accumulate else torch.full((64, 256), float("nan"), device="cuda")
        try:
            peer(a, b, d)
            torch.cuda.synchronize()
        except (RuntimeError, TypeError):
            continue
        if calc_diff(d, expected) < ACCUMULATE_MAX_DIFF:
            return name, peer
    return None, None


def accumulate_peer_of(torch):
    """cuBLAS's D (float32) += A . B^T for bf16 A and B through this torch: (name, callable(a, b, d)), the first of
    torch.addmm with out_dtype into D itself (one GEMM with beta = 1) and torch.mm with out_dtype then add_ (two
    kernels) that runs and adds correctly on a small problem."""
    def addmm(a, b, d):
        torch.addmm(d, a, b.T, out_dtype=torch.float32, out=d)

    def mm_add(a, b, d):
        d.add_(torch.mm(a, b.T, out_dtype=torch.float32))

    return first_float32_peer(torch, (("torch.addmm(out_dtype=float32, out=d)", addmm),
                                      ("torch.mm(out_dtype=float32) + add_", mm_add)), accumulate=True)


def store_peer_of(torch):
    """cuBLAS's D (float32) = A . B^T for bf16 A and B through this torch: (name, callable(a, b, d)), the first of
    torch.mm with out_dtype into D itself (one GEMM) and torch.mm with out_dtype then copy_ (a GEMM and a copy) that
    runs and is right on a small problem."""
    def mm_out(a, b, d):
        torch.mm(a, b.T, out_dtype=torch.float32, out=d)

    def mm_copy(a, b, d):
        d.copy_(torch.mm(a, b.T, out_dtype=torch.float32))

    return first_float32_peer(torch, (("torch.mm(out_dtype=float32, out=d)", mm_out),
                                      ("torch.mm(out_dtype=float32) + copy_", mm_copy)), accumulate=False)


# (block_m, block_n, cluster_m, stages) forced on the accumulating form's M = 4096 rows by --accumulate --sweep: the
# plan's widest tiles (128x192) and those it leaves out for their 2 stages (128x256, 256x128), with more stages and
# the epilogue in passes.
ACCUMULATE_SWEEP_TILES = [(128, 128, 2, 0), (128, 192, 1, 0), (128, 192, 2, 0), (128, 256, 1, 0), (128, 256, 2, 0),
                          (128, 256, 1, 4), (128, 256, 2, 4), (256, 128, 2, 0), (256, 128, 2, 4), (128, 192, 2, 4)]


def bench_accumulate(torch, kiln, device, shapes, timed_us, rows, sweep: bool) -> tuple:
    """The --accumulate rows (form "add_f32"), appended to `rows`, with ACCUMULATE_SWEEP_TILES timed at M = 4096
    when `sweep`; returns (the cuBLAS peer's name, failures)."""
    peer_name, peer = accumulate_peer_of(torch)
    failures = 0
    for index, (m, n, k) in enumerate(shapes):
        torch.manual_seed(1000 + index)
        a = torch.randn(m, k, device=device, dtype=torch.bfloat16)
        b = torch.randn(n, k, device=device, dtype=torch.bfloat16)
        c = torch.randn(m, n, device=device)
        d = c.clone()
        row = {"form": "add_f32", "layout": "nt", "m": m, "n": n, "k": k}
        failures += verify_into(row, torch, lambda: kiln.bf16_gemm_nt(a, b, d, c=d), d,
                                lambda rows: c[:rows].double() + a[:rows].double() @ b.double().T,
                                ACCUMULATE_MAX_DIFF)
        time_row(row, "D += A.B^T", timed_us, lambda: kiln.bf16_gemm_nt(a, b, d, c=d),
                 None if peer is None else lambda: peer(a, b, d), 2.0 * (m * k + n * k) + 8.0 * m * n)
        if sweep and m == 4096 and "error" not in row:
            row["sweep"] = sweep_tiles(kiln, timed_us, ACCUMULATE_SWEEP_TILES, lambda: kiln.bf16_gemm_nt(a, b, d, c=d))
            print("  forced: " + ", ".join(f"{t} {us:.1f}" if isinstance(us, float) else f"{t} {us}"
                                           for t, us in row["sweep"].items()), flush=True)
        rows.append(row)
    return peer_name, failures


def grouped_requests(m_grouped: bool, masked: bool) -> list:
    """What --m-grouped and --masked precompile: each shape's grouped kernel (the contiguous form's plan at all of A's
    rows, padding included; the masked form's at experts x expected rows) and its kiln dense peer's."""
    requests = []
    for groups, m, n, k, tail in M_GROUPED_SHAPES if m_grouped else ():
        requests += [dict(n=n, k=k, m=m + tail, m_grouped=1), dict(n=n, k=k, m=m + tail, m_grouped=1, n_major_b=1),
                     dict(n=n, k=k, m=m)]
    for index, (groups, expected, total, n, k) in enumerate(MASKED_SHAPES if masked else ()):
        valid = sum(expert_counts(groups, expected, total, seed=index))
        requests += [dict(n=n, k=k, m=groups * min(max(expected, 1), MAX_M), m_grouped=1, masked=1),
                     dict(n=n, k=k, m=valid)]
    return requests


def grouped_function(kiln, name: str):
    """kiln's `name`, or the native module's where this package has no Python wrapper for it yet (both take (a, b, d,
    m_indices) or (a, b, d, masked_m, expected_m) first), or None where neither has it: calling that raises inside
    the row's verification, which records the error."""
    function = getattr(kiln, name, None)
    return function if function is not None else getattr(kiln._native, name, None)


def finish_grouped_row(row: dict, label: str) -> None:
    """A timed --m-grouped or --masked row's ratios to its peers, and its line."""
    add_speedups(row, "cublas", "kiln_dense")
    nan = float("nan")
    print(f"{label} x {row['n']} x {row['k']}: kiln {row.get('kiln_us', nan):.1f} µs "
          f"({row.get('kiln_tflops', nan):.0f} TFLOPS, {row.get('kiln_gbps', nan):.0f} GB/s), kiln dense "
          f"{row.get('kiln_dense_us', nan):.1f} µs, cuBLAS per expert {row.get('cublas_us', nan):.1f} µs, x cuBLAS "
          f"{row.get('speedup_vs_cublas', nan):.3f}, x kiln dense {row.get('speedup_vs_kiln_dense', nan):.3f}, "
          f"calc_diff {row.get('diff_reference', nan):.1e}{row_status(row)}", flush=True)


def bench_grouped(torch, kiln, device, timed_us, rows, function, shapes, row_of) -> int:
    """One grouped form's rows (row_of(..., gemm, index, *shape) per shape), appended to `rows`; returns the
    failures."""
    gemm = grouped_function(kiln, function)
    failures = 0
    for index, shape in enumerate(shapes):
        row = row_of(torch, kiln, device, timed_us, gemm, index, *shape)
        failures += 0 if row["verified"] else 1
        rows.append(row)
        torch.cuda.empty_cache()  # the shape's tensors went with row_of's frame
    return failures


def m_grouped_operands(torch, device, groups, m, n, k, seed, sizes_seed, tail=0):
    """Random bfloat16 operands of an m-grouped call: A [m + tail, k] and B [groups, n, k] (drawn after
    torch.manual_seed(seed)), the expert of each row of A (-1 in the `tail` rows of padding), and each expert's first
    row and row count (expert_rows with `sizes_seed`). The benchmark's and the probes' (bench/probes/) alike."""
    sizes = expert_rows(groups, m, seed=sizes_seed)
    firsts = [sum(sizes[:g]) for g in range(groups)]
    torch.manual_seed(seed)
    a = torch.randn(m + tail, k, device=device, dtype=torch.bfloat16)
    b = torch.randn(groups, n, k, device=device, dtype=torch.bfloat16)
    indices = torch.full((m + tail,), -1, dtype=torch.int32, device=device)
    for g, (first, size) in enumerate(zip(firsts, sizes)):
        indices[first:first + size] = g
    return a, b, indices, firsts, sizes


def m_grouped_nn_row(torch, kiln, device, timed_us, contiguous, index, groups, m, n, k, tail) -> dict:
    """One --m-grouped shape in the nn form (m_grouped_bf16_gemm_nn_contiguous: each expert's B stored [k, n])."""
    return m_grouped_row(torch, kiln, device, timed_us, contiguous, index, groups, m, n, k, tail, nn=True)


def m_grouped_row(torch, kiln, device, timed_us, contiguous, index, groups, m, n, k, tail, nn: bool = False) -> dict:
    """One --m-grouped shape, verified, timed and printed; `nn`: B given [G, k, n] (the cuBLAS peer multiplies by the
    same [k, n] views)."""
    # The FP8 benchmark's expert sizes: its padded repeat of shape 1 too.
    a, b, indices, firsts, sizes = m_grouped_operands(torch, device, groups, m, n, k, seed=3000 + index,
                                                      sizes_seed=min(index, 1), tail=tail)
    d = torch.empty(m + tail, n, device=device, dtype=torch.bfloat16)
    b_given = b.transpose(1, 2).contiguous() if nn else b  # [G, k, n] for the nn form
    row = {"form": "m_grouped_nn" if nn else "m_grouped", "layout": "nn" if nn else "nt", "groups": groups, "m": m,
           "n": n, "k": k, "rows": sizes, "padding_rows": tail}
    try:
        d.fill_(float("nan"))
        contiguous(a, b_given, d, indices)
        torch.cuda.synchronize()
        worst = 0.0
        for g, (first, size) in enumerate(zip(firsts, sizes)):
            checked = slice(first, first + min(size, 64))
            worst = max(worst, calc_diff(d[checked], a[checked].double() @ b[g].double().T))
        row["diff_reference"] = worst
        # The blocks of padding only after the experts' are skipped: they keep their NaN.
        row["verified"] = bool(torch.isfinite(d[:m]).all()) and bool(torch.isnan(d[m:]).all()) and worst < MAX_DIFF
    except Exception as e:  # noqa: BLE001 - reported, counted as a failure
        row["error"] = f"{type(e).__name__}: {e}"
        row["verified"] = False

    def cublas_per_expert():
        for g, (first, size) in enumerate(zip(firsts, sizes)):
            torch.mm(a[first:first + size], b_given[g] if nn else b[g].T, out=d[first:first + size])

    calls = {"kiln": lambda: contiguous(a, b_given, d, indices),
             "kiln_dense": lambda: kiln.bf16_gemm_nt(a[:m], b[0], d[:m]), "cublas": cublas_per_expert}
    flops = 2.0 * m * n * k
    nbytes = 2.0 * (m * k + groups * n * k + m * n)
    for peer, call in calls.items():
        if peer != "kiln" or "error" not in row:
            time_into(row, peer, timed_us, call, flops, nbytes)
    padded = f" + {tail} padding" if tail else ""
    form = "m-grouped nn" if nn else "m-grouped"
    finish_grouped_row(row, f"{form} {groups} experts, {m} rows{padded} ({min(sizes)}..{max(sizes)})")
    return row


def masked_row(torch, kiln, device, timed_us, masked_gemm, index, groups, expected, total, n, k) -> dict:
    """One --masked shape, verified, timed and printed."""
    counts = expert_counts(groups, expected, total, seed=index)
    valid = sum(counts)
    torch.manual_seed(4000 + index)
    a = torch.randn(groups, MAX_M, k, device=device, dtype=torch.bfloat16)
    b = torch.randn(groups, n, k, device=device, dtype=torch.bfloat16)
    masked_m = torch.tensor(counts, dtype=torch.int32, device=device)
    d = torch.empty(groups, MAX_M, n, device=device, dtype=torch.bfloat16)
    row = {"form": "masked", "layout": "nt", "groups": groups, "max_m": MAX_M, "expected_m": expected, "m": valid,
           "n": n, "k": k, "masked_m": counts}
    try:
        d.fill_(float("nan"))
        masked_gemm(a, b, d, masked_m, expected)
        torch.cuda.synchronize()
        worst, finite = masked_rows_diff(torch, d, counts, lambda g, rows: a[g, :rows].double() @ b[g].double().T)
        row["diff_reference"] = worst
        row["verified"] = finite and worst < MAX_DIFF
    except Exception as e:  # noqa: BLE001 - reported, counted as a failure
        row["error"] = f"{type(e).__name__}: {e}"
        row["verified"] = False

    def cublas_per_expert():
        for g, count in enumerate(counts):
            if count:
                torch.mm(a[g, :count], b[g].T, out=d[g, :count])

    # The dense peer's A: as many rows as the valid ones (they are not one block of a).
    a_dense = torch.randn(valid, k, device=device, dtype=torch.bfloat16)
    d_dense = torch.empty(valid, n, device=device, dtype=torch.bfloat16)
    calls = {"kiln": lambda: masked_gemm(a, b, d, masked_m, expected),
             "kiln_dense": lambda: kiln.bf16_gemm_nt(a_dense, b[0], d_dense), "cublas": cublas_per_expert}
    flops = 2.0 * valid * n * k
    nbytes = 2.0 * (groups * n * k + valid * k + valid * n)
    for peer, call in calls.items():
        if peer != "kiln" or "error" not in row:
            time_into(row, peer, timed_us, call, flops, nbytes)
    finish_grouped_row(row, f"masked {groups} experts x {expected} expected ({valid} valid, "
                            f"{min(counts)}..{max(counts)})")
    return row


def k_grouped_token_counts(groups: int, tokens: int, seed: int) -> list[int]:
    """A router-like skewed split of `tokens` into `groups` (>= 2) counts (the FP8 k-grouped benchmark's Pareto skew,
    without its 128-token blocks) summing to it exactly, each at least 1 and none a multiple of 64: every expert's
    weight gradient ends in a K tail, as routed tokens make it."""
    rng = random.Random(seed)
    weights = [rng.paretovariate(1.5) for _ in range(groups)]
    counts = [max(1, int(tokens * w / sum(weights))) for w in weights]
    heaviest = max(range(groups), key=lambda g: weights[g])
    for g in range(groups):
        if g != heaviest and counts[g] % 64 == 0:
            counts[g] -= 1  # from 64 or more: still tokens
    counts[heaviest] += tokens - sum(counts)
    if counts[heaviest] % 64 == 0:  # a token of the heaviest to an expert that stays off a multiple of 64
        receiver = next(g for g in range(groups) if g != heaviest and (counts[g] + 1) % 64 != 0)
        counts[heaviest] -= 1
        counts[receiver] += 1
    return counts


def k_grouped_plan_tokens(k: int) -> int:
    """The token count kiln plans a group of `k` tokens at (k_grouped_plan_k: 64 times the least power of two that
    holds k), so that precompile asks once per kernel a call can pick rather than once per group."""
    plan = 64
    while plan < k:
        plan *= 2
    return plan


def k_grouped_requests() -> list:
    """What --k-grouped precompiles: every shape's kernels, c=None's and c=d's (accumulate=1), at the token counts its
    groups are planned at; each distinct request once (two threads must not compile one kernel)."""
    requests = {}
    for index, (_, m, n, groups, tokens) in enumerate(K_GROUPED_SHAPES):
        for k in sorted({k_grouped_plan_tokens(k) for k in k_grouped_token_counts(groups, tokens, seed=index)}):
            for extra in ({}, {"accumulate": 1}):
                request = dict(n=n, k=k, m=m, k_grouped=1, **extra)
                requests[tuple(sorted(request.items()))] = request
    return list(requests.values())


def bench_k_grouped(torch, kiln, device, timed_us, rows) -> int:
    """The --k-grouped rows, c=None ("form": "k_grouped") and c=d ("k_grouped_add") of each shape, appended to `rows`;
    returns the failures."""
    gemm = grouped_function(kiln, "k_grouped_bf16_gemm_tn_contiguous")
    peers = {False: store_peer_of(torch), True: accumulate_peer_of(torch)}
    failures = 0
    for index, (weight, m, n, groups, tokens) in enumerate(K_GROUPED_SHAPES):
        ks = k_grouped_token_counts(groups, tokens, seed=index)
        torch.manual_seed(5000 + index)
        a = torch.randn(tokens, m, device=device, dtype=torch.bfloat16)
        b = torch.randn(tokens, n, device=device, dtype=torch.bfloat16)
        d = torch.empty(groups, m, n, device=device)
        for accumulate in (False, True):
            row = k_grouped_row(torch, timed_us, gemm, peers[accumulate], weight, a, b, d, ks, accumulate)
            failures += 0 if row["verified"] else 1
            rows.append(row)
        del a, b, d
        torch.cuda.empty_cache()
    return failures


def k_grouped_row(torch, timed_us, gemm, peer, weight: str, a, b, d, ks, accumulate: bool) -> dict:
    """One --k-grouped shape with c=None, or c=d (`accumulate`): verified (each expert's first 64 rows of D against C +
    the float64 product), timed against cuBLAS per expert (`peer`: (name, callable(a, b, d)) or (None, None)) and
    printed."""
    groups, m, n = d.shape
    tokens = sum(ks)
    firsts = [sum(ks[:g]) for g in range(groups)]
    peer_name, peer_call = peer
    row = {"form": "k_grouped_add" if accumulate else "k_grouped", "layout": "tn", "weight": weight, "groups": groups,
           "m": m, "n": n, "k": tokens, "ks": ks, "c": "d" if accumulate else None, "cublas_peer": peer_name}
    c = torch.randn(groups, m, n, device=d.device) if accumulate else None
    try:
        if accumulate:
            d.copy_(c)
        else:
            d.fill_(float("nan"))
        gemm(a, b, d, ks, c=d if accumulate else None)
        torch.cuda.synchronize()
        worst, checked = 0.0, min(m, 64)
        for g, (first, k) in enumerate(zip(firsts, ks)):
            reference = a[first:first + k, :checked].double().T @ b[first:first + k].double()
            if accumulate:
                reference += c[g, :checked].double()
            worst = max(worst, calc_diff(d[g, :checked], reference))
        row["diff_reference"] = worst
        row["verified"] = bool(torch.isfinite(d).all()) and worst < ACCUMULATE_MAX_DIFF
    except Exception as e:  # noqa: BLE001 - reported, counted as a failure
        row["error"] = f"{type(e).__name__}: {e}"
        row["verified"] = False
    del c

    def cublas_per_expert():
        for g, (first, k) in enumerate(zip(firsts, ks)):
            if k:
                peer_call(a[first:first + k].T, b[first:first + k].T, d[g])  # a_g^T . (b_g^T)^T
            elif not accumulate:
                d[g].zero_()

    flops = 2.0 * m * n * tokens
    nbytes = 2.0 * tokens * (m + n) + (8.0 if accumulate else 4.0) * groups * m * n
    if "error" not in row:
        time_into(row, "kiln", timed_us, lambda: gemm(a, b, d, ks, c=d if accumulate else None), flops, nbytes)
    if peer_call is not None:
        time_into(row, "cublas", timed_us, cublas_per_expert, flops, nbytes)
    else:
        row["cublas_na"] = f"torch {torch.__version__} has no bf16 GEMM with a float32 D (out_dtype)"
    add_speedups(row, "cublas")
    nan = float("nan")
    print(f"{m} x {n} k-grouped {weight}, {groups} experts, {tokens} tokens (ks {min(ks)}..{max(ks)}), "
          f"c={'d' if accumulate else 'None'}: kiln {row.get('kiln_us', nan):.1f} µs "
          f"({row.get('kiln_tflops', nan):.0f} TFLOPS, {row.get('kiln_gbps', nan):.0f} GB/s), cuBLAS per expert "
          f"{row.get('cublas_us', nan):.1f} µs ({row.get('cublas_tflops', nan):.0f} TFLOPS), x cuBLAS "
          f"{row.get('speedup_vs_cublas', nan):.3f}, calc_diff {row.get('diff_reference', nan):.1e}{row_status(row)}",
          flush=True)
    return row


if __name__ == "__main__":
    sys.exit(main())
