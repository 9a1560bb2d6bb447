"""Probe (not part of the library): where the m-grouped BF16 GEMM's timing-to-timing spread at 4 experts x 34304 rows x
6144 x 7168 comes from. On an H100 both layouts swung between 3760 and 4260 us from one timing to the next (fifty-sixth
session, nn_layout_probe.py --alternate) while their medians were level. At about 780 TFLOPS of bf16 work the card is
near its power limit, so the question is whether a timing's time follows the SM clock the card ran it at.

For kiln's m_grouped_bf16_gemm_nt_contiguous and for cuBLAS per expert (torch.mm into each expert's rows of D, the loop
as one unit, the benchmark's peer), at that shape and at 8 x 34048 x 4096 x 2048 (which did not swing):
  * `timings`: 12 timings as the benchmarks take them (flushed_median_us: 0.2 s idle, 3 warm-up calls, the median of
    20 flushed calls), each with the mean SM clock and board power nvidia-smi sampled (every 20 ms) while it ran;
  * `steady`: 3 s of flushed calls back to back, in windows of 8 calls: each window's median time against its clock.
Prints each timing, then per (shape, call) the spread of the times and of the clocks, and the correlation of time with
1 / clock over the timings and over the windows: near 1 when the clock explains the spread.
    PYTHONPATH=<kiln package> python3 bench/probes/grouped_spread_probe.py
"""
import datetime
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import kiln  # noqa: E402
from bf16_gemm_bench import calc_diff, m_grouped_operands  # noqa: E402
from flushed_timing import flushed_median_us, flushed_times_us  # noqa: E402

SHAPES = [(4, 34304, 6144, 7168), (8, 34048, 4096, 2048)]  # experts, rows, n, k (bf16_gemm_bench's --m-grouped)
QUERY = "timestamp,clocks.sm,power.draw.instant,clocks_event_reasons.sw_power_cap"


class Sampler:
    """nvidia-smi sampling in the background; samples(t0, t1) are those taken between two time.time() instants."""

    def __enter__(self):
        self.log = tempfile.NamedTemporaryFile("w+", suffix=".csv")
        self.smi = subprocess.Popen(["nvidia-smi", f"--query-gpu={QUERY}", "--format=csv,noheader,nounits",
                                     "-lms", "20"], stdout=self.log)
        time.sleep(0.5)
        return self

    def __exit__(self, *exc):
        self.smi.terminate()
        self.smi.wait()
        self.log.seek(0)
        self.rows = []
        for line in self.log.read().strip().splitlines():
            fields = [f.strip() for f in line.split(",")]
            try:
                stamp = datetime.datetime.strptime(fields[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
                self.rows.append((stamp, float(fields[1]), float(fields[2]), fields[3]))
            except (ValueError, IndexError):
                continue
        self.log.close()

    def mean(self, t0, t1):
        """(mean SM clock MHz, mean power W, throttled fraction, samples) between t0 and t1; NaNs when none."""
        inside = [r for r in self.rows if t0 <= r[0] <= t1]
        if not inside:
            return float("nan"), float("nan"), float("nan"), 0
        return (statistics.fmean(r[1] for r in inside), statistics.fmean(r[2] for r in inside),
                sum(r[3] == "Active" for r in inside) / len(inside), len(inside))


def correlation(xs, ys):
    pairs = [(x, y) for x, y in zip(xs, ys) if x == x and y == y]
    if len(pairs) < 3:
        return float("nan")
    mx, my = statistics.fmean(p[0] for p in pairs), statistics.fmean(p[1] for p in pairs)
    sxy = sum((x - mx) * (y - my) for x, y in pairs)
    sxx = sum((x - mx) ** 2 for x, _ in pairs)
    syy = sum((y - my) ** 2 for _, y in pairs)
    return sxy / (sxx * syy) ** 0.5 if sxx > 0 and syy > 0 else float("nan")


def steady_windows(call, flush, seconds, window=8):
    """(median us, t0, t1) per window of `window` flushed calls, run back to back for `seconds`."""
    out = []
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        t0 = time.time()
        out.append((statistics.median(flushed_times_us(call, flush, window)), t0, time.time()))
    return out


def mean_of(values):
    v = [x for x in values if x == x]
    return statistics.fmean(v) if v else float("nan")


def spread(values):
    v = sorted(x for x in values if x == x)
    return f"{v[0]:.0f}-{v[-1]:.0f} (median {statistics.median(v):.0f}, max/min {v[-1] / v[0]:.3f})" if v else "-"


def main() -> int:
    device = torch.device("cuda")
    flush = torch.empty(1 << 30, dtype=torch.uint8, device=device)
    print(f"grouped_spread_probe: {torch.cuda.get_device_name()}, kiln {kiln.version()}", flush=True)
    failures = 0
    summary = []
    for index, (groups, m, n, k) in enumerate(SHAPES):
        a, b, indices, firsts, sizes = m_grouped_operands(torch, device, groups, m, n, k, seed=index,
                                                          sizes_seed=min(index, 1))
        d = torch.empty(m, n, device=device, dtype=torch.bfloat16)

        def cublas_per_expert():
            for g, (first, size) in enumerate(zip(firsts, sizes)):
                torch.mm(a[first:first + size], b[g].T, out=d[first:first + size])

        calls = {"kiln": lambda: kiln.m_grouped_bf16_gemm_nt_contiguous(a, b, d, indices), "cublas": cublas_per_expert}
        for label, call in calls.items():
            d.fill_(float("nan"))
            call()
            torch.cuda.synchronize()
            last = slice(firsts[-1], firsts[-1] + 64)
            diff = calc_diff(d[last], a[last].double() @ b[groups - 1].double().T)
            if not (diff < 1e-5 and bool(torch.isfinite(d[last]).all())):
                print(f"FAIL {label} at {groups} x {m} x {n} x {k}: diff {diff:.1e}", flush=True)
                failures += 1
        shape = f"{groups} x {m} rows, {n} x {k}"
        for label, call in calls.items():
            timings = []
            with Sampler() as sampler:
                for round_ in range(12):
                    t0 = time.time()
                    us = flushed_median_us(call, flush, reps=20, warmup=3, idle_s=0.2)
                    timings.append((us, t0 + 0.2, time.time()))  # the idle 0.2 s left out of the clock's window
                windows = steady_windows(call, flush, 3.0)
            timed = [(us, *sampler.mean(t0, t1)) for us, t0, t1 in timings]
            for round_, (us, clock, power, throttled, samples) in enumerate(timed):
                print(f"{shape} {label:6s} timing {round_:2d} {us:8.1f} us  SM {clock:6.0f} MHz  {power:5.0f} W  "
                      f"power-capped {throttled:4.0%} ({samples} samples)", flush=True)
            steady = [(us, *sampler.mean(t0, t1)) for us, t0, t1 in windows]
            summary.append(
                f"{shape} {label:6s} timings {spread([t[0] for t in timed])} us, SM {spread([t[1] for t in timed])} MHz, "
                f"corr(time, 1/clock) {correlation([t[0] for t in timed], [1 / t[1] for t in timed]):+.2f} | "
                f"steady ({len(steady)} windows) {spread([s[0] for s in steady])} us, SM "
                f"{spread([s[1] for s in steady])} MHz, {mean_of([s[2] for s in steady]):.0f} W, "
                f"corr {correlation([s[0] for s in steady], [1 / s[1] for s in steady]):+.2f}")
        del a, b, d, indices
        torch.cuda.empty_cache()
    print("==== summary ====")
    print("\n".join(summary))
    print("PASS grouped_spread_probe" if failures == 0 else f"FAIL grouped_spread_probe: {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
