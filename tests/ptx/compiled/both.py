"""Run one launch through both executors of refsim.ptx and require the same outcome, bit for bit.

``run_both(module, kernel, grid, block, args, **launch_options)`` copies every array argument, runs
the NumPy interpreter (the reference) on one copy and the compiled path (``executor="compiled"``)
on the other, and asserts: the same exception class and message, or the same ``LaunchStats``
(every counter and the per-opcode dict, in first-execution order) and the same bytes in every
array afterwards. Returns the compiled run's (stats, arrays)."""

from __future__ import annotations

import numpy as np

from refsim import ptx

_LAUNCH = ptx.Module.launch        # the method itself (callers may wrap Module.launch with run_both)


def _run(module, kernel, grid, block, args, executor, options):
    arrays = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    try:
        stats = _LAUNCH(module, kernel, grid, block, arrays, executor=executor, **options)
        return stats, None, arrays
    except Exception as e:  # the outcome under comparison, whatever the error family
        return None, e, arrays


def run_both(module, kernel, grid, block, args, **options):
    si, ei, ai = _run(module, kernel, grid, block, args, "interpreter", options)
    sc, ec, ac = _run(module, kernel, grid, block, args, "compiled", options)
    assert (type(ec), str(ec)) == (type(ei), str(ei)), f"errors differ:\n interpreter {ei!r}\n compiled    {ec!r}"
    if ei is None:
        assert sc == si, f"statistics differ:\n interpreter {si}\n compiled    {sc}"
        assert list(sc.opcodes) == list(si.opcodes), "opcode counts in another first-execution order"
        for j, (x, y) in enumerate(zip(ai, ac)):
            if isinstance(x, np.ndarray):
                assert x.tobytes() == y.tobytes(), (
                    f"argument {j} differs at bytes {np.flatnonzero(x.view(np.uint8) != y.view(np.uint8))[:8].tolist()}")
    return sc, ac, ec
