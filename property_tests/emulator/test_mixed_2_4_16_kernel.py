"""Property: the 2/4/16-bit GEMV emulation equals its plain-loop twin on drawn legal problems, and
returns one rounding of the exact product whenever no step can round."""

from __future__ import annotations

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from refsim.emulator import mixed_2_4_16_kernel as ek
from refsim.formats import mixed_2_4_16 as F
from refsim.testing import assert_bitexact, examples


@st.composite
def problems(draw):
    """G in 1..12 groups (n2 % 3 and n2 - 3 n4 take every value), N = 16, any 4-bit share."""
    g = draw(st.integers(1, 12))
    n4 = draw(st.integers(0, g))
    outliers = draw(st.integers(0, 3))
    seed = draw(st.integers(0, 2**31 - 1))
    return g, n4, outliers, seed


def _exact_packed(rng, g, n, n4, outliers_per_row):
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
    p = _exact_packed(rng, g, 16, n4, outliers)
    k = 16 * g
    x = (rng.integers(-1, 2, k) * (rng.random(k) < 0.5) * 2.0 ** rng.integers(0, 2, k)).astype(np.float16)
    assert_bitexact(ek.mixed_gemv(p, x), _exact(p, x).astype(np.float16) + np.float16(0), name="y")


@settings(max_examples=examples(8))
@given(problems(), st.sampled_from(["normal", "wide_exponents"]))
def test_vectorised_emulation_equals_plain_loop_twin(problem, kind):
    g, n4, outliers, seed = problem
    rng = np.random.default_rng(seed)
    k, n = 16 * g, 16
    W = (rng.standard_normal((k, n)) * 0.05).astype(np.float32)
    X = rng.standard_normal((2 * k, k))
    p = F.pack(F.quantize(W, X.T @ X / k, alpha=n4 / g, outlier_ratio=0.005))
    x = rng.standard_normal(k)
    if kind == "wide_exponents":
        x = x * 2.0 ** rng.integers(-14, 8, k)
    x = x.astype(np.float16)
    assert_bitexact(ek.mixed_gemv(p, x), ek.mixed_gemv_reference(p, x), name="y")
