"""Property tests: pack/unpack/prefix hold for every legal (N, K, p) the strategy draws."""

from __future__ import annotations

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from refsim.formats import bitplane as bp
from refsim.testing import assert_bitexact, examples


@st.composite
def bitplane_problems(draw):
    """Legal problems only: K a multiple of 32 (tails included), p in the kernel's 3..8."""
    p = draw(st.sampled_from(bp.SUPPORTED_BITS))
    n = draw(st.integers(1, 4))
    k = 32 * draw(st.integers(1, 70))  # up to 2240: one or two chunks, any tail size
    seed = draw(st.integers(0, 2**32 - 1))
    codes = np.random.default_rng(seed).integers(0, 1 << p, size=(n, k), dtype=np.uint8)
    return codes, p


@settings(max_examples=examples(40))
@given(bitplane_problems())
@example((np.full((1, 32), 255, np.uint8), 8))  # smallest K, all ones: sign bit of the int32
@example((np.arange(1056, dtype=np.uint8).reshape(1, 1056) % 8, 3))  # one full chunk + tail of 32
def test_unpack_inverts_pack_and_every_prefix_reads_top_planes(problem):
    codes, p = problem
    q = bp.pack(codes, p)
    assert q.shape == (p, codes.shape[0], codes.shape[1] // 32)
    assert_bitexact(bp.unpack(q), codes, name="unpack(pack)")
    for b in range(3, p + 1):
        assert_bitexact(bp.unpack(q[:b]), codes >> (p - b), name=f"prefix {b}")


@settings(max_examples=examples(15))
@given(bitplane_problems())
def test_pack_matches_plain_loop_reference(problem):
    codes, p = problem
    codes = codes[:1, :1088] if codes.shape[1] > 1088 else codes[:1]
    assert_bitexact(bp.pack(codes, p), bp.pack_reference(codes, p), name="pack")
