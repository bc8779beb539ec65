"""Bit transposes: every method agrees with the bit-by-bit oracle; op counts; pair tables;
properties: every method decodes any drawn plane words to the oracle's codes, kernel lookups equal plain
table lookup."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refsim.errors import DtypeError, FormatRuleError, ShapeError
from refsim.formats import bit_transpose as bt
from refsim.formats import bitplane as bp
from refsim.testing import assert_bitexact, examples


def _input_classes(bits: int) -> np.ndarray:
    """uint32 (bits, L): zeros, ones, every single set bit, every single clear bit, alternating
    patterns, and every code value at every one of the 32 positions."""
    cols = [np.zeros(bits, np.uint32), np.full(bits, 0xFFFFFFFF, np.uint32)]
    for pl in range(bits):
        for s in range(32):
            one = np.zeros(bits, np.uint32)
            one[pl] = 1 << s
            cols += [one, ~one]
    for pat in (0xAAAAAAAA, 0x55555555, 0xF0F0F0F0, 0x0F0F0F0F, 0xFF00FF00, 0x80000001):
        cols.append(np.full(bits, pat, np.uint32))
    codes = np.arange(1 << bits)
    for shift in range(32):  # code c at weight position w = (c + shift) % 32 pattern
        cw = (codes[:, None] + np.arange(32)[None, :] * (shift + 1)) % (1 << bits)  # (2^b, 32)
        for row in cw:
            word = np.zeros(bits, np.uint32)
            for w, c in enumerate(row):
                for pl in range(bits):
                    word[pl] |= np.uint32(((int(c) >> (bits - 1 - pl)) & 1) << (31 - w))
            cols.append(word)
        if bits > 4:
            break  # 8-bit: 256 rows already hit every code at every position
    return np.stack(cols, axis=1)


@pytest.mark.parametrize("bits", bt.TRANSPOSE_BITS)
def test_all_methods_agree_with_the_oracle_on_every_input_class(bits):
    q = _input_classes(bits)
    ref = bt.codes_reference(q, bits)
    assert_bitexact(bt.swar_to_codes(bt.transpose_swar(q, bits), bits), ref, name="swar")
    assert_bitexact(bt.transpose_hd8x8(q, bits), ref, name="hd8x8")
    for j in range(0, q.shape[1], max(1, q.shape[1] // 16)):
        assert_bitexact(bt.codes_reference_loop(q[:, j].copy(), bits), ref[j], name="loop")


def test_oracle_reads_the_bitplane_layout_in_weight_order():
    # words of one lane in the bitplane format: lane 0 of a 1024-chunk holds k = 256*y + e
    rng = np.random.default_rng(3)
    codes = rng.integers(0, 64, size=(1, 1024), dtype=np.uint8)
    q = bp.pack(codes, 6)[:, 0, 0].view(np.uint32)  # (6,) lane 0
    expected = np.concatenate([codes[0, 256 * y:256 * y + 8] for y in range(4)])
    assert_bitexact(bt.codes_reference(q, 6), expected, name="lane 0 codes")


@pytest.mark.parametrize(
    "method, bits, expected",
    [
        # counted by hand from the C text of dequant.cuh (AND, OR, non-zero shifts):
        ("swar", 3, 29), ("swar", 4, 40), ("swar", 5, 107), ("swar", 6, 130),
        ("swar", 7, 153), ("swar", 8, 176),
        ("swar_scalar", 3, 41), ("swar_scalar", 4, 52),  # + 4 AND + 4 (shift, AND)
        ("swar_pair", 3, 45), ("swar_pair", 4, 40),  # 3-bit merge: 4 x (AND, AND, shift, OR)
        # 2-bit: 2 words x (2 AND + 1 shift + 1 OR)
        ("swar", 2, 8),
    ],
)
def test_op_counts_match_the_official_source(method, bits, expected):
    assert bt.ops_per_32_weights(method, bits) == expected


def test_paper_claim_40_versus_two_8x8_transposes():
    # the paper's 4-bit SWAR count (40) is confirmed exactly; one HD 8x8 swap network costs
    # 2 stages x 2 halves x 6 ops + 2 x 4 ops = 32 here, so two of them (64) already exceed 40
    c = bt.OpCounter()
    bt.hd8x8_core(np.uint32(0), np.uint32(0), c)
    assert c.total == 32
    assert bt.ops_per_32_weights("swar", 4) == 40
    assert bt.ops_per_32_weights("hd8x8", 4) >= 2 * 32 > 40


def test_merged_lookup_counts_follow_the_paper():
    assert bt.lookup_ops_per_vector(merged=False) == 24
    assert bt.lookup_ops_per_vector(merged=True) == 16
    assert [bt.lookups_per_32_weights(b, 1) for b in range(3, 9)] == [16, 32, 32, 32, 32, 32]
    assert [bt.lookups_per_32_weights(b, 2) for b in range(3, 9)] == [16, 16, 32, 32, 32, 32]


@pytest.mark.parametrize("bits", [3, 4])
def test_pair_table_has_every_pair_and_matches_reference(bits):
    rng = np.random.default_rng(bits)
    lut = rng.standard_normal((3, 1 << bits)).astype(np.float16)
    table = bt.pair_table(lut, bits)
    assert table.shape == (3, 1 << (2 * bits), 2)
    assert_bitexact(table, bt.pair_table_reference(lut, bits), name="pair table")
    h, lo = 5 % (1 << bits), 2
    assert_bitexact(table[1, h * (1 << bits) + lo], np.array([lut[1, h], lut[1, lo]]), name="entry")


def test_3bit_merged_index_is_h_times_8_plus_l():
    # byte 0hhh0lll -> hhhlll, exhaustively over all 64 (h, l) in every byte of a word
    for h in range(8):
        for lo in range(8):
            byte = (h << 4) | lo
            word = np.array([[byte * 0x01010101]], dtype=np.uint32).repeat(4, axis=0)
            merged = bt.merge_pairs_3bit(word)
            assert int(merged[0, 0]) == (h * 8 + lo) * 0x01010101


@pytest.mark.parametrize("bits", bp.SUPPORTED_BITS)
def test_scalar_and_merged_lookups_equal_unmerged_table_lookup(bits):
    q = _input_classes(bits)[:, :300]
    lut = np.random.default_rng(bits).standard_normal(1 << bits).astype(np.float16)
    expected = lut[bt.codes_reference(q, bits)]
    assert_bitexact(bt.lookup_scalar(q, lut, bits), expected, name="scalar lookup")
    if bits in (3, 4):
        assert_bitexact(bt.lookup_pairs(q, lut, bits), expected, name="pair lookup")


def test_bad_input_raises_named_errors():
    q = np.zeros((4, 2), np.uint32)
    with pytest.raises(FormatRuleError, match="bit-width"):
        bt.transpose_swar(q, 9)
    with pytest.raises(ShapeError, match="planes"):
        bt.transpose_swar(q, 3)
    with pytest.raises(DtypeError, match="uint32"):
        bt.transpose_swar(q.astype(np.int64), 4)
    with pytest.raises(FormatRuleError, match="method"):
        bt.ops_per_32_weights("magic", 4)
    with pytest.raises(FormatRuleError, match="bit-width"):
        bt.ops_per_32_weights("swar_pair", 5)
    with pytest.raises(ShapeError, match=r"\(N, 16\)"):
        bt.pair_table(np.zeros((2, 8), np.float16), 4)
    with pytest.raises(DtypeError, match="float16"):
        bt.pair_table(np.zeros((2, 16), np.float32), 4)


# --------------------------------------------------------------------------- properties (hypothesis)
words = st.integers(0, 2**32 - 1)


@settings(max_examples=examples(50))
@given(st.sampled_from(bt.TRANSPOSE_BITS), st.lists(words, min_size=8, max_size=8))
def test_swar_and_hd8x8_equal_the_reference(bits, planes):
    q = np.array(planes[:bits], dtype=np.uint32)
    ref = bt.codes_reference_loop(q, bits)
    assert_bitexact(bt.swar_to_codes(bt.transpose_swar(q, bits), bits), ref, name="swar")
    assert_bitexact(bt.transpose_hd8x8(q, bits), ref, name="hd8x8")


@settings(max_examples=examples(50))
@given(st.sampled_from([3, 4, 5, 6, 7, 8]), st.lists(words, min_size=8, max_size=8), st.integers(0, 2**32 - 1))
def test_kernel_lookups_equal_plain_table_lookup(bits, planes, seed):
    q = np.array(planes[:bits], dtype=np.uint32)[:, None]
    lut = np.random.default_rng(seed).standard_normal(1 << bits).astype(np.float16)
    expected = lut[bt.codes_reference(q, bits)]
    assert_bitexact(bt.lookup_scalar(q, lut, bits), expected, name="scalar")
    if bits in (3, 4):
        assert_bitexact(bt.lookup_pairs(q, lut, bits), expected, name="pairs")
