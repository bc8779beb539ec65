"""Benchmark: refsim.ptx, the CPU executor of nvcc's PTX, in thread-instructions per second.

Targets (issue 14), on the 2-core machine: >= 1,000,000 thread-instructions/s for a Marlin-style
kernel, and a 16x4096x4096 Marlin-shape GEMM in <= 60 s. Printed: per kernel the wall time of one
launch, warp- and thread-instructions, the rate and its ratio to the 1 M/s target.

Napkin math: a converged step costs a handful of NumPy passes over the per-thread PC array
(min, ==, all) plus the instruction's own gathers/scatters, ~20-60 us whatever the thread count;
108 blocks x 256 threads = 27,648 threads per step -> 0.5-1.5 G thread-instructions/s for
integer code in lockstep. Divergent code runs fewer threads per step, and mma/fp handlers cost
what refsim's exact fp and tensor-core models cost (the semantics, not the engine).

The Marlin GEMM uses refsim/cuda/marlin.cu (``refsim.cuda.marlin.gemm``) when that module is
present; otherwise that line says so. Run: python bench/bench_ptx.py [--marlin-k 4096 --marlin-n 4096]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from refsim import ptx

KERNELS = Path(__file__).resolve().parents[1] / "tests" / "ptx" / "kernels"
TARGET_RATE = 1_000_000
TARGET_MARLIN_S = 60.0


def _row(name: str, seconds: float, stats_list) -> None:
    wi = sum(s.warp_instructions for s in stats_list)
    ti = sum(s.thread_instructions for s in stats_list)
    rate = ti / seconds
    print(f"{name:<44} {seconds:8.2f} s  {wi:>10,} warp-instr  {ti:>12,} thread-instr  "
          f"{rate / 1e6:7.2f} M/s  ({rate / TARGET_RATE:5.2f}x target)")


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def test_kernels() -> None:
    rng = np.random.default_rng(0)
    red = ptx.Module((KERNELS / "reduce.ptx").read_text())
    ctl = ptx.Module((KERNELS / "control.ptx").read_text())
    mma = ptx.Module((KERNELS / "mma.ptx").read_text())
    n = 108 * 256
    x = rng.integers(-(2**31), 2**31, n).astype(np.int32)
    out = np.zeros(108, np.int32)
    dt, st = _timed(lambda: red.launch("block_sum", 108, 256, [x, out, n]))
    _row("block_sum 108x256 (shared tree + barriers)", dt, [st])
    y = np.zeros(4 * n, np.int32)
    dt, st = _timed(lambda: red.launch("shuffles", 108, 256, [x, y]))
    _row("shuffles 108x256 (shfl.sync)", dt, [st])
    xs = rng.integers(1, 5000, n).astype(np.uint32)
    steps = np.zeros(n, np.int32)
    dt, st = _timed(lambda: ctl.launch("collatz", 108, 256, [xs, steps, n]))
    _row("collatz 108x256 (divergent loops)", dt, [st])
    A = rng.standard_normal((16, 16)).astype(np.float16)
    Bt = rng.standard_normal((8, 16)).astype(np.float16)
    C = np.zeros((16, 8), np.float32)
    dt, st = _timed(lambda: mma.launch("tile_gemm", 1, 32, [A, Bt, C]))
    _row("tile_gemm 1x32 (ldmatrix + mma)", dt, [st])


def marlin(m: int, k: int, n: int, sms: int) -> None:
    try:
        from refsim.cuda import marlin as cm
        from refsim.formats import marlin as fm
    except ImportError as e:
        print(f"marlin {m}x{k}x{n}: skipped, refsim.cuda.marlin is not available ({e})")
        return
    rng = np.random.default_rng(0)
    q = rng.integers(0, 16, (k, n)).astype(np.uint8)
    sc = (rng.random((k // 128, n)) * 0.02 + 0.001).astype(np.float16)
    B, s = fm.pack(q, sc, 128)
    A = rng.standard_normal((m, k)).astype(np.float16)
    stats: list = []
    cm.gemm(A[:, :256].copy(), B[:16], s[:2], None, sms=sms)         # parse the (grouped) entries once
    dt, _ = _timed(lambda: cm.gemm(A, B, s, None, sms=sms, stats=stats))
    _row(f"marlin.cu {m}x{k}x{n} on {sms} blocks", dt, stats)
    print(f"{'':<44} {dt / TARGET_MARLIN_S:8.2f}x the {TARGET_MARLIN_S:.0f} s target for 16x4096x4096"
          if (m, k, n) == (16, 4096, 4096) else "")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--marlin-m", type=int, default=16)
    ap.add_argument("--marlin-k", type=int, default=4096)
    ap.add_argument("--marlin-n", type=int, default=4096)
    ap.add_argument("--sms", type=int, default=108)
    args = ap.parse_args()
    test_kernels()
    marlin(args.marlin_m, args.marlin_k, args.marlin_n, args.sms)


if __name__ == "__main__":
    main()
