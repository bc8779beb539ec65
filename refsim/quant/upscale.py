"""Incremental upscaling (Any-Precision LLM sec. 4): seed model -> parent model, one bit at a time.

Every cluster of the b-bit model is split in two by a weighted 2-means over its own (sorted,
contiguous) range; the left child (smaller weights) gets code ``2c``, the right child ``2c + 1``.
The new bit is appended as the LSB, so ``code_parent >> (p - b)`` is the b-bit code and every
prefix of the parent is the intermediate model: the any-precision property, by construction.

Split of a cluster [a, e) of sorted positions (flash1dkmeans 0.2.5 ``numba_kmeans_1d_two_cluster``;
centroids computed in fp64, stored float32; range sums from the prefix sums of
:func:`refsim.quant.squeezellm.sort_rows`):

    empty (a == e)           both children copy the parent centroid, both empty at a
    size 1                   centroids (x_a, x_a), d = a + 1 (right child empty)
    size 2                   centroids (x_a, x_a+1), d = a + 1, whatever the weights
    range weight == 0        unweighted search: floor = a+1, ceiling = e-1 on cumsum(xs)
    one positive weight z    centroids (x_z, x_z), d = e (everything left)
    general                  floor = a + #leading zero weights + 1, ceiling = last positive
                             weight's position; bisect: d = (floor+ceiling)//2,
                             cL, cR = weighted means of [a,d), [d,e); m = (cL+cR)/2;
                             x[d-1] <= m <= x[d] -> stop (first Lloyd fixed point met);
                             x[d-1] <= m -> floor = d+1; else ceiling = max(floor, d-1).
                             Final d = (floor+ceiling)//2, centroids recomputed for it.

LUT of level b = the centroids produced at level b (the seed's for b = seed bits).

Deliberate differences from the official code: by default NumPy's stable argsort instead of
numba's quicksort (matters only for exactly tied weights; ``tie_order="numba"`` reproduces the
official order, see :mod:`refsim.quant.squeezellm`); the
unweighted search drops the official "left/right weight is zero" checks, which cannot fire there
because floor >= a+1 and ceiling <= e-1.  flash1dkmeans 0.1.4-0.2.3 (pinned by the official repo
2024-07..2025-07) returned the centroids of the *last bisection step* rather than of the final
split; refsim follows 0.2.5 (what ``>=0.2.3`` resolves to today).

Source: github:SNU-ARC/any-precision-llm @ a3257d02740cc5757c78673da534b0630ff3a4ea,
any_precision/quantization/quantize.py (``_upscale_group``, ``_increment_group``,
``_seed_and_upscale_layer``); PyPI flash1dkmeans 0.2.5 ``two_cluster.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refsim._validate import (require_fields, require_finite, require_float_array, require_int, require_integer_array,
                              require_ndim, require_shape)
from refsim.errors import FormatRuleError, ShapeError
from refsim.formats import bitplane
from refsim.quant.squeezellm import (
    SortedRows,
    _labels_from_borders,
    _qs,
    kmeans_1d_reference,
    kmeans_1d_rows,
    sort_rows,
)

__all__ = [
    "AnyPrecisionModel",
    "split_cluster_reference",
    "upscale_reference",
    "upscale_rows",
    "seed_and_upscale",
    "seed_and_upscale_reference",
]


@dataclass(frozen=True)
class AnyPrecisionModel:
    """A parent model and all its prefixes.

    codes   uint8 (K, N): p-bit parent codes (refsim's (K, N) convention; pack with
            ``bitplane.pack(np.ascontiguousarray(codes.T), p)``)
    luts    {b: float32 (N, 2**b)} for b = seed_bits..parent_bits (cast to float16 to ship)
    borders {b: int64 (N, 2**b + 1)} cluster ranges in each channel's sorted order
    """

    seed_bits: int
    parent_bits: int
    codes: np.ndarray
    luts: dict
    borders: dict

    def __post_init__(self):
        require_fields(self)  # Python ints and a plain native array, whatever came in
        _check_bits(self.seed_bits, self.parent_bits)
        levels = list(range(self.seed_bits, self.parent_bits + 1))
        for name in ("luts", "borders"):
            table = getattr(self, name)
            if not isinstance(table, dict) or set(table) != set(levels):
                raise FormatRuleError(f"{name}: must be a dict with one entry per bit-width {levels}; got "
                                      f"{list(table) if isinstance(table, dict) else type(table).__name__}")

    def codes_at(self, bits: int) -> np.ndarray:
        """uint8 (K, N): the b-bit prefix codes ``codes >> (p - b)``."""
        if bits not in self.luts:
            raise FormatRuleError(f"bits: must be in {sorted(self.luts)}; got {bits!r}")
        return self.codes >> np.uint8(self.parent_bits - bits)

    def dequantize(self, bits: int) -> np.ndarray:
        """float32 (K, N): the b-bit model ``luts[b][n, codes_at(b)[k, n]]``."""
        c = self.codes_at(bits)
        return np.take_along_axis(self.luts[bits], c.T.astype(np.intp), axis=1).T

    def packed(self) -> tuple[np.ndarray, dict]:
        """What the official ``pack.py`` stores for this layer: ``qweight`` int32
        (p, N, K // 32) (K a multiple of 32) and ``{b: lut float16 (N, 2**b)}``, the float32
        LUTs cast to float16 as the official ``_save_results`` does."""
        qweight = bitplane.pack(np.ascontiguousarray(self.codes.T), self.parent_bits)
        return qweight, {b: lut.astype(np.float16) for b, lut in self.luts.items()}


# ---------------------------------------------------------------- plain per-cluster reference
def _bisect_split(xs, mean, a: int, e: int, lo: int, hi: int) -> tuple[np.float32, np.float32, int]:
    """Binary search for the border d in [lo, hi] where the midpoint of the two cluster means
    ``mean(a, d)`` and ``mean(d, e)`` falls between xs[d-1] and xs[d]; returns (cL, cR, d)."""
    while lo < hi:
        d = (lo + hi) // 2
        m = (mean(a, d) + mean(d, e)) / 2
        if xs[d - 1] <= m:
            if m <= xs[d]:
                break
            lo = d + 1
        else:
            hi = max(lo, d - 1)
    d = (lo + hi) // 2
    return np.float32(mean(a, d)), np.float32(mean(d, e)), d


def split_cluster_reference(xs, Pw, Pwx, a: int, e: int) -> tuple[np.float32, np.float32, int]:
    """Split sorted positions [a, e) (e > a) into [a, d), [d, e): returns (cL, cR, d)."""
    xs, Pw, Pwx = _check_channel(xs, Pw, Pwx)
    a, e = require_int("a", a, minimum=0), require_int("e", e, minimum=1)
    if not a < e <= xs.size:
        raise FormatRuleError(f"a, e: need 0 <= a < e <= {xs.size} (a non-empty range of the channel); got a={a}, e={e}")
    size = e - a
    if size == 1:
        return xs[a], xs[a], a + 1
    if size == 2:
        return xs[a], xs[a + 1], a + 1
    total = _qs(Pw, a, e)
    if total == 0:  # no sensitivity in the cluster: plain (unweighted) means
        X = np.cumsum(xs.astype(np.float64))
        return _bisect_split(xs, lambda i, j: _qs(X, i, j) / (j - i), a, e, a + 1, e - 1)
    within = Pw[a:e]
    f = int(np.searchsorted(within, within[-1], side="left"))
    if total == _qs(Pw, a + f, a + f + 1):
        return xs[a + f], xs[a + f], e
    preceding = Pw[a - 1] if a > 0 else 0.0
    lo = a + int(np.searchsorted(within, preceding, side="right")) + 1
    return _bisect_split(xs, lambda i, j: _qs(Pwx, i, j) / _qs(Pw, i, j), a, e, lo, a + f)


def upscale_reference(xs, Pw, Pwx, lut, borders, parent_bits: int):
    """One channel: from a seed (lut float32 (2**s,), borders (2**s + 1,)) to parent_bits.
    Returns ({b: lut_b}, {b: borders_b}) for b = s..parent_bits."""
    xs, Pw, Pwx = _check_channel(xs, Pw, Pwx)
    lut = require_float_array("lut", lut)
    require_ndim("lut", lut, 1)
    s, parent_bits = _check_levels(len(lut), parent_bits)
    borders = require_integer_array("borders", borders)
    require_shape("borders", borders, (lut.size + 1,))
    _check_borders(borders[None], xs.size)
    luts, bords = {s: np.asarray(lut, np.float32)}, {s: np.asarray(borders, np.int64)}
    for b in range(s, parent_bits):
        old_c, old_b = luts[b], bords[b]
        new_c = np.empty(2 << b, dtype=np.float32)
        new_b = np.empty((2 << b) + 1, dtype=np.int64)
        for c in range(1 << b):
            a, e = int(old_b[c]), int(old_b[c + 1])
            if a == e:
                new_c[2 * c] = new_c[2 * c + 1] = old_c[c]
                new_b[2 * c] = new_b[2 * c + 1] = a
                continue
            cl, cr, d = split_cluster_reference(xs, Pw, Pwx, a, e)
            new_c[2 * c], new_c[2 * c + 1] = cl, cr
            new_b[2 * c], new_b[2 * c + 1] = a, d
        new_b[-1] = old_b[-1]
        luts[b + 1], bords[b + 1] = new_c, new_b
    return luts, bords


# ---------------------------------------------------------------- vectorised over all clusters
class _Steps:
    """Where each channel's weight prefix sum strictly increases, precomputed once per layer.

    ``inc[p] = Pw[p] > Pw[p-1]`` (``Pw[p] > 0`` at a row start).  ``prev[p]`` = last q <= p with
    inc[q] (-1 if none), ``next[p]`` = first q >= p with inc[q] (K if none), row-local int32.
    They replace the official code's two ``searchsorted`` calls per cluster exactly:
    ``searchsorted(Pw[a:e], Pw[e-1], 'left') = prev[e-1] - a`` (0 if prev[e-1] < a) and
    ``searchsorted(Pw[a:e], Pw[a-1] or 0, 'right') = min(next[a], e) - a``, because Pw is
    nondecreasing and compares strictly greater exactly at the positions in inc.
    """

    def __init__(self, Pw: np.ndarray):
        n, k = Pw.shape
        inc = np.empty((n, k), dtype=bool)
        inc[:, 0] = Pw[:, 0] > 0
        np.greater(Pw[:, 1:], Pw[:, :-1], out=inc[:, 1:])
        pos = np.arange(k, dtype=np.int32)[None, :]
        self.prev = np.maximum.accumulate(np.where(inc, pos, np.int32(-1)), axis=1).reshape(-1)
        rev = np.where(inc, pos, np.int32(k))[:, ::-1]
        self.next = np.minimum.accumulate(rev, axis=1)[:, ::-1].reshape(-1)


def _qs_sub(P: np.ndarray, a: np.ndarray, b: np.ndarray, b0: np.ndarray) -> np.ndarray:
    """Range sums over row-local [a, b) (b > a) of a flattened prefix-sum array whose rows start
    at flat offsets b0: ``P[b0+b-1] - P[b0+a-1]`` (``P[b0+b-1]`` when a == 0), as ``_qs``."""
    hi = P[b0 + b - 1]
    return np.where(a > 0, hi - P[b0 + np.maximum(a, 1) - 1], hi)


def _split_all(s: SortedRows, R: np.ndarray, A: np.ndarray, E: np.ndarray, lazy: dict):
    """Vectorised :func:`split_cluster_reference` for clusters (R[i], [A[i], E[i])), E > A."""
    n, k = s.xs.shape
    xs = s.xs.reshape(-1)
    Pw, Pwx = s.Pw.reshape(-1), s.Pwx.reshape(-1)
    base = R * k  # flat offset of each cluster's row

    cl = np.empty(len(A), dtype=np.float32)
    cr = np.empty(len(A), dtype=np.float32)
    d = np.empty(len(A), dtype=np.int64)
    size = E - A
    small = size <= 2
    cl[small] = xs[base[small] + A[small]]
    cr[small] = xs[base[small] + A[small] + (size[small] == 2)]
    d[small] = A[small] + 1
    big = ~small
    total = np.zeros(len(A))
    total[big] = _qs_sub(Pw, A[big], E[big], base[big])
    zero = big & (total == 0)
    weighted = big & ~zero

    def bisect(idx, lo, hi, P_w, P_x, unit):
        a, e, b0 = A[idx], E[idx], base[idx]
        # the range ends are fixed per cluster: gather P[a-1] and P[e-1] once, then each step
        # needs only P[d-1]; left = P[d-1] - P[a-1] (P[d-1] when a == 0), right = P[e-1] - P[d-1]
        first = a == 0
        xa = P_x[b0 + np.maximum(a, 1) - 1]
        xe = P_x[b0 + e - 1]
        if not unit:
            wa = P_w[b0 + np.maximum(a, 1) - 1]
            we = P_w[b0 + e - 1]

        def centroids(ia, dd):
            xd = P_x[b0[ia] + dd - 1]
            left_x = np.where(first[ia], xd, xd - xa[ia])
            if unit:
                lw, rw = (dd - a[ia]).astype(np.float64), (e[ia] - dd).astype(np.float64)
            else:
                wd = P_w[b0[ia] + dd - 1]
                lw, rw = np.where(first[ia], wd, wd - wa[ia]), we[ia] - wd
            return left_x / lw, (xe[ia] - xd) / rw

        act = np.flatnonzero(lo < hi)
        while act.size:
            dd = (lo[act] + hi[act]) // 2
            cl_, cr_ = centroids(act, dd)
            m = (cl_ + cr_) / 2
            c1 = xs[b0[act] + dd - 1] <= m
            c2 = m <= xs[b0[act] + dd]
            up = c1 & ~c2
            down = ~c1
            lo[act[up]] = dd[up] + 1
            hi[act[down]] = np.maximum(lo[act[down]], dd[down] - 1)
            act = act[(up | down) & (lo[act] < hi[act])]  # stop = c1 & c2 leaves the loop
        dd = (lo + hi) // 2
        cl_, cr_ = centroids(np.arange(len(idx)), dd)
        return cl_.astype(np.float32), cr_.astype(np.float32), dd

    if zero.any():
        iz = np.flatnonzero(zero)
        if "X" not in lazy:  # prefix sums of the plain weights, only when some cluster needs them
            lazy["X"] = np.cumsum(s.xs, axis=1, dtype=np.float64).reshape(-1)
        cl[iz], cr[iz], d[iz] = bisect(iz, A[iz] + 1, E[iz] - 1, None, lazy["X"], True)
    if weighted.any():
        iw = np.flatnonzero(weighted)
        a, e, b0 = A[iw], E[iw], base[iw]
        if "steps" not in lazy:
            lazy["steps"] = _Steps(s.Pw)
        steps = lazy["steps"]
        last_inc = steps.prev[b0 + e - 1]
        f = np.where(last_inc >= a, last_inc, a).astype(np.int64)  # row-local: a + searchsorted
        one = total[iw] == _qs_sub(Pw, f, f + 1, b0)  # one positive weight (at f)
        io = iw[one]
        cl[io] = cr[io] = xs[b0[one] + f[one]]
        d[io] = E[io]
        ig = iw[~one]
        if ig.size:
            a, e, b0, f = A[ig], E[ig], base[ig], f[~one]
            first_inc = np.minimum(steps.next[b0 + a], e).astype(np.int64)  # a + #leading zeros
            cl[ig], cr[ig], d[ig] = bisect(ig, first_inc + 1, f.copy(), Pw, Pwx, False)
    return cl, cr, d


def upscale_rows(s: SortedRows, lut: np.ndarray, borders: np.ndarray, parent_bits: int):
    """:func:`upscale_reference` for every channel at once: lut float32 (N, 2**s), borders int64
    (N, 2**s + 1) -> ({b: float32 (N, 2**b)}, {b: int64 (N, 2**b + 1)})."""
    if not isinstance(s, SortedRows):
        raise FormatRuleError(f"s: must be a SortedRows (from sort_rows); got {type(s).__name__}")
    lut = require_float_array("lut", lut)
    require_ndim("lut", lut, 2)
    sb, parent_bits = _check_levels(lut.shape[1], parent_bits)
    n, k = s.xs.shape
    require_shape("lut", lut, (n, lut.shape[1]))
    borders = require_integer_array("borders", borders)
    require_shape("borders", borders, (n, lut.shape[1] + 1))
    _check_borders(borders, k)
    luts, bords = {sb: lut.astype(np.float32)}, {sb: borders.astype(np.int64)}
    lazy: dict = {}  # precomputations shared by all levels, made on first use
    for b in range(sb, parent_bits):
        old_c, old_b = luts[b], bords[b]
        A, E = old_b[:, :-1], old_b[:, 1:]  # (N, 2^b)
        new_c = np.repeat(old_c, 2, axis=1)  # empty clusters: both children copy the parent
        new_b = np.repeat(A, 2, axis=1)  # (N, 2^(b+1)): left child starts at a, right at a (empty)
        R, C = np.nonzero(A != E)
        cl, cr, d = _split_all(s, R, A[R, C], E[R, C], lazy)
        new_c[R, 2 * C], new_c[R, 2 * C + 1] = cl, cr
        new_b[R, 2 * C + 1] = d
        luts[b + 1] = new_c
        bords[b + 1] = np.concatenate([new_b, old_b[:, -1:]], axis=1)
    return luts, bords


def _check_channel(xs, Pw, Pwx) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One channel of the plain twins: sorted weights xs float (K,), inclusive prefix sums Pw and
    Pwx float (K,), all finite."""
    xs = require_float_array("xs", xs)
    require_ndim("xs", xs, 1)
    if xs.size == 0:
        raise ShapeError("xs: a channel needs at least one weight; got 0")
    for name, v in (("Pw", Pw), ("Pwx", Pwx)):
        require_shape(name, require_float_array(name, v), xs.shape)
    for name, v in (("xs", xs), ("Pw", Pw), ("Pwx", Pwx)):
        require_finite(name, v)
    return xs, Pw, Pwx


def _check_borders(borders: np.ndarray, k: int) -> None:
    """Each row of ``borders`` (N, 2**s + 1) must rise from 0 to K: cluster ranges of a sorted channel."""
    if borders.size and ((borders[:, 0] != 0).any() or (borders[:, -1] != k).any()
                         or (np.diff(borders, axis=1) < 0).any()):
        bad = int(np.argmax((borders[:, 0] != 0) | (borders[:, -1] != k) | (np.diff(borders, axis=1) < 0).any(axis=1)))
        raise FormatRuleError(f"borders: must rise from 0 to {k} (cluster boundaries of the sorted channel); "
                              f"got {borders[bad].tolist()[:10]} in row {bad}")


def _check_levels(lut_len: int, parent_bits) -> tuple[int, int]:
    """The one check of :func:`upscale_rows` and :func:`upscale_reference`: the seed table has
    2**s entries (1 <= s) and ``s <= parent_bits <= 8`` (uint8 codes; also bounds the work)."""
    s = int(lut_len).bit_length() - 1
    if lut_len < 2 or (1 << s) != lut_len:
        raise ShapeError(f"lut: must have 2**s >= 2 entries per channel; got {lut_len}")
    return _check_bits(s, parent_bits)


def _check_bits(seed_bits, parent_bits):
    seed_bits = require_int("seed_bits", seed_bits, minimum=1)
    parent_bits = require_int("parent_bits", parent_bits, minimum=1)
    if not seed_bits <= parent_bits <= 8:
        raise FormatRuleError(
            f"parent_bits: must satisfy seed_bits ({seed_bits}) <= parent_bits <= 8 (uint8 codes); "
            f"got {parent_bits}")
    return seed_bits, parent_bits


def seed_and_upscale(W: np.ndarray, G: np.ndarray, seed_bits: int = 3, parent_bits: int = 8, *,
                     random_state: int = 0, max_iter: int = 50,
                     tie_order: str = "stable") -> AnyPrecisionModel:
    """The official pipeline: per output channel, seed k-means (2**seed_bits clusters) then
    incremental upscaling to parent_bits.  W, G float (K, N); G >= 0 the Fisher diagonal.
    Deterministic for a given ``random_state``; ``tie_order="numba"`` reproduces the official
    order of equal weights (see :func:`refsim.quant.squeezellm.sort_rows`); inputs are not
    modified."""
    seed_bits, parent_bits = _check_bits(seed_bits, parent_bits)
    random_state = require_int("random_state", random_state, minimum=0)
    s = sort_rows(W, G, tie_order)
    lut, borders = kmeans_1d_rows(s, 1 << seed_bits, max_iter, random_state)
    luts, bords = upscale_rows(s, lut, borders, parent_bits)
    codes = _labels_from_borders(bords[parent_bits], s.order)
    return AnyPrecisionModel(seed_bits, parent_bits, codes, luts, bords)


def seed_and_upscale_reference(W: np.ndarray, G: np.ndarray, seed_bits: int = 3,
                               parent_bits: int = 8, *, random_state: int = 0,
                               max_iter: int = 50, tie_order: str = "stable") -> AnyPrecisionModel:
    """Plain per-channel twin of :func:`seed_and_upscale` (slow; small shapes)."""
    seed_bits, parent_bits = _check_bits(seed_bits, parent_bits)
    random_state = require_int("random_state", random_state, minimum=0)
    s = sort_rows(W, G, tie_order)
    n = s.xs.shape[0]
    luts = {b: np.empty((n, 1 << b), np.float32) for b in range(seed_bits, parent_bits + 1)}
    bords = {b: np.empty((n, (1 << b) + 1), np.int64) for b in luts}
    for r in range(n):
        c, bo = kmeans_1d_reference(s.xs[r], s.Pw[r], s.Pwx[r], s.Pwxx[r], 1 << seed_bits,
                                    max_iter, random_state)
        lr, br = upscale_reference(s.xs[r], s.Pw[r], s.Pwx[r], c, bo, parent_bits)
        for b in luts:
            luts[b][r], bords[b][r] = lr[b], br[b]
    codes = _labels_from_borders(bords[parent_bits], s.order)
    return AnyPrecisionModel(seed_bits, parent_bits, codes, luts, bords)
