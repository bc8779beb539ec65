"""check_kernel on the W4A16 GEMV of GPTQ (v1 and v2 zero points, act-order) and AWQ checkpoints:
independent ports pass, each realistic bug is caught on a pinned case and named by the diagnosis,
and accuracy mode tells another legitimate summation order from a bug."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from refsim.formats import awq, gptq
from refsim.testing import harness, rebuild_case

_spec = importlib.util.spec_from_file_location("harness_bug_kernels", Path(__file__).parents[1] / "harness_bug_kernels.py")
bugs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bugs)

QUIET = {"progress": False}
PORTS = {"gptq": bugs.gptq_port, "gptq_v2": lambda *i, **kw: bugs.gptq_port(*i, v2=True, **kw), "awq": bugs.awq_port}


@pytest.mark.slow
@pytest.mark.parametrize("fmt", sorted(PORTS))
def test_an_independent_port_passes_with_default_settings(fmt):
    res = harness.check_kernel(PORTS[fmt], fmt, seed=0, **QUIET)
    assert res.pinned >= 4 and res.drawn == 20
    assert ("act-order g_idx (groups scattered over K)" in res.regimes) == (fmt != "awq")


def test_the_cases_are_the_checkpoints_the_format_modules_read():
    case = {"fmt": "gptq", "m": 2, "k": 256, "n": 64, "group_size": 64, "act_order": True, "kind": "normal", "seed": 3}
    x, qweight, qzeros, scales, g_idx = rebuild_case(case)
    ck = gptq.GPTQCheckpoint(qweight, qzeros, scales, g_idx, 4, "gptq")
    q, s, z, g = gptq.unpack(ck)
    assert x.shape == (2, 256) and q.shape == (256, 64) and s.shape == (4, 64)
    assert sorted(np.bincount(g).tolist()) == [64] * 4 and not np.array_equal(g, np.arange(256) // 64)
    assert z.min() >= 1                                     # v1 stores zero - 1: a zero of 0 cannot be stored
    x, qweight, qzeros, scales = rebuild_case({**case, "fmt": "awq", "act_order": False})
    assert awq.AWQCheckpoint(qweight, qzeros, scales, 64).group_size == 64


GPTQ_BUGS = [
    # (format, bug switched on in the port, words the verdict must contain)
    ("gptq", {"zero_plus_one": False}, "verdict: zero point off by one: the kernel's output equals refsim's emulation "
                                       "with qzeros read without the +1"),
    ("gptq_v2", {"zero_plus_one": True}, "verdict: zero point off by one"),
    ("gptq", {"rows_reversed": True}, "verdict: nibble order"),
    ("gptq", {"ignore_g_idx": True}, "verdict: act-order: the kernel's output equals refsim's emulation with g_idx "
                                     "ignored"),
    ("gptq", {"group_per_slab": True}, "verdict: group index: the kernel's output equals refsim's emulation with "
                                       "g_idx read once per slab"),
    ("gptq", {"accumulate": "fp16"}, "verdict: fp16 accumulation"),
    ("awq", {"interleave_ignored": True}, "verdict: nibble order: the kernel's output equals refsim's emulation with "
                                          "AWQ's interleave ignored"),
    ("awq", {"zero_plus_one": True}, "verdict: zero point off by one"),
]


@pytest.mark.parametrize("fmt, bug, verdict", GPTQ_BUGS, ids=[f"{f}-{next(iter(b))}" for f, b, _ in GPTQ_BUGS])
def test_a_bug_is_caught_on_a_pinned_case_and_named(fmt, bug, verdict):
    def kernel(*inputs):
        return PORTS[fmt](*inputs, **bug)

    with pytest.raises(harness.KernelMismatch) as info:
        harness.check_kernel(kernel, fmt, seed=0, **QUIET)
    assert "on pinned case" in str(info.value)
    with pytest.raises(harness.KernelMismatch) as replay:         # the printed case, an unexhaustible budget
        harness.check_kernel(kernel, fmt, cases=[info.value.case], diagnose_budget=600, **QUIET)
    line = next(x for x in str(replay.value).splitlines() if x.startswith("  verdict:"))
    assert verdict in line, str(replay.value)


@pytest.mark.slow
def test_another_legitimate_order_fails_bitexact_but_passes_accuracy_mode():
    def chain(*inputs):
        return bugs.gptq_port(*inputs, accumulate="fp32_chain")

    with pytest.raises(harness.KernelMismatch) as info:
        harness.check_kernel(chain, "gptq", seed=0, diagnose_budget=600, **QUIET)
    assert "verdict: another legitimate order (check it with mode='accuracy')" in str(info.value)
    res = harness.check_kernel(chain, "gptq", seed=0, mode="accuracy", accumulation="fp32", order="sequential", **QUIET)
    assert res.mode == "accuracy" and 0 < res.worst_ratio <= 1
    assert 0 < res.bit_differ < res.outputs
    assert "within the bound of fp32 accumulation in sequential order everywhere" in res.summary()
    assert f"bit-exact with refsim's order: no, {res.bit_differ} of {res.outputs} outputs differ" in res.summary()


@pytest.mark.slow
def test_accuracy_mode_holds_a_kernel_to_the_accumulation_it_states():
    # slab partials added in an fp16 accumulator: stating fp32 fails on a pinned case (accuracy mode
    # pins data with exponents over 21 binades), stating fp16 in any order passes
    def fp16_acc(*inputs):
        return bugs.gptq_port(*inputs, accumulate="fp16")

    with pytest.raises(harness.KernelMismatch) as info:
        harness.check_kernel(fp16_acc, "gptq", seed=0, mode="accuracy", accumulation="fp32", diagnose_budget=600,
                             **QUIET)
    msg = str(info.value)
    assert "leaves the error bound of its accumulation" in msg and "on pinned case" in msg
    assert "accuracy mode: fp32 accumulation in sequential order" in msg and "outside the bound" in msg
    assert "bit-exact with refsim's order: no" in msg and "verdict: fp16 accumulation" in msg
    res = harness.check_kernel(fp16_acc, "gptq", seed=0, mode="accuracy", accumulation="fp16", order="any", **QUIET)
    assert res.bit_differ > 0 and res.worst_ratio <= 1
    design = harness.check_kernel(bugs.gptq_port, "gptq", seed=0, mode="accuracy", accumulation="fp16", **QUIET)
    assert design.bit_differ == 0 and "bit-exact with refsim's order: yes, every output" in design.summary()


def test_accuracy_mode_still_catches_and_names_a_layout_bug():
    def swapped(*inputs):
        return bugs.awq_port(*inputs, interleave_ignored=True)

    with pytest.raises(harness.KernelMismatch) as info:
        harness.check_kernel(swapped, "awq", seed=0, mode="accuracy", diagnose_budget=600, **QUIET)
    msg = str(info.value)
    assert "outside the bound" in msg and "verdict: nibble order" in msg


def test_act_order_needs_groups():
    with pytest.raises(harness.FormatRuleError, match="act_order: needs groups"):
        harness.check_kernel(bugs.gptq_port, "gptq", shapes=[{"m": 1, "k": 32, "n": 32, "group_size": None,
                                                             "act_order": True}], **QUIET)
