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


# ----------------------------------------------------------------------------------------------
# accuracy mode: a precision bug fails whatever the seed, a legitimate split-K passes, and the
# diagnosis speaks about the kernel's own case data

_ACC = {"mode": "accuracy", "accumulation": "fp32", "max_examples": 2, "progress": False}


@pytest.mark.parametrize("seed", range(5))
def test_a_split_k_gemv_whose_cross_warp_sum_is_fp16_fails_accuracy_mode_for_every_seed(seed):
    with pytest.raises(harness.KernelMismatch) as info:
        harness.check_kernel(lambda *i: bugs.gptq_port(*i, accumulate="split_k_fp16"), "gptq", seed=seed, **_ACC)
    assert _verdict(info.value) == ("  verdict: the weights are right; the difference is in the accumulation "
                                    "(its precision or its order)")
    assert "slab" not in str(info.value) and "chains" not in str(info.value)


def test_the_adversarial_cases_catch_a_precision_bug_that_typical_data_hides():
    def kernel(*inputs):                  # the fp16 cross-warp sum only for activations of 512 and more
        big = float(abs(inputs[0].astype(float)).max()) >= 512
        return bugs.gptq_port(*inputs, accumulate="split_k_fp16" if big else "split_k_fp32")

    with pytest.raises(harness.KernelMismatch) as info:
        harness.check_kernel(kernel, "gptq", seed=0, **_ACC)
    msg = str(info.value)
    assert "on adversarial case 1 of 5 (large_first_term)" in msg
    assert "rebuild: refsim.testing.adversarial.inputs('gptq', 'large_first_term')" in msg


@pytest.mark.parametrize("seed", range(2))
def test_a_split_k_gemv_that_adds_its_warps_in_fp32_passes_accuracy_mode(seed):
    res = harness.check_kernel(lambda *i: bugs.gptq_port(*i, accumulate="split_k_fp32"), "gptq", seed=seed, **_ACC)
    assert res.adversarial == 5 and res.spread.passed
    assert res.spread.kernel_rms <= 1.25 * res.spread.reference_rms


def test_an_act_order_bug_is_diagnosed_by_the_act_order_field():
    def kernel(*inputs):                          # g_idx ignored, in a split-K kernel (not refsim's design)
        return bugs.gptq_port(*inputs, ignore_g_idx=True, accumulate="split_k_fp32")

    with pytest.raises(harness.KernelMismatch) as info:
        harness.check_kernel(kernel, "gptq", seed=0, shrink_budget=30, **_ACC)
    msg = str(info.value)
    assert "act_order: fails with True; passes with False" in msg
    assert _verdict(info.value).startswith("  verdict: only cases with act_order = True fail (act_order = False pass)")
    assert "slab" not in msg


def test_exact_weights_in_another_order_are_diagnosed_as_accumulation_in_bitexact_mode():
    # four warps of 1024 rows each: not one fp32 chain at K = 4096 (at small K the two often round to
    # the same fp16 output, and the bug class "another legitimate order" replays the kernel)
    case = {"fmt": "gptq", "m": 1, "k": 4096, "n": 32, "group_size": None, "act_order": False, "kind": "normal",
            "seed": 0}
    with pytest.raises(harness.KernelMismatch) as info:
        harness.check_kernel(lambda *i: bugs.gptq_port(*i, accumulate="split_k_fp32"), "gptq", cases=[case],
                             shrink=False, progress=False)
    msg = str(info.value)
    assert "about your kernel (no known bug class reproduces its bits" in msg
    assert "the weights the kernel used are right" in msg
    assert _verdict(info.value) == ("  verdict: the weights are right; the difference is in the accumulation "
                                    "(its precision or its order)")
