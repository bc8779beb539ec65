"""Any-Precision LLM oracle benchmarks (run: python bench/bench_anyprec.py [--quick]).

Targets: packing 8 planes of a 4096 x 11008 layer <= 1 s; incremental upscaling 3 -> 8
bits of a 4096 x 4096 layer <= 2 s, on the 2-core CI machine.  Each timing is the best of
``REPEATS`` runs (the first run also pays page faults for fresh arrays; it is printed too).

Napkin math: pack touches 45 M codes x 8 planes (360 M one-byte bit extractions, 45 MB of packed
output); upscaling 3 -> 8 runs 4096 x (8 + 16 + 32 + 64 + 128) = 1.0 M cluster splits, each a
bisection of ~log2(cluster size) steps of 2 prefix-sum gathers.
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

from refsim.formats import bitplane as bp
from refsim.quant import squeezellm as sq
from refsim.quant import upscale as up

from _timing import repeat_timed  # bench/_timing.py (scripts run as python bench/NAME.py)

REPEATS = 3


def _time(fn, repeats=REPEATS):
    """(best wall s, first wall s, best CPU s of this process, result).  The CI machine is shared:
    CPU time is printed beside wall time because wall time balloons under other users' load."""
    times, cpu, out = repeat_timed(fn, repeats)
    return min(times), times[0], min(cpu), out


def main(quick: bool = False) -> None:
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    rng = np.random.default_rng(0)
    n, k = (1024, 11008) if quick else (4096, 11008)
    codes = rng.integers(0, 256, size=(n, k), dtype=np.uint8)  # (N, K) PyTorch order
    best, first, cpu, q = _time(lambda: bp.pack(codes, 8))
    print(f"pack 8 planes {n}x{k} (K % 1024 = {k % 1024}): best {best:.3f} s wall, {cpu:.3f} s CPU"
          f" (first {first:.3f} s)"
          f"  target <= 1 s: {'PASS' if best <= 1.0 else 'FAIL'}")
    best, first, cpu, _ = _time(lambda: bp.unpack(q, 4), repeats=1)
    print(f"unpack 4-bit prefix {n}x{k}: {best:.3f} s")

    kk, nn = (4096, 1024) if quick else (4096, 4096)
    W = rng.standard_normal((kk, nn)).astype(np.float32)  # (K, N)
    G = (rng.standard_normal((kk, nn)) ** 2).astype(np.float32)
    t0 = time.perf_counter()
    s = sq.sort_rows(W, G)
    t_sort = time.perf_counter() - t0
    t0 = time.perf_counter()
    lut, borders = sq.kmeans_1d_rows(s, 8)
    t_seed = time.perf_counter() - t0
    best, first, cpu, _ = _time(lambda: up.upscale_rows(s, lut, borders, 8))
    print(f"layer {kk}x{nn}: sort + prefix sums {t_sort:.3f} s, seed 3-bit k-means {t_seed:.3f} s")
    print(f"incremental upscaling 3 -> 8 bits: best {best:.3f} s wall, {cpu:.3f} s CPU"
          f" (first {first:.3f} s)"
          f"  target <= 2 s: {'PASS' if best <= 2.0 else 'FAIL'}")


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
