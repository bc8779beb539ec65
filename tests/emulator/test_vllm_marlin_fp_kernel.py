"""vLLM Marlin FP8 / NVFP4 emulation: against its plain-loop twin, exact products, and the rules of its
inputs (the compiled kernel through refsim.ptx is compared in tests/cuda/test_official_vllm.py)."""

from __future__ import annotations

import numpy as np
import pytest

from refsim.emulator import vllm_marlin_fp_kernel as ek
from refsim.errors import FormatRuleError, ShapeError
from refsim.formats import marlin_fp as mf, minifloat
from refsim.testing import assert_bitexact


def _fp8(rng, m, k, n):
    q = rng.integers(0, 256, (k, n)).astype(np.uint8)
    q[(q & 0x7F) == 0x7F] = 0x38                               # no NaN codes
    B, s = mf.prepare_fp8(q, (rng.random((1, n)) * 0.1 + 0.01).astype(np.float16))
    return rng.standard_normal((m, k)).astype(np.float16), B, s, None


def _nvfp4(rng, m, k, n):
    q = rng.integers(0, 16, (k, n)).astype(np.uint8)
    B, s, g = mf.prepare_nvfp4(q, rng.integers(0x08, 0x7F, (k // 16, n)).astype(np.uint8), 0.37)
    return rng.standard_normal((m, k)).astype(np.float16), B, s, g


@pytest.mark.parametrize("kind, make, sms, fp32_reduce", [("fp8", _fp8, None, False), ("nvfp4", _nvfp4, None, False),
                                                         ("fp8", _fp8, 3, False), ("nvfp4", _nvfp4, 3, True)])
def test_emulator_equals_its_plain_loop_twin(kind, make, sms, fp32_reduce):
    A, B, s, g = make(np.random.default_rng(0), 3, 256, 256)
    cols = [0, 37, 130, 255]
    fast = ek.vllm_marlin_fp_gemm(kind, A, B, s, g, sms=sms, fp32_reduce=fp32_reduce)
    assert_bitexact(fast[:, cols], ek.vllm_marlin_fp_gemm_reference(kind, A, B, s, g, sms=sms,
                                                                    fp32_reduce=fp32_reduce, cols=cols))


def test_slices_of_a_worked_example():
    # 1 tile, 4 k-tiles, 3 blocks: iters = ceil(4 / 3) = 2; block 1 (k-tiles 2, 3) is slice_idx 0
    assert ek.slices(1, 1, 4, 3) == {(0, 0): [(1, 2, 2), (0, 0, 2)]}
    # 2 row chunks x 2 column tiles on 3 blocks: part 1 = 1 whole tile per block, part 2 splits the last
    assert ek.slices(2, 2, 4, 3) == {(0, 0): [(0, 0, 4)], (1, 0): [(1, 0, 4)], (1, 1): [(2, 0, 4)],
                                     (0, 1): [(1, 2, 2), (0, 0, 2)]}


def test_slices_cover_every_k_tile_of_every_tile_once_in_slice_order():
    for grid in range(1, 12):
        for parallel in (1, 2, 3):
            for n_tiles in (1, 2, 5):
                for k_tiles in (1, 2, 3, 7, 8):
                    plan = ek.slices(parallel, n_tiles, k_tiles, grid)      # asserts its invariants
                    assert len(plan) == parallel * n_tiles
                    for sls in plan.values():
                        firsts = [first for _, first, _ in sls]
                        assert firsts == sorted(firsts, reverse=True)      # slice_idx 0 is the bottom


def test_row_launches_are_the_16_row_chunks_then_the_tail():
    assert ek.row_launches(5) == [(0, 5, 1)]
    assert ek.row_launches(16) == [(0, 16, 1)]
    assert ek.row_launches(37) == [(0, 32, 2), (32, 5, 1)]


@pytest.mark.parametrize("kind, make", [("fp8", _fp8), ("nvfp4", _nvfp4)])
def test_compiled_and_numpy_mma_paths_agree(kind, make):
    A, B, s, g = make(np.random.default_rng(1), 5, 256, 256)
    assert_bitexact(ek._gemm(kind, A, B, s, g, "sm_80", native=None), ek._gemm(kind, A, B, s, g, "sm_80", native=False))


def test_fp8_exact_products_then_one_fp32_scale_rounding():
    rng = np.random.default_rng(2)
    m, k, n = 4, 256, 128
    q = rng.choice(np.array([0x00, 0x38, 0x40, 0x44, 0xB8, 0xC0], np.uint8), (k, n))   # 0, 1, 2, 3, -1, -2
    sc = (rng.random((1, n)) * 0.1 + 0.01).astype(np.float16)
    A = rng.integers(-4, 5, (m, k)).astype(np.float16)
    B, s = mf.prepare_fp8(q, sc)
    exact = A.astype(np.float64) @ (minifloat.decode(q, "e4m3").astype(np.float64) * 2.0 ** -8)   # every sum exact
    s16 = (sc.astype(np.float32) * 256).astype(np.float16).astype(np.float32)
    expected = (exact.astype(np.float32) * s16).astype(np.float16)                    # one fp32 RN, then fp16
    assert_bitexact(ek.vllm_marlin_fp_gemm("fp8", A, B, s), expected)


def test_nvfp4_exact_products_then_the_tensor_scale():
    rng = np.random.default_rng(3)
    m, k, n = 2, 128, 128
    q = rng.integers(0, 16, (k, n)).astype(np.uint8)
    s8 = np.full((k // 16, n), 0x38, np.uint8)                                          # e4m3 1.0
    A = rng.integers(-2, 3, (m, k)).astype(np.float16)
    B, s, g = mf.prepare_nvfp4(q, s8, 0.1)
    exact = A.astype(np.float64) @ (minifloat.decode(q, "e2m1").astype(np.float64) * 2.0 ** -7)
    expected = (exact.astype(np.float32) * g).astype(np.float16)
    assert_bitexact(ek.vllm_marlin_fp_gemm("nvfp4", A, B, s, g), expected)


def test_rules_of_the_inputs():
    A, B, s, g = _nvfp4(np.random.default_rng(4), 1, 128, 128)
    with pytest.raises(FormatRuleError, match="global_scale"):
        ek.vllm_marlin_fp_gemm("nvfp4", A, B, s)
    A8, B8, s8, _ = _fp8(np.random.default_rng(4), 1, 128, 128)
    with pytest.raises(FormatRuleError, match="only nvfp4"):
        ek.vllm_marlin_fp_gemm("fp8", A8, B8, s8, g)
    with pytest.raises(ShapeError, match="128x128"):
        ek.vllm_marlin_fp_gemm("fp8", A8, B8[:, :256], s8[:, :64])
    with pytest.raises(ShapeError, match="columns"):
        ek.vllm_marlin_fp_gemm("fp8", A8[:, :64], B8, s8)
