"""Property test: vectorised seed + upscaling equals the per-channel loops on drawn layers."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from refsim.quant import upscale as up
from refsim.testing import assert_bitexact, examples


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
