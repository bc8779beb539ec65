"""refsim.models.inputs: the boundary rules every model forward applies, each refusal named."""

from __future__ import annotations

import numpy as np
import pytest

from refsim.errors import CheckpointError, DtypeError, FormatRuleError, ShapeError
from refsim.models import inputs


def test_token_ids_in_range_pass_and_each_kind_of_bad_id_is_named():
    ids = np.array([[0, 4]], np.int64)
    assert inputs.token_ids(ids, 5) is ids
    for bad, match in ((np.array([[0, -1]]), "got -1"), (np.array([[5]]), "got 5"),
                       (np.zeros((1, 0), np.int64), "at least one sequence")):
        with pytest.raises((FormatRuleError, ShapeError), match=match):
            inputs.token_ids(bad, 5)
    with pytest.raises(DtypeError):
        inputs.token_ids(np.array([[0.0]]), 5)


def test_linear_is_x_times_w_transposed_plus_bias_and_checks_k_and_the_bias():
    x = np.array([[1.0, 2.0]], np.float32)                            # (1, K=2)
    W = {"l.weight": np.array([[1.0, 0.0], [3.0, -1.0], [0.5, 0.5]], np.float32),   # (N=3, K=2)
         "l.bias": np.array([0.0, 1.0, -1.0], np.float32)}
    assert inputs.linear(x, W, "l").tolist() == [[1.0, 2.0, 0.5]]     # [1, 3-2+1, 1.5-1]
    with pytest.raises(ShapeError, match=r"l.weight: must be \(N, K=3\) for its input; got shape \(3, 2\)"):
        inputs.linear(np.ones((1, 3), np.float32), W, "l")
    with pytest.raises(ShapeError, match=r"l.bias: shape must be \(3,\); got \(2,\)"):
        inputs.linear(x, {**W, "l.bias": np.zeros(2, np.float32)}, "l")
    with pytest.raises(CheckpointError, match=r"needs tensor 'm.weight'"):
        inputs.linear(x, W, "m")


def test_vectors_and_activations_must_have_the_model_width():
    with pytest.raises(ShapeError, match=r"n: shape must be \(4,\); got \(3,\)"):
        inputs.vector({"n": np.ones(3, np.float32)}, "n", 4)
    with pytest.raises(ShapeError, match=r"x: must be 3-D"):
        inputs.activations("x", np.ones((2, 4), np.float32))
    with pytest.raises(ShapeError, match=r"x: must be \(B, L, 4\); got shape \(1, 2, 3\)"):
        inputs.activations("x", np.ones((1, 2, 3), np.float32), 4)
    with pytest.raises(FormatRuleError, match=r"W: must be a dict"):
        inputs.tensor([np.ones(2)], "n")
