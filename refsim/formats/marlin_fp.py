"""vLLM Marlin's FP8 (e4m3) and NVFP4 (e2m1 + e4m3 group-16 scales) weights, bit for bit.

Spec block
----------
- **Kinds**: ``"fp8"``: e4m3fn weight codes, one fp16 scale per output channel (vLLM's FP8 Marlin,
  ``b_type kFE4M3fn``, ``s_type kFloat16``, group_blocks -1); ``"nvfp4"``: e2m1 weight codes, one
  e4m3 scale per 16 weights along K and one fp32 tensor scale (``b_type kFE2M1f``,
  ``s_type kFE4M3fn``, group_blocks 1). Values: ``W[k, n] = e4m3(q) * s[n]`` and
  ``W[k, n] = e2m1(q) * e4m3(s8[k // 16, n]) * t``.
- **Container**: int32 words, 16x64 tiles in row-major tile order (a tile row is 16 values of K).
  fp8: ``B`` (K/16, 4N), 4 codes per word (byte i = bits 8i..8i+7); nvfp4: ``B`` (K/16, 2N),
  8 codes per word, exactly the INT4 Marlin layout of :mod:`refsim.formats.marlin` (vLLM repacks
  both with ``gptq_marlin_repack``, ``num_bits`` 8 or 4, from codes packed along K).
- **Element order** (lane ``l``, ``t = l % 4``, ``g = l // 4``, sub-tile ``j``, ``c = 16 j + g``):
  fp8: lane ``l`` owns words ``8 l .. 8 l + 7`` of a tile; word ``8 l + 2 j + h`` holds column
  ``c + 8 h``, bytes 0..3 = rows ``2t, 2t+8, 2t+1, 2t+9`` (repack ``pack_idx = {0, 2, 1, 3}``);
  nvfp4: the INT4 interleave, nibbles 0..7 = ``(2t,c) (2t+8,c) (2t,c+8) (2t+8,c+8) (2t+1,c)
  (2t+9,c) (2t+1,c+8) (2t+9,c+8)``.
- **Bit tricks** (``dequant.h``, ``skip_flop``: no float op, the exponent bias goes into the scales):
  an e4m3 byte ``S EEEE MMM`` becomes the fp16 ``S 0EEEE MMM0000000`` = ``e4m3 * 2^-8``; an e2m1
  nibble ``S EE M`` the fp16 ``S 000EE M000000000`` = ``e2m1 * 2^-14`` (subnormals land on fp16
  subnormals, so both are exact for every code). The e4m3 NaN codes ``S 1111 111`` have no special
  case: they read as ``+-480 * 2^-8`` (finite).
- **Scales**: fp8: ``s16 = fp16(s * 2^8)`` (``fp8_fused_exponent_bias_into_scales``), columns by
  ``scale_perm_single`` (:func:`refsim.formats.marlin.permute_scales`, one row). nvfp4: the e4m3
  scales as fp16, columns by ``scale_perm`` (grouped, K/16 > 1 rows), each 4 halves reordered
  ``[0, 2, 1, 3]``, times ``2^7``, below 2 set to 0, then stored as the "S0E5M3" byte = fp16 bits
  14..7 (``nvfp4_marlin_process_scales``; exact for every e4m3 scale >= 2^-6, the smaller ones are
  zeroed); the kernel turns the byte back into the fp16 ``byte << 7``. The tensor scale becomes
  ``t * 2^(14 - 7)`` in fp32 (``nvfp4_marlin_process_global_scale``; fp16 activations: no extra
  power-of-two factor).
- **Numerics in the kernel**: fp8: the tensor-core operand is the exact ``e4m3 * 2^-8``; the fp32
  result is multiplied by ``float(s16[n])`` (one fp32 rounding) before the fp16 conversion. nvfp4:
  the operand is ``fp16(e2m1 * 2^-14 * S)`` (one ``__hmul2``, with ``S`` = the decoded scale; exact
  for every prepared scale: ``S >= 2`` keeps the product a normal fp16 of at most 6 significant bits,
  which is why vLLM zeroes the smaller scales), the fp32 result is multiplied by the fp32 tensor scale, then converted to fp16.
- **Shape rules**: K % 16 and N % 64 (the repack's tiles); the kernel itself needs K % 128 and
  N % 128 (its 128x128 tile, :mod:`refsim.emulator.vllm_marlin_fp_kernel`).
- **Source**: vLLM 0.33.0 (PyPI sdist): ``csrc/quantization/marlin/dequant.h`` (``dequant`` for
  kFE4M3fn / kFE2M1f, ``dequant_fp8_scales``), ``gptq_marlin_repack.cu``,
  ``vllm/model_executor/layers/quantization/utils/marlin_utils_fp8.py`` / ``marlin_utils_fp4.py`` /
  ``marlin_utils.py`` (``marlin_permute_scales``).

The fp8 trick on one word (q = bytes b3 b2 b1 b0, MSB first)::

    Out1 = (q & 0x80008000) | ((q & 0x7F007F00) >> 1)     halves (b1, b3) -> frag_b[1]
    q <<= 8; Out2 = same                                  halves (b0, b2) -> frag_b[0]
    e4m3 0x44 = 0 1000 100 (3.0)  ->  fp16 0 01000 1000000000 = 0x2200 = 3.0 * 2^-8

The nvfp4 trick, word w: ``b_quant_1 = w``, ``b_quant_0 = w << 8``; for each,
``Out1 = (q & 0x80008000) | ((q & 0x70007000) >> 3)`` (nibbles 3, 7 -> frag_b[1]) and, after
``q <<= 4``, nibbles 2, 6 -> frag_b[0]::

    e2m1 0x5 = 0 10 1 (3.0)  ->  fp16 0 00010 1000000000 = 0x0A00 = 3.0 * 2^-14
"""

from __future__ import annotations

import numpy as np

from refsim._validate import (require_choice, require_codes, require_divisible, require_dtype, require_finite,
                              require_int, require_integer_array, require_ndim, require_real, require_shape)
from refsim.errors import FormatRuleError, NonFiniteError, ShapeError
from refsim.formats import marlin, minifloat

__all__ = ["KINDS", "FP8_BIAS_SHIFT", "FP4_BIAS_SHIFT", "S0E5M3_SHIFT",
           "fp8_to_half", "fp8_to_half_reference", "fp4_to_half", "fp4_to_half_reference",
           "dequant_fp8_word", "dequant_fp4_word", "s0e5m3_encode", "s0e5m3_decode",
           "pack_fp8_codes", "pack_fp8_codes_reference", "unpack_fp8_codes", "pack_fp4_codes", "unpack_fp4_codes",
           "permute_nvfp4_scales", "unpermute_nvfp4_scales", "prepare_fp8", "prepare_nvfp4",
           "kernel_operand", "dequantize"]

KINDS = ("fp8", "nvfp4")
#: the fp8 trick's result is ``e4m3 * 2^-FP8_BIAS_SHIFT`` (fp16 bias 15 - e4m3 bias 7)
FP8_BIAS_SHIFT = 8
#: the fp4 trick's result is ``e2m1 * 2^-FP4_BIAS_SHIFT`` (fp16 bias 15 - e2m1 bias 1)
FP4_BIAS_SHIFT = 14
#: nvfp4 scales are stored times ``2^S0E5M3_SHIFT``
S0E5M3_SHIFT = 7
#: fp8 byte order inside a word: byte i holds fragment row ``_FP8_ROWS[i]`` (offsets from 2t)
_FP8_ROWS = (0, 8, 1, 9)


# ----------------------------------------------------------------------------------------------
# Element bit tricks, each with its plain reference
# ----------------------------------------------------------------------------------------------
def _u8(name, codes):
    return require_dtype(name, require_integer_array(name, codes), np.uint8)


def fp8_to_half(codes: np.ndarray) -> np.ndarray:
    """uint8 e4m3 codes (any shape) -> float16 ``e4m3 * 2^-8``: the kernel's shift, per element.

    fp16 bits = ``(c & 0x80) << 8 | (c & 0x7F) << 7``; NaN codes give ``+-480 * 2^-8``.
    """
    c = _u8("codes", codes).astype(np.uint16)
    return (((c & 0x80) << 8) | ((c & 0x7F) << 7)).astype(np.uint16).view(np.float16)


def fp8_to_half_reference(codes: np.ndarray) -> np.ndarray:
    """Plain twin of :func:`fp8_to_half` from the spec: ``decode_e4m3(c) * 2^-8``, NaN codes as +-480."""
    c = _u8("codes", codes)
    out = np.empty(c.shape, np.float16)
    for i, code in np.ndenumerate(c):
        v = float(minifloat.decode(np.array([code], np.uint8), "e4m3")[0])
        if np.isnan(v):
            v = -480.0 if code & 0x80 else 480.0
        out[i] = np.float16(v * 2.0 ** -FP8_BIAS_SHIFT)
    return out


def fp4_to_half(codes: np.ndarray) -> np.ndarray:
    """uint8 e2m1 codes in [0, 15] (any shape) -> float16 ``e2m1 * 2^-14``: fp16 bits
    ``(c & 8) << 12 | (c & 7) << 9``."""
    c = require_codes("codes", _u8("codes", codes), 4).astype(np.uint16)
    return (((c & 0x8) << 12) | ((c & 0x7) << 9)).astype(np.uint16).view(np.float16)


def fp4_to_half_reference(codes: np.ndarray) -> np.ndarray:
    """Plain twin of :func:`fp4_to_half`: ``decode_e2m1(c) * 2^-14``."""
    c = require_codes("codes", _u8("codes", codes), 4)
    out = np.empty(c.shape, np.float16)
    for i, code in np.ndenumerate(c):
        v = float(minifloat.decode(np.array([code], np.uint8), "e2m1")[0])
        out[i] = np.float16(v * 2.0 ** -FP4_BIAS_SHIFT)
    return out


def _words(name, q):
    q = require_dtype(name, require_integer_array(name, q), np.int32, np.uint32)
    return q.view(np.uint32) if q.dtype == np.int32 else q


def dequant_fp8_word(q: np.ndarray) -> np.ndarray:
    """The kernel's ``dequant<half2, kFE4M3fn, true>`` on int32 words (any shape) -> uint16 fp16 bits
    ``(..., 4)`` in fragment order ``frag_b[0].x, .y, frag_b[1].x, .y`` = bytes 0, 2, 1, 3."""
    q = _words("q", q)
    out1 = (q & 0x80008000) | ((q & 0x7F007F00) >> 1)                  # bytes 1, 3 -> frag_b[1]
    q2 = (q << 8) & 0xFFFFFFFF
    out2 = (q2 & 0x80008000) | ((q2 & 0x7F007F00) >> 1)                # bytes 0, 2 -> frag_b[0]
    halves = lambda w: np.stack([w & 0xFFFF, w >> 16], axis=-1)       # noqa: E731  (..., 2) .x, .y
    return np.concatenate([halves(out2), halves(out1)], axis=-1).astype(np.uint16)


def dequant_fp4_word(q: np.ndarray) -> np.ndarray:
    """The kernel's two ``dequant<half2, kFE2M1f, true>`` calls on a word ``w`` (``b_quant_0 = w << 8``,
    ``b_quant_1 = w``) -> uint16 fp16 bits ``(..., 8)``: frag_b0 ``[0].x, [0].y, [1].x, [1].y``, then
    frag_b1 = nibbles 0, 4, 1, 5, 2, 6, 3, 7."""
    q = _words("q", q)

    def one(x):
        o1 = (x & 0x80008000) | ((x & 0x70007000) >> 3)               # frag_b[1]
        x = (x << 4) & 0xFFFFFFFF
        o2 = (x & 0x80008000) | ((x & 0x70007000) >> 3)               # frag_b[0]
        return [o2 & 0xFFFF, o2 >> 16, o1 & 0xFFFF, o1 >> 16]

    return np.stack(one((q << 8) & 0xFFFFFFFF) + one(q), axis=-1).astype(np.uint16)


def s0e5m3_encode(scales: np.ndarray) -> np.ndarray:
    """float16 nvfp4 scales (any shape, >= 0, finite) -> uint8 S0E5M3 bytes, as vLLM stores them:
    ``h = fp16(s * 2^7)``, ``h < 2 -> 0``, byte = fp16 bits 14..7 of ``h``. A negative scale (the
    kernel has no sign bit for it) is refused."""
    s = require_finite("scales", require_dtype("scales", scales, np.float16))
    if (s < 0).any():
        raise FormatRuleError(f"scales: the S0E5M3 byte has no sign, every nvfp4 scale must be >= 0; "
                              f"got {float(s[s < 0].flat[0])}")
    with np.errstate(over="ignore"):
        h = (s.astype(np.float32) * np.float32(2 ** S0E5M3_SHIFT)).astype(np.float16)   # exact or overflow
    if not np.isfinite(h).all():
        raise NonFiniteError("scales: s * 2^7 overflows float16 (s > 511.75)")
    h = np.where(h < 2, np.float16(0), h)
    return ((h.view(np.uint16).astype(np.uint32) << 1) >> 8 & 0xFF).astype(np.uint8)


def s0e5m3_decode(b: np.ndarray) -> np.ndarray:
    """uint8 S0E5M3 bytes (any shape) -> float16 ``bits = byte << 7`` (the kernel's
    ``dequant_fp8_scales<half2, kFE4M3fn>``): the stored scale times 2^7."""
    b = _u8("b", b).astype(np.uint16)
    return (b << 7).astype(np.uint16).view(np.float16)


# ----------------------------------------------------------------------------------------------
# Weight layouts
# ----------------------------------------------------------------------------------------------
def _check_rows(name: str, b: np.ndarray) -> np.ndarray:
    if b.shape[0] < 1:
        raise ShapeError(f"{name}: needs at least one row of 16x64 tiles (K >= 16); got shape {b.shape}")
    return b


def _check_kn(k: int, n: int) -> None:
    require_divisible("K", k, 16, "must be a positive multiple of 16 (16x64 tiles)")
    require_divisible("N", n, 64, "must be a positive multiple of 64 (16x64 tiles)")


def _fp8_tile_perm() -> np.ndarray:
    """Storage slot -> flat index ``64 row + col`` of a 16x64 tile (1024 entries, 4 per word)."""
    perm = np.empty(1024, np.int64)
    for lane in range(32):
        t, g = lane % 4, lane // 4
        for j in range(4):
            for h in range(2):
                for byte in range(4):
                    perm[4 * (8 * lane + 2 * j + h) + byte] = 64 * (2 * t + _FP8_ROWS[byte]) + 16 * j + g + 8 * h
    return perm


_FP8_PERM = _fp8_tile_perm()
_FP8_PERM_INV = marlin.inverse_perm(_FP8_PERM)


def pack_fp8_codes(q: np.ndarray) -> np.ndarray:
    """uint8 e4m3 codes ``(K, N)`` (K % 16, N % 64) -> int32 ``B`` ``(K/16, 4N)`` in vLLM's 8-bit Marlin
    layout (module spec). Inputs are not modified."""
    q = require_ndim("q", _u8("q", q), 2)
    k, n = q.shape
    _check_kn(k, n)
    t = q.reshape(k // 16, 16, n // 64, 64).transpose(0, 2, 1, 3).reshape(k // 16, n // 64, 1024)  # per tile
    return np.ascontiguousarray(np.take(t, _FP8_PERM, axis=2)).reshape(k // 16, 16 * n).view("<u4").view(np.int32)


def pack_fp8_codes_reference(q: np.ndarray) -> np.ndarray:
    """Plain-loop twin of :func:`pack_fp8_codes`, written from ``gptq_marlin_repack``'s 8-bit branch:
    for tile (kt, nt), warp j, lane l: ``res1`` / ``res2`` (columns c, c + 8) with byte i = row
    ``2t + {0, 1, 8, 9}[pack_idx[i]]``, ``pack_idx = {0, 2, 1, 3}``, at words ``8 l + 2 j + {0, 1}``."""
    q = require_ndim("q", _u8("q", q), 2)
    k, n = q.shape
    _check_kn(k, n)
    out = np.zeros((k // 16, 4 * n), np.uint32)
    offs, pack_idx = (0, 1, 8, 9), (0, 2, 1, 3)
    for kt in range(k // 16):
        for nt in range(n // 64):
            for j in range(4):
                for lane in range(32):
                    t, g = lane % 4, lane // 4
                    col = 64 * nt + 16 * j + g
                    for h in range(2):
                        word = 0
                        for i in range(4):
                            word |= int(q[16 * kt + 2 * t + offs[pack_idx[i]], col + 8 * h]) << (8 * i)
                        out[kt, 256 * nt + 8 * lane + 2 * j + h] = word
    return out.view(np.int32)


def unpack_fp8_codes(b: np.ndarray) -> np.ndarray:
    """Inverse of :func:`pack_fp8_codes`: int32 ``(K/16, 4N)`` -> uint8 ``(K, N)``."""
    b = _check_rows("b", require_ndim("b", require_dtype("b", b, np.int32), 2))
    kb, w = b.shape
    k, n = 16 * kb, w // 4
    require_divisible("B.shape[1]", w, 256, "must be 4N with N a positive multiple of 64")
    by = np.ascontiguousarray(b).view(np.uint8).reshape(kb, n // 64, 1024)           # storage slots
    t = np.take(by, _FP8_PERM_INV, axis=2).reshape(kb, n // 64, 16, 64)               # (K/16, N/64, 16, 64)
    return t.transpose(0, 2, 1, 3).reshape(k, n)


def pack_fp4_codes(q: np.ndarray) -> np.ndarray:
    """uint8 e2m1 codes ``(K, N)`` in [0, 15] (K % 16, N % 64) -> int32 ``(K/16, 2N)``: the INT4 Marlin
    layout (:func:`refsim.formats.marlin.permute_weights`), as vLLM's 4-bit repack writes it."""
    q = require_codes("q", require_ndim("q", _u8("q", q), 2), 4)
    _check_kn(*q.shape)
    p = marlin.permute_weights(q)                                       # (K/16, 16N) storage order
    r, c = p.shape
    pairs = p.reshape(r, c // 2, 2)
    byte = (pairs[:, :, 0] | (pairs[:, :, 1] << 4)).astype(np.uint8)    # (K/16, 8N)
    return np.ascontiguousarray(byte).view("<u4").view(np.int32)


def unpack_fp4_codes(b: np.ndarray) -> np.ndarray:
    """Inverse of :func:`pack_fp4_codes`: int32 ``(K/16, 2N)`` -> uint8 ``(K, N)``."""
    b = _check_rows("b", require_ndim("b", require_dtype("b", b, np.int32), 2))
    require_divisible("B.shape[1]", b.shape[1], 128, "must be 2N with N a positive multiple of 64")
    byte = np.ascontiguousarray(b).view(np.uint8)                       # (K/16, 8N)
    p = np.stack([byte & 0xF, byte >> 4], axis=-1).reshape(b.shape[0], -1)   # (K/16, 16N) nibbles
    return marlin.unpermute_weights(p, 16 * b.shape[0], b.shape[1] // 2).astype(np.uint8)


# ----------------------------------------------------------------------------------------------
# Scales and the host preparation
# ----------------------------------------------------------------------------------------------
_REORDER4 = np.array([0, 2, 1, 3])          # self-inverse


def permute_nvfp4_scales(s16: np.ndarray) -> np.ndarray:
    """float16 scales ``(K/16, N)`` (>= 0) -> uint8 S0E5M3 bytes ``(K/16, N)`` in the kernel's order:
    :func:`refsim.formats.marlin.permute_scales`, the ``[0, 2, 1, 3]`` reorder of every 4, then
    :func:`s0e5m3_encode`."""
    p = marlin.permute_scales(require_ndim("s16", require_dtype("s16", s16, np.float16), 2))
    p = p.reshape(-1, 4)[:, _REORDER4].reshape(p.shape)
    return s0e5m3_encode(p)


def unpermute_nvfp4_scales(s: np.ndarray) -> np.ndarray:
    """uint8 S0E5M3 ``(K/16, N)`` -> the float16 scales times 2^7 that the kernel uses, logical order."""
    s = require_ndim("s", _u8("s", s), 2)
    require_divisible("N (columns of s)", s.shape[1], 64, "must be a positive multiple of 64")
    h = s0e5m3_decode(s)
    h = h.reshape(-1, 4)[:, _REORDER4].reshape(h.shape)
    return marlin.unpermute_scales(h)


def prepare_fp8(q: np.ndarray, scales: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """vLLM's FP8 Marlin preparation: uint8 e4m3 codes ``(K, N)`` and float16 per-channel scales
    ``(1, N)`` -> ``(B, s)``: ``B`` int32 ``(K/16, 4N)``, ``s`` float16 ``(1, N)`` = ``scales * 2^8``
    (exact; an overflow to inf is refused), columns permuted. Inputs are not modified."""
    q = require_ndim("q", _u8("q", q), 2)
    k, n = q.shape
    scales = require_finite("scales", require_shape("scales", require_dtype("scales", scales, np.float16), (1, n)))
    with np.errstate(over="ignore"):
        s16 = (scales.astype(np.float32) * np.float32(2 ** FP8_BIAS_SHIFT)).astype(np.float16)   # exact or overflow
    if not np.isfinite(s16).all():
        raise NonFiniteError("scales: s * 2^8 overflows float16 (|s| > 255.875)")
    return pack_fp8_codes(q), marlin.permute_scales(s16)


def prepare_nvfp4(q: np.ndarray, scales: np.ndarray, global_scale: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """vLLM's NVFP4 Marlin preparation (fp16 activations): uint8 e2m1 codes ``(K, N)``, uint8 e4m3 block
    scales ``(K/16, N)`` (>= 0, no NaN) and the tensor scale ``t`` -> ``(B, s, g)``: ``B`` int32
    ``(K/16, 2N)``, ``s`` uint8 S0E5M3 ``(K/16, N)`` (:func:`permute_nvfp4_scales`), ``g`` float32
    ``(1,)`` = ``t * 2^7`` (``t * 2^(14 - 7)``). K % 32 (at least two scale rows, the grouped
    permutation) and N % 64."""
    q = require_ndim("q", _u8("q", q), 2)
    k, n = q.shape
    require_divisible("K", k, 32, "must be a positive multiple of 32 (two or more groups of 16)")
    scales = require_shape("scales", require_ndim("scales", _u8("scales", scales), 2), (k // 16, n))
    s32 = minifloat.decode(scales, "e4m3")
    if np.isnan(s32).any():
        raise NonFiniteError("scales: an e4m3 NaN scale (0x7F / 0xFF) has no S0E5M3 form")
    t = require_real("global_scale", global_scale)
    g = np.array([t], np.float32) * np.float32(2 ** (FP4_BIAS_SHIFT - S0E5M3_SHIFT))
    if not np.isfinite(g).all():
        raise NonFiniteError(f"global_scale: t * 2^7 overflows float32; got {t}")
    return pack_fp4_codes(q), permute_nvfp4_scales(s32.astype(np.float16)), g


def kernel_operand(kind: str, B: np.ndarray, s: np.ndarray) -> np.ndarray:
    """The tensor-core B operand the kernel builds, float16 ``(K, N)`` in logical order:
    fp8: ``e4m3 * 2^-8`` (no scale); nvfp4: ``fp16(e2m1 * 2^-14 * S)`` (one RN product, S the decoded
    scale of the row's group)."""
    kind = require_choice("kind", kind, KINDS)
    if kind == "fp8":
        return fp8_to_half(unpack_fp8_codes(B))
    from refsim.arith import fp
    codes = unpack_fp4_codes(B)
    S = np.repeat(unpermute_nvfp4_scales(s), 16, axis=0)                  # (K, N) float16
    require_shape("s", S, codes.shape)
    return fp.f16_mul(fp4_to_half(codes), S)


def dequantize(kind: str, B: np.ndarray, s: np.ndarray, global_scale: np.ndarray | None = None) -> np.ndarray:
    """The weights the prepared ``(B, s[, g])`` mean, float64 ``(K, N)``, exact: fp8
    ``e4m3 * s16 * 2^-8``; nvfp4 ``e2m1 * S * 2^-7 * g * 2^-7`` (S the decoded S0E5M3 scale). Equal to the
    fp8 / NVFP4 definitions (:mod:`refsim.formats.fp8`, :mod:`refsim.formats.mx`) of the source codes
    and scales, e4m3 NaN codes aside."""
    kind = require_choice("kind", kind, KINDS)
    if kind == "fp8":
        v = fp8_to_half(unpack_fp8_codes(B)).astype(np.float64)
        return v * marlin.unpermute_scales(require_dtype("s", s, np.float16)).astype(np.float64)
    codes = unpack_fp4_codes(B)
    if global_scale is None:
        raise FormatRuleError("global_scale: nvfp4 needs the prepared fp32 tensor scale g (1,); got None")
    g = require_shape("global_scale", require_dtype("global_scale", global_scale, np.float32), (1,))
    S = np.repeat(unpermute_nvfp4_scales(s), 16, axis=0).astype(np.float64)
    w = fp4_to_half(codes).astype(np.float64) * 2.0 ** FP4_BIAS_SHIFT
    return w * S * 2.0 ** -S0E5M3_SHIFT * float(g[0]) * 2.0 ** -(FP4_BIAS_SHIFT - S0E5M3_SHIFT)
