/* refsim native, PTX runtime part 3 of 4: warp-wide instructions: the full-warp rule, poison checks
   over whole warps, ldmatrix, and mma through its declared compiled twins (emulators.c's
   refsim_mma_k16_f32 for finite f16 x f16 + f32 k16 steps, refsim_mma_int for the integer forms; every
   other mma step runs the interpreter's handler in Python). */

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

/* ---- mma: the compiled twins, or Python

   Two kinds of mma reach C (refsim.ptx.compiled.instructions emits a callback for every other form):
   - RT_MMA_F16_F32, mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32: only its steps whose A, B and C
     are all finite compute here: they are one k16 step of refsim.arith.mma_steps.mma_k16_f32, whose
     declared compiled twin is emulators.c's refsim_mma_k16_f32. Any other step returns RT_CALLBACK
     before writing anything, and the interpreter's handler (refsim.ptx.semantics.warp._build_mma) runs it.
   - RT_MMA_INT, the integer forms (s8/u8 m16n8k16/k32, s4/u4 m16n8k32/k64 -> s32, wrap or .satfinite):
     every step is refsim.arith.integer_mma.mma_int, whose declared compiled twin is emulators.c's
     refsim_mma_int.
   tests/native/test_emulators.py pins each twin to its oracle bit for bit. This file only moves register
   elements into matrices (the fragment layouts arrive as data): it holds no tensor-core arithmetic. */

/* every fp16 of the A and B registers (two per register) and every fp32 of the C registers finite
   (no exponent field of all ones); the fragments hold each matrix element exactly once */
static int mma_finite(const uint32_t *A, int64_t na, const uint32_t *B, int64_t nb, const uint32_t *C, int64_t nc) {
    uint32_t bad = 0;
    for (int64_t i = 0; i < na; i++) bad |= ((A[i] & 0x7C00u) == 0x7C00u) | ((A[i] & 0x7C000000u) == 0x7C000000u);
    for (int64_t i = 0; i < nb; i++) bad |= ((B[i] & 0x7C00u) == 0x7C00u) | ((B[i] & 0x7C000000u) == 0x7C000000u);
    for (int64_t i = 0; i < nc; i++) bad |= (C[i] & 0x7F800000u) == 0x7F800000u;
    return !bad;
}

/* a warp's fragment registers (regs[l * nreg + j], lane-major) -> the matrix: the elements of lane l
   go to M[at[l * per_lane + i]] (the layouts of refsim.arith.fragments, emitted as data by
   refsim.ptx.compiled.instructions); fp16: two per register, the lower half first */
static void frag_f16(uint16_t *M, const int16_t *at, const uint32_t *regs, int nreg) {
    for (int q = 0; q < 32 * nreg; q++) {
        M[at[2 * q]] = (uint16_t)(regs[q] & 0xFFFFu);
        M[at[2 * q + 1]] = (uint16_t)(regs[q] >> 16);
    }
}

static void frag_f32(uint32_t *M, const int16_t *at, const uint32_t *regs, int nreg) {
    for (int q = 0; q < 32 * nreg; q++) M[at[q]] = regs[q];
}

/* integer elements of ``bits`` (8 or 4) bits, 32 / bits per register from bit 0 up, sign-extended when
   ``sgn`` (refsim.arith.fragments.unpack_registers); element e of register q goes to M[at[q * per + e]] */
static void frag_int(int16_t *M, const int16_t *at, const uint32_t *regs, int nreg, int bits, int sgn) {
    int per = 32 / bits;
    int32_t mask = (1 << bits) - 1, top = 1 << (bits - 1);
    for (int q = 0; q < 32 * nreg; q++)
        for (int e = 0; e < per; e++) {
            int32_t v = (int32_t)(regs[q] >> (e * bits)) & mask;
            M[at[q * per + e]] = (int16_t)(sgn && v >= top ? v - (1 << bits) : v);
        }
}

/* the integer forms, whole warps (see rt_mma_run): each warp's step is one call of the twin */
static void rt_mma_int(const rt_mma *d, int32_t W, const uint32_t *a, const uint32_t *b, const uint32_t *c,
                       uint32_t *out) {
    for (int32_t w = 0; w < W; w++) {
        int16_t A[16 * 64], B[64 * 8];                                      /* M x K, K x N: K <= 64 */
        uint32_t C[16 * 8], D[16 * 8];
        frag_int(A, d->a_at, a + (int64_t)w * 32 * d->na, d->na, d->bits, d->a_signed);
        frag_int(B, d->b_at, b + (int64_t)w * 32 * d->nb, d->nb, d->bits, d->b_signed);
        frag_f32(C, d->c_at, c + (int64_t)w * 32 * d->nc, d->nc);
        refsim_mma_int(1, d->M, d->N, d->K, d->satfinite, A, B, (const int32_t *)C, D);
        uint32_t *ro = out + (int64_t)w * 32 * d->nd;
        for (int q = 0; q < 32 * d->nd; q++) ro[q] = D[d->c_at[q]];
    }
}

/* mma (refsim.ptx.semantics.warp._build_mma) of a kind RT_MMA_*: th holds whole warps; a, b, c the
   registers of every lane, lane-major (a[(w * 32 + l) * na + j]); out likewise with nd.
   RT_MMA_F16_F32: RT_CALLBACK (nothing written) unless every warp's A, B and C are finite. */
static int rt_mma_run(rt_state *S, const rt_mma *d, const int32_t *th __attribute__((unused)), int32_t n, const uint32_t *a, const uint32_t *b,
                  const uint32_t *c, uint32_t *out) {
    int32_t W = n / 32, M = d->M, N = d->N, K = d->K;
    if (d->kind == RT_MMA_INT) {
        rt_mma_int(d, W, a, b, c, out);
        return 0;
    }
    if (!mma_finite(a, (int64_t)n * d->na, b, (int64_t)n * d->nb, c, (int64_t)n * d->nc)) return RT_CALLBACK;
    for (int32_t w = 0; w < W; w++) {
        uint16_t A16[16 * 16], B16[16 * 8];
        uint32_t D[16 * 8];
        int64_t k0 = 0;
        frag_f16(A16, d->a_at, a + (int64_t)w * 32 * d->na, d->na);
        frag_f16(B16, d->b_at, b + (int64_t)w * 32 * d->nb, d->nb);
        frag_f32(D, d->c_at, c + (int64_t)w * 32 * d->nc, d->nc);        /* D starts as C */
        refsim_mma_k16_f32((int)S->tc_L, (int)S->tc_F, (int)S->tc_ez32, 1, M, N, A16, K, B16, N, &k0, (float *)D);
        uint32_t *ro = out + (int64_t)w * 32 * d->nd;
        for (int q = 0; q < 32 * d->nd; q++) ro[q] = D[d->c_at[q]];
    }
    return 0;
}
