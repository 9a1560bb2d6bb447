"""`kiln plan` / `kiln precompile` / `kiln compile` for the FP8 GEMM's weight-gradient form (accumulate=1:
D fp32 += A . B^T with B scaled per row): its own kernels, the same M coverage, and its parameter errors.
Compiles use NVRTC and a small K to keep the suite quick."""

import json

from conftest import ARCH, assert_error

WGRAD = ["fp8_gemm_nt", "n=576", "k=512", "accumulate=1"]


def pieces_tile(kernels, lo, hi):
    pieces = sorted(tuple(p) for k in kernels for p in k["m_ranges"])
    assert pieces[0][0] == lo and pieces[-1][1] == hi, pieces
    for a, b in zip(pieces, pieces[1:]):
        assert b[0] == a[1] + 1, pieces


def test_plan_lists_the_accumulating_kernels_for_the_whole_range(kiln):
    out = kiln.json("plan", "fp8_gemm_nt", "n=2112", "k=4096", "m=1..16384", "accumulate=1", "--arch", ARCH)
    kernels = out["kernels"]
    assert 1 <= len(kernels) <= 8
    for k in kernels:
        assert k["op"] == "fp8_gemm_nt" and k["arch"] == ARCH and k["cached"] is False
        # K is a run-time value of this form's kernels (k=0 in the spec); the plan's choice was made at k=4096.
        assert "n=2112 k=0 " in k["spec"] and "accumulate=true" in k["spec"], k
        assert "n=2112 k=4096: " in k["detail"], k
        assert "tma_store=false cluster_m=1" in k["spec"], k
        assert "fp32 accumulate into D" in k["detail"], k
    pieces_tile(kernels, 1, 16384)
    # The bf16 form's kernels are others (accumulate=0 is the default).
    bf16 = kiln.json("plan", "fp8_gemm_nt", "n=2112", "k=4096", "m=1..16384", "--arch", ARCH)["kernels"]
    explicit = kiln.json("plan", "fp8_gemm_nt", "n=2112", "k=4096", "m=1..16384", "accumulate=0", "--arch", ARCH)
    assert [k["key"] for k in explicit["kernels"]] == [k["key"] for k in bf16]
    assert not {k["key"] for k in kernels} & {k["key"] for k in bf16}
    assert all("accumulate=false" in k["spec"] for k in bf16)
    stats = kiln.json("cache", "stats")
    assert stats["compiles"] == 0 and stats["entries"] == 0


def test_plan_for_people_names_the_form(kiln):
    result = kiln.run("plan", *WGRAD, "m=1..16384", "--arch", ARCH)
    assert result.returncode == 0, result
    lines = result.stdout.splitlines()
    assert lines[0].startswith("fp8_gemm_nt accumulate=1") and "kernels for sm_90a" in lines[0], result
    assert all("fp32 accumulate into D" in line for line in lines[2:]), result


def test_precompile_builds_what_plan_lists_and_compile_finds_it(kiln):
    planned = kiln.json("plan", *WGRAD, "m=1..4096", "--arch", ARCH, "--backend", "nvrtc")["kernels"]
    built = kiln.json("precompile", *WGRAD, "m=1..4096", "--arch", ARCH, "--backend", "nvrtc", "-j", "2")
    assert [k["key"] for k in built["kernels"]] == [k["key"] for k in planned]
    assert built["compiled"] == len(planned) and built["cached"] == 0
    assert all(k["cubin_bytes"] > 0 for k in built["kernels"])
    again = kiln.json("plan", *WGRAD, "m=1..4096", "--arch", ARCH, "--backend", "nvrtc")["kernels"]
    assert all(k["cached"] for k in again)
    first = planned[0]
    single = kiln.json("compile", *WGRAD, f"m={first['m_ranges'][0][0]}", "--arch", ARCH, "--backend", "nvrtc")
    assert single["key"] == first["key"] and single["hit"] is True


def test_shapes_file_with_accumulate(kiln, tmp_path):
    shapes = tmp_path / "shapes.json"
    shapes.write_text(json.dumps({"m_range": [1, 256], "nk": [[576, 512], [2112, 512]]}))
    kernels = kiln.json("plan", "fp8_gemm_nt", "--shapes", shapes, "accumulate=1", "--arch", ARCH)["kernels"]
    assert kernels and all("accumulate=true" in k["spec"] for k in kernels)
    assert {k["spec"].split(" ")[0] for k in kernels} == {"n=576", "n=2112"}


def test_plan_over_a_range_of_token_counts(kiln):
    out = kiln.json("plan", "fp8_gemm_nt", "n=2112", "m=7168", "k=1..65536", "accumulate=1", "--arch", ARCH)
    kernels = out["kernels"]
    assert 1 <= len(kernels) <= 3, kernels
    pieces = sorted(tuple(p) for k in kernels for p in k["k_ranges"])
    assert pieces[0][0] == 16 and pieces[-1][1] == 65536, pieces
    for a, b in zip(pieces, pieces[1:]):
        assert b[0] == a[1] + 16, pieces
    assert all("n=2112 k=0 " in k["spec"] and "(k at run time)" in k["detail"] for k in kernels), kernels
    # One token count's kernel is one of the range's, under the same key.
    single = kiln.json("plan", "fp8_gemm_nt", "n=2112", "m=7168", "k=5008", "accumulate=1", "--arch", ARCH)["kernels"]
    assert len(single) == 1 and single[0]["key"] in {k["key"] for k in kernels}
    result = kiln.run("plan", "fp8_gemm_nt", "n=2112", "m=7168", "k=16..65536", "accumulate=1", "--arch", ARCH)
    assert result.returncode == 0 and "k" in result.stdout.splitlines()[1].split(), result  # the ranged column


def test_errors(kiln):
    assert_error(kiln.run("plan", "fp8_gemm_nt", "n=2112", "m=64", "k=16..4096", "--arch", ARCH),
                 "parameter k may be a range only with accumulate=1")
    assert_error(kiln.run("plan", "fp8_gemm_nt", "n=2112", "m=1..64", "k=16..4096", "accumulate=1", "--arch", ARCH),
                 "give a range for m or for k, not both")
    assert_error(kiln.run("plan", *WGRAD[:3], "m=1", "accumulate=2"), "accumulate must be 0", "got 2")
    assert_error(kiln.run("plan", *WGRAD, "m=1", "cluster_m=2"), "cluster_m must be 0 (heuristic) or 1",
                 "accumulating form")
    assert_error(kiln.run("plan", *WGRAD[:3], "m=1", "accumulate=0..1"), "accumulate must be a single value")


def test_no_c_plans_the_calls_without_c_apart(kiln):
    """At short K calls with C take 64x128 (the short-K reduce-add term), calls without C (no_c=1) a 128-row tile;
    from K = 1024 on both list the same kernels."""
    with_c = kiln.json("plan", "fp8_gemm_nt", "n=7168", "k=512", "m=4096", "accumulate=1", "--arch", ARCH)["kernels"]
    without_c = kiln.json("plan", "fp8_gemm_nt", "n=7168", "k=512", "m=4096", "accumulate=1", "no_c=1",
                          "--arch", ARCH)["kernels"]
    assert len(with_c) == 1 and len(without_c) == 1
    assert "64x128" in with_c[0]["detail"] and "128x" in without_c[0]["detail"], (with_c, without_c)
    assert with_c[0]["key"] != without_c[0]["key"]
    long_k = ["fp8_gemm_nt", "n=7168", "k=4096", "m=1..16384", "accumulate=1", "--arch", ARCH]
    assert ([k["key"] for k in kiln.json("plan", *long_k)["kernels"]] ==
            [k["key"] for k in kiln.json("plan", *long_k, "no_c=1")["kernels"]])
    assert_error(kiln.run("plan", "fp8_gemm_nt", "n=7168", "k=512", "m=1", "no_c=1", "--arch", ARCH),
                 "parameter no_c=1 needs accumulate=1")
