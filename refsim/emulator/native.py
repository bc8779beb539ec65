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
                Second (issue 13, part 3): the fp16 ``hfma2`` chains of the GEMV emulators —
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
oracle          :func:`refsim.emulator.tensor_core.mma_k16_f32` (NumPy, the readable reference),
                itself tested against the integer model :func:`refsim.emulator.tensor_core.fdpa`;
                ``tests/emulator/test_native.py`` checks the compiled path bit for bit against it.
                GEMV kernels: the NumPy emulations (``native=False``) of
                :mod:`refsim.emulator.anyprec_kernel` and :mod:`refsim.emulator.mixed_2_4_16_kernel`
                (themselves tested against their plain-loop, exact-rational twins), raw bits, with
                hypothesis over shapes and fp16 bit patterns incl. Inf and NaN
                (``property_tests/emulator/test_native.py``).
build           :func:`refsim._native.load` (QIGen's build cache, ``-O2 -ffp-contract=off``, never
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

import numpy as np

from refsim import _native
from refsim.errors import ToolchainError

__all__ = ["available", "status", "mma_k16_f32_blocks", "anyprec_gemv", "mixed_group_sums",
           "mixed_dense_group_sums", "atom_epilogue", "round_to_f16_values", "SOURCE"]

_MMA_SOURCE = r"""
/* refsim native: chained T-FDPA (fp16 inputs, fp32 accumulation) for one k16 step.
   Oracle: refsim.emulator.tensor_core.mma_k16_f32 (NumPy). Integer arithmetic throughout,
   including the conversion of S * 2^(E - F) to fp32 toward zero (built on the bit fields).
   Loops over n are innermost and branch-free so that the compiler can vectorise them. */
#include <stdint.h>
#include <string.h>
#include <stdlib.h>

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


_F16_SOURCE = r"""
/* refsim native, part 2: fp16 fma chains of the GEMV emulators (Any-Precision, 2/4/16).
   Oracle: the NumPy paths of refsim.emulator.anyprec_kernel / mixed_2_4_16_kernel, which compute
   fma.rn.f16 as fp16(float64(a) * float64(b) + float64(c)) (refsim.emulator.fp._f16_fma_fused) and
   add.rn.f16 as one RNE of the exact sum. Here every fp16 value is carried as the double that
   equals it; the double product of two fp16 values is exact (22 bits), the double sum rounds as
   NumPy's does (compiled with -ffp-contract=off; a contraction would not change it either: the
   product is exact), and r16 rounds a double to the nearest fp16 value (RNE, overflow -> Inf) on
   the bit pattern, as NumPy's float64 -> float16 cast does, NaN payloads included. */

/* double -> nearest fp16 value, returned as a double (== float64(float16(x)) in NumPy). Branch-free
   (three candidates, then selects) so that the column / lane loops vectorise:
   - |x| >= 2^-14 (fp16 normal): RNE to 10 fraction bits on the bit pattern (add half - 1 + lsb, clear
     the low 42 bits; a carry moves into the exponent); >= 2^16 after rounding -> Inf;
   - |x| < 2^-14 (fp16 subnormal grid 2^-24): (|x| + 1.5 * 2^28) - 1.5 * 2^28: near 1.5 * 2^28 the
     double grid is 2^-24, so the add is the one RNE onto that grid and the subtraction is exact;
   - Inf, NaN: Inf stays, NaN keeps its top 10 payload bits (0x...0 after that gets the lowest kept bit),
     as NumPy's float64 -> float16 cast does. The sign is put back last. */
INLINE double r16(double x) {
    union { double d; uint64_t u; } v = {x}, sub;
    const uint64_t INF = 0x7FF0000000000000ull, LOW = (1ull << 42) - 1;
    uint64_t sgn = v.u & 0x8000000000000000ull, a = v.u ^ sgn;
    uint64_t rn = (a + ((1ull << 41) - 1) + ((a >> 42) & 1)) & ~LOW;
    uint64_t big = -(uint64_t)(rn >= 0x40F0000000000000ull);          /* masks: all ones when true */
    rn = (rn & ~big) | (INF & big);
    v.u = a;
    sub.d = (v.d + 0x1.8p28) - 0x1.8p28;
    uint64_t rx = a & ~LOW;
    rx |= (uint64_t)((a != INF) & (rx == INF)) << 42;
    uint64_t special = -(uint64_t)(a >= INF), normal = -(uint64_t)(a >= 0x3F10000000000000ull);
    uint64_t r = (rx & special) | (rn & normal & ~special) | (sub.u & ~normal);
    v.u = r | sgn;
    return v.d;
}

/* fp16 bits -> the double equal to it (NaN payload shifted up as NumPy does) */
INLINE double h2d(uint16_t h) {
    uint64_t s = (uint64_t)(h >> 15) << 63, e = (h >> 10) & 31, f = h & 1023, b;
    if (e == 0) {
        double v = (double)f * 0x1p-24;
        memcpy(&b, &v, 8);
        b |= s;
    } else if (e == 31) b = s | 0x7FF0000000000000ull | (f << 42);
    else b = s | ((e - 15 + 1023) << 52) | (f << 42);
    double d;
    memcpy(&d, &b, 8);
    return d;
}

/* Any-Precision matmul_kbit_32 for one launch (see anyprec_kernel's spec): out[l, r] as a double
   equal to the fp16 result. codes uint8 (N, K), lut fp16 (N, nlut): W[r, k] = lut[r, codes[r, k]];
   X fp16 (M, K); k0, k1 int32
   (chunks, 32, 16) the lanes' pair indices (inactive lanes: any index < K); ksplit slices of 4
   chunks, combined by fp16 adds from +0 when ksplit > 1. */
void refsim_anyprec_gemv(int M, int N, int K, int ksplit, int nlut, const uint8_t *codes, const uint16_t *lut,
                         const uint16_t *X, const int32_t *k0, const int32_t *k1, double *out) {
    int chunks = (K + 1023) / 1024, full = K / 1024, eff_tail = (K % 1024) / 32;
    int64_t per = (int64_t)chunks * 512;                     /* 16 steps x 32 lanes per chunk */
    double *xa = malloc(sizeof(double) * 2 * per * (M > 0 ? M : 1));
    double *wa = malloc(sizeof(double) * 2 * per);
    if (!xa || !wa) { free(xa); free(wa); return; }
    double *xb = xa + per * M, *wb = wa + per;
    /* operands in lane order: [chunk][step][lane], so the 32 lanes of a step are contiguous */
    for (int l = 0; l < M; l++)
        for (int i = 0; i < chunks; i++)
            for (int t = 0; t < 32; t++)
                for (int st = 0; st < 16; st++) {
                    int64_t src = ((int64_t)i * 32 + t) * 16 + st, dst = (int64_t)l * per + (int64_t)i * 512 + st * 32 + t;
                    xa[dst] = h2d(X[(int64_t)l * K + k0[src]]);
                    xb[dst] = h2d(X[(int64_t)l * K + k1[src]]);
                }
    for (int r = 0; r < N; r++) {
        const uint8_t *cr = codes + (int64_t)r * K;
        const uint16_t *lr = lut + (int64_t)r * nlut;
        for (int i = 0; i < chunks; i++)
            for (int t = 0; t < 32; t++)
                for (int st = 0; st < 16; st++) {
                    int64_t src = ((int64_t)i * 32 + t) * 16 + st, dst = (int64_t)i * 512 + st * 32 + t;
                    wa[dst] = h2d(lr[cr[k0[src]]]);
                    wb[dst] = h2d(lr[cr[k1[src]]]);
                }
        for (int l = 0; l < M; l++) {
            double acc = 0.0;
            for (int z = 0; z < ksplit; z++) {
                double part[32], v[32], nv[32];
                for (int t = 0; t < 32; t++) part[t] = 0.0;
                int iend = (z + 1) * 4 < chunks ? (z + 1) * 4 : chunks;
                for (int i = z * 4; i < iend; i++) {
                    double sx[32], sy[32];
                    for (int t = 0; t < 32; t++) { sx[t] = 0.0; sy[t] = 0.0; }
                    const double *pa = wa + (int64_t)i * 512, *pb = wb + (int64_t)i * 512;
                    const double *qa = xa + (int64_t)l * per + (int64_t)i * 512, *qb = xb + (int64_t)l * per + (int64_t)i * 512;
                    for (int st = 0; st < 16; st++)
                        for (int t = 0; t < 32; t++) {
                            sx[t] = r16(pa[st * 32 + t] * qa[st * 32 + t] + sx[t]);
                            sy[t] = r16(pb[st * 32 + t] * qb[st * 32 + t] + sy[t]);
                        }
                    int eff = i < full ? 32 : eff_tail;          /* tail lanes t >= eff break out */
                    for (int t = 0; t < eff; t++) part[t] = r16(part[t] + r16(sx[t] + sy[t]));
                }
                for (int t = 0; t < 32; t++) v[t] = part[t];
                for (int d = 16; d >= 1; d >>= 1) {          /* warp_reduce_sum: shfl_down, own value past 31 */
                    for (int t = 0; t < 32; t++) nv[t] = r16(v[t] + (t + d < 32 ? v[t + d] : v[t]));
                    for (int t = 0; t < 32; t++) v[t] = nv[t];
                }
                acc = ksplit > 1 ? r16(acc + v[0]) : v[0];
            }
            out[(int64_t)l * N + r] = acc;
        }
    }
    free(xa);
    free(wa);
}

/* 2/4/16 GEMV step 3 for every (group, column): w fp16 (G*16, N) dequantized weights (row k
   contiguous in n), x fp16 (G*16,); out float32 (G, N) = float(__hadd(h.x, h.y)) after the two
   8-step hfma2 chains from 0 (.x even k, .y odd k). Columns innermost (independent, vectorisable). */
void refsim_mixed_group_sums(int G, int N, const uint16_t *w, const uint16_t *x, float *out) {
    double hx[256], hy[256];
    for (int g = 0; g < G; g++)
        for (int n0 = 0; n0 < N; n0 += 256) {
            int nc = N - n0 < 256 ? N - n0 : 256;
            for (int n = 0; n < nc; n++) { hx[n] = 0.0; hy[n] = 0.0; }
            for (int i = 0; i < 8; i++) {
                int64_t ke = (int64_t)g * 16 + 2 * i;
                double xe = h2d(x[ke]), xo = h2d(x[ke + 1]);
                const uint16_t *we = w + ke * N + n0, *wo = w + (ke + 1) * N + n0;
                for (int n = 0; n < nc; n++) {
                    hx[n] = r16(h2d(we[n]) * xe + hx[n]);
                    hy[n] = r16(h2d(wo[n]) * xo + hy[n]);
                }
            }
            for (int n = 0; n < nc; n++) out[(int64_t)g * N + n0 + n] = (float)r16(hx[n] + hy[n]);
        }
}

/* Steps 2-3 of the 2/4/16 GEMV fused: the weight w[k, n] = __hmul2(q[k, n] - zero[g, n], s_hat[g, n])
   (q - z exact, the product exact in double (<= 16 bits), one RNE by r16) is formed as the chains
   read it, never stored. q uint8 (G*16, N), zero uint8 (G, N), s_hat fp16 (G, N), x fp16 (G*16,);
   out float32 (G, N) as refsim_mixed_group_sums. */
void refsim_mixed_dense_group_sums(int G, int N, const uint8_t *q, const uint8_t *zero, const uint16_t *s_hat,
                                   const uint16_t *x, float *out) {
    double hx[256], hy[256], sc[256];
    int32_t z[256];
    for (int g = 0; g < G; g++)
        for (int n0 = 0; n0 < N; n0 += 256) {
            int nc = N - n0 < 256 ? N - n0 : 256;
            for (int n = 0; n < nc; n++) {
                hx[n] = 0.0; hy[n] = 0.0;
                sc[n] = h2d(s_hat[(int64_t)g * N + n0 + n]);
                z[n] = zero[(int64_t)g * N + n0 + n];
            }
            for (int i = 0; i < 8; i++) {
                int64_t ke = (int64_t)g * 16 + 2 * i;
                double xe = h2d(x[ke]), xo = h2d(x[ke + 1]);
                const uint8_t *qe = q + ke * N + n0, *qo = q + (ke + 1) * N + n0;
                for (int n = 0; n < nc; n++) {
                    double we = r16((double)((int32_t)qe[n] - z[n]) * sc[n]);
                    double wo = r16((double)((int32_t)qo[n] - z[n]) * sc[n]);
                    hx[n] = r16(we * xe + hx[n]);
                    hy[n] = r16(wo * xo + hy[n]);
                }
            }
            for (int n = 0; n < nc; n++) out[(int64_t)g * N + n0 + n] = (float)r16(hx[n] + hy[n]);
        }
}

/* Atom group-GEMM epilogue over all groups in order (refsim.emulator.atom_kernel._epilogue):
   s = __hmul2(sa[r, g], sb[g, 2 (n / 2) + (r % 16) / 8]) (exact double product, one r16);
   fused: acc = fp32(float64(float(c) * float(s)) + acc rounded to odd) -- the product is exact in double
   (<= 24 + 11 bits), TwoSum gives the sum's error, an inexact even result moves one ulp toward the exact
   value (as fp.f32_fma), then one RNE cast; unfused: FMUL then FADD in float. float(c) is the RNE
   int -> float conversion. c int32 (G, M, N); sa fp16 (M, G); sb fp16 (G, N); acc float32 (M, N) in/out. */
void refsim_atom_epilogue(int G, int M, int N, int fused, const int32_t *c, const uint16_t *sa,
                          const uint16_t *sb, float *acc) {
    for (int g = 0; g < G; g++)
        for (int r = 0; r < M; r++) {
            double a = h2d(sa[(int64_t)r * G + g]);
            int half = (r % 16) / 8;
            const int32_t *cr = c + ((int64_t)g * M + r) * N;
            const uint16_t *sbg = sb + (int64_t)g * N;
            float *ar = acc + (int64_t)r * N;
            for (int n = 0; n < N; n++) {
                float sf = (float)r16(a * h2d(sbg[2 * (n / 2) + half]));   /* exact: an fp16 value */
                float cf = (float)cr[n];
                if (fused) {
                    double p = (double)cf * (double)sf, q = (double)ar[n];
                    double s = p + q, bb = s - p, e = (p - (s - bb)) + (q - bb);
                    union { double d; uint64_t u; } v = {s};
                    if (e != 0.0 && !(v.u & 1) && s - s == 0.0)        /* inexact, even, finite */
                        v.u += ((e > 0.0) == (s > 0.0)) ? 1 : (uint64_t)-1;
                    ar[n] = (float)v.d;
                } else {
                    float p = cf * sf;
                    ar[n] = p + ar[n];
                }
            }
        }
}

/* test hook: r16 over an array (the conversion checked against NumPy's float64 -> float16) */
void refsim_r16(int64_t n, const double *x, double *y) {
    for (int64_t i = 0; i < n; i++) y[i] = r16(x[i]);
}
"""

SOURCE = _MMA_SOURCE + _F16_SOURCE


@functools.lru_cache(maxsize=1)
def _library():
    """(ctypes library or None, reason it is missing or None). Built and checked once per process."""
    lib, reason = _native.load(SOURCE, "emulator kernels")
    if lib is None:
        return None, reason
    fn = lib.refsim_mma_k16_f32
    fn.restype = None
    fn.argtypes = [ctypes.c_int] * 6 + [ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64,
                                        ctypes.c_void_p, ctypes.c_void_p]
    fn = lib.refsim_anyprec_gemv
    fn.restype = None
    fn.argtypes = [ctypes.c_int] * 5 + [ctypes.c_void_p] * 6
    fn = lib.refsim_mixed_group_sums
    fn.restype = None
    fn.argtypes = [ctypes.c_int] * 2 + [ctypes.c_void_p] * 3
    fn = lib.refsim_mixed_dense_group_sums
    fn.restype = None
    fn.argtypes = [ctypes.c_int] * 2 + [ctypes.c_void_p] * 5
    fn = lib.refsim_atom_epilogue
    fn.restype = None
    fn.argtypes = [ctypes.c_int] * 4 + [ctypes.c_void_p] * 4
    fn = lib.refsim_r16
    fn.restype = None
    fn.argtypes = [ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p]
    return lib, None


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
    lib.refsim_anyprec_gemv(m, n, k, int(ksplit), lut.shape[1], codes.ctypes.data, lut.ctypes.data, x.ctypes.data,
                            k0.ctypes.data, k1.ctypes.data, out.ctypes.data)
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
    lib.refsim_atom_epilogue(g, m, n, int(bool(fused)), c.ctypes.data, sa.ctypes.data, sb.ctypes.data,
                             acc.ctypes.data)
    return acc


def round_to_f16_values(x: np.ndarray) -> np.ndarray:
    """The C kernels' fp16 rounding on float64 ``x`` (any shape): float64, each value rounded to the
    nearest fp16 value (RNE, overflow to Inf). Exposed so that tests can hold it against NumPy's
    float64 -> float16 cast."""
    lib = _require_library()
    x = np.ascontiguousarray(x, dtype=np.float64)
    y = np.empty_like(x)
    lib.refsim_r16(x.size, x.ctypes.data, y.ctypes.data)
    return y
