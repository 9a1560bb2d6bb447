#!/usr/bin/env python3
"""MoE weight gradients from Python: kiln.k_grouped_fp8_gemm_nt_contiguous against cuBLAS through torch, per group.

DeepSeek-V3's routed experts (hidden 7168, expert intermediate 2048): the fused gate/up weight's gradient D[g] of
[4096, 7168] and the down weight's of [7168, 2048], for G local experts whose token counts (multiples of 128, one of
them 0 where the draw gives it) sum to T, drawn once per shape from a fixed seed with a skew like a router's:

  kiln             kiln.k_grouped_fp8_gemm_nt_contiguous(a, b, d, ks, ks_tensor, c=d): D[g] += A_g . B_g^T, one call
  cuBLAS bw + add  per group d[g].add_(torch.nn.functional.scaled_mm(A_g, B_g^T, BlockWise1x128 both, fp32 out)):
                   the same recipe and operation, one GEMM and one add per group

Timing as bench/fp8_gemm_bench.py: the L2 flushed by a 1 GB write before every call, CUDA events, the median of --reps
(>= 30) after --warmup calls, each measurement after --idle-ms of idle GPU. TFLOPS = 2 m n sum(ks) / t. Every kiln
result is verified first: each group's D against the float64 C + dequant(A_g) . dequant(B_g)^T, calc_diff < 1e-5.

Writes fp8_gemm_k_grouped_bench.json to --out (default $OUT; nothing when neither is set); prints a line per shape,
a RESULT line (geometric mean), one PASS/FAIL line and a table. Exit 0 when every result verified, 1 otherwise, 77
without a GPU.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

# (name, m, n, groups, tokens): the weight's gradient shape, local experts, routed tokens in all.
SHAPES = [("gate/up", 4096, 7168, 8, 32768), ("down", 7168, 2048, 8, 32768),
          ("gate/up", 4096, 7168, 32, 32768), ("down", 7168, 2048, 32, 32768),
          ("gate/up", 4096, 7168, 32, 8192), ("down", 7168, 2048, 32, 8192)]  # 256 tokens an expert on average
sys.path.insert(0, str(Path(__file__).resolve().parent))
from fp8_gemm_bench import (MAX_DIFF, add_timing_arguments, calc_diff, dequantised_product,  # noqa: E402
                            geomean, split_in_blocks, start_gpu_bench, time_into)
from fp8_gemm_wgrad_bench import write_report  # noqa: E402 - the dense weight-gradient benchmark, beside this


def token_counts(groups: int, tokens: int, seed: int) -> list[int]:
    """A router-like skewed split of `tokens` into `groups` multiples of 128 (exactly summing to it)."""
    import random
    rng = random.Random(seed)
    return split_in_blocks(tokens, [rng.paretovariate(1.5) for _ in range(groups)])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_timing_arguments(parser)
    args = parser.parse_args()
    args.reps = max(args.reps, 30)

    bench = start_gpu_bench("fp8_gemm_k_grouped_bench", args, len(SHAPES))
    if bench is None:
        return 77
    torch, F, kiln, device, props = bench.torch, bench.F, bench.kiln, bench.device, bench.props
    scaling, blockwise_missing, timed_us = bench.scaling, bench.blockwise_missing, bench.timed_us

    rows, failures = [], 0
    for index, (name, m, n, groups, tokens) in enumerate(SHAPES):
        ks = token_counts(groups, tokens, seed=index)
        torch.manual_seed(index)
        total_kb = tokens // 128
        buffers = {r: torch.empty(total_kb, kiln.get_tma_aligned_size(r, 4), device=device) for r in (m, n)}
        flat = {"a": [], "b": []}
        scales = {"a": buffers[m].T[:m], "b": buffers[n].T[:n]}  # MN-major, TMA-aligned over all groups
        kb0 = 0
        for k in ks:
            for op, r in (("a", m), ("b", n)):
                if k:
                    x_fp8, sf = kiln.per_token_cast_to_fp8(torch.randn(r, k, device=device, dtype=torch.bfloat16))
                    scales[op][:, kb0 : kb0 + k // 128] = sf
                    flat[op].append(x_fp8.reshape(-1))
            kb0 += k // 128
        a = (torch.cat(flat["a"]), scales["a"])
        b = (torch.cat(flat["b"]), scales["b"])
        per_group = []  # (a_fp8, sfa, b_fp8, sfb) views of each group, for the peer and the check; None if empty
        kb0, start_a, start_b = 0, 0, 0
        for k in ks:
            if k:
                per_group.append((a[0][start_a : start_a + m * k].view(m, k), a[1][:, kb0 : kb0 + k // 128],
                                  b[0][start_b : start_b + n * k].view(n, k), b[1][:, kb0 : kb0 + k // 128]))
            else:
                per_group.append(None)
            kb0, start_a, start_b = kb0 + k // 128, start_a + m * k, start_b + n * k
        ks_tensor = torch.tensor(ks, dtype=torch.int32, device=device)
        c = torch.randn(groups, m, n, device=device, dtype=torch.float32)
        d = c.clone()
        row = {"weight": name, "m": m, "n": n, "groups": groups, "tokens": tokens, "ks": ks}
        try:
            kiln.k_grouped_fp8_gemm_nt_contiguous(a, b, d, ks, ks_tensor, c=d)
            torch.cuda.synchronize()
            worst = 0.0
            for g, views in enumerate(per_group):
                if views is None:
                    worst = max(worst, 0.0 if torch.equal(d[g], c[g]) else 1.0)
                    continue
                a_g, sfa_g, b_g, sfb_g = views
                reference = c[g].double() + dequantised_product(a_g, sfa_g, b_g, sfb_g, b_rows_per_scale=1)
                worst = max(worst, calc_diff(d[g], reference))
                del reference
            row["diff_reference"] = worst
            row["verified"] = bool(torch.isfinite(d).all()) and worst < MAX_DIFF
        except Exception as e:  # noqa: BLE001 - reported, counted as a failure
            row["error"] = f"{type(e).__name__}: {e}"
            row["verified"] = False
        failures += 0 if row["verified"] else 1

        def cublas_per_group():
            for g, views in enumerate(per_group):
                if views is not None:
                    a_g, sfa_g, b_g, sfb_g = views
                    d[g].add_(F.scaled_mm(a_g, b_g.T, scale_a=sfa_g, scale_recipe_a=scaling.BlockWise1x128,
                                          scale_b=sfb_g, scale_recipe_b=scaling.BlockWise1x128,
                                          output_dtype=torch.float32))

        calls = {"kiln": lambda: kiln.k_grouped_fp8_gemm_nt_contiguous(a, b, d, ks, ks_tensor, c=d)}
        if blockwise_missing is None:
            calls["cublas_bw_add"] = cublas_per_group
        flops = 2.0 * m * n * tokens
        for peer, call in calls.items():
            if peer != "kiln" or "error" not in row:
                time_into(row, peer, timed_us, call, flops)
        if row.get("kiln_us") and row.get("cublas_bw_add_us"):
            row["speedup_vs_cublas_bw_add"] = row["cublas_bw_add_us"] / row["kiln_us"]
        rows.append(row)
        nan = float("nan")
        print(f"{name:>8} {m:>5} x {n:>5}, {groups:>2} groups, {tokens} tokens (ks {min(ks)}..{max(ks)}): kiln "
              f"{row.get('kiln_us', nan):8.1f} us {row.get('kiln_tflops', nan):5.0f} TFLOPS  cuBLAS bw+add per group "
              f"{row.get('cublas_bw_add_us', nan):8.1f} us  diff {row.get('diff_reference', nan):.1e}"
              f"{'' if row['verified'] else '  NOT VERIFIED'}", flush=True)
        del a, b, c, d, per_group, flat, scales, buffers
        torch.cuda.empty_cache()

    summary = {"cublas_bw_add": geomean([r.get("speedup_vs_cublas_bw_add") for r in rows])}
    if summary["cublas_bw_add"]:
        print(f"RESULT fp8_gemm_k_grouped kiln vs cublas_bw_add: {summary['cublas_bw_add']:.3f}x (geometric mean over "
              f"{len(rows)} shapes)")
    write_report("fp8_gemm_k_grouped_bench", args.out, props, torch, kiln, args.reps, blockwise_missing, rows,
                 summary, failures)
    print("| weight | m x n | groups | tokens | kiln µs | TFLOPS | cuBLAS bw + add per group µs | x cuBLAS |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        v = r.get("speedup_vs_cublas_bw_add")
        nan = float("nan")
        print(f"| {r['weight']} | {r['m']} x {r['n']} | {r['groups']} | {r['tokens']} | {r.get('kiln_us', nan):.1f} | "
              f"{r.get('kiln_tflops', nan):.0f} | {r.get('cublas_bw_add_us', nan):.1f} | {f'{v:.2f}' if v else 'n/a'} |")
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
