"""Emulation of DeepGEMM's sm_90 FP8 GEMM with block scaling: what it writes, bit for bit.

Spec
----
computes        D (M, N) bf16 = sum over K blocks kb of (A[:, kb] @ B[:, kb]^T) * sfa[:, kb] * sfb[n // 128, kb],
                with A (M, K) and B (N, K) e4m3 (both K-major: ``fp8_gemm_nt``), sfa float32 (M, K/128) one
                scale per row and 128-wide K block (1 x 128), sfb float32 (ceil(N/128), K/128) one scale per
                128 x 128 block of B. K a multiple of 128; N a multiple of 8 (the kernel's own device assert).
dataflow        in the kernel's order (``sm90_fp8_gemm_1d2d_impl``, math warp-groups), per output element:
                1. per K block kb (BLOCK_K = 128): ``partial`` = four chained
                   ``wgmma.m64nNk32.f32.e4m3.e4m3`` over the block's k32 steps, the first with scale-d = 0
                   (``WGMMA::wgmma(a_desc, b_desc, accum, k)`` passes ``k != 0`` as scale-d): the T-FDPA of
                   :mod:`refsim.arith.wgmma` (13 fraction bits below the largest exponent, e8m13 result);
                2. ``scale = sfa[m, kb] * sfb[n // 128, kb]``: one ``mul.f32`` (RN) (``scale_a_0 * scale_b_0``);
                   the kernel's choice between ``scale_b_0`` and ``scale_b_1`` for BLOCK_N that straddle a
                   128-column boundary is exactly ``sfb[n // 128]`` per column;
                3. ``final = fma.rn.f32(scale, partial, final)`` from final = +0, K blocks in increasing order
                   (``shifted_accum[i] += scale * accum[i]``, which nvcc contracts to one ``fma.rn.f32``:
                   the committed PTX has ``mul.f32`` for the scales and ``fma.rn.f32`` for the promotion);
                4. ``D = cvt.rn.bf16x2.f32(final)`` (``__float22bfloat162_rn``), then ``stmatrix`` and a TMA
                   store: data movement only.
                Block sizes, the persistent tile order, the pipeline depth and the M tail (TMA zero fill,
                clipped stores) change no bit: each element sees its own K blocks in increasing order.
vectorised      :func:`kblock_partials` over every row and column at once: :func:`refsim.arith.wgmma.wgmma`
                with the 64-row tiles as leading axes (its compiled twin when a C compiler is present);
                :func:`promote` over the whole (M, N) plane per K block (``fp.f32_fma``).
oracle          :func:`deepgemm_fp8_gemm_reference`: plain loops per element over the exact-rational T-FDPA
                block of :func:`refsim.arith.wgmma.wgmma_reference`, ``fp.mul_reference``,
                ``fp.fma_reference_scalar`` and ``fp.convert_reference``; tested equal on small shapes.
source          deepseek-ai/DeepGEMM @ 54e22612409371d6364144b69086735beb54e98b,
                ``deep_gemm/include/deep_gemm/impls/sm90_fp8_gemm_1d2d.cuh`` (the math warp-group loop and the
                epilogue); PTX in ``refsim/cuda/official/deepgemm_fp8_gemm.ptx.gz``.

Promotion for one element (K = 256: two K blocks)::

    k 0..127:   wgmma k32 (scale-d 0) -> k32 -> k32 -> k32 = p0 (e8m13)    final = fma(sa0*sb0, p0, +0)
    k 128..255: wgmma k32 (scale-d 0) -> k32 -> k32 -> k32 = p1 (e8m13)    final = fma(sa1*sb1, p1, final)
    D = bf16_rn(final)
"""

from __future__ import annotations

import numpy as np

from refsim._validate import (require_array, require_divisible, require_dtype, require_finite,
                              require_ndim, require_optional_bool)
from refsim.arith import fp, wgmma
# the exact-rational T-FDPA block and operand reader that wgmma_reference runs: one definition
from refsim.arith.tensor_core_types import _fdpa_fraction, _value
from refsim.errors import DtypeError, FormatRuleError, ShapeError

__all__ = ["BLOCK_K", "check_inputs", "kblock_partials", "promote", "deepgemm_fp8_gemm",
           "deepgemm_fp8_gemm_reference"]

#: the scaling block along K and the promotion interval (DeepGEMM's BLOCK_K; ``Only support per-128-channel
#: FP8 scaling``)
BLOCK_K = 128
#: K of one ``wgmma ... e4m3`` step
WGMMA_K = 32
_KIND = "f32.e4m3.e4m3"


def _e4m3_bits(name: str, x) -> np.ndarray:
    """uint8 e4m3 codes of ``x`` (uint8 codes or ml_dtypes.float8_e4m3fn), finite (no 0x7F / 0xFF)."""
    x = require_array(name, x)
    if x.dtype.name == "float8_e4m3fn":
        x = x.view(np.uint8)
    elif x.dtype != np.dtype(np.uint8):
        raise DtypeError(f"{name}: dtype must be uint8 (raw e4m3 codes) or ml_dtypes.float8_e4m3fn; got {x.dtype}")
    if ((x & 0x7F) == 0x7F).any():
        raise FormatRuleError(f"{name}: e4m3 NaN codes (0x7F, 0xFF) are not data DeepGEMM quantizes to; "
                              f"found {int(((x & 0x7F) == 0x7F).sum())}")
    return x


def check_inputs(A, sfa, B, sfb):
    """The rules of one DeepGEMM FP8 GEMM, shared by the emulator and the official-kernel launcher
    (:mod:`refsim.cuda.official_deepgemm`). A (M, K), B (N, K): uint8 e4m3 codes or
    ``ml_dtypes.float8_e4m3fn``, finite; sfa float32 (M, K/128); sfb float32 (ceil(N/128), K/128); scales
    finite. K a multiple of 128, N of 8, M >= 1. Returns ``(A bits, sfa, B bits, sfb, M, N, K)``."""
    A = require_ndim("A", _e4m3_bits("A", A), 2)
    B = require_ndim("B", _e4m3_bits("B", B), 2)
    sfa = require_ndim("sfa", require_dtype("sfa", sfa, np.float32), 2)
    sfb = require_ndim("sfb", require_dtype("sfb", sfb, np.float32), 2)
    require_finite("sfa", sfa)
    require_finite("sfb", sfb)
    (m, k), n = A.shape, B.shape[0]
    if B.shape[1] != k:
        raise ShapeError(f"A, B: must share K (A (M, K), B (N, K)); got {A.shape} and {B.shape}")
    if m < 1 or n < 1 or k < 1:
        raise ShapeError(f"A, B: M, N and K must be at least 1; got M={m}, N={n}, K={k}")
    require_divisible("K", k, BLOCK_K, "DeepGEMM scales K in blocks of 128")
    require_divisible("N", n, 8, "the kernel asserts shape_n % 8 == 0")
    if sfa.shape != (m, k // BLOCK_K):
        raise ShapeError(f"sfa: must be (M, K/128) = {(m, k // BLOCK_K)}; got {sfa.shape}")
    if sfb.shape != (-(-n // BLOCK_K), k // BLOCK_K):
        raise ShapeError(f"sfb: must be (ceil(N/128), K/128) = {(-(-n // BLOCK_K), k // BLOCK_K)}; got {sfb.shape}")
    return A, sfa, B, sfb, m, n, k


def _partials(A: np.ndarray, B: np.ndarray, native: bool | None) -> np.ndarray:
    """kblock_partials through refsim.arith.wgmma.wgmma: 64-row tiles and K blocks as leading axes."""
    m, k = A.shape
    n = B.shape[0]
    kbs, tiles = k // BLOCK_K, -(-m // wgmma.M)
    Ap = np.zeros((tiles * wgmma.M, k), np.uint8)                   # rows past M: the TMA zero fill
    Ap[:m] = A
    At = Ap.reshape(tiles, wgmma.M, kbs, BLOCK_K).transpose(0, 2, 1, 3)   # (tiles, K/128, 64, 128)
    Bt = B.reshape(n, kbs, BLOCK_K).transpose(1, 2, 0)                    # (K/128, 128, N)
    D = np.zeros((tiles, kbs, wgmma.M, n), np.float32)
    for c0 in range(0, n, 256):                                           # wgmma N <= 256
        cols = slice(c0, min(n, c0 + 256))
        for s in range(BLOCK_K // WGMMA_K):
            ks = slice(s * WGMMA_K, (s + 1) * WGMMA_K)
            D[..., cols] = wgmma.wgmma(_KIND, At[..., ks], Bt[:, ks, cols], D[..., cols], scale_d=s > 0,
                                       native=native)
    return D.transpose(1, 0, 2, 3).reshape(kbs, tiles * wgmma.M, n)[:, :m]   # (K/128, M, N)


def kblock_partials(A, B, *, native: bool | None = None) -> np.ndarray:
    """Step 1 of the dataflow: float32 (K/128, M, N), ``out[kb, m, n]`` the e8m13 result of the four chained
    k32 wgmma steps over K block kb (from scale-d = 0). A (M, K), B (N, K) as :func:`check_inputs` takes
    them (K a multiple of 128, N of 8). native: as :func:`refsim.arith.wgmma.wgmma` (None: its compiled
    twin when available; True requires it; False its NumPy definition; same bits)."""
    A, B = require_ndim("A", _e4m3_bits("A", A), 2), require_ndim("B", _e4m3_bits("B", B), 2)
    if B.shape[1] != A.shape[1]:
        raise ShapeError(f"A, B: must share K (A (M, K), B (N, K)); got {A.shape} and {B.shape}")
    require_divisible("K", A.shape[1], BLOCK_K, "DeepGEMM scales K in blocks of 128")
    require_divisible("N", B.shape[0], 8, "the kernel asserts shape_n % 8 == 0")
    native = require_optional_bool("native", native)
    return _partials(A, B, native)


def promote(partials: np.ndarray, sfa: np.ndarray, sfb: np.ndarray) -> np.ndarray:
    """Steps 2-3: float32 (M, N) ``final``: for kb = 0, 1, ...: ``final = fma.rn.f32(sfa[m, kb] * sfb[n // 128, kb],
    partials[kb, m, n], final)`` from +0, the scale product one RN ``mul.f32``. partials float32 (K/128, M, N);
    sfa float32 (M, K/128); sfb float32 (ceil(N/128), K/128)."""
    partials = require_ndim("partials", require_dtype("partials", partials, np.float32), 3)
    sfa = require_ndim("sfa", require_dtype("sfa", sfa, np.float32), 2)
    sfb = require_ndim("sfb", require_dtype("sfb", sfb, np.float32), 2)
    kbs, m, n = partials.shape
    if sfa.shape != (m, kbs) or sfb.shape != (-(-n // BLOCK_K), kbs):
        raise ShapeError(f"sfa, sfb: must be {(m, kbs)} and {(-(-n // BLOCK_K), kbs)} for partials {partials.shape}; "
                         f"got {sfa.shape} and {sfb.shape}")
    sb_cols = np.repeat(sfb, BLOCK_K, axis=0)[:n]                       # (N, K/128): sfb[n // 128]
    final = np.zeros((m, n), np.float32)
    for kb in range(kbs):
        scale = fp.f32_mul(sfa[:, kb, None], sb_cols[None, :, kb])      # (M, N)
        final = fp.f32_fma(scale, partials[kb], final, fused=True)
    return final


def deepgemm_fp8_gemm(A, sfa, B, sfb, *, native: bool | None = None) -> np.ndarray:
    """DeepGEMM's ``fp8_gemm_nt`` on sm_90 (``sm90_fp8_gemm_1d2d_impl``) as it computes: ml_dtypes.bfloat16 (M, N).

    A (M, K) e4m3 activations, sfa float32 (M, K/128) their 1 x 128 scales (logical layout; the kernel reads
    them transposed and TMA-aligned, see :mod:`refsim.cuda.official_deepgemm`); B (N, K) e4m3 weights, sfb
    float32 (ceil(N/128), K/128) their 128 x 128 scales. Rules: :func:`check_inputs`. native: as for
    :func:`kblock_partials`. Inputs are not modified.
    """
    A, sfa, B, sfb, m, n, k = check_inputs(A, sfa, B, sfb)
    return fp.cvt_f32_to_bf16(promote(kblock_partials(A, B, native=native), sfa, sfb))


def deepgemm_fp8_gemm_reference(A, sfa, B, sfb) -> np.ndarray:
    """Plain-loop twin of :func:`deepgemm_fp8_gemm` from the module spec, one output element at a time: per K
    block four k32 T-FDPA blocks in exact rationals (the block :func:`refsim.arith.wgmma.wgmma_reference`
    runs, model parameters from :func:`refsim.arith.wgmma.model`), the first from C = +0; then the scale
    product, the fused promotion and the bf16 conversion by the exact-rational references of
    :mod:`refsim.arith.fp`. Small shapes only."""
    A, sfa, B, sfb, m, n, k = check_inputs(A, sfa, B, sfb)
    mdl = wgmma.model(_KIND)
    final = np.zeros((m, n), np.float32)
    for i in range(m):
        a = [_value("e4m3", int(x)) for x in A[i]]
        for j in range(n):
            b = [_value("e4m3", int(x)) for x in B[j]]
            for kb in range(k // BLOCK_K):
                acc = 0.0                                               # scale-d = 0: C = +0
                for k0 in range(kb * BLOCK_K, (kb + 1) * BLOCK_K, WGMMA_K):
                    acc = _fdpa_fraction(a[k0:k0 + WGMMA_K], b[k0:k0 + WGMMA_K], acc, mdl.frac_bits,
                                         mdl.e_zero_f32, mdl.out_f32)
                scale = fp.mul_reference(sfa[i, kb:kb + 1], sfb[j // BLOCK_K, kb:kb + 1])[0]
                final[i, j] = fp.fma_reference_scalar(scale, np.float32(acc), final[i, j])
    return fp.convert_reference(final, "bfloat16")
