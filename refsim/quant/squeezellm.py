"""SqueezeLLM-style seed model: sensitivity-weighted 1-D k-means per output channel.

This is the seed step of Any-Precision LLM (paper sec. 4; official ``quantize.py``), which
replaces SqueezeLLM's ``sklearn.KMeans`` with a sorted 1-D k-means of the same k-means++ flavour
(flash1dkmeans).  For one output channel n with weights ``w = W[:, n]`` (length K) and Fisher
sensitivities ``g = G[:, n]``, minimise

    sum_k  g_k * (w_k - C[code_k])**2        C: 2**bits centroids, sorted ascending

Algorithm, line by line as flash1dkmeans 0.2.5 ``numba_kmeans_1d_k_cluster`` does it:

1. preprocess (official ``_seed_and_upscale_layer``): ``s = g * (w != 0)``; sort w ascending
   (``xs``, float32), permute s alike; fp64 inclusive prefix sums ``Pw = cumsum(s)``,
   ``Pwx = cumsum(xs*s)``, ``Pwxx = cumsum(xs*s*xs)``; if ``Pw[-1] == 0`` use unit weights
   (``Pw = 1..K``, ``Pwx = cumsum(xs)``, ``Pwxx = cumsum(xs**2)``).  Every range sum is
   ``P[b-1] - P[a-1]`` (``P[b-1]`` when a = 0): the sum over sorted positions [a, b).
2. greedy weighted k-means++: ``rng = RandomState(random_state)`` re-seeded for every channel;
   c0 = ``xs[searchsorted(Pw, u * Pw[-1], 'left')]`` with ``u = rng.random_sample()``; then for
   each new centroid draw ``2 + int(ln k)`` uniforms at once, turn each into a candidate by
   bisecting the prefix length whose inertia first reaches ``u * total inertia``, and keep the
   candidate with the smallest total inertia (first strict minimum).
3. Lloyd, at most ``max_iter = 50`` rounds: borders = ``searchsorted(xs, midpoints, 'left')``
   with float32 midpoints (a value equal to a midpoint goes up); stop when borders repeat;
   each non-empty cluster's centroid = ``Pwx/Pw`` over its range (fp64, stored float32), or the
   plain mean when its weight is 0; empty clusters keep their value.

Inertia of a cluster [a, b) with centroid c (fp64; c**2 in float32 as numba types
``float32 ** int``): ``Sxx - 2*c*Sx + c**2 * Sw``, summed over clusters in order.

Tie order: the official argsort is numba's (unstable) quicksort.  ``tie_order="numba"``
reproduces it (pure Python, only for channels with equal weights); the default ``"stable"``
uses NumPy's stable argsort, which differs only when a channel has exactly equal weights
(then the prefix-sum order, hence the last bits of centroids, can differ).

Deliberate differences from the official code (documented, see docs/formats/anyprec.md):
- the first Lloyd round compares against an uninitialised border array in the official code;
  refsim treats that comparison as "not equal" (what happens in practice).

Source: github:SNU-ARC/any-precision-llm @ a3257d02740cc5757c78673da534b0630ff3a4ea
any_precision/quantization/quantize.py (``_seed_and_upscale_layer``), and PyPI flash1dkmeans
0.2.5 ``k_cluster.py`` (``numba_kmeans_1d_k_cluster``, ``_kmeans_plusplus``,
``_rand_choice_centroids``, ``_centroids_to_cluster_borders``, ``_calculate_inertia``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refsim._validate import (
    require_bounded,
    require_fields,
    require_finite,
    require_float_array,
    require_int,
    require_integer_array,
    require_ndim,
    require_shape,
)
from refsim.errors import FormatRuleError, ShapeError

__all__ = [
    "SortedRows",
    "sort_rows",
    "numba_argsort",
    "TIE_ORDERS",
    "kmeans_1d_reference",
    "kmeans_1d_rows",
    "SeedResult",
    "seed",
    "seed_reference",
]


@dataclass(frozen=True)
class SortedRows:
    """Per-channel sorted weights and prefix sums (rows = output channels, length K).

    order int64 (N, K) (argsort of each channel), xs float32 (N, K) sorted weights, Pw / Pwx /
    Pwxx float64 (N, K) inclusive prefix sums of s, xs*s, xs*s*xs in sorted order.
    """

    order: np.ndarray
    xs: np.ndarray
    Pw: np.ndarray
    Pwx: np.ndarray
    Pwxx: np.ndarray

    def __post_init__(self):
        require_fields(self)  # plain native arrays (a zero-stride giant refused by its element count)
        xs = require_ndim("xs", require_float_array("xs", self.xs), 2)
        if xs.shape[0] < 1 or xs.shape[1] < 1:
            raise ShapeError(f"xs: must be (N >= 1, K >= 1); got {xs.shape}")
        require_shape("order", require_integer_array("order", self.order), xs.shape)
        for name in ("xs", "Pw", "Pwx", "Pwxx"):
            require_finite(name, require_shape(name, require_float_array(name, getattr(self, name)), xs.shape))


def _check_wg(W: np.ndarray, G: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    W = require_float_array("W", W)
    require_ndim("W", W, 2)
    require_finite("W", W)
    G = require_float_array("G", G)
    require_shape("G", G, W.shape)
    require_finite("G", G)
    if (G < 0).any():
        raise FormatRuleError(f"G: Fisher sensitivities must be >= 0; got min {float(G.min())!r}")
    if W.shape[0] < 1 or W.shape[1] < 1:
        raise FormatRuleError(f"W: K and N must be >= 1; got shape {W.shape}")
    return W, G


_SMALL = 15  # partitions with high - low < 15 are finished by insertion sort


def numba_argsort(x: np.ndarray) -> np.ndarray:
    """The permutation numba's ``np.argsort`` (its default quicksort) returns for finite x.

    x: float (K,), no NaN.  Returns int64 (K,).  Why: the official quantizer sorts with numba,
    whose quicksort orders *equal* values differently from NumPy's stable sort, and the order
    of ties changes the fp64 prefix sums.  The algorithm, as numba's ``misc/quicksort.py``
    behaves: an explicit stack of [low, high] ranges; while a range spans >= 16 elements,
    median-of-three of (low, mid, high) with mid = (low + high) >> 1, the pivot parked at high,
    two inward scans (i stops at a value >= pivot, j at a value <= pivot), swap and step both,
    pivot swapped into place at i; the larger side is pushed and the smaller side continues;
    short ranges are insertion-sorted (stable within the range).  Pure Python: slow.
    """
    x = require_float_array("x", x)
    require_ndim("x", x, 1)
    require_finite("x", x)
    require_bounded("x.size", x.size, 1 << 22, what="length for a pure-Python sort")
    vals = [float(v) for v in x]
    r = list(range(len(vals)))
    if len(r) < 2:
        return np.array(r, dtype=np.int64)
    stack = [(0, len(r) - 1)]
    while stack:
        low, high = stack.pop()
        while high - low >= _SMALL:
            mid = (low + high) >> 1
            if vals[r[mid]] < vals[r[low]]:
                r[low], r[mid] = r[mid], r[low]
            if vals[r[high]] < vals[r[mid]]:
                r[high], r[mid] = r[mid], r[high]
            if vals[r[mid]] < vals[r[low]]:
                r[low], r[mid] = r[mid], r[low]
            pivot = vals[r[mid]]
            r[high], r[mid] = r[mid], r[high]
            i, j = low, high - 1
            while True:
                while i < high and vals[r[i]] < pivot:
                    i += 1
                while j >= low and pivot < vals[r[j]]:
                    j -= 1
                if i >= j:
                    break
                r[i], r[j] = r[j], r[i]
                i += 1
                j -= 1
            r[i], r[high] = r[high], r[i]
            if high - i > i - low:  # right side larger: push it, continue left
                if high > i:
                    stack.append((i + 1, high))
                high = i - 1
            else:
                if i > low:
                    stack.append((low, i - 1))
                low = i + 1
        for a in range(low + 1, high + 1):  # insertion sort of r[low..high]
            key = r[a]
            b = a
            while b > low and vals[key] < vals[r[b - 1]]:
                r[b] = r[b - 1]
                b -= 1
            r[b] = key
    return np.array(r, dtype=np.int64)


TIE_ORDERS = ("stable", "numba")


def sort_rows(W: np.ndarray, G: np.ndarray, tie_order: str = "stable") -> SortedRows:
    """Preprocessing step 1 for every output channel.  W, G float (K, N); rows of the result are
    channels.  Weights are taken as float32 (what the official quantizer feeds numba).

    tie_order: ``"stable"`` (NumPy's stable argsort, fast) or ``"numba"`` (the official order of
    equal weights, :func:`numba_argsort`, applied only to channels that contain ties; slow).
    Both give the same permutation for channels without ties.
    """
    W, G = _check_wg(W, G)
    if not isinstance(tie_order, str) or tie_order not in TIE_ORDERS:
        raise FormatRuleError(f"tie_order: must be one of {list(TIE_ORDERS)}; got {tie_order!r}")
    X = np.ascontiguousarray(W.T, dtype=np.float32)  # (N, K): channel-major, like PyTorch
    S = np.ascontiguousarray(G.T, dtype=np.float32) * (X != 0)  # zero weights get no weight
    order = np.argsort(X, axis=1, kind="stable")
    if tie_order == "numba":
        sorted_x = np.take_along_axis(X, order, axis=1)
        for r in np.flatnonzero(np.any(sorted_x[:, 1:] == sorted_x[:, :-1], axis=1)):
            order[r] = numba_argsort(X[r])
    xs = np.take_along_axis(X, order, axis=1)
    ws = np.take_along_axis(S, order, axis=1).astype(np.float64)
    xs64 = xs.astype(np.float64)
    Pw = np.cumsum(ws, axis=1)
    wx = xs64 * ws
    Pwx = np.cumsum(wx, axis=1)
    Pwxx = np.cumsum(wx * xs64, axis=1)
    dead = Pw[:, -1] == 0  # all-zero sensitivity: unit weights
    if dead.any():
        k = X.shape[1]
        Pw[dead] = np.arange(1, k + 1, dtype=np.float64)
        Pwx[dead] = np.cumsum(xs64[dead], axis=1)
        Pwxx[dead] = np.cumsum(xs64[dead] ** 2, axis=1)
    return SortedRows(order, xs, Pw, Pwx, Pwxx)


# ---------------------------------------------------------------- plain per-channel reference
def _qs(P: np.ndarray, a: int, b: int) -> float:
    return P[b - 1] - P[a - 1] if a > 0 else P[b - 1]


def _borders_ref(xs: np.ndarray, c: np.ndarray) -> np.ndarray:
    mid = (c[:-1] + c[1:]) / np.float32(2)  # float32 midpoints
    return np.concatenate([[0], np.searchsorted(xs, mid, side="left"), [len(xs)]]).astype(np.int64)


def _inertia_ref(c, borders, Pw, Pwx, Pwxx, stop) -> float:
    inertia = 0.0
    for i in range(len(c)):
        a, b = int(borders[i]), int(borders[i + 1])
        if a >= stop:
            break
        b = min(b, stop)
        if a == b:
            continue
        c32 = np.float32(c[i])
        inertia += (_qs(Pwxx, a, b) - 2.0 * float(c32) * _qs(Pwx, a, b)
                    + float(c32 * c32) * _qs(Pw, a, b))
    return inertia


def _zero_weight_mean(xs_slice: np.ndarray) -> np.float32:
    """numba's ``float32_array.mean()``: a sequential float32 sum, divided in double (checked
    against numba 0.68.1 on 2000 random arrays)."""
    total = np.cumsum(xs_slice, dtype=np.float32)[-1]  # sequential, left to right
    return np.float32(float(total) / len(xs_slice))


MAX_CLUSTERS = 256


def _check_kmeans(n_values: int, n_clusters, max_iter, random_state) -> tuple[int, int, int]:
    """The one check of :func:`kmeans_1d_rows` and :func:`kmeans_1d_reference`: 1 <= n_clusters
    <= 256 (codes are uint8; more clusters than weights is legal, the extra ones stay empty, but
    the tables are (N, n_clusters), so the count is bounded before allocating), max_iter >= 1 (the
    borders come from at least one assignment step),
    random_state a seed NumPy's RandomState accepts (0 <= seed < 2**32)."""
    k = require_int("n_clusters", n_clusters, minimum=1)
    if k > MAX_CLUSTERS:
        raise FormatRuleError(f"n_clusters: must be <= {MAX_CLUSTERS} (uint8 codes); got {k}")
    max_iter = require_int("max_iter", max_iter, minimum=1)
    random_state = require_int("random_state", random_state, minimum=0)
    if random_state >= 1 << 32:
        raise FormatRuleError(f"random_state: must be < 2**32; got {random_state}")
    return k, max_iter, random_state


def kmeans_1d_reference(xs, Pw, Pwx, Pwxx, n_clusters: int, max_iter: int = 50,
                        random_state: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """One channel, plain loops: returns (centroids float32 (k,) ascending, borders int64 (k+1,)).

    xs float32 (K,) sorted; Pw, Pwx, Pwxx float64 (K,) prefix sums (see :func:`sort_rows`).
    """
    xs = require_float_array("xs", xs)
    require_ndim("xs", xs, 1)
    for name, v in (("Pw", Pw), ("Pwx", Pwx), ("Pwxx", Pwxx)):
        require_finite(name, require_shape(name, require_float_array(name, v), xs.shape))
    require_finite("xs", xs)
    n_clusters, max_iter, random_state = _check_kmeans(len(xs), n_clusters, max_iter, random_state)
    rng = np.random.RandomState(random_state)
    n = len(xs)
    k = n_clusters
    trials = 2 + int(np.log(k))
    cent = np.empty(k, dtype=np.float32)
    u = rng.random_sample()
    cent[0] = xs[np.searchsorted(Pw, u * Pw[n - 1], side="left")]
    for cid in range(1, k):
        cur = np.sort(cent[:cid])
        bord = _borders_ref(xs, cur)
        total = _inertia_ref(cur, bord, Pw, Pwx, Pwxx, n)
        selectors = rng.random_sample(trials) * total
        cands = np.empty(trials, dtype=np.float32)
        for t in range(trials):
            lo, hi = 1, n
            while lo < hi:
                mid = (lo + hi) // 2
                if _inertia_ref(cur, bord, Pw, Pwx, Pwxx, mid) < selectors[t]:
                    lo = mid + 1
                else:
                    hi = mid
            cands[t] = xs[lo - 1]
        best, best_c = np.inf, None
        for t in range(trials):
            cent[cid] = cands[t]
            trial = np.sort(cent[:cid + 1])
            inertia = _inertia_ref(trial, _borders_ref(xs, trial), Pw, Pwx, Pwxx, n)
            if inertia < best:
                best, best_c = inertia, cands[t]
        cent[cid] = best_c
    cent = np.sort(cent)
    borders = None
    for _ in range(max_iter):
        new = _borders_ref(xs, cent)
        if borders is not None and np.array_equal(borders, new):
            break
        borders = new
        for i in range(k):
            a, b = int(borders[i]), int(borders[i + 1])
            if a == b:
                continue
            sw = _qs(Pw, a, b)
            cent[i] = _zero_weight_mean(xs[a:b]) if sw == 0 else np.float32(_qs(Pwx, a, b) / sw)
    return cent, borders


# ---------------------------------------------------------------- vectorised over channels
def _rows_searchsorted(A: np.ndarray, v: np.ndarray, side: str) -> np.ndarray:
    """Row-wise searchsorted: A (N, K) sorted rows, v (N, m) -> int64 (N, m) by bisection."""
    n, k = A.shape
    lo = np.zeros(v.shape, dtype=np.int64)
    hi = np.full(v.shape, k, dtype=np.int64)
    rows = np.arange(n)[:, None]
    while True:
        act = lo < hi
        if not act.any():
            return lo
        mid = (lo + hi) // 2
        a = A[rows, np.minimum(mid, k - 1)]
        go_right = (a < v) if side == "left" else (a <= v)
        lo = np.where(act & go_right, mid + 1, lo)
        hi = np.where(act & ~go_right, mid, hi)


def _borders_rows(xs: np.ndarray, c: np.ndarray) -> np.ndarray:
    mid = (c[:, :-1] + c[:, 1:]) / np.float32(2)  # (N, k-1) float32
    n, k = xs.shape
    inner = _rows_searchsorted(xs, mid, "left")
    return np.concatenate([np.zeros((n, 1), np.int64), inner, np.full((n, 1), k, np.int64)], axis=1)


def _take(P: np.ndarray, rows: np.ndarray, idx: np.ndarray) -> np.ndarray:
    return P[rows, np.maximum(idx, 0)]


def _qs_rows(P, rows, a, b):
    """Range sums over [a, b) per element (b > a assumed where used), same fp ops as _qs."""
    hi = _take(P, rows, b - 1)
    return np.where(a > 0, hi - _take(P, rows, a - 1), hi)


def _inertia_rows(c, borders, s, stop):
    """Vectorised _inertia_ref: c float32 (N, k), borders (N, k+1), stop (N, T) -> (N, T).

    All cluster terms are formed at once (skipped clusters contribute exactly 0.0) and summed
    left to right with a sequential ``cumsum``, the reference loop's order, so the bits agree.
    """
    rows = np.arange(c.shape[0])[:, None, None]
    stop3 = stop[:, :, None]  # (N, T, 1)
    a = borders[:, None, :-1]  # (N, 1, k)
    b = np.minimum(borders[:, None, 1:], stop3)  # (N, T, k)
    ok = (a < stop3) & (a != b)
    bb = np.where(ok, b, 1)
    aa = np.where(ok, a, 0)
    c32 = c[:, None, :]
    term = (_qs_rows(s.Pwxx, rows, aa, bb) - 2.0 * c32.astype(np.float64) * _qs_rows(s.Pwx, rows, aa, bb)
            + (c32 * c32).astype(np.float64) * _qs_rows(s.Pw, rows, aa, bb))
    term = np.where(ok, term, 0.0)
    return np.cumsum(term, axis=2)[:, :, -1]


def kmeans_1d_rows(s: SortedRows, n_clusters: int, max_iter: int = 50,
                   random_state: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """:func:`kmeans_1d_reference` for every channel at once (same arithmetic, same draws).

    Returns centroids float32 (N, k) ascending and borders int64 (N, k+1).  Every channel
    re-seeds the generator, so all channels see the same uniforms; they are drawn once here.
    """
    if not isinstance(s, SortedRows):
        raise FormatRuleError(f"s: must be a SortedRows (from sort_rows); got {type(s).__name__}")
    n_clusters, max_iter, random_state = _check_kmeans(s.xs.shape[1], n_clusters, max_iter, random_state)
    xs = s.xs
    n, kk = xs.shape
    k = n_clusters
    rows = np.arange(n)[:, None]
    trials = 2 + int(np.log(k))
    rng = np.random.RandomState(random_state)
    u0 = rng.random_sample()
    draws = [rng.random_sample(trials) for _ in range(1, k)]
    cent = np.empty((n, k), dtype=np.float32)
    first = _rows_searchsorted(s.Pw, (u0 * s.Pw[:, -1])[:, None], "left")
    cent[:, 0] = xs[rows, first][:, 0]
    full = np.full((n, 1), kk, dtype=np.int64)
    for cid in range(1, k):
        cur = np.sort(cent[:, :cid], axis=1)
        bord = _borders_rows(xs, cur)
        total = _inertia_rows(cur, bord, s, full)  # (N, 1)
        selectors = draws[cid - 1][None, :] * total  # (N, T)
        lo = np.ones((n, trials), dtype=np.int64)
        hi = np.full((n, trials), kk, dtype=np.int64)
        while (lo < hi).any():
            act = lo < hi
            mid = (lo + hi) // 2
            below = _inertia_rows(cur, bord, s, np.where(act, mid, kk)) < selectors
            lo = np.where(act & below, mid + 1, lo)
            hi = np.where(act & ~below, mid, hi)
        cands = xs[rows, lo - 1]  # (N, T) float32
        best = np.full(n, np.inf)
        best_c = np.zeros(n, dtype=np.float32)
        for t in range(trials):
            cent[:, cid] = cands[:, t]
            trial = np.sort(cent[:, :cid + 1], axis=1)
            inertia = _inertia_rows(trial, _borders_rows(xs, trial), s, full)[:, 0]
            better = inertia < best
            best = np.where(better, inertia, best)
            best_c = np.where(better, cands[:, t], best_c)
        cent[:, cid] = best_c
    cent = np.sort(cent, axis=1)
    borders = np.full((n, k + 1), -1, dtype=np.int64)
    active = np.ones(n, dtype=bool)
    for it in range(max_iter):
        idx = np.flatnonzero(active)
        if idx.size == 0:
            break
        new = _borders_rows(xs[idx], cent[idx])
        same = np.all(new == borders[idx], axis=1) if it > 0 else np.zeros(idx.size, bool)
        active[idx[same]] = False
        idx, new = idx[~same], new[~same]
        borders[idx] = new
        r = idx[:, None]
        a, b = new[:, :-1], new[:, 1:]  # (n_act, k)
        nonempty = a != b
        bb = np.where(nonempty, b, 1)
        aa = np.where(nonempty, a, 0)
        sw = _qs_rows(s.Pw, r, aa, bb)
        sx = _qs_rows(s.Pwx, r, aa, bb)
        with np.errstate(divide="ignore", invalid="ignore"):
            upd = (sx / sw).astype(np.float32)
        zero = nonempty & (sw == 0)
        for ri, ci in zip(*np.nonzero(zero)):
            upd[ri, ci] = _zero_weight_mean(xs[idx[ri], a[ri, ci]:b[ri, ci]])
        cent[idx] = np.where(nonempty, upd, cent[idx])
    return cent, borders


@dataclass(frozen=True)
class SeedResult:
    """Seed model: ``codes`` uint8 (K, N) in [0, 2**bits), ``lut`` float32 (N, 2**bits) sorted
    ascending per channel, ``borders`` int64 (N, 2**bits + 1) cluster ranges in sorted order."""

    bits: int
    codes: np.ndarray
    lut: np.ndarray
    borders: np.ndarray

    def __post_init__(self):
        require_fields(self)  # a Python int, plain native arrays

    def dequantize(self) -> np.ndarray:
        """float32 (K, N): ``lut[n, codes[k, n]]``."""
        return np.take_along_axis(self.lut, self.codes.T.astype(np.intp), axis=1).T


def _labels_from_borders(borders: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Cluster index of every sorted position, unsorted back to input order: uint8 (K, N)."""
    n, k = order.shape
    pos = np.arange(k)
    sorted_labels = np.empty((n, k), dtype=np.uint8)
    for r in range(n):
        sorted_labels[r] = np.searchsorted(borders[r], pos, side="right") - 1
    labels = np.empty_like(sorted_labels)
    np.put_along_axis(labels, order, sorted_labels, axis=1)
    return labels.T


def _check_bits(bits: int) -> int:
    bits = require_int("bits", bits, minimum=1)
    if bits > 8:
        raise FormatRuleError(f"bits: codes are uint8, so bits must be in 1..8; got {bits}")
    return bits


def seed(W: np.ndarray, G: np.ndarray, bits: int = 3, *, random_state: int = 0,
         max_iter: int = 50, tie_order: str = "stable") -> SeedResult:
    """Seed model of W float (K, N) under Fisher sensitivities G float (K, N) >= 0.

    One weighted 1-D k-means with 2**bits clusters per output channel (column of W).
    Deterministic for a given ``random_state`` (an int; the official CLI default None is not
    reproducible and is not offered).  ``tie_order`` see :func:`sort_rows`.  Inputs are not
    modified.
    """
    bits = _check_bits(bits)
    random_state = require_int("random_state", random_state, minimum=0)
    s = sort_rows(W, G, tie_order)
    lut, borders = kmeans_1d_rows(s, 1 << bits, max_iter, random_state)
    return SeedResult(bits, _labels_from_borders(borders, s.order), lut, borders)


def seed_reference(W: np.ndarray, G: np.ndarray, bits: int = 3, *, random_state: int = 0,
                   max_iter: int = 50, tie_order: str = "stable") -> SeedResult:
    """Plain per-channel twin of :func:`seed` (slow; small shapes)."""
    bits = _check_bits(bits)
    random_state = require_int("random_state", random_state, minimum=0)
    s = sort_rows(W, G, tie_order)
    n = s.xs.shape[0]
    lut = np.empty((n, 1 << bits), dtype=np.float32)
    borders = np.empty((n, (1 << bits) + 1), dtype=np.int64)
    for r in range(n):
        lut[r], borders[r] = kmeans_1d_reference(s.xs[r], s.Pw[r], s.Pwx[r], s.Pwxx[r],
                                                 1 << bits, max_iter, random_state)
    return SeedResult(bits, _labels_from_borders(borders, s.order), lut, borders)
