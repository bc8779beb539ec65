"""Shared-memory swizzles and a bank-conflict (wavefront) counter; Marlin's A-tile swizzle.

Spec block
----------
- **Swizzle value object** (CuTe ``Swizzle<B, M, S>``): on an integer offset ``x``, XOR the
  ``B`` bits starting at bit ``M + S`` into the ``B`` bits starting at bit ``M``:
  ``x ^ ((x & (((1 << B) - 1) << (M + S))) >> S)``; prints as ``SW_B_M_S``. For ``S >= B`` it is an
  involution (its own inverse).
- **Marlin A swizzle** (``transform_a`` in the kernel): the A stage is ``16 * thread_m_blocks``
  rows of ``D = thread_k / 8`` int4 (16-byte) units. The source writes
  ``D * row + (i % D) ^ row`` with ``row = i / D``; C++ gives ``+`` higher precedence than ``^``,
  so the physical int4 index is ``(D * row + i % D) ^ row = i ^ (i / D)``. For ``D = 16``
  (thread_k 128, one m-block) this is ``SW_4_0_4``; for ``D = 8`` with up to 64 rows it also XORs
  row bits 3..5 into row bits 0..2 (row 8 is stored at row 9). It is a bijection on every stage.
- **Bank model** (sm_80+): 32 banks of 4 bytes. A warp request is served in phases of
  ``128 / access_bytes`` lanes (32 lanes for 4-byte, 16 for 8-byte, 8 for 16-byte accesses and
  for each 8x8 matrix of ``ldmatrix``); a phase needs as many wavefronts as the largest number of
  *distinct* 4-byte words any one bank must deliver (equal words broadcast).
- **Source matched**: IST-DASLab/marlin ``marlin/marlin_cuda_kernel.cu`` (``transform_a``,
  ``a_sh_wr``, ``a_sh_rd``, ``ldsm4``), commit ``2f6d7c10e124b3c5fa29ff8d77d568bd7af3274c``;
  CUTLASS ``include/cute/swizzle.hpp`` for the Swizzle definition (read, not copied).

Diagram: int4 columns of an A stage for thread_k = 64 (D = 8), first 8 rows; entry = logical
column stored at that physical column::

    row 0: 0 1 2 3 4 5 6 7      an ldmatrix phase reads logical column c of rows 0..7;
    row 1: 1 0 3 2 5 4 7 6      unswizzled those 8 int4 sit in the same 4 banks (8 wavefronts),
    row 2: 2 3 0 1 6 7 4 5      swizzled they land in 8 different 16-byte bank groups (1)
    ...    (c ^ row)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refsim._validate import (
    MAX_ELEMENTS,
    require_bool,
    require_bounded,
    require_choice,
    require_fields,
    require_int,
    require_integer_array,
)
from refsim.errors import DtypeError, FormatRuleError, ShapeError

__all__ = [
    "Swizzle",
    "BANKS",
    "BANK_BYTES",
    "bank_wavefronts",
    "bank_wavefronts_reference",
    "marlin_transform_a",
    "marlin_transform_a_reference",
    "marlin_a_read_addresses",
    "marlin_a_write_addresses",
]

BANKS = 32
BANK_BYTES = 4


@dataclass(frozen=True)
class Swizzle:
    """CuTe-style XOR swizzle ``SW_bits_base_shift`` on integer offsets."""

    bits: int
    base: int
    shift: int

    def __post_init__(self):
        require_fields(self)
        require_int("bits", self.bits, minimum=0)
        require_int("base", self.base, minimum=0)
        require_int("shift", self.shift, minimum=0)

    @property
    def yyy_mask(self) -> int:
        """Source bits (the ones XORed in)."""
        return ((1 << self.bits) - 1) << (self.base + self.shift)

    @property
    def zzz_mask(self) -> int:
        """Target bits (the ones flipped)."""
        return ((1 << self.bits) - 1) << self.base

    def __call__(self, offset):
        x = np.asarray(offset, dtype=np.int64)
        out = x ^ ((x & self.yyy_mask) >> self.shift)
        return int(out) if out.ndim == 0 else out

    def __str__(self) -> str:
        return f"SW_{self.bits}_{self.base}_{self.shift}"


def _indices(name: str, i) -> np.ndarray:
    """Non-negative integer indices (a Python/NumPy int or an integer array) as int64, each below
    2**31 (shared-memory offsets are 32-bit)."""
    if isinstance(i, (bool, np.bool_)):
        raise DtypeError(f"{name}: must be integer indices; got {i!r}")
    x = np.asarray(int(i)) if isinstance(i, (int, np.integer)) else require_integer_array(name, i)
    if x.size and (int(x.min()) < 0 or int(x.max()) > MAX_ELEMENTS):
        raise FormatRuleError(f"{name}: indices must lie in [0, 2**31 - 1]; got range [{int(x.min())}, {int(x.max())}]")
    return x.astype(np.int64)


def marlin_transform_a(i, thread_k: int):
    """Marlin's ``transform_a``: logical int4 index ``i`` of an A stage -> physical int4 index.

    ``i`` int or int array; ``thread_k`` 64 or 128 (row stride ``D = thread_k / 8`` int4).
    Evaluates the kernel expression with C precedence: ``(D * row + i % D) ^ row = i ^ (i // D)``.
    """
    d = require_choice("thread_k", thread_k, (64, 128)) // 8
    x = _indices("i", i)
    row = x // d
    out = (d * row + x % d) ^ row
    return int(out) if out.ndim == 0 else out


def marlin_transform_a_reference(i: int, thread_k: int) -> int:
    """Plain twin of :func:`marlin_transform_a` for one index, from ``i ^ (i // D)``."""
    d = require_choice("thread_k", thread_k, (64, 128)) // 8
    if np.ndim(i) != 0:
        raise ShapeError(f"i: the plain twin takes one index; got shape {np.shape(i)}")
    i = int(_indices("i", i))
    return int(i) ^ (int(i) // d)


def _check_wavefront_args(byte_addresses, access_bytes) -> tuple[np.ndarray, int]:
    """Shared by :func:`bank_wavefronts` and its twin: 32 aligned non-negative byte addresses."""
    access_bytes = require_choice("access_bytes", access_bytes, (4, 8, 16))
    addr = _indices("byte_addresses", byte_addresses)
    if addr.shape != (32,):
        raise ShapeError(f"byte_addresses: must have shape (32,) (one per lane); got {addr.shape}")
    if np.any(addr % access_bytes):
        raise ShapeError(f"byte_addresses: must be aligned to access_bytes={access_bytes}; got {addr.tolist()}")
    return addr, access_bytes


def bank_wavefronts(byte_addresses, access_bytes: int) -> int:
    """Wavefronts a warp-wide shared-memory access needs (1 per phase when conflict-free).

    ``byte_addresses``: int array ``(32,)`` (one address per lane; each lane touches
    ``access_bytes`` contiguous bytes, aligned). ``access_bytes``: 4, 8 or 16 (use 16 for
    ``ldmatrix``: lanes 8p..8p+7 give the row addresses of matrix p). Returns the sum over
    phases of the maximum number of distinct 4-byte words requested from one bank.
    """
    addr, access_bytes = _check_wavefront_args(byte_addresses, access_bytes)
    if addr.shape != (32,):
        raise ShapeError(f"byte_addresses: must have shape (32,) (one per lane); got {addr.shape}")
    if np.any(addr % access_bytes):
        raise ShapeError(f"byte_addresses: must be aligned to access_bytes={access_bytes}; got {addr.tolist()}")
    lanes_per_phase = 128 // access_bytes
    words_per_lane = access_bytes // BANK_BYTES
    words = (addr[:, None] // BANK_BYTES + np.arange(words_per_lane)[None, :])  # (32, words_per_lane)
    total = 0
    for p in range(32 // lanes_per_phase):
        w = np.unique(words[p * lanes_per_phase:(p + 1) * lanes_per_phase].ravel())  # distinct words
        total += int(np.bincount(w % BANKS, minlength=BANKS).max())
    return total


def bank_wavefronts_reference(byte_addresses, access_bytes: int) -> int:
    """Plain-loop twin of :func:`bank_wavefronts` (sets per bank)."""
    byte_addresses, access_bytes = _check_wavefront_args(byte_addresses, access_bytes)
    lanes_per_phase = 128 // access_bytes
    total = 0
    for p in range(32 // lanes_per_phase):
        per_bank: dict[int, set[int]] = {}
        for lane in range(p * lanes_per_phase, (p + 1) * lanes_per_phase):
            for b in range(0, access_bytes, BANK_BYTES):
                word = (int(byte_addresses[lane]) + b) // BANK_BYTES
                per_bank.setdefault(word % BANKS, set()).add(word)
        total += max(len(v) for v in per_bank.values())
    return total


def _check_warp(warp: int) -> int:
    if warp >= 8:
        raise FormatRuleError(f"warp: Marlin's 256-thread blocks have warps 0..7; got {warp}")
    return warp


def _warps_k(thread_k: int) -> int:
    thread_n_blocks = 8 if thread_k == 128 else 16  # the compiled tiles: (128,128) and (64,256)
    return 8 // (thread_n_blocks // 4)


def marlin_a_read_addresses(thread_k: int, warp: int, substep: int = 0, m_block: int = 0,
                            swizzled: bool = True) -> np.ndarray:
    """Byte addresses (int64 ``(32,)``, relative to the stage) of one ``ldsm4`` of A.

    From the kernel: lane ``l`` of warp ``w`` reads logical int4
    ``a_sh_rd = D*(l % 16) + l // 16 + 2*(w // warps_n)`` (``w // warps_n`` = the warp's k index),
    plus ``2*warps_k*substep`` (``a_sh_rd_delta_o``) and ``16*D*m_block`` (``a_sh_rd_delta_i``);
    then ``transform_a`` when ``swizzled``. Lanes 8p..8p+7 address the rows of matrix p.
    """
    thread_k = require_choice("thread_k", thread_k, (64, 128))
    warp, substep, m_block = (require_int(n, v, minimum=0) for n, v in
                              (("warp", warp), ("substep", substep), ("m_block", m_block)))
    _check_warp(warp)
    require_bool("swizzled", swizzled)
    require_bounded("m_block", m_block, 1 << 20, what="block index")
    require_bounded("substep", substep, 1 << 20, what="sub-step")
    d = thread_k // 8
    wk = _warps_k(thread_k)
    lanes = np.arange(32)
    thread_n_blocks = 8 if thread_k == 128 else 16
    logical = d * (lanes % 16) + lanes // 16 + 2 * (warp // (thread_n_blocks // 4))
    logical = logical + 2 * wk * substep + 16 * d * m_block
    idx = marlin_transform_a(logical, thread_k) if swizzled else logical
    return np.asarray(idx, dtype=np.int64) * 16


def marlin_a_write_addresses(thread_k: int, warp: int, iteration: int = 0, swizzled: bool = True) -> np.ndarray:
    """Byte addresses (int64 ``(32,)``) of one warp's 16-byte ``cp.async`` writes of an A stage.

    Thread ``tid`` writes logical int4 ``D * (tid // D) + tid % D + D * (256 // D) * iteration``.
    """
    thread_k = require_choice("thread_k", thread_k, (64, 128))
    warp = _check_warp(require_int("warp", warp, minimum=0))
    iteration = require_int("iteration", iteration, minimum=0)
    require_bounded("iteration", iteration, 1 << 20, what="iteration index")
    require_bool("swizzled", swizzled)
    d = thread_k // 8
    tid = 32 * warp + np.arange(32)
    logical = d * (tid // d) + tid % d + d * (256 // d) * iteration
    idx = marlin_transform_a(logical, thread_k) if swizzled else logical
    return np.asarray(idx, dtype=np.int64) * 16
