"""Memory instructions: ``ld``/``ldu``, ``st``, ``atom``/``red``, ``cp.async`` and the address side of ``ldmatrix``.

PTX ISA, Data Movement and Conversion Instructions (ld, ldu, st, cp.async, cp.async.commit_group,
cp.async.wait_group) and Parallel Synchronization and Communication Instructions (atom, red); the
data side of ``ldmatrix`` is the semantics handler (refsim.ptx.semantics.warp).

An access, from operand to bytes::

    [%rd4+16]  --address()-->  uint64 per thread  --resolve()-->  (mask, typed view, element index, space)
                                                                  one tuple per backing buffer:
    generic:  shared window -> the block's shared bytes; local window -> the thread's local bytes;
              anything else -> global (the launch's buffers, GlobalMemory.locate)
    checks:   address % access size != 0  -> PtxMisalignedError (the hardware faults)
              outside every buffer        -> PtxMemoryError naming line, block, thread, address

Statistics: global bytes read/written; per warp-level shared access the number of wavefronts
(:func:`count_wavefronts`). Atomics on one address are applied one after another in thread order
(float adds, whose result depends on that order, in ``atomic_order`` when the launch gives one; the
most contenders one address saw in one step is ``LaunchStats.float_atomic_contention``);
``cp.async`` reads its source at once and lands in shared memory at the covering ``wait_group``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refsim.ptx import checks, scheduler, semantics
from refsim.ptx.errors import PtxMemoryError, PtxMisalignedError, PtxUnsupportedError, error, message
from refsim.ptx.memory import LOCAL_WINDOW, SHARED_WINDOW, WINDOW_BYTES, read_only_error, typed
from refsim.ptx.operands import bits, convert, dtype, flatten, reader, symbol_address, writer
from refsim.ptx.parse import Instruction
from refsim.ptx.semantics import warp as warp_semantics

__all__ = ["ld", "st", "atom", "red", "cp", "ldmatrix", "complete_async", "address", "resolve", "shared_access",
           "count_wavefronts", "form", "Access", "SPACES"]

SPACES = ("global", "shared", "local", "param", "const")


# ---------------------------------------------------------------------------------------- addresses
def address(L, op, ins: Instruction, space: str):
    """``sel -> uint64 addresses`` of an address operand ``[base+offset]`` in ``space``."""
    if op[0] != "addr":
        raise PtxUnsupportedError(f"{L.where(ins)}: expected an address operand [..]")
    _, base, off = op
    if base is None:
        c = np.uint64(off % 2**64)
        return lambda sel: np.asarray(c)
    if base[0] == "sym":
        sp, a = symbol_address(L, base[1], ins)
        if space not in ("generic", sp) and not (space == "const" and sp == "global"):
            raise PtxUnsupportedError(f"{L.where(ins)}: symbol {base[1]} is in .{sp}, not .{space}")
        if space == "generic" and sp in ("shared", "local"):
            a += SHARED_WINDOW if sp == "shared" else LOCAL_WINDOW
        c = np.uint64((a + off) % 2**64)
        return lambda sel: np.asarray(c)
    rbits = L.k.registers[base[1]].bits
    r = reader(L, base, "u64" if rbits == 64 else "u32", ins)
    o = np.uint64(off % 2**64)
    if rbits == 64:
        return lambda sel: r(sel) + o
    return lambda sel: (r(sel).astype(np.uint64) + o) & np.uint64(0xFFFFFFFF)


def fault(L, ins, sel, bad, addr, what, cls=PtxMemoryError):
    """Raise ``cls`` for the first thread of ``sel`` whose access is ``bad``."""
    idx = np.arange(L.T)[sel] if isinstance(sel, slice) else np.asarray(sel)
    t = int(np.broadcast_to(idx, bad.shape)[bad][0])
    a = int(np.broadcast_to(addr, bad.shape)[bad][0])
    raise cls(f"{L.where(ins)}: {message('fault', what=what, addr=a, who=L.who(t))}")


def resolve(L, ins, sel, space: str, addr: np.ndarray, nbytes: int, esize: int):
    """Group accesses by backing buffer: list of (mask, typed view, element index (n,), space)."""
    addr = np.broadcast_to(np.asarray(addr, np.uint64), (L.count(sel),))
    if nbytes > 1 and (addr % np.uint64(nbytes)).any():
        fault(L, ins, sel, (addr % np.uint64(nbytes)) != 0, addr,
              message("misaligned", nbytes=nbytes, space=space), PtxMisalignedError)
    out = []
    if space == "generic":
        sh = (addr >= SHARED_WINDOW) & (addr < SHARED_WINDOW + WINDOW_BYTES)
        lo = (addr >= LOCAL_WINDOW) & (addr < LOCAL_WINDOW + WINDOW_BYTES)
        gl = ~sh & ~lo
        for m, sp, delta in ((gl, "global", 0), (sh, "shared", SHARED_WINDOW), (lo, "local", LOCAL_WINDOW)):
            if m.any():
                out.extend(_resolve_space(L, ins, sel, sp, addr - np.uint64(delta), nbytes, esize, m,
                                          cluster=sp == "shared" and _generic_mapa(L)))
        return out
    if space == "const":
        space = "global"
    return _resolve_space(L, ins, sel, space, addr, nbytes, esize, None)


def _generic_mapa(L) -> bool:
    """Whether the launch's kernel holds a generic ``mapa`` (refsim.ptx.hopper.dsmem), computed once."""
    v = L.ext.get("generic_mapa")
    if v is None:
        from refsim.ptx.hopper import dsmem

        v = L.ext["generic_mapa"] = dsmem.has_generic_mapa(L.k)
    return v


def _resolve_space(L, ins, sel, space, addr, nbytes, esize, mask, cluster: bool = False):
    n = L.count(sel)
    m = np.ones(n, bool) if mask is None else mask
    if space == "shared" and (cluster or "shared::cluster" in ins.mods):   # distributed shared memory
        from refsim.ptx.hopper import dsmem

        flat = dsmem.flat_offsets(L, ins, sel, m, addr, nbytes)
        return [(m, typed(L.shared, esize), (flat // np.uint64(esize)).astype(np.int64), "shared")]
    if space == "global":
        bi, ok = L.gmem.locate(addr, nbytes)
        bad = m & ~ok
        if bad.any():
            fault(L, ins, sel, bad, addr, message("oob_global", nbytes=nbytes))
        res = []
        for b in np.unique(bi[m]):
            mm = m & (bi == b)
            view = L.gmem.view(int(b), esize)
            ei = ((addr[mm] - np.uint64(L.gmem.bases[int(b)])) // np.uint64(esize)).astype(np.int64)
            res.append((mm, view, ei, "global"))
        return res
    if space == "shared":
        bad = m & (addr + np.uint64(nbytes) > np.uint64(L.shared_size))
        if bad.any():
            fault(L, ins, sel, bad, addr, message("oob_shared", nbytes=nbytes, shared=L.shared_size))
        th = L.threads(sel)[m]
        flat = L.slot_of[th].astype(np.uint64) * np.uint64(L.shared_stride) + addr[m]
        return [(m, typed(L.shared, esize), (flat // np.uint64(esize)).astype(np.int64), "shared")]
    if space == "local":
        bad = m & (addr + np.uint64(nbytes) > np.uint64(L.k.local_bytes))
        if bad.any():
            fault(L, ins, sel, bad, addr, message("oob_local", nbytes=nbytes))
        th = L.threads(sel)[m]
        flat = th.astype(np.uint64) * np.uint64(L.local_stride) + addr[m]
        return [(m, typed(L.local, esize), (flat // np.uint64(esize)).astype(np.int64), "local")]
    if space == "param":
        bad = m & (addr + np.uint64(nbytes) > np.uint64(L.param.size - 16))
        if bad.any():
            fault(L, ins, sel, bad, addr, message("oob_param", nbytes=nbytes))
        return [(m, typed(L.param, esize), (addr[m] // np.uint64(esize)).astype(np.int64), "param")]
    raise PtxUnsupportedError(f"{L.where(ins)}: state space .{space} is not supported")


def state_space(ins: Instruction) -> str:
    """The state-space modifier of a memory instruction (``generic`` when absent)."""
    for m in ins.mods:
        base = m.split("::")[0]
        if base in SPACES:
            return base
    return "generic"


def vector_width(ins: Instruction) -> int:
    for m in ins.mods:
        if m in ("v2", "v4", "v8"):
            return int(m[1:])
    return 1


@dataclass(frozen=True)
class Access:
    """The static form of one ``ld``/``ldu``/``st``/``atom``/``red``, decoded once (:func:`form`) for
    both executors.

    space: the state space (``generic`` when none is written); type: the element type; esize: element
    bytes; vec: vector width (1, 2, 4, 8); op: the atomic operation (atom/red; None otherwise); noftz:
    ``.noftz``; spin: the launch's spin check applies (ld.volatile/.relaxed/.acquire; atom.cas/.exch,
    and an atom with a result under .acquire/.acq_rel/.relaxed); addr: the address operand; data: the
    data operands (ld: the ``vec`` destinations, st: the ``vec`` sources, atom/red: b{, c}); result:
    atom's destination (None otherwise). A ``cp.async`` copy: space ``shared``, esize the cp-size (4, 8
    or 16 bytes), addr the shared destination, data the global source address{, src-size or ignore-src}.
    """

    space: str
    type: str
    esize: int
    vec: int
    addr: tuple
    data: tuple
    op: str | None = None
    noftz: bool = False
    spin: bool = False
    result: tuple | None = None

    @property
    def nbytes(self) -> int:
        """Bytes per thread: esize * vec."""
        return self.esize * self.vec

    @property
    def ordered(self) -> bool:
        """An atomic whose result depends on the order of the accesses to one address (a float add)."""
        return self.op == "add" and self.type in FLOAT_ATOMIC_TYPES


def form(ins: Instruction) -> Access:
    """The :class:`Access` of ``ins`` (ld, ldu, st, atom, red, a cp.async copy); PtxUnsupportedError with the reason
    (without the location: each executor names kernel and line) for a form refsim does not execute."""
    if ins.opcode != "cp":
        space, vec, t = state_space(ins), vector_width(ins), ins.types[0]
        esize = max(1, bits(t) // 8)
    if ins.opcode in ("atom", "red"):
        ops = [m for m in ins.mods if m in _ATOMIC_OPS]
        if len(ops) != 1 or vec != 1:
            raise PtxUnsupportedError("atomic operation not understood")
        op, noftz = ops[0], "noftz" in ins.mods
        semantics.atomic.form(op, t, noftz)              # refuses what atom_apply does not execute
        flat = flatten(ins.operands)
        returns = ins.opcode == "atom"
        result, rest = (flat[0], flat[1:]) if returns else (None, flat)
        nsrc = 2 if op == "cas" else 1                   # (an .L2::cache_hint policy operand may follow)
        if len(rest) < 1 + nsrc:
            raise PtxUnsupportedError(f"atom.{op}: an address and {nsrc} source operand(s) expected")
        spin = op in ("cas", "exch") or any(m in ("acquire", "acq_rel", "relaxed") for m in ins.mods) and returns
        return Access(space, t, esize, 1, rest[0], tuple(rest[1:1 + nsrc]), op, noftz, spin, result)
    if ins.opcode == "cp":                               # cp.async copy: [d], [s], cp-size{, src-size|ignore-src}
        ops = list(ins.operands)
        if any(m.startswith("L2::cache_hint") for m in ins.mods):
            ops = ops[:-1]                               # the cache policy operand
        if len(ops) < 3 or ops[2][0] != "imm" or ops[2][1] not in (4, 8, 16):
            raise PtxUnsupportedError("cp-size must be 4, 8 or 16")
        return Access("shared", "b8", int(ops[2][1]), 1, ops[0], tuple(ops[1:2] + ops[3:4]))
    data, addr, role = (0, 1, "destinations") if ins.opcode in ("ld", "ldu") else (1, 0, "sources")
    ops = flatten([ins.operands[data]])
    if len(ops) != vec:
        raise PtxUnsupportedError(f"{vec} {role} expected")
    spin = ins.opcode != "st" and any(m in ("volatile", "acquire", "relaxed") for m in ins.mods)
    return Access(space, t, esize, vec, ins.operands[addr], tuple(ops), spin=spin)


def _form(L, ins: Instruction) -> Access:
    """:func:`form`, its refusal naming the kernel and line."""
    try:
        return form(ins)
    except PtxUnsupportedError as e:
        raise PtxUnsupportedError(f"{L.where(ins)}: {e}") from None


def _shared_bytes_of(idx_elems, esize, vec):
    return (idx_elems[:, None] * esize + np.arange(esize * vec)).reshape(len(idx_elems), -1)


def shared_access(L, ins, sel, mm, ei, esize: int, vec: int, *, write: bool) -> None:
    """The checks and the statistics of one ld/st's shared-memory part (elements ``ei`` of ``esize``
    bytes, ``vec`` per access): poison and race checking when on, then the wavefront count."""
    if L.hbytes is not None:
        checks.hopper_access(L, ins, sel, mm, _shared_bytes_of(ei, esize, vec))
    if L.poison or L.race:
        fb = _shared_bytes_of(ei, esize, vec)
        if write:
            if L.race:
                checks.race_write(L, ins, sel, mm, fb)
            if L.poison:
                checks.shared_written(L, fb)
            if L.gen_w is not None:
                L.gen_w[fb] = L.threads(sel)[mm][:, None]
        else:
            if L.poison:
                checks.shared_read(L, ins, sel, mm, fb)
            if L.race:
                checks.race_read(L, ins, sel, mm, fb)
    count_wavefronts(L, sel, ei * esize, esize * vec, mm)


def count_wavefronts(L, sel, first_byte: np.ndarray, nbytes: int, mm) -> None:
    """Shared wavefronts of one warp-level access: per warp and per phase (the lanes whose
    accesses fit in 128 bytes: 32 lanes for <= 4-byte, 16 for 8-byte, 8 for 16-byte accesses),
    the largest number of distinct 4-byte words any of the 32 banks must deliver."""
    th = L.threads(sel)[mm]
    if th.size == 0:
        return
    words = (first_byte[:, None] // 4 + np.arange(max(1, nbytes // 4))).astype(np.int64)
    phase = (th % 32) // max(1, 128 // max(nbytes, 4))
    group = ((th >> 5) * 32 + phase)[:, None] * 32 + words % 32          # (warp, phase, bank)
    key = np.sort((group << 32 | words).reshape(-1))
    key = key[np.r_[True, key[1:] != key[:-1]]]                          # distinct words per group
    grp = key >> 32
    starts = np.flatnonzero(np.r_[True, grp[1:] != grp[:-1]])
    per_bank = np.diff(np.r_[starts, grp.size])                           # distinct words per bank
    wp = grp[starts] >> 5                                                 # (warp, phase)
    wstarts = np.flatnonzero(np.r_[True, wp[1:] != wp[:-1]])
    L.stats.shared_wavefronts += int(np.maximum.reduceat(per_bank, wstarts).sum())
    L.stats.shared_requests += int(np.unique(th >> 5).size)


def _writable(L, ins: Instruction, parts: list, addr: np.ndarray) -> list:
    """``parts`` (from :func:`resolve`) if every global buffer they write is writeable, else the
    read-only error (:func:`refsim.ptx.memory.read_only_error`) naming the first such buffer: an
    ``st``, ``atom`` or ``red`` writes nothing before it is raised."""
    for mm, view, _, sp in parts:
        if sp == "global" and not view.flags.writeable:
            buffer = int(L.gmem.locate(addr[mm][:1], 1)[0][0])
            raise read_only_error(L.where(ins), L.gmem.names[buffer])
    return parts


# ---------------------------------------------------------------------------------------- ld / st
def ld(L, ins: Instruction, idx: int):
    """``ld{.weak,.volatile,.relaxed,.acquire}{.space}{.vN}.type d, [a]`` (and ``ldu``)."""
    f = _form(L, ins)
    space, t, esize, vec, nbytes, spin = f.space, f.type, f.esize, f.vec, f.nbytes, f.spin
    addr_of = address(L, f.addr, ins, space)
    writers = [writer(L, o, t, ins) for o in f.data]

    base = ins.operands[1][1] if ins.operands[1][0] == "addr" else None
    if space == "param" and (base is None or base[0] == "sym"):
        a = int(addr_of(None))
        if a + nbytes > L.param.size - 16 or a % nbytes:
            raise PtxMemoryError(f"{L.where(ins)}: .param access at 0x{a:x} outside the parameters")
        vals = [np.asarray(typed(L.param, esize)[a // esize + j]) for j in range(vec)]

        def run_param(sel):
            for w, v in zip(writers, vals):
                w(sel, v)
        return run_param

    def run(sel):
        n = L.count(sel)
        addr = np.broadcast_to(addr_of(sel), (n,))
        out = np.zeros((n, vec), dtype(esize * 8))
        for mm, view, ei, sp in resolve(L, ins, sel, space, addr, nbytes, esize):
            gi = ei[:, None] + np.arange(vec)
            if sp == "shared":
                shared_access(L, ins, sel, mm, ei, esize, vec, write=False)
            elif sp == "global":
                L.stats.global_bytes_read += int(mm.sum()) * nbytes
            out[mm] = view[gi]
        for j, w in enumerate(writers):
            w(sel, out[:, j])
        if spin:
            scheduler.spin_check(L, idx, sel, out)
    return run


def st(L, ins: Instruction, idx: int):
    """``st{.weak,.volatile,.relaxed,.release}{.space}{.vN}.type [a], b``."""
    f = _form(L, ins)
    space, t, esize, vec, nbytes = f.space, f.type, f.esize, f.vec, f.nbytes
    addr_of = address(L, f.addr, ins, space)
    readers = [reader(L, o, t, ins) for o in f.data]
    if space == "param":
        raise PtxUnsupportedError(f"{L.where(ins)}: st.param (device-function calls) is not supported")

    def run(sel):
        n = L.count(sel)
        addr = np.broadcast_to(addr_of(sel), (n,))
        vals = np.stack([np.broadcast_to(convert(r(sel), esize * 8, False), (n,)) for r in readers], axis=1)
        for mm, view, ei, sp in _writable(L, ins, resolve(L, ins, sel, space, addr, nbytes, esize), addr):
            gi = ei[:, None] + np.arange(vec)
            if sp == "shared":
                shared_access(L, ins, sel, mm, ei, esize, vec, write=True)
            elif sp == "global":
                L.stats.global_bytes_written += int(mm.sum()) * nbytes
            view[gi] = vals[mm]
        L.progress += 1
    return run


# ---------------------------------------------------------------------------------------- atom / red
_ATOMIC_OPS = ("and", "or", "xor", "cas", "exch", "add", "inc", "dec", "min", "max")
#: Types whose atomic add gives a result that depends on the order of the adds (rounding).
FLOAT_ATOMIC_TYPES = ("f16", "f16x2", "bf16", "bf16x2", "f32", "f64")


def _atomic(L, ins: Instruction, idx: int):
    f = _form(L, ins)
    space, t, esize, aop, noftz, spin, order_dependent = f.space, f.type, f.esize, f.op, f.noftz, f.spin, f.ordered
    w = writer(L, f.result, t, ins) if f.result is not None else None
    addr_of = address(L, f.addr, ins, space)
    rb = reader(L, f.data[0], t, ins)
    rc = reader(L, f.data[1], t, ins) if len(f.data) > 1 else None

    def run(sel):
        n = L.count(sel)
        addr = np.broadcast_to(addr_of(sel), (n,))
        b = np.broadcast_to(rb(sel), (n,))
        c = np.broadcast_to(rc(sel), (n,)) if rc is not None else None
        old_all = np.zeros(n, dtype(esize * 8))
        for mm, view, ei, sp in _writable(L, ins, resolve(L, ins, sel, space, addr, esize, esize), addr):
            pos = np.flatnonzero(mm)
            rank = _rank_per_address(ei)
            if order_dependent and len(rank):
                contenders = int(rank.max()) + 1
                L.stats.float_atomic_contention = max(L.stats.float_atomic_contention, contenders)
                if L.atomic_order is not None and contenders > 1:
                    rank = _reorder(rank, ei, L.atomic_order)
            for r in range(int(rank.max()) + 1 if len(rank) else 0):
                k = rank == r
                e = ei[k]
                old = view[e].copy()
                new = semantics.atom_apply(aop, t, old, b[pos[k]], None if c is None else c[pos[k]],
                                           noftz=noftz, space="shared" if sp == "shared" else "global")
                view[e] = np.asarray(new, view.dtype)
                if (old != view[e]).any():
                    L.progress += 1
                old_all[pos[k]] = old
            if sp == "global":
                L.stats.global_bytes_read += len(ei) * esize
                L.stats.global_bytes_written += len(ei) * esize
            elif sp == "shared" and L.poison:
                checks.shared_written(L, _shared_bytes_of(ei, esize, 1))
        if w is not None:
            w(sel, old_all)
        if spin:
            scheduler.spin_check(L, idx, sel, old_all)
    return run


def _rank_per_address(ei: np.ndarray) -> np.ndarray:
    """For each access, how many accesses to the same element come before it in thread order
    (round r applies every access of rank r: one per address, so one NumPy scatter each)."""
    order = np.argsort(ei, kind="stable")
    e_sorted = ei[order]
    first = np.r_[0, np.flatnonzero(np.diff(e_sorted)) + 1]
    rank = np.empty(len(ei), np.int64)
    starts = np.zeros(len(ei), np.int64)
    starts[first] = first
    np.maximum.accumulate(starts, out=starts)
    rank[order] = np.arange(len(ei)) - starts
    return rank


def _reorder(rank: np.ndarray, ei: np.ndarray, order: tuple) -> np.ndarray:
    """The rank each access is applied at when the contenders of one address land in ``order``
    (a permutation of 0..len-1 of thread-order ranks): an address with m contenders applies its
    ranks in the order of ``order`` restricted to ranks < m; ranks beyond ``order`` follow it."""
    n = len(order)
    _, inv, counts = np.unique(ei, return_inverse=True, return_counts=True)
    m_of = np.minimum(counts[inv], n)                     # contenders of each access's address, capped
    out = rank.copy()
    for m in np.unique(m_of):
        position = np.zeros(m, np.int64)
        position[[p for p in order if p < m]] = np.arange(m)
        sel = (m_of == m) & (rank < m)
        out[sel] = position[rank[sel]]
    return out


def atom(L, ins: Instruction, idx: int):
    """``atom{.sem}{.scope}{.space}.op.type d, [a], b{, c}``: the old value to ``d``."""
    return _atomic(L, ins, idx)


def red(L, ins: Instruction, idx: int):
    """``red{.sem}{.scope}{.space}.op.type [a], b``: ``atom`` without a result."""
    return _atomic(L, ins, idx)


# ---------------------------------------------------------------------------------------- cp.async
def cp(L, ins: Instruction, idx: int):
    """``cp.async.{ca,cg}.shared.global [d], [s], size{, src-size | , ignore-src}{, cache-policy}``,
    ``cp.async.commit_group``, ``cp.async.wait_group N``, ``cp.async.wait_all``."""
    mods = ins.mods
    if not mods or mods[0] != "async":
        raise PtxUnsupportedError(f"{L.where(ins)}: {ins.name} is not supported")
    if "commit_group" in mods:
        return lambda sel: L.group.__setitem__(sel, L.group[sel] + 1)
    if "wait_group" in mods or "wait_all" in mods:
        if "wait_all" in mods:
            def run_all(sel):
                L.group[sel] += 1
                L.land_async(L.threads(sel), 0)
            return run_all
        nr = reader(L, ins.operands[0], "u32", ins)
        return lambda sel: L.land_async(L.threads(sel), int(np.asarray(nr(sel)).max()))
    if "bulk" in mods or "mbarrier" in mods:
        raise PtxUnsupportedError(f"{L.where(ins)}: {ins.name} is not supported")
    f = _form(L, ins)
    dst_of = address(L, f.addr, ins, "shared")
    src_of = address(L, f.data[0], ins, "global")
    size = f.esize
    srcsize = ignore = None
    if len(f.data) > 1:
        o = f.data[1]
        if o[0] == "reg" and L.k.registers[o[1]].bits == 1:
            ignore = reader(L, o, "pred", ins)
        else:
            srcsize = reader(L, o, "u32", ins)

    def run(sel):
        th = L.threads(sel)
        n = len(th)
        dst = np.broadcast_to(dst_of(sel), (n,))
        src = np.broadcast_to(src_of(sel), (n,))
        ss = np.full(n, size, np.int64)
        if srcsize is not None:
            ss = np.broadcast_to(srcsize(sel), (n,)).astype(np.int64)
            if (ss > size).any():
                raise error("src_size", L.where(ins), size=size)
        if ignore is not None:
            ss = np.where(np.broadcast_to(ignore(sel), (n,)), 0, size)
        data = np.zeros((n, size), np.uint8)
        rd = ss > 0
        if rd.any():
            sub = th[rd]
            parts = resolve(L, ins, sub, "global", src[rd], size if (ss[rd] == size).all() else 1, 1)
            for mm, view, ei, sp in parts:
                gi = ei[:, None] + np.arange(size)
                keep = np.arange(size) < ss[rd][mm][:, None]
                gi = np.where(keep, gi, ei[:, None])
                rows = np.flatnonzero(rd)[mm]
                data[rows] = np.where(keep, view[gi], 0)
                L.stats.global_bytes_read += int(ss[rd][mm].sum())
        mm, view, ei, sp = resolve(L, ins, sel, "shared", dst, size, 1)[0]
        if L.race:
            L.pending[ei[:, None] + np.arange(size)] += 1
        L.async_records.append({"thr": th.copy(), "gid": L.group[th].copy(), "dst": ei.copy(),
                                "data": data, "line": ins.line})
    return run


def complete_async(L, th: np.ndarray, n_allowed: int | None) -> None:
    """Finish the cp.async copies of threads ``th`` older than their ``n_allowed`` newest groups."""
    if not L.async_records:
        return
    mask = np.zeros(L.T, bool)
    mask[th] = True
    keep = []
    for rec in L.async_records:
        m = mask[rec["thr"]]
        if n_allowed is not None:
            m &= rec["gid"] < L.group[rec["thr"]] - n_allowed
        if m.any():
            size = rec["data"].shape[1]
            fb = rec["dst"][m][:, None] + np.arange(size)
            L.shared[fb] = rec["data"][m]
            if L.poison:
                checks.shared_written(L, fb)
            if L.race:
                L.pending[fb] -= 1
            L.progress += 1
            if (~m).any():
                keep.append({k: (v[~m] if isinstance(v, np.ndarray) else v) for k, v in rec.items()})
        else:
            keep.append(rec)
    L.async_records = keep


# ---------------------------------------------------------------------------------------- ldmatrix
def ldmatrix(L, ins: Instruction, idx: int):
    """``ldmatrix.sync.aligned.m8n8.{x1,x2,x4}{.trans}.shared.b16 d, [a]``: the address side (lanes
    8i..8i+7 give the rows of matrix i); the register layout is the semantics handler's."""
    h = L.handlers[idx]
    num = next(int(m[1:]) for m in ins.mods if m in ("x1", "x2", "x4"))
    writers = [writer(L, o, "b32", ins) for o in flatten([ins.operands[0]])]
    space = "shared" if state_space(ins) == "shared" else "generic"
    addr_of = address(L, ins.operands[1], ins, space)
    row_lanes = warp_semantics.ldmatrix_row_lanes(num).reshape(-1)

    def run(sel):
        warps, lanes, active = L.warps(sel)
        if not active.all():
            raise error("partial_ldmatrix", L.where(ins))
        W = len(warps)
        src_lanes = lanes[:, row_lanes].reshape(-1)                    # (W * num * 8,) matrix-major
        addr = np.broadcast_to(addr_of(src_lanes), src_lanes.shape)
        rows = np.zeros((len(src_lanes), 8), np.uint16)
        for mm, view, ei, sp in resolve(L, ins, src_lanes, space, addr, 16, 2):
            rows[mm] = view[ei[:, None] + np.arange(8)]
            if sp == "shared":
                fb = _shared_bytes_of(ei, 2, 8)
                if L.race:
                    checks.race_read(L, ins, src_lanes, mm, fb)
                if L.poison:
                    checks.shared_read(L, ins, src_lanes, mm, fb, who=False)
                L.stats.shared_wavefronts += W * num
                L.stats.shared_requests += W
        d, = h.fn(rows.reshape(W, num, 8, 8))
        flat_lanes = lanes.reshape(-1)
        for j, w in enumerate(writers):
            w(flat_lanes, d[..., j].reshape(-1))
    return run
