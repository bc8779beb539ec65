"""MARLIN FP16×INT4 (mma.sync m16n8k16, FP32 accumulate), striped partitioning.

Source matched: IST-DASLab/marlin @ 2f6d7c10e124b3c5fa29ff8d77d568bd7af3274c,
``marlin/marlin_cuda_kernel.cu`` and ``marlin/marlin_cuda.cpp`` (host-side tile choice and M
splitting, in-kernel stripe bookkeeping), as restated in shared/specs/marlin.md §(c). The striped
partition module (refsim.formats.stripes) had not landed, so the stripe arithmetic is computed
here from that note (:func:`stripe_plan`).

Decomposition::

    grid = SMs (persistent), 256 threads = 8 warps, 4-stage cp.async pipeline, 96 KiB smem
    tile  = thread_k × thread_n = 128 × 128 (M ≤ 16)  |  64 × 256 (M > 16), thread_m_blocks ≤ 4
    M > 64: launches of `par` independent 64-row problems (par ≤ max_par = 16); the problems
            walk the same weight columns in lock-step, so weights come from DRAM once per launch
            and par-1 times from L2
    stripe: tiles numbered down each k-column, block b owns [iters·b, iters·(b+1)),
            iters = ceil(k_tiles·n_tiles·par / SMs) (rounded up to a whole group when grouped)

    per tile:  B (weights)  thread_k·thread_n/2 B  + group scales thread_n·2 B per group
               A (acts)     16·m_blocks·thread_k·2 B  from L2 (activations stay L2-resident)
               MMAs         m_blocks · thread_n/8 · thread_k/16  (M padded to 16·m_blocks)
               dequant      9 instructions per 8 weights (+4 HMUL2 with group scales)
    time of a launch = time of its most loaded block (iters tiles) + the serial slice reduction
"""

from __future__ import annotations

import math
from functools import lru_cache

from refsim.gpu_model.kernels._common import check_bits, check_group, check_mnk, require_multiple, setup
from refsim.gpu_model.roofline import Breakdown, ModelParams, combine
from refsim.gpu_model.specs import GPUSpec

NAME = "marlin"
BITS = (4,)
GROUPS = (None, 128)
MAX_PAR = 16
STAGES = 4
L2_ROUND_TRIP_CLK = 600  # estimate: lock spin + fp16 partial-sum read/write through L2 per slice hand-off


def tile_config(m_total: int) -> tuple[int, int]:
    """(thread_k, thread_n) chosen by the host for total batch ``m_total``."""
    return (128, 128) if m_total <= 16 else (64, 256)


def launches(m: int) -> list[tuple[int, int, int]]:
    """Host-side M splitting: list of (m_blocks, parallel, rows) per kernel launch."""
    tot = math.ceil(m / 16)
    pad = 16 * tot - m
    out = []
    i = 0
    while i < tot:
        remaining = tot - i
        if remaining > 4:
            par = min((16 * remaining - pad) // 64, MAX_PAR)
            out.append((4, par, 64 * par))
            i += 4 * par
        else:
            rows = m - 16 * i
            out.append((remaining, 1, rows))
            i = tot
    return out


@lru_cache(maxsize=4096)
def stripe_plan(k_tiles: int, n_tiles: int, par: int, sms: int, f: int) -> tuple[int, int, int]:
    """(iters = tiles per block, active blocks, max slices per column) of the striped partition.

    Tiles are numbered down each k-column (L = k_tiles·col + row); block b owns
    [iters·b, iters·(b+1)). Column c spans [k_tiles·c, k_tiles·(c+1)) and is cut into
    ``floor((end-1)/iters) - floor(start/iters) + 1`` slices; the start offsets repeat with period
    ``iters`` in c, so only the first min(columns, iters) columns are examined.
    """
    total = k_tiles * n_tiles * par
    iters = math.ceil(total / sms)
    iters = f * math.ceil(iters / f)
    active = math.ceil(total / iters)
    slices = 1
    for c in range(min(n_tiles * par, iters)):
        start = k_tiles * c
        slices = max(slices, (start + k_tiles - 1) // iters - start // iters + 1)
    return iters, active, slices


def _launch_terms(g: GPUSpec, p: ModelParams, f_sm: float, n: int, k: int, m_blocks: int, par: int,
                  rows: int, tk: int, tn: int, group_size, weight_bits: float, sparse: bool):
    k_tiles, n_tiles = k // tk, n // tn
    fgrp = 1 if group_size is None else max(1, (group_size // 16) // (tk // 16))
    iters, active, slices = stripe_plan(k_tiles, n_tiles, par, g.sm_count, fgrp)
    w_tile = tk * tn * weight_bits / 8
    s_tile = 0.0 if group_size is None else (tk / group_size) * tn * 2
    a_tile = 16 * m_blocks * tk * 2
    # DRAM: the `par` parallel problems walk the same weight columns at the same time (problem p's
    # blocks are offset by exactly n_tiles columns), so weights come from DRAM once per launch and
    # the other par-1 reads hit L2. The most loaded block streams iters tiles while `active`
    # blocks share the bandwidth.
    w_bytes = n * k * weight_bits / 8 + ((k / group_size) * n * 2 if group_size else n * 2)
    bytes_launch = w_bytes + rows * k * 2 + rows * n * 2
    bw = min(g.dram_eff_bytes_per_s, active * STAGES * (w_tile + s_tile) / g.dram_latency_s)
    t_dram = max(bytes_launch / bw, iters * (w_tile + s_tile) * active / par / bw)
    t_l2 = (iters * a_tile * active + (par - 1) * w_bytes) / g.l2_bytes_per_s(f_sm)
    # tensor: one CTA per SM, f32 accumulate rate; 2:4 sparse MMA does the dense-equivalent work twice as fast
    rate = g.tc_fp16_f32acc_flop_per_clk_per_sm * (2 if sparse else 1)
    t_tc = iters * 2.0 * 16 * m_blocks * tn * tk / (rate * f_sm)
    # issue slots: dequant + MMA + ldmatrix/LDS + cp.async per tile (warp instructions)
    weights = tk * tn * (0.5 if sparse else 1.0)
    deq = weights / 8 * (9 + (4 if group_size is not None else 0)) / 32
    mma = m_blocks * (tn / 8) * (tk / 16) / (2 if sparse else 1)
    lds = (w_tile + a_tile) / 512
    cp = (w_tile + s_tile + a_tile) / 512
    t_alu = iters * (deq + mma + lds + cp) / (4 * f_sm * p.cuda_core_issue_eff)
    t_red = (slices - 1) * L2_ROUND_TRIP_CLK / f_sm
    return {"dram": t_dram, "l2": t_l2, "tensor": t_tc, "alu": t_alu}, t_red, bytes_launch, active


def model(name: str, gpu, m, n, k, group_size, clock, params, *, weight_bits: float, sparse: bool) -> Breakdown:
    g, p, f = setup(gpu, params, clock)
    total = {}
    latency = 0.0
    bytes_total = 0.0
    parts = launches(m)
    tk, tn = tile_config(m)
    last = None
    for m_blocks, par, rows in parts:
        pipes, t_red, b, active = _launch_terms(g, p, f, n, k, m_blocks, par, rows, tk, tn, group_size,
                                                weight_bits, sparse)
        bd = combine(name, g, m, n, k, 4, pipes, p, ctas=active, n_waves=1.0, bytes_dram=b, extra_serial_s=t_red)
        latency += bd.latency_s
        bytes_total += b
        for key, v in bd.terms.items():
            total[key] = total.get(key, 0.0) + v
        last = bd if last is None or bd.latency_s > last.latency_s else last
    pipe_totals = {key: total.get(key, 0.0) for key in ("dram", "l2", "tensor", "alu")}
    bottleneck = max(pipe_totals, key=pipe_totals.get)
    if total.get("serial", 0.0) > pipe_totals[bottleneck]:
        bottleneck = "serial"          # the lock-ordered slice reduction chain dominates
    elif total.get("launch", 0) + total.get("tail", 0) > pipe_totals[bottleneck]:
        bottleneck = "launch"
    return Breakdown(kernel=name, gpu=g.name, m=m, n=n, k=k, bits=4, latency_s=latency, bottleneck=bottleneck,
                     terms=total, bytes_dram=bytes_total, flops=2.0 * m * n * k, ctas=last.ctas, waves=1.0,
                     launches=len(parts), notes=f"tile {tk}x{tn}, launches {parts}")


def predict(gpu, m, n, k, bits=None, group_size=None, *, clock="sustained", params=None) -> Breakdown:
    """Latency breakdown of MARLIN on ``gpu``. Rules: bits 4; group_size None or 128;
    N % thread_n == 0 and K % thread_k == 0 with (thread_k, thread_n) = (128, 128) for M ≤ 16 else
    (64, 256); K % group_size == 0."""
    m, n, k = check_mnk(NAME, m, n, k)
    check_bits(NAME, bits, BITS, 4)
    group_size = check_group(NAME, group_size, GROUPS, 128) if group_size is not None else None
    tk, tn = tile_config(m)
    require_multiple(NAME, "n", n, tn, f"thread_n = {tn} at M = {m}")
    require_multiple(NAME, "k", k, tk, f"thread_k = {tk} at M = {m}")
    if group_size:
        require_multiple(NAME, "k", k, group_size, "whole groups")
    return model(NAME, gpu, m, n, k, group_size, clock, params, weight_bits=4.0, sparse=False)
