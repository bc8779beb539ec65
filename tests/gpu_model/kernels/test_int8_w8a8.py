"""The INT8 W8A8 GEMM model: bytes by hand (int8 operands, fp32 per-token and per-channel scales, fp16
output), tensor-core and epilogue terms present, and the kernel's shape rules named."""

import pytest

from refsim.errors import FormatRuleError, ShapeError
from refsim.gpu_model.kernels import predict


@pytest.mark.parametrize("m,n,k", [(16, 4096, 4096), (1, 11008, 4096), (100, 4096, 11008)])
def test_bytes_are_int8_operands_fp32_scales_and_an_fp16_output(m, n, k):
    want = n * k + m * k + 4 * (n + m) + 2 * m * n                  # 16,990,272 at (16, 4096, 4096)
    assert predict("a10", "int8-w8a8", m, n, k).bytes_dram == want


def test_the_gemm_has_tensor_l2_and_epilogue_terms():
    assert set(predict("a10", "int8-w8a8", 16, 4096, 4096).terms) == {"dram", "l2", "tensor", "alu", "launch", "tail"}


@pytest.mark.parametrize("kw,err,rule", [
    (dict(n=4096, k=4104), ShapeError, "16-byte INT8 vector loads"),
    (dict(n=4100, k=4096), ShapeError, "n8 MMA fragments"),
    (dict(n=4096, k=4096, bits=4), FormatRuleError, "bit-widths"),
])
def test_the_kernels_rules_are_named(kw, err, rule):
    with pytest.raises(err, match=rule):
        predict("a10", "int8-w8a8", 16, **kw)
