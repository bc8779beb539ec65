"""llama.cpp's ternary GGUF types (super-blocks of 256 values in {-1, 0, +1} times one fp16 scale): TQ1_0
(base-3 packing, 1.69 bits per value) and TQ2_0 (2 bits per value), dequantized and quantized as ggml does.

Spec
----
    super-block  256 consecutive values of a row (QK_K = 256); one fp16 ``d`` at the end, widened exactly
    value        float32 ``d * t`` (one product), t = trit - 1
    TQ2_0        t = ((qs[32c + j] >> 2l) & 3) - 1 for element e = 128c + 32l + j (c < 2, l < 4, j < 32);
                 code 3 reads as t = +2 (ggml decodes what it finds; its quantizer never writes it)
    TQ1_0        5 trits per byte (4 in the qh bytes), stored as ``ceil(v * 256 / 243)`` of the base-3
                 number v = sum t_k 3^(4-k) (t_0 most significant); trit k comes back as
                 ``((uint8)(byte * 3^k) * 3) >> 8`` (the 8-bit product wraps; that is the trick)
                   qs[0:32]   byte j, trit k -> element 32k + j           (k < 5: elements 0..159)
                   qs[32:48]  byte j, trit k -> element 160 + 16k + j     (k < 5: elements 160..239)
                   qh[0:4]    byte j, trit k -> element 240 + 4k + j      (k < 4: elements 240..255)
    quantize     ggml's ``quantize_row_tq*_0_ref``, float32: ``d = amax``, ``id = d ? 1/d : 0`` (a block whose
                 1/amax overflows, amax below about 2^-128, is refused: its trits are undefined),
                 trit = roundf(x * id) + 1 (C roundf, halves away from zero); d stored rounded to fp16
                 (ties to even, overflow to inf); the trits use the float32 ``id``
    source       ggml/src/ggml-common.h (block_tq1_0, block_tq2_0), ggml/src/ggml-quants.c
                 (``dequantize_row_tq*_0``, ``quantize_row_tq*_0_ref``); goldens: the ``gguf`` package
                 0.19.0 (gguf/quants.py TQ1_0, TQ2_0), tests/formats/data/make_gguf_goldens.py

Block layouts (bytes)::

    TQ1_0 (54) | qs[48]: 5 trits per byte | qh[4]: 4 trits per byte | d f16 |
    TQ2_0 (66) | qs[64]: 4 crumbs per byte, bits 2l..2l+1 = element 128c + 32l + j | d f16 |

One TQ1_0 byte, worked: trits (2, 0, 1, 2, 1) -> v = 2*81 + 0 + 9 + 2*3 + 1 = 178, byte = ceil(178 * 256 / 243)
= 188; trit 0 = (188 * 3) >> 8 = 2; trit 2: (uint8)(188 * 9) = 156, (156 * 3) >> 8 = 1.
"""

from __future__ import annotations

import numpy as np

from refsim._validate import require_choice, require_dtype, require_finite, require_ndim, require_shape
from refsim.errors import FormatRuleError
from refsim.formats.gguf_legacy import _check_blocks, _f16_bytes, _roundf, read_f16

__all__ = ["TERNARY_TYPES", "QUANTIZABLE", "dequantize_blocks", "dequantize_blocks_reference", "quantize_blocks",
           "quantize_blocks_reference"]

QK_K = 256
#: type -> (values per block, bytes per block)
TERNARY_TYPES: dict[str, tuple[int, int]] = {"TQ1_0": (QK_K, 54), "TQ2_0": (QK_K, 66)}
QUANTIZABLE: tuple[str, ...] = ("TQ1_0", "TQ2_0")
_F32 = np.float32
_POW3 = np.array([1, 3, 9, 27, 81], np.uint8)


def _tq1_addresses() -> tuple[np.ndarray, np.ndarray]:
    """(256,) byte index and (256,) trit index k of every TQ1_0 element (the table of the module docstring)."""
    byte, trit = [], []
    for base, nbytes, ntrits in ((0, 32, 5), (32, 16, 5), (48, 4, 4)):
        for k in range(ntrits):
            byte += [base + j for j in range(nbytes)]
            trit += [k] * nbytes
    return np.array(byte), np.array(trit)


_TQ1_BYTE, _TQ1_TRIT = _tq1_addresses()
_E = np.arange(QK_K)
_TQ2_BYTE, _TQ2_SHIFT = 32 * (_E // 128) + _E % 32, 2 * ((_E % 128) // 32)


def dequantize_blocks(blocks: np.ndarray, qtype: str) -> np.ndarray:
    """float32 (B, 256) from uint8 super-blocks (B, 54 or 66) of ``qtype`` (ggml's ``dequantize_row_tq*_0``).
    Any bit pattern is data: an inf or NaN d propagates as IEEE arithmetic does, without warnings."""
    b, qtype = _check_blocks(blocks, qtype, TERNARY_TYPES)
    with np.errstate(invalid="ignore", over="ignore"):
        d = read_f16(b, TERNARY_TYPES[qtype][1] - 2)[:, None]  # (B, 1)
        if qtype == "TQ1_0":
            q = (b[:, _TQ1_BYTE] * _POW3[_TQ1_TRIT]).astype(np.uint8)  # the wrapping 8-bit product
            t = ((q.astype(np.uint16) * 3) >> 8).astype(np.int32) - 1
        else:
            t = ((b[:, _TQ2_BYTE] >> _TQ2_SHIFT) & 3).astype(np.int32) - 1
        return (d * t.astype(_F32)).astype(_F32)


def dequantize_blocks_reference(blocks: np.ndarray, qtype: str) -> np.ndarray:
    """Plain-loop twin of :func:`dequantize_blocks`: ggml's C loops."""
    b, qtype = _check_blocks(blocks, qtype, TERNARY_TYPES)
    out = np.zeros((b.shape[0], QK_K), _F32)
    with np.errstate(invalid="ignore", over="ignore"):
        for i in range(b.shape[0]):
            x = [int(v) for v in b[i]]
            d = read_f16(b[i:i + 1], TERNARY_TYPES[qtype][1] - 2)[0]
            y = []
            if qtype == "TQ1_0":
                for lo, hi, width in ((0, 32, 32), (32, 48, 16)):
                    for n in range(5):
                        for m in range(width):
                            q = (x[lo + m] * 3 ** n) & 0xFF
                            y.append(_F32(_F32((q * 3) >> 8) - 1) * d)
                for n in range(4):
                    for j in range(4):
                        q = (x[48 + j] * 3 ** n) & 0xFF
                        y.append(_F32(_F32((q * 3) >> 8) - 1) * d)
            else:
                for j in range(0, 64, 32):
                    for ll in range(4):
                        y += [_F32(_F32(((x[j + m] >> 2 * ll) & 3) - 1) * d) for m in range(32)]
            out[i] = np.array(y, _F32)
    return out


def _values(x: np.ndarray) -> np.ndarray:
    x = require_dtype("x", x, np.float32)
    require_ndim("x", x, 2)
    require_shape("x", x, (x.shape[0], QK_K))
    x = require_finite("x", x)
    amax = np.abs(x).max(axis=1) if x.size else np.zeros(0, _F32)
    with np.errstate(divide="ignore", over="ignore"):
        bad = (amax > 0) & ~np.isfinite(_F32(1) / amax)
    if bad.any():
        i = int(np.argmax(bad))
        raise FormatRuleError(f"x: a block's largest |x| must be 0 or have a finite float32 1/amax (ggml's and "
                              f"gguf-py's trits are undefined past it); got {float(amax[i])!r} in block {i}")
    return x


def _trits(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """uint8 trits (B, 256) in 0..2 and float32 d (B,): ggml's amax, float32 1/d and roundf."""
    d = np.abs(x).max(axis=1)
    with np.errstate(divide="ignore"):
        idd = np.where(d == 0, _F32(0), _F32(1) / d).astype(_F32)
    return (_roundf((x * idd[:, None]).astype(_F32)).astype(np.int32) + 1).astype(np.uint8), d


def quantize_blocks(x: np.ndarray, qtype: str) -> np.ndarray:
    """uint8 (B, 54 or 66) from float32 x (B, 256), finite: ggml's ``quantize_row_tq*_0_ref`` (what
    ``gguf.quants.quantize`` returns)."""
    qtype = require_choice("qtype", qtype, QUANTIZABLE)
    t, d = _trits(_values(x))
    if qtype == "TQ2_0":
        crumbs = t.reshape(-1, 2, 4, 32).astype(np.uint8) << np.array([0, 2, 4, 6], np.uint8)[:, None]  # (B, c, l, j)
        qs = np.bitwise_or.reduce(crumbs, axis=2).reshape(-1, 64)
        return np.concatenate([qs, _f16_bytes(d)], axis=1)
    w = np.array([81, 27, 9, 3, 1], np.uint16)
    v = np.concatenate([(t[:, :160].reshape(-1, 5, 32) * w[:, None]).sum(axis=1),            # (B, 32)
                        (t[:, 160:240].reshape(-1, 5, 16) * w[:, None]).sum(axis=1),        # (B, 16)
                        (t[:, 240:].reshape(-1, 4, 4) * w[:4, None]).sum(axis=1)], axis=1)  # (B, 4)
    qs = ((v.astype(np.uint16) * 256 + 242) // 243).astype(np.uint8)  # ceil(v * 256 / 243), v <= 242
    return np.concatenate([qs, _f16_bytes(d)], axis=1)


def quantize_blocks_reference(x: np.ndarray, qtype: str) -> np.ndarray:
    """Plain-loop twin of :func:`quantize_blocks` (ggml's C loops, one block at a time)."""
    qtype = require_choice("qtype", qtype, QUANTIZABLE)
    x = _values(x)
    out = []
    for row in x:
        amax = _F32(max(abs(float(v)) for v in row)) if row.size else _F32(0)
        idd = _F32(1) / amax if amax else _F32(0)
        t = [int(_roundf(np.array([_F32(v * idd)]))[0]) + 1 for v in row]
        if qtype == "TQ2_0":
            qs = [sum(t[128 * c + 32 * ll + j] << 2 * ll for ll in range(4)) for c in range(2) for j in range(32)]
        else:
            qs = []
            for lo, width, ntr in ((0, 32, 5), (160, 16, 5), (240, 4, 4)):
                for j in range(width):
                    v = 0
                    for k in range(ntr):
                        v = v * 3 + t[lo + width * k + j]
                    v *= 3 ** (5 - ntr)          # the qh bytes: 4 trits, shifted up as ggml multiplies by 3
                    qs.append((v * 256 + 242) // 243)
        out.append(bytes(qs) + bytes(_f16_bytes(np.array([amax], _F32))[0]))
    return np.frombuffer(b"".join(out), np.uint8).reshape(x.shape[0], TERNARY_TYPES[qtype][1]).copy()
