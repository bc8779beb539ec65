"""Inputs the refsim/cuda kernel tests share: a GPTQ checkpoint, fp16 values that stress the rounding
(for the hypothesis-drawn cases), the drawn-case strategy and an Atom problem. A helper module, not a test
(conftest.py puts this folder on sys.path)."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from refsim.formats import atom, gptq

__all__ = ["SPECIAL16", "gptq_checkpoint", "special_values", "cases", "atom_problem"]

# fp16 values that stress the rounding: signed zeros, the smallest and largest subnormal, a normal
# whose neighbours tie (1 + 2^-10 pairs with 2^-11 halves), powers of two across the range
SPECIAL16 = np.array([0.0, -0.0, 2.0**-24, -(2.0**-24), 2.0**-14 - 2.0**-24, 1.0, -1.0, 1.0 + 2.0**-10,
                      2.0**-11, 0.5, 3.0, 2048.0, -2048.0, 2.0**-8], np.float16)


def gptq_checkpoint(rng, k, n, group, fmt="gptq", act_order=False):
    g = k // group
    g_idx = rng.permutation(np.arange(k) // group).astype(np.int32) if act_order else None
    return gptq.pack(rng.integers(0, 16, (k, n)), (rng.random((g, n)) * 0.02 + 0.001).astype(np.float32),
                     rng.integers(1, 16, (g, n)), 4, g_idx=g_idx, group_size=group, checkpoint_format=fmt)


def special_values(rng, shape, scale, special_share):
    """float16 array: N(0, scale) values with a share replaced by SPECIAL16 entries (scaled down so that
    sums stay finite: 2048 * scale is the largest magnitude)."""
    v = (rng.standard_normal(shape) * scale).astype(np.float16)
    pick = rng.random(shape) < special_share
    sp = (SPECIAL16.astype(np.float32) * np.float32(min(scale, 1.0) / 64)).astype(np.float16)
    sp[:2] = SPECIAL16[:2]                                  # keep the signed zeros
    sp[2:5] = SPECIAL16[2:5]                                # and the subnormals unscaled
    v[pick] = sp[rng.integers(0, sp.size, int(pick.sum()))]
    return v


#: one drawn case: the seed of the values and the share of them taken from SPECIAL16
cases = st.fixed_dictionaries({"seed": st.integers(0, 2**31 - 1), "special": st.sampled_from([0.0, 0.2, 0.9])})


def atom_problem(rng, m, n, groups, keeper, pair_equal, special):
    kb = 128 * groups
    s4 = np.abs(special_values(rng, (groups, n), 0.05, special))
    s8 = np.abs(special_values(rng, (n,), 0.005, special))
    if pair_equal:
        s4, s8 = np.repeat(s4[:, 0::2], 2, axis=1), np.repeat(s8[0::2], 2)
    a = atom.AtomActivations(rng.integers(-8, 8, (m, kb)).astype(np.int8), np.abs(special_values(rng, (m, groups), 0.1, special)),
                             rng.integers(-128, 128, (m, keeper)).astype(np.int8), np.abs(special_values(rng, (m,), 0.01, special)))
    w = atom.AtomWeights(rng.integers(-8, 8, (kb, n)).astype(np.int8), s4,
                         rng.integers(-128, 128, (keeper, n)).astype(np.int8), s8)
    return a, w
