"""The hostile fuzz finds each failure class when a fix is put back.

Each test removes one fix (monkeypatching the validator, or the validator step, that made the
class disappear) and runs :func:`fuzz_engine.fuzz_function` on a function the fix protects,
restricted to the variants that matter (so each test takes about a second). The fuzz must then
report that class for that function; with the fix in place test_fuzz_hostile.py shows it does
not. The forked children of the fuzz inherit the monkeypatched module state.

Two engine checks use functions written here: a segfault and a hang inside C code (SIGALRM
blocked), which the in-process alarm cannot see, are found by the parent process.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent / "fuzz"))  # the fuzz engine
from fuzz_api import hostile_targets  # noqa: E402
from fuzz_engine import (CRASH, DEPENDENT, FOREIGN, HANG, LEAK, MISNAMED, MODIFIED, Seed, call,  # noqa: E402
                         fuzz_function)
from fuzz_seeds import SEEDS  # noqa: E402

from refsim import _validate  # noqa: E402
from refsim.arith import mma_steps  # noqa: E402
from refsim.errors import FormatRuleError  # noqa: E402
from refsim.formats import qigen as qigen_format, stripes, uniform  # noqa: E402

TARGETS = hostile_targets()


def classes_found(name: str, labels: set[str], seed=None, seconds: float = 10.0) -> dict[str, list[str]]:
    """``{class: [finding, ...]}`` of the fuzz of ``name`` (from ``seed``, default its legal call in
    fuzz_seeds) over the variants labelled ``labels``."""
    report = fuzz_function(name, TARGETS[name], seed or SEEDS[name](), select_variant=lambda v: v.label in labels,
                           seconds=seconds)
    assert report.calls > 0, f"no variant of {name} is labelled {labels}"
    found: dict[str, list[str]] = {}
    for f in report.findings:
        found.setdefault(f.cls, []).append(str(f))
    return found


def test_foreign_exception_when_uniform_stops_refusing_an_empty_matrix(monkeypatch):
    # the fix: K = 0 is refused by name (check_weights' row rule, and check_granularity's K >= 1);
    # without both a per-channel quantize divides by zero
    per_channel = call(np.ones((8, 4), np.float32), 4)
    assert not classes_found("refsim.formats.uniform.quantize", {"empty rows"}, per_channel)
    monkeypatch.setattr(uniform, "_require_rows", lambda w: w)
    monkeypatch.setattr(uniform, "check_granularity", lambda k, granularity, group_size: k)
    found = classes_found("refsim.formats.uniform.quantize", {"empty rows"}, per_channel)
    assert FOREIGN in found and "ZeroDivisionError" in found[FOREIGN][0], found


def test_hang_or_huge_allocation_when_arrays_are_not_sized_before_use(monkeypatch):
    # the fix: require_array refuses more than MAX_ELEMENTS elements from the shape alone; without
    # it the reference quantizer materialises a 2**36-element zero-stride view
    monkeypatch.setattr(_validate, "MAX_ELEMENTS", 1 << 62)
    found = classes_found("refsim.formats.uniform.quantize_reference", {"huge view"})
    assert HANG in found, found


def test_layout_dependent_result_when_the_checked_array_is_not_the_one_used(monkeypatch):
    # the fix: qigen.pack packs the array its check returns (native byte order), not the caller's
    # (a '>i4' qweight gave '>i4' words, as bitplane.unpack read swapped bytes)
    monkeypatch.setattr(qigen_format, "_check_qweight", lambda qweight, layout: qweight)
    found = classes_found("refsim.formats.qigen.pack", {"big-endian"})
    assert DEPENDENT in found, found


def test_scalar_type_leak_when_records_keep_numpy_scalars(monkeypatch):
    # the fix: record dataclasses convert their fields to Python ints (TileConfig(np.uint8(128), ...)
    # kept the uint8, whose arithmetic wraps)
    monkeypatch.setattr(stripes, "require_fields", lambda obj: None)
    found = classes_found("refsim.formats.stripes.TileConfig", {"uint8", "int64"})
    assert LEAK in found, found


def test_scalar_type_leak_when_subclasses_pass_through(monkeypatch):
    # the fix: require_array takes an ndarray subclass as a plain ndarray view
    monkeypatch.setattr(_validate, "plain_ndarray", lambda x: x)
    found = classes_found("refsim.formats.bitplane.dequantize", {"subclass"})
    assert LEAK in found, found


def test_input_modified_when_byte_order_is_normalised_in_place(monkeypatch):
    # the fix: native_byte_order copies; swapping the caller's bytes in place gives the right
    # result and leaves the caller's array reading other values
    def in_place(x):
        if x.dtype.isnative:
            return x
        x.byteswap(inplace=True)
        return x.view(x.dtype.newbyteorder("="))

    monkeypatch.setattr(_validate, "native_byte_order", in_place)
    found = classes_found("refsim.formats.bitplane.unpack", {"big-endian"})
    assert MODIFIED in found and DEPENDENT not in found, found


def test_misnamed_error_when_non_finite_input_is_caught_late(monkeypatch):
    # the fix: NaN/Inf in w is a NonFiniteError up front; without it the zero-scale check refuses
    # the NaN scale with a FormatRuleError that does not say what is wrong
    monkeypatch.setattr(uniform, "require_finite", lambda name, x: x)
    found = classes_found("refsim.formats.uniform.quantize", {"nan at [0]", "inf at [0]"})
    assert MISNAMED in found, found


def test_foreign_exception_when_a_raw_fast_path_takes_unchecked_arrays(monkeypatch):
    # the fix: mma_k16_f32 checks its operand arrays before any arithmetic; without it None or a
    # string reaches NumPy indexing
    monkeypatch.setattr(mma_steps, "_check_k16", lambda *operands: operands)
    found = classes_found("refsim.arith.mma_steps.mma_k16_f32", {"None", "str 'x'"})
    assert FOREIGN in found, found


# ---- the engine: what the in-process alarm cannot see ------------------------------------------
def _segfault_on_zero(n: int) -> int:
    """int n >= 1 returned; 0 kills the process the way a native out-of-bounds read does."""
    if n == 0:
        os.kill(os.getpid(), signal.SIGSEGV)
    return n


def _stuck_on_zero(n: int) -> int:
    """0 blocks SIGALRM and sleeps: a loop inside C code, which never returns to Python."""
    if n == 0:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
        time.sleep(3600)
    return n


def test_a_crash_is_a_finding_and_the_fuzz_goes_on():
    report = fuzz_function("segfault_on_zero", _segfault_on_zero, call(5),
                           select_variant=lambda v: v.label in ("0", "v+1", "-1"))
    crashes = [f for f in report.findings if f.cls == CRASH]
    assert [f.label for f in crashes] == ["0"] and "signal 11" in crashes[0].detail, report.findings


@pytest.mark.slow
def test_a_hang_inside_c_code_is_killed_and_reported():
    report = fuzz_function("stuck_on_zero", _stuck_on_zero, call(5),
                           select_variant=lambda v: v.label in ("0", "v+1"), seconds=0.5, retry_hangs=False)
    assert [(f.cls, f.label) for f in report.findings] == [(HANG, "0")], report.findings
    assert "killed" in report.findings[0].detail


def test_a_legal_numpy_integer_refused_is_a_width_dependent_result():
    def python_ints_only(n):
        if type(n) is not int:
            raise FormatRuleError(f"n: must be a Python int; got {n!r}")
        return n

    report = fuzz_function("python_ints_only", python_ints_only, call(5),
                           select_variant=lambda v: v.label in ("int64", "uint8"))
    assert {(f.cls, f.label) for f in report.findings} == {(DEPENDENT, "int64"), (DEPENDENT, "uint8")}


class _Record:
    """A plain record class (no dataclass) of refsim's: the fuzz compares it by its attributes."""

    __module__ = "refsim.fuzz_record"

    def __init__(self, n):
        self.n = n


def test_a_numpy_scalar_inside_a_plain_record_is_a_scalar_type_leak():
    report = fuzz_function("record_of", _Record, call(5), select_variant=lambda v: v.label in ("int64", "uint8"))
    assert {(f.cls, f.label) for f in report.findings} == {(LEAK, "int64"), (LEAK, "uint8")}, report.findings


def test_a_seed_view_leaves_measured_parts_of_a_result_out_of_the_comparison():
    def timed(n):
        return n, time.perf_counter()                # a result and the time it was made

    pick = dict(select_variant=lambda v: v.label == "int64")
    assert [f.cls for f in fuzz_function("timed", timed, call(5), **pick).findings] == [DEPENDENT]
    assert not fuzz_function("timed", timed, Seed((5,), view=lambda r: int(r[0])), **pick).findings
