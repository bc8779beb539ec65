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

from refsim.gpu_model.kernels._common import (_best_gemm_config, check_bits, check_mnk, hot_setup, one_point,
                                             require_multiple)
from refsim.gpu_model.roofline import FITTED, Breakdown, _combine1, _dram_time

NAME = "int8-w8a8"
BITS = (8,)


def predict(gpu, m, n, k, bits=None, group_size=None, *, clock="sustained", params=None) -> Breakdown:
    """Latency breakdown of an INT8×INT8 GEMM for C(M,N) = A(M,K) @ W(K,N) on ``gpu``
    (per-channel scales: ``group_size`` must be None)."""
    m, n, k = check_mnk(NAME, m, n, k)
    return _predict(gpu, m, n, k, bits, group_size, clock, params)



def _predict_many(g, ms, n, k, bits, group_size, clock, params) -> list[Breakdown]:
    """:func:`_predict` for every M of ``ms`` (list of ints in [1, 2^31 - 1]) on the resolved spec ``g``:
    a list of len(ms) Breakdowns equal to the per-M ones bit for bit (rules checked once: none
    depends on M; per-(GPU, N, K) numbers computed once; tested)."""
    if bits is not None:
        check_bits(NAME, bits, BITS, 8)
    if group_size is not None:
        from refsim.errors import FormatRuleError
        raise FormatRuleError(f"group_size: kernel {NAME} uses per-channel/per-token scales (None); got {group_size!r}")
    if k % 16:
        require_multiple(NAME, "k", k, 16, "16-byte INT8 vector loads")
    if n % 8:
        require_multiple(NAME, "n", n, 8, "n8 MMA fragments")
    g, f, _, l2_bw = hot_setup(g, clock)
    p = params or FITTED
    launch, tail, a, name, ov = p.launch_overhead_s * 1, g.dram_latency_s, 1.0 - p.overlap, g.name, p.overlap
    rate = g.tc_int8_op_per_clk_per_sm
    epi_rate = g.fp32_fma_lanes_per_clk_per_sm * g.sm_count * f
    w_bytes = 1.0 * n * k
    ceil = math.ceil
    out = []
    for m in ms:
        _, t_tc, red_bytes, ctas, n_waves, tile_m, tile_n, _, ctas_per_sm, smem = _best_gemm_config(
            g, f, m, n, k, rate, 1, 3, 64, ov)
        bytes_dram = w_bytes + m * k + 4.0 * (n + m) + 2.0 * m * n
        pipes = {"dram": _dram_time(bytes_dram, g, ctas, ctas_per_sm, smem),
                 "l2": (m * k * ceil(n / tile_n) + n * k * ceil(m / tile_m) + red_bytes) / l2_bw,
                 "tensor": t_tc, "alu": tile_m * ceil(m / tile_m) * n * 3 / epi_rate}
        out.append(_combine1(NAME, name, m, n, k, 8, pipes, launch, tail, a, ctas, n_waves, bytes_dram, ""))
    return out


_predict = one_point(_predict_many)   # the per-point entry: one home for the model
