"""refsim.emulator.dequant_gemm: the weight-only GEMM the block-scaled formats' checks state."""

import numpy as np
import pytest

from refsim.arith.fp import raw_bits
from refsim.emulator.dequant_gemm import dequant_gemm, dequant_gemm_reference
from refsim.errors import DtypeError, ShapeError


def test_the_sum_is_one_fp32_chain_over_k_ascending():
    # 2^26 + 1 rounds to 2^26 in fp32 (ulp 8), then -2^26 cancels it: 0, not the exact 1
    x = np.array([[8192, 1, 8192]], np.float16)
    w = np.array([[8192], [1], [-8192]], np.float32)
    assert raw_bits(dequant_gemm(x, w)).tolist() == [[0x0000]]
    # the large terms cancelling first keep the 1: the order is part of the contract
    order = [0, 2, 1]
    assert raw_bits(dequant_gemm(x[:, order], w[order])).tolist() == [[0x3C00]]


def test_each_weight_is_rounded_to_fp16_once_before_the_product():
    # w = 1 + 2^-12 rounds to 1 in fp16 (ulp 2^-10): y = 2048 * 1, not 2048.5
    x = np.array([[2048]], np.float16)
    w = np.array([[1 + 2.0**-12]], np.float32)
    assert raw_bits(dequant_gemm(x, w)).tolist() == [[0x6800]]


def test_a_nan_weight_writes_the_canonical_nan_whatever_the_activation():
    x = np.array([[0.0, 1.0], [2.0, 0.0]], np.float16)
    w = np.array([[np.nan, 1.0], [1.0, 1.0]], np.float32)
    y = raw_bits(dequant_gemm(x, w))
    assert y[:, 0].tolist() == [0x7FFF, 0x7FFF] and y[:, 1].tolist() == [0x3C00, 0x4000]


def test_vectorised_and_plain_loops_agree_bit_for_bit_with_subnormals_and_overflow():
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((3, 40)) * 2.0 ** rng.integers(-20, 9, (3, 40))).astype(np.float16)
    w = (rng.standard_normal((40, 5)) * 2.0 ** rng.integers(-26, 17, (40, 5))).astype(np.float32)
    assert np.array_equal(raw_bits(dequant_gemm(x, w)), raw_bits(dequant_gemm_reference(x, w)))


@pytest.mark.parametrize("x, w, err", [
    (np.zeros((1, 2), np.float32), np.zeros((2, 1), np.float32), DtypeError),
    (np.zeros((1, 2), np.float16), np.zeros((3, 1), np.float32), ShapeError),
    (np.zeros((1, 0), np.float16), np.zeros((0, 1), np.float32), ShapeError),
])
def test_bad_operands_are_refused_by_rule(x, w, err):
    with pytest.raises(err):
        dequant_gemm(x, w)
