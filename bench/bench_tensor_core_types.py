"""How the H100 probes pin the bf16 / tf32 / fp8 tensor-core models: a mismatch table.

For every probe kernel (refsim/data/tensor_core_hw/h100_probes.npz, 18,432 outputs each) it counts the
outputs whose raw bits differ from (1) refsim's sm_90 model and (2) its neighbours: the fraction width
F - 1 and F + 1, other block lengths L, the Ampere/Ada row of the same instruction, and for fp8 the
alternative structures (contiguous k halves, C chained through the HMMAs instead of the final FADD, one
fused 32-product block as MMA-Sim models Hopper, the sm_89 QMMA model). The chosen model must be the
only 0 in its row; the table is the one in docs/emulator.md. It also times the vectorised model.

Run:  python bench/bench_tensor_core_types.py
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np

from refsim.arith import hw_samples as hw
from refsim.arith import tensor_core as tc
from refsim.arith import tensor_core_types as tt


def _miss(got: np.ndarray, want: np.ndarray) -> int:
    return int((got.view(np.uint32) != want.view(np.uint32)).sum())


def _fp8_structures(p, a, b):
    """The fp8 alternatives that are not a TypeModel: (name, D) pairs."""
    A16, B16 = tt.fp8_to_f16(p.A, a), tt.fp8_to_f16(p.B, b)
    zero = np.zeros_like(p.C)
    s0 = (np.arange(32) & 2) == 0
    lo = tc.mma_m16n8k16("sm_90", A16[..., :16], B16[:, :16], zero)
    yield "contiguous halves", p.C + tc.mma_m16n8k16("sm_90", A16[..., 16:], B16[:, 16:], lo)
    first = tc.mma_m16n8k16("sm_90", A16[..., s0], B16[:, s0], p.C)
    yield "C chained, no FADD", tc.mma_m16n8k16("sm_90", A16[..., ~s0], B16[:, ~s0], first)


def main() -> None:
    probes = hw.load_probes()
    print("| probe | refsim sm_90 | alternatives (mismatching outputs of 18,432) | model time |")
    print("|---|---|---|---|")
    for kernel, (shape, a, b) in hw.PROBES.items():
        p = probes[kernel]
        if a == "f16":
            f = tc.mma_m16n8k16 if shape == "m16n8k16" else tc.mma_m16n8k8
            got = f("sm_90", p.A.view(np.float16), p.B.view(np.float16), p.C)
            alts = {"sm_80 model": f("sm_80", p.A.view(np.float16), p.B.view(np.float16), p.C)}
            t = float("nan")
        else:
            m = tt.model_for("sm_90", shape, a, b)
            t0 = time.perf_counter()
            got = tt.mma("sm_90", shape, a, b, p.A, p.B, p.C)
            t = time.perf_counter() - t0
            alts = {}
            if m.datapath == "fdpa":
                for d in (-1, 1):
                    alts[f"F={m.frac_bits + d}"] = tt.mma_with_model(dataclasses.replace(m, frac_bits=m.frac_bits + d),
                                                                     a, b, p.A, p.B, p.C)
                for L in (4, 8, 16):
                    if L != m.block and L <= int(shape.split("k")[1]):
                        alts[f"L={L}"] = tt.mma_with_model(dataclasses.replace(m, block=L), a, b, p.A, p.B, p.C)
                alts["sm_80 row"] = tt.mma("sm_80", shape, a, b, p.A, p.B, p.C)
            else:
                alts.update(_fp8_structures(p, a, b))
                fused = dataclasses.replace(m, datapath="fdpa", block=32)
                alts["one fused k32 block, F=25"] = tt.mma_with_model(fused, a, b, p.A, p.B, p.C)
                alts["sm_89 row"] = tt.mma("sm_89", shape, a, b, p.A, p.B, p.C)
        cells = ", ".join(f"{name} {_miss(d, p.D)}" for name, d in alts.items())
        timing = "" if t != t else f"{t * 1e3:.0f} ms"
        print(f"| `{kernel}` | {_miss(got, p.D)} | {cells} | {timing} |")


if __name__ == "__main__":
    main()
