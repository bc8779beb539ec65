"""Property tests of the 2/4/16-bit format over drawn legal problems: pack equals its loop twin,
unpack inverts pack, the CSR is valid, and the average-bit formula equals the packed byte count."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from refsim.formats import mixed_2_4_16 as F
from refsim.testing import examples


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
    m = F.quantize(W, H, alpha=alpha, outlier_ratio=ratio)
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
