"""Any-Precision LLM bitplane-LUT GEMV (``matmul_kbit``), M ≤ 8; dequant + cuBLAS above.

Source matched: SNU-ARC/any-precision-llm @ a3257d02740c, ``any_precision/modules/kernels/
{main.cu, matmul.cuh, dequant.cuh}``. The
transpose op counts and lookup counts come from :mod:`refsim.formats.bit_transpose`
(``ops_per_32_weights``, ``uses_pair_table``, ``lookups_per_32_weights``), which counts them by
running the SWAR transpose with an op counter.

Decomposition (per warp, per row, per 1024-weight chunk; lane t owns 32 weights)::

    grid  = N / (4·multi_row)        multi_row = 1 (M = 1) or 4 (2 ≤ M ≤ 8)
    block = 32 × 4 warps (× num_ksplit = ceil(K/4096) when M = 1, b ≥ 7, K > 4096, not Orin)
    chunk loop: ceil(K / 1024) iterations

    per lane per chunk          count                          pipe
    ------------------------------------------------------------------------
    LDG.32 bitplane words       b                              LSU / DRAM
    LDG.128 activations         4·M / multi_row                LSU / L1 (L2 hits)
    bit transpose (C ops)       3b: 45 (pair) | 4b: 52 (scalar, M=1) / 40 (pair)
                                5..8b: 107, 130, 153, 176      INT (× LOP3 fusion 0.5)
    index extract & 0xff, >>8   2 per lookup                   INT
    LUT lookups (LDS)           16 (pair: 3b, 4b with M>1) else 32   L1/SMEM × bank conflicts
    half2 operand assembly      16 PRMT                        INT
    HFMA2                       16 per batch row               FP16
    loop/address                6                              INT

Bytes: b·N·K/8 (only the top b planes) + N·2^b·2 (LUT at precision b) + M·K·2 + M·N·2.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from refsim.formats import bit_transpose
from refsim.gpu_model.kernels import cublas_fp16, resources
from refsim.gpu_model.kernels._common import require_multiple
from refsim.gpu_model.loop import FP_LAT, INT_LAT, L1_LAT, LDS_LAT, Instr, Loop
from refsim.gpu_model.occupancy import Occupancy, resident
from refsim.gpu_model.roofline import Breakdown, combine, dram_time, writeback_bytes, _breakdown
from refsim.gpu_model.specs import GPUSpec

NAME = "anyprec"
BITS = (3, 4, 5, 6, 7, 8)
DEFAULT_BITS = 4
GROUPS = (None,)
DEFAULT_GROUP = None
GROUP_RULE = "uses one LUT per output row (None)"
LOP3_FUSION = 0.5  # estimate: nvcc folds AND/shift/OR triples into LOP3/SHF (about 2 C ops per SASS op)


@lru_cache(maxsize=None)
def lds_conflict_degree(table_words: int, lanes: int = 32, banks: int = 32, trials: int = 4000) -> float:
    """Expected shared-memory wavefronts of one warp-wide random lookup into a table of
    ``table_words`` 4-byte words: E[max over banks of distinct words requested in that bank].
    Lanes that hit the same word are served by one broadcast. Deterministic (seeded Monte Carlo).
    Vectorised over the trials (sort each warp's words, keep the first of each run, count per
    bank); :func:`lds_conflict_degree_reference` is the plain loop, tested equal."""
    idx = _lookup_trials(table_words, lanes, trials)                               # (trials, lanes)
    words = np.sort(idx, axis=1)
    first = np.ones(words.shape, dtype=bool)
    first[:, 1:] = words[:, 1:] != words[:, :-1]                                   # distinct words only
    rows = np.broadcast_to(np.arange(trials)[:, None], words.shape)
    counts = np.zeros((trials, banks), dtype=np.int64)
    np.add.at(counts, (rows[first], words[first] % banks), 1)
    worst = counts.max(axis=1).astype(np.float64)
    return float(worst.mean())


def lds_conflict_degree_reference(table_words: int, lanes: int = 32, banks: int = 32, trials: int = 4000) -> float:
    """:func:`lds_conflict_degree` as a plain loop over the trials (``np.unique`` per warp)."""
    idx = _lookup_trials(table_words, lanes, trials)
    worst = np.zeros(trials)
    for t in range(trials):
        words = np.unique(idx[t])
        worst[t] = np.bincount(words % banks, minlength=banks).max()
    return float(worst.mean())


def _lookup_trials(table_words: int, lanes: int, trials: int) -> np.ndarray:
    rng = np.random.default_rng(12345)
    return rng.integers(0, table_words, size=(trials, lanes))


@lru_cache(maxsize=None)
def transpose_ops(bits: int, pair: bool) -> int:
    """C-level bitwise ops per lane per 32 weights (transpose + split or pair merge)."""
    if pair:
        return bit_transpose.ops_per_32_weights("swar_pair", bits)
    return bit_transpose.ops_per_32_weights("swar_scalar" if bits <= 4 else "swar", bits)


@lru_cache(maxsize=None)
def lookup_plan(bits: int, m: int) -> tuple[int, int, int]:
    """(lookups per lane per chunk, transpose C-ops, table size in 4-byte words)."""
    pair = bit_transpose.uses_pair_table(bits, m)
    lookups = bit_transpose.lookups_per_32_weights(bits, m)
    words = (1 << (2 * bits)) if pair else max(1, (1 << bits) // 2)   # half2 pairs | 2^b halves
    return lookups, transpose_ops(bits, pair), words


@lru_cache(maxsize=None)
def loop(bits: int, m: int) -> Loop:
    """One warp's step of ``matmul_kbit``: one 1024-weight chunk of its ``multi_row`` rows (counts in
    the module docstring). ``prefetch=False``: the chunk loop body appears once and its plane loads
    feed the transposes of the same step (no cross-chunk prefetch), so each step waits one DRAM
    latency. Within a step, ptxas issues row h+1's plane loads while row h computes (SASS of
    ``matmul_kbit_32<8, 3, false>`` on sm_89, nvcc 13.0 + nvdisasm: row 0's three LDG.E at the loop
    top, row 1's among row 0's activation loads, row 2's and 3's among the previous row's HFMA2s);
    the activations (LDG.128, L1 hits) are loaded once per chunk for all rows."""
    multi_row = 1 if m == 1 else 4
    lookups, tops, words = lookup_plan(bits, m)
    conflict = lds_conflict_degree(words)
    body: list[Instr] = []
    loads: list = []

    def load_row() -> None:                                 # one row's plane words (LDG.32)
        loads.append(tuple(range(len(body), len(body) + bits)))
        body.extend(Instr("dram", 0, dram_bytes=128.0) for _ in range(bits))

    load_row()
    act = []
    for _ in range(4 * m):                                  # activations LDG.128: L1 hits, 4 wavefronts
        act.append(len(body))
        body.append(Instr("mio", L1_LAT, wavefronts=4))
    n_t = max(4, round(tops * LOP3_FUSION))
    acc: dict = {}
    for h in range(multi_row):
        if h + 1 < multi_row:                               # SASS: the next row's loads go out with this row's math
            load_row()
        t_idx = []
        for i in range(n_t):                                # transpose: 4 independent output words
            deps = (t_idx[i - 4],) if i >= 4 else loads[h]
            body.append(Instr("int", INT_LAT, deps=deps))
            t_idx.append(len(body) - 1)
        last_t = tuple(t_idx[-4:])
        lds_idx = []
        for j in range(lookups):                            # extract byte (& 0xff, >> 8), LUT lookup
            dep = last_t if j < 4 else (lds_idx[j - 4] - 1,)
            body.append(Instr("int", INT_LAT, deps=dep))
            body.append(Instr("int", INT_LAT, deps=(len(body) - 1,)))
            body.append(Instr("mio", LDS_LAT, deps=(len(body) - 1,), wavefronts=conflict))
            lds_idx.append(len(body) - 1)
        prmt = []
        for s in range(16):                                 # half2 operand assembly (PRMT)
            src = lds_idx[(2 * s) % lookups], lds_idx[(2 * s + 1) % lookups]
            body.append(Instr("int", INT_LAT, deps=src))
            prmt.append(len(body) - 1)
        for r in range(m):                                  # 16 HFMA2 per batch row: 2 chains per row pair
            for s in range(16):
                chain = (h, r, s % 2)
                deps = (prmt[s],) + ((acc[chain],) if chain in acc else ()) + (act[4 * r],)
                body.append(Instr("fp16", FP_LAT, deps=deps))
                acc[chain] = len(body) - 1
    for _ in range(6):                                      # loop / address arithmetic
        body.append(Instr("int", INT_LAT))
    return Loop(tuple(body), prefetch=False)


class Geometry(NamedTuple):
    """Launch geometry of ``matmul_kbit`` on one GPU (shared by the analytical and cycle models)."""

    multi_row: int
    ksplit: int
    chunks: int
    ctas: int
    warps_per_cta: int
    regs: int
    smem: int
    occupancy: Occupancy
    steps_per_warp: int      # chunk steps of one warp (4 per z-slice with k-split); each step walks multi_row rows
    waves: float
    warps_per_smsp: float


def geometry(g: GPUSpec, m: int, n: int, k: int, bits: int) -> Geometry:
    """Grid, occupancy and the per-warp step count of the fused kernel (M ≤ 8) on ``g``."""
    multi_row = 1 if m == 1 else 4
    ksplit = math.ceil(k / 4096) if (m == 1 and bits >= 7 and k > 4096 and not g.name.startswith("orin")) else 1
    chunks = math.ceil(k / 1024)
    ctas = n // (4 * multi_row)
    warps_per_cta = 4 * ksplit
    regs, smem = resources.anyprec(g.compute_capability, m, bits, ksplit > 1)
    occ = resident(g, 32 * warps_per_cta, regs, smem, ctas)
    steps = min(chunks, 4) if ksplit > 1 else chunks
    n_waves = ctas / (g.sm_count * occ.ctas_per_sm)
    return Geometry(multi_row, ksplit, chunks, ctas, warps_per_cta, regs, smem, occ, steps, n_waves,
                    occ.warps_per_sm / 4)


@lru_cache(maxsize=4096)
def fused_shape(g: GPUSpec, m: int, n: int, k: int, bits: int) -> tuple:
    """The clock-independent numbers of the fused kernel (M <= 8, M is the template's maxm):
    (geometry, expected LDS conflict degree, the SASS census of one chunk step
    (:func:`refsim.gpu_model.kernels.resources.anyprec_census`), warp-step cycles on one SMSP by
    pipe (issue, alu, imad, fp16, fp16_mma, mio), warps per SMSP at once (W) and in all (tasks))."""
    geo = geometry(g, m, n, k, bits)
    _, _, words = lookup_plan(bits, m)
    conflict = lds_conflict_degree(words)
    c = resources.anyprec_census(g.compute_capability, m, bits, geo.ksplit > 1)
    int_iv = 32 / (g.int32_lanes_per_clk_per_sm / 4)        # ALU and IMAD: 16 lanes per SMSP on sm_7x..9x
    fp16_iv = 32 / (g.hfma2_lanes_per_clk_per_sm / 4)
    mio_iv = 4 * 128 / g.l1_smem_bytes_per_clk_per_sm       # one 128-B wavefront per clock per SM, a quarter each
    work = {"issue": float(c["issue_slots"]), "alu": c["alu"] * int_iv, "imad": c["imad"] * int_iv,
            "fp16": c["fp16"] * fp16_iv, "fp16_mma": c["fp16_mma"] * fp16_iv,
            "mio": (c["lds"] * conflict + c["ldg"] + 4 * c["ldg128"]) * mio_iv}
    per_smsp = geo.ksplit                                    # a CTA's warps spread over the 4 SMSPs
    slots = geo.occupancy.ctas_per_sm * per_smsp
    tasks = -(-geo.ctas // g.sm_count) * per_smsp
    return geo, conflict, c, work, min(slots, tasks), tasks


def fused(mc, m, n, k, bits) -> Breakdown:
    """The fused bitplane-LUT kernel ``matmul_kbit`` (M <= 8).

    Per SM sub-partition (SMSP) W warps run at once and ``tasks`` in all on the busiest SMSP: full
    rounds of W warps, then a last round of the rest (CTAs of later waves take the slots of finished
    ones), each warp through ``S`` chunk steps. One step of a round costs, in SMSP cycles (the SASS
    census of the official kernel for the GPU's arch)::

        D    the round's batch: every resident warp of the device loads one step's plane words (and
             a dirty L2's write-back) at the achievable bandwidth; D_w = D / W one warp's share
        P_w  one warp's work on the busiest SMSP resource: issue slots, ALU / IMAD / FP16 pipe cycles,
             L1/shared wavefronts (lookups x bank-conflict degree + plane loads + 4 per LDG.128)
        C    one warp's own path through the step alone: chain_c0 + chain_rounds x DRAM latency
             (the loads of a step feed that step: no prefetch across chunks)

    How the W warps' steps overlap depends on the order DRAM serves them::

        in order (clean L2)      step = max(D, W·P_w, C + D_w)    stream, work or one warp's cycle
        batched (dirty L2)       step = D + max(W·P_w, C + P_w)   the batch, then the work or the
                                                                  last warp's path (+ one other warp)

    With a dirty L2 every read miss first writes back a dirty victim; memory controllers drain
    writes in batches and hold reads meanwhile (write drain: Chatterjee et al., "Staged Reads",
    HPCA 2012), so a warp's loads come back with the whole batch and the warps, issued round-robin
    (Accel-Sim's hardware-correlated configs: lrr), stay phase-locked: batch and computation add.
    Time = T0 + prologue (LUT load: one DRAM latency, table build; the warp reduction) + S · Σ_rounds step."""
    g, f, p = mc
    geo, conflict, c, work, w, tasks = fused_shape(g, m, n, k, bits)
    plane_bytes = bits * n * k / 8
    other_bytes = n * (1 << bits) * 2 + 2.0 * m * k + 2.0 * m * n     # LUT, activations, output
    # the busiest SMSP runs its tasks in full rounds of W warps and a last round of the rest, S
    # steps each; in a round every resident warp of the device loads one step's plane words (and a
    # dirty L2's write-back) per step: that batch at the achievable bandwidth is D, one warp's
    # share of it D_w = D / W
    writeback = 1 + writeback_bytes(g, plane_bytes) / plane_bytes
    warp_clk = plane_bytes / ((n // geo.multi_row) * geo.chunks) * writeback / g.dram_eff_bytes_per_s * f
    lat = g.dram_latency_s * f
    p_w = max(work.values())
    chain = c["chain_c0"] + c["chain_rounds"] * lat
    resident_ctas = g.sm_count * geo.occupancy.ctas_per_sm
    full = tasks // w
    rounds, left = [], geo.ctas                  # (warps on the busiest SMSP, CTAs on the device)
    for w_r in [w] * full + ([tasks - full * w] if tasks > full * w else []):
        rounds.append((w_r, max(1, min(resident_ctas, left))))
        left -= resident_ctas
    loop = stream_sum = work_sum = path_sum = 0.0
    binding_time: dict = {}
    for w_r, ctas_r in rounds:
        stream = ctas_r * geo.warps_per_cta * warp_clk
        compute = w_r * p_w
        if g.l2_dirty_bytes:       # batched behind the write drain: the batch, then the work
            path = chain + p_w
            step = stream + max(compute, path)
            bound = "latency" if path > compute else "work"
        else:                      # in order: the stream, the SMSP's work or one warp's cycle
            path = chain + stream / w_r
            step = max(stream, compute, path)
            bound = "dram" if step == stream else "latency" if step == path else "work"
        loop += step
        binding_time[bound] = binding_time.get(bound, 0.0) + step
        stream_sum, work_sum, path_sum = stream_sum + stream, work_sum + compute, path_sum + path
    steps = geo.steps_per_warp
    binding = max(binding_time, key=binding_time.get)
    if binding == "work":
        binding = max(work, key=work.get)
    prologue = lat + geo.multi_row * max(1, (1 << bits) // 32) * 2 + 5 * (LDS_LAT + FP_LAT)
    loop_s = steps * loop / f
    launch = p.launch_overhead_s
    tail = prologue / f + other_bytes / g.dram_eff_bytes_per_s
    core = max(work["issue"], work["alu"], work["imad"], work["fp16"], work["fp16_mma"])
    terms = {"dram": steps * stream_sum / f, "alu": steps * work_sum * core / p_w / f,
             "smem": steps * work_sum * work["mio"] / p_w / f, "latency": steps * path_sum / f, "launch": launch,
             "tail": tail}
    bottleneck = {"issue": "alu", "imad": "alu", "fp16": "alu", "fp16_mma": "alu", "mio": "smem"}.get(binding, binding)
    if launch + tail > loop_s:
        bottleneck = "launch"
    occ = geo.occupancy
    return _breakdown(NAME, g.name, m, n, k, bits, launch + tail + loop_s, bottleneck, terms,
                      plane_bytes + other_bytes, 2.0 * m * n * k, geo.ctas, geo.waves, 1,
                      _fused_notes(geo.multi_row, geo.ksplit, conflict, geo.regs, geo.smem, occ.ctas_per_sm,
                                   occ.limiter, w, c["issue_slots"], round(chain), bool(g.l2_dirty_bytes)))


@lru_cache(maxsize=4096)
def _fused_notes(multi_row, ksplit, conflict, regs, smem, ctas_per_sm, limiter, warps_per_smsp, instrs, chain,
                 batched) -> str:
    """The notes of the fused kernel: its launch plan, per-step counts and the DRAM service order."""
    return (f"multi_row={multi_row} ksplit={ksplit} conflict={conflict:.2f} regs={regs} smem={smem} "
            f"ctas/SM={ctas_per_sm} ({limiter}) warps/SMSP={warps_per_smsp:g} step I={instrs} (SASS census) "
            f"one-warp path={chain} cycles; DRAM {'batched (dirty L2)' if batched else 'in order'}")


def check(gpu, m, n, k, bits, group_size) -> None:
    """Any-Precision's rules: K % 32 == 0 (bitplane words hold 32 weights); N % 4 == 0 at M = 1,
    N % 16 == 0 above (grid = N / (4 multi_row)); M > 8 runs the dequant kernel and cuBLAS."""
    if k % 32:
        require_multiple(NAME, "k", k, 32, "bitplane words hold 32 weights")
    if n % 4 or (n % 16 and m > 1):
        require_multiple(NAME, "n", n, 16 if m > 1 else 4, "grid = N / (4·multi_row)")


@lru_cache(maxsize=4096)
def dequant(g: GPUSpec, f: float, p, n: int, k: int, bits: int) -> Breakdown:
    """The dequant kernel that writes W (N, K) as fp16 from the bitplanes and LUT (M > 8 path);
    its Breakdown's ``m`` is 1 (its cost does not depend on M)."""
    chunks = math.ceil(k / 1024)
    row_chunks = n * chunks
    lookups, tops, words = 32, transpose_ops(bits, False), max(1, (1 << bits) // 2)
    instrs = bits + tops * LOP3_FUSION + 3 * lookups + 16 + 6 + 4
    sm_clk = g.sm_count * f
    t_alu = row_chunks * instrs / (4 * sm_clk)
    t_smem = row_chunks * (bits + lookups * lds_conflict_degree(words) + 16) / sm_clk
    deq_bytes = bits * n * k / 8 + n * (1 << bits) * 2 + 2.0 * n * k
    ctas = n // 4
    ctas_per_sm = min(g.max_ctas_per_sm, g.max_warps_per_sm // 4)
    t_dram = dram_time(deq_bytes, g, ctas, ctas_per_sm, 4 * bits * 128 * 2)
    return combine(NAME, g, 1, n, k, bits, {"dram": t_dram, "alu": t_alu, "smem": t_smem}, p,
                    ctas=ctas, n_waves=ctas / (g.sm_count * ctas_per_sm), bytes_dram=deq_bytes)


def model(mc, m, n, k, bits, group_size) -> Breakdown:
    """Latency of the Any-Precision kernel at precision ``bits`` on ``mc.gpu``: the fused kernel for
    M <= 8; above, the dequant kernel followed by cuBLAS FP16 (two launches, their terms summed).

    Shapes: A (M, K) fp16, bitplanes (b, N, K/32) uint32, LUT (N, 2^b) fp16 -> C (M, N) fp16."""
    if m <= 8:
        return fused(mc, m, n, k, bits)
    g = mc.gpu
    deq = dequant(g, mc.f_sm, mc.params, n, k, bits)
    gemm = cublas_fp16.model(mc, m, n, k, 16, None)
    keys = dict.fromkeys(list(deq.terms) + list(gemm.terms))
    terms = {key: deq.terms.get(key, 0.0) + gemm.terms.get(key, 0.0) for key in keys}
    return _breakdown(NAME, g.name, m, n, k, bits, deq.latency_s + gemm.latency_s,
                      gemm.bottleneck if gemm.latency_s >= deq.latency_s else deq.bottleneck,
                      terms, deq.bytes_dram + gemm.bytes_dram, 2.0 * m * n * k, gemm.ctas, gemm.waves, 2,
                      "M > 8: dequant kernel + cuBLAS FP16")
