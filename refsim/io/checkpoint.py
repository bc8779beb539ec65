"""A checkpoint directory: its safetensors files, its JSON config, its layers, one at a time.

    DIR/
      *.safetensors                 one file or several shards (``model.safetensors.index.json``
                                    optional; every tensor must live in exactly one file)
      quantize_config.json          GPTQ (AutoGPTQ / GPTQModel)
      config.json                   Hugging Face config; ``quantization_config`` (GPTQ, AWQ) or
                                    ``anyprec`` (Any-Precision) inside it
      quant_config.json             AutoAWQ's older stand-alone config
      refsim_checkpoint.json        refsim's own containers (Marlin, QIGen, Atom, 2/4/16)

:func:`refsim.io.readers.detect` names the format from these files; a format's reader is a
:class:`Checkpoint` whose ``read_layer(name)`` copies only that layer's tensors out of the memory-mapped files and validates
them (shapes, dtypes, cross-field rules) with errors naming the file and the tensor.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import numpy as np

from refsim._validate import require_fields, require_instance, require_path
from refsim.errors import CheckpointError, FormatRuleError, ShapeError
from refsim.io.tensors import TensorFile

__all__ = ["Checkpoint", "read_json", "natural_key", "REFSIM_CONFIG"]

REFSIM_CONFIG = "refsim_checkpoint.json"
def natural_key(name: str) -> tuple:
    """Sort key putting ``layers.10`` after ``layers.9``."""
    require_instance("name", name, str)
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name))


def read_json(path: Path) -> dict[str, Any]:
    """A JSON object from ``path``; CheckpointError naming the file on any problem."""
    path = require_path("path", path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise CheckpointError(f"{path}: must be a readable UTF-8 JSON file; got {err}") from None
    try:
        obj = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as err:
        raise CheckpointError(f"{path}: must hold valid JSON; got {type(err).__name__}: {err}") from None
    if not isinstance(obj, dict):
        raise CheckpointError(f"{path}: must hold a JSON object; got {type(obj).__name__}")
    return obj


def check_layer(layer, **ndims: int) -> None:
    """The checks of a layer record, from its ``__post_init__``: Python scalars and plain native
    arrays in its fields (:func:`refsim._validate.require_fields`), a non-empty ``name`` and each
    array field named in ``ndims`` of that many dimensions (skipped when the field is None)."""
    require_fields(layer)
    if not layer.name:
        raise FormatRuleError(f"{type(layer).__name__}.name: must be a non-empty layer name; got ''")
    for field, ndim in ndims.items():
        value = getattr(layer, field)
        if value is not None and value.ndim != ndim:
            raise ShapeError(f"{type(layer).__name__}.{field}: must have {ndim} dimension(s); got shape {value.shape}")


def require_out_folder(name: str, out) -> Path:
    """``out`` must be a path to an existing folder (the writers fill a folder they are given)."""
    out = require_path(name, out)
    if not out.is_dir():
        raise CheckpointError(f"{out}: {name} must be an existing folder to write a checkpoint into; got none")
    return out


def require_layers(name: str, layers, kinds) -> list:
    """``layers`` must be a non-empty list or tuple of ``kinds`` instances (the writers' input)."""
    require_instance(name, layers, (list, tuple))
    if not layers:
        raise CheckpointError(f"{name}: a checkpoint must hold at least one layer; got none")
    for i, lay in enumerate(layers):
        require_instance(f"{name}[{i}]", lay, kinds)
    return list(layers)


def require_tensor_dict(name: str, tensors) -> dict:
    """``tensors`` must be None or a dict (names and arrays are checked by ``save_tensors``)."""
    return {} if tensors is None else dict(require_instance(name, tensors, dict))


def config_field(cfg: dict, key: str, path: Path, kinds: tuple, *, default: Any = ..., choices=None) -> Any:
    """``cfg[key]`` checked against ``kinds`` (bool is never an int here) and ``choices``."""
    if key not in cfg:
        if default is ...:
            raise CheckpointError(f"{path}: field {key!r} must be present; got no such field")
        return default
    v = cfg[key]
    ok = isinstance(v, kinds) and not (isinstance(v, bool) and bool not in kinds)
    if not ok:
        names = "/".join(k.__name__ if k is not type(None) else "null" for k in kinds)
        raise CheckpointError(f"{path}: field {key!r} must be {names}; got {v!r}")
    if choices is not None and v not in choices:
        raise CheckpointError(f"{path}: field {key!r} must be one of {list(choices)}; got {v!r}")
    return v


class Checkpoint:
    """Base class: a directory of safetensors shards plus a config, read one layer at a time.

    Subclasses set ``format`` and implement ``_find_layers`` (names from tensor names) and
    ``read_layer``. ``tensor(name, dtype=..., shape=...)`` reads one tensor from whichever shard
    holds it.
    """

    format = "?"
    #: tensor-name suffixes of one layer: (required, optional)
    suffixes: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())

    def __init__(self, path: Path, config: dict | None = None, config_path: Path | None = None) -> None:
        if not self.suffixes[0]:
            raise CheckpointError(f"{type(self).__name__}: the base class reads no format; open a checkpoint with "
                                  f"refsim.io.readers.open_checkpoint(path) or one format's reader (GPTQReader, ...)")
        self.path = require_path("path", path)
        if config is not None:
            require_instance("config", config, dict)
        if config_path is not None:
            config_path = require_path("config_path", config_path)
        self.config = config or {}
        self.config_path = config_path
        files = [self.path] if self.path.is_file() else sorted(self.path.glob("*.safetensors"))
        if not files:
            raise CheckpointError(f"{self.path}: must hold at least one .safetensors file; got none")
        self._files: dict[Path, TensorFile] = {}
        self._where: dict[str, Path] = {}
        for f in files:
            tf = TensorFile(f)
            self._files[f] = tf
            for name in tf.names():
                if name in self._where:
                    raise CheckpointError(f"{f}: tensor {name!r} must live in one file only; also in "
                                          f"{self._where[name].name}")
                self._where[name] = f
        self._layers = self._find_layers()

    # -- tensors -----------------------------------------------------------------------------
    def tensor_names(self) -> list[str]:
        return sorted(self._where, key=natural_key)

    def has(self, name: str) -> bool:
        return name in self._where

    def file_of(self, name: str) -> TensorFile:
        if name not in self._where:
            raise CheckpointError(f"{self.path}: tensor {name!r} must be present; got no such tensor")
        return self._files[self._where[name]]

    def tensor(self, name: str, **kw) -> np.ndarray:
        """One tensor (copied out of the memory map), checked by :meth:`TensorFile.read`."""
        return self.file_of(name).read(name, **kw)

    def shape(self, name: str) -> tuple[int, ...]:
        return self.file_of(name).shape(name)

    def nbytes(self, prefix: str) -> int:
        """Bytes on disk of the layer ``prefix`` (its tensors' data, headers excluded)."""
        return sum(self.file_of(n).nbytes(n) for n in self._layer_tensors(prefix))

    def _layer_tensors(self, prefix: str) -> list[str]:
        return [n for n in self._where if n.startswith(prefix + ".") and "." not in n[len(prefix) + 1:]]

    # -- layers ------------------------------------------------------------------------------
    def _find_layers(self) -> list[str]:
        """Layer prefixes: names carrying the first required suffix; every other required suffix
        must be present for each, and no required-suffix tensor may lack its layer."""
        required, optional = self.suffixes
        key = required[0]
        layers = sorted({n[: -len(key) - 1] for n in self._where if n.endswith("." + key)}, key=natural_key)
        for prefix in layers:
            for suf in required[1:]:
                if f"{prefix}.{suf}" not in self._where:
                    raise CheckpointError(
                        f"{self._where[f'{prefix}.{key}'].name}: tensor {prefix + '.' + suf!r} must be "
                        f"present (a {self.format} layer has {', '.join(required)}); got no such tensor")
        have = set(layers)
        for n in self._where:
            for suf in required[1:]:
                if n.endswith("." + suf) and n[: -len(suf) - 1] not in have:
                    raise CheckpointError(f"{self._where[n].name}: tensor {n!r} has no matching "
                                          f"{n[: -len(suf) - 1] + '.' + key!r} (mismatched layer sets)")
        if not layers:
            raise CheckpointError(f"{self.path}: a {self.format} checkpoint must hold at least one layer "
                                  f"(tensors named '<layer>.{key}'); got none")
        return layers

    def layer_names(self) -> list[str]:
        """Layer names (prefixes such as ``model.layers.0.self_attn.q_proj``), natural order."""
        return list(self._layers)

    def read_layer(self, name: str):  # pragma: no cover - abstract
        raise NotImplementedError

    def _require_layer(self, name: str) -> None:
        if name not in self._layers:
            raise CheckpointError(f"{self.path}: layer {name!r} must be one of the checkpoint's "
                                  f"{len(self._layers)} layers; got no such layer")

    def close(self) -> None:
        for tf in self._files.values():
            tf.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
