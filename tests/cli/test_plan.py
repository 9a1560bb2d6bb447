"""`kiln plan` and `kiln precompile`: the distinct kernels an M range needs, their parallel build, --shapes,
and the errors. Compiles use NVRTC (the faster compiler) and small K to keep the suite quick."""

import json
import os
import shutil
import signal
import stat
import subprocess
import time

import pytest

from conftest import ARCH, assert_error

GEMM = ["fp8_gemm_nt", "n=576", "k=512"]
PLAN_FIELDS = {"op", "spec", "key", "arch", "backend", "kernel_name", "cached", "detail", "m_range", "m_ranges"}


def pieces_tile(kernels, lo, hi):
    pieces = sorted(tuple(p) for k in kernels for p in k["m_ranges"])
    assert pieces[0][0] == lo and pieces[-1][1] == hi, pieces
    for a, b in zip(pieces, pieces[1:]):
        assert b[0] == a[1] + 1, pieces


def test_plan_lists_at_most_eight_kernels_for_the_whole_range_without_compiling(kiln):
    out = kiln.json("plan", "fp8_gemm_nt", "n=7168", "k=2048", "m=1..16384", "--arch", ARCH)
    assert set(out) == {"kernels"}
    kernels = out["kernels"]
    assert 1 <= len(kernels) <= 8
    for k in kernels:
        assert set(k) == PLAN_FIELDS, k
        assert k["op"] == "fp8_gemm_nt" and k["arch"] == ARCH and k["backend"] == "nvcc"
        assert k["cached"] is False
        assert k["m_range"] == [min(p[0] for p in k["m_ranges"]), max(p[1] for p in k["m_ranges"])]
        assert "n=7168 k=2048" in k["spec"]
    assert len({k["key"] for k in kernels}) == len(kernels)
    pieces_tile(kernels, 1, 16384)
    stats = kiln.json("cache", "stats")
    assert stats["compiles"] == 0 and stats["entries"] == 0


def test_plan_for_people_is_a_table(kiln):
    result = kiln.run("plan", "fp8_gemm_nt", "n=7168", "k=2048", "m=1..16384", "--arch", ARCH)
    assert result.returncode == 0, result
    lines = result.stdout.splitlines()
    assert lines[0].startswith("fp8_gemm_nt") and "kernels for sm_90a (nvcc), 0 cached" in lines[0], result
    assert lines[1].split()[:2] == ["op", "kernel"], result
    assert len(lines) >= 3


def test_precompile_builds_what_plan_lists_then_everything_is_cached(kiln):
    planned = kiln.json("plan", *GEMM, "m=1..16384", "--arch", ARCH, "--backend", "nvrtc")["kernels"]
    result = kiln.run("precompile", *GEMM, "m=1..16384", "--arch", ARCH, "--backend", "nvrtc", "-j", "2", "--json")
    assert result.returncode == 0, result
    built = result.json()
    assert [k["key"] for k in built["kernels"]] == [k["key"] for k in planned]
    assert built["compiled"] == len(planned) and built["cached"] == 0
    for k in built["kernels"]:
        assert k["hit"] is False and k["compile_ms"] > 0 and k["cubin_bytes"] > 0
        assert k["m_ranges"] == next(p["m_ranges"] for p in planned if p["key"] == k["key"])
    # stderr is not a terminal here: one progress line per kernel, nothing on stdout but the JSON.
    progress = [line for line in result.stderr.splitlines() if line.startswith("kiln: [")]
    assert len(progress) == len(planned), result.stderr
    assert progress[-1].startswith(f"kiln: [{len(planned)}/{len(planned)}] fp8_gemm_nt n=576 k=512: "), progress
    again = kiln.json("plan", *GEMM, "m=1..16384", "--arch", ARCH, "--backend", "nvrtc")["kernels"]
    assert all(k["cached"] for k in again)
    second = kiln.json("precompile", *GEMM, "m=1..16384", "--arch", ARCH, "--backend", "nvrtc")
    assert second["compiled"] == 0 and second["cached"] == len(planned)
    assert all(k["hit"] for k in second["kernels"])
    # A single m compiles (and finds) the very kernel its piece of the plan names.
    first = planned[0]
    single = kiln.json("compile", *GEMM, f"m={first['m_ranges'][0][0]}", "--arch", ARCH, "--backend", "nvrtc")
    assert single["key"] == first["key"] and single["hit"] is True


def test_precompile_text_output_and_summary(kiln):
    result = kiln.run("precompile", *GEMM, "m=1..64", "--arch", ARCH, "--backend", "nvrtc")
    assert result.returncode == 0, result
    first = result.stdout.splitlines()[0]
    assert first.startswith("fp8_gemm_nt") and "compiled" in first and "already cached" in first, result


def test_a_failed_precompile_with_json_still_reports_every_kernel(kiln, tmp_path):
    # One kernel cached by the real NVCC, then both problems' kernels with an NVCC that answers --version as the real
    # one does (so the keys are the same) and fails every compile: the cached one is a hit, the other fails by name.
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    fake = tmp_path / "nvcc"
    fake.write_text(f'#!/bin/sh\nfor a in "$@"; do [ "$a" = --version ] && exec {nvcc} "$@"; done\n'
                    'echo "fake nvcc: no compiles today" >&2\nexit 1\n')
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    kiln.json("precompile", "fp8_gemm_nt", "n=576", "k=512", "m=1..16", "--arch", ARCH)
    shapes = tmp_path / "two.json"
    shapes.write_text(json.dumps({"m_range": [1, 16], "nk": [[576, 512], [2112, 512]]}))
    result = kiln.run("precompile", "fp8_gemm_nt", "--shapes", shapes, "--arch", ARCH, "--json",
                      env={"DG_JIT_NVCC_COMPILER": str(fake)})
    assert result.returncode == 1, result
    out = json.loads(result.stdout)
    assert (out["compiled"], out["cached"], out["failed"]) == (0, 1, 1), out
    assert out["error"].startswith("NVCC failed to compile fp8_gemm_nt n=2112 k=512"), out["error"]
    by_n = {k["spec"].split()[0]: k for k in out["kernels"]}
    assert by_n["n=576"]["hit"] is True and "error" not in by_n["n=576"]
    assert "fake nvcc: no compiles today" in by_n["n=2112"]["error"]
    assert "NVCC failed to compile" in result.stderr


def test_precompile_into_a_cache_that_cannot_store_fails_by_name(kiln, tmp_path):
    # The cache audit (fifty-ninth session): on a full or read-only cache precompile compiled, could not store, and
    # exited 0, so a CI job would ship an incomplete pack. Root ignores permissions, so the directory's temporaries
    # are made a plain file: no entry can be written, for any user.
    cache = tmp_path / "cache"
    assert kiln.run("cache", "ls", env={"DG_JIT_CACHE_DIR": str(cache)}).returncode == 0
    shutil.rmtree(cache / "kiln" / "tmp")
    (cache / "kiln" / "tmp").write_text("not a directory")
    result = kiln.run("precompile", "per_token_cast_to_fp8", "m=4", "k=512", "--arch", ARCH, "--json",
                      env={"DG_JIT_CACHE_DIR": str(cache)})
    assert result.returncode == 1, result
    out = json.loads(result.stdout)
    assert (out["compiled"], out["failed"]) == (0, 1), out
    error = out["kernels"][0]["error"]
    assert "was compiled, but no cache tier could store it" in error and str(cache) in error, error
    assert "DG_JIT_CACHE_DIR" in error, error
    # compile, the other ahead-of-time command, refuses the same way.
    result = kiln.run("compile", "per_token_cast_to_fp8", "m=4", "k=512", "--arch", ARCH,
                      env={"DG_JIT_CACHE_DIR": str(cache)})
    assert result.returncode == 1 and "no cache tier could store it" in result.stderr, result


def test_shapes_file_plans_and_precompiles_every_nk(kiln, tmp_path):
    shapes = tmp_path / "shapes.json"
    shapes.write_text(json.dumps({"warmup_model": {"m_range": [1, 256], "nk": [[576, 512], [2112, 512]]}}))
    planned = kiln.json("plan", "fp8_gemm_nt", "--shapes", shapes, "--arch", ARCH, "--backend", "nvrtc")["kernels"]
    for n in (576, 2112):
        mine = [k for k in planned if k["spec"].startswith(f"n={n} k=512 ")]
        assert mine, planned
        pieces_tile(mine, 1, 256)
    built = kiln.json("precompile", "fp8_gemm_nt", "--shapes", shapes, "--arch", ARCH, "--backend", "nvrtc", "-j", "2")
    assert [k["key"] for k in built["kernels"]] == [k["key"] for k in planned]
    # The bare form, and extra parameters applied to every problem (an override here).
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps({"m_range": [1, 16384], "nk": [[7168, 2048]]}))
    forced = kiln.json("plan", "fp8_gemm_nt", "block_m=128", "block_n=128", "--shapes", bare, "--arch", ARCH)["kernels"]
    assert len(forced) == 1 and "block_m=128 block_n=128" in forced[0]["spec"]
    assert forced[0]["m_range"] == [1, 16384]


def test_shapes_numbers_are_checked_where_the_file_has_them_and_repeats_list_each_piece_once(kiln, tmp_path):
    def shapes(doc):
        path = tmp_path / "shapes.json"
        path.write_text(json.dumps(doc))
        return path
    # A JSON number past int64 must not wrap round into a negative one; each is named by its place in the file.
    assert_error(kiln.run("plan", "fp8_gemm_nt", "--shapes", shapes({"m_range": [1, 18446744073709551615], "nk": [[576, 512]]})),
                 "m_range[1] must be from 0 to 2147483647, got 18446744073709551615")
    assert_error(kiln.run("plan", "fp8_gemm_nt", "--shapes", shapes({"m_range": [1, 16], "nk": [[576, 512], [-576, 512]]})),
                 "nk[1][0] (n) must be from 0 to 2147483647, got -576")
    assert_error(kiln.run("plan", "fp8_gemm_nt", "--shapes", shapes({"m_range": [64, 1], "nk": [[576, 512]]})),
                 '"m_range" must be [lo, hi] with lo <= hi, got [64,1]')
    # The same (n, k) twice needs the same kernels: each piece of the range is listed once.
    kernels = kiln.json("plan", "fp8_gemm_nt", "--shapes", shapes({"m_range": [1, 1000], "nk": [[576, 512], [576, 512]]}),
                        "--arch", ARCH)["kernels"]
    for k in kernels:
        assert len(k["m_ranges"]) == len({tuple(p) for p in k["m_ranges"]}), k["m_ranges"]
    # A FIFO would be read forever; empty option values are usage errors, not the default.
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert_error(kiln.run("plan", "fp8_gemm_nt", "--shapes", fifo, timeout=30), "is not a regular file")
    assert_error(kiln.run("plan", "fp8_gemm_nt", "--shapes", ""), "--shapes: must not be empty", status=2)
    assert_error(kiln.run("plan", "fp8_gemm_nt", "n=576", "k=512", "m=1", "--arch", ""), "--arch: must not be empty",
                 status=2)
    assert_error(kiln.run("compile", "per_token_cast_to_fp8", "m=99999999999999999999", "k=512"),
                 "m='99999999999999999999' is out of range: at most 2147483647", status=2)


def test_an_unknown_command_names_the_commands_there_are(kiln):
    assert_error(kiln.run("frob"), "frob", "expected one of doctor, config, ops, compile, plan, precompile, cache",
                 status=2)
    assert_error(kiln.run("cache", "frob"), "frob", "expected one of ls, stats, verify, clear, prune, export, import",
                 status=2)


def test_the_casts_accept_a_range(kiln):
    kernels = kiln.json("plan", "per_token_cast_to_fp8", "m=1..16384", "k=7168", "--arch", ARCH)["kernels"]
    assert len(kernels) == 1 and kernels[0]["m_range"] == [1, 16384]
    single = kiln.json("plan", "per_token_cast_to_fp8", "m=4096", "k=7168", "--arch", ARCH)["kernels"]
    assert single[0]["key"] == kernels[0]["key"]
    assert kiln.json("plan", "fp8_gemm_nt", "m=0", "n=576", "k=512", "--arch", ARCH)["kernels"] == []


def test_errors(kiln, tmp_path):
    assert_error(kiln.run("plan", "fp8_gemm_nt", "n=576", "k=512", "m=9..3"), "m", "9..3", status=2)
    assert_error(kiln.run("plan", "fp8_gemm_nt", "n=576", "k=1..2", "m=1"), "k may be a range only with accumulate=1",
                 "1..2")
    assert_error(kiln.run("plan", "fp8_gemm_nt", "n=576", "k=500", "m=1..5"), "k must be a positive multiple of 16")
    assert_error(kiln.run("plan", "fp8_gemm_nt", "n=576", "k=512", "m=1..x"), "m", status=2)
    for jobs in ("-1", "abc", "", "1.5"):
        assert_error(kiln.run("precompile", "fp8_gemm_nt", "n=576", "k=512", "m=1", "-j", jobs),
                     f"--jobs: must be a whole number >= 0 (0: one per hardware thread), got '{jobs}'", status=2)
    # Every problem parameter is at most 2**31 - 1 (the kernels take 32-bit sizes), refused before any compile.
    assert_error(kiln.run("plan", "fp8_gemm_nt", "n=4294967296", "k=512", "m=1"),
                 "fp8_gemm_nt: parameter n must be at most 2147483647, got 4294967296")
    assert_error(kiln.run("plan", "fp8_gemm_nt", "n=576", "k=512", "m=1..9223372036854775807"),
                 "parameter m must be at most 2147483647, got 1..9223372036854775807")
    assert_error(kiln.run("compile", "per_token_cast_to_fp8", "m=1", "k=9223372036854775680"),
                 "per_token_cast_to_fp8: parameter k must be at most 2147483647")
    assert_error(kiln.run("plan", "fp8_gemm_nt", "--shapes", tmp_path / "missing.json"), "--shapes", "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert_error(kiln.run("plan", "fp8_gemm_nt", "--shapes", bad), "not valid JSON")
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"m_range": [1, 2], "nk": [[576]]}))
    assert_error(kiln.run("plan", "fp8_gemm_nt", "--shapes", wrong), "[n, k]", "[576]")
    assert_error(kiln.run("plan", "fp8_gemm_nt", "m=1", "--shapes", wrong), "m", status=2)
    # An empty "nk" plans nothing: an error (it crashed once), in plan and precompile, with or without --json.
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"warmup_model": {"m_range": [1, 16], "nk": []}}))
    for command in ("plan", "precompile"):
        for extra in ((), ("--json",)):
            assert_error(kiln.run(command, "fp8_gemm_nt", "--shapes", empty, *extra),
                         '"nk" must be a non-empty list of [n, k], got []')
    floats = tmp_path / "floats.json"
    floats.write_text(json.dumps({"m_range": [1, 1e30], "nk": [[576, 512]]}))
    assert_error(kiln.run("plan", "fp8_gemm_nt", "--shapes", floats), '"m_range" must be [lo, hi], two integers')
    assert_error(kiln.run("plan", "fp8_gemm_nt", "--shapes", tmp_path), "--shapes", "is a directory, not a JSON file")
    assert_error(kiln.run("plan", "fp8_gemm_nt", "n=576", "k=512", "m=1", "block_n=200"), "block_n", "200")
    assert_error(kiln.run("plan", "fp8_gemm_nt", "n=576", "k=512", "m=1", "split_k=3"), "split_k", "got 3")
    # The GEMMs' kernels are sm_90a's alone (WGMMA, setmaxnreg): any other target is refused by name, in plan and
    # precompile alike, before anything is compiled.
    for arch in ("sm_90", "sm_100a", "sm_80"):
        for command in ("plan", "precompile"):
            for op in ("fp8_gemm_nt", "bf16_gemm_nt"):
                assert_error(kiln.run(command, op, "n=576", "k=512", "m=1..64", "--arch", arch), op,
                             "written for sm_90a only", "WGMMA", f"got {arch}")
    assert_error(kiln.run("plan", "fp8_gemm_nt", "n=576", "k=512", "m=1", "split_k=2", "cluster_m=2"),
                 "split_k must be 0 or 1 when cluster_m is 2")
    assert_error(kiln.run("plan", "fp8_gemm_nt", "n=576", "k=512", "m=1", "split_k=2", "accumulate=1"),
                 "split_k", "accumulating form")


def test_split_k_override_forces_or_forbids_the_pairs(kiln):
    always = kiln.json("plan", "fp8_gemm_nt", "n=2112", "k=7168", "m=1..16384", "split_k=2", "--arch", ARCH)["kernels"]
    assert always and all("split_k=2" in k["spec"] and "block_m=256" not in k["spec"] for k in always)
    never = kiln.json("plan", "fp8_gemm_nt", "n=576", "k=7168", "m=1..16384", "split_k=1", "--arch", ARCH)["kernels"]
    assert never and all("split_k=1" in k["spec"] for k in never)
    chosen = kiln.json("plan", "fp8_gemm_nt", "n=576", "k=7168", "m=1..64", "--arch", ARCH)["kernels"]
    assert len(chosen) == 1 and "block_m=64 block_n=16" in chosen[0]["spec"] and "split_k=2" in chosen[0]["spec"]


def test_column_mapped_tiles_run_on_any_sm_count(kiln):
    # 176-column tiles take their columns by the column map: one walk, so any number of SMs serves them (the
    # column-class walks they replaced needed a cluster per class, 4 SMs at N = 576).
    tile = ["fp8_gemm_nt", "n=576", "k=512", "m=1000", "block_m=128", "block_n=176", "--arch", ARCH]
    for sms in ("num_sms=1", "num_sms=3"):
        ok = kiln.json("plan", *tile, sms)["kernels"]
        assert len(ok) == 1 and "block_m=128 block_n=176" in ok[0]["spec"]


def test_m_grouped_plans_one_block_kernels_and_precompiles_them(kiln):
    # The m-grouped form (m_grouped_fp8_gemm_nt_contiguous): every kernel takes one m block per CTA, at most eight
    # over every M, and `precompile` builds what `plan` lists.
    grouped = ["fp8_gemm_nt", "n=576", "k=512", "m=1..65536", "m_grouped=1", "--arch", ARCH]
    kernels = kiln.json("plan", *grouped)["kernels"]
    assert 1 <= len(kernels) <= 8
    for k in kernels:
        assert "m_grouped=true" in k["spec"] and "block_m=256" not in k["spec"] and "m-grouped" in k["detail"], k
    pieces_tile(kernels, 1, 65536)
    built = kiln.json("precompile", *grouped, "--backend", "nvrtc")["kernels"]
    assert sorted(k["spec"] for k in built) == sorted(k["spec"] for k in kernels)
    assert_error(kiln.run("plan", "fp8_gemm_nt", "n=576", "k=512", "m=64", "m_grouped=1", "block_m=256", "--arch",
                          ARCH), "block_m must be 0 (heuristic), 64 or 128 for the m-grouped form")


def test_masked_plans_the_m_grouped_tiles_masked_and_precompiles_them(kiln):
    # The masked form (m_grouped_fp8_gemm_nt_masked): the same tiles as the contiguous form's, each kernel masked; m is
    # the experts times expected_m, so a decode step of 32 experts x 20 tokens is m=640.
    masked = ["fp8_gemm_nt", "n=576", "k=512", "m=640", "m_grouped=1", "masked=1", "--arch", ARCH]
    kernels = kiln.json("plan", *masked)["kernels"]
    contiguous = kiln.json("plan", "fp8_gemm_nt", "n=576", "k=512", "m=640", "m_grouped=1", "--arch", ARCH)["kernels"]
    assert len(kernels) == 1 == len(contiguous)
    assert kernels[0]["spec"] == contiguous[0]["spec"] + " masked=true", (kernels, contiguous)
    assert "m-grouped masked" in kernels[0]["detail"]
    built = kiln.json("precompile", *masked, "--backend", "nvrtc")["kernels"]
    assert [k["spec"] for k in built] == [kernels[0]["spec"]]
    assert_error(kiln.run("plan", "fp8_gemm_nt", "n=576", "k=512", "m=64", "masked=1", "--arch", ARCH),
                 "parameter masked=1 needs m_grouped=1")


def test_bf16_gemm_plans_a_serving_range_and_precompiles_a_kernel(kiln):
    # The BF16 GEMM: at most eight kernels for every M of a serving warm-up, the range covered exactly once; a forced
    # tile is one kernel, built with NVRTC; bad overrides name the field.
    kernels = kiln.json("plan", "bf16_gemm_nt", "n=7168", "k=2048", "m=1..16384", "--arch", ARCH)["kernels"]
    assert 1 <= len(kernels) <= 8, kernels
    covered = sorted(tuple(r) for k in kernels for r in k["m_ranges"])
    assert covered[0][0] == 1 and covered[-1][1] == 16384
    assert all(a[1] + 1 == b[0] for a, b in zip(covered, covered[1:])), covered
    assert all(k["op"] == "bf16_gemm_nt" and k["spec"].startswith("n=7168 k=2048 block_m=") for k in kernels)
    forced = ["bf16_gemm_nt", "n=136", "k=520", "m=77", "block_m=128", "block_n=64", "cluster_m=2", "--arch", ARCH]
    built = kiln.json("precompile", *forced, "--backend", "nvrtc")["kernels"]
    assert len(built) == 1 and "block_m=128 block_n=64" in built[0]["spec"] and "cluster_m=2" in built[0]["spec"]
    assert_error(kiln.run("plan", "bf16_gemm_nt", "n=7168", "k=2048", "m=64", "block_n=24", "--arch", ARCH),
                 "block_n must be 0 (heuristic) or a multiple of 16 in 16..256, got 24")


def test_bf16_gemm_m_grouped_and_masked_plans_and_precompile(kiln):
    # The BF16 m-grouped forms (m_grouped_bf16_gemm_nt_contiguous and _masked): their own plans of 64- and 128-row
    # tiles without pairs, every kernel naming its grouping; the masked kernel at m = experts x expected_m is the
    # contiguous plan's at that m with grouping=2, and builds with NVRTC; 256-row tiles are refused.
    grouped = ["bf16_gemm_nt", "n=576", "k=520", "m=1..16384", "m_grouped=1", "--arch", ARCH]
    kernels = kiln.json("plan", *grouped)["kernels"]
    assert 1 <= len(kernels) <= 8, kernels
    for k in kernels:
        assert k["spec"].endswith("group_m=8 grouping=1") and "cluster_m=1" in k["spec"], k
        assert "block_m=256" not in k["spec"] and "m-grouped" in k["detail"], k
    masked = ["bf16_gemm_nt", "n=576", "k=520", "m=640", "m_grouped=1", "masked=1", "--arch", ARCH]
    planned = kiln.json("plan", *masked)["kernels"]
    contiguous = kiln.json("plan", "bf16_gemm_nt", "n=576", "k=520", "m=640", "m_grouped=1", "--arch", ARCH)["kernels"]
    assert len(planned) == 1 == len(contiguous)
    assert planned[0]["spec"] == contiguous[0]["spec"].replace("grouping=1", "grouping=2"), (planned, contiguous)
    assert "m-grouped masked" in planned[0]["detail"]
    built = kiln.json("precompile", *masked, "--backend", "nvrtc")["kernels"]
    assert [k["spec"] for k in built] == [planned[0]["spec"]]
    assert_error(kiln.run("plan", "bf16_gemm_nt", "n=576", "k=520", "m=64", "m_grouped=1", "block_m=256", "--arch",
                          ARCH), "block_m must be 0 (heuristic), 64 or 128 in the m-grouped forms")
    assert_error(kiln.run("plan", "bf16_gemm_nt", "n=576", "k=520", "m=64", "masked=1", "--arch", ARCH),
                 "parameter masked=1 needs m_grouped=1")


def running(pid: int) -> bool:
    """Whether the process exists and is not a zombie (an orphan's zombie waits for init to reap it)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


@pytest.mark.parametrize("signal_number", [signal.SIGINT, signal.SIGTERM])
def test_a_stopped_precompile_ends_its_compilers(kiln, tmp_path, signal_number):
    # NVCC runs in a process group of its own (Ctrl-C on the terminal does not reach it): kiln must end it, and what it
    # started, when it is stopped. This NVCC answers --version as the real one does, starts a grandchild, writes both
    # process ids and waits; kiln is stopped once the first of two compiles has written them.
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    pids = tmp_path / "pids"
    pids.mkdir()
    fake = tmp_path / "nvcc"
    fake.write_text(f'#!/bin/sh\nfor a in "$@"; do [ "$a" = --version ] && exec {nvcc} "$@"; done\n'
                    f'sleep 300 & echo "$$ $!" > {pids}/$$.tmp && mv {pids}/$$.tmp {pids}/$$\nwait\n')
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    env = dict(kiln.env, DG_JIT_NVCC_COMPILER=str(fake))
    proc = subprocess.Popen([str(kiln.binary), "precompile", "fp8_gemm_nt", "n=576", "k=512", "m=1..16384",
                             "--arch", ARCH, "-j", "2"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not any(pids.iterdir()) and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        started = [int(p) for f in pids.iterdir() if not f.name.endswith(".tmp") for p in f.read_text().split()]
        assert started, f"no compile started: {proc.poll()} {proc.stderr.read().decode() if proc.poll() else ''}"
        proc.send_signal(signal_number)
        assert proc.wait(timeout=30) == -signal_number, "kiln dies of the signal it was sent"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    deadline = time.monotonic() + 10
    alive = started
    while alive and time.monotonic() < deadline:
        alive = [pid for pid in started if running(pid)]
        time.sleep(0.05)
    for pid in alive:
        os.kill(pid, signal.SIGKILL)
    assert not alive, f"compiler processes {alive} outlived kiln"
