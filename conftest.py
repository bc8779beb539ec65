"""Root pytest configuration: hypothesis profiles (see refsim.testing) for tests/."""

import os

import threadpoolctl

from refsim.testing import register_hypothesis_profiles

_PROFILE = register_hypothesis_profiles()

# One BLAS thread per test process: CI runs two pytest workers on two cores, and OpenBLAS's own
# threads on the tests' small matmuls then spin against each other and against other load.
# Held for the whole session.
_BLAS_LIMIT = threadpoolctl.threadpool_limits(limits=1)


def pytest_report_header(config):
    return f"refsim hypothesis profile: {_PROFILE}"


# Hypothesis examples actually run, counted when REFSIM_COUNT_EXAMPLES is set (.ci/run sets it):
# every test case that ran to a verdict (passed or failed; not the ones the strategy gave up on),
# including those inside check_kernel. Under pytest-xdist each worker counts its own and hands the
# number to the controller, which prints the total.
_EXAMPLES = [0]
_COUNTING = bool(os.environ.get("REFSIM_COUNT_EXAMPLES"))
if _COUNTING:
    from hypothesis.internal import observability
    from hypothesis.internal.observability import add_observability_callback

    # the count needs no line coverage; collecting it under sys.settrace made the hypothesis tests 7x slower
    observability.OBSERVABILITY_COLLECT_COVERAGE = False

    def _count_example(observation):
        if observation.type == "test_case" and observation.status in ("passed", "failed"):
            _EXAMPLES[0] += 1

    add_observability_callback(_count_example)  # the thread pytest runs tests on


class _XdistExampleCount:
    """Controller side of the count (a plugin, so plain pytest never sees an xdist hook)."""

    @staticmethod
    def pytest_testnodedown(node, error):
        _EXAMPLES[0] += getattr(node, "workeroutput", {}).get("hypothesis_examples", 0)


def pytest_configure(config):
    if _COUNTING and config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_XdistExampleCount())


def pytest_sessionfinish(session):
    if _COUNTING and hasattr(session.config, "workeroutput"):  # an xdist worker
        session.config.workeroutput["hypothesis_examples"] = _EXAMPLES[0]


def pytest_terminal_summary(terminalreporter):
    if _COUNTING:
        terminalreporter.write_line(f"hypothesis examples run: {_EXAMPLES[0]}")
