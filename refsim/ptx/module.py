"""``refsim.ptx.Module``: parse PTX once, launch its kernels on NumPy arrays.

Launch arguments, one per ``.param`` of the kernel, in order::

    np.ndarray (C-contiguous, numbers in native byte order, not 0-d)  ->  pointer parameter (64-bit): the
        array's bytes are global memory for the launch and are written back IN PLACE (device-buffer
        semantics); a C-contiguous view (``C.reshape(-1)[offset:]``) writes through to its base;
        contents persist between launches (lock workspaces)
    Python/NumPy int or float                    ->  value parameter, converted exactly to the
        parameter's PTX type (out of range or inexact -> PtxLaunchError)
    bytes of the parameter's size                ->  a ``.b8 name[N]`` parameter (structs by value)

    param space (little-endian, offsets from the .entry header):
      | param_0 (u64 ptr) | param_1 (u64 ptr) | param_2 f32 | param_3 u32 |
      0                   8                   16            20            24
"""

from __future__ import annotations

import numpy as np

from refsim.ptx import dispatch, hopper
from refsim.ptx.arch import arch_facts, check_launch_shape, handler_arch, sm_number
from refsim.ptx.engine import DEFAULT_MAX_WARP_INSTRUCTIONS, RESIDENT_THREADS, Launch, LaunchStats
from refsim.ptx.errors import PtxLaunchError, PtxLimitError, PtxUnsupportedError
from refsim.ptx.memory import GlobalMemory, buffer_addresses, check_buffers, check_device_array
from refsim.ptx.parse import TYPE_BITS, collector_paused, parse

__all__ = ["Module"]

_SCHEDULES = ("lockstep", "random")


class Module:
    """A parsed PTX module.

    ``Module(ptx_text)`` parses every ``.entry`` and checks every static instruction against the
    dispatch table once. Malformed PTX raises :class:`refsim.ptx.PtxParseError` naming line and
    column. A kernel holding an instruction refsim does not execute is refused alone: the module
    loads, :attr:`unsupported` says which kernels cannot run and why, and launching one raises
    :class:`refsim.ptx.PtxUnsupportedError` naming the kernel and the line. ``kernels`` is the tuple
    of ``.entry`` names (mangled, as in the PTX), runnable or not.
    """

    def __init__(self, ptx_text: str):
        with collector_paused():             # linear in the text (refsim.ptx.parse.collector_paused)
            self._load(ptx_text)

    def _load(self, ptx_text: str) -> None:
        self._parsed = parse(ptx_text)
        self.target = self._parsed.target.split(",")[0].strip()
        self._target_sm = sm_number(self.target)
        self._handlers: dict[tuple[str, str], dict[int, object]] = {}
        self._refused: dict[str, str] = {}
        load_arch = handler_arch(self.target)
        for name, k in self._parsed.kernels.items():
            if k.refused is not None:
                self._refused[name] = k.refused
                continue
            try:
                self._lookup(name, load_arch)
                # build once with a one-thread dummy launch (at the .target's own model: an sm_89
                # module may hold instructions no sm_80 model has): engine-owned forms are checked here
                self._launch_state(name, (1, 1, 1), (1, 1, 1), self._dummy_args(name), arch=load_arch,
                                   shared_bytes=0, schedule="lockstep", seed=0, max_warp_instructions=None,
                                   race=False, poison=False, check=True)
            except PtxUnsupportedError as e:
                self._refused[name] = str(e)

    @property
    def kernels(self) -> tuple[str, ...]:
        """Names of the ``.entry`` kernels, mangled, in PTX order."""
        return tuple(self._parsed.kernels)

    @property
    def unsupported(self) -> dict[str, str]:
        """The kernels refsim cannot run, each with the first refusal (kernel, PTX line, column,
        instruction and why); empty when every kernel runs. A copy: changing it changes nothing."""
        return dict(self._refused)

    def params(self, kernel: str) -> tuple:
        """The kernel's parameters: tuples of (name, PTX type, size in bytes)."""
        return tuple((p.name, p.type, p.size) for p in self._kernel(kernel).params)

    def instruction_mix(self, kernel: str) -> dict[str, int]:
        """Static instruction count per instruction name (``"ld.global.v4.u32"``) of a kernel."""
        mix: dict[str, int] = {}
        for ins in self._kernel(kernel).instructions:
            mix[ins.name] = mix.get(ins.name, 0) + 1
        return mix

    def contractible(self, kernel: str) -> tuple[tuple[int, int], ...]:
        """(mul line, add line) pairs ptxas may fuse into one FMA: a float ``mul`` without a rounding
        modifier whose result an ``add``/``sub`` without one reads. refsim rounds both (as the PTX
        says); the GPU may round once. Use ``__fmul_rn``/``__fadd_rn`` to rule it out (docs/ptx.md)."""
        floats = {"f16", "f16x2", "bf16", "bf16x2", "f32", "f64"}
        rounding = {"rn", "rz", "rm", "rp"}
        producers: dict[int, int] = {}
        pairs = []
        for ins in self._kernel(kernel).instructions:
            plain = bool(ins.types) and ins.types[0] in floats and not rounding & set(ins.mods)
            if plain and ins.opcode in ("add", "sub"):
                for op in ins.operands[1:]:
                    if op[0] == "reg" and op[1] in producers:
                        pairs.append((producers[op[1]], ins.line))
            if ins.operands and ins.operands[0][0] == "reg":
                producers.pop(ins.operands[0][1], None)
                if plain and ins.opcode == "mul":
                    producers[ins.operands[0][1]] = ins.line
        return tuple(pairs)

    def _kernel(self, name: str):
        k = self._parsed.kernels.get(name) if isinstance(name, str) else None
        if k is None:
            raise PtxLaunchError(f"kernel: must be one of {list(self._parsed.kernels)}; got {name!r}")
        return k

    def _lookup(self, name: str, arch: str) -> dict:
        """The semantics handlers of kernel ``name`` on ``arch`` (checked against the dispatch table once)."""
        key = (name, arch)
        if key not in self._handlers:
            self._handlers[key] = dispatch.load(self._parsed.kernels[name], arch)
        return self._handlers[key]

    def _dummy_args(self, name: str) -> list:
        out = []
        for p in self._kernel(name).params:
            if p.type == "b8" or p.size > 8:
                out.append(bytes(p.size))
            elif p.type.startswith("f"):
                out.append(0.0)
            else:
                out.append(0)
        return out

    def launch(self, kernel: str, grid, block, args, *, arch: str = "sm_80", shared_bytes: int = 0,
               schedule: str = "lockstep", seed: int = 0, max_warp_instructions: int | None = None,
               race: bool = False, poison: bool = False, atomic_order=None,
               executor: str | None = None, buffers=(), cluster=None) -> LaunchStats:
        """Run ``kernel`` over ``grid`` x ``block`` threads; pointer arguments are updated in place.

        grid, block: int or tuple of up to 3 ints. args: one per ``.param`` (see the module doc).
        arch: the GPU whose tensor-core and fp model execute the instructions; must be at least
        the PTX ``.target``. shared_bytes: dynamic shared memory (the ``.extern .shared`` array).
        schedule: "lockstep" (lowest PC first, deterministic) or "random" (warps interleaved by
        ``seed``). max_warp_instructions: bound on issued warp-instructions (default 10**9).
        race: report shared-memory conflicts between barriers and reads of pending cp.async
        destinations (PtxRaceError). poison: report reads of unwritten registers or shared bytes
        (PtxUninitializedError). atomic_order: None (float atomic adds that reach one address in one
        step land in thread order) or a permutation of 0..n-1: they land in that order of their
        thread-order ranks (refsim.testing.admissible runs every order). executor: None (the
        compiled path of :mod:`refsim.ptx.compiled` when a C compiler is available, else this
        interpreter; same bits), "compiled" (that path or PtxUnsupportedError) or "interpreter".
        buffers: extra global memory that is no parameter, ``(name, array)`` pairs (arrays as pointer
        arguments, written in place), mapped at :func:`refsim.ptx.buffer_addresses` ``(buffers)``: from
        refsim.ptx.memory.BUFFER_BASE in the order given, whatever the arguments (kernels that reach them
        through addresses the host computed, e.g. in TMA tensor maps). cluster: None (the PTX's
        ``.reqnctapercluster``, else 1x1x1 clusters) or the thread-block cluster shape, an int or up to 3
        ints (sm_90+; rules: refsim.ptx.hopper.cluster.check_launch).
        Returns :class:`refsim.ptx.LaunchStats`.
        """
        from refsim.ptx import compiled

        if not (executor is None or isinstance(executor, str)) or executor not in compiled.EXECUTORS:
            raise PtxLaunchError(f"executor: must be one of {list(compiled.EXECUTORS)}; got {executor!r}")
        atomic_order = _check_order(atomic_order)
        if not isinstance(kernel, str):
            raise PtxLaunchError(f"kernel: must be a str, one of {list(self._parsed.kernels)}; got {kernel!r:.60}")
        if not isinstance(seed, (int, np.integer)) or isinstance(seed, (bool, np.bool_)) or seed < 0:
            raise PtxLaunchError(f"seed: must be a non-negative int; got {seed!r:.60}")
        for flag, value in (("race", race), ("poison", poison)):
            if not isinstance(value, (bool, np.bool_)):
                raise PtxLaunchError(f"{flag}: must be True or False; got {value!r:.60}")
        if not isinstance(schedule, str) or schedule not in _SCHEDULES:
            raise PtxLaunchError(f"schedule: must be one of {_SCHEDULES}; got {schedule!r}")
        arch_facts(arch)
        if sm_number(arch) < self._target_sm:
            raise PtxLaunchError(f"arch: PTX built for .target {self.target} cannot run on {arch}")
        if max_warp_instructions is not None and (not isinstance(max_warp_instructions, (int, np.integer))
                                                  or isinstance(max_warp_instructions, (bool, np.bool_))
                                                  or max_warp_instructions < 1):
            raise PtxLaunchError(f"max_warp_instructions: must be a positive int or None; got {max_warp_instructions!r}")
        known = self._parsed.kernels.get(kernel) if isinstance(kernel, str) else None
        shape = check_launch_shape(arch, grid, block, dynamic_shared_bytes=shared_bytes,
                                   static_shared_bytes=known.shared_bytes if known else 0)
        grid, block = shape.grid, shape.block
        self._kernel(kernel)
        budget = DEFAULT_MAX_WARP_INSTRUCTIONS if max_warp_instructions is None else int(max_warp_instructions)
        least = shape.blocks * -(-shape.threads_per_block // 32)         # every warp issues at least one
        if least > budget:
            raise PtxLimitError(f"grid x block: {shape.blocks:,} blocks of {-(-shape.threads_per_block // 32)} warps "
                                f"issue at least {least:,} warp-instructions, more than max_warp_instructions="
                                f"{budget:,}; got grid {grid}, block {block}")
        if kernel in self._refused:
            raise PtxUnsupportedError(f"kernel {kernel} cannot run in refsim.ptx: {self._refused[kernel]}")
        if isinstance(args, (np.ndarray, str, bytes)) or not hasattr(args, "__len__"):
            raise PtxLaunchError(f"args: must be a sequence with one argument per .param; got {type(args).__name__}")
        buffers = check_buffers(buffers)
        shape_c, explicit = hopper.cluster.check_launch(self._parsed.kernels[kernel], sm_number(arch), grid, cluster,
                                                        -(-shape.threads_per_block // 32) * 32, RESIDENT_THREADS)
        clusters = dict(cluster=shape_c, explicit_cluster=explicit)
        if executor != "interpreter":
            stats = compiled.launch(self, kernel, grid, block, list(args), arch=arch, shared_bytes=int(shared_bytes),
                                    schedule=schedule, seed=seed, max_warp_instructions=max_warp_instructions,
                                    race=race, poison=poison, atomic_order=atomic_order,
                                    required=executor == "compiled", buffers=buffers, **clusters)
            if stats is not None:
                return stats
        state = self._launch_state(kernel, grid, block, list(args), arch=arch, shared_bytes=int(shared_bytes),
                                   schedule=schedule, seed=seed, max_warp_instructions=max_warp_instructions,
                                   race=race, poison=poison, atomic_order=atomic_order, buffers=buffers, **clusters)
        return state.run()

    def _launch_state(self, kernel, grid, block, args, *, arch, shared_bytes, schedule, seed,
                      max_warp_instructions, race, poison, atomic_order=None, check=False, buffers=(),
                      cluster=(1, 1, 1), explicit_cluster=False) -> Launch:
        k, gmem, symbols, param, handlers = self._launch_inputs(kernel, args, arch, buffers)
        return Launch(k, handlers, self._parsed.globals, grid, block, param, gmem, symbols,
                      arch=arch, shared_bytes=shared_bytes, schedule=schedule, seed=seed,
                      max_warp_instructions=max_warp_instructions, race=race, poison=poison,
                      atomic_order=atomic_order, check=check, cluster=cluster, explicit_cluster=explicit_cluster)

    def _launch_inputs(self, kernel, args, arch, buffers=()):
        """(kernel, global memory, symbol addresses, parameter bytes, handlers) of one launch (``buffers``:
        checked extra buffers, mapped last at their :func:`refsim.ptx.memory.buffer_addresses`)."""
        k = self._kernel(kernel)
        if len(args) != len(k.params):
            raise PtxLaunchError(f"args: kernel {kernel} takes {len(k.params)} parameters; got {len(args)}")
        gmem = GlobalMemory()
        symbols: dict[str, int] = {}
        for name, (var, init, _space) in self._parsed.globals.items():
            data = np.zeros(var.size, np.uint8) if init is None else np.frombuffer(bytearray(init), np.uint8)
            symbols[name] = gmem.add(data, name)
        param = bytearray(sum(p.size for p in k.params) + 16)
        size = 0
        for i, (p, a) in enumerate(zip(k.params, args)):
            raw = _param_bytes(i, p, a, gmem)
            param[p.offset:p.offset + p.size] = raw
            size = p.offset + p.size
        for (name, data), at in zip(buffers, buffer_addresses(buffers).values()):
            gmem.add(data, name, at=at)
        handlers = self._lookup(kernel, handler_arch(arch))
        return k, gmem, symbols, bytes(param[:size]), handlers


def _check_order(order):
    """``atomic_order``: None or a permutation of 0..n-1 (a tuple of ints), as a tuple."""
    if order is None:
        return None
    if (not isinstance(order, (tuple, list)) or not order
            or not all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in order)
            or sorted(int(x) for x in order) != list(range(len(order)))):
        raise PtxLaunchError(f"atomic_order: must be None or a permutation of 0..n-1; got {order!r}")
    return tuple(int(x) for x in order)


def _param_bytes(i: int, p, a, gmem: GlobalMemory) -> bytes:
    """The bytes of argument ``a`` for parameter ``p`` (arrays are mapped into ``gmem``)."""
    what = f"args[{i}] ({p.name}, .{p.type})"
    if p.type == "b8" or p.size > 8:
        if not isinstance(a, (bytes, bytearray)) or len(a) != p.size:
            raise PtxLaunchError(f"{what}: a {p.size}-byte parameter takes bytes of that length; got {a!r:.60}")
        return bytes(a)
    if isinstance(a, np.ndarray):
        if a.ndim != 0 and p.size != 8:
            raise PtxLaunchError(f"{what}: an array (pointer) needs a 64-bit parameter; got .{p.type}")
        base = gmem.add(check_device_array(what, a), p.name)
        return int(base).to_bytes(8, "little")
    if isinstance(a, (bool, np.bool_)) or not isinstance(a, (int, float, np.integer, np.floating)):
        raise PtxLaunchError(f"{what}: must be an array, an int or a float; got {type(a).__name__}")
    bits = TYPE_BITS[p.type]
    if p.type in ("f16", "f32", "f64", "bf16"):
        dt = {"f16": np.float16, "f32": np.float32, "f64": np.float64}.get(p.type)
        if dt is None:
            import ml_dtypes
            dt = ml_dtypes.bfloat16
        x = np.asarray(a).astype(dt)
        same = float(x) == float(a) or (np.isnan(float(a)) and np.isnan(float(x)))
        if not same:
            raise PtxLaunchError(f"{what}: {a!r} is not exactly representable in .{p.type} "
                                 f"(pass np.{np.dtype(dt).name}(...) to round explicitly)")
        return x.tobytes()
    if isinstance(a, (float, np.floating)):
        raise PtxLaunchError(f"{what}: an integer parameter takes an int; got float {a!r}")
    v = int(a)
    lo = -(1 << (bits - 1)) if p.type[0] in "sb" else 0
    hi = (1 << bits) - 1 if p.type[0] in "ub" else (1 << (bits - 1)) - 1
    if not lo <= v <= hi:
        raise PtxLaunchError(f"{what}: value must lie in [{lo}, {hi}]; got {v}")
    return (v % (1 << bits)).to_bytes(bits // 8, "little")
