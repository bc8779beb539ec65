"""Exact rational rounding: the oracle every floating-point primitive of the emulator is checked against.

Nothing here uses floating-point arithmetic to decide a rounding: a value is a
:class:`fractions.Fraction`, a format is (precision p, minimum normal exponent emin, maximum
exponent emax), and rounding is integer arithmetic on the scaled significand. It is slow (pure
Python, one value at a time) on purpose: it is the thing the fast NumPy paths are compared with.

    value x  ->  e = max(floor(log2|x|), emin)       (emin: subnormals share the lowest exponent)
             ->  quantum q = 2^(e - p + 1)
             ->  n = x / q rounded to an integer by the mode (RNE, RZ, RO)
             ->  n * q, or ±Inf when the rounded magnitude reaches 2^(emax+1) (RNE)
                 resp. ±max-finite (RZ) — IEEE 754 overflow rules.

Modes of :func:`round_fraction`: ``"rne"`` round to nearest, ties to even; ``"rz"`` toward zero;
``"rz_inf"`` toward zero but overflow gives ±Inf (the tensor-core fp32 output rule,
docs/emulator.md); ``"ro"`` to odd. :func:`round_fraction_directed` takes the PTX modifiers
:data:`ROUNDING_MODES` (``rn rz rm rp``), the oracle of :mod:`refsim.arith.rounding`.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from refsim._validate import require_choice, require_fields
from refsim.errors import DtypeError, FormatRuleError, NonFiniteError

__all__ = ["FloatFormat", "F16", "BF16", "F32", "F64", "ROUNDING_MODES", "round_fraction", "round_fraction_directed",
           "round_to_float", "to_fraction", "from_fraction"]


@dataclass(frozen=True)
class FloatFormat:
    """A binary IEEE-like format: ``precision`` significand bits (with the hidden bit)."""

    name: str
    precision: int
    emin: int
    emax: int
    dtype: object

    def __post_init__(self):
        require_fields(self)
        if not 2 <= self.precision <= MAX_PRECISION or not -MAX_EXPONENT <= self.emin < 0 < self.emax <= MAX_EXPONENT:
            raise FormatRuleError(f"{self.name}: precision must lie in [2, {MAX_PRECISION}] and emin < 0 < emax "
                                  f"within +-{MAX_EXPONENT}; got precision {self.precision}, emin {self.emin}, "
                                  f"emax {self.emax}")


#: bounds of a :class:`FloatFormat` (octuple precision has 237 bits and emax 262143): the exact
#: rationals of :func:`round_fraction` stay a few hundred kilobits at most
MAX_PRECISION = 1024
MAX_EXPONENT = 1 << 20


F16 = FloatFormat("float16", 11, -14, 15, np.float16)
F32 = FloatFormat("float32", 24, -126, 127, np.float32)
F64 = FloatFormat("float64", 53, -1022, 1023, np.float64)


BF16 = FloatFormat("bfloat16", 8, -126, 127, None)
_FORMAT_OF = {f.name: f for f in (F16, F32, F64, BF16)}


def _floor_log2(x: Fraction) -> int:
    """floor(log2(x)) for a positive Fraction, exactly."""
    e = x.numerator.bit_length() - x.denominator.bit_length()
    # now 2^(e-1) < x < 2^(e+1); fix up by one comparison
    if x >= Fraction(2) ** e:
        return e
    return e - 1


_MODES = ("rne", "rz", "rz_inf", "ro")
#: the PTX rounding modifiers ``.rn .rz .rm .rp`` (nearest-even, toward zero, toward -Inf, toward
#: +Inf): the modes of :func:`round_fraction_directed` and of :mod:`refsim.arith.rounding`
ROUNDING_MODES = ("rn", "rz", "rm", "rp")


def round_fraction(x: Fraction, fmt: FloatFormat, mode: str = "rne") -> Fraction | float:
    """Round the exact value ``x`` to ``fmt``; returns a Fraction, or ``±inf`` (a float) on overflow.

    The sign of a zero result is not represented (Fraction has no -0); callers decide it.
    ``x``: a Fraction or an int (exact values only); ``fmt``: a :class:`FloatFormat`;
    ``mode``: "rne", "rz", "rz_inf" or "ro".

    Integer arithmetic on ``|x| = a / b``: ``e = max(floor(log2 |x|), emin)`` is the binade,
    ``2^s`` with ``s = e - precision + 1`` the last place there, ``n, r = divmod(a, b · 2^s)`` the
    kept units and the remainder (``2r`` against ``b · 2^s`` is the half-way test); the result is
    ``n · 2^s``. :func:`_round_fraction_rational` is the same rounding written with Fraction
    arithmetic throughout, kept as the readable reference and tested equal.
    """
    require_choice("mode", mode, _MODES)
    if not isinstance(fmt, FloatFormat):
        raise FormatRuleError(f"fmt: must be a FloatFormat (F16, BF16, F32, F64); got {type(fmt).__name__}")
    if isinstance(x, Fraction):
        a, b = x.numerator, x.denominator
    elif isinstance(x, bool) or not isinstance(x, (int, np.integer)):
        raise FormatRuleError(f"x: must be an exact value (Fraction or int); got {type(x).__name__}")
    else:
        a, b = int(x), 1
    if a == 0:
        return Fraction(0)
    sign = -1 if a < 0 else 1
    a = abs(a)
    e = a.bit_length() - b.bit_length()            # 2^(e-1) < a/b < 2^(e+1)
    if (a < b << e) if e >= 0 else (a << -e < b):
        e -= 1                                      # a/b < 2^e: floor(log2) is e - 1
    s = max(e, fmt.emin) - fmt.precision + 1
    num, den = (a, b << s) if s >= 0 else (a << -s, b)
    n, r = divmod(num, den)
    if mode == "rne":
        if 2 * r > den or (2 * r == den and n & 1):
            n += 1
    elif mode == "ro":
        if r and not n & 1:
            n += 1
    t = fmt.emax + 1 - s
    if (n >> t if t >= 0 else n):                   # n · 2^s >= 2^(emax+1): overflow
        if mode == "rz":
            return sign * (Fraction(2) ** (fmt.emax + 1) - Fraction(2) ** (fmt.emax - fmt.precision + 1))
        return float(sign) * float("inf")
    return Fraction(sign * (n << s)) if s >= 0 else Fraction(sign * n, 1 << -s)


def _round_fraction_rational(x: Fraction, fmt: FloatFormat, mode: str = "rne") -> Fraction | float:
    """:func:`round_fraction` in plain Fraction arithmetic (the readable reference; same checks
    left to the caller). Tested equal to it."""
    if not isinstance(x, Fraction):
        x = Fraction(int(x))
    if x == 0:
        return Fraction(0)
    sign = -1 if x < 0 else 1
    ax = abs(x)
    e = max(_floor_log2(ax), fmt.emin)
    q = Fraction(2) ** (e - fmt.precision + 1)
    scaled = ax / q
    n = scaled.numerator // scaled.denominator
    rem = scaled - n
    if mode == "rne":
        if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and n % 2 == 1):
            n += 1
    elif mode == "ro":
        if rem != 0 and n % 2 == 0:
            n += 1
    r = n * q
    limit = Fraction(2) ** (fmt.emax + 1)
    if r >= limit:
        if mode == "rz":
            return sign * (limit - Fraction(2) ** (fmt.emax - fmt.precision + 1))
        return float(sign) * float("inf")
    return sign * r


def round_fraction_directed(x: Fraction, fmt: FloatFormat, mode: str) -> Fraction | float:
    """Round the exact rational ``x`` (nonzero) to ``fmt`` in one of :data:`ROUNDING_MODES` (oracle, scalar).

    Returns a Fraction, or a float ±inf on overflow per the IEEE rule of the mode (rn -> ±Inf;
    rz -> ±max; rm -> +max / -Inf; rp -> +Inf / -max). The oracle of :mod:`refsim.arith.rounding`:
    'rn' is :func:`round_fraction` "rne", the others truncate and step one unit away from zero
    when the mode points away from zero and the value was inexact.
    """
    mode = require_choice("mode", mode, ROUNDING_MODES)
    if mode == "rn":
        return round_fraction(x, fmt, "rne")
    r = round_fraction(x, fmt, "rz")          # checks x and fmt; magnitude truncated (or ±max on overflow)
    neg = x < 0
    away = {"rz": False, "rm": neg, "rp": not neg}[mode]
    if isinstance(r, float):
        r = Fraction(-1 if neg else 1) * (Fraction(2) ** (fmt.emax + 1) - Fraction(2) ** (fmt.emax - fmt.precision + 1))
    if away and r != x:
        ax = abs(r)
        e = max(_floor_log2(ax), fmt.emin) if ax else fmt.emin
        ulp = Fraction(2) ** (e - fmt.precision + 1)
        ax = ax + ulp
        if ax >= Fraction(2) ** (fmt.emax + 1):
            return float("-inf") if neg else float("inf")
        r = -ax if neg else ax
    return r


def round_to_float(x: Fraction, dtype) -> np.generic:
    """The one home of "round an exact rational to a float": the nearest ``dtype`` value
    (float16, float32, float64 or bfloat16) to ``x``, ties to even, overflow to ±inf; an exact
    zero gives +0 (Fraction carries no sign; callers that need -0 decide it themselves).
    Used by every format and kernel oracle that rounds an exact result once."""
    dt = _float_dtype(dtype)
    fmt = _FORMAT_OF.get(dt.name)
    if fmt is None:
        raise DtypeError(f"dtype: must be float16, float32, float64 or bfloat16; got {dt}")
    if isinstance(x, bool) or not isinstance(x, (Fraction, int, float, np.integer, np.floating)):
        raise FormatRuleError(f"x: must be a Fraction or a finite number; got {type(x).__name__}")
    if not isinstance(x, Fraction):
        if not np.isfinite(x):
            raise NonFiniteError(f"x: must be finite (an exact value); got {x!r}")
        x = Fraction(int(x)) if isinstance(x, (int, np.integer)) else Fraction(float(x))
    r = round_fraction(x, fmt, "rne")
    return from_fraction(r, dt)


def to_fraction(x) -> Fraction:
    """The exact value of a finite NumPy/Python float scalar (float16/32/64, bfloat16) or of an
    integer (exact, never through float). NaN/Inf raise NonFiniteError."""
    if isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_)):
        return Fraction(int(x))
    if not (isinstance(x, (float, np.floating)) or (isinstance(x, np.generic) and x.dtype.name == "bfloat16")):
        raise FormatRuleError(f"x: must be a float or integer scalar; got {type(x).__name__}")
    f = float(x)
    if f != f or f in (float("inf"), float("-inf")):
        raise NonFiniteError(f"x: must be finite (an exact value); got {x!r}")
    return Fraction(f)


def _float_dtype(dtype) -> np.dtype:
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise DtypeError(f"dtype: must be a floating dtype; got {dtype!r}") from None
    if dt.kind != "f" and dt.name != "bfloat16":
        raise DtypeError(f"dtype: must be a floating dtype (float16, float32, float64, bfloat16); got {dt}")
    return dt


def from_fraction(x: Fraction | float, dtype) -> np.generic:
    """Convert an already-representable value (output of :func:`round_fraction`) to ``dtype``.

    ``Fraction -> float`` is correctly rounded in Python, and the value is representable in
    float64 for every format here, so the conversion is exact. ``dtype`` must be a float dtype
    (float16/float32/float64 or bfloat16): an integer dtype would truncate.
    """
    dt = _float_dtype(dtype)
    if not isinstance(x, (Fraction, float, int)) or isinstance(x, bool):
        raise FormatRuleError(f"x: must be a Fraction or float; got {type(x).__name__}")
    return np.asarray(float(x), dtype=np.float64).astype(dt)[()]
