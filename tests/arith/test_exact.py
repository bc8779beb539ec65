"""refsim.arith.exact.round_fraction: the integer form against hand-worked values and against
its Fraction-arithmetic reference (_round_fraction_rational)."""

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from refsim.arith import exact
from refsim.errors import FormatRuleError

FORMATS = (exact.F16, exact.BF16, exact.F32, exact.F64)
MODES = ("rn", "rz", "rm", "rp", "ro", "rz_inf")


@pytest.mark.parametrize("x, fmt, mode, want", [
    (Fraction(2049), exact.F16, "rn", Fraction(2048)),      # tie, 2048 even -> down
    (Fraction(2051), exact.F16, "rn", Fraction(2052)),      # tie, 2050 odd -> up
    (Fraction(2049), exact.F16, "ro", Fraction(2050)),       # inexact, even -> odd neighbour
    (Fraction(2051), exact.F16, "rz", Fraction(2050)),
    (Fraction(-2051), exact.F16, "rz", Fraction(-2050)),
    (Fraction(1, 3), exact.F16, "rn", Fraction(1365, 4096)),   # 0.0101.. (11 bits) -> 1365/4096
    (Fraction(1, 2 ** 25), exact.F16, "rn", Fraction(0)),      # half the smallest subnormal, tie to 0
    (Fraction(3, 2 ** 26), exact.F16, "rn", Fraction(1, 2 ** 24)),   # 0.75 of it -> up
    (Fraction(65520), exact.F16, "rn", float("inf")),          # rounds to 2^16: overflow
    (Fraction(65519), exact.F16, "rn", Fraction(65504)),
    (Fraction(10 ** 6), exact.F16, "rz", Fraction(65504)),      # rz saturates at max
    (Fraction(-10 ** 6), exact.F16, "rz_inf", float("-inf")),
    (7, exact.F32, "rn", Fraction(7)),                          # int input
    (Fraction(2 ** 24 + 1), exact.F32, "rn", Fraction(2 ** 24)),
    (Fraction(2051), exact.F16, "rm", Fraction(2050)),       # spacing 2 in [2048, 4096): down
    (Fraction(2051), exact.F16, "rp", Fraction(2052)),
    (Fraction(-2051), exact.F16, "rm", Fraction(-2052)),     # toward -Inf: away from zero
    (Fraction(-2051), exact.F16, "rp", Fraction(-2050)),
    (Fraction(2050), exact.F16, "rp", Fraction(2050)),       # exact: no step
    (Fraction(10 ** 6), exact.F16, "rm", Fraction(65504)),   # IEEE overflow: toward zero -> max
    (Fraction(10 ** 6), exact.F16, "rp", float("inf")),
    (Fraction(-10 ** 6), exact.F16, "rm", float("-inf")),
    (Fraction(-10 ** 6), exact.F16, "rp", Fraction(-65504)),
    (Fraction(65505), exact.F16, "rp", float("inf")),        # steps past max: +Inf
])
def test_hand_worked(x, fmt, mode, want):
    got = exact.round_fraction(x, fmt, mode)
    assert type(got) is type(want) and got == want


def test_refusals():
    with pytest.raises(FormatRuleError, match="exact value"):
        exact.round_fraction(0.5, exact.F16)
    with pytest.raises(FormatRuleError, match="FloatFormat"):
        exact.round_fraction(Fraction(1), "float16")


def _dyadic(fmt):
    return st.builds(lambda m, e: Fraction(m) * Fraction(2) ** e,
                     st.integers(-(2 ** (fmt.precision + 3)), 2 ** (fmt.precision + 3)),
                     st.integers(fmt.emin - fmt.precision - 6, fmt.emax + 4))


@st.composite
def _cases(draw):
    fmt = draw(st.sampled_from(FORMATS))
    x = draw(st.one_of(_dyadic(fmt),
                       st.fractions(),
                       st.builds(Fraction, st.integers(-10 ** 40, 10 ** 40), st.integers(1, 10 ** 40)),
                       st.integers(-(2 ** 1100), 2 ** 1100)))
    return x, fmt, draw(st.sampled_from(MODES))


@settings(max_examples=400, deadline=None)
@given(_cases())
def test_integer_form_equals_fraction_reference(case):
    x, fmt, mode = case
    got = exact.round_fraction(x, fmt, mode)
    want = exact._round_fraction_rational(x, fmt, mode)
    assert type(got) is type(want) and got == want


def test_every_f16_tie_and_neighbour():
    """Every float16 value v and the midpoints around it, both signs: RNE of the midpoint is the
    neighbour with an even significand (checked against NumPy's own float64 -> float16 cast)."""
    v = np.arange(0, 0x7C00, dtype=np.uint16).view(np.float16).astype(np.float64)
    mids = (v[:-1] + v[1:]) / 2                          # exact in float64
    for x in mids[::7]:
        want = np.float64(np.float16(x))
        got = exact.round_fraction(Fraction(float(x)), exact.F16, "rn")
        assert float(got) == want
        got_neg = exact.round_fraction(-Fraction(float(x)), exact.F16, "rn")
        assert float(got_neg) == -want


def test_round_to_float_f16_ties_to_even_and_overflows():
    assert exact.round_to_float(Fraction(2049), np.float16) == np.float16(2048)  # tie -> even
    assert exact.round_to_float(Fraction(2051), np.float16) == np.float16(2052)
    assert exact.round_to_float(Fraction(2049) + Fraction(1, 1 << 40), np.float16) == np.float16(2050)
    assert np.isinf(exact.round_to_float(Fraction(65520), np.float16))
    assert exact.round_to_float(Fraction(65519), np.float16) == np.float16(65504)
