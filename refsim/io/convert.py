"""Checkpoint conversions, layer by layer, all-or-nothing.

    source                           --to                what happens per layer
    gptq/awq/compressed-tensors/     marlin              4-bit symmetric, group 128 or per-channel, K % 128,
      marlin                                             N % 256: the codes repacked (refsim.formats.marlin.pack),
                                                         fp16 scales kept (refused when a bf16 scale is not
                                                         exactly an fp16 value); act-order through <L>.perm.
                                                         Otherwise refused with the reason, unless
                                                         ``requantize``: the source's dequantized weights are
                                                         re-quantized with Marlin's symmetric scheme and the
                                                         added error reported per layer.
    any of those                     gptq-v2 / gptq-v1   codes, zeros, g_idx and scales kept (v1 refused when
                                                         a zero point is 0; a v1 source whose zero field
                                                         overflowed is refused: its true zeros are gone)
    any of those                     awq                 4-bit, no act-order: AutoAWQ GEMM words
    any of those                     compressed-tensors  pack-quantized, signed codes, scales in their dtype,
                                                         ``weight_g_idx`` for act-order
    gptq                             qigen               qweight re-blocked by refsim.formats.qigen.pack (bits
                                                         2/3/4; act-order refused)
    fp                               anyprec             the quantize pipeline with method "anyprec"
    fp8 (DeepSeek-style blocks)      compressed-tensors  float-quantized "block": the same e4m3 bytes, weight_scale =
                                                         weight_scale_inv (float32), FP8_BLOCK's dynamic activations
    fp8, compressed-tensors fp8      fp8-block           DeepSeek-style weight + weight_scale_inv (block strategy,
      block (float32 scales)                             float32 scales; other strategies and scale dtypes refused)
    compressed-tensors float         compressed-tensors  rewritten as it is (fp8, nvfp4, mxfp4)
    float layers to integer targets, nvfp4/mxfp4 to anything else, and every GGUF source: refused with the reason

No conversion re-rounds a code or a scale (refsim.io.uniform); tensors that are not part of a
converted layer (embeddings, norms, biases) are copied unchanged, and the output folder gets the
source's config.json (with the target's quantization_config) and tokenizer files
(refsim.io.hf_folder). Round trips are bit-identical (tests/io): v1 → v2 → v1, gptq → qigen → gptq,
compressed-tensors → marlin → compressed-tensors, fp8 → compressed-tensors → fp8-block.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from refsim._validate import (native_contiguous, require_bool, require_callable, require_choice, require_instance,
                              require_int, require_path)
from refsim.errors import FormatRuleError
from refsim.formats import gptq as gptq_format
from refsim.formats import gptq_marlin
from refsim.formats import marlin as marlin_format
from refsim.formats import qigen as qigen_format
from refsim.io.checkpoint import read_json
from refsim.io.readers import open_checkpoint
from refsim.io.containers import (AnyPrecisionLayer, AtomLayerFile, FPLayer, MarlinLayer, Mixed2416Layer, QIGenLayer,
                                  write_refsim)
from refsim.io.compressed_tensors import CTLayer, ct_quantization_config
from refsim.io.ct_float import CTFP8Layer
from refsim.io.gptq import AWQLayer, GPTQLayer, write_awq, write_gptq
from refsim.io.hf_folder import finish, save_model_tensors
from refsim.io.output import atomic_output_dir
from refsim.io.uniform import UNIFORM_LAYERS, codes_of, marlin_reasons, requantize_hint, to_awq, to_ct, to_gptq, to_marlin
from refsim.quant import marlin as marlin_quant

__all__ = ["TARGETS", "marlin_refusal", "gptq_to_marlin", "gptq_to_marlin_requantized", "gptq_change_zero_convention",
           "gptq_to_qigen", "convert"]

TARGETS = ("marlin", "gptq-v1", "gptq-v2", "awq", "compressed-tensors", "qigen", "anyprec", "fp8-block")
#: formats whose layers convert through their integer codes
_UNIFORM_SOURCES = ("gptq", "awq", "compressed-tensors", "marlin")
#: every layer class a checkpoint reader returns
LAYER_TYPES = (GPTQLayer, AWQLayer, CTLayer, MarlinLayer, AnyPrecisionLayer, QIGenLayer, AtomLayerFile, Mixed2416Layer, FPLayer)
_LAYER = "layer read from a checkpoint (GPTQLayer, AWQLayer, MarlinLayer, ...)"


def marlin_refusal(layer) -> str | None:
    """Why Marlin's kernel cannot run this GPTQ-style layer as is, or None. Checks bits (4),
    symmetry (every zero 8), group size (128 or per-channel), act-order groups of exactly 128
    rows, and the official ``marlin.Layer`` shape rules (K % 128, N % 256). ``layer``: any
    layer class of :mod:`refsim.io` (:data:`LAYER_TYPES`)."""
    require_instance("layer", layer, LAYER_TYPES, _LAYER)
    if isinstance(layer, UNIFORM_LAYERS):
        try:
            return "; ".join(marlin_reasons(codes_of(layer))) or None
        except FormatRuleError as err:
            return str(err).split(": ", 1)[-1]
    return f"format {layer.format} is not a uniform (GPTQ-style) layer"


def gptq_to_marlin(layer: GPTQLayer) -> MarlinLayer:
    """Repack a symmetric 4-bit GPTQ layer into Marlin's B and s (FormatRuleError with the reason
    otherwise). Bit-identical to ``marlin.pack(q[perm], scales, group_size)`` of its codes."""
    require_instance("layer", layer, GPTQLayer)
    why = marlin_refusal(layer)
    if why:
        raise FormatRuleError(f"{layer.name}: cannot repack to Marlin: {why}{requantize_hint(layer.k, layer.n)}")
    perm = gptq_marlin.act_order_perm(layer.ckpt.g_idx) if layer.desc_act else None
    B = gptq_marlin.repack_gptq(layer.ckpt.qweight, layer.k, perm, zeros=layer.zeros())
    s = marlin_format.permute_scales(layer.ckpt.scales)
    return MarlinLayer(layer.name, B, s, perm)


def gptq_to_marlin_requantized(layer) -> tuple[MarlinLayer, dict]:
    """Re-quantize any layer's weights (its ``dequantize()``, fp16) with Marlin's symmetric scheme.

    Group 128 when the source is grouped, per-channel otherwise. Returns the layer and the error
    it adds relative to the source weights: ``max_abs`` and ``rel_fro`` (‖Ŵ − W‖_F / ‖W‖_F).
    ``layer``: any layer class of :mod:`refsim.io` (:data:`LAYER_TYPES`)."""
    require_instance("layer", layer, LAYER_TYPES, _LAYER)
    if layer.k % 128 or layer.n % 256:
        raise FormatRuleError(f"{layer.name}: cannot convert to Marlin even by re-quantizing: K={layer.k}, "
                              f"N={layer.n} (Marlin needs K % 128 == 0 and N % 256 == 0)")
    W = layer.dequantize().astype(np.float16)  # (K, N), source row order
    gs = None if layer.group_size is None else 128
    scales = marlin_quant.compute_scales(W, gs)
    q = marlin_quant.quantize(W, scales, gs)
    B, s = marlin_format.pack(q, scales, gs)
    out = MarlinLayer(layer.name, B, s, None)
    W_new = native_contiguous(out.dequantize(), np.float64)  # norm's dot gets canonical operands
    W64 = native_contiguous(W, np.float64)
    err = {"max_abs": float(np.abs(W_new - W64).max()),
           "rel_fro": float(np.linalg.norm(W_new - W64) / max(np.linalg.norm(W64), 1e-300))}
    return out, err


def gptq_change_zero_convention(layer: GPTQLayer, to: str) -> GPTQLayer:
    """Rewrite qzeros to ``to`` ("gptq" = v1, "gptq_v2"); every other tensor is kept bit for bit."""
    require_instance("layer", layer, GPTQLayer)
    to = require_choice("to", to, gptq_format.CHECKPOINT_FORMATS)
    src = layer.ckpt.checkpoint_format
    if src == to:
        return layer
    z = layer.zeros()
    if to == "gptq_v2" and np.any(z >= (1 << layer.bits)):
        raise FormatRuleError(f"{layer.name}: cannot convert to gptq-v2: {int((z >= (1 << layer.bits)).sum())} v1 "
                              "zero field(s) overflowed ('zero - 1' of a zero of 0); the true zero points are lost")
    if to == "gptq" and np.any(z == 0):
        raise FormatRuleError(f"{layer.name}: cannot convert to gptq-v1: {int((z == 0).sum())} zero point(s) are 0, "
                              "which v1's 'zero - 1' cannot store (it wraps and corrupts neighbours)")
    qzeros = gptq_format.pack_qzeros(z, layer.bits, to)
    c = layer.ckpt
    ck = gptq_format.GPTQCheckpoint(c.qweight, qzeros, c.scales, c.g_idx, c.bits, to)
    return GPTQLayer(layer.name, ck, layer.group_size, layer.desc_act, layer.sym, layer.bias)


def gptq_to_qigen(layer: GPTQLayer, mb: int | None = None, tb: int = 32, order: str = "panel") -> QIGenLayer:
    """Re-block ``qweight`` into QIGen's panels (``mb`` default: 128 if it divides K, else 32;
    ``mb``, ``tb`` positive integers, ``order`` a QIGen block order, see QIGenLayout)."""
    require_instance("layer", layer, GPTQLayer)
    mb = None if mb is None else require_int("mb", mb, minimum=1)
    tb = require_int("tb", tb, minimum=1)
    require_instance("order", order, str)
    if layer.desc_act:
        raise FormatRuleError(f"{layer.name}: cannot convert an act-order (desc_act) layer to QIGen: its kernels "
                              "read each group as consecutive rows")
    if mb is None:
        mb = 128 if layer.k % 128 == 0 else 32
    try:
        lay = qigen_format.QIGenLayout(layer.bits, layer.k, layer.n, mb, tb, order)
    except FormatRuleError as err:
        raise type(err)(f"{layer.name}: {err}") from None
    packed = qigen_format.pack(layer.ckpt.qweight, lay)
    c = layer.ckpt
    return QIGenLayer(layer.name, packed, lay, c.qzeros, c.scales, c.g_idx, layer.group_size, c.checkpoint_format)


def _model_dtype(src_path):
    """The dtype config.json names (``dtype`` or ``torch_dtype``): compressed-tensors keeps scales in
    the model's dtype. None when absent or not a float type refsim stores."""
    import ml_dtypes

    folder = Path(src_path) if Path(src_path).is_dir() else Path(src_path).parent
    if not (folder / "config.json").is_file():
        return None
    cfg = read_json(folder / "config.json")
    name = cfg.get("dtype", cfg.get("torch_dtype"))
    return {"bfloat16": ml_dtypes.bfloat16, "float16": np.float16, "float32": np.float32}.get(name)


def _float_refusal(src, lay, to: str) -> str | None:
    """Why layer ``lay`` of the float source ``src`` cannot become a ``to`` layer without loss, or None."""
    if src.format == "gguf":
        return (f"GGUF {lay.qtype} blocks keep their scales inside each block and dequantize in float32; no other "
                "format refsim writes holds them (refsim quantize --to gguf:TYPE writes GGUF)")
    if lay.kind in ("nvfp4", "mxfp4"):
        if to == "compressed-tensors":
            return None
        return (f"{lay.kind} layers hold e2m1 codes with {'e4m3 scales per 16 and a global scale' if lay.kind == 'nvfp4' else 'E8M0 scales per 32'}; "
                f"{to} cannot hold them (only compressed-tensors does)")
    if to not in ("compressed-tensors", "fp8-block"):
        return f"fp8 layers hold e4m3 codes; {to} holds integer codes (lossless targets: compressed-tensors, fp8-block)"
    if to == "fp8-block" and lay.strategy != "block":
        return (f"strategy {lay.strategy!r}: DeepSeek-style fp8 checkpoints hold 128x128 block scales; a per-"
                f"{lay.strategy} scale would have to be repeated per block and re-read as blocks (not the same layer)")
    if to == "fp8-block" and lay.scale.dtype != np.float32:
        return (f"scale dtype {lay.scale.dtype}: weight_scale_inv is float32, and compressed-tensors rounds the "
                "product to the scale dtype while DeepSeek's weight_dequant keeps float32 (different values)")
    return None


def _convert_float(src, to: str, tmp: Path, src_path: Path, summary: dict, progress) -> list[str]:
    """The float conversions (module docstring): fp8 blocks <-> compressed-tensors float-quantized, a
    compressed-tensors float folder rewritten as itself; everything else refused with the reason."""
    from refsim.io.ct_float_write import PRESETS
    from refsim.io.fp8_block import FP8BlockLayer

    names = src.layer_names()
    converted = []
    for i, name in enumerate(names):
        lay = src.read_layer(name)
        why = _float_refusal(src, lay, to)
        if why:
            raise FormatRuleError(f"{name}: cannot convert a {src.format} layer to {to} without loss: {why}")
        if to == "fp8-block":
            new = FP8BlockLayer(name, lay.codes, lay.scale, "block")
        elif lay.format == "fp8":
            new = CTFP8Layer(name, lay.codes, lay.scale, "block")
        else:
            new = lay
        converted.append(new)
        summary["layers"][name] = {"requantized": False}
        if progress is not None:
            progress(i + 1, len(names), name)
    consumed = {t for n in names for t in src.tensor_names() if t.rsplit(".", 1)[0] == n and t.rsplit(".", 1)[1] != "bias"}
    tensors = {t: src.tensor(t) for t in src.tensor_names() if t not in consumed}
    for new in converted:
        tensors.update(new.tensors())
    save_model_tensors(tmp, tensors)
    ignore = list(getattr(src, "ignore", None) or [])
    if to == "fp8-block":
        qc = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8", "weight_block_size": [128, 128]}
        if ignore:
            qc["modules_to_not_convert"] = ignore
    elif src.format == "fp8":                            # DeepSeek's dynamic activations: FP8_BLOCK's per-group 128
        qc = ct_quantization_config(converted, ignore, PRESETS["FP8_BLOCK"][2])
    else:
        qc = src.config                                  # a compressed-tensors float folder as it was
    src.close()
    return finish(tmp, src_path, qc)


def convert(src_path, to: str, out, *, requantize: bool = False, mb: int | None = None, tb: int = 32,
            progress=None) -> dict:
    """Convert the checkpoint at ``src_path`` to ``to`` (one of :data:`TARGETS`) in the new folder
    ``out`` (written atomically). Returns a summary: per-layer notes and, for ``requantize``, the
    added error, and ``notes`` (:func:`refsim.io.hf_folder.finish`). ``src_path``, ``out``: paths; ``mb``/``tb``: see :func:`gptq_to_qigen`;
    ``progress(done, total, name)`` or None."""
    require_path("src_path", src_path)
    to = require_choice("to", to, TARGETS)
    require_path("out", out)
    requantize = require_bool("requantize", requantize)
    mb = None if mb is None else require_int("mb", mb, minimum=1)
    tb = require_int("tb", tb, minimum=1)
    require_callable("progress", progress, allow_none=True)
    if to == "anyprec":
        from refsim.io.executor import SerialExecutor
        from refsim.io.quantize import QuantizeOptions, quantize_model

        return quantize_model(src_path, out, QuantizeOptions("anyprec"), executor=SerialExecutor(), progress=progress)
    summary: dict = {"source": str(src_path), "to": to, "layers": {}}
    with atomic_output_dir(out) as tmp:
        src = open_checkpoint(src_path)
        if to == "fp8-block" or src.format in ("fp8", "gguf") or \
                getattr(getattr(src, "ct_config", None), "family", "int") == "float":
            summary["notes"] = _convert_float(src, to, tmp, Path(src_path), summary, progress)
            return summary
        sources = ("gptq",) if to == "qigen" else _UNIFORM_SOURCES
        if src.format not in sources:
            raise FormatRuleError(f"to: conversion to {to} needs a {' / '.join(sources)} source; got a "
                                  f"{src.format} checkpoint")
        names = src.layer_names()
        converted = []
        for i, name in enumerate(names):
            layer = src.read_layer(name)
            if to == "marlin":
                why = marlin_refusal(layer)
                if why and requantize:
                    new, err = gptq_to_marlin_requantized(layer)
                    summary["layers"][name] = {"requantized": True, "reason": why, **err}
                else:
                    new = gptq_to_marlin(layer) if isinstance(layer, GPTQLayer) else to_marlin(codes_of(layer))
                    summary["layers"][name] = {"requantized": False}
            elif to in ("gptq-v1", "gptq-v2"):
                fmt = "gptq" if to == "gptq-v1" else "gptq_v2"
                new = gptq_change_zero_convention(layer, fmt) if isinstance(layer, GPTQLayer) \
                    else to_gptq(codes_of(layer), fmt)
            elif to == "awq":
                new = to_awq(codes_of(layer))
            elif to == "compressed-tensors":
                new = to_ct(codes_of(layer), _model_dtype(src_path))
            else:
                new = gptq_to_qigen(layer, mb, tb)
            converted.append(new)
            summary["layers"].setdefault(name, {"requantized": False})
            if progress is not None:
                progress(i + 1, len(names), name)
        consumed = {f"{n}.{suf}" for n in names for suf in src.suffixes[0] + src.suffixes[1] if suf != "bias"}
        consumed |= {t for new in converted for t in new.tensors()}
        keep = {t: src.tensor(t) for t in src.tensor_names() if t not in consumed}
        qc = None
        if to == "marlin":
            write_refsim(tmp, "marlin", converted, {"bits": 4, "sym": True, "source": str(src_path)}, keep)
        elif to == "qigen":
            write_refsim(tmp, "qigen", converted, {"source": str(src_path)}, keep)
        elif to == "awq":
            write_awq(tmp, converted, keep)
            qc = json.loads((tmp / "config.json").read_text())["quantization_config"]
        elif to == "compressed-tensors":
            tensors = dict(keep)
            for new in converted:
                tensors.update(new.tensors())
            save_model_tensors(tmp, tensors)
            ignore = getattr(src, "ignore", None) or []
            qc = ct_quantization_config(converted, ignore)
        else:
            write_gptq(tmp, converted, keep)
            qc = json.loads((tmp / "quantize_config.json").read_text())
        src.close()
        summary["notes"] = finish(tmp, Path(src_path), qc)
    return summary
