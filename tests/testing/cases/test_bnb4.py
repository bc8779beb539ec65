"""check_kernel's NF4 weight-only GEMM cases (bitsandbytes' layout, with and without double
quantization): each pinned edge holds the data it names, the oracle is the hand-computed product, and
realistic bugs are caught and named."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from refsim.formats import bnb4
from refsim.testing import harness, rebuild_case
from refsim.testing.cases import FORMATS

_spec = importlib.util.spec_from_file_location("weight_only_ports", Path(__file__).parent / "weight_only_ports.py")
ports = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ports)

QUIET = {"progress": False}


def pinned(fmt, edge):
    shape = next(c for c in FORMATS[fmt].pinned_pool if c["edge"] == edge)
    inputs = rebuild_case({"fmt": fmt, **shape, "kind": "normal", "seed": 0})
    return inputs, FORMATS[fmt].weights(inputs)


def even_blocks(inputs):
    """uint8 codes of the even 64-element blocks of the flattened weight."""
    codes = bnb4.unpack(inputs[1])
    return codes[(np.arange(codes.size) // 64) % 2 == 0]


@pytest.mark.parametrize("fmt", ["nf4", "nf4_dq"])
def test_nf4_edges_hold_their_data(fmt):
    inputs, w = pinned(fmt, "saturation")
    assert set(np.unique(even_blocks(inputs))) == {0, 15}                       # -1.0 and +1.0
    if fmt == "nf4_dq":
        assert (inputs[2][0::2] == 255).all()                                     # nested code 1.0
    inputs, w = pinned(fmt, "subnormal_scales")
    w16 = np.abs(w.astype(np.float16))
    assert ((w16 > 0) & (w16 < 2.0**-14)).any()                                   # fp16-subnormal weights
    inputs, w = pinned(fmt, "zero_blocks")
    if fmt == "nf4":
        assert (inputs[2][0::4] == 0).all() and (bnb4.unpack(inputs[1])[128:192] == 7).all()
    else:
        assert (even_blocks(inputs) == 7).all()
    assert (w.T.reshape(-1)[:64] == 0).all()                                      # block 0 is zero either way
    inputs, w = pinned(fmt, "largest_block_max")
    assert np.abs(w.astype(np.float16)).max() == 65504


def test_the_oracles_are_the_hand_computed_products():
    # one block of 64 (N = 1, K = 64): codes 15 (+1), 0 (-1), 7 (0) elsewhere, absmax 2
    codes = np.full(64, 7, np.uint8)
    codes[:2] = [15, 0]
    x = np.zeros((1, 64), np.float16)
    x[0, :3] = [3, 1, 100]
    inputs = (x, bnb4.pack(codes), np.array([2.0], np.float32))
    assert FORMATS["nf4"].emulate(inputs, "sm_80", 108).tolist() == [[6.0 - 2.0]]
    # double quantization: absmax = fl32(code2[255] * 1.5) + 0.5 = 2
    inputs = (x, bnb4.pack(codes), np.array([255], np.uint8), np.array([1.5], np.float32), bnb4.dynamic_map(),
              np.array([0.5], np.float32))
    assert FORMATS["nf4_dq"].emulate(inputs, "sm_80", 108).tolist() == [[4.0]]


BUGS = [("nf4", lambda *i: ports.nf4(*i, swap=True), "nibble order"),
        ("nf4_dq", lambda *i: ports.nf4_dq(*i, no_offset=True), "double quantization")]


@pytest.mark.parametrize("fmt, kernel, verdict", BUGS, ids=[f"{f}-{v}" for f, _, v in BUGS])
def test_a_bug_is_caught_on_a_pinned_case_and_named(fmt, kernel, verdict):
    with pytest.raises(harness.KernelMismatch) as info:
        harness.check_kernel(kernel, fmt, seed=0, max_examples=0, shrink=False, diagnose_budget=60, **QUIET)
    msg = str(info.value)
    assert "on pinned case" in msg and f"verdict: {verdict}" in msg, msg
