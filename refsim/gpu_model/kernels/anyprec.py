"""Any-Precision LLM bitplane-LUT GEMV (``matmul_kbit``), M ≤ 8; dequant + cuBLAS above.

Source matched: SNU-ARC/any-precision-llm @ a3257d02740c, ``any_precision/modules/kernels/
{main.cu, matmul.cuh, dequant.cuh}`` as described in shared/specs/anyprec.md §3-§5, §9. The
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
from itertools import repeat
from operator import add as _add
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from refsim.formats import bit_transpose
from refsim.gpu_model.kernels import anyprec_resources, cublas_fp16
from refsim.gpu_model.kernels._common import check_bits, check_mnk, hot_setup, one_point, require_multiple
from refsim.gpu_model.loop import FP_LAT, INT_LAT, L1_LAT, LDS_LAT, Instr, Loop, intervals, warp_step_cycles
from refsim.gpu_model.occupancy import Occupancy, resident
from refsim.gpu_model.roofline import FITTED, Breakdown, _breakdown, _combine, _combine1, _dram_time
from refsim.gpu_model.specs import GPUSpec

NAME = "anyprec"
BITS = (3, 4, 5, 6, 7, 8)
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


@lru_cache(maxsize=None)
def _step_counts(bits: int, m: int, int32_lanes: float, hfma2_lanes: float, fp32_lanes: float):
    """(I, int instrs, fp16 instrs, L1/SMEM wavefronts, C1 cycles) of one step of :func:`loop`."""
    lp = loop(bits, m)
    n_int = sum(1 for i in lp.body if i.pipe == "int")
    n_fp16 = sum(1 for i in lp.body if i.pipe == "fp16")
    wavefronts = sum(i.wavefronts for i in lp.body if i.pipe == "mio") + sum(1 for i in lp.body if i.pipe == "dram")
    c1 = warp_step_cycles(lp, intervals(int32_lanes, hfma2_lanes, fp32_lanes))
    return lp.instructions, n_int, n_fp16, wavefronts, c1


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
    regs, smem = anyprec_resources.resources(g.compute_capability, m, bits, ksplit > 1)
    occ = resident(g, 32 * warps_per_cta, regs, smem, ctas)
    steps = min(chunks, 4) if ksplit > 1 else chunks
    n_waves = ctas / (g.sm_count * occ.ctas_per_sm)
    return Geometry(multi_row, ksplit, chunks, ctas, warps_per_cta, regs, smem, occ, steps, n_waves,
                    occ.warps_per_sm / 4)


# (id(spec), m, n, k, bits) -> (spec, geometry, lookup plan, conflict degree, step counts) of the fused
# kernel (m <= 8: m is the template's maxm); clock-independent. The spec is held, its id not reused.
_SHAPES: dict = {}


def _fused_shape(g, m, n, k, bits):
    key = (id(g), m, n, k, bits)
    hit = _SHAPES.get(key)
    if hit is None or hit[0] is not g:
        lookups, tops, words = lookup_plan(bits, m)
        hit = (g, geometry(g, m, n, k, bits), lookups, words, lds_conflict_degree(words),
               _step_counts(bits, m, g.int32_lanes_per_clk_per_sm, g.hfma2_lanes_per_clk_per_sm,
                            g.fp32_fma_lanes_per_clk_per_sm))
        if len(_SHAPES) > 4096:
            _SHAPES.clear()
        _SHAPES[key] = hit
    return hit


def _fused(g, p, f, m, n, k, bits, clock):
    _, geo, lookups, words, conflict, (instrs, n_int, n_fp16, wavefronts, c1) = _fused_shape(g, m, n, k, bits)
    warp_steps = (n // geo.multi_row) * geo.chunks   # warp steps (multi_row rows, one chunk)
    sm_clk = g.sm_count * f
    # issue slots: one warp instruction per clock per SMSP (MWP/CWP: compute warps saturate it)
    t_issue = warp_steps * instrs / (4 * sm_clk)
    t_int = warp_steps * n_int * 32 / (g.int32_lanes_per_clk_per_sm * sm_clk)
    t_fp16 = warp_steps * n_fp16 * 32 / (g.hfma2_lanes_per_clk_per_sm * sm_clk)
    t_smem = warp_steps * wavefronts / sm_clk
    plane_bytes = bits * n * k / 8
    other_bytes = n * (1 << bits) * 2 + 2.0 * m * k + 2.0 * m * n     # LUT, activations, output
    bytes_dram = plane_bytes + other_bytes
    # MWP: one chunk of bitplane words in flight per warp (no prefetch), so the plane stream is
    # Little's-law limited by the resident warps; the LUT (prologue), the activations (read once
    # from DRAM, L2 hits for the other CTAs) and the output are not part of that per-step window
    bif = geo.warps_per_cta * bits * 128
    t_dram = (_dram_time(plane_bytes, g, geo.ctas, geo.occupancy.ctas_per_sm, bif)
              + other_bytes / g.dram_eff_bytes_per_s)
    # one warp's serial path (loop.prefetch is False): each chunk step waits one DRAM latency for
    # row 0, then each further row waits for the longer of the previous row's dependent chain
    # (C1 / multi_row cycles alone on the SMSP) and its own loads (issued one row ahead); before the loop the warp loads
    # its rows' LUT (one more DRAM latency) and builds the tables. ceil(waves) CTAs run one after another.
    row = c1 / geo.multi_row / f
    per_step = g.dram_latency_s + (geo.multi_row - 1) * max(row, g.dram_latency_s) + row
    prologue = g.dram_latency_s + geo.multi_row * max(1, words // 32) * 2 / f
    t_chain = math.ceil(geo.waves - 1e-9) * (prologue + geo.steps_per_warp * per_step)
    pipes = {"dram": t_dram, "alu": max(t_issue, t_int, t_fp16), "smem": t_smem, "latency": t_chain}
    occ = geo.occupancy
    return _combine1(NAME, g.name, m, n, k, bits, pipes, p.launch_overhead_s * 1, g.dram_latency_s, 1.0 - p.overlap,
                     geo.ctas, geo.waves, bytes_dram,     # _combine(..., notes=...) (tested equal)
                     _fused_notes(geo.multi_row, geo.ksplit, lookups, conflict, geo.regs, geo.smem, occ.ctas_per_sm,
                                  occ.limiter, geo.warps_per_smsp, instrs, c1))


_NOTES: dict = {}


def _fused_notes(*values) -> str:
    """The notes string of the fused kernel, formatted once per distinct set of values."""
    notes = _NOTES.get(values)
    if notes is None:
        multi_row, ksplit, lookups, conflict, regs, smem, ctas_per_sm, limiter, warps_per_smsp, instrs, c1 = values
        notes = (f"multi_row={multi_row} ksplit={ksplit} lookups={lookups} conflict={conflict:.2f} "
                 f"regs={regs} smem={smem} ctas/SM={ctas_per_sm} ({limiter}) "
                 f"warps/SMSP={warps_per_smsp:g} step I={instrs} C1={c1:.0f} cycles")
        if len(_NOTES) > 4096:
            _NOTES.clear()
        _NOTES[values] = notes
    return notes


def predict(gpu, m, n, k, bits=None, group_size=None, *, clock="sustained", params=None) -> Breakdown:
    """Latency breakdown of the Any-Precision kernel at precision ``bits`` (3..8) on ``gpu``.

    Shapes: A (M, K) fp16, bitplanes (b, N, K/32) uint32, LUT (N, 2^b) fp16 -> C (M, N) fp16.
    Rules: K % 32 == 0; N % 4 == 0 (M = 1) or N % 16 == 0 (2 ≤ M ≤ 8); M > 8 runs the dequant
    kernel (writes W as fp16) followed by cuBLAS. ``group_size`` must be None (per-row LUTs).
    """
    m, n, k = check_mnk(NAME, m, n, k)
    return _predict(gpu, m, n, k, bits, group_size, clock, params)




_TERM_ORDER: dict = {}
_ZEROS = repeat(0.0)       # map() stops at the shorter iterable: the keys
# (id(spec), f_sm, id(params), n, k, bits) -> (spec, params, dequant latency, terms, bottleneck, bytes): the
# dequant kernel's numbers do not depend on M (its Breakdown's m and flops are not used)
_DEQUANT: dict = {}


def _dequant(g, p, f, m, n, k, bits):
    key = (id(g), f, id(p), n, k, bits)
    hit = _DEQUANT.get(key)
    if hit is not None and hit[0] is g and hit[1] is p:
        return hit[2:]
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
    t_dram = _dram_time(deq_bytes, g, ctas, ctas_per_sm, 4 * bits * 128 * 2)
    deq = _combine(NAME, g, m, n, k, bits, {"dram": t_dram, "alu": t_alu, "smem": t_smem}, p,
                   ctas=ctas, n_waves=ctas / (g.sm_count * ctas_per_sm), bytes_dram=deq_bytes)
    if len(_DEQUANT) > 4096:
        _DEQUANT.clear()
    _DEQUANT[key] = (g, p, deq.latency_s, deq.terms, deq.bottleneck, deq.bytes_dram)
    return deq.latency_s, deq.terms, deq.bottleneck, deq.bytes_dram


def _predict_many(g, ms, n, k, bits, group_size, clock, params) -> list[Breakdown]:
    """:func:`_predict` for every M of ``ms`` (list of ints in [1, 2^31 - 1]) on the resolved spec ``g``:
    a list of len(ms) Breakdowns equal to the per-M ones bit for bit. The fused kernel (M <= 8) runs
    :func:`_fused` per M; above M = 8 the dequant kernel is computed once and the cuBLAS GEMMs of
    all those M come from ``cublas_fp16._predict_many`` (tested)."""
    bits = check_bits(NAME, bits, BITS, 4) if bits is not None else 4
    if group_size is not None:
        from refsim.errors import FormatRuleError
        raise FormatRuleError(f"group_size: kernel {NAME} uses one LUT per output row (None); got {group_size!r}")
    if k % 32:
        require_multiple(NAME, "k", k, 32, "bitplane words hold 32 weights")
    if n % 4 or (n % 16 and max(ms) > 1):       # N % 4 at M = 1, N % 16 above; the caller names the entry
        require_multiple(NAME, "n", n, 16 if max(ms) > 1 else 4, "grid = N / (4·multi_row)")
    g, f, _, _ = hot_setup(g, clock)
    p = params or FITTED
    out = [None] * len(ms)
    big = []
    for i, m in enumerate(ms):
        if m <= 8:
            out[i] = _fused(g, p, f, m, n, k, bits, clock)
        else:
            big.append(i)
    if big:
        deq_latency, deq_terms, deq_bottleneck, deq_bytes = _dequant(g, p, f, ms[big[0]], n, k, bits)
        gemms = cublas_fp16._predict_many(g, [ms[i] for i in big], n, k, None, None, clock, p)
        name = g.name
        deq_keys = tuple(deq_terms)
        deq_get = deq_terms.get
        for i, gemm in zip(big, gemms):
            m = ms[i]
            gemm_terms = gemm.terms
            order_key = (deq_keys, tuple(gemm_terms))
            keys = _TERM_ORDER.get(order_key)
            if keys is None:
                keys = _TERM_ORDER[order_key] = tuple(set(deq_terms) | set(gemm_terms))
            # {key: deq_terms.get(key, 0.0) + gemm_terms.get(key, 0.0) for key in keys}, in C
            terms = dict(zip(keys, map(_add, map(deq_get, keys, _ZEROS), map(gemm_terms.get, keys, _ZEROS))))
            out[i] = _breakdown(NAME, name, m, n, k, bits, deq_latency + gemm.latency_s,
                                gemm.bottleneck if gemm.latency_s >= deq_latency else deq_bottleneck,
                                terms, deq_bytes + gemm.bytes_dram, 2.0 * m * n * k, gemm.ctas, gemm.waves, 2,
                                "M > 8: dequant kernel + cuBLAS FP16")
    return out


_predict = one_point(_predict_many)   # the per-point entry: one home for the model
