"""Compiled twins of the GPTQ and AWQ packers: one pass over memory instead of one per field.

Spec
----
what            ``gptq_pack`` / ``gptq_unpack``: the LSB-first bit stream along K of
                :func:`refsim.formats.gptq.pack_stream` / ``unpack_stream`` for in-range codes
                (2, 3, 4, 8 bits; code row r starts at stream bit ``r * bits`` of its column, a 3-bit
                field at bit 30 or 31 of a word spills its high bits into the next word).
                ``awq_pack`` / ``awq_unpack``: :func:`refsim.formats.awq.pack_columns` /
                ``unpack_columns`` (8 nibbles along N per word, nibble i = column ``8j + ORDER[i]``).
how             per code row, a loop over the N columns that the compiler vectorises: shift the
                row into place and OR it into its word row (pack), or shift and mask it out (unpack);
                every array is read and written once. Integer operations only.
contract        callers validate first (codes in range, shapes); the kernels trust their arguments.
oracle          the NumPy functions named above (kept, and used without a compiler);
                ``tests/formats/test_native.py`` checks both paths bit for bit on every bit-width.
build/fallback  :func:`refsim._native.load` (no compiler or ``REFSIM_NATIVE=0``: NumPy paths).

The 3-bit stream of one column, first period (32 codes -> 3 words)::

    word 0: c0 c1 ... c9 | c10 bits 0-1       word 1: c10 bit 2 | c11 ... c20 | c21 bit 0
    word 2: c21 bits 1-2 | c22 ... c31
"""

from __future__ import annotations

import ctypes
import functools

import numpy as np

from refsim import _native

__all__ = ["available", "gptq_pack", "gptq_unpack", "awq_pack", "awq_unpack", "SOURCE"]

SOURCE = r"""
/* refsim native packers. Oracle: refsim.formats.gptq.pack_stream/unpack_stream and
   refsim.formats.awq.pack_columns/unpack_columns (NumPy). Integer operations only. */
#include <stdint.h>
#include <string.h>

#pragma GCC optimize("O3")   /* -O2's cost model does not vectorise loops that need alias checks */

/* q uint8 (K, N) -> words uint32 (K*bits/32, N): bit r*bits + b of a column's stream. Word row by
   word row: the rows whose fields start in it are shifted in (the first one assigns, so no
   memset pass), a 3-bit row straddling into the next word row adds its high bits there first. */
/* 2/4/8 bits: the PER = 32/bits fields of a word are consecutive rows; with PER a compile-time
   constant the field loop unrolls and the column loop vectorises, each word written once */
static inline __attribute__((always_inline))
void pack_whole(const uint8_t *restrict q, int64_t K, int64_t N, const int bits, uint32_t *restrict out) {
    const int PER = 32 / bits;
    for (int64_t w = 0; w < K / PER; w++) {
        const uint8_t *restrict src = q + w * PER * N;
        uint32_t *restrict dst = out + w * N;
        for (int64_t n = 0; n < N; n++) {
            uint32_t v = 0;
            for (int i = 0; i < PER; i++) v |= (uint32_t)src[i * N + n] << (i * bits);
            dst[n] = v;
        }
    }
}

void refsim_gptq_pack(const uint8_t *restrict q, int64_t K, int64_t N, int bits, uint32_t *restrict out) {
    if (bits == 2) { pack_whole(q, K, N, 2, out); return; }
    if (bits == 4) { pack_whole(q, K, N, 4, out); return; }
    if (bits == 8) { pack_whole(q, K, N, 8, out); return; }
    int64_t W = K * bits / 32;                               /* 3 bits: fields straddle words */
    for (int64_t w = 0; w < W; w++) {
        uint32_t *restrict dst = out + w * N;
        int64_t r0 = (32 * w + bits - 1) / bits;             /* first row starting in word w */
        int64_t r1 = (32 * w + 32 + bits - 1) / bits;        /* first row starting after it */
        int s0 = (int)(r0 * bits - 32 * w);
        if (s0 > 0) {                                        /* spill of row r0 - 1 (3-bit) */
            const uint8_t *restrict src = q + (r0 - 1) * N;
            int t = bits - s0;                               /* bits of that row already in w - 1 */
            for (int64_t n = 0; n < N; n++) dst[n] = (uint32_t)src[n] >> t;
        } else {
            const uint8_t *restrict src = q + r0 * N;
            for (int64_t n = 0; n < N; n++) dst[n] = (uint32_t)src[n];
            r0++;
        }
        for (int64_t r = r0; r < r1; r++) {
            const uint8_t *restrict src = q + r * N;
            int s = (int)(r * bits - 32 * w);
            for (int64_t n = 0; n < N; n++) dst[n] |= (uint32_t)src[n] << s;
        }
    }
}

/* words uint32 (K*bits/32, N) -> q uint8 (K, N) */
void refsim_gptq_unpack(const uint32_t *restrict words, int64_t K, int64_t N, int bits, uint8_t *restrict q) {
    uint32_t mask = (1u << bits) - 1u;
    for (int64_t r = 0; r < K; r++) {
        int64_t pos = r * bits, w = pos / 32;
        int s = (int)(pos % 32);
        const uint32_t *restrict src = words + w * N;
        uint8_t *restrict dst = q + r * N;
        if (s + bits > 32) {
            const uint32_t *restrict nxt = src + N;
            int t = 32 - s;
            for (int64_t n = 0; n < N; n++) dst[n] = (uint8_t)(((src[n] >> s) | (nxt[n] << t)) & mask);
        } else {
            for (int64_t n = 0; n < N; n++) dst[n] = (uint8_t)((src[n] >> s) & mask);
        }
    }
}

/* AWQ: q uint8 (R, N) -> uint32 (R, N/8); nibble i of word j = column 8j + ORDER[i]. The 8 codes
   of a word are 8 contiguous bytes x (byte c = column c): the even columns are gathered into the
   low half, the odd ones into the high half:
     x & 0x000F000F000F000F    c0 @0, c2 @16, c4 @32, c6 @48
     | >> 12, & 0xFF000000FF   c0 c2 @0..7, c4 c6 @32..39;   | >> 24, & 0xFFFF   c0 c2 c4 c6 @0..15 */
#define EVENS 0x000F000F000F000Full
void refsim_awq_pack(const uint8_t *restrict q, int64_t R, int64_t N, uint32_t *restrict out) {
    int64_t total = R * (N / 8);
    for (int64_t j = 0; j < total; j++) {
        uint64_t x, e, o;
        memcpy(&x, q + 8 * j, 8);
        e = x & EVENS;         e = (e | (e >> 12)) & 0x000000FF000000FFull;  e = (e | (e >> 24)) & 0xFFFF;
        o = (x >> 8) & EVENS;  o = (o | (o >> 12)) & 0x000000FF000000FFull;  o = (o | (o >> 24)) & 0xFFFF;
        out[j] = (uint32_t)(e | (o << 16));
    }
}

/* the inverse spread: 16 bits c0 c2 c4 c6 -> bytes 0, 2, 4, 6 (odd columns from the high half) */
void refsim_awq_unpack(const uint32_t *restrict words, int64_t R, int64_t N, uint8_t *restrict q) {
    int64_t total = R * (N / 8);
    for (int64_t j = 0; j < total; j++) {
        uint64_t v = words[j], e = v & 0xFFFF, o = v >> 16;
        e = (e | (e << 24)) & 0x000000FF000000FFull;  e = (e | (e << 12)) & EVENS;
        o = (o | (o << 24)) & 0x000000FF000000FFull;  o = (o | (o << 12)) & EVENS;
        uint64_t x = e | (o << 8);
        memcpy(q + 8 * j, &x, 8);
    }
}
"""


@functools.lru_cache(maxsize=1)
def _library():
    lib, reason = _native.load(SOURCE, "packers")
    if lib is None:
        return None, reason
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    for name, args in (("refsim_gptq_pack", [ptr, i64, i64, ctypes.c_int, ptr]),
                       ("refsim_gptq_unpack", [ptr, i64, i64, ctypes.c_int, ptr]),
                       ("refsim_awq_pack", [ptr, i64, i64, ptr]),
                       ("refsim_awq_unpack", [ptr, i64, i64, ptr])):
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = None, args
    return lib, None


def available() -> bool:
    """True if the compiled packers are built and loaded (builds them on first call)."""
    return _library()[0] is not None


def gptq_pack(q: np.ndarray, bits: int) -> np.ndarray:
    """uint8 codes (K, N), C-contiguous, in range -> uint32 (K * bits / 32, N). Trusted arguments."""
    k, n = q.shape
    assert q.dtype == np.uint8 and q.flags.c_contiguous and (k * bits) % 32 == 0
    out = np.empty((k * bits // 32, n), np.uint32)
    _library()[0].refsim_gptq_pack(q.ctypes.data, k, n, bits, out.ctypes.data)
    return out


def gptq_unpack(words: np.ndarray, bits: int) -> np.ndarray:
    """uint32 (W, N), C-contiguous -> uint8 codes (W * 32 / bits, N). Trusted arguments."""
    wr, n = words.shape
    assert words.dtype == np.uint32 and words.flags.c_contiguous and (wr * 32) % bits == 0
    q = np.empty((wr * 32 // bits, n), np.uint8)
    _library()[0].refsim_gptq_unpack(words.ctypes.data, q.shape[0], n, bits, q.ctypes.data)
    return q


def awq_pack(q: np.ndarray) -> np.ndarray:
    """uint8 4-bit codes (R, N), C-contiguous, N % 8 == 0 -> uint32 (R, N / 8). Trusted arguments."""
    r, n = q.shape
    assert q.dtype == np.uint8 and q.flags.c_contiguous and n % 8 == 0
    out = np.empty((r, n // 8), np.uint32)
    _library()[0].refsim_awq_pack(q.ctypes.data, r, n, out.ctypes.data)
    return out


def awq_unpack(words: np.ndarray, n: int) -> np.ndarray:
    """uint32 (R, N / 8), C-contiguous -> uint8 codes (R, N). Trusted arguments."""
    r = words.shape[0]
    assert words.dtype == np.uint32 and words.flags.c_contiguous and words.shape[1] * 8 == n
    q = np.empty((r, n), np.uint8)
    _library()[0].refsim_awq_unpack(words.ctypes.data, r, n, q.ctypes.data)
    return q
