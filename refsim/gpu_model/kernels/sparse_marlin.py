"""Sparse-MARLIN: 2:4-sparse FP16×INT4 (mma.sp m16n8k32, FP32 accumulate).

Source matched: IST-DASLab/Sparse-Marlin @ c2ffa23, ``marlin/marlin_cuda_kernel_nm.cu`` and
``marlin/__init__.py``. Same persistent striped design as
:mod:`marlin` (reused here, partition from :mod:`refsim.formats.stripes`), with:

* weights: the 2 kept values of every 4 along K, 4-bit: N·K/2 · 4 bits = N·K/4 bytes, plus metadata
  int16 (N, K/16) = N·K/8 bytes (1 bit per dense weight), scales per group of 128 dense K;
* tensor: ``mma.sp`` runs the dense-equivalent work at twice the dense rate;
* dequant: half as many weights to convert.
Constraints: bits 4, group_size None or 128, K % 128 == 0 (k32 MMA tiles, compressed groups of 64)
and N % thread_m with thread_m = 128 (M ≤ 16) or 256.

Partition: ``marlin_cuda_kernel_nm.cu`` swaps the names M and N (its host ``prob_n`` is the batch,
``thread_m`` the output-tile width) but runs the same host M loop (max_par 16), the same auto tile
(M ≤ 16: 128 × 128, else 64 × 256 in dense K), ``k_tiles = prob_k / 32 / thread_k_blocks`` =
K / thread_k with thread_k_blocks counted in k32 blocks, and the same stripe rounding
(``group_blocks`` = 64 / 16 = 4 compressed rows per group over thread_k_blocks 4 or 2 gives
1 or 2 tiles, as dense Marlin's 8 / 8 or 8 / 4 with group 128). So the dense plan of
:func:`refsim.formats.stripes.stripes` (dense K, dense group 128) is the Sparse-Marlin plan.
"""

from __future__ import annotations

from refsim.gpu_model.kernels import marlin
from refsim.gpu_model.kernels._common import require_multiple
from refsim.gpu_model.roofline import Breakdown

NAME = "sparse-marlin"
BITS = (4,)
DEFAULT_BITS = 4
GROUPS = (None, 128)
DEFAULT_GROUP = None
GROUP_RULE = "supports [None, 128]"
WEIGHT_BITS_PER_DENSE = 4 * 0.5 + 1.0   # kept values + 2:4 metadata
WEIGHTS_KEPT_IN_L2 = marlin.WEIGHTS_KEPT_IN_L2    # the same evict_first weight stream


def check(gpu, m, n, k, bits, group_size) -> None:
    """Sparse-Marlin's rules: N % thread_m == 0 (thread_m = 128 at M <= 16, else 256), K % 128 == 0
    (k32 sparse MMA tiles over compressed groups of 64), CC >= 8.0."""
    tk, tn = marlin.tile_shape(m)
    if n % tn:
        require_multiple(NAME, "n", n, tn, f"thread_m = {tn} output rows per tile at M = {m}")
    if k % 128:
        require_multiple(NAME, "k", k, 128, "k32 sparse MMA tiles over compressed groups of 64")
    marlin.require_sm80(NAME, gpu)


def model(mc, m, n, k, bits, group_size) -> Breakdown:
    """Latency of Sparse-MARLIN (2:4, INT4) for C(M,N) = A(M,K) @ W(K,N) on ``mc.gpu``: Marlin's
    striped model with 3 stored bits per dense weight, the 2:4 MMA rate and half the dequant."""
    return marlin.striped_model(NAME, mc, m, n, k, group_size, weight_bits=WEIGHT_BITS_PER_DENSE, sparse=True)
