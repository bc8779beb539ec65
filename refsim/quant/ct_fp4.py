"""FP4 weight quantization as llm-compressor's NVFP4A16 and MXFP4A16 presets do it (compressed-tensors' arithmetic).

Spec
----
    input        W float32 (K, N), finite (refsim's orientation; torch's Linear weight is W.T, (N, K)), K a
                 multiple of the block (16 NVFP4, 32 MXFP4); blocks run along K within one output row
    NVFP4A16     strategy tensor_group, group 16, float32 throughout (``calculate_qparams``, ``_quantize``):
                   g     = float32(float32(1 / max(A, float32 tiny)) * 2688), A = max |W| over the layer, or
                           over its fused group (below); NaN/Inf -> 1.0 (``generate_gparam``'s
                           ``448 * 6 / A``: torch divides a Python scalar by a tensor as reciprocal, then
                           product -- 768.00006 for A = 3.5, not 768)
                   s     = e4m3(clamp(g * float32(amax_block / 6), -448, 448)), round to nearest even;
                           a zero s becomes 0.125 (code 0x20, the library's eps for e4m3)
                   q     = e2m1(clamp(w / float32(e4m3(s) / g), -6, 6)), round to nearest even
    MXFP4A16     strategy group, group 32, E8M0 scales (``generate_mx_scales``):
                   p     = amax_block with its float32 bits + 2^21, mantissa cleared (round_to_power_2:
                           a mantissa of 1.75 or more goes up one binade)
                   s     = clamp(127 + log2(p) - 2, 0, 255) as uint8 (amax 0 -> 0)
                   q     = e2m1(clamp(w / 2^(s - 127), -6, 6)), round to nearest even
    zeros        ``cast_to_fp4`` keeps ``torch.sign(w)``: an element that rounds to 0 from a negative w is
                 -0 (code 0x8), w = -0.0 itself gives +0 (code 0x0, torch.sign(-0.0) = 0)
    fused        llm-compressor's ``FUSED_LAYER_NAMES``: the layers of one module named q_proj/k_proj/v_proj,
                 gate_proj/up_proj, q_a_proj/kv_a_proj_with_mqa or w1/w3 share one NVFP4 global scale (A over
                 the group), as vLLM's fused kernels need; a group quantized in part is refused (the library
                 asserts)
    checkpoint   weight_packed uint8 (N, K/2), element 2i low nibble; weight_scale e4m3 bytes (N, K/16) /
                 E8M0 uint8 (N, K/32); NVFP4's weight_global_scale float32 (1,) = g
    matched      llm-compressor 0.14.0.1, compressed-tensors 0.19.0, torch 2.13.0 (CPU), float32 model: the
                 saved tensors of every linear of a one-layer Llama, bit for bit
                 (tests/io/data/ct_float_llmcompressor.npz, made by make_ct_float.py beside it)

Source: compressed-tensors 0.19.0 ``quantization/utils/helpers.py`` (``calculate_qparams``,
``generate_gparam``), ``quantization/utils/mxfp_utils.py``, ``quantization/utils/fp4_utils.py``
(``cast_to_fp4``), ``compressors/nvfp4/helpers.py`` (``pack_fp4_to_uint8``), ``compressors/mx_utils.py``;
llm-compressor 0.14.0.1 ``observers/helpers.py`` (``FUSED_LAYER_NAMES``, ``fuse_weight_observers``),
``observers/base.py`` (``get_global_scale``).
"""

from __future__ import annotations

import numpy as np

from refsim._validate import require_choice, require_dtype, require_finite, require_names, require_ndim, require_real
from refsim.errors import FormatRuleError, ShapeError
from refsim.formats import minifloat
from refsim.formats import mx as mx_format

__all__ = ["KINDS", "BLOCK", "FUSED_LAYER_NAMES", "global_scale", "fused_groups", "effective_scale", "quantize_weight"]

KINDS = ("nvfp4", "mxfp4")
BLOCK = {"nvfp4": 16, "mxfp4": 32}
#: llm-compressor's fused layer groups (sibling modules sharing one NVFP4 global scale)
FUSED_LAYER_NAMES = (("gate_proj", "up_proj"), ("q_proj", "k_proj", "v_proj"), ("q_a_proj", "kv_a_proj_with_mqa"),
                     ("w1", "w3"))
_F32 = np.float32
_E4M3_EPS_CODE = np.uint8(0x20)                  # e4m3 0.125


def _check(W) -> np.ndarray:
    W = require_finite("W", require_ndim("W", require_dtype("W", W, np.float32), 2))
    return W


def global_scale(amax: float) -> np.ndarray:
    """NVFP4's ``weight_global_scale`` float32 (1,) for a layer (or fused group) whose largest |w| is
    ``amax`` (a float32 value >= 0): float32(1 / max(amax, tiny)) * 2688 in float32, 1.0 if not finite."""
    a = _F32(require_real("amax", amax))
    if not np.isfinite(a) or a < 0:
        raise FormatRuleError(f"amax: must be a finite float32 value >= 0; got {amax!r}")
    with np.errstate(over="ignore"):
        g = _F32(_F32(_F32(1) / max(a, np.finfo(_F32).tiny)) * _F32(448.0 * 6.0))   # torch: reciprocal, then *
    return np.array([g if np.isfinite(g) else _F32(1.0)], _F32)


def fused_groups(names: list[str]) -> list[list[str]]:
    """The groups of ``names`` (dotted layer names) that share a global scale: siblings (same parent
    module) whose last components form one of :data:`FUSED_LAYER_NAMES` completely. A group with some
    members in ``names`` and others absent is not a group (llm-compressor requires all members to exist)."""
    names = require_names("names", names)
    have = set(names)
    out = []
    for n in names:
        parent, _, leaf = n.rpartition(".")
        for group in FUSED_LAYER_NAMES:
            if leaf == group[0]:
                full = [f"{parent}.{g}" if parent else g for g in group]
                if all(f in have for f in full):
                    out.append(full)
    return out


def _fp4_codes(q: np.ndarray, w: np.ndarray) -> np.ndarray:
    """e2m1 codes of the float32 quotients q (already clamped to +-6), round to nearest even; -0 only where w < 0."""
    codes = minifloat.encode(q, "e2m1", "saturate")
    return np.where(w == 0, np.uint8(0), codes).astype(np.uint8)


def effective_scale(weight_scale: np.ndarray, kind: str, gscale: np.ndarray | None = None) -> np.ndarray:
    """float32 scales the e2m1 elements are divided by, of the shape of ``weight_scale`` uint8 (e4m3 bytes
    for "nvfp4", with ``gscale`` float32 (1,) > 0: float32(e4m3 / g); E8M0 for "mxfp4", no gscale: 2^(e - 127))."""
    kind = require_choice("kind", kind, KINDS)
    weight_scale = require_dtype("weight_scale", weight_scale, np.uint8)
    if kind == "nvfp4":
        g = require_finite("gscale", require_dtype("gscale", gscale, np.float32))
        if g.shape != (1,) or not g[0] > 0:
            raise FormatRuleError(f"gscale: must be a float32 (1,) array > 0; got shape {g.shape}")
    elif gscale is not None:
        raise FormatRuleError("gscale: MXFP4 has no global scale; got one")
    return _effective_scale(weight_scale, kind, gscale)


def _effective_scale(weight_scale, kind, gscale):
    if kind == "nvfp4":
        return (minifloat.decode(weight_scale, "e4m3") / gscale[0]).astype(_F32)
    return np.ldexp(_F32(1), weight_scale.astype(np.int32) - 127).astype(_F32)


def quantize_weight(W: np.ndarray, kind: str, gscale: np.ndarray | None = None
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Quantize float32 W (K, N) as llm-compressor's ``kind`` preset ("nvfp4" = NVFP4A16, "mxfp4" =
    MXFP4A16) does (module docstring). ``gscale``: NVFP4's global scale float32 (1,) (default: the
    layer's own, :func:`global_scale` of max |W|; pass the fused group's); None for MXFP4.

    Returns (``weight_packed`` uint8 (N, K/2), ``weight_scale`` uint8 (N, K/block): e4m3 bytes or E8M0,
    ``weight_global_scale`` float32 (1,) or None), in torch's (N, K) orientation."""
    kind = require_choice("kind", kind, KINDS)
    W = _check(W)
    k, n = W.shape
    b = BLOCK[kind]
    if k == 0 or k % b or n == 0:
        raise ShapeError(f"W: shape must be (K, N) with K a positive multiple of the {kind} block {b} and N >= 1; "
                         f"got {W.shape}")
    if kind == "mxfp4" and gscale is not None:
        raise FormatRuleError("gscale: MXFP4 has no global scale; got one")
    x = np.ascontiguousarray(W.T).reshape(n, k // b, b)                   # (N, K/b, b) torch rows, blocks
    amax = np.abs(x).max(axis=2)                                           # (N, K/b) float32
    if kind == "nvfp4":
        g = global_scale(float(np.abs(W).max())) if gscale is None else \
            require_finite("gscale", require_dtype("gscale", gscale, np.float32))
        if g.shape != (1,) or not g[0] > 0:
            raise FormatRuleError(f"gscale: must be a float32 (1,) array > 0; got shape {g.shape}")
        s = np.clip((g[0] * (amax / _F32(6.0)).astype(_F32)).astype(_F32), _F32(-448), _F32(448))
        s8 = minifloat.encode(s, "e4m3", "saturate")
        s8 = np.where(s8 == 0, _E4M3_EPS_CODE, s8).astype(np.uint8)        # a zero scale becomes 0.125
        scale, glob = s8, g.copy()
    else:
        bits = amax.view(np.uint32)
        p = ((bits.astype(np.uint64) + (1 << 21)) & 0x1FF800000).astype(np.uint32).view(_F32)  # sign+exponent
        with np.errstate(divide="ignore"):
            e = np.log2(p.astype(np.float64))                              # exact: p is a power of 2 or 0
        scale = np.clip(127.0 + e - 2.0, 0, 255).astype(np.uint8)         # -inf (amax 0) -> 0
        glob = None
    eff = _effective_scale(scale, kind, glob)                              # (N, K/b)
    q = np.clip((x / eff[..., None]).astype(_F32), _F32(-6), _F32(6))
    codes = _fp4_codes(q, x).reshape(n, k)
    return mx_format.pack_fp4(codes), np.ascontiguousarray(scale), glob
