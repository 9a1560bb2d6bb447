"""The grouped benchmarks' host side (no GPU or PyTorch needed): how they split rows among experts.

bench/fp8_gemm_bench.py's split_in_blocks (the contiguous and k-grouped benchmarks' rows or tokens per expert),
bench/fp8_gemm_m_grouped_bench.py's expert_rows and bench/fp8_gemm_masked_bench.py's expert_counts (the masked
benchmark's valid rows per expert, scaled to the peers file's totals)."""

import importlib.util
import pathlib
import sys

_BENCH = pathlib.Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(_BENCH))


def _load(name):
    spec = importlib.util.spec_from_file_location(name, _BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


dense = _load("fp8_gemm_bench")
contiguous = _load("fp8_gemm_m_grouped_bench")
masked = _load("fp8_gemm_masked_bench")


def test_split_in_blocks_gives_multiples_of_128_summing_to_the_total():
    parts = dense.split_in_blocks(34304, [1.0, 1.3, 0.7, 1.1])
    assert sum(parts) == 34304
    assert all(p % 128 == 0 and p > 0 for p in parts)
    # In proportion to the weights; the rounding's remainder goes to the heaviest.
    assert parts[1] == max(parts) and parts[2] == min(parts)


def test_expert_rows_are_drawn_once_per_seed():
    rows = contiguous.expert_rows(8, 34048, seed=1)
    assert rows == contiguous.expert_rows(8, 34048, seed=1)
    assert sum(rows) == 34048 and len(rows) == 8
    assert all(0.6 * 34048 / 8 <= r <= 1.4 * 34048 / 8 for r in rows)


def test_masked_counts_match_the_peers_valid_rows_and_stay_within_max_m():
    for groups, expected, total, *_ in masked.SHAPES:
        counts = masked.expert_counts(groups, expected, total, seed=0)
        assert len(counts) == groups
        assert all(0 <= c <= masked.MAX_M for c in counts)
        if total is not None:
            assert sum(counts) == total
        else:  # drawn: 0.7..1.3 of the expected count
            assert all(int(0.7 * expected) <= c <= int(1.3 * expected) for c in counts)
    # The peers file's first masked shape: 32 experts x 192 expected, 6559 valid rows.
    assert sum(masked.expert_counts(32, 192, 6559, seed=0)) == 6559
    assert masked.expert_counts(6, 20, None, seed=3) == masked.expert_counts(6, 20, None, seed=3)
