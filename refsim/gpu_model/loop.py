"""A kernel's inner loop as data: the per-warp body, whether loads are prefetched, and the
per-SMSP issue model (MWP/CWP style) that both the analytical model and ``cycle.py`` read.

Spec block
----------
A :class:`Loop` is one warp's loop body (a tuple of :class:`Instr`) plus its structure:

    prefetch   True  : loads of step i+1 are issued during step i (cp.async stages, unrolled loads);
                       a warp waits for DRAM only when bandwidth / bytes in flight run short
               False : every step issues its loads and waits for them (one DRAM latency per step)

Per SMSP (one scheduler, ≤ 1 warp instruction per clock) with ``W`` resident warps, each running
``R / W`` steps of ``I`` instructions (Hong & Kim's MWP/CWP split, at the granularity of one step)::

    C1       = cycles ONE warp needs to issue one step alone on the SMSP: in-order issue, each
               instruction waits for the instructions it depends on (latency table below) and for
               its pipe; DRAM loads count as arriving at once (their latency is the next term)
    T_issue  = R · I                       the scheduler's slots (compute warps saturate it)
    T_warp   = (R / W) · (C1 + L_dram·f)   one warp's serial path when loads are not prefetched
             = (R / W) · C1                when they are
    T_loop   = max(T_issue, T_warp) / f    (pipes with fewer lanes than 32/clk are separate terms)

A kernel model may refine T_warp with its step's own load order (Any-Precision issues row h+1's
loads with row h's math: L + (rows − 1)·max(C1_row, L·f) + C1_row per step, from its SASS).

    issue ─┬─ w0: [ld]····L_dram····[dep chain C1]─[ld]····
           ├─ w1:    [ld]····L_dram····[dep chain C1]─
           └─ ...   W warps interleave; the SMSP is busy I of every max(I·W, C1 + L) cycles

Latencies (cycles until a dependent instruction may issue): INT 4, FP 5, LDS 30, L1-hit load 35,
MMA 33 (Ampere/Ada microbenchmarks, Jia et al. 2018/2019 method). Pipe intervals per warp
instruction on one SMSP: 32 lanes / (lanes per SM / 4); MIO 4 cycles per wavefront.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from refsim._validate import plain_scalar, require_bounded, require_fields, require_instance
from refsim.errors import FormatRuleError


def _positive(name: str, value, *, zero_ok: bool = False) -> float:
    value = plain_scalar(value)
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value < 0 or (value == 0 and not zero_ok):
        raise FormatRuleError(f"{name}: must be a finite {'non-negative' if zero_ok else 'positive'} number; got {value!r}")
    return float(value)

__all__ = ["Instr", "Loop", "intervals", "warp_step_cycles", "INT_LAT", "FP_LAT", "LDS_LAT", "L1_LAT",
           "MMA_LAT"]

INT_LAT, FP_LAT, LDS_LAT, L1_LAT, MMA_LAT = 4, 5, 30, 35, 33


@dataclass(frozen=True)
class Instr:
    """One warp instruction of a loop body.

    pipe: 'int' | 'fp16' | 'fp32' | 'mio' | 'tensor' | 'dram'; latency: cycles until a dependent
    instruction may issue; deps: body indices (this iteration) it waits for; prev_deps: body indices
    of the *previous* iteration it waits for (prefetched loads); dram_bytes: bytes the warp moves
    (pipe 'dram'); wavefronts: L1/SMEM wavefronts (pipe 'mio')."""

    pipe: str
    latency: int
    deps: tuple = ()
    prev_deps: tuple = ()
    dram_bytes: float = 0.0
    wavefronts: float = 1.0

    def __post_init__(self) -> None:
        require_fields(self)


@dataclass(frozen=True)
class Loop:
    """One warp's loop body and the structure both performance models read.

    body: the instructions of one step; prefetch: loads of the next step are in flight during
    this one (see the module spec block)."""

    body: tuple
    prefetch: bool

    def __post_init__(self) -> None:
        require_fields(self)
        object.__setattr__(self, "body", check_body(self.body))

    @property
    def instructions(self) -> int:
        """Warp instructions issued per step (I)."""
        return len(self.body)


PIPES = ("int", "fp16", "fp32", "mio", "tensor", "dram")


def check_body(body) -> tuple:
    """``body`` (a list or tuple of :class:`Instr`) as a tuple, after the rules the event loop
    relies on: 1..4096 instructions, each on a known pipe, ``deps`` indices of earlier instructions (a warp never waits
    for an instruction it has not issued) and ``prev_deps`` indices of the body."""
    if not isinstance(body, (list, tuple)) or not body:
        raise FormatRuleError(f"body: must be a non-empty list of Instr; got {body!r:.80}")
    require_bounded("body", len(body), 4096, what="instruction count")
    for j, ins in enumerate(body):
        require_instance(f"body[{j}]", ins, Instr)
        if ins.pipe not in PIPES:
            raise FormatRuleError(f"body[{j}].pipe: must be one of {list(PIPES)}; got {ins.pipe!r:.80}")
        for name, deps, limit in (("deps", ins.deps, j), ("prev_deps", ins.prev_deps, len(body))):
            for d in deps:
                if isinstance(d, bool) or not isinstance(d, int) or not 0 <= d < limit:
                    raise FormatRuleError(f"body[{j}].{name}: must hold indices in [0, {limit}) "
                                          f"({'earlier instructions' if name == 'deps' else 'the body'}); got {d!r:.80}")
    return tuple(body)


def intervals(int32_lanes: float, hfma2_lanes: float, fp32_lanes: float) -> dict:
    """Cycles between two warp instructions of one pipe on one SMSP (lanes are per SM per clock,
    finite positive numbers): dict with keys int, fp16, fp32, mio, issue."""
    int32_lanes = _positive("int32_lanes", int32_lanes)
    hfma2_lanes = _positive("hfma2_lanes", hfma2_lanes)
    fp32_lanes = _positive("fp32_lanes", fp32_lanes)
    return {"int": 32 / (int32_lanes / 4), "fp16": 32 / (hfma2_lanes / 4), "fp32": 32 / (fp32_lanes / 4),
            "mio": 4.0, "issue": 1.0}


def warp_step_cycles(loop: Loop, iv: dict, tensor_interval: float = 0.0) -> float:
    """C1: cycles one warp alone on an SMSP needs to issue one step of ``loop`` (in-order issue,
    dependency latencies and pipe intervals; DRAM loads arrive at once). ``iv`` from
    :func:`intervals`. Loop-carried dependencies (``prev_deps``) are taken as satisfied: with one
    warp the previous step's results have long arrived."""
    if not isinstance(loop, Loop):
        raise FormatRuleError(f"loop: must be a refsim.gpu_model.loop.Loop; got {type(loop).__name__}")
    if not isinstance(iv, dict) or any(not isinstance(iv.get(key), (int, float)) or isinstance(iv.get(key), bool)
                                       or not math.isfinite(iv[key]) or iv[key] < 0 for key in ("int", "fp16", "fp32", "mio")):
        raise FormatRuleError(f"iv: must be the dict of pipe intervals that intervals() returns; got {iv!r}"[:200])
    tensor_interval = _positive("tensor_interval", tensor_interval, zero_ok=True)
    done = [0.0] * len(loop.body)
    pipe_free: dict = {}
    t = 0.0
    last = 0.0
    for j, ins in enumerate(loop.body):
        start = max([t] + [done[d] for d in ins.deps])
        if ins.pipe == "dram":
            done[j] = start
        else:
            interval = tensor_interval if ins.pipe == "tensor" else iv[ins.pipe] * (
                ins.wavefronts if ins.pipe == "mio" else 1)
            start = max(start, pipe_free.get(ins.pipe, 0.0))
            pipe_free[ins.pipe] = start + interval
            done[j] = start + ins.latency
        last = start
        t = start + 1.0
    return last + 1.0
