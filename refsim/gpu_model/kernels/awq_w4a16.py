"""AWQ W4A16 (llm-awq / TinyChat kernels): INT4 weights with per-group FP16 scales and zeros.

Two paths, as TinyChat dispatches them:

* M < 8: ``gemv_forward_cuda`` (CUDA cores). One warp per output row pair, 4 warps per CTA; per
  weight ~ 13/8 dequant instructions (unpack nibble, I2F/magic-number convert, sub zero, mul scale)
  and one FP32 FMA per batch row (fp32 accumulation).
* M ≥ 8: ``gemm_forward_cuda`` (tensor cores, mma m16n8k16, FP32 accumulate): CTA tile 16(M) × 128(N);
  split-K 8; every M tile dequantizes its weight tile again (13/8 instructions per weight per M tile).

Bytes: N·K/2 + (K/g)·N·(2 + 0.5) (fp16 scales + packed 4-bit zeros) + M·K·2 + M·N·2.
Constraints: bits 4, group_size 64 or 128 (default 128), K % group_size == 0, N % 8 == 0.
Trust: M = 1 only; from M = 2 :func:`untrusted` refuses (UntrustedModelError) — the published rows
of llm-awq's WQLinear are several times slower than this model there.
"""

from __future__ import annotations

import math

from refsim.gpu_model.kernels._common import compiled_registers, mma_sync_rate, require_multiple, tile_tensor_time
from refsim.gpu_model.occupancy import resident
from refsim.gpu_model.roofline import Breakdown, combine, dram_time

NAME = "awq-w4a16"
BITS = (4,)
DEFAULT_BITS = 4
GROUPS = (64, 128)
DEFAULT_GROUP = 128
GROUP_RULE = "supports [64, 128]"
DEQ_PER_WEIGHT = 13 / 8
# What the published rows show (refsim/data/timings/published.csv, Marlin Figs. 1 and 10, A10): the
# llm-awq WQLinear timed there grows about linearly with M from M = 2 (a GEMV per row) and takes
# 14-20 ms at M = 16-128, where this model of TinyChat's GEMV + split-K GEMM predicts ~1.4 ms; at
# M = 1 the two agree. So only M = 1 answers (:func:`untrusted`); the errors on every row, refused
# ones included, are computed from the table by refsim.gpu_model.trust (docs/perf_model.md, "How far
# to trust a prediction").
UNTRUSTED_FROM_M = 2
SPLIT_K = 8  # gemm_forward_cuda is launched with split_k_iters = 8


def check(gpu, m, n, k, bits, group_size) -> None:
    """K % group_size == 0 (whole groups along K), N % 8 == 0 (8 output channels per packed int32)."""
    if k % group_size:
        require_multiple(NAME, "k", k, group_size, "whole groups along K")
    if n % 8:
        require_multiple(NAME, "n", n, 8, "8 output channels per packed int32")


def untrusted(m, n, k, bits, group_size) -> str | None:
    """Why this model cannot be trusted at ``m`` (None at M = 1): from M = 2 the published
    llm-awq WQLinear rows (Marlin Figs. 1 and 10) scale like one GEMV per row, a kernel this model
    of TinyChat's GEMV + split-K GEMM does not describe."""
    if m < UNTRUSTED_FROM_M:
        return None
    return (f"from M = {UNTRUSTED_FROM_M} the published llm-awq WQLinear latencies (published.csv, Marlin Figs. 1 "
            "and 10, A10) grow with M like one GEMV per row and are several times this model of TinyChat's "
            "GEMV + split-K GEMM (errors per row: refsim.gpu_model.trust, docs/perf_model.md 'How far to trust a "
            "prediction'); only M = 1 is modelled, so the model is not ranked against other kernels here")


def model(mc, m, n, k, bits, group_size) -> Breakdown:
    """Latency of the AWQ W4A16 kernels for C(M,N) = A(M,K) @ W(K,N) on ``mc.gpu`` (GEMV below M = 8,
    split-K GEMM from 8; module docstring)."""
    g, f, p = mc
    sm_clk = g.sm_count * f
    bytes_dram = n * k / 2 + (k / group_size) * n * 2.5 + 2.0 * m * (k + n)   # W, scales + zeros, A, C
    if m < 8:
        ctas = math.ceil(n / 8)
        ctas_per_sm = resident(g, 128, compiled_registers("awq_gemv"), 0, ctas).ctas_per_sm
        n_waves = ctas / (g.sm_count * ctas_per_sm)
        # dequant instructions per weight + one FP32 FMA per weight per batch row
        t_alu = max(n * k * (DEQ_PER_WEIGHT + m) / 32 / (4 * sm_clk),
                    n * k * m / (g.fp32_fma_lanes_per_clk_per_sm * sm_clk))
        pipes = {"dram": dram_time(bytes_dram, g, ctas, ctas_per_sm, 4 * 512), "alu": t_alu}
        notes = "gemv (CUDA cores)"
    else:
        m_tiles = math.ceil(m / 16)
        t_tc, ctas, n_waves = tile_tensor_time(g, f, m_tiles * 16, n * SPLIT_K, k / SPLIT_K, 16, 128, 4,
                                               mma_sync_rate(g, g.tc_fp16_f32acc_flop_per_clk_per_sm))
        pipes = {"dram": dram_time(bytes_dram, g, ctas, 4, 2 * 128 * 32 / 2),
                 "l2": (m_tiles - 1) * n * k / 2 / g.l2_bytes_per_s(f), "tensor": t_tc,
                 "alu": m_tiles * n * k * DEQ_PER_WEIGHT / 32 / (4 * sm_clk)}    # dequant again per M tile
        notes = "gemm (tensor cores, dequant per 16-row tile)"
    return combine(NAME, g, m, n, k, 4, pipes, p, ctas=ctas, n_waves=n_waves, bytes_dram=bytes_dram, notes=notes)
