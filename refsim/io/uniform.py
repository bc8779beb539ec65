"""The integer codes behind every uniform format, and the layers each format builds from them.

GPTQ, AWQ GEMM, compressed-tensors and Marlin store the same thing in different words:

    w[k, n] = s[g(k), n] * (q[k, n] - z[g(k), n])       q, z unsigned in [0, 2**b); g(k) = g_idx[k]

:class:`UniformCodes` holds it in refsim's (K, N) orientation (source row order, scales in their
stored dtype). :func:`codes_of` reads it out of a layer, and ``to_gptq`` / ``to_awq`` / ``to_ct`` /
``to_marlin`` build a target layer from it, or raise FormatRuleError naming what the target cannot
hold (bits, asymmetry, act-order, group size, scales not exactly representable in the target's
dtype). Nothing is re-quantized here: a conversion either keeps every code and scale value or is
refused.
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes  # noqa: F401  (registers bfloat16 for exact_cast)
import numpy as np

from refsim._validate import (require_array, require_bits, require_choice, require_codes, require_dtype,
                              require_dtype_arg, require_finite, require_group_size, require_instance,
                              require_integer_array, require_shape)
from refsim.errors import DtypeError, FormatRuleError, ShapeError
from refsim.formats import awq as awq_format
from refsim.formats import gptq as gptq_format
from refsim.formats import gptq_marlin
from refsim.formats import marlin as marlin_format
from refsim.io.checkpoint import check_layer
from refsim.io.compressed_tensors import CTLayer
from refsim.io.containers import MarlinLayer
from refsim.io.gptq import AWQLayer, GPTQLayer

__all__ = ["UniformCodes", "codes_of", "exact_cast", "to_gptq", "to_awq", "to_ct", "to_marlin", "UNIFORM_LAYERS"]

UNIFORM_LAYERS = (GPTQLayer, AWQLayer, CTLayer, MarlinLayer)
_SCALE_DTYPES = tuple(np.dtype(d) for d in (ml_dtypes.bfloat16, np.float16, np.float32, np.float64))


@dataclass(frozen=True)
class UniformCodes:
    """q uint8 (K, N), scales float (G, N), zeros uint8 (G, N), g_idx int32 (K,), bits, group_size
    (None = per-channel), sym (every zero is 2**(bits-1)), desc_act (g_idx is not k // group_size),
    bias (N,) or None."""

    name: str
    q: np.ndarray
    scales: np.ndarray
    zeros: np.ndarray
    g_idx: np.ndarray
    bits: int
    group_size: int | None
    sym: bool
    desc_act: bool
    bias: np.ndarray | None = None

    def __post_init__(self):
        check_layer(self, q=2, scales=2, zeros=2, g_idx=1, bias=1)
        require_bits(self.bits, (2, 3, 4, 8))
        k, n = self.q.shape
        groups = self.scales.shape[0]
        require_shape("zeros", self.zeros, (groups, n))
        require_shape("scales", self.scales, (groups, n))
        require_shape("g_idx", self.g_idx, (k,))
        if self.bias is not None:
            require_shape("bias", self.bias, (n,))
        gs = require_group_size(self.group_size, k)
        if groups != (1 if gs is None else k // gs):
            raise ShapeError(f"scales: must have {1 if gs is None else k // gs} rows (K={k}, group_size={gs}); "
                             f"got {groups}")
        require_codes("q", require_dtype("q", self.q, np.uint8), self.bits)
        require_codes("zeros", require_dtype("zeros", self.zeros, np.uint8), self.bits)
        g_idx = require_integer_array("g_idx", self.g_idx)
        if g_idx.size and (int(g_idx.min()) < 0 or int(g_idx.max()) >= groups):
            raise FormatRuleError(f"g_idx: entries must lie in [0, {groups - 1}]; got range "
                                  f"[{int(g_idx.min())}, {int(g_idx.max())}]")
        if self.sym and np.any(self.zeros != 1 << (self.bits - 1)):
            raise FormatRuleError(f"zeros: every zero point must be {1 << (self.bits - 1)} when sym; got "
                                  f"{int(self.zeros[self.zeros != 1 << (self.bits - 1)][0])}")

    @property
    def k(self) -> int:
        return self.q.shape[0]

    @property
    def n(self) -> int:
        return self.q.shape[1]


def codes_of(layer) -> UniformCodes:
    """The codes of a GPTQ, AWQ, compressed-tensors or Marlin layer (source row order)."""
    require_instance("layer", layer, UNIFORM_LAYERS, "uniform layer (GPTQLayer, AWQLayer, CTLayer, MarlinLayer)")
    if isinstance(layer, GPTQLayer):
        q, scales, _, g_idx = gptq_format.unpack(layer.ckpt)
        zeros = layer.zeros()
        if np.any(zeros >= (1 << layer.bits)):
            raise FormatRuleError(f"{layer.name}: v1 zero field(s) overflowed ('zero - 1' of a zero of 0); the "
                                  "true zero points are lost")
        return UniformCodes(layer.name, q, scales, zeros.astype(np.uint8), g_idx.astype(np.int32), layer.bits,
                            layer.group_size, bool(np.all(zeros == 1 << (layer.bits - 1))), layer.desc_act, layer.bias)
    if isinstance(layer, AWQLayer):
        q, scales, zeros = awq_format.unpack(layer.ckpt)
        return UniformCodes(layer.name, q, scales, zeros, gptq_format.default_g_idx(layer.k, layer.group_size), 4,
                            layer.group_size, bool(np.all(zeros == 8)), False, layer.bias)
    if isinstance(layer, CTLayer):
        q, scales, zeros, g_idx = layer.uniform()
        return UniformCodes(layer.name, q, scales, zeros, g_idx, layer.bits, layer.group_size, layer.sym,
                            layer.g_idx is not None)
    q, scales = marlin_format.unpack(layer.B, layer.s)                       # Marlin row order
    gs = layer.group_size
    g_marlin = gptq_format.default_g_idx(layer.k, gs)
    if layer.perm is None:
        return UniformCodes(layer.name, q, scales, np.full(scales.shape, 8, np.uint8), g_marlin, 4, gs, True, False)
    q_src = np.empty_like(q)
    q_src[layer.perm] = q                                                    # Marlin row k is source row perm[k]
    g_idx = np.empty(layer.k, np.int32)
    g_idx[layer.perm] = g_marlin
    return UniformCodes(layer.name, q_src, scales, np.full(scales.shape, 8, np.uint8), g_idx, 4, gs, True, True)


def exact_cast(name: str, scales: np.ndarray, dtype) -> np.ndarray:
    """``scales`` in ``dtype`` when every value survives the cast exactly; FormatRuleError otherwise
    (a conversion never rounds a scale)."""
    require_instance("name", name, str)
    scales = require_array("scales", scales)
    if scales.dtype not in _SCALE_DTYPES:
        raise DtypeError(f"scales: dtype must be bfloat16, float16, float32 or float64; got {scales.dtype}")
    dtype = require_dtype_arg("dtype", dtype, (ml_dtypes.bfloat16, np.float16, np.float32))
    require_finite("scales", scales)
    if scales.dtype == dtype:
        return scales
    with np.errstate(over="ignore", under="ignore"):
        out = scales.astype(np.float32).astype(dtype)
    back = out.astype(np.float32)
    bad = back != scales.astype(np.float32)
    if bad.any():
        v = float(scales.astype(np.float32)[bad][0])
        raise FormatRuleError(f"{name}: scales must be exactly representable in {dtype} for this target "
                              f"({int(bad.sum())} are not); got {v!r}")
    return out


def _refuse(u: UniformCodes, target: str, reasons: list[str]) -> None:
    if reasons:
        raise FormatRuleError(f"{u.name}: cannot convert to {target}: {'; '.join(reasons)}")


def to_gptq(u: UniformCodes, checkpoint_format: str = "gptq_v2") -> GPTQLayer:
    """A GPTQ layer holding the same codes, zeros, g_idx and (fp16) scales."""
    require_instance("u", u, UniformCodes)
    checkpoint_format = require_choice("checkpoint_format", checkpoint_format, gptq_format.CHECKPOINT_FORMATS)
    reasons = [] if u.bits in gptq_format.BITS else [f"bits={u.bits} (GPTQ stores {list(gptq_format.BITS)})"]
    if u.k % 32 or u.n % 32:
        reasons.append(f"K={u.k}, N={u.n} (GPTQ packs multiples of 32)")
    if checkpoint_format == "gptq" and np.any(u.zeros == 0):
        reasons.append("a zero point is 0, which v1's 'zero - 1' cannot store")
    _refuse(u, "gptq", reasons)
    s16 = exact_cast(u.name, u.scales, np.float16)
    ck = gptq_format.pack(u.q, s16, u.zeros, u.bits, g_idx=u.g_idx, checkpoint_format=checkpoint_format)
    bias = None if u.bias is None else u.bias.astype(np.float16)
    return GPTQLayer(u.name, ck, u.group_size, u.desc_act, u.sym, bias)


def to_awq(u: UniformCodes) -> AWQLayer:
    """An AutoAWQ GEMM layer (4-bit, no act-order) holding the same codes, zeros and fp16 scales."""
    require_instance("u", u, UniformCodes)
    reasons = [] if u.bits == 4 else [f"bits={u.bits} (AWQ GEMM is 4-bit)"]
    if u.desc_act:
        reasons.append("act-order (AWQ reads groups as consecutive rows)")
    if u.n % 8:
        reasons.append(f"N={u.n} is not a multiple of 8")
    _refuse(u, "awq", reasons)
    ck = awq_format.pack(u.q, exact_cast(u.name, u.scales, np.float16), u.zeros, u.group_size)
    return AWQLayer(u.name, ck, None if u.bias is None else u.bias.astype(np.float16))


def to_ct(u: UniformCodes, scale_dtype=None) -> CTLayer:
    """A compressed-tensors layer (signed codes; scales in ``scale_dtype``, default their own)."""
    require_instance("u", u, UniformCodes)
    _refuse(u, "compressed-tensors", [] if u.bits in (2, 3, 4, 8) else [f"bits={u.bits}"])
    off = 1 << (u.bits - 1)
    s = u.scales if scale_dtype is None else exact_cast(u.name, u.scales, scale_dtype)
    q = (u.q.T.astype(np.int16) - off).astype(np.int8)
    z = (u.zeros.T.astype(np.int16) - off).astype(np.int8)
    act_order = u.desc_act and u.group_size is not None  # one group: g_idx is all 0, nothing to carry
    g_idx = u.g_idx.astype(np.int32) if act_order else None
    return CTLayer(u.name, np.ascontiguousarray(q), np.ascontiguousarray(s.T), np.ascontiguousarray(z), g_idx,
                   u.bits, u.group_size, u.sym, "group" if act_order else None)


def marlin_reasons(u: UniformCodes) -> list[str]:
    """Why Marlin's kernel cannot run these codes as they are (empty when it can)."""
    require_instance("u", u, UniformCodes)
    reasons = []
    if u.bits != 4:
        reasons.append(f"bits={u.bits} (Marlin is 4-bit)")
    if u.group_size not in (None, 128):
        reasons.append(f"group_size={u.group_size} (Marlin supports 128 or per-channel)")
    if u.k % 128:
        reasons.append(f"K={u.k} is not a multiple of 128")
    if u.n % 256:
        reasons.append(f"N={u.n} is not a multiple of 256")
    if u.bits == 4 and np.any(u.zeros != 8):
        reasons.append(f"asymmetric zero points ({int((u.zeros != 8).sum())} of {u.zeros.size} differ from 8; "
                       "Marlin's format is symmetric, (q - 8) * s)")
    if u.desc_act and u.group_size is not None and not reasons:
        counts = np.bincount(u.g_idx, minlength=u.scales.shape[0])
        if np.any(counts != u.group_size):
            reasons.append("act-order groups do not all hold exactly group_size rows")
    return reasons


def requantize_hint(k: int, n: int) -> str:
    """The hint that ends a Marlin refusal of a (K, N) layer: ``--requantize`` where it applies. It
    re-quantizes bits, zero points and group size into Marlin's scheme but cannot change the shape, so
    where K % 128 or N % 256 is not 0 there is no hint (empty string)."""
    if k % 128 or n % 256:
        return ""
    return " (use --requantize to re-quantize symmetrically and report the added error)"


def to_marlin(u: UniformCodes) -> MarlinLayer:
    """Marlin's B and s for these codes (fp16 scales; act-order through ``perm``)."""
    require_instance("u", u, UniformCodes)
    reasons = marlin_reasons(u)
    if reasons:
        raise FormatRuleError(f"{u.name}: cannot repack to Marlin: {'; '.join(reasons)}{requantize_hint(u.k, u.n)}")
    s16 = exact_cast(u.name, u.scales, np.float16)
    perm = gptq_marlin.act_order_perm(u.g_idx) if u.desc_act else None
    q = u.q if perm is None else u.q[perm]
    B, s = marlin_format.pack(q, s16, u.group_size)
    return MarlinLayer(u.name, B, s, perm)

