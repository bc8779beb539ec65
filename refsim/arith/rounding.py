"""Correct rounding in every PTX rounding mode, for any float format: what ``.rn .rz .rm .rp`` compute.

Spec
----
formats         f16 (p = 11), bf16 (p = 8), f32 (p = 24), f64 (p = 53) (:data:`PTX_FORMATS`). Values
                travel as float64 arrays holding exact values of the format (float64 holds every
                f16/bf16/f32 value exactly); results are float64 arrays of values of ``fmt``.
modes           'rn' nearest-even, 'rz' toward zero, 'rm' toward -Inf, 'rp' toward +Inf
                (:data:`refsim.arith.exact.ROUNDING_MODES`); subnormals kept, no ``.ftz`` here
                (refsim.ptx flushes around these calls).
overflow        IEEE 754 section 7.4: rn -> +-Inf; rz -> +-max; rm -> +max / -Inf; rp -> +Inf / -max.
zeros           an exact-zero sum is -0 iff both addends are -0, or the mode is 'rm' and not both
                are +0; Inf and NaN pass through as IEEE float64 arithmetic gives them.
how             :func:`round_float64` rounds float64 values once, by integer arithmetic on the
                float64 fields. Operations whose exact result is not a float64 (sums of distant
                operands, fma, 64-bit integers) first form the float64 rounded *to odd*
                (:func:`two_sum` + :func:`round_to_odd`); RO to 53 bits followed by any rounding
                to p <= 51 bits is one correct rounding (Boldo & Melquiond 2008). f64 results:
                rn through NumPy (IEEE); the directed modes through :func:`round_sum64`, and
                mul/fma through the exact plain loop :func:`fp_reference` (slow, rare in kernels).
                div and sqrt are ``.rn`` only (PTX has no directed ``div.f16``; float64 quotient
                then RN: innocuous double rounding since 53 >= 2p + 2, Figueroa 1995).
oracle          :func:`refsim.arith.exact.round_fraction` on :class:`fractions.Fraction`
                values; :func:`round_float64_reference` and :func:`fp_reference` are the plain
                loops over it, tested equal to the vectorised functions.
users           refsim.ptx's float and conversion handlers (``add/mul/fma/div/sqrt/rcp`` with any
                rounding modifier, ``cvt.{rn,rz,rm,rp}``); the ``.rn`` f16/f32 instructions the
                kernel emulators call are :mod:`refsim.arith.fp`.
source          PTX ISA 9.x, "Floating Point Instructions" and ``cvt`` (rounding modifiers).

:func:`round_float64` on one value, x = 1 + 2^-11 + 2^-40 rounded to f16 (p = 11, 52 - 10 = 42 bits dropped)::

    m    = 1 0000000000 1 0000000...00000001    x = m * 2^-52 (53-bit significand as an integer)
           |-- kept --| |-- r = 42 bits: rem --|   the low 1 is 2^-40, i.e. bit 12 of m
    kept = m >> 42 = 1.0000000000 (10 fraction bits, even)
    rem  = 2^41 + 2^12 > half = 2^41      -> rn: up (not a tie: a bit below the half)
    rn 1 + 2^-10   rz 1   rm 1   rp 1 + 2^-10
"""

from __future__ import annotations

import numpy as np

from refsim._validate import require_bool, require_choice, require_dtype
from refsim.arith import exact
from refsim.arith.exact import ROUNDING_MODES
from refsim.errors import FormatRuleError, ShapeError

__all__ = ["PTX_FORMATS", "round_float64", "round_float64_reference", "two_sum", "round_to_odd", "round_sum64",
           "fp_add", "fp_mul", "fp_fma", "fp_div", "fp_sqrt", "int_to_float", "fp_reference"]


#: the formats a PTX float instruction names, as :class:`refsim.arith.exact.FloatFormat`
PTX_FORMATS = {"f16": exact.F16, "bf16": exact.BF16, "f32": exact.F32, "f64": exact.F64}


def _fmt(name: str):
    return PTX_FORMATS[require_choice("fmt", name, tuple(PTX_FORMATS))]


def round_float64(x: np.ndarray, fmt: str, mode: str) -> np.ndarray:
    """Round float64 values once to ``fmt`` ('f16', 'bf16', 'f32'; 'f64' is the identity) with
    ``mode`` ('rn' nearest-even, 'rz', 'rm' toward -Inf, 'rp' toward +Inf).

    x float64 (any shape). Returns float64 (same shape) holding values representable in ``fmt``
    (or ±Inf/NaN); subnormals are kept. The sign of a zero result is the sign of x.
    Integer arithmetic on the float64 fields: significand m (53 bits), r = bits below the target's
    last place, kept = m >> r, then the mode decides whether to add one unit; kept · 2^q is exact.
    """
    (x,) = _float64_operands(("x",), x)
    f = _fmt(fmt)
    mode = _mode(mode)
    if fmt == "f64":
        return x.copy()
    p = f.precision
    u = x.view(np.uint64).astype(np.int64) & np.int64(0x7FFFFFFFFFFFFFFF)     # |x| bits
    E = u >> 52
    frac = u & np.int64((1 << 52) - 1)
    m = frac | ((E != 0).astype(np.int64) << 52)
    e = np.maximum(E, np.int64(1)) - 1075                     # |x| = m * 2^e (subnormals: E = 0 -> -1074)
    lead = e + _bit_length64(m) - 1                          # floor(log2 |x|)
    q = np.maximum(lead, np.int64(f.emin)) - (p - 1)                   # exponent of the target's last place
    r = np.minimum(np.maximum(q - e, _I0), _I63)            # bits dropped (>= 53 - p > 0 for live values)
    kept = m >> r
    rem = m - (kept << r)
    half = np.int64(1) << np.maximum(r - 1, _I0)
    neg = np.signbit(x)
    if mode == "rn":
        up = (rem > half) | ((rem == half) & ((kept & 1) == 1))
    elif mode == "rz":
        up = np.zeros(x.shape, bool)
    elif mode == "rm":
        up = (rem > 0) & neg
    else:
        up = (rem > 0) & ~neg
    kept = kept + up
    pow2 = ((np.minimum(np.maximum(q, np.int64(-1022)), np.int64(1023)) + 1023) << 52).astype(np.uint64).view(np.float64)
    with np.errstate(over="ignore"):
        r_val = kept.astype(np.float64) * pow2               # exact (kept < 2^54)
    top = 2.0 ** (f.emax + 1)
    big = (2.0 - 2.0 ** (1 - p)) * 2.0 ** f.emax
    to_inf = {"rn": np.ones(x.shape, bool), "rz": np.zeros(x.shape, bool), "rm": neg, "rp": ~neg}[mode]
    r_val = np.where(r_val >= top, np.where(to_inf, np.inf, big), r_val)
    live = np.isfinite(x) & (x != 0)
    return np.where(live, np.where(neg, -r_val, r_val), x)


_I0, _I63 = np.int64(0), np.int64(63)


def _bit_length64(v: np.ndarray) -> np.ndarray:
    """Bits needed for each non-negative int64 (0 for 0), by binary search on shifts."""
    v = v.astype(np.int64)
    n = np.zeros(v.shape, np.int64)
    for sh in (32, 16, 8, 4, 2, 1):
        big = (v >> sh) != 0
        n = n + big.astype(np.int64) * sh
        v = v >> (big.astype(np.int64) * sh)
    return n + (v != 0)


def round_float64_reference(x: np.ndarray, fmt: str, mode: str) -> np.ndarray:
    """Plain-loop twin of :func:`round_float64` over :func:`refsim.arith.exact.round_fraction`."""
    (x,) = _float64_operands(("x",), x)
    f = _fmt(fmt)
    mode = _mode(mode)
    out = np.empty(x.shape, np.float64)
    for i in np.ndindex(x.shape):
        v = float(x[i])
        if not np.isfinite(v) or v == 0:
            out[i] = v
            continue
        r = exact.round_fraction(exact.to_fraction(v), f, mode)
        out[i] = np.copysign(float(r), v) if not isinstance(r, float) else r
    return out


def _float64_operands(names: tuple[str, ...], *arrays) -> tuple[np.ndarray, ...]:
    """float64 operands (ndarrays, or the NumPy float64 scalars that arithmetic on 0-d arrays
    returns) whose shapes broadcast, as ndarrays; anything else is refused naming the rule."""
    out = tuple(require_dtype(n, np.asarray(v) if isinstance(v, np.float64) else v, np.float64)
                for n, v in zip(names, arrays))
    try:
        np.broadcast_shapes(*(x.shape for x in out))
    except ValueError:
        raise ShapeError(f"{', '.join(names)}: shapes must broadcast; got "
                         f"{', '.join(str(x.shape) for x in out)}") from None
    return out


def _mode(mode) -> str:
    return require_choice("mode", mode, ROUNDING_MODES)


def two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """float64 a + b as (s, e): s = RN(a + b) and s + e == a + b exactly (finite, no overflow).
    a, b float64, broadcastable; s, e float64 of the broadcast shape (e = 0 where s is not finite)."""
    a, b = _float64_operands(("a", "b"), a, b)
    with np.errstate(all="ignore"):
        s = a + b
        bb = s - a
        e = (a - (s - bb)) + (b - bb)
    return s, np.where(np.isfinite(s), e, 0.0)


def round_to_odd(s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """The float64 rounded *to odd* of the exact value s + e (s = RN(s + e), e from :func:`two_sum`).
    s, e float64, broadcastable; returns float64 of the broadcast shape."""
    s, e = _float64_operands(("s", "e"), s, e)
    even = (s.view(np.int64) & 1) == 0
    nudge = np.isfinite(s) & (e != 0) & even
    with np.errstate(all="ignore"):
        return np.where(nudge, np.nextafter(s, np.where(e > 0, np.inf, -np.inf)), s)


def round_sum64(s: np.ndarray, e: np.ndarray, mode: str) -> np.ndarray:
    """The exact value s + e (from :func:`two_sum`) rounded once to float64 in ``mode``.
    s, e float64, broadcastable; returns float64 of the broadcast shape."""
    s, e = _float64_operands(("s", "e"), s, e)
    mode = _mode(mode)
    if mode == "rn":
        return np.broadcast_to(s, np.broadcast_shapes(s.shape, e.shape)).copy()
    with np.errstate(all="ignore"):
        if mode == "rz":
            step = (e != 0) & ((e > 0) != (s > 0))
            return np.where(step, np.nextafter(s, 0.0), s)
        toward = np.inf if mode == "rp" else -np.inf
        step = (e > 0) if mode == "rp" else (e < 0)
        return np.where(step, np.nextafter(s, toward), s)


def _zero_sum_sign(x: np.ndarray, y: np.ndarray, mode: str) -> np.ndarray:
    """Sign (True = negative) of an exact-zero x + y: -0 iff both are -0, or mode 'rm' unless both +0."""
    both_neg = np.signbit(x) & np.signbit(y) & (x == 0) & (y == 0)
    both_pos = ~np.signbit(x) & ~np.signbit(y) & (x == 0) & (y == 0)
    return both_neg | ((mode == "rm") & ~both_pos)


def fp_add(a: np.ndarray, b: np.ndarray, fmt: str, mode: str) -> np.ndarray:
    """``add{.rn,.rz,.rm,.rp}`` on values of ``fmt`` held exactly in float64 arrays a, b.

    Returns float64 values representable in ``fmt`` (one correct rounding of a + b). f64 directed
    modes use :func:`two_sum` and :func:`round_sum64`.
    """
    a, b = _float64_operands(("a", "b"), a, b)
    _fmt(fmt)
    mode = _mode(mode)
    s, e = two_sum(a, b)
    if fmt == "f64":
        r = round_sum64(s, e, mode)
        overflow = np.isinf(s) & np.isfinite(a) & np.isfinite(b)
        if mode != "rn":
            big = np.finfo(np.float64).max
            to_inf = {"rz": np.zeros(s.shape, bool), "rm": s < 0, "rp": s > 0}[mode]
            r = np.where(overflow & ~to_inf, np.copysign(big, s), r)
    else:
        r = round_float64(round_to_odd(s, e), fmt, mode)
    zero = (s == 0) & (e == 0)
    return np.where(zero, np.where(_zero_sum_sign(a, b, mode), -0.0, 0.0), r)


def fp_mul(a: np.ndarray, b: np.ndarray, fmt: str, mode: str) -> np.ndarray:
    """``mul`` in any mode for f16/bf16/f32 values in float64 (the product is exact in float64);
    ``f64`` through the exact plain loop (:func:`fp_reference`) unless mode is 'rn'."""
    a, b = _float64_operands(("a", "b"), a, b)
    _fmt(fmt)
    mode = _mode(mode)
    if fmt == "f64":
        if mode == "rn":
            with np.errstate(all="ignore"):
                return a * b
        return fp_reference("mul", (a, b), fmt, mode)
    with np.errstate(all="ignore"):
        return round_float64(a * b, fmt, mode)


def fp_fma(a: np.ndarray, b: np.ndarray, c: np.ndarray, fmt: str, mode: str) -> np.ndarray:
    """``fma`` (a·b + c rounded once) in any mode; f16/bf16/f32 vectorised (exact product, RO sum),
    f64 through the exact plain loop."""
    a, b, c = _float64_operands(("a", "b", "c"), a, b, c)
    _fmt(fmt)
    mode = _mode(mode)
    if fmt == "f64":
        return fp_reference("fma", (a, b, c), fmt, mode)
    with np.errstate(all="ignore"):
        p = a * b
    s, e = two_sum(p, c)
    r = round_float64(round_to_odd(s, e), fmt, mode)
    zero = (s == 0) & (e == 0)
    return np.where(zero, np.where(_zero_sum_sign(p, c, mode), -0.0, 0.0), r)


def fp_div(a: np.ndarray, b: np.ndarray, fmt: str) -> np.ndarray:
    """``div.rn`` / ``rcp.rn`` (a = 1): f16/bf16/f32 via the float64 quotient rounded to nearest
    (double rounding is innocuous since 53 >= 2p + 2, Figueroa 1995); f64 is IEEE division."""
    a, b = _float64_operands(("a", "b"), a, b)
    _fmt(fmt)
    with np.errstate(all="ignore"):
        q = a / b
    return q if fmt == "f64" else round_float64(q, fmt, "rn")


def fp_sqrt(a: np.ndarray, fmt: str) -> np.ndarray:
    """``sqrt.rn``: float64 sqrt rounded to nearest (innocuous double rounding, as :func:`fp_div`)."""
    (a,) = _float64_operands(("a",), a)
    _fmt(fmt)
    with np.errstate(all="ignore"):
        r = np.sqrt(a)
    return r if fmt == "f64" else round_float64(r, fmt, "rn")


def int_to_float(v: np.ndarray, signed: bool, fmt: str, mode: str) -> np.ndarray:
    """``cvt.{rn,rz,rm,rp}.<float>.{s,u}{8..64}``: integers (int64 or uint64 array) rounded once.

    The value is split into two float64-exact halves, summed with :func:`two_sum`, then rounded
    (to odd and to ``fmt``, or directly for f64). Returns float64 values representable in ``fmt``.
    ``signed`` says how to read v and must match its dtype (int64 signed, uint64 unsigned).
    """
    signed = require_bool("signed", signed)
    v = require_dtype("v", v, np.int64 if signed else np.uint64)
    u = v.astype(np.uint64) if not signed else v.astype(np.int64).astype(np.uint64)
    hi = (u >> np.uint64(32)).astype(np.int64)
    if signed:
        hi = np.where(hi >= 2**31, hi - 2**32, hi)
    lo = (u & np.uint64(0xFFFFFFFF)).astype(np.float64)
    s, e = two_sum(np.ldexp(hi.astype(np.float64), 32), lo)
    if fmt == "f64":
        return round_sum64(s, e, mode)
    return round_float64(round_to_odd(s, e), fmt, mode)


def fp_reference(name: str, args: tuple, fmt: str, mode: str) -> np.ndarray:
    """Plain loop over :class:`fractions.Fraction`: ``name`` in 'add', 'mul', 'fma'
    applied to float64 arrays ``args`` (exact values of ``fmt``) and rounded once in ``mode``.

    Twin of :func:`fp_add`, :func:`fp_mul`, :func:`fp_fma` (and the exact f64 path of the last
    two). IEEE specials: NaN in -> NaN; Inf arithmetic as IEEE; an exact-zero sum is -0 iff both
    addends are -0, or the mode is 'rm' and not both are +0.
    """
    arity = {"add": 2, "mul": 2, "fma": 3}[require_choice("name", name, ("add", "mul", "fma"))]
    if not isinstance(args, (tuple, list)) or len(args) != arity:
        raise FormatRuleError(f"args: {name} takes a tuple of {arity} float64 arrays; got "
                              f"{type(args).__name__} of length {len(args) if isinstance(args, (tuple, list)) else '-'}")
    args = _float64_operands(tuple(f"args[{i}]" for i in range(arity)), *args)
    f = _fmt(fmt)
    mode = _mode(mode)
    shape = np.broadcast_shapes(*(x.shape for x in args))
    args = [np.broadcast_to(x, shape) for x in args]
    out = np.empty(shape, np.float64)
    for i in np.ndindex(shape):
        xs = [float(x[i]) for x in args]
        if not all(np.isfinite(xs)):
            out[i] = _special_reference(name, xs)
            continue
        fr = [exact.to_fraction(x) for x in xs]
        if name == "mul":
            val = fr[0] * fr[1]
        elif name == "add":
            val, p_val, p_neg, c_val, c_neg = fr[0] + fr[1], fr[0], np.signbit(xs[0]), fr[1], np.signbit(xs[1])
        else:
            p_val, c_val = fr[0] * fr[1], fr[2]
            val, p_neg, c_neg = p_val + c_val, np.signbit(xs[0]) != np.signbit(xs[1]), np.signbit(xs[2])
        if val == 0:
            if name == "mul":
                neg = np.signbit(xs[0]) != np.signbit(xs[1])
            elif p_val == 0 and c_val == 0 and p_neg == c_neg:
                neg = bool(p_neg)
            else:
                neg = mode == "rm"
            out[i] = -0.0 if neg else 0.0
            continue
        r = exact.round_fraction(val, f, mode)
        if isinstance(r, float):
            out[i] = r
        else:
            out[i] = float(r) if r != 0 else (-0.0 if val < 0 else 0.0)
    return out


def _special_reference(name: str, xs: list) -> float:
    """IEEE result of ``name`` when some operand is Inf or NaN (exact rounding is moot)."""
    with np.errstate(all="ignore"):
        if name == "add":
            return xs[0] + xs[1]
        if name == "mul":
            return xs[0] * xs[1]
        a, b, c = xs
        if np.isfinite(a) and np.isfinite(b):
            return c
        return np.float64(a) * np.float64(b) + c
