"""Atom W4A4 fused group GEMM (INT4 mma m16n8k64 + INT8 keeper block, FP32 dequant epilogue).

Source matched: efeslab/Atom @ 7e3618b1a7a7, ``kernels/include/GEMM/Dense_layer_gemm_i4_o16.cuh``
: 128×128×128 tiles, 8 warps, 4-stage cp.async pipeline,
groups of 128 along K, the last 128 input channels ("keeper" outliers) in INT8.

Decomposition (per CTA = one 128(M) × 128(N) output tile over all of K)::

    INT4 part  (K - 128)/128 groups × 2 k64 steps: mma m16n8k64 s4, M padded to the 128 tile
    INT8 part  128 keeper channels: mma m16n8k32 s8
    epilogue   per group and accumulator: I2F + FFMA with the fp16 scale product (FP32 pipe)
    bytes      W: N·(K-128)/2 + N·128 + scales N·(K/128)·2 ; A: M·(K-128)/2 + M·128 + scales
               M·(K/128)·2 ; C: M·N·2
    occupancy  4 stages × (128×128/2 W + 128×128/2 A + scales) = 69 KiB and 220-221 registers ×
               256 threads (ptxas, :data:`REGISTERS`) -> 1 CTA per SM

MMA and the per-group epilogue are serial within a warp (the accumulators are consumed and reset
every group), so their times add. Quantize/reorder of activations is fused into the previous operator in Atom, so one launch.
"""

from __future__ import annotations

import math
from functools import lru_cache

from refsim.errors import FormatRuleError
from refsim.gpu_model.kernels import resources
from refsim.gpu_model.kernels._common import cc_at_least, require_multiple
from refsim.gpu_model.occupancy import resident
from refsim.gpu_model.roofline import Breakdown, combine, dram_time

NAME = "atom-w4a4"
BITS = (4,)
DEFAULT_BITS = 4
GROUPS = (None, 128)        # None: the kernel's own groups of 128
DEFAULT_GROUP = 128
GROUP_RULE = "supports [128]"
KEEPER = 128
GROUP = 128
TILE = 128
THREADS = 256
# Dynamic shared memory of one launch (host code: max(4 stages x (128 x (128 + 128) / 2 B + (2*128 +
# 128/2) half2 scales), 128 x 128 x 2 B)); registers per thread: ptxas on the official kernel
# (refsim/data/timings/resources_atom.csv). 220-229 registers x 256 threads bind one CTA per SM on
# every arch (A100 too, whose shared memory alone would hold two).
DYNAMIC_SMEM = 4 * (TILE * (TILE + TILE) // 2 + 4 * (2 * TILE + TILE // 2))
# The only place the once-global fitted CUDA-core issue efficiency survives (the value of the fit
# before the per-SMSP issue model replaced it for the calibrated kernels). No Atom calibration data
# exists to derive the epilogue's stalls from; with full issue (1.0) the 4090 NVBench point at
# M = 1024 is predicted 24 % fast, with the I2F conversion rate (16/clk/SM) as the limit M = 4096 is
# 24 % slow. Listed in docs/perf_model.md with the other estimates.
EPILOGUE_ISSUE_EFF = 0.576


def check(gpu, m, n, k, bits, group_size) -> None:
    """Atom's rules: N % 128 == 0, K % 128 == 0 and K >= 256 (one INT4 group + the 128 INT8 keeper
    channels); CC >= 8.0 and an INT4 tensor-core path."""
    if n % TILE:
        require_multiple(NAME, "n", n, TILE, "128-wide N tiles")
    if k % GROUP:
        require_multiple(NAME, "k", k, GROUP, "groups of 128 along K")
    if k < 2 * GROUP:
        raise FormatRuleError(f"k: kernel {NAME} needs K >= 256 (INT4 groups + 128 INT8 keeper channels); got {k}")
    if not cc_at_least(gpu, 8, 0):
        raise FormatRuleError(f"gpu: kernel {NAME} needs compute capability >= 8.0 (cp.async, mma m16n8k64 s4); "
                              f"got {gpu.name} (CC {gpu.compute_capability})")
    if gpu.tc_int4_op_per_clk_per_sm == 0 and _arch(gpu) not in emulation_archs():
        raise FormatRuleError(f"gpu: kernel {NAME} needs mma s4: {gpu.name} ({gpu.arch}) has no INT4 tensor-core "
                              f"path and refsim has no SASS census of the emulation ptxas makes for "
                              f"{_arch(gpu)} (refsim/data/timings/sass_census.csv covers {sorted(emulation_archs())})")


def _arch(gpu) -> str:
    return "sm_" + gpu.compute_capability.replace(".", "")


@lru_cache(maxsize=None)
def census() -> dict:
    """{(arch, unit): (issue_slots, alu_pipe, fma_pipe, tensor_pipe)} of Atom's rows in
    refsim/data/timings/sass_census.csv (warp instructions per unit of work, by pipe)."""
    out = {}
    for kernel, arch, unit, *counts in _census_rows():
        if kernel == NAME:
            out[(arch, unit)] = tuple(int(c) for c in counts)
    return out


def _census_rows() -> list:
    import csv
    from pathlib import Path
    path = Path(__file__).resolve().parents[2] / "data" / "timings" / "sass_census.csv"
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.reader(fh))[1:]


def emulation_archs() -> frozenset:
    """Architectures without an INT4 tensor path whose emulation of ``mma s4`` has a census."""
    return frozenset(arch for arch, unit in census() if unit == "mma_s4_emulation_call")


@lru_cache(maxsize=256)
def ctas_per_sm(g) -> int:
    """Resident CTAs per SM of the GEMM (registers from ptxas, :data:`DYNAMIC_SMEM`)."""
    return resident(g, THREADS, resources.atom(g.compute_capability), DYNAMIC_SMEM, None).ctas_per_sm


# mma.m16n8k64 calls per warp per 128-wide group: the warp's 64 x 32 share of the 128 x 128 CTA tile
# (8 warps) is 4 m16 x 4 n8 fragments, over 2 k64 steps
CALLS_PER_GROUP = (64 // 16) * (32 // 8) * (GROUP // 64)


@lru_cache(maxsize=4096)
def per_cta_emulated(g, f, k) -> tuple:
    """The sm_90 path: ptxas turns each ``mma.sync.m16n8k64.s4`` into a call of an s4 -> s8 unpack
    routine (CUDA-core instructions) that ends in two INT8 ``IMMA.16832``. Per 128-wide group a warp
    issues the census' main-loop instructions plus :data:`CALLS_PER_GROUP` calls; the two warps on
    each SM sub-partition share its issue port (at the CUDA-core issue efficiency the native model
    uses for the epilogue, :data:`EPILOGUE_ISSUE_EFF`) and its ALU and FMA-heavy pipes (2 cycles per
    warp instruction each on sm_90). Returns (k4, groups, per-CTA seconds, 0.0, per-group cycles by
    bound)."""
    c = census()
    arch = _arch(g)
    issue_l, alu_l, fma_l, _ = c[(arch, "main_loop_group")]
    issue_c, alu_c, fma_c, _ = c[(arch, "mma_s4_emulation_call")]
    warps_per_smsp = THREADS // 32 // 4
    issue = warps_per_smsp * (issue_l + CALLS_PER_GROUP * issue_c)
    alu = warps_per_smsp * (alu_l + CALLS_PER_GROUP * alu_c) * 32 / (g.int32_lanes_per_clk_per_sm / 4)
    fma = warps_per_smsp * (fma_l + CALLS_PER_GROUP * fma_c) * 32 / (g.int32_lanes_per_clk_per_sm / 4)
    cycles = max(issue / EPILOGUE_ISSUE_EFF, alu, fma)
    k4 = k - KEEPER
    groups = k // GROUP
    # INT4 groups through the emulation; the INT8 keeper block on the native IMMA path
    keeper = 2.0 * TILE * TILE * KEEPER / g.tc_int8_op_per_clk_per_sm / f
    return k4, groups, (k4 // GROUP) * cycles / f + keeper, 0.0, {"issue": issue / EPILOGUE_ISSUE_EFF, "alu": alu,
                                                                  "fma": fma}


@lru_cache(maxsize=4096)
def per_cta(g, f, k, ctas_per_sm) -> tuple:
    """The M- and N-independent numbers: (k4, groups, per-CTA tensor seconds, per-CTA-slot
    epilogue seconds per wave)."""
    k4 = k - KEEPER
    groups = k // GROUP
    # tensor: per CTA, INT4 ops over k4 and INT8 ops over the keeper block (padded M tile)
    per_cta_tc = (2.0 * TILE * TILE * k4 / g.tc_int4_op_per_clk_per_sm
                  + 2.0 * TILE * TILE * KEEPER / g.tc_int8_op_per_clk_per_sm) * ctas_per_sm / f
    # epilogue ALU: I2F + FFMA per accumulator per group, + scale loads/products (~1 per 8 accumulators)
    lanes_per_cta = TILE * TILE * groups * 2.25
    mma_instr = (TILE * TILE * k4 / (16 * 8 * 64) + TILE * TILE * KEEPER / (16 * 8 * 32))
    warp_instr_cta = lanes_per_cta / 32 + mma_instr + (TILE * k / 2) * 2 / 512
    return k4, groups, per_cta_tc, max(warp_instr_cta / (4 * f * EPILOGUE_ISSUE_EFF),
                                       lanes_per_cta / (g.fp32_fma_lanes_per_clk_per_sm * f))


def model(mc, m, n, k, bits, group_size) -> Breakdown:
    """Latency of Atom's W4A4 GEMM on ``mc.gpu`` (decomposition in the module docstring)."""
    g, f, p = mc
    cps = ctas_per_sm(g)
    emulated = g.tc_int4_op_per_clk_per_sm == 0
    if emulated:
        k4, groups, per_cta_tc, alu_cta, bounds = per_cta_emulated(g, f, k)
    else:
        k4, groups, per_cta_tc, alu_cta = per_cta(g, f, k, cps)
    m_pad = TILE * math.ceil(m / TILE)
    ctas = (m_pad // TILE) * (n // TILE)
    n_waves = ctas / (g.sm_count * cps)
    waves_run = math.ceil(n_waves - 1e-9)
    t_tc = waves_run * per_cta_tc
    t_alu = waves_run * cps * alu_cta
    bytes_w = n * k4 / 2 + n * KEEPER + n * groups * 2
    bytes_a = m * k4 / 2 + m * KEEPER + m * groups * 2
    bytes_dram = bytes_w + bytes_a + 2.0 * m * n
    bif = 4 * (TILE * TILE // 2) * 2          # 4 stages of W and A tiles in flight per CTA
    pipes = {"dram": dram_time(bytes_dram, g, ctas, cps, bif),
             "l2": (bytes_w * (m_pad // TILE) + bytes_a * (n // TILE)) / g.l2_bytes_per_s(f),
             "tensor": t_tc + t_alu}      # MMA and the per-group epilogue are serial within a warp
    if emulated:
        bound = max(bounds, key=bounds.get)
        notes = (f"M padded to {m_pad}; {cps} CTA/SM; {_arch(g)} has no INT4 tensor path: ptxas emulates each "
                 f"mma.m16n8k64.s4 with an s4->s8 unpack routine + 2 IMMA.16832.S8 on CUDA cores "
                 f"({bound}-bound, {bounds[bound]:.0f} cycles per group per SMSP): {t_tc * 1e6:.1f} us per wave")
    else:
        notes = (f"M padded to {m_pad}; {cps} CTA/SM; tensor {t_tc * 1e6:.1f} us + "
                 f"epilogue {t_alu * 1e6:.1f} us (serial)")
    return combine(NAME, g, m, n, k, 4, pipes, p, ctas=ctas, n_waves=n_waves, bytes_dram=bytes_dram, notes=notes)
