"""Property tests: T-FDPA equals the exact sum when nothing can round, and stays within the model's
error bound (and on the documented side) otherwise; fp primitives equal exact rounding."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from refsim.arith import fp
from refsim.arith import tensor_core as tc
from refsim.testing import assert_bitexact, examples

ARCHS = st.sampled_from(tc.ARCHS)


@st.composite
def exact_blocks(draw):
    """Integer operands with |sum| < 2^11: every aligned term and partial sum is exact in fp16 and fp32."""
    arch = draw(ARCHS)
    L = tc.model(arch).block
    a = draw(hnp.arrays(np.int64, L, elements=st.integers(-7, 7)))
    b = draw(hnp.arrays(np.int64, L, elements=st.integers(-7, 7)))
    c = draw(st.integers(-1000, 1000))
    return arch, a, b, c


@settings(max_examples=examples(50))
@given(exact_blocks(), st.sampled_from([np.float32, np.float16]))
def test_fdpa_equals_exact_sum_when_nothing_rounds(block, out):
    arch, a, b, c = block
    exact = c + int(a @ b)
    d = tc.fdpa(arch, a.astype(np.float16), b.astype(np.float16), np.array(c, out), out)
    assert_bitexact(d, np.array(exact, out) if exact != 0 else np.array(0.0, out))


finite16 = st.floats(width=16, allow_nan=False, allow_infinity=False, min_value=-1e3, max_value=1e3)


@st.composite
def random_blocks(draw):
    arch = draw(ARCHS)
    L = tc.model(arch).block
    a = draw(hnp.arrays(np.float16, L, elements=finite16))
    b = draw(hnp.arrays(np.float16, L, elements=finite16))
    c = draw(st.floats(width=32, allow_nan=False, allow_infinity=False, min_value=-1e6, max_value=1e6))
    return arch, a, b, np.float32(c)


@settings(max_examples=examples(50))
@given(random_blocks())
def test_fdpa_error_is_within_the_model_bound_and_fp32_output_is_rounded_toward_zero(block):
    # Bound (the T-FDPA structure, docs/emulator.md): before the output conversion each of the L + 1 truncated terms lost
    # < 2^(E - F); the fp32 conversion is toward zero (< 1 ulp, never away from the truncated sum).
    arch, a, b, c = block
    m = tc.model(arch)
    d = tc.fdpa(arch, a, b, np.array(c, np.float32), np.float32)
    exact = Fraction(float(c)) + sum(Fraction(float(x)) * Fraction(float(y)) for x, y in zip(a, b))
    def e(x, emin):  # e(x) = max(floor(log2|x|), emin)
        return max(int(np.frexp(np.float64(x))[1]) - 1, emin)

    exps = [m.e_zero_f32 if x == 0 or y == 0 else e(x, -14) + e(y, -14) for x, y in zip(a, b)]
    e_c = e(c, -126) if c != 0 else m.e_zero_f32
    E = max(exps + [e_c])
    ulp = Fraction(float(np.spacing(np.abs(np.float32(d))))) if d != 0 else Fraction(2) ** -149
    bound = (m.block + 1) * Fraction(2) ** (E - m.frac_bits) + ulp
    assert abs(Fraction(float(d)) - exact) <= bound


nonneg16 = st.floats(width=16, allow_nan=False, allow_infinity=False, min_value=0, max_value=1e3)


@settings(max_examples=examples(50))
@given(ARCHS, st.data())
def test_fdpa_never_exceeds_the_exact_sum_of_non_negative_terms(arch, data):
    # truncation of every term and the fp32 round-toward-zero both move toward zero: for
    # non-negative terms the hardware result is a lower bound of the exact sum (a naive fp64
    # dot product with round-to-nearest exceeds it about half the time)
    L = tc.model(arch).block
    a = data.draw(hnp.arrays(np.float16, L, elements=nonneg16))
    b = data.draw(hnp.arrays(np.float16, L, elements=nonneg16))
    c = np.float32(data.draw(st.floats(width=32, min_value=0, max_value=1e6)))
    d = tc.fdpa(arch, a, b, np.array(c, np.float32), np.float32)
    exact = Fraction(float(c)) + sum(Fraction(float(x)) * Fraction(float(y)) for x, y in zip(a, b))
    assert Fraction(float(d)) <= exact


@settings(max_examples=examples(50))
@given(st.tuples(*[st.floats(width=32) for _ in range(3)]))
def test_fp32_fused_fma_equals_exact_single_rounding(abc):
    a, b, c = (np.array([v], np.float32) for v in abc)
    got, want = fp.f32_fma(a, b, c, fused=True), fp.fma_reference(a, b, c)
    if np.isnan(want[0]):
        assert np.isnan(got[0])
    else:
        assert_bitexact(got, want)


@settings(max_examples=examples(50))
@given(st.tuples(*[st.floats(width=16) for _ in range(3)]))
def test_fp16_fused_fma_equals_exact_single_rounding(abc):
    a, b, c = (np.array([v], np.float16) for v in abc)
    got, want = fp.f16_fma(a, b, c, fused=True), fp.fma_reference(a, b, c)
    if np.isnan(want[0]):
        assert np.isnan(got[0])
    else:
        assert_bitexact(got, want)
