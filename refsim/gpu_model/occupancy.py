"""Occupancy: how many CTAs of one kernel instantiation are resident on one SM at once.

Spec block
----------
The SM holds a CTA only when all of its resources fit; the resident count is the minimum over
five limits (CUDA C++ Programming Guide, "Technical Specifications per Compute Capability";
the allocation units are those of NVIDIA's CUDA Occupancy Calculator)::

    warps/CTA   w = ceil(threads / 32)
    registers   regs/warp = ceil(regs_per_thread · 32 / 256) · 256
                warps are bound to one of 4 SMSPs, each with regs_per_sm / 4 registers:
                warps_by_regs = 4 · floor((regs_per_sm / 4) / regs/warp)
                ctas_by_regs  = floor(warps_by_regs / w)
    shared      smem/CTA = ceil((static + dynamic + reserved_per_block) / unit) · unit
                ctas_by_smem  = floor(smem_per_sm / smem/CTA)        (max carve-out assumed)
    warps       ctas_by_warps = floor(max_warps_per_sm / w)
    CTA slots   max_ctas_per_sm
    grid        ceil(grid_ctas / SMs)   (a grid smaller than one wave leaves SMs lighter)

    ┌──────── SM ────────┐   example: 4 warps/CTA at 168 regs/thread on CC 8.9
    │ SMSP0 SMSP1 ...  x4 │   regs/warp = 5376, 16384 // 5376 = 3 warps per SMSP
    │ 3 w   3 w       3 w │   -> 12 warps -> 3 CTAs (registers bind; warps would allow 12)
    └────────────────────┘

A kernel that needs more registers than ``max_regs_per_thread`` or more shared memory than
``smem_per_block_bytes`` cannot launch: :class:`~refsim.errors.FormatRuleError`.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import NamedTuple

from refsim._validate import plain_scalar, require_int, require_instance
from refsim.errors import FormatRuleError
from refsim.gpu_model.specs import GPUSpec, get_gpu

__all__ = ["Occupancy", "occupancy"]


class _OccupancyFields(NamedTuple):
    ctas_per_sm: int
    limiter: str
    warps_per_sm: int
    limits: dict


class Occupancy(_OccupancyFields):
    """Resident CTAs per SM and the limit that binds (``regs``, ``smem``, ``warps``, ``ctas``, ``grid``).
    A tuple of its four fields; built with NumPy integers or a ``np.str_`` limiter it holds the
    Python values."""

    __slots__ = ()

    def __new__(cls, ctas_per_sm: int, limiter: str, warps_per_sm: int, limits: dict):
        limiter = plain_scalar(limiter)
        return super().__new__(cls, require_int("ctas_per_sm", ctas_per_sm, minimum=0),
                               require_instance("limiter", limiter, str),
                               require_int("warps_per_sm", warps_per_sm, minimum=0),
                               require_instance("limits", limits, dict))

    @classmethod
    def _make(cls, iterable):
        # _replace builds through _make: the same checks as the constructor
        return cls(*iterable)


def occupancy(gpu: GPUSpec, threads_per_block: int, regs_per_thread: int, smem_per_block_bytes: int = 0,
              grid_ctas: int | None = None) -> Occupancy:
    """Resident CTAs per SM of a kernel instantiation on ``gpu`` (see the module spec block).

    ``threads_per_block`` 1..max_threads_per_block, ``regs_per_thread`` 1..max_regs_per_thread (ptxas
    "Used N registers"), ``smem_per_block_bytes`` static + dynamic shared memory per CTA, ``grid_ctas``
    the launch's CTA count (None: unlimited). Ties name the first limit in the order regs, smem,
    warps, ctas, grid.
    """
    gpu = get_gpu(gpu)
    threads = require_int("threads_per_block", threads_per_block, minimum=1)
    regs = require_int("regs_per_thread", regs_per_thread, minimum=1)
    smem = require_int("smem_per_block_bytes", smem_per_block_bytes, minimum=0)
    if grid_ctas is not None:
        grid_ctas = require_int("grid_ctas", grid_ctas, minimum=1)
    return resident(gpu, threads, regs, smem, grid_ctas)


@lru_cache(maxsize=4096)
def resident(gpu: GPUSpec, threads: int, regs: int, smem: int, grid_ctas: int | None) -> Occupancy:
    """:func:`occupancy` for arguments already known to be valid ints (the kernel models' own
    launch constants), cached: a prediction must stay O(1) and cheap."""
    if threads > gpu.max_threads_per_block:
        raise FormatRuleError(f"threads_per_block: at most {gpu.max_threads_per_block} on {gpu.name}; got {threads}")
    if regs > gpu.max_regs_per_thread:
        raise FormatRuleError(f"regs_per_thread: at most {gpu.max_regs_per_thread} on {gpu.name}; got {regs}")
    if smem > gpu.smem_per_block_bytes:
        raise FormatRuleError(f"smem_per_block_bytes: at most {gpu.smem_per_block_bytes} on {gpu.name}; got {smem}")
    w = math.ceil(threads / 32)
    unit = gpu.reg_alloc_unit_per_warp
    regs_per_warp = math.ceil(regs * 32 / unit) * unit
    warps_by_regs = 4 * ((gpu.regs_per_sm // 4) // regs_per_warp)
    limits = {"regs": warps_by_regs // w}
    su = gpu.smem_alloc_unit_bytes
    smem_cta = math.ceil((smem + gpu.smem_reserved_per_block_bytes) / su) * su
    limits["smem"] = gpu.smem_per_sm_bytes // smem_cta if smem_cta else gpu.max_ctas_per_sm
    limits["warps"] = gpu.max_warps_per_sm // w
    limits["ctas"] = gpu.max_ctas_per_sm
    if grid_ctas is not None:
        limits["grid"] = math.ceil(grid_ctas / gpu.sm_count)
    limiter = min(limits, key=limits.get)
    ctas = limits[limiter]
    if ctas < 1:
        raise FormatRuleError(f"occupancy: {threads} threads x {regs} registers do not fit one SM of {gpu.name}")
    return Occupancy(ctas, limiter, ctas * w, limits)
