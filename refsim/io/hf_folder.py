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
BERT-style encoders get a complete ``BertConfig`` and GPTQ's ``block_name_to_quantize``
(:mod:`refsim.io.bert_config`); folders a current loader is known to refuse are named in the notes
:func:`finish` returns (:data:`KNOWN_LOAD_FAILURES`).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np

from refsim._validate import require_array, require_instance, require_int, require_path
from refsim.io.checkpoint import read_json, require_out_folder
from refsim.io.tensors import save_tensors

__all__ = ["SIDE_FILES", "MAX_SHARD_BYTES", "KNOWN_LOAD_FAILURES", "save_model_tensors", "finish"]

SIDE_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
              "tokenizer.model", "vocab.txt", "vocab.json", "merges.txt", "chat_template.jinja",
              "generation_config.json")
#: transformers' default ``max_shard_size`` ("5GB", decimal)
MAX_SHARD_BYTES = 5 * 10**9
#: folders the libraries' own loaders refuse, as tried (their own writers' folders fail the same way):
#: (what, the library versions tried, what happens)
KNOWN_LOAD_FAILURES = {
    "compressed-tensors asymmetric": (
        "transformers 5.24.0 + compressed-tensors 0.20.1",
        "loading fails with a size mismatch of weight_zero_point (llm-compressor's own asymmetric folders "
        "fail the same way); symmetric (--sym) folders load"),
}


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


def _shapes(out: Path) -> dict[str, tuple]:
    from refsim.io.tensors import TensorFile

    shapes = {}
    for f in sorted(out.glob("*.safetensors")):
        with TensorFile(f) as tf:
            shapes.update({n: tf.shape(n) for n in tf.names()})
    return shapes


def load_notes(quantization_config: dict | None) -> list[str]:
    """Warnings for a folder with this ``quantization_config`` that a current loader refuses
    (:data:`KNOWN_LOAD_FAILURES`); empty when none applies."""
    qc = quantization_config or {}
    notes = []
    if qc.get("quant_method") == "compressed-tensors":
        groups = qc.get("config_groups") or {}
        if any(isinstance(g, dict) and isinstance(g.get("weights"), dict) and g["weights"].get("symmetric") is False
               for g in groups.values()):
            versions, what = KNOWN_LOAD_FAILURES["compressed-tensors asymmetric"]
            notes.append(f"warning: asymmetric compressed-tensors: {versions}: {what}")
    return notes


def finish(out: Path, source: Path, quantization_config: dict | None) -> list[str]:
    """Write config.json (the source folder's, with ``quantization_config`` replaced when given; a
    config.json the writer already made keeps its own keys on top) and copy :data:`SIDE_FILES`.

    A BERT-style encoder's config.json is completed to a BertConfig and a GPTQ encoder's
    quantization config (config.json and quantize_config.json) gets ``block_name_to_quantize``
    (:mod:`refsim.io.bert_config`). Returns notes, one line each: what was derived, and known
    loader failures (:func:`load_notes`), each starting "note: " or "warning: "."""
    from refsim.io.bert_config import block_name_to_quantize, complete_bert_config

    out = require_out_folder("out", out)
    source = require_path("source", source)
    if quantization_config is not None:
        require_instance("quantization_config", quantization_config, dict)
    folder = source if source.is_dir() else source.parent
    cfg = read_json(folder / "config.json") if (folder / "config.json").is_file() else {}
    cfg.pop("quantization_config", None)
    if (out / "config.json").is_file():
        cfg.update(read_json(out / "config.json"))
    shapes = _shapes(out)
    cfg, notes = complete_bert_config(cfg, shapes, out)
    block = block_name_to_quantize(shapes)
    if quantization_config is not None and quantization_config.get("quant_method") == "gptq" and block:
        quantization_config = {**quantization_config, "block_name_to_quantize": block}
        if (out / "quantize_config.json").is_file():
            (out / "quantize_config.json").write_text(json.dumps(quantization_config, indent=2) + "\n")
    if quantization_config is not None:
        cfg["quantization_config"] = quantization_config
    if cfg:
        (out / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    for name in SIDE_FILES:
        if (folder / name).is_file() and not (out / name).exists():
            shutil.copyfile(folder / name, out / name)
    return notes + load_notes(quantization_config)
