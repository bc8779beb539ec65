"""Kernel models: hand-computed bytes and partitions, the rules each kernel enforces, paper anchors."""

from refsim.gpu_model.kernels import predict


def test_marlin_24_is_faster_than_dense_marlin_when_memory_bound():
    d = predict("a10", "marlin", 16, 8192, 8192)
    s = predict("a10", "sparse-marlin", 16, 8192, 8192)
    assert s.bytes_dram < d.bytes_dram and s.latency_s < d.latency_s


def test_a_sparse_tile_has_half_the_warp_steps_of_a_dense_one():
    """Sparse-Marlin's ``matmul(k)`` step covers 32 dense K (``mma.sp`` m16n8k32; ``b_sh_wr_iters`` is 1
    per 64-deep tile, dense Marlin's 2), with the same 4 x 2 dequants per step: where the one-warp
    dequant -> MMA chain binds (the A10's 2 warps per SMSP), a sparse tile's issue term is exactly half a
    dense tile's of the same shape and m_blocks."""
    from refsim.gpu_model.kernels import marlin
    from refsim.gpu_model.specs import get_gpu

    g = get_gpu("a10")
    for m_blocks, (tk, tn) in ((1, (128, 128)), (2, (64, 256)), (4, (64, 256))):
        dense = marlin._kind_constants(g, g.sustained_clock_hz, 4096, 4096, None, 4.0, False, m_blocks, tk, tn)[4]
        sparse = marlin._kind_constants(g, g.sustained_clock_hz, 4096, 4096, None, 3.0, True, m_blocks, tk, tn)[4]
        assert sparse * 2 == dense, (m_blocks, sparse, dense)
