"""refsim.testing.adversarial: every case is a legal input of its format with unit weights, the
stated accumulation run plainly stays within the bound on it, and the weaker accumulations the
module names leave the bound on it, each emulated here with plain NumPy scalars."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from refsim.errors import FormatRuleError
from refsim.testing import adversarial as adv
from refsim.testing.accuracy import Accumulation, judge
from refsim.testing.cases import FORMATS

_spec = importlib.util.spec_from_file_location("harness_bug_kernels", Path(__file__).with_name("harness_bug_kernels.py"))
bugs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bugs)

CASES = [(fmt, a) for fmt in adv.FORMATS for stated in ("fp32", "fp16") for a in adv.cases(fmt, stated)]
SPLITS = (2, 4, 8, 16, 32, 64)


def _sequential(x, rnd):
    """A chain s = rnd(s + x_k) over k ascending (unit weights: the terms are the activations)."""
    s = 0.0
    with np.errstate(over="ignore", invalid="ignore"):
        for v in x:
            s = float(rnd(s + float(v)))
    return s


def _split(x, slices, strided):
    """fp32 chains over ``slices`` K-slices (contiguous, or k = s mod slices), their partials
    rounded to fp16 and added in fp16 in slice order."""
    parts = [x[s::slices] if strided else x[s * len(x) // slices:(s + 1) * len(x) // slices] for s in range(slices)]
    with np.errstate(over="ignore", invalid="ignore"):
        return _sequential([np.float16(_sequential(p, np.float32)) for p in parts], np.float16)


def _bf16(v):
    """float64 -> bf16 -> float64, round to nearest even (v is always a bf16 value plus a small term here)."""
    b = np.array([v], np.float32).view(np.uint32)[0]
    b = (int(b) + 0x7FFF + ((int(b) >> 16) & 1)) >> 16 << 16
    return float(np.array([b], np.uint32).view(np.float32)[0])


def _outside(fmt, a, value):
    """Whether every output of the case set to ``value`` lies outside the stated bound."""
    spec = FORMATS[fmt]
    lin = adv.exact_weights(spec.linear(a.case, a.inputs))
    y = np.full(lin.c_shape, value, np.float16)
    return bool(judge(Accumulation(adv.SEQUENCES[a.name][0]), lin, y).outside.all())


def test_every_format_that_can_carry_the_sequences_gets_each_of_its_accumulation():
    assert adv.FORMATS == ("anyprec", "awq", "fp8_block", "fp8_channel", "gptq", "gptq_v2", "marlin", "mxfp4", "nf4",
                           "nf4_dq", "nvfp4", "q4_0", "q4_k", "q8_0")
    for fmt in adv.FORMATS:
        assert [a.name for a in adv.cases(fmt, "fp32")] == ["large_first_term", "strided_small_terms",
                                                            "many_small_addends", "alternating_signs", "near_overflow"]
        assert [a.name for a in adv.cases(fmt, "fp16")] == ["bf16_small_addends"]
    assert adv.cases("atom", "fp32") == [] and adv.cases("mixed_2_4_16", "fp16") == []


@pytest.mark.parametrize("fmt, a", CASES, ids=[f"{f}-{a.name}" for f, a in CASES])
def test_the_case_is_legal_with_unit_weights_and_the_sequence_as_activations(fmt, a):
    spec = FORMATS[fmt]
    spec.legal(a.case)
    lin = spec.linear(a.case, a.inputs)
    assert np.array_equal(lin.w, np.ones_like(lin.w))
    assert np.array_equal(lin.a, np.broadcast_to(adv.sequence(a.name), lin.a.shape))
    assert adv.exact_weights(lin).pre == 0 and lin.terms == adv.SEQUENCES[a.name][1]


@pytest.mark.parametrize("fmt, a", CASES, ids=[f"{f}-{a.name}" for f, a in CASES])
def test_the_stated_accumulation_stays_within_and_the_weaker_ones_leave_the_bound(fmt, a):
    x = adv.sequence(a.name)
    stated = adv.SEQUENCES[a.name][0]
    assert not _outside(fmt, a, _sequential(x, np.float32 if stated == "fp32" else np.float16))
    if stated == "fp16":
        assert _outside(fmt, a, _sequential(x, _bf16))
        return
    assert _outside(fmt, a, _sequential(x, np.float16))                       # every fp32 case: fp16 sequential
    if a.name == "large_first_term":
        assert all(_outside(fmt, a, _split(x, s, strided=False)) for s in SPLITS)
    if a.name == "strided_small_terms":
        assert all(_outside(fmt, a, _split(x, s, strided=True)) for s in SPLITS)


def test_the_fp16_cross_warp_sum_of_a_split_k_gemv_leaves_the_bound_on_the_adversarial_cases():
    spec = FORMATS["gptq"]
    for a in adv.cases("gptq", "fp32"):
        lin = adv.exact_weights(spec.linear(a.case, a.inputs))
        bug = judge(Accumulation("fp32"), lin, bugs.gptq_port(*a.inputs, accumulate="split_k_fp16"))
        good = judge(Accumulation("fp32"), lin, bugs.gptq_port(*a.inputs, accumulate="split_k_fp32"))
        assert not good.outside.any()
        assert bug.outside.all() == (a.name in ("large_first_term", "strided_small_terms")), a.name


def test_unknown_names_are_refused():
    with pytest.raises(FormatRuleError, match="name: must be one of"):
        adv.inputs("gptq", "random_data")
    with pytest.raises(FormatRuleError, match="fmt: must be one of"):
        adv.inputs("atom", "large_first_term")
    with pytest.raises(FormatRuleError, match="accumulation: must be one of"):
        adv.cases("gptq", "bf16")
