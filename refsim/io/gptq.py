"""GPTQ (AutoGPTQ / GPTQModel) and AWQ (AutoAWQ GEMM) checkpoints on disk.

GPTQ, per linear layer ``<L>`` (Hugging Face names, e.g. ``model.layers.0.self_attn.q_proj``)::

    <L>.qweight  int32 (K*bits/32, N)     codes packed along K      refsim.formats.gptq
    <L>.qzeros   int32 (G, N*bits/32)     zeros packed along N (v1: zero - 1, v2: zero)
    <L>.scales   float16 (G, N)           G = ceil(K / group_size), 1 for group_size -1
    <L>.g_idx    int32 (K,)               group of input row k (act-order: any order)
    <L>.bias     float16 (N,)             optional
    quantize_config.json   {"bits", "group_size" (-1 = per-channel), "desc_act", "sym",
                            "checkpoint_format": "gptq" | "gptq_v2", "quant_method": "gptq", ...}
                           (or the same object under config.json "quantization_config")

Cross-field rules checked on every layer read: the four shapes agree on K, N, G and bits;
``g_idx`` lies in [0, G) and, without ``desc_act``, equals ``k // group_size``; with ``sym`` every
zero point is ``2**(bits-1)`` (v1 stores ``2**(bits-1) - 1``). A v1 zero field holding all ones
(``zero - 1`` of a zero of 0 wrapped, see refsim.formats.gptq) is reported, not refused:
AutoGPTQ's own loaders read it (as ``2**bits``).

AWQ GEMM, per layer::

    <L>.qweight  int32 (K, N/8)   <L>.qzeros int32 (G, N/8)   <L>.scales float16 (G, N)
    config.json "quantization_config": {"quant_method": "awq", "bits": 4, "group_size",
                                        "zero_point": true, "version": "gemm"}
    (AutoAWQ's older quant_config.json: {"w_bit", "q_group_size", "zero_point", "version"})

Sources: AutoGPTQ ``auto_gptq/modeling/_base.py`` (``save_quantized``: quantize_config.json and
the ``QuantLinear`` buffers) and ``nn_modules/qlinear/qlinear_cuda.py`` (buffer shapes), commit
058fd80a72d63d992347e3a23dcd5757449a9e2d; AutoAWQ ``awq/modules/linear/gemm.py`` (``WQLinear_GEMM``
buffers), commit d9dc8e564fed1527be2a9d8d5c74daf3823c3203.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from refsim._validate import (require_bits, require_bool, require_choice, require_instance, require_int, require_path,
                              require_shape)
from refsim.errors import CheckpointError, FormatRuleError, ShapeError
from refsim.formats import awq as awq_format
from refsim.formats import gptq as gptq_format
from refsim.io.checkpoint import (Checkpoint, check_layer, config_field, read_json, require_layers,
                                  require_out_folder, require_tensor_dict)
from refsim.io.hf_folder import save_model_tensors

__all__ = ["GPTQLayer", "AWQLayer", "GPTQReader", "AWQReader", "write_gptq", "write_awq", "gptq_config"]


def _require_positive_scales(fname: str, name: str, scales: np.ndarray) -> None:
    """GPTQ and AWQ quantizers only produce finite scales > 0 (a zero range is widened, AutoAWQ clamps to
    1e-5): anything else is a corrupt file, refused by name and value."""
    ok = np.isfinite(scales) & (scales > 0)
    if not ok.all():
        raise CheckpointError(f"{fname}: tensor {name + '.scales'!r}: scales must be finite and > 0; "
                              f"got {float(scales[~ok][0])}")


def _check_bias(bias: np.ndarray | None, n: int) -> None:
    """A layer's bias: None or (N,) (one per output column)."""
    if bias is not None:
        require_shape("bias", bias, (n,))


def _g_rows(k: int, group_size: int | None) -> int:
    return 1 if group_size is None else -(-k // group_size)


@dataclass(frozen=True)
class GPTQLayer:
    """One GPTQ layer: ``ckpt`` (:class:`refsim.formats.gptq.GPTQCheckpoint`) plus the config
    facts that apply to it and the optional ``bias`` float16 (N,)."""

    name: str
    ckpt: gptq_format.GPTQCheckpoint
    group_size: int | None
    desc_act: bool
    sym: bool
    bias: np.ndarray | None = None
    format = "gptq"

    def __post_init__(self):
        check_layer(self, bias=1)
        require_instance("ckpt", self.ckpt, gptq_format.GPTQCheckpoint)
        gs = None if self.group_size is None else require_int("group_size", self.group_size, minimum=1)
        if self.ckpt.scales.shape[0] != _g_rows(self.k, gs):
            raise ShapeError(f"group_size: the checkpoint's {self.ckpt.scales.shape[0]} scale rows must be "
                             f"ceil(K/group_size) = {_g_rows(self.k, gs)} for K={self.k}; got group_size={gs}")
        _check_bias(self.bias, self.n)

    @property
    def bits(self) -> int:
        return self.ckpt.bits

    @property
    def k(self) -> int:
        return self.ckpt.k

    @property
    def n(self) -> int:
        return self.ckpt.n

    def zeros(self) -> np.ndarray:
        """int32 (G, N) zero points as AutoGPTQ's torch fallback reads them (v1: ``field + 1``)."""
        return gptq_format.unpack_qzeros(self.ckpt.qzeros, self.bits, self.n, self.ckpt.checkpoint_format)

    def v1_overflow_fields(self) -> int:
        """Number of v1 zero fields holding all ones (a zero of 0 stored as ``-1``); 0 for v2."""
        if self.ckpt.checkpoint_format != "gptq":
            return 0
        return int((self.zeros() == (1 << self.bits)).sum())

    def dequantize(self) -> np.ndarray:
        """float16 (K, N), AutoGPTQ's torch fallback arithmetic (refsim.formats.gptq.dequantize)."""
        return gptq_format.dequantize(self.ckpt)

    def tensors(self) -> dict[str, np.ndarray]:
        out = {f"{self.name}.qweight": self.ckpt.qweight, f"{self.name}.qzeros": self.ckpt.qzeros,
               f"{self.name}.scales": self.ckpt.scales, f"{self.name}.g_idx": self.ckpt.g_idx}
        if self.bias is not None:
            out[f"{self.name}.bias"] = self.bias
        return out


def gptq_config(bits: int, group_size: int | None, desc_act: bool, sym: bool,
                checkpoint_format: str = "gptq") -> dict:
    """The quantize_config.json object AutoGPTQ / GPTQModel write (Python values, whatever NumPy
    scalars came in: the object is written as JSON)."""
    bits = require_bits(bits, gptq_format.BITS)
    group_size = None if group_size is None else require_int("group_size", group_size, minimum=1)
    desc_act, sym = require_bool("desc_act", desc_act), require_bool("sym", sym)
    checkpoint_format = require_choice("checkpoint_format", checkpoint_format, gptq_format.CHECKPOINT_FORMATS)
    return {"bits": bits, "group_size": -1 if group_size is None else group_size, "desc_act": desc_act,
            "sym": sym, "checkpoint_format": checkpoint_format, "quant_method": "gptq",
            "static_groups": False, "true_sequential": True, "damp_percent": 0.01, "lm_head": False,
            "pack_dtype": "int32"}


class GPTQReader(Checkpoint):
    """A GPTQ checkpoint directory (see the module docstring)."""

    format = "gptq"
    suffixes = (("qweight", "qzeros", "scales"), ("g_idx", "bias"))

    def __init__(self, path: Path) -> None:
        path = require_path("path", path)
        cpath = path / "quantize_config.json"
        if cpath.is_file():
            cfg = read_json(cpath)
        else:
            cpath = path / "config.json"
            cfg = read_json(cpath).get("quantization_config")
            if not isinstance(cfg, dict):
                raise CheckpointError(f"{cpath}: field 'quantization_config' must be an object; got {cfg!r}")
        self.bits = config_field(cfg, "bits", cpath, (int,), choices=gptq_format.BITS)
        gs = config_field(cfg, "group_size", cpath, (int,))
        if gs != -1 and gs < 1:
            raise CheckpointError(f"{cpath}: field 'group_size' must be -1 (per-channel) or positive; got {gs}")
        self.group_size = None if gs == -1 else gs
        self.desc_act = config_field(cfg, "desc_act", cpath, (bool,), default=False)
        self.sym = config_field(cfg, "sym", cpath, (bool,), default=True)
        fmt = config_field(cfg, "checkpoint_format", cpath, (str,), default="gptq")
        if fmt == "gptq_v1":
            fmt = "gptq"
        if fmt not in gptq_format.CHECKPOINT_FORMATS:
            raise CheckpointError(f"{cpath}: field 'checkpoint_format' must be one of "
                                  f"{list(gptq_format.CHECKPOINT_FORMATS)}; got {fmt!r}")
        self.checkpoint_format = fmt
        super().__init__(path, cfg, cpath)

    def read_layer(self, name: str) -> GPTQLayer:
        """Read and validate one layer (see the module's cross-field rules)."""
        self._require_layer(name)
        b = self.bits
        kw, n = self.file_of(f"{name}.qweight").require_shape(f"{name}.qweight", (None, None))
        k = kw * 32 // b
        if kw * 32 % b or k % 32 or n % 32 or n == 0 or k == 0:
            raise CheckpointError(f"{self._where[name + '.qweight'].name}: tensor {name + '.qweight'!r}: shape "
                                  f"must be (K*{b}/32, N) with K and N positive multiples of 32; got {(kw, n)}")
        g = _g_rows(k, self.group_size)
        qweight = self.tensor(f"{name}.qweight", dtype=np.int32, shape=(kw, n))
        qzeros = self.tensor(f"{name}.qzeros", dtype=np.int32, shape=(g, n * b // 32))
        scales = self.tensor(f"{name}.scales", dtype=np.float16, shape=(g, n))
        _require_positive_scales(self._where[name + ".scales"].name, name, scales)
        if self.has(f"{name}.g_idx"):
            g_idx = self.tensor(f"{name}.g_idx", dtype=(np.int32, np.int64), shape=(k,)).astype(np.int32)
        elif self.desc_act:
            raise CheckpointError(f"{self.path}: tensor {name + '.g_idx'!r} must be present with desc_act=true; "
                                  "got no such tensor")
        else:
            g_idx = gptq_format.default_g_idx(k, self.group_size)
        gwhere = f"{self._where.get(name + '.g_idx', self._where[name + '.qweight']).name}: tensor {name + '.g_idx'!r}"
        if g_idx.min() < 0 or g_idx.max() >= g:
            raise CheckpointError(f"{gwhere}: entries must lie in [0, {g - 1}] (one per scale row); "
                                  f"got range [{int(g_idx.min())}, {int(g_idx.max())}]")
        if not self.desc_act and not np.array_equal(g_idx, gptq_format.default_g_idx(k, self.group_size)):
            raise CheckpointError(f"{gwhere}: must equal k // group_size when desc_act is false "
                                  f"({self.config_path.name}); got a permuted g_idx")
        bias = None
        if self.has(f"{name}.bias"):
            bias = self.tensor(f"{name}.bias", dtype=(np.float16, np.float32), shape=(n,))
        ckpt = gptq_format.GPTQCheckpoint(qweight, qzeros, scales, g_idx, b, self.checkpoint_format)
        layer = GPTQLayer(name, ckpt, self.group_size, self.desc_act, self.sym, bias)
        if self.sym:
            z = layer.zeros()
            bad = z != (1 << (b - 1))
            if bad.any():
                gi, col = (int(i) for i in np.argwhere(bad)[0])
                raise CheckpointError(
                    f"{self._where[name + '.qzeros'].name}: tensor {name + '.qzeros'!r}: sym=true in "
                    f"{self.config_path.name} needs every zero point = {1 << (b - 1)}; got zero[{gi}, {col}] = "
                    f"{int(z[gi, col])}")
        return layer


@dataclass(frozen=True)
class AWQLayer:
    """One AutoAWQ GEMM layer: ``ckpt`` (:class:`refsim.formats.awq.AWQCheckpoint`) and ``bias``."""

    name: str
    ckpt: awq_format.AWQCheckpoint
    bias: np.ndarray | None = None
    format = "awq"
    bits = 4
    desc_act = False
    sym = False

    def __post_init__(self):
        check_layer(self, bias=1)
        require_instance("ckpt", self.ckpt, awq_format.AWQCheckpoint)
        _check_bias(self.bias, self.n)

    @property
    def k(self) -> int:
        return self.ckpt.qweight.shape[0]

    @property
    def n(self) -> int:
        return self.ckpt.scales.shape[1]

    @property
    def group_size(self) -> int | None:
        return None if self.ckpt.group_size == self.k else self.ckpt.group_size

    def dequantize(self) -> np.ndarray:
        """float16 (K, N): ``(q - z) * s`` in fp16 (refsim.formats.awq.dequantize)."""
        return awq_format.dequantize(self.ckpt)

    def tensors(self) -> dict[str, np.ndarray]:
        out = {f"{self.name}.qweight": self.ckpt.qweight, f"{self.name}.qzeros": self.ckpt.qzeros,
               f"{self.name}.scales": self.ckpt.scales}
        if self.bias is not None:
            out[f"{self.name}.bias"] = self.bias
        return out


class AWQReader(Checkpoint):
    """An AutoAWQ GEMM checkpoint directory."""

    format = "awq"
    suffixes = (("qweight", "qzeros", "scales"), ("bias",))

    def __init__(self, path: Path) -> None:
        path = require_path("path", path)
        if (path / "quant_config.json").is_file():
            cpath = path / "quant_config.json"
            cfg = read_json(cpath)
            bits = config_field(cfg, "w_bit", cpath, (int,))
            gs = config_field(cfg, "q_group_size", cpath, (int,))
        else:
            cpath = path / "config.json"
            cfg = read_json(cpath).get("quantization_config")
            if not isinstance(cfg, dict):
                raise CheckpointError(f"{cpath}: field 'quantization_config' must be an object; got {cfg!r}")
            bits = config_field(cfg, "bits", cpath, (int,))
            gs = config_field(cfg, "group_size", cpath, (int,))
        if bits != 4:
            raise CheckpointError(f"{cpath}: AWQ GEMM checkpoints are 4-bit (WQLinear_GEMM); got bits={bits}")
        if not config_field(cfg, "zero_point", cpath, (bool,), default=True):
            raise CheckpointError(f"{cpath}: field 'zero_point' must be true (GEMM layout stores qzeros); got false")
        version = config_field(cfg, "version", cpath, (str,), default="gemm")
        if version.lower() != "gemm":
            raise CheckpointError(f"{cpath}: field 'version' must be 'gemm' (the layout refsim reads); got {version!r}")
        if gs != -1 and gs < 1:
            raise CheckpointError(f"{cpath}: group size must be -1 or positive; got {gs}")
        self.group_size = None if gs == -1 else gs
        super().__init__(path, cfg, cpath)

    def read_layer(self, name: str) -> AWQLayer:
        self._require_layer(name)
        k, w = self.file_of(f"{name}.qweight").require_shape(f"{name}.qweight", (None, None))
        n = 8 * w
        gs = k if self.group_size is None else self.group_size
        if k == 0 or n == 0 or k % gs:
            raise CheckpointError(f"{self._where[name + '.qweight'].name}: tensor {name + '.qweight'!r}: K={k} "
                                  f"must be a positive multiple of the group size {gs}; got shape {(k, w)}")
        qweight = self.tensor(f"{name}.qweight", dtype=np.int32, shape=(k, w))
        qzeros = self.tensor(f"{name}.qzeros", dtype=np.int32, shape=(k // gs, w))
        scales = self.tensor(f"{name}.scales", dtype=np.float16, shape=(k // gs, n))
        _require_positive_scales(self._where[name + ".scales"].name, name, scales)
        bias = self.tensor(f"{name}.bias", dtype=(np.float16, np.float32), shape=(n,)) if self.has(f"{name}.bias") else None
        return AWQLayer(name, awq_format.AWQCheckpoint(qweight, qzeros, scales, gs), bias)


def write_gptq(out: Path, layers: list[GPTQLayer], extra_tensors: dict | None = None) -> None:
    """Write ``model.safetensors`` + ``quantize_config.json`` into the existing folder ``out``.

    ``layers``: a non-empty list of GPTQLayer that share bits, group size, desc_act, sym and
    checkpoint format (one config); ``extra_tensors`` name -> array or None (written unchanged)."""
    out = require_out_folder("out", out)
    layers = require_layers("layers", layers, GPTQLayer)
    extra_tensors = require_tensor_dict("extra_tensors", extra_tensors)
    first = layers[0]
    for lay in layers:
        if (lay.bits, lay.group_size, lay.desc_act, lay.sym, lay.ckpt.checkpoint_format) != \
                (first.bits, first.group_size, first.desc_act, first.sym, first.ckpt.checkpoint_format):
            raise FormatRuleError(f"layers: a GPTQ checkpoint has one config; layer {lay.name!r} differs from "
                              f"{first.name!r}")
    tensors = dict(extra_tensors or {})
    for lay in layers:
        tensors.update(lay.tensors())
    save_model_tensors(out, tensors, {"format": "pt"})
    cfg = gptq_config(first.bits, first.group_size, first.desc_act, first.sym, first.ckpt.checkpoint_format)
    (out / "quantize_config.json").write_text(json.dumps(cfg, indent=2) + "\n")


def write_awq(out: Path, layers: list[AWQLayer], extra_tensors: dict | None = None) -> None:
    """Write ``model.safetensors`` + ``config.json`` (``quantization_config`` as AutoAWQ saves it).

    ``layers``: a non-empty list of AWQLayer with one group size; ``extra_tensors`` name -> array or None."""
    out = require_out_folder("out", out)
    layers = require_layers("layers", layers, AWQLayer)
    extra_tensors = require_tensor_dict("extra_tensors", extra_tensors)
    # a layer whose one group spans its K (K = 128 in a group-128 model) fits the model's group size
    # as well as -1 (per-channel); -1 when every layer is one group
    grouped = {lay.ckpt.group_size for lay in layers if lay.group_size is not None}
    gs = grouped or {-1}
    if len(gs) != 1 or any(lay.group_size is None and lay.k not in gs for lay in layers if grouped):
        sizes = sorted({lay.ckpt.group_size if lay.group_size is not None else -1 for lay in layers})
        raise FormatRuleError(f"layers: an AWQ checkpoint has one group size; got {sizes}")
    tensors = dict(extra_tensors or {})
    for lay in layers:
        tensors.update(lay.tensors())
    save_model_tensors(out, tensors, {"format": "pt"})
    cfg = {"quantization_config": {"quant_method": "awq", "bits": 4, "group_size": gs.pop(),
                                   "zero_point": True, "version": "gemm"}}
    (out / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
