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
  Tensor time at the padded M and the f32-accumulate rate (half rate on GeForce).
"""

from __future__ import annotations

import math

from refsim.gpu_model.kernels._common import _best_gemm_config, check_bits, check_mnk, hot_setup, one_point
from refsim.gpu_model.roofline import FITTED, Breakdown, _combine1, _dram_time

NAME = "cublas-fp16"
BITS = (16,)


def predict(gpu, m, n, k, bits=None, group_size=None, *, clock="sustained", params=None) -> Breakdown:
    """Latency breakdown of ``C(M,N) = A(M,K) @ W(K,N)`` in FP16 with cuBLAS on ``gpu``."""
    m, n, k = check_mnk(NAME, m, n, k)
    return _predict(gpu, m, n, k, bits, group_size, clock, params)




def _predict_many(g, ms, n, k, bits, group_size, clock, params) -> list[Breakdown]:
    """:func:`_predict` for every M of ``ms`` (list of ints in [1, 2^31 - 1]) on the resolved spec ``g``:
    a list of len(ms) Breakdowns, each equal to ``_predict(g, m, n, k, ...)`` bit for bit (the same
    expressions, with the per-(GPU, N, K) numbers computed once; tested)."""
    bits = check_bits(NAME, bits, BITS, 16) if bits is not None else 16
    g, f, _, l2_bw = hot_setup(g, clock)
    p = params or FITTED
    launch, tail, a, name, ov = p.launch_overhead_s * 1, g.dram_latency_s, 1.0 - p.overlap, g.name, p.overlap
    nk = n * k
    tc_rate = g.tc_fp16_f32acc_flop_per_clk_per_sm
    ceil = math.ceil
    out = []
    for m in ms:
        bytes_dram = 2.0 * (nk + m * k + m * n)
        if m == 1:
            ctas = ceil(n / 8)
            ctas_per_sm = min(g.max_ctas_per_sm, g.max_warps_per_sm // 4)
            pipes = {"dram": _dram_time(bytes_dram, g, ctas, ctas_per_sm, 4 * 1024),
                     "alu": (nk / 2) / (g.hfma2_lanes_per_clk_per_sm * g.sm_count * f)}
            n_waves = ctas / (g.sm_count * ctas_per_sm)
        else:
            _, t_tc, red_bytes, ctas, n_waves, tile_m, tile_n, _, ctas_per_sm, smem = _best_gemm_config(
                g, f, m, n, k, tc_rate, 2, 3, 32, ov)
            pipes = {"dram": _dram_time(bytes_dram, g, ctas, ctas_per_sm, smem),
                     "l2": (2.0 * (m * k * ceil(n / tile_n) + nk * ceil(m / tile_m)) + red_bytes) / l2_bw,
                     "tensor": t_tc}
        out.append(_combine1(NAME, name, m, n, k, bits, pipes, launch, tail, a, ctas, n_waves, bytes_dram, ""))
    return out


_predict = one_point(_predict_many)   # the per-point entry: one home for the model
