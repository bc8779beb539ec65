"""Atom W4A4 fused group GEMM (INT4 mma m16n8k64 + INT8 keeper block, FP32 dequant epilogue).

Source matched: efeslab/Atom @ 7e3618b1a7a7, ``kernels/include/GEMM/Dense_layer_gemm_i4_o16.cuh``
(shared/specs/atom_qigen_gptq.md §1.7): 128×128×128 tiles, 8 warps, 4-stage cp.async pipeline,
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

from refsim.errors import FormatRuleError
from refsim.gpu_model.kernels._common import (check_bits, check_group, check_mnk, hot_setup, one_point,
                                             require_multiple, spec_memo)
from refsim.gpu_model.occupancy import resident
from refsim.gpu_model.roofline import FITTED, Breakdown, _combine1, _dram_time

NAME = "atom-w4a4"
BITS = (4,)
KEEPER = 128
GROUP = 128
TILE = 128
THREADS = 256
# Dynamic shared memory of one launch (host code: max(4 stages x (128 x (128 + 128) / 2 B + (2*128 +
# 128/2) half2 scales), 128 x 128 x 2 B)) and registers per thread, measured here from efeslab/Atom @
# 7e3618b1a7a7c86e1c93cc909b1510c046d76ac6, kernels/include/GEMM/Dense_layer_gemm_i4_o16.cuh, with
# nvcc 13.0 (V13.0.88): ``printf '#include "Dense_layer_gemm_i4_o16.cuh"\n' > i.cu;
# nvcc -arch=sm_XX -O3 -c i.cu -o /dev/null -Xptxas -v`` -> compute_gemm_imma "Used R registers",
# no spills. 220-221 registers x 256 threads bind one CTA per SM on every arch (A100 too, whose
# shared memory alone would hold two).
DYNAMIC_SMEM = 4 * (TILE * (TILE + TILE) // 2 + 4 * (2 * TILE + TILE // 2))
REGISTERS = {"sm_80": 220, "sm_86": 221, "sm_87": 221, "sm_89": 221}
# The only place the once-global fitted CUDA-core issue efficiency survives (value of the fit before
# issue 15's per-SMSP issue model replaced it for the calibrated kernels). No Atom calibration data
# exists to derive the epilogue's stalls from; with full issue (1.0) the 4090 NVBench point at
# M = 1024 is predicted 24 % fast, with the I2F conversion rate (16/clk/SM) as the limit M = 4096 is
# 24 % slow. Listed in docs/perf_model.md's fitted-constants table.
EPILOGUE_ISSUE_EFF = 0.576


def predict(gpu, m, n, k, bits=None, group_size=None, *, clock="sustained", params=None) -> Breakdown:
    """Latency breakdown of Atom's W4A4 GEMM on ``gpu``. Rules: bits 4, group_size 128,
    N % 128 == 0, K % 128 == 0 and K ≥ 256 (one INT4 group + the 128 INT8 keeper channels); the GPU
    must have an INT4 tensor path (not Hopper)."""
    m, n, k = check_mnk(NAME, m, n, k)
    return _predict(gpu, m, n, k, bits, group_size, clock, params)


def _gpu_rules(g) -> int:
    """The GPU rules of :func:`predict` on ``g`` (FormatRuleError) and its resident CTAs per SM."""
    if tuple(map(int, g.compute_capability.split("."))) < (8, 0):
        raise FormatRuleError(f"gpu: kernel {NAME} needs compute capability >= 8.0 (cp.async, mma m16n8k64 s4); "
                              f"got {g.name} (CC {g.compute_capability})")
    if g.tc_int4_op_per_clk_per_sm == 0:
        raise FormatRuleError(f"gpu: kernel {NAME} needs an INT4 tensor-core path (mma s4), which "
                              f"{g.name} ({g.arch}) does not have")
    return resident(g, THREADS, REGISTERS["sm_" + g.compute_capability.replace(".", "")], DYNAMIC_SMEM, None).ctas_per_sm


_CTAS_PER_SM: dict = {}      # id(spec) -> (spec, resident CTAs per SM): the spec is held, its id not reused



_NOTES: dict = {}
# (id(spec), f_sm, k) -> (spec, k4, groups, per-CTA tensor seconds, per-wave epilogue seconds per CTA slot)
_PER_K: dict = {}


def _per_k(g, f, k, ctas_per_sm):
    """The M- and N-independent numbers of :func:`_predict` (the same expressions)."""
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


def _predict_many(g, ms, n, k, bits, group_size, clock, params) -> list[Breakdown]:
    """:func:`_predict` for every M of ``ms`` (list of ints in [1, 2^31 - 1]) on the resolved spec ``g``:
    a list of len(ms) Breakdowns equal to the per-M ones bit for bit (rules checked once: none
    depends on M; per-(GPU, N, K) numbers computed once; tested)."""
    if bits is not None:
        check_bits(NAME, bits, BITS, 4)
    if group_size is not None:
        check_group(NAME, group_size, (GROUP,), GROUP)
    if n % TILE:
        require_multiple(NAME, "n", n, TILE, "128-wide N tiles")
    if k % GROUP:
        require_multiple(NAME, "k", k, GROUP, "groups of 128 along K")
    if k < 2 * GROUP:
        raise FormatRuleError(f"k: kernel {NAME} needs K >= 256 (INT4 groups + 128 INT8 keeper channels); got {k}")
    g, f, _, l2_bw = hot_setup(g, clock)
    p = params or FITTED
    launch, tail, a, name = p.launch_overhead_s * 1, g.dram_latency_s, 1.0 - p.overlap, g.name
    ctas_per_sm = spec_memo(_CTAS_PER_SM, id(g), g, lambda: _gpu_rules(g), 1024)
    k4, groups, per_cta_tc, alu_cta = spec_memo(_PER_K, (id(g), f, k), g, lambda: _per_k(g, f, k, ctas_per_sm))
    bytes_w = n * k4 / 2 + n * KEEPER + n * groups * 2
    slots = g.sm_count * ctas_per_sm
    n_tiles = n // TILE
    bif = 4 * (TILE * TILE // 2) * 2
    ceil = math.ceil
    out = []
    for m in ms:
        m_pad = TILE * ceil(m / TILE)
        ctas = (m_pad // TILE) * n_tiles
        n_waves = ctas / slots
        waves_run = ceil(n_waves - 1e-9)
        t_tc = waves_run * per_cta_tc
        t_alu = waves_run * ctas_per_sm * alu_cta
        bytes_a = m * k4 / 2 + m * KEEPER + m * groups * 2
        bytes_dram = bytes_w + bytes_a + 2.0 * m * n
        pipes = {"dram": _dram_time(bytes_dram, g, ctas, ctas_per_sm, bif),
                 "l2": (bytes_w * (m_pad // TILE) + bytes_a * n_tiles) / l2_bw, "tensor": t_tc + t_alu}
        nkey = (m_pad, ctas_per_sm, t_tc, t_alu)
        notes = _NOTES.get(nkey)
        if notes is None:
            notes = (f"M padded to {m_pad}; {ctas_per_sm} CTA/SM; tensor {t_tc * 1e6:.1f} us + "
                     f"epilogue {t_alu * 1e6:.1f} us (serial)")
            if len(_NOTES) > 4096:
                _NOTES.clear()
            _NOTES[nkey] = notes
        out.append(_combine1(NAME, name, m, n, k, 4, pipes, launch, tail, a, ctas, n_waves, bytes_dram, notes))
    return out


_predict = one_point(_predict_many)   # the per-point entry: one home for the model
