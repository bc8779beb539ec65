"""Check campaigns on many workers: :func:`refsim.testing.check_kernel`'s cases run in parallel.

A hypothesis campaign at layer sizes through refsim.ptx costs about a second a case on one core;
ten thousand cases outgrow one machine. ``check_kernel(..., executor=SPEC)`` (CLI ``refsim check
--executor SPEC``) runs every planned case on the workers of a ``concurrent.futures`` executor —
the specs of :func:`refsim.io.executor.executor_from_spec`: "serial", "local:N", "dask-local:N",
"dask://HOST:PORT" — and returns each case's outcome. The verdict stays the serial run's:

    plan (pinned, drawn, in order) --map on the workers--> outcome per case (in plan order)
        first failing case in plan order --> this process: the same shrink, diagnosis and report

so a parallel run fails on the case a serial run fails on, with the same report; every case is a
pure function of its dict (the data comes from its seed). A worker raises nothing: a kernel that
raises, exits or writes an input is an outcome (its error's class and message), re-raised here in
plan order.

The kernel travels to the workers by pickling (dask pickles closures with cloudpickle; a process
pool needs a module-level function). ``refsim check``'s kernel is a
:class:`refsim.testing.sandbox.KernelProcess`, which pickles as its request: each worker starts one
sandboxed kernel process of its own and keeps it for the campaign (``sandbox.worker_kernel``).
"""

from __future__ import annotations

from concurrent.futures import Executor
from dataclasses import dataclass

__all__ = ["Outcome", "evaluate", "run_cases"]


@dataclass(frozen=True)
class Outcome:
    """One case's result on a worker: ``bad`` (outputs that differ or leave the bound), ``outputs``
    and ``bit_differ`` counts, ``ratio`` (largest error / bound, accuracy mode), ``admissible`` (the
    verdict of a set-valued case, or None) and ``error`` ((class name, message) of a call error, or
    None)."""

    bad: int
    outputs: int
    bit_differ: int
    ratio: float
    admissible: str | None
    error: tuple | None


def evaluate(kernel, fmt: str, arch: str, sms: int, deadline, acc, case: dict) -> Outcome:
    """Run ``kernel`` on one ``case`` of format ``fmt`` (a dict of its fields) and judge it as
    :func:`refsim.testing.check_kernel` does (bit-exact, or within the bound of ``acc``, an
    :class:`refsim.testing.accuracy.Accumulation`); a call error becomes the outcome's ``error``."""
    from refsim.testing.accuracy import judge
    from refsim.testing.cases import FORMATS
    from refsim.testing.runner import KernelCallError, Runner

    spec = FORMATS[fmt]
    runner = Runner(kernel, spec, arch, sms, deadline)
    inputs = spec.make(case)
    try:
        actual, _, bits = runner.differs(case, inputs)
    except KernelCallError as err:
        return Outcome(0, 0, 0, 0.0, None, (type(err).__name__, str(err)))
    bad, ratio = bits, 0.0
    if acc is not None:
        j = judge(acc, spec.linear(case, inputs), actual)
        bad, ratio = j.outside, j.ratio
    return Outcome(int(bad.sum()), int(bits.size), int(bits.sum()), float(ratio),
                   runner.admissible[0] if runner.admissible else None, None)


def run_cases(executor: Executor, kernel, fmt: str, arch: str, sms: int, deadline, acc, cases: list,
              say) -> list[Outcome]:
    """Every case's :class:`Outcome` in the order of ``cases``, computed on ``executor``'s workers;
    ``say`` gets a progress line about every tenth of the cases."""
    futures = [executor.submit(evaluate, kernel, fmt, arch, sms, deadline, acc, case) for case in cases]
    out, step = [], max(1, len(futures) // 10)
    for i, fut in enumerate(futures):
        out.append(fut.result())
        if (i + 1) % step == 0 or i + 1 == len(futures):
            say(f"campaign: {i + 1} of {len(futures)} cases evaluated")
    return out
