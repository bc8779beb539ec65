"""Property tests: every transpose method decodes any plane words to the oracle's codes."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from refsim.formats import bit_transpose as bt
from refsim.testing import assert_bitexact, examples

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
