"""Benchmark: refsim.ptx, the CPU executor of nvcc's PTX, in thread-instructions per second.

Targets, on the 2-core machine: >= 1,000,000 thread-instructions/s for a Marlin-style
kernel, and a 16x4096x4096 Marlin-shape GEMM in <= 60 s. Printed: per kernel the wall time of one
launch, warp- and thread-instructions, the rate and its ratio to the 1 M/s target.

Napkin math: a converged step costs a handful of NumPy passes over the per-thread PC array
(min, ==, all) plus the instruction's own gathers/scatters, ~20-60 us whatever the thread count;
108 blocks x 256 threads = 27,648 threads per step -> 0.5-1.5 G thread-instructions/s for
integer code in lockstep. Divergent code runs fewer threads per step, and mma/fp handlers cost
what refsim's exact fp and tensor-core models cost (the semantics, not the engine).

The Marlin GEMM uses refsim/cuda/marlin.cu (``refsim.cuda.marlin.gemm``) when that module is
present; otherwise that line says so. Run: python bench/bench_ptx.py [--marlin-k 4096 --marlin-n 4096]

Before/after in one run: ``--compare-to main`` extracts that git revision's ``refsim`` package into a
temporary folder and runs the same launches with it and with this tree, alternating, ``--rounds`` times
each, in fresh processes; it prints the fastest time of each and the ratio (this tree / the revision).
The inputs, the test kernels' PTX and the machine are the same for both.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import numpy as np

from refsim import ptx

REPO = Path(__file__).resolve().parents[1]
KERNELS = REPO / "tests" / "ptx" / "kernels"
TARGET_RATE = 1_000_000
TARGET_MARLIN_S = 60.0


ROWS: list = []      # (name, seconds, warp-instructions, thread-instructions) of this process


def _row(name: str, seconds: float, stats_list) -> None:
    wi = sum(s.warp_instructions for s in stats_list)
    ti = sum(s.thread_instructions for s in stats_list)
    ROWS.append((name, seconds, wi, ti))
    if os.environ.get("BENCH_PTX_JSON"):
        return
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


def parsing() -> None:
    """Parse rates: 10^5 instructions and 10^5 parameter declarations (linear-time parsing)."""
    from refsim.ptx.errors import PtxLimitError
    from refsim.ptx.parse import parse

    head = ".version 8.0\n.target sm_80\n.address_size 64\n"
    n = 100_000
    text = head + ".visible .entry k()\n{\n.reg .b32 %r<4>;\n" + "add.s32 %r1, %r1, 1;\n" * n + "}\n"
    dt, _ = _timed(lambda: parse(text))
    if not os.environ.get("BENCH_PTX_JSON"):
        print(f"{'parse 100,000 instructions':<44} {dt:8.2f} s  {n / dt / 1e6:7.2f} M statements/s")
    params = ",\n".join(f".param .u32 p{i}" for i in range(n))
    text = head + f".visible .entry k(\n{params}\n)\n{{\nret;\n}}\n"

    def refused():
        try:
            parse(text)
        except PtxLimitError:
            return None
    dt, _ = _timed(refused)
    if not os.environ.get("BENCH_PTX_JSON"):
        print(f"{'parse 100,000 parameters (refused at 32 KB)':<44} {dt:8.2f} s")


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
    if (m, k, n) == (16, 4096, 4096) and not os.environ.get("BENCH_PTX_JSON"):
        print(f"{'':<44} {dt / TARGET_MARLIN_S:8.2f}x the {TARGET_MARLIN_S:.0f} s target for 16x4096x4096")


def _run_with(pythonpath: Path, argv: list[str]) -> list:
    """The rows of this script run in a fresh process that imports refsim from ``pythonpath``."""
    env = {**os.environ, "PYTHONPATH": str(pythonpath), "BENCH_PTX_JSON": "1"}
    out = subprocess.run([sys.executable, __file__, *argv], env=env, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def compare(rev: str, rounds: int, argv: list[str]) -> None:
    """Fastest of ``rounds`` alternating runs with ``rev``'s refsim and with this tree's; the ratio."""
    with tempfile.TemporaryDirectory(prefix="bench-ptx-") as tmp:
        archive = Path(tmp) / "rev.tar"
        subprocess.run(["git", "-C", str(REPO), "archive", "-o", str(archive), rev, "refsim"], check=True)
        with tarfile.open(archive) as tf:
            tf.extractall(Path(tmp) / "rev", filter="data")
        best: dict[str, dict[str, tuple]] = {"rev": {}, "tree": {}}
        for _ in range(rounds):
            for which, path in (("rev", Path(tmp) / "rev"), ("tree", REPO)):
                for name, sec, wi, ti in _run_with(path, argv):
                    if name not in best[which] or sec < best[which][name][0]:
                        best[which][name] = (sec, wi, ti)
    print(f"{'launch':<44} {rev + ' s':>10} {'this tree s':>12} {'ratio':>7}  same counts")
    for name, (sec, wi, ti) in best["tree"].items():
        old = best["rev"].get(name)
        if old is None:
            print(f"{name:<44} {'-':>10} {sec:12.2f}")
            continue
        print(f"{name:<44} {old[0]:10.2f} {sec:12.2f} {sec / old[0]:7.2f}  {(wi, ti) == old[1:]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--marlin-m", type=int, default=16)
    ap.add_argument("--marlin-k", type=int, default=4096)
    ap.add_argument("--marlin-n", type=int, default=4096)
    ap.add_argument("--sms", type=int, default=108)
    ap.add_argument("--compare-to", metavar="REV", help="also run git revision REV's refsim; print both")
    ap.add_argument("--rounds", type=int, default=2, help="alternating runs per side with --compare-to")
    ap.add_argument("--no-parse", action="store_true",
                    help="skip the parse rates (--compare-to does: older parsers are quadratic in a long header)")
    args = ap.parse_args()
    if args.compare_to:
        compare(args.compare_to, args.rounds, [f"--marlin-m={args.marlin_m}", f"--marlin-k={args.marlin_k}",
                                                f"--marlin-n={args.marlin_n}", f"--sms={args.sms}", "--no-parse"])
        return
    if not args.no_parse:
        parsing()
    test_kernels()
    marlin(args.marlin_m, args.marlin_k, args.marlin_n, args.sms)
    if os.environ.get("BENCH_PTX_JSON"):
        print(json.dumps(ROWS))


if __name__ == "__main__":
    main()
