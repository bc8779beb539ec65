"""GPTQ / AutoGPTQ packed checkpoint format ("GPTQ v1", and the v2 zero convention).

Spec
----
    qweight   int32 (K * bits // 32, N): codes packed along K (each column n is a bit stream)
    qzeros    int32 (G, N * bits // 32): zero points packed along N, stored as ``zero - 1`` in the
              historic v1 convention ("gptq"), as ``zero`` in the v2 convention ("gptq_v2")
    scales    float16 (G, N)
    g_idx     int32 (K,): the group of input row k (``k // group_size`` without act-order)
    bits      2, 3, 4 or 8;  K % 32 == 0 and N % 32 == 0 (the shape formulas use ``// 32 * bits``)
    value     w = scales[g_idx[k], n] * (q[k, n] - zero[g_idx[k], n])  (fp16 arithmetic at load)
    source    AutoGPTQ/AutoGPTQ ``auto_gptq/nn_modules/qlinear/qlinear_cuda.py`` (``QuantLinear.pack``
              and its torch fallback in ``forward``), commit 058fd80a72d63d992347e3a23dcd5757449a9e2d;
              IST-DASLab/gptq ``quant.py`` (``Quant3Linear.pack``, the same 3-bit stream).

Bit stream (little-endian, LSB first): value v of a column occupies stream bits [bits*v, bits*v + bits),
stream bit b being bit b % 32 of word b // 32. For 2/4/8 bits a value never straddles a word; for
3 bits 32 values fill three words and values 10 and 21 straddle::

    word 0:  |v10.lo2|  v9  | ... |  v1  |  v0  |      bits 31-30 hold v10 bits 1..0
              31  30  29..27        5..3   2..0
    word 1:  |v21.b0|  v20 | ... |  v11 |v10.b2|      bit 0 holds v10 bit 2, v11 at bits 3..1
    word 2:  | v31 | ... |  v22  |v21.hi2|            bits 1..0 hold v21 bits 2..1, v22 at bits 4..2

Worked example (4-bit): codes of rows k = 0..7 of one column = 1, 2, 3, 4, 5, 6, 7, 8 give the word
0x87654321 (row 0 in the lowest nibble).

The v1 zero-point corruption: the official pack computes ``zeros - 1`` in floating point and casts to
uint32, so a zero point of 0 becomes 0xFFFFFFFF, which is then shifted left *without a mask* and OR-ed
in: that column's field and every higher field of the same qzeros word become all ones (e.g. 4-bit,
zeros 8 everywhere except 0 at column 3: ``qzeros[0, 0] = 0xFFFFF777``). :func:`pack` reproduces the
stored words bit for bit and emits a :class:`ZeroPointOverflowWarning` naming the columns affected.
How a loader reads them back differs by implementation (see :data:`V1_ZERO_READERS`).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from refsim.native import packers as _fast
from refsim._validate import (
    require_bits,
    require_bounded,
    require_choice,
    require_codes,
    require_divisible,
    require_dtype,
    require_fields,
    require_finite,
    require_float_array,
    require_group_size,
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
    "BITS",
    "CHECKPOINT_FORMATS",
    "V1_ZERO_READERS",
    "GPTQCheckpoint",
    "ZeroPointOverflowWarning",
    "pack_qweight",
    "pack_qweight_reference",
    "unpack_qweight",
    "unpack_qweight_reference",
    "pack_qzeros",
    "unpack_qzeros",
    "pack_stream",
    "unpack_stream",
    "default_g_idx",
    "pack",
    "unpack",
    "dequantize",
    "intweight_from_weights",
]

BITS: tuple[int, ...] = (2, 3, 4, 8)
CHECKPOINT_FORMATS: tuple[str, ...] = ("gptq", "gptq_v2")

#: How the v1 loaders turn a stored field f back into a zero point (bits b, mask = 2**b - 1):
#:   "mask_then_add"  qlinear_cuda torch fallback:   z = (f & mask) + 1   (a corrupted field reads 2**b)
#:   "add_then_mask"  qlinear_cuda_old fallback:     z = (f + 1) & mask   (column with zero 0 recovers)
#:   "cuda_kernel"    autogptq_cuda_kernel_256.cu:   z = ((f & mask) + 1) & 0x0f  (8-bit zeros lose bits)
V1_ZERO_READERS: tuple[str, ...] = ("mask_then_add", "add_then_mask", "cuda_kernel")



class ZeroPointOverflowWarning(UserWarning):
    """A v1 ("zero minus one") pack met a zero point of 0; neighbouring stored zeros are corrupted."""


# --------------------------------------------------------------------------------------------
# The bit stream, along axis 0
# --------------------------------------------------------------------------------------------

def _field_positions(bits: int) -> tuple[np.ndarray, np.ndarray]:
    """For the values of one period (32 values for 3 bits, 32 // bits otherwise): word and shift."""
    per = 32 if bits == 3 else 32 // bits
    start = np.arange(per) * bits
    return start // 32, start % 32  # (per,), (per,)


def _horner(v: np.ndarray, idx: range, step: int, start: np.ndarray | None = None) -> np.ndarray:
    """``OR_i (v[:, i] << step * (i - idx.start))`` (mod 2**32) over ``idx``, evaluated top-down in
    place: ``out = v[top]; out <<= step; out |= v[next]; ...``. Shifting distributes over OR, so this
    equals the official loop's unmasked ``v << shift`` terms bit for bit."""
    order = list(idx)[::-1]
    out = v[:, order[0]].astype(np.uint32) if start is None else start
    if start is not None:
        out <<= np.uint32(step)
        out |= v[:, order[0]]
    for i in order[1:]:
        out <<= np.uint32(step)
        out |= v[:, i]
    return out


def _powers_of_two(shifts: np.ndarray) -> np.ndarray:
    """uint32 ``2**shifts`` (shifts < 32)."""
    return np.left_shift(np.uint32(1), shifts.astype(np.uint32))


def pack_stream(values: np.ndarray, bits: int) -> np.ndarray:
    """Pack unsigned fields along axis 0 into uint32 words, exactly as AutoGPTQ's ``pack`` loop.

    ``values`` uint8/uint32 (R, C) with R a multiple of 32; returns uint32 (R * bits // 32, C).
    Fields are shifted *unmasked* (``(v << s) mod 2**32``), as the official loop does; the part of a
    straddling 3-bit value that spills into the next word is masked to the spilled width. For values
    in [0, 2**bits) this is the plain LSB-first stream.
    """
    bits = require_bits(bits, BITS)
    values = require_dtype("values", values, np.uint8, np.uint32)
    require_ndim("values", values, 2)
    require_divisible("R (rows of values)", values.shape[0], 32, "must be a positive multiple of 32 (whole words)")
    r, c = values.shape
    if bits != 3:
        per = 32 // bits
        v = values.reshape(r // per, per, c)  # (words, fields, C)
        return _horner(v, range(per), bits)
    v = values.reshape(r // 32, 32, c)  # (periods, 32 values, C)
    out = np.empty((r // 32, 3, c), dtype=np.uint32)  # (periods, 3 words, C)
    # word 0: v0..v9 at 3i, low 2 bits of v10 at 30..31
    out[:, 0] = _horner(v, range(0, 10), 3, start=(v[:, 10] & 3).astype(np.uint32))
    # word 1: v10 bit 2 at 0, v11..v20 at 3(i-11)+1, v21 bit 0 at 31
    w1 = _horner(v, range(11, 21), 3, start=(v[:, 21] & 1).astype(np.uint32))
    w1 <<= np.uint32(1)
    w1 |= (v[:, 10] >> 2) & 1
    out[:, 1] = w1
    # word 2: v21 bits 1..2 at 0..1, v22..v31 at 3(i-22)+2
    w2 = _horner(v, range(22, 32), 3)
    w2 <<= np.uint32(2)
    w2 |= (v[:, 21] >> 1) & 3
    out[:, 2] = w2
    return out.reshape(r * 3 // 32, c)


def unpack_stream(words: np.ndarray, bits: int) -> np.ndarray:
    """Inverse of :func:`pack_stream` for in-range fields: uint32 (W, C) -> uint8 (W * 32 // bits, C).

    For 2/4/8 bits every field lies inside one byte of its word, so the words are split into their
    four byte planes once (little-endian host: byte j holds bits 8j..8j+7) and each field is one
    uint8 mask or shift of a plane.
    """
    bits = require_bits(bits, BITS)
    words = require_dtype("words", words, np.uint32)
    require_ndim("words", words, 2)
    require_divisible("W (rows of words)", words.shape[0], bits, f"must be a positive multiple of bits={bits} (whole periods of 32 fields)")
    wr, c = words.shape
    mask = np.uint32((1 << bits) - 1)
    if bits != 3:
        per = 32 // bits
        fields_per_byte = 8 // bits
        planes = np.ascontiguousarray(
            np.ascontiguousarray(words, dtype=np.uint32).view(np.uint8).reshape(wr, c, 4).transpose(0, 2, 1))  # (W, 4, C)
        if bits == 8:  # each byte plane is one row of codes already
            return planes.reshape(wr * 4, c)
        out = np.empty((wr, per, c), dtype=np.uint8)  # (words, fields, C)
        m8 = np.uint8(mask)
        for j in range(4):
            for f in range(fields_per_byte):
                dst = out[:, j * fields_per_byte + f]
                if f == 0:
                    np.bitwise_and(planes[:, j], m8, out=dst)
                else:
                    np.right_shift(planes[:, j], np.uint8(bits * f), out=dst)
                    if f < fields_per_byte - 1:
                        dst &= m8
        return out.reshape(wr * per, c)
    word, shift = _field_positions(3)
    w = words.astype(np.uint32, copy=False).reshape(wr // 3, 3, c)  # (periods, 3 words, C)
    out = np.empty((wr // 3, 32, c), dtype=np.uint8)
    for i in range(32):
        wi, s = int(word[i]), int(shift[i])
        val = w[:, wi] >> np.uint32(s)
        if s + 3 > 32:
            val |= w[:, wi + 1] << np.uint32(32 - s)
        np.bitwise_and(val, mask, out=out[:, i], casting="unsafe")
    return out.reshape(wr * 32 // 3, c)


# --------------------------------------------------------------------------------------------
# qweight
# --------------------------------------------------------------------------------------------

def pack_qweight(q: np.ndarray, bits: int) -> np.ndarray:
    """Pack codes ``q`` (K, N), any integer dtype with values in [0, 2**bits), into ``qweight``.

    Returns int32 (K * bits // 32, N), bit-identical to AutoGPTQ ``QuantLinear.pack`` (qlinear_cuda)
    and, for 3 bits, IST-DASLab/gptq ``Quant3Linear.pack``. K must be a multiple of 32.
    ``q`` is not modified.
    """
    bits = require_bits(bits, BITS)
    q = require_integer_array("q", q)
    require_ndim("q", q, 2)
    require_divisible("K (rows of q)", q.shape[0], 32, "must be a positive multiple of 32 (qweight packs along K)")
    if q.dtype == np.uint8 and _fast.available():
        # compiled twin of pack_stream (refsim.native.packers): one pass that also ORs every code,
        # so the range check costs no pass of its own; on a code >= 2**bits it returns None and
        # require_codes below raises the usual message
        words = _fast.gptq_pack(np.ascontiguousarray(q), bits)
        if words is not None:
            return words.view(np.int32)
    q = require_codes("q", q, bits)
    # In-range fields never overlap, so OR equals + and one einsum pass per word sums
    # q_i * 2**shift_i (mod 2**32, which also drops the spilled high bits of a straddling value).
    k, n = q.shape
    q = q.astype(np.uint8, copy=False)  # validated codes < 2**bits <= 256: exact
    if _fast.available():               # other integer dtypes, validated above
        return _fast.gptq_pack(np.ascontiguousarray(q), bits).view(np.int32)
    if bits != 3:
        per = 32 // bits
        weights = _powers_of_two(bits * np.arange(per))  # (per,)
        words = np.einsum("win,i->wn", q.reshape(k // per, per, n), weights, dtype=np.uint32, casting="unsafe")
        return words.view(np.int32)
    v = q.reshape(k // 32, 32, n)  # (periods, 32 values, N)
    words = np.empty((k // 32, 3, n), dtype=np.uint32)  # (periods, 3 words, N)
    for w, (lo, hi, offset) in enumerate(((0, 11, 0), (11, 22, 1), (22, 32, 2))):
        weights = _powers_of_two(3 * np.arange(hi - lo) + offset)
        words[:, w] = np.einsum("pin,i->pn", v[:, lo:hi], weights, dtype=np.uint32, casting="unsafe")
    words[:, 1] += v[:, 10] >> 2  # v10's bit 2 at bit 0 of word 1
    words[:, 2] += v[:, 21] >> 1  # v21's bits 2..1 at bits 1..0 of word 2
    return words.reshape(k * 3 // 32, n).view(np.int32)


def pack_qweight_reference(q: np.ndarray, bits: int) -> np.ndarray:
    """Plain-loop twin of :func:`pack_qweight`: stream bit b of column n is bit b % 32 of word b // 32."""
    bits = require_bits(bits, BITS)
    require_ndim("q", require_integer_array("q", q), 2)
    require_divisible("K (rows of q)", q.shape[0], 32)
    q = require_codes("q", q, bits)
    k, n = q.shape
    out = np.zeros((k * bits // 32, n), dtype=np.uint32)
    for col in range(n):
        for row in range(k):
            for bit in range(bits):
                if (int(q[row, col]) >> bit) & 1:
                    b = row * bits + bit
                    out[b // 32, col] |= np.uint32(1 << (b % 32))
    return out.view(np.int32)


def _check_unpack_qweight(qweight, bits, k) -> tuple[np.ndarray, int, int]:
    """Shared by :func:`unpack_qweight` and its plain twin."""
    bits = require_bits(bits, BITS)
    qweight = require_dtype("qweight", qweight, np.int32)
    require_ndim("qweight", qweight, 2)
    k = require_int("k", k, minimum=1)
    require_divisible("k", k, 32, "must be a positive multiple of 32 (qweight packs along K)")
    if qweight.shape[0] != k * bits // 32:
        raise ShapeError(f"qweight: must have K * bits / 32 = {k * bits // 32} rows for k={k}, "
                         f"bits={bits}; got shape {qweight.shape}")
    return qweight, bits, k


def unpack_qweight(qweight: np.ndarray, bits: int, k: int) -> np.ndarray:
    """Inverse of :func:`pack_qweight`: int32 (K * bits // 32, N) -> uint8 codes (K, N)."""
    qweight, bits, k = _check_unpack_qweight(qweight, bits, k)
    if _fast.available():               # compiled twin of unpack_stream (refsim.native.packers)
        return _fast.gptq_unpack(np.ascontiguousarray(qweight).view(np.uint32), bits)
    return unpack_stream(qweight.view(np.uint32), bits)


def unpack_qweight_reference(qweight: np.ndarray, bits: int, k: int) -> np.ndarray:
    """Plain-loop twin of :func:`unpack_qweight`."""
    qweight, bits, k = _check_unpack_qweight(qweight, bits, k)
    words = qweight.view(np.uint32)
    n = words.shape[1]
    q = np.zeros((k, n), dtype=np.uint8)
    for col in range(n):
        for row in range(k):
            v = 0
            for bit in range(bits):
                b = row * bits + bit
                v |= ((int(words[b // 32, col]) >> (b % 32)) & 1) << bit
            q[row, col] = v
    return q


# --------------------------------------------------------------------------------------------
# qzeros
# --------------------------------------------------------------------------------------------

def pack_qzeros(zeros: np.ndarray, bits: int, checkpoint_format: str = "gptq") -> np.ndarray:
    """Pack integer zero points (G, N) in [0, 2**bits) along N into int32 (G, N * bits // 32).

    "gptq" (v1) stores ``zero - 1`` exactly as AutoGPTQ does, including the corruption a zero of 0
    causes (warned with :class:`ZeroPointOverflowWarning`); "gptq_v2" stores ``zero``.
    N must be a multiple of 32. ``zeros`` is not modified.
    """
    bits = require_bits(bits, BITS)
    require_choice("checkpoint_format", checkpoint_format, CHECKPOINT_FORMATS)
    zeros = require_integer_array("zeros", zeros)
    require_ndim("zeros", zeros, 2)
    require_divisible("N (columns of zeros)", zeros.shape[1], 32, "must be a positive multiple of 32 (qzeros packs along N)")
    zeros = require_codes("zeros", zeros, bits)
    z = zeros.astype(np.int64)
    if checkpoint_format == "gptq":
        z = z - 1
        bad = np.argwhere(z < 0)
        if len(bad):
            cols = sorted({int(c) for c in bad[:, 1]})
            warnings.warn(
                f"gptq v1 pack: {len(bad)} zero point(s) equal 0 (columns {cols[:10]}"
                f"{'...' if len(cols) > 10 else ''}); 'zero - 1' wraps to 0xFFFFFFFF and corrupts the "
                "stored zeros of that column and every higher column in the same qzeros word "
                "(AutoGPTQ behaviour reproduced bit for bit). Use checkpoint_format='gptq_v2' to avoid it.",
                ZeroPointOverflowWarning, stacklevel=2)
    u = (z & 0xFFFFFFFF).astype(np.uint32)  # float -1 -> uint32 in the official numpy cast: 0xFFFFFFFF
    return pack_stream(u.T, bits).T.copy().view(np.int32)


def unpack_qzeros(qzeros: np.ndarray, bits: int, n: int, checkpoint_format: str = "gptq",
                  reader: str = "mask_then_add") -> np.ndarray:
    """Zero points int32 (G, N) from ``qzeros`` int32 (G, N * bits // 32).

    For "gptq" (v1) ``reader`` selects how the stored ``zero - 1`` is read back (see
    :data:`V1_ZERO_READERS`); for uncorrupted checkpoints with bits <= 4 all readers agree.
    """
    bits = require_bits(bits, BITS)
    require_choice("checkpoint_format", checkpoint_format, CHECKPOINT_FORMATS)
    require_choice("reader", reader, V1_ZERO_READERS)
    qzeros = require_dtype("qzeros", qzeros, np.int32)
    require_ndim("qzeros", qzeros, 2)
    n = require_int("n", n, minimum=1)
    require_divisible("n", n, 32)
    if qzeros.shape[1] != n * bits // 32:
        raise ShapeError(f"qzeros: must have N * bits / 32 = {n * bits // 32} columns for n={n}; "
                         f"got shape {qzeros.shape}")
    f = unpack_stream(qzeros.view(np.uint32).T, bits).T.astype(np.int32)  # (G, N) stored fields
    if checkpoint_format == "gptq_v2":
        return f
    mask = (1 << bits) - 1
    if reader == "mask_then_add":
        return f + 1
    if reader == "add_then_mask":
        return (f + 1) & mask
    return (f + 1) & 0x0F


# --------------------------------------------------------------------------------------------
# Whole checkpoints
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class GPTQCheckpoint:
    """The tensors of one quantized linear layer as stored in a GPTQ checkpoint.

    qweight int32 (K*bits//32, N); qzeros int32 (G, N*bits//32); scales float16 (G, N);
    g_idx int32 (K,); ``checkpoint_format`` "gptq" (v1, zero - 1) or "gptq_v2".
    """

    qweight: np.ndarray
    qzeros: np.ndarray
    scales: np.ndarray
    g_idx: np.ndarray
    bits: int
    checkpoint_format: str = "gptq"

    def __post_init__(self):
        """Cross-field rules, checked once: every consumer then trusts the fields."""
        require_fields(self)
        bits = require_bits(self.bits, BITS)
        checkpoint_format = require_choice("checkpoint_format", self.checkpoint_format, CHECKPOINT_FORMATS)
        qweight = require_words("qweight", self.qweight)
        rows, n = qweight.shape
        if (rows * 32) % bits or (rows * 32 // bits) % 32 or rows == 0:
            raise ShapeError(f"qweight: rows must be K*bits/32 for K a positive multiple of 32 (bits={bits}); "
                             f"got {rows} rows")
        k = rows * 32 // bits
        scales = require_float_array("scales", self.scales)
        require_ndim("scales", scales, 2)
        groups = scales.shape[0]
        if groups < 1 or scales.shape[1] != n:
            raise ShapeError(f"scales: shape must be (G >= 1, N={n}) (N = columns of qweight); got {scales.shape}")
        require_finite("scales", scales)
        require_divisible("N (columns of qweight)", n, 32, "must be a positive multiple of 32 (qzeros packs along N)")
        qzeros = require_words("qzeros", self.qzeros, (groups, n * bits // 32))
        g_idx = _check_g_idx(self.g_idx, k, groups)
        set_fields(self, bits=bits, qweight=qweight, scales=scales, qzeros=qzeros, g_idx=g_idx,
                   checkpoint_format=checkpoint_format)

    @property
    def k(self) -> int:
        return self.qweight.shape[0] * 32 // self.bits

    @property
    def n(self) -> int:
        return self.qweight.shape[1]


def default_g_idx(k: int, group_size: int | None) -> np.ndarray:
    """int32 (K,): ``k // group_size`` (all zeros for per-channel, ``group_size=None``)."""
    k = require_bounded("k", require_int("k", k, minimum=1))
    group_size = None if group_size is None else require_int("group_size", group_size, minimum=1)
    if group_size is None or group_size >= k:  # one group holds every row (no int64 overflow either)
        return np.zeros(k, dtype=np.int32)
    return (np.arange(k) // group_size).astype(np.int32)


def _check_g_idx(g_idx: np.ndarray, k: int, groups: int) -> np.ndarray:
    g_idx = require_integer_array("g_idx", g_idx)
    require_shape("g_idx", g_idx, (k,))
    if g_idx.size and (int(g_idx.min()) < 0 or int(g_idx.max()) >= groups):
        raise FormatRuleError(f"g_idx: entries must lie in [0, {groups - 1}] (one per scale row); "
                              f"got range [{int(g_idx.min())}, {int(g_idx.max())}]")
    return g_idx


def pack(q: np.ndarray, scales: np.ndarray, zeros: np.ndarray, bits: int, *,
         g_idx: np.ndarray | None = None, group_size: int | None = None,
         checkpoint_format: str = "gptq") -> GPTQCheckpoint:
    """Build a checkpoint from codes q (K, N), scales float (G, N), integer zeros (G, N).

    ``g_idx`` int (K,) gives each row's group (act-order); if omitted it is ``k // group_size``
    (``group_size`` None means per-channel, G = 1). Scales are stored as float16 (the official pack
    casts to the layer dtype); they must be finite and representable in float16.
    """
    bits = require_bits(bits, BITS)
    q = require_integer_array("q", q)
    require_ndim("q", q, 2)
    k, n = q.shape
    scales = require_float_array("scales", scales)
    require_ndim("scales", scales, 2)
    require_finite("scales", scales)
    zeros = require_integer_array("zeros", zeros)
    require_shape("zeros", zeros, scales.shape)
    if scales.shape[1] != n:
        raise ShapeError(f"scales: must have N={n} columns; got shape {scales.shape}")
    with np.errstate(over="ignore"):
        s16 = scales.astype(np.float16)
    if not np.isfinite(s16).all():
        raise FormatRuleError("scales: must be representable in float16 (|s| <= 65504); "
                              f"got max |s| = {float(np.abs(scales).max())}")
    if g_idx is None:  # groups of group_size consecutive rows: whole groups only
        g_idx = default_g_idx(k, require_group_size(group_size, k))
    g_idx = _check_g_idx(g_idx, k, scales.shape[0])
    return GPTQCheckpoint(
        qweight=pack_qweight(q, bits),
        qzeros=pack_qzeros(zeros, bits, checkpoint_format),
        scales=s16,
        g_idx=g_idx.astype(np.int32),
        bits=bits,
        checkpoint_format=checkpoint_format,
    )


def unpack(ckpt: GPTQCheckpoint, reader: str = "mask_then_add") -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(q uint8 (K, N), scales float16 (G, N), zeros int32 (G, N), g_idx int32 (K,))``."""
    require_instance("ckpt", ckpt, GPTQCheckpoint)
    require_choice("reader", reader, V1_ZERO_READERS)
    q = unpack_qweight(ckpt.qweight, ckpt.bits, ckpt.k)
    zeros = unpack_qzeros(ckpt.qzeros, ckpt.bits, ckpt.n, ckpt.checkpoint_format, reader)
    return q, ckpt.scales, zeros, ckpt.g_idx


def dequantize(ckpt: GPTQCheckpoint, reader: str = "mask_then_add") -> np.ndarray:
    """float16 (K, N) weights as AutoGPTQ's torch fallback computes them, in fp16 arithmetic:
    ``scales[g_idx] * (q - zeros[g_idx])`` (the integer difference is exact in fp16, the product is
    one correctly rounded fp16 multiply)."""
    q, scales, zeros, g_idx = unpack(ckpt, reader)
    diff = (q.astype(np.int32) - zeros[g_idx]).astype(np.float16)
    return scales[g_idx] * diff


def intweight_from_weights(w: np.ndarray, scales: np.ndarray, zeros: np.ndarray, g_idx: np.ndarray) -> np.ndarray:
    """The integers AutoGPTQ's ``pack`` derives from (fake-quantized) weights, as int64 (K, N).

    ``w`` float16/float32 (K, N) (the layer weight, transposed to refsim's (K, N)), ``scales`` float32
    (G, N) (the quantizer's fp32 scales), ``zeros`` (G, N) integer zero points. Arithmetic as the
    official code: ``sz = zeros * scales`` in fp32; ``s16 = fp16(scales)``;
    ``round_half_even((w + sz[g]) / s16[g])`` with fp16 w promoted to fp32. No clamping (the official
    code does none: out-of-range results would corrupt neighbours, so :func:`pack` refuses them).
    """
    w = require_float_array("w", w)
    require_ndim("w", w, 2)
    require_finite("w", w)
    k, n = w.shape
    scales = require_float_array("scales", scales)
    require_ndim("scales", scales, 2)
    if scales.shape[0] < 1 or scales.shape[1] != n:
        raise ShapeError(f"scales: shape must be (G >= 1, N={n}); got {scales.shape}")
    require_finite("scales", scales)
    zeros = require_integer_array("zeros", zeros)
    require_shape("zeros", zeros, scales.shape)
    g_idx = _check_g_idx(g_idx, k, scales.shape[0])
    sz = zeros.astype(np.float32) * scales.astype(np.float32)
    s16 = scales.astype(np.float16).astype(np.float32)
    x = (w.astype(np.float32) + sz[g_idx]) / s16[g_idx]
    return np.rint(x).astype(np.int64)
