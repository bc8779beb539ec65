"""Atom's INT4 KV cache: asymmetric 4-bit codes per (token, head) vector, two per byte.

Spec block
----------
=================  ==================================================================================
element bits       4-bit UNSIGNED codes q in [0, 15] with a per-vector zero point z in [0, 15]
container          :class:`AtomKV` (codes uint8 one per element); packed: uint8, two per byte
bit order          element 2j in the LOW nibble, element 2j+1 in the HIGH nibble of byte j
element order      (..., head_dim): one quantization group per vector along the last axis
scales             one scale (input dtype) and one zero (uint8) per vector
invariants         value = (q - z) * s with fp32 ops rounded to the scale dtype
source             efeslab/Atom @ 7e3618b1a7a7c86e1c93cc909b1510c046d76ac6: model/quant.py
                   (quantize_attn_{k,v}_wrapper, asymmetric, per token and head)
=================  ==================================================================================

One key/value vector (head_dim = 8 shown)::

    x:      -0.9  -0.1   0.0   0.3   0.6   1.2   0.2  -0.4      min -0.9, max 1.2
    s = (1.2 - -0.9) / 15 = 0.14,  z = round(0.9 / 0.14) = 6
    q:       0     5     6     8    10    15     7     3         packed byte 0 = 0x50 (q1 | q0)

One concept per module: the KV cache lives here; the names stay
importable from there.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refsim._validate import (
    require_codes,
    require_dtype,
    require_fields,
    require_finite,
    require_instance,
    require_shape,
    set_fields,
)
from refsim.errors import ShapeError
from refsim.arith.integral import round_half_even
from refsim.formats.atom import ABSMAX_FLOOR, check_clip, _op

__all__ = ["AtomKV", "quantize_kv", "dequantize_kv", "pack_kv", "unpack_kv"]


@dataclass(frozen=True)
class AtomKV:
    """Asymmetric INT4 KV cache: q uint8 (..., head_dim) codes in [0, 15]; scale and zero
    (...,) per (token, head); scale in the input dtype, zero an integer code stored as uint8."""

    q: np.ndarray
    scale: np.ndarray
    zero: np.ndarray

    def __post_init__(self):
        require_fields(self)
        q = require_dtype("q", self.q, np.uint8)
        if q.ndim < 1:
            raise ShapeError(f"q: must have at least 1 dimension (head_dim last); got shape {q.shape}")
        require_codes("q", q, 4)
        scale = require_dtype("scale", self.scale, np.float16, np.float32)
        require_shape("scale", scale, q.shape[:-1])
        require_finite("scale", scale)
        zero = require_dtype("zero", self.zero, np.uint8)
        require_shape("zero", zero, q.shape[:-1])
        require_codes("zero", zero, 4)
        set_fields(self, q=q, scale=scale, zero=zero)


def quantize_kv(x: np.ndarray, *, clip: float = 1.0) -> AtomKV:
    """Atom's simulated KV-cache quantization (model/quant.py, asymmetric, per (token, head)):
    x (..., head_dim) float16/float32, one group per vector along the last axis (Atom asserts
    head_dim == 128; any head_dim is accepted here). With fp32 ops rounded to x.dtype:
    ``s = max(max - min, 1e-5) / 15``, ``z = clamp(round(-min / s), 0, 15)``,
    ``q = clamp(round(x / s) + z, 0, 15)``, rounding half to even; ``clip`` scales max and min."""
    x = require_dtype("x", x, np.float16, np.float32)
    require_finite("x", x)
    clip = check_clip(clip)
    if x.ndim < 1 or x.shape[-1] == 0:
        raise ShapeError(f"x: must have at least 1 dimension and a non-empty head_dim (last axis); got shape {x.shape}")
    dt, f32 = x.dtype, np.float32
    vmax = x.max(axis=-1)
    vmin = x.min(axis=-1)
    if clip < 1.0:
        vmax = _op(vmax.astype(f32) * f32(clip), dt)
        vmin = _op(vmin.astype(f32) * f32(clip), dt)
    rng = np.maximum(_op(vmax.astype(f32) - vmin.astype(f32), dt), _op(f32(ABSMAX_FLOOR), dt))
    s = _op(rng.astype(f32) / f32(15), dt)
    z = np.clip(round_half_even(_op(-vmin.astype(f32) / s.astype(f32), dt)), 0, 15)
    q = np.clip(round_half_even(_op(x.astype(f32) / s.astype(f32)[..., None], dt)) + z[..., None], 0, 15)
    return AtomKV(q.astype(np.uint8), s, z.astype(np.uint8))


def pack_kv(q: np.ndarray) -> np.ndarray:
    """Pack KV codes q uint8 (..., D) in [0, 15], D even, two per byte along the last axis, even
    element in the low nibble: read as little-endian 32-bit words, element j of a word is
    ``(w >> 4j) & 0xF`` (the flashinfer fork's LSB-first order). Returns uint8 (..., D // 2)."""
    q = require_dtype("q", q, np.uint8)
    q = require_codes("q", q, 4)
    if q.ndim < 1 or q.shape[-1] % 2:
        raise ShapeError(f"q: last dimension must be even; got shape {q.shape}")
    return (q[..., 0::2] | (q[..., 1::2] << 4)).astype(np.uint8)


def unpack_kv(packed: np.ndarray) -> np.ndarray:
    """Inverse of :func:`pack_kv`: uint8 (..., D/2) -> uint8 (..., D)."""
    packed = require_dtype("packed", packed, np.uint8)
    if packed.ndim < 1:
        raise ShapeError(f"packed: must have at least 1 dimension (D/2 last); got shape {packed.shape}")
    out = np.empty(packed.shape[:-1] + (2 * packed.shape[-1],), np.uint8)
    out[..., 0::2] = packed & 0xF
    out[..., 1::2] = packed >> 4
    return out


def dequantize_kv(kv: AtomKV) -> np.ndarray:
    """``(q - z) * s`` with fp32 ops rounded to the scale dtype (Atom's simulation)."""
    require_instance("kv", kv, AtomKV)
    dt, f32 = kv.scale.dtype, np.float32
    diff = kv.q.astype(f32) - kv.zero.astype(f32)[..., None]
    return _op(diff * kv.scale.astype(f32)[..., None], dt)


