"""Control flow, moves and address-space conversions: the engine-owned instructions that are not memory
accesses or barriers.

    bra L            pc = L for the selected threads (a guard makes it a divergent branch): declared as data,
                     :func:`bra_target` (refsim.ptx.dispatch ``Entry.jump``), which both executors read
    ret / exit       the thread ends (counts as arrived at later barriers; its cp.async copies land)
    trap / brkpt     PtxMemoryError (the GPU reports a launch failure)
    call             refused: non-inlined device functions are not executed
    nanosleep        the warp yields (scheduler), no time passes
    createpolicy     a cache policy: 0 (no effect on values)
    mov              register, immediate, special register or symbol address copies; ``{a, b}`` pack and
                     unpack forms through :func:`refsim.ptx.semantics.mov_pack` / ``mov_unpack``
    cvta{.to}        generic <-> .shared/.local addresses: +/- the window base of refsim.ptx.memory
    isspacep         whether a generic address lies in the window of a state space

PTX ISA sections: Control Flow Instructions (bra, ret, exit, call), Miscellaneous Instructions (trap,
brkpt, nanosleep), Data Movement and Conversion Instructions (mov, cvta, isspacep, createpolicy).
"""

from __future__ import annotations

import numpy as np

from refsim.ptx import scheduler, semantics
from refsim.ptx.errors import PtxMemoryError, PtxUnsupportedError, error
from refsim.ptx.memory import LOCAL_WINDOW, SHARED_WINDOW, WINDOW_BYTES
from refsim.ptx.operands import bits, dtype, reader, writer
from refsim.ptx.parse import Instruction

__all__ = ["bra_target", "ret", "trap", "call", "nanosleep", "createpolicy", "mov", "cvta", "isspacep"]


def bra_target(ins: Instruction) -> int | None:
    """``bra{.uni} target``: the instruction index the active threads go to; None for an indirect
    branch (refused). The whole definition of ``bra``: refsim.ptx.dispatch declares it as the opcode's
    ``Entry.jump``, from which the interpreter's step and the compiled executor's C both follow."""
    target = ins.operands[-1]
    return target[1] if target[0] == "label" and isinstance(target[1], int) else None


def ret(L, ins: Instruction, idx: int):
    """``ret`` / ``exit`` at kernel level: the thread ends (sets the pc itself)."""
    return L.exit_threads


def trap(L, ins: Instruction, idx: int):
    def run(sel):
        t = int(np.arange(L.T)[sel][0])
        raise error("trap", L.where(ins), who=L.who(t))
    return run


def call(L, ins: Instruction, idx: int):
    raise PtxUnsupportedError(f"{L.where(ins)}: calls of non-inlined device functions are not supported")


def nanosleep(L, ins: Instruction, idx: int):
    return lambda sel: scheduler.yield_warps(L, sel)


def createpolicy(L, ins: Instruction, idx: int):
    w = writer(L, ins.operands[0], "b64", ins)
    return lambda sel: w(sel, np.uint64(0))


def mov(L, ins: Instruction, idx: int):
    """``mov.t d, a``: a copy (PTX ISA 9.7.9.3); pack/unpack forms go to the semantics."""
    if any(o[0] == "vec" for o in ins.operands):
        return _mov_vector(L, ins)
    if len(ins.operands) != 2 or len(ins.types) != 1:
        raise PtxUnsupportedError(f"{L.where(ins)}: mov takes one type, a destination and a source")
    t = ins.types[0]
    r = reader(L, ins.operands[1], t, ins)
    w = writer(L, ins.operands[0], t, ins)
    return lambda sel: w(sel, r(sel))


def _mov_vector(L, ins: Instruction):
    """``mov.b32 d, {a, b}`` (pack) and ``mov.b64 {a, b}, d`` (unpack) through the semantics."""
    if len(ins.operands) != 2 or not ins.types:
        raise PtxUnsupportedError(f"{L.where(ins)}: malformed vector mov")
    width = bits(ins.types[0])
    d, a = ins.operands
    if d[0] == "vec":
        n = len(d[1])
        r = reader(L, a, ins.types[0], ins)
        ws = [writer(L, o, f"b{width // n}", ins) for o in d[1]]
        semantics.mov_unpack(np.zeros(1, dtype(width)), width, n)   # validates the form now

        def run_unpack(sel):
            for w, v in zip(ws, semantics.mov_unpack(r(sel), width, n)):
                w(sel, v)
        return run_unpack
    n = len(a[1])
    rs = [reader(L, o, f"b{width // n}", ins) for o in a[1]]
    w = writer(L, d, ins.types[0], ins)
    semantics.mov_pack([np.zeros(1, dtype(width // n))] * n, width)

    def run_pack(sel):
        w(sel, semantics.mov_pack([r(sel) for r in rs], width))
    return run_pack


def cvta(L, ins: Instruction, idx: int):
    t = ins.types[0]
    nbits = bits(t)
    mods = [m for m in ins.mods if m != "to"]
    space = mods[0].split("::")[0] if mods else "global"
    to = "to" in ins.mods
    delta = {"shared": SHARED_WINDOW, "local": LOCAL_WINDOW}.get(space, 0)
    r = reader(L, ins.operands[1], t, ins)
    w = writer(L, ins.operands[0], t, ins)
    mask = (1 << nbits) - 1

    def run(sel):
        v = r(sel).astype(np.uint64)
        v = (v - np.uint64(delta)) if to else (v + np.uint64(delta))
        w(sel, (v & np.uint64(mask)).astype(dtype(nbits)))
    return run


def isspacep(L, ins: Instruction, idx: int):
    space = ins.mods[0].split("::")[0]
    r = reader(L, ins.operands[1], "u64", ins)
    w = writer(L, ins.operands[0], "pred", ins)

    def run(sel):
        a = np.asarray(r(sel)).astype(np.uint64)
        sh = (a >= SHARED_WINDOW) & (a < SHARED_WINDOW + WINDOW_BYTES)
        lo = (a >= LOCAL_WINDOW) & (a < LOCAL_WINDOW + WINDOW_BYTES)
        res = {"shared": sh, "local": lo, "global": ~sh & ~lo, "const": ~sh & ~lo,
               "param": np.zeros_like(sh)}[space]
        w(sel, res)
    return run
