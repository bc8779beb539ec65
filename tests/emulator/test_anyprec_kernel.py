"""Any-Precision GEMV emulation: plain-loop twin, shuffle-tree association, exact inputs, K-split rule;
property: on drawn integer tables and power-of-two scales (nothing can round) the result is the exact product."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refsim.emulator import anyprec_kernel as ak
from refsim.emulator import anyprec_kernel as ek
from refsim.errors import FormatRuleError
from refsim.formats import bitplane as bp
from refsim.testing import assert_bitexact, examples


def _problem(rng, m, n, k, bits, lut_scale=0.05):
    codes = rng.integers(0, 2**bits, (n, k)).astype(np.uint8)
    lut = (rng.standard_normal((n, 2**bits)) * lut_scale).astype(np.float16)
    x = rng.standard_normal((m, k)).astype(np.float16)
    return x, bp.pack(codes, bits), lut, codes


@pytest.mark.parametrize("m,n,k,bits", [(1, 4, 1024, 4), (1, 4, 1088, 8), (2, 16, 96, 3)])
def test_vectorised_emulation_equals_plain_loop_twin(m, n, k, bits):
    x, q, lut, _ = _problem(np.random.default_rng(k + bits), m, n, k, bits)
    assert_bitexact(ek.anyprec_gemv(x, q, lut, bits), ek.anyprec_gemv_reference(x, q, lut, bits))


def test_warp_tree_is_the_shfl_down_association():
    rng = np.random.default_rng(0)
    v = (rng.standard_normal(32) * 2.0 ** rng.integers(-6, 6, 32)).astype(np.float16)

    def add(a, b):
        return np.float16(a + b)

    s16 = [add(v[l], v[l + 16]) for l in range(16)]
    s8 = [add(s16[l], s16[l + 8]) for l in range(8)]
    s4 = [add(s8[l], s8[l + 4]) for l in range(4)]
    s2 = [add(s4[l], s4[l + 2]) for l in range(2)]
    lane0 = add(s2[0], s2[1])
    assert_bitexact(ek.warp_reduce_sum(v), lane0)
    assert_bitexact(np.asarray(ek.warp_reduce_sum_reference(v)), lane0)
    # lanes 1..31 end with partial garbage; only lane 0 is written (matmul.cuh)


def test_exact_inputs_give_the_exact_product():
    # integer table values and activations: every fp16 fma and add is exact (|sums| < 2048)
    rng = np.random.default_rng(1)
    m, n, k, bits = 2, 16, 1056, 3
    codes = rng.integers(0, 8, (n, k)).astype(np.uint8)
    lut = rng.integers(-2, 3, (n, 8)).astype(np.float16)
    x = (rng.integers(-1, 2, (m, k)) * (rng.random((m, k)) < 0.3)).astype(np.float16)
    W = np.take_along_axis(lut.astype(np.float64), codes.astype(np.int64), axis=1)
    assert (np.abs(x.astype(np.float64)) @ np.abs(W).T).max() < 2048
    expected = (x.astype(np.float64) @ W.T).astype(np.float16) + np.float16(0)
    assert_bitexact(ek.anyprec_gemv(x, bp.pack(codes, bits), lut, bits), expected)


def test_error_bound_against_exact_product():
    # each of the <= 16 fused fmas per chain and each fp16 add rounds once (<= 1/2 ulp16 of its
    # result, bounded by the ulp of the running magnitude); a loose bound: (K/32 + 40) ulp16(sum |x w|)
    rng = np.random.default_rng(2)
    x, q, lut, codes = _problem(rng, 1, 8, 2048, 4)
    O = ek.anyprec_gemv(x, q, lut, 4).astype(np.float64)
    W = np.take_along_axis(lut.astype(np.float64), codes.astype(np.int64), axis=1)
    exact = x.astype(np.float64) @ W.T
    mag = np.abs(x.astype(np.float64)) @ np.abs(W).T
    ulp = np.spacing(mag.astype(np.float16)).astype(np.float64)
    assert (np.abs(O - exact) <= (2048 / 32 + 40) * ulp).all()
    assert (O != exact.astype(np.float16)).any()  # it is not the correctly rounded product


@pytest.mark.parametrize("m,k,bits", [(1, 8192, 3), (1, 11008, 5), (2, 5120, 4), (8, 4128, 8), (1, 12320, 6)])
def test_long_k_without_a_ksplit_sums_every_chunk(m, k, bits):
    # integer tables and sparse +-1 activations: every fp16 fma and add is exact, so the kernel's
    # output is the exact product; a launch that dropped the chunks past the first four (K > 4096
    # without a K-split) is off by the dropped part's sum. Both paths (C and NumPy).
    rng = np.random.default_rng(k + bits)
    n = 16
    codes = rng.integers(0, 2**bits, (n, k)).astype(np.uint8)
    lut = rng.integers(1, 3, (n, 2**bits)).astype(np.float16)          # positive: no cancellation
    x = (rng.random((m, k)) < 0.1).astype(np.float16)                 # ~10 % ones
    W = np.take_along_axis(lut.astype(np.int64), codes.astype(np.int64), axis=1)
    exact = x.astype(np.int64) @ W.T
    assert exact.max() < 2048 and (x[:, 4096:] != 0).any()              # premise: exact in fp16, tail nonzero
    q = bp.pack(codes, bits)
    for native in (True, False):
        assert_bitexact(ek.anyprec_gemv(x, q, lut, bits, native=native), exact.astype(np.float16),
                        name=f"native={native}")


def test_overflowing_partial_sums_give_the_canonical_nan():
    # +65504 * 2 and -65504 * 2 overflow to +Inf and -Inf in the two chains; their sum is NaN, which
    # the GPU writes as 0x7FFF (the official kernel and anyprec.cu, through refsim.ptx), not x86's 0xFE00
    x = np.array([[65504.0, -65504.0] * 16], np.float16)
    q = bp.pack(np.zeros((4, 32), np.uint8), 3)
    lut = np.full((4, 8), 2.0, np.float16)
    for native in (True, False):
        out = ek.anyprec_gemv(x, q, lut, 3, native=native)
        assert out.view(np.uint16).tolist() == [[0x7FFF] * 4]


def test_error_bound_holds_and_catches_a_dropped_chunk():
    # positive data: S ~ P, so the derived bound is a few percent of S, and dropping K past 4096
    # (the slices of a K-split applied to a launch without one) lands far outside it
    rng = np.random.default_rng(6)
    m, n, k, bits = 2, 16, 8192, 4
    codes = rng.integers(0, 16, (n, k)).astype(np.uint8)
    lut = (rng.random((n, 16)) * 0.02).astype(np.float16)
    x = (rng.random((m, k)) * 0.5).astype(np.float16)
    q = bp.pack(codes, bits)
    S, B = ek.error_bound(x, q, lut, bits)
    y = ek.anyprec_gemv(x, q, lut, bits).astype(np.float64)
    assert (np.abs(y - S) <= B).all()
    assert (np.abs(y - S) > 0).any()                                    # it is not the exact product
    W = np.take_along_axis(lut.astype(np.float64), codes.astype(np.int64), axis=1)
    first_4096 = x[:, :4096].astype(np.float64) @ W[:, :4096].T
    assert (np.abs(first_4096 - S) > B).all()


def test_ksplit_launch_needs_an_explicit_order():
    x, q, lut, _ = _problem(np.random.default_rng(3), 1, 4, 8192, 8)
    with pytest.raises(FormatRuleError, match="ksplit_order"):
        ek.anyprec_gemv(x, q, lut, 8)
    out = ek.anyprec_gemv(x, q, lut, 8, ksplit_order="ascending")
    assert out.shape == (1, 4) and out.dtype == np.float16
    with pytest.raises(FormatRuleError, match=r"a permutation of range\(2\)"):
        ek.anyprec_gemv(x, q, lut, 8, ksplit_order=(0, 0))


def test_ksplit_admissible_set_holds_every_slice_order_and_its_bound_holds_the_set():
    import itertools

    x, q, lut, _ = _problem(np.random.default_rng(4), 1, 16, 16384, 7)      # 4 slices: 24 orders
    s = ek.anyprec_gemv_admissible(x, q, lut, 7)
    assert s.exhaustive and s.orders == 24 and s.candidates.shape == (24, 1, 16)
    distinct = 0
    for order in itertools.permutations(range(4)):
        out = ek.anyprec_gemv(x, q, lut, 7, ksplit_order=order)
        assert assert_bitexact(out, s).startswith("array: in the admissible set of 24 orders")
        distinct += not np.array_equal(out.view(np.uint16), s.reference.view(np.uint16))
    assert distinct > 0                                      # the orders do give different bits here
    assert np.array_equal(s.reference.view(np.uint16), ek.anyprec_gemv(x, q, lut, 7, "ascending").view(np.uint16))
    bound = ek.anyprec_gemv_admissible(x, q, lut, 7, max_orders=6)
    assert not bound.exhaustive and "gamma_3" in bound.rule
    for cand in s.candidates:
        assert bound.contains(cand).all()


def test_without_a_ksplit_the_admissible_set_is_the_one_output():
    x, q, lut, _ = _problem(np.random.default_rng(5), 1, 4, 2048, 7)
    s = ek.anyprec_gemv_admissible(x, q, lut, 7)
    assert s.orders == 1
    assert_bitexact(s.reference, ek.anyprec_gemv(x, q, lut, 7))


# --------------------------------------------------------------------------- properties (hypothesis)
@settings(max_examples=examples(20))
@given(m=st.sampled_from([1, 2, 4, 8]), k=st.sampled_from([32, 96, 1024, 1088, 4128, 8192, 11008]),
       bits=st.integers(3, 8), seed=st.integers(0, 2**16))
def test_anyprec_exact_inputs_give_the_exact_product(m, k, bits, seed):
    rng = np.random.default_rng(seed)
    n = 16
    codes = rng.integers(0, 2**bits, (n, k)).astype(np.uint8)
    lut = rng.integers(-3, 4, (n, 2**bits)).astype(np.float16)
    x = (rng.integers(-1, 2, (m, k)) * (rng.random((m, k)) < min(0.2, 300 / k))).astype(np.float16)
    W = np.take_along_axis(lut.astype(np.float64), codes.astype(np.int64), axis=1)
    if (np.abs(x.astype(np.float64)) @ np.abs(W).T).max() >= 2048:   # keep every partial exact in fp16
        x = np.zeros_like(x)
    expected = (x.astype(np.float64) @ W.T).astype(np.float16) + np.float16(0)
    order = "ascending" if m == 1 and k > 4096 and bits >= 7 else None   # exact: every order agrees
    assert_bitexact(ak.anyprec_gemv(x, bp.pack(codes, bits), lut, bits, order), expected)
