"""Any-Precision LLM bitplane format: p bitplanes of parent codes, byte-permuted for coalescing.

Spec block
----------
element bits     p-bit parent code c in [0, 2**p), p in 3..8 (the kernel's bit-widths); a b-bit
                 model (b <= p) uses the prefix ``c >> (p - b)`` and its own table ``lut_b``
container        int32 words, array (p, N, K // 32): plane-major, rows in natural order 0..N-1,
                 K/32 words per row.  Stored PyTorch-style: N = out_features, K = in_features
                 (so this format is (N, K) where refsim's convention is (K, N); said explicitly)
bit order        plane j = 0 holds the MSB (bit p-1) of every code, plane p-1 the LSB
element order    K is cut into chunks of 1024 weights (one warp iteration); lane t = 0..31 owns
                 word w = 32*i + t of chunk i.  Bit ``31 - 8*q - e`` of word w (q = 0..3 the byte,
                 MSB first; e = 0..7 the bit inside the byte, MSB first) holds weight
                     k = 1024*i + 8*eff*q + 8*t + e,   eff = 32 for a full chunk,
                                                       eff = (K % 1024) // 32 for the tail chunk
tile shape       1024 weights x 1 row per warp iteration (32 lanes x 32 weights)
invariants       unpack(pack(c, p)) == c;  unpack(pack(c, p)[:b]) == c >> (p - b);
                 a b-bit reader touches only planes 0..b-1 (b*N*K/8 bytes) whatever p is
tables           lut_b: float16 (N, 2**b), one row per output row, indexed by the b-bit code
source           github:SNU-ARC/any-precision-llm @ a3257d02740cc5757c78673da534b0630ff3a4ea,
                 any_precision/quantization/pack.py (``_process_layer_data``, ``_permute_bitmaps``,
                 ``_calculate_new_indices``) and modules/kernels/dequant.cuh (reader side).
                 tests/formats/test_bitplane.py transliterates that packer and compares bit for bit.

Layout of one full chunk of one plane of one row (little-endian int32 words)::

    word w = 32*i + t (lane t)      bits 31..24      bits 23..16      bits 15..8       bits 7..0
                                    (byte 4w+3)      (byte 4w+2)      (byte 4w+1)      (byte 4w+0)
    lane 0                          k = 0..7         k = 256..263     k = 512..519     k = 768..775
    lane 1                          k = 8..15        k = 264..271     k = 520..527     k = 776..783
    ...
    lane 31                         k = 248..255     k = 504..511     k = 760..767     k = 1016..1023
    (inside each byte the lowest k sits in the highest bit, np.packbits' big-endian order)

Why: when lane t reads activations for the weights of its byte q, the 32 lanes touch 32
consecutive 8-half (16-byte) runs, i.e. one coalesced 512-byte access; with the natural order
(lane t owning k = 32t..32t+31) each load would stride 64 bytes.  The tail chunk (K % 1024 != 0)
has only eff lanes, so its bytes are 8*eff weights apart (e.g. K = 1312: eff = 9, stride 72).

How the official packer gets there: ``np.packbits`` per plane gives byte b8 = weights 8*b8..8*b8+7,
then within each row byte b8 moves to ``128*g + 4*(b8 % 32) + ((b8 % 128) // 32 ^ 3)`` (g = b8 //
128; the tail group uses eff lanes in place of 32); ``^ 3`` reverses the bytes of a word so that
the little-endian int32 view puts byte q = 0 in bits 31..24.

Worked example (p = 4, K = 1024, row 0, word 0): codes k=0..7 = 3 14 4 14 6 0 13 9 give plane-0
byte 0b01010011 = 0x53 (the MSBs 0,1,0,1,0,0,1,1), which lands in bits 31..24 of qweight[0, 0, 0].
"""

from __future__ import annotations

import numpy as np

from refsim.native import packers as _fast
from refsim._validate import (
    require_bounded,
    require_bits,
    require_codes,
    require_divisible,
    require_dtype,
    require_finite,
    require_int,
    require_ndim,
    require_shape,
)
from refsim.errors import FormatRuleError, ShapeError

__all__ = [
    "SUPPORTED_BITS",
    "WEIGHTS_PER_CHUNK",
    "byte_permutation",
    "word_bit_to_weight",
    "pack",
    "pack_reference",
    "unpack",
    "unpack_reference",
    "prefix_codes",
    "dequantize",
    "dequantize_reference",
]

SUPPORTED_BITS = (3, 4, 5, 6, 7, 8)  # kernel instantiations in main.cu (2-bit is not served)
WEIGHTS_PER_CHUNK = 1024  # 32 lanes x 32 weights: one warp iteration
_LANES = 32


def _check_k(k: int) -> int:
    k = require_int("K", k, minimum=1)
    return require_divisible("K", k, 32, "K (in_features) must be a positive multiple of 32")


def byte_permutation(k: int) -> np.ndarray:
    """Destination byte of each packbits byte within one row's plane.

    Returns int64 (K // 8,): ``dest[b8]`` is the byte offset (little-endian memory order of the
    int32 words) where the byte holding weights ``8*b8 .. 8*b8+7`` is stored.  K must be a
    multiple of 32; the last K % 1024 weights form a tail group with eff = (K % 1024) // 32 lanes.
    """
    k = require_bounded("K", _check_k(k), 1 << 28, what="in_features for a layout table")
    n_bytes = k // 8  # (K/8,)
    b8 = np.arange(n_bytes, dtype=np.int64)
    full = (n_bytes // 128) * 128  # bytes in full 1024-weight chunks
    dest = np.empty(n_bytes, dtype=np.int64)
    # full groups: 32 lanes x 4 bytes; byte q of lane t comes from b8 = 128g + 32q + t
    g, r = np.divmod(b8[:full], 128)
    dest[:full] = 128 * g + 4 * (r % 32) + ((r // 32) ^ 3)
    if full < n_bytes:
        eff = (n_bytes - full) // 4  # lanes in the tail chunk
        r = b8[full:] - full
        dest[full:] = full + 4 * (r % eff) + ((r // eff) ^ 3)
    return dest


def word_bit_to_weight(k: int) -> np.ndarray:
    """The layout as data: ``idx[w, s]`` = weight index k stored at bit s (0 = LSB) of word w.

    Returns int64 (K // 32, 32).  Built from the spec-block formula (not from
    :func:`byte_permutation`), so the two generators check each other in the tests.
    """
    k = require_bounded("K", _check_k(k), 1 << 24, what="in_features for a plain-loop layout table")
    idx = np.empty((k // 32, 32), dtype=np.int64)  # (K/32 words, 32 bit positions)
    n_full = k // WEIGHTS_PER_CHUNK
    for w in range(k // 32):
        i, t = divmod(w, _LANES)
        eff = _LANES if i < n_full else (k % WEIGHTS_PER_CHUNK) // 32
        for q in range(4):
            for e in range(8):
                idx[w, 31 - 8 * q - e] = WEIGHTS_PER_CHUNK * i + 8 * eff * q + 8 * t + e
    return idx


def _check_codes(codes: np.ndarray, bits: int) -> tuple[int, int]:
    codes = require_dtype("codes", codes, np.uint8)
    require_ndim("codes", codes, 2)
    n, k = codes.shape
    if n == 0:
        raise ShapeError(f"codes: N (rows) must be >= 1; got shape {codes.shape}")
    _check_k(k)
    codes = require_codes("codes", codes, bits)
    return n, k


def pack(codes: np.ndarray, bits: int) -> np.ndarray:
    """Pack p-bit parent codes into the Any-Precision bitplane layout.

    codes: uint8 (N, K), values in [0, 2**bits), rows = output features (PyTorch order), K a
    positive multiple of 32 (K % 1024 != 0 allowed: tail chunk).  bits: parent precision p in 3..8.
    Returns int32 (bits, N, K // 32), plane 0 = MSB, bit-identical to the official
    ``pack._process_layer_data``.  The input is not modified.
    """
    bits = require_bits(bits, SUPPORTED_BITS)
    n, k = _check_codes(codes, bits)
    if _fast.available():               # compiled twin (refsim.native.packers), same bits
        return _fast.bitplane_pack(np.ascontiguousarray(codes), bits).view(np.int32)
    out = np.empty((bits, n, k // 8), dtype=np.uint8)  # (p, N, K/8) bytes in memory order
    for j in range(bits):  # one plane at a time keeps the temporaries at N*K bytes
        plane = (codes >> np.uint8(bits - 1 - j)) & np.uint8(1)  # (N, K) of 0/1: bit p-1-j
        _permute_bytes(np.packbits(plane, axis=1), out[j])  # first weight of a byte in bit 7
    return out.view("<i4").reshape(bits, n, k // 32).astype(np.int32, copy=False)


def _permute_bytes(packed: np.ndarray, out: np.ndarray) -> None:
    """Apply :func:`byte_permutation` to (N, K/8) packbits bytes, as strided copies.

    Within a group of 4*eff bytes, source byte ``eff*q + t`` goes to ``4*t + (3 - q)``: view
    the group as (4, eff) [q, t], reverse q (the "^ 3") and transpose to (eff, 4).
    """
    n, n_bytes = packed.shape
    full = (n_bytes // 128) * 128
    if full:
        src = packed[:, :full].reshape(n, full // 128, 4, 32)  # (N, G, q, t)
        dst = out[:, :full].reshape(n, full // 128, 32, 4)  # (N, G, t, 3 - q): a view
        assert np.shares_memory(dst, out)
        dst[...] = src[:, :, ::-1, :].transpose(0, 1, 3, 2)
    if full < n_bytes:
        eff = (n_bytes - full) // 4
        src = packed[:, full:].reshape(n, 4, eff)  # (N, q, t)
        dst = out[:, full:].reshape(n, eff, 4)  # (N, t, 3 - q): a view
        assert np.shares_memory(dst, out)
        dst[...] = src[:, ::-1, :].transpose(0, 2, 1)


def _unpermute_bytes(mem: np.ndarray) -> np.ndarray:
    """Inverse of :func:`_permute_bytes`: (N, K/8) memory-order bytes -> packbits order."""
    n, n_bytes = mem.shape
    full = (n_bytes // 128) * 128
    natural = np.empty_like(mem)
    if full:
        src = mem[:, :full].reshape(n, full // 128, 32, 4)  # (N, G, t, 3 - q)
        dst = natural[:, :full].reshape(n, full // 128, 4, 32)  # (N, G, q, t): a view
        dst[...] = src[:, :, :, ::-1].transpose(0, 1, 3, 2)
    if full < n_bytes:
        eff = (n_bytes - full) // 4
        src = mem[:, full:].reshape(n, eff, 4)
        dst = natural[:, full:].reshape(n, 4, eff)
        dst[...] = src[:, :, ::-1].transpose(0, 2, 1)
    return natural


def pack_reference(codes: np.ndarray, bits: int) -> np.ndarray:
    """Plain-loop twin of :func:`pack`, written from the spec-block formula (slow; small shapes)."""
    bits = require_bits(bits, SUPPORTED_BITS)
    n, k = _check_codes(codes, bits)
    idx = word_bit_to_weight(k)
    out = np.zeros((bits, n, k // 32), dtype=np.int64)
    for j in range(bits):
        for r in range(n):
            for w in range(k // 32):
                word = 0
                for s in range(32):
                    word |= ((int(codes[r, idx[w, s]]) >> (bits - 1 - j)) & 1) << s
                out[j, r, w] = word
    return out.astype(np.uint32).view(np.int32)  # two's-complement reinterpretation


def _check_qweight(qweight: np.ndarray, bits: int | None) -> tuple[np.ndarray, int, int, int]:
    """``(qweight in native byte order, N, K, bits)`` of a valid bitplane array."""
    qweight = require_dtype("qweight", qweight, np.int32)
    require_ndim("qweight", qweight, 3)
    p, n, kw = qweight.shape
    if p < 1 or p > 8:
        raise ShapeError(f"qweight: plane count (dim 0) must be in 1..8; got shape {qweight.shape}")
    if n == 0 or kw == 0:
        raise ShapeError(f"qweight: N and K/32 must be >= 1; got shape {qweight.shape}")
    if bits is None:
        bits = p
    bits = require_bits(bits, SUPPORTED_BITS)
    if bits > p:
        raise FormatRuleError(f"bits: must not exceed the {p} stored planes; got {bits}")
    return qweight, n, kw * 32, bits


def unpack(qweight: np.ndarray, bits: int | None = None) -> np.ndarray:
    """Read b-bit codes out of a bitplane array.

    qweight: int32 (p, N, K // 32) as produced by :func:`pack`.  bits: b in 3..8 with b <= p,
    default p.  Only planes 0..b-1 are read, so the result is the any-precision prefix
    ``parent_code >> (p - b)``.  Returns uint8 (N, K).
    """
    qweight, n, k, bits = _check_qweight(qweight, bits)
    if _fast.available():               # compiled twin (refsim.native.packers), same bits
        return _fast.bitplane_unpack(np.ascontiguousarray(qweight).view(np.uint32), bits)
    words = qweight[:bits].view("<u4")  # (b, N, K/32)
    as_bytes = words.view(np.uint8).reshape(bits, n, k // 8)  # little-endian memory bytes
    codes = np.zeros((n, k), dtype=np.uint8)
    for j in range(bits):
        plane = np.unpackbits(_unpermute_bytes(as_bytes[j]), axis=1)  # (N, K) of 0/1
        codes |= plane << np.uint8(bits - 1 - j)
    return codes


def unpack_reference(qweight: np.ndarray, bits: int | None = None) -> np.ndarray:
    """Plain-loop twin of :func:`unpack`: the spec block's inverse formula, bit by bit."""
    qweight, n, k, bits = _check_qweight(qweight, bits)
    n_full = k // WEIGHTS_PER_CHUNK
    codes = np.zeros((n, k), dtype=np.uint8)
    for r in range(n):
        for kk in range(k):
            i, m = divmod(kk, WEIGHTS_PER_CHUNK)
            eff = _LANES if i < n_full else (k % WEIGHTS_PER_CHUNK) // 32
            q, rest = divmod(m, 8 * eff)
            t, e = divmod(rest, 8)
            c = 0
            for j in range(bits):
                word = int(qweight[j, r, 32 * i + t]) & 0xFFFFFFFF
                c |= ((word >> (31 - 8 * q - e)) & 1) << (bits - 1 - j)
            codes[r, kk] = c
    return codes


def prefix_codes(codes: np.ndarray, parent_bits: int, bits: int) -> np.ndarray:
    """The b-bit model's codes from p-bit parent codes: ``codes >> (p - b)``.

    codes: uint8 (any shape) in [0, 2**parent_bits).  Returns uint8 of the same shape.
    """
    parent_bits = require_bits(parent_bits, SUPPORTED_BITS)
    bits = require_bits(bits, SUPPORTED_BITS)
    if bits > parent_bits:
        raise FormatRuleError(f"bits: must not exceed parent_bits={parent_bits}; got {bits}")
    codes = require_dtype("codes", codes, np.uint8)
    codes = require_codes("codes", codes, parent_bits)
    return codes >> np.uint8(parent_bits - bits)


def _check_lut(lut: np.ndarray, n: int, bits: int) -> np.ndarray:
    lut = require_dtype(f"lut{bits}", lut, np.float16)
    require_shape(f"lut{bits}", lut, (n, 1 << bits))
    return require_finite(f"lut{bits}", lut)


def dequantize(qweight: np.ndarray, lut: np.ndarray, bits: int) -> np.ndarray:
    """The b-bit weights ``lut_b[r, code_b]`` (what the official ``dequant_kbit`` writes).

    qweight: int32 (p, N, K // 32); lut: float16 (N, 2**bits), row r's centroid table; bits in
    3..8, <= p.  Returns float16 (N, K) in PyTorch order (out_features, in_features); transpose
    for refsim's (K, N) convention.  A pure table lookup, so exact by construction.
    """
    qweight, n, _, bits = _check_qweight(qweight, bits)
    lut = _check_lut(lut, n, bits)
    codes = unpack(qweight, bits)  # (N, K)
    return np.take_along_axis(lut, codes.astype(np.intp), axis=1)


def dequantize_reference(qweight: np.ndarray, lut: np.ndarray, bits: int) -> np.ndarray:
    """Plain-loop twin of :func:`dequantize`."""
    qweight, n, k, bits = _check_qweight(qweight, bits)
    lut = _check_lut(lut, n, bits)
    codes = unpack_reference(qweight, bits)
    out = np.empty((n, k), dtype=np.float16)
    for r in range(n):
        for kk in range(k):
            out[r, kk] = lut[r, codes[r, kk]]
    return out
