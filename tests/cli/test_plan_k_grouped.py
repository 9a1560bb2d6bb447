"""`kiln plan` / `kiln precompile` / `kiln compile` for the BF16 k-grouped kernels (k_grouped=1: the kernels of
k_grouped_bf16_gemm_tn_contiguous, k an expert's token count or a range of them): every count of a range served once,
one count's kernel among the range's, precompile building what plan lists, and the parameter errors. Compiles use
NVRTC to keep the suite quick."""

from conftest import ARCH, assert_error

K_GROUPED = ["bf16_gemm_nt", "m=7168", "n=2048", "k_grouped=1"]


def test_plan_serves_every_token_count_of_a_range_once(kiln):
    kernels = kiln.json("plan", *K_GROUPED, "k=1..16384", "--arch", ARCH)["kernels"]
    assert 1 <= len(kernels) <= 8, kernels
    pieces = sorted(tuple(p) for k in kernels for p in k["k_ranges"])
    assert pieces[0][0] == 1 and pieces[-1][1] == 16384, pieces
    for a, b in zip(pieces, pieces[1:]):
        assert b[0] == a[1] + 1, pieces
    for k in kernels:
        assert "n=2048 k=0 " in k["spec"] and "mn_major=3" in k["spec"] and "grouping=3" in k["spec"], k
        assert "(k at run time)" in k["detail"] and "k-grouped" in k["detail"], k
    # One count's kernel is the range's kernel for it, under the same key; with accumulate=1 (calls with c) others.
    single = kiln.json("plan", *K_GROUPED, "k=1000", "--arch", ARCH)["kernels"]
    serving = [k for k in kernels if any(lo <= 1000 <= hi for lo, hi in k["k_ranges"])]
    assert len(single) == 1 and [single[0]["key"]] == [k["key"] for k in serving]
    adding = kiln.json("plan", *K_GROUPED, "k=1000", "accumulate=1", "--arch", ARCH)["kernels"]
    assert len(adding) == 1 and "epilogue=2" in adding[0]["spec"] and adding[0]["key"] != single[0]["key"]
    stats = kiln.json("cache", "stats")
    assert stats["compiles"] == 0 and stats["entries"] == 0


def test_precompile_builds_what_plan_lists_and_compile_finds_it(kiln):
    args = [*K_GROUPED, "k=1..512", "--arch", ARCH, "--backend", "nvrtc"]
    planned = kiln.json("plan", *args)["kernels"]
    built = kiln.json("precompile", *args, "-j", "2")
    assert [k["key"] for k in built["kernels"]] == [k["key"] for k in planned]
    assert built["compiled"] == len(planned) and built["cached"] == 0
    assert all(k["cubin_bytes"] > 0 for k in built["kernels"])
    assert all(k["cached"] for k in kiln.json("plan", *args)["kernels"])
    single = kiln.json("compile", *K_GROUPED, "k=300", "--arch", ARCH, "--backend", "nvrtc")
    assert single["hit"] is True and single["key"] in {k["key"] for k in planned}


def test_errors(kiln):
    assert_error(kiln.run("plan", "bf16_gemm_nt", "m=64", "n=2048", "k=8..4096", "--arch", ARCH),
                 "parameter k may be a range only with k_grouped=1")
    assert_error(kiln.run("plan", "bf16_gemm_nt", "n=2048", "m=1..64", "k=8..4096", "k_grouped=1", "--arch", ARCH),
                 "give a range for m or for k, not both")
    assert_error(kiln.run("plan", *K_GROUPED, "k=512", "fp32=0", "--arch", ARCH),
                 "parameter k_grouped=1 writes a float32 D")
    assert_error(kiln.run("plan", *K_GROUPED, "k=512", "m_grouped=1", "--arch", ARCH),
                 "parameters m_grouped=1 and k_grouped=1 name two forms")
    assert_error(kiln.run("plan", *K_GROUPED[:3], "k=512", "k_grouped=2", "--arch", ARCH), "k_grouped must be 0 or 1")
