"""The hypothesis profiles every refsim test suite uses, registered once.

    ci    derandomized, no deadline, no example database, 100 x CI_EXAMPLE_SCALE examples per test
    dev   random, no deadline, 100 examples per test (the default)

A test that sets its own budget writes ``@settings(max_examples=examples(40))``: 40 under ``dev``
(the README's plain ``pytest`` stays quick), 40 x :data:`CI_EXAMPLE_SCALE` under ``ci``. CI counts
the examples it actually ran (``REFSIM_COUNT_EXAMPLES=1``, see ``conftest.py``) and prints the total.

Select one with the environment variable ``REFSIM_HYPOTHESIS_PROFILE``; with ``CI`` set and no
explicit choice, ``ci`` is used. ``.ci/run`` runs the suite under both (``dev`` with a fresh
``--hypothesis-seed`` it prints), so a counterexample the fixed ``ci`` examples miss still surfaces.
Neither profile has a deadline: the suite must pass on a loaded 2-core machine, and speed is
measured by ``bench/``, never asserted.
"""

from __future__ import annotations

import os

from refsim._validate import require_int

__all__ = ["register_hypothesis_profiles", "examples", "CI_EXAMPLE_SCALE"]

#: how many times more examples every property draws under the ``ci`` profile than under ``dev``'s
#: per-test budgets. 1: CI's derandomized pass draws the dev budget with its fixed seed, and CI's ``dev``
#: pass then draws it again with a fresh seed (about 10,000 examples in all within CI's ~10-minute budget)
CI_EXAMPLE_SCALE = 1


def _selected_profile() -> str:
    return os.environ.get("REFSIM_HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev")


def examples(n: int) -> int:
    """A test's own example budget ``n`` (int >= 1) scaled for the selected profile:
    ``n`` under ``dev``, ``n * CI_EXAMPLE_SCALE`` under ``ci``. Use as
    ``@settings(max_examples=examples(40))``."""
    n = require_int("n", n, minimum=1)
    return n * CI_EXAMPLE_SCALE if _selected_profile() == "ci" else n


def register_hypothesis_profiles() -> str:
    """Register the ``ci`` and ``dev`` hypothesis profiles and load the selected one.

    Returns the name of the loaded profile. Safe to call more than once.
    """
    from hypothesis import HealthCheck, settings

    settings.register_profile(
        "ci",
        derandomize=True,
        deadline=None,
        database=None,
        max_examples=100 * CI_EXAMPLE_SCALE,
        print_blob=True,
        suppress_health_check=[HealthCheck.too_slow],
    )
    # derandomize=False said explicitly: a profile inherits hypothesis's defaults, and with CI set in the
    # environment those are hypothesis's own derandomized 'ci' settings, which would make CI's
    # random-seed pass repeat the fixed examples
    settings.register_profile(
        "dev",
        derandomize=False,
        deadline=None,
        max_examples=100,
        suppress_health_check=[HealthCheck.too_slow],
    )
    profile = _selected_profile()
    settings.load_profile(profile)
    return profile
