"""Why CTA pairs with an N-major B summed wrong (fifty-first session, on an H100: forced 256x128 and 128x256 pairs of
bf16_gemm_nn and bf16_gemm_tn at 333 x 1024 x 1048; the kernel refused them from 4c8f6b0 to f527ffb). This checks
each forced pair over a matrix of shapes that separates the suspects: M a whole number of pair units or not (a tile
past M), K a multiple of 64 or with a tail (a box half zero-filled), one n block or several; for a wrong result it
prints where the wrong elements are (rows by m block, columns by the 64-column box, the share that is zero, the
median ratio to the reference). It found them in the second CTA of each pair, in every box but the first: the WGMMA
descriptors' unmasked start addresses (ptx::smem_desc_start_units says why). Since f527ffb every case is right;
bench/probes/n_major_pairs_2026-12-07_h100.txt has the runs before and after.
  PYTHONPATH=<package> python3 bench/probes/n_major_pairs_probe.py [--quick]
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import kiln  # noqa: E402
from fp8_gemm_bench import calc_diff  # noqa: E402

SHAPES = [(512, 1024, 1024), (512, 1024, 1048), (333, 1024, 1024), (333, 1024, 1048), (256, 128, 64),
          (256, 256, 128), (512, 256, 4096), (1024, 2048, 2048)]
TILES = [(256, 128, 1), (256, 128, 2), (128, 256, 1), (128, 256, 2), (128, 128, 2)]


def where_wrong(d, ref, block_m, block_n):
    bad = ~torch.isclose(d.float(), ref.float(), rtol=2e-2, atol=2e-2 * ref.abs().max().item())
    if not bool(bad.any()):
        return "no element off"
    rows, cols = bad.nonzero(as_tuple=True)
    half = block_m  # a CTA's rows: one m block each, pairs of m blocks per cluster
    ctas = sorted({(int(r) // half) for r in rows.tolist()})
    boxes = sorted({int(c) // 64 for c in cols.tolist()})
    zero = float((d.float()[bad] == 0).float().mean())
    k_frac = float((d.float()[bad] / ref.float()[bad]).median())
    return (f"{int(bad.sum())} of {bad.numel()} off; m blocks {ctas[:12]}; 64-col boxes {boxes[:16]}; "
            f"{zero:.0%} zero; median d/ref {k_frac:.3f}")


def main() -> int:
    device = torch.device("cuda")
    print(f"n_major_pairs_probe: {torch.cuda.get_device_name()}, kiln {kiln.version()}")
    wrong = 0
    quick = "--quick" in sys.argv  # two shapes, the nn layout, the 128-row pairs
    for m, n, k in SHAPES[:1] + SHAPES[5:6] if quick else SHAPES:
        torch.manual_seed(m * 7 + n + k)
        a = torch.randn(m, k, device=device, dtype=torch.bfloat16)
        b = torch.randn(k, n, device=device, dtype=torch.bfloat16)  # [k, n]: N-major as bf16_gemm_nt sees b.T
        ref = (a.double() @ b.double())
        for layout in ("nn", "tn") if m % 8 == 0 and not quick else ("nn",):  # tn: a given [k, m] needs 16-byte rows
            for block_m, block_n, cluster_m in TILES[3:] if quick else TILES:
                kiln.set_bf16_gemm_overrides(block_m=block_m, block_n=block_n, cluster_m=cluster_m)
                d = torch.full((m, n), float("nan"), device=device, dtype=torch.bfloat16)
                try:
                    if layout == "nn":
                        kiln.bf16_gemm_nn(a, b, d)
                    else:
                        kiln.bf16_gemm_tn(a.T.contiguous(), b, d)
                    torch.cuda.synchronize()
                    diff = calc_diff(d, ref)
                    ok = diff < 1e-5 and bool(torch.isfinite(d).all())
                    detail = "" if ok else "  " + where_wrong(torch.nan_to_num(d, 0.0), ref, block_m, block_n)
                    wrong += not ok
                    print(f"{layout} {m} x {n} x {k} {block_m}x{block_n} c{cluster_m}: diff {diff:.2e} "
                          f"{'ok' if ok else 'WRONG'}{detail}", flush=True)
                except Exception as e:  # noqa: BLE001 - reported
                    print(f"{layout} {m} x {n} x {k} {block_m}x{block_n} c{cluster_m}: {type(e).__name__}: {e}",
                          flush=True)
                finally:
                    kiln.set_bf16_gemm_overrides()
    print(f"n_major_pairs_probe: {wrong} wrong")
    return 0


if __name__ == "__main__":
    sys.exit(main())
