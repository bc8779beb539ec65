"""QIGen packed weight layout: GPTQ ``qweight`` words re-blocked into column panels.

Where QIGen lives: THIS module is the format (the packed layout, ``pack``/``unpack``), like every
other module in ``refsim.formats``; the package ``refsim.qigen`` is the CPU kernel side (code
generator, build, exact oracle ``qigen.oracle``, performance model, running the generated code).

Spec block
----------
element bits      2, 3 or 4 (unsigned codes ``q`` in ``[0, 2**bits)``, zero point kept apart)
container         int32 words, exactly the words of the GPTQ checkpoint ``qweight`` (no re-packing
                  of bits, only of words)
bit order         the GPTQ stream, LSB first: code ``k`` of a word at bits ``[bits*k, bits*k+bits)``
                  for 2/4-bit; for 3-bit the 32 codes of a column live in three consecutive words as
                  one 96-bit little-endian stream (code ``v`` at stream bits ``[3v, 3v+3)``, stream
                  bit ``b`` = bit ``b % 32`` of word ``b // 32``), so codes 10 and 21 straddle words
element order     along K inside a word (a word holds ``P`` = 32/bits consecutive K-rows of one
                  column for 2/4-bit, and a triple of words holds 32 K-rows for 3-bit)
tile shape        a *block* is ``mb`` K-rows x ``tb`` columns (``mb`` multiple of 32, ``tb``
                  multiple of 8); the matrix is ``K/mb`` x ``N/tb`` blocks; every block is
                  contiguous in memory
inside a block    2/4-bit: ``[mb/P word-rows][tb columns]``                (row-major)
                  3-bit:   ``[mb/32 triples][tb/8 octets][3 words][8 columns]``
block order       ``"panel"`` (default, what IST-DASLab/QIGen does): panel ``p`` (columns
                  ``p*tb ...``) is stored whole before panel ``p+1``; inside a panel the K-blocks in
                  increasing K. ``"zcurve"``: blocks sorted by the Morton (Z-curve) index of
                  ``(kb, p)``, the option the paper describes (Sec. 3, Mini-GEMV); it keeps K-blocks
                  of a panel in increasing K, so per-column summation order is the same for both.
invariants        ``K % mb == 0``, ``mb % 32 == 0``, ``N % tb == 0``, ``tb % 8 == 0``;
                  ``unpack(pack(qw)) == qw`` for every order
source            IST-DASLab/QIGen @ be868d3e0751d1bef5a60f77da25c4a68543de0e (2023-07-13),
                  ``generate.py``: ``pack_qw`` (panel-major blocking; the 3-bit triple/octet
                  interleave) and ``block`` (the kernel's loads ``W[base_W + j*m/P + k*mb*tb/P +
                  k2*tb/P + j1]``). That snapshot has no Z-curve code; ``"zcurve"`` is refsim's
                  rendering of the paper's description.

Layout diagram (4-bit, K=32, N=16, mb=16, tb=8; ``w[r, c]`` is ``qweight[r, c]``, one word holds
8 K-rows)::

    GPTQ qweight (K/8=4, N=16)          QIGen "panel" order (flat int32)
             c0 ..  c7 | c8 .. c15      block(kb=0,p=0): w[0,0..7]  w[1,0..7]
    r0(k0-7)  A0 .. A7 | B0 .. B7       block(kb=1,p=0): w[2,0..7]  w[3,0..7]
    r1(k8-15) ...      | ...            block(kb=0,p=1): w[0,8..15] w[1,8..15]
    r2        ...      | ...            block(kb=1,p=1): w[2,8..15] w[3,8..15]
    r3        ...      | ...
                                        "zcurve" order of (kb,p): (0,0) (1,0) (0,1) (1,1) for this
                                        2x2 grid; (0,0),(1,0),(0,1),(1,1),(2,0),(3,0),(2,1),... for
                                        larger grids (bits of kb and p interleaved, kb in bit 0)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refsim._validate import (
    require_bits,
    require_bounded,
    require_choice,
    require_divisible,
    require_dtype,
    require_fields,
    require_instance,
    require_int,
    require_ndim,
    require_shape,
)

__all__ = [
    "BITS",
    "ORDERS",
    "QIGenLayout",
    "block_order",
    "block_order_reference",
    "pack",
    "pack_reference",
    "unpack",
    "unpack_reference",
]

BITS = (2, 3, 4)
ORDERS = ("panel", "zcurve")


@dataclass(frozen=True)
class QIGenLayout:
    """Geometry of one packed QIGen matrix (validated on construction).

    ``k``, ``n``: the GPTQ matrix is ``(K, N)`` codes, i.e. ``qweight`` is int32
    ``(K*bits//32, N)``. ``mb``: K-rows per block (multiple of 32, divides K). ``tb``: columns
    per block, the panel width (multiple of 8, divides N). ``order``: "panel" or "zcurve".
    """

    bits: int
    k: int
    n: int
    mb: int
    tb: int
    order: str = "panel"

    def __post_init__(self) -> None:
        require_fields(self)
        require_bits(self.bits, BITS)
        require_int("k", self.k, minimum=1)
        require_int("n", self.n, minimum=1)
        require_int("mb", self.mb, minimum=1)
        require_int("tb", self.tb, minimum=1)
        require_choice("order", self.order, ORDERS)
        require_divisible("mb", self.mb, 32, "block height mb must be a positive multiple of 32")
        require_divisible("tb", self.tb, 8, "panel width tb must be a positive multiple of 8")
        require_divisible("K", self.k, self.mb, f"K must be a multiple of the block height mb={self.mb}")
        require_divisible("N", self.n, self.tb, f"N must be a multiple of the panel width tb={self.tb}")

    @property
    def words_per_block(self) -> int:
        """int32 words in one block: ``mb*bits/32`` word-rows x ``tb`` columns."""
        return self.mb * self.bits // 32 * self.tb

    @property
    def grid(self) -> tuple[int, int]:
        """``(K/mb, N/tb)``: number of K-blocks and of panels."""
        return self.k // self.mb, self.n // self.tb

    @property
    def n_words(self) -> int:
        return self.k * self.bits // 32 * self.n


def _morton(kb: int, p: int) -> int:
    """Interleave the bits of ``kb`` (even positions) and ``p`` (odd positions)."""
    code = 0
    for bit in range(32):
        code |= ((kb >> bit) & 1) << (2 * bit)
        code |= ((p >> bit) & 1) << (2 * bit + 1)
    return code


def _check_block_order(n_kblocks, n_panels, order) -> tuple[int, int, str]:
    """Shared by :func:`block_order` and its plain twin."""
    n_kblocks = require_int("n_kblocks", n_kblocks, minimum=1)
    n_panels = require_int("n_panels", n_panels, minimum=1)
    require_bounded("n_kblocks * n_panels", n_kblocks * n_panels, 1 << 24, what="block count")
    return n_kblocks, n_panels, require_choice("order", order, ORDERS)


def block_order_reference(n_kblocks: int, n_panels: int, order: str) -> np.ndarray:
    """Plain-loop twin of :func:`block_order`: storage slot ``i`` holds block ``(kb, p)``."""
    n_kblocks, n_panels, order = _check_block_order(n_kblocks, n_panels, order)
    pairs = []
    for p in range(n_panels):
        for kb in range(n_kblocks):
            pairs.append((kb, p))
    if order == "zcurve":
        pairs.sort(key=lambda t: _morton(t[0], t[1]))
    return np.array(pairs, dtype=np.int32).reshape(-1, 2)


def block_order(n_kblocks: int, n_panels: int, order: str = "panel") -> np.ndarray:
    """Blocks in storage (= traversal) order: int32 ``(n_kblocks*n_panels, 2)`` rows ``(kb, p)``.

    "panel": p-major, kb minor (IST-DASLab/QIGen). "zcurve": increasing Morton index with kb in
    the even bits; for a fixed panel the K-blocks still appear in increasing kb.
    """
    n_kblocks, n_panels, order = _check_block_order(n_kblocks, n_panels, order)
    p, kb = np.meshgrid(np.arange(n_panels), np.arange(n_kblocks), indexing="ij")  # (P, KB)
    kb = kb.reshape(-1).astype(np.int64)
    p = p.reshape(-1).astype(np.int64)
    if order == "zcurve":
        code = np.zeros_like(kb)
        for bit in range(32):
            code |= ((kb >> bit) & 1) << (2 * bit)
            code |= ((p >> bit) & 1) << (2 * bit + 1)
        idx = np.argsort(code, kind="stable")
        kb, p = kb[idx], p[idx]
    return np.stack([kb, p], axis=1).astype(np.int32)


def _check_qweight(qweight: np.ndarray, layout: QIGenLayout) -> np.ndarray:
    require_instance("layout", layout, QIGenLayout)
    qweight = require_dtype("qweight", qweight, np.int32)
    require_ndim("qweight", qweight, 2)
    return require_shape("qweight", qweight, (layout.k * layout.bits // 32, layout.n))


def pack(qweight: np.ndarray, layout: QIGenLayout) -> np.ndarray:
    """GPTQ ``qweight`` int32 ``(K*bits/32, N)`` -> QIGen flat int32 ``(layout.n_words,)``.

    Blocks in ``block_order(layout)``; inside a block the words as the spec block says. The input
    is not modified.
    """
    qweight = _check_qweight(qweight, layout)
    kbs, ps = layout.grid
    rows_per_block = layout.mb * layout.bits // 32
    tb = layout.tb
    # (KB, rows, P, tb): word-rows of each K-block, columns of each panel
    blocks = qweight.reshape(kbs, rows_per_block, ps, tb).transpose(0, 2, 1, 3)  # (KB, P, rows, tb)
    if layout.bits == 3:
        # rows = 3 * triples; (KB, P, triples, 3, tb/8, 8) -> (KB, P, triples, tb/8, 3, 8)
        blocks = blocks.reshape(kbs, ps, rows_per_block // 3, 3, tb // 8, 8).transpose(0, 1, 2, 4, 3, 5)
    blocks = blocks.reshape(kbs, ps, -1)  # (KB, P, words_per_block)
    order = block_order(kbs, ps, layout.order)
    return np.ascontiguousarray(blocks[order[:, 0], order[:, 1]]).reshape(-1)


def _packed_positions_reference(layout: QIGenLayout):
    """Yield the ``(row, column)`` of GPTQ ``qweight`` each packed word comes from, in packed order,
    straight from the spec block (the walk both plain-loop twins share)."""
    kbs, ps = layout.grid
    rows_per_block = layout.mb * layout.bits // 32
    for kb, p in block_order_reference(kbs, ps, layout.order):
        r0, c0 = kb * rows_per_block, p * layout.tb
        if layout.bits == 3:
            for t in range(rows_per_block // 3):
                for octet in range(layout.tb // 8):
                    for w in range(3):
                        for c in range(8):
                            yield r0 + 3 * t + w, c0 + 8 * octet + c
        else:
            for r in range(rows_per_block):
                for c in range(layout.tb):
                    yield r0 + r, c0 + c


def pack_reference(qweight: np.ndarray, layout: QIGenLayout) -> np.ndarray:
    """Plain-loop twin of :func:`pack`, written from the spec block."""
    qweight = _check_qweight(qweight, layout)
    return np.array([qweight[r, c] for r, c in _packed_positions_reference(layout)], dtype=np.int32)


def _check_packed(packed: np.ndarray, layout: QIGenLayout) -> np.ndarray:
    require_instance("layout", layout, QIGenLayout)
    packed = require_dtype("packed", packed, np.int32)
    require_ndim("packed", packed, 1)
    return require_shape("packed", packed, (layout.n_words,))


def unpack(packed: np.ndarray, layout: QIGenLayout) -> np.ndarray:
    """Inverse of :func:`pack`: flat int32 ``(n_words,)`` -> GPTQ ``qweight`` ``(K*bits/32, N)``."""
    packed = _check_packed(packed, layout)
    kbs, ps = layout.grid
    rows_per_block = layout.mb * layout.bits // 32
    tb = layout.tb
    order = block_order(kbs, ps, layout.order)
    blocks = np.empty((kbs, ps, layout.words_per_block), dtype=np.int32)
    blocks[order[:, 0], order[:, 1]] = packed.reshape(-1, layout.words_per_block)
    if layout.bits == 3:
        blocks = blocks.reshape(kbs, ps, rows_per_block // 3, tb // 8, 3, 8).transpose(0, 1, 2, 4, 3, 5)
    blocks = blocks.reshape(kbs, ps, rows_per_block, tb).transpose(0, 2, 1, 3)  # (KB, rows, P, tb)
    return np.ascontiguousarray(blocks.reshape(kbs * rows_per_block, ps * tb))


def unpack_reference(packed: np.ndarray, layout: QIGenLayout) -> np.ndarray:
    """Plain-loop twin of :func:`unpack`."""
    packed = _check_packed(packed, layout)
    qweight = np.zeros((layout.k * layout.bits // 32, layout.n), dtype=np.int32)
    for i, (r, c) in enumerate(_packed_positions_reference(layout)):
        qweight[r, c] = packed[i]
    return qweight
