"""`kiln compile`: ahead-of-time compiles, cache hits, keys, and the JSON fields scripts rely on."""

import re
import shutil

from conftest import ARCH, OP, PROBLEM

KERNEL_FIELDS = {"op", "spec", "key", "hit", "compile_ms", "cubin_bytes", "backend", "arch", "kernel_name"}


def test_first_compile_misses_second_hits_with_the_same_key(kiln):
    first = kiln.compile()
    assert first["hit"] is False
    assert first["compile_ms"] > 0
    assert first["cubin_bytes"] > 0
    assert first["backend"] == "nvcc"
    assert first["arch"] == ARCH
    assert re.fullmatch(r"[0-9a-f]{32}", first["key"]), first["key"]

    second = kiln.compile()
    assert second["hit"] is True
    assert second["compile_ms"] == 0
    assert second["key"] == first["key"]
    assert second["cubin_bytes"] == first["cubin_bytes"]


def test_json_has_kernels_list_and_first_kernel_at_top_level(kiln):
    out = kiln.compile("--backend", "nvrtc")
    assert out["op"] == OP
    assert out["problem"] == {"m": 4096, "k": 7168}
    assert isinstance(out["kernels"], list) and len(out["kernels"]) >= 1
    for kernel in out["kernels"]:
        assert set(kernel) == KERNEL_FIELDS
        assert kernel["op"] == OP
    first = out["kernels"][0]
    for field in KERNEL_FIELDS - {"op"}:
        assert out[field] == first[field], field
    assert isinstance(out["hit"], bool)
    assert isinstance(out["cubin_bytes"], int)
    assert "k=7168" in out["spec"]


def test_nvrtc_gives_a_different_key(kiln):
    nvcc = kiln.compile()
    nvrtc = kiln.compile("--backend", "nvrtc")
    assert nvrtc["backend"] == "nvrtc"
    assert nvrtc["hit"] is False
    assert nvrtc["compile_ms"] > 0
    assert nvrtc["key"] != nvcc["key"]
    again = kiln.compile("--backend", "nvrtc")
    assert again["hit"] is True and again["key"] == nvrtc["key"]
    # The environment selects the same backend, hence the same key.
    from_env = kiln.compile(env={"DG_JIT_USE_NVRTC": "1"})
    assert from_env["backend"] == "nvrtc"
    assert from_env["hit"] is True and from_env["key"] == nvrtc["key"]


def test_debug_switches_do_not_change_the_key_but_lineinfo_does(kiln):
    base = kiln.compile("--backend", "nvrtc")
    quiet = kiln.compile("--backend", "nvrtc", env={"DG_JIT_PRINT_LOAD_TIME": "1", "DG_PRINT_CONFIGS": "1"})
    assert quiet["hit"] is True and quiet["key"] == base["key"]
    lineinfo = kiln.compile("--backend", "nvrtc", env={"DG_JIT_WITH_LINEINFO": "1"})
    assert lineinfo["hit"] is False
    assert lineinfo["key"] != base["key"]


def test_debug_prints_to_stderr_only_and_keeps_the_key(kiln):
    base = kiln.compile("--backend", "nvrtc")
    result = kiln.run("compile", OP, *PROBLEM, "--arch", ARCH, "--backend", "nvrtc", "--json",
                      env={"DG_JIT_DEBUG": "1"})
    assert result.returncode == 0, result
    out = result.json()  # stdout stays exactly one JSON object
    assert out["hit"] is True and out["key"] == base["key"]


def test_verbose_switches_keep_stdout_one_json_object_and_dump_ptx(kiln):
    env = {"DG_JIT_PRINT_COMPILER_COMMAND": "1", "DG_JIT_PTXAS_VERBOSE": "1", "DG_JIT_DUMP_PTX": "1",
           "DG_PRINT_CONFIGS": "1", "DG_JIT_PRINT_LOAD_TIME": "1"}
    result = kiln.run("compile", OP, "m=128", "k=256", "--arch", ARCH, "--backend", "nvrtc", "--json", env=env)
    assert result.returncode == 0, result
    out = result.json()
    assert out["hit"] is False
    assert result.stderr  # the command and the ptxas report went to stderr
    ptx = list(kiln.cache_dir.rglob(f"{out['key']}.ptx"))
    assert len(ptx) == 1 and ".version" in ptx[0].read_text()


def test_arch_from_environment(kiln):
    explicit = kiln.compile("--backend", "nvrtc")
    result = kiln.run("compile", OP, *PROBLEM, "--backend", "nvrtc", "--json", env={"DG_JIT_ARCH": ARCH})
    assert result.returncode == 0, result
    out = result.json()
    assert out["arch"] == ARCH and out["key"] == explicit["key"] and out["hit"] is True


def test_a_moved_cache_stays_valid(kiln, tmp_path):
    first = kiln.compile("--backend", "nvrtc")
    moved = tmp_path / "moved cache"  # a space too
    shutil.copytree(kiln.cache_dir, moved)
    out = kiln.compile("--backend", "nvrtc", env={"DG_JIT_CACHE_DIR": str(moved)})
    assert out["hit"] is True
    assert out["key"] == first["key"]


def test_human_output_is_a_table(kiln):
    result = kiln.run("compile", OP, *PROBLEM, "--arch", ARCH, "--backend", "nvrtc")
    assert result.returncode == 0, result
    lines = result.stdout.splitlines()
    assert lines[0].split()[:5] == ["op", "spec", "arch", "backend", "hit"]
    assert "key" in lines[0]
    assert OP in lines[1] and ARCH in lines[1] and "nvrtc" in lines[1] and " no " in lines[1]
    key = lines[1].split()[-1]
    assert re.fullmatch(r"[0-9a-f]{32}", key)
    again = kiln.run("compile", OP, *PROBLEM, "--arch", ARCH, "--backend", "nvrtc")
    assert " yes " in again.stdout.splitlines()[1]
    assert again.stdout.splitlines()[1].split()[-1] == key


def test_a_problem_needing_no_kernel(kiln):
    out = kiln.json("compile", OP, "m=0", "k=128", "--arch", ARCH)
    assert out["kernels"] == []
    assert "key" not in out
    human = kiln.run("compile", OP, "m=0", "k=128", "--arch", ARCH, check=True)
    assert "needs no kernel" in human.stdout


def test_ops_lists_operations_and_parameters(kiln):
    out = kiln.json("ops")
    names = [op["name"] for op in out["ops"]]
    assert OP in names
    per_token = next(op for op in out["ops"] if op["name"] == OP)
    assert [p["name"] for p in per_token["params"]] == ["m", "k"]
    assert all(p["doc"] for p in per_token["params"])
    assert per_token["summary"]
    assert per_token["targets"] == "sm_90 and later (they use griddepcontrol for programmatic dependent launch)"
    gemm = next(op for op in out["ops"] if op["name"] == "fp8_gemm_nt")
    assert gemm["targets"].startswith("sm_90a only (they use WGMMA")
    human = kiln.run("ops", check=True)
    assert f"{OP} m=N k=N" in human.stdout
    assert "  targets: sm_90a only" in human.stdout


def test_version(kiln):
    result = kiln.run("--version", check=True)
    assert re.fullmatch(r"kiln \d+\.\d+\.\d+\n", result.stdout), result
