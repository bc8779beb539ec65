"""Property: the Any-Precision and Atom emulations return the exact product whenever no step can
round (integer tables/codes, power-of-two scales, sums far below the fp16/fp32 precision limits)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from refsim.emulator import anyprec_kernel as ak
from refsim.emulator import atom_kernel as atk
from refsim.formats import atom
from refsim.formats import bitplane as bp
from refsim.testing import assert_bitexact, examples


@settings(max_examples=examples(20))
@given(m=st.sampled_from([1, 2, 4]), k=st.sampled_from([32, 96, 1024, 1088]), bits=st.integers(3, 8),
       seed=st.integers(0, 2**16))
def test_anyprec_exact_inputs_give_the_exact_product(m, k, bits, seed):
    rng = np.random.default_rng(seed)
    n = 16
    codes = rng.integers(0, 2**bits, (n, k)).astype(np.uint8)
    lut = rng.integers(-3, 4, (n, 2**bits)).astype(np.float16)
    x = (rng.integers(-1, 2, (m, k)) * (rng.random((m, k)) < 0.2)).astype(np.float16)
    W = np.take_along_axis(lut.astype(np.float64), codes.astype(np.int64), axis=1)
    if (np.abs(x.astype(np.float64)) @ np.abs(W).T).max() >= 2048:   # keep every partial exact in fp16
        x = np.zeros_like(x)
    expected = (x.astype(np.float64) @ W.T).astype(np.float16) + np.float16(0)
    assert_bitexact(ak.anyprec_gemv(x, bp.pack(codes, bits), lut, bits), expected)


@settings(max_examples=examples(20))
@given(m=st.integers(1, 4), groups=st.integers(1, 3), keeper=st.sampled_from([0, 128]),
       seed=st.integers(0, 2**16), fused=st.booleans())
def test_atom_exact_inputs_give_the_exact_product(m, groups, keeper, seed, fused):
    rng = np.random.default_rng(seed)
    n, kb = 16, 128 * groups
    a = atom.AtomActivations(rng.integers(-8, 8, (m, kb)).astype(np.int8),
                             (2.0 ** rng.integers(-6, -2, (m, groups))).astype(np.float16),
                             rng.integers(-8, 9, (m, keeper)).astype(np.int8),
                             (2.0 ** rng.integers(-6, -2, m)).astype(np.float16))
    s4 = np.repeat((2.0 ** rng.integers(-6, -2, (groups, n // 2))), 2, axis=1).astype(np.float16)
    w = atom.AtomWeights(rng.integers(-8, 8, (kb, n)).astype(np.int8), s4,
                         rng.integers(-8, 9, (keeper, n)).astype(np.int8),
                         np.repeat(2.0 ** rng.integers(-6, -2, n // 2), 2).astype(np.float16))  # pair-equal
    # exact value: integer dot products (|p| <= 8192 per group, 8704 tail) times power-of-two scale
    # products in [2^-12, 2^-6]: |value| < 2^9 on the grid 2^-12, so every fp32 partial sum is exact
    exact = np.zeros((m, n))
    for g in range(groups):
        sl = slice(128 * g, 128 * (g + 1))
        p = a.q4[:, sl].astype(np.int64) @ w.q4[sl].astype(np.int64)
        exact += p * (a.scale4[:, g, None].astype(np.float64) * w.scale4[g][None, :].astype(np.float64))
    exact += (a.q8.astype(np.int64) @ w.q8.astype(np.int64)) * (a.scale8[:, None].astype(np.float64) *
                                                                 w.scale8[None, :].astype(np.float64))
    assert np.array_equal(exact.astype(np.float32).astype(np.float64), exact)  # premise
    expected = exact.astype(np.float16)  # one rounding of the exact value
    assert_bitexact(atk.atom_group_gemm(a, w, fused=fused), expected + np.float16(0))


def _f16_bits(rng, shape, finite=True):
    """Random fp16 bit patterns (every class: subnormals, huge values); Inf/NaN mapped to finite."""
    u = rng.integers(0, 1 << 16, shape, dtype=np.uint32).astype(np.uint16)
    if finite:
        u[(u & 0x7C00) == 0x7C00] &= 0xBFFF
    return u.view(np.float16)


@settings(max_examples=examples(60))
@given(m=st.integers(1, 40), n2=st.integers(1, 20), groups=st.integers(1, 4), group=st.sampled_from([64, 128, 192]),
       keeper=st.sampled_from([0, 32, 128]), fused=st.booleans(), extreme=st.booleans(),
       native=st.sampled_from([None, False]), seed=st.integers(0, 2**32 - 1))
def test_atom_fast_group_sums_equal_the_mma_slabs_bit_for_bit(m, n2, groups, group, keeper, fused, extreme, native,
                                                              seed):
    """The BLAS group sums of :func:`atom_group_gemm`, with the compiled epilogue (native=None, when a
    compiler exists) or the NumPy one (False), give the bits of the slab-by-slab ``mma_int`` form for
    any codes (extreme: every code at the range ends) and any finite scales."""
    rng = np.random.default_rng(seed)
    n, kb = 2 * n2, group * groups

    def codes(shape, lo, hi):
        return (rng.choice([lo, hi], shape) if extreme else rng.integers(lo, hi + 1, shape)).astype(np.int8)

    a = atom.AtomActivations(codes((m, kb), -8, 7), _f16_bits(rng, (m, groups)), codes((m, keeper), -128, 127),
                             _f16_bits(rng, m))
    w = atom.AtomWeights(codes((kb, n), -8, 7), _f16_bits(rng, (groups, n)), codes((keeper, n), -128, 127),
                         _f16_bits(rng, n))
    assert_bitexact(atk.atom_group_gemm(a, w, fused=fused, native=native), atk.atom_group_gemm_slabs(a, w, fused=fused),
                    f"m={m} n={n} groups={groups}x{group} keeper={keeper}")
