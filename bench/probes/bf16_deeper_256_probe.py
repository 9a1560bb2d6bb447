"""The calls the BF16 plan moved by giving 128x256 tiles with a bfloat16 D four stages (their epilogue in two store
passes) in place of the three beside a whole staging tile (fifty-eighth session). The sweep (BF16_SWEEP=1, H100,
2026-12-07) had the fourth stage 1.7-3.8 % faster at five of its six M = 4096 shapes and level at K = 16384; this
times the calls a sweep does not: random M, N, K where the plan takes 128x256 (mid M too, where a tile's two store
passes are less hidden), nn layouts among them, and the m-grouped benchmark's two shapes.

Each call runs with the plan's kernel and with the same tile (and CTA pairing) forced to 3 stages, in the order
plan, forced, forced, plan, flushed medians of 15 each; both results are checked against torch's product first
(calc_diff < 1e-5). One line per call, then the geometric mean of plan / forced:
  DG_JIT_USE_NVRTC=1 python3 bench/probes/bf16_deeper_256_probe.py [--calls 24] [--seed 58]
"""
import argparse
import math
import os
import random
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import kiln  # noqa: E402
from bf16_gemm_bench import calc_diff, m_grouped_operands  # noqa: E402
from flushed_timing import flushed_median_us  # noqa: E402

GROUPED = [(4, 34304, 6144, 7168), (8, 34048, 4096, 2048)]  # experts, rows, n, k (bf16_gemm_bench's --m-grouped)


def planned_tile(op: str, m: int, n: int, k: int, **extra) -> dict:
    """The plan's kernel for one call: its spec's fields (block_m, block_n, stages, cluster_m, ...) as ints."""
    kernels = kiln.plan(op, n=n, k=k, m=m, **extra)
    assert len(kernels) == 1, kernels
    return {key: int(value) for key, value in (field.split("=") for field in kernels[0]["spec"].split())
            if value.isdigit()}


def random_calls(count: int, seed: int) -> list:
    """(layout, m, n, k) drawn until `count` of them have the plan's 128x256: M log-uniform over 128..16384, N a
    multiple of 256 over 1024..32768, K a multiple of 64 over 256..16384 (log-uniform), one in four nn."""
    rng = random.Random(seed)
    calls, tries = [], 0
    while len(calls) < count and tries < 20000:
        tries += 1
        m = int(round(math.exp(rng.uniform(math.log(128), math.log(16384)))))
        n = 256 * rng.randint(4, 128)
        k = 64 * max(4, int(round(math.exp(rng.uniform(math.log(4), math.log(256))))))
        if 2 * (m * k + n * k + m * n) > (3 << 30):  # operands and D under 3 GB
            continue
        layout = "nn" if rng.random() < 0.25 else "nt"
        tile = planned_tile("bf16_gemm_nt", m, n, k, **({"n_major_b": 1} if layout == "nn" else {}))
        if (tile["block_m"], tile["block_n"]) == (128, 256):
            calls.append((layout, m, n, k))
    return calls


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=24)
    parser.add_argument("--seed", type=int, default=58)
    args = parser.parse_args()
    device = torch.device("cuda")
    flush = torch.empty(1 << 30, dtype=torch.uint8, device=device)
    timed = lambda call: flushed_median_us(call, flush, reps=15, warmup=3, idle_s=0.05)  # noqa: E731
    print(f"bf16_deeper_256_probe: {torch.cuda.get_device_name()}, kiln {kiln.version()}", flush=True)

    cases = []  # (label, call, d, reference, op, m, n, k, extra)
    for layout, m, n, k in random_calls(args.calls, args.seed):
        torch.manual_seed(m * 31 + n * 7 + k)
        a = torch.randn(m, k, device=device, dtype=torch.bfloat16)
        b = torch.randn(n, k, device=device, dtype=torch.bfloat16)
        d = torch.empty(m, n, device=device, dtype=torch.bfloat16)
        if layout == "nn":
            b_kn = b.t().contiguous()
            call = lambda a=a, b_kn=b_kn, d=d: kiln.bf16_gemm_nn(a, b_kn, d)  # noqa: E731
        else:
            call = lambda a=a, b=b, d=d: kiln.bf16_gemm_nt(a, b, d)  # noqa: E731
        rows = min(m, 64)
        reference = a[:rows].double() @ b.double().t()
        extra = {"n_major_b": 1} if layout == "nn" else {}
        cases.append((f"{layout} {m:5d} x {n:5d} x {k:5d}", call, d, reference, rows, m, n, k, extra))
    for index, (groups, m, n, k) in enumerate(GROUPED):
        a, b, indices, firsts, sizes = m_grouped_operands(torch, device, groups, m, n, k, seed=index,
                                                          sizes_seed=min(index, 1))
        d = torch.empty(m, n, device=device, dtype=torch.bfloat16)
        call = lambda a=a, b=b, d=d, indices=indices: kiln.m_grouped_bf16_gemm_nt_contiguous(a, b, d, indices)  # noqa: E731
        rows = min(sizes[0], 64)
        reference = a[:rows].double() @ b[0].double().t()
        cases.append((f"m-grouped {groups} x {m} x {n} x {k}", call, d, reference, rows, m, n, k,
                       {"m_grouped": 1}))

    failures, logs = 0, []
    for label, call, d, reference, rows, m, n, k, extra in cases:
        tile = planned_tile("bf16_gemm_nt", m, n, k, **extra)
        if (tile["block_m"], tile["block_n"]) != (128, 256):
            print(f"{label}: the plan takes {tile['block_m']}x{tile['block_n']}, not 128x256; skipped", flush=True)
            continue
        forced = dict(block_m=128, block_n=256, stages=3, cluster_m=tile.get("cluster_m", 1))
        results = {}
        for name in ("plan", "forced"):
            kiln.set_bf16_gemm_overrides(**(forced if name == "forced" else {}))
            d.fill_(float("nan"))
            call()
            torch.cuda.synchronize()
            diff = calc_diff(d[:rows], reference)
            if not diff < 1e-5:
                failures += 1
                print(f"FAIL {label} {name}: calc_diff {diff}", flush=True)
            results[name] = []
        kiln.set_bf16_gemm_overrides()
        for name in ("plan", "forced", "forced", "plan"):
            kiln.set_bf16_gemm_overrides(**(forced if name == "forced" else {}))
            results[name].append(timed(call))
        kiln.set_bf16_gemm_overrides()
        plan_us, forced_us = (sum(results[name]) / 2 for name in ("plan", "forced"))
        logs.append(math.log(plan_us / forced_us))
        print(f"{label}: plan 128x256 s{tile['stages']} c{forced['cluster_m']} {plan_us:9.1f} us, forced s3 "
              f"{forced_us:9.1f} us, plan / forced {plan_us / forced_us:.3f}", flush=True)
    if logs:
        print(f"RESULT bf16_deeper_256_probe: {len(logs)} calls, geomean plan / forced "
              f"{math.exp(sum(logs) / len(logs)):.4f}, best {math.exp(min(logs)):.3f}, worst {math.exp(max(logs)):.3f}")
    print("PASS" if failures == 0 else f"FAIL {failures} results", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
