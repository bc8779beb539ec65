"""Bit-exact comparison: raw bits, never values, with a mismatch report a kernel author can act on.

``assert_bitexact(actual, expected)`` compares raw bits (``view(uint)``): ``+0`` and ``-0`` differ,
two NaNs with different payloads differ, and a mismatch report names the coordinates, both hex
patterns and, for floats, the distance in units in the last place (ULP) between the two values
along the ordered float line (:func:`ulp_distance`).

    actual   0x3cb0 (1.17188)       ordered line: ... -1ulp | -0 = +0 | +1ulp ...
    expected 0x3cb1 (1.17285)   ->  distance 1 ULP
"""

from __future__ import annotations

import numpy as np

from refsim._validate import MAX_ELEMENTS, native_byte_order, plain_ndarray, require_element_count
from refsim.arith.admissible import AdmissibleSet
from refsim.arith.fp import raw_bits
from refsim.errors import DtypeError, ShapeError

__all__ = ["assert_bitexact", "ulp_distance", "BitMismatch"]



class BitMismatch(AssertionError):
    """Raised by :func:`assert_bitexact`; the message is the full mismatch report."""


_raw_bits = raw_bits


def _is_float(dtype: np.dtype) -> bool:
    if np.issubdtype(dtype, np.floating):
        return True
    try:
        import ml_dtypes

        return dtype in (np.dtype(ml_dtypes.bfloat16),)
    except ImportError:  # pragma: no cover - ml_dtypes is a core dependency
        return False


def _float_operand(name: str, x) -> np.ndarray:
    """``x`` as a float ndarray (lists and scalars converted) in native byte order, sized first."""
    x = x if isinstance(x, np.ndarray) else np.asarray(x)
    x = native_byte_order(plain_ndarray(require_element_count(name, x, MAX_ELEMENTS)))
    if not _is_float(x.dtype):
        raise DtypeError(f"{name}: ulp_distance compares float16, bfloat16, float32 or float64; got {x.dtype}")
    return x


def _ordered(bits: np.ndarray, width: int) -> np.ndarray:
    """Map sign-magnitude float bit patterns to integers that increase with the float value.

    -0 and +0 both map to 0, so their ULP distance is 0 although their bits differ. Returned as
    int64 for widths below 64 and as Python ints (object) for 64-bit floats, so that distances
    across the whole float64 range cannot overflow.
    """
    utype = bits.dtype.type
    magnitude = (bits & utype((1 << (width - 1)) - 1)).astype(np.int64)
    negative = (bits >> utype(width - 1)) != 0
    ordered = np.where(negative, -magnitude, magnitude)
    return ordered.astype(object) if width == 64 else ordered


def ulp_distance(actual: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """Elementwise distance in ULPs between two float arrays of the same dtype.

    Shapes: broadcastable; dtype: float16, bfloat16, float32 or float64 (both the same).
    Returns int64 (Python ints in an object array for float64). NaN operands give -1.
    """
    actual, expected = _float_operand("actual", actual), _float_operand("expected", expected)
    if actual.dtype != expected.dtype:
        raise DtypeError(f"ulp_distance: dtypes differ ({actual.dtype} vs {expected.dtype})")
    try:
        np.broadcast_shapes(actual.shape, expected.shape)
    except ValueError:
        raise ShapeError(f"ulp_distance: shapes must broadcast; got {actual.shape} and {expected.shape}") from None
    width = actual.dtype.itemsize * 8
    a = _ordered(_raw_bits(actual), width)
    e = _ordered(_raw_bits(expected), width)
    dist = np.abs(a - e)
    nan = np.isnan(actual.astype(np.float64)) | np.isnan(expected.astype(np.float64))
    return np.where(nan, -1, dist)


def assert_bitexact(actual, expected, name: str = "array", max_report: int = 10) -> str | None:
    """Assert that two arrays have identical dtype, shape and raw bits.

    On failure raises :class:`BitMismatch` (an ``AssertionError``) whose message gives the
    number of mismatched elements, the first ``max_report`` (≤ 10 by default) coordinates with
    both hex bit patterns and values, and, for floats, the ULP distance of each and the maximum.

    ``expected`` may be a :class:`refsim.arith.admissible.AdmissibleSet` (an output the hardware
    may compute in several orders): every element must equal one admissible value; the return
    value then says so ("in the admissible set of 24 orders; equal to refsim's ascending order:
    no") and a failure reports the elements outside the set against refsim's ascending answer.
    """
    if isinstance(expected, AdmissibleSet):
        actual = np.asarray(actual)
        if actual.dtype == expected.dtype and actual.shape == expected.shape and expected.contains(actual).all():
            return f"{name}: {expected.verdict(actual)}"
        outside = (np.where(expected.contains(actual), expected.reference, actual)
                   if actual.dtype == expected.dtype and actual.shape == expected.shape else actual)
        try:
            assert_bitexact(outside, expected.reference, name, max_report)
        except BitMismatch as err:
            raise BitMismatch(f"{err}\n  (these elements are outside the admissible set of {expected.orders} "
                              f"orders; 'expected' is refsim's ascending order)") from None
        raise BitMismatch(f"{name}: {expected.verdict(actual)}")
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    if actual.dtype != expected.dtype:
        raise BitMismatch(f"{name}: dtype differs: actual {actual.dtype}, expected {expected.dtype}")
    if actual.shape != expected.shape:
        raise BitMismatch(f"{name}: shape differs: actual {actual.shape}, expected {expected.shape}")
    if actual.dtype.kind in "OUSV":
        raise TypeError(f"assert_bitexact: unsupported dtype {actual.dtype}")
    a_bits = _raw_bits(actual)
    e_bits = _raw_bits(expected)
    bad = a_bits != e_bits
    n_bad = int(bad.sum())
    if n_bad == 0:
        return
    is_float = _is_float(actual.dtype)
    hex_digits = actual.dtype.itemsize * 2
    coords = np.argwhere(bad)[:max_report]
    lines = [
        f"{name}: {n_bad} of {actual.size} elements differ in their bits "
        f"(dtype {actual.dtype}, shape {actual.shape})"
    ]
    if is_float:
        ulps = ulp_distance(actual[bad], expected[bad])
        lines.append(f"  max ULP distance among mismatches: {int(ulps.max())}")
    for c in coords:
        idx = tuple(int(i) for i in c)
        av, ev = actual[idx], expected[idx]
        ab, eb = int(a_bits[idx]), int(e_bits[idx])
        line = f"  at {idx}: actual 0x{ab:0{hex_digits}x} ({av!r}), expected 0x{eb:0{hex_digits}x} ({ev!r})"
        if is_float:
            line += f", {int(ulp_distance(np.asarray(av), np.asarray(ev)))} ULP"
        else:
            line += f", difference {int(av) - int(ev)}"
        lines.append(line)
    if n_bad > len(coords):
        lines.append(f"  ... and {n_bad - len(coords)} more")
    raise BitMismatch("\n".join(lines))
