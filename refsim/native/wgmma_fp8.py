"""Compiled twin of the FP8 wgmma K-block chain (DeepGEMM's emulator inner loop); NumPy path kept.

Spec
----
what            :func:`kblock_partials`: for every 128-wide K block, row and column, the four chained
                ``wgmma.m64nNk32.f32.e4m3.e4m3`` steps of that block from scale-d = 0, as
                :func:`refsim.arith.wgmma.wgmma` models them (F = 13 fraction bits below the largest
                exponent, every term truncated toward zero, the sum rounded toward zero to an e8m13 value).
                The C code (``wgmma_fp8.c`` beside this module) is that integer model written out per
                element: no floating-point instruction, so no compiler option can change a bit.
domain          finite e4m3 codes (the caller rejects 0x7F / 0xFF); K a multiple of 128.
oracle          :func:`refsim.arith.wgmma.wgmma` chained per K block
                (:func:`refsim.emulator.deepgemm_kernel.kblock_partials` with ``native=False``);
                ``tests/native/test_wgmma_fp8.py`` checks the two bit for bit.
build           :func:`refsim.native.load` (the build cache, ``-O2 -ffp-contract=off``); without a compiler
                or with ``REFSIM_NATIVE=0`` the caller runs the NumPy path (same bits, much slower).
"""

from __future__ import annotations

import ctypes
import functools
from pathlib import Path

import numpy as np

from refsim import native
from refsim.errors import ToolchainError

__all__ = ["available", "kblock_partials", "SOURCE"]

#: the C source (wgmma_fp8.c beside this module); its text is part of the build-cache key
SOURCE = (Path(__file__).with_name("wgmma_fp8.c")).read_text(encoding="utf-8")

_INT, _PTR = ctypes.c_int, ctypes.c_void_p
SIGNATURES = (("refsim_fp8_kblock_partials", _INT, (_INT,) * 3 + (_PTR,) * 3),)


@functools.lru_cache(maxsize=1)
def _library():
    """(ctypes library or None, reason it is missing or None). Built and checked once per process."""
    return native.load(SOURCE, "fp8 wgmma kernels", SIGNATURES)


def available() -> bool:
    """True if the compiled kernel is built and loaded (builds it on first call)."""
    return _library()[0] is not None


def kblock_partials(a_bits: np.ndarray, b_bits: np.ndarray) -> np.ndarray:
    """Compiled K-block partials: float32 (K/128, M, N).

    a_bits: uint8 (M, K) e4m3 codes, b_bits: uint8 (N, K) e4m3 codes (both K-major; finite codes, K a
    multiple of 128: the caller has checked). ``out[kb, m, n]`` is the e8m13 result of the four chained
    k32 wgmma steps over ``A[m, 128kb : 128kb + 128]`` and ``B[n, 128kb : 128kb + 128]``.
    Raises ToolchainError when the kernel is unavailable (callers check :func:`available` first).
    """
    lib, reason = _library()
    if lib is None:
        raise ToolchainError(f"native: the compiled fp8 wgmma kernel is unavailable ({reason})")
    a = np.ascontiguousarray(a_bits, dtype=np.uint8)
    b = np.ascontiguousarray(b_bits, dtype=np.uint8)
    (m, k), n = a.shape, b.shape[0]
    out = np.zeros((k // 128, m, n), np.uint32)
    if lib.refsim_fp8_kblock_partials(m, n, k, a.ctypes.data, b.ctypes.data, out.ctypes.data):
        raise MemoryError(f"kblock_partials: the compiled kernel could not allocate its decoded operands "
                          f"({8 * m * k + 8 * 128 * 256} bytes)")
    return out.view(np.float32)
