"""``elect.sync`` and ``griddepcontrol`` (PTX ISA 8.x, "elect.sync", "griddepcontrol")."""

from __future__ import annotations

import numpy as np

from refsim.ptx.errors import PtxUnsupportedError
from refsim.ptx.operands import reader, writer
from refsim.ptx.parse import Instruction

__all__ = ["elect", "griddepcontrol"]


def elect(L, ins: Instruction, idx: int):
    """``elect.sync d|p, membermask``: of the lanes that execute it and are in ``membermask``, the
    lowest-numbered one is the leader; every executing lane gets ``d`` = the leader's lane id (b32,
    may be ``_``) and ``p`` = (lane is the leader). PTX ISA: the leader is chosen "in a predictable
    manner"; refsim picks the lowest lane (what the hardware is observed to do). A lane outside
    ``membermask`` executing it is undefined behaviour in the ISA: refsim refuses it."""
    ops = ins.operands
    if len(ops) != 2 or ops[0][0] != "pair" or "sync" not in ins.mods:
        raise PtxUnsupportedError(f"{L.where(ins)}: expected elect.sync d|p, membermask")
    d_op, p_op = ops[0][1]
    wd = writer(L, d_op, "b32", ins)
    wp = writer(L, p_op, "pred", ins)
    member = reader(L, ops[1], "b32", ins)
    lane_bit = np.uint32(1) << np.arange(32, dtype=np.uint32)

    def run(sel):
        warps, lanes, active = L.warps(sel)
        m = (np.broadcast_to(member(lanes), lanes.shape) & lane_bit) != 0
        if (active & ~m).any():
            t = int(lanes[active & ~m][0])
            raise PtxUnsupportedError(f"{L.where(ins)}: elect.sync executed by a lane outside its membermask "
                                      f"({L.who(t)}; undefined in the PTX ISA)")
        leader = np.argmax(active, axis=1).astype(np.uint32)          # lowest active lane per warp
        act = lanes[active]
        wd(act, np.broadcast_to(leader[:, None], lanes.shape)[active])
        wp(act, (np.arange(32)[None, :] == leader[:, None])[active])
    return run


def griddepcontrol(L, ins: Instruction, idx: int):
    """``griddepcontrol.launch_dependents`` / ``.wait``: programmatic dependent launch. refsim runs one
    grid at a time, so every prerequisite grid has completed and its memory is visible before this
    grid starts: ``wait`` returns at once and ``launch_dependents`` (a scheduling hint) does nothing."""
    if not set(ins.mods) & {"launch_dependents", "wait"} or ins.operands:
        raise PtxUnsupportedError(f"{L.where(ins)}: expected griddepcontrol.launch_dependents or .wait")
    return lambda sel: None
