"""Where per-layer jobs run: any ``concurrent.futures.Executor``, named by a short spec.

    "serial"           in this process, one layer after the other (no pool)
    "local"            a process pool with one worker per core (``os.cpu_count()``)
    "local:N"          a process pool with N workers
    "dask-local:N"     a dask.distributed ``LocalCluster`` with N single-threaded worker processes
    "dask://HOST:PORT" an existing dask scheduler (``dask scheduler`` + ``dask worker`` on the
                       machines); every worker must see the model files at the same path

Layers are independent, so the result never depends on the executor: jobs are pure functions of
their arguments and results are collected in submission order. The dask variants use
``Client.get_executor()``, the ``concurrent.futures`` face of dask.distributed (optional extra
``pip install refsim[dist]``).
"""

from __future__ import annotations

import contextlib
import os
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from typing import Iterator

from refsim.errors import FormatRuleError, ToolchainError

__all__ = ["SerialExecutor", "executor_from_spec"]


class SerialExecutor(Executor):
    """Runs each submitted call at once in the calling thread (the reference order)."""

    def submit(self, fn, /, *args, **kwargs) -> Future:
        fut: Future = Future()
        try:
            fut.set_result(fn(*args, **kwargs))
        except BaseException as err:  # handed to the caller through the future, as pools do
            fut.set_exception(err)
        return fut


def _count(spec: str, text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise FormatRuleError(f"executor: worker count in {spec!r} must be a positive integer; got {text!r}")
    return int(text)


@contextlib.contextmanager
def executor_from_spec(spec: str) -> Iterator[Executor]:
    """Context manager yielding the executor named by ``spec`` (see the module docstring) and
    shutting it (and any cluster it started) down afterwards."""
    if not isinstance(spec, str):
        raise FormatRuleError(f"executor: must be a string such as 'local' or 'dask-local:2'; got {spec!r}")
    if spec == "serial":
        yield SerialExecutor()
        return
    if spec == "local" or spec.startswith("local:"):
        n = (os.cpu_count() or 1) if spec == "local" else _count(spec, spec[6:])
        with ProcessPoolExecutor(max_workers=n) as ex:
            yield ex
        return
    if spec.startswith("dask-local:") or spec.startswith("dask://"):
        try:
            from dask.distributed import Client, LocalCluster
        except ImportError:
            raise ToolchainError("executor: dask executors need dask.distributed "
                                 "(pip install 'refsim[dist]')") from None
        if spec.startswith("dask-local:"):
            n = _count(spec, spec[len("dask-local:"):])
            with LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
                    Client(cluster) as client:
                yield client.get_executor()
            return
        address = "tcp://" + spec[len("dask://"):]
        try:
            client = Client(address, timeout="10s")
        except OSError as err:
            raise ToolchainError(f"executor: could not reach the dask scheduler at {address}: {err}") from None
        with client:
            yield client.get_executor()
        return
    raise FormatRuleError("executor: must be 'serial', 'local', 'local:N', 'dask-local:N' or "
                          f"'dask://HOST:PORT'; got {spec!r}")
