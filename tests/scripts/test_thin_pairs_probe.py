"""bench/probes/thin_pairs_summary.py (the thin-pairs probe's reading of the GPU harness's log) and the probe's shape
files against the unit tests' tables they reproduce (no GPU needed)."""

import importlib.util
import pathlib
import re

_ROOT = pathlib.Path(__file__).resolve().parents[2]
_SCRIPT = _ROOT / "bench" / "probes" / "thin_pairs_summary.py"
_spec = importlib.util.spec_from_file_location("thin_pairs_summary", _SCRIPT)
probe = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(probe)

LOG = """PASS m=448 n=32768 k=512 ...
time m=448   n=32768  k=512    256x128  3 st tma-store    ma2 ser      28.0 us   532.6 TFLOPS   1643 GB/s | DeepGEMM

timings (median of 20, events, L2 flushed before each call):
  time m=448   n=32768  k=512    256x128  3 st tma-store    ma2 ser      28.0 us   532.6 TFLOPS   1643 GB/s | DeepGEMM
  time m=448   n=32768  k=512    128x128  5 st tma-store        ovl      25.0 us   593.9 TFLOPS   1832 GB/s | DeepGEMM
  time m=448   n=32768  k=512    128x128  5 st tma-store        ovl      26.0 us   593.9 TFLOPS   1832 GB/s | DeepGEMM
  time m=448   n=32768  k=512    256x128  3 st tma-store    ma2 ser      30.0 us   532.6 TFLOPS   1643 GB/s | DeepGEMM
  time m=400   n=24576  k=1536   128x192  4 st tma-store        ovl g16      37.4 us   888.2 TFLOPS   1588 GB/s | Deep
"""
SHAPES = """# comment
448 32768 512 256x128a 128x128
400 24576 1536 256x128ag16 128x192g16  # not all timed
448 32768 512 128x128 256x128a
"""


def test_each_call_averages_its_two_orders_and_the_moves_take_a_geometric_mean():
    lines = probe.summary(LOG, SHAPES, moves=True)
    assert lines[0] == "448 x 32768 x 512  256x128 29.0  128x128 25.5"  # the first section's line is not read
    assert lines[1] == "400 x 24576 x 1536: not timed (256x128)"
    assert lines[2] == "1 moves: new / old 0.879 on geometric mean (0.879..0.879)"


def test_without_moves_no_ratio_is_printed():
    assert len(probe.summary(LOG, SHAPES, moves=False)) == 2


def _table(name):
    text = (_ROOT / "tests" / "unit" / "ops_fp8_gemm_heuristic_test.cpp").read_text()
    start = text.index(f"const Measured {name}[] = {{")
    rows = re.findall(r"\{(\d+), (\d+), (\d+), (\d+), (\d+), [\d.]+\}", text[start:text.index("};", start)])
    return [(m, n, k, f"{bm}x{bn}") for m, n, k, bm, bn in rows]


def test_the_moves_file_holds_the_unit_tests_moves_in_both_orders():
    rows = _table("kThinPairsMovesH100")
    pairs = [(rows[i][:3], rows[i][3], rows[i + 1][3]) for i in range(0, len(rows), 2)]
    text = (_ROOT / "bench" / "probes" / "thin_pairs_moves.txt").read_text()
    lines = [line.split("#")[0].split() for line in text.splitlines()]
    lines = [(tuple(w[:3]), [re.match(r"\d+x\d+", t).group(0) for t in w[3:]]) for w in lines if w]
    assert len(pairs) == 24 and len(lines) == 48
    for call, old, new in pairs:
        assert (call, [old, new]) in lines and (call, [new, old]) in lines, call
