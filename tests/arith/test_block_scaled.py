"""Block-scaled tensor-core models (Blackwell): the kind table, hand-worked outputs (scales 2^-127 / 2^127,
NaN scales, zero blocks, the F = 25 / F = 35 truncation, the ue4m3 sign bit), the plain-loop twin on drawn
inputs, tcgen05 against mma.sync, refusals.

Expected values are worked out by hand in the comments from the module spec; none is computed by the code
under test.
"""

from __future__ import annotations

from hypothesis import given, settings, strategies as st
import numpy as np
import pytest

from refsim.arith import block_scaled as bs
from refsim.errors import DtypeError, FormatRuleError, ShapeError
from refsim.testing import examples

E4M3_ONE, E4M3_1P5, E4M3_NEG_ONE = 0x38, 0x3C, 0xB8
E2M1 = {0.5: 0x1, 1.0: 0x2, 1.5: 0x3, 2.0: 0x4, 6.0: 0x7, -6.0: 0xF}
NAN = 0x7FFFFFFF


def bits(x) -> int:
    return int(np.float32(x).view(np.uint32))


def operands(k: int, C=None):
    """A (16, K), B (K, 8) of +0 codes, C (16, 8) float32 (zeros unless given), unit ue8m0 scales."""
    A = np.zeros((16, k), np.uint8)
    B = np.zeros((k, 8), np.uint8)
    C = np.zeros((16, 8), np.float32) if C is None else C
    return A, B, C


def unit_scales(k: int, block: int, one: int = 127):
    return np.full((16, k // block), one, np.uint8), np.full((k // block, 8), one, np.uint8)


def d00(D) -> int:
    return int(D.view(np.uint32)[0, 0])


# --------------------------------------------------------------------------- the kind table


def test_the_kind_table():
    rows = bs.modelled()
    sync = {(r.kind, r.scale_vec, r.stype, r.k, r.block) for r in rows if r.instruction == "mma.sync"}
    assert sync == {("f8f6f4", "", "", 32, 32), ("mxf8f6f4", "1X", "ue8m0", 32, 32), ("mxf4", "2X", "ue8m0", 64, 32),
                    ("mxf4nvf4", "2X", "ue8m0", 64, 32), ("mxf4nvf4", "4X", "ue4m3", 64, 16)}
    tcgen = {(r.kind, r.scale_vec) for r in rows if r.instruction == "tcgen05.mma"}
    assert tcgen == {("mxf8f6f4", "1X"), ("mxf4", "2X"), ("mxf4nvf4", "2X"), ("mxf4nvf4", "4X")}
    assert not any(r.verified for r in rows)
    assert {r.arch for r in rows if r.instruction == "mma.sync"} == {"sm_120a"}
    assert {r.arch for r in rows if r.instruction == "tcgen05.mma"} == {"sm_100a"}
    assert {(r.datapath, r.frac_bits) for r in rows} == {("mxf8", 25), ("mxf4", 35)}
    k = bs.kind_for("mma.sync", "mxf8f6f4")
    assert k.ptx("e4m3", "e2m1") == \
        "mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e4m3.e2m1.f32.ue8m0"
    assert bs.kind_for("mma.sync", "f8f6f4").ptx("e5m2", "e3m2") == \
        "mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f32.e5m2.e3m2.f32"
    assert bs.kind_for("mma.sync", "mxf4nvf4", "4X").ptx("e2m1", "e2m1").endswith("scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3")


def test_element_terms_read_the_format_rows():
    # e2m1 0x7 = 1.11 x 2^(3 - 1) = 6: no specials in fp4, so the top binade is a number
    t = bs.element_terms("e2m1", np.array([0x7, 0x1, 0xF], np.uint8))
    assert t.m.tolist() == [3, 1, 3] and t.e.tolist() == [2, 0, 2] and t.neg.tolist() == [False, False, True]
    assert not t.nan.any() and not t.inf.any() and t.frac == 1
    # e3m2 0x1F = 1.11 x 2^(7 - 3) = 28 (max), e2m3 0x1F = 1.111 x 2^(3 - 1) = 7.5
    assert bs.element_terms("e3m2", np.array([0x1F], np.uint8)).m.tolist() == [7]
    assert bs.element_terms("e2m3", np.array([0x1F], np.uint8)).e.tolist() == [2]
    # e4m3 S.1111.111 is NaN, e5m2 0x7C is +Inf
    assert bs.element_terms("e4m3", np.array([0x7F], np.uint8)).nan.tolist() == [True]
    assert bs.element_terms("e5m2", np.array([0x7C], np.uint8)).inf.tolist() == [True]


# --------------------------------------------------------------------------- hand-worked: mxf8


def test_mxf8_one_block_keeps_25_fraction_bits_and_truncates():
    # c = 1; 8 products 1.5 x 1 x 2^-15 x 2^-10 = 1.5 x 2^-25 = 1.5 grid units (E = 0, grid 2^-25), each
    # truncated to 2^-25: S = 1 + 8 x 2^-25 = 1 + 2^-22 (the exact sum 1 + 3 x 2^-23 is an fp32 value);
    # under 2^-16 x 2^-10 each product is 0.75 grid units and vanishes: D = 1
    A, B, C = operands(32)
    A[0, :8], B[:8, 0], C[0, 0] = E4M3_1P5, E4M3_ONE, 1.0
    sa, sb = unit_scales(32, 32)
    sa[0, 0], sb[0, 0] = 127 - 15, 127 - 10
    D = bs.mma_block_scaled("mxf8f6f4", "m16n8k32", "e4m3", "e4m3", A, B, C, sa, sb, "1X")
    assert d00(D) == bits(1 + 2.0**-22)
    assert not D[1:].any() and not D[0, 1:].any()
    sa[0, 0] = 127 - 16
    assert d00(bs.mma_block_scaled("mxf8f6f4", "m16n8k32", "e4m3", "e4m3", A, B, C, sa, sb, "1X")) == bits(1.0)


def test_mxf8_scale_shifts_a_product_under_the_accumulator():
    # c = 1, product 1 x 1 x 2^-13 x 2^-10 = 2^-23: on the grid -> 1 + 2^-23; with 2^-20 x 2^-10 = 2^-30
    # it lies below the grid 2^-25 -> 1; with c = 0 the product alone sets E and survives: 2^-30
    A, B, C = operands(32)
    A[0, 0], B[0, 0], C[0, 0] = E4M3_ONE, E4M3_ONE, 1.0
    sa, sb = unit_scales(32, 32)
    sa[0, 0], sb[0, 0] = 127 - 13, 127 - 10
    assert d00(bs.mma_block_scaled("mxf8f6f4", "m16n8k32", "e4m3", "e4m3", A, B, C, sa, sb)) == bits(1 + 2.0**-23)
    sa[0, 0] = 127 - 20
    assert d00(bs.mma_block_scaled("mxf8f6f4", "m16n8k32", "e4m3", "e4m3", A, B, C, sa, sb)) == bits(1.0)
    C[0, 0] = 0.0
    assert d00(bs.mma_block_scaled("mxf8f6f4", "m16n8k32", "e4m3", "e4m3", A, B, C, sa, sb)) == bits(2.0**-30)


@pytest.mark.parametrize("s_a, s_b, a, expect", [
    (0xFE, 0x00, E4M3_ONE, 1.0),                   # 2^127 x 2^-127 = 1
    (0xFE, 0xFE, E4M3_ONE, np.inf),                # 2^254 overflows fp32: RZ with Inf overflow
    (0xFE, 0xFE, E4M3_NEG_ONE, -np.inf),
    (0x00, 0x00, E4M3_ONE, 0.0),                   # 2^-254 rounds toward zero to +0
    (0x00, 0x00, E4M3_NEG_ONE, 0.0),               # a nonzero product rounded to zero: +0, not -0
    (0x00, 0x7F, E4M3_ONE, 2.0**-127),             # an fp32 subnormal, exact
])
def test_mxf8_extreme_scales(s_a, s_b, a, expect):
    A, B, C = operands(32)
    A[0, 0], B[0, 0] = a, E4M3_ONE
    sa, sb = unit_scales(32, 32)
    sa[0, 0], sb[0, 0] = s_a, s_b
    assert d00(bs.mma_block_scaled("mxf8f6f4", "m16n8k32", "e4m3", "e4m3", A, B, C, sa, sb)) == bits(expect)


def test_mxf8_nan_scale_makes_the_row_nan_even_over_zero_elements():
    # every element +0, C = 3; scale_a of row 2 is 0xFF (NaN): 0 x NaN is NaN in every column of row 2
    A, B, C = operands(32, np.full((16, 8), 3.0, np.float32))
    sa, sb = unit_scales(32, 32)
    sa[2, 0] = 0xFF
    D = bs.mma_block_scaled("mxf8f6f4", "m16n8k32", "e5m2", "e2m1", A, B, C, sa, sb).view(np.uint32)
    assert (D[2] == NAN).all()
    assert (np.delete(D, 2, axis=0) == bits(3.0)).all()


def test_mxf8_zero_block_with_a_huge_scale_does_not_align():
    # all products zero under scale 2^127 x 2^127: zeros never set E, so c = 1 + 2^-23 stays whole
    A, B, C = operands(32, np.full((16, 8), 1 + 2.0**-23, np.float32))
    sa, sb = unit_scales(32, 32, one=0xFE)
    D = bs.mma_block_scaled("mxf8f6f4", "m16n8k32", "e4m3", "e4m3", A, B, C, sa, sb)
    assert (D.view(np.uint32) == bits(1 + 2.0**-23)).all()


def test_f8f6f4_mixed_fp6_fp4_and_specials():
    # f8f6f4 (no scales): e3m2 28 (0x1F = 1.75 x 2^4) x e2m1 6 (0x7 = 1.5 x 2^2) = 168 at k = 0, aligned at
    # E = 4 + 2 = 6; e3m2 -0.0625 (0x21: sign bit 5, subnormal 1/4 x 2^-2) x e2m1 0.5 = -2^-5 at k = 1, on the
    # grid 2^(6 - 25) = 2^-19: 168 - 0.03125 = 167.96875 exactly
    A, B, C = operands(32)
    A[0, 0], B[0, 0] = 0x1F, 0x7
    A[0, 1], B[1, 0] = 0x21, 0x1
    D = bs.mma_block_scaled("f8f6f4", "m16n8k32", "e3m2", "e2m1", A, B, C)
    assert d00(D) == bits(167.96875)
    # an e5m2 Inf times e2m1 0 is NaN; Inf times 1 is Inf
    A, B, C = operands(32)
    A[0, 0] = 0x7C
    assert d00(bs.mma_block_scaled("f8f6f4", "m16n8k32", "e5m2", "e2m1", A, B, C)) == NAN
    B[0, 0] = E2M1[1.0]
    assert d00(bs.mma_block_scaled("f8f6f4", "m16n8k32", "e5m2", "e2m1", A, B, C)) == bits(np.inf)


def test_zero_result_sign():
    # every product -0 (A = -0, B = +0) and c = -0 -> -0; c = +0 -> +0
    A, B, C = operands(32, np.full((16, 8), -0.0, np.float32))
    A[:] = 0x80
    assert d00(bs.mma_block_scaled("f8f6f4", "m16n8k32", "e4m3", "e4m3", A, B, C)) == 0x80000000
    A, B, C = operands(64, np.full((16, 8), -0.0, np.float32))
    A[:] = 0x8
    sa, sb = unit_scales(64, 32)
    assert d00(bs.mma_block_scaled("mxf4", "m16n8k64", "e2m1", "e2m1", A, B, C, sa, sb)) == 0x80000000
    A[0, 5] = 0x0                                  # one +0 product: +0
    assert d00(bs.mma_block_scaled("mxf4", "m16n8k64", "e2m1", "e2m1", A, B, C, sa, sb)) == 0


# --------------------------------------------------------------------------- hand-worked: mxf4


def test_mxf4_extreme_scales():
    # 6 x 6 = 36 at k = 0 under 2^127 x 2^-127 -> 36; under 2^127 x 2^127 -> 36 x 2^254 overflows -> Inf
    A, B, C = operands(64)
    A[0, 0], B[0, 0] = E2M1[6.0], E2M1[6.0]
    sa, sb = unit_scales(64, 32)
    sa[0, 0], sb[0, 0] = 0xFE, 0x00
    assert d00(bs.mma_block_scaled("mxf4", "m16n8k64", "e2m1", "e2m1", A, B, C, sa, sb)) == bits(36.0)
    sb[0, 0] = 0xFE
    assert d00(bs.mma_block_scaled("mxf4nvf4", "m16n8k64", "e2m1", "e2m1", A, B, C, sa, sb, "2X")) == bits(np.inf)


def test_mxf4_zero_group_still_aligns_at_its_scale():
    # c = 1 + 2^-20; group 0 holds only zeros but its scales are 2^12 x 2^0: E = 12, grid 2^(12 - 35) = 2^-23
    # keeps c -> 1 + 2^-20; scale 2^16: grid 2^-19 truncates c -> 1 (with F = 25, 2^12 would already give 1)
    A, B, C = operands(64, np.full((16, 8), 1 + 2.0**-20, np.float32))
    sa, sb = unit_scales(64, 32)
    sa[0, 0] = 127 + 12
    D = bs.mma_block_scaled("mxf4", "m16n8k64", "e2m1", "e2m1", A, B, C, sa, sb)
    assert d00(D) == bits(1 + 2.0**-20)
    sa[0, 0] = 127 + 16
    D = bs.mma_block_scaled("mxf4", "m16n8k64", "e2m1", "e2m1", A, B, C, sa, sb).view(np.uint32)
    assert (D[0] == bits(1.0)).all()                       # row 0: every column sees the scale
    assert (D[1:] == bits(1 + 2.0**-20)).all()


def test_mxf4nvf4_4x_ue4m3_scales():
    # group 1 (k 16..31): 1.5 x 2 = 3; block 1 scales: ue4m3 0x3C = 1.5 and 0xB0 = 0.5 (sign bit ignored)
    # -> 3 x 1.5 x 0.5 = 2.25; group 0 (k 0..15): 0.5 x 0.5 = 0.25 at scales 1 (0x38) -> total 2.5
    A, B, C = operands(64)
    A[0, 16], B[16, 0] = E2M1[1.5], E2M1[2.0]
    A[0, 0], B[0, 0] = E2M1[0.5], E2M1[0.5]
    sa, sb = unit_scales(64, 16, one=0x38)
    sa[0, 1], sb[1, 0] = 0x3C, 0xB0
    D = bs.mma_block_scaled("mxf4nvf4", "m16n8k64", "e2m1", "e2m1", A, B, C, sa, sb, "4X")
    assert d00(D) == bits(2.5)
    # a zero ue4m3 scale (0x00) removes its group: 0.25 left
    sa[0, 1] = 0x00
    assert d00(bs.mma_block_scaled("mxf4nvf4", "m16n8k64", "e2m1", "e2m1", A, B, C, sa, sb, "4X")) == bits(0.25)


@pytest.mark.parametrize("nan_code", [0x7F, 0xFF])
def test_mxf4nvf4_nan_ue4m3_scale_poisons_its_column(nan_code):
    A, B, C = operands(64, np.ones((16, 8), np.float32))
    sa, sb = unit_scales(64, 16, one=0x38)
    sb[2, 3] = nan_code                            # a scale of column 3's block 2, whose elements are all zero
    D = bs.mma_block_scaled("mxf4nvf4", "m16n8k64", "e2m1", "e2m1", A, B, C, sa, sb, "4X").view(np.uint32)
    assert (D[:, 3] == NAN).all() and (np.delete(D, 3, axis=1) == bits(1.0)).all()


def test_e8m0_nan_scale_in_mxf4():
    A, B, C = operands(64)
    sa, sb = unit_scales(64, 32)
    sa[5, 1] = 0xFF
    D = bs.mma_block_scaled("mxf4", "m16n8k64", "e2m1", "e2m1", A, B, C, sa, sb).view(np.uint32)
    assert (D[5] == NAN).all() and not np.delete(D, 5, axis=0).any()


# --------------------------------------------------------------------------- the twin on drawn inputs


def _draw(rng, k: bs.BlockScaledKind, atype, btype, M=16, N=8):
    from refsim.arith.minifloat import FORMATS

    A = rng.integers(0, 1 << FORMATS[atype].bits, (M, k.k), dtype=np.uint8)
    B = rng.integers(0, 1 << FORMATS[btype].bits, (k.k, N), dtype=np.uint8)
    C = (rng.standard_normal((M, N)) * 2.0 ** rng.integers(-30, 30, (M, N))).astype(np.float32)
    C[rng.random((M, N)) < 0.1] = 0.0
    if not k.stype:
        return A, B, C, None, None
    nb = k.k // k.block
    if k.stype == "ue8m0":
        sa = rng.integers(100, 155, (M, nb), dtype=np.uint8)
        sb = rng.integers(100, 155, (nb, N), dtype=np.uint8)
        sa[rng.random(sa.shape) < 0.02] = rng.choice([0x00, 0xFE, 0xFF])
    else:
        sa = rng.integers(0, 256, (M, nb), dtype=np.uint8)
        sb = rng.integers(0, 256, (nb, N), dtype=np.uint8)
    return A, B, C, sa, sb


SYNC = [r for r in bs.modelled() if r.instruction == "mma.sync"]


@settings(max_examples=examples(12), deadline=None)
@given(row=st.sampled_from(SYNC), ta=st.integers(0, 4), tb=st.integers(0, 4), seed=st.integers(0, 2**32 - 1))
def test_fast_path_equals_the_reference(row, ta, tb, seed):
    rng = np.random.default_rng(seed)
    atype, btype = row.types[ta % len(row.types)], row.types[tb % len(row.types)]
    A, B, C, sa, sb = _draw(rng, row, atype, btype)
    keep = [x.copy() if x is not None else None for x in (A, B, C, sa, sb)]
    got = bs.mma_block_scaled(row.kind, f"m16n8k{row.k}", atype, btype, A, B, C, sa, sb, row.scale_vec or None)
    ref = bs.mma_block_scaled_reference("mma.sync", row.kind, atype, btype, A, B, C, sa, sb, row.scale_vec or None)
    np.testing.assert_array_equal(got.view(np.uint32), ref.view(np.uint32))
    for x, y in zip((A, B, C, sa, sb), keep):   # inputs never modified
        if x is not None:
            np.testing.assert_array_equal(x.view(np.uint8), y.view(np.uint8))


@pytest.mark.parametrize("kind, scale_vec, t", [("mxf8f6f4", "1X", "e5m2"), ("mxf4nvf4", "4X", "e2m1")])
def test_tcgen05_is_the_same_arithmetic_on_its_shapes(kind, scale_vec, t):
    rng = np.random.default_rng(7)
    row = bs.kind_for("tcgen05.mma", kind, scale_vec)
    A, B, C, sa, sb = _draw(rng, row, t, t, M=128, N=16)
    D = bs.tcgen05_mma_block_scaled(kind, t, t, A, B, C, sa, sb, scale_vec).view(np.uint32)
    # every 16 x 8 tile is the mma.sync instruction on the same rows and columns
    for r0 in (0, 112):
        for c0 in (0, 8):
            tile = bs.mma_block_scaled(kind, f"m16n8k{row.k}", t, t, A[r0:r0 + 16], B[:, c0:c0 + 8],
                                       C[r0:r0 + 16, c0:c0 + 8], sa[r0:r0 + 16], sb[:, c0:c0 + 8], scale_vec)
            np.testing.assert_array_equal(D[r0:r0 + 16, c0:c0 + 8], tile.view(np.uint32))
    ref = bs.mma_block_scaled_reference("tcgen05.mma", kind, t, t, A[:, :], B[:, :8], C[:, :8], sa, sb[:, :8],
                                        scale_vec)
    np.testing.assert_array_equal(D[:, :8], ref.view(np.uint32))


def test_leading_axes_broadcast():
    rng = np.random.default_rng(3)
    row = bs.kind_for("mma.sync", "mxf8f6f4")
    A, B, C, sa, sb = _draw(rng, row, "e4m3", "e2m3")
    A2 = np.stack([A, A[::-1]])
    D = bs.mma_block_scaled("mxf8f6f4", "m16n8k32", "e4m3", "e2m3", A2, B, C, sa, sb)
    assert D.shape == (2, 16, 8)
    np.testing.assert_array_equal(D[1].view(np.uint32), bs.mma_block_scaled(
        "mxf8f6f4", "m16n8k32", "e4m3", "e2m3", A[::-1].copy(), B, C, sa, sb).view(np.uint32))


# --------------------------------------------------------------------------- refusals


def test_refusals():
    A, B, C = operands(32)
    sa, sb = unit_scales(32, 32)
    with pytest.raises(FormatRuleError, match="takes no scales"):
        bs.mma_block_scaled("f8f6f4", "m16n8k32", "e4m3", "e4m3", A, B, C, sa, sb)
    with pytest.raises(FormatRuleError, match="ue8m0 scales"):
        bs.mma_block_scaled("mxf8f6f4", "m16n8k32", "e4m3", "e4m3", A, B, C)
    with pytest.raises(FormatRuleError, match="shape"):
        bs.mma_block_scaled("mxf8f6f4", "m16n8k64", "e4m3", "e4m3", A, B, C, sa, sb)
    with pytest.raises(FormatRuleError, match="scale_vec"):
        bs.mma_block_scaled("mxf8f6f4", "m16n8k32", "e4m3", "e4m3", A, B, C, sa, sb, "2X")
    with pytest.raises(FormatRuleError, match="scale_vec"):
        bs.mma_block_scaled("mxf4nvf4", "m16n8k64", "e2m1", "e2m1", *operands(64), *unit_scales(64, 32))
    with pytest.raises(FormatRuleError, match="atype"):
        bs.mma_block_scaled("mxf4", "m16n8k64", "e4m3", "e2m1", *operands(64), *unit_scales(64, 32))
    bad = A.copy()
    bad[0, 0] = 0x10                               # above e2m1's 4 bits
    with pytest.raises(FormatRuleError, match="4 bits"):
        bs.mma_block_scaled("mxf8f6f4", "m16n8k32", "e2m1", "e4m3", bad, B, C, sa, sb)
    with pytest.raises(DtypeError):
        bs.mma_block_scaled("mxf8f6f4", "m16n8k32", "e4m3", "e4m3", A.astype(np.float32), B, C, sa, sb)
    with pytest.raises(DtypeError, match="float32"):
        bs.mma_block_scaled("mxf8f6f4", "m16n8k32", "e4m3", "e4m3", A, B, C.astype(np.float64), sa, sb)
    with pytest.raises(ShapeError, match="scale_a"):
        bs.mma_block_scaled("mxf8f6f4", "m16n8k32", "e4m3", "e4m3", A, B, C, sa[:8], sb)
    with pytest.raises(ShapeError, match="A"):
        bs.mma_block_scaled("mxf8f6f4", "m16n8k32", "e4m3", "e4m3", A[:, :16], B, C, sa, sb)
    with pytest.raises(ShapeError, match="M in"):
        bs.tcgen05_mma_block_scaled("mxf8f6f4", "e4m3", "e4m3", A, B, C, sa, sb)
    with pytest.raises(FormatRuleError, match="kind"):
        bs.tcgen05_mma_block_scaled("f8f6f4", "e4m3", "e4m3", A, B, C, sa, sb)
    with pytest.raises(ShapeError, match="one instruction"):
        bs.mma_block_scaled_reference("mma.sync", "mxf8f6f4", "e4m3", "e4m3", A[None], B, C, sa, sb)
