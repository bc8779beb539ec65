"""SIMT execution of one kernel launch: per-thread PCs over every resident block, one static
instruction per step for every thread whose PC equals it.

Execution model (docs/ptx.md has the full story)::

    threads   T = slots x padded block size (a multiple of 32); thread t is lane t % 32 of warp t // 32
    state     pc (T,) int32       next instruction; PARKED (= len(program)) while waiting at a
                                  barrier or after exit, so one ``min`` finds the runnable threads
              registers           one (T,) array per declared register (bool for predicates)
    step      the scheduler picks a pc p and the threads that run it (refsim.ptx.scheduler); the
              program's step function for p runs them (refsim.ptx.dispatch builds it from the one
              opcode table); statistics are counted here; max_warp_instructions bounds the launch
    blocks    every block of the grid is resident up to RESIDENT_THREADS threads; beyond that blocks
              run in slots refilled as blocks finish

The engine in parts::

    engine.py      Launch: the state of one launch, blocks, thread exit, the step loop (this file)
    scheduler.py   warp picking (lockstep / seeded random), the yield rule, deadlock detection
    loops.py       pure loops: a warp back at a backward branch in a state it had (a deadlock)
    dispatch.py    the one opcode table; guards; the glue to refsim.ptx.semantics handlers
    operands.py    registers, immediates, special registers, symbols (readers and writers)
    control.py     bra, ret/exit, call; FORMS (mov, cvta, isspacep, createpolicy) and EFFECTS (trap, brkpt,
                   nanosleep, membar, fence, prefetch, ...): data both executors read
    barriers.py    bar / barrier (.sync, .arrive, .red)
    memory_ops.py  ld, st, atom, red, cp.async, the address side of ldmatrix; wavefront counts
    checks.py      race=True / poison=True checking
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from refsim._validate import require_bounded, require_dtype_arg, require_fields, require_instance, require_int
from refsim.errors import FormatRuleError
from refsim.ptx import barriers, checks, dispatch, hopper, limits, loops, memory_ops, scheduler
from refsim.ptx.errors import error
from refsim.ptx.memory import GlobalMemory
from refsim.ptx.operands import dtype
from refsim.ptx.parse import Instruction, Kernel
from refsim.ptx.scheduler import DEADLOCK_ROUNDS

__all__ = ["LaunchStats", "Launch", "zero_registers", "DEADLOCK_ROUNDS", "RESIDENT_THREADS",
           "DEFAULT_MAX_WARP_INSTRUCTIONS"]

#: All blocks of a launch are resident up to this many threads (persistent kernels such as Marlin
#: launch one block per SM and need every block running); larger grids run in slots that are
#: refilled with the next block as blocks finish.
RESIDENT_THREADS = 65536
#: Default bound on warp-instructions of one launch (``max_warp_instructions=None``).
DEFAULT_MAX_WARP_INSTRUCTIONS = 10**9



#: the dtypes a register row can have (refsim.ptx.operands.dtype: predicates, 8..64-bit integers and floats)
_REGISTER_DTYPES = (np.bool_, np.uint8, np.uint16, np.uint32, np.uint64, np.int8, np.int16, np.int32, np.int64,
                    np.float16, np.float32, np.float64)


def zero_registers(dtypes, T: int) -> list:
    """One zeroed C-contiguous (T,) array per entry of ``dtypes`` (NumPy dtypes), the rows of one block
    per dtype: a kernel declares thousands of registers, and one allocation per dtype costs a fraction
    of one per register (the pages are zeroed when first touched)."""
    T = require_int("T", T, minimum=0)
    dtypes = list(require_instance("dtypes", dtypes, (list, tuple)))
    checked = {}                                   # a kernel declares thousands of registers of a few dtypes
    out_dtypes = []
    for d in dtypes:
        if isinstance(d, type) and d in checked:
            out_dtypes.append(checked[d])
            continue
        dt = require_dtype_arg("dtypes: element", d, _REGISTER_DTYPES)
        if isinstance(d, type):
            checked[d] = dt
        out_dtypes.append(dt)
    dtypes = out_dtypes
    require_bounded("registers x threads", len(dtypes) * T)
    blocks = {d: np.zeros((sum(1 for x in dtypes if x == d), T), d) for d in set(dtypes)}
    seen = dict.fromkeys(blocks, 0)
    out = []
    for d in dtypes:
        out.append(blocks[d][seen[d]])
        seen[d] += 1
    return out


@dataclass
class LaunchStats:
    """Dynamic counts of one launch.

    warp_instructions    warp-instructions issued (one per warp per executed static instruction)
    thread_instructions  thread-instructions issued (guard-false threads included)
    opcodes              warp-instructions per instruction name (e.g. ``"ld.global.v4.u32"``)
    shared_wavefronts    shared-memory wavefronts of ld/st/ldmatrix (bank conflicts add wavefronts)
    shared_requests      warp-level shared-memory ld/st/ldmatrix instructions
    global_bytes_read    bytes loaded from global memory (ld, cp.async sources, atomics)
    global_bytes_written bytes stored to global memory (st, atomics, red)
    barriers             completed block barriers
    blocks               blocks run
    float_atomic_contention  the most float ``atom/red.add`` one address received in one step (from
                         several warps or blocks at once): > 1 means the hardware may add them in
                         another order (refsim.testing.admissible runs every order)
    """

    warp_instructions: int = 0
    thread_instructions: int = 0
    opcodes: dict = field(default_factory=dict)
    shared_wavefronts: int = 0
    shared_requests: int = 0
    global_bytes_read: int = 0
    global_bytes_written: int = 0
    barriers: int = 0
    blocks: int = 0
    float_atomic_contention: int = 0

    def __post_init__(self):
        require_fields(self)  # Python ints, whatever NumPy scalars came in
        if not isinstance(self.opcodes, dict):
            raise FormatRuleError(f"LaunchStats.opcodes: must be a dict; got {type(self.opcodes).__name__}")


class Launch:
    """The state of one kernel launch (built by :meth:`refsim.ptx.Module.launch`).

    kernel: the parsed kernel; handlers: its semantics handlers by instruction index
    (:func:`refsim.ptx.dispatch.load`); grid, block: checked 3-tuples; param_bytes: the kernel's
    parameter space; gmem / symbol_addr: global memory and the addresses of module variables.
    """

    def __init__(self, kernel: Kernel, handlers: dict, globals_: dict, grid, block, param_bytes: bytes,
                 gmem: GlobalMemory, symbol_addr: dict, *, arch: str, shared_bytes: int, schedule: str,
                 seed: int, max_warp_instructions, race: bool, poison: bool, atomic_order=None, check: bool = False,
                 cluster: tuple = (1, 1, 1), explicit_cluster: bool = False):
        self.k = kernel
        self.handlers = handlers
        self.arch = arch
        self.grid = grid
        self.block = block
        self.cluster = cluster           # the cluster shape (refsim.ptx.hopper.cluster)
        self.gmem = gmem
        self.sym = symbol_addr           # global/const symbol -> virtual address
        self.schedule = schedule
        self.rng = np.random.default_rng(seed)
        self.max_wi = DEFAULT_MAX_WARP_INSTRUCTIONS if max_warp_instructions is None else int(max_warp_instructions)
        self.race = race
        self.poison = poison
        self.atomic_order = atomic_order     # float atomic adds on one address land in this rank order
        self.stats = LaunchStats()
        self.ext: dict = {}                  # per-launch state of refsim.ptx.hopper's instructions
        self.param = np.frombuffer(bytearray(param_bytes) + bytes(16), np.uint8)

        nthreads = block[0] * block[1] * block[2]
        self.nthreads = nthreads
        self.tpb = (nthreads + 31) // 32 * 32
        self.nblocks = grid[0] * grid[1] * grid[2]
        self.nslots = max(1, min(self.nblocks, RESIDENT_THREADS // self.tpb))
        T = self.T = self.nslots * self.tpb
        self.NW = T // 32
        state = T * (sum(max(1, r.bits // 8) for r in kernel.registers) + kernel.local_bytes) \
            + self.nslots * (kernel.shared_bytes + shared_bytes)
        limits.check("launch state bytes (registers, local and shared memory of the resident threads)", state,
                     limits.MAX_LAUNCH_STATE_BYTES, f"kernel {kernel.name}")
        self.END = len(kernel.instructions)
        # shared memory: static variables, then the dynamic (extern) array
        dyn_align = 16
        self.dyn_offset = (kernel.shared_bytes + dyn_align - 1) // dyn_align * dyn_align
        self.shared_size = self.dyn_offset + shared_bytes if (shared_bytes or kernel.extern_shared) else kernel.shared_bytes
        self.shared_stride = max(16, (self.shared_size + 15) // 16 * 16)
        self.shared = np.zeros(self.nslots * self.shared_stride, np.uint8)
        self.local_stride = max(16, (kernel.local_bytes + 15) // 16 * 16)
        self.local = np.zeros(T * self.local_stride, np.uint8) if kernel.local_bytes else np.zeros(16, np.uint8)

        self.regs = zero_registers([dtype(r.bits) for r in kernel.registers], T)
        self.reg_init = zero_registers([np.bool_] * len(kernel.registers), T) if poison else None
        self.shared_init = np.zeros(self.shared.size, bool) if poison else None
        self.pc = np.zeros(T, np.int32)
        self.exited = np.zeros(T, bool)
        self.bar_wait = np.zeros(T, bool)
        self.bar_id = np.zeros(T, np.int64)
        self.bar_pc = np.zeros(T, np.int32)
        self.group = np.zeros(T, np.int64)         # cp.async group being filled, per thread
        self.async_records: list[dict] = []
        self.pending = np.zeros(self.shared.size, np.int32) if race else None
        self.yielding = np.zeros(self.NW, bool)
        self.bar_pred = np.zeros(T, bool)                          # bar.red predicate per thread
        self.bar_red_out: dict[int, tuple] = {}                    # bar.red instruction -> (writer, op)
        self.bar_count = np.zeros((self.nslots, 16), np.int64)   # arrivals per block slot and barrier id
        self.bar_need = np.zeros((self.nslots, 16), np.int64)    # bar.sync a, b count (0: live threads)
        self.last_seen: dict[int, tuple[np.ndarray, np.ndarray]] = {}   # spin loads (scheduler)
        self.progress = 0                 # bumped by every memory write, exit, barrier release
        self.stall_rounds, self.last_progress, self.last_digest = 0, -1, None
        self.local_index = np.tile(np.arange(self.tpb, dtype=np.int64), self.nslots)
        self.slot_of = np.repeat(np.arange(self.nslots, dtype=np.int64), self.tpb)
        self.slot_block = np.full(self.nslots, -1, np.int64)
        self.next_block = 0
        self.warp_slot = np.repeat(np.arange(self.nslots), self.tpb // 32)
        self.race_w = self.race_r = None
        tracked = hopper.tracks_shared_bytes(kernel)
        self.hbytes = np.zeros(self.shared.size, np.uint8) if tracked else None    # refsim.ptx.hopper
        self.gen_w = np.full(self.shared.size, -1, np.int64) if tracked and race else None
        self.max_mbar = hopper.mbarrier.MAX_RACE_BARRIERS
        self.async_bid = self.async_phase = self.async_obs = None
        if tracked and race:           # copies' barriers and phases, what each thread observed (hopper.mbarrier)
            self.async_bid = np.full(self.shared.size, -1, np.int32)
            self.async_phase = np.zeros(self.shared.size, np.int32)
            self.async_obs = np.full(self.nslots * self.max_mbar * self.tpb, -1, np.int32)
        if race:
            self.race_w = np.full(self.shared.size, -1, np.int64)   # writer thread in this barrier interval
            self.race_r = np.full(self.shared.size, -1, np.int64)   # a reader thread (-2: several)
        l = self.local_index
        bx, by = block[0], block[1]
        self.special = {
            "%tid.x": (l % bx).astype(np.uint32), "%tid.y": ((l // bx) % by).astype(np.uint32),
            "%tid.z": (l // (bx * by)).astype(np.uint32),
            "%ntid.x": np.uint32(block[0]), "%ntid.y": np.uint32(block[1]), "%ntid.z": np.uint32(block[2]),
            "%nctaid.x": np.uint32(grid[0]), "%nctaid.y": np.uint32(grid[1]), "%nctaid.z": np.uint32(grid[2]),
            "%ctaid.x": np.zeros(T, np.uint32), "%ctaid.y": np.zeros(T, np.uint32), "%ctaid.z": np.zeros(T, np.uint32),
            "%laneid": (l % 32).astype(np.uint32), "%warpid": (l // 32).astype(np.uint32),
            "%nwarpid": np.uint32(self.tpb // 32), "%smid": self.slot_of.astype(np.uint32),
            "%nsmid": np.uint32(self.nslots), "%gridid": np.uint64(0), "%warpsz": np.uint32(32),
            "%lanemask_eq": (np.uint32(1) << (l % 32).astype(np.uint32)).astype(np.uint32),
            "%lanemask_lt": ((np.uint64(1) << (l % 32).astype(np.uint64)) - np.uint64(1)).astype(np.uint32),
            "%lanemask_le": ((np.uint64(2) << (l % 32).astype(np.uint64)) - np.uint64(1)).astype(np.uint32),
            "%dynamic_smem_size": np.uint32(shared_bytes), "%total_smem_size": np.uint32(self.shared_size),
        }
        self.special["%lanemask_gt"] = ~self.special["%lanemask_le"]
        self.special["%lanemask_ge"] = ~self.special["%lanemask_lt"]
        ctaid = tuple(self.special[f"%ctaid.{c}"] for c in "xyz")
        for name in hopper.cluster.SPECIALS:        # computed from %ctaid when read (one definition)
            self.special[name] = hopper.cluster.PerThread(
                lambda name=name: hopper.cluster.special(name, grid, cluster, explicit_cluster, ctaid))
        if check:             # a load-time check that never runs: one instruction of each form is built
            forms = {}
            for i, ins in enumerate(kernel.instructions):
                forms.setdefault(dispatch.form(kernel, ins), (i, ins))
            for i, ins in sorted(forms.values(), key=lambda x: x[0]):
                dispatch.build(self, i, ins)
            self.program = None
        else:
            self.program = [dispatch.build(self, i, ins) for i, ins in enumerate(kernel.instructions)]
        for s in range(self.nslots):
            self.start_block(s)

    # ------------------------------------------------------------------ names and selections
    def where(self, ins: Instruction) -> str:
        """``kernel k, PTX line N `text``` for messages."""
        return f"kernel {self.k.name}, PTX line {ins.line} `{ins.text}`"

    def block_name(self, b: int) -> str:
        gx, gy = self.grid[0], self.grid[1]
        return f"block ({b % gx}, {b // gx % gy}, {b // (gx * gy)})"

    def who(self, t: int) -> str:
        """``block (x, y, z) thread (x, y, z)`` of thread slot ``t``."""
        l = int(self.local_index[t])
        bx, by = self.block[0], self.block[1]
        return (f"{self.block_name(int(self.slot_block[self.slot_of[t]]))} thread "
                f"({l % bx}, {l // bx % by}, {l // (bx * by)})")

    def count(self, sel) -> int:
        return self.T if isinstance(sel, slice) else len(sel)

    def threads(self, sel) -> np.ndarray:
        return np.arange(self.T) if isinstance(sel, slice) else sel

    def warps(self, sel):
        """(warp indices (W,), lane thread indices (W, 32), active mask (W, 32)) of a selection."""
        if isinstance(sel, slice):
            sel = np.arange(self.T)
        warps = np.unique(sel >> 5)
        lanes = warps[:, None] * 32 + np.arange(32)
        mask = np.zeros(self.T, bool)
        mask[sel] = True
        return warps, lanes, mask[lanes]

    # ------------------------------------------------------------------ blocks and threads
    def start_block(self, s: int) -> None:
        """Put the next block of the grid in slot ``s`` (or park the slot when none is left)."""
        lo, hi = s * self.tpb, (s + 1) * self.tpb
        if self.next_block >= self.nblocks:
            self.pc[lo:hi] = self.END
            self.exited[lo:hi] = True
            return
        b = self.next_block
        self.next_block += 1
        self.stats.blocks += 1
        self.slot_block[s] = b
        gx, gy = self.grid[0], self.grid[1]
        self.special["%ctaid.x"][lo:hi] = b % gx
        self.special["%ctaid.y"][lo:hi] = b // gx % gy
        self.special["%ctaid.z"][lo:hi] = b // (gx * gy)
        live = self.local_index[lo:hi] < self.nthreads
        self.pc[lo:hi] = np.where(live, 0, self.END)
        self.exited[lo:hi] = ~live
        self.bar_wait[lo:hi] = False
        self.group[lo:hi] = 0
        self.bar_count[s] = 0
        self.bar_need[s] = 0
        self.shared[s * self.shared_stride:(s + 1) * self.shared_stride] = 0
        checks.block_started(self, s, lo, hi)

    def exit_threads(self, sel) -> None:
        """``ret``/``exit``: the threads end; their cp.async copies land, barriers they no longer
        block complete, and a finished block's slot takes the next block."""
        if isinstance(sel, slice):
            sel = np.arange(self.T)[sel]
        self.pc[sel] = self.END
        self.exited[sel] = True
        self.progress += 1
        self.land_async(sel, None)
        barriers.release(self)
        finished = self.exited.reshape(self.nslots, self.tpb).all(axis=1)
        for s in np.unique(self.slot_of[sel]):
            if finished[s] and self.slot_block[s] >= 0:
                self.start_block(int(s))

    def land_async(self, th: np.ndarray, n_allowed) -> None:
        """The cp.async copies of threads ``th`` older than their ``n_allowed`` newest groups (None: all)
        land (:func:`refsim.ptx.memory_ops.complete_async`)."""
        memory_ops.complete_async(self, th, n_allowed)

    # ------------------------------------------------------------------ the loop
    def run(self) -> LaunchStats:
        """Execute until every block has exited; returns the statistics."""
        st = self.stats
        instrs = self.k.instructions
        names = [ins.name for ins in instrs]
        opcount = st.opcodes
        prog = self.program
        fast = self.schedule == "lockstep"
        converged, scheduled = scheduler.converged_step, scheduler.scheduled_step
        self.stall_rounds, self.last_progress, self.last_digest = 0, -1, None
        lp = self.loops = loops.LoopState(self.k, self.handlers, self.NW)      # pure-loop deadlocks (loops.py)
        loop_kind = lp.kind.tolist()
        while True:
            step = converged(self) if fast and not self.yielding.any() else None
            if step is None:
                step = scheduled(self)
                if step is None:
                    break
            p, sel, nw, nt = step
            st.warp_instructions += nw
            st.thread_instructions += nt
            opcount[names[p]] = opcount.get(names[p], 0) + nw
            if st.warp_instructions > self.max_wi:
                raise error("limit", kernel=self.k.name, limit=self.max_wi, line=instrs[p].line, text=instrs[p].text)
            if loop_kind[p]:
                if loop_kind[p] == loops.IMPURE:
                    lp.touch(sel)
                else:
                    lp.visit(self, p, sel)
            prog[p](sel)
        memory_ops.complete_async(self, np.arange(self.T), None)
        return st
