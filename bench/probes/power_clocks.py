"""Probe (not part of the library): the SM clock and board power while one FP8 GEMM runs back to back for a few
seconds, kiln beside cuBLAS per-tensor (torch._scaled_mm) at the same shape, each with the benchmark's 1 GB flush
before every call and without it.

The H200 (700 W limit) lowers its clocks under sustained FP8 load, so where a call is power-bound its time follows
the energy it spends, not only its schedule. nvidia-smi samples power, SM clock and the power-cap throttle flag
every 20 ms in the background; the first quarter of each phase (the clocks settling) is left out of the averages.
    PYTHONPATH=<kiln package> python3 bench/probes/power_clocks.py [M N K] [--seconds S] [--config SPEC ...]

A --config is a kiln configuration to run as well, as set_fp8_gemm_overrides' fields: "block_m=256,block_n=128,
cluster_n=1" (the plan's choice always runs, as "kiln"). Same work, different loads: where the clocks differ, so
does the energy a configuration spends on it.
"""
import argparse
import statistics
import subprocess
import tempfile
import time

import torch

import kiln

QUERY = "power.draw.instant,clocks.sm,temperature.gpu,clocks_event_reasons.sw_power_cap"


def sample_while(run, seconds):
    """Runs `run` (a callable returning the call times, us) while nvidia-smi samples; returns (times, samples)."""
    with tempfile.NamedTemporaryFile("w+", suffix=".csv") as log:
        smi = subprocess.Popen(["nvidia-smi", f"--query-gpu={QUERY}", "--format=csv,noheader,nounits", "-lms", "20"],
                               stdout=log)
        try:
            time.sleep(0.2)
            times = run(seconds)
        finally:
            smi.terminate()
            smi.wait()
        log.seek(0)
        rows = [[f.strip() for f in line.split(",")] for line in log.read().strip().splitlines()]
    return times, rows[len(rows) // 4:]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("shape", nargs="*", type=int, default=[4096, 7168, 16384], help="M N K")
    parser.add_argument("--seconds", type=float, default=2.0, help="length of each phase")
    parser.add_argument("--config", action="append", default=[], metavar="SPEC",
                        help="a kiln configuration as field=value pairs of set_fp8_gemm_overrides, comma-separated")
    parser.add_argument("--no-flush", action="store_true", help="only the phases without the flush")
    args = parser.parse_args()
    if len(args.shape) != 3:
        parser.error(f"shape must be M N K, got {args.shape}")
    m, n, k = args.shape
    dev = torch.device("cuda")
    torch.manual_seed(0)
    a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
    b = torch.randn(n, k, device=dev, dtype=torch.bfloat16)
    a_fp8, sfa = kiln.per_token_cast_to_fp8(a)
    b_fp8, sfb = kiln.per_block_cast_to_fp8(b)
    d = torch.empty(m, n, device=dev, dtype=torch.bfloat16)
    a_pt, b_pt = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn)
    one = torch.tensor(1.0, device=dev)
    flush = torch.empty(1 << 30, dtype=torch.uint8, device=dev)
    def kiln_call():
        kiln.fp8_gemm_nt((a_fp8, sfa), (b_fp8, sfb), d)

    def cublas_call():
        torch._scaled_mm(a_pt, b_pt.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)

    # name -> (kiln's overrides, set once before the phase, or None for cuBLAS; the call)
    calls = {"kiln": ({}, kiln_call)}
    for spec in args.config:
        try:
            overrides = {field: int(value) for field, value in (pair.split("=") for pair in spec.split(","))}
        except ValueError:
            parser.error(f"--config must be field=value pairs, comma-separated, got {spec!r}")
        calls[spec] = (overrides, kiln_call)
    calls["cublas_pt"] = (None, cublas_call)
    for overrides, call in calls.values():  # compile and warm once
        if overrides is not None:
            kiln.set_fp8_gemm_overrides(**overrides)
        call()
    torch.cuda.synchronize()

    print(f"power_clocks: {m} x {n} x {k}, {args.seconds:g} s per phase")
    for with_flush in (False,) if args.no_flush else (True, False):
        for name, (overrides, call) in calls.items():
            if overrides is not None:
                kiln.set_fp8_gemm_overrides(**overrides)

            def run(seconds, call=call):
                events = []
                deadline = time.perf_counter() + seconds
                while time.perf_counter() < deadline:
                    if with_flush:
                        flush.zero_()
                    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    start.record()
                    call()
                    end.record()
                    events.append((start, end))
                    if len(events) % 16 == 0:  # never queue seconds of work ahead of the GPU
                        torch.cuda.synchronize()
                torch.cuda.synchronize()
                return [s.elapsed_time(e) * 1e3 for s, e in events]

            torch.cuda.synchronize()
            time.sleep(0.5)  # every phase starts from an idle GPU
            times, rows = sample_while(run, args.seconds)
            def mean(column):
                values = []
                for r in rows:
                    try:
                        values.append(float(r[column]))
                    except (ValueError, IndexError):
                        pass
                return statistics.fmean(values) if values else float("nan")
            capped = sum(1 for r in rows if len(r) > 3 and r[3] == "Active") / max(1, len(rows))
            print(f"{name:36s} flush={'1 GB' if with_flush else 'none'}  calls {len(times):5d}  "
                  f"median {statistics.median(times):8.1f} us  fastest {min(times):8.1f} us  "
                  f"power {mean(0):6.1f} W  SM clock {mean(1):5.0f} MHz  {mean(2):4.1f} C  "
                  f"power-capped {capped:4.0%} of samples", flush=True)


if __name__ == "__main__":
    main()
