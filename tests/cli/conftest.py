"""Black-box tests of the `kiln` command.

The binary is $KILN_BUILD_DIR/kiln (the Makefile's cli-tests target sets KILN_BUILD_DIR); without it,
build/release/kiln is tried. Every test runs the command with its own DG_JIT_CACHE_DIR under tmp_path and with
every other DG_* variable removed, so tests neither see nor touch the user's cache or settings.
"""

import json
import os
import pathlib
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]

# The problem most tests compile: one DeepSeek-V3-sized per-token cast (a single kernel).
OP = "per_token_cast_to_fp8"
PROBLEM = ["m=4096", "k=7168"]
ARCH = "sm_90a"


def kiln_binary() -> pathlib.Path:
    build_dir = os.environ.get("KILN_BUILD_DIR")
    path = pathlib.Path(build_dir) / "kiln" if build_dir else REPO / "build" / "release" / "kiln"
    if not path.is_file() or not os.access(path, os.X_OK):
        pytest.fail(f"the kiln binary is not at {path}: build it first (make build), or set KILN_BUILD_DIR")
    return path


class Result:
    def __init__(self, proc: subprocess.CompletedProcess):
        self.returncode = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr

    def json(self):
        """The one JSON object on stdout (fails the test when stdout is not exactly that)."""
        try:
            value = json.loads(self.stdout)
        except json.JSONDecodeError as e:
            pytest.fail(f"stdout is not one JSON object ({e}):\n{self.stdout}\nstderr:\n{self.stderr}")
        assert isinstance(value, dict), f"stdout is JSON but not an object: {self.stdout}"
        return value

    def __repr__(self):
        return f"<kiln exit {self.returncode}\nstdout:\n{self.stdout}\nstderr:\n{self.stderr}>"


class Kiln:
    """Runs the kiln command with a private cache directory and a clean DG_* environment."""

    def __init__(self, binary: pathlib.Path, cache_dir: pathlib.Path):
        self.binary = binary
        self.cache_dir = cache_dir
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("DG_")}
        self.env["DG_JIT_CACHE_DIR"] = str(cache_dir)

    def run(self, *args, env=None, unset=(), check=False, timeout=300) -> Result:
        full_env = dict(self.env)
        for name in unset:
            full_env.pop(name, None)
        full_env.update(env or {})
        proc = subprocess.run([str(self.binary), *map(str, args)], env=full_env, capture_output=True, text=True,
                              timeout=timeout)
        result = Result(proc)
        if check:
            assert result.returncode == 0, result
        return result

    def json(self, *args, env=None, unset=()):
        """Runs with --json, expects success, returns the object."""
        result = self.run(*args, "--json", env=env, unset=unset)
        assert result.returncode == 0, result
        return result.json()

    def compile(self, *extra, env=None):
        return self.json("compile", OP, *PROBLEM, "--arch", ARCH, *extra, env=env)

    def entry_files(self, key: str):
        """The cache entry file(s) for one key (<key>.kiln, wherever the fan-out puts it)."""
        return [p for p in self.cache_dir.rglob(f"{key}.kiln") if p.is_file()]


@pytest.fixture(scope="session")
def binary() -> pathlib.Path:
    return kiln_binary()


@pytest.fixture
def kiln(binary, tmp_path) -> Kiln:
    return Kiln(binary, tmp_path / "cache")


def assert_error(result: Result, *needles, status=1):
    """A failure: the expected exit status, nothing on stdout, and a message on stderr naming each needle."""
    assert result.returncode == status, result
    assert result.stdout == "", result
    assert result.stderr.startswith("kiln: error: "), result
    for needle in needles:
        assert needle in result.stderr, f"{needle!r} not in stderr: {result!r}"
