"""refsim.testing.runner: one guarded kernel call on a trivial in-process "kernel" (y = a + b in float16).

The kernel gets copies of its inputs; an input it wrote to fails the call naming the input and the first
changed element in hex; a raise, a ``sys.exit``, a deadline overrun or an output of the wrong type, dtype or
shape each fail with their own class and the case's rebuild line; ``differs`` compares raw bits (so -0.0
and 0.0 differ, one NaN equals itself), or membership for an admissible set. Worked by hand.
"""

from __future__ import annotations

import sys
import time
from types import SimpleNamespace

import numpy as np
import pytest

from refsim.arith.admissible import AdmissibleSet
from refsim.testing.runner import (KernelCallError, KernelModifiedInput, KernelTimeout, Runner, raw_bits, snippet)

SPEC = SimpleNamespace(name="add", inputs=("a", "b"), emulate=lambda inputs, arch, sms: inputs[0] + inputs[1])
CASE = {"m": 2, "seed": 0}
INPUTS = (np.array([1.0, -2.0], np.float16), np.array([0.5, 2.0], np.float16))


def _runner(kernel, deadline=None) -> Runner:
    return Runner(kernel, SPEC, "sm_80", 4, deadline)


def test_raw_bits_and_snippet_worked_by_hand():
    assert raw_bits(np.array([1.0, -0.0], np.float16)).tolist() == [0x3C00, 0x8000]
    assert raw_bits(np.array([1.0], np.float32)).dtype == np.uint32
    assert raw_bits(np.array([-1], np.int8)).tolist() == [0xFF]
    assert snippet(SPEC, CASE) == "refsim.testing.rebuild_case({'fmt': 'add', 'm': 2, 'seed': 0})"


def test_a_correct_kernel_matches_and_a_sign_of_zero_is_a_difference():
    runner = _runner(lambda a, b: a + b)
    actual, expected, bad = runner.differs(CASE, INPUTS)
    # 1 + 0.5 = 1.5, -2 + 2 = +0.0
    assert actual.tolist() == [1.5, 0.0] and not bad.any()
    wrong = _runner(lambda a, b: np.array([1.5, -0.0], np.float16))
    _, _, bad = wrong.differs(CASE, INPUTS)
    assert bad.tolist() == [False, True]
    nan = np.array([np.nan], np.float16)
    _, _, bad = _runner(lambda a: nan.copy()).differs(CASE, (nan,), expected=nan)
    assert not bad.any()


def test_the_kernel_gets_copies_and_writing_to_an_input_is_named():
    seen = []

    def kernel(a, b):
        seen.append(a is INPUTS[0])
        b[1] = 0                         # 2.0 = 0x4000 -> 0.0 = 0x0000
        return a + b

    with pytest.raises(KernelModifiedInput, match=r"add kernel modified its input 'b' \(input 2 of 2; inputs are "
                                                  r"read-only\): 1 of 2 elements changed, first at \(1,\): "
                                                  r"0x4000 -> 0x0000") as err:
        _runner(kernel).call(CASE, INPUTS)
    assert seen == [False] and err.value.case == CASE
    assert INPUTS[1].tolist() == [0.5, 2.0]
    assert "rebuild: refsim.testing.rebuild_case({'fmt': 'add', 'm': 2, 'seed': 0})" in str(err.value)


def _raises(a, b):
    raise ValueError("boom")


def _exits(a, b):
    sys.exit(3)


@pytest.mark.parametrize("kernel, cls, what", [
    (_raises, KernelCallError, "add kernel raised ValueError: boom"),
    (_exits, KernelCallError, r"add kernel called sys.exit\(3\) \(a kernel must return its output\)"),
    (lambda a, b: [1.5, 0.0], KernelCallError, "add kernel returned list; expected a numpy.ndarray of dtype float16 "
                                               r"shape \(2,\)"),
    (lambda a, b: (a + b).astype(np.float32), KernelCallError, r"returned dtype float32 shape \(2,\)"),
    (lambda a, b: (a + b)[:1], KernelCallError, r"returned dtype float16 shape \(1,\)"),
])
def test_call_failures_are_named_with_their_case(kernel, cls, what):
    with pytest.raises(cls, match=what) as err:
        _runner(kernel).differs(CASE, INPUTS)
    assert err.value.case == CASE and "case {'m': 2, 'seed': 0}" in str(err.value)


def test_a_call_past_its_deadline_fails_as_a_timeout():
    def slow(a, b):
        time.sleep(0.3)
        return a + b

    with pytest.raises(KernelTimeout, match=r"add kernel (did not return within deadline=0.05 s|took .* > deadline=0.05 s)"):
        _runner(slow, deadline=0.05).call(CASE, INPUTS)
    assert isinstance(KernelTimeout("x"), KernelCallError)


def test_an_admissible_set_compares_by_membership_and_records_the_verdict():
    ref = np.array([1.5, 0.0], np.float16)
    other = np.array([1.5, 2.0**-24], np.float16)
    # two orders may produce either output; anything else is outside
    aset = AdmissibleSet(ref, np.stack([ref, other]), 2, "two summation orders")
    runner = _runner(lambda a, b: other.copy())
    actual, expected, bad = runner.differs(CASE, INPUTS, expected=aset)
    assert not bad.any() and expected is ref
    assert runner.admissible == ["in the admissible set of 2 orders; equal to refsim's ascending order: no"]
    runner = _runner(lambda a, b: np.array([1.0, 0.0], np.float16))
    _, _, bad = runner.differs(CASE, INPUTS, expected=aset)
    assert bad.tolist() == [True, False] and runner.admissible == ["outside the admissible set of 2 orders"]


def test_raw_bits_of_a_big_endian_array_are_the_bits_of_its_values():
    native = np.array([1.0, -2.5, 65504.0], np.float16)             # 0x3c00, 0xc100, 0x7bff
    assert raw_bits(native.astype(">f2")).tolist() == [0x3C00, 0xC100, 0x7BFF]
    assert raw_bits(np.array([1.0], ">f4")).tolist() == [0x3F800000]
    assert raw_bits(np.array(-0.0, np.float32)).shape == () and int(raw_bits(np.array(-0.0, np.float32))) == 0x80000000


def test_a_call_error_raised_without_a_case_gets_the_case_of_the_call():
    # refsim check's kernel process raises these (a deadline, an ended process) knowing no case
    def from_another_process(a, b):
        raise KernelTimeout("did not return within deadline=5.0 s (during a kernel call); its process was killed")

    with pytest.raises(KernelTimeout, match=r"^add kernel did not return within deadline=5.0 s \(during a kernel "
                                            r"call\); its process was killed\n  case \{'m': 2, 'seed': 0\}") as err:
        _runner(from_another_process).call(CASE, INPUTS)
    assert err.value.case == CASE
