"""Benchmark: every pack and unpack (GPTQ 2/3/4/8-bit, AWQ, Marlin, bitplane) against np.copy.

Target: each pack and unpack moves data at >= 0.35 of np.copy's bandwidth on the same
layer-sized data, measured in one run. Bytes counted for a kernel = bytes of its inputs + bytes of
its outputs (uint8 codes <-> packed words; Marlin's fp16 scales included); np.copy of the uint8 code
matrix counts 2 * K * N bytes the same way. Times are the best of ``--repeat`` runs; the np.copy
time is re-measured right before each format so that load changes hit both sides alike.

    python bench/bench_packers.py [--k 4096] [--n 4096] [--repeat 5]
"""

from __future__ import annotations

import argparse

import numpy as np

from refsim.formats import awq, bitplane, gptq, marlin
from refsim.native import packers as native

from _timing import repeat_timed  # bench/_timing.py (scripts run as python bench/NAME.py)

TARGET = 0.35


def best_of(fn, repeat):
    """(best wall time, best process CPU time) in seconds over ``repeat`` runs. On a shared machine
    the wall time includes time spent descheduled; the CPU time of these single-threaded calls
    does not, so both are printed."""
    walls, cpus, _ = repeat_timed(fn, repeat)
    return min(walls), min(cpus)


def nbytes(x) -> int:
    return sum(a.nbytes for a in x) if isinstance(x, tuple) else x.nbytes


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--k", type=int, default=4096)
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    k, n, rep = args.k, args.n, args.repeat
    rng = np.random.default_rng(0)
    cases = []
    for bits in gptq.BITS:
        q = rng.integers(0, 1 << bits, (k, n), dtype=np.uint8)
        cases.append((f"gptq {bits}-bit", q, lambda q=q, b=bits: gptq.pack_qweight(q, b),
                      lambda p, b=bits: gptq.unpack_qweight(p, b, k)))
    q4 = rng.integers(0, 16, (k, n), dtype=np.uint8)
    cases.append(("awq 4-bit", q4, lambda: awq.pack_columns(q4), lambda p: awq.unpack_columns(p, n)))
    sc = (rng.random((k // 128, n)) + 0.5).astype(np.float16)
    cases.append(("marlin g128", q4, lambda: marlin.pack(q4, sc, 128), lambda p: marlin.unpack(*p)))
    qt = np.ascontiguousarray(q4.T)                                    # bitplane codes are (N, K)
    cases.append(("bitplane 4", qt, lambda: bitplane.pack(qt, 4), lambda p: bitplane.unpack(p)))
    print(f"layer {k}x{n}, best of {rep}; ratio = (bytes in + bytes out) / time / np.copy bandwidth "
          f"(wall / CPU time); path: {'compiled' if native.available() else 'NumPy'} for every format")
    print(f"{'format':<14} {'copy GB/s':>9} {'pack ms':>8} {'pack/copy':>12} {'unpack ms':>10} {'unpack/copy':>12}")
    ok_wall = ok_cpu = True
    for name, q, pack, unpack in cases:
        packed = pack()
        moved = q.nbytes + nbytes(packed)
        cw, cc = best_of(lambda: np.copy(q), rep)
        (pw, pc), (uw, uc) = best_of(pack, rep), best_of(lambda: unpack(packed), rep)
        r = {key: moved / t / (2 * q.nbytes / c) for key, t, c in
             (("pw", pw, cw), ("pc", pc, cc), ("uw", uw, cw), ("uc", uc, cc))}
        ok_wall &= r["pw"] >= TARGET and r["uw"] >= TARGET
        ok_cpu &= r["pc"] >= TARGET and r["uc"] >= TARGET
        print(f"{name:<14} {2 * q.nbytes / cw / 1e9:>9.2f} {pw * 1e3:>8.1f} {r['pw']:>5.2f} / {r['pc']:<4.2f} "
              f"{uw * 1e3:>10.1f} {r['uw']:>5.2f} / {r['uc']:<4.2f}")
    print(f"target >= {TARGET}: wall {'met' if ok_wall else 'NOT met'}, CPU {'met' if ok_cpu else 'NOT met'}")


if __name__ == "__main__":
    main()
