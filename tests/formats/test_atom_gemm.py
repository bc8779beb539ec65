"""Tests of refsim.formats.atom_gemm: the fused group GEMM against its plain loop and an independent
bound, the correctly rounded fp32 FMA (midpoints included), IEEE overflow, the pair-scale rule, and the
kernel's activation-scale buffer layout."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from refsim.arith.exact import round_to_float
from refsim.errors import FormatRuleError
from refsim.formats import atom as A
from refsim.formats import atom_gemm as G
from refsim.testing import assert_bitexact


def _problem(seed, m=5, k=384, n=6, group=128, keeper=128):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((m, k)) * 2).astype(np.float16)
    w = (rng.standard_normal((k, n)) * 0.05).astype(np.float16)
    return (A.quantize_activations(x, "kernel", group_size=group, keeper=keeper),
            A.quantize_weights(w, "kernel", group_size=group, keeper=keeper))


@pytest.mark.parametrize("seed", [0, 1])
def test_atom_gemm_matches_plain_loop_bit_for_bit(seed):
    a, w = _problem(seed, group=64, keeper=64, k=192)
    assert_bitexact(G.atom_gemm(a, w), G.atom_gemm_reference(a, w), name="D")


def test_atom_gemm_close_to_float64_product_of_dequantized_operands():
    # independent bound: D differs from the exact sum of dequantized products only by the
    # fp16 scale-product roundings (2**-11 relative each), fp32 accumulation and the final
    # fp16 rounding; bound |err| <= 2**-11 * sum|terms| + 2**-11 |D|.
    a, w = _problem(3)
    d = G.atom_gemm(a, w).astype(np.float64)
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
    got = G._fma_f32(acc, p, s)
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
        G.atom_gemm(a, bad)


# ------------------------------------------------------------------ kernel activation-scale layout
@pytest.mark.parametrize("m", list(range(1, 49)))
def test_scale_layout_positions_are_distinct_and_inside_the_leading_dim(m):
    pos = G.scale_positions(m)
    ld = G.scale_leading_dim(m)
    assert np.unique(pos).size == 4 * m                  # no two tokens share a half
    assert pos.max() < ld
    if m % 16 == 0:
        assert ld == 4 * m and np.array_equal(np.sort(pos.ravel()), np.arange(4 * m))   # dense


def test_scale_layout_half2_pairs_hold_rows_r_and_r_plus_8():
    pos = G.scale_positions(16)
    for r in range(8):
        for j in range(4):
            lo, hi = pos[r, j], pos[r + 8, j]
            assert hi == lo + 1 and lo % 2 == 0          # one aligned half2 = (scale[r], scale[r+8])


def test_scale_layout_matches_loop():
    rng = np.random.default_rng(9)
    s = rng.random((21, 3)).astype(np.float16) + np.float16(0.5)
    assert_bitexact(G.activation_scale_layout(s), G.activation_scale_layout_reference(s), name="layout")


def test_gemm_overflow_follows_ieee_like_the_kernel():
    # scale products beyond 65504 overflow to inf in fp16 (__hmul2); a zero partial sum times
    # inf is NaN, a non-zero one is +-inf; both paths agree bit for bit
    q4 = np.zeros((1, 64), np.int8)
    q4[0, 0] = 1
    a = A.AtomActivations(q4, np.array([[np.float16(300)]]), np.zeros((1, 0), np.int8), np.ones(1, np.float16))
    wq = np.zeros((64, 2), np.int8)
    wq[0, 0] = 1
    w = A.AtomWeights(wq, np.full((1, 2), np.float16(300)), np.zeros((0, 2), np.int8), np.ones(2, np.float16))
    d = G.atom_gemm(a, w)
    assert np.isposinf(d[0, 0]) and np.isnan(d[0, 1])
    assert_bitexact(d, G.atom_gemm_reference(a, w), name="D")


def test_check_gemm_returns_the_problem_and_allows_unequal_pair_scales_only_without_pairs():
    a, w = _problem(5)                                    # M 5, K 384 = 2 groups of 128 + keeper 128, N 6
    assert G.check_gemm(a, w) == (5, 6, 2, 128)
    s = w.scale4.copy()
    s[0, 1] = s[0, 1] * np.float16(2)
    unequal = A.AtomWeights(w.q4, s, w.q8, w.scale8)
    assert G.check_gemm(a, unequal, pairs=False) == (5, 6, 2, 128)
    with pytest.raises(FormatRuleError, match="2p and 2p\\+1"):
        G.check_gemm(a, unequal)
    with pytest.raises(FormatRuleError, match="^w: "):
        G.check_gemm(a, a)


# --------------------------------------------------------------------------- the official kernel's body rule
@pytest.mark.parametrize("k4", [0, 128, 256, 383])
def test_a_body_under_three_groups_is_refused_with_the_official_kernels_rule(k4):
    with pytest.raises(FormatRuleError, match=rf"prologue loads three k-tiles unguarded.*got {k4}$"):
        G.require_official_body(k4)


def test_three_groups_and_more_pass_the_body_rule():
    assert G.require_official_body(384) == 384 and G.require_official_body(4096) == 4096


@pytest.mark.parametrize("shape, want", [
    ((16, 256, 384, 128), {"body_min_groups", "keeper", "n_several_blocks"}),
    ((20, 96, 512, 0), {"body_more_groups", "no_keeper", "m_partial_tile", "n_partial_block"}),
    ((130, 128, 384, 32), {"body_min_groups", "keeper", "m_partial_tile", "m_several_blocks"}),
    ((128, 128, 640, 128), {"body_more_groups", "keeper"}),
])
def test_plan_branches_name_the_paths_a_shape_takes(shape, want):
    got = G.plan_branches(*shape)
    assert got == want and got <= set(G.BRANCHES)


def test_plan_branches_refuses_a_body_the_kernel_cannot_run():
    with pytest.raises(FormatRuleError, match="got 256"):
        G.plan_branches(16, 128, 256, 128)
