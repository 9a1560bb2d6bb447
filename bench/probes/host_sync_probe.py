"""Probe (not part of the library): does a kiln.fp8_gemm_nt call from Python wait for the GPU?

The C++ op test times the same kernels 1-2.7 us faster than bench/fp8_gemm_bench.py at decode sizes. Both flush
L2 first; if the Python call blocked until the GPU had finished the flush, the GPU would then idle between the
start event and the kernel (the host's remaining work and the launch), and the events would count it. Here the
GPU is kept busy for 20 ms (torch.cuda._sleep) and the host time of one call is read: microseconds if the call
is asynchronous, ~20 ms if it waits. Then the bench's event timing with and without that busy GPU before it.
    PYTHONPATH=<kiln package> python3 bench/probes/host_sync_probe.py
"""
import statistics
import time

import torch

import kiln

torch.manual_seed(0)
dev = torch.device("cuda")
flush = torch.empty(1 << 30, dtype=torch.uint8, device=dev)
for m, n, k in [(1, 4096, 7168), (64, 4096, 7168), (1, 7168, 2048), (128, 2112, 7168)]:
    a_fp8, sfa = kiln.per_token_cast_to_fp8(torch.randn(m, k, device=dev, dtype=torch.bfloat16))
    b_fp8, sfb = kiln.per_block_cast_to_fp8(torch.randn(n, k, device=dev, dtype=torch.bfloat16))
    d = torch.empty(m, n, device=dev, dtype=torch.bfloat16)

    def call():
        kiln.fp8_gemm_nt((a_fp8, sfa), (b_fp8, sfb), d)

    call()
    torch.cuda.synchronize()
    host = []
    for _ in range(5):
        torch.cuda._sleep(20_000_000)  # ~10-20 ms of GPU time
        t0 = time.perf_counter()
        call()
        host.append((time.perf_counter() - t0) * 1e6)
        torch.cuda.synchronize()

    def events(busy_first, sync_each):
        pairs = []
        for i in range(33):
            flush.zero_()
            if busy_first:
                torch.cuda._sleep(100_000)
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            call()
            e.record()
            if sync_each:
                e.synchronize()
            pairs.append((s, e))
        torch.cuda.synchronize()
        return statistics.median(s.elapsed_time(e) * 1000 for s, e in pairs[3:])

    print(f"m={m} n={n} k={k}: host time of a call behind 20 ms of GPU work {statistics.median(host):.1f} us; "
          f"events as the bench takes them {events(False, False):.1f} us, with a short sleep kernel after the "
          f"flush {events(True, False):.1f} us, synchronised after each call {events(False, True):.1f} us")
