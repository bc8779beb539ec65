"""DeepGEMM FP8 GEMM emulation benchmark (run: python bench/bench_deepgemm.py [--quick]).

What it measures: :func:`refsim.emulator.deepgemm_kernel.deepgemm_fp8_gemm` at the layer size of issue 32
(M = 128, N = K = 4096, random finite e4m3 codes, scales in [0.5, 2)), split into the K-block wgmma chains
(:func:`kblock_partials`, the compiled twin when a C compiler is present) and the promotion + bf16 epilogue,
wall and process CPU seconds. ``--quick``: M = 64, N = 256, K = 512.

Napkin math: 128 x 4096 x 4096 = 2^31 e4m3 products in 2^26 (row, column, k32) T-FDPA blocks; the C kernel
does two integer passes over each block's 32 products (the exponent max, then the aligned truncated terms)
vectorised 8 columns wide, about 0.5 ns per product on one AVX2 core (~1 s). The promotion is 32 K blocks
of a (128, 4096) fp32 fma done as round-to-odd float64 (~10 NumPy passes over 0.5 M elements each).
The official kernel (refsim.cuda.official_deepgemm, DeepGEMM's PTX) then runs through refsim.ptx's compiled
executor on 132 SMs (4 with ``--quick``): its CPU seconds, their ratio to the emulator's, and whether its bf16
output equals the emulator's bit for bit. Napkin math for it: 128 persistent blocks each issue 128 m64n64k32
wgmmas (16,384 in all, the same 2^31 products as above, through the same C T-FDPA), 3 TMA loads per K block
(12,416 boxes of 8 KiB or 256 B) and spin on mbarriers; every Hopper instruction is a Python step over all
resident warps at once (about 500 such steps), so the cost is the arithmetic plus the per-step NumPy
traffic (accumulators to and from registers: 16,384 x 2,048 words; boxes gathered and scattered), ~3 s.
"""

from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _timing import repeat_timed  # noqa: E402

from refsim.cuda import official_deepgemm as od  # noqa: E402
from refsim.emulator import deepgemm_kernel as dg  # noqa: E402
from refsim.native import emulators  # noqa: E402


def problem(m, n, k, seed=0):
    rng = np.random.default_rng(seed)
    codes = np.array([c for c in range(256) if c & 0x7F != 0x7F], np.uint8)
    return (rng.choice(codes, (m, k)), rng.uniform(0.5, 2, (m, k // 128)).astype(np.float32),
            rng.choice(codes, (n, k)), rng.uniform(0.5, 2, (-(-n // 128), k // 128)).astype(np.float32))


def main(quick: bool) -> None:
    m, n, k, sms = (64, 256, 512, 4) if quick else (128, 4096, 4096, 132)
    A, sfa, B, sfb = problem(m, n, k)
    print(f"DeepGEMM FP8 GEMM emulation, M={m} N={n} K={k}; K-block chains: "
          f"{emulators.status()}")
    part = repeat_timed(lambda: dg.kblock_partials(A, B), 1)
    prom = repeat_timed(lambda: dg.promote(part.result, sfa, sfb), 1)
    whole = repeat_timed(lambda: dg.deepgemm_fp8_gemm(A, sfa, B, sfb), 1)
    for name, t in (("K-block wgmma chains", part), ("promotion + scales", prom), ("whole GEMM", whole)):
        print(f"  {name:22s} wall {t.walls[0]:6.2f} s   cpu {t.cpus[0]:6.2f} s")
    print(f"  {2 * m * n * k / whole.cpus[0] / 1e9:.2f} emulated GFLOP per CPU second")
    od._module()                                                 # parse the PTX outside the timing
    kernel = repeat_timed(lambda: od.deepgemm_fp8_gemm(A, sfa, B, sfb, num_sms=sms, executor="compiled"), 1)
    same = np.array_equal(kernel.result.view(np.uint16), whole.result.view(np.uint16))
    print(f"  official kernel, refsim.ptx compiled executor ({sms} SMs): wall {kernel.walls[0]:6.2f} s   "
          f"cpu {kernel.cpus[0]:6.2f} s   {kernel.cpus[0] / whole.cpus[0]:.1f}x the emulator's CPU time; "
          f"output {'equals' if same else 'DIFFERS from'} the emulator's bit for bit")
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main("--quick" in sys.argv[1:])
