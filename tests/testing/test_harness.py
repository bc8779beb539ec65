"""check_kernel: argument checks before any case, pinned regime coverage, replay and rebuild,
fast failure of raising / slow / ill-typed kernels, and the report of a wrong kernel."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from refsim.emulator import anyprec_kernel as ak
from refsim.emulator.atom_kernel import atom_group_gemm
from refsim.testing import harness
from refsim.emulator import marlin_kernel as mk
from refsim.arith import integer_mma, tensor_core as tc
from refsim.errors import FormatRuleError, RefsimError
from refsim.formats import atom, marlin, stripes
from refsim.testing import rebuild_case, examples

_spec = importlib.util.spec_from_file_location("harness_bug_kernels", Path(__file__).with_name("harness_bug_kernels.py"))
bugs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bugs)

QUIET = {"progress": False}


def _never_called(*args):
    raise AssertionError("the kernel must not be called")


@pytest.mark.parametrize("kwargs, rule", [
    ({"sms": 0}, "sms: must be >= 1"),
    ({"arch": "sm_75"}, "arch"),
    ({"max_examples": -1}, "max_examples: must be >= 0"),
    ({"seed": "x"}, "seed: must be an integer"),
    ({"deadline": 0}, "deadline: must be a positive number"),
    ({"shapes": [{"m": 1, "k": 100, "n": 256, "group_size": 128}]}, "shapes\\[0\\]: breaks the marlin kernel's rules"),
    ({"shapes": [{"m": 1, "k": 128}]}, "shapes\\[0\\]: must give exactly the shape fields"),
    ({"cases": [{"m": 1}]}, "cases\\[0\\]: missing field"),
    ({"cases": [{"fmt": "anyprec", "m": 1}]}, "cases\\[0\\]: is a 'anyprec' case"),
    ({"max_size": 10}, "max_size: no legal marlin shape"),
    ({"cases": 32}, "cases: must be a list of case dicts or .npz paths; got int"),
    ({"shrink": np.array([True, False])}, "shrink: must be True or False"),
])
def test_bad_arguments_are_rejected_before_the_kernel_runs(kwargs, rule):
    with pytest.raises(RefsimError, match=rule):
        harness.check_kernel(_never_called, "marlin", **QUIET, **kwargs)


def test_a_flag_field_accepts_only_its_values():
    with pytest.raises(FormatRuleError, match=r"shapes\[0\]\['c_large'\]: must be one of \[False, True\]"):
        harness.check_kernel(_never_called, "mma_s4", shapes=[{"c_large": "yes"}], **QUIET)


def test_kernel_that_is_not_callable_or_takes_the_wrong_arguments_is_rejected_at_once():
    with pytest.raises(FormatRuleError, match="kernel: must be callable"):
        harness.check_kernel(42, "marlin")
    with pytest.raises(FormatRuleError, match="must accept the 3 positional inputs of 'marlin'"):
        harness.check_kernel(lambda A, B: A, "marlin")
    with pytest.raises(FormatRuleError, match="fmt: must be one of"):
        harness.check_kernel(lambda *a: None, "exl2")


def test_pinned_marlin_cases_cover_every_partition_regime_for_108_sms():
    pinned = harness.pinned_cases("marlin", 108)
    covered = set().union(*(set(r) for _, r in pinned))
    for regime in ["tile k128 x n128, group 128", "tile k128 x n128, per-channel", "tile k64 x n256, group 128",
                   "tile k64 x n256, per-channel", "several slices per column", "one slice per column",
                   "partial last stripe", "idle SMs", "a stripe crossing columns", "several host launches (M split)",
                   "parallel 64-row problems in one launch", "partial m-block (M % 16 != 0)",
                   "partition differs from sms=72", "partition differs from sms=132"]:
        assert regime in covered, regime
    # each claim is true of the shape that carries it (recomputed from the stripe plan directly)
    for shape, regs in pinned:
        plan = stripes.stripes(shape["m"], shape["n"], shape["k"], 108, shape["group_size"])
        several = any(s.slice_count > 1 for la in plan.launches for b in la.blocks for s in b)
        assert ("several slices per column" in regs) == several
        assert ("several host launches (M split)" in regs) == (len(plan.launches) > 1)


def test_a_kernel_planned_for_72_sms_is_caught_and_the_replay_names_the_partition():
    # the bug of the issue: 72-SM partition, checked for an A100 (108 SMs), on a shape with more tiles than 72 SMs
    # (default settings, which find it on a pinned case: tests/testing/test_harness_bugs.py)
    shape = {"m": 1, "k": 1024, "n": 1280, "group_size": 128}      # 80 tiles: 1 per block on 108 SMs, 2 on 72
    with pytest.raises(harness.KernelMismatch) as info:
        harness.check_kernel(lambda A, B, s: mk.marlin_gemm(A, B, s, sms=72), "marlin", sms=108, seed=3,
                             shapes=[shape], max_examples=0, shrink=False, diagnose_budget=600, **QUIET)
    msg = str(info.value)
    assert "on pinned case" in msg
    assert "verdict: partition" in msg and "72" in msg.split("verdict:")[1].splitlines()[0]
    assert "ULP" in msg and "0x" in msg and "slice_idx" in msg


def test_correct_port_passes_and_the_result_says_what_was_covered():
    res = harness.check_kernel(lambda A, B, s: bugs.marlin_port(A, B, s, sms=108), "marlin", sms=108, seed=1,
                               max_examples=2, max_size=1 << 21, **QUIET)
    assert res.pinned >= 6 and res.drawn == 2 and res.seed == 1
    assert "several slices per column" in res.regimes


def test_rebuild_case_gives_the_exact_inputs_and_replay_reproduces_the_failure(tmp_path):
    case = {"fmt": "marlin", "m": 3, "k": 256, "n": 256, "group_size": 128, "kind": "normal", "seed": 11}
    A, B, s = rebuild_case(case)
    A2, B2, s2 = rebuild_case(dict(case))
    assert A.dtype == np.float16 and A.shape == (3, 256) and B.shape == (16, 512) and s.shape == (2, 256)
    assert A.tobytes() == A2.tobytes() and B.tobytes() == B2.tobytes() and s.tobytes() == s2.tobytes()
    q, scales = marlin.unpack(B, s)
    assert q.shape == (256, 256) and scales.shape == (2, 256)

    def swapped(A, B, s):
        return bugs.marlin_port(A, B, s, nibbles_swapped=True)

    out = tmp_path / "fail.npz"
    with pytest.raises(harness.KernelMismatch) as info:
        harness.check_kernel(swapped, "marlin", cases=[case], save_failures=out, diagnose_budget=600, **QUIET)
    msg = str(info.value)
    line = next(x for x in msg.splitlines() if "rebuild:" in x)
    printed = eval(line.split("rebuild_case(", 1)[1][:-1])            # the dict literal the report prints
    assert printed == case                                           # replay does not shrink
    assert "verdict: nibble order" in msg
    with np.load(out) as z:
        assert json.loads(str(z["case"])) == case
        assert z["input_0"].tobytes() == A.tobytes()
        assert z["actual"].tobytes() == swapped(A, B, s).tobytes()
    with pytest.raises(harness.KernelMismatch):                      # the .npz replays too
        harness.check_kernel(swapped, "marlin", cases=[out], **QUIET)


def test_a_raising_kernel_fails_at_once_with_its_case():
    calls = []

    def broken(A, B, s):
        calls.append(1)
        raise RuntimeError("CUDA error: illegal address")

    with pytest.raises(harness.KernelCallError, match="kernel raised RuntimeError: CUDA error") as info:
        harness.check_kernel(broken, "marlin", seed=0, **QUIET)
    assert len(calls) == 1 and "rebuild: refsim.testing.rebuild_case({'fmt': 'marlin'" in str(info.value)


def test_a_slow_kernel_is_stopped_by_the_deadline():
    import time

    def slow(A, B, C):
        t = time.perf_counter()
        while time.perf_counter() - t < 5:
            pass
        return integer_mma.mma_int(A, B, C)

    t0 = time.perf_counter()
    with pytest.raises(harness.KernelTimeout, match="deadline=0.2"):
        harness.check_kernel(slow, "mma_s4", deadline=0.2, **QUIET)
    assert time.perf_counter() - t0 < 4.5       # interrupted, not waited out (a bound far from 5 s)


def test_wrong_dtype_is_reported_without_shrinking():
    with pytest.raises(harness.KernelCallError, match="returned dtype float32 shape"):
        harness.check_kernel(lambda A, B, s: mk.marlin_gemm(A, B, s).astype(np.float32), "marlin", **QUIET)


@pytest.mark.parametrize("victim", [0, 1, 2])
def test_a_kernel_that_writes_an_input_after_the_right_output_fails_naming_it(victim):
    seen = []

    def vandal(*inputs):
        D = integer_mma.mma_int(*inputs)
        seen.append(inputs[victim].copy())
        inputs[victim][...] = 0                        # the right D, then a corrupted input
        return D

    with pytest.raises(harness.KernelModifiedInput, match=f"modified its input '{'ABC'[victim]}' "
                                                          f"\\(input {victim + 1} of 3"):
        harness.check_kernel(vandal, "mma_s4", max_examples=0, seed=0, **QUIET)
    assert len(seen) == 1                              # at once: no shrink, no probes
    rebuilt = rebuild_case({"fmt": "mma_s4", **harness.pinned_cases("mma_s4")[0][0], "kind": "extremes", "seed": 0})
    assert rebuilt[victim].any()                       # the original input was not zero: a real change


def test_the_kernel_gets_copies_so_the_caller_inputs_stay_intact():
    got = []
    harness.check_kernel(lambda A, B, C: got.append(A) or integer_mma.mma_int(A, B, C), "mma_s4", max_examples=1, seed=0,
                         **QUIET)
    A0 = rebuild_case({"fmt": "mma_s4", "c_large": True, "kind": "extremes", "seed": 0})[0]
    assert all(a is not A0 for a in got)


def test_progress_prints_one_line_per_phase():
    lines = []
    harness.check_kernel(lambda A, B, C: integer_mma.mma_int(A, B, C), "mma_s4", max_examples=3, seed=0, progress=lines.append)
    assert len(lines) == 3 and lines[0].startswith("mma_s4 on sm_80") and lines[1].startswith("pinned:")
    assert lines[2].startswith("drawn: 3 cases match")


def test_emulator_as_kernel_passes_for_the_small_formats():
    harness.check_kernel(lambda A, B, C: tc.mma_m16n8k16("sm_90", A, B, C), "mma_m16n8k16", arch="sm_90",
                         max_examples=5, **QUIET)
    harness.check_kernel(lambda A, B, C: tc.mma_m16n8k16("sm_80", A, B, C), "mma_m16n8k16_f16", max_examples=5,
                         **QUIET)
    # a K-split launch: the ascending slice order is one of the outputs the harness admits
    harness.check_kernel(lambda x, q, lut: ak.anyprec_gemv(x, q, lut, q.shape[0], ksplit_order="ascending"),
                         "anyprec", max_examples=2, max_size=1 << 16, **QUIET)
    harness.check_kernel(lambda *i: atom_group_gemm(atom.AtomActivations(*i[:4]), atom.AtomWeights(*i[4:])), "atom",
                         max_examples=3, **QUIET)


def test_shapes_restrict_every_case():
    seen = []

    def spy(A, B, s):
        seen.append(A.shape)
        return mk.marlin_gemm(A, B, s)

    harness.check_kernel(spy, "marlin", shapes=[{"m": 2, "k": 256, "n": 512, "group_size": None}], max_examples=2,
                         **QUIET)
    assert seen and set(seen) == {(2, 256)}


def test_legal_shapes_obey_the_kernel_rules():
    shapes = harness.legal_shapes("marlin")
    assert shapes
    for c in shapes:
        cfg = stripes.marlin_tile_config(c["m"], c["n"], c["k"], c["group_size"])
        assert c["n"] % cfg.thread_n == 0 and c["k"] % cfg.thread_k == 0 and c["n"] % 256 == 0
        assert c["m"] * c["n"] * c["k"] <= harness.FORMATS["marlin"].default_max_size
    # the K-split launch is legal: its expected output is the admissible set of every slice order
    assert any(c["m"] == 1 and c["k"] > 4096 and c["bits"] >= 7 for c in harness.legal_shapes("anyprec"))


def test_a_ksplit_kernel_passes_in_any_slice_order_and_the_run_says_so():
    lines = []
    ksplit = {"m": 1, "k": 11008, "n": 4, "bits": 7}                   # 3 slices, 6 orders
    harness.check_kernel(lambda x, q, lut: ak.anyprec_gemv(x, q, lut, q.shape[0], ksplit_order=(2, 1, 0)),
                         "anyprec", shapes=[ksplit], max_examples=3, progress=lines.append)
    assert any("4 set-valued cases" in line and "in its admissible set" in line for line in lines), lines

    def off_by_one(x, q, lut):                                          # outside every order
        out = ak.anyprec_gemv(x, q, lut, q.shape[0], ksplit_order=(2, 1, 0))
        return (out.view(np.uint16) ^ np.uint16(1)).view(np.float16)
    with pytest.raises(harness.KernelMismatch, match="differ"):
        harness.check_kernel(off_by_one, "anyprec", shapes=[ksplit], max_examples=1, shrink=False, **QUIET)


def test_hypothesis_strategy_draws_the_same_legal_cases():
    from hypothesis import given, settings

    legal = harness.legal_shapes("anyprec")

    @settings(max_examples=examples(25), deadline=None, database=None)
    @given(harness.strategy("anyprec"))
    def one(case):
        assert {k: case[k] for k in ("m", "k", "n", "bits")} in legal
        assert case["kind"] in harness.DATA_KINDS and 0 <= case["seed"] < 2**31
        x, q, lut = rebuild_case({"fmt": "anyprec", **case})
        assert x.shape == (case["m"], case["k"]) and lut.shape == (case["n"], 2 ** case["bits"])

    one()


# the plan branches check_kernel cannot reach: it calls the kernel as the format's signature does (the host's
# own tile choice, max_par 16), and capping max_par 16 needs M > 1024 rows, beyond the default max_size
_UNREACHABLE = {"marlin": {"tile_forced", "max_par_capped"}, "awq": {"act_order"}}


def _branches(fmt: str, shape: dict, sms: int) -> frozenset:
    from refsim.emulator import gptq_awq_kernel, mixed_2_4_16_kernel
    from refsim.formats import atom_gemm
    from refsim.testing.cases import FORMATS

    if fmt == "marlin":
        return stripes.plan_branches(shape["m"], shape["n"], shape["k"], sms, shape["group_size"])
    if fmt == "atom":
        return atom_gemm.plan_branches(shape["m"], shape["n"], shape["k4"], shape["keeper"])
    if fmt == "mixed_2_4_16":                       # which groups are 4-bit is the quantizer's: run it
        inputs = FORMATS[fmt].make({**shape, "kind": "normal", "seed": 0})
        return mixed_2_4_16_kernel.plan_branches(inputs[7], shape["n"], np.diff(inputs[8].astype(np.int64)))
    return gptq_awq_kernel.plan_branches(shape["m"], shape["n"], shape["k"], shape["group_size"], shape["act_order"])


@pytest.mark.parametrize("fmt", ["marlin", "atom", "gptq", "gptq_v2", "awq", "mixed_2_4_16"])
def test_pinned_cases_take_every_branch_of_the_kernels_plan(fmt):
    """check_kernel's pinned cases switch every branch of the format's plan (``plan_branches`` of the plan's
    module decides), so a correct kernel is never called wrong for want of a case and a wrong one cannot hide
    in an unexercised branch."""
    from refsim.emulator import gptq_awq_kernel, mixed_2_4_16_kernel
    from refsim.formats import atom_gemm

    declared = {"marlin": stripes.BRANCHES, "atom": atom_gemm.BRANCHES, "mixed_2_4_16": mixed_2_4_16_kernel.BRANCHES}
    taken = set().union(*(_branches(fmt, shape, 108) for shape, _ in harness.pinned_cases(fmt, 108)))
    missing = set(declared.get(fmt, gptq_awq_kernel.BRANCHES)) - _UNREACHABLE.get(fmt, set()) - taken
    assert not missing, f"{fmt}: no pinned case takes {sorted(missing)}"


# --------------------------------------------------------------------------- the kernel's own shape rule
def _awq_n128_only(x, qweight, qzeros, scales):
    """An AWQ GEMV that, like vLLM's AWQ GEMM, runs only N % 128 == 0 (refsim's emulator otherwise)."""
    if scales.shape[1] % 128:
        raise ValueError(f"N={scales.shape[1]}: this kernel needs N % 128 == 0")
    return harness.FORMATS["awq"].emulate((x, qweight, qzeros, scales), "sm_80", 108)


def test_a_kernel_with_a_narrower_shape_rule_fails_without_it_and_passes_with_it():
    with pytest.raises(harness.KernelCallError, match="N % 128 == 0"):
        harness.check_kernel(_awq_n128_only, "awq", seed=0, max_examples=2, progress=False)
    lines = []
    res = harness.check_kernel(_awq_n128_only, "awq", seed=0, max_examples=4, legal="n%128==0", progress=lines.append)
    # awq's pinned pool has N = 8, 64, 256 and 16: three of its four default pinned shapes are skipped
    assert res.legal == "n%128==0" and res.skipped_pinned == 3 and res.pinned >= 1 and res.drawn == 4
    assert any("the kernel's shape rule 'n%128==0': 3 pinned cases skipped" in ln for ln in lines)
    assert "the kernel's shape rule 'n%128==0' (3 pinned cases skipped)" in res.summary()


def test_the_rule_may_ride_on_the_launch_function_or_be_a_callable():
    def launch(*inputs):                          # never called: the target is Python, the attribute is read
        raise AssertionError

    launch.legal = lambda m, k, n, group_size, act_order: n % 128 == 0
    res = harness.check_kernel(_awq_n128_only, "awq", seed=1, max_examples=2, legal=launch.legal, progress=False)
    assert res.legal == "<lambda>" and res.skipped_pinned == 3


def test_a_rule_no_case_satisfies_is_refused_before_any_case():
    def never(*a):
        raise AssertionError("the kernel must not be called")

    with pytest.raises(FormatRuleError, match=r"legal: no awq shape with at most \d+ multiply-adds satisfies the "
                                              r"kernel's rule 'n%7==0'"):
        harness.check_kernel(never, "awq", legal="n%7==0", progress=False)
