"""The boundary rules of the model forwards (:mod:`refsim.models.bert`, :mod:`refsim.models.llama`).

Every forward takes token ids, activations and a weight dict ``W`` (tensor name -> float array, PyTorch
orientation: a linear's ``.weight`` is (N, K)). Before anything indexes with them:

    ids         integer (B, L), B, L >= 1, every id in [0, V) (V = rows of the embedding table);
                a negative id (which NumPy would read from the end) or one >= V is refused
    W[name]     present (CheckpointError naming the tensor), a float ndarray
    linear      x (..., K) against W[name.weight] (N, K): K must agree; bias (N,) when present
    norm        weight (H,) against x (..., H)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from refsim._validate import native_contiguous, require_float_array, require_instance, require_integer_array, require_ndim
from refsim.errors import CheckpointError, FormatRuleError, ShapeError

__all__: list[str] = []


def tensor(W: Any, name: str) -> np.ndarray:
    """``W[name]``: a float ndarray; CheckpointError naming ``name`` when the dict lacks it."""
    require_instance("W", W, dict)
    if name not in W:
        raise CheckpointError(f"W: the model needs tensor {name!r}; got no such tensor ({len(W)} tensors)")
    return require_float_array(name, W[name])


def token_ids(ids: Any, vocab: int) -> np.ndarray:
    """ids integer (B, L) with B, L >= 1 and every entry in [0, vocab)."""
    ids = require_ndim("ids", require_integer_array("ids", ids), 2)
    if ids.size == 0:
        raise ShapeError(f"ids: must hold at least one sequence of at least one token; got shape {ids.shape}")
    lo, hi = int(ids.min()), int(ids.max())
    if lo < 0 or hi >= vocab:
        raise FormatRuleError(f"ids: token ids must lie in [0, {vocab - 1}] (the vocabulary of the embedding "
                              f"table); got {lo if lo < 0 else hi}")
    return ids


def activations(name: str, x: Any, width: int | None = None) -> np.ndarray:
    """x float (B, L, width) (any width when None)."""
    x = require_ndim(name, require_float_array(name, x), 3)
    if width is not None and x.shape[-1] != width:
        raise ShapeError(f"{name}: must be (B, L, {width}); got shape {x.shape}")
    return x


def linear(x: np.ndarray, W: Any, name: str) -> np.ndarray:
    """float32 ``x W[name.weight]^T (+ W[name.bias])`` for x (..., K) and weight (N, K)."""
    w = tensor(W, name + ".weight")
    if w.ndim != 2 or w.shape[1] != x.shape[-1]:
        raise ShapeError(f"{name}.weight: must be (N, K={x.shape[-1]}) for its input; got shape {w.shape}")
    y = native_contiguous(x) @ native_contiguous(w).T   # canonical BLAS operands, whatever the layout
    if name + ".bias" in W:
        b = tensor(W, name + ".bias")
        if b.shape != (w.shape[0],):
            raise ShapeError(f"{name}.bias: shape must be ({w.shape[0]},); got {b.shape}")
        y = y + b
    return y.astype(np.float32)


def vector(W: Any, name: str, width: int) -> np.ndarray:
    """A norm's weight or bias: W[name] of shape (width,)."""
    v = tensor(W, name)
    if v.shape != (width,):
        raise ShapeError(f"{name}: shape must be ({width},); got {v.shape}")
    return v
