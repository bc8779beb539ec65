"""The launch of vLLM's AWQ GEMM (``gemm_forward_4bit_cuda_m16nXk32<128>``, awq_gemm_sm80.ptx.gz; see
README.md) for refsim's ``awq`` format, as vLLM's host wrapper ``awq_gemm`` launches it when
N % 128 == 0: grid ceil(M/16) * N/128 * split_k_iters blocks of (32, 2) threads, arguments
(group_size, split_k_iters, x, qweight, scales, qzeros, M, K, N, out).

split_k_iters is 1 here: vLLM passes 8 and sums the (8, M, N) fp16 partials with ``torch.sum(0)``
afterwards, a host step a LaunchPlan cannot express; with 1 the kernel writes the (M, N) result itself,
each output one chain of fp32 mma accumulations over all of K, rounded to fp16 once."""

from __future__ import annotations

import numpy as np

from refsim.cuda import LaunchPlan

SPLIT_K_ITERS = 1


def plan(x, qweight, qzeros, scales):
    """x f16 (M, K), qweight i32 (K, N/8), qzeros i32 (G, N/8), scales f16 (G, N) -> the LaunchPlan
    writing y f16 (M, N)."""
    m, k = x.shape
    n = scales.shape[1]
    group_size = k // scales.shape[0]
    out = np.zeros((m, n), np.float16)
    grid = -(-m // 16) * (n // 128) * SPLIT_K_ITERS
    args = (np.int32(group_size), np.int32(SPLIT_K_ITERS), x, qweight, scales, qzeros,
            np.int32(m), np.int32(k), np.int32(n), out)
    return LaunchPlan(grid=grid, block=(32, 2), args=args, out=out)
