"""Atom's quantization pipeline: calibration -> reorder -> weight quantization -> fake-quant.

Matched: efeslab/Atom @ 7e3618b1a7a7c86e1c93cc909b1510c046d76ac6, ``model/outlier.py``
(hessian statistic), ``model/qLinearLayer.py`` (``reorder``, ``quant`` = the RTN path),
``model/gptq.py`` (``GPTQ.fasterquant`` with ``Quantizer_GPTQ``, the GPTQ path the paper's
numbers use), ``model/quant.py`` (activation fake-quant); flags of ``scripts/run_atom_ppl.sh``.
The formats themselves live in :mod:`refsim.formats.atom`.

    calibration X (T, K) --hessian_statistic--> stat (K,) --reorder_index--> idx (outliers last)
    W (K, N) --permute rows by idx--> W_r
        RTN : formats.atom.quantize_weights(W_r)     scale = 0.85 * absmax / 7 per (group, pair)
        GPTQ: atom_gptq(W_r, H_r)                    scale = 0.85 * (xmax - xmin) / 15, zero 8
                                                     (= 2 * 0.85 * absmax / 15 for a group with
                                                     both signs), INT4 region only; the lazy
                                                     updates flow into the keeper columns, which
                                                     are then INT8-RTN'd per output channel
    x (M, K) --permute columns by idx--> x_r --formats.atom.quantize_activations--> x_r_hat
    y_hat = x_r_hat @ W_r_hat          (== x_hat @ W_hat in the original channel order)

Differences between the two weight paths are Atom's own (efeslab/Atom ``model/quant.py`` and ``model/gptq.py``).
GPTQ arithmetic: weights and updates in float32, the Cholesky factor of H^-1 from
:mod:`refsim.quant.gptq` (float64, then cast to float32; the official code factorises in float32),
no act-order (Atom asserts it off), blocksize 128, percdamp 0.01.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refsim._validate import (
    native_contiguous,
    require_bool,
    require_choice,
    require_fields,
    require_finite,
    require_float_array,
    require_instance,
    require_int,
    require_ndim,
    require_shape,
)
from refsim.errors import FormatRuleError, NonFiniteError, ShapeError
from refsim.formats import atom as fmt
from refsim.quant.gptq import hessian, upper_cholesky_of_inverse

__all__ = ["AtomConfig", "AtomLayer", "AtomCalibration", "atom_gptq", "atom_gptq_reference", "calibrate",
           "quantize_layer", "layer_output_error"]

WEIGHT_METHODS = ("rtn", "gptq")
KEEPER_PRECISIONS = ("int8", "fp16")


@dataclass(frozen=True)
class AtomConfig:
    """One point of Atom's design space (defaults = the paper's configuration).

    reorder: sort channels by the hessian statistic (outliers last); keeper: INT8 tail width
    (0 = no outlier channels); group_size: INT4 group along K (None = one group spanning the
    K - keeper body, i.e. per-channel weights / per-token activations); w_clip / a_clip: clip
    ratios of the INT4 body (1.0 = none); weight_method: "rtn" or "gptq"; quantize_activations:
    False gives W4A16; keeper_precision: "int8" (Atom's final choice, keeper_precision=3) or
    "fp16" (keeper_precision=0: the tail is only rounded to float16; RTN path only)."""

    reorder: bool = True
    keeper: int = fmt.KEEPER
    group_size: int | None = fmt.GROUP
    w_clip: float = fmt.W_CLIP
    a_clip: float = fmt.A_CLIP
    weight_method: str = "gptq"
    quantize_activations: bool = True
    percdamp: float = 0.01
    keeper_precision: str = "int8"

    def __post_init__(self):
        require_fields(self)  # Python bools, ints, floats and strs, whatever NumPy scalars came in
        require_int("keeper", self.keeper, minimum=0)
        if self.group_size is not None:
            require_int("group_size", self.group_size, minimum=1)
        for name in ("w_clip", "a_clip"):
            fmt.check_clip(getattr(self, name), name)
        require_choice("weight_method", self.weight_method, WEIGHT_METHODS)
        require_choice("keeper_precision", self.keeper_precision, KEEPER_PRECISIONS)
        if not 0.0 <= self.percdamp <= 1.0:
            raise FormatRuleError(f"percdamp: must be a number in [0, 1]; got {self.percdamp!r}")


@dataclass(frozen=True)
class AtomLayer:
    """A quantized linear layer: idx int64 (K,) reorder index (identity without reorder);
    weights :class:`refsim.formats.atom.AtomWeights` in reordered row order (float32 scales);
    W_hat float32 (K, N) fake-quant weights in the ORIGINAL row order."""

    idx: np.ndarray
    weights: fmt.AtomWeights
    W_hat: np.ndarray
    config: AtomConfig

    def __post_init__(self):
        require_fields(self)  # plain native arrays
        require_instance("weights", self.weights, fmt.AtomWeights)
        require_instance("config", self.config, AtomConfig)
        W_hat = require_ndim("W_hat", require_float_array("W_hat", self.W_hat), 2)
        fmt.check_perm(self.idx, W_hat.shape[0])   # a permutation of the K rows
        w, (k, n) = self.weights, W_hat.shape
        if (w.q4.shape[0] + w.q8.shape[0], w.q4.shape[1]) != (k, n) or w.q8.shape[0] != self.config.keeper:
            raise ShapeError(f"weights: must hold K={k} rows ({self.config.keeper} of them the keeper tail) and "
                             f"N={n} columns like W_hat; got q4 {w.q4.shape}, q8 {w.q8.shape}")
        if w.q4.shape[0] and w.q4.shape[0] != _group(self.config, k) * w.scale4.shape[0]:
            raise ShapeError(f"weights.scale4: must have one row per group of {_group(self.config, k)} INT4 rows; "
                             f"got {w.scale4.shape[0]} rows for {w.q4.shape[0]}")

    def forward(self, x: np.ndarray) -> np.ndarray:
        """Fake-quant layer output (pre-bias) for x float32 (M, K): float32 (M, N)."""
        x = require_float_array("x", x).astype(np.float32)
        x_r = fmt.permute(x, self.idx, axis=1)
        if self.config.quantize_activations:
            k = x.shape[1]
            group = _group(self.config, k)
            a = fmt.quantize_activations(x_r, "simulation", group_size=group, keeper=self.config.keeper,
                                         clip=self.config.a_clip)
            x_hat = fmt.dequantize_activations(a)
            if self.config.keeper_precision == "fp16" and self.config.keeper:
                x_hat[:, k - self.config.keeper:] = x_r[:, k - self.config.keeper:].astype(np.float16)
            x_r = x_hat
        W_r = fmt.permute(self.W_hat, self.idx, axis=0)
        return (native_contiguous(x_r, np.float64) @ native_contiguous(W_r, np.float64)).astype(np.float32)


    def forward_kernel(self, x: np.ndarray) -> np.ndarray:
        """Output of Atom's CUDA path for x float (M, K): x rounded to float16, reordered,
        quantized in ``"kernel"`` mode (no clip, roundf, fp16 scales), weight scales cast to
        float16 (pairs stay equal), then :func:`refsim.formats.atom.atom_gemm`. float16 (M, N).
        Needs an INT8 keeper precision and activation quantization enabled."""
        if self.config.keeper_precision != "int8" or not self.config.quantize_activations:
            raise FormatRuleError("forward_kernel: needs keeper_precision 'int8' and quantize_activations; "
                                  f"got {self.config.keeper_precision!r}, {self.config.quantize_activations}")
        x = require_float_array("x", x)
        require_finite("x", x)
        x_r = fmt.permute(x.astype(np.float16), self.idx, axis=1)
        group = _group(self.config, x.shape[1])
        a = fmt.quantize_activations(x_r, "kernel", group_size=group, keeper=self.config.keeper)
        w = self.weights
        wk = fmt.AtomWeights(w.q4, w.scale4.astype(np.float16), w.q8, w.scale8.astype(np.float16))
        return fmt.atom_gemm(a, wk)


def _group(config: AtomConfig, k: int) -> int:
    body = k - config.keeper
    if body <= 0:
        raise ShapeError(f"keeper: must be smaller than K={k}; got {config.keeper}")
    return body if config.group_size is None else config.group_size


# ----------------------------------------------------------------------------------------------
# GPTQ with Atom's quantizer
# ----------------------------------------------------------------------------------------------
def _pair_params(rows: np.ndarray, clip: float) -> np.ndarray:
    """Quantizer_GPTQ.find_params (sym, 4-bit, channel_group=2) on the rows (g, N) of one group
    (refsim orientation: row k = the paper's column k): one scale per pair of output channels over
    its 2*g values; float32 (N,) (each pair's scale repeated). min/max are exact, so the layout the
    values are read in does not matter."""
    n = rows.shape[1]
    zero = np.float32(0)
    xmin = np.minimum(rows.min(axis=0).reshape(n // 2, 2).min(axis=1), zero)   # over the g rows, then the pair
    xmax = np.maximum(rows.max(axis=0).reshape(n // 2, 2).max(axis=1), zero)
    xmax = np.maximum(np.abs(xmin), xmax)
    xmin = np.where(xmin < 0, -xmax, xmin)
    both_zero = (xmin == 0) & (xmax == 0)
    xmin = np.where(both_zero, np.float32(-1), xmin)
    xmax = np.where(both_zero, np.float32(1), xmax)
    scale = ((xmax - xmin).astype(np.float32) * np.float32(clip) / np.float32(15)).astype(np.float32)
    return np.repeat(scale, 2)


def _prepare(W: np.ndarray, H: np.ndarray, percdamp: float) -> tuple[np.ndarray, np.ndarray]:
    """Wt float32 (N, K) with dead inputs zeroed, and U float32 (K, K), the upper Cholesky factor
    of the damped H⁻¹ (dead diagonal entries set to 1 first), as GPTQ.fasterquant prepares them."""
    dead, U = _factor(H, percdamp)
    return _dead_zeroed(W, dead), U


def _factor(H: np.ndarray, percdamp: float) -> tuple[np.ndarray, np.ndarray]:
    """dead bool (K,) (zero diagonal of H) and U float32 (K, K) Fortran order for H float (K, K)."""
    H = H.astype(np.float64)
    dead = np.diag(H) == 0
    H[dead, dead] = 1.0
    return dead, upper_cholesky_of_inverse(H, percdamp).astype(np.float32)


def _dead_zeroed(W: np.ndarray, dead: np.ndarray) -> np.ndarray:
    """Wt float32 (N, K) Fortran order (a new array) = W.T with the dead inputs' weights zeroed."""
    Wt = W.T.astype(np.float32, order="F")
    Wt[:, dead] = 0.0
    return Wt


def _check_gptq_inputs(W, H, keeper, group_size, clip, blocksize):
    W = require_float_array("W", W)
    require_ndim("W", W, 2)
    require_finite("W", W)
    k, n = W.shape
    if n % 2:
        raise ShapeError(f"N: must be even (pairs of output channels share a scale); got {n}")
    H = require_float_array("H", H)
    require_shape("H", H, (k, k))
    require_finite("H", H)
    keeper = require_int("keeper", keeper, minimum=0)
    if keeper >= k:
        raise ShapeError(f"keeper: must be smaller than K={k}; got {keeper}")
    group = k - keeper if group_size is None else require_int("group_size", group_size, minimum=1)
    if (k - keeper) % group:
        raise ShapeError(f"K - keeper: must be a multiple of group_size={group}; got {k - keeper}")
    clip = fmt.check_clip(clip)
    blocksize = require_int("blocksize", blocksize, minimum=1)
    return W, H, k, n, keeper, group, clip, blocksize


def _overflowed(name: str) -> NonFiniteError:
    return NonFiniteError(f"{name}: GPTQ's float32 arithmetic overflowed (a scale, code or update is not finite); "
                          "scale W down or damp H more")


def atom_gptq(W: np.ndarray, H: np.ndarray, *, keeper: int = fmt.KEEPER, group_size: int | None = fmt.GROUP,
              clip: float = fmt.W_CLIP, percdamp: float = 0.01, blocksize: int = 128) -> fmt.AtomWeights:
    """Atom's GPTQ on reordered weights W float (K, N) with the reordered Hessian H (K, K).

    Quantizes rows [0, K - keeper) block by block (the paper's columns are refsim's rows k) with
    the pair-shared symmetric 4-bit quantizer, group parameters recomputed from the globally
    updated weights at each group start (earlier blocks' updates only, as the reference reads its
    global W); the lazy block updates also reach the keeper rows, which are finally INT8-RTN'd per
    output channel (absmax / 127, half-to-even). Returns AtomWeights with float32 scales
    (q4 = code - 8 in [-8, 7]).

    Arithmetic (fixed; the outputs are bit-identical to the first version of this function): inside
    a block, after row k is quantized its error e (float32 (N,)) is subtracted from every later row
    j of the block at once, ``W1[j] -= fl(U[k, j] * e)`` (one rounded product, one rounded
    subtraction, rows in order), so each weight sees the same sequence of roundings as in the
    plain OBS loop; at the end of the block one sgemm ``Err (N, B) @ U[block, later]`` is
    subtracted from all later rows (the lazy batch). The loop works on contiguous rows of W
    (K, N): one row is one quantization step, and the float codes are cast to int8 once.
    Left-looking (on-demand) intra-block updates, as :func:`refsim.quant.gptq.gptq_quantize`
    uses, sum the same products in another order and change bits, so they are not used here.
    """
    W, H, k, n, keeper, group, clip, blocksize = _check_gptq_inputs(W, H, keeper, group_size, clip, blocksize)
    Wt, U = _prepare(W, H, percdamp)
    return _atom_gptq_loop(Wt, U, keeper=keeper, group=group, clip=clip, blocksize=blocksize)


def _atom_gptq_loop(Wt: np.ndarray, U: np.ndarray, *, keeper: int, group: int, clip: float,
                    blocksize: int) -> fmt.AtomWeights:
    """The block loop of :func:`atom_gptq` on prepared inputs: Wt float32 (N, K) Fortran order
    (dead inputs zeroed; updated in place), U float32 (K, K) Fortran order from :func:`_prepare`."""
    n, k = Wt.shape
    Wr = Wt.T                                  # (K, N) C-order view: rows of Wr are the paper's columns
    body = k - keeper
    B = min(blocksize, body)
    qf = np.empty((body, n), np.float32)       # codes (q - 8) as floats, cast once at the end
    scales = []
    scale = None
    W1 = np.empty((B, n), np.float32)          # the current block's rows (local intra-block updates)
    prod = np.empty((B, n), np.float32)        # U[k, j] * e for the later rows j of the block
    t = np.empty(n, np.float32)
    e = np.empty(n, np.float32)
    f8, f0, f15 = np.float32(8), np.float32(0), np.float32(15)
    for i1 in range(0, body, blocksize):
        i2 = min(i1 + blocksize, body)
        bw = i2 - i1
        W1[:bw] = Wr[i1:i2]
        ErrT = np.empty((bw, n), np.float32)
        Ub = np.ascontiguousarray(U[i1:i2, i1:i2])                      # U's rows within the block
        for i in range(bw):
            col = i1 + i
            if col % group == 0:
                scale = _pair_params(Wr[col:min(col + group, body)], clip)
                scales.append(scale)
            w = W1[i]
            q = qf[col]
            np.divide(w, scale, out=t)                                  # q = clip(rint(w / s) + 8, 0, 15)
            np.rint(t, out=t)
            np.add(t, f8, out=t)
            np.maximum(t, f0, out=t)
            np.minimum(t, f15, out=t)
            np.subtract(t, f8, out=q)                                   # q - 8, the signed code
            np.multiply(scale, q, out=t)                                # dequantized value
            np.subtract(w, t, out=e)
            np.divide(e, U[col, col], out=ErrT[i])                      # err = (w - qv) / d
            if i + 1 < bw:
                m = bw - i - 1
                np.multiply(Ub[i, i + 1:, None], ErrT[i], out=prod[:m])
                np.subtract(W1[i + 1:bw], prod[:m], out=W1[i + 1:bw])
        Err1 = np.ascontiguousarray(ErrT.T)                             # (N, B) C order, as the sgemm read it
        Wt[:, i2:] -= Err1 @ U[i1:i2, i2:]
    if not (np.isfinite(qf).all() and all(np.isfinite(sc).all() for sc in scales)):
        raise _overflowed("W, H")
    codes = qf.astype(np.int8)
    if keeper:
        q8, s8 = fmt._quantize_rows_sim(np.ascontiguousarray(Wt[:, body:]), 127, 1.0)   # per output channel
    else:
        q8, s8 = np.zeros((n, 0), np.int8), np.ones(n, np.float32)
    return fmt.AtomWeights(codes, np.stack(scales).astype(np.float32),
                           np.ascontiguousarray(q8.T), s8.astype(np.float32))


def atom_gptq_reference(W: np.ndarray, H: np.ndarray, *, keeper: int = fmt.KEEPER,
                        group_size: int | None = fmt.GROUP, clip: float = fmt.W_CLIP,
                        percdamp: float = 0.01) -> fmt.AtomWeights:
    """Plain-loop twin of :func:`atom_gptq` without the lazy-batch trick: after quantizing
    column k, the error is spread over ALL later columns at once (OBS update), and group
    parameters are taken from the weights as they are at the group start. For group_size equal
    to the block size the two are the same algorithm. They do the same float32 operations, and
    agree bit for bit (tests/quant/test_atom.py), with ``blocksize=1`` or with one block and no
    keeper rows; otherwise the block gemm sums the updates in another order and the two agree
    up to rare code flips."""
    W, H, k, n, keeper, group, clip, _ = _check_gptq_inputs(W, H, keeper, group_size, clip, 128)
    Wt, U = _prepare(W, H, percdamp)
    body = k - keeper
    codes = np.zeros((n, body), np.int8)
    scales = []
    for col in range(body):
        if col % group == 0:
            scale = np.zeros(n, np.float32)
            for p in range(n // 2):
                vals = [float(v) for v in Wt[2 * p:2 * p + 2, col:min(col + group, body)].ravel()]
                hi = max(max(vals), 0.0)
                lo = min(min(vals), 0.0)
                hi = max(abs(lo), hi)
                lo = -hi if lo < 0 else lo
                if lo == 0 and hi == 0:
                    lo, hi = -1.0, 1.0
                s = np.float32(np.float32(np.float32(hi) - np.float32(lo)) * np.float32(clip)) / np.float32(15)
                scale[2 * p] = scale[2 * p + 1] = s
            scales.append(scale)
        for r in range(n):
            w = Wt[r, col]
            if not (np.isfinite(w) and np.isfinite(scale[r])):
                raise _overflowed("W, H")
            q = min(max(np.rint(w / scale[r]) + 8, 0), 15)
            err = np.float32((w - np.float32(scale[r] * np.float32(q - 8))) / U[col, col])
            codes[r, col] = int(q) - 8
            for c in range(col + 1, k):
                Wt[r, c] -= err * U[col, c]
    if keeper:
        q8, s8 = fmt._quantize_rows_sim(np.ascontiguousarray(Wt[:, body:]), 127, 1.0)
    else:
        q8, s8 = np.zeros((n, 0), np.int8), np.ones(n, np.float32)
    return fmt.AtomWeights(np.ascontiguousarray(codes.T), np.stack(scales).astype(np.float32),
                           np.ascontiguousarray(q8.T), s8.astype(np.float32))


# ----------------------------------------------------------------------------------------------
# the pipeline
# ----------------------------------------------------------------------------------------------
class AtomCalibration:
    """The part of :func:`quantize_layer` that depends on the calibration inputs alone, done once
    per layer and shared by every configuration quantized with it (build with :func:`calibrate`).

    X float32 (T, K) the calibration inputs; ``index(reorder)`` int64 (K,) the reorder index
    (``reorder_index(hessian_statistic(X))``, outliers last; the identity without reorder);
    ``hessian(reorder)`` float64 (K, K) of the reordered inputs; ``factor(reorder, percdamp)`` the
    dead-input mask bool (K,) and the float32 (K, K) upper Cholesky factor of the damped H⁻¹.
    Each is computed on first use and kept; the values are exactly what :func:`quantize_layer`
    computes from an array (same calls on the same inputs). Do not mutate the returned arrays."""

    def __init__(self, X_calib: np.ndarray):
        X_calib = require_float_array("X_calib", X_calib)
        require_ndim("X_calib", X_calib, 2)
        require_finite("X_calib", X_calib)
        self.X = X_calib
        self.k = X_calib.shape[1]
        self._cache: dict = {}

    def _get(self, key, make):
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]

    def index(self, reorder: bool) -> np.ndarray:
        if not require_bool("reorder", reorder):
            return self._get("identity", lambda: np.arange(self.k, dtype=np.int64))
        return self._get("idx", lambda: fmt.reorder_index(fmt.hessian_statistic(self.X)))

    def hessian(self, reorder: bool) -> np.ndarray:
        reorder = require_bool("reorder", reorder)
        return self._get(("H", reorder),
                         lambda: hessian(fmt.permute(self.X.astype(np.float32), self.index(reorder), axis=1)))

    def factor(self, reorder: bool, percdamp: float) -> tuple[np.ndarray, np.ndarray]:
        reorder = require_bool("reorder", reorder)
        return self._get(("U", reorder, float(percdamp)), lambda: _factor(self.hessian(reorder), percdamp))


def calibrate(X_calib: np.ndarray) -> AtomCalibration:
    """Wrap one layer's calibration inputs X_calib float (T, K) (finite) for several
    :func:`quantize_layer` calls: the reorder index, Hessian and GPTQ factor are computed once."""
    return AtomCalibration(X_calib)


def quantize_layer(W: np.ndarray, X_calib: np.ndarray | AtomCalibration,
                   config: AtomConfig = AtomConfig()) -> AtomLayer:
    """Run Atom's pipeline on one linear layer.

    W float (K, N) (refsim orientation; transpose a PyTorch (N, K) weight first); X_calib float
    (T, K) calibration inputs of the layer (one sample), or an :class:`AtomCalibration` of them
    (:func:`calibrate`) to share the per-layer work between configurations (same result).
    Returns :class:`AtomLayer`."""
    W = require_float_array("W", W)
    require_ndim("W", W, 2)
    require_finite("W", W)
    cal = X_calib if isinstance(X_calib, AtomCalibration) else AtomCalibration(X_calib)
    k, n = W.shape
    if cal.k != k:
        raise ShapeError(f"X_calib: must have K={k} columns; got {cal.k}")
    require_instance("config", config, AtomConfig)
    require_choice("weight_method", config.weight_method, WEIGHT_METHODS)
    require_choice("keeper_precision", config.keeper_precision, KEEPER_PRECISIONS)
    if config.keeper_precision == "fp16" and config.weight_method == "gptq":
        raise FormatRuleError("keeper_precision: 'fp16' is modelled for weight_method 'rtn' only; got 'gptq'")
    group = _group(config, k)
    idx = cal.index(config.reorder)
    W_r = fmt.permute(W.astype(np.float32), idx, axis=0)
    if config.weight_method == "rtn":
        wq = fmt.quantize_weights(W_r, "simulation", group_size=group, keeper=config.keeper, clip=config.w_clip)
    else:
        H_r = cal.hessian(config.reorder)
        W_r, H_r, k, n, keeper, group, clip, blocksize = _check_gptq_inputs(W_r, H_r, config.keeper, group,
                                                                              config.w_clip, 128)
        dead, U = cal.factor(config.reorder, config.percdamp)
        wq = _atom_gptq_loop(_dead_zeroed(W_r, dead), U, keeper=keeper, group=group, clip=config.w_clip,
                             blocksize=blocksize)
    W_hat_r = fmt.dequantize_weights(wq, np.float32)
    if config.keeper_precision == "fp16" and config.keeper:
        W_hat_r[k - config.keeper:] = W_r[k - config.keeper:].astype(np.float16)
    W_hat = fmt.unpermute(W_hat_r, idx, axis=0)
    return AtomLayer(idx, wq, W_hat.astype(np.float32), config)


def layer_output_error(layer: AtomLayer, W: np.ndarray, X: np.ndarray) -> float:
    """Relative layer-output error ``||X W - layer(X)||_F / ||X W||_F`` (float64); layer an
    :class:`AtomLayer` for W float (K, N), X float (T, K) finite."""
    require_instance("layer", layer, AtomLayer)
    W = require_float_array("W", W)
    require_shape("W", W, layer.W_hat.shape)
    X = require_float_array("X", X)
    require_ndim("X", X, 2)
    if X.shape[1] != W.shape[0]:
        raise ShapeError(f"X: must have K={W.shape[0]} columns; got {X.shape[1]}")
    require_finite("W", W)
    require_finite("X", X)
    ref = native_contiguous(X, np.float64) @ native_contiguous(W, np.float64)  # BLAS sees one layout
    return float(np.linalg.norm(ref - native_contiguous(layer.forward(X), np.float64)) / np.linalg.norm(ref))
