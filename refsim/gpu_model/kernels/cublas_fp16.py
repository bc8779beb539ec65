"""cuBLAS FP16 baseline (``torch.matmul`` path: FP16 inputs, FP32 accumulation).

Decomposition
-------------
* M = 1 (GEMV, CUDA cores): one warp per output row pair, 4 warps per CTA -> N/8 CTAs; each warp
  streams its rows with 16-byte loads, 2 loads in flight per lane (1 KiB per warp).
  Bytes: N·K·2 (weights) + K·2 (x) + N·2 (y). ALU: N·K HFMA lanes / 2 (HFMA2) - negligible.
* M ≥ 2 (GEMM, tensor cores, mma m16n8k16 f32 accumulate): CTA tile 128(N) × min(128, pad16(M)),
  3-stage cp.async pipeline of 32-deep K slices; one CTA per SM at the 128×128 tile.
  Bytes: N·K·2 + M·K·2 + M·N·2 (operands stay L2-resident between tiles when they fit).
  Tensor time at the padded M and the f32-accumulate rate (half rate on GeForce).
"""

from __future__ import annotations

import math

from refsim.gpu_model.kernels._common import check_bits, check_mnk, setup, tile_tensor_time
from refsim.gpu_model.roofline import Breakdown, combine, dram_time

NAME = "cublas-fp16"
BITS = (16,)


def predict(gpu, m, n, k, bits=None, group_size=None, *, clock="sustained", params=None) -> Breakdown:
    """Latency breakdown of ``C(M,N) = A(M,K) @ W(K,N)`` in FP16 with cuBLAS on ``gpu``."""
    m, n, k = check_mnk(NAME, m, n, k)
    bits = check_bits(NAME, bits, BITS, 16)
    g, p, f = setup(gpu, params, clock)
    bytes_dram = 2.0 * (n * k + m * k + m * n)
    if m == 1:
        ctas = math.ceil(n / 8)
        ctas_per_sm = min(g.max_ctas_per_sm, g.max_warps_per_sm // 4)
        t_dram = dram_time(bytes_dram, g, ctas, ctas_per_sm, 4 * 1024)
        t_alu = (n * k / 2) / (g.hfma2_lanes_per_clk_per_sm * g.sm_count * f)
        pipes = {"dram": t_dram, "alu": t_alu}
        n_waves = ctas / (g.sm_count * ctas_per_sm)
    else:
        tile_m = min(128, 16 * math.ceil(m / 16))
        m_pad = tile_m * math.ceil(m / tile_m)
        ctas_per_sm = 1 if tile_m >= 128 else 2
        t_tc, ctas, n_waves = tile_tensor_time(g, f, m_pad, n, k, tile_m, 128, ctas_per_sm,
                                               g.tc_fp16_f32acc_flop_per_clk_per_sm)
        bif = 3 * (tile_m * 32 + 32 * 128) * 2
        t_dram = dram_time(bytes_dram, g, ctas, ctas_per_sm, bif)
        # A re-read from L2 by every N tile, W by every M tile.
        l2_bytes = 2.0 * (m * k * math.ceil(n / 128) + n * k * math.ceil(m_pad / tile_m))
        pipes = {"dram": t_dram, "l2": l2_bytes / g.l2_bytes_per_s(clock), "tensor": t_tc}
    return combine(NAME, g, m, n, k, bits, pipes, p, ctas=ctas, n_waves=n_waves, bytes_dram=bytes_dram)
