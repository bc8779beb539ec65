"""Sparse-Marlin: 2:4 structured-sparse FP16 x INT4 weights (IST-DASLab/Sparse-Marlin), bit for bit.

Spec block
----------
- **Element**: 4-bit code ``q`` in ``[0, 15]`` meaning ``q - 8`` (as dense Marlin); 2 of every 4
  consecutive K elements of a column are kept (2:4 along K).
- **Pruning** (``mask_creator`` applied to the *unsigned codes*): in each group of 4 consecutive
  k of a column, the two smallest codes are pruned (ascending argsort, first two). The official
  code uses ``torch.argsort`` (not stable); refsim breaks ties by lower index first (stable),
  which is an assumption for tied codes. Pruned entries become code 0.
- **Compression** (CUTLASS ``sparse_semi_structured_from_dense_cutlass`` on the masked code
  matrix viewed ``(N, K)``): per group of 4, a 4-bit metadata nibble ``idx0 | idx1 << 2`` with the
  positions of the two values kept (``idx0 < idx1``), derived from the **non-zero flags** of the
  codes; groups with fewer than two non-zero codes use CUTLASS's fixed fallback encodings (all-zero
  -> ``0b1110``). Because a kept code 0 (value -8) looks like a zero, such a group's metadata may
  point at a pruned position (also code 0): :func:`dequantize` shows what the kernel then uses.
- **Values**: ``(N, K/2)`` kept codes -> transposed ``(K/2, N)`` -> Marlin-like tiling with the
  2:4 permutation (:func:`weight_perm_2_4`) and the same ``[0,2,4,6,1,3,5,7]`` nibble interleave:
  ``B`` int32 ``(K/32, 2N)``.
- **Metadata**: int16 ``(N, K/16)``, 4 nibbles per int16 (group ``4c+i`` in nibble ``i``), then
  scattered into CUTLASS ``ColumnMajorInterleaved<2>`` order (:func:`meta_reorder_offsets`).
- **Scales**: fp16 ``(G, N)``, grouped (``G > 1``) permuted inside each 8 columns by
  ``[0,4,1,5,2,6,3,7]``; per-channel identity. K = 128 with group 128 is per-channel (as dense).
- **Shape rules**: ``K % 128 == 0``, ``N % 256 == 0`` (the documented intent of ``Layer_2_4``; its
  check ``outfeatures != 256 == 0`` is a chained comparison that never fires), group 128 or None.
- **Source matched**: IST-DASLab/Sparse-Marlin ``marlin/__init__.py`` (``_get_perms_2_4``,
  ``Layer_2_4.pack`` with ``trans=True``) and ``marlin/_semi_structured_conversions.py``
  (``mask_creator``, ``sparse_semi_structured_from_dense_cutlass``,
  ``_calculate_meta_reordering_scatter_offsets``), commit ``c2ffa2395a3ada26c8cb7f910a5ec65bd3ce288a``.
  The official pack hard-codes ``.cuda()``; the match is against a CPU transliteration.
  ``convention="vllm"``: vllm-project/vllm
  ``vllm/model_executor/layers/quantization/utils/marlin_utils_test_24.py`` (``inject_24``,
  ``compress_quantized_24_weight``), commit ``9942f6d1a86fe19b751c8fa93edd4fa2d2623d3c``: the mask
  comes from the float weights and the compression sees ``q - 8``, so no kept value is lost.

Metadata nibble for one group of 4 codes (k = 4c .. 4c+3 of column n)::

    codes  [ 3, 0, 9, 12 ]  -> keep k=2,3 -> nibble 0b11_10 = idx1=3, idx0=2 = 0xE
    int16 meta[n, c//4] = nib(4c'+3) nib(4c'+2) nib(4c'+1) nib(4c')   (MSB .. LSB, c' = c//4*4)
"""

from __future__ import annotations

import numpy as np

from refsim._validate import (
    require_array,
    require_bounded,
    require_codes,
    require_divisible,
    require_dtype,
    require_finite,
    require_group_128,
    require_int,
    require_ndim,
    require_shape,
)
from refsim.errors import DtypeError, FormatRuleError, ShapeError
from refsim.formats import marlin as _marlin

__all__ = [
    "weight_perm_2_4",
    "scale_perm_2_4",
    "scale_perm_single_2_4",
    "mask_2_4",
    "compress_2_4",
    "compress_2_4_reference",
    "decompress_2_4",
    "meta_reorder_offsets",
    "CONVENTIONS",
    "pack",
    "unpack",
    "dequantize",
]

TILE = 16


def weight_perm_2_4() -> np.ndarray:
    """1024-entry permutation of a 16 (k) x 64 (n) tile of the compressed ``(K/2, N)`` codes.

    Flat tile position ``256 nt + 16 row + col`` (``nt`` = 16x16 sub-tile). Lane ``l`` (t = l % 4,
    c = l // 4) and word ``j`` take rows ``2t, 2t+1, 2t+8, 2t+9`` of sub-tile ``c // 2`` at
    columns ``8 (c % 2) + j`` (first 4) and ``8 (c % 2) + 4 + j`` (last 4), then the nibble
    interleave ``[0,2,4,6,1,3,5,7]``: the A-operand fragments of ``mma.sp.m16n8k32``.
    """
    perm = np.empty(1024, dtype=np.int64)
    i = 0
    for lane in range(32):
        t, c = lane % 4, lane // 4
        rows = (2 * t, 2 * t + 1, 2 * t + 8, 2 * t + 9)
        for j in range(4):
            elems = [256 * (c // 2) + 16 * r + 8 * (c % 2) + 4 * blk + j for blk in (0, 1) for r in rows]
            for nib in range(8):
                perm[i] = elems[_marlin.INTERLEAVE[nib]]
                i += 1
    return perm


def scale_perm_2_4() -> np.ndarray:
    """Grouped 2:4 scale permutation (64 entries): ``[0,4,1,5,2,6,3,7]`` inside each 8."""
    return (8 * np.arange(8)[:, None] + np.array([0, 4, 1, 5, 2, 6, 3, 7])[None, :]).reshape(64).astype(np.int64)


def scale_perm_single_2_4() -> np.ndarray:
    """Per-channel 2:4 scale permutation (64 entries): the identity."""
    return np.arange(64, dtype=np.int64)


_PERM = weight_perm_2_4()
_PERM_INV = _marlin.inverse_perm(_PERM)


def mask_2_4(x: np.ndarray) -> np.ndarray:
    """Keep mask, bool ``(K, N)``: per column, in each 4 consecutive k, the 2 largest ``|x|``.

    ``x`` numeric ``(K, N)``, ``K % 4 == 0``: the unsigned codes for Sparse-Marlin's own pack
    (``mask_creator(w.T)`` on codes), or the float weights for vLLM's ``inject_24``. Ascending
    stable argsort of ``|x|`` per group; the first two are pruned (ties: the lower k is pruned
    first; the official ``torch.argsort`` leaves tie order unspecified).
    """
    x = require_array("x", x)
    if not (np.issubdtype(x.dtype, np.integer) or np.issubdtype(x.dtype, np.floating)):
        raise DtypeError(f"x: must be a numeric (integer or float) array; got {x.dtype}")
    require_ndim("x", x, 2)
    if np.issubdtype(x.dtype, np.floating):
        require_finite("x", x)
    require_divisible("K (rows of x)", x.shape[0], 4, "must be a positive multiple of 4 (groups of 4)")
    k, n = x.shape
    g = np.abs(x).T.reshape(n, k // 4, 4)  # (N, K/4, 4)
    order = np.argsort(g, axis=2, kind="stable")
    mask = np.ones_like(g, dtype=bool)
    np.put_along_axis(mask, order[:, :, :2], False, axis=2)
    return mask.reshape(n, k).T  # (K, N)


def _encode(nz: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """CUTLASS 2:4 index encoding from non-zero flags ``nz (..., 4)`` -> ``(idx0, idx1)``."""
    m0, m1, m3 = nz[..., 0], nz[..., 1], nz[..., 3]
    expr0 = m0 & m1
    expr1 = ~m0 & m1
    expr2 = ~m0 & ~m1
    idx0 = expr1.astype(np.int64) | (expr2.astype(np.int64) << 1)
    idx1 = (expr0 | expr2 | m3).astype(np.int64) | ((expr1 | ~m1).astype(np.int64) << 1)
    return idx0, idx1


def meta_reorder_offsets(rows: int, meta_ncols: int) -> np.ndarray:
    """Scatter offsets (int64 ``(rows * meta_ncols,)``) of int16 metadata into CUTLASS
    ``ColumnMajorInterleaved<2>`` order: ``reordered[off[i]] = meta.flat[i]``.

    Row remap inside 64-row groups (group_y = 32 for int16), a 2x2 block swap (top-right <->
    bottom-left), then column-major with interleave 2.
    """
    rows, meta_ncols = require_int("rows", rows, minimum=1), require_int("meta_ncols", meta_ncols, minimum=1)
    require_bounded("rows * meta_ncols", rows * meta_ncols)
    r = np.repeat(np.arange(rows)[:, None], meta_ncols, axis=1)  # (rows, cols)
    c = np.repeat(np.arange(meta_ncols)[None, :], rows, axis=0)
    r = r // 64 * 64 + (r % 2) * 2 + (r % 8) // 4 + ((r % 32) % 4) // 2 * 32 + ((r % 64) // 8) * 4
    topright = ((r % 2 == 0) & (c % 2 == 1)).astype(np.int64)
    bottomleft = ((r % 2 == 1) & (c % 2 == 0)).astype(np.int64)
    r = r + topright - bottomleft
    c = c - (topright - bottomleft)
    return ((c // 2) * rows * 2 + r * 2 + c % 2).reshape(-1)


def _check_dense(dense) -> np.ndarray:
    """Shared by :func:`compress_2_4` and its plain twin: uint8 (R, C), C a multiple of 16."""
    dense = require_dtype("dense", dense, np.uint8)
    require_ndim("dense", dense, 2)
    require_divisible("C (columns of dense)", dense.shape[1], 16, "must be a positive multiple of 16 (one int16 metadata word)")
    return dense


def compress_2_4(dense: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """CUTLASS 2:4 compression of codes ``dense`` uint8 ``(R, C)`` (rows = output channels).

    Returns ``(values uint8 (R, C/2), meta int16 (R, C/16))``; ``meta`` is in plain row order
    (not yet reordered; see :func:`meta_reorder_offsets`).
    """
    dense = _check_dense(dense)
    r, c = dense.shape
    d4 = dense.reshape(r, c // 4, 4)  # (R, C/4, 4)
    idx0, idx1 = _encode(d4 != 0)
    v0 = np.take_along_axis(d4, idx0[..., None], axis=2)[..., 0]
    v1 = np.take_along_axis(d4, idx1[..., None], axis=2)[..., 0]
    values = np.stack([v0, v1], axis=-1).reshape(r, c // 2)  # (R, C/2)
    nib = (idx0 | (idx1 << 2)).reshape(r, c // 16, 4).astype(np.uint16)  # (R, C/16, 4)
    meta = nib[..., 0] | (nib[..., 1] << 4) | (nib[..., 2] << 8) | (nib[..., 3] << 12)
    return values.astype(np.uint8), meta.astype(np.uint16).view(np.int16)


def compress_2_4_reference(dense: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Plain-loop twin of :func:`compress_2_4`, from the encoding table in CUTLASS's comments."""
    table = {  # non-zero pattern (m0, m1, m2, m3) -> (idx0, idx1)
        (1, 1, 0, 0): (0, 1), (1, 0, 1, 0): (0, 2), (0, 1, 1, 0): (1, 2), (1, 0, 0, 1): (0, 3),
        (0, 1, 0, 1): (1, 3), (0, 0, 1, 1): (2, 3),
        (0, 0, 0, 0): (2, 3), (0, 0, 0, 1): (2, 3), (0, 0, 1, 0): (2, 3), (0, 1, 0, 0): (1, 2),
        (0, 1, 1, 1): (1, 3), (1, 0, 0, 0): (0, 2), (1, 0, 1, 1): (0, 3), (1, 1, 0, 1): (0, 1),
        (1, 1, 1, 0): (0, 1), (1, 1, 1, 1): (0, 1),
    }
    dense = _check_dense(dense)
    r, c = dense.shape
    values = np.zeros((r, c // 2), dtype=np.uint8)
    meta = np.zeros((r, c // 16), dtype=np.uint16)
    for row in range(r):
        for grp in range(c // 4):
            quad = [int(x) for x in dense[row, 4 * grp:4 * grp + 4]]
            i0, i1 = table[tuple(int(x != 0) for x in quad)]
            values[row, 2 * grp], values[row, 2 * grp + 1] = quad[i0], quad[i1]
            meta[row, grp // 4] |= (i0 | (i1 << 2)) << (4 * (grp % 4))
    return values, meta.view(np.int16)


def _compress_signed(signed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`compress_2_4` on signed values ``(R, C)`` (non-zero flags of ``q - 8``); returns the
    kept values with the bias 8 restored, as uint8 codes."""
    r, c = signed.shape
    d4 = signed.reshape(r, c // 4, 4)  # (R, C/4, 4)
    idx0, idx1 = _encode(d4 != 0)
    v0 = np.take_along_axis(d4, idx0[..., None], axis=2)[..., 0]
    v1 = np.take_along_axis(d4, idx1[..., None], axis=2)[..., 0]
    values = (np.stack([v0, v1], axis=-1).reshape(r, c // 2) + 8).astype(np.uint8)
    nib = (idx0 | (idx1 << 2)).reshape(r, c // 16, 4).astype(np.uint16)
    meta = nib[..., 0] | (nib[..., 1] << 4) | (nib[..., 2] << 8) | (nib[..., 3] << 12)
    return values, meta.astype(np.uint16).view(np.int16)


def decompress_2_4(values: np.ndarray, meta: np.ndarray) -> np.ndarray:
    """Inverse of :func:`compress_2_4`: uint8 ``(R, C/2)`` + int16 ``(R, C/16)`` -> uint8 ``(R, C)``
    with the kept codes at their metadata positions and 0 elsewhere."""
    values = require_dtype("values", values, np.uint8)
    require_ndim("values", values, 2)
    require_divisible("C/2 (columns of values)", values.shape[1], 8, "must be a positive multiple of 8")
    meta = require_dtype("meta", meta, np.int16, np.uint16)
    require_shape("meta", meta, (values.shape[0], values.shape[1] // 8))
    r, half = values.shape
    m = meta.view(np.uint16).astype(np.int64)
    nibs = np.stack([(m >> (4 * i)) & 0xF for i in range(4)], axis=-1).reshape(r, half // 2)  # (R, C/4)
    idx = np.stack([nibs & 3, nibs >> 2], axis=-1)  # (R, C/4, 2)
    dense = np.zeros((r, half // 2, 4), dtype=np.uint8)
    np.put_along_axis(dense, idx, values.reshape(r, half // 2, 2), axis=2)
    return dense.reshape(r, 2 * half)


def _check(q, scales, group_size):
    q = require_dtype("q", q, np.uint8)
    require_ndim("q", q, 2)
    k, n = q.shape
    require_divisible("K", k, 128, "must be a positive multiple of 128 (Sparse-Marlin)")
    require_divisible("N", n, 256, "must be a positive multiple of 256 (Sparse-Marlin)")
    group_size = require_group_128(group_size, "Sparse-Marlin")
    q = require_codes("q", q, 4)
    scales = require_dtype("scales", scales, np.float16)
    require_shape("scales", scales, (1 if group_size is None else k // group_size, n))
    require_finite("scales", scales)
    return q, scales


CONVENTIONS = ("sparse-marlin", "vllm")


def pack(q: np.ndarray, scales: np.ndarray, group_size: int | None, *,
         convention: str = "sparse-marlin", mask: np.ndarray | None = None):
    """Prune 2:4, compress and pack.

    ``q`` uint8 ``(K, N)`` codes, ``scales`` float16 ``(K/128, N)`` or ``(1, N)``,
    ``group_size`` 128 or None. Returns ``(B int32 (K/32, 2N), meta int16 (N, K/16), s float16
    (G, N))``, ``meta`` already in CUTLASS reordered order.

    ``convention="sparse-marlin"`` (default) is ``Layer_2_4.pack(trans=True)``: the mask keeps the
    two largest *unsigned codes* (``mask`` must be None) and pruned codes become 0, so metadata
    comes from the non-zero flags of the codes. ``convention="vllm"`` is vLLM's
    ``marlin_24_quantize`` path: ``mask`` (bool ``(K, N)``, 2 of every 4 along K; default
    ``mask_2_4(q - 8)``) is usually computed from the float weights, pruned entries become code 8
    (value 0), and ``compress_quantized_24_weight`` compresses ``q - 8`` (so kept zeros are real
    zeros) then adds 8 back. vLLM later reinterprets ``meta`` as ``(K/32, 2N)`` without moving data.
    """
    q, scales = _check(q, scales, group_size)
    k, n = q.shape
    if convention not in CONVENTIONS:
        raise FormatRuleError(f"convention: must be one of {list(CONVENTIONS)}; got {convention!r}")
    if convention == "sparse-marlin":
        if mask is not None:
            raise FormatRuleError("mask: Sparse-Marlin's own pack derives the mask from the codes; got a mask")
        masked = np.where(mask_2_4(q), q, np.uint8(0))  # (K, N)
        values, meta = compress_2_4(masked.T)  # (N, K/2), (N, K/16)
    else:
        if mask is None:
            mask = mask_2_4(q.astype(np.int16) - 8)
        mask = require_dtype("mask", mask, np.bool_)
        require_shape("mask", mask, (k, n))
        if not (mask.reshape(k // 4, 4, n).sum(axis=1) == 2).all():
            raise FormatRuleError("mask: must keep exactly 2 of every 4 consecutive k per column; got another count")
        signed = np.where(mask, q.astype(np.int16) - 8, np.int16(0))  # (K, N), pruned -> value 0
        values, meta = _compress_signed(signed.T)  # (N, K/2) codes, (N, K/16)
    reordered = np.empty(meta.size, dtype=np.int16)
    reordered[meta_reorder_offsets(n, k // 16)] = meta.reshape(-1)
    v = values.T  # (K/2, N)
    kh = k // 2
    t = v.reshape(kh // TILE, TILE, n // TILE, TILE).transpose(0, 2, 1, 3)  # (K/32, N/16, 16, 16)
    t = t.reshape(kh // TILE, n // 64, 1024)[:, :, _PERM]  # (K/32, N/64, 1024)
    b = _marlin._nibbles_to_words(t.reshape(kh // TILE, n * TILE))
    g = scales.shape[0]
    sp = scale_perm_2_4() if g > 1 else scale_perm_single_2_4()
    s = scales.reshape(-1, 64)[:, sp].reshape(g, n)
    return b, reordered.reshape(n, k // 16), s


def unpack(b: np.ndarray, meta: np.ndarray, s: np.ndarray):
    """Inverse of :func:`pack`: returns ``(q uint8 (K, N), keep bool (K, N), scales (G, N))``.

    ``q`` holds the codes the kernel sees at the metadata positions and 0 elsewhere; ``keep`` is
    the metadata's position set (2 per group of 4).
    """
    b = require_dtype("B", b, np.int32)
    meta = require_dtype("meta", meta, np.int16)
    s = require_dtype("s", s, np.float16)
    require_ndim("B", b, 2)
    kb, w = b.shape
    k, n = 32 * kb, w // 2
    require_shape("meta", meta, (n, k // 16))
    if s.ndim != 2 or s.shape[1] != n:
        raise ShapeError(f"s: must be (G, N={n}); got shape {s.shape}")
    if s.shape[0] not in (1, k // 128):
        raise ShapeError(f"s: must have 1 row or K/128={k // 128} rows; got {s.shape[0]} rows (K={k})")
    kh = k // 2
    nib = _marlin._words_to_nibbles(b).reshape(kh // TILE, n // 64, 1024)[:, :, _PERM_INV]
    v = nib.reshape(kh // TILE, n // TILE, TILE, TILE).transpose(0, 2, 1, 3).reshape(kh, n)  # (K/2, N)
    plain = meta.reshape(-1)[meta_reorder_offsets(n, k // 16)].reshape(n, k // 16)
    dense = decompress_2_4(v.T.copy(), plain)  # (N, K)
    ones = decompress_2_4(np.ones((n, kh), np.uint8), plain)  # position set
    g = s.shape[0]
    sp = scale_perm_2_4() if g > 1 else scale_perm_single_2_4()
    scales = s.reshape(-1, 64)[:, _marlin.inverse_perm(sp)].reshape(g, n)
    return dense.T.copy(), ones.T.astype(bool), scales


def dequantize(b: np.ndarray, meta: np.ndarray, s: np.ndarray) -> np.ndarray:
    """Dense fp16 ``(K, N)`` operand the sparse MMA effectively multiplies: at the metadata
    positions ``fp16((q - 8) * s[k // 128, n])`` when grouped, ``fp16(q - 8)`` per-channel (the
    scale then multiplies the output, as in dense Marlin); ``+0`` at the other positions."""
    q, keep, scales = unpack(b, meta, s)
    k = q.shape[0]
    vals = q.astype(np.float32) - 8
    if scales.shape[0] > 1:
        vals = vals * np.repeat(scales, k // scales.shape[0], axis=0).astype(np.float32)  # (K, N)
    return np.where(keep, vals.astype(np.float16), np.float16(0))
