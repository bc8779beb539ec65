"""AWQ (Lin et al., MLSys 2024) as AutoAWQ runs it: activation-aware scale search and clip search.

Matched: casper-hansen/AutoAWQ ``awq/quantize/quantizer.py`` (``AwqQuantizer.pseudo_quantize_tensor``,
``_search_best_scale``, ``_compute_best_scale``, ``_compute_loss``, ``_search_best_clip``,
``_compute_best_clip``) and ``awq/quantize/scale.py`` (``apply_scale``, ``apply_clip``), commit
88e4c76b20755db275574e6a03c83c84ba3bece5. Weights are PyTorch (N, K) = (out, in), float16 as
AutoAWQ loads the model (``torch_dtype=float16``); every elementwise step rounds to float16 as a
torch op on half tensors does.

    Scale search, for the linears that read one input X (T, K) (e.g. q/k/v after input_layernorm):
        w_mean[k] = mean over rows r of |W[r, k]| / (max_{k' in group(k)} |W[r, k']| + 1e-6)
        x_mean[k] = mean over tokens of |X[t, k]|              (float32 sum, then float16)
        for ratio in 0, 1/20, ..., 19/20:                       (n_grid = 20)
            s  = clamp(x_mean^ratio / (w_mean^(1-ratio) + 1e-4), min=1e-4)   (duo scaling)
            s  = s / sqrt(max(s) * min(s));  inf/NaN -> 1
            W' = Q(W * s) / s  for every linear;   out' = module2inspect(X; W')
            loss = mean((out - out')^2)                          out = module2inspect(X; W)
        keep the s of the smallest loss; fold 1/s into the previous op (norm weight, or the rows
        of the previous linear) and s into the columns of the linears.
    Clip search, per linear except q/k projections, on the scaled W and X / s:
        X subsampled to every max(1, T // 512)-th token; per group g and output row r:
        for i in 0..9: m = max|W[r, g]| * (1 - i/20);  err_i = mean_t (X_g W_g^T - X_g Q(clamp(W_g, -m, m))^T)^2
        W[r, g] = clamp(W[r, g], -m*, m*) with m* of the smallest error.
    Q: asymmetric min/max quantization per group (zero_point=True), see :func:`pseudo_quantize`.

A Python exponent of ``pow`` on a float16 tensor is first rounded to float16 (the grid's ``ratio``
and ``1 - ratio``): :func:`_c` does the same; other elementwise float16 ops compute in float32 with
the scalar as a float32 and round once, which is what NumPy's float16 arithmetic does too. Found by
comparing every intermediate with a torch re-run: with the exponent unrounded, 45 % of the scales
differed by one ulp.

What differs from AutoAWQ: matrix products (the module forwards, the clip search's per-group
products) are summed in float32 by BLAS, not by PyTorch's fp16 kernels, so losses agree to a few
float16 ulps, not bit for bit; the chosen grid points match except where two losses tie that
closely (tests/quant/test_awq.py measures it against values a torch re-run of AutoAWQ computed).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from refsim._validate import (native_contiguous, require_bits, require_bool, require_callable, require_fields, require_finite,
                              require_float_array, require_instance, require_int, require_ndim, require_real,
                              set_fields)
from refsim.errors import FormatRuleError, ShapeError

__all__ = ["N_GRID", "MAX_SHRINK", "N_SAMPLE_TOKEN", "AVOID_CLIP", "pseudo_quantize", "weight_mean", "input_mean",
           "search_scale", "search_clip", "apply_clip", "ScaleSearch"]

N_GRID = 20
MAX_SHRINK = 0.5
N_SAMPLE_TOKEN = 512
#: AutoAWQ skips the clip search for these names ("due to qk bmm, it is hard to clip precisely")
AVOID_CLIP = ("q_", "k_", "query", "key", "Wqkv")
_H = np.float16


def _h(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float32).astype(_H)


def _c(v: float) -> np.float32:
    """A Python exponent as PyTorch's ``pow`` uses it on float16 tensors: rounded to float16 first
    (``w.pow(0.7)`` raises to 0.7001953125). Added and multiplied scalars are not rounded: those
    kernels compute in float32 with the scalar as a float32."""
    return np.float32(_H(v))


BITS = (2, 3, 4, 8)


def _weights(name: str, w) -> np.ndarray:
    """A finite float weight array of at least 2 dimensions, as float16 (AutoAWQ's model dtype)."""
    w = require_float_array(name, w)
    if w.ndim < 2 or w.size == 0:
        raise ShapeError(f"{name}: must be a non-empty (..., K) weight array; got shape {w.shape}")
    require_finite(name, w)
    with np.errstate(over="ignore"):
        w16 = w.astype(_H)
    if not np.isfinite(w16).all():
        raise FormatRuleError(f"{name}: must be representable in float16 (|w| <= 65504); got a larger value")
    return w16


def pseudo_quantize(w: np.ndarray, bits: int, group_size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """AutoAWQ's ``pseudo_quantize_tensor`` (zero_point=True) on float16 w (..., K) grouped along K.

    Returns (w_fq float16 like w, scales float16 (..., G), zeros float16 (..., G)) with, per group,
    ``s = clamp(max - min, 1e-5) / (2**b - 1)``, ``z = clamp(-round(min / s), 0, 2**b - 1)``,
    ``w_fq = (clamp(round(w / s) + z, 0, 2**b - 1) - z) * s``, each op rounded to float16.
    """
    w = _weights("w", w)
    bits = require_bits(bits, BITS)
    group_size = require_int("group_size", group_size, minimum=1)
    shape = w.shape
    k = shape[-1]
    if k % group_size:
        raise ShapeError(f"w: last axis K={k} must be a multiple of group_size={group_size}")
    g = w.reshape(-1, group_size)                                    # (rows * G, group)
    maxq = _H((1 << bits) - 1)
    mx, mn = g.max(axis=1, keepdims=True), g.min(axis=1, keepdims=True)
    s = np.maximum(_h(mx.astype(np.float32) - mn), _H(1e-5))                # clamp(min=1e-5): an fp16 1e-5
    s = _h(s.astype(np.float32) / np.float32(maxq))
    z = np.clip(-np.rint(_h(mn.astype(np.float32) / s)), _H(0), maxq).astype(_H)
    q = np.clip(_h(np.rint(_h(g.astype(np.float32) / s)).astype(np.float32) + z), _H(0), maxq)
    w_fq = _h((q.astype(np.float32) - z) * s.astype(np.float32))
    G = k // group_size
    return w_fq.reshape(shape), s.reshape(*shape[:-1], G), z.reshape(*shape[:-1], G)


def weight_mean(weights: list[np.ndarray], group_size: int) -> np.ndarray:
    """float16 (K,): mean over the stacked rows of |W| normalised by each row-group's max (STEP 1)."""
    require_instance("weights", weights, (list, tuple))
    if not weights:
        raise FormatRuleError("weights: must hold at least one (N, K) weight; got none")
    ws = [_weights(f"weights[{i}]", w) for i, w in enumerate(weights)]
    group_size = require_int("group_size", group_size, minimum=1)
    if any(w.shape[1] != ws[0].shape[1] for w in ws) or ws[0].shape[1] % group_size:
        raise ShapeError(f"weights: must share K, a multiple of group_size={group_size}; got "
                         f"{[w.shape for w in ws]}")
    W = np.concatenate(ws, axis=0)  # (sum N, K)
    a = np.abs(W).reshape(-1, group_size)
    denom = _h(a.max(axis=1, keepdims=True).astype(np.float32) + np.float32(1e-6))
    ws = _h(a.astype(np.float32) / denom).reshape(W.shape)
    return _h(ws.astype(np.float32).mean(axis=0, dtype=np.float32))


def input_mean(X: np.ndarray) -> np.ndarray:
    """float16 (K,): mean over tokens of |X| (a float32 sum, as AutoAWQ's chunked loop) (STEP 2)."""
    X = require_ndim("X", require_float_array("X", X), 2)
    if X.shape[0] == 0:
        raise ShapeError(f"X: must hold at least one token; got shape {X.shape}")
    require_finite("X", X)
    a = np.abs(np.asarray(X, _H)).astype(np.float32)
    return _h(a.sum(axis=0, dtype=np.float32) / np.float32(a.shape[0]))


@dataclass(frozen=True)
class ScaleSearch:
    """The result of :func:`search_scale`: ``scales`` float16 (K,), ``ratio``, ``losses`` per grid point."""

    scales: np.ndarray
    ratio: float
    losses: list[float]

    def __post_init__(self):
        require_fields(self)  # a plain native array, a Python float, a list
        set_fields(self, losses=[require_real(f"losses[{i}]", v, finite=False) for i, v in enumerate(self.losses)])


def search_scale(X: np.ndarray, weights: dict[str, np.ndarray], forward: Callable[[dict], np.ndarray], *,
                 bits: int = 4, group_size: int = 128, duo_scaling: bool = True) -> ScaleSearch:
    """AutoAWQ's scale search (module docstring) for the linears ``weights`` (name -> float16 (N, K))
    that read X (T, K). ``forward(W')`` returns module2inspect's output for X with the given
    weights replacing the originals (name -> (N, K)), ``forward({})`` the original output."""
    X = require_ndim("X", require_float_array("X", X), 2)
    group_size = require_int("group_size", group_size, minimum=1)
    bits = require_bits(bits, BITS)
    duo_scaling = require_bool("duo_scaling", duo_scaling)
    require_instance("weights", weights, dict)
    require_callable("forward", forward)
    if not weights:
        raise FormatRuleError("weights: the scale search needs at least one linear; got none")
    for name, w in weights.items():
        w = require_float_array(f"weights[{name!r}]", w)
        if w.ndim != 2 or w.shape[1] != X.shape[1]:
            raise ShapeError(f"weights[{name!r}]: must be (N, K={X.shape[1]}); got {w.shape}")
    w16 = {n: np.asarray(w, _H) for n, w in weights.items()}
    w_mean = weight_mean(list(w16.values()), group_size)
    x_mean = input_mean(X)
    fmax = np.finfo(_H).max
    ref = np.clip(_h(forward({})), -fmax, fmax)
    best, best_ratio, best_loss, losses = None, -1.0, np.inf, []
    for r in range(N_GRID):
        ratio = r / N_GRID
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            if duo_scaling:
                num = _h(np.power(x_mean.astype(np.float32), _c(ratio)))
                den = _h(_h(np.power(w_mean.astype(np.float32), _c(1 - ratio))).astype(np.float32) + np.float32(1e-4))
                s = np.maximum(_h(num.astype(np.float32) / den), _H(1e-4))
            else:
                s = np.maximum(_h(np.power(x_mean.astype(np.float32), _c(ratio))), _H(1e-4))
            norm = _h(np.sqrt(_h(s.max().astype(np.float32) * s.min()).astype(np.float32)))
            s = _h(s.astype(np.float32) / norm)
        s[~np.isfinite(s)] = _H(1)
        trial = {n: _h(pseudo_quantize(_h(w.astype(np.float32) * s), bits, group_size)[0].astype(np.float32) / s)
                 for n, w in w16.items()}
        out = np.clip(_h(forward(trial)), -fmax, fmax)
        diff = _h(ref.astype(np.float32) - out).astype(np.float32)  # fp16 subtraction, then .float().pow(2)
        loss = float(np.square(diff).astype(np.float64).sum() / ref.size)
        losses.append(loss)
        if loss < best_loss:
            best, best_ratio, best_loss = s.copy(), ratio, loss
    if best is None:
        raise FormatRuleError(f"X: every scale-search loss is NaN (non-finite activations?); got {losses[:3]}")
    return ScaleSearch(best, best_ratio, losses)


def search_clip(W: np.ndarray, X: np.ndarray, *, bits: int = 4, group_size: int = 128) -> np.ndarray:
    """AutoAWQ's clip search (module docstring): float16 (N, G) max values for W float16 (N, K)
    given its inputs X (T, K) (already divided by the layer's AWQ scales)."""
    W = _weights("W", W)
    X = require_ndim("X", require_float_array("X", X), 2)
    bits = require_bits(bits, BITS)
    group_size = require_int("group_size", group_size, minimum=1)
    if W.ndim != 2 or X.shape[0] == 0:
        raise ShapeError(f"W, X: must be (N, K) and (T >= 1, K); got {W.shape}, {X.shape}")
    n, k = W.shape
    if X.shape[1] != k or k % group_size:
        raise ShapeError(f"X: must be (T, K={k}) with K a multiple of group_size={group_size}; got {X.shape}")
    G = k // group_size
    step = max(1, X.shape[0] // N_SAMPLE_TOKEN)
    # einsum(optimize=True) hands these to BLAS: canonical copies, whatever the callers' layouts
    x = native_contiguous(np.asarray(X, _H)[::step], np.float32).reshape(-1, G, group_size)  # (T', G, g)
    wg = native_contiguous(W).reshape(n, G, group_size)                 # (N, G, g)
    org_max = np.abs(wg).max(axis=2, keepdims=True)                     # (N, G, 1)
    org_out = np.einsum("tgk,ngk->ngt", x, native_contiguous(wg, np.float32), optimize=True)
    best = org_max.copy()
    min_err = np.full(org_max.shape, 1e9, np.float32)
    for i in range(int(MAX_SHRINK * N_GRID)):
        m = _h(org_max.astype(np.float32) * np.float32(1 - i / N_GRID))
        cur = np.clip(wg, -m, m)
        q = pseudo_quantize(cur.reshape(n, k), bits, group_size)[0].reshape(n, G, group_size)
        out = np.einsum("tgk,ngk->ngt", x, native_contiguous(q, np.float32), optimize=True)
        err = np.square(out - org_out).mean(axis=2, keepdims=True, dtype=np.float32)
        better = err < min_err
        min_err = np.where(better, err, min_err)
        best = np.where(better, m, best)
    return best[:, :, 0]


def apply_clip(W: np.ndarray, max_val: np.ndarray) -> np.ndarray:
    """``clamp(W, -max_val, max_val)`` per (row, group): float16 (N, K) from W (N, K), max_val (N, G)."""
    W = _weights("W", W)
    max_val = require_ndim("max_val", require_float_array("max_val", max_val), 2)
    if W.ndim != 2 or max_val.shape[0] != W.shape[0] or max_val.shape[1] < 1 or W.shape[1] % max_val.shape[1]:
        raise ShapeError(f"max_val: must be (N, G) with G dividing K for W {W.shape}; got {max_val.shape}")
    n, k = W.shape
    G = max_val.shape[1]
    m = np.asarray(max_val, _H)[:, :, None]
    return np.clip(W.reshape(n, G, k // G), -m, m).reshape(n, k)
