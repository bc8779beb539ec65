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
    "MESSAGES",
    "message",
    "error",
    "waiting",
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


#: The run-time error messages both executors raise, each worded once: name -> (class, template of the
#: text after ``"<where>: "``). The interpreter's raise sites and the compiled runner (which turns its C
#: status codes into these) both build them with :func:`message` / :func:`error`, so the two cannot drift.
MESSAGES: dict[str, tuple[type, str]] = {
    "limit": (PtxLimitError, "kernel {kernel}: more than max_warp_instructions={limit} warp-instructions "
                             "(at PTX line {line} `{text}`)"),
    "deadlock": (PtxDeadlockError, "kernel {kernel}: deadlock: {why}; waiting: {waiting}"),
    "deadlock_loop": (PtxDeadlockError, "kernel {kernel}: deadlock: a warp loops at PTX {lines} in a state it had at "
                                        "an earlier visit, with no memory, barrier or other side-effecting instruction "
                                        "in between, so it loops forever; looping: {looping}"),
    "deadlock_barrier": (PtxDeadlockError, "every live thread waits at a barrier that cannot complete"),
    "deadlock_spin": (PtxDeadlockError, "every running warp spins on a flag that no other thread changes"),
    "fault": (PtxMemoryError, "{what} at address 0x{addr:x} by {who}"),
    "misaligned": (PtxMisalignedError, "misaligned {nbytes}-byte .{space} access"),
    "oob_global": (PtxMemoryError, "out-of-bounds {nbytes}-byte .global access (no buffer holds it)"),
    "oob_shared": (PtxMemoryError, "out-of-bounds {nbytes}-byte .shared access (the block has {shared} bytes)"),
    "oob_local": (PtxMemoryError, "out-of-bounds {nbytes}-byte .local access"),
    "oob_param": (PtxMemoryError, "out-of-bounds {nbytes}-byte .param access"),
    "trap": (PtxMemoryError, "trap executed by {who}"),
    "race_read": (PtxRaceError, "shared-memory read by {who} of a byte written by {other} since the last barrier"),
    "race_write": (PtxRaceError, "shared-memory write by {who} to a byte another thread accessed since the last "
                                 "barrier"),
    "race_same_byte": (PtxRaceError, "several threads write the same shared byte (0x{offset:x}) in one instruction"),
    "race_pending": (PtxRaceError, "reads a cp.async destination before its wait_group ({who})"),
    "uninit_reg": (PtxUninitializedError, "register {reg} read before written by {who}"),
    "uninit_guard": (PtxUninitializedError, "guard predicate read before written"),
    "uninit_shared": (PtxUninitializedError, "shared memory read before written by {who}"),
    "uninit_shared_nowho": (PtxUninitializedError, "shared memory read before written"),
    "partial_mma": (PtxUnsupportedError, "mma executed by a partial warp (.aligned: every lane must execute it)"),
    "partial_ldmatrix": (PtxUnsupportedError, "ldmatrix executed by a partial warp"),
    "barrier_id": (PtxUnsupportedError, "barrier id must be 0..15; got {got}"),
    "src_size": (PtxMemoryError, "src-size above cp-size {size}"),
}


def message(name: str, **fields) -> str:
    """The text of :data:`MESSAGES` ``name`` with its fields filled: ``message("trap", who="thread 3")``
    -> ``"trap executed by thread 3"``."""
    return MESSAGES[name][1].format(**fields)


def error(name: str, where: str | None = None, **fields) -> PtxError:
    """The exception of :data:`MESSAGES` ``name``: its class, with ``"<where>: "`` before the text when
    ``where`` is given."""
    cls, _ = MESSAGES[name]
    text = message(name, **fields)
    return cls(f"{where}: {text}" if where is not None else text)


def waiting(lines: list[str]) -> str:
    """The ``waiting`` field of a deadlock: up to 8 blocks and where they wait, and how many there are
    when more."""
    return "; ".join(lines[:8]) + (f"; ... ({len(lines)} blocks)" if len(lines) > 8 else "")
