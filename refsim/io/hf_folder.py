"""Output folders the serving tools load: config.json, side files of the source model, shards + index.

    OUT/
      config.json                     the source model's config.json with "quantization_config" set
                                      (GPTQModel/AutoGPTQ, AutoAWQ or llm-compressor's object)
      model.safetensors               or model-00001-of-0000N.safetensors ... when the tensors exceed
      model.safetensors.index.json    the shard size: {"metadata": {"total_size"}, "weight_map"}
                                      (transformers' ``save_pretrained`` layout)
      tokenizer.json, tokenizer_config.json, special_tokens_map.json, vocab.txt, ...
      generation_config.json          copied unchanged from the source folder when present
      quantize_config.json            GPTQ only (AutoGPTQ's file, kept beside config.json)

The files copied are those transformers' tokenizers and ``GenerationConfig`` read (:data:`SIDE_FILES`).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np

from refsim._validate import require_array, require_instance, require_int, require_path
from refsim.io.checkpoint import read_json, require_out_folder
from refsim.io.tensors import save_tensors

__all__ = ["SIDE_FILES", "MAX_SHARD_BYTES", "save_model_tensors", "finish"]

SIDE_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
              "tokenizer.model", "vocab.txt", "vocab.json", "merges.txt", "chat_template.jinja",
              "generation_config.json")
#: transformers' default ``max_shard_size`` ("5GB", decimal)
MAX_SHARD_BYTES = 5 * 10**9


def save_model_tensors(out: Path, tensors: dict[str, np.ndarray], metadata: dict | None = None,
                       max_shard_bytes: int = MAX_SHARD_BYTES) -> list[str]:
    """Write ``tensors`` as ``model.safetensors``, or as shards of at most ``max_shard_bytes`` (a
    tensor larger than that gets a shard of its own) plus ``model.safetensors.index.json``.
    Returns the file names written. Tensors go to shards in name order."""
    out = require_out_folder("out", out)
    require_instance("tensors", tensors, dict)
    metadata = {"format": "pt"} if metadata is None else require_instance("metadata", metadata, dict)
    max_shard_bytes = require_int("max_shard_bytes", max_shard_bytes, minimum=1)
    for k, v in tensors.items():
        require_instance("tensors: key", k, str)
        require_array(f"tensors[{k!r}]", v)
    names = sorted(tensors)
    total = sum(int(np.asarray(tensors[n]).nbytes) for n in names)
    if total <= max_shard_bytes:
        save_tensors(out / "model.safetensors", tensors, metadata)
        return ["model.safetensors"]
    shards: list[list[str]] = [[]]
    size = 0
    for n in names:
        b = int(np.asarray(tensors[n]).nbytes)
        if shards[-1] and size + b > max_shard_bytes:
            shards.append([])
            size = 0
        shards[-1].append(n)
        size += b
    files, weight_map = [], {}
    for i, part in enumerate(shards):
        fname = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        save_tensors(out / fname, {n: tensors[n] for n in part}, metadata)
        files.append(fname)
        weight_map.update({n: fname for n in part})
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (out / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")
    return files + ["model.safetensors.index.json"]


def finish(out: Path, source: Path, quantization_config: dict | None) -> None:
    """Write config.json (the source folder's, with ``quantization_config`` replaced when given; a
    config.json the writer already made keeps its own keys on top) and copy :data:`SIDE_FILES`."""
    out = require_out_folder("out", out)
    source = require_path("source", source)
    if quantization_config is not None:
        require_instance("quantization_config", quantization_config, dict)
    folder = source if source.is_dir() else source.parent
    cfg = read_json(folder / "config.json") if (folder / "config.json").is_file() else {}
    cfg.pop("quantization_config", None)
    if (out / "config.json").is_file():
        cfg.update(read_json(out / "config.json"))
    if quantization_config is not None:
        cfg["quantization_config"] = quantization_config
    if cfg:
        (out / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    for name in SIDE_FILES:
        if (folder / name).is_file() and not (out / name).exists():
            shutil.copyfile(folder / name, out / name)
