"""The one opcode table of the semantics: every family's ``BUILDERS``, assembled here and nowhere else.

    family       opcodes
    integer      add sub mul mad div rem abs neg min max dp4a dp2a sad (+ float forms via floating)
    logic        popc clz brev bfind bfe bfi shl shr shf and or xor not cnot lop3 prmt
    compare      setp selp slct
    floating     fma rcp sqrt rsqrt ex2 lg2 sin cos tanh testp copysign
    convert      cvt
    warp         shfl vote ldmatrix mma redux

:func:`lookup` is called once per static instruction when a module is loaded; the engine's own
dispatch table (refsim.ptx.dispatch) routes every one of these opcodes to the handler it returns.
"""

from __future__ import annotations

from refsim.ptx.semantics import compare, convert, floating, integer, logic, warp
from refsim.ptx.semantics.handler import ARCHS, Builder, Handler, Op, unsupported
from refsim.archs import ARCH_SPECIFIC
from refsim.ptx.errors import PtxUnsupportedError

__all__ = ["TABLE", "C_TABLE", "lookup", "supported_opcodes"]

_FAMILIES = (integer, logic, compare, floating, convert, warp)


def _assemble(*families, attr: str = "BUILDERS") -> dict:
    table: dict = {}
    for fam in families:
        for name, entry in getattr(fam, attr, {}).items():
            if name in table:
                raise RuntimeError(f"opcode {name!r} is {'built' if attr == 'BUILDERS' else 'compiled'} by two "
                                   f"semantics families")
            if attr == "C_FORMS" and name not in fam.BUILDERS:
                raise RuntimeError(f"opcode {name!r}: its C form and its handler live in different families")
            table[name] = entry
    return table


#: opcode -> ``builder(op, arch) -> Handler``
TABLE: dict[str, Builder] = _assemble(*_FAMILIES)
#: opcode -> ``(modifiers its C reads, emit(op, srcs, operands))``: the C form each family defines beside
#: its handler (refsim.ptx.semantics.cexpr); refsim.ptx.compiled.alu emits it
C_TABLE: dict = _assemble(*_FAMILIES, attr="C_FORMS")


def lookup(op: Op, *, arch: str = "sm_80") -> Handler:
    """The :class:`Handler` executing ``op`` on ``arch`` (one of :data:`ARCHS`, or an architecture-specific
    target of :data:`refsim.archs.ARCH_SPECIFIC` such as ``"sm_120a"``: its architecture plus the forms that
    exist there only).

    Raises :class:`refsim.ptx.PtxUnsupportedError` naming the instruction for an unknown opcode,
    an unsupported modifier/type combination, or an implementation-defined result (``.approx``).
    """
    if not isinstance(op, Op):
        raise PtxUnsupportedError(f"lookup: op must be a refsim.ptx.semantics.Op; got {type(op).__name__}")
    if arch not in ARCHS and arch not in ARCH_SPECIFIC:
        raise PtxUnsupportedError(f"{op}: arch must be one of {', '.join(ARCHS + tuple(ARCH_SPECIFIC))}; "
                                  f"got {arch!r}")
    builder = TABLE.get(op.opcode)
    if builder is None:
        raise unsupported(op, f"opcode '{op.opcode}' is not an instruction refsim's semantics execute "
                              f"(supported: {', '.join(sorted(TABLE))})")
    return builder(op, arch)


def supported_opcodes() -> tuple[str, ...]:
    """Every opcode the table knows (modifier/type support is decided per instruction by lookup)."""
    return tuple(sorted(TABLE))
