"""bench/bf16_gemm_bench.py's host side (no GPU or PyTorch needed): the shapes and DeepGEMM figures it reads, with the
built-in copies it falls back on where shared/ is not beside the repository (the GPU machine), and its sweep."""

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
    assert "128x256 pair s4" in names and "64x32" in names
    for block_m, block_n, cluster_m, stages in bench.SWEEP_TILES:
        assert block_m in (64, 128, 256) and block_n % 16 == 0 and 16 <= block_n <= (128 if block_m == 256 else 256)
        assert cluster_m in (1, 2) and 0 <= stages <= 32
