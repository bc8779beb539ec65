"""MARLIN FP16×INT4 (mma.sync m16n8k16, FP32 accumulate), striped partitioning.

Source matched: IST-DASLab/marlin @ 2f6d7c10e124b3c5fa29ff8d77d568bd7af3274c,
``marlin/marlin_cuda_kernel.cu`` (``Marlin`` prologue, ``init_slice``, host ``marlin_cuda`` M loop)
and ``marlin/marlin_cuda.cpp``. The tile choice, the host
M splitting and the per-block stripes are NOT recomputed here: they come from
:mod:`refsim.formats.stripes` (the single implementation, tested against the kernel's own 3×3/5-SM
example and tile-by-tile invariants); :func:`partition` reduces a
:class:`~refsim.formats.stripes.StripePlan` to the few numbers the cost model needs and caches them.

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
                       (longest lock-ordered chain: max slice_count - 1 hand-offs)
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

from refsim.errors import FormatRuleError
from refsim.formats import stripes as _stripes
from refsim.gpu_model.kernels import resources
from refsim.gpu_model.kernels._common import cc_at_least, mma_sync_rate, require_multiple
from refsim.gpu_model.loop import INT_LAT, LDS_LAT, MMA_LAT, Instr, Loop, intervals, warp_step_cycles
from refsim.gpu_model.occupancy import resident
from refsim.gpu_model.roofline import Breakdown, stream_bandwidth, writeback_bytes, _breakdown, _overlap
from refsim.gpu_model.specs import GPUSpec

NAME = "marlin"
BITS = (4,)
DEFAULT_BITS = 4
GROUPS = (None, 128)         # None: one scale per output channel
DEFAULT_GROUP = None
GROUP_RULE = "supports [None, 128]"
MAX_PAR = 16                 # max_par as the Python ``marlin.mul`` passes it
STAGES = _stripes.STAGES
THREADS = 256
SHARED_MEM = 96 * 1024       # marlin_cuda_kernel.cu: SHARED_MEM, the dynamic shared memory of every launch
# The weight tiles are fetched with cp.async and an L2 evict_first policy (cp_async4_stream:
# createpolicy.fractional.L2::evict_first): a warm L2 does not keep them between launches
WEIGHTS_KEPT_IN_L2 = False

# int32 index expressions of marlin_cuda_kernel.cu @ 2f6d7c1 (checked by kernels.predict): the B read
# index b_gl_rd (lines 292-317, int4 vectors over all of W), b_gl_stride = 16 * prob_n, and the A and C
# indices of one launch (lines 281-307, 585, 814: at most 64 * max_par = 1024 rows of A / C per launch).
def _launch_rows(m: int) -> int:
    return min(16 * -(-m // 16), 64 * MAX_PAR)


INT32_INDEXES = (
    ("N*K/32", lambda m, n, k: n * k // 32, "B read index b_gl_rd in 16-byte vectors, marlin_cuda_kernel.cu lines 292-317"),
    ("16*N", lambda m, n, k: 16 * n, "b_gl_stride = 16 * prob_n, line 292"),
    ("rows*K/8", lambda m, n, k: _launch_rows(m) * k // 8, "A read index a_gl_rd of one launch (<= 1024 rows), lines 281-307 and 814"),
    ("rows*N/8", lambda m, n, k: _launch_rows(m) * n // 8, "C write bound c_gl_wr_end = c_gl_stride * prob_m, line 585"),
)


def registers(compute_capability: str, m_blocks: int, thread_n: int, thread_k: int, grouped: bool) -> int:
    """Registers per thread of the Marlin instantiation ``Marlin<256, m_blocks, thread_n / 16,
    thread_k / 16, 4, group_blocks>`` as ptxas reports them (the measured table
    ``refsim/data/timings/resources_marlin.csv``; :mod:`refsim.gpu_model.kernels.resources`)."""
    return resources.marlin(compute_capability, m_blocks, thread_n // 16, thread_k // 16, 8 if grouped else -1)


@lru_cache(maxsize=None)
def loop(m_blocks: int, grouped: bool = True) -> Loop:
    """One warp, one k16 step of a Marlin tile (8 warps; the warp owns 64 columns): B words (4 per
    lane, 512 B per warp, cp.async from DRAM ``STAGES`` ahead: ``prefetch=True``), one ldmatrix.x4
    of A per m-block, dequant 9 instructions per packed word (+4 HMUL2 when grouped), 8 MMAs
    m16n8k16 per m-block."""
    body: list[Instr] = [Instr("dram", 0, dram_bytes=512.0)]       # cp.async of a later stage
    lds_b = len(body)
    body.append(Instr("mio", LDS_LAT, prev_deps=(0,), wavefronts=4))  # LDS.128 of this stage's B
    lds_a = []
    for _ in range(m_blocks):
        body.append(Instr("mio", LDS_LAT, wavefronts=4))             # ldmatrix.x4 (A)
        lds_a.append(len(body) - 1)
    frag = []
    for _ in range(4):                                              # dequant 4 packed words
        prev = lds_b
        for j in range(9 + (4 if grouped else 0)):
            body.append(Instr("int" if j % 2 == 0 else "fp16", INT_LAT, deps=(prev,)))
            prev = len(body) - 1
        frag.append(prev)
    for mb in range(m_blocks):
        for j in range(8):                                          # 8 n8 tiles of 64 columns
            body.append(Instr("tensor", MMA_LAT, deps=(frag[j // 2], lds_a[mb])))
    body.append(Instr("int", INT_LAT))                              # pipeline bookkeeping
    return Loop(tuple(body), prefetch=True)


@lru_cache(maxsize=None)
def warp_step(m_blocks: int, grouped: bool, int32_lanes: float, hfma2_lanes: float, fp32_lanes: float,
              tensor_interval: float) -> tuple[int, float]:
    """(I, C1): instructions and single-warp cycles of one :func:`loop` step."""
    lp = loop(m_blocks, grouped)
    return lp.instructions, warp_step_cycles(lp, intervals(int32_lanes, hfma2_lanes, fp32_lanes), tensor_interval)


# Round trips to the L2 of one slice hand-off, counted on the SASS ptxas 13.0 makes of the official
# kernel (sm_90; the sm_8x code has the same sequence): the waiting block polls the lock
# (LDG.E.STRONG.GPU + CCTL.IVALL in a loop: the release is seen half a poll after it lands, plus the
# poll's own trip: 1.5), loads the partial C tile (LDGSTS + DEPBAR: 1), stores the sum and fences
# (STG, MEMBAR.ALL.GPU: the stores' acknowledgement and the GPU-scope fence, 2), and releases
# (REDG.E.ADD.STRONG.GPU reaching the L2: 0.5). The split of the fence into 2 trips is an estimate.
HANDOFF_ROUND_TRIPS = 5.0


def handoff_cycles(gpu: GPUSpec, m_blocks: int, thread_n: int) -> float:
    """Cycles of one lock-ordered slice hand-off (``barrier_acquire`` → ``global_reduce`` →
    ``barrier_release`` in marlin_cuda_kernel.cu): :data:`HANDOFF_ROUND_TRIPS` GPU-scope round trips
    to the L2 (on a partitioned L2 the lock and the partial tile are homed in either half: a strong
    access pays the far half's latency) plus the fp16 partial tile (16·m_blocks × thread_n) read
    and written back at the SM's L2 bandwidth."""
    tile_bytes = 16 * m_blocks * thread_n * 2
    trip = gpu.l2_far_latency_clk or gpu.l2_latency_clk
    return HANDOFF_ROUND_TRIPS * trip + 2 * tile_bytes / gpu.l2_bytes_per_clk_per_sm


class LaunchCost(NamedTuple):
    """What the cost model needs from one launch of a :class:`~refsim.formats.stripes.Launch`."""

    m_blocks: int        # thread_m_blocks (16-row blocks per problem, ≤ 4)
    parallel: int        # independent 64-row problems side by side
    rows: int            # rows of A / C handled (prob_m)
    k_tiles: int
    n_tiles: int
    iters: int           # tiles of the most loaded block
    busy_blocks: int     # blocks with a non-empty stripe (≤ SMs)
    max_slices: int      # longest serial reduction chain: max slice_count over the output tiles
    reduction_steps: int  # all cross-block hand-offs: sum over output tiles of slice_count - 1
    count: int = 1       # identical consecutive launches this entry stands for


@lru_cache(maxsize=256)
def tile_shape(m: int) -> tuple[int, int]:
    """``(thread_k, thread_n)`` Marlin's host code picks for total batch ``m`` (int ≥ 1).

    Read from :func:`refsim.formats.stripes.marlin_tile_config` on a probe shape (N = 256,
    K = 128) that every automatic tile divides, so callers can state their own shape rules
    with the tile in hand before the full partition is built.
    """
    cfg = _stripes.marlin_tile_config(m, 256, 128, None, max_par=MAX_PAR)
    return cfg.thread_k, cfg.thread_n


def summarize_launch(launch: _stripes.Launch, count: int = 1) -> LaunchCost:
    """Reduce one :class:`~refsim.formats.stripes.Launch` (all its slices) to a :class:`LaunchCost`
    standing for ``count`` identical launches (the slice-by-slice form :func:`partition` is tested
    against)."""
    max_slices = 1
    steps = iters = busy = 0
    for stripe in launch.blocks:
        busy += bool(stripe)
        iters = max(iters, sum(s.k_tile_count for s in stripe))
        for s in stripe:
            max_slices = max(max_slices, s.slice_count)
            steps += s.slice_count - 1 if s.writes_output else 0
    return LaunchCost(launch.thread_m_blocks, launch.parallel, launch.prob_m, launch.k_tiles, launch.n_tiles,
                      iters, busy, max_slices, steps, count)


@lru_cache(maxsize=4096)
def partition(m: int, n: int, k: int, sms: int, group_size: int | None) -> tuple[LaunchCost, ...]:
    """Marlin's partition of ``C (M, N) = A (M, K) @ W (K, N)`` on ``sms`` SMs, one
    :class:`LaunchCost` per kind of host launch (``count`` identical launches each), from the
    host M loop (:func:`refsim.formats.stripes.launch_kinds`, at most three kinds) and the closed
    form of each kind's device partition (:func:`refsim.formats.stripes.launch_summary`): no slice
    objects, so a prediction costs milliseconds at M = 10^8 or N = 2^26; the same numbers as
    summarising :func:`refsim.formats.stripes.stripes` launch by launch (tested)."""
    cfg = _stripes.marlin_tile_config(m, n, k, group_size, max_par=MAX_PAR)
    k_tiles, n_tiles = k // cfg.thread_k, n // cfg.thread_n
    out = []
    for count, prob_m, tmb, par in _stripes.launch_kinds(m, MAX_PAR):
        parallel = prob_m // (16 * tmb) if prob_m > 16 * tmb else 1
        _, busy, longest, slices, steps = _stripes.launch_summary(k_tiles, n_tiles, parallel, sms, cfg.group_tiles)
        out.append(LaunchCost(tmb, parallel, prob_m, k_tiles, n_tiles, longest, busy, slices, steps, count))
    return tuple(out)


def _launch_terms(g: GPUSpec, f_sm: float, n: int, k: int, lc: LaunchCost, tk: int, tn: int,
                  group_size, weight_bits: float, sparse: bool):
    """One launch kind's pipe terms (seconds), its serial reduction, its DRAM bytes and busy blocks."""
    m_blocks, par, rows = lc.m_blocks, lc.parallel, lc.rows
    iters, active, slices = lc.iters, lc.busy_blocks, lc.max_slices
    # the launch kind's constants (tile bytes, tensor rate, issue cycles per tile, hand-off): one home,
    # :func:`_kind_constants`
    ws, a_tile, w_bytes, rate_f, alu_tile, handoff = _kind_constants(g, f_sm, n, k, group_size, weight_bits,
                                                                     sparse, m_blocks, tk, tn)
    # DRAM: the `par` parallel problems walk the same weight columns at the same time (problem p's
    # blocks are offset by exactly n_tiles columns), so weights come from DRAM once per launch and
    # the other par-1 reads hit L2. The most loaded block streams iters tiles while `active`
    # blocks share the bandwidth.
    bytes_launch = w_bytes + rows * k * 2 + rows * n * 2
    bw = stream_bandwidth(g, active * STAGES * ws)           # every busy block keeps STAGES tiles in flight
    t_dram = max((bytes_launch + writeback_bytes(g, bytes_launch)) / bw, iters * ws * active / par / bw)
    t_l2 = (iters * a_tile * active + (par - 1) * w_bytes) / g.l2_bytes_per_s(f_sm)
    # tensor: one CTA per SM, f32 accumulate rate (2:4 sparse MMA: twice the dense-equivalent rate)
    t_tc = iters * 2.0 * 16 * m_blocks * tn * tk / rate_f
    # issue (MWP/CWP per SMSP): per tile max(issue slots, steps / W · C1) cycles (see _kind_constants)
    t_alu = iters * alu_tile / f_sm
    t_red = (slices - 1) * handoff / f_sm
    return {"dram": t_dram, "l2": t_l2, "tensor": t_tc, "alu": t_alu}, t_red, bytes_launch, active


def striped_model(name: str, mc, m, n, k, group_size, *, weight_bits: float, sparse: bool) -> Breakdown:
    """Latency of a persistent striped Marlin-family kernel (dense Marlin, or Sparse-Marlin with
    ``sparse``), ``weight_bits`` stored bits per dense weight: each host launch kind costs
    :func:`_launch_terms` overlapped by :func:`~refsim.gpu_model.roofline._overlap` (its busiest
    block, plus the lock-ordered slice reduction as a serial term), summed over the launches."""
    g, f, p = mc
    total = {}
    latency = 0.0
    bytes_total = 0.0
    parts = partition(m, n, k, g.sm_count, group_size)
    tk, tn = tile_shape(m)
    last = None
    for lc in parts:
        pipes, t_red, b, active = _launch_terms(g, f, n, k, lc, tk, tn, group_size, weight_bits, sparse)
        lat, terms, _ = _overlap(g, pipes, p, 1, t_red)
        latency += lat * lc.count
        bytes_total += b * lc.count
        for key, v in terms.items():
            total[key] = total.get(key, 0.0) + v * lc.count
        if last is None or lat > last[0]:
            last = (lat, active)
    pipe_totals = {key: total.get(key, 0.0) for key in ("dram", "l2", "tensor", "alu")}
    bottleneck = max(pipe_totals, key=pipe_totals.get)
    if total.get("serial", 0.0) > pipe_totals[bottleneck]:
        bottleneck = "serial"          # the lock-ordered slice reduction chain dominates
    elif total.get("launch", 0) + total.get("tail", 0) > pipe_totals[bottleneck]:
        bottleneck = "launch"
    return _breakdown(name, g.name, m, n, k, 4, latency, bottleneck, total, bytes_total, 2.0 * m * n * k, last[1], 1.0,
                      sum(lc.count for lc in parts), _notes(parts, tk, tn))


@lru_cache(maxsize=4096)
def _notes(parts, tk: int, tn: int) -> str:
    """The launch plan in words: the tile and each launch kind."""
    return f"tile {tk}x{tn}, launches " + ", ".join(
        f"{lc.count} x (m_blocks {lc.m_blocks}, parallel {lc.parallel}, rows {lc.rows})" for lc in parts)


@lru_cache(maxsize=4096)
def _kind_constants(g: GPUSpec, f_sm: float, n: int, k: int, group_size, weight_bits: float, sparse: bool,
                    m_blocks: int, tk: int, tn: int) -> tuple:
    """The numbers of :func:`_launch_terms` that do not depend on the launch's rows, stripes or
    slices: (w_tile + s_tile, a_tile, w_bytes, tensor rate × f_sm, alu cycles per tile, hand-off cycles).

    Issue model (MWP/CWP per SMSP): 8 warps, one resident CTA (occupancy: registers and 96 KiB of
    shared memory), so W = 2 warps per SMSP; a tile is (tk/k_step)·(tn/64) warp sub-tile steps (one
    ``matmul(k)`` call: 4 × 2 dequants and their MMAs), 1/4 of them per SMSP, k_step = 16 for dense
    Marlin's ``mma.sync`` m16n8k16 and 32 for Sparse-Marlin's ``mma.sp`` m16n8k32 (its ``b_sh_wr_iters``
    is 1 per 64-deep tile, dense Marlin's 2), each costing max(I issue slots, C1 / W) cycles: with 2 warps the dequant → MMA chain
    of one warp is only half hidden. Issue slots per tile: dequant (9 instructions per 8 weights,
    +4 HMUL2 with group scales) + MMA + ldmatrix/LDS + cp.async (warp instructions)."""
    w_tile = tk * tn * weight_bits / 8
    s_tile = 0.0 if group_size is None else (tk / group_size) * tn * 2
    a_tile = 16 * m_blocks * tk * 2
    w_bytes = n * k * weight_bits / 8 + ((k / group_size) * n * 2 if group_size else n * 2)
    rate = mma_sync_rate(g, g.tc_fp16_f32acc_flop_per_clk_per_sm) * (2 if sparse else 1)
    weights = tk * tn * (0.5 if sparse else 1.0)
    deq = weights / 8 * (9 + (4 if group_size is not None else 0)) / 32
    mma = m_blocks * (tn / 8) * (tk / 16) / (2 if sparse else 1)
    lds = (w_tile + a_tile) / 512
    cp = (w_tile + s_tile + a_tile) / 512
    tensor_interval = 2.0 * 16 * 8 * 16 / (mma_sync_rate(g, g.tc_fp16_f32acc_flop_per_clk_per_sm) / 4)
    _, c1 = warp_step(min(m_blocks, 4), group_size is not None, g.int32_lanes_per_clk_per_sm,
                      g.hfma2_lanes_per_clk_per_sm, g.fp32_fma_lanes_per_clk_per_sm, tensor_interval)
    occ = resident(g, THREADS, registers(g.compute_capability, min(m_blocks, 4), tn, tk, group_size is not None),
                   SHARED_MEM, g.sm_count)
    w = occ.warps_per_sm / 4
    steps_smsp = (tk / (32 if sparse else 16)) * (tn / 64) / 4
    instr_tile_smsp = (deq + mma + lds + cp) / 4
    return (w_tile + s_tile, a_tile, w_bytes, rate * f_sm, max(instr_tile_smsp, steps_smsp / w * c1),
            handoff_cycles(g, m_blocks, tn))


def check(gpu, m, n, k, bits, group_size) -> None:
    """Marlin's rules: N % thread_n == 0 and K % thread_k == 0 with (thread_k, thread_n) =
    (128, 128) for M <= 16 else (64, 256) (:func:`tile_shape`); K % group_size == 0; CC >= 8.0."""
    tk, tn = tile_shape(m)
    if n % tn:
        require_multiple(NAME, "n", n, tn, f"thread_n = {tn} at M = {m}")
    if k % tk:
        require_multiple(NAME, "k", k, tk, f"thread_k = {tk} at M = {m}")
    if group_size and k % group_size:
        require_multiple(NAME, "k", k, group_size, "whole groups")
    require_sm80(NAME, gpu)


def require_sm80(name: str, gpu: GPUSpec) -> None:
    """cp.async, ldmatrix and fp16 m16n8k16 mma.sync with the kernel's layout need sm_80."""
    if not cc_at_least(gpu, 8, 0):
        raise FormatRuleError(f"gpu: kernel {name} needs compute capability >= 8.0 (cp.async, m16n8k16 "
                              f"mma.sync); got {gpu.name} (CC {gpu.compute_capability})")


def model(mc, m, n, k, bits, group_size) -> Breakdown:
    """Latency of MARLIN for C(M,N) = A(M,K) @ W(K,N) on ``mc.gpu`` (4-bit weights, module docstring)."""
    return striped_model(NAME, mc, m, n, k, group_size, weight_bits=4.0, sparse=False)
