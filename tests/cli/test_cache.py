"""`kiln cache ls|stats|verify|clear`: JSON fields and values, corrupt and truncated entries."""

import os

import pytest

from conftest import ARCH, OP, PROBLEM

STATS_FIELDS = {"directory", "writable", "entries", "bytes", "hits", "misses", "compiles", "corrupt",
                "compile_seconds", "mode", "max_bytes", "publishes", "evicted_entries", "evicted_bytes", "layer_hits",
                "remote_hits", "compiles_after_warmup", "tiers"}
ENTRY_FIELDS = {"key", "op", "spec", "arch", "backend", "compiler", "kernel_name", "bytes", "compile_ms", "created",
                "last_use"}


def test_stats_of_an_empty_cache(kiln):
    stats = kiln.json("cache", "stats")
    assert set(stats) == STATS_FIELDS
    assert stats["directory"] == str(kiln.cache_dir)
    assert stats["writable"] is True
    for counter in ("entries", "bytes", "hits", "misses", "compiles", "corrupt"):
        assert stats[counter] == 0, counter
    assert stats["compile_seconds"] == 0
    assert kiln.json("cache", "ls") == {"entries": [], "unreadable": 0}
    assert kiln.json("cache", "verify") == {"checked": 0, "corrupt": 0, "removed": 0, "problems": []}


def test_stats_count_across_processes(kiln):
    first = kiln.compile("--backend", "nvrtc")  # one process: a miss and a compile
    kiln.compile("--backend", "nvrtc")           # another: a hit
    kiln.compile("--backend", "nvrtc")           # and another
    stats = kiln.json("cache", "stats")
    assert stats["entries"] == 1
    assert stats["misses"] == 1
    assert stats["compiles"] == 1
    assert stats["hits"] == 2
    assert stats["corrupt"] == 0
    assert stats["bytes"] >= first["cubin_bytes"]
    assert 0 < stats["compile_seconds"] < 600


def test_ls_lists_each_entry_with_its_metadata(kiln):
    nvcc = kiln.compile()
    nvrtc = kiln.compile("--backend", "nvrtc")
    listing = kiln.json("cache", "ls")
    entries = {e["key"]: e for e in listing["entries"]}
    assert set(entries) == {nvcc["key"], nvrtc["key"]}
    for out in (nvcc, nvrtc):
        entry = entries[out["key"]]
        assert set(entry) == ENTRY_FIELDS
        assert entry["op"] == OP
        assert entry["spec"] == out["spec"]
        assert entry["arch"] == ARCH
        assert entry["backend"] == out["backend"]
        assert entry["compiler"].startswith(out["backend"] + " ")
        assert entry["kernel_name"] == out["kernel_name"]
        assert entry["bytes"] >= out["cubin_bytes"]
        assert entry["compile_ms"] == pytest.approx(out["compile_ms"], rel=1e-3)
        assert entry["created"] > 1_600_000_000
        assert entry["last_use"] >= entry["created"] - 1

    human = kiln.run("cache", "ls", check=True)
    header = human.stdout.splitlines()[0]
    for column in ("op", "spec", "arch", "backend", "size", "compile ms", "last use", "key"):
        assert column in header
    assert nvcc["key"] in human.stdout and nvrtc["key"] in human.stdout


def test_verify_of_a_good_cache(kiln):
    kiln.compile("--backend", "nvrtc")
    assert kiln.json("cache", "verify") == {"checked": 1, "corrupt": 0, "removed": 0, "problems": []}
    human = kiln.run("cache", "verify", check=True)
    assert "checked 1 entry: 0 corrupt, 0 removed" in human.stdout


def damage(path, how):
    data = bytearray(path.read_bytes())
    if how == "flip":
        data[len(data) // 2] ^= 0xFF
    elif how == "truncate":
        data = data[: len(data) // 2]
    elif how == "empty":
        data = bytearray()
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("how", ["flip", "truncate", "empty"])
def test_verify_removes_a_damaged_entry_and_counts_it(kiln, how):
    out = kiln.compile("--backend", "nvrtc")
    files = kiln.entry_files(out["key"])
    assert len(files) == 1, files
    damage(files[0], how)

    # ls leaves it out, and says so (on stderr: stdout stays the listing).
    assert kiln.json("cache", "ls") == {"entries": [], "unreadable": 1}
    listed = kiln.run("cache", "ls", check=True)
    assert "1 entry of the cache could not be read or failed their checks, not listed" in listed.stderr
    assert "kiln cache verify" in listed.stderr

    # Exit status 1: the cache held a bad entry (now removed), which a script must notice; the report is printed.
    result = kiln.run("cache", "verify", "--json")
    assert result.returncode == 1, result
    report = result.json()
    assert {k: v for k, v in report.items() if k != "problems"} == {"checked": 1, "corrupt": 1, "removed": 1}
    assert len(report["problems"]) == 1 and report["problems"][0].startswith(str(files[0]) + ": ")
    assert not files[0].exists()
    stats = kiln.json("cache", "stats")
    assert stats["corrupt"] == 1
    assert stats["entries"] == 0
    assert kiln.json("cache", "ls") == {"entries": [], "unreadable": 0}
    assert kiln.json("cache", "verify") == {"checked": 0, "corrupt": 0, "removed": 0, "problems": []}


def test_a_damaged_entry_is_rebuilt_by_the_next_compile(kiln):
    out = kiln.compile("--backend", "nvrtc")
    damage(kiln.entry_files(out["key"])[0], "flip")
    again = kiln.compile("--backend", "nvrtc")
    assert again["hit"] is False  # found corrupt, rebuilt: never a crash, never the damaged bytes
    assert again["key"] == out["key"]
    assert again["cubin_bytes"] == out["cubin_bytes"]
    stats = kiln.json("cache", "stats")
    assert stats["corrupt"] == 1
    assert stats["compiles"] == 2
    assert kiln.json("cache", "verify") == {"checked": 1, "corrupt": 0, "removed": 0, "problems": []}


def test_clear_removes_entries_and_resets_counters(kiln):
    kiln.compile()
    kiln.compile("--backend", "nvrtc")
    kiln.compile("--backend", "nvrtc")
    assert kiln.json("cache", "clear") == {"removed": 2}
    stats = kiln.json("cache", "stats")
    for counter in ("entries", "hits", "misses", "compiles", "corrupt"):
        assert stats[counter] == 0, counter
    assert kiln.json("cache", "ls") == {"entries": [], "unreadable": 0}
    # The cache works after clearing.
    assert kiln.compile("--backend", "nvrtc")["hit"] is False
    human = kiln.run("cache", "clear", check=True)
    assert "removed 1" in human.stdout


def test_human_stats(kiln):
    kiln.compile("--backend", "nvrtc")
    result = kiln.run("cache", "stats", check=True)
    text = result.stdout
    assert str(kiln.cache_dir) in text
    for label in ("entries", "hits", "misses", "compiles", "compile seconds", "corrupt"):
        assert label in text, label


def entry_path_of(kiln, key):
    return kiln.cache_dir / "kiln" / "entries" / key[:2] / f"{key}.kiln"


def test_a_fifo_at_an_entry_path_is_removed_not_waited_on(kiln):
    """The audit: a FIFO where an entry belongs made every process needing that kernel hang forever."""
    out = kiln.compile("--backend", "nvrtc")
    path = entry_path_of(kiln, out["key"])
    path.unlink()
    os.mkfifo(path)
    again = kiln.run("compile", OP, *PROBLEM, "--arch", ARCH, "--backend", "nvrtc", "--json", timeout=20)
    assert again.returncode == 0, again
    assert again.json()["hit"] is False
    assert f"cache entry {path} is unusable (a FIFO (named pipe), not an entry file); removed" in again.stderr
    assert path.is_file() and not path.is_symlink(), "rebuilt and stored in its place"
    assert kiln.compile("--backend", "nvrtc")["hit"] is True


def plant(path, what):
    """Puts what is not an entry file at an entry's path: a FIFO, an empty directory or a link to /dev/zero."""
    if what == "fifo":
        os.mkfifo(path)
    elif what == "empty directory":
        path.mkdir()
    else:
        path.symlink_to("/dev/zero")


@pytest.mark.parametrize("what", ["fifo", "link to /dev/zero", "empty directory"])
def test_verify_ls_and_clear_see_what_is_not_an_entry_file(kiln, what):
    out = kiln.compile("--backend", "nvrtc")
    path = entry_path_of(kiln, out["key"])
    path.unlink()
    plant(path, what)
    listed = kiln.run("cache", "ls", "--json", timeout=20)
    assert listed.returncode == 0, listed
    assert listed.json() == {"entries": [], "unreadable": 1}
    assert f"kiln: warning: {path}: " in listed.stderr and "not an entry file" in listed.stderr
    assert "; not listed" in listed.stderr
    result = kiln.run("cache", "verify", "--json", timeout=20)
    assert result.returncode == 1, result
    report = result.json()
    assert {k: v for k, v in report.items() if k != "problems"} == {"checked": 1, "corrupt": 1, "removed": 1}
    assert report["problems"][0].startswith(f"{path}: ") and "not an entry file" in report["problems"][0]
    assert not os.path.lexists(path)

    # clear removes it too (it used to leave anything that is not a regular file, and say it had cleared).
    plant(path, what)
    cleared = kiln.run("cache", "clear", "--json", timeout=20)
    assert cleared.returncode == 0 and cleared.stderr == "", cleared
    assert not os.path.lexists(path)


def test_a_directory_with_files_at_an_entry_path_is_named_and_left_alone(kiln):
    out = kiln.compile("--backend", "nvrtc")
    path = entry_path_of(kiln, out["key"])
    path.unlink()
    path.mkdir()
    (path / "notes.txt").write_text("mine")
    again = kiln.run("compile", OP, *PROBLEM, "--arch", ARCH, "--backend", "nvrtc", "--json", timeout=60)
    # The kernel is compiled, and cannot be stored: the warnings name the entry's path and what to do.
    assert f"cache entry {path} is unusable (a directory, not an entry file)" in again.stderr, again
    assert f"rm -r {path}" in again.stderr
    assert f"cannot store {path} (Is a directory" in again.stderr
    assert "cannot write into the kiln cache" not in again.stderr
    result = kiln.run("cache", "verify", "--json")
    assert result.returncode == 1, result
    report = result.json()
    assert report["removed"] == 0 and report["problems"] == [
        f"{path}: a directory, not an entry file; left in place: it is a directory with files in it, which kiln does "
        f"not delete: remove it by hand (rm -r {path})"]
    cleared = kiln.run("cache", "clear")
    assert cleared.returncode == 0 and f"{path} (a directory) was left in the cache" in cleared.stderr
    assert (path / "notes.txt").read_text() == "mine"


def test_a_file_named_like_a_fan_out_directory_is_removed_and_the_kernel_stored(kiln):
    out = kiln.compile("--backend", "nvrtc")
    fanout = entry_path_of(kiln, out["key"]).parent
    for child in fanout.iterdir():
        child.unlink()
    fanout.rmdir()
    fanout.write_text("x")
    again = kiln.compile("--backend", "nvrtc")
    assert again["hit"] is False
    assert kiln.compile("--backend", "nvrtc")["hit"] is True, "stored this time"
    stats = kiln.json("cache", "stats")
    assert stats["corrupt"] == 1, "counted once: it was removed"


def test_verify_exits_1_when_it_finds_a_bad_entry(kiln):
    out = kiln.compile("--backend", "nvrtc")
    damage(kiln.entry_files(out["key"])[0], "truncate")
    human = kiln.run("cache", "verify")
    assert human.returncode == 1, human
    assert "checked 1 entry: 1 corrupt, 1 removed" in human.stdout
    assert human.stderr == "kiln: error: kiln cache verify found 1 bad entry (see above)\n"
    # Once removed, the cache is good again: status 0.
    assert kiln.run("cache", "verify").returncode == 0


def test_a_bad_entry_in_a_layer_is_reported_once(kiln, tmp_path):
    out = kiln.compile("--backend", "nvrtc")
    path = kiln.entry_files(out["key"])[0]
    damage(path, "flip")
    layered = {"DG_JIT_CACHE_DIR": f"{tmp_path / 'fresh'}:{kiln.cache_dir}"}
    again = kiln.run("compile", OP, *PROBLEM, "--arch", ARCH, "--backend", "nvrtc", "--json", env=layered)
    assert again.returncode == 0 and again.json()["hit"] is False, again
    assert again.stderr.count(str(path)) == 1, again.stderr
    assert path.exists(), "a layer is never cleaned"
