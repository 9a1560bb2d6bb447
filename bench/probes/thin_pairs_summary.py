#!/usr/bin/env python3
"""Summarises an fp8_gemm_test --shapes log of bench/probes/thin_pairs_moves.txt or thin_pairs_calls.txt: each call's
tiles, the timings of its two orders averaged, and for the moves the new tile's time over the old one's on geometric
mean. Usage: thin_pairs_summary.py LOG SHAPES_FILE"""
import collections
import math
import re
import sys

TIMING = re.compile(r"\s+time m=(\d+)\s+n=(\d+)\s+k=(\d+)\s+(\d+x\d+)\s+\d+ st\s+\S+\s+(?:ma2 |mc2 )?\s*(?:ovl|ser)"
                    r"(?: g\d+)?\s+([\d.]+) us")


def timings(log_text):
    """{(m, n, k): {tile: [us, ...]}} from the harness's closing timings section."""
    found = collections.defaultdict(lambda: collections.defaultdict(list))
    for line in log_text.split("\ntimings", 1)[-1].splitlines():
        m = TIMING.match(line)
        if m:
            found[m.group(1, 2, 3)][m.group(4)].append(float(m.group(5)))
    return found


def calls(shapes_text):
    """[((m, n, k), [tile, ...]), ...]: each call once, its tiles in their first line's order, suffixes dropped."""
    out, seen = [], set()
    for line in shapes_text.splitlines():
        words = line.split("#")[0].split()
        if not words or tuple(words[:3]) in seen:
            continue
        seen.add(tuple(words[:3]))
        out.append((tuple(words[:3]), [re.match(r"\d+x\d+", w).group(0) for w in words[3:]]))  # 256x128ag16 -> 256x128
    return out


def summary(log_text, shapes_text, moves):
    lines, ratios = [], []
    found = timings(log_text)
    for call, tiles in calls(shapes_text):
        us = {t: sum(found[call][t]) / len(found[call][t]) for t in tiles if found[call][t]}
        if len(us) < len(tiles):
            lines.append(" x ".join(call) + ": not timed (" + ", ".join(t for t in tiles if t not in us) + ")")
            continue
        lines.append(" x ".join(call) + "  " + "  ".join(f"{t} {u:.1f}" for t, u in us.items()))
        if moves:
            ratios.append(us[tiles[1]] / us[tiles[0]])
    if ratios:
        lines.append(f"{len(ratios)} moves: new / old {math.exp(sum(map(math.log, ratios)) / len(ratios)):.3f} on "
                     f"geometric mean ({min(ratios):.3f}..{max(ratios):.3f})")
    return lines


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with open(sys.argv[1]) as log, open(sys.argv[2]) as shapes:
        print("\n".join(summary(log.read(), shapes.read(), sys.argv[2].endswith("moves.txt"))))
