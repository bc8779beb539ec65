"""The interpreter's ``Launch`` interface over a compiled launch's state, for instruction definitions
written once in Python (the engine-level definitions of refsim.ptx.hopper) that the compiled executor
calls back into.

Spec
----
why             refsim.ptx keeps one definition per instruction: a definition is a build function
                ``build(L, ins, idx) -> run(sel)`` written against :class:`refsim.ptx.engine.Launch`
                (refsim.ptx.dispatch builds it, guard and pc included). The compiled executor runs such
                an instruction by handing the step to Python (``RT_CALLBACK``) and calling the same
                step function built over a :class:`LaunchView` of its own state, so the definition
                cannot tell which executor runs it.
what it offers  the names of ``Launch`` a definition may use, with the same meaning, dtypes and sharing
                (writes land in the C runtime's arrays, which are NumPy arrays owned by the launch):
                ``k``, ``handlers``, ``grid``, ``block``, ``cluster``, ``T``, ``NW``, ``tpb``, ``nslots``, ``END``,
                ``pc``, ``exited``/``bar_wait``/``bar_pred``/``yielding`` (bool views of the runtime's uint8),
                the barrier state ``bar_id``, ``bar_pc``, ``bar_count``, ``bar_need`` (per slot, 16 ids),
                ``bar_red_out``, ``warp_slot``, the cp.async ``group`` per thread,
                ``regs``, ``reg_init``, ``poison``, ``race``, ``race_w``, ``race_r``, ``pending``, ``hbytes``, ``gen_w``, ``async_bid``,
                ``async_phase``, ``async_obs``, ``max_mbar``,
                ``shared``, ``shared_init``, ``shared_size``, ``shared_stride``, ``dyn_offset``,
                ``local``, ``local_stride``, ``param``, ``gmem``, ``sym``, ``atomic_order``, ``last_seen`` (spin checks), ``special`` (read per
                step), ``slot_of``, ``local_index``, ``slot_block``, ``stats`` (the runtime's
                counters), ``progress`` (the runtime's), ``ext`` (per-launch state of extensions,
                e.g. mbarriers), and the methods ``where``, ``who``, ``block_name``, ``count``,
                ``threads``, ``warps``, ``exit_threads`` (the interpreter's own functions), and
                ``land_async`` / ``start_block`` (the runtime's: its FIFO of pending cp.async copies
                and its block placement, through refsim_rt_land_async / refsim_rt_start_block).
what it lacks   the step loop (the runtime owns it); a definition that needs
                more of ``Launch`` adds the name here, with a test through both executors.
"""

from __future__ import annotations

import ctypes

import numpy as np

from refsim.ptx import engine

__all__ = ["LaunchView"]

_STAT_FIELDS = ("warp_instructions", "thread_instructions", "shared_wavefronts", "shared_requests",
                "global_bytes_read", "global_bytes_written", "barriers", "blocks", "float_atomic_contention")


class _Stats:
    """``LaunchStats``' counters read and written in the runtime's state."""

    def __init__(self, S):
        object.__setattr__(self, "_S", S)

    def __getattr__(self, name):
        if name in _STAT_FIELDS:
            return int(getattr(self._S, name))
        raise AttributeError(name)

    def __setattr__(self, name, value):
        if name not in _STAT_FIELDS:
            raise AttributeError(name)
        setattr(self._S, name, int(value))


class _PerThread:
    """A per-thread special register read when the step runs (``%ctaid`` changes as blocks refill)."""

    ndim = 1

    def __init__(self, fn):
        self._fn = fn

    def __getitem__(self, sel):
        return self._fn()[sel]


class _Specials:
    """``Launch.special``: every special register the compiled runner reads, per thread, per step."""

    def __init__(self, C):
        self._C = C
        self._all = np.arange(C.T)

    def __contains__(self, name) -> bool:
        try:
            self._C._special(name, self._all[:1])
        except KeyError:
            return False
        return True

    def __getitem__(self, name):
        C, everyone = self._C, self._all
        return _PerThread(lambda: np.broadcast_to(C._special(name, everyone), (C.T,)))


class LaunchView:
    """The ``Launch`` interface over the compiled launch ``C`` (a refsim.ptx.compiled.runner
    ``CompiledLaunch``); see the module spec for the names it offers."""

    where = engine.Launch.where
    who = engine.Launch.who
    block_name = engine.Launch.block_name
    count = engine.Launch.count
    threads = engine.Launch.threads
    warps = engine.Launch.warps
    exit_threads = engine.Launch.exit_threads

    def __init__(self, C):
        S = self._S = C.S
        self.k, self.handlers, self.grid, self.block, self.cluster = C.k, C.handlers, C.grid, C.block, C.cluster
        self.T, self.tpb, self.nslots, self.END = C.T, C.tpb, C.nslots, C.END
        self.NW = C.T // 32
        self.pc, self.regs, self.reg_init = C.pc, C.regs, C.reg_init
        self.exited, self.bar_wait = C.exited.view(np.bool_), C.bar_wait.view(np.bool_)
        a = C.arrays
        self.bar_pred, self.bar_id, self.bar_pc = a["bar_pred"].view(np.bool_), a["bar_id"], C.bar_pc
        self.bar_count, self.bar_need, self.group = a["bar_count"], a["bar_need"], a["group"]
        self.bar_red_out: dict = {}
        self.yielding = C.arrays["yielding"].view(np.bool_)
        self.poison, self.race = C.poison, C.race
        self.shared, self.local, self.param = C.arrays["shared"], C.arrays["local"], C.param
        self.shared_init = C.arrays.get("shared_init")
        self.race_w, self.race_r, self.pending = (C.arrays.get(n) for n in ("race_w", "race_r", "pending"))
        self.hbytes, self.gen_w = C.arrays.get("hbytes"), C.arrays.get("gen_w")
        self.async_bid, self.async_phase, self.async_obs = (C.arrays.get(n) for n in ("async_bid", "async_phase", "async_obs"))
        self.max_mbar = int(S.max_mbar)
        self.shared_size, self.shared_stride = C.shared_size, int(S.shared_stride)
        self.dyn_offset, self.local_stride = int(S.dyn_offset), int(S.local_stride)
        self.gmem, self.sym = C.gmem, C.symbols
        self.slot_block = C.slot_block
        self.local_index = np.tile(np.arange(C.tpb, dtype=np.int64), C.nslots)
        self.slot_of = np.repeat(np.arange(C.nslots, dtype=np.int64), C.tpb)
        self.warp_slot = np.repeat(np.arange(C.nslots), C.tpb // 32)
        self.stats = _Stats(S)
        self.ext: dict = {}
        self.atomic_order = C.atomic_order
        self.last_seen: dict = {}
        self.special = _Specials(C)
        self._C = C

    @property
    def progress(self) -> int:
        return int(self._S.progress)

    @progress.setter
    def progress(self, value: int) -> None:
        self._S.progress = int(value)

    def land_async(self, th, n_allowed) -> None:
        """``Launch.land_async`` on the runtime's FIFO of pending cp.async copies (its refsim_rt_land_async)."""
        th = np.ascontiguousarray(th, np.int32)
        self._C.lib.refsim_rt_land_async(ctypes.byref(self._S), th.ctypes.data, len(th),
                                         -1 if n_allowed is None else int(n_allowed))

    def start_block(self, s: int) -> None:
        """``Launch.start_block`` by the runtime (its refsim_rt_start_block; it marks the slot's warps)."""
        self._C.lib.refsim_rt_start_block(ctypes.byref(self._S), int(s))
