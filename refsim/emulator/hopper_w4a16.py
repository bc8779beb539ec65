"""Exact emulation of refsim's Hopper W4A16 GEMM (``refsim/cuda/hopper_w4a16.cu``, the Machete design).

Spec
----
computes        C float16 (M, N) = X float16 (M, K) @ W, W the scaled weights
                ``W[k, n] = fp16(q[k, n] - 8) * s[k // 128, n]`` (one fp16 multiply, RNE; the int4 ->
                fp16 conversion is exact), q the 4-bit codes of ``Wp`` (:mod:`refsim.formats.hopper_w4a16`),
                s float16 (K / 128, N). Scales are applied to the weights, in registers, before the
                tensor core: there are no per-group partial sums.
dataflow        block (j, i) computes ``D = W^T X^T`` for columns 64 j .. 64 j + 63 and tokens
                64 i .. 64 i + 63 (tokens past M read as +0: TMA's out-of-bounds fill). D starts at +0
                and takes K / 16 ``wgmma.mma_async.m64n64k16.f32.f16.f16`` steps in increasing k,
                ``D = wgmma(W^T[:, 16 s:16 s + 16], X^T[16 s:16 s + 16, :], D)``
                (:func:`refsim.arith.wgmma.wgmma`, kind ``f32.f16.f16``: per element one fused block
                of 16 products and D); ``C[m, n] = cvt.rn.f16.f32(D[n, m])``.
                Each output depends only on its own row of W^T and column of X^T, so the padding
                tokens cannot reach a stored output.
legal           M >= 1, K % 128 == 0, N % 64 == 0 (:func:`check_inputs`).
reference       :func:`hopper_w4a16_gemm_reference` follows the kernel thread by thread: each consumer
                thread's word through :func:`refsim.formats.dequant_tricks.ft_int4_to_fp16` and
                :func:`~refsim.formats.dequant_tricks.hmul2` by its two rows' scales, the words placed by
                the wgmma A fragment layout, one wgmma per (block, k16 step); tested equal.

One block, one k-tile (4 wgmma steps; D is the block's 64 x 64 fp32 accumulator)::

    Wp rows (4 x 128 words) --ft_int4_to_fp16, x s--> A_0 A_1 A_2 A_3 (64 x 16 fp16 each)
    X tile (64 tokens x 64 k, smem)                    B_0 B_1 B_2 B_3 (16 x 64 fp16 each)
    D = wgmma(A_3, B_3, wgmma(A_2, B_2, wgmma(A_1, B_1, wgmma(A_0, B_0, D))))
"""

from __future__ import annotations

import numpy as np

from refsim._validate import MAX_ELEMENTS, require_bounded, require_dtype, require_ndim, require_words
from refsim.arith import fp
from refsim.arith import wgmma as wg
from refsim.errors import ShapeError
from refsim.formats import dequant_tricks as dq
from refsim.formats import hopper_w4a16 as layout

__all__ = ["TILE_N", "TILE_M", "TILE_K", "KIND", "check_inputs", "weights", "hopper_w4a16_gemm",
           "hopper_w4a16_gemm_reference"]

TILE_N = layout.TILE_N     # output columns per block (the wgmma M)
TILE_M = 64                # tokens per block (the wgmma N)
TILE_K = 64                # k per pipeline stage (4 wgmma steps)
KIND = "f32.f16.f16"       # the wgmma kind: f16 A and B, f32 accumulator


def _check_scales(scales, k) -> tuple[np.ndarray, int]:
    """(scales, N): float16 (K / 128, N) with K % 128 and N % 64 (layout.check_kn)."""
    scales = require_ndim("scales", require_dtype("scales", scales, np.float16), 2)
    k, n = layout.check_kn(k, scales.shape[1])
    if scales.shape[0] != k // layout.GROUP:
        raise ShapeError(f"scales: must have K / 128 = {k // layout.GROUP} rows (one per group of 128); "
                         f"got shape {scales.shape}")
    return scales, n


def check_inputs(x, wp, scales) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, int, int]:
    """``(x, wp as uint32, scales, M, K, N)`` after the kernel's rules: x float16 (M, K), M >= 1;
    scales float16 (K / 128, N); wp int32/uint32 (N/64 * K/16, 128); K % 128, N % 64 (ShapeError,
    DtypeError)."""
    x = require_ndim("x", require_dtype("x", x, np.float16), 2)
    m, k = x.shape
    if m < 1:
        raise ShapeError(f"x: needs at least one row (M >= 1); got shape {x.shape}")
    scales, n = _check_scales(scales, k)
    wp = require_words("wp", wp, (n // layout.TILE_N * (k // layout.K_STEP), 128)).view(np.uint32)
    require_bounded("M x N x K", m * n * k, MAX_ELEMENTS, what="multiply-adds")
    return x, wp, scales, m, k, n


def weights(wp: np.ndarray, scales: np.ndarray, k: int) -> np.ndarray:
    """The scaled weights float16 (K, N) the tensor core sees: ``fp16(q - 8) * s[k // 128]`` (RNE).
    wp uint32 (N/64 * K/16, 128), scales float16 (K / 128, N)."""
    scales, n = _check_scales(scales, k)
    q = layout.unpack(wp, k, n)
    diff = (q.astype(np.int16) - 8).astype(np.float16)                     # exact
    return fp.f16_mul(diff, np.repeat(scales, layout.GROUP, axis=0))


def hopper_w4a16_gemm(x: np.ndarray, wp: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """C float16 (M, N) of the kernel (module spec): x float16 (M, K), wp uint32 (N/64 * K/16, 128)
    (:func:`refsim.formats.hopper_w4a16.pack`), scales float16 (K / 128, N)."""
    x, wp, scales, m, k, n = check_inputs(x, wp, scales)
    w = weights(wp, scales, k)
    a = np.ascontiguousarray(w.T).reshape(n // TILE_N, 1, TILE_N, k)                  # (J, 1, 64, K): W^T tiles
    c = np.empty((m, n), np.float16)
    full = m // TILE_M * TILE_M
    # the full token tiles batched; the last partial tile computed only over its tokens rounded up to 8
    # (the wgmma N granule): outputs are independent columns of D, so the trimmed padding changes no bit
    for m0, m1, width in ((0, full, TILE_M), (full, m, -(-(m - full) // 8) * 8)):
        if m1 > m0:
            tiles = -(-(m1 - m0) // width)
            xp = np.zeros((tiles * width, k), np.float16)
            xp[:m1 - m0] = x[m0:m1]
            b = np.ascontiguousarray(xp.reshape(tiles, width, k).transpose(0, 2, 1))[None]   # (1, T, K, w)
            d = np.zeros((n // TILE_N, tiles, TILE_N, width), np.float32)                  # (J, T, 64 n, w m)
            for s in range(k // 16):
                d = wg.wgmma(KIND, a[..., 16 * s:16 * s + 16], b[..., 16 * s:16 * s + 16, :], d)
            tile_c = fp.cvt_f32_to_f16(d).transpose(1, 3, 0, 2).reshape(tiles * width, n)   # C[m, n] = D[n, m]
            c[m0:m1] = tile_c[:m1 - m0]
    return c


def hopper_w4a16_gemm_reference(x: np.ndarray, wp: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """Plain twin of :func:`hopper_w4a16_gemm`, written as the kernel runs: per block and k16 step,
    each consumer thread's word converted by the FasterTransformer trick and scaled by its rows'
    scales (``hmul2``), placed by the A fragment layout; one :func:`refsim.arith.wgmma.wgmma` per step;
    the epilogue per token. Each output depends only on its own column of D, so a partial token tile
    is computed over its tokens rounded up to 8 (the wgmma N granule), as the fast path does. Same
    arguments and result."""
    x, wp, scales, m, k, n = check_inputs(x, wp, scales)
    coords = layout.word_coords()                          # (128, 8, 2): (row, k) of element e of word l
    t = np.arange(128)
    r = 16 * (t // 32) + (t % 32) // 4                      # thread t's rows r and r + 8 of the tile
    c = np.zeros((m, n), np.float16)
    for j in range(n // TILE_N):
        for i in range(-(-m // TILE_M)):
            cols = min(TILE_M, -(-(m - TILE_M * i) // 8) * 8)        # the tile's tokens up to the wgmma N granule
            d = np.zeros((TILE_N, cols), np.float32)
            for s in range(k // 16):
                srow = scales[16 * s // layout.GROUP, TILE_N * j:TILE_N * (j + 1)].view(np.uint16).astype(np.uint32)
                s_lo, s_hi = srow[r] * 0x10001, srow[r + 8] * 0x10001        # (s, s) half2 per thread
                regs = dq.ft_int4_to_fp16(wp[j * (k // 16) + s])                # (128, 4): a0..a3 = q - 8
                regs = np.stack([dq.hmul2(regs[:, v], s_lo if v % 2 == 0 else s_hi) for v in range(4)], axis=1)
                halves = (regs[:, :, None] >> np.array([0, 16], np.uint32)) & 0xFFFF   # (128, 4, 2)
                a_bits = np.zeros((TILE_N, 16), np.uint16)
                a_bits[coords[..., 0], coords[..., 1]] = halves.reshape(128, 8)       # element e = 2 v + half
                b = np.zeros((16, cols), np.float16)
                rows = x[TILE_M * i:TILE_M * (i + 1), 16 * s:16 * s + 16]
                b[:, :rows.shape[0]] = rows.T
                d = wg.wgmma(KIND, a_bits, b, d)
            for col in range(min(TILE_M, m - TILE_M * i)):          # the epilogue's guard m < M
                c[TILE_M * i + col, TILE_N * j:TILE_N * (j + 1)] = fp.cvt_f32_to_f16(d[:, col])
    return c
