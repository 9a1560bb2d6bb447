"""Who may write the cache: a cache directory another user owns or may write is refused, naming the directory,
the owner or mode and what to do; a read-only layer others may write is skipped (docs/CACHE.md, "Who may write
the cache")."""

import os
import random
import shutil
import subprocess

import pytest

from conftest import ARCH, OP, PROBLEM, assert_error


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o757])
def test_a_cache_directory_others_can_write_is_refused(kiln, mode):
    kiln.cache_dir.mkdir()
    kiln.cache_dir.chmod(mode)
    for args in (("cache", "stats"), ("compile", OP, *PROBLEM, "--arch", ARCH, "--backend", "nvrtc")):
        result = kiln.run(*args)
        assert_error(result, f"kiln refuses the kernel cache directory {kiln.cache_dir}: it is writable by",
                     f"(mode 0{mode:o}, no sticky bit)", f"chmod go-w {kiln.cache_dir}", "DG_JIT_CACHE_DIR")
    assert not (kiln.cache_dir / "kiln").exists(), "nothing is created in a refused directory"


def test_a_sticky_shared_root_is_used(kiln):
    kiln.cache_dir.mkdir()
    kiln.cache_dir.chmod(0o1777)
    assert kiln.compile("--backend", "nvrtc")["hit"] is False
    assert (kiln.cache_dir / "kiln").stat().st_mode & 0o7777 == 0o700


def test_a_layer_others_can_write_is_skipped(kiln, tmp_path):
    out = kiln.compile("--backend", "nvrtc")
    (kiln.cache_dir / "kiln" / "entries").chmod(0o777)
    layered = {"DG_JIT_CACHE_DIR": f"{tmp_path / 'fresh'}:{kiln.cache_dir}"}
    again = kiln.run("compile", OP, *PROBLEM, "--arch", ARCH, "--backend", "nvrtc", "--json", env=layered)
    assert again.returncode == 0, again
    assert again.json()["hit"] is False and again.json()["key"] == out["key"], "compiled, not read from the layer"
    assert f"the read-only cache layer {kiln.cache_dir} (layer 1) cannot be used" in again.stderr
    assert "writable by its group and by others (mode 0777)" in again.stderr
    layer = kiln.json("cache", "stats", env=layered)["tiers"][1]
    assert layer["available"] is False and "writable by" in layer["state"]


def other_uids():
    """Two uids with no password entry (as in a container run with --user), or a skip."""
    import pwd
    for _ in range(100):
        victim = random.randrange(40000, 60000)
        try:
            pwd.getpwuid(victim)
            pwd.getpwuid(victim + 1)
        except KeyError:
            return victim, victim + 1
    pytest.skip("no free uids")


def test_the_tmp_fallback_made_first_by_another_user_is_refused(kiln, binary, tmp_path):
    """The audit's plant: HOME unset and no password entry, so the cache is the predictable /tmp/kiln-cache-<uid>;
    another user creates it first, world-writable, with an entry that verifies. The victim must not load it."""
    if os.geteuid() != 0:
        pytest.skip("running as another uid needs root")
    if not all(os.access(p, os.X_OK) for p in (binary, *binary.parents)):
        pytest.skip("the kiln binary cannot be run by other users from here")
    planted = kiln.compile("--backend", "nvrtc")  # a valid entry, as the planter would make
    victim, planter = other_uids()
    fallback = f"/tmp/kiln-cache-{victim}"
    shutil.rmtree(fallback, ignore_errors=True)
    shutil.copytree(kiln.cache_dir, fallback)
    try:
        for path in [fallback, *(os.path.join(d, n) for d, ds, fs in os.walk(fallback) for n in ds + fs)]:
            os.chown(path, planter, planter)
        os.chmod(fallback, 0o777)
        env = {k: v for k, v in os.environ.items() if not k.startswith("DG_") and k != "HOME"}
        env["DG_JIT_USE_NVRTC"] = "1"
        args = [str(binary), "compile", OP, *PROBLEM, "--arch", ARCH, "--json"]
        result = subprocess.run(args, env=env, user=victim, group=victim, capture_output=True, text=True,
                                timeout=300, cwd="/")
        assert result.returncode == 1, (result.stdout, result.stderr)
        assert result.stdout == ""
        assert (f"kiln refuses the kernel cache directory {fallback}: it is owned by uid {planter}, not by you "
                f"(uid {victim}) or root") in result.stderr, result.stderr
        assert "set DG_JIT_CACHE_DIR to a directory you own" in result.stderr
        assert planted["key"] not in result.stdout
    finally:
        shutil.rmtree(fallback, ignore_errors=True)
