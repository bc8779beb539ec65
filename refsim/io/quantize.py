"""Quantize a whole FP safetensors model layer by layer, on any executor.

    model (FP safetensors)                  calibration X per layer (T, K) float32
         │  FPReader: one layer's W at a time     (MiniLM inputs on real text, a file, or none)
         ▼
    quantize_layer_job(model path, layer name, X, options)     ← runs on a worker; pure function
         │  W (K, N) → method → format layer (GPTQ/AWQ/Any-Precision/Atom/2/4/16 tensors)
         │  quality: rel. output error ‖XW − XŴ‖/‖XW‖ with Ŵ read back from the packed tensors
         ▼
    parent: results in submission order → model.safetensors + config (+ quality.json)

Methods and the checkpoint each writes:

    rtn            GPTQ checkpoint; plain round-to-nearest (refsim.quant.rtn, no clip search),
                   ``gptq_asym`` / ``gptq_sym`` scheme (fp32 arithmetic, as AutoGPTQ)
    gptq           GPTQ checkpoint; refsim.quant.gptq.gptq_quantize with H = 2/n XᵀX
    awq            AutoAWQ GEMM checkpoint; AutoAWQ's quantizer step on the fp16 weights
                   (``uniform.quantize(..., scheme="awq")`` in fp16) and the integers
                   ``WQLinear_GEMM.from_linear`` packs (:func:`awq_intweight`). The activation-aware
                   scale and clip searches of AutoAWQ are not run (refsim has no model graph to
                   fold scales into): the words are those AutoAWQ writes for the same weights.
    anyprec        Any-Precision; seed k-means + upscaling (refsim.quant.upscale) with the
                   isotropic-gradient Fisher proxy (refsim.quant.fisher.expected_isotropic_fisher);
                   without calibration inputs every weight counts equally (plain k-means)
    atom           refsim's Atom container; refsim.quant.atom.quantize_layer (reorder, GPTQ INT4
                   body, INT8 keeper)
    mixed_2_4_16   refsim's 2/4/16 container; refsim.formats.mixed_2_4_16.quantize + pack

Memory: a worker holds one layer (W, X, the method's work arrays); the parent holds the packed
results until the single ``model.safetensors`` is written (the size of the quantized checkpoint)
plus the tensors passed through unchanged (embeddings, norms, biases).
"""

from __future__ import annotations

import functools
import json
import os
import re
import time
import tracemalloc
from concurrent.futures import Executor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from refsim._validate import (require_callable, require_choice, require_dtype, require_finite, require_float_array,
                              require_instance, require_int, require_ndim, require_path, require_shape)
from refsim.errors import CheckpointError, DtypeError, FormatRuleError, NonFiniteError, ShapeError
from refsim.formats import awq as awq_format
from refsim.formats import gptq as gptq_format
from refsim.formats import mixed_2_4_16 as m2416
from refsim.formats import uniform
from refsim.io.readers import open_checkpoint
from refsim.io.containers import AnyPrecisionLayer, AtomLayerFile, FPReader, Mixed2416Layer, write_anyprec, write_refsim
from refsim.io.gptq import AWQLayer, GPTQLayer, write_awq, write_gptq
from refsim.io.output import atomic_output_dir

__all__ = ["METHODS", "QuantizeOptions", "LayerResult", "quantize_layer_job", "awq_intweight",
           "quantize_model", "relative_output_error", "minilm_embedding_similarity"]

METHODS = ("rtn", "gptq", "awq", "anyprec", "atom", "mixed_2_4_16")
_NEEDS_CALIB = ("gptq", "atom", "mixed_2_4_16")


@dataclass(frozen=True)
class QuantizeOptions:
    """Per-method settings (defaults: 4-bit, group 128, asymmetric, GPTQ v2 zero convention: MiniLM already has
    groups with a zero point of 0, which v1 cannot store)."""

    method: str
    bits: int = 4
    group_size: int | None = 128
    sym: bool = False
    act_order: bool = False
    checkpoint_format: str = "gptq_v2"
    seed_bits: int = 3
    parent_bits: int = 4
    alpha: float = 0.25
    outlier_ratio: float = m2416.DEFAULT_OUTLIER_RATIO
    measure_memory: bool = True


@dataclass
class LayerResult:
    """What a job returns: the format layer (tensors) and its quality/cost numbers."""

    name: str
    layer: object
    k: int
    n: int
    rel_output_error: float | None
    max_abs_weight_error: float
    seconds: float
    peak_bytes: int | None
    notes: list = field(default_factory=list)

    def summary(self) -> dict:
        d = asdict(self)
        d.pop("layer")
        return d


def relative_output_error(X: np.ndarray, W: np.ndarray, W_hat: np.ndarray) -> float:
    """``‖X W − X Ŵ‖_F / ‖X W‖_F`` in float64; X (T, K), W and Ŵ (K, N), float16/32/64.

    NaN/Inf entries, or ``X W = 0``, give a NaN or Inf result (the ratio is undefined there)."""
    X = require_ndim("X", require_float_array("X", X), 2)
    W = require_ndim("W", require_float_array("W", W), 2)
    W_hat = require_shape("W_hat", require_float_array("W_hat", W_hat), W.shape)
    if X.shape[1] != W.shape[0]:
        raise ShapeError(f"X: shape must be (T, K={W.shape[0]}) to multiply W {W.shape}; got {X.shape}")
    ref = X.astype(np.float64) @ W.astype(np.float64)
    return float(np.linalg.norm(ref - X.astype(np.float64) @ W_hat.astype(np.float64)) / np.linalg.norm(ref))


def awq_intweight(w_fq: np.ndarray, scales: np.ndarray, zeros: np.ndarray, group_size: int) -> np.ndarray:
    """The integers AutoAWQ's ``WQLinear_GEMM.from_linear`` packs, int64 (K, N).

    ``w_fq`` float16 (K, N): the fake-quantized fp16 weights ``pseudo_quantize_tensor`` left in the
    layer; ``scales`` float16 (G, N), ``zeros`` (G, N) integer-valued. As the official code does on
    fp16 tensors, each op rounds to fp16: ``sz = fp16(z * s)``; ``round(fp16(fp16(w + sz) / s))``
    (half to even). Source: casper-hansen/AutoAWQ ``awq/modules/linear/gemm.py``
    (``from_linear``), commit d9dc8e564fed1527be2a9d8d5c74daf3823c3203.

    All three arrays must be finite, ``zeros`` integer-valued and K = G * group_size; a quotient
    that overflows fp16 (a zero scale, a huge weight) is refused (it has no integer to pack).
    """
    w_fq = require_ndim("w_fq", require_dtype("w_fq", w_fq, np.float16), 2)
    scales = require_ndim("scales", require_float_array("scales", scales), 2)
    zeros = require_shape("zeros", require_array_numeric("zeros", zeros), scales.shape)
    group_size = require_int("group_size", group_size, minimum=1)
    if scales.shape[1] != w_fq.shape[1] or scales.shape[0] * group_size != w_fq.shape[0]:
        raise ShapeError(f"scales: shape must be (K/group_size, N) = ({w_fq.shape[0]}/{group_size}, "
                         f"{w_fq.shape[1]}) for w_fq {w_fq.shape}; got {scales.shape}")
    for name, a in (("w_fq", w_fq), ("scales", scales), ("zeros", zeros)):
        require_finite(name, a)
    if zeros.size and not np.array_equal(zeros, np.rint(zeros)):
        raise FormatRuleError("zeros: must be integer-valued (AutoAWQ's zero points); got a fractional value")
    s = np.repeat(scales.astype(np.float16), group_size, axis=0)  # (K, N)
    z = np.repeat(zeros.astype(np.float16), group_size, axis=0)  # small integers: exact in fp16
    sz = (z * s).astype(np.float16)
    q = np.rint(((w_fq + sz).astype(np.float16) / s).astype(np.float16))
    if not np.isfinite(q).all():
        raise NonFiniteError("w_fq / scales: quotient must be finite in fp16 (no integer to pack); "
                             f"got {int((~np.isfinite(q)).sum())} non-finite value(s)")
    return q.astype(np.int64)


def require_array_numeric(name: str, x) -> np.ndarray:
    """An integer or floating (not bool) array."""
    from refsim._validate import require_array

    x = require_array(name, x)
    if not (np.issubdtype(x.dtype, np.integer) or np.issubdtype(x.dtype, np.floating)):
        raise DtypeError(f"{name}: dtype must be an integer or floating type; got {x.dtype}")
    return x


def _awq_layer(name: str, W: np.ndarray, o: QuantizeOptions) -> AWQLayer:
    if o.bits != 4:
        raise FormatRuleError(f"bits: AWQ GEMM checkpoints are 4-bit; got {o.bits}")
    w16 = W.astype(np.float16)  # AutoAWQ: linear_layer.half()
    k = w16.shape[0]
    gs = k if o.group_size is None else o.group_size
    uq = uniform.quantize(w16, 4, scheme="awq", granularity="group", group_size=gs)
    s16 = uq.scale.astype(np.float16)  # exact: the fp16 path returns fp16 values
    z = uq.zero
    # pseudo_quantize_tensor leaves w = (q - z) * s in the layer, fp16 ops
    w_fq = ((uq.q.astype(np.float16) - np.repeat(z, gs, axis=0).astype(np.float16)) * np.repeat(s16, gs, axis=0)
            ).astype(np.float16)
    q = awq_intweight(w_fq, s16, z, gs)
    if q.min() < 0 or q.max() > 15:
        raise FormatRuleError(f"{name}: AutoAWQ's from_linear would pack integer {int(q.min()) if q.min() < 0 else int(q.max())} "
                              "outside [0, 15] (it does not mask: neighbouring nibbles would be corrupted)")
    return AWQLayer(name, awq_format.pack(q.astype(np.uint8), s16, z.astype(np.uint8), gs))


def _gptq_layer(name: str, q, scales, zeros, g_idx, o: QuantizeOptions, sym: bool, desc_act: bool) -> GPTQLayer:
    if o.checkpoint_format == "gptq" and np.any(zeros == 0):
        raise FormatRuleError(f"{name}: a zero point of 0 cannot be stored in a v1 ('gptq') checkpoint "
                              "(AutoGPTQ's zero - 1 wraps and corrupts neighbouring zeros); "
                              "use --checkpoint-format gptq_v2")
    ck = gptq_format.pack(q, scales, zeros, o.bits, g_idx=g_idx, checkpoint_format=o.checkpoint_format)
    return GPTQLayer(name, ck, o.group_size, desc_act, sym)


def _quantize(name: str, W: np.ndarray, X: np.ndarray | None, o: QuantizeOptions):
    """The method dispatch; W float32 (K, N)."""
    k, n = W.shape
    if o.method == "rtn":
        from refsim.quant.rtn import rtn_quantize

        r = rtn_quantize(W, o.bits, scheme="gptq_sym" if o.sym else "gptq_asym", group_size=o.group_size,
                         clip_grid=None)
        uq = r.quant
        return _gptq_layer(name, uq.q, uq.scale, uq.zero, gptq_format.default_g_idx(k, o.group_size), o, o.sym, False)
    if o.method == "gptq":
        from refsim.quant.gptq import gptq_quantize, hessian

        res = gptq_quantize(W, hessian(X), o.bits, group_size=o.group_size, sym=o.sym, act_order=o.act_order)
        return _gptq_layer(name, res.q, res.scales, res.zeros, res.g_idx, o, o.sym, o.act_order)
    if o.method == "awq":
        return _awq_layer(name, W, o)
    if o.method == "anyprec":
        from refsim.quant.fisher import expected_isotropic_fisher
        from refsim.quant.upscale import seed_and_upscale

        G = np.ones((k, n), np.float32) if X is None else expected_isotropic_fisher(X, n)  # no inputs: unweighted
        model = seed_and_upscale(W, G, o.seed_bits, o.parent_bits)
        qweight, luts = model.packed()
        return AnyPrecisionLayer(name, qweight, luts, o.seed_bits)
    if o.method == "atom":
        from refsim.quant.atom import AtomConfig, quantize_layer

        cfg = AtomConfig(group_size=o.group_size or 128)
        lay = quantize_layer(W, X, cfg)
        return AtomLayerFile(name, lay.weights, lay.idx.astype(np.int64), cfg.group_size)
    if o.method == "mixed_2_4_16":
        from refsim.quant.gptq import hessian

        m = m2416.quantize(W, hessian(X), alpha=o.alpha, outlier_ratio=o.outlier_ratio)
        return Mixed2416Layer(name, m2416.pack(m), k)
    raise FormatRuleError(f"method: must be one of {list(METHODS)}; got {o.method!r}")  # pragma: no cover


def quantize_layer_job(model: str, name: str, X: np.ndarray | None, options: QuantizeOptions) -> LayerResult:
    """Quantize the layer ``name`` of the FP model at ``model`` (a path every worker can read).

    Reads only that layer's weight (memory-mapped file), quantizes it with ``options.method``,
    reads the result back from the packed tensors (``layer.dequantize()``) and measures the
    relative output error on ``X`` float32 (T, K) (``None``: weight error only). Pure: the same
    arguments give the same tensors bit for bit on any worker (BLAS is held to one thread inside
    the job, so the float32 summation order does not depend on the worker's thread settings). ``peak_bytes`` is the tracemalloc
    peak of the job (NumPy reports its buffers to tracemalloc), ``None`` if tracing was already on.
    """
    require_path("model", model)
    require_instance("name", name, str)
    if X is not None:
        X = require_ndim("X", require_float_array("X", X), 2)
    require_instance("options", options, QuantizeOptions)
    require_choice("options.method", options.method, METHODS)
    from threadpoolctl import threadpool_limits

    own_trace = options.measure_memory and not tracemalloc.is_tracing()
    if own_trace:
        tracemalloc.start()
    t0 = time.perf_counter()
    # one BLAS thread: OpenBLAS splits work differently with more threads, which changes float32
    # sums (GPTQ's updates) -- results must not depend on where the job runs; layers give the
    # parallelism instead
    try:
        with threadpool_limits(limits=1):
            with FPReader(Path(model)) as ck:
                W = ck.read_layer(name).W.astype(np.float32)  # (K, N)
            layer = _quantize(name, W, X, options)
            W_hat = layer.dequantize().astype(np.float32)
            err = None if X is None else relative_output_error(X, W, W_hat)
            max_abs = float(np.abs(W_hat - W).max())
        seconds = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1] if own_trace else None
    finally:
        if own_trace:
            tracemalloc.stop()
    return LayerResult(name, layer, W.shape[0], W.shape[1], err, max_abs, seconds, peak)


# ----------------------------------------------------------------------------------------------
# the model
# ----------------------------------------------------------------------------------------------
_SENTENCES = (
    ("A man is playing a guitar.", "Someone plays an instrument."),
    ("The weather is cold and rainy today.", "It is a wet, chilly day."),
    ("Quantized kernels must match the reference bit for bit.", "The cat sleeps on the warm mat."),
    ("Stock markets fell sharply on Monday.", "Shares dropped steeply at the start of the week."),
)


def _embedding(sentence: str, weights: dict | None = None) -> np.ndarray:
    """Unit-norm mean-pooled MiniLM embedding (float64 (384,)); FP ones are cached."""
    from refsim.data import calibration as cal

    if weights is None:
        return _fp_embedding(sentence)
    h, _ = cal.forward([101] + cal.tokenize(sentence) + [102], weights)
    e = h.mean(axis=0).astype(np.float64)
    return e / np.linalg.norm(e)


@functools.lru_cache(maxsize=32)
def _fp_embedding(sentence: str) -> np.ndarray:
    return _embedding(sentence, {})


def minilm_embedding_similarity(weights: dict[str, np.ndarray]) -> dict:
    """Model-level quality on all-MiniLM-L6-v2: cosine similarity between the FP model's and the
    quantized model's mean-pooled sentence embeddings (8 fixed sentences), and whether the
    quantized model still ranks each paraphrase pair above the unrelated pair.
    ``weights``: dequantized layers, safetensors names, (N, K) float32."""
    require_instance("weights", weights, dict)
    for k, v in weights.items():
        require_instance("weights: key", k, str)
        require_float_array(f"weights[{k!r}]", v)
    cos = []
    for a, b in _SENTENCES:
        for s in (a, b):
            cos.append(float(_embedding(s) @ _embedding(s, weights)))
    return {"embedding_cosine_mean": float(np.mean(cos)), "embedding_cosine_min": float(np.min(cos)),
            "sentences": 2 * len(_SENTENCES)}


def _is_minilm(names: list[str]) -> bool:
    return any(n.startswith("encoder.layer.0.attention.self.query") for n in names)


def calibration_inputs(spec: str, names: list[str], model: Path) -> dict[str, np.ndarray] | None:
    """Calibration activations per layer: "minilm:T" (the MiniLM inputs on T real tokens, keyed by
    layer), a safetensors file whose tensors are named by layer (float (T, K)), or "none"."""
    if spec == "none":
        return None
    if spec.startswith("minilm:"):
        t = spec[len("minilm:"):]
        if not t.isdigit() or int(t) < 1:
            raise FormatRuleError(f"calib: token count in {spec!r} must be a positive integer; got {t!r}")
        from refsim.data import calibration as cal

        if not _is_minilm(names):
            raise FormatRuleError(f"calib: 'minilm:T' needs the all-MiniLM-L6-v2 layers; {model} has other names")
        inputs = cal.layer_inputs(int(t))
        return {name[: -len(".weight")]: x for name, x in inputs.items()}
    from refsim.io.tensors import TensorFile

    with TensorFile(spec) as tf:
        return {n: tf.read(n, dtype=(np.float16, np.float32)).astype(np.float32) for n in tf.names()}


def quantize_model(model: str | os.PathLike, out: str | os.PathLike, options: QuantizeOptions, *,
                   executor: Executor | None = None, calib: str = "auto", layers: str | None = None,
                   progress: Callable | None = None) -> dict:
    """Quantize every selected linear layer of the FP model ``model`` into the new folder ``out``.

    ``layers``: regular expression on layer names (default: every 2-D ``.weight`` that has
    calibration inputs, or, without calibration, every one except embeddings). ``calib``: "auto"
    (MiniLM inputs on 256 tokens for MiniLM, else "none"), "none", "minilm:T" or a safetensors
    file. ``progress(done, total, name)`` is called after each layer. Writes the checkpoint
    atomically (temporary folder + rename) with ``quality.json`` beside it; returns the summary.
    ``executor``: any ``concurrent.futures.Executor`` (default: run the layers one by one here).
    """
    from threadpoolctl import threadpool_limits

    from refsim.io.executor import SerialExecutor

    require_path("model", model)
    require_path("out", out)
    require_instance("options", options, QuantizeOptions)
    require_choice("method", options.method, METHODS)
    executor = SerialExecutor() if executor is None else require_instance("executor", executor, Executor)
    require_instance("calib", calib, str)
    if layers is not None:
        require_instance("layers", layers, str)
    require_callable("progress", progress, allow_none=True)
    model, out_path = Path(model), Path(out)
    with atomic_output_dir(out_path) as tmp:
        src = open_checkpoint(model)
        if src.format != "fp":
            raise CheckpointError(f"{model}: quantize needs an unquantized (FP) safetensors model; got a "
                                  f"{src.format} checkpoint (use 'refsim convert')")
        all_names = src.layer_names()
        if calib == "auto":
            calib = "minilm:256" if _is_minilm(all_names) else "none"
        X = calibration_inputs(calib, all_names, model)
        if X is None and options.method in _NEEDS_CALIB:
            raise FormatRuleError(f"calib: method {options.method!r} needs calibration activations; got 'none'")
        if layers is not None:
            try:
                pat = re.compile(layers)
            except re.error as err:
                raise FormatRuleError(f"layers: must be a regular expression; got {layers!r} ({err})") from None
            names = [n for n in all_names if pat.search(n)]
        elif X is not None:
            names = [n for n in all_names if n in X]
        else:
            names = [n for n in all_names if "embed" not in n]
        if not names:
            raise FormatRuleError(f"layers: selects no layer of {model}; got {layers!r}")
        if X is not None:
            missing = [n for n in names if n not in X]
            if missing:
                raise FormatRuleError(f"calib: no calibration inputs for layer {missing[0]!r} "
                                      f"({len(missing)} layers without inputs)")
        quantized = {f"{n}.weight" for n in names}
        passthrough = {t: src.tensor(t) for t in src.tensor_names() if t not in quantized}
        src.close()

        t0 = time.perf_counter()
        # One BLAS thread in this process while jobs run: jobs in threads of this process
        # (SerialExecutor, an in-process dask cluster) share the process-wide BLAS setting. The
        # calibration inputs above are computed with the process's own setting, as everywhere else in
        # refsim (their float32 bits depend on the BLAS thread count; they are computed once, here).
        with threadpool_limits(limits=1):
            futures = [executor.submit(quantize_layer_job, str(model), n, None if X is None else X[n], options)
                       for n in names]
            results: list[LayerResult] = []
            for i, fut in enumerate(futures):
                results.append(fut.result())
                if progress is not None:
                    progress(i + 1, len(futures), names[i])
        wall = time.perf_counter() - t0
        lays = [r.layer for r in results]
        writer = {"rtn": write_gptq, "gptq": write_gptq, "awq": write_awq, "anyprec": write_anyprec}.get(options.method)
        if writer is not None:
            writer(tmp, lays, passthrough)
        else:
            write_refsim(tmp, options.method, lays, extra_tensors=passthrough)
        summary = {"model": str(model), "method": options.method, "options": asdict(options), "calib": calib,
                   "layers": [r.summary() for r in results], "wall_seconds": wall,
                   "max_layer_peak_bytes": max((r.peak_bytes or 0) for r in results)}
        if _is_minilm(all_names):
            deq = {f"{r.name}.weight": np.ascontiguousarray(r.layer.dequantize().astype(np.float32).T) for r in results}
            with threadpool_limits(limits=1):  # small products: several times faster without BLAS threads
                summary["model_quality"] = minilm_embedding_similarity(deq)
        (tmp / "quality.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary
