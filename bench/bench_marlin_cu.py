"""Benchmark: refsim/cuda/marlin.cu through the refsim.ptx interpreter, per test case.

Prints, for the shapes of tests/cuda/test_marlin.py and two larger ones: interpreter wall time
(best of ``--repeats``, the per-entry module parse included once per process and reported apart),
the emulator's time for the same call, their ratio, warp- and thread-instructions issued, and the
interpreter's thread-instruction rate. No target is asserted.

Napkin math for one k128 x n128 tile of the M <= 16 kernel: 8 warps x (2 k16 blocks x (1 ldmatrix +
2 shared loads + 4 x (2 dequant x 4 ops + 4 scale products + 2 mma)) + pipeline bookkeeping) ~
8 x 150 warp-instructions; a 1 x 4096 x 4096 GEMM has 1024 such tiles, ~1.2 M warp-instructions
(~40 M thread-instructions) plus the reductions.

Run: python bench/bench_marlin_cu.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from refsim.cuda import launch
from refsim.cuda import marlin as cm
from refsim.emulator import marlin_kernel as mk
from refsim.formats import marlin

# (M, K, N, group_size, sms, arch)
CASES = [
    (1, 256, 256, 128, 2, "sm_80"),
    (3, 512, 256, 128, 3, "sm_80"),
    (2, 384, 256, None, 6, "sm_86"),
    (16, 512, 256, 128, 8, "sm_80"),
    (20, 256, 256, 128, 3, "sm_89"),
    (70, 128, 256, None, 2, "sm_80"),
    (2, 512, 256, 128, 7, "sm_90"),
    (130, 384, 256, None, 5, "sm_80"),
    (64, 1024, 512, 128, 11, "sm_80"),
    (1, 4096, 4096, 128, 108, "sm_80"),
]


def _problem(rng, m, k, n, gs):
    q = rng.integers(0, 16, (k, n)).astype(np.uint8)
    g = 1 if gs is None else k // gs
    sc = (rng.random((g, n)) * 0.02 + 0.001).astype(np.float16)
    B, s = marlin.pack(q, sc, gs)
    return rng.standard_normal((m, k)).astype(np.float16), B, s


def _best(f, repeats):
    best, out = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = f()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--skip-large", action="store_true", help="leave out the 1 x 4096 x 4096 case")
    args = ap.parse_args()
    print(f"{'case (M, K, N, g, sms, arch)':40} {'parse s':>8} {'kernel s':>9} {'emul s':>7} {'ratio':>6} "
          f"{'warp-instr':>11} {'thread-instr/s':>15}")
    for m, k, n, gs, sms, arch in CASES:
        if args.skip_large and k == 4096:
            continue
        A, B, s = _problem(np.random.default_rng(m + sms), m, k, n, gs)
        parse = 0.0
        for ln in cm.launch_plan(m, n, k, sms, gs):
            t0 = time.perf_counter()
            launch.module(cm._ptx_text(), ln.kernel)
            parse += time.perf_counter() - t0
        stats: list = []
        t_kernel, C = _best(lambda: cm.gemm(A, B, s, None, arch=arch, sms=sms, stats=stats), args.repeats)
        t_emul, E = _best(lambda: mk.marlin_gemm(A, B, s, arch=arch, sms=sms), args.repeats)
        runs = len(stats) // args.repeats
        warp = sum(x.warp_instructions for x in stats[:runs])
        thread = sum(x.thread_instructions for x in stats[:runs])
        same = np.array_equal(C.view(np.uint16), E.view(np.uint16))
        print(f"{str((m, k, n, gs, sms, arch)):40} {parse:8.2f} {t_kernel:9.2f} {t_emul:7.3f} {t_kernel / t_emul:6.0f} "
              f"{warp:11d} {thread / t_kernel:15.3g}{'' if same else '  BITS DIFFER'}")


if __name__ == "__main__":
    main()
