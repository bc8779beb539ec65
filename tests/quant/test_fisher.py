"""Fisher diagonal of a linear layer: loops, a hand-derived case, the isotropic expectation."""

from __future__ import annotations

import numpy as np
import pytest

from refsim.errors import NonFiniteError, ShapeError
from refsim.quant import fisher
from refsim.testing import assert_bitexact


def test_vectorised_matches_plain_loops():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((3, 5, 4)).astype(np.float32)
    dY = rng.standard_normal((3, 5, 6)).astype(np.float32)
    a = fisher.fisher_diagonal(X, dY)
    b = fisher.fisher_diagonal_reference(X, dY)
    np.testing.assert_allclose(a, b, rtol=1e-6)  # float64 sums in different order, then float32


def test_hand_derived_case_is_sum_of_squared_per_sample_gradients():
    # two samples of one token: grad_s = x_s^T dy_s; G = grad_1^2 + grad_2^2
    X = np.array([[[1.0, 2.0]], [[3.0, 0.0]]])
    dY = np.array([[[1.0, -1.0, 0.5]], [[2.0, 0.0, 1.0]]])
    expected = np.array([[1 + 36, 1 + 0, 0.25 + 9], [4 + 0, 4 + 0, 1 + 0]], dtype=np.float32)
    assert_bitexact(fisher.fisher_diagonal(X, dY), expected, name="G")


def test_tokens_of_a_sample_are_summed_before_squaring():
    X = np.ones((1, 2, 1))
    dY = np.array([[[1.0], [-1.0]]])  # the two tokens' gradients cancel
    assert_bitexact(fisher.fisher_diagonal(X, dY), np.zeros((1, 1), np.float32), name="G")


def test_isotropic_proxy_has_the_activation_energy_as_expectation():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((400, 1, 3)) * np.array([0.5, 1.0, 2.0])
    dY = fisher.isotropic_output_gradients((400, 1, 2), seed=3)
    G = fisher.fisher_diagonal(X, dY)
    E = fisher.expected_isotropic_fisher(X, 2)
    # G is a sum of 400 terms x^2 g^2, g ~ N(0,1): relative sd = sqrt(2/400) ~ 7%; allow 5 sd
    assert np.all(np.abs(G / E - 1) < 5 * np.sqrt(2 / 400) * 1.5)


def test_bad_input():
    with pytest.raises(ShapeError, match="leading"):
        fisher.fisher_diagonal(np.zeros((2, 3, 4)), np.zeros((2, 2, 4)))
    with pytest.raises(ShapeError, match="3-D"):
        fisher.fisher_diagonal(np.zeros((3, 4)), np.zeros((3, 4)))
    bad = np.zeros((1, 1, 2))
    bad[0, 0, 1] = np.nan
    with pytest.raises(NonFiniteError):
        fisher.fisher_diagonal(bad, np.zeros((1, 1, 2)))
