"""Tests for refsim.formats.sparse_marlin against a test-only NumPy transliteration of
IST-DASLab/Sparse-Marlin ``Layer_2_4.pack(trans=True)`` and ``_semi_structured_conversions.py``
(commit c2ffa2395a3ada26c8cb7f910a5ec65bd3ce288a), with stable argsort for the mask (see module)."""

import numpy as np
import pytest

from refsim.errors import FormatRuleError, ShapeError
from refsim.formats import marlin
from refsim.formats import sparse_marlin as sm
from refsim.testing import assert_bitexact


def _official_perm_2_4():
    perm = []
    for i in range(32):
        perm1 = []
        col = i // 4
        col_o = col // 2
        for block in [0, 1]:
            for row in [2 * (i % 4), 2 * (i % 4) + 1, 2 * (i % 4 + 4), 2 * (i % 4 + 4) + 1]:
                perm1.append(16 * row + col_o * 256 + 8 * (col % 2) + 4 * block)
        for j in range(4):
            perm.extend([p + 1 * j for p in perm1])
    perm = np.array(perm).reshape((-1, 8))[:, [0, 2, 4, 6, 1, 3, 5, 7]].ravel()
    scale_perm = []
    for i in range(8):
        scale_perm.extend([i * 8 + j for j in [0, 4, 1, 5, 2, 6, 3, 7]])
    return perm, np.array(scale_perm), np.arange(64)


def _official_meta_offsets(m, meta_ncols):
    dst_rows = np.repeat(np.arange(m)[:, None], meta_ncols, axis=1)
    dst_cols = np.tile(np.arange(meta_ncols), (m, 1))
    group_x, group_y = 64, 32
    dst_rows = (dst_rows // group_x * group_x + (dst_rows % 2) * 2 + (dst_rows % 8) // 4
                + ((dst_rows % group_y) % 4) // 2 * 32 + ((dst_rows % group_x) // 8) * 4)
    topright = ((dst_rows % 2 == 0) & (dst_cols % 2 == 1)).astype(np.int64)
    bottomleft = ((dst_rows % 2 == 1) & (dst_cols % 2 == 0)).astype(np.int64)
    dst_rows += topright - bottomleft
    dst_cols -= topright - bottomleft
    return ((dst_cols // 2) * m * 2 + dst_rows * 2 + dst_cols % 2).reshape(-1)


def _official_from_dense(dense):  # int codes (m, k)
    m, k = dense.shape
    dense_4 = dense.reshape(-1, k // 4, 4)
    m0, m1, m2, m3 = [(dense_4 != 0)[..., i] for i in range(4)]
    expr0, expr1, expr2 = m0 & m1, ~m0 & m1, ~m0 & ~m1
    bit0, bit1, bit2, bit3 = expr1, expr2, expr0 | expr2 | m3, expr1 | ~m1
    idxs0 = bit0.astype(np.int64) | (bit1.astype(np.int64) << 1)
    idxs1 = bit2.astype(np.int64) | (bit3.astype(np.int64) << 1)
    s0 = np.take_along_axis(dense_4, idxs0[..., None], -1)
    s1 = np.take_along_axis(dense_4, idxs1[..., None], -1)
    sparse = np.stack((s0, s1), axis=-1).reshape(m, k // 2)
    meta_4 = idxs0 | (idxs1 << 2)
    meta_n = meta_4.reshape((-1, k // 16, 4))
    meta = (meta_n[:, :, 0] | (meta_n[:, :, 1] << 4) | (meta_n[:, :, 2] << 8) | (meta_n[:, :, 3] << 12))
    meta = meta.astype(np.uint16).view(np.int16)
    reordered = np.empty(m * (k // 16), dtype=np.int16)
    reordered[_official_meta_offsets(m, k // 16)] = meta.reshape(-1)
    return sparse, reordered.reshape(m, k // 16)


def _official_pack(w_codes, scales, k, n, groupsize):
    """Layer_2_4.pack from the quantization step on (codes given; pack re-derives the same codes)."""
    perm, scale_perm, scale_perm_single = _official_perm_2_4()
    s = scales
    if groupsize != k:
        s = s.reshape((1, -1)).reshape((-1, len(scale_perm)))[:, scale_perm]
    else:
        s = s.reshape((-1, len(scale_perm_single)))[:, scale_perm_single]
    wt = w_codes.T.astype(np.int64)  # (n, k)
    order = np.argsort(np.abs(wt).reshape(-1, 4), axis=1, kind="stable")[:, :2]
    mask = np.ones((wt.size // 4, 4))
    np.put_along_axis(mask, order, 0, axis=1)
    wt = (mask.reshape(wt.shape) * wt).astype(np.int64)
    w, meta = _official_from_dense(wt)
    w = w.T
    k2 = k // 2
    s = s.reshape((-1, n))
    w = w.reshape((k2 // 16, 16, n // 16, 16)).transpose(0, 2, 1, 3).reshape((k2 // 16, n * 16))
    res = w.reshape((-1, perm.size))[:, perm].reshape(w.shape).astype(np.uint32)
    q = np.zeros((res.shape[0], res.shape[1] // 8), dtype=np.uint32)
    for i in range(8):
        q |= res[:, i::8] << np.uint32(4 * i)
    return q.astype(np.int32), meta, s


@pytest.mark.parametrize("k,n,gs", [(128, 256, None), (128, 256, 128), (256, 256, 128), (256, 512, None)])
def test_pack_is_bit_identical_to_official_layer_2_4_pack(k, n, gs):
    rng = np.random.default_rng(k + n + (gs or 1))
    q = rng.integers(0, 16, (k, n), dtype=np.uint8)
    scales = (rng.random((1 if gs is None else k // gs, n)) + 0.1).astype(np.float16)
    b, meta, s = sm.pack(q, scales, gs)
    b_off, meta_off, s_off = _official_pack(q, scales, k, n, k if gs is None else gs)
    assert_bitexact(b, b_off, name="B")
    assert_bitexact(meta, meta_off, name="meta")
    assert_bitexact(s, s_off, name="s")
    assert b.shape == (k // 32, 2 * n) and meta.shape == (n, k // 16)


def test_perms_equal_official_loops_and_invert():
    perm, sp, sps = _official_perm_2_4()
    assert_bitexact(sm.weight_perm_2_4(), perm.astype(np.int64), name="perm_2_4")
    assert_bitexact(sm.scale_perm_2_4(), sp.astype(np.int64), name="scale_perm_2_4")
    assert_bitexact(sm.scale_perm_single_2_4(), sps.astype(np.int64), name="single")
    assert sorted(perm.tolist()) == list(range(1024))
    off = sm.meta_reorder_offsets(64, 8)
    assert sorted(off.tolist()) == list(range(64 * 8))


def test_compress_matches_encoding_table_for_every_nonzero_pattern():
    pats = np.array([[(p >> i) & 1 for i in range(4)] for p in range(16)], dtype=np.uint8)
    dense = (pats * np.array([3, 5, 7, 9], dtype=np.uint8)).reshape(1, 64)  # all 16 patterns in one row
    v, m = sm.compress_2_4(dense)
    vr, mr = sm.compress_2_4_reference(dense)
    assert_bitexact(v, vr, name="values")
    assert_bitexact(m, mr, name="meta")
    rng = np.random.default_rng(1)
    d = rng.integers(0, 3, (8, 64), dtype=np.uint8)
    for x, y in zip(sm.compress_2_4(d), sm.compress_2_4_reference(d)):
        assert_bitexact(x, y, name="random")


def test_unpack_recovers_pruned_codes_and_keep_mask():
    rng = np.random.default_rng(3)
    q = rng.integers(1, 16, (256, 256), dtype=np.uint8)  # no code 0: metadata = the mask exactly
    scales = (rng.random((2, 256)) + 0.1).astype(np.float16)
    b, meta, s = sm.pack(q, scales, 128)
    q2, keep, scales2 = sm.unpack(b, meta, s)
    mask = sm.mask_2_4(q)
    assert np.array_equal(keep, mask)
    assert_bitexact(q2, np.where(mask, q, np.uint8(0)), name="codes")
    assert_bitexact(scales2, scales, name="scales")
    assert (keep.reshape(64, 4, 256).sum(axis=1) == 2).all()
    w = sm.dequantize(b, meta, s)
    dense = marlin.effective_weights(*marlin.pack(np.where(mask, q, np.uint8(8)), scales, 128))
    assert_bitexact(w, np.where(mask, dense, np.float16(0)), name="dequantized")


def test_kept_code_zero_is_lost_by_the_nonzero_metadata_quirk():
    q = np.full((128, 256), 9, dtype=np.uint8)
    q[0:4, 0] = [0, 5, 0, 0]  # keeps 5 and the code-0 at k=3 (value -8); meta sees only k=1
    b, meta, s = sm.pack(q, np.ones((1, 256), np.float16), None)
    q2, keep, _ = sm.unpack(b, meta, s)
    assert keep[0:4, 0].tolist() == [False, True, True, False]  # 0b1001: positions 1, 2


def test_bad_input_raises_named_errors():
    with pytest.raises(ShapeError, match="N: must be a positive multiple of 256"):
        sm.pack(np.zeros((128, 128), np.uint8), np.ones((1, 128), np.float16), None)
    with pytest.raises(FormatRuleError, match="only 128 or None"):
        sm.pack(np.zeros((128, 256), np.uint8), np.ones((2, 256), np.float16), 64)
    with pytest.raises(FormatRuleError, match="got 16"):
        sm.pack(np.full((128, 256), 16, np.uint8), np.ones((1, 256), np.float16), None)


def test_vllm_convention_keeps_exactly_the_masked_values():
    rng = np.random.default_rng(9)
    w = rng.standard_normal((256, 256))
    mask = sm.mask_2_4(w)  # magnitude of the float weights (vLLM inject_24)
    q = rng.integers(0, 16, (256, 256), dtype=np.uint8)
    q[0:4, 0] = [0, 8, 8, 0]  # kept codes 0 (value -8) survive under this convention
    mask[0:4, 0] = [True, False, False, True]
    scales = (rng.random((2, 256)) + 0.1).astype(np.float16)
    b, meta, s = sm.pack(q, scales, 128, convention="vllm", mask=mask)
    w_deq = sm.dequantize(b, meta, s)
    dense = marlin.effective_weights(*marlin.pack(q, scales, 128))
    expected = np.where(mask, dense, np.float16(0))
    assert_bitexact(w_deq, expected, name="vLLM 2:4 weights")


def test_vllm_convention_checks_its_mask():
    q = np.zeros((128, 256), np.uint8)
    with pytest.raises(FormatRuleError, match="exactly 2 of every 4"):
        sm.pack(q, np.ones((1, 256), np.float16), None, convention="vllm", mask=np.ones((128, 256), bool))
    with pytest.raises(FormatRuleError, match="convention: must be one of"):
        sm.pack(q, np.ones((1, 256), np.float16), None, convention="cutlass")
    with pytest.raises(FormatRuleError, match="derives the mask"):
        sm.pack(q, np.ones((1, 256), np.float16), None, mask=np.ones((128, 256), bool))


def test_pack_does_not_modify_inputs_and_unpack_checks_scale_rows():
    rng = np.random.default_rng(12)
    q = rng.integers(0, 16, (256, 256), dtype=np.uint8)
    scales = (rng.random((2, 256)) + 0.1).astype(np.float16)
    q0, s0 = q.copy(), scales.copy()
    b, meta, s = sm.pack(q, scales, 128)
    assert_bitexact(q, q0, name="q")
    assert_bitexact(scales, s0, name="scales")
    with pytest.raises(ShapeError, match="s: must have 1 row or K/128=2 rows; got 3"):
        sm.unpack(b, meta, np.ones((3, 256), np.float16))
