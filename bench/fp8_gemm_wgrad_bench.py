#!/usr/bin/env python3
"""The FP8 GEMM's weight-gradient form from Python: kiln.fp8_gemm_nt with an fp32 D against cuBLAS through torch.

Weight gradients of DeepSeek-V3's dense layers: for each weight [N_w, K_w] of shared/bench/shapes.json's dense_fp8
set, D[M, N] (fp32) += A[M, K] . B[N, K]^T with M x N = N_w x K_w (the weight's shape) and K = T tokens (4096 and
8192; and 512, a micro-batch's or an expert's few tokens, where D's traffic bounds the call), A and B in e4m3, both
scaled per 1x128 (DeepGEMM's recipe (1, 1, 128)):

  kiln              kiln.fp8_gemm_nt((a, sfa), (b, sfb), d, c=d): D += A . B^T in one kernel (the plan's tile)
  cuBLAS bw + add   d.add_(torch.nn.functional.scaled_mm(a, b.T, scale_a=sfa, scale_recipe_a=BlockWise1x128,
                    scale_b=sfb, scale_recipe_b=BlockWise1x128, output_dtype=torch.float32)): the same recipe and
                    the same operation, cuBLAS having no accumulating form here
  cuBLAS bw         the scaled_mm alone (D = A . B^T, no accumulation): what a GEMM without the read of D costs
  cuBLAS pt + add   torch._scaled_mm with 0-dim scales (per-tensor, a cheaper recipe), fp32 out, then the add

Timing as bench/fp8_gemm_bench.py: the L2 flushed by a 1 GB write before every call, CUDA events, the median of --reps
(>= 30) after --warmup calls, each measurement after --idle-ms of idle GPU. TFLOPS = 2 M N K / t. Ratios are
speed-ups (peer time / kiln time, > 1 when kiln is faster). Every kiln result is verified first: D = C + A . B^T from
a random C against the float64 C + dequant(A) . dequant(B)^T, DeepGEMM's calc_diff < 1e-5.

Writes fp8_gemm_wgrad_bench.json to --out (default $OUT; nothing when neither is set); prints a line per shape, RESULT
lines (geometric means), one PASS/FAIL line and a table. Exit 0 when every result verified, 1 otherwise, 77 without
a GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

# shared/bench/shapes.json, dense_fp8's (N, K): the weights (copied: the GPU machine gets the repository only).
WEIGHTS = [(2112, 7168), (24576, 1536), (32768, 512), (7168, 16384), (4096, 7168), (7168, 2048), (576, 7168)]
TOKENS = [512, 4096, 8192]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from fp8_gemm_bench import (MAX_DIFF, add_timing_arguments, calc_diff, dequantised_product,  # noqa: E402
                            geomean, start_gpu_bench, time_into)


def write_report(name: str, out, props, torch, kiln, reps: int, blockwise_missing, rows, summary,
                 failures: int) -> None:
    """A weight-gradient benchmark's JSON (<name>.json in `out`, when set) and its PASS/FAIL line."""
    if out:
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{name}.json").write_text(json.dumps(
            {"device": props.name, "torch": torch.__version__, "kiln": kiln.__version__, "reps": reps,
             "l2_flush_bytes": 1 << 30, "max_calc_diff": MAX_DIFF, "blockwise_missing": blockwise_missing,
             "rows": rows, "summary": summary}, indent=1))
    print(("PASS" if failures == 0 else "FAIL") + f" {name}: {len(rows) - failures} of {len(rows)} results verified "
          f"against float64 (calc_diff < {MAX_DIFF:g})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_timing_arguments(parser)
    parser.add_argument("--tokens", type=int, nargs="+", default=TOKENS, help="K values (tokens)")
    parser.add_argument("--jobs", type=int, default=min(8, os.cpu_count() or 1), help="parallel precompile threads")
    args = parser.parse_args()
    args.reps = max(args.reps, 30)

    shapes = [(n_w, k_w, t) for n_w, k_w in WEIGHTS for t in args.tokens]
    bench = start_gpu_bench("fp8_gemm_wgrad_bench", args, len(shapes))
    if bench is None:
        return 77
    torch, F, kiln, device, props = bench.torch, bench.F, bench.kiln, bench.device, bench.props
    scaling, blockwise_missing, timed_us = bench.scaling, bench.blockwise_missing, bench.timed_us

    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        list(pool.map(lambda s: kiln.precompile("fp8_gemm_nt", n=s[1], k=s[2], m=s[0], accumulate=1), shapes))
    print(f"precompile: {time.perf_counter() - t0:.1f} s", flush=True)

    one = torch.ones((), device=device)
    rows, failures = [], 0
    for index, (m, n, k) in enumerate(shapes):
        torch.manual_seed(index)
        a_fp8, sfa = kiln.per_token_cast_to_fp8(torch.randn(m, k, device=device, dtype=torch.bfloat16))
        b_fp8, sfb = kiln.per_token_cast_to_fp8(torch.randn(n, k, device=device, dtype=torch.bfloat16))
        c = torch.randn(m, n, device=device, dtype=torch.float32)
        d = c.clone()
        row = {"m": m, "n": n, "k": k}
        spec = dict(kv.split("=") for kv in kiln.plan("fp8_gemm_nt", n=n, k=k, m=m, accumulate=1)[0]["spec"].split())
        row["kiln_tile"] = f"{spec['block_m']}x{spec['block_n']}"
        try:
            kiln.fp8_gemm_nt((a_fp8, sfa), (b_fp8, sfb), d, c=d)
            torch.cuda.synchronize()
            reference = c.double() + dequantised_product(a_fp8, sfa, b_fp8, sfb, b_rows_per_scale=1)
            row["diff_reference"] = calc_diff(d, reference)
            row["verified"] = bool(torch.isfinite(d).all()) and row["diff_reference"] < MAX_DIFF
            del reference
        except Exception as e:  # noqa: BLE001 - reported, counted as a failure
            row["error"] = f"{type(e).__name__}: {e}"
            row["verified"] = False
        failures += 0 if row["verified"] else 1

        def blockwise():
            return F.scaled_mm(a_fp8, b_fp8.T, scale_a=sfa, scale_recipe_a=scaling.BlockWise1x128, scale_b=sfb,
                               scale_recipe_b=scaling.BlockWise1x128, output_dtype=torch.float32)

        calls = {"kiln": lambda: kiln.fp8_gemm_nt((a_fp8, sfa), (b_fp8, sfb), d, c=d)}
        if blockwise_missing is None:
            calls["cublas_bw_add"] = lambda: d.add_(blockwise())
            calls["cublas_bw"] = blockwise
        calls["cublas_pt_add"] = lambda: d.add_(torch._scaled_mm(a_fp8, b_fp8.T, scale_a=one, scale_b=one,
                                                                 out_dtype=torch.float32))
        for name, call in calls.items():
            if name != "kiln" or "error" not in row:
                time_into(row, name, timed_us, call, 2.0 * m * n * k)
        for peer in ("cublas_bw_add", "cublas_bw", "cublas_pt_add"):
            if row.get("kiln_us") and row.get(f"{peer}_us"):
                row[f"speedup_vs_{peer}"] = row[f"{peer}_us"] / row["kiln_us"]
        rows.append(row)
        nan = float("nan")
        print(f"{m:>6} x {n:>6} x {k:>5}  {row['kiln_tile']:>7}  kiln {row.get('kiln_us', nan):8.1f} us "
              f"{row.get('kiln_tflops', nan):6.0f} TFLOPS  cuBLAS bw+add {row.get('cublas_bw_add_us', nan):8.1f}"
              f"  bw {row.get('cublas_bw_us', nan):8.1f}  pt+add {row.get('cublas_pt_add_us', nan):8.1f}"
              f"  diff {row.get('diff_reference', nan):.1e}{'' if row['verified'] else '  NOT VERIFIED'}", flush=True)
        del a_fp8, b_fp8, sfa, sfb, c, d
        torch.cuda.empty_cache()

    summary = {peer: geomean([r.get(f"speedup_vs_{peer}") for r in rows])
               for peer in ("cublas_bw_add", "cublas_bw", "cublas_pt_add")}
    for peer, value in summary.items():
        if value:
            print(f"RESULT fp8_gemm_wgrad kiln vs {peer}: {value:.3f}x (geometric mean over {len(rows)} shapes)")
    write_report("fp8_gemm_wgrad_bench", args.out, props, torch, kiln, args.reps, blockwise_missing, rows, summary,
                 failures)
    print("| M | N | K | tile | kiln µs | TFLOPS | x cuBLAS bw + add | x cuBLAS bw alone | x cuBLAS pt + add |")
    print("|---:|---:|---:|---|---:|---:|---:|---:|---:|")
    for r in rows:
        def ratio(peer):
            v = r.get(f"speedup_vs_{peer}")
            return f"{v:.2f}" if v else "n/a"
        print(f"| {r['m']} | {r['n']} | {r['k']} | {r['kiln_tile']} | {r.get('kiln_us', float('nan')):.1f} | "
              f"{r.get('kiln_tflops', float('nan')):.0f} | {ratio('cublas_bw_add')} | {ratio('cublas_bw')} | "
              f"{ratio('cublas_pt_add')} |")
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
