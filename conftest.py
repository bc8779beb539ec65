"""Root pytest configuration: hypothesis profiles (see refsim.testing) for tests/ and property_tests/."""

import threadpoolctl

from refsim.testing import register_hypothesis_profiles

_PROFILE = register_hypothesis_profiles()

# One BLAS thread per test process: CI runs two pytest workers on two cores, and OpenBLAS's own
# threads on the tests' small matmuls then spin against each other and against other load
# (issue 13). Held for the whole session.
_BLAS_LIMIT = threadpoolctl.threadpool_limits(limits=1)


def pytest_report_header(config):
    return f"refsim hypothesis profile: {_PROFILE}"
