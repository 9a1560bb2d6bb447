#!/usr/bin/env python3
"""Instructions per trip of each WGMMA loop in a kernel's SASS, along the path taken when no tile ends.

The overlapped 128-row FP8 GEMM kernels are bound by their math warps' instruction issue: on the H200 ten
instructions more or fewer per K block moved them by about 1 % (fourteenth session, bench/RESULTS.md). The
loop's static size says little (it holds the tile's epilogue and the wait's retry paths), so this follows the
common path instead: from the loop head to its back branch, taking every forward branch that skips code a
block without a tile change never runs (a division, the epilogue's stmatrix and TMA stores, a named barrier),
and falling through every other one.

Where the listing carries the encodings (`DG_JIT_DUMP_SASS=1` writes `nvdisasm -c -hex`; `cuobjdump -sass`
prints them too), it also sums the path's stall cycles: the 4-bit count in each instruction's control bits of
cycles the warp waits after issuing it before issuing its next (the compiler's static schedule; waits on
scoreboards come on top). The eighteenth session's comparison with DeepGEMM's 256x128 loop used it
(bench/RESULTS.md).

Input: SASS as `DG_JIT_DUMP_SASS=1` writes it next to a cache entry (nvdisasm's text; nvdisasm from PyPI's
`triton` or `nvidia-cuda-nvdisasm` must be on PATH for kiln to write it), or `nvdisasm -c [-hex]` of a cubin.

    DG_JIT_DUMP_SASS=1 kiln compile fp8_gemm_nt n=2112 k=7168 m=4096
    scripts/sass_loop_path.py <the .sass file it names> [--dump]
"""

import argparse
import collections
import re
import sys
from typing import Dict, List, NamedTuple, Optional

_ADDR = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*(?:/\*.*\*/)?\s*$")
# The second half of an instruction's 128-bit encoding, on the line after it: its top 23 bits are the control
# bits, the lowest 4 of them the stall count.
_HIGH_WORD = re.compile(r"^\s*/\* 0x([0-9a-f]{16}) \*/\s*$")
_LABEL = re.compile(r"^\s*(\.L_x_\d+):")
_BRANCH = re.compile(r"^(@!?U?P\w+ )?BRA `\((\.L_x_\d+)\)")
_PREDICATE = re.compile(r"^@!?U?P\w+ ")
# What only a tile change runs: the next tile's coordinates (a division), the epilogue (stmatrix, TMA stores,
# a named barrier among the warpgroup's threads).
_TILE_CHANGE = re.compile(r"MUFU|I2F|STSM|UTMASTG|BAR\.SYNC")


class Listing(NamedTuple):
    instructions: List[str]  # in order, text without address or encoding
    labels: Dict[str, int]  # each label's instruction index
    stalls: List[Optional[int]]  # each instruction's stall count, None without its encoding


def parse(lines) -> Listing:
    instructions: List[str] = []
    labels: Dict[str, int] = {}
    stalls: List[Optional[int]] = []
    pending: List[str] = []
    for line in lines:
        label = _LABEL.match(line)
        if label:
            pending.append(label.group(1))
            continue
        high = _HIGH_WORD.match(line)
        if high:
            if stalls and stalls[-1] is None:
                stalls[-1] = (int(high.group(1), 16) >> 41) & 0xF
            continue
        m = _ADDR.match(line)
        if not m:
            continue
        for name in pending:
            labels[name] = len(instructions)
        pending = []
        instructions.append(m.group(2).rstrip(" ;"))
        stalls.append(None)
    for name in pending:  # labels after the last instruction
        labels[name] = len(instructions)
    return Listing(instructions, labels, stalls)


def opcode(instruction: str) -> str:
    return _PREDICATE.sub("", instruction).split()[0].split(".")[0]


def common_path(instructions: List[str], labels: Dict[str, int], head: int, back: int) -> List[int]:
    """The indices of the instructions from `head` to the back branch at `back`, skipping forward branches over
    tile-change code and falling through all others."""
    path: List[int] = []
    i = head
    while head <= i <= back and len(path) <= 4 * (back - head + 1):
        text = instructions[i]
        path.append(i)
        if i == back:
            break
        branch = _BRANCH.match(text)
        if branch:
            target = labels.get(branch.group(2), -1)
            if not branch.group(1) and head <= target <= back:  # unconditional, inside the loop
                i = target
                continue
            if branch.group(1) and i < target <= back and _TILE_CHANGE.search(" ".join(instructions[i + 1:target])):
                i = target
                continue
        i += 1
    return path


def loops(instructions: List[str], labels: Dict[str, int]):
    """(label, head, back) for every backward conditional branch whose body issues WGMMAs."""
    for i, text in enumerate(instructions):
        branch = _BRANCH.match(text)
        if not (branch and branch.group(1)):
            continue
        head = labels.get(branch.group(2), len(instructions))
        if head < i and any(opcode(x) in ("QGMMA", "HGMMA") for x in instructions[head:i + 1]):
            yield branch.group(2), head, i


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sass", help="SASS text (DG_JIT_DUMP_SASS=1's file, or nvdisasm -c output)")
    parser.add_argument("--dump", action="store_true", help="print each loop's common path")
    args = parser.parse_args(argv)
    with open(args.sass) as f:
        listing = parse(f)
    instructions, labels, stalls = listing
    found = False
    for label, head, back in loops(instructions, labels):
        found = True
        path = common_path(instructions, labels, head, back)
        ops = collections.Counter(opcode(instructions[i]) for i in path)
        wgmma = ops["QGMMA"] + ops["HGMMA"]
        top = ", ".join(f"{name} {count}" for name, count in ops.most_common(6))
        path_stalls = [stalls[i] for i in path]
        cycles = "" if None in path_stalls else f", {sum(path_stalls)} stall cycles"
        print(f"loop {label}: {back - head + 1} static, {len(path)} on the common path ({wgmma} WGMMA, "
              f"{ops['FFMA']} FFMA{cycles}); {top}")
        if args.dump:
            print("\n".join(f"    {'' if stalls[i] is None else f's{stalls[i]:<3}'}{instructions[i]}" for i in path))
    if not found:
        print("no loop issues WGMMAs", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
