"""bench/fp8_gemm_bench.py's host side: the peers file's DeepGEMM figures, read from its table and kept beside kiln's
only on the card they were measured on, and the per-M summary of the speed-ups (no GPU or PyTorch needed)."""

import importlib.util
import pathlib

import pytest

_SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "bench" / "fp8_gemm_bench.py"
_spec = importlib.util.spec_from_file_location("fp8_gemm_bench", _SCRIPT)
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)

PEERS = """# Peer figures

| M | N | K | DeepGEMM µs | DeepGEMM kineto µs | DeepGEMM TFLOPS | cuBLAS block-wise µs |
|---:|---:|---:|---:|---:|---:|---:|
| 128 | 2112 | 7168 | 13.8 | 11.0 | 281 | 25.5 |
| 4096 | 7168 | 16384 | 653.1 | 658.5 | 1473 | 740.8 |
| 1 | 7168 | 2048 | n/a | 8.3 | 2.6 | n/a |

| what | figure |
|---|---|
| NVCC cold compile | 4.9-5.7 s |
"""


def test_peers_table_rows_are_read_and_other_rows_skipped(tmp_path):
    path = tmp_path / "peers.md"
    path.write_text(PEERS)
    assert bench.parse_peers(path) == {(128, 2112, 7168): 13.8, (4096, 7168, 16384): 653.1}


def test_deepgemm_figures_stand_beside_kiln_only_on_the_peers_card():
    table = {(128, 2112, 7168): 13.8}
    kept, note = bench.peer_figures("NVIDIA H200", table)
    assert kept == table and note is None
    dropped, note = bench.peer_figures("NVIDIA H100 80GB HBM3", table)
    assert dropped == {}
    assert "NVIDIA H100 80GB HBM3" in note and "H200" in note and "--peers-any-card" in note
    kept, note = bench.peer_figures("NVIDIA H100 80GB HBM3", table, any_card=True)
    assert kept == table and note is None


def test_the_built_in_figures_match_the_peers_file_where_it_is_present():
    peers = pathlib.Path(__file__).resolve().parents[3] / "shared" / "bench" / "peers-h200.md"
    if not peers.exists():
        pytest.skip(f"{peers} is not here (a clone outside the workspace has no shared/ folder)")
    assert bench.parse_peers(peers) == bench.DEEPGEMM_US


def test_summary_takes_geometric_means_per_m_group_of_verified_rows_only():
    rows = [
        {"m": 1, "verified": True, "speedup_vs_cublas_per_tensor": 2.0},
        {"m": 1, "verified": True, "speedup_vs_cublas_per_tensor": 0.5},
        {"m": 64, "verified": True, "speedup_vs_deepgemm": 1.21},
        {"m": 128, "verified": False, "speedup_vs_deepgemm": 9.0},  # a wrong result's time means nothing
        {"m": 4096, "verified": True},
    ]
    summary = bench.summarise(rows)
    pt = summary["M=1"]["speedup_vs_cublas_per_tensor"]
    assert abs(pt["geomean"] - 1.0) < 1e-12 and pt["min"] == 0.5 and pt["max"] == 2.0 and pt["count"] == 2
    assert summary["M=64,128"]["speedup_vs_deepgemm"]["count"] == 1
    assert abs(summary["M=64,128"]["speedup_vs_deepgemm"]["geomean"] - 1.21) < 1e-12
    assert summary["M=4096"] == {}
    assert summary["verified"] == 4 and summary["shapes"] == 5
