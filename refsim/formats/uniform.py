"""Uniform (affine) integer quantization: the quantizer behind every format in refsim.

Spec
----
    element      b-bit unsigned code q in [0, 2**b - 1], b in {2, 3, 4, 8} (any 1 <= b <= 8 accepted)
    container    uint8, one code per byte (packing is the job of the format modules)
    value        w_hat = scale[g, n] * (q[k, n] - zero[g, n]),  g = k // group_size
    weights      W is (K, N), K the reduction dimension; groups run along K
    scale, zero  (G, N) with G = K // group_size ("group"), G = 1 ("channel": one group spans K),
                 or (1, 1) ("tensor"); scale float32, zero int32 holding an integer in [0, 2**b - 1]
    arithmetic   float32 (PyTorch fp32, as AutoGPTQ's ``Quantizer`` computes), except the ``awq``
                 scheme on float16 input, which computes in float16 as AutoAWQ does (scheme table)
    rounding     "half_even" (NumPy/PyTorch round) or "half_away" (CUDA ``roundf``/``__float2int_rn``-free
                 kernels, e.g. Atom's), used for the codes and for the asymmetric zero point
    clipping     ``clip_ratio`` in (0, 1] shrinks the range endpoints before the scale is computed;
                 values outside the shrunken range saturate at code 0 or 2**b - 1 (that is the point of
                 clipping; it is never applied unless asked for)

Layout of the parameters for K = 8, N = 3, group_size = 4::

          n=0  n=1  n=2                     n=0  n=1  n=2
    k=0 [ q    q    q  ] ┐ group 0    scale [ s00  s01  s02 ]  g = 0
    k=1 [ q    q    q  ] │            zero  [ z00  z01  z02 ]
    k=2 [ q    q    q  ] │                  [ s10  s11  s12 ]  g = 1
    k=3 [ q    q    q  ] ┘                  [ z10  z11  z12 ]
    k=4 [ q    q    q  ] ┐ group 1
    ...

Schemes: how the (scale, zero) of one group is computed from its values x (after clipping by c)
-----------------------------------------------------------------------------------------
``"gptq_asym"``  GPTQ / AutoGPTQ ``Quantizer.find_params(sym=False)``; also the 2/4/16-bit paper's
               first-order 2-bit groups and Any-Precision's uniform baseline::

                   xmin = c*min(min x, 0); xmax = c*max(max x, 0)   (the range always holds 0)
                   if xmin == xmax == 0: xmin, xmax = -1, 1
                   scale = (xmax - xmin) / maxq;  zero = round(-xmin / scale)

``"gptq_sym"``   GPTQ / AutoGPTQ ``find_params(sym=True)``, with its quirk kept: a group without
               negative values keeps xmin = 0, so half of the code range is unused::

                   xmax = max(|xmin|, xmax); if xmin < 0: xmin = -xmax
                   scale = (xmax - xmin) / maxq;  zero = (maxq + 1) / 2

``"awq"``        AutoAWQ ``pseudo_quantize_tensor`` (zero_point=True): the data range, not holding 0::

                   scale = max(c*max x - c*min x, 1e-5) / maxq
                   zero  = clamp(-round(c*min x / scale), 0, maxq)

               Arithmetic follows the input dtype, as in PyTorch: AutoAWQ calls ``.half()`` on the
               layer first, so for float16 ``w`` every step above (the subtraction, the floor
               ``fp16(1e-5)``, ``/ maxq``, ``min / scale``, ``w / scale``) is one float16 operation
               rounded to nearest even, exactly as PyTorch evaluates fp16 tensors (each op computed
               wider and rounded once; for + - * / of fp16 operands the float32 result rounded to
               fp16 is the correctly rounded fp16 result, 24 >= 2*11 + 2 bits). float32 ``w`` is
               computed in float32 (float64 too). Scales are returned as float32 holding the
               float16 values. Matched: casper-hansen/AutoAWQ ``awq/quantize/quantizer.py``
               (``AwqQuantizer.pseudo_quantize_tensor``, zero-point branch; ``_apply_quant`` calls
               ``.half()`` first), stored snapshot 93d7e8e0f28d14aaf3126af580556f01939dc7ca.

               Quirk kept: when the range lies far from 0 (e.g. a constant group of 1.0) the zero
               clamps and every code saturates, so the group dequantizes far from its values; the
               half-step bound holds only for groups whose zero did not clamp.

``"marlin"``     Marlin's symmetric INT4 (IST-DASLab/marlin ``test.py`` ``gen_quant4``)::

                   scale = 2 * c*max|x| / maxq;  zero = (maxq + 1) / 2

``"absmax"``     symmetric, max|x| on the code 2^(b-1)-1 (Atom, SmoothQuant, LLM.int8)::

                   scale = c*max|x| / (2**(b-1) - 1);  zero = 2**(b-1)
                   (a group of all zeros gets scale 1 so that 0/0 never occurs). Codes still clamp to
                   [0, 2**b - 1], i.e. signed [-2^(b-1), 2^(b-1)-1] as Atom's clamp does, so a clipped
                   negative value may use the code 0 (signed -2^(b-1)).

Codes for every scheme: ``q = clamp(round(w / scale) + zero, 0, maxq)`` with maxq = 2**b - 1.

Instances in the five papers: GPTQ/AutoGPTQ checkpoints (``gptq_asym``/``gptq_sym``, group 128 or
per-channel), Marlin (``marlin``, b = 4, group 128 or per-channel), Atom (``absmax``, b = 4 weights with
clip 0.85 and activations with clip 0.9, group 128; b = 8 outliers; ``half_away`` in its CUDA path),
the 2/4/16-bit paper (``gptq_asym`` for its 2- and 4-bit groups of 16), QIGen (consumes GPTQ
checkpoints), Any-Precision (its uniform baselines; its own format is non-uniform, see the bitplane module).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from refsim._validate import (
    require_array,
    require_bits,
    require_choice,
    require_fields,
    require_finite,
    require_float_array,
    require_group_size,
    require_int,
    require_integer_array,
    require_ndim,
    require_shape,
)
from refsim.arith.integral import INTEGRAL_MODES, round_to_integral
from refsim.errors import DtypeError, FormatRuleError, ShapeError

__all__ = [
    "SCHEMES",
    "GRANULARITIES",
    "UniformQuant",
    "find_params",
    "quantize_codes",
    "quantize",
    "quantize_reference",
    "dequantize",
    "fake_quantize",
    "expand_groups",
    "check_weights",
    "check_granularity",
]

Scheme = Literal["gptq_asym", "gptq_sym", "awq", "marlin", "absmax"]
Rounding = Literal["half_even", "half_away"]
Granularity = Literal["tensor", "channel", "group"]

SCHEMES: tuple[str, ...] = ("gptq_asym", "gptq_sym", "awq", "marlin", "absmax")
GRANULARITIES: tuple[str, ...] = ("tensor", "channel", "group")
SUPPORTED_BITS: tuple[int, ...] = (1, 2, 3, 4, 5, 6, 7, 8)

_F32 = np.float32


def _require_rows(w: np.ndarray) -> np.ndarray:
    """At least one row (K >= 1): every group spans rows of K, and K // group would divide by 0."""
    if w.shape[0] == 0:
        raise ShapeError(f"w: must have at least one row (K >= 1) to quantize; got shape {w.shape}")
    return w


def check_weights(w: np.ndarray, bits: int, scheme: str, rounding: str, clip_ratio: float) -> np.ndarray:
    """The arguments every uniform quantizer takes: ``w`` a float16/32/64 (K, N) matrix, K >= 1, all
    finite; ``bits`` one of ``SUPPORTED_BITS``; ``scheme`` one of ``SCHEMES``; ``rounding`` an
    integral rounding mode; ``clip_ratio`` a number in (0, 1]. Returns ``w`` in native byte order
    (not copied when it already is), else the RefsimError naming the rule."""
    w = _require_rows(require_ndim("w", require_float_array("w", w), 2))
    require_bits(bits, SUPPORTED_BITS)
    require_choice("scheme", scheme, SCHEMES)
    require_choice("rounding", rounding, INTEGRAL_MODES)
    if not isinstance(clip_ratio, (int, float, np.floating)) or isinstance(clip_ratio, bool) \
            or not (0.0 < float(clip_ratio) <= 1.0):
        raise FormatRuleError(f"clip_ratio: must be a number in (0, 1]; got {clip_ratio!r}")
    require_finite("w", w)
    return w


def find_params(x: np.ndarray, bits: int, scheme: Scheme = "gptq_asym", *, clip_ratio: float | np.ndarray = 1.0,
                rounding: Rounding = "half_even") -> tuple[np.ndarray, np.ndarray]:
    """Scale and zero of the groups in ``x`` reduced along axis 0.

    ``x`` is float (G_rows, ...) holding the values of each group along axis 0 (e.g. one group of
    a (K, N) weight: ``x`` = W[g*G:(g+1)*G, :], giving one (scale, zero) per column n).
    ``clip_ratio`` is a scalar or an array broadcastable to ``x.shape[1:]``.
    Returns ``(scale float32 x.shape[1:], zero int32 x.shape[1:])``; see the module's scheme table.
    Cheap checks only (GPTQ calls this once per group): x a float array with at least one row,
    bits 1..8, scheme and rounding by name, a finite clip ratio.
    """
    x = require_float_array("x", x)
    if x.ndim < 1 or x.shape[0] == 0:
        raise ShapeError(f"x: must hold at least one value per group along axis 0; got shape {x.shape}")
    bits = require_bits(bits, SUPPORTED_BITS)
    require_choice("scheme", scheme, SCHEMES)
    require_choice("rounding", rounding, INTEGRAL_MODES)
    if isinstance(clip_ratio, np.ndarray):
        clip_ratio = require_array("clip_ratio", clip_ratio)
    try:
        finite = not isinstance(clip_ratio, (bool, str)) and np.all(np.isfinite(np.asarray(clip_ratio, np.float64)))
    except (TypeError, ValueError):
        finite = False
    if not finite:
        raise FormatRuleError(f"clip_ratio: must be a finite number or float array; got {clip_ratio!r:.60}")
    if scheme == "awq" and x.dtype == np.float16:
        scale, zero = _awq_params(x, np.asarray(clip_ratio, dtype=np.float16), np.float16((1 << bits) - 1), rounding)
        return scale.astype(_F32), zero
    x = x.astype(_F32, copy=False)
    c = np.asarray(clip_ratio, dtype=_F32)
    maxq = _F32((1 << bits) - 1)
    if scheme in ("gptq_asym", "gptq_sym"):
        xmin = np.minimum(x.min(axis=0), _F32(0)) * c
        xmax = np.maximum(x.max(axis=0), _F32(0)) * c
        if scheme == "gptq_sym":
            xmax = np.maximum(np.abs(xmin), xmax)
            xmin = np.where(xmin < 0, -xmax, xmin)
        both_zero = (xmin == 0) & (xmax == 0)
        xmin = np.where(both_zero, _F32(-1), xmin)
        xmax = np.where(both_zero, _F32(1), xmax)
        scale = (xmax - xmin) / maxq
        if scheme == "gptq_sym":
            zero = np.full(scale.shape, (int(maxq) + 1) // 2, dtype=np.int32)
        else:
            zero = round_to_integral(-xmin / scale, rounding).astype(np.int32)
    elif scheme == "awq":
        scale, zero = _awq_params(x, c, maxq, rounding)
    elif scheme == "marlin":
        amax = np.abs(x).max(axis=0) * c
        scale = amax * (_F32(2) / maxq)
        scale = np.where(scale == 0, _F32(1), scale)
        zero = np.full(scale.shape, (int(maxq) + 1) // 2, dtype=np.int32)
    elif scheme == "absmax":
        amax = np.abs(x).max(axis=0) * c
        qmax = _F32((1 << (bits - 1)) - 1) if bits > 1 else _F32(1)
        scale = amax / qmax
        scale = np.where(scale == 0, _F32(1), scale)
        zero = np.full(scale.shape, 1 << (bits - 1), dtype=np.int32)
    else:  # pragma: no cover - validated by callers
        raise FormatRuleError(f"scheme: must be one of {list(SCHEMES)}; got {scheme!r}")
    return scale.astype(_F32), zero


def _awq_params(x: np.ndarray, c: np.ndarray, maxq, rounding: str) -> tuple[np.ndarray, np.ndarray]:
    """AutoAWQ's scale and zero in the dtype of ``x`` (float16 or float32), one rounding per op.

    A clip ratio of exactly 1 is skipped (AutoAWQ multiplies by nothing; ``x * 1`` is exact anyway)."""
    t = x.dtype.type
    xmax = x.max(axis=0)
    xmin = x.min(axis=0)
    if np.any(c != 1):
        xmax, xmin = (xmax * c).astype(x.dtype), (xmin * c).astype(x.dtype)
    scale = (np.maximum((xmax - xmin).astype(x.dtype), t(1e-5)) / t(maxq)).astype(x.dtype)
    with np.errstate(over="ignore", invalid="ignore"):  # fp16: |xmin / scale| may be inf; clamped
        zero = np.clip(-round_to_integral((xmin / scale).astype(x.dtype), rounding), 0, maxq).astype(np.int32)
    return scale, zero


def quantize_codes(x: np.ndarray, scale: np.ndarray, zero: np.ndarray, bits: int,
                   rounding: Rounding = "half_even") -> np.ndarray:
    """Codes ``clamp(round(x / scale) + zero, 0, 2**bits - 1)`` as uint8 (float32 arithmetic).

    ``scale`` and ``zero`` broadcast against ``x``. Saturation at the range ends is the
    quantizer's definition (values beyond a clipped range), not a silent repair of bad input.
    ``bits`` 1..8 (the codes are uint8; 9 bits would wrap); x, scale float arrays, zero any
    numeric array. Cheap checks only: GPTQ calls this once per column.
    """
    bits = require_bits(bits, range(1, 9))
    x = require_float_array("x", x)
    scale = require_float_array("scale", scale)
    zero = require_array("zero", zero)
    if not (np.issubdtype(zero.dtype, np.integer) or np.issubdtype(zero.dtype, np.floating)):
        raise DtypeError(f"zero: dtype must be an integer or float type; got {zero.dtype}")
    try:
        np.broadcast_shapes(x.shape, scale.shape, zero.shape)
    except ValueError:
        raise ShapeError(f"scale, zero: must broadcast against x {x.shape}; got {scale.shape} and {zero.shape}") from None
    maxq = (1 << bits) - 1
    r = round_to_integral(x.astype(_F32, copy=False) / scale.astype(_F32, copy=False), rounding)
    return np.clip(r + zero.astype(_F32), 0, maxq).astype(np.uint8)


@dataclass(frozen=True)
class UniformQuant:
    """Result of :func:`quantize`.

    q      uint8 (K, N) codes in [0, 2**bits)
    scale  float32 (G, N), or (1, 1) for "tensor"
    zero   int32 (G, N), or (1, 1) for "tensor"
    group_size  rows of K per group (== K for "channel" and "tensor")
    """

    q: np.ndarray
    scale: np.ndarray
    zero: np.ndarray
    bits: int
    group_size: int
    scheme: str
    granularity: str
    rounding: str

    def __post_init__(self):
        require_fields(self)

    def dequantize(self) -> np.ndarray:
        """float32 (K, N): ``scale[g] * (q - zero[g])``."""
        return dequantize(self.q, self.scale, self.zero, self.group_size)


def _check_scales(scale: np.ndarray) -> None:
    bad = ~np.isfinite(scale) | (scale == 0)
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        raise FormatRuleError(
            f"w: every group's float32 scale must be finite and non-zero; the range of group {idx} "
            f"gives scale {scale[idx]!r} (range underflows or overflows float32)")


def check_granularity(k: int, granularity: str, group_size: int | None) -> int:
    """The group size (rows per scale) of a (K, N) weight at ``granularity``: ``group_size`` for
    ``"group"`` (an int that divides ``k``, required), ``k`` for the others (``group_size`` must be
    None). Returns a Python int, else a FormatRuleError or ShapeError naming the value."""
    k = require_int("K", k, minimum=1)
    if granularity == "group":
        if group_size is None:
            raise FormatRuleError("group_size: must be an integer for granularity 'group'; got None")
        return require_group_size(group_size, k)
    if group_size is not None:
        raise FormatRuleError(
            f"group_size: must be None for granularity {granularity!r}; got {group_size!r}")
    return k


def quantize(w: np.ndarray, bits: int, *, scheme: Scheme = "gptq_asym", granularity: Granularity = "channel",
             group_size: int | None = None, clip_ratio: float = 1.0,
             rounding: Rounding = "half_even") -> UniformQuant:
    """Quantize a weight matrix ``w`` float16/32/64 (K, N) to ``bits``-bit codes.

    ``granularity``: "tensor" (one scale), "channel" (one per column n, spanning K) or "group"
    (``group_size`` consecutive rows of K per column). Returns :class:`UniformQuant`. ``w`` is not
    modified. Raises DtypeError, ShapeError, FormatRuleError, NonFiniteError on bad input.
    """
    w = check_weights(w, bits, scheme, rounding, clip_ratio)
    require_choice("granularity", granularity, GRANULARITIES)
    k, n = w.shape
    g = check_granularity(k, granularity, group_size)
    f16 = scheme == "awq" and w.dtype == np.float16
    x = w.copy() if f16 else w.astype(_F32)
    if granularity == "tensor":
        scale, zero = find_params(x.reshape(-1, 1), bits, scheme, clip_ratio=clip_ratio, rounding=rounding)
        scale, zero = scale.reshape(1, 1), zero.reshape(1, 1)
    else:
        xg = x.reshape(k // g, g, n).transpose(1, 0, 2)  # (G_rows, K/G, N)
        scale, zero = find_params(xg, bits, scheme, clip_ratio=clip_ratio, rounding=rounding)  # (K/G, N)
    _check_scales(scale)
    if f16:  # AutoAWQ: round(fp16(w / scale)) with the fp16 scale; w / scale may overflow to +-inf in
        # fp16 (a constant group's tiny scale), which the clamp below saturates, as PyTorch's does
        s16 = expand_groups(scale.astype(np.float16), g, k)
        with np.errstate(over="ignore", invalid="ignore"):
            r = round_to_integral((x / s16).astype(np.float16), rounding).astype(_F32)
        q = np.clip(r + expand_groups(zero, g, k).astype(_F32), 0, (1 << bits) - 1).astype(np.uint8)
    else:
        q = quantize_codes(x, expand_groups(scale, g, k), expand_groups(zero, g, k), bits, rounding)
    return UniformQuant(q, scale, zero, bits, g, scheme, granularity, rounding)


def quantize_reference(w: np.ndarray, bits: int, *, scheme: Scheme = "gptq_asym",
                       granularity: Granularity = "channel", group_size: int | None = None,
                       clip_ratio: float = 1.0, rounding: Rounding = "half_even") -> UniformQuant:
    """Plain-loop twin of :func:`quantize`, written element by element from the spec block."""
    w = check_weights(w, bits, scheme, rounding, clip_ratio)
    k, n = w.shape
    g = check_granularity(k, granularity, group_size)
    maxq = (1 << bits) - 1
    f16 = scheme == "awq" and w.dtype == np.float16
    T = np.float16 if f16 else _F32  # the arithmetic type (AutoAWQ on fp16 tensors: fp16)
    c = T(clip_ratio)
    x = w.copy() if f16 else w.astype(_F32)

    def params(vals: list) -> tuple:
        s, z = _params(vals)
        _check_scales(np.asarray([s], _F32))
        return s, z

    def _params(vals: list) -> tuple:
        lo, hi = min(vals), max(vals)
        if scheme in ("gptq_asym", "gptq_sym"):
            xmin, xmax = min(lo, _F32(0)) * c, max(hi, _F32(0)) * c
            if scheme == "gptq_sym":
                xmax = max(abs(xmin), xmax)
                if xmin < 0:
                    xmin = -xmax
            if xmin == 0 and xmax == 0:
                xmin, xmax = _F32(-1), _F32(1)
            s = _F32(_F32(xmax - xmin) / _F32(maxq))
            _check_scales(np.asarray([s], _F32))  # before -xmin / s: a zero scale is refused by name
            z = (maxq + 1) // 2 if scheme == "gptq_sym" else int(round_to_integral(np.asarray(_F32(-xmin / s)), rounding))
        elif scheme == "awq":
            xmax, xmin = (hi, lo) if c == 1 else (T(hi * c), T(lo * c))
            with np.errstate(over="ignore", invalid="ignore"):
                s = T(T(max(T(xmax - xmin), T(1e-5))) / T(maxq))
                # float until clamped: in fp16 a constant group gives |xmin / s| = inf (AutoAWQ clamps it too)
                z = int(min(max(-float(round_to_integral(np.asarray(T(xmin / s)), rounding)), 0.0), maxq))
        elif scheme == "marlin":
            amax = _F32(max(abs(v) for v in vals) * c)
            s = _F32(amax * _F32(_F32(2) / _F32(maxq)))
            s, z = (s if s != 0 else _F32(1)), (maxq + 1) // 2
        else:
            amax = _F32(max(abs(v) for v in vals) * c)
            s = _F32(amax / _F32((1 << (bits - 1)) - 1 if bits > 1 else 1))
            s, z = (s if s != 0 else _F32(1)), 1 << (bits - 1)
        return s, z

    if granularity == "tensor":
        s, z = params([x[i, j] for i in range(k) for j in range(n)])
        scale, zero = np.full((1, 1), s, _F32), np.full((1, 1), z, np.int32)
    else:
        scale = np.zeros((k // g, n), _F32)
        zero = np.zeros((k // g, n), np.int32)
        for gi in range(k // g):
            for j in range(n):
                scale[gi, j], zero[gi, j] = params([x[i, j] for i in range(gi * g, (gi + 1) * g)])
    q = np.zeros((k, n), np.uint8)
    for i in range(k):
        for j in range(n):
            gi, gj = (0, 0) if granularity == "tensor" else (i // g, j)
            with np.errstate(over="ignore", invalid="ignore"):
                r = float(round_to_integral(np.asarray(T(x[i, j] / T(scale[gi, gj]))), rounding)) + int(zero[gi, gj])
            q[i, j] = int(min(max(r, 0.0), maxq))
    return UniformQuant(q, scale, zero, bits, g, scheme, granularity, rounding)


def expand_groups(p: np.ndarray, group_size: int, k: int) -> np.ndarray:
    """Repeat per-group parameters (G, N) along K to (K, N); a (1, 1) tensor parameter stays (1, 1)."""
    p = require_array("p", p)
    require_ndim("p", p, 2)
    group_size = require_int("group_size", group_size, minimum=1)
    k = require_int("k", k, minimum=1)
    if p.shape[0] * group_size != k and not (p.shape == (1, 1) and group_size == k):
        raise ShapeError(f"p: G={p.shape[0]} groups of group_size={group_size} must cover K={k}")
    if p.shape[0] == 1 and group_size == k:
        return p
    return np.repeat(p, group_size, axis=0)


def dequantize(q: np.ndarray, scale: np.ndarray, zero: np.ndarray, group_size: int | None = None) -> np.ndarray:
    """float32 (K, N) values ``scale[g] * (q - zero[g])``, g = k // group_size.

    ``q`` integer (K, N); ``scale`` float (G, N) or (1, 1); ``zero`` integer, same shape as
    ``scale``; ``group_size`` None means K // G (i.e. derived from the shapes).
    """
    q = require_integer_array("q", q)
    require_ndim("q", q, 2)
    scale = require_float_array("scale", scale)
    zero = require_integer_array("zero", zero)
    require_ndim("scale", scale, 2)
    require_shape("zero", zero, scale.shape)
    k, n = q.shape
    if scale.shape == (1, 1):
        g = k if group_size is None else group_size
    else:
        if scale.shape[1] != n or k % scale.shape[0] != 0:
            raise FormatRuleError(
                f"scale: shape must be (G, N={n}) with G dividing K={k}, or (1, 1); got {scale.shape}")
        g = k // scale.shape[0]
        if group_size is not None and group_size != g:
            raise FormatRuleError(
                f"group_size: must equal K / G = {g} for scale of shape {scale.shape}; got {group_size}")
    s = expand_groups(scale.astype(_F32), g, k)
    z = expand_groups(zero.astype(_F32), g, k)
    return (s * (q.astype(_F32) - z)).astype(_F32)


def fake_quantize(w: np.ndarray, bits: int, **kwargs) -> np.ndarray:
    """``dequantize(quantize(w, bits, **kwargs))`` returned in ``w``'s dtype (K, N)."""
    w = require_float_array("w", w)
    return quantize(w, bits, **kwargs).dequantize().astype(w.dtype)
