"""Seed k-means: vectorised == per-channel loops == official flash1dkmeans output; k-means facts."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from refsim.errors import FormatRuleError, NonFiniteError, ShapeError
from refsim.quant import squeezellm as sq
from refsim.testing import assert_bitexact

FIXTURE = Path(__file__).parent / "data" / "anyprec_official_8x96_s3p8_rs5.npz"


def _edge_case_layer(k=64, n=10, seed=0):
    """(K, N) weights and sensitivities with every special case of the official code."""
    rng = np.random.default_rng(seed)
    W = rng.standard_normal((k, n)).astype(np.float32)
    G = rng.random((k, n)).astype(np.float32)
    G[:, 1] = 0  # all-zero sensitivity: unit-weight fallback
    G[: k // 2, 2] = 0  # zero-weight prefix
    G[::2, 3] = 0  # alternating zero weights
    W[:8, 4] = 0  # exact zeros get zero sensitivity
    G[:, 5] = 0
    G[7, 5] = 2.0  # a single positive weight
    W[:, 6] = np.round(W[:, 6])  # heavy ties
    return W, G


@pytest.mark.parametrize("bits", [2, 3, 4])
def test_vectorised_seed_matches_per_channel_reference(bits):
    W, G = _edge_case_layer()
    a = sq.seed(W, G, bits, random_state=3)
    b = sq.seed_reference(W, G, bits, random_state=3)
    assert_bitexact(a.lut, b.lut, name="lut")
    assert_bitexact(a.borders, b.borders, name="borders")
    assert_bitexact(a.codes, b.codes, name="codes")


def test_seed_matches_the_official_k_means_bit_for_bit():
    # fixture produced by flash1dkmeans 0.2.5 (numba) driven as quantize.py does; see
    # tests/quant/data/make_anyprec_official_fixture.py
    d = np.load(FIXTURE)
    res = sq.seed(d["W"].T.copy(), d["G"].T.copy(), 3, random_state=5)
    assert_bitexact(res.lut, d["lut3"], name="seed lut")
    assert_bitexact(res.codes.T.copy(), d["labels"] >> 5, name="seed codes (parent >> 5)")


def test_converged_seed_is_a_weighted_lloyd_fixed_point():
    rng = np.random.default_rng(4)
    W = rng.standard_normal((200, 6)).astype(np.float32)
    G = rng.random((200, 6)).astype(np.float32) + 0.1
    res = sq.seed(W, G, 3, random_state=0)
    for n in range(6):
        c = res.lut[n].astype(np.float64)
        assert np.all(np.diff(c) >= 0)
        # every weight sits in the cluster of its nearest centroid (midpoint rule)
        nearest = np.argmin(np.abs(W[:, n, None].astype(np.float64) - c[None, :]), axis=1)
        assert np.array_equal(c[nearest], c[res.codes[:, n]])
        for j in range(8):
            sel = res.codes[:, n] == j
            if sel.any():
                mean = np.sum(G[sel, n] * W[sel, n].astype(np.float64)) / np.sum(G[sel, n])
                assert abs(mean - c[j]) <= 1e-6 * max(1.0, abs(mean))


def test_seed_is_deterministic_and_does_not_modify_inputs():
    W, G = _edge_case_layer(seed=1)
    W0, G0 = W.copy(), G.copy()
    a = sq.seed(W, G, 3, random_state=9)
    b = sq.seed(W, G, 3, random_state=9)
    assert_bitexact(a.lut, b.lut)
    assert_bitexact(W, W0)
    assert_bitexact(G, G0)


def test_bad_input():
    W = np.zeros((8, 2), np.float32)
    with pytest.raises(ShapeError, match="shape"):
        sq.seed(W, np.zeros((8, 3), np.float32))
    with pytest.raises(FormatRuleError, match=">= 0"):
        sq.seed(W, -np.ones((8, 2), np.float32))
    with pytest.raises(FormatRuleError, match="1..8"):
        sq.seed(W, np.ones((8, 2), np.float32), bits=9)
    bad = W.copy()
    bad[0, 0] = np.inf
    with pytest.raises(NonFiniteError):
        sq.seed(bad, np.ones((8, 2), np.float32))
    with pytest.raises(FormatRuleError, match="random_state"):
        sq.seed(W, np.ones((8, 2), np.float32), random_state=None)


def test_numba_argsort_sorts_and_equals_any_sort_without_ties():
    rng = np.random.default_rng(8)
    x = rng.standard_normal(300).astype(np.float32)
    assert np.array_equal(sq.numba_argsort(x), np.argsort(x, kind="stable"))
    t = np.round(x * 3).astype(np.float32)  # heavy ties
    o = sq.numba_argsort(t)
    assert sorted(o.tolist()) == list(range(300))
    assert np.all(np.diff(t[o]) >= 0)
    assert not np.array_equal(o, np.argsort(t, kind="stable"))  # quicksort is not stable


def test_numba_argsort_insertion_sort_range_is_stable():
    # fewer than 16 elements never partition: plain insertion sort keeps equal keys in order
    x = np.array([2, 1, 2, 1, 0, 2], np.float32)
    assert sq.numba_argsort(x).tolist() == [4, 1, 3, 0, 2, 5]


def test_unknown_tie_order_is_rejected():
    with pytest.raises(FormatRuleError, match="tie_order"):
        sq.seed(np.ones((4, 2), np.float32), np.ones((4, 2), np.float32), tie_order="random")
