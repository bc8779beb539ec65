"""Which threads run next: warp picking (lockstep or seeded random), the yield rule, deadlock detection.

One step of the engine executes one static instruction ``p`` for a selection of threads::

    wmin[w]   the lowest pc among the threads of warp w (PARKED = len(program) when waiting or exited)
    lockstep  p = min over non-yielding warps of wmin; every such warp with wmin == p runs
    random    a seeded random non-yielding warp w0 picks p = wmin[w0]; each other warp with wmin == p
              joins with probability 1/2 (seeded); w0 always runs
    threads   inside a chosen warp, the threads whose pc == p (lowest PC first = reconvergence)

Yield rule: a warp whose spin load (``ld.volatile/relaxed/acquire``, ``atom.cas/exch``, ...) returns what
it returned the previous time at that instruction, or that executes ``nanosleep``, yields; it is not
picked again until every runnable warp yields (:func:`spin_check`, :func:`yield_warps`). When all yield:

    progress since the last such round (memory write, exit, barrier release, cp.async landing)?
        yes -> un-yield everybody, go on
        no  -> hash PCs + runnable registers; DEADLOCK_ROUNDS identical rounds -> PtxDeadlockError

Every step returns ``(p, sel, warps, threads)`` with ``sel`` a ``slice(None)`` when every thread runs.
"""

from __future__ import annotations

import hashlib

import numpy as np

from refsim.ptx.errors import error, message, waiting

__all__ = ["DEADLOCK_ROUNDS", "converged_step", "scheduled_step", "spin_check", "yield_warps", "explain", "deadlock"]

#: Consecutive all-warps-yielding rounds in which nothing changed (memory, registers, PCs) before a
#: spin is a deadlock (one such round already repeats forever under lockstep; a few more for random).
DEADLOCK_ROUNDS = 8


def converged_step(L):
    """Lockstep with no warp yielding: the lowest PC is the global minimum, and the warps
    holding it are exactly the warps whose minimum it is. (p, sel, warps, threads) or None."""
    pc = L.pc
    p = int(pc.min())
    if p >= L.END:
        return None
    m = pc == p
    if m.all():
        return p, slice(None), L.NW, L.T
    sel = np.flatnonzero(m)
    return p, sel, int(np.count_nonzero(np.diff(sel >> 5))) + 1, len(sel)


def scheduled_step(L):
    """The general step (yielding warps, ``random``), deadlock detection; None when finished."""
    pc = L.pc
    wmin = pc.reshape(L.NW, 32).min(axis=1)
    cand = wmin < L.END
    if not cand.any():
        if L.exited.all() and L.next_block >= L.nblocks:
            return None
        deadlock(L, message("deadlock_barrier"))
    pick = cand & ~L.yielding
    if not pick.any():
        # every runnable warp yielded: a deadlock only if nothing at all changed since the last
        # such round (memory writes, exits, barriers, registers, PCs); a loop that reads an
        # unchanging volatile value while counting is not one
        if L.progress == L.last_progress:
            digest = _digest(L, np.repeat(cand, 32))
            L.stall_rounds = L.stall_rounds + 1 if digest == L.last_digest else 0
            L.last_digest = digest
            if L.stall_rounds >= DEADLOCK_ROUNDS:
                deadlock(L, message("deadlock_spin"))
        else:
            L.stall_rounds, L.last_digest = 0, None
        L.last_progress = L.progress
        L.yielding[:] = False
        pick = cand
    if L.schedule == "random":
        ws = np.flatnonzero(pick)
        w0 = ws[L.rng.integers(len(ws))]
        p = int(wmin[w0])
        chosen = pick & (wmin == p) & (L.rng.random(L.NW) < 0.5)
        chosen[w0] = True
    else:
        p = int(wmin[pick].min())
        chosen = pick & (wmin == p)
    nw = int(np.count_nonzero(chosen))
    if nw == L.NW and (pc == p).all():
        return p, slice(None), nw, L.T
    sel = np.flatnonzero((pc == p) & np.repeat(chosen, 32))
    return p, sel, nw, len(sel)


def spin_check(L, idx: int, sel, values: np.ndarray) -> None:
    """Yield the warps whose flag load at instruction ``idx`` returned what it returned last time."""
    th = L.threads(sel)
    v = values.reshape(len(th), -1).astype(np.uint64)
    if v.shape[1] == 1:
        v = v[:, 0]
    else:
        v = (v * (np.arange(1, v.shape[1] + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15))).sum(1)
    prev = L.last_seen.get(idx)
    if prev is None:
        prev = L.last_seen[idx] = (np.zeros(L.T, np.uint64), np.zeros(L.T, bool))
    same = prev[1][th] & (prev[0][th] == v)
    prev[0][th] = v
    prev[1][th] = True
    warps = th >> 5
    uw, inv = np.unique(warps, return_inverse=True)
    allsame = np.ones(len(uw), bool)
    np.logical_and.at(allsame, inv, same)
    L.yielding[uw[allsame]] = True


def yield_warps(L, sel) -> None:
    """The warps of ``sel`` yield (``nanosleep``)."""
    L.yielding[np.unique(L.threads(sel) >> 5)] = True


def _digest(L, runnable: np.ndarray) -> bytes:
    """A hash of the PCs and of the registers of the ``runnable`` threads (the spinning ones;
    the others wait at barriers and cannot change), taken only when every runnable warp yields
    without any memory write in between."""
    idx = np.flatnonzero(runnable)
    h = hashlib.blake2b(L.pc.tobytes(), digest_size=16)
    for r in L.regs:
        h.update(r[idx].tobytes())
    return h.digest()


def explain(L, why: str) -> str:
    """A deadlock's reason after the explainers instructions registered in ``L.ext["deadlock"]``
    (functions ``(L, why) -> why``, e.g. refsim.ptx.hopper.mbarrier's: which barriers warps wait on);
    both executors call it with their launch (the compiled one with its LaunchView)."""
    for fn in L.ext.get("deadlock", ()):
        why = fn(L, why)
    return why


def deadlock(L, why: str) -> None:
    """Raise :class:`PtxDeadlockError` naming up to 8 waiting blocks and where they wait; the reason
    ``why`` passes through :func:`explain` (e.g. the mbarriers warps wait on)."""
    why = explain(L, why)
    lines = []
    for s in range(L.nslots):
        if L.slot_block[s] < 0:
            continue
        lo, hi = s * L.tpb, (s + 1) * L.tpb
        live = ~L.exited[lo:hi]
        if not live.any():
            continue
        at = np.where(L.bar_wait[lo:hi], L.bar_pc[lo:hi], L.pc[lo:hi])[live]
        pcs = sorted(set(int(x) for x in at))[:3]
        where = ", ".join(f"line {L.k.instructions[q].line} `{L.k.instructions[q].text}`"
                          for q in pcs if q < L.END)
        lines.append(f"{L.block_name(int(L.slot_block[s]))} at {where}")
    raise error("deadlock", kernel=L.k.name, why=why, waiting=waiting(lines))
