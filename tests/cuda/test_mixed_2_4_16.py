"""refsim/cuda/mixed_2_4_16.cu through refsim.ptx: mixed_gemv equals its emulator bit for bit on a pinned case
and on hypothesis-drawn group counts, outlier ratios and values."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from kernel_inputs import cases
from kernel_inputs import special_values as _values

import refsim.cuda as rc
from refsim.emulator import mixed_2_4_16_kernel
from refsim.formats import mixed_2_4_16 as m2416
from refsim.quant import mixed_2_4_16 as q2416
from refsim.testing import assert_bitexact


def test_mixed_gemv_equals_its_emulator():
    rng = np.random.default_rng(4)
    k, n = 128, 16
    W = (rng.standard_normal((k, n)) * 0.05).astype(np.float32)
    X = rng.standard_normal((2 * k, k))
    p = m2416.pack(q2416.quantize(W, (X.T @ X) / k, alpha=0.25, outlier_ratio=0.005))
    x = rng.standard_normal(k).astype(np.float16)
    assert_bitexact(rc.mixed_gemv(p, x), mixed_2_4_16_kernel.mixed_gemv(p, x), name="y")


@settings(max_examples=4)
@given(c=cases, g=st.integers(1, 12), nb=st.integers(1, 2), alpha=st.sampled_from([0.0, 0.25, 0.5, 1.0]),
       ratio=st.sampled_from([0.0, 0.005]))
def test_mixed_gemv_equals_its_emulator_on_drawn_shapes_and_values(c, g, nb, alpha, ratio):
    rng = np.random.default_rng(c["seed"])
    k, n = 16 * g, 16 * nb
    W = (rng.standard_normal((k, n)) * 0.05).astype(np.float32)
    X = rng.standard_normal((2 * k, k))
    p = m2416.pack(q2416.quantize(W, (X.T @ X) / k, alpha=alpha, outlier_ratio=ratio))
    x = _values(rng, (k,), 1.0, c["special"])
    assert_bitexact(rc.mixed_gemv(p, x), mixed_2_4_16_kernel.mixed_gemv(p, x), name="y")

