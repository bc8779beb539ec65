"""``mov`` with vector-brace operands: pack parts into one register, or unpack one register into parts.

The operand shape (``{a, b}``) decides the form, not the opcode, so these are not handlers: the bit
layout is written once, as expressions (refsim.ptx.semantics.expr), from which refsim.ptx.control's
mov derives the interpreter's NumPy and the compiled executor's C. PTX ISA, Data Movement and
Conversion Instructions: mov. Part 0 is the lowest bits::

    mov.b32 %r1, {%h0, %h1}      %r1 = h1 << 16 | h0          (pack, 2 x 16 -> 32)
    mov.b64 {%r2, %r3}, %rd1     %r2 = rd1[31:0], %r3 = rd1[63:32]   (unpack, 64 -> 2 x 32)

    pack  (width w, n parts of b = w/n bits):  d = OR_i ((p_i & (2^b - 1)) << i*b)
    unpack:                                     p_i = (a >> i*b) wrapped to b bits

Forms: w in 16, 32, 64; n in 2, 4; b >= 8.
"""

from __future__ import annotations

import numpy as np

from refsim.ptx.errors import PtxUnsupportedError
from refsim.ptx.semantics.expr import Expr, const, numpy_fn, src

__all__ = ["mov_pack", "mov_unpack", "pack_expr", "unpack_exprs"]


def _check(width: int, n: int, verb: str) -> int:
    """Bits per part of a PTX mov form of ``n`` parts in ``width`` bits; else PtxUnsupportedError."""
    if width not in (16, 32, 64) or n not in (2, 4) or width // n < 8:
        raise PtxUnsupportedError(f"mov.b{width}: {verb} {n} parts is not a PTX mov form")
    return width // n


def pack_expr(width: int, n: int) -> Expr:
    """``mov.b{width} d, {p0, ..., p(n-1)}`` over sources p_i (read as b{width/n}), at width ``width``."""
    b = _check(width, n, "packing")
    e = None
    for i in range(n):
        part = (src(i) & const((1 << b) - 1)) << (i * b)
        e = part if e is None else e | part
    return e


def unpack_exprs(width: int, n: int) -> tuple[Expr, ...]:
    """``mov.b{width} {p0, ..., p(n-1)}, a``: part i of source a (read as b{width}), at width ``width``;
    each result wraps to ``width / n`` bits."""
    b = _check(width, n, "unpacking into")
    return tuple(src(0) >> (i * b) for i in range(n))


def mov_pack(parts, width: int) -> np.ndarray:
    """``mov.b{width} d, {p0, p1, ...}``: p0 in the lowest bits.

    parts: sequence of n unsigned arrays of width // n bits each (same shape; wider ones give their low
    bits); width 16, 32 or 64. Returns the packed unsigned array of ``width`` bits.
    """
    return numpy_fn(pack_expr(width, len(parts)), width)(*parts)[0]


def mov_unpack(value: np.ndarray, width: int, n: int) -> tuple[np.ndarray, ...]:
    """``mov.b{width} {p0, ..., p(n-1)}, a``: inverse of :func:`mov_pack`; p0 = the lowest bits.

    value: unsigned array of ``width`` bits. Returns n arrays of width // n bits, the shape of ``value``."""
    return tuple(numpy_fn(e, width, out=width // n)(value)[0] for e in unpack_exprs(width, n))
