"""refsim's sm_90a W4A16 GEMM (``refsim/cuda/hopper_w4a16.cu``, the Machete design): C (M, N) fp16 = X (M, K)
fp16 @ W (K, N), 4-bit weights with fp16 group scales (groups of 128), converted in registers before wgmma.

Decomposition (the kernel's spec block)::

    grid        (N / 64, ceil(M / 64)) CTAs of 256 threads: a producer warpgroup (one thread issues the TMA
                loads of a 4-slot ring: X 64 x 64 fp16 + W 64 x 64 packed, 10,240 B per slot) and one
                consumer warpgroup; 128 registers per thread (__maxnreg__) and 41,984 B of shared memory,
                so CTAs per SM from the occupancy rules (2 on sm_90: the registers)
    per k-tile (64 deep), the consumer warpgroup, in order:
        convert  each thread turns 4 packed words (32 weights) into wgmma A fragments: the
                 instructions of one k-tile of the consumer loop in the committed PTX
                 (refsim/data/timings/ptx_counts.json, ``python bench/ptx_counts.py --write``):
                 f16x2 ops on the FP16 pipe, integer/logic/moves on the ALU, everything issued
        wgmma    4 x wgmma.m64n64k16.f32.f16.f16 (D = W^T X^T: 64 n x 64 m x 64 k), then
                 wait_group 0 before the next k-tile's conversion (no overlap inside the warpgroup)

    one k-tile, in SM sub-partition (SMSP) clocks (each consumer warp on its own SMSP):
        convert  = max(issue slots, ALU ops x 32 / ALU lanes per SMSP, f16x2 ops x 32 / HFMA2 lanes per SMSP)
        wgmma    = 2 * 64 * 64 * 64 / FP16 (f32 accumulate) tensor rate per SM
    c CTAs resident on an SM: step = max(c x wgmma (tensor cores shared), c x convert (each SMSP runs c
    consumer warps), convert + wgmma (one CTA's own chain)); the busiest SM runs ceil(CTAs / SMs) CTAs,
    c at a time, K / 64 steps each

    dram        W N K / 2 + scales 2 N K / 128 + X 2 M K + C 2 M N, Little's law at the resident CTAs' rings
    l2          X once per column tile (N / 64), W and scales once per row tile (ceil(M / 64))

Combined as the other tensor-core models (:func:`refsim.gpu_model.roofline.combine`); the math term is
named by what binds it (tensor, alu or latency). Unvalidated: no timing table holds this kernel;
:data:`ESTIMATES` names the estimates. wgmma, TMA and setmaxnreg exist on sm_90a only.
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from pathlib import Path

from refsim.gpu_model.kernels._common import require_multiple, require_sm90a
from refsim.gpu_model.occupancy import resident
from refsim.gpu_model.roofline import Breakdown, combine, dram_time

NAME = "hopper-w4a16"
BITS = (4,)
DEFAULT_BITS = 4
GROUPS = (128,)
DEFAULT_GROUP = 128
GROUP_RULE = "uses groups of 128 (one scale per two 64-deep k-tiles)"
TILE = 64                # output columns (the wgmma M), tokens (the wgmma N) and K depth of one k-tile
THREADS = 256
REGISTERS = 128          # __maxnreg__(128): the launch's count, which setmaxnreg redistributes
SHARED_BYTES = 41984     # 4 stages x (8,192 X + 2,048 W) + 8 mbarriers, padded (ptxas)
STAGE_BYTES = 10240
STAGES = 4
COUNTS_PATH = Path(__file__).resolve().parents[2] / "data" / "timings" / "ptx_counts.json"
#: the constants of this model that are estimates, with why (listed by every prediction's trust statement)
ESTIMATES = {
    "hopper-w4a16: conversion": "the in-register conversion charged from PTX instruction counts (ptxas may hoist "
                                "the loop's constant moves and fuse integer ops; the SASS is not counted)",
    "hopper-w4a16: wgmma rate": "wgmma m64n64k16 at the datasheet FP16 peak (Luo et al., arXiv:2501.12084, measure "
                                "lower wgmma throughput at small N; not modelled)",
}


@lru_cache(maxsize=1)
def ktile_mix() -> tuple[int, int, int]:
    """(issue slots, ALU ops, f16x2 ops) of one k-tile per consumer thread, from the committed counts
    (``hopper_w4a16.instructions`` of ptx_counts.json): f16x2 names on the FP16 pipe; loads, wgmma,
    mbarrier and branches issue only; every other instruction is an ALU op."""
    mix = json.loads(COUNTS_PATH.read_text(encoding="utf-8"))["hopper_w4a16"]["instructions"]
    fp16 = sum(v for name, v in mix.items() if name.endswith(".f16x2"))
    other = sum(v for name, v in mix.items() if name.split(".")[0] in ("ld", "wgmma", "mbarrier", "bra"))
    total = sum(mix.values())
    return total, total - fp16 - other, fp16


def check(gpu, m, n, k, bits, group_size) -> None:
    """sm_90a only (wgmma, TMA, setmaxnreg); N % 64 == 0 (64-column tiles); K % 128 == 0 (a scale group
    is two 64-deep k-tiles)."""
    require_sm90a(NAME, gpu, "wgmma.mma_async, TMA and setmaxnreg")
    require_multiple(NAME, "n", n, TILE, "64-column output tiles")
    require_multiple(NAME, "k", k, 128, "a scale group is two 64-deep k-tiles")


def model(mc, m, n, k, bits, group_size) -> Breakdown:
    """Latency of the W4A16 wgmma kernel for C (M, N) = X (M, K) @ W (K, N) on ``mc.gpu`` (module docstring)."""
    g, f, p = mc
    m_tiles = math.ceil(m / TILE)
    ctas = (n // TILE) * m_tiles
    occ = resident(g, THREADS, REGISTERS, SHARED_BYTES, ctas)
    per_sm = occ.ctas_per_sm
    issue, alu, fp16 = ktile_mix()
    convert = max(float(issue), alu * 32 / (g.int32_lanes_per_clk_per_sm / 4), fp16 * 32 / (g.hfma2_lanes_per_clk_per_sm / 4))
    wgmma = 2.0 * TILE * TILE * TILE / g.tc_fp16_f32acc_flop_per_clk_per_sm
    k_tiles = k // TILE
    busiest = math.ceil(ctas / g.sm_count)                   # CTAs on the busiest SM, per_sm at a time
    t_tensor = t_alu = t_chain = t_math = 0.0
    for first in range(0, busiest, per_sm):
        c = min(per_sm, busiest - first)
        t_tensor += k_tiles * c * wgmma
        t_alu += k_tiles * c * convert
        t_chain += k_tiles * (convert + wgmma)
        t_math += k_tiles * max(c * wgmma, c * convert, convert + wgmma)
    math_terms = {"tensor": t_tensor / f, "alu": t_alu / f, "latency": t_chain / f}
    binding = max(math_terms, key=math_terms.get)
    bytes_w = n * k / 2 + 2.0 * n * (k // 128)
    bytes_dram = bytes_w + 2.0 * m * k + 2.0 * m * n
    l2 = 2.0 * m * k * (n // TILE) + bytes_w * m_tiles
    pipes = {"dram": dram_time(bytes_dram, g, ctas, per_sm, STAGES * STAGE_BYTES), "l2": l2 / g.l2_bytes_per_s(f),
             binding: t_math / f}
    notes = (f"TMA ring {STAGES} x {STAGE_BYTES} B, producer + consumer warpgroups, {per_sm} CTAs/SM "
             f"({occ.limiter}); per k-tile: conversion {convert:g} SMSP clk ({issue} PTX instructions, {alu} ALU, "
             f"{fp16} f16x2) then wgmma 4 x m64n64k16 {wgmma:g} clk, serial (wait_group 0); math "
             + ", ".join(f"{key} {v * 1e6:.2f} us" for key, v in math_terms.items()))
    return combine(NAME, g, m, n, k, 4, pipes, p, ctas=ctas, n_waves=ctas / (g.sm_count * per_sm),
                   bytes_dram=bytes_dram, notes=notes)
