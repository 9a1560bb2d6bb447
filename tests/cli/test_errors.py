"""Every error: a non-zero exit status, nothing on stdout, a message on stderr naming what was wrong."""

import pytest

from conftest import ARCH, OP, PROBLEM, assert_error

BOOLEAN_VARIABLES = [
    "DG_JIT_USE_NVRTC", "DG_JIT_DEBUG", "DG_JIT_PRINT_COMPILER_COMMAND", "DG_JIT_PRINT_LOAD_TIME",
    "DG_JIT_PTXAS_VERBOSE", "DG_JIT_PTXAS_CHECK", "DG_JIT_DUMP_PTX", "DG_JIT_DUMP_SASS", "DG_JIT_DUMP_ASM",
    "DG_JIT_USE_RUNTIME_API", "DG_JIT_WITH_LINEINFO", "DG_PRINT_CONFIGS",
]


def test_unknown_op(kiln):
    assert_error(kiln.run("compile", "no_such_op", "m=1", "--json"), "no_such_op", OP)


def test_missing_parameter(kiln):
    assert_error(kiln.run("compile", OP, "m=4096"), "k")


def test_unknown_parameter(kiln):
    assert_error(kiln.run("compile", OP, *PROBLEM, "banana=3"), "banana")


def test_out_of_range_parameter(kiln):
    assert_error(kiln.run("compile", OP, "m=4096", "k=100", "--json"), "k", "100")
    assert_error(kiln.run("compile", OP, "m=-1", "k=128"), "m", "-1")


@pytest.mark.parametrize("param", ["m4096", "=5", "m=abc", "m=12x", "m="])
def test_malformed_parameter_is_a_usage_error(kiln, param):
    assert_error(kiln.run("compile", OP, param, "k=128"), param.split("=")[-1] if "=" in param else param,
                 status=2)


def test_parameter_given_twice(kiln):
    assert_error(kiln.run("compile", OP, "m=1", "m=2", "k=128"), "m", status=2)


@pytest.mark.parametrize("arch", ["banana", "sm90a", "90a"])
def test_bad_arch(kiln, arch):
    assert_error(kiln.run("compile", OP, *PROBLEM, "--arch", arch), arch)


@pytest.mark.parametrize("arch", ["sm_80", "sm_89"])
def test_an_arch_the_kernels_are_not_written_for(kiln, arch):
    # Refused by name before any compile, not left to ptxas (the casts use griddepcontrol: sm_90 and later).
    assert_error(kiln.run("compile", OP, *PROBLEM, "--arch", arch), OP, "written for sm_90 and later",
                 "griddepcontrol", f"got {arch}")
    assert not list(kiln.cache_dir.rglob("*.cubin"))


def test_a_dg_jit_arch_the_kernels_are_not_written_for(kiln):
    # With no --arch, plan/precompile/compile build for DG_JIT_ARCH: one the op's kernels are not written for is
    # refused by the variable's name (sm_90 has no WGMMA); the casts build for it.
    for command in ("plan", "precompile", "compile"):
        for op in ("fp8_gemm_nt", "bf16_gemm_nt"):
            assert_error(kiln.run(command, op, "n=576", "k=512", "m=64", env={"DG_JIT_ARCH": "sm_90"}),
                         f"{op}: DG_JIT_ARCH=sm_90 is not an arch its kernels are written for: sm_90a only")
    assert not list(kiln.cache_dir.rglob("*.cubin"))
    assert kiln.run("plan", OP, *PROBLEM, env={"DG_JIT_ARCH": "sm_90"}).returncode == 0
    # --arch names the target itself: the variable is not consulted.
    assert_error(kiln.run("plan", "fp8_gemm_nt", "n=576", "k=512", "m=64", "--arch", "sm_90",
                          env={"DG_JIT_ARCH": "sm_90a"}), "got sm_90")
    assert kiln.run("plan", "fp8_gemm_nt", "n=576", "k=512", "m=64", "--arch", "sm_90a",
                    env={"DG_JIT_ARCH": "sm_90"}).returncode == 0


def test_bad_backend_is_a_usage_error(kiln):
    assert_error(kiln.run("compile", OP, *PROBLEM, "--backend", "gcc"), "gcc", status=2)


@pytest.mark.parametrize("args", [[], ["frob"], ["cache"], ["cache", "frob"], ["compile"], ["cache", "ls", "--frob"]])
def test_usage_errors(kiln, args):
    assert_error(kiln.run(*args), status=2)


@pytest.mark.parametrize("variable", BOOLEAN_VARIABLES)
def test_bad_boolean_variable(kiln, variable):
    result = kiln.run("config", env={variable: "yes please"})
    assert_error(result, variable, "'yes please'", "true/false")


@pytest.mark.parametrize("variable,value,expected", [
    ("DG_JIT_CPP_STANDARD", "banana", "17 or 20"),
    ("DG_JIT_CPP_STANDARD", "14", "17 or 20"),
    ("DG_JIT_NVCC_COMPILER", "/nonexistent/bin/nvcc", "does not exist"),
    ("DG_JIT_ARCH", "sm90", "sm_90a"),
    ("DG_JIT_COMPILE_TIMEOUT", "0", "from 1 to"),
    ("DG_JIT_COMPILE_TIMEOUT", "soon", "from 1 to"),
])
def test_bad_variable_values(kiln, variable, value, expected):
    assert_error(kiln.run("config", env={variable: value}), variable, f"'{value}'", expected)


def test_cache_dir_that_is_a_regular_file(kiln, tmp_path):
    file = tmp_path / "a-file"
    file.write_text("not a directory")
    for args in (["config"], ["cache", "stats", "--json"], ["compile", OP, *PROBLEM, "--arch", ARCH]):
        assert_error(kiln.run(*args, env={"DG_JIT_CACHE_DIR": str(file)}), "DG_JIT_CACHE_DIR", str(file),
                     "not a directory")


def test_bad_environment_fails_every_command(kiln):
    env = {"DG_JIT_USE_NVRTC": "yes please"}
    for args in (["compile", OP, *PROBLEM, "--arch", ARCH, "--json"], ["cache", "ls"], ["cache", "stats", "--json"]):
        assert_error(kiln.run(*args, env=env), "DG_JIT_USE_NVRTC", "'yes please'")


def test_empty_value_means_unset(kiln):
    out = kiln.json("config", env={"DG_JIT_USE_NVRTC": "", "DG_JIT_CPP_STANDARD": ""})
    settings = {s["variable"]: s for s in out["settings"]}
    assert settings["DG_JIT_USE_NVRTC"]["origin"] == "default"
    assert settings["DG_JIT_USE_NVRTC"]["value"] == "nvcc"
    assert settings["DG_JIT_CPP_STANDARD"]["value"] == "20"


def test_missing_default_nvcc_fails_only_when_nvcc_is_used(kiln, tmp_path):
    # No nvcc anywhere kiln looks, except possibly the toolkit kiln was built with; NVRTC still works.
    env = {"CUDA_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    assert kiln.run("config", env=env).returncode == 0
    out = kiln.compile("--backend", "nvrtc", env=env)
    assert out["backend"] == "nvrtc"
