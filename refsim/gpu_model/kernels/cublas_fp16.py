"""cuBLAS FP16 baseline (``torch.matmul`` path: FP16 inputs, FP32 accumulation).

Decomposition
-------------
* M = 1 (GEMV, CUDA cores): one warp per output row pair, 4 warps per CTA -> N/8 CTAs; each warp
  streams its rows with 16-byte loads, 2 loads in flight per lane (1 KiB per warp).
  Bytes: N·K·2 (weights) + K·2 (x) + N·2 (y). ALU: N·K HFMA lanes / 2 (HFMA2) - negligible.
* M ≥ 2 (GEMM, tensor cores, mma m16n8k16 f32 accumulate): 3-stage cp.async pipeline of 32-deep
  K slices; the tile (128×128, 64×128, 64×64, M tile ≤ pad16(M)) and split-K (1..16) are the ones
  with the least full predicted cost (DRAM, L2 re-reads, tensor, split-K sums), standing in for cuBLAS's heuristics
  (:func:`_common.best_gemm_config`); CTAs per SM from shared memory.
  Bytes: N·K·2 + M·K·2 + M·N·2 (operands stay L2-resident between tiles when they fit).
  Tensor time at the padded M and the f32-accumulate rate (half rate on GeForce), at the mma.sync
  rate of the GPU (:func:`_common.mma_sync_rate`: 0.63 of the table's wgmma peak on sm_90).
* sm_90 adds the wgmma family to the candidates (:func:`_common.best_gemm_config`): persistent
  warp-specialized kernels, one CTA per SM, 64..256 x 128..256 tiles, clusters of 1 or 2 CTAs whose
  TMA multicast divides the shared operand's L2 reads, at the table's (wgmma) tensor rate.
"""

from __future__ import annotations

import math

from refsim.gpu_model.kernels._common import gemm_config, has_wgmma, mma_sync_rate
from refsim.gpu_model.roofline import Breakdown, combine, dram_time

NAME = "cublas-fp16"
BITS = (16,)
DEFAULT_BITS = 16
GROUPS = None            # no quantization groups: group_size is not used
DEFAULT_GROUP = None
GROUP_RULE = ""


def check(gpu, m, n, k, bits, group_size) -> None:
    """cuBLAS runs every shape (no rule beyond the int32 sizes the package checks)."""


def model(mc, m, n, k, bits, group_size) -> Breakdown:
    """Latency of ``C(M,N) = A(M,K) @ W(K,N)`` in FP16 with cuBLAS on ``mc.gpu`` (module docstring)."""
    g, f, p = mc
    bytes_dram = 2.0 * (n * k + m * k + m * n)           # W, A, C in fp16
    if m == 1:
        # GEMV on CUDA cores: one warp per output row pair, 4 warps per CTA, 1 KiB in flight per warp
        ctas = math.ceil(n / 8)
        ctas_per_sm = min(g.max_ctas_per_sm, g.max_warps_per_sm // 4)
        pipes = {"dram": dram_time(bytes_dram, g, ctas, ctas_per_sm, 4 * 1024),
                 "alu": (n * k / 2) / (g.hfma2_lanes_per_clk_per_sm * g.sm_count * f)}   # HFMA2
        n_waves = ctas / (g.sm_count * ctas_per_sm)
    else:
        # GEMM on tensor cores: the tile and split-K a tuned library picks (least full predicted cost)
        # (mma.sync at its rate on this GPU; on sm_90 also the wgmma family at the table's peak)
        tc = g.tc_fp16_f32acc_flop_per_clk_per_sm
        _, t_tc, red_bytes, ctas, n_waves, tile_m, tile_n, split, ctas_per_sm, smem, l2, family = gemm_config(
            g, f, m, n, k, mma_sync_rate(g, tc), 2, 3, 32, p.overlap, tc if has_wgmma(g) else 0.0)
        # L2 re-reads (A once per N tile, W once per M tile, each divided by a cluster's TMA multicast)
        # plus the split-K partial sums
        pipes = {"dram": dram_time(bytes_dram, g, ctas, ctas_per_sm, smem), "l2": l2 / g.l2_bytes_per_s(f),
                 "tensor": t_tc}
        return combine(NAME, g, m, n, k, bits, pipes, p, ctas=ctas, n_waves=n_waves, bytes_dram=bytes_dram,
                       notes=f"{family}, split-K {split}")
    return combine(NAME, g, m, n, k, bits, pipes, p, ctas=ctas, n_waves=n_waves, bytes_dram=bytes_dram)
