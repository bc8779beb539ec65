"""Bit-exact oracle of refsim's generated QIGen qGEMV kernels (fp32, fused multiply-adds).

What a generated kernel computes, for every batch row ``b`` and column ``c`` (groups ``g`` of
``group_size`` consecutive K-rows; per-channel is one group spanning K)::

    y = bias[c]  (or +0.0 without bias)
    for g in groups, in increasing K:
        acc[0..A-1] = +0.0                           # A = accumulators (1, 2 or 4)
        for i, k in enumerate(kernel_k_order(group g)):  # see kernel_k_order
            a = i % A                                # round-robin over the kernel's FMA order
            acc[a] = fma(x[b,k], float(q[k,c]), acc[a])  # _mm256_fmadd_ps / fmaf, raw code
        acc = combine(acc)                           # A=1: acc[0]; A=2: acc[0]+acc[1];
                                                     # A=4: (acc[0]+acc[1]) + (acc[2]+acc[3])
        r = +0.0
        for k in group g, increasing:  r = r + x[b,k] # fp32 add (compute_reduction, scalar)
        t = fma(-z[g,c], r, acc)                     # _mm256_fnmadd_ps: acc - z*r, one rounding
        y = fma(t, s[g,c], y)                        # _mm256_fmadd_ps
    out[b,c] = y

``accumulators`` (A): the kernel keeps A independent partial sums per column so that the FMAs
of one column form A dependency chains instead of one (on one core the single chain is
latency-bound: one FMA latency per code per micro-tile). Position ``i`` of the per-group FMA
order (``i`` counted from the group's first row; ``P`` is a multiple of A, so this is also the
position inside each chunk modulo A) goes to partial sum ``i % A``; at the end of the group the
partial sums are combined by the fixed pairwise tree above with plain fp32 adds. A = 1 is the
original single-chain order. The partial sums survive K-block boundaries inside a group (the
kernel parks them in ``accbuf``), so mb does not change the result.

With one group and A = 1 this is exactly IST-DASLab/QIGen's per-channel epilogue
``fma(fnmadd(z, r, acc), s, bias)`` (``generate.py``, ``forward_module``). For groups QIGen instead
accumulates ``y += acc_g*s_g`` and subtracts ``Σ_g (z_g*s_g)*r_g`` at the end; refsim folds the zero
correction per group (fewer cancellations) and documents the difference here.

Summation order inside a group: K is walked in chunks of ``P`` rows (one packed word, ``P =
32/bits``; a triple of words, ``P = 32``, for 3-bit). Inside a chunk the order is QIGen's: for
2/4-bit ``for u in P-unroll, P-2*unroll, ..., 0: for v in u .. u+unroll-1`` (unroll=2, 4-bit:
6,7,4,5,2,3,0,1), for 3-bit ``0..31``. Block sizes (``mb``, ``tb``), the block order and OpenMP do
not change the per-column order, so they are not parameters of the oracle.

FP32 FMA emulation (:func:`fma32`): the product of two fp32 values is exact in float64 (24+24 <
53 significand bits); the float64 sum ``s = p + c`` is computed with its exact error ``e``
(Knuth two-sum); if ``e != 0`` the sum is replaced by its round-to-odd neighbour; rounding that
to fp32 is then correctly rounded (round-to-odd with 53 >= 24 + 2 bits cannot double-round).
Plain ``float32(float64(a*b) + c)`` is NOT always correct: e.g. ``a = b = 1 + 2**-12``,
``c = 2**-70`` gives ``1 + 2**-11`` instead of the correct ``1 + 2**-11 + 2**-23``.
"""

from __future__ import annotations

import numpy as np

from refsim._validate import (
    require_bits,
    require_bounded,
    require_choice,
    require_codes,
    require_dtype,
    require_finite,
    require_int,
    require_ndim,
    require_shape,
)
from refsim.arith import fp
from refsim.errors import DtypeError, FormatRuleError, ShapeError

__all__ = [
    "fma32",
    "fma32_reference",
    "kernel_k_order",
    "chunk_order",
    "qgemv_oracle",
    "qgemv_oracle_reference",
    "error_bound",
    "UNROLLS",
    "ACCUMULATORS",
    "combine_partials",
]

UNROLLS = (1, 2, 4, 8)
ACCUMULATORS = (1, 2, 4)


def _f32(name: str, v) -> np.ndarray:
    """A finite float32 value or array (Python/NumPy floats and float32 arrays; no objects,
    strings, bools or wider arrays that would round silently)."""
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.floating, np.integer, np.ndarray)):
        raise DtypeError(f"{name}: must be a float32 value or array; got {type(v).__name__}")
    if isinstance(v, np.ndarray):
        v = require_dtype(name, v, np.float32)
    a = np.asarray(v, dtype=np.float32)
    if not isinstance(v, np.ndarray) and float(a) != float(v):
        raise FormatRuleError(f"{name}: must be representable in float32; got {v!r}")
    return require_finite(name, a)


def fma32(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Correctly rounded fp32 ``a*b + c`` (one rounding, round-to-nearest-even), elementwise:
    :func:`refsim.arith.fp.f32_fma` with ``fused=True``, the one implementation.

    Inputs: float32 values (broadcastable arrays or scalars), finite. Returns float32.
    """
    a, b, c = (_f32(name, v) for name, v in (("a", a), ("b", b), ("c", c)))
    try:
        np.broadcast_shapes(a.shape, b.shape, c.shape)
    except ValueError:
        raise ShapeError(f"a, b, c: shapes must broadcast together; got {a.shape}, {b.shape}, {c.shape}") from None
    return fp.f32_fma(a, b, c, fused=True)


def fma32_reference(a: float, b: float, c: float) -> np.float32:
    """Scalar fp32 fma from exact rationals (:func:`refsim.arith.fp.fma_reference`): round
    ``a*b + c`` to the nearest fp32, ties to even, IEEE sign of an exact zero. Slow; tests
    :func:`fma32`. Inputs: finite fp32 values."""
    a, b, c = (_f32(name, v) for name, v in (("a", a), ("b", b), ("c", c)))
    if a.ndim or b.ndim or c.ndim:
        raise ShapeError(f"a, b, c: the plain twin takes scalars; got shapes {a.shape}, {b.shape}, {c.shape}")
    return np.float32(fp.fma_reference(a, b, c)[()])


def chunk_order(bits: int, unroll: int = 2) -> list[int]:
    """Order of the ``P`` codes of one packed chunk (word, or word triple for 3-bit) in the kernel.

    2/4-bit: ``[v for u in range(P-unroll, -1, -unroll) for v in range(u, u+unroll)]``
    (IST-DASLab/QIGen ``generate.py`` ``block``); 3-bit: ``0..31``.
    """
    bits = require_bits(bits, (2, 3, 4))
    unroll = require_choice("unroll", unroll, UNROLLS)
    if bits == 3:
        return list(range(32))
    p = 32 // bits
    return [v for u in range(p - unroll, -1, -unroll) for v in range(u, u + unroll)]


def kernel_k_order(k: int, bits: int, unroll: int = 2) -> np.ndarray:
    """The generated kernel's FMA order over all ``k`` rows: int64 ``(k,)``, a permutation."""
    order = chunk_order(bits, unroll)
    p = len(order)
    k = require_bounded("k", require_int("k", k, minimum=1))
    if k % p:
        raise ShapeError(f"K: must be a multiple of {p} for {bits}-bit chunks; got {k}")
    base = np.arange(0, k, p)[:, None]  # (K/P, 1)
    return (base + np.array(order)[None, :]).reshape(-1)


def _require_accumulators(accumulators) -> int:
    return require_choice("accumulators", accumulators, ACCUMULATORS)


def combine_partials(parts: list) -> np.ndarray:
    """The kernel's fixed combination of ``A`` partial sums (float32 arrays of one shape).

    A = 1: ``parts[0]``; A = 2: ``parts[0] + parts[1]``; A = 4: ``(p0 + p1) + (p2 + p3)``, each
    ``+`` one fp32 rounding. Returns float32; inputs are not modified.
    """
    if not isinstance(parts, (list, tuple)):
        raise FormatRuleError(f"parts: must be a list of float32 arrays; got {type(parts).__name__}")
    _require_accumulators(len(parts))
    parts = [require_dtype(f"parts[{i}]", p, np.float32) for i, p in enumerate(parts)]
    for i, p in enumerate(parts):
        require_shape(f"parts[{i}]", p, parts[0].shape)
    while len(parts) > 1:
        parts = [(parts[i] + parts[i + 1]).astype(np.float32) for i in range(0, len(parts), 2)]
    return np.asarray(parts[0], dtype=np.float32)


def _check(x, q, scales, zeros, bias, bits, group_size):
    """``(x, q, scales, zeros, bias, M, K, N, group size)``, the arrays in native byte order."""
    require_bits(bits, (2, 3, 4))
    x = require_dtype("x", x, np.float32)
    require_ndim("x", x, 2)
    m, k = x.shape
    q = require_dtype("q", q, np.uint8)
    require_ndim("q", q, 2)
    if q.shape[0] != k:
        raise ShapeError(f"q: must have K={k} rows like x; got shape {q.shape}")
    n = q.shape[1]
    q = require_codes("q", q, bits)
    if group_size is None:
        gs = k
    else:
        gs = require_int("group_size", group_size, minimum=1)
        if gs % 32 or k % gs:
            raise ShapeError(f"group_size: must be a multiple of 32 dividing K={k}; got {group_size}")
    if k % 32:
        raise ShapeError(f"K: must be a multiple of 32; got {k}")
    scales, zeros = (require_finite(name, require_shape(name, require_dtype(name, arr, np.float32), (k // gs, n)))
                      for name, arr in (("scales", scales), ("zeros", zeros)))
    if bias is not None:
        bias = require_dtype("bias", bias, np.float32)
        require_shape("bias", bias, (n,))
        require_finite("bias", bias)
    require_finite("x", x)
    return x, q, scales, zeros, bias, m, k, n, gs


def qgemv_oracle(x: np.ndarray, q: np.ndarray, scales: np.ndarray, zeros: np.ndarray,
                 bias: np.ndarray | None, bits: int, group_size: int | None,
                 unroll: int = 2, accumulators: int = 1) -> np.ndarray:
    """The generated kernel's output, bit for bit: float32 ``(M, N)``.

    x: float32 ``(M, K)`` activations; q: uint8 ``(K, N)`` codes; scales, zeros: float32
    ``(K//group_size, N)`` (zeros are the integer zero points as floats, GPTQ ``qzeros + 1``);
    bias: float32 ``(N,)`` or None; group_size None = per-channel; unroll: the in-word order
    (:func:`chunk_order`); accumulators: partial sums per column (1, 2 or 4; see the module
    docstring). Inputs are not modified.
    """
    x, q, scales, zeros, bias, m, k, n, gs = _check(x, q, scales, zeros, bias, bits, group_size)
    na = _require_accumulators(accumulators)
    order = kernel_k_order(k, bits, unroll)
    qf = q.astype(np.float32)  # (K, N), exact
    y = np.broadcast_to(bias if bias is not None else np.float32(0), (m, n)).astype(np.float32)
    for g in range(k // gs):
        parts = [np.zeros((m, n), dtype=np.float32) for _ in range(na)]
        for i, kk in enumerate(order[g * gs:(g + 1) * gs]):
            a = i % na
            parts[a] = fma32(x[:, kk, None], qf[None, kk, :], parts[a])  # (M,1)*(1,N)+(M,N)
        acc = combine_partials(parts)
        r = np.zeros((m,), dtype=np.float32)
        for kk in range(g * gs, (g + 1) * gs):
            r = (r + x[:, kk]).astype(np.float32)
        t = fma32(-zeros[None, g, :], r[:, None], acc)
        y = fma32(t, scales[None, g, :], y)
    return y


def qgemv_oracle_reference(x: np.ndarray, q: np.ndarray, scales: np.ndarray, zeros: np.ndarray,
                           bias: np.ndarray | None, bits: int, group_size: int | None,
                           unroll: int = 2, accumulators: int = 1) -> np.ndarray:
    """Plain-loop twin of :func:`qgemv_oracle`, one scalar exact-rational fma at a time."""
    x, q, scales, zeros, bias, m, k, n, gs = _check(x, q, scales, zeros, bias, bits, group_size)
    na = _require_accumulators(accumulators)
    chunk = chunk_order(bits, unroll)
    p = len(chunk)
    out = np.zeros((m, n), dtype=np.float32)
    for b in range(m):
        for c in range(n):
            y = np.float32(bias[c]) if bias is not None else np.float32(0.0)
            for g in range(k // gs):
                part = [np.float32(0.0)] * na
                for k0 in range(g * gs, (g + 1) * gs, p):
                    for i, v in enumerate(chunk):  # P is a multiple of na: i % na == position % na
                        part[i % na] = fma32_reference(x[b, k0 + v], np.float32(q[k0 + v, c]), part[i % na])
                if na == 1:
                    acc = part[0]
                elif na == 2:
                    acc = np.float32(part[0] + part[1])
                else:
                    acc = np.float32(np.float32(part[0] + part[1]) + np.float32(part[2] + part[3]))
                r = np.float32(0.0)
                for kk in range(g * gs, (g + 1) * gs):
                    r = np.float32(r + x[b, kk])
                t = fma32_reference(-zeros[g, c], r, acc)
                y = fma32_reference(t, scales[g, c], y)
            out[b, c] = y
    return out


def error_bound(x: np.ndarray, q: np.ndarray, scales: np.ndarray, zeros: np.ndarray,
                bias: np.ndarray | None, group_size: int | None) -> np.ndarray:
    """Rigorous bound on ``|kernel - exact|`` per output, float64 ``(M, N)``.

    Every elementary term (``s*x*q``, ``s*z*x``, ``bias``) passes through at most
    ``L = gs + 1`` roundings in ``acc`` (or ``gs - 1`` adds in ``r`` plus the fnmadd),
    one in the fnmadd and ``G`` in the ``y`` chain, so with ``u = 2**-24`` the standard bound
    (Higham, Thm 3.1 / 4.3 style) is ``gamma_L * Σ|terms|`` with ``L = gs + G + 3`` and
    ``gamma_L = L*u / (1 - L*u)``.

    Valid for every ``accumulators`` A in (1, 2, 4): with A partial sums an ``x*q`` term sees
    ``gs/A`` roundings in its chain plus ``log2(A)`` in the combining tree, which is at most
    ``gs`` (gs >= 32), so the count above still bounds it; the ``r`` chain (``gs - 1`` adds,
    unchanged by A) then dominates, so the bound is not tightened for A > 1.
    """
    q = require_dtype("q", q, np.uint8)
    x, q, scales, zeros, bias, m, k, n, gs = _check(
        x, q, scales, zeros, bias, 4 if q.size == 0 or int(q.max()) > 7 else (3 if int(q.max()) > 3 else 2), group_size)
    groups = k // gs
    ll = gs + groups + 3
    u = 2.0 ** -24
    gamma = ll * u / (1 - ll * u)
    ax = np.abs(x.astype(np.float64)).reshape(m, groups, gs)  # (M, G, gs)
    qf = q.astype(np.float64).reshape(groups, gs, -1)  # (G, gs, N)
    xq = np.einsum("mgk,gkn->mgn", ax, qf)  # Σ|x| q per group
    xs = ax.sum(axis=2)  # (M, G)
    terms = np.abs(scales.astype(np.float64))[None] * (xq + np.abs(zeros.astype(np.float64))[None] * xs[:, :, None])
    total = terms.sum(axis=1)
    if bias is not None:
        total = total + np.abs(bias.astype(np.float64))[None, :]
    return gamma * total
