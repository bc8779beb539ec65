"""The AWQ W4A16 (TinyChat) model: bytes by hand (packed weights, fp16 scales and 4-bit zeros per group,
activations, outputs), the GEMV below M = 8 and split-K GEMM from 8 (computed past the trust gate),
the refusal from M = 2 and its agreement with the published rows, and the kernel's shape rules named."""

import pytest

from refsim.errors import FormatRuleError, ShapeError, UntrustedModelError
from refsim.gpu_model.kernels import predict
from refsim.gpu_model.problem import check_m, problem, solve


def _raw(gpu, m, n, k, **kw):
    """The model past the trust gate (what published.compare shows for a refused row)."""
    pb = problem(gpu, "awq-w4a16", n, k, **kw)
    return solve(pb, check_m(pb, m, trusted_only=False))


@pytest.mark.parametrize("m,group,want", [
    # N·K/2 + (K/g)·N·2.5 + 2·M·(K+N) at N = K = 4096
    (1, 128, 4096 * 4096 // 2 + 32 * 4096 * 2.5 + 2 * 1 * 8192),     # 8,732,672
    (1, 64, 4096 * 4096 // 2 + 64 * 4096 * 2.5 + 2 * 1 * 8192),      # 9,060,352
    (8, 128, 4096 * 4096 // 2 + 32 * 4096 * 2.5 + 2 * 8 * 8192),
])
def test_bytes_by_hand(m, group, want):
    assert _raw("a10", m, 4096, 4096, group_size=group).bytes_dram == want


def test_gemv_below_eight_rows_and_gemm_from_eight():
    assert predict("a10", "awq-w4a16", 1, 4096, 4096).notes == "gemv (CUDA cores)"
    seven = _raw("a10", 7, 4096, 4096)
    assert seven.notes == "gemv (CUDA cores)" and seven.ctas == 4096 // 8
    eight = _raw("a10", 8, 4096, 4096)
    assert eight.notes.startswith("gemm (tensor cores") and "tensor" in eight.terms


@pytest.mark.parametrize("m", [2, 7, 8, 128, 4096])
def test_from_batch_two_the_model_refuses_with_its_reason(m):
    with pytest.raises(UntrustedModelError, match=rf"^no trustworthy model: kernel awq-w4a16 at M = {m}: .*published"):
        predict("h100-sxm", "awq-w4a16", m, 4096, 4096)


def test_the_refusal_boundary_is_where_the_published_rows_turn_far_off():
    # every published awq-w4a16 row: refused exactly from M = 2, where the model is > 2x off; at M = 1
    # (answered) within 25 %
    from refsim.gpu_model import published
    rows = [c for c in published.compare(include_in_sample=False) if c.row.kernel == "awq-w4a16"]
    assert len(rows) == 16
    for c in rows:
        ratio = c.model / c.row.value
        if c.row.m >= 2:
            assert c.refused.startswith("no trustworthy model") and (ratio > 2 or ratio < 0.5), (c.row.id, ratio)
        else:
            assert c.refused == "" and abs(ratio - 1) < 0.25, (c.row.id, ratio)


@pytest.mark.parametrize("n,k,group,err,rule", [
    (4100, 4096, 128, ShapeError, "8 output channels per packed int32"),
    (4096, 4160, 128, ShapeError, "whole groups along K"),
    (4096, 4096, 32, FormatRuleError, "group_size"),
])
def test_the_kernels_rules_are_named(n, k, group, err, rule):
    with pytest.raises(err, match=rule):
        predict("a10", "awq-w4a16", 1, n, k, group_size=group)
