"""Atom W4A4 group GEMM cases (efeslab/Atom ``Dense_layer_gemm_i4_o16``, emulated by
:mod:`refsim.emulator.atom_kernel`): ``kernel(a_q4, a_scale4, a_q8, a_scale8, w_q4, w_scale4, w_q8,
w_scale8) -> D f16 (M,N)`` (the fields of ``AtomActivations`` then ``AtomWeights``, quantized in
"kernel" mode from drawn data).

Legality: ``refsim.formats.atom.check_split`` (the INT4 body a multiple of the group of 128), the
official kernel's body rule (``refsim.formats.atom_gemm.require_official_body``: K - keeper >= 384,
its prologue's three unguarded k-tiles), N even (column pairs share a scale) and a multiple of the
mma's n8, the INT8 keeper tail in whole m16n8k32 slabs (a multiple of 32). Regimes include the
plan's branches (``refsim.formats.atom_gemm.plan_branches``), so the pinned cases take every one. Not encoded: the tile sizes of Atom's CUTLASS-style template
(the emulator computes any M). Per output::

    group g: C_g = two m16n8k64 s4 mma (exact int32)
             acc = FFMA(float(C_g), float(__hmul2(row scale, column-pair scale)), acc)
    INT8 tail: s8 m16n8k32 slabs, the same epilogue;  D = fp16(acc)
"""

from __future__ import annotations

import numpy as np

from refsim.arith import fragments as fr
from refsim.emulator import atom_kernel as ak
from refsim.errors import ShapeError
from refsim.formats import atom, atom_gemm
from refsim.testing.cases.base import DATA_KINDS, Format, Linear, Probe, keep_columns, values


class AtomCases(Format):
    name = "atom"
    signature = ("kernel(a_q4 i8 (M,K4), a_scale4 f16 (M,K4/128), a_q8 i8 (M,keeper), a_scale8 f16 (M,), "
                 "w_q4 i8 (K4,N), w_scale4 f16 (K4/128,N), w_q8 i8 (keeper,N), w_scale8 f16 (N,)) -> D f16 (M,N)")
    inputs = ("a_q4", "a_scale4", "a_q8", "a_scale8", "w_q4", "w_scale4", "w_q8", "w_scale8")
    fields = {"m": (1, 4, 16, 33, 136), "k4": (384, 512, 1024, 2048, 4096, 11008),
              "n": (8, 16, 64, 256, 1024, 4096, 11008), "keeper": (0, 32, 128), "kind": DATA_KINDS, "seed": None}
    shape_fields = ("m", "k4", "n", "keeper")
    default_max_size = 1 << 22
    pinned_pool = tuple({"m": m, "k4": k, "n": n, "keeper": kp} for m, k, n, kp in
                        [(1, 384, 8, 0), (4, 512, 64, 128), (33, 384, 16, 32), (16, 1024, 64, 0),
                                            (136, 384, 8, 0), (16, 384, 256, 128)])

    def legal(self, case):
        if case["keeper"] % 32:
            raise ShapeError(f"keeper: the INT8 tail runs in m16n8k32 slabs, a multiple of 32; got {case['keeper']}")
        if case["n"] % 8:
            raise ShapeError(f"N: must be a multiple of the mma's n8; got {case['n']}")
        atom.check_split(case["k4"] + case["keeper"], atom.GROUP, case["keeper"])
        atom_gemm.require_official_body(case["k4"])

    def cost(self, case):
        return case["m"] * (case["k4"] + case["keeper"]) * case["n"]

    def regimes(self, case, sms):
        m = case["m"]
        tiles = ("several m16 tiles, a partial one" if m > 16 and m % 16 else
                 "a partial m16 tile" if m % 16 else "whole m16 tiles")
        return {"INT8 keeper tail" if case["keeper"] else "no INT8 tail", tiles} | {
            f"plan branch {b}" for b in atom_gemm.plan_branches(m, case["n"], case["k4"], case["keeper"])}

    def make(self, case):
        rng = np.random.default_rng(case["seed"])
        k = case["k4"] + case["keeper"]
        x = values(rng, case["kind"], (case["m"], k)).astype(np.float32)
        w = (rng.standard_normal((k, case["n"])) * 0.05).astype(np.float32)
        a = atom.quantize_activations(x, "kernel", keeper=case["keeper"])
        wq = atom.quantize_weights(w, "kernel", keeper=case["keeper"])
        return (a.q4, a.scale4, a.q8, a.scale8, wq.q4, wq.scale4, wq.q8, wq.scale8)

    def emulate(self, inputs, arch, sms):
        return ak.atom_group_gemm(atom.AtomActivations(*inputs[:4]), atom.AtomWeights(*inputs[4:]))

    def locate(self, case, inputs, idx, arch, sms):
        lane, reg = fr.mma_m16n8k64_c().owner(idx[0] % 16, idx[1] % 8)
        tail = f", then the INT8 tail ({case['keeper'] // 32} m16n8k32 slabs)" if case["keeper"] else ""
        return (f"D[{idx[0]}, {idx[1]}]: m16 tile {idx[0] // 16}, n8 tile {idx[1] // 8}, lane {lane}, register c{reg}; "
                f"{case['k4'] // 128} groups of two m16n8k64 s4 mma, each scaled by __hmul2(row scale, column-pair "
                f"scale) and added with FFMA in group order{tail}; fp16 at the end")

    def structure(self, case, inputs, shape, sms):
        rows, cols = np.indices(shape)
        return {"m16 tile": rows // 16, "n8 tile": cols // 8, "column pair": cols // 2 % 4, "row mod 16": rows % 16}

    def probes(self, case, inputs):
        a_q4, a_s4, a_q8, a_s8, *w = inputs
        # every group alone (at least 3: the official kernel's body rule), so a rare rounding of one
        # group's epilogue shows in some probe
        out = [Probe(f"INT4 group {g} only (no INT8 tail)", (keep_columns(a_q4, slice(128 * g, 128 * (g + 1))), a_s4,
                                                             np.zeros_like(a_q8), a_s8, *w),
                     "one group: the two s4 mma (exact) and its epilogue (fp16 scale product, fp32 FFMA)")
               for g in range(a_s4.shape[1])]
        if a_q8.shape[1]:
            out.append(Probe("INT8 tail only", (np.zeros_like(a_q4), a_s4, a_q8, a_s8, *w),
                             "the INT8 keeper tail: s8 m16n8k32 slabs and its epilogue"))
        return out

    def linear(self, case, inputs):
        """``D = sum_g C_g sA_g sB_g`` as one term per k (``a = q_a sA``, ``w = q_w sB``): the FFMA
        chain adds one term per group plus the INT8 tail, each after one fp16 scale product, whose
        cofactor is the exact integer sum ``C_g`` (``|C_g| <= |q_a| @ |q_w|`` over the group)."""
        a_q4, a_s4, a_q8, a_s8, w_q4, w_s4, w_q8, w_s8 = inputs
        g_of_k = np.arange(a_q4.shape[1]) // atom.GROUP
        a = np.concatenate([a_q4 * a_s4.astype(np.float64)[:, g_of_k], a_q8 * a_s8.astype(np.float64)[:, None]], 1)
        w = np.concatenate([w_q4 * w_s4.astype(np.float64)[g_of_k], w_q8 * w_s8.astype(np.float64)[None, :]], 0)
        cof = np.abs(a_q4.astype(np.float64)) @ np.abs(w_q4.astype(np.float64)) + \
            np.abs(a_q8.astype(np.float64)) @ np.abs(w_q8.astype(np.float64))      # >= sum_g |C_g|
        return Linear(a, w, terms=a_s4.shape[1] + (a_q8.shape[1] > 0), pre=1, cofactor=cof)
