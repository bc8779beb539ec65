"""The weight-only GEMM that ``check_kernel`` states for the block-scaled formats (FP8, MXFP4,
NVFP4, NF4, GGUF): the plainest dataflow, written out so that bit-exact mode has one to compare.

Spec
----
    inputs     x float16 (M, K) activations; W float32 (K, N) the weights exactly as the format's
               library dequantizes them (refsim.formats.fp8 / mx / bnb4 / gguf), K the reduction dim
    weights    each weight rounded once to float16, the compute dtype (round to nearest even,
               subnormals kept, overflow to inf): ``W16 = fp16(W)``
    products   ``fp32(x) * fp32(W16)``: exact (11 x 11 significand bits fit in fp32's 24, and the
               smallest product 2^-48 is an fp32 normal)
    sum        one fp32 accumulator per output, k = 0, 1, ..., K-1 in order, from +0
    output     ``y = fp16(acc)`` (RNE, overflow to inf); a NaN (a NaN weight, whatever the
               activation) is written as the canonical fp16 NaN 0x7FFF (``cvt.rn.f16.f32``)

Real kernels differ from this dataflow in their order (split-K, tensor-core trees) and sometimes in
where they round a weight (fp16 scale times fp16 element, ...): check them with
``mode="accuracy"``, which accepts every accumulation as precise as the stated one
(docs/harness.md).
"""

from __future__ import annotations

import numpy as np

from refsim._validate import require_bounded, require_dtype, require_ndim
from refsim.arith import fp
from refsim.errors import ShapeError

__all__ = ["dequant_gemm", "dequant_gemm_reference"]


def _check(x, w):
    x = require_ndim("x", require_dtype("x", x, np.float16), 2)
    w = require_ndim("w", require_dtype("w", w, np.float32), 2)
    if x.shape[1] != w.shape[0] or 0 in x.shape + w.shape:
        raise ShapeError(f"x, w: must be (M, K) and (K, N) with the same K, none of them 0; got {x.shape}, {w.shape}")
    require_bounded("M * N (outputs)", x.shape[0] * w.shape[1])
    return x, w


def dequant_gemm(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """float16 (M, N): ``x`` float16 (M, K) times ``fp16(w)``, ``w`` float32 (K, N), summed in one
    fp32 chain over k ascending per output, rounded to fp16 once (module spec; NaN -> 0x7FFF)."""
    x, w = _check(x, w)
    xf = fp.cvt_f16_to_f32(x)                                        # (M, K), exact
    with np.errstate(all="ignore"):
        wf = fp.cvt_f16_to_f32(w.astype(np.float16))                 # (K, N): one RNE to fp16, then exact
        acc = np.zeros((x.shape[0], w.shape[1]), np.float32)
        for k in range(x.shape[1]):
            acc = acc + xf[:, k:k + 1] * wf[k:k + 1, :]              # (M, 1) * (1, N): exact product, one fp32 add
    return fp.cvt_f32_to_f16(acc)


def dequant_gemm_reference(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """:func:`dequant_gemm` as three plain loops over float32 scalars (small shapes only)."""
    x, w = _check(x, w)
    M, K = x.shape
    N = w.shape[1]
    out = np.zeros((M, N), np.float32)
    with np.errstate(all="ignore"):
        for m in range(M):
            for n in range(N):
                acc = np.float32(0)
                for k in range(K):
                    acc = np.float32(acc + np.float32(x[m, k]) * np.float32(np.float16(w[k, n])))
                out[m, n] = acc
    return fp.cvt_f32_to_f16(out)
