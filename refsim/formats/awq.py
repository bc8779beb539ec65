"""AWQ (AutoAWQ "GEMM" version) packed checkpoint format, 4-bit.

Spec
----
    qweight   int32 (K, N // 8): codes packed along N, 8 per word, in the interleaved order below
    qzeros    int32 (G, N // 8): integer zero points, same packing (no "minus one": w = (q - z) * s)
    scales    float16 (G, N), G = K // group_size (per-channel: G = 1)
    bits      4 only (AutoAWQ ``WQLinear_GEMM`` refuses others); N % 8 == 0, group_size | K
    order     nibble i (bits 4i..4i+3) of word j holds column ``8*j + AWQ_ORDER[i]``,
              AWQ_ORDER = (0, 2, 4, 6, 1, 3, 5, 7); reading back uses its inverse (0, 4, 1, 5, 2, 6, 3, 7)
    source    casper-hansen/AutoAWQ ``awq/modules/linear/gemm.py`` (``WQLinear_GEMM.from_linear``),
              commit 030fe2a15b959425d278de8121f03ed895e3b10c

One word, columns c0..c7 of one row k (the interleave lets the kernel split even/odd columns with
one shift per pair when it converts to fp16x2)::

    bit   31..28 27..24 23..20 19..16 15..12 11..8  7..4   3..0
          [ c7  ][ c5  ][ c3  ][ c1  ][ c6  ][ c4  ][ c2  ][ c0  ]

Worked example: codes of columns 0..7 = 0, 1, 2, 3, 4, 5, 6, 7 give the word 0x75316420.

The quantizer AutoAWQ pairs with this format is the ``awq`` scheme of :mod:`refsim.formats.uniform`
(the data's own min/max, scale floor 1e-5, zero clamped to [0, 15]).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refsim.native import packers as _fast
from refsim._validate import (
    require_codes,
    require_divisible,
    require_dtype,
    require_fields,
    require_finite,
    require_float_array,
    require_instance,
    require_int,
    require_integer_array,
    require_ndim,
    require_shape,
    require_words,
    set_fields,
)
from refsim.errors import FormatRuleError, ShapeError

__all__ = [
    "AWQ_ORDER",
    "AWQ_REVERSE_ORDER",
    "AWQCheckpoint",
    "pack_columns",
    "pack_columns_reference",
    "unpack_columns",
    "pack",
    "unpack",
    "dequantize",
]

BITS = 4
AWQ_ORDER: tuple[int, ...] = (0, 2, 4, 6, 1, 3, 5, 7)
AWQ_REVERSE_ORDER: tuple[int, ...] = tuple(int(i) for i in np.argsort(AWQ_ORDER))  # (0, 4, 1, 5, 2, 6, 3, 7)


def pack_columns(q: np.ndarray) -> np.ndarray:
    """Pack 4-bit codes (R, N) along N with the AWQ interleave: int32 (R, N // 8). N % 8 == 0."""
    q = require_integer_array("q", q)
    require_ndim("q", q, 2)
    require_divisible("N (columns of q)", q.shape[1], 8, "must be a positive multiple of 8 (8 nibbles per word)")
    if q.dtype == np.uint8 and _fast.available():
        # compiled twin (refsim.native.packers): one pass that also ORs every 8 codes, so the range
        # check costs no pass of its own; on a code >= 16 it returns None and require_codes raises
        words = _fast.awq_pack(np.ascontiguousarray(q))
        if words is not None:
            return words.view(np.int32)
    q = require_codes("q", q, BITS)
    r, n = q.shape
    if _fast.available():               # other integer dtypes, validated above
        return _fast.awq_pack(np.ascontiguousarray(q, dtype=np.uint8)).view(np.int32)
    cols = q.astype(np.uint8, copy=False).reshape(r, n // 8, 8)  # (R, N/8, column in word); codes <= 15
    # byte j of a word (little-endian) = slot 2j (low nibble) | slot 2j+1 (high nibble); the four
    # bytes of a word lie along the last axis, so the word array is a view of the byte array
    out = np.empty((r, n // 8, 4), dtype=np.uint8)  # (R, N/8, byte in word)
    for j in range(4):
        np.left_shift(cols[:, :, AWQ_ORDER[2 * j + 1]], np.uint8(4), out=out[:, :, j])
        out[:, :, j] |= cols[:, :, AWQ_ORDER[2 * j]]
    out = out.view(np.uint32).reshape(r, n // 8)
    return out.view(np.int32)


def pack_columns_reference(q: np.ndarray) -> np.ndarray:
    """Plain-loop twin of :func:`pack_columns`, straight from the spec."""
    q = require_integer_array("q", q)
    require_ndim("q", q, 2)
    require_divisible("N (columns of q)", q.shape[1], 8, "must be a positive multiple of 8 (8 nibbles per word)")
    q = require_codes("q", q, 4)
    r, n = q.shape
    out = np.zeros((r, n // 8), dtype=np.uint32)
    for row in range(r):
        for j in range(n // 8):
            for i in range(8):
                out[row, j] |= np.uint32(int(q[row, 8 * j + AWQ_ORDER[i]]) << (4 * i))
    return out.view(np.int32)


def unpack_columns(packed: np.ndarray, n: int) -> np.ndarray:
    """Inverse of :func:`pack_columns`: int32 (R, N // 8) -> uint8 (R, N)."""
    packed = require_dtype("packed", packed, np.int32)
    require_ndim("packed", packed, 2)
    n = require_int("n", n, minimum=1)
    require_divisible("n", n, 8)
    if packed.shape[1] != n // 8:
        raise ShapeError(f"packed: must have N / 8 = {n // 8} columns for n={n}; got shape {packed.shape}")
    r = packed.shape[0]
    if _fast.available():               # compiled twin (refsim.native.packers)
        return _fast.awq_unpack(np.ascontiguousarray(packed).view(np.uint32), n)
    b = np.ascontiguousarray(packed).view(np.uint8).reshape(r, n // 8, 4)  # (R, N/8, byte in word)
    out = np.empty((r, n // 8, 8), dtype=np.uint8)  # (R, N/8, column within the word)
    for j in range(4):
        np.bitwise_and(b[:, :, j], np.uint8(0xF), out=out[:, :, AWQ_ORDER[2 * j]])
        np.right_shift(b[:, :, j], np.uint8(4), out=out[:, :, AWQ_ORDER[2 * j + 1]])
    return out.reshape(packed.shape[0], n)


@dataclass(frozen=True)
class AWQCheckpoint:
    """qweight int32 (K, N//8), qzeros int32 (G, N//8), scales float16 (G, N), group_size."""

    qweight: np.ndarray
    qzeros: np.ndarray
    scales: np.ndarray
    group_size: int

    def __post_init__(self):
        """Cross-field rules, checked once: every consumer then trusts the fields."""
        require_fields(self)
        scales = require_float_array("scales", self.scales)
        require_ndim("scales", scales, 2)
        groups, n = scales.shape
        if groups < 1 or n < 8 or n % 8:
            raise ShapeError(f"scales: shape must be (G >= 1, N) with N a positive multiple of 8 (8 codes per word); "
                             f"got {scales.shape}")
        require_finite("scales", scales)
        qweight = require_words("qweight", self.qweight, (None, n // 8))
        k = qweight.shape[0]
        group_size = require_int("group_size", self.group_size, minimum=1)
        if k == 0 or k % group_size or k // group_size != groups:
            raise ShapeError(f"group_size: K={k} rows of qweight must be G={groups} groups of group_size; "
                             f"got group_size={group_size}")
        qzeros = require_words("qzeros", self.qzeros, (groups, n // 8))
        set_fields(self, scales=scales, qweight=qweight, qzeros=qzeros, group_size=group_size)


def pack(q: np.ndarray, scales: np.ndarray, zeros: np.ndarray, group_size: int | None = None) -> AWQCheckpoint:
    """Build an AWQ GEMM checkpoint from codes q (K, N), scales float (G, N), zeros int (G, N).

    ``group_size`` None means per-channel (G = 1, AutoAWQ's ``-1``). Scales are stored as float16.
    """
    q = require_integer_array("q", q)
    require_ndim("q", q, 2)
    k, n = q.shape
    g = k if group_size is None else require_int("group_size", group_size, minimum=1)
    if k % g:
        raise ShapeError(f"group_size: must divide K={k}; got {g}")
    scales = require_float_array("scales", scales)
    require_ndim("scales", scales, 2)
    require_shape("scales", scales, (k // g, n))
    require_finite("scales", scales)
    zeros = require_integer_array("zeros", zeros)
    require_shape("zeros", zeros, (k // g, n))
    with np.errstate(over="ignore"):
        s16 = scales.astype(np.float16)
    if not np.isfinite(s16).all():
        raise FormatRuleError("scales: must be representable in float16 (|s| <= 65504); "
                              f"got max |s| = {float(np.abs(scales).max())}")
    return AWQCheckpoint(pack_columns(q), pack_columns(zeros), s16, g)


def unpack(ckpt: AWQCheckpoint) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(q uint8 (K, N), scales float16 (G, N), zeros uint8 (G, N))``."""
    require_instance("ckpt", ckpt, AWQCheckpoint)
    n = ckpt.scales.shape[1]
    return unpack_columns(ckpt.qweight, n), ckpt.scales, unpack_columns(ckpt.qzeros, n)


def dequantize(ckpt: AWQCheckpoint) -> np.ndarray:
    """float16 (K, N): ``(q - z[g]) * s[g]`` in fp16 (AutoAWQ ``dequantize_gemm``: the integer
    difference is exact in fp16, then one fp16 multiply)."""
    require_instance("ckpt", ckpt, AWQCheckpoint)
    q, s, z = unpack(ckpt)
    g = ckpt.group_size
    diff = (q.astype(np.int16) - np.repeat(z, g, axis=0).astype(np.int16)).astype(np.float16)
    return diff * np.repeat(s, g, axis=0)
