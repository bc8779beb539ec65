"""The AWQ W4A16 (TinyChat) model: bytes by hand (packed weights, fp16 scales and 4-bit zeros per group,
activations, outputs), the GEMV below M = 8 and split-K GEMM from 8 with the published-rows caveat
said where it applies, and the kernel's shape rules named."""

import pytest

from refsim.errors import FormatRuleError, ShapeError
from refsim.gpu_model.kernels import predict


@pytest.mark.parametrize("m,group,want", [
    # N·K/2 + (K/g)·N·2.5 + 2·M·(K+N) at N = K = 4096
    (1, 128, 4096 * 4096 // 2 + 32 * 4096 * 2.5 + 2 * 1 * 8192),     # 8,732,672
    (1, 64, 4096 * 4096 // 2 + 64 * 4096 * 2.5 + 2 * 1 * 8192),      # 9,060,352
    (8, 128, 4096 * 4096 // 2 + 32 * 4096 * 2.5 + 2 * 8 * 8192),
])
def test_bytes_by_hand(m, group, want):
    assert predict("a10", "awq-w4a16", m, 4096, 4096, group_size=group).bytes_dram == want


def test_gemv_below_eight_rows_and_the_caveat_only_above_batch_one():
    assert predict("a10", "awq-w4a16", 1, 4096, 4096).notes == "gemv (CUDA cores)"
    seven = predict("a10", "awq-w4a16", 7, 4096, 4096)
    assert seven.notes.startswith("gemv (CUDA cores); known far off") and seven.ctas == 4096 // 8
    eight = predict("a10", "awq-w4a16", 8, 4096, 4096)
    assert eight.notes.startswith("gemm (tensor cores") and "tensor" in eight.terms


@pytest.mark.parametrize("n,k,group,err,rule", [
    (4100, 4096, 128, ShapeError, "8 output channels per packed int32"),
    (4096, 4160, 128, ShapeError, "whole groups along K"),
    (4096, 4096, 32, FormatRuleError, "group_size"),
])
def test_the_kernels_rules_are_named(n, k, group, err, rule):
    with pytest.raises(err, match=rule):
        predict("a10", "awq-w4a16", 1, n, k, group_size=group)
