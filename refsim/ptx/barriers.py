"""Block barriers (``bar``/``barrier`` ``.sync``/``.arrive``/``.red``).

PTX ISA, Parallel Synchronization and Communication Instructions: bar, barrier.

Barrier state per block slot s and barrier id b (0..15)::

    L.bar_count[s, b]   arrivals so far in this barrier phase
    L.bar_need[s, b]    the thread count ``b`` of ``bar.sync a, b`` (0: every live thread of the block)
    per thread          bar_wait (parked here), bar_id, bar_pc (the bar instruction), bar_pred (bar.red)

``bar.sync`` parks the thread (pc = PARKED) and counts an arrival; when the arrivals reach the count
(exited threads count as arrived: the count is the block's live threads) every waiting thread of that
barrier moves to the instruction after its ``bar``. ``bar.arrive`` counts without waiting.
``bar.red.popc/and/or`` gives each released thread the reduction of the arrived threads' predicates.
``bar.warp.sync`` changes no value: warps execute in lockstep and every access is visible at once in
this engine (so ``membar`` and ``fence`` are refsim.ptx.control's effect-only instructions).
"""

from __future__ import annotations

import numpy as np

from refsim.ptx import checks
from refsim.ptx.errors import PtxUnsupportedError, error
from refsim.ptx.operands import reader, writer
from refsim.ptx.parse import Instruction

__all__ = ["bar", "release"]


def bar(L, ins: Instruction, idx: int):
    """``bar{.cta}.{sync,arrive,red}`` / ``barrier{.cta}...`` / ``bar.warp.sync``: sets the pc itself."""
    mods = ins.mods
    if "warp" in mods:
        return lambda sel: L.pc.__setitem__(sel, L.pc[sel] + 1)
    if "red" in mods:
        return _bar_red(L, ins, idx)
    if "arrive" not in mods and "sync" not in mods and mods not in ((), ("aligned",)):
        raise PtxUnsupportedError(f"{L.where(ins)}: barrier variant {ins.name} is not supported")
    arrive = "arrive" in mods
    bid = reader(L, ins.operands[0], "u32", ins)
    count = reader(L, ins.operands[1], "u32", ins) if len(ins.operands) > 1 else None

    def run(sel):
        b = _barrier_ids(L, ins, bid, sel)
        if arrive:
            L.pc[sel] += 1
            _arrivals(L, sel, b, count)
            return
        _park(L, sel, b)
        _arrivals(L, sel, b, count)
    return run


def _barrier_ids(L, ins: Instruction, bid, sel) -> np.ndarray:
    b = np.broadcast_to(bid(sel), (L.count(sel),)).astype(np.int64)
    if (b > 15).any():
        raise error("barrier_id", L.where(ins), got=int(b.max()))
    return b


def _park(L, sel, b) -> None:
    L.bar_wait[sel] = True
    L.bar_id[sel] = b
    L.bar_pc[sel] = L.pc[sel]
    L.pc[sel] = L.END


def _bar_red(L, ins: Instruction, idx: int):
    """``bar.red.popc.u32 d, a{, b}, {!}c`` / ``bar.red.{and,or}.pred p, a{, b}, {!}c``: a
    ``bar.sync`` whose release gives every waiting thread the popcount / AND / OR of the
    predicates ``c`` of the block's threads that arrived (PTX ISA "bar, barrier")."""
    op = next((m for m in ins.mods if m in ("popc", "and", "or")), None)
    if op is None or len(ins.operands) not in (3, 4):
        raise PtxUnsupportedError(f"{L.where(ins)}: barrier reduction {ins.name} is not supported")
    out_type = "u32" if op == "popc" else "pred"
    L.bar_red_out[idx] = (writer(L, ins.operands[0], out_type, ins), op)
    bid = reader(L, ins.operands[1], "u32", ins)
    count = reader(L, ins.operands[2], "u32", ins) if len(ins.operands) == 4 else None
    pred = reader(L, ins.operands[-1], "pred", ins)

    def run(sel):
        sel = L.threads(sel)
        b = _barrier_ids(L, ins, bid, sel)
        L.bar_pred[sel] = np.broadcast_to(pred(sel), sel.shape)
        _park(L, sel, b)
        _arrivals(L, sel, b, count)
    return run


def _arrivals(L, sel, b, count) -> None:
    key = L.slot_of[sel] * 16 + b
    L.bar_count += np.bincount(key, minlength=L.nslots * 16).reshape(L.nslots, 16)
    if count is not None:
        L.bar_need.reshape(-1)[key] = np.broadcast_to(count(sel), key.shape)
    release(L)


def release(L) -> None:
    """Complete every barrier whose arrivals reached its count (default: the live threads)."""
    alive = L.tpb - L.exited.reshape(L.nslots, L.tpb).sum(axis=1)
    need = np.where(L.bar_need > 0, L.bar_need, alive[:, None])
    done = (L.bar_count > 0) & (L.bar_count >= need)
    if not done.any():
        return
    waiting = L.bar_wait & done.reshape(-1)[L.slot_of * 16 + L.bar_id]
    released = np.flatnonzero(waiting)
    if L.bar_red_out:
        _reduce_predicates(L, released)
    L.bar_wait[waiting] = False
    L.pc[waiting] = L.bar_pc[waiting] + 1
    L.bar_count[done] = 0
    L.bar_need[done] = 0
    L.stats.barriers += int(done.sum())
    L.progress += 1
    slots = done.any(axis=1)
    L.yielding[slots[L.warp_slot]] = False
    checks.barrier_released(L, slots)


def _reduce_predicates(L, released: np.ndarray) -> None:
    """Results of the ``bar.red`` instructions among the threads a barrier releases."""
    at = L.bar_pc[released]
    red = np.isin(at, list(L.bar_red_out))
    if not red.any():
        return
    th = released[red]
    key = L.slot_of[th] * 16 + L.bar_id[th]
    n = L.nslots * 16
    popc = np.bincount(key, weights=L.bar_pred[th], minlength=n).astype(np.int64)
    total = np.bincount(key, minlength=n)
    for q in np.unique(at[red]):
        write, op = L.bar_red_out[int(q)]
        mine = at[red] == q
        k = key[mine]
        value = {"popc": popc[k].astype(np.uint32), "and": popc[k] == total[k], "or": popc[k] > 0}[op]
        write(th[mine], value)
