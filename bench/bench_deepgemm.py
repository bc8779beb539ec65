"""DeepGEMM FP8 GEMM emulation benchmark (run: python bench/bench_deepgemm.py [--quick]).

What it measures: :func:`refsim.emulator.deepgemm_kernel.deepgemm_fp8_gemm` at the layer size of issue 32
(M = 128, N = K = 4096, random finite e4m3 codes, scales in [0.5, 2)), split into the K-block wgmma chains
(:func:`kblock_partials`, the compiled twin when a C compiler is present) and the promotion + bf16 epilogue,
wall and process CPU seconds. ``--quick``: M = 64, N = 256, K = 512.

Napkin math: 128 x 4096 x 4096 = 2^31 e4m3 products in 2^26 (row, column, k32) T-FDPA blocks; the C kernel
does two integer passes over each block's 32 products (the exponent max, then the aligned truncated terms)
vectorised 8 columns wide, about 0.5 ns per product on one AVX2 core (~1 s). The promotion is 32 K blocks
of a (128, 4096) fp32 fma done as round-to-odd float64 (~10 NumPy passes over 0.5 M elements each).
Once refsim.ptx runs the official kernel (refsim.cuda.official_deepgemm), its time over this one's is the
ratio the issue asks for.
"""

from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _timing import repeat_timed  # noqa: E402

from refsim.emulator import deepgemm_kernel as dg  # noqa: E402
from refsim.native import emulators  # noqa: E402


def problem(m, n, k, seed=0):
    rng = np.random.default_rng(seed)
    codes = np.array([c for c in range(256) if c & 0x7F != 0x7F], np.uint8)
    return (rng.choice(codes, (m, k)), rng.uniform(0.5, 2, (m, k // 128)).astype(np.float32),
            rng.choice(codes, (n, k)), rng.uniform(0.5, 2, (-(-n // 128), k // 128)).astype(np.float32))


def main(quick: bool) -> None:
    m, n, k = (64, 256, 512) if quick else (128, 4096, 4096)
    A, sfa, B, sfb = problem(m, n, k)
    print(f"DeepGEMM FP8 GEMM emulation, M={m} N={n} K={k}; K-block chains: "
          f"{emulators.status()}")
    part = repeat_timed(lambda: dg.kblock_partials(A, B), 1)
    prom = repeat_timed(lambda: dg.promote(part.result, sfa, sfb), 1)
    whole = repeat_timed(lambda: dg.deepgemm_fp8_gemm(A, sfa, B, sfb), 1)
    for name, t in (("K-block wgmma chains", part), ("promotion + scales", prom), ("whole GEMM", whole)):
        print(f"  {name:22s} wall {t.walls[0]:6.2f} s   cpu {t.cpus[0]:6.2f} s")
    print(f"  {2 * m * n * k / whole.cpus[0] / 1e9:.2f} emulated GFLOP per CPU second")


if __name__ == "__main__":
    main("--quick" in sys.argv[1:])
