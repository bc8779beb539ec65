"""Microscaling formats: MXFP4, MXFP6, MXFP8 (OCP MX v1.0) and NVFP4, bit for bit with torchao.

Spec
----
    kinds        kind          element  block  scale                        elem max  emax_elem
                 mxfp4         e2m1     32     E8M0 (uint8)                 6         2
                 mxfp6_e2m3    e2m3     32     E8M0                         7.5       2
                 mxfp6_e3m2    e3m2     32     E8M0                         28        4
                 mxfp8_e4m3    e4m3     32     E8M0                         448       8
                 mxfp8_e5m2    e5m2     32     E8M0                         57344     15
                 nvfp4         e2m1     16     E4M3 (uint8) x fp32 tensor   6         -
                 elements as :mod:`refsim.formats.minifloat`; blocks run along the last axis, whose
                 length must be a multiple of the block
    storage      codes uint8: fp4 two per byte, element 2i in the low nibble and 2i+1 in the high
                 nibble (torchao ``pack_uint4``: ``x[::2] | x[1::2] << 4``), shape (..., K/2); fp6 and
                 fp8 one right-aligned code per byte, (..., K). scales uint8 (..., K/block)
    E8M0         scale 2^(s - 127) for s in 0..254, s = 255 is NaN; no sign, no zero
    input        x float32 (or ml_dtypes.bfloat16, widened exactly), ndim >= 1
    MX scale     torchao ``to_mx``, ScaleCalculationMode.FLOOR (the default), per block of 32:
                   amax = max |x| (NaN if the block holds a NaN)
                   e    = (exponent field of amax as float32) - 127   (floor(log2 amax) for a normal
                          amax; -127 for 0 and float32 subnormals; 128 for Inf and NaN)
                   s    = clamp(e - emax_elem, -127, 128) + 127        (uint8 0..255)
                   s    = 255 where amax is NaN                        (an Inf amax keeps its s)
    MX elements  q = x / max(2^(s - 127) as float32, 2^-126): float32 division (s = 255 reads as
                 +Inf, so finite elements of a NaN block become +-0; s = 0 divides by 2^-126 though
                 it dequantizes with 2^-127: torchao's quirk, kept)
                   fp8: clamp(q, -max, max), then round to nearest even (NaN -> 0x7F | S, torch's
                        NaN code for both e4m3 and e5m2)
                   fp6/fp4: torchao ``_f32_to_floatx_unpacked``: round to nearest even, |q| >= max
                        (Inf included) saturates to max, sign kept (-0 -> S.000); NaN has no code and
                        goes through the normal branch's integer arithmetic on its float32 bits:
                        ((bits & 0x7FFFFFFF) + ((bias - 127) << 23) + 2^(22 - M) - 1 + odd) >> (23 - M),
                        low 8 bits, or the sign (odd = bit 23 - M of the bits); kept as torchao writes it
    NVFP4        torchao ``nvfp4_quantize`` (block 16), float32 throughout:
                   b    = amax / 6
                   no per-tensor scale:  s8 = e4m3(clamp(b, 2^-6, 448)); q = x * (1 / dec(s8))
                   per-tensor scale t:   s8 = e4m3(clamp(b / t, 2^-6, 448)); q = x * ((1 / t) / dec(s8))
                   codes = fp4(clamp(q, -6, 6)) as above; e4m3 casts saturate, NaN -> 0x7F
                 t is a positive finite float32 (torchao: ``per_tensor_amax_to_scale(amax)`` =
                 amax / (448 * 6), :func:`per_tensor_scale`)
    NaN payloads torchao's NaN codes depend on the float32 NaN's bits, so refsim follows torch's: e4m3 0x7F
                 reads as 0x7FF00000 (torch keeps the fp8 payload), 1 / NaN and x * NaN keep that NaN
                 (torch's CPU kernels return the NaN operand; for NaN * NaN the goldens show the
                 second), so every element of an NVFP4 NaN block rounds from 0x7FF00000 (fp4 code 4)
    dequantize   MX: element value (float32) * 2^(s - 127), one float32 product (torchao ``to_dtype``);
                 s = 255 makes the whole block 0x7FC00000 (torch.where(..., nan)). NVFP4: element *
                 (t * e4m3(s)) (``get_hp_scales`` then one product; without t: element * e4m3(s)); a
                 NaN scale makes the block its NaN (0x7FF00000 | S)
    matched      pytorch/ao v0.18.0 = 5f2baf9d575cf732362594c998c399902942531f (the PyPI wheel 0.18.0 holds
                 these files byte for byte): torchao/prototype/mx_formats/mx_tensor.py
                 ``to_mx``/``to_dtype``/``get_fp_scale``, nvfp4_tensor.py ``nvfp4_quantize``/``dequantize``,
                 kernels.py ``pack_uint4``, torchao/prototype/custom_fp_utils.py
                 ``_f32_to_floatx_unpacked``; goldens from torchao 0.18.0 on torch 2.13.0 (CPU) in
                 tests/formats/data/fp8_mx_goldens.npz (make_fp8_mx_goldens.py)
    later        torchao main after 0.18.0 (read at 050515e8a09c3fcad27b5fac7ad1c742f13c97f3) changes FLOOR: an
                 Inf amax also gets s = 255, and elements are multiplied by the float32 2^(127 - s)
                 instead of divided by the clamped scale (s = 0 then scales by 2^127, s = 255 makes
                 every element NaN); refsim follows the released 0.18.0
    source       OCP Microscaling Formats (MX) Specification v1.0, sec. 5 and 6.3

One MXFP4 row of K = 64 (two blocks, 32 bytes of codes, 2 scales)::

    x      [ x0 x1 ... x31 | x32 ... x63 ]        float32 (64,)
    scales [ s0            | s1          ]        uint8 (2,)   x_i ~ e2m1(c_i) * 2^(s_blk - 127)
    codes  [ c1<<4|c0, c3<<4|c2, ..., c63<<4|c62 ] uint8 (32,)
           byte 0 = 0b hhhh llll: high nibble c1, low nibble c0
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from refsim._validate import (
    require_array,
    require_choice,
    require_dtype,
    require_fields,
    require_real,
)
from refsim.errors import DtypeError, FormatRuleError, ShapeError
from refsim.formats import minifloat

__all__ = ["KINDS", "MXKind", "MXQuant", "quantize", "quantize_reference", "dequantize", "pack_fp4",
           "unpack_fp4", "e8m0_to_float32", "per_tensor_scale"]


@dataclass(frozen=True)
class MXKind:
    """One row of the module's kind table."""

    name: str
    element: str        # a name of minifloat.FORMATS
    block: int
    scale: str          # "e8m0" or "e4m3"
    emax_elem: int      # floor(log2(element max)); NVFP4 does not use it

    def __post_init__(self):
        require_fields(self)


KINDS: dict[str, MXKind] = {k.name: k for k in (
    MXKind("mxfp4", "e2m1", 32, "e8m0", 2),
    MXKind("mxfp6_e2m3", "e2m3", 32, "e8m0", 2),
    MXKind("mxfp6_e3m2", "e3m2", 32, "e8m0", 4),
    MXKind("mxfp8_e4m3", "e4m3", 32, "e8m0", 8),
    MXKind("mxfp8_e5m2", "e5m2", 32, "e8m0", 15),
    MXKind("nvfp4", "e2m1", 16, "e4m3", 2),
)}

_F32 = np.float32
_TORCH_FP8_NAN = 0x7F
_TORCH_E4M3_NAN = np.uint32(0x7FF00000).view(np.float32)   # torch's float32 of e4m3 0x7F: the payload kept
_E4M3_TINY = _F32(2.0 ** -6)
_F32_MIN_NORMAL = _F32(2.0 ** -126)


# ---- fp4 packing and the E8M0 scale ---------------------------------------------------------------
def pack_fp4(c: np.ndarray) -> np.ndarray:
    """uint8 fp4 codes (..., K), K even -> uint8 (..., K/2): ``c[..., 0::2] | c[..., 1::2] << 4``, the low
    8 bits (torchao ``pack_uint4``; codes above 15 are kept as torchao's uint8 arithmetic keeps them)."""
    c = require_dtype("c", c, np.uint8)
    if c.ndim < 1 or c.shape[-1] % 2:
        raise ShapeError(f"c: last axis must have an even length (two codes per byte); got shape {c.shape}")
    return (c[..., 0::2] | (c[..., 1::2].astype(np.uint16) << 4)).astype(np.uint8)


def unpack_fp4(b: np.ndarray) -> np.ndarray:
    """uint8 bytes (..., K/2) -> uint8 fp4 codes (..., K): low nibble first (torchao ``unpack_uint4``)."""
    b = require_dtype("b", b, np.uint8)
    if b.ndim < 1:
        raise ShapeError(f"b: must have at least one axis; got shape {b.shape}")
    return np.stack([b & 0xF, b >> 4], axis=-1).reshape(*b.shape[:-1], 2 * b.shape[-1])  # (..., K/2, 2) -> (..., K)


def e8m0_to_float32(s: np.ndarray) -> np.ndarray:
    """uint8 E8M0 scales -> float32 2^(s - 127) (s = 0 is the subnormal 2^-127), NaN for 255
    (torchao ``get_fp_scale``)."""
    s = require_dtype("s", s, np.uint8)
    v = np.ldexp(_F32(1), np.minimum(s, 254).astype(np.int32) - 127).astype(_F32)
    return np.where(s == 255, _F32(np.nan), v)


def per_tensor_scale(amax: float) -> float:
    """NVFP4's per-tensor scale for a tensor whose max |x| is ``amax`` (> 0, at most float32's max):
    ``float32(amax) / 2688.0`` in float32 (torchao ``per_tensor_amax_to_scale``: ``amax.to(float32) /
    (448 * 6)``), returned as the Python float it holds."""
    amax = require_real("amax", amax)
    if not 0 < amax <= float(np.finfo(_F32).max):
        raise FormatRuleError(f"amax: must be > 0 and finite as float32; got {amax!r}")
    return float(_F32(amax) / _F32(448.0 * 6.0))


def _torch_e4m3_decode(s: np.ndarray) -> np.ndarray:
    """uint8 e4m3 codes -> float32 as torch converts them: NaN 0x7F/0xFF -> 0x7FF00000 | S (payload kept)."""
    nan = np.where(s & 0x80, np.uint32(0xFFF00000), np.uint32(0x7FF00000)).view(_F32)
    return np.where((s & 0x7F) == _TORCH_FP8_NAN, nan, minifloat.decode(s, "e4m3")).astype(_F32)


# ---- element casts as torchao writes them ----------------------------------------------------------
def _torchao_nan_codes(q: np.ndarray, f: minifloat.MiniFloat) -> np.ndarray:
    """The code torchao's ``_f32_to_floatx_unpacked`` writes for each element (meaningful for NaN:
    its normal branch applied to the NaN's bits; module docstring)."""
    u = q.view(np.uint32).astype(np.int64)
    a = u & 0x7FFFFFFF
    shift = 23 - f.man_bits
    odd = (a >> shift) & 1
    n = (a + ((f.bias - 127) << 23) + (1 << (shift - 1)) - 1 + odd) >> shift
    return ((n & 0xFF) | ((u >> 31) << (f.bits - 1))).astype(np.uint8)


def _elements(q: np.ndarray, f: minifloat.MiniFloat) -> np.ndarray:
    """float32 scaled values -> uint8 codes: saturating round to nearest even; NaN as torchao writes it."""
    if f.nan == "none":
        codes = minifloat.encode_f32(q, f, "saturate")
        return np.where(np.isnan(q), _torchao_nan_codes(q, f), codes).astype(np.uint8)
    return minifloat.encode_f32(q, f, "saturate", nan=_TORCH_FP8_NAN)


# ---- the record -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MXQuant:
    """Result of :func:`quantize`. ``codes`` uint8 (..., K/2) for fp4 kinds, else (..., K); ``scales``
    uint8 (..., K/block): E8M0 for MX, E4M3 for NVFP4; ``per_tensor_scale`` NVFP4's float32 t or
    ``None``; ``shape`` the input's shape. ``dequantize()`` -> float32 of ``shape``."""

    kind: str
    shape: tuple[int, ...]
    codes: np.ndarray
    scales: np.ndarray
    per_tensor_scale: float | None = None

    def __post_init__(self):
        require_fields(self)
        k = KINDS[require_choice("MXQuant.kind", self.kind, tuple(KINDS))]
        shape = self.shape
        if len(shape) < 1 or any(d < 0 for d in shape) or shape[-1] % k.block:
            raise ShapeError(f"MXQuant.shape: last axis must be a multiple of {k.block}; got {shape}")
        per = 2 if k.element == "e2m1" else 1
        want_codes = (*shape[:-1], shape[-1] // per)
        want_scales = (*shape[:-1], shape[-1] // k.block)
        for name, arr, want in (("codes", self.codes, want_codes), ("scales", self.scales, want_scales)):
            arr = require_dtype(f"MXQuant.{name}", arr, np.uint8)
            if arr.shape != want:
                raise ShapeError(f"MXQuant.{name}: shape must be {want} for {k.name} of shape {shape}; got {arr.shape}")
        if self.per_tensor_scale is not None:
            _check_per_tensor_scale(k, self.per_tensor_scale)

    def dequantize(self) -> np.ndarray:
        """float32 of ``shape`` (see :func:`dequantize`)."""
        return dequantize(self)


def _check_per_tensor_scale(k: MXKind, t) -> float:
    if k.name != "nvfp4":
        raise FormatRuleError(f"per_tensor_scale: only nvfp4 has a per-tensor scale; got {t!r} for {k.name}")
    t = require_real("per_tensor_scale", t)
    if not t > 0 or float(_F32(t)) != t:
        raise FormatRuleError(f"per_tensor_scale: must be a positive float32 value (a float it holds exactly); "
                              f"got {t!r}")
    return t


def _check(x, kind: str, per_tensor_scale) -> tuple[np.ndarray, MXKind, float | None]:
    k = KINDS[require_choice("kind", kind, tuple(KINDS))]
    x = require_array("x", x)
    if x.dtype.name == "bfloat16":
        x = x.astype(_F32)                       # exact
    elif x.dtype != np.float32:
        raise DtypeError(f"x: dtype must be float32 or ml_dtypes.bfloat16 (torchao's inputs); got {x.dtype}")
    if x.ndim < 1 or x.shape[-1] % k.block:
        raise ShapeError(f"x: last axis must be a multiple of the {k.name} block {k.block}; got shape {x.shape}")
    t = None if per_tensor_scale is None else _check_per_tensor_scale(k, per_tensor_scale)
    return x, k, t


def quantize(x: np.ndarray, kind: str, per_tensor_scale: float | None = None) -> MXQuant:
    """Quantize ``x`` (float32 or bfloat16, (..., K), K a multiple of the kind's block) to ``kind`` (a
    name of :data:`KINDS`) as torchao 0.18.0 does (module docstring). ``per_tensor_scale``: NVFP4's
    float32 t (positive), else ``None``. NaN and Inf follow torchao's rules rather than being refused.
    Returns :class:`MXQuant`."""
    x, k, t = _check(x, kind, per_tensor_scale)
    f = minifloat.FORMATS[k.element]
    blocks = x.reshape(*x.shape[:-1], x.shape[-1] // k.block, k.block)      # (..., K/block, block)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        amax = np.abs(blocks).max(axis=-1, keepdims=True)                   # (..., K/block, 1)
        if k.scale == "e8m0":
            e = ((amax.view(np.uint32).astype(np.int64) >> 23) & 0xFF) - 127
            s = np.clip(e - k.emax_elem, -127, 128) + 127
            s = np.where(np.isnan(amax), 255, s).astype(np.uint8)
            s_fp32 = np.maximum((s.astype(np.uint32) << 23).view(_F32), _F32_MIN_NORMAL)
            q = (blocks / s_fp32).astype(_F32)
        else:
            b = (amax / _F32(6)).astype(_F32)
            if t is not None:
                b = (b / _F32(t)).astype(_F32)
            s = minifloat.encode_f32(np.clip(b, _E4M3_TINY, _F32(448)), minifloat.FORMATS["e4m3"], "saturate",
                                     nan=_TORCH_FP8_NAN)
            dec = _torch_e4m3_decode(s)
            r = ((_F32(1) / dec) if t is None else ((_F32(1) / _F32(t)) / dec)).astype(_F32)
            q = np.where(np.isnan(r), r, blocks * r)                        # a NaN block: r's NaN
            q = np.clip(q, _F32(-6), _F32(6)).astype(_F32)
        codes = _elements(q, f).reshape(x.shape)
    if k.element == "e2m1":
        codes = pack_fp4(codes)
    return MXQuant(k.name, tuple(x.shape), codes, s[..., 0], t)


def quantize_reference(x: np.ndarray, kind: str, per_tensor_scale: float | None = None) -> MXQuant:
    """:func:`quantize` block by block and element by element, from the module docstring's rules
    (float32 scalars, the exponent from ``math.frexp``, elements by exact nearest-value search)."""
    x, k, t = _check(x, kind, per_tensor_scale)
    f = minifloat.FORMATS[k.element]
    flat = x.reshape(-1, k.block)                                           # (blocks, block)
    scales = np.zeros(flat.shape[0], np.uint8)
    codes = np.zeros(flat.shape, np.uint8)
    for i, blk in enumerate(flat):
        vals = [_F32(v) for v in blk]
        amax = _F32(np.nan) if any(np.isnan(v) for v in vals) else max(abs(v) for v in vals)
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            if k.scale == "e8m0":
                if np.isnan(amax):
                    s = 255
                else:
                    if np.isinf(amax):
                        e = 128
                    elif amax < _F32_MIN_NORMAL:                             # 0 and float32 subnormals
                        e = -127
                    else:
                        e = math.frexp(float(amax))[1] - 1                   # floor(log2 amax)
                    s = min(max(e - k.emax_elem, -127), 128) + 127
                div = _F32(np.inf) if s == 255 else max(_F32(2.0 ** (s - 127)), _F32_MIN_NORMAL)
                qs = [_F32(v / div) for v in vals]
            else:
                b = _F32(amax / _F32(6))
                if t is not None:
                    b = _F32(b / _F32(t))
                bc = b if np.isnan(b) else min(max(b, _E4M3_TINY), _F32(448))
                s = int(_TORCH_FP8_NAN) if np.isnan(bc) else int(
                    minifloat.encode_reference(np.array([bc], _F32), "e4m3", "saturate")[0])
                if s == _TORCH_FP8_NAN:                                      # NaN block: every q is torch's NaN
                    qs = [_TORCH_E4M3_NAN] * len(vals)
                else:
                    dec = minifloat.decode_reference(np.array([s], np.uint8), "e4m3")[0]
                    r = _F32(_F32(1) / dec) if t is None else _F32(_F32(_F32(1) / _F32(t)) / dec)
                    qs = [min(max(_F32(v * r), _F32(-6)), _F32(6)) for v in vals]
        scales[i] = s
        for j, v in enumerate(qs):
            if np.isnan(v):
                codes[i, j] = _torchao_nan_codes(np.array([v], _F32), f)[0] if f.nan == "none" else \
                    _TORCH_FP8_NAN | (0x80 if np.signbit(v) else 0)
            else:
                codes[i, j] = minifloat.encode_reference(np.array([v], _F32), f.name, "saturate")[0]
    codes = codes.reshape(x.shape)
    if k.element == "e2m1":
        codes = pack_fp4(codes)
    return MXQuant(k.name, tuple(x.shape), codes, scales.reshape(*x.shape[:-1], x.shape[-1] // k.block), t)


def dequantize(q: MXQuant) -> np.ndarray:
    """float32 of ``q.shape``: MX element * 2^(s - 127) (NaN for s = 255); NVFP4 element * (t * e4m3(s))
    (or element * e4m3(s) without t); one float32 product per element, as torchao dequantizes."""
    if not isinstance(q, MXQuant):
        raise DtypeError(f"q: must be an MXQuant; got {type(q).__name__}")
    k = KINDS[q.kind]
    f = minifloat.FORMATS[k.element]
    c = unpack_fp4(q.codes) if k.element == "e2m1" else q.codes
    v = minifloat.decode(c, f.name)                                         # (..., K) float32
    if k.scale == "e8m0":
        s = e8m0_to_float32(q.scales)                                       # NaN: 0x7FC00000
    else:
        s = _torch_e4m3_decode(q.scales)                                    # NaN: 0x7FF00000 | S
        if q.per_tensor_scale is not None:
            s = np.where(np.isnan(s), s, _F32(q.per_tensor_scale) * s).astype(_F32)
    blocks = v.reshape(*v.shape[:-1], v.shape[-1] // k.block, k.block)      # (..., K/block, block)
    with np.errstate(invalid="ignore", over="ignore"):
        out = (blocks * s[..., None]).astype(_F32)
    out = np.where(np.isnan(s)[..., None], s[..., None], out)               # a NaN scale's NaN, whole block
    return out.reshape(q.shape)
