"""Quantize a whole FP safetensors model layer by layer, on any executor.

    model (FP safetensors) + text ──► refsim.io.calibrate: the model's NumPy forward, block by block
         │                                (refsim.io.model_folder: Llama-style decoders, BERT-style encoders);
         │                                each group of linears quantized on the outputs of the
         │                                already-quantized layers before it (sequential)
         ▼
    quantize_layer_job(model path, layer name, X, options, W)   ← runs on a worker; pure function
         │  W (K, N) → method → format layer (GPTQ/AWQ/Any-Precision/Atom/2/4/16 tensors)
         │  in-sample error ‖XW − XŴ‖/‖XW‖ with Ŵ read back from the packed tensors
         ▼
    parent: results → model.safetensors (or shards) + config.json + tokenizer files + quality.json
            (held-out text: per-layer error and perplexity / embedding cosine at the model output)

Models without a forward are quantized one layer at a time from the file (RTN, AWQ's quantizer step
without the searches, or per-layer inputs from a safetensors file).

Methods and the checkpoint each writes:

    rtn            GPTQ checkpoint; plain round-to-nearest (refsim.quant.rtn, no clip search),
                   ``gptq_asym`` / ``gptq_sym`` scheme (fp32 arithmetic, as AutoGPTQ)
    gptq           GPTQ checkpoint; refsim.quant.gptq.gptq_quantize with H = 2/n XᵀX
    awq            AutoAWQ GEMM checkpoint; with a forward, AutoAWQ's scale and clip searches
                   (refsim.quant.awq via refsim.io.calibrate.run_awq), then AutoAWQ's quantizer step
                   on the fp16 weights (``uniform.quantize(..., scheme="awq")`` in fp16) and the
                   integers ``WQLinear_GEMM.from_linear`` packs (:func:`awq_intweight`)
    anyprec        Any-Precision; seed k-means + upscaling (refsim.quant.upscale) with the
                   isotropic-gradient Fisher proxy (refsim.quant.fisher.expected_isotropic_fisher);
                   without calibration inputs every weight counts equally (plain k-means)
    atom           refsim's Atom container; refsim.quant.atom.quantize_layer (reorder, GPTQ INT4
                   body, INT8 keeper)
    mixed_2_4_16   refsim's 2/4/16 container; refsim.quant.mixed_2_4_16.quantize + formats pack

``to="bnb-nf4"`` / ``"bnb-fp4"`` (method rtn, no calibration): bitsandbytes' own 4-bit quantization of each
weight in the model dtype (refsim.io.bnb_4bit: ``quantize_4bit`` with blocksize 64, ``double_quant`` for
``bnb_4bit_use_double_quant``), written as transformers' ``save_pretrained`` lays the folder out.

Memory: a worker holds one layer (W, X, the method's work arrays); the parent holds the packed
results until the single ``model.safetensors`` is written (the size of the quantized checkpoint)
plus the tensors passed through unchanged (embeddings, norms, biases).
"""

from __future__ import annotations

import json
import os
import time
import tracemalloc
from concurrent.futures import Executor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from refsim._validate import (native_contiguous, require_bool, require_callable, require_choice, require_dtype, require_fields,
                              require_finite, require_float_array, require_instance, require_int, require_ndim,
                              require_path, require_shape)
from refsim.errors import DtypeError, FormatRuleError, NonFiniteError, ShapeError
from refsim.formats import awq as awq_format
from refsim.formats import gptq as gptq_format
from refsim.formats import mixed_2_4_16 as m2416
from refsim.formats import uniform
from refsim.io.layer_select import DEFAULT_IGNORE, emitted_ignore, select_layers
from refsim.io.readers import open_unquantized
from refsim.io.containers import AnyPrecisionLayer, AtomLayerFile, FPReader, Mixed2416Layer, write_anyprec, write_refsim
from refsim.io.gptq import AWQLayer, GPTQLayer, write_awq, write_gptq
from refsim.io.output import atomic_output_dir
from refsim.quant import mixed_2_4_16 as q2416

__all__ = ["METHODS", "OUTPUT_FORMATS", "BNB_TARGETS", "DEFAULT_IGNORE", "QuantizeOptions", "LayerResult", "quantize_layer_job",
           "awq_intweight", "quantize_model", "relative_output_error",
           "emitted_ignore"]

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
    outlier_ratio: float = q2416.DEFAULT_OUTLIER_RATIO
    measure_memory: bool = True

    def __post_init__(self):
        require_fields(self)  # Python scalars and strs, whatever NumPy scalars came in
        require_choice("method", self.method, METHODS)
        require_choice("checkpoint_format", self.checkpoint_format, gptq_format.CHECKPOINT_FORMATS)


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

    def __post_init__(self):
        require_fields(self)  # Python scalars and strs, whatever NumPy scalars came in

    def summary(self) -> dict:
        d = asdict(self)
        d.pop("layer")
        return d


def relative_output_error(X: np.ndarray, W: np.ndarray, W_hat: np.ndarray) -> float:
    """``‖X W − X Ŵ‖_F / ‖X W‖_F`` in float64; X (T, K), W and Ŵ (K, N), float16/32/64, any layout
    (BLAS gets C-order float64 copies: the same bits for every layout on one machine).

    NaN/Inf entries, or ``X W = 0``, give a NaN or Inf result (the ratio is undefined there)."""
    X = require_ndim("X", require_float_array("X", X), 2)
    W = require_ndim("W", require_float_array("W", W), 2)
    W_hat = require_shape("W_hat", require_float_array("W_hat", W_hat), W.shape)
    if X.shape[1] != W.shape[0]:
        raise ShapeError(f"X: shape must be (T, K={W.shape[0]}) to multiply W {W.shape}; got {X.shape}")
    X64, W64, W_hat64 = (native_contiguous(a, np.float64) for a in (X, W, W_hat))  # BLAS sees one layout
    ref = X64 @ W64
    return float(np.linalg.norm(ref - X64 @ W_hat64) / np.linalg.norm(ref))


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


def _awq_layer(name: str, W: np.ndarray, o: QuantizeOptions):
    """AutoAWQ's quantizer step: an AWQLayer (GEMM words) at 4 bits; at other widths (written as
    compressed-tensors or GPTQ) a GPTQ v2 layer holding the same codes, zeros and fp16 scales."""
    w16 = W.astype(np.float16)  # AutoAWQ: linear_layer.half()
    k = w16.shape[0]
    gs = k if o.group_size is None else o.group_size
    uq = uniform.quantize(w16, o.bits, scheme="awq", granularity="group", group_size=gs)
    if o.bits != 4:
        g_idx = gptq_format.default_g_idx(k, o.group_size)
        ck = gptq_format.pack(uq.q, uq.scale.astype(np.float16), uq.zero, o.bits, g_idx=g_idx, checkpoint_format="gptq_v2")
        return GPTQLayer(name, ck, o.group_size, False, False)
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

        m = q2416.quantize(W, hessian(X), alpha=o.alpha, outlier_ratio=o.outlier_ratio)
        return Mixed2416Layer(name, m2416.pack(m), k)
    raise FormatRuleError(f"method: must be one of {list(METHODS)}; got {o.method!r}")  # pragma: no cover


def quantize_layer_job(model: str, name: str, X: np.ndarray | None, options: QuantizeOptions,
                       W: np.ndarray | None = None) -> LayerResult:
    """Quantize the layer ``name`` of the FP model at ``model`` (a path every worker can read).

    Reads only that layer's weight (memory-mapped file) -- or takes ``W`` float (K, N) when given
    (sequential calibration and AWQ hand over the weights they changed) --, quantizes it with ``options.method``,
    reads the result back from the packed tensors (``layer.dequantize()``) and measures the
    relative output error on ``X`` float32 (T, K) (``None``: weight error only). Pure: the same
    arguments give the same tensors bit for bit on any worker (BLAS is held to one thread inside
    the job, so the float32 summation order does not depend on the worker's thread settings). ``peak_bytes`` is the tracemalloc
    peak of the job (NumPy reports its buffers to tracemalloc), ``None`` if tracing was already on.
    """
    require_path("model", model)
    name = str(require_instance("name", name, str))
    if X is not None:
        X = require_ndim("X", require_float_array("X", X), 2)
    if W is not None:
        W = require_ndim("W", require_float_array("W", W), 2)
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
            if W is None:
                with FPReader(Path(model)) as ck:
                    W = ck.read_layer(name).W  # (K, N)
            W = W.astype(np.float32)
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
#: method -> the checkpoint it writes (``to`` may pick compressed-tensors for the uniform ones)
_WRITES = {"rtn": "gptq", "gptq": "gptq", "awq": "awq", "anyprec": "anyprec", "atom": "atom",
           "mixed_2_4_16": "mixed_2_4_16"}
OUTPUT_FORMATS = ("auto", "gptq", "awq", "compressed-tensors", "bnb-nf4", "bnb-fp4")
#: ``to`` -> the bitsandbytes 4-bit quant type it writes
BNB_TARGETS = {"bnb-nf4": "nf4", "bnb-fp4": "fp4"}


def _output_format(options: QuantizeOptions, to: str) -> str:
    to = require_choice("to", to, OUTPUT_FORMATS)
    native = _WRITES[options.method]
    if options.method == "awq" and options.bits != 4 and to in ("auto", "awq"):
        raise FormatRuleError(f"bits: AWQ GEMM checkpoints are 4-bit; got {options.bits} (use --to compressed-tensors)")
    if to in ("auto", native):
        return native
    if to == "compressed-tensors" and native in ("gptq", "awq"):
        return to
    raise FormatRuleError(f"to: method {options.method!r} writes {native}; it cannot write {to!r}")


def quantize_model(model: str | os.PathLike, out: str | os.PathLike, options: QuantizeOptions, *,
                   executor: Executor | None = None, calib: str = "auto", layers: str | None = None,
                   ignore: str | None = None, to: str = "auto", heldout: str = "corpus",
                   heldout_tokens: int | None = None, progress: Callable | None = None,
                   double_quant: bool = False) -> dict:
    """Quantize the linear layers of the FP model ``model`` into the new folder ``out``.

    ``calib``: "auto" (the built-in corpus, :data:`refsim.io.calibrate.DEFAULT_CALIB_TOKENS` tokens,
    when refsim has a forward for the model -- Llama-style decoders, BERT-style encoders --, else
    "none"), "none", "corpus:T", a UTF-8 text file ("PATH" or "PATH:T"), or a safetensors file of
    per-layer inputs (float (T, K) named by layer; no forward, no sequential calibration).
    With text, calibration is sequential (:mod:`refsim.io.calibrate`). ``layers``/``ignore``:
    regular expressions on layer names (default ignore: embeddings and ``lm_head``; "" ignores
    nothing). ``to``: "auto" (the method's format), "compressed-tensors" (rtn, gptq, awq),
    "compressed-tensors:<PRESET>" (rtn or gptq; an llm-compressor float preset, :mod:`refsim.io.ct_float_write`),
    "gguf:<TYPE>" (rtn; ``model`` a float .gguf file and ``out`` a new .gguf file,
    :mod:`refsim.io.gguf_write`): those two return their writer's summary; or "bnb-nf4" / "bnb-fp4"
    (rtn: bitsandbytes 4-bit, ``double_quant`` its double quantization; no calibration; the held-out
    figures unless ``calib`` is "none").
    ``heldout``: "corpus" or a text file, for the quality figures (per layer and model level), on
    ``heldout_tokens`` tokens (default :data:`refsim.io.calibrate.DEFAULT_HELDOUT_TOKENS`).
    ``progress(done, total, name)`` after each layer. Writes the folder atomically (config.json with
    quantization_config, the source's tokenizer and generation files, quality.json); returns the summary
    (``notes``: lines on what config.json derived and on loaders known to refuse the folder).
    ``executor``: any ``concurrent.futures.Executor`` (default: run the layers one by one here).
    """
    from threadpoolctl import threadpool_limits

    from refsim.io import calibrate
    from refsim.io.executor import SerialExecutor
    from refsim.io.model_folder import load_model, model_family

    require_path("model", model)
    require_path("out", out)
    require_instance("options", options, QuantizeOptions)
    require_choice("method", options.method, METHODS)
    executor = SerialExecutor() if executor is None else require_instance("executor", executor, Executor)
    require_instance("calib", calib, str)
    for what, v in (("layers", layers), ("ignore", ignore)):
        if v is not None:
            require_instance(what, v, str)
    require_instance("heldout", heldout, str)
    heldout_tokens = calibrate.DEFAULT_HELDOUT_TOKENS if heldout_tokens is None else \
        require_int("heldout_tokens", heldout_tokens, minimum=1)
    require_callable("progress", progress, allow_none=True)
    require_instance("to", to, str)
    double_quant = require_bool("double_quant", double_quant)
    if to in BNB_TARGETS:
        return _quantize_bnb(Path(model), Path(out), options, BNB_TARGETS[to], double_quant, calib, layers, ignore,
                             progress, heldout, heldout_tokens)
    if double_quant:
        raise FormatRuleError(f"double_quant: bitsandbytes' double quantization needs to='bnb-nf4' or 'bnb-fp4'; got to={to!r}")
    if ":" in to:                                     # a format preset: compressed-tensors:<PRESET>, gguf:<TYPE>
        return _quantize_preset(model, out, options, to, calib, layers, ignore, progress)
    fmt = _output_format(options, to)
    kind, source, tokens = calibrate.parse_calib(calib)
    model, out_path = Path(model), Path(out)
    with atomic_output_dir(out_path) as tmp:
        src = open_unquantized(model)
        all_names = src.layer_names()
        family = model_family(model, src.tensor_names())
        if calib == "auto" and (family is None or options.method == "rtn"):
            kind = "none"  # nothing to calibrate (RTN) or no forward for this model
        if kind == "none" and options.method in _NEEDS_CALIB:
            raise FormatRuleError(f"calib: method {options.method!r} needs calibration (text through the model's "
                                  f"forward, or per-layer inputs); got {calib!r}"
                                  + ("" if family else f" and refsim has no forward for {model}"))
        names = select_layers(all_names, layers, ignore, model)
        X_file = calibrate.calibration_inputs(source) if kind == "inputs" else None
        if X_file is not None:
            missing = [n for n in names if n not in X_file]
            if missing:
                raise FormatRuleError(f"calib: no calibration inputs for layer {missing[0]!r} "
                                      f"({len(missing)} layers without inputs)")
        lm = load_model(model) if (kind == "text" or family is not None) else None
        if lm is not None and layers is None:  # default: the projections of the model's blocks
            names = [n for n in names if n in set(lm.arch.linear_names())]
        if lm is not None:
            unknown = [n for n in names if n + ".weight" in lm.weights and n not in lm.arch.linear_names()]
            if kind == "text" and unknown:
                raise FormatRuleError(f"layers: {unknown[0]!r} is not a linear layer of the model's blocks "
                                      "(text calibration covers the blocks' projections; use --ignore)")
        selected = set(names)
        t0 = time.perf_counter()
        results: dict[str, LayerResult] = {}

        def submit(jobs):
            futs = [(n, executor.submit(quantize_layer_job, str(model), n, X, options, Wk)) for n, Wk, X in jobs]
            done = {}
            for n, f in futs:
                r = f.result()
                results[n] = r
                done[n] = r.layer.dequantize().astype(np.float32)
            return done

        changed: dict[str, np.ndarray] = {}
        input_scale: dict[str, np.ndarray] = {}
        W_q = None
        # one BLAS thread while jobs run (jobs in threads of this process share the setting)
        with threadpool_limits(limits=1):
            if kind == "text":
                ids = calibrate.calibration_ids(lm, source, tokens)
                if options.method == "awq":
                    W_q, changed, input_scale = calibrate.run_awq(lm, selected, ids, options.bits,
                                                                  options.group_size or 0, submit, progress)
                else:
                    W_q = calibrate.run_sequential(lm, selected, ids, submit, progress)
            else:
                for i, n in enumerate(names):
                    submit([(n, None, None if X_file is None else X_file[n])])
                    if progress is not None:
                        progress(i + 1, len(names), n)
        wall = time.perf_counter() - t0
        ordered = [results[n] for n in names]
        lays = [r.layer for r in ordered]
        quantized = {f"{n}.weight" for n in names}
        passthrough = {t: src.tensor(t) for t in src.tensor_names() if t not in quantized}
        for t, v in changed.items():  # AWQ folded its scales into these (norm weights, biases)
            passthrough[t] = v.astype(passthrough[t].dtype)
        src.close()
        unq = emitted_ignore(all_names, selected, family)
        notes = _write(tmp, fmt, options, lays, passthrough, model, unq)
        summary = {"model": str(model), "method": options.method, "format": fmt, "options": asdict(options),
                   "calib": calib, "calib_tokens": tokens if kind == "text" else None,
                   "sequential": kind == "text" and options.method != "awq",
                   "layers": [r.summary() for r in ordered], "wall_seconds": wall,
                   "max_layer_peak_bytes": max((r.peak_bytes or 0) for r in ordered), "notes": notes}
        if lm is not None:
            if W_q is None:
                W_q = dict(lm.weights)
                for r in ordered:
                    W_q[r.name + ".weight"] = np.ascontiguousarray(r.layer.dequantize().astype(np.float32).T)
            with threadpool_limits(limits=1):
                per_layer, mq = calibrate.heldout_quality(lm, W_q, [n for n in names if n + ".weight" in lm.weights],
                                                          input_scale, heldout, heldout_tokens)
            for row in summary["layers"]:
                row["heldout_rel_output_error"] = per_layer.get(row["name"])
            summary["model_quality"] = mq
        (tmp / "quality.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def _quantize_preset(model, out, options: QuantizeOptions, to: str, calib: str, layers, ignore, progress) -> dict:
    """``to`` = "compressed-tensors:<PRESET>" (refsim.io.ct_float_write: round to nearest, or GPTQ on the
    preset's grid with calibration) or "gguf:<TYPE>" (refsim.io.gguf_write): round to nearest as the library
    does, no calibration."""
    if to.lower().startswith("gguf:"):
        from refsim.io.gguf_write import parse_gguf_target as parse
        from refsim.io.gguf_write import quantize_gguf as write
    else:
        from refsim.io.ct_float_write import parse_ct_target as parse
        from refsim.io.ct_float_write import quantize_float_model as write
    target = parse(to)
    gguf = to.lower().startswith("gguf:")
    if options.method != "rtn" and (gguf or options.method != "gptq"):
        raise FormatRuleError(f"method: {to} is written by round to nearest, as its library quantizes "
                              f"(llm-compressor's presets, ggml's quantize_row_*_ref)"
                              + ("" if gguf else ", or by GPTQ on the preset's grid (llm-compressor's GPTQModifier)")
                              + f"; use 'rtn'{'' if gguf else ' or gptq'}; got {options.method!r}")
    if gguf:
        if calib not in ("auto", "none"):
            raise FormatRuleError(f"calib: {to} quantizes weights without calibration; got {calib!r}")
        return write(model, out, target, layers=layers, ignore=ignore, progress=progress)
    return write(model, out, target, layers=layers, ignore=ignore, progress=progress, method=options.method,
                 calib=calib, act_order=options.act_order)


def _quantize_bnb(model: Path, out: Path, options: QuantizeOptions, kind: str, double_quant: bool, calib: str,
                  layers: str | None, ignore: str | None, progress: Callable | None, heldout: str,
                  heldout_tokens: int) -> dict:
    """``quantize_model`` for to = bnb-nf4 / bnb-fp4: each selected weight (N, K) quantized in its own dtype by
    :func:`refsim.io.bnb_4bit.quantize_bnb_layer`, the rest passed through, config.json's
    ``quantization_config`` transformers' (:func:`refsim.io.bnb_4bit.bnb_quantization_config`); the held-out
    quality where refsim has a forward for the model, unless ``calib`` is "none"."""
    from threadpoolctl import threadpool_limits

    from refsim.io import calibrate, hf_folder
    from refsim.io.bnb_4bit import bnb_quantization_config, quantize_bnb_layer
    from refsim.io.model_folder import load_model, model_family

    if options.method != "rtn":
        raise FormatRuleError(f"method: bitsandbytes 4-bit is written by its own round to nearest (a code table, "
                              f"absmax per 64); use 'rtn'; got {options.method!r}")
    if calib not in ("auto", "none"):
        raise FormatRuleError(f"calib: bitsandbytes 4-bit quantizes weights without calibration; got {calib!r}")
    with atomic_output_dir(out) as tmp:
        src = open_unquantized(model)
        all_names = src.layer_names()
        family = model_family(model, src.tensor_names())
        names = select_layers(all_names, layers, ignore, model)
        t0 = time.perf_counter()
        tensors, rows, dtypes, deq = {}, [], set(), {}
        for i, n in enumerate(names):
            t1 = time.perf_counter()
            w = src.tensor(n + ".weight")                                     # (N, K) in the model dtype
            if w.ndim != 2:
                raise FormatRuleError(f"layers: {n!r} is not a linear layer (its weight has shape {w.shape})")
            lay = quantize_bnb_layer(n, w, kind, double_quant)
            dtypes.add(lay.dtype)
            tensors.update(lay.tensors())
            deq[n] = lay.dequantize().astype(np.float32)                     # (K, N)
            err = float(np.abs(deq[n].T - w.astype(np.float32)).max())
            rows.append(LayerResult(n, lay, lay.k, lay.n, None, err, time.perf_counter() - t1, None).summary())
            if progress is not None:
                progress(i + 1, len(names), n)
        if len(dtypes) != 1:
            raise FormatRuleError(f"{model}: bitsandbytes' config names one compute dtype; the selected weights have "
                                  f"{sorted(dtypes)}")
        quantized = {f"{n}.weight" for n in names}
        tensors.update({t: src.tensor(t) for t in src.tensor_names() if t not in quantized})
        src.close()
        unq = emitted_ignore(all_names, set(names), family)
        qc = bnb_quantization_config(kind, double_quant, dtypes.pop())
        qc["llm_int8_skip_modules"] = unq or None                        # transformers leaves these nn.Linear
        hf_folder.save_model_tensors(tmp, tensors)
        notes = hf_folder.finish(tmp, model, qc)
        summary = {"model": str(model), "method": "rtn", "format": "bitsandbytes", "options": asdict(options),
                   "calib": "none", "calib_tokens": None, "sequential": False, "layers": rows,
                   "wall_seconds": time.perf_counter() - t0, "max_layer_peak_bytes": 0, "notes": notes}
        if family is not None and calib != "none":                       # "none": no text through the model
            lm = load_model(model)
            W_q = dict(lm.weights)
            for n in names:
                if n + ".weight" in W_q:
                    W_q[n + ".weight"] = np.ascontiguousarray(deq[n].T)          # (N, K) float32
            with threadpool_limits(limits=1):
                per_layer, mq = calibrate.heldout_quality(lm, W_q, [n for n in names if n + ".weight" in lm.weights],
                                                          {}, heldout, heldout_tokens)
            for row in rows:
                row["heldout_rel_output_error"] = per_layer.get(row["name"])
            summary["model_quality"] = mq
        (tmp / "quality.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def _write(tmp: Path, fmt: str, options: QuantizeOptions, lays: list, passthrough: dict, model: Path,
           unquantized: list[str]) -> list[str]:
    """The checkpoint files of format ``fmt``, then config.json and the source's side files; returns
    :func:`refsim.io.hf_folder.finish`'s notes."""
    from refsim.io import hf_folder
    from refsim.io.compressed_tensors import ct_quantization_config
    from refsim.io.uniform import codes_of, to_ct

    if fmt == "compressed-tensors":
        dtype = next((v.dtype for k, v in passthrough.items() if v.dtype.kind == "f" and v.ndim == 2), np.float16)
        cts = [to_ct(codes_of(lay), dtype) for lay in lays]
        tensors = dict(passthrough)
        for lay in cts:
            tensors.update(lay.tensors())
        hf_folder.save_model_tensors(tmp, tensors)
        qc = ct_quantization_config(cts, unquantized)
    elif fmt == "gptq":
        write_gptq(tmp, lays, passthrough)
        qc = json.loads((tmp / "quantize_config.json").read_text())
    elif fmt == "awq":
        write_awq(tmp, lays, passthrough)
        qc = json.loads((tmp / "config.json").read_text())["quantization_config"]
        qc["modules_to_not_convert"] = unquantized or None
    elif fmt == "anyprec":
        write_anyprec(tmp, lays, passthrough)
        qc = None
    else:
        write_refsim(tmp, options.method, lays, extra_tensors=passthrough)
        qc = None
    return hf_folder.finish(tmp, model, qc)
