"""Bit-exact assertions and the hypothesis profiles every refsim test suite uses.

``assert_bitexact(actual, expected)`` compares raw bits (``view(uint)``), never values: ``+0``
and ``-0`` differ, two NaNs with different payloads differ, and a mismatch report names the
coordinates, both hex patterns and, for floats, the distance in units in the last place (ULP)
between the two values along the ordered float line.

``check_kernel(kernel, fmt)`` is the harness for kernel authors: it draws legal cases for a format
with hypothesis, packs them, calls your kernel and compares it bit for bit with refsim's emulator of
that kernel (see :mod:`refsim.emulator.harness`).

Hypothesis profiles are registered here, once:

    ci    derandomized, no deadline, no example database, 60 x 6 = 360 examples per test
    dev   random, no deadline, 100 examples per test (the default)

A test that sets its own budget writes ``@settings(max_examples=examples(40))``: 40 under ``dev``
(the README's plain ``pytest`` stays quick), 40 x :data:`CI_EXAMPLE_SCALE` under ``ci``. CI
counts the examples it actually ran (``REFSIM_COUNT_EXAMPLES=1``, see ``conftest.py``) and
prints the total.

Select one with the environment variable ``REFSIM_HYPOTHESIS_PROFILE``; with ``CI`` set and no
explicit choice, ``ci`` is used. ``.ci/run`` runs the suite under both (``dev`` with a fresh
``--hypothesis-seed`` it prints), so a counterexample the fixed ``ci`` examples miss still surfaces.
Neither profile has a deadline: the suite must pass on a loaded 2-core machine, and speed is
measured by ``bench/``, never asserted.
"""

from __future__ import annotations

import os

import numpy as np

from refsim._validate import require_int

__all__ = ["assert_bitexact", "ulp_distance", "register_hypothesis_profiles", "BitMismatch", "check_kernel",
           "rebuild_case", "examples", "CI_EXAMPLE_SCALE"]

#: how many times more examples every property draws under the ``ci`` profile than under ``dev``'s
#: per-test budgets (issue 13: >= 10,000 hypothesis examples per CI run within the CI budget)
CI_EXAMPLE_SCALE = 6

_UINT_OF_SIZE = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


class BitMismatch(AssertionError):
    """Raised by :func:`assert_bitexact`; the message is the full mismatch report."""


def _raw_bits(x: np.ndarray) -> np.ndarray:
    """The array's elements as unsigned integers of the same width (a view, no conversion)."""
    if not x.flags.c_contiguous:
        x = x.copy(order="C")  # np.ascontiguousarray would turn 0-d into 1-d
    return x.view(_UINT_OF_SIZE[x.dtype.itemsize])


def _is_float(dtype: np.dtype) -> bool:
    if np.issubdtype(dtype, np.floating):
        return True
    try:
        import ml_dtypes

        return dtype in (np.dtype(ml_dtypes.bfloat16),)
    except ImportError:  # pragma: no cover - ml_dtypes is a core dependency
        return False


def _ordered(bits: np.ndarray, width: int) -> np.ndarray:
    """Map sign-magnitude float bit patterns to integers that increase with the float value.

    -0 and +0 both map to 0, so their ULP distance is 0 although their bits differ. Returned as
    int64 for widths below 64 and as Python ints (object) for 64-bit floats, so that distances
    across the whole float64 range cannot overflow.
    """
    utype = bits.dtype.type
    magnitude = (bits & utype((1 << (width - 1)) - 1)).astype(np.int64)
    negative = (bits >> utype(width - 1)) != 0
    ordered = np.where(negative, -magnitude, magnitude)
    return ordered.astype(object) if width == 64 else ordered


def ulp_distance(actual: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """Elementwise distance in ULPs between two float arrays of the same dtype.

    Shapes: broadcastable; dtype: float16, bfloat16, float32 or float64 (both the same).
    Returns int64 (Python ints in an object array for float64). NaN operands give -1.
    """
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    if actual.dtype != expected.dtype:
        raise TypeError(f"ulp_distance: dtypes differ ({actual.dtype} vs {expected.dtype})")
    width = actual.dtype.itemsize * 8
    a = _ordered(_raw_bits(actual), width)
    e = _ordered(_raw_bits(expected), width)
    dist = np.abs(a - e)
    nan = np.isnan(actual.astype(np.float64)) | np.isnan(expected.astype(np.float64))
    return np.where(nan, -1, dist)


def assert_bitexact(actual, expected, name: str = "array", max_report: int = 10) -> None:
    """Assert that two arrays have identical dtype, shape and raw bits.

    On failure raises :class:`BitMismatch` (an ``AssertionError``) whose message gives the
    number of mismatched elements, the first ``max_report`` (≤ 10 by default) coordinates with
    both hex bit patterns and values, and, for floats, the ULP distance of each and the maximum.
    """
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    if actual.dtype != expected.dtype:
        raise BitMismatch(f"{name}: dtype differs: actual {actual.dtype}, expected {expected.dtype}")
    if actual.shape != expected.shape:
        raise BitMismatch(f"{name}: shape differs: actual {actual.shape}, expected {expected.shape}")
    if actual.dtype.kind in "OUSV":
        raise TypeError(f"assert_bitexact: unsupported dtype {actual.dtype}")
    a_bits = _raw_bits(actual)
    e_bits = _raw_bits(expected)
    bad = a_bits != e_bits
    n_bad = int(bad.sum())
    if n_bad == 0:
        return
    is_float = _is_float(actual.dtype)
    hex_digits = actual.dtype.itemsize * 2
    coords = np.argwhere(bad)[:max_report]
    lines = [
        f"{name}: {n_bad} of {actual.size} elements differ in their bits "
        f"(dtype {actual.dtype}, shape {actual.shape})"
    ]
    if is_float:
        ulps = ulp_distance(actual[bad], expected[bad])
        lines.append(f"  max ULP distance among mismatches: {int(ulps.max())}")
    for c in coords:
        idx = tuple(int(i) for i in c)
        av, ev = actual[idx], expected[idx]
        ab, eb = int(a_bits[idx]), int(e_bits[idx])
        line = f"  at {idx}: actual 0x{ab:0{hex_digits}x} ({av!r}), expected 0x{eb:0{hex_digits}x} ({ev!r})"
        if is_float:
            line += f", {int(ulp_distance(np.asarray(av), np.asarray(ev)))} ULP"
        else:
            line += f", difference {int(av) - int(ev)}"
        lines.append(line)
    if n_bad > len(coords):
        lines.append(f"  ... and {n_bad - len(coords)} more")
    raise BitMismatch("\n".join(lines))


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
        max_examples=60 * CI_EXAMPLE_SCALE,
        print_blob=True,
        suppress_health_check=[HealthCheck.too_slow],
    )
    settings.register_profile(
        "dev",
        deadline=None,
        max_examples=100,
        suppress_health_check=[HealthCheck.too_slow],
    )
    profile = _selected_profile()
    settings.load_profile(profile)
    return profile


def check_kernel(target, /, fmt: str = "marlin", *, kernel: str | None = None, launch=None, **options):
    """Check ``target`` bit for bit against refsim's emulator of ``fmt``: pinned regime-covering
    cases, then seeded draws; on a mismatch a shrunk case, a diagnosis mapped onto the kernel's
    structure, the first elements in hex with ULP distances and a ``rebuild_case({...})`` line.

    ``target``: any callable taking the format's NumPy inputs and returning its output array, or
    the path of a CUDA source (``.cu``) or PTX file (``.ptx``): that file is compiled (nvcc from the
    ``cuda`` extra, cached), and its ``.entry`` named by ``kernel=`` runs through :mod:`refsim.ptx` on
    the CPU, launched as ``launch(*inputs)`` describes (a function returning a
    :class:`refsim.cuda.LaunchPlan`: grid, block, ``.param`` arguments, the output array);
    see :func:`refsim.cuda.user_kernel`. ``fmt``: 'marlin', 'anyprec', 'atom', 'mixed_2_4_16',
    'mma_m16n8k16', 'mma_m16n8k16_f16', 'mma_s4'. Options (``arch``, ``sms``, ``seed``,
    ``max_examples``, ``shapes``, ``max_size``, ``cases``, ``save_failures``, ``deadline``,
    ``shrink``, ``shrink_budget``, ``diagnose_budget``, ``progress``) and the result:
    :func:`refsim.emulator.harness.check_kernel`; docs/harness.md.
    """
    from refsim.emulator.harness import check_kernel as _check_kernel  # harness imports this module

    return _check_kernel(_source_kernel(target, kernel, launch, options.get("arch", "sm_80")), fmt, **options)


def _source_kernel(target, entry, launch, arch):
    """``target`` itself when it is a callable; a ``.cu``/``.ptx`` path as a callable through refsim.ptx."""
    from pathlib import Path

    from refsim.errors import FormatRuleError

    if isinstance(target, (str, Path)):
        if entry is None or launch is None:
            raise FormatRuleError(f"kernel: a CUDA/PTX source ({str(target)!r}) needs kernel= (its .entry name) "
                                  f"and launch= (inputs -> refsim.cuda.LaunchPlan); got kernel={entry!r}, "
                                  f"launch={launch!r}")
        from refsim.cuda import user_kernel

        return user_kernel(target, kernel=entry, launch=launch, arch=arch)
    if entry is not None or launch is not None:
        raise FormatRuleError(f"kernel=/launch=: only for a CUDA/PTX source path; got a {type(target).__name__}")
    return target


def rebuild_case(case: dict) -> tuple:
    """The input arrays of a case printed by :func:`check_kernel` (its ``rebuild_case({...})``
    line): a tuple of NumPy arrays in the kernel's call order, the same bits on every machine.
    See :func:`refsim.emulator.harness.rebuild_case`."""
    from refsim.emulator.harness import rebuild_case as _rebuild_case

    return _rebuild_case(case)
