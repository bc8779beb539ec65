"""The 2/4/16-bit quantizer: sensitivity-chosen 4-bit groups, second-order scales, FP16 outliers.

Li et al., "Fast and Efficient 2-bit LLM Inference on GPU: 2/4/16-bit in a Weight Matrix with
Asynchronous Dequantization" (ICCAD'24, arXiv 2311.16442); no official code. It fills the format of
:mod:`refsim.formats.mixed_2_4_16`, whose spec block holds every storage rule and the DECISIONs the
two share (first- and second-order scales, scale clipping, outlier storage).

Spec
----
=================  ==================================================================================
input              W float32/float64 (K, N), K % 16 == 0, N % 16 == 0, K <= 65536; H float (K, K) the
                   Hessian of the layer's inputs, or diag(H_damped^-1) float (K,) (:func:`quantize_hinv`)
H^-1               inverse of H + percdamp * mean(diag H) * I (percdamp 0.01, GPTQ's dampening);
                   inputs with diag(H) = 0 get H[k, k] = 1 first; a Hessian that is not positive
                   definite after that raises FormatRuleError naming percdamp. Only its diagonal is read.
precision          per group of 16 rows: 4-bit for the floor(alpha*G + 1/2) groups of largest sensitivity
                   S_i = sum_{m<16} sum_n W[16i+m, n]^2 / [H^-1]_{16i+m,16i+m}^2  (eq. 9; alpha =
                   share of 4-bit groups, default 0.25; the paper's eq. 10 calls the 2-bit share
                   alpha); ties -> lower group index first; the other groups are 2-bit
outliers           in 2-bit groups only: the floor(ratio * K * N) elements of largest w^2 / [H^-1]_kk^2
                   (eq. 9 per element, DECISION), ratio in [0, MAX_OUTLIER_RATIO = 0.005], default 0.002
codes              1st-order asymmetric codes against the dequantized 2nd-order scale s_hat; slot-1/2
                   scale codes of each 2-bit unit lose their LSB (formats spec, "scale clipping");
                   rounding half to even everywhere
output             :class:`refsim.formats.mixed_2_4_16.Mixed2416`, ready for ``pack``
source             paper eqs. 2-6, 9, 10 and section 4.3
=================  ==================================================================================

The selection in one picture (G = 8 groups, alpha = 1/4 -> floor(8/4 + 1/2) = 2 groups are 4-bit)::

    group i      0     1     2     3     4     5     6     7
    S_i          0.2   0.9   4.1   0.3   0.3   2.7   0.1   0.5
    4-bit?       .     .     X     .     .     X     .     .       (the two largest S_i)
    outliers     picked among the 2-bit groups' elements only, by w^2 / [H^-1]_kk^2
"""

from __future__ import annotations

import numpy as np
import scipy.linalg

from refsim._validate import native_contiguous, require_bool, require_finite, require_float_array, require_ndim, require_shape
from refsim.errors import FormatRuleError, NonFiniteError, ShapeError
from refsim.formats.mixed_2_4_16 import G1, G2, Mixed2416, check_fraction, check_kn, _clipped_slots, csr_from_coo

__all__ = ["MAX_OUTLIER_RATIO", "DEFAULT_OUTLIER_RATIO", "inverse_hessian_diag", "group_sensitivity",
           "select_4bit_groups", "quantize", "quantize_hinv", "check_alpha_ratio"]

MAX_OUTLIER_RATIO = 0.005
DEFAULT_OUTLIER_RATIO = 0.002


def inverse_hessian_diag(H: np.ndarray, percdamp: float = 0.01) -> np.ndarray:
    """diag(H_damped^-1), float64 (K,). H float (K, K) symmetric; dead inputs (diag 0) get 1;
    damping adds ``percdamp * mean(diag H)`` to the diagonal (GPTQ). Raises FormatRuleError
    when the damped H is not positive definite."""
    H = require_float_array("H", H)
    require_ndim("H", H, 2)
    if H.shape[0] != H.shape[1]:
        raise ShapeError(f"H: must be square (K, K); got {H.shape}")
    require_finite("H", H)
    percdamp = check_fraction("percdamp", percdamp, 1.0)
    H = native_contiguous(H, np.float64).copy()  # LAPACK's input: canonical, and ours to modify
    dead = np.diag(H) == 0
    H[dead, dead] = 1.0
    damp = float(percdamp) * float(np.mean(np.diag(H)))
    with np.errstate(over="ignore"):
        H[np.diag_indices_from(H)] += damp
    if not np.isfinite(damp) or not np.isfinite(np.diag(H)).all():
        raise NonFiniteError(f"H: the damped diagonal (+ percdamp x mean(diag H) = {damp:.3g}) overflows float64")
    try:
        L = scipy.linalg.cholesky(H, lower=True)
    except np.linalg.LinAlgError as err:
        raise FormatRuleError(
            f"H: must be positive definite after dampening by percdamp={percdamp} x mean(diag H) = "
            f"{damp:.3g}; Cholesky failed ({err})") from err
    Linv = scipy.linalg.solve_triangular(L, np.eye(H.shape[0]), lower=True)
    return np.einsum("ik,ik->k", Linv, Linv)  # diag(L^-T L^-1)


def group_sensitivity(W: np.ndarray, hinv_diag: np.ndarray) -> np.ndarray:
    """Eq. 9: S_i = sum over the 16 rows of group i and all N columns of W^2 / [H^-1]_kk^2.
    W float (K, N), hinv_diag float (K,); returns float64 (K // 16,)."""
    W = require_float_array("W", W)
    require_ndim("W", W, 2)
    k, n = W.shape
    if k == 0 or k % G1:
        raise ShapeError(f"W: K (rows) must be a positive multiple of the group size {G1}; got {k}")
    hinv_diag = require_float_array("hinv_diag", hinv_diag)
    require_shape("hinv_diag", hinv_diag, (k,))
    require_finite("W", W)
    require_finite("hinv_diag", hinv_diag)
    if np.any(hinv_diag == 0):
        raise FormatRuleError("hinv_diag: diag(H^-1) entries must be non-zero (they divide); got a 0")
    score = W.astype(np.float64) ** 2 / hinv_diag.astype(np.float64)[:, None] ** 2
    return score.reshape(k // G1, G1 * n).sum(axis=1)  # (G, 16 * N) -> (G,)


def select_4bit_groups(S: np.ndarray, alpha: float) -> np.ndarray:
    """Bool (G,): the floor(alpha * G + 1/2) groups with the largest S are 4-bit (ties: lower index)."""
    S = require_float_array("S", S)
    require_ndim("S", S, 1)
    require_finite("S", S)
    alpha = check_fraction("alpha", alpha, 1.0)
    g = S.size
    n4 = int(np.floor(alpha * g + 0.5))
    order = np.argsort(-S, kind="stable")
    four = np.zeros(g, bool)
    four[order[:n4]] = True
    return four


def check_alpha_ratio(alpha, outlier_ratio) -> tuple[float, float]:
    """The quantizer's two shares: ``alpha`` (the share of 4-bit groups) in [0, 1] and
    ``outlier_ratio`` in [0, MAX_OUTLIER_RATIO], real numbers (Python or NumPy, not bool), returned
    as Python floats; else a FormatRuleError naming the argument (formats.mixed_2_4_16.check_fraction)."""
    return check_fraction("alpha", alpha, 1.0), check_fraction("outlier_ratio", outlier_ratio, MAX_OUTLIER_RATIO)


def quantize(W: np.ndarray, H: np.ndarray, *, alpha: float = 0.25,
             outlier_ratio: float = DEFAULT_OUTLIER_RATIO, percdamp: float = 0.01,
             clip_scales: bool = True) -> Mixed2416:
    """Quantize W float32/float64 (K, N) to the 2/4/16-bit format given the Hessian H (K, K) of
    its inputs (spec block). ``clip_scales=False`` skips the LSB clipping of slot-1/2 scale codes
    (for ablations only: such a result cannot be packed). Inputs are not modified."""
    W = require_float_array("W", W)
    require_ndim("W", W, 2)
    require_finite("W", W)
    k, n = W.shape
    check_kn(k, n)
    require_shape("H", require_float_array("H", H), (k, k))
    check_alpha_ratio(alpha, outlier_ratio)
    return _quantize(W.astype(np.float32), inverse_hessian_diag(H, percdamp), float(alpha),
                     float(outlier_ratio), require_bool("clip_scales", clip_scales))


def quantize_hinv(W: np.ndarray, hinv_diag: np.ndarray, *, alpha: float = 0.25,
                  outlier_ratio: float = DEFAULT_OUTLIER_RATIO, clip_scales: bool = True) -> Mixed2416:
    """:func:`quantize` given ``hinv_diag`` = diag(H_damped^-1) float (K,) instead of H: the
    quantizer reads H only through that diagonal (Eq. 9 and the outlier score), so callers that
    quantize one layer several ways, or that know the diagonal without forming the (K, K) H (a
    layer-sized test case), pass it once. ``hinv_diag`` must be finite and > 0.
    ``quantize(W, H) == quantize_hinv(W, inverse_hessian_diag(H))``. Inputs are not modified."""
    W = require_float_array("W", W)
    require_ndim("W", W, 2)
    require_finite("W", W)
    k, n = W.shape
    check_kn(k, n)
    hd = require_shape("hinv_diag", require_float_array("hinv_diag", hinv_diag), (k,))
    require_finite("hinv_diag", hd)
    if not np.all(hd > 0):
        raise FormatRuleError(f"hinv_diag: must be > 0 (the diagonal of a positive definite inverse); got "
                              f"min {float(np.min(hd))!r}")
    check_alpha_ratio(alpha, outlier_ratio)
    return _quantize(W.astype(np.float32), hd.astype(np.float64), float(alpha), float(outlier_ratio),
                     require_bool("clip_scales", clip_scales))


def _largest(score: np.ndarray, count: int) -> np.ndarray:
    """Flat indices of the ``count`` largest entries of ``score`` (ties: lower flat index first),
    as a set: the same set as ``argsort(-score, kind="stable")[:count]`` in O(size) (argpartition
    for the threshold, then the threshold's ties in index order)."""
    neg = -score.ravel()
    if count == 0:
        return np.zeros(0, np.int64)
    kth = np.partition(neg, count - 1)[count - 1]                        # count-th largest score
    above = np.flatnonzero(neg < kth)
    ties = np.flatnonzero(neg == kth)[:count - above.size]
    return np.concatenate([above, ties])


def _quantize(Wf: np.ndarray, hd: np.ndarray, alpha: float, outlier_ratio: float, clip_scales: bool) -> Mixed2416:
    """:func:`quantize` on checked inputs: Wf float32 (K, N), hd = diag(H^-1) float64 (K,)
    (callers that quantize one layer several ways compute hd once)."""
    k, n = Wf.shape
    g = k // G1
    score = (Wf.astype(np.float64) ** 2) / hd[:, None] ** 2             # (K, N), Eq. 9's terms
    four = select_4bit_groups(score.reshape(g, G1 * n).sum(axis=1), alpha)   # = group_sensitivity
    four_rows = np.repeat(four, G1)                                      # (K,)

    # outliers: largest w^2 / [H^-1]_kk^2 among 2-bit-group elements
    n_out = int(np.floor(outlier_ratio * k * n))
    score[four_rows, :] = -np.inf
    n_out = min(n_out, int((~four_rows).sum()) * n)
    is_out = np.zeros((k, n), bool)
    is_out.flat[_largest(score, n_out)] = True

    maxq = np.where(four, 15, 3).astype(np.float32)                     # (G,)
    Wg = Wf.reshape(g, G1, n)                                           # (G, 16, N)
    inl = np.where(is_out.reshape(g, G1, n), np.float32(0), Wg)         # outliers excluded (0 is in range anyway)
    xmin = np.minimum(inl.min(axis=1), 0).astype(np.float32)            # (G, N)
    xmax = np.maximum(inl.max(axis=1), 0).astype(np.float32)
    s = ((xmax - xmin) / maxq[:, None]).astype(np.float32)              # (G, N) raw 1st-order scales

    # second order, blocks of 16 columns
    sb = s.reshape(g, n // G2, G2)                                      # (G, N/16, 16)
    s2 = (sb.max(axis=2) / np.float32(15)).astype(np.float16)           # (G, N/16)
    s2f = np.repeat(s2.astype(np.float32), G2, axis=1)                  # (G, N)
    smin = np.repeat(np.minimum(sb.min(axis=2), 0), G2, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        z2 = np.where(s2f > 0, np.clip(np.rint(-smin / s2f), 0, 15), 0).astype(np.float32)
        ratio = np.where(s2f > 0, s / s2f, 0).astype(np.float32)
    clipped = _clipped_slots(four)[:, None] & clip_scales
    code = np.where(clipped, 2 * np.clip(np.rint((ratio + z2) / 2), 0, 7), np.clip(np.rint(ratio) + z2, 0, 15))
    collapsed = (s > 0) & (s2f > 0) & (code <= z2)                       # s_hat would be <= 0
    code = np.where(collapsed, z2 + np.where(clipped, 2, 1), code)
    s_hat = ((code - z2) * s2f).astype(np.float32).astype(np.float16).astype(np.float32)   # (G, N)

    sh = s_hat[:, None, :]                                              # (G, 1, N) over each group's 16 rows
    mq = maxq[:, None, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        zero = np.where(s_hat > 0, np.clip(np.rint(-xmin / s_hat), 0, maxq[:, None]), 0)   # (G, N)
        zr = zero[:, None, :]
        q = np.where(sh > 0, np.clip(np.rint(Wg / sh) + zr, 0, mq), 0)     # (G, 16, N)
    q = np.where(is_out.reshape(g, G1, n), zr, q).reshape(k, n)

    rows, cols = np.nonzero(is_out.T)                                   # row-major over (N, K): sorted
    row_ptr, col, val = csr_from_coo(rows, cols, Wf.T[rows, cols].astype(np.float16), n)
    return Mixed2416(q.astype(np.uint8), zero.astype(np.uint8), code.astype(np.uint8), s2, z2[:, ::G2].astype(np.uint8),
                     four, row_ptr, col, val)
