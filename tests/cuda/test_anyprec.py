"""refsim/cuda/anyprec.cu through refsim.ptx: anyprec_gemv equals its emulator bit for bit on pinned and on
hypothesis-drawn shapes (tail chunks of every width, several M) and values; the K-split adds its slices in
ascending order like the emulator; and where nothing rounds it is the format's exact reference rounded once."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from kernel_inputs import cases
from kernel_inputs import special_values as _values

import refsim.cuda as rc
from refsim.emulator import anyprec_kernel
from refsim.errors import FormatRuleError
from refsim.formats import anyprec_plan as ak
from refsim.formats import bitplane
from refsim.testing import assert_bitexact


@pytest.mark.parametrize("m,n,k,bits", [(1, 4, 1024, 3), (2, 16, 1312, 5)])
def test_anyprec_gemv_equals_its_emulator(m, n, k, bits):
    rng = np.random.default_rng(bits)
    qweight = bitplane.pack(rng.integers(0, 2**bits, (n, k)).astype(np.uint8), bits)
    lut = rng.standard_normal((n, 2**bits)).astype(np.float16)
    x = rng.standard_normal((m, k)).astype(np.float16)
    assert_bitexact(rc.anyprec_gemv(x, qweight, lut, bits), anyprec_kernel.anyprec_gemv(x, qweight, lut, bits))


def test_anyprec_ksplit_adds_the_slices_in_ascending_order_like_the_emulator():
    rng = np.random.default_rng(8)
    k, bits = 4128, 7                                  # M = 1, K > 4096, b >= 7: two slices
    qweight = bitplane.pack(rng.integers(0, 2**bits, (4, k)).astype(np.uint8), bits)
    lut = rng.standard_normal((4, 2**bits)).astype(np.float16)
    x = rng.standard_normal((1, k)).astype(np.float16)
    assert_bitexact(rc.anyprec_gemv(x, qweight, lut, bits, "ascending"),
                    anyprec_kernel.anyprec_gemv(x, qweight, lut, bits, "ascending"))


def test_anyprec_ksplit_needs_the_ascending_order_like_the_emulator():
    x = np.zeros((1, 4128), np.float16)
    with pytest.raises(FormatRuleError, match="ascending"):
        rc.anyprec_gemv(x, np.zeros((7, 4, 129), np.int32), np.zeros((4, 128), np.float16), 7)


@settings(max_examples=3)
@given(c=cases, m=st.integers(1, 8), bits=st.integers(3, 8), tail=st.integers(0, 31), full=st.integers(0, 1))
@example(c={"seed": 1, "special": 0.2}, m=1, bits=3, tail=0, full=1)
def test_anyprec_gemv_equals_its_emulator_on_drawn_shapes_and_values(c, m, bits, tail, full):
    rng = np.random.default_rng(c["seed"])
    k = 1024 * full + 32 * tail or 32                        # tail chunks of every width
    n = 4 if m == 1 else 16
    qweight = bitplane.pack(rng.integers(0, 2**bits, (n, k)).astype(np.uint8), bits)
    lut = _values(rng, (n, 2**bits), 1.0, c["special"])
    x = _values(rng, (m, k), 1.0, c["special"])
    assert_bitexact(rc.anyprec_gemv(x, qweight, lut, bits), anyprec_kernel.anyprec_gemv(x, qweight, lut, bits))


@settings(max_examples=2)
@given(seed=st.integers(0, 2**31 - 1), m=st.integers(1, 3), bits=st.integers(3, 8))
def test_anyprec_gemv_equals_the_formats_exact_reference_when_nothing_rounds(seed, m, bits):
    # integer table entries in [-4, 4], x in {-1, 0, 1} and mostly 0: every fp16 partial is an integer
    # below 2^11, so the kernel returns the format's exact float64 sum (matmul_reference) rounded once
    rng = np.random.default_rng(seed)
    k, n = 1056, 4 if m == 1 else 16
    codes = rng.integers(0, 2**bits, (n, k)).astype(np.uint8)
    lut = rng.integers(-4, 5, (n, 2**bits)).astype(np.float16)
    x = (rng.integers(-1, 2, (m, k)) * (rng.random((m, k)) < 0.2)).astype(np.float16)
    qweight = bitplane.pack(codes, bits)
    exact = ak.matmul_reference(x, qweight, lut, bits)
    W = np.take_along_axis(lut.astype(np.float64), codes.astype(np.int64), axis=1)     # (N, K)
    assert (np.abs(x.astype(np.float64)) @ np.abs(W).T).max() < 2048      # premise: no partial can round
    assert_bitexact(rc.anyprec_gemv(x, qweight, lut, bits), exact.astype(np.float16) + np.float16(0))

