"""bitsandbytes 4-bit checkpoints (NF4/FP4, what transformers' ``save_pretrained`` writes): read and write.

Spec (per quantized linear ``<L>`` with PyTorch (N, K) = (out, in) weight; ``QuantState.as_dict(packed=True)``)::

    <L>.weight                                storage (ceil(N*K/2) / itemsize, 1)   the packed codes
                                              (refsim.formats.bnb4: element 2i in the high nibble of byte
                                              i, row-major over (N, K)); storage = bnb_4bit_quant_storage
                                              (uint8, or its bytes viewed as float16/bfloat16/float32/int8)
    <L>.weight.absmax                         float32 (B,)    B = ceil(N*K / blocksize)  absmax per block;
                                              uint8 (B,) with double quantization (codes of absmax - offset)
    <L>.weight.quant_map                      float32 (16,)   the code table (get_4bit_type)
    <L>.weight.nested_absmax                  float32 (ceil(B/256),)   double quantization only
    <L>.weight.nested_quant_map               float32 (256,)           double quantization only (code2)
    <L>.weight.quant_state.bitsandbytes__nf4  uint8 (bytes,)  UTF-8 JSON (``pack_dict_to_tensor``):
        {"quant_type": "nf4"|"fp4", "blocksize": 64, "dtype": "bfloat16", "shape": [N, K],
         "nested_blocksize": 256, "nested_dtype": "float32", "nested_offset": 0.0521...}   (or __fp4)
    config.json "quantization_config": {"quant_method": "bitsandbytes", "load_in_4bit": true,
        "bnb_4bit_quant_type": "nf4"|"fp4", "bnb_4bit_use_double_quant": bool,
        "bnb_4bit_compute_dtype": "float16"|"bfloat16"|..., "bnb_4bit_quant_storage": "uint8", ...}

Value: ``dequantize_4bit(weight, quant_state)`` in the layer's ``dtype`` (the model dtype): absmax read
back as ``fl32(code2[q] * absmax2) + offset`` (double quantization), then ``fl32(table[c] * absmax)``
rounded once to the dtype; :func:`refsim.formats.bnb4.dequantize` on the CPU kernels (an FP4 code 8
reads -0.0, or +0.0 where the last dimension K is odd: the CPU op's torch fallback). The stored
``quant_map`` must be the code table (bitsandbytes' 4-bit kernels read their own table, not this
tensor); ``nested_quant_map`` is read as stored (the 8-bit kernel reads it).

Source: bitsandbytes 0.50.2 ``functional.py`` (``QuantState.as_dict``/``from_dict``,
``quantize_4bit``), ``utils.py`` (``pack_dict_to_tensor``), ``nn/modules.py`` (``Params4bit``);
transformers 5.24.0 ``quantizers/quantizer_bnb_4bit.py`` (``serialized_names``) and
``integrations/bitsandbytes.py`` (``Bnb4bitDeserialize``); checked against folders those versions wrote
(tests/io/data/bnb_*).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import ml_dtypes
import numpy as np

from refsim._validate import require_bool, require_choice, require_dtype, require_instance, require_path
from refsim.errors import CheckpointError, FormatRuleError, ShapeError
from refsim.formats import bnb4
from refsim.io.checkpoint import Checkpoint, check_layer, config_field, natural_key, read_json

__all__ = ["BnBLayer", "BnBReader", "BNB_VERSION", "MODEL_DTYPES", "QUANT_STATE_PREFIX", "bnb_quantization_config",
           "quantize_bnb_layer"]

#: the bitsandbytes release whose layout is matched
BNB_VERSION = "0.50.2"
#: the JSON blob's key: ``<L>.weight.quant_state.bitsandbytes__<quant_type>``
QUANT_STATE_PREFIX = "weight.quant_state.bitsandbytes__"
#: the blob's "dtype" -> the dequantized dtype
MODEL_DTYPES: dict[str, np.dtype] = {"float16": np.dtype(np.float16), "bfloat16": np.dtype(ml_dtypes.bfloat16),
                                     "float32": np.dtype(np.float32)}
#: bnb_4bit_quant_storage names -> the dtype ``<L>.weight`` is stored as
_STORAGE: dict[str, np.dtype] = {"uint8": np.dtype(np.uint8), "int8": np.dtype(np.int8),
                                 "float16": np.dtype(np.float16), "bfloat16": np.dtype(ml_dtypes.bfloat16),
                                 "float32": np.dtype(np.float32)}
#: the names after ``<L>.weight.`` that belong to a quantization state
_STATE_NAMES = ("absmax", "quant_map", "nested_absmax", "nested_quant_map", "quant_state")
_BLOB_KEYS = {"quant_type", "blocksize", "dtype", "shape", "nested_blocksize", "nested_dtype", "nested_offset"}


@dataclass(frozen=True)
class BnBLayer:
    """One bitsandbytes 4-bit linear as stored: ``packed`` uint8 (ceil(N*K/2),) (the weight's bytes),
    ``shape`` (N, K), ``kind`` "nf4"/"fp4", ``blocksize`` one of :data:`refsim.formats.bnb4.BLOCKSIZES`,
    ``dtype`` a key of :data:`MODEL_DTYPES`; either ``absmax`` float32 (B,) or the double quantization
    ``qabsmax`` uint8 (B,), ``absmax2`` float32 (ceil(B/256),), ``code2`` float32 (256,), ``offset``
    (a float32 value); ``storage`` the quant_storage name the weight was stored as."""

    name: str
    packed: np.ndarray
    shape: tuple[int, ...]
    kind: str
    blocksize: int
    dtype: str
    absmax: np.ndarray | None = None
    qabsmax: np.ndarray | None = None
    absmax2: np.ndarray | None = None
    code2: np.ndarray | None = None
    offset: float | None = None
    storage: str = "uint8"
    format = "bitsandbytes"
    bits = 4
    sym = True
    desc_act = False

    def __post_init__(self):
        check_layer(self, packed=1)
        require_choice("dtype", self.dtype, tuple(MODEL_DTYPES))
        require_choice("storage", self.storage, tuple(_STORAGE))
        if len(self.shape) != 2:
            raise ShapeError(f"BnBLayer.shape: a linear weight is (N, K); got {self.shape}")
        self.record()  # every rule of the format (sizes, dtypes, finite scales)

    def record(self) -> bnb4.BnB4:
        """The weight as :class:`refsim.formats.bnb4.BnB4` ((N, K), the CPU kernels' rules)."""
        return bnb4.BnB4(self.packed, self.absmax, tuple(self.shape), self.kind, self.blocksize, "cpu", self.qabsmax,
                         self.absmax2, self.code2, self.offset)

    @property
    def n(self) -> int:
        return self.shape[0]

    @property
    def k(self) -> int:
        return self.shape[1]

    @property
    def group_size(self) -> int:
        """Values per absmax: the blocksize (blocks run over the flattened (N, K) weight, not along K)."""
        return self.blocksize

    @property
    def double_quant(self) -> bool:
        return self.absmax is None

    def dequantize(self) -> np.ndarray:
        """(K, N) in :attr:`dtype` (refsim's orientation): bitsandbytes' ``dequantize_4bit``, transposed."""
        return np.ascontiguousarray(bnb4.dequantize(self.record(), MODEL_DTYPES[self.dtype]).T)

    def tensors(self) -> dict[str, np.ndarray]:
        """The layer's tensors as ``QuantState.as_dict(packed=True)`` names them (module docstring)."""
        packed = self.packed.view(_STORAGE[self.storage]) if self.packed.size % _STORAGE[self.storage].itemsize == 0 \
            else None
        if packed is None:
            raise FormatRuleError(f"{self.name}: {self.packed.size} packed bytes cannot be stored as {self.storage}")
        out = {f"{self.name}.weight": packed.reshape(-1, 1),
               f"{self.name}.weight.quant_map": bnb4.code_table(self.kind)}
        blob = {"quant_type": self.kind, "blocksize": self.blocksize, "dtype": self.dtype, "shape": list(self.shape)}
        if self.double_quant:
            out.update({f"{self.name}.weight.absmax": self.qabsmax, f"{self.name}.weight.nested_absmax": self.absmax2,
                        f"{self.name}.weight.nested_quant_map": self.code2})
            blob.update(nested_blocksize=bnb4.NESTED_BLOCKSIZE, nested_dtype="float32", nested_offset=self.offset)
        else:
            out[f"{self.name}.weight.absmax"] = self.absmax
        text = json.dumps(blob).encode("utf-8")
        out[f"{self.name}.{QUANT_STATE_PREFIX}{self.kind}"] = np.frombuffer(text, np.uint8).copy()
        return out


def quantize_bnb_layer(name: str, w: np.ndarray, kind: str, double_quant: bool) -> BnBLayer:
    """bitsandbytes' ``Params4bit`` quantization of a linear weight ``w`` (N, K) float16, bfloat16 or float32
    (PyTorch orientation; the model dtype, which becomes the layer's ``dtype``): ``quantize_4bit`` with
    blocksize 64 on the CPU (:func:`refsim.formats.bnb4.quantize`; bfloat16 widened to float32 exactly,
    as the kernel's ``A.float()``)."""
    require_instance("name", name, str)
    w = require_dtype("w", w, np.float16, ml_dtypes.bfloat16, np.float32)
    if w.ndim != 2:
        raise ShapeError(f"w: a linear weight is (N, K); got shape {w.shape}")
    kind = require_choice("kind", kind, bnb4.KINDS)
    double_quant = require_bool("double_quant", double_quant)
    dtype = {np.dtype(v): k for k, v in MODEL_DTYPES.items()}[w.dtype]
    r = bnb4.quantize(w if w.dtype != ml_dtypes.bfloat16 else w.astype(np.float32), kind, 64, double_quant)
    return BnBLayer(name, r.packed, tuple(w.shape), kind, 64, dtype, r.absmax, r.qabsmax, r.absmax2, r.code2, r.offset)


def bnb_quantization_config(kind: str, double_quant: bool, dtype: str) -> dict:
    """The ``quantization_config`` transformers' ``BitsAndBytesConfig(load_in_4bit=True, ...)`` saves
    (transformers 5.24.0's keys, in its order), ``dtype`` the compute dtype (a key of :data:`MODEL_DTYPES`)."""
    kind = require_choice("kind", kind, bnb4.KINDS)
    double_quant = require_bool("double_quant", double_quant)
    dtype = require_choice("dtype", dtype, tuple(MODEL_DTYPES))
    return {"_load_in_4bit": True, "_load_in_8bit": False, "bnb_4bit_compute_dtype": dtype,
            "bnb_4bit_quant_storage": "uint8", "bnb_4bit_quant_type": kind, "bnb_4bit_use_double_quant": double_quant,
            "llm_int8_enable_fp32_cpu_offload": False, "llm_int8_has_fp16_weight": False,
            "llm_int8_skip_modules": None, "llm_int8_threshold": 6.0, "load_in_4bit": True, "load_in_8bit": False,
            "quant_method": "bitsandbytes"}


class BnBReader(Checkpoint):
    """A transformers folder quantized by bitsandbytes to 4 bits (module docstring): ``layer_names()``
    (every ``<L>`` with a ``<L>.weight.absmax``), ``read_layer(name)`` -> :class:`BnBLayer`."""

    format = "bitsandbytes"
    suffixes = (("weight.absmax", "weight", "weight.quant_map"), ("weight.nested_absmax", "weight.nested_quant_map"))

    def __init__(self, path: str | os.PathLike) -> None:                  # noqa: D107 (class docstring)
        path = require_path("path", path)
        cfg_path = path / "config.json"
        if not cfg_path.is_file():
            raise CheckpointError(f"{path}: a bitsandbytes checkpoint must hold config.json; got none")
        qc = read_json(cfg_path).get("quantization_config")
        if not isinstance(qc, dict):
            raise CheckpointError(f"{cfg_path}: field 'quantization_config' must be an object; got {qc!r}")
        qc_path = Path(f"{cfg_path}:quantization_config")
        config_field(qc, "quant_method", qc_path, (str,), choices=("bitsandbytes",))
        if config_field(qc, "load_in_4bit", qc_path, (bool,), default=False) is not True:
            raise CheckpointError(f"{qc_path}: field 'load_in_4bit' must be true (refsim reads bitsandbytes' 4-bit "
                                  f"serialization, not LLM.int8()); got {qc.get('load_in_4bit')!r}")
        storage = config_field(qc, "bnb_4bit_quant_storage", qc_path, (str,), default="uint8", choices=tuple(_STORAGE))
        self._storage = storage
        super().__init__(path, qc, cfg_path)

    def _find_layers(self) -> list[str]:
        """Every ``<L>`` with ``<L>.weight.absmax`` (and ``<L>.weight``, ``<L>.weight.quant_map``); a
        quantization-state tensor without its layer's absmax is an error; other tensors (embeddings,
        norms, unquantized linears) are not layers."""
        layers = sorted({n[: -len(".weight.absmax")] for n in self._where if n.endswith(".weight.absmax")},
                        key=natural_key)
        for prefix in layers:
            for suf in ("weight", "weight.quant_map"):
                if f"{prefix}.{suf}" not in self._where:
                    raise CheckpointError(f"{self._where[prefix + '.weight.absmax'].name}: tensor {prefix + '.' + suf!r} "
                                          "must be present (a bitsandbytes layer has weight, weight.absmax, "
                                          "weight.quant_map); got no such tensor")
        have = set(layers)
        for n in self._where:
            head, sep, tail = n.rpartition(".weight.")
            if sep and tail.split(".")[0] in _STATE_NAMES and head not in have:
                raise CheckpointError(f"{self._where[n].name}: tensor {n!r} has no matching {head + '.weight.absmax'!r} "
                                      "(a quantization state without its layer)")
        if not layers:
            raise CheckpointError(f"{self.path}: a bitsandbytes checkpoint must hold at least one layer (tensors "
                                  "named '<layer>.weight.absmax'); got none")
        return layers

    def _layer_tensors(self, prefix: str) -> list[str]:
        return [n for n in self._where if n.startswith(prefix + ".weight") or n == prefix + ".bias"]

    def _blob(self, name: str) -> tuple[str, dict]:
        keys = [n for n in self._where if n.startswith(f"{name}.{QUANT_STATE_PREFIX}")]
        if len(keys) != 1 or keys[0][len(name) + 1 + len(QUANT_STATE_PREFIX):] not in bnb4.KINDS:
            raise CheckpointError(f"{self.path}: layer {name!r} must hold exactly one tensor "
                                  f"'{name}.{QUANT_STATE_PREFIX}nf4' or '...fp4'; got {keys}")
        key = keys[0]
        raw = self.tensor(key, dtype=np.uint8)
        where = f"{self.file_of(key).path.name}: tensor {key!r}"
        if raw.ndim != 1:
            raise CheckpointError(f"{where}: must be 1-D UTF-8 JSON bytes; got shape {raw.shape}")
        try:
            blob = json.loads(raw.tobytes().decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as err:
            raise CheckpointError(f"{where}: must hold UTF-8 JSON; got {type(err).__name__}: {err}") from None
        if not isinstance(blob, dict) or not set(blob) <= _BLOB_KEYS:
            raise CheckpointError(f"{where}: must be a JSON object with keys from {sorted(_BLOB_KEYS)}; got "
                                  f"{sorted(blob) if isinstance(blob, dict) else type(blob).__name__}")
        return key, blob

    def read_layer(self, name: str) -> BnBLayer:
        """The layer ``name``: tensors and the JSON blob checked (dtypes, shapes, keys), errors naming
        the file and tensor."""
        require_instance("name", name, str)
        self._require_layer(name)
        key, blob = self._blob(name)
        where = Path(f"{self.file_of(key).path}:{key}")
        kind = config_field(blob, "quant_type", where, (str,), choices=bnb4.KINDS)
        if not key.endswith("__" + kind):
            raise CheckpointError(f"{where}: field 'quant_type' must match the tensor name's {key.rsplit('__', 1)[1]!r}; "
                                  f"got {kind!r}")
        blocksize = config_field(blob, "blocksize", where, (int,), choices=bnb4.BLOCKSIZES)
        dtype = config_field(blob, "dtype", where, (str,), choices=tuple(MODEL_DTYPES))
        shape = config_field(blob, "shape", where, (list,))
        if len(shape) != 2 or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 1 for d in shape):
            raise CheckpointError(f"{where}: field 'shape' must be [N, K] of positive ints (a linear weight); got {shape!r}")
        n_el = shape[0] * shape[1]
        blocks = -(-n_el // blocksize)
        w = self.tensor(f"{name}.weight", dtype=_STORAGE[self._storage])
        if w.ndim != 2 or w.shape[1] != 1 or w.nbytes != (n_el + 1) // 2:
            raise CheckpointError(f"{self.file_of(name + '.weight').path.name}: tensor {name + '.weight'!r}: shape must "
                                  f"be ({(n_el + 1) // 2 // w.itemsize}, 1) {self._storage} for shape {shape}; got "
                                  f"{w.shape} {w.dtype}")
        packed = np.ascontiguousarray(w).view(np.uint8).reshape(-1)
        qmap = self.tensor(f"{name}.weight.quant_map", dtype=np.float32, shape=(16,))
        if qmap.view(np.uint32).tolist() != bnb4.code_table(kind).view(np.uint32).tolist():
            raise CheckpointError(f"{self.path}: tensor {name + '.weight.quant_map'!r} must be bitsandbytes' {kind} "
                                  "table (its 4-bit kernels read their own table, not this tensor); got other values")
        nested = "nested_offset" in blob
        have = [self.has(f"{name}.weight.nested_absmax"), self.has(f"{name}.weight.nested_quant_map")]
        if have != [nested, nested]:
            raise CheckpointError(f"{self.path}: layer {name!r}: double quantization needs nested_absmax, "
                                  f"nested_quant_map and the blob's nested_offset together; got tensors {have}, "
                                  f"nested_offset {'present' if nested else 'absent'}")
        args = {}
        if nested:
            config_field(blob, "nested_blocksize", where, (int,), choices=(bnb4.NESTED_BLOCKSIZE,))
            config_field(blob, "nested_dtype", where, (str,), choices=("float32",))
            offset = config_field(blob, "nested_offset", where, (float, int))
            args = dict(qabsmax=self.tensor(f"{name}.weight.absmax", dtype=np.uint8, shape=(blocks,)),
                        absmax2=self.tensor(f"{name}.weight.nested_absmax", dtype=np.float32,
                                            shape=(-(-blocks // bnb4.NESTED_BLOCKSIZE),)),
                        code2=self.tensor(f"{name}.weight.nested_quant_map", dtype=np.float32, shape=(256,)),
                        offset=float(offset))
            if not np.isfinite(args["offset"]):
                raise CheckpointError(f"{where}: field 'nested_offset' must be finite; got {offset!r}")
        else:
            args = dict(absmax=self.tensor(f"{name}.weight.absmax", dtype=np.float32, shape=(blocks,)))
        try:
            return BnBLayer(name, packed.copy(), tuple(shape), kind, blocksize, dtype, storage=self._storage, **args)
        except (FormatRuleError, ShapeError) as err:
            raise CheckpointError(f"{self.path}: layer {name!r}: {err}") from None
