"""``mov`` with vector-brace operands: pack parts into one register, or unpack one register into parts.

The operand shape (``{a, b}``) decides the form, not the opcode, so these are plain functions the
engine calls (refsim.ptx.control) rather than handlers. PTX ISA, Data Movement and Conversion
Instructions: mov. Part 0 is the lowest bits::

    mov.b32 %r1, {%h0, %h1}      %r1 = h1 << 16 | h0          (pack, 2 x 16 -> 32)
    mov.b64 {%r2, %r3}, %rd1     %r2 = rd1[31:0], %r3 = rd1[63:32]   (unpack, 64 -> 2 x 32)
"""

from __future__ import annotations

import numpy as np

from refsim.ptx.errors import PtxUnsupportedError

__all__ = ["mov_pack", "mov_unpack"]

_UINT = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}


def mov_pack(parts, width: int) -> np.ndarray:
    """``mov.b{width} d, {p0, p1, ...}``: p0 in the lowest bits.

    parts: sequence of n unsigned arrays of width // n bits each (same shape); width 16, 32 or 64.
    Returns the packed unsigned array of ``width`` bits.
    """
    n = len(parts)
    if width not in (16, 32, 64) or n not in (2, 4) or width // n < 8:
        raise PtxUnsupportedError(f"mov.b{width}: packing {n} parts is not a PTX mov form")
    bits = width // n
    out = np.zeros(np.broadcast_shapes(*(np.shape(p) for p in parts)), np.uint64)
    for i, p in enumerate(parts):
        out |= (np.asarray(p).astype(np.uint64) & np.uint64((1 << bits) - 1)) << np.uint64(i * bits)
    return out.astype(_UINT[width])


def mov_unpack(value: np.ndarray, width: int, n: int) -> tuple[np.ndarray, ...]:
    """``mov.b{width} {p0, ..., p(n-1)}, a``: inverse of :func:`mov_pack`; p0 = the lowest bits."""
    if width not in (16, 32, 64) or n not in (2, 4) or width // n < 8:
        raise PtxUnsupportedError(f"mov.b{width}: unpacking into {n} parts is not a PTX mov form")
    bits = width // n
    v = np.asarray(value).astype(np.uint64)
    return tuple(((v >> np.uint64(i * bits)) & np.uint64((1 << bits) - 1)).astype(_UINT[bits])
                 for i in range(n))
