"""``mbarrier``: the transaction barrier of sm_90 (PTX ISA 8.x, "Parallel Synchronization and
Communication Instructions: mbarrier"), defined once for both executors.

Spec
----
object          8 bytes of shared memory, 8-byte aligned. Its state lives in a side table of the launch
                (``L.ext["mbarrier"]``), keyed by (block, shared address): phase (a count; its parity is
                what ``.parity`` waits name), expected arrivals, pending arrivals, tx-count. The bytes
                themselves hold nothing refsim reads (the hardware's encoding is not published).
init            ``mbarrier.init.shared{::cta}.b64 [a], count``: phase 0, expected = pending = count
                (1 <= count <= 2**20 - 1), tx-count 0.
arrive          ``mbarrier.arrive{.expect_tx}{.release.cta}.shared{::cta}.b64 state, [a]{, count|tx}``
                (and ``arrive_drop``: the expected count of later phases drops too). Threads act in
                ascending order: expect_tx adds tx to tx-count, then pending -= count (default 1).
                The phase completes when pending == 0 and tx-count == 0: phase += 1, pending =
                expected. ``state`` (b64, may be ``_``): refsim's token = phase before the arrive
                (bits 0-31) | pending arrivals before it (bits 32-52) (opaque in the ISA).
expect_tx       ``mbarrier.expect_tx [a], tx`` adds tx; ``complete_tx [a], tx`` (and every bulk/TMA
                copy that names the barrier) subtracts it and may complete the phase. tx-count must
                stay in [-(2**20 - 1), 2**20 - 1] (the ISA's range).
waits           ``mbarrier.test_wait`` / ``try_wait`` ``{.parity}{.acquire.cta}.shared{::cta}.b64 p, [a],
                state|parity{, hint}``: p = the phase the token names has completed (phase != token's);
                with ``.parity``: p = (phase & 1) != parity (the phase of that parity completed, the
                preceding phase counting as complete at init, as CUTLASS's producer start relies on).
                A false result makes the warp yield (refsim.ptx.scheduler) and records it as waiting
                on the barrier; a kernel whose waits can never complete ends in a PtxDeadlockError
                naming the barrier (symbol, address, phase, counts) and the waiting warps.
pending_count   ``mbarrier.pending_count.b64 n, state``: the pending count held in the token.
inval           ``mbarrier.inval [a]``: the barrier is no longer live (may be initialised again).
remote          ``mbarrier.arrive{.expect_tx}{_drop}{.release}{.cta,.cluster}.shared::cluster.b64 _, [a]{, count|tx}``
                (the state operand must be the sink ``_``, as the ISA requires) and
                ``mbarrier.{expect_tx,complete_tx}...shared::cluster.b64 [a], tx``: ``a`` is a
                ``.shared::cluster`` address (refsim.ptx.hopper.dsmem's encoding, as ``mapa`` forms it), the
                barrier the one at that offset of the CTA it names (its own CTA below 2**24); the rules
                and errors are the local ones, acting on the target CTA's side-table entry (key: the
                target block). A warp of the target CTA waiting on the barrier sees the phase complete
                at its next try, as after a local arrive (the yield rule, refsim.ptx.scheduler). An
                address naming a rank outside the cluster or a CTA that has exited: PtxMemoryError
                (refsim.ptx.hopper.dsmem.flat_offsets). ``init``, ``inval`` and the waits act on the
                executing CTA's barriers only (``.shared::cluster`` is not in their ISA forms).
refused         (PtxBarrierError, naming kernel, line and the rule) an operation on an address with no
                live barrier, init of a live barrier, more arrivals than pending, a tx-count out of
                range; (PtxMisalignedError) an address not 8-byte aligned; (PtxMemoryError) outside
                the block's shared memory; (PtxUnsupportedError) ``.noComplete``, a ``.shared::cluster``
                arrive with a state register, ``.shared::cluster`` init/inval/waits.
"""

from __future__ import annotations

import numpy as np

from refsim.ptx import scheduler
from refsim.ptx.errors import PtxBarrierError, PtxLimitError, PtxMemoryError, PtxMisalignedError, PtxUnsupportedError
from refsim.ptx.memory import SHARED_WINDOW, WINDOW_BYTES
from refsim.ptx.memory_ops import address, state_space
from refsim.ptx.operands import reader, writer
from refsim.ptx.parse import Instruction

__all__ = ["Barrier", "build", "shared_offsets", "complete_tx", "copy_landed", "deadlock_why", "MAX_COUNT", "TX_LIMIT",
           "MAX_RACE_BARRIERS"]

#: the largest arrival count (PTX ISA: 2**20 - 1)
MAX_COUNT = (1 << 20) - 1
#: tx-count range: [-TX_LIMIT, TX_LIMIT]
TX_LIMIT = (1 << 20) - 1
#: race=True follows what each thread observed of at most this many mbarrier inits per block
MAX_RACE_BARRIERS = 64


class Barrier:
    """One live mbarrier's state (see the module spec)."""

    __slots__ = ("expected", "pending", "tx", "phase", "waiters", "d")

    def __init__(self, count: int, d: int):
        self.d = d                       # the block's d-th init: its row of L.async_obs (race)
        self.expected = self.pending = count
        self.tx = 0
        self.phase = 0
        self.waiters: set = set()        # block-local warp numbers whose last wait failed

    def check_complete(self) -> None:
        if self.pending == 0 and self.tx == 0:
            self.phase += 1
            self.pending = self.expected


def _table(L) -> dict:
    table = L.ext.get("mbarrier")
    if table is None:
        table = L.ext["mbarrier"] = {}
        L.ext.setdefault("deadlock", []).append(deadlock_why)      # refsim.ptx.scheduler.explain
    return table


def shared_offsets(L, ins: Instruction, op, sel, nbytes: int, align: int, what: str, space=None) -> np.ndarray:
    """(n,) int64 ``.shared`` offsets of the address operand ``op`` for the threads of ``sel`` (a
    ``.shared`` or generic address in the shared window), each checked: ``align``-aligned
    (PtxMisalignedError) and ``[a, a + nbytes)`` inside the block's shared memory (PtxMemoryError).
    ``space``: "shared" or "generic" (default: the instruction's state space)."""
    space = space or state_space(ins)
    th = L.threads(sel)
    a = np.broadcast_to(address(L, op, ins, "shared" if space == "shared" else "generic")(sel), th.shape)
    a = a.astype(np.uint64)
    if space != "shared":
        inwin = (a >= np.uint64(SHARED_WINDOW)) & (a < np.uint64(SHARED_WINDOW + WINDOW_BYTES))
        if not inwin.all():
            bad = int(np.flatnonzero(~inwin)[0])
            raise PtxMemoryError(f"{L.where(ins)}: {what} at generic address 0x{int(a[bad]):x} is not in shared "
                                 f"memory (by {L.who(int(th[bad]))})")
        a = a - np.uint64(SHARED_WINDOW)
    mis = a % np.uint64(align) != 0
    if mis.any():
        bad = int(np.flatnonzero(mis)[0])
        raise PtxMisalignedError(f"{L.where(ins)}: {what} at .shared address 0x{int(a[bad]):x} is not "
                                 f"{align}-byte aligned (by {L.who(int(th[bad]))})")
    oob = a + np.uint64(nbytes) > np.uint64(L.shared_size)
    if oob.any():
        bad = int(np.flatnonzero(oob)[0])
        raise PtxMemoryError(f"{L.where(ins)}: {what} at .shared address 0x{int(a[bad]):x} ({nbytes} bytes) is "
                             f"outside the block's {L.shared_size} bytes (by {L.who(int(th[bad]))})")
    return a.astype(np.int64)


def _block(L, t: int) -> int:
    return int(L.slot_block[L.slot_of[t]])


def _name(L, addr: int) -> str:
    """``symbol+off (.shared 0x..)`` of a barrier address."""
    for name, v in L.k.shared.items():
        size = getattr(v, "size", 0)
        if v.offset <= addr < v.offset + max(size, 1):
            off = addr - v.offset
            return f"{name}{f'+{off}' if off else ''} (.shared 0x{addr:x})"
    return f".shared 0x{addr:x}"


def _live(L, ins, t: int, addr: int, slot=None) -> Barrier:
    """The live barrier at ``.shared`` ``addr`` of block slot ``slot`` (default: thread ``t``'s)."""
    block = _block(L, t) if slot is None else int(L.slot_block[slot])
    b = _table(L).get((block, addr))
    if b is None:
        raise PtxBarrierError(f"{L.where(ins)}: no initialised mbarrier at {_name(L, addr)} "
                              f"(by {L.who(t)}; mbarrier.init it first)")
    return b


def _tx(L, ins, b: Barrier, delta: int, addr: int, t) -> None:
    tx = b.tx + delta
    if not -TX_LIMIT <= tx <= TX_LIMIT:
        who = "" if t is None else f" by {L.who(t)}"
        raise PtxBarrierError(f"{L.where(ins)}: tx-count of the mbarrier at {_name(L, addr)} would be {tx}, "
                              f"outside [-{TX_LIMIT}, {TX_LIMIT}] (phase {b.phase}{who})")
    b.tx = tx


def complete_tx(L, ins: Instruction, t: int, addr: int, nbytes: int, slot=None) -> None:
    """The copy engine's ``complete_tx`` of ``nbytes`` on the barrier at ``.shared`` ``addr`` of block slot
    ``slot`` (default: thread ``t``'s block; a bulk or tensor copy issued by ``t`` has landed there)."""
    b = _live(L, ins, t, addr, slot)
    _tx(L, ins, b, -nbytes, addr, t)
    b.check_complete()
    L.progress += 1


def _mods(ins) -> set:
    return {m for m in ins.mods if m not in ("shared", "shared::cta", "shared::cluster", "release", "acquire",
                                             "relaxed", "cta", "cluster")}


def _cluster_targets(L, ins: Instruction, op, sel, nbytes: int, align: int, what: str) -> tuple[np.ndarray, np.ndarray]:
    """(slots, offsets): the block slot and ``.shared`` offset (int64, one per thread of ``sel``) of the
    ``.shared::cluster`` address operand ``op`` (refsim.ptx.hopper.dsmem's encoding), each checked:
    ``align``-aligned (PtxMisalignedError), the rank in the cluster, the CTA live and ``[off, off +
    nbytes)`` inside its shared memory (PtxMemoryError, refsim.ptx.hopper.dsmem.flat_offsets)."""
    from refsim.ptx.hopper import dsmem

    th = L.threads(sel)
    a = np.broadcast_to(address(L, op, ins, "shared")(sel), th.shape).astype(np.uint64)
    mis = a % np.uint64(align) != 0
    if mis.any():
        bad = int(np.flatnonzero(mis)[0])
        raise PtxMisalignedError(f"{L.where(ins)}: {what} at .shared::cluster address 0x{int(a[bad]):x} is not "
                                 f"{align}-byte aligned (by {L.who(int(th[bad]))})")
    flat = dsmem.flat_offsets(L, ins, sel, np.ones(th.shape, bool), a, nbytes).astype(np.int64)
    return flat // L.shared_stride, flat % L.shared_stride


def build(L, ins: Instruction, idx: int):
    """The step function of one ``mbarrier`` instruction (forms: the module spec)."""
    mods = _mods(ins)
    if "noComplete" in mods:
        raise PtxUnsupportedError(f"{L.where(ins)}: mbarrier .noComplete is not supported")
    kind = next((k for k in ("init", "inval", "arrive_drop", "arrive", "expect_tx", "complete_tx", "test_wait",
                             "try_wait", "pending_count") if k in mods), None)
    if kind is None:
        raise PtxUnsupportedError(f"{L.where(ins)}: unknown mbarrier form")
    ops = ins.operands
    remote = "shared::cluster" in ins.mods
    if remote and (kind not in ("arrive", "arrive_drop", "expect_tx", "complete_tx")
                   or (kind in ("arrive", "arrive_drop") and ops[0] != ("sink",))):
        raise PtxUnsupportedError(f"{L.where(ins)}: mbarrier on .shared::cluster: refsim executes (as the PTX ISA "
                                  f"defines) arrive{{.expect_tx}}/arrive_drop with the sink _ as state, expect_tx and "
                                  f"complete_tx")
    if kind == "pending_count":
        src, dst = reader(L, ops[1], "b64", ins), writer(L, ops[0], "u32", ins)
        return lambda sel: dst(sel, ((src(sel) >> np.uint64(32)) & np.uint64(MAX_COUNT)).astype(np.uint32))
    if kind in ("init", "inval", "expect_tx", "complete_tx"):
        a_op, rest = ops[0], ops[1:]
    else:
        a_op, rest = ops[1], ops[2:]
    if kind in ("test_wait", "try_wait"):      # a try_wait's optional suspend-time hint is ignored
        wait_arg = reader(L, rest[0], "b32" if "parity" in mods else "b64", ins)
        out = writer(L, ops[0], "pred", ins)
        return _wait(L, ins, a_op, wait_arg, out, "parity" in mods)
    arg = reader(L, rest[0], "b32", ins) if rest and kind != "inval" else None
    token = writer(L, ops[0], "b64", ins) if kind in ("arrive", "arrive_drop") else None

    def run(sel):
        th = L.threads(sel)
        if remote:
            slots, addrs = _cluster_targets(L, ins, a_op, sel, 8, 8, "mbarrier")
        else:
            slots, addrs = L.slot_of[th], shared_offsets(L, ins, a_op, sel, 8, 8, "mbarrier")
        vals = np.broadcast_to(arg(sel), th.shape).astype(np.int64) if arg is not None else None
        table = _table(L)
        tokens = np.zeros(th.shape, np.uint64)
        for i, (t, a, slot) in enumerate(zip(th.tolist(), addrs.tolist(), slots.tolist())):
            key = (int(L.slot_block[slot]), a)
            if kind == "init":
                if key in table:
                    raise PtxBarrierError(f"{L.where(ins)}: mbarrier.init of the live mbarrier at {_name(L, a)} "
                                          f"(by {L.who(t)}; mbarrier.inval it first)")
                n = int(vals[i])
                if not 1 <= n <= MAX_COUNT:
                    raise PtxBarrierError(f"{L.where(ins)}: mbarrier.init count must be in [1, {MAX_COUNT}]; "
                                          f"got {n} (by {L.who(t)})")
                inits = L.ext.setdefault("mbarrier_inits", {})
                d = inits[key[0]] = inits.get(key[0], -1) + 1
                if L.async_bid is not None and d >= MAX_RACE_BARRIERS:
                    raise PtxLimitError(f"{L.where(ins)}: race=True follows at most {MAX_RACE_BARRIERS} mbarrier "
                                        f"inits per block (by {L.who(t)})")
                table[key] = Barrier(n, d)
                _flat = int(L.slot_of[t]) * L.shared_stride + a
                L.hbytes[_flat:_flat + 8] |= 1                    # a live barrier's bytes
                continue
            b = _live(L, ins, t, a, slot)
            if kind == "inval":
                del table[key]
                _flat = int(L.slot_of[t]) * L.shared_stride + a
                L.hbytes[_flat:_flat + 8] &= np.uint8(0xFE)
            elif kind == "expect_tx":
                _tx(L, ins, b, int(vals[i]), a, t)
            elif kind == "complete_tx":
                _tx(L, ins, b, -int(vals[i]), a, t)
                b.check_complete()
            else:                                             # arrive, arrive_drop
                count = 1
                if "expect_tx" in mods:
                    _tx(L, ins, b, int(vals[i]), a, t)
                elif vals is not None:
                    count = int(vals[i])
                    if not 1 <= count <= MAX_COUNT:
                        raise PtxBarrierError(f"{L.where(ins)}: mbarrier.arrive count must be in [1, {MAX_COUNT}]; "
                                              f"got {count} (by {L.who(t)})")
                if count > b.pending:
                    raise PtxBarrierError(f"{L.where(ins)}: {count} arrival(s) on the mbarrier at {_name(L, a)} with "
                                          f"{b.pending} pending in phase {b.phase} (by {L.who(t)}; more arrivals "
                                          f"than its count)")
                tokens[i] = np.uint64((b.phase & 0xFFFFFFFF) | (b.pending << 32))
                if kind == "arrive_drop":
                    b.expected -= count
                b.pending -= count
                b.check_complete()
        if token is not None:
            token(th, tokens)
        L.progress += 1
    return run


def _wait(L, ins, a_op, wait_arg, out, parity: bool):
    mask = np.uint64(1 if parity else 0xFFFFFFFF)

    def run(sel):
        th = L.threads(sel)
        addrs = shared_offsets(L, ins, a_op, sel, 8, 8, "mbarrier")
        w = np.broadcast_to(wait_arg(sel), th.shape).astype(np.uint64)
        table = _table(L)
        slots = L.slot_of[th]
        keys, first, inv = np.unique(L.slot_block[slots] * (1 << 32) + addrs, return_index=True, return_inverse=True)
        bars = [table.get((key >> 32, key & 0xFFFFFFFF)) for key in keys.tolist()]   # each named barrier once
        missing = [i for b, i in zip(bars, first.tolist()) if b is None]
        if missing:                           # the first thread naming no live barrier
            t = int(th[min(missing)])
            _live(L, ins, t, int(addrs[min(missing)]))
        phase = np.array([b.phase for b in bars], np.int64)[inv]
        done = (phase.astype(np.uint64) & mask) != (w & mask)
        warp = L.local_index[th] // 32
        # each (barrier, warp) ends waiting or not as its last thread in order found it
        pair = inv.astype(np.int64) * (L.tpb // 32 + 1) + warp
        rev = pair[::-1]
        _, last = np.unique(rev, return_index=True)
        last = len(pair) - 1 - last
        for j in last.tolist():
            (bars[inv[j]].waiters.discard if done[j] else bars[inv[j]].waiters.add)(int(warp[j]))
        if L.async_obs is not None:           # a thread that saw a phase complete has seen every one before it
            d = np.array([b.d for b in bars], np.int64)[inv]
            rows = (slots * L.max_mbar + d) * L.tpb + L.local_index[th]
            L.async_obs[rows[done]] = (phase - 1)[done]
        out(th, done)
        if not done.all():
            scheduler.yield_warps(L, th[~done])
    return run


def copy_landed(L, ins, t: int, addr: int, flat: np.ndarray, slot=None) -> None:
    """Under race: the shared bytes ``flat`` (flat indices) were written by an async-proxy copy that
    completes on the barrier at ``addr`` of block slot ``slot`` (default: thread ``t``'s) in its current
    phase; a generic access to them by a thread that has not observed that phase complete is a race
    (checks.hopper_access)."""
    if L.async_bid is None:
        return
    b = _live(L, ins, t, addr, slot)
    L.async_bid[flat] = b.d
    L.async_phase[flat] = b.phase


def deadlock_why(L, why: str) -> str:
    """The deadlock message's reason: ``why``, or, when warps wait on mbarriers, the barriers (symbol,
    address, block, phase, pending arrivals, tx-count) and the warps that wait on each."""
    table = L.ext.get("mbarrier")
    if not table:
        return why
    waits = [(key, b) for key, b in sorted(table.items()) if b.waiters]
    if not waits:
        return why
    parts = [f"mbarrier {_name(L, a)} of {L.block_name(blk)} in phase {b.phase} ({b.pending} of {b.expected} "
             f"arrivals pending, tx-count {b.tx}) waited on by warp(s) {', '.join(map(str, sorted(b.waiters)))}"
             for (blk, a), b in waits]
    return "every running warp waits on an mbarrier phase that cannot complete: " + "; ".join(parts[:8])
