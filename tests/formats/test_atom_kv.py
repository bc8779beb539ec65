"""Tests of refsim.formats.atom_kv: the asymmetric INT4 KV cache (one scale and zero per vector, error
within one step) and its packing (LSB-first nibbles in little-endian words, codes beyond 4 bits refused)."""

from __future__ import annotations

import numpy as np
import pytest

from refsim.errors import FormatRuleError
from refsim.formats import atom_kv as KV
from refsim.testing import assert_bitexact


def test_kv_cache_is_asymmetric_int4_per_vector():
    rng = np.random.default_rng(8)
    x = (rng.standard_normal((2, 3, 5, 128)) + 0.5).astype(np.float32)  # (batch, heads, tokens, head_dim)
    kv = KV.quantize_kv(x)
    assert kv.q.shape == x.shape and kv.scale.shape == x.shape[:-1]
    assert kv.q.max() <= 15
    rng_ = x.max(-1) - x.min(-1)
    assert_bitexact(kv.scale, (rng_ / np.float32(15)).astype(np.float32), name="scale")
    err = np.abs(KV.dequantize_kv(kv) - x)
    assert np.all(err <= kv.scale[..., None] * 1.0001)  # zero rounding (<= s/2) + value rounding (<= s/2)


def test_pack_kv_is_lsb_first_in_little_endian_words():
    rng = np.random.default_rng(10)
    q = rng.integers(0, 16, (3, 128), dtype=np.uint8)
    packed = KV.pack_kv(q)
    words = packed.view("<u4")                              # (3, 16): 8 codes per 32-bit word
    for r in range(3):
        for i in range(16):
            for j in range(8):
                assert (int(words[r, i]) >> (4 * j)) & 0xF == q[r, 8 * i + j]
    assert_bitexact(KV.unpack_kv(packed), q, name="round trip")
    with pytest.raises(FormatRuleError, match="4-bit codes"):
        KV.pack_kv(np.array([[16, 0]], np.uint8))
