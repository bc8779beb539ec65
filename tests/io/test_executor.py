"""refsim.io.executor: the serial executor runs each job at once and hands its error back through the
future, as a pool does; a spec names the executor, and a bad spec is refused with the forms allowed."""

from __future__ import annotations

import operator
from concurrent.futures import ProcessPoolExecutor

import pytest

from refsim.errors import FormatRuleError
from refsim.io.executor import SerialExecutor, executor_from_spec


def test_the_serial_executor_runs_at_submit_and_keeps_the_error_in_the_future():
    ran = []
    fut = SerialExecutor().submit(lambda x, *, y: ran.append((x, y)) or x + y, 2, y=5)
    assert ran == [(2, 5)] and fut.done() and fut.result() == 7
    bad = SerialExecutor().submit(operator.truediv, 1, 0)
    assert isinstance(bad.exception(), ZeroDivisionError)
    with pytest.raises(ZeroDivisionError):
        bad.result()


def test_serial_and_local_specs_give_their_executors_and_results_in_submission_order():
    with executor_from_spec("serial") as ex:
        assert type(ex) is SerialExecutor
        assert list(ex.map(pow, [2, 3, 10], [10, 2, 0])) == [1024, 9, 1]
    with executor_from_spec("local:2") as ex:
        assert type(ex) is ProcessPoolExecutor and ex._max_workers == 2
        assert list(ex.map(pow, [2, 3, 10], [10, 2, 0])) == [1024, 9, 1]


@pytest.mark.parametrize("spec, rule", [
    ("local:0", r"worker count in 'local:0' must be a positive integer; got '0'"),
    ("local:two", r"worker count in 'local:two' must be a positive integer; got 'two'"),
    ("dask-local:-1", r"worker count in 'dask-local:-1' must be a positive integer; got '-1'"),
    ("threads", r"must be 'serial', 'local', 'local:N', 'dask-local:N' or 'dask://HOST:PORT'; got 'threads'"),
    (4, r"must be a string such as 'local' or 'dask-local:2'; got 4"),
])
def test_a_bad_spec_is_refused_with_the_rule(spec, rule):
    with pytest.raises(FormatRuleError, match=rf"executor: {rule}"):
        with executor_from_spec(spec):
            pass
