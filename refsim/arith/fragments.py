"""Which lane of a warp holds which matrix element: ``mma`` fragments and ``ldmatrix``, as data.

Spec
----
notation        lane in [0, 32), g = lane >> 2 (groupID, 0..7), t = lane % 4 (threadID_in_group).
                A fragment lists, per lane, the (row, col) of its elements a0, a1, ... in register
                order; element i lives in register i // per_reg, at sub-position i % per_reg, the
                lowest index in the lowest bits ("low to high").
mma.m16n8k16    f16/bf16, row.col. A (16x16, M x K): 8 halves a0..a7 in 4 .f16x2 registers:
                row = g (i in {0,1,4,5}) or g+8 (i in {2,3,6,7}); col = 2t + (i&1) (+8 for i >= 4).
                B (16x8, K x N): 4 halves b0..b3 in 2 registers: k = 2t + (i&1) (+8 for i >= 2), n = g.
                C/D (16x8): 4 values c0..c3 (4 .f32 or 2 .f16x2): row = g (i < 2) or g+8, col = 2t + (i&1).
mma.m16n8k8     tf32, row.col (32-bit elements, one per register). A (16x8): a0..a3: row = g (+8 for
                odd i), col = t (+4 for i >= 2). B (8x8): b0, b1: k = t (+4 for b1), n = g.
                f16/bf16: a0..a3 in 2 registers, row g (+8 for i >= 2), col 2t + (i&1); b0, b1: k = 2t + i.
mma.m16n8k32    e4m3/e5m2 (and s8/u8), row.col, 4 bytes per register. A (16x32): a0..a15 in 4 registers:
                row = g for i in [0,4) and [8,12), g+8 otherwise; col = 4t + (i&3) (+16 for i >= 8).
                B (32x8): b0..b7 in 2 registers: k = 4t + (i&3) (+16 for i >= 4), n = g.
mma.m16n8k64    s4/u4, row.col. A (16x64): 32 nibbles a0..a31 in 4 .b32: row = g for i in [0,8) and
                [16,24), g+8 otherwise; col = 8t + (i&7) (+32 for i >= 16). B (64x8): 16 nibbles in 2
                registers: k = 8t + (i&7) (+32 for i >= 8), n = g. C/D: int32, the f16 C/D mapping.
ldmatrix        ``ldmatrix.sync.aligned.m8n8.{x1,x2,x4}{.trans}.shared.b16``: lanes 8j..8j+7 give the
                row addresses of matrix j. Register j of lane l gets M_j[l/4][2(l%4)] (low half) and
                M_j[l/4][2(l%4)+1] (high half); with ``.trans`` M_j[2(l%4)][l/4] and M_j[2(l%4)+1][l/4].
invariants      every layout is a bijection between (lane, element) and the matrix; the canonical
                ldmatrix.x4 of a row-major 16x16 A tile (lane l supplies &A[l % 16][8 (l / 16)]) yields
                exactly the m16n8k16 A fragment.
hardware        the H100 probes (refsim/data/tensor_core_hw) hold the registers each lane passed for
                m16n8k16/k8 f16 and bf16, m16n8k8 tf32 and m16n8k32 e4m3/e5m2: every lane and register
                equals these maps applied to the logical tiles (tests/arith/test_fragments.py).
source          PTX ISA 9.x §9.7.14.5.8 "Matrix Fragments for mma.m16n8k16 with floating point type",
                §9.7.14.5.10 (m16n8k64 integer), §9.7.14.5.15 ``ldmatrix``.

The A fragment of m16n8k16 in a picture (the lane that holds each 2-element pair, rows 0..15)::

            k: 0 1  2 3  4 5  6 7 | 8 9  10 11 ...
    row 0      L0   L1   L2   L3  | L0   L1    ...      a0,a1 | a4,a5 of lanes 0..3
    row 1      L4   L5   L6   L7  | L4   L5    ...
    ...
    row 8      L0   L1   L2   L3  | L0   L1    ...      a2,a3 | a6,a7 of lanes 0..3
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refsim._validate import (require_array, require_bool, require_choice, require_dtype, require_dtype_arg,
                              require_fields, require_integer_array)
from refsim.errors import DtypeError, ShapeError

__all__ = [
    "FragmentLayout", "mma_m16n8k16_a", "mma_m16n8k16_b", "mma_m16n8k16_c",
    "mma_m16n8k64_s4_a", "mma_m16n8k64_s4_b", "mma_m16n8k64_c",
    "ldmatrix", "ldmatrix_reference", "ldmatrix_layout", "pack_registers", "unpack_registers",
    "mma_m16n8k8_a", "mma_m16n8k8_b", "mma_m16n8k16_s8_a", "mma_m16n8k16_s8_b",
    "mma_m16n8k32_s8_a", "mma_m16n8k32_s8_b", "mma_m16n8k32_s4_a", "mma_m16n8k32_s4_b",
    "mma_m16n8k8_tf32_a", "mma_m16n8k8_tf32_b", "mma_m16n8k32_f8_a", "mma_m16n8k32_f8_b",
]


@dataclass(frozen=True)
class FragmentLayout:
    """A warp-wide register layout: ``coords[lane, i] = (row, col)`` of element i of that lane.

    name: the PTX operand, e.g. ``m16n8k16.A.f16``; shape: (rows, cols) of the matrix;
    per_reg: elements per 32-bit register (2 for 16-bit, 8 for 4-bit, 1 for 32-bit values).
    """

    name: str
    shape: tuple[int, int]
    per_reg: int
    coords: np.ndarray  # int64 (32, elements_per_lane, 2)

    def __post_init__(self):
        require_fields(self)

    @property
    def elements_per_lane(self) -> int:
        return self.coords.shape[1]

    def gather(self, matrix: np.ndarray) -> np.ndarray:
        """Matrix (..., rows, cols) -> per-lane fragments (..., 32, elements_per_lane), same dtype."""
        matrix = require_array("matrix", matrix)
        if matrix.shape[-2:] != self.shape:
            raise ShapeError(f"matrix: trailing shape must be {self.shape} for {self.name}; got {matrix.shape}")
        return matrix[..., self.coords[..., 0], self.coords[..., 1]]

    def scatter(self, frags: np.ndarray) -> np.ndarray:
        """Per-lane fragments (..., 32, elements_per_lane) -> matrix (..., rows, cols); inverse of gather."""
        frags = require_array("frags", frags)
        if frags.shape[-2:] != (32, self.elements_per_lane):
            raise ShapeError(f"frags: trailing shape must be (32, {self.elements_per_lane}); got {frags.shape}")
        out = np.empty(frags.shape[:-2] + self.shape, frags.dtype)
        out[..., self.coords[..., 0], self.coords[..., 1]] = frags
        return out

    def owner(self, row: int, col: int) -> tuple[int, int]:
        """(lane, element index) holding matrix element (row, col)."""
        hit = np.argwhere((self.coords[..., 0] == row) & (self.coords[..., 1] == col))
        if len(hit) != 1:
            raise ShapeError(f"(row, col): must lie in the {self.shape} matrix of {self.name}; got {(row, col)}")
        return int(hit[0, 0]), int(hit[0, 1])

    def __str__(self) -> str:
        lines = [f"{self.name} {self.shape[0]}x{self.shape[1]}, {self.elements_per_lane} per lane"]
        for lane in range(0, 32, 4):
            lines.append(f"  lane {lane:2d}: " + " ".join(f"({r},{c})" for r, c in self.coords[lane]))
        return "\n".join(lines)


def _layout(name, shape, per_reg, n_elems, fn) -> FragmentLayout:
    coords = np.zeros((32, n_elems, 2), np.int64)
    for lane in range(32):
        g, t = lane >> 2, lane % 4
        for i in range(n_elems):
            coords[lane, i] = fn(g, t, i)
    coords.setflags(write=False)
    return FragmentLayout(name, shape, per_reg, coords)


def mma_m16n8k16_a() -> FragmentLayout:
    """A operand (16x16, M x K, .row) of ``mma.m16n8k16`` with f16/bf16: 8 halves per lane."""
    return _layout("m16n8k16.A.f16", (16, 16), 2, 8,
                   lambda g, t, i: (g + 8 * ((i >> 1) & 1), 2 * t + (i & 1) + 8 * (i >= 4)))


def mma_m16n8k16_b() -> FragmentLayout:
    """B operand (16x8, K x N, .col) of ``mma.m16n8k16`` with f16/bf16: 4 halves per lane."""
    return _layout("m16n8k16.B.f16", (16, 8), 2, 4, lambda g, t, i: (2 * t + (i & 1) + 8 * (i >= 2), g))


def mma_m16n8k16_c(dtype=np.float32) -> FragmentLayout:
    """C/D (16x8) of ``mma.m16n8k16``: 4 values per lane (f32: 1 per register, f16: 2).
    ``dtype``: float32 or float16."""
    dtype = require_dtype_arg("dtype", dtype, (np.float32, np.float16))
    per_reg = 2 if dtype == np.float16 else 1
    return _layout(f"m16n8k16.C.{dtype}", (16, 8), per_reg, 4,
                   lambda g, t, i: (g + 8 * (i >= 2), 2 * t + (i & 1)))


def mma_m16n8k64_s4_a() -> FragmentLayout:
    """A operand (16x64, .row) of ``mma.m16n8k64`` with s4/u4: 32 nibbles per lane."""
    return _layout("m16n8k64.A.s4", (16, 64), 8, 32,
                   lambda g, t, i: (g + 8 * ((i >> 3) & 1), 8 * t + (i & 7) + 32 * (i >= 16)))


def mma_m16n8k64_s4_b() -> FragmentLayout:
    """B operand (64x8, .col) of ``mma.m16n8k64`` with s4/u4: 16 nibbles per lane."""
    return _layout("m16n8k64.B.s4", (64, 8), 8, 16, lambda g, t, i: (8 * t + (i & 7) + 32 * (i >= 8), g))


def mma_m16n8k64_c() -> FragmentLayout:
    """C/D (16x8, int32) of ``mma.m16n8k64``: the same mapping as the f32 C of m16n8k16."""
    return _layout("m16n8k64.C.s32", (16, 8), 1, 4, lambda g, t, i: (g + 8 * (i >= 2), 2 * t + (i & 1)))


# ----------------------------------------------------------------------------------------------
# registers


def pack_registers(frags: np.ndarray, bits: int) -> np.ndarray:
    """Per-lane elements (..., E) of ``bits`` each (32, 16, 8 or 4) -> uint32 registers (..., E*bits/32).

    frags: uint32 / uint16 for 32-/16-bit elements (raw bit patterns), any integer dtype for 8/4-bit
    (two's complement values are masked to ``bits``). Element i goes to register i*bits // 32, bits
    (i*bits % 32) upward: the lowest index in the lowest bits.
    """
    bits = int(require_choice("bits", bits, (32, 16, 8, 4)))
    frags = require_integer_array("frags", frags)
    wide = {32: np.uint32, 16: np.uint16}
    if bits in wide and frags.dtype != wide[bits]:
        raise DtypeError(f"frags: {bits}-bit elements must be {np.dtype(wide[bits])} bit patterns; got {frags.dtype}")
    if bits == 32:
        return frags.copy()
    per = 32 // bits
    if frags.ndim < 1 or frags.shape[-1] % per:
        raise ShapeError(f"frags: last axis must be a multiple of {per}; got {frags.shape}")
    v = frags.astype(np.int64) & ((1 << bits) - 1)
    v = v.reshape(frags.shape[:-1] + (frags.shape[-1] // per, per))  # (..., R, per)
    shifts = np.arange(per, dtype=np.int64) * bits
    return (v << shifts).sum(axis=-1).astype(np.uint32)


def unpack_registers(regs: np.ndarray, bits: int, signed: bool = False) -> np.ndarray:
    """uint32 registers (..., R) -> elements (..., R*32/bits) as int64 (sign-extended if ``signed``)."""
    bits = int(require_choice("bits", bits, (32, 16, 8, 4)))
    regs = require_dtype("regs", regs, np.uint32)
    signed = require_bool("signed", signed)
    if regs.ndim < 1:
        raise ShapeError(f"regs: must have a last axis of registers; got shape {regs.shape}")
    per = 32 // bits
    shifts = np.arange(per, dtype=np.int64) * bits
    v = (regs.astype(np.int64)[..., None] >> shifts) & ((1 << bits) - 1)  # (..., R, per)
    if signed:
        v = np.where(v >= (1 << (bits - 1)), v - (1 << bits), v)
    return v.reshape(regs.shape[:-1] + (regs.shape[-1] * per,))


# ----------------------------------------------------------------------------------------------
# ldmatrix


def ldmatrix_layout(num: int, trans: bool = False) -> np.ndarray:
    """``ldmatrix .x{num}{.trans}``: int64 (32, num, 2, 3) — for lane l, register j, half h the
    (matrix, row, col) of the 16-bit element it receives."""
    num = int(require_choice("num", num, (1, 2, 4)))
    trans = require_bool("trans", trans)
    out = np.zeros((32, num, 2, 3), np.int64)
    for lane in range(32):
        for j in range(num):
            for h in range(2):
                r, c = lane // 4, 2 * (lane % 4) + h
                out[lane, j, h] = (j, c, r) if trans else (j, r, c)
    return out


def _check_ldmatrix(matrices, trans) -> tuple[np.ndarray, bool]:
    """The check :func:`ldmatrix` and its twin share: uint16 (num, 8, 8), num in {1, 2, 4}."""
    matrices = require_dtype("matrices", matrices, np.uint16)
    if matrices.ndim != 3 or matrices.shape[1:] != (8, 8) or matrices.shape[0] not in (1, 2, 4):
        raise ShapeError(f"matrices: shape must be (num, 8, 8) with num in (1, 2, 4); got {matrices.shape}")
    return matrices, require_bool("trans", trans)


def ldmatrix(matrices: np.ndarray, trans: bool = False) -> np.ndarray:
    """Emulate ``ldmatrix.sync.aligned.m8n8.x{num}{.trans}.shared.b16`` for one warp.

    matrices: uint16 (num, 8, 8), num in {1, 2, 4}: the 8x8 matrices whose row addresses lanes
    8j..8j+7 supply (row r of matrix j is what lane 8j + r points at). Returns uint32 (32, num):
    register j of every lane, low half = the first element.
    """
    matrices, trans = _check_ldmatrix(matrices, trans)
    lay = ldmatrix_layout(matrices.shape[0], trans)
    halves = matrices[lay[..., 0], lay[..., 1], lay[..., 2]]  # (32, num, 2)
    return pack_registers(halves.reshape(32, -1), 16)


def ldmatrix_reference(matrices: np.ndarray, trans: bool = False) -> np.ndarray:
    """Plain-loop twin of :func:`ldmatrix`, written from the PTX sentence per lane and register."""
    matrices, trans = _check_ldmatrix(matrices, trans)
    num = matrices.shape[0]
    out = np.zeros((32, num), np.uint32)
    for lane in range(32):
        for j in range(num):
            row, col = lane // 4, 2 * (lane % 4)
            if trans:
                lo, hi = matrices[j, col, row], matrices[j, col + 1, row]
            else:
                lo, hi = matrices[j, row, col], matrices[j, row, col + 1]
            out[lane, j] = int(lo) | (int(hi) << 16)
    return out


# ----------------------------------------------------------------------------------------------
# the other mma shapes executed by refsim.ptx (PTX ISA 9.x §9.7.14.5.7 m16n8k8 f16, §9.7.14.5.9
# m16n8k16/k32 integer, §9.7.14.5.10 m16n8k32 s4). C/D of every shape: mma_m16n8k16_c.


def mma_m16n8k8_a() -> FragmentLayout:
    """A (16x8, .row) of ``mma.m16n8k8`` f16/bf16: a0..a3 in 2 registers; row g (+8 for i >= 2), col 2t + (i&1)."""
    return _layout("m16n8k8.A.f16", (16, 8), 2, 4, lambda g, t, i: (g + 8 * (i >= 2), 2 * t + (i & 1)))


def mma_m16n8k8_b() -> FragmentLayout:
    """B (8x8, .col) of ``mma.m16n8k8`` f16/bf16: b0, b1 in 1 register; k = 2t + i, n = g."""
    return _layout("m16n8k8.B.f16", (8, 8), 2, 2, lambda g, t, i: (2 * t + i, g))


def mma_m16n8k16_s8_a() -> FragmentLayout:
    """A (16x16, .row) of ``mma.m16n8k16`` s8/u8: a0..a7 in 2 registers; row g (+8 for i >= 4), col 4t + (i&3)."""
    return _layout("m16n8k16.A.s8", (16, 16), 4, 8, lambda g, t, i: (g + 8 * (i >= 4), 4 * t + (i & 3)))


def mma_m16n8k16_s8_b() -> FragmentLayout:
    """B (16x8, .col) of ``mma.m16n8k16`` s8/u8: b0..b3 in 1 register; k = 4t + i, n = g."""
    return _layout("m16n8k16.B.s8", (16, 8), 4, 4, lambda g, t, i: (4 * t + i, g))


def mma_m16n8k32_s8_a() -> FragmentLayout:
    """A (16x32, .row) of ``mma.m16n8k32`` s8/u8: a0..a15 in 4 registers; row g for i in [0,4) and
    [8,12), g+8 otherwise; col 4t + (i&3) (+16 for i >= 8)."""
    return _layout("m16n8k32.A.s8", (16, 32), 4, 16,
                   lambda g, t, i: (g + 8 * ((i >> 2) & 1), 4 * t + (i & 3) + 16 * (i >= 8)))


def mma_m16n8k32_s8_b() -> FragmentLayout:
    """B (32x8, .col) of ``mma.m16n8k32`` s8/u8: b0..b7 in 2 registers; k = 4t + (i&3) (+16 for i >= 4), n = g."""
    return _layout("m16n8k32.B.s8", (32, 8), 4, 8, lambda g, t, i: (4 * t + (i & 3) + 16 * (i >= 4), g))


def mma_m16n8k32_s4_a() -> FragmentLayout:
    """A (16x32, .row) of ``mma.m16n8k32`` s4/u4: a0..a15 in 2 registers; row g (+8 for i >= 8), col 8t + (i&7)."""
    return _layout("m16n8k32.A.s4", (16, 32), 8, 16, lambda g, t, i: (g + 8 * (i >= 8), 8 * t + (i & 7)))


def mma_m16n8k32_s4_b() -> FragmentLayout:
    """B (32x8, .col) of ``mma.m16n8k32`` s4/u4: b0..b7 in 1 register; k = 8t + i, n = g."""
    return _layout("m16n8k32.B.s4", (32, 8), 8, 8, lambda g, t, i: (8 * t + i, g))


# ----------------------------------------------------------------------------------------------
# tf32 and fp8 (PTX ISA 9.x "Matrix Fragments for mma.m16n8k8" (.tf32) and "for mma.m16n8k32" (.e4m3/.e5m2);
# bf16 uses the f16 maps above). Checked per lane against the registers an H100 received.


def mma_m16n8k8_tf32_a() -> FragmentLayout:
    """A (16x8, .row) of ``mma.m16n8k8`` tf32: a0..a3, one per .b32 register; row g (+8 for odd i), col t (+4 for i >= 2)."""
    return _layout("m16n8k8.A.tf32", (16, 8), 1, 4, lambda g, t, i: (g + 8 * (i & 1), t + 4 * (i >= 2)))


def mma_m16n8k8_tf32_b() -> FragmentLayout:
    """B (8x8, .col) of ``mma.m16n8k8`` tf32: b0, b1, one per register; k = t (+4 for b1), n = g."""
    return _layout("m16n8k8.B.tf32", (8, 8), 1, 2, lambda g, t, i: (t + 4 * i, g))


def mma_m16n8k32_f8_a() -> FragmentLayout:
    """A (16x32, .row) of ``mma.m16n8k32`` e4m3/e5m2: the 8-bit map of :func:`mma_m16n8k32_s8_a`."""
    return FragmentLayout("m16n8k32.A.f8", (16, 32), 4, mma_m16n8k32_s8_a().coords)


def mma_m16n8k32_f8_b() -> FragmentLayout:
    """B (32x8, .col) of ``mma.m16n8k32`` e4m3/e5m2: the 8-bit map of :func:`mma_m16n8k32_s8_b`."""
    return FragmentLayout("m16n8k32.B.f8", (32, 8), 4, mma_m16n8k32_s8_b().coords)
