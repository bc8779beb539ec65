"""QIGen packed layout: official-loop transliteration, inverse, Z-curve order, errors; property: pack
equals its plain loop and unpack inverts it for drawn layouts."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refsim.errors import DtypeError, FormatRuleError, ShapeError
from refsim.formats import qigen as Q
from refsim.testing import examples


def _random_qweight(rng, k, n, bits):
    return rng.integers(-(2**31), 2**31, size=(k * bits // 32, n), dtype=np.int64).astype(np.int32)


def _official_pack_qw(a: np.ndarray, bits: int, mb: int, tb: int) -> np.ndarray:
    """Plain transliteration of IST-DASLab/QIGen generate.py ``pack_qw_inner`` (be868d3), written
    for this test: A is the GPTQ qweight (N word-rows, M columns) row-major, nb = word-rows per
    block."""
    n_rows, m_cols = a.shape
    nb = mb // 32 * 3 if bits == 3 else mb // (32 // bits)
    out = []
    for j in range(0, m_cols, tb):
        for i in range(0, n_rows, nb):
            if bits == 3:
                for ii in range(i, min(i + nb, n_rows), 3):
                    for jj in range(j, min(j + tb, m_cols), 8):
                        for iii in range(ii, ii + 3):
                            for jjj in range(jj, jj + 8):
                                out.append(a[iii, jjj])
            else:
                for ii in range(i, min(i + nb, n_rows)):
                    for jj in range(j, min(j + tb, m_cols)):
                        out.append(a[ii, jj])
    return np.array(out, dtype=np.int32)


@pytest.mark.parametrize("bits", [2, 3, 4])
@pytest.mark.parametrize("mb,tb", [(32, 8), (64, 16), (128, 48)])
def test_panel_order_matches_official_pack_qw(bits, mb, tb):
    rng = np.random.default_rng(bits * 100 + mb + tb)
    k, n = 256, 96 if 96 % tb == 0 else 2 * tb
    qw = _random_qweight(rng, k, n, bits)
    lay = Q.QIGenLayout(bits, k, n, mb, tb, "panel")
    np.testing.assert_array_equal(Q.pack(qw, lay), _official_pack_qw(qw, bits, mb, tb))


@pytest.mark.parametrize("bits", [2, 3, 4])
@pytest.mark.parametrize("order", Q.ORDERS)
def test_pack_matches_reference_and_unpack_inverts(bits, order):
    rng = np.random.default_rng(bits)
    qw = _random_qweight(rng, 192, 48, bits)
    lay = Q.QIGenLayout(bits, 192, 48, 64, 16, order)
    before = qw.copy()
    packed = Q.pack(qw, lay)
    np.testing.assert_array_equal(packed, Q.pack_reference(qw, lay))
    np.testing.assert_array_equal(Q.unpack(packed, lay), qw)
    np.testing.assert_array_equal(Q.unpack_reference(packed, lay), qw)
    np.testing.assert_array_equal(qw, before)


def test_block_order_small_grid_by_hand():
    # Morton codes with kb in bit 0, p in bit 1: (0,0)=0 (1,0)=1 (0,1)=2 (1,1)=3 (2,0)=4 ...
    expected = [(0, 0), (1, 0), (0, 1), (1, 1), (2, 0), (3, 0), (2, 1), (3, 1), (0, 2), (1, 2), (2, 2), (3, 2)]
    assert [tuple(r) for r in Q.block_order(4, 3, "zcurve")] == expected
    assert [tuple(r) for r in Q.block_order(2, 2, "panel")] == [(0, 0), (1, 0), (0, 1), (1, 1)]


@pytest.mark.parametrize("kbs,ps", [(1, 1), (3, 5), (8, 8), (7, 2)])
def test_zcurve_is_a_permutation_keeping_k_blocks_increasing_per_panel(kbs, ps):
    z = Q.block_order(kbs, ps, "zcurve")
    np.testing.assert_array_equal(z, Q.block_order_reference(kbs, ps, "zcurve"))
    assert sorted(map(tuple, z)) == sorted((kb, p) for kb in range(kbs) for p in range(ps))
    for p in range(ps):
        kb_seq = z[z[:, 1] == p, 0]
        assert list(kb_seq) == list(range(kbs))


def test_layout_rules_raise_specific_errors():
    with pytest.raises(FormatRuleError, match="bit-width"):
        Q.QIGenLayout(5, 64, 16, 32, 8)
    with pytest.raises(ShapeError, match="multiple of 32"):
        Q.QIGenLayout(4, 64, 16, 48, 8)
    with pytest.raises(ShapeError, match="multiple of the block height"):
        Q.QIGenLayout(4, 96, 16, 64, 8)
    with pytest.raises(ShapeError, match="panel width"):
        Q.QIGenLayout(4, 64, 24, 32, 16)
    with pytest.raises(FormatRuleError, match="order"):
        Q.QIGenLayout(4, 64, 16, 32, 8, "hilbert")
    lay = Q.QIGenLayout(4, 64, 16, 32, 8)
    with pytest.raises(DtypeError, match="int32"):
        Q.pack(np.zeros((8, 16), dtype=np.uint32), lay)
    with pytest.raises(ShapeError, match="shape"):
        Q.pack(np.zeros((4, 16), dtype=np.int32), lay)
    with pytest.raises(ShapeError, match="shape"):
        Q.unpack(np.zeros(5, dtype=np.int32), lay)


# --------------------------------------------------------------------------- properties (hypothesis)
@settings(max_examples=examples(30))
@given(st.sampled_from([2, 3, 4]), st.integers(1, 4), st.integers(1, 4), st.sampled_from(Q.ORDERS),
       st.integers(0, 2**32 - 1))
def test_unpack_inverts_pack(bits, kbs, ps, order, seed):
    rng = np.random.default_rng(seed)
    lay = Q.QIGenLayout(bits, 32 * kbs, 8 * ps, 32, 8, order)
    qw = rng.integers(-(2**31), 2**31, size=(lay.k * bits // 32, lay.n), dtype=np.int64).astype(np.int32)
    packed = Q.pack(qw, lay)
    np.testing.assert_array_equal(packed, Q.pack_reference(qw, lay))
    np.testing.assert_array_equal(Q.unpack(packed, lay), qw)
