"""Warp-level emulation of Atom's fused W4A4 group GEMM (``Dense_layer_gemm_i4_o16``), built from
the emulator's primitives, with the epilogue's contraction made explicit.

Spec
----
computes        D (M, N) float16 from :class:`refsim.formats.atom.AtomActivations` /
                :class:`~refsim.formats.atom.AtomWeights` (INT4 body in groups of 128 along K,
                INT8 tail), as the kernel does it:
dataflow        per 128-wide group g, in group order:
                1. ``c = 0`` (int32); two ``mma.sync.m16n8k64.row.col.s32.s4.s4.s32`` over k 0..63
                   and 64..127 (exact, wrapping; :func:`refsim.arith.integer_mma.mma_int`);
                2. ``s = __hmul2(row_scale, col_scale)`` — fp16 product, RNE;
                3. ``acc = c * float(s) + acc`` in fp32: ``fused=True`` (FFMA, one rounding — what
                   nvcc emits by default with ``--fmad=true``) or ``fused=False`` (FMUL + FADD);
                the INT8 tail: ``m16n8k32 .s8`` slabs over the keeper channels, then the same epilogue;
                finally ``__float2half(acc)`` (RNE).
contraction     FFMA vs FMUL+FADD was not confirmed from SASS here: ``fused`` is a parameter and
                the default (fused) is "unverified contraction" (no SASS was read to confirm FFMA contraction).
paths           :func:`atom_group_gemm`: group sums by float32 BLAS (exact), the epilogue in the
                compiled :func:`refsim.native.emulators.atom_epilogue` when a C compiler is present,
                else in NumPy (``native=False``); :func:`atom_group_gemm_slabs` is the mma-by-mma form.
                All three give the same bits (tested).
oracle          :func:`atom_group_gemm_reference` (plain loops, Python ints, exact-rational fmas, the
                selection written per element); with pair-equal scales also
                :func:`refsim.formats.atom.atom_gemm` (the format module's value-level model).
source          efeslab/Atom ``kernels/include/GEMM/Dense_layer_gemm_i4_o16.cuh`` @ 7e3618b
                (per the format module and efeslab/Atom ``Dense_layer_gemm_i4_o16.cuh``); fragment layout of m16n8k64 s4 in
                :mod:`refsim.arith.fragments`.
domain          the official kernel's: the INT4 body K - keeper holds at least 3 groups of 128
                (:func:`refsim.formats.atom_gemm.require_official_body`: its prologue's unguarded scale
                loads read out of bounds below that); other keepers and any even N are the same
                dataflow, as refsim's ``atom.cu`` runs it.
"""

from __future__ import annotations

import numpy as np
import threadpoolctl

from refsim._validate import require_bounded, require_ints, require_optional_bool
from refsim.arith import fp
from refsim.arith import integer_mma
from refsim.errors import ShapeError
from refsim.formats import atom, atom_gemm

__all__ = ["atom_group_gemm", "atom_group_gemm_slabs", "atom_group_gemm_reference", "weight_scale_index"]


def weight_scale_index(m: int, n: int) -> np.ndarray:
    """int64 (M, N): the weight-scale column the kernel multiplies into output (r, n),
    ``2 * (n // 2) + (r % 16) // 8`` (the half2 pair's .x for tile rows 0..7, .y for rows 8..15)."""
    m, n = require_ints(m=m, n=n)
    require_bounded("M*N", m * n)
    r = np.arange(m)[:, None]
    c = np.arange(n)[None, :]
    return 2 * (c // 2) + (r % 16) // 8


def _check(a, w) -> tuple[int, int, int, int]:
    """The format's GEMM rules (any weight scales) and the official kernel's body rule: ``(M, N, G, group)``."""
    out = atom.check_gemm(a, w, pairs=False)
    atom_gemm.require_official_body(a.q4.shape[1])
    return out


def atom_group_gemm(a: "atom.AtomActivations", w: "atom.AtomWeights", *, fused: bool = True,
                    native: bool | None = None) -> np.ndarray:
    """Atom's fused group GEMM as the kernel executes it: float16 (M, N).

    a, w: quantized activations / weights (int8 codes, float16 scales; any weight scales: the
    kernel's half2 pair selection is modelled, see the module spec). fused: whether the epilogue's
    multiply-add is one ``fma.rn.f32`` (default, what the kernels compute) or FMUL+FADD.

    Same bits as :func:`atom_group_gemm_slabs` (the mma-by-mma form, tested equal): the integer
    sums of each group are formed by one float32 BLAS matmul per group instead of two int64
    ``mma_int`` slabs. That is exact, whatever order the BLAS sums in: every product is an integer
    of magnitude <= 64 (s4 x s4) and every partial sum of a group an integer of magnitude
    <= 64 * group < 2^24, so no float32 operation rounds; the int32 wrap of the slabs cannot occur
    (|c| <= 64 * group < 2^31). The INT8 tail (products <= 2^14) is summed in float64, exact while
    keeper * 2^14 < 2^53, then wrapped modulo 2^32 as the chained ``mma`` slabs would.
    native: None = the epilogue in the compiled kernel :func:`refsim.native.emulators.atom_epilogue`
    when available, else the NumPy epilogue (same bits, tested); True / False force one.
    """
    from refsim.native import emulators as nat

    m, n, g, group = _check(a, w)
    native = require_optional_bool("native", native)
    if a.q8.shape[1] % 32:
        raise ShapeError(f"a.q8: the keeper width must be a multiple of 32 (m16n8k32 slabs); got {a.q8.shape[1]}")
    if group % 64 or 64 * group >= 2**24:          # not whole k64 slabs, or float32 sums could round
        return atom_group_gemm_slabs(a, w, fused=fused)
    fused = fp._require_flag("fused", fused)
    keeper = a.q8.shape[1]
    c_all = np.empty((g + (1 if keeper else 0), m, n), np.int32)          # integer sums, group order
    with threadpoolctl.threadpool_limits(limits=1):     # small GEMMs: BLAS threads only contend
        for gi in range(g):
            cols = slice(gi * group, (gi + 1) * group)
            c_all[gi] = a.q4[:, cols].astype(np.float32) @ w.q4[cols].astype(np.float32)   # exact integers
        if keeper:
            c = a.q8.astype(np.float64) @ w.q8.astype(np.float64)      # exact integers
            c_all[g] = (c.astype(np.int64) + 2**31) % 2**32 - 2**31
    sa = np.concatenate([a.scale4, a.scale8[:, None]], axis=1) if keeper else a.scale4      # (M, G')
    sb = np.concatenate([w.scale4, w.scale8[None, :]], axis=0) if keeper else w.scale4      # (G', N)
    if nat.available() if native is None else native:
        return fp.cvt_f32_to_f16(nat.atom_epilogue(c_all, sa, sb, fused))
    acc = np.zeros((m, n), np.float32)
    sel = weight_scale_index(m, n)                                      # (M, N)
    for gi in range(c_all.shape[0]):
        acc = _epilogue(acc, c_all[gi], sa[:, gi], sb[gi], sel, fused)
    return fp.cvt_f32_to_f16(acc)


def _epilogue(acc, c_int, sa, sb, sel, fused):
    """One group's epilogue: ``acc = c * float(__hmul2(row scale, selected column scale)) + acc``."""
    s = fp.f16_mul(sa[:, None], sb[sel])                                # __hmul2, fp16 RNE
    return fp.f32_fma(fp.cvt_int_to_f32(c_int), fp.cvt_f16_to_f32(s), acc, fused=fused)


def atom_group_gemm_slabs(a: "atom.AtomActivations", w: "atom.AtomWeights", *, fused: bool = True) -> np.ndarray:
    """:func:`atom_group_gemm` written mma by mma: per group two ``m16n8k64 .s4`` slabs through
    :func:`refsim.arith.integer_mma.mma_int` (int64, wrapping), the INT8 tail in ``m16n8k32 .s8``
    slabs, then the same epilogue. The readable form of the kernel's loop; float16 (M, N)."""
    m, n, g, group = _check(a, w)
    fused = fp._require_flag("fused", fused)
    if a.q8.shape[1] % 32:
        raise ShapeError(f"a.q8: the keeper width must be a multiple of 32 (m16n8k32 slabs); got {a.q8.shape[1]}")
    acc = np.zeros((m, n), np.float32)
    sel = weight_scale_index(m, n)                                      # (M, N)
    for gi in range(g):
        c = np.zeros((m, n), np.int32)
        for k0 in range(gi * group, (gi + 1) * group, 64):              # two k64 mma per group
            c = integer_mma.mma_int(a.q4[:, k0:k0 + 64], w.q4[k0:k0 + 64], c, atype="s4", btype="s4")
        acc = _epilogue(acc, c, a.scale4[:, gi], w.scale4[gi], sel, fused)
    keeper = a.q8.shape[1]
    if keeper:
        c = np.zeros((m, n), np.int32)
        for k0 in range(0, keeper, 32):                                 # m16n8k32 .s8
            c = integer_mma.mma_int(a.q8[:, k0:k0 + 32], w.q8[k0:k0 + 32], c, atype="s8", btype="s8")
        acc = _epilogue(acc, c, a.scale8, w.scale8, sel, fused)
    return fp.cvt_f32_to_f16(acc)


def atom_group_gemm_reference(a: "atom.AtomActivations", w: "atom.AtomWeights") -> np.ndarray:
    """Plain-loop twin of :func:`atom_group_gemm` (fused): per output (r, n), Python-int dot products
    per group and for the keeper, the selected weight scale ``2 (n // 2) + (r % 16) // 8``, an fp16
    scale product and one exact-rational fmaf per group; float16 (M, N)."""
    m, n, g, group = _check(a, w)
    keeper = a.q8.shape[1]
    one32 = np.ones(1, np.float32)
    out = np.zeros((m, n), np.float16)
    for r in range(m):
        for c in range(n):
            j = 2 * (c // 2) + (r % 16) // 8
            terms = [(sum(int(a.q4[r, gi * group + t]) * int(w.q4[gi * group + t, c]) for t in range(group)),
                      a.scale4[r, gi], w.scale4[gi, j]) for gi in range(g)]
            if keeper:
                terms.append((sum(int(a.q8[r, t]) * int(w.q8[t, c]) for t in range(keeper)), a.scale8[r], w.scale8[j]))
            acc = np.float32(0.0)
            for p, sa, sb in terms:
                with np.errstate(over="ignore"):
                    s = np.float16(np.float32(sa) * np.float32(sb))       # one fp16 rounding
                acc = fp.fma_reference(np.float32(p) * one32, np.float32(s) * one32, acc * one32)[0]
            with np.errstate(over="ignore"):
                out[r, c] = np.float16(acc)
    return out
