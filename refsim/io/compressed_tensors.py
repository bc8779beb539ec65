"""compressed-tensors checkpoints (what llm-compressor writes and vLLM loads): ``pack-quantized`` int.

Spec (per quantized linear ``<L>``, PyTorch (N, K) = (out, in) orientation)::

    <L>.weight_packed      int32 (N, ceil(K*b/32))  codes + 2**(b-1), LSB-first dense bit stream along K
    <L>.weight_scale       float (N, G)             G = K/group_size ("group"), 1 ("channel"); the model dtype
    <L>.weight_zero_point  int32 (ceil(N*b/32), G)  asymmetric only: signed zero + 2**(b-1), packed along N
    <L>.weight_shape       int64 (2,)               (N, K)
    <L>.weight_g_idx       int32 (K,)               optional ("group" act-order): the group of input k
    value   w[n, k] = (q[n, k] - z[n, g]) * s[n, g],  g = g_idx[k] (default k // group_size),
            q and z signed in [-2**(b-1), 2**(b-1)); the integer difference is exact in the scale
            dtype, then one product rounded to it (bf16/fp16/fp32)
    config  config.json "quantization_config": {"quant_method": "compressed-tensors",
            "format": "pack-quantized", "config_groups": {name: {"targets", "weights": {"num_bits",
            "type": "int", "symmetric", "strategy": "group"|"channel", "group_size", "actorder", ...},
            "format"}}, "ignore": [...], "quantization_status": "compressed", ...}

The bit stream is GPTQ's (refsim.formats.gptq.pack_stream), laid along the rows of the (N, K) weight::

    K = 8, 4-bit, signed codes q[n, 0..7] = -8, -7, ..., -1   →  stored fields 0, 1, ..., 7
    weight_packed[n, 0] = 0x76543210   (k = 0 in the lowest nibble)

Source: vllm-project/compressed-tensors 0.19.0, ``compressors/pack_quantized/base.py``
(``PackedQuantizationCompressor.compress``/``decompress``), ``compressors/pack_quantized/helpers.py``
(``pack_to_int32``, ``unpack_from_int32``), ``quantization/lifecycle/forward_helpers.py``
(``_dequantize``); checked against checkpoints llm-compressor 0.14.0.1 wrote (tests/io/data/).
The config's fields are read (honoured or refused, each named) by :mod:`refsim.io.ct_config`; a
layer's group is the one whose targets match its name exactly, by ``re:`` pattern (``re.match``) or
by class name ``Linear`` (every layer holding ``weight_packed``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import ml_dtypes
import numpy as np

from refsim._validate import (require_bits, require_bool, require_bounded, require_choice, require_dtype,
                              require_finite, require_group_size, require_instance, require_int,
                              require_integer_array, require_ndim, require_path, require_shape)
from refsim.errors import CheckpointError, FormatRuleError, ShapeError
from refsim.formats import gptq as gptq_format
from refsim.io.checkpoint import Checkpoint, check_layer, read_json
from refsim.io.ct_float import CTFP4Layer, CTFP8Layer, read_float_layer
from refsim.io.ct_config import CT_BITS, FLOAT_FORMATS, PACK_QUANTIZED, CTConfig

__all__ = ["CTLayer", "CompressedTensorsReader", "pack_weight", "unpack_weight", "ct_quantization_config",
           "CT_VERSION", "CT_BITS"]

#: the compressed-tensors release whose layout and config keys are matched
CT_VERSION = "0.19.0"
#: bit-widths refsim packs and reads (the shared GPTQ stream supports these)
_SCALE_DTYPES = (np.dtype(ml_dtypes.bfloat16), np.dtype(np.float16), np.dtype(np.float32))


def pack_weight(q: np.ndarray, bits: int) -> np.ndarray:
    """``weight_packed`` int32 (R, ceil(C*b/32)) of signed codes q int (R, C) in [-2**(b-1), 2**(b-1)):
    each row a dense LSB-first stream of ``q + 2**(b-1)``; a row whose C is not a multiple of 32 is
    padded with zero fields and cut to ``ceil(C*b/32)`` words (``pack_to_int32``)."""
    bits = require_bits(bits, CT_BITS)
    q = require_ndim("q", require_integer_array("q", q), 2)
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    if q.size and (int(q.min()) < lo or int(q.max()) > hi):
        raise FormatRuleError(f"q: signed {bits}-bit codes must lie in [{lo}, {hi}]; got range "
                              f"[{int(q.min())}, {int(q.max())}]")
    r, c = q.shape
    require_bounded("q", max(r, 1) * (c + 32))
    pad = -c % 32
    u = (q.astype(np.int32) + (1 << (bits - 1))).astype(np.uint32)
    if pad:
        u = np.concatenate([u, np.zeros((r, pad), np.uint32)], axis=1)
    words = gptq_format.pack_stream(np.ascontiguousarray(u.T), bits).T      # (R, (C+pad)*b/32)
    return np.ascontiguousarray(words[:, : math.ceil(c * bits / 32)]).view(np.int32)


def unpack_weight(packed: np.ndarray, bits: int, cols: int) -> np.ndarray:
    """Signed codes int8 (R, cols) from ``weight_packed`` int32 (R, ceil(cols*b/32)) (inverse of
    :func:`pack_weight`)."""
    bits = require_bits(bits, CT_BITS)
    packed = require_ndim("packed", require_dtype("packed", packed, np.int32, np.uint32), 2)
    cols = require_int("cols", cols, minimum=1)
    r, w = packed.shape
    if w != math.ceil(cols * bits / 32):
        raise ShapeError(f"packed: must have ceil(cols*bits/32) = {math.ceil(cols * bits / 32)} words per row "
                         f"for cols={cols}, bits={bits}; got {w}")
    whole = -(-cols // 32) * bits                                            # words of the padded row
    words = np.zeros((r, whole), np.uint32)
    words[:, :w] = packed.view(np.uint32)
    u = gptq_format.unpack_stream(np.ascontiguousarray(words.T), bits).T    # (R, padded cols)
    return (u[:, :cols].astype(np.int16) - (1 << (bits - 1))).astype(np.int8)


def _dequantize(q: np.ndarray, z: np.ndarray, s: np.ndarray, gcol: np.ndarray) -> np.ndarray:
    """(N, K) ``(q - z[:, gcol]) * s[:, gcol]`` with the difference exact and one rounding to s.dtype."""
    diff = q.astype(np.int16) - z[:, gcol].astype(np.int16)                 # exact small integers
    prod = diff.astype(np.float64) * s[:, gcol].astype(np.float64)          # exact: <= 9 x 24 bits
    return prod.astype(np.float32).astype(s.dtype) if s.dtype != np.float32 else prod.astype(np.float32)


@dataclass(frozen=True)
class CTLayer:
    """One compressed-tensors linear: signed codes ``q`` int8 (N, K) in [-2**(b-1), 2**(b-1)),
    ``scale`` (N, G) bfloat16/float16/float32 (finite), signed ``zero`` int8 (N, G) in the same range
    (all 0 when symmetric), ``g_idx`` int (K,) with entries in [0, G) or None, and the scheme:
    ``bits`` in :data:`CT_BITS`, ``group_size`` None (strategy "channel", G = 1) or a divisor of K
    (G = K / group_size), ``sym``, ``actorder`` None, "weight" or "group" (a g_idx exactly when
    "group", which needs a group_size). Every rule is checked when the record is built."""

    name: str
    q: np.ndarray
    scale: np.ndarray
    zero: np.ndarray
    g_idx: np.ndarray | None
    bits: int
    group_size: int | None
    sym: bool
    actorder: str | None = None
    format = "compressed-tensors"

    def __post_init__(self):
        check_layer(self, q=2, scale=2, zero=2, g_idx=1)
        bits = require_bits(self.bits, CT_BITS)
        require_bool("sym", self.sym)
        actorder = require_choice("actorder", self.actorder, (None, "weight", "group"))
        lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
        q = require_dtype("q", self.q, np.int8)
        n, k = q.shape
        gs = require_group_size(self.group_size, k)
        g = 1 if gs is None else k // gs
        scale = require_shape("scale", require_dtype("scale", self.scale, *_SCALE_DTYPES), (n, g))
        require_finite("scale", scale.astype(np.float32))
        zero = require_shape("zero", require_dtype("zero", self.zero, np.int8), (n, g))
        for name, codes in (("q", q), ("zero", zero)):
            if codes.size and (int(codes.min()) < lo or int(codes.max()) > hi):
                bad = int(codes.min()) if int(codes.min()) < lo else int(codes.max())
                raise FormatRuleError(f"{name}: signed {bits}-bit codes must lie in [{lo}, {hi}]; got {bad}")
        if self.sym and zero.any():
            raise FormatRuleError(f"zero: must be all 0 for a symmetric scheme; got {int(zero[zero != 0][0])}")
        if (actorder == "group") != (self.g_idx is not None):
            raise FormatRuleError(f"g_idx: present exactly when actorder is 'group'; got actorder {actorder!r} "
                                  f"and g_idx {'present' if self.g_idx is not None else 'None'}")
        if actorder == "group" and gs is None:
            raise FormatRuleError("actorder: 'group' needs a group_size (strategy 'group'); got group_size None")
        if self.g_idx is not None:
            g_idx = require_shape("g_idx", require_integer_array("g_idx", self.g_idx), (k,))
            if g_idx.size and (int(g_idx.min()) < 0 or int(g_idx.max()) >= g):
                bad = int(g_idx.min()) if int(g_idx.min()) < 0 else int(g_idx.max())
                raise FormatRuleError(f"g_idx: entries must lie in [0, {g - 1}] (one of the G={g} scale columns); "
                                      f"got {bad}")

    @property
    def k(self) -> int:
        return self.q.shape[1]

    @property
    def n(self) -> int:
        return self.q.shape[0]

    @property
    def desc_act(self) -> bool:
        return self.g_idx is not None

    @property
    def strategy(self) -> str:
        return "channel" if self.group_size is None else "group"

    def group_of_input(self) -> np.ndarray:
        """int (K,): the scale column of each input feature."""
        if self.g_idx is not None:
            return self.g_idx.astype(np.int64)
        if self.group_size is None:
            return np.zeros(self.k, np.int64)
        return np.arange(self.k) // self.group_size

    def dequantize(self) -> np.ndarray:
        """(K, N) in the scale dtype (refsim's orientation): compressed-tensors' ``_dequantize``."""
        return np.ascontiguousarray(_dequantize(self.q, self.zero, self.scale, self.group_of_input()).T)

    def uniform(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """GPTQ-style unsigned view: (q uint8 (K, N), scales (G, N), zeros uint8 (G, N), g_idx int32 (K,))."""
        off = 1 << (self.bits - 1)
        q = (self.q.T.astype(np.int16) + off).astype(np.uint8)
        z = (self.zero.T.astype(np.int16) + off).astype(np.uint8)
        return np.ascontiguousarray(q), np.ascontiguousarray(self.scale.T), np.ascontiguousarray(z), \
            self.group_of_input().astype(np.int32)

    def tensors(self) -> dict[str, np.ndarray]:
        out = {f"{self.name}.weight_packed": pack_weight(self.q, self.bits),
               f"{self.name}.weight_scale": self.scale,
               f"{self.name}.weight_shape": np.array([self.n, self.k], np.int64)}
        if not self.sym:
            out[f"{self.name}.weight_zero_point"] = pack_weight(np.ascontiguousarray(self.zero.T), self.bits).T.copy()
        if self.g_idx is not None:
            out[f"{self.name}.weight_g_idx"] = self.g_idx.astype(np.int32)
        return out

    def weight_args(self) -> dict:
        """The ``weights`` entry of this layer's config group (llm-compressor's keys)."""
        return {"actorder": self.actorder, "block_structure": None, "dynamic": False,
                "group_size": self.group_size, "num_bits": self.bits, "observer": "minmax",
                "observer_kwargs": {}, "scale_dtype": None, "strategy": self.strategy,
                "symmetric": self.sym, "type": "int", "zp_dtype": None}


def _ct_format(lay) -> str:
    """The compressed-tensors format of a layer record: pack-quantized (int) or its float format."""
    return PACK_QUANTIZED if isinstance(lay, CTLayer) else {v: k for k, v in FLOAT_FORMATS.items()}[lay.kind]


def ct_quantization_config(layers: list, ignore: list[str], input_activations: dict | None = None) -> dict:
    """``quantization_config`` as llm-compressor writes it: one config group per distinct scheme,
    targeting ``Linear`` when every layer shares one scheme (the rest listed in ``ignore``), else
    the exact layer names. ``layers``: :class:`CTLayer` (pack-quantized) or float layers
    (:class:`refsim.io.ct_float.CTFP8Layer`, :class:`refsim.io.ct_float.CTFP4Layer`), not both;
    ``input_activations``: the activation scheme of float groups (a dynamic one needs no tensors), or None."""
    require_instance("layers", layers, (list, tuple))
    for i, lay in enumerate(layers):
        require_instance(f"layers[{i}]", lay, (CTLayer, CTFP8Layer, CTFP4Layer))
    require_instance("ignore", ignore, (list, tuple))
    for i, n in enumerate(ignore):
        require_instance(f"ignore[{i}]", n, str)
    if input_activations is not None:
        require_instance("input_activations", input_activations, dict)
        if any(isinstance(lay, CTLayer) for lay in layers):
            raise FormatRuleError("input_activations: int (pack-quantized) groups are weight-only; got an "
                                  "activation scheme")
    if len({isinstance(lay, CTLayer) for lay in layers}) > 1:
        raise FormatRuleError("layers: must be all int (pack-quantized) or all float layers (one layer layout "
                              "per checkpoint); got both")
    schemes: dict[str, list[str]] = {}
    args: dict[str, tuple] = {}
    for lay in layers:
        key = repr((_ct_format(lay), sorted(lay.weight_args().items())))
        schemes.setdefault(key, []).append(lay.name)
        args[key] = (_ct_format(lay), lay.weight_args())
    groups = {}
    for i, (key, names) in enumerate(schemes.items()):
        targets = ["Linear"] if len(schemes) == 1 else names
        fmt, weights = args[key]
        groups[f"group_{i}"] = {"format": fmt, "input_activations": input_activations, "output_activations": None,
                                "targets": targets, "weights": weights}
    formats = {fmt for fmt, _ in args.values()}
    top = formats.pop() if len(formats) == 1 else "mixed-precision"
    return {"config_groups": groups, "format": top, "global_compression_ratio": None,
            "ignore": list(ignore), "kv_cache_scheme": None, "quant_method": "compressed-tensors",
            "quantization_status": "compressed", "sparsity_config": {}, "transform_config": {},
            "version": CT_VERSION}


#: the layer tensors of a float-format checkpoint (fp8 / nvfp4 / mxfp4): every quantized layer has a
#: ``weight_scale``; the rest is checked per layer by :func:`refsim.io.ct_float.read_float_layer`
FLOAT_SUFFIXES = (("weight_scale",), ("weight", "weight_packed", "weight_global_scale", "weight_zero_point",
                                      "input_scale", "input_global_scale", "bias"))


class CompressedTensorsReader(Checkpoint):
    """A compressed-tensors ``pack-quantized`` folder (see the module docstring), or one of the float
    formats of :mod:`refsim.io.ct_float` (``float-quantized``, ``nvfp4-pack-quantized``,
    ``mxfp4-pack-quantized``)."""

    format = "compressed-tensors"
    suffixes = (("weight_packed", "weight_scale", "weight_shape"), ("weight_zero_point", "weight_g_idx", "bias"))

    def __init__(self, path: Path) -> None:
        path = require_path("path", path)
        cpath = path / "config.json"
        qc = read_json(cpath).get("quantization_config")
        self.ct_config = CTConfig(qc, cpath)
        self.groups = self.ct_config.groups
        if self.ct_config.family == "float":          # fp8 / nvfp4 / mxfp4 layers: one weight_scale each
            self.suffixes = FLOAT_SUFFIXES
        super().__init__(path, qc, cpath)

    def scheme_of(self, name: str) -> dict:
        """The config group applying to layer ``name`` (:meth:`refsim.io.ct_config.CTConfig.scheme_of`)."""
        return self.ct_config.scheme_of(name)

    def read_layer(self, name: str) -> CTLayer | CTFP8Layer | CTFP4Layer:
        """Read and validate one layer: shapes against weight_shape and the scheme, positive finite
        scales, zero points and g_idx in range (int layers: :class:`CTLayer`); float layers through
        :func:`refsim.io.ct_float.read_float_layer` (:class:`CTFP8Layer`, :class:`CTFP4Layer`)."""
        self._require_layer(name)
        sch = self.scheme_of(name)
        if sch["kind"] != "int":
            return read_float_layer(self, name, sch)
        b, gs = sch["bits"], sch["group_size"]
        fname = self._where[name + ".weight_packed"].name
        shape = self.tensor(f"{name}.weight_shape", dtype=(np.int64, np.int32), shape=(2,))
        n, k = (int(v) for v in shape)
        if n < 1 or k < 1 or n * k > 2**31 - 1:
            raise CheckpointError(f"{fname}: tensor {name + '.weight_shape'!r}: must hold (N, K) with N, K >= 1 "
                                  f"and N*K < 2**31; got {(n, k)}")
        g = 1 if gs is None else -(-k // gs)
        if gs is not None and k % gs:
            raise CheckpointError(f"{fname}: layer {name!r}: K={k} must be a multiple of group_size={gs}")
        packed = self.tensor(f"{name}.weight_packed", dtype=np.int32, shape=(n, math.ceil(k * b / 32)))
        scale = self.tensor(f"{name}.weight_scale", dtype=_SCALE_DTYPES, shape=(n, g))
        s32 = scale.astype(np.float32)
        if not (np.isfinite(s32).all() and (s32 > 0).all()):
            bad = s32[~(np.isfinite(s32) & (s32 > 0))][0]
            raise CheckpointError(f"{self._where[name + '.weight_scale'].name}: tensor {name + '.weight_scale'!r}: "
                                  f"scales must be finite and > 0; got {float(bad)}")
        q = unpack_weight(packed, b, k)
        if sch["sym"]:
            if self.has(f"{name}.weight_zero_point"):
                raise CheckpointError(f"{fname}: tensor {name + '.weight_zero_point'!r}: must be absent for a "
                                      "symmetric scheme; got one")
            zero = np.zeros((n, g), np.int8)
        else:
            if not self.has(f"{name}.weight_zero_point"):
                raise CheckpointError(f"{fname}: tensor {name + '.weight_zero_point'!r} must be present for an "
                                      "asymmetric scheme; got no such tensor")
            zp = self.tensor(f"{name}.weight_zero_point", dtype=np.int32, shape=(math.ceil(n * b / 32), g))
            zero = np.ascontiguousarray(unpack_weight(np.ascontiguousarray(zp.T), b, n).T)
        g_idx = None
        if sch["actorder"] == "group" and not self.has(f"{name}.weight_g_idx"):
            raise CheckpointError(f"{fname}: tensor {name + '.weight_g_idx'!r} must be present for actorder "
                                  "'group' (groups in activation order); got no such tensor")
        if sch["actorder"] != "group" and self.has(f"{name}.weight_g_idx"):
            raise CheckpointError(f"{fname}: tensor {name + '.weight_g_idx'!r}: must be absent for actorder "
                                  f"{sch['actorder']!r} (compressed-tensors keeps g_idx for 'group' only); got one")
        if self.has(f"{name}.weight_g_idx"):
            g_idx = self.tensor(f"{name}.weight_g_idx", dtype=(np.int32, np.int64), shape=(k,)).astype(np.int32)
            if g_idx.min() < 0 or g_idx.max() >= g:
                raise CheckpointError(f"{self._where[name + '.weight_g_idx'].name}: tensor {name + '.weight_g_idx'!r}: "
                                      f"entries must lie in [0, {g - 1}]; got [{int(g_idx.min())}, {int(g_idx.max())}]")
        return CTLayer(name, q, scale, zero, g_idx, b, gs, sch["sym"], sch["actorder"])
