"""llama.cpp's GGUF k-quants (super-blocks of 256 values): Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, and IQ4_XS,
dequantized as ggml's ``dequantize_row_*`` computes them (read only: gguf-py quantizes none of them).

Spec
----
    super-block  256 consecutive values of a row (QK_K = 256); sub-blocks of 16 (Q2_K, Q3_K, Q6_K) or 32
                 (Q4_K, Q5_K, IQ4_XS) values, each with its own small integer scale (and min)
    fp16 fields  ``d`` (and ``dmin``), widened exactly to float32
    value        float32, ggml's order, unfused (the FMA note of gguf_legacy applies to ``dl*q - ml``):
                 Q2_K  ``fl(d*(sc & 15)) * q - fl(dmin*(sc >> 4))``        q 2-bit, sub-block 16
                 Q3_K  ``fl(d*(s6 - 32)) * (q2 - (hbit ? 0 : 4))``         s6 6-bit, sub-block 16
                 Q4_K  ``fl(d*sc) * q - fl(dmin*m)``                        sc, m 6-bit, sub-block 32
                 Q5_K  ``fl(d*sc) * (q4 + 16*hbit) - fl(dmin*m)``
                 Q6_K  ``fl(d*sc) * (q6 - 32)``                             sc int8, sub-block 16
                 IQ4_XS ``fl(d*(s6 - 32)) * kvalues[q]``                     s6 6-bit, sub-block 32
    element      e in [0, 256); h = e // 128, j = (e % 128) // 32, l = e % 32:
    addresses    Q2_K   q = qs[32h + l] >> 2j & 3;  scale byte scales[e // 16]
                 Q3_K   q2 = qs[32h + l] >> 2j & 3; hbit = hmask[l] >> (4h + j) & 1; scale e // 16
                 Q4_K   q = qs[32(e // 64) + l] >> 4((e // 32) % 2) & 15;  scale/min e // 32
                 Q5_K   as Q4_K, hbit = qh[l] >> (e // 32) & 1
                 Q6_K   low 4 = ql[64h + l + 32(j % 2)] >> 4(j // 2); high 2 = qh[32h + l] >> 2j & 3;
                        scale scales[e // 16]
                 IQ4_XS q = qs[16(e // 32) + (e % 16)] >> 4((e % 32) // 16) & 15 (nibbles as IQ4_NL)
    source       ggml/src/ggml-common.h (block_q*_K, block_iq4_xs), ggml/src/ggml-quants.c
                 (``dequantize_row_q*_K``, ``get_scale_min_k4``, ``dequantize_row_iq4_xs``);
                 goldens: the ``gguf`` package 0.19.0, tests/formats/data/make_gguf_goldens.py

The 6-bit scales and mins of Q4_K/Q5_K (12 bytes for 8 sub-blocks; ``get_scale_min_k4``)::

    byte  0..3   | m-hi of sc4..7 (2) | sc0..3 (6) |      sub-block s < 4: sc = b[s] & 63, m = b[s+4] & 63
    byte  4..7   | m-hi of m4..7  (2) | m0..3  (6) |      s >= 4:  sc = b[s+4] & 15 | (b[s-4] >> 6) << 4
    byte  8..11  | m4..7 low (4)      | sc4..7 low (4) |           m = b[s+4] >> 4  | (b[s]   >> 6) << 4

Q3_K's 16 scales in 12 bytes: low 4 bits of scale s in byte s % 8 (nibble s // 8), high 2 bits in byte
8 + s % 4 at bits 2(s // 4); the 6-bit value minus 32 is the signed scale.

Block sizes (bytes): Q2_K 84 (scales 16 | qs 64 | d | dmin), Q3_K 110 (hmask 32 | qs 64 | scales 12 | d),
Q4_K 144 (d | dmin | scales 12 | qs 128), Q5_K 176 (d | dmin | scales 12 | qh 32 | qs 128),
Q6_K 210 (ql 128 | qh 64 | scales 16 int8 | d), IQ4_XS 136 (d | scales_h u16 | scales_l 4 | qs 128).

One Q4_K super-block, worked: d = 1.0, dmin = 0.5, scales bytes 0..3 = 2 (sc0..3), bytes 4..7 = 3
(m0..3), qs[0] = 0x75: element 0 = fl(1*2) * 5 - fl(0.5*3) = 8.5, element 32 = 2 * 7 - 1.5 = 12.5.
"""

from __future__ import annotations

import numpy as np

from refsim._validate import require_dtype, require_ndim, require_shape
from refsim.formats.gguf_legacy import KVALUES_IQ4NL, _check_blocks, read_f16

__all__ = ["KQUANT_TYPES", "scale_min_k4", "dequantize_blocks", "dequantize_blocks_reference"]

QK_K = 256
#: type -> (values per block, bytes per block)
KQUANT_TYPES: dict[str, tuple[int, int]] = {
    "Q2_K": (QK_K, 84), "Q3_K": (QK_K, 110), "Q4_K": (QK_K, 144), "Q5_K": (QK_K, 176), "Q6_K": (QK_K, 210),
    "IQ4_XS": (QK_K, 136),
}
_F32 = np.float32
_E = np.arange(QK_K)
_H, _J, _L = _E // 128, (_E % 128) // 32, _E % 32


def scale_min_k4(scales: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """uint8 (B, 8) scales and (B, 8) mins from the 12 packed bytes (B, 12) of Q4_K/Q5_K, exactly as
    ggml's ``get_scale_min_k4`` unpacks them (diagram in the module docstring)."""
    b = require_dtype("scales", scales, np.uint8)
    require_ndim("scales", b, 2)
    require_shape("scales", b, (b.shape[0], 12))
    sc = np.concatenate([b[:, 0:4] & 63, (b[:, 8:12] & 15) | ((b[:, 0:4] >> 6) << 4)], axis=1)
    mn = np.concatenate([b[:, 4:8] & 63, (b[:, 8:12] >> 4) | ((b[:, 4:8] >> 6) << 4)], axis=1)
    return sc.astype(np.uint8), mn.astype(np.uint8)


def _scales_q3(b: np.ndarray) -> np.ndarray:
    """int32 (B, 16): Q3_K's 6-bit scales minus 32 (the aux[] shuffle of dequantize_row_q3_K)."""
    s = np.arange(16)
    lo = (b[:, s % 8] >> (4 * (s // 8))) & 15
    hi = (b[:, 8 + s % 4] >> (2 * (s // 4))) & 3
    return (lo | (hi << 4)).astype(np.int32) - 32


def dequantize_blocks(blocks: np.ndarray, qtype: str) -> np.ndarray:
    """float32 (B, 256) from uint8 super-blocks (B, bytes per block) of a k-quant ``qtype``. Any bit pattern
    is data: an inf or NaN scale propagates as IEEE arithmetic does, without warnings."""
    with np.errstate(invalid="ignore", over="ignore"):
        return _dequantize_blocks(blocks, qtype)


def _dequantize_blocks(blocks: np.ndarray, qtype: str) -> np.ndarray:
    b, qtype = _check_blocks(blocks, qtype, KQUANT_TYPES)
    if qtype == "Q2_K":
        d, dmin = read_f16(b, 80)[:, None], read_f16(b, 82)[:, None]
        sc = b[:, 0:16][:, _E // 16]  # (B, 256)
        q = (b[:, 16:80][:, 32 * _H + _L] >> (2 * _J)) & 3
        dl, ml = (d * (sc & 15).astype(_F32)).astype(_F32), (dmin * (sc >> 4).astype(_F32)).astype(_F32)
        return ((dl * q.astype(_F32)).astype(_F32) - ml).astype(_F32)
    if qtype == "Q3_K":
        d = read_f16(b, 108)[:, None]
        q2 = ((b[:, 32:96][:, 32 * _H + _L] >> (2 * _J)) & 3).astype(np.int32)
        hbit = (b[:, 0:32][:, _L] >> (4 * _H + _J)) & 1
        dl = (d * _scales_q3(b[:, 96:108])[:, _E // 16].astype(_F32)).astype(_F32)
        return (dl * (q2 - np.where(hbit == 1, 0, 4)).astype(_F32)).astype(_F32)
    if qtype in ("Q4_K", "Q5_K"):
        d, dmin = read_f16(b, 0)[:, None], read_f16(b, 2)[:, None]
        sc, mn = scale_min_k4(b[:, 4:16])
        qs = b[:, 16:144] if qtype == "Q4_K" else b[:, 48:176]
        q = (qs[:, 32 * (_E // 64) + _L] >> (4 * ((_E // 32) % 2))) & 15
        if qtype == "Q5_K":
            q = q | (((b[:, 16:48][:, _L] >> (_E // 32)) & 1) << 4)
        dl = (d * sc[:, _E // 32].astype(_F32)).astype(_F32)
        ml = (dmin * mn[:, _E // 32].astype(_F32)).astype(_F32)
        return ((dl * q.astype(_F32)).astype(_F32) - ml).astype(_F32)
    if qtype == "Q6_K":
        d = read_f16(b, 208)[:, None]
        lo = (b[:, 0:128][:, 64 * _H + _L + 32 * (_J % 2)] >> (4 * (_J // 2))) & 15
        hi = (b[:, 128:192][:, 32 * _H + _L] >> (2 * _J)) & 3
        q = (lo | (hi << 4)).astype(np.int32) - 32
        dl = (d * b[:, 192:208].view(np.int8)[:, _E // 16].astype(_F32)).astype(_F32)
        return (dl * q.astype(_F32)).astype(_F32)
    # IQ4_XS
    d = read_f16(b, 0)[:, None]
    ib = _E // 32
    sh = np.ascontiguousarray(b[:, 2:4]).view("<u2")  # (B, 1)
    ls = ((b[:, 4:8][:, ib // 2] >> (4 * (ib % 2))) & 15) | (((sh >> (2 * ib)) & 3) << 4).astype(np.uint8)
    q = (b[:, 8:136][:, 16 * ib + _E % 16] >> (4 * ((_E % 32) // 16))) & 15
    dl = (d * (ls.astype(np.int32) - 32).astype(_F32)).astype(_F32)
    return (dl * KVALUES_IQ4NL[q].astype(_F32)).astype(_F32)


def dequantize_blocks_reference(blocks: np.ndarray, qtype: str) -> np.ndarray:
    """Plain-loop twin of :func:`dequantize_blocks`: ggml's C loops, pointer walks and all. Any bit pattern
    is data: an inf or NaN scale propagates as IEEE arithmetic does, without warnings."""
    with np.errstate(invalid="ignore", over="ignore"):
        return _dequantize_blocks_reference(blocks, qtype)


def _dequantize_blocks_reference(blocks: np.ndarray, qtype: str) -> np.ndarray:
    b, qtype = _check_blocks(blocks, qtype, KQUANT_TYPES)
    out = np.zeros((b.shape[0], QK_K), _F32)
    for i in range(b.shape[0]):
        x, y = [int(v) for v in b[i]], []
        f16 = lambda off: _F32(np.frombuffer(bytes(x[off:off + 2]), "<f2")[0])  # noqa: E731
        if qtype == "Q2_K":
            d, mn, is_ = f16(80), f16(82), 0
            for n in range(0, QK_K, 128):
                q = x[16 + n // 4:16 + n // 4 + 32]
                for j in range(4):
                    for half in (0, 16):
                        sc = x[is_]
                        is_ += 1
                        dl, ml = _F32(d * _F32(sc & 0xF)), _F32(mn * _F32(sc >> 4))
                        y += [_F32(_F32(dl * _F32((q[l + half] >> 2 * j) & 3)) - ml) for l in range(16)]
        elif qtype == "Q3_K":
            d, scales, m = f16(108), _scales_q3(b[i:i + 1, 96:108])[0], 1
            for n in range(0, QK_K, 128):
                q = x[32 + n // 4:32 + n // 4 + 32]
                for j in range(4):
                    for half in (0, 16):
                        dl = _F32(d * _F32(scales[j * 2 + half // 16 + 8 * (n // 128)]))
                        y += [_F32(dl * _F32(((q[l + half] >> 2 * j) & 3) - (0 if x[l + half] & m else 4)))
                              for l in range(16)]
                    m <<= 1
        elif qtype in ("Q4_K", "Q5_K"):
            d, mn = f16(0), f16(2)
            sc, mm = (v[0] for v in scale_min_k4(b[i:i + 1, 4:16]))
            ql0 = 16 if qtype == "Q4_K" else 48
            u1, u2 = 1, 2
            for g in range(4):
                ql = x[ql0 + 32 * g:ql0 + 32 * g + 32]
                d1, m1 = _F32(d * _F32(sc[2 * g])), _F32(mn * _F32(mm[2 * g]))
                d2, m2 = _F32(d * _F32(sc[2 * g + 1])), _F32(mn * _F32(mm[2 * g + 1]))
                h1 = [16 if qtype == "Q5_K" and x[16 + l] & u1 else 0 for l in range(32)]
                h2 = [16 if qtype == "Q5_K" and x[16 + l] & u2 else 0 for l in range(32)]
                y += [_F32(_F32(d1 * _F32((ql[l] & 0xF) + h1[l])) - m1) for l in range(32)]
                y += [_F32(_F32(d2 * _F32((ql[l] >> 4) + h2[l])) - m2) for l in range(32)]
                u1, u2 = u1 << 2, u2 << 2
        elif qtype == "Q6_K":
            d, blk = f16(208), [0.0] * QK_K
            sc = [int(np.uint8(v).view(np.int8)) for v in x[192:208]]
            for n in range(0, QK_K, 128):
                ql, qh, s = x[n // 2:n // 2 + 64], x[128 + n // 4:128 + n // 4 + 32], sc[n // 16:n // 16 + 8]
                for l in range(32):
                    is_ = l // 16
                    q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32
                    q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32
                    q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32
                    q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32
                    for k, qv in enumerate((q1, q2, q3, q4)):
                        blk[n + l + 32 * k] = _F32(_F32(d * _F32(s[is_ + 2 * k])) * _F32(qv))
            y = blk
        else:  # IQ4_XS
            d, sh = f16(0), x[2] | x[3] << 8
            for ib in range(8):
                ls = ((x[4 + ib // 2] >> 4 * (ib % 2)) & 0xF) | (((sh >> 2 * ib) & 3) << 4)
                dl = _F32(d * _F32(ls - 32))
                qs = x[8 + 16 * ib:8 + 16 * ib + 16]
                y += [_F32(dl * _F32(KVALUES_IQ4NL[qs[j] & 0xF])) for j in range(16)]
                y += [_F32(dl * _F32(KVALUES_IQ4NL[qs[j] >> 4])) for j in range(16)]
        out[i] = np.array(y, _F32)
    return out
