"""The BF16 plan at short K (K <= 1024), where its cost model is known to miss: at 4096 x 32768 x 512 a 128x256 CTA
pair with 4 stages ran 9 % ahead of the plan's 128x192 (BF16_SWEEP, H100, fifty-eighth session). This times, on
random nt calls with K in 256..1024, the plan's kernel against a fixed set of forced tiles (128x256 and 128x192,
alone and in CTA pairs, as many stages as the plan would give each), to say whether a short-K rule is worth having
and where its edges lie.

Each forced tile's result is checked against torch's product first (calc_diff < 1e-5). The configurations are
timed in the order given and then in reverse (flushed medians of 15 each); a call's figure for each is the mean of
its two medians over the plan's. One line per call, then each forced tile's geometric mean over the plan and the
geometric mean of the best of all over the plan:
  DG_JIT_USE_NVRTC=1 python3 bench/probes/bf16_short_k_probe.py [--calls 24] [--seed 59]
"""
import argparse
import math
import os
import random
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import kiln  # noqa: E402
from bf16_gemm_bench import calc_diff  # noqa: E402
from flushed_timing import flushed_median_us  # noqa: E402

FORCED = {  # name: overrides (stages 0: as many as the plan gives that tile)
    "128x256c1": dict(block_m=128, block_n=256, cluster_m=1),
    "128x256c2": dict(block_m=128, block_n=256, cluster_m=2),
    "128x192c1": dict(block_m=128, block_n=192, cluster_m=1),
    "128x192c2": dict(block_m=128, block_n=192, cluster_m=2),
}


def planned_label(m: int, n: int, k: int) -> str:
    kernels = kiln.plan("bf16_gemm_nt", n=n, k=k, m=m)
    assert len(kernels) == 1, kernels
    f = dict(field.split("=") for field in kernels[0]["spec"].split() if "=" in field)
    return f"{f['block_m']}x{f['block_n']}c{f.get('cluster_m', '1')}s{f['stages']}"


def random_calls(count: int, seed: int) -> list:
    """(m, n, k): M log-uniform over 512..16384, N a multiple of 128 over 1024..32768 (log-uniform), K a multiple of
    64 over 256..1024; the benchmark's own short-K shape first."""
    rng = random.Random(seed)
    calls = [(4096, 32768, 512)]
    while len(calls) < count:
        m = int(round(math.exp(rng.uniform(math.log(512), math.log(16384)))))
        n = 128 * int(round(math.exp(rng.uniform(math.log(8), math.log(256)))))
        k = 64 * rng.randint(4, 16)
        calls.append((m, n, k))
    return calls


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=24)
    parser.add_argument("--seed", type=int, default=59)
    args = parser.parse_args()
    device = torch.device("cuda")
    flush = torch.empty(1 << 30, dtype=torch.uint8, device=device)
    timed = lambda call: flushed_median_us(call, flush, reps=15, warmup=3, idle_s=0.05)  # noqa: E731
    print(f"bf16_short_k_probe: {torch.cuda.get_device_name()}, kiln {kiln.version()}", flush=True)

    names = ["plan"] + list(FORCED)
    failures, logs, best_logs = 0, {name: [] for name in FORCED}, []
    for m, n, k in random_calls(args.calls, args.seed):
        torch.manual_seed(m * 31 + n * 7 + k)
        a = torch.randn(m, k, device=device, dtype=torch.bfloat16)
        b = torch.randn(n, k, device=device, dtype=torch.bfloat16)
        d = torch.empty(m, n, device=device, dtype=torch.bfloat16)
        call = lambda a=a, b=b, d=d: kiln.bf16_gemm_nt(a, b, d)  # noqa: E731
        rows = min(m, 64)
        reference = a[:rows].double() @ b.double().t()
        for name in names:
            kiln.set_bf16_gemm_overrides(**FORCED.get(name, {}))
            d.fill_(float("nan"))
            call()
            torch.cuda.synchronize()
            diff = calc_diff(d[:rows], reference)
            if not diff < 1e-5:
                failures += 1
                print(f"FAIL {m} x {n} x {k} {name}: calc_diff {diff}", flush=True)
        times = {name: [] for name in names}
        for name in names + names[::-1]:
            kiln.set_bf16_gemm_overrides(**FORCED.get(name, {}))
            times[name].append(timed(call))
        kiln.set_bf16_gemm_overrides()
        us = {name: sum(values) / len(values) for name, values in times.items()}
        for name in FORCED:
            logs[name].append(math.log(us[name] / us["plan"]))
        fastest = min(us, key=us.get)
        best_logs.append(math.log(us[fastest] / us["plan"]))
        ratios = " ".join(f"{name} {us[name] / us['plan']:.3f}" for name in FORCED)
        print(f"{m:5d} x {n:5d} x {k:4d}: plan {planned_label(m, n, k)} {us['plan']:8.1f} us; {ratios}; "
              f"fastest {fastest}", flush=True)
        del a, b, d, reference
    for name in FORCED:
        values = logs[name]
        print(f"RESULT bf16_short_k_probe {name}: geomean / plan {math.exp(sum(values) / len(values)):.4f}, "
              f"best {math.exp(min(values)):.3f}, worst {math.exp(max(values)):.3f}")
    print(f"RESULT bf16_short_k_probe best-of-all: geomean / plan {math.exp(sum(best_logs) / len(best_logs)):.4f}")
    print("PASS" if failures == 0 else f"FAIL {failures} results", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
