"""Root pytest configuration: hypothesis profiles (see refsim.testing) for tests/ and property_tests/."""

from refsim.testing import register_hypothesis_profiles

_PROFILE = register_hypothesis_profiles()


def pytest_report_header(config):
    return f"refsim hypothesis profile: {_PROFILE}"
