"""check_kernel's FP8 (per-channel, 128x128 blocks), MXFP4 and NVFP4 weight-only GEMM cases: each
pinned edge holds the data it names, the oracle is the hand-computed product, and realistic bugs
are caught and named."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from refsim.arith.fp import raw_bits
from refsim.formats import mx
from refsim.testing import harness, rebuild_case
from refsim.testing.cases import FORMATS

_spec = importlib.util.spec_from_file_location("weight_only_ports", Path(__file__).parent / "weight_only_ports.py")
ports = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ports)

QUIET = {"progress": False}


def pinned(fmt, edge):
    """(inputs, float32 W (K, N)) of the pinned shape of ``edge``."""
    shape = next(c for c in FORMATS[fmt].pinned_pool if c["edge"] == edge)
    inputs = rebuild_case({"fmt": fmt, **shape, "kind": "normal", "seed": 0})
    return inputs, FORMATS[fmt].weights(inputs)


def f16(w):
    return np.abs(w.astype(np.float16).astype(np.float64))


@pytest.mark.parametrize("fmt", ["fp8_channel", "fp8_block"])
def test_fp8_edges_hold_their_data(fmt):
    even = (lambda c: c[:, 0::2]) if fmt == "fp8_channel" else (lambda c: c[:128, :64])   # tile (0, 0)
    (_, codes, s), w = pinned(fmt, "saturation")
    assert set(np.unique(even(codes))) == {0x7E, 0xFE}                                     # +-448
    (_, codes, s), w = pinned(fmt, "subnormal_scales")
    sub = even(codes)
    assert ((sub & 0x78) == 0).all() and ((sub & 7) != 0).all()                           # e4m3 subnormals
    assert 0 < even(f16(w)).max() < 2.0**-14                                               # fp16-subnormal W
    (_, codes, s), w = pinned(fmt, "zero_blocks")
    assert set(np.unique(even(codes))) == {0x00, 0x80} and not even(w).any()
    (_, codes, s), w = pinned(fmt, "largest_block_max")
    assert f16(w).max() == 65504 and np.isfinite(w.astype(np.float16)).all()


def test_mx_edges_hold_their_data():
    first = (slice(0, None, 2), 0)                             # the first block of every even row
    for fmt, sat_scale, sub_scales, zero_scale, top, nan_code in [
            ("mxfp4", None, {0, 105, 108, 111}, None, 6 * 2.0**13, 255),
            ("nvfp4", 0x7E, set(range(1, 8)), 0, 6 * 448 * 24, 0x7F)]:
        blk = FORMATS[fmt].k_block
        (_, b, s, *t), w = pinned(fmt, "saturation")
        assert (mx.unpack_fp4(b)[0::2, :blk] & 7 == 7).all() and (sat_scale is None or (s[first] == sat_scale).all())
        (_, b, s, *t), w = pinned(fmt, "subnormal_scales")
        assert set(np.unique(s[first])) <= sub_scales and (mx.unpack_fp4(b)[0::2, :blk] & 7 == 1).all()
        (_, b, s, *t), w = pinned(fmt, "zero_blocks")
        assert (mx.unpack_fp4(b)[0::2, :blk] & 7 == 0).all() and not w[:blk, 0::2].any()
        assert zero_scale is None or (s[first] == zero_scale).all()
        (_, b, s, *t), w = pinned(fmt, "largest_block_max")
        assert f16(w).max() == top
        (_, b, s, *t), w = pinned(fmt, "nan_scales")
        assert (s[first] == nan_code).all() and np.isnan(w[:blk, 0::2]).all() and not np.isnan(w[:, 1::2]).any()


def test_the_oracles_are_the_hand_computed_products():
    x = np.array([[3, 5]], np.float16)
    # fp8 per-channel: codes 0x38 (1.0), 0x40 (2.0); scale 0.5 -> W = 0.5, 1.0: y = 1.5 + 5
    inputs = (x, np.array([[0x38], [0x40]], np.uint8), np.array([[0.5]], np.float32))
    assert raw_bits(FORMATS["fp8_channel"].emulate(inputs, "sm_80", 108)).tolist() == [[0x4680]]   # 6.5
    # fp8 block: one tile, scale 0.25; column 1 codes 0xB8 (-1.0), 0x03 (the subnormal 3 * 2^-9):
    # y = 3 * -0.25 + 5 * 3 * 2^-11 = -1521/2048, an fp16 value
    inputs = (x, np.array([[0x38, 0xB8], [0x40, 0x03]], np.uint8), np.array([[0.25]], np.float32))
    y = FORMATS["fp8_block"].emulate(inputs, "sm_80", 108).astype(np.float64)
    assert y.tolist() == [[3 * 0.25 + 5 * 0.5, -1521 / 2048]]
    # mxfp4: K = 32, element 0 code 7 (6.0), element 1 code 10 (-1.0), scale 126 (0.5)
    xk = np.zeros((1, 32), np.float16)
    xk[0, :2] = [1, 4]
    codes = np.zeros((1, 32), np.uint8)
    codes[0, :2] = [7, 10]
    inputs = (xk, mx.pack_fp4(codes), np.array([[126]], np.uint8))
    assert FORMATS["mxfp4"].emulate(inputs, "sm_80", 108).tolist() == [[3.0 - 2.0]]
    # nvfp4: K = 16, element 0 code 6 (4.0), e4m3 scale 0x30 (0.5), t = 0.25: W = 0.5
    inputs = (xk[:, :16].copy(), mx.pack_fp4(codes[:, :16] * 0 + np.eye(1, 16, dtype=np.uint8) * 6),
              np.array([[0x30]], np.uint8), np.array([0.25], np.float32))
    assert FORMATS["nvfp4"].emulate(inputs, "sm_80", 108).tolist() == [[0.5]]


BUGS = [("fp8_channel", lambda *i: ports.fp8(*i, ftz=True), "e4m3 decode"),
        ("fp8_block", lambda *i: ports.fp8(*i, block=True, ftz=True), "e4m3 decode"),
        ("mxfp4", lambda *i: ports.mxfp4(*i, swap=True), "nibble order"),
        ("mxfp4", lambda *i: ports.mxfp4(*i, scale_twice=True), "scale applied twice"),
        ("nvfp4", lambda *i: ports.nvfp4(*i, scale_ftz=True), "e4m3 decode")]


@pytest.mark.parametrize("fmt, kernel, verdict", BUGS, ids=[f"{f}-{v}" for f, _, v in BUGS])
def test_a_bug_is_caught_on_a_pinned_case_and_named(fmt, kernel, verdict):
    with pytest.raises(harness.KernelMismatch) as info:
        harness.check_kernel(kernel, fmt, seed=0, max_examples=0, shrink=False, diagnose_budget=60, **QUIET)
    msg = str(info.value)
    assert "on pinned case" in msg and f"verdict: {verdict}" in msg, msg
