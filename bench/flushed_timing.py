"""How kiln's Python benchmarks time a GPU call (bench/fp8_gemm_bench.py and the probes in bench/probes/).

The L2 is flushed by zeroing `flush` (a uint8 CUDA tensor; pass a slice to flush less) before every call; CUDA events
around each call, queued back to back; the median of `reps`, in microseconds.

The H200's clocks follow its power draw and temperature with a lag: a decode shape timed right after the M = 4096
shapes ran 1-2 us slower than in a fresh process (bench/RESULTS.md, seventh session), and 200 ms of warm-up at
M = 4096 made those shapes 6 % slower for every library alike. So a measurement first leaves the GPU idle for
`idle_s`, then warms up with at least `warmup` calls (3, as the peers file did) and for at least `warmup_s` seconds
(0.2 measures sustained load). The host waits every few warm-up calls so that it never queues seconds of work ahead
of the GPU.
"""
import statistics
import time

import torch


def flushed_median_us(call, flush, reps=30, warmup=3, idle_s=0.0, warmup_s=0.0):
    torch.cuda.synchronize()
    time.sleep(idle_s)
    deadline = time.perf_counter() + warmup_s
    calls = 0
    while calls < warmup or time.perf_counter() < deadline:
        flush.zero_()
        call()
        calls += 1
        if calls % 8 == 0:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    return statistics.median(flushed_times_us(call, flush, reps))


def flushed_times_us(call, flush, reps):
    """The event time of each of `reps` calls, each after a flush, queued back to back (no idle, no warm-up)."""
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for start, end in events:
        flush.zero_()
        start.record()
        call()
        end.record()
    torch.cuda.synchronize()
    return [start.elapsed_time(end) * 1000.0 for start, end in events]
