"""GPTQ checkpoint -> Marlin weights without re-quantizing: the repack of vLLM's ``gptq_marlin``.

Spec
----
input           a GPTQ 4-bit checkpoint (:mod:`refsim.formats.gptq`): ``qweight`` int32 (K/8, N) packed
                along K, its zero points read back as int (G, N), and ``g_idx`` int (K,) for act-order.
output          Marlin's ``B`` int32 (K/16, 2N) (:mod:`refsim.formats.marlin`), the same codes in
                Marlin's tile order; the scales go through :func:`refsim.formats.marlin.permute_scales`.
symmetry        Marlin's value is ``(q - 8) * s`` with no zero-point tensor: every zero point must be
                8, or the repack is refused (an asymmetric checkpoint must be re-quantized,
                :mod:`refsim.quant.marlin`).
act-order       ``perm = act_order_perm(g_idx)`` (stable argsort): Marlin row k reads checkpoint row
                ``perm[k]``, so each group is a contiguous run of rows and the kernel runs in plain
                grouped mode; A's columns are permuted with the same ``perm`` (vLLM ``is_k_full``).
shape rules     Marlin's own (K % 128, N % 128: :func:`refsim.formats.marlin.pack`'s), so every result unpacks.
source          vllm-project/vllm ``csrc/quantization/gptq_marlin/gptq_marlin_repack.cu`` and
                ``marlin_permute_scales``, commit 0794945f839b0e07a15212ae4c23e711b63d6d23 (docs/sources.md).

Act-order in one picture (K = 8, two groups, g_idx as stored in the checkpoint)::

    checkpoint row k   0  1  2  3  4  5  6  7
    g_idx[k]           1  0  0  1  1  0  1  0
    perm = argsort     1  2  5  7  0  3  4  6      Marlin rows 0..3 = group 0, rows 4..7 = group 1
"""

from __future__ import annotations

import numpy as np

from refsim._validate import require_dtype, require_int, require_integer_array, require_ndim, require_shape
from refsim.errors import FormatRuleError, ShapeError
from refsim.formats import gptq
from refsim.formats.marlin import CODE_BIAS, check_kn, _pack_codes

__all__ = ["act_order_perm", "repack_gptq"]


def act_order_perm(g_idx: np.ndarray) -> np.ndarray:
    """Row permutation for an act-order GPTQ checkpoint: int32 ``(K,)`` = ``argsort(g_idx)``.

    After it, every group is a contiguous run of rows, so the kernel runs in ordinary grouped
    mode (vLLM ``is_k_full``). vLLM calls ``torch.argsort`` (not stable); refsim sorts stably, so
    rows keep their checkpoint order inside a group. Any order inside a group gives the same GEMM
    because A's columns are permuted with the same ``perm``.
    """
    g_idx = require_ndim("g_idx", require_integer_array("g_idx", g_idx), 1)
    return np.argsort(g_idx, kind="stable").astype(np.int32)


def repack_gptq(qweight: np.ndarray, k: int, perm: np.ndarray | None = None, *,
                zeros: np.ndarray | None = None) -> np.ndarray:
    """GPTQ ``qweight`` int32 ``(K/8, N)`` (packed along K) -> Marlin ``B`` int32 ``(K/16, 2N)``.

    ``zeros`` int ``(G, N)``: the checkpoint's zero points as read back
    (:func:`refsim.formats.gptq.unpack_qzeros`). Marlin's format is symmetric -- the value is
    ``(q - 8) * s`` and there is no zero-point tensor -- so every zero must be 8; an asymmetric
    source is refused with a FormatRuleError (repacking its codes would drop the zeros and shift
    every weight by ``(zero - 8) * s``; re-quantize symmetrically instead, e.g.
    ``refsim convert --to marlin --requantize``). With ``perm`` (int ``(K,)``, e.g.
    ``argsort(g_idx)`` for act-order), Marlin row ``k`` reads checkpoint row ``perm[k]``, as vLLM's
    ``gptq_marlin_repack`` does; the result is identical to :func:`refsim.formats.marlin.pack` of the row-permuted code
    matrix. Shape rules are the Marlin format's own (``K % 128 == 0``, ``N % 128 == 0``, those
    :func:`refsim.formats.marlin.unpack` checks), so every ``B`` returned can be read
    back. Scales are permuted separately with :func:`refsim.formats.marlin.permute_scales` (vLLM ``marlin_permute_scales``).
    """
    k = require_int("k", k, minimum=1)
    if zeros is None:
        raise FormatRuleError("zeros: the checkpoint's zero points (G, N) are required (Marlin needs every zero = 8); got None")
    qweight = require_dtype("qweight", qweight, np.int32)
    require_ndim("qweight", qweight, 2)
    n = qweight.shape[1]
    check_kn(k, n)
    require_shape("qweight", qweight, (k // 8, n))
    zeros = np.asarray(zeros)
    if not np.issubdtype(zeros.dtype, np.integer) or zeros.ndim != 2 or zeros.shape[1] != n or zeros.shape[0] < 1:
        raise ShapeError(f"zeros: must be an integer (G, N={n}) array of zero points; "
                         f"got dtype {zeros.dtype}, shape {zeros.shape}")
    asym = zeros != CODE_BIAS
    if asym.any():
        g, col = (int(i) for i in np.argwhere(asym)[0])
        raise FormatRuleError(
            f"zeros: Marlin's format is symmetric (value (q - 8) * s, no zero points), so every zero "
            f"point must be 8; got {int(asym.sum())} asymmetric zero(s), first zeros[{g}, {col}] = "
            f"{int(zeros[g, col])} (re-quantize symmetrically instead of repacking)")
    q = gptq.unpack_qweight(qweight, 4, k)  # (K, N) uint8
    if perm is not None:
        perm = np.asarray(perm)
        if not np.issubdtype(perm.dtype, np.integer):
            raise FormatRuleError(f"perm: must be an integer array; got dtype {perm.dtype}")
        require_shape("perm", perm, (k,))
        if not np.array_equal(np.sort(perm), np.arange(k)):
            raise FormatRuleError("perm: must be a permutation of 0..K-1; got repeated or out-of-range entries")
        q = q[perm]
    return _pack_codes(q)
