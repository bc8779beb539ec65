"""Calibration on text through the model's own NumPy forward, layer by layer, and quality on held-out text.

    text (built-in corpus or a user's file)  ──tokenizer──►  ids (B, 128)
         │ embed
         ▼
    block 0 ─ group q,k,v ─► quantize (jobs on the executor) ─► the block continues with the
         │                   quantized q,k,v: group o_proj sees their outputs ─► quantize ─► ...
         ▼  (block output computed with every quantized layer of the block)
    block 1 ...                                       ← GPTQ/RTN: sequential, as GPTQModel
                                                        (true_sequential) and llm-compressor do

    AWQ instead follows AutoAWQ: each block's group inputs come from the unquantized model; per
    block, the scale searches (refsim.quant.awq.search_scale), the scales folded into the previous
    op (norm weights or the previous linear's rows, which therefore change in the written
    checkpoint), the clip searches, then AutoAWQ's quantizer on the scaled, clipped fp16 weights.

Quality is measured on held-out text the calibration never saw (refsim.data.corpus "heldout"):
per layer ``‖X W^T / t − (X / s) Ŵ^T‖ / ‖X W^T / t‖`` with X the layer's input in the unquantized
model (s the AWQ scale folded into its input, t the one folded into its rows; 1 otherwise), and at
the model output: perplexity (decoders, next-token
cross-entropy over every position after the first of each sequence) or the cosine similarity of
mean-pooled embeddings (encoders), quantized model vs the unquantized one.
"""

from __future__ import annotations

import numpy as np

from refsim._validate import native_contiguous
from refsim.errors import FormatRuleError
from refsim.io.model_folder import LoadedModel, sequences
from refsim.quant import awq as awq_search

# run_sequential, run_awq and heldout_quality are quantize_model's steps (it validates their inputs);
# they take the model object and job callbacks it builds, so they are not listed as public API
__all__ = ["parse_calib", "calibration_inputs", "DEFAULT_CALIB_TOKENS", "DEFAULT_HELDOUT_TOKENS"]

#: calibration tokens by default: 32 sequences of 128 (GPTQModel's and AutoAWQ's defaults use 128+
#: samples; fewer tokens than a layer's K makes GPTQ fit the calibration text instead of the model)
DEFAULT_CALIB_TOKENS = 4096
DEFAULT_HELDOUT_TOKENS = 2048


def parse_calib(spec: str) -> tuple[str, str | None, int]:
    """``--calib`` → (kind, text source, tokens). kinds: "none"; "text" with source "corpus" or a
    file path; "inputs" with a safetensors path (per-layer inputs, no forward). Token counts:
    ``corpus:T``, ``PATH.txt:T``; default :data:`DEFAULT_CALIB_TOKENS`."""
    if not isinstance(spec, str) or not spec:
        raise FormatRuleError(f"calib: must be 'auto', 'none', 'corpus[:T]', a text file[:T] or a safetensors "
                              f"file of per-layer inputs; got {spec!r}")
    if spec == "none":
        return "none", None, 0
    if spec.endswith(".safetensors"):
        return "inputs", spec, 0
    src, tokens = spec, DEFAULT_CALIB_TOKENS
    head, sep, tail = spec.rpartition(":")
    if sep and tail.isdigit():
        src, tokens = head, int(tail)
        if tokens < 1:
            raise FormatRuleError(f"calib: token count in {spec!r} must be a positive integer; got {tail!r}")
    if src in ("auto", "corpus"):
        return "text", "corpus", tokens
    return "text", src, tokens


def _text(source: str, split: str) -> str:
    from refsim.data import corpus

    return corpus.text(split) if source == "corpus" else corpus.read_text(source)


def calibration_inputs(path: str) -> dict[str, np.ndarray]:
    """Per-layer calibration inputs from a safetensors file whose tensors are named by layer (float (T, K))."""
    from refsim.io.tensors import TensorFile

    with TensorFile(path) as tf:
        return {n: tf.read(n, dtype=(np.float16, np.float32)).astype(np.float32) for n in tf.names()}


def calibration_ids(lm: LoadedModel, source: str, tokens: int) -> np.ndarray:
    """(B, 128) token ids of ``tokens`` calibration tokens from ``source``."""
    return sequences(lm, _text(source, "calibration"), tokens)


def _drive(gen, on_group):
    """Run a block generator: ``on_group(names, X)`` at each yield; return the block output."""
    try:
        item = next(gen)
        while True:
            on_group(*item)
            item = next(gen)
    except StopIteration as stop:
        return stop.value


def run_sequential(lm: LoadedModel, selected: set[str], ids: np.ndarray, quantize_group, progress=None) -> dict:
    """Sequential calibration (module docstring). ``quantize_group([(name, W (K, N) float32, X (T, K))])``
    returns ``{name: W_hat (K, N)}``; returns the weights with every selected layer replaced by its
    dequantized (N, K) float32 weights."""
    W = dict(lm.weights)
    arch = lm.arch
    x = arch.embed(ids, W)
    todo = [n for n in arch.linear_names() if n in selected]
    done = 0
    for i in range(arch.n_layers):
        if done == len(todo):
            break  # later blocks hold no selected layer: their inputs are not needed
        def on_group(names, X):
            nonlocal done
            mine = [n for n in names if n in selected]
            if not mine:
                return
            X2 = X.reshape(-1, X.shape[-1])
            jobs = [(n, np.ascontiguousarray(W[n + ".weight"].T), X2) for n in mine]
            for n, W_hat in quantize_group(jobs).items():
                W[n + ".weight"] = np.ascontiguousarray(np.asarray(W_hat, np.float32).T)
                done += 1
                if progress is not None:
                    progress(done, len(todo), n)

        x = _drive(arch.block_steps(i, x, W), on_group)
    return W


def run_awq(lm: LoadedModel, selected: set[str], ids: np.ndarray, bits: int, group_size: int,
            quantize_group, progress=None) -> tuple[dict, dict, dict]:
    """AutoAWQ's pipeline (module docstring). Returns (weights with every selected layer replaced by
    its dequantized weights and the folded ops changed, the changed non-linear tensors (norms,
    biases) name -> float32, AWQ scales: ``name`` -> float16 (K,) of its input, ``name:out`` ->
    float16 (N,) its output rows were divided by)."""
    arch = lm.arch
    W16 = {n: np.asarray(v, np.float16).astype(np.float32) if v.dtype.kind == "f" else v for n, v in lm.weights.items()}
    W = dict(W16)
    x = arch.embed(ids, W16)
    changed: dict[str, np.ndarray] = {}
    input_scale: dict[str, np.ndarray] = {}  # "name" -> s of its input; "name:out" -> s its rows were divided by
    todo = [n for n in arch.linear_names() if n in selected]
    done = 0
    for i in range(arch.n_layers):
        if done == len(todo):
            break
        rec: dict[str, np.ndarray] = {}
        x_next = _drive(arch.block_steps(i, x, W16), lambda names, X: rec.update({n: X for n in names}))
        block = [n for g in arch.block_groups(i) for n in g]
        if not any(n in selected for n in block):
            x = x_next
            continue
        feats = {n: rec[n].reshape(-1, rec[n].shape[-1]).astype(np.float16) for n in block}
        searches = []
        for sc in arch.awq_scalings(i, W16):
            if not all(n in selected for n in sc["layers"]):
                continue
            X3 = rec[sc["layers"][0]]

            def forward(trial, sc=sc, X3=X3):
                Wt = {**W16, **{n + ".weight": w.astype(np.float32) for n, w in trial.items()}}
                return arch.inspect(i, sc["inspect"], X3, Wt, sc["layers"][0])

            X2 = feats[sc["layers"][0]]
            res = awq_search.search_scale(X2, {n: W16[n + ".weight"] for n in sc["layers"]}, forward, bits=bits,
                                          group_size=group_size or X2.shape[1])  # per-channel: one group of K
            searches.append((sc, res.scales))
        for sc, s in searches:                                          # apply_scale, in AutoAWQ's order
            s32 = s.astype(np.float32)
            prev = sc["prev"]
            if sc["kind"] == "norm":
                for t in (prev + ".weight", prev + ".bias"):
                    if t in W:
                        W[t] = (W[t] / s32).astype(np.float16).astype(np.float32)
                        changed[t] = W[t]
            else:
                w = W[prev + ".weight"].copy()
                w[-s.size:] = (w[-s.size:] / s32[:, None]).astype(np.float16)
                W[prev + ".weight"] = w
                if prev + ".bias" in W:
                    W[prev + ".bias"] = (W[prev + ".bias"] / s32).astype(np.float16).astype(np.float32)
                    changed[prev + ".bias"] = W[prev + ".bias"]
                if prev not in selected:
                    changed[prev + ".weight"] = w
                input_scale[prev + ":out"] = s
            for n in sc["layers"]:
                W[n + ".weight"] = (W[n + ".weight"] * s32).astype(np.float16).astype(np.float32)
                feats[n] = (feats[n].astype(np.float32) / s32).astype(np.float16)
                input_scale[n] = s
        jobs = []
        for n in block:
            if n not in selected:
                continue
            w16 = W[n + ".weight"].astype(np.float16)
            if not any(a in n for a in awq_search.AVOID_CLIP):
                gs = group_size or w16.shape[1]
                w16 = awq_search.apply_clip(w16, awq_search.search_clip(w16, feats[n], bits=bits, group_size=gs))
            jobs.append((n, np.ascontiguousarray(w16.astype(np.float32).T), None))
        for n, W_hat in quantize_group(jobs).items():
            W[n + ".weight"] = np.ascontiguousarray(np.asarray(W_hat, np.float32).T)
            done += 1
            if progress is not None:
                progress(done, len(todo), n)
        x = x_next
    return W, changed, input_scale


def _forward(lm: LoadedModel, ids: np.ndarray, W: dict, record: dict | None = None) -> np.ndarray:
    arch = lm.arch
    x = arch.embed(ids, W)
    for i in range(arch.n_layers):
        x = _drive(arch.block_steps(i, x, W), (lambda names, X: record.update({n: X for n in names}))
                   if record is not None else (lambda names, X: None))
    return arch.head(x, W)


_FP_CACHE: dict = {}


def _fp_forward(lm: LoadedModel, source: str, tokens: int, ids: np.ndarray):
    """The unquantized model's held-out forward (layer inputs, output), kept for the last model."""
    key = (id(lm), source, tokens)
    if key not in _FP_CACHE:
        _FP_CACHE.clear()
        rec: dict[str, np.ndarray] = {}
        out = _forward(lm, ids, lm.weights, rec)
        _FP_CACHE[key] = (lm, rec, out)  # lm held so its id stays unique while cached
    return _FP_CACHE[key][1], _FP_CACHE[key][2]


def _perplexity(logits: np.ndarray, ids: np.ndarray) -> float:
    lg = logits[:, :-1].astype(np.float64)                              # (B, L-1, V) predicts ids[:, 1:]
    lg -= lg.max(axis=-1, keepdims=True)
    logp = lg - np.log(np.exp(lg).sum(axis=-1, keepdims=True))
    nll = -np.take_along_axis(logp, ids[:, 1:, None], axis=-1).mean()
    return float(np.exp(nll))


def heldout_quality(lm: LoadedModel, W_q: dict, layers: list[str], input_scale: dict, source: str = "corpus",
                    tokens: int = DEFAULT_HELDOUT_TOKENS) -> tuple[dict, dict]:
    """(per-layer held-out relative output error, model-level figures) for the quantized weights W_q
    (name -> (N, K) float32, every other tensor as in the model)."""
    ids = sequences(lm, _text(source, "heldout"), tokens)
    rec, out_fp = _fp_forward(lm, source, tokens, ids)
    out_q = _forward(lm, ids, W_q)
    per_layer = {}
    for n in layers:
        X = native_contiguous(rec[n].reshape(-1, rec[n].shape[-1]), np.float64)  # BLAS sees one layout
        ref = X @ native_contiguous(lm.weights[n + ".weight"], np.float64).T
        if n + ":out" in input_scale:                                   # AWQ divided this layer's rows
            ref = ref / native_contiguous(input_scale[n + ":out"], np.float64)
        s = input_scale.get(n)
        Xq = X if s is None else X / native_contiguous(s, np.float64)
        W_qn = native_contiguous(W_q[n + ".weight"], np.float64).T
        per_layer[n] = float(np.linalg.norm(ref - Xq @ W_qn) / np.linalg.norm(ref))
    if lm.family == "decoder":
        model = {"metric": "perplexity", "heldout_tokens": int(ids.size), "fp": _perplexity(out_fp, ids),
                 "quantized": _perplexity(out_q, ids)}
    else:
        a = native_contiguous(out_fp, np.float64)
        b = native_contiguous(out_q, np.float64)
        cos = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
        model = {"metric": "embedding_cosine", "heldout_tokens": int(ids.size), "sequences": int(ids.shape[0]),
                 "mean": float(cos.mean()), "min": float(cos.min())}
    return per_layer, model
