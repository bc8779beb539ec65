"""C-expression helpers for the C forms the semantics families define beside their NumPy handlers.

A family's ``C_FORMS`` maps an opcode to ``(modifiers, emit)``: ``emit(op, srcs, operands)`` returns
``[(C expression, width), ...]`` — one entry per destination of the handler, each the unsigned bit
pattern the handler returns — or None where the handler alone defines the form (the compiled executor
then runs the handler through Python). ``modifiers``: the ones the C reads; any other leaves the form to
its handler. refsim.ptx.compiled.alu emits what these return; the C helpers (``rt_*``) live in
refsim/native/ptx_runtime.h. Worked example, ``add.u32`` with sources ``a``, ``b``::

    cast(32, "(uint64_t)a + (uint64_t)b")  ->  "((uint32_t)((uint64_t)a + (uint64_t)b))"
"""

from __future__ import annotations

__all__ = ["CT", "ST", "mask", "cast", "int_value", "int_bits"]

#: the C type of a w-bit unsigned register value (predicates and 8-bit values are uint8_t)
CT = {1: "uint8_t", 8: "uint8_t", 16: "uint16_t", 32: "uint32_t", 64: "uint64_t"}
#: the C type of a w-bit signed value
ST = {8: "int8_t", 16: "int16_t", 32: "int32_t", 64: "int64_t"}


def mask(w: int) -> str:
    """The C literal of w one bits (``mask(16)`` -> ``"0xFFFFull"``)."""
    return "0xFFFFFFFFFFFFFFFFull" if w == 64 else f"0x{(1 << w) - 1:X}ull"


def cast(w: int, expr: str) -> str:
    """``expr`` wrapped to w bits: the cast to the w-bit unsigned C type."""
    return f"(({CT[w]})({expr}))"


def int_value(x: str, kind: str, w: int) -> str:
    """The exact value of the low w bits of x, as int64_t (signed) or uint64_t (unsigned)."""
    if kind == "s":
        return f"rt_sext((uint64_t){x}, {w})"
    return f"((uint64_t){x} & {mask(w)})"


def int_bits(v: str, kind: str, w: int) -> tuple[str, int]:
    """A value wrapped to w bits as a handler returns it; 8-bit results extend to 32 bits."""
    if w == 8:
        ext = f"((uint64_t)({v}) & 0xFF)"
        if kind == "s":
            ext = f"(({ext} & 0x80) ? ({ext} | 0xFFFFFF00ull) : {ext})"
        return f"((uint32_t){ext})", 32
    return cast(w, f"(uint64_t)({v})"), w
