"""``wgmma`` (sm_90a): ``mma_async``, ``fence``, ``commit_group``, ``wait_group`` — one definition for
both executors (see :mod:`refsim.ptx.hopper` for the launch view it uses).

Spec
----
forms           ``wgmma.mma_async.sync.aligned.m64n<N>k<K>[.satfinite].<d>.<a>.<b>[.and.popc]`` with the
                operands of the PTX ISA (9.7.15.5 "wgmma.mma_async"):
                    f16/bf16  d, a-desc, b-desc, scale-d, imm-scale-a, imm-scale-b, imm-trans-a, imm-trans-b
                    f16/bf16  d, {a0..a3}, b-desc, scale-d, imm-scale-a, imm-scale-b, imm-trans-b
                    tf32/fp8  d, a-desc | {a0..a3}, b-desc, scale-d, imm-scale-a, imm-scale-b
                    s8/u8/b1  d, a-desc | {a0..a3} (not b1), b-desc, scale-d
                every kind and N of :func:`refsim.arith.wgmma.modelled`; anything else is refused at
                load (``PtxUnsupportedError`` naming kernel, PTX line and reason).
warpgroup       warps 4g..4g+3 of a block (128 threads) execute it together: every lane of each warp
                active (``.aligned``), the block has all 128 threads of the warpgroup and none has
                exited; otherwise ``PtxUnsupportedError`` ("partial warpgroup"). Each warp may arrive in
                its own step (the ``random`` schedule): warp q of the warpgroup owns rows 16q..16q+15
                of A (register form) and of D, which depend on nothing else of the other warps, so a
                warp's rows are computed when it issues. Descriptors and scale-d must be equal in every
                thread of the warpgroup (checked over the warps of the step).
operands        descriptors: :func:`refsim.formats.smem_layouts.matrix_addresses` (its refusals, e.g. a
                nonzero base offset, become ``PtxUnsupportedError`` with kernel/line); A (64, K) read
                K-major, or MN-major when imm-trans-a = 1; B (N, K) likewise with imm-trans-b; b1 rows
                are 32 bytes of bits, element k at bit k % 8 of byte k // 8 (assumed, as PTX packs
                .b1 elements into registers from bit 0; not measured). Bytes outside the block's
                shared memory: ``PtxMemoryError``.
fragments       (PTX ISA "Register Fragments and Shared Memory Matrix Layouts" for wgmma; per warp the
                mma.m16n8k* layouts) lane l of warp q, g = l // 4, c = l % 4:
                    D f32/s32  register i: row 16q + g + 8 (i // 2 % 2), column 8 (i // 4) + 2c + i % 2
                    D f16      register r holds elements i = 2r (low half), 2r + 1 (high half)
                    A 16-bit   register r, half e: row 16q + g + 8 (r % 2), column 2c + 8 (r // 2) + e
                    A tf32     register r: row 16q + g + 8 (r % 2), column c + 4 (r // 2)
                    A 8-bit    register r, byte e: row 16q + g + 8 (r % 2), column 4c + 16 (r // 2) + e
arithmetic      :func:`refsim.arith.wgmma.wgmma` (scale-d = 0: C is +0), computed when the warp issues.
async           per warp: issued wgmmas join the open group; ``commit_group`` closes it (an empty one
                too); ``wait_group N`` completes the oldest groups until at most N are pending.
race=True       (``PtxRaceError``; no such check without it, as a GPU runs such code silently)
                - a warp's first ``wgmma.mma_async`` with no ``wgmma.fence`` before it;
                - a register a wgmma reads (accumulator or A fragment) written by another instruction
                  since the warp's last ``wgmma.fence`` (or since the wgmma that last wrote it) — the
                  ISA's fence rule; seen as a changed value, so a write of the same value passes;
                - an accumulator register of a wgmma not yet complete (no ``wait_group`` covering it)
                  read or written by another instruction: reads are seen by the executors' register
                  read check (:func:`pending_check`), writes when the group completes (changed value);
                - a shared byte an incomplete wgmma reads, written by a store (:func:`smem_check`, in
                  the executors' race write check);
poison=True     every register the instruction reads (scale-d, descriptors, A fragments, accumulators,
                whatever scale-d says) must have been written (``PtxUninitializedError``).
not modelled    ``.sp`` (sparse) forms, b1 A from registers, descriptor base offsets other than 0.
"""

from __future__ import annotations

import functools
import re

import numpy as np

from refsim.arith import wgmma as arith
from refsim.errors import RefsimError
from refsim.formats import smem_layouts
from refsim.ptx.errors import PtxMemoryError, PtxRaceError, PtxUnsupportedError, error

__all__ = ["build", "state", "operand_slots", "pending_check", "pending_message", "smem_check", "smem_message"]

_SHAPE = re.compile(r"m64n(\d+)k(\d+)$")
_ELEM = {"f16": np.uint16, "bf16": np.uint16, "tf32": np.uint32, "e4m3": np.uint8, "e5m2": np.uint8,
         "s8": np.int8, "u8": np.uint8}
_ACC = {"f32": np.float32, "f16": np.float16, "s32": np.int32}
_PER_REG = {"f16": 2, "bf16": 2, "tf32": 1, "e4m3": 4, "e5m2": 4, "s8": 4, "u8": 4}


def _refuse(L, ins, why: str):
    return PtxUnsupportedError(f"{L.where(ins)}: {why}")


def build(L, ins, idx: int):
    """The step function ``run(threads)`` of wgmma instruction ``ins`` (index ``idx``) in launch ``L``."""
    kind = ins.mods[0] if ins.mods else ""
    if kind == "mma_async":
        return _MmaAsync(L, ins).run
    if ins.mods == ("fence", "sync", "aligned") and not ins.operands:
        return lambda th: _fence(L, ins, _threads(L, th))
    if ins.mods == ("commit_group", "sync", "aligned") and not ins.operands:
        return lambda th: _commit(L, ins, _threads(L, th))
    if ins.mods == ("wait_group", "sync", "aligned") and len(ins.operands) == 1 and ins.operands[0][0] == "imm":
        n = int(ins.operands[0][1])
        return lambda th: _wait(L, ins, _threads(L, th), n)
    raise _refuse(L, ins, "this wgmma form is not modelled (wgmma.mma_async/fence/commit_group/wait_group "
                          ".sync.aligned; .sp is not)")


def _threads(L, sel) -> np.ndarray:
    return np.arange(L.T)[sel] if isinstance(sel, slice) else np.asarray(sel, np.int64)


# ----------------------------------------------------------------------------------------------
# per-launch async state


class _State:
    """Per warp: open (uncommitted) wgmmas, committed groups (oldest first), fence snapshots."""

    def __init__(self, L):
        nw = L.T // 32
        self.open: list[list] = [[] for _ in range(nw)]
        self.groups: list[list] = [[] for _ in range(nw)]
        self.fenced = np.zeros(nw, bool)
        self.slots = operand_slots(L.k)                       # registers any wgmma of the kernel reads
        self.row = {s: i for i, s in enumerate(self.slots)}
        # race: per warp and wgmma register, its value at the last wgmma.fence or wgmma write
        self.snap = np.zeros((nw, max(1, len(self.slots)), 32), np.uint64) if L.race else None
        # race: per register slot and thread, 1 while the register is an accumulator of an incomplete wgmma
        self.pending = np.zeros((len(L.k.registers), L.T), np.uint8) if L.race and self.slots else None
        # race: per shared byte (L.shared's flat index), the incomplete wgmmas that read it
        self.smem = np.zeros(L.shared.size, np.int32) if self.pending is not None else None


def state(L) -> _State:
    """The launch's wgmma state (created on first use)."""
    s = L.ext.get("wgmma")
    if s is None:
        s = L.ext["wgmma"] = _State(L)
    return s


def operand_slots(kernel) -> tuple[int, ...]:
    """Register slots of every wgmma.mma_async accumulator and A fragment of ``kernel`` (sorted)."""
    out = set()
    for ins in kernel.instructions:
        if ins.opcode == "wgmma" and ins.mods[:1] == ("mma_async",) and len(ins.operands) >= 2:
            for op in ins.operands[:2]:
                if op[0] == "vec":
                    out.update(o[1] for o in op[1] if o[0] == "reg")
    return tuple(sorted(out))


def pending_check(L, ins, slot: int):
    """``threads -> None`` raising :class:`PtxRaceError` when a selected thread's register ``slot`` is an
    accumulator of a wgmma not yet complete (None when no check applies: no race, no wgmma in the
    kernel, ``slot`` no wgmma accumulator, or ``ins`` a wgmma itself). The interpreter's register
    readers call it; the compiled executor's C twin is the ``E_RACE_WGMMA`` check of its translator."""
    if not L.race or ins.opcode == "wgmma" or slot not in state(L).row:
        return None
    pend = state(L).pending[slot]

    def check(sel):
        hit = pend[sel]
        if hit.any():
            t = int(np.arange(L.T)[sel][hit != 0][0])
            raise PtxRaceError(pending_message(L.where(ins), L.k.registers[slot].name, L.who(t)))
    return check


def smem_check(L, ins, th: np.ndarray, flat_bytes: np.ndarray) -> None:
    """race=True: a shared-memory write by threads ``th`` of the bytes ``flat_bytes`` (one row per
    thread) that an incomplete wgmma reads raises :class:`PtxRaceError` (the first such thread and byte;
    the compiled executor's twin is ``E_RACE_WGMMA_SMEM`` in its race_write)."""
    st = L.ext.get("wgmma")
    if st is None or st.smem is None:
        return
    hit = st.smem[flat_bytes] > 0
    if hit.any():
        row = int(np.flatnonzero(hit.any(axis=1))[0])
        byte = int(flat_bytes[row][hit[row]][0])
        raise PtxRaceError(smem_message(L.where(ins), byte % L.shared_stride, L.who(int(th[row]))))


def smem_message(where: str, byte: int, who: str) -> str:
    """The race message of a shared write to a byte a pending wgmma reads (both executors)."""
    return (f"{where}: shared-memory write by {who} to byte 0x{byte:x}, which a wgmma.mma_async not yet complete "
            f"(no wgmma.wait_group covers it) reads")


def pending_message(where: str, register: str, who: str) -> str:
    """The race message of a register of an incomplete wgmma accessed by another instruction (both
    executors word for word)."""
    return (f"{where}: register {register} is an accumulator of a wgmma.mma_async not yet complete "
            f"(no wgmma.wait_group covers it) and is accessed by {who}")


# ----------------------------------------------------------------------------------------------
# the warpgroup


def _warps(L, ins, th: np.ndarray, what: str) -> np.ndarray:
    """The warps of the step, each with every lane active and its warpgroup whole and running."""
    warps = np.unique(th >> 5)
    if len(th) != 32 * len(warps):                 # th holds distinct threads: a lane is missing
        raise _refuse(L, ins, f"{what} executed by a partial warp (.aligned: all 128 threads of the "
                              f"warpgroup execute it)")
    first = warps * 32
    local = first % L.tpb - (first % L.tpb) % 128                       # first thread of the warpgroup, in the block
    bases = np.unique(first - (first % L.tpb) % 128)
    nthreads = L.block[0] * L.block[1] * L.block[2]
    short = local + 128 > nthreads
    if not short.any():
        gone = np.asarray(L.exited)[bases[:, None] + np.arange(128)].any(axis=1)
        if not gone.any():
            return warps
        w = int(bases[np.flatnonzero(gone)[0]] // 32)
    else:
        w = int(warps[np.flatnonzero(short)[0]])
    lw = (w * 32 % L.tpb) // 32 // 4 * 4
    raise _refuse(L, ins, f"{what} executed by a partial warpgroup (warps {lw}..{lw + 3} of the block must all run "
                          f"it; the block has {nthreads} threads; {L.who(w * 32)})")


def _lane_picker(flat: np.ndarray):
    """``pick(reg)`` -> ``reg[flat]``, ``pick(reg, v)``: ``reg[flat] = v``, for the thread indices ``flat`` of
    whole warpgroups; when they are runs of 128 threads at one distance (every block's warpgroup at the same
    place, as DeepGEMM's math warpgroups run), through a strided view instead of an index."""
    runs = flat.reshape(-1, 128) if flat.size % 128 == 0 else None
    if runs is None or not (runs == runs[:, :1] + np.arange(128)).all():
        return lambda reg, *v: reg.__setitem__(flat, v[0]) if v else reg[flat]
    starts = runs[:, 0]
    step = int(starts[1] - starts[0]) if len(starts) > 1 else 128
    if len(starts) > 1 and (step < 128 or (np.diff(starts) != step).any()):
        return lambda reg, *v: reg.__setitem__(flat, v[0]) if v else reg[flat]
    start, G = int(starts[0]), len(starts)

    def pick(reg, *v):
        view = np.lib.stride_tricks.as_strided(reg[start:], (G, 128), (step * reg.itemsize, reg.itemsize))
        if not v:
            return view.reshape(-1)
        view[...] = np.reshape(v[0], (G, 128)) if np.ndim(v[0]) else v[0]
    return pick


def _group_base(L, w: int) -> int:
    """The first thread of warp ``w``'s warpgroup (warps 4g..4g+3 of its block)."""
    t = w * 32
    return t - (t % L.tpb) % 128


def _fence(L, ins, th):
    warps = _warps(L, ins, th, "wgmma.fence")
    st = state(L)
    st.fenced[warps] = True
    if L.race and st.slots:
        lanes = warps[:, None] * 32 + np.arange(32)
        for s, i in st.row.items():
            st.snap[warps, i] = L.regs[s][lanes].astype(np.uint64)


def _commit(L, ins, th):
    st = state(L)
    for w in _warps(L, ins, th, "wgmma.commit_group").tolist():
        st.groups[w].append(st.open[w])
        st.open[w] = []


def _wait(L, ins, th, n: int):
    st = state(L)
    for w in _warps(L, ins, th, "wgmma.wait_group").tolist():
        while len(st.groups[w]) > n:
            for rec in st.groups[w].pop(0):
                _complete(L, ins, st, w, rec)


def _chain(st: _State, w: int, rec) -> None:
    """PTX ISA (wgmma.mma_async, "accumulator registers"): wgmma.mma_async instructions of one shape
    may accumulate into the same registers back to back without a wait between them (their order is
    kept). A pending wgmma of warp ``w`` whose accumulators the new wgmma ``rec`` chains on now expects
    the chained values when it completes; a chain of another shape stays a named race."""
    slots, values, _, shape, nd = rec
    new = dict(zip(slots[:nd], values[:nd]))                  # the accumulators this wgmma writes
    for older in [r for g in st.groups[w] for r in g] + st.open[w]:
        if older is None or older[3] != shape:
            continue
        for j, s in enumerate(older[0]):
            if j < older[4] and s in new:
                older[1][j] = new[s]


def _complete(L, ins, st: _State, w: int, rec) -> None:
    """One wgmma of warp ``w`` completes: under race, its accumulators must still hold what it wrote."""
    if not L.race:
        return
    slots, values, read = rec[:3]
    st.smem[read] -= 1
    lanes = w * 32 + np.arange(32)
    for s, v in zip(slots, values):
        st.pending[s, lanes] = 0
        if not np.array_equal(L.regs[s][lanes].astype(np.uint64), v):
            raise PtxRaceError(f"{L.where(ins)}: register {L.k.registers[s].name} (an operand register of a pending "
                               f"wgmma.mma_async) was written by another instruction before this wait_group "
                               f"completed it ({L.who(w * 32)})")


# ----------------------------------------------------------------------------------------------
# wgmma.mma_async


@functools.lru_cache(maxsize=None)
def _fragment_order(n: int) -> tuple[np.ndarray, np.ndarray]:
    """(rows <- fragments, fragments <- rows): index permutations of one warp's 16 x N accumulator
    elements between fragment order (lane l, element i: l * N/2 + i) and row order (row * N + column),
    the module spec's D layout (lane l = 4g + c, i = 4j + 2h + e: row g + 8h, column 8j + 2c + e)."""
    lane, i = np.meshgrid(np.arange(32), np.arange(n // 2), indexing="ij")
    g, c, j, h, e = lane // 4, lane % 4, i // 4, i // 2 % 2, i % 2
    to_row = ((g + 8 * h) * n + 8 * j + 2 * c + e).reshape(-1)          # fragment position -> row position
    from_frag = np.empty_like(to_row)
    from_frag[to_row] = np.arange(to_row.size)
    return from_frag, to_row


class _MmaAsync:
    """One static ``wgmma.mma_async``: its form checked once, ``run`` per step."""

    def __init__(self, L, ins):
        self.L, self.ins = L, ins
        mods = ins.mods
        m = _SHAPE.match(mods[3]) if len(mods) > 3 and mods[1:3] == ("sync", "aligned") else None
        rest = mods[4:] if m else ()
        self.satfinite = "satfinite" in rest
        popc = ("and", "popc")
        extra = tuple(x for x in rest if x != "satfinite")
        if m is None or len(ins.types) != 3 or extra not in ((), popc):
            raise _refuse(L, ins, "wgmma.mma_async form not modelled (.sync.aligned.m64n<N>k<K>[.satfinite]"
                                  ".<d>.<a>.<b>[.and.popc]; .sp is not)")
        d, a, b = ins.types
        try:
            self.kind = arith.kind_of(f"{d}.{a}.{b}")
        except RefsimError:
            raise _refuse(L, ins, f"wgmma.mma_async .{d}.{a}.{b} is not a dense wgmma kind") from None
        k = self.kind
        self.n, kk = int(m.group(1)), int(m.group(2))
        self._shape = (k.types, self.n)                         # wgmma chains of one shape: _chain
        if kk != k.k or self.n not in k.ns:
            raise _refuse(L, ins, f"shape m64n{self.n}k{kk} is not legal for .{k.types} (K = {k.k}, N in "
                                  f"{k.ns[0]}..{k.ns[-1]})")
        if (a == "b1") != (extra == popc):
            raise _refuse(L, ins, "b1 wgmma takes .and.popc (and only b1)")
        if self.satfinite and a not in ("s8", "u8"):
            raise _refuse(L, ins, ".satfinite is for s8/u8 wgmma only")
        ops = ins.operands
        if len(ops) < 4 or ops[0][0] != "vec":
            raise _refuse(L, ins, "operands must be d (a {vector}), a, b-desc, scale-d, immediates")
        self.a_regs = ops[1][0] == "vec"
        fam16 = a in ("f16", "bf16")
        n_imm = (3 if self.a_regs else 4) if fam16 else (2 if a in ("tf32", "e4m3", "e5m2") else 0)
        if len(ops) != 4 + n_imm or any(o[0] != "imm" for o in ops[4:]):
            raise _refuse(L, ins, f"wgmma.mma_async .{k.types} with A from {'registers' if self.a_regs else 'a descriptor'} "
                                  f"takes {4 + n_imm} operands (d, a, b-desc, scale-d and {n_imm} immediates); got {len(ops)}")
        imms = [int(o[1]) for o in ops[4:]]
        self.scale_a, self.scale_b = (imms[0], imms[1]) if n_imm >= 2 else (1, 1)
        trans = imms[2:]
        self.trans_a = trans[0] if (fam16 and not self.a_regs) else 0
        self.trans_b = trans[-1] if fam16 else 0
        if self.scale_a not in (1, -1) or self.scale_b not in (1, -1) or any(t not in (0, 1) for t in trans):
            raise _refuse(L, ins, f"imm-scale must be 1 or -1 and imm-trans 0 or 1; got {imms}")
        regs = L.k.registers
        per = 2 if d in ("f32", "s32") else 4
        dv = ops[0][1]
        if len(dv) != self.n // per or any(o[0] != "reg" or regs[o[1]].bits != 32 for o in dv):
            raise _refuse(L, ins, f"d must be {self.n // per} 32-bit registers (.{d} accumulator, N = {self.n}); "
                                  f"got {len(dv)}")
        self.d_slots = [o[1] for o in dv]
        if self.a_regs:
            av = ops[1][1]
            if a == "b1":
                raise _refuse(L, ins, "b1 wgmma with A from registers is not modelled")
            if len(av) != 4 or any(o[0] != "reg" or regs[o[1]].bits != 32 for o in av):
                raise _refuse(L, ins, "A from registers must be 4 32-bit registers")
            self.a_slots = [o[1] for o in av]
        else:
            self.a_slots = []
            self.a_desc = self._desc_reg(ops[1], "a-desc")
        self.b_desc = self._desc_reg(ops[2], "b-desc")
        sd = ops[3]
        if sd[0] == "imm":
            self.scale_d = ("imm", bool(sd[1]))
        elif sd[0] == "reg" and regs[sd[1]].bits == 1:
            self.scale_d = ("reg", sd[1], sd[2])
        else:
            raise _refuse(L, ins, "scale-d must be a predicate register or an immediate")
        lane = np.arange(32)
        g, c = lane // 4, lane % 4
        if self.a_regs:
            e = _PER_REG[a]
            r = np.arange(4)
            j = np.arange(e)
            rr = np.repeat(r, e)
            ee = np.tile(j, 4)
            if e == 2:
                col = 2 * c[:, None] + 8 * (rr // 2) + ee
            elif e == 1:
                col = c[:, None] + 4 * (rr // 2) + 0 * ee
            else:
                col = 4 * c[:, None] + 16 * (rr // 2) + ee
            self.a_row = g[:, None] + 8 * (rr % 2)[None, :] + 0 * col
            self.a_col = col
        self._addr = L.ext.setdefault("wgmma_addresses", {})   # descriptor -> addresses, shared in the launch
        self._pos = None

    def _desc_reg(self, op, name: str) -> int:
        if op[0] != "reg" or self.L.k.registers[op[1]].bits != 64:
            raise _refuse(self.L, self.ins, f"{name} must be a 64-bit register")
        return op[1]

    # ------------------------------------------------------------------ one step
    def run(self, sel) -> None:
        L, ins, kind = self.L, self.ins, self.kind
        th = _threads(L, sel)
        warps = _warps(L, ins, th, "wgmma.mma_async")
        st = state(L)
        lanes = warps[:, None] * 32 + np.arange(32)                        # (W, 32)
        bases = warps * 32 - (warps * 32 % L.tpb) % 128                     # first thread of the warpgroup
        groups, inv = np.unique(bases, return_inverse=True)                # G warpgroups
        quarter = (warps * 32 - bases) // 32                                # warp q of its warpgroup
        G, N, K = len(groups), self.n, kind.k
        if L.race:
            self._fence_rule(st, warps, lanes)
        if L.poison:
            self._poison_reads(lanes)
        sd = self._uniform(lanes, inv, self._scale_d(lanes), "scale-d")
        b_desc = self._uniform(lanes, inv, L.regs[self.b_desc][lanes], "b-desc")
        self._read = []
        B = self._smem(groups, b_desc, N, kind.b, self.trans_b, "B")       # (G, N, K)
        B = np.ascontiguousarray(np.swapaxes(B, -1, -2))                  # (G, K, N)
        if self.a_regs:
            A = np.zeros((G, 64, K), _ELEM[kind.a])
            e = _PER_REG[kind.a]
            raw = np.stack([L.regs[s][lanes] for s in self.a_slots], axis=-1).astype(np.uint32)   # (W, 32, 4)
            vals = np.ascontiguousarray(raw).view(_ELEM[kind.a]).reshape(len(warps), 32, 4 * e)  # low part first
            rows = 16 * quarter[:, None, None] + self.a_row[None]
            A[inv[:, None, None], rows, self.a_col[None]] = vals
        else:
            a_desc = self._uniform(lanes, inv, L.regs[self.a_desc][lanes], "a-desc")
            A = self._smem(groups, a_desc, 64, kind.a, self.trans_a, "A")   # (G, 64, K)
        acc = _ACC[kind.d]
        whole = len(warps) == 4 * G and np.array_equal(quarter, np.tile(np.arange(4), G))
        C = self._acc_read(lanes)                                            # (W, 16, N)
        if not sd.all():
            C = np.where(sd[inv][:, None, None], C, acc(0))
        if whole:                                                           # warps 0..3 of every warpgroup
            C = C.reshape(G, 64, N)
        else:
            full = np.zeros((G, 4, 16, N), acc)
            full[inv, quarter] = C
            C = full.reshape(G, 64, N)
        if kind.a == "b1":
            A = np.unpackbits(A.view(np.uint8), axis=-1, bitorder="little")
            B = np.unpackbits(B.view(np.uint8), axis=-2, bitorder="little")
        D = arith.wgmma(kind, A, B, C, scale_a=self.scale_a, scale_b=self.scale_b, satfinite=self.satfinite)
        D = D.reshape(G, 4, 16, N)
        out = D.reshape(len(warps), 16, N) if whole else D[inv, quarter]    # (W, 16, N)
        self._acc_write(lanes, out)
        self._issue(st, warps, lanes, inv)

    def _poison_reads(self, lanes) -> None:
        """poison=True: every register this wgmma reads (scale-d, descriptors, A fragments, accumulators)
        written before, in every thread of the step (checks.register_read's message)."""
        L = self.L
        slots = [self.scale_d[1]] if self.scale_d[0] == "reg" else []
        slots += ([] if self.a_regs else [self.a_desc]) + [self.b_desc] + self.a_slots + self.d_slots
        flat = lanes.reshape(-1)
        for s in slots:
            init = L.reg_init[s][flat]
            if not init.all():
                raise error("uninit_reg", L.where(self.ins), reg=L.k.registers[s].name, who=L.who(int(flat[~init][0])))

    def _scale_d(self, lanes):
        if self.scale_d[0] == "imm":
            return np.full(lanes.shape, self.scale_d[1])
        v = np.asarray(self.L.regs[self.scale_d[1]][lanes], bool)
        return ~v if self.scale_d[2] else v

    def _uniform(self, lanes, inv, v, name):
        """The one value of ``v`` (W, 32) per warpgroup (G,): equal in every thread, else refused."""
        first = v[:, 0]
        bad = (v != first[:, None]).any(axis=1)
        G = int(inv.max()) + 1
        per = np.zeros(G, first.dtype)
        per[inv] = first
        bad |= first != per[inv]
        if bad.any():
            w = int(lanes[np.flatnonzero(bad)[0], 0])
            raise _refuse(self.L, self.ins, f"{name} differs between the threads of a warpgroup ({self.L.who(w)}); "
                                            f"wgmma takes one value per warpgroup")
        return per

    def _smem(self, bases: np.ndarray, descs: np.ndarray, rows: int, t: str, trans: int, name: str) -> np.ndarray:
        """(G, rows, K) operands (raw element bits): the one descriptor ``descs[g]`` names in the block of
        thread ``bases[g]``, for each warpgroup g."""
        L, kind = self.L, self.kind
        b1 = t == "b1"
        cols = kind.k // 8 if b1 else kind.k
        dt = np.dtype(np.uint8 if b1 else _ELEM[t])
        e = dt.itemsize
        uniq, which = np.unique(descs, return_inverse=True)
        plans = [self._addresses(int(d), rows, cols, dt, trans, name) for d in uniq.tolist()]
        if not L.race and all(p is not None for _, p in plans):
            # every operand is whole aligned 16-byte chunks (the layouts' atoms): gather chunks
            chunk = np.dtype((np.void, 16))
            units = np.stack([p for _, p in plans])[which] + ((bases // L.tpb) * (L.shared_stride // 16))[:, None]
            return L.shared.view(chunk)[units].view(dt).reshape(len(bases), rows, cols)
        # element indices (addresses are multiples of the element size: 16-byte aligned atoms)
        addr = np.stack([a for a, _ in plans]) // e
        off = (bases // L.tpb) * (L.shared_stride // e)                                                 # (G,)
        idx = off[:, None] + addr[which].reshape(len(bases), -1)                                        # (G, rows * cols)
        if L.race:                   # the bytes each warpgroup's operand reads (race: smem_check)
            self._read.append((idx[..., None] * e + np.arange(e)).reshape(len(bases), -1))
        return L.shared.view(dt)[idx].reshape(len(bases), rows, cols)

    def _addresses(self, desc: int, rows: int, cols: int, dt, trans: int, name: str) -> tuple:
        """Shared byte addresses (rows, cols) of the operand ``desc`` names (refsim.formats.smem_layouts), and
        the 16-byte chunk numbers holding its bytes in element order when they are whole aligned chunks
        (else None)."""
        L = self.L
        key = (desc, rows, cols, dt.str, trans)
        addr = self._addr.get(key)
        if addr is None:
            try:
                addr = smem_layouts.matrix_addresses(desc, rows, cols, dt, "MN" if trans else "K")
            except RefsimError as e:
                raise _refuse(L, self.ins, f"operand {name}: descriptor {desc:#018x}: {e}") from None
            last = int(addr.max()) + dt.itemsize
            if last > L.shared_size:
                raise PtxMemoryError(f"{L.where(self.ins)}: operand {name} (descriptor {desc:#018x}) reads shared "
                                     f"bytes up to 0x{last - 1:x}; the block has {L.shared_size} bytes")
            flat = (addr[..., None] + np.arange(dt.itemsize)).reshape(-1, 16) if addr.size * dt.itemsize % 16 == 0 \
                else None                       # the bytes in element order, as 16-byte chunks
            whole = flat is not None and (flat[:, 0] % 16 == 0).all() and (flat == flat[:, :1] + np.arange(16)).all()
            if len(self._addr) > 256:
                self._addr.clear()
            addr = self._addr[key] = (addr, flat[:, 0] // 16 if whole else None)
        return addr

    def _acc_positions(self) -> list[np.ndarray]:
        """Per accumulator register j: the row-order positions (row * N + column) of its elements in
        lanes 0..31 (32 per 32-bit d, 64 per f16x2 register: lane-major, low half first)."""
        if self._pos is None:
            per = 2 if self.kind.d == "f16" else 1
            rows = _fragment_order(self.n)[1].reshape(32, self.n // 2)
            self._pos = [rows[:, j * per:(j + 1) * per].reshape(-1) for j in range(len(self.d_slots))]
        return self._pos

    def _acc_order(self, W: int) -> tuple[np.ndarray, np.ndarray]:
        """(gather, inverse) for W warps: ``rows.reshape(-1).take(gather)`` lists the accumulator elements
        of rows (W, 16, N) as the registers hold them, (register, warp, lane, element low first)
        (:meth:`_acc_positions`); ``take(inverse)`` of that order gives the rows back."""
        cache = self.L.ext.setdefault("wgmma_acc_order", {})     # shared by the launch's wgmma instructions
        key = (self.n, self.kind.d, W)
        order = cache.get(key)
        if order is None:
            P = np.concatenate(self._acc_positions()).reshape(len(self.d_slots), 1, -1)
            gather = (np.arange(W, dtype=np.int64)[None, :, None] * (16 * self.n) + P).reshape(-1)
            inverse = np.empty_like(gather)
            inverse[gather] = np.arange(gather.size)
            if len(cache) > 8:
                cache.clear()
            order = cache[key] = (gather, inverse)
        return order

    def _acc_read(self, lanes) -> np.ndarray:
        """The accumulators of the warps ``lanes`` (W, 32) as each warp's 16 rows (W, 16, N) of d's type."""
        flat = lanes.reshape(-1)
        W = lanes.shape[0]
        pick = _lane_picker(flat)
        regs = np.stack([pick(self.L.regs[s]) for s in self.d_slots]).view(_ACC[self.kind.d])   # register order
        return regs.reshape(-1).take(self._acc_order(W)[1]).reshape(W, 16, self.n)

    def _acc_write(self, lanes, rows: np.ndarray) -> None:
        """Write each warp's 16 rows (W, 16, N) back into its accumulator registers."""
        W = lanes.shape[0]
        regs = np.ascontiguousarray(rows).reshape(-1).take(self._acc_order(W)[0])
        regs = regs.view(np.uint32).reshape(len(self.d_slots), -1)                         # (R, W * 32)
        pick = _lane_picker(lanes.reshape(-1))
        L = self.L
        for s, v in zip(self.d_slots, regs):
            pick(L.regs[s], v)
            if L.poison:
                pick(L.reg_init[s], True)

    # ------------------------------------------------------------------ async bookkeeping and race checks
    def _fence_rule(self, st: _State, warps, lanes) -> None:
        L = self.L
        if not st.fenced[warps].all():
            w = int(warps[~st.fenced[warps]][0])
            raise PtxRaceError(f"{L.where(self.ins)}: wgmma.mma_async with no wgmma.fence before it in this warp "
                               f"(PTX ISA: wgmma.fence must precede a warpgroup's first wgmma.mma_async) ({L.who(w * 32)})")
        for s in self.d_slots + self.a_slots:
            i = st.row[s]
            now = L.regs[s][lanes].astype(np.uint64)
            if not np.array_equal(now, st.snap[warps, i]):
                w = int(warps[(now != st.snap[warps, i]).any(axis=1)][0])
                raise PtxRaceError(f"{L.where(self.ins)}: register {L.k.registers[s].name} was written by another "
                                   f"instruction after the last wgmma.fence and is read by this wgmma.mma_async "
                                   f"(PTX ISA: a wgmma.fence must order register accesses before a wgmma that "
                                   f"accesses the same registers) ({L.who(w * 32)})")

    def _issue(self, st: _State, warps, lanes, inv) -> None:
        L = self.L
        if L.race:
            read = [np.unique(np.concatenate([r[g] for r in self._read])) for g in range(int(inv.max()) + 1)]
            written = [L.regs[s][lanes].astype(np.uint64) for s in self.d_slots + self.a_slots]  # (W, 32) each
            for j, s in enumerate(self.d_slots):
                st.snap[warps, st.row[s]] = written[j]
                st.pending[s, lanes.reshape(-1)] = 1
        for wi, w in enumerate(warps.tolist()):
            if L.race:
                rec = (self.d_slots + self.a_slots, [v[wi] for v in written], read[inv[wi]], self._shape, len(self.d_slots))
                st.smem[rec[2]] += 1
                _chain(st, w, rec)
            else:
                rec = None
            st.open[w].append(rec)
