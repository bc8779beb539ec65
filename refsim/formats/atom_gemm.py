"""Atom's fused W4A4 group GEMM (the format's exact reference) and the kernel's activation-scale buffer.

Spec block
----------
=================  ==================================================================================
operands           :class:`refsim.formats.atom.AtomActivations` (M, K) and
                   :class:`refsim.formats.atom.AtomWeights` (K, N): INT4 body groups + INT8 keeper
arithmetic         per group exact int32 dot products; one fp16 product of the two scales; fp32
                   FMA accumulation over groups; the keeper group last; one rounding to fp16
scale buffer       the kernel reads activation scales as half2 pairs (scale[r], scale[r+8]) of a
                   16-row tile, each written 4 times (:func:`scale_positions`)
kernel domain      the official ``DenseLayerGEMM_i4`` kernel's prologue loads the scales of body k-tiles
                   0, 1, 2 unguarded: the INT4 body must hold at least 3 groups of 128
                   (:func:`require_official_body`, ``K - 128 >= 384`` with its keeper of 128)
branches           :data:`BRANCHES` / :func:`plan_branches`: the paths of the kernel's plan a shape takes
source             efeslab/Atom @ 7e3618b1a7a7c86e1c93cc909b1510c046d76ac6:
                   kernels/include/GEMM/Dense_layer_gemm_i4_o16.cuh, kernels/include/Reorder/Reorder.cuh
=================  ==================================================================================

Per output (m, n)::

    acc = 0.0f
    for g in groups:   p = sum_k qa[m,k] qb[k,n]                (exact int32)
                       acc = fmaf(float(p), float(half(sa[m,g] * sb[g,n])), acc)
    p8  = sum_k qa8[m,k] qb8[k,n];  acc = fmaf(float(p8), float(half(sa8[m] * sb8[n])), acc)
    D[m,n] = half(acc)

This is the FORMAT's reference (pair-equal weight scales required); what the CUDA kernel writes,
including its half2 pair selection for unequal pairs, is :mod:`refsim.emulator.atom_kernel`.
One concept per module: the GEMM lives here; its names stay importable from :mod:`refsim.formats.atom`.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from refsim._validate import (
    require_bounded,
    require_dtype,
    require_instance,
    require_int,
    require_ndim,
    require_shape,
)
from refsim.arith import fp
from refsim.arith import exact
from refsim.errors import FormatRuleError, ShapeError
from refsim.formats.atom import AtomActivations, AtomWeights

__all__ = ["OFFICIAL_MIN_BODY", "require_official_body", "BRANCHES", "plan_branches", "scale_leading_dim",
           "scale_positions", "activation_scale_layout", "activation_scale_layout_reference", "atom_gemm",
           "atom_gemm_reference", "check_gemm"]


#: the smallest INT4 body (K - keeper) the official kernel runs: its prologue's three k-tiles of 128
OFFICIAL_MIN_BODY = 3 * 128


def require_official_body(k4: int) -> int:
    """``k4`` (the INT4 body length K - keeper, an int) checked against the official kernel's rule; returns it.

    The official ``DenseLayerGEMM_i4_kernel`` (efeslab/Atom @ 7e3618b) fills ``STAGE - 1 = 3`` pipeline
    stages before its main loop. Its A and B tile loads there are guarded along K, but the ``loadScale``
    of each of those three k-tiles is issued with ``predGuard = true``: it reads the scale rows of body
    groups 0, 1 and 2 whether they exist or not. With ``K - 128 < 384`` (fewer than 3 groups) that is an
    out-of-bounds global read (refsim.ptx stops with PtxMemoryError at the prologue's ``cp.async``).
    refsim's own ``atom.cu`` guards those loads and computes such shapes, but refsim's emulator models the
    official kernel, so both refuse them: a result the official kernel cannot produce has no reference.
    Raises FormatRuleError naming the rule and ``k4``.
    """
    k4 = require_int("K - keeper", k4, minimum=0)
    if k4 < OFFICIAL_MIN_BODY:
        raise FormatRuleError(
            f"K - keeper: the official DenseLayerGEMM_i4 kernel's prologue loads three k-tiles unguarded (the scale "
            f"rows of body groups 0, 1, 2): it reads out of bounds when the INT4 body K - keeper < {OFFICIAL_MIN_BODY} "
            f"(K - 128 < 384 with its keeper of 128), so refsim's emulator and atom.cu refuse it (atom.cu itself "
            f"guards those loads); got {k4}")
    return k4


#: the paths of the official kernel's plan (grid of 128 x 128 blocks, K loop, keeper tail, epilogue)
BRANCHES: tuple[str, ...] = (
    "body_min_groups",      # K - keeper == 384: the prologue's three k-tiles are the whole body
    "body_more_groups",     # K - keeper > 384: the main loop refills stages past the prologue
    "keeper",               # an INT8 keeper tail (keeper > 0)
    "no_keeper",            # no INT8 tail (refsim's kernel only: the official KEEPER is 128)
    "m_partial_tile",       # M % 16 != 0: the last m16 tile's rows are masked in loads and stores
    "m_several_blocks",     # M > 128: several block rows of the grid (blockIdx.y > 0)
    "n_several_blocks",     # N > 128: several block columns (blockIdx.x > 0)
    "n_partial_block",      # N % 128 != 0 (refsim's kernel only: the official B loads are unguarded in N)
)


def plan_branches(m: int, n: int, k4: int, keeper: int) -> frozenset[str]:
    """The :data:`BRANCHES` an (M, N, K - keeper = ``k4``, ``keeper``) Atom GEMM takes (ints; ``k4`` obeys
    :func:`require_official_body`). Each name is one decision of the kernel's plan, so a set of cases
    whose branches cover :data:`BRANCHES` runs every path of it."""
    m, n, keeper = require_int("M", m, minimum=1), require_int("N", n, minimum=1), require_int("keeper", keeper, minimum=0)
    k4 = require_official_body(k4)
    out = {"body_min_groups" if k4 == OFFICIAL_MIN_BODY else "body_more_groups",
           "keeper" if keeper else "no_keeper"}
    if m % 16:
        out.add("m_partial_tile")
    if m > 128:
        out.add("m_several_blocks")
    if n > 128:
        out.add("n_several_blocks")
    if n % 128:
        out.add("n_partial_block")
    return frozenset(out)


def scale_leading_dim(m: int) -> int:
    """Halves per group column of the kernel's activation-scale buffer, ``SCALE_SIZE_A(M)``:
    ``(M/16)*64 + 64 - (1 - (M%16)/8) * (8 - M%8) * 8`` (integer division); 4M when 16 | M."""
    m = require_int("M", m, minimum=1)
    return (m // 16) * 64 + 64 - (1 - (m % 16) // 8) * (8 - m % 8) * 8


def scale_positions(m: int) -> np.ndarray:
    """int64 (M, 4): the 4 half offsets (within one group column) holding token r's scale:
    ``base = (r/16)*64 + (r%8)*8 + (r/8)%2``, replicas at ``base + 2j``, j = 0..3. Seen as half2
    pairs, one pair holds (scale[r], scale[r+8]) of a 16-row tile: the m16n8 accumulator rows
    (groupID, groupID + 8)."""
    m = require_int("M", m, minimum=1)
    require_bounded("M", 4 * m, what="scale slots (4 per token)")
    r = np.arange(m)[:, None]
    base = (r // 16) * 64 + (r % 8) * 8 + (r // 8) % 2
    return (base + 2 * np.arange(4)[None, :]).astype(np.int64)


def activation_scale_layout(scale: np.ndarray) -> np.ndarray:
    """Scatter float16 activation scales (M, G) into the kernel's buffer: float16
    (G * scale_leading_dim(M),), group columns one after another (column-major), each scale
    written 4 times (:func:`scale_positions`); unused halves are 0. The INT8 tail's per-token
    scale uses the same layout with G = 1."""
    scale = require_dtype("scale", scale, np.float16)
    require_ndim("scale", scale, 2)
    m, g = scale.shape
    ld = scale_leading_dim(m)
    out = np.zeros(g * ld, np.float16)
    pos = scale_positions(m)                                              # (M, 4)
    cols = (np.arange(g) * ld)[None, :, None] + pos[:, None, :]           # (M, G, 4)
    out[cols] = np.repeat(scale[:, :, None], 4, axis=2)
    return out


def activation_scale_layout_reference(scale: np.ndarray) -> np.ndarray:
    """Plain-loop twin of :func:`activation_scale_layout`, straight from the formula."""
    scale = require_ndim("scale", require_dtype("scale", scale, np.float16), 2)
    m, g = scale.shape
    ld = (m // 16) * 64 + 64 - (1 - (m % 16) // 8) * (8 - m % 8) * 8
    out = np.zeros(g * ld, np.float16)
    for col in range(g):
        for r in range(m):
            base = (r // 16) * 64 + (r % 8) * 8 + (r // 8) % 2
            for j in range(4):
                out[col * ld + base + 2 * j] = scale[r, col]
    return out



# ----------------------------------------------------------------------------------------------
# fused group GEMM
# ----------------------------------------------------------------------------------------------
def check_gemm(a: AtomActivations, w: AtomWeights, *, pairs: bool = True) -> tuple[int, int, int, int]:
    """The rules of one group GEMM of activations ``a`` (M rows) and weights ``w`` (N columns): the
    int8 codes and float16 scales of both, matching INT4 widths with a group count dividing them,
    an INT8 tail of the same width, N even; with ``pairs`` (the default) the two columns of each
    output pair share their weight scales (``pairs=False``, the kernel emulator, which models the
    pair selection, accepts scales that differ). Returns ``(M, N, groups, group size)`` as Python
    ints, else a DtypeError, ShapeError or FormatRuleError naming the rule."""
    require_instance("a", a, AtomActivations)
    require_instance("w", w, AtomWeights)
    for name, arr, dt in (("a.q4", a.q4, np.int8), ("a.q8", a.q8, np.int8), ("w.q4", w.q4, np.int8),
                          ("w.q8", w.q8, np.int8), ("a.scale4", a.scale4, np.float16),
                          ("a.scale8", a.scale8, np.float16), ("w.scale4", w.scale4, np.float16),
                          ("w.scale8", w.scale8, np.float16)):
        require_dtype(name, arr, dt)
    m, kb = a.q4.shape
    kb_w, n = w.q4.shape
    if kb != kb_w:
        raise ShapeError(f"w.q4: INT4 rows must equal the activations' INT4 columns {kb}; got {kb_w}")
    g = a.scale4.shape[1]
    require_shape("w.scale4", w.scale4, (g, n))
    require_shape("a.scale4", a.scale4, (m, g))
    if g == 0 or kb % g:
        raise ShapeError(f"a.scale4: group count must divide the INT4 width {kb}; got {g}")
    keeper = a.q8.shape[1]
    require_shape("w.q8", w.q8, (keeper, n))
    require_shape("a.scale8", a.scale8, (m,))
    require_shape("w.scale8", w.scale8, (n,))
    if n % 2:
        raise ShapeError(f"N: must be even (output columns pair up in the kernel's half2 scales); got {n}")
    if pairs and not np.array_equal(w.scale4[:, 0::2].view(np.uint16), w.scale4[:, 1::2].view(np.uint16)):
        raise FormatRuleError("w.scale4: columns 2p and 2p+1 must hold identical scales (the kernel reads "
                              "the pair's scale through a half2 fragment); got unequal pairs")
    for name, arr, lo, hi in (("a.q4", a.q4, -8, 7), ("w.q4", w.q4, -8, 7)):
        if arr.size and (arr.min() < lo or arr.max() > hi):
            raise FormatRuleError(f"{name}: INT4 values must lie in [{lo}, {hi}]; got {int(arr.min())}..{int(arr.max())}")
    return m, n, g, kb // g


def _fma_f32(acc: np.ndarray, p: np.ndarray, s: np.ndarray) -> np.ndarray:
    """Correctly rounded float32 ``acc + p * s`` (one rounding, as ``fmaf``): the one fp32 FMA,
    :func:`refsim.arith.fp.f32_fma`. p integer-valued (float64 from the exact gemm), |p| < 2**22
    is exact in float32; s fp16."""
    return fp.f32_fma(p.astype(np.float32), s.astype(np.float32), acc.astype(np.float32, copy=False), fused=True)


def atom_gemm(a: AtomActivations, w: AtomWeights) -> np.ndarray:
    """Atom's fused W4A4 group GEMM, vectorised: returns float16 (M, N).

    a: :class:`AtomActivations` (kernel layout semantics: INT4 body (M, Kb), float16 scales
    (M, G) and (M,)); w: :class:`AtomWeights` with float16 pair-equal scales. Arithmetic in the
    module docstring: exact int32 group sums, fp16 scale products, fp32 FMA accumulation in
    group order, the INT8 tail last, one rounding to fp16."""
    m, n, g, group = check_gemm(a, w)
    # the exact integer dot products run as float64 BLAS gemms: every product and partial sum is an
    # integer of magnitude <= 128 * 128 * K < 2**53, so any summation order gives the exact int
    # (NumPy's int64 matmul has no BLAS and was ~10x slower)
    qa = a.q4.astype(np.float64).reshape(m, g, group)                     # (M, G, group)
    qb = w.q4.astype(np.float64).reshape(g, group, n)                     # (G, group, N)
    acc = np.zeros((m, n), np.float32)
    for gi in range(g):
        p = qa[:, gi, :] @ qb[gi]                                         # (M, N) exact int
        with np.errstate(over="ignore"):      # an fp16 scale product may overflow to inf, as __hmul2
            s = (a.scale4[:, gi, None].astype(np.float32) * w.scale4[None, gi, :].astype(np.float32)).astype(np.float16)
        acc = _fma_f32(acc, p, s)
    p8 = a.q8.astype(np.float64) @ w.q8.astype(np.float64)               # exact int, as above
    with np.errstate(over="ignore"):
        s8 = (a.scale8[:, None].astype(np.float32) * w.scale8[None, :].astype(np.float32)).astype(np.float16)
    acc = _fma_f32(acc, p8, s8)
    with np.errstate(over="ignore"):          # |acc| > 65504 -> +-inf, as __float2half does
        return acc.astype(np.float16)


def _fma_reference(acc: np.float32, p: int, s: np.float16) -> np.float32:
    """One correctly rounded fmaf(p, s, acc) with exact rationals; inf/NaN operands follow IEEE
    (e.g. an fp16 scale product that overflowed to inf)."""
    if not (np.isfinite(acc) and np.isfinite(s)):
        with np.errstate(invalid="ignore", over="ignore"):
            return np.float32(float(acc) + p * float(s))
    return exact.round_to_float(Fraction(float(acc)) + p * Fraction(float(s)), np.float32)


def atom_gemm_reference(a: AtomActivations, w: AtomWeights) -> np.ndarray:
    """Plain-loop twin of :func:`atom_gemm`, straight from the spec: Python ints for the dot
    products and exact rationals for each FMA. float16 (M, N)."""
    m, n, g, group = check_gemm(a, w)
    keeper = a.q8.shape[1]
    out = np.zeros((m, n), np.float16)
    for i in range(m):
        for j in range(n):
            acc = np.float32(0.0)
            for gi in range(g):
                p = sum(int(a.q4[i, gi * group + t]) * int(w.q4[gi * group + t, j]) for t in range(group))
                with np.errstate(over="ignore"):
                    s = np.float16(np.float32(a.scale4[i, gi]) * np.float32(w.scale4[gi, j]))
                acc = _fma_reference(acc, p, s)
            p8 = sum(int(a.q8[i, t]) * int(w.q8[t, j]) for t in range(keeper))
            with np.errstate(over="ignore"):
                s8 = np.float16(np.float32(a.scale8[i]) * np.float32(w.scale8[j]))
            acc = _fma_reference(acc, p8, s8)
            with np.errstate(over="ignore"):  # overflow -> +-inf, as __float2half does
                out[i, j] = np.float16(acc)
    return fp.canonical_nan(out)          # NaN is sticky: every NaN the GPU writes is the canonical one

