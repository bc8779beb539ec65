"""Hostile-argument fuzz of the public API: every variant of a legal call gives a RefsimError or
the result the legal call gives, in bounded time, without crashing or modifying its inputs.

For each public function with a legal call in :mod:`fuzz_seeds`, every parameter (and every field
of a dataclass argument) is replaced in turn by the values :mod:`fuzz_values` draws for its kind:
NumPy integer and float scalars of every width and sign, 0-d arrays, big-endian, Fortran,
negative-stride, strided, unaligned, read-only, zero-stride and subclass arrays, zero-stride
views claiming 2**36 elements, NaN/+-inf/-0, bools, strings and objects where numbers go, lists
where arrays go, other dtypes and ranks, empty arrays. :mod:`fuzz_engine` runs each function in a
forked child under a per-call time and address-space bound and sorts what goes wrong into the
classes of :data:`fuzz_engine.CLASSES`.

:data:`fuzz_gaps.OPEN` lists the failures still open in modules other helpers own, by function
and class; such a failure is not this test's verdict, and an entry that no longer reproduces
fails the test (delete it). Every other finding fails.

The variants are deterministic (no hypothesis: the same calls on every run), so the README's
``pytest`` and CI see the same verdict, and CI's second, random-seed pass (``-m hypothesis``) does not
repeat it. The engine and its tables live in tests/fuzz/.
``python tests/fuzz/fuzz_api.py --hostile [names]`` prints every finding, for all seeded
functions or those whose name contains one of ``names``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fuzz"))  # the fuzz engine
from fuzz_api import hostile_targets  # noqa: E402
from fuzz_engine import fuzz_function  # noqa: E402
from fuzz_gaps import OPEN  # noqa: E402
from fuzz_seeds import SEEDS  # noqa: E402

TARGETS = hostile_targets()


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SEEDS))
def test_variants_of_a_legal_call_give_a_named_error_or_the_same_result(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a string drawn for a path parameter writes here, not in the checkout
    report = fuzz_function(name, TARGETS[name], SEEDS[name]())
    open_classes = OPEN.get(name, {})
    new = [f for f in report.findings if f.cls not in open_classes]
    assert not new, f"{len(new)} failure(s) in {report.calls} calls:\n" + "\n".join(str(f) for f in new[:25])
    still = {f.cls for f in report.findings}
    fixed = sorted(set(open_classes) - still)
    assert not fixed, f"fuzz_gaps.OPEN[{name!r}] lists {fixed}, which no longer reproduce: delete them"


def test_every_public_callable_has_a_legal_call_or_a_reason():
    from fuzz_api import public_callables
    from fuzz_seeds import UNSEEDED

    names = {n for n, _ in public_callables()} | set(TARGETS)
    missing = sorted(names - set(SEEDS) - set(UNSEEDED))
    assert not missing, f"add a legal call to fuzz_seeds.SEEDS (or a reason to UNSEEDED): {missing}"
    stale = sorted((set(SEEDS) | set(UNSEEDED) | set(OPEN)) - names)
    assert not stale, f"fuzz_seeds / fuzz_gaps name callables that are not public: {stale}"
