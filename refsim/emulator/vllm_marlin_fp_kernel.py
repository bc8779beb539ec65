"""Warp-level emulation of vLLM's Marlin kernel on FP8 and NVFP4 weights: what it writes, bit for bit.

Spec
----
computes        C (M, N) float16 = A (M, K) float16 @ W (K, N), W prepared by
                :func:`refsim.formats.marlin_fp.prepare_fp8` (``B`` int32 (K/16, 4N), ``s`` float16 (1, N))
                or :func:`refsim.formats.marlin_fp.prepare_nvfp4` (``B`` int32 (K/16, 2N), ``s`` uint8
                (K/16, N), ``g`` float32 (1,)), for one architecture's tensor core (:mod:`refsim.arith.tensor_core`).
kernel          ``Marlin<kFloat16, kFE4M3fn, kFloat16, kFloat16, 256, 1, 8, 8, false, 4, -1, false>`` and
                ``Marlin<kFloat16, kFE2M1f, kFloat16, kFE4M3fn, 256, 1, 8, 8, false, 4, 1, false>``: 256
                threads, 16 x 128 x 128 block tile (thread_m_blocks 1, thread_n_blocks 8, thread_k_blocks 8).
geometry        the launches :func:`refsim.cuda.official_vllm.vllm_marlin_fp_gemm` makes: one block per
                (16-row chunk, 128-column tile), so every column tile is one slice over all of K (no
                global reduction, no fp32 C_tmp; ``use_atomic_add`` and ``use_fp32_reduce`` false).
dataflow        in the kernel's order (vLLM 0.33.0 ``csrc/quantization/marlin/marlin_template.h``):
                1. B operand (``matmul``): fp8: the shift trick's exact ``e4m3 * 2^-8``; nvfp4: the shift
                   trick's ``e2m1 * 2^-14`` times the S0E5M3 scale of its 16-row group (``scale``,
                   ``__hmul2``, one fp16 RN): :func:`refsim.formats.marlin_fp.kernel_operand`;
                2. 8 warps = 2 n-warps x 4 k-warps; k-warp w chains ``mma.m16n8k16.f32`` over the k16
                   blocks ``8 tile + 2 w + s`` (s = 0, 1; ``b_sh_wr_iters`` = 2 consecutive blocks, unlike
                   the official Marlin's stride), tiles in increasing order, from an fp32 zero;
                3. ``thread_block_reduce``: ``a0 + (a1 + (a3 + a2))`` in fp32;
                4. fp8 (8-bit, per-channel): ``scale_float`` = ``__fmul_rn(c, float(s[n]))``, one fp32
                   rounding, before the output conversion; nvfp4: ``c * global_scale`` (fp32) in ``write``;
                5. ``write``: ``__float2half_rn``.
oracle          :func:`vllm_marlin_fp_gemm_reference` (plain loops, the scalar
                :func:`refsim.arith.tensor_core.fdpa`); the compiled kernel through refsim.ptx is checked
                against :func:`vllm_marlin_fp_gemm` bit for bit (tests/cuda/test_official_vllm.py).
"""

from __future__ import annotations

import numpy as np

from refsim._validate import (require_choice, require_dtype, require_finite, require_instance, require_int,
                              require_ndim, require_shape)
from refsim.arith import fp
from refsim.arith import mma_steps, tensor_core as tc
from refsim.errors import FormatRuleError, ShapeError
from refsim.formats import marlin, marlin_fp

__all__ = ["THREAD_K", "THREAD_N", "K_WARPS", "check_inputs", "vllm_marlin_fp_gemm", "vllm_marlin_fp_gemm_reference"]

THREAD_K = 128        # thread_k_blocks 8
THREAD_N = 128        # thread_n_blocks 8
K_WARPS = 4           # 256 threads / (thread_n / 64 n-warps * 32)
_STEPS = THREAD_K // 16 // K_WARPS     # b_sh_wr_iters: consecutive k16 blocks per k-warp and tile


def check_inputs(kind, A, B, s, global_scale, arch):
    """The rules of one call: ``kind`` in ``marlin_fp.KINDS``; ``A`` float16 (M, K) finite, M >= 1;
    fp8: ``B`` int32 (K/16, 4N), ``s`` float16 (1, N) finite; nvfp4: ``B`` int32 (K/16, 2N), ``s`` uint8
    (K/16, N), ``global_scale`` float32 (1,) finite; K % 128 and N % 128 (the instantiated tile);
    ``arch`` a tensor-core model. Returns ``(kind, A, B, s, global_scale, K, N)``."""
    kind = require_choice("kind", kind, marlin_fp.KINDS)
    A = require_finite("A", require_ndim("A", require_dtype("A", A, np.float16), 2))
    B = require_ndim("B", require_dtype("B", B, np.int32), 2)
    tc.model(arch)
    k = 16 * B.shape[0]
    n = B.shape[1] // (4 if kind == "fp8" else 2)
    if k % THREAD_K or n % THREAD_N or k == 0 or n == 0 or A.shape[0] == 0:
        raise ShapeError(f"B: the kernel's 128x128 tile needs K % 128 == 0 and N % 128 == 0, M >= 1; got B "
                         f"{B.shape} (K = {k}, N = {n}) and A {A.shape}")
    if A.shape[1] != k:
        raise ShapeError(f"A: must have K = 16 * B.shape[0] = {k} columns; got shape {A.shape}")
    if kind == "fp8":
        s = require_finite("s", require_shape("s", require_dtype("s", s, np.float16), (1, n)))
        if global_scale is not None:
            raise FormatRuleError("global_scale: only nvfp4 has a tensor scale; got one for fp8")
    else:
        s = require_shape("s", require_dtype("s", s, np.uint8), (k // 16, n))
        if global_scale is None:
            raise FormatRuleError("global_scale: nvfp4 needs the float32 (1,) tensor scale; got None")
        global_scale = require_finite("global_scale", require_shape(
            "global_scale", require_dtype("global_scale", global_scale, np.float32), (1,)))
    return kind, A, B, s, global_scale, k, n


def _epilogue(kind, P, s, global_scale):
    """Steps 4-5 on the reduced fp32 (..., N): per-channel or tensor scale in fp32, then fp16."""
    if kind == "fp8":
        P = fp.f32_mul(P, marlin.unpermute_scales(s)[0].astype(np.float32))        # (N,) broadcast
    else:
        P = fp.f32_mul(P, global_scale)                                             # (1,) broadcast
    return fp.cvt_f32_to_f16(P)


def vllm_marlin_fp_gemm(kind: str, A: np.ndarray, B: np.ndarray, s: np.ndarray,
                        global_scale: np.ndarray | None = None, *, arch: str = "sm_80") -> np.ndarray:
    """What vLLM's Marlin kernel writes for ``C = A @ W`` (``kind`` "fp8" or "nvfp4") on ``arch``:
    float16 (M, N). Inputs as :func:`check_inputs` states; not modified."""
    kind, A, B, s, global_scale, k, n = check_inputs(kind, A, B, s, global_scale, arch)
    return _gemm(kind, A, B, s, global_scale, arch, native=None)


def _gemm(kind, A, B, s, global_scale, arch, *, native):
    a_op = mma_steps.MmaOperand(A)                                               # (M, K)
    b_op = mma_steps.MmaOperand(marlin_fp.kernel_operand(kind, B, s))            # (K, N)
    m, k = A.shape
    acc = np.zeros((K_WARPS, m, b_op.bits.shape[1]), np.float32)                 # (W, M, N)
    for tile in range(k // THREAD_K):
        for step in range(_STEPS):
            kbs = tile * (THREAD_K // 16) + _STEPS * np.arange(K_WARPS) + step  # k16 block of each k-warp
            acc = mma_steps.mma_k16_f32_steps(arch, a_op, b_op, kbs, acc, native=native)
    P = fp.f32_add(acc[0], fp.f32_add(acc[1], fp.f32_add(acc[3], acc[2])))      # thread_block_reduce
    return _epilogue(kind, P, s, global_scale)


def vllm_marlin_fp_gemm_reference(kind: str, A: np.ndarray, B: np.ndarray, s: np.ndarray,
                                  global_scale: np.ndarray | None = None, *, arch: str = "sm_80",
                                  cols=None) -> np.ndarray:
    """Plain-loop twin of :func:`vllm_marlin_fp_gemm`: one output element at a time, scalar T-FDPA
    blocks in the kernel's chain order. ``cols`` (a list of column indices) restricts the work; the
    result is then float16 (M, len(cols))."""
    kind, A, B, s, global_scale, k, n = check_inputs(kind, A, B, s, global_scale, arch)
    L = tc.model(arch).block
    W = marlin_fp.kernel_operand(kind, B, s)
    if cols is None:
        cols = list(range(n))
    else:
        require_instance("cols", cols, (list, tuple), "a list of column indices")
        cols = [require_int(f"cols[{i}]", c, minimum=0) for i, c in enumerate(cols)]
    if any(c >= n for c in cols):
        raise ShapeError(f"cols: column indices must lie in [0, {n}); got {cols}")
    C = np.empty((A.shape[0], len(cols)), np.float16)
    for row in range(A.shape[0]):
        for ci, col in enumerate(cols):
            accs = []
            for w in range(K_WARPS):
                acc = np.float32(0.0)
                for tile in range(k // THREAD_K):
                    for step in range(_STEPS):
                        kb = tile * (THREAD_K // 16) + _STEPS * w + step
                        for k0 in range(16 * kb, 16 * kb + 16, L):
                            acc = tc.fdpa(arch, A[row, k0:k0 + L], W[k0:k0 + L, col],
                                          np.asarray(acc, np.float32), np.float32)[()]
                accs.append(np.float32(acc))
            p = np.float32(accs[0] + np.float32(accs[1] + np.float32(accs[3] + accs[2])))
            if kind == "fp8":
                p = np.float32(p * np.float32(marlin.unpermute_scales(s)[0, col]))
            else:
                p = np.float32(p * global_scale[0])
            C[row, ci] = np.float16(p)
    return C
