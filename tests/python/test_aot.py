"""Ahead-of-time compilation, plan and the cache, from Python, without a GPU. Each test that compiles runs in
subprocesses with a cache directory of its own (the configuration is read once per process)."""

from __future__ import annotations

import json
import subprocess

import pytest

import kiln

PROBLEM = {"m": 4096, "k": 7168}


def _json_lines(out: str):
    return [json.loads(line) for line in out.splitlines() if line.startswith(("{", "["))]


def test_precompile_for_sm_90a_compiles_once_then_hits_the_cache(python, cache_dir):
    code = """
        import json, kiln
        print(json.dumps(kiln.precompile("per_token_cast_to_fp8", m=4096, k=7168, arch="sm_90a")))
        print(json.dumps(kiln.cache_stats()))
    """
    first, stats = _json_lines(python(code, env={"DG_JIT_CACHE_DIR": cache_dir}))
    assert len(first) == 1
    report = first[0]
    assert report["op"] == "per_token_cast_to_fp8" and report["arch"] == "sm_90a" and report["backend"] == "nvcc"
    assert report["hit"] is False and report["compile_ms"] > 0 and report["cubin_bytes"] > 0
    assert "k=7168" in report["spec"] and report["kernel_name"]
    assert stats["entries"] == 1 and stats["compiles"] == 1 and stats["directory"].startswith(cache_dir)

    second, stats = _json_lines(python(code, env={"DG_JIT_CACHE_DIR": cache_dir}))
    assert second[0]["hit"] is True and second[0]["key"] == report["key"] and second[0]["compile_ms"] == 0
    assert stats["compiles"] == 1 and stats["hits"] >= 1


def test_plan_lists_the_keys_precompile_builds_without_compiling(python, cache_dir):
    out = python("""
        import json, kiln
        print(json.dumps(kiln.plan("per_token_cast_to_fp8", m=4096, k=7168, arch="sm_90a", backend="nvrtc")))
        print(json.dumps(kiln.cache_stats()))
        print(json.dumps(kiln.precompile("per_token_cast_to_fp8", m=4096, k=7168, arch="sm_90a", backend="nvrtc")))
        print(json.dumps(kiln.plan("per_block_cast_to_fp8", n=7168, k=2048, arch="sm_90a", backend="nvrtc")))
        print(json.dumps(kiln.precompile("per_block_cast_to_fp8", n=7168, k=2048, arch="sm_90a", backend="nvrtc")))
    """, env={"DG_JIT_CACHE_DIR": cache_dir})
    planned, stats, built, block_planned, block_built = _json_lines(out)
    assert stats["compiles"] == 0 and stats["entries"] == 0, "plan compiled something"
    assert [p["key"] for p in planned] == [b["key"] for b in built]
    assert [p["key"] for p in block_planned] == [b["key"] for b in block_built]
    for p, b in zip(planned + block_planned, built + block_built):
        assert set(p) == {"op", "spec", "key", "arch", "backend", "kernel_name"}
        for field in p:
            assert p[field] == b[field], field
    assert built[0]["backend"] == "nvrtc" and built[0]["cubin_bytes"] > 0


def test_plan_of_a_range_names_the_kernel_of_every_m_in_it():
    # As `kiln plan fp8_gemm_nt n=7168 k=2048 m=1..16384`: the distinct kernels, each with the pieces of the range it
    # serves; the pieces tile the range, and each M's own plan is the kernel whose pieces hold it.
    kernels = kiln.plan("fp8_gemm_nt", n=7168, k=2048, m=(1, 16384), arch="sm_90a")
    assert 1 < len(kernels) <= 8
    assert kiln.plan("fp8_gemm_nt", n=7168, k=2048, m=range(1, 16385), arch="sm_90a") == kernels
    pieces = sorted((lo, hi, k["key"]) for k in kernels for lo, hi in k["m_ranges"])
    assert pieces[0][0] == 1 and pieces[-1][1] == 16384
    assert all(a[1] + 1 == b[0] for a, b in zip(pieces, pieces[1:]))
    for k in kernels:
        assert k["m_range"] == (min(lo for lo, _ in k["m_ranges"]), max(hi for _, hi in k["m_ranges"]))
    for m in (1, 64, 65, 129, 1000, 4096, 16384):
        [single] = kiln.plan("fp8_gemm_nt", n=7168, k=2048, m=m, arch="sm_90a")
        assert single["key"] == next(key for lo, hi, key in pieces if lo <= m <= hi), m
        assert single["m_range"] == (m, m)  # a single M is a range of one, as `kiln plan --json` says


def test_precompile_of_a_range_on_several_threads(python, cache_dir):
    code = """
        import json, kiln
        print(json.dumps(kiln.plan("fp8_gemm_nt", n=576, k=512, m=(1, 512), arch="sm_90a", backend="nvrtc")))
        print(json.dumps(kiln.precompile("fp8_gemm_nt", n=576, k=512, m=(1, 512), arch="sm_90a", backend="nvrtc",
                                         jobs=2)))
        print(json.dumps(kiln.compile("fp8_gemm_nt", n=576, k=512, m=range(1, 513), arch="sm_90a", backend="nvrtc")))
    """
    planned, built, again = _json_lines(python(code, env={"DG_JIT_CACHE_DIR": cache_dir}))
    assert len(planned) > 1 and [k["key"] for k in built] == [k["key"] for k in planned]
    assert all(k["hit"] is False and k["cubin_bytes"] > 0 for k in built)
    assert all(k["hit"] is True for k in again)
    assert [k["m_ranges"] for k in built] == [k["m_ranges"] for k in planned]


def test_plan_uses_the_process_wide_settings_as_a_launch_would():
    # The audit of the fifty-ninth session: set_num_sms and the overrides were ignored by plan/precompile, so a
    # warm-up compiled kernels the process's launches would not use. A parameter given still wins.
    def keys(**extra):
        return [k["key"] for k in kiln.plan("fp8_gemm_nt", n=7168, k=2048, m=(1, 16384), arch="sm_90a", **extra)]

    plain, eight = keys(), keys(num_sms=8)
    assert plain != eight
    try:
        kiln.set_num_sms(8)
        assert keys() == eight
        assert keys(num_sms=0) == plain
        kiln.set_fp8_gemm_overrides(block_n=64)
        assert keys() == keys(block_n=64, num_sms=8)
    finally:
        kiln.set_num_sms(0)
        kiln.set_fp8_gemm_overrides()
    assert keys() == plain


def test_plan_and_precompile_of_an_empty_problem_need_no_kernel():
    assert kiln.plan("per_token_cast_to_fp8", m=0, k=7168, arch="sm_90a") == []
    assert kiln.precompile("per_token_cast_to_fp8", m=0, k=7168, arch="sm_90a") == []
    assert kiln.plan("per_block_cast_to_fp8", n=0, k=128, arch="sm_90a") == []


def test_plan_key_does_not_depend_on_m():
    a = kiln.plan("per_token_cast_to_fp8", m=1, k=7168, arch="sm_90a")
    b = kiln.plan("per_token_cast_to_fp8", m=4096, k=7168, arch="sm_90a")
    c = kiln.plan("per_token_cast_to_fp8", m=1, k=4096, arch="sm_90a")
    assert a[0]["key"] == b[0]["key"] != c[0]["key"]


def test_compile_is_precompile():
    assert kiln.compile("per_token_cast_to_fp8", m=0, k=128, arch="sm_90a") == []


def test_list_ops_describes_each_operation_and_its_parameters():
    ops = {op["name"]: op for op in kiln.list_ops()}
    assert {"per_token_cast_to_fp8", "per_block_cast_to_fp8"} <= set(ops)
    assert set(ops["per_token_cast_to_fp8"]["params"]) == {"m", "k"}
    assert set(ops["per_block_cast_to_fp8"]["params"]) == {"n", "k"}
    assert all(op["summary"] for op in ops.values())
    assert ops["fp8_gemm_nt"]["targets"].startswith("sm_90a only")
    assert ops["per_token_cast_to_fp8"]["targets"].startswith("sm_90 and later")


@pytest.mark.parametrize("call,error,text", [
    (lambda: kiln.plan("no_such_op", m=1), kiln.NotFoundError, "per_token_cast_to_fp8"),
    (lambda: kiln.plan("per_token_cast_to_fp8", m=1), ValueError, "k"),
    (lambda: kiln.plan("per_token_cast_to_fp8", m=1, k=128, q=3), ValueError, "q"),
    (lambda: kiln.plan("per_token_cast_to_fp8", m=-1, k=128), ValueError, "m"),
    (lambda: kiln.plan("per_token_cast_to_fp8", m=1, k=100, arch="sm_90a"), ValueError, "multiple of 128"),
    (lambda: kiln.plan("per_token_cast_to_fp8", m=1, k=128, arch="sm_banana"), ValueError, "sm_banana"),
    (lambda: kiln.plan("fp8_gemm_nt", m=1, n=4096, k=7168, arch="sm_100a"), ValueError,
     r"fp8_gemm_nt: its kernels are written for sm_90a only .*got sm_100a"),
    (lambda: kiln.plan("per_token_cast_to_fp8", m=1, k=128, backend="gcc"), ValueError, "gcc"),
    (lambda: kiln.plan("per_token_cast_to_fp8", m=1, k=128.0), TypeError, "k must be an int"),
    (lambda: kiln.plan("per_token_cast_to_fp8", m=True, k=128), TypeError, "m must be an int"),
    (lambda: kiln.plan("fp8_gemm_nt", m=1, n=2**70, k=2048), kiln.KilnValueError,
     r"plan: problem parameter n must be at most 2147483647, got 1180591620717411303424"),
    (lambda: kiln.plan("fp8_gemm_nt", m=1, n=2**32, k=2048), kiln.KilnValueError,
     r"fp8_gemm_nt: parameter n must be at most 2147483647, got 4294967296"),
    (lambda: kiln.plan("fp8_gemm_nt", m=-2**70, n=2048, k=2048), kiln.KilnValueError, r"m must be >= 0"),
    (lambda: kiln.plan("fp8_gemm_nt", m=(1, 2, 3), n=2048, k=2048), kiln.KilnValueError,
     r"m must be an int or a range \(lo, hi\), got \(1, 2, 3\)"),
    (lambda: kiln.plan("fp8_gemm_nt", m=range(1, 9, 2), n=2048, k=2048), kiln.KilnValueError, "of step 1"),
    (lambda: kiln.plan("fp8_gemm_nt", m=(9, 3), n=2048, k=2048), kiln.KilnValueError, "lo <= hi, got 9..3"),
    (lambda: kiln.plan("fp8_gemm_nt", m=1, n=(1, 2), k=2048), kiln.KilnValueError, "n must be a single value"),
    (lambda: kiln.plan("fp8_gemm_nt", m=(1.0, 2), n=2048, k=2048), kiln.KilnTypeError, "m must be an int"),
    (lambda: kiln.precompile("fp8_gemm_nt", m=1, n=2048, k=2048, jobs=-1), kiln.KilnValueError, "jobs must be >= 0"),
    (lambda: kiln.precompile("no_such_op", m=1), LookupError, "no_such_op"),
    (lambda: kiln.precompile("per_token_cast_to_fp8", m=1, k=96, arch="sm_90a"), ValueError, "96"),
    # The request's names are strs: anything else named (these were nanobind's "incompatible function arguments").
    (lambda: kiln.plan(None, m=1), kiln.KilnTypeError,
     r"^plan: op must be an operation's name, a str \(list_ops\(\) lists them\), got NoneType None$"),
    (lambda: kiln.precompile(b"fp8_gemm_nt", m=1), kiln.KilnTypeError, r"^precompile: op must be .*, got bytes"),
    (lambda: kiln.plan("per_token_cast_to_fp8", m=1, k=128, arch=5), kiln.KilnTypeError,
     r"^plan: arch must be None or a str \(such as 'sm_90a'\), got int 5$"),
    (lambda: kiln.compile("per_token_cast_to_fp8", m=1, k=128, backend=1), kiln.KilnTypeError,
     r"^precompile: backend must be None or a str \('nvcc' or 'nvrtc'\), got int 1$"),
])
def test_bad_requests_raise_the_right_exception_with_the_library_message(call, error, text):
    with pytest.raises(error, match=text):
        call()


def test_precompile_releases_the_gil(python, cache_dir):
    # While NVCC compiles in a thread, the main thread keeps running Python.
    out = python("""
        import threading, time, kiln
        done = threading.Event()
        result = {}
        def work():
            result["r"] = kiln.precompile("per_block_cast_to_fp8", n=128, k=128, arch="sm_90a", backend="nvcc")
            done.set()
        t = threading.Thread(target=work)
        start = time.perf_counter()
        t.start()
        ticks = 0
        while not done.is_set():
            ticks += 1
            time.sleep(0.001)
        t.join()
        print(ticks, time.perf_counter() - start, result["r"][0]["hit"])
    """, env={"DG_JIT_CACHE_DIR": cache_dir})
    ticks, seconds, hit = out.split()
    assert hit == "False"
    # Each tick sleeps 1 ms; with the GIL held for the whole compile the loop could not tick at all.
    assert float(seconds) > 0.05 and int(ticks) >= 0.1 * float(seconds) * 1000, out


def test_cache_list_verify_and_clear(python, cache_dir):
    out = python("""
        import json, kiln
        kiln.precompile("per_block_cast_to_fp8", n=256, k=256, arch="sm_90a", backend="nvrtc")
        print(json.dumps(kiln.cache_list()))
        print(json.dumps(kiln.cache_verify()))
        print(json.dumps(kiln.cache_clear()))
        print(json.dumps(kiln.cache_list()))
    """, env={"DG_JIT_CACHE_DIR": cache_dir})
    lines = out.splitlines()
    entries, verify, cleared, after = (json.loads(line) for line in lines[-4:])
    assert len(entries) == 1 and entries[0]["op"] == "per_block_cast_to_fp8" and entries[0]["arch"] == "sm_90a"
    assert entries[0]["backend"] == "nvrtc" and entries[0]["bytes"] > 0
    assert verify == {"checked": 1, "corrupt": 0, "removed": 0, "problems": []}
    assert cleared == 1 and after == []


def test_a_failed_compile_is_a_compile_error_with_command_and_log(python, cache_dir, tmp_path):
    # An "nvcc" that knows its version (part of every key) but fails every compile with a recognisable log.
    real = subprocess.run(["bash", "-c", "command -v nvcc || echo /usr/local/cuda/bin/nvcc"], capture_output=True,
                          text=True).stdout.strip()
    fake = tmp_path / "fake nvcc"
    fake.write_text(f'#!/bin/sh\nfor a in "$@"; do [ "$a" = --version ] && exec "{real}" --version; done\n'
                    'echo "kiln-test: this compiler always fails" >&2\nexit 3\n')
    fake.chmod(0o755)
    out = python("""
        import kiln
        try:
            kiln.precompile("per_block_cast_to_fp8", n=128, k=128, arch="sm_90a", backend="nvcc")
        except kiln.CompileError as e:
            assert isinstance(e, RuntimeError) and e.kind == "compile_error"
            assert "kiln-test: this compiler always fails" in e.log, e.log
            assert "fake nvcc" in e.command, e.command
            assert "kiln-test: this compiler always fails" in str(e)
            print("ok", kiln.cache_stats()["entries"])
        else:
            raise SystemExit("no error")
    """, env={"DG_JIT_CACHE_DIR": cache_dir, "DG_JIT_NVCC_COMPILER": str(fake)})
    assert out.split() == ["ok", "0"], out  # a failed compile is never cached


def test_compiles_after_a_declared_warm_up_are_counted(python, cache_dir):
    out = python("""
        import json, kiln
        kiln.precompile("per_token_cast_to_fp8", m=64, k=512, arch="sm_90a", backend="nvrtc")
        before = kiln.cache_stats()
        kiln.declare_warmup_done()
        kiln.declare_warmup_done()  # idempotent
        kiln.precompile("per_token_cast_to_fp8", m=64, k=1024, arch="sm_90a", backend="nvrtc")
        print(json.dumps(before))
        print(json.dumps(kiln.cache_stats()))
    """, env={"DG_JIT_CACHE_DIR": cache_dir})
    before, after = _json_lines(out)
    assert before["warmup_done"] is False and before["compiles_after_warmup"] == 0
    assert after["warmup_done"] is True
    assert after["compiles_after_warmup"] == 1 and after["process_compiles_after_warmup"] == 1
    assert after["mode"] == "normal" and after["compiles"] == 2
    assert [t["kind"] for t in after["tiers"]][0] == "local"


def test_ctrl_c_stops_a_precompile_after_the_kernel_being_built(python, cache_dir):
    # A serving warm-up runs for minutes: a KeyboardInterrupt (here from a timer, as Ctrl-C would send it) must stop it
    # after the kernel being built, not after every kernel of the range; what was built stays cached.
    out = python("""
        import _thread, json, threading, time, kiln
        planned = kiln.plan("fp8_gemm_nt", n=1536, k=512, m=(1, 16384), arch="sm_90a", backend="nvrtc")
        threading.Timer(0.2, _thread.interrupt_main).start()
        try:
            kiln.precompile("fp8_gemm_nt", n=1536, k=512, m=(1, 16384), arch="sm_90a", backend="nvrtc", jobs=1)
            print(json.dumps({"interrupted": False}))
        except KeyboardInterrupt:
            print(json.dumps({"interrupted": True}))
        print(json.dumps({"planned": len(planned), "cached": kiln.cache_stats()["entries"]}))
    """, env={"DG_JIT_CACHE_DIR": cache_dir})
    outcome, counts = _json_lines(out)
    assert outcome["interrupted"], out
    assert counts["planned"] >= 3
    assert counts["cached"] < counts["planned"], counts
