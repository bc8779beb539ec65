"""FP8 128x128-block checkpoints as DeepSeek-V3 ships them (transformers' ``FineGrainedFP8Config``, DeepGEMM's layout).

Spec (per quantized linear ``<L>``, PyTorch (N, K) = (out, in) orientation)::

    config.json  "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128],
                 "activation_scheme": "dynamic", "fmt": "e4m3" (optional), "modules_to_not_convert": [...]
                 (optional)}; another block size, activation scheme or fmt is refused by name
    <L>.weight             F8_E4M3 (N, K)                             e4m3 codes (OCP "fn")
    <L>.weight_scale_inv   F32 (ceil(N/128), ceil(K/128))             despite its name the multiplier:
                                                                      w = e4m3(q) * s (DeepSeek's weight_dequant)
    value        float32 e4m3(q) * s, one rounding (DeepSeek-V3 ``inference/kernel.py`` ``weight_dequant``
                 multiplies in float32 before its cast to the model dtype) -- compressed-tensors'
                 float-quantized "block" strategy holds the same bytes: ``weight`` and ``weight_scale``
                 (= ``weight_scale_inv``), so ``refsim convert --to compressed-tensors`` is lossless

Layers are the tensors ``<L>.weight`` that have a ``<L>.weight_scale_inv`` beside them; every other
tensor (embeddings, norms, the unconverted ``lm_head``) is unquantized.

Source: deepseek-ai/DeepSeek-V3 ``inference/kernel.py`` (``weight_dequant``) and ``inference/fp8_cast_bf16.py``;
huggingface/transformers ``FineGrainedFP8Config`` (``quant_method "fp8"``, ``weight_block_size``,
``modules_to_not_convert``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import ml_dtypes
import numpy as np

from refsim._validate import require_path
from refsim.errors import CheckpointError, FormatRuleError, ShapeError
from refsim.io.checkpoint import Checkpoint, natural_key, read_json
from refsim.io.ct_float import CTFP8Layer

__all__ = ["FP8BlockLayer", "FP8BlockReader"]


@dataclass(frozen=True)
class FP8BlockLayer(CTFP8Layer):
    """One DeepSeek-style FP8 block layer: ``codes`` uint8 (N, K) e4m3 bytes, ``scale`` float32
    (ceil(N/128), ceil(K/128)) (``weight_scale_inv``), finite and > 0; ``strategy`` "block". The rules and
    the value are :class:`refsim.io.ct_float.CTFP8Layer`'s (float32 product)."""

    format = "fp8"

    def __post_init__(self):
        super().__post_init__()
        if self.strategy != "block" or self.scale.dtype != np.float32:
            raise FormatRuleError(f"strategy/scale: a DeepSeek-style FP8 layer is 'block' with float32 scales; got "
                                  f"{self.strategy!r} and {self.scale.dtype}")

    def tensors(self) -> dict[str, np.ndarray]:
        """``<name>.weight`` float8_e4m3fn (N, K) and ``<name>.weight_scale_inv`` float32."""
        return {f"{self.name}.weight": self.codes.view(ml_dtypes.float8_e4m3fn),
                f"{self.name}.weight_scale_inv": self.scale}


class FP8BlockReader(Checkpoint):
    """A folder with ``quantization_config.quant_method == "fp8"`` (module docstring):
    ``read_layer(name)`` -> :class:`FP8BlockLayer`; ``ignore`` = ``modules_to_not_convert``."""

    format = "fp8"
    suffixes = (("weight_scale_inv", "weight"), ("bias", "input_scale"))

    def __init__(self, path: Path) -> None:                              # noqa: D107 (class docstring)
        path = require_path("path", path)
        cpath = path / "config.json"
        qc = read_json(cpath).get("quantization_config")
        if not isinstance(qc, dict) or qc.get("quant_method") != "fp8":
            raise CheckpointError(f"{cpath}: quantization_config.quant_method must be 'fp8'; got "
                                  f"{qc.get('quant_method') if isinstance(qc, dict) else qc!r}")
        for key, want in (("weight_block_size", [128, 128]), ("activation_scheme", "dynamic"), ("fmt", "e4m3")):
            got = qc.get(key, want)
            if (list(got) if isinstance(got, (list, tuple)) else got) != want:
                raise CheckpointError(f"{cpath}: quantization_config.{key} must be {want!r} (DeepSeek-V3's "
                                      f"128x128 e4m3 blocks, dynamic activations); got {got!r}")
        ignore = qc.get("modules_to_not_convert") or []
        if not isinstance(ignore, list) or not all(isinstance(n, str) for n in ignore):
            raise CheckpointError(f"{cpath}: quantization_config.modules_to_not_convert must be a list of names or "
                                  f"null; got {ignore!r:.200}")
        self.ignore = list(ignore)
        super().__init__(path, qc, cpath)

    def _find_layers(self) -> list[str]:
        """The prefixes holding ``weight_scale_inv``, each with its ``weight`` (the unquantized ``X.weight``
        tensors have no scale and are not layers)."""
        layers = sorted({n[: -len(".weight_scale_inv")] for n in self._where if n.endswith(".weight_scale_inv")},
                        key=natural_key)
        for prefix in layers:
            if f"{prefix}.weight" not in self._where:
                raise CheckpointError(f"{self._where[prefix + '.weight_scale_inv'].name}: tensor {prefix + '.weight'!r} "
                                      "must be present beside its weight_scale_inv; got no such tensor")
        if not layers:
            raise CheckpointError(f"{self.path}: an fp8 checkpoint must hold at least one layer (tensors named "
                                  "'<layer>.weight_scale_inv'); got none")
        return layers

    def read_layer(self, name: str) -> FP8BlockLayer:
        """The layer's e4m3 bytes and float32 block scales, shapes checked against each other."""
        self._require_layer(name)
        w = self.tensor(f"{name}.weight", dtype=ml_dtypes.float8_e4m3fn)
        if w.ndim != 2:
            raise CheckpointError(f"{self.file_of(name + '.weight').path.name}: tensor {name + '.weight'!r}: must be "
                                  f"2-D (N, K); got shape {w.shape}")
        n, k = w.shape
        s = self.tensor(f"{name}.weight_scale_inv", dtype=np.float32, shape=(-(-n // 128), -(-k // 128)))
        try:
            return FP8BlockLayer(name, w.view(np.uint8), s, "block")
        except (FormatRuleError, ShapeError) as err:
            raise CheckpointError(f"{self.path}: layer {name!r}: {err}") from None
