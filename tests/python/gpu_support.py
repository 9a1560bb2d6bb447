"""Shared pieces of the GPU tests (tests/python/test_gpu_*.py): torch references of the casts, and a small
runner so the files also run without pytest (`python3 tests/python/test_gpu_ops.py`), printing one
PASS/FAIL/SKIP line per test as the C++ GPU tests do (scripts/device-run.sh counts them).

The references compute what the kernels promise, on the CPU in float32 (IEEE division):
    scale = max(amax, 1e-4) / 448,  q = e4m3(x / scale) rounded to nearest even,
so every fp8 byte and every scale must match bit for bit.
"""

from __future__ import annotations

import contextlib
import re
import sys
import traceback

try:
    import torch
except ImportError:  # the CI machine: the GPU tests skip
    torch = None

HAVE_GPU = torch is not None and torch.cuda.is_available()
SKIP_REASON = "needs PyTorch with a CUDA GPU"


def random_bf16(rows: int, cols: int, device="cuda", seed: int = 0, row_stride: int | None = None):
    """bf16 [rows, cols] with magnitudes varying per row over 2^-10 .. 2^10, an all-zero row and a row below
    the 1e-4 amax floor when there are enough rows; with row_stride > cols, a view into a wider buffer whose
    padding holds huge values that must never be read."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, cols, generator=g) * torch.exp2(torch.randint(-10, 11, (rows, 1), generator=g).float())
    if rows > 2:
        x[1] = 0
        x[2] *= 1e-7
    x = x.to(torch.bfloat16)
    if row_stride is not None and row_stride != cols:
        wide = torch.full((rows, row_stride), 3e38, dtype=torch.bfloat16)
        wide[:, :cols] = x
        return wide.to(device)[:, :cols]
    return x.to(device)


def calc_diff(x, y) -> float:
    """DeepGEMM's calc_diff: 1 - 2 sum(xy) / sum(x^2 + y^2), in float64."""
    x, y = x.double(), y.double()
    denominator = (x * x + y * y).sum()
    if denominator == 0:
        return 0.0
    return float(1 - 2 * (x * y).sum() / denominator)


def per_token_reference(x):
    """(fp8 [m, k], scales [m, k/128] contiguous) computed on the CPU."""
    m, k = x.shape
    xf = x.detach().cpu().float().view(m, k // 128, 128)
    scales = xf.abs().amax(dim=2).clamp(min=1e-4) / 448.0
    q = (xf / scales.unsqueeze(2)).to(torch.float8_e4m3fn).view(m, k)
    return q, scales


def per_block_reference(x):
    """(fp8 [n, k], scales [ceil(n/128), k/128]) computed on the CPU; rows past n count as zeros."""
    n, k = x.shape
    padded_n = (n + 127) // 128 * 128
    xp = torch.zeros(padded_n, k)
    xp[:n] = x.detach().cpu().float()
    blocks = xp.view(padded_n // 128, 128, k // 128, 128)
    scales = blocks.abs().amax(dim=(1, 3)).clamp(min=1e-4) / 448.0
    q = (blocks / scales[:, None, :, None]).to(torch.float8_e4m3fn).view(padded_n, k)[:n]
    return q, scales


def assert_fp8_equal(actual, expected, what: str):
    a = actual.detach().cpu().contiguous().view(torch.uint8)
    e = expected.contiguous().view(torch.uint8)
    assert a.shape == e.shape, f"{what}: shape {tuple(a.shape)} != {tuple(e.shape)}"
    bad = (a != e).nonzero()
    assert bad.numel() == 0, (f"{what}: {bad.shape[0]} of {a.numel()} fp8 bytes differ; first at "
                              f"{tuple(bad[0].tolist())}: got 0x{int(a[tuple(bad[0])]):02x}, "
                              f"expected 0x{int(e[tuple(bad[0])]):02x}")


def assert_scales_equal(actual, expected, what: str):
    a = actual.detach().cpu().float()
    assert a.shape == expected.shape, f"{what}: scales shape {tuple(a.shape)} != {tuple(expected.shape)}"
    bad = (a != expected).nonzero()
    assert bad.numel() == 0, (f"{what}: {bad.shape[0]} scales differ; first at {tuple(bad[0].tolist())}: "
                              f"{a[tuple(bad[0])].item()!r} != {expected[tuple(bad[0])].item()!r}")


@contextlib.contextmanager
def raises(exc_type, match: str = ""):
    """pytest.raises without pytest."""
    try:
        yield
    except exc_type as e:
        if match and not re.search(match, str(e)):
            raise AssertionError(f"{exc_type.__name__} raised, but {match!r} is not in: {e}") from e
        return
    raise AssertionError(f"{exc_type.__name__} was not raised")


def run_module(module_globals: dict) -> int:
    """Runs every test_* function of a module (no fixtures), printing PASS/FAIL/SKIP lines; returns the
    exit status (0: all passed or skipped; 1: a failure; 77: no GPU)."""
    name = module_globals.get("__file__", "tests")
    if not HAVE_GPU:
        print(f"SKIP {name}: {SKIP_REASON}")
        return 77
    failed = 0
    for test_name, fn in list(module_globals.items()):
        if not test_name.startswith("test_") or not callable(fn):
            continue
        try:
            fn()
        except Exception:
            failed += 1
            print(f"FAIL {test_name}")
            traceback.print_exc(file=sys.stdout)
        else:
            print(f"PASS {test_name}")
        sys.stdout.flush()
    return 1 if failed else 0
