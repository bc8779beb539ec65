"""Bit-matrix transposes that turn bitplane words into table indices, with operation counts.

Spec block
----------
input            b uint32 words q[0..b-1], one per plane (q[0] = MSB plane), all for the same 32
                 weights of one lane (see :mod:`refsim.formats.bitplane`): bit ``31 - 8*y - e``
                 of q[pl] is plane pl of weight (block y = 0..3, position e = 0..7).
canonical output uint8 (..., 32) codes in weight order ``8*y + e`` (``codes_reference``)
methods          reference   bit by bit, no tricks (the oracle)
                 swar        the paper's SIMD-within-a-register transpose (Fig. 8; official
                             ``dequant<bits, *>`` in dequant.cuh): a word is 32/s sub-vectors of
                             s = 2, 4 or 8 bits, s the next power of two >= b; output word m
                             collects bit m of every sub-vector:
                                 q_w[m] = OR_pl shift(q[pl] & mask_s(m), m - pl - (s - b))
                             (mask_4(m) = 0x88888888 >> m, mask_8(m) = 0x80808080 >> m,
                             positive shift = <<, negative = >>), so each s-bit lane of q_w[m]
                             holds one right-aligned code.
                 hd8x8       Hacker's Delight 8x8 bit-matrix transpose (Warren 2012, sec. 7-3,
                             the 32-bit "transpose8rS32" shape: three delta-swap stages on two
                             32-bit halves) applied to 8-row blocks gathered from the planes.
op counting      every AND, OR, XOR and non-zero shift applied to a whole uint32 is one op (what
                 the C source writes, before nvcc fuses ops into LOP3/SHF); loads, stores and
                 shifts by 0 are not counted.  ``ops_per_32_weights`` exposes the numbers.
table lookups    scalar: one lookup per weight, index = one byte of a transposed word.
                 merged pairs (3-bit always, 4-bit when M >= 2 in the kernel): one lookup per two
                 weights into a 2**(2b)-entry table of (C[h], C[l]) pairs, index ``h << b | l``.
source           github:SNU-ARC/any-precision-llm @ a3257d02740cc5757c78673da534b0630ff3a4ea,
                 any_precision/modules/kernels/dequant.cuh (dequant<3|4, true|false>,
                 dequant<5..8, false>) and matmul.cuh (pair table build and lookup).

Nibble path (b = 4, s = 4), one 8-bit slice of the words::

    q[0]  a0 a1 a2 a3 a4 a5 a6 a7        a = MSB plane of weights e = 0..7 of one block
    q[1]  b0 b1 ...                       (b, c, d the lower planes)
    q_w[0] = q0&M0 | (q1&M0)>>1 | (q2&M0)>>2 | (q3&M0)>>3   ->  a0 b0 c0 d0 a4 b4 c4 d4
    q_w[1] = (q0&M1)<<1 | q1&M1 | (q2&M1)>>1 | (q3&M1)>>2   ->  a1 b1 c1 d1 a5 b5 c5 d5
    each output byte = (code[e = m] << 4) | code[e = m + 4]   -- already a pair-table index
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from refsim._validate import (require_array, require_bits, require_bool, require_choice, require_dtype, require_instance,
                              require_int, require_shape)
from refsim.errors import DtypeError, FormatRuleError, ShapeError


__all__ = [
    "TRANSPOSE_BITS",
    "OpCounter",
    "codes_reference",
    "codes_reference_loop",
    "transpose_swar",
    "swar_to_codes",
    "split_nibbles",
    "merge_pairs_3bit",
    "transpose_hd8x8",
    "hd8x8_core",
    "METHODS",
    "ops_per_32_weights",
    "lookup_ops_per_vector",
    "lookups_per_32_weights",
    "uses_pair_table",
    "pair_table",
    "pair_table_reference",
    "lookup_scalar",
    "lookup_pairs",
]

TRANSPOSE_BITS = (2, 3, 4, 5, 6, 7, 8)  # the SWAR method covers 2..8; the kernel ships 3..8


_OPS = ("and", "or", "xor", "shift")


@dataclass(frozen=True)
class OpCounter:
    """Counts bitwise operations applied to whole 32-bit words (per lane). ``counts`` maps each
    of "and", "or", "xor", "shift" to a count >= 0; the counter adds to its own copy."""

    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(_OPS, 0))

    def __post_init__(self):
        counts = require_instance("counts", self.counts, dict)
        if sorted(counts) != sorted(_OPS):
            raise FormatRuleError(f"counts: must map exactly {list(_OPS)}; got keys {sorted(map(str, counts))}")
        object.__setattr__(self, "counts", {op: require_int(f"counts[{op!r}]", counts[op], minimum=0) for op in _OPS})

    @property
    def total(self) -> int:
        """All counted operations."""
        return sum(self.counts.values())

    def and_(self, a, m):
        """``a & m`` (m a Python int mask or a uint32 array), counted once."""
        self.counts["and"] += 1
        return a & np.uint32(m) if np.isscalar(m) else a & m

    def or_(self, a, b):
        """``a | b``, counted once."""
        self.counts["or"] += 1
        return a | b

    def xor(self, a, b):
        """``a ^ b``, counted once."""
        self.counts["xor"] += 1
        return a ^ b

    def shift(self, a, d: int):
        """``a << d`` for d > 0, ``a >> -d`` for d < 0; d == 0 is free (not emitted)."""
        if d == 0:
            return a
        self.counts["shift"] += 1
        return (a << np.uint32(d)) if d > 0 else (a >> np.uint32(-d))


def _check_planes(q: np.ndarray, bits: int) -> np.ndarray:
    q = require_dtype("q", q, np.uint32)
    if q.ndim < 1 or q.shape[0] != bits:
        raise ShapeError(f"q: leading dimension must be the {bits} planes; got shape {q.shape}")
    return q


def codes_reference(q: np.ndarray, bits: int) -> np.ndarray:
    """The oracle: codes of the 32 weights held by b plane words, in weight order 8*y + e.

    q: uint32 (bits, ...) (q[0] = MSB plane).  Returns uint8 (..., 32).  Vectorised over the
    trailing dimensions; bit ``31 - s`` of every plane word is weight s.
    """
    bits = require_bits(bits, TRANSPOSE_BITS)
    q = _check_planes(q, bits)
    s = np.arange(32, dtype=np.uint32)
    planes = (q[..., None] >> (np.uint32(31) - s)) & np.uint32(1)  # (b, ..., 32)
    codes = np.zeros(q.shape[1:] + (32,), dtype=np.uint32)
    for pl in range(bits):
        codes |= planes[pl] << np.uint32(bits - 1 - pl)
    return codes.astype(np.uint8)


def codes_reference_loop(q: np.ndarray, bits: int) -> np.ndarray:
    """Plain-loop twin of :func:`codes_reference` for one lane: q uint32 (bits,) -> uint8 (32,)."""
    bits = require_bits(bits, TRANSPOSE_BITS)
    q = _check_planes(q, bits)
    require_shape("q", q, (bits,))
    out = np.zeros(32, dtype=np.uint8)
    for y in range(4):
        for e in range(8):
            c = 0
            for pl in range(bits):
                c = (c << 1) | ((int(q[pl]) >> (31 - 8 * y - e)) & 1)
            out[8 * y + e] = c
    return out


def _sub_width(bits: int) -> int:
    return 2 if bits <= 2 else 4 if bits <= 4 else 8


def transpose_swar(q: np.ndarray, bits: int, counter: OpCounter | None = None) -> np.ndarray:
    """The paper's SWAR transpose (official ``dequant`` without the split/merge step).

    q: uint32 (bits, ...).  Returns uint32 (s, ...), s = 2/4/8 the sub-vector width: word m holds,
    in each s-bit lane (lane n at bits s*n .. s*n+s-1, counted from the LSB), the right-aligned
    code of the weight whose plane bits sit at bit ``s*n + s - 1 - m``.
    """
    bits = require_bits(bits, TRANSPOSE_BITS)
    q = _check_planes(q, bits)
    c = _counter(counter)
    s = _sub_width(bits)
    top = sum(1 << (s * n + s - 1) for n in range(32 // s))  # 0x88888888 for s = 4
    out = []
    for m in range(s):
        mask = top >> m
        acc = None
        for pl in range(bits):
            term = c.shift(c.and_(q[pl], mask), m - pl - (s - bits))
            acc = term if acc is None else c.or_(acc, term)
        out.append(acc)
    return np.stack(out)


def swar_to_codes(q_w: np.ndarray, bits: int) -> np.ndarray:
    """Decode :func:`transpose_swar` output to canonical codes uint8 (..., 32) (not counted)."""
    bits = require_bits(bits, TRANSPOSE_BITS)
    s = _sub_width(bits)
    q_w, _ = _check_words("q_w", q_w, s, None)
    codes = np.zeros(q_w.shape[1:] + (32,), dtype=np.uint8)
    for m in range(s):
        for n in range(32 // s):
            weight = 31 - (s * n + s - 1 - m)  # bit position -> weight order 8*y + e
            codes[..., weight] = (q_w[m] >> np.uint32(s * n)) & np.uint32((1 << s) - 1)
    return codes


def _counter(counter) -> OpCounter:
    """The caller's OpCounter, or a fresh one for ``None``."""
    if counter is None:
        return OpCounter()
    return require_instance("counter", counter, OpCounter, "OpCounter or None")


def _check_words(name: str, q_w, leading: int | None, counter) -> tuple[np.ndarray, "OpCounter"]:
    """uint32 words with ``leading`` rows (None: any), and an OpCounter or None (a fresh one)."""
    q_w = require_dtype(name, q_w, np.uint32)
    if leading is not None and (q_w.ndim < 1 or q_w.shape[0] != leading):
        raise ShapeError(f"{name}: leading dimension must be {leading}; got shape {q_w.shape}")
    return q_w, _counter(counter)


def split_nibbles(q_w: np.ndarray, counter: OpCounter | None = None) -> np.ndarray:
    """Scalar-LUT step for the nibble path: 4 words of nibble codes -> 8 words of byte codes.

    Returns uint32 (8, ...): word e's byte y (little-endian) = code of weight (block 3-y, e).
    Official order: ``q_w[m+4] = q_w[m] & 0x0f0f0f0f`` then ``q_w[m] = (q_w[m] >> 4) & ...``.
    """
    q_w, c = _check_words("q_w", q_w, 4, counter)
    lo = [c.and_(q_w[m], 0x0F0F0F0F) for m in range(4)]
    hi = [c.and_(c.shift(q_w[m], -4), 0x0F0F0F0F) for m in range(4)]
    return np.stack(hi + lo)


def merge_pairs_3bit(q_w: np.ndarray, counter: OpCounter | None = None) -> np.ndarray:
    """3-bit pair merge: each byte ``0hhh0lll`` -> 6-bit index ``hhhlll`` (4 ops per word).

    q_w: uint32 (4, ...) from :func:`transpose_swar` with bits = 3.  Returns uint32 (4, ...).
    """
    q_w, c = _check_words("q_w", q_w, 4, counter)
    return np.stack([c.or_(c.and_(v, 0x0F0F0F0F), c.shift(c.and_(v, 0xF0F0F0F0), -1)) for v in q_w])


def hd8x8_core(x: np.ndarray, y: np.ndarray, counter: OpCounter | None = None):
    """Hacker's Delight 8x8 transpose of the matrix whose rows 0..3 are the bytes of x (MSB
    first) and rows 4..7 the bytes of y; bit 7 of a row byte is column 0.  Returns (x', y') with
    the transposed rows in the same places.  Three delta-swap stages (7, 14, then 4 across x/y).
    x, y: uint32 words (NumPy scalars or arrays) of one shape.
    """
    words = []
    for name, v in (("x", x), ("y", y)):
        if not isinstance(v, (np.ndarray, np.uint32)) or v.dtype != np.uint32:
            raise DtypeError(f"{name}: must be uint32 words; got {type(v).__name__} {getattr(v, 'dtype', '')}")
        words.append(v if isinstance(v, np.uint32) else require_array(name, v))
    x, y = words
    if np.shape(x) != np.shape(y):
        raise ShapeError(f"y: must have the shape of x {np.shape(x)}; got {np.shape(y)}")
    c = _counter(counter)
    for d, mask in ((7, 0x00AA00AA), (14, 0x0000CCCC)):
        t = c.and_(c.xor(x, c.shift(x, -d)), mask)
        x = c.xor(c.xor(x, t), c.shift(t, d))
        t = c.and_(c.xor(y, c.shift(y, -d)), mask)
        y = c.xor(c.xor(y, t), c.shift(t, d))
    t = c.or_(c.and_(x, 0xF0F0F0F0), c.and_(c.shift(y, -4), 0x0F0F0F0F))
    y = c.or_(c.and_(c.shift(x, 4), 0xF0F0F0F0), c.and_(y, 0x0F0F0F0F))
    return t, y


def transpose_hd8x8(q: np.ndarray, bits: int, counter: OpCounter | None = None) -> np.ndarray:
    """Bitplane words -> codes with 8x8 Hacker's Delight transposes (the paper's baseline).

    Each 8x8 block has rows = (plane, block y) bytes and columns = the 8 weights of a block, so
    one transpose handles 8 // b blocks when b <= 4 (two blocks for b = 4: the paper's "apply the
    8x8 transpose twice" per 32 weights) and one block for b = 5..8 (four transposes).  Rows are
    gathered with one AND and one shift per byte placed (counted), and every transposed row is
    the codes of one weight position for the blocks it covers.  Returns uint8 (..., 32).
    """
    bits = require_bits(bits, TRANSPOSE_BITS)
    q = _check_planes(q, bits)
    c = _counter(counter)
    per = 8 // bits if bits <= 4 else 1  # blocks per transpose
    width = 8 // per  # bits of a code slot in a transposed row (4 for b = 3, 4)
    codes = np.zeros(q.shape[1:] + (32,), dtype=np.uint8)
    for first in range(0, 4, per):
        rows = []  # 8 row bytes, each already shifted to its place in x (rows 0-3) or y (4-7)
        for r in range(8):
            blk, pl = divmod(r, width)
            pl -= width - bits  # top width-bits rows of a slot are zero padding
            if pl < 0 or first + blk >= 4:
                continue
            y = first + blk
            src_shift = 24 - 8 * y  # byte y of the plane word
            dst_shift = 24 - 8 * (r % 4)
            byte = c.and_(q[pl], 0xFF << src_shift)
            rows.append((r // 4, c.shift(byte, dst_shift - src_shift)))
        half = [None, None]
        for h, v in rows:
            half[h] = v if half[h] is None else c.or_(half[h], v)
        zero = np.zeros(q.shape[1:], dtype=np.uint32)
        x, y = hd8x8_core(half[0] if half[0] is not None else zero,
                          half[1] if half[1] is not None else zero, c)
        # transposed row e (byte 3 - e%4 of x or y) = bits of rows 0..7 for weight position e
        for e in range(8):
            word = x if e < 4 else y
            row = (word >> np.uint32(24 - 8 * (e % 4))) & np.uint32(0xFF)  # decode, not counted
            for blk in range(per):
                if first + blk < 4:
                    val = (row >> np.uint32(8 - width * (blk + 1))) & np.uint32((1 << width) - 1)
                    codes[..., 8 * (first + blk) + e] = val
    return codes


METHODS = ("swar", "swar_scalar", "swar_pair", "hd8x8")


def ops_per_32_weights(method: str, bits: int) -> int:
    """Bitwise operations per lane per 32 weights (one word of each of ``bits`` planes).

    method: ``"swar"`` transpose only; ``"swar_scalar"`` transpose + the scalar-LUT byte split
    (nibble path b = 3, 4; b >= 5 needs no split); ``"swar_pair"`` transpose + pair merge (b = 3:
    +16; b = 4: +0; only b = 3, 4); ``"hd8x8"`` the Hacker's Delight baseline including row
    gathering.  Counted by running the method once with an :class:`OpCounter`.
    Known values: swar 3/4/5/6/7/8 bits = 29/40/107/130/153/176; swar_scalar 3/4 = 41/52.
    """
    require_choice("method", method, METHODS)
    bits = require_bits(bits, (3, 4) if method == "swar_pair" else TRANSPOSE_BITS)
    q = np.zeros((bits,), dtype=np.uint32)
    c = OpCounter()
    if method == "hd8x8":
        transpose_hd8x8(q, bits, c)
        return c.total
    q_w = transpose_swar(q, bits, c)
    if method == "swar_scalar" and _sub_width(bits) == 4:
        split_nibbles(q_w, c)
    if method == "swar_pair" and bits == 3:
        merge_pairs_3bit(q_w, c)
    return c.total


def lookup_ops_per_vector(merged: bool) -> int:
    """The paper's index-computation count per 32-bit vector of eight 3-bit indices (Fig. 9).

    Unmerged: 8 lookups x (shift, mask, add base) = 24.  Merged pairs: 4 lookups x 3 = 12, plus
    4 to rearrange the word (our :func:`merge_pairs_3bit` is exactly AND, AND, shift, OR) = 16.
    """
    merged = require_bool("merged", merged)
    lookups = 4 if merged else 8
    return 3 * lookups + (4 if merged else 0)


def uses_pair_table(bits: int, m: int) -> bool:
    """Whether the official fused kernel uses the merged pair table: b = 3, or b = 4 with M >= 2.
    bits 3..8 (the kernel's widths), m >= 1."""
    bits = require_bits(bits, TRANSPOSE_BITS)
    m = require_int("m", m, minimum=1)
    return bits == 3 or (bits == 4 and m > 1)


def lookups_per_32_weights(bits: int, m: int) -> int:
    """Shared-memory table lookups per lane per 32 weights in ``matmul_kbit`` (16 or 32)."""
    bits = require_bits(bits, TRANSPOSE_BITS)
    return 16 if uses_pair_table(bits, m) else 32


def _check_lut(lut: np.ndarray, bits: int) -> np.ndarray:
    lut = require_dtype("lut", lut, np.float16)
    if lut.ndim != 2 or lut.shape[1] != (1 << bits):
        raise ShapeError(f"lut: shape must be (N, {1 << bits}); got {lut.shape}")
    return lut


def pair_table(lut: np.ndarray, bits: int) -> np.ndarray:
    """Merged pair table: float16 (N, 2**(2b), 2) with ``table[r, h << b | l] = (C[h], C[l])``.

    lut: float16 (N, 2**b).  Entry [..., 0] is the half2 ``.x`` (low half), [..., 1] ``.y``.
    64 entries (256 B/row) for 3 bits, 256 entries (1 KiB/row) for 4 bits.
    """
    bits = require_bits(bits, (3, 4))
    lut = _check_lut(lut, bits)
    n = lut.shape[0]
    hi = np.repeat(lut, 1 << bits, axis=1)  # (N, 2^2b): C[h] for index h*2^b + l
    lo = np.tile(lut, (1, 1 << bits))  # (N, 2^2b): C[l]
    return np.stack([hi, lo], axis=2).reshape(n, 1 << (2 * bits), 2)


def pair_table_reference(lut: np.ndarray, bits: int) -> np.ndarray:
    """Plain-loop twin of :func:`pair_table`, in the kernel's build order (lane t: l = t mod 2^b)."""
    bits = require_bits(bits, (3, 4))
    lut = _check_lut(lut, bits)
    nc = 1 << bits
    out = np.empty((lut.shape[0], nc * nc, 2), dtype=np.float16)
    for r in range(lut.shape[0]):
        for h in range(nc):
            for lo in range(nc):
                out[r, h * nc + lo, 0] = lut[r, h]
                out[r, h * nc + lo, 1] = lut[r, lo]
    return out


def lookup_scalar(q: np.ndarray, lut_row: np.ndarray, bits: int) -> np.ndarray:
    """Kernel scalar path for one row: plane words uint32 (bits, L) -> float16 (L, 32) weights.

    Transpose (SWAR), split nibbles for b <= 4, then one table lookup per byte; weights come out
    in canonical order 8*y + e.  lut_row: float16 (2**bits,).
    """
    bits = require_bits(bits, (3, 4, 5, 6, 7, 8))
    q = _check_planes(q, bits)
    lut_row = require_dtype("lut_row", lut_row, np.float16)
    require_shape("lut_row", lut_row, (1 << bits,))
    q_w = transpose_swar(q, bits)
    if bits <= 4:
        q_w = split_nibbles(q_w)  # (8, ...): word e, byte y -> weight (3 - y, e)
    out = np.empty(q.shape[1:] + (32,), dtype=np.float16)
    for y in range(4):  # byte y (from the LSB) of q_w[e] is block 3 - y
        for e in range(8):
            idx = (q_w[e] >> np.uint32(8 * y)) & np.uint32(0xFF)
            out[..., 8 * (3 - y) + e] = lut_row[idx]
    return out


def lookup_pairs(q: np.ndarray, lut_row: np.ndarray, bits: int) -> np.ndarray:
    """Kernel merged path for one row (b = 3, 4): 16 pair lookups per 32 weights.

    Byte y of q_w[m] indexes the pair table and yields (w[3-y, e=m], w[3-y, e=m+4]); for
    m = 2k, 2k+1 the kernel regroups these into dq_w half2s of weights (2k, 2k+1) and (2k+4,
    2k+5).  Returns float16 (L, 32) in canonical order, equal to :func:`lookup_scalar`.
    """
    bits = require_bits(bits, (3, 4))
    q = _check_planes(q, bits)
    lut_row = require_dtype("lut_row", lut_row, np.float16)
    require_shape("lut_row", lut_row, (1 << bits,))
    table = pair_table(lut_row.reshape(1, -1), bits)[0]  # (2^2b, 2)
    q_w = transpose_swar(q, bits)
    if bits == 3:
        q_w = merge_pairs_3bit(q_w)
    out = np.empty(q.shape[1:] + (32,), dtype=np.float16)
    for y in range(4):
        for k in range(2):
            x = table[(q_w[2 * k] >> np.uint32(8 * y)) & np.uint32(0xFF)]  # (L, 2)
            z = table[(q_w[2 * k + 1] >> np.uint32(8 * y)) & np.uint32(0xFF)]
            base = 8 * (3 - y)
            out[..., base + 2 * k], out[..., base + 2 * k + 1] = x[..., 0], z[..., 0]
            out[..., base + 2 * k + 4], out[..., base + 2 * k + 5] = x[..., 1], z[..., 1]
    return out
