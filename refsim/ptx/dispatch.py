"""The one dispatch table of refsim.ptx: every opcode the engine executes, and who executes it.

    OPCODES[opcode] = Entry(build, advances, handler, jump)
        build(L, ins, idx) -> run(sel)   built once per static instruction of a launch
        advances                          the engine moves the pc past the instruction after ``run``
                                          (False: ``run`` sets the pc itself: bra, ret/exit, bar)
        handler                           a refsim.ptx.semantics handler is looked up at load time
                                          (its ``fn`` does the arithmetic; the engine moves operands)
        jump                              ``jump(ins) -> target or None``: the opcode is a jump, its
                                          whole effect ``pc = target`` for the active threads (bra:
                                          control.bra_target); :func:`jump` builds the step, and the
                                          compiled executor emits its C from the same declaration

    engine-owned   control.py   bra ret exit call; as data both executors read: FORMS (mov cvta isspacep
                                createpolicy) and EFFECTS (trap brkpt nanosleep membar fence prefetch
                                prefetchu applypriority discard)
                   barriers.py  bar barrier
                   memory_ops   ld ldu st atom red cp ldmatrix (address side; layout from semantics)
                   hopper       mbarrier elect griddepcontrol wgmma setmaxnreg stmatrix, cp.async.bulk* (refsim.ptx.hopper: Python
                                definitions the compiled executor runs through a LaunchView)
    semantics      every opcode of refsim.ptx.semantics.table (alu: elementwise over threads;
                   warp: over (W, 32) lanes with the active mask: shfl, vote, redux, mma)

:func:`load` checks every instruction of a kernel against this table when a module is loaded (an
opcode absent from it, or a form its semantics refuse -> :class:`PtxUnsupportedError` naming kernel,
line, column and instruction); :func:`build` makes the step function of one instruction, with its
guard predicate (``@p`` / ``@!p``) applied.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from refsim.ptx import barriers, checks, control, hopper, memory_ops, semantics
from refsim.ptx.errors import PtxUnsupportedError, error
from refsim.ptx.operands import flatten, reader, split_operands, writer
from refsim.ptx.parse import Instruction, Kernel

__all__ = ["Entry", "OPCODES", "ENGINE_OPCODES", "load", "build", "form", "jump"]


@dataclass(frozen=True)
class Entry:
    """How one opcode executes (see the module spec)."""

    build: Callable
    advances: bool = True
    handler: bool = False
    jump: Callable | None = None


def jump(L, ins: Instruction, idx: int):
    """The step of an opcode declared by its ``Entry.jump``: the active threads go to the target."""
    t = OPCODES[ins.opcode].jump(ins)
    if t is None:
        raise PtxUnsupportedError(f"{L.where(ins)}: indirect branches are not supported")
    pc = L.pc

    def run(sel):
        pc[sel] = t
    return run


def _semantic(L, ins: Instruction, idx: int):
    """An instruction whose arithmetic is a semantics handler: operands in, destinations out."""
    h = L.handlers[idx]
    if h.kind == "warp":
        return _warp(L, ins, h)
    return _alu(L, ins, h)


def _alu(L, ins: Instruction, h):
    dsts, srcs = split_operands(L, ins, h)
    readers = [reader(L, o, t, ins) for o, t in zip(srcs, h.src_types)]
    writers = [writer(L, o, t, ins) for o, t in zip(dsts, h.dst_types)]
    fn = h.fn

    def run(sel):
        outs = fn(*[r(sel) for r in readers])
        for w, o in zip(writers, outs):
            w(sel, o)
    return run


def _warp(L, ins: Instruction, h):
    """Warp-level handlers: shfl / vote / redux (fn(*srcs, active)) and mma (fn(a, b, c))."""
    if ins.opcode == "mma":
        groups = [list(flatten([o])) for o in ins.operands]
        readers = [[reader(L, o, "b32", ins) for o in g] for g in groups[1:]]
        writers = [writer(L, o, "b32", ins) for o in groups[0]]
        fn = h.fn

        def run_mma(sel):
            warps, lanes, active = L.warps(sel)
            if not active.all():
                raise error("partial_mma", L.where(ins))
            ops = [np.stack([np.broadcast_to(r(lanes), lanes.shape) for r in g], axis=-1) for g in readers]
            d, = fn(*ops)
            act = lanes[active]
            for j, w in enumerate(writers):
                w(act, d[..., j][active])
        return run_mma
    # shfl.sync / vote.sync: the last operand is the membermask, intersected with the active lanes
    member = reader(L, ins.operands[-1], "b32", ins) if "sync" in ins.mods else None
    body = ins if member is None else Instruction(ins.opcode, ins.mods, ins.types, ins.operands[:-1],
                                                  ins.guard, ins.line, ins.column, ins.text)
    dsts, srcs = split_operands(L, body, h)
    readers = [reader(L, o, t, ins) for o, t in zip(srcs, h.src_types)]
    writers = [writer(L, o, t, ins) for o, t in zip(dsts, h.dst_types)]
    fn = h.fn
    lane_bit = np.uint32(1) << np.arange(32, dtype=np.uint32)

    def run(sel):
        warps, lanes, active = L.warps(sel)
        if member is not None:
            active = active & ((np.broadcast_to(member(lanes), lanes.shape) & lane_bit) != 0)
        outs = fn(*[np.broadcast_to(r(lanes), lanes.shape) for r in readers], active)
        act = lanes[active]
        for w, o in zip(writers, outs):
            w(act, np.broadcast_to(o, lanes.shape)[active])
    return run


_ENGINE = {
    # control flow, moves, address spaces, effect-only instructions (control.py)
    "bra": Entry(jump, advances=False, jump=control.bra_target),
    "ret": Entry(control.ret, advances=False),
    "exit": Entry(control.ret, advances=False),
    "call": Entry(control.call),
    **{op: Entry(control.expression_step) for op in control.FORMS},
    **{op: Entry(control.effect) for op in control.EFFECTS},
    "fence": Entry(lambda L, ins, idx: (hopper.bulk.fence_proxy_async if hopper.is_proxy_async_fence(ins)
                                        else control.effect)(L, ins, idx)),
    # barriers (barriers.py)
    "bar": Entry(barriers.bar, advances=False),
    "barrier": Entry(lambda L, ins, idx: (hopper.cluster.barrier if "cluster" in ins.mods else barriers.bar)(L, ins, idx),
                     advances=False),
    # memory (memory_ops.py)
    "ld": Entry(memory_ops.ld),
    "ldu": Entry(memory_ops.ld),
    "st": Entry(memory_ops.st),
    "atom": Entry(memory_ops.atom),
    "red": Entry(memory_ops.red),
    "cp": Entry(lambda L, ins, idx: (hopper.bulk.build if "bulk" in ins.mods else memory_ops.cp)(L, ins, idx)),
    # sm_90 instructions defined in refsim.ptx.hopper (the compiled executor calls back into them)
    **{op: Entry(fn, advances=op not in hopper.SETS_PC) for op, fn in hopper.OPCODES.items()},
    "ldmatrix": Entry(memory_ops.ldmatrix, handler=True),
}

#: The opcodes the engine executes itself (the rest go to a semantics handler).
ENGINE_OPCODES = frozenset(_ENGINE)

#: Every opcode refsim.ptx executes: the engine's own and every semantics opcode.
OPCODES: dict[str, Entry] = {
    **{op: Entry(_semantic, handler=True) for op in semantics.supported_opcodes()},
    **_ENGINE,
}


def _at(k: Kernel, ins: Instruction) -> str:
    return f"kernel {k.name}, PTX line {ins.line}, column {ins.column} `{ins.text}`"


def load(k: Kernel, arch: str) -> dict:
    """The semantics handlers of kernel ``k`` on ``arch``, by instruction index; every instruction is
    checked against :data:`OPCODES` (first refusal -> :class:`PtxUnsupportedError` naming the line)."""
    handlers, cache = {}, {}
    for i, ins in enumerate(k.instructions):
        entry = OPCODES.get(ins.opcode)
        if entry is None:
            raise PtxUnsupportedError(f"{_at(k, ins)}: opcode '{ins.opcode}' is not an instruction refsim "
                                      f"executes (supported: {', '.join(sorted(OPCODES))})")
        if entry.handler:
            key = (ins.opcode, ins.mods, ins.types)
            if key not in cache:              # handlers are pure: one per distinct instruction
                try:
                    cache[key] = semantics.lookup(semantics.Op(*key), arch=arch)
                except PtxUnsupportedError as e:
                    raise PtxUnsupportedError(f"{_at(k, ins)}: {e}") from None
            handlers[i] = cache[key]
    return handlers


def build(L, idx: int, ins: Instruction):
    """The step function ``run(sel)`` of instruction ``idx`` of the launch ``L``: its table entry's
    body, under the instruction's guard, moving the pc past it unless the body does."""
    entry = OPCODES[ins.opcode]
    return _guarded(L, ins, entry.build(L, ins, idx), entry.advances)


def form(k: Kernel, ins: Instruction) -> tuple:
    """What building instruction ``ins`` of ``k`` depends on, and nothing else: opcode, modifiers,
    types, the guard's register type, and the operands with every register replaced by its declared
    type and width (immediates, symbols, specials, offsets as written). Two instructions of one form
    build alike or are refused alike, so checking a kernel builds one of each (``Launch(check=True)``)."""
    regs = k.registers

    def of(o):
        kind = o[0]
        if kind == "reg":
            r = regs[o[1]]
            return ("reg", r.type, r.bits, o[2])
        if kind in ("vec", "pair"):
            return (kind, tuple(of(x) for x in o[1]))
        if kind == "addr":
            return ("addr", None if o[1] is None else of(o[1]), o[2])
        if kind == "label":
            return ("label", isinstance(o[1], int))
        return o
    guard = None if ins.guard is None else (regs[ins.guard[1]].type, ins.guard[2])
    return (ins.opcode, ins.mods, ins.types, guard, tuple(of(o) for o in ins.operands))


def _guarded(L, ins: Instruction, run, advance: bool):
    pc = L.pc
    if ins.guard is None:
        if advance:
            def step(sel):
                run(sel)
                pc[sel] += 1
            return step
        return run
    greg = L.regs[ins.guard[1]]
    neg = ins.guard[2]
    poison = L.poison
    T = L.T

    def gstep(sel):
        g = greg[sel]
        if poison:
            checks.guard_read(L, ins, sel)
        if neg:
            g = ~g
        idx = np.arange(T) if isinstance(sel, slice) else sel
        act = idx[g]
        if act.size:
            run(act)
        if advance:
            pc[idx] += 1
        else:
            pc[idx[~g]] += 1
    return gstep
