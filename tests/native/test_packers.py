"""The compiled GPTQ/AWQ packers against the NumPy code they accelerate, bit for bit, and the
public functions on both paths; properties: for any legal shape and codes the compiled packers give the
NumPy paths' bits, and the fused range check raises the NumPy path's message at any position."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from refsim.formats import awq, gptq
from refsim.native import packers as native
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


# ------------------------------------------------------------------------------------------------
# the range check fused into the GPTQ/AWQ pass; Marlin and bitplane kernels
# ------------------------------------------------------------------------------------------------
from refsim.errors import FormatRuleError  # noqa: E402
from refsim.formats import bitplane, marlin  # noqa: E402


def _numpy_only(monkeypatch):
    monkeypatch.setattr(native, "_library", lambda: (None, "disabled by the test"))


def _error(fn):
    with pytest.raises(FormatRuleError) as info:
        fn()
    return str(info.value)


@needs_native
@pytest.mark.parametrize("bits", [2, 3, 4])          # every uint8 is an 8-bit code
def test_fused_range_check_raises_the_numpy_message_at_every_row_of_a_period(bits, monkeypatch):
    rng = np.random.default_rng(20 + bits)
    base = rng.integers(0, 1 << bits, (64, 40), dtype=np.uint8)
    cases = []
    for row in range(32):                      # every row of a 3-bit period, incl. straddles 10, 21
        for bad in (1 << bits, 255):
            q = base.copy()
            q[row + 32 * (row % 2), (7 * row) % 40] = bad
            cases.append(q)
    fast = [_error(lambda q=q: gptq.pack_qweight(q, bits)) for q in cases]
    _numpy_only(monkeypatch)
    slow = [_error(lambda q=q: gptq.pack_qweight(q, bits)) for q in cases]
    assert fast == slow
    assert fast[1] == f"q: {bits}-bit codes must lie in [0, {(1 << bits) - 1}]; got 255"


@needs_native
def test_fused_awq_range_check_raises_the_numpy_message_at_every_byte_of_a_word(monkeypatch):
    rng = np.random.default_rng(5)
    base = rng.integers(0, 16, (3, 24), dtype=np.uint8)
    cases = []
    for col in range(24):
        for bad in (16, 17, 128, 255):
            q = base.copy()
            q[col % 3, col] = bad
            cases.append(q)
    fast = [_error(lambda q=q: awq.pack_columns(q)) for q in cases]
    _numpy_only(monkeypatch)
    slow = [_error(lambda q=q: awq.pack_columns(q)) for q in cases]
    assert fast == slow
    assert fast[-1] == "q: 4-bit codes must lie in [0, 15]; got 255"


def _tile_codes(k, n, shift):
    """Codes with every value 0..15 at every position as ``shift`` runs over 0..15."""
    kk, nn = np.meshgrid(np.arange(k), np.arange(n), indexing="ij")
    return ((kk * 5 + nn * 3 + (kk * nn) // 7 + shift) % 16).astype(np.uint8)


@needs_native
def test_compiled_marlin_codes_equal_the_numpy_gather_for_every_code_at_every_position():
    for shift in range(16):
        q = _tile_codes(32, 128, shift)
        b = native.marlin_pack(q)
        assert_bitexact(b.view(np.int32), marlin._pack_codes_numpy(q), f"marlin pack, shift {shift}")
        assert_bitexact(native.marlin_unpack(b, 32, 128), q, "marlin round trip")
    words = np.random.default_rng(7).integers(0, 1 << 32, (3, 2 * 192), dtype=np.uint32)
    words[0, :8] = [0, 0xFFFFFFFF, 0x80000000, 1, 0x76543210, 0xFEDCBA98, 0x0F0F0F0F, 0xF0F0F0F0]
    assert_bitexact(native.marlin_unpack(words, 48, 192),
                    marlin.unpermute_weights(marlin._words_to_nibbles(words.view(np.int32)), 48, 192),
                    "marlin unpack of arbitrary words")


@needs_native
@pytest.mark.parametrize("k", [32, 96, 1024, 1056, 2048 + 416])
def test_compiled_bitplanes_equal_the_numpy_layout_with_and_without_a_tail_chunk(k, monkeypatch):
    rng = np.random.default_rng(k)
    for bits in bitplane.SUPPORTED_BITS:
        codes = rng.integers(0, 1 << bits, (3, k), dtype=np.uint8)
        codes[0] = np.arange(k) % (1 << bits)
        codes[1, : min(k, 1 << bits)] = np.arange(1 << bits)[::-1][:k]
        fast = bitplane.pack(codes, bits)
        words = rng.integers(-(1 << 31), 1 << 31, (bits, 3, k // 32), dtype=np.int32)
        fast_un = [bitplane.unpack(words, b) for b in range(3, bits + 1)]
        with monkeypatch.context() as m:
            _numpy_only(m)
            assert_bitexact(fast, bitplane.pack(codes, bits), f"bitplane pack, {bits} bits, K={k}")
            for b, got in zip(range(3, bits + 1), fast_un):
                assert_bitexact(got, bitplane.unpack(words, b), f"bitplane unpack {b} of {bits}, K={k}")
        assert_bitexact(bitplane.unpack(fast, bits), codes, "round trip")


@needs_native
def test_plain_c_variants_of_a_scalar_build_give_the_same_bits(monkeypatch):
    """The AVX2 blocks are #ifdef'd; a scalar build runs the plain-C loops. Build one and run
    every public packer through it against the NumPy paths."""
    from refsim.native import bind, build

    scalar = bind(build.load(native.SOURCE, "scalar"), native.SIGNATURES)
    rng = np.random.default_rng(99)
    q4 = rng.integers(0, 16, (256, 256), dtype=np.uint8)
    sc = (rng.random((2, 256)) + 0.5).astype(np.float16)
    codes = rng.integers(0, 64, (5, 1312), dtype=np.uint8)

    def run():
        out = [marlin.pack(q4, sc, 128)[0], bitplane.pack(codes, 6), gptq.pack_qweight(q4 & 7, 3),
               awq.pack_columns(q4)]
        out += [marlin.unpack(out[0], marlin.pack(q4, sc, 128)[1])[0], bitplane.unpack(out[1], 4),
                gptq.unpack_qweight(out[2], 3, 256), awq.unpack_columns(out[3], 256)]
        return out

    with monkeypatch.context() as m:
        m.setattr(native, "_library", lambda: (scalar, None))
        plain = run()
        bad = q4.copy()
        bad[100, 3] = 16
        msg = _error(lambda: awq.pack_columns(bad))
    _numpy_only(monkeypatch)
    for a, b in zip(plain, run()):
        assert_bitexact(a, b, "scalar build vs NumPy")
    assert msg == _error(lambda: awq.pack_columns(bad))


# --------------------------------------------------------------------------- properties (hypothesis)
pytestmark = pytest.mark.skipif(not native.available(), reason="no compiled packers (no C compiler)")


class _NumpyOnly:
    """Context: the public packers take their NumPy paths."""

    def __enter__(self):
        self._saved = native._library
        native._library = lambda: (None, "disabled by the test")

    def __exit__(self, *exc):
        native._library = self._saved


def _outcome(fn):
    """The result, or the error message: both paths must agree on either."""
    try:
        return fn()
    except FormatRuleError as err:
        return str(err)


def _same(a, b, what):
    if isinstance(a, str) or isinstance(b, str):
        assert a == b, what
    elif isinstance(a, tuple):
        for x, y in zip(a, b):
            assert_bitexact(x, y, what)
    else:
        assert_bitexact(a, b, what)


@given(bits=st.sampled_from(gptq.BITS), periods=st.integers(1, 3), n=st.integers(1, 40),
       seed=st.integers(0, 2**32 - 1), bad=st.one_of(st.none(), st.integers(0, 255)))
def test_gptq_pack_and_unpack_equal_the_numpy_path(bits, periods, n, seed, bad):
    rng = np.random.default_rng(seed)
    q = rng.integers(0, 1 << bits, (32 * periods, n), dtype=np.uint8)
    if bad is not None:                                   # maybe out of range, anywhere
        q[rng.integers(0, q.shape[0]), rng.integers(0, n)] = bad
    fast = _outcome(lambda: gptq.pack_qweight(q, bits))
    words = rng.integers(-(1 << 31), 1 << 31, (periods * bits, n), dtype=np.int32)
    fast_un = gptq.unpack_qweight(words, bits, 32 * periods)
    with _NumpyOnly():
        _same(fast, _outcome(lambda: gptq.pack_qweight(q, bits)), "gptq pack")
        _same(fast_un, gptq.unpack_qweight(words, bits, 32 * periods), "gptq unpack")


@given(r=st.integers(1, 6), n8=st.integers(1, 8), seed=st.integers(0, 2**32 - 1),
       bad=st.one_of(st.none(), st.integers(0, 255)))
def test_awq_pack_equals_the_numpy_path(r, n8, seed, bad):
    rng = np.random.default_rng(seed)
    q = rng.integers(0, 16, (r, 8 * n8), dtype=np.uint8)
    if bad is not None:
        q[rng.integers(0, r), rng.integers(0, 8 * n8)] = bad
    fast = _outcome(lambda: awq.pack_columns(q))
    with _NumpyOnly():
        _same(fast, _outcome(lambda: awq.pack_columns(q)), "awq pack")


@given(kb=st.integers(1, 3), nb=st.integers(1, 2), grouped=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_marlin_pack_and_unpack_equal_the_numpy_path(kb, nb, grouped, seed):
    rng = np.random.default_rng(seed)
    k, n = 128 * kb, 256 * nb
    q = rng.integers(0, 16, (k, n), dtype=np.uint8)
    s = (rng.random((k // 128 if grouped else 1, n)) + 0.5).astype(np.float16)
    fast = marlin.pack(q, s, 128 if grouped else None)
    words = rng.integers(-(1 << 31), 1 << 31, fast[0].shape, dtype=np.int32)
    fast_un = marlin.unpack(words, fast[1])
    with _NumpyOnly():
        _same(fast, marlin.pack(q, s, 128 if grouped else None), "marlin pack")
        _same(fast_un, marlin.unpack(words, fast[1]), "marlin unpack")


@given(bits=st.sampled_from(bitplane.SUPPORTED_BITS), n=st.integers(1, 4), kw=st.integers(1, 80),
       seed=st.integers(0, 2**32 - 1), data=st.data())
def test_bitplane_pack_and_unpack_equal_the_numpy_path(bits, n, kw, seed, data):
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, 1 << bits, (n, 32 * kw), dtype=np.uint8)
    b = data.draw(st.integers(3, bits), label="read bits")
    fast = bitplane.pack(codes, bits)
    words = rng.integers(-(1 << 31), 1 << 31, fast.shape, dtype=np.int32)
    fast_un = bitplane.unpack(words, b)
    with _NumpyOnly():
        _same(fast, bitplane.pack(codes, bits), "bitplane pack")
        _same(fast_un, bitplane.unpack(words, b), "bitplane unpack")
