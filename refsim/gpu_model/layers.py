"""A kernel over a set of linear layers: their summed latency, the cuBLAS FP16 baseline and the
share of the plain roofline reached (what ``refsim predict`` prints, computed here, not in the CLI).

    predict_layers(gpu, kernel, m, layers)        layers: [(name, n, k, count), ...] or a model name
      for each layer:  t   = predict(gpu, kernel, m, n, k, ...)            (the kernel)
                       t16 = predict(gpu, "cublas-fp16", m, n, k, ...)     (the FP16 baseline)
                       r   = dram_roofline_s(bytes, flops, gpu)            (plain roofline of the kernel)
      totals:          Σ count · layers_per_block · (t, t16, r) and every term
      speedup = Σ t16 / Σ t ;  fraction_of_roofline = Σ r / Σ t

A built-in model (``shapes.MODELS``) contributes its per-block linears times its layer count.
"""

from __future__ import annotations

from dataclasses import dataclass

from refsim._validate import require_fields
from refsim.errors import FormatRuleError
from refsim.gpu_model.evaluate import predict
from refsim.gpu_model.roofline import Breakdown, dram_roofline_s
from refsim.gpu_model.shapes import get_model
from refsim.gpu_model.specs import GPUS, get_gpu

__all__ = ["LayerResult", "LayerSum", "predict_layers"]


@dataclass(frozen=True)
class LayerResult:
    """One layer shape: its name, N, K, how many times it runs (count per block × blocks) and its
    prediction."""

    name: str
    n: int
    k: int
    count: int
    breakdown: Breakdown

    def __post_init__(self) -> None:
        require_fields(self)


@dataclass(frozen=True)
class LayerSum:
    """Totals over a set of layers (seconds). ``slowest`` is the layer whose total (latency × count)
    is largest; its bottleneck is the set's."""

    gpu: str
    kernel: str
    m: int
    latency_s: float
    cublas_fp16_s: float
    roofline_s: float
    terms: dict
    layers: tuple
    slowest: LayerResult

    def __post_init__(self) -> None:
        require_fields(self)

    @property
    def speedup_vs_cublas_fp16(self) -> float:
        return self.cublas_fp16_s / self.latency_s

    @property
    def fraction_of_roofline(self) -> float:
        """Plain-roofline time / predicted time (above 1 when a warm L2 beats the DRAM roof)."""
        return self.roofline_s / self.latency_s

    @property
    def bottleneck(self) -> str:
        return self.slowest.breakdown.bottleneck


def _layer_list(layers) -> list:
    if isinstance(layers, str):
        spec = get_model(layers)
        return [(name, n, k, count * spec.layers) for name, n, k, count in spec.linears]
    if not isinstance(layers, (list, tuple)) or not layers:
        raise FormatRuleError(f"layers: must be a model name or a non-empty list of (name, n, k, count); "
                              f"got {type(layers).__name__}")
    out = []
    for i, item in enumerate(layers):
        if not isinstance(item, (list, tuple)) or len(item) != 4 or not isinstance(item[0], str):
            raise FormatRuleError(f"layers[{i}]: must be (name, n, k, count); got {item!r:.80}")
        count = item[3]
        if type(count) is not int or count < 1:
            raise FormatRuleError(f"layers[{i}]: count must be an int >= 1; got {count!r:.80}")
        out.append(tuple(item))
    return out


def predict_layers(gpu, kernel: str, m: int, layers, bits: int | None = None, group_size: int | None = None, *,
                   clock="sustained", ecc: str | None = None, cache: str = "cold",
                   timing: str = "kernel") -> LayerSum:
    """``kernel`` at batch ``m`` over ``layers`` (a built-in model name, e.g. "llama-2-7b", or a
    list of ``(name, n, k, count)``) on ``gpu``, with the cuBLAS FP16 baseline and the plain roofline
    under the same conditions (module docstring). Arguments as
    :func:`refsim.gpu_model.evaluate.predict`; a refused layer raises its rule."""
    g = get_gpu(gpu)
    gpu = g.name if GPUS.get(g.name) is g else g          # a table GPU by name (cached), a file's spec as is
    items = _layer_list(layers)
    cond = {"clock": clock, "ecc": ecc, "cache": cache, "timing": timing}
    total = base = roof = 0.0
    terms: dict = {}
    results = []
    slowest = None
    for name, n, k, count in items:
        bd = predict(gpu, kernel, m, n, k, bits, group_size, **cond)
        fp = predict(gpu, "cublas-fp16", m, n, k, **cond)
        total += bd.latency_s * count
        base += fp.latency_s * count
        roof += dram_roofline_s(bd.bytes_dram, bd.flops, g) * count
        for key, v in bd.terms.items():
            terms[key] = terms.get(key, 0.0) + v * count
        layer = LayerResult(name, n, k, count, bd)
        results.append(layer)
        if slowest is None or bd.latency_s * count > slowest.breakdown.latency_s * slowest.count:
            slowest = layer
    return LayerSum(g.name, slowest.breakdown.kernel, slowest.breakdown.m, total, base, roof, terms,
                    tuple(results), slowest)
