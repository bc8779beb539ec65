"""Property: the compiled packers (refsim.native.packers) give the NumPy paths' bits for any legal
shape and any codes, and the fused GPTQ/AWQ range check raises the NumPy path's message for any
out-of-range code at any position."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from refsim.errors import FormatRuleError
from refsim.formats import awq, bitplane, gptq, marlin
from refsim.native import packers as native
from refsim.testing import assert_bitexact

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
