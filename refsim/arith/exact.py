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

One vocabulary of rounding modes for all of refsim (:data:`MODES`): the PTX modifiers
:data:`ROUNDING_MODES` ``"rn"`` (nearest, ties to even), ``"rz"`` (toward zero), ``"rm"`` (toward
-Inf), ``"rp"`` (toward +Inf), with IEEE 754 overflow (rn -> ±Inf; rz -> ±max; rm -> +max / -Inf;
rp -> +Inf / -max), and two that hardware uses inside an operation: ``"ro"`` (to odd, the sticky
rounding of a wider intermediate) and ``"rz_inf"`` (toward zero, but overflow gives ±Inf: the
tensor-core fp32 output rule, docs/emulator.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from refsim._validate import require_choice, require_fields
from refsim.errors import DtypeError, FormatRuleError, NonFiniteError

__all__ = ["FloatFormat", "F16", "BF16", "F32", "F64", "ROUNDING_MODES", "MODES", "round_fraction",
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


#: the PTX rounding modifiers ``.rn .rz .rm .rp`` (nearest-even, toward zero, toward -Inf, toward
#: +Inf): the modes of PTX instructions and of :mod:`refsim.arith.rounding`
ROUNDING_MODES = ("rn", "rz", "rm", "rp")
#: every mode :func:`round_fraction` takes: the PTX modes, round-to-odd and the tensor-core output rule
MODES = ROUNDING_MODES + ("ro", "rz_inf")


def _steps_up(mode: str, negative: bool, n: int, inexact: bool, twice_rem_vs_unit: int) -> bool:
    """Whether the truncated magnitude ``n`` (of a value with the sign ``negative``) steps one unit
    away from zero under ``mode``; ``twice_rem_vs_unit``: the sign of (2·remainder - unit)."""
    if mode == "rn":
        return twice_rem_vs_unit > 0 or (twice_rem_vs_unit == 0 and n & 1 == 1)
    if mode == "ro":
        return inexact and n & 1 == 0
    if mode in ("rm", "rp"):
        return inexact and negative == (mode == "rm")
    return False                                   # rz, rz_inf: truncate


def _overflow(mode: str, sign: int, fmt: FloatFormat) -> Fraction | float:
    """The result of a value whose rounded magnitude reaches 2^(emax+1): ±max-finite where the mode
    rounds toward zero for that sign (rz; rm for positives; rp for negatives), else ±Inf."""
    toward_zero = mode == "rz" or (mode == "rm" and sign > 0) or (mode == "rp" and sign < 0)
    if toward_zero:
        return sign * (Fraction(2) ** (fmt.emax + 1) - Fraction(2) ** (fmt.emax - fmt.precision + 1))
    return float(sign) * float("inf")


def round_fraction(x: Fraction, fmt: FloatFormat, mode: str = "rn") -> Fraction | float:
    """Round the exact value ``x`` to ``fmt``; returns a Fraction, or ``±inf`` (a float) on overflow.

    The sign of a zero result is not represented (Fraction has no -0); callers decide it.
    ``x``: a Fraction or an int (exact values only); ``fmt``: a :class:`FloatFormat`;
    ``mode``: one of :data:`MODES` (module spec: the PTX modes with IEEE overflow, "ro", "rz_inf").

    Integer arithmetic on ``|x| = a / b``: ``e = max(floor(log2 |x|), emin)`` is the binade,
    ``2^s`` with ``s = e - precision + 1`` the last place there, ``n, r = divmod(a, b · 2^s)`` the
    kept units and the remainder (``2r`` against ``b · 2^s`` is the half-way test); the result is
    ``n · 2^s``. :func:`_round_fraction_rational` is the same rounding written with Fraction
    arithmetic throughout, kept as the readable reference and tested equal.
    """
    mode = require_choice("mode", mode, MODES)
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
    if _steps_up(mode, sign < 0, n, r != 0, (2 * r > den) - (2 * r < den)):
        n += 1
    t = fmt.emax + 1 - s
    if (n >> t if t >= 0 else n):                   # n · 2^s >= 2^(emax+1): overflow
        return _overflow(mode, sign, fmt)
    return Fraction(sign * (n << s)) if s >= 0 else Fraction(sign * n, 1 << -s)


def _round_fraction_rational(x: Fraction, fmt: FloatFormat, mode: str = "rn") -> Fraction | float:
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
    half = Fraction(1, 2)
    if mode == "rn":
        up = rem > half or (rem == half and n % 2 == 1)
    elif mode == "ro":
        up = rem != 0 and n % 2 == 0
    elif mode == "rm":
        up = rem != 0 and sign < 0
    elif mode == "rp":
        up = rem != 0 and sign > 0
    else:
        up = False
    r = (n + up) * q
    limit = Fraction(2) ** (fmt.emax + 1)
    if r >= limit:
        toward_zero = mode == "rz" or (mode == "rm" and sign > 0) or (mode == "rp" and sign < 0)
        return sign * (limit - Fraction(2) ** (fmt.emax - fmt.precision + 1)) if toward_zero \
            else float(sign) * float("inf")
    return sign * r


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
    r = round_fraction(x, fmt, "rn")
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
