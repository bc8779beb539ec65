"""Tests of refsim.formats.atom: reorder permutations, both quantization modes against plain
loops and against an independent transliteration of efeslab/Atom's simulation, exhaustive INT4
packing, bad input, the names that moved to atom_gemm/atom_kv; and properties on drawn legal problems
(quantizers equal their plain loops, packing and reorder round trips). The fused GEMM is
test_atom_gemm.py, the KV cache test_atom_kv.py."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refsim.errors import FormatRuleError, NonFiniteError, ShapeError
from refsim.formats import atom as A
from refsim.testing import assert_bitexact, examples

FIELDS = ("q4", "scale4", "q8", "scale8")


def _same(x, y, what):
    for f in FIELDS:
        assert_bitexact(getattr(x, f), getattr(y, f), name=f"{what}.{f}")


# ------------------------------------------------------------------ reorder
def test_reorder_index_is_permutation_with_outliers_last():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((64, 256)).astype(np.float32)
    x[:, [3, 77, 200]] *= 50.0
    idx = A.reorder_index(A.hessian_statistic(x))
    assert sorted(idx.tolist()) == list(range(256))
    assert set(idx[-3:].tolist()) == {3, 77, 200}
    stat = (x.astype(np.float64) ** 2).sum(0)
    assert np.all(np.diff(stat[idx]) >= 0)


def test_permute_round_trips_and_preserves_the_product():
    rng = np.random.default_rng(2)
    idx = rng.permutation(32)
    x = rng.integers(-5, 5, (3, 32)).astype(np.float32)
    w = rng.integers(-5, 5, (32, 4)).astype(np.float32)
    xr, wr = A.permute(x, idx, 1), A.permute(w, idx, 0)
    assert_bitexact(A.unpermute(xr, idx, 1), x, name="x round trip")
    assert_bitexact(A.unpermute(wr, idx, 0), w, name="w round trip")
    assert_bitexact(xr @ wr, x @ w, name="x_r @ W_r")     # integer-valued: exact in any order
    for e in range(32):
        assert_bitexact(xr[:, e], x[:, idx[e]], name=f"gather column {e}")


def test_permute_rejects_non_permutation():
    with pytest.raises(FormatRuleError, match="permutation"):
        A.permute(np.zeros((2, 4), np.float32), np.array([0, 1, 1, 3]), 1)


# ------------------------------------------------------------------ independent transliteration
def _official_sim_fake_quant_acts(x, group, keeper, clip):
    """Atom quantize_activation_wrapper (keeper_precision=3) re-derived from model/quant.py:
    save the last `keeper` channels, INT8 them per row, zero them, INT4 every group of the
    WHOLE row (the zeroed group included), restore. Every op fp32, rounded to x.dtype."""
    dt = x.dtype

    def qt(w, bits, c):  # quantize_tensor, sym, group_size=0: one group per row
        qmax = 2 ** (bits - 1) - 1
        wmax = np.maximum(np.abs(w).max(axis=1, keepdims=True), dt.type(np.float32(1e-5)))
        if c < 1.0:
            wmax = (wmax.astype(np.float32) * np.float32(c)).astype(dt)
        s = (wmax.astype(np.float32) / np.float32(qmax)).astype(dt)
        r = (w.astype(np.float32) / s.astype(np.float32)).astype(dt)
        base = np.zeros_like(s)  # sym: torch.zeros_like(scales), +0.0
        q = np.clip(np.round(r) + base, -qmax - 1, qmax) - base  # round(-0.3) = -0.0; -0.0 + 0.0 = +0.0
        return (q.astype(np.float32) * s.astype(np.float32)).astype(dt)

    m, k = x.shape
    saved = qt(x[:, -keeper:].copy(), 8, 1.0)
    y = x.copy()
    y[:, -keeper:] = 0
    y = qt(y.reshape(-1, group), 4, clip).reshape(m, k)
    y[:, -keeper:] = saved
    return y


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_simulation_activations_match_transliteration_of_official(dtype):
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((5, 384)) * 3).astype(dtype)
    x[0, :128] = 0  # an all-zero group exercises the 1e-5 floor
    ours = A.dequantize_activations(A.quantize_activations(x, "simulation"))
    theirs = _official_sim_fake_quant_acts(x, 128, 128, 0.9)
    # raw bits, signed zeros included: the official `round(w/s) + base` with base = +0.0 turns
    # round's -0.0 into +0.0, so the simulation never emits -0.0 (and neither do int8 codes)
    assert not np.signbit(theirs[theirs == 0]).any()
    assert_bitexact(ours, theirs, name="fake-quant activations")


@pytest.mark.parametrize("mode", A.MODES)
@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_vectorised_quantizers_match_plain_loops(mode, dtype):
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((3, 192)) * 2).astype(dtype)
    w = (rng.standard_normal((192, 6)) * 0.1).astype(dtype)
    kw = dict(group_size=64, keeper=64)
    _same(A.quantize_activations(x, mode, **kw), A.quantize_activations_reference(x, mode, **kw), "acts")
    _same(A.quantize_weights(w, mode, **kw), A.quantize_weights_reference(w, mode, **kw), "weights")


def test_rounding_modes_differ_exactly_on_ties():
    # group absmax 7 -> kernel scale 1 exactly: x*1 = 2.5 rounds to 3 (away), simulation with
    # clip 1 and scale 1 rounds 2.5 to 2 (even); -0.5 -> -1 (away) vs -0 (even)
    x = np.zeros((1, 256), np.float32)
    x[0, :4] = [7.0, 2.5, -0.5, 1.5]
    x[0, 128] = 127.0
    k = A.quantize_activations(x, "kernel")
    s = A.quantize_activations(x, "simulation", clip=1.0)
    assert k.q4[0, :4].tolist() == [7, 3, -1, 2]
    assert s.q4[0, :4].tolist() == [7, 2, 0, 2]
    assert k.scale4.dtype == np.float16 and float(k.scale4[0, 0]) == 1.0


def test_kernel_mode_all_zero_group_gives_zero_codes():
    x = np.zeros((2, 256), np.float32)
    a = A.quantize_activations(x, "kernel")
    assert not a.q4.any() and not a.q8.any()


def test_weight_scales_are_shared_by_column_pairs_and_clipped():
    rng = np.random.default_rng(5)
    w = rng.standard_normal((256, 8)).astype(np.float32)
    q = A.quantize_weights(w, "simulation")
    assert_bitexact(q.scale4[:, 0::2], q.scale4[:, 1::2], name="pair scales")
    # independent: scale = 0.85 * absmax(pair block) / 7 in fp32
    blk = w[:128, 2:4]
    expected = np.float32(np.float32(np.abs(blk).max()) * np.float32(0.85)) / np.float32(7)
    assert_bitexact(q.scale4[0, 2], np.float32(expected), name="scale of (group 0, pair 1)")
    # the tail is unclipped: the per-column absmax maps to +-127 exactly
    assert np.abs(q.q8).max(axis=0).tolist() == [127] * 8
    fake = A.dequantize_weights(q)
    assert fake.shape == w.shape


def test_inputs_are_not_modified():
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, 256)).astype(np.float32)
    keep = x.copy()
    A.quantize_activations(x, "kernel")
    w = x.T.copy()
    keep_w = w.copy()
    A.quantize_weights(w, "simulation", keeper=0, group_size=2)
    assert_bitexact(w, keep_w, name="weights")
    A.quantize_kv(x)
    assert_bitexact(x, keep, name="input")


# ------------------------------------------------------------------ INT4 packing
def test_pack_int4_every_pair_of_values():
    vals = np.arange(-8, 8, dtype=np.int8)
    lo, hi = np.meshgrid(vals, vals, indexing="ij")
    q = np.stack([lo.ravel(), hi.ravel()], axis=1)       # (256, 2): every (even, odd) pair
    packed = A.pack_int4(q)
    expected = np.array([((int(a) & 15) | ((int(b) & 15) << 4)) for a, b in q], np.uint8)[:, None]
    assert_bitexact(packed, expected, name="packed")
    assert_bitexact(A.pack_int4_reference(q), packed, name="reference")
    assert_bitexact(A.unpack_int4(packed), q, name="unpack")
    assert A.pack_int4(np.array([[-3, 5]], np.int8))[0, 0] == 0x5D   # worked example of the docstring


def test_pack_int4_rejects_out_of_range():
    with pytest.raises(FormatRuleError, match=r"\[-8, 7\]"):
        A.pack_int4(np.array([[8, 0]], np.int8))


# ------------------------------------------------------------------ bad input
def test_bad_input_raises_named_errors():
    x = np.zeros((2, 256), np.float32)
    with pytest.raises(ShapeError, match="K - keeper"):
        A.quantize_activations(x, group_size=96)
    with pytest.raises(FormatRuleError, match="mode"):
        A.quantize_activations(x, "fast")
    with pytest.raises(ShapeError, match="even"):
        A.quantize_weights(np.zeros((256, 3), np.float32))
    bad = x.copy()
    bad[1, 5] = np.nan
    with pytest.raises(NonFiniteError):
        A.quantize_activations(bad)


def test_reorder_index_exhaustive_over_all_orders_of_five():
    import itertools

    vals = np.array([0.5, 1.0, 2.0, 4.0, 8.0], np.float32)
    for perm in itertools.permutations(range(5)):
        stat = vals[list(perm)]
        idx = A.reorder_index(stat)
        assert np.array_equal(stat[idx], vals)          # ascending: largest (outlier) last


@pytest.mark.parametrize("clip", [0.0, -0.5, 1.5, float("nan")])
def test_clip_ratio_outside_unit_interval_is_rejected(clip):
    x = np.ones((1, 256), np.float32)
    with pytest.raises(FormatRuleError, match="clip"):
        A.quantize_activations(x, clip=clip)
    with pytest.raises(FormatRuleError, match="clip"):
        A.quantize_weights(np.ones((256, 2), np.float32), clip=clip)


# --------------------------------------------------------------------------- properties (hypothesis)
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


def test_moved_names_are_the_objects_of_their_new_modules():
    from refsim.formats import atom_gemm, atom_kv
    assert A.atom_gemm is atom_gemm.atom_gemm and A.scale_positions is atom_gemm.scale_positions
    assert A.quantize_kv is atom_kv.quantize_kv and A.AtomKV is atom_kv.AtomKV
    with pytest.raises(AttributeError, match="has no attribute 'not_a_name'"):
        A.not_a_name


# ------------------------------------------------------------------ the public rule checks
def test_the_split_clip_and_permutation_rules_accept_the_legal_and_name_what_they_refuse():
    assert A.check_split(384, np.int64(128), 128) == (128, 128) and A.check_split(256, 128, 0) == (128, 0)
    for group, keeper, err, text in ((128, 300, ShapeError, "keeper: must be at most K=256"),
                                     (96, 128, ShapeError, "K - keeper: must be a multiple of group_size=96"),
                                     (0, 0, FormatRuleError, "group_size: must be >= 1")):
        with pytest.raises(err, match=f"^{text}"):
            A.check_split(256, group, keeper)
    assert A.check_clip(1) == 1.0 and type(A.check_clip(np.float16(0.5))) is float
    for bad in (0.0, 1.01, True, "0.9", float("nan")):
        with pytest.raises(FormatRuleError, match="^w_clip: "):
            A.check_clip(bad, "w_clip")
    idx = np.array([2, 0, 1])
    assert A.check_perm(idx, 3) is idx
    for bad, err in ((np.array([0, 0, 1]), FormatRuleError), (np.array([0, 1]), ShapeError)):
        with pytest.raises(err, match="^idx: "):
            A.check_perm(bad, 3)
