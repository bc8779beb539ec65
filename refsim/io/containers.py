"""Marlin, Any-Precision, QIGen, Atom and 2/4/16 checkpoints on disk, and plain FP models.

Marlin (official ``marlin.Layer`` state: buffers ``B`` and ``s``; ``workspace`` is a
non-persistent scratch buffer of ``N / 128 * 16`` int32, recorded in the config, not stored)::

    <L>.B      int32 (K/16, 2N)    exactly refsim.formats.marlin.pack's B
    <L>.s      float16 (G, N)      exactly refsim.formats.marlin.pack's s (G = K/128, or 1)
    <L>.perm   int32 (K,)          only for act-order sources: Marlin row k is source row perm[k]
                                   (A's columns must be permuted the same way)
    refsim_checkpoint.json  {"format": "marlin", "bits": 4, "sym": true, "layers": {<L>: {"k", "n",
                             "group_size", "desc_act", "workspace_int32"}}}

Any-Precision (SNU-ARC/any-precision-llm ``any_precision/quantization/pack.py`` @ 0c93c228:
``<name>.qweight`` and ``<name>.lut{b}`` per layer, ``config.anyprec``; the official tool saves
``pytorch_model.bin``, refsim the same tensors as safetensors)::

    <L>.qweight  int32 (p, N, K/32)   refsim.formats.bitplane.pack of the (N, K) parent codes
    <L>.lut{b}   float16 (N, 2**b)    one table per b in seed..parent
    config.json  {"anyprec": {"seed_precision": s, "parent_precision": p, "arch_config": {}}}

refsim's own containers (documented in docs/formats/ and docs/io.md), ``refsim_checkpoint.json``
``{"format": ..., "layers": {<L>: {...}}}`` beside ``model.safetensors``:

    qigen          <L>.qweight int32 (K*bits/32*N,) refsim.formats.qigen.pack; <L>.qzeros, <L>.scales,
                   <L>.g_idx as GPTQ; per layer "bits", "k", "n", "mb", "tb", "order",
                   "group_size", "checkpoint_format"
    atom           <L>.q4 uint8 (N, (K-keeper)/2) refsim.formats.atom.pack_int4(q4.T); <L>.scale4
                   float16/float32 ((K-keeper)/group, N); <L>.q8 int8 (N, keeper) (q8.T);
                   <L>.scale8 (N,); <L>.reorder int64 (K,); per layer "k", "n", "group_size", "keeper"
    mixed_2_4_16   the ten arrays of refsim.formats.mixed_2_4_16.Packed2416 as <L>.<field>;
                   per layer "k", "n"

FP models (unquantized safetensors, e.g. all-MiniLM-L6-v2): the layers are the 2-D floating
``<L>.weight`` tensors (PyTorch (N, K) = (out, in)); ``read_layer`` returns W transposed to
refsim's (K, N).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from refsim._validate import (MAX_ELEMENTS, require_bits, require_bounded, require_choice, require_dtype,
                              require_instance, require_int, require_integer_array, require_path, require_shape)
from refsim.errors import CheckpointError, FormatRuleError, RefsimError, ShapeError
from refsim.formats import atom as atom_format
from refsim.formats import bitplane
from refsim.formats import gptq as gptq_format
from refsim.formats import marlin as marlin_format
from refsim.formats import mixed_2_4_16 as m2416
from refsim.formats import qigen as qigen_format
from refsim.io.checkpoint import (REFSIM_CONFIG, Checkpoint, check_layer, config_field, read_json,
                                  require_layers, require_out_folder, require_tensor_dict)
from refsim.io.hf_folder import save_model_tensors

__all__ = ["MarlinLayer", "AnyPrecisionLayer", "QIGenLayer", "AtomLayerFile", "Mixed2416Layer", "FPLayer",
           "MarlinReader", "AnyPrecisionReader", "QIGenReader", "AtomReader", "Mixed2416Reader", "FPReader",
           "write_refsim", "write_anyprec", "marlin_workspace_int32"]


def marlin_workspace_int32(n: int) -> int:
    """Size of the official ``marlin.Layer`` workspace buffer: ``N / 128 * 16`` int32 (zeroed locks).
    ``n``: a positive integer (Python int result)."""
    n = require_bounded("n", require_int("n", n, minimum=1), MAX_ELEMENTS)
    return n // 128 * 16


def _require_permutation(name: str, perm: np.ndarray, k: int) -> np.ndarray:
    """``perm`` int (K,) must hold each of 0..K-1 once (a row order the consumers index with)."""
    perm = require_shape(name, require_integer_array(name, perm), (k,))
    if not np.array_equal(np.sort(perm), np.arange(k)):
        raise FormatRuleError(f"{name}: must be a permutation of 0..{k - 1}; got repeated or out-of-range entries "
                              f"(range [{int(perm.min())}, {int(perm.max())}])")
    return perm


def _guard(where: str, fn, *args):
    """Run a format-module check and re-raise its RefsimError with the file/tensor prefix."""
    try:
        return fn(*args)
    except RefsimError as err:
        raise type(err)(f"{where}: {err}") from None


# ----------------------------------------------------------------------------------------------
# layers
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MarlinLayer:
    """B int32 (K/16, 2N), s float16 (G, N), perm int32 (K,) or None (act-order sources)."""

    name: str
    B: np.ndarray
    s: np.ndarray
    perm: np.ndarray | None = None
    format = "marlin"
    bits = 4
    sym = True

    def __post_init__(self):
        check_layer(self, B=2, s=2, perm=1)
        _guard(f"MarlinLayer {self.name!r}", marlin_format._check_packed, self.B, self.s)  # K, N, G rules
        if self.perm is not None:
            _require_permutation("perm", self.perm, self.k)

    @property
    def k(self) -> int:
        return self.B.shape[0] * 16

    @property
    def n(self) -> int:
        return self.B.shape[1] // 2

    @property
    def group_size(self) -> int | None:
        return None if self.s.shape[0] == 1 else self.k // self.s.shape[0]

    @property
    def desc_act(self) -> bool:
        return self.perm is not None

    def dequantize(self) -> np.ndarray:
        """float16 (K, N) scaled weights ``fp16((q - 8) * s)`` in the SOURCE row order."""
        w = marlin_format.effective_weights(self.B, self.s)
        if self.perm is None:
            return w
        out = np.empty_like(w)
        out[self.perm] = w
        return out

    def tensors(self) -> dict[str, np.ndarray]:
        out = {f"{self.name}.B": self.B, f"{self.name}.s": self.s}
        if self.perm is not None:
            out[f"{self.name}.perm"] = self.perm
        return out

    def layer_config(self) -> dict:
        return {"k": self.k, "n": self.n, "group_size": self.group_size, "desc_act": self.desc_act,
                "workspace_int32": marlin_workspace_int32(self.n)}


@dataclass(frozen=True)
class AnyPrecisionLayer:
    """qweight int32 (p, N, K/32) and luts {b: float16 (N, 2**b)} for b = seed..parent."""

    name: str
    qweight: np.ndarray
    luts: dict
    seed_bits: int
    format = "anyprec"
    group_size = None
    desc_act = False
    sym = False

    def __post_init__(self):
        check_layer(self, qweight=3)
        require_instance("luts", self.luts, dict)
        p, n = self.qweight.shape[0], self.qweight.shape[1]
        require_bits(p, bitplane.SUPPORTED_BITS)
        seed = require_int("seed_bits", self.seed_bits, minimum=1)
        if seed > p:
            raise FormatRuleError(f"seed_bits: must lie in [1, parent bits={p}]; got {seed}")
        if set(self.luts) != set(range(seed, p + 1)) or any(type(b) is not int for b in self.luts):
            raise FormatRuleError(f"luts: one table per bit-width {seed}..{p} (int keys); got keys "
                                  f"{sorted(map(repr, self.luts))[:8]}")
        for b, lut in self.luts.items():
            require_shape(f"luts[{b}]", require_dtype(f"luts[{b}]", lut, np.float16), (n, 1 << b))

    @property
    def bits(self) -> int:
        return self.qweight.shape[0]

    @property
    def k(self) -> int:
        return self.qweight.shape[2] * 32

    @property
    def n(self) -> int:
        return self.qweight.shape[1]

    def dequantize(self, bits: int | None = None) -> np.ndarray:
        """float16 (K, N): the ``bits``-bit model (default: the parent), ``lut_b[n, prefix code]``."""
        b = self.bits if bits is None else bits
        return np.ascontiguousarray(bitplane.dequantize(self.qweight, self.luts[b], b).T)

    def tensors(self) -> dict[str, np.ndarray]:
        out = {f"{self.name}.qweight": self.qweight}
        out.update({f"{self.name}.lut{b}": lut for b, lut in self.luts.items()})
        return out


@dataclass(frozen=True)
class QIGenLayer:
    """QIGen-blocked qweight (flat int32) plus GPTQ scales/zeros/g_idx and the layout."""

    name: str
    packed: np.ndarray
    layout: qigen_format.QIGenLayout
    qzeros: np.ndarray
    scales: np.ndarray
    g_idx: np.ndarray
    group_size: int | None
    checkpoint_format: str
    format = "qigen"
    desc_act = False
    sym = False

    def __post_init__(self):
        check_layer(self, packed=1, qzeros=2, scales=2, g_idx=1)
        require_instance("layout", self.layout, qigen_format.QIGenLayout)
        require_shape("packed", self.packed, (self.layout.n_words,))
        self.gptq()                                   # the GPTQ rules: scales, qzeros, g_idx in [0, G)
        if self.group_size is not None:
            require_int("group_size", self.group_size, minimum=1)
            if self.scales.shape[0] != -(-self.k // self.group_size):
                raise ShapeError(f"scales: must have ceil(K/group_size) = {-(-self.k // self.group_size)} rows; "
                                 f"got {self.scales.shape[0]}")

    @property
    def bits(self) -> int:
        return self.layout.bits

    @property
    def k(self) -> int:
        return self.layout.k

    @property
    def n(self) -> int:
        return self.layout.n

    def gptq(self) -> gptq_format.GPTQCheckpoint:
        """The GPTQ checkpoint this layer re-blocks (qweight unpacked from the QIGen order)."""
        qweight = qigen_format.unpack(self.packed, self.layout)
        return gptq_format.GPTQCheckpoint(qweight, self.qzeros, self.scales, self.g_idx, self.bits,
                                          self.checkpoint_format)

    def dequantize(self) -> np.ndarray:
        return gptq_format.dequantize(self.gptq())

    def tensors(self) -> dict[str, np.ndarray]:
        return {f"{self.name}.qweight": self.packed, f"{self.name}.qzeros": self.qzeros,
                f"{self.name}.scales": self.scales, f"{self.name}.g_idx": self.g_idx}

    def layer_config(self) -> dict:
        L = self.layout
        return {"bits": L.bits, "k": L.k, "n": L.n, "mb": L.mb, "tb": L.tb, "order": L.order,
                "group_size": self.group_size, "checkpoint_format": self.checkpoint_format}


@dataclass(frozen=True)
class AtomLayerFile:
    """Atom weights (refsim.formats.atom.AtomWeights, reordered rows) and the reorder index."""

    name: str
    weights: atom_format.AtomWeights
    reorder: np.ndarray
    group_size: int
    format = "atom"
    bits = 4
    desc_act = True
    sym = True

    def __post_init__(self):
        check_layer(self, reorder=1)
        require_instance("weights", self.weights, atom_format.AtomWeights)
        _require_permutation("reorder", self.reorder, self.k)
        group = require_int("group_size", self.group_size, minimum=1)
        if self.weights.q4.shape[0] != group * self.weights.scale4.shape[0]:
            raise ShapeError(f"group_size: the {self.weights.q4.shape[0]} INT4 rows must be the "
                             f"{self.weights.scale4.shape[0]} groups of scale4 times group_size; got {group}")

    @property
    def keeper(self) -> int:
        return self.weights.q8.shape[0]

    @property
    def k(self) -> int:
        return self.weights.q4.shape[0] + self.keeper

    @property
    def n(self) -> int:
        return self.weights.q4.shape[1]

    def dequantize(self) -> np.ndarray:
        """float32 (K, N) fake-quant weights in the ORIGINAL row order."""
        w = atom_format.dequantize_weights(self.weights, np.float32)
        return atom_format.unpermute(w, self.reorder, axis=0)

    def tensors(self) -> dict[str, np.ndarray]:
        w = self.weights
        return {f"{self.name}.q4": atom_format.pack_int4(np.ascontiguousarray(w.q4.T)),
                f"{self.name}.scale4": w.scale4, f"{self.name}.q8": np.ascontiguousarray(w.q8.T),
                f"{self.name}.scale8": w.scale8, f"{self.name}.reorder": self.reorder.astype(np.int64)}

    def layer_config(self) -> dict:
        return {"k": self.k, "n": self.n, "group_size": self.group_size, "keeper": self.keeper}


@dataclass(frozen=True)
class Mixed2416Layer:
    """A packed 2/4/16 layer (refsim.formats.mixed_2_4_16.Packed2416)."""

    name: str
    packed: m2416.Packed2416
    k: int
    format = "mixed_2_4_16"

    def __post_init__(self):
        check_layer(self)
        require_instance("packed", self.packed, m2416.Packed2416)
        if self.k != m2416.G1 * self.packed.group_bits.size:
            raise ShapeError(f"k: must be 16 x the {self.packed.group_bits.size} groups of packed; got {self.k}")
    bits = 2
    group_size = m2416.G1
    desc_act = False
    sym = False

    @property
    def n(self) -> int:
        return self.packed.w_main.shape[0]

    def dequantize(self) -> np.ndarray:
        return m2416.dequantize(m2416.unpack(self.packed))

    def tensors(self) -> dict[str, np.ndarray]:
        return {f"{self.name}.{f}": getattr(self.packed, f) for f in _M2416_FIELDS}

    def layer_config(self) -> dict:
        return {"k": self.k, "n": self.n}


_M2416_FIELDS = ("w_main", "w_side", "meta2", "meta4", "s2", "z2", "group_bits", "row_ptr", "col", "val")


@dataclass(frozen=True)
class FPLayer:
    """An unquantized linear weight: W float (K, N) (the file's (N, K) transposed)."""

    name: str
    W: np.ndarray
    format = "fp"
    bits = 16
    group_size = None
    desc_act = False
    sym = False

    def __post_init__(self):
        check_layer(self, W=2)

    @property
    def k(self) -> int:
        return self.W.shape[0]

    @property
    def n(self) -> int:
        return self.W.shape[1]

    def dequantize(self) -> np.ndarray:
        return self.W


# ----------------------------------------------------------------------------------------------
# readers
# ----------------------------------------------------------------------------------------------
class _RefsimReader(Checkpoint):
    """Common part of refsim's containers: ``refsim_checkpoint.json`` lists every layer."""

    def __init__(self, path: Path) -> None:
        path = require_path("path", path)
        cpath = path / REFSIM_CONFIG
        cfg = read_json(cpath)
        layers = config_field(cfg, "layers", cpath, (dict,))
        for name, entry in layers.items():
            if not isinstance(entry, dict):
                raise CheckpointError(f"{cpath}: layers[{name!r}] must be an object; got {entry!r}")
        super().__init__(path, cfg, cpath)
        found, listed = set(self._layers), set(layers)
        if found != listed:
            extra = sorted(found - listed)[:3] or sorted(listed - found)[:3]
            raise CheckpointError(f"{cpath}: 'layers' must list exactly the layers in the tensors "
                                  f"({len(found)} found, {len(listed)} listed); first difference {extra}")
        self.layer_cfg = layers

    def _int(self, name: str, key: str, *, default=..., allow_none: bool = False) -> int | None:
        kinds = (int, type(None)) if allow_none else (int,)
        v = config_field(self.layer_cfg[name], key, self.config_path, kinds, default=default)
        if v is not None and v < 0:
            raise CheckpointError(f"{self.config_path}: layers[{name!r}].{key} must be >= 0; got {v}")
        return v


class MarlinReader(_RefsimReader):
    format = "marlin"
    suffixes = (("B", "s"), ("perm",))

    def read_layer(self, name: str) -> MarlinLayer:
        self._require_layer(name)
        kb, w = self.file_of(f"{name}.B").require_shape(f"{name}.B", (None, None))
        B = self.tensor(f"{name}.B", dtype=np.int32)
        s = self.tensor(f"{name}.s", dtype=np.float16, shape=(None, w // 2))
        where = f"{self._where[name + '.B'].name}: tensors {name + '.B'!r}/{name + '.s'!r}"
        _guard(where, marlin_format.unpack, B, s)  # the format's shape rules (K % 128, N % 256, G)
        perm = None
        if self.has(f"{name}.perm"):
            perm = self.tensor(f"{name}.perm", dtype=(np.int32, np.int64), shape=(16 * kb,)).astype(np.int32)
            if not np.array_equal(np.sort(perm), np.arange(16 * kb)):
                raise CheckpointError(f"{self._where[name + '.perm'].name}: tensor {name + '.perm'!r}: must be a "
                                      "permutation of 0..K-1; got repeated or out-of-range entries")
        k = self._int(name, "k")
        n = self._int(name, "n")
        if (k, n) != (16 * kb, w // 2):
            raise CheckpointError(f"{self.config_path}: layers[{name!r}] says K={k}, N={n}; the tensors hold "
                                  f"K={16 * kb}, N={w // 2}")
        return MarlinLayer(name, B, s, perm)


class AnyPrecisionReader(Checkpoint):
    format = "anyprec"
    suffixes = (("qweight",), ())

    def __init__(self, path: Path) -> None:
        path = require_path("path", path)
        cpath = path / "config.json"
        ap = read_json(cpath).get("anyprec")
        if not isinstance(ap, dict):
            raise CheckpointError(f"{cpath}: field 'anyprec' must be an object; got {ap!r}")
        self.seed_bits = config_field(ap, "seed_precision", cpath, (int,))
        self.parent_bits = config_field(ap, "parent_precision", cpath, (int,), choices=bitplane.SUPPORTED_BITS)
        if not 1 <= self.seed_bits <= self.parent_bits:
            raise CheckpointError(f"{cpath}: anyprec.seed_precision must lie in [1, parent_precision="
                                  f"{self.parent_bits}]; got {self.seed_bits}")
        super().__init__(path, ap, cpath)

    def read_layer(self, name: str) -> AnyPrecisionLayer:
        self._require_layer(name)
        p = self.parent_bits
        _, n, kw = self.file_of(f"{name}.qweight").require_shape(f"{name}.qweight", (p, None, None))
        qweight = self.tensor(f"{name}.qweight", dtype=np.int32)
        _guard(f"{self._where[name + '.qweight'].name}: tensor {name + '.qweight'!r}", bitplane.unpack, qweight, p)
        luts = {}
        for b in range(self.seed_bits, p + 1):
            t = f"{name}.lut{b}"
            lut = self.tensor(t, dtype=np.float16, shape=(n, 1 << b))
            if not np.isfinite(lut).all():
                raise CheckpointError(f"{self._where[t].name}: tensor {t!r}: table entries must be finite; got NaN/Inf")
            luts[b] = lut
        return AnyPrecisionLayer(name, qweight, luts, self.seed_bits)


class QIGenReader(_RefsimReader):
    format = "qigen"
    suffixes = (("qweight", "qzeros", "scales", "g_idx"), ())

    def read_layer(self, name: str) -> QIGenLayer:
        self._require_layer(name)
        c = self.layer_cfg[name]
        cp = self.config_path
        layout = _guard(f"{cp}: layers[{name!r}]", lambda: qigen_format.QIGenLayout(
            config_field(c, "bits", cp, (int,)), config_field(c, "k", cp, (int,)), config_field(c, "n", cp, (int,)),
            config_field(c, "mb", cp, (int,)), config_field(c, "tb", cp, (int,)),
            config_field(c, "order", cp, (str,), default="panel")))
        gs = config_field(c, "group_size", cp, (int, type(None)))
        fmt = config_field(c, "checkpoint_format", cp, (str,), choices=gptq_format.CHECKPOINT_FORMATS)
        g = 1 if gs is None else -(-layout.k // gs)
        packed = self.tensor(f"{name}.qweight", dtype=np.int32, shape=(layout.n_words,))
        qzeros = self.tensor(f"{name}.qzeros", dtype=np.int32, shape=(g, layout.n * layout.bits // 32))
        scales = self.tensor(f"{name}.scales", dtype=np.float16, shape=(g, layout.n))
        g_idx = self.tensor(f"{name}.g_idx", dtype=np.int32, shape=(layout.k,))
        if g_idx.min() < 0 or g_idx.max() >= g:
            raise CheckpointError(f"{self._where[name + '.g_idx'].name}: tensor {name + '.g_idx'!r}: entries must "
                                  f"lie in [0, {g - 1}]; got range [{int(g_idx.min())}, {int(g_idx.max())}]")
        return QIGenLayer(name, packed, layout, qzeros, scales, g_idx, gs, fmt)


class AtomReader(_RefsimReader):
    format = "atom"
    suffixes = (("q4", "scale4", "q8", "scale8", "reorder"), ())

    def read_layer(self, name: str) -> AtomLayerFile:
        self._require_layer(name)
        k, n = self._int(name, "k"), self._int(name, "n")
        gs, keeper = self._int(name, "group_size"), self._int(name, "keeper")
        if not (gs and k > keeper and (k - keeper) % gs == 0 and n % 2 == 0):
            raise CheckpointError(f"{self.config_path}: layers[{name!r}]: need group_size > 0 dividing "
                                  f"K - keeper and N even; got k={k}, n={n}, group_size={gs}, keeper={keeper}")
        kb = k - keeper
        q4p = self.tensor(f"{name}.q4", dtype=np.uint8, shape=(n, kb // 2))
        scale4 = self.tensor(f"{name}.scale4", dtype=(np.float16, np.float32), shape=(kb // gs, n))
        q8t = self.tensor(f"{name}.q8", dtype=np.int8, shape=(n, keeper))
        scale8 = self.tensor(f"{name}.scale8", dtype=scale4.dtype, shape=(n,))
        reorder = self.tensor(f"{name}.reorder", dtype=np.int64, shape=(k,))
        if not np.array_equal(np.sort(reorder), np.arange(k)):
            raise CheckpointError(f"{self._where[name + '.reorder'].name}: tensor {name + '.reorder'!r}: must be a "
                                  "permutation of 0..K-1; got repeated or out-of-range entries")
        if not np.array_equal(scale4[:, 0::2], scale4[:, 1::2]):
            raise CheckpointError(f"{self._where[name + '.scale4'].name}: tensor {name + '.scale4'!r}: columns 2p "
                                  "and 2p+1 must share a scale (Atom's channel_group=2); got unequal pairs")
        for t, a in ((f"{name}.scale4", scale4), (f"{name}.scale8", scale8)):
            if not np.isfinite(a).all():
                raise CheckpointError(f"{self._where[t].name}: tensor {t!r}: scales must be finite; got NaN/Inf")
        q4 = np.ascontiguousarray(atom_format.unpack_int4(q4p).T)
        w = atom_format.AtomWeights(q4, scale4, np.ascontiguousarray(q8t.T), scale8)
        return AtomLayerFile(name, w, reorder, gs)


class Mixed2416Reader(_RefsimReader):
    format = "mixed_2_4_16"
    suffixes = (_M2416_FIELDS, ())

    _DTYPES = {"w_main": np.uint32, "w_side": np.uint32, "meta2": np.uint16, "meta4": np.uint8, "s2": np.float16,
               "z2": np.uint16, "group_bits": np.uint8, "row_ptr": np.int32, "col": np.uint16, "val": np.float16}

    def read_layer(self, name: str) -> Mixed2416Layer:
        self._require_layer(name)
        k, n = self._int(name, "k"), self._int(name, "n")
        if k == 0 or n == 0 or k % m2416.G1 or n % m2416.G2:
            raise CheckpointError(f"{self.config_path}: layers[{name!r}]: K and N must be positive multiples "
                                  f"of 16; got k={k}, n={n}")
        g = k // m2416.G1
        a = {f: self.tensor(f"{name}.{f}", dtype=dt) for f, dt in self._DTYPES.items()}
        where = f"{self._where[name + '.w_main'].name}: layer {name!r}"
        shapes = {"w_main": (n, None, 4), "w_side": (n, None), "meta2": (n, None), "meta4": (n, None),
                  "s2": (g, n // m2416.G2), "z2": (g, n // m2416.G2), "group_bits": (g,), "row_ptr": (n + 1,),
                  "col": (None,), "val": (None,)}
        for f, shp in shapes.items():
            self.file_of(f"{name}.{f}").require_shape(f"{name}.{f}", shp)
        gb = a["group_bits"]
        if not np.isin(gb, (2, 4)).all():
            raise CheckpointError(f"{where}: group_bits must be 2 or 4; got {sorted(set(gb.tolist()))[:4]}")
        n4, n2 = int((gb == 4).sum()), int((gb == 2).sum())
        if a["w_side"].shape[1] != n4 or a["meta4"].shape[1] != n4 or a["meta2"].shape[1] != -(-n2 // 3) \
                or a["w_main"].shape[1] != m2416._units(n2, n4):
            raise CheckpointError(f"{where}: w_main/w_side/meta2/meta4 widths must follow group_bits "
                                  f"({n4} 4-bit and {n2} 2-bit groups); got {a['w_main'].shape}, "
                                  f"{a['w_side'].shape}, {a['meta2'].shape}, {a['meta4'].shape}")
        _guard(where, lambda: m2416.check_csr(a["row_ptr"], a["col"], a["val"], n_rows=n, n_cols=k))
        return Mixed2416Layer(name, m2416.Packed2416(**a), k)


class FPReader(Checkpoint):
    """Unquantized safetensors (a file or a directory): 2-D floating ``<L>.weight`` tensors."""

    format = "fp"
    suffixes = (("weight",), ())
    FLOATS = ("F16", "BF16", "F32", "F64")

    def _find_layers(self) -> list[str]:
        from refsim.io.checkpoint import natural_key

        names = [n[: -len(".weight")] for n in self._where if n.endswith(".weight")
                 and len(self.shape(n)) == 2 and self.file_of(n).dtype_name(n) in self.FLOATS]
        if not names:
            raise CheckpointError(f"{self.path}: an FP model must hold 2-D floating '<layer>.weight' tensors; got none")
        return sorted(names, key=natural_key)

    def read_layer(self, name: str) -> FPLayer:
        self._require_layer(name)
        w = self.tensor(f"{name}.weight")
        if not np.isfinite(w.astype(np.float32)).all():
            raise CheckpointError(f"{self._where[name + '.weight'].name}: tensor {name + '.weight'!r}: weights must "
                                  "be finite; got NaN/Inf")
        return FPLayer(name, np.ascontiguousarray(w.T))


# ----------------------------------------------------------------------------------------------
# writers
# ----------------------------------------------------------------------------------------------
def write_refsim(out: Path, fmt: str, layers: list, extra: dict | None = None,
                 extra_tensors: dict | None = None) -> None:
    """Write a refsim container (marlin, qigen, atom, mixed_2_4_16) into the folder ``out``:
    ``model.safetensors`` (every layer's ``tensors()``) and ``refsim_checkpoint.json``.

    ``out`` an existing folder; ``layers`` a non-empty list of the format's layer class
    (MarlinLayer, QIGenLayer, AtomLayerFile, Mixed2416Layer); ``extra`` a dict of extra config
    fields or None; ``extra_tensors`` name -> array or None (written unchanged)."""
    out = require_out_folder("out", out)
    fmt = require_choice("fmt", fmt, tuple(_WRITE_KINDS))
    layers = require_layers("layers", layers, _WRITE_KINDS[fmt])
    if extra is not None:
        require_instance("extra", extra, dict)
    tensors = require_tensor_dict("extra_tensors", extra_tensors)
    cfg = {"format": fmt, **(extra or {}), "layers": {}}
    for lay in layers:
        tensors.update(lay.tensors())
        cfg["layers"][lay.name] = lay.layer_config()
    save_model_tensors(out, tensors, {"format": "refsim-" + fmt})
    (out / REFSIM_CONFIG).write_text(json.dumps(cfg, indent=2) + "\n")


def write_anyprec(out: Path, layers: list[AnyPrecisionLayer], extra_tensors: dict | None = None) -> None:
    """Write ``model.safetensors`` and ``config.json`` with the official ``anyprec`` block.

    ``out`` an existing folder; ``layers`` a non-empty list of AnyPrecisionLayer sharing one seed
    and one parent precision; ``extra_tensors`` name -> array or None (written unchanged)."""
    out = require_out_folder("out", out)
    layers = require_layers("layers", layers, AnyPrecisionLayer)
    extra_tensors = require_tensor_dict("extra_tensors", extra_tensors)
    seeds = {lay.seed_bits for lay in layers}
    parents = {lay.bits for lay in layers}
    if len(seeds) != 1 or len(parents) != 1:
        raise FormatRuleError(f"layers: one seed and one parent precision per model; got {seeds}, {parents}")
    tensors = dict(extra_tensors or {})
    for lay in layers:
        tensors.update(lay.tensors())
    save_model_tensors(out, tensors, {"format": "pt"})
    cfg = {"anyprec": {"seed_precision": seeds.pop(), "parent_precision": parents.pop(), "arch_config": {}}}
    (out / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")


_WRITE_KINDS = {"marlin": MarlinLayer, "qigen": QIGenLayer, "atom": AtomLayerFile, "mixed_2_4_16": Mixed2416Layer}
