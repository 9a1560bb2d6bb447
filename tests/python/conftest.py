"""Shared set-up for the Python package tests (run against the installed package: `make python-tests`).

kiln reads its DG_JIT_* configuration once per process, so this file clears every DG_JIT_* variable and points
the cache at a private temporary directory before kiln is first used; tests that need another configuration
or a cache of their own run Python in a subprocess (`run_python`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

for _name in list(os.environ):
    if _name.startswith("DG_JIT_") or _name == "DG_PRINT_CONFIGS":
        del os.environ[_name]
_SESSION_CACHE = tempfile.mkdtemp(prefix="kiln-pytest-cache-")
os.environ["DG_JIT_CACHE_DIR"] = _SESSION_CACHE

HERE = Path(__file__).resolve().parent


def pytest_sessionfinish(session, exitstatus):
    shutil.rmtree(_SESSION_CACHE, ignore_errors=True)


def run_python(code: str, env: dict | None = None, timeout: int = 900) -> subprocess.CompletedProcess:
    """Runs `code` in a fresh interpreter (this one's), with `env` added to a copy of the environment
    (a value of None removes the variable). tests/python is on sys.path so `fakes` imports."""
    full_env = dict(os.environ)
    for key, value in (env or {}).items():
        if value is None:
            full_env.pop(key, None)
        else:
            full_env[key] = value
    full_env["PYTHONPATH"] = str(HERE) + os.pathsep + full_env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full_env, capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture
def python():
    """run_python, checked: returns stdout, fails the test with stderr when the snippet fails."""
    def run(code: str, env: dict | None = None) -> str:
        result = run_python(code, env)
        assert result.returncode == 0, f"snippet failed ({result.returncode}):\n{result.stderr}"
        return result.stdout
    return run


@pytest.fixture
def cache_dir(tmp_path):
    """A fresh cache directory for a subprocess (pass it as DG_JIT_CACHE_DIR)."""
    d = tmp_path / "kiln cache"  # a space in the path, on purpose
    return str(d)
