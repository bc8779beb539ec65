"""llama.cpp's CUDA dequantizers ``dequantize_block_q4_0<half>`` and ``dequantize_block_q4_K<half>``
(ggml/src/ggml-cuda/convert.cu) as ``refsim check`` kernels for the ``q4_0`` and ``q4_k`` formats.

The dequantizer runs unchanged through refsim.ptx and writes the fp16 weights (N, K) from the GGUF
bytes, launched as llama.cpp's ``dequantize_row_q4_0_cuda`` / ``dequantize_row_q4_K_cuda`` launch it:
ceil(N*K / 256) blocks of 32 threads (Q4_0 with ``nb32 = N*K / 32``). The product is then the
harness's stated dataflow (:func:`refsim.emulator.dequant_gemm.dequant_gemm`: one fp32 chain over k
ascending), so a bit-exact verdict is a verdict on the dequantizer: its fp16 weights equal ggml's
float32 dequantization rounded to fp16, on every pinned edge and drawn case.

The PTX comes from the user's copy of those two kernels (``LLAMA_DEQUANT_CU``, default
``llama_dequant.cu`` in the working directory; docs/harness.md says what it holds); refsim does not ship
llama.cpp's source.
"""

from __future__ import annotations

import os

import numpy as np

from refsim.cuda import LaunchPlan, user_kernel
from refsim.emulator.dequant_gemm import dequant_gemm

SOURCE = os.environ.get("LLAMA_DEQUANT_CU", "llama_dequant.cu")


def _plan_q4_0(weight, k):
    n = weight.shape[0]
    w = np.zeros((n, k), np.float16)
    return LaunchPlan(grid=-(-n * k // 256), block=32, args=(weight, w, np.int32(n * k // 32)), out=w)


def _plan_q4_k(weight, k):
    n = weight.shape[0]
    w = np.zeros((n, k), np.float16)
    return LaunchPlan(grid=n * k // 256, block=32, args=(weight, w), out=w)


def _gemm(entry, plan):
    dequantize = user_kernel(SOURCE, kernel=entry, launch=plan)

    def kernel(x, weight):
        """x f16 (M, K), weight u8 (N, row bytes) -> y f16 (M, N): llama.cpp's fp16 weights, then the
        stated fp32 chain."""
        w16 = dequantize(weight, x.shape[1])                              # (N, K) f16
        return dequant_gemm(x, np.ascontiguousarray(w16.T).astype(np.float32))
    return kernel


q4_0 = _gemm("dequantize_block_q4_0", _plan_q4_0)
q4_k = _gemm("dequantize_block_q4_K", _plan_q4_k)
