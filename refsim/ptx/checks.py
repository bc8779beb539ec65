"""The launch's optional checkers: ``poison=True`` (reads of unwritten registers and shared bytes) and
``race=True`` (shared-memory conflicts between barriers, reads of pending ``cp.async`` destinations).

State they keep on the launch ``L`` (allocated only when the check is on)::

    poison   L.reg_init[slot] (T,) bool       register written by this thread since its block started
             L.shared_init (shared bytes,) bool  shared byte written since its block started
    race     L.race_w (shared bytes,) int64   thread that wrote the byte in this barrier interval (-1: none)
             L.race_r (shared bytes,) int64   thread that read it (-1: none, -2: several)
             L.pending (shared bytes,) int32  cp.async copies in flight to the byte

A barrier release clears the race state of the released blocks (:func:`barrier_released`); a new block
in a slot clears both (:func:`block_started`). Every finding raises with the PTX line and the thread.
"""

from __future__ import annotations

import numpy as np

from refsim.ptx.errors import PtxBarrierError, PtxRaceError, PtxUninitializedError, error
from refsim.ptx.hopper import wgmma
from refsim.ptx.parse import Instruction

__all__ = ["register_read", "guard_read", "shared_read", "shared_written", "race_read", "race_write",
           "block_started", "barrier_released"]


def _no_check(sel) -> None:
    return None


def register_read(L, slot: int, ins: Instruction):
    """``sel -> None`` raising :class:`PtxUninitializedError` when a selected thread reads register
    ``slot`` before writing it (``poison``), or :class:`PtxRaceError` when it is an accumulator of a
    wgmma not yet complete (``race``: refsim.ptx.hopper.wgmma.pending_check); a no-op otherwise."""
    pending = wgmma.pending_check(L, ins, slot) if L.race else None
    if not L.poison:
        return _no_check if pending is None else pending
    init = L.reg_init[slot]
    name = L.k.registers[slot].name

    def check(sel):
        if not init[sel].all():
            bad = np.arange(L.T)[sel][~init[sel]][0]
            raise error("uninit_reg", L.where(ins), reg=name, who=L.who(int(bad)))
        if pending is not None:
            pending(sel)
    return check


def guard_read(L, ins: Instruction, sel) -> None:
    """The guard predicate of ``ins`` read by ``sel`` (called only with ``poison``)."""
    if not L.reg_init[ins.guard[1]][sel].all():
        raise error("uninit_guard", L.where(ins))


def shared_read(L, ins: Instruction, sel, mm, flat_bytes: np.ndarray, who: bool = True) -> None:
    """Poison check of a shared-memory read: ``flat_bytes`` (n, bytes) of the accesses ``mm``."""
    ok = L.shared_init[flat_bytes].all(axis=1)
    if not ok.all():
        if not who:
            raise error("uninit_shared_nowho", L.where(ins))
        th = L.threads(sel)[mm][~ok]
        raise error("uninit_shared", L.where(ins), who=L.who(int(th[0])))


def shared_written(L, flat_bytes: np.ndarray) -> None:
    """Poison state: these shared bytes now hold written values."""
    L.shared_init[flat_bytes] = True


def race_read(L, ins: Instruction, sel, mm, flat_bytes: np.ndarray) -> None:
    """A shared read by the threads ``sel[mm]`` of ``flat_bytes`` (n, bytes): conflicts with another
    thread's write since the last barrier, or with a pending cp.async, raise; the read is recorded."""
    th = L.threads(sel)[mm]
    if L.pending is not None and (L.pending[flat_bytes] > 0).any():
        bad = (L.pending[flat_bytes] > 0).any(axis=1)
        raise error("race_pending", L.where(ins), who=L.who(int(th[bad][0])))
    w = L.race_w[flat_bytes]
    conflict = (w >= 0) & (w != th[:, None])
    if conflict.any():
        row = np.flatnonzero(conflict.any(axis=1))[0]
        other = int(w[row][conflict[row]][0])
        raise error("race_read", L.where(ins), who=L.who(int(th[row])), other=L.who(other))
    r = L.race_r[flat_bytes]
    r[:] = np.where((r == -1) | (r == th[:, None]), th[:, None], -2)
    L.race_r[flat_bytes] = r


def race_write(L, ins: Instruction, sel, mm, flat_bytes: np.ndarray) -> None:
    """A shared write by the threads ``sel[mm]``: conflicts with any other thread's access since the
    last barrier, or two threads of this instruction writing one byte, raise; the write is recorded."""
    th = L.threads(sel)[mm]
    wgmma.smem_check(L, ins, th, flat_bytes)
    w = L.race_w[flat_bytes]
    r = L.race_r[flat_bytes]
    conflict = ((w >= 0) & (w != th[:, None])) | ((r != -1) & (r != th[:, None]))
    if conflict.any():
        row = np.flatnonzero(conflict.any(axis=1))[0]
        raise error("race_write", L.where(ins), who=L.who(int(th[row])))
    uniq, counts = np.unique(flat_bytes.reshape(-1), return_counts=True)
    if (counts > 1).any() and len(np.unique(th)) > 1:
        raise error("race_same_byte", L.where(ins), offset=int(uniq[counts > 1][0]) % L.shared_stride)
    L.race_w[flat_bytes] = th[:, None]


def mbarrier_access_message(where: str, addr: int, who: str) -> str:
    """The message of a generic access to a live mbarrier's bytes (both executors)."""
    return (f"{where}: generic access to the bytes of a live mbarrier at .shared 0x{addr:x} by {who} "
            f"(only mbarrier instructions may touch them until mbarrier.inval)")


def async_race_message(where: str, addr: int, who: str) -> str:
    """The message of a generic access to bytes an unobserved async-proxy copy wrote (both executors)."""
    return (f"{where}: generic-proxy access to .shared 0x{addr:x} by {who}: an async-proxy copy (cp.async.bulk) "
            f"wrote it and this thread has not observed the mbarrier phase that completes the copy")


def hopper_access(L, ins: Instruction, sel, mm, flat_bytes: np.ndarray) -> None:
    """refsim.ptx.hopper's byte rules for a generic ld/st of ``flat_bytes`` (n, bytes) by the accesses
    ``mm``: a live mbarrier's bytes (``L.hbytes``: PtxBarrierError); under race, bytes an async-proxy copy
    wrote (``L.async_bid``/``async_phase``: its barrier and phase) before the accessing thread observed that
    phase complete (``L.async_obs``, refsim.ptx.hopper.mbarrier): PtxRaceError."""
    for check, cls, message in ((0, PtxBarrierError, mbarrier_access_message), (1, PtxRaceError, async_race_message)):
        if check == 0:
            bad = L.hbytes[flat_bytes] != 0
        elif L.async_bid is None:
            break
        else:
            d = L.async_bid[flat_bytes]
            lane = (L.threads(sel)[mm] % L.tpb)[:, None]
            row = (flat_bytes // L.shared_stride) * L.max_mbar + np.maximum(d, 0)
            bad = (d >= 0) & (L.async_obs[row * L.tpb + lane] < L.async_phase[flat_bytes])
        if bad.any():
            row = int(np.flatnonzero(bad.any(axis=1))[0])
            col = int(np.flatnonzero(bad[row])[0])
            t = int(L.threads(sel)[mm][row])
            raise cls(message(L.where(ins), int(flat_bytes[row, col]) % L.shared_stride, L.who(t)))


def block_started(L, s: int, lo: int, hi: int) -> None:
    """A new block in slot ``s`` (threads ``lo:hi``): nothing of it is written, nothing accessed."""
    span = slice(s * L.shared_stride, (s + 1) * L.shared_stride)
    if L.hbytes is not None:
        L.hbytes[span] = 0
    if L.gen_w is not None:
        L.gen_w[span] = -1
    if L.async_bid is not None:
        L.async_bid[span] = -1
        L.async_obs[s * L.max_mbar * L.tpb:(s + 1) * L.max_mbar * L.tpb] = -1
    if L.poison:
        L.shared_init[span] = False
        for r in L.reg_init:
            r[lo:hi] = False
    if L.race:
        L.race_w[span] = -1
        L.race_r[span] = -1


def barrier_released(L, slots: np.ndarray) -> None:
    """A barrier completed in the block slots ``slots`` (bool per slot): a new race interval there."""
    if L.race:
        cleared = np.repeat(slots, L.shared_stride)
        L.race_w[cleared] = -1
        L.race_r[cleared] = -1
