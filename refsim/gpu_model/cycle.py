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
(greedy-then-oldest). The bodies and their loop structure are the kernel models' own
(:class:`refsim.gpu_model.loop.Loop`, one description read by both models): Marlin's loads of a
later stage are consumed one iteration later (``prev_deps``, 4-stage cp.async pipeline), so DRAM
latency is hidden when enough is in flight; Any-Precision's chunk loop has no cross-chunk prefetch
(``deps`` on this step's loads), so every step of every warp waits one DRAM latency.

The event loop (:func:`_run`) skips cycles in which no warp can issue and computes each warp's
operand-ready time once per instruction; :func:`_run_reference` is the plain loop that steps and
scans every cycle, and the two return the same float bit for bit (tests/gpu_model/test_cycle_fast.py).

Steady-state cycles per iteration → kernel time = iterations per SMSP × cycles / f_sm (plus the
analytical model's launch and tail). :func:`reconcile` puts it next to the analytical model.
Bodies: :func:`anyprec_body` (one warp, one 1024-weight chunk of its rows) and :func:`marlin_body`
(one warp, one k16 step of a 128×128 tile: 4 packed words per lane, 8·m_blocks MMAs).
"""

from __future__ import annotations

import math

import numpy as np

from refsim._validate import plain_scalar, require_bounded, require_choice, require_instance, require_int
from refsim.errors import FormatRuleError

from refsim.gpu_model.kernels import anyprec as _anyprec
from refsim.gpu_model.kernels import marlin as marlin_model
from refsim.gpu_model.kernels import predict
from refsim.gpu_model.kernels._common import mma_sync_rate
from refsim.gpu_model.loop import Instr, _positive, check_body, intervals
from refsim.gpu_model.specs import GPUSpec, get_gpu

__all__ = ["Instr", "simulate", "anyprec_body", "marlin_body", "cycle_time", "reconcile"]

def _intervals(gpu: GPUSpec) -> dict:
    return intervals(gpu.int32_lanes_per_clk_per_sm, gpu.hfma2_lanes_per_clk_per_sm, gpu.fp32_fma_lanes_per_clk_per_sm)


def _run(body: list[Instr], warps: int, gpu: GPUSpec, f_sm: float, iterations: int,
         tensor_interval: float, dram_bytes_per_cycle: float | None) -> float:
    """Cycles until all ``warps`` warps have finished ``iterations`` loop iterations.

    Same machine and same trajectory as :func:`_run_reference`, computed faster: (1) a warp's
    operand-ready time is computed once when it reaches an instruction (its dependences are
    already issued, so their completion times no longer change), not on every scanned cycle;
    (2) when no warp can issue, the clock jumps to the first integral cycle at which one can (its
    operands ready and its non-DRAM pipe free) instead of stepping idle cycles one by one."""
    iv = _intervals(gpu)
    if dram_bytes_per_cycle is None:
        dram_bytes_per_cycle = gpu.dram_eff_bytes_per_s / (4 * gpu.sm_count) / f_sm
    dram_lat = gpu.dram_latency_s * f_sm
    nb = len(body)
    pipes = [ins.pipe for ins in body]
    is_dram = [p == "dram" for p in pipes]
    deps = [tuple(ins.deps) for ins in body]
    pdeps = [tuple(ins.prev_deps) for ins in body]
    lat = [ins.latency for ins in body]
    step = [ins.dram_bytes / dram_bytes_per_cycle if d else
            (tensor_interval if ins.pipe == "tensor" else iv[ins.pipe] * (ins.wavefronts if ins.pipe == "mio" else 1))
            for ins, d in zip(body, is_dram)]
    pipe_free = {"int": 0.0, "fp16": 0.0, "fp32": 0.0, "mio": 0.0, "tensor": 0.0}
    dram_free = 0.0
    pos = [0] * warps
    it = [0] * warps
    done_cur = [[math.inf] * nb for _ in range(warps)]
    done_prev = [[0.0] * nb for _ in range(warps)]
    for w in range(warps):
        for j in range(nb):
            if is_dram[j]:
                done_prev[w][j] = dram_lat
    finish = [0.0] * warps

    def ready_of(w: int) -> float:
        j, cur, prev = pos[w], done_cur[w], done_prev[w]
        return max([cur[d] for d in deps[j]] + [prev[d] for d in pdeps[j]] + [0.0])

    ready = [ready_of(w) for w in range(warps)]
    active = list(range(warps))
    cycle = 0.0
    while active:
        chosen = -1
        for w in active:
            if ready[w] > cycle:
                continue
            j = pos[w]
            if is_dram[j]:
                start = cycle if cycle > dram_free else dram_free
                dram_free = start + step[j]
                done_cur[w][j] = dram_free + dram_lat
            else:
                p = pipes[j]
                if pipe_free[p] > cycle:
                    continue
                pipe_free[p] = cycle + step[j]
                done_cur[w][j] = cycle + lat[j]
            chosen = w
            break
        if chosen >= 0:
            w = chosen
            pos[w] += 1
            if pos[w] == nb:
                it[w] += 1
                pos[w] = 0
                if it[w] >= iterations:
                    finish[w] = max(done_cur[w])
                    active.remove(w)
                else:
                    done_prev[w] = done_cur[w]
                    done_cur[w] = [math.inf] * nb
                    ready[w] = ready_of(w)
            else:
                ready[w] = ready_of(w)
            cycle += 1.0
        else:
            wake = math.inf
            for w in active:
                t = ready[w]
                j = pos[w]
                if not is_dram[j] and pipe_free[pipes[j]] > t:
                    t = pipe_free[pipes[j]]
                if t < wake:
                    wake = t
            nxt = float(math.ceil(wake))
            cycle = nxt if nxt > cycle + 1.0 else cycle + 1.0
    return max(finish)


def _run_reference(body: list[Instr], warps: int, gpu: GPUSpec, f_sm: float, iterations: int,
         tensor_interval: float, dram_bytes_per_cycle: float | None) -> float:
    """Cycles until all ``warps`` warps have finished ``iterations`` loop iterations: the plain
    cycle-by-cycle reference (every cycle scans every warp). :func:`_run` is the fast path and
    returns the same float bit for bit (tests/gpu_model/test_cycle_fast.py)."""
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
    (first DRAM latency) and the drain. ``warps`` 1..64 and ``iterations`` 1..4096, and at most
    :data:`MAX_ISSUES` warp instructions in ``warps · iterations · len(body)`` (bounded: the event
    loop is linear in each, about a microsecond per instruction). ``body``: a list of
    :class:`Instr` whose ``deps`` name earlier instructions and ``prev_deps`` any of the body's;
    ``gpu`` a GPUSpec or name; ``tensor_interval`` cycles >= 0; ``dram_bytes_per_cycle`` None
    (this SMSP's share of the GPU's bandwidth) or a number > 0."""
    warps = require_int("warps", warps, minimum=1)
    iterations = require_int("iterations", iterations, minimum=1)
    require_bounded("warps", warps, 64, what="warps per SMSP")
    require_bounded("iterations", iterations, 4096, what="iteration count")
    f_sm = plain_scalar(f_sm)
    if not (isinstance(f_sm, (int, float)) and not isinstance(f_sm, bool) and math.isfinite(f_sm) and f_sm > 0):
        raise FormatRuleError(f"f_sm: must be a finite positive clock in Hz; got {f_sm!r}")
    body = list(check_body(body))
    require_bounded("warps * iterations * len(body)", warps * iterations * len(body), MAX_ISSUES,
                    what="warp instructions simulated")
    gpu = get_gpu(gpu)
    tensor_interval = _positive("tensor_interval", tensor_interval, zero_ok=True)
    if dram_bytes_per_cycle is not None:
        dram_bytes_per_cycle = _positive("dram_bytes_per_cycle", dram_bytes_per_cycle)
    try:
        t1 = _run(body, warps, gpu, float(f_sm), iterations, tensor_interval, dram_bytes_per_cycle)
        t2 = _run(body, warps, gpu, float(f_sm), 2 * iterations, tensor_interval, dram_bytes_per_cycle)
        out = (t2 - t1) / iterations
    except OverflowError:                   # a cycle count beyond a double (math.ceil of inf)
        out = math.inf
    if not math.isfinite(out):
        raise FormatRuleError(f"body, dram_bytes_per_cycle, tensor_interval: the simulated cycle counts must stay "
                              f"finite; got {out!r} (a latency, interval or DRAM step beyond a double)")
    return out


#: most warp instructions one :func:`simulate` run may issue (warps x iterations x body length):
#: about a second of the event loop; the models' own calls stay far below it
MAX_ISSUES = 1 << 20


def anyprec_body(bits: int, m: int) -> list[Instr]:
    """Loop body of ``matmul_kbit`` for one warp and one 1024-weight chunk of its rows: the
    kernel model's own :func:`refsim.gpu_model.kernels.anyprec.loop` (no prefetch). ``bits`` 3..8,
    ``m`` 1..8."""
    bits = require_int("bits", bits)
    m = require_int("m", m, minimum=1)
    require_choice("bits", bits, _anyprec.BITS)
    require_bounded("m", m, 8, what="batch rows of the fused kernel")
    return list(_anyprec.loop(bits, m).body)


def marlin_body(m_blocks: int, grouped: bool = True) -> list[Instr]:
    """One warp, one k16 step of a Marlin tile: the kernel model's own
    :func:`refsim.gpu_model.kernels.marlin.loop` (cp.async prefetch). ``m_blocks`` 1..4."""
    m_blocks = require_int("m_blocks", m_blocks, minimum=1)
    require_bounded("m_blocks", m_blocks, 4, what="16-row blocks per Marlin tile")
    if not isinstance(grouped, (bool, np.bool_)):
        raise FormatRuleError(f"grouped: must be True or False; got {grouped!r}")
    return list(marlin_model.loop(m_blocks, bool(grouped)).body)


def _check_kernel(kernel) -> None:
    if not isinstance(kernel, str) or kernel not in ("anyprec", "marlin"):
        raise FormatRuleError(f"kernel: the cycle model covers 'anyprec' and 'marlin'; got {kernel!r}")


def cycle_time(gpu, kernel: str, m: int, n: int, k: int, bits: int | None = None, *,
               clock="sustained", iterations: int = 6) -> dict:
    """Inner-loop time of ``kernel`` ('anyprec' or 'marlin') from the SMSP simulation.

    Returns dict(loop_s, cycles_per_iter, warps_per_smsp, iterations_per_smsp)."""
    _check_kernel(kernel)
    predict(gpu, kernel, m, n, k, bits=bits, clock=clock)           # validates gpu, shape, bits, clock
    iterations = require_int("iterations", iterations, minimum=1)
    g = get_gpu(gpu)
    f = g.clock_hz(clock)
    if kernel == "anyprec":
        bits = 4 if bits is None else bits
        if m > 8:
            raise FormatRuleError(f"m: the cycle model covers the fused kernel (M <= 8); got {m}")
        geo = _anyprec.geometry(g, m, n, k, bits)                    # same grid and occupancy as the model
        w = max(1, round(geo.warps_per_smsp))
        cyc = simulate(anyprec_body(bits, m), w, g, f, iterations=iterations)
        per_smsp = (n // geo.multi_row) * geo.chunks / (4 * g.sm_count)   # warp chunk-steps per SMSP
        loop_cycles = per_smsp / w * cyc
    elif kernel == "marlin":
        tc = 2.0 * 16 * 8 * 16 / (mma_sync_rate(g, g.tc_fp16_f32acc_flop_per_clk_per_sm) / 4)
        w = 2                                                       # 8 warps per CTA, 1 CTA per SM
        tk, tn = marlin_model.tile_shape(m)
        per_smsp, loop_cycles, cyc = 0.0, 0.0, 0.0
        # the busiest block of each launch sets its time: iters tiles of tk x tn, each
        # (tk/16)*(tn/64) warp k16-steps over 64 columns, spread over the SM's 4 SMSPs
        for lc in marlin_model.partition(m, n, k, g.sm_count, None):
            cyc = simulate(marlin_body(lc.m_blocks), w, g, f, iterations=iterations, tensor_interval=tc)
            steps = lc.iters * (tk / 16) * (tn / 64) / 4
            per_smsp += steps * lc.count
            loop_cycles += steps / w * cyc * lc.count
    return {"loop_s": loop_cycles / f, "cycles_per_iter": cyc, "warps_per_smsp": w,
            "iterations_per_smsp": per_smsp}


def reconcile(gpu, kernel: str, m: int, n: int, k: int, bits: int | None = None, *, clock="sustained") -> dict:
    """The cycle model's inner-loop time beside the analytical model's overlapped pipe time
    (latency minus launch, tail and serial terms). ``kernel`` 'anyprec' (M ≤ 8) or 'marlin'; the
    other arguments as for :func:`refsim.gpu_model.kernels.predict`. Both models read the same
    loop description (``prefetch`` in the result)."""
    _check_kernel(kernel)
    bd = predict(gpu, kernel, m, n, k, bits=bits, clock=clock)
    fixed = sum(bd.terms.get(key, 0.0) for key in ("launch", "tail", "serial"))
    cyc = cycle_time(gpu, kernel, m, n, k, bits, clock=clock)
    return {"analytical_loop_s": bd.latency_s - fixed, "cycle_loop_s": cyc["loop_s"],
            "ratio": cyc["loop_s"] / (bd.latency_s - fixed), "analytical_bottleneck": bd.bottleneck, **cyc,
            "prefetch": _loop_of(kernel, m, bits).prefetch}


def _loop_of(kernel: str, m: int, bits):
    """The kernel model's loop description (the one both models read)."""
    if kernel == "anyprec":
        return _anyprec.loop(4 if bits is None else bits, min(m, 8))
    return marlin_model.loop(1)
