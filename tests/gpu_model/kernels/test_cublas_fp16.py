"""The cuBLAS FP16 baseline model: bytes counted by hand from its operands, the GEMV grid, the GEMV /
tensor-core GEMM switch at M = 2, and no shape rule of its own."""

import pytest

from refsim.gpu_model.kernels import predict


@pytest.mark.parametrize("m,n,k,want", [
    (1, 4096, 4096, 2 * (4096 * 4096 + 4096 + 4096)),          # W + x + y in fp16: 33,570,816
    (64, 4096, 4096, 2 * (4096 * 4096 + 64 * 4096 + 64 * 4096)),  # W + A + C: 34,603,008
    (3, 11008, 4096, 2 * (11008 * 4096 + 3 * 4096 + 3 * 11008)),
])
def test_bytes_are_the_fp16_operands_read_once(m, n, k, want):
    assert predict("a10", "cublas-fp16", m, n, k).bytes_dram == want


def test_gemv_runs_n_over_8_ctas_on_cuda_cores_and_gemm_uses_the_tensor_cores():
    gemv = predict("a10", "cublas-fp16", 1, 4096, 4096)
    assert gemv.ctas == 4096 // 8                                 # one warp per row pair, 4 warps per CTA
    assert "tensor" not in gemv.terms and "alu" in gemv.terms
    gemm = predict("a10", "cublas-fp16", 2, 4096, 4096)
    assert "tensor" in gemm.terms and "l2" in gemm.terms


def test_any_shape_runs():
    bd = predict("a10", "cublas-fp16", 5, 4099, 4093)             # odd sizes: cuBLAS has no tile rule
    assert bd.bytes_dram == 2 * (4099 * 4093 + 5 * 4093 + 5 * 4099)
