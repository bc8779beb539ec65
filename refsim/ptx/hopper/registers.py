"""``setmaxnreg``: warpgroup register reallocation of sm_90a (PTX ISA 8.x, "Miscellaneous Instructions:
setmaxnreg"), defined once for both executors.

Spec
----
form            ``setmaxnreg.{inc,dec}.sync.aligned.u32 N``: N an immediate, 24 <= N <= 256, a multiple of 8
                (else the kernel is refused at load, PtxUnsupportedError naming line and rule).
meaning         the executing warp's per-thread register count becomes N. ``.dec`` releases (count - N) x 32
                registers to the CTA's pool; ``.inc`` takes (N - count) x 32 from it and, on the GPU, blocks
                until the pool holds them. Register values do not change (refsim's registers are unlimited:
                the rule is the accounting).
budget          the CTA's registers are its threads' entry allocation R, the pool starts empty, so after
                any .inc the warps' counts sum to at most R x 32 x (warps of the block). R is what the
                PTX states (:func:`entry_registers`): ``.maxnreg R``; else from ``.maxntid``/``.reqntid``
                T and ``.minnctapersm`` B: 65,536 / (B x T rounded up to warps) (ptxas derives the count at
                entry of a setmaxnreg kernel from these bounds); with neither, refsim assumes the launched
                block fits the whole register file once (B = 1, T = the launched block). Each is rounded
                down to a multiple of 8 and capped at 248, the largest such count within ptxas's 255
                registers per thread (refsim's assumption: DeepGEMM's 256-thread kernel .incs to 248).
                Registers of exited warps are not returned to the pool (the ISA names only ``.dec``).
blocking        an ``.inc`` the pool cannot satisfy does not advance: the warp yields (refsim.ptx.scheduler)
                and retries; a request that can never be satisfied ends in a PtxDeadlockError whose reason
                names the waiting warpgroups, their request and the pool.
warpgroups      warps 4g..4g+3 of the block; the whole warp executes (``.aligned``: a partial warp is
                PtxUnsupportedError); the ISA's "the same setmaxnreg instruction must be executed by all
                warps in a warpgroup" and "all warps in the warpgroup must synchronize explicitly before
                executing subsequent setmaxnreg instructions" are checked as: the k-th setmaxnreg of every
                warp of a warpgroup is one static instruction, and a warp starts its (k+1)-th only when every
                warp of its warpgroup has executed its k-th (PtxRegisterError otherwise); so is an
                ``.inc`` below or a ``.dec`` above the warp's count, and a warpgroup the block does not
                fill (fewer than 128 threads).
state           ``L.ext["setmaxnreg"]``: per block, the pool, each warp's count and executed setmaxnregs,
                each warpgroup's sequence of instructions, the warpgroups waiting in an ``.inc``.
sources         PTX ISA 8.x "setmaxnreg"; 65,536 32-bit registers per SM on sm_70..sm_120 (CUDA C
                Programming Guide, "Technical Specifications per Compute Capability").
"""

from __future__ import annotations

import numpy as np

from refsim.ptx import scheduler
from refsim.ptx.errors import PtxRegisterError, PtxUnsupportedError
from refsim.ptx.parse import Instruction

__all__ = ["REGISTER_FILE", "MIN_COUNT", "MAX_COUNT", "MAX_ENTRY", "entry_registers", "build", "deadlock_why"]

#: 32-bit registers of one SM (every arch refsim knows)
REGISTER_FILE = 65536
#: setmaxnreg's range of per-thread counts (multiples of 8)
MIN_COUNT, MAX_COUNT = 24, 256
#: the largest entry allocation refsim assumes (a multiple of 8 within ptxas's 255 registers per thread)
MAX_ENTRY = 248


def entry_registers(kernel, threads: int) -> tuple[int, str]:
    """(R, where R comes from): the per-thread register allocation of ``kernel`` at entry for a launch
    of ``threads`` threads per block (module spec, "budget")."""
    d = kernel.directives
    if ".maxnreg" in d:
        return min(MAX_ENTRY, d[".maxnreg"][0] // 8 * 8), f".maxnreg {d['.maxnreg'][0]}"
    bound = d.get(".maxntid") or d.get(".reqntid")
    blocks = (d.get(".minnctapersm") or (1,))[0] or 1
    if bound:
        t = int(np.prod(bound))
        why = f"{'.maxntid' if '.maxntid' in d else '.reqntid'} {t}, .minnctapersm {blocks}"
    else:
        t, blocks, why = threads, 1, f"no register directive: refsim assumes one block of {threads} threads per SM"
    per = REGISTER_FILE // (blocks * max(32, -(-t // 32) * 32))
    return min(MAX_ENTRY, per // 8 * 8), why


class _Block:
    """One block's register accounting."""

    __slots__ = ("count", "done", "seq", "pool", "waiting")

    def __init__(self, nwarps: int, r: int):
        self.count = [r] * nwarps           # per-thread registers of each warp
        self.done = [0] * nwarps            # setmaxnreg instructions each warp has executed
        self.seq: dict = {}                 # warpgroup -> [pc of its k-th setmaxnreg]
        self.pool = 0                       # registers released by .dec, not yet taken
        self.waiting: dict = {}             # warpgroup -> (line, N, registers asked, warps)


def _state(L) -> dict:
    s = L.ext.get("setmaxnreg")
    if s is None:
        s = L.ext["setmaxnreg"] = {}
        L.ext.setdefault("deadlock", []).append(deadlock_why)      # refsim.ptx.scheduler.explain
    return s


def build(L, ins: Instruction, idx: int):
    """The step function of one ``setmaxnreg`` instruction (module spec); refused forms raise
    PtxUnsupportedError naming the kernel, the line and the rule."""
    mods = set(ins.mods)
    action = mods & {"inc", "dec"}
    if len(action) != 1 or mods - action != {"sync", "aligned"} or ins.types != ("u32",) or len(ins.operands) != 1:
        raise PtxUnsupportedError(f"{L.where(ins)}: expected setmaxnreg.{{inc,dec}}.sync.aligned.u32 N")
    op = ins.operands[0]
    if op[0] != "imm" or isinstance(op[1], float):
        raise PtxUnsupportedError(f"{L.where(ins)}: setmaxnreg's register count must be an immediate")
    n = int(op[1])
    if not (MIN_COUNT <= n <= MAX_COUNT and n % 8 == 0):
        raise PtxUnsupportedError(f"{L.where(ins)}: setmaxnreg's register count must be a multiple of 8 in "
                                  f"[{MIN_COUNT}, {MAX_COUNT}]; got {n}")
    inc = "inc" in action
    nthreads = int(np.prod(L.block))
    nwarps = -(-nthreads // 32)
    r, _ = entry_registers(L.k, nthreads)
    pc = L.pc

    def run(sel):
        warps, lanes, active = L.warps(sel)
        if not active.all():
            raise PtxUnsupportedError(f"{L.where(ins)}: setmaxnreg executed by a partial warp "
                                      f"(.sync.aligned: every thread of the warpgroup executes it)")
        state = _state(L)
        blocked = []
        for w, row in zip(warps.tolist(), lanes):
            t = int(row[0])
            blk = int(L.slot_block[L.slot_of[t]])
            b = state.get(blk)
            if b is None:
                b = state[blk] = _Block(nwarps, r)
            lw = int(L.local_index[t]) // 32
            g = lw // 4
            if (g + 1) * 128 > nthreads:
                raise PtxRegisterError(f"{L.where(ins)}: setmaxnreg by warp {lw} of a {nthreads}-thread block: its "
                                       f"warpgroup {g} is not complete (4 warps, 128 threads) (by {L.who(t)})")
            k = b.done[lw]
            seq = b.seq.setdefault(g, [])
            if k < len(seq) and seq[k] != idx:
                raise PtxRegisterError(
                    f"{L.where(ins)}: warp {lw} executes this as its setmaxnreg #{k + 1}, but another warp of "
                    f"warpgroup {g} executed PTX line {L.k.instructions[seq[k]].line} as #{k + 1} (the ISA: the "
                    f"same setmaxnreg must be executed by all warps in a warpgroup) (by {L.who(t)})")
            behind = [x for x in range(4 * g, 4 * g + 4) if b.done[x] < k]
            if behind:
                raise PtxRegisterError(
                    f"{L.where(ins)}: warp {lw} executes its setmaxnreg #{k + 1} before warp(s) "
                    f"{', '.join(map(str, behind))} of warpgroup {g} executed #{k} (the ISA: the warps of a "
                    f"warpgroup synchronize between setmaxnreg instructions) (by {L.who(t)})")
            cur = b.count[lw]
            if inc and n < cur or not inc and n > cur:
                raise PtxRegisterError(f"{L.where(ins)}: setmaxnreg.{'inc' if inc else 'dec'} to {n} registers per "
                                       f"thread, but warp {lw} holds {cur} ({'.inc must not lower' if inc else '.dec must not raise'} "
                                       f"the count) (by {L.who(t)})")
            need = (n - cur) * 32
            if inc and need > b.pool:
                wait = b.waiting.setdefault(g, [ins.line, n, 0, set()])
                wait[3].add(lw)
                wait[2] = sum((n - b.count[x]) * 32 for x in wait[3])
                blocked.append(w)
                continue
            b.pool -= need
            b.count[lw] = n
            b.done[lw] = k + 1
            if g in b.waiting:
                b.waiting[g][3].discard(lw)
                if not b.waiting[g][3]:
                    del b.waiting[g]
            if k == len(seq):
                seq.append(idx)
            L.progress += 1
        moved = np.ones(len(warps), bool)
        if blocked:
            moved = ~np.isin(warps, blocked)
            scheduler.yield_warps(L, lanes[~moved].reshape(-1))
        pc[lanes[moved].reshape(-1)] += 1
    return run


def deadlock_why(L, why: str) -> str:
    """The deadlock's reason when warpgroups wait in a ``setmaxnreg.inc``: each one's request and the
    block's pool and budget (module spec)."""
    state = L.ext.get("setmaxnreg") or {}
    nthreads = int(np.prod(L.block))
    r, source = entry_registers(L.k, nthreads)
    parts = []
    for blk, b in sorted(state.items()):
        for g, (line, n, asked, ws) in sorted(b.waiting.items()):
            parts.append(f"setmaxnreg.inc to {n} (PTX line {line}) by warpgroup {g} (warps "
                         f"{', '.join(map(str, sorted(ws)))}) of {L.block_name(blk)} asks for {asked} registers; the "
                         f"CTA's pool holds {b.pool} (budget {r} registers x {nthreads} threads from {source}; "
                         f"warps hold {', '.join(map(str, b.count))})")
    if not parts:
        return why
    return ("setmaxnreg.inc waits for registers no warp will release (the counts after an .inc must fit the CTA's "
            "entry allocation): " + "; ".join(parts[:8]))
