#!/usr/bin/env python3
"""MoE expert GEMMs from Python: kiln.m_grouped_fp8_gemm_nt_contiguous against cuBLAS through torch, per expert.

The peers file's m-grouped contiguous shapes (shared/bench/peers-h200.md: DeepGEMM on the H200): G experts whose
rows (multiples of 128, drawn once per shape from a fixed seed, 0.7..1.3 of the expected count, summing to the file's
row count) lie one after the other in A, each expert with its own B [n, k] cast per 128x128 block:

  kiln             kiln.m_grouped_fp8_gemm_nt_contiguous(a, b, d, m_indices): one call
  kiln dense       kiln.fp8_gemm_nt over all the experts' rows with one expert's B: the same work with one B
  cuBLAS bw        per expert torch.nn.functional.scaled_mm(A_g, B_g^T, BlockWise1x128 / BlockWise128x128, bf16 out)
                   into its rows of D: the same recipe, one GEMM per expert

Timing as bench/fp8_gemm_bench.py: the L2 flushed by a 1 GB write before every call, CUDA events, the median of --reps
(>= 30) after --warmup calls, each measurement after --idle-ms of idle GPU. TFLOPS = 2 m n k / t over the experts' m
rows (padding included, as the peers file counts them; the padding-only blocks of the third shape not). Every kiln
result is verified first: 64 rows of each expert against the float64 product of the dequantised inputs, calc_diff <
1e-5. DeepGEMM's figure is shown on an H200 only (the card it was measured on).

Writes fp8_gemm_m_grouped_bench.json to --out (default $OUT; nothing when neither is set); prints a line per shape, a
RESULT line (geometric mean against cuBLAS), one PASS/FAIL line and a table. Exit 0 when every result verified, 1
otherwise, 77 without a GPU.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

# (experts, rows in all, n, k, DeepGEMM µs on the H200 from the peers file, rows of padding only after them): the
# peers file's two shapes, and the second again in a buffer twice its size, the rest padding (-1), as a serving
# engine's fixed-size buffer leaves it (kiln computes such blocks for now: the row measures what they cost).
SHAPES = [(4, 34304, 6144, 7168, 2115.0, 0), (8, 34048, 4096, 2048, 434.0, 0), (8, 34048, 4096, 2048, None, 34048)]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from fp8_gemm_bench import (MAX_DIFF, add_timing_arguments, calc_diff, dequantised_product,  # noqa: E402
                            geomean, split_in_blocks, start_gpu_bench, time_into)
from fp8_gemm_wgrad_bench import write_report  # noqa: E402 - the dense weight-gradient benchmark, beside this


def expert_rows(groups: int, rows: int, seed: int) -> list[int]:
    """`groups` multiples of 128 between about 0.7 and 1.3 of rows / groups, summing to `rows` (a multiple of 128)."""
    rng = random.Random(seed)
    return split_in_blocks(rows, [rng.uniform(0.7, 1.3) for _ in range(groups)])


def expert_weights(torch, kiln, groups: int, n: int, k: int, device):
    """`groups` experts' random B [n, k], each cast per 128 x 128 block: (b_fp8 [G, n, k], sfb [G, ceil(n/128),
    ceil(k/128)] contiguous), as the m-grouped GEMMs take them."""
    casts = [kiln.per_block_cast_to_fp8(torch.randn(n, k, device=device, dtype=torch.bfloat16)) for _ in range(groups)]
    return torch.stack([x for x, _ in casts]), torch.stack([s for _, s in casts]).contiguous()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_timing_arguments(parser)
    args = parser.parse_args()
    args.reps = max(args.reps, 30)

    bench = start_gpu_bench("fp8_gemm_m_grouped_bench", args, len(SHAPES))
    if bench is None:
        return 77
    torch, F, kiln, device, props = bench.torch, bench.F, bench.kiln, bench.device, bench.props
    scaling, blockwise_missing, timed_us = bench.scaling, bench.blockwise_missing, bench.timed_us
    on_h200 = "H200" in props.name

    rows, failures = [], 0
    for index, (groups, m, n, k, deepgemm_us, tail) in enumerate(SHAPES):
        sizes = expert_rows(groups, m, seed=min(index, 1))  # the padded repeat of shape 1 has its rows
        torch.manual_seed(index)
        a_fp8, sfa = kiln.per_token_cast_to_fp8(torch.randn(m + tail, k, device=device, dtype=torch.bfloat16))
        b_fp8, sfb = expert_weights(torch, kiln, groups, n, k, device)
        indices = torch.full((m + tail,), -1, dtype=torch.int32, device=device)
        firsts, first = [], 0
        for g, size in enumerate(sizes):
            indices[first:first + size] = g
            firsts.append(first)
            first += size
        d = torch.empty(m + tail, n, device=device, dtype=torch.bfloat16)
        row = {"groups": groups, "m": m, "n": n, "k": k, "rows": sizes, "padding_rows": tail}
        if on_h200 and deepgemm_us:
            row["deepgemm_us"] = deepgemm_us
        try:
            d.fill_(float("nan"))
            kiln.m_grouped_fp8_gemm_nt_contiguous((a_fp8, sfa), (b_fp8, sfb), d, indices)
            torch.cuda.synchronize()
            worst = 0.0
            for g, (first, size) in enumerate(zip(firsts, sizes)):
                rows_g = slice(first, first + min(size, 64))
                reference = dequantised_product(a_fp8[rows_g], sfa[rows_g], b_fp8[g], sfb[g])
                worst = max(worst, calc_diff(d[rows_g], reference))
                del reference
            row["diff_reference"] = worst
            row["verified"] = bool(torch.isfinite(d[:m]).all()) and worst < MAX_DIFF  # padding-only blocks: not written
        except Exception as e:  # noqa: BLE001 - reported, counted as a failure
            row["error"] = f"{type(e).__name__}: {e}"
            row["verified"] = False
        failures += 0 if row["verified"] else 1

        # cuBLAS takes each expert's A scales MN-major with strides (1, rows): copies made once, outside the timing.
        expert_sfa = [sfa[first:first + size].t().contiguous().t() for first, size in zip(firsts, sizes)]

        def cublas_per_expert():
            for g, (first, size) in enumerate(zip(firsts, sizes)):
                rows_g = slice(first, first + size)
                d[rows_g] = F.scaled_mm(a_fp8[rows_g], b_fp8[g].T, scale_a=expert_sfa[g],
                                        scale_recipe_a=scaling.BlockWise1x128, scale_b=sfb[g].T,
                                        scale_recipe_b=scaling.BlockWise128x128, output_dtype=torch.bfloat16)

        calls = {"kiln": lambda: kiln.m_grouped_fp8_gemm_nt_contiguous((a_fp8, sfa), (b_fp8, sfb), d, indices),
                 "kiln_dense": lambda: kiln.fp8_gemm_nt((a_fp8[:m], sfa[:m]), (b_fp8[0], sfb[0]), d[:m])}
        if blockwise_missing is None:
            calls["cublas_bw"] = cublas_per_expert
        flops = 2.0 * m * n * k
        for peer, call in calls.items():
            if peer != "kiln" or "error" not in row:
                time_into(row, peer, timed_us, call, flops)
        for peer in ("cublas_bw", "kiln_dense", "deepgemm"):
            if row.get("kiln_us") and row.get(f"{peer}_us"):
                row[f"speedup_vs_{peer}"] = row[f"{peer}_us"] / row["kiln_us"]
        rows.append(row)
        nan = float("nan")
        padded = f" + {tail} padding" if tail else ""
        print(f"{groups} experts, {m} rows{padded} ({min(sizes)}..{max(sizes)}) x {n} x {k}: kiln "
              f"{row.get('kiln_us', nan):8.1f} us {row.get('kiln_tflops', nan):5.0f} TFLOPS  dense "
              f"{row.get('kiln_dense_us', nan):8.1f} us  cuBLAS bw per expert {row.get('cublas_bw_us', nan):8.1f} us  "
              f"DeepGEMM {row.get('deepgemm_us', nan):7.1f} us  diff {row.get('diff_reference', nan):.1e}"
              f"{'' if row['verified'] else '  NOT VERIFIED'}", flush=True)
        del a_fp8, sfa, b_fp8, sfb, d, indices, expert_sfa
        torch.cuda.empty_cache()

    summary = {peer: geomean([r.get(f"speedup_vs_{peer}") for r in rows]) for peer in ("cublas_bw", "deepgemm")}
    if summary["cublas_bw"]:
        print(f"RESULT fp8_gemm_m_grouped kiln vs cublas_bw: {summary['cublas_bw']:.3f}x (geometric mean over "
              f"{len(rows)} shapes)")
    write_report("fp8_gemm_m_grouped_bench", args.out, props, torch, kiln, args.reps, blockwise_missing, rows,
                 summary, failures)
    print("| experts | rows | n x k | kiln µs | TFLOPS | kiln dense µs | cuBLAS bw per expert µs | x cuBLAS | "
          "DeepGEMM µs | x DeepGEMM |")
    print("|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        nan = float("nan")
        cb, dg = r.get("speedup_vs_cublas_bw"), r.get("speedup_vs_deepgemm")
        rows_text = f"{r['m']} + {r['padding_rows']} padding" if r["padding_rows"] else str(r["m"])
        print(f"| {r['groups']} | {rows_text} | {r['n']} x {r['k']} | {r.get('kiln_us', nan):.1f} | "
              f"{r.get('kiln_tflops', nan):.0f} | {r.get('kiln_dense_us', nan):.1f} | {r.get('cublas_bw_us', nan):.1f} "
              f"| {f'{cb:.2f}' if cb else 'n/a'} | {r.get('deepgemm_us', nan):.1f} | {f'{dg:.2f}' if dg else 'n/a'} |")
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
