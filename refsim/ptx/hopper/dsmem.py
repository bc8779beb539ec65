"""Distributed shared memory of sm_90 clusters (PTX ISA 8.x, "Distributed Shared Memory", "mapa", the
``.shared::cluster`` state space), defined once for both executors.

Spec
----
addresses       refsim's encoding (the hardware's is not published; a kernel only forms these with ``mapa``):
                a ``.shared::cluster`` address ``a`` below :data:`RANK_UNIT` (2**24) is the executing CTA's own
                ``.shared`` offset ``a`` (the ``.shared::cta`` window lies inside ``.shared::cluster``, as
                the ISA says); ``a = (rank + 1) * RANK_UNIT + off`` (``off`` < 2**24) is offset ``off`` of
                the shared memory of the CTA whose ``%cluster_ctarank`` is ``rank`` in the executing CTA's
                cluster. A generic address of it is ``SHARED_WINDOW + a`` (refsim.ptx.memory's window).
                Ranks go up to 15 (the largest cluster the ISA allows is 16), so every such address fits
                32 bits.
mapa            ``mapa.shared::cluster.{u32,u64} d, a, rank``: ``a`` a ``.shared`` (or ``.shared::cluster``)
                address, ``d`` the ``.shared::cluster`` address of the same offset in CTA ``rank``;
                ``mapa.{u32,u64} d, a, rank`` (generic, as cooperative_groups' ``map_shared_rank`` emits):
                ``a`` a generic address in the shared window, ``d`` the generic address of the same
                offset in CTA ``rank``. A rank outside ``[0, %cluster_nctarank)`` or a generic ``a``
                outside the shared window: PtxMemoryError naming kernel, line, thread and the value.
access          ``ld``/``st`` (scalar and ``.v2``/``.v4``), ``atom``/``red`` with ``.shared::cluster``, and the
                generic ones whose address is in the shared window at or above ``RANK_UNIT``, reach CTA
                ``rank``'s bytes through refsim.ptx.memory_ops (the one definition of ld/st/atom:
                :func:`flat_offsets` is its shared-memory step). Each access is checked: the rank is in
                the cluster (PtxMemoryError), the CTA has not exited (its shared memory is gone:
                PtxMemoryError), ``[off, off + size)`` inside its shared memory (PtxMemoryError), aligned
                (PtxMisalignedError). Poison (``poison=True``) and race (``race=True``) checks and the
                wavefront counts treat the remote bytes as shared bytes of the CTA they belong to;
                ``barrier.cluster`` starts a new race interval in every CTA of the cluster
                (refsim.ptx.hopper.cluster). Not checked: the ordering ``fence.acq_rel.cluster`` gives
                (refsim's accesses are sequentially consistent), and remote accesses racing with
                async-proxy copies of another CTA beyond the per-byte rules of refsim.ptx.checks.
compiled        the compiled executor hands every ``.shared::cluster`` ld/st/atom/red, and every generic
                one of a kernel that holds a generic ``mapa``, to Python (:func:`python_access`), so one
                definition runs both executors; other ld/st keep their C paths.
"""

from __future__ import annotations

import numpy as np

from refsim.ptx.errors import PtxMemoryError, error
from refsim.ptx.memory import SHARED_WINDOW, WINDOW_BYTES
from refsim.ptx.operands import reader, writer
from refsim.ptx.parse import Instruction

__all__ = ["RANK_UNIT", "MAX_RANKS", "mapa", "flat_offsets", "slots_of_ranks", "python_access", "has_generic_mapa"]

#: the span of one CTA's window in refsim's ``.shared::cluster`` addresses (module spec)
RANK_UNIT = 1 << 24
#: the largest cluster the PTX ISA allows (16 CTAs, the non-portable size)
MAX_RANKS = 16
_MEMORY_OPS = ("ld", "st", "atom", "red")


def _cluster_size(L) -> int:
    return int(L.cluster[0] * L.cluster[1] * L.cluster[2])


def _rank_error(L, ins, th, bad, rank, what: str) -> PtxMemoryError:
    i = int(np.flatnonzero(bad)[0])
    return PtxMemoryError(f"{L.where(ins)}: {what} names CTA rank {int(rank[i])} of the cluster, which has "
                          f"{_cluster_size(L)} CTA(s) (ranks 0..{_cluster_size(L) - 1}) (by {L.who(int(th[i]))})")


def mapa(L, ins: Instruction, idx: int):
    """``mapa{.shared::cluster}.{u32,u64} d, a, rank`` (module spec)."""
    from refsim.ptx.errors import PtxUnsupportedError
    from refsim.ptx.operands import flatten

    mods = set(ins.mods)
    ops = flatten(ins.operands)
    if mods - {"shared::cluster"} or tuple(ins.types) not in (("u32",), ("u64",)) or len(ops) != 3:
        raise PtxUnsupportedError(f"{L.where(ins)}: refsim executes mapa{{.shared::cluster}}.{{u32,u64}} d, a, rank")
    t = ins.types[0]
    generic = "shared::cluster" not in mods
    ra, rr, wd = reader(L, ops[1], t, ins), reader(L, ops[2], "u32", ins), writer(L, ops[0], t, ins)

    def run(sel):
        th = L.threads(sel)
        a = np.broadcast_to(np.asarray(ra(sel), np.uint64), th.shape)
        rank = np.broadcast_to(np.asarray(rr(sel), np.uint64), th.shape)
        if generic:
            out = (a < np.uint64(SHARED_WINDOW)) | (a >= np.uint64(SHARED_WINDOW + WINDOW_BYTES))
            if out.any():
                i = int(np.flatnonzero(out)[0])
                raise PtxMemoryError(f"{L.where(ins)}: mapa of generic address 0x{int(a[i]):x}, not in shared "
                                     f"memory (by {L.who(int(th[i]))})")
            a = a - np.uint64(SHARED_WINDOW)
        _, off = _decode(L, ins, th, a, "mapa's address")
        bad = rank >= np.uint64(_cluster_size(L))
        if bad.any():
            raise _rank_error(L, ins, th, bad, rank, "mapa")
        d = (rank + np.uint64(1)) * np.uint64(RANK_UNIT) + off
        wd(sel, d + np.uint64(SHARED_WINDOW) if generic else d)
    return run


def _decode(L, ins, th: np.ndarray, a: np.ndarray, what: str) -> tuple[np.ndarray, np.ndarray]:
    """(rank or -1 for the executing CTA's own window, offset) of ``.shared::cluster`` addresses ``a``
    (uint64) of threads ``th``; ranks outside the cluster or addresses past the last window raise."""
    a = np.asarray(a, np.uint64)
    rank = (a // np.uint64(RANK_UNIT)).astype(np.int64) - 1
    bad = rank >= _cluster_size(L)
    if bad.any():
        raise _rank_error(L, ins, th, bad, rank, what)
    return rank, a % np.uint64(RANK_UNIT)


def slots_of_ranks(L, ins, th: np.ndarray, rank: np.ndarray) -> np.ndarray:
    """The block slot (int64) holding CTA ``rank`` (int64, -1: the thread's own) of the cluster of each thread
    of ``th`` (same shape); a CTA that has exited is a PtxMemoryError (its shared memory is gone)."""
    own = L.slot_of[th]
    if not (rank >= 0).any():
        return own
    X, Y, _ = (int(v) for v in L.cluster)
    gx, gy = int(L.grid[0]), int(L.grid[1])
    b = L.slot_block[own]
    bx, by, bz = b % gx, b // gx % gy, b // (gx * gy)
    r = np.maximum(rank, 0)
    tx, ty, tz = bx - bx % X + r % X, by - by % Y + r // X % Y, bz - bz % L.cluster[2] + r // (X * Y)
    target = tx + gx * (ty + gy * tz)
    slot_of_block = np.full(int(L.grid[0] * L.grid[1] * L.grid[2]), -1, np.int64)
    live = L.slot_block >= 0
    slot_of_block[L.slot_block[live]] = np.flatnonzero(live)
    slot = np.where(rank >= 0, slot_of_block[target], own)
    gone = (slot < 0) | L.exited.reshape(L.nslots, L.tpb)[np.maximum(slot, 0)].all(axis=1)
    if gone.any():
        i = int(np.flatnonzero(gone)[0])
        raise PtxMemoryError(f"{L.where(ins)}: .shared::cluster access to CTA rank {int(rank[i])} of the cluster, "
                             f"which has exited (its shared memory is gone) (by {L.who(int(th[i]))})")
    return slot


def flat_offsets(L, ins, sel, mask: np.ndarray, addr: np.ndarray, nbytes: int) -> np.ndarray:
    """The flat byte offsets into ``L.shared`` (uint64, one per access ``mask``) of the ``.shared::cluster``
    addresses ``addr`` (uint64, one per thread of ``sel``) of ``nbytes``-byte accesses; every rule of the
    module spec checked (alignment is checked by the caller, refsim.ptx.memory_ops.resolve)."""
    th = L.threads(sel)[mask]
    rank, off = _decode(L, ins, th, addr[mask], f"{nbytes}-byte .shared::cluster access")
    slot = slots_of_ranks(L, ins, th, rank)
    bad = off + np.uint64(nbytes) > np.uint64(L.shared_size)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        cta = "its own CTA" if rank[i] < 0 else f"CTA rank {int(rank[i])}"
        raise error("fault", L.where(ins),
                    what=f"out-of-bounds {nbytes}-byte .shared::cluster access at offset 0x{int(off[i]):x} of "
                         f"{cta}'s shared memory ({L.shared_size} bytes)",
                    addr=int(addr[mask][i]), who=L.who(int(th[i])))
    return slot.astype(np.uint64) * np.uint64(L.shared_stride) + off


def has_generic_mapa(kernel) -> bool:
    """True when ``kernel`` holds a generic ``mapa`` (its generic accesses may reach another CTA)."""
    return any(ins.opcode == "mapa" and "shared::cluster" not in ins.mods for ins in kernel.instructions)


def python_access(ins, space: str, generic_mapa: bool) -> bool:
    """True when the compiled executor runs memory instruction ``ins`` (state space ``space``, as
    refsim.ptx.memory_ops.state_space names it) through Python (the module spec's ``compiled``);
    ``generic_mapa``: :func:`has_generic_mapa` of its kernel."""
    if ins.opcode not in _MEMORY_OPS:
        return False
    return "shared::cluster" in ins.mods or (generic_mapa and space == "generic")
