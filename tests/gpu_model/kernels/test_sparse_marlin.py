"""Kernel models: hand-computed bytes and partitions, the rules each kernel enforces, paper anchors."""

from refsim.gpu_model.kernels import predict


def test_marlin_24_is_faster_than_dense_marlin_when_memory_bound():
    d = predict("a10", "marlin", 16, 8192, 8192)
    s = predict("a10", "sparse-marlin", 16, 8192, 8192)
    assert s.bytes_dram < d.bytes_dram and s.latency_s < d.latency_s
