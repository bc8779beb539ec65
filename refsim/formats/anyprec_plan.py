"""The launch plan of the Any-Precision fused GEMV / small-batch GEMM (M <= 8), and its structure.

The plan (grid, K-split, LUT bytes, bytes read, work per chunk) and a float64 structural reference
(which lookups and which products) over the bitplane format (:mod:`refsim.formats.bitplane`). What
the CUDA code writes, bit for bit in fp16, is :mod:`refsim.emulator.anyprec_kernel`, built on this
plan.

What ``matmul_kbit`` computes, at the level of "which lookups and which products" (sums here are
float64, so the structure is testable apart from the fp16 rounding):

    O[l, r] = sum over chunks i, lanes t < eff_i, blocks j = 3..0, pairs s = 0..3 of
              dq[r, i, t, j, s] (half2) * x[l, 1024 i + 8 eff_i j + 8 t + 2 s + (0, 1)] (half2)

    launch       grid N / (4 * multi_row), block (32, 4, ksplit); multi_row = 1 if M == 1 else 4;
                 warp y of block g owns rows g*4*multi_row + y + 4h, h < multi_row
    per warp     loop over ceil(K / 1024) chunks; in the tail chunk lanes t >= eff break out
    per lane     load b words (one per plane, 4 bytes, coalesced 128 B per warp and plane);
    and chunk    SWAR transpose (bit_transpose.transpose_swar) -> byte indices;
                 32 scalar lookups lut_b[row][idx], or 16 pair lookups (b = 3, or b = 4 with
                 M >= 2) into the 2**(2b)-entry half2 table;
                 per batch row l: 4 float4 activation loads, 16 HFMA2 into one half2 ``sum``
                 (two 16-term fp16 chains: even and odd positions), then
                 ``partial[l] += sum.x + sum.y`` (2 fp16 adds)
    after K      fp16 warp tree reduction (shfl_down 16, 8, 4, 2, 1); lane 0 writes O[l*N + r]
    K-split      M == 1, K > 4096, b >= 7 (non-Orin): ceil(K/4096) slices of 4 chunks, combined by
                 fp16 atomicAdd in shared memory (order not deterministic)
    constraints  b in 3..8; 1 <= M <= 8; K % 32 == 0; N % 4 == 0 (M == 1) or N % 16 == 0 (M >= 2),
                 else the official kernel silently leaves trailing rows unwritten (refsim raises)

Source: github:SNU-ARC/any-precision-llm @ a3257d02740cc5757c78673da534b0630ff3a4ea,
any_precision/modules/kernels/matmul.cuh (matmul_kbit_32), main.cu (dispatch), dequant.cuh.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refsim._validate import (require_bits, require_bool, require_dtype, require_fields, require_finite,
                              require_int, require_ndim, require_shape)
from refsim.errors import FormatRuleError, ShapeError
from refsim.formats import bit_transpose as bt
from refsim.formats.bitplane import SUPPORTED_BITS, WEIGHTS_PER_CHUNK

__all__ = [
    "check_inputs",
    "checked_inputs",
    "MAX_M",
    "KernelPlan",
    "GemvBytes",
    "ChunkWork",
    "plan",
    "bytes_read",
    "chunk_work",
    "lut_shared_bytes",
    "activation_index",
    "matmul_reference",
    "BRANCHES",
    "plan_branches",
]

MAX_M = 8  # more tokens switch to dequant_kbit + cuBLAS
_ROWS_PER_WARP_GROUP = 4  # num_rows macro: warps per block


def _check_problem(m: int, n: int, k: int, bits: int) -> tuple[int, int, int, int]:
    bits = require_bits(bits, SUPPORTED_BITS)
    m = require_int("M", m, minimum=1)
    if m > MAX_M:
        raise FormatRuleError(f"M: the fused kernel serves 1..{MAX_M} tokens; got {m}")
    k = require_int("K", k, minimum=1)
    if k % 32:
        raise ShapeError(f"K: must be a positive multiple of 32; got {k}")
    n = require_int("N", n, minimum=1)
    group = 4 if m == 1 else 16
    if n % group:
        raise ShapeError(f"N: the kernel's row grouping needs N % {group} == 0 at M = {m}; got {n}")
    return m, n, k, bits


@dataclass(frozen=True)
class KernelPlan:
    """Launch shape of ``matmul_kbit`` for one (M, N, K, b)."""

    grid: int
    block: tuple[int, int, int]
    multi_row: int
    uses_pair_table: bool
    ksplit: int
    chunks: int
    tail_lanes: int  # eff of the last chunk (32 if K % 1024 == 0)
    lut_shared_bytes: int

    def __post_init__(self):
        require_fields(self)  # Python ints/floats in every field, whatever NumPy scalars came in


def lut_shared_bytes(bits: int, m: int) -> int:
    """Shared memory for tables per block: 4*multi_row rows x (2**b halves, or 2**(2b) half2).
    bits one of the supported widths, m 1..8 (Python or NumPy ints); returns bytes (int)."""
    bits = require_bits(bits, SUPPORTED_BITS)
    m = require_int("M", m, minimum=1)
    if m > MAX_M:
        raise FormatRuleError(f"M: the fused kernel serves 1..{MAX_M} tokens; got {m}")
    multi_row = 1 if m == 1 else 4
    entries = (1 << (2 * bits)) * 2 if bt.uses_pair_table(bits, m) else (1 << bits)
    return _ROWS_PER_WARP_GROUP * multi_row * entries * 2


def plan(m: int, n: int, k: int, bits: int, *, orin: bool = False) -> KernelPlan:
    """The launch configuration the official dispatcher picks (validated)."""
    m, n, k, bits = _check_problem(m, n, k, bits)
    orin = require_bool("orin", orin)
    multi_row = 1 if m == 1 else 4
    ksplit = -(-k // 4096) if (m == 1 and k > 4096 and bits >= 7 and not orin) else 1
    tail = (k % WEIGHTS_PER_CHUNK) // 32 or 32
    return KernelPlan(n // (4 * multi_row), (32, 4, ksplit), multi_row, bt.uses_pair_table(bits, m),
                      ksplit, -(-k // WEIGHTS_PER_CHUNK), tail, lut_shared_bytes(bits, m))


#: the branches of the official dispatch and kernel loop a launch can take (:func:`plan_branches`)
BRANCHES = (
    "m1",                   # M == 1: one row per warp (multi_row = 1)
    "multi_row",            # M >= 2: four rows per warp (multi_row = 4), N % 16 == 0
    "scalar_table",         # 2**b half lookups per weight
    "pair_table",           # b == 3, or b == 4 with M >= 2: half2 pair lookups into the 2**(2b) table
    "one_chunk",            # K <= 1024: a single (possibly partial) chunk
    "whole_chunks",         # K % 1024 == 0
    "tail_chunk",           # K % 1024 != 0: lanes t >= (K % 1024) / 32 break out of the last chunk
    "long_k",               # K > 4096 without a K-split: one slice of more than four chunks
    "ksplit",               # M == 1, K > 4096, b >= 7: ceil(K/4096) slices added by fp16 atomicAdd
    "ksplit_partial_slice", # K-split whose last slice has fewer than four chunks
)


def plan_branches(m: int, n: int, k: int, bits: int) -> frozenset[str]:
    """The names of :data:`BRANCHES` one launch takes (a non-Orin GPU; the arguments as :func:`plan`)."""
    p = plan(m, n, k, bits)
    out = {"m1" if p.multi_row == 1 else "multi_row", "pair_table" if p.uses_pair_table else "scalar_table",
           "tail_chunk" if p.tail_lanes != 32 else "whole_chunks"}
    if p.chunks == 1:
        out.add("one_chunk")
    if p.ksplit > 1:
        out.add("ksplit")
        if p.chunks % 4:
            out.add("ksplit_partial_slice")
    elif p.chunks > 4:
        out.add("long_k")
    return frozenset(out)


@dataclass(frozen=True)
class GemvBytes:
    """DRAM bytes of one call (activations counted once: re-reads hit L1/L2)."""

    weights: int  # b * N * K / 8: only the top b planes
    tables: int  # N * 2**b * 2
    activations: int  # M * K * 2
    output: int  # M * N * 2

    def __post_init__(self):
        require_fields(self)  # Python ints/floats in every field, whatever NumPy scalars came in

    @property
    def total(self) -> int:
        """Sum of the four streams."""
        return self.weights + self.tables + self.activations + self.output


def bytes_read(m: int, n: int, k: int, bits: int) -> GemvBytes:
    """Bytes moved per fused GEMV/GEMM call at precision b (independent of the parent p)."""
    m, n, k, bits = _check_problem(m, n, k, bits)
    return GemvBytes(bits * n * k // 8, n * (1 << bits) * 2, m * k * 2, m * n * 2)


@dataclass(frozen=True)
class ChunkWork:
    """Per lane, per row, per 1024-weight chunk (i.e. per 32 weights of the lane)."""

    weight_loads: int  # 4-byte loads, one per plane
    bitwise_ops: int  # transpose + split/merge (bit_transpose.ops_per_32_weights)
    lookups: int  # shared-memory table reads (16 with pair tables, else 32)
    activation_loads: int  # float4 loads (per batch row: 4)
    hfma2: int  # per batch row: 16
    hadd: int  # per batch row: 2 (partial += sum.x + sum.y)

    def __post_init__(self):
        require_fields(self)  # Python ints/floats in every field, whatever NumPy scalars came in


def chunk_work(bits: int, m: int) -> ChunkWork:
    """Instruction mix of one lane on one row and chunk, following matmul.cuh."""
    bits = require_bits(bits, SUPPORTED_BITS)
    m = require_int("M", m, minimum=1)
    pair = bt.uses_pair_table(bits, m)
    ops = bt.ops_per_32_weights("swar_pair" if pair else "swar_scalar", bits)
    return ChunkWork(bits, ops, bt.lookups_per_32_weights(bits, m), 4 * m, 16 * m, 2 * m)


def check_inputs(x: np.ndarray, qweight: np.ndarray, lut: np.ndarray, bits: int) -> tuple[int, int, int, int]:
    """Validate one kernel call and return ``(M, N, K, bits)``.

    x float16 (M, K) finite, M <= 8; qweight int32 (p, N, K/32) with p >= bits stored planes;
    lut float16 (N, 2**bits) finite; N and K as the kernel's row grouping and K % 32 require.
    Shared by :func:`matmul_reference` and the warp-level emulator.
    """
    return checked_inputs(x, qweight, lut, bits)[3:]


def checked_inputs(x: np.ndarray, qweight: np.ndarray, lut: np.ndarray,
                   bits: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, int, int, int]:
    """:func:`check_inputs`, also returning the arrays in native byte order:
    ``(x, qweight, lut, M, N, K, bits)``."""
    x = require_dtype("x", x, np.float16)
    require_ndim("x", x, 2)
    require_finite("x", x)
    qweight = require_dtype("qweight", qweight, np.int32)
    require_ndim("qweight", qweight, 3)
    m, k = x.shape
    p, n, kw = qweight.shape
    if kw * 32 != k:
        raise ShapeError(f"qweight: dim 2 must be K/32 = {k // 32}; got {kw}")
    m, n, k, bits = _check_problem(m, n, k, bits)
    if bits > p:
        raise FormatRuleError(f"bits: must not exceed the {p} stored planes; got {bits}")
    lut = require_dtype("lut", lut, np.float16)
    require_shape("lut", lut, (n, 1 << bits))
    require_finite("lut", lut)
    return x, qweight, lut, m, n, k, bits


def activation_index(k: int, i: int, t: int, j: int, s: int) -> tuple[int, int]:
    """Weight/activation indices (k) of the half2 ``dq_w[4j + s]`` of lane t in chunk i.
    k (K, a positive multiple of 32), chunk i < ceil(K / 1024), lane t < 32, j < 4 and s < 4."""
    k, i, t, j, s = (require_int(n, v, minimum=0) for n, v in (("k", k), ("i", i), ("t", t), ("j", j), ("s", s)))
    if k == 0 or k % 32:
        raise ShapeError(f"k: must be a positive multiple of 32; got {k}")
    for name, v, top in (("i", i, -(-k // WEIGHTS_PER_CHUNK)), ("t", t, 32), ("j", j, 4), ("s", s, 4)):
        if v >= top:
            raise FormatRuleError(f"{name}: must lie in [0, {top}) for k={k}; got {v}")
    eff = 32 if i < k // WEIGHTS_PER_CHUNK else (k % WEIGHTS_PER_CHUNK) // 32
    base = WEIGHTS_PER_CHUNK * i + 8 * eff * j + 8 * t + 2 * s
    return base, base + 1


def matmul_reference(x: np.ndarray, qweight: np.ndarray, lut: np.ndarray, bits: int,
                     trace: list | None = None) -> np.ndarray:
    """The kernel's work, loop for loop, with exact float64 products and float64 sums.

    x: float16 (M, K), M <= 8; qweight: int32 (p, N, K/32), p >= bits; lut: float16 (N, 2**bits).
    Returns float64 (M, N): sum of fp16 weight x fp16 activation products (each exact in
    float64) in the kernel's grouping.  Not the kernel's fp16 result (rounding order is the
    emulator's job).  ``trace``, if a list, receives ``(row, chunk, lane, j, s, (k0, k1),
    lookup)`` per half2 product, lookup = ("pair", idx_a, idx_b) or ("scalar", idx_a, idx_b).
    """
    x, qweight, lut, m, n, k, bits = checked_inputs(x, qweight, lut, bits)
    if trace is not None and not isinstance(trace, list):
        raise FormatRuleError(f"trace: must be None or a list to append to; got {type(trace).__name__}")
    pair = bt.uses_pair_table(bits, m)
    words = qweight[:bits].view(np.uint32)  # (b, N, K/32)
    xf = x.astype(np.float64)
    out = np.zeros((m, n))
    n_full = k // WEIGHTS_PER_CHUNK
    for r in range(n):
        table = bt.pair_table(lut[r:r + 1], bits)[0] if pair else None
        for i in range(-(-k // WEIGHTS_PER_CHUNK)):
            eff = 32 if i < n_full else (k % WEIGHTS_PER_CHUNK) // 32
            for t in range(eff):
                q = words[:, r, 32 * i + t].copy()  # (b,) one word per plane
                q_w = bt.transpose_swar(q, bits)
                if bits == 3:
                    q_w = bt.merge_pairs_3bit(q_w) if pair else bt.split_nibbles(q_w)
                elif bits == 4 and not pair:
                    q_w = bt.split_nibbles(q_w)
                for j in range(3, -1, -1):  # byte 3 - j of each q_w word
                    y = 3 - j
                    idx = [(int(v) >> (8 * y)) & 0xFF for v in q_w]
                    dq = [None] * 4  # half2 pairs of (w_2s, w_2s+1)
                    if pair:
                        for kk in range(2):
                            a, b = table[idx[2 * kk]], table[idx[2 * kk + 1]]
                            dq[kk] = ((a[0], b[0]), ("pair", idx[2 * kk], idx[2 * kk + 1]))
                            dq[kk + 2] = ((a[1], b[1]), ("pair", idx[2 * kk], idx[2 * kk + 1]))
                    else:
                        for s in range(4):
                            dq[s] = ((lut[r, idx[2 * s]], lut[r, idx[2 * s + 1]]),
                                     ("scalar", idx[2 * s], idx[2 * s + 1]))
                    for s in range(4):
                        (w0, w1), how = dq[s]
                        k0, k1 = activation_index(k, i, t, j, s)
                        if trace is not None:
                            trace.append((r, i, t, j, s, (k0, k1), how))
                        out[:, r] += float(w0) * xf[:, k0] + float(w1) * xf[:, k1]
    return out
