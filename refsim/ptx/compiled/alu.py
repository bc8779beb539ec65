"""The C expressions of the ALU instructions: a generic emitter of the C forms the semantics families
define beside their handlers (refsim.ptx.semantics.table.C_TABLE). No instruction's semantics live here.

Spec
----
contract        ``alu(op, srcs, operands) -> [(C expression, value bits), ...]`` — one entry per
                destination type of the instruction's :class:`refsim.ptx.semantics.Handler`, each the
                unsigned bit pattern the handler returns (same width: 8-bit ``cvt`` results are 32-bit
                values extended from 8 bits, as the handler returns them). ``srcs`` are the sources
                already read as the handler's ``src_types``. ``None``: not compiled — the opcode has no
                C form, the instruction carries a modifier its C form does not read (``.cc`` carry
                chains, forms added to the semantics later), or the form returns None; the step runs
                the handler itself through Python (bit-identical by construction, slower).
where           each family module of refsim.ptx.semantics (integer, logic, compare, floating, convert)
                lists ``C_FORMS`` beside its ``BUILDERS``; the float forms pair each C twin with its
                NumPy model in ``floating.C_TWINS``; the C helpers live in refsim/native/ptx_runtime.h.
oracle          the handlers themselves: tests/ptx/compiled/test_conformance.py runs each form on
                tables of bit patterns (specials included) through both executors.
"""

from __future__ import annotations

from refsim.ptx.semantics import Op
from refsim.ptx.semantics.table import C_TABLE

__all__ = ["alu"]


def alu(op: Op, srcs: list[str], operands) -> list[tuple[str, int]] | None:
    """The destinations of ``op`` as C expressions (see the module spec), or None. ``operands``: the
    source operand tuples (for constants the C text does not show, lop3's immLut)."""
    entry = C_TABLE.get(op.opcode)
    if entry is None:
        return None
    mods, emit = entry
    if set(op.mods) - mods:
        return None
    return emit(op, srcs, operands)
