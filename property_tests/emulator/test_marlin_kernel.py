"""Property: the Marlin emulation returns the exact product whenever no partial sum can round,
for any legal shape, group mode and SM count (so any partition and reduction order)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from refsim.emulator import marlin_kernel as mk
from refsim.formats import marlin
from refsim.testing import assert_bitexact, examples


@settings(max_examples=examples(40))   # affordable since the k16 steps run compiled
@given(m=st.integers(1, 20), k=st.sampled_from([128, 256, 384]), gs=st.sampled_from([128, None]),
       sms=st.integers(1, 40), seed=st.integers(0, 2**16), arch=st.sampled_from(["sm_80", "sm_90"]))
def test_exact_inputs_give_the_exact_product_for_any_partition(m, k, gs, sms, seed, arch):
    rng = np.random.default_rng(seed)
    n = 256
    q = rng.integers(0, 16, (k, n)).astype(np.uint8)
    g = 1 if gs is None else k // gs
    sc = (2.0 ** rng.integers(-2, 2, (g, n))).astype(np.float16)
    A = (rng.integers(-1, 2, (m, k)) * (rng.random((m, k)) < 0.08)).astype(np.float16)
    B, s = marlin.pack(q, sc, gs)
    w = (q.astype(np.float64) - 8) * np.repeat(sc.astype(np.float64), k // g, axis=0)
    if (np.abs(A.astype(np.float64)) @ np.abs(w)).max() >= 2**9:   # keep every partial sum exact
        A = np.zeros_like(A)
    expected = (A.astype(np.float64) @ w).astype(np.float16) + np.float16(0)  # exact; -0 -> +0
    assert_bitexact(mk.marlin_gemm(A, B, s, arch=arch, sms=sms), expected)
