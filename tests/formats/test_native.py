"""The compiled GPTQ/AWQ packers against the NumPy code they accelerate, bit for bit, and the
public functions on both paths."""

from __future__ import annotations

import numpy as np
import pytest

from refsim.formats import awq, gptq
from refsim.formats import native
from refsim.testing import assert_bitexact

needs_native = pytest.mark.skipif(not native.available(), reason="compiled packers unavailable (no C compiler or REFSIM_NATIVE=0)")


@needs_native
@pytest.mark.parametrize("bits", [2, 3, 4, 8])
def test_compiled_gptq_stream_equals_numpy_stream_for_every_code(bits):
    rng = np.random.default_rng(bits)
    k, n = 96, 37                                          # 3 periods of the 3-bit stream, odd N
    q = rng.integers(0, 1 << bits, (k, n), dtype=np.uint8)
    q[: 1 << bits, 0] = np.arange(1 << bits) % (1 << bits) if bits < 8 else np.arange(96)
    words = native.gptq_pack(q, bits)
    assert_bitexact(words, gptq.pack_stream(q, bits), f"{bits}-bit pack")
    assert_bitexact(native.gptq_unpack(words, bits), gptq.unpack_stream(words, bits), f"{bits}-bit unpack")
    assert_bitexact(native.gptq_unpack(words, bits), q, f"{bits}-bit round trip")


@needs_native
def test_compiled_awq_equals_the_numpy_interleave():
    rng = np.random.default_rng(4)
    q = rng.integers(0, 16, (33, 64), dtype=np.uint8)
    q[0, :16] = np.arange(16)
    words = native.awq_pack(q)
    assert_bitexact(words.view(np.int32), awq.pack_columns_reference(q), "awq pack")
    assert_bitexact(native.awq_unpack(words, 64), q, "awq unpack")


@pytest.mark.parametrize("bits", [2, 3, 4, 8])
def test_public_packers_give_the_same_words_without_the_compiled_path(bits, monkeypatch):
    rng = np.random.default_rng(10 + bits)
    q = rng.integers(0, 1 << bits, (64, 24), dtype=np.uint8)
    q4 = q & 15
    fast = (gptq.pack_qweight(q, bits), awq.pack_columns(q4))
    monkeypatch.setattr(native, "_library", lambda: (None, "disabled by the test"))
    slow = (gptq.pack_qweight(q, bits), awq.pack_columns(q4))
    for f, s_ in zip(fast, slow):
        assert_bitexact(f, s_, f"{bits}-bit public pack, both paths")
    assert_bitexact(gptq.unpack_qweight(fast[0], bits, 64), q, "unpack without compiled path")
    assert_bitexact(awq.unpack_columns(fast[1], 24), q4, "awq unpack without compiled path")
