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
from functools import lru_cache

import numpy as np

from refsim.formats import bit_transpose
from refsim.gpu_model.kernels import anyprec_resources, cublas_fp16
from refsim.gpu_model.kernels._common import check_bits, check_mnk, require_multiple, setup
from refsim.gpu_model.occupancy import occupancy
from refsim.gpu_model.roofline import Breakdown, combine, dram_time

NAME = "anyprec"
BITS = (3, 4, 5, 6, 7, 8)
SERIAL_ROWS_FRACTION = 1.0  # structural: the unrolled multi_row loop loads each row's planes after the previous row's math
LOP3_FUSION = 0.5  # estimate: nvcc folds AND/shift/OR triples into LOP3/SHF (about 2 C ops per SASS op)


@lru_cache(maxsize=None)
def lds_conflict_degree(table_words: int, lanes: int = 32, banks: int = 32, trials: int = 4000) -> float:
    """Expected shared-memory wavefronts of one warp-wide random lookup into a table of
    ``table_words`` 4-byte words: E[max over banks of distinct words requested in that bank].
    Lanes that hit the same word are served by one broadcast. Deterministic (seeded Monte Carlo)."""
    rng = np.random.default_rng(12345)
    idx = rng.integers(0, table_words, size=(trials, lanes))                       # (trials, lanes)
    worst = np.zeros(trials)
    for t in range(trials):
        words = np.unique(idx[t])
        worst[t] = np.bincount(words % banks, minlength=banks).max()
    return float(worst.mean())


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


def _fused(g, p, f, m, n, k, bits, clock):
    multi_row = 1 if m == 1 else 4
    ksplit = math.ceil(k / 4096) if (m == 1 and bits >= 7 and k > 4096 and not g.name.startswith("orin")) else 1
    chunks = math.ceil(k / 1024)
    row_chunks = n * chunks                          # warp-iterations (one row, one chunk)
    lookups, tops, words = lookup_plan(bits, m)
    conflict = lds_conflict_degree(words)
    # instruction counts per row-chunk (warp instructions)
    ldg = bits + 4.0 * m / multi_row
    int_ops = tops * LOP3_FUSION + 2 * lookups + 16 + 6
    hfma2 = 16.0 * m + 2.0 * m
    instrs = ldg + int_ops + lookups + hfma2
    sm_clk = g.sm_count * f
    t_issue = row_chunks * instrs / (4 * sm_clk * p.cuda_core_issue_eff)
    t_int = row_chunks * int_ops * 32 / (g.int32_lanes_per_clk_per_sm * sm_clk)
    t_fp16 = row_chunks * hfma2 * 32 / (g.hfma2_lanes_per_clk_per_sm * sm_clk)
    wavefronts = row_chunks * (bits + 16.0 * m / multi_row + lookups * conflict)
    t_smem = wavefronts / sm_clk
    bytes_dram = bits * n * k / 8 + n * (1 << bits) * 2 + 2.0 * m * k + 2.0 * m * n
    ctas = n // (4 * multi_row)
    warps_per_cta = 4 * ksplit
    regs, smem = anyprec_resources.resources(g.compute_capability, m, bits, ksplit > 1)
    occ = occupancy(g, 32 * warps_per_cta, regs, smem, grid_ctas=ctas)
    ctas_per_sm = occ.ctas_per_sm
    bif = warps_per_cta * bits * 128                 # one chunk of bitplane words in flight per warp (no prefetch)
    t_dram = dram_time(bytes_dram, g, ctas, ctas_per_sm, bif)
    # latency-bound critical path: the chunk loop has no cross-chunk prefetch, so every step of a
    # warp waits one DRAM latency, then issues its own instructions (≤ 1 per clock). Steps per warp:
    # chunks (4 per z-slice with k-split) × the multi_row rows walked one after another.
    chunks_per_warp = min(chunks, 4) if ksplit > 1 else chunks
    steps = chunks_per_warp * multi_row * SERIAL_ROWS_FRACTION if multi_row > 1 else chunks_per_warp
    n_waves = ctas / (g.sm_count * ctas_per_sm)
    t_chain = math.ceil(n_waves - 1e-9) * steps * (g.dram_latency_s + instrs / f)
    pipes = {"dram": t_dram, "alu": max(t_issue, t_int, t_fp16), "smem": t_smem, "latency": t_chain}
    return combine(NAME, g, m, n, k, bits, pipes, p, ctas=ctas, n_waves=n_waves, bytes_dram=bytes_dram,
                   notes=f"multi_row={multi_row} ksplit={ksplit} lookups={lookups} conflict={conflict:.2f} "
                         f"regs={regs} smem={smem} ctas/SM={ctas_per_sm} ({occ.limiter})")


def predict(gpu, m, n, k, bits=None, group_size=None, *, clock="sustained", params=None) -> Breakdown:
    """Latency breakdown of the Any-Precision kernel at precision ``bits`` (3..8) on ``gpu``.

    Shapes: A (M, K) fp16, bitplanes (b, N, K/32) uint32, LUT (N, 2^b) fp16 -> C (M, N) fp16.
    Rules: K % 32 == 0; N % 4 == 0 (M = 1) or N % 16 == 0 (2 ≤ M ≤ 8); M > 8 runs the dequant
    kernel (writes W as fp16) followed by cuBLAS. ``group_size`` must be None (per-row LUTs).
    """
    m, n, k = check_mnk(NAME, m, n, k)
    bits = check_bits(NAME, bits, BITS, 4)
    if group_size is not None:
        from refsim.errors import FormatRuleError
        raise FormatRuleError(f"group_size: kernel {NAME} uses one LUT per output row (None); got {group_size!r}")
    require_multiple(NAME, "k", k, 32, "bitplane words hold 32 weights")
    require_multiple(NAME, "n", n, 4 if m == 1 else 16, "grid = N / (4·multi_row)")
    g, p, f = setup(gpu, params, clock)
    if m <= 8:
        return _fused(g, p, f, m, n, k, bits, clock)
    # M > 8: dequant kernel (scalar path, one warp per row) then cuBLAS FP16 GEMM.
    chunks = math.ceil(k / 1024)
    row_chunks = n * chunks
    lookups, tops, words = 32, transpose_ops(bits, False), max(1, (1 << bits) // 2)
    instrs = bits + tops * LOP3_FUSION + 3 * lookups + 16 + 6 + 4
    sm_clk = g.sm_count * f
    t_alu = row_chunks * instrs / (4 * sm_clk * p.cuda_core_issue_eff)
    t_smem = row_chunks * (bits + lookups * lds_conflict_degree(words) + 16) / sm_clk
    deq_bytes = bits * n * k / 8 + n * (1 << bits) * 2 + 2.0 * n * k
    ctas = n // 4
    ctas_per_sm = min(g.max_ctas_per_sm, g.max_warps_per_sm // 4)
    t_dram = dram_time(deq_bytes, g, ctas, ctas_per_sm, 4 * bits * 128 * 2)
    deq = combine(NAME, g, m, n, k, bits, {"dram": t_dram, "alu": t_alu, "smem": t_smem}, p,
                  ctas=ctas, n_waves=ctas / (g.sm_count * ctas_per_sm), bytes_dram=deq_bytes)
    gemm = cublas_fp16.predict(g, m, n, k, clock=clock, params=p)
    terms = {key: deq.terms.get(key, 0.0) + gemm.terms.get(key, 0.0) for key in set(deq.terms) | set(gemm.terms)}
    return Breakdown(kernel=NAME, gpu=g.name, m=m, n=n, k=k, bits=bits,
                     latency_s=deq.latency_s + gemm.latency_s,
                     bottleneck=gemm.bottleneck if gemm.latency_s >= deq.latency_s else deq.bottleneck,
                     terms=terms, bytes_dram=deq.bytes_dram + gemm.bytes_dram, flops=2.0 * m * n * k,
                     ctas=gemm.ctas, waves=gemm.waves, launches=2,
                     notes="M > 8: dequant kernel + cuBLAS FP16")
