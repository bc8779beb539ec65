/* refsim native: the FP8 wgmma chain of one 128-wide K block, for every row, column and K block.
   Per (K block kb, row r, column n): four wgmma.m64nNk32.f32.e4m3.e4m3 steps (k32 each), the first
   with scale-d = 0 (C = +0), each the T-FDPA of refsim.arith.wgmma (F = 13 fraction bits kept below the
   largest exponent E of the 32 products and C, every term truncated toward zero, the exact integer sum
   rounded toward zero to 14 significant bits: an e8m13 value stored as fp32).
   Oracle: refsim.arith.wgmma.wgmma (NumPy), tested equal. Integer arithmetic only; the loops over
   columns are innermost and branch-free so that the compiler vectorises them.
   Domain: finite e4m3 codes (no 0x7F / 0xFF). Products are m_a m_b 2^(e_a + e_b - 6) with
   |m_a m_b| <= 225 and e in [-6, 8]; E >= e_a + e_b, so every aligned term (|m_a m_b| << 7) >> (E - e_a - e_b) is below 2^15 and C's below 2^27, so the sum
   fits in int32, and every nonzero result has its leading bit at or above 2^-25 (an fp32 normal). */
#include <stdint.h>
#include <stdlib.h>

#pragma GCC optimize("O3")
#define INLINE static inline __attribute__((always_inline))
#define KB 128          /* K block: DeepGEMM's BLOCK_K, the promotion interval */
#define KS 32           /* K of one wgmma e4m3 step */
#define F 13            /* fraction bits kept below E */
#define NC 256          /* columns per chunk: the decoded B block (128 x NC x 8 bytes) stays in L2 */
#define NOEXP (-1000)   /* the exponent of a zero operand: no product or C reaches E through it */

/* e4m3 code -> signed significand (sign folded in, |m| <= 15) and exponent (subnormals -6, zero NOEXP) */
INLINE void dec8(uint8_t u, int32_t *m, int32_t *e) {
    int32_t eb = (u >> 3) & 15, f = u & 7;
    int32_t mag = eb ? (f | 8) : f;
    *m = (u & 0x80) ? -mag : mag;
    *e = mag ? (eb ? eb - 7 : -6) : NOEXP;
}

/* x * 2^sh truncated toward zero, 0 <= x < 2^28, sh <= 13 (left) or any right shift */
INLINE int32_t shift_tz(int32_t x, int32_t sh) {
    int32_t l = sh > 0 ? sh : 0, r = -sh > 31 ? 31 : (-sh > 0 ? -sh : 0);
    return (x << l) >> r;
}

/* index of the leading bit of 0 < t < 2^31, branch-free */
INLINE int32_t lead(uint32_t t) {
    int32_t nb = 0, b;
    b = (t > 0xFFFFu) << 4; t >>= b; nb += b;
    b = (t > 0xFFu) << 3;   t >>= b; nb += b;
    b = (t > 0xFu) << 2;    t >>= b; nb += b;
    b = (t > 0x3u) << 1;    t >>= b; nb += b;
    return nb + (t > 0x1u);
}

/* a (M, K) and b (N, K) e4m3 codes, K-major rows (K a multiple of 128); out (K/128, M, N) fp32 bits.
   Returns 0, or 1 when the decoded operands cannot be allocated (out untouched). */
int refsim_fp8_kblock_partials(int M, int N, int K, const uint8_t *a, const uint8_t *b, uint32_t *out) {
    int nkb = K / KB;
    int32_t *am = malloc(sizeof(int32_t) * (size_t)M * K), *ae = malloc(sizeof(int32_t) * (size_t)M * K);
    int32_t *bm = malloc(sizeof(int32_t) * KB * NC), *be = malloc(sizeof(int32_t) * KB * NC);
    if (!am || !ae || !bm || !be) { free(am); free(ae); free(bm); free(be); return 1; }
    for (int64_t i = 0; i < (int64_t)M * K; i++) dec8(a[i], am + i, ae + i);
    int32_t E[NC], S[NC], cm[NC], cq[NC], cx[NC];
    for (int n0 = 0; n0 < N; n0 += NC) {
        int nc = N - n0 < NC ? N - n0 : NC;
        for (int kb = 0; kb < nkb; kb++) {
            for (int n = 0; n < nc; n++)                     /* B block, k-major: (128, nc) */
                for (int k = 0; k < KB; k++)
                    dec8(b[(int64_t)(n0 + n) * K + kb * KB + k], bm + k * NC + n, be + k * NC + n);
            for (int i = 0; i < KB * NC; i++) bm[i] *= 1 << (F - 6);   /* pre-shifted: m_b 2^7 */
            for (int r = 0; r < M; r++) {
                const int32_t *amr = am + (int64_t)r * K + kb * KB, *aer = ae + (int64_t)r * K + kb * KB;
                for (int n = 0; n < nc; n++) { cm[n] = 0; cq[n] = 0; cx[n] = 2 * NOEXP; }   /* C = +0 */
                for (int s = 0; s < KB / KS; s++) {
                    const int32_t *ams = amr + s * KS, *aes = aer + s * KS;
                    for (int n = 0; n < nc; n++) E[n] = cx[n];
                    for (int k = 0; k < KS; k++) {               /* E = max(exponents of products, C) */
                        const int32_t ea = aes[k], *bek = be + (s * KS + k) * NC;
                        for (int n = 0; n < nc; n++) { int32_t ep = ea + bek[n]; E[n] = ep > E[n] ? ep : E[n]; }
                    }
                    for (int n = 0; n < nc; n++) {               /* C's term: |C| / 2^(E - F), truncated */
                        int32_t mag = cm[n] < 0 ? -cm[n] : cm[n];
                        int32_t t = shift_tz(mag, cq[n] - (E[n] - F));
                        S[n] = cm[n] < 0 ? -t : t;
                    }
                    for (int k = 0; k < KS; k++) {               /* the 32 products' terms */
                        const int32_t ma = ams[k], ea = aes[k];
                        const int32_t *bmk = bm + (s * KS + k) * NC, *bek = be + (s * KS + k) * NC;
                        for (int n = 0; n < nc; n++) {   /* |P| 2^(ep - E + 7) = (|P| << 7) >> (E - ep) */
                            int32_t P = ma * bmk[n], mag = P < 0 ? -P : P;
                            int32_t d = E[n] - ea - bek[n];
                            int32_t t = mag >> (d < 31 ? d : 31);
                            S[n] += P < 0 ? -t : t;
                        }
                    }
                    for (int n = 0; n < nc; n++) {               /* toward zero to F + 1 significant bits */
                        int32_t mag = S[n] < 0 ? -S[n] : S[n];
                        int32_t nb = lead((uint32_t)mag | 1u);
                        int32_t ex = nb + E[n] - F;              /* exponent of the leading bit */
                        int32_t drop = (ex > -126 ? ex : -126) - E[n];
                        drop = drop > 0 ? drop : 0;
                        int32_t kept = mag >> drop;
                        cm[n] = S[n] < 0 ? -kept : kept;
                        cq[n] = E[n] - F + drop;
                        cx[n] = mag ? ex : 2 * NOEXP;
                    }
                }
                uint32_t *o = out + ((int64_t)kb * M + r) * N + n0;
                for (int n = 0; n < nc; n++) {                   /* e8m13 value cm 2^cq -> fp32 bits (normal) */
                    int32_t mag = cm[n] < 0 ? -cm[n] : cm[n];
                    int32_t nb = lead((uint32_t)mag | 1u);
                    uint32_t frac = ((uint32_t)mag << (23 - nb)) & 0x7FFFFFu;
                    uint32_t bits = ((uint32_t)(cq[n] + nb + 127) << 23) | frac | (cm[n] < 0 ? 0x80000000u : 0u);
                    o[n] = mag ? bits : 0u;
                }
            }
        }
    }
    free(am); free(ae); free(bm); free(be);
    return 0;
}
