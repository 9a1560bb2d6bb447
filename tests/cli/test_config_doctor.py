"""`kiln config` and `kiln doctor`."""

import pytest

VARIABLES = [
    "DG_JIT_CACHE_DIR", "DG_JIT_USE_NVRTC", "DG_JIT_NVCC_COMPILER", "DG_JIT_CPP_STANDARD", "DG_JIT_DEBUG",
    "DG_JIT_PRINT_COMPILER_COMMAND", "DG_JIT_PRINT_LOAD_TIME", "DG_JIT_PTXAS_VERBOSE", "DG_JIT_PTXAS_CHECK",
    "DG_JIT_DUMP_PTX", "DG_JIT_DUMP_SASS", "DG_JIT_DUMP_ASM", "DG_JIT_USE_RUNTIME_API", "DG_JIT_WITH_LINEINFO",
    "DG_PRINT_CONFIGS", "DG_JIT_ARCH", "DG_JIT_COMPILE_TIMEOUT",
]


def test_config_lists_every_variable_with_its_origin(kiln):
    result = kiln.run("config", check=True)
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["setting", "variable", "value", "origin"]
    for variable in VARIABLES:
        line = next((l for l in lines if f" {variable} " in l), None)
        assert line is not None, f"{variable} missing from:\n{result.stdout}"
        expected = "environment" if variable == "DG_JIT_CACHE_DIR" else "default"
        assert expected in line, line


def test_config_json(kiln):
    out = kiln.json("config", env={"DG_JIT_USE_NVRTC": "on", "DG_JIT_CPP_STANDARD": "17"})
    settings = {s["variable"]: s for s in out["settings"]}
    assert set(VARIABLES) <= set(settings)
    for s in out["settings"]:
        assert set(s) == {"name", "variable", "value", "origin", "detail", "doc"}
        assert s["origin"] in ("default", "environment")
        assert s["doc"]
    assert settings["DG_JIT_USE_NVRTC"]["value"] == "nvrtc"
    assert settings["DG_JIT_USE_NVRTC"]["origin"] == "environment"
    assert settings["DG_JIT_CPP_STANDARD"]["value"] == "17"
    assert settings["DG_JIT_CACHE_DIR"]["value"] == str(kiln.cache_dir)
    assert settings["DG_JIT_CACHE_DIR"]["origin"] == "environment"
    assert settings["DG_JIT_DEBUG"]["value"] == "false"
    assert settings["DG_JIT_DEBUG"]["origin"] == "default"
    assert out["unknown_variables"] == []


def test_config_default_cache_dir_follows_home(kiln, tmp_path):
    out = kiln.json("config", env={"HOME": str(tmp_path)}, unset=["DG_JIT_CACHE_DIR"])
    cache = next(s for s in out["settings"] if s["variable"] == "DG_JIT_CACHE_DIR")
    assert cache["value"] == str(tmp_path / ".deep_gemm")
    assert cache["origin"] == "default"
    assert "$HOME" in cache["detail"]


def test_config_without_home(kiln):
    out = kiln.json("config", unset=["DG_JIT_CACHE_DIR", "HOME"])
    cache = next(s for s in out["settings"] if s["variable"] == "DG_JIT_CACHE_DIR")
    assert cache["value"].endswith(".deep_gemm") or cache["value"].startswith("/tmp/kiln-cache-")
    assert cache["detail"]  # says where the value came from


def test_config_warns_about_unknown_variables(kiln):
    result = kiln.run("config", env={"DG_JIT_USE_NVRTX": "1"})
    assert result.returncode == 0, result
    assert "DG_JIT_USE_NVRTX" in result.stderr
    assert "DG_JIT_USE_NVRTX" not in result.stdout


def test_an_unknown_variable_is_named_with_its_near_miss_where_kernels_are_built(kiln):
    env = {"DG_JIT_USE_NVRT": "1"}
    result = kiln.run("config", env=env)
    assert "DG_JIT_USE_NVRT is set but is not a kiln setting (did you mean DG_JIT_USE_NVRTC?)" in result.stderr, result
    compiled = kiln.run("compile", "per_token_cast_to_fp8", "m=128", "k=512", "--arch", "sm_90a", "--backend", "nvrtc",
                        env=env)
    assert compiled.returncode == 0, compiled
    assert compiled.stderr.count("DG_JIT_USE_NVRT is set but is not a kiln setting (did you mean") == 1, compiled
    assert kiln.run("config", "--json", env=env).json()["unknown_variables"] == ["DG_JIT_USE_NVRT"]


def test_config_never_creates_the_cache(kiln):
    kiln.run("config", check=True)
    assert not kiln.cache_dir.exists()


def doctor_checks(kiln, **kwargs):
    result = kiln.run("doctor", "--json", **kwargs)
    out = result.json()
    assert set(out) == {"ok", "checks"}
    assert out["ok"] == (result.returncode == 0), result
    for check in out["checks"]:
        assert set(check) == {"what", "status", "detail", "advice"}
        assert check["status"] in ("ok", "warning", "error")
        if check["status"] != "ok":
            assert check["advice"], check
    return result, {c["what"]: c for c in out["checks"]}


def test_doctor_reports_toolchain_and_cache(kiln):
    result, checks = doctor_checks(kiln)
    for what in ("kiln", "configuration", "CUDA toolkit", "NVCC", "NVRTC", "compiler backend", "CUDA driver",
                 "cache directory"):
        assert what in checks, f"{what} missing: {result!r}"
    # The toolkit these tests build with is complete: both compilers work.
    assert checks["NVRTC"]["status"] == "ok", checks["NVRTC"]
    assert checks["NVCC"]["status"] == "ok", checks["NVCC"]
    assert checks["cache directory"]["status"] == "ok"
    assert str(kiln.cache_dir) in checks["cache directory"]["detail"]
    assert not kiln.cache_dir.exists()  # the doctor looks; it does not create


def test_doctor_flags_a_cache_directory_the_cache_would_refuse(kiln, tmp_path):
    # The cache refuses a directory others can write (CACHE.md, "Who may write the cache"); the doctor says so before
    # a serving process fails on it.
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # no sticky bit
    result, checks = doctor_checks(kiln, env={"DG_JIT_CACHE_DIR": str(shared)})
    assert result.returncode == 1, result
    check = checks["cache directory"]
    assert check["status"] == "error", check
    assert "writable by its group and by others" in check["detail"] and str(shared) in check["detail"], check
    assert f"chmod go-w {shared}" in check["advice"], check
    # The sticky bit on the root (as /tmp) is fine: others cannot rename or remove what kiln keeps in it.
    shared.chmod(0o1777)
    result, checks = doctor_checks(kiln, env={"DG_JIT_CACHE_DIR": str(shared)})
    assert checks["cache directory"]["status"] == "ok", checks["cache directory"]


@pytest.mark.parametrize("in_the_way", ["kiln", "kiln/entries"])
def test_doctor_flags_a_file_where_the_cache_needs_a_directory(kiln, tmp_path, in_the_way):
    # A compile cannot store its kernel there (kiln/ itself: every command refuses the cache): an error, not a warning.
    root = tmp_path / "cache"
    (root / in_the_way).parent.mkdir(parents=True, exist_ok=True)
    (root / in_the_way).write_text("")
    result, checks = doctor_checks(kiln, env={"DG_JIT_CACHE_DIR": str(root)})
    assert result.returncode == 1, result
    check = checks["cache directory"]
    assert check["status"] == "error" and f"{root / in_the_way} exists and is not a directory" in check["detail"], check
    compiled = kiln.run("compile", "per_token_cast_to_fp8", "m=128", "k=512", "--arch", "sm_90a", "--backend", "nvrtc",
                        env={"DG_JIT_CACHE_DIR": str(root)})
    assert compiled.returncode == 1, compiled


def test_doctor_without_a_gpu_says_the_driver_is_missing(kiln):
    result, checks = doctor_checks(kiln)
    driver = checks["CUDA driver"]
    if driver["status"] == "ok":
        pytest.skip("this machine has a CUDA driver")
    assert driver["status"] == "warning"
    assert "libcuda" in driver["detail"]
    assert "kiln compile" in driver["advice"]
    assert result.returncode == 0, result  # compiling ahead of time works: not an error

    human = kiln.run("doctor")
    assert human.returncode == 0, human
    assert "CUDA driver" in human.stdout
    assert "what to do" in human.stdout


def test_doctor_checks_the_target_arch_against_the_operations(kiln):
    # DG_JIT_ARCH set: fine at sm_90a; a warning naming the operations whose kernels are not written for another.
    _, checks = doctor_checks(kiln, env={"DG_JIT_ARCH": "sm_90a"})
    assert checks["target arch"]["status"] == "ok"
    result, checks = doctor_checks(kiln, env={"DG_JIT_ARCH": "sm_100a"})
    arch = checks["target arch"]
    assert arch["status"] == "warning", arch
    assert "sm_100a (set by DG_JIT_ARCH): the kernels of bf16_gemm_nt, fp8_gemm_nt are not written for it" in \
        arch["detail"]
    assert "per_token_cast_to_fp8" not in arch["detail"]  # the casts build for sm_90 and later
    assert "sm_90a" in arch["advice"]
    assert result.returncode == 0, result  # the casts can still be built: not an error
    _, checks = doctor_checks(kiln, env={"DG_JIT_ARCH": "sm_89"})
    assert "per_token_cast_to_fp8" in checks["target arch"]["detail"]
    _, checks = doctor_checks(kiln)
    assert "target arch" not in checks  # unset: the GPU's arch, nothing to check


def test_doctor_reports_a_bad_environment(kiln):
    result, checks = doctor_checks(kiln, env={"DG_JIT_CPP_STANDARD": "banana"})
    assert result.returncode == 1
    assert checks["configuration"]["status"] == "error"
    assert "DG_JIT_CPP_STANDARD" in checks["configuration"]["detail"]
    assert "banana" in checks["configuration"]["detail"]
    # The checks that need the configuration are said to be skipped, not silently left out.
    assert checks["other checks"]["status"] == "warning" and "were not checked" in checks["other checks"]["detail"]
    human = kiln.run("doctor", env={"DG_JIT_CPP_STANDARD": "banana"})
    assert human.returncode == 1
    assert "DG_JIT_CPP_STANDARD" in human.stdout
    assert human.stderr.startswith("kiln: error: ")


def broken_nvcc(tmp_path):
    """An executable that passes the configuration's checks but fails as a compiler."""
    nvcc = tmp_path / "broken bin" / "nvcc"
    nvcc.parent.mkdir()
    nvcc.write_text("#!/bin/sh\necho 'nvcc: this toolkit is broken' >&2\nexit 3\n")
    nvcc.chmod(0o755)
    return nvcc


def test_doctor_flags_an_unusable_backend(kiln, tmp_path):
    env = {"DG_JIT_NVCC_COMPILER": str(broken_nvcc(tmp_path))}
    result, checks = doctor_checks(kiln, env=env)
    assert checks["NVCC"]["status"] == "error", checks["NVCC"]
    assert checks["compiler backend"]["status"] == "error"
    assert "DG_JIT_USE_NVRTC=1" in checks["compiler backend"]["advice"]
    assert checks["NVRTC"]["status"] == "ok"
    assert result.returncode == 1
    # With NVRTC selected, the broken NVCC is only a warning.
    result, checks = doctor_checks(kiln, env={**env, "DG_JIT_USE_NVRTC": "1"})
    assert checks["NVCC"]["status"] == "warning"
    assert checks["compiler backend"]["status"] == "ok"
    assert result.returncode == 0


def test_a_broken_nvcc_fails_compile_but_not_nvrtc(kiln, tmp_path):
    from conftest import ARCH, OP, PROBLEM, assert_error

    env = {"DG_JIT_NVCC_COMPILER": str(broken_nvcc(tmp_path))}
    assert_error(kiln.run("compile", OP, *PROBLEM, "--arch", ARCH, env=env), "nvcc")
    assert kiln.compile("--backend", "nvrtc", env=env)["hit"] is False
