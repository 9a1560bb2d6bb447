"""`kiln cache stats|prune|export|import` and the tier settings: layers, strict mode, the size bound, packs and
the remote cache's settings, seen from the command line."""

import json
import os
import struct
import time

import pytest

from conftest import ARCH, OP, REPO, assert_error

OTHER_PROBLEM = ["m=4096", "k=4096"]  # a second kernel (another k)


def test_stats_lists_every_tier(kiln, tmp_path):
    layer = tmp_path / "layer"
    stats = kiln.json("cache", "stats", env={"DG_JIT_CACHE_DIR": f"{kiln.cache_dir}:{layer}"})
    assert stats["mode"] == "normal"
    assert stats["max_bytes"] == 0
    assert [t["kind"] for t in stats["tiers"]] == ["local", "layer"]
    local, lower = stats["tiers"]
    assert local["location"] == str(kiln.cache_dir) and local["writable"] is True and local["entries"] == 0
    assert lower["location"] == str(layer) and lower["writable"] is False
    assert lower["available"] is False and lower["state"].startswith("unavailable")


def test_a_layer_serves_without_compiling_or_copying(kiln, tmp_path):
    kiln.compile("--backend", "nvrtc")
    layered = {"DG_JIT_CACHE_DIR": f"{tmp_path / 'fresh'}:{kiln.cache_dir}"}
    again = kiln.compile("--backend", "nvrtc", env=layered)
    assert again["hit"] is True
    stats = kiln.json("cache", "stats", env=layered)
    assert stats["layer_hits"] == 1 and stats["compiles"] == 0 and stats["entries"] == 0
    assert stats["tiers"][1]["entries"] == 1


def test_strict_mode_is_shown_and_ahead_of_time_still_compiles(kiln):
    strict = {"DG_JIT_MODE": "strict"}
    assert kiln.json("cache", "stats", env=strict)["mode"] == "strict"
    assert kiln.compile("--backend", "nvrtc", env=strict)["hit"] is False


@pytest.mark.parametrize("variable,value,needle", [
    ("DG_JIT_MODE", "lenient", "normal or strict"),
    ("DG_JIT_CACHE_MAX_BYTES", "lots", "K, M, G or T"),
    ("DG_JIT_CACHE_MAX_BYTES", "5X", "is not a size"),
    ("DG_JIT_REMOTE_CACHE", "http://host:1", "redis://"),
    ("DG_JIT_REMOTE_CACHE", "redis://host:99999", "port"),
    ("DG_JIT_REMOTE_TIMEOUT_MS", "0", "milliseconds"),
    ("DG_JIT_CACHE_DIR", "/tmp/a::/tmp/b", "empty directory"),
])
def test_bad_tier_settings_are_errors_naming_the_variable(kiln, variable, value, needle):
    assert_error(kiln.run("config", env={variable: value}), variable, needle)


def test_remote_password_is_never_shown(kiln):
    out = kiln.json("config", env={"DG_JIT_REMOTE_CACHE": "redis://:s3cret@127.0.0.1:1/2"})
    remote = next(s for s in out["settings"] if s["variable"] == "DG_JIT_REMOTE_CACHE")
    assert remote["value"] == "redis://:***@127.0.0.1:1/2"
    bad = kiln.run("config", env={"DG_JIT_REMOTE_CACHE": "redis://:s3cret@host:bad"})
    assert bad.returncode == 1 and "s3cret" not in bad.stderr


def test_max_bytes_bounds_the_directory(kiln):
    first = kiln.compile("--backend", "nvrtc")
    size = kiln.json("cache", "stats")["bytes"]
    bounded = {"DG_JIT_CACHE_MAX_BYTES": str(size + size // 2)}
    kiln.json("compile", OP, *OTHER_PROBLEM, "--arch", ARCH, "--backend", "nvrtc", env=bounded)
    stats = kiln.json("cache", "stats", env=bounded)
    assert stats["max_bytes"] == size + size // 2
    assert stats["bytes"] <= stats["max_bytes"]
    assert stats["evicted_entries"] == 1 and stats["entries"] == 1
    assert not kiln.entry_files(first["key"]), "the least recently used entry went"


def test_prune_by_hand(kiln):
    kiln.compile("--backend", "nvrtc")
    kiln.json("compile", OP, *OTHER_PROBLEM, "--arch", ARCH, "--backend", "nvrtc")
    report = kiln.json("cache", "prune", "--max-bytes", "1K")
    assert report["max_bytes"] == 1024
    assert report["removed_entries"] == 2 and report["remaining_entries"] == 0 and report["removed_bytes"] > 0
    assert kiln.json("cache", "stats")["evicted_entries"] == 2
    text = kiln.run("cache", "prune", "--max-bytes", "10G", check=True)
    assert "removed 0 entries" in text.stdout


def test_prune_needs_a_size(kiln):
    assert kiln.run("cache", "prune").returncode == 2
    assert kiln.run("cache", "prune", "--max-bytes", "big").returncode == 2


def pack_entries(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89KPACK\r\n"
    (length,) = struct.unpack_from("<Q", data, 16)
    manifest = json.loads(data[24:24 + length])
    return data, 24 + length, manifest


def test_export_and_import_round_trip_twice(kiln, tmp_path):
    a = kiln.compile("--backend", "nvrtc")
    b = kiln.json("compile", OP, *OTHER_PROBLEM, "--arch", ARCH, "--backend", "nvrtc")
    pack = tmp_path / "warmup.kilnpack"
    out = kiln.json("cache", "export", pack)
    assert out["exported"] == 2 and out["bytes"] == pack.stat().st_size
    assert {e["key"] for e in out["entries"]} == {a["key"], b["key"]}
    _, _, manifest = pack_entries(pack)
    assert manifest["format"] == "kiln-pack" and len(manifest["entries"]) == 2

    other = {"DG_JIT_CACHE_DIR": str(tmp_path / "gpu")}
    first = kiln.json("cache", "import", pack, env=other)
    assert (first["imported"], first["present"], first["rejected"]) == (2, 0, 0)
    second = kiln.json("cache", "import", pack, env=other)
    assert (second["imported"], second["present"], second["rejected"]) == (0, 2, 0)
    assert kiln.compile("--backend", "nvrtc", env=other)["hit"] is True
    assert kiln.json("cache", "stats", env=other)["compiles"] == 0


def test_export_filters(kiln, tmp_path):
    kiln.compile("--backend", "nvrtc")
    assert kiln.json("cache", "export", tmp_path / "p1", "--op", OP, "--arch", ARCH)["exported"] == 1
    empty = kiln.run("cache", "export", tmp_path / "p2", "--arch", "sm_100a", "--json")
    assert empty.json()["exported"] == 0
    assert "no cache entry matched --arch sm_100a; the pack is empty" in empty.stderr, empty  # with --json too
    assert kiln.json("cache", "export", tmp_path / "p3", "--op", "fp8_gemm_nt")["exported"] == 0
    # A filter that names no operation, or no arch, is a typo, not an empty selection: no pack is written.
    assert_error(kiln.run("cache", "export", tmp_path / "p4", "--op", "nothing"), "unknown operation 'nothing'", OP)
    assert_error(kiln.run("cache", "export", tmp_path / "p5", "--arch", "garbage"), "arch: invalid CUDA arch 'garbage'")
    # Where a pack cannot be written, the message says which step failed.
    assert_error(kiln.run("cache", "export", tmp_path / "missing dir" / "p6"), "cannot be written: no temporary file",
                 str(tmp_path / "missing dir"))
    (tmp_path / "a dir").mkdir()
    assert_error(kiln.run("cache", "export", tmp_path / "a dir"), "cannot be written: the finished pack cannot be renamed")
    assert not (tmp_path / "p4").exists() and not (tmp_path / "p5").exists()


def test_a_corrupted_pack_entry_is_rejected_by_name(kiln, tmp_path):
    a = kiln.compile("--backend", "nvrtc")
    kiln.json("compile", OP, *OTHER_PROBLEM, "--arch", ARCH, "--backend", "nvrtc")
    pack = tmp_path / "p"
    kiln.json("cache", "export", pack)
    data, start, manifest = pack_entries(pack)
    victim = next(e for e in manifest["entries"] if e["key"] == a["key"])
    at = start + victim["offset"] + victim["bytes"] // 2
    damaged = bytearray(data)
    damaged[at] ^= 0xFF
    pack.write_bytes(bytes(damaged))
    other = {"DG_JIT_CACHE_DIR": str(tmp_path / "gpu")}
    result = kiln.run("cache", "import", pack, "--json", env=other)
    assert result.returncode == 1, result
    report = result.json()
    assert (report["imported"], report["rejected"]) == (1, 1)
    rejected = [e for e in report["entries"] if e["outcome"] == "rejected"]
    assert rejected[0]["key"] == a["key"] and "checksum mismatch" in rejected[0]["reason"]
    assert a["key"] in result.stderr and "rejected" in result.stderr


def rewrite_manifest(pack, manifest):
    data, start, _ = pack_entries(pack)
    text = json.dumps(manifest).encode()
    pack.write_bytes(data[:16] + struct.pack("<Q", len(text)) + text + data[start:])


@pytest.mark.parametrize("field,value,needle", [
    ("format", 5, '"format" must be a string, got an integer (5)'),
    ("version", 2, "has manifest version 2; this kiln reads version 1"),
    ("version", "1", '"version" must be a whole number >= 0, got a string ("1")'),
    ("entries", {}, '"entries" must be a list, got an object'),
])
def test_a_manifest_wrong_at_the_top_level_imports_nothing(kiln, tmp_path, field, value, needle):
    kiln.compile("--backend", "nvrtc")
    pack = tmp_path / "p"
    kiln.json("cache", "export", pack)
    _, _, manifest = pack_entries(pack)
    manifest[field] = value
    rewrite_manifest(pack, manifest)
    other = {"DG_JIT_CACHE_DIR": str(tmp_path / "gpu")}
    for json_flag in ((), ("--json",)):
        assert_error(kiln.run("cache", "import", pack, *json_flag, env=other), f"pack {pack}: ", needle)
    assert kiln.json("cache", "stats", env=other)["entries"] == 0


@pytest.mark.parametrize("field,value,needle", [
    ("op", 5, '"op" must be a string, got an integer (5)'),
    ("key", 7, '"key" must be a string, got an integer (7)'),
    ("spec", None, '"spec" must be a string, got null'),
])
def test_a_malformed_manifest_entry_is_rejected_by_index_and_the_others_imported(kiln, tmp_path, field, value,
                                                                                 needle):
    a = kiln.compile("--backend", "nvrtc")
    b = kiln.json("compile", OP, *OTHER_PROBLEM, "--arch", ARCH, "--backend", "nvrtc")
    pack = tmp_path / "p"
    kiln.json("cache", "export", pack)
    _, _, manifest = pack_entries(pack)
    index = next(i for i, e in enumerate(manifest["entries"]) if e["key"] == a["key"])
    manifest["entries"][index][field] = value
    rewrite_manifest(pack, manifest)
    other = {"DG_JIT_CACHE_DIR": str(tmp_path / "gpu")}
    result = kiln.run("cache", "import", pack, "--json", env=other)
    assert result.returncode == 1, result
    report = result.json()
    assert (report["imported"], report["rejected"]) == (1, 1)
    rejected = next(e for e in report["entries"] if e["outcome"] == "rejected")
    assert rejected["reason"] == f"manifest entry {index}: {needle}"
    assert f"manifest entry {index}: {needle}" in result.stderr
    assert [e["key"] for e in report["entries"] if e["outcome"] == "imported"] == [b["key"]]
    assert kiln.json("cache", "stats", env=other)["entries"] == 1


def test_import_of_something_that_is_not_a_pack(kiln, tmp_path):
    junk = tmp_path / "junk"
    junk.write_text("hello")
    assert_error(kiln.run("cache", "import", junk), str(junk), "not a kiln pack")
    # A missing file and a directory are the import's own errors, status 1 as for any unreadable input.
    assert_error(kiln.run("cache", "import", tmp_path / "missing"), "missing", "cannot be opened")
    assert_error(kiln.run("cache", "import", tmp_path), "is a directory, not a pack file")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert_error(kiln.run("cache", "import", fifo, timeout=20), str(fifo), "not a regular file")


def test_remote_cache_down_is_reported_not_fatal(kiln):
    env = {"DG_JIT_REMOTE_CACHE": "redis://127.0.0.1:1"}
    stats = kiln.run("cache", "stats", "--json", env=env)
    if stats.returncode != 0 and "built without hiredis" in stats.stderr:
        pytest.skip("kiln was built without hiredis")
    assert stats.returncode == 0, stats
    remote = stats.json()["tiers"][-1]
    assert remote["kind"] == "remote" and remote["available"] is False and remote["state"].startswith("down")
    assert kiln.compile("--backend", "nvrtc", env=env)["hit"] is False


@pytest.fixture
def redis_url(tmp_path):
    """A real redis-server on a free loopback port, stopped at the end of the test."""
    import shutil
    import socket
    import subprocess
    import time

    server = shutil.which("redis-server") or "/usr/bin/redis-server"
    if not os.access(server, os.X_OK):
        pytest.skip("redis-server is not installed")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                             "--daemonize", "no", "--logfile", "/dev/null", "--dir", str(tmp_path)])
    try:
        for _ in range(250):  # up to 5 s
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.02)
        else:
            pytest.fail("redis-server did not start")
        yield f"redis://127.0.0.1:{port}"
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_second_machine_warms_up_a_model_from_redis_with_zero_compiles(kiln, tmp_path, redis_url):
    """The issue's target: the second machine's warm-up of warmup_model compiles nothing, in at most 2 s."""
    shapes = REPO.parent / "shared" / "bench" / "shapes.json"
    if not shapes.is_file():
        shapes = tmp_path / "shapes.json"
        shapes.write_text(json.dumps({"warmup_model": {"m_range": [1, 16384], "nk": [[2112, 7168], [7168, 2048]]}}))
    args = ("precompile", "fp8_gemm_nt", "--shapes", shapes, "--arch", ARCH, "--backend", "nvrtc")
    first = kiln.run(*args, "--json", env={"DG_JIT_REMOTE_CACHE": redis_url, "DG_JIT_CACHE_DIR": str(tmp_path / "a")})
    if first.returncode != 0 and "built without hiredis" in first.stderr:
        pytest.skip("kiln was built without hiredis")
    assert first.returncode == 0, first
    kernels = len(first.json()["kernels"])
    assert kernels > 0
    started = time.monotonic()
    second = kiln.json(*args, env={"DG_JIT_REMOTE_CACHE": redis_url, "DG_JIT_CACHE_DIR": str(tmp_path / "b")})
    elapsed = time.monotonic() - started
    assert second["compiled"] == 0 and second["cached"] == kernels
    assert elapsed <= 2.0, f"{kernels} kernels from Redis took {elapsed:.2f} s"
    stats = kiln.json("cache", "stats", env={"DG_JIT_REMOTE_CACHE": redis_url, "DG_JIT_CACHE_DIR": str(tmp_path / "b")})
    assert stats["remote_hits"] == kernels and stats["compiles"] == 0
    assert stats["tiers"][-1]["kind"] == "remote" and stats["tiers"][-1]["hits"] == kernels
