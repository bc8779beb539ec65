"""refsim.emulator.hopper_w4a16: exact where nothing rounds, the weights scaled in fp16 before the
tensor core (not the partial sums), one tile equal to a chain of refsim.arith.wgmma steps, the
per-thread plain twin equal to the fast path, inputs checked; and the check_kernel format
(refsim.testing.cases.hopper_w4a16) passing the emulator and naming the partial-sum bug."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refsim.arith import wgmma
from refsim.emulator import hopper_w4a16 as ek
from refsim.errors import DtypeError, ShapeError
from refsim.formats import hopper_w4a16 as layout
from refsim.testing import check_kernel, examples
from refsim.testing import harness
from refsim.testing.cases import hopper_w4a16 as cases

QUIET = {"progress": lambda line: None}


def _problem(m, k, n, seed, x_int=False, pow2_scales=False):
    rng = np.random.default_rng(seed)
    q = rng.integers(0, 16, (k, n)).astype(np.uint8)
    if pow2_scales:
        s = (2.0 ** rng.integers(-4, -1, (k // 128, n))).astype(np.float16)
    else:
        s = (rng.random((k // 128, n)) * 0.02 + 2.0**-10).astype(np.float16)
    x = (rng.integers(-2, 3, (m, k)) if x_int else rng.standard_normal((m, k))).astype(np.float16)
    return q, s, x


@settings(max_examples=examples(4), deadline=None, database=None)
@given(st.sampled_from([(70, 256, 128), (1, 128, 64), (64, 384, 64), (9, 128, 128)]), st.integers(0, 2**32 - 1))
def test_integer_valued_data_give_the_exact_product(mkn, seed):
    # x in [-2, 2], q - 8 in [-8, 7], s in {2^-4, 2^-3, 2^-2}: every weight, product and partial sum is exact in
    # fp16 / fp32 and |C| <= 384 * 2 * 8 / 4 = 1536 lies on the fp16 grid: C equals the exact product
    q, s, x = _problem(*mkn, seed, x_int=True, pow2_scales=True)
    w = (q.astype(np.float64) - 8) * np.repeat(s.astype(np.float64), 128, axis=0)
    exact = x.astype(np.float64) @ w
    assert np.all(exact == np.round(exact * 16) / 16) and np.abs(exact).max() <= 1536
    got = ek.hopper_w4a16_gemm(x, layout.pack(q), s)
    assert np.array_equal(got.view(np.uint16), exact.astype(np.float16).view(np.uint16))


def test_the_scale_multiplies_the_weight_in_fp16_before_the_tensor_core():
    # x = 3, q = 15 (7), s = fp16(1/3) = 0x3555 = 0.333251953125: the weight fp16(7 s) = 2.33203125 (7 s =
    # 2.332763671875 rounds down), C = 3 * 2.33203125 = 6.99609375 (0x46FF). Scaling the fp32 partial sum
    # instead gives fp16(21 s = 6.998291015625) = 7.0 (0x4700).
    q = np.full((128, 64), 8, np.uint8)
    q[0, 5] = 15
    s = np.full((1, 64), 0x3555, np.uint16).view(np.float16)
    x = np.zeros((1, 128), np.float16)
    x[0, 0] = 3
    got = ek.hopper_w4a16_gemm(x, layout.pack(q), s)
    assert got.view(np.uint16)[0, 5] == 0x46FF
    assert cases._group_partials(x, layout.pack(q), s).view(np.uint16)[0, 5] == 0x4700
    assert np.count_nonzero(got.view(np.uint16)) == 1


@settings(max_examples=examples(4), deadline=None, database=None)
@given(st.integers(1, 64), st.sampled_from(["normal", "wide"]), st.integers(0, 2**32 - 1))
def test_one_tile_is_a_chain_of_wgmma_steps(m, kind, seed):
    # K = 128, N = 64: one column tile; W built here from the codes with NumPy's fp16 multiply (exact product,
    # one rounding); 8 refsim.arith.wgmma m64nNk16 steps in increasing k from +0 over the tokens padded to 64
    q, s, x = _problem(m, 128, 64, seed)
    if kind == "wide":
        x = (x.astype(np.float64) * 2.0 ** np.random.default_rng(seed).integers(-14, 8, x.shape)).astype(np.float16)
    w = ((q.astype(np.float32) - 8).astype(np.float16) * s[0]).astype(np.float16)     # (K, N)
    b = np.zeros((128, 64), np.float16)
    b[:, :m] = x.T
    d = np.zeros((64, 64), np.float32)
    for step in range(8):
        d = wgmma.wgmma("f32.f16.f16", w[16 * step:16 * step + 16].T, b[16 * step:16 * step + 16], d)
    want = d.T[:m].astype(np.float16)
    got = ek.hopper_w4a16_gemm(x, layout.pack(q), s)
    assert np.array_equal(got.view(np.uint16), want.view(np.uint16))


@pytest.mark.parametrize("m, k, n", [(3, 256, 128), (66, 128, 64)])
def test_the_per_thread_twin_equals_the_fast_path(m, k, n):
    q, s, x = _problem(m, k, n, m + k + n)
    wp = layout.pack(q)
    fast = ek.hopper_w4a16_gemm(x, wp, s)
    assert np.array_equal(fast.view(np.uint16), ek.hopper_w4a16_gemm_reference(x, wp, s).view(np.uint16))
    assert not np.shares_memory(fast, x)


@pytest.mark.parametrize("args, error, match", [
    ((np.zeros((2, 128), np.float32), np.zeros((8, 128), np.uint32), np.ones((1, 64), np.float16)), DtypeError,
     r"x: dtype must be float16"),
    ((np.zeros((0, 128), np.float16), np.zeros((8, 128), np.uint32), np.ones((1, 64), np.float16)), ShapeError,
     r"M >= 1"),
    ((np.zeros((2, 128), np.float16), np.zeros((8, 128), np.uint32), np.ones((2, 64), np.float16)), ShapeError,
     r"scales: must have K / 128 = 1 rows"),
    ((np.zeros((2, 64), np.float16), np.zeros((4, 128), np.uint32), np.ones((1, 64), np.float16)), ShapeError,
     r"K: must be a positive multiple of 128"),
    ((np.zeros((2, 128), np.float16), np.zeros((8, 64), np.uint32), np.ones((1, 64), np.float16)), ShapeError,
     r"wp: shape must be \(8, 128\)"),
])
def test_inputs_are_checked_by_name(args, error, match):
    with pytest.raises(error, match=match):
        ek.hopper_w4a16_gemm(*args)


def test_check_kernel_passes_the_emulator_and_names_the_partial_sum_bug():
    result = check_kernel(ek.hopper_w4a16_gemm, "hopper_w4a16", max_examples=0, seed=0, **QUIET)
    # the pinned cases cover every regime of the tile, ring and group structure
    assert result.pinned == 4 and set(result.regimes) == {
        "one token tile", "several token tiles", "one column tile", "several column tiles", "one scale group",
        "several scale groups", "the ring wraps (more than 4 k-tiles)", "no ring slot reused",
        "a partial token tile (rows past M zero-filled, not stored)"}
    with pytest.raises(harness.KernelMismatch, match=r"verdict: scale placement: .* bit for bit"):
        check_kernel(lambda *i: cases._group_partials(*i), "hopper_w4a16", max_examples=1, shrink=False, **QUIET)
