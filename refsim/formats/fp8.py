"""FP8 weights and activations: the casts, and the scaling schemes of compressed-tensors and DeepGEMM.

Spec
----
    element      e4m3 (OCP "fn": no Inf, NaN = S.1111.111, max 448), e5m2 (IEEE-like: Inf, max 57344),
                 e4m3fnuz / e5m2fnuz (AMD: no -0, NaN = 0x80, bias one larger, max 240 / 57344); one
                 uint8 code per element; values, rounding and specials in :mod:`refsim.formats.minifloat`
    cast         ``cast(x, kind, saturate)``: round to nearest even from float32 (float16 widened
                 exactly, float64 rounded to float32 first, as ml_dtypes and torch do):
                   saturate=False  ml_dtypes' ``astype``: overflow and +-Inf -> NaN (e4m3, fnuz) or
                                   +-Inf (e5m2); NaN -> e4m3 0x7F|S, e5m2 0x7E|S, fnuz 0x80
                   saturate=True   clamp(x, -max, max), then round (torch/vLLM scaled casts and the
                                   clamps of compressed-tensors and torchao): +-Inf -> +-max, NaN
                                   stays NaN. torch 2.13's own ``x.to(float8_e4m3fn)`` saturates
                                   the same way (+-Inf -> +-448); its ``.to(float8_e5m2)`` overflows
                                   to Inf and writes NaN as 0x7F|S (ml_dtypes: 0x7E|S)
    scaling      quantize(x, scheme): x float32 (K, N) weights or (M, K) activations, finite; kind e4m3;
                 every step one float32 operation rounded to nearest even, in this order:
    scheme       scales (float32)              amax over          codes
    "tensor"     (1, 1)                        all of x           cast(clamp(x / s + 0, +-448))
    "channel"    (1, N): per column of W       axis 0 (K)         cast(clamp(x / s + 0, +-448))
    "token"      (M, 1): per row of X          axis 1 (K)         cast(clamp(x / s + 0, +-448))
    "block128"   (ceil(K/128), ceil(N/128))    each 128x128 tile  cast(clamp(x / s + 0, +-448))
                 s = amax / 448, and s = 2^-23 (float32 eps) where that is 0: compressed-tensors
                 ``calculate_qparams`` (symmetric FLOAT 8-bit: (q_max - q_min) / 2 = 448; a zero scale
                 replaced by the scale dtype's eps) and ``_quantize`` (x / scale, plus the zero point 0,
                 which turns -0.0 into +0: code 0x00; clamp; ``.to(float8_e4m3fn)``), fed by
                 llm-compressor's memoryless min-max observer (strategies TENSOR, CHANNEL, TOKEN, and
                 BLOCK with block_structure [128, 128], edge tiles partial). Matched: compressed-tensors
                 0.19.0 (PyPI) quantization/utils/helpers.py, lifecycle/forward_helpers.py, quant_args.py,
                 and llm-compressor 0.14.0.1's FP8 / FP8_DYNAMIC / FP8_BLOCK presets (weights "tensor",
                 "channel", "block128"; tests/quant/test_fp8.py holds their checkpoints' bits)
    "deepgemm_block128"  (ceil(K/128), ceil(N/128))  each 128x128 tile  cast(x * (1 / s)), saturating
                 s = max(amax, fp32(1e-4)) / 448 (the tile zero-padded at the edges: padding never
                 raises amax; -0.0 stays 0x80)
    "deepgemm_block128_ue8m0"  the same with s rounded up to a power of two: exponent field +
                 (mantissa != 0), clamped to [1, 254] (DeepGEMM ``ceil_to_ue8m0``; UE8M0 scales)
                 DeepGEMM ``per_block_cast_to_fp8(x, use_ue8m0)``, deep_gemm/utils/math.py, snapshot
                 38939a4c494ce6e904b54da94a1183955a5e9497 (DeepSeek-V3's checkpoints store s as
                 ``weight_scale_inv``). The block families differ: the floor (eps for a zero tile
                 against amax >= 1e-4), the sign of zero, and x / s against x * fp32(1 / s).
    dequantize   decode(codes) * s, one float32 product per element (compressed-tensors ``_dequantize``)
    layout       refsim's (K, N) weights: torch's (N, K) weight transposed, so "channel" and the block
                 scales are the transposes of the checkpoints' (N, 1) and (N/128, K/128)
    goldens      tests/formats/data/fp8_mx_goldens.npz: ml_dtypes and torch casts, compressed-tensors
                 0.19.0's own functions, DeepGEMM's function transcribed in torch
                 (tests/formats/data/make_fp8_mx_goldens.py)

Tiles of the block schemes for K = 300, N = 200 (scales 3 x 2)::

         n 0..127   n 128..199
    k   0..127 [ s00 ] [ s01 ]
    k 128..255 [ s10 ] [ s11 ]
    k 256..299 [ s20 ] [ s21 ]     (edge tiles hold fewer values)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refsim._validate import (
    require_bool,
    require_choice,
    require_dtype,
    require_fields,
    require_finite,
    require_float_array,
    require_ndim,
    require_shape_arg,
)
from refsim.errors import DtypeError, ShapeError
from refsim.formats import minifloat

__all__ = ["KINDS", "SCHEMES", "E4M3_MAX", "cast", "cast_reference", "decode", "FP8Quant", "quantize",
           "quantize_reference", "dequantize", "scale_shape"]

KINDS: tuple[str, ...] = ("e4m3", "e5m2", "e4m3fnuz", "e5m2fnuz")
SCHEMES: tuple[str, ...] = ("tensor", "channel", "token", "block128", "deepgemm_block128", "deepgemm_block128_ue8m0")
E4M3_MAX = np.float32(448.0)
_BLOCK = 128
_F32 = np.float32
_EPS = np.float32(np.finfo(np.float32).eps)       # 2^-23, compressed-tensors' scale floor
_AMAX_FLOOR = np.float32(1e-4)                     # DeepGEMM's clamp(1e-4) on a float32 tensor


def _rule(kind: str, saturate: bool) -> tuple[str, str]:
    kind = require_choice("kind", kind, KINDS)
    saturate = require_bool("saturate", saturate)
    return kind, "saturate" if saturate else ("inf" if kind == "e5m2" else "nan")


def cast(x: np.ndarray, kind: str, saturate: bool = False) -> np.ndarray:
    """Round ``x`` (float16/32/64, any shape) to FP8 ``kind`` ("e4m3", "e5m2", "e4m3fnuz", "e5m2fnuz"):
    uint8 codes of ``x.shape``. ``saturate=False`` is ml_dtypes' ``astype`` (overflow -> NaN, or Inf
    for e5m2); ``saturate=True`` clamps to +-max first (Inf -> +-max). NaN -> the kind's NaN code."""
    kind, overflow = _rule(kind, saturate)
    return minifloat.encode(x, kind, overflow)


def cast_reference(x: np.ndarray, kind: str, saturate: bool = False) -> np.ndarray:
    """:func:`cast` one element at a time (nearest table value by exact comparison)."""
    kind, overflow = _rule(kind, saturate)
    return minifloat.encode_reference(x, kind, overflow)


def decode(codes: np.ndarray, kind: str) -> np.ndarray:
    """uint8 FP8 codes (any shape) of ``kind`` -> float32, exact (NaN codes -> quiet NaN with the
    code's sign bit, as ml_dtypes)."""
    kind = require_choice("kind", kind, KINDS)
    return minifloat.decode(require_dtype("codes", codes, np.uint8), kind)


def scale_shape(shape: tuple[int, int], scheme: str) -> tuple[int, int]:
    """The (rows, cols) of the float32 scales of a (R, C) input under ``scheme`` (module table)."""
    scheme = require_choice("scheme", scheme, SCHEMES)
    dims = require_shape_arg("shape", shape)
    if len(dims) != 2:
        raise ShapeError(f"shape: must be (rows, cols); got {dims}")
    r, c = dims
    return {"tensor": (1, 1), "channel": (1, c), "token": (r, 1)}.get(
        scheme, (-(-r // _BLOCK), -(-c // _BLOCK)))


@dataclass(frozen=True)
class FP8Quant:
    """Result of :func:`quantize`: ``codes`` uint8 e4m3 (R, C), ``scales`` float32 of
    :func:`scale_shape`, ``scheme`` its name. ``dequantize()`` -> float32 (R, C)."""

    codes: np.ndarray
    scales: np.ndarray
    scheme: str

    def __post_init__(self):
        require_fields(self)
        require_choice("FP8Quant.scheme", self.scheme, SCHEMES)
        require_ndim("FP8Quant.codes", require_dtype("FP8Quant.codes", self.codes, np.uint8), 2)
        want = scale_shape(self.codes.shape, self.scheme)
        scales = require_dtype("FP8Quant.scales", self.scales, np.float32)
        if scales.shape != want:
            raise ShapeError(f"FP8Quant.scales: shape must be {want} for {self.scheme} codes {self.codes.shape}; "
                             f"got {scales.shape}")

    def dequantize(self) -> np.ndarray:
        """float32 (R, C): decode(codes) * scale (see :func:`dequantize`)."""
        return dequantize(self)


def _check(x: np.ndarray, scheme: str) -> tuple[np.ndarray, str]:
    scheme = require_choice("scheme", scheme, SCHEMES)
    x = require_float_array("x", x)
    if x.dtype != np.float32:
        raise DtypeError(f"x: dtype must be float32 (compressed-tensors and DeepGEMM compute in the input's "
                         f"dtype; refsim models their float32 path: convert first); got {x.dtype}")
    x = require_ndim("x", x, 2)
    if 0 in x.shape:
        raise ShapeError(f"x: must have at least one row and one column; got shape {x.shape}")
    return require_finite("x", x), scheme


def _blocked(scheme: str) -> bool:
    return "block128" in scheme


def _expand(s: np.ndarray, shape: tuple[int, int], scheme: str) -> np.ndarray:
    """Per-element scales (R, C) from the scale array."""
    if _blocked(scheme):
        s = np.repeat(np.repeat(s, _BLOCK, axis=0), _BLOCK, axis=1)   # (R/128*128, C/128*128)
        return s[:shape[0], :shape[1]]
    return np.broadcast_to(s, shape)


def _ceil_ue8m0(s: np.ndarray) -> np.ndarray:
    """DeepGEMM ``ceil_to_ue8m0``: the next power of two >= s (s > 0 float32), exponent field in [1, 254]."""
    u = s.view(np.uint32).astype(np.int64)
    e = ((u >> 23) & 0xFF) + ((u & 0x7FFFFF) != 0)
    return (np.clip(e, 1, 254) << 23).astype(np.uint32).view(np.float32)


def _amax(x: np.ndarray, scheme: str) -> np.ndarray:
    """max |x| per scale group, float32 of :func:`scale_shape`."""
    a = np.abs(x)
    if _blocked(scheme):
        rb, cb = scale_shape(x.shape, scheme)
        pad = np.zeros((rb * _BLOCK, cb * _BLOCK), _F32)                # zero padding never raises amax
        pad[:x.shape[0], :x.shape[1]] = a
        return pad.reshape(rb, _BLOCK, cb, _BLOCK).max(axis=(1, 3))     # (R/128, 128, C/128, 128) -> (R/128, C/128)
    axis = {"tensor": None, "channel": 0, "token": 1}[scheme]
    return a.max(axis=axis, keepdims=True).reshape(scale_shape(x.shape, scheme))


def quantize(x: np.ndarray, scheme: str) -> FP8Quant:
    """Quantize float32 ``x`` (R, C), finite, to e4m3 codes with float32 scales by ``scheme`` (one of
    :data:`SCHEMES`; the module table gives each formula and its source). Returns :class:`FP8Quant`
    (codes uint8 (R, C), scales float32 of :func:`scale_shape`)."""
    x, scheme = _check(x, scheme)
    amax = _amax(x, scheme)
    e4m3 = minifloat.FORMATS["e4m3"]
    if scheme.startswith("deepgemm"):
        s = (np.maximum(amax, _AMAX_FLOOR) / E4M3_MAX).astype(_F32)
        if scheme.endswith("ue8m0"):
            s = _ceil_ue8m0(s)
        y = (x * _expand((_F32(1) / s).astype(_F32), x.shape, scheme)).astype(_F32)
        return FP8Quant(minifloat.encode_f32(y, e4m3, "saturate"), s, scheme)
    s = (amax / E4M3_MAX).astype(_F32)
    s = np.where(s == 0, _EPS, s).astype(_F32)
    y = (x / _expand(s, x.shape, scheme)).astype(_F32) + _F32(0)       # + zero point 0: -0.0 becomes +0
    y = np.clip(y, -E4M3_MAX, E4M3_MAX).astype(_F32)
    return FP8Quant(minifloat.encode_f32(y, e4m3, "saturate"), s, scheme)


def quantize_reference(x: np.ndarray, scheme: str) -> FP8Quant:
    """:func:`quantize` written as loops over the scale groups and their elements, float32 scalars."""
    x, scheme = _check(x, scheme)
    R, C = x.shape
    sr, sc = scale_shape(x.shape, scheme)
    rows, cols = {"tensor": (R, C), "channel": (R, 1), "token": (1, C)}.get(scheme, (_BLOCK, _BLOCK))
    scales = np.zeros((sr, sc), _F32)
    codes = np.zeros((R, C), np.uint8)
    for i in range(sr):
        for j in range(sc):
            rs = range(i * rows, min((i + 1) * rows, R))
            cs = range(j * cols, min((j + 1) * cols, C))
            amax = max(abs(x[r, c]) for r in rs for c in cs)                # a float32 scalar
            if scheme.startswith("deepgemm"):
                s = _F32(max(amax, _AMAX_FLOOR) / E4M3_MAX)
                if scheme.endswith("ue8m0"):
                    s = _F32(2.0 ** int(np.clip(np.ceil(np.log2(np.float64(s))), -126, 127)))
                inv = _F32(_F32(1) / s)
                ys = [[_F32(x[r, c] * inv) for c in cs] for r in rs]
            else:
                s = _F32(amax / E4M3_MAX)
                if s == 0:
                    s = _EPS
                ys = [[_F32(_F32(x[r, c] / s) + _F32(0)) for c in cs] for r in rs]
            scales[i, j] = s
            ys = np.array([[min(max(y, -E4M3_MAX), E4M3_MAX) for y in row] for row in ys], _F32)
            codes[rs.start:rs.stop, cs.start:cs.stop] = minifloat.encode_reference(ys, "e4m3", "saturate")
    return FP8Quant(codes, scales, scheme)


def dequantize(q: FP8Quant) -> np.ndarray:
    """float32 (R, C): ``decode(q.codes, "e4m3") * scale`` of each element's group, one float32 product."""
    if not isinstance(q, FP8Quant):
        raise DtypeError(f"q: must be an FP8Quant; got {type(q).__name__}")
    return (decode(q.codes, "e4m3") * _expand(q.scales, q.codes.shape, q.scheme)).astype(_F32)
