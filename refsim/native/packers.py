"""Compiled twins of the GPTQ, AWQ, Marlin and Any-Precision bitplane packers: one pass over memory.

Spec
----
what            ``gptq_pack`` / ``gptq_unpack``: the LSB-first bit stream along K of
                :func:`refsim.formats.gptq.pack_stream` / ``unpack_stream`` for in-range codes
                (2, 3, 4, 8 bits; code row r starts at stream bit ``r * bits`` of its column, a 3-bit
                field at bit 30 or 31 of a word spills its high bits into the next word).
                ``awq_pack`` / ``awq_unpack``: :func:`refsim.formats.awq.pack_columns` /
                ``unpack_columns`` (8 nibbles along N per word, nibble i = column ``8j + ORDER[i]``).
                ``marlin_pack`` / ``marlin_unpack``: the code part of :func:`refsim.formats.marlin.pack`
                / ``unpack`` (closed form in that module's spec block; 16 x 64 tiles).
                ``bitplane_pack`` / ``bitplane_unpack``: :func:`refsim.formats.bitplane.pack` /
                ``unpack`` (plane j = code bit p-1-j; word bit 31-8q-e = weight 1024i + 8 eff q + 8t + e).
how             GPTQ/AWQ: per code row, a loop over the N columns that the compiler vectorises.
                Marlin: per tile, 16-byte rows, byte pairs interleaved, a 4 x 4 word transpose (SSE
                under AVX2; plain C otherwise). Bitplanes: 32 codes -> one word per plane by
                ``movemask`` (AVX2) or a multiply that gathers 8 bits (plain C). Integer operations
                only; every array is read and written once.
checks          ``gptq_pack`` and ``awq_pack`` OR every code in the same pass and return None when a
                code is out of range (the caller raises the usual :class:`FormatRuleError`); the other
                kernels trust their arguments (callers validate first).
oracle          the NumPy functions named above (kept, and used without a compiler);
                ``tests/native/test_packers.py`` checks both paths bit for bit (pinned cases and
                hypothesis-drawn shapes), and the plain-C variants of a scalar build as well.
build/fallback  :func:`refsim.native.load` (no compiler or ``REFSIM_NATIVE=0``: NumPy paths).

The 3-bit stream of one column, first period (32 codes -> 3 words)::

    word 0: c0 c1 ... c9 | c10 bits 0-1       word 1: c10 bit 2 | c11 ... c20 | c21 bit 0
    word 2: c21 bits 1-2 | c22 ... c31
"""

from __future__ import annotations

import ctypes
import functools
from pathlib import Path

import numpy as np

from refsim import native

__all__ = ["available", "gptq_pack", "gptq_unpack", "awq_pack", "awq_unpack", "marlin_pack",
           "marlin_unpack", "bitplane_pack", "bitplane_unpack", "SOURCE"]

#: the C source (packers.c beside this module); its text is part of the build-cache key
SOURCE = (Path(__file__).with_name("packers.c")).read_text(encoding="utf-8")


_I64, _PTR = ctypes.c_int64, ctypes.c_void_p
#: the C signatures of packers.c: (name, return type, argument types)
SIGNATURES = (("refsim_gptq_pack", ctypes.c_int, (_PTR, _I64, _I64, ctypes.c_int, _PTR)),
              ("refsim_gptq_unpack", None, (_PTR, _I64, _I64, ctypes.c_int, _PTR)),
              ("refsim_awq_pack", ctypes.c_int, (_PTR, _I64, _I64, _PTR)),
              ("refsim_awq_unpack", None, (_PTR, _I64, _I64, _PTR)),
              ("refsim_marlin_pack", None, (_PTR, _I64, _I64, _PTR)),
              ("refsim_marlin_unpack", None, (_PTR, _I64, _I64, _PTR)),
              ("refsim_bitplane_pack", None, (_PTR, _I64, _I64, ctypes.c_int, _PTR)),
              ("refsim_bitplane_unpack", None, (_PTR, _I64, _I64, ctypes.c_int, _PTR)))


@functools.lru_cache(maxsize=1)
def _library():
    return native.load(SOURCE, "packers", SIGNATURES)


def available() -> bool:
    """True if the compiled packers are built and loaded (builds them on first call)."""
    return _library()[0] is not None


def gptq_pack(q: np.ndarray, bits: int) -> np.ndarray | None:
    """uint8 codes (K, N), C-contiguous -> uint32 (K * bits / 32, N), or None if some code is
    >= 2**bits (checked in the same pass; the caller raises). Trusted shapes."""
    k, n = q.shape
    assert q.dtype == np.uint8 and q.flags.c_contiguous and (k * bits) % 32 == 0
    out = np.empty((k * bits // 32, n), np.uint32)
    bad = _library()[0].refsim_gptq_pack(q.ctypes.data, k, n, bits, out.ctypes.data)
    return None if bad else out


def gptq_unpack(words: np.ndarray, bits: int) -> np.ndarray:
    """uint32 (W, N), C-contiguous -> uint8 codes (W * 32 / bits, N). Trusted arguments."""
    wr, n = words.shape
    assert words.dtype == np.uint32 and words.flags.c_contiguous and (wr * 32) % bits == 0
    q = np.empty((wr * 32 // bits, n), np.uint8)
    _library()[0].refsim_gptq_unpack(words.ctypes.data, q.shape[0], n, bits, q.ctypes.data)
    return q


def awq_pack(q: np.ndarray) -> np.ndarray | None:
    """uint8 codes (R, N), C-contiguous, N % 8 == 0 -> uint32 (R, N / 8), or None if some code is
    >= 16 (checked in the same pass; the caller raises). Trusted shapes."""
    r, n = q.shape
    assert q.dtype == np.uint8 and q.flags.c_contiguous and n % 8 == 0
    out = np.empty((r, n // 8), np.uint32)
    bad = _library()[0].refsim_awq_pack(q.ctypes.data, r, n, out.ctypes.data)
    return None if bad else out


def awq_unpack(words: np.ndarray, n: int) -> np.ndarray:
    """uint32 (R, N / 8), C-contiguous -> uint8 codes (R, N). Trusted arguments."""
    r = words.shape[0]
    assert words.dtype == np.uint32 and words.flags.c_contiguous and words.shape[1] * 8 == n
    q = np.empty((r, n), np.uint8)
    _library()[0].refsim_awq_unpack(words.ctypes.data, r, n, q.ctypes.data)
    return q


def marlin_pack(q: np.ndarray) -> np.ndarray:
    """uint8 4-bit codes (K, N), C-contiguous, in range, K % 16 == 0, N % 64 == 0 -> uint32
    (K / 16, 2 N) in Marlin's layout (:func:`refsim.formats.marlin.pack`). Trusted arguments."""
    k, n = q.shape
    assert q.dtype == np.uint8 and q.flags.c_contiguous and k % 16 == 0 and n % 64 == 0
    out = np.empty((k // 16, 2 * n), np.uint32)
    _library()[0].refsim_marlin_pack(q.ctypes.data, k, n, out.ctypes.data)
    return out


def marlin_unpack(b: np.ndarray, k: int, n: int) -> np.ndarray:
    """uint32 (K / 16, 2 N), C-contiguous -> uint8 codes (K, N). Trusted arguments."""
    assert b.dtype == np.uint32 and b.flags.c_contiguous and b.shape == (k // 16, 2 * n) and n % 64 == 0
    q = np.empty((k, n), np.uint8)
    _library()[0].refsim_marlin_unpack(b.ctypes.data, k, n, q.ctypes.data)
    return q


def bitplane_pack(codes: np.ndarray, bits: int) -> np.ndarray:
    """uint8 codes (N, K), C-contiguous, in range, K % 32 == 0 -> uint32 (bits, N, K / 32) in the
    Any-Precision layout (:func:`refsim.formats.bitplane.pack`). Trusted arguments."""
    n, k = codes.shape
    assert codes.dtype == np.uint8 and codes.flags.c_contiguous and k % 32 == 0
    out = np.empty((bits, n, k // 32), np.uint32)
    _library()[0].refsim_bitplane_pack(codes.ctypes.data, n, k, bits, out.ctypes.data)
    return out


def bitplane_unpack(planes: np.ndarray, bits: int) -> np.ndarray:
    """uint32 (P, N, K / 32), C-contiguous, bits <= P -> uint8 codes (N, K) of the first ``bits``
    planes. Trusted arguments."""
    p, n, kw = planes.shape
    assert planes.dtype == np.uint32 and planes.flags.c_contiguous and 1 <= bits <= p
    codes = np.empty((n, 32 * kw), np.uint8)
    _library()[0].refsim_bitplane_unpack(planes.ctypes.data, n, 32 * kw, bits, codes.ctypes.data)
    return codes
