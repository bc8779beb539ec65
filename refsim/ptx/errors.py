"""The errors of ``refsim.ptx``: every one is a :class:`refsim.errors.RefsimError` (a ``ValueError``).

    PtxError(RefsimError)            base; message names kernel, PTX line/column and instruction where known
    ├── PtxParseError                malformed PTX text (line, column, the offending token)
    ├── PtxUnsupportedError          well-formed PTX that refsim does not execute (e.g. ``.approx`` ops)
    ├── PtxLaunchError               bad launch: grid/block shape, argument count/type/range, shared bytes
    ├── PtxMemoryError               out-of-bounds global/shared/param access (kernel, line, block, thread, address)
    │   └── PtxMisalignedError       misaligned (vector) access, as the hardware faults
    ├── PtxDeadlockError             no warp can make progress (names the waiting blocks and PTX lines), or
    │                                a warp loops forever in a pure loop (the loop's lines, the warps)
    ├── PtxRaceError                 race checker: shared-memory conflict between barriers, or a read of a
    │                                ``cp.async`` destination before its ``wait_group``
    ├── PtxUninitializedError        read of an unwritten register or shared-memory byte (poison checking)
    ├── PtxRegisterError             ``setmaxnreg`` against its rules (register counts, warpgroups)
    └── PtxLimitError                a size limit (registers, parameters, static bytes, instructions, launch
                                     state, grid x block work; refsim.ptx.limits) or ``max_warp_instructions``
                                     exceeded (a runaway kernel never hangs)
"""

from __future__ import annotations

from refsim.errors import RefsimError

__all__ = [
    "PtxError",
    "PtxParseError",
    "PtxUnsupportedError",
    "PtxLaunchError",
    "PtxMemoryError",
    "PtxMisalignedError",
    "PtxDeadlockError",
    "PtxRaceError",
    "PtxUninitializedError",
    "PtxLimitError",
    "PtxBarrierError",
    "PtxRegisterError",
]


class PtxError(RefsimError):
    """Base class of every error raised while parsing or executing PTX."""


class PtxParseError(PtxError):
    """The PTX text is malformed; the message names line, column and the offending token."""


class PtxUnsupportedError(PtxError):
    """Well-formed PTX that refsim refuses to execute (implementation-defined results, unknown opcode)."""


class PtxLaunchError(PtxError):
    """A launch argument breaks a rule: grid/block shape, argument count, type or range, shared bytes."""


class PtxMemoryError(PtxError):
    """An access outside the bounds of a global buffer, shared memory or the parameter space."""


class PtxMisalignedError(PtxMemoryError):
    """An access whose address is not a multiple of its size (the hardware raises a fault)."""


class PtxDeadlockError(PtxError):
    """No warp of the launch can make progress (names the waiting blocks and their PTX lines), or a
    warp loops forever in a pure loop (refsim.ptx.loops: names the loop's PTX lines and the warps)."""


class PtxRaceError(PtxError):
    """A shared-memory conflict between barriers, or a ``cp.async`` destination read before its wait."""


class PtxUninitializedError(PtxError):
    """A register or shared-memory byte read before anything wrote it (``poison`` checking)."""


class PtxLimitError(PtxError):
    """A size beyond refsim.ptx.limits, or a launch beyond ``max_warp_instructions``; names both numbers."""


class PtxBarrierError(PtxError):
    """An ``mbarrier`` used against its rules (refsim.ptx.hopper.mbarrier): init of a misaligned
    address, an operation on an uninitialised barrier, more arrivals than expected, a transaction
    count outside its range, a generic access to a live barrier's bytes."""


class PtxRegisterError(PtxError):
    """``setmaxnreg`` used against its rules (refsim.ptx.hopper.registers): an ``.inc`` to fewer or a ``.dec``
    to more registers than the warp holds, warps of one warpgroup executing different ``setmaxnreg``
    instructions or one without the others having executed the previous one, a partial warpgroup."""
