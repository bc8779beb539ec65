"""AWQ W4A16 (llm-awq / TinyChat kernels): INT4 weights with per-group FP16 scales and zeros.

Two paths, as TinyChat dispatches them:

* M < 8: ``gemv_forward_cuda`` (CUDA cores). One warp per output row pair, 4 warps per CTA; per
  weight ~ 13/8 dequant instructions (unpack nibble, I2F/magic-number convert, sub zero, mul scale)
  and one FP32 FMA per batch row (fp32 accumulation).
* M ≥ 8: ``gemm_forward_cuda`` (tensor cores, mma m16n8k16, FP32 accumulate): CTA tile 16(M) × 128(N);
  split-K 8; every M tile dequantizes its weight tile again (13/8 instructions per weight per M tile).

Bytes: N·K/2 + (K/g)·N·(2 + 0.5) (fp16 scales + packed 4-bit zeros) + M·K·2 + M·N·2.
Constraints: bits 4, group_size 64 or 128 (default 128), K % group_size == 0, N % 8 == 0.
"""

from __future__ import annotations

import math

from refsim.gpu_model.kernels._common import (check_bits, check_group, check_mnk, compiled_registers, hot_setup,
                                             mma_sync_rate, one_point, require_multiple, tile_tensor_time)
from refsim.gpu_model.occupancy import resident
from refsim.gpu_model.roofline import FITTED, Breakdown, _combine1, _dram_time

NAME = "awq-w4a16"
BITS = (4,)
GROUPS = (64, 128)
DEQ_PER_WEIGHT = 13 / 8
SPLIT_K = 8  # gemm_forward_cuda is launched with split_k_iters = 8


def predict(gpu, m, n, k, bits=None, group_size=None, *, clock="sustained", params=None) -> Breakdown:
    """Latency breakdown of the AWQ W4A16 kernels for C(M,N) = A(M,K) @ W(K,N) on ``gpu``."""
    m, n, k = check_mnk(NAME, m, n, k)
    return _predict(gpu, m, n, k, bits, group_size, clock, params)



def _predict_many(g, ms, n, k, bits, group_size, clock, params) -> list[Breakdown]:
    """:func:`_predict` for every M of ``ms`` (list of ints in [1, 2^31 - 1]) on the resolved spec ``g``:
    a list of len(ms) Breakdowns equal to the per-M ones bit for bit (rules checked once: none
    depends on M; per-(GPU, N, K) numbers computed once; tested)."""
    if bits is not None:
        check_bits(NAME, bits, BITS, 4)
    gs = 128 if group_size is None else check_group(NAME, group_size, GROUPS, 128)
    if k % gs:
        require_multiple(NAME, "k", k, gs, "whole groups along K")
    if n % 8:
        require_multiple(NAME, "n", n, 8, "8 output channels per packed int32")
    g, f, sm_clk, l2_bw = hot_setup(g, clock)
    p = params or FITTED
    launch, tail, a, name = p.launch_overhead_s * 1, g.dram_latency_s, 1.0 - p.overlap, g.name
    w_bytes = n * k / 2 + (k / gs) * n * 2.5
    nk = n * k
    ceil = math.ceil
    gemv = gemm = None
    out = []
    for m in ms:
        bytes_dram = w_bytes + 2.0 * m * (k + n)
        if m < 8:
            if gemv is None:
                ctas = ceil(n / 8)
                ctas_per_sm = resident(g, 128, compiled_registers("awq_gemv"), 0, ctas).ctas_per_sm
                gemv = (ctas, ctas_per_sm, g.fp32_fma_lanes_per_clk_per_sm * sm_clk, ctas / (g.sm_count * ctas_per_sm))
            ctas, ctas_per_sm, fma, n_waves = gemv
            t_alu = max(nk * (DEQ_PER_WEIGHT + m) / 32 / (4 * sm_clk), nk * m / fma)
            pipes = {"dram": _dram_time(bytes_dram, g, ctas, ctas_per_sm, 4 * 512), "alu": t_alu}
            notes = "gemv (CUDA cores)"
        else:
            if gemm is None:
                gemm = mma_sync_rate(g, g.tc_fp16_f32acc_flop_per_clk_per_sm)
            m_tiles = ceil(m / 16)
            t_tc, ctas, n_waves = tile_tensor_time(g, f, m_tiles * 16, n * SPLIT_K, k / SPLIT_K, 16, 128, 4, gemm)
            pipes = {"dram": _dram_time(bytes_dram, g, ctas, 4, 2 * 128 * 32 / 2),
                     "l2": (m_tiles - 1) * n * k / 2 / l2_bw, "tensor": t_tc,
                     "alu": m_tiles * n * k * DEQ_PER_WEIGHT / 32 / (4 * sm_clk)}
            notes = "gemm (tensor cores, dequant per 16-row tile)"
        out.append(_combine1(NAME, name, m, n, k, 4, pipes, launch, tail, a, ctas, n_waves, bytes_dram, notes))
    return out


_predict = one_point(_predict_many)   # the per-point entry: one home for the model
