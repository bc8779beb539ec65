"""Tests for refsim.formats.dequant_tricks: each bit trick against its arithmetic definition."""

from fractions import Fraction

import numpy as np
import pytest

from refsim.errors import DtypeError
from refsim.formats import dequant_tricks as dt
from refsim.testing import assert_bitexact


def _all_half_patterns() -> np.ndarray:
    """Words covering every 16-bit pattern in the low half and (via a bijection) in the high half."""
    x = np.arange(1 << 16, dtype=np.uint32)
    y = (x * np.uint32(40503) + np.uint32(12345)) & np.uint32(0xFFFF)  # odd multiplier: bijective
    return x | (y << np.uint32(16))


def _fp16_bits(values) -> np.ndarray:
    return np.asarray(values, dtype=np.float16).view(np.uint16).astype(np.uint32)


def test_lop3_immlut_0xea_is_and_or_for_all_bit_triples():
    a = np.array([0b11110000], dtype=np.uint32)
    b = np.array([0b11001100], dtype=np.uint32)
    c = np.array([0b10101010], dtype=np.uint32)
    assert dt.LOP3_AND_OR == 0xEA
    assert int(dt.lop3(a, b, c, 0xEA)[0]) == 0xEA
    rng = np.random.default_rng(1)
    a, b, c = (rng.integers(0, 2**32, 1000, dtype=np.uint64).astype(np.uint32) for _ in range(3))
    assert np.array_equal(dt.lop3(a, b, c, 0xEA), (a & b) | c)
    assert np.array_equal(dt.lop3(a, b, c, 0x96), a ^ b ^ c)  # 0xF0 ^ 0xCC ^ 0xAA


def test_prmt_selects_bytes_of_the_eight_byte_pair():
    a = np.array([0x33221100], dtype=np.uint32)
    b = np.array([0x77665544], dtype=np.uint32)
    assert int(dt.prmt(a, b, 0x5250)[0]) == 0x55225500
    assert int(dt.prmt(a, b, 0x3210)[0]) == 0x33221100
    assert int(dt.prmt(a, b, 0x7654)[0]) == 0x77665544
    # sign replication (selector bit 3) in byte 0 only: 0x80 -> 0xff; bytes 1..3 copy byte 0
    assert int(dt.prmt(np.array([0x00000080], np.uint32), 0, 0x0008)[0]) == 0x808080FF


def test_marlin_dequant_word_matches_definition_for_every_half_pattern():
    q = _all_half_patterns()
    b0, b1 = dt.marlin_dequant_word(q)
    nib = [((q >> np.uint32(4 * i)) & 0xF).astype(np.int32) for i in range(8)]
    exp0 = _fp16_bits(nib[0] - 8) | (_fp16_bits(nib[4] - 8) << np.uint32(16))
    exp1 = _fp16_bits(nib[1] - 8) | (_fp16_bits(nib[5] - 8) << np.uint32(16))
    assert_bitexact(b0, exp0, name="frag_b[0]")
    assert_bitexact(b1, exp1, name="frag_b[1]")


def test_marlin_dequant_handles_arithmetic_shift_and_all_nibbles():
    q = _all_half_patterns()
    got = dt.marlin_dequant(q)  # (65536, 4) half2 words
    ref = dt.int4_word_reference(q)  # (65536, 8) logical elements e0..e7
    lo, hi = dt.halves(got)
    # register r holds elements (e_{2r}, e_{2r+1})
    assert_bitexact(lo, ref[:, 0::2], name="low halves")
    assert_bitexact(hi, ref[:, 1::2], name="high halves")


def test_zero_code_gives_positive_zero_on_both_paths():
    q = np.array([0x88888888], dtype=np.uint32)
    got = dt.marlin_dequant(q)
    assert np.all(got == 0)  # +0.0 in every half


def test_ft_int4_converter_equals_definition_and_marlin():
    q = _all_half_patterns()
    ft = dt.ft_int4_to_fp16(q)
    lo, hi = dt.halves(ft)
    ref = dt.int4_word_reference(q)
    assert_bitexact(lo, ref[:, 0::2], name="FT low halves")
    assert_bitexact(hi, ref[:, 1::2], name="FT high halves")
    assert_bitexact(ft, dt.marlin_dequant(q), name="FT vs Marlin")


def test_int8_prmt_converter_matches_definition_for_every_byte_in_every_position():
    b = np.arange(256, dtype=np.uint32)
    words = [b * np.uint32(0x01010101)]
    for shift in range(4):  # every byte value alone in each position, others a fixed pattern
        words.append((b << np.uint32(8 * shift)) | (np.uint32(0x5A3C7E81) & ~(np.uint32(0xFF) << np.uint32(8 * shift))))
    rng = np.random.default_rng(2)
    words.append(rng.integers(0, 2**32, 4096, dtype=np.uint64).astype(np.uint32))
    q = np.concatenate(words)
    got = dt.int8_to_fp16(q)
    lo, hi = dt.halves(got)
    ref = dt.int8_word_reference(q)
    assert_bitexact(lo, ref[:, 0::2], name="int8 low halves")
    assert_bitexact(hi, ref[:, 1::2], name="int8 high halves")


def test_hfma2_rounds_once_where_double_rounding_would_not():
    # a*b + c whose exact value lies just above an fp16 tie: 1 + 2**-11 + 2**-40
    a = _fp16_bits(np.float16(2.0**-10))  # 2**-10
    b = _fp16_bits(np.float16(2.0**-20))
    c = _fp16_bits(np.float16(1.0 + 2.0**-10))
    got = dt.hfma2(a, b, c)  # exact: 1 + 2**-10 + 2**-30, nearest fp16 is 1 + 2**-10
    exact = Fraction(1) + Fraction(1, 2**10) + Fraction(1, 2**30)
    lo, _ = dt.halves(got)
    assert Fraction(float(lo)) == Fraction(1) + Fraction(1, 2**10)
    assert abs(Fraction(float(lo)) - exact) < Fraction(1, 2**11)
    # tie case plus a tiny positive term must round up, not to even
    a2 = _fp16_bits(np.float16(2.0**-11))
    b2 = _fp16_bits(np.float16(1.0 + 2.0**-10))  # product = 2**-11 + 2**-21
    c2 = _fp16_bits(np.float16(1.0))
    lo2, _ = dt.halves(dt.hfma2(a2, b2, c2))
    assert float(lo2) == 1.0 + 2.0**-10  # 1 + 2**-11 + 2**-21 rounds up


def test_converters_reject_non_uint32_words():
    with pytest.raises(DtypeError, match="q: dtype must be uint32"):
        dt.marlin_dequant(np.zeros(4, dtype=np.int64))
    with pytest.raises(DtypeError, match="i8s"):
        dt.int8_to_fp16(np.zeros(4, dtype=np.int32))
