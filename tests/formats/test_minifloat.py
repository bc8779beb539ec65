"""Minifloat element formats: every cast and decode equal to ml_dtypes' (goldens in data/), the plain
reference equal to the integer fast path, the rounding, overflow and NaN rules by hand, refusals."""

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from refsim.errors import DtypeError, FormatRuleError, NonFiniteError
from refsim.formats import minifloat as mf
from refsim.testing import assert_bitexact, examples

GOLDENS = np.load(Path(__file__).parent / "data" / "fp8_mx_goldens.npz")
RULE = {name: "inf" if f.has_inf else ("nan" if f.nan != "none" else "saturate") for name, f in mf.FORMATS.items()}


def _golden_input(name: str) -> np.ndarray:
    x = GOLDENS["cast_x"]
    return x if mf.FORMATS[name].nan != "none" else np.where(np.isnan(x), np.float32(0), x)  # as generated


@pytest.mark.parametrize("name", list(mf.FORMATS))
def test_encode_equals_ml_dtypes_astype_on_every_golden_input(name):
    assert_bitexact(mf.encode(_golden_input(name), name, RULE[name]), GOLDENS[f"cast_{name}"], name=name)


@pytest.mark.parametrize("name", list(mf.FORMATS))
def test_decode_equals_ml_dtypes_for_every_code(name):
    n = 1 << mf.FORMATS[name].bits
    assert_bitexact(mf.decode(np.arange(n, dtype=np.uint8), name), GOLDENS[f"decode_{name}"], name=name)


@pytest.mark.parametrize("name", list(mf.FORMATS))
def test_encode_reference_equals_encode_on_the_ties_and_their_neighbours(name):
    x = _golden_input(name)[2048:11066:3]           # past the random part: values, midpoints, next floats
    for rule in mf.OVERFLOW_RULES:
        if rule == "inf" and not mf.FORMATS[name].has_inf or rule == "nan" and mf.FORMATS[name].nan == "none":
            continue
        assert_bitexact(mf.encode_reference(x, name, rule), mf.encode(x, name, rule), name=f"{name} {rule}")


@pytest.mark.parametrize("name", list(mf.FORMATS))
def test_decode_reference_equals_decode_for_every_byte(name):
    codes = np.arange(256, dtype=np.uint8)
    assert_bitexact(mf.decode_reference(codes, name), mf.decode(codes, name), name=name)


@settings(max_examples=examples(40), deadline=None)
@given(bits=arrays(np.uint32, st.integers(1, 12), elements=st.integers(0, 2**32 - 1)),
       name=st.sampled_from(list(mf.FORMATS)), rule=st.sampled_from(mf.OVERFLOW_RULES))
def test_encode_reference_equals_encode_on_any_float32_bits(bits, name, rule):
    f = mf.FORMATS[name]
    if rule == "inf" and not f.has_inf or rule == "nan" and f.nan == "none":
        rule = "saturate"
    x = bits.view(np.float32)
    if f.nan == "none":
        x = np.where(np.isnan(x), np.float32(1), x)
    assert_bitexact(mf.encode_reference(x, name, rule), mf.encode(x, name, rule))


# ---- the rules, worked by hand -------------------------------------------------------------------
@pytest.mark.parametrize("value,code", [
    (1.0625, 0x38),      # tie between 1.0 (0x38) and 1.125 (0x39): the even code
    (1.1875, 0x3A),      # tie between 1.125 (0x39) and 1.25 (0x3A): the even code
    (2.0**-10, 0x00),    # half the smallest subnormal 2^-9: tie, goes to 0
    (3 * 2.0**-10, 0x02),  # tie between subnormals 1 and 2 (x 2^-9): 2
    (464.0, 0x7E),       # the overflow tie goes to max 448 (0x7E is even)
    (-0.0, 0x80),
])
def test_e4m3_rounds_to_nearest_even_code(value, code):
    assert mf.encode(np.array([value], np.float32), "e4m3", "nan")[0] == code


def test_e4m3_overflow_is_nan_or_max_by_rule():
    x = np.array([465.0, -465.0, np.inf, -np.inf, np.nan], np.float32)
    assert list(mf.encode(x, "e4m3", "nan")) == [0x7F, 0xFF, 0x7F, 0xFF, 0x7F]
    assert list(mf.encode(x, "e4m3", "saturate")) == [0x7E, 0xFE, 0x7E, 0xFE, 0x7F]


def test_e5m2_overflow_tie_goes_to_inf_and_nan_is_0x7e():
    x = np.array([61439.0, 61440.0, -61440.0, np.nan], np.float32)
    assert list(mf.encode(x, "e5m2", "inf")) == [0x7B, 0x7C, 0xFC, 0x7E]     # 57344 is 0x7B (odd)
    assert list(mf.encode(x, "e5m2", "saturate")) == [0x7B, 0x7B, 0xFB, 0x7E]


def test_fnuz_has_no_negative_zero_and_one_nan():
    x = np.array([-0.0, -1e-9, 250.0, -np.inf, np.nan], np.float32)   # 250 > the tie 248
    assert list(mf.encode(x, "e4m3fnuz", "nan")) == [0x00, 0x00, 0x80, 0x80, 0x80]
    assert mf.decode(np.array([0x80], np.uint8), "e4m3fnuz")[0].view(np.uint32) == 0xFFC00000


def test_float64_input_is_rounded_to_float32_first_as_ml_dtypes_and_torch_do():
    x = np.array([1.0625 + 2.0**-40], np.float64)       # float32: 1.0625 exactly, then the e4m3 tie -> 1.0
    assert mf.encode(x, "e4m3", "nan")[0] == 0x38
    assert GOLDENS["cast64_e4m3"][0] == 0x38                # ml_dtypes agrees (first golden input)


def test_fp4_saturates_and_keeps_the_sign_of_zero():
    x = np.array([7.0, -100.0, np.inf, -0.0, 5.0, 0.25], np.float32)
    assert list(mf.encode(x, "e2m1", "saturate")) == [0x7, 0xF, 0x7, 0x8, 0x6, 0x0]   # 5 -> 4 and 0.25 -> 0: ties


def test_decode_ignores_bits_above_the_element():
    assert mf.decode(np.array([0x47, 0x07], np.uint8), "e2m1").tolist() == [6.0, 6.0]


# ---- refusals ---------------------------------------------------------------------------------------
def test_bad_arguments_are_refused_with_named_errors():
    x = np.ones(4, np.float32)
    with pytest.raises(FormatRuleError, match="fmt"):
        mf.encode(x, "e4m4", "nan")
    with pytest.raises(FormatRuleError, match="no Inf"):
        mf.encode(x, "e4m3", "inf")
    with pytest.raises(FormatRuleError, match="no NaN"):
        mf.encode(x, "e2m1", "nan")
    with pytest.raises(FormatRuleError, match="overflow"):
        mf.encode(x, "e4m3", "wrap")
    with pytest.raises(NonFiniteError, match="NaN"):
        mf.encode(np.array([np.nan], np.float32), "e2m3", "saturate")
    with pytest.raises(DtypeError):
        mf.encode(np.ones(4, np.int32), "e4m3", "nan")
    with pytest.raises(DtypeError):
        mf.decode(np.ones(4, np.float32), "e4m3")
    with pytest.raises(DtypeError):
        mf.decode(np.ones(4, np.int16), "e4m3")
