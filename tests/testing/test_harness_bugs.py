"""Realistic kernel bugs, each caught by check_kernel with default settings (seeded for a
deterministic suite), with the diagnosis naming the bug class; and a correct port passing.
Timed per case in bench/bench_harness.py."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from refsim.testing import harness

_spec = importlib.util.spec_from_file_location("harness_bug_kernels", Path(__file__).with_name("harness_bug_kernels.py"))
bugs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bugs)

_SLOW = pytest.mark.slow   # the diagnosis replays other SM counts / reduction orders: seconds each
MARLIN_BUGS = [
    # (bug switched on in the port, words the verdict must contain)
    pytest.param({"sms": 72}, "verdict: partition", marks=_SLOW, id="sms"),
    pytest.param({"reduce_assoc": "left"}, "thread_block_reduce's association", marks=_SLOW, id="reduce_assoc"),
    pytest.param({"global_fp32": True}, "the global reduction", id="global_fp32"),
    pytest.param({"last_scale_from_previous": True}, "group 1's scales taken from group 0",
                 id="last_scale_from_previous"),
    pytest.param({"nibbles_swapped": True}, "verdict: nibble order", id="nibbles_swapped"),
    pytest.param({"fp32_accumulate": True}, "the accumulation inside one mma", marks=_SLOW, id="fp32_accumulate"),
]


def _verdict(err):
    return next(x for x in str(err).splitlines() if x.startswith("  verdict:"))


@pytest.mark.slow
def test_correct_marlin_port_passes_with_default_settings():
    res = harness.check_kernel(lambda A, B, s: bugs.marlin_port(A, B, s), "marlin", sms=108, seed=0, progress=False)
    assert res.pinned + res.drawn >= 12


@pytest.mark.parametrize("bug, verdict", MARLIN_BUGS)
def test_marlin_bug_is_caught_with_default_settings(bug, verdict):
    def kernel(A, B, s):
        return bugs.marlin_port(A, B, s, **bug)

    with pytest.raises(harness.KernelMismatch) as info:
        harness.check_kernel(kernel, "marlin", sms=108, seed=0, progress=False)
    assert "on pinned case" in str(info.value)                      # caught whatever the seed's data
    # the diagnosis, replayed on the printed case with a budget no machine load can exhaust (the
    # default 10 s is wall time: under a loaded -n 2 run the replays of other SM counts can run out)
    with pytest.raises(harness.KernelMismatch) as replay:
        harness.check_kernel(kernel, "marlin", sms=108, cases=[info.value.case], diagnose_budget=600,
                             progress=False)
    assert verdict in _verdict(replay.value), str(replay.value)


def test_anyprec_fp32_partials_are_caught():
    with pytest.raises(harness.KernelMismatch) as info:
        harness.check_kernel(bugs.anyprec_fp32_partials, "anyprec", seed=0, progress=False)
    assert "verdict: how a lane adds its chunk partials" in str(info.value), str(info.value)


def test_mixed_2_4_16_double_rounding_of_outliers_is_caught_and_located():
    with pytest.raises(harness.KernelMismatch) as info:
        harness.check_kernel(bugs.mixed_outliers_after_rounding, "mixed_2_4_16", seed=0, progress=False)
    msg = str(info.value)
    assert "outlier values zeroed (dense part only): 0" in msg      # the dense part is right
    assert "outliers in the row: only" in msg                       # rows without outliers never differ
    assert "verdict: the outlier SpMV epilogue" in msg


def test_mma_fp32_chain_is_caught_in_one_block():
    with pytest.raises(harness.KernelMismatch) as info:
        harness.check_kernel(bugs.mma_fp32_chain, "mma_m16n8k16", seed=0, progress=False)
    assert "register c" in str(info.value) and "ULP" in str(info.value)


def test_atom_fp32_scale_product_is_caught_in_one_group():
    with pytest.raises(harness.KernelMismatch) as info:
        harness.check_kernel(bugs.atom_fp32_scale_product, "atom", seed=0, progress=False)
    assert "verdict: one group: the two s4 mma (exact) and its epilogue" in str(info.value)
