"""Exact emulation of refsim's W4A16 dequant-GEMV for GPTQ and AWQ checkpoints (``refsim/cuda/gptq_awq.cu``).

Spec
----
computes        y float16 (M, N) = x float16 (M, K) @ W, W float16 (K, N) the checkpoint's dequantized
                weights ``fp16(q - z) * s`` (one fp16 multiply, RNE; the integer difference is exact):
                GPTQ via :func:`refsim.formats.gptq.dequantize` (v1 zeros read ``(field & 15) + 1``,
                AutoGPTQ's torch path, or v2 ``field``), AWQ via :func:`refsim.formats.awq.dequantize`.
                4-bit only ("W4A16"); 1 <= M <= 8.
design          the "exllama / awq gemv" family: a thread per output column n, walking K in slabs of
                8 rows (one GPTQ word, eight AWQ words' nibbles); no K split, so no atomics and one
                deterministic order. DESIGN (refsim's, not an official kernel's): per batch row m and
                slab b (k0 = 8 b, b ascending):
                  h = half2(+0, +0); for i = 0..3: h = __hfma2(half2(w[k0+2i], w[k0+2i+1]),
                                                             half2(x[m,k0+2i], x[m,k0+2i+1]), h)
                      (two fp16 chains of 4 fused steps: even k in .x, odd k in .y)
                  acc[m] = acc[m] + float(h.x + h.y)     (add.rn.f16, then add.rn.f32; acc starts +0)
                y[m, n] = fp16_rn(acc[m]).
oracle          :func:`dequant_gemv_reference`: scalar loops, every fp16 fma through the exact rational
                oracle (:func:`refsim.arith.fp.fma_reference`).
source          design only; the checkpoint layouts are refsim.formats.gptq / refsim.formats.awq.
branches        :data:`BRANCHES` / :func:`plan_branches`: the paths of the launch plan (grid of 128-column
                blocks, batch rows, scale groups, act-order) a shape takes.

One column, one batch row, K = 16 (two slabs)::

    slab 0: h = chain over (w0 x0)(w2 x2)(w4 x4)(w6 x6) | (w1 x1)(w3 x3)(w5 x5)(w7 x7)
            acc = +0 + float(h.x + h.y)
    slab 1: the same over k = 8..15;   acc = acc + float(h.x + h.y);   y = fp16(acc)
"""

from __future__ import annotations

import numpy as np

from refsim._validate import require_bool, require_dtype, require_finite, require_int, require_ndim
from refsim.arith import fp
from refsim.errors import FormatRuleError, ShapeError
from refsim.formats import awq, gptq

__all__ = ["MAX_M", "SLAB", "check_x", "check_w", "dequant_gemv", "dequant_gemv_reference", "slab_sums", "gptq_gemv",
           "awq_gemv", "gptq_weights", "awq_weights", "BRANCHES", "plan_branches"]

MAX_M = 8
SLAB = 8
BLOCK = 128          # threads (output columns) per block of gptq_awq.cu's grid

#: the paths of the kernel's plan a shape can take (see :func:`plan_branches`)
BRANCHES: tuple[str, ...] = (
    "m_1",                # one batch row
    "m_gt1",              # several batch rows share each weight slab
    "n_one_block",        # N <= 128: one block
    "n_several_blocks",   # N > 128: several blocks
    "n_partial_block",    # N % 128 != 0: the last block has idle threads
    "per_channel",        # one scale group over all of K
    "grouped",            # several scale groups along K
    "act_order",          # g_idx not ascending (GPTQ act-order): groups read out of K order
)


def plan_branches(m: int, n: int, k: int, group_size: int | None, act_order: bool = False) -> frozenset[str]:
    """The :data:`BRANCHES` an (M, N, K) GEMV with ``group_size`` (None: per-channel) and ``act_order``
    takes (ints, 1 <= M <= 8)."""
    m = require_int("M", m, minimum=1)
    if m > MAX_M:
        raise ShapeError(f"M: the GEMV takes 1 to {MAX_M} batch rows; got {m}")
    n, k = require_int("N", n, minimum=1), require_int("K", k, minimum=1)
    grouped = group_size is not None and require_int("group_size", group_size, minimum=1) < k
    act_order = require_bool("act_order", act_order)
    out = {"m_1" if m == 1 else "m_gt1", "n_several_blocks" if n > BLOCK else "n_one_block",
           "grouped" if grouped else "per_channel"}
    if n % BLOCK:
        out.add("n_partial_block")
    if act_order:
        out.add("act_order")
    return frozenset(out)


def check_x(x: np.ndarray, k: int) -> np.ndarray:
    """Validate activations: float16 (M, K), 1 <= M <= 8, finite; returns x. ``k`` a positive int."""
    k = require_int("k", k, minimum=1)
    x = require_dtype("x", x, np.float16)
    require_ndim("x", x, 2)
    require_finite("x", x)
    m, kx = x.shape
    if not 1 <= m <= MAX_M:
        raise FormatRuleError(f"x: the GEMV serves 1..{MAX_M} batch rows (M); got {m}")
    if kx != k:
        raise ShapeError(f"x: must have K = {k} columns (the checkpoint's input features); got {kx}")
    return x


def check_w(W: np.ndarray) -> np.ndarray:
    """Validate dequantized weights: float16 (K, N), K a positive multiple of 8; returns W."""
    W = require_dtype("W", W, np.float16)
    require_ndim("W", W, 2)
    if W.shape[0] % SLAB or W.shape[0] == 0:
        raise ShapeError(f"W: K (rows) must be a positive multiple of {SLAB}; got {W.shape[0]}")
    return W


def dequant_gemv(x: np.ndarray, W: np.ndarray) -> np.ndarray:
    """The design's accumulation over dequantized weights: float16 (M, N), bit for bit.

    x float16 (M, K), 1 <= M <= 8, finite; W float16 (K, N), K % 8 == 0 (any fp16 values: the
    kernels feed it ``fp16(q - z) * s``). Inputs are not modified."""
    slab = fp.cvt_f16_to_f32(slab_sums(x, W))              # (M, slabs, N)
    acc = np.zeros(slab[:, 0].shape, np.float32)
    for b in range(slab.shape[1]):                         # fp32 adds in slab order
        acc = fp.f32_add(acc, slab[:, b])
    return fp.cvt_f32_to_f16(acc)


def slab_sums(x: np.ndarray, W: np.ndarray) -> np.ndarray:
    """The design's per-slab partials: float16 (M, K/8, N), ``h.x + h.y`` (add.rn.f16) after the two
    4-step ``hfma2`` chains of each slab. x float16 (M, K), 1 <= M <= 8, finite; W float16 (K, N),
    K % 8 == 0. :func:`dequant_gemv` adds them in fp32, slab by slab."""
    W = check_w(W)
    k, n = W.shape
    x = check_x(x, k)
    m = x.shape[0]
    Ws = W.reshape(k // SLAB, SLAB, n)                     # (slabs, 8, N)
    xs = x.reshape(m, k // SLAB, SLAB)                     # (M, slabs, 8)
    hx = np.zeros((m, k // SLAB, n), np.float16)           # (M, slabs, N) even-k chain
    hy = np.zeros((m, k // SLAB, n), np.float16)           # odd-k chain
    for i in range(SLAB // 2):
        hx = fp.f16_fma(Ws[None, :, 2 * i, :], xs[:, :, 2 * i, None], hx, fused=True)
        hy = fp.f16_fma(Ws[None, :, 2 * i + 1, :], xs[:, :, 2 * i + 1, None], hy, fused=True)
    return fp.f16_add(hx, hy)


def dequant_gemv_reference(x: np.ndarray, W: np.ndarray) -> np.ndarray:
    """Plain-loop twin of :func:`dequant_gemv`: one (m, n) at a time, exact-rational fmas."""
    W = check_w(W)
    k, n = W.shape
    x = check_x(x, k)
    one = np.ones(1, np.float16)
    y = np.empty((x.shape[0], n), np.float16)
    for m in range(x.shape[0]):
        for col in range(n):
            acc = np.float32(0.0)
            for k0 in range(0, k, SLAB):
                hx = hy = np.float16(0.0)
                for i in range(SLAB // 2):
                    a, b = k0 + 2 * i, k0 + 2 * i + 1
                    hx = fp.fma_reference(W[a, col] * one, x[m, a] * one, hx * one)[0]
                    hy = fp.fma_reference(W[b, col] * one, x[m, b] * one, hy * one)[0]
                with np.errstate(all="ignore"):                     # overflow to inf is the result
                    acc = np.float32(acc + np.float32(np.float16(hx + hy)))
            with np.errstate(all="ignore"):
                y[m, col] = np.float16(acc)
    return fp.canonical_nan(y)          # NaN is sticky: every NaN the GPU writes is the canonical one


def gptq_weights(ckpt: gptq.GPTQCheckpoint) -> np.ndarray:
    """float16 (K, N): the weights ``gptq_gemv`` multiplies (4-bit checkpoints only; v1 zeros read
    ``(field & 15) + 1`` as AutoGPTQ's torch path does, v2 zeros as stored)."""
    if not isinstance(ckpt, gptq.GPTQCheckpoint):
        raise ShapeError(f"ckpt: must be a refsim.formats.gptq.GPTQCheckpoint; got {type(ckpt).__name__}")
    if ckpt.bits != 4:
        raise FormatRuleError(f"ckpt.bits: the W4A16 GEMV reads 4-bit checkpoints; got {ckpt.bits}")
    return gptq.dequantize(ckpt, reader="mask_then_add")


def awq_weights(ckpt: awq.AWQCheckpoint) -> np.ndarray:
    """float16 (K, N): the weights ``awq_gemv`` multiplies."""
    if not isinstance(ckpt, awq.AWQCheckpoint):
        raise ShapeError(f"ckpt: must be a refsim.formats.awq.AWQCheckpoint; got {type(ckpt).__name__}")
    return awq.dequantize(ckpt)


def gptq_gemv(x: np.ndarray, ckpt: gptq.GPTQCheckpoint) -> np.ndarray:
    """What ``gptq_gemv`` in gptq_awq.cu writes: float16 (M, N) for x float16 (M, K), M 1..8,
    ckpt a 4-bit :class:`~refsim.formats.gptq.GPTQCheckpoint` (any ``g_idx``, v1 or v2 zeros)."""
    return dequant_gemv(x, gptq_weights(ckpt))


def awq_gemv(x: np.ndarray, ckpt: awq.AWQCheckpoint) -> np.ndarray:
    """What ``awq_gemv`` in gptq_awq.cu writes: float16 (M, N) for x float16 (M, K), M 1..8,
    ckpt an :class:`~refsim.formats.awq.AWQCheckpoint`."""
    return dequant_gemv(x, awq_weights(ckpt))
