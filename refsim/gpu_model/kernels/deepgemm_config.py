"""DeepGEMM's sm_90 FP8 GEMM configuration: the kernel its host picks for one shape.

``config(m, n, k, num_sms)`` is DeepGEMM's ``get_best_config<SM90ArchSpec>`` (deepseek-ai/DeepGEMM @
54e22612409371d6364144b69086735beb54e98b, ``csrc/jit_kernels/heuristics/sm90.hpp``, ``common.hpp``) for
``fp8_gemm_nt`` (GemmType::Normal, Kernel1D2D, e4m3 -> bf16): BLOCK_M in {64, 128, 256} (+16, 32 for
M <= 16, 32), BLOCK_N 16..192 step 16, BLOCK_K 128, clusters (1|2) x (1|2) of at most 2, the candidate
rules (1D2D unroll, <= 128 on one side, swizzles >= 64 B, >= 3 stages, >= 4 for small blocks), stages
from 232,448 B of shared memory, and the L1/L2 cycle model choosing the first strict minimum. Read by
the performance model (:mod:`refsim.gpu_model.kernels.deepgemm_fp8`) and by the kernel's host side
(:mod:`refsim.cuda.official_deepgemm`), which instantiates the kernel it names.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refsim._validate import require_fields, require_int
from refsim.errors import FormatRuleError

__all__ = ["SMEM_CAPACITY", "TMA_THREADS", "Config", "config"]

#: SM90ArchSpec::smem_capacity, the shared memory the stage count may fill (bytes)
SMEM_CAPACITY = 232448
_MAX_STAGES = 16
#: threads of the TMA (producer) warpgroup
TMA_THREADS = 128


@dataclass(frozen=True)
class Config:
    """One kernel configuration as DeepGEMM's heuristics choose it (sizes in elements, smem in bytes)."""

    block_m: int
    block_n: int
    block_k: int
    cluster_m: int
    cluster_n: int
    stages: int
    smem_bytes: int
    math_threads: int
    swizzle_a: int
    swizzle_b: int
    swizzle_d: int

    def __post_init__(self):
        require_fields(self)

    @property
    def threads(self) -> int:
        return TMA_THREADS + self.math_threads

    @property
    def cluster(self) -> int:
        return self.cluster_m * self.cluster_n


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _swizzle(block_bytes: int) -> int:
    """``get_swizzle_mode``: the largest of 128, 64, 32, 16 dividing the box's inner bytes."""
    return next(mode for mode in (128, 64, 32, 16) if block_bytes % mode == 0)


def _stages(k: int, bm: int, bn: int, bk: int) -> tuple[int, int]:
    """``get_pipeline_config`` for 1D2D e4m3 -> bf16: (stages, smem bytes)."""
    smem_cd = _ceil_div(bm * bn * 2, 1024) * 1024                        # bf16 D tile, 1024-aligned
    uniform_sfb = 1 if bk % bn == 0 else 2
    extra = smem_cd + _MAX_STAGES * 8 * 2 + _ceil_div(_ceil_div(k, bk) * 4 * uniform_sfb, 8) * 8
    per_stage = bm * bk + bn * bk + _ceil_div(bm * 4, 128) * 128         # A, B (1 byte each), SFA
    stages = min((SMEM_CAPACITY - extra) // per_stage, _MAX_STAGES)
    return stages, extra + stages * per_stage


def _cycles(m: int, n: int, k: int, num_sms: int, bm: int, bn: int, cm: int, cn: int) -> int:
    """``get_layout_info``'s cycle estimate (int64 arithmetic, the wave efficiency a float)."""
    blocks = _ceil_div(m, bm) * _ceil_div(n, bn)
    waves = _ceil_div(blocks, num_sms)
    l2_per_cycle = int(min(64.0 * num_sms, 8e6 / 1.3e3))
    l1_per_cycle = 128 * num_sms
    l2_ab = k * (bm // cn + bn // cm)
    l1_ab = k * (bm + bn)
    l1_tc = k * (max(64, bm) + bn) + bm * bn * 2
    cd = bm * bn * 2
    l2 = (l2_ab + cd) * blocks // l2_per_cycle
    l1 = (l1_ab + l1_tc + cd) * blocks // l1_per_cycle
    efficiency = np.float32(blocks) / np.float32(waves * num_sms)
    cycles = int(np.float32(max(l1, l2)) / efficiency)
    return 2**63 - 1 if cm * cn > 1 and waves <= 1 else cycles


def config(m: int, n: int, k: int, num_sms: int = 132) -> Config:
    """DeepGEMM's configuration for ``fp8_gemm_nt`` of D (M, N) bf16 = A (M, K) e4m3 @ B (N, K)^T e4m3 with 1D2D
    scaling on ``num_sms`` SMs (132: H100/H200 SXM; even, as DeepGEMM requires). Module spec, "configuration"."""
    m, n, k = (require_int(name, v, minimum=1) for name, v in (("m", m), ("n", n), ("k", k)))
    num_sms = require_int("num_sms", num_sms, minimum=2)
    if num_sms % 2:
        raise FormatRuleError(f"num_sms: DeepGEMM requires an even SM count (GemmDesc::check_validity); got {num_sms}")
    bk = 128
    block_ms = [64, 128] + ([16] if m <= 16 else []) + ([32] if m <= 32 else []) + [256]
    best, best_cycles = None, None
    for cm in (1, 2):
        for cn in (1, 2):
            if cm * cn > 2 or num_sms % (cm * cn):
                continue
            for bm in block_ms:
                for bn in range(16, 193, 16):
                    if bn > bk and bn % (bn - bk) and bk % (bn - bk):       # 1D2D unroll requirement
                        continue
                    if bm > 128 and bn > 128:
                        continue
                    stages, smem = _stages(k, bm, bn, bk)
                    if stages < 3 or (bm * bn < 128 * 192 and stages < 4):
                        continue
                    cycles = _cycles(m, n, k, num_sms, bm, bn, cm, cn)
                    if best is None or cycles < best_cycles:
                        best_cycles = cycles
                        best = Config(bm, bn, bk, cm, cn, stages, smem, 128 if bm <= 64 else 256,
                                      _swizzle(bk), _swizzle(bk), _swizzle(bn * 2))
    return best
