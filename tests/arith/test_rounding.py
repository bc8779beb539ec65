"""Rounding in every PTX mode: the vectorised primitives equal their plain loops over the exact
oracle (hypothesis), and hand-worked values pin the oracle itself — the spec block's worked
example and the IEEE 754 overflow rule of each mode."""

from __future__ import annotations

from fractions import Fraction

from hypothesis import given, strategies as st
import numpy as np
import pytest

from refsim.arith import exact, rounding
from refsim.testing import assert_bitexact

MODES = st.sampled_from(["rn", "rz", "rm", "rp"])


@given(st.lists(st.floats(allow_nan=False, width=64), min_size=1, max_size=20),
       st.sampled_from(["f16", "bf16", "f32"]), MODES)
def test_round_float64_matches_its_plain_loop_twin(values, fmt, mode):
    x = np.array(values, np.float64)
    assert_bitexact(rounding.round_float64(x, fmt, mode), rounding.round_float64_reference(x, fmt, mode), "round_float64")


@given(st.lists(st.floats(allow_nan=False, allow_infinity=False, width=64), min_size=1, max_size=12),
       MODES, st.sampled_from(["f16", "bf16", "f32"]))
def test_fp_add_vectorised_matches_the_fraction_twin(values, mode, fmt):
    a = rounding.round_float64(np.array(values, np.float64), fmt, "rn")
    b = np.roll(a, 1) * -0.75
    b = rounding.round_float64(b, fmt, "rn")
    assert_bitexact(rounding.fp_add(a, b, fmt, mode), rounding.fp_reference("add", (a, b), fmt, mode), "fp_add")
    assert_bitexact(rounding.fp_fma(a, b, a, fmt, mode), rounding.fp_reference("fma", (a, b, a), fmt, mode), "fp_fma")


# x = 1 + 2^-11 + 2^-40 to f16 (10 fraction bits): just above the half-way point between 1 and 1 + 2^-10
WORKED = {"rn": 1 + 2.0**-10, "rz": 1.0, "rm": 1.0, "rp": 1 + 2.0**-10}


@pytest.mark.parametrize("mode", sorted(WORKED))
def test_the_worked_example_of_the_spec_block(mode):
    x = 1 + 2.0**-11 + 2.0**-40
    assert rounding.round_float64(np.array([x, -x]), "f16", mode).tolist() == \
        [WORKED[mode], -WORKED[{"rm": "rp", "rp": "rm"}.get(mode, mode)]]
    assert exact.round_fraction(Fraction(x), exact.F16, mode) == Fraction(WORKED[mode])


# f16 max is 65504; 70000 lies past it: rn -> Inf, rz -> max, rm -> +max / -Inf, rp -> +Inf / -max
OVERFLOW = {"rn": (np.inf, -np.inf), "rz": (65504.0, -65504.0), "rm": (65504.0, -np.inf), "rp": (np.inf, -65504.0)}


@pytest.mark.parametrize("mode", sorted(OVERFLOW))
def test_overflow_follows_the_ieee_rule_of_each_mode(mode):
    assert rounding.round_float64(np.array([70000.0, -70000.0]), "f16", mode).tolist() == list(OVERFLOW[mode])
    got = [exact.round_fraction(Fraction(v), exact.F16, mode) for v in (70000, -70000)]
    assert [float(g) for g in got] == list(OVERFLOW[mode])
