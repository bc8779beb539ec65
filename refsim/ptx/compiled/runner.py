"""One launch on the compiled path: the interpreter's state as NumPy arrays handed to the C runtime,
the run loop (with the steps whose ALU handler runs in Python), statistics and error messages.

Every array has the interpreter's meaning and dtype (``Launch.__init__``): per thread ``pc``,
``exited``, ``bar_wait``/``bar_id``/``bar_pc``, ``group``; per slot ``slot_block``, barrier counts; per
warp ``yielding``; one array of T per register (``bool`` for predicates, as the interpreter's). The
messages of errors are the interpreter's, word for word (tests/ptx/compiled/test_errors.py)."""

from __future__ import annotations

import ctypes
from collections import OrderedDict

import numpy as np

from refsim.ptx import engine, loops
from refsim.ptx.arch import base_arch
from refsim.ptx.operands import convert, flatten
from refsim.ptx.compiled import state as st
from refsim.ptx.compiled.instructions import split_operands
from refsim.ptx.compiled.operands import immediate_bits
from refsim.ptx.memory import read_only_error
from refsim.ptx.parse import TYPE_BITS
from refsim.ptx.errors import (
    PtxBarrierError, PtxDeadlockError, PtxMemoryError, PtxMisalignedError, PtxRaceError, PtxUnsupportedError, error, message,
    waiting,
)

__all__ = ["CompiledLaunch", "geometry"]

_UINT = {1: np.bool_, 8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}
# status codes of refsim/native/ptx_runtime.h (the enum's order)
(RT_OK, RT_DONE, RT_CALLBACK, E_LIMIT, E_DEADLOCK_BARRIER, E_DEADLOCK_SPIN, E_MISALIGNED, E_OOB_GLOBAL,
 E_OOB_SHARED, E_OOB_LOCAL, E_OOB_PARAM, E_READONLY, E_TRAP, E_RACE_READ, E_RACE_WRITE, E_RACE_SAME_BYTE,
 E_RACE_PENDING, E_UNINIT_REG, E_UNINIT_GUARD, E_UNINIT_SHARED, E_UNINIT_SHARED_NOWHO, E_PARTIAL_MMA,
 E_PARTIAL_LDMATRIX, E_BARRIER_ID, E_SRC_SIZE, E_NOMEM, E_DEADLOCK_LOOP, E_MBAR_ACCESS, E_RACE_ASYNC, E_RACE_WGMMA,
 E_RACE_WGMMA_SMEM) = range(31)
_SPACE_NAMES = ("generic", "global", "shared", "local", "param", "const")


def _ptr(a: np.ndarray) -> int:
    return a.ctypes.data


def geometry(kernel, grid, block, shared_bytes: int) -> tuple[int, int, int, int]:
    """(threads per block, padded threads per block, blocks, resident block slots) of a launch, as
    ``Launch.__init__`` places them; PtxLimitError when the resident state would pass
    refsim.ptx.limits.MAX_LAUNCH_STATE_BYTES (checked before anything is allocated, as there)."""
    from refsim.ptx import limits

    nthreads = block[0] * block[1] * block[2]
    tpb = (nthreads + 31) // 32 * 32
    nblocks = grid[0] * grid[1] * grid[2]
    nslots = max(1, min(nblocks, engine.RESIDENT_THREADS // tpb))
    state = nslots * tpb * (sum(max(1, r.bits // 8) for r in kernel.registers) + kernel.local_bytes) \
        + nslots * (kernel.shared_bytes + shared_bytes)
    limits.check("launch state bytes (registers, local and shared memory of the resident threads)", state,
                 limits.MAX_LAUNCH_STATE_BYTES, f"kernel {kernel.name}")
    return nthreads, tpb, nblocks, nslots


_SCRATCH: "OrderedDict[tuple, list]" = OrderedDict()   # (T, NW) -> free scratch sets, latest last


def _scratch_take(T: int, NW: int) -> dict:
    """A set of scratch arrays for one launch (contents never outlive a step, so reused freely)."""
    free = _SCRATCH.pop((T, NW), [])
    _SCRATCH[(T, NW)] = free
    while len(_SCRATCH) > 4:                 # a few launch shapes kept warm, not every one ever seen
        _SCRATCH.popitem(last=False)
    if free:
        sc = free.pop()
        sc["mark"][:] = 0
        return sc
    return {"th_buf": np.empty(T, np.int32), "act": np.empty(T, np.int32), "act2": np.empty(T, np.int32),
            "u64a": np.empty(T, np.uint64), "u64b": np.empty(T, np.uint64), "u64c": np.empty(T, np.uint64),
            "u64d": np.empty(32 * T, np.uint64), "bytes": np.empty(64 * T, np.uint8),
            "u32a": np.empty(16 * T, np.uint32), "mark": np.zeros(T + NW, np.uint8), "wlist": np.empty(NW, np.int32)}


class CompiledLaunch:
    """The state of one launch on the compiled path (built by :func:`refsim.ptx.compiled.launch`)."""

    def __init__(self, kernel, handlers, translation, exec_addr, grid, block, param: bytes, gmem, symbols: dict, *,
                 arch: str, shared_bytes: int, schedule: str, seed, max_warp_instructions, race: bool, poison: bool,
                 atomic_order=None, cluster=(1, 1, 1), explicit_cluster: bool = False):
        self.k, self.handlers, self.tr = kernel, handlers, translation
        self.grid, self.block = grid, block
        self.cluster, self.explicit_cluster = cluster, explicit_cluster
        self.atomic_order = atomic_order           # float atomics in Python definitions (LaunchView)
        self.race, self.poison = race, poison
        lib, _ = st.runtime()
        self.lib = lib
        nthreads, tpb, nblocks, nslots = geometry(kernel, grid, block, shared_bytes)
        T = nslots * tpb
        NW = T // 32
        self.T, self.tpb, self.nslots, self.END = T, tpb, nslots, len(kernel.instructions)
        self.max_wi = engine.DEFAULT_MAX_WARP_INSTRUCTIONS if max_warp_instructions is None else int(max_warp_instructions)
        keep = self._keep = []
        self.arrays = {}           # the runtime's NumPy arrays a LaunchView shares (refsim.ptx.compiled.view)
        self.gmem = gmem
        self._view = None
        self._steps = {}

        def arr(a):
            keep.append(a)
            return _ptr(a)

        S = self.S = st.State()
        S.api = lib.refsim_rt_api()
        S.exec = exec_addr
        S.T, S.NW, S.tpb, S.nslots, S.nthreads, S.END, S.nblocks = T, NW, tpb, nslots, nthreads, self.END, nblocks
        S.nins = self.END
        S.grid[:] = grid
        S.block[:] = block
        self.pc = np.zeros(T, np.int32)
        self.exited = np.zeros(T, np.uint8)
        self.bar_wait = np.zeros(T, np.uint8)
        self.bar_pc = np.zeros(T, np.int32)
        S.pc, S.exited, S.bar_wait, S.bar_pc = arr(self.pc), arr(self.exited), arr(self.bar_wait), arr(self.bar_pc)
        a = self.arrays             # the barrier state refsim/ptx/barriers.py keeps (run over a LaunchView)
        a["bar_pred"], a["bar_id"], a["group"] = np.zeros(T, np.uint8), np.zeros(T, np.int64), np.zeros(T, np.int64)
        S.bar_pred, S.bar_id, S.group = arr(a["bar_pred"]), arr(a["bar_id"]), arr(a["group"])
        local = np.tile(np.arange(tpb, dtype=np.int64), nslots)
        bx, by = block[0], block[1]
        self.tid = [(local % bx).astype(np.uint32), ((local // bx) % by).astype(np.uint32), (local // (bx * by)).astype(np.uint32)]
        for i in range(3):
            S.tid[i] = arr(self.tid[i])
        self.slot_block = np.full(nslots, -1, np.int64)
        S.slot_block = arr(self.slot_block)
        a["bar_count"], a["bar_need"] = np.zeros((nslots, 16), np.int64), np.zeros((nslots, 16), np.int64)
        S.bar_count, S.bar_need = arr(a["bar_count"]), arr(a["bar_need"])
        self.ctaid = np.zeros(nslots * 3, np.uint32)
        self.slot_dirty = np.zeros(nslots, np.uint8)
        S.ctaid, S.slot_dirty = arr(self.ctaid), arr(self.slot_dirty)
        self.arrays["yielding"] = np.zeros(NW, np.uint8)
        S.wmin, S.wmask, S.yielding = arr(np.zeros(NW, np.int32)), arr(np.zeros(NW, np.uint32)), arr(self.arrays["yielding"])
        # registers: one array per declaration, the interpreter's dtypes
        self.regs = engine.zero_registers([_UINT[r.bits] for r in kernel.registers], T)
        nregs = len(self.regs)
        S.nregs = nregs
        reg_ptrs = (ctypes.c_void_p * max(1, nregs))(*[_ptr(r) for r in self.regs])
        keep.append(self.regs)
        keep.append(reg_ptrs)
        S.reg = ctypes.cast(reg_ptrs, ctypes.c_void_p)
        S.reg_bits = arr(np.array([r.bits for r in kernel.registers] or [0], np.int32))
        self.reg_init = None
        if poison:
            self.reg_init = engine.zero_registers([np.bool_] * len(kernel.registers), T)
            init_ptrs = (ctypes.c_void_p * max(1, nregs))(*[_ptr(r) for r in self.reg_init])
            keep += [self.reg_init, init_ptrs]
            S.reg_init = ctypes.cast(init_ptrs, ctypes.c_void_p)
        # memory (Launch.__init__): static shared variables, then the dynamic array
        dyn_offset = (kernel.shared_bytes + 15) // 16 * 16
        shared_size = dyn_offset + shared_bytes if (shared_bytes or kernel.extern_shared) else kernel.shared_bytes
        stride = max(16, (shared_size + 15) // 16 * 16)
        self.shared_size = shared_size
        self.arrays["shared"] = np.zeros(nslots * stride, np.uint8)
        S.shared = arr(self.arrays["shared"])
        S.shared_stride, S.shared_size, S.dyn_offset, S.dyn_bytes = stride, shared_size, dyn_offset, shared_bytes
        local_stride = max(16, (kernel.local_bytes + 15) // 16 * 16)
        self.arrays["local"] = np.zeros(T * local_stride, np.uint8) if kernel.local_bytes else np.zeros(16, np.uint8)
        S.local = arr(self.arrays["local"])
        S.local_stride, S.local_bytes = local_stride, kernel.local_bytes
        self.param = np.frombuffer(bytearray(param) + bytes(16), np.uint8)
        S.param, S.param_size = arr(self.param), len(param)
        bufs = gmem.buffers
        S.nbuf = len(bufs)
        S.gbase = arr(np.array(gmem.bases or [0], np.uint64))
        S.gsize = arr(np.array(gmem.sizes or [0], np.uint64))
        gptrs = (ctypes.c_void_p * max(1, len(bufs)))(*[_ptr(b) for b in bufs])
        keep += [bufs, gptrs]
        S.gptr = ctypes.cast(gptrs, ctypes.c_void_p)
        self.buffer_names = list(gmem.names)
        S.gwritable = arr(np.array([b.flags.writeable for b in bufs] or [0], np.uint8))
        self.symbols = symbols
        self.sym = np.array([symbols[name] for name in translation.symbols] or [0], np.uint64)
        S.sym = arr(self.sym)
        if poison:
            self.arrays["shared_init"] = np.zeros(nslots * stride, np.bool_)
            S.shared_init = arr(self.arrays["shared_init"])
        if race:
            a = self.arrays
            a["race_w"], a["race_r"] = np.full(nslots * stride, -1, np.int64), np.full(nslots * stride, -1, np.int64)
            a["pending"] = np.zeros(nslots * stride, np.int32)
            S.race_w, S.race_r, S.pending = arr(a["race_w"]), arr(a["race_r"]), arr(a["pending"])
            S.stamp = arr(np.zeros(nslots * stride, np.int64))
        from refsim.ptx import hopper

        if hopper.tracks_shared_bytes(kernel):                # refsim.ptx.hopper's per-byte state
            self.arrays["hbytes"] = np.zeros(nslots * stride, np.uint8)
            S.hbytes = arr(self.arrays["hbytes"])
            S.max_mbar = hopper.mbarrier.MAX_RACE_BARRIERS
            if race:
                a = self.arrays
                a["gen_w"] = np.full(nslots * stride, -1, np.int64)
                a["async_bid"], a["async_phase"] = np.full(nslots * stride, -1, np.int32), np.zeros(nslots * stride, np.int32)
                a["async_obs"] = np.full(nslots * S.max_mbar * tpb, -1, np.int32)
                S.gen_w, S.async_bid, S.async_phase = arr(a["gen_w"]), arr(a["async_bid"]), arr(a["async_phase"])
                S.async_obs = arr(a["async_obs"])
        S.race, S.poison, S.random = int(race), int(poison), int(schedule == "random")
        order = np.array(atomic_order or [0], np.int32)
        S.aorder, S.naorder = arr(order), len(atomic_order or ())
        # the runtime counts in int64: a launch reaching 2**63 - 1 warp-instructions runs >= 2**52 steps
        # (a step issues at most RESIDENT_THREADS / 32 = 2,048 warps), months at a nanosecond a step,
        # so a larger limit is the same as this one (the message names the limit as given)
        S.max_wi, S.deadlock_rounds = min(self.max_wi, 2**63 - 1), engine.DEADLOCK_ROUNDS
        from refsim.arith import tensor_core

        if base_arch(arch) in tensor_core.MODELS:               # sm_90a: sm_90's model
            m = tensor_core.model(arch)
            S.tc_L, S.tc_F, S.tc_ez32 = m.block, m.frac_bits, m.e_zero_f32
        pcg = np.random.default_rng(seed).bit_generator.state
        s_, inc = pcg["state"]["state"], pcg["state"]["inc"]
        S.pcg_hi, S.pcg_lo, S.pcg_inc_hi, S.pcg_inc_lo = s_ >> 64, s_ & (2**64 - 1), inc >> 64, inc & (2**64 - 1)
        S.pcg_has32, S.pcg_u32 = pcg["has_uint32"], pcg["uinteger"]
        self.op_count = np.zeros(self.END, np.int64)
        self.op_first = np.zeros(self.END, np.int64)
        S.op_count, S.op_first = arr(self.op_count), arr(self.op_first)
        S.last_progress = -1
        nspin = translation.nspin
        S.nspin = nspin
        spin_v = [np.zeros(T, np.uint64) for _ in range(nspin)]
        spin_s = [np.zeros(T, np.uint8) for _ in range(nspin)]
        pv = (ctypes.c_void_p * max(1, nspin))(*[_ptr(a) for a in spin_v])
        ps = (ctypes.c_void_p * max(1, nspin))(*[_ptr(a) for a in spin_s])
        keep += [spin_v, spin_s, pv, ps]
        S.spin_val, S.spin_seen = ctypes.cast(pv, ctypes.c_void_p), ctypes.cast(ps, ctypes.c_void_p)
        kind = loops.kinds(kernel, handlers)                                   # refsim.ptx.loops
        W = loops.registers(kernel, kind)
        S.loop_kind = arr(np.append(kind, np.uint8(0)))
        S.loop_roff = arr(np.cumsum([0] + [len(x) for x in W], dtype=np.int64).astype(np.int32))
        S.loop_regs = arr(np.array([r for x in W for r in x] or [0], np.int32))
        S.loop_cap = 32 * (max([len(x) for x in W], default=0) + 1)
        S.loop_head, S.loop_miss = arr(np.full(NW, -1, np.int32)), arr(np.zeros(NW, np.int32))
        self.loop_hit = np.zeros(NW, np.uint8)
        S.loop_dirty, S.loop_hit = arr(np.zeros(NW, np.uint8)), arr(self.loop_hit)
        S.loop_count = arr(np.zeros(NW, np.int64))
        refs = (ctypes.c_void_p * NW)()                                       # NULL: allocated by the runtime
        keep.append(refs)
        S.loop_ref = ctypes.cast(refs, ctypes.c_void_p)
        self.fifo = np.zeros(nslots * lib.refsim_rt_sizeof_fifo(), np.uint8)      # one rt_fifo per slot
        S.fifo = arr(self.fifo)
        self._scratch_key = (T, NW)
        self._scratch = sc = _scratch_take(T, NW)
        self.th_buf = sc["th_buf"]
        for name, a in sc.items():
            setattr(S, name, _ptr(a))
        self.stats = engine.LaunchStats()
        if race and hopper.wgmma.operand_slots(kernel):       # the C twins of wgmma's race checks
            wg = hopper.wgmma.state(self.view())
            S.wg_pending, S.wg_smem = arr(wg.pending), arr(wg.smem)
        lib.refsim_rt_start(ctypes.byref(S))

    # ------------------------------------------------------------------ the loop
    def run(self) -> engine.LaunchStats:
        """Execute until every block has exited; returns the statistics (the interpreter's)."""
        lib, S = self.lib, self.S
        try:
            while True:
                code = lib.refsim_rt_run(ctypes.byref(S))
                if code == RT_DONE:
                    break
                if code == RT_CALLBACK:
                    self._callback(int(S.cb_p), self.th_buf[:S.cb_n].astype(np.int64))
                    continue
                raise self._error(code)
        finally:
            lib.refsim_rt_free(ctypes.byref(S))
            _SCRATCH.setdefault(self._scratch_key, []).append(self._scratch)
        return self._stats()

    def _stats(self) -> engine.LaunchStats:
        S, s = self.S, self.stats
        s.warp_instructions, s.thread_instructions = S.warp_instructions, S.thread_instructions
        s.shared_wavefronts, s.shared_requests = S.shared_wavefronts, S.shared_requests
        s.global_bytes_read, s.global_bytes_written = S.global_bytes_read, S.global_bytes_written
        s.barriers, s.blocks = S.barriers, S.blocks
        s.float_atomic_contention = S.float_atomic_contention
        first: dict[str, int] = {}
        count: dict[str, int] = {}
        for p in np.flatnonzero(self.op_count):
            name = self.k.instructions[p].name
            first[name] = min(first.get(name, 1 << 62), int(self.op_first[p]))
            count[name] = count.get(name, 0) + int(self.op_count[p])
        s.opcodes = {name: count[name] for name in sorted(first, key=first.get)}
        return s

    # ------------------------------------------------------------------ ALU steps run in Python
    def _callback(self, p: int, th: np.ndarray) -> None:
        """The interpreter's guard and handler glue (refsim.ptx.dispatch) for instruction p on the
        step's threads: an ALU handler on the active threads, or a warp-wide one on their warps."""
        ins, h = self.k.instructions[p], self.handlers.get(p)
        if h is None:                   # an engine-level Python definition (refsim.ptx.dispatch)
            S = self.S
            released = S.barriers
            self._engine_step(p, ins)(slice(None) if len(th) == self.T else th)   # the interpreter's all-threads step
            if S.barriers != released:  # a barrier released threads of warps outside the step: their minimum PCs
                self.slot_dirty[:] = 1
                S.any_dirty = 1
            return
        act = th
        if ins.guard is not None:
            slot, neg = ins.guard[1], ins.guard[2]
            if self.poison and not self.reg_init[slot][th].all():
                raise error("uninit_guard", self._where(ins))
            g = self.regs[slot][th]
            act = th[~g if neg else g]
        if act.size:
            (self._warp_step if h.kind == "warp" else self._alu_step)(ins, h, act)
        self.pc[th] += 1

    def view(self):
        """The :class:`refsim.ptx.compiled.view.LaunchView` of this launch (made at first use)."""
        if self._view is None:
            from refsim.ptx.compiled.view import LaunchView

            self._view = LaunchView(self)
        return self._view

    def _engine_step(self, p: int, ins):
        """The step function of instruction p as the interpreter builds it (refsim.ptx.dispatch.build:
        the one definition, its guard and pc update), built over this launch's view."""
        step = self._steps.get(p)
        if step is None:
            from refsim.ptx import dispatch

            step = self._steps[p] = dispatch.build(self.view(), p, ins)
        return step

    def _alu_step(self, ins, h, act: np.ndarray) -> None:
        dsts, srcs = split_operands(ins, h)
        outs = h.fn(*[self._read(o, t, act, ins) for o, t in zip(srcs, h.src_types)])
        for o, t, v in zip(dsts, h.dst_types, outs):
            self._write(o, t, act, v)

    def _warp_step(self, ins, h, act: np.ndarray) -> None:
        warps = np.unique(act >> 5)
        lanes = warps[:, None] * 32 + np.arange(32)                          # (W, 32)
        mask = np.zeros(self.T, bool)
        mask[act] = True
        active = mask[lanes]
        if ins.opcode == "mma":
            if not active.all():
                raise error("partial_mma", self._where(ins))
            groups = [flatten([o]) for o in ins.operands]
            ops = [np.stack([np.broadcast_to(self._read(o, "b32", lanes, ins), lanes.shape) for o in g], axis=-1)
                   for g in groups[1:]]
            d, = h.fn(*ops)
            for j, o in enumerate(groups[0]):
                self._write(o, "b32", lanes[active], d[..., j][active])
            return
        operands = ins.operands
        if "sync" in ins.mods:                    # the membermask, intersected with the active lanes
            member = np.broadcast_to(self._read(operands[-1], "b32", lanes, ins), lanes.shape)
            active = active & ((member & (np.uint32(1) << np.arange(32, dtype=np.uint32))) != 0)
            operands = operands[:-1]
        flat = flatten(operands)
        ndst = len(flat) - len(h.src_types)
        dsts, srcs = flat[:ndst], flat[ndst:]
        outs = h.fn(*[np.broadcast_to(self._read(o, t, lanes, ins), lanes.shape) for o, t in zip(srcs, h.src_types)],
                    active)
        for o, t, v in zip(dsts, h.dst_types, outs):
            self._write(o, t, lanes[active], np.broadcast_to(v, lanes.shape)[active])

    def _read(self, op, ptx_type: str, sel: np.ndarray, ins):
        want = 1 if ptx_type == "pred" else TYPE_BITS[ptx_type]
        kind = op[0]
        if kind == "reg":
            slot, neg = op[1], op[2]
            if self.poison and not self.reg_init[slot][sel].all():
                bad = int(sel[~self.reg_init[slot][sel]][0])
                raise error("uninit_reg", self._where(ins), reg=self.k.registers[slot].name, who=self._who(bad))
            if self.race:               # a register of an incomplete wgmma (refsim.ptx.hopper.wgmma)
                from refsim.ptx.hopper import wgmma

                pending = wgmma.pending_check(self.view(), ins, slot)
                if pending is not None:
                    pending(sel)
            v = self.regs[slot][sel]
            if want == 1:
                return ~v if neg else v
            return convert(v, want, ptx_type.startswith("s"))
        if kind == "imm":
            bits = immediate_bits(op, ptx_type)
            return np.asarray(bool(bits)) if want == 1 else np.asarray(bits, _UINT[want])
        if kind == "special":
            return convert(self._special(op[1], sel), want, False)
        if kind == "sym":
            return convert(np.asarray(np.uint64(self._symbol(op[1]))), want, False)
        raise PtxUnsupportedError(f"{self._where(ins)}: operand {op} is not read by the compiled path's handler steps")

    def _symbol(self, name: str) -> int:
        """The address a symbol operand reads as (``Launch``'s symbol rule: an offset in its space,
        the launch address for module variables)."""
        k = self.k
        if name in k.shared:
            return k.shared[name].offset
        if name in k.extern_shared:
            return (k.shared_bytes + 15) // 16 * 16
        if name in k.local:
            return k.local[name].offset
        params = {p.name: p.offset for p in k.params}
        return params[name] if name in params else int(self.symbols[name])

    def _special(self, name: str, sel: np.ndarray) -> np.ndarray:
        lane = (sel % 32).astype(np.uint32)
        slot = sel // self.tpb
        fixed = {"%ntid.x": self.block[0], "%ntid.y": self.block[1], "%ntid.z": self.block[2],
                 "%nctaid.x": self.grid[0], "%nctaid.y": self.grid[1], "%nctaid.z": self.grid[2],
                 "%nwarpid": self.tpb // 32, "%nsmid": self.nslots, "%warpsz": 32,
                 "%dynamic_smem_size": int(self.S.dyn_bytes), "%total_smem_size": self.shared_size}
        if name in fixed:
            return np.asarray(np.uint32(fixed[name]))
        if name in ("%clock", "%clock64", "%globaltimer"):
            dt = np.uint32 if name == "%clock" else np.uint64
            return np.asarray(dt(int(self.S.warp_instructions) & (2**32 - 1 if dt is np.uint32 else 2**64 - 1)))
        if name.startswith("%tid."):
            return self.tid["xyz".index(name[-1])][sel]
        if name.startswith("%ctaid."):
            return self.ctaid[slot * 3 + "xyz".index(name[-1])]
        from refsim.ptx.hopper import cluster

        if name in cluster.SPECIALS:                    # refsim.ptx.hopper.cluster's one definition
            ctaid = tuple(self.ctaid[slot * 3 + i] for i in range(3))
            return cluster.special(name, self.grid, self.cluster, self.explicit_cluster, ctaid)
        le = ((np.uint64(2) << lane.astype(np.uint64)) - np.uint64(1)).astype(np.uint32)
        lt = ((np.uint64(1) << lane.astype(np.uint64)) - np.uint64(1)).astype(np.uint32)
        values = {"%laneid": lane, "%warpid": ((sel % self.tpb) // 32).astype(np.uint32),
                  "%smid": slot.astype(np.uint32), "%gridid": np.asarray(np.uint64(0)),
                  "%lanemask_eq": (np.uint32(1) << lane).astype(np.uint32), "%lanemask_lt": lt, "%lanemask_le": le,
                  "%lanemask_gt": ~le, "%lanemask_ge": ~lt}
        return values[name]

    def _write(self, op, ptx_type: str, sel: np.ndarray, v) -> None:
        if op[0] == "sink":
            return
        slot = op[1]
        rbits = self.k.registers[slot].bits
        want = 1 if ptx_type == "pred" else TYPE_BITS[ptx_type]
        reg = self.regs[slot]
        reg[sel] = convert(v, rbits, ptx_type.startswith("s")) if rbits != want else v
        if self.poison:
            self.reg_init[slot][sel] = True

    # ------------------------------------------------------------------ messages (the interpreter's)
    def _where(self, ins) -> str:
        return f"kernel {self.k.name}, PTX line {ins.line} `{ins.text}`"

    def _who(self, t: int) -> str:
        b = int(self.slot_block[t // self.tpb])
        gx, gy = self.grid[0], self.grid[1]
        l = t % self.tpb
        bx, by = self.block[0], self.block[1]
        return (f"block ({b % gx}, {b // gx % gy}, {b // (gx * gy)}) thread "
                f"({l % bx}, {l // bx % by}, {l // (bx * by)})")

    def _error(self, code: int) -> Exception:
        S = self.S
        if code in (E_DEADLOCK_BARRIER, E_DEADLOCK_SPIN):
            return self._deadlock(message("deadlock_barrier" if code == E_DEADLOCK_BARRIER else "deadlock_spin"))
        if code == E_DEADLOCK_LOOP:
            return loops.error(self.k, int(S.err_ins), np.flatnonzero(self.loop_hit).tolist(), self.tpb,
                               self.slot_block, self.grid)
        ins = self.k.instructions[int(S.err_ins)]
        where, t, a, aux = self._where(ins), int(S.err_thread), int(S.err_addr), int(S.err_aux)
        if code == E_LIMIT:
            return error("limit", kernel=self.k.name, limit=self.max_wi, line=ins.line, text=ins.text)
        faults = {E_MISALIGNED: lambda: message("misaligned", nbytes=aux, space=_SPACE_NAMES[int(S.err_thread2)]),
                  E_OOB_GLOBAL: lambda: message("oob_global", nbytes=aux),
                  E_OOB_SHARED: lambda: message("oob_shared", nbytes=aux, shared=self.shared_size),
                  E_OOB_LOCAL: lambda: message("oob_local", nbytes=aux),
                  E_OOB_PARAM: lambda: message("oob_param", nbytes=aux)}
        if code in faults:
            cls = PtxMisalignedError if code == E_MISALIGNED else PtxMemoryError
            return cls(f"{where}: {message('fault', what=faults[code](), addr=a, who=self._who(t))}")
        # the C status codes whose message is a MESSAGES entry, with the fields it takes
        messages = {
            E_TRAP: ("trap", lambda: {"who": self._who(t)}),
            E_RACE_READ: ("race_read", lambda: {"who": self._who(t), "other": self._who(int(S.err_thread2))}),
            E_RACE_WRITE: ("race_write", lambda: {"who": self._who(t)}),
            E_RACE_SAME_BYTE: ("race_same_byte", lambda: {"offset": aux}),
            E_RACE_PENDING: ("race_pending", lambda: {"who": self._who(t)}),
            E_UNINIT_REG: ("uninit_reg", lambda: {"reg": self.k.registers[aux].name, "who": self._who(t)}),
            E_UNINIT_GUARD: ("uninit_guard", dict),
            E_UNINIT_SHARED: ("uninit_shared", lambda: {"who": self._who(t)}),
            E_UNINIT_SHARED_NOWHO: ("uninit_shared_nowho", dict),
            E_PARTIAL_MMA: ("partial_mma", dict),
            E_PARTIAL_LDMATRIX: ("partial_ldmatrix", dict),
            E_BARRIER_ID: ("barrier_id", lambda: {"got": aux}),
            E_SRC_SIZE: ("src_size", lambda: {"size": aux}),
        }
        if code == E_RACE_WGMMA_SMEM:
            from refsim.ptx.hopper import wgmma

            return PtxRaceError(wgmma.smem_message(where, aux, self._who(t)))
        if code == E_RACE_WGMMA:
            from refsim.ptx.hopper import wgmma

            return PtxRaceError(wgmma.pending_message(where, self.k.registers[aux].name, self._who(t)))
        if code in (E_MBAR_ACCESS, E_RACE_ASYNC):
            from refsim.ptx import checks

            cls, text_of = ((PtxBarrierError, checks.mbarrier_access_message) if code == E_MBAR_ACCESS
                            else (PtxRaceError, checks.async_race_message))
            return cls(text_of(where, a, self._who(t)))
        if code == E_READONLY:
            return read_only_error(where, self.buffer_names[aux])
        if code == E_NOMEM:
            return MemoryError("refsim.ptx.compiled: out of memory for pending cp.async copies")
        name, fields = messages[code]
        return error(name, where, **fields())

    def _deadlock(self, why: str) -> PtxDeadlockError:
        if self._view is not None:
            from refsim.ptx.scheduler import explain

            why = explain(self._view, why)
        lines = []
        gx, gy = self.grid[0], self.grid[1]
        for s in range(self.nslots):
            if self.slot_block[s] < 0:
                continue
            lo, hi = s * self.tpb, (s + 1) * self.tpb
            live = self.exited[lo:hi] == 0
            if not live.any():
                continue
            at = np.where(self.bar_wait[lo:hi] != 0, self.bar_pc[lo:hi], self.pc[lo:hi])[live]
            pcs = sorted(set(int(x) for x in at))[:3]
            where = ", ".join(f"line {self.k.instructions[q].line} `{self.k.instructions[q].text}`"
                              for q in pcs if q < self.END)
            b = int(self.slot_block[s])
            lines.append(f"block ({b % gx}, {b // gx % gy}, {b // (gx * gy)}) at {where}")
        return error("deadlock", kernel=self.k.name, why=why, waiting=waiting(lines))
