"""Accuracy mode's bound (refsim.testing.accuracy): the formula against a hand evaluation in exact
rationals, its edges (overflow, NaN, underflow), and refsim's own emulators passing under the
accumulation each one truly performs."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from refsim.arith.admissible import AdmissibleSet
from refsim.errors import FormatRuleError
from refsim.testing import harness
from refsim.testing.accuracy import FACTOR, FLOOR, Accumulation, judge, reference, spread
from refsim.testing.cases import FORMATS, Linear

U16, U32, ETA = Fraction(1, 2**11), Fraction(1, 2**24), Fraction(1, 2**25)


def _hand_bound(a, w, u, d, pre, post, terms, fp16_acc):
    """B of the docstring of refsim.testing.accuracy, written out again for one output."""
    prods = [Fraction(float(x)) * Fraction(float(y)) for x, y in zip(a, w)]
    S, P = sum(prods), sum(abs(p) for p in prods)
    cof = sum(abs(Fraction(float(x))) for x in a)
    e_pre = ((1 + U16) ** pre - 1) * P + pre * (1 + U16) ** pre * ETA * cof
    e_acc = ((1 + u) ** d - 1) * (P + e_pre) + (terms * ETA if fp16_acc else 0)
    return S, e_pre + e_acc + ((1 + U16) ** post - 1) * (abs(S) + e_pre + e_acc) + post * (1 + U16) ** post * ETA


def test_the_bound_admits_both_fp16_neighbours_of_a_tie_and_nothing_further():
    # S = 1 + 2^-11 lies halfway between the fp16 values 1 and 1 + 2^-10: both are within B, 1 + 2^-9 is not
    lin = Linear(np.array([[1.0, 2.0**-11]]), np.array([[1.0], [1.0]]), terms=2)
    S, B = _hand_bound([1.0, 2.0**-11], [1.0, 1.0], U32, 2, 0, 1, 2, False)
    assert S == 1 + Fraction(1, 2**11) and Fraction(1, 2**11) < B < Fraction(3, 2**11)
    y = np.array([[1.0], [1.0 + 2.0**-10], [1.0 + 2.0**-9]], np.float16).reshape(3, 1)
    outside = [bool(judge(Accumulation("fp32"), lin, y[i:i + 1]).outside[0, 0]) for i in range(3)]
    assert outside == [False, False, True]


@pytest.mark.parametrize("acc", [Accumulation("fp32", "sequential"), Accumulation("fp16", "pairwise"),
                                 Accumulation("fp32", "any")])
def test_float64_verdicts_equal_the_exact_rational_formula(acc):
    rng = np.random.default_rng(5)
    k, n = 48, 6
    a = rng.standard_normal((1, k)).astype(np.float16).astype(np.float64)
    w = (rng.integers(-8, 8, (k, n)) * rng.random((1, n)).astype(np.float16)).astype(np.float64)
    lin = Linear(a, w, terms=k, pre=1)
    d = acc.depth(k)
    assert d == (k if acc.order != "pairwise" else 7)                      # ceil(log2 48) + 1
    u = U32 if acc.dtype == "fp32" else U16
    exact = [_hand_bound(a[0], w[:, j], u, d, 1, 1, k, acc.dtype == "fp16") for j in range(n)]
    # outputs placed just inside and just outside each bound (by a margin far above float64 noise)
    for side, want in ((Fraction(999, 1000), False), (Fraction(1001, 1000), True)):
        y = np.array([[float(S + side * B) for S, B in exact]])
        y16 = y.astype(np.float16)
        truth = [abs(Fraction(float(v)) - S) > B for v, (S, B) in zip(y16[0], exact)]
        assert judge(acc, lin, y16).outside[0].tolist() == truth
        assert any(t == want for t in truth)                                 # the placement worked somewhere


def test_infinity_is_admitted_only_where_the_sum_can_round_to_it():
    lin = Linear(np.array([[60000.0, 5500.0]]), np.array([[1.0], [1.0]]), terms=2)     # S = 65500
    assert not judge(Accumulation("fp32"), lin, np.array([[np.inf]], np.float16)).outside[0, 0]   # S + B >= 65520
    assert judge(Accumulation("fp32"), lin, np.array([[-np.inf]], np.float16)).outside[0, 0]
    below = Linear(np.array([[60000.0, 5000.0]]), np.array([[1.0], [1.0]]), terms=2)   # S = 65000: rounds to 64992
    assert judge(Accumulation("fp32"), below, np.array([[np.inf]], np.float16)).outside[0, 0]
    small = Linear(np.array([[1.0, 2.0]]), np.array([[1.0], [1.0]]), terms=2)
    assert judge(Accumulation("fp32"), small, np.array([[np.inf]], np.float16)).outside[0, 0]
    assert judge(Accumulation("fp16"), small, np.array([[np.nan]], np.float16)).outside[0, 0]
    big = Linear(np.array([[60000.0, -60000.0]]), np.array([[1.0], [1.0]]), terms=2)   # partial sums near overflow
    assert not judge(Accumulation("fp16"), big, np.array([[np.nan]], np.float16)).outside[0, 0]
    assert judge(Accumulation("fp32"), big, np.array([[np.nan]], np.float16)).outside[0, 0]


def test_a_subnormal_output_is_judged_with_the_absolute_allowance():
    # S = 2^-25 is a tie between the fp16 subnormals 0 and 2^-24: both within B (eta = 2^-25 per
    # rounding), 2^-23 is not
    lin = Linear(np.array([[2.0**-12]]), np.array([[2.0**-13]]), terms=1)
    got = [bool(judge(Accumulation("fp32"), lin, np.array([[v]], np.float16)).outside[0, 0])
           for v in (0.0, 2.0**-24, 2.0**-23)]
    assert got == [False, False, True]


TRUTHFUL = [("marlin", "fp16", "any"), ("anyprec", "fp16", "pairwise"), ("mixed_2_4_16", "fp16", "any"),
            ("atom", "fp32", "sequential"), ("gptq_v2", "fp16", "any"), ("awq", "fp16", "pairwise")]


def _emulator_as_kernel(spec):
    """refsim's emulator as a kernel: its output array (a set-valued launch, e.g. an Any-Precision K-split:
    the member refsim computes in ascending order)."""
    def kernel(*inputs):
        out = spec.emulate(inputs, "sm_80", 108)
        return out.reference if isinstance(out, AdmissibleSet) else out
    return kernel


@pytest.mark.parametrize("fmt, dtype, order", TRUTHFUL)
def test_refsims_own_emulator_passes_under_the_accumulation_it_performs(fmt, dtype, order):
    spec = FORMATS[fmt]
    res = harness.check_kernel(_emulator_as_kernel(spec), fmt, seed=0, mode="accuracy",
                               accumulation=dtype, order=order, max_examples=2, max_size=1 << 20, progress=False)
    assert res.bit_differ == 0 and 0 < res.worst_ratio <= 1


@pytest.mark.parametrize("fmt", ["mma_m16n8k16", "mma_m16n8k16_f16", "mma_s4"])
def test_accuracy_mode_is_refused_before_any_case_where_it_has_no_meaning(fmt):
    def never(*a):
        raise AssertionError("the kernel must not be called")

    with pytest.raises(FormatRuleError, match="compare its bits"):
        harness.check_kernel(never, fmt, mode="accuracy", progress=False)


@pytest.mark.parametrize("kwargs, rule", [({"mode": "close"}, "mode: must be one of"),
                                          ({"mode": "accuracy", "accumulation": "bf16"}, "accumulation: must be one of"),
                                          ({"mode": "accuracy", "order": "kahan"}, "order: must be one of")])
def test_bad_accuracy_arguments_are_named(kwargs, rule):
    with pytest.raises(FormatRuleError, match=rule):
        harness.check_kernel(lambda *a: None, "gptq", progress=False, **kwargs)


def test_a_statement_stronger_than_the_kernels_arithmetic_fails_and_says_so():
    # Any-Precision sums in fp16: stated as an fp32 accumulation it leaves the bound on a pinned case
    spec = FORMATS["anyprec"]
    with pytest.raises(harness.KernelMismatch) as info:
        harness.check_kernel(_emulator_as_kernel(spec), "anyprec", seed=0, mode="accuracy",
                             accumulation="fp32", progress=False)
    msg = str(info.value)
    assert "on pinned case" in msg and "bit-exact with refsim's order: yes, 0 of" in msg
    assert "verdict: the kernel computes what refsim's emulator computes" in msg


def test_reference_runs_the_stated_accumulation_as_written():
    # terms 1, 2^-11, 2^-11 (weights 1): an fp16 chain loses each 2^-11 next to 1 (ties to even); an
    # fp32 chain keeps both (1 + 2^-10 exactly); a pairwise fp16 tree ((1 + 0) + (2^-11 + 2^-11)) keeps them too
    lin = Linear(np.array([[1.0, 2.0**-11, 2.0**-11]]), np.ones((3, 1)), terms=3)
    assert reference(Accumulation("fp16"), lin)[0, 0] == np.float16(1.0)
    assert reference(Accumulation("fp32"), lin)[0, 0] == np.float16(1.0 + 2.0**-10)
    tree = Linear(np.array([[1.0, 0.0, 2.0**-11, 2.0**-11]]), np.ones((4, 1)), terms=4)
    assert reference(Accumulation("fp16", "pairwise"), tree)[0, 0] == np.float16(1.0 + 2.0**-10)
    assert reference(Accumulation("fp16", "sequential"), tree)[0, 0] == np.float16(1.0)
    # a weight dequantized to fp16 (pre=1) is rounded once before the sum: 1 + 2^-12 -> 1
    pre = Linear(np.array([[1.0]]), np.array([[1.0 + 2.0**-12]]), terms=1, pre=1)
    assert reference(Accumulation("fp32"), pre)[0, 0] == np.float16(1.0)


def test_spread_passes_within_the_factor_and_names_both_numbers():
    ref = np.array([0.1, 0.2, 0.3, 0.4])
    same = spread(ref, ref)
    assert same.passed and same.kernel_rms == same.reference_rms == pytest.approx(np.sqrt(0.075))
    assert same.kernel_p99 == same.reference_p99 == 0.4
    worse = spread(ref * (FACTOR + 0.01), ref)
    assert not worse.passed
    line = worse.describe(Accumulation("fp32"))
    assert f"kernel RMS {worse.kernel_rms:.3g}" in line and f"RMS {worse.reference_rms:.3g}" in line
    assert f"allowed: {FACTOR:g}x these" in line
    # errors no larger than FLOOR never fail, even against an exact reference; non-finite pairs are left out
    assert spread(np.full(4, FLOOR), np.zeros(4)).passed and not spread(np.full(4, 2 * FLOOR), np.zeros(4)).passed
    assert spread(np.array([np.inf, 0.1]), np.array([0.0, 0.1])).outputs == 1
