"""Cycle-level model of a kernel's inner loop on one SM sub-partition (SMSP).

What is simulated
-----------------
One SMSP (a quarter SM: one warp scheduler issuing ≤ 1 instruction per cycle) running ``W`` resident
warps, each repeating the kernel's loop body. Every instruction has a pipe and a latency; a pipe
accepts a new warp instruction every ``interval`` cycles:

    pipe   interval (cycles per warp instruction on one SMSP)        latency (dependent use)
    int    32 lanes / (int32 lanes per SM / 4)        = 2            4
    fp16   32 lanes / (half2 lanes per SM / 4)        = 1            5
    fp32   32 lanes / (fp32 lanes per SM / 4)         = 1 (8.6+)     4
    mio    wavefronts × 4 (L1/SMEM serves 1 wavefront/clk per SM)   LDS 30, L1-hit LDG 35
    tensor mma flops / (tensor rate per SM / 4)                      33
    dram   bytes / (BW_eff / (4·SMs) / f_sm)  (this SMSP's share)    DRAM latency · f_sm

Instructions issue in order per warp; an instruction waits until the instructions it depends on
have completed (scoreboard) and its pipe is free; the scheduler picks the oldest ready warp
(greedy-then-oldest). Global loads of iteration i+1 are issued at the top of iteration i
(software pipelining, as both kernels do: Any-Precision unrolls the chunk loop, Marlin keeps a
4-stage cp.async pipeline), so DRAM latency is hidden when enough work is in flight.

Steady-state cycles per iteration → kernel time = iterations per SMSP × cycles / f_sm (plus the
analytical model's launch and tail). :func:`reconcile` puts it next to the analytical model.
Bodies: :func:`anyprec_body` (one warp, one row, one 1024-weight chunk) and :func:`marlin_body`
(one warp, one k16 step of a 128×128 tile: 4 packed words per lane, 8·m_blocks MMAs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from refsim._validate import require_bounded, require_int
from refsim.errors import FormatRuleError

from refsim.gpu_model.kernels import anyprec as _anyprec
from refsim.gpu_model.kernels import marlin as marlin_model
from refsim.gpu_model.kernels import predict
from refsim.gpu_model.roofline import FITTED
from refsim.gpu_model.specs import GPUSpec, get_gpu

__all__ = ["Instr", "simulate", "anyprec_body", "marlin_body", "cycle_time", "reconcile"]

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


def _intervals(gpu: GPUSpec) -> dict:
    return {"int": 32 / (gpu.int32_lanes_per_clk_per_sm / 4), "fp16": 32 / (gpu.hfma2_lanes_per_clk_per_sm / 4),
            "fp32": 32 / (gpu.fp32_fma_lanes_per_clk_per_sm / 4), "mio": 4.0, "issue": 1.0}


def _run(body: list[Instr], warps: int, gpu: GPUSpec, f_sm: float, iterations: int,
         tensor_interval: float, dram_bytes_per_cycle: float | None) -> float:
    """Cycles until all ``warps`` warps have finished ``iterations`` loop iterations."""
    iv = _intervals(gpu)
    if dram_bytes_per_cycle is None:
        dram_bytes_per_cycle = gpu.dram_eff_bytes_per_s / (4 * gpu.sm_count) / f_sm
    dram_lat = gpu.dram_latency_s * f_sm
    pipe_free = {"int": 0.0, "fp16": 0.0, "fp32": 0.0, "mio": 0.0, "tensor": 0.0}
    dram_free = 0.0
    nb = len(body)
    # per warp: current iteration, position, completion times of this and previous iteration
    pos = [0] * warps
    it = [0] * warps
    done_cur = [[math.inf] * nb for _ in range(warps)]
    done_prev = [[0.0] * nb for _ in range(warps)]
    # iteration 0's loads were issued by the prologue: they arrive after one DRAM latency
    for w in range(warps):
        for j, ins in enumerate(body):
            if ins.pipe == "dram":
                done_prev[w][j] = dram_lat
    finish_iter = [[0.0] * (iterations + 1) for _ in range(warps)]
    cycle = 0.0
    order = list(range(warps))
    remaining = warps
    while remaining:
        issued = False
        for w in order:
            if it[w] >= iterations:
                continue
            ins = body[pos[w]]
            ready = max([done_cur[w][d] for d in ins.deps] + [done_prev[w][d] for d in ins.prev_deps] + [0.0])
            if ready > cycle:
                continue
            if ins.pipe == "dram":
                start = max(cycle, dram_free)
                dram_free = start + ins.dram_bytes / dram_bytes_per_cycle
                done_cur[w][pos[w]] = dram_free + dram_lat
            else:
                if pipe_free[ins.pipe] > cycle:
                    continue
                interval = tensor_interval if ins.pipe == "tensor" else iv[ins.pipe] * (ins.wavefronts if ins.pipe == "mio" else 1)
                pipe_free[ins.pipe] = cycle + interval
                done_cur[w][pos[w]] = cycle + ins.latency
            pos[w] += 1
            if pos[w] == nb:
                finish_iter[w][it[w] + 1] = max(v for v in done_cur[w] if v != math.inf)
                it[w] += 1
                pos[w] = 0
                done_prev[w] = done_cur[w]
                done_cur[w] = [math.inf] * nb
                if it[w] >= iterations:
                    remaining -= 1
            issued = True
            # greedy-then-oldest: keep the issuing warp first
            break
        if not issued:
            nxt = [cycle + 1.0]
            cycle = min(nxt)
        else:
            cycle += 1.0
    return max(finish_iter[w][iterations] for w in range(warps))


def simulate(body: list[Instr], warps: int, gpu: GPUSpec, f_sm: float, *, iterations: int = 6,
             tensor_interval: float = 0.0, dram_bytes_per_cycle: float | None = None) -> float:
    """Steady-state cycles per loop iteration of ONE warp when ``warps`` warps share one SMSP
    (so the SMSP completes ``warps`` iterations every returned-value cycles): the difference of
    two runs of ``iterations`` and ``2·iterations`` iterations, which removes the prologue
    (first DRAM latency) and the drain. ``warps`` 1..64 and ``iterations`` 1..4096 (bounded:
    the event loop is linear in both)."""
    warps = require_int("warps", warps, minimum=1)
    iterations = require_int("iterations", iterations, minimum=1)
    require_bounded("warps", warps, 64, what="warps per SMSP")
    require_bounded("iterations", iterations, 4096, what="iteration count")
    if not (isinstance(f_sm, (int, float, np.floating, np.integer)) and not isinstance(f_sm, bool)
            and math.isfinite(f_sm) and f_sm > 0):
        raise FormatRuleError(f"f_sm: must be a finite positive clock in Hz; got {f_sm!r}")
    t1 = _run(body, warps, gpu, f_sm, iterations, tensor_interval, dram_bytes_per_cycle)
    t2 = _run(body, warps, gpu, f_sm, 2 * iterations, tensor_interval, dram_bytes_per_cycle)
    return (t2 - t1) / iterations


def anyprec_body(bits: int, m: int) -> list[Instr]:
    """Loop body of ``matmul_kbit`` for one warp, one row, one 1024-weight chunk (see
    :mod:`refsim.gpu_model.kernels.anyprec` for the counts)."""
    multi_row = 1 if m == 1 else 4
    lookups, tops, words = _anyprec.lookup_plan(bits, m)
    conflict = _anyprec.lds_conflict_degree(words)
    body: list[Instr] = []
    loads = list(range(bits))
    for _ in range(bits):                                   # next chunk's plane words (prefetch)
        body.append(Instr("dram", 0, dram_bytes=128.0))
    act = []
    for _ in range(max(1, round(4 * m / multi_row))):        # activations: L1 hits, 4 wavefronts
        act.append(len(body))
        body.append(Instr("mio", L1_LAT, wavefronts=4))
    n_t = max(4, round(tops * _anyprec.LOP3_FUSION))
    t_idx = []
    for i in range(n_t):                                    # transpose: 4 independent output words
        deps = (t_idx[i - 4],) if i >= 4 else ()
        body.append(Instr("int", INT_LAT, deps=deps, prev_deps=tuple(loads) if i < 4 else ()))
        t_idx.append(len(body) - 1)
    last_t = tuple(t_idx[-4:])
    lds_idx = []
    for j in range(lookups):                                # extract byte, then LUT lookup
        dep = last_t if j < 4 else (lds_idx[j - 4] - 1,)
        body.append(Instr("int", INT_LAT, deps=dep))
        body.append(Instr("int", INT_LAT, deps=(len(body) - 1,)))
        body.append(Instr("mio", LDS_LAT, deps=(len(body) - 1,), wavefronts=conflict))
        lds_idx.append(len(body) - 1)
    prmt = []
    for s in range(16):                                     # half2 operand assembly
        src = lds_idx[(2 * s) % lookups], lds_idx[(2 * s + 1) % lookups]
        body.append(Instr("int", INT_LAT, deps=src))
        prmt.append(len(body) - 1)
    acc = {}
    for r in range(m):                                      # 16 HFMA2 per batch row: 2 chains
        for s in range(16):
            chain = (r, s % 2)
            deps = (prmt[s],) + ((acc[chain],) if chain in acc else ()) + tuple(act[:1])
            body.append(Instr("fp16", FP_LAT, deps=deps))
            acc[chain] = len(body) - 1
    for _ in range(6):                                      # loop / address arithmetic
        body.append(Instr("int", INT_LAT))
    return body


def marlin_body(m_blocks: int, grouped: bool = True) -> list[Instr]:
    """One warp, one k16 step of a 128×128 Marlin tile (8 warps: 2 along N × 4 along K; the warp
    owns 64 columns): B words (4 per lane, 512 B per warp, cp.async from DRAM 4 stages ahead),
    one ldmatrix.x4 of A per m-block, dequant 9 instructions per packed word (+4 HMUL2 when
    grouped), 8 MMAs m16n8k16 per m-block."""
    body: list[Instr] = [Instr("dram", 0, dram_bytes=512.0)]       # cp.async of a later stage
    lds_b = len(body)
    body.append(Instr("mio", LDS_LAT, prev_deps=(0,), wavefronts=4))  # LDS.128 of this stage's B
    lds_a = []
    for _ in range(m_blocks):
        body.append(Instr("mio", LDS_LAT, wavefronts=4))             # ldmatrix.x4 (A)
        lds_a.append(len(body) - 1)
    frag = []
    for wword in range(4):                                          # dequant 4 packed words
        prev = lds_b
        for _ in range(9 + (4 if grouped else 0)):
            body.append(Instr("int" if len(frag) % 2 == 0 else "fp16", INT_LAT, deps=(prev,)))
            prev = len(body) - 1
        frag.append(prev)
    for mb in range(m_blocks):
        for j in range(8):                                          # 8 n8 tiles of 64 columns
            body.append(Instr("tensor", MMA_LAT, deps=(frag[j // 2], lds_a[mb])))
    body.append(Instr("int", INT_LAT))                              # pipeline bookkeeping
    return body


def cycle_time(gpu, kernel: str, m: int, n: int, k: int, bits: int | None = None, *,
               clock="sustained", iterations: int = 6) -> dict:
    """Inner-loop time of ``kernel`` ('anyprec' or 'marlin') from the SMSP simulation.

    Returns dict(loop_s, cycles_per_iter, warps_per_smsp, iterations_per_smsp)."""
    g = get_gpu(gpu)
    f = g.clock_hz(clock)
    if kernel == "anyprec":
        bits = 4 if bits is None else bits
        multi_row = 1 if m == 1 else 4
        ctas = n // (4 * multi_row)
        ctas_per_sm = min(g.max_ctas_per_sm, g.max_warps_per_sm // 4)
        warps_sm = min(ctas, g.sm_count * ctas_per_sm) * 4 / g.sm_count
        w = max(1, min(g.max_warps_per_sm // 4, round(warps_sm / 4)))
        cyc = simulate(anyprec_body(bits, m), w, g, f, iterations=iterations)
        per_smsp = n * math.ceil(k / 1024) / (4 * g.sm_count)        # row-chunks per SMSP
        loop_cycles = per_smsp / w * cyc
    elif kernel == "marlin":
        tc = 2.0 * 16 * 8 * 16 / (g.tc_fp16_f32acc_flop_per_clk_per_sm / 4)
        w = 2                                                       # 8 warps per CTA, 1 CTA per SM
        tk, tn = marlin_model.tile_shape(m)
        per_smsp, loop_cycles, cyc = 0.0, 0.0, 0.0
        # the busiest block of each launch sets its time: iters tiles of tk x tn, each
        # (tk/16)*(tn/64) warp k16-steps over 64 columns, spread over the SM's 4 SMSPs
        for lc in marlin_model.partition(m, n, k, g.sm_count, None):
            cyc = simulate(marlin_body(lc.m_blocks), w, g, f, iterations=iterations, tensor_interval=tc)
            steps = lc.iters * (tk / 16) * (tn / 64) / 4
            per_smsp += steps
            loop_cycles += steps / w * cyc
    else:
        raise ValueError(f"kernel: cycle model covers 'anyprec' and 'marlin'; got {kernel!r}")
    return {"loop_s": loop_cycles / f, "cycles_per_iter": cyc, "warps_per_smsp": w,
            "iterations_per_smsp": per_smsp}


def reconcile(gpu, kernel: str, m: int, n: int, k: int, bits: int | None = None, *, clock="sustained") -> dict:
    """The cycle model's inner-loop time beside the analytical model's overlapped pipe time
    (latency minus launch, tail and serial terms)."""
    bd = predict(gpu, kernel, m, n, k, bits=bits, clock=clock)
    fixed = sum(bd.terms.get(key, 0.0) for key in ("launch", "tail", "serial"))
    cyc = cycle_time(gpu, kernel, m, n, k, bits, clock=clock)
    return {"analytical_loop_s": bd.latency_s - fixed, "cycle_loop_s": cyc["loop_s"],
            "ratio": cyc["loop_s"] / (bd.latency_s - fixed), "analytical_bottleneck": bd.bottleneck, **cyc,
            "issue_eff_fitted": FITTED.cuda_core_issue_eff}
