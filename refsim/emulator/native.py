"""Compiled twins of the emulator's hot loops: small C kernels built at first use, NumPy paths kept.

Spec
----
what            the T-FDPA chain of one ``mma.m16n8k16 .f32`` k16 step for many (k-warp, row,
                column) triples at once (:func:`mma_k16_f32_blocks`), the Marlin emulator's inner
                loop. The C code is the integer model of :mod:`refsim.emulator.tensor_core` written
                out per element: operands split into (sign, integer significand, exponent),
                products and shifts in int64, one exact integer sum, one conversion of
                ``S * 2^(E - F)`` to fp32 toward zero built on the integer (leading-bit position,
                truncation, exponent field). No floating-point instruction is executed, so no
                compiler option, contraction or rounding mode can change a bit.
oracle          :func:`refsim.emulator.tensor_core.mma_k16_f32` (NumPy, the readable reference),
                itself tested against the integer model :func:`refsim.emulator.tensor_core.fdpa`;
                ``tests/emulator/test_native.py`` checks the compiled path bit for bit against it.
build           :mod:`refsim.qigen.build` (content-addressed cache, id check, ``-O2
                -ffp-contract=off``, never ``-ffast-math``), ISA ``scalar``: plain C99, no
                intrinsics. Built once per machine (about 1 s), then loaded from the cache.
fallback        no C compiler, or a failed build, or ``REFSIM_NATIVE=0`` in the environment: the
                emulators run their NumPy paths (same bits, about 5x slower) and one
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
import os
import warnings

import numpy as np

from refsim.errors import ToolchainError

__all__ = ["available", "status", "mma_k16_f32_blocks", "SOURCE"]

SOURCE = r"""
/* refsim native: chained T-FDPA (fp16 inputs, fp32 accumulation) for one k16 step.
   Oracle: refsim.emulator.tensor_core.mma_k16_f32 (NumPy). Integer arithmetic throughout,
   including the conversion of S * 2^(E - F) to fp32 toward zero (built on the bit fields).
   Loops over n are innermost and branch-free so that the compiler can vectorise them. */
#include <stdint.h>
#include <string.h>

#pragma GCC optimize("O3")
#define INLINE static inline __attribute__((always_inline))
#define CHUNK 512   /* columns per chunk: the decoded B block (16 x CHUNK x 12 bytes) stays in L2 */

/* fp16 bits -> significand m (<= 11 bits), exponent e(x) (subnormals -14), sign bit */
INLINE void dec16(uint16_t u, int32_t *m, int32_t *e, int32_t *s) {
    int32_t eb = (u >> 10) & 31, f = u & 1023;
    *m = eb ? (f | 1024) : f;
    *e = eb ? eb - 15 : -14;
    *s = (u >> 15) & 1;
}

/* x * 2^sh truncated toward zero, 0 <= x < 2^24, sh <= 5: both shifts with legal counts, then
   a select (keeps the loop branch-free) */
INLINE int32_t shift_tz(int32_t x, int32_t sh) {
    int32_t l = sh > 0 ? sh : 0, r = -sh > 31 ? 31 : (-sh > 0 ? -sh : 0);
    return (x << l) >> r;
}

/* S * 2^(E - F) toward zero onto fp32 bits (sign-magnitude; S == 0 gives +0, or -0 when every
   term was a negative zero). */
INLINE uint32_t rz_bits(uint32_t m24, int32_t nb, int32_t E, int F, uint32_t subn) {
    int32_t ex = nb + E - F;                                 /* exponent of the leading bit */
    uint32_t normal = ((uint32_t)(ex + 127) << 23) | (m24 & 0x7FFFFFu);
    return ex >= 128 ? 0x7F800000u : (ex >= -126 ? normal : subn);
}

INLINE uint32_t rz_f32_32(int32_t S, int32_t E, int F, int32_t negzero) {
    uint32_t mag = (uint32_t)(S < 0 ? -S : S);
    int32_t nb = 0, b;                                       /* leading-bit position, branch-free */
    uint32_t t = mag;
    b = (t > 0xFFFFu) << 4; t >>= b; nb += b;
    b = (t > 0xFFu) << 3;   t >>= b; nb += b;
    b = (t > 0xFu) << 2;    t >>= b; nb += b;
    b = (t > 0x3u) << 1;    t >>= b; nb += b;
    nb += (t > 0x1u);
    int32_t dl = 23 - nb > 0 ? 23 - nb : 0, dr = nb - 23 > 0 ? nb - 23 : 0;
    uint32_t m24 = (mag << dl) >> dr;
    int32_t sub = E - F + 149;                               /* subnormal: quantum 2^-149 */
    int32_t sl = sub > 0 ? (sub > 31 ? 31 : sub) : 0, sr = sub < 0 ? (-sub > 31 ? 31 : -sub) : 0;
    uint32_t subn = (mag << sl) >> sr;
    uint32_t bits = rz_bits(m24, nb, E, F, subn) | (S < 0 ? 0x80000000u : 0u);
    return mag ? bits : (negzero ? 0x80000000u : 0u);
}

static uint32_t rz_f32_64(int64_t S, int32_t E, int F, int32_t negzero) {
    uint64_t mag = (uint64_t)(S < 0 ? -S : S);
    if (!mag) return negzero ? 0x80000000u : 0u;
    int32_t nb = 63 - __builtin_clzll(mag);
    uint32_t m24 = (uint32_t)(nb >= 23 ? mag >> (nb - 23) : mag << (23 - nb));
    int32_t sub = E - F + 149;
    uint32_t subn = (uint32_t)(sub >= 0 ? mag << (sub > 31 ? 31 : sub) : (-sub > 63 ? 0 : mag >> -sub));
    return rz_bits(m24, nb, E, F, subn) | (S < 0 ? 0x80000000u : 0u);
}

/* one T-FDPA block of L products for columns n < nc of one row: acc[n] = rho(acc[n] + sum a*b);
   a*: this row's decoded A values from k0, b*: decoded B, (16, CHUNK) k-major, from row k0.
   block_4 / block_8: every term and the sum fit int32 (|S| < 8 * 2^26 + 2^25); the i loop is
   written out (PASS1/PASS2 per product) so that the n loop is branch-free and vectorises.
   block_16 (sm_90, F = 25): |S| can reach 2^31 + 2^26, so the sum is int64 (scalar code). */
#define HEAD                                                                                    \
        uint32_t cb = acc[n];                                                                   \
        int32_t cneg = (int32_t)(cb >> 31), ceb = (int32_t)((cb >> 23) & 255);                  \
        int32_t cm = (int32_t)(cb & 0x7FFFFF) | (ceb ? 0x800000 : 0);                           \
        int32_t ec = cm ? (ceb ? ceb - 127 : -126) : e_zero;                                    \
        int32_t E = ec, negzero = cneg & (cm == 0);
#define PASS1(i) {                                           /* the largest exponent */         \
        int32_t P = am[i] * bm[(i) * CHUNK + n];                                                \
        int32_t ep = ae[i] + be[(i) * CHUNK + n];   /* loaded unconditionally: no branch */    \
        ep = P ? ep : e_zero;                                                                   \
        E = ep > E ? ep : E; }
#define PASS2(i) {                                           /* align, truncate, add */         \
        int32_t P = am[i] * bm[(i) * CHUNK + n];                                                \
        int32_t ep = ae[i] + be[(i) * CHUNK + n];   /* loaded unconditionally: no branch */    \
        ep = P ? ep : e_zero;                                                                   \
        int32_t sg = as[i] ^ bs[(i) * CHUNK + n];                                               \
        int32_t T = shift_tz(P, ep - E + F - 20);             /* products: 20 fraction bits */  \
        S += (T ^ -(STYPE)sg) + sg;                                                             \
        negzero &= (P == 0) & sg; }
#define BLOCK_ARGS int F, int e_zero, int nc, const int32_t *am, const int32_t *ae,             \
        const int32_t *as, const int32_t *bm, const int32_t *be, const int32_t *bs,             \
        uint32_t *restrict acc

#define STYPE int32_t
static void block_4(BLOCK_ARGS) {
    for (int n = 0; n < nc; n++) {
        HEAD PASS1(0) PASS1(1) PASS1(2) PASS1(3)
        int32_t Tc = shift_tz(cm, ec - E + F - 23);
        int32_t S = (Tc ^ -cneg) + cneg;
        PASS2(0) PASS2(1) PASS2(2) PASS2(3)
        acc[n] = rz_f32_32(S, E, F, negzero);
    }
}

static void block_8(BLOCK_ARGS) {
    for (int n = 0; n < nc; n++) {
        HEAD PASS1(0) PASS1(1) PASS1(2) PASS1(3) PASS1(4) PASS1(5) PASS1(6) PASS1(7)
        int32_t Tc = shift_tz(cm, ec - E + F - 23);
        int32_t S = (Tc ^ -cneg) + cneg;
        PASS2(0) PASS2(1) PASS2(2) PASS2(3) PASS2(4) PASS2(5) PASS2(6) PASS2(7)
        acc[n] = rz_f32_32(S, E, F, negzero);
    }
}
#undef STYPE
#define STYPE int64_t
static void block_16(BLOCK_ARGS) {
    for (int n = 0; n < nc; n++) {
        HEAD
        for (int i = 0; i < 16; i++) PASS1(i)
        int32_t Tc = shift_tz(cm, ec - E + F - 23);
        int64_t S = (Tc ^ -cneg) + cneg;
        for (int i = 0; i < 16; i++) PASS2(i)
        acc[n] = rz_f32_64(S, E, F, negzero);
    }
}

void refsim_mma_k16_f32(int L, int F, int e_zero, int W, int R, int N,
                        const uint16_t *A, int64_t lda, const uint16_t *B, int64_t ldb,
                        const int64_t *kcol, float *acc_f) {
    uint32_t *acc = (uint32_t *)acc_f;
    int32_t bm[16 * CHUNK], be[16 * CHUNK], bs[16 * CHUNK];
    for (int w = 0; w < W; w++) {
        for (int n0 = 0; n0 < N; n0 += CHUNK) {
            int nc = N - n0 < CHUNK ? N - n0 : CHUNK;
            for (int i = 0; i < 16; i++) {
                const uint16_t *brow = B + (kcol[w] + i) * ldb + n0;
                for (int n = 0; n < nc; n++)
                    dec16(brow[n], &bm[i * CHUNK + n], &be[i * CHUNK + n], &bs[i * CHUNK + n]);
            }
            for (int r = 0; r < R; r++) {
                int32_t a0[16], a1[16], a2[16];                /* row r of A: (m, e, sign) */
                for (int i = 0; i < 16; i++) dec16(A[r * lda + kcol[w] + i], &a0[i], &a1[i], &a2[i]);
                uint32_t *row = acc + ((int64_t)w * R + r) * N + n0;
                for (int k0 = 0; k0 < 16; k0 += L) {
                    const int32_t *b0 = bm + k0 * CHUNK, *b1 = be + k0 * CHUNK, *b2 = bs + k0 * CHUNK;
                    if (L == 8) block_8(F, e_zero, nc, a0 + k0, a1 + k0, a2 + k0, b0, b1, b2, row);
                    else if (L == 4) block_4(F, e_zero, nc, a0 + k0, a1 + k0, a2 + k0, b0, b1, b2, row);
                    else block_16(F, e_zero, nc, a0 + k0, a1 + k0, a2 + k0, b0, b1, b2, row);
                }
            }
        }
    }
}
"""


def _disabled() -> bool:
    return os.environ.get("REFSIM_NATIVE", "1").strip() in ("0", "false", "no", "off")


@functools.lru_cache(maxsize=1)
def _library():
    """(ctypes library or None, reason it is missing or None). Built and checked once per process."""
    if _disabled():
        return None, "REFSIM_NATIVE=0"
    from refsim.qigen import build

    try:
        from refsim.qigen.machine import detect_isa

        build.find_compiler()            # before the library cache: a compiler must be present now
        lib = build.load(SOURCE, "avx2" if detect_isa() == "avx2" else "scalar")
    except ToolchainError as err:
        reason = str(err).splitlines()[0]
        warnings.warn(f"refsim: compiled emulator kernels unavailable ({reason}); using the NumPy "
                      "paths (same bits, slower)", RuntimeWarning, stacklevel=3)
        return None, reason
    fn = lib.refsim_mma_k16_f32
    fn.restype = None
    fn.argtypes = [ctypes.c_int] * 6 + [ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64,
                                        ctypes.c_void_p, ctypes.c_void_p]
    return lib, None


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
