"""Atom W4A4: reordered INT4 groups with an INT8 outlier tail (the format and its quantizers).

The fused group GEMM and the kernel's activation-scale buffer live in
:mod:`refsim.formats.atom_gemm`, the INT4 KV cache in :mod:`refsim.formats.atom_kv` (both names
stay importable from here).

Spec block
----------
=================  ==================================================================================
element bits       body: INT4 symmetric, signed values in [-8, 7]; tail ("keeper"): INT8 symmetric,
                   signed values in [-128, 127]. Codes are stored SIGNED (int8 arrays), as Atom's
                   kernels do (4-bit two's complement bitfields), not as offset codes.
container          packed INT4: uint8, two elements per byte (``pack_int4``); INT8: int8
bit order          element 2j in the LOW nibble, element 2j+1 in the HIGH nibble of byte j
element order      activations (M, K) row-major along K; weights stored kernel-side as (N, K)
                   ("K x N column-major"); refsim's arrays keep the house shape (K, N)
tile shape         groups of 128 along K (``GROUP``); the last 128 reordered channels (``KEEPER``)
                   form the INT8 tail; the kernel tiles 128x128x128 (not modelled here)
scales             activations: one per (token, group) + one per token for the tail;
                   weights: one per (group, output PAIR) -- columns 2p and 2p+1 share a scale
                   (Atom's ``channel_group=2``; the kernel is only correct with equal pairs) --
                   + one per output column for the tail (simulation mode; kernel mode: one per
                   column pair, equal in both columns, as the kernel reads them as half2 pairs)
invariants         K % 128 == 0, K >= 128, N even; reorder index is a permutation of range(K)
                   sorting the calibration statistic ascending (outliers LAST);
                   x_r[:, e] = x[:, idx[e]] and W_r[e, :] = W[idx[e], :] so x_r @ W_r == x @ W
source             efeslab/Atom @ 7e3618b1a7a7c86e1c93cc909b1510c046d76ac6 (2024-07-02):
                   model/quant.py (quantize_tensor, quantize_tensor_channel_group,
                   quantize_activation_wrapper, quantize_attn_{k,v}_wrapper), model/qLinearLayer.py
                   (quant, reorder), model/outlier.py (hessian statistic),
                   kernels/include/GEMM/Dense_layer_gemm_i4_o16.cuh (group GEMM arithmetic),
                   kernels/include/Reorder/Reorder.cuh (kernel-side activation quantization,
                   scale_index, SCALE_SIZE_A)
=================  ==================================================================================

Layout of one reordered activation row (K = 512 shown)::

    reordered channel e:  0 ........ 127 | 128 ...... 255 | 256 ...... 383 | 384 ...... 511
                          INT4 group 0   | INT4 group 1   | INT4 group 2   | INT8 keeper (tail)
                          scale s4[m,0]  | scale s4[m,1]  | scale s4[m,2]  | scale s8[m]
                          (outliers: the 128 channels with the largest statistic end up here)

    packed INT4 byte j of the row:   bit 7..4 = element 2j+1 | bit 3..0 = element 2j
    e.g. elements (-3, 5) -> 0b0101_1101 = 0x5D   (-3 = 0b1101 in 4-bit two's complement)

Two quantization modes (``MODES``), both documented by the official sources:

* ``"simulation"`` -- Atom's accuracy simulation (model/quant.py), which produced the paper's
  numbers: ``scale = clip * absmax / 7`` (clip 0.85 weights, 0.9 activations; INT8 tail unclipped,
  ``absmax / 127``), ``absmax`` floored at 1e-5, ``q = clamp(round_half_even(x / scale))``.
  Every elementwise op is computed in float32 and rounded to the input dtype (float16 inputs give
  fp16-rounded intermediates exactly as torch does; float32 inputs stay float32). Scales are
  returned in the input dtype.
* ``"kernel"`` -- Atom's CUDA quantize kernels: no clip, ``scale_f32 = absmax / 7`` (or /127),
  stored as ``half(scale_f32)``, ``q = clamp(roundf(x * (1 / scale_f32)))`` with ``roundf`` rounding
  half AWAY from zero; an all-zero group gives q = 0 (the kernel's inf*0 = NaN -> int 0).
  Scales are float16. Weights use the same arithmetic (the kernels take them prepared offline).

Fused group GEMM (``atom_gemm``/``atom_gemm_reference``), per output (m, n)::

    acc = 0.0f
    for g in groups:   p = sum_k qa[m,k] qb[k,n]                (exact int32)
                       acc = fmaf(float(p), float(half(sa[m,g] * sb[g,n])), acc)
    p8  = sum_k qa8[m,k] qb8[k,n];  acc = fmaf(float(p8), float(half(sa8[m] * sb8[n])), acc)
    D[m,n] = half(acc)             (round to nearest even; beyond 65504 -> +-inf like __float2half)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refsim._validate import (
    native_contiguous,
    require_array,
    require_choice,
    require_dtype,
    require_dtype_arg,
    require_fields,
    require_finite,
    require_float_array,
    require_instance,
    require_int,
    require_integer_array,
    require_ndim,
    require_real,
    require_shape,
    set_fields,
)
from refsim.arith.integral import round_half_away, round_half_even
from refsim.errors import FormatRuleError, ShapeError

__all__ = [
    "GROUP", "KEEPER", "MODES", "W_CLIP", "A_CLIP",
    "AtomActivations", "AtomWeights",
    "hessian_statistic", "reorder_index", "permute", "unpermute",
    "quantize_activations", "quantize_activations_reference", "dequantize_activations",
    "quantize_weights", "quantize_weights_reference", "dequantize_weights",
    "pack_int4", "pack_int4_reference", "unpack_int4",
    "check_perm", "check_split", "check_clip",
]

#: names that live in their own modules (one concept each): the KV cache and the fused GEMM with the
#: kernel's scale buffer; ``refsim.formats.atom.atom_gemm`` etc. keep working (module __getattr__)
_MOVED = {name: "refsim.formats.atom_kv" for name in ("AtomKV", "quantize_kv", "dequantize_kv", "pack_kv",
                                                      "unpack_kv")}
_MOVED.update({name: "refsim.formats.atom_gemm" for name in (
    "scale_leading_dim", "scale_positions", "activation_scale_layout", "activation_scale_layout_reference",
    "atom_gemm", "atom_gemm_reference", "check_gemm")})


def __getattr__(name: str):
    """The moved names, imported on first use (the new modules import this one)."""
    module = _MOVED.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib
    return getattr(importlib.import_module(module), name)

GROUP = 128
KEEPER = 128
MODES = ("simulation", "kernel")
W_CLIP = 0.85
A_CLIP = 0.9
ABSMAX_FLOOR = 1e-5


# ----------------------------------------------------------------------------------------------
# reorder
# ----------------------------------------------------------------------------------------------
def hessian_statistic(x: np.ndarray, n_samples: int = 1) -> np.ndarray:
    """Atom's ``hessian`` channel statistic: ``stat[k] = (2 / n_samples) * sum_t x[t, k]**2``,
    the diagonal of the GPTQ Hessian. x (T, K) float; returns float32 (K,)."""
    x = require_float_array("x", x)
    require_ndim("x", x, 2)
    require_finite("x", x)
    n_samples = require_int("n_samples", n_samples, minimum=1)
    x32 = native_contiguous(x, np.float32)  # einsum's summation order follows memory order
    return (np.float32(2.0 / n_samples) * np.einsum("tk,tk->k", x32, x32)).astype(np.float32)


def reorder_index(stat: np.ndarray) -> np.ndarray:
    """The reorder index: ``argsort(stat)`` ascending (stable), so the channels with the largest
    statistic (the outliers) come LAST. stat (K,) float; returns int64 (K,), a permutation."""
    stat = require_float_array("stat", stat)
    require_ndim("stat", stat, 1)
    require_finite("stat", stat)
    return np.argsort(stat, kind="stable").astype(np.int64)


def check_perm(idx: np.ndarray, k: int) -> np.ndarray:
    """A reorder index of ``k`` channels: an integer ndarray of shape ``(k,)`` holding a permutation
    of ``range(k)``; returns it, else a DtypeError, ShapeError or FormatRuleError naming the rule."""
    k = require_int("k", k, minimum=0)
    idx = require_integer_array("idx", idx)
    require_shape("idx", idx, (k,))
    if not np.array_equal(np.sort(idx), np.arange(k)):
        raise FormatRuleError(f"idx: must be a permutation of range({k}); got {idx[:8].tolist()}...")
    return idx


def _check_permute_args(a, idx, axis) -> tuple[np.ndarray, np.ndarray, int]:
    """Shared by :func:`permute` and :func:`unpermute`: a an ndarray, axis an existing axis, idx a
    permutation of that axis."""
    a = require_array("a", a)
    axis = require_int("axis", axis)
    if not -a.ndim <= axis < a.ndim:
        raise ShapeError(f"axis: must name an axis of a (ndim {a.ndim}); got {axis}")
    return a, check_perm(idx, a.shape[axis]), axis


def permute(a: np.ndarray, idx: np.ndarray, axis: int) -> np.ndarray:
    """Gather along ``axis``: ``out.take(e, axis) = a.take(idx[e], axis)``. Use axis=1 for
    activations (M, K) and axis=0 for weights (K, N); returns a new array."""
    a, idx, axis = _check_permute_args(a, idx, axis)
    return np.take(a, idx, axis=axis)


def unpermute(a: np.ndarray, idx: np.ndarray, axis: int) -> np.ndarray:
    """Inverse of :func:`permute`: scatter back so ``unpermute(permute(a, idx, ax), idx, ax) == a``."""
    a, idx, axis = _check_permute_args(a, idx, axis)
    inv = np.empty_like(idx)
    inv[idx] = np.arange(idx.size)
    return np.take(a, inv, axis=axis)


# ----------------------------------------------------------------------------------------------
# per-op dtype semantics (rounding to integers: refsim.arith.integral)
# ----------------------------------------------------------------------------------------------
def _op(value: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Round an fp32 intermediate to the working dtype (torch's per-op semantics)."""
    return np.asarray(value, dtype=np.float32).astype(dtype)


def _quantize_rows_sim(x: np.ndarray, qmax: int, clip: float) -> tuple[np.ndarray, np.ndarray]:
    """Atom ``quantize_tensor`` (sym, int, group_size=0) on rows of x (R, C): returns
    (q int8 (R, C), scale (R,) in x.dtype). One row = one quantization group."""
    dt = x.dtype
    f32 = np.float32
    absmax = np.abs(x).max(axis=1)
    absmax = np.maximum(absmax, _op(f32(ABSMAX_FLOOR), dt))
    if clip < 1.0:
        absmax = _op(absmax.astype(f32) * f32(clip), dt)
    scale = _op(absmax.astype(f32) / f32(qmax), dt)
    ratio = _op(x.astype(f32) / scale.astype(f32)[:, None], dt)
    q = np.clip(round_half_even(ratio), -qmax - 1, qmax)
    return q.astype(np.int8), scale


def _quantize_rows_kernel(x: np.ndarray, qmax: int) -> tuple[np.ndarray, np.ndarray]:
    """Atom CUDA quantization on rows of x (R, C): fp32 absmax/qmax, multiply by its fp32
    reciprocal, roundf (half away), clamp; the stored scale is half(scale_f32)."""
    f32 = np.float32
    absmax = np.abs(x.astype(f32)).max(axis=1)
    scale = (absmax / f32(qmax)).astype(f32)
    with np.errstate(divide="ignore", invalid="ignore"):
        recip = (f32(1.0) / scale).astype(f32)
        prod = (x.astype(f32) * recip[:, None]).astype(f32)
    prod = np.where(np.isfinite(prod), prod, f32(0.0))  # all-zero group: NaN -> int 0 in CUDA
    q = np.clip(round_half_away(prod), -qmax - 1, qmax)
    return q.astype(np.int8), scale.astype(np.float16)


def _quantize_rows(x, qmax, clip, mode):
    if mode == "simulation":
        return _quantize_rows_sim(x, qmax, clip)
    return _quantize_rows_kernel(x, qmax)


# ----------------------------------------------------------------------------------------------
# activations
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class AtomActivations:
    """Quantized activations of one reordered (M, K) input.

    q4 int8 (M, K - keeper) values in [-8, 7]; scale4 (M, (K - keeper) // group) -- float16 in
    kernel mode, the input dtype in simulation mode; q8 int8 (M, keeper) in [-128, 127];
    scale8 (M,) same dtype as scale4."""

    q4: np.ndarray
    scale4: np.ndarray
    q8: np.ndarray
    scale8: np.ndarray

    def __post_init__(self):
        require_fields(self)
        _check_atom_operand(self, rows_axis=1)


def _check_atom_operand(obj, rows_axis: int) -> None:
    """Shared cross-field rules of :class:`AtomActivations` (rows_axis 1: values run along K in
    columns) and :class:`AtomWeights` (rows_axis 0): int8 codes in their ranges, a whole number of
    groups, scales finite, of one float dtype and shaped to match."""
    what = type(obj).__name__
    q4 = require_dtype("q4", obj.q4, np.int8)
    require_ndim("q4", q4, 2)
    q8 = require_dtype("q8", obj.q8, np.int8)
    require_ndim("q8", q8, 2)
    scale4 = require_float_array("scale4", obj.scale4)
    require_ndim("scale4", scale4, 2)
    scale8 = require_float_array("scale8", obj.scale8)
    require_ndim("scale8", scale8, 1)
    if scale8.dtype != scale4.dtype:
        raise FormatRuleError(f"scale8: must have the dtype of scale4 ({scale4.dtype}); got {scale8.dtype}")
    other = 1 - rows_axis                            # the M axis of activations, the N axis of weights
    size = q4.shape[other]
    body, groups = q4.shape[rows_axis], scale4.shape[rows_axis]
    if scale4.shape[other] != size or q8.shape[other] != size or scale8.shape != (size,):
        raise ShapeError(f"{what}: q4 {q4.shape}, scale4 {scale4.shape}, q8 {q8.shape} and scale8 "
                         f"{scale8.shape} must agree on the {'M' if rows_axis else 'N'} axis ({size})")
    if (groups == 0) != (body == 0) or (groups and body % groups):
        raise ShapeError(f"scale4: must have one entry per group of the {body} quantized values "
                         f"(a whole number of groups); got {groups} groups")
    if q4.size and (int(q4.min()) < -8 or int(q4.max()) > 7):
        raise FormatRuleError(f"q4: INT4 codes must lie in [-8, 7]; got range [{int(q4.min())}, {int(q4.max())}]")
    require_finite("scale4", scale4)
    require_finite("scale8", scale8)
    set_fields(obj, q4=q4, q8=q8, scale4=scale4, scale8=scale8)


def check_split(k: int, group: int, keeper: int) -> tuple[int, int]:
    """Atom's split of ``k`` channels into an INT4 body of groups and an INT8 tail of ``keeper``
    outlier channels: ``group`` an int >= 1, ``keeper`` an int in ``[0, k]``, ``k - keeper`` a
    multiple of ``group``. Returns ``(group, keeper)`` as Python ints, else a FormatRuleError or
    ShapeError naming the value."""
    k = require_int("K", k, minimum=0)
    group = require_int("group_size", group, minimum=1)
    keeper = require_int("keeper", keeper, minimum=0)
    if keeper > k:
        raise ShapeError(f"keeper: must be at most K={k}; got {keeper}")
    if (k - keeper) % group != 0:
        raise ShapeError(f"K - keeper: must be a multiple of group_size={group}; got {k - keeper}")
    return group, keeper


def check_clip(clip, name: str = "clip") -> float:
    """A clip ratio (Atom's ``W_CLIP``, ``A_CLIP``, the KV cache's): a real number (Python or NumPy,
    not bool) in ``(0, 1]``, returned as a Python float; else a FormatRuleError naming ``name``."""
    clip = require_real(name, clip)
    if not 0.0 < clip <= 1.0:
        raise FormatRuleError(f"{name}: clip ratio must lie in (0, 1]; got {clip!r}")
    return clip


def _check_input(name: str, x: np.ndarray) -> np.ndarray:
    x = require_dtype(name, x, np.float16, np.float32)
    require_ndim(name, x, 2)
    require_finite(name, x)
    return x


def quantize_activations(x: np.ndarray, mode: str = "simulation", *, group_size: int = GROUP,
                         keeper: int = KEEPER, clip: float = A_CLIP) -> AtomActivations:
    """Dynamic per-token Atom quantization of an already-reordered input.

    x (M, K) float16/float32, channels in reordered order (outliers last). The first K - keeper
    channels get INT4 symmetric per (token, group of ``group_size``); the last ``keeper`` get INT8
    symmetric per token, unclipped. ``clip`` applies to the INT4 body in simulation mode only
    (the kernels have none)."""
    x = _check_input("x", x)
    require_choice("mode", mode, MODES)
    clip = check_clip(clip)
    m, k = x.shape
    group, keeper = check_split(k, group_size, keeper)
    body = x[:, :k - keeper]
    groups = body.reshape(m * ((k - keeper) // group), group)  # (M * G, group) row-major
    q4, s4 = _quantize_rows(groups, 7, clip, mode)
    if keeper:
        q8, s8 = _quantize_rows(x[:, k - keeper:], 127, 1.0, mode)
    else:
        q8, s8 = np.zeros((m, 0), np.int8), np.ones(m, dtype=s4.dtype)
    return AtomActivations(q4.reshape(m, k - keeper), s4.reshape(m, (k - keeper) // group), q8, s8)


def quantize_activations_reference(x: np.ndarray, mode: str = "simulation", *, group_size: int = GROUP,
                                   keeper: int = KEEPER, clip: float = A_CLIP) -> AtomActivations:
    """Plain-loop twin of :func:`quantize_activations` (one scalar at a time)."""
    x = _check_input("x", x)
    require_choice("mode", mode, MODES)
    clip = check_clip(clip)
    m, k = x.shape
    group, keeper = check_split(k, group_size, keeper)
    n_groups = (k - keeper) // group
    sdtype = x.dtype if mode == "simulation" else np.float16
    q4 = np.zeros((m, k - keeper), np.int8)
    s4 = np.zeros((m, n_groups), sdtype)
    q8 = np.zeros((m, keeper), np.int8)
    s8 = np.ones(m, sdtype)
    for i in range(m):
        for g in range(n_groups):
            cols = range(g * group, (g + 1) * group)
            qs, s = _quantize_scalar_group([x[i, c] for c in cols], 7, clip, mode, x.dtype)
            s4[i, g] = s
            for c, q in zip(cols, qs):
                q4[i, c] = q
        if keeper:
            qs, s = _quantize_scalar_group([x[i, c] for c in range(k - keeper, k)], 127, 1.0, mode, x.dtype)
            s8[i] = s
            q8[i, :] = qs
    return AtomActivations(q4, s4, q8, s8)


def _quantize_scalar_group(vals, qmax, clip, mode, dtype):
    """One group, scalar by scalar, straight from the spec block."""
    f32 = np.float32
    if mode == "simulation":
        absmax = max(abs(dtype.type(v)) for v in vals)
        absmax = max(absmax, dtype.type(f32(ABSMAX_FLOOR)))
        if clip < 1.0:
            absmax = dtype.type(f32(absmax) * f32(clip))
        scale = dtype.type(f32(absmax) / f32(qmax))
        qs = []
        for v in vals:
            r = dtype.type(f32(v) / f32(scale))
            qs.append(int(min(max(np.rint(r), -qmax - 1), qmax)))
        return qs, scale
    absmax = max(abs(f32(v)) for v in vals)
    scale = f32(absmax / f32(qmax))
    qs = []
    for v in vals:
        if absmax == 0:
            qs.append(0)
            continue
        p = f32(f32(v) * f32(f32(1.0) / scale))
        a = float(p)
        r = np.floor(abs(a) + 0.5) * (1 if a >= 0 else -1)
        qs.append(int(min(max(r, -qmax - 1), qmax)))
    return qs, np.float16(scale)


def _out_dtype(dtype, default: np.dtype) -> np.dtype:
    """The dtype of a fake-quant result: ``None`` for the scales' own, else float16/32/64."""
    return default if dtype is None else require_dtype_arg("dtype", dtype, (np.float16, np.float32, np.float64))


def dequantize_activations(a: AtomActivations, dtype=None) -> np.ndarray:
    """Fake-quant values ``q * scale`` (M, K) in the scales' dtype (or ``dtype``), the product
    rounded once from fp32 as torch does; body first, keeper last (reordered order)."""
    require_instance("a", a, AtomActivations)
    dt = _out_dtype(dtype, a.scale4.dtype)
    m, kb = a.q4.shape
    g = a.scale4.shape[1]
    group = kb // g if g else 1
    body = _op(a.q4.astype(np.float32).reshape(m, g, group) * a.scale4.astype(np.float32)[:, :, None], dt)
    tail = _op(a.q8.astype(np.float32) * a.scale8.astype(np.float32)[:, None], dt)
    return np.concatenate([body.reshape(m, kb), tail], axis=1)


# ----------------------------------------------------------------------------------------------
# weights (RTN)
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class AtomWeights:
    """Quantized reordered weights.

    q4 int8 (K - keeper, N) in [-8, 7]; scale4 ((K - keeper) // group, N) with
    scale4[:, 2p] == scale4[:, 2p+1] (pair-shared); q8 int8 (keeper, N) in [-128, 127];
    scale8 (N,). Scales are float16 in kernel mode, the input dtype in simulation mode."""

    q4: np.ndarray
    scale4: np.ndarray
    q8: np.ndarray
    scale8: np.ndarray

    def __post_init__(self):
        require_fields(self)
        _check_atom_operand(self, rows_axis=0)
        # pair-equal scales are the format's rule, checked by atom_gemm; the kernel emulator
        # (refsim.emulator.atom_kernel) also takes unequal pairs, to show which one the kernel reads
        n = self.q4.shape[1]
        if n % 2:
            raise ShapeError(f"N: must be even (pairs of output channels share a scale); got {n}")


def _check_weight_args(w, mode, group_size, keeper, clip):
    """Shared validation of :func:`quantize_weights` and its loop twin."""
    w = _check_input("w", w)
    require_choice("mode", mode, MODES)
    clip = check_clip(clip)
    if w.shape[1] % 2:
        raise ShapeError(f"N: must be even (pairs of output channels share a scale); got {w.shape[1]}")
    group, keeper = check_split(w.shape[0], group_size, keeper)
    return w, clip, group, keeper


def quantize_weights(w: np.ndarray, mode: str = "simulation", *, group_size: int = GROUP,
                     keeper: int = KEEPER, clip: float = W_CLIP) -> AtomWeights:
    """Atom RTN weight quantization of reordered weights w (K, N) float16/float32 (rows in
    reordered order, N even). INT4 body: one symmetric scale per (group of ``group_size`` rows,
    pair of columns 2p, 2p+1) -- 2 * group_size values share it; INT8 tail: one scale per
    column over the last ``keeper`` rows, unclipped (Atom's simulation, ``model/qLinearLayer.py``) --
    in kernel mode one per column PAIR over those rows, because the kernel reads ``scale8`` as half2
    pairs like ``scale4`` (refsim.emulator.atom_kernel; per-column keeper scales would give column
    2p+1 of tile rows 0..7 the scale of column 2p). ``clip`` applies in simulation mode only."""
    w, clip, group, keeper = _check_weight_args(w, mode, group_size, keeper, clip)
    k, n = w.shape
    g = (k - keeper) // group
    # (G, group, N/2, 2) -> (G, N/2, group, 2) -> rows of 2*group values
    blocks = w[:k - keeper].reshape(g, group, n // 2, 2).transpose(0, 2, 1, 3).reshape(g * n // 2, 2 * group)
    q, s = _quantize_rows(blocks, 7, clip, mode)
    q4 = q.reshape(g, n // 2, group, 2).transpose(0, 2, 1, 3).reshape(k - keeper, n)
    s4 = np.repeat(s.reshape(g, n // 2), 2, axis=1)  # (G, N)
    if keeper and mode == "kernel":  # one scale per column pair: the kernel reads scale8 as half2 pairs
        pairs = w[k - keeper:].reshape(keeper, n // 2, 2).transpose(1, 0, 2).reshape(n // 2, 2 * keeper)
        q, s8 = _quantize_rows(pairs, 127, 1.0, mode)
        q8 = np.ascontiguousarray(q.reshape(n // 2, keeper, 2).transpose(1, 0, 2).reshape(keeper, n))
        s8 = np.repeat(s8, 2)
    elif keeper:
        q8t, s8 = _quantize_rows(np.ascontiguousarray(w[k - keeper:].T), 127, 1.0, mode)  # per column
        q8 = np.ascontiguousarray(q8t.T)
    else:
        q8, s8 = np.zeros((0, n), np.int8), np.ones(n, dtype=s4.dtype)
    return AtomWeights(q4, s4, q8, s8)


def quantize_weights_reference(w: np.ndarray, mode: str = "simulation", *, group_size: int = GROUP,
                               keeper: int = KEEPER, clip: float = W_CLIP) -> AtomWeights:
    """Plain-loop twin of :func:`quantize_weights`."""
    w, clip, group, keeper = _check_weight_args(w, mode, group_size, keeper, clip)
    k, n = w.shape
    g_count = (k - keeper) // group
    sdtype = w.dtype if mode == "simulation" else np.float16
    q4 = np.zeros((k - keeper, n), np.int8)
    s4 = np.zeros((g_count, n), sdtype)
    q8 = np.zeros((keeper, n), np.int8)
    s8 = np.ones(n, sdtype)
    for g in range(g_count):
        for p in range(n // 2):
            coords = [(r, c) for r in range(g * group, (g + 1) * group) for c in (2 * p, 2 * p + 1)]
            qs, s = _quantize_scalar_group([w[r, c] for r, c in coords], 7, clip, mode, w.dtype)
            s4[g, 2 * p] = s4[g, 2 * p + 1] = s
            for (r, c), q in zip(coords, qs):
                q4[r, c] = q
    tail_groups = ([(2 * p, 2 * p + 1) for p in range(n // 2)] if mode == "kernel"  # kernel: column pairs
                   else [(c,) for c in range(n)])
    for cols in tail_groups if keeper else ():
        coords = [(r, c) for r in range(k - keeper, k) for c in cols]
        qs, s = _quantize_scalar_group([w[r, c] for r, c in coords], 127, 1.0, mode, w.dtype)
        for (r, c), q in zip(coords, qs):
            s8[c] = s
            q8[r - (k - keeper), c] = q
    return AtomWeights(q4, s4, q8, s8)


def dequantize_weights(wq: AtomWeights, dtype=None) -> np.ndarray:
    """Fake-quant weights (K, N): ``q4 * scale4`` over the body rows, then ``q8 * scale8``."""
    require_instance("wq", wq, AtomWeights)
    dt = _out_dtype(dtype, wq.scale4.dtype)
    kb, n = wq.q4.shape
    g = wq.scale4.shape[0]
    group = kb // g if g else 1
    body = _op(wq.q4.astype(np.float32).reshape(g, group, n) * wq.scale4.astype(np.float32)[:, None, :], dt)
    tail = _op(wq.q8.astype(np.float32) * wq.scale8.astype(np.float32)[None, :], dt)
    return np.concatenate([body.reshape(kb, n), tail], axis=0)


# ----------------------------------------------------------------------------------------------
# INT4 packing
# ----------------------------------------------------------------------------------------------
def _check_int4(q: np.ndarray) -> np.ndarray:
    """q int8 (R, C) in [-8, 7], C even."""
    q = require_dtype("q", q, np.int8)
    require_ndim("q", q, 2)
    if q.size and (q.min() < -8 or q.max() > 7):
        bad = int(q.min()) if q.min() < -8 else int(q.max())
        raise FormatRuleError(f"q: INT4 values must lie in [-8, 7]; got {bad}")
    if q.shape[1] % 2:
        raise ShapeError(f"q: number of columns must be even; got {q.shape[1]}")
    return q


def pack_int4(q: np.ndarray) -> np.ndarray:
    """Pack signed INT4 values q (R, C) int8 in [-8, 7], C even, two per byte along C: element
    2j in the low nibble, 2j+1 in the high nibble (4-bit two's complement). Returns uint8
    (R, C // 2). For weights pass the kernel-side (N, K) array, i.e. ``q4.T``."""
    q = _check_int4(q)
    nib = (q.astype(np.int16) & 0xF).astype(np.uint8)
    return (nib[:, 0::2] | (nib[:, 1::2] << 4)).astype(np.uint8)


def pack_int4_reference(q: np.ndarray) -> np.ndarray:
    """Plain-loop twin of :func:`pack_int4`."""
    q = _check_int4(q)
    r, c = q.shape
    out = np.zeros((r, c // 2), np.uint8)
    for i in range(r):
        for j in range(c // 2):
            lo, hi = int(q[i, 2 * j]), int(q[i, 2 * j + 1])
            out[i, j] = (lo & 0xF) | ((hi & 0xF) << 4)
    return out


def unpack_int4(packed: np.ndarray) -> np.ndarray:
    """Inverse of :func:`pack_int4`: uint8 (R, C/2) -> int8 (R, C) in [-8, 7]."""
    packed = require_dtype("packed", packed, np.uint8)
    require_ndim("packed", packed, 2)
    lo = (packed & 0xF).astype(np.int8)
    hi = (packed >> 4).astype(np.int8)
    out = np.empty((packed.shape[0], packed.shape[1] * 2), np.int8)
    out[:, 0::2] = np.where(lo > 7, lo - 16, lo)
    out[:, 1::2] = np.where(hi > 7, hi - 16, hi)
    return out
