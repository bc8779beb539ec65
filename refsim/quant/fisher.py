"""Fisher-diagonal sensitivity of a linear layer (the k-means weights of SqueezeLLM / Any-Precision).

For a linear layer ``Y = X @ W`` (X (T, K) activations of T tokens, W (K, N)) and a loss L, the
gradient of one sample s (one sequence of T_s tokens, batch size 1 as in the official
``gradients.py``) is ``dW_s = X_s^T @ dY_s`` with ``dY_s = dL_s/dY_s`` (T_s, N).  The empirical
Fisher diagonal is the sum of squared per-sample gradients:

    G[k, n] = sum_s ( sum_t X_s[t, k] * dY_s[t, n] ) ** 2

(the official code gets the same sum with a backward hook returning ``grad ** 2`` and bf16
accumulation; refsim accumulates in float64 and returns float32).

Output-gradient proxy, when no loss is at hand (e.g. an encoder without a task head):
``isotropic_output_gradients`` draws dY with independent standard-normal entries.  Then
``E[G[k, n]] = sum_s sum_t X_s[t, k]**2``: the diagonal of ``X^T X`` (the layer-output Hessian
of ``||X dW||^2``, the GPTQ/OBS proxy), identical for every output column, so the sensitivity
ranks input features by activation energy.  :func:`expected_isotropic_fisher` returns that
expectation directly.

Source: github:SNU-ARC/any-precision-llm @ a3257d02740cc5757c78673da534b0630ff3a4ea,
any_precision/quantization/gradients.py (hook ``grad.pow(2)``, one sample per backward).
"""

from __future__ import annotations

import numpy as np

from refsim._validate import require_bounded, require_finite, require_float_array, require_int, require_ndim
from refsim.errors import ShapeError

__all__ = [
    "fisher_diagonal",
    "fisher_diagonal_reference",
    "isotropic_output_gradients",
    "expected_isotropic_fisher",
]


def _check(X: np.ndarray, dY: np.ndarray) -> None:
    X = require_float_array("X", X)
    dY = require_float_array("dY", dY)
    require_ndim("X", X, 3)
    require_ndim("dY", dY, 3)
    if X.shape[:2] != dY.shape[:2]:
        raise ShapeError(f"dY: leading (samples, tokens) dims must equal X's {X.shape[:2]}; got {dY.shape[:2]}")
    require_finite("X", X)
    require_finite("dY", dY)


def fisher_diagonal(X: np.ndarray, dY: np.ndarray) -> np.ndarray:
    """Empirical Fisher diagonal of W for ``Y = X @ W``.

    X: float (S, T, K) inputs, S samples of T tokens; dY: float (S, T, N) output gradients.
    Returns float32 (K, N) = ``sum_s (X_s^T dY_s) ** 2`` (accumulated in float64).
    """
    _check(X, dY)
    g = np.einsum("stk,stn->skn", X.astype(np.float64), dY.astype(np.float64))  # (S, K, N)
    return np.einsum("skn,skn->kn", g, g).astype(np.float32)


def fisher_diagonal_reference(X: np.ndarray, dY: np.ndarray) -> np.ndarray:
    """Plain-loop twin of :func:`fisher_diagonal`."""
    _check(X, dY)
    s_, t_, k_ = X.shape
    n_ = dY.shape[2]
    out = np.zeros((k_, n_), dtype=np.float64)
    for s in range(s_):
        for k in range(k_):
            for n in range(n_):
                g = 0.0
                for t in range(t_):
                    g += float(X[s, t, k]) * float(dY[s, t, n])
                out[k, n] += g * g
    return out.astype(np.float32)


def isotropic_output_gradients(shape: tuple[int, int, int], seed: int = 0) -> np.ndarray:
    """The documented proxy: float32 (S, T, N) standard-normal output gradients."""
    if not isinstance(shape, (tuple, list)) or len(shape) != 3:
        raise ShapeError(f"shape: must be (S, T, N); got {shape!r}")
    shape = tuple(require_int("shape entry", v, minimum=1) for v in shape)
    require_bounded("S*T*N", shape[0] * shape[1] * shape[2])
    seed = require_int("seed", seed, minimum=0)
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def expected_isotropic_fisher(X: np.ndarray, n: int) -> np.ndarray:
    """E[fisher_diagonal(X, dY)] for isotropic dY: float32 (K, N) with every column
    ``sum_{s,t} X[s, t, :]**2``.  X float (S, T, K) or (T, K)."""
    X = require_float_array("X", X)
    require_finite("X", X)
    n = require_int("n", n, minimum=1)
    if X.ndim not in (2, 3) or X.shape[-1] == 0:
        raise ShapeError(f"X: must be (S, T, K) or (T, K) with K >= 1; got shape {X.shape}")
    require_bounded("K*N", X.shape[-1] * n)
    energy = (X.astype(np.float64) ** 2).reshape(-1, X.shape[-1]).sum(axis=0)  # (K,)
    return np.repeat(energy[:, None], n, axis=1).astype(np.float32)
