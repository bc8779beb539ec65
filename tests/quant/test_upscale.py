"""Incremental upscaling: official bit-identity, nesting (any-precision property), split cases; property:
the vectorised seed + upscaling equals the per-channel loops on drawn layers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refsim.errors import FormatRuleError
from refsim.formats import bitplane as bp
from refsim.quant import upscale as up
from refsim.testing import assert_bitexact, examples

FIXTURE = Path(__file__).parent / "data" / "anyprec_official_8x96_s3p8_rs5.npz"


def _edge_case_layer(k=48, n=9, seed=0):
    rng = np.random.default_rng(seed)
    W = rng.standard_normal((k, n)).astype(np.float32)
    G = rng.random((k, n)).astype(np.float32)
    G[:, 1] = 0
    G[: k // 2, 2] = 0
    G[::2, 3] = 0
    W[:8, 4] = 0
    G[:, 5] = 0
    G[7, 5] = 2.0
    W[:, 6] = np.round(W[:, 6] * 2) / 2
    G[:, 7] = G[:, 7] * np.float32(1e-30)  # tiny weights: prefix sums absorb some of them
    return W, G


@pytest.mark.parametrize("k, seed_bits, parent_bits", [(48, 3, 8), (16, 2, 6), (300, 3, 6)])
def test_vectorised_upscaling_matches_per_cluster_reference(k, seed_bits, parent_bits):
    W, G = _edge_case_layer(k=k)
    a = up.seed_and_upscale(W, G, seed_bits, parent_bits, random_state=1)
    b = up.seed_and_upscale_reference(W, G, seed_bits, parent_bits, random_state=1)
    for bits in range(seed_bits, parent_bits + 1):
        assert_bitexact(a.luts[bits], b.luts[bits], name=f"lut{bits}")
        assert_bitexact(a.borders[bits], b.borders[bits], name=f"borders{bits}")
    assert_bitexact(a.codes, b.codes, name="codes")


def test_matches_the_official_quantizer_bit_for_bit():
    d = np.load(FIXTURE)
    m = up.seed_and_upscale(d["W"].T.copy(), d["G"].T.copy(), 3, 8, random_state=5)
    for bits in range(3, 9):
        assert_bitexact(m.luts[bits], d[f"lut{bits}"], name=f"lut{bits}")
    assert_bitexact(m.codes.T.copy(), d["labels"], name="parent codes")


def test_every_prefix_is_the_intermediate_model():
    W, G = _edge_case_layer(k=200, seed=3)
    m = up.seed_and_upscale(W, G, 3, 7, random_state=0)
    order = np.argsort(W.T.astype(np.float32), axis=1, kind="stable")
    for bits in range(3, 8):
        # children nest inside parents: borders of level b are every other border of b+1
        if bits < 7:
            assert np.array_equal(m.borders[bits + 1][:, ::2], m.borders[bits])
        # the b-bit prefix code of each weight is the index of its level-b cluster
        pos = np.empty_like(order)
        np.put_along_axis(pos, order, np.arange(W.shape[0])[None, :].repeat(W.shape[1], 0), axis=1)
        for n in range(W.shape[1]):
            cluster = np.searchsorted(m.borders[bits][n], pos[n], side="right") - 1
            assert np.array_equal(cluster, m.codes_at(bits)[:, n])


def test_prefix_dequantization_through_the_bitplane_format():
    W, G = _edge_case_layer(k=64, seed=5)
    m = up.seed_and_upscale(W, G, 3, 8, random_state=0)
    qweight = bp.pack(np.ascontiguousarray(m.codes.T), 8)  # (8, N, K/32)
    q2, luts16 = m.packed()
    assert_bitexact(q2, qweight, name="packed() qweight")
    assert sorted(luts16) == list(range(3, 9)) and all(v.dtype == np.float16 for v in luts16.values())
    for bits in range(3, 9):
        lut16 = m.luts[bits].astype(np.float16)
        got = bp.dequantize(qweight, lut16, bits)  # (N, K)
        want = m.dequantize(bits).T.astype(np.float16)
        assert_bitexact(got, want, name=f"{bits}-bit model")


@pytest.mark.parametrize(
    "xs, w, expected",
    [
        ([1.0], [1.0], (1.0, 1.0, 1)),  # size 1: right child empty
        ([1.0, 5.0], [0.0, 0.0], (1.0, 5.0, 1)),  # size 2: split whatever the weights
        ([0.0, 1.0, 10.0, 11.0], [1.0, 1.0, 1.0, 1.0], (0.5, 10.5, 2)),  # two obvious groups
        ([0.0, 1.0, 2.0, 9.0], [0.0, 0.0, 3.0, 0.0], (2.0, 2.0, 4)),  # one positive weight
        ([0.0, 1.0, 10.0, 11.0], [0.0, 0.0, 0.0, 0.0], (0.5, 10.5, 2)),  # unweighted search
        # first fixed point the bisection meets, not the optimum: d = 2 gives cL = 0.5,
        # cR = 2.1 / 1.001, midpoint 1.299 in [x1, x2] -> stop (inertia 10.1; d = 3 would give 2)
        ([0.0, 1.0, 2.0, 100.0], [1.0, 1.0, 1.0, 0.001], (0.5, 2.1 / 1.001, 2)),
    ],
)
def test_split_cluster_special_cases(xs, w, expected):
    xs = np.array(xs, np.float32)
    w = np.array(w, np.float64)
    cl, cr, d = up.split_cluster_reference(xs, np.cumsum(w), np.cumsum(w * xs), 0, len(xs))
    assert (float(cl), float(cr), d) == pytest.approx(expected)


def test_upscaled_model_error_decreases_with_every_bit():
    rng = np.random.default_rng(6)
    W = rng.standard_normal((256, 4)).astype(np.float32)
    G = rng.random((256, 4)).astype(np.float32)
    m = up.seed_and_upscale(W, G, 3, 8, random_state=0)
    errs = [float(np.sum(G * (W - m.dequantize(b)) ** 2)) for b in range(3, 9)]
    assert all(e1 < e0 for e0, e1 in zip(errs, errs[1:]))


def test_bad_bits():
    W = np.ones((32, 2), np.float32)
    with pytest.raises(FormatRuleError, match="parent_bits"):
        up.seed_and_upscale(W, W, 4, 3)
    with pytest.raises(FormatRuleError, match="parent_bits"):
        up.seed_and_upscale(W, W, 3, 9)
    m = up.seed_and_upscale(W, W, 3, 4)
    with pytest.raises(FormatRuleError, match="bits"):
        m.codes_at(5)


TIES = Path(__file__).parent / "data" / "anyprec_official_ties_8x128_s3p8_rs2.npz"


def test_tie_heavy_weights_match_the_official_quantizer_with_numba_tie_order():
    # weights rounded like a float16 checkpoint (rows 4-7 to a coarse grid: 113 ties per row);
    # fixture from flash1dkmeans 0.2.5 with numba's np.argsort, as the official code sorts
    d = np.load(TIES)
    m = up.seed_and_upscale(d["W"].T.copy(), d["G"].T.copy(), 3, 8, random_state=2, tie_order="numba")
    for bits in range(3, 9):
        assert_bitexact(m.luts[bits], d[f"lut{bits}"], name=f"lut{bits}")
    assert_bitexact(m.codes.T.copy(), d["labels"], name="parent codes")
    # the stable order splits tie runs differently at high bit-widths: labels differ there
    s = up.seed_and_upscale(d["W"].T.copy(), d["G"].T.copy(), 3, 8, random_state=2)
    assert not np.array_equal(s.codes.T, d["labels"])


# --------------------------------------------------------------------------- properties (hypothesis)
@st.composite
def layers(draw):
    """Small (K, N) layers with the awkward cases: zero/sparse sensitivities, ties, zeros."""
    k = draw(st.integers(1, 80))
    n = draw(st.integers(1, 4))
    seed_bits = draw(st.integers(1, 3))
    parent_bits = draw(st.integers(seed_bits, 7))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    W = rng.standard_normal((k, n)).astype(np.float32)
    if draw(st.booleans()):
        W = np.round(W * 4).astype(np.float32) / 4  # ties and exact zeros
    G = rng.random((k, n)).astype(np.float32)
    G[rng.random((k, n)) < draw(st.sampled_from([0.0, 0.5, 0.95, 1.0]))] = 0
    return W, G, seed_bits, parent_bits, draw(st.integers(0, 5))


@settings(max_examples=examples(40))
@given(layers())
def test_vectorised_equals_reference(layer):
    W, G, s, p, rs = layer
    a = up.seed_and_upscale(W, G, s, p, random_state=rs)
    b = up.seed_and_upscale_reference(W, G, s, p, random_state=rs)
    for bits in range(s, p + 1):
        assert_bitexact(a.luts[bits], b.luts[bits], name=f"lut{bits}")
        assert_bitexact(a.borders[bits], b.borders[bits], name=f"borders{bits}")
    assert_bitexact(a.codes, b.codes, name="codes")
    for bits in range(s, p + 1):  # every prefix code indexes a real level-b cluster
        assert int(a.codes_at(bits).max(initial=0)) < (1 << bits)
