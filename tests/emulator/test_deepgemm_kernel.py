"""DeepGEMM FP8 GEMM emulation: hand-worked exact cases, the promotion's two effects (a fresh wgmma chain per
K block, one fp32 rounding per K block), the plain-loop reference, the exact result whenever nothing can
round, and the input rules."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refsim.arith import fp, wgmma
from refsim.emulator import deepgemm_kernel as dg
from refsim.errors import DtypeError, FormatRuleError, ShapeError
from refsim.testing import assert_bitexact

# e4m3 codes (S.EEEE.MMM, bias 7) of the values the hand-worked cases use
E4M3 = {1.0: 0x38, 2.0: 0x40, 3.0: 0x44, 4.0: 0x48, 8.0: 0x50, 16.0: 0x58, 0.5: 0x30, -1.0: 0xB8, -2.0: 0xC0}


def assert_bf16_bits(actual, expected, name="D"):
    """Raw-bit equality of two bfloat16 arrays (assert_bitexact reports on their uint16 views)."""
    assert actual.dtype.name == expected.dtype.name == "bfloat16", (actual.dtype, expected.dtype)
    assert_bitexact(actual.view(np.uint16), expected.view(np.uint16), name)


def _codes(values) -> np.ndarray:
    return np.vectorize(lambda v: E4M3[float(v)], otypes=[np.uint8])(np.asarray(values, np.float64))


def _bf16(values) -> np.ndarray:
    return fp.cvt_f64_to_bf16(np.asarray(values, np.float64))


def test_hand_worked_integer_case_is_exact():
    # A = 1 everywhere, row j of B = v_j everywhere; K = 256 (two K blocks) with scales that multiply to 1:
    # block 0: sfa 0.25 * sfb 4 = 1, block 1: sfa 2 * sfb 0.5 = 1, so D[i, j] = 256 v_j, every step exact.
    v = [1.0, 2.0, 3.0, 4.0, 0.5, -1.0, -2.0, 8.0]
    A = _codes(np.ones((2, 256)))
    B = _codes(np.repeat(np.array(v)[:, None], 256, axis=1))
    sfa = np.array([[0.25, 2.0], [0.25, 2.0]], np.float32)
    sfb = np.array([[4.0, 0.5]], np.float32)
    expected = _bf16([[256, 512, 768, 1024, 128, -256, -512, 2048]] * 2)
    assert_bf16_bits(dg.deepgemm_fp8_gemm(A, sfa, B, sfb), expected)
    assert_bf16_bits(dg.deepgemm_fp8_gemm_reference(A, sfa, B, sfb), expected, "reference")


def test_promotion_restarts_the_wgmma_chain_each_k_block():
    # K block 0: 128 products 16 * 8 = 2^7, sum 2^14; K block 1: 128 products 1 * 1, sum 2^7.
    # DeepGEMM promotes after block 0 and starts block 1 from scale-d = 0, so block 1 is exact:
    # D = 2^14 + 2^7 = 16512. One wgmma chain over all of K (no promotion) aligns block 1's products to
    # E = 14, where 13 fraction bits end at 2^1: every product of 1 truncates to 0 and D stays 16384.
    A = _codes(np.concatenate([np.full((1, 128), 16.0), np.ones((1, 128))], axis=1))
    B = _codes(np.concatenate([np.full((8, 128), 8.0), np.ones((8, 128))], axis=1))
    ones_a, ones_b = np.ones((1, 2), np.float32), np.ones((1, 2), np.float32)
    assert_bf16_bits(dg.deepgemm_fp8_gemm(A, ones_a, B, ones_b), _bf16(np.full((1, 8), 16512.0)))
    # the same data through one unpromoted chain of the wgmma model (rows padded to the instruction's 64)
    Ap = np.zeros((wgmma.M, 256), np.uint8)
    Ap[0] = A[0]
    D = np.zeros((wgmma.M, 8), np.float32)
    for k0 in range(0, 256, 32):
        D = wgmma.wgmma("f32.e4m3.e4m3", Ap[:, k0:k0 + 32], B[:, k0:k0 + 32].T.copy(), D, scale_d=k0 > 0)
    assert D[0, 0] == 16384.0


def test_promotion_rounds_once_per_k_block():
    # Block 0: partial 3 (three products 1 * 1), scale (1 + 2^-23) * 1; block 1: partial -3, scale 1.
    # Promotion: fma(1 + 2^-23, 3, 0) = 3 + 3*2^-23 rounds to 3 + 2^-21 (1.5 ulp: the tie goes to the even
    # 3 + 2 ulp); then fma(1, -3, 3 + 2^-21) = 2^-21. One fp32 rounding of the whole sum would give 3*2^-23.
    a = np.zeros((1, 256))
    a[0, :3] = 1.0
    a[0, 128:131] = 1.0
    b = np.zeros((8, 256))
    b[:, :3] = 1.0
    b[:, 128:131] = -1.0
    A = np.where(a == 0, 0, _codes(np.where(a == 0, 1.0, a))).astype(np.uint8)
    B = np.where(b == 0, 0, _codes(np.where(b == 0, 1.0, b))).astype(np.uint8)
    sfa = np.array([[1.0 + 2.0**-23, 1.0]], np.float32)
    sfb = np.ones((1, 2), np.float32)
    got = dg.deepgemm_fp8_gemm(A, sfa, B, sfb)
    assert_bf16_bits(got, _bf16(np.full((1, 8), 2.0**-21)))
    assert_bf16_bits(dg.deepgemm_fp8_gemm_reference(A, sfa, B, sfb), got, "reference")
    assert float(_bf16(3 * 2.0**-23)[()]) != float(got[0, 0])


def _e4m3(draw, shape, values):
    return np.asarray(draw(st.lists(st.sampled_from(values), min_size=int(np.prod(shape)),
                                    max_size=int(np.prod(shape)))), np.uint8).reshape(shape)


ALL_FINITE = [c for c in range(256) if c & 0x7F != 0x7F]


@settings(max_examples=4, deadline=None)
@given(data=st.data(), m=st.integers(1, 2), n8=st.just(1), kbs=st.integers(1, 2))
def test_equals_the_plain_loop_reference(data, m, n8, kbs):
    n, k = 8 * n8, 128 * kbs
    A, B = _e4m3(data.draw, (m, k), ALL_FINITE), _e4m3(data.draw, (n, k), ALL_FINITE)
    exps = st.integers(-8, 8)
    sfa = np.ldexp(1.0 + np.array(data.draw(st.lists(st.integers(0, 2**23 - 1), min_size=m * kbs, max_size=m * kbs)))
                   / 2**23, data.draw(exps)).astype(np.float32).reshape(m, kbs)
    sfb = np.float32(2.0 ** data.draw(exps)) * np.ones((1, kbs), np.float32)
    assert_bf16_bits(dg.deepgemm_fp8_gemm(A, sfa, B, sfb, native=False), dg.deepgemm_fp8_gemm_reference(A, sfa, B, sfb))


SMALL_INTS = [0x00, 0x38, 0x40, 0x44, 0x48, 0xB8, 0xC0, 0xC4, 0xC8]    # 0, +-1, +-2, +-3, +-4


@settings(max_examples=15, deadline=None)
@given(m=st.integers(1, 5), n8=st.integers(1, 4), kbs=st.integers(1, 3), seed=st.integers(0, 2**32 - 1))
def test_exact_whenever_nothing_can_round(m, n8, kbs, seed):
    """Integer products of magnitude <= 16, at most 384 of them, power-of-two scales: every partial, scale
    product and promotion is exact, so D is the exact product rounded once to bf16."""
    n, k = 8 * n8, 128 * kbs
    rng = np.random.default_rng(seed)
    A = rng.choice(np.array(SMALL_INTS, np.uint8), (m, k))
    B = rng.choice(np.array(SMALL_INTS, np.uint8), (n, k))
    sfa = np.ldexp(1.0, rng.integers(-6, 7, (m, kbs))).astype(np.float32)
    sfb = np.ldexp(1.0, rng.integers(-6, 7, (1, kbs))).astype(np.float32)
    a = dg_values(A) * np.repeat(sfa.astype(np.float64), 128, axis=1)       # (M, K) real values
    b = dg_values(B) * np.repeat(sfb.astype(np.float64), 128, axis=1)       # (N, K)
    exact = a @ b.T                                    # float64: integers times powers of two, exact
    assert_bf16_bits(dg.deepgemm_fp8_gemm(A, sfa, B, sfb), fp.cvt_f64_to_bf16(exact), f"seed {seed}")


def dg_values(codes: np.ndarray) -> np.ndarray:
    table = {c: v for v, c in E4M3.items()} | {0x00: 0.0, 0xC4: -3.0, 0xC8: -4.0}
    return np.vectorize(table.__getitem__, otypes=[np.float64])(codes)


def test_input_rules():
    A, B = np.zeros((2, 128), np.uint8), np.zeros((8, 128), np.uint8)
    sfa, sfb = np.ones((2, 1), np.float32), np.ones((1, 1), np.float32)
    with pytest.raises(FormatRuleError, match="NaN"):
        dg.deepgemm_fp8_gemm(np.full((2, 128), 0x7F, np.uint8), sfa, B, sfb)
    with pytest.raises(ShapeError, match="128"):
        dg.deepgemm_fp8_gemm(A[:, :96], sfa, B[:, :96], sfb)
    with pytest.raises(ShapeError, match="% 8"):
        dg.deepgemm_fp8_gemm(A, sfa, B[:6], sfb)
    with pytest.raises(ShapeError, match="sfa"):
        dg.deepgemm_fp8_gemm(A, np.ones((2, 2), np.float32), B, sfb)
    with pytest.raises(ShapeError, match="sfb"):
        dg.deepgemm_fp8_gemm(A, sfa, B, np.ones((2, 1), np.float32))
    with pytest.raises(DtypeError, match="e4m3"):
        dg.deepgemm_fp8_gemm(A.astype(np.int8), sfa, B, sfb)
    with pytest.raises(DtypeError):
        dg.deepgemm_fp8_gemm(A, sfa.astype(np.float64), B, sfb)
    with pytest.raises(ShapeError, match="K"):
        dg.deepgemm_fp8_gemm(A, sfa, np.zeros((8, 256), np.uint8), sfb)
    A0 = A.copy()
    dg.deepgemm_fp8_gemm(A, sfa, B, sfb)
    assert_bitexact(A, A0, "A unchanged")


def test_hand_worked_block_truncates_below_the_largest_exponent():
    # k 0..31: products 32 * 16 = 2^9, sum 2^14 (E = 14: 13 fraction bits end at 2^1);
    # k 32..127: products 1 * 1, each aligned below 2^1 and truncated to 0. Exact sum: 16384 + 96.
    a = np.full((1, 128), 0x38, np.uint8)          # 1.0
    a[0, :32] = 0x60                               # 32.0
    b = np.full((8, 128), 0x38, np.uint8)
    b[:, :32] = 0x58                               # 16.0
    for native in (None, False):                   # the compiled twin (where built) and the NumPy definition
        got = dg.kblock_partials(a, b, native=native)
        assert got.shape == (1, 1, 8)
        assert_bitexact(got, np.full((1, 1, 8), 16384.0, np.float32))
        # products first: 1.0 terms in step 0 are exact (E = 0), then 2^9 terms in step 1 keep C = 32 exactly
        assert_bitexact(dg.kblock_partials(a[:, ::-1].copy(), b[:, ::-1].copy(), native=native),
                        np.full((1, 1, 8), 16384.0 + 96.0, np.float32))
