"""Each refsim/cuda kernel, run through refsim.ptx on a few pinned cases, equals its emulator bit for bit;
the host side refuses bad input and a GPU backend without a GPU; user_kernel wraps a user's file.
Then the same on hypothesis-drawn legal shapes and values, and under a random schedule with the race checker."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import refsim.cuda as rc
from refsim.cuda import build
from refsim.emulator import anyprec_kernel, atom_kernel, gptq_awq_kernel, mixed_2_4_16_kernel
from refsim.errors import FormatRuleError, RefsimError, ToolchainError
from refsim.formats import anyprec_plan as ak
from refsim.formats import atom, awq, bitplane, gptq
from refsim.formats import mixed_2_4_16 as m2416
from refsim.ptx import toolchain
from refsim.testing import assert_bitexact


def _gptq(rng, k, n, group, fmt="gptq", act_order=False):
    g = k // group
    g_idx = rng.permutation(np.arange(k) // group).astype(np.int32) if act_order else None
    return gptq.pack(rng.integers(0, 16, (k, n)), (rng.random((g, n)) * 0.02 + 0.001).astype(np.float32),
                     rng.integers(1, 16, (g, n)), 4, g_idx=g_idx, group_size=group, checkpoint_format=fmt)


@pytest.mark.parametrize("fmt,act_order,m", [("gptq", False, 1), ("gptq_v2", True, 3)])
def test_gptq_gemv_equals_its_emulator(fmt, act_order, m):
    rng = np.random.default_rng(1)
    ckpt = _gptq(rng, 64, 32, 32, fmt, act_order)
    x = rng.standard_normal((m, 64)).astype(np.float16)
    assert_bitexact(rc.gptq_gemv(x, ckpt), gptq_awq_kernel.gptq_gemv(x, ckpt), name="y")


def test_gptq_v1_zero_of_zero_is_read_as_the_checkpoint_stores_it():
    rng = np.random.default_rng(2)
    zeros = rng.integers(1, 16, (1, 32))
    zeros[0, 3] = 0                                   # v1 corrupts column 3..7 of that word: reads 16
    with pytest.warns(gptq.ZeroPointOverflowWarning):
        ckpt = gptq.pack(rng.integers(0, 16, (32, 32)), np.full((1, 32), 0.01), zeros, 4)
    x = rng.standard_normal((1, 32)).astype(np.float16)
    assert_bitexact(rc.gptq_gemv(x, ckpt), gptq_awq_kernel.gptq_gemv(x, ckpt), name="y")


def test_awq_gemv_equals_its_emulator():
    rng = np.random.default_rng(3)
    k, n, group = 48, 24, 16
    ckpt = awq.pack(rng.integers(0, 16, (k, n)), (rng.random((k // group, n)) * 0.02).astype(np.float32),
                    rng.integers(0, 16, (k // group, n)), group_size=group)
    x = rng.standard_normal((2, k)).astype(np.float16)
    assert_bitexact(rc.awq_gemv(x, ckpt), gptq_awq_kernel.awq_gemv(x, ckpt), name="y")


@pytest.mark.parametrize("m,n,k,bits", [(1, 4, 1024, 3), (2, 16, 1312, 5)])
def test_anyprec_gemv_equals_its_emulator(m, n, k, bits):
    rng = np.random.default_rng(bits)
    qweight = bitplane.pack(rng.integers(0, 2**bits, (n, k)).astype(np.uint8), bits)
    lut = rng.standard_normal((n, 2**bits)).astype(np.float16)
    x = rng.standard_normal((m, k)).astype(np.float16)
    assert_bitexact(rc.anyprec_gemv(x, qweight, lut, bits), anyprec_kernel.anyprec_gemv(x, qweight, lut, bits))


def test_anyprec_ksplit_adds_the_slices_in_ascending_order_like_the_emulator():
    rng = np.random.default_rng(8)
    k, bits = 4128, 7                                  # M = 1, K > 4096, b >= 7: two slices
    qweight = bitplane.pack(rng.integers(0, 2**bits, (4, k)).astype(np.uint8), bits)
    lut = rng.standard_normal((4, 2**bits)).astype(np.float16)
    x = rng.standard_normal((1, k)).astype(np.float16)
    assert_bitexact(rc.anyprec_gemv(x, qweight, lut, bits, "ascending"),
                    anyprec_kernel.anyprec_gemv(x, qweight, lut, bits, "ascending"))


def test_anyprec_ksplit_needs_the_ascending_order_like_the_emulator():
    x = np.zeros((1, 4128), np.float16)
    with pytest.raises(FormatRuleError, match="ascending"):
        rc.anyprec_gemv(x, np.zeros((7, 4, 129), np.int32), np.zeros((4, 128), np.float16), 7)


def test_mixed_gemv_equals_its_emulator():
    rng = np.random.default_rng(4)
    k, n = 128, 16
    W = (rng.standard_normal((k, n)) * 0.05).astype(np.float32)
    X = rng.standard_normal((2 * k, k))
    p = m2416.pack(m2416.quantize(W, (X.T @ X) / k, alpha=0.25, outlier_ratio=0.005))
    x = rng.standard_normal(k).astype(np.float16)
    assert_bitexact(rc.mixed_gemv(p, x), mixed_2_4_16_kernel.mixed_gemv(p, x), name="y")


def test_atom_group_gemm_equals_its_emulator_with_unequal_pair_scales():
    rng = np.random.default_rng(5)
    m, n, kb, keeper = 20, 6, 256, 32                 # two tile rows (the second partial), one partial tile
    a = atom.AtomActivations(rng.integers(-8, 8, (m, kb)).astype(np.int8),
                             (rng.random((m, 2)) * 0.1).astype(np.float16),
                             rng.integers(-128, 128, (m, keeper)).astype(np.int8),
                             (rng.random(m) * 0.01).astype(np.float16))
    w = atom.AtomWeights(rng.integers(-8, 8, (kb, n)).astype(np.int8), (rng.random((2, n)) * 0.1).astype(np.float16),
                         rng.integers(-128, 128, (keeper, n)).astype(np.int8), (rng.random(n) * 0.01).astype(np.float16))
    assert_bitexact(rc.atom_group_gemm(a, w), atom_kernel.atom_group_gemm(a, w), name="D")


def test_atom_kernel_has_no_unfused_epilogue():
    with pytest.raises(FormatRuleError, match="fused"):
        rc.atom_group_gemm(None, None, fused=False)


def test_unknown_backend_is_refused():
    x = np.zeros((1, 32), np.float16)
    with pytest.raises(RefsimError, match="backend"):
        rc.gptq_gemv(x, _gptq(np.random.default_rng(0), 32, 32, 32), backend="cpu")


def test_gpu_backend_without_cuda_core_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "cuda.core", None)   # import cuda.core -> ImportError
    x = np.zeros((1, 32), np.float16)
    with pytest.raises(ToolchainError, match=r"refsim\[gpu\]"):
        rc.gptq_gemv(x, _gptq(np.random.default_rng(0), 32, 32, 32), backend="gpu")


def _gptq_plan(x, ckpt):
    m, k = x.shape
    n = ckpt.qweight.shape[1]
    y = np.zeros((m, n), np.float16)
    args = (x, ckpt.qweight, ckpt.qzeros, ckpt.scales, ckpt.g_idx, y, np.int32(m), np.int32(n), np.int32(k),
            np.int32(1))
    return rc.LaunchPlan(grid=-(-n // 128), block=128, args=args, out=y)


def test_user_kernel_runs_a_users_ptx_file_with_an_emulator_shaped_signature():
    f = rc.user_kernel(build.PTX_DIR / "gptq_awq.sm_80.ptx", kernel="gptq_gemv", launch=_gptq_plan)
    rng = np.random.default_rng(6)
    ckpt = _gptq(rng, 32, 32, 32)
    x = rng.standard_normal((2, 32)).astype(np.float16)
    assert_bitexact(f(x, ckpt), gptq_awq_kernel.gptq_gemv(x, ckpt), name="y")


@pytest.mark.nvcc
def test_user_kernel_compiles_a_users_cu_file():
    if toolchain.find_tool("nvcc") is None:
        pytest.skip("no nvcc: a .cu file needs the cuda extra ($NVCC, the wheel, PATH)")
    f = rc.user_kernel(build.source_path("gptq_awq"), kernel="gptq", launch=_gptq_plan)   # unique substring
    rng = np.random.default_rng(7)
    ckpt = _gptq(rng, 32, 32, 32)
    x = rng.standard_normal((1, 32)).astype(np.float16)
    assert_bitexact(f(x, ckpt), gptq_awq_kernel.gptq_gemv(x, ckpt), name="y")


def test_user_kernel_refuses_a_missing_file_and_an_unknown_kernel(tmp_path):
    with pytest.raises(RefsimError, match="no such"):
        rc.user_kernel(tmp_path / "nope.cu", kernel="k", launch=_gptq_plan)
    f = rc.user_kernel(build.PTX_DIR / "gptq_awq.sm_80.ptx", kernel="gemv", launch=_gptq_plan)  # 2 matches
    ckpt = _gptq(np.random.default_rng(0), 32, 32, 32)
    with pytest.raises(FormatRuleError, match="awq_gemv, gptq_gemv|gptq_gemv, awq_gemv"):
        f(np.zeros((1, 32), np.float16), ckpt)


# ------------------------------------------------------------------------ properties: drawn shapes and values
# Budget: every example is one interpreted launch (0.3-3 s on a busy 2-core machine), so the example counts
# are set here, small; the heavy sweep (wider shapes, the K-split) is bench/bench_cuda_kernels.py.
SPECIAL16 = np.array([0.0, -0.0, 2.0**-24, -(2.0**-24), 2.0**-14 - 2.0**-24, 1.0, -1.0, 1.0 + 2.0**-10,
                      2.0**-11, 0.5, 3.0, 2048.0, -2048.0, 2.0**-8], np.float16)
RANDOM = {"schedule": "random", "race": True}


def _values(rng, shape, scale, special_share):
    """float16 array: N(0, scale) values with a share replaced by SPECIAL16 entries (scaled down so that
    sums stay finite: 2048 * scale is the largest magnitude)."""
    v = (rng.standard_normal(shape) * scale).astype(np.float16)
    pick = rng.random(shape) < special_share
    sp = (SPECIAL16.astype(np.float32) * np.float32(min(scale, 1.0) / 64)).astype(np.float16)
    sp[:2] = SPECIAL16[:2]                                  # keep the signed zeros
    sp[2:5] = SPECIAL16[2:5]                                # and the subnormals unscaled
    v[pick] = sp[rng.integers(0, sp.size, int(pick.sum()))]
    return v


cases = st.fixed_dictionaries({"seed": st.integers(0, 2**31 - 1), "special": st.sampled_from([0.0, 0.2, 0.9])})


# ------------------------------------------------------------------------------------------- gptq/awq
@settings(max_examples=3)
@given(c=cases, m=st.integers(1, 8), kw=st.integers(1, 2), fmt=st.sampled_from(["gptq", "gptq_v2"]),
       act_order=st.booleans())
@example(c={"seed": 0, "special": 0.9}, m=8, kw=1, fmt="gptq", act_order=False)
def test_gptq_gemv_equals_its_emulator_on_drawn_shapes_and_values(c, m, kw, fmt, act_order):
    rng = np.random.default_rng(c["seed"])
    k, n = 32 * kw, 32                                      # the format's K, N % 32 rule
    group = 32 if kw > 1 else None
    g = k // 32 if group else 1
    g_idx = (rng.permutation(np.arange(k) // 32).astype(np.int32) if act_order and group else None)
    ckpt = gptq.pack(rng.integers(0, 16, (k, n)), np.abs(_values(rng, (g, n), 0.02, c["special"])).astype(np.float32),
                     rng.integers(1, 16, (g, n)), 4, g_idx=g_idx, group_size=group, checkpoint_format=fmt)
    x = _values(rng, (m, k), 1.0, c["special"])
    assert_bitexact(rc.gptq_gemv(x, ckpt), gptq_awq_kernel.gptq_gemv(x, ckpt), name="y")


@settings(max_examples=3)
@given(c=cases, m=st.integers(1, 3), k8=st.integers(1, 4), nw=st.integers(1, 5), gsel=st.sampled_from([8, None]))
def test_awq_gemv_equals_its_emulator_on_drawn_shapes_and_values(c, m, k8, nw, gsel):
    rng = np.random.default_rng(c["seed"])
    k, n = 8 * k8, 8 * nw                                   # odd K / 8 and N / 8, partial thread block
    group = gsel if gsel else None
    g = k // group if group else 1
    ckpt = awq.pack(rng.integers(0, 16, (k, n)), np.abs(_values(rng, (g, n), 0.02, c["special"])).astype(np.float32),
                    rng.integers(0, 16, (g, n)), group_size=group)
    x = _values(rng, (m, k), 1.0, c["special"])
    assert_bitexact(rc.awq_gemv(x, ckpt), gptq_awq_kernel.awq_gemv(x, ckpt), name="y")


@settings(max_examples=2)
@given(seed=st.integers(0, 2**31 - 1), m=st.integers(1, 2))
def test_gptq_gemv_is_exact_when_no_partial_sum_rounds(seed, m):
    # scales 1, integer weights q - z in [-15, 15], x in {-1, 0, 1}: every fp16/fp32 partial is an
    # integer below 2^11, so the kernel must return the exact product
    rng = np.random.default_rng(seed)
    k, n = 32, 32
    ckpt = gptq.pack(rng.integers(0, 16, (k, n)), np.ones((1, n)), rng.integers(0, 16, (1, n)), 4,
                     checkpoint_format="gptq_v2")
    x = rng.integers(-1, 2, (m, k)).astype(np.float16)
    W = gptq.dequantize(ckpt).astype(np.int64)
    exact = (x.astype(np.int64) @ W).astype(np.float16) + np.float16(0)     # +0 for exact zeros
    assert_bitexact(rc.gptq_gemv(x, ckpt), exact, name="y")


# ------------------------------------------------------------------------------------------- anyprec
@settings(max_examples=3)
@given(c=cases, m=st.integers(1, 8), bits=st.integers(3, 8), tail=st.integers(0, 31), full=st.integers(0, 1))
@example(c={"seed": 1, "special": 0.2}, m=1, bits=3, tail=0, full=1)
def test_anyprec_gemv_equals_its_emulator_on_drawn_shapes_and_values(c, m, bits, tail, full):
    rng = np.random.default_rng(c["seed"])
    k = 1024 * full + 32 * tail or 32                        # tail chunks of every width
    n = 4 if m == 1 else 16
    qweight = bitplane.pack(rng.integers(0, 2**bits, (n, k)).astype(np.uint8), bits)
    lut = _values(rng, (n, 2**bits), 1.0, c["special"])
    x = _values(rng, (m, k), 1.0, c["special"])
    assert_bitexact(rc.anyprec_gemv(x, qweight, lut, bits), anyprec_kernel.anyprec_gemv(x, qweight, lut, bits))


@settings(max_examples=2)
@given(seed=st.integers(0, 2**31 - 1), m=st.integers(1, 3), bits=st.integers(3, 8))
def test_anyprec_gemv_equals_the_formats_exact_reference_when_nothing_rounds(seed, m, bits):
    # integer table entries in [-4, 4], x in {-1, 0, 1} and mostly 0: every fp16 partial is an integer
    # below 2^11, so the kernel returns the format's exact float64 sum (matmul_reference) rounded once
    rng = np.random.default_rng(seed)
    k, n = 1056, 4 if m == 1 else 16
    codes = rng.integers(0, 2**bits, (n, k)).astype(np.uint8)
    lut = rng.integers(-4, 5, (n, 2**bits)).astype(np.float16)
    x = (rng.integers(-1, 2, (m, k)) * (rng.random((m, k)) < 0.2)).astype(np.float16)
    qweight = bitplane.pack(codes, bits)
    exact = ak.matmul_reference(x, qweight, lut, bits)
    W = np.take_along_axis(lut.astype(np.float64), codes.astype(np.int64), axis=1)     # (N, K)
    assert (np.abs(x.astype(np.float64)) @ np.abs(W).T).max() < 2048      # premise: no partial can round
    assert_bitexact(rc.anyprec_gemv(x, qweight, lut, bits), exact.astype(np.float16) + np.float16(0))


# ------------------------------------------------------------------------------------------- 2/4/16
@settings(max_examples=4)
@given(c=cases, g=st.integers(1, 12), nb=st.integers(1, 2), alpha=st.sampled_from([0.0, 0.25, 0.5, 1.0]),
       ratio=st.sampled_from([0.0, 0.005]))
def test_mixed_gemv_equals_its_emulator_on_drawn_shapes_and_values(c, g, nb, alpha, ratio):
    rng = np.random.default_rng(c["seed"])
    k, n = 16 * g, 16 * nb
    W = (rng.standard_normal((k, n)) * 0.05).astype(np.float32)
    X = rng.standard_normal((2 * k, k))
    p = m2416.pack(m2416.quantize(W, (X.T @ X) / k, alpha=alpha, outlier_ratio=ratio))
    x = _values(rng, (k,), 1.0, c["special"])
    assert_bitexact(rc.mixed_gemv(p, x), mixed_2_4_16_kernel.mixed_gemv(p, x), name="y")


# ------------------------------------------------------------------------------------------- atom
def _atom_problem(rng, m, n, groups, keeper, pair_equal, special):
    kb = 128 * groups
    s4 = np.abs(_values(rng, (groups, n), 0.05, special))
    s8 = np.abs(_values(rng, (n,), 0.005, special))
    if pair_equal:
        s4, s8 = np.repeat(s4[:, 0::2], 2, axis=1), np.repeat(s8[0::2], 2)
    a = atom.AtomActivations(rng.integers(-8, 8, (m, kb)).astype(np.int8), np.abs(_values(rng, (m, groups), 0.1, special)),
                             rng.integers(-128, 128, (m, keeper)).astype(np.int8), np.abs(_values(rng, (m,), 0.01, special)))
    w = atom.AtomWeights(rng.integers(-8, 8, (kb, n)).astype(np.int8), s4,
                         rng.integers(-128, 128, (keeper, n)).astype(np.int8), s8)
    return a, w


@settings(max_examples=4)
@given(c=cases, m=st.integers(1, 40), n2=st.integers(1, 20), groups=st.integers(1, 3), keeper=st.sampled_from([0, 32, 128]),
       pair_equal=st.booleans())
@example(c={"seed": 3, "special": 0.2}, m=20, n2=3, groups=2, keeper=128, pair_equal=False)
def test_atom_group_gemm_equals_its_emulator(c, m, n2, groups, keeper, pair_equal):
    rng = np.random.default_rng(c["seed"])
    a, w = _atom_problem(rng, m, 2 * n2, groups, keeper, pair_equal, c["special"])
    assert_bitexact(rc.atom_group_gemm(a, w), atom_kernel.atom_group_gemm(a, w), name="D")


@settings(max_examples=2)
@given(seed=st.integers(0, 2**31 - 1), m=st.integers(1, 20), groups=st.integers(1, 2))
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


# ------------------------------------------------------------------------------------------- schedules
@pytest.mark.parametrize("kernel", ["anyprec", "mixed", "gptq", "atom"])
def test_a_random_schedule_with_the_race_checker_changes_no_bit(kernel):
    rng = np.random.default_rng(11)
    opts = {**RANDOM, "seed": 5}
    if kernel == "anyprec":
        qweight = bitplane.pack(rng.integers(0, 16, (4, 96)).astype(np.uint8), 4)   # 4 warps share the table
        lut = rng.standard_normal((4, 16)).astype(np.float16)
        x = rng.standard_normal((1, 96)).astype(np.float16)
        got, want = rc.anyprec_gemv(x, qweight, lut, 4, options=opts), anyprec_kernel.anyprec_gemv(x, qweight, lut, 4)
    elif kernel == "mixed":
        k, n = 32, 16                                   # 4 warps, lanes 0..1 hold units
        X = rng.standard_normal((2 * k, k))
        p = m2416.pack(m2416.quantize((rng.standard_normal((k, n)) * 0.05).astype(np.float32), (X.T @ X) / k))
        x = rng.standard_normal(k).astype(np.float16)
        got, want = rc.mixed_gemv(p, x, options=opts), mixed_2_4_16_kernel.mixed_gemv(p, x)
    elif kernel == "gptq":
        ckpt = gptq.pack(rng.integers(0, 16, (32, 160)), np.full((1, 160), 0.01), rng.integers(1, 16, (1, 160)), 4)
        x = rng.standard_normal((1, 32)).astype(np.float16)
        got, want = rc.gptq_gemv(x, ckpt, options=opts), gptq_awq_kernel.gptq_gemv(x, ckpt)
    else:
        a, w = _atom_problem(rng, 18, 10, 1, 32, False, 0.2)
        got, want = rc.atom_group_gemm(a, w, options=opts), atom_kernel.atom_group_gemm(a, w)
    assert_bitexact(got, want, name=kernel)
