"""The probes' timing (not part of the library): bench/fp8_gemm_bench.py's method in one function.

The L2 is flushed by zeroing `flush` (a uint8 CUDA tensor; pass a slice to flush less) before every call; CUDA events
around each call, queued back to back; the median of `reps` in microseconds, after `warmup` calls and, first,
`idle_s` seconds of idle GPU.
"""
import statistics
import time

import torch


def flushed_median_us(call, flush, reps=30, warmup=3, idle_s=0.0):
    torch.cuda.synchronize()
    time.sleep(idle_s)
    for _ in range(warmup):
        flush.zero_()
        call()
    torch.cuda.synchronize()
    pairs = []
    for _ in range(reps):
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        call()
        end.record()
        pairs.append((start, end))
    torch.cuda.synchronize()
    return statistics.median(start.elapsed_time(end) * 1000 for start, end in pairs)
