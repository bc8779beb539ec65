"""Write compressed-tensors float checkpoints as llm-compressor's presets do: FP8_DYNAMIC, FP8_BLOCK, NVFP4A16, MXFP4A16.

    refsim quantize MODEL --to compressed-tensors:<PRESET> --out OUT

    preset        format                 weights (refsim quantizer)                    input_activations (config only)
    FP8_DYNAMIC   float-quantized        e4m3, per output channel (refsim.quant.fp8)   fp8 per token, dynamic
    FP8_BLOCK     float-quantized        e4m3, 128x128 blocks (refsim.quant.fp8)       fp8 per group of 128, dynamic
    NVFP4A16      nvfp4-pack-quantized   e2m1, e4m3 per 16, fp32 global, fused groups  none (weight-only)
                                         share it (refsim.quant.ct_fp4)
    MXFP4A16      mxfp4-pack-quantized   e2m1, E8M0 per 32 (refsim.quant.ct_fp4)       none (weight-only)

The dynamic activation schemes need no tensors (the serving kernel scales each token or group at run
time), so the folder is what llm-compressor saves for the preset. Refused, with the reason
(:data:`REFUSED`): the presets whose activation scales are calibrated (FP8: static per-tensor
``input_scale``; NVFP4: ``input_global_scale``), which refsim does not model.

Bit-exactness: every linear layer's saved tensors (``weight``/``weight_packed``, ``weight_scale``,
``weight_global_scale``) and the config fields equal what llm-compressor 0.14.0.1 (compressed-tensors
0.19.0) saved for the same float32 weights (tests/io/data/ct_float_llmcompressor.npz). Weights are
quantized from their float32 values (a bf16/fp16 model widened exactly): llm-compressor's output for
the model loaded in float32; the library computing in bf16 rounds its scales differently (not
modelled). Scales are float32 (FP8), e4m3 (NVFP4) or E8M0 (MXFP4). transformers' loader casts an FP8
``weight_scale`` to the model's dtype before decompressing, so a bf16/fp16 model loads
dtype(e4m3 * dtype(scale)), not the float32 value: the summary's notes say so (:data:`FP8_SCALE_NOTE`).

Output folder: ``model.safetensors`` (or shards) with the quantized layers and every other tensor of the
source unchanged, config.json with ``quantization_config``, the source's tokenizer files
(:mod:`refsim.io.hf_folder`), ``quality.json`` (per-layer weight error).
"""

from __future__ import annotations

import json
import time

import numpy as np

from refsim._validate import (require_bool, require_callable, require_choice, require_float_array, require_instance, require_names,
                              require_path)
from refsim.errors import FormatRuleError
from refsim.io.ct_float import CTFP4Layer, CTFP8Layer
from refsim.quant import ct_fp4
from refsim.quant import fp8 as fp8_quant
from refsim.quant import gptq_float
from refsim.quant.gptq import hessian

__all__ = ["PRESETS", "REFUSED", "FP8_SCALE_NOTE", "parse_ct_target", "quantize_float_layers", "quantize_float_model"]

_DYNAMIC = {"actorder": None, "block_structure": None, "dynamic": True, "num_bits": 8, "observer": None,
            "observer_kwargs": {}, "scale_dtype": None, "symmetric": True, "type": "float", "zp_dtype": None}
#: preset -> (layer kind, the weights' strategy, the config's input_activations), as llm-compressor 0.14.0.1 saves it
PRESETS: dict[str, tuple[str, str, dict | None]] = {
    "FP8_DYNAMIC": ("fp8", "channel", {**_DYNAMIC, "group_size": None, "strategy": "token"}),
    "FP8_BLOCK": ("fp8", "block", {**_DYNAMIC, "group_size": 128, "strategy": "group"}),
    "NVFP4A16": ("nvfp4", "tensor_group", None),
    "MXFP4A16": ("mxfp4", "group", None),
}
#: presets refsim does not write, and why
REFUSED: dict[str, str] = {
    "FP8": "its static per-tensor input_scale is calibrated on activations, which refsim does not model "
           "(FP8_DYNAMIC and FP8_BLOCK scale activations at run time)",
    "NVFP4": "its input_global_scale is calibrated on activations, which refsim does not model (NVFP4A16 is "
             "the weight-only preset)",
}
_FP8_PRESET = {"channel": "FP8_DYNAMIC", "block": "FP8_BLOCK"}
#: what an FP8 folder of a bf16/fp16 model does in transformers' loader (tests/io/load_float_checkpoints.py)
FP8_SCALE_NOTE = ("note: FP8 weight_scale is float32 (llm-compressor's values for the model loaded in float32); "
                  "transformers 5.17 + compressed-tensors 0.19 load it in the model's dtype ({dtype}), rounding each "
                  "scale once: the loaded weights are {dtype}(e4m3 * {dtype}(scale)), not refsim's float32 "
                  "dequantize() (the NVFP4/MXFP4 presets load bit for bit)")


def parse_ct_target(to: str) -> str:
    """The preset of a ``compressed-tensors:<PRESET>`` target (case-insensitive), one of :data:`PRESETS`;
    :class:`FormatRuleError` naming the reason for a refused preset."""
    require_instance("to", to, str)
    head, _, preset = to.partition(":")
    if head.lower() != "compressed-tensors" or not preset:
        raise FormatRuleError(f"to: a compressed-tensors float target is 'compressed-tensors:<PRESET>'; got {to!r}")
    preset = preset.upper()
    if preset in REFUSED:
        raise FormatRuleError(f"to: refsim does not write the {preset} preset: {REFUSED[preset]}; got {to!r}")
    return require_choice("to (compressed-tensors preset)", preset, tuple(PRESETS))


def quantize_float_layers(weights: dict[str, np.ndarray], preset: str, model_layers: list[str] | None = None) -> list:
    """Quantize ``weights`` (layer name -> float32 (K, N), finite) as llm-compressor's ``preset`` does:
    :class:`refsim.io.ct_float.CTFP8Layer` or :class:`refsim.io.ct_float.CTFP4Layer` records in the order
    given. NVFP4A16 gives each fused group (:func:`refsim.quant.ct_fp4.fused_groups` of ``model_layers``,
    every linear of the model; default: the names of ``weights``) one global scale; a group the model
    has in full but ``weights`` holds in part (q_proj without k_proj, ...) is refused, as llm-compressor
    asserts."""
    require_instance("weights", weights, dict)
    preset = require_choice("preset", preset, tuple(PRESETS))
    names = require_names("weights (keys)", list(weights))
    model_layers = names if model_layers is None else require_names("model_layers", model_layers)
    kind, strategy, _ = PRESETS[preset]
    gscale = _global_scales(weights, preset, model_layers)
    out = []
    for n in names:
        W = weights[n]
        if kind == "fp8":
            t = fp8_quant.checkpoint_tensors(fp8_quant.quantize_weight(W, _FP8_PRESET[strategy]))
            out.append(CTFP8Layer(n, t["weight"], t["weight_scale"], strategy))
        else:
            packed, scale, glob = ct_fp4.quantize_weight(W, kind, gscale.get(n))
            out.append(CTFP4Layer(n, kind, packed, scale, glob))
    return out


def _global_scales(weights: dict[str, np.ndarray], preset: str, model_layers: list[str]) -> dict[str, np.ndarray]:
    """NVFP4A16: each fused group's shared global scale float32 (1,) by layer name (from the original weights);
    other presets: {}. A group held in part is refused, as llm-compressor asserts."""
    gscale: dict[str, np.ndarray] = {}
    if PRESETS[preset][0] == "nvfp4":
        for group in ct_fp4.fused_groups(model_layers):
            have = [n for n in group if n in weights]
            if have and len(have) < len(group):
                raise FormatRuleError(f"layers: NVFP4 fused layers {group} share one global scale; quantize all of "
                                      f"them or none (llm-compressor asserts); got {have}")
            if have:
                amax = max(float(np.abs(require_float_array(n, weights[n])).max()) for n in group)
                for n in group:
                    gscale[n] = ct_fp4.global_scale(amax)
    return gscale


def _layer(name: str, preset: str, r: gptq_float.GPTQFloatResult, act_order: bool):
    """The CTFP8Layer / CTFP4Layer record of a GPTQ result (config actorder "weight" with act-order)."""
    kind, strategy, _ = PRESETS[preset]
    t = r.tensors()
    actorder = "weight" if act_order else None
    if kind == "fp8":
        return CTFP8Layer(name, t["weight"], t["weight_scale"], strategy, actorder)
    return CTFP4Layer(name, kind, t["weight_packed"], t["weight_scale"], t.get("weight_global_scale"), actorder)


def _gptq_layer(name: str, W: np.ndarray, X: np.ndarray, preset: str, gscale, act_order: bool):
    """(record, W_hat float32 (K, N)) of GPTQ on W (K, N) with the Hessian of its inputs X (T, K)."""
    r = gptq_float.gptq_quantize_float(W, hessian(X), preset, gscale=gscale, act_order=act_order)
    return _layer(name, preset, r, act_order), r.W_hat


def quantize_float_model(model, out, preset: str, *, layers: str | None = None, ignore: str | None = None,
                         progress=None, method: str = "rtn", calib: str = "auto", act_order: bool = False) -> dict:
    """Quantize the linear layers of the FP safetensors model ``model`` into the new folder ``out`` as
    llm-compressor's ``preset`` (module docstring). ``layers``/``ignore``: regular expressions on layer
    names (default ignore: embeddings and ``lm_head``, :data:`refsim.io.layer_select.DEFAULT_IGNORE`);
    ``progress(done, total, name)`` or None. ``method`` "rtn" (``calib`` "auto" or "none") or "gptq"
    (:mod:`refsim.quant.gptq_float`, ``act_order`` llm-compressor's "weight" ordering): ``calib`` text
    through refsim's sequential forward ("auto" = the built-in corpus, "corpus:T", a text file[:T]) or a
    safetensors file of per-layer inputs (float (T, K) by layer name), as for
    :func:`refsim.io.quantize.quantize_model`. Returns the summary written to ``quality.json``."""
    from refsim.io import calibrate, hf_folder
    from refsim.io.model_folder import model_family
    from refsim.io.compressed_tensors import ct_quantization_config
    from refsim.io.output import atomic_output_dir
    from refsim.io.layer_select import emitted_ignore, select_layers
    from refsim.io.readers import open_unquantized

    model = require_path("model", model)
    require_path("out", out)
    preset = require_choice("preset", preset, tuple(PRESETS))
    for what, v in (("layers", layers), ("ignore", ignore)):
        if v is not None:
            require_instance(what, v, str)
    require_callable("progress", progress, allow_none=True)
    method = require_choice("method", method, ("rtn", "gptq"))
    act_order = require_bool("act_order", act_order)
    require_instance("calib", calib, str)
    if method == "rtn" and calib not in ("auto", "none"):
        raise FormatRuleError(f"calib: round to nearest quantizes {preset} weights without calibration; got {calib!r}")
    if method == "rtn" and act_order:
        raise FormatRuleError("act_order: only GPTQ orders the rows; got act_order=True with method 'rtn'")
    calib_kind, calib_source, calib_tokens = calibrate.parse_calib("corpus" if calib == "auto" else calib) \
        if method == "gptq" else ("none", None, 0)
    if method == "gptq" and calib_kind == "none":
        raise FormatRuleError(f"calib: GPTQ needs calibration (text through the model's forward, or per-layer "
                              f"inputs); got {calib!r}")
    t0 = time.perf_counter()
    with atomic_output_dir(out) as tmp:
        src = open_unquantized(model)
        all_names = src.layer_names()
        names = select_layers(all_names, layers, ignore, model)
        weights, dtypes = {}, set()
        for n in names:
            W = src.read_layer(n).W
            dtypes.add(np.dtype(W.dtype).name)
            weights[n] = W.astype(np.float32)                               # (K, N), exact widening
        if method == "rtn":
            lays = quantize_float_layers(weights, preset, all_names)
        else:
            lays = _gptq_layers(model, weights, names, all_names, preset, act_order,
                                (calib_kind, calib_source, calib_tokens))
        rows = []
        for i, lay in enumerate(lays):
            W = weights[lay.name]
            err = np.abs(lay.dequantize().astype(np.float32) - W)
            rows.append({"name": lay.name, "k": int(lay.k), "n": int(lay.n), "max_abs_weight_error": float(err.max())})
            if progress is not None:
                progress(i + 1, len(lays), lay.name)
        quantized = {f"{n}.weight" for n in names}
        src_tensor_names = src.tensor_names()
        tensors = {t: src.tensor(t) for t in src_tensor_names if t not in quantized}
        src.close()
        for lay in lays:
            tensors.update(lay.tensors())
        hf_folder.save_model_tensors(tmp, tensors)
        family = model_family(model, src_tensor_names)
        qc = ct_quantization_config(lays, emitted_ignore(all_names, set(names), family), PRESETS[preset][2])
        notes = hf_folder.finish(tmp, model, qc)
        if PRESETS[preset][0] == "fp8" and dtypes - {"float32"}:
            notes.append(FP8_SCALE_NOTE.format(dtype="/".join(sorted(dtypes - {"float32"}))))
        summary = {"model": str(model), "method": method, "format": "compressed-tensors", "preset": preset,
                   "layers": rows, "wall_seconds": time.perf_counter() - t0, "notes": notes}
        (tmp / "quality.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def _gptq_layers(model, weights: dict, names: list[str], all_names: list[str], preset: str, act_order: bool,
                 calib: tuple) -> list:
    """GPTQ records of ``names`` in order: with per-layer inputs each layer on its own; with text, sequentially
    through refsim's forward (each group of layers sees the outputs of the quantized earlier ones)."""
    from threadpoolctl import threadpool_limits

    from refsim.io import calibrate
    from refsim.io.model_folder import load_model

    kind, source, tokens = calib
    gscale = _global_scales(weights, preset, all_names)
    records: dict = {}

    def quantize_group(jobs):
        done = {}
        for n, _, X in jobs:
            records[n], done[n] = _gptq_layer(n, weights[n], X, preset, gscale.get(n), act_order)
        return done

    if kind == "inputs":
        X_file = calibrate.calibration_inputs(source)
        missing = [n for n in names if n not in X_file]
        if missing:
            raise FormatRuleError(f"calib: no calibration inputs for layer {missing[0]!r} ({len(missing)} layers "
                                  f"without inputs)")
        for n in names:
            quantize_group([(n, None, X_file[n])])
    else:
        lm = load_model(model)
        outside = [n for n in names if n not in set(lm.arch.linear_names())]
        if outside:
            raise FormatRuleError(f"layers: {outside[0]!r} is not a linear layer of the model's blocks (text "
                                  f"calibration covers the blocks' projections; use --ignore)")
        ids = calibrate.calibration_ids(lm, source, tokens)
        with threadpool_limits(limits=1):
            calibrate.run_sequential(lm, set(names), ids, quantize_group)
    return [records[n] for n in names]
