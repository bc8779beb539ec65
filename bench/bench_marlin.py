"""Benchmark: Marlin pack / unpack of LLaMA-7B-sized layers on the CPU.

Target (issue 3): pack of 4096x11008 and 11008x4096 in <= 0.5 s each on the 2-core CI machine.
Napkin math: 45.1 M codes = 45 MB of uint8 in, 22.5 MB of int32 out; the pack is one tile
transpose + one 1024-wide gather (two passes over 45 MB) + one nibble-pair fold (one pass), so
~150 MB of memory traffic: ~0.05 s at 3 GB/s effective, the rest is NumPy's fancy-index cost.

Run: python bench/bench_marlin.py
"""

from __future__ import annotations

import time

import numpy as np

from refsim.formats import marlin

TARGET_S = 0.5


def _best_of(f, repeats=3):
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    rng = np.random.default_rng(0)
    print(f"{'K':>6} {'N':>6} {'group':>6} {'pack s':>8} {'unpack s':>9} {'target s':>9} {'pack/target':>12}")
    for k, n in [(4096, 11008), (11008, 4096)]:
        for gs in (128, None):
            if gs is not None and k % gs:
                continue
            q = rng.integers(0, 16, (k, n), dtype=np.uint8)
            scales = (rng.random((1 if gs is None else k // gs, n)) + 0.5).astype(np.float16)
            b, s = marlin.pack(q, scales, gs)
            t_pack = _best_of(lambda: marlin.pack(q, scales, gs))
            t_unpack = _best_of(lambda: marlin.unpack(b, s))
            print(f"{k:>6} {n:>6} {str(gs):>6} {t_pack:>8.3f} {t_unpack:>9.3f} {TARGET_S:>9.3f} {t_pack / TARGET_S:>12.2f}")


if __name__ == "__main__":
    main()
