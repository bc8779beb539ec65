"""Property tests of refsim.formats.atom: packing round trips, reorder round trips, vectorised
quantizers and the fused GEMM agree with their plain-loop twins on drawn legal problems."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from refsim.formats import atom as A
from refsim.testing import assert_bitexact, examples


@st.composite
def atom_problems(draw):
    """Legal small problems: group in {32, 64}, K = (groups + tail) * group, N even."""
    group = draw(st.sampled_from([32, 64]))
    n_groups = draw(st.integers(1, 2))
    keeper = draw(st.sampled_from([0, group]))
    k = n_groups * group + keeper
    m = draw(st.integers(1, 3))
    n = 2 * draw(st.integers(1, 3))
    seed = draw(st.integers(0, 2**31 - 1))
    scale = draw(st.sampled_from([1e-3, 1.0, 100.0]))
    return group, keeper, m, k, n, seed, scale


@settings(max_examples=examples(30))
@given(atom_problems(), st.sampled_from(A.MODES))
def test_quantizers_and_gemm_match_references(problem, mode):
    group, keeper, m, k, n, seed, scale = problem
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((m, k)) * scale).astype(np.float16)
    w = (rng.standard_normal((k, n)) * scale).astype(np.float16)
    kw = dict(group_size=group, keeper=keeper)
    a, ar = A.quantize_activations(x, mode, **kw), A.quantize_activations_reference(x, mode, **kw)
    b, br = A.quantize_weights(w, mode, **kw), A.quantize_weights_reference(w, mode, **kw)
    for f in ("q4", "scale4", "q8", "scale8"):
        assert_bitexact(getattr(a, f), getattr(ar, f), name=f"acts.{f}")
        assert_bitexact(getattr(b, f), getattr(br, f), name=f"weights.{f}")
    if mode == "kernel":
        assert_bitexact(A.atom_gemm(a, b), A.atom_gemm_reference(a, b), name="D")


@settings(max_examples=examples(40))
@given(st.integers(1, 4), st.integers(1, 16), st.integers(0, 2**31 - 1))
def test_pack_unpack_round_trip(rows, half_cols, seed):
    q = np.random.default_rng(seed).integers(-8, 8, (rows, 2 * half_cols)).astype(np.int8)
    packed = A.pack_int4(q)
    assert_bitexact(packed, A.pack_int4_reference(q), name="packed")
    assert_bitexact(A.unpack_int4(packed), q, name="round trip")


@settings(max_examples=examples(40))
@given(st.integers(1, 300), st.integers(0, 2**31 - 1))
def test_reorder_index_round_trips(k, seed):
    rng = np.random.default_rng(seed)
    stat = rng.standard_normal(k).astype(np.float32) ** 2
    idx = A.reorder_index(stat)
    assert np.array_equal(np.sort(idx), np.arange(k))
    v = rng.standard_normal((2, k)).astype(np.float32)
    assert_bitexact(A.unpermute(A.permute(v, idx, 1), idx, 1), v, name="round trip")
