"""Any-Precision LLM GEMV cases: ``kernel(x f16 (M,K), qweight i32 (bits,N,K/32), lut f16 (N,2**bits)) -> O f16 (M,N)``.

Legality: :func:`refsim.formats.anyprec_plan.plan` (1 <= M <= 8, K % 32, N % 4 at M = 1 else
N % 16, bits 3..8). The K-split launch (M = 1, K > 4096, bits >= 7) combines its slices with fp16
``atomicAdd`` in an order the hardware does not fix: its expected output is the admissible set of
every order. Regimes: every branch of the plan (:data:`refsim.formats.anyprec_plan.BRANCHES`:
multi_row 1/4, pair or scalar lookup table, a K tail or none, one chunk, more than four chunks in
one slice, a K-split and its partial last slice), so the pinned cases take each one, plus one or
several blocks. Each lane owns chunks of 1024 activations::

    chunk c of lane l: two 16-step hfma2 chains -> partial += __hadd(h.x, h.y)   (fp16)
    lanes 0..31 -> shfl_down tree -> O[m, n]
"""

from __future__ import annotations

import numpy as np

from refsim.emulator import anyprec_kernel as ek
from refsim.errors import FormatRuleError
from refsim.formats import anyprec_plan as ak
from refsim.formats import bitplane
from refsim.testing.cases.base import DATA_KINDS, Format, Linear, Probe, keep_columns, values


class AnyprecCases(Format):
    name = "anyprec"
    signature = "kernel(x f16 (M,K), qweight i32 (bits,N,K/32), lut f16 (N,2**bits)) -> O f16 (M,N)"
    inputs = ("x", "qweight", "lut")
    fields = {"m": (1, 2, 3, 4, 8), "k": (32, 64, 992, 1024, 1056, 2048, 2080, 3072, 4064, 4096, 8192, 11008),
              "n": (4, 16, 32, 64, 256, 4096, 11008), "bits": (3, 4, 5, 6, 7, 8), "kind": DATA_KINDS, "seed": None}
    shape_fields = ("m", "k", "n", "bits")
    default_max_size = 1 << 20
    pinned_pool = tuple({"m": m, "k": k, "n": n, "bits": b} for m, k, n, b in
                        [(1, 1056, 16, 3), (4, 2080, 32, 4), (1, 4064, 64, 8), (8, 32, 16, 5), (2, 1024, 16, 6),
                         (1, 8192, 32, 4), (3, 992, 16, 7), (1, 4128, 16, 7)])

    def legal(self, case):
        ak.plan(case["m"], case["n"], case["k"], case["bits"])          # checks M, N, K, bits; a K-split
        # launch (M = 1, K > 4096, bits >= 7) is legal: its expected output is the admissible set

    def cost(self, case):
        return case["m"] * case["k"] * case["n"]

    def regimes(self, case, sms):
        p = ak.plan(case["m"], case["n"], case["k"], case["bits"])
        out = {f"multi_row {p.multi_row}", "pair lookup table" if p.uses_pair_table else "scalar lookup table",
               f"{p.tail_lanes} active lanes in the last chunk" if p.tail_lanes < 32 else "no K tail",
               "several chunks per lane" if p.chunks > 1 else "one chunk",
               "several blocks" if p.grid > 1 else "one block"}
        if case["k"] // 1024 >= 2 and p.tail_lanes < 32:
            out.add("three or more chunks in lane 0, a K tail")
        return out | {f"plan branch {b}" for b in ak.plan_branches(case["m"], case["n"], case["k"], case["bits"])}

    def make(self, case):
        rng = np.random.default_rng(case["seed"])
        n, k, bits = case["n"], case["k"], case["bits"]
        codes = rng.integers(0, 2**bits, (n, k)).astype(np.uint8)
        lut = (values(rng, case["kind"], (n, 2**bits)) * 0.05).astype(np.float16)
        x = values(rng, case["kind"], (case["m"], k)).astype(np.float16)
        return x, bitplane.pack(codes, bits), lut

    def emulate(self, inputs, arch, sms):
        x, q, lut = inputs
        if ak.plan(x.shape[0], lut.shape[0], x.shape[1], q.shape[0]).ksplit > 1:
            return ek.anyprec_gemv_admissible(x, q, lut, q.shape[0])    # every order of the slices' atomicAdds
        return ek.anyprec_gemv(x, q, lut, q.shape[0])

    def locate(self, case, inputs, idx, arch, sms):
        multi_row = 1 if case["m"] == 1 else 4
        row, col = idx
        block, within = divmod(col, 4 * multi_row)
        return (f"O[{row}, {col}]: block {block}, warp y={within % 4} (row slot h={within // 4}), lane 0 after the "
                f"shfl_down tree; 32 lanes x {-(-case['k'] // 1024)} chunks of two 16-step hfma2 chains")

    def structure(self, case, inputs, shape, sms):
        multi_row = 1 if case["m"] == 1 else 4
        rows, cols = np.indices(shape)
        within = cols % (4 * multi_row)
        return {"batch row": rows, "block": cols // (4 * multi_row), "warp y": within % 4,
                "row slot h": within // 4, "output row mod 8": cols % 8}

    def probes(self, case, inputs):
        x, q, lut = inputs
        k = case["k"]
        k0, k1 = ak.activation_index(k, 0, 0, 3, 0)
        out = [Probe(f"one half2 of lane 0 (k {k0}, {k1}): one hfma2 step, the tree adds zeros",
                     (keep_columns(x, [k0, k1]), q, lut), "one hfma2 step (the weights looked up, the fused multiply-add)"),
               Probe("chunk 0 only (every lane's chains, the shfl_down tree)", (keep_columns(x, slice(0, 1024)), q, lut),
                     "the per-lane hfma2 chains or the warp tree")]
        if k > 2048:
            # lane 0's first element in chunks 0, 1, 2 holds +X, v, -X (weight 1): an fp16 partial
            # absorbs v into X (fp16(2^10 + 2^-2) = 2^10) and ends at 0, an fp32 partial keeps v
            bits = case["bits"]
            codes = bitplane.unpack(q[:bits]).copy()                   # (N, K)
            lut1 = lut.copy()
            lut1[:, 1] = 1.0
            xs = np.zeros_like(x)
            for i, val in enumerate((2.0**10, 2.0**-2, -(2.0**10))):
                kk = ak.activation_index(k, i, 0, 3, 0)[0]
                xs[:, kk] = val
                codes[:, kk] = 1
            out.append(Probe("cancellation across chunks (+X, v, -X in lane 0's chunks 0, 1, 2)",
                             (xs, bitplane.pack(codes, bits), lut1),
                             "how a lane adds its chunk partials: fp16 __hadd, in chunk order"))
        if k % 1024 and k > 1024:
            out.append(Probe(f"the tail chunk only (k {k - k % 1024}..{k - 1}, {(k % 1024) // 32} lanes)",
                             (keep_columns(x, slice(k - k % 1024, k)), q, lut),
                             "the tail chunk (lanes that break out, the activation index of a short chunk)"))
        return out

    def linear(self, case, inputs):
        """``O = x @ lut[code]^T``: the looked-up weights are fp16 values, no rounding before the sum."""
        x, q, lut = inputs
        codes = bitplane.unpack(q[:case["bits"]]).astype(np.int64)                  # (N, K)
        w = np.take_along_axis(lut.astype(np.float64), codes, axis=1).T             # (K, N)
        return Linear(x.astype(np.float64), w, terms=case["k"])
