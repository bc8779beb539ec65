"""What the weight-only GEMM formats share (refsim.testing.cases.weight_only): independent ports pass
every format, the pinned cases cover every edge, accuracy mode accepts another order, and a NaN weight's
outputs are NaN in the linear form."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from refsim.arith.fp import raw_bits
from refsim.errors import FormatRuleError
from refsim.testing import harness, rebuild_case
from refsim.testing.accuracy import Accumulation, judge, reference
from refsim.testing.cases import FORMATS
from refsim.testing.cases.base import Linear

_spec = importlib.util.spec_from_file_location("weight_only_ports", Path(__file__).parent / "weight_only_ports.py")
ports = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ports)

QUIET = {"progress": False}
PORTS = {"fp8_channel": ports.fp8, "fp8_block": lambda *i: ports.fp8(*i, block=True), "mxfp4": ports.mxfp4,
         "nvfp4": ports.nvfp4, "nf4": ports.nf4, "nf4_dq": ports.nf4_dq, "q4_0": ports.q4_0, "q8_0": ports.q8_0,
         "q4_k": ports.q4_k}


@pytest.mark.parametrize("fmt", sorted(PORTS))
def test_an_independent_port_passes_every_pinned_edge_and_drawn_case(fmt):
    res = harness.check_kernel(PORTS[fmt], fmt, seed=0, max_examples=3, **QUIET)
    edges = {r for r in res.regimes if r.startswith("edge: ")}
    assert edges == {f"edge: {e}" for e in FORMATS[fmt].fields["edge"]}
    assert res.pinned == len(harness.pinned_cases(fmt))


def test_accuracy_mode_accepts_another_accumulation_that_bitexact_mode_refuses():
    def fp16_tree(x, weight):                 # products rounded to fp16, then a pairwise tree of fp16 adds
        w16 = FORMATS["q8_0"].weights((x, weight)).astype(np.float16).astype(np.float32)
        with np.errstate(over="ignore", invalid="ignore"):
            level = (x.T.astype(np.float32)[:, :, None] * w16[:, None, :]).astype(np.float16)   # (K, M, N)
            while level.shape[0] > 1:
                pairs = level.shape[0] // 2
                level = np.concatenate([(level[0:2 * pairs:2] + level[1:2 * pairs:2]).astype(np.float16),
                                        level[2 * pairs:]])
        return level[0]

    with pytest.raises(harness.KernelMismatch):
        harness.check_kernel(fp16_tree, "q8_0", seed=0, max_examples=2, shrink=False, diagnose_budget=1, **QUIET)
    res = harness.check_kernel(fp16_tree, "q8_0", seed=0, max_examples=2, mode="accuracy", accumulation="fp16",
                               order="pairwise", **QUIET)
    assert 0 < res.bit_differ < res.outputs and res.worst_ratio <= 1


def test_a_format_without_nan_scales_refuses_that_edge():
    with pytest.raises(FormatRuleError, match="edge"):
        rebuild_case({"fmt": "q4_0", "m": 1, "k": 32, "n": 2, "edge": "nan_scales", "kind": "normal", "seed": 0})


def test_a_nan_weight_column_must_be_nan_in_accuracy_mode():
    lin = FORMATS["mxfp4"].linear(*_nan_case())
    assert lin.nan is not None and lin.nan[:, 0::2].all() and not lin.nan[:, 1::2].any()   # even rows of W^T
    acc = Accumulation("fp32")
    ref = reference(acc, lin)
    assert np.isnan(ref[:, 0::2]).all() and np.isfinite(ref[:, 1::2]).all()
    assert not judge(acc, lin, ref).outside.any()
    finite = ref.copy()
    finite[:, 0] = 0                                             # a finite output where the product is NaN
    assert judge(acc, lin, finite).outside.tolist() == [[True] + [False] * 7]


def _nan_case():
    case = {"fmt": "mxfp4", "m": 1, "k": 64, "n": 8, "edge": "nan_scales", "kind": "normal", "seed": 0}
    inputs = rebuild_case(case)
    return {k: v for k, v in case.items() if k != "fmt"}, inputs


def test_the_oracle_writes_the_canonical_nan_in_a_nan_scale_column():
    case, inputs = _nan_case()
    y = raw_bits(FORMATS["mxfp4"].emulate(inputs, "sm_80", 108))
    assert (y[:, 0::2] == 0x7FFF).all() and (y[:, 1::2] != 0x7FFF).all()


def test_linear_refuses_a_nan_mask_that_is_not_bool_or_not_broadcastable():
    a, w = np.ones((2, 3)), np.ones((3, 4))
    with pytest.raises(Exception, match="nan"):
        Linear(a, w, terms=3, nan=np.zeros((2, 4)))
    with pytest.raises(Exception, match="nan"):
        Linear(a, w, terms=3, nan=np.zeros((3, 4), bool))


@pytest.mark.parametrize("fmt", sorted(PORTS))
def test_every_known_bug_class_changes_the_output_of_some_pinned_case(fmt):
    spec = FORMATS[fmt]
    seen = {}
    for shape, _ in harness.pinned_cases(fmt):
        case = {**shape, "kind": "normal", "seed": 0}
        inputs = spec.make(case)
        want = raw_bits(spec.emulate(inputs, "sm_80", 108))
        for cls, desc, alt in spec.known_bugs(case, inputs, "sm_80", 108):
            seen[desc] = seen.get(desc, False) or bool((raw_bits(alt(inputs)) != want).any())
    assert seen and all(seen.values()), seen
