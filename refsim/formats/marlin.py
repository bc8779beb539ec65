"""Marlin FP16 x INT4 weight format (IST-DASLab/marlin), bit for bit.

Spec block
----------
- **Element**: 4-bit unsigned code ``q`` in ``[0, 15]`` meaning the signed value ``q - 8`` in
  ``[-8, 7]`` (symmetric, fixed offset 8, no zero-point tensor).
- **Container**: ``int32`` words; ``B`` has shape ``(K // 16, 2 * N)`` (8 nibbles per word,
  ``K * N / 2`` bytes in all).
- **Bit order**: nibble ``i`` of a word occupies bits ``4i .. 4i+3`` (nibble 0 = least significant).
- **Element order within a word** (the "64207531" interleave): the 8 logical elements
  ``e0..e7`` of a word are the B-fragment elements of two ``mma.m16n8k16`` instructions,
  ``e = (2t,g) (2t+1,g) (2t+8,g) (2t+9,g) (2t,g+8) (2t+1,g+8) (2t+8,g+8) (2t+9,g+8)``
  as ``(k row, n col)`` inside a 16x16 sub-tile, and nibble ``i`` holds ``e[[0,2,4,6,1,3,5,7][i]]``.
  Read MSB to LSB the word is ``e7 e5 e3 e1 | e6 e4 e2 e0``: even elements in the low nibble of
  each byte, so the masks ``0x000f000f`` / ``0x00f000f0`` pull two elements into the two fp16
  halves of a register in one ``lop3`` (see :mod:`refsim.formats.dequant_tricks`).
- **Tile**: one 16 (k) x 64 (n) tile = 512 bytes = 128 words; lane ``l`` of a warp owns the 16
  bytes at offset ``16 l`` (one ``int4`` load), i.e. words ``4l + j`` for sub-tile ``j = 0..3``.
- **Closed form**: word ``B[kb, w]``: ``nb = w // 128``, ``lane = (w % 128) // 4``, ``j = w % 4``,
  ``t = lane % 4``, ``g = lane // 4``, ``r = 16 kb + 2t``, ``c = 64 nb + 16 j + g``; nibbles 0..7 are
  ``Q[r,c] Q[r+8,c] Q[r,c+8] Q[r+8,c+8] Q[r+1,c] Q[r+9,c] Q[r+1,c+8] Q[r+9,c+8]``.
- **Scales**: fp16 ``(G, N)``. Grouped (``G > 1``): columns permuted inside 64-wide chunks by an
  8x8 transpose (``scale_perm``); per-channel (``G == 1``): inside 32-wide chunks by
  ``scale_perm_single`` (the output-fragment column order). The kernel decides grouped vs
  per-channel from ``G`` alone, so **K = 128 with group_size 128 is packed as per-channel**
  (one scale row, ``scale_perm_single``), exactly as the official ``Layer.pack`` does.
- **Numerics**: grouped: the tensor-core B operand is ``fp16((q - 8) * s)`` (one ``__hmul2``, RN);
  per-channel: the operand is ``fp16(q - 8)`` and the scale multiplies the fp16 output
  (``C = fp16(fp16(acc) * s[n])``).
- **Invariants**: every ``(k, n)`` appears exactly once; ``unpack(pack(q, s, g)) == (q, s)``.
- **Shape rules**: ``K % 128 == 0``, ``N % 128 == 0`` (the kernel's smallest tile,
  ``thread_k = thread_n = 128``, which its host code picks for ``M <= 16``; larger M needs the
  kernel's ``N % 256`` from :func:`refsim.formats.stripes.marlin_tile_config`), group size 128 or
  per-channel (``None``). The official ``marlin.Layer`` constructor asks ``N % 256`` (a packer's
  rule, not the kernel's: ``Layer.pack``'s permutations work per 64 columns). The packed layout
  itself only needs ``K % 16`` and ``N % 64`` (vLLM's ``gptq_marlin_repack``).
- **Source matched**: IST-DASLab/marlin ``marlin/__init__.py`` (``_get_perms``, ``Layer.pack``)
  and ``marlin/marlin_cuda_kernel.cu`` (``dequant``, ``scale``), commit
  ``2f6d7c10e124b3c5fa29ff8d77d568bd7af3274c``.
- **Neighbours**: the quantizer that makes the codes and scales (absmax, RTN) is
  :mod:`refsim.quant.marlin`; GPTQ checkpoints repack without re-quantizing through
  :mod:`refsim.formats.gptq_marlin`.

Layout of one 16 x 64 tile (k down, n across); digits are the owning lane for sub-tile j = 0::

           n:  0 1 2 3 4 5 6 7 | 8 9 ...  15 | 16 ... 63  (sub-tiles j = 1, 2, 3)
    k = 0,1:   0 4 8 ...    28 | 0 4 ...  28 |
    k = 2,3:   1 5 9 ...    29 | 1 5 ...  29 |   same lanes, next word of the lane's int4
    k = 4,5:   2 6 ...      30 | 2 6 ...  30 |
    k = 6,7:   3 7 ...      31 | 3 7 ...  31 |
    k = 8..15: as rows 0..7 (the lane's b1 register)

    word B[kb, 128 nb + 4 lane + j]  =  nib7 nib6 nib5 nib4 nib3 nib2 nib1 nib0   (MSB .. LSB)
                                     =  e7   e5   e3   e1   e6   e4   e2   e0
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from refsim.native import packers as _fast
from refsim._validate import (
    require_codes,
    require_divisible,
    require_dtype,
    require_finite,
    require_group_128,
    require_int,
    require_integer_array,
    require_ndim,
    require_shape,
)
from refsim.arith.exact import round_to_float
from refsim.errors import FormatRuleError, ShapeError

__all__ = [
    "GROUP_SIZES",
    "INTERLEAVE",
    "CODE_BIAS",
    "MAX_CODE",
    "check_kn",
    "check_group_size",
    "check_scales",
    "weight_perm",
    "scale_perm",
    "scale_perm_single",
    "inverse_perm",
    "permute_weights",
    "unpermute_weights",
    "permute_scales",
    "unpermute_scales",
    "pack",
    "pack_reference",
    "unpack",
    "unpack_reference",
    "dequantize",
    "dequantize_reference",
    "effective_weights",
    "apply_output_scale",
    "reference_gemm",
]

TILE = 16
#: group sizes the official Marlin kernel is compiled for (``None`` = per-channel)
GROUP_SIZES = (None, 128)
#: nibble i of a word holds logical fragment element INTERLEAVE[i]
INTERLEAVE = (0, 2, 4, 6, 1, 3, 5, 7)
#: a stored code ``q`` means the signed value ``q - CODE_BIAS``
CODE_BIAS = 8
#: the largest 4-bit code (codes lie in ``[0, MAX_CODE]``)
MAX_CODE = 15


# ----------------------------------------------------------------------------------------------
# Permutation generators (layouts are data)
# ----------------------------------------------------------------------------------------------
def _fragment_rows_cols(lane: int) -> list[tuple[int, int]]:
    """The 8 (row, col) positions of a 16x16 sub-tile that ``lane`` feeds as the B fragments of
    two m16n8k16 MMAs, in fragment order e0..e7 (b0, b1 of the first n8 half, then the second)."""
    t, g = lane % 4, lane // 4
    rows = (2 * t, 2 * t + 1, 2 * t + 8, 2 * t + 9)
    return [(r, g) for r in rows] + [(r, g + 8) for r in rows]


def weight_perm() -> np.ndarray:
    """Marlin's 1024-entry weight permutation (int64), ``new[i] = old[perm[i]]`` inside a chunk.

    A chunk is one 16 (k) x 64 (n) tile viewed as four 16x16 sub-tiles, each flattened row-major
    and laid side by side: flat position ``256 j + 16 row + col``. Output order: lane-major, then
    sub-tile ``j``, then the 8 fragment elements reordered by :data:`INTERLEAVE`.
    """
    perm = np.empty(1024, dtype=np.int64)
    i = 0
    for lane in range(32):
        frag = _fragment_rows_cols(lane)  # e0..e7
        for j in range(4):
            for nib in range(8):
                row, col = frag[INTERLEAVE[nib]]
                perm[i] = 256 * j + 16 * row + col
                i += 1
    return perm


def scale_perm() -> np.ndarray:
    """Grouped scale permutation (64 entries): ``packed[8i + j] = logical[i + 8j]``, an 8x8 transpose.

    Why: the thread with groupID g loads one int4 = 8 halves = columns g, g+8, ..., g+56 of its
    warp's 64-column block; half2 number jj covers both n8 halves of sub-tile jj.
    """
    return (np.arange(8)[:, None] + 8 * np.arange(8)[None, :]).reshape(64).astype(np.int64)


def scale_perm_single() -> np.ndarray:
    """Per-channel scale permutation (32 entries): ``packed[8i + e] = 2i + [0,1,8,9,16,17,24,25][e]``.

    Why: per-channel scales multiply the output fragment, where thread t holds columns 2t, 2t+1
    of every n8 block; thread t's int4 therefore holds columns 2t + {0,1,8,9,16,17,24,25}.
    """
    offs = np.array([0, 1, 8, 9, 16, 17, 24, 25], dtype=np.int64)
    return (2 * np.arange(4, dtype=np.int64)[:, None] + offs[None, :]).reshape(32)


def inverse_perm(perm: np.ndarray) -> np.ndarray:
    """The inverse index array: ``x[perm][inverse_perm(perm)] == x``; perm an integer
    permutation of ``range(size)`` (1-D)."""
    perm = require_integer_array("perm", perm)
    require_ndim("perm", perm, 1)
    if not np.array_equal(np.sort(perm), np.arange(perm.size)):
        raise FormatRuleError(f"perm: must be a permutation of 0..{perm.size - 1}; got repeated or out-of-range entries")
    inv = np.empty_like(perm)
    inv[perm] = np.arange(perm.size, dtype=perm.dtype)
    return inv


_PERM = weight_perm()
_PERM_INV = inverse_perm(_PERM)
_SCALE_PERM = scale_perm()
_SCALE_PERM_SINGLE = scale_perm_single()


# ----------------------------------------------------------------------------------------------
# Validation
# ----------------------------------------------------------------------------------------------
def check_kn(k: int, n: int) -> None:
    """The Marlin layout's shape rule: ``K`` (rows of the (K, N) weight) a positive multiple of 128 and
    ``N`` a positive multiple of 128 (the kernel's smallest thread_n; the official ``marlin.Layer``
    constructor asks 256, a packer's rule), both Python or NumPy ints; a ShapeError or FormatRuleError
    naming the value otherwise."""
    k, n = require_int("K", k), require_int("N", n)
    require_divisible("K", k, 128, "must be a positive multiple of 128 (official marlin.Layer rule)")
    require_divisible("N", n, 128, "must be a positive multiple of 128 (the Marlin kernel's smallest thread_n, "
                                   "picked for M <= 16; M > 16 needs 256)")


def check_group_size(group_size) -> int | None:
    """The group sizes the Marlin kernel supports: ``None`` (per channel) or 128; returns it as a
    Python int or ``None``, else a FormatRuleError naming the value."""
    return require_group_128(group_size, "the Marlin kernel")


def _scale_rows(k: int, group_size: int | None) -> int:
    return 1 if group_size is None else k // group_size


def _is_grouped(g_rows: int) -> bool:
    # The kernel (marlin_cuda.cpp) treats one scale row as per-channel; Layer.pack branches on
    # groupsize != K, which is the same thing. K = 128 with group 128 is therefore per-channel.
    return g_rows > 1


def check_scales(scales, k: int, n: int, group_size: int | None) -> np.ndarray:
    """The scales of a (K, N) Marlin weight: a float16 ndarray of shape ``(K // group_size, N)`` (one
    row per channel with ``group_size=None``; ``group_size`` as :func:`check_group_size` allows),
    every value finite; returns it, else a FormatRuleError, DtypeError, ShapeError or NonFiniteError
    naming the rule."""
    k, n = require_int("K", k, minimum=1), require_int("N", n, minimum=1)
    group_size = check_group_size(group_size)
    scales = require_dtype("scales", scales, np.float16)
    require_ndim("scales", scales, 2)
    require_shape("scales", scales, (_scale_rows(k, group_size), n))
    require_finite("scales", scales)
    return scales


# ----------------------------------------------------------------------------------------------
# Weight permutation and packing
# ----------------------------------------------------------------------------------------------
def _tile_perm() -> np.ndarray:
    """:func:`weight_perm` re-expressed on a 16x64 tile flattened row-major (``64 row + col``)."""
    p = weight_perm()
    j, row, col = p // 256, (p % 256) // 16, p % 16
    return row * 64 + 16 * j + col


_TILE_PERM = _tile_perm()
_TILE_PERM_INV = inverse_perm(_TILE_PERM)


def _check_tiles(k: int, n: int) -> None:
    require_divisible("K", k, TILE, f"must be a positive multiple of {TILE} (16x64 tiles)")
    require_divisible("N", n, 64, "must be a positive multiple of 64 (16x64 tiles)")


def _check_scales_arg(name: str, s) -> tuple[np.ndarray, np.ndarray]:
    s = require_dtype(name, s, np.float16)
    require_ndim(name, s, 2)
    g, n = s.shape
    perm = _SCALE_PERM if _is_grouped(g) else _SCALE_PERM_SINGLE
    if g < 1:
        raise ShapeError(f"{name}: must have at least one row of scales; got shape {s.shape}")
    require_divisible(f"N (columns of {name})", n, perm.size, f"must be a positive multiple of {perm.size}")
    return s, perm


def permute_weights(q: np.ndarray) -> np.ndarray:
    """Tile reshuffle + :func:`weight_perm`: integer ``(K, N)`` (uint8 codes, or indices) -> the
    same dtype ``(K // 16, 16 N)``.

    Row ``kb`` of the result lists the codes of k-rows ``16kb..16kb+15`` in storage order
    (8 consecutive entries = one int32 word, nibble 0 first). Needs ``K % 16 == 0``, ``N % 64 == 0``.
    Official order of operations: 16x16 tiles flattened row-major, then ``perm`` per 1024 chunk;
    here both are folded into one gather on each 16x64 tile flattened row-major (same result).
    """
    q = require_integer_array("q", q)      # any integer dtype: refsim explain permutes index arrays
    require_ndim("q", q, 2)
    k, n = q.shape
    _check_tiles(k, n)
    t = q.reshape(k // TILE, TILE, n // 64, 64)  # (K/16, 16, N/64, 64): kb, row, nb, col
    t = t.transpose(0, 2, 1, 3).reshape(k // TILE, n // 64, 1024)  # (K/16, N/64, 16*64) per tile
    return np.take(t, _TILE_PERM, axis=2).reshape(k // TILE, n * TILE)  # (K/16, 16N)


def unpermute_weights(p: np.ndarray, k: int, n: int) -> np.ndarray:
    """Inverse of :func:`permute_weights`: uint8 ``(K // 16, 16 N)`` -> uint8 ``(K, N)``."""
    k, n = require_int("k", k, minimum=1), require_int("n", n, minimum=1)
    _check_tiles(k, n)
    p = require_integer_array("p", p)
    require_shape("p", p, (k // TILE, TILE * n))
    t = np.take(p.reshape(k // TILE, n // 64, 1024), _TILE_PERM_INV, axis=2)  # (K/16, N/64, 1024)
    t = t.reshape(k // TILE, n // 64, TILE, 64)  # (K/16, N/64, 16, 64)
    return t.transpose(0, 2, 1, 3).reshape(k, n)  # (K/16, 16, N/64, 64) -> (K, N)


def _nibbles_to_words(p: np.ndarray) -> np.ndarray:
    """uint8 nibbles ``(R, 8W)`` -> int32 ``(R, W)``, nibble i of each 8 at bits 4i..4i+3."""
    r, c = p.shape
    pairs = p.reshape(r, c // 2, 2)  # (R, 4W, 2): low nibble, high nibble of each byte
    byte = (pairs[:, :, 0] | (pairs[:, :, 1] << 4)).astype(np.uint8)  # (R, 4W)
    return np.ascontiguousarray(byte).view(np.dtype("<u4")).astype(np.uint32).view(np.int32)


def _words_to_nibbles(b: np.ndarray) -> np.ndarray:
    """int32 ``(R, W)`` -> uint8 nibbles ``(R, 8W)`` (inverse of :func:`_nibbles_to_words`)."""
    r, w = b.shape
    byte = np.ascontiguousarray(b, dtype=np.dtype("<i4")).view(np.uint8)  # (R, 4W), LSB byte first
    out = np.empty((r, 4 * w, 2), dtype=np.uint8)  # (R, 4W, 2): low nibble, high nibble
    np.bitwise_and(byte, 0xF, out=out[:, :, 0])
    np.right_shift(byte, 4, out=out[:, :, 1])
    return out.reshape(r, 8 * w)


def permute_scales(scales: np.ndarray) -> np.ndarray:
    """Permute fp16 scales ``(G, N)`` to the kernel's order; grouped iff ``G > 1``."""
    scales, perm = _check_scales_arg("scales", scales)
    g, n = scales.shape
    return scales.reshape(-1, perm.size)[:, perm].reshape(g, n)


def unpermute_scales(s: np.ndarray) -> np.ndarray:
    """Inverse of :func:`permute_scales`."""
    s, perm = _check_scales_arg("s", s)
    g, n = s.shape
    return s.reshape(-1, perm.size)[:, inverse_perm(perm)].reshape(g, n)


def pack(q: np.ndarray, scales: np.ndarray, group_size: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Pack codes and scales into Marlin's format (bit-identical to ``marlin.Layer.pack``).

    ``q``: uint8 ``(K, N)`` codes in ``[0, 15]`` (value ``q - 8``), ``K % 128 == 0``,
    ``N % 128 == 0`` (the kernel's rule; ``marlin.Layer`` asks 256). ``scales``: float16 ``(K // group_size, N)``, or ``(1, N)`` for
    ``group_size=None``. ``group_size``: 128 or ``None``.
    Returns ``(B, s)``: ``B`` int32 ``(K // 16, 2 N)`` (layout in the module docstring), ``s``
    float16 of the scales' shape with columns permuted (grouped iff more than one scale row).
    Inputs are not modified.
    """
    q, scales, group_size = _check_pack_args(q, scales, group_size)
    return _pack_codes(q), permute_scales(scales)


def _pack_codes(q: np.ndarray) -> np.ndarray:
    """uint8 ``(K, N)`` validated codes -> int32 ``(K/16, 2N)``: the compiled packer
    (:mod:`refsim.native.packers`, same bits) when available, else :func:`_pack_codes_numpy`."""
    if _fast.available():
        return _fast.marlin_pack(np.ascontiguousarray(q)).view(np.int32)
    return _pack_codes_numpy(q)


def _pack_codes_numpy(q: np.ndarray) -> np.ndarray:
    """uint8 ``(K, N)`` -> int32 ``(K/16, 2N)``: :func:`permute_weights` fused with the nibble fold.

    Storage slots ``2i`` and ``2i+1`` are the low and high nibble of byte ``i``, so gathering the
    even and odd slots separately yields the bytes directly (half the temporaries).
    """
    k, n = q.shape
    t = q.reshape(k // TILE, TILE, n // 64, 64)  # (K/16, 16, N/64, 64): kb, row, nb, col
    t = t.transpose(0, 2, 1, 3).reshape(k // TILE, n // 64, 1024)  # (K/16, N/64, 1024) per tile
    lo = np.take(t, _TILE_PERM[0::2], axis=2)  # (K/16, N/64, 512) even nibbles
    hi = np.take(t, _TILE_PERM[1::2], axis=2)  # (K/16, N/64, 512) odd nibbles
    np.left_shift(hi, 4, out=hi)
    np.bitwise_or(lo, hi, out=lo)  # bytes, little-endian order inside each word
    return lo.reshape(k // TILE, 2 * n * 4).view(np.dtype("<u4")).view(np.int32)  # (K/16, 2N)


def _check_pack_args(q, scales, group_size):
    q = require_dtype("q", q, np.uint8)
    require_ndim("q", q, 2)
    k, n = q.shape
    check_kn(k, n)
    group_size = check_group_size(group_size)
    q = require_codes("q", q, 4)
    scales = check_scales(scales, k, n, group_size)
    return q, scales, group_size


def pack_reference(q: np.ndarray, scales: np.ndarray, group_size: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Plain-loop twin of :func:`pack`, written from the closed form in the spec block."""
    q, scales, group_size = _check_pack_args(q, scales, group_size)
    k, n = q.shape
    b = np.zeros((k // 16, 2 * n), dtype=np.int64)
    for kb in range(k // 16):
        for w in range(2 * n):
            nb, lane, j = w // 128, (w % 128) // 4, w % 4
            t, g = lane % 4, lane // 4
            r, c = 16 * kb + 2 * t, 64 * nb + 16 * j + g
            elems = [q[r, c], q[r + 8, c], q[r, c + 8], q[r + 8, c + 8],
                     q[r + 1, c], q[r + 9, c], q[r + 1, c + 8], q[r + 9, c + 8]]
            word = 0
            for i, e in enumerate(elems):
                word |= int(e) << (4 * i)
            b[kb, w] = word - (1 << 32) if word >= (1 << 31) else word
    g_rows = scales.shape[0]
    s = np.empty_like(scales)
    for row in range(g_rows):
        for col in range(n):
            if _is_grouped(g_rows):
                base, i, jj = col - col % 64, (col % 64) // 8, col % 8
                s[row, col] = scales[row, base + i + 8 * jj]
            else:
                base, i, e = col - col % 32, (col % 32) // 8, col % 8
                s[row, col] = scales[row, base + 2 * i + (0, 1, 8, 9, 16, 17, 24, 25)[e]]
    return b.astype(np.int32), s


def _check_packed(b, s):
    b = require_dtype("B", b, np.int32)
    require_ndim("B", b, 2)
    s = require_dtype("s", s, np.float16)
    require_ndim("s", s, 2)
    kb, w = b.shape
    k, n = 16 * kb, w // 2
    if w % 2:
        raise ShapeError(f"B: must have 2*N columns (N % 128 == 0); got {w} columns")
    check_kn(k, n)
    if s.shape[1] != n:
        raise ShapeError(f"s: must have N={n} columns (B has 2*N={w}); got shape {s.shape}")
    g = s.shape[0]
    if not (g == 1 or (g > 1 and k % g == 0 and k // g == 128)):
        raise ShapeError(f"s: must have 1 row or K/128={k // 128} rows; got {g} rows (K={k})")
    return b, s, k, n


def unpack(b: np.ndarray, s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Inverse of :func:`pack`: ``(B int32 (K/16, 2N), s float16 (G, N))`` -> ``(q uint8 (K, N), scales)``.

    Grouped vs per-channel is read from ``G`` exactly as the kernel does (``G == 1`` per-channel).
    """
    b, s, k, n = _check_packed(b, s)
    if _fast.available():               # compiled twin (refsim.native.packers), same bits
        q = _fast.marlin_unpack(np.ascontiguousarray(b).view(np.uint32), k, n)
    else:
        q = unpermute_weights(_words_to_nibbles(b), k, n)
    return q, unpermute_scales(s)


def unpack_reference(b: np.ndarray, s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Plain-loop twin of :func:`unpack` (reads the closed-form table backwards)."""
    b, s, k, n = _check_packed(b, s)
    q = np.zeros((k, n), dtype=np.uint8)
    for kb in range(k // 16):
        for w in range(2 * n):
            word = int(b[kb, w]) & 0xFFFFFFFF
            nb, lane, j = w // 128, (w % 128) // 4, w % 4
            t, g = lane % 4, lane // 4
            r, c = 16 * kb + 2 * t, 64 * nb + 16 * j + g
            where = [(r, c), (r + 8, c), (r, c + 8), (r + 8, c + 8),
                     (r + 1, c), (r + 9, c), (r + 1, c + 8), (r + 9, c + 8)]
            for i, (rr, cc) in enumerate(where):
                q[rr, cc] = (word >> (4 * i)) & 0xF
    scales = np.empty_like(s)
    g_rows = s.shape[0]
    for row in range(g_rows):
        for col in range(n):
            if _is_grouped(g_rows):
                base, i, jj = col - col % 64, (col % 64) // 8, col % 8
                scales[row, base + i + 8 * jj] = s[row, col]
            else:
                base, i, e = col - col % 32, (col % 32) // 8, col % 8
                scales[row, base + 2 * i + (0, 1, 8, 9, 16, 17, 24, 25)[e]] = s[row, col]
    return q, scales


# ----------------------------------------------------------------------------------------------
# Dequantization as the kernel materialises it
# ----------------------------------------------------------------------------------------------
def dequantize(b: np.ndarray, s: np.ndarray) -> np.ndarray:
    """The fp16 B operand the kernel feeds the tensor core, as a ``(K, N)`` float16 array.

    Grouped (``s`` has ``K/128`` rows): ``fp16((q - 8) * s[k // 128, n])`` (``__hmul2``, RN; the
    product of two fp16 values is exact in float32, so one rounding). Per-channel (one row):
    ``fp16(q - 8)`` exactly; the scale is applied later to the output, see
    :func:`apply_output_scale`. Use :func:`effective_weights` for the scaled weights.
    """
    q, scales = unpack(b, s)
    vals = (q.astype(np.int16) - CODE_BIAS).astype(np.float16)  # exact: |q - 8| <= 8
    if not _is_grouped(scales.shape[0]):
        return vals
    gs = q.shape[0] // scales.shape[0]
    s_full = np.repeat(scales, gs, axis=0)  # (K, N)
    return (vals.astype(np.float32) * s_full.astype(np.float32)).astype(np.float16)


def dequantize_reference(b: np.ndarray, s: np.ndarray) -> np.ndarray:
    """Plain-loop twin of :func:`dequantize` (one element at a time, fp16 scalar multiply)."""
    q, scales = unpack_reference(b, s)
    k, n = q.shape
    g_rows = scales.shape[0]
    out = np.empty((k, n), dtype=np.float16)
    for kk in range(k):
        for nn in range(n):
            v = np.float16(int(q[kk, nn]) - CODE_BIAS)
            out[kk, nn] = v * scales[kk // (k // g_rows), nn] if _is_grouped(g_rows) else v
    return out


def effective_weights(b: np.ndarray, s: np.ndarray) -> np.ndarray:
    """Scaled weights ``fp16((q - 8) * s)`` float16 ``(K, N)`` for both modes (per-channel: row 0)."""
    q, scales = unpack(b, s)
    k = q.shape[0]
    s_full = np.repeat(scales, k // scales.shape[0], axis=0)  # (K, N)
    vals = (q.astype(np.int16) - CODE_BIAS).astype(np.float32)
    return (vals * s_full.astype(np.float32)).astype(np.float16)


def apply_output_scale(c: np.ndarray, s: np.ndarray) -> np.ndarray:
    """Per-channel epilogue: ``fp16(fp16(c) * scales[0, n])``; ``c`` float32/float16 ``(M, N)``.

    ``s`` is the *packed* one-row scale array (``(1, N)``); it is unpermuted here.
    """
    s = require_ndim("s", require_dtype("s", s, np.float16), 2)
    if s.shape[0] != 1:
        raise ShapeError(f"s: the output scale applies to per-channel (1-row) scales; got shape {s.shape}")
    scales = unpermute_scales(s)[0]  # (N,)
    c = require_ndim("c", require_dtype("c", c, np.float16, np.float32), 2)
    if c.shape[1] != scales.shape[0]:
        raise ShapeError(f"c: must have N = {scales.shape[0]} columns (the scales'); got shape {c.shape}")
    c16 = c.astype(np.float16)
    return (c16.astype(np.float32) * scales.astype(np.float32)).astype(np.float16)


# ----------------------------------------------------------------------------------------------
# Reference GEMM
# ----------------------------------------------------------------------------------------------
def reference_gemm(a: np.ndarray, b: np.ndarray, s: np.ndarray) -> np.ndarray:
    """``C = A @ W`` with an exact-sum reference: float16 ``A (M, K)`` -> float16 ``C (M, N)``.

    This is the FORMAT's exact reference (exact math, the output roundings only), not an oracle
    of what the Marlin kernel writes: the kernel's k-warp chains and reductions round in between,
    so kernel bits are checked against :func:`refsim.emulator.marlin_kernel.marlin_gemm` (what
    ``refsim.testing.check_kernel`` uses), and differ from this function by a few ULP.

    ``B`` int32 ``(K/16, 2N)`` and ``s`` float16 ``(G, N)`` as returned by :func:`pack`.
    Grouped: ``C = fp16(sum_k A[m,k] * dequantize(B,s)[k,n])``; per-channel:
    ``C = fp16(fp16(sum_k A[m,k] * (q[k,n] - 8)) * s[n])`` (the kernel's two output roundings).
    The sum is exact (every fp16 product is an integer multiple of ``2**-48``; the products are
    summed as Python integers) and rounded to fp16 once, round-to-nearest-even. This is the
    accuracy target, not the kernel's tensor-core arithmetic (the emulator issue models that).
    Slow (object arithmetic): meant for small test problems.
    """
    a = require_dtype("A", a, np.float16)
    require_ndim("A", a, 2)
    w = dequantize(b, s)  # (K, N) fp16 operand
    if a.shape[1] != w.shape[0]:
        raise ShapeError(f"A: must have K={w.shape[0]} columns; got shape {a.shape}")
    require_finite("A", a)
    ai = (a.astype(np.float64) * 2.0**24).astype(np.int64).astype(object)  # exact: fp16 = int * 2**-24
    wi = (w.astype(np.float64) * 2.0**24).astype(np.int64).astype(object)
    exact = ai @ wi  # (M, N) Python ints, value * 2**48, exact
    c = np.empty(exact.shape, dtype=np.float16)
    for idx in np.ndindex(*exact.shape):
        c[idx] = round_to_float(Fraction(int(exact[idx]), 1 << 48), np.float16)
    if s.shape[0] == 1:
        return apply_output_scale(c, s)
    return c
