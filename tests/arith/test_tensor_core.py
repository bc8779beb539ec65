"""Tensor-core models: bit for bit on real hardware measurements, directed corner vectors, errors;
hand-built tie vectors for what the hardware rows cannot pin; and properties: T-FDPA equals the exact
sum when nothing can round, and stays within the model's error bound (on the documented side) otherwise.

Expected values of the directed vectors are worked out by hand in the comments from the T-FDPA rule
(docs/emulator.md); the hardware rows are measured bits (A100, H100, V100).
"""

from __future__ import annotations

from fractions import Fraction

from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp
import numpy as np
import pytest

from refsim.arith import hw_samples as hw
from refsim.arith import tensor_core as tc
from refsim.errors import DtypeError, FormatRuleError, ShapeError
from refsim.testing import assert_bitexact, examples

SUBSET = hw.subset_path()
GPUS = list(hw.GPUS)


@pytest.mark.parametrize("gpu,arch", GPUS)
def test_fdpa_and_reference_match_committed_hardware_subset(gpu, arch):
    a, b, c, d32, d16 = hw.load(SUBSET)[gpu]
    assert_bitexact(tc.fdpa(arch, a, b, c, np.float32), d32, f"{gpu} fp32")
    assert_bitexact(tc.fdpa(arch, a, b, c.astype(np.float16), np.float16), d16, f"{gpu} fp16")
    n = 60
    assert_bitexact(tc.fdpa_reference(arch, a[:n], b[:n], c[:n], np.float32), d32[:n], f"{gpu} ref fp32")
    assert_bitexact(tc.fdpa_reference(arch, a[:n], b[:n], c[:n].astype(np.float16), np.float16),
                    d16[:n], f"{gpu} ref fp16")


def test_naive_fp64_dot_product_does_not_match_hardware():
    # the model is not trivially right: RN(c + sum) in float64 misses many rows
    a, b, c, d32, _ = hw.load(SUBSET)["A100"]
    naive = (c.astype(np.float64) + (a.astype(np.float64) * b.astype(np.float64)).sum(-1)).astype(np.float32)
    assert (naive.view(np.uint32) != d32.view(np.uint32)).mean() > 0.2


def _block(arch, pairs, c, out=np.float32):
    L = tc.model(arch).block
    a = np.zeros(L, np.float16)
    b = np.zeros(L, np.float16)
    for i, (x, y) in enumerate(pairs):
        a[i], b[i] = x, y
    c_arr = np.array(c, np.float32 if out == np.float32 else np.float16)
    return tc.fdpa(arch, a, b, c_arr, out)


@pytest.mark.parametrize("arch,expected", [("sm_70", 2.0**-23), ("sm_80", 2.0**-24), ("sm_90", 2.0**-24)])
def test_truncation_width_vector(arch, expected):
    # a0*b0 = 1 (E = 0), c = -(1 - 2^-24): on the grid 2^-F, F = 24/25 keeps c exactly -> 2^-24;
    # F = 23 truncates c toward zero to -(1 - 2^-23) -> 2^-23.
    d = _block(arch, [(1.0, 1.0)], -(1 - 2.0**-24))
    assert_bitexact(d, np.array(expected, np.float32))


@pytest.mark.parametrize("arch,expected", [("sm_70", 0.0), ("sm_80", -0.5), ("sm_89", -0.5), ("sm_90", -0.75)])
def test_small_terms_truncated_against_large_alignment_exponent(arch, expected):
    # MMA-Sim Eq. 10: c = 2^23, products -2^13*2^10, -0.5, -0.25, -0.125 (exact sum -0.875). E = 23,
    # grid 2^(23-F): F=23 drops all three (0), F=24 keeps -0.5, F=25 keeps -0.5 - 0.25.
    pairs = [(-(2.0**13), 2.0**10), (-0.5, 1.0), (-0.25, 1.0), (-0.125, 1.0)]
    assert_bitexact(_block(arch, pairs, 2.0**23), np.array(expected, np.float32))


def test_products_are_not_renormalised():
    # 1.5 * 1.5 = 2.25 aligns at e(1.5) + e(1.5) = 0 (not 1), so the grid is 2^-24 and
    # c = -2^-24 survives: 2.25 - 2^-24, then RZ to fp32 (ulp 2^-22 at 2.25) -> 2.25 - 2^-22.
    # A renormalising model (E = 1, grid 2^-23) would drop c and give 2.25.
    d = _block("sm_80", [(1.5, 1.5)], -(2.0**-24))
    assert_bitexact(d, np.array(2.25 - 2.0**-22, np.float32))


def test_fp32_output_rounds_toward_zero_and_fp16_output_to_nearest():
    # c = 1, product (3*2^-13)*(2^-11) = 3*2^-24, E = 0, on the 2^-24 grid: S = 1 + 1.5 ulp(fp32).
    # RZ gives 1 + 2^-23; round-to-nearest-even would give 1 + 2^-22.
    d = _block("sm_80", [(3 * 2.0**-13, 2.0**-11)], 1.0)
    assert_bitexact(d, np.array(1 + 2.0**-23, np.float32))
    # fp16: c = 1, product 3*2^-12 -> 1 + 3*2^-12 = 1 + 0.75 ulp(2^-10) -> RNE up to 1 + 2^-10
    d16 = _block("sm_80", [(3 * 2.0**-6, 2.0**-6)], 1.0, np.float16)
    assert_bitexact(d16, np.array(1 + 2.0**-10, np.float16))


def test_split_order_of_the_two_k_halves():
    # A row 0: a[0] = 1, a[1] = 2^-12, a[8] = 2^-12; B column 0 identical; C = 0, fp32 out.
    # Ampere: block k0..7 gives RZ(1 + 2^-24) = 1, then block k8..15 gives RZ(1 + 2^-24) = 1.
    # (high half first would give 2^-24 + ... = 1 + 2^-23.) Hopper: one block, 1 + 2^-23 exactly.
    A = np.zeros((16, 16), np.float16)
    B = np.zeros((16, 8), np.float16)
    A[0, 0], A[0, 1], A[0, 8] = 1.0, 2.0**-12, 2.0**-12
    B[0, 0], B[1, 0], B[8, 0] = 1.0, 2.0**-12, 2.0**-12
    C = np.zeros((16, 8), np.float32)
    assert tc.mma_m16n8k16("sm_80", A, B, C)[0, 0] == np.float32(1.0)
    assert tc.mma_m16n8k16("sm_90", A, B, C)[0, 0] == np.float32(1 + 2.0**-23)


def test_signed_zeros_and_special_values():
    L = 8
    z = np.zeros(L, np.float16)
    negz = -z
    # every product -0 (sign -) and c = -0 -> -0; c = +0 -> +0
    assert_bitexact(tc.fdpa("sm_80", negz, z, np.array(-0.0, np.float32), np.float32), np.array(-0.0, np.float32))
    assert_bitexact(tc.fdpa("sm_80", negz, z, np.array(0.0, np.float32), np.float32), np.array(0.0, np.float32))
    # exact cancellation -> +0
    one = np.zeros(L, np.float16)
    one[0] = 1.0
    assert_bitexact(tc.fdpa("sm_80", one, one, np.array(-1.0, np.float32), np.float32), np.array(0.0, np.float32))
    inf = one.copy()
    inf[0] = np.inf
    nan32 = np.array(0x7FFFFFFF, np.uint32).view(np.float32)
    assert_bitexact(tc.fdpa("sm_80", inf, z, np.array(0.0, np.float32), np.float32), nan32)  # Inf*0
    assert_bitexact(tc.fdpa("sm_80", inf, one, np.array(-np.inf, np.float32), np.float32), nan32)  # +Inf-Inf
    assert_bitexact(tc.fdpa("sm_80", inf, one, np.array(1.0, np.float32), np.float32), np.array(np.inf, np.float32))
    nan16 = np.array(0x7FFF, np.uint16).view(np.float16)
    assert_bitexact(tc.fdpa("sm_80", inf, z, np.array(0.0, np.float16), np.float16), nan16)
    # fp16 overflow: 65504 + 16 = 65520 rounds to Inf
    big = np.zeros(L, np.float16)
    big[0], big[1] = 65504.0, 16.0
    assert_bitexact(tc.fdpa("sm_80", big, one + (big == 16), np.array(0.0, np.float16), np.float16),
                    np.array(np.inf, np.float16))


def test_fdpa_equals_reference_on_random_bits_including_specials_and_subnormals():
    rng = np.random.default_rng(0)
    for arch in ("sm_70", "sm_80", "sm_90"):
        L = tc.model(arch).block
        a = rng.integers(0, 2**16, (150, L), dtype=np.uint16).view(np.float16)
        b = rng.integers(0, 2**16, (150, L), dtype=np.uint16).view(np.float16)
        # narrow exponents on half the rows so that terms interact
        a[:75] = (rng.standard_normal((75, L)) * 2.0 ** rng.integers(-20, 4, (75, 1))).astype(np.float16)
        b[:75] = (rng.standard_normal((75, L)) * 2.0 ** rng.integers(-20, 4, (75, 1))).astype(np.float16)
        c32 = rng.integers(0, 2**32, 150, dtype=np.uint32).view(np.float32)
        c32[:75] = rng.standard_normal(75).astype(np.float32)
        with np.errstate(over="ignore"):
            c16 = c32.astype(np.float16)
        assert_bitexact(tc.fdpa(arch, a, b, c32, np.float32), tc.fdpa_reference(arch, a, b, c32, np.float32), arch)
        assert_bitexact(tc.fdpa(arch, a, b, c16, np.float16), tc.fdpa_reference(arch, a, b, c16, np.float16), arch)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_mma_m16n8k16_equals_plain_loop_reference(arch):
    rng = np.random.default_rng(1)
    A = rng.standard_normal((16, 16)).astype(np.float16)
    B = rng.standard_normal((16, 8)).astype(np.float16)
    C = rng.standard_normal((16, 8)).astype(np.float32)
    assert_bitexact(tc.mma_m16n8k16(arch, A, B, C), tc.mma_m16n8k16_reference(arch, A, B, C))
    C16 = C.astype(np.float16)
    assert_bitexact(tc.mma_m16n8k16(arch, A, B, C16), tc.mma_m16n8k16_reference(arch, A, B, C16))


def test_sm87_is_flagged_unverified():
    assert not tc.model("sm_87").verified
    assert all(tc.model(a).verified for a in tc.ARCHS if a != "sm_87")


def test_bad_input_errors_name_the_rule():
    a = np.ones((2, 8), np.float16)
    c = np.zeros(2, np.float32)
    with pytest.raises(FormatRuleError, match=r"arch: must be one of \['sm_70', 'sm_80', 'sm_86', 'sm_87', "
                                              r"'sm_89', 'sm_90'\]; got 'sm_75'"):
        tc.fdpa("sm_75", a, a, c, np.float32)
    with pytest.raises(ShapeError, match=r"1 to the sm_80 block length 8; got shape \(2, 9\)"):
        tc.fdpa("sm_80", np.ones((2, 9), np.float16), np.ones((2, 9), np.float16), c, np.float32)
    with pytest.raises(DtypeError, match="a: dtype must be float16; got float32"):
        tc.fdpa("sm_80", a.astype(np.float32), a, c, np.float32)
    with pytest.raises(DtypeError, match="c: dtype must be float32 or float16; got float64"):
        tc.fdpa("sm_80", a, a, c.astype(np.float64), np.float32)
    with pytest.raises(DtypeError, match="out_dtype"):
        tc.fdpa("sm_80", a, a, c, np.float64)
    with pytest.raises(ShapeError, match="c: shape must be"):
        tc.fdpa("sm_80", a, a, np.zeros(3, np.float32), np.float32)


def test_inputs_are_not_modified():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((5, 8)).astype(np.float16)
    b = rng.standard_normal((5, 8)).astype(np.float16)
    c = rng.standard_normal(5).astype(np.float32)
    before = (a.copy(), b.copy(), c.copy())
    tc.fdpa("sm_80", a, b, c, np.float32)
    for x, y in zip((a, b, c), before):
        assert_bitexact(x, y)


# --------------------------------------------------------------------------- properties (hypothesis)
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


# ------------------------------------------ hand-built vectors for what the hardware rows cannot pin
# Every expected value below is worked out by hand from the T-FDPA rule (products exact, alignment
# exponent E = max over the products' e(a)+e(b), c's exponent, and ``e_zero`` for each zero term;
# terms truncated toward zero onto the grid 2^(E-F); one final rounding: RZ for fp32 output, RNE for
# fp16 output), as published for these datapaths (MMA-Sim ``mmasim/simulator/nv_ptx.py``,
# Khattak & Mikaitis arXiv:2512.07004 ``models/*.m``), never by running refsim.
#
# What the hardware rows (``refsim/data/tensor_core_hw``, A100/H100/V100, random fp16 operands) can and
# cannot discriminate:
#
# * fp32 output rows pin the fraction width F (the grid 2^(E-F) moves visible RZ bits), the
#   block length L and the chaining order, because random operands put E near 0 and the fp32
#   result keeps 24 bits.
# * fp16 output rows round the exact sum to 11 bits with RNE, so a truncation on a grid far below
#   the result's own quantum changes nothing except at an exact tie. Random operands almost never
#   produce a tie whose tie-breaking bit sits below the grid, so the rows cannot see ``e_zero``:
#   moving ``e_zero_f16`` (and ``e_zero_f32``) by -5, -1, +1 or +5 gives 0 mismatches on all 2400
#   committed results (400 rows x 3 GPUs x 2 output types), while every such shift flips one of
#   the two tie vectors below.
# * ``e_zero_f32`` is unobservable from fp16 inputs once it is <= -126: a zero term only sets E
#   when every other term is zero or tiny, any nonzero product has e(a)+e(b) >= -28, and a nonzero
#   fp32 c has exponent >= -126 (its subnormal emin), so E never falls to ``e_zero_f32``. The rows
#   and the vectors below can only bound it (<= -125); the value -132 is the published model's.
#
# The vectors therefore build exact ties on purpose: a fp16 result of exactly 1.5 quanta plus one
# tiny negative product that survives the truncation (result rounds down) or falls below the grid
# (tie to even, rounds up). With the grid at 2^(e_zero_f16 - F) the pair of vectors pins
# ``e_zero_f16 - F`` exactly for each architecture.

#: arch -> (L, F, e_zero_f16) as published (the module spec block); grid exponent e_zero_f16 - F
PUBLISHED = {"sm_70": (4, 23, -20), "sm_80": (8, 24, -21), "sm_89": (8, 24, -21), "sm_90": (16, 25, -22)}


def _published_block(arch, pairs, c, out):
    L = PUBLISHED[arch][0]
    a = np.zeros(L, np.float16)
    b = np.zeros(L, np.float16)
    for i, (x, y) in enumerate(pairs):
        a[i], b[i] = x, y
    return tc.fdpa(arch, a, b, np.array(c, out), out)


def test_published_parameters_are_the_models():
    for arch, (L, F, ez16) in PUBLISHED.items():
        m = tc.model(arch)
        assert (m.block, m.frac_bits, m.e_zero_f16) == (L, F, ez16), arch


@pytest.mark.parametrize("arch", sorted(PUBLISHED))
def test_tiny_product_on_the_zero_term_grid_breaks_an_fp16_tie(arch):
    _, F, ez = PUBLISHED[arch]
    g = ez - F                                  # grid exponent: sm_70 -43, sm_80/89 -45, sm_90 -47
    # p0 = (1.5 * 2^-12) * 2^-12 = 1.5 * 2^-24, ep = -24: exactly halfway between the fp16
    # subnormals 2^-24 and 2^-23.  p1 = -(2^(g+24) * 2^-24) = -2^g, ep = -14 + -14 = -28 (both
    # subnormal). The other L-2 products are zero (ep = e_zero) and c = +0 (e_zero), so
    # E = max(-24, -28, e_zero) = e_zero and the grid is 2^(e_zero - F) = 2^g: p1 is ON the grid,
    # kept; S = 1.5 * 2^-24 - 2^g < the tie -> RNE gives 2^-24 = 0x0001.
    pairs = [(1.5 * 2.0**-12, 2.0**-12), (-(2.0 ** (g + 24)), 2.0**-24)]
    d = _published_block(arch, pairs, 0.0, np.float16)
    assert_bitexact(d, np.array(0x0001, np.uint16).view(np.float16), f"{arch} kept")


@pytest.mark.parametrize("arch", sorted(PUBLISHED))
def test_tiny_product_below_the_zero_term_grid_is_dropped_and_the_tie_goes_to_even(arch):
    _, F, ez = PUBLISHED[arch]
    g = ez - F
    # same as above with p1 = -2^(g-1): below the grid 2^g, truncated toward zero to 0; S is
    # exactly 1.5 * 2^-24, a tie, and RNE picks the even neighbour 2^-23 = 0x0002. A model whose
    # e_zero_f16 were one lower (finer grid) would keep p1 and return 0x0001.
    pairs = [(1.5 * 2.0**-12, 2.0**-12), (-(2.0 ** (g + 23)), 2.0**-24)]
    d = _published_block(arch, pairs, 0.0, np.float16)
    assert_bitexact(d, np.array(0x0002, np.uint16).view(np.float16), f"{arch} dropped")


@pytest.mark.parametrize("arch", sorted(PUBLISHED))
def test_zero_products_keep_the_smallest_fp32_subnormal_c(arch):
    # every product zero (ep = e_zero_f32 <= -131), c = 2^-149 with e(c) = -126 (subnormal emin):
    # E = -126, grid 2^(-126-F) <= 2^-149, so c is on the grid and RZ keeps it: 0x00000001.
    # (Bounds e_zero_f32 <= -125 for F = 24; it cannot pin it further, see the module docstring.)
    d = _published_block(arch, [], np.float32(2.0**-149), np.float32)
    assert_bitexact(d, np.array(1, np.uint32).view(np.float32), arch)


@pytest.mark.parametrize("arch,expected", [("sm_70", 0.0), ("sm_80", 0.0), ("sm_90", 2.0**-15)])
def test_exact_cancellation_leaves_only_terms_on_the_grid(arch, expected):
    # 2^5 * 2^5 = 2^10 and -2^10 cancel exactly; E = 10 (the largest ep), grid 2^(10-F):
    # sm_70 2^-13, sm_80 2^-14, sm_90 2^-15. The third product 2^-8 * 2^-7 = 2^-15 survives only on
    # Hopper's grid; elsewhere it truncates to 0 and the sum is an exact +0 (not every product is
    # -0, so the zero is +0).
    pairs = [(2.0**5, 2.0**5), (-(2.0**5), 2.0**5), (2.0**-8, 2.0**-7)]
    assert_bitexact(_published_block(arch, pairs, 0.0, np.float32), np.array(expected, np.float32), arch)


@pytest.mark.parametrize("arch", sorted(PUBLISHED))
@pytest.mark.parametrize("out", [np.float32, np.float16])
def test_signed_zero_only_when_every_product_and_c_are_negative_zero(arch, out):
    L = PUBLISHED[arch][0]
    a = np.full(L, -0.0, np.float16)
    b = np.ones(L, np.float16)
    neg = tc.fdpa(arch, a, b, np.array(-0.0, out), out)            # all -0 products, c = -0 -> -0
    assert_bitexact(neg, np.array(-0.0, out), f"{arch} -0")
    b[L - 1] = -1.0                                                 # one product is +0 -> +0
    assert_bitexact(tc.fdpa(arch, a, b, np.array(-0.0, out), out), np.array(0.0, out), f"{arch} +0")
    b[L - 1] = 1.0                                                  # c = +0 -> +0
    assert_bitexact(tc.fdpa(arch, a, b, np.array(0.0, out), out), np.array(0.0, out), f"{arch} c=+0")
