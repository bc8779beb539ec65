"""llama.cpp's lattice ("i-quant") GGUF types: IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M
(super-blocks of 256), dequantized as ggml's ``dequantize_row_iq*`` computes them. Read only: their
quantizers search the lattice with an importance matrix, and gguf-py quantizes none of them.

Spec
----
    grids        each group of 8 (IQ2_*, IQ1_*) or 4 (IQ3_*) values is one row of a fixed table of ggml's
                 (ggml-common.h ``iq2xxs_grid`` ...), the row picked by an index stored in the block.
                 The tables are data: refsim/data/gguf_iq_grids/gguf_iq_grids.npz, copied from the gguf
                 package 0.19.0 (gguf/quants.py, decoded by its ``init_grid``) by
                 tests/formats/data/make_gguf_iq_grids.py (:func:`grid` reads them)
    signs        IQ2_XXS/IQ2_XS/IQ3_XXS: a 7-bit index into ``ksigns_iq2xs`` (:func:`ksigns`: the 7 bits
                 plus an 8th making the count of set bits even); bit j set negates value j of the group of
                 8. IQ2_S/IQ3_S: one explicit sign bit per value. IQ1_*: no signs (the grid is -1, 0, 1)
    fp16 d       widened exactly; IQ1_M has no d field: its 16 bits are the top nibbles of its 4 scale words
    value        float32, ggml's order, unfused (sub-block scale s of 4 or 3 bits):
                 IQ2_XXS  db = fl(fl(d * (0.5 + s)) * 0.25);  fl(db * grid) * sign      s: 32 values
                 IQ2_XS   as IQ2_XXS                                                  s: 16 values
                 IQ2_S    as IQ2_XXS                                                  s: 16 values
                 IQ3_XXS  db = fl(fl(d * (0.5 + s)) * 0.5);   fl(db * grid) * sign       s: 32 values
                 IQ3_S    db = fl(d * (1 + 2s));              fl(db * grid) * sign       s: 32 values
                 IQ1_S    dl = fl(d * (2s + 1));  fl(dl * (grid + delta)), delta = +-0.125   s: 32 values
                 IQ1_M    as IQ1_S                                                    s: 16 values
    source       ggml/src/ggml-common.h (block_iq*, the grids, ksigns_iq2xs), ggml/src/ggml-quants.c
                 (``dequantize_row_iq*``); goldens: the ``gguf`` package 0.19.0 (gguf/quants.py),
                 tests/formats/data/make_gguf_goldens.py

Block layouts (bytes; g = group of 8 values, e = value index 0..255)::

    IQ2_XXS (66)  | d f16 | 8 x (aux0 u32: 4 grid bytes, one per g | aux1 u32: 4 x 7-bit signs, s in bits 28..31) |
    IQ2_XS  (74)  | d f16 | qs u16[32]: grid index bits 0..8, sign index bits 9..15 | scales[8]: 2 x 4 bits |
    IQ2_S   (82)  | d f16 | qs[32]: grid low 8 | signs[32]: bit j of byte g | qh[8]: grid bits 8..9, 2 per g |
                  | scales[8] |
    IQ3_XXS (98)  | d f16 | qs[64]: grid index per 4 values | 8 x u32: 4 x 7-bit signs, s in bits 28..31 |
    IQ3_S  (110)  | d f16 | qs[64]: grid low 8 | qh[8]: grid bit 8, 1 per 4 values | signs[32] | scales[4] |
    IQ1_S   (50)  | d f16 | qs[32]: grid low 8 | qh u16[8]: 3 grid bits per g, s bits 12..14, delta sign 15 |
    IQ1_M   (56)  | qs[32] | qh[16]: per g a nibble: 3 grid bits, delta sign bit 3 |
                  | scales u16[4]: 4 x 3-bit s, top nibble = 4 bits of d |

One IQ2_XXS group, worked: d = 1.0, aux1 = 3 << 28 (s = 3, sign index 0), grid byte 0 -> iq2xxs_grid[0],
whose bytes are all 0x08: db = 1.0 * 3.5 * 0.25 = 0.875, values 0..7 = 0.875 * 8 = 7.0.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

import numpy as np

from refsim._validate import require_choice
from refsim.formats.gguf_legacy import _check_blocks, read_f16

__all__ = ["IQUANT_TYPES", "GRIDS", "grid", "ksigns", "dequantize_blocks", "dequantize_blocks_reference"]

QK_K = 256
#: type -> (values per block, bytes per block)
IQUANT_TYPES: dict[str, tuple[int, int]] = {
    "IQ2_XXS": (QK_K, 66), "IQ2_XS": (QK_K, 74), "IQ2_S": (QK_K, 82), "IQ3_XXS": (QK_K, 98), "IQ3_S": (QK_K, 110),
    "IQ1_S": (QK_K, 50), "IQ1_M": (QK_K, 56),
}
#: type -> the name of its grid in gguf_iq_grids.npz (ggml's ``<name>_grid``)
GRIDS: dict[str, str] = {"IQ2_XXS": "iq2xxs", "IQ2_XS": "iq2xs", "IQ2_S": "iq2s", "IQ3_XXS": "iq3xxs",
                         "IQ3_S": "iq3s", "IQ1_S": "iq1s", "IQ1_M": "iq1s"}
_F32 = np.float32
_E = np.arange(QK_K)


@lru_cache(maxsize=None)
def _grids() -> dict[str, np.ndarray]:
    path = resources.files("refsim.data").joinpath("gguf_iq_grids", "gguf_iq_grids.npz")
    with resources.as_file(path) as p, np.load(p) as z:
        out = {k: z[k] for k in z.files if k != "versions"}
    for v in out.values():
        v.setflags(write=False)
    return out


def grid(qtype: str) -> np.ndarray:
    """The read-only lattice of ``qtype``: uint8 (rows, 8) for IQ2_*, uint8 (rows, 4) for IQ3_*, int8
    (2048, 8) of -1/0/1 for IQ1_* -- ggml's ``<name>_grid`` bytes, one per value (see :data:`GRIDS`)."""
    return _grids()[GRIDS[require_choice("qtype", qtype, tuple(IQUANT_TYPES))]]


def ksigns() -> np.ndarray:
    """uint8 (128,): ggml's ``ksigns_iq2xs``, generated: entry i is i with bit 7 set when i has an odd number
    of set bits (every group of 8 signs has an even count of minus signs)."""
    i = np.arange(128)
    parity = np.array([bin(v).count("1") & 1 for v in range(128)])
    return (i | parity << 7).astype(np.uint8)


_KSIGNS = ksigns()


def _check(blocks: np.ndarray, qtype: str) -> tuple[np.ndarray, str]:
    blocks, qtype = _check_blocks(blocks, qtype, IQUANT_TYPES)
    return np.ascontiguousarray(blocks), qtype


def _u32(b: np.ndarray, lo: int, hi: int) -> np.ndarray:
    return np.ascontiguousarray(b[:, lo:hi]).view("<u4").astype(np.uint32)  # (B, (hi - lo) / 4)


def _u16(b: np.ndarray, lo: int, hi: int) -> np.ndarray:
    return np.ascontiguousarray(b[:, lo:hi]).view("<u2").astype(np.uint32)  # (B, (hi - lo) / 2)


def _sign_bits(idx7: np.ndarray) -> np.ndarray:
    """(B, 256) 0/1 from (B, 32) 7-bit sign indices, one per group of 8 (bit e % 8 of ksigns[idx])."""
    return (_KSIGNS[idx7][:, _E // 8] >> (_E % 8)) & 1


def dequantize_blocks(blocks: np.ndarray, qtype: str) -> np.ndarray:
    """float32 (B, 256) from uint8 super-blocks (B, bytes per block) of an IQ ``qtype`` (ggml's
    ``dequantize_row_iq*``). Any bit pattern is data: an inf or NaN d propagates as IEEE arithmetic
    does, without warnings."""
    b, qtype = _check(blocks, qtype)
    with np.errstate(invalid="ignore", over="ignore"):
        return _dequantize(b, qtype)


def _signed(db: np.ndarray, g: np.ndarray, neg: np.ndarray) -> np.ndarray:
    """fl(db * grid) * (+-1): (B, 256) each; a product by -1, not a negation (a NaN keeps its sign bit)."""
    return ((db * g.astype(_F32)).astype(_F32) * np.where(neg == 1, _F32(-1), _F32(1))).astype(_F32)


def _dequantize(b: np.ndarray, qtype: str) -> np.ndarray:
    G = grid(qtype)
    if qtype in ("IQ2_XXS", "IQ3_XXS"):
        d = read_f16(b, 0)[:, None]
        if qtype == "IQ2_XXS":
            words = _u32(b, 2, 66).reshape(-1, 8, 2)                     # (B, ib32, aux0/aux1)
            aux1 = words[:, :, 1]
            gidx = b[:, 2:66].reshape(-1, 8, 8)[:, :, :4].reshape(-1, 32)  # (B, g): the 4 bytes of aux0
            g = G[gidx[:, _E // 8], _E % 8]
            half = _F32(0.25)
        else:
            aux1 = _u32(b, 66, 98)                                       # (B, 8)
            g = G[b[:, 2:66][:, _E // 4], _E % 4]
            half = _F32(0.5)
        s = (aux1 >> 28).astype(_F32)                                    # (B, 8)
        db = ((d * (_F32(0.5) + s)).astype(_F32) * half).astype(_F32)[:, _E // 32]
        idx7 = ((aux1[:, :, None] >> np.array([0, 7, 14, 21], np.uint32)) & 127).reshape(-1, 32)
        return _signed(db, g, _sign_bits(idx7))
    if qtype == "IQ2_XS":
        d = read_f16(b, 0)[:, None]
        qs = _u16(b, 2, 66)                                              # (B, 32)
        s = ((b[:, 66:74][:, _E // 32] >> (4 * ((_E // 16) % 2))) & 15).astype(_F32)
        db = ((d * (_F32(0.5) + s)).astype(_F32) * _F32(0.25)).astype(_F32)
        g = G[(qs & 511)[:, _E // 8], _E % 8]
        return _signed(db, g, _sign_bits(qs >> 9))
    if qtype == "IQ2_S":
        d = read_f16(b, 0)[:, None]
        gi = _E // 8
        idx = b[:, 2:34][:, gi].astype(np.int64) | (((b[:, 66:74][:, gi // 4] >> (2 * (gi % 4))) & 3).astype(np.int64) << 8)
        s = ((b[:, 74:82][:, _E // 32] >> (4 * ((_E // 16) % 2))) & 15).astype(_F32)
        db = ((d * (_F32(0.5) + s)).astype(_F32) * _F32(0.25)).astype(_F32)
        neg = (b[:, 34:66][:, gi] >> (_E % 8)) & 1
        return _signed(db, G[idx, _E % 8], neg)
    if qtype == "IQ3_S":
        d = read_f16(b, 0)[:, None]
        q4 = _E // 4
        idx = b[:, 2:66][:, q4].astype(np.int64) | (((b[:, 66:74][:, q4 // 8] >> (q4 % 8)) & 1).astype(np.int64) << 8)
        s = ((b[:, 106:110][:, _E // 64] >> (4 * ((_E // 32) % 2))) & 15).astype(np.int32)
        db = (d * (1 + 2 * s).astype(_F32)).astype(_F32)
        neg = (b[:, 74:106][:, _E // 8] >> (_E % 8)) & 1
        return _signed(db, G[idx, _E % 4], neg)
    # IQ1_S, IQ1_M: fl(dl * (grid + delta))
    gi = _E // 8
    if qtype == "IQ1_S":
        d = read_f16(b, 0)[:, None]
        qh = _u16(b, 34, 50)                                             # (B, 8): one word per 32 values
        h = qh[:, _E // 32]
        idx = b[:, 2:34][:, gi].astype(np.int64) | (((h >> (3 * (gi % 4))) & 7).astype(np.int64) << 8)
        dl = (d * (2 * ((h >> 12) & 7) + 1).astype(_F32)).astype(_F32)
        neg_delta = (h >> 15) & 1
    else:
        sc = _u16(b, 48, 56)                                             # (B, 4)
        dbits = (sc[:, 0] >> 12) | ((sc[:, 1] >> 8) & 0xF0) | ((sc[:, 2] >> 4) & 0xF00) | (sc[:, 3] & 0xF000)
        d = dbits.astype(np.uint16).view("<f2").astype(_F32)[:, None]
        t = _E // 16
        s = (sc[:, t // 4] >> (3 * (t % 4))) & 7
        dl = (d * (2 * s + 1).astype(_F32)).astype(_F32)
        nib = (b[:, 32:48][:, gi // 2] >> (4 * (gi % 2))) & 15
        idx = b[:, 0:32][:, gi].astype(np.int64) | ((nib & 7).astype(np.int64) << 8)
        neg_delta = (nib >> 3) & 1
    delta = np.where(neg_delta == 1, _F32(-0.125), _F32(0.125))
    return (dl * (G[idx, _E % 8].astype(_F32) + delta)).astype(_F32)


def dequantize_blocks_reference(blocks: np.ndarray, qtype: str) -> np.ndarray:
    """Plain-loop twin of :func:`dequantize_blocks`: ggml's C loops, one group at a time."""
    b, qtype = _check(blocks, qtype)
    with np.errstate(invalid="ignore", over="ignore"):
        return _dequantize_reference(b, qtype)


def _dequantize_reference(b: np.ndarray, qtype: str) -> np.ndarray:
    G, KS = [[int(v) for v in r] for r in grid(qtype)], [int(v) for v in _KSIGNS]
    out = np.zeros((b.shape[0], QK_K), _F32)
    for i in range(b.shape[0]):
        x = [int(v) for v in b[i]]
        u16 = lambda o: x[o] | x[o + 1] << 8  # noqa: E731
        u32 = lambda o: u16(o) | u16(o + 2) << 16  # noqa: E731
        d = _F32(np.frombuffer(bytes(x[0:2]), "<f2")[0]) if qtype != "IQ1_M" else None
        y = []

        def put(db, vals, sign_bits):
            y.extend(_F32(db * _F32(v)) * (_F32(-1) if sign_bits >> j & 1 else _F32(1)) for j, v in enumerate(vals))

        for ib32 in range(8):
            if qtype in ("IQ2_XXS", "IQ3_XXS"):
                if qtype == "IQ2_XXS":
                    aux1, grid_bytes = u32(2 + 8 * ib32 + 4), x[2 + 8 * ib32:2 + 8 * ib32 + 4]
                    db = _F32(_F32(d * _F32(0.5 + (aux1 >> 28))) * _F32(0.25))
                    for l in range(4):
                        put(db, G[grid_bytes[l]], KS[(aux1 >> 7 * l) & 127])
                else:
                    aux1, q3 = u32(66 + 4 * ib32), x[2 + 8 * ib32:2 + 8 * ib32 + 8]
                    db = _F32(_F32(d * _F32(0.5 + (aux1 >> 28))) * _F32(0.5))
                    for l in range(4):
                        put(db, G[q3[2 * l]] + G[q3[2 * l + 1]], KS[(aux1 >> 7 * l) & 127])
            elif qtype in ("IQ2_XS", "IQ2_S"):
                sc = x[(66 if qtype == "IQ2_XS" else 74) + ib32]
                for half in range(2):
                    db = _F32(_F32(d * _F32(0.5 + ((sc >> 4 * half) & 15))) * _F32(0.25))
                    for l in range(2 * half, 2 * half + 2):
                        if qtype == "IQ2_XS":
                            q = u16(2 + 2 * (4 * ib32 + l))
                            put(db, G[q & 511], KS[q >> 9])
                        else:
                            q = x[2 + 4 * ib32 + l] | ((x[66 + ib32] >> 2 * l) & 3) << 8
                            put(db, G[q], x[34 + 4 * ib32 + l])
            elif qtype == "IQ3_S":
                db = _F32(d * _F32(1 + 2 * ((x[106 + ib32 // 2] >> 4 * (ib32 % 2)) & 15)))
                for l in range(4):
                    q1 = x[2 + 8 * ib32 + 2 * l] | ((x[66 + ib32] >> 2 * l) & 1) << 8
                    q2 = x[2 + 8 * ib32 + 2 * l + 1] | ((x[66 + ib32] >> (2 * l + 1)) & 1) << 8
                    put(db, G[q1] + G[q2], x[74 + 4 * ib32 + l])
            elif qtype == "IQ1_S":
                qh = u16(34 + 2 * ib32)
                dl = _F32(d * _F32(2 * ((qh >> 12) & 7) + 1))
                delta = _F32(-0.125) if qh & 0x8000 else _F32(0.125)
                for l in range(4):
                    g = G[x[2 + 4 * ib32 + l] | ((qh >> 3 * l) & 7) << 8]
                    y.extend(_F32(dl * _F32(_F32(v) + delta)) for v in g)
            else:  # IQ1_M
                sc = [u16(48 + 2 * k) for k in range(4)]
                dbits = (sc[0] >> 12) | (sc[1] >> 8) & 0xF0 | (sc[2] >> 4) & 0xF00 | sc[3] & 0xF000
                d = _F32(np.frombuffer(dbits.to_bytes(2, "little"), "<f2")[0])
                w = sc[ib32 // 2]
                for l in range(4):
                    s = (w >> (6 * (ib32 % 2) + 3 * (l // 2))) & 7
                    dl = _F32(d * _F32(2 * s + 1))
                    nib = (x[32 + 2 * ib32 + l // 2] >> 4 * (l % 2)) & 15
                    delta = _F32(-0.125) if nib & 8 else _F32(0.125)
                    g = G[x[4 * ib32 + l] | (nib & 7) << 8]
                    y.extend(_F32(dl * _F32(_F32(v) + delta)) for v in g)
        out[i] = np.array(y, _F32)
    return out
