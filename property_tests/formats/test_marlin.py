"""Property tests for Marlin: legal shapes drawn by hypothesis (the profile sets the example count)."""

import numpy as np
from hypothesis import example, given
from hypothesis import strategies as st

from refsim.formats import marlin, stripes
from refsim.testing import assert_bitexact


@st.composite
def marlin_problems(draw):
    """Only legal Marlin shapes: K % 128 == 0, N % 256 == 0, group 128 or per-channel."""
    k = 128 * draw(st.integers(1, 3))
    n = 256 * draw(st.integers(1, 2))
    group_size = draw(st.sampled_from([None, 128]))
    seed = draw(st.integers(0, 2**31 - 1))
    return k, n, group_size, seed


def _draw_inputs(k, n, group_size, seed):
    rng = np.random.default_rng(seed)
    q = rng.integers(0, 16, (k, n), dtype=np.uint8)
    rows = 1 if group_size is None else k // group_size
    scales = (rng.standard_normal((rows, n)) * 0.05).astype(np.float16)
    return q, scales


# edge cases: the K = 128 / group 128 corner, the smallest per-channel shape
@example((128, 256, 128, 0))
@example((128, 256, None, 1))
@given(marlin_problems())
def test_pack_roundtrips_and_matches_plain_loop(problem):
    k, n, group_size, seed = problem
    q, scales = _draw_inputs(k, n, group_size, seed)
    b, s = marlin.pack(q, scales, group_size)
    br, sr = marlin.pack_reference(q, scales, group_size)
    assert_bitexact(b, br, name="B")
    assert_bitexact(s, sr, name="s")
    q2, s2 = marlin.unpack(b, s)
    assert_bitexact(q2, q, name="q")
    assert_bitexact(s2, scales, name="scales")


@given(marlin_problems())
def test_dequantize_equals_code_times_scale_elementwise(problem):
    k, n, group_size, seed = problem
    q, scales = _draw_inputs(k, n, group_size, seed)
    b, s = marlin.pack(q, scales, group_size)
    w = marlin.effective_weights(b, s)
    gs = k // scales.shape[0]
    rng = np.random.default_rng(seed)
    for kk, nn in zip(rng.integers(0, k, 8), rng.integers(0, n, 8)):
        expected = np.float16(np.float32(int(q[kk, nn]) - 8) * np.float32(scales[kk // gs, nn]))
        assert_bitexact(w[kk, nn], expected, name=f"W[{kk},{nn}]")


@given(
    st.integers(1, 9), st.integers(1, 9), st.integers(1, 4), st.integers(1, 150), st.sampled_from([1, 2])
)
def test_stripes_cover_every_tile_once_in_bottom_to_top_order(k_tiles, n_tiles, parallel, sms, group_tiles):
    _, blocks = stripes.launch_partition(k_tiles, n_tiles, parallel, sms, group_tiles)
    got = {(s.block, s.col_par): (s.k_tile_start, s.k_tile_count, s.slice_idx, s.slice_count)
           for stripe in blocks for s in stripe}
    assert got == stripes.stripes_reference(k_tiles, n_tiles, parallel, sms, group_tiles)
    covered = sorted((s.col_par, kt) for stripe in blocks for s in stripe for kt in s.k_tiles)
    assert covered == [(c, kt) for c in range(n_tiles * parallel) for kt in range(k_tiles)]
