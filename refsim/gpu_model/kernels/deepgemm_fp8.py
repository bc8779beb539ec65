"""DeepGEMM's sm_90 FP8 GEMM (``sm90_fp8_gemm_1d2d_impl``, ``fp8_gemm_nt``): D (M, N) bf16 = A (M, K) e4m3 @
B (N, K)^T e4m3 with 1 x 128 activation and 128 x 128 weight scales, FP32 promotion on CUDA cores.

Decomposition (the configuration DeepGEMM's host picks: :func:`deepgemm_config.config`)::

    grid        num_sms persistent CTAs (one per SM, all of its shared memory), each walking the
                ceil(M / BLOCK_M) x ceil(N / BLOCK_N) output blocks in turn: ceil(blocks / SMs) rounds
    CTA         one TMA warpgroup (loads A, B, SFA into a ring of ``stages`` slots) and 1 or 2 math
                warpgroups (BLOCK_M <= 64 or above: 128 or 256 math threads)
    per K block (BLOCK_K = 128), per math warpgroup, in order (sm90_fp8_gemm_1d2d.cuh):
        wgmma   BLOCK_K / 32 chained wgmma.m64nNk32.f32.e4m3.e4m3, then warpgroup_wait<0>
        promote final = fma(scale_a * scale_b, partial, final) on CUDA cores: per thread per K block
                one fma.rn.f32 per accumulator and one mul.f32 per row pair's scale (the committed PTX,
                N = K = 4096, BLOCK 64 x 64: 256 fma.rn.f32 and 16 mul.f32 over 8 K blocks of 32
                accumulators and 2 rows per thread)

    term        what                                                        rate
    ------------------------------------------------------------------------------------------------------
    tensor      rounds x K/128 x (wgmma + promotion) of one block:           FP8 wgmma: 2 x the FP16 rate
                2 max(64, BLOCK_M) BLOCK_N 128 / FP8 rate  (wgmma's M is 64)    (:data:`FP8_PER_FP16`)
                + (BLOCK_M BLOCK_N + 2 math_threads) / FP32 lanes            FP32 FMA lanes per SM
                serial: the math warpgroup waits for its wgmmas before promoting
    dram        A M K + B N K (1 B) + D 2 M N + SFA 4 M K/128 + SFB 4 ceil(N/128) K/128, Little's law at
                one CTA per SM with its ring (stages x (BLOCK_M + BLOCK_N) x 128 B) in flight
    l2          A once per N block, B once per M block (each divided by the cluster's TMA multicast),
                SFA once per N block (:func:`_common.gemm_l2_bytes`)

Combined as the other tensor-core models (:func:`refsim.gpu_model.roofline.combine`). Unvalidated: no
timing table holds this kernel; :data:`ESTIMATES` names the constants that are estimates (the trust
statement lists them). wgmma and TMA exist on sm_90a only: other GPUs are refused.
"""

from __future__ import annotations

import math

from refsim.errors import FormatRuleError
from refsim.gpu_model.kernels._common import gemm_l2_bytes, require_multiple, require_sm90a
from refsim.gpu_model.kernels.deepgemm_config import config
from refsim.gpu_model.roofline import Breakdown, combine, dram_time

NAME = "deepgemm-fp8"
BITS = (8,)
DEFAULT_BITS = 8
GROUPS = None            # block scaling is fixed (1 x 128 activations, 128 x 128 weights): group_size not used
DEFAULT_GROUP = None
GROUP_RULE = ""
BLOCK_K = 128
#: FP8 (e4m3) wgmma rate / FP16 (f32 accumulate) wgmma rate on sm_90: NVIDIA H100 Tensor Core GPU
#: datasheet (H100 SXM dense: FP8 1,979 TFLOPS, FP16 989 TFLOPS; H100 PCIe 1,513 / 756) and the Hopper
#: whitepaper ("FP8 ... 2x the throughput of FP16")
FP8_PER_FP16 = 2.0
#: the constants of this model that are estimates, with why (listed by every prediction's trust statement)
ESTIMATES = {
    "deepgemm-fp8: wgmma rate": "FP8 wgmma at the datasheet peak for every BLOCK_N (Luo et al., arXiv:2501.12084, "
                                 "measure lower wgmma throughput at small N; not modelled)",
    "deepgemm-fp8: promotion": "wgmma and CUDA-core promotion of one math warpgroup serial, the two warpgroups of "
                               "BLOCK_M 128+ too (an upper bound: one may promote while the other's wgmmas run)",
}


def check(gpu, m, n, k, bits, group_size) -> None:
    """sm_90a only (wgmma, TMA, clusters); K % 128 == 0 (the scales' K blocks); N % 8 == 0 (the
    kernel's device assert); an even SM count (DeepGEMM's GemmDesc::check_validity)."""
    require_sm90a(NAME, gpu, "wgmma.mma_async, TMA and thread-block clusters")
    if gpu.sm_count % 2:
        raise FormatRuleError(f"gpu: kernel {NAME} needs an even SM count (DeepGEMM's persistent grid); "
                              f"{gpu.name} has {gpu.sm_count}")
    require_multiple(NAME, "k", k, BLOCK_K, "one activation and weight scale per 128-deep K block")
    require_multiple(NAME, "n", n, 8, "the kernel's device assert on N")


def model(mc, m, n, k, bits, group_size) -> Breakdown:
    """Latency of DeepGEMM's FP8 GEMM for D (M, N) = A (M, K) @ B (N, K)^T on ``mc.gpu`` (module docstring)."""
    g, f, p = mc
    c = config(m, n, k, g.sm_count)
    bm, bn = c.block_m, c.block_n
    blocks = math.ceil(m / bm) * math.ceil(n / bn)
    rounds = math.ceil(blocks / g.sm_count)
    kblocks = k // BLOCK_K
    fp8_rate = FP8_PER_FP16 * g.tc_fp16_f32acc_flop_per_clk_per_sm          # FLOP per clock per SM
    wgmma_clk = 2.0 * max(64, bm) * bn * BLOCK_K / fp8_rate                # one K block of one output block
    promote_clk = (bm * bn + 2.0 * c.math_threads) / g.fp32_fma_lanes_per_clk_per_sm
    t_wgmma = rounds * kblocks * wgmma_clk / f
    t_promote = rounds * kblocks * promote_clk / f
    scale_bytes = 4.0 * (m + math.ceil(n / 128)) * kblocks
    bytes_dram = 1.0 * (m * k + n * k) + 2.0 * m * n + scale_bytes
    ctas = min(blocks, g.sm_count)
    in_flight = c.stages * (bm + bn) * BLOCK_K
    l2 = gemm_l2_bytes(m, n, k, 1, bm, bn, (c.cluster_m, c.cluster_n)) + 4.0 * m * kblocks * math.ceil(n / bn)
    pipes = {"dram": dram_time(bytes_dram, g, ctas, 1, in_flight), "l2": l2 / g.l2_bytes_per_s(f),
             "tensor": t_wgmma + t_promote}
    notes = (f"persistent 1d2d BLOCK {bm}x{bn}x{BLOCK_K}, {c.stages} stages, cluster {c.cluster_m}x{c.cluster_n}, "
             f"{c.math_threads} math threads, {rounds} round(s) of {ctas} CTAs; tensor = FP8 wgmma "
             f"{t_wgmma * 1e6:.2f} us + CUDA-core promotion {t_promote * 1e6:.2f} us (serial)")
    return combine(NAME, g, m, n, k, 8, pipes, p, ctas=ctas, n_waves=blocks / g.sm_count, bytes_dram=bytes_dram,
                   notes=notes)
