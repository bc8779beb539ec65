"""The hypothesis profiles every refsim test suite uses, registered once.

    ci    random (CI prints its --hypothesis-seed), no deadline, no example database,
          100 x CI_EXAMPLE_SCALE examples per test
    dev   random, no deadline, 100 examples per test (the default)

A test that sets its own budget writes ``@settings(max_examples=examples(40))``: 40 under ``dev``
(the README's plain ``pytest`` stays quick), 40 x :data:`CI_EXAMPLE_SCALE` under ``ci``. CI counts
the examples it actually ran (``REFSIM_COUNT_EXAMPLES=1``, see ``conftest.py``) and prints the total.

Select one with the environment variable ``REFSIM_HYPOTHESIS_PROFILE``; with ``CI`` set and no
explicit choice, ``ci`` is used. ``.ci/run`` runs the suite once under ``ci`` with a fresh
``--hypothesis-seed`` it prints first: every run draws new examples, and a failure replays with
``REFSIM_HYPOTHESIS_PROFILE=ci pytest <test> --hypothesis-seed=<seed>``.
Neither profile has a deadline: the suite must pass on a loaded 2-core machine, and speed is
measured by ``bench/``, never asserted.
"""

from __future__ import annotations

import os

from refsim._validate import require_int

__all__ = ["register_hypothesis_profiles", "examples", "CI_EXAMPLE_SCALE"]

#: how many times more examples every property draws under the ``ci`` profile than under ``dev``'s
#: per-test budgets. 1: CI draws the dev budget (about 5,300 examples) with a fresh seed each run
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
        derandomize=False,
        deadline=None,
        database=None,
        max_examples=100 * CI_EXAMPLE_SCALE,
        print_blob=True,
        suppress_health_check=[HealthCheck.too_slow],
    )
    # derandomize=False said explicitly (in both profiles): a profile inherits hypothesis's defaults, and
    # with CI set in the environment those are hypothesis's own derandomized settings, which would make
    # every CI run repeat the same examples and ignore the --hypothesis-seed it prints
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
