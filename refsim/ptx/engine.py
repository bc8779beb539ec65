"""SIMT execution of one kernel launch: per-thread PCs over every resident block, one static
instruction per step for every thread whose PC equals it.

Execution model (docs/ptx.md has the full story)::

    threads   T = slots x padded block size (a multiple of 32); thread t is lane t % 32 of warp t // 32
    state     pc (T,) int64       next instruction; PARKED (= len(program)) while waiting at a
                                  barrier or after exit, so one ``min`` finds the runnable threads
              registers           one (T,) array per declared register (bool for predicates)
    step      wmin = per-warp minimum pc; pick p = the lowest wmin among warps that are not
              yielding (``lockstep``) or a seeded random warp's wmin (``random``); execute
              instruction p for every thread with pc == p in a warp whose wmin == p
              (lowest PC first inside a warp = reconvergence at the immediate post-dominator
              for structured code, and a correct, if slower, order for unstructured code)
    yield     a warp whose acquire/volatile/relaxed load (or CAS) returns what it returned the
              previous time at that instruction, or that executes ``nanosleep``, yields: it is
              not picked again until every runnable warp yields. Blocks that wait for each other
              through global flags (Marlin's split-k locks) therefore all make progress.
    deadlock  no runnable thread while some wait at a barrier, or DEADLOCK_ROUNDS rounds in
              which every runnable warp yielded without any memory write, exit or barrier
              release -> PtxDeadlockError naming blocks and PTX lines.

The instructions the engine owns (memory, control flow, barriers, special registers) are methods
named ``_op_<opcode>`` below (one per opcode family, the table is ``ENGINE_OPCODES``); every other
opcode is a :class:`refsim.ptx.semantics.Handler` looked up once per static instruction.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

from refsim.ptx.errors import (
    PtxDeadlockError, PtxLaunchError, PtxLimitError, PtxMemoryError, PtxMisalignedError, PtxRaceError,
    PtxUninitializedError, PtxUnsupportedError,
)
from refsim.ptx.memory import LOCAL_WINDOW, SHARED_WINDOW, WINDOW_BYTES, GlobalMemory, typed
from refsim.ptx.parse import TYPE_BITS, Instruction, Kernel

__all__ = ["LaunchStats", "ENGINE_OPCODES", "Launch", "DEADLOCK_ROUNDS", "RESIDENT_THREADS"]

#: All blocks of a launch are resident up to this many threads (persistent kernels such as Marlin
#: launch one block per SM and need every block running); larger grids run in slots that are
#: refilled with the next block as blocks finish.
RESIDENT_THREADS = 65536
#: Consecutive all-warps-yielding rounds in which nothing changed (memory, registers, PCs) before a
#: spin is a deadlock (one such round already repeats forever under lockstep; a few more for random).
DEADLOCK_ROUNDS = 8
#: Default bound on warp-instructions of one launch (``max_warp_instructions=None``).
DEFAULT_MAX_WARP_INSTRUCTIONS = 10**9

_UINT = {1: np.bool_, 8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}
_SINT = {8: np.int8, 16: np.int16, 32: np.int32, 64: np.int64}
_SPACES = ("global", "shared", "local", "param", "const")


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


ENGINE_OPCODES = frozenset([
    "ld", "ldu", "st", "atom", "red", "cp", "ldmatrix", "bar", "barrier", "membar", "fence", "bra",
    "ret", "exit", "nanosleep", "createpolicy", "prefetch", "prefetchu", "applypriority", "discard",
    "cvta", "isspacep", "mov", "mma", "shfl", "vote", "trap", "brkpt", "call",
])


def _bits(t: str) -> int:
    return TYPE_BITS[t]


def _dtype(bits: int):
    return _UINT[bits]


def _flatten(ops) -> list:
    out = []
    for op in ops:
        if op[0] in ("vec", "pair"):
            out.extend(_flatten(op[1]))
        else:
            out.append(op)
    return out


def _convert(vals: np.ndarray, to_bits: int, signed: bool) -> np.ndarray:
    """Unsigned bit patterns -> another width: truncation, or zero/sign extension."""
    vals = np.asarray(vals)
    from_bits = vals.dtype.itemsize * 8
    if from_bits == to_bits:
        return vals
    if to_bits < from_bits or not signed:
        return vals.astype(_UINT[to_bits])
    return vals.view(_SINT[from_bits]).astype(_SINT[to_bits]).view(_UINT[to_bits])


class Launch:
    """The state of one kernel launch (built by :meth:`refsim.ptx.Module.launch`)."""

    def __init__(self, kernel: Kernel, handlers: dict, globals_: dict, grid, block, param_bytes: bytes,
                 gmem: GlobalMemory, symbol_addr: dict, *, arch: str, shared_bytes: int, schedule: str,
                 seed: int, max_warp_instructions, race: bool, poison: bool):
        self.k = kernel
        self.handlers = handlers
        self.arch = arch
        self.grid = grid
        self.block = block
        self.gmem = gmem
        self.sym = symbol_addr           # global/const symbol -> virtual address
        self.schedule = schedule
        self.rng = np.random.default_rng(seed)
        self.max_wi = DEFAULT_MAX_WARP_INSTRUCTIONS if max_warp_instructions is None else int(max_warp_instructions)
        self.race = race
        self.poison = poison
        self.stats = LaunchStats()
        self.param = np.frombuffer(bytearray(param_bytes) + bytes(16), np.uint8)

        nthreads = block[0] * block[1] * block[2]
        self.nthreads = nthreads
        self.tpb = (nthreads + 31) // 32 * 32
        self.nblocks = grid[0] * grid[1] * grid[2]
        self.nslots = max(1, min(self.nblocks, RESIDENT_THREADS // self.tpb))
        T = self.T = self.nslots * self.tpb
        self.NW = T // 32
        self.END = len(kernel.instructions)
        # shared memory: static variables, then the dynamic (extern) array
        dyn_align = 16
        self.dyn_offset = (kernel.shared_bytes + dyn_align - 1) // dyn_align * dyn_align
        self.shared_size = self.dyn_offset + shared_bytes if (shared_bytes or kernel.extern_shared) else kernel.shared_bytes
        self.shared_stride = max(16, (self.shared_size + 15) // 16 * 16)
        self.shared = np.zeros(self.nslots * self.shared_stride, np.uint8)
        self.local_stride = max(16, (kernel.local_bytes + 15) // 16 * 16)
        self.local = np.zeros(T * self.local_stride, np.uint8) if kernel.local_bytes else np.zeros(16, np.uint8)

        self.regs = [np.zeros(T, _dtype(r.bits)) for r in kernel.registers]
        self.reg_init = [np.zeros(T, bool) for _ in kernel.registers] if poison else None
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
        self.last_seen: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self.progress = 0
        self.local_index = np.tile(np.arange(self.tpb, dtype=np.int64), self.nslots)
        self.slot_of = np.repeat(np.arange(self.nslots, dtype=np.int64), self.tpb)
        self.slot_block = np.full(self.nslots, -1, np.int64)
        self.next_block = 0
        self.warp_slot = np.repeat(np.arange(self.nslots), self.tpb // 32)
        self.race_w = self.race_r = None
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
        self.program = [self._build(i, ins) for i, ins in enumerate(kernel.instructions)]
        for s in range(self.nslots):
            self._start_block(s)

    # ------------------------------------------------------------------ messages
    def _where(self, ins: Instruction) -> str:
        return f"kernel {self.k.name}, PTX line {ins.line} `{ins.text}`"

    def _who(self, t: int) -> str:
        b = int(self.slot_block[self.slot_of[t]])
        gx, gy = self.grid[0], self.grid[1]
        l = int(self.local_index[t])
        bx, by = self.block[0], self.block[1]
        return (f"block ({b % gx}, {b // gx % gy}, {b // (gx * gy)}) thread "
                f"({l % bx}, {l // bx % by}, {l // (bx * by)})")

    # ------------------------------------------------------------------ blocks
    def _start_block(self, s: int) -> None:
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
        if self.poison:
            self.shared_init[s * self.shared_stride:(s + 1) * self.shared_stride] = False
            for r in self.reg_init:
                r[lo:hi] = False
        if self.race:
            self.race_w[s * self.shared_stride:(s + 1) * self.shared_stride] = -1
            self.race_r[s * self.shared_stride:(s + 1) * self.shared_stride] = -1

    # ------------------------------------------------------------------ operands
    def _reader(self, op, ptx_type: str, ins: Instruction):
        """A function ``sel -> values`` for a source operand read as ``ptx_type``."""
        kind = op[0]
        want = _bits(ptx_type) if ptx_type != "pred" else 1
        if kind == "reg":
            slot, neg = op[1], op[2]
            reg = self.regs[slot]
            rbits = self.k.registers[slot].bits
            name = self.k.registers[slot].name
            if (rbits == 1) != (want == 1):
                raise PtxUnsupportedError(f"{self._where(ins)}: register {name} (.{self.k.registers[slot].type}) "
                                          f"used as .{ptx_type}")
            init = self.reg_init[slot] if self.poison else None

            def check(sel):
                if init is not None and not init[sel].all():
                    bad = np.arange(self.T)[sel][~init[sel]][0]
                    raise PtxUninitializedError(f"{self._where(ins)}: register {name} read before written "
                                                f"by {self._who(int(bad))}")
            if want == 1:
                if neg:
                    return lambda sel: (check(sel), ~reg[sel])[1]
                return lambda sel: (check(sel), reg[sel])[1]
            if rbits == want:
                if init is None:
                    return lambda sel: reg[sel]
                return lambda sel: (check(sel), reg[sel])[1]
            signed = ptx_type.startswith("s")
            return lambda sel: (check(sel), _convert(reg[sel], want, signed))[1]
        if kind == "imm":
            c = self._immediate(op, ptx_type, ins)
            return lambda sel: c
        if kind == "special":
            name = op[1]
            if name in ("%clock", "%clock64", "%globaltimer"):
                dt = np.uint32 if name == "%clock" else np.uint64
                return lambda sel: _convert(np.asarray(dt(self.stats.warp_instructions & (2**32 - 1 if dt is np.uint32 else 2**64 - 1))), want, False)
            if name not in self.special:
                raise PtxUnsupportedError(f"{self._where(ins)}: special register {name} is not modelled")
            arr = self.special[name]
            if np.ndim(arr) == 0:
                c = _convert(np.asarray(arr), want, False)
                return lambda sel: c
            return lambda sel: _convert(arr[sel], want, False)
        if kind == "sym":
            c = _convert(np.asarray(np.uint64(self._symbol_address(op[1], ins)[1])), want, False)
            return lambda sel: c
        if kind == "addr":
            raise PtxUnsupportedError(f"{self._where(ins)}: an address operand is not a value here")
        raise PtxUnsupportedError(f"{self._where(ins)}: operand {op} not supported as a source")

    def _immediate(self, op, ptx_type: str, ins: Instruction):
        _, v, kind = op
        if ptx_type == "pred":
            return np.asarray(bool(v))
        bits = _bits(ptx_type)
        dt = _dtype(bits)
        if ptx_type.startswith(("f", "bf")) and kind in ("int", "float"):
            if ptx_type not in ("f32", "f64"):
                raise PtxUnsupportedError(f"{self._where(ins)}: decimal immediate for .{ptx_type}")
            fdt = np.float32 if ptx_type == "f32" else np.float64
            x = fdt(v)
            if float(x) != float(v):
                raise PtxUnsupportedError(f"{self._where(ins)}: immediate {v} is not exact in .{ptx_type}")
            return np.asarray(x).view(dt)
        if kind == "f32" and bits == 64:
            return np.asarray(np.float64(np.uint32(v).view(np.float32))).view(np.uint64)
        if kind == "f64" and bits == 32:
            raise PtxUnsupportedError(f"{self._where(ins)}: 0d immediate for a 32-bit type")
        if kind == "float":
            raise PtxUnsupportedError(f"{self._where(ins)}: float immediate for .{ptx_type}")
        return np.asarray(int(v) % (1 << bits), dtype=dt)

    def _writer(self, op, ptx_type: str, ins: Instruction):
        """A function ``(sel, values) -> None`` for a destination operand written as ``ptx_type``."""
        if op[0] == "sink":
            return lambda sel, v: None
        if op[0] != "reg":
            raise PtxUnsupportedError(f"{self._where(ins)}: destination {op} is not a register")
        slot = op[1]
        reg = self.regs[slot]
        rbits = self.k.registers[slot].bits
        want = 1 if ptx_type == "pred" else _bits(ptx_type)
        if (rbits == 1) != (want == 1) or (rbits < want):
            raise PtxUnsupportedError(f"{self._where(ins)}: register {self.k.registers[slot].name} "
                                      f"(.{self.k.registers[slot].type}) cannot hold .{ptx_type}")
        init = self.reg_init[slot] if self.poison else None
        signed = ptx_type.startswith("s")

        def write(sel, v):
            reg[sel] = _convert(v, rbits, signed) if rbits != want else v
            if init is not None:
                init[sel] = True
        return write

    def _symbol_address(self, name: str, ins: Instruction) -> tuple[str, int]:
        """(state space, address in that space) of a variable or parameter symbol."""
        k = self.k
        if name in k.shared:
            return "shared", k.shared[name].offset
        if name in k.extern_shared:
            return "shared", self.dyn_offset
        if name in k.local:
            return "local", k.local[name].offset
        for p in k.params:
            if p.name == name:
                return "param", p.offset
        if name in self.sym:
            return "global", self.sym[name]
        raise PtxUnsupportedError(f"{self._where(ins)}: unknown symbol {name}")

    # ------------------------------------------------------------------ instructions
    def _build(self, idx: int, ins: Instruction):
        op = ins.opcode
        if op == "ldmatrix":
            return self._guarded(ins, self._op_ldmatrix(ins, idx), advance=True)
        if not needs_handler(ins):
            special = getattr(self, f"_op_{op}")
            if op == "mov" and any(o[0] == "vec" for o in ins.operands):
                special = self._mov_vector
            if special is not None:
                run = special(ins, idx)
                return self._guarded(ins, run, advance=op not in ("bra", "ret", "exit", "bar", "barrier"))
        h = self.handlers[idx]
        if h.kind == "warp":
            run = self._warp(ins, h)
        else:
            run = self._alu(ins, h)
        return self._guarded(ins, run, advance=True)

    def _guarded(self, ins: Instruction, run, advance: bool):
        pc = self.pc
        if ins.guard is None:
            if advance:
                def step(sel):
                    run(sel)
                    pc[sel] += 1
                return step
            return run
        greg = self.regs[ins.guard[1]]
        neg = ins.guard[2]
        ginit = self.reg_init[ins.guard[1]] if self.poison else None

        T = self.T

        def gstep(sel):
            g = greg[sel]
            if ginit is not None and not ginit[sel].all():
                raise PtxUninitializedError(f"{self._where(ins)}: guard predicate read before written")
            if neg:
                g = ~g
            idx = np.arange(T) if isinstance(sel, slice) else sel
            act = idx[g]
            if act.size:
                run(act)
            if advance:
                pc[idx] += 1
            else:
                pc[idx[~g]] += 1
        return gstep

    def _split_operands(self, ins: Instruction, h):
        """(destinations, sources): optional destinations (``p|q``, ``d|p``) may be absent."""
        flat = _flatten(ins.operands)
        nsrc = len(h.src_types)
        ndst = len(flat) - nsrc
        if not 1 <= ndst <= len(h.dst_types):
            raise PtxUnsupportedError(f"{self._where(ins)}: expected up to {len(h.dst_types)} destination and "
                                      f"{nsrc} source operands; got {len(flat)} operands")
        return flat[:ndst], flat[ndst:]

    def _alu(self, ins: Instruction, h):
        dsts, srcs = self._split_operands(ins, h)
        readers = [self._reader(o, t, ins) for o, t in zip(srcs, h.src_types)]
        writers = [self._writer(o, t, ins) for o, t in zip(dsts, h.dst_types)]
        fn = h.fn

        def run(sel):
            outs = fn(*[r(sel) for r in readers])
            for w, o in zip(writers, outs):
                w(sel, o)
        return run

    def _warps(self, sel):
        """(warp indices (W,), lane thread indices (W, 32), active mask (W, 32)) of a selection."""
        if isinstance(sel, slice):
            sel = np.arange(self.T)
        warps = np.unique(sel >> 5)
        lanes = warps[:, None] * 32 + np.arange(32)
        mask = np.zeros(self.T, bool)
        mask[sel] = True
        return warps, lanes, mask[lanes]

    def _warp(self, ins: Instruction, h):
        """Warp-level handlers: shfl / vote (fn(*srcs, active)) and mma (fn(a, b, c))."""
        if ins.opcode == "mma":
            groups = [list(_flatten([o])) for o in ins.operands]
            srcs_g = groups[1:]
            readers = [[self._reader(o, "b32", ins) for o in g] for g in srcs_g]
            writers = [self._writer(o, "b32", ins) for o in groups[0]]
            fn = h.fn

            def run(sel):
                warps, lanes, active = self._warps(sel)
                if not active.all():
                    raise PtxUnsupportedError(f"{self._where(ins)}: mma executed by a partial warp "
                                              f"(.aligned: every lane must execute it)")
                ops = [np.stack([np.broadcast_to(r(lanes), lanes.shape) for r in g], axis=-1) for g in readers]
                d, = fn(*ops)
                act = lanes[active]
                for j, w in enumerate(writers):
                    w(act, d[..., j][active])
            return run
        # shfl.sync / vote.sync: the last operand is the membermask, intersected with the active lanes
        member = self._reader(ins.operands[-1], "b32", ins) if "sync" in ins.mods else None
        body = ins if member is None else Instruction(ins.opcode, ins.mods, ins.types, ins.operands[:-1],
                                                      ins.guard, ins.line, ins.column, ins.text)
        dsts, srcs = self._split_operands(body, h)
        readers = [self._reader(o, t, ins) for o, t in zip(srcs, h.src_types)]
        writers = [self._writer(o, t, ins) for o, t in zip(dsts, h.dst_types)]
        fn = h.fn
        lane_bit = np.uint32(1) << np.arange(32, dtype=np.uint32)

        def run(sel):
            warps, lanes, active = self._warps(sel)
            if member is not None:
                active = active & ((np.broadcast_to(member(lanes), lanes.shape) & lane_bit) != 0)
            outs = fn(*[np.broadcast_to(r(lanes), lanes.shape) for r in readers], active)
            act = lanes[active]
            for w, o in zip(writers, outs):
                w(act, np.broadcast_to(o, lanes.shape)[active])
        return run

    # -- control flow -------------------------------------------------------------------
    def _op_bra(self, ins: Instruction, idx: int):
        target = ins.operands[-1]
        if target[0] != "label" or not isinstance(target[1], int):
            raise PtxUnsupportedError(f"{self._where(ins)}: indirect branches are not supported")
        t = target[1]
        pc = self.pc

        def run(sel):
            pc[sel] = t
        return run

    def _op_ret(self, ins: Instruction, idx: int):
        return self._exit_threads

    _op_exit = _op_ret

    def _exit_threads(self, sel) -> None:
        if isinstance(sel, slice):
            sel = np.arange(self.T)[sel]
        self.pc[sel] = self.END
        self.exited[sel] = True
        self.progress += 1
        self._complete_async(sel, None)
        self._release_barriers()
        finished = self.exited.reshape(self.nslots, self.tpb).all(axis=1)
        for s in np.unique(self.slot_of[sel]):
            if finished[s] and self.slot_block[s] >= 0:
                self._start_block(int(s))

    def _op_bar(self, ins: Instruction, idx: int):
        mods = ins.mods
        if "warp" in mods:
            return lambda sel: self.pc.__setitem__(sel, self.pc[sel] + 1)
        if "red" in mods:
            return self._bar_red(ins, idx)
        if "arrive" not in mods and "sync" not in mods and mods not in ((), ("aligned",)):
            raise PtxUnsupportedError(f"{self._where(ins)}: barrier variant {ins.name} is not supported")
        arrive = "arrive" in mods
        bid = self._reader(ins.operands[0], "u32", ins)
        count = self._reader(ins.operands[1], "u32", ins) if len(ins.operands) > 1 else None

        def run(sel):
            if isinstance(sel, slice):
                sel = np.arange(self.T)
            b = np.broadcast_to(bid(sel), sel.shape).astype(np.int64)
            if (b > 15).any():
                raise PtxUnsupportedError(f"{self._where(ins)}: barrier id must be 0..15; got {int(b.max())}")
            if arrive:
                self.pc[sel] += 1
                self._arrivals(sel, b, count)
                return
            self.bar_wait[sel] = True
            self.bar_id[sel] = b
            self.bar_pc[sel] = self.pc[sel]
            self.pc[sel] = self.END
            self._arrivals(sel, b, count)
        return run

    _op_barrier = _op_bar

    def _bar_red(self, ins: Instruction, idx: int):
        """``bar.red.popc.u32 d, a{, b}, {!}c`` / ``bar.red.{and,or}.pred p, a{, b}, {!}c``: a
        ``bar.sync`` whose release gives every waiting thread the popcount / AND / OR of the
        predicates ``c`` of the block's threads that arrived (PTX ISA "bar, barrier")."""
        op = next((m for m in ins.mods if m in ("popc", "and", "or")), None)
        if op is None or len(ins.operands) not in (3, 4):
            raise PtxUnsupportedError(f"{self._where(ins)}: barrier reduction {ins.name} is not supported")
        out_type = "u32" if op == "popc" else "pred"
        self.bar_red_out[idx] = (self._writer(ins.operands[0], out_type, ins), op)
        bid = self._reader(ins.operands[1], "u32", ins)
        count = self._reader(ins.operands[2], "u32", ins) if len(ins.operands) == 4 else None
        pred = self._reader(ins.operands[-1], "pred", ins)

        def run(sel):
            sel = self._threads(sel)
            b = np.broadcast_to(bid(sel), sel.shape).astype(np.int64)
            if (b > 15).any():
                raise PtxUnsupportedError(f"{self._where(ins)}: barrier id must be 0..15; got {int(b.max())}")
            self.bar_pred[sel] = np.broadcast_to(pred(sel), sel.shape)
            self.bar_wait[sel] = True
            self.bar_id[sel] = b
            self.bar_pc[sel] = self.pc[sel]
            self.pc[sel] = self.END
            self._arrivals(sel, b, count)
        return run

    def _arrivals(self, sel, b, count) -> None:
        key = self.slot_of[sel] * 16 + b
        self.bar_count += np.bincount(key, minlength=self.nslots * 16).reshape(self.nslots, 16)
        if count is not None:
            self.bar_need.reshape(-1)[key] = np.broadcast_to(count(sel), sel.shape)
        self._release_barriers()

    def _release_barriers(self) -> None:
        """Complete every barrier whose arrivals reached its count (default: the live threads)."""
        alive = self.tpb - self.exited.reshape(self.nslots, self.tpb).sum(axis=1)
        need = np.where(self.bar_need > 0, self.bar_need, alive[:, None])
        done = (self.bar_count > 0) & (self.bar_count >= need)
        if not done.any():
            return
        waiting = self.bar_wait & done[self.slot_of, self.bar_id]
        released = np.flatnonzero(waiting)
        if self.bar_red_out:
            self._reduce_predicates(released)
        self.bar_wait[waiting] = False
        self.pc[waiting] = self.bar_pc[waiting] + 1
        self.bar_count[done] = 0
        self.bar_need[done] = 0
        self.stats.barriers += int(done.sum())
        self.progress += 1
        slots = done.any(axis=1)
        self.yielding[slots[self.warp_slot]] = False
        if self.race:
            cleared = np.repeat(slots, self.shared_stride)
            self.race_w[cleared] = -1
            self.race_r[cleared] = -1

    def _reduce_predicates(self, released: np.ndarray) -> None:
        """Results of the ``bar.red`` instructions among the threads a barrier releases."""
        at = self.bar_pc[released]
        red = np.isin(at, list(self.bar_red_out))
        if not red.any():
            return
        th = released[red]
        key = self.slot_of[th] * 16 + self.bar_id[th]
        n = self.nslots * 16
        popc = np.bincount(key, weights=self.bar_pred[th], minlength=n).astype(np.int64)
        total = np.bincount(key, minlength=n)
        for q in np.unique(at[red]):
            write, op = self.bar_red_out[int(q)]
            mine = at[red] == q
            k = key[mine]
            value = {"popc": popc[k].astype(np.uint32), "and": popc[k] == total[k], "or": popc[k] > 0}[op]
            write(th[mine], value)

    def _op_membar(self, ins: Instruction, idx: int):
        return lambda sel: None

    _op_fence = _op_membar
    _op_prefetch = _op_membar
    _op_prefetchu = _op_membar
    _op_applypriority = _op_membar
    _op_discard = _op_membar

    def _op_nanosleep(self, ins: Instruction, idx: int):
        def run(sel):
            self.yielding[np.unique((np.arange(self.T)[sel]) >> 5)] = True
        return run

    def _op_trap(self, ins: Instruction, idx: int):
        def run(sel):
            t = int(np.arange(self.T)[sel][0])
            raise PtxMemoryError(f"{self._where(ins)}: trap executed by {self._who(t)}")
        return run

    _op_brkpt = _op_trap

    def _op_call(self, ins: Instruction, idx: int):
        raise PtxUnsupportedError(f"{self._where(ins)}: calls of non-inlined device functions are not supported")

    def _op_createpolicy(self, ins: Instruction, idx: int):
        w = self._writer(ins.operands[0], "b64", ins)
        return lambda sel: w(sel, np.uint64(0))

    # -- moves: registers, immediates, special registers, symbol addresses ----------------------
    def _op_mov(self, ins: Instruction, idx: int):
        """``mov.t d, a``: a copy (PTX ISA 9.7.9.3); pack/unpack forms go to the semantics."""
        if len(ins.operands) != 2 or len(ins.types) != 1:
            raise PtxUnsupportedError(f"{self._where(ins)}: mov takes one type, a destination and a source")
        t = ins.types[0]
        r = self._reader(ins.operands[1], t, ins)
        w = self._writer(ins.operands[0], t, ins)
        return lambda sel: w(sel, r(sel))

    def _mov_vector(self, ins: Instruction, idx: int):
        """``mov.b32 d, {a, b}`` (pack) and ``mov.b64 {a, b}, d`` (unpack) through the semantics."""
        from refsim.ptx import semantics

        if len(ins.operands) != 2 or not ins.types:
            raise PtxUnsupportedError(f"{self._where(ins)}: malformed vector mov")
        width = _bits(ins.types[0])
        d, a = ins.operands
        if d[0] == "vec":
            n = len(d[1])
            r = self._reader(a, ins.types[0], ins)
            ws = [self._writer(o, f"b{width // n}", ins) for o in d[1]]
            semantics.mov_unpack(np.zeros(1, _dtype(width)), width, n)   # validates the form now

            def run_unpack(sel):
                for w, v in zip(ws, semantics.mov_unpack(r(sel), width, n)):
                    w(sel, v)
            return run_unpack
        n = len(a[1])
        rs = [self._reader(o, f"b{width // n}", ins) for o in a[1]]
        w = self._writer(d, ins.types[0], ins)
        semantics.mov_pack([np.zeros(1, _dtype(width // n))] * n, width)

        def run_pack(sel):
            w(sel, semantics.mov_pack([r(sel) for r in rs], width))
        return run_pack

    def _op_cvta(self, ins: Instruction, idx: int):
        t = ins.types[0]
        bits = _bits(t)
        mods = [m for m in ins.mods if m != "to"]
        space = mods[0].split("::")[0] if mods else "global"
        to = "to" in ins.mods
        delta = {"shared": SHARED_WINDOW, "local": LOCAL_WINDOW}.get(space, 0)
        r = self._reader(ins.operands[1], t, ins)
        w = self._writer(ins.operands[0], t, ins)
        mask = (1 << bits) - 1

        def run(sel):
            v = r(sel).astype(np.uint64)
            v = (v - np.uint64(delta)) if to else (v + np.uint64(delta))
            w(sel, (v & np.uint64(mask)).astype(_dtype(bits)))
        return run

    def _op_isspacep(self, ins: Instruction, idx: int):
        space = ins.mods[0].split("::")[0]
        r = self._reader(ins.operands[1], "u64", ins)
        w = self._writer(ins.operands[0], "pred", ins)

        def run(sel):
            a = np.asarray(r(sel)).astype(np.uint64)
            sh = (a >= SHARED_WINDOW) & (a < SHARED_WINDOW + WINDOW_BYTES)
            lo = (a >= LOCAL_WINDOW) & (a < LOCAL_WINDOW + WINDOW_BYTES)
            res = {"shared": sh, "local": lo, "global": ~sh & ~lo, "const": ~sh & ~lo,
                   "param": np.zeros_like(sh)}[space]
            w(sel, res)
        return run

    # -- memory -----------------------------------------------------------------------------
    def _address(self, op, ins: Instruction, space: str):
        """``sel -> (space per access or None, uint64 addresses)`` of an address operand."""
        if op[0] != "addr":
            raise PtxUnsupportedError(f"{self._where(ins)}: expected an address operand [..]")
        _, base, off = op
        if base is None:
            c = np.uint64(off % 2**64)
            return lambda sel: np.asarray(c)
        if base[0] == "sym":
            sp, a = self._symbol_address(base[1], ins)
            if space not in ("generic", sp) and not (space == "const" and sp == "global"):
                raise PtxUnsupportedError(f"{self._where(ins)}: symbol {base[1]} is in .{sp}, not .{space}")
            if space == "generic" and sp in ("shared", "local"):
                a += SHARED_WINDOW if sp == "shared" else LOCAL_WINDOW
            c = np.uint64((a + off) % 2**64)
            return lambda sel: np.asarray(c)
        rbits = self.k.registers[base[1]].bits
        r = self._reader(base, "u64" if rbits == 64 else "u32", ins)
        o = np.uint64(off % 2**64)
        if rbits == 64:
            return lambda sel: r(sel) + o
        return lambda sel: (r(sel).astype(np.uint64) + o) & np.uint64(0xFFFFFFFF)

    def _fault(self, ins, sel, bad, addr, what, cls=PtxMemoryError):
        idx = np.arange(self.T)[sel] if isinstance(sel, slice) else np.asarray(sel)
        t = int(np.broadcast_to(idx, bad.shape)[bad][0])
        a = int(np.broadcast_to(addr, bad.shape)[bad][0])
        raise cls(f"{self._where(ins)}: {what} at address 0x{a:x} by {self._who(t)}")

    def _resolve(self, ins, sel, space: str, addr: np.ndarray, nbytes: int, esize: int):
        """Group accesses by backing buffer: list of (mask, typed view, element index (n,))."""
        addr = np.broadcast_to(np.asarray(addr, np.uint64), (self._count(sel),))
        if nbytes > 1 and (addr % np.uint64(nbytes)).any():
            self._fault(ins, sel, (addr % np.uint64(nbytes)) != 0, addr,
                        f"misaligned {nbytes}-byte .{space} access", PtxMisalignedError)
        out = []
        if space == "generic":
            sh = (addr >= SHARED_WINDOW) & (addr < SHARED_WINDOW + WINDOW_BYTES)
            lo = (addr >= LOCAL_WINDOW) & (addr < LOCAL_WINDOW + WINDOW_BYTES)
            gl = ~sh & ~lo
            for m, sp, delta in ((gl, "global", 0), (sh, "shared", SHARED_WINDOW), (lo, "local", LOCAL_WINDOW)):
                if m.any():
                    sub = self._resolve_space(ins, sel, sp, addr - np.uint64(delta), nbytes, esize, m)
                    out.extend(sub)
            return out
        if space == "const":
            space = "global"
        return self._resolve_space(ins, sel, space, addr, nbytes, esize, None)

    def _count(self, sel) -> int:
        return self.T if isinstance(sel, slice) else len(sel)

    def _threads(self, sel) -> np.ndarray:
        return np.arange(self.T) if isinstance(sel, slice) else sel

    def _resolve_space(self, ins, sel, space, addr, nbytes, esize, mask):
        n = self._count(sel)
        m = np.ones(n, bool) if mask is None else mask
        if space == "global":
            bi, ok = self.gmem.locate(addr, nbytes)
            bad = m & ~ok
            if bad.any():
                self._fault(ins, sel, bad, addr, f"out-of-bounds {nbytes}-byte .global access (no buffer holds it)")
            res = []
            for b in np.unique(bi[m]):
                mm = m & (bi == b)
                view = self.gmem.view(int(b), esize)
                res.append((mm, view, ((addr[mm] - np.uint64(self.gmem.bases[int(b)])) // np.uint64(esize)).astype(np.int64), "global"))
            return res
        if space == "shared":
            bad = m & (addr + np.uint64(nbytes) > np.uint64(self.shared_size))
            if bad.any():
                self._fault(ins, sel, bad, addr, f"out-of-bounds {nbytes}-byte .shared access "
                            f"(the block has {self.shared_size} bytes)")
            th = self._threads(sel)[m]
            flat = self.slot_of[th].astype(np.uint64) * np.uint64(self.shared_stride) + addr[m]
            return [(m, typed(self.shared, esize), (flat // np.uint64(esize)).astype(np.int64), "shared")]
        if space == "local":
            bad = m & (addr + np.uint64(nbytes) > np.uint64(self.k.local_bytes))
            if bad.any():
                self._fault(ins, sel, bad, addr, f"out-of-bounds {nbytes}-byte .local access")
            th = self._threads(sel)[m]
            flat = th.astype(np.uint64) * np.uint64(self.local_stride) + addr[m]
            return [(m, typed(self.local, esize), (flat // np.uint64(esize)).astype(np.int64), "local")]
        if space == "param":
            bad = m & (addr + np.uint64(nbytes) > np.uint64(self.param.size - 16))
            if bad.any():
                self._fault(ins, sel, bad, addr, f"out-of-bounds {nbytes}-byte .param access")
            return [(m, typed(self.param, esize), (addr[m] // np.uint64(esize)).astype(np.int64), "param")]
        raise PtxUnsupportedError(f"{self._where(ins)}: state space .{space} is not supported")

    @staticmethod
    def _space(ins: Instruction) -> str:
        for m in ins.mods:
            base = m.split("::")[0]
            if base in _SPACES:
                return base
        return "generic"

    @staticmethod
    def _vec(ins: Instruction) -> int:
        for m in ins.mods:
            if m in ("v2", "v4", "v8"):
                return int(m[1:])
        return 1

    def _race_read(self, ins, sel, mm, flat_bytes):
        th = self._threads(sel)[mm]
        if self.pending is not None and (self.pending[flat_bytes] > 0).any():
            bad = (self.pending[flat_bytes] > 0).any(axis=1)
            raise PtxRaceError(f"{self._where(ins)}: reads a cp.async destination before its wait_group "
                               f"({self._who(int(th[bad][0]))})")
        w = self.race_w[flat_bytes]
        conflict = (w >= 0) & (w != th[:, None])
        if conflict.any():
            row = np.flatnonzero(conflict.any(axis=1))[0]
            other = int(w[row][conflict[row]][0])
            raise PtxRaceError(f"{self._where(ins)}: shared-memory read by {self._who(int(th[row]))} of a byte "
                               f"written by {self._who(other)} since the last barrier")
        r = self.race_r[flat_bytes]
        r[:] = np.where((r == -1) | (r == th[:, None]), th[:, None], -2)
        self.race_r[flat_bytes] = r

    def _race_write(self, ins, sel, mm, flat_bytes):
        th = self._threads(sel)[mm]
        w = self.race_w[flat_bytes]
        r = self.race_r[flat_bytes]
        conflict = ((w >= 0) & (w != th[:, None])) | ((r != -1) & (r != th[:, None]))
        if conflict.any():
            row = np.flatnonzero(conflict.any(axis=1))[0]
            raise PtxRaceError(f"{self._where(ins)}: shared-memory write by {self._who(int(th[row]))} to a byte "
                               f"another thread accessed since the last barrier")
        # two threads of this one instruction writing the same byte are a conflict too
        uniq, counts = np.unique(flat_bytes.reshape(-1), return_counts=True)
        if (counts > 1).any() and len(np.unique(th)) > 1:
            raise PtxRaceError(f"{self._where(ins)}: several threads write the same shared byte "
                               f"(0x{int(uniq[counts > 1][0]) % self.shared_stride:x}) in one instruction")
        self.race_w[flat_bytes] = th[:, None]

    def _shared_bytes_of(self, idx_elems, esize, vec):
        return (idx_elems[:, None] * esize + np.arange(esize * vec)).reshape(len(idx_elems), -1)

    def _count_wavefronts(self, sel, first_byte: np.ndarray, nbytes: int, mm) -> None:
        """Shared wavefronts of one warp-level access: per warp and per phase (the lanes whose
        accesses fit in 128 bytes: 32 lanes for <= 4-byte, 16 for 8-byte, 8 for 16-byte accesses),
        the largest number of distinct 4-byte words any of the 32 banks must deliver."""
        th = self._threads(sel)[mm]
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
        self.stats.shared_wavefronts += int(np.maximum.reduceat(per_bank, wstarts).sum())
        self.stats.shared_requests += int(np.unique(th >> 5).size)

    def _spin_check(self, idx: int, sel, values: np.ndarray) -> None:
        """Yield the warps whose flag load returned what it returned last time at this instruction."""
        th = self._threads(sel)
        v = values.reshape(len(th), -1).astype(np.uint64)
        v = v[:, 0] if v.shape[1] == 1 else (v * (np.arange(1, v.shape[1] + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15))).sum(1)
        prev = self.last_seen.get(idx)
        if prev is None:
            prev = self.last_seen[idx] = (np.zeros(self.T, np.uint64), np.zeros(self.T, bool))
        same = prev[1][th] & (prev[0][th] == v)
        prev[0][th] = v
        prev[1][th] = True
        warps = th >> 5
        uw, inv = np.unique(warps, return_inverse=True)
        allsame = np.ones(len(uw), bool)
        np.logical_and.at(allsame, inv, same)
        self.yielding[uw[allsame]] = True

    def _vector_access(self, ins: Instruction, data: int, address: int, role: str):
        """The shape of one ld/st: state space, element type and bytes, vector width, total bytes,
        the ``vec`` data operands (operand ``data``, checked against ``.v2/.v4``) and the address
        function of operand ``address``."""
        space = self._space(ins)
        vec = self._vec(ins)
        t = ins.types[0]
        esize = max(1, _bits(t) // 8)
        ops = _flatten([ins.operands[data]])
        if len(ops) != vec:
            raise PtxUnsupportedError(f"{self._where(ins)}: {vec} {role} expected")
        return space, t, esize, vec, esize * vec, ops, self._address(ins.operands[address], ins, space)

    def _op_ld(self, ins: Instruction, idx: int):
        space, t, esize, vec, nbytes, dst_ops, addr_of = self._vector_access(ins, 0, 1, "destinations")
        writers = [self._writer(o, t, ins) for o in dst_ops]
        spin = any(m in ("volatile", "acquire", "relaxed") for m in ins.mods)

        base = ins.operands[1][1] if ins.operands[1][0] == "addr" else None
        if space == "param" and (base is None or base[0] == "sym"):
            a = int(addr_of(None))
            if a + nbytes > self.param.size - 16 or a % nbytes:
                raise PtxMemoryError(f"{self._where(ins)}: .param access at 0x{a:x} outside the parameters")
            vals = [np.asarray(typed(self.param, esize)[a // esize + j]) for j in range(vec)]

            def run_param(sel):
                for w, v in zip(writers, vals):
                    w(sel, v)
            return run_param

        def run(sel):
            n = self._count(sel)
            addr = np.broadcast_to(addr_of(sel), (n,))
            out = np.zeros((n, vec), _dtype(esize * 8))
            for mm, view, ei, sp in self._resolve(ins, sel, space, addr, nbytes, esize):
                gi = ei[:, None] + np.arange(vec)
                if sp == "shared":
                    fb = self._shared_bytes_of(ei, esize, vec) if self.poison or self.race else None
                    if self.poison:
                        ok = self.shared_init[fb].all(axis=1)
                        if not ok.all():
                            th = self._threads(sel)[mm][~ok]
                            raise PtxUninitializedError(f"{self._where(ins)}: shared memory read before written "
                                                        f"by {self._who(int(th[0]))}")
                    if self.race:
                        self._race_read(ins, sel, mm, fb)
                    self._count_wavefronts(sel, ei * esize, nbytes, mm)
                elif sp == "global":
                    self.stats.global_bytes_read += int(mm.sum()) * nbytes
                out[mm] = view[gi]
            for j, w in enumerate(writers):
                w(sel, out[:, j])
            if spin:
                self._spin_check(idx, sel, out)
        return run

    _op_ldu = _op_ld

    def _op_st(self, ins: Instruction, idx: int):
        space, t, esize, vec, nbytes, src_ops, addr_of = self._vector_access(ins, 1, 0, "sources")
        readers = [self._reader(o, t, ins) for o in src_ops]
        if space == "param":
            raise PtxUnsupportedError(f"{self._where(ins)}: st.param (device-function calls) is not supported")

        def run(sel):
            n = self._count(sel)
            addr = np.broadcast_to(addr_of(sel), (n,))
            vals = np.stack([np.broadcast_to(_convert(r(sel), esize * 8, False), (n,)) for r in readers], axis=1)
            for mm, view, ei, sp in self._resolve(ins, sel, space, addr, nbytes, esize):
                gi = ei[:, None] + np.arange(vec)
                if sp == "shared":
                    fb = self._shared_bytes_of(ei, esize, vec) if self.poison or self.race else None
                    if self.race:
                        self._race_write(ins, sel, mm, fb)
                    if self.poison:
                        self.shared_init[fb] = True
                    self._count_wavefronts(sel, ei * esize, nbytes, mm)
                elif sp == "global":
                    self.stats.global_bytes_written += int(mm.sum()) * nbytes
                try:
                    view[gi] = vals[mm]
                except ValueError as e:
                    raise PtxMemoryError(f"{self._where(ins)}: store to a read-only array ({e})") from None
            self.progress += 1
        return run

    # -- atomics ------------------------------------------------------------------------------
    def _atom_common(self, ins: Instruction, idx: int, returns: bool):
        from refsim.ptx import semantics

        space = self._space(ins)
        t = ins.types[0]
        esize = _bits(t) // 8
        known = ("and", "or", "xor", "cas", "exch", "add", "inc", "dec", "min", "max")
        ops = [m for m in ins.mods if m in known]
        if len(ops) != 1 or self._vec(ins) != 1:
            raise PtxUnsupportedError(f"{self._where(ins)}: atomic operation not understood")
        aop = ops[0]
        flat = _flatten(ins.operands)
        if returns:
            w = self._writer(flat[0], t, ins)
            rest = flat[1:]
        else:
            w, rest = None, flat
        addr_of = self._address(rest[0], ins, space)
        rb = self._reader(rest[1], t, ins)
        rc = self._reader(rest[2], t, ins) if len(rest) > 2 else None
        noftz = "noftz" in ins.mods
        try:
            semantics.atom_apply(aop, t, np.zeros(1, _dtype(esize * 8)), np.zeros(1, _dtype(esize * 8)),
                                 np.zeros(1, _dtype(esize * 8)) if aop == "cas" else None, noftz=noftz,
                                 space="shared" if space == "shared" else "global")
        except PtxUnsupportedError as e:
            raise PtxUnsupportedError(f"{self._where(ins)}: {e}") from None

        def apply(aop, t, old, b, c, sp):
            return semantics.atom_apply(aop, t, old, b, c, noftz=noftz, space=sp)
        spin = aop in ("cas", "exch") or any(m in ("acquire", "acq_rel", "relaxed") for m in ins.mods) and returns

        def run(sel):
            n = self._count(sel)
            addr = np.broadcast_to(addr_of(sel), (n,))
            b = np.broadcast_to(rb(sel), (n,))
            c = np.broadcast_to(rc(sel), (n,)) if rc is not None else None
            old_all = np.zeros(n, _dtype(esize * 8))
            for mm, view, ei, sp in self._resolve(ins, sel, space, addr, esize, esize):
                pos = np.flatnonzero(mm)
                order = np.argsort(ei, kind="stable")
                e_sorted = ei[order]
                first = np.r_[0, np.flatnonzero(np.diff(e_sorted)) + 1]
                rank = np.empty(len(ei), np.int64)
                starts = np.zeros(len(ei), np.int64)
                starts[first] = first
                np.maximum.accumulate(starts, out=starts)
                rank[order] = np.arange(len(ei)) - starts
                for r in range(int(rank.max()) + 1 if len(rank) else 0):
                    k = rank == r
                    e = ei[k]
                    old = view[e].copy()
                    new = apply(aop, t, old, b[pos[k]], None if c is None else c[pos[k]],
                                "shared" if sp == "shared" else "global")
                    view[e] = np.asarray(new, view.dtype)
                    if (old != view[e]).any():
                        self.progress += 1
                    old_all[pos[k]] = old
                if sp == "global":
                    self.stats.global_bytes_read += len(ei) * esize
                    self.stats.global_bytes_written += len(ei) * esize
                elif sp == "shared" and self.poison:
                    self.shared_init[self._shared_bytes_of(ei, esize, 1)] = True
            if w is not None:
                w(sel, old_all)
            if spin:
                self._spin_check(idx, sel, old_all)
        return run

    def _op_atom(self, ins: Instruction, idx: int):
        return self._atom_common(ins, idx, True)

    def _op_red(self, ins: Instruction, idx: int):
        return self._atom_common(ins, idx, False)

    # -- cp.async -------------------------------------------------------------------------------
    def _op_cp(self, ins: Instruction, idx: int):
        mods = ins.mods
        if not mods or mods[0] != "async":
            raise PtxUnsupportedError(f"{self._where(ins)}: {ins.name} is not supported")
        if "commit_group" in mods:
            return lambda sel: self.group.__setitem__(sel, self.group[sel] + 1)
        if "wait_group" in mods or "wait_all" in mods:
            if "wait_all" in mods:
                def run_all(sel):
                    self.group[sel] += 1
                    self._complete_async(self._threads(sel), 0)
                return run_all
            nr = self._reader(ins.operands[0], "u32", ins)
            return lambda sel: self._complete_async(self._threads(sel), int(np.asarray(nr(sel)).max()))
        if "bulk" in mods or "mbarrier" in mods:
            raise PtxUnsupportedError(f"{self._where(ins)}: {ins.name} is not supported")
        ops = list(ins.operands)
        if any(m.startswith("L2::cache_hint") for m in mods):
            ops = ops[:-1]
        dst_of = self._address(ops[0], ins, "shared")
        src_of = self._address(ops[1], ins, "global")
        if ops[2][0] != "imm" or ops[2][1] not in (4, 8, 16):
            raise PtxUnsupportedError(f"{self._where(ins)}: cp-size must be 4, 8 or 16")
        size = int(ops[2][1])
        srcsize = ignore = None
        if len(ops) > 3:
            o = ops[3]
            if o[0] == "reg" and self.k.registers[o[1]].bits == 1:
                ignore = self._reader(o, "pred", ins)
            else:
                srcsize = self._reader(o, "u32", ins)

        def run(sel):
            th = self._threads(sel)
            n = len(th)
            dst = np.broadcast_to(dst_of(sel), (n,))
            src = np.broadcast_to(src_of(sel), (n,))
            ss = np.full(n, size, np.int64)
            if srcsize is not None:
                ss = np.broadcast_to(srcsize(sel), (n,)).astype(np.int64)
                if (ss > size).any():
                    raise PtxMemoryError(f"{self._where(ins)}: src-size above cp-size {size}")
            if ignore is not None:
                ss = np.where(np.broadcast_to(ignore(sel), (n,)), 0, size)
            data = np.zeros((n, size), np.uint8)
            rd = ss > 0
            if rd.any():
                sub = th[rd]
                parts = self._resolve(ins, sub, "global", src[rd], size if (ss[rd] == size).all() else 1, 1)
                for mm, view, ei, sp in parts:
                    gi = ei[:, None] + np.arange(size)
                    keep = np.arange(size) < ss[rd][mm][:, None]
                    gi = np.where(keep, gi, ei[:, None])
                    rows = np.flatnonzero(rd)[mm]
                    data[rows] = np.where(keep, view[gi], 0)
                    self.stats.global_bytes_read += int(ss[rd][mm].sum())
            parts = self._resolve(ins, sel, "shared", dst, size, 1)
            mm, view, ei, sp = parts[0]
            if self.race:
                self.pending[ei[:, None] + np.arange(size)] += 1
            self.async_records.append({"thr": th.copy(), "gid": self.group[th].copy(), "dst": ei.copy(),
                                       "data": data, "line": ins.line})
        return run

    def _complete_async(self, th: np.ndarray, n_allowed: int | None) -> None:
        """Finish the cp.async copies of threads ``th`` older than their ``n_allowed`` newest groups."""
        if not self.async_records:
            return
        mask = np.zeros(self.T, bool)
        mask[th] = True
        keep = []
        for rec in self.async_records:
            m = mask[rec["thr"]]
            if n_allowed is not None:
                m &= rec["gid"] < self.group[rec["thr"]] - n_allowed
            if m.any():
                size = rec["data"].shape[1]
                fb = rec["dst"][m][:, None] + np.arange(size)
                self.shared[fb] = rec["data"][m]
                if self.poison:
                    self.shared_init[fb] = True
                if self.race:
                    self.pending[fb] -= 1
                self.progress += 1
                if (~m).any():
                    keep.append({k: (v[~m] if isinstance(v, np.ndarray) else v) for k, v in rec.items()})
            else:
                keep.append(rec)
        self.async_records = keep

    # -- ldmatrix ---------------------------------------------------------------------------------
    def _op_ldmatrix(self, ins: Instruction, idx: int):
        h = self.handlers[idx]
        num = next(int(m[1:]) for m in ins.mods if m in ("x1", "x2", "x4"))
        dsts = _flatten([ins.operands[0]])
        writers = [self._writer(o, "b32", ins) for o in dsts]
        addr_of = self._address(ins.operands[1], ins, "shared" if self._space(ins) == "shared" else "generic")
        space = "shared" if self._space(ins) == "shared" else "generic"

        def run(sel):
            warps, lanes, active = self._warps(sel)
            if not active.all():
                raise PtxUnsupportedError(f"{self._where(ins)}: ldmatrix executed by a partial warp")
            W = len(warps)
            src_lanes = lanes[:, :8 * num].reshape(-1)
            addr = np.broadcast_to(addr_of(src_lanes), src_lanes.shape)
            parts = self._resolve(ins, src_lanes, space, addr, 16, 2)
            rows = np.zeros((len(src_lanes), 8), np.uint16)
            for mm, view, ei, sp in parts:
                rows[mm] = view[ei[:, None] + np.arange(8)]
                if sp == "shared":
                    fb = self._shared_bytes_of(ei, 2, 8)
                    if self.race:
                        self._race_read(ins, src_lanes, mm, fb)
                    if self.poison and not self.shared_init[fb].all():
                        raise PtxUninitializedError(f"{self._where(ins)}: shared memory read before written")
                    self.stats.shared_wavefronts += W * num
                    self.stats.shared_requests += W
            d, = h.fn(rows.reshape(W, num, 8, 8))
            flat_lanes = lanes.reshape(-1)
            for j, w in enumerate(writers):
                w(flat_lanes, d[..., j].reshape(-1))
        return run

    # ------------------------------------------------------------------ the loop
    def run(self) -> LaunchStats:
        """Execute until every block has exited; returns the statistics."""
        st = self.stats
        instrs = self.k.instructions
        names = [ins.name for ins in instrs]
        opcount = st.opcodes
        prog = self.program
        fast = self.schedule == "lockstep"
        self._stall_rounds, self._last_progress, self._last_digest = 0, -1, None
        while True:
            step = self._converged_step() if fast and not self.yielding.any() else None
            if step is None:
                step = self._scheduled_step()
                if step is None:
                    break
            p, sel, nw, nt = step
            st.warp_instructions += nw
            st.thread_instructions += nt
            opcount[names[p]] = opcount.get(names[p], 0) + nw
            if st.warp_instructions > self.max_wi:
                raise PtxLimitError(f"kernel {self.k.name}: more than max_warp_instructions={self.max_wi} "
                                    f"warp-instructions (at PTX line {instrs[p].line} `{instrs[p].text}`)")
            prog[p](sel)
        self._complete_async(np.arange(self.T), None)
        return st

    def _converged_step(self):
        """Lockstep with no warp yielding: the lowest PC is the global minimum, and the warps
        holding it are exactly the warps whose minimum it is. (p, sel, warps, threads) or None."""
        pc = self.pc
        p = int(pc.min())
        if p >= self.END:
            return None
        m = pc == p
        if m.all():
            return p, slice(None), self.NW, self.T
        sel = np.flatnonzero(m)
        return p, sel, int(np.count_nonzero(np.diff(sel >> 5))) + 1, len(sel)

    def _scheduled_step(self):
        """The general step (yielding warps, ``random``), deadlock detection; None when finished."""
        pc = self.pc
        wmin = pc.reshape(self.NW, 32).min(axis=1)
        cand = wmin < self.END
        if not cand.any():
            if self.exited.all() and self.next_block >= self.nblocks:
                return None
            self._deadlock("every live thread waits at a barrier that cannot complete")
        pick = cand & ~self.yielding
        if not pick.any():
            # every runnable warp yielded: a deadlock only if nothing at all changed since the last
            # such round (memory writes, exits, barriers, registers, PCs); a loop that reads an
            # unchanging volatile value while counting is not one
            if self.progress == self._last_progress:
                digest = self._digest(np.repeat(cand, 32))
                self._stall_rounds = self._stall_rounds + 1 if digest == self._last_digest else 0
                self._last_digest = digest
                if self._stall_rounds >= DEADLOCK_ROUNDS:
                    self._deadlock("every running warp spins on a flag that no other thread changes")
            else:
                self._stall_rounds, self._last_digest = 0, None
            self._last_progress = self.progress
            self.yielding[:] = False
            pick = cand
        if self.schedule == "random":
            ws = np.flatnonzero(pick)
            w0 = ws[self.rng.integers(len(ws))]
            p = int(wmin[w0])
            chosen = pick & (wmin == p) & (self.rng.random(self.NW) < 0.5)
            chosen[w0] = True
        else:
            p = int(wmin[pick].min())
            chosen = pick & (wmin == p)
        nw = int(np.count_nonzero(chosen))
        if nw == self.NW and (pc == p).all():
            return p, slice(None), nw, self.T
        sel = np.flatnonzero((pc == p) & np.repeat(chosen, 32))
        return p, sel, nw, len(sel)

    def _digest(self, runnable: np.ndarray) -> bytes:
        """A hash of the PCs and of the registers of the ``runnable`` threads (the spinning ones;
        the others wait at barriers and cannot change), taken only when every runnable warp yields
        without any memory write in between."""
        idx = np.flatnonzero(runnable)
        h = hashlib.blake2b(self.pc.tobytes(), digest_size=16)
        for r in self.regs:
            h.update(r[idx].tobytes())
        return h.digest()

    def _deadlock(self, why: str) -> None:
        lines = []
        for s in range(self.nslots):
            if self.slot_block[s] < 0:
                continue
            lo, hi = s * self.tpb, (s + 1) * self.tpb
            live = ~self.exited[lo:hi]
            if not live.any():
                continue
            at = np.where(self.bar_wait[lo:hi], self.bar_pc[lo:hi], self.pc[lo:hi])[live]
            pcs = sorted(set(int(x) for x in at))[:3]
            where = ", ".join(f"line {self.k.instructions[q].line} `{self.k.instructions[q].text}`"
                              for q in pcs if q < self.END)
            b = int(self.slot_block[s])
            gx, gy = self.grid[0], self.grid[1]
            lines.append(f"block ({b % gx}, {b // gx % gy}, {b // (gx * gy)}) at {where}")
        raise PtxDeadlockError(f"kernel {self.k.name}: deadlock: {why}; waiting: " + "; ".join(lines[:8])
                               + (f"; ... ({len(lines)} blocks)" if len(lines) > 8 else ""))


def needs_handler(ins: Instruction) -> bool:
    """Whether a static instruction executes through a :mod:`refsim.ptx.semantics` handler."""
    op = ins.opcode
    if op in ("mma", "shfl", "vote", "ldmatrix"):
        return True
    return op not in ENGINE_OPCODES


def check_launch_shape(name: str, v) -> tuple[int, int, int]:
    """``grid``/``block`` as a 3-tuple of positive ints (an int or a tuple of 1..3 ints)."""
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        v = (int(v),)
    if not isinstance(v, tuple) or not 1 <= len(v) <= 3 or not all(
            isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in v):
        raise PtxLaunchError(f"{name}: must be an int or a tuple of 1 to 3 ints; got {v!r}")
    v = tuple(int(x) for x in v) + (1,) * (3 - len(v))
    if any(x < 1 for x in v):
        raise PtxLaunchError(f"{name}: every dimension must be >= 1; got {v}")
    return v
