"""bench/bf16_gemm_bench.py's host side (no GPU or PyTorch needed): the shapes and DeepGEMM figures it reads, with the
built-in copies it falls back on where shared/ is not beside the repository (the GPU machine), its sweep, and the
--k-grouped mode's options, shapes, token counts, precompile requests and JSON name."""

import importlib.util
import pathlib
import sys

_BENCH = pathlib.Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(_BENCH))
_spec = importlib.util.spec_from_file_location("bf16_gemm_bench", _BENCH / "bf16_gemm_bench.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


def test_the_built_in_copies_match_the_shared_files_where_they_are_there(tmp_path):
    ms, nks = bench.load_shapes(bench.SHAPES_FILE)
    assert ms == bench.DEFAULT_M and nks == bench.DEFAULT_NK
    assert bench.load_peers(bench.PEERS_FILE) == bench.DEFAULT_PEERS
    # Without the files: the copies.
    assert bench.load_shapes(tmp_path / "missing.json") == (bench.DEFAULT_M, bench.DEFAULT_NK)
    assert bench.load_peers(tmp_path / "missing.md") == bench.DEFAULT_PEERS


def test_peers_are_read_from_the_bf16_table_only(tmp_path):
    peers = tmp_path / "peers.md"
    peers.write_text("## Dense FP8 GEMM\n| 4096 × 7168 × 2048 | 1.0 / 1 |\n\n"
                     "## BF16 GEMM\n\n| M × N × K | µs |\n|---|---|\n"
                     "| 4096 × 7168 × 2048 | 162.0 / 742 | 161.0 / 747 |\n"
                     "| 128 × 7168 × 2048 | 15.7 / 239 | x |\n\n"
                     "## DeepGEMM's JIT\n| 1 × 2 × 3 | 9.0 / 1 |\n")
    assert bench.load_peers(peers) == {(4096, 7168, 2048): 162.0, (128, 7168, 2048): 15.7}


def test_sweep_tiles_are_what_the_plan_can_be_forced_to():
    names = [bench.tile_name(t) for t in bench.SWEEP_TILES]
    assert len(set(names)) == len(names)
    assert "128x256 pair s3" in names and "256x128 pair s4" in names and "64x32" in names
    for block_m, block_n, cluster_m, stages in bench.SWEEP_TILES:
        assert block_m in (64, 128, 256) and block_n % 16 == 0 and 16 <= block_n <= (128 if block_m == 256 else 256)
        assert cluster_m in (1, 2) and 0 <= stages <= 32


def test_the_k_grouped_mode_is_an_option_with_a_json_of_its_own():
    parse = bench.argument_parser().parse_args
    assert not parse([]).k_grouped
    args = parse(["--no-dense", "--k-grouped"])
    assert args.k_grouped and args.no_dense and not (args.m_grouped or args.masked)
    assert bench.json_name(args) == "bf16_gemm_k_grouped_bench.json"
    # With the dense shapes, or beside the m-grouped modes, the JSON is theirs (as before --k-grouped).
    assert bench.json_name(parse(["--k-grouped"])) == "bf16_gemm_bench.json"
    assert bench.json_name(parse(["--no-dense", "--m-grouped", "--masked"])) == "bf16_gemm_grouped_bench.json"
    assert bench.json_name(parse(["--no-dense", "--m-grouped", "--k-grouped"])) == "bf16_gemm_grouped_bench.json"


def test_a_run_of_some_m_writes_a_json_of_its_own():
    parse = bench.argument_parser().parse_args
    assert parse([]).m is None
    assert parse(["--m", "4096", "--m", "1"]).m == [4096, 1]
    assert bench.json_name(parse(["--m", "4096", "--sweep-accumulate"])) == "bf16_gemm_bench_m4096.json"
    assert bench.json_name(parse(["--m", "4096", "--m", "1", "--m", "4096"])) == "bf16_gemm_bench_m1_4096.json"


def test_k_grouped_shapes_are_deepseek_v3_experts():
    assert {(m, n) for _, m, n, _, _ in bench.K_GROUPED_SHAPES} == {(4096, 7168), (7168, 2048)}
    assert sorted((m, n, groups) for _, m, n, groups, _ in bench.K_GROUPED_SHAPES) == \
        sorted((m, n, groups) for m, n in ((4096, 7168), (7168, 2048)) for groups in (8, 32))
    assert all(tokens == 4096 * 8 for *_, tokens in bench.K_GROUPED_SHAPES)


def test_k_grouped_token_counts_are_skewed_and_off_multiples_of_64():
    for index, (_, _, _, groups, tokens) in enumerate(bench.K_GROUPED_SHAPES):
        ks = bench.k_grouped_token_counts(groups, tokens, seed=index)
        assert ks == bench.k_grouped_token_counts(groups, tokens, seed=index)  # drawn once per seed
        assert len(ks) == groups and sum(ks) == tokens
        assert all(k >= 1 and k % 64 != 0 for k in ks), ks
        assert max(ks) > 2 * min(ks), f"not router-like: {ks}"
    # The fix-ups hold on other draws too: many seeds and group counts.
    for seed in range(200):
        for groups in (2, 3, 8, 32, 64):
            ks = bench.k_grouped_token_counts(groups, 32768, seed=seed)
            assert sum(ks) == 32768 and all(k >= 1 and k % 64 != 0 for k in ks), (seed, groups, ks)


def test_k_grouped_requests_cover_every_plan_once():
    assert [bench.k_grouped_plan_tokens(k) for k in (1, 63, 64, 65, 128, 129, 1000, 7190)] == \
        [64, 64, 64, 128, 128, 256, 1024, 8192]
    requests = bench.k_grouped_requests()
    keys = [tuple(sorted(r.items())) for r in requests]
    assert len(set(keys)) == len(keys)
    for index, (_, m, n, groups, tokens) in enumerate(bench.K_GROUPED_SHAPES):
        for k in bench.k_grouped_token_counts(groups, tokens, seed=index):
            plan_k = bench.k_grouped_plan_tokens(k)
            assert dict(n=n, k=plan_k, m=m, k_grouped=1) in requests
            assert dict(n=n, k=plan_k, m=m, k_grouped=1, accumulate=1) in requests


def test_speedups_and_status_of_a_row():
    row = {"kiln_us": 50.0, "cublas_us": 60.0, "kiln_dense_us": 0.0, "verified": True}
    bench.add_speedups(row, "cublas", "kiln_dense", "deepgemm")
    assert row["speedup_vs_cublas"] == 1.2
    assert "speedup_vs_kiln_dense" not in row and "speedup_vs_deepgemm" not in row  # untimed peers get no ratio
    assert bench.row_status(row) == ""
    assert bench.row_status({"verified": False}) == " NOT VERIFIED"
    assert bench.row_status({"verified": False, "error": "boom"}) == " ERROR boom"
