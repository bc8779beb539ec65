"""Warp-level emulation of a 2/4/16-bit GEMV with its fused outlier SpMV: what the kernel writes.

The ICCAD'24 paper (Li et al., "Fast and Efficient 2-bit LLM Inference on GPU: 2/4/16-bit in a Weight Matrix with Asynchronous Dequantization") publishes no code, so
"the kernel" here is **refsim's documented kernel design** that follows the paper's dataflow
(Algorithm 1 and section 5.3: 2nd-order dequantization of the scales, 1st-order dequantization
of the weights to half, ``psum += w * x`` over a packed loop of N_pack = 16 weights = one group,
``__shfl_down_sync`` reduction inside a warp, the CSR outlier SpMV added to the dense result).
Every choice below that the paper leaves open is marked DESIGN. The packed layout is
:mod:`refsim.formats.mixed_2_4_16` (``Packed2416``; arrays per output channel n).

Spec block
----------
=================  ==================================================================================
computes           y float16 (N,) = x float16 (K,) @ W_hat (K, N), W_hat = dense 2/4-bit part + CSR
                   outliers, one token (GEMV), bit for bit as the kernel below writes it
launch (DESIGN)    one warp (32 lanes) per output channel n (grid-stride over n; 4 warps per block:
                   changes no bit). Nothing crosses warps, so the result does not depend on the SM count.
work per lane      the 128-bit units of row n (``w_main[n, u, :]``, one 16-byte load each) are dealt
(DESIGN)           round-robin: lane t owns units u = t, t + 32, t + 64, ... (a warp's 32 loads are
                   512 contiguous bytes) and processes them in ascending u. Inside a unit, words in
                   order 0, 1, 2, 3: a mixed unit u < n4 holds 2-bit groups j = 3u, 3u+1, 3u+2 (words
                   0-2; j = rank among 2-bit groups in K order, j < n2 only) and then 4-bit group u
                   (word 3 = codes 0-7, ``w_side[n, u]`` = codes 8-15); a pure unit n4 + v holds 2-bit
                   groups j = 3 n4 + 4v + word (j < n2 only; padding words are skipped, never read)
step 1 (fp32)      2nd-order dequantization per (group, n), the asynchronous part:
                   ``s_hat = __float2half_rn((float)(c - z2) * __half2float(s2))``: FMUL is exact
                   ((c - z2) has <= 5 bits, s2 11), one RNE to fp16. No add follows: nothing to fuse
step 2 (fp16)      1st-order dequantization of each weight: ``w = __hmul2(__hsub2(q, z), s_hat)``:
                   the subtraction of small integers is exact, the multiply rounds once (RNE).
                   Its result feeds a multiplicand, never an add, so no contraction is possible
step 3 (fp16)      the packed loop, per group of 16 (k0 = 16 g): ``h = half2(0, 0)``; for i = 0..7:
                   ``h = __hfma2(half2(w[k0+2i], w[k0+2i+1]), half2(x[k0+2i], x[k0+2i+1]), h)`` --
                   two fp16 chains (.x even k, .y odd k) of 8 steps, each ``fma.rn.f16`` (fused=True:
                   ``__hfma2`` is an fma in the source, not a contraction); then ``__hadd(h.x, h.y)``
step 4 (fp32)      ``psum += __half2float(group_sum)`` (FADD, RNE) in the lane's group order;
                   psum starts at +0. DESIGN: fp32 across groups, so a row of K = 65536 sees one fp16
                   rounding per 16 products instead of a fp16 running sum
step 5 (fp32)      ``for d in 16, 8, 4, 2, 1: psum += __shfl_down_sync(~0, psum, d)`` (a lane whose
                   source lane t + d >= 32 reads its own value); lane 0 holds the row's dense sum
step 6 (fp32)      the outlier SpMV, fused into the epilogue (DESIGN): lane 0 walks the CSR row of n
                   in stored order (columns ascending) and does ``acc = fmaf(__half2float(val[e]),
                   __half2float(x[col[e]]), acc)`` (fused=True; immaterial: an fp16 x fp16 product
                   is exact in fp32, so FFMA and FMUL+FADD give the same bits)
step 7             ``y[n] = __float2half_rn(acc)`` (one RNE), written by lane 0
why this SpMV      the paper launches cuSPARSE after the GEMV and combines the two; cuSPARSE's
order              summation order (and a second fp16 rounding of the dense result) are not fixed by
                   any document, so no bit-exact reference could exist for it. Dense first, then the
                   outliers one by one in stored order, all in fp32 before a single final rounding, is
                   deterministic, needs no atomics, avoids the double rounding of fp16(fp16(dense) +
                   sparse), and is the order of the format's own oracle
                   (:func:`refsim.formats.mixed_2_4_16.gemv`), so the two differ only in the dense sum
oracle             :func:`mixed_gemv_reference`: scalar loops lane by lane, reading the packed words'
                   bit fields directly, every fp16 fma through the exact rational oracle
                   (:func:`refsim.arith.fp.fma_reference`)
paths              steps 2-3 run in the compiled kernel :func:`refsim.native.emulators.
                   mixed_dense_group_sums` when a C compiler is present, else :func:`group_sums` on
                   :func:`dequantized_weights` (NumPy, ``native=False``); tested bit-equal
source             paper only (Algorithm 1, sections 3.3 and 5.3); no official repository exists
                   (the paper, section 4.1)
=================  ==================================================================================

Who does what for one output channel, K = 128 (the format's example: groups 2 and 5 are 4-bit)::

    unit u:   0                         1                         2..31: no unit
    lane t:   0                         1                         (psum stays +0)
    groups:   g0 g1 g3 | g2             g4 g6 g7 | g5
    lane 0:   psum = ((0 + S(g0)) + S(g1)) + S(g3)) + S(g2)     S(g) = __hadd of the two hfma2 chains
    tree:     d=16: v0+v16 ... d=1: lane 0 = (((v0+v16)+(v8+v24)) + ((v4+v20)+(v12+v28))) + ...
    epilogue: acc = lane 0; acc = fmaf(val[e], x[col[e]], acc) for e in row_ptr[n]..row_ptr[n+1]-1
              y[n] = fp16(acc)
"""

from __future__ import annotations

import numpy as np

from refsim._validate import (require_divisible, require_dtype, require_finite, require_int, require_integer_array,
                              require_ndim, require_optional_bool, require_shape)
from refsim.arith import fp
from refsim.errors import ShapeError
from refsim.formats import mixed_2_4_16 as fmt

__all__ = [
    "mixed_gemv", "mixed_gemv_reference", "dense_rows", "spmv_epilogue", "dequantized_weights",
    "dequantized_weights_reference", "group_sums",
    "unit_groups", "lane_schedule", "warp_reduce_sum_f32", "warp_reduce_sum_f32_reference",
    "WARP", "check_inputs", "BRANCHES", "plan_branches",
]

WARP = 32

#: the paths of the kernel's plan a row can take (see :func:`plan_branches`)
BRANCHES: tuple[str, ...] = (
    "mixed_units",          # units holding three 2-bit groups and one 4-bit group
    "pure_units",           # units of four 2-bit words only
    "pure_unit_padding",    # the last pure unit has fewer than 4 words (padding never read)
    "mixed_unit_short",     # a mixed unit with fewer than three 2-bit groups (few 2-bit groups left)
    "lanes_idle",           # fewer than 32 units: some lanes add nothing
    "lanes_several_units",  # more than 32 units: a lane walks several units
    "outliers",             # the CSR epilogue adds outliers
    "no_outliers",          # some row has no outlier
    "several_blocks",       # N > 4: several blocks of 4 warps
)


def plan_branches(group_bits: np.ndarray, n: int, nnz_per_row) -> frozenset[str]:
    """The :data:`BRANCHES` the kernel takes for the per-group bit widths ``group_bits`` (uint8 (G,) of
    2 and 4), ``n`` output channels (an int) and ``nnz_per_row`` (an integer array (N,): outliers of each row)."""
    units = unit_groups(group_bits)
    four = int((np.asarray(group_bits) == 4).sum())
    n2 = len(group_bits) - four
    n = require_int("n", n, minimum=1)
    nnz = require_shape("nnz_per_row", require_integer_array("nnz_per_row", nnz_per_row), (n,))
    out = set()
    if four:
        out.add("mixed_units")
        if n2 < 3 * four:
            out.add("mixed_unit_short")
    if n2 > 3 * four:
        out.add("pure_units")
        if (n2 - 3 * four) % 4:
            out.add("pure_unit_padding")
    if len(units) > WARP:
        out.add("lanes_several_units")
    if len(units) < WARP:
        out.add("lanes_idle")
    if nnz.size and nnz.max() > 0:
        out.add("outliers")
    if nnz.size and nnz.min() == 0:
        out.add("no_outliers")
    if n > 4:
        out.add("several_blocks")
    return frozenset(out)


# ----------------------------------------------------------------------------------------------
# who does what


def unit_groups(group_bits: np.ndarray) -> list[list[int]]:
    """Group indices (K order, g = k // 16) of each 128-bit unit u, in the order the lane reads
    its words (spec block, "work per lane"). group_bits uint8 (G,) of 2 / 4; returns U lists."""
    four = fmt.check_group_bits(group_bits) == 4
    two_idx = np.flatnonzero(~four)
    four_idx = np.flatnonzero(four)
    n2, n4 = two_idx.size, four_idx.size
    units = []
    for u in range(n4):                                             # mixed units
        units.append([int(two_idx[j]) for j in range(3 * u, 3 * u + 3) if j < n2] + [int(four_idx[u])])
    for j0 in range(3 * n4, n2, 4):                                 # pure units of four 2-bit words
        units.append([int(two_idx[j]) for j in range(j0, min(j0 + 4, n2))])
    return units


def lane_schedule(group_bits: np.ndarray) -> np.ndarray:
    """int64 (32, S): row t lists the groups lane t accumulates, in its order; -1 pads.
    Lane t owns units t, t + 32, ...; S = 4 * ceil(U / 32) (at least 1)."""
    units = unit_groups(group_bits)
    per_lane = [[g for u in range(t, len(units), WARP) for g in units[u]] for t in range(WARP)]
    s = max(1, max(len(x) for x in per_lane))
    out = np.full((WARP, s), -1, np.int64)
    for t, gs in enumerate(per_lane):
        out[t, :len(gs)] = gs
    return out


# ----------------------------------------------------------------------------------------------
# arithmetic


def warp_reduce_sum_f32(v: np.ndarray) -> np.ndarray:
    """fp32 ``shfl_down`` tree over axis 0 (32 lanes) of float32 ``v`` (32, ...): lane 0's result,
    shape v.shape[1:]. Same tree as :func:`refsim.emulator.anyprec_kernel.warp_reduce_sum`, FADD."""
    v = _require_lanes(v)
    lanes = np.arange(WARP)
    for d in (16, 8, 4, 2, 1):
        src = np.where(lanes + d < WARP, lanes + d, lanes)         # out-of-range source: own value
        v = fp.f32_add(v, v[src])
    return v[0]


def warp_reduce_sum_f32_reference(v: np.ndarray) -> np.float32:
    """Plain loop for one warp (v float32 (32,)): every lane's register, step by step."""
    v = _require_lanes(v, one_warp=True)
    regs = [np.float32(x) for x in v]
    for d in (16, 8, 4, 2, 1):
        regs = [np.float32(regs[t] + (regs[t + d] if t + d < WARP else regs[t])) for t in range(WARP)]
    return regs[0]


def _require_lanes(v, one_warp: bool = False) -> np.ndarray:
    """The check :func:`warp_reduce_sum_f32` and its twin share: float32, axis 0 the 32 lanes
    (the twin: exactly one warp, shape (32,))."""
    v = require_dtype("v", v, np.float32)
    if v.shape[:1] != (WARP,) or (one_warp and v.ndim != 1):
        raise ShapeError(f"v: axis 0 must be the {WARP} lanes{' (shape (32,))' if one_warp else ''}; "
                         f"got shape {v.shape}")
    return v


def _require_packed(p) -> None:
    if not isinstance(p, fmt.Packed2416):
        raise ShapeError(f"p: must be a refsim.formats.mixed_2_4_16.Packed2416; got {type(p).__name__}")


def check_inputs(p: fmt.Packed2416, x: np.ndarray) -> tuple[np.ndarray, int, int]:
    """The rules of one 2/4/16 GEMV call, shared by the emulator and the CUDA host
    (refsim.cuda.mixed_2_4_16): ``p`` a well-formed Packed2416 of a (K, N) weight, its CSR outliers
    inside (N, K); ``x`` float16 (K,) finite. Returns ``(x, K, N)``, else the RefsimError naming the rule."""
    _require_packed(p)
    g = p.group_bits.size
    k, n = g * fmt.G1, p.w_main.shape[0]
    x = require_dtype("x", x, np.float16)
    require_ndim("x", x, 1)
    require_shape("x", x, (k,))
    require_finite("x", x)
    fmt.check_csr(p.row_ptr, p.col, p.val, n_rows=n, n_cols=k)
    return x, k, n


def _second_order_scales(m: fmt.Mixed2416) -> np.ndarray:
    """Step 1: s_hat float16 (G, N) = ``__float2half_rn((float)(c - z2) * s2)``."""
    z2 = np.repeat(m.z2.astype(np.int32), fmt.G2, axis=1)                              # (G, N)
    s2 = np.repeat(m.s2, fmt.G2, axis=1)                                                # (G, N) f16
    c = fp.cvt_int_to_f32(m.code.astype(np.int32) - z2)                                 # exact
    return fp.cvt_f32_to_f16(fp.f32_mul(c, fp.cvt_f16_to_f32(s2)))


def dequantized_weights(p: fmt.Packed2416) -> np.ndarray:
    """float16 (K, N): the weights the lanes hold after steps 1-2 (dense part only; outlier
    positions hold the dense code, i.e. (z - z) * s_hat = 0).

    Step 2 in one float32 pass: q - z (|q - z| <= 15) and its product with s_hat (4 x 11 bits) are
    exact in float32, so the single float32 -> float16 cast is the one RNE of ``__hmul2`` — the
    bits of :func:`dequantized_weights_reference` (tested), without NumPy's slow fp16 loops."""
    _require_packed(p)
    m = fmt.unpack(p)
    g, n = m.zero.shape
    s_hat = _second_order_scales(m).astype(np.float32)                                  # (G, N), exact
    qz = m.q.reshape(g, fmt.G1, n).astype(np.float32)
    qz -= m.zero.astype(np.float32)[:, None, :]                                         # exact, (G, 16, N)
    with np.errstate(all="ignore"):                                                     # 0 * Inf: NaN, as __hmul2
        qz *= s_hat[:, None, :]                                                         # exact product
        return fp.canonical_nan(qz.reshape(g * fmt.G1, n).astype(np.float16))          # (K, N), one RNE


def dequantized_weights_reference(p: fmt.Packed2416) -> np.ndarray:
    """:func:`dequantized_weights` op by op as the spec states it: ``fp16(q - z)`` then the fp16
    multiply :func:`refsim.arith.fp.f16_mul`; float16 (K, N)."""
    _require_packed(p)
    m = fmt.unpack(p)
    g, n = m.zero.shape
    s_hat = _second_order_scales(m)                                                     # step 1
    qz = m.q.astype(np.int32).reshape(g, fmt.G1, n) - m.zero.astype(np.int32)[:, None, :]   # (G, 16, N)
    w = fp.f16_mul(fp.cvt_int_to_f16(qz), s_hat[:, None, :])                            # step 2
    return w.reshape(g * fmt.G1, n)                                                     # (K, N)


def group_sums(w: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Step 3 for every (group, column), NumPy form: float32 (G, N) = ``float(__hadd(h.x, h.y))``
    after the two 8-step ``hfma2`` chains from 0. w float16 (K, N) (:func:`dequantized_weights`),
    x float16 (K,); K = 16 G. The compiled twin :func:`refsim.native.emulators.mixed_group_sums`
    gives the same bits (tested)."""
    w = require_ndim("w", require_dtype("w", w, np.float16), 2)
    k, n = w.shape
    require_divisible("K", k, fmt.G1, "must be a positive multiple of 16 (whole groups)")
    x = require_shape("x", require_dtype("x", x, np.float16), (k,))
    g = k // fmt.G1
    w = w.reshape(g, fmt.G1, n)                                         # (G, 16, N)
    xg = x.reshape(g, fmt.G1)                                           # (G, 16)
    hx = np.zeros((g, n), np.float16)
    hy = np.zeros((g, n), np.float16)
    for i in range(fmt.G1 // 2):                                        # step 3: two hfma2 chains
        hx = fp.f16_fma(w[:, 2 * i], xg[:, 2 * i, None], hx, fused=True)
        hy = fp.f16_fma(w[:, 2 * i + 1], xg[:, 2 * i + 1, None], hy, fused=True)
    return fp.cvt_f16_to_f32(fp.f16_add(hx, hy))                        # (G, N)


def dense_rows(p: fmt.Packed2416, x: np.ndarray, *, native: bool | None = None) -> np.ndarray:
    """float32 (N,): lane 0's value after the shuffle tree (steps 1-5), before the SpMV.
    p: :class:`~refsim.formats.mixed_2_4_16.Packed2416`; x float16 (K,). native: None = step 3 in
    the compiled kernel when available, else :func:`group_sums` (same bits); True / False force one."""
    from refsim.native import emulators as nat

    x, k, n = check_inputs(p, x)
    native = require_optional_bool("native", native)
    if nat.available() if native is None else native:                  # steps 1-3, weights never stored
        m = fmt.unpack(p)
        group_sum = nat.mixed_dense_group_sums(m.q, m.zero, _second_order_scales(m), x)
    else:
        group_sum = group_sums(dequantized_weights(p), x)               # (G, N) f32
    sched = lane_schedule(p.group_bits)                                 # (32, S)
    psum = np.zeros((WARP, n), np.float32)
    for s in range(sched.shape[1]):                                     # step 4, lanes in lockstep
        gi = sched[:, s]
        upd = fp.f32_add(psum, group_sum[np.maximum(gi, 0)])
        psum = np.where((gi >= 0)[:, None], upd, psum)
    return warp_reduce_sum_f32(psum)                                    # step 5


def spmv_epilogue(acc: np.ndarray, p: fmt.Packed2416, x: np.ndarray) -> np.ndarray:
    """Step 6: float32 (N,) ``acc`` plus each row's outliers in stored order, one ``fmaf`` each.
    Returns float32 (N,) (a new array)."""
    x, k, n = check_inputs(p, x)
    acc = require_dtype("acc", acc, np.float32)
    require_shape("acc", acc, (n,))
    acc = acc.copy()
    counts = np.diff(p.row_ptr.astype(np.int64))                        # (N,)
    val = fp.cvt_f16_to_f32(p.val)
    xf = fp.cvt_f16_to_f32(x)
    for e in range(int(counts.max(initial=0))):                         # e-th outlier of every row
        rows = np.flatnonzero(counts > e)
        idx = p.row_ptr[rows].astype(np.int64) + e
        acc[rows] = fp.f32_fma(val[idx], xf[p.col[idx].astype(np.int64)], acc[rows], fused=True)
    return acc


def mixed_gemv(p: fmt.Packed2416, x: np.ndarray, *, native: bool | None = None) -> np.ndarray:
    """What the 2/4/16-bit GEMV kernel of the spec block writes: float16 (N,), bit for bit.

    p: :class:`~refsim.formats.mixed_2_4_16.Packed2416` (w_main uint32 (N, U, 4), w_side, meta2,
    meta4, s2 float16 (G, N/16), z2, group_bits, CSR row_ptr int32 (N+1,), col uint16, val float16);
    x: float16 (K,), finite. Inputs are not modified. native: see :func:`dense_rows`."""
    return fp.cvt_f32_to_f16(spmv_epilogue(dense_rows(p, x, native=native), p, x))


# ----------------------------------------------------------------------------------------------
# plain-loop twin


def _lane_groups_reference(bits: list[int]) -> list[list[tuple[int, str, int]]]:
    """Per lane, its groups in order as (group index, 'two'|'four', j or u): straight from the spec."""
    two = [g for g, b in enumerate(bits) if b == 2]
    four = [g for g, b in enumerate(bits) if b == 4]
    n2, n4 = len(two), len(four)
    units = []
    for u in range(n4):
        words = [(two[j], "two", j) for j in (3 * u, 3 * u + 1, 3 * u + 2) if j < n2]
        units.append(words + [(four[u], "four", u)])
    v = 0
    while 3 * n4 + 4 * v < n2:
        units.append([(two[j], "two", j) for j in range(3 * n4 + 4 * v, 3 * n4 + 4 * v + 4) if j < n2])
        v += 1
    lanes = [[] for _ in range(WARP)]
    for u, words in enumerate(units):
        lanes[u % WARP].extend(words)
    return lanes


def _word_of_two_bit_group(j: int, n4: int) -> tuple[int, int]:
    if j < 3 * n4:
        return j // 3, j % 3
    return n4 + (j - 3 * n4) // 4, (j - 3 * n4) % 4


def mixed_gemv_reference(p: fmt.Packed2416, x: np.ndarray) -> np.ndarray:
    """Plain-loop twin of :func:`mixed_gemv`: per output channel, per lane, per group, reading the
    packed words' bit fields; fp16 fmas through the exact-rational oracle; scalar fp32 adds."""
    x, k, n = check_inputs(p, x)
    bits = [int(b) for b in p.group_bits]
    n4 = bits.count(4)
    lanes = _lane_groups_reference(bits)
    one16 = np.ones(1, np.float16)
    one32 = np.ones(1, np.float32)
    y = np.empty(n, np.float16)
    for r in range(n):
        regs = []
        for t in range(WARP):
            psum = np.float32(0.0)
            for gi, kind, idx in lanes[t]:
                if kind == "two":
                    u, word = _word_of_two_bit_group(idx, n4)
                    meta = int(p.meta2[r, idx // 3])
                    slot = idx % 3
                    z = (meta >> (2 * slot)) & 0x3
                    c = (meta >> 6) & 0xF if slot == 0 else ((meta >> (7 + 3 * slot)) & 0x7) << 1
                    codes = [(int(p.w_main[r, u, word]) >> (2 * i)) & 0x3 for i in range(16)]
                else:
                    z = int(p.meta4[r, idx]) & 0xF
                    c = int(p.meta4[r, idx]) >> 4
                    lo, hi = int(p.w_main[r, idx, 3]), int(p.w_side[r, idx])
                    codes = [(lo >> (4 * i)) & 0xF for i in range(8)] + [(hi >> (4 * i)) & 0xF for i in range(8)]
                s2 = np.float32(p.s2[gi, r // fmt.G2])
                s_hat = np.float16(np.float32(c - int(p.z2[gi, r // fmt.G2])) * s2)          # step 1
                w = [np.float16(np.float16(q - z) * s_hat) for q in codes]                   # step 2
                hx = hy = np.float16(0.0)
                for i in range(8):                                                            # step 3
                    kx, ky = 16 * gi + 2 * i, 16 * gi + 2 * i + 1
                    hx = fp.fma_reference(w[2 * i] * one16, x[kx] * one16, hx * one16)[0]
                    hy = fp.fma_reference(w[2 * i + 1] * one16, x[ky] * one16, hy * one16)[0]
                psum = np.float32(psum + np.float32(np.float16(hx + hy)))                    # step 4
            regs.append(psum)
        acc = warp_reduce_sum_f32_reference(np.array(regs, np.float32))                     # step 5
        for e in range(int(p.row_ptr[r]), int(p.row_ptr[r + 1])):                            # step 6
            v, xv = np.float32(p.val[e]), np.float32(x[int(p.col[e])])
            acc = fp.fma_reference(v * one32, xv * one32, acc * one32)[0]
        y[r] = np.float16(acc)                                                               # step 7
    return y
