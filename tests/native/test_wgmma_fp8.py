"""The compiled FP8 K-block chain equals the NumPy wgmma model bit for bit (drawn shapes, full code range,
wide exponent spreads), and truncates as the model says on a hand-worked block."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refsim.emulator import deepgemm_kernel as dg
from refsim.native import wgmma_fp8
from refsim.testing import assert_bitexact

ALL_FINITE = np.array([c for c in range(256) if c & 0x7F != 0x7F], np.uint8)

needs_compiler = pytest.mark.skipif(not wgmma_fp8.available(), reason="no C compiler: the NumPy path is the only one")


@needs_compiler
def test_hand_worked_block_truncates_below_the_largest_exponent():
    # k 0..31: products 32 * 16 = 2^9, sum 2^14 (E = 14: 13 fraction bits end at 2^1);
    # k 32..127: products 1 * 1, each aligned below 2^1 and truncated to 0. Exact sum: 16384 + 96.
    a = np.full((1, 128), 0x38, np.uint8)          # 1.0
    a[0, :32] = 0x60                               # 32.0
    b = np.full((8, 128), 0x38, np.uint8)
    b[:, :32] = 0x58                               # 16.0
    got = wgmma_fp8.kblock_partials(a, b)
    assert got.shape == (1, 1, 8)
    assert_bitexact(got, np.full((1, 1, 8), 16384.0, np.float32))
    # products first: 1.0 terms in step 0 are exact (E = 0), then 2^9 terms in step 1 keep C = 32 exactly
    assert_bitexact(wgmma_fp8.kblock_partials(a[:, ::-1].copy(), b[:, ::-1].copy()),
                    np.full((1, 1, 8), 16384.0 + 96.0, np.float32))


@needs_compiler
@settings(max_examples=6, deadline=None)
@given(m=st.integers(1, 66), n8=st.integers(1, 33), kbs=st.integers(1, 2), spread=st.booleans(),
       seed=st.integers(0, 2**32 - 1))
def test_compiled_partials_equal_the_wgmma_model(m, n8, kbs, spread, seed):
    n, k = 8 * n8, 128 * kbs
    rng = np.random.default_rng(seed)
    A, B = rng.choice(ALL_FINITE, (m, k)), rng.choice(ALL_FINITE, (n, k))
    if spread:                                     # many zeros, -0 and subnormals: wide exponent spreads
        A[rng.random(A.shape) < 0.5] = rng.choice(np.array([0x00, 0x80, 0x01, 0x81], np.uint8))
    assert_bitexact(wgmma_fp8.kblock_partials(A, B), dg.kblock_partials(A, B, native=False), f"seed {seed}")
