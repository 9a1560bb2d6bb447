"""Where the nn form's time goes: m_grouped_bf16_gemm_nn_contiguous ran 6 % behind the nt form at 4 x 34304 rows x
6144 x 7168 on an H100 (bench/RESULTS.md, fifty-third session), level at 8 x 34048 x 4096 x 2048, on the same tile.
An N-major B loads in 64-column boxes (four a stage at 256 columns, against one box of 256 rows K-major), and the
m-grouped nn form reads them through a 3-D map whose plane is the expert. This times, on one GPU in one run, with the
tile forced to the plan's (128x256, 3 stages, no pairs) and with the plan's own choice:
  * the dense GEMM over one expert's rows, nt against nn (bf16_gemm_nt / bf16_gemm_nn: a 2-D map either way);
  * the m-grouped GEMM over every expert, nt against nn (the nn one through the 3-D map).
If the dense nn is as far behind nt as the grouped one, the boxes (or the N-major reads) cost it, not the 3-D map.
Verified against torch's product first (calc_diff < 1e-5). Prints one line per (shape, call, tile):
  python3 bench/probes/nn_layout_probe.py [--alternate]
The first run timed each tile's calls in one order (nt before nn), and the plan's kernels (the same 128x256 as the
forced tile) 4.6 % slower than the forced tile run after them: drift, not a kernel. --alternate times the grouped nt
and nn only, with the plan's tile, in the order nt nn nn nt, three times.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import kiln  # noqa: E402
from bf16_gemm_bench import calc_diff, m_grouped_operands  # noqa: E402
from flushed_timing import flushed_median_us  # noqa: E402

SHAPES = [(4, 34304, 6144, 7168), (8, 34048, 4096, 2048)]  # experts, rows, n, k (bf16_gemm_bench's --m-grouped)
TILES = [(0, 0, 0, 0), (128, 256, 3, 1), (128, 128, 0, 1)]  # block_m, block_n, stages, cluster_m (0: the plan's)


def main() -> int:
    device = torch.device("cuda")
    flush = torch.empty(1 << 30, dtype=torch.uint8, device=device)
    timed = lambda call: flushed_median_us(call, flush, reps=20, warmup=3, idle_s=0.2)  # noqa: E731
    print(f"nn_layout_probe: {torch.cuda.get_device_name()}, kiln {kiln.version()}")
    failures = 0
    for index, (groups, m, n, k) in enumerate(SHAPES):
        a, b, indices, firsts, sizes = m_grouped_operands(torch, device, groups, m, n, k, seed=index,
                                                          sizes_seed=min(index, 1))
        b_kn = b.transpose(1, 2).contiguous()  # [G, k, n]
        d = torch.empty(m, n, device=device, dtype=torch.bfloat16)
        rows = sizes[0]  # the dense calls: expert 0's rows
        calls = {
            "dense nt": lambda: kiln.bf16_gemm_nt(a[:rows], b[0], d[:rows]),
            "dense nn": lambda: kiln.bf16_gemm_nn(a[:rows], b_kn[0], d[:rows]),
            "grouped nt": lambda: kiln.m_grouped_bf16_gemm_nt_contiguous(a, b, d, indices),
            "grouped nn": lambda: kiln.m_grouped_bf16_gemm_nn_contiguous(a, b_kn, d, indices),
        }
        if "--alternate" in sys.argv:
            for round_ in range(3):
                for label in ("grouped nt", "grouped nn", "grouped nn", "grouped nt"):
                    print(f"{groups} x {m} rows, {n} x {k}, {label:10s} round {round_} {timed(calls[label]):9.1f} us",
                          flush=True)
            continue
        for tile in TILES:
            kiln.set_bf16_gemm_overrides(block_m=tile[0], block_n=tile[1], stages=tile[2], cluster_m=tile[3])
            name = "plan" if tile == (0, 0, 0, 0) else f"{tile[0]}x{tile[1]} s{tile[2]} c{tile[3]}"
            try:
                for label, call in calls.items():
                    d.fill_(float("nan"))
                    call()
                    torch.cuda.synchronize()
                    checked = slice(firsts[-1], firsts[-1] + 64) if label.startswith("grouped") else slice(0, 64)
                    g = groups - 1 if label.startswith("grouped") else 0
                    diff = calc_diff(d[checked], a[checked].double() @ b[g].double().T)
                    ok = diff < 1e-5 and bool(torch.isfinite(d[checked]).all())
                    failures += not ok
                    us = timed(call)
                    print(f"{groups} x {m} rows, {n} x {k}, {label:10s} {name:16s} {us:9.1f} us  "
                          f"(dense over {rows} rows)  diff {diff:.1e} {'ok' if ok else 'WRONG'}", flush=True)
            except Exception as e:  # noqa: BLE001 - reported, counted
                print(f"{groups} x {m}, {n} x {k}, {name}: {type(e).__name__}: {e}", flush=True)
                failures += 1
            finally:
                kiln.set_bf16_gemm_overrides()
        del a, b, b_kn, d
        torch.cuda.empty_cache()
    print("PASS nn_layout_probe" if failures == 0 else f"FAIL nn_layout_probe: {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
