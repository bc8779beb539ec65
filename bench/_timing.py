"""Wall and CPU time of repeated calls, shared by the bench scripts.

The machines are shared: wall time includes time spent descheduled, while the process CPU time of
single-threaded work does not, so every script prints both.
"""

from __future__ import annotations

import time
from typing import Callable, NamedTuple


class Timings(NamedTuple):
    walls: list[float]   # seconds per call, in call order
    cpus: list[float]    # process CPU seconds per call, in call order
    result: object       # what the last call returned


def repeat_timed(fn: Callable[[], object], repeats: int) -> Timings:
    """Call ``fn()`` ``repeats`` times; wall and process CPU seconds of each call, last result."""
    walls, cpus, out = [], [], None
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return Timings(walls, cpus, out)
