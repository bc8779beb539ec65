"""FP8 weight quantization as llm-compressor's presets do it: round to nearest, scales from min and max.

Spec
----
    presets      llm-compressor    weights (compressed-tensors strategy)   refsim scheme   activations (not here)
                 "FP8"             TENSOR, static                          "tensor"        per-tensor, static
                 "FP8_DYNAMIC"     CHANNEL                                 "channel"       per-token, dynamic
                 "FP8_BLOCK"       BLOCK, block_structure [128, 128]       "block128"      per-group 128, dynamic
    observer     memoryless min-max: min and max of the weight per group (the whole weight, each
                 output channel, each 128x128 tile), then compressed-tensors' ``calculate_qparams`` and
                 ``quantize``: the formulas of :mod:`refsim.formats.fp8` (s = amax / 448, eps for a zero
                 scale, codes e4m3(clamp(w / s + 0, +-448))). No data is needed for the weights: every
                 preset quantizes them the same way with or without calibration.
    orientation  W float32 (K, N) here (refsim's convention: K the reduction dimension); the checkpoint
                 holds torch's (N, K) Linear weight, so ``weight`` = codes.T and ``weight_scale`` is the
                 transposed scale array, reshaped as compressed-tensors stores it
    checkpoint   compressed-tensors "float-quantized" tensors of one Linear layer:
                   weight        float8_e4m3fn (N, K), here as its raw uint8 bytes
                   weight_scale  float32 (1,) FP8 | (N, 1) FP8_DYNAMIC | (ceil(N/128), ceil(K/128)) FP8_BLOCK
    matched      llm-compressor 0.14.0.1 with compressed-tensors 0.19.0 (torch 2.13.0, CPU): ``oneshot`` +
                 ``save_pretrained(save_compressed=True)`` on a float32 one-layer Llama, bit for bit
                 (tests/quant/data/llmcompressor_fp8.npz, made by make_llmcompressor_fp8.py beside it)
"""

from __future__ import annotations

import numpy as np

from refsim._validate import require_choice, require_dtype, require_ndim
from refsim.errors import DtypeError, FormatRuleError, ShapeError
from refsim.formats import fp8

__all__ = ["PRESETS", "quantize_weight", "checkpoint_tensors", "from_checkpoint_tensors"]

#: llm-compressor preset -> the refsim.formats.fp8 scheme of its weights
PRESETS: dict[str, str] = {"FP8": "tensor", "FP8_DYNAMIC": "channel", "FP8_BLOCK": "block128"}


def quantize_weight(W: np.ndarray, preset: str) -> fp8.FP8Quant:
    """Quantize a float32 (K, N) weight, finite, as llm-compressor's ``preset`` ("FP8", "FP8_DYNAMIC",
    "FP8_BLOCK") does: :func:`refsim.formats.fp8.quantize` with the preset's scheme. Returns
    :class:`refsim.formats.fp8.FP8Quant` in refsim's orientation (codes (K, N))."""
    preset = require_choice("preset", preset, tuple(PRESETS))
    return fp8.quantize(W, PRESETS[preset])


def checkpoint_tensors(q: fp8.FP8Quant) -> dict[str, np.ndarray]:
    """The compressed-tensors tensors of a quantized Linear: ``weight`` uint8 (N, K) (the e4m3 bytes of
    torch's orientation) and ``weight_scale`` float32 ((1,), (N, 1) or (N/128, K/128) blocks). Only
    the weight schemes of :data:`PRESETS` have a checkpoint form."""
    if not isinstance(q, fp8.FP8Quant):
        raise DtypeError(f"q: must be an FP8Quant; got {type(q).__name__}")
    if q.scheme not in PRESETS.values():
        raise FormatRuleError(f"q.scheme: llm-compressor presets store {sorted(PRESETS.values())}; got {q.scheme!r}")
    scale = q.scales.reshape(1) if q.scheme == "tensor" else q.scales.T
    return {"weight": np.ascontiguousarray(q.codes.T), "weight_scale": np.ascontiguousarray(scale)}


def from_checkpoint_tensors(weight: np.ndarray, weight_scale: np.ndarray, preset: str) -> fp8.FP8Quant:
    """The inverse of :func:`checkpoint_tensors`: ``weight`` uint8 (N, K) e4m3 bytes, ``weight_scale``
    float32 of the preset's checkpoint shape -> :class:`refsim.formats.fp8.FP8Quant` (codes (K, N))."""
    preset = require_choice("preset", preset, tuple(PRESETS))
    scheme = PRESETS[preset]
    weight = require_ndim("weight", require_dtype("weight", weight, np.uint8), 2)
    weight_scale = require_dtype("weight_scale", weight_scale, np.float32)
    if scheme == "tensor":
        if weight_scale.shape != (1,):
            raise ShapeError(f"weight_scale: an FP8 (per-tensor) scale has shape (1,); got {weight_scale.shape}")
        scales = weight_scale.reshape(1, 1)
    else:
        scales = require_ndim("weight_scale", weight_scale, 2).T
    return fp8.FP8Quant(np.ascontiguousarray(weight.T), np.ascontiguousarray(scales), scheme)
