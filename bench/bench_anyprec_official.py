"""The official Any-Precision ``matmul_kbit_32`` through refsim.ptx at Llama-2-7B layer shapes, against
refsim's emulator: the bits must be equal (a mismatch raises), the times printed as a ratio measured in
one run (the cost of one differential case at layer size).

Run: python bench/bench_anyprec_official.py [--quick]

For each (M, K, N, bits): the official kernel's launch through refsim.ptx (main.cu's dispatch; its
module parsed once, before the timed calls), the emulator's default (compiled) path, and their ratio.
K-split launches (M = 1, K > 4096, bits >= 7) are compared as the emulator's admissible set.
"""

from __future__ import annotations

import sys

import numpy as np

from _timing import repeat_timed
from refsim.cuda import official_anyprec as oa
from refsim.emulator import anyprec_kernel as ek
from refsim.formats import anyprec_plan as ak
from refsim.formats import bitplane
from refsim.testing import assert_bitexact

SHAPES = [(1, 4096, 4096, 3), (1, 11008, 4096, 4), (8, 11008, 4096, 4), (1, 11008, 4096, 8)]
QUICK = [(1, 11008, 1024, 3), (4, 4128, 1024, 6)]


def main(argv: list[str]) -> int:
    shapes = QUICK if "--quick" in argv else SHAPES
    rng = np.random.default_rng(0)
    print(f"{'M':>2} {'K':>6} {'N':>5} {'bits':>4}  official via refsim.ptx (cpu s)  emulator (cpu s)  ratio")
    for m, k, n, bits in shapes:
        q = bitplane.pack(rng.integers(0, 2**bits, (n, k)).astype(np.uint8), bits)
        lut = (rng.standard_normal((n, 2**bits)) * 0.05).astype(np.float16)
        x = rng.standard_normal((m, k)).astype(np.float16)
        ksplit = ak.plan(m, n, k, bits).ksplit > 1
        oa.anyprec_gemv(x[:, :k], q[:, :16], lut[:16], bits)            # parse the entry once, untimed
        off = repeat_timed(lambda: oa.anyprec_gemv(x, q, lut, bits), 2)
        emu = repeat_timed(lambda: ek.anyprec_gemv(x, q, lut, bits, "ascending" if ksplit else None), 3)
        want = ek.anyprec_gemv_admissible(x, q, lut, bits) if ksplit else emu.result
        assert_bitexact(off.result, want, name=f"M={m} K={k} N={n} {bits}-bit")
        o, e = min(off.cpus), min(emu.cpus)
        print(f"{m:>2} {k:>6} {n:>5} {bits:>4}  {o:>30.2f}  {e:>16.3f}  {o / e:>5.0f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
