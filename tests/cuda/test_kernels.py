"""Each refsim/cuda kernel, run through refsim.ptx on a few pinned cases, equals its emulator bit for bit;
the host side refuses bad input and a GPU backend without a GPU; user_kernel wraps a user's file.
(Hypothesis-drawn cases: property_tests/cuda/.)"""

from __future__ import annotations

import sys

import numpy as np
import pytest

import refsim.cuda as rc
from refsim.cuda import build
from refsim.emulator import anyprec_kernel, atom_kernel, gptq_awq_kernel, mixed_2_4_16_kernel
from refsim.errors import FormatRuleError, RefsimError, ToolchainError
from refsim.formats import atom, awq, bitplane, gptq
from refsim.formats import mixed_2_4_16 as m2416
from refsim.quant import mixed_2_4_16 as q2416
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
    p = m2416.pack(q2416.quantize(W, (X.T @ X) / k, alpha=0.25, outlier_ratio=0.005))
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
