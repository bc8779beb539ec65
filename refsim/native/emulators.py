"""Compiled twins of the emulator's hot loops: small C kernels built at first use, NumPy paths kept.

Spec
----
what            the T-FDPA chain of one ``mma.m16n8k16 .f32`` k16 step for many (k-warp, row,
                column) triples at once (:func:`mma_k16_f32_blocks`), the Marlin emulator's inner
                loop. The C code is the integer model of :mod:`refsim.arith.tensor_core` written
                out per element: operands split into (sign, integer significand, exponent),
                products and shifts in int64, one exact integer sum, one conversion of
                ``S * 2^(E - F)`` to fp32 toward zero built on the integer (leading-bit position,
                truncation, exponent field). No floating-point instruction is executed, so no
                compiler option, contraction or rounding mode can change a bit.
                Second: the fp16 ``hfma2`` chains of the GEMV emulators —
                :func:`anyprec_gemv` (Any-Precision ``matmul_kbit_32`` whole: lookup, two chains per
                lane, fp16 partial adds, ``shfl_down`` tree, K-split adds) and
                :func:`mixed_dense_group_sums` (2/4/16 steps 2-3: dequantization and the two chains
                per group). Every fp16 value is carried as the double equal to it; the double
                product of two fp16 values is exact and the double sum is the one NumPy's path forms
                (``fp._f16_fma_fused``), so ``-ffp-contract=off`` and IEEE double RNE (the host's
                default mode, which NumPy assumes as well) fix every bit; the fp16 rounding ``r16``
                is done on the bit pattern (branch-free, so the lane / column loops vectorise) and is
                tested against NumPy's float64 -> float16 cast on every double class.
                Third: Atom's epilogue over all groups (:func:`atom_epilogue`): the fp16 scale product
                by r16 of the exact double product, ``fma.rn.f32`` as ``fp.f32_fma`` does it (exact
                double product, TwoSum, round-to-odd nudge, one cast), or FMUL + FADD in float.
                Fourth: integer ``mma`` (:func:`mma_int`, ``refsim_mma_int``): int32 dot products of
                s8/u8/s4/u4 values in int64, then wrap or ``.satfinite`` clamp, in the order of
                :func:`refsim.arith.integer_mma.mma_int`; the PTX runtime's integer mma calls it.
oracle          :func:`refsim.arith.mma_steps.mma_k16_f32` (NumPy, the readable reference),
                itself tested against the integer model :func:`refsim.arith.tensor_core.fdpa`;
                ``tests/native/test_emulators.py`` checks the compiled path bit for bit against it.
                GEMV kernels: the NumPy emulations (``native=False``) of
                :mod:`refsim.emulator.anyprec_kernel` and :mod:`refsim.emulator.mixed_2_4_16_kernel`
                (themselves tested against their plain-loop, exact-rational twins), raw bits, with
                hypothesis over shapes and fp16 bit patterns incl. Inf and NaN
                (``tests/native/test_emulators.py``). Integer mma: :func:`refsim.arith.integer_mma.mma_int`
                and its plain loop, on the int32 edges and hypothesis-drawn bits.
build           :func:`refsim.native.load` (QIGen's build cache, ``-O2 -ffp-contract=off``, never
                ``-ffast-math``; plain C99, no intrinsics, the loops written so that the compiler
                vectorises them). Built once per machine (about 1 s), then loaded from the cache.
fallback        no C compiler, or a failed build, or ``REFSIM_NATIVE=0`` in the environment: the
                emulators run their NumPy paths (same bits, about 6x slower) and one
                :class:`RuntimeWarning` says why (not for ``REFSIM_NATIVE=0``, which is a choice).

One k16 step of the loop nest (W k-warps, R rows, N columns; k-warp w reads k16 block at
``kcol[w]``)::

    for w < W:  decode A[r, kcol[w] : kcol[w] + 16] for r < R      (sign, m, e) per element
      for chunks of 512 columns:  decode B[kcol[w] : kcol[w] + 16, chunk]   (16, 512) k-major
        for r < R, for each block of L, for n in the chunk (vectorised):
            acc[w, r, n] = T-FDPA(a[r, block], b[block, n], acc[w, r, n])
"""

from __future__ import annotations

import ctypes
import functools
from pathlib import Path

import numpy as np

from refsim import native
from refsim._validate import require_bool
from refsim.errors import ToolchainError

__all__ = ["available", "status", "mma_k16_f32_blocks", "wgmma_fp8_f32", "anyprec_gemv", "mixed_group_sums",
           "mixed_dense_group_sums", "atom_epilogue", "mma_int", "round_to_f16_values", "SOURCE"]

#: the C source (emulators.c beside this module); its text is part of the build-cache key
SOURCE = (Path(__file__).with_name("emulators.c")).read_text(encoding="utf-8")


_INT, _I64, _PTR = ctypes.c_int, ctypes.c_int64, ctypes.c_void_p
#: the C signatures of emulators.c: (name, return type, argument types)
SIGNATURES = (("refsim_mma_k16_f32", None, (_INT,) * 6 + (_PTR, _I64, _PTR, _I64, _PTR, _PTR)),
              ("refsim_anyprec_gemv", _INT, (_INT,) * 5 + (_PTR,) * 6),
              ("refsim_mixed_group_sums", None, (_INT,) * 2 + (_PTR,) * 3),
              ("refsim_mixed_dense_group_sums", None, (_INT,) * 2 + (_PTR,) * 5),
              ("refsim_atom_epilogue", None, (_INT,) * 4 + (_PTR,) * 4),
              ("refsim_r16", None, (_I64, _PTR, _PTR)),
              ("refsim_wgmma_fp8_f32", None, (_INT,) * 6 + (_PTR,) * 4),
              ("refsim_mma_int", None, (_INT,) * 5 + (_PTR,) * 4))


@functools.lru_cache(maxsize=1)
def _library():
    """(ctypes library or None, reason it is missing or None). Built and checked once per process."""
    return native.load(SOURCE, "emulator kernels", SIGNATURES)


def _require_library():
    """The loaded library, or ToolchainError saying why it is missing (a caller forced native=True)."""
    lib, reason = _library()
    if lib is None:
        raise ToolchainError(f"native: the compiled emulator kernels are unavailable ({reason}); "
                             "use native=None or False for the NumPy path")
    return lib


def available() -> bool:
    """True if the compiled kernels are built and loaded (builds them on first call)."""
    return _library()[0] is not None


def status() -> str:
    """One line for benchmarks and reports: which path the emulators take, and why."""
    lib, reason = _library()
    return "compiled C kernels" if lib is not None else f"NumPy paths ({reason})"


def mma_k16_f32_blocks(L: int, F: int, e_zero: int, a_bits: np.ndarray, b_bits: np.ndarray,
                       kcol: np.ndarray, acc: np.ndarray) -> None:
    """Compiled chained T-FDPA, in place: ``acc[w, r, n]`` advances by the k16 block of k-warp w.

    a_bits: uint16 (R, K) fp16 bit patterns, unit stride along K (finite values); b_bits: uint16
    (K, N), unit stride along N; kcol: int64 (W,) first k index of each k-warp's
    block; acc: float32 (W, R, N), C-contiguous, updated in place. Callers check availability
    with :func:`available` first. Internal: the arguments are trusted (shapes, dtypes, strides).
    """
    lib, _ = _library()
    W, R, N = acc.shape
    assert a_bits.dtype == np.uint16 and b_bits.dtype == np.uint16 and acc.dtype == np.float32
    assert a_bits.strides[1] == 2 and b_bits.strides[1] == 2 and acc.flags.c_contiguous
    kcol = np.ascontiguousarray(kcol, dtype=np.int64)
    lib.refsim_mma_k16_f32(L, F, e_zero, W, R, N,
                           a_bits.ctypes.data, a_bits.strides[0] // 2, b_bits.ctypes.data, b_bits.strides[0] // 2,
                           kcol.ctypes.data, acc.ctypes.data)


def wgmma_fp8_f32(a_e5m2: bool, b_e5m2: bool, F: int, e_zero: int, a_bits: np.ndarray, bt_bits: np.ndarray,
                  c_bits: np.ndarray) -> np.ndarray:
    """Compiled wgmma FP8 -> f32 (refsim.arith.wgmma's fp8 T-FDPA, e8m13 output): D bits uint32 (T, 64, N).

    a_bits: uint8 (T, 64, 32) codes of A; bt_bits: uint8 (T, N, 32) codes of B transposed (row j is
    column j of B); c_bits: uint32 (T, 64, N) fp32 bits of C; N <= 256; ``a_e5m2``/``b_e5m2``: the
    format of each (else e4m3). Internal: the arguments are trusted (C-contiguous, shapes checked
    by refsim.arith.wgmma)."""
    lib, _ = _library()
    T, N = c_bits.shape[0], c_bits.shape[2]
    assert a_bits.dtype == np.uint8 and bt_bits.dtype == np.uint8 and c_bits.dtype == np.uint32
    assert a_bits.shape == (T, 64, 32) and bt_bits.shape == (T, N, 32) and N <= 256
    a, bt, c = (np.ascontiguousarray(x) for x in (a_bits, bt_bits, c_bits))
    d = np.empty((T, 64, N), np.uint32)
    lib.refsim_wgmma_fp8_f32(T, N, int(a_e5m2), int(b_e5m2), F, e_zero, a.ctypes.data, bt.ctypes.data,
                             c.ctypes.data, d.ctypes.data)
    return d


def anyprec_gemv(codes: np.ndarray, lut: np.ndarray, x: np.ndarray, k0: np.ndarray, k1: np.ndarray,
                 ksplit: int) -> np.ndarray:
    """Compiled Any-Precision ``matmul_kbit_32``: float16 (M, N), the bits of the NumPy emulation
    :func:`refsim.emulator.anyprec_kernel.anyprec_gemv` (native=False).

    codes: uint8 (N, K) (unpacked bitplanes), lut: float16 (N, 2**bits), weight W[r, k] =
    lut[r, codes[r, k]]; x: float16 (M, K); k0, k1: (chunks, 32, 16) lane pair indices of
    :func:`refsim.emulator.anyprec_kernel.lane_indices`; ksplit: K slices of 4 chunks (ascending fp16
    adds from +0 when > 1). Internal: the caller has checked the inputs (codes < 2**bits)."""
    lib = _require_library()
    codes = np.ascontiguousarray(codes, dtype=np.uint8)
    lut = np.ascontiguousarray(lut).view(np.uint16)
    x = np.ascontiguousarray(x).view(np.uint16)
    m, k = x.shape
    n = codes.shape[0]
    k0 = np.ascontiguousarray(k0, dtype=np.int32)
    k1 = np.ascontiguousarray(k1, dtype=np.int32)
    out = np.empty((m, n), np.float64)
    if lib.refsim_anyprec_gemv(m, n, k, int(ksplit), lut.shape[1], codes.ctypes.data, lut.ctypes.data, x.ctypes.data,
                               k0.ctypes.data, k1.ctypes.data, out.ctypes.data):
        raise MemoryError(f"anyprec_gemv: the compiled kernel could not allocate its lane-order operands "
                          f"({2 * (m + 1) * -(-k // 1024) * 512 * 8} bytes)")
    with np.errstate(all="ignore"):
        return out.astype(np.float16)                     # exact: every value is an fp16 value


def mixed_group_sums(w: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Compiled step 3 of the 2/4/16 GEMV: float32 (G, N) = ``float(__hadd(h.x, h.y))`` of each group's
    two 8-step ``hfma2`` chains. w: float16 (G*16, N) dequantized weights; x: float16 (G*16,).
    Internal: the caller has checked the inputs."""
    lib = _require_library()
    w = np.ascontiguousarray(w).view(np.uint16)
    x = np.ascontiguousarray(x).view(np.uint16)
    k, n = w.shape
    out = np.empty((k // 16, n), np.float32)
    lib.refsim_mixed_group_sums(k // 16, n, w.ctypes.data, x.ctypes.data, out.ctypes.data)
    return out


def mixed_dense_group_sums(q: np.ndarray, zero: np.ndarray, s_hat: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Compiled steps 2-3 of the 2/4/16 GEMV: float32 (G, N), the bits of
    ``group_sums(dequantized_weights(p), x)`` without storing the weights. q uint8 (G*16, N) codes,
    zero uint8 (G, N), s_hat float16 (G, N) (step 1), x float16 (G*16,). Internal: inputs trusted."""
    lib = _require_library()
    q = np.ascontiguousarray(q, dtype=np.uint8)
    zero = np.ascontiguousarray(zero, dtype=np.uint8)
    s_hat = np.ascontiguousarray(s_hat).view(np.uint16)
    x = np.ascontiguousarray(x).view(np.uint16)
    g, n = zero.shape
    out = np.empty((g, n), np.float32)
    lib.refsim_mixed_dense_group_sums(g, n, q.ctypes.data, zero.ctypes.data, s_hat.ctypes.data, x.ctypes.data,
                                      out.ctypes.data)
    return out


def atom_epilogue(c: np.ndarray, sa: np.ndarray, sb: np.ndarray, fused: bool) -> np.ndarray:
    """Compiled Atom epilogue over all groups: float32 (M, N) accumulator from 0, the bits of the loop
    over :func:`refsim.emulator.atom_kernel._epilogue`. c int32 (G, M, N) integer group sums (the INT8
    tail as the last group); sa float16 (M, G) row scales; sb float16 (G, N) column scales (the kernel's
    half2 pair selection is applied here). Internal: inputs trusted."""
    lib = _require_library()
    c = np.ascontiguousarray(c, dtype=np.int32)
    sa = np.ascontiguousarray(sa).view(np.uint16)
    sb = np.ascontiguousarray(sb).view(np.uint16)
    g, m, n = c.shape
    acc = np.zeros((m, n), np.float32)
    lib.refsim_atom_epilogue(g, m, n, int(require_bool("fused", fused)), c.ctypes.data, sa.ctypes.data, sb.ctypes.data,
                             acc.ctypes.data)
    return acc


def mma_int(A: np.ndarray, B: np.ndarray, C: np.ndarray, satfinite: bool) -> np.ndarray:
    """Compiled integer ``mma``, the twin of :func:`refsim.arith.integer_mma.mma_int`: int32 (..., M, N)
    = C + A @ B exactly, wrapped modulo 2^32 or clamped to [-2^31, 2^31 - 1] with ``satfinite``.

    A integer (..., M, K) and B integer (..., K, N) holding s8/u8/s4/u4 values, C int32 (..., M, N),
    the same leading shape. Internal: the arguments are trusted (values in range, shapes checked by
    the caller, as :func:`refsim.arith.integer_mma.mma_int` checks them)."""
    lib = _require_library()
    M, K = A.shape[-2:]
    N = B.shape[-1]
    lead = C.shape[:-2]
    a = np.ascontiguousarray(A, dtype=np.int16)
    b = np.ascontiguousarray(B, dtype=np.int16)
    c = np.ascontiguousarray(C, dtype=np.int32)
    assert a.shape == lead + (M, K) and b.shape == lead + (K, N) and c.shape == lead + (M, N)
    d = np.empty(lead + (M, N), np.uint32)
    lib.refsim_mma_int(int(np.prod(lead, dtype=np.int64)), M, N, K, int(require_bool("satfinite", satfinite)),
                       a.ctypes.data, b.ctypes.data, c.ctypes.data, d.ctypes.data)
    return d.view(np.int32)


def round_to_f16_values(x: np.ndarray) -> np.ndarray:
    """The C kernels' fp16 rounding on float64 ``x`` (any shape): float64, each value rounded to the
    nearest fp16 value (RNE, overflow to Inf). Exposed so that tests can hold it against NumPy's
    float64 -> float16 cast."""
    lib = _require_library()
    x = np.ascontiguousarray(x, dtype=np.float64)
    y = np.empty_like(x)
    lib.refsim_r16(x.size, x.ctypes.data, y.ctypes.data)
    return y
