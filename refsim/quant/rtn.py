"""Round-to-nearest (RTN) quantization with a per-group clipping-ratio grid search.

For each group (g, n) the clipping ratio c is chosen from a grid (default 1.00, 0.99, ..., 0.50; the
same kind of shrink grid as GPTQ's optional ``Quantizer(mse=True)``) to minimise the group's
reconstruction error

    unweighted:        Σ_k (w_k − ŵ_k(c))²                       over the rows k of the group
    Hessian-weighted:  e_gᵀ H_gg e_g,   e_g = w_g − ŵ_g(c)         H_gg the group's diagonal block of H

The Hessian-weighted choice uses the diagonal *block* of H for the group: the cross-group terms of
eᵀHe couple groups, and dropping them is what makes the per-group choice separable (with
``group_size=None`` the block is the whole H and the criterion is the exact layer-output error
``‖X e‖²`` up to the factor 2/n). c = 1 is always in the grid, so the search never does worse than
plain RTN under its own criterion.

Returns :class:`refsim.formats.uniform.UniformQuant` (codes, scales, zeros) plus the chosen ratios.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refsim._validate import (require_array, require_fields, require_finite, require_float_array, require_instance,
                              require_ndim, require_real, require_shape)
from refsim.errors import FormatRuleError
from refsim.formats.uniform import (
    UniformQuant,
    check_granularity,
    check_weights,
    expand_groups,
    find_params,
    quantize_codes,
)

__all__ = ["RTNResult", "rtn_quantize", "DEFAULT_CLIP_GRID"]

DEFAULT_CLIP_GRID: tuple[float, ...] = tuple(round(1.0 - 0.01 * i, 2) for i in range(51))


@dataclass(frozen=True)
class RTNResult:
    """``quant`` (codes, scales, zeros) and ``clip_ratio`` float32 (G, N) chosen per group."""

    quant: UniformQuant
    clip_ratio: np.ndarray

    def __post_init__(self):
        require_fields(self)  # a plain native array
        require_instance("quant", self.quant, UniformQuant)

    def dequantize(self) -> np.ndarray:
        return self.quant.dequantize()


#: the most clip ratios one call tries (each is a full pass over W)
MAX_CLIP_GRID = 1024


def _clip_grid(clip_grid) -> tuple[float, ...]:
    """``clip_grid`` (None, or a sequence / 1-D array of ratios; empty = plain RTN) as Python floats."""
    if clip_grid is None:
        return (1.0,)
    if isinstance(clip_grid, np.ndarray):
        clip_grid = require_ndim("clip_grid", require_array("clip_grid", clip_grid, max_elements=MAX_CLIP_GRID), 1)
        clip_grid = clip_grid.tolist()
    require_instance("clip_grid", clip_grid, (tuple, list), "tuple, list or 1-D array of clip ratios, or None")
    if len(clip_grid) > MAX_CLIP_GRID:
        raise FormatRuleError(f"clip_grid: at most {MAX_CLIP_GRID} ratios; got {len(clip_grid)}")
    return tuple(require_real(f"clip_grid[{i}]", c) for i, c in enumerate(clip_grid)) or (1.0,)


def rtn_quantize(W: np.ndarray, bits: int, *, scheme: str = "gptq_asym", group_size: int | None = 128,
                 clip_grid: tuple[float, ...] | None = DEFAULT_CLIP_GRID, H: np.ndarray | None = None,
                 rounding: str = "half_even") -> RTNResult:
    """RTN-quantize W float (K, N) per group (``group_size`` None = per-channel), choosing each
    group's clipping ratio from ``clip_grid`` (None or ``(1.0,)`` = plain RTN) by the (optionally
    Hessian-weighted, ``H`` float (K, K)) reconstruction error. ``W`` and ``H`` are not modified."""
    grid = _clip_grid(clip_grid)
    for c in grid:
        check_weights(W, bits, scheme, rounding, c)
    require_ndim("W", W, 2)
    k, n = W.shape
    g = check_granularity(k, "channel" if group_size is None else "group", group_size)
    if H is not None:
        H = require_float_array("H", H)
        require_shape("H", H, (k, k))
        require_finite("H", H)
        if np.any(np.diag(H) < 0):
            raise FormatRuleError("H: diagonal must be non-negative (a Hessian X^T X); got a negative entry")
    ng = k // g
    x = W.astype(np.float32).reshape(ng, g, n)  # (G, g, N)
    xg = x.transpose(1, 0, 2)  # (g, G, N)
    best_err = np.full((ng, n), np.inf)
    best = (np.zeros((ng, n), np.float32), np.zeros((ng, n), np.int32), np.ones((ng, n), np.float32))
    Hb = None
    if H is not None:
        Hb = np.stack([H[i * g:(i + 1) * g, i * g:(i + 1) * g] for i in range(ng)]).astype(np.float64)  # (G, g, g)
    for c in grid:
        s, z = find_params(xg, bits, scheme, clip_ratio=c, rounding=rounding)  # (G, N)
        q = quantize_codes(x, s[:, None, :], z[:, None, :], bits, rounding)  # (G, g, N)
        e = (x - s[:, None, :] * (q.astype(np.float32) - z[:, None, :].astype(np.float32))).astype(np.float64)
        if Hb is None:
            err = np.einsum("gkn,gkn->gn", e, e)
        else:
            err = np.einsum("gkn,gkl,gln->gn", e, Hb, e)
        better = err < best_err
        best_err = np.where(better, err, best_err)
        best = (np.where(better, s, best[0]), np.where(better, z, best[1]), np.where(better, np.float32(c), best[2]))
    scale, zero, ratio = best
    q = quantize_codes(W.astype(np.float32), expand_groups(scale, g, k), expand_groups(zero, g, k), bits, rounding)
    granularity = "channel" if group_size is None else "group"
    return RTNResult(UniformQuant(q, scale, zero, bits, g, scheme, granularity, rounding), ratio)
