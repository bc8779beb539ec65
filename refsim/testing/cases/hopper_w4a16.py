"""Hopper W4A16 GEMM cases (refsim's sm_90a kernel, ``refsim/cuda/hopper_w4a16.cu``, emulated by
:mod:`refsim.emulator.hopper_w4a16`)::

    kernel(x f16 (M,K), wp u32 (N/64*K/16,128), scales f16 (K/128,N)) -> C f16 (M,N)

``wp`` is :func:`refsim.formats.hopper_w4a16.pack` of 4-bit codes (zero point 8), the scales one fp16 per
group of 128 rows of K and column. The weights are scaled in fp16 before the tensor core
(``fp16(q - 8) * s``, one rounding) and each output is a chain of K/16 wgmma m64n64k16 f32 steps in
increasing k from +0, then one cvt.rn to fp16. The kernel is deterministic (no atomics, no split K):
the admissible set of every case is the emulator's one output.

Legality: :func:`refsim.formats.hopper_w4a16.check_kn` (K % 128, N % 64), M >= 1 (rows past M are
TMA's zero fill and never stored). The arch argument of ``check_kernel`` does not apply: wgmma exists
on sm_90a only and its model is sm_90's. Probes: one k16 step alone (one wgmma), each scale group
alone. Known bugs replayed: the scale applied to each group's fp32 partial sum instead of the weights;
the zero point 0 instead of 8 is not replayed (it changes every output, the probes say so at once).
"""

from __future__ import annotations

import numpy as np

from refsim.arith import fp
from refsim.arith import wgmma as wg
from refsim.emulator import hopper_w4a16 as ek
from refsim.errors import FormatRuleError
from refsim.formats import hopper_w4a16 as layout
from refsim.testing.cases.base import DATA_KINDS, Format, Linear, Probe, int4_weights, keep_columns, values

_STAGES = 4          # the kernel's ring slots: more k-tiles than this reuse a slot


def _group_partials(x, wp, scales):
    """The bug: each group's fp32 sum of ``x * fp16(q - 8)`` (wgmma steps from +0) times its scale,
    the groups added in fp32 (``fma.rn.f32``): float16 (M, N)."""
    x, wp, scales, m, k, n = ek.check_inputs(x, wp, scales)
    w = (layout.unpack(wp, k, n).astype(np.int16) - 8).astype(np.float16)
    mp = -(-m // 8) * 8
    xp = np.zeros((mp, k), np.float16)
    xp[:m] = x
    acc = np.zeros((n, mp), np.float32)
    for g in range(k // layout.GROUP):
        d = np.zeros((n // 64, 64, mp), np.float32)
        for s in range(g * layout.GROUP // 16, (g + 1) * layout.GROUP // 16):
            a = np.ascontiguousarray(w[16 * s:16 * s + 16].T).reshape(n // 64, 64, 16)
            d = wg.wgmma(ek.KIND, a, xp[:, 16 * s:16 * s + 16].T, d)
        sc = fp.cvt_f16_to_f32(scales[g])[:, None]
        acc = fp.f32_fma(d.reshape(n, mp), sc, acc, fused=True)
    return fp.cvt_f32_to_f16(acc).T[:m].copy()


class HopperW4A16Cases(Format):
    name = "hopper_w4a16"
    signature = "kernel(x f16 (M,K), wp u32 (N/64*K/16,128), scales f16 (K/128,N)) -> C f16 (M,N)"
    inputs = ("x", "wp", "scales")
    fields = {"m": (1, 8, 17, 64, 70, 128), "k": (128, 256, 384, 512, 1024, 4096),
              "n": (64, 128, 256, 512, 4096), "kind": DATA_KINDS, "seed": None}
    shape_fields = ("m", "k", "n")
    default_max_size = 1 << 21
    pinned_pool = tuple({"m": m, "k": k, "n": n} for m, k, n in
                        [(1, 128, 64), (17, 256, 128), (70, 128, 64), (8, 384, 64)])

    def legal(self, case):
        if case["m"] < 1:
            raise FormatRuleError(f"m: the kernel needs at least one token row; got {case['m']}")
        layout.check_kn(case["k"], case["n"])

    def cost(self, case):
        return case["m"] * case["k"] * case["n"]

    def regimes(self, case, sms):
        m, k, n = case["m"], case["k"], case["n"]
        out = {"one token tile" if m <= ek.TILE_M else "several token tiles",
               "one column tile" if n == ek.TILE_N else "several column tiles",
               "one scale group" if k == layout.GROUP else "several scale groups",
               "the ring wraps (more than 4 k-tiles)" if k // ek.TILE_K > _STAGES else "no ring slot reused"}
        if m % ek.TILE_M:
            out.add("a partial token tile (rows past M zero-filled, not stored)")
        return out

    def make(self, case):
        rng = np.random.default_rng(case["seed"])
        q, s = int4_weights(rng, case["k"], case["n"], layout.GROUP)
        x = values(rng, case["kind"], (case["m"], case["k"])).astype(np.float16)
        return x, layout.pack(q), s

    def emulate(self, inputs, arch, sms):
        return ek.hopper_w4a16_gemm(*inputs)

    def locate(self, case, inputs, idx, arch, sms):
        m, n = idx
        r = n % ek.TILE_N
        warp, g = r % 64 // 16, r % 16 % 8
        lane = 4 * g + (m % 8) // 2
        reg = 4 * (m % ek.TILE_M // 8) + 2 * (r % 16 // 8) + m % 2
        return (f"C[{m}, {n}]: block ({n // ek.TILE_N}, {m // ek.TILE_M}), consumer warp {warp} lane {lane} "
                f"accumulator d[{reg}] (row {r}, column {m % ek.TILE_M} of D = W^T X^T); {case['k'] // 16} wgmma "
                f"m64n64k16 steps in increasing k from +0, weights fp16(q - 8) * s, then cvt.rn.f16")

    def structure(self, case, inputs, shape, sms):
        rows, cols = np.indices(shape)
        r = cols % ek.TILE_N
        return {"token tile": rows // ek.TILE_M, "column tile": cols // ek.TILE_N, "consumer warp": r // 16,
                "row half (g or g + 8)": r % 16 // 8, "token mod 8": rows % 8}

    def probes(self, case, inputs):
        x, wp, s = inputs
        out = [Probe("k 0..15 only (one wgmma step from +0)", (keep_columns(x, slice(0, 16)), wp, s),
                     "the converted weights of one k16 step (layout, nibble order, scale) or one wgmma")]
        for g in range(min(case["k"] // layout.GROUP, 4)):
            out.append(Probe(f"scale group {g} only (k {128 * g}..{128 * g + 127})",
                             (keep_columns(x, slice(128 * g, 128 * (g + 1))), wp, s),
                             f"the scale row or the weights of group {g}", family="scale group"))
        return out

    def known_bugs(self, case, inputs, arch, sms):
        yield ("scale placement", "each group's fp32 partial sum times its scale (fma.rn.f32) instead of the "
                                  "weights scaled in fp16 before the wgmma", lambda i: _group_partials(*i))

    def linear(self, case, inputs):
        """``C = x @ ((q - 8) s)``: each weight rounded to fp16 once (``pre=1``)."""
        x, wp, s = inputs
        k, n = x.shape[1], s.shape[1]
        w = (layout.unpack(wp, k, n).astype(np.float64) - 8) * np.repeat(s.astype(np.float64), layout.GROUP, 0)
        return Linear(x.astype(np.float64), w, terms=k, pre=1)
