
/* refsim native: chained T-FDPA (fp16 inputs, fp32 accumulation) for one k16 step.
   Oracle: refsim.arith.mma_steps.mma_k16_f32 (NumPy). Integer arithmetic throughout,
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

/* wgmma FP8 (e4m3 / e5m2, any mix) -> f32 accumulator: the T-FDPA of refsim.arith.wgmma (L = K = 32
   products and C aligned to the largest exponent E, truncated F = 13 fraction bits below it, summed
   exactly, the sum rounded toward zero to 14 significant bits: e8m13). Oracle: refsim.arith.wgmma.wgmma
   with native=False (refsim.arith.tensor_core.fdpa_terms), tested equal bit for bit incl. specials.
   A (T, 64, 32) and Bt (T, N, 32) fp8 codes (Bt[t, j] = column j of B, K contiguous), C and D
   (T, 64, N) fp32 bits. A fast branch-free loop over n treats every operand as finite; the elements of
   a row or column holding Inf/NaN codes, or whose C is Inf/NaN, are then recomputed by fp8_slow. */
#define WG_K 32
#define WG_NMAX 256

/* fp8 code -> m (significand), e (exponent, subnormals at the minimum), sign; *sp = 0 finite, 1 Inf,
   2 NaN (e4m3: S.1111.111 is NaN, no Inf; e5m2: IEEE). Inf and NaN have m = 0 (refsim's Terms). */
INLINE void dec8(uint32_t u, int e5, int32_t *m, int32_t *e, int32_t *s, int32_t *sp) {
    int32_t eb = e5 ? (int32_t)((u >> 2) & 31) : (int32_t)((u >> 3) & 15);
    int32_t f = e5 ? (int32_t)(u & 3) : (int32_t)(u & 7);
    int32_t fb = e5 ? 2 : 3, bias = e5 ? 15 : 7, top = e5 ? 31 : 15;
    *s = (int32_t)((u >> 7) & 1);
    *sp = e5 ? (eb == top ? (f ? 2 : 1) : 0) : ((eb == top && f == 7) ? 2 : 0);
    *m = *sp ? 0 : (eb ? (f | (1 << fb)) : f);
    *e = eb ? eb - bias : 1 - bias;
}

/* the value m 2^(e - frac) with its sign, as a float (exact: <= 4 significant bits, |e| < 20) */
INLINE float fp8_value(int32_t m, int32_t e, int32_t s, int e5) {
    union { uint32_t u; float f; } p = {(uint32_t)(e - (e5 ? 2 : 3) + 127) << 23};
    float v = (float)m * p.f;
    return s ? -v : v;
}

/* S * 2^(E - F) toward zero to 14 significant bits (normal exponents >= -126, quantum >= 2^-139),
   as fp32 bits; |value| >= 2^128 -> Inf; S == 0 -> +0, or -0 when negzero */
static uint32_t rz_e8m13(int64_t S, int32_t E, int F, int32_t negzero) {
    uint64_t mag = (uint64_t)(S < 0 ? -S : S);
    uint32_t sign = S < 0 ? 0x80000000u : 0u;
    if (!mag) return negzero ? 0x80000000u : 0u;
    int32_t nb = 63 - __builtin_clzll(mag), scale = E - F, ex = nb + scale;
    if (ex >= 128) return sign | 0x7F800000u;
    if (ex >= -126) {
        uint32_t m24 = (uint32_t)(nb >= 23 ? mag >> (nb - 23) : mag << (23 - nb));
        return sign | ((uint32_t)(ex + 127) << 23) | (m24 & 0x7FFC00u);
    }
    int32_t sh = scale + 139;                                /* quanta of 2^-139 */
    uint64_t q = sh >= 0 ? mag << sh : (-sh > 63 ? 0 : mag >> -sh);
    return q ? sign | (uint32_t)(q << 10) : (negzero ? 0x80000000u : 0u);
}

/* every fp8 code decoded once per format (dec8, fp8_value): the decode is a table lookup */
typedef struct { int32_t m[256], e[256], s[256], sp[256]; int16_t ez[256]; float v[256]; } fp8_table;
static fp8_table FP8_TABLES[2];
static int fp8_tables_ready;

static void fp8_tables(void) {
    for (int f = 0; f < 2; f++)
        for (int u = 0; u < 256; u++) {
            fp8_table *t = &FP8_TABLES[f];
            dec8((uint32_t)u, f, &t->m[u], &t->e[u], &t->s[u], &t->sp[u]);
            t->ez[u] = (int16_t)(t->m[u] ? t->e[u] : -30000);
            t->v[u] = fp8_value(t->m[u], t->e[u], t->s[u], f);
        }
    fp8_tables_ready = 1;
}

/* one output element with every special rule of fdpa_terms (Inf x 0 and NaN inputs -> NaN, Inf terms
   decide, +Inf with -Inf -> NaN; NaN is 0x7FFFFFFF), from the codes a[k] and b[k * stride] */
static uint32_t fp8_slow(int F, int e_zero, int fr, const fp8_table *ta, const uint8_t *a, const fp8_table *tb,
                         const uint8_t *b, int64_t stride, uint32_t cb) {
    int32_t cneg = (int32_t)(cb >> 31), ceb = (int32_t)((cb >> 23) & 255), cf = (int32_t)(cb & 0x7FFFFF);
    int32_t cinf = ceb == 255 && !cf, cnan = ceb == 255 && cf;
    int32_t cm = ceb == 255 ? 0 : (cf | (ceb ? 0x800000 : 0));
    int32_t ec = cm ? (ceb ? ceb - 127 : -126) : e_zero, E = ec, negzero = cneg & (cm == 0);
    int32_t pos = cinf & !cneg, neg = cinf & cneg, nan = cnan;
    for (int k = 0; k < WG_K; k++) {
        uint8_t u = a[k], w = b[k * stride];
        int32_t az = !ta->sp[u] && !ta->m[u], bz = !tb->sp[w] && !tb->m[w];
        int32_t pnan = ta->sp[u] == 2 || tb->sp[w] == 2 || (ta->sp[u] == 1 && bz) || (tb->sp[w] == 1 && az);
        int32_t pinf = (ta->sp[u] == 1 || tb->sp[w] == 1) && !pnan, sg = ta->s[u] ^ tb->s[w];
        nan |= pnan;
        pos |= pinf & !sg;
        neg |= pinf & sg;
        int32_t P = ta->m[u] * tb->m[w], ep = P ? ta->e[u] + tb->e[w] : e_zero;
        E = ep > E ? ep : E;
    }
    int64_t S = 0;
    int32_t Tc = shift_tz(cm, ec - E + F - 23);
    S += cneg ? -Tc : Tc;
    for (int k = 0; k < WG_K; k++) {
        uint8_t u = a[k], w = b[k * stride];
        int32_t P = ta->m[u] * tb->m[w], ep = P ? ta->e[u] + tb->e[w] : e_zero, sg = ta->s[u] ^ tb->s[w];
        int32_t T = shift_tz(P, ep - E + F - fr);
        S += sg ? -T : T;
        negzero &= (P == 0) & sg;
    }
    if (nan || (pos && neg)) return 0x7FFFFFFFu;
    if (pos) return 0x7F800000u;
    if (neg) return 0xFF800000u;
    return rz_e8m13(S, E, F, negzero);
}

/* fp32 bits of S 2^(E - F) toward zero to 14 significant bits for |S| < 2^24, when the result is a
   normal number or overflows (*slow = 1 when it is zero or subnormal: rz_e8m13 decides those). The
   float of S is exact; clearing its 10 low fraction bits is the truncation; the exponent moves by E - F. */
INLINE uint32_t rz_e8m13_fast(int32_t S, int32_t E, int F, int32_t *slow) {
    union { float f; uint32_t u; } v = {(float)S};
    int32_t ex = (int32_t)((v.u >> 23) & 255) - 127 + E - F;
    uint32_t sign = v.u & 0x80000000u, mag = (v.u & 0x7FFFFC00u) + ((uint32_t)(E - F) << 23);
    *slow = (S == 0) | (ex < -126);
    return sign | (ex >= 128 ? 0x7F800000u : mag);
}

void refsim_wgmma_fp8_f32(int T, int N, int a5, int b5, int F, int e_zero, const uint8_t *A, const uint8_t *Bt,
                          const uint32_t *C, uint32_t *D) {
    if (!fp8_tables_ready) fp8_tables();
    const fp8_table *ta = &FP8_TABLES[a5 ? 1 : 0], *tb = &FP8_TABLES[b5 ? 1 : 0];
    static int16_t bz[WG_K * WG_NMAX];       /* B's exponents, -30000 for a zero significand (k-major) */
    static float bv[WG_K * WG_NMAX];         /* B's exact values (0 for Inf/NaN) */
    static uint8_t bt[WG_K * WG_NMAX];       /* B's codes, k-major (the slow path) */
    int32_t colsp[WG_NMAX];
    int fr = (a5 ? 2 : 3) + (b5 ? 2 : 3);                     /* fraction bits of a product */
    for (int t = 0; t < T; t++) {
        const uint8_t *Bt_t = Bt + (int64_t)t * N * WG_K;
        for (int n = 0; n < N; n++) {
            colsp[n] = 0;
            for (int k = 0; k < WG_K; k++) {
                int64_t x = (int64_t)k * WG_NMAX + n;
                uint8_t u = Bt_t[n * WG_K + k];
                bt[x] = u; bz[x] = tb->ez[u]; bv[x] = tb->v[u];
                colsp[n] |= tb->sp[u];
            }
        }
        for (int i = 0; i < 64; i++) {
            const uint8_t *arow = A + ((int64_t)t * 64 + i) * WG_K;
            int32_t rowsp = 0;
            int16_t ae[WG_K];
            float av[WG_K];
            for (int k = 0; k < WG_K; k++) {
                ae[k] = ta->ez[arow[k]];             /* -30000: a zero significand, skipped below */
                av[k] = ta->v[arow[k]];
                rowsp |= ta->sp[arow[k]];
            }
            const uint32_t *c = C + ((int64_t)t * 64 + i) * N;
            uint32_t *d = D + ((int64_t)t * 64 + i) * N;
            /* every operand finite; k outer, n inner: the n loops are branch-free and vectorise.
               E = max(ec, e(a_k) + e(b_k) over the nonzero products) (zero products sit at e_zero,
               below every ec), in int16 (exponents lie in [-133, 128]). A term is
               P 2^(ep - E + F - fr) truncated toward zero, computed as the float product of the two
               exact fp8 values (<= 8 significant bits, exponent in [-32, 32]: exact) times 2^(F - E)
               (exact, or below 1 and then truncated to 0 either way), truncated by the int
               conversion; every term is an integer below 2^15 and every partial sum below 2^21, so
               the float steps are exact and S equals the integer sum. */
            int16_t Ev[WG_NMAX];
            int32_t Sv[WG_NMAX], Cm[WG_NMAX], Ce[WG_NMAX], Cn[WG_NMAX];
            float sc[WG_NMAX];
            for (int n = 0; n < N; n++) {
                uint32_t cb = c[n];
                int32_t cneg = (int32_t)(cb >> 31), ceb = (int32_t)((cb >> 23) & 255);
                int32_t cm = (int32_t)(cb & 0x7FFFFF) | (ceb ? 0x800000 : 0);
                int32_t ec = cm ? (ceb ? ceb - 127 : -126) : e_zero;
                Cm[n] = cm; Ce[n] = ec; Cn[n] = cneg; Ev[n] = (int16_t)ec;
            }
            for (int k = 0; k < WG_K; k++) {
                if (ae[k] < -1000) continue;
                const int16_t aek = ae[k], *bzk = bz + k * WG_NMAX;
                for (int n = 0; n < N; n++) {
                    int16_t ep = (int16_t)(aek + bzk[n]);          /* a zero B: below -29000 */
                    Ev[n] = ep > Ev[n] ? ep : Ev[n];
                }
            }
            for (int n = 0; n < N; n++) {
                int32_t E = Ev[n];
                int32_t Tc = shift_tz(Cm[n], Ce[n] - E + F - 23);
                Sv[n] = (Tc ^ -Cn[n]) + Cn[n];                       /* |S| < 33 * 2^16: int32 */
                int32_t x = F - (E > -100 ? E : -100);              /* all products zero: any finite scale */
                union { uint32_t u; float f; } v = {(uint32_t)(x + 127) << 23};
                sc[n] = v.f;
            }
            for (int k = 0; k < WG_K; k++) {
                if (ae[k] < -1000) continue;
                const float avk = av[k], *bvk = bv + k * WG_NMAX;
                for (int n = 0; n < N; n++) Sv[n] += (int32_t)(avk * bvk[n] * sc[n]);
            }
            int32_t slow[WG_NMAX], any_slow = 0;
            for (int n = 0; n < N; n++) {
                d[n] = rz_e8m13_fast(Sv[n], Ev[n], F, &slow[n]);
                any_slow |= slow[n] | rowsp | colsp[n] | (((c[n] >> 23) & 255) == 255);
            }
            for (int n = 0; any_slow && n < N; n++) {
                if (rowsp || colsp[n] || ((c[n] >> 23) & 255) == 255) {
                    d[n] = fp8_slow(F, e_zero, fr, ta, arow, tb, bt + n, WG_NMAX, c[n]);
                } else if (slow[n]) {                                /* zero or subnormal result */
                    int32_t negzero = 0;
                    if (Cn[n] && !Cm[n]) {                           /* -0 only if every product is -0 */
                        negzero = 1;
                        for (int k = 0; k < WG_K; k++) {
                            uint8_t u = arow[k], w = bt[k * WG_NMAX + n];
                            negzero &= (ta->m[u] == 0 || tb->m[w] == 0) & (ta->s[u] ^ tb->s[w]);
                        }
                    }
                    d[n] = rz_e8m13(Sv[n], Ev[n], F, negzero);
                }
            }
        }
    }
}

/* refsim native, part 2: fp16 fma chains of the GEMV emulators (Any-Precision, 2/4/16).
   Oracle: the NumPy paths of refsim.emulator.anyprec_kernel / mixed_2_4_16_kernel, which compute
   fma.rn.f16 as fp16(float64(a) * float64(b) + float64(c)) (refsim.arith.fp._f16_fma_fused) and
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
   - Inf stays; NaN becomes the canonical NaN 0x7FFF (refsim.arith.fp.CANONICAL_NAN: what NVIDIA GPUs
     write for every NaN result, whatever the operands' payloads), as the double 0x7FFFFC0000000000.
     The sign is put back last, except on NaN. */
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
    uint64_t nan = -(uint64_t)(a > INF);
    v.u = ((r | sgn) & ~nan) | (0x7FFFFC0000000000ull & nan);
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
   (chunks, 32, 16) the lanes' pair indices (inactive lanes: any index < K); ksplit == 1: one slice of
   every chunk; else ksplit slices of 4 chunks, combined by fp16 adds from +0. Returns 0, or 1 when
   the lane-order operand buffers cannot be allocated (out untouched). */
int refsim_anyprec_gemv(int M, int N, int K, int ksplit, int nlut, const uint8_t *codes, const uint16_t *lut,
                        const uint16_t *X, const int32_t *k0, const int32_t *k1, double *out) {
    int chunks = (K + 1023) / 1024, full = K / 1024, eff_tail = (K % 1024) / 32;
    int64_t per = (int64_t)chunks * 512;                     /* 16 steps x 32 lanes per chunk */
    double *xa = malloc(sizeof(double) * 2 * per * (M > 0 ? M : 1));
    double *wa = malloc(sizeof(double) * 2 * per);
    if (!xa || !wa) { free(xa); free(wa); return 1; }            /* nothing written: the caller raises */
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
                /* no K-split: one slice of every chunk; else slice z = chunks 4z .. 4z + 3 */
                int ibeg = ksplit > 1 ? z * 4 : 0;
                int iend = ksplit > 1 && (z + 1) * 4 < chunks ? (z + 1) * 4 : chunks;
                for (int i = ibeg; i < iend; i++) {
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
    return 0;
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
/* the canonical fp32 NaN 0x7FFFFFFF for every NaN result (refsim.arith.fp.CANONICAL_NAN), else x */
INLINE float canon32(float x) {
    union { uint32_t u; float f; } nan = {0x7FFFFFFFu};
    return x != x ? nan.f : x;
}

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
                    ar[n] = canon32((float)v.d);
                } else {
                    float p = cf * sf;
                    ar[n] = canon32(p + ar[n]);
                }
            }
        }
}

/* refsim native, part 3: integer mma, the compiled twin of refsim.arith.integer_mma.mma_int (the
   oracle; tests/native/test_emulators.py pins the two bit for bit). T instructions at once: A (T, M, K),
   B (T, K, N) hold s8/u8/s4/u4 values (int16: the range check is the caller's, as mma_int's _check_int),
   C (T, M, N) int32; D (T, M, N) gets the int32 results as bits. mma_int's order of operations:
       acc = int64(C) + (A @ B)            every product and the sum exact in int64 (|a b| <= 2^16)
       .satfinite:  clip(acc, -2^31, 2^31 - 1)
       else:        (acc + 2^31) mod 2^32 - 2^31     (wrap: two's complement; & is the floor mod here)
   then one step to int32, exact by then. D may not alias C. */
void refsim_mma_int(int T, int M, int N, int K, int satfinite, const int16_t *A, const int16_t *B,
                    const int32_t *C, uint32_t *D) {
    const int64_t lo = -2147483647LL - 1, hi = 2147483647LL, half = 2147483648LL;
    for (int t = 0; t < T; t++) {
        const int16_t *At = A + (int64_t)t * M * K, *Bt = B + (int64_t)t * K * N;
        const int32_t *Ct = C + (int64_t)t * M * N;
        uint32_t *Dt = D + (int64_t)t * M * N;
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                int64_t s = 0;                                   /* (A @ B)[i, j] */
                for (int k = 0; k < K; k++) s += (int64_t)At[(int64_t)i * K + k] * Bt[(int64_t)k * N + j];
                int64_t acc = (int64_t)Ct[(int64_t)i * N + j] + s;
                int64_t r = satfinite ? (acc < lo ? lo : (acc > hi ? hi : acc))
                                      : (int64_t)((uint64_t)(acc + half) & 0xFFFFFFFFull) - half;
                Dt[(int64_t)i * N + j] = (uint32_t)(int32_t)r;   /* r in [-2^31, 2^31): exact */
            }
    }
}

/* test hook: r16 over an array (the conversion checked against NumPy's float64 -> float16) */
void refsim_r16(int64_t n, const double *x, double *y) {
    for (int64_t i = 0; i < n; i++) y[i] = r16(x[i]);
}
