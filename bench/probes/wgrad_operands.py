"""Random operands for the weight-gradient form's probes: e4m3 values cast from normal samples, and their per-1x128
scales in [0.5, 1.5) in the MN-major, TMA-aligned layout the call takes (a [rows, k / 128] view of a
[k / 128, aligned rows] tensor)."""
import argparse
from pathlib import Path

import kiln
import torch


def probe_start(doc: str, add_arguments=None):
    """What a probe starts with: its parsed arguments (--json FILE, and those `add_arguments(parser)` adds; the
    description from `doc`'s first paragraph), a 1 GB CUDA buffer to flush L2 with (flushed_timing.flushed_median_us)
    and a CUDA generator."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--json", type=Path, help="write the results here as well")
    if add_arguments:
        add_arguments(parser)
    args = parser.parse_args()  # before CUDA: --help needs no GPU
    dev = torch.device("cuda")
    return args, torch.empty(1 << 30, dtype=torch.uint8, device=dev), torch.Generator(device=dev)


def operand(rows: int, k: int, gen: torch.Generator):
    """A flat [rows * k] e4m3 tensor (view it as [rows, k] for a dense call) and its [rows, ceil(k / 128)] scales."""
    dev = gen.device
    x = torch.randn(rows * k, device=dev, generator=gen).to(torch.float8_e4m3fn)
    sf = torch.rand(-(-k // 128), kiln.get_tma_aligned_size(rows, 4), device=dev, generator=gen).T[:rows] + 0.5
    return x, sf


def dense_call(m: int, n: int, k: int, gen: torch.Generator):
    """One dense weight-gradient call's operands, seeded from its shape so that probes time the same data:
    ((a [m, k], sfa), (b [n, k], sfb), c [m, n] fp32 random, d [m, n] fp32 uninitialised)."""
    gen.manual_seed(m * 31 + n * 7 + k)
    a, sa = operand(m, k, gen)
    b, sb = operand(n, k, gen)
    c = torch.randn(m, n, device=gen.device, generator=gen)
    return (a.view(m, k), sa), (b.view(n, k), sb), c, torch.empty_like(c)


def first_or_compare(call, d, reference, label: str):
    """Runs `call` once (D's reset is the caller's) and compares D's bits with `reference`, the call's first result:
    returns (reference, 0) where they match or there was none yet (then D's copy is the reference), and (reference,
    1) after printing that `label`'s D differs."""
    call()
    torch.cuda.synchronize()
    if reference is None:
        return d.clone(), 0
    if torch.equal(d.view(torch.int32), reference.view(torch.int32)):
        return reference, 0
    print(f"{label}: D differs", flush=True)
    return reference, 1
