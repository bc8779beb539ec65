"""llama.cpp's GGUF legacy block types (ggml's blocks of 32): Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, and
the F16/BF16 passthroughs, as ggml lays them out (ggml-common.h) and computes them (ggml-quants.c).

Spec
----
    block        32 consecutive values of a row (a row's length must be a multiple of 32); little-endian
    fp16 fields  ``d`` (scale) and ``m`` (min) are IEEE half; read as ``fl32(d)`` (exact)
    value        float32 arithmetic in ggml's order, unfused (see the FMA note below):
                 Q4_0  ``(q - 8) * d``         Q4_1  ``q * d + m``
                 Q5_0  ``(q - 16) * d``        Q5_1  ``q * d + m``
                 Q8_0  ``q * d`` (q int8)      IQ4_NL ``d * kvalues[q]`` (a 16-entry int8 table)
                 F16   exact widening          BF16  bits << 16
    element      nibble packing of the 4-bit types: byte j holds element j in its LOW nibble and element
    order        j + 16 in its HIGH nibble (not 2j, 2j+1); Q5's fifth bits: bit j of the little-endian
                 uint32 ``qh`` belongs to element j (j = 0..31)
    quantize     ggml's ``quantize_row_*_ref`` (as gguf-py reproduces them), float32 throughout:
                 Q4_0/Q5_0  ``max`` = the value of largest |x| (the first one), ``d = max / -8`` (-16),
                            ``id = d ? 1/d : 0``, ``q = min(15, trunc(x*id + 8.5))`` (31, 16.5)
                 Q4_1/Q5_1  ``d = (max - min) / 15`` (31), ``q = min(15, trunc((x - min)*id + 0.5))``
                 Q8_0       ``d = amax / 127``, ``q = roundf(x * id)`` (halves away from zero)
                 ``d`` and ``min`` are stored rounded to fp16 (ties to even, overflow to inf); the codes use
                 the float32 ``id``, not the stored d
    source       ggml/src/ggml-common.h (block structs), ggml/src/ggml-quants.c (``dequantize_row_*``,
                 ``quantize_row_*_ref``); goldens: the ``gguf`` package 0.19.0 (gguf/quants.py),
                 tests/formats/data/make_gguf_goldens.py

FMA note: ggml's C writes ``x*d + m``; a compiler that contracts it into a fused multiply-add (GCC's
default ``-ffp-contract=fast`` with FMA enabled) rounds once instead of twice. refsim follows the
unfused order, as gguf-py computes it.

Block layouts (bytes)::

    Q4_0  (18) | d f16 | qs[16]: byte j = q[j] | q[j+16] << 4 |
    Q4_1  (20) | d f16 | m f16 | qs[16] |
    Q5_0  (22) | d f16 | qh u32 (bit j = bit 4 of q[j]) | qs[16] (low 4 bits, as Q4_0) |
    Q5_1  (24) | d f16 | m f16 | qh u32 | qs[16] |
    Q8_0  (34) | d f16 | qs[32] int8 |
    IQ4_NL(18) | d f16 | qs[16] (indices into kvalues, nibbles as Q4_0) |

One Q4_0 block: d = 0x3800 (0.5), qs[0] = 0xF3: element 0 = (3 - 8) * 0.5 = -2.5, element 16 =
(15 - 8) * 0.5 = 3.5.
"""

from __future__ import annotations

import numpy as np

from refsim._validate import require_choice, require_dtype, require_finite, require_int, require_ndim, require_shape
from refsim.arith.fp import cvt_f32_to_bf16
from refsim.errors import ShapeError

__all__ = [
    "LEGACY_TYPES",
    "QUANTIZABLE",
    "KVALUES_IQ4NL",
    "read_f16",
    "dequantize_blocks",
    "dequantize_blocks_reference",
    "quantize_blocks",
    "quantize_blocks_reference",
]

#: type -> (values per block, bytes per block)
LEGACY_TYPES: dict[str, tuple[int, int]] = {
    "Q4_0": (32, 18), "Q4_1": (32, 20), "Q5_0": (32, 22), "Q5_1": (32, 24), "Q8_0": (32, 34),
    "IQ4_NL": (32, 18), "F16": (1, 2), "BF16": (1, 2),
}
QUANTIZABLE: tuple[str, ...] = ("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "F16", "BF16")
#: ggml's ``kvalues_iq4nl``: the 16 non-uniform levels of IQ4_NL and IQ4_XS
KVALUES_IQ4NL = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113], np.int8)

_F32 = np.float32


def read_f16(blocks: np.ndarray, offset: int) -> np.ndarray:
    """float32 (B,): the little-endian fp16 field at byte ``offset`` of each row of uint8 ``blocks``
    (B, bytes per block), widened exactly (ggml's ``GGML_FP16_TO_FP32``)."""
    b = require_dtype("blocks", blocks, np.uint8)
    require_ndim("blocks", b, 2)
    off = require_int("offset", offset, minimum=0)
    if off + 2 > b.shape[1]:
        raise ShapeError(f"offset: a 2-byte field must lie inside a block of {b.shape[1]} bytes; got {off}")
    return np.ascontiguousarray(b[:, off:off + 2]).view("<f2")[:, 0].astype(_F32)


def _nibbles(qs: np.ndarray) -> np.ndarray:
    """(B, 32) codes from (B, 16) bytes: the low nibbles are elements 0..15, the high ones 16..31."""
    return np.concatenate([qs & 15, qs >> 4], axis=1)


def _fifth_bits(qh: np.ndarray) -> np.ndarray:
    """(B, 32) 0/1: bit j of the little-endian uint32 in (B, 4) bytes."""
    word = np.ascontiguousarray(qh).view("<u4")  # (B, 1)
    return ((word >> np.arange(32, dtype=np.uint32)) & 1).astype(np.uint8)


def _check_blocks(blocks: np.ndarray, qtype: str, types: dict[str, tuple[int, int]]) -> tuple[np.ndarray, str]:
    """The rule every GGUF type module applies to its input: ``qtype`` a name of ``types`` (type -> (values
    per block, bytes per block)), ``blocks`` uint8 (B, bytes per block of ``qtype``). Returns (blocks, qtype)."""
    qtype = require_choice("qtype", qtype, tuple(types))
    blocks = require_dtype("blocks", blocks, np.uint8)
    require_ndim("blocks", blocks, 2)
    require_shape("blocks", blocks, (blocks.shape[0], types[qtype][1]))
    return blocks, qtype


def dequantize_blocks(blocks: np.ndarray, qtype: str) -> np.ndarray:
    """float32 (B, values per block) from uint8 blocks (B, bytes per block) of a legacy ``qtype``
    (ggml's ``dequantize_row_*``). Any bit pattern
    is data: an inf or NaN scale propagates as IEEE arithmetic does, without warnings."""
    with np.errstate(invalid="ignore", over="ignore"):
        return _dequantize_blocks(blocks, qtype)


def _dequantize_blocks(blocks: np.ndarray, qtype: str) -> np.ndarray:
    b, qtype = _check_blocks(blocks, qtype, LEGACY_TYPES)
    if qtype == "F16":
        return np.ascontiguousarray(b).view("<f2").astype(_F32)
    if qtype == "BF16":
        return (np.ascontiguousarray(b).view("<u2").astype(np.uint32) << 16).view(_F32)
    d = read_f16(b, 0)[:, None]  # (B, 1)
    if qtype in ("Q4_0", "IQ4_NL"):
        q = _nibbles(b[:, 2:18])
        if qtype == "IQ4_NL":
            return (d * KVALUES_IQ4NL[q].astype(_F32)).astype(_F32)
        return ((q.astype(np.int32) - 8).astype(_F32) * d).astype(_F32)
    if qtype == "Q8_0":
        return (b[:, 2:34].view(np.int8).astype(_F32) * d).astype(_F32)
    if qtype == "Q5_0":
        q = _nibbles(b[:, 6:22]) | (_fifth_bits(b[:, 2:6]) << 4)
        return ((q.astype(np.int32) - 16).astype(_F32) * d).astype(_F32)
    m = read_f16(b, 2)[:, None]
    q = _nibbles(b[:, 4:20]) if qtype == "Q4_1" else _nibbles(b[:, 8:24]) | (_fifth_bits(b[:, 4:8]) << 4)
    return ((q.astype(_F32) * d).astype(_F32) + m).astype(_F32)


def dequantize_blocks_reference(blocks: np.ndarray, qtype: str) -> np.ndarray:
    """Plain-loop twin of :func:`dequantize_blocks`, written from ggml's C loops. Any bit pattern
    is data: an inf or NaN scale propagates as IEEE arithmetic does, without warnings."""
    with np.errstate(invalid="ignore", over="ignore"):
        return _dequantize_blocks_reference(blocks, qtype)


def _dequantize_blocks_reference(blocks: np.ndarray, qtype: str) -> np.ndarray:
    b, qtype = _check_blocks(blocks, qtype, LEGACY_TYPES)
    qk = LEGACY_TYPES[qtype][0]
    y = np.zeros((b.shape[0], qk), _F32)
    for i in range(b.shape[0]):
        row = bytes(b[i])
        if qtype in ("F16", "BF16"):
            bits = row[0] | row[1] << 8
            y[i, 0] = (np.uint16(bits).view(np.float16).astype(_F32) if qtype == "F16"
                       else np.uint32(bits << 16).view(_F32))
            continue
        d = _F32(np.frombuffer(row[0:2], "<f2")[0])
        m = _F32(np.frombuffer(row[2:4], "<f2")[0]) if qtype in ("Q4_1", "Q5_1") else None
        if qtype == "Q8_0":
            for j in range(32):
                y[i, j] = _F32(_F32(np.int8(np.uint8(row[2 + j]).view(np.int8))) * d)
            continue
        qs_at = {"Q4_0": 2, "IQ4_NL": 2, "Q4_1": 4, "Q5_0": 6, "Q5_1": 8}[qtype]
        qh = int.from_bytes(row[qs_at - 4:qs_at], "little") if qtype in ("Q5_0", "Q5_1") else 0
        for j in range(16):
            lo, hi = row[qs_at + j] & 0x0F, row[qs_at + j] >> 4
            if qtype == "IQ4_NL":
                y[i, j], y[i, j + 16] = _F32(d * _F32(KVALUES_IQ4NL[lo])), _F32(d * _F32(KVALUES_IQ4NL[hi]))
                continue
            if qtype in ("Q5_0", "Q5_1"):
                lo |= ((qh >> j) << 4) & 0x10  # xh_0
                hi |= (qh >> (j + 12)) & 0x10  # xh_1: bit j + 16
            if qtype in ("Q4_1", "Q5_1"):
                y[i, j], y[i, j + 16] = _F32(_F32(_F32(lo) * d) + m), _F32(_F32(_F32(hi) * d) + m)
            else:
                off = 8 if qtype == "Q4_0" else 16
                y[i, j], y[i, j + 16] = _F32(_F32(lo - off) * d), _F32(_F32(hi - off) * d)
    return y


def _check_values(x: np.ndarray, qtype: str) -> np.ndarray:
    x = require_dtype("x", x, np.float32)
    require_ndim("x", x, 2)
    require_shape("x", x, (x.shape[0], LEGACY_TYPES[qtype][0]))
    return require_finite("x", x)


def _roundf(v: np.ndarray) -> np.ndarray:
    """C ``roundf`` of float32 ``v``: halves away from zero, exactly (gguf-py's ``np_roundf``). Not
    ``floor(|v| + 0.5)``: for 0.49999997 that sum rounds up to 1.0 in float32, where roundf gives 0."""
    a = np.abs(v).astype(_F32)
    f = np.floor(a)
    return (np.sign(v) * (f + np.floor(_F32(2) * (a - f)))).astype(_F32)  # a - f and 2*(a - f) are exact


def _f16_bytes(v: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return v.astype("<f2").reshape(-1, 1).view(np.uint8)  # (B, 2)


def quantize_blocks(x: np.ndarray, qtype: str) -> np.ndarray:
    """uint8 (B, bytes per block) from float32 x (B, values per block): ggml's ``quantize_row_*_ref``
    for ``qtype`` in :data:`QUANTIZABLE`. x must be finite."""
    qtype = require_choice("qtype", qtype, QUANTIZABLE)
    x = _check_values(x, qtype)
    if qtype == "F16":
        return _f16_bytes(x[:, 0])
    if qtype == "BF16":
        bits = cvt_f32_to_bf16(np.ascontiguousarray(x[:, 0])).view(np.uint16).astype("<u2")  # (B,)
        return bits.reshape(-1, 1).view(np.uint8)  # (B, 2) little-endian
    with np.errstate(divide="ignore", over="ignore"):
        if qtype in ("Q4_0", "Q5_0"):
            nmax = _F32(-8) if qtype == "Q4_0" else _F32(-16)
            mx = np.take_along_axis(x, np.abs(x).argmax(axis=1)[:, None], axis=1)[:, 0]  # (B,): the first
            mx = np.where(mx == 0, _F32(0), mx)  # largest |x|; all zeros keep ggml's initial max = +0
            d = (mx / nmax).astype(_F32)
            idd = np.where(d == 0, _F32(0), _F32(1) / d).astype(_F32)
            q = np.minimum(np.trunc((x * idd[:, None]).astype(_F32) + (-nmax + _F32(0.5))), -2 * nmax - 1)
            head = [_f16_bytes(d)]
        elif qtype in ("Q4_1", "Q5_1"):
            # the first occurrence of the min and of the max, as ggml's strict < / > scan keeps (signed zeros)
            mn = np.take_along_axis(x, (x == x.min(axis=1)[:, None]).argmax(axis=1)[:, None], axis=1)[:, 0]
            mx = np.take_along_axis(x, (x == x.max(axis=1)[:, None]).argmax(axis=1)[:, None], axis=1)[:, 0]
            top = _F32(15) if qtype == "Q4_1" else _F32(31)
            d = ((mx - mn) / top).astype(_F32)
            idd = np.where(d == 0, _F32(0), _F32(1) / d).astype(_F32)
            q = np.minimum(np.trunc(((x - mn[:, None]) * idd[:, None]).astype(_F32) + _F32(0.5)), top)
            head = [_f16_bytes(d), _f16_bytes(mn)]
        else:  # Q8_0
            d = (np.abs(x).max(axis=1) / _F32(127)).astype(_F32)
            idd = np.where(d == 0, _F32(0), _F32(1) / d).astype(_F32)
            q = _roundf((x * idd[:, None]).astype(_F32))
            return np.concatenate([_f16_bytes(d), q.astype(np.int8).view(np.uint8)], axis=1)
    q = q.astype(np.uint8)  # (B, 32)
    qs = (q[:, :16] & 15) | ((q[:, 16:] & 15) << 4)
    if qtype in ("Q5_0", "Q5_1"):
        bits = (q >> 4).astype(np.uint32) << np.arange(32, dtype=np.uint32)
        head.append(np.bitwise_or.reduce(bits, axis=1).astype("<u4").reshape(-1, 1).view(np.uint8))
    return np.concatenate(head + [qs], axis=1).astype(np.uint8)


def quantize_blocks_reference(x: np.ndarray, qtype: str) -> np.ndarray:
    """Plain-loop twin of :func:`quantize_blocks`, written from ggml's ``quantize_row_*_ref``."""
    qtype = require_choice("qtype", qtype, QUANTIZABLE)
    x = _check_values(x, qtype)
    out = []
    for row in x:
        if qtype in ("F16", "BF16"):
            v = np.array([row[0]], _F32)
            out.append(bytes(_f16_bytes(v)[0]) if qtype == "F16" else
                       int(cvt_f32_to_bf16(v).view(np.uint16)[0]).to_bytes(2, "little"))
            continue
        with np.errstate(divide="ignore", over="ignore"):
            if qtype in ("Q4_0", "Q5_0", "Q8_0"):
                amax, mx = _F32(0), _F32(0)
                for v in row:
                    if amax < abs(v):
                        amax, mx = abs(v), v
                div = {"Q4_0": _F32(-8), "Q5_0": _F32(-16), "Q8_0": _F32(127)}[qtype]
                d = _F32((amax if qtype == "Q8_0" else mx) / div)
                idd = _F32(1) / d if d != 0 else _F32(0)
                if qtype == "Q8_0":
                    qs = [int(np.int8(_roundf(np.array([_F32(v * idd)]))[0])) & 0xFF for v in row]
                    out.append(bytes(_f16_bytes(np.array([d]))[0]) + bytes(qs))
                    continue
                q = [min(int(-div) * 2 - 1, int(_F32(_F32(v * idd) + _F32(-div + _F32(0.5))))) for v in row]
                head = bytes(_f16_bytes(np.array([d]))[0])
            else:
                mn, mx = _F32(np.finfo(_F32).max), _F32(-np.finfo(_F32).max)
                for v in row:
                    mn = v if v < mn else mn
                    mx = v if v > mx else mx
                top = 15 if qtype == "Q4_1" else 31
                d = _F32(_F32(mx - mn) / _F32(top))
                idd = _F32(1) / d if d != 0 else _F32(0)
                q = [min(top, int(_F32(_F32(_F32(v - mn) * idd) + _F32(0.5)))) for v in row]
                head = bytes(_f16_bytes(np.array([d]))[0]) + bytes(_f16_bytes(np.array([mn], _F32))[0])
        if qtype in ("Q5_0", "Q5_1"):
            head += sum(((q[j] >> 4) & 1) << j for j in range(32)).to_bytes(4, "little")
        out.append(head + bytes((q[j] & 15) | ((q[j + 16] & 15) << 4) for j in range(16)))
    return np.frombuffer(b"".join(out), np.uint8).reshape(x.shape[0], LEGACY_TYPES[qtype][1]).copy()
