"""Tests of refsim.quant.mixed_2_4_16 (the 2/4/16-bit quantizer): eq. 9 sensitivity against its loop,
the 2/4-bit split, second-order codes and scale clipping, outliers only in 2-bit groups, the H^-1
diagonal route equal to the Hessian route, bad input named, and the quantizer's bits pinned."""

from __future__ import annotations

import numpy as np
import pytest

from refsim.errors import FormatRuleError, NonFiniteError, ShapeError
from refsim.formats import mixed_2_4_16 as F
from refsim.quant import mixed_2_4_16 as Q
from refsim.testing import assert_bitexact


def _problem(seed=0, k=160, n=32, t=96):
    """W float32 (K, N), H = 2/t X^T X float64 (K, K) of t calibration rows X (t, K) with spread channels."""
    rng = np.random.default_rng(seed)
    W = (rng.standard_normal((k, n)) * 0.05).astype(np.float32)
    X = rng.standard_normal((t, k)).astype(np.float32) * rng.uniform(0.2, 3.0, k).astype(np.float32)
    return W, (2.0 / t) * X.astype(np.float64).T @ X.astype(np.float64), X


def test_group_sensitivity_is_eq9_loop():
    W, H, _ = _problem(1, k=48, n=16)
    hd = Q.inverse_hessian_diag(H)
    Hd = H.copy()
    Hd[np.diag_indices_from(Hd)] += 0.01 * np.mean(np.diag(H))
    np.testing.assert_allclose(hd, np.diag(np.linalg.inv(Hd)), rtol=1e-9)
    S = Q.group_sensitivity(W, hd)
    for i in range(3):
        expected = sum(float(W[16 * i + m, j]) ** 2 / hd[16 * i + m] ** 2 for m in range(16) for j in range(16))
        assert abs(S[i] - expected) <= 1e-9 * expected


def test_planted_large_group_becomes_4bit():
    W, H, _ = _problem(2)
    W[64:80] *= 20.0                           # group 4
    m = Q.quantize(W, H, alpha=0.1, outlier_ratio=0.0)
    assert m.four.sum() == 1 and m.four[4]


@pytest.mark.parametrize("alpha, n4", [(0.0, 0), (0.1, 1), (0.25, 3), (0.5, 5), (1.0, 10)])
def test_number_of_4bit_groups_is_alpha_share_rounded_half_up(alpha, n4):
    W, H, _ = _problem(3)
    assert Q.quantize(W, H, alpha=alpha, outlier_ratio=0.0).four.sum() == n4   # G = 10


def test_second_order_codes_and_scale_clipping():
    W, H, _ = _problem(4)
    m = Q.quantize(W, H, alpha=0.25, outlier_ratio=0.0)
    assert m.code.max() <= 15 and m.z2.max() == 0          # non-negative scales: z2 is always 0
    two = np.flatnonzero(~m.four)
    for j, gi in enumerate(two):
        if j % 3:
            assert np.all(m.code[gi] % 2 == 0) and m.code[gi].max() <= 14
    # independent: s2 = fp16(max over the 16-column block of the raw scale (xmax - xmin)/maxq / 15)
    gi = two[0]
    blk = W[16 * gi:16 * gi + 16, :16]
    raw = (np.maximum(blk.max(0), 0) - np.minimum(blk.min(0), 0)) / np.float32(3)
    assert_bitexact(m.s2[gi, 0], np.float16(raw.max() / np.float32(15)), name="s2")
    unclipped = Q.quantize(W, H, alpha=0.25, outlier_ratio=0.0, clip_scales=False)
    with pytest.raises(FormatRuleError, match="even"):
        F.pack(unclipped)


def test_outliers_only_in_2bit_groups_and_valid_csr():
    W, H, _ = _problem(6)
    m = Q.quantize(W, H, alpha=0.25, outlier_ratio=0.005)
    k, n = W.shape
    assert m.col.size == int(np.floor(0.005 * k * n))
    F.check_csr(m.row_ptr, m.col, m.val, n_rows=n, n_cols=k)
    assert np.all(np.diff(m.row_ptr) >= 0)
    deq = F.dequantize(m)
    for r in range(n):
        for e in range(m.row_ptr[r], m.row_ptr[r + 1]):
            c = int(m.col[e])
            assert not m.four[c // 16]
            assert m.q[c, r] == m.zero[c // 16, r]                    # dense part is exactly 0
            assert deq[c, r] == np.float32(np.float16(W[c, r]))       # the fp16 outlier itself


def test_bad_input_raises_named_errors():
    W, H, _ = _problem(12, k=64, n=16)
    with pytest.raises(FormatRuleError, match="alpha"):
        Q.quantize(W, H, alpha=1.5)
    with pytest.raises(FormatRuleError, match="alpha"):
        Q.quantize(W, H, alpha=-0.1)
    with pytest.raises(FormatRuleError, match="outlier_ratio"):
        Q.quantize(W, H, outlier_ratio=0.006)
    with pytest.raises(ShapeError, match="multiple of the group size"):
        Q.quantize(W[:40], H[:40, :40])
    with pytest.raises(ShapeError, match="second-order"):
        Q.quantize(W[:, :8], H)
    bad = W.copy()
    bad[3, 3] = np.inf
    with pytest.raises(NonFiniteError):
        Q.quantize(bad, H)
    with pytest.raises(FormatRuleError, match="positive definite after dampening"):
        Q.quantize(W, -H)


def test_rank_deficient_hessian_is_rescued_by_dampening_and_inputs_untouched():
    W, _, X = _problem(13, k=64, n=16, t=8)                 # 8 tokens: rank(H) <= 8 < 64
    H = (2.0 / 8) * X.T.astype(np.float64) @ X.astype(np.float64)
    W0, H0 = W.copy(), H.copy()
    with pytest.raises(FormatRuleError):
        Q.quantize(W, H, percdamp=0.0)
    m = Q.quantize(W, H)                                    # percdamp 0.01 makes it definite
    assert m.q.shape == W.shape
    assert_bitexact(W, W0, name="W")
    assert_bitexact(H, H0, name="H")


def test_largest_picks_the_same_set_as_a_stable_full_sort_including_ties():
    rng = np.random.default_rng(5)
    score = rng.integers(0, 6, (40, 12)).astype(np.float64)      # many ties
    score[rng.random(score.shape) < 0.2] = -np.inf
    for count in (0, 1, 7, 100, 300, 384):
        want = np.sort(np.argsort(-score, axis=None, kind="stable")[:count])
        assert_bitexact(np.sort(Q._largest(score, count)), want, f"count={count}")


def test_quantize_hinv_equals_quantize_given_the_same_diagonal():
    rng = np.random.default_rng(21)
    W = (rng.standard_normal((256, 32)) * 0.05).astype(np.float32)
    X = rng.standard_normal((40, 256))
    H = X.T @ X / 40 + np.eye(256)
    W_before = W.copy()
    a = Q.quantize(W, H, alpha=0.25, outlier_ratio=0.005)
    hd = Q.inverse_hessian_diag(H)
    b = Q.quantize_hinv(W, hd, alpha=0.25, outlier_ratio=0.005)
    pa, pb = F.pack(a), F.pack(b)
    for f in pa.__dataclass_fields__:
        assert_bitexact(getattr(pa, f), getattr(pb, f), f)
    assert np.array_equal(W, W_before)
    with pytest.raises(FormatRuleError, match="hinv_diag: must be > 0"):
        Q.quantize_hinv(W, np.where(np.arange(256) == 3, 0.0, hd))
    with pytest.raises(ShapeError, match="hinv_diag"):
        Q.quantize_hinv(W, hd[:-1])
    with pytest.raises(NonFiniteError, match="hinv_diag"):
        Q.quantize_hinv(W, np.where(np.arange(256) == 3, np.nan, hd))


@pytest.mark.parametrize("seed, k, n, alpha, ratio, clip, digest", [
    (31, 512, 64, 0.25, 0.005, True, "d235a8d2b5fc3b406fd58bd621e3762f99e16b8fb05f9ec68ad20fe06ce8b0aa"),
    (32, 1024, 32, 0.5, 0.002, False, "048e3e8d022c3ebea7ecdc9108266ca17241339855c2194339119babd294c331"),
])
def test_quantizer_bits_pinned(seed, k, n, alpha, ratio, clip, digest):
    """SHA-256 of every Mixed2416 field (name, dtype, bytes), pinned from the quantizer as it was
    before the one-score / broadcast rewrite (commit 38558d9): the rewrite changed no bit."""
    import dataclasses
    import hashlib
    rng = np.random.default_rng(seed)
    W = (rng.standard_normal((k, n)) * rng.uniform(0.01, 0.2, (k, 1))).astype(np.float32)
    hd = rng.uniform(0.1, 2, k)
    m = Q.quantize_hinv(W, hd, alpha=alpha, outlier_ratio=ratio, clip_scales=clip)
    h = hashlib.sha256()
    for f in dataclasses.fields(m):
        x = np.ascontiguousarray(getattr(m, f.name))
        h.update(f.name.encode())
        h.update(str(x.dtype).encode())
        h.update(x.tobytes())
    assert h.hexdigest() == digest


def test_clip_scales_must_be_a_bool():
    W = np.zeros((64, 16), np.float32)
    with pytest.raises(FormatRuleError, match=r"clip_scales: must be True or False; got array"):
        Q.quantize(W, np.eye(64), clip_scales=np.array([True, False]))
    with pytest.raises(FormatRuleError, match=r"clip_scales: must be True or False; got 'yes'"):
        Q.quantize_hinv(W, np.ones(64), clip_scales="yes")


def test_check_alpha_ratio_gives_python_floats_or_names_the_argument():
    assert Q.check_alpha_ratio(np.float32(0.25), 0) == (0.25, 0.0)
    assert Q.check_alpha_ratio(1, Q.MAX_OUTLIER_RATIO) == (1.0, Q.MAX_OUTLIER_RATIO)
    for alpha, ratio, name in ((1.5, 0.0, "alpha"), (True, 0.0, "alpha"), (0.25, 0.006, "outlier_ratio"),
                               (0.25, float("nan"), "outlier_ratio")):
        with pytest.raises(FormatRuleError, match=f"^{name}: must be a number in"):
            Q.check_alpha_ratio(alpha, ratio)
