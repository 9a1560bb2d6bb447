"""`python -m kiln` and the `kiln` console script run the `kiln` command installed in the package."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import kiln


def _run(args, cache_dir, exe=None):
    env = dict(os.environ, DG_JIT_CACHE_DIR=cache_dir)
    cmd = [sys.executable, "-m", "kiln", *args] if exe is None else [str(exe), *args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)


def test_python_m_kiln_runs_the_command(cache_dir):
    help_text = _run(["--help"], cache_dir)
    assert help_text.returncode == 0 and "doctor" in help_text.stdout and "compile" in help_text.stdout
    config = _run(["config"], cache_dir)
    assert config.returncode == 0 and "DG_JIT_CACHE_DIR" in config.stdout and cache_dir in config.stdout


def test_errors_keep_the_commands_exit_status_and_stderr(cache_dir):
    result = _run(["compile", "no_such_op", "m=1", "--arch", "sm_90a"], cache_dir)
    assert result.returncode != 0
    assert "no_such_op" in result.stderr


def test_the_command_and_the_module_agree_on_keys(cache_dir, python):
    result = _run(["compile", "per_block_cast_to_fp8", "n=256", "k=512", "--arch", "sm_90a", "--backend", "nvrtc",
                   "--json"], cache_dir)
    assert result.returncode == 0, result.stderr
    compiled = json.loads(result.stdout)
    out = python("""
        import json, kiln
        print(json.dumps(kiln.plan("per_block_cast_to_fp8", n=256, k=512, arch="sm_90a", backend="nvrtc")))
        print(json.dumps(kiln.precompile("per_block_cast_to_fp8", n=256, k=512, arch="sm_90a", backend="nvrtc")))
    """, env={"DG_JIT_CACHE_DIR": cache_dir})
    planned, built = (json.loads(line) for line in out.splitlines())
    key = compiled["key"] if "key" in compiled else compiled["kernels"][0]["key"]
    assert planned[0]["key"] == key == built[0]["key"]
    assert built[0]["hit"] is True  # the command's compile is in the cache the module reads


def test_console_script(cache_dir):
    script = Path(sys.executable).parent / "kiln"
    if not script.exists():
        pytest.skip("the package is not installed in this interpreter's environment with its scripts")
    result = _run(["config", "--json"], cache_dir, exe=script)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)


def test_a_missing_command_is_reported(monkeypatch, tmp_path, capsys):
    from kiln import __main__ as entry
    monkeypatch.setattr(entry, "executable", lambda: tmp_path / "absent")
    assert entry.main(["--help"]) == 127
    assert "missing from this installation" in capsys.readouterr().err
    assert kiln.__version__
