"""Marlin warp-level emulation: against its plain-loop twin, exact products, and the derived error bound;
property: the exact product whenever no partial sum can round, for any legal shape, group mode and SM
count (so any partition and reduction order)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refsim.emulator import marlin_kernel as mk
from refsim.errors import FormatRuleError, ShapeError
from refsim.formats import marlin, stripes
from refsim.testing import assert_bitexact, examples


def _problem(rng, m, k, n, group_size, a_scale=1.0):
    q = rng.integers(0, 16, (k, n)).astype(np.uint8)
    g = 1 if group_size is None else k // group_size
    sc = (rng.random((g, n)) * 0.02 + 0.001).astype(np.float16)
    B, s = marlin.pack(q, sc, group_size)
    A = (rng.standard_normal((m, k)) * a_scale).astype(np.float16)
    return A, B, s


# (M, K, N, group_size, sms): one slice per column; global reductions with 2..8 slices; the
# M > 16 tile (thread_k 64, W_k = 2); M > 64 (two launches / parallel problems); Hopper model
CASES = [
    (1, 256, 256, 128, 108, "sm_80"),
    (3, 512, 256, 128, 3, "sm_80"),
    (2, 1024, 256, None, 5, "sm_86"),
    (20, 256, 256, 128, 4, "sm_89"),
    (70, 128, 256, None, 2, "sm_80"),
    (2, 512, 256, 128, 7, "sm_90"),
]


@pytest.mark.slow
@pytest.mark.parametrize("m,k,n,gs,sms,arch", CASES)
def test_vectorised_emulation_equals_plain_loop_twin(m, k, n, gs, sms, arch):
    rng = np.random.default_rng(m * 1000 + sms)
    A, B, s = _problem(rng, m, k, n, gs)
    C = mk.marlin_gemm(A, B, s, arch=arch, sms=sms)
    cols = [0, 9, 63, 64, 130, n - 1]
    # for M <= 16 a subset of rows keeps the tile config and partition (rows are independent in
    # the MMA), which keeps the slow twin cheap; larger M runs the twin on every row
    rows = sorted({0, m - 1}) if m <= 16 else list(range(m))
    ref = mk.marlin_gemm_reference(A[rows], B, s, arch=arch, sms=sms, cols=cols)
    assert_bitexact(C[rows][:, cols], ref, f"Marlin M={m} K={k} N={n} g={gs} sms={sms}")


@pytest.mark.parametrize("gs", [128, None])
@pytest.mark.parametrize("sms", [1, 5, 108])
def test_exact_inputs_give_the_exact_product(gs, sms):
    # A in {-1, 0, 1}, codes q - 8 in [-8, 7], power-of-two scales: every product, every partial sum
    # (fp32, tensor-core grid, fp16 carries) is a multiple of 2^-2 below 2^9, so nothing rounds.
    rng = np.random.default_rng(sms)
    m, k, n = 3, 512, 256
    q = rng.integers(0, 16, (k, n)).astype(np.uint8)
    g = 1 if gs is None else k // gs
    sc = (2.0 ** rng.integers(-2, 1, (g, n))).astype(np.float16)
    A = (rng.integers(-1, 2, (m, k)) * (rng.random((m, k)) < 0.1)).astype(np.float16)
    B, s = marlin.pack(q, sc, gs)
    w = (q.astype(np.float64) - 8) * np.repeat(sc.astype(np.float64), k // g, axis=0)
    bound = np.abs(A.astype(np.float64)) @ np.abs(w)
    assert bound.max() < 2**9  # premise of the test
    expected = (A.astype(np.float64) @ w).astype(np.float16)  # exact value, exactly representable
    assert_bitexact(mk.marlin_gemm(A, B, s, sms=sms), expected, "exact product")


def test_error_against_exact_product_stays_within_the_derived_bound():
    # Bound: the fp16 carries of the global reduction each round once (<= 1/2 ulp16 of the carried
    # partial), the final fp16 conversion rounds once (<= 1/2 ulp16), and the fp32 tensor-core chains
    # lose < (L + 1) 2^(E - 24) + 1 ulp32 per block, which is below 2^-20 * sum|a w| per block.
    rng = np.random.default_rng(7)
    m, k, n, sms = 2, 1024, 256, 108
    A, B, s = _problem(rng, m, k, n, 128)
    C = mk.marlin_gemm(A, B, s, sms=sms).astype(np.float64)
    W = marlin.dequantize(B, s).astype(np.float64)
    A64 = A.astype(np.float64)
    exact = A64 @ W
    plan = stripes.stripes(m, n, k, sms, 128)
    launch = plan.launches[0]
    tk, tn = plan.config.thread_k, plan.config.thread_n
    bound = np.zeros((m, n))
    for nt in range(n // tn):
        order = sorted((sl for st in launch.blocks for sl in st if sl.n_tile == nt), key=lambda x: x.slice_idx)
        cols = slice(nt * tn, (nt + 1) * tn)
        carried = np.zeros((m, tn))
        for sl in order[:-1]:  # every slice but the top one is carried in fp16
            rows = slice(sl.k_tile_start * tk, (sl.k_tile_start + sl.k_tile_count) * tk)
            carried = carried + A64[:, rows] @ W[rows, cols]
            bound[:, cols] += 0.5 * np.spacing(np.abs(carried * (1 + 2.0**-8)).astype(np.float16)).astype(np.float64)
    bound += 0.5 * np.spacing(np.abs(exact * (1 + 2.0**-8)).astype(np.float16)).astype(np.float64)
    bound += (k // 8) * 2.0**-20 * (np.abs(A64) @ np.abs(W))
    err = np.abs(C - exact)
    assert (err <= bound).all(), f"max err/bound {np.max(err / bound)}"
    # and the fp16 carries matter: a single-slice run (sms=1) differs on many elements
    C1 = mk.marlin_gemm(A, B, s, sms=1).astype(np.float64)
    assert (C1 != C).mean() > 0.1
    assert np.abs(C1 - exact).max() < np.abs(C - exact).max()


def test_provenance_names_lane_register_and_reduction_order():
    p = mk.provenance(16, 4096, 4096, row=9, col=70, group_size=128, sms=108)
    # A100 example of the format notes: column 0 is reduced b3 -> b2 -> b1 -> b0 (b0 writes)
    assert [b for b, *_ in p.slices] == [3, 2, 1, 0] and p.writer_block == 0
    assert (p.n_warp, p.sub_tile, p.lane, p.c_register) == (1, 0, 4 * 1 + 3, 2)
    assert "lane 7" in str(p)


def test_bad_input_raises():
    rng = np.random.default_rng(0)
    A, B, s = _problem(rng, 2, 256, 256, 128)
    with pytest.raises(ShapeError, match="A: must have K"):
        mk.marlin_gemm(A[:, :128], B, s)
    with pytest.raises(FormatRuleError, match="arch: must be one of"):
        mk.marlin_gemm(A, B, s, arch="sm_75")


def test_inputs_are_not_modified():
    rng = np.random.default_rng(1)
    A, B, s = _problem(rng, 2, 256, 256, None)
    before = (A.copy(), B.copy(), s.copy())
    mk.marlin_gemm(A, B, s, sms=3)
    for x, y in zip((A, B, s), before):
        assert_bitexact(x, y)


@pytest.mark.parametrize("gs", [128, None])
def test_tensor_core_operand_is_what_each_lane_dequantizes(gs):
    # Rebuild the B operand the way the kernel's lanes do: lane (t, g) of sub-tile j reads word
    # B[kb, 128 nb + 4 lane + j], runs the lop3/hsub2/hfma2 dequant (refsim.formats.dequant_tricks)
    # on it and on it >> 8, and (grouped) multiplies by the half of its frag_s that shared-memory
    # index 8 * lane/4 + 2 j + i of the permuted scale row holds. The emulator's operand must match.
    from refsim.formats import dequant_tricks as dt

    rng = np.random.default_rng(11)
    k, n = 256, 256
    A, B, s = _problem(rng, 1, k, n, gs)
    regs = dt.marlin_dequant(B.view(np.uint32))                       # (K/16, 2N, 4) uint32
    halves = np.stack([regs & 0xFFFF, regs >> 16], axis=-1).astype(np.uint16).view(np.float16)  # (.., 4, 2)
    Bq = np.empty((k, n), np.float16)
    kb, w = np.meshgrid(np.arange(k // 16), np.arange(2 * n), indexing="ij")
    nb, lane, j = w // 128, (w % 128) // 4, w % 4
    t, g = lane % 4, lane // 4
    r, c = 16 * kb + 2 * t, 64 * nb + 16 * j + g
    # register -> (row offset, column offset, scale half i): b0 (k, k+1), b1 (k+8, k+9); second mma at c + 8
    for reg, (dr, dc, i) in enumerate([(0, 0, 0), (8, 0, 0), (0, 8, 1), (8, 8, 1)]):
        for h in range(2):
            v = halves[..., reg, h]
            if gs is not None:
                scale = s[(16 * kb) // 128, 64 * nb + 8 * g + 2 * j + i]     # kernel's frag_s read
                v = (v.astype(np.float32) * scale.astype(np.float32)).astype(np.float16)  # __hmul2
            Bq[r + dr + h, c + dc] = v
    assert_bitexact(Bq, marlin.dequantize(B, s), "per-lane dequantized operand")


# --------------------------------------------------------------------------- properties (hypothesis)
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


def test_check_inputs_returns_the_problem_or_names_the_rule():
    A, B, s = _problem(np.random.default_rng(3), 2, 256, 256, 128)
    got = mk.check_inputs(A, B, s, "sm_80", np.int64(4))
    assert got[:3] == (A, B, s) and got[3:] == (4, 256, 256, 128) and type(got[3]) is int
    assert mk.check_inputs(A, B, s[:1], "sm_80", 1)[6] is None                  # one scale row: per channel
    with pytest.raises(ShapeError, match="^A: must have K = 16 \\* B.shape\\[0\\] = 256 columns"):
        mk.check_inputs(A[:, :128], B, s, "sm_80", 1)
    with pytest.raises(FormatRuleError, match="^sms: must be >= 1"):
        mk.check_inputs(A, B, s, "sm_80", 0)
