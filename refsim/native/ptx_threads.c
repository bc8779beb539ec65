/* refsim native, PTX runtime part 1 of 4 (after ptx_runtime.h and emulators.c): numpy's PCG64 draws,
   warps, block slots and cp.async completion. The oracle of every function is
   the refsim.ptx interpreter method it names (barriers and thread exit are not here: the compiled
   executor runs the interpreter's own refsim/ptx/barriers.py and Launch.exit_threads through a LaunchView) (see ptx_runtime.c for the whole runtime). */

/* ============================================================================================
   numpy's PCG64 and the two draws the random schedule makes (Generator.integers(n), .random()) */

static uint64_t pcg_next64(rt_state *S) {
    const unsigned __int128 mult = ((unsigned __int128)0x2360ED051FC65DA4ull << 64) | 0x4385DF649FCCF645ull;
    unsigned __int128 st = ((unsigned __int128)S->pcg_hi << 64) | S->pcg_lo;
    unsigned __int128 inc = ((unsigned __int128)S->pcg_inc_hi << 64) | S->pcg_inc_lo;
    st = st * mult + inc;
    S->pcg_hi = (uint64_t)(st >> 64);
    S->pcg_lo = (uint64_t)st;
    uint64_t x = S->pcg_hi ^ S->pcg_lo;
    unsigned rot = (unsigned)(S->pcg_hi >> 58);
    return rot ? (x >> rot) | (x << (64 - rot)) : x;
}

static uint32_t pcg_next32(rt_state *S) {
    if (S->pcg_has32) {
        S->pcg_has32 = 0;
        return S->pcg_u32;
    }
    uint64_t v = pcg_next64(S);
    S->pcg_has32 = 1;
    S->pcg_u32 = (uint32_t)(v >> 32);
    return (uint32_t)v;
}

/* Generator.integers(n) for 1 <= n <= 2^32: Lemire's bounded draw on 32-bit outputs */
static uint64_t pcg_integers(rt_state *S, uint64_t n) {
    uint64_t rng = n - 1;
    if (rng == 0) return 0;
    if (rng == 0xFFFFFFFFull) return pcg_next32(S);
    uint32_t excl = (uint32_t)rng + 1;
    uint64_t m = (uint64_t)pcg_next32(S) * excl;
    uint32_t left = (uint32_t)m;
    if (left < excl) {
        uint32_t threshold = (uint32_t)((0xFFFFFFFFu - (uint32_t)rng) % excl);
        while (left < threshold) {
            m = (uint64_t)pcg_next32(S) * excl;
            left = (uint32_t)m;
        }
    }
    return m >> 32;
}

static double pcg_double(rt_state *S) { return (double)(pcg_next64(S) >> 11) * (1.0 / 9007199254740992.0); }

/* ============================================================================================
   warps, slots, blocks */

static void warp_refresh(rt_state *S, int64_t w) {
    const int32_t *pc = S->pc + w * 32;
    int32_t m = (int32_t)S->END;
    uint32_t mask = 0;
    for (int l = 0; l < 32; l++) m = pc[l] < m ? pc[l] : m;
    for (int l = 0; l < 32; l++) mask |= (uint32_t)(pc[l] == m) << l;
    S->wmin[w] = m;
    S->wmask[w] = mask;
}

static void slot_refresh(rt_state *S, int64_t s) {
    int64_t wpb = S->tpb / 32;
    for (int64_t w = s * wpb; w < (s + 1) * wpb; w++) warp_refresh(S, w);
}

/* Launch._start_block: the next block into slot s (registers and local memory are NOT reset) */
static void start_block(rt_state *S, int64_t s) {
    int64_t lo = s * S->tpb, hi = lo + S->tpb;
    S->slot_dirty[s] = 1;
    S->any_dirty = 1;
    if (S->next_block >= S->nblocks) {
        for (int64_t t = lo; t < hi; t++) {
            S->pc[t] = (int32_t)S->END;
            S->exited[t] = 1;
        }
        return;
    }
    int64_t b = S->next_block++;
    S->blocks++;
    S->slot_block[s] = b;
    int64_t gx = S->grid[0], gy = S->grid[1];
    S->ctaid[s * 3 + 0] = (uint32_t)(b % gx);
    S->ctaid[s * 3 + 1] = (uint32_t)(b / gx % gy);
    S->ctaid[s * 3 + 2] = (uint32_t)(b / (gx * gy));
    for (int64_t t = lo; t < hi; t++) {
        int live = (t - lo) < S->nthreads;
        S->pc[t] = live ? 0 : (int32_t)S->END;
        S->exited[t] = (uint8_t)!live;
        S->bar_wait[t] = 0;
        S->group[t] = 0;
    }
    for (int i = 0; i < 16; i++) S->bar_count[s * 16 + i] = S->bar_need[s * 16 + i] = 0;
    memset(S->shared + s * S->shared_stride, 0, (size_t)S->shared_stride);
    if (S->poison) {
        memset(S->shared_init + s * S->shared_stride, 0, (size_t)S->shared_stride);
        for (int64_t r = 0; r < S->nregs; r++) memset(S->reg_init[r] + lo, 0, (size_t)S->tpb);
    }
    if (S->race) {
        for (int64_t i = s * S->shared_stride; i < (s + 1) * S->shared_stride; i++) S->race_w[i] = S->race_r[i] = -1;
    }
    if (S->hbytes) memset(S->hbytes + s * S->shared_stride, 0, (size_t)S->shared_stride);
    if (S->gen_w)
        for (int64_t i = s * S->shared_stride; i < (s + 1) * S->shared_stride; i++) S->gen_w[i] = -1;
    if (S->async_bid) {
        for (int64_t i = s * S->shared_stride; i < (s + 1) * S->shared_stride; i++) S->async_bid[i] = -1;
        for (int64_t i = s * S->max_mbar * S->tpb; i < (s + 1) * S->max_mbar * S->tpb; i++) S->async_obs[i] = -1;
    }
}

/* ============================================================================================
   cp.async: per-slot FIFOs of pending copies in issue order (Launch._op_cp, _complete_async) */

static int fifo_push(rt_fifo *f, const rt_async *a) {
    if (f->n == f->cap) {
        int64_t cap = f->cap ? 2 * f->cap : 256;
        rt_async *e = (rt_async *)realloc(f->e, (size_t)cap * sizeof(rt_async));
        if (!e) return E_NOMEM;
        f->e = e;
        f->cap = cap;
    }
    f->e[f->n++] = *a;
    return 0;
}

/* "allowed" < 0: every pending copy of the threads (exit, end of launch); else the copies older than
   the thread's `allowed` newest committed groups */
static void complete_async(rt_state *S, const int32_t *th, int32_t n, int64_t allowed) {
    for (int32_t i = 0; i < n; i++) S->mark[th[i]] = 1;
    int64_t last = -1;
    int landed = 0;
    for (int32_t i = 0; i < n; i++) {
        int64_t s = th[i] / S->tpb;
        if (s == last) continue;
        last = s;
        rt_fifo *f = &S->fifo[s];
        int64_t k = 0, record = -1;
        for (int64_t j = 0; j < f->n; j++) {
            rt_async *e = &f->e[j];
            int take = S->mark[e->t] && (allowed < 0 || e->gid < S->group[e->t] - allowed);
            if (!take) {
                f->e[k++] = *e;
                continue;
            }
            memcpy(S->shared + e->dst, e->data, (size_t)e->size);
            if (S->poison) memset(S->shared_init + e->dst, 1, (size_t)e->size);
            if (S->race) {
                /* pending -= 1 once per byte of one issuing record (NumPy's fancy-index decrement) */
                if (e->rec != record) {
                    record = e->rec;
                    S->stamp_now++;
                }
                for (int b = 0; b < e->size; b++) {
                    int64_t byte = e->dst + b;
                    if (S->stamp[byte] == S->stamp_now) continue;
                    S->stamp[byte] = S->stamp_now;
                    S->pending[byte] -= 1;
                }
            }
            landed = 1;
        }
        f->n = k;
    }
    for (int32_t i = 0; i < n; i++) S->mark[th[i]] = 0;
    if (landed) S->progress++;
}

/* Launch.land_async, for the interpreter's definitions run over a LaunchView (refsim.ptx.compiled.view):
   thread exit and cp.async.wait_group land the copies of this FIFO */
void refsim_rt_land_async(rt_state *S, const int32_t *th, int32_t n, int64_t allowed) { complete_async(S, th, n, allowed); }

/* Launch.start_block, for the interpreter's Launch.exit_threads run over a LaunchView */
void refsim_rt_start_block(rt_state *S, int64_t s) { start_block(S, s); }
