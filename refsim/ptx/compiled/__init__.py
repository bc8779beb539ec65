"""refsim.ptx's compiled execution path: each kernel translated to C, run by a C runtime, bit for bit
the interpreter's results.

Spec
----
what            ``Module.launch(..., executor=None)`` runs a kernel here when a C compiler is available
                (``executor="compiled"`` insists, ``"interpreter"`` never comes here). The kernel's PTX
                becomes one C function per instruction shape plus a descriptor per instruction
                (:mod:`.translate`); the C runtime (refsim/native/ptx_*.c) keeps the interpreter's
                scheduling rule exactly (each step: p = the lowest warp-minimum PC of the non-yielding
                warps, or a seeded random warp's; instruction p for the threads at p in the chosen
                warps, ascending), its memory model, barriers, cp.async groups, atomics order
                (``atomic_order`` included), spin yielding, deadlock detection,
                ``max_warp_instructions``, ``race``/``poison`` checks, statistics and error messages.
equals          the NumPy interpreter (refsim/ptx/engine.py), which stays the reference: the tests run
                every test kernel, the conformance tables and refsim/cuda's kernels through both and
                compare memory, statistics and errors (tests/ptx/compiled/).
refusals        an instruction the translator does not compile refuses its kernel (the interpreter
                runs it; one RuntimeWarning per kernel says which line and why). ALU and warp-wide
                forms without a C body run their semantics handler in Python for that step instead
                (the interpreter's glue: same bits), and refsim.ptx.hopper's instructions run their one
                Python definition over a LaunchView of the compiled state (refsim.ptx.compiled.view).
build           refsim.native.build at ``-O1`` (state.KERNEL_OPT; the runtime at ``-O2``): cached by source
                text, compiler and flags under ``$REFSIM_CACHE/native`` (docs/ptx.md); no compiler -> one
                RuntimeWarning, the interpreter runs; ``REFSIM_NATIVE=0`` -> the interpreter, silently.
"""

from __future__ import annotations

import sys
import warnings
import weakref

from refsim.ptx.arch import handler_arch
from refsim.ptx.compiled.translate import Translation, translate

__all__ = ["EXECUTORS", "launch", "translation", "unavailable"]

#: values of ``Module.launch(executor=...)``
EXECUTORS = (None, "compiled", "interpreter")

_TRANSLATIONS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_WARNED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()     # module -> {(kernel, why)} said


def unavailable() -> str | None:
    """Why the compiled path cannot run on this machine (None when it can; builds the runtime)."""
    from refsim import native
    from refsim.ptx.compiled import state

    if native.disabled():
        return "REFSIM_NATIVE=0"
    if sys.byteorder != "little":
        return "the runtime reads PTX's little-endian memory as host integers (big-endian host)"
    lib, reason = state.runtime()
    return None if lib is not None else reason


def translation(module, kernel: str) -> Translation:
    """The (cached) :class:`Translation` of one kernel of a :class:`refsim.ptx.Module`."""
    per = _TRANSLATIONS.setdefault(module, {})
    if kernel not in per:
        k = module._kernel(kernel)
        handlers = module._lookup(kernel, handler_arch(module.target))
        per[kernel] = translate(k, handlers, module._parsed.globals)
    return per[kernel]


def _refuse(module, kernel: str, why: str, required: bool):
    from refsim.ptx.errors import PtxUnsupportedError

    if required:
        raise PtxUnsupportedError(f"kernel {kernel}: executor='compiled' cannot run it: {why}")
    said = _WARNED.setdefault(module, set())
    if (kernel, why) not in said:
        said.add((kernel, why))
        warnings.warn(f"refsim.ptx: kernel {kernel} runs on the interpreter (not compiled: {why})",
                      RuntimeWarning, stacklevel=4)
    return None


def launch(module, kernel: str, grid, block, args: list, *, arch: str, shared_bytes: int, schedule: str, seed,
           max_warp_instructions, race: bool, poison: bool, atomic_order=None, required: bool, buffers=(),
           cluster=(1, 1, 1), explicit_cluster: bool = False):
    """Run one launch on the compiled path and return its ``LaunchStats``, or None when this kernel
    or machine needs the interpreter (``required``: raise PtxUnsupportedError instead). Arguments
    as :meth:`refsim.ptx.Module.launch` (already validated there)."""
    from refsim.ptx.compiled import runner, state

    k, gmem, symbols, param, handlers = module._launch_inputs(kernel, args, arch, buffers)
    runner.geometry(k, grid, block, shared_bytes)         # the launch-state limit, before any build
    why = unavailable()
    if why is not None:       # no compiler: refsim.native has warned once; REFSIM_NATIVE=0: a choice
        return _refuse(module, kernel, why, required) if required else None
    tr = translation(module, kernel)
    if tr.reason is not None:
        return _refuse(module, kernel, tr.reason, required)
    exec_addr, lib = state.kernel_library(tr.source)
    if exec_addr is None:
        return _refuse(module, kernel, f"its C did not build ({lib})", required)
    run = runner.CompiledLaunch(k, handlers, tr, exec_addr, grid, block, param, gmem, symbols, arch=arch,
                         shared_bytes=shared_bytes, schedule=schedule, seed=seed,
                         max_warp_instructions=max_warp_instructions, race=race, poison=poison,
                         atomic_order=atomic_order, cluster=cluster, explicit_cluster=explicit_cluster)
    run.lib_keepalive = lib
    return run.run()
