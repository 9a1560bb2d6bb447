"""Forced tiles of the BF16 k-grouped weight-gradient GEMM (kiln.k_grouped_bf16_gemm_tn_contiguous) against the plan's,
on bf16_gemm_bench.py's --k-grouped shapes (c=None), each tile timed with that benchmark's flushed medians in one run,
cuBLAS per expert (torch.mm into a float32 D) beside them. Which tile the plan should offer the k-grouped form: its
float32 staging tile leaves 128x192 three stages, and the first run (H100, 2026-12-07) had the form at 0.88-0.99x of
cuBLAS. Prints one line per (shape, tile); run with the package on PYTHONPATH:
  python3 bench/probes/k_grouped_tiles.py
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import kiln  # noqa: E402
from bf16_gemm_bench import K_GROUPED_SHAPES, k_grouped_token_counts  # noqa: E402
from flushed_timing import flushed_median_us  # noqa: E402

# (block_m, block_n, stages; 0: as many as fit beside a whole staging tile; more: the staging tile in passes)
TILES = [(0, 0, 0), (128, 128, 0), (128, 192, 0), (128, 192, 4), (128, 256, 3), (128, 256, 4), (256, 128, 0),
         (256, 128, 3), (256, 128, 4), (256, 64, 0), (64, 256, 0), (128, 64, 0)]


def main() -> int:
    device = torch.device("cuda")
    flush = torch.empty(1 << 30, dtype=torch.uint8, device=device)
    timed = lambda call: flushed_median_us(call, flush, reps=20, warmup=3, idle_s=0.2)  # noqa: E731
    print(f"k_grouped_tiles: {torch.cuda.get_device_name()}, kiln {kiln.version()}")
    for index, (weight, m, n, groups, tokens) in enumerate(K_GROUPED_SHAPES):
        ks = k_grouped_token_counts(groups, tokens, seed=index)
        firsts = [sum(ks[:g]) for g in range(groups)]
        torch.manual_seed(index)
        a = torch.randn(tokens, m, device=device, dtype=torch.bfloat16)
        b = torch.randn(tokens, n, device=device, dtype=torch.bfloat16)
        d = torch.empty(groups, m, n, device=device)
        reference = torch.empty_like(d)

        def cublas():
            for g, (first, k) in enumerate(zip(firsts, ks)):
                torch.mm(a[first:first + k].T, b[first:first + k], out_dtype=torch.float32, out=reference[g])

        cublas()
        peer = timed(cublas)
        flops = 2.0 * m * n * tokens
        for block_m, block_n, stages in TILES:
            try:
                kiln.set_bf16_gemm_overrides(block_m=block_m, block_n=block_n, stages=stages)
                call = lambda: kiln.k_grouped_bf16_gemm_tn_contiguous(a, b, d, ks)  # noqa: E731
                d.fill_(float("nan"))
                call()
                torch.cuda.synchronize()
                ok = bool(torch.isfinite(d).all()) and float((d - reference).abs().max()) < 1e-2 * float(
                    reference.abs().max())
                us = timed(call)
                tile = f"{block_m}x{block_n} s{stages}" if block_m else "plan"
                print(f"{m} x {n} {weight} {groups} experts: {tile:>14}: {us:8.1f} us {flops / us / 1e6:6.0f} TFLOPS "
                      f"x cuBLAS {peer / us:.3f} (cuBLAS {peer:.1f} us){'' if ok else ' WRONG'}", flush=True)
            except Exception as e:  # noqa: BLE001 - a tile that does not fit is reported, not fatal
                print(f"{m} x {n} {weight} {groups} experts: {block_m}x{block_n} s{stages}: {type(e).__name__}: {e}")
            finally:
                kiln.set_bf16_gemm_overrides()
        del a, b, d, reference
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
