#!/usr/bin/env python3
"""FP8 GEMM from Python: kiln.fp8_gemm_nt against cuBLAS through torch, with DeepGEMM's figures beside them.

Every dense_fp8 shape of shared/bench/shapes.json (M in {1, 64, 128, 4096} x seven (N, K)), D[M, N] (bf16) =
A[M, K] . B[N, K]^T with A and B in e4m3:

  kiln            kiln.fp8_gemm_nt((a, sfa), (b, sfb), d): A per 1x128 (kiln.per_token_cast_to_fp8), B per 128x128
  cuBLAS bw       torch.nn.functional.scaled_mm(a, b.T, scale_a=sfa (M, K/128, strides (1, M)),
                  scale_recipe_a=ScalingType.BlockWise1x128, scale_b=sfb.T, scale_recipe_b=ScalingType.BlockWise128x128,
                  output_dtype=torch.bfloat16): the same recipe, cuBLAS's kernel (not supported at M = 1: n/a)
  cuBLAS pt       torch._scaled_mm(a, b.T, scale_a, scale_b, out_dtype=torch.bfloat16) with 0-dim scales: per-tensor
                  scaling, a cheaper recipe (a ceiling for what FP8 tensor cores give cuBLAS)
  DeepGEMM        the events-timed microseconds of shared/bench/peers-h200.md (not run here): beside kiln's on an
                  H200 only, the card they were measured on (--peers-any-card: on any card)

Timing: the L2 (60 MB on an H200) is flushed before every call by writing a 1 GB buffer; CUDA events around each
call; the median of --reps (>= 30) timings after --warmup calls, as the peers file measured, each measurement starting
from a GPU left idle for --idle-ms (300 ms), so that none inherits the clocks of the shape before it (--warmup-ms 200
measures sustained load instead). TFLOPS = 2 M N K / t; GB/s counts A, B, their scales and D once. Ratios are
speed-ups, > 1 when kiln is faster: cuBLAS bw / kiln and DeepGEMM / kiln (times). Every kiln result is verified before
it is timed, with DeepGEMM's calc_diff (1 - 2 sum(xy) / sum(x^2 + y^2)): against a float64 reference from the
dequantised inputs and against cuBLAS's block-wise result, both < 1e-5, so a fast wrong kernel cannot pass.

Writes fp8_gemm_bench.json and the plot fp8_gemm_tflops.png (TFLOPS per shape: kiln, cuBLAS bw, cuBLAS pt, DeepGEMM;
matplotlib, Agg) to --out (default $OUT; nothing written when neither is set); prints one line per shape as it goes,
then RESULT lines (geometric means of the speed-ups per M group), one PASS/FAIL line, and a compact table last.
Exit status: 0 when every kiln result verified, 1 otherwise, 77 without a GPU. Runs in well under 90 s on an H200
(kernels are precompiled in parallel first; a warm cache makes that ~0 s).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# shared/bench/shapes.json, "dense_fp8" (copied: the GPU machine gets the repository only; --shapes reads the file).
DENSE_M = [1, 64, 128, 4096]
DENSE_NK = [(2112, 7168), (24576, 1536), (32768, 512), (7168, 16384), (4096, 7168), (7168, 2048), (576, 7168)]

# shared/bench/peers-h200.md, "Dense FP8 GEMM" table, column "DeepGEMM µs" (events, L2 flushed, median of 30;
# H200, 2026-11-29). Copied for the same reason; --peers parses the file instead.
DEEPGEMM_US = {
    (128, 2112, 7168): 13.8, (128, 24576, 1536): 20.4, (128, 32768, 512): 13.1, (128, 7168, 16384): 47.1,
    (128, 4096, 7168): 16.6, (128, 7168, 2048): 11.7, (4096, 2112, 7168): 97.6, (4096, 24576, 1536): 233.0,
    (4096, 32768, 512): 130.0, (4096, 7168, 16384): 653.1, (4096, 4096, 7168): 193.1, (4096, 7168, 2048): 97.7,
    (64, 7168, 2048): 10.8, (64, 4096, 7168): 16.3, (1, 7168, 2048): 11.4, (1, 4096, 7168): 18.3,
}
MAX_DIFF = 1e-5  # DeepGEMM's threshold


def parse_peers(path: Path) -> dict:
    """DeepGEMM µs per (M, N, K) from the peers file's dense table: rows '| M | N | K | DeepGEMM µs | ...'."""
    table = {}
    for line in path.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 4 and all(re.fullmatch(r"\d+", c) for c in cells[:3]):
            try:
                table[(int(cells[0]), int(cells[1]), int(cells[2]))] = float(cells[3])
            except ValueError:
                continue
    return table


# The card the peers file measured DeepGEMM on. Its figures stand beside kiln's only on that card: on another one (an
# H100 has 30 % less memory bandwidth) a ratio of the two would say more about the cards than about the kernels.
PEERS_CARD = "H200"


def peer_figures(device_name: str, table: dict, any_card: bool = False) -> tuple[dict, str | None]:
    """The DeepGEMM µs to compare with on `device_name`: `table` on the peers file's card (or with `any_card`),
    else none, with the reason to print and record."""
    if any_card or PEERS_CARD in device_name:
        return table, None
    return {}, (f"DeepGEMM's figures (measured on an {PEERS_CARD}) left out on {device_name}: a ratio across cards "
                f"compares the cards (--peers-any-card keeps them)")


def parse_shapes(path: Path):
    dense = json.loads(path.read_text())["dense_fp8"]
    return list(dense["m"]), [tuple(nk) for nk in dense["nk"]]


def add_timing_arguments(parser, out_what: str = "the JSON") -> None:
    """The timing options every benchmark here takes (flushed_median_us's): --reps (at least 30, main() raises it),
    --warmup, --idle-ms, and --out for what it writes."""
    parser.add_argument("--reps", type=int, default=30, help="timed calls per measurement (median; at least 30)")
    parser.add_argument("--warmup", type=int, default=3, help="warm-up calls per measurement, at least")
    parser.add_argument("--idle-ms", type=float, default=300.0,
                        help="the GPU idles this long before each measurement, so none inherits the one before's heat")
    parser.add_argument("--out", default=os.environ.get("OUT"), help=f"where {out_what} goes (default $OUT)")


def cuda_torch(name: str):
    """PyTorch with a CUDA GPU, or None after printing the SKIP line of benchmark `name` (exit status 77)."""
    try:
        import torch
    except ImportError:
        print(f"SKIP {name}: PyTorch is not installed")
        return None
    if not torch.cuda.is_available():
        print(f"SKIP {name}: no CUDA GPU")
        return None
    return torch


def split_in_blocks(total: int, weights) -> list[int]:
    """`total` (a multiple of 128) split into len(weights) multiples of 128 in proportion to the weights, summing to
    it exactly (the rounding's remainder goes to the heaviest): the grouped benchmarks' tokens or rows per expert."""
    blocks = total // 128
    counts = [int(blocks * w / sum(weights)) for w in weights]
    counts[max(range(len(weights)), key=lambda g: weights[g])] += blocks - sum(counts)
    return [c * 128 for c in counts]


class GpuBench:
    """What the cuBLAS-comparing benchmarks share once torch has a GPU (start_gpu_bench): torch, its functional
    module F, kiln, the device and its properties, torch's ScalingType (or None) and why the block-wise peer is
    missing (None when scaled_mm has it), and timed_us(call): the flushed median of bench/flushed_timing.py with the
    run's --reps, --warmup and --idle-ms, the L2 flushed by a 1 GB write before every call."""

    def __init__(self, torch, args):
        import torch.nn.functional as F
        import kiln
        from flushed_timing import flushed_median_us
        self.torch, self.F, self.kiln = torch, F, kiln
        self.device = torch.device("cuda", torch.cuda.current_device())
        self.props = torch.cuda.get_device_properties(self.device)
        self.scaling = getattr(F, "ScalingType", None)
        self.blockwise_missing = None if hasattr(F, "scaled_mm") and self.scaling is not None else \
            f"torch {torch.__version__} has no torch.nn.functional.scaled_mm / ScalingType"
        flush = torch.empty(1 << 30, dtype=torch.uint8, device=self.device)
        self.timed_us = lambda call: flushed_median_us(call, flush, reps=args.reps, warmup=args.warmup,
                                                       idle_s=args.idle_ms / 1000)


def start_gpu_bench(name: str, args, shapes: int):
    """A GpuBench for benchmark `name` of `shapes` shapes after printing its header line, or None (after the SKIP
    line: exit status 77) without PyTorch or a GPU."""
    torch = cuda_torch(name)
    if torch is None:
        return None
    bench = GpuBench(torch, args)
    print(f"{name}: {bench.props.name} ({bench.props.multi_processor_count} SMs), torch {torch.__version__}, kiln "
          f"{bench.kiln.__version__}; {shapes} shapes, median of {args.reps} after {args.warmup} warm-ups, each after "
          f"{args.idle_ms:g} ms idle, L2 flushed (1 GB write) before every call", flush=True)
    return bench


def calc_diff(x, y) -> float:
    x, y = x.double(), y.double()
    denominator = (x * x + y * y).sum()
    return float(1 - 2 * (x * y).sum() / denominator) if float(denominator) != 0 else 0.0


def dequantised_product(a_fp8, sfa, b_fp8, sfb, b_rows_per_scale: int = 128):
    """The float64 product (A * sfa) . (B * sfb)^T of K-major e4m3 operands, the benchmarks' reference: A scaled per
    row per 128 K; B per 128 x 128 block (b_rows_per_scale = 128, the bf16 form) or per row (1, the weight-gradient
    form). Scales row-major or MN-major alike (values are read, not strides)."""
    k, n = a_fp8.shape[1], b_fp8.shape[0]
    sa = sfa.double().repeat_interleave(128, dim=1)[:, :k]
    sb = sfb.double().repeat_interleave(128, dim=1)[:, :k]
    if b_rows_per_scale > 1:
        sb = sb.repeat_interleave(b_rows_per_scale, dim=0)[:n]
    return (a_fp8.double() * sa) @ (b_fp8.double() * sb).T


def not_available(e: Exception) -> str:
    """Why a peer cannot run a shape, for its `_na` entry: the exception's type and first line."""
    return f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"


def time_into(row: dict, name: str, time_call, call, flops: float, nbytes: float | None = None) -> None:
    """Times `call` with `time_call` (microseconds) into row[name_us] and _tflops (and _gbps given the bytes it
    moves); a call that raises (a peer that cannot run this shape) gets row[name_na] instead."""
    try:
        us = time_call(call)
    except Exception as e:  # noqa: BLE001 - a peer that cannot run this shape is n/a
        row[f"{name}_na"] = not_available(e)
        return
    row[f"{name}_us"] = us
    row[f"{name}_tflops"] = flops / us / 1e6
    if nbytes is not None:
        row[f"{name}_gbps"] = nbytes / us / 1e3


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_timing_arguments(parser, "the JSON and the PNG")
    parser.add_argument("--warmup-ms", type=float, default=0.0,
                        help="and at least this long (flush and call, as timed): 200 measures sustained load")
    parser.add_argument("--shapes", type=Path, help="shapes.json to read dense_fp8 from (default: the built-in copy)")
    parser.add_argument("--peers", type=Path, help="peers-h200.md to read DeepGEMM's µs from (default: built-in copy)")
    parser.add_argument("--peers-any-card", action="store_true",
                        help=f"compare with the peers file's DeepGEMM figures on a GPU other than an {PEERS_CARD} too")
    parser.add_argument("--jobs", type=int, default=min(8, os.cpu_count() or 1), help="parallel precompile threads")
    args = parser.parse_args()
    args.reps = max(args.reps, 30)

    torch = cuda_torch("fp8_gemm_bench")
    if torch is None:
        return 77
    import kiln
    from flushed_timing import flushed_median_us
    import torch.nn.functional as F

    t_start = time.perf_counter()
    dense_m, dense_nk = parse_shapes(args.shapes) if args.shapes else (DENSE_M, DENSE_NK)
    shapes = [(m, n, k) for n, k in dense_nk for m in dense_m]
    device = torch.device("cuda", torch.cuda.current_device())
    props = torch.cuda.get_device_properties(device)
    deepgemm, deepgemm_omitted = peer_figures(props.name, parse_peers(args.peers) if args.peers else DEEPGEMM_US,
                                              args.peers_any_card)
    print(f"fp8_gemm_bench: {props.name} ({props.multi_processor_count} SMs), torch {torch.__version__}, "
          f"kiln {kiln.__version__}; {len(shapes)} shapes, median of {args.reps} after {args.warmup} warm-ups "
          f"and {args.warmup_ms:g} ms, each after {args.idle_ms:g} ms idle, "
          f"L2 flushed (1 GB write) before every call; DeepGEMM from "
          f"{args.peers or 'the built-in copy of shared/bench/peers-h200.md'}", flush=True)
    if deepgemm_omitted:
        print(deepgemm_omitted, flush=True)

    # cuBLAS block-wise needs torch >= 2.10's torch.nn.functional.scaled_mm and ScalingType.
    scaling = getattr(F, "ScalingType", None)
    blockwise_missing = None
    if not hasattr(F, "scaled_mm") or scaling is None or not hasattr(scaling, "BlockWise1x128"):
        blockwise_missing = (f"torch {torch.__version__} has no torch.nn.functional.scaled_mm / ScalingType.BlockWise* "
                             f"(torch >= 2.10 needed): cuBLAS block-wise is n/a")
        print(blockwise_missing)
    per_tensor_missing = None if hasattr(torch, "_scaled_mm") else f"torch {torch.__version__} has no torch._scaled_mm"

    # Compile every kernel the shapes need first, in parallel (the GIL is released while kiln compiles).
    t0 = time.perf_counter()
    compiled = failed_compiles = 0
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = [pool.submit(kiln.precompile, "fp8_gemm_nt", m=m, n=n, k=k) for m, n, k in shapes]
        for future in futures:
            try:
                compiled += sum(1 for r in future.result() if not r["hit"])
            except Exception as e:  # the launch will compile (and report) instead
                failed_compiles += 1
                print(f"precompile failed: {type(e).__name__}: {e}")
    print(f"precompile: {compiled} kernels compiled, the rest cached, in {time.perf_counter() - t0:.1f} s"
          + (f" ({failed_compiles} failed)" if failed_compiles else ""), flush=True)

    flush_buffer = torch.empty(1 << 30, dtype=torch.uint8, device=device)  # 1 GB: nothing stays in the 60 MB L2

    def timed_us(fn) -> float:
        return flushed_median_us(fn, flush_buffer, reps=args.reps, warmup=args.warmup, idle_s=args.idle_ms / 1000.0,
                                 warmup_s=args.warmup_ms / 1000.0)

    one = torch.ones((), device=device)
    rows, failures = [], []
    for index, (m, n, k) in enumerate(shapes):
        kb, nb = math.ceil(k / 128), math.ceil(n / 128)
        torch.manual_seed(index)
        a = torch.randn(m, k, device=device, dtype=torch.bfloat16)
        b = torch.randn(n, k, device=device, dtype=torch.bfloat16)
        a_fp8, sfa = kiln.per_token_cast_to_fp8(a)
        b_fp8, sfb = kiln.per_block_cast_to_fp8(b)
        d = torch.full((m, n), float("nan"), device=device, dtype=torch.bfloat16)
        row = {"m": m, "n": n, "k": k, "deepgemm_us": deepgemm.get((m, n, k))}
        flops = 2.0 * m * n * k
        fp8_bytes = m * k + n * k + 2 * m * n
        scaled_bytes = fp8_bytes + 4 * (m * kb + nb * kb)

        def run_kiln():
            kiln.fp8_gemm_nt((a_fp8, sfa), (b_fp8, sfb), d)

        def run_blockwise():
            return F.scaled_mm(a_fp8, b_fp8.T, scale_a=sfa, scale_recipe_a=scaling.BlockWise1x128, scale_b=sfb.T,
                               scale_recipe_b=scaling.BlockWise128x128, output_dtype=torch.bfloat16)

        def run_per_tensor():
            return torch._scaled_mm(a_fp8, b_fp8.T, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)

        # Verify kiln first: against the float64 reference of the dequantised inputs and against cuBLAS.
        try:
            run_kiln()
            torch.cuda.synchronize()
            reference = dequantised_product(a_fp8, sfa, b_fp8, sfb)
            row["nan"] = int((~torch.isfinite(d)).sum())  # NaN (D was poisoned) or Inf
            row["diff_reference"] = calc_diff(d, reference)
            del reference
            ok = row["nan"] == 0 and row["diff_reference"] < MAX_DIFF
        except Exception as e:
            row["error"] = f"{type(e).__name__}: {e}"
            ok = False
        blockwise = None
        if blockwise_missing is None:
            try:
                blockwise = run_blockwise()
                torch.cuda.synchronize()
                if "error" not in row:
                    row["diff_cublas_blockwise"] = calc_diff(d, blockwise)
                    ok = ok and row["diff_cublas_blockwise"] < MAX_DIFF
            except Exception as e:  # unsupported shape (M = 1): n/a
                row["cublas_blockwise_na"] = not_available(e)
        row["verified"] = ok
        if not ok:
            failures.append(row)

        # Time (kiln even when unverified: the table says so).
        measurements = [("kiln", run_kiln, scaled_bytes, "error" not in row)]
        if blockwise is not None:
            measurements.append(("cublas_blockwise", run_blockwise, scaled_bytes, True))
        if per_tensor_missing is None:
            measurements.append(("cublas_per_tensor", run_per_tensor, fp8_bytes, True))
        for name, fn, nbytes, runnable in measurements:
            if runnable:
                time_into(row, name, timed_us, fn, flops, nbytes)
        if row.get("deepgemm_us"):
            row["deepgemm_tflops"] = flops / row["deepgemm_us"] / 1e6
        if row.get("kiln_us"):
            if row.get("cublas_blockwise_us"):
                row["speedup_vs_cublas_blockwise"] = row["cublas_blockwise_us"] / row["kiln_us"]
            if row.get("cublas_per_tensor_us"):
                row["speedup_vs_cublas_per_tensor"] = row["cublas_per_tensor_us"] / row["kiln_us"]
            if row.get("deepgemm_us"):
                row["speedup_vs_deepgemm"] = row["deepgemm_us"] / row["kiln_us"]
        rows.append(row)
        print(progress_line(row), flush=True)
    elapsed = time.perf_counter() - t_start

    summary = summarise(rows)
    out_dir = Path(args.out) if args.out else None
    if out_dir:
        out_dir.mkdir(parents=True, exist_ok=True)
        report = {"device": props.name, "sm_count": props.multi_processor_count, "torch": torch.__version__,
                  "kiln": kiln.__version__, "reps": args.reps, "warmup": args.warmup, "warmup_ms": args.warmup_ms,
                  "idle_ms": args.idle_ms, "seconds": elapsed,
                  "l2_flush_bytes": 1 << 30, "max_calc_diff": MAX_DIFF, "blockwise_missing": blockwise_missing,
                  "deepgemm_omitted": deepgemm_omitted,
                  "summary": summary, "shapes": rows}
        (out_dir / "fp8_gemm_bench.json").write_text(json.dumps(report, indent=1) + "\n")
        plot_note = plot(rows, out_dir / "fp8_gemm_tflops.png", props.name)
        print(f"wrote {out_dir / 'fp8_gemm_bench.json'}; {plot_note}")

    print()
    for line in summary_lines(summary):
        print("RESULT fp8_gemm_bench: " + line)
    for row in failures:
        print(f"  not verified: m={row['m']} n={row['n']} k={row['k']}: {row.get('error') or describe_diffs(row)}")
    if failures:
        print(f"FAIL fp8_gemm_bench: {len(failures)} of {len(rows)} kiln results not verified ({elapsed:.0f} s)")
    else:
        print(f"PASS fp8_gemm_bench: all {len(rows)} kiln results verified (calc_diff < {MAX_DIFF:g} against the "
              f"dequantised float64 reference and cuBLAS block-wise where it runs), {elapsed:.0f} s")
    print()
    print_table(rows)  # last, so the end of the log shows it
    return 1 if failures else 0


def fmt(value, spec: str, missing: str = "n/a") -> str:
    return missing if value is None else format(value, spec)


def describe_diffs(row) -> str:
    return (f"NaN/Inf {row.get('nan')}, calc_diff vs reference {fmt(row.get('diff_reference'), '.2e')}, "
            f"vs cuBLAS block-wise {fmt(row.get('diff_cublas_blockwise'), '.2e')}")


def progress_line(row) -> str:
    head = f"  m={row['m']:<5d} n={row['n']:<6d} k={row['k']:<6d}"
    if "error" in row:
        return f"{head} kiln ERROR {row['error']}"
    parts = [f"kiln {fmt(row.get('kiln_us'), '.1f')} us ({fmt(row.get('kiln_tflops'), '.0f')} TFLOPS, "
             f"{fmt(row.get('kiln_gbps'), '.0f')} GB/s)",
             f"cuBLAS bw {fmt(row.get('cublas_blockwise_us'), '.1f')}",
             f"cuBLAS pt {fmt(row.get('cublas_per_tensor_us'), '.1f')}",
             f"DeepGEMM {fmt(row.get('deepgemm_us'), '.1f', '-')}",
             describe_diffs(row) + ("" if row["verified"] else "  NOT VERIFIED")]
    if row.get("cublas_blockwise_na"):
        parts.append(f"cuBLAS bw n/a: {row['cublas_blockwise_na']}")
    return head + " " + "; ".join(parts)


def geomean(values):
    values = [v for v in values if v]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def summarise(rows) -> dict:
    summary = {}
    groups = {"M=1": lambda r: r["m"] == 1, "M=64,128": lambda r: r["m"] in (64, 128), "M=4096": lambda r: r["m"] == 4096,
              "all": lambda r: True}
    for label, keep in groups.items():
        sel = [r for r in rows if keep(r) and r["verified"]]  # an unverified kiln time means nothing
        entry = {}
        for key in ("speedup_vs_deepgemm", "speedup_vs_cublas_blockwise", "speedup_vs_cublas_per_tensor"):
            values = [r[key] for r in sel if r.get(key)]
            if values:
                entry[key] = {"geomean": geomean(values), "min": min(values), "max": max(values), "count": len(values)}
        summary[label] = entry
    summary["verified"] = sum(1 for r in rows if r["verified"])
    summary["shapes"] = len(rows)
    return summary


def summary_lines(summary) -> list:
    lines = []
    names = {"speedup_vs_deepgemm": "DeepGEMM/kiln", "speedup_vs_cublas_blockwise": "cuBLAS-bw/kiln",
             "speedup_vs_cublas_per_tensor": "cuBLAS-pt/kiln"}
    for label in ("M=1", "M=64,128", "M=4096", "all"):
        parts = []
        for key, name in names.items():
            s = summary.get(label, {}).get(key)
            if s:
                parts.append(f"{name} geomean {s['geomean']:.2f}x (min {s['min']:.2f}, max {s['max']:.2f}, "
                             f"{s['count']} shapes)")
        if parts:
            lines.append(f"{label}: " + "; ".join(parts))
    lines.append(f"verified {summary['verified']} of {summary['shapes']} shapes")
    return lines


def print_table(rows) -> None:
    print("FP8 GEMM, us (TFLOPS); speed-ups are times divided by kiln's (> 1: kiln faster)")
    header = (f"{'M':>5} {'N':>6} {'K':>6} | {'kiln us':>8} {'TFLOPS':>6} {'GB/s':>5} | {'cuBLAS bw':>9} {'pt':>7} "
              f"{'DeepGEMM':>8} | {'x bw':>5} {'x pt':>5} {'x DG':>5} | {'diff ref':>8} ok")
    print(header)
    print("-" * len(header))
    for r in rows:
        print(f"{r['m']:>5} {r['n']:>6} {r['k']:>6} | {fmt(r.get('kiln_us'), '8.1f', '     n/a')} "
              f"{fmt(r.get('kiln_tflops'), '6.0f', '   n/a')} {fmt(r.get('kiln_gbps'), '5.0f', '  n/a')} | "
              f"{fmt(r.get('cublas_blockwise_us'), '9.1f', '      n/a')} {fmt(r.get('cublas_per_tensor_us'), '7.1f', '    n/a')} "
              f"{fmt(r.get('deepgemm_us'), '8.1f', '       -')} | "
              f"{fmt(r.get('speedup_vs_cublas_blockwise'), '5.2f', '    -')} "
              f"{fmt(r.get('speedup_vs_cublas_per_tensor'), '5.2f', '    -')} "
              f"{fmt(r.get('speedup_vs_deepgemm'), '5.2f', '    -')} | "
              f"{fmt(r.get('diff_reference'), '8.1e', '     n/a')} {'yes' if r['verified'] else 'NO'}")


def plot(rows, path: Path, device_name: str) -> str:
    """TFLOPS per shape, one panel per M (their scales differ by 1000x), a bar per peer and (N, K): DeepGEMM's only
    where the rows carry its figures (on the peers file's card)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception as e:  # the H200 image has matplotlib; elsewhere the JSON still has every figure
        return f"no plot ({type(e).__name__}: {e})"
    series = [("kiln", "kiln_tflops", "#d62728"), ("cuBLAS block-wise", "cublas_blockwise_tflops", "#1f77b4"),
              ("cuBLAS per-tensor", "cublas_per_tensor_tflops", "#aec7e8")]
    with_deepgemm = any(r.get("deepgemm_tflops") for r in rows)
    if with_deepgemm:
        series.append(("DeepGEMM (peers file)", "deepgemm_tflops", "#7f7f7f"))
    ms = sorted({r["m"] for r in rows})
    fig, axes = plt.subplots(len(ms), 1, figsize=(12, 3.2 * len(ms) + 0.8), squeeze=False)
    width = 0.8 / len(series)
    for ax, m in zip(axes[:, 0], ms):
        sel = [r for r in rows if r["m"] == m]
        xs = range(len(sel))
        top = max([r.get(key) or 0.0 for r in sel for _, key, _ in series] + [1e-9])
        for i, (label, key, color) in enumerate(series):
            values = [r.get(key) or 0.0 for r in sel]
            bars = ax.bar([x + (i - (len(series) - 1) / 2) * width for x in xs], values, width,
                          label=label if m == ms[0] else None, color=color)
            for bar, r in zip(bars, sel):
                x = bar.get_x() + width / 2
                if not r.get(key):
                    ax.annotate("n/a", (x, 0), ha="center", va="bottom", fontsize=6, rotation=90)
                elif key == "kiln_tflops" and not r["verified"]:
                    bar.set_hatch("//")
                    ax.annotate("NOT VERIFIED", (x, bar.get_height()), ha="center", va="bottom", fontsize=6,
                                rotation=90)
                elif key == "kiln_tflops" and r.get("speedup_vs_deepgemm"):
                    # kiln's speed-up over DeepGEMM above its bar
                    ax.annotate(f"{r['speedup_vs_deepgemm']:.2f}x DG", (x, bar.get_height()), ha="center",
                                va="bottom", fontsize=6)
        ax.set_ylim(0, top * 1.15)
        ax.set_xticks(list(xs))
        ax.set_xticklabels([f"N={r['n']}\nK={r['k']}" for r in sel], fontsize=8)
        ax.set_ylabel("TFLOPS")
        ax.set_title(f"M = {m}", fontsize=10)
        ax.grid(axis="y", alpha=0.3)
    fig.legend(loc="upper center", ncol=len(series), fontsize=9, bbox_to_anchor=(0.5, 0.975))
    fig.suptitle(f"FP8 GEMM D = A.B^T (bf16 out, 1x128 / 128x128 scales), {device_name}: L2 flushed, CUDA events, "
                 f"median" + ("; 'x DG' = DeepGEMM time / kiln time" if with_deepgemm else ""), fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.955))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return f"wrote {path}"


if __name__ == "__main__":
    sys.exit(main())
