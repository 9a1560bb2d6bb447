"""Calls from many Python threads at once (skipped without PyTorch and a CUDA GPU): each thread on its own stream
with its own data, some starting cold on a kernel no one has compiled yet (one compile for all of them), every
result checked against the reference. The GIL is released inside kiln, so the threads really overlap there.

Runs under pytest, or alone: `python3 tests/python/test_gpu_threads.py`.
"""

from __future__ import annotations

import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gpu_support import (HAVE_GPU, SKIP_REASON, assert_fp8_equal, assert_scales_equal, per_block_reference,  # noqa: E402
                         per_token_reference, random_bf16, run_module, torch)

import kiln  # noqa: E402

try:
    import pytest
    pytestmark = pytest.mark.skipif(not HAVE_GPU, reason=SKIP_REASON)
except ImportError:
    pytest = None

THREADS = 8
CALLS = 40


def _run_threads(target):
    errors = []
    barrier = threading.Barrier(THREADS)

    def wrapped(i):
        try:
            barrier.wait()
            target(i)
        except BaseException as e:  # reported by the main thread
            errors.append((i, e))

    threads = [threading.Thread(target=wrapped, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        i, e = errors[0]
        raise AssertionError(f"{len(errors)} thread(s) failed; thread {i}: {type(e).__name__}: {e}") from e


def test_threads_on_their_own_streams_cold_and_warm():
    k = 128 * 43  # not used by any other test: every thread starts cold on the same key
    inputs = [random_bf16(17 + 5 * i, k, seed=100 + i) for i in range(THREADS)]
    results = [None] * THREADS
    compiles_before = kiln.cache_stats()["compiles"]

    def work(i):
        stream = torch.cuda.Stream()
        with torch.cuda.stream(stream):
            for _ in range(CALLS):
                results[i] = kiln.per_token_cast_to_fp8(inputs[i])
        stream.synchronize()

    _run_threads(work)
    assert kiln.cache_stats()["compiles"] - compiles_before <= 1, "a key was compiled more than once"
    for i in range(THREADS):
        ref_q, ref_s = per_token_reference(inputs[i])
        assert_fp8_equal(results[i][0], ref_q, f"thread {i}")
        assert_scales_equal(results[i][1], ref_s, f"thread {i}")


def test_threads_mixing_both_casts_on_the_current_stream():
    inputs = [random_bf16(64 + i, 1024, seed=200 + i) for i in range(THREADS)]
    results = [None] * THREADS

    def work(i):
        for j in range(CALLS):
            if (i + j) % 2:
                results[i] = ("token", kiln.per_token_cast_to_fp8(inputs[i]))
            else:
                results[i] = ("block", kiln.per_block_cast_to_fp8(inputs[i]))

    _run_threads(work)
    torch.cuda.synchronize()
    for i, (kind, (q, s)) in enumerate(results):
        ref_q, ref_s = (per_token_reference if kind == "token" else per_block_reference)(inputs[i])
        assert_fp8_equal(q, ref_q, f"thread {i} {kind}")
        assert_scales_equal(s, ref_s, f"thread {i} {kind}")


def test_settings_from_threads_do_not_break_calls():
    x = random_bf16(256, 2048, seed=300)
    ref_q, ref_s = per_token_reference(x)
    stop = threading.Event()

    def toggler():
        n = 0
        while not stop.is_set():
            kiln.set_num_sms(1 + n % 8)
            kiln.set_pdl(n % 2 == 0)
            n += 1

    t = threading.Thread(target=toggler)
    t.start()
    try:
        for _ in range(50):
            q, s = kiln.per_token_cast_to_fp8(x)
        torch.cuda.synchronize()
    finally:
        stop.set()
        t.join()
        kiln.set_num_sms(0)
        kiln.set_pdl(False)
    assert_fp8_equal(q, ref_q, "while settings change")
    assert_scales_equal(s, ref_s, "while settings change")


if __name__ == "__main__":
    sys.exit(run_module(globals()))
