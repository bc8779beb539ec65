"""Warp-level emulation of the Any-Precision LLM fused GEMV (``matmul_kbit_32``): its fp16 bits.

The kernel oracle (what the CUDA code writes), on the launch plan of
:mod:`refsim.formats.anyprec_plan` and the bitplane format of :mod:`refsim.formats.bitplane`.

Spec
----
computes        O (M, N) float16 = x (M, K) float16 @ W.T with W[r, k] = lut[r, code[r, k]],
                codes from the bitplane format (``qweight`` int32 (p, N, K/32), first ``bits`` planes;
                :mod:`refsim.formats.bitplane`), lut float16 (N, 2**bits); 1 <= M <= 8.
dataflow        per output row r, batch row l, lane t (SNU-ARC/any-precision-llm ``matmul.cuh``):
                1. for each 1024-weight chunk i of its slice — every chunk of K without a K-split —
                   (tail chunk: only lanes t < eff = (K % 1024)/32):
                   ``sum = half2(0, 0)``; for j = 3, 2, 1, 0 and s = 0..3:
                   ``sum = __hfma2(dq_w[4j + s], x_pair, sum)`` — two independent fp16 chains
                   (even / odd element of each pair), each step one fused rounding;
                   the pair (k0, k1) is :func:`refsim.formats.anyprec_plan.activation_index`;
                2. ``partial = __hadd(partial, __hadd(sum.x, sum.y))`` (fp16, RN);
                3. ``warp_reduce_sum``: for d = 16, 8, 4, 2, 1: ``v = __hadd(v, __shfl_down(v, d))``
                   (a lane whose source l + d >= 32 reads its own value); lane 0 writes O[l, r].
                The lookup path (scalar table or half2 pair table) changes only where a weight
                comes from, not its value, so it is not modelled.
K-split         (M == 1, K > 4096, bits >= 7 on non-Orin GPUs: ksplit = ceil(K / 4096) slices of 4 chunks)
                each slice's lane-0 total is added with fp16 ``atomicAdd`` into a zeroed shared
                accumulator, in an order the hardware does not fix (on an H100 the official kernel
                differed from slice order in 5 of 16 outputs, 1 ulp each). :func:`anyprec_gemv`
                raises unless ``ksplit_order`` gives the order to assume ("ascending" or a
                permutation of the slices); :func:`anyprec_gemv_admissible` gives every order's result
                (ksplit! orders, element by element), or above ``max_orders`` a proven interval.
oracle          :func:`anyprec_gemv_reference`: one (l, r) at a time, every fp16 fma through the
                exact rational oracle (:func:`refsim.arith.fp.fma_reference`); the official kernel
                (:mod:`refsim.cuda.official_anyprec`) on every branch of the plan; :func:`error_bound`,
                a derived bound around the exact product.
NaN             overflowing partial sums (+Inf + -Inf) give the canonical NaN 0x7FFF, as the GPU writes.
paths           :func:`anyprec_gemv` runs the compiled kernel
                :func:`refsim.native.emulators.anyprec_gemv` when a C compiler is present (measured:
                M = 8, N = K = 4096 in ~0.2 s CPU instead of ~2 s), else the vectorised NumPy
                emulation below (``native=False``, the readable form); the two are tested bit-equal.
source          SNU-ARC/any-precision-llm ``any_precision/modules/kernels/matmul.cuh``
                (``matmul_kbit_32``, ``warp_reduce_sum``), commit 45574cdc1a1ca8ca34d23c192dc2025a1bc807df
                as stored in the search index.

The reduction tree of ``warp_reduce_sum`` (lane 0's result; shfl_down, width 32)::

    d=16: v0+v16  v1+v17 ... v15+v31  (lanes 16..31 add their own value: garbage, unused)
    d=8 : (v0+v16)+(v8+v24) ...
    ...   lane 0 = ((((v0+v16)+(v8+v24)) + ((v4+v20)+(v12+v28))) + ...)
"""

from __future__ import annotations

import functools
import math

import numpy as np
import threadpoolctl

from refsim._validate import MAX_ELEMENTS, native_contiguous, require_bounded, require_dtype, require_int, require_optional_bool
from refsim.arith import fp
from refsim.arith.admissible import DEFAULT_MAX_ORDERS, AdmissibleSet, fold_orders
from refsim.errors import FormatRuleError, ShapeError
from refsim.formats import anyprec_plan as ak
from refsim.formats import bitplane

__all__ = ["anyprec_gemv", "anyprec_gemv_admissible", "anyprec_gemv_reference", "error_bound", "lane_indices",
           "warp_reduce_sum", "warp_reduce_sum_reference"]

_CHUNK = 1024


def lane_indices(k: int) -> tuple[np.ndarray, np.ndarray]:
    """(k0, k1) int64 (chunks, 32 lanes, 16 steps) of the fma steps in kernel order, and the active
    mask bool (chunks, 32) (tail-chunk lanes t >= eff break out). Step order: j = 3..0, then s.
    ``k``: a positive multiple of 32 (the kernel's rule), at most the int32 index limit."""
    k = require_bounded("K", require_int("K", k, minimum=1), MAX_ELEMENTS)
    if k % 32:
        raise ShapeError(f"K: must be a positive multiple of 32; got {k}")
    chunks = -(-k // _CHUNK)
    k0 = np.zeros((chunks, 32, 16), np.int64)
    k1 = np.zeros((chunks, 32, 16), np.int64)
    active = np.zeros((chunks, 32), bool)
    eff_tail = (k % _CHUNK) // 32
    for i in range(chunks):
        eff = 32 if i < k // _CHUNK else eff_tail
        for t in range(eff):
            active[i, t] = True
            for step, (j, s) in enumerate((j, s) for j in (3, 2, 1, 0) for s in range(4)):
                k0[i, t, step], k1[i, t, step] = ak.activation_index(k, i, t, j, s)
    return k0, k1, active


@functools.lru_cache(maxsize=8)
def _lane_indices_cached(k: int):
    """:func:`lane_indices` memoised per K (read-only arrays; the table costs ~2 ms per 1024 of K)."""
    out = lane_indices(k)
    for a in out:
        a.setflags(write=False)
    return out


def warp_reduce_sum(v: np.ndarray) -> np.ndarray:
    """``warp_reduce_sum`` over the last axis (32 lanes) of fp16 ``v``: lane 0's result, shape v.shape[:-1].
    NaN/Inf lanes propagate as fp16 addition does."""
    v = _require_lanes(v)
    lanes = np.arange(32)
    for d in (16, 8, 4, 2, 1):
        src = np.where(lanes + d < 32, lanes + d, lanes)  # shfl_down: out-of-range reads itself
        v = fp.f16_add(v, v[..., src])
    return v[..., 0]


def warp_reduce_sum_reference(v: np.ndarray) -> np.float16:
    """Plain loop for one warp (v float16 (32,)): every lane's register, step by step."""
    v = _require_lanes(v, one_warp=True)
    regs = [np.float16(x) for x in v]
    for d in (16, 8, 4, 2, 1):
        regs = [np.float16(regs[l] + (regs[l + d] if l + d < 32 else regs[l])) for l in range(32)]
    return regs[0]


def _require_lanes(v, one_warp: bool = False) -> np.ndarray:
    """The check :func:`warp_reduce_sum` and its twin share: float16, last axis the 32 lanes
    (the twin: exactly one warp, shape (32,))."""
    v = require_dtype("v", v, np.float16)
    if v.ndim < 1 or v.shape[-1] != 32 or (one_warp and v.ndim != 1):
        want = "(32,)" if one_warp else "(..., 32)"
        raise ShapeError(f"v: shape must be {want} (the warp's 32 lanes); got {v.shape}")
    return v


def _check(x, qweight, lut, bits, lookup: bool = True):
    """Checked inputs: (x, W, lut, plan, M, N, K) with W float16 (N, K) the looked-up weights, or
    with ``lookup=False`` the codes uint8 (N, K) in W's place; arrays in native byte order."""
    x, qweight, lut, m, n, k, bits = ak.checked_inputs(x, qweight, lut, bits)
    plan = ak.plan(m, n, k, bits)
    codes = bitplane.unpack(qweight[:bits])                    # (N, K) uint8
    if not lookup:
        return x, codes, lut, plan, m, n, k
    W = np.take_along_axis(lut, codes.astype(np.int64), axis=1)  # (N, K) fp16 weights
    return x, W, lut, plan, m, n, k


def anyprec_gemv(x: np.ndarray, qweight: np.ndarray, lut: np.ndarray, bits: int,
                 ksplit_order: str | None = None, *, native: bool | None = None) -> np.ndarray:
    """What ``matmul_kbit_32`` writes: float16 (M, N), bit for bit (see the module spec).

    x: float16 (M, K), 1 <= M <= 8, finite; qweight: int32 (p, N, K/32) bitplanes; lut: float16
    (N, 2**bits); bits 3..8. K-split launches (M == 1, K > 4096, bits >= 7) need
    ``ksplit_order="ascending"`` (assume the atomicAdds land in slice order 0, 1, ...).
    native: None = the compiled kernel of :mod:`refsim.native.emulators` when it is available, else
    the NumPy emulation below (the readable form; same bits, tested); True / False force one.
    """
    bits = require_int("bits", bits, minimum=1)
    from refsim.native import emulators as nat

    native = require_optional_bool("native", native)
    use_native = nat.available() if native is None else native
    x, W, lut, plan, m, n, k = _check(x, qweight, lut, bits, lookup=not use_native)   # native: W = codes
    order = _ksplit_order(plan.ksplit, ksplit_order)
    k0, k1, active = _lane_indices_cached(k)
    if use_native and order == tuple(range(plan.ksplit)):
        return nat.anyprec_gemv(W, lut, x, k0, k1, plan.ksplit)
    if use_native:
        x, W, lut, plan, m, n, k = _check(x, qweight, lut, bits)
    totals = _slice_totals(x, W, plan, m, n, k0, k1, active)
    if len(totals) == 1:
        return totals[0]
    acc = np.zeros_like(totals[0])  # shO starts at 0, then atomicAdd per slice (fp16 add)
    for z in order:
        acc = fp.f16_add(acc, totals[z])
    return acc


def _ksplit_order(ksplit: int, ksplit_order) -> tuple:
    if ksplit == 1:
        return (0,)
    if ksplit_order == "ascending":
        return tuple(range(ksplit))
    if (isinstance(ksplit_order, tuple) and all(isinstance(z, (int, np.integer)) for z in ksplit_order)
            and sorted(int(z) for z in ksplit_order) == list(range(ksplit))):
        return tuple(int(z) for z in ksplit_order)
    raise FormatRuleError(
        f"ksplit_order: this launch splits K into {ksplit} slices combined by fp16 atomicAdd "
        f"in hardware order; pass 'ascending', a permutation of range({ksplit}), or use "
        f"anyprec_gemv_admissible for every order; got {ksplit_order!r}")


def _slices(plan, chunks: int) -> list[range]:
    """The chunks each K-split slice sums: one slice of every chunk without a K-split, else
    ceil(K / 4096) slices of 4 chunks (block z of the official launch: chunks 4z .. 4z + 3)."""
    if plan.ksplit == 1:
        return [range(chunks)]
    return [range(z * 4, min(z * 4 + 4, chunks)) for z in range(plan.ksplit)]


def _slice_totals(x, W, plan, m, n, k0, k1, active) -> list:
    """Each K-split slice's lane-0 total, float16 (M, N), in slice order (one slice: the output)."""
    xh = x
    slices = _slices(plan, k0.shape[0])
    totals = []
    for chunks in slices:
        partial = np.zeros((m, n, 32), np.float16)                    # per batch row, row, lane
        for i in chunks:
            sx = np.zeros((m, n, 32), np.float16)
            sy = np.zeros((m, n, 32), np.float16)
            for step in range(16):
                wa, wb = W[:, k0[i, :, step]], W[:, k1[i, :, step]]   # (N, 32)
                xa, xb = xh[:, k0[i, :, step]], xh[:, k1[i, :, step]]  # (M, 32)
                sx = fp.f16_fma(wa[None], xa[:, None], sx, fused=True)
                sy = fp.f16_fma(wb[None], xb[:, None], sy, fused=True)
            upd = fp.f16_add(partial, fp.f16_add(sx, sy))
            partial = np.where(active[i][None, None, :], upd, partial)  # broken-out lanes keep theirs
        totals.append(warp_reduce_sum(partial))                        # (M, N)
    return totals


def anyprec_gemv_admissible(x: np.ndarray, qweight: np.ndarray, lut: np.ndarray, bits: int, *,
                            max_orders: int = DEFAULT_MAX_ORDERS):
    """Every output the kernel may write: a :class:`refsim.arith.admissible.AdmissibleSet`.

    Same inputs as :func:`anyprec_gemv`. Without a K-split the set has one member (the kernel is
    deterministic). With ksplit slices: element by element, the fp16 fold 0 (+) t_z0 (+) t_z1 ...
    of the slice totals t in each of the ksplit! orders (each output element is its own shared
    accumulator, so the orders of different elements are independent). When ksplit! > max_orders
    the set is the interval S +/- gamma_(n-1) * sum |t_z| around the exact sum S (gamma_k = k u /
    (1 - k u), u = 2^-11: the error bound of n - 1 fp16 additions, which round to nearest and are
    exact below the normal range), widened to +/-inf where it passes the largest half, 65504.
    """
    x, W, lut, plan, m, n, k = _check(x, qweight, lut, require_int("bits", bits, minimum=1))
    max_orders = require_int("max_orders", max_orders, minimum=1)
    k0, k1, active = _lane_indices_cached(k)
    totals = _slice_totals(x, W, plan, m, n, k0, k1, active)
    if len(totals) == 1:
        return AdmissibleSet(totals[0], totals[0][None], 1, "one slice: deterministic")
    got = fold_orders(totals, fp.f16_add, np.zeros_like(totals[0]), max_orders=max_orders)
    if got is not None:
        return got
    t = np.stack(totals).astype(np.float64)                            # exact: fp16 in float64
    nz = len(totals)
    u = 2.0 ** -11
    gamma = (nz - 1) * u / (1 - (nz - 1) * u)
    exact = t.sum(axis=0)
    slack = gamma * np.abs(t).sum(axis=0)
    lo, hi = exact - slack, exact + slack
    lo = np.where(lo < -65504, -np.inf, lo)
    hi = np.where(hi > 65504, np.inf, hi)
    ref = anyprec_gemv(x, qweight, lut, bits, "ascending")
    return AdmissibleSet(ref, None, math.factorial(nz),
                         f"|d - S| <= gamma_{nz - 1} * sum|t| for {nz} fp16 additions", lo, hi)


def error_bound(x: np.ndarray, qweight: np.ndarray, lut: np.ndarray, bits: int) -> tuple[np.ndarray, np.ndarray]:
    """The exact product and a derived bound on how far any output of this dataflow may lie from it:
    ``(S, B)``, float64 (M, N) each, with every finite output y of the kernel (any K-split order)
    satisfying ``|y - S| <= B`` — so a bug the emulator and a kernel share is still caught.

    Same inputs as :func:`anyprec_gemv`. Derivation (Higham, *Accuracy and Stability of Numerical
    Algorithms*, Lemma 3.1): the products w x of two fp16 values are exact; a term entering a chain
    passes at most 16 fused fmas, the ``sum.x + sum.y`` add, one ``partial +=`` per chunk of its slice
    (at most ``chunks``), the 5 adds of the shuffle tree and, with a K-split, ``ksplit`` atomic adds:
    ``d = 22 + chunks + ksplit`` roundings of unit ``u = 2^-11``, so the relative part is
    ``gamma_d P`` with ``P = sum |w x|`` and ``gamma_d = (1 + u)^d - 1``. A rounding whose result is
    an fp16 subnormal errs by up to ``eta = 2^-25`` absolutely; one output passes fewer than
    ``2 K + 64 + ksplit`` roundings, each counted once. S and P are float64 sums of exact products
    (canonical copies before BLAS), off by at most ``gamma_K(2^-53) P``, which B adds. Meaningful
    only while no partial sum overflows (B is reported regardless; an output of +-inf or NaN needs
    ``P + B >= 65520``).
    """
    x, W, _, plan, m, n, k = _check(x, qweight, lut, require_int("bits", bits, minimum=1))
    xd = native_contiguous(x.astype(np.float64))
    Wd = native_contiguous(W.astype(np.float64).T)
    with threadpoolctl.threadpool_limits(limits=1):     # small GEMMs: BLAS threads only contend
        S = xd @ Wd
        P = native_contiguous(np.abs(xd)) @ native_contiguous(np.abs(Wd))
    d = 22 + plan.chunks + plan.ksplit
    gamma = (1 + 2.0**-11) ** d - 1
    gamma64 = k * 2.0**-53 / (1 - k * 2.0**-53)
    B = (gamma + gamma64) * P + (2 * k + 64 + plan.ksplit) * 2.0**-25
    return S, B


def anyprec_gemv_reference(x: np.ndarray, qweight: np.ndarray, lut: np.ndarray, bits: int) -> np.ndarray:
    """Plain-loop twin of :func:`anyprec_gemv` (no K-split): per (l, r), per lane, the two fp16
    chains with exact-rational fused fmas, the partial adds, then the shuffle tree."""
    x, W, _, plan, m, n, k = _check(x, qweight, lut, bits)
    if plan.ksplit > 1:
        raise FormatRuleError("anyprec_gemv_reference: the K-split path is not modelled")
    chunks = -(-k // _CHUNK)
    O = np.empty((m, n), np.float16)
    fma = fp.fma_reference_scalar
    for l in range(m):
        for r in range(n):
            lanes = []
            for t in range(32):
                partial = np.float16(0.0)
                for i in range(chunks):
                    eff = 32 if i < k // _CHUNK else (k % _CHUNK) // 32
                    if t >= eff:
                        break
                    sx = sy = np.float16(0.0)
                    for j in (3, 2, 1, 0):
                        for s in range(4):
                            a, b = ak.activation_index(k, i, t, j, s)
                            sx = fma(W[r, a], x[l, a], sx)
                            sy = fma(W[r, b], x[l, b], sy)
                    partial = np.float16(partial + np.float16(sx + sy))
                lanes.append(partial)
            O[l, r] = warp_reduce_sum_reference(np.array(lanes, np.float16))
    return O
