/* refsim native, PTX runtime part 3 of 4: warp-wide instructions: the full-warp rule, poison checks
   over whole warps, ldmatrix, and mma (the integer T-FDPA model of refsim.arith.tensor_core, exact
   integer mma, and emulators.c's refsim_mma_k16_f32 for finite f32-accumulating k16 steps). */

/* ============================================================================================
   warp-wide instructions: full-warp rule, poison checks over whole warps, ldmatrix, mma */

/* mma / ldmatrix are .aligned: every lane of each warp in th must execute them */
static int rt_partial_warp(rt_state *S, int32_t code, int32_t ins, const int32_t *th, int32_t n) {
    int32_t i = 0;
    while (i < n) {
        int64_t w = th[i] >> 5;
        int32_t j = i;
        while (j < n && (th[j] >> 5) == w) j++;
        if (j - i != 32) {
            S->err_ins = ins;
            return code;
        }
        i = j;
    }
    return 0;
}

/* poison: Launch._reader's check, first unwritten thread in th order */
static int rt_check_init(rt_state *S, int32_t ins, int32_t slot, const int32_t *th, int32_t n) {
    const uint8_t *init = S->reg_init[slot];
    for (int32_t i = 0; i < n; i++)
        if (!init[th[i]]) {
            S->err_ins = ins;
            S->err_aux = slot;
            S->err_thread = th[i];
            return E_UNINIT_REG;
        }
    return 0;
}

/* the same over every lane of the warps in th (warp-level readers read whole warps) */
static int rt_check_init_warps(rt_state *S, int32_t ins, int32_t slot, const int32_t *th, int32_t n) {
    const uint8_t *init = S->reg_init[slot];
    int64_t last = -1;
    for (int32_t i = 0; i < n; i++) {
        int64_t w = th[i] >> 5;
        if (w == last) continue;
        last = w;
        for (int64_t t = w * 32; t < w * 32 + 32; t++)
            if (!init[t]) {
                S->err_ins = ins;
                S->err_aux = slot;
                S->err_thread = t;
                return E_UNINIT_REG;
            }
    }
    return 0;
}

/* ldmatrix.sync.aligned.m8n8.x{num}{.trans}.b16, the address and data movement (Launch's
   memory_ops.ldmatrix); the rules are tables the translator emits from Python: rl[8 i + r] = the lane
   whose address gives row r of matrix i (refsim.ptx.semantics.warp.ldmatrix_row_lanes), and
   lay[(l num + j) 2 + h] = the element (matrix 64 + row 8 + col) half h of register j of lane l receives
   (refsim.arith.fragments.ldmatrix_layout, .trans included). th holds whole warps; addr the row
   addresses in rl order, 8 num per warp; out gets register j of lane l of warp w at out[(w 32 + l) num + j]. */
static int rt_ldmatrix(rt_state *S, const rt_mem *m, int32_t num, const int16_t *rl, const int16_t *lay,
                       const int32_t *th, int32_t n, const uint64_t *addr, uint32_t *out) {
    int32_t W = n / 32, rows = 8 * num;
    int32_t *src = S->act2;
    for (int32_t w = 0; w < W; w++)
        for (int32_t l = 0; l < rows; l++) src[w * rows + l] = th[w * 32 + rl[l]];
    rt_access *acc = access_buf(S);
    int r = resolve(S, m->ins, m->space, src, W * rows, addr, 16, acc);
    if (r) return r;
    int has_shared = 0;
    for (int32_t i = 0; i < W * rows; i++) has_shared |= acc[i].kind == SP_SHARED;
    if (has_shared) {
        if (S->race && (r = race_read(S, m->ins, src, W * rows, acc, 16))) return r;
        if (S->poison)
            for (int32_t i = 0; i < W * rows; i++)
                if (acc[i].kind == SP_SHARED)
                    for (int b = 0; b < 16; b++)
                        if (!S->shared_init[acc[i].flat + b]) {
                            S->err_ins = m->ins;
                            return E_UNINIT_SHARED_NOWHO;
                        }
        S->shared_wavefronts += (int64_t)W * num;
        S->shared_requests += W;
    }
    for (int32_t w = 0; w < W; w++) {
        uint16_t M[4 * 64];
        for (int32_t k = 0; k < rows; k++) memcpy(M + 8 * k, acc[w * rows + k].ptr, 16);
        for (int32_t k = 0; k < 32 * num; k++)
            out[w * 32 * num + k] = (uint32_t)M[lay[2 * k]] | ((uint32_t)M[lay[2 * k + 1]] << 16);
    }
    return 0;
}

/* ---- the T-FDPA model (refsim.arith.tensor_core._fdpa_core), one output at a time, integers only */

static int64_t tc_shift(int64_t x, int64_t s) {
    if (s >= 0) return x << (s > 62 ? 62 : s);
    return -s > 63 ? 0 : x >> -s;
}

/* S * 2^scale (S != 0) rounded once to the output format: fp32 toward zero, fp16 to nearest even
   (tensor_core._round_out), returned as bits with S's sign; a sum rounded to zero is +0 (the
   model's zero rule: -0 only when every term is a negative zero, which makes S == 0) */
static uint32_t tc_round_out(int64_t Sv, int64_t scale, int out_f32) {
    uint64_t mag = (uint64_t)(Sv < 0 ? -Sv : Sv);
    int64_t ex = rt_bitlen64(mag) - 1 + scale;
    int64_t q = out_f32 ? (ex > -126 ? ex : -126) - 23 : (ex > -14 ? ex : -14) - 10;
    int64_t r = q - scale;
    r = r < 0 ? 0 : (r > 60 ? 60 : r);
    uint64_t kept = mag >> r;
    if (!out_f32 && r > 0) {
        uint64_t rem = mag - (kept << r), half = 1ull << (r - 1);
        if (rem > half || (rem == half && (kept & 1))) kept++;
    }
    int64_t e2 = scale + r;
    uint32_t sign = Sv < 0 ? (out_f32 ? 0x80000000u : 0x8000u) : 0;
    if (!kept) return 0;
    int64_t nb = rt_bitlen64(kept), lead = nb - 1 + e2;
    if (out_f32) {
        if (lead >= 128) return sign | 0x7F800000u;
        if (lead >= -126) return sign | ((uint32_t)(lead + 127) << 23) | ((uint32_t)(kept << (24 - nb)) & 0x7FFFFFu);
        return sign | (uint32_t)(kept << (e2 + 149));
    }
    if (lead >= 16) return sign | 0x7C00u;
    if (lead >= -14) return sign | ((uint32_t)(lead + 15) << 10) | ((uint32_t)(kept << (11 - nb)) & 0x3FFu);
    return sign | (uint32_t)(kept << (e2 + 24));
}

typedef struct { int64_t m; int32_t e, neg, special, frac_nz; } tc_dec;

/* IEEE bits with `eb` exponent and `fb` fraction bits -> (m, e, sign, Inf/NaN, fraction nonzero),
   |x| = m * 2^(e - fb); subnormals take the minimum exponent, Inf/NaN get m = 0 */
static tc_dec tc_decode(uint32_t u, int eb_bits, int fb) {
    tc_dec d;
    int32_t top = (1 << eb_bits) - 1, bias = top >> 1;
    int32_t eb = (int32_t)((u >> fb) & (uint32_t)top), f = (int32_t)(u & ((1u << fb) - 1));
    d.special = eb == top;
    d.frac_nz = f != 0;
    d.m = d.special ? 0 : (eb ? (f | (1 << fb)) : f);
    d.e = eb ? eb - bias : 1 - bias;
    d.neg = (u >> (eb_bits + fb)) & 1;
    return d;
}

static tc_dec tc_dec16(uint16_t u) { return tc_decode(u, 5, 10); }
static tc_dec tc_dec32(uint32_t u) { return tc_decode(u, 8, 23); }

/* one hardware block: d = rho(c + sum_{i<L} a_i b_i); a, b decoded fp16 (stride sa, sb) */
static uint32_t tc_fdpa(int L, int F, int e_zero, const tc_dec *a, int sa, const tc_dec *b, int sb, uint32_t cbits,
                        int c_f32, int out_f32) {
    tc_dec c = c_f32 ? tc_dec32(cbits) : tc_dec16((uint16_t)cbits);
    int cfrac = c_f32 ? 23 : 10;
    int64_t ep[16], P[16];
    int pn[16];
    int64_t ec = c.m == 0 ? e_zero : c.e, E = ec;
    int special = c.special;
    for (int i = 0; i < L; i++) {
        const tc_dec *x = &a[i * sa], *y = &b[i * sb];
        P[i] = x->m * y->m;
        pn[i] = x->neg ^ y->neg;
        ep[i] = P[i] == 0 ? e_zero : x->e + y->e;
        E = ep[i] > E ? ep[i] : E;
        special |= x->special | y->special;
    }
    int64_t Sv = 0;
    for (int i = 0; i < L; i++) {
        int64_t T = tc_shift(P[i], ep[i] - E + F - 20);
        Sv += pn[i] ? -T : T;
    }
    int64_t Tc = tc_shift(c.m, ec - E + F - cfrac);
    Sv += c.neg ? -Tc : Tc;
    uint32_t res;
    if (Sv == 0) {
        int negzero = c.neg && c.m == 0;
        for (int i = 0; i < L; i++) negzero &= pn[i] && P[i] == 0;
        res = negzero ? (out_f32 ? 0x80000000u : 0x8000u) : 0;
    } else {
        res = tc_round_out(Sv, E - F, out_f32);
    }
    if (!special) return res;
    int nan = c.special && c.frac_nz, pos_inf = c.special && !c.frac_nz && !c.neg, neg_inf = c.special && !c.frac_nz && c.neg;
    for (int i = 0; i < L; i++) {
        const tc_dec *x = &a[i * sa], *y = &b[i * sb];
        int xn = x->special && x->frac_nz, yn = y->special && y->frac_nz;
        int xi = x->special && !xn, yi = y->special && !yn;
        int xz = !x->special && x->m == 0, yz = !y->special && y->m == 0;
        int pnan = xn || yn || (xi && yz) || (yi && xz);
        int pinf = (xi || yi) && !pnan;
        nan |= pnan;
        pos_inf |= pinf && !pn[i];
        neg_inf |= pinf && pn[i];
    }
    nan |= pos_inf && neg_inf;
    if (pos_inf) res = out_f32 ? 0x7F800000u : 0x7C00u;
    if (neg_inf) res = out_f32 ? 0xFF800000u : 0xFC00u;
    if (nan) res = out_f32 ? 0x7FFFFFFFu : 0x7FFFu;
    return res;
}

/* every fp16 of A and B and every fp32 of C finite (no exponent field of all ones) */
static int mma_finite(const uint32_t *A, int na, const uint32_t *B, int nb, const uint32_t *C, int nc) {
    uint32_t bad = 0;
    for (int i = 0; i < na; i++) bad |= (A[i] & 0x7C00u) == 0x7C00u;
    for (int i = 0; i < nb; i++) bad |= (B[i] & 0x7C00u) == 0x7C00u;
    for (int i = 0; i < nc; i++) bad |= (C[i] & 0x7F800000u) == 0x7F800000u;
    return !bad;
}

/* a warp's fragment registers (regs[l * nreg + j], lane-major) -> the matrix: element i of lane l is
   in register i / per_reg, lowest bits first, and goes to M[at[l * per_lane + i]] */
static void frag_scatter(uint32_t *M, const int16_t *at, const uint32_t *regs, int nreg, int per_lane, int per_reg,
                         int bits) {
    if (per_reg == 1) {
        for (int q = 0; q < 32 * per_lane; q++) M[at[q]] = regs[q];
        return;
    }
    if (per_reg == 2) {
        for (int q = 0; q < 32 * nreg; q++) {
            M[at[2 * q]] = regs[q] & 0xFFFFu;
            M[at[2 * q + 1]] = regs[q] >> 16;
        }
        return;
    }
    uint32_t mask = (1u << bits) - 1;
    for (int q = 0; q < 32 * nreg; q++)
        for (int e = 0; e < per_reg; e++) M[at[q * per_reg + e]] = (regs[q] >> (bits * e)) & mask;
}

static int64_t int_elem(uint32_t v, int bits, int sgn) {
    if (!sgn) return v;
    return (int64_t)(v ^ (1u << (bits - 1))) - (1 << (bits - 1));
}

/* mma.sync.aligned (refsim.ptx.semantics.warp._build_mma): th holds whole warps; a, b, c the
   registers of every lane, lane-major (a[(w * 32 + l) * na + j]); out likewise with nd */
static int rt_mma_run(rt_state *S, const rt_mma *d, const int32_t *th __attribute__((unused)), int32_t n, const uint32_t *a, const uint32_t *b,
                  const uint32_t *c, uint32_t *out) {
    int32_t W = n / 32, M = d->M, N = d->N, K = d->K;
    int ea = M * K / 32, eb = K * N / 32, ec = M * N / 32;      /* elements per lane */
    int L = (int)S->tc_L, F = (int)S->tc_F;
    for (int32_t w = 0; w < W; w++) {
        uint32_t Abits[16 * 64], Bbits[64 * 8], Cbits[16 * 8], Dbits[16 * 8];
        const uint32_t *ra = a + (int64_t)w * 32 * d->na, *rb = b + (int64_t)w * 32 * d->nb;
        const uint32_t *rc = c + (int64_t)w * 32 * d->nc;
        frag_scatter(Abits, d->a_at, ra, d->na, ea, d->a_per_reg, d->a_bits);
        frag_scatter(Bbits, d->b_at, rb, d->nb, eb, d->b_per_reg, d->b_bits);
        frag_scatter(Cbits, d->c_at, rc, d->nc, ec, d->c_per_reg, d->c_per_reg == 1 ? 32 : 16);
        if (d->kind == 0 && d->c_f32 && d->d_f32 && K == 16 && mma_finite(Abits, M * K, Bbits, K * N, Cbits, M * N)) {
            /* finite f16 inputs, f32 accumulators, one k16 step: the interpreter's fast path
               (mma_steps.mma_k16_f32), whose compiled twin is emulators.c's refsim_mma_k16_f32 */
            uint16_t a16[16 * 16], b16[16 * 8];
            int64_t k0 = 0;
            for (int i = 0; i < M * K; i++) a16[i] = (uint16_t)Abits[i];
            for (int i = 0; i < K * N; i++) b16[i] = (uint16_t)Bbits[i];
            memcpy(Dbits, Cbits, sizeof(uint32_t) * M * N);
            refsim_mma_k16_f32(L, F, (int)S->tc_ez32, 1, M, N, a16, K, b16, N, &k0, (float *)Dbits);
        } else if (d->kind == 0) {
            tc_dec A[16 * 16], B[16 * 8];
            for (int i = 0; i < M * K; i++) A[i] = tc_dec16((uint16_t)Abits[i]);
            for (int i = 0; i < K * N; i++) B[i] = tc_dec16((uint16_t)Bbits[i]);
            int blk = K < L ? K : L;
            for (int i = 0; i < M; i++)
                for (int j = 0; j < N; j++) {
                    uint32_t acc = Cbits[i * N + j];
                    int cf = d->c_f32;
                    for (int k0 = 0; k0 < K; k0 += blk) {
                        acc = tc_fdpa(blk, F, d->d_f32 ? (int)S->tc_ez32 : (int)S->tc_ez16, &A[i * K + k0], 1,
                                      &B[k0 * N + j], N, acc, cf, d->d_f32);
                        cf = d->d_f32;
                    }
                    Dbits[i * N + j] = acc;
                }
        } else {
            for (int i = 0; i < M; i++)
                for (int j = 0; j < N; j++) {
                    int64_t s = (int64_t)(int32_t)Cbits[i * N + j];
                    for (int k = 0; k < K; k++)
                        s += int_elem(Abits[i * K + k], d->a_bits, d->a_signed) * int_elem(Bbits[k * N + j], d->b_bits, d->b_signed);
                    if (d->satfinite) s = s < INT32_MIN ? INT32_MIN : (s > INT32_MAX ? INT32_MAX : s);
                    Dbits[i * N + j] = (uint32_t)(uint64_t)s;
                }
        }
        uint32_t *ro = out + (int64_t)w * 32 * d->nd;
        if (d->d_per_reg == 1) {
            for (int q = 0; q < 32 * ec; q++) ro[q] = Dbits[d->c_at[q]];
        } else {
            for (int q = 0; q < 32 * d->nd; q++) ro[q] = 0;
            for (int q = 0; q < 32 * ec; q++) ro[(q / ec) * d->nd + (q % ec) / 2] |= (Dbits[d->c_at[q]] & 0xFFFFu) << (16 * (q % 2));
        }
    }
    return 0;
}
