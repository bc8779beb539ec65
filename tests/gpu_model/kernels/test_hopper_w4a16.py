"""refsim's W4A16 wgmma kernel model: the consumer loop's PTX counts, the per-k-tile conversion and wgmma
worked by hand (serial inside a CTA, shared by the 2 CTAs an SM holds), the L2 traffic of 64 x 64 tiles,
sm_90a only, and an unvalidated trust statement naming its estimates."""

import pytest

from refsim.errors import FormatRuleError, ShapeError
from refsim.gpu_model.kernels import hopper_w4a16, predict
from refsim.gpu_model.specs import get_gpu
from refsim.gpu_model.trust import trust

H100 = get_gpu("h100-sxm")
F = H100.sustained_clock_hz


def test_the_consumer_loop_counts_are_the_kernels_four_words_per_k_tile():
    # per thread per k-tile: 4 packed words, each 2 sub + 2 fma + 4 mul f16x2 (the converter and the scale);
    # issue-only: 4 ld.shared + 2 ld.global (scales), 4 wgmma + fence/commit/wait, 2 mbarrier, 2 bra
    issue, alu, fp16 = hopper_w4a16.ktile_mix()
    assert (issue, alu, fp16) == (128, 128 - 32 - (6 + 7 + 2 + 2), 4 * 8)


def test_a_gemv_is_one_ctas_chain_of_conversion_then_wgmma_per_k_tile():
    # N = K = 4096, M = 1: 64 CTAs (< 132 SMs), one per SM; a k-tile: conversion max(128 issue, 79 ALU x 2 clk
    # (16 ALU lanes per SMSP), 32 f16x2 x 1 clk) = 158 clk, then 2 x 64^3 / 4096 = 128 clk of wgmma
    bd = predict("h100-sxm", "hopper-w4a16", 1, 4096, 4096)
    assert bd.bottleneck == "latency" and bd.ctas == 64
    assert bd.terms["latency"] == pytest.approx(64 * (158 + 128) / F, rel=1e-12)


def test_two_resident_ctas_share_the_smsp_alu_and_the_tensor_cores():
    # M = 4096: 64 x 64 = 4096 CTAs, 2 per SM (128 registers x 256 threads), the busiest SM runs 32 of them
    # in 16 pairs; a pair's k-tile = max(2 x 128 tensor, 2 x 158 ALU, 158 + 128 chain) = 316 clk
    bd = predict("h100-sxm", "hopper-w4a16", 4096, 4096, 4096)
    assert bd.terms["alu"] == pytest.approx(16 * 64 * 316 / F, rel=1e-12)
    # X (2 B) once per 64-column tile, W (0.5 B) and scales once per 64-row tile: L2-bound
    l2 = 2 * 4096 * 4096 * 64 + (4096 * 4096 / 2 + 2 * 4096 * 32) * 64
    assert bd.terms["l2"] == pytest.approx(l2 / H100.l2_bytes_per_s(F), rel=1e-12)
    assert bd.bottleneck == "l2" and "2 CTAs/SM (regs)" in bd.notes


def test_only_sm_90_runs_it_and_its_shape_rules_name_the_reason():
    with pytest.raises(FormatRuleError, match="sm_90a.*rtx4090 is 8.9"):
        predict("rtx4090", "hopper-w4a16", 1, 4096, 4096)
    with pytest.raises(ShapeError, match="multiple of 64"):
        predict("h100-sxm", "hopper-w4a16", 1, 4000, 4096)
    with pytest.raises(ShapeError, match="multiple of 128"):
        predict("h100-sxm", "hopper-w4a16", 1, 4096, 4032)
    with pytest.raises(FormatRuleError, match="groups of 128"):
        predict("h100-sxm", "hopper-w4a16", 1, 4096, 4096, group_size=64)


def test_its_trust_says_unvalidated_and_names_its_estimates():
    statement = trust("h200", "hopper-w4a16", 16, 4096, 4096).statement
    assert statement.startswith("unvalidated:")
    assert "hopper-w4a16: conversion" in statement and "hopper-w4a16: wgmma rate" in statement
