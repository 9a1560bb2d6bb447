#!/usr/bin/env python3
"""MoE decode GEMMs from Python: kiln.m_grouped_fp8_gemm_nt_masked against cuBLAS through torch, per expert.

The peers file's m-grouped masked shapes (shared/bench/peers-h200.md: DeepGEMM on the H200) and two decode shapes of
shared/bench/shapes.json (expected M 20): G experts in blocks of max M = 4096 rows, expert g's first masked_m[g] rows
valid (drawn once per shape from a fixed seed, 0.7..1.3 of the expected count; for the peers' shapes scaled to sum to
the file's valid rows), each expert with its own B [n, k] cast per 128x128 block:

  kiln             kiln.m_grouped_fp8_gemm_nt_masked(a, b, d, masked_m, expected_m): one call
  kiln dense       kiln.fp8_gemm_nt over as many rows as all the experts' valid ones, with one expert's B: the same
                   arithmetic with one B (where B's bytes dominate, as at decode, it reads G times fewer)
  cuBLAS bw        per expert torch.nn.functional.scaled_mm(A_g[:masked_m[g]], B_g^T, BlockWise1x128 / BlockWise128x128,
                   bf16 out) into its rows of D: the same recipe, one GEMM per expert (its rows rounded up to 16,
                   which cuBLAS needs)

Timing as bench/fp8_gemm_bench.py: the L2 flushed by a 1 GB write before every call, CUDA events, the median of --reps
(>= 30) after --warmup calls, each measurement after --idle-ms of idle GPU. TFLOPS = 2 (valid rows) n k / t; GB/s
counts B, the valid rows of A and D, and the scales once. Every kiln result is verified first: up to 64 valid rows of
each expert against the float64 product of the dequantised inputs, calc_diff < 1e-5. DeepGEMM's figure is shown on an
H200 only (the card it was measured on).

Writes fp8_gemm_masked_bench.json to --out (default $OUT; nothing when neither is set); prints a line per shape, a
RESULT line (geometric mean against cuBLAS), one PASS/FAIL line and a table. Exit 0 when every result verified, 1
otherwise, 77 without a GPU.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

MAX_M = 4096
# (experts, expected rows per expert, valid rows in all or None (drawn), n, k, DeepGEMM µs on the H200 or None)
SHAPES = [(32, 192, 6559, 6144, 7168, 555.0), (6, 1024, 6262, 7168, 3072, 219.0),
          (32, 20, None, 6144, 7168, None), (6, 20, None, 7168, 3072, None)]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from fp8_gemm_bench import (MAX_DIFF, add_timing_arguments, calc_diff, dequantised_product,  # noqa: E402
                            geomean, start_gpu_bench, time_into)
from fp8_gemm_m_grouped_bench import expert_weights  # noqa: E402 - the contiguous form's benchmark, beside this
from fp8_gemm_wgrad_bench import write_report  # noqa: E402 - the dense weight-gradient benchmark, beside this


def expert_counts(groups: int, expected: int, total: int | None, seed: int) -> list[int]:
    """Each expert's valid rows: 0.7..1.3 of `expected`, scaled to sum to `total` when given (the remainder of the
    rounding to the first experts), each at most MAX_M."""
    rng = random.Random(seed)
    counts = [int(expected * rng.uniform(0.7, 1.3)) for _ in range(groups)]
    if total is not None:
        counts = [int(total * c / sum(counts)) for c in counts]
        for g in range(total - sum(counts)):
            counts[g % groups] += 1
    return [min(c, MAX_M) for c in counts]


def masked_rows_diff(torch, d, counts, reference) -> tuple[float, bool]:
    """Each expert's first (up to) 64 rows of d [G, m, n] against reference(g, rows), the product they should hold:
    the worst calc_diff, and whether every one of the experts' counts[g] rows is finite (experts without rows are
    passed over)."""
    worst, finite = 0.0, True
    for g, count in enumerate(counts):
        if count == 0:
            continue
        finite = finite and bool(torch.isfinite(d[g, :count]).all())
        check = min(count, 64)
        worst = max(worst, calc_diff(d[g, :check], reference(g, check)))  # the reference freed before the next
    return worst, finite


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_timing_arguments(parser)
    args = parser.parse_args()
    args.reps = max(args.reps, 30)

    bench = start_gpu_bench("fp8_gemm_masked_bench", args, len(SHAPES))
    if bench is None:
        return 77
    torch, F, kiln, device, props = bench.torch, bench.F, bench.kiln, bench.device, bench.props
    scaling, blockwise_missing, timed_us = bench.scaling, bench.blockwise_missing, bench.timed_us
    on_h200 = "H200" in props.name

    rows, failures = [], 0
    for index, (groups, expected, total, n, k, deepgemm_us) in enumerate(SHAPES):
        counts = expert_counts(groups, expected, total, seed=index)
        valid = sum(counts)
        kb = (k + 127) // 128
        torch.manual_seed(index)
        a_fp8 = torch.empty(groups, MAX_M, k, device=device, dtype=torch.float8_e4m3fn)
        sfa_rows = torch.empty(groups, MAX_M, kb, device=device, dtype=torch.float32)
        for g in range(groups):  # one expert at a time: the bf16 source of all of A would be 2 GB
            a_fp8[g], sfa_rows[g] = kiln.per_token_cast_to_fp8(
                torch.randn(MAX_M, k, device=device, dtype=torch.bfloat16))
        sfa = kiln.get_mn_major_tma_aligned_tensor(sfa_rows)  # the grouped MN-major layout, made once
        del sfa_rows
        b_fp8, sfb = expert_weights(torch, kiln, groups, n, k, device)
        masked_m = torch.tensor(counts, dtype=torch.int32, device=device)
        d = torch.empty(groups, MAX_M, n, device=device, dtype=torch.bfloat16)
        row = {"groups": groups, "max_m": MAX_M, "expected_m": expected, "valid_rows": valid, "n": n, "k": k,
               "masked_m": counts}
        if on_h200 and deepgemm_us:
            row["deepgemm_us"] = deepgemm_us
        try:
            d.fill_(float("nan"))
            kiln.m_grouped_fp8_gemm_nt_masked((a_fp8, sfa), (b_fp8, sfb), d, masked_m, expected)
            torch.cuda.synchronize()
            worst, finite = masked_rows_diff(
                torch, d, counts, lambda g, rows: dequantised_product(a_fp8[g, :rows], sfa[g, :rows], b_fp8[g], sfb[g]))
            row["diff_reference"] = worst
            row["verified"] = finite and worst < MAX_DIFF
        except Exception as e:  # noqa: BLE001 - reported, counted as a failure
            row["error"] = f"{type(e).__name__}: {e}"
            row["verified"] = False
        failures += 0 if row["verified"] else 1

        # cuBLAS refuses row counts that are not multiples of 16 (CUBLAS_STATUS_NOT_SUPPORTED on the H100, torch
        # 2.11): it computes each expert's rows rounded up to 16 (at most 15 more, the rest of its block of A). It takes
        # the A scales MN-major with strides (1, rows): copies made once, outside the timing.
        padded = [min(-(-count // 16) * 16, MAX_M) for count in counts]
        expert_sfa = [sfa[g, :count].t().contiguous().t() for g, count in enumerate(padded)]

        def cublas_per_expert():
            for g, count in enumerate(padded):
                if count:
                    d[g, :count] = F.scaled_mm(a_fp8[g, :count], b_fp8[g].T, scale_a=expert_sfa[g],
                                               scale_recipe_a=scaling.BlockWise1x128, scale_b=sfb[g].T,
                                               scale_recipe_b=scaling.BlockWise128x128, output_dtype=torch.bfloat16)

        # The dense peer's A: as many rows as the valid ones, cast afresh (they are not one block of a_fp8).
        a_dense, sfa_dense = kiln.per_token_cast_to_fp8(torch.randn(valid, k, device=device, dtype=torch.bfloat16))
        d_dense = torch.empty(valid, n, device=device, dtype=torch.bfloat16)
        calls = {"kiln": lambda: kiln.m_grouped_fp8_gemm_nt_masked((a_fp8, sfa), (b_fp8, sfb), d, masked_m, expected),
                 "kiln_dense": lambda: kiln.fp8_gemm_nt((a_dense, sfa_dense), (b_fp8[0], sfb[0]), d_dense)}
        if blockwise_missing is None:
            calls["cublas_bw"] = cublas_per_expert
        flops = 2.0 * valid * n * k
        nbytes = groups * n * k + valid * k + 2.0 * valid * n + 4.0 * (valid * kb + sfb.numel())
        for peer, call in calls.items():
            if peer != "kiln" or "error" not in row:
                time_into(row, peer, timed_us, call, flops, nbytes)
        for peer in ("cublas_bw", "kiln_dense", "deepgemm"):
            if row.get("kiln_us") and row.get(f"{peer}_us"):
                row[f"speedup_vs_{peer}"] = row[f"{peer}_us"] / row["kiln_us"]
        rows.append(row)
        nan = float("nan")
        print(f"{groups} experts x {expected} expected ({valid} valid, {min(counts)}..{max(counts)}) x {n} x {k}: "
              f"kiln {row.get('kiln_us', nan):8.1f} us {row.get('kiln_tflops', nan):5.0f} TFLOPS "
              f"{row.get('kiln_gbps', nan):5.0f} GB/s  dense {row.get('kiln_dense_us', nan):8.1f} us  cuBLAS bw per "
              f"expert {row.get('cublas_bw_us', nan):8.1f} us  DeepGEMM {row.get('deepgemm_us', nan):7.1f} us  diff "
              f"{row.get('diff_reference', nan):.1e}{'' if row['verified'] else '  NOT VERIFIED'}", flush=True)
        del a_fp8, sfa, b_fp8, sfb, d, masked_m, expert_sfa, a_dense, sfa_dense, d_dense
        torch.cuda.empty_cache()

    summary = {peer: geomean([r.get(f"speedup_vs_{peer}") for r in rows]) for peer in ("cublas_bw", "deepgemm")}
    if summary["cublas_bw"]:
        print(f"RESULT fp8_gemm_masked kiln vs cublas_bw: {summary['cublas_bw']:.3f}x (geometric mean over "
              f"{len(rows)} shapes)")
    write_report("fp8_gemm_masked_bench", args.out, props, torch, kiln, args.reps, blockwise_missing, rows, summary,
                 failures)
    print("| experts x expected M | valid rows | n x k | kiln µs | TFLOPS | GB/s | kiln dense µs | cuBLAS bw per "
          "expert µs | x cuBLAS | DeepGEMM µs | x DeepGEMM |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        nan = float("nan")
        cb, dg = r.get("speedup_vs_cublas_bw"), r.get("speedup_vs_deepgemm")
        print(f"| {r['groups']} x {r['expected_m']} | {r['valid_rows']} | {r['n']} x {r['k']} | "
              f"{r.get('kiln_us', nan):.1f} | {r.get('kiln_tflops', nan):.0f} | {r.get('kiln_gbps', nan):.0f} | "
              f"{r.get('kiln_dense_us', nan):.1f} | {r.get('cublas_bw_us', nan):.1f} | {f'{cb:.2f}' if cb else 'n/a'} "
              f"| {r.get('deepgemm_us', nan):.1f} | {f'{dg:.2f}' if dg else 'n/a'} |")
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
