"""Hand-built tensor-core vectors for what the hardware rows cannot pin .

Every expected value below is worked out by hand from the T-FDPA rule (products exact, alignment
exponent E = max over the products' e(a)+e(b), c's exponent, and ``e_zero`` for each zero term;
terms truncated toward zero onto the grid 2^(E-F); one final rounding: RZ for fp32 output, RNE for
fp16 output), as published for these datapaths (MMA-Sim ``mmasim/simulator/nv_ptx.py``,
Khattak & Mikaitis arXiv:2512.07004 ``models/*.m``), never by running refsim.

What the hardware rows (``tests/emulator/data``, A100/H100/V100, random fp16 operands) can and
cannot discriminate:

* fp32 output rows pin the fraction width F (the grid 2^(E-F) moves visible RZ bits), the
  block length L and the chaining order, because random operands put E near 0 and the fp32
  result keeps 24 bits.
* fp16 output rows round the exact sum to 11 bits with RNE, so a truncation on a grid far below
  the result's own quantum changes nothing except at an exact tie. Random operands almost never
  produce a tie whose tie-breaking bit sits below the grid, so the rows cannot see ``e_zero``:
  moving ``e_zero_f16`` (and ``e_zero_f32``) by -5, -1, +1 or +5 gives 0 mismatches on all 2400
  committed results (400 rows x 3 GPUs x 2 output types), while every such shift flips one of
  the two tie vectors below.
* ``e_zero_f32`` is unobservable from fp16 inputs once it is <= -126: a zero term only sets E
  when every other term is zero or tiny, any nonzero product has e(a)+e(b) >= -28, and a nonzero
  fp32 c has exponent >= -126 (its subnormal emin), so E never falls to ``e_zero_f32``. The rows
  and the vectors below can only bound it (<= -125); the value -132 is the published model's.

The vectors therefore build exact ties on purpose: a fp16 result of exactly 1.5 quanta plus one
tiny negative product that survives the truncation (result rounds down) or falls below the grid
(tie to even, rounds up). With the grid at 2^(e_zero_f16 - F) the pair of vectors pins
``e_zero_f16 - F`` exactly for each architecture.
"""

from __future__ import annotations

import numpy as np
import pytest

from refsim.arith import tensor_core as tc
from refsim.testing import assert_bitexact

#: arch -> (L, F, e_zero_f16) as published (the module spec block); grid exponent e_zero_f16 - F
PUBLISHED = {"sm_70": (4, 23, -20), "sm_80": (8, 24, -21), "sm_89": (8, 24, -21), "sm_90": (16, 25, -22)}


def _block(arch, pairs, c, out):
    L = PUBLISHED[arch][0]
    a = np.zeros(L, np.float16)
    b = np.zeros(L, np.float16)
    for i, (x, y) in enumerate(pairs):
        a[i], b[i] = x, y
    return tc.fdpa(arch, a, b, np.array(c, out), out)


def test_published_parameters_are_the_models():
    for arch, (L, F, ez16) in PUBLISHED.items():
        m = tc.model(arch)
        assert (m.block, m.frac_bits, m.e_zero_f16) == (L, F, ez16), arch


@pytest.mark.parametrize("arch", sorted(PUBLISHED))
def test_tiny_product_on_the_zero_term_grid_breaks_an_fp16_tie(arch):
    _, F, ez = PUBLISHED[arch]
    g = ez - F                                  # grid exponent: sm_70 -43, sm_80/89 -45, sm_90 -47
    # p0 = (1.5 * 2^-12) * 2^-12 = 1.5 * 2^-24, ep = -24: exactly halfway between the fp16
    # subnormals 2^-24 and 2^-23.  p1 = -(2^(g+24) * 2^-24) = -2^g, ep = -14 + -14 = -28 (both
    # subnormal). The other L-2 products are zero (ep = e_zero) and c = +0 (e_zero), so
    # E = max(-24, -28, e_zero) = e_zero and the grid is 2^(e_zero - F) = 2^g: p1 is ON the grid,
    # kept; S = 1.5 * 2^-24 - 2^g < the tie -> RNE gives 2^-24 = 0x0001.
    pairs = [(1.5 * 2.0**-12, 2.0**-12), (-(2.0 ** (g + 24)), 2.0**-24)]
    d = _block(arch, pairs, 0.0, np.float16)
    assert_bitexact(d, np.array(0x0001, np.uint16).view(np.float16), f"{arch} kept")


@pytest.mark.parametrize("arch", sorted(PUBLISHED))
def test_tiny_product_below_the_zero_term_grid_is_dropped_and_the_tie_goes_to_even(arch):
    _, F, ez = PUBLISHED[arch]
    g = ez - F
    # same as above with p1 = -2^(g-1): below the grid 2^g, truncated toward zero to 0; S is
    # exactly 1.5 * 2^-24, a tie, and RNE picks the even neighbour 2^-23 = 0x0002. A model whose
    # e_zero_f16 were one lower (finer grid) would keep p1 and return 0x0001.
    pairs = [(1.5 * 2.0**-12, 2.0**-12), (-(2.0 ** (g + 23)), 2.0**-24)]
    d = _block(arch, pairs, 0.0, np.float16)
    assert_bitexact(d, np.array(0x0002, np.uint16).view(np.float16), f"{arch} dropped")


@pytest.mark.parametrize("arch", sorted(PUBLISHED))
def test_zero_products_keep_the_smallest_fp32_subnormal_c(arch):
    # every product zero (ep = e_zero_f32 <= -131), c = 2^-149 with e(c) = -126 (subnormal emin):
    # E = -126, grid 2^(-126-F) <= 2^-149, so c is on the grid and RZ keeps it: 0x00000001.
    # (Bounds e_zero_f32 <= -125 for F = 24; it cannot pin it further, see the module docstring.)
    d = _block(arch, [], np.float32(2.0**-149), np.float32)
    assert_bitexact(d, np.array(1, np.uint32).view(np.float32), arch)


@pytest.mark.parametrize("arch,expected", [("sm_70", 0.0), ("sm_80", 0.0), ("sm_90", 2.0**-15)])
def test_exact_cancellation_leaves_only_terms_on_the_grid(arch, expected):
    # 2^5 * 2^5 = 2^10 and -2^10 cancel exactly; E = 10 (the largest ep), grid 2^(10-F):
    # sm_70 2^-13, sm_80 2^-14, sm_90 2^-15. The third product 2^-8 * 2^-7 = 2^-15 survives only on
    # Hopper's grid; elsewhere it truncates to 0 and the sum is an exact +0 (not every product is
    # -0, so the zero is +0).
    pairs = [(2.0**5, 2.0**5), (-(2.0**5), 2.0**5), (2.0**-8, 2.0**-7)]
    assert_bitexact(_block(arch, pairs, 0.0, np.float32), np.array(expected, np.float32), arch)


@pytest.mark.parametrize("arch", sorted(PUBLISHED))
@pytest.mark.parametrize("out", [np.float32, np.float16])
def test_signed_zero_only_when_every_product_and_c_are_negative_zero(arch, out):
    L = PUBLISHED[arch][0]
    a = np.full(L, -0.0, np.float16)
    b = np.ones(L, np.float16)
    neg = tc.fdpa(arch, a, b, np.array(-0.0, out), out)            # all -0 products, c = -0 -> -0
    assert_bitexact(neg, np.array(-0.0, out), f"{arch} -0")
    b[L - 1] = -1.0                                                 # one product is +0 -> +0
    assert_bitexact(tc.fdpa(arch, a, b, np.array(-0.0, out), out), np.array(0.0, out), f"{arch} +0")
    b[L - 1] = 1.0                                                  # c = +0 -> +0
    assert_bitexact(tc.fdpa(arch, a, b, np.array(0.0, out), out), np.array(0.0, out), f"{arch} c=+0")
