"""2/4/16-bit GEMV emulation: plain-loop twin, lane schedule, shuffle tree, exact inputs, a derived
error bound, the dense part's independence from the CSR, the SpMV order, bad input; properties on drawn legal problems: the plain-loop twin, and one rounding of
the exact product whenever no step can round."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from refsim.emulator import mixed_2_4_16_kernel as ek
from refsim.errors import DtypeError, FormatRuleError, NonFiniteError, ShapeError
from refsim.formats import mixed_2_4_16 as F
from refsim.quant import mixed_2_4_16 as Q
from refsim.testing import assert_bitexact, examples

U16 = 2.0**-11      # unit roundoff of fp16 (RNE)
U32 = 2.0**-24      # unit roundoff of fp32
TINY16 = 2.0**-25   # largest absolute error of one fp16 rounding in the subnormal range


def _quantized(rng, k, n, alpha=0.25, ratio=0.005):
    W = (rng.standard_normal((k, n)) * 0.05).astype(np.float32)
    W[rng.random((k, n)) < 0.01] *= 8                      # a few large weights: outlier candidates
    X = rng.standard_normal((2 * k, k))
    return F.pack(Q.quantize(W, (X.T @ X) / k, alpha=alpha, outlier_ratio=ratio))


def _empty_csr(p):
    n = p.w_main.shape[0]
    return dataclasses.replace(p, row_ptr=np.zeros(n + 1, np.int32), col=np.zeros(0, np.uint16),
                               val=np.zeros(0, np.float16))


def _exact_value(p, x):
    """float64 (N,) exact x @ W_hat from the unpacked fields (independent of the kernel's steps)."""
    m = F.unpack(p)
    g, n = m.zero.shape
    s_hat = (m.code.astype(np.float64) - np.repeat(m.z2.astype(np.float64), 16, axis=1)) * \
        np.repeat(m.s2.astype(np.float64), 16, axis=1)                                   # (G, N)
    w = (m.q.astype(np.float64).reshape(g, 16, n) - m.zero[:, None, :]) * s_hat[:, None, :]
    w = np.array([[float(np.float16(v)) for v in row] for row in w.reshape(g * 16, n)])  # fp16 weights
    y = x.astype(np.float64) @ w
    for r in range(n):
        for e in range(int(m.row_ptr[r]), int(m.row_ptr[r + 1])):
            y[r] += float(m.val[e]) * float(x[int(m.col[e])])
    return y, w


# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("k,n,alpha,ratio", [
    (128, 16, 0.25, 0.005),   # the format's diagram: two mixed units, lanes 0 and 1
    (192, 32, 0.0, 0.005),    # pure units only, padding slot in the last unit
    (640, 16, 1.0, 0.0),      # 40 units: lanes 0-7 own two units each
])
def test_vectorised_emulation_equals_plain_loop_twin(k, n, alpha, ratio):
    rng = np.random.default_rng(k + n)
    p = _quantized(rng, k, n, alpha, ratio)
    x = rng.standard_normal(k).astype(np.float16)
    ref = ek.mixed_gemv_reference(p, x)
    assert_bitexact(ek.mixed_gemv(p, x), ref, name="y")
    assert_bitexact(ek.mixed_gemv(p, x, native=False), ref, name="y, NumPy path")


def test_one_pass_dequantization_equals_the_op_by_op_form_with_overflowing_scales():
    """s2 near the fp16 maximum makes s_hat = (c - z2) * s2 overflow to Inf, so (q - z) * s_hat gives
    +-Inf and, where q == z, NaN: the float32 one-pass form keeps those bits too."""
    rng = np.random.default_rng(8)
    p = _quantized(rng, 256, 32)
    s2 = p.s2.copy()
    s2[::2] = np.float16(60000.0)
    s2[1::3] = -np.float16(2.0**-24)
    p = dataclasses.replace(p, s2=s2)
    fast, ref = ek.dequantized_weights(p), ek.dequantized_weights_reference(p)
    assert np.isinf(ref).any() and np.isnan(ref).any()                     # premise: specials present
    assert_bitexact(fast, ref, name="w")


def test_lane_schedule_of_the_format_diagram():
    # K = 128, groups 2 and 5 are 4-bit: unit 0 = [g0 g1 g3 | g2] (lane 0), unit 1 = [g4 g6 g7 | g5] (lane 1)
    bits = np.array([2, 2, 4, 2, 2, 4, 2, 2], np.uint8)
    assert ek.unit_groups(bits) == [[0, 1, 3, 2], [4, 6, 7, 5]]
    sched = ek.lane_schedule(bits)
    assert sched.shape == (32, 4)
    assert sched[0].tolist() == [0, 1, 3, 2] and sched[1].tolist() == [4, 6, 7, 5]
    assert (sched[2:] == -1).all()


@pytest.mark.parametrize("bits", [[2] * 150, [4] * 70, [2, 2, 4] * 30 + [2] * 41, [4, 2] * 20])
def test_lane_schedule_covers_every_group_once_and_deals_units_round_robin(bits):
    bits = np.array(bits, np.uint8)
    units = ek.unit_groups(bits)
    sched = ek.lane_schedule(bits)
    got = sorted(int(g) for g in sched.ravel() if g >= 0)
    assert got == list(range(bits.size))
    for u, groups in enumerate(units):
        assert len(groups) <= 4 and sum(bits[g] == 4 for g in groups) <= 1
        lane, before = u % 32, sum(len(units[v]) for v in range(u % 32, u, 32))
        assert sched[lane, before:before + len(groups)].tolist() == groups


def test_fp32_warp_tree_is_the_shfl_down_association():
    rng = np.random.default_rng(0)
    v = (rng.standard_normal(32) * 2.0 ** rng.integers(-30, 30, 32)).astype(np.float32)

    def add(a, b):
        return np.float32(a + b)

    s16 = [add(v[t], v[t + 16]) for t in range(16)]
    s8 = [add(s16[t], s16[t + 8]) for t in range(8)]
    s4 = [add(s8[t], s8[t + 4]) for t in range(4)]
    s2 = [add(s4[t], s4[t + 2]) for t in range(2)]
    lane0 = np.asarray(add(s2[0], s2[1]))
    assert_bitexact(ek.warp_reduce_sum_f32(v), lane0)
    assert_bitexact(np.asarray(ek.warp_reduce_sum_f32_reference(v)), lane0)
    sequential = np.float32(0)
    for t in range(32):
        sequential = add(sequential, v[t])
    assert sequential != lane0        # with these exponents the association is visible


def test_lanes_hold_the_format_dequantized_weights():
    # steps 1-2 (fp32 scale product rounded once; fp16 (q - z) * s_hat rounded once) give the
    # format's own fake-quantized weights rounded to fp16; outlier positions hold 0
    p = _quantized(np.random.default_rng(4), 256, 32)
    m = dataclasses.replace(F.unpack(p), row_ptr=np.zeros(33, np.int32), col=np.zeros(0, np.uint16),
                            val=np.zeros(0, np.float16))
    assert_bitexact(ek.dequantized_weights(p), F.dequantize(m).astype(np.float16), name="w")


def _exact_packed(rng, g, n, n4, outliers_per_row):
    """A packable problem on which no step rounds: s2 = 2^e, (c - z2) in [0, 3], |q - z| <= 15."""
    four = np.zeros(g, bool)
    four[rng.choice(g, n4, replace=False)] = True
    k = 16 * g
    lim = np.repeat(np.where(four, 15, 3), 16)[:, None]
    q = (rng.integers(0, 16, (k, n)) % (lim + 1)).astype(np.uint8)
    zero = (rng.integers(0, 16, (g, n)) % (np.where(four, 15, 3)[:, None] + 1)).astype(np.uint8)
    z2 = rng.integers(0, 3, (g, n // 16)).astype(np.uint8)
    code = (np.repeat(z2, 16, axis=1) + rng.integers(0, 4, (g, n))).astype(np.uint8)
    clipped = np.zeros(g, bool)
    clipped[np.flatnonzero(~four)] = np.arange((~four).sum()) % 3 > 0
    code[clipped] &= 0xE                                    # clipped slots keep even codes
    code[clipped] = np.maximum(code[clipped], 2 * ((np.repeat(z2, 16, axis=1)[clipped] + 1) // 2))
    s2 = (2.0 ** rng.integers(-4, 1, (g, n // 16))).astype(np.float16)
    rows, cols, vals = [], [], []
    two_rows = np.flatnonzero(np.repeat(~four, 16))
    for r in range(n):
        for c in np.sort(rng.choice(two_rows, min(outliers_per_row, two_rows.size), replace=False)):
            rows.append(r)
            cols.append(c)
            vals.append(float(rng.integers(-8, 9)) * 2.0 ** int(rng.integers(-2, 1)))
            q[c, r] = zero[c // 16, r]                      # dense code = zero point there
    row_ptr, col, val = F.csr_from_coo(np.array(rows, np.int64), np.array(cols, np.int64),
                                       np.array(vals, np.float16), n)
    return F.pack(F.Mixed2416(q, zero, code, s2, z2, four, row_ptr, col, val))


def test_exact_inputs_give_the_exact_product():
    # every fp16 chain partial is a multiple of 2^(e + 0) below 2^11 of that grid, every fp32 partial
    # a multiple of 2^-4 below 2^24 of it: no step rounds, y = one rounding of the exact value
    rng = np.random.default_rng(5)
    p = _exact_packed(rng, 40, 32, 10, 3)
    x = (rng.integers(-1, 2, 640) * (rng.random(640) < 0.3) * 2.0 ** rng.integers(0, 2, 640)).astype(np.float16)
    exact, _ = _exact_value(p, x)
    assert_bitexact(ek.mixed_gemv(p, x), exact.astype(np.float16) + np.float16(0), name="y")


def _error_bound(p, x, w):
    """|y - exact| <= B, counting the roundings on each term's path (standard gamma_n bounds):

    group sum: 8 fused fp16 fmas per chain + 1 fp16 add -> gamma_9(u16) * A_g, plus 2^-25 for each
    of the 17 fp16 operations of the group (subnormal results); fp32: a term passes through at most
    R = (groups of the busiest lane) + 5 tree adds + nnz(row) fmas -> gamma_R(u32) * (sum of the
    |group sums| + sum |val x|); final cvt: u16 * |acc| + 2^-25."""
    n = w.shape[1]
    g = w.shape[0] // 16
    gamma = lambda m, u: m * u / (1 - m * u)                                   # noqa: E731
    a = np.abs(x.astype(np.float64))[:, None] * np.abs(w)                      # (K, N)
    A = a.sum(axis=0)                                                          # (N,)
    O = np.zeros(n)
    nnz = np.diff(p.row_ptr)
    for r in range(n):
        for e in range(int(p.row_ptr[r]), int(p.row_ptr[r + 1])):
            O[r] += abs(float(p.val[e]) * float(x[int(p.col[e])]))
    sched = ek.lane_schedule(p.group_bits)
    R = int((sched >= 0).sum(axis=1).max()) + 5 + nnz
    e16 = gamma(9, U16) * A + 17 * TINY16 * g
    e32 = gamma(R, U32) * (A + e16 + O)
    return e16 + e32 + U16 * (A + O + e16 + e32) + TINY16


def test_error_against_the_float64_product_is_within_the_derived_bound():
    rng = np.random.default_rng(6)
    p = _quantized(rng, 1024, 64)
    x = rng.standard_normal(1024).astype(np.float16)
    exact, w = _exact_value(p, x)
    y = ek.mixed_gemv(p, x).astype(np.float64)
    bound = _error_bound(p, x, w)
    assert (np.abs(y - exact) <= bound).all()
    assert (y != exact.astype(np.float16)).any()                  # the kernel is not correctly rounded
    # the bound is not vacuous: it is a few fp16 roundings of the magnitude, not the magnitude
    mag = np.abs(x.astype(np.float64)) @ np.abs(w)
    assert (bound <= 16 * U16 * mag + 1e-3).all()


def test_dense_part_does_not_see_the_csr_and_empty_csr_is_the_dense_result():
    rng = np.random.default_rng(7)
    p = _quantized(rng, 512, 32)
    assert p.col.size > 0
    x = rng.standard_normal(512).astype(np.float16)
    pe = _empty_csr(p)
    dense = ek.dense_rows(p, x)
    assert_bitexact(dense, ek.dense_rows(pe, x), name="dense")
    assert_bitexact(ek.mixed_gemv(pe, x), dense.astype(np.float16), name="y(empty CSR)")
    assert_bitexact(ek.mixed_gemv(p, x), ek.spmv_epilogue(dense, p, x).astype(np.float16), name="y")
    p0 = F.pack(Q.quantize(np.ones((32, 16), np.float32), np.eye(32), outlier_ratio=0.0))
    assert p0.col.size == 0
    x0 = rng.standard_normal(32).astype(np.float16)
    assert_bitexact(ek.mixed_gemv(p0, x0), ek.dense_rows(p0, x0).astype(np.float16), name="y(no outliers)")


def _order_case():
    """Row 0: dense sum exactly 1 (w[0] = 1, x[0] = 1); outliers at k = 17, 18 with val * x = +2^24 then -2^24."""
    g, n = 2, 16
    q = np.zeros((32, n), np.uint8)
    q[0, 0] = 1
    zero = np.zeros((g, n), np.uint8)
    code = np.zeros((g, n), np.uint8)
    code[0, 0] = 1                                      # group 0 is slot 0: 4-bit code, s_hat = 1 * s2
    s2 = np.ones((g, 1), np.float16)
    z2 = np.zeros((g, 1), np.uint8)
    row_ptr, col, val = F.csr_from_coo(np.array([0, 0]), np.array([17, 18]),
                                       np.array([2048.0, -2048.0], np.float16), n)
    p = F.pack(F.Mixed2416(q, zero, code, s2, z2, np.zeros(g, bool), row_ptr, col, val))
    x = np.zeros(32, np.float16)
    x[0], x[17], x[18] = 1.0, 8192.0, 8192.0
    return p, x


def test_spmv_adds_outliers_after_the_dense_sum_in_stored_order():
    # documented order: ((1 + 2^24) + (-2^24)) in fp32: 1 + 2^24 is a tie -> 2^24 (even), result 0.
    # outliers first ((2^24 - 2^24) + 1) or reversed ((1 - 2^24) + 2^24) would both give 1 (the exact value)
    p, x = _order_case()
    y = ek.mixed_gemv(p, x)
    assert y[0] == 0 and not np.signbit(y[0])
    assert_bitexact(y[1:], np.zeros(15, np.float16))
    assert float(np.float32(np.float32(2.0**24 - 2.0**24) + np.float32(1))) == 1.0   # the other orders
    assert float(np.float32(np.float32(1 - 2.0**24) + np.float32(2.0**24))) == 1.0
    assert_bitexact(ek.mixed_gemv_reference(p, x), y, name="reference")
    assert_bitexact(F.gemv(p, x), y, name="format oracle (same SpMV order)")


def test_inputs_are_not_modified():
    rng = np.random.default_rng(8)
    p = _quantized(rng, 128, 16)
    x = rng.standard_normal(128).astype(np.float16)
    before = [getattr(p, f.name).copy() for f in dataclasses.fields(p)] + [x.copy()]
    ek.mixed_gemv(p, x)
    ek.spmv_epilogue(np.ones(16, np.float32), p, x)
    after = [getattr(p, f.name) for f in dataclasses.fields(p)] + [x]
    for b, a in zip(before, after):
        assert np.array_equal(b.view(np.uint8), a.view(np.uint8))


def test_bad_input_raises_named_errors():
    rng = np.random.default_rng(9)
    p = _quantized(rng, 64, 16)
    x = rng.standard_normal(64).astype(np.float16)
    with pytest.raises(DtypeError, match="x"):
        ek.mixed_gemv(p, x.astype(np.float32))
    with pytest.raises(ShapeError, match="x"):
        ek.mixed_gemv(p, x[:48])
    bad = x.copy()
    bad[3] = np.inf
    with pytest.raises(NonFiniteError, match="x"):
        ek.mixed_gemv(p, bad)
    with pytest.raises(ShapeError, match="Packed2416"):
        ek.mixed_gemv(F.unpack(p), x)
    with pytest.raises(FormatRuleError, match="row_ptr"):   # a corrupt container is refused when built
        dataclasses.replace(p, row_ptr=p.row_ptr[::-1].copy())
    with pytest.raises(ShapeError, match="lanes"):
        ek.warp_reduce_sum_f32(np.zeros(16, np.float32))


def test_a_lane_adds_its_groups_in_unit_order_not_k_order():
    # the diagram's row: lane 0 owns unit 0 = [g0 g1 g3 | g2]. Group sums S(g0) = 2^15, S(g1) = S(g3) =
    # 2^-9 (half an fp32 ulp of 2^15: ties to even, lost), S(g2) = -2^15. Unit order gives
    # (((2^15 + 2^-9) + 2^-9) - 2^15) = 0; K order (g0 g1 g2 g3, the format's sequential oracle)
    # gives ((2^15 + 2^-9) - 2^15) + 2^-9 = 2^-9.
    g, n = 8, 16
    four = np.array([0, 0, 1, 0, 0, 1, 0, 0], bool)
    q = np.zeros((16 * g, n), np.uint8)
    zero = np.zeros((g, n), np.uint8)
    code = np.zeros((g, n), np.uint8)
    s2 = np.full((g, 1), 0.5, np.float16)
    for gi in (0, 1, 3):
        q[16 * gi, 0], code[gi, 0] = 1, 2             # w = (1 - 0) * (2 * 0.5) = 1
    zero[2, 0], code[2, 0] = 1, 2                      # 4-bit group g2: w = (0 - 1) * 1 = -1
    p = F.pack(F.Mixed2416(q, zero, code, s2, np.zeros((g, 1), np.uint8), four,
                           np.zeros(n + 1, np.int32), np.zeros(0, np.uint16), np.zeros(0, np.float16)))
    x = np.zeros(16 * g, np.float16)
    x[0], x[16], x[32], x[48] = 2.0**15, 2.0**-9, 2.0**15, 2.0**-9
    y = ek.mixed_gemv(p, x)
    assert y[0] == 0
    assert_bitexact(ek.mixed_gemv_reference(p, x), y, name="reference")
    assert F.gemv(p, x)[0] == np.float16(2.0**-9)


def test_harness_format_passes_the_emulator_and_catches_the_sequential_oracle():
    from refsim.testing import harness

    def emulator(x, *fields):
        return ek.mixed_gemv(F.Packed2416(*fields), x)

    def sequential(x, *fields):       # the format's oracle: one fp32 chain over k, no groups, no lanes
        return F.gemv(F.Packed2416(*fields), x)

    harness.check_kernel(emulator, "mixed_2_4_16", max_examples=5)
    with pytest.raises(harness.KernelMismatch, match=r"y\[\d+\]: warp \d+ .*outliers in stored order"):
        harness.check_kernel(sequential, "mixed_2_4_16", max_examples=15, shrink=False)


# --------------------------------------------------------------------------- properties (hypothesis)
@st.composite
def problems(draw):
    """G in 1..12 groups (n2 % 3 and n2 - 3 n4 take every value), N = 16, any 4-bit share."""
    g = draw(st.integers(1, 12))
    n4 = draw(st.integers(0, g))
    outliers = draw(st.integers(0, 3))
    seed = draw(st.integers(0, 2**31 - 1))
    return g, n4, outliers, seed


def _exact_packed_fields(rng, g, n, n4, outliers_per_row):
    """Packable fields on which no kernel step rounds: s2 = 2^e (e in -4..0), c - z2 in [0, 3],
    |q - z| <= 15, outlier values small integers times 2^-2..2^0; dense code = zero at outliers."""
    four = np.zeros(g, bool)
    four[rng.choice(g, n4, replace=False)] = True
    k = 16 * g
    qmax = np.where(four, 15, 3)
    q = (rng.integers(0, 16, (k, n)) % (np.repeat(qmax, 16)[:, None] + 1)).astype(np.uint8)
    zero = (rng.integers(0, 16, (g, n)) % (qmax[:, None] + 1)).astype(np.uint8)
    z2 = rng.integers(0, 3, (g, n // 16)).astype(np.uint8)
    z2n = np.repeat(z2, 16, axis=1)
    code = (z2n + rng.integers(0, 4, (g, n))).astype(np.uint8)
    clipped = np.zeros((g, n), bool)
    clipped[np.flatnonzero(~four)] = (np.arange((~four).sum()) % 3 > 0)[:, None]
    even = 2 * ((z2n + 1) // 2) + 2 * rng.integers(0, 2, (g, n))          # even, z2 <= c <= z2 + 3
    code = np.where(clipped, even, code).astype(np.uint8)
    s2 = (2.0 ** rng.integers(-4, 1, (g, n // 16))).astype(np.float16)
    rows, cols, vals = [], [], []
    two_rows = np.flatnonzero(np.repeat(~four, 16))
    for r in range(n):
        for c in np.sort(rng.choice(two_rows, min(outliers_per_row, two_rows.size), replace=False)):
            rows.append(r)
            cols.append(int(c))
            vals.append(float(rng.integers(-8, 9)) * 2.0 ** int(rng.integers(-2, 1)))
            q[c, r] = zero[c // 16, r]
    row_ptr, col, val = F.csr_from_coo(np.array(rows, np.int64), np.array(cols, np.int64),
                                       np.array(vals, np.float16), n)
    return F.pack(F.Mixed2416(q, zero, code, s2, z2, four, row_ptr, col, val))


def _exact(p, x):
    m = F.unpack(p)
    g, n = m.zero.shape
    s_hat = (m.code.astype(np.float64) - np.repeat(m.z2.astype(np.float64), 16, axis=1)) * \
        np.repeat(m.s2.astype(np.float64), 16, axis=1)                                   # (G, N), exact
    w = (m.q.astype(np.float64).reshape(g, 16, n) - m.zero[:, None, :]) * s_hat[:, None, :]
    y = x.astype(np.float64) @ w.reshape(g * 16, n)
    for r in range(n):
        for e in range(int(m.row_ptr[r]), int(m.row_ptr[r + 1])):
            y[r] += float(m.val[e]) * float(x[int(m.col[e])])
    return y


@settings(max_examples=examples(30))
@given(problems())
@example((1, 0, 0, 0))      # one 2-bit group: a pure unit with three padding words
@example((4, 4, 3, 1))      # only 4-bit groups (no outliers possible)
@example((12, 3, 3, 2))     # alpha = 1/4: three full mixed units
def test_exact_inputs_give_one_rounding_of_the_exact_product(problem):
    # grid argument: fp16 chain partials are multiples of 2^e below 1440 * 2^e (< 2^11 steps),
    # fp32 partials multiples of 2^-4 below 2^24 of them; so only the final cvt rounds
    g, n4, outliers, seed = problem
    rng = np.random.default_rng(seed)
    p = _exact_packed_fields(rng, g, 16, n4, outliers)
    k = 16 * g
    x = (rng.integers(-1, 2, k) * (rng.random(k) < 0.5) * 2.0 ** rng.integers(0, 2, k)).astype(np.float16)
    assert_bitexact(ek.mixed_gemv(p, x), _exact(p, x).astype(np.float16) + np.float16(0), name="y")


@settings(max_examples=examples(8))
@given(problems(), st.sampled_from(["normal", "wide_exponents"]))
def test_vectorised_emulation_equals_plain_loop_twin_on_drawn_problems(problem, kind):
    g, n4, outliers, seed = problem
    rng = np.random.default_rng(seed)
    k, n = 16 * g, 16
    W = (rng.standard_normal((k, n)) * 0.05).astype(np.float32)
    X = rng.standard_normal((2 * k, k))
    p = F.pack(Q.quantize(W, X.T @ X / k, alpha=n4 / g, outlier_ratio=0.005))
    x = rng.standard_normal(k)
    if kind == "wide_exponents":
        x = x * 2.0 ** rng.integers(-14, 8, k)
    x = x.astype(np.float16)
    assert_bitexact(ek.mixed_gemv(p, x), ek.mixed_gemv_reference(p, x), name="y")


def test_check_inputs_returns_x_k_and_n_or_names_the_rule():
    p = _quantized(np.random.default_rng(8), 32, 16)
    x = np.ones(32, np.float16)
    got, k, n = ek.check_inputs(p, x)
    assert got is x and (k, n) == (32, 16)
    for bad, err in ((x[:16], ShapeError), (x.astype(np.float32), DtypeError),
                     (np.full(32, np.inf, np.float16), NonFiniteError)):
        with pytest.raises(err, match="^x: "):
            ek.check_inputs(p, bad)
