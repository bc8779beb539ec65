"""Layer sums (refsim.gpu_model.layers): a model's linears summed with their counts, the cuBLAS
baseline and the plain roofline under the same conditions."""

import math

import pytest

from refsim.errors import FormatRuleError, ShapeError
from refsim.gpu_model.kernels import predict
from refsim.gpu_model.layers import predict_layers
from refsim.gpu_model.roofline import dram_roofline_s
from refsim.gpu_model.shapes import get_model
from refsim.gpu_model.specs import get_gpu


def test_model_sum_is_the_sum_of_its_layers_times_their_counts():
    res = predict_layers("a10", "marlin", 16, "llama-2-7b", ecc="off")
    spec = get_model("llama-2-7b")
    want = sum(predict("a10", "marlin", 16, n, k, ecc="off").latency_s * c * spec.layers for _, n, k, c in spec.linears)
    base = sum(predict("a10", "cublas-fp16", 16, n, k, ecc="off").latency_s * c * spec.layers
               for _, n, k, c in spec.linears)
    assert math.isclose(res.latency_s, want, rel_tol=1e-12) and math.isclose(res.cublas_fp16_s, base, rel_tol=1e-12)
    assert res.speedup_vs_cublas_fp16 == res.cublas_fp16_s / res.latency_s
    assert [r.count for r in res.layers] == [c * spec.layers for *_, c in spec.linears]
    slowest = max(res.layers, key=lambda r: r.breakdown.latency_s * r.count)
    assert res.slowest is slowest and res.bottleneck == slowest.breakdown.bottleneck


def test_one_layer_roofline_fraction():
    res = predict_layers("rtx4090", "anyprec", 1, [("x", 4096, 4096, 1)], bits=3)
    bd = predict("rtx4090", "anyprec", 1, 4096, 4096, bits=3)
    assert res.latency_s == bd.latency_s
    assert res.roofline_s == dram_roofline_s(bd.bytes_dram, bd.flops, get_gpu("rtx4090"))
    assert res.fraction_of_roofline == res.roofline_s / bd.latency_s < 1.0


@pytest.mark.parametrize("layers, match", [([], "layers: must be"), ([("x", 1, 2)], r"layers\[0\]"),
                                           ([("x", 4096, 4096, 0)], "count must be"), (7, "layers: must be"),
                                           ("no-model", "model: must be one of")])
def test_bad_layer_lists_are_refused_by_name(layers, match):
    with pytest.raises(FormatRuleError, match=match):
        predict_layers("a10", "marlin", 1, layers)


def test_a_refused_layer_raises_its_rule():
    with pytest.raises(ShapeError, match="n: kernel marlin"):
        predict_layers("a10", "marlin", 32, [("ok", 4096, 4096, 1), ("bad", 4224, 4096, 1)])
