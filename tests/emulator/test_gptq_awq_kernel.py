"""W4A16 GEMV emulation (gptq_awq.cu's arithmetic): plain-loop twin, hand-worked rounding order,
exact inputs, checkpoint decoding, bad input; properties: the plain-loop twin on drawn shapes and values
(signed zeros, subnormals, ties, overflow to inf), the exact product when no partial sum can round."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refsim.emulator import gptq_awq_kernel as ek
from refsim.errors import DtypeError, FormatRuleError, ShapeError
from refsim.formats import awq, gptq
from refsim.testing import assert_bitexact, examples


def _gptq(rng, k, n, group, fmt="gptq_v2", act_order=False):
    q = rng.integers(0, 16, (k, n))
    g = k // group
    zeros = rng.integers(1 if fmt == "gptq" else 0, 16, (g, n))
    scales = (rng.random((g, n)) * 0.02 + 0.001).astype(np.float32)
    g_idx = rng.permutation(np.arange(k) // group).astype(np.int32) if act_order else None
    return gptq.pack(q, scales, zeros, 4, g_idx=g_idx, group_size=group, checkpoint_format=fmt)


def _awq(rng, k, n, group):
    g = k // group
    return awq.pack(rng.integers(0, 16, (k, n)), (rng.random((g, n)) * 0.02 + 0.001).astype(np.float32),
                    rng.integers(0, 16, (g, n)), group_size=group)


@pytest.mark.parametrize("m,k,n", [(1, 8, 1), (3, 32, 5), (8, 64, 3)])
def test_vectorised_emulation_equals_plain_loop_twin(m, k, n):
    rng = np.random.default_rng(m * 100 + k + n)
    W = (rng.standard_normal((k, n)) * 0.1).astype(np.float16)
    x = rng.standard_normal((m, k)).astype(np.float16)
    assert_bitexact(ek.dequant_gemv(x, W), ek.dequant_gemv_reference(x, W), name="y")


def test_rounding_order_follows_the_chains_then_fp32_slabs():
    # chain .x of slab 0: 1024 + 0.5 + 0.5 in fp16 (ulp(1024) = 1) ties to even twice: 1024;
    # one fp32 sum over all of K would give 1027. Slab 1 adds 2 exactly in fp32: 1026.
    W = np.zeros((16, 1), np.float16)
    x = np.zeros((1, 16), np.float16)
    W[[0, 2, 4], 0] = [1024, 0.5, 0.5]
    x[0, [0, 2, 4]] = 1
    W[8, 0], x[0, 8] = 2, 1
    y = ek.dequant_gemv(x, W)
    assert float(y[0, 0]) == 1026


def test_small_integer_inputs_give_the_exact_product():
    rng = np.random.default_rng(7)
    W = rng.integers(-4, 5, (64, 6)).astype(np.float16)
    x = rng.integers(-4, 5, (2, 64)).astype(np.float16)
    exact = (x.astype(np.int64) @ W.astype(np.int64)).astype(np.float16)
    assert_bitexact(ek.dequant_gemv(x, W), exact, name="y")


@pytest.mark.parametrize("fmt,act_order", [("gptq", False), ("gptq_v2", False), ("gptq_v2", True)])
def test_gptq_gemv_multiplies_the_formats_dequantized_weights(fmt, act_order):
    rng = np.random.default_rng(3)
    ckpt = _gptq(rng, 64, 32, 32, fmt, act_order)
    x = rng.standard_normal((2, 64)).astype(np.float16)
    W = gptq.dequantize(ckpt)
    assert_bitexact(ek.gptq_gemv(x, ckpt), ek.dequant_gemv_reference(x, W), name="y")


def test_awq_gemv_multiplies_the_formats_dequantized_weights():
    rng = np.random.default_rng(4)
    ckpt = _awq(rng, 32, 16, 16)
    x = rng.standard_normal((1, 32)).astype(np.float16)
    assert_bitexact(ek.awq_gemv(x, ckpt), ek.dequant_gemv_reference(x, awq.dequantize(ckpt)), name="y")


def test_bad_input_is_refused_with_the_rule():
    W = np.zeros((8, 2), np.float16)
    with pytest.raises(FormatRuleError, match="1..8"):
        ek.dequant_gemv(np.zeros((9, 8), np.float16), W)
    with pytest.raises(ShapeError, match="K = 8"):
        ek.dequant_gemv(np.zeros((1, 16), np.float16), W)
    with pytest.raises(ShapeError, match="multiple of 8"):
        ek.dequant_gemv(np.zeros((1, 4), np.float16), np.zeros((4, 2), np.float16))
    with pytest.raises(DtypeError):
        ek.dequant_gemv(np.zeros((1, 8), np.float32), W)
    rng = np.random.default_rng(0)
    ckpt3 = gptq.pack(rng.integers(0, 8, (32, 32)), np.ones((1, 32)), np.ones((1, 32), np.int64), 3)
    with pytest.raises(FormatRuleError, match="4-bit"):
        ek.gptq_gemv(np.zeros((1, 32), np.float16), ckpt3)


# --------------------------------------------------------------------------- properties (hypothesis)
SPECIAL = np.array([0.0, -0.0, 2.0**-24, -(2.0**-24), 2.0**-14, 1.0, 1.0 + 2.0**-10, 2.0**-11, 2048.0, 65504.0],
                   np.float16)


@settings(max_examples=examples(25))
@given(seed=st.integers(0, 2**31 - 1), m=st.integers(1, 8), slabs=st.integers(1, 4), n=st.integers(1, 5),
       share=st.sampled_from([0.0, 0.3, 1.0]))
def test_vectorised_equals_plain_loop_twin(seed, m, slabs, n, share):
    rng = np.random.default_rng(seed)
    k = 8 * slabs
    W = rng.standard_normal((k, n)).astype(np.float16)
    x = rng.standard_normal((m, k)).astype(np.float16)
    for a in (W, x):
        pick = rng.random(a.shape) < share
        a[pick] = SPECIAL[rng.integers(0, SPECIAL.size, int(pick.sum()))] * np.where(rng.random(int(pick.sum())) < 0.5, -1, 1).astype(np.float16)
    assert_bitexact(ek.dequant_gemv(x, W), ek.dequant_gemv_reference(x, W), name="y")


@settings(max_examples=examples(25))
@given(seed=st.integers(0, 2**31 - 1), m=st.integers(1, 8), slabs=st.integers(1, 16))
def test_small_integers_give_the_exact_product(seed, m, slabs):
    rng = np.random.default_rng(seed)
    k = 8 * slabs
    W = rng.integers(-15, 16, (k, 3)).astype(np.float16)      # q - z of a 4-bit code, scale 1
    x = rng.integers(-1, 2, (m, k)).astype(np.float16)        # partial sums stay below 2^11
    exact = (x.astype(np.int64) @ W.astype(np.int64)).astype(np.float16) + np.float16(0)
    assert_bitexact(ek.dequant_gemv(x, W), exact, name="y")
