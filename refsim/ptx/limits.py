"""The sizes refsim.ptx accepts, each checked before anything is allocated: a broken one is a
:class:`refsim.ptx.PtxLimitError` naming the limit, the kernel and the number received.

    limit                            value            source
    parameter bytes per kernel       32,764           PTX ISA 8.1+ / CUDA 12.1+ on sm_70 and later
    local bytes per thread           512 KiB          CUDA C++ Programming Guide, technical specifications
    .const bytes per module          64 KiB           constant memory (same table)
    static .shared bytes per kernel  48 KiB           ptxas ("uses too much shared data"); see refsim.archs
    instructions per kernel          512 Mi           CUDA guide: "maximum number of instructions per kernel"
    registers per kernel             2^18             refsim: each declared register is one array over the
                                                      launch's resident threads (nvcc's Marlin: ~8,000)
    .global variable bytes           1 GiB            refsim: module variables are allocated per launch
    launch state bytes               8 GiB            refsim: registers + local memory + shared memory of
                                                      the resident threads, allocated by each launch
    warp-instructions of a launch    max_warp_instructions (default 10^9): every warp of every block
                                     issues at least one, so blocks x warps above it is refused at once

Loading is linear in the text (a statement is joined only at ``;``, braces and label colons; the
cyclic collector is paused while loading), ~1 s for 10^5 instructions (bench/bench_ptx_parse.py).
"""

from __future__ import annotations

from refsim._validate import require_int
from refsim.ptx.errors import PtxLimitError

__all__ = ["MAX_PARAM_BYTES", "MAX_LOCAL_BYTES", "MAX_CONST_BYTES", "MAX_INSTRUCTIONS", "MAX_REGISTERS",
           "MAX_GLOBAL_VARIABLE_BYTES", "MAX_LAUNCH_STATE_BYTES", "check"]

MAX_PARAM_BYTES = 32764
MAX_LOCAL_BYTES = 512 * 1024
MAX_CONST_BYTES = 64 * 1024
MAX_INSTRUCTIONS = 512 * 1024 * 1024
MAX_REGISTERS = 1 << 18
MAX_GLOBAL_VARIABLE_BYTES = 1 << 30
MAX_LAUNCH_STATE_BYTES = 1 << 33


def check(what: str, value: int, limit: int, where: str = "") -> int:
    """``value`` (a Python int) if it is at most ``limit``, else PtxLimitError("<where>: <what>: at most
    <limit>; got <value>"); ``value`` and ``limit`` must be integers (NumPy ones taken as ints)."""
    value, limit = require_int(what, value), require_int("limit", limit)
    if value > limit:
        raise PtxLimitError(f"{where + ': ' if where else ''}{what}: at most {limit:,}; got {value:,}")
    return value
