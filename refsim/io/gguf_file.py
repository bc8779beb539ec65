"""llama.cpp ``.gguf`` files through refsim.io: layers by their GGUF names, dequantized by refsim.formats.gguf.

Spec
----
    file       one ``.gguf`` file (GGUF v2/v3, little-endian), parsed by the ``gguf`` package's
               ``GGUFReader`` (an optional dependency: ``pip install refsim[gguf]``; without it
               :class:`GGUFCheckpoint` raises :class:`refsim.errors.ToolchainError` naming the extra)
    layers     every tensor of two dimensions whose ggml type is not a plain float/int type
               (F32, F64, I8..I64 are unquantized: norms, biases), named as in the file
               (``blk.0.attn_q.weight``), in natural order
    tensor     ggml shape ne = [K, N] (ne[0] the row length, the reduction dimension): N rows of
               ``refsim.formats.gguf.row_bytes(type, K)`` bytes, blocks in order
    value      :func:`refsim.formats.gguf.dequantize` (ggml's ``dequantize_row_*`` bit for bit),
               float32, returned (K, N) in refsim's orientation; a type refsim.formats.gguf does not
               read (Q8_1, Q8_K, Q1_0: gguf-py dequantizes none of them) is refused by name when the
               layer is read
    inspect    bits = the type's nominal width (Q4_K -> 4, Q8_0 -> 8, TQ1_0 -> 1, MXFP4 -> 4, F16 -> 16),
               group_size = the type's block (32, 64, 256; 1 for F16/BF16); scheme {"type": "gguf", "qtype"}

Layout of ``blk.0.attn_q.weight`` Q4_0 with ne = [64, 4] (4 rows of 2 blocks of 18 bytes)::

    row n: | d f16 | qs[16] | d f16 | qs[16] |    values w[0..63, n] of refsim's (K, N) = (64, 4)
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from refsim._validate import require_choice, require_dtype, require_instance, require_int, require_path
from refsim.errors import CheckpointError, FormatRuleError, ShapeError, ToolchainError
from refsim.formats import gguf as gguf_format
from refsim.io.checkpoint import Checkpoint, check_layer, natural_key

__all__ = ["GGUFLayer", "GGUFCheckpoint", "gguf_bits", "open_gguf_reader"]

#: ggml types that are plain numbers, not layers
_PLAIN = ("F32", "F64", "I8", "I16", "I32", "I64")


def gguf_bits(qtype: str) -> int:
    """The nominal bit width of a ggml type name (a name of :data:`refsim.formats.gguf.BLOCK_TYPES`):
    the digits after Q / IQ / TQ (Q4_K -> 4, IQ4_NL -> 4, TQ1_0 -> 1), 4 for MXFP4 and NVFP4, 16 for F16 and BF16."""
    qtype = require_choice("qtype", qtype, tuple(gguf_format.BLOCK_TYPES))
    if qtype in ("F16", "BF16"):
        return 16
    return 4 if qtype in ("MXFP4", "NVFP4") else int(re.match(r"[IT]?Q(\d+)", qtype).group(1))


@dataclass(frozen=True)
class GGUFLayer:
    """One GGUF weight: ``raw`` uint8 (N, row_bytes(qtype, k)), the tensor's bytes row after row;
    ``qtype`` a name of :data:`refsim.formats.gguf.BLOCK_TYPES`; ``k`` the row length (ne[0])."""

    name: str
    qtype: str
    raw: np.ndarray
    k: int
    format = "gguf"
    sym = True
    desc_act = False

    def __post_init__(self):
        check_layer(self, raw=2)
        require_choice("qtype", self.qtype, tuple(gguf_format.BLOCK_TYPES))
        k = require_int("k", self.k, minimum=1)
        per_row = gguf_format.row_bytes(self.qtype, k)
        raw = require_dtype("raw", self.raw, np.uint8)
        if raw.shape[1] != per_row:
            raise ShapeError(f"raw: rows of {per_row} bytes for {self.qtype} K={k}; got shape {raw.shape}")

    @property
    def n(self) -> int:
        return self.raw.shape[0]

    @property
    def bits(self) -> int:
        return gguf_bits(self.qtype)

    @property
    def group_size(self) -> int:
        """Values per block (1 for F16/BF16)."""
        return gguf_format.BLOCK_TYPES[self.qtype][0]

    def dequantize(self) -> np.ndarray:
        """float32 (K, N): :func:`refsim.formats.gguf.dequantize` of the rows, transposed."""
        return np.ascontiguousarray(gguf_format.dequantize(self.raw, self.qtype, (self.n, self.k)).T)


def _gguf_package():
    """The ``gguf`` package (llama.cpp's gguf-py), through which refsim reads and writes ``.gguf`` files: an
    optional dependency, so ToolchainError naming the extra when it cannot be imported."""
    try:
        import gguf
    except ImportError as err:
        raise ToolchainError(f"reading or writing .gguf files needs the gguf package (pip install refsim[gguf]); "
                             f"got ImportError: {err}") from None
    return gguf


def open_gguf_reader(path: str | os.PathLike):
    """The ``gguf`` package's ``GGUFReader`` of the existing little-endian ``.gguf`` file ``path``
    (read-only, memory-mapped); CheckpointError naming the file when it is not one."""
    path = require_path("path", path)
    if not path.is_file() or path.suffix != ".gguf":
        raise CheckpointError(f"{path}: a GGUF checkpoint must be an existing .gguf file; got "
                              f"{'a file named ' + path.name if path.is_file() else 'no such file'}")
    reader_cls = _gguf_package().GGUFReader
    try:
        reader = reader_cls(str(path), "r")
    except (ValueError, KeyError, IndexError, OSError, TypeError, OverflowError, MemoryError) as err:
        raise CheckpointError(f"{path}: must be a valid GGUF file; got {type(err).__name__}: {err}") from None
    if reader.endianess.name != "LITTLE":
        raise CheckpointError(f"{path}: GGUF byte order must be little-endian; got {reader.endianess.name}")
    return reader


class GGUFCheckpoint(Checkpoint):
    """A ``.gguf`` file opened through the ``gguf`` package (module docstring): ``layer_names()``,
    ``read_layer(name)`` -> :class:`GGUFLayer`, ``nbytes(name)``. ``config`` holds the file's
    ``general.architecture`` and ``general.file_type`` where present."""

    format = "gguf"
    suffixes = (("weight",), ())

    def __init__(self, path: str | os.PathLike) -> None:                  # noqa: D107 (class docstring)
        path = require_path("path", path)
        reader = open_gguf_reader(path)
        self.path = path
        self.config_path = None
        self._reader = reader
        self._tensors = {t.name: t for t in reader.tensors}
        self.config = {}
        for key in ("general.architecture", "general.file_type"):
            field = reader.fields.get(key)
            if field is not None and field.data:
                self.config[key] = field.contents()
        self._layers = sorted((n for n, t in self._tensors.items()
                               if len(t.shape) == 2 and t.tensor_type.name not in _PLAIN), key=natural_key)
        if not self._layers:
            raise CheckpointError(f"{path}: a GGUF checkpoint must hold at least one 2-D quantized or 16-bit "
                                  "tensor; got none")

    def tensor_names(self) -> list[str]:
        return sorted(self._tensors, key=natural_key)

    def has(self, name: str) -> bool:
        return name in self._tensors

    def nbytes(self, prefix: str) -> int:
        """Bytes of tensor ``prefix`` in the file."""
        require_instance("prefix", prefix, str)
        if prefix not in self._tensors:
            raise CheckpointError(f"{self.path}: tensor {prefix!r} must be present; got no such tensor")
        return int(self._tensors[prefix].n_bytes)

    def read_layer(self, name: str) -> GGUFLayer:
        """The layer's bytes as :class:`GGUFLayer` (its ggml type must be one refsim.formats.gguf reads)."""
        require_instance("name", name, str)
        self._require_layer(name)
        t = self._tensors[name]
        qtype = t.tensor_type.name
        if qtype not in gguf_format.BLOCK_TYPES:
            raise CheckpointError(f"{self.path}: tensor {name!r}: ggml type must be one of "
                                  f"{sorted(gguf_format.BLOCK_TYPES)}; got {qtype}")
        k, n = (int(d) for d in t.shape)
        raw = np.ascontiguousarray(t.data).view(np.uint8).reshape(-1)
        per_row = gguf_format.row_bytes(qtype, k)
        if raw.size != n * per_row:
            raise CheckpointError(f"{self.path}: tensor {name!r}: {qtype} [{k}, {n}] takes {n * per_row} bytes; "
                                  f"got {raw.size}")
        try:
            return GGUFLayer(name, qtype, raw.reshape(n, per_row).copy(), k)
        except (FormatRuleError, ShapeError) as err:
            raise CheckpointError(f"{self.path}: layer {name!r}: {err}") from None

    def close(self) -> None:
        self._reader = None
        self._tensors = {}

