"""INT8 W8A8 GEMM (SmoothQuant-style: per-token activation and per-channel weight scales,
mma m16n8k32 s8 with INT32 accumulation, FP32 dequant epilogue once per output).

Decomposition: CUTLASS-style CTA tiles (128×128, 64×128, 64×64) × 64-deep K slices, 3-stage
pipeline, tile and split-K picked as a tuned library would (:func:`_common.best_gemm_config`).
Bytes: W N·K + A M·K + scales (N + M)·4 + C M·N·2. Tensor work at the padded M on the INT8 rate.
Activation quantization is assumed fused into the previous operator (as in Atom's baseline).
Constraints: bits 8, K % 16 == 0 (16-byte vector loads), N % 8 == 0.
"""

from __future__ import annotations

import math

from refsim.gpu_model.kernels._common import gemm_config, require_multiple
from refsim.gpu_model.roofline import Breakdown, combine, dram_time

NAME = "int8-w8a8"
BITS = (8,)
DEFAULT_BITS = 8
GROUPS = (None,)
DEFAULT_GROUP = None
GROUP_RULE = "uses per-channel/per-token scales (None)"


def check(gpu, m, n, k, bits, group_size) -> None:
    """K % 16 == 0 (16-byte INT8 vector loads) and N % 8 == 0 (n8 MMA fragments)."""
    if k % 16:
        require_multiple(NAME, "k", k, 16, "16-byte INT8 vector loads")
    if n % 8:
        require_multiple(NAME, "n", n, 8, "n8 MMA fragments")


def model(mc, m, n, k, bits, group_size) -> Breakdown:
    """Latency of an INT8 x INT8 GEMM for C(M,N) = A(M,K) @ W(K,N) on ``mc.gpu`` (module docstring)."""
    g, f, p = mc
    _, t_tc, red_bytes, ctas, n_waves, tile_m, tile_n, _, ctas_per_sm, smem, l2, _ = gemm_config(
        g, f, m, n, k, g.tc_int8_op_per_clk_per_sm, 1, 3, 64, p.overlap)
    bytes_dram = 1.0 * n * k + m * k + 4.0 * (n + m) + 2.0 * m * n     # W, A, scales, C
    # epilogue: one FP32 dequant (scale products + convert) per padded output, 3 lanes each
    epi_rate = g.fp32_fma_lanes_per_clk_per_sm * g.sm_count * f
    pipes = {"dram": dram_time(bytes_dram, g, ctas, ctas_per_sm, smem),
             "l2": l2 / g.l2_bytes_per_s(f),
             "tensor": t_tc, "alu": tile_m * math.ceil(m / tile_m) * n * 3 / epi_rate}
    return combine(NAME, g, m, n, k, 8, pipes, p, ctas=ctas, n_waves=n_waves, bytes_dram=bytes_dram)
