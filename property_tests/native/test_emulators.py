"""Property: the compiled emulator kernel gives the NumPy path's bits for any finite operands,
any accumulator, any architecture, and (through the Marlin emulation) any partition."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refsim.emulator import marlin_kernel as mk
from refsim.native import emulators as native
from refsim.arith import tensor_core as tc
from refsim.formats import marlin
from refsim.testing import assert_bitexact, examples

pytestmark = pytest.mark.skipif(not native.available(), reason="no compiled emulator kernels (no C compiler)")


def _finite_f16(rng, shape):
    """Random fp16 bit patterns with the Inf/NaN exponent replaced: every finite class appears."""
    u = rng.integers(0, 1 << 16, shape, dtype=np.uint32).astype(np.uint16)
    special = (u & 0x7C00) == 0x7C00
    u[special] &= 0xBFFF                                  # exponent 31 -> 15: a finite value
    return u.view(np.float16)


@settings(max_examples=examples(200))
@given(arch=st.sampled_from(["sm_70", "sm_80", "sm_90"]), r=st.integers(1, 5), n=st.integers(1, 40),
       w=st.integers(1, 4), seed=st.integers(0, 2**32 - 1))
def test_compiled_k16_step_equals_numpy_on_any_finite_bits(arch, r, n, w, seed):
    rng = np.random.default_rng(seed)
    k = 16 * w
    A, B = _finite_f16(rng, (r, k)), _finite_f16(rng, (k, n))
    acc = rng.integers(0, 1 << 32, (w, r, n), dtype=np.uint64).astype(np.uint32)
    acc[(acc & 0x7F800000) == 0x7F800000] &= 0xBFFFFFFF   # finite accumulators, all classes
    acc = acc.view(np.float32)
    kb = rng.permutation(w)
    a, b = tc.MmaOperand(A), tc.MmaOperand(B)
    assert_bitexact(tc.mma_k16_f32_steps(arch, a, b, kb, acc, native=True),
                    tc.mma_k16_f32_steps(arch, a, b, kb, acc, native=False), arch)


@settings(max_examples=examples(40))
@given(m=st.integers(1, 20), k=st.sampled_from([128, 256, 512]), gs=st.sampled_from([128, None]),
       sms=st.integers(1, 40), seed=st.integers(0, 2**16), arch=st.sampled_from(["sm_80", "sm_90"]))
def test_marlin_emulation_is_the_same_on_both_paths_for_any_partition(m, k, gs, sms, seed, arch):
    rng = np.random.default_rng(seed)
    n = 256
    q = rng.integers(0, 16, (k, n)).astype(np.uint8)
    g = 1 if gs is None else k // gs
    B, s = marlin.pack(q, (rng.random((g, n)) * 0.05 + 1e-3).astype(np.float16), gs)
    A = (rng.standard_normal((m, k)) * 2.0 ** rng.integers(-12, 6, (m, k))).astype(np.float16)
    assert_bitexact(mk._gemm(A, B, s, arch, sms, 16, None, None, native=True),
                    mk._gemm(A, B, s, arch, sms, 16, None, None, native=False), "Marlin paths")


@settings(max_examples=examples(60))
@given(m=st.integers(1, 8), n16=st.integers(1, 3), k32=st.integers(1, 80), bits=st.integers(3, 8),
       scale_exp=st.integers(-20, 10), seed=st.integers(0, 2**32 - 1))
def test_compiled_anyprec_equals_numpy_for_any_launch(m, n16, k32, bits, scale_exp, seed):
    """Any legal launch (tail chunks, every bit width, weights from tiny to overflowing), any finite x."""
    from refsim.emulator import anyprec_kernel as ak
    from refsim.formats import bitplane

    rng = np.random.default_rng(seed)
    n, k = (4 if m == 1 else 16) * n16, 32 * k32
    q = bitplane.pack(rng.integers(0, 1 << bits, (n, k)).astype(np.uint8), bits)
    lut = (rng.standard_normal((n, 1 << bits)) * 2.0**scale_exp).astype(np.float16)
    x = _finite_f16(rng, (m, k))
    assert_bitexact(ak.anyprec_gemv(x, q, lut, bits, native=True), ak.anyprec_gemv(x, q, lut, bits, native=False),
                    f"m={m} n={n} k={k} bits={bits}")


@settings(max_examples=examples(60))
@given(g=st.integers(1, 6), n=st.integers(1, 600), specials=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_compiled_mixed_group_sums_equal_numpy_on_any_bits(g, n, specials, seed):
    """Step 3 of the 2/4/16 GEMV on any fp16 weights (with +-Inf and the default NaN when
    ``specials``) and any finite activations: both paths, raw bits."""
    from refsim.emulator import mixed_2_4_16_kernel as mx

    rng = np.random.default_rng(seed)
    w = _finite_f16(rng, (16 * g, n))
    if specials:
        pick = rng.random(w.shape)
        with np.errstate(invalid="ignore"):
            w[pick < 0.03] = np.float16(np.inf) * np.float16(0.0)
        w[(pick >= 0.03) & (pick < 0.06)] = np.float16(np.inf) * rng.choice([-1, 1])
    x = _finite_f16(rng, 16 * g)
    assert_bitexact(native.mixed_group_sums(w, x), mx.group_sums(w, x), f"G={g} N={n}")


@settings(max_examples=examples(20))
@given(k=st.sampled_from([16, 128, 640, 1040]), n=st.sampled_from([16, 48]), alpha=st.sampled_from([0.0, 0.25, 1.0]),
       seed=st.integers(0, 2**16))
def test_mixed_gemv_and_dequantization_are_the_same_on_both_paths(k, n, alpha, seed):
    from refsim.emulator import mixed_2_4_16_kernel as mx
    from refsim.formats import mixed_2_4_16 as fmt

    rng = np.random.default_rng(seed)
    W = (rng.standard_normal((k, n)) * 0.05 * 2.0 ** rng.integers(-4, 4, (k, n))).astype(np.float32)
    X = rng.standard_normal((32, k))
    p = fmt.pack(fmt.quantize(W, X.T @ X / 32 + np.eye(k), alpha=alpha, outlier_ratio=0.005))
    assert_bitexact(mx.dequantized_weights(p), mx.dequantized_weights_reference(p), "dequantized weights")
    x = _finite_f16(rng, k)
    assert_bitexact(mx.mixed_gemv(p, x, native=True), mx.mixed_gemv(p, x, native=False), "mixed_gemv")


@settings(max_examples=examples(60))
@given(g=st.integers(1, 6), n=st.integers(1, 600), four=st.booleans(), specials=st.booleans(),
       seed=st.integers(0, 2**32 - 1))
def test_compiled_fused_dequantization_and_chains_equal_the_op_by_op_numpy_form(g, n, four, specials, seed):
    """Steps 2-3 fused in C (weights formed in registers) against ``fp16(q - z) * s_hat`` through
    :func:`refsim.arith.fp.f16_mul` then :func:`mixed_2_4_16_kernel.group_sums`: any codes, any
    zero points, any s_hat bits (with +-Inf, whose products with q == z give NaN, when ``specials``)."""
    from refsim.arith import fp
    from refsim.emulator import mixed_2_4_16_kernel as mx

    rng = np.random.default_rng(seed)
    top = 16 if four else 4
    q = rng.integers(0, top, (16 * g, n)).astype(np.uint8)
    zero = rng.integers(0, top, (g, n)).astype(np.uint8)
    s_hat = _finite_f16(rng, (g, n))
    if specials:
        s_hat[rng.random((g, n)) < 0.05] = np.float16(np.inf) * rng.choice([-1, 1])
    x = _finite_f16(rng, 16 * g)
    qz = q.astype(np.int32).reshape(g, 16, n) - zero.astype(np.int32)[:, None, :]
    w = fp.f16_mul(fp.cvt_int_to_f16(qz), s_hat[:, None, :]).reshape(16 * g, n)
    assert_bitexact(native.mixed_dense_group_sums(q, zero, s_hat, x), mx.group_sums(w, x), f"G={g} N={n}")
