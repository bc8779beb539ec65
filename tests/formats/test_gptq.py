"""GPTQ checkpoint format: stream packing, official-loop conformance, v1 zero-point semantics;
properties: unpack inverts pack for drawn qweight codes and qzeros."""

import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from refsim.formats import gptq
from refsim.testing import assert_bitexact


def autogptq_pack_loop(intweight: np.ndarray, bits: int) -> np.ndarray:
    """Independent plain-Python transliteration of the *behaviour* of AutoGPTQ's qlinear_cuda
    ``pack`` row loop (commit 058fd80): uint32 arithmetic, fields shifted without masking, the two
    straddling 3-bit values split as ``<< 30`` / ``>> 2 & 1`` and ``<< 31`` / ``>> 1 & 3``.
    intweight: (K, N) Python-int-valued array; returns uint32 (K*bits//32, N)."""
    M = 0xFFFFFFFF
    k, n = intweight.shape
    out = [[0] * n for _ in range(k * bits // 32)]
    for c in range(n):
        col = [int(v) & M for v in intweight[:, c]]
        i = row = 0
        while row < len(out):
            if bits in (2, 4, 8):
                for j in range(i, i + 32 // bits):
                    out[row][c] |= (col[j] << (bits * (j - i))) & M
                i += 32 // bits
                row += 1
            else:
                for j in range(i, i + 10):
                    out[row][c] |= (col[j] << (3 * (j - i))) & M
                i += 10
                out[row][c] |= (col[i] << 30) & M
                row += 1
                out[row][c] |= (col[i] >> 2) & 1
                i += 1
                for j in range(i, i + 10):
                    out[row][c] |= (col[j] << (3 * (j - i) + 1)) & M
                i += 10
                out[row][c] |= (col[i] << 31) & M
                row += 1
                out[row][c] |= (col[i] >> 1) & 3
                i += 1
                for j in range(i, i + 10):
                    out[row][c] |= (col[j] << (3 * (j - i) + 2)) & M
                i += 10
                row += 1
    return np.array(out, dtype=np.uint32)


@pytest.mark.parametrize("bits", gptq.BITS)
def test_pack_qweight_matches_the_official_loop_for_every_code(bits):
    rng = np.random.default_rng(bits)
    q = rng.integers(0, 1 << bits, (96, 7)).astype(np.uint8)
    q[:, 0] = np.arange(96) % (1 << bits)  # every code value appears in every row position class
    q[:, 1] = (1 << bits) - 1
    expected = autogptq_pack_loop(q, bits).view(np.int32)
    assert_bitexact(gptq.pack_qweight(q, bits), expected, name=f"qweight {bits}-bit")
    assert_bitexact(gptq.pack_qweight_reference(q, bits), expected, name="reference")


@pytest.mark.parametrize("bits", gptq.BITS)
def test_unpack_qweight_inverts_pack_and_agrees_with_reference(bits):
    rng = np.random.default_rng(10 + bits)
    q = rng.integers(0, 1 << bits, (64, 5)).astype(np.uint8)
    packed = gptq.pack_qweight(q, bits)
    assert_bitexact(gptq.unpack_qweight(packed, bits, 64), q)
    assert_bitexact(gptq.unpack_qweight_reference(packed, bits, 64), q)


def test_four_bit_word_worked_example():
    q = np.zeros((32, 1), np.uint8)
    q[:8, 0] = np.arange(1, 9)
    assert int(gptq.pack_qweight(q, 4).view(np.uint32)[0, 0]) == 0x87654321


def test_three_bit_straddling_values_land_in_the_documented_bits():
    # only value 10 set to 0b101 and value 21 set to 0b011
    q = np.zeros((32, 1), np.uint8)
    q[10, 0] = 0b101
    q[21, 0] = 0b011
    w = gptq.pack_qweight(q, 3).view(np.uint32)[:, 0]
    assert int(w[0]) == 0b01 << 30  # v10 bits 1..0 at 31..30
    assert int(w[1]) == (0b1 | (0b1 << 31))  # v10 bit 2 at bit 0; v21 bit 0 at bit 31
    assert int(w[2]) == 0b01  # v21 bits 2..1 at bits 1..0


def test_three_bit_straddling_value_is_decoded_from_two_words():
    # value 10 of a column: bits 30, 31 of word 0 (its low two bits) and bit 0 of word 1 (bit 2)
    qw = np.zeros((3, 1), dtype=np.int32)
    qw[0, 0] = np.array([0x40000000], dtype=np.uint32).view(np.int32)[0]  # bit 30 -> value 10 bit 0
    qw[1, 0] = 1  # bit 0 of word 1 -> value 10 bit 2
    for decode in (gptq.unpack_qweight, gptq.unpack_qweight_reference):
        q = decode(qw, 3, 32)
        assert q[10, 0] == 0b101 and int(q.sum()) == 5


def test_v1_zero_point_of_zero_corrupts_higher_fields_like_autogptq():
    z = np.full((1, 32), 8)
    z[0, 3] = 0
    with pytest.warns(gptq.ZeroPointOverflowWarning, match=r"columns \[3\]"):
        qz = gptq.pack_qzeros(z, 4)
    words = qz.view(np.uint32)
    assert int(words[0, 0]) == 0xFFFFF777  # documented output of the official pack
    assert int(words[0, 1]) == 0x77777777
    expected_loop = autogptq_pack_loop((z - 1).T, 4).T  # same stream along N
    assert_bitexact(words, expected_loop.astype(np.uint32))
    read = {r: gptq.unpack_qzeros(qz, 4, 32, reader=r)[0, :9].tolist() for r in gptq.V1_ZERO_READERS}
    assert read["mask_then_add"] == [8, 8, 8, 16, 16, 16, 16, 16, 8]
    assert read["add_then_mask"] == [8, 8, 8, 0, 0, 0, 0, 0, 8]


def test_v2_stores_the_real_zero_and_never_warns():
    z = np.zeros((2, 32), dtype=np.int64)
    z[1] = 3
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        qz = gptq.pack_qzeros(z, 2, "gptq_v2")
    assert int(qz.view(np.uint32)[1, 0]) == 0xFFFFFFFF  # 16 fields of 0b11
    assert_bitexact(gptq.unpack_qzeros(qz, 2, 32, "gptq_v2"), z.astype(np.int32))


def test_cuda_kernel_reader_masks_eight_bit_zeros_to_four_bits():
    z = np.full((1, 32), 128)  # symmetric 8-bit zero, stored as 127
    qz = gptq.pack_qzeros(z, 8)
    assert gptq.unpack_qzeros(qz, 8, 32, reader="mask_then_add")[0, 0] == 128
    assert gptq.unpack_qzeros(qz, 8, 32, reader="cuda_kernel")[0, 0] == 0  # (127 + 1) & 0x0f


@pytest.mark.parametrize("bits", gptq.BITS)
def test_checkpoint_dequantize_is_fp16_scale_times_integer_difference(bits):
    rng = np.random.default_rng(bits)
    k, n, g = 64, 32, 32
    q = rng.integers(0, 1 << bits, (k, n)).astype(np.uint8)
    zeros = rng.integers(1, 1 << bits, (k // g, n))
    scales = rng.uniform(0.01, 0.1, (k // g, n)).astype(np.float32)
    ck = gptq.pack(q, scales, zeros, bits, group_size=g)
    s16 = scales.astype(np.float16)
    expected = np.empty((k, n), np.float16)
    for i in range(k):
        for j in range(n):
            expected[i, j] = np.float16(float(s16[i // g, j]) * (int(q[i, j]) - int(zeros[i // g, j])))
    assert_bitexact(gptq.dequantize(ck), expected)


def test_act_order_g_idx_selects_each_rows_scale_row():
    k, n = 64, 32
    q = np.full((k, n), 9, np.uint8)
    scales = np.array([[1.0] * n, [2.0] * n], np.float32)
    zeros = np.full((2, n), 8)
    g_idx = np.array([1, 0] * 32, np.int32)
    deq = gptq.dequantize(gptq.pack(q, scales, zeros, 4, g_idx=g_idx))
    assert deq[0, 0] == 2.0 and deq[1, 0] == 1.0


def test_intweight_from_weights_recovers_codes_from_fake_quantized_weights():
    from refsim.formats.uniform import quantize

    rng = np.random.default_rng(3)
    w = rng.standard_normal((128, 64)).astype(np.float32)
    uq = quantize(w, 4, scheme="gptq_asym", granularity="group", group_size=32)
    w_hat16 = uq.dequantize().astype(np.float16)  # the layer weight the official pack sees
    g_idx = gptq.default_g_idx(128, 32)
    ints = gptq.intweight_from_weights(w_hat16, uq.scale, uq.zero, g_idx)
    assert np.array_equal(ints, uq.q.astype(np.int64))


def test_pack_does_not_modify_inputs():
    rng = np.random.default_rng(0)
    q = rng.integers(0, 16, (32, 32)).astype(np.uint8)
    s = rng.uniform(0.1, 1, (1, 32)).astype(np.float32)
    z = np.full((1, 32), 8)
    copies = [a.copy() for a in (q, s, z)]
    gptq.pack(q, s, z, 4)
    for a, c in zip((q, s, z), copies):
        assert_bitexact(a, c)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int32, np.int64, np.uint32])
@pytest.mark.parametrize("bits", gptq.BITS)
def test_pack_qweight_accepts_every_integer_dtype_of_in_range_codes(bits, dtype):
    hi = min((1 << bits) - 1, np.iinfo(dtype).max)
    q = np.random.default_rng(bits).integers(0, hi + 1, (64, 3)).astype(dtype)
    assert_bitexact(gptq.pack_qweight(q, bits), gptq.pack_qweight_reference(q, bits))


# --------------------------------------------------------------------------- properties (hypothesis)
@st.composite
def gptq_codes(draw):
    """(q uint8 (K, N), bits) with K a multiple of 32: the qweight packing rule."""
    bits = draw(st.sampled_from(gptq.BITS))
    k = 32 * draw(st.integers(1, 4))
    n = draw(st.integers(1, 6))
    q = draw(arrays(np.uint8, (k, n), elements=st.integers(0, (1 << bits) - 1)))
    return q, bits


@given(gptq_codes())
def test_unpack_qweight_inverts_pack_qweight(case):
    q, bits = case
    packed = gptq.pack_qweight(q, bits)
    assert packed.shape == (q.shape[0] * bits // 32, q.shape[1]) and packed.dtype == np.int32
    assert_bitexact(gptq.unpack_qweight(packed, bits, q.shape[0]), q)
    assert_bitexact(packed, gptq.pack_qweight_reference(q, bits))


@st.composite
def gptq_zeros(draw):
    bits = draw(st.sampled_from(gptq.BITS))
    g = draw(st.integers(1, 3))
    n = 32 * draw(st.integers(1, 2))
    z = draw(arrays(np.int32, (g, n), elements=st.integers(1, (1 << bits) - 1)))  # v1 needs zero >= 1
    fmt = draw(st.sampled_from(gptq.CHECKPOINT_FORMATS))
    return z, bits, fmt


@given(gptq_zeros())
def test_unpack_qzeros_inverts_pack_qzeros_for_nonzero_points(case):
    z, bits, fmt = case
    assert_bitexact(gptq.unpack_qzeros(gptq.pack_qzeros(z, bits, fmt), bits, z.shape[1], fmt), z)
