"""Integer words as the semantics handlers see them: bit-pattern helpers shared by the integer families.

A w-bit register value is an unsigned array (uint16/32/64). ``ubits`` widens it to uint64 masked to w
bits, ``sval`` reads it as a two's-complement int64, ``wrap`` reduces any int64/uint64 result modulo
2^w back to the w-bit dtype::

    w = 16, bits 0xFFFE:  ubits -> 65534,  sval -> -2,  wrap(-2 + 5) -> 0x0003
"""

from __future__ import annotations

import numpy as np

from refsim.ptx.semantics.handler import Handler, Op, unsupported

__all__ = ["UINT", "INT_TYPES", "FLOAT_TYPES", "ubits", "sval", "wrap", "int_type", "value", "check_mods",
           "alu", "is_float"]

UINT = {16: np.uint16, 32: np.uint32, 64: np.uint64}
INT_TYPES = {f"{k}{w}": (k, w) for k in "sub" for w in (16, 32, 64)}
FLOAT_TYPES = ("f16", "bf16", "f32", "f64", "f16x2", "bf16x2")


def ubits(x, w: int) -> np.ndarray:
    """Bits of x as uint64, masked to w bits."""
    return np.asarray(x).astype(np.uint64) & np.uint64((1 << w) - 1) if w < 64 else np.asarray(x).astype(np.uint64)


def sval(x, w: int) -> np.ndarray:
    """Two's-complement value of the low w bits of x as int64."""
    u = ubits(x, w)
    if w == 64:
        return u.view(np.int64) if u.ndim else np.int64(u.astype(np.int64))
    sign = np.uint64(1 << (w - 1))
    return (u ^ sign).astype(np.int64) - np.int64(1 << (w - 1))


def wrap(v, w: int) -> np.ndarray:
    """An int64/uint64 array reduced modulo 2^w, as the w-bit unsigned dtype."""
    v = np.asarray(v)
    if v.dtype != np.uint64:
        v = v.astype(np.int64).astype(np.uint64)
    return (v & np.uint64((1 << w) - 1) if w < 64 else v).astype(UINT[w])


def int_type(op: Op, t: str) -> tuple[str, int]:
    """(kind, width) of an integer type: ``"s32"`` -> ("s", 32); anything else refused."""
    if t not in INT_TYPES:
        raise unsupported(op, f"type .{t} is not an integer type of 16, 32 or 64 bits")
    return INT_TYPES[t]


def value(x, kind: str, w: int) -> np.ndarray:
    """Numeric value of bits under the type (int64 for s, uint64 for u/b)."""
    return sval(x, w) if kind == "s" else ubits(x, w)


def check_mods(op: Op, allowed: set[str]) -> set[str]:
    """The modifiers of ``op``, refused when any is outside ``allowed``."""
    extra = set(op.mods) - allowed
    if extra:
        raise unsupported(op, f"modifier(s) {', '.join('.' + m for m in sorted(extra))} not supported here")
    return set(op.mods)


def alu(fn, dst, src, isa) -> Handler:
    """An elementwise (per-thread) :class:`Handler`."""
    return Handler(fn=fn, dst_types=tuple(dst), src_types=tuple(src), kind="alu", isa=isa)


def is_float(op: Op) -> bool:
    """Whether the last type of ``op`` is a floating-point type (the float family handles it)."""
    return bool(op.types) and op.types[-1] in FLOAT_TYPES
