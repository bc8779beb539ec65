"""Integer mma: the vectorised sum equals its plain loop with Python integers; int32 wraps, or
saturates with ``.satfinite``, at the hand-worked edges; out-of-range codes are refused."""

from __future__ import annotations

import numpy as np
import pytest

from refsim.arith import integer_mma as im
from refsim.errors import FormatRuleError
from refsim.testing import assert_bitexact


def test_integer_mma_wraps_or_saturates():
    rng = np.random.default_rng(2)
    A = rng.integers(-8, 8, (16, 64)).astype(np.int8)
    B = rng.integers(-8, 8, (64, 8)).astype(np.int8)
    C = rng.integers(-(2**31), 2**31, (16, 8), dtype=np.int64).astype(np.int32)
    assert_bitexact(im.mma_int(A, B, C), im.mma_int_reference(A, B, C))
    assert_bitexact(im.mma_int(A, B, C, satfinite=True), im.mma_int_reference(A, B, C, satfinite=True))
    top = np.full((1, 1), 2**31 - 1, np.int32)
    one = np.ones((1, 1), np.int8)
    assert im.mma_int(one, one, top)[0, 0] == -(2**31)
    assert im.mma_int(one, one, top, satfinite=True)[0, 0] == 2**31 - 1


def test_out_of_range_codes_are_refused_naming_the_type():
    with pytest.raises(FormatRuleError, match=r"A: s4 values must lie in \[-8, 7\]; got 9"):
        im.mma_int(np.full((1, 1), 9, np.int8), np.ones((1, 1), np.int8), np.zeros((1, 1), np.int32))
    with pytest.raises(FormatRuleError, match=r"B: u4 values must lie in \[0, 15\]; got -1"):
        im.mma_int(np.ones((1, 1), np.int8), np.full((1, 1), -1, np.int8), np.zeros((1, 1), np.int32), btype="u4")


@pytest.mark.parametrize("fn", [im.mma_int, im.mma_int_reference])
def test_satfinite_must_be_a_bool_not_an_array(fn):
    A, B, C = np.zeros((16, 64), np.int8), np.zeros((64, 8), np.int8), np.zeros((16, 8), np.int32)
    with pytest.raises(FormatRuleError, match=r"satfinite: must be True or False; got array"):
        fn(A, B, C, satfinite=np.array([True, False]))
