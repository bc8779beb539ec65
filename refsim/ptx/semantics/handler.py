"""The interface every semantics family implements: :class:`Op` in, :class:`Handler` out.

A family module (integer.py, logic.py, compare.py, floating.py, convert.py, warp.py) imports only this
module (and its helpers), defines ``builder(op, arch) -> Handler`` functions and lists them in its
``BUILDERS`` dict; refsim.ptx.semantics.table assembles the one opcode table from those dicts.

    "fma.rn.f16x2 %r1, %r2, %r3, %r4"  --parse-->  Op("fma", ("rn",), ("f16x2",))
        --table.lookup-->  Handler(fn=<fma f16x2 rn>, dst_types=("f16x2",), src_types=("f16x2",)*3,
                                   kind="alu", isa="PTX ISA, Half Precision Floating Point Instructions: fma ...")
        --engine-->  d = fn(a, b, c)[0]   (uint32 arrays, one element per thread)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from refsim.ptx.arch import ARCHS as _ARCH_FACTS
from refsim.ptx.errors import PtxUnsupportedError

__all__ = ["Op", "Handler", "Builder", "isa", "unsupported", "ARCHS"]

#: The architectures a handler can be built for (the table of refsim.ptx.arch).
ARCHS = tuple(_ARCH_FACTS)


@dataclass(frozen=True)
class Op:
    """One static PTX instruction, stripped of operands.

    opcode: ``"add"``; mods: modifiers in PTX order without dots and without types
    (``add.rn.ftz.f32`` -> ``("rn", "ftz")``); types: the type suffixes in PTX order
    (``cvt.rn.f16.f32`` -> ``("f16", "f32")``).
    """

    opcode: str
    mods: tuple[str, ...] = ()
    types: tuple[str, ...] = ()

    def __str__(self) -> str:
        return ".".join((self.opcode,) + tuple(self.mods) + tuple(self.types))


@dataclass(frozen=True)
class Handler:
    """What the engine calls for one static instruction (see the semantics package spec).

    fn: ``fn(*sources) -> tuple of destinations``; dst_types / src_types: the PTX type each operand
    is read or written as; kind: ``"alu"`` (elementwise over threads) or ``"warp"`` (over (W, 32)
    lanes); isa: the PTX ISA section implemented.
    """

    fn: Callable[..., tuple]
    dst_types: tuple[str, ...]
    src_types: tuple[str, ...]
    kind: str
    isa: str


Builder = Callable[[Op, str], Handler]

_TITLES = {
    "integer-arithmetic": "Integer Arithmetic Instructions",
    "extended-precision-integer-arithmetic": "Extended-Precision Integer Arithmetic Instructions",
    "logic-and-shift": "Logic and Shift Instructions",
    "comparison-and-selection": "Comparison and Selection Instructions",
    "half-precision-comparison": "Half Precision Comparison Instructions",
    "data-movement-and-conversion": "Data Movement and Conversion Instructions",
    "floating-point": "Floating Point Instructions",
    "half-precision-floating-point": "Half Precision Floating Point Instructions",
    "parallel-synchronization-and-communication": "Parallel Synchronization and Communication Instructions",
    "warp-level-matrix": "Warp Level Matrix Multiply-Accumulate Instructions",
}


def isa(category: str, name: str) -> str:
    """The PTX ISA section of an instruction, by title and documentation anchor (stable across ISA
    versions, unlike section numbers): ``isa("logic-and-shift", "lop3")`` ->
    ``"PTX ISA, Logic and Shift Instructions: lop3 (#logic-and-shift-instructions-lop3)"``."""
    return f"PTX ISA, {_TITLES[category]}: {name.replace('-', '.')} (#{category}-instructions-{name})"


def unsupported(op: Op, why: str) -> PtxUnsupportedError:
    """The error every builder raises for an instruction refsim does not execute exactly."""
    return PtxUnsupportedError(f"{op}: {why}")
