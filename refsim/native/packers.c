
/* refsim native packers. Oracles: refsim.formats.gptq.pack_stream/unpack_stream,
   refsim.formats.awq.pack_columns/unpack_columns, refsim.formats.marlin._pack_codes_numpy /
   unpermute_weights, refsim.formats.bitplane.pack/unpack (NumPy). Integer operations only. */
#include <stdint.h>
#include <string.h>
#ifdef __AVX2__
#include <immintrin.h>
#endif

#pragma GCC optimize("O3")   /* -O2's cost model does not vectorise loops that need alias checks */

/* q uint8 (K, N) -> words uint32 (K*bits/32, N): bit r*bits + b of a column's stream. Blocks of
   512 columns (the temporaries stay in L1). Fields are first joined into bytes on bytes (32 codes
   per AVX2 op, the range check ORs the same bytes), then 4 bytes (2/4/8 bits) or 16 six-bit
   pairs (3 bits) are shifted into their words, each word written once. */
static inline __attribute__((always_inline))
uint8_t pack_whole(const uint8_t *restrict q, int64_t K, int64_t N, const int bits, uint32_t *restrict out) {
    const int PER = 32 / bits;
    uint8_t seen = 0;             /* OR of every code: the range check, on bytes (32 per AVX2 op) */
    for (int64_t w = 0; w < K / PER; w++) {
        const uint8_t *restrict src = q + w * PER * N;
        uint32_t *restrict dst = out + w * N;
        for (int64_t b = 0; b < N; b += 512) {               /* blocks of columns stay in L1 */
            int64_t e = b + 512 < N ? b + 512 : N;
            uint8_t B[4][512];   /* byte j of the words: fields 4j/bits.. of a byte, on bytes (32 per op) */
            for (int j = 0; j < 4; j++)
                for (int64_t n = b; n < e; n++) {
                    uint8_t acc = 0;
                    for (int f = 0; f < 8 / bits; f++) {
                        uint8_t c = src[(j * (8 / bits) + f) * N + n];
                        seen |= c;
                        acc |= (uint8_t)(c << (f * bits));
                    }
                    B[j][n - b] = acc;
                }
            for (int64_t n = b; n < e; n++)
                dst[n] = (uint32_t)B[0][n - b] | (uint32_t)B[1][n - b] << 8
                       | (uint32_t)B[2][n - b] << 16 | (uint32_t)B[3][n - b] << 24;
        }
    }
    return seen;
}

/* returns 1 if some code is >= 2**bits (the words are then meaningless), else 0 */
int refsim_gptq_pack(const uint8_t *restrict q, int64_t K, int64_t N, int bits, uint32_t *restrict out) {
    uint8_t seen = 0, seen8 = 0;
    if (bits == 2) seen = pack_whole(q, K, N, 2, out);
    else if (bits == 4) seen = pack_whole(q, K, N, 4, out);
    else if (bits == 8) seen = pack_whole(q, K, N, 8, out);
    else {
    /* 3 bits: per period (32 rows -> 3 words) and block of columns, rows 2i and 2i+1 are first
       joined into one 6-bit byte (on bytes, 32 per op, with the range check), then the 16 bytes
       are shifted into the 3 words; bytes 5 and 10 straddle a word boundary */
    for (int64_t p = 0; p < K / 32; p++) {
        const uint8_t *restrict src = q + 32 * p * N;
        for (int64_t b = 0; b < N; b += 512) {
            int64_t e = b + 512 < N ? b + 512 : N;
            uint8_t P[16][512];
            for (int i = 0; i < 16; i++)
                for (int64_t n = b; n < e; n++) {
                    uint8_t c0 = src[2 * i * N + n], c1 = src[(2 * i + 1) * N + n];
                    seen8 |= c0 | c1;
                    P[i][n - b] = c0 | (uint8_t)(c1 << 3);
                }
            uint32_t *restrict d0 = out + 3 * p * N, *restrict d1 = d0 + N, *restrict d2 = d1 + N;
            for (int64_t n = b; n < e; n++) {
#define X(i) ((uint32_t)P[i][n - b])
                d0[n] = X(0) | X(1) << 6 | X(2) << 12 | X(3) << 18 | X(4) << 24 | X(5) << 30;
                d1[n] = X(5) >> 2 | X(6) << 4 | X(7) << 10 | X(8) << 16 | X(9) << 22 | X(10) << 28;
                d2[n] = X(10) >> 4 | X(11) << 2 | X(12) << 8 | X(13) << 14 | X(14) << 20 | X(15) << 26;
#undef X
            }
        }
    }
    }
    return ((seen | seen8) >> bits) != 0;
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
int refsim_awq_pack(const uint8_t *restrict q, int64_t R, int64_t N, uint32_t *restrict out) {
    int64_t total = R * (N / 8);
    uint64_t seen = 0;                                       /* OR of every 8 codes: the range check */
    int64_t j = 0;
#ifdef __AVX2__
    /* 4 words per step: each 8 codes reordered c0 c4 c1 c5 | c2 c6 c3 c7 (pshufb), then per 64-bit
       lane y | y >> 28 puts the high half's nibbles on top of the low half's (codes < 16), and the
       four low 32-bit halves are gathered into 16 bytes */
    const __m256i order = _mm256_setr_epi8(0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15,
                                           0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15);
    const __m256i lows = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
    __m256i seenv = _mm256_setzero_si256();
    for (; j + 4 <= total; j += 4) {
        __m256i x = _mm256_loadu_si256((const __m256i *)(q + 8 * j));
        seenv = _mm256_or_si256(seenv, x);
        __m256i y = _mm256_shuffle_epi8(x, order);
        y = _mm256_or_si256(y, _mm256_srli_epi64(y, 28));
        _mm_storeu_si128((__m128i *)(out + j), _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(y, lows)));
    }
    {
        uint64_t part[4];
        _mm256_storeu_si256((__m256i *)part, seenv);
        seen = part[0] | part[1] | part[2] | part[3];
    }
#endif
    for (; j < total; j++) {
        uint64_t x, e, o;
        memcpy(&x, q + 8 * j, 8);
        seen |= x;
        e = x & EVENS;         e = (e | (e >> 12)) & 0x000000FF000000FFull;  e = (e | (e >> 24)) & 0xFFFF;
        o = (x >> 8) & EVENS;  o = (o | (o >> 12)) & 0x000000FF000000FFull;  o = (o | (o >> 24)) & 0xFFFF;
        out[j] = (uint32_t)(e | (o << 16));
    }
    return (seen & 0xF0F0F0F0F0F0F0F0ull) != 0;             /* some code >= 16 */
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

/* Marlin: q uint8 (K, N) -> B uint32 (K/16, 2N), the closed form of refsim.formats.marlin: word
   B[kb, 128 nb + 4 lane + j], t = lane % 4, g = lane / 4, r = 16 kb + 2t, c = 64 nb + 16 j + g,
   nibbles 0..7 = Q[r,c] Q[r+8,c] Q[r,c+8] Q[r+8,c+8] Q[r+1,c] Q[r+9,c] Q[r+1,c+8] Q[r+9,c+8].
   Per 16 x 64 tile: the byte pairs X[t][p] = Q[2t,p] | Q[2t+8,p] << 4 and Y[t][p] = Q[2t+1,p] |
   Q[2t+9,p] << 4 (vectorised), then word (g, t, j) = X[t][c] X[t][c+8] Y[t][c] Y[t][c+8] as bytes
   0..3 (c = 16j + g, constant offsets once unrolled); output written in order. */
void refsim_marlin_pack(const uint8_t *restrict q, int64_t K, int64_t N, uint32_t *restrict out) {
    uint8_t X[4][64], Y[4][64];
    for (int64_t kb = 0; kb < K / 16; kb++)
        for (int64_t nb = 0; nb < N / 64; nb++) {
            const uint8_t *tile = q + 16 * kb * N + 64 * nb;
#ifdef __AVX2__
            /* per (t, j): 16 columns of the 4 rows; the (c, c+8) byte pairs interleaved to 16-bit,
               X pairs | Y pairs << 16 are the words g = 0..7; a 4 x 4 transpose over (j, g) puts
               the words of one g (t fixed, j = 0..3) side by side for one 16-byte store */
            uint32_t *restrict dst0 = out + kb * 2 * N + 128 * nb;
            for (int t = 0; t < 4; t++) {
                __m128i lo[4], hi[4];
                for (int j = 0; j < 4; j++) {
                    const uint8_t *c0 = tile + 2 * t * N + 16 * j;
                    __m128i x = _mm_or_si128(_mm_loadu_si128((const __m128i *)c0),
                                             _mm_slli_epi16(_mm_loadu_si128((const __m128i *)(c0 + 8 * N)), 4));
                    __m128i y = _mm_or_si128(_mm_loadu_si128((const __m128i *)(c0 + N)),
                                             _mm_slli_epi16(_mm_loadu_si128((const __m128i *)(c0 + 9 * N)), 4));
                    x = _mm_unpacklo_epi8(x, _mm_srli_si128(x, 8));
                    y = _mm_unpacklo_epi8(y, _mm_srli_si128(y, 8));
                    lo[j] = _mm_unpacklo_epi16(x, y);
                    hi[j] = _mm_unpackhi_epi16(x, y);
                }
                for (int h = 0; h < 2; h++) {
                    __m128i *m = h ? hi : lo;
                    __m128i a = _mm_unpacklo_epi32(m[0], m[1]), b2 = _mm_unpackhi_epi32(m[0], m[1]);
                    __m128i c = _mm_unpacklo_epi32(m[2], m[3]), d = _mm_unpackhi_epi32(m[2], m[3]);
                    __m128i r[4] = {_mm_unpacklo_epi64(a, c), _mm_unpackhi_epi64(a, c),
                                    _mm_unpacklo_epi64(b2, d), _mm_unpackhi_epi64(b2, d)};
                    for (int g = 0; g < 4; g++)
                        _mm_storeu_si128((__m128i *)(dst0 + 16 * (4 * h + g) + 4 * t), r[g]);
                }
            }
            continue;
#endif
            for (int t = 0; t < 4; t++)
                for (int p = 0; p < 64; p++) {
                    X[t][p] = tile[2 * t * N + p] | (uint8_t)(tile[(2 * t + 8) * N + p] << 4);
                    Y[t][p] = tile[(2 * t + 1) * N + p] | (uint8_t)(tile[(2 * t + 9) * N + p] << 4);
                }
            uint32_t *restrict dst = out + kb * 2 * N + 128 * nb;
            for (int g = 0; g < 8; g++)
                for (int t = 0; t < 4; t++)
                    for (int j = 0; j < 4; j++) {
                        int c = 16 * j + g;
                        dst[16 * g + 4 * t + j] = (uint32_t)X[t][c] | (uint32_t)X[t][c + 8] << 8
                                                | (uint32_t)Y[t][c] << 16 | (uint32_t)Y[t][c + 8] << 24;
                    }
        }
}

/* the inverse: words to the byte pairs X, Y of a tile, then the nibbles to their rows */
void refsim_marlin_unpack(const uint32_t *restrict b, int64_t K, int64_t N, uint8_t *restrict q) {
    uint8_t X[4][64], Y[4][64];
    for (int64_t kb = 0; kb < K / 16; kb++)
        for (int64_t nb = 0; nb < N / 64; nb++) {
            const uint32_t *restrict src = b + kb * 2 * N + 128 * nb;
#ifdef __AVX2__
            uint8_t *tile0 = q + 16 * kb * N + 64 * nb;
            const __m128i low16 = _mm_set1_epi32(0xFFFF), nib = _mm_set1_epi8(15);
            const __m128i split = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
            for (int t = 0; t < 4; t++) {
                __m128i m[2][4];
                for (int h = 0; h < 2; h++) {      /* the 4 x 4 transpose back: (g, j) -> (j, g) */
                    __m128i r[4];
                    for (int g = 0; g < 4; g++) r[g] = _mm_loadu_si128((const __m128i *)(src + 16 * (4 * h + g) + 4 * t));
                    __m128i a = _mm_unpacklo_epi32(r[0], r[1]), b2 = _mm_unpackhi_epi32(r[0], r[1]);
                    __m128i c = _mm_unpacklo_epi32(r[2], r[3]), d = _mm_unpackhi_epi32(r[2], r[3]);
                    m[h][0] = _mm_unpacklo_epi64(a, c); m[h][1] = _mm_unpackhi_epi64(a, c);
                    m[h][2] = _mm_unpacklo_epi64(b2, d); m[h][3] = _mm_unpackhi_epi64(b2, d);
                }
                for (int j = 0; j < 4; j++) {
                    __m128i x = _mm_packus_epi32(_mm_and_si128(m[0][j], low16), _mm_and_si128(m[1][j], low16));
                    __m128i y = _mm_packus_epi32(_mm_srli_epi32(m[0][j], 16), _mm_srli_epi32(m[1][j], 16));
                    x = _mm_shuffle_epi8(x, split);          /* (c, c+8) pairs -> columns c..c+15 */
                    y = _mm_shuffle_epi8(y, split);
                    uint8_t *c0 = tile0 + 2 * t * N + 16 * j;
                    _mm_storeu_si128((__m128i *)c0, _mm_and_si128(x, nib));
                    _mm_storeu_si128((__m128i *)(c0 + 8 * N), _mm_and_si128(_mm_srli_epi16(x, 4), nib));
                    _mm_storeu_si128((__m128i *)(c0 + N), _mm_and_si128(y, nib));
                    _mm_storeu_si128((__m128i *)(c0 + 9 * N), _mm_and_si128(_mm_srli_epi16(y, 4), nib));
                }
            }
            continue;
#endif
            for (int g = 0; g < 8; g++)
                for (int t = 0; t < 4; t++)
                    for (int j = 0; j < 4; j++) {
                        int c = 16 * j + g;
                        uint32_t w = src[16 * g + 4 * t + j];
                        X[t][c] = (uint8_t)w;          X[t][c + 8] = (uint8_t)(w >> 8);
                        Y[t][c] = (uint8_t)(w >> 16);  Y[t][c + 8] = (uint8_t)(w >> 24);
                    }
            uint8_t *tile = q + 16 * kb * N + 64 * nb;
            for (int t = 0; t < 4; t++)
                for (int p = 0; p < 64; p++) {
                    tile[2 * t * N + p] = X[t][p] & 15;        tile[(2 * t + 8) * N + p] = X[t][p] >> 4;
                    tile[(2 * t + 1) * N + p] = Y[t][p] & 15;  tile[(2 * t + 9) * N + p] = Y[t][p] >> 4;
                }
        }
}

/* Any-Precision bitplanes: codes uint8 (N, K) -> planes uint32 (P, N, K/32), plane j = code bit
   P-1-j. Word (row, 32 i + t) holds weights 1024 i + 8 eff q + 8 t + e (q = 0..3, e = 0..7) at bit
   31 - 8q - e, eff = 32 lanes (the tail chunk: (K % 1024) / 32). The 8 weights of one (q, t) are
   8 contiguous bytes x; bit s of each byte e is gathered into bit 7 - e of one byte by
       ((x >> s) & 0x0101010101010101) * 0x8040201008040201 >> 56
   (the 64 partial products land on distinct bits, so no carry reaches the top byte). */
#define LSB8 0x0101010101010101ull
static inline __attribute__((always_inline))
void bitplane_pack(const uint8_t *restrict codes, int64_t N, int64_t K, const int P, uint32_t *restrict out) {
    int64_t KW = K / 32, plane = N * KW;
    for (int64_t r = 0; r < N; r++) {
        const uint8_t *row = codes + r * K;
        for (int64_t i = 0; i * 1024 < K; i++) {
            int64_t eff = (K - 1024 * i) >= 1024 ? 32 : (K - 1024 * i) / 32;
            int64_t t = 0;
#ifdef __AVX2__
            /* four lanes t at once: 32 bytes of each group q, bytes of each 8 reversed (pshufb),
               a 4 x 4 transpose of the 64-bit pieces gives one vector per t as in the loop below */
            const __m256i rev = _mm256_setr_epi8(7, 6, 5, 4, 3, 2, 1, 0, 15, 14, 13, 12, 11, 10, 9, 8,
                                                 7, 6, 5, 4, 3, 2, 1, 0, 15, 14, 13, 12, 11, 10, 9, 8);
            for (; t + 4 <= eff; t += 4) {
                const uint8_t *base = row + 1024 * i + 8 * t;
                __m256i A = _mm256_shuffle_epi8(_mm256_loadu_si256((const __m256i *)(base + 24 * eff)), rev);
                __m256i Bv = _mm256_shuffle_epi8(_mm256_loadu_si256((const __m256i *)(base + 16 * eff)), rev);
                __m256i C = _mm256_shuffle_epi8(_mm256_loadu_si256((const __m256i *)(base + 8 * eff)), rev);
                __m256i D = _mm256_shuffle_epi8(_mm256_loadu_si256((const __m256i *)base), rev);
                __m256i T0 = _mm256_unpacklo_epi64(A, Bv), T2 = _mm256_unpacklo_epi64(C, D);
                __m256i T1 = _mm256_unpackhi_epi64(A, Bv), T3 = _mm256_unpackhi_epi64(C, D);
                __m256i v[4] = {_mm256_permute2x128_si256(T0, T2, 0x20), _mm256_permute2x128_si256(T1, T3, 0x20),
                                _mm256_permute2x128_si256(T0, T2, 0x31), _mm256_permute2x128_si256(T1, T3, 0x31)};
                uint32_t *dst = out + r * KW + 32 * i + t;
                for (int u = 0; u < 4; u++) {          /* code bit P-1 to the top, then one bit per add */
                    __m256i x = _mm256_slli_epi16(v[u], 8 - P);
                    for (int j = 0; j < P; j++) {
                        dst[j * plane + u] = (uint32_t)_mm256_movemask_epi8(x);
                        x = _mm256_add_epi8(x, x);
                    }
                }
            }
#endif
            for (; t < eff; t++) {
                uint64_t x[4];
                for (int q = 0; q < 4; q++) memcpy(&x[q], row + 1024 * i + 8 * eff * q + 8 * t, 8);
                uint32_t *dst = out + r * KW + 32 * i + t;
#ifdef __AVX2__
                /* byte-reversed groups, group q in 64-bit lane 3 - q: weight (q, e) sits in byte
                   31 - 8q - e, and movemask of the bytes shifted so that bit s is on top is the word */
                __m256i v = _mm256_set_epi64x((long long)__builtin_bswap64(x[0]), (long long)__builtin_bswap64(x[1]),
                                              (long long)__builtin_bswap64(x[2]), (long long)__builtin_bswap64(x[3]));
                for (int j = 0; j < P; j++)
                    dst[j * plane] = (uint32_t)_mm256_movemask_epi8(
                        _mm256_sll_epi16(v, _mm_cvtsi32_si128(7 - (P - 1 - j))));
                continue;
#endif
                for (int j = 0; j < P; j++) {
                    int s = P - 1 - j;
                    uint32_t w = 0;
                    for (int q = 0; q < 4; q++)
                        w |= (uint32_t)((((x[q] >> s) & LSB8) * 0x8040201008040201ull) >> 56) << (24 - 8 * q);
                    dst[j * plane] = w;
                }
            }
        }
    }
}

/* P as a compile-time constant: the plane loops unroll, the shift counts become immediates */
void refsim_bitplane_pack(const uint8_t *restrict codes, int64_t N, int64_t K, int P, uint32_t *restrict out) {
    switch (P) {
    case 3: bitplane_pack(codes, N, K, 3, out); break;
    case 4: bitplane_pack(codes, N, K, 4, out); break;
    case 5: bitplane_pack(codes, N, K, 5, out); break;
    case 6: bitplane_pack(codes, N, K, 6, out); break;
    case 7: bitplane_pack(codes, N, K, 7, out); break;
    default: bitplane_pack(codes, N, K, 8, out); break;       /* callers pass 3..8 */
    }
}

/* the inverse for the first B planes: code = OR_j bit(j) << (B-1-j); a byte's 8 bits are spread to
   8 bytes (bit 7 - e -> bit 0 of byte e) through a 256-entry table */
static uint64_t spread[256];
static inline __attribute__((always_inline))
void bitplane_unpack(const uint32_t *restrict planes, int64_t N, int64_t K, const int B, uint8_t *restrict codes) {
    int64_t KW = K / 32, plane = N * KW;
    for (int64_t r = 0; r < N; r++) {
        uint8_t *row = codes + r * K;
        for (int64_t i = 0; i * 1024 < K; i++) {
            int64_t eff = (K - 1024 * i) >= 1024 ? 32 : (K - 1024 * i) / 32;
            for (int64_t t = 0; t < eff; t++) {
                const uint32_t *src = planes + r * KW + 32 * i + t;
#ifdef __AVX2__
                /* byte k = 8q + e of the result tests bit 7 - e of word byte 3 - q, for every plane */
                const __m256i pick = _mm256_setr_epi8(3,3,3,3,3,3,3,3, 2,2,2,2,2,2,2,2,    /* in-lane indices: */
                                                      1,1,1,1,1,1,1,1, 0,0,0,0,0,0,0,0);   /* every dword is w */
                const __m256i bit = _mm256_set1_epi64x((long long)0x0102040810204080ull);
                __m256i acc = _mm256_setzero_si256();
                for (int j = 0; j < B; j++) {
                    __m256i w = _mm256_shuffle_epi8(_mm256_set1_epi32((int)src[j * plane]), pick);
                    __m256i on = _mm256_cmpeq_epi8(_mm256_and_si256(w, bit), bit);
                    acc = _mm256_or_si256(acc, _mm256_and_si256(on, _mm256_set1_epi8((char)(1 << (B - 1 - j)))));
                }
                uint64_t y[4];
                _mm256_storeu_si256((__m256i *)y, acc);
                for (int q = 0; q < 4; q++) memcpy(row + 1024 * i + 8 * eff * q + 8 * t, &y[q], 8);
                continue;
#endif
                uint64_t x[4] = {0, 0, 0, 0};
                for (int j = 0; j < B; j++) {
                    uint32_t w = src[j * plane];
                    for (int q = 0; q < 4; q++) x[q] |= spread[(w >> (24 - 8 * q)) & 255] << (B - 1 - j);
                }
                for (int q = 0; q < 4; q++) memcpy(row + 1024 * i + 8 * eff * q + 8 * t, &x[q], 8);
            }
        }
    }
}

void refsim_bitplane_unpack(const uint32_t *restrict planes, int64_t N, int64_t K, int B, uint8_t *restrict codes) {
    static int ready = 0;
    if (!ready) {                 /* idempotent: racing callers write the same values */
        for (int v = 0; v < 256; v++) {
            uint64_t x = 0;
            for (int e = 0; e < 8; e++) x |= (uint64_t)((v >> (7 - e)) & 1) << (8 * e);
            spread[v] = x;
        }
        ready = 1;
    }
    switch (B) {                  /* B as a compile-time constant, as for the pack */
    case 3: bitplane_unpack(planes, N, K, 3, codes); break;
    case 4: bitplane_unpack(planes, N, K, 4, codes); break;
    case 5: bitplane_unpack(planes, N, K, 5, codes); break;
    case 6: bitplane_unpack(planes, N, K, 6, codes); break;
    case 7: bitplane_unpack(planes, N, K, 7, codes); break;
    default: bitplane_unpack(planes, N, K, 8, codes); break;  /* callers pass 3..8 */
    }
}
