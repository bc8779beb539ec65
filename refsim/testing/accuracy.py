"""Accuracy mode of :func:`refsim.testing.check_kernel`: a bound on the error, derived, not guessed.

A kernel that sums in another legitimate order than refsim's emulator (one fp32 FMA chain instead
of fp16 chains per slab, a split-K tree, ...) writes other bits, yet it is correct. Accuracy mode
accepts it when every output lies within the standard forward-error bound of the accumulation the
kernel states, around the exact product computed from the same inputs, and reports bit-exactness
with refsim's order separately.

The format gives its output as an exact linear form (:class:`refsim.testing.cases.base.Linear`):
``S = sum_t a_t w_t + c`` with ``P = sum_t |a_t w_t| + |c|`` over T terms, ``pre`` fp16 roundings
of the rounded factor ``w_t`` before the sum (a weight dequantized to fp16) and ``post`` fp16
roundings after it (the fp16 output). With ``u`` the unit roundoff of the stated accumulation
(fp32: 2^-24, fp16: 2^-11), ``u16 = 2^-11`` and ``eta = 2^-25`` (half the smallest fp16
subnormal: the absolute error of a rounding whose result is subnormal), the kernel's output y
passes when ``|y - S| <= B`` with::

    d     = T                     sequential or any order (every term passes <= T roundings)
          = ceil(log2 T) + 1      pairwise (a balanced tree, plus the product's rounding)
    E_pre = ((1+u16)^pre - 1) P + pre (1+u16)^pre eta Cof         Cof = sum_t |a_t| (the cofactor)
    E_acc = ((1+u)^d - 1) (P + E_pre)  [+ T eta with an fp16 accumulator: subnormal partial sums]
    B     = E_pre + E_acc + ((1+u16)^post - 1) (|S| + E_pre + E_acc) + post (1+u16)^post eta

(Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., Lemma 3.1 and section 4.2:
``|fl(sum) - sum| <= gamma_d sum |x_i|`` for any summation whose terms pass through at most d
roundings, ``gamma_d = (1+u)^d - 1 <= d u / (1 - d u)``.) Products of fp16 values are exact in
fp32, and no partial sum of them is an fp32 subnormal (they are multiples of 2^-48), so an fp32
accumulator needs no eta term. An output may be +-inf where ``S +- B`` reaches the fp16 overflow
threshold 65520, and NaN only with an fp16 accumulator whose partial sums may overflow (P + B >= 65520),
or where the form's ``nan`` mask says the exact product is NaN (a NaN weight): there only NaN passes.

S and P are computed in float64 (each product is exact there) with the float64 error bound
``gamma_T(2^-53) P`` of the sum; an output whose verdict that margin could change is decided again
with exact rationals (:class:`fractions.Fraction`), so the verdict is the exact one.

The statistical criterion (:func:`reference`, :func:`spread`): a worst-case bound is loose for
typical data (an fp16 accumulator stays inside an fp32 bound on most sums), so accuracy mode also
compares the distribution of the kernel's errors with the stated accumulation's own on the same
inputs: the accumulation run as written (:func:`reference`: one chain in the accumulator's
precision, or a pairwise tree for ``order='pairwise'``), both errors measured against the exact S
in units of B. The kernel fails when its RMS or its 99th-percentile error exceeds
:data:`FACTOR` times the reference's (errors below :data:`FLOOR` B never fail): an accumulation as
precise as the stated one makes errors of the same distribution (a different order moves an
output across an fp16 rounding boundary only where S lies within the accumulation's tiny error
of one), while a weaker one adds roundings of its own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from refsim._validate import (require_choice, require_dtype, require_fields, require_float_array, require_instance,
                              set_fields)
from refsim.errors import ShapeError
from refsim.testing.cases.base import Linear

__all__ = ["ACCUMULATIONS", "ORDERS", "FACTOR", "FLOOR", "Accumulation", "Judgement", "Spread", "judge", "reference",
           "spread"]

ACCUMULATIONS = ("fp32", "fp16")
ORDERS = ("sequential", "pairwise", "any")

_UNIT = {"fp32": Fraction(1, 2**24), "fp16": Fraction(1, 2**11)}
_U16 = Fraction(1, 2**11)
_ETA = Fraction(1, 2**25)
_OVERFLOW = 65520.0            # the smallest magnitude that rounds to inf in fp16
_U64 = 2.0**-53
#: how many times the stated accumulation's own RMS and 99th-percentile error the kernel may reach
FACTOR = 1.25
#: errors (in units of the bound B) below which the statistical criterion never fails
FLOOR = 2.0**-20


@dataclass(frozen=True)
class Accumulation:
    """What the kernel states about its sum: ``dtype`` 'fp32' or 'fp16' (the accumulator's
    precision), ``order`` 'sequential', 'pairwise' or 'any'."""

    dtype: str = "fp32"
    order: str = "sequential"

    def __post_init__(self):
        set_fields(self, dtype=require_choice("accumulation", self.dtype, ACCUMULATIONS),
                   order=require_choice("order", self.order, ORDERS))

    def depth(self, terms: int) -> int:
        """The most roundings one term passes through in a sum of ``terms`` terms."""
        return terms if self.order != "pairwise" else max(1, math.ceil(math.log2(max(terms, 1)))) + 1

    def __str__(self) -> str:
        return f"{self.dtype} accumulation in {'a pairwise tree' if self.order == 'pairwise' else self.order + ' order'}"

    def describe(self, terms: int) -> str:
        d = self.depth(terms)
        return (f"{self} ({terms} terms: each passes at most {d} roundings, "
                f"gamma_{d} = {float(_gamma(_UNIT[self.dtype], d)):.3g})")


def _gamma(u, d):
    return (1 + u) ** d - 1


def _bound(acc: Accumulation, lin: Linear, S, P, cof):
    """B for one output (Fraction arithmetic when S, P, cof are Fractions; float64 otherwise)."""
    one = Fraction(1) if isinstance(P, Fraction) else 1.0
    conv = (lambda f: f) if isinstance(P, Fraction) else float
    u16, eta = conv(_U16), conv(_ETA)
    e_pre = ((one + u16) ** lin.pre - 1) * P + lin.pre * (one + u16) ** lin.pre * eta * cof
    e_acc = conv(_gamma(_UNIT[acc.dtype], acc.depth(lin.terms))) * (P + e_pre)
    if acc.dtype == "fp16":
        e_acc = e_acc + lin.terms * eta
    inner = e_pre + e_acc
    return inner + ((one + u16) ** lin.post - 1) * (abs(S) + inner) + lin.post * (one + u16) ** lin.post * eta


@dataclass(frozen=True)
class Judgement:
    """Accuracy of one case's output: ``outside`` bool mask of outputs beyond the bound; ``exact``
    S, ``bound`` B, ``error`` |y - S| as float64 arrays of the output's shape (finite outputs);
    ``ratio`` the largest error / bound over the outputs (0 when every error is 0)."""

    outside: np.ndarray
    exact: np.ndarray
    bound: np.ndarray
    error: np.ndarray
    ratio: float

    def __post_init__(self):
        require_fields(self)  # plain native arrays and a Python float, whatever came in


def _exact(lin: Linear, idx: tuple):
    """(S, P, Cof) of one output as Fractions (the exact-rational decision)."""
    m, n = idx
    prods = [Fraction(float(lin.a[m, t])) * Fraction(float(lin.w[t, n])) for t in range(lin.a.shape[1])]
    c = Fraction(0) if lin.c is None else Fraction(float(lin.c[m, n]))
    cof = lin.cofactor
    cof = sum((abs(Fraction(float(v))) for v in lin.a[m]), Fraction(0)) if cof is None else \
        Fraction(float(np.broadcast_to(cof, lin.c_shape)[m, n]))
    return sum(prods, Fraction(0)) + c, sum(map(abs, prods), Fraction(0)) + abs(c), cof


def judge(acc: Accumulation, lin: Linear, actual: np.ndarray) -> Judgement:
    """Which outputs of ``actual`` (float16, the output's shape; (N,) outputs are one row) lie
    outside the bound of ``acc`` around the exact product of ``lin`` (module docstring)."""
    require_instance("acc", acc, Accumulation)
    require_instance("lin", lin, Linear)
    actual = require_dtype("actual", actual, np.float16)
    if actual.size != lin.c_shape[0] * lin.c_shape[1] or actual.ndim not in (1, 2):
        raise ShapeError(f"actual: must hold the {lin.c_shape} outputs of the linear form ((N,) for one row); "
                         f"got shape {actual.shape}")
    shape = actual.shape
    y = actual.astype(np.float64).reshape(lin.c_shape)
    # einsum, not BLAS: these products are small, and a threaded BLAS on a busy machine spends
    # 100x longer waking its threads than computing (4 x 1024 x 256: 40 ms against 0.3 ms)
    S = np.einsum("mt,tn->mn", lin.a, lin.w) + (0.0 if lin.c is None else lin.c)
    P = np.einsum("mt,tn->mn", np.abs(lin.a), np.abs(lin.w)) + (0.0 if lin.c is None else np.abs(lin.c))
    T = lin.a.shape[1] + (lin.c is not None)
    slack = T * _U64 / (1 - T * _U64) * P + 2.0**-1074            # float64 error of S and of P
    cof = np.abs(lin.a).sum(axis=1, keepdims=True) if lin.cofactor is None else lin.cofactor
    hi = _bound(acc, lin, S, P * (1 + 2.0**-40) + slack, cof * (1 + 2.0**-40)) * (1 + 2.0**-40)
    lo = _bound(acc, lin, S, np.maximum(P - slack, 0) * (1 - 2.0**-40), cof * (1 - 2.0**-40)) * (1 - 2.0**-40)
    finite = np.isfinite(y)
    err = np.where(finite, np.abs(y - S), np.inf)
    surely_in = finite & (err + slack <= lo)
    surely_out = finite & (err - slack > hi)
    outside = surely_out.copy()
    for idx in map(tuple, np.argwhere(finite & ~surely_in & ~surely_out)):
        S_x, P_x, cof_x = _exact(lin, idx)
        outside[idx] = abs(Fraction(float(y[idx])) - S_x) > _bound(acc, lin, S_x, P_x, cof_x)
    # non-finite outputs: inf where S +- B reaches the overflow threshold, NaN where an fp16 sum may overflow
    reach_up, reach_down = S + hi >= _OVERFLOW, S - hi <= -_OVERFLOW
    nan_ok = (acc.dtype == "fp16") & (P + hi >= _OVERFLOW)
    ok_nonfinite = np.where(np.isnan(y), nan_ok, np.where(y > 0, reach_up, reach_down))
    outside |= ~finite & ~ok_nonfinite
    if lin.nan is not None:                 # a NaN weight's outputs: NaN is the one right answer there
        outside = np.where(lin.nan, ~np.isnan(y), outside)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratios = np.where(finite & (err > 0) & (True if lin.nan is None else ~lin.nan),
                          err / np.maximum(hi, 2.0**-1074), 0.0)
    ratio = float(np.max(ratios, initial=0.0))
    return Judgement(outside.reshape(shape), S.reshape(shape), hi.reshape(shape), err.reshape(shape), ratio)


def _round(dtype: str, x: np.ndarray) -> np.ndarray:
    """x float64 rounded to the accumulator (fp32 or fp16, round to nearest even), as float64."""
    with np.errstate(over="ignore", invalid="ignore"):
        return x.astype(np.float32 if dtype == "fp32" else np.float16).astype(np.float64)


def reference(acc: Accumulation, lin: Linear) -> np.ndarray:
    """float16 (M, N): the stated accumulation itself on the terms of ``lin``: each factor ``w``
    rounded to fp16 once when ``lin.pre`` (a dequantized weight), then, from ``c`` (or 0), either
    one chain ``s = round(s + a_t w_t)`` over t ascending (orders 'sequential' and 'any') or a
    pairwise tree (order 'pairwise'), each step computed in float64 (the product of two fp16
    values is exact) and rounded to the accumulator; the sum is rounded to fp16 once."""
    require_instance("acc", acc, Accumulation)
    require_instance("lin", lin, Linear)
    with np.errstate(over="ignore", invalid="ignore"):
        w = lin.w.astype(np.float16).astype(np.float64) if lin.pre else lin.w
    start = np.zeros(lin.c_shape) if lin.c is None else lin.c
    if acc.order != "pairwise":
        s = _round(acc.dtype, start)
        with np.errstate(over="ignore", invalid="ignore"):
            for t in range(lin.a.shape[1]):
                s = _round(acc.dtype, s + lin.a[:, t:t + 1] * w[t:t + 1])            # (M, 1) * (1, N)
    else:
        out = np.empty(lin.c_shape)
        cols = max(1, (1 << 22) // max(1, lin.a.shape[1] * lin.a.shape[0]))      # bounded (T, M, cols) blocks
        with np.errstate(over="ignore", invalid="ignore"):
            for n0 in range(0, lin.c_shape[1], cols):
                level = lin.a.T[:, :, None] * w[:, None, n0:n0 + cols]           # (T, M, cols): exact products
                while level.shape[0] > 1:
                    pairs = level.shape[0] // 2
                    level = np.concatenate([_round(acc.dtype, level[0:2 * pairs:2] + level[1:2 * pairs:2]),
                                            level[2 * pairs:]])
                out[:, n0:n0 + cols] = _round(acc.dtype, level[0] + start[:, n0:n0 + cols])
        s = out
    if lin.nan is not None:
        s = np.where(lin.nan, np.nan, s)
    with np.errstate(over="ignore", invalid="ignore"):
        return s.astype(np.float16)


@dataclass(frozen=True)
class Spread:
    """The statistical criterion over a set of outputs: the kernel's and the reference's errors
    ``|y - S| / B`` (finite outputs of both), as RMS and 99th percentile; ``passed`` when neither
    of the kernel's exceeds ``max(FACTOR x the reference's, FLOOR)``."""

    outputs: int
    kernel_rms: float
    kernel_p99: float
    reference_rms: float
    reference_p99: float
    passed: bool

    def __post_init__(self):
        require_fields(self)

    def describe(self, acc: Accumulation) -> str:
        """One line naming both numbers of both statistics and the factor."""
        return (f"error / bound over {self.outputs} outputs: kernel RMS {self.kernel_rms:.3g}, 99th percentile "
                f"{self.kernel_p99:.3g}; {acc} run as written on the same inputs: RMS {self.reference_rms:.3g}, "
                f"99th percentile {self.reference_p99:.3g} (allowed: {FACTOR:g}x these)")


def spread(kernel_errors, reference_errors) -> Spread:
    """:class:`Spread` of paired float64 arrays of errors in units of the bound (any shape, equal
    sizes; non-finite pairs are left out)."""
    k = require_float_array("kernel_errors", kernel_errors).astype(np.float64).ravel()
    r = require_float_array("reference_errors", reference_errors).astype(np.float64).ravel()
    if k.shape != r.shape:
        raise ShapeError(f"kernel_errors, reference_errors: must pair up; got sizes {k.size} and {r.size}")
    keep = np.isfinite(k) & np.isfinite(r)
    k, r = k[keep], r[keep]
    if not k.size:
        return Spread(0, 0.0, 0.0, 0.0, 0.0, True)
    rms = [float(np.sqrt(np.mean(v * v))) for v in (k, r)]
    p99 = [float(np.quantile(v, 0.99, method="higher")) for v in (k, r)]
    ok = all(kv <= max(FACTOR * rv, FLOOR) for kv, rv in zip((rms[0], p99[0]), (rms[1], p99[1])))
    return Spread(int(k.size), rms[0], p99[0], rms[1], p99[1], ok)
