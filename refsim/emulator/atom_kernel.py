"""Warp-level emulation of Atom's fused W4A4 group GEMM (``Dense_layer_gemm_i4_o16``), built from
the emulator's primitives, with the epilogue's contraction made explicit.

Spec
----
computes        D (M, N) float16 from :class:`refsim.formats.atom.AtomActivations` /
                :class:`~refsim.formats.atom.AtomWeights` (INT4 body in groups of 128 along K,
                INT8 tail), as the kernel does it:
dataflow        per 128-wide group g, in group order:
                1. ``c = 0`` (int32); two ``mma.sync.m16n8k64.row.col.s32.s4.s4.s32`` over k 0..63
                   and 64..127 (exact, wrapping; :func:`refsim.emulator.tensor_core.mma_int`);
                2. ``s = __hmul2(row_scale, col_scale)`` — fp16 product, RNE;
                3. ``acc = c * float(s) + acc`` in fp32: ``fused=True`` (FFMA, one rounding — what
                   nvcc emits by default with ``--fmad=true``) or ``fused=False`` (FMUL + FADD);
                the INT8 tail: ``m16n8k32 .s8`` slabs over the keeper channels, then the same epilogue;
                finally ``__float2half(acc)`` (RNE).
contraction     FFMA vs FMUL+FADD was not confirmed from SASS here: ``fused`` is a parameter and
                the default (fused) is "unverified contraction" in the sense of numerics.md §5.6.
oracle          :func:`refsim.formats.atom.atom_gemm` / ``atom_gemm_reference`` (the format
                module's value-level model of the same arithmetic, written independently).
source          efeslab/Atom ``kernels/include/GEMM/Dense_layer_gemm_i4_o16.cuh`` @ 7e3618b
                (per the format module and numerics.md §4.6); fragment layout of m16n8k64 s4 in
                :mod:`refsim.emulator.fragments`.
"""

from __future__ import annotations

import numpy as np

from refsim.emulator import fp
from refsim.emulator import tensor_core as tc
from refsim.formats import atom

__all__ = ["atom_group_gemm"]


def atom_group_gemm(a: "atom.AtomActivations", w: "atom.AtomWeights", *, fused: bool = True) -> np.ndarray:
    """Atom's fused group GEMM as the kernel executes it: float16 (M, N).

    a, w: quantized activations / weights (int8 codes, float16 scales; weight scales equal within
    column pairs). fused: whether the epilogue's multiply-add is one FFMA (default) or FMUL+FADD.
    """
    m, n, g, group = atom._check_gemm(a, w)
    acc = np.zeros((m, n), np.float32)

    def epilogue(acc, c_int, sa, sb):
        s = fp.f16_mul(sa[:, None], sb[None, :])                      # __hmul2, fp16 RNE
        return fp.f32_fma(fp.cvt_int_to_f32(c_int), fp.cvt_f16_to_f32(s), acc, fused=fused)

    for gi in range(g):
        c = np.zeros((m, n), np.int32)
        for k0 in range(gi * group, (gi + 1) * group, 64):              # two k64 mma per group
            c = tc.mma_int(a.q4[:, k0:k0 + 64], w.q4[k0:k0 + 64], c, atype="s4", btype="s4")
        acc = epilogue(acc, c, a.scale4[:, gi], w.scale4[gi])
    keeper = a.q8.shape[1]
    if keeper:
        c = np.zeros((m, n), np.int32)
        for k0 in range(0, keeper, 32):                                 # m16n8k32 .s8
            c = tc.mma_int(a.q8[:, k0:k0 + 32], w.q8[k0:k0 + 32], c, atype="s8", btype="s8")
        acc = epilogue(acc, c, a.scale8, w.scale8)
    return fp.cvt_f32_to_f16(acc)
