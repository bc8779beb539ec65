"""The launch of bitsandbytes' NF4 GEMV ``kgemm_4bit_inference_naive<half, 128, 16>`` (csrc/kernels.cu)
for refsim's ``nf4`` format, as bitsandbytes' ``gemm_4bit_inference_naive`` (csrc/ops.cu) launches it
for a 1 x K activation: ceil(N / 4) blocks of 128 threads (one warp per output), arguments
(M = N, N = 1, K, A, B, absmax, datatype, out, lda = N, ldb = (K + 1) / 2, ldc = N, blocksize = 64);
``datatype`` is the 16-entry NF4 table, ``B`` the (N, K) weight packed two codes a byte, high nibble
first (refsim.formats.bnb4's layout). The kernel serves one activation row and reads past the end
of ``absmax`` when N % 4 != 0 (its last block's idle warps load it unguarded): check it with
``--legal "m==1, n%4==0"``.
docs/harness.md shows how to build its PTX and check it."""

from __future__ import annotations

import numpy as np

from refsim.cuda import LaunchPlan
from refsim.formats import bnb4


def plan(x, weight, absmax):
    """x f16 (1, K), weight u8 (N*K/2,), absmax f32 (ceil(N*K/64),) -> the LaunchPlan writing y f16 (1, N)."""
    k = x.shape[1]
    n = weight.size * 2 // k
    out = np.zeros((1, n), np.float16)
    args = (np.int32(n), np.int32(1), np.int32(k), x, weight, absmax, bnb4.code_table("nf4"), out,
            np.int32(n), np.int32((k + 1) // 2), np.int32(n), np.int32(64))
    return LaunchPlan(grid=-(-n // 4), block=128, args=args, out=out)


