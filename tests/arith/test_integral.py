"""refsim.arith.integral: both modes against exact rational rounding on ties and their neighbours,
round_half_away against its plain loop on every float16 value and float32 ties, hand values
(signed zeros, infinities, the 0.49999997 trap)."""

from fractions import Fraction

import numpy as np
import pytest

from refsim.arith.integral import (INTEGRAL_MODES, round_half_away, round_half_away_reference, round_half_even,
                                   round_to_integral)
from refsim.errors import FormatRuleError
from refsim.testing import assert_bitexact


def _round_fraction(x: Fraction, mode: str) -> int:
    f = x.numerator // x.denominator
    rem = x - f
    if rem != Fraction(1, 2):
        return f + (1 if rem > Fraction(1, 2) else 0)
    if mode == "half_even":
        return f if f % 2 == 0 else f + 1
    return f + 1 if x > 0 else f  # away from zero


@pytest.mark.parametrize("mode", INTEGRAL_MODES)
def test_round_to_integral_matches_exact_rational_rounding_on_ties_and_neighbours(mode):
    vals = []
    for base in [0, 1, 2, 3, 10, 2**21, 2**22, 2**23 - 1, 2**23, 2**24]:
        for frac in (0.5,):
            x = np.float32(base + frac)
            for y in (x, np.nextafter(x, np.float32(0)), np.nextafter(x, np.float32(np.inf))):
                vals += [y, -y]
    vals += [np.float32(0.49999997), np.float32(-0.49999997), np.float32(0.0), np.float32(-0.0)]
    x = np.array(vals, np.float32)
    got = round_to_integral(x, mode)
    expected = np.array([_round_fraction(Fraction(float(v)), mode) for v in x], np.float64)
    assert np.array_equal(got.astype(np.float64), expected), (x[got != expected], got[got != expected])


# ---- round_half_away (CUDA roundf): vectorised form vs its plain loop --------------------------
def _same_float_bits(a, b):
    nan = np.isnan(a)
    assert np.array_equal(nan, np.isnan(b)) and np.array_equal(np.signbit(a), np.signbit(b))
    assert_bitexact(a[~nan], b[~nan], "round_half_away")


@pytest.mark.parametrize("x, want", [
    (0.5, 1.0), (-0.5, -1.0), (1.5, 2.0), (2.5, 3.0), (-2.5, -3.0), (0.49999997, 0.0),
    (-0.3, -0.0), (-0.0, -0.0), (0.0, 0.0), (8388607.5, 8388608.0), (16777216.0, 16777216.0),
    (np.inf, np.inf), (-np.inf, -np.inf)])
def test_round_half_away_hand_values(x, want):
    got = round_half_away(np.array([x], np.float32))[0]
    assert got == want and np.signbit(got) == np.signbit(want)


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_round_half_away_every_f16_value_and_halfway_points(dtype):
    every = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(dtype)
    _same_float_bits(round_half_away(every), round_half_away_reference(every))
    if dtype is np.float32:
        half = (np.arange(-40000, 40000) + 0.5).astype(np.float32)     # exact ties and both neighbours
        x = np.concatenate([half, np.nextafter(half, np.float32(0)), np.nextafter(half, np.float32(np.inf)),
                            np.random.default_rng(5).integers(0, 2**32, 40000, dtype=np.uint64)
                            .astype(np.uint32).view(np.float32)])
        _same_float_bits(round_half_away(x), round_half_away_reference(x))


def test_round_half_away_float64_is_exact_and_input_untouched():
    x = np.array([0.49999999999999994, -0.49999999999999994, 2.0 ** 52 - 0.5, 2.0 ** 52 + 1])
    before = x.copy()
    got = round_half_away(x)
    assert got.tolist() == [0.0, -0.0, 2.0 ** 52, 2.0 ** 52 + 1]
    assert np.array_equal(x, before)
    _same_float_bits(got, round_half_away_reference(x))


def test_the_spec_table_and_the_mode_rule():
    x = np.array([-2.5, -0.5, 0.49999997, 1.5, 2.5], np.float32)
    assert round_to_integral(x, "half_even").tolist() == [-2.0, -0.0, 0.0, 2.0, 2.0]
    assert round_to_integral(x, "half_away").tolist() == [-3.0, -1.0, 0.0, 2.0, 3.0]
    assert np.signbit(round_half_even(np.float32([-0.5]))[0])
    with pytest.raises(FormatRuleError, match="mode: .*half_even.*got 'nearest'"):
        round_to_integral(x, "nearest")
