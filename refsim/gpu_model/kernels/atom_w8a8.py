"""Atom's own W8A8 baseline: torch-int's ``linear_a8_w8_b8_o8`` (SmoothQuant's CUTLASS 2.x INT8 GEMM).

Source matched: Atom's W8A8 benchmark (efeslab/Atom @ 7e3618b1a7a7,
``kernels/baselines/src/bench_torch_int.cu``) times ``linear_a8_w8_b8_o8(hidden_states, weight, bias,
0.5, 0.5)`` of the torch-int submodule (Guangxuan-Xiao/torch-int @ 65266db1eadb,
``torch_int/kernels/linear.cu`` lines 369-473), built with ``CUDA_ARCH=890``
(``kernels/baselines/CMakeLists.txt``), so the ``CUDA_ARCH >= 800`` instance (lines 392-401)::

    cutlass::gemm::device::Gemm<int8 RowMajor, int8 ColumnMajor, int8 RowMajor, int32 accumulators,
        OpClassTensorOp, Sm80, GemmShape<256, 128, 64>, GemmShape<64, 64, 64>, GemmShape<16, 8, 32>,
        FastLinearCombinationClamp<int8, 16>, GemmIdentityThreadblockSwizzle<>, 3 stages>, split-K 1

Decomposition (one CTA = one fixed 256(M) x 128(N) output tile over all of K; no tile choice, no
split-K)::

    CTAs       ceil(M/256) x ceil(N/128), 8 warps (256/64 x 128/64), 1 per SM (see below)
    tensor     per CTA 2·256·128·K ops of mma m16n8k32 s8 at the GPU's mma.sync INT8 rate per SM,
               M padded to 256, N to 128; ceil(CTAs / SMs) waves
    epilogue   after the main loop, serial in the CTA: per output FastLinearCombinationClamp's
               mul, fma, max, min (CUTLASS @ c975e2cc ``linear_combination_clamp.h`` 614-640) and three
               conversions (s8 source, s32 accumulator -> f32; f32 -> s8), one FP32-pipe lane each
    bytes      A M·K + W N·K + C (the source, beta = 0.5) M·N + D M·N, all int8
    repeat     ``bias.repeat({M, 1})`` (linear.cu line 420) is its own launch inside the timed call:
               N bytes read, M·N written, streamed before the GEMM (serial)
    occupancy  3 stages x (256 + 128) x 64 B = 72 KiB of shared memory and at least 160 registers per
               thread (128 s32 accumulators of the 64 x 64 warp tile + 32 for one k32 step's A and B
               fragments) x 256 threads: one CTA per SM on every GPU with 64 K registers per SM

At M = 512, N = K = 4096 that is 64 CTAs: an RTX 4090 (128 SMs) runs them in one wave on half its
SMs, each CTA doing twice the work an even spread would give it.
"""

from __future__ import annotations

import math

from refsim.errors import FormatRuleError
from refsim.gpu_model.kernels._common import cc_at_least, gemm_l2_bytes, mma_sync_rate, require_multiple
from refsim.gpu_model.occupancy import resident
from refsim.gpu_model.roofline import Breakdown, combine, dram_time

NAME = "atom-w8a8"
BITS = (8,)
DEFAULT_BITS = 8
GROUPS = (None,)
DEFAULT_GROUP = None
GROUP_RULE = "uses per-tensor alpha/beta scales (None)"
TILE_M, TILE_N, TILE_K = 256, 128, 64          # GemmShape<256, 128, 64>
WARP_M, WARP_N = 64, 64                        # GemmShape<64, 64, 64>
STAGES = 3
THREADS = 32 * (TILE_M // WARP_M) * (TILE_N // WARP_N)
SMEM = STAGES * (TILE_M + TILE_N) * TILE_K     # int8 A and B tiles of every stage
# a lower bound: the warp tile's s32 accumulators per lane + one k32 step's A (64 x 32) and B (32 x 64)
REGISTERS = WARP_M * WARP_N // 32 + (WARP_M * 32 + 32 * WARP_N) // 32 // 4
ALIGN = 16                                     # 128-bit accesses of int8: A and B along K, C and D along N
EPILOGUE_LANES = 4 + 3                         # mul, fma, max, min + three conversions per output


def check(gpu, m, n, k, bits, group_size) -> None:
    """K % 16 == 0 and N % 16 == 0 (CUTLASS's 128-bit int8 accesses); CC >= 8.0 (the Sm80 instance
    Atom builds: cp.async multistage, mma m16n8k32 s8)."""
    if k % ALIGN:
        require_multiple(NAME, "k", k, ALIGN, "128-bit int8 loads of A and W along K")
    if n % ALIGN:
        require_multiple(NAME, "n", n, ALIGN, "128-bit int8 accesses of C and D along N")
    if not cc_at_least(gpu, 8, 0):
        raise FormatRuleError(f"gpu: kernel {NAME} is torch-int's CUDA_ARCH >= 800 instance (cp.async, mma "
                              f"m16n8k32 s8) and needs compute capability >= 8.0; got {gpu.name} "
                              f"(CC {gpu.compute_capability})")


def ctas_per_sm(g) -> int:
    """Resident CTAs per SM (:data:`THREADS`, :data:`REGISTERS`, :data:`SMEM`)."""
    return resident(g, THREADS, REGISTERS, SMEM, None).ctas_per_sm


def model(mc, m, n, k, bits, group_size) -> Breakdown:
    """Latency of the timed call of Atom's W8A8 benchmark on ``mc.gpu`` (module docstring)."""
    g, f, p = mc
    cps = ctas_per_sm(g)
    m_pad, n_pad = TILE_M * math.ceil(m / TILE_M), TILE_N * math.ceil(n / TILE_N)
    ctas = (m_pad // TILE_M) * (n_pad // TILE_N)
    n_waves = ctas / (g.sm_count * cps)
    waves_run = math.ceil(n_waves - 1e-9)
    rate = mma_sync_rate(g, g.tc_int8_op_per_clk_per_sm) / cps
    main = 2.0 * TILE_M * TILE_N * k / (rate * f)
    epilogue = TILE_M * TILE_N * EPILOGUE_LANES / (g.fp32_fma_lanes_per_clk_per_sm / cps * f)
    bytes_gemm = 1.0 * m * k + n * k + 2.0 * m * n               # A, W, C read, D written
    bytes_repeat = 1.0 * n + m * n                               # bias read, the M x N copy written
    pipes = {"dram": dram_time(bytes_gemm, g, ctas, cps, float(SMEM)),
             "l2": gemm_l2_bytes(m, n, k, 1, TILE_M, TILE_N) / g.l2_bytes_per_s(f),
             "tensor": waves_run * (main + epilogue)}           # the epilogue follows the main loop
    t_repeat = bytes_repeat / g.dram_eff_bytes_per_s
    notes = (f"{ctas} CTAs of 256x128 on {g.sm_count} SMs ({cps}/SM, {waves_run} wave(s)); tensor "
             f"{waves_run * main * 1e6:.1f} us + epilogue {waves_run * epilogue * 1e6:.1f} us; "
             f"bias.repeat launch {t_repeat * 1e6:.1f} us before the GEMM")
    return combine(NAME, g, m, n, k, 8, pipes, p, launches=2, ctas=ctas, n_waves=n_waves,
                   bytes_dram=bytes_gemm + bytes_repeat, extra_serial_s=t_repeat, notes=notes)
