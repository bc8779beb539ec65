"""Control flow, moves and address-space conversions: the engine-owned instructions that are not memory
accesses or barriers.

    bra L            pc = L for the selected threads (a guard makes it a divergent branch): declared as data,
                     :func:`bra_target` (refsim.ptx.dispatch ``Entry.jump``), which both executors read
    ret / exit       the thread ends (counts as arrived at later barriers; its cp.async copies land)
    call             refused: non-inlined device functions are not executed

Two kinds are written as data that both executors read (the compiled executor's C is derived from it,
refsim.ptx.compiled.instructions.DERIVED):

    FORMS[opcode](ins, where) -> Form    read the sources, evaluate one expression per destination
                                          (refsim.ptx.semantics.expr: NumPy here, C in the compiled executor)
      mov            register, immediate, special register or symbol address copies (d = a); ``{a, b}``
                     pack and unpack forms by the bit layout of refsim.ptx.semantics.move
      cvta{.to}      generic <-> .shared/.local addresses: d = a +/- the window base (refsim.ptx.memory.WINDOWS),
                     wrapped to the instruction's width; other spaces: d = a
      isspacep       whether a generic address lies in the window of a state space (global/const: in none)
      createpolicy   a cache policy: d = 0 (no effect on values)
    EFFECTS[opcode] -> Effect            what an instruction without values does to the launch
      NONE           membar fence prefetch prefetchu applypriority discard: nothing (lockstep warps, every
                     access visible at once)
      YIELD          nanosleep: the warp yields (scheduler), no time passes
      TRAP           trap brkpt: PtxMemoryError naming the first thread (the GPU reports a launch failure)

PTX ISA sections: Control Flow Instructions (bra, ret, exit, call), Miscellaneous Instructions (trap,
brkpt, nanosleep), Data Movement and Conversion Instructions (mov, cvta, isspacep, createpolicy, prefetch,
applypriority, discard), Parallel Synchronization and Communication Instructions (membar, fence).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np

from refsim.ptx import scheduler
from refsim.ptx.errors import PtxUnsupportedError, error
from refsim.ptx.memory import WINDOW_BYTES, WINDOWS
from refsim.ptx.operands import bits, reader, writer
from refsim.ptx.parse import Instruction
from refsim.ptx.semantics.expr import ZERO, Expr, compare, const, numpy_fn, numpy_pred, src
from refsim.ptx.semantics.move import pack_expr, unpack_exprs

__all__ = ["bra_target", "ret", "call", "Effect", "EFFECTS", "effect", "Result", "Form", "FORMS", "expression_step",
           "mov_form", "cvta_form", "isspacep_form", "createpolicy_form"]


def bra_target(ins: Instruction) -> int | None:
    """``bra{.uni} target``: the instruction index the active threads go to; None for an indirect
    branch (refused). The whole definition of ``bra``: refsim.ptx.dispatch declares it as the opcode's
    ``Entry.jump``, from which the interpreter's step and the compiled executor's C both follow."""
    target = ins.operands[-1]
    return target[1] if target[0] == "label" and isinstance(target[1], int) else None


def ret(L, ins: Instruction, idx: int):
    """``ret`` / ``exit`` at kernel level: the thread ends (sets the pc itself)."""
    return L.exit_threads


def call(L, ins: Instruction, idx: int):
    raise PtxUnsupportedError(f"{L.where(ins)}: calls of non-inlined device functions are not supported")


# ----------------------------------------------------------------------------------------------
# effects: instructions that change no value

class Effect(enum.Enum):
    """What an instruction of :data:`EFFECTS` does to the launch (it reads and writes no operand)."""

    NONE = "no effect: the step only advances"
    YIELD = "the executing warps yield to the scheduler; no time passes"
    TRAP = "a launch failure (refsim.ptx.errors.MESSAGES['trap']) naming the first thread that ran it"


#: Each effect-only opcode and its effect; the interpreter (:func:`effect`) and the compiled executor's C
#: (refsim.ptx.compiled.instructions) map the Effect. ``fence.proxy.async`` is refsim.ptx.hopper's.
EFFECTS = {
    **dict.fromkeys(("membar", "fence", "prefetch", "prefetchu", "applypriority", "discard"), Effect.NONE),
    "nanosleep": Effect.YIELD,
    "trap": Effect.TRAP, "brkpt": Effect.TRAP,
}


def effect(L, ins: Instruction, idx: int):
    """The step of an opcode of :data:`EFFECTS`."""
    e = EFFECTS[ins.opcode]
    if e is Effect.NONE:
        return lambda sel: None
    if e is Effect.YIELD:
        return lambda sel: scheduler.yield_warps(L, sel)

    def trap(sel):
        t = int(np.arange(L.T)[sel][0])
        raise error("trap", L.where(ins), who=L.who(t))
    return trap


# ----------------------------------------------------------------------------------------------
# forms: sources in, one expression per destination

@dataclass(frozen=True)
class Result:
    """One destination of a :class:`Form`: ``operand`` written as ``ptx_type`` with the value of ``expr``
    evaluated at ``width`` bits (its sources read as that many bits), wrapped to ``out`` bits; a
    ``"pred"`` destination holds the comparison ``expr`` (out 1)."""

    operand: tuple
    ptx_type: str
    expr: Expr
    width: int
    out: int

    @property
    def copies(self) -> int | None:
        """The source index when the value is that source as read (a bare source at its own width: both
        executors store it without evaluating), else None."""
        return self.expr.node[1] if self.expr.node[0] == "src" and self.out == self.width else None


@dataclass(frozen=True)
class Form:
    """An instruction as expressions: ``sources`` ((operand, ptx_type), ...) are read in order, then every
    :class:`Result` is written, in order."""

    sources: tuple
    results: tuple


def _width(t: str) -> int:
    return 1 if t == "pred" else bits(t)


def mov_form(ins: Instruction, where: str) -> Form:
    """``mov.t d, a``: d = a (PTX ISA 9.7.9.3); ``mov.b{w} d, {p0, ...}`` packs and ``mov.b{w} {p0, ...}, a``
    unpacks (refsim.ptx.semantics.move: part 0 in the lowest bits)."""
    if any(o[0] == "vec" for o in ins.operands):
        if len(ins.operands) != 2 or not ins.types:
            raise PtxUnsupportedError(f"{where}: malformed vector mov")
        t = ins.types[0]
        width = bits(t)
        d, a = ins.operands
        parts = d[1] if d[0] == "vec" else a[1]
        try:
            exprs = unpack_exprs(width, len(parts)) if d[0] == "vec" else (pack_expr(width, len(parts)),)
        except PtxUnsupportedError as e:
            raise PtxUnsupportedError(f"{where}: {e}") from None
        pt = f"b{width // len(parts)}"
        if d[0] == "vec":
            return Form(((a, t),), tuple(Result(o, pt, e, width, width // len(parts)) for o, e in zip(parts, exprs)))
        return Form(tuple((o, pt) for o in parts), (Result(d, t, exprs[0], width, width),))
    if len(ins.operands) != 2 or len(ins.types) != 1:
        raise PtxUnsupportedError(f"{where}: mov takes one type, a destination and a source")
    t = ins.types[0]
    w = _width(t)
    return Form(((ins.operands[1], t),), (Result(ins.operands[0], t, src(0), w, w),))


def cvta_form(ins: Instruction, where: str) -> Form:
    """``cvta.space.size d, a``: d = a + window(space); ``cvta.to.space.size d, a``: d = a - window(space);
    both modulo 2^size (a 32-bit conversion keeps the low bits). Spaces without a window: d = a."""
    t = ins.types[0]
    w = bits(t)
    mods = [m for m in ins.mods if m != "to"]
    space = mods[0].split("::")[0] if mods else "global"
    if space not in WINDOWS:
        e = src(0)
    else:
        e = src(0) - const(WINDOWS[space]) if "to" in ins.mods else src(0) + const(WINDOWS[space])
    return Form(((ins.operands[1], t),), (Result(ins.operands[0], t, e, w, w),))


def _inside(space: str) -> Expr:
    """The 64-bit source lies in the generic window of ``space``."""
    base = WINDOWS[space]
    return compare("<=", const(base), src(0)) & compare("<", src(0), const(base + WINDOW_BYTES))


def _in_no_window() -> Expr:
    e = None
    for space in WINDOWS:
        e = _inside(space) if e is None else e | _inside(space)
    return compare("==", e, ZERO)


#: isspacep.space p, a: the predicate of each state space over the generic address a
ISSPACEP = {**{space: _inside(space) for space in WINDOWS}, "global": _in_no_window(), "const": _in_no_window(),
            "param": ZERO}


def isspacep_form(ins: Instruction, where: str) -> Form:
    """``isspacep.space p, a``: whether generic address a (u64) lies in ``space`` (:data:`ISSPACEP`)."""
    space = ins.mods[0].split("::")[0] if ins.mods else None
    if space not in ISSPACEP:
        raise PtxUnsupportedError(f"{where}: isspacep needs a state space of {', '.join(ISSPACEP)}")
    return Form(((ins.operands[1], "u64"),), (Result(ins.operands[0], "pred", ISSPACEP[space], 64, 1),))


def createpolicy_form(ins: Instruction, where: str) -> Form:
    """``createpolicy... d, ...``: d = 0 (a cache policy has no effect on values; its sources are not read)."""
    return Form((), (Result(ins.operands[0], "b64", ZERO, 64, 64),))


#: The opcodes defined as a :class:`Form`; the interpreter runs :func:`expression_step`, the compiled
#: executor emits each Result's expression as C.
FORMS = {"mov": mov_form, "cvta": cvta_form, "isspacep": isspacep_form, "createpolicy": createpolicy_form}


def _evaluate(r: Result):
    """The NumPy function (values of the sources -> the value to write) of one Result that is not a copy."""
    if r.ptx_type == "pred":
        return numpy_pred(r.expr, r.width)
    fn = numpy_fn(r.expr, r.width, r.out)
    return lambda *vals: fn(*vals)[0]


def expression_step(L, ins: Instruction, idx: int):
    """The step of an opcode of :data:`FORMS`: read every source, then write every result."""
    form = FORMS[ins.opcode](ins, L.where(ins))
    readers = [reader(L, o, t, ins) for o, t in form.sources]
    outs = [(writer(L, r.operand, r.ptx_type, ins), r.copies, None if r.copies is not None else _evaluate(r))
            for r in form.results]
    if len(outs) == 1 and outs[0][1] is not None:                  # a copy (mov d, a; cvta.global)
        (w, i, _), = outs
        r = readers[i]
        return lambda sel: w(sel, r(sel))

    def run(sel):
        vals = [r(sel) for r in readers]
        for w, i, fn in outs:
            w(sel, vals[i] if fn is None else fn(*vals))
    return run
