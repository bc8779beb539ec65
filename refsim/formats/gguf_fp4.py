"""llama.cpp's 4-bit float GGUF types: MXFP4 (E8M0 scale per 32) and NVFP4 (UE4M3 scale per 16, super-blocks of
64), as ggml lays them out and computes them. Elements are e2m1 (:mod:`refsim.formats.minifloat`); the E8M0
scale is :func:`refsim.formats.mx.e8m0_to_float32`'s, read the way ggml reads it.

Spec
----
    elements     e2m1 codes, one per nibble. ggml stores them doubled, as the integers
                 ``kvalues_mxfp4 = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}`` (= 2 * e2m1;
                 code 8, e2m1's -0, is the integer 0, so it dequantizes to +0), and halves every scale
    MXFP4        block of 32: ``e`` (E8M0 byte), then qs[16]: byte j = code of value j | code of j + 16 << 4
                 value = float32 ``2^(e - 128) * kv[code]`` (ggml_e8m0_to_fp32_half, exact): the OCP
                 E8M0 2^(e - 127), halved -- except that ggml has no NaN scale: e = 255 reads as 2^127
                 (products past float32's range are inf)
    NVFP4        super-block of 64: d[4] (one UE4M3 byte per 16 values), then qs[32]: sub-block s owns
                 bytes 8s..8s+7, low nibble = value 16s + j, high nibble = value 16s + 8 + j (j < 8)
                 value = float32 ``ue4m3(d[s]) / 2 * kv[code]`` (exact). UE4M3 (ggml_ue4m3_to_fp32): bit 7
                 is ignored, the low 7 bits read as e4m3's magnitude; the byte 0x7F (e4m3's NaN) reads as
                 0, the byte 0xFF as 1.875 * 2^8 = 480 (ggml decodes the 0x7F pattern only for 0x7F);
                 no per-tensor scale (ggml keeps it outside the block)
    quantize     MXFP4 only (gguf-py 0.19.0 quantizes no NVFP4), as ``gguf.quants.MXFP4.quantize_blocks``:
                   amax = max |x|;  e = amax > 0 ? floor(log2f(amax)) - 2 + 127 : 0, as uint8
                   (log2f is NumPy's float32 log2, which gguf-py calls; the C cast of a negative float,
                   amax < 2^-125, is undefined, gguf-py's NumPy wraps it mod 256 and so does refsim)
                   code = the first k of 0..15 minimising |fl(2^(e-128) * kv[k]) - x| (float32; a tie
                   goes to the lower index: towards zero, and +0 before -0)
    source       ggml/src/ggml-common.h (block_mxfp4, block_nvfp4, kvalues_mxfp4), ggml/src/ggml-impl.h
                 (ggml_e8m0_to_fp32_half, ggml_ue4m3_to_fp32), ggml/src/ggml-quants.c; goldens: the
                 ``gguf`` package 0.19.0 (gguf/quants.py MXFP4, NVFP4), tests/formats/data/make_gguf_goldens.py

Block layouts (bytes)::

    MXFP4 (17) | e u8 | qs[16]: byte j = c[j] | c[j+16] << 4 |
    NVFP4 (36) | d0 d1 d2 d3 (ue4m3) | qs[32]: bytes 8s..8s+7 = c[16s+j] | c[16s+8+j] << 4 |

One MXFP4 block, worked: e = 127 (2^0 halved: 0.5), qs[0] = 0xA7: value 0 = 0.5 * kv[7] = 6.0,
value 16 = 0.5 * kv[10] = -1.0.
"""

from __future__ import annotations

import numpy as np

from refsim._validate import require_choice, require_dtype, require_finite, require_ndim, require_shape
from refsim.formats import minifloat, mx
from refsim.formats.gguf_legacy import _check_blocks

__all__ = ["FP4_TYPES", "QUANTIZABLE", "KVALUES_MXFP4", "e8m0_half", "ue4m3_half", "dequantize_blocks",
           "dequantize_blocks_reference", "quantize_blocks", "quantize_blocks_reference"]

#: type -> (values per block, bytes per block)
FP4_TYPES: dict[str, tuple[int, int]] = {"MXFP4": (32, 17), "NVFP4": (64, 36)}
QUANTIZABLE: tuple[str, ...] = ("MXFP4",)
_F32 = np.float32
#: ggml's ``kvalues_mxfp4``: 2 * e2m1(code), the -0 code as +0 (adding +0.0 turns -0 into +0)
KVALUES_MXFP4 = (_F32(2) * minifloat.decode(np.arange(16, dtype=np.uint8), "e2m1") + _F32(0)).astype(np.int8)
_KV = KVALUES_MXFP4.astype(_F32)
_J = np.arange(64)
_NV_BYTE, _NV_SHIFT = 4 + 8 * (_J // 16) + _J % 8, 4 * ((_J % 16) // 8)
_MX_BYTE, _MX_SHIFT = 1 + _J[:32] % 16, 4 * (_J[:32] // 16)


def e8m0_half(e: np.ndarray) -> np.ndarray:
    """float32 2^(e - 128) from uint8 E8M0 bytes ``e`` (any shape): ggml's ``ggml_e8m0_to_fp32_half``, the
    OCP value halved, with 255 read as 2^127 (ggml has no NaN scale)."""
    e = require_dtype("e", e, np.uint8)
    return np.where(e == 255, _F32(2.0 ** 127), mx.e8m0_to_float32(e) * _F32(0.5)).astype(_F32)


def ue4m3_half(d: np.ndarray) -> np.ndarray:
    """float32 from uint8 UE4M3 bytes ``d`` (any shape): ggml's ``ggml_ue4m3_to_fp32`` (the e4m3 magnitude
    of the low 7 bits, halved; 0x7F -> 0, 0xFF -> 240: see the module docstring)."""
    d = require_dtype("d", d, np.uint8)
    mag = minifloat.decode(d & np.uint8(0x7F), "e4m3")
    mag = np.where((d & 0x7F) == 0x7F, np.where(d == 0x7F, _F32(0), _F32(480)), mag)
    return (mag * _F32(0.5)).astype(_F32)


def dequantize_blocks(blocks: np.ndarray, qtype: str) -> np.ndarray:
    """float32 (B, 32 or 64) from uint8 blocks (B, 17 or 36) of ``qtype`` (ggml's ``dequantize_row_mxfp4`` /
    ``dequantize_row_nvfp4``). Any byte is data; a scale past float32's range gives inf, without warnings."""
    b, qtype = _check_blocks(blocks, qtype, FP4_TYPES)
    with np.errstate(over="ignore", invalid="ignore"):
        if qtype == "MXFP4":
            d = e8m0_half(np.ascontiguousarray(b[:, 0]))[:, None]                 # (B, 1)
            codes = (b[:, _MX_BYTE] >> _MX_SHIFT) & 15                            # (B, 32)
        else:
            d = ue4m3_half(np.ascontiguousarray(b[:, 0:4]))[:, _J // 16]           # (B, 64)
            codes = (b[:, _NV_BYTE] >> _NV_SHIFT) & 15                            # (B, 64)
        return (d * _KV[codes]).astype(_F32)


def dequantize_blocks_reference(blocks: np.ndarray, qtype: str) -> np.ndarray:
    """Plain-loop twin of :func:`dequantize_blocks`: ggml's C loops, scales decoded from their bits."""
    b, qtype = _check_blocks(blocks, qtype, FP4_TYPES)
    out = np.zeros((b.shape[0], FP4_TYPES[qtype][0]), _F32)
    kv = [int(v) for v in KVALUES_MXFP4]
    with np.errstate(over="ignore"):
        for i in range(b.shape[0]):
            x = [int(v) for v in b[i]]
            if qtype == "MXFP4":
                e = x[0]
                bits = 0x00200000 << e if e < 2 else (e - 1) << 23          # ggml_e8m0_to_fp32_half
                d = np.uint32(bits).view(_F32)
                for j in range(16):
                    out[i, j] = _F32(kv[x[1 + j] & 15]) * d
                    out[i, j + 16] = _F32(kv[x[1 + j] >> 4]) * d
            else:
                for s in range(4):
                    u = x[s]
                    ex, man = (u >> 3) & 15, u & 7                           # ggml_ue4m3_to_fp32
                    raw = man * 2.0 ** -9 if ex == 0 else (1 + man / 8) * 2.0 ** (ex - 7)
                    d = _F32(0) if u in (0, 0x7F) else _F32(raw * 0.5)
                    for j in range(8):
                        q = x[4 + 8 * s + j]
                        out[i, 16 * s + j] = d * _F32(kv[q & 15])
                        out[i, 16 * s + 8 + j] = d * _F32(kv[q >> 4])
    return out


def _values(x: np.ndarray) -> np.ndarray:
    x = require_dtype("x", x, np.float32)
    require_ndim("x", x, 2)
    require_shape("x", x, (x.shape[0], 32))
    return require_finite("x", x)


def _exponent(amax: np.ndarray) -> np.ndarray:
    """uint8 E8M0 bytes from float32 amax (B,): floor(log2f(amax)) - 2 + 127, mod 256; 0 for amax = 0."""
    with np.errstate(divide="ignore"):
        f = np.floor(np.log2(amax.astype(_F32))).astype(_F32)
    f = np.where(amax > 0, f, _F32(0)).astype(np.int64)            # log2(0) = -inf never reaches the cast
    return np.where(amax > 0, (f - 2 + 127) & 0xFF, 0).astype(np.uint8)


def quantize_blocks(x: np.ndarray, qtype: str) -> np.ndarray:
    """uint8 (B, 17) from float32 x (B, 32), finite: gguf-py's MXFP4 quantizer (the only ``qtype`` of
    :data:`QUANTIZABLE`), nearest of the 16 scaled kvalues, ties to the lower index."""
    require_choice("qtype", qtype, QUANTIZABLE)
    x = _values(x)
    e = _exponent(np.abs(x).max(axis=1))
    d = e8m0_half(e)
    with np.errstate(over="ignore", invalid="ignore"):
        err = np.abs((d[:, None, None] * _KV).astype(_F32) - x[:, :, None])  # (B, 32, 16)
    c = np.argmin(err, axis=2).astype(np.uint8)                                   # first minimum
    return np.concatenate([e[:, None], c[:, :16] | (c[:, 16:] << 4)], axis=1)


def quantize_blocks_reference(x: np.ndarray, qtype: str) -> np.ndarray:
    """Plain-loop twin of :func:`quantize_blocks` (one value at a time, a strict ``<`` keeping the first)."""
    require_choice("qtype", qtype, QUANTIZABLE)
    x = _values(x)
    out = np.zeros((x.shape[0], 17), np.uint8)
    for i, row in enumerate(x):
        amax = _F32(max(abs(float(v)) for v in row))
        e = int(_exponent(np.array([amax], _F32))[0])
        d = e8m0_half(np.array([e], np.uint8))[0]
        codes = []
        for v in row:
            best, best_err = 0, None
            for k in range(16):
                with np.errstate(over="ignore", invalid="ignore"):
                    err = abs(_F32(_F32(d * _KV[k]) - v))
                if best_err is None or err < best_err:
                    best, best_err = k, err
            codes.append(best)
        out[i, 0] = e
        out[i, 1:] = [codes[j] | codes[j + 16] << 4 for j in range(16)]
    return out
