"""Which reader opens a checkpoint folder: the format named from its files, and the table of readers.

:func:`detect` tries, in the order of :data:`DETECTION_ORDER`: a ``.gguf`` file (llama.cpp), refsim's own ``refsim_checkpoint.json``
(Marlin, QIGen, Atom, 2/4/16), ``quantize_config.json`` (GPTQ), ``quant_config.json`` (AutoAWQ's
older config), ``config.json`` with ``anyprec`` or ``quantization_config`` (Any-Precision, GPTQ,
AWQ, compressed-tensors, DeepSeek-style ``fp8`` blocks, bitsandbytes 4-bit), then plain ``*.safetensors`` (FP). :data:`READERS` maps each format name to its
:class:`~refsim.io.checkpoint.Checkpoint` subclass; :func:`open_checkpoint` uses both.
"""

from __future__ import annotations

import os
from pathlib import Path

from refsim._validate import require_path
from refsim.errors import CheckpointError
from refsim.io.bnb_4bit import BnBReader
from refsim.io.checkpoint import REFSIM_CONFIG, Checkpoint, config_field, read_json
from refsim.io.compressed_tensors import CompressedTensorsReader
from refsim.io.containers import (AnyPrecisionReader, AtomReader, FPReader, MarlinReader, Mixed2416Reader,
                                  QIGenReader)
from refsim.io.fp8_block import FP8BlockReader
from refsim.io.gguf_file import GGUFCheckpoint
from refsim.io.gptq import AWQReader, GPTQReader

__all__ = ["detect", "open_checkpoint", "open_unquantized", "READERS", "DETECTION_ORDER"]

#: formats named by ``refsim_checkpoint.json``
_REFSIM_FORMATS = ("marlin", "qigen", "atom", "mixed_2_4_16")
#: the sources :func:`detect` tries, in order
DETECTION_ORDER = ("gguf", "refsim", "gptq", "awq", "anyprec", "compressed-tensors", "bitsandbytes", "fp")

#: format name -> reader class (a folder path -> Checkpoint)
READERS: dict[str, type[Checkpoint]] = {
    "gptq": GPTQReader, "awq": AWQReader, "marlin": MarlinReader, "anyprec": AnyPrecisionReader,
    "compressed-tensors": CompressedTensorsReader, "qigen": QIGenReader, "atom": AtomReader, "mixed_2_4_16": Mixed2416Reader, "fp": FPReader,
    "gguf": GGUFCheckpoint, "fp8": FP8BlockReader, "bitsandbytes": BnBReader,
}


def detect(path: str | os.PathLike) -> str:
    """Name the format of a checkpoint directory (or single ``.safetensors`` file) from its files.

    Returns one of "gptq", "awq", "compressed-tensors", "bitsandbytes", "anyprec", "marlin", "qigen", "atom",
    "mixed_2_4_16", "fp", "gguf" (a ``.gguf`` file), "fp8" (DeepSeek-style FP8 blocks).
    Raises CheckpointError naming the path when nothing matches.
    """
    root = require_path("path", path)
    if root.is_file():
        return "gguf" if root.suffix == ".gguf" else "fp"
    if not root.is_dir():
        raise CheckpointError(f"{root}: checkpoint must be a directory or a .safetensors file; got no such path")
    if (root / REFSIM_CONFIG).is_file():
        cfg = read_json(root / REFSIM_CONFIG)
        fmt = config_field(cfg, "format", root / REFSIM_CONFIG, (str,))
        if fmt not in _REFSIM_FORMATS:
            raise CheckpointError(f"{root / REFSIM_CONFIG}: field 'format' must be one of "
                                  f"{list(_REFSIM_FORMATS)}; got {fmt!r}")
        return fmt
    if (root / "quantize_config.json").is_file():
        return "gptq"
    if (root / "quant_config.json").is_file():
        return "awq"
    if (root / "config.json").is_file():
        cfg = read_json(root / "config.json")
        if "anyprec" in cfg:
            return "anyprec"
        qc = cfg.get("quantization_config")
        if qc is not None:
            if not isinstance(qc, dict):
                raise CheckpointError(f"{root / 'config.json'}: field 'quantization_config' must be an "
                                      f"object; got {qc!r}")
            method = qc.get("quant_method")
            if method in ("gptq", "awq", "compressed-tensors", "fp8", "bitsandbytes"):
                return method
            raise CheckpointError(f"{root / 'config.json'}: quantization_config.quant_method must be "
                                  f"'gptq', 'awq', 'compressed-tensors', 'fp8' or 'bitsandbytes' (the methods refsim "
                                  f"reads); got {method!r}")
    if list(root.glob("*.safetensors")):
        return "fp"
    raise CheckpointError(f"{root}: must hold *.safetensors files (and a quantization config); got none")


def open_checkpoint(path: str | os.PathLike) -> "Checkpoint":
    """Open a checkpoint of any supported format (see :func:`detect`)."""
    path = require_path("path", path)
    fmt = detect(path)
    return READERS[fmt](path)


def open_unquantized(path: str | os.PathLike) -> "Checkpoint":
    """:func:`open_checkpoint` for a quantizer's source: an unquantized (FP) safetensors model; any other
    format -> CheckpointError naming the format found (the one rule every ``quantize`` writer applies)."""
    ck = open_checkpoint(path)
    if ck.format != "fp":
        ck.close()
        raise CheckpointError(f"{path}: quantize needs an unquantized (FP) safetensors model; got a "
                              f"{ck.format} checkpoint (use 'refsim convert')")
    return ck


