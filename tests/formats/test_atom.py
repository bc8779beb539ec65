"""Tests of refsim.formats.atom: reorder permutations, both quantization modes against plain
loops and against an independent transliteration of efeslab/Atom's simulation, exhaustive INT4
packing, the fused group GEMM bit for bit, KV cache, and bad input."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from refsim.arith.exact import round_to_float
import pytest

from refsim.errors import FormatRuleError, NonFiniteError, ShapeError
from refsim.formats import atom as A
from refsim.formats import atom_gemm as atom_gemm_module
from refsim.testing import assert_bitexact

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


# ------------------------------------------------------------------ fused GEMM
def _problem(seed, m=5, k=384, n=6, group=128, keeper=128):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((m, k)) * 2).astype(np.float16)
    w = (rng.standard_normal((k, n)) * 0.05).astype(np.float16)
    return (A.quantize_activations(x, "kernel", group_size=group, keeper=keeper),
            A.quantize_weights(w, "kernel", group_size=group, keeper=keeper))


@pytest.mark.parametrize("seed", [0, 1])
def test_atom_gemm_matches_plain_loop_bit_for_bit(seed):
    a, w = _problem(seed, group=64, keeper=64, k=192)
    assert_bitexact(A.atom_gemm(a, w), A.atom_gemm_reference(a, w), name="D")


def test_atom_gemm_close_to_float64_product_of_dequantized_operands():
    # independent bound: D differs from the exact sum of dequantized products only by the
    # fp16 scale-product roundings (2**-11 relative each), fp32 accumulation and the final
    # fp16 rounding; bound |err| <= 2**-11 * sum|terms| + 2**-11 |D|.
    a, w = _problem(3)
    d = A.atom_gemm(a, w).astype(np.float64)
    xa = A.dequantize_activations(a, np.float64)
    wa = A.dequantize_weights(w, np.float64)
    exact = xa @ wa
    bound = 2.0 ** -11 * (np.abs(xa) @ np.abs(wa)) * 1.01 + 2.0 ** -11 * np.abs(exact) + 1e-6
    assert np.all(np.abs(d - exact) <= bound)


def test_fma_is_correctly_rounded_including_midpoints():
    rng = np.random.default_rng(7)
    acc = rng.standard_normal(2000).astype(np.float32) * np.float32(1000)
    p = rng.integers(-(1 << 21), 1 << 21, 2000)
    s = rng.standard_normal(2000).astype(np.float16)
    # midpoint cases: acc + p*s lands exactly between two floats of acc's binade, plus a tiny tail
    acc[:10] = np.float32(1 << 24)
    p[:10] = 1
    s[:10] = np.float16(1.0)         # 2**24 + 1 is a tie -> even (2**24)
    s[5:10] = np.float16(1.0009765625)  # 2**24 + 1 + 2**-10: above the tie -> 2**24 + 2
    got = atom_gemm_module._fma_f32(acc, p, s)
    for i in range(2000):
        exact = Fraction(float(acc[i])) + int(p[i]) * Fraction(float(s[i]))
        assert got[i] == round_to_float(exact, np.float32), i
    assert got[0] == np.float32(1 << 24) and got[5] == np.float32((1 << 24) + 2)


def test_atom_gemm_rejects_unequal_pair_scales():
    a, w = _problem(4)
    s = w.scale4.copy()
    s[0, 1] = s[0, 1] * np.float16(2)
    bad = A.AtomWeights(w.q4, s, w.q8, w.scale8)
    with pytest.raises(FormatRuleError, match="2p and 2p\\+1"):
        A.atom_gemm(a, bad)


# ------------------------------------------------------------------ KV cache
def test_kv_cache_is_asymmetric_int4_per_vector():
    rng = np.random.default_rng(8)
    x = (rng.standard_normal((2, 3, 5, 128)) + 0.5).astype(np.float32)  # (batch, heads, tokens, head_dim)
    kv = A.quantize_kv(x)
    assert kv.q.shape == x.shape and kv.scale.shape == x.shape[:-1]
    assert kv.q.max() <= 15
    rng_ = x.max(-1) - x.min(-1)
    assert_bitexact(kv.scale, (rng_ / np.float32(15)).astype(np.float32), name="scale")
    err = np.abs(A.dequantize_kv(kv) - x)
    assert np.all(err <= kv.scale[..., None] * 1.0001)  # zero rounding (<= s/2) + value rounding (<= s/2)


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


# ------------------------------------------------------------------ kernel activation-scale layout
@pytest.mark.parametrize("m", list(range(1, 49)))
def test_scale_layout_positions_are_distinct_and_inside_the_leading_dim(m):
    pos = A.scale_positions(m)
    ld = A.scale_leading_dim(m)
    assert np.unique(pos).size == 4 * m                  # no two tokens share a half
    assert pos.max() < ld
    if m % 16 == 0:
        assert ld == 4 * m and np.array_equal(np.sort(pos.ravel()), np.arange(4 * m))   # dense


def test_scale_layout_half2_pairs_hold_rows_r_and_r_plus_8():
    pos = A.scale_positions(16)
    for r in range(8):
        for j in range(4):
            lo, hi = pos[r, j], pos[r + 8, j]
            assert hi == lo + 1 and lo % 2 == 0          # one aligned half2 = (scale[r], scale[r+8])


def test_scale_layout_matches_loop():
    rng = np.random.default_rng(9)
    s = rng.random((21, 3)).astype(np.float16) + np.float16(0.5)
    assert_bitexact(A.activation_scale_layout(s), A.activation_scale_layout_reference(s), name="layout")


def test_reorder_index_exhaustive_over_all_orders_of_five():
    import itertools

    vals = np.array([0.5, 1.0, 2.0, 4.0, 8.0], np.float32)
    for perm in itertools.permutations(range(5)):
        stat = vals[list(perm)]
        idx = A.reorder_index(stat)
        assert np.array_equal(stat[idx], vals)          # ascending: largest (outlier) last


def test_gemm_overflow_follows_ieee_like_the_kernel():
    # scale products beyond 65504 overflow to inf in fp16 (__hmul2); a zero partial sum times
    # inf is NaN, a non-zero one is +-inf; both paths agree bit for bit
    q4 = np.zeros((1, 64), np.int8)
    q4[0, 0] = 1
    a = A.AtomActivations(q4, np.array([[np.float16(300)]]), np.zeros((1, 0), np.int8), np.ones(1, np.float16))
    wq = np.zeros((64, 2), np.int8)
    wq[0, 0] = 1
    w = A.AtomWeights(wq, np.full((1, 2), np.float16(300)), np.zeros((0, 2), np.int8), np.ones(2, np.float16))
    d = A.atom_gemm(a, w)
    assert np.isposinf(d[0, 0]) and np.isnan(d[0, 1])
    assert_bitexact(d, A.atom_gemm_reference(a, w), name="D")


def test_pack_kv_is_lsb_first_in_little_endian_words():
    rng = np.random.default_rng(10)
    q = rng.integers(0, 16, (3, 128), dtype=np.uint8)
    packed = A.pack_kv(q)
    words = packed.view("<u4")                              # (3, 16): 8 codes per 32-bit word
    for r in range(3):
        for i in range(16):
            for j in range(8):
                assert (int(words[r, i]) >> (4 * j)) & 0xF == q[r, 8 * i + j]
    assert_bitexact(A.unpack_kv(packed), q, name="round trip")
    with pytest.raises(FormatRuleError, match="4-bit codes"):
        A.pack_kv(np.array([[16, 0]], np.uint8))


@pytest.mark.parametrize("clip", [0.0, -0.5, 1.5, float("nan")])
def test_clip_ratio_outside_unit_interval_is_rejected(clip):
    x = np.ones((1, 256), np.float32)
    with pytest.raises(FormatRuleError, match="clip"):
        A.quantize_activations(x, clip=clip)
    with pytest.raises(FormatRuleError, match="clip"):
        A.quantize_weights(np.ones((256, 2), np.float32), clip=clip)


# ---- round_half_away (CUDA roundf): vectorised form vs its plain loop --------------------------
def _same_float_bits(a, b):
    nan = np.isnan(a)
    assert np.array_equal(nan, np.isnan(b)) and np.array_equal(np.signbit(a), np.signbit(b))
    assert_bitexact(a[~nan], b[~nan], "round_half_away")


@pytest.mark.parametrize("x, want", [
    (0.5, 1.0), (-0.5, -1.0), (1.5, 2.0), (2.5, 3.0), (-2.5, -3.0), (0.49999997, 0.0),
    (-0.3, -0.0), (-0.0, -0.0), (0.0, 0.0), (8388607.5, 8388608.0), (16777216.0, 16777216.0),
    (np.inf, np.inf), (-np.inf, -np.inf)])
def test_round_half_away_hand_values(x, want):
    got = A.round_half_away(np.array([x], np.float32))[0]
    assert got == want and np.signbit(got) == np.signbit(want)


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_round_half_away_every_f16_value_and_halfway_points(dtype):
    every = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(dtype)
    _same_float_bits(A.round_half_away(every), A.round_half_away_reference(every))
    if dtype is np.float32:
        half = (np.arange(-40000, 40000) + 0.5).astype(np.float32)     # exact ties and both neighbours
        x = np.concatenate([half, np.nextafter(half, np.float32(0)), np.nextafter(half, np.float32(np.inf)),
                            np.random.default_rng(5).integers(0, 2**32, 40000, dtype=np.uint64)
                            .astype(np.uint32).view(np.float32)])
        _same_float_bits(A.round_half_away(x), A.round_half_away_reference(x))


def test_round_half_away_float64_is_exact_and_input_untouched():
    x = np.array([0.49999999999999994, -0.49999999999999994, 2.0 ** 52 - 0.5, 2.0 ** 52 + 1])
    before = x.copy()
    got = A.round_half_away(x)
    assert got.tolist() == [0.0, -0.0, 2.0 ** 52, 2.0 ** 52 + 1]
    assert np.array_equal(x, before)
    _same_float_bits(got, A.round_half_away_reference(x))
