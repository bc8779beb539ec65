"""The 2/4/16-bit format: intra-weight 2/4-bit groups, second-order scales, sparse FP16 outliers.

Li et al., "Fast and Efficient 2-bit LLM Inference on GPU: 2/4/16-bit in a Weight Matrix with
Asynchronous Dequantization" (ICCAD'24, arXiv 2311.16442). No official code exists (see
the paper, section 4); every choice the paper leaves open is decided below and marked
DECISION. refsim's weights are (K, N); the paper's GEMV reads the n x k matrix one output channel
(row n) at a time, so the packed arrays are stored per output channel ``(N, ...)`` (said per array).

Spec block
----------
=================  ==================================================================================
groups             g1 = 16 consecutive input channels (along K); group i = rows [16i, 16i+16) of W
                   for ALL N columns (the paper merges the groups of the same input channels)
precision          per group: 2-bit or 4-bit (``four`` bool (G,)); which groups are 4-bit is the
                   quantizer's choice (:mod:`refsim.quant.mixed_2_4_16`: eq. 9 sensitivity)
1st order          asymmetric per (group, column), eqs. 2-5 with the range extended to include 0
                   (GPTQ's convention, DECISION): xmin = min(min w, 0), xmax = max(max w, 0),
                   s = (xmax - xmin) / (2^b - 1); the codes use the DEQUANTIZED scale s_hat:
                   z = clamp(rint(-xmin / s_hat), 0, 2^b - 1), q = clamp(rint(w / s_hat) + z, 0, 2^b-1)
                   rounding half to even everywhere (DECISION); s_hat = 0 gives q = z = 0
2nd order          the 1st-order scales of group i, in blocks of g2 = 16 consecutive columns, get
                   4-bit codes: s2 = fp16(max(s_block) / 15) (range includes 0), z2 = clamp(rint(
                   -min(min s, 0) / s2), 0, 15) -- always 0 for non-negative scales, kept as a
                   field because the paper's bit count has it -- c = clamp(rint(s / s2) + z2, 0, 15)
                   and c >= 1 whenever s > 0 (DECISION: a group never collapses to zero);
                   s_hat = fp16((c - z2) * s2) (computed in fp32, rounded once)
scale clipping     2-bit groups are taken three at a time (a "unit", in K order); per column the
                   unit's 3 zeros (2 bits each) and 3 scale codes fit one 16-bit word: slot 0 keeps
                   a 4-bit code, slots 1 and 2 keep 3 bits (DECISION: the LSB is clipped, i.e. the
                   code is even: c = 2 * clamp(rint((s / s2 + z2) / 2), 0, 7), the range is kept
                   and the step doubles)
outliers           only in 2-bit groups (which ones: the quantizer's eq. 9 per element, DECISION);
                   they are excluded from their group's range, their dense code is z (so the
                   dense part dequantizes to exactly 0 there) and fp16(w) goes to a CSR matrix:
                   rows = output channels n, int32 row pointer (N+1), uint16 column index k
                   (K <= 65536), float16 value; columns ascending within a row
bit order          LSB first: code t of a 16-code 2-bit group sits at bits [2t, 2t+2) of one
                   uint32; a 4-bit group is split in two uint32: codes 0..7 at bits [4t, 4t+4) of
                   the "main" word, codes 8..15 likewise in the "side" word
memory alignment   w_main uint32 (N, U, 4), units of 128 bits (one 16-byte load). The paper's unit
                   (section 3.3) is [2-bit group | 2-bit group | 2-bit group | low half of a 4-bit
                   group]; w_side uint32 (N, n4) holds the high halves. Mixed units u < n4 hold the
                   2-bit groups j = 3u, 3u+1, 3u+2 (j = rank among 2-bit groups, K order) and
                   4-bit group u; DECISION (the paper's layout fits alpha = 1/4 only): 2-bit groups
                   left over (n2 > 3 n4) fill pure units of four 2-bit words, j = 3 n4 + 4v + slot
                   in unit n4 + v. U = n4 + ceil(max(n2 - 3 n4, 0) / 4); empty slots (when
                   n2 < 3 n4, or in the last unit) are zero words and are counted as padding
zero padding       z2 (4 bits) is stored in a uint16 next to the fp16 s2: 32 bits per (group, block)
other arrays       meta2 uint16 (N, T), T = ceil(n2 / 3): word t describes the 2-bit groups
                   j = 3t + i, i = 0, 1, 2 ("slot" i): bits 0-1/2-3/4-5 zero of slot 0/1/2, bits 6-9
                   slot-0 scale code, 10-12 slot-1 code >> 1, 13-15 slot-2 code >> 1; meta4 uint8 (N, n4): low
                   nibble zero, high nibble scale code of each 4-bit group; s2 float16 (G, N/16);
                   z2 uint16 (G, N/16); group_bits uint8 (G,) = 2 or 4
invariants         K % 16 == 0, N % 16 == 0, K <= 65536; 8 * nbytes(packed) / (K N) equals
                   :func:`average_bits` exactly
source             paper only (Li et al., ICCAD'24: eqs. 2-6, 9, 10, section 3.3
                   "Memory Alignment", section 4.3, Algorithm 1); no official repository
=================  ==================================================================================

One output channel n of w_main / w_side for K = 128 (G = 8 groups, 2 of them 4-bit: groups 2, 5)::

    groups (K order):   g0:2b  g1:2b  g2:4b  g3:2b  g4:2b  g5:4b  g6:2b  g7:2b
    2-bit list: g0 g1 g3 g4 g6 g7      4-bit list: g2 g5           U = 2 + ceil(max(6 - 6, 0)/4) = 2
    w_main[n, 0] = [ g0 | g1 | g3 | g2 codes 0-7 ]   w_side[n, 0] = [ g2 codes 8-15 ]
    w_main[n, 1] = [ g4 | g6 | g7 | g5 codes 0-7 ]   w_side[n, 1] = [ g5 codes 8-15 ]
    one 2-bit word, codes q0..q15:  bit 31 .. q15 q15 | ... | q1 q1 | q0 q0 .. bit 0
    e.g. codes (1, 2, 3, 0, 0, ...) -> 0b00_11_10_01 = 0x39

GEMV (:func:`gemv`, the paper's Algorithm 1 dataflow; x float16 (K,) -> y float16 (N,)):
    s_hat = fp16((c - z2) * s2)                            2nd-order dequantization
    w     = fp16((q - z) * s_hat)                          1st-order dequantization to half
    acc   = fp32 sum over k ascending of float(w) * float(x[k])      (sequential order, DECISION)
    acc  += float(val) * float(x[col]) over the CSR row, in stored order         (SpMV)
    y[n]  = fp16(acc)
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from fractions import Fraction

import numpy as np

from refsim._validate import (
    require_bounded,
    require_codes,
    require_dtype,
    require_fields,
    require_finite,
    require_float_array,
    require_instance,
    require_int,
    require_integer_array,
    require_ndim,
    require_real,
    require_shape,
)
from refsim.errors import FormatRuleError, ShapeError

__all__ = [
    "G1", "G2",
    "Mixed2416", "Packed2416",
    "dequantize", "pack", "pack_reference", "unpack",
    "csr_from_coo", "check_csr", "check_group_bits", "check_kn", "check_fraction",
    "average_bits", "paper_average_bits", "packed_nbytes",
    "gemv", "gemv_reference",
]

G1 = 16
G2 = 16
MAX_K = 1 << 16


# ----------------------------------------------------------------------------------------------
# the unpacked representation
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Mixed2416:
    """Quantized weights in refsim's (K, N) orientation, before packing.

    q uint8 (K, N) first-order codes (2- or 4-bit by group); zero uint8 (G, N); code uint8 (G, N)
    4-bit scale codes (even in clipped slots); s2 float16 (G, N/16); z2 uint8 (G, N/16);
    four bool (G,) 4-bit groups; outlier CSR over output channels: row_ptr int32 (N+1,),
    col uint16 (nnz,), val float16 (nnz,)."""

    q: np.ndarray
    zero: np.ndarray
    code: np.ndarray
    s2: np.ndarray
    z2: np.ndarray
    four: np.ndarray
    row_ptr: np.ndarray
    col: np.ndarray
    val: np.ndarray

    def __post_init__(self):
        """Shapes, dtypes and code ranges of every field against q (K, N), checked once: q and
        zero fit their group's width (2 or 4 bits), code and z2 fit 4 bits. (The even scale codes
        of clipped slots are :func:`pack`'s rule: an unclipped quantization is a legal record.)"""
        require_fields(self)
        q = require_dtype("q", self.q, np.uint8)
        require_ndim("q", q, 2)
        k, n = q.shape
        check_kn(k, n)
        g = k // G1
        four = require_dtype("four", self.four, np.bool_)
        require_shape("four", four, (g,))
        for name in ("zero", "code"):
            require_shape(name, require_dtype(name, getattr(self, name), np.uint8), (g, n))
        s2 = require_dtype("s2", self.s2, np.float16)
        require_shape("s2", s2, (g, n // G2))
        require_finite("s2", s2)
        require_shape("z2", require_dtype("z2", self.z2, np.uint8), (g, n // G2))
        require_codes("code", self.code, 4)
        require_codes("z2", self.z2, 4)
        _check_group_codes(q, self.zero, four)
        check_csr(self.row_ptr, self.col, self.val, n_rows=n, n_cols=k)


def _check_group_codes(q: np.ndarray, zero: np.ndarray, four: np.ndarray) -> None:
    """q uint8 (K, N) and zero uint8 (G, N) must fit their group's width: 4 bits where ``four``,
    else 2 bits (a larger code would dequantize to a value the format cannot hold)."""
    lim = np.where(four, 15, 3)[:, None]                                # (G, 1)
    qmax = q.reshape(-1, G1, q.shape[1]).max(axis=1)                    # (G, N)
    for name, codes in (("q", qmax), ("zero", zero)):
        bad = np.argwhere(codes > lim)
        if bad.size:
            gi, col = (int(i) for i in bad[0])
            raise FormatRuleError(f"{name}: codes of {4 if four[gi] else 2}-bit group {gi} must lie in "
                                  f"[0, {int(lim[gi, 0])}]; got {int(codes[gi, col])} in column {col}")


def check_fraction(name: str, value, top: float) -> float:
    """A fraction argument (the outlier ratio, alpha, percdamp): a real number (Python or NumPy) in
    ``[0, top]``, returned as a Python float; bools, strings, arrays and NaN get a FormatRuleError
    naming ``name`` and the value. ``top`` is the rule's bound, a number >= 0."""
    top = require_real("top", top)
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not 0.0 <= float(value) <= top:
        raise FormatRuleError(f"{name}: must be a number in [0, {top:g}]; got {value!r:.60}")
    return float(value)


def check_kn(k: int, n: int) -> None:
    """The 2/4/16 layout's shape rule for a (K, N) weight: ``K`` a positive multiple of the group
    size G1 = 16 and at most 2**16 (the CSR column index is 16-bit), ``N`` a positive multiple of
    the second-order group size G2 = 16 (both Python or NumPy ints); a FormatRuleError or ShapeError
    naming the value otherwise."""
    k, n = require_int("K", k), require_int("N", n)
    if k <= 0 or k % G1:
        raise ShapeError(f"K: must be a positive multiple of the group size {G1}; got {k}")
    if n <= 0 or n % G2:
        raise ShapeError(f"N: must be a positive multiple of the second-order group size {G2}; got {n}")
    if k > MAX_K:
        raise ShapeError(f"K: must be at most {MAX_K} (16-bit CSR column index); got {k}")


def _clipped_slots(four: np.ndarray) -> np.ndarray:
    """Bool (G,): 2-bit groups in slot 1 or 2 of their unit (their scale codes lose the LSB)."""
    slot = np.full(four.size, -1)
    two = np.flatnonzero(~four)
    slot[two] = np.arange(two.size) % 3
    return slot > 0


def dequantize(m: Mixed2416) -> np.ndarray:
    """Fake-quantized weights float32 (K, N): ``(q - z) * s_hat`` (exact in fp32) plus the
    fp16 outliers at their positions (where the dense part is exactly 0)."""
    require_instance("m", m, Mixed2416)
    g, n = m.zero.shape
    s_hat = _s_hat(m)
    deq = (m.q.astype(np.float32).reshape(g, G1, n) - m.zero.astype(np.float32)[:, None, :]) * s_hat[:, None, :]
    out = deq.reshape(g * G1, n).astype(np.float32)
    for r in range(n):
        for e in range(int(m.row_ptr[r]), int(m.row_ptr[r + 1])):
            out[int(m.col[e]), r] += np.float32(m.val[e])
    return out


def _s_hat(m: Mixed2416) -> np.ndarray:
    """float32 (G, N) values of fp16((code - z2) * s2)."""
    s2f = np.repeat(m.s2.astype(np.float32), G2, axis=1)
    z2 = np.repeat(m.z2.astype(np.float32), G2, axis=1)
    return ((m.code.astype(np.float32) - z2) * s2f).astype(np.float16).astype(np.float32)


# ----------------------------------------------------------------------------------------------
# CSR
# ----------------------------------------------------------------------------------------------
def csr_from_coo(rows: np.ndarray, cols: np.ndarray, vals: np.ndarray, n_rows: int):
    """Build CSR (row_ptr int32 (n_rows+1,), col uint16, val float16) from COO entries given
    in row-major order (rows ascending, columns ascending within a row)."""
    n_rows = require_int("n_rows", n_rows, minimum=0)
    require_bounded("n_rows", n_rows + 1)
    rows = require_integer_array("rows", rows)
    cols = require_integer_array("cols", cols)
    vals = require_float_array("vals", vals)
    for name, a in (("rows", rows), ("cols", cols), ("vals", vals)):
        require_ndim(name, a, 1)
    require_shape("cols", cols, rows.shape)
    require_shape("vals", vals, rows.shape)
    if rows.size and (int(rows.min()) < 0 or int(rows.max()) >= n_rows):
        raise FormatRuleError(f"rows: must lie in [0, {n_rows}); got range [{int(rows.min())}, {int(rows.max())}]")
    if cols.size and (int(cols.min()) < 0 or int(cols.max()) >= MAX_K):
        raise FormatRuleError(f"cols: must lie in [0, {MAX_K}); got range [{int(cols.min())}, {int(cols.max())}]")
    rows = rows.astype(np.int64)
    cols = cols.astype(np.int64)
    counts = np.bincount(rows, minlength=n_rows) if rows.size else np.zeros(n_rows, np.int64)
    row_ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    out = (row_ptr, cols.astype(np.uint16), np.asarray(vals, np.float16))
    check_csr(*out, n_rows=n_rows, n_cols=MAX_K)
    return out


def check_csr(row_ptr: np.ndarray, col: np.ndarray, val: np.ndarray, *, n_rows: int | None = None,
              n_cols: int | None = None) -> None:
    """CSR validity: row_ptr int32 (n_rows+1,) starting at 0, monotone, ending at nnz; col
    uint16 (nnz,) in [0, n_cols) strictly ascending within each row; val float16 (nnz,) finite.
    ``n_rows`` None: taken from row_ptr; ``n_cols`` None: the format's largest K (MAX_K)."""
    row_ptr = require_dtype("row_ptr", row_ptr, np.int32)
    require_ndim("row_ptr", row_ptr, 1)
    if row_ptr.size == 0:
        raise ShapeError("row_ptr: must hold n_rows + 1 >= 1 entries; got 0")
    n_rows = row_ptr.size - 1 if n_rows is None else require_int("n_rows", n_rows, minimum=0)
    n_cols = MAX_K if n_cols is None else require_int("n_cols", n_cols, minimum=0)
    col = require_ndim("col", require_dtype("col", col, np.uint16), 1)
    val = require_dtype("val", val, np.float16)
    require_shape("row_ptr", row_ptr, (n_rows + 1,))
    nnz = col.size
    require_shape("val", val, (nnz,))
    if row_ptr[0] != 0 or row_ptr[-1] != nnz:
        raise FormatRuleError(f"row_ptr: must start at 0 and end at nnz={nnz}; got {row_ptr[0]}..{row_ptr[-1]}")
    if np.any(np.diff(row_ptr) < 0):
        raise FormatRuleError(f"row_ptr: must be monotone non-decreasing; got {row_ptr.tolist()[:8]}...")
    if nnz and int(col.max()) >= n_cols:
        raise FormatRuleError(f"col: column indices must lie in [0, {n_cols}); got {int(col.max())}")
    # strictly ascending within each row: every step of col except those that start a new row
    steps_ok = np.diff(col.astype(np.int64)) > 0                                  # (nnz-1,)
    starts = row_ptr[1:-1].astype(np.int64)
    steps_ok[starts[(starts > 0) & (starts < nnz)] - 1] = True
    if not steps_ok.all():
        r = int(np.searchsorted(row_ptr, int(np.argmin(steps_ok)), side="right")) - 1
        c = col[row_ptr[r]:row_ptr[r + 1]].astype(np.int64)
        raise FormatRuleError(f"col: indices must be strictly ascending within row {r}; got {c.tolist()}")
    require_finite("val", val)


# ----------------------------------------------------------------------------------------------
# packing
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Packed2416:
    """The packed, memory-aligned format (every array per output channel; spec block):
    w_main uint32 (N, U, 4); w_side uint32 (N, n4); meta2 uint16 (N, T); meta4 uint8 (N, n4);
    s2 float16 (G, N/16); z2 uint16 (G, N/16); group_bits uint8 (G,); row_ptr int32 (N+1,);
    col uint16 (nnz,); val float16 (nnz,)."""

    w_main: np.ndarray
    w_side: np.ndarray
    meta2: np.ndarray
    meta4: np.ndarray
    s2: np.ndarray
    z2: np.ndarray
    group_bits: np.ndarray
    row_ptr: np.ndarray
    col: np.ndarray
    val: np.ndarray

    def __post_init__(self):
        """Cross-field rules, checked once: every consumer then trusts the fields."""
        require_fields(self)
        bits = check_group_bits(self.group_bits)
        g = bits.size
        n4 = int(np.count_nonzero(bits == 4))
        w_main = require_dtype("w_main", self.w_main, np.uint32)
        require_ndim("w_main", w_main, 3)
        n = w_main.shape[0]
        check_kn(G1 * g, n)
        require_shape("w_main", w_main, (n, _units(g - n4, n4), 4))
        require_shape("w_side", require_dtype("w_side", self.w_side, np.uint32), (n, n4))
        require_shape("meta2", require_dtype("meta2", self.meta2, np.uint16), (n, -(-(g - n4) // 3)))
        require_shape("meta4", require_dtype("meta4", self.meta4, np.uint8), (n, n4))
        s2 = require_dtype("s2", self.s2, np.float16)
        require_shape("s2", s2, (g, n // G2))
        require_finite("s2", s2)
        require_shape("z2", require_dtype("z2", self.z2, np.uint16), (g, n // G2))
        require_codes("z2", self.z2, 4)
        check_csr(self.row_ptr, self.col, self.val, n_rows=n, n_cols=G1 * g)

    @property
    def nbytes(self) -> int:
        return packed_nbytes(self)


def check_group_bits(group_bits: np.ndarray) -> np.ndarray:
    """``group_bits`` uint8 (G,), G >= 1, each entry 2 or 4 (the width of a 16-row group)."""
    bits = require_dtype("group_bits", group_bits, np.uint8)
    require_ndim("group_bits", bits, 1)
    if bits.size == 0 or not np.isin(bits, (2, 4)).all():
        raise FormatRuleError(f"group_bits: one entry per 16-row group, each 2 or 4; got "
                              f"{np.unique(bits).tolist()[:8]} over {bits.size} groups")
    return bits


def packed_nbytes(p: Packed2416) -> int:
    """Total bytes of every array of the packed format (padding words included)."""
    require_instance("p", p, Packed2416)
    return sum(getattr(p, f.name).nbytes for f in fields(p))


def _lists(four: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """(2-bit group indices, 4-bit group indices, U) in K order."""
    two_idx = np.flatnonzero(~four)
    four_idx = np.flatnonzero(four)
    return two_idx, four_idx, _units(two_idx.size, four_idx.size)


def _units(n2: int, n4: int) -> int:
    return n4 + -(-max(n2 - 3 * n4, 0) // 4)


def _two_bit_slot(j: int, n4: int) -> tuple[int, int]:
    """(unit, word) of the j-th 2-bit group: 3 per mixed unit, then 4 per pure unit."""
    if j < 3 * n4:
        return j // 3, j % 3
    v, slot = divmod(j - 3 * n4, 4)
    return n4 + v, slot


def _check_packable(m: Mixed2416) -> None:
    clipped = _clipped_slots(m.four)
    if np.any(m.code[clipped] % 2):
        raise FormatRuleError("code: scale codes of 2-bit groups in unit slots 1 and 2 must be even "
                              "(3-bit, LSB clipped); got an odd code (quantize with clip_scales=True: "
                              "refsim.quant.mixed_2_4_16)")


def pack(m: Mixed2416) -> Packed2416:
    """Pack a :class:`Mixed2416` into the memory-aligned layout of the spec block."""
    require_instance("m", m, Mixed2416)
    _check_packable(m)
    k, n = m.q.shape
    two_idx, four_idx, U = _lists(m.four)
    qg = m.q.reshape(k // G1, G1, n).transpose(2, 0, 1).astype(np.uint32)   # (N, G, 16)
    w_main = np.zeros((n, U, 4), np.uint32)
    w_side = np.zeros((n, four_idx.size), np.uint32)
    meta2 = np.zeros((n, -(-two_idx.size // 3)), np.uint16)
    sh2 = (2 * np.arange(16)).astype(np.uint32)
    sh4 = (4 * np.arange(8)).astype(np.uint32)
    for j, gi in enumerate(two_idx):
        u, word = _two_bit_slot(j, four_idx.size)
        w_main[:, u, word] = np.bitwise_or.reduce(qg[:, gi, :] << sh2, axis=1)
        t, slot = divmod(j, 3)
        z = m.zero[gi].astype(np.uint16)
        c = m.code[gi].astype(np.uint16)
        field = c if slot == 0 else c >> 1
        meta2[:, t] |= (z << (2 * slot)) | (field << (6 if slot == 0 else 7 + 3 * slot))
    for u, gi in enumerate(four_idx):
        w_main[:, u, 3] = np.bitwise_or.reduce(qg[:, gi, :8] << sh4, axis=1)
        w_side[:, u] = np.bitwise_or.reduce(qg[:, gi, 8:] << sh4, axis=1)
    meta4 = (m.zero[four_idx].T | (m.code[four_idx].T << 4)).astype(np.uint8)   # (N, n4)
    return Packed2416(w_main, w_side, meta2, meta4, m.s2.copy(), m.z2.astype(np.uint16),
                      np.where(m.four, 4, 2).astype(np.uint8), m.row_ptr.copy(), m.col.copy(), m.val.copy())


def pack_reference(m: Mixed2416) -> Packed2416:
    """Plain-loop twin of :func:`pack`: one code, one bit field at a time."""
    require_instance("m", m, Mixed2416)
    _check_packable(m)
    k, n = m.q.shape
    two_idx, four_idx, U = _lists(m.four)
    n4 = four_idx.size
    w_main = np.zeros((n, U, 4), np.uint32)
    w_side = np.zeros((n, n4), np.uint32)
    meta2 = np.zeros((n, (two_idx.size + 2) // 3), np.uint16)
    meta4 = np.zeros((n, n4), np.uint8)
    for col in range(n):
        for j, gi in enumerate(two_idx):
            if j < 3 * n4:
                u, w_slot = j // 3, j % 3
            else:
                u, w_slot = n4 + (j - 3 * n4) // 4, (j - 3 * n4) % 4
            word = 0
            for t in range(16):
                word |= int(m.q[gi * 16 + t, col]) << (2 * t)
            w_main[col, u, w_slot] = word
            tri, slot = j // 3, j % 3
            meta = int(meta2[col, tri]) | (int(m.zero[gi, col]) << (2 * slot))
            if slot == 0:
                meta |= int(m.code[gi, col]) << 6
            elif slot == 1:
                meta |= (int(m.code[gi, col]) // 2) << 10
            else:
                meta |= (int(m.code[gi, col]) // 2) << 13
            meta2[col, tri] = meta
        for u, gi in enumerate(four_idx):
            lo = hi = 0
            for t in range(8):
                lo |= int(m.q[gi * 16 + t, col]) << (4 * t)
                hi |= int(m.q[gi * 16 + 8 + t, col]) << (4 * t)
            w_main[col, u, 3] = lo
            w_side[col, u] = hi
            meta4[col, u] = int(m.zero[gi, col]) | (int(m.code[gi, col]) << 4)
    bits = np.array([4 if f else 2 for f in m.four], np.uint8)
    return Packed2416(w_main, w_side, meta2, meta4, m.s2.copy(), m.z2.astype(np.uint16), bits,
                      m.row_ptr.copy(), m.col.copy(), m.val.copy())


def unpack(p: Packed2416) -> Mixed2416:
    """Inverse of :func:`pack`."""
    require_instance("p", p, Packed2416)
    four = p.group_bits == 4
    g = four.size
    n = p.w_main.shape[0]
    k = g * G1
    two_idx, four_idx, U = _lists(four)
    require_shape("w_main", p.w_main, (n, U, 4))
    q = np.zeros((k, n), np.uint8)
    zero = np.zeros((g, n), np.uint8)
    code = np.zeros((g, n), np.uint8)
    sh2 = (2 * np.arange(16)).astype(np.uint32)
    sh4 = (4 * np.arange(8)).astype(np.uint32)
    for j, gi in enumerate(two_idx):
        u, word = _two_bit_slot(j, four_idx.size)
        q[gi * 16:(gi + 1) * 16] = ((p.w_main[:, u, word][None, :] >> sh2[:, None]) & 3).astype(np.uint8)
        t, slot = divmod(j, 3)
        meta = p.meta2[:, t].astype(np.uint32)
        zero[gi] = (meta >> (2 * slot)) & 3
        code[gi] = (meta >> 6) & 15 if slot == 0 else ((meta >> (7 + 3 * slot)) & 7) << 1
    for u, gi in enumerate(four_idx):
        q[gi * 16:gi * 16 + 8] = (p.w_main[:, u, 3][None, :] >> sh4[:, None]) & 15
        q[gi * 16 + 8:gi * 16 + 16] = (p.w_side[:, u][None, :] >> sh4[:, None]) & 15
        zero[gi] = p.meta4[:, u] & 15
        code[gi] = p.meta4[:, u] >> 4
    return Mixed2416(q, zero, code, p.s2.copy(), p.z2.astype(np.uint8), four, p.row_ptr.copy(),
                     p.col.copy(), p.val.copy())


# ----------------------------------------------------------------------------------------------
# average bits
# ----------------------------------------------------------------------------------------------
def average_bits(k: int, n: int, n4: int, nnz: int) -> Fraction:
    """Exact bits per weight of the packed format, from the format's own accounting:

        U = n4 + ceil(max(n2 - 3 n4, 0) / 4)   units, n2 = G - n4, G = K / 16;  T = ceil(n2 / 3)
        per output channel:  128 U (w_main) + 32 n4 (w_side) + 16 T (meta2) + 8 n4 (meta4)
        per (group, 16 columns):  16 (s2) + 16 (z2 padded from 4 bits)  -> 32 / (g1 g2) per weight
        per group: 8 (group_bits);  per output channel + 1: 32 (row_ptr);  per outlier: 16 + 16

    With n2 = 3 n4 (alpha = 1/4) the weight words alone give exactly 2.5 bits, as eq. 10's
    (1 - alpha) * 2 + alpha * 4."""
    k, n = require_int("k", k, minimum=1), require_int("n", n, minimum=1)
    check_kn(k, n)
    g = k // G1
    n4 = require_int("n4", n4, minimum=0)
    nnz = require_int("nnz", nnz, minimum=0)
    if n4 > g:
        raise FormatRuleError(f"n4: at most G = K/16 = {g} groups can be 4-bit; got {n4}")
    require_bounded("nnz", nnz, k * n, what="outlier count (at most K*N)")
    n2 = g - n4
    u = _units(n2, n4)
    t = -(-n2 // 3)
    total = n * (128 * u + 32 * n4 + 16 * t + 8 * n4) + g * (n // G2) * 32 + 8 * g + 32 * (n + 1) + 32 * nnz
    return Fraction(total, k * n)


def paper_average_bits(alpha4: float, n_s: int = 4) -> float:
    """Eq. 10 as printed, with alpha4 the share of 4-bit groups (the paper's alpha is the 2-bit
    share): (1 - alpha4) * (2 + (2 + Ns)/g1 + (Ns + 16)/(g1 g2)) + alpha4 * 4. It omits the
    4-bit groups' scales, the alignment padding, the precision map and the outliers."""
    alpha4 = check_fraction("alpha4", alpha4, 1.0)
    n_s = require_int("n_s", n_s, minimum=1)
    return (1 - alpha4) * (2 + (2 + n_s) / G1 + (n_s + 16) / (G1 * G2)) + alpha4 * 4


# ----------------------------------------------------------------------------------------------
# GEMV
# ----------------------------------------------------------------------------------------------
def _check_x(x: np.ndarray, k: int) -> np.ndarray:
    x = require_dtype("x", x, np.float16)
    require_shape("x", x, (k,))
    require_finite("x", x)
    return x


def gemv(p: Packed2416, x: np.ndarray) -> np.ndarray:
    """y = x @ W_hat for one token, with the paper's dataflow (module docstring).

    The FORMAT's reference GEMV, not a kernel oracle: the kernel emulation (its warp reductions
    and fp16 roundings, what a CUDA implementation writes) is
    :mod:`refsim.emulator.mixed_2_4_16_kernel`; compare kernel output with that.
    p: :class:`Packed2416`; x float16 (K,); returns float16 (N,)."""
    m = unpack(p)
    k, n = m.q.shape
    x = _check_x(x, k)
    s_hat = _s_hat(m)                                                    # 2nd-order dequant, (G, N)
    zr = np.repeat(m.zero.astype(np.float32), G1, axis=0)
    w_half = ((m.q.astype(np.float32) - zr) * np.repeat(s_hat, G1, axis=0)).astype(np.float16)   # (K, N)
    xf = x.astype(np.float32)
    acc = np.zeros(n, np.float32)
    for kk in range(k):                                                  # sequential fp32 order
        acc = (acc + w_half[kk].astype(np.float32) * xf[kk]).astype(np.float32)
    for r in range(n):                                                   # CSR SpMV
        for e in range(int(m.row_ptr[r]), int(m.row_ptr[r + 1])):
            acc[r] = np.float32(acc[r] + np.float32(m.val[e]) * xf[int(m.col[e])])
    return acc.astype(np.float16)


def gemv_reference(p: Packed2416, x: np.ndarray) -> np.ndarray:
    """Plain-loop twin of :func:`gemv` reading the packed words directly (bit fields, scale
    words and CSR arrays), one output channel at a time as the paper's kernel does."""
    require_instance("p", p, Packed2416)
    four = p.group_bits == 4
    g = four.size
    k = g * G1
    n = p.w_main.shape[0]
    x = _check_x(x, k)
    two_idx, four_idx, _ = _lists(four)
    y = np.zeros(n, np.float16)
    for r in range(n):
        w = [np.float16(0)] * k
        n4 = four_idx.size
        for j, gi in enumerate(two_idx):
            if j < 3 * n4:
                u, w_slot = j // 3, j % 3
            else:
                u, w_slot = n4 + (j - 3 * n4) // 4, (j - 3 * n4) % 4
            tri, slot = j // 3, j % 3
            meta = int(p.meta2[r, tri])
            z = (meta >> (2 * slot)) & 3
            c = (meta >> 6) & 15 if slot == 0 else ((meta >> (7 + 3 * slot)) & 7) * 2
            s2 = np.float32(p.s2[gi, r // G2])
            s_hat = np.float16(np.float32(c - int(p.z2[gi, r // G2])) * s2)
            word = int(p.w_main[r, u, w_slot])
            for t in range(16):
                q = (word >> (2 * t)) & 3
                w[gi * 16 + t] = np.float16(np.float32(q - z) * np.float32(s_hat))
        for u, gi in enumerate(four_idx):
            z = int(p.meta4[r, u]) & 15
            c = int(p.meta4[r, u]) >> 4
            s2 = np.float32(p.s2[gi, r // G2])
            s_hat = np.float16(np.float32(c - int(p.z2[gi, r // G2])) * s2)
            for t in range(16):
                word = int(p.w_main[r, u, 3]) if t < 8 else int(p.w_side[r, u])
                q = (word >> (4 * (t % 8))) & 15
                w[gi * 16 + t] = np.float16(np.float32(q - z) * np.float32(s_hat))
        acc = np.float32(0)
        for kk in range(k):
            acc = np.float32(acc + np.float32(w[kk]) * np.float32(x[kk]))
        for e in range(int(p.row_ptr[r]), int(p.row_ptr[r + 1])):
            acc = np.float32(acc + np.float32(p.val[e]) * np.float32(x[int(p.col[e])]))
        y[r] = np.float16(acc)
    return y
