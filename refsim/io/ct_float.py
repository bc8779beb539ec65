"""compressed-tensors float layers: ``float-quantized`` (FP8 e4m3), ``nvfp4-pack-quantized``, ``mxfp4-pack-quantized``.

Spec (per quantized linear ``<L>``, PyTorch (N, K) = (out, in) orientation)::

    float-quantized (FP8; llm-compressor's FP8, FP8_DYNAMIC, FP8_BLOCK presets)
      <L>.weight         F8_E4M3 (N, K)                        e4m3 codes (OCP "fn")
      <L>.weight_scale   float (1,) | (1, 1)   strategy tensor    the model dtype (float32/bf16/fp16)
                         float (N, 1)          strategy channel
                         float (ceil(N/128), ceil(K/128))  block, block_structure [128, 128]
      value  w = dtype(float32(e4m3(q)) * float32(s)): the library's ``x_q.to(scale.dtype) * scale``
             (e4m3 is exact in bf16/fp16/fp32 and the product of two such values is exact in
             float32, so one rounding to the scale dtype), i.e. refsim.formats.fp8's dequantize
             cast to the scale dtype
    nvfp4-pack-quantized (strategy tensor_group, group 16)
      <L>.weight_packed        uint8 (N, K/2)     e2m1 codes, element 2i low nibble, 2i+1 high nibble
      <L>.weight_scale         F8_E4M3 (N, K/16)
      <L>.weight_global_scale  float32 (1,)       g = 448 * 6 / amax: a divisor, not torchao's t
      value  w = bf16(float32(e2m1(q)) * float32(float32(e4m3(s)) / g))
    mxfp4-pack-quantized (strategy group, group 32)
      <L>.weight_packed   uint8 (N, K/2)          as nvfp4
      <L>.weight_scale    uint8 (N, K/32)         E8M0: 2^(s - 127) in bfloat16 (s = 255 -> +Inf)
      value  w = bf16(e2m1(q) * 2^(s - 127))      (exact or +-Inf/NaN: one product)

The element and scale decodes are refsim.formats.mx's (``unpack_fp4``) and refsim.formats.minifloat's;
what differs from torchao's NVFP4 (:func:`refsim.formats.mx.dequantize`, element * (t * e4m3(s)))
is the global scale: compressed-tensors stores g = 1 / t and divides the block scale by it
(``_dequantize``: ``scale = scale / global_scale``), then rounds the float32 result to bfloat16
(``unpack_fp4_from_uint8`` returns bfloat16 and the decompressor casts to it). MXFP4's E8M0 255 reads
as 2^128 = +Inf (``2.0 ** (s - 127)`` in bfloat16), not torchao's NaN.

Worked NVFP4 element: code 0x7 (6.0), scale byte 0x38 (e4m3 1.0), g = 4.0 -> 6 * (1 / 4) = 1.5.

Source: vllm-project/compressed-tensors ``quantization/lifecycle/forward.py`` (``dequantize``,
``_dequantize``), ``compressors/nvfp4/base.py`` and ``helpers.py`` (``unpack_fp4_from_uint8``),
``compressors/mxfp4/base.py``, ``compressors/mx_utils.py`` (``decompress_mx_scale``), read on the
repository's main branch (forward.py at 01dd1a58d39e47c617df54aaa4519a30273be0c5, mxfp4/base.py at
0186d7ae2fe969fbfc5934ba1cf9896e6a6fda65, where the nvfp4 decompressor decodes scales through
``_decompress_scale``); the FP8 tensors as llm-compressor 0.14.0.1 saved them
(tests/quant/data/llmcompressor_fp8.npz).
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np

from refsim._validate import require_choice, require_dtype, require_finite, require_instance, require_shape
from refsim.errors import CheckpointError, FormatRuleError, ShapeError
from refsim.formats import fp8 as fp8_format
from refsim.formats import minifloat
from refsim.formats import mx as mx_format
from refsim.io.checkpoint import Checkpoint, check_layer

__all__ = ["CTFP8Layer", "CTFP4Layer", "FP8_STRATEGIES", "FP4_BLOCK", "ACTORDERS", "read_float_layer"]

#: compressed-tensors FP8 weight strategy -> refsim.formats.fp8 scheme
FP8_STRATEGIES: dict[str, str] = {"tensor": "tensor", "channel": "channel", "block": "block128"}
#: elements per scale of the fp4 kinds
FP4_BLOCK: dict[str, int] = {"nvfp4": 16, "mxfp4": 32}
#: the ``actorder`` values a float layer's config may carry (GPTQ's "weight" ordering; "static" is not written)
ACTORDERS = (None, "weight")
_SCALE_DTYPES = (np.float32, ml_dtypes.bfloat16, np.float16)
_F32 = np.float32


def _fp8_scale_shape(strategy: str, n: int, k: int) -> tuple[tuple[int, ...], ...]:
    """The checkpoint shapes ``weight_scale`` may have for an (N, K) FP8 weight."""
    return {"tensor": ((1,), (1, 1)), "channel": ((n, 1),),
            "block": ((-(-n // 128), -(-k // 128)),)}[strategy]


@dataclass(frozen=True)
class CTFP8Layer:
    """One ``float-quantized`` layer as stored: ``codes`` uint8 (N, K) e4m3 bytes, ``scale`` float32 /
    bfloat16 / float16 of the strategy's checkpoint shape ((1,) or (1, 1) "tensor", (N, 1) "channel",
    (ceil(N/128), ceil(K/128)) "block"), finite and > 0; ``strategy`` "tensor", "channel" or "block";
    ``actorder`` the config's (None, or "weight": GPTQ processed the rows in activation order)."""

    name: str
    codes: np.ndarray
    scale: np.ndarray
    strategy: str
    actorder: str | None = None
    format = "compressed-tensors"
    kind = "fp8"
    bits = 8
    sym = True
    desc_act = False

    def __post_init__(self):
        check_layer(self, codes=2)
        strategy = require_choice("strategy", self.strategy, tuple(FP8_STRATEGIES))
        require_choice("actorder", self.actorder, ACTORDERS)
        n, k = require_dtype("codes", self.codes, np.uint8).shape
        scale = require_dtype("scale", self.scale, *_SCALE_DTYPES)
        want = _fp8_scale_shape(strategy, n, k)
        if scale.shape not in want:
            raise ShapeError(f"scale: shape must be {' or '.join(map(str, want))} for strategy {strategy!r} and "
                             f"codes {(n, k)}; got {scale.shape}")
        s32 = require_finite("scale", scale.astype(_F32))
        if not (s32 > 0).all():
            raise FormatRuleError(f"scale: must be > 0; got {float(s32[s32 <= 0][0])}")
        nan = (self.codes & 0x7F) == 0x7F
        if nan.any():
            raise FormatRuleError(f"codes: must not hold the e4m3 NaN code (0x7F/0xFF); got {int(nan.sum())} of them")

    @property
    def n(self) -> int:
        return self.codes.shape[0]

    @property
    def k(self) -> int:
        return self.codes.shape[1]

    @property
    def group_size(self) -> int | None:
        """128 for "block" (128 x 128 tiles), else None (one scale per tensor or output channel)."""
        return 128 if self.strategy == "block" else None

    def fp8_quant(self) -> fp8_format.FP8Quant:
        """The layer as :class:`refsim.formats.fp8.FP8Quant` in refsim's orientation (codes (K, N),
        float32 scales: the stored scales widened exactly)."""
        s = self.scale.astype(_F32).reshape(1, 1) if self.strategy == "tensor" else self.scale.astype(_F32).T
        return fp8_format.FP8Quant(np.ascontiguousarray(self.codes.T), np.ascontiguousarray(s),
                                   FP8_STRATEGIES[self.strategy])

    def dequantize(self) -> np.ndarray:
        """(K, N) in the scale dtype (refsim's orientation): float32 decode(codes) * scale, rounded once
        to the scale dtype, as compressed-tensors' ``dequantize`` (module docstring)."""
        return self.fp8_quant().dequantize().astype(self.scale.dtype)

    def tensors(self) -> dict[str, np.ndarray]:
        """The checkpoint tensors (module docstring): ``<name>.weight`` float8_e4m3fn (N, K) and
        ``<name>.weight_scale`` as stored."""
        return {f"{self.name}.weight": self.codes.view(ml_dtypes.float8_e4m3fn), f"{self.name}.weight_scale": self.scale}

    def weight_args(self) -> dict:
        """The ``weights`` entry of this layer's config group, with llm-compressor's keys."""
        return _weight_args(8, self.strategy, None, [128, 128] if self.strategy == "block" else None, None,
                            self.actorder)


@dataclass(frozen=True)
class CTFP4Layer:
    """One ``nvfp4-pack-quantized`` or ``mxfp4-pack-quantized`` layer as stored: ``kind`` "nvfp4" or
    "mxfp4", ``packed`` uint8 (N, K/2) (two e2m1 codes a byte, low nibble first), ``scale`` uint8
    (N, K/block): e4m3 bytes (nvfp4, block 16) or E8M0 (mxfp4, block 32), ``global_scale``
    float32 (1,) finite and > 0 for nvfp4, None for mxfp4; ``actorder`` as :class:`CTFP8Layer`'s."""

    name: str
    kind: str
    packed: np.ndarray
    scale: np.ndarray
    global_scale: np.ndarray | None
    actorder: str | None = None
    format = "compressed-tensors"
    bits = 4
    sym = True
    desc_act = False

    def __post_init__(self):
        check_layer(self, packed=2, scale=2, global_scale=1)
        kind = require_choice("kind", self.kind, tuple(FP4_BLOCK))
        require_choice("actorder", self.actorder, ACTORDERS)
        n, half = require_dtype("packed", self.packed, np.uint8).shape
        k = 2 * half
        if k % FP4_BLOCK[kind]:
            raise ShapeError(f"packed: K = 2 * {half} must be a multiple of the {kind} block {FP4_BLOCK[kind]}; got {k}")
        require_shape("scale", require_dtype("scale", self.scale, np.uint8), (n, k // FP4_BLOCK[kind]))
        if (kind == "nvfp4") != (self.global_scale is not None):
            raise FormatRuleError(f"global_scale: present exactly for nvfp4; got "
                                  f"{'one' if self.global_scale is not None else 'None'} for {kind}")
        if self.global_scale is not None:
            g = require_shape("global_scale", require_dtype("global_scale", self.global_scale, np.float32), (1,))
            if not require_finite("global_scale", g)[0] > 0:
                raise FormatRuleError(f"global_scale: must be > 0; got {float(g[0])}")
        if kind == "nvfp4":
            nan = (self.scale & 0x7F) == 0x7F
            if nan.any():
                raise FormatRuleError(f"scale: e4m3 block scales must not be NaN (0x7F/0xFF); got "
                                      f"{int(nan.sum())} of them")

    @property
    def n(self) -> int:
        return self.packed.shape[0]

    @property
    def k(self) -> int:
        return 2 * self.packed.shape[1]

    @property
    def group_size(self) -> int:
        return FP4_BLOCK[self.kind]

    @property
    def strategy(self) -> str:
        return "tensor_group" if self.kind == "nvfp4" else "group"

    def block_scales(self) -> np.ndarray:
        """float32 (N, K/block): what multiplies each block's elements (module docstring): nvfp4
        float32(e4m3(s)) / g, mxfp4 2^(s - 127) (+Inf for 255)."""
        if self.kind == "nvfp4":
            return (minifloat.decode(self.scale, "e4m3") / self.global_scale[0]).astype(_F32)
        s = self.scale.astype(np.int32)
        return np.where(s == 255, _F32(np.inf), np.ldexp(_F32(1), np.minimum(s, 254) - 127)).astype(_F32)

    def dequantize(self) -> np.ndarray:
        """(K, N) bfloat16 (refsim's orientation): e2m1 element * block scale in float32, rounded once to
        bfloat16, as compressed-tensors' decompressor (module docstring)."""
        elem = minifloat.decode(mx_format.unpack_fp4(self.packed), "e2m1")          # (N, K) float32
        b = self.group_size
        blocks = elem.reshape(self.n, self.k // b, b)
        with np.errstate(invalid="ignore", over="ignore"):
            w = (blocks * self.block_scales()[..., None]).astype(_F32).reshape(self.n, self.k)
        return np.ascontiguousarray(w.astype(ml_dtypes.bfloat16).T)

    def tensors(self) -> dict[str, np.ndarray]:
        """The checkpoint tensors (module docstring): ``weight_packed`` uint8, ``weight_scale``
        float8_e4m3fn (nvfp4) or uint8 (mxfp4), and nvfp4's ``weight_global_scale`` float32 (1,)."""
        out = {f"{self.name}.weight_packed": self.packed,
               f"{self.name}.weight_scale": self.scale.view(ml_dtypes.float8_e4m3fn) if self.kind == "nvfp4"
               else self.scale}
        if self.global_scale is not None:
            out[f"{self.name}.weight_global_scale"] = self.global_scale
        return out

    def weight_args(self) -> dict:
        """The ``weights`` entry of this layer's config group, with llm-compressor's keys."""
        return _weight_args(4, self.strategy, self.group_size, None,
                            "torch.float8_e4m3fn" if self.kind == "nvfp4" else "torch.uint8", self.actorder)


def _weight_args(bits: int, strategy: str, group_size: int | None, block: list | None, scale_dtype: str | None,
                 actorder: str | None = None) -> dict:
    """A float group's ``weights``: compressed-tensors ``QuantizationArgs`` as llm-compressor 0.14.0.1 saves
    them for its FP8_DYNAMIC, FP8_BLOCK, NVFP4A16 and MXFP4A16 presets (tests/io/data/ct_float_llmcompressor.npz;
    GPTQ's actorder: tests/quant/data/gptq_float_llmcompressor.npz)."""
    return {"actorder": actorder, "block_structure": block, "dynamic": False, "group_size": group_size,
            "num_bits": bits, "observer": "memoryless_minmax", "observer_kwargs": {}, "scale_dtype": scale_dtype,
            "strategy": strategy, "symmetric": True, "type": "float", "zp_dtype": None}


def read_float_layer(ck, name: str, scheme: dict) -> CTFP8Layer | CTFP4Layer:
    """Read layer ``name`` of the compressed-tensors checkpoint ``ck`` (a
    :class:`refsim.io.compressed_tensors.CompressedTensorsReader`) under its float ``scheme`` (a
    :meth:`refsim.io.ct_config.CTConfig.scheme_of` dict whose ``kind`` is fp8, nvfp4 or mxfp4);
    tensor dtypes and shapes checked, errors naming the file and tensor."""
    require_instance("ck", ck, Checkpoint, "a compressed-tensors reader")
    require_instance("name", name, str)
    require_instance("scheme", scheme, dict)
    kind = require_choice("scheme['kind']", scheme.get("kind"), ("fp8", *FP4_BLOCK))
    if kind == "fp8":
        require_choice("scheme['strategy']", scheme.get("strategy"), tuple(FP8_STRATEGIES))
    if name not in ck.layer_names():
        raise CheckpointError(f"{ck.path}: layer {name!r} must be one of the checkpoint's layers; got no such layer")
    if kind == "fp8":
        w = _matrix(ck, f"{name}.weight", ml_dtypes.float8_e4m3fn, "a float-quantized layer", "(N, K)")
        n, k = w.shape
        want = _fp8_scale_shape(scheme["strategy"], n, k)
        scale = ck.tensor(f"{name}.weight_scale", dtype=_SCALE_DTYPES)
        if scale.shape not in want:
            raise CheckpointError(f"{ck.file_of(name + '.weight_scale').path.name}: tensor {name + '.weight_scale'!r}: "
                                  f"shape must be {' or '.join(map(str, want))} for strategy {scheme['strategy']!r}; "
                                  f"got {scale.shape}")
        return _record(ck, name, CTFP8Layer, name, w.view(np.uint8), scale, scheme["strategy"])
    packed = _matrix(ck, f"{name}.weight_packed", np.uint8, f"a {kind} layer", "(N, K/2)")
    n, k = packed.shape[0], 2 * packed.shape[1]
    b = FP4_BLOCK[kind]
    if k % b:
        raise CheckpointError(f"{ck.file_of(name + '.weight_packed').path.name}: layer {name!r}: K={k} must be a "
                              f"multiple of the {kind} group {b}")
    if kind == "nvfp4":
        scale = ck.tensor(f"{name}.weight_scale", dtype=ml_dtypes.float8_e4m3fn, shape=(n, k // b)).view(np.uint8)
        if not ck.has(f"{name}.weight_global_scale"):
            raise CheckpointError(f"{ck.path}: tensor {name + '.weight_global_scale'!r} must be present for an "
                                  "nvfp4 layer; got no such tensor")
        glob = ck.tensor(f"{name}.weight_global_scale", dtype=np.float32, shape=(1,))
    else:
        scale = ck.tensor(f"{name}.weight_scale", dtype=np.uint8, shape=(n, k // b))
        glob = None
        if ck.has(f"{name}.weight_global_scale"):
            raise CheckpointError(f"{ck.path}: tensor {name + '.weight_global_scale'!r}: must be absent for an "
                                  "mxfp4 layer (E8M0 scales only); got one")
    return _record(ck, name, CTFP4Layer, name, kind, packed, scale, glob)


def _matrix(ck, tensor: str, dtype, what: str, axes: str) -> np.ndarray:
    """The 2-D tensor ``tensor`` of ``ck`` as ``dtype``; a CheckpointError naming the file and tensor when it
    is missing (``what`` needs it) or not 2-D (``axes`` says which)."""
    if not ck.has(tensor):
        raise CheckpointError(f"{ck.path}: tensor {tensor!r} must be present for {what}; got no such tensor")
    t = ck.tensor(tensor, dtype=dtype)
    if t.ndim != 2:
        raise CheckpointError(f"{ck.file_of(tensor).path.name}: tensor {tensor!r}: must be 2-D {axes}; got shape "
                              f"{t.shape}")
    return t


def _record(ck, name: str, cls, *args):
    """Build the layer record; a rule it breaks becomes a CheckpointError naming the layer."""
    try:
        return cls(*args)
    except (FormatRuleError, ShapeError) as err:
        raise CheckpointError(f"{ck.path}: layer {name!r}: {err}") from None
