"""GPTQ on float grids (FP8 e4m3, NVFP4 / MXFP4 e2m1) as llm-compressor's ``GPTQModifier`` applies them.

Spec
----
    presets      FP8_DYNAMIC  e4m3, one float32 scale per output channel (refsim.quant.fp8)
                 FP8_BLOCK    e4m3, a float32 scale per 128x128 tile (refsim.quant.fp8)
                 NVFP4A16     e2m1, e4m3 scale per 16 along K and the fp32 global scale g (refsim.quant.ct_fp4)
                 MXFP4A16     e2m1, E8M0 scale per 32 along K (refsim.quant.ct_fp4)
    scales       the observer's, computed ONCE from the original weights before GPTQ runs: exactly the
                 round-to-nearest quantizer's scales; the effective scale of an element is s (FP8),
                 float32(e4m3(s) / g) (NVFP4) or 2^(e - 127) (MXFP4) -- ``column_scale_window``
    grid         :class:`FloatGrid`: t = float32(w / s_eff), clamped to +-max (448 e4m3, 6 e2m1), rounded to
                 the element format (nearest, ties to even), value = float32(decode(code) * s_eff);
                 e2m1 keeps ``torch.sign``: t = +-0 gives +0 (compressed-tensors' ``fake_quantize``)
    loop         refsim.quant.gptq's column loop with ``updates="rank1"``: the reference's order (each row
                 updates the later rows of its block by one rounded product and one subtraction; each block
                 updates the later rows by one gemm). H float (K, K) = 2/n sum x x^T as llm-compressor
                 accumulates it; percdamp 0.01; block 128. Dead inputs (diag H = 0): H[k, k] = 1, row zeroed.
    act_order    True = llm-compressor's actorder "weight": rows processed by descending diag H, each row with
                 its own (original) group's scale. "static", GPTQModifier's default, is compressed-tensors'
                 alias of "weight" (``ActivationOrdering.get_aliases``; the goldens of both are identical)
    checkpoint   the fake-quantized weights W_hat re-quantized with the same scales (the compressor's step):
                 FP8 adds the zero point 0 (-0.0 becomes +0), e2m1 maps +-0 to +0
    matched      llm-compressor 0.14.0.1, compressed-tensors 0.19.0, torch 2.13.0 (CPU, eager
                 ``gptq_block_update``), float32 model: W_hat and every saved tensor of the seven linears of
                 a one-layer Llama, from the Hessians the library accumulated, bit for bit
                 (tests/quant/data/gptq_float_llmcompressor.npz, made by make_gptq_float.py beside it).
                 With the library's factor U (torch's Cholesky chain on MKL): every case, with and without
                 act-order, GPTQ blocks of 128 and of 32 (2-4 blocks a layer: the block gemm, whose sums
                 OpenBLAS orders its own way, matched). From H with refsim's own factor (OpenBLAS; about half
                 of U's entries differ from torch's in the last bits): the FP4 cases and FP8_DYNAMIC, while
                 1 of 40960 FP8_BLOCK values and 5 of 40960 act-order FP8_DYNAMIC values move by one code
                 (elements near a rounding boundary).
    differs      llm-compressor falls back to round to nearest when H is not positive definite after
                 dampening; refsim refuses (FormatRuleError). torch's descending argsort is not stable;
                 refsim's is (equal diag H entries only).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refsim._validate import (
    require_bool,
    require_choice,
    require_dtype,
    require_fields,
    require_finite,
    require_float_array,
    require_int,
    require_ndim,
    require_shape,
)
from refsim.errors import FormatRuleError, ShapeError
from refsim.formats import minifloat
from refsim.formats import mx as mx_format
from refsim.quant import ct_fp4
from refsim.quant import fp8 as fp8_quant
from refsim.quant.gptq import _check_percdamp, _column_loop, _single_threaded_blas, _upper_cholesky_of_inverse

__all__ = ["PRESETS", "FloatGrid", "GPTQFloatResult", "gptq_quantize_float"]

#: preset -> element format
PRESETS: dict[str, str] = {"FP8_DYNAMIC": "e4m3", "FP8_BLOCK": "e4m3", "NVFP4A16": "e2m1", "MXFP4A16": "e2m1"}
_MAX = {"e4m3": np.float32(448.0), "e2m1": np.float32(6.0)}
_F32 = np.float32


class FloatGrid:
    """A float element grid with fixed scales, as compressed-tensors' ``fake_quantize`` rounds: ``fmt``
    "e4m3" or "e2m1" (module docstring). The loop's ``zero_f`` is unused (symmetric)."""

    def __init__(self, fmt: str):
        self.fmt = require_choice("fmt", fmt, tuple(_MAX))

    def quantize_reference(self, w: np.ndarray, scale: np.ndarray, zero_f=None) -> tuple[np.ndarray, np.ndarray]:
        """(codes uint8 (n,), values float32 (n,)) of the row w float32 (n,) with effective scales float32 (n,)."""
        t = np.clip((w / scale).astype(_F32), -_MAX[self.fmt], _MAX[self.fmt])
        codes = minifloat.encode(t, self.fmt, "saturate")
        if self.fmt == "e2m1":
            codes = np.where(t == 0, np.uint8(0), codes).astype(np.uint8)   # torch.sign(+-0) = 0
        return codes, (minifloat.decode(codes, self.fmt) * scale).astype(_F32)

    def bind(self, n: int):
        """``quantize(w, scale, zero_f, codes_out, t)``: :meth:`quantize_reference` into the uint8 (n,) row
        ``codes_out`` and the float32 (n,) buffer ``t`` (the loop's interface, see refsim.quant.gptq)."""
        def quantize(wv, scale, zero_f, codes_out, t):
            codes_out[...], t[...] = self.quantize_reference(wv, scale)
        return quantize


@dataclass(frozen=True)
class GPTQFloatResult:
    """Output of :func:`gptq_quantize_float`, refsim's (K, N) orientation unless stated.

    preset        the llm-compressor preset
    W_hat         float32 (K, N) fake-quantized weights (what GPTQ leaves in the module)
    codes         uint8 (K, N) the checkpoint's codes (e4m3 bytes or e2m1 codes), W_hat re-quantized
    weight_scale  the checkpoint's scale tensor, torch orientation: float32 (N, 1) FP8_DYNAMIC,
                  (ceil(N/128), ceil(K/128)) FP8_BLOCK; uint8 (N, K/16) e4m3 bytes NVFP4A16, (N, K/32) E8M0 MXFP4A16
    global_scale  float32 (1,) NVFP4's g, else None
    perm          int64 (K,) processing order (identity without act-order)
    losses        float32 (N,) sum_k (w - q)^2 / d^2 / 2 per output column
    """

    preset: str
    W_hat: np.ndarray
    codes: np.ndarray
    weight_scale: np.ndarray
    global_scale: np.ndarray | None
    perm: np.ndarray
    losses: np.ndarray

    def __post_init__(self):
        require_fields(self)

    def tensors(self) -> dict[str, np.ndarray]:
        """The compressed-tensors tensors of the layer, torch orientation: ``weight`` uint8 (N, K) (FP8) or
        ``weight_packed`` uint8 (N, K/2) (FP4), ``weight_scale``, and ``weight_global_scale`` (NVFP4)."""
        if PRESETS[self.preset] == "e4m3":
            return {"weight": np.ascontiguousarray(self.codes.T), "weight_scale": self.weight_scale}
        out = {"weight_packed": mx_format.pack_fp4(np.ascontiguousarray(self.codes.T)),
               "weight_scale": self.weight_scale}
        if self.global_scale is not None:
            out["weight_global_scale"] = self.global_scale
        return out


def _observer_scales(W: np.ndarray, preset: str, gscale) -> tuple[np.ndarray, int, np.ndarray, np.ndarray | None]:
    """(effective scales float32 (G, N) of row groups, the group's rows, weight_scale, global_scale) of the
    round-to-nearest quantizer of ``preset`` on the original W (K, N)."""
    k, n = W.shape
    if PRESETS[preset] == "e4m3":
        if gscale is not None:
            raise FormatRuleError(f"gscale: only NVFP4A16 has a global scale; got one for {preset}")
        q = fp8_quant.quantize_weight(W, preset)
        weight_scale = fp8_quant.checkpoint_tensors(q)["weight_scale"]
        if preset == "FP8_DYNAMIC":
            return q.scales, k, weight_scale, None                          # (1, N): one group of K rows
        eff = np.repeat(q.scales, 128, axis=1)[:, :n]                       # (ceil(K/128), N)
        return np.ascontiguousarray(eff), 128, weight_scale, None
    kind = preset[:5].lower()
    _, scale, glob = ct_fp4.quantize_weight(W, kind, gscale)
    eff = ct_fp4.effective_scale(scale, kind, glob)                         # (N, K/b)
    return np.ascontiguousarray(eff.T), ct_fp4.BLOCK[kind], scale, glob


def _checkpoint_codes(W_hat: np.ndarray, eff_rows: np.ndarray, fmt: str) -> np.ndarray:
    """uint8 (K, N) codes of W_hat (K, N) with per-element scales eff_rows (K, N), as the compressor quantizes."""
    t = (W_hat / eff_rows).astype(_F32)
    if fmt == "e4m3":
        t = t + _F32(0)                                                     # the zero point: -0.0 becomes +0
    t = np.clip(t, -_MAX[fmt], _MAX[fmt])
    codes = minifloat.encode(t, fmt, "saturate")
    if fmt == "e2m1":
        codes = np.where(t == 0, np.uint8(0), codes).astype(np.uint8)
    return codes


def gptq_quantize_float(W: np.ndarray, H: np.ndarray, preset: str, *, gscale: np.ndarray | None = None,
                        act_order: bool = False, percdamp: float = 0.01, blocksize: int = 128,
                        U: np.ndarray | None = None) -> GPTQFloatResult:
    """GPTQ of ``W`` float32 (K, N), finite, given the Hessian ``H`` float (K, K) of its inputs, on the grid of
    llm-compressor's ``preset`` (:data:`PRESETS`; module docstring). ``gscale``: NVFP4A16's global scale
    float32 (1,) (default: the layer's own; pass the fused group's, :func:`refsim.quant.ct_fp4.fused_groups`).
    ``U``: float32 (K, K) upper factor of the damped inverse of H in processing order, to replay a run of the
    library with its own factor (default: :func:`refsim.quant.gptq.upper_cholesky_of_inverse`, which rounds
    differently from torch's MKL chain). Inputs are not modified. Returns :class:`GPTQFloatResult`."""
    preset = require_choice("preset", preset, tuple(PRESETS))
    W = require_finite("W", require_ndim("W", require_dtype("W", W, np.float32), 2))
    k, n = W.shape
    H = require_float_array("H", H)
    require_shape("H", H, (k, k))
    require_finite("H", H)
    act_order = require_bool("act_order", act_order)
    blocksize = require_int("blocksize", blocksize, minimum=1)
    percdamp = _check_percdamp(percdamp)
    if k == 0 or n == 0:
        raise ShapeError(f"W: must have K >= 1 and N >= 1; got {W.shape}")
    fmt = PRESETS[preset]
    eff, group, weight_scale, glob = _observer_scales(W, preset, gscale)   # from the original weights

    dead = np.diag(H) == 0
    if dead.any():
        W = W.copy()
        H = H.astype(np.float64)
        H[dead, dead] = 1.0
        W[dead, :] = 0.0
    perm = np.argsort(-np.diag(H), kind="stable") if act_order else np.arange(k)
    if U is None:
        U = _upper_cholesky_of_inverse(H, percdamp, perm if act_order else None)
    else:
        U = np.asfortranarray(require_finite("U", require_shape("U", require_dtype("U", U, np.float32), (k, k))))
        if not (np.diagonal(U) > 0).all():
            raise FormatRuleError("U: must be an upper Cholesky factor (diagonal > 0); got a diagonal entry <= 0")
    Wp = np.ascontiguousarray(W[perm] if act_order else W)
    zero = np.zeros(n, np.int32)                                            # symmetric: unused by the grid
    static = [(eff[g], zero) for g in range(eff.shape[0])]                  # group g of original rows
    with _single_threaded_blas():
        codes, losses, _, _ = _column_loop(Wp, U=U, perm=perm, grid=FloatGrid(fmt), group_size=group,
                                           static=static, params=None, blocksize=blocksize, updates="rank1")
    eff_rows = eff[np.arange(k) // group]                                   # (K, N) original order
    values = minifloat.decode(codes, fmt) * eff_rows[perm]                  # processing order
    W_hat = np.empty((k, n), _F32)
    W_hat[perm] = values.astype(_F32)
    return GPTQFloatResult(preset, W_hat, _checkpoint_codes(W_hat, eff_rows, fmt), weight_scale, glob,
                           perm.astype(np.int64), losses.astype(_F32))
