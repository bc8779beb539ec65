"""Pure loops: a warp that comes back to the same backward branch in the same state, having executed
nothing but register arithmetic in between, loops forever: a :class:`PtxDeadlockError` (both executors).

The rule (``$L: bra $L;`` is what nvcc emits for a wait on a non-volatile shared flag)::

    pure instruction   a semantics handler of kind "alu", or bra, mov, cvta, isspacep, createpolicy,
                       nanosleep, prefetch{u}, applypriority, discard -- with no %clock, %clock64 or
                       %globaltimer operand. Everything else is impure: every memory access (ld of
                       any space, st, atom, red, cp.async, ldmatrix), bar/barrier/membar/fence,
                       ret/exit, trap, the warp-level handlers (shfl, vote, redux, mma).
    backward branch    ``bra`` at p whose target t <= p (every loop passes one)
    W(p)               the registers named by any operand or guard of instructions t..p (every
                       register the kernel names once the loops together span MAX_LOOP_WALK)
    state of a warp    at p: the pc of each of its 32 lanes and the registers W(p) of each lane

    kind[p]            0 pure, 1 impure, 2 pure backward branch (:func:`kinds`; W(p): :func:`registers`)
    per warp           head (the backward branch last visited, -1: none), dirty (an impure instruction
                       since), c (clean visits of head), ref (the state at the last power-of-two c)
    step at p          kind 1: every warp of the step is dirty
                       kind 2, before the branch runs, per warp of the step:
                           dirty or head != p -> head = p, clean, c = 0
                           else               -> c += 1; c >= 2 and state == ref: the warp loops forever;
                                                 c a power of two: ref = state   (Brent's cycle finding)
                       any warp looping -> PtxDeadlockError naming the loop's lines and the warps

Why it is sound: a warp executes only its lowest-pc lanes (refsim.ptx.scheduler), so between two
visits of p with no other backward branch visited (head unchanged) it executes only instructions
t..p, which write only W(p); a lane parked at a barrier that another warp releases changes its pc,
which the state holds. From an equal state it read nothing but its own registers (no memory, no clock,
no other lane), so it repeats the same instructions forever, whatever the other warps do. A spin that
reads memory (``ld.volatile`` of a flag another block sets) is impure and left to the yield rule of
refsim.ptx.scheduler.

Bounds: a loop whose state sequence enters a cycle of length L after m clean visits is found within
4 max(m, L) + 2 visits (the spin above: on its third). Costs nothing on loops with a memory access;
a pure loop pays one comparison of its state per iteration (it stops at the first differing register,
the one that differed last time) and a copy at power-of-two visits. A loop whose iterations pass two
backward branches (a pure outer loop around a pure inner one) resets head at each and is left to
``max_warp_instructions``. Both executors compare the state exactly (no hash), so they agree.
"""

from __future__ import annotations

import numpy as np

from refsim.ptx.dispatch import ENGINE_OPCODES
from refsim.ptx.errors import PtxDeadlockError, message
from refsim.ptx.operands import flatten

__all__ = ["PURE", "IMPURE", "BACKWARD", "kinds", "registers", "LoopState", "error"]

PURE, IMPURE, BACKWARD = 0, 1, 2
#: engine-owned opcodes that only read and write the executing thread's registers (or nothing)
PURE_ENGINE_OPCODES = frozenset({"bra", "mov", "cvta", "isspacep", "createpolicy", "nanosleep", "prefetch",
                                 "prefetchu", "applypriority", "discard"})
#: special registers whose value changes while a warp loops
CLOCKS = frozenset({"%clock", "%clock64", "%globaltimer"})
_MAX_NAMED = 8


def kinds(kernel, handlers: dict) -> np.ndarray:
    """(n,) uint8: PURE, IMPURE or BACKWARD for each static instruction of ``kernel``
    (``handlers``: instruction index -> semantics handler, as refsim.ptx.dispatch.load returns)."""
    out = np.full(len(kernel.instructions), IMPURE, np.uint8)
    for i, ins in enumerate(kernel.instructions):
        h = handlers.get(i)
        if ins.opcode in PURE_ENGINE_OPCODES:
            pure = True
        else:                                  # a semantics handler the dispatch table routes (not ldmatrix)
            pure = h is not None and ins.opcode not in ENGINE_OPCODES and h.kind == "alu"
        if pure and any(o[0] == "special" and o[1] in CLOCKS for o in flatten(ins.operands)):
            pure = False
        if not pure:
            continue
        target = ins.operands[-1] if ins.opcode == "bra" and ins.operands else None
        backward = target is not None and target[0] == "label" and isinstance(target[1], int) and target[1] <= i
        out[i] = BACKWARD if backward else PURE
    return out


#: instructions walked to form every W(p); beyond it each W(p) is every register the kernel names
#: (a superset, as sound), so many long nested loops cost linear time, not (instructions x loops)
MAX_LOOP_WALK = 1 << 22


def registers(kernel, kind: np.ndarray) -> list:
    """W(p) for each instruction: a sorted tuple of register slots for each BACKWARD p, else ()."""
    named = []
    for ins in kernel.instructions:
        slots = {o[1] for o in _registers(ins.operands)}
        if ins.guard is not None:
            slots.add(ins.guard[1])
        named.append(slots)
    back = [p for p in range(len(kind)) if kind[p] == BACKWARD]
    span = {p: range(kernel.instructions[p].operands[-1][1], p + 1) for p in back}
    if sum(len(r) for r in span.values()) > MAX_LOOP_WALK:
        every = tuple(sorted(set().union(*named)))
        span = {p: None for p in back}
    out = []
    for p in range(len(kind)):
        if p not in span:
            out.append(())
        elif span[p] is None:
            out.append(every)
        else:
            out.append(tuple(sorted(set().union(*(named[q] for q in span[p])))))
    return out


def _registers(operands):
    """The ("reg", slot, neg) operands inside ``operands`` (vectors, pairs, address bases included)."""
    for o in operands:
        if o[0] == "reg":
            yield o
        elif o[0] in ("vec", "pair"):
            yield from _registers(o[1])
        elif o[0] == "addr" and o[1] is not None:
            yield from _registers([o[1]])


class LoopState:
    """The interpreter's per-warp loop records (the module spec), for ``NW`` warps."""

    def __init__(self, kernel, handlers: dict, NW: int):
        self.kind = kinds(kernel, handlers)
        self.regs = registers(kernel, self.kind)
        self.head = np.full(NW, -1, np.int64)
        self.dirty = np.zeros(NW, bool)
        self.count = np.zeros(NW, np.int64)
        self.ref: dict[int, bytes] = {}          # warp -> its state at the last power-of-two visit

    def touch(self, sel) -> None:
        """An impure instruction ran for the threads ``sel`` (a slice: all)."""
        if isinstance(sel, slice):
            self.dirty[:] = True
        else:
            self.dirty[sel >> 5] = True

    def visit(self, L, p: int, sel) -> None:
        """The threads ``sel`` are at the pure backward branch ``p`` (before it runs): the rule above;
        raises PtxDeadlockError when a warp's state equals its kept one."""
        warps = np.arange(L.NW) if isinstance(sel, slice) else np.unique(sel >> 5)
        fresh = self.dirty[warps] | (self.head[warps] != p)
        self.head[warps] = p
        self.dirty[warps] = False
        self.count[warps[fresh]] = 0
        again = warps[~fresh]
        if not len(again):
            return
        self.count[again] += 1
        lanes = again[:, None] * 32 + np.arange(32)                             # (W, 32)
        rows = np.concatenate([L.pc[lanes].view(np.uint8).reshape(len(again), -1)]
                              + [L.regs[r][lanes].view(np.uint8).reshape(len(again), -1) for r in self.regs[p]],
                              axis=1)                                            # (W, state bytes)
        looping = []
        for w, c, row in zip(again.tolist(), self.count[again].tolist(), rows):
            b = row.tobytes()
            if c >= 2 and self.ref[w] == b:
                looping.append(w)
            if c & (c - 1) == 0:
                self.ref[w] = b
        if looping:
            raise error(L.k, p, looping, L.tpb, L.slot_block, L.grid)


def error(kernel, p: int, warps, tpb: int, slot_block, grid) -> PtxDeadlockError:
    """The deadlock of warps ``warps`` (launch warp indices, ascending) looping at backward branch
    ``p``: names the kernel, the loop's PTX lines and up to 8 warps as ``block (x, y, z) warp n``."""
    ins = kernel.instructions[p]
    head = kernel.instructions[ins.operands[-1][1]]
    lines = (f"line {ins.line} `{ins.text}`" if head is ins
             else f"lines {head.line}-{ins.line} (`{head.text}` ... `{ins.text}`)")
    gx, gy = grid[0], grid[1]
    names = []
    for w in list(warps)[:_MAX_NAMED]:
        b = int(slot_block[w * 32 // tpb])
        names.append(f"block ({b % gx}, {b // gx % gy}, {b // (gx * gy)}) warp {w * 32 % tpb // 32}")
    more = f"; ... ({len(warps)} warps)" if len(warps) > _MAX_NAMED else ""
    return PtxDeadlockError(message("deadlock_loop", kernel=kernel.name, lines=lines, looping="; ".join(names) + more))
