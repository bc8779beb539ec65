"""Tests of refsim.formats.mixed_2_4_16 (the 2/4/16-bit format; its quantizer is tested in
tests/quant/test_mixed_2_4_16.py): dequantization as first order times second order, CSR checks,
bit layout worked examples, pack/unpack against plain loops, the average-bit identity, the GEMV
against its loop twin and a derived error bound, and bad input; property: on drawn legal problems
pack round-trips, the CSR is valid and the average-bit formula equals the packed byte count."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from refsim.errors import FormatRuleError
from refsim.formats import mixed_2_4_16 as F
from refsim.quant import mixed_2_4_16 as Q
from refsim.testing import assert_bitexact, examples

PACKED = ("w_main", "w_side", "meta2", "meta4", "s2", "z2", "group_bits", "row_ptr", "col", "val")
UNPACKED = ("q", "zero", "code", "s2", "z2", "four", "row_ptr", "col", "val")


def _problem(seed=0, k=160, n=32, t=96):
    rng = np.random.default_rng(seed)
    W = (rng.standard_normal((k, n)) * 0.05).astype(np.float32)
    X = rng.standard_normal((t, k)).astype(np.float32) * rng.uniform(0.2, 3.0, k).astype(np.float32)
    H = (2.0 / t) * X.astype(np.float64).T @ X.astype(np.float64)
    return W, H, X


# ------------------------------------------------------------------ scales
def test_dequantize_is_first_order_times_second_order():
    W, H, _ = _problem(5, k=64, n=16)
    m = Q.quantize(W, H, alpha=0.25, outlier_ratio=0.0)
    deq = F.dequantize(m)
    for g in range(4):
        for j in range(16):
            s_hat = np.float16(np.float32(int(m.code[g, j]) - int(m.z2[g, 0])) * np.float32(m.s2[g, 0]))
            for t in range(16):
                expected = np.float32(int(m.q[16 * g + t, j]) - int(m.zero[g, j])) * np.float32(s_hat)
                assert deq[16 * g + t, j] == expected


# ------------------------------------------------------------------ outliers
def test_check_csr_rejects_broken_matrices():
    rp = np.array([0, 2, 1], np.int32)
    with pytest.raises(FormatRuleError, match="end at nnz|monotone"):
        F.check_csr(rp, np.array([1, 2], np.uint16), np.zeros(2, np.float16), n_rows=2, n_cols=8)
    with pytest.raises(FormatRuleError, match="ascending"):
        F.check_csr(np.array([0, 2, 2], np.int32), np.array([3, 3], np.uint16), np.zeros(2, np.float16), n_rows=2, n_cols=8)
    with pytest.raises(FormatRuleError, match=r"\[0, 8\)"):
        F.check_csr(np.array([0, 1, 1], np.int32), np.array([9], np.uint16), np.zeros(1, np.float16), n_rows=2, n_cols=8)


# ------------------------------------------------------------------ bit layout and packing
def test_two_bit_word_worked_example():
    W, H, _ = _problem(7, k=48, n=16)
    m = Q.quantize(W, H, alpha=0.0, outlier_ratio=0.0)
    q = m.q.copy()
    q[0:16, 0] = [1, 2, 3] + [0] * 13
    m2 = F.Mixed2416(q, m.zero, m.code, m.s2, m.z2, m.four, m.row_ptr, m.col, m.val)
    assert F.pack(m2).w_main[0, 0, 0] == 0x39


@pytest.mark.parametrize("alpha", [0.0, 0.1, 0.25, 0.4, 1.0])
def test_pack_matches_loop_and_unpack_inverts(alpha):
    W, H, _ = _problem(8)
    m = Q.quantize(W, H, alpha=alpha, outlier_ratio=0.002)
    p, pr = F.pack(m), F.pack_reference(m)
    for f in PACKED:
        assert_bitexact(getattr(p, f), getattr(pr, f), name=f)
    u = F.unpack(p)
    for f in UNPACKED:
        assert np.array_equal(getattr(u, f), getattr(m, f)), f


# ------------------------------------------------------------------ average bits
@pytest.mark.parametrize("alpha, ratio", [(0.0, 0.0), (0.25, 0.002), (0.1, 0.005), (1.0, 0.0)])
def test_average_bits_formula_equals_packed_bytes(alpha, ratio):
    W, H, _ = _problem(9)
    m = Q.quantize(W, H, alpha=alpha, outlier_ratio=ratio)
    p = F.pack(m)
    k, n = W.shape
    assert F.average_bits(k, n, int(m.four.sum()), m.col.size) == Fraction(8 * p.nbytes, k * n)


def test_weight_words_alone_give_eq10_weight_bits_at_quarter_4bit():
    # K = 256: 16 groups, 4 of them 4-bit, 12 2-bit -> 4 units of 160 bits per output channel
    k, n = 256, 16
    bits = F.average_bits(k, n, 4, 0)
    words = Fraction(n * (128 + 32) * 4, k * n)
    assert words == Fraction(5, 2) == Fraction(3, 4) * 2 + Fraction(1, 4) * 4
    assert bits > words


def test_paper_eq10_matches_the_papers_table4_bits():
    # Table 4: 2.85 bits at 25 % 4-bit, 2.60 at 10 %; the paper adds < 0.02 for alignment
    assert 0 <= 2.85 - F.paper_average_bits(0.25) < 0.02
    assert abs(2.60 - F.paper_average_bits(0.10)) < 0.02


# ------------------------------------------------------------------ GEMV
@pytest.mark.parametrize("alpha", [0.0, 0.25])
def test_gemv_matches_loop_bit_for_bit(alpha):
    W, H, _ = _problem(10, k=96, n=16)
    p = F.pack(Q.quantize(W, H, alpha=alpha, outlier_ratio=0.005))
    x = np.random.default_rng(0).standard_normal(96).astype(np.float16)
    assert_bitexact(F.gemv(p, x), F.gemv_reference(p, x), name="y")


def test_gemv_close_to_exact_product_with_derived_bound():
    W, H, _ = _problem(11)
    m = Q.quantize(W, H, alpha=0.25, outlier_ratio=0.005)
    x = np.random.default_rng(1).standard_normal(W.shape[0]).astype(np.float16)
    y = F.gemv(F.pack(m), x).astype(np.float64)
    deq = F.dequantize(m).astype(np.float64)
    exact = x.astype(np.float64) @ deq
    terms = np.abs(x.astype(np.float64)) @ np.abs(deq)
    k = W.shape[0]
    # weight -> half (2^-11 rel.), fp32 sequential sum (k * 2^-24 rel. of sum|terms|), final half
    bound = terms * (2.0 ** -11 + (k + 20) * 2.0 ** -24) + np.abs(exact) * 2.0 ** -11 + 1e-7
    assert np.all(np.abs(y - exact) <= bound)


def test_unit_layout_mixed_units_then_pure_2bit_units():
    # K = 160: G = 10. alpha = 0.1 -> one 4-bit group; n2 = 9: mixed unit 0 = 2-bit ranks 0-2 +
    # the 4-bit low half; pure unit 1 = ranks 3-6; unit 2 = ranks 7, 8 and two padding words
    W, H, _ = _problem(14)
    m = Q.quantize(W, H, alpha=0.1, outlier_ratio=0.0)
    g4 = int(np.flatnonzero(m.four)[0])
    two = [g for g in range(10) if g != g4]
    q = m.q.copy()
    for g in range(10):
        q[16 * g:16 * g + 16, :] = (g % 3) + 1 if g != g4 else 9     # constant code per group
    p = F.pack(F.Mixed2416(q, m.zero, m.code, m.s2, m.z2, m.four, m.row_ptr, m.col, m.val))
    word2 = {c: sum(c << (2 * t) for t in range(16)) for c in (1, 2, 3)}
    assert p.w_main.shape == (32, 3, 4) and p.w_side.shape == (32, 1) and p.meta2.shape == (32, 3)
    expect = [[word2[two[0] % 3 + 1], word2[two[1] % 3 + 1], word2[two[2] % 3 + 1], 0x99999999],
              [word2[two[j] % 3 + 1] for j in range(3, 7)],
              [word2[two[7] % 3 + 1], word2[two[8] % 3 + 1], 0, 0]]
    assert p.w_main[5].tolist() == expect
    assert p.w_side[5, 0] == 0x99999999
    assert F.average_bits(160, 32, 1, 0) == Fraction(8 * p.nbytes, 160 * 32)


def test_every_code_at_every_position_packs_lsb_first():
    # 16 shifts put every 2-bit code and every 4-bit code at every position t of a group
    W, H, _ = _problem(15, k=64, n=16)
    m = Q.quantize(W, H, alpha=0.25, outlier_ratio=0.0)         # 1 four-bit group, 3 two-bit groups
    g4 = int(np.flatnonzero(m.four)[0])
    for shift in range(16):
        q = np.zeros_like(m.q)
        for g in range(4):
            for t in range(16):
                q[16 * g + t, :] = (t + shift) % (16 if g == g4 else 4)
        p = F.pack(F.Mixed2416(q, m.zero, m.code, m.s2, m.z2, m.four, m.row_ptr, m.col, m.val))
        two = sum(((t + shift) % 4) << (2 * t) for t in range(16))
        lo = sum(((t + shift) % 16) << (4 * t) for t in range(8))
        hi = sum(((t + 8 + shift) % 16) << (4 * t) for t in range(8))
        assert p.w_main[:, 0].tolist() == [[two, two, two, lo]] * 16
        assert p.w_side[:, 0].tolist() == [hi] * 16
        assert np.array_equal(F.unpack(p).q, q)


def test_check_csr_names_the_row_whose_columns_do_not_ascend():
    row_ptr = np.array([0, 2, 2, 5, 6], np.int32)      # row 1 empty; a new row may restart low
    val = np.ones(6, np.float16)
    F.check_csr(row_ptr, np.array([3, 9, 1, 4, 8, 0], np.uint16), val, n_rows=4, n_cols=16)
    with pytest.raises(FormatRuleError, match=r"within row 2; got \[1, 8, 4\]"):
        F.check_csr(row_ptr, np.array([3, 9, 1, 8, 4, 0], np.uint16), val, n_rows=4, n_cols=16)
    with pytest.raises(FormatRuleError, match=r"within row 0; got \[9, 9\]"):
        F.check_csr(row_ptr, np.array([9, 9, 1, 4, 8, 0], np.uint16), val, n_rows=4, n_cols=16)


def test_harness_lowrank_hinv_diag_is_the_damped_inverse_diagonal():
    """The harness builds layer-sized 2/4/16 cases without the (K, K) Hessian (Woodbury);
    against the Cholesky route on the same H (rounding-level agreement: two algorithms)."""
    from refsim.testing.cases.mixed_2_4_16 import lowrank_hinv_diag as _lowrank_hinv_diag
    rng = np.random.default_rng(22)
    for k in (16, 256, 1024):
        X = rng.standard_normal((64, k))
        want = Q.inverse_hessian_diag(X.T @ X / 64 + np.eye(k))
        got = _lowrank_hinv_diag(X)
        assert np.max(np.abs(got - want) / want) < 1e-12
    assert np.max(np.abs(_lowrank_hinv_diag(X, percdamp=0.5) - want) / want) > 1e-3   # damping is read


# --------------------------------------------------------------------------- properties (hypothesis)
@st.composite
def problems(draw):
    """K a multiple of 16 (1..12 groups, so n2 % 3 takes every value), N in {16, 32}."""
    k = 16 * draw(st.integers(1, 12))
    n = 16 * draw(st.integers(1, 2))
    alpha = draw(st.sampled_from([0.0, 0.1, 0.25, 0.33, 0.5, 1.0]))
    ratio = draw(st.sampled_from([0.0, 0.002, 0.005]))
    seed = draw(st.integers(0, 2**31 - 1))
    return k, n, alpha, ratio, seed


@settings(max_examples=examples(40))
@given(problems())
@example((16, 16, 0.0, 0.0, 0))      # one 2-bit group: a unit with two padding slots
@example((48, 16, 1.0, 0.0, 0))      # only 4-bit groups: units with no 2-bit words
def test_pack_round_trip_csr_and_average_bits(problem):
    k, n, alpha, ratio, seed = problem
    rng = np.random.default_rng(seed)
    W = (rng.standard_normal((k, n)) * rng.uniform(0.01, 1.0)).astype(np.float32)
    X = rng.standard_normal((2 * k, k))
    H = (X.T @ X) / k
    m = Q.quantize(W, H, alpha=alpha, outlier_ratio=ratio)
    p = F.pack(m)
    pr = F.pack_reference(m)
    for f in ("w_main", "w_side", "meta2", "meta4", "group_bits"):
        assert np.array_equal(getattr(p, f), getattr(pr, f)), f
    u = F.unpack(p)
    for f in ("q", "zero", "code", "four", "row_ptr", "col"):
        assert np.array_equal(getattr(u, f), getattr(m, f)), f
    F.check_csr(p.row_ptr, p.col, p.val, n_rows=n, n_cols=k)
    assert p.col.size == min(int(np.floor(ratio * k * n)), int((~m.four).sum()) * 16 * n)
    assert F.average_bits(k, n, int(m.four.sum()), p.col.size) == Fraction(8 * p.nbytes, k * n)


# ------------------------------------------------------------------ record rules
def _replaced(m, **fields):
    args = {name: getattr(m, name) for name in UNPACKED}
    args.update(fields)
    return F.Mixed2416(**args)


def test_record_refuses_a_code_wider_than_its_group():
    W, H, _ = _problem(15, k=64, n=16)
    m = Q.quantize(W, H, alpha=0.25, outlier_ratio=0.0)         # 1 four-bit group, 3 two-bit groups
    g4 = int(np.flatnonzero(m.four)[0])
    g2 = int(np.flatnonzero(~m.four)[0])
    q = m.q.copy()
    q[16 * g4 + 3, 5] = 16                                       # a 4-bit group's code 16
    with pytest.raises(FormatRuleError, match=rf"q: codes of 4-bit group {g4} must lie in \[0, 15\]; got 16"):
        _replaced(m, q=q)
    q = m.q.copy()
    q[16 * g2, 0] = 4                                            # a 2-bit group's code 4
    with pytest.raises(FormatRuleError, match=rf"q: codes of 2-bit group {g2} must lie in \[0, 3\]; got 4"):
        _replaced(m, q=q)
    zero = m.zero.copy()
    zero[g2, 1] = 7
    with pytest.raises(FormatRuleError, match=r"zero: codes of 2-bit group .* got 7 in column 1"):
        _replaced(m, zero=zero)


def test_record_refuses_scale_codes_beyond_four_bits():
    W, H, _ = _problem(15, k=64, n=16)
    m = Q.quantize(W, H, alpha=0.25, outlier_ratio=0.0)
    code = m.code.copy()
    code[0, 0] = 16
    with pytest.raises(FormatRuleError, match=r"code: 4-bit codes must lie in \[0, 15\]; got 16"):
        _replaced(m, code=code)
    z2 = m.z2.copy()
    z2[0, 0] = 200
    with pytest.raises(FormatRuleError, match=r"z2: 4-bit codes must lie in \[0, 15\]; got 200"):
        _replaced(m, z2=z2)
    p = F.pack(m)
    z2 = p.z2.copy()
    z2[0, 0] = 16
    with pytest.raises(FormatRuleError, match=r"z2: 4-bit codes must lie in \[0, 15\]; got 16"):
        F.Packed2416(**{**{name: getattr(p, name) for name in PACKED}, "z2": z2})


# ------------------------------------------------------------------ the public rule checks
def test_the_shape_and_fraction_rules_accept_the_legal_and_name_what_they_refuse():
    from refsim.errors import ShapeError
    assert F.check_kn(16, 16) is None and F.check_kn(1 << 16, 32) is None
    for k, n, text in ((8, 16, "K: must be a positive multiple"), (16, 24, "N: must be a positive multiple"),
                       ((1 << 16) + 16, 16, "K: must be at most 65536")):
        with pytest.raises(ShapeError, match=f"^{text}"):
            F.check_kn(k, n)
    assert F.check_fraction("alpha", np.float32(0.5), 1.0) == 0.5 and type(F.check_fraction("r", 0, 0.1)) is float
    for bad in (True, "0.1", np.array([0.1]), float("nan"), -0.01, 0.2):
        with pytest.raises(FormatRuleError, match=r"^r: must be a number in \[0, 0.1\]"):
            F.check_fraction("r", bad, 0.1)
