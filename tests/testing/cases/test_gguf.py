"""check_kernel's GGUF Q4_0, Q8_0 and Q4_K weight-only GEMM cases: each pinned edge holds the data it
names, the oracle is the hand-computed product, and realistic bugs are caught and named."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from refsim.testing import harness, rebuild_case
from refsim.testing.cases import FORMATS

_spec = importlib.util.spec_from_file_location("weight_only_ports", Path(__file__).parent / "weight_only_ports.py")
ports = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ports)

QUIET = {"progress": False}
BLOCK = {"q4_0": 18, "q8_0": 34, "q4_k": 144}


def pinned(fmt, edge):
    """(the first block of every even row as bytes, float32 W (K, N))."""
    shape = next(c for c in FORMATS[fmt].pinned_pool if c["edge"] == edge)
    inputs = rebuild_case({"fmt": fmt, **shape, "kind": "normal", "seed": 0})
    return inputs[1].reshape(inputs[1].shape[0], -1, BLOCK[fmt])[0::2, 0], FORMATS[fmt].weights(inputs)


def f16(b, at):
    return b[:, at:at + 2].copy().view(np.float16)[:, 0]


@pytest.mark.parametrize("fmt", sorted(BLOCK))
def test_gguf_edges_hold_their_data(fmt):
    b, w = pinned(fmt, "saturation")
    if fmt == "q4_0":
        assert set(np.unique(np.concatenate([b[:, 2:] & 15, b[:, 2:] >> 4]))) == {0, 15}
    elif fmt == "q8_0":
        assert set(np.unique(b[:, 2:].view(np.int8))) == {-128, 127}
    else:
        assert (b[:, 4:] == 0xFF).all()                                          # scales, mins 63; nibbles 15
    b, w = pinned(fmt, "subnormal_scales")
    bits = b[:, 0:2].copy().view(np.uint16)[:, 0]
    assert ((bits & 0x7C00) == 0).all() and ((bits & 0x3FF) != 0).all()         # d is an fp16 subnormal
    b, w = pinned(fmt, "zero_blocks")
    assert (f16(b, 0) == 0).all() and not w[:32, 0::2].any()
    b, w = pinned(fmt, "largest_block_max")
    assert np.abs(w.astype(np.float16)).max() == (60480 if fmt == "q4_k" else 65504)


def test_the_oracles_are_the_hand_computed_products():
    x = np.zeros((1, 32), np.float16)
    x[0, [0, 16, 5]] = [1, 2, 4]
    # Q4_0 (refsim.formats.gguf_legacy's worked block): d = 0.5, qs[0] = 0xF3: element 0 = -2.5,
    # element 16 = 3.5; qs 0x88 elsewhere: 0
    qs = np.full(16, 0x88, np.uint8)
    qs[0] = 0xF3
    raw = np.concatenate([np.array([0.5], np.float16).view(np.uint8), qs])[None]
    assert FORMATS["q4_0"].emulate((x, raw), "sm_80", 108).tolist() == [[-2.5 + 7.0]]
    # Q8_0: d = 0.25, qs[0] = 4, qs[5] = -8: y = 1 - 8
    qs8 = np.zeros(32, np.int8)
    qs8[[0, 5]] = [4, -8]
    raw = np.concatenate([np.array([0.25], np.float16).view(np.uint8), qs8.view(np.uint8)])[None]
    assert FORMATS["q8_0"].emulate((x, raw), "sm_80", 108).tolist() == [[1.0 - 8.0]]
    # Q4_K (refsim.formats.gguf_kquants' worked block): d = 1, dmin = 0.5, sc0..3 = 2, m0..3 = 3,
    # qs[0] = 0x75: element 0 = 8.5, element 32 = 12.5, the rest of sub-blocks 0..3 -1.5, 4..7 zero
    blk = np.zeros(144, np.uint8)
    blk[0:4] = np.array([1.0, 0.5], np.float16).view(np.uint8)
    blk[4:8], blk[8:12], blk[16] = 2, 3, 0x75
    xk = np.zeros((1, 256), np.float16)
    xk[0, [0, 32, 100, 200]] = 1
    assert FORMATS["q4_k"].emulate((xk, blk[None]), "sm_80", 108).tolist() == [[8.5 + 12.5 - 1.5 + 0]]


BUGS = [("q4_0", lambda *i: ports.q4_0(*i, interleaved=True), "nibble order: the kernel's output equals refsim's "
                                                                "emulation with elements 2j, 2j+1 read from byte j"),
        ("q8_0", lambda *i: ports.q8_0(*i, unsigned=True), "sign"),
        ("q4_k", lambda *i: ports.q4_k(*i, min_added=True), "min sign")]


@pytest.mark.parametrize("fmt, kernel, verdict", BUGS, ids=[f"{f}-{v[:12]}" for f, _, v in BUGS])
def test_a_bug_is_caught_on_a_pinned_case_and_named(fmt, kernel, verdict):
    with pytest.raises(harness.KernelMismatch) as info:
        harness.check_kernel(kernel, fmt, seed=0, max_examples=0, shrink=False, diagnose_budget=60, **QUIET)
    msg = str(info.value)
    assert "on pinned case" in msg and f"verdict: {verdict}" in msg, msg
