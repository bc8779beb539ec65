"""Rounding a float to an integral value: how a quantizer turns a scaled weight into a code.

Spec
----
modes     :data:`INTEGRAL_MODES`: ``"half_even"`` — nearest, ties to even (``np.rint``,
          ``torch.round``, PTX ``cvt.rni``); ``"half_away"`` — nearest, ties away from zero (C/CUDA
          ``roundf``, as Atom's CUDA quantizer rounds).
dtype     a float array in, the same dtype out, element by element; the sign of a zero is kept
          (-0.3 -> -0.0), ±Inf and NaN pass through.
exact     in the input's own dtype: with ``a = |x|`` and ``t = trunc(a)``, ``a - t`` is exact (the
          fraction bits of a) and ``t + 1`` is exact whenever a has a fraction (then a < 2^(p-1));
          ``floor(|x| + 0.5)`` is not: 0.49999997 + 0.5 rounds to 1 in float32.

    x          -2.5   -0.5   0.49999997   1.5   2.5
    half_even  -2.0   -0.0   0.0          2.0   2.0
    half_away  -3.0   -1.0   0.0          2.0   3.0

:func:`round_half_away_reference` is the plain per-element loop, tested equal bit for bit.
"""

from __future__ import annotations

import math

import numpy as np

from refsim._validate import require_choice, require_float_array

__all__ = ["INTEGRAL_MODES", "round_to_integral", "round_half_even", "round_half_away", "round_half_away_reference"]

#: the ways a quantizer rounds to an integer code (module spec)
INTEGRAL_MODES: tuple[str, ...] = ("half_even", "half_away")


def round_to_integral(x: np.ndarray, mode: str) -> np.ndarray:
    """``x`` (a float array) rounded to integral values in ``mode`` (one of :data:`INTEGRAL_MODES`);
    same dtype and shape."""
    mode = require_choice("mode", mode, INTEGRAL_MODES)
    return round_half_even(x) if mode == "half_even" else round_half_away(x)


def round_half_even(x: np.ndarray) -> np.ndarray:
    """Round to nearest, ties to even (``np.rint``); x a float array, same dtype out."""
    return np.rint(require_float_array("x", x))


def round_half_away(x: np.ndarray) -> np.ndarray:
    """Round to nearest, ties away from zero (C/CUDA ``roundf``); x a float array, same dtype out:
    ``copysign(trunc(|x|) + (|x| - trunc(|x|) >= 0.5), x)``, exact in x's dtype (module spec)."""
    x = require_float_array("x", x)
    a = np.abs(x, out=np.empty_like(x))                 # an array also for a 0-d x
    with np.errstate(invalid="ignore"):                 # NaN and Inf - Inf: not >= 0.5, t unchanged
        t = np.trunc(a, out=np.empty_like(a))
        up = np.subtract(a, t, out=a) >= 0.5
    t += up
    return np.copysign(t, x, out=t)


def round_half_away_reference(x: np.ndarray) -> np.ndarray:
    """Plain loop of :func:`round_half_away`: per element, the integer part t = floor(|v|) and
    one more when the fraction ``|v| - t`` (exact) is at least a half, with v's sign; back to x's
    dtype (an integer no larger than the next one up from |v|: exact). NaN and ±Inf as they are."""
    x = require_float_array("x", x)
    out = np.empty(x.shape, x.dtype)
    for i in np.ndindex(x.shape):
        v = float(x[i])
        a = abs(v)
        if not math.isfinite(a):
            out[i] = v
            continue
        t = math.floor(a)
        out[i] = math.copysign(t + 1 if a - t >= 0.5 else t, v)
    return out
