"""DeepGEMM's FP8 GEMM model: the wgmma + promotion term worked by hand from the stated constants (FP8 at
2 x the FP16 table rate, one fma per accumulator and one mul per row pair's scale per K block on the FP32
lanes), the L2 operand reads by hand, sm_90a only, and an unvalidated trust statement naming its estimates."""

import pytest

from refsim.errors import FormatRuleError, ShapeError
from refsim.gpu_model.kernels import predict
from refsim.gpu_model.specs import get_gpu
from refsim.gpu_model.trust import trust

H100 = get_gpu("h100-sxm")
F = H100.sustained_clock_hz


def test_a_large_gemm_is_wgmma_plus_promotion_per_k_block_worked_by_hand():
    # M = N = K = 4096 on 132 SMs: DeepGEMM picks BLOCK 256 x 128, cluster 1 x 2, 256 math threads
    # (tests/gpu_model/kernels/test_deepgemm_config.py); 16 x 32 = 512 blocks -> 4 rounds, 32 K blocks
    bd = predict("h100-sxm", "deepgemm-fp8", 4096, 4096, 4096)
    wgmma = 2 * 256 * 128 * 128 / (2 * 4096)        # 1024 clk: FP8 at twice the 4096 FLOP/clk/SM of FP16
    promote = (256 * 128 + 2 * 256) / 128            # 260 clk: an fma per accumulator, a mul per thread's 2 rows
    assert bd.terms["tensor"] == pytest.approx(4 * 32 * (wgmma + promote) / F, rel=1e-12)
    assert bd.bottleneck == "tensor"
    # L2: A once per N block over the cluster's 2 (multicast), B once per M block, SFA once per N block
    l2 = 4096 * 4096 * 32 / 2 + 4096 * 4096 * 16 + 4 * 4096 * 32 * 32
    assert bd.terms["l2"] == pytest.approx(l2 / H100.l2_bytes_per_s(F), rel=1e-12)
    assert bd.bytes_dram == 2 * 4096 * 4096 + 2 * 4096 * 4096 + 4 * (4096 + 32) * 32
    assert "BLOCK 256x128x128" in bd.notes and "cluster 1x2" in bd.notes


def test_a_single_round_with_one_math_warpgroup():
    # M = 128: BLOCK 64 x 64, 13 stages (the committed instantiation), 2 x 64 = 128 blocks <= 132 SMs: one round
    bd = predict("h100-sxm", "deepgemm-fp8", 128, 4096, 4096)
    per_kblock = 2 * 64 * 64 * 128 / 8192 + (64 * 64 + 2 * 128) / 128      # 128 + 34 clk
    assert bd.terms["tensor"] == pytest.approx(32 * per_kblock / F, rel=1e-12)
    assert bd.ctas == 128 and "13 stages" in bd.notes
    # BLOCK_M 16 for M = 1 still pays a 64-row wgmma (wgmma's M is 64)
    gemv = predict("h100-sxm", "deepgemm-fp8", 1, 4096, 4096)
    assert "BLOCK 16x32x128" in gemv.notes
    assert gemv.terms["tensor"] == pytest.approx(32 * (2 * 64 * 32 * 128 / 8192 + (16 * 32 + 256) / 128) / F,
                                                 rel=1e-12)


def test_only_sm_90_runs_it_and_its_shape_rules_name_the_reason():
    with pytest.raises(FormatRuleError, match="sm_90a.*a100-80gb is 8.0"):
        predict("a100-80gb", "deepgemm-fp8", 128, 4096, 4096)
    with pytest.raises(ShapeError, match="multiple of 128"):
        predict("h100-sxm", "deepgemm-fp8", 128, 4096, 4000)
    with pytest.raises(ShapeError, match="multiple of 8"):
        predict("h200", "deepgemm-fp8", 128, 4100, 4096)


def test_its_trust_says_unvalidated_and_names_its_estimates():
    statement = trust("h100-sxm", "deepgemm-fp8", 128, 4096, 4096).statement
    assert statement.startswith("unvalidated:")
    assert "deepgemm-fp8: wgmma rate" in statement and "deepgemm-fp8: promotion" in statement
