"""The packed 4-bit weight layout of refsim's Hopper W4A16 kernel (``refsim/cuda/hopper_w4a16.cu``).

Spec block
----------
- **Element**: 4-bit unsigned code ``q`` in ``[0, 15]`` meaning ``q - 8`` (symmetric, zero point 8),
  times an fp16 scale per (group of 128 rows of K, column): ``W[k, n] = fp16(q - 8) * s[k // 128, n]``.
- **Container**: ``Wp`` uint32 ``(N/64 * K/16, 128)``: row ``j * (K/16) + t`` holds k16 step ``t``
  (rows ``16 t .. 16 t + 15`` of K) of column tile ``j`` (columns ``64 j .. 64 j + 63``), one word
  per thread of the consumer warpgroup. The kernel TMA-loads 4 such rows (one 64-deep k-tile,
  2,048 bytes) per pipeline stage and each thread reads its own word: no shuffles, no ldmatrix.
- **Word ``l``** (``l = 32 w + 4 g + c``: warp ``w``, lane ``4 g + c``) holds that thread's wgmma
  A fragment of the 64 x 16 tile ``A = W^T`` (rows = columns n of W, the kernel swaps A and B), the
  f16 register layout of ``wgmma .m64nNk16`` (warp ``w``'s 16 rows laid out as ``mma.m16n8k16``'s A,
  :func:`refsim.arith.fragments.mma_m16n8k16_a`)::

      element  e0      e1        e2        e3          e4        e5        e6          e7
      (row, k) (r,2c)  (r,2c+1)  (r+8,2c)  (r+8,2c+1)  (r,2c+8)  (r,2c+9)  (r+8,2c+8)  (r+8,2c+9)
      r = 16 w + g; n = 64 j + row, k = 16 t + k

  in the interleaved nibble order of :mod:`refsim.formats.dequant_tricks`: nibble ``i`` (bits
  ``4i .. 4i+3``) holds element ``INT4_INTERLEAVE[i] = (0, 2, 4, 6, 1, 3, 5, 7)[i]``, so
  :func:`refsim.formats.dequant_tricks.ft_int4_to_fp16` turns the word into the A registers
  ``a0..a3 = (e0, e1) (e2, e3) (e4, e5) (e6, e7)`` minus 8.
- **Scales**: fp16 ``(K / 128, N)``, stored as given (row = group, no permutation).
- **Shape rules**: ``K % 128 == 0`` (a scale group is two 64-deep k-tiles), ``N % 64 == 0`` (the
  wgmma M); :func:`check_kn`.
- **Invariants**: every ``(k, n)`` lies in exactly one nibble; ``unpack(pack(q), K, N) == q``.
- **Design**: the "simplest layout whose word a thread converts straight into its wgmma A
  registers" (the idea of vLLM's Machete, whose CUTLASS layouts are more general); not a
  checkpoint format: :func:`pack` reorders any 4-bit codes, e.g. GPTQ's with zero point 8.
"""

from __future__ import annotations

import functools

import numpy as np

from refsim._validate import (require_bounded, require_codes, require_divisible, require_int, require_ndim,
                              require_words)
from refsim.arith import fragments
from refsim.formats.dequant_tricks import INT4_INTERLEAVE

__all__ = ["TILE_N", "K_STEP", "GROUP", "check_kn", "pack", "unpack", "word_coords"]

TILE_N = 64     # columns of W per tile: the wgmma M
K_STEP = 16     # rows of K per word row: the wgmma K
GROUP = 128     # rows of K per scale


def check_kn(k: int, n: int) -> tuple[int, int]:
    """K and N of the layout (ints): K a positive multiple of 128, N a positive multiple of 64
    (ShapeError; a non-integer: FormatRuleError)."""
    k, n = require_int("K", k), require_int("N", n)
    require_divisible("K", k, GROUP, "must be a positive multiple of 128 (scale groups of 128, k-tiles of 64)")
    require_divisible("N", n, TILE_N, "must be a positive multiple of 64 (the wgmma M of one tile)")
    return k, n


@functools.lru_cache(maxsize=1)
def word_coords() -> np.ndarray:
    """int64 ``(128, 8, 2)``: ``(row, k)`` inside the 64 x 16 tile ``W^T`` of element ``e`` of word
    ``l`` (the table of the module spec, element order e0..e7, not nibble order)."""
    a = fragments.mma_m16n8k16_a().coords                      # (32, 8, 2): warp-level (row, k)
    out = np.concatenate([a + np.array([16 * w, 0]) for w in range(4)])   # word l = 32 w + lane
    out.setflags(write=False)
    return out


def _indices(k: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(k index, n index) int64 ``(N/64, K/16, 128, 8)`` of every element of every word, element order."""
    c = word_coords()
    j = np.arange(n // TILE_N)[:, None, None, None]
    t = np.arange(k // K_STEP)[None, :, None, None]
    return t * K_STEP + c[None, None, :, :, 1], j * TILE_N + c[None, None, :, :, 0]


def pack(q: np.ndarray) -> np.ndarray:
    """Codes uint8/any integer ``(K, N)`` in ``[0, 15]`` -> ``Wp`` uint32 ``(N/64 * K/16, 128)``
    (module spec). K % 128, N % 64 (ShapeError); codes out of range: FormatRuleError."""
    q = require_codes("q", q, 4)
    require_ndim("q", q, 2)
    k, n = check_kn(*q.shape)
    require_bounded("q", q.size)
    ki, ni = _indices(k, n)
    codes = q[ki, ni].astype(np.uint32)                         # (N/64, K/16, 128, 8), element order
    words = np.zeros(codes.shape[:-1], np.uint32)
    for nib, e in enumerate(INT4_INTERLEAVE):
        words |= codes[..., e] << np.uint32(4 * nib)
    return words.reshape(-1, 128)


def unpack(wp: np.ndarray, k: int, n: int) -> np.ndarray:
    """Inverse of :func:`pack`: ``Wp`` int32/uint32 ``(N/64 * K/16, 128)`` -> codes uint8 ``(K, N)``."""
    k, n = check_kn(k, n)
    wp = require_words("wp", wp, (n // TILE_N * (k // K_STEP), 128)).view(np.uint32)
    words = wp.reshape(n // TILE_N, k // K_STEP, 128)
    ki, ni = _indices(k, n)
    q = np.empty((k, n), np.uint8)
    for nib, e in enumerate(INT4_INTERLEAVE):
        q[ki[..., e], ni[..., e]] = (words >> np.uint32(4 * nib)) & np.uint32(0xF)
    return q
