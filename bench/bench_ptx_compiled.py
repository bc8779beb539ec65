"""Benchmark: refsim.ptx's compiled path (refsim.ptx.compiled) against its targets, and the interpreter.

Targets: refsim's ``marlin.cu`` 16x4096x4096 on 108 blocks <= 1.5 s and 1x4096x4096 <= 5 s
after the first compile (the compile time is printed too); the test kernels of tests/ptx/kernels at
108 x 256 threads >= 100 M thread-instructions/s. Printed: the load (``uptime``), the first-build times
(the runtime library and each kernel, in a fresh cache), per case the best of ``--repeats`` wall
times, the rate, the ratio to the target and, with ``--interpreter``, the NumPy interpreter's time on
the same launch and whether the bits agree. Nothing is asserted: the numbers are reported with the load.

Napkin math: a Marlin 16x4096x4096 launch issues ~2.2 M warp-instructions (~70 M thread-instructions)
in ~6,000 scheduler steps of ~350 warps each; per thread-instruction the generated C costs ~1-3 ns,
and the 131,072 mma.m16n8k16 (16 x 8 outputs x 2 blocks of 8 products each) cost ~1 us apiece in
the compiled T-FDPA model: ~0.3 s + ~0.15 s + scheduling.

Run: python bench/bench_ptx_compiled.py [--repeats 3] [--interpreter] [--skip-marlin]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
from _timing import repeat_timed  # bench/_timing.py (scripts run as python bench/NAME.py)

KERNELS = Path(__file__).resolve().parents[1] / "tests" / "ptx" / "kernels"
TARGET_RATE = 100e6
TARGET_MARLIN_S = {16: 1.5, 1: 5.0}


def _best(fn, repeats: int):
    """(best wall s, best CPU s, the last result) of ``repeats`` calls."""
    t = repeat_timed(fn, repeats)
    return min(t.walls), min(t.cpus), t.result


def _uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return f"load average {os.getloadavg()}"


def first_builds() -> None:
    """Build times in a fresh cache: the runtime library, then the C of two kernels."""
    from refsim.cuda import launch
    from refsim.cuda import marlin as cm
    from refsim.ptx import compiled
    from refsim.ptx.compiled import state

    t0 = time.perf_counter()
    why = compiled.unavailable()
    print(f"runtime library build: {time.perf_counter() - t0:6.2f} s{'' if why is None else '  UNAVAILABLE: ' + why}")
    for name in ("refsim_marlin_m1_n8_k8_grouped", "refsim_marlin_m4_n16_k4_grouped"):   # M <= 16; M = 64
        m = launch.module(cm._ptx_text(), name)
        t0 = time.perf_counter()
        tr = compiled.translation(m, name)
        t1 = time.perf_counter()
        state.kernel_library(tr.source)
        t2 = time.perf_counter()
        n = len(m._kernel(name).instructions)
        print(f"kernel {name}: {n} instructions, {tr.source.count('static int t_')} templates, "
              f"translate {t1 - t0:5.2f} s, C build {t2 - t1:6.2f} s")


def test_kernels(repeats: int, interpreter: bool) -> None:
    from refsim import ptx

    rng = np.random.default_rng(0)
    red = ptx.Module((KERNELS / "reduce.ptx").read_text())
    ctl = ptx.Module((KERNELS / "control.ptx").read_text())
    n = 108 * 256
    x = rng.integers(-(2**31), 2**31, n).astype(np.int32)
    xs = rng.integers(1, 5000, n).astype(np.uint32)
    cases = [("block_sum 108x256 (shared tree + barriers)", red, "block_sum", lambda: [x, np.zeros(108, np.int32), n]),
             ("shuffles 108x256 (shfl.sync)", red, "shuffles", lambda: [x, np.zeros(4 * n, np.int32)]),
             ("collatz 108x256 (divergent loops)", ctl, "collatz", lambda: [xs, np.zeros(n, np.int32), n]),
             ("branchy 108x256 (divergent branches)", ctl, "branchy", lambda: [x, np.zeros(n, np.int32), n])]
    for label, m, k, args in cases:
        m.launch(k, 108, 256, args(), executor="compiled")                    # build once
        dt, ct, st = _best(lambda: m.launch(k, 108, 256, args(), executor="compiled"), repeats)
        rate = st.thread_instructions / dt
        line = (f"{label:<44} {dt * 1e3:8.1f} ms (cpu {ct * 1e3:6.1f}) {st.thread_instructions:>11,} thread-instr "
                f"{rate / 1e6:7.1f} M/s ({rate / TARGET_RATE:5.2f}x the 100 M/s target)")
        if interpreter:
            di, _, _ = _best(lambda: m.launch(k, 108, 256, args(), executor="interpreter"), repeats)
            line += f"  interpreter {di * 1e3:8.1f} ms ({di / dt:4.1f}x)"
        print(line)


def marlin(m: int, repeats: int, interpreter: bool) -> None:
    from refsim.cuda import marlin as cm
    from refsim.formats import marlin as fm

    k = n = 4096
    rng = np.random.default_rng(0)
    B, s = fm.pack(rng.integers(0, 16, (k, n)).astype(np.uint8),
                   (rng.random((k // 128, n)) * 0.02 + 0.001).astype(np.float16), 128)
    A = rng.standard_normal((m, k)).astype(np.float16)
    run = lambda ex: cm.gemm(A, B, s, None, sms=108, options={"executor": ex})  # noqa: E731
    t0 = time.perf_counter()
    run("compiled")
    first = time.perf_counter() - t0
    dt, ct, C = _best(lambda: run("compiled"), repeats)
    target = TARGET_MARLIN_S[m]
    line = (f"marlin.cu {m}x{k}x{n} on 108 blocks: {dt:6.2f} s (cpu {ct:5.2f} s; {dt / target:4.2f}x the {target:.1f} s "
            f"target; first call {first:6.2f} s, its C built above)")
    if interpreter:
        di, _, Ci = _best(lambda: run("interpreter"), 1)
        same = C.view(np.uint16).tobytes() == Ci.view(np.uint16).tobytes()
        line += f"  interpreter {di:6.2f} s ({di / dt:4.1f}x){'' if same else '  BITS DIFFER'}"
    print(line)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--interpreter", action="store_true", help="also time the NumPy interpreter (slow)")
    ap.add_argument("--skip-marlin", action="store_true")
    ap.add_argument("--keep-cache", action="store_true", help="use $REFSIM_CACHE instead of a fresh cache")
    args = ap.parse_args()
    if not args.keep_cache:
        os.environ["REFSIM_CACHE"] = tempfile.mkdtemp(prefix="refsim-bench-")
    print(_uptime())
    first_builds()
    test_kernels(args.repeats, args.interpreter)
    if not args.skip_marlin:
        for m in (16, 1):
            marlin(m, args.repeats, args.interpreter)
    print(_uptime())


if __name__ == "__main__":
    main()
