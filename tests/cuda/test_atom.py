"""refsim/cuda/atom.cu through refsim.ptx: atom_group_gemm equals its emulator bit for bit (unequal pair
scales, hypothesis-drawn M, N, groups and keeper widths), is the exact value rounded once where no partial
sum can round, and has no unfused epilogue."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from kernel_inputs import atom_problem as _atom_problem
from kernel_inputs import cases

import refsim.cuda as rc
from refsim.emulator import atom_kernel
from refsim.errors import FormatRuleError
from refsim.formats import atom
from refsim.testing import assert_bitexact


def test_atom_group_gemm_equals_its_emulator_with_unequal_pair_scales():
    rng = np.random.default_rng(5)
    m, n, kb, keeper = 20, 6, 384, 32                 # two tile rows (the second partial), one partial tile
    a = atom.AtomActivations(rng.integers(-8, 8, (m, kb)).astype(np.int8),
                             (rng.random((m, 3)) * 0.1).astype(np.float16),
                             rng.integers(-128, 128, (m, keeper)).astype(np.int8),
                             (rng.random(m) * 0.01).astype(np.float16))
    w = atom.AtomWeights(rng.integers(-8, 8, (kb, n)).astype(np.int8), (rng.random((3, n)) * 0.1).astype(np.float16),
                         rng.integers(-128, 128, (keeper, n)).astype(np.int8), (rng.random(n) * 0.01).astype(np.float16))
    assert_bitexact(rc.atom_group_gemm(a, w), atom_kernel.atom_group_gemm(a, w), name="D")


def test_atom_kernel_has_no_unfused_epilogue():
    with pytest.raises(FormatRuleError, match="fused"):
        rc.atom_group_gemm(None, None, fused=False)


@settings(max_examples=4)
@given(c=cases, m=st.integers(1, 40), n2=st.integers(1, 20), groups=st.integers(3, 4), keeper=st.sampled_from([0, 32, 128]),
       pair_equal=st.booleans())
@example(c={"seed": 3, "special": 0.2}, m=20, n2=3, groups=3, keeper=128, pair_equal=False)
def test_atom_group_gemm_equals_its_emulator(c, m, n2, groups, keeper, pair_equal):
    rng = np.random.default_rng(c["seed"])
    a, w = _atom_problem(rng, m, 2 * n2, groups, keeper, pair_equal, c["special"])
    assert_bitexact(rc.atom_group_gemm(a, w), atom_kernel.atom_group_gemm(a, w), name="D")


@settings(max_examples=2)
@given(seed=st.integers(0, 2**31 - 1), m=st.integers(1, 20), groups=st.integers(3, 3))
def test_atom_group_gemm_is_exact_when_no_partial_sum_rounds(seed, m, groups):
    # power-of-two scales in [2^-6, 2^-3], pair-equal: every scale product is exact in fp16 and every
    # fp32 partial sum lies on the grid 2^-12 below 2^11, so the kernel returns the exact value rounded once
    rng = np.random.default_rng(seed)
    n, keeper = 8, 32
    a, w = _atom_problem(rng, m, n, groups, keeper, True, 0.0)
    a = atom.AtomActivations(a.q4, (2.0 ** rng.integers(-6, -2, a.scale4.shape)).astype(np.float16), a.q8,
                             (2.0 ** rng.integers(-6, -2, m)).astype(np.float16))
    w = atom.AtomWeights(w.q4, np.repeat(2.0 ** rng.integers(-6, -2, (groups, n // 2)), 2, axis=1).astype(np.float16),
                         np.clip(w.q8, -8, 8), np.repeat(2.0 ** rng.integers(-6, -2, n // 2), 2).astype(np.float16))
    exact = np.zeros((m, n))
    for g in range(groups):
        sl = slice(128 * g, 128 * (g + 1))
        exact += (a.q4[:, sl].astype(np.int64) @ w.q4[sl].astype(np.int64)) * (
            a.scale4[:, g, None].astype(np.float64) * w.scale4[g][None].astype(np.float64))
    exact += (a.q8.astype(np.int64) @ w.q8.astype(np.int64)) * (a.scale8[:, None].astype(np.float64) * w.scale8[None].astype(np.float64))
    assert np.array_equal(exact.astype(np.float32).astype(np.float64), exact)      # premise: fp32-exact
    assert_bitexact(rc.atom_group_gemm(a, w), exact.astype(np.float16) + np.float16(0), name="D")



def test_atom_cu_keeps_to_the_official_kernels_body_rule():
    rng = np.random.default_rng(1)
    a, w = _atom_problem(rng, 4, 8, 2, 128, True, 0.0)           # body 256: two groups
    with pytest.raises(FormatRuleError, match="prologue loads three k-tiles unguarded.*got 256$"):
        rc.atom_group_gemm(a, w)
