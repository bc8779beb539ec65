"""Property: the W4A16 GEMV emulation equals its plain-loop twin on drawn shapes and values (signed
zeros, subnormals, ties, overflow to inf), and is exact when no partial sum can round."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from refsim.emulator import gptq_awq_kernel as ek
from refsim.testing import assert_bitexact, examples

SPECIAL = np.array([0.0, -0.0, 2.0**-24, -(2.0**-24), 2.0**-14, 1.0, 1.0 + 2.0**-10, 2.0**-11, 2048.0, 65504.0],
                   np.float16)


@settings(max_examples=examples(25))
@given(seed=st.integers(0, 2**31 - 1), m=st.integers(1, 8), slabs=st.integers(1, 4), n=st.integers(1, 5),
       share=st.sampled_from([0.0, 0.3, 1.0]))
def test_vectorised_equals_plain_loop_twin(seed, m, slabs, n, share):
    rng = np.random.default_rng(seed)
    k = 8 * slabs
    W = rng.standard_normal((k, n)).astype(np.float16)
    x = rng.standard_normal((m, k)).astype(np.float16)
    for a in (W, x):
        pick = rng.random(a.shape) < share
        a[pick] = SPECIAL[rng.integers(0, SPECIAL.size, int(pick.sum()))] * np.where(rng.random(int(pick.sum())) < 0.5, -1, 1).astype(np.float16)
    assert_bitexact(ek.dequant_gemv(x, W), ek.dequant_gemv_reference(x, W), name="y")


@settings(max_examples=examples(25))
@given(seed=st.integers(0, 2**31 - 1), m=st.integers(1, 8), slabs=st.integers(1, 16))
def test_small_integers_give_the_exact_product(seed, m, slabs):
    rng = np.random.default_rng(seed)
    k = 8 * slabs
    W = rng.integers(-15, 16, (k, 3)).astype(np.float16)      # q - z of a 4-bit code, scale 1
    x = rng.integers(-1, 2, (m, k)).astype(np.float16)        # partial sums stay below 2^11
    exact = (x.astype(np.int64) @ W.astype(np.int64)).astype(np.float16) + np.float16(0)
    assert_bitexact(ek.dequant_gemv(x, W), exact, name="y")
