"""refsim.testing.profiles: the profile chosen from the environment, the example budget scaled under
'ci' only, and the two registered profiles' settings (derandomized 'ci' without a database, random 'dev',
neither with a deadline)."""

import pytest
from hypothesis import settings

from refsim.errors import RefsimError
from refsim.testing import profiles


@pytest.fixture
def restore_profile():
    """register_hypothesis_profiles loads a profile for the whole process: put conftest's back."""
    before = settings.get_current_profile_name()
    yield
    settings.load_profile(before)


@pytest.mark.parametrize("env,want", [({}, "dev"), ({"CI": "true"}, "ci"),
                                      ({"CI": "true", "REFSIM_HYPOTHESIS_PROFILE": "dev"}, "dev"),
                                      ({"REFSIM_HYPOTHESIS_PROFILE": "ci"}, "ci")])
def test_the_environment_selects_the_profile(monkeypatch, restore_profile, env, want):
    monkeypatch.setattr(profiles, "CI_EXAMPLE_SCALE", 3)           # a scale the ci budgets must show
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("REFSIM_HYPOTHESIS_PROFILE", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert profiles.register_hypothesis_profiles() == want
    assert settings.get_current_profile_name() == want
    assert profiles.examples(40) == (40 * 3 if want == "ci" else 40)


def test_ci_is_random_without_a_database_and_neither_profile_has_a_deadline(monkeypatch, restore_profile):
    profiles.register_hypothesis_profiles()
    ci, dev = settings.get_profile("ci"), settings.get_profile("dev")
    assert not ci.derandomize and ci.database is None and ci.max_examples == 100 == dev.max_examples
    monkeypatch.setattr(profiles, "CI_EXAMPLE_SCALE", 2)
    profiles.register_hypothesis_profiles()
    assert settings.get_profile("ci").max_examples == 200
    assert not dev.derandomize and dev.max_examples == 100
    assert ci.deadline is None and dev.deadline is None


@pytest.mark.parametrize("n", [0, -3, 2.5, "40"])
def test_a_budget_that_is_not_a_positive_int_is_refused(n):
    with pytest.raises(RefsimError, match="^n: "):
        profiles.examples(n)
