/* refsim native: the runtime of refsim.ptx's compiled execution path (refsim.ptx.compiled).

   Oracle: refsim.ptx's NumPy interpreter (refsim/ptx/engine.py), rule for rule. Every function here
   names the interpreter method it reproduces; the tests run every kernel through both and compare
   memory, statistics and errors bit for bit (tests/ptx/compiled/).

   scheduler     one step = (p, threads): p = the lowest per-warp minimum PC among warps that are not
                 yielding (lockstep) or a seeded random warp's (numpy's PCG64 stream, drawn as
                 Generator.integers / Generator.random draw it); the threads are those at p in the
                 chosen warps, in ascending order. Statistics are counted before the instruction runs.
   instructions  the generated kernel code executes ALU instructions itself and calls the functions
                 below (through S->api) for memory, barriers, exit, cp.async, ldmatrix and mma, each
                 vectorised over the step's threads exactly as the interpreter: every check over all
                 threads first (in the interpreter's order), then the effects.
   arithmetic    integers only in the tensor-core model (T-FDPA, refsim.arith.tensor_core._fdpa_core);
                 fp16/fp32 as refsim.arith.fp (ptx_runtime.h). Built with -ffp-contract=off. */

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
        S->n_exited[s] = S->tpb;
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
    S->n_exited[s] = S->tpb - S->nthreads;
    for (int i = 0; i < 16; i++) S->bar_count[s * 16 + i] = S->bar_need[s * 16 + i] = 0;
    memset(S->shared + s * S->shared_stride, 0, (size_t)S->shared_stride);
    if (S->poison) {
        memset(S->shared_init + s * S->shared_stride, 0, (size_t)S->shared_stride);
        for (int64_t r = 0; r < S->nregs; r++) memset(S->reg_init[r] + lo, 0, (size_t)S->tpb);
    }
    if (S->race) {
        for (int64_t i = s * S->shared_stride; i < (s + 1) * S->shared_stride; i++) S->race_w[i] = S->race_r[i] = -1;
    }
}

/* Launch._reduce_predicates: the bar.red threads a barrier of slot s releases get the popcount / AND /
   OR of the predicates of all bar.red threads released with them at the same barrier id */
static void reduce_predicates(rt_state *S, int64_t s, uint32_t done) {
    int64_t popc[16] = {0}, total[16] = {0};
    int any = 0;
    for (int64_t t = s * S->tpb; t < (s + 1) * S->tpb; t++) {
        if (!S->bar_wait[t] || !((done >> S->bar_id[t]) & 1) || !S->red_op[S->bar_pc[t]]) continue;
        any = 1;
        popc[S->bar_id[t]] += S->bar_pred[t];
        total[S->bar_id[t]] += 1;
    }
    if (!any) return;
    for (int64_t t = s * S->tpb; t < (s + 1) * S->tpb; t++) {
        if (!S->bar_wait[t] || !((done >> S->bar_id[t]) & 1)) continue;
        int32_t q = S->bar_pc[t], op = S->red_op[q], slot = S->red_dst[q];
        if (!op || slot < 0) continue;
        int64_t b = S->bar_id[t];
        uint64_t v = op == 1 ? (uint64_t)popc[b] : op == 2 ? (uint64_t)(popc[b] == total[b]) : (uint64_t)(popc[b] > 0);
        void *r = S->reg[slot];
        switch (S->reg_bits[slot]) {
        case 1: case 8: ((uint8_t *)r)[t] = (uint8_t)v; break;
        case 16: ((uint16_t *)r)[t] = (uint16_t)v; break;
        case 32: ((uint32_t *)r)[t] = (uint32_t)v; break;
        default: ((uint64_t *)r)[t] = v; break;
        }
        if (S->poison) S->reg_init[slot][t] = 1;
    }
}

/* ============================================================================================
   barriers: Launch._arrivals, _release_barriers (only the slots whose counts or live threads changed
   can complete a barrier, so only those are examined) */

static void release_barriers(rt_state *S, const int32_t *th, int32_t n) {
    int64_t any = 0;
    for (int32_t i = 0; i < n;) {
        int64_t s = th[i] / S->tpb, end = (s + 1) * S->tpb;
        while (i < n && th[i] < end) i++;                 /* the next slot's first thread */
        int64_t alive = S->tpb - S->n_exited[s];
        uint32_t done = 0;
        for (int b = 0; b < 16; b++) {
            int64_t cnt = S->bar_count[s * 16 + b], need = S->bar_need[s * 16 + b] > 0 ? S->bar_need[s * 16 + b] : alive;
            if (cnt > 0 && cnt >= need) done |= 1u << b;
        }
        if (!done) continue;
        any = 1;
        reduce_predicates(S, s, done);
        for (int64_t t = s * S->tpb; t < (s + 1) * S->tpb; t++) {
            if (S->bar_wait[t] && ((done >> S->bar_id[t]) & 1)) {
                S->bar_wait[t] = 0;
                S->pc[t] = S->bar_pc[t] + 1;
            }
        }
        for (int b = 0; b < 16; b++) {
            if ((done >> b) & 1) {
                S->bar_count[s * 16 + b] = S->bar_need[s * 16 + b] = 0;
                S->barriers++;
            }
        }
        int64_t wpb = S->tpb / 32;
        for (int64_t w = s * wpb; w < (s + 1) * wpb; w++) S->yielding[w] = 0;
        if (S->race) {
            for (int64_t k = s * S->shared_stride; k < (s + 1) * S->shared_stride; k++) S->race_w[k] = S->race_r[k] = -1;
        }
        S->slot_dirty[s] = 1;
        S->any_dirty = 1;
    }
    if (any) S->progress++;
}

/* bar.sync / barrier.sync / bar.arrive a{, b} (Launch._op_bar) */
static int rt_bar(rt_state *S, int32_t ins, const int32_t *th, int32_t n, const uint32_t *id, const uint32_t *count,
                  int32_t arrive, int32_t red, const uint8_t *pred) {
    uint32_t mx = 0;
    for (int32_t i = 0; i < n; i++) mx = id[i] > mx ? id[i] : mx;
    if (mx > 15) {
        S->err_ins = ins;
        S->err_aux = mx;
        return E_BARRIER_ID;
    }
    if (red)
        for (int32_t i = 0; i < n; i++) S->bar_pred[th[i]] = pred[i];
    for (int32_t i = 0; i < n; i++) {
        int32_t t = th[i];
        if (arrive) {
            S->pc[t] += 1;
        } else {
            S->bar_wait[t] = 1;
            S->bar_id[t] = id[i];
            S->bar_pc[t] = S->pc[t];
            S->pc[t] = (int32_t)S->END;
        }
    }
    int64_t s = -1, end = 0;
    for (int32_t i = 0; i < n; i++) {
        if (th[i] >= end) {
            s = th[i] / S->tpb;
            end = (s + 1) * S->tpb;
        }
        S->bar_count[s * 16 + id[i]] += 1;
        if (count) S->bar_need[s * 16 + id[i]] = count[i];
    }
    release_barriers(S, th, n);
    return 0;
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

static void rt_cp_wait(rt_state *S, const int32_t *th, int32_t n, int64_t allowed) { complete_async(S, th, n, allowed); }

/* ============================================================================================
   exit (Launch._exit_threads) */

static void rt_exit_threads(rt_state *S, const int32_t *th, int32_t n) {
    for (int32_t i = 0; i < n; i++) {
        int32_t t = th[i];
        S->pc[t] = (int32_t)S->END;
        if (!S->exited[t]) S->n_exited[t / S->tpb]++;
        S->exited[t] = 1;
    }
    S->progress++;
    complete_async(S, th, n, -1);
    release_barriers(S, th, n);
    int64_t last = -1;
    for (int32_t i = 0; i < n; i++) {
        int64_t s = th[i] / S->tpb;
        if (s == last) continue;
        last = s;
        if (S->n_exited[s] == S->tpb && S->slot_block[s] >= 0) start_block(S, s);
    }
}

/* ============================================================================================
   memory: Launch._resolve / _resolve_space. Every access gets (kind, host pointer, shared flat
   offset); the checks run over all accesses first, in the interpreter's order: misalignment, then
   out-of-bounds per space (global, shared, local, param). */

typedef struct { uint8_t *ptr; int64_t flat; int32_t kind; int32_t buf; } rt_access;

static int64_t locate(rt_state *S, uint64_t a, int64_t nbytes) {
    int64_t lo = 0, hi = S->nbuf;                       /* last base <= a */
    while (lo < hi) {
        int64_t mid = (lo + hi) / 2;
        if (S->gbase[mid] <= a) lo = mid + 1;
        else hi = mid;
    }
    int64_t i = lo - 1;
    if (i < 0) return -1;
    if (a + (uint64_t)nbytes > S->gbase[i] + S->gsize[i] || a < S->gbase[i]) return -1;
    return i;
}

static int fault(rt_state *S, int code, int32_t ins, int32_t t, uint64_t a, int64_t nbytes, int32_t space) {
    S->err_ins = ins;
    S->err_thread = t;
    S->err_addr = a;
    S->err_aux = nbytes;
    S->err_thread2 = space;
    return code;
}

static int resolve_ordered(rt_state *S, int32_t ins, int32_t space, const int32_t *th, int32_t n,
                           const uint64_t *addr, int64_t nbytes, rt_access *acc);

/* one pass that assumes every access is valid; on the first doubt the ordered pass below decides
   (it reports the error the interpreter reports) */
static int resolve(rt_state *S, int32_t ins, int32_t space, const int32_t *th, int32_t n, const uint64_t *addr,
                   int64_t nbytes, rt_access *acc) {
    int32_t sp = space == SP_CONST ? SP_GLOBAL : space;
    int64_t b = 0, tpb = S->tpb, slot = -1, end = 0;
    for (int32_t i = 0; i < n; i++) {
        uint64_t a = addr[i];
        if (a % (uint64_t)nbytes) return resolve_ordered(S, ins, space, th, n, addr, nbytes, acc);
        int32_t k = sp;
        if (sp == SP_GENERIC) {
            k = (a >= RT_SHARED_WINDOW && a < RT_SHARED_WINDOW + RT_WINDOW_BYTES) ? SP_SHARED
                : (a >= RT_LOCAL_WINDOW && a < RT_LOCAL_WINDOW + RT_WINDOW_BYTES) ? SP_LOCAL : SP_GLOBAL;
            a -= k == SP_SHARED ? RT_SHARED_WINDOW : k == SP_LOCAL ? RT_LOCAL_WINDOW : 0;
        }
        acc[i].kind = k;
        if (k == SP_GLOBAL) {
            if (!(b < S->nbuf && a >= S->gbase[b] && a - S->gbase[b] + (uint64_t)nbytes <= S->gsize[b])) {
                b = locate(S, a, nbytes);
                if (b < 0) return resolve_ordered(S, ins, space, th, n, addr, nbytes, acc);
            }
            acc[i].buf = (int32_t)b;
            acc[i].ptr = S->gptr[b] + (a - S->gbase[b]);
        } else if (k == SP_SHARED) {
            if (a + (uint64_t)nbytes > (uint64_t)S->shared_size) return resolve_ordered(S, ins, space, th, n, addr, nbytes, acc);
            if (th[i] >= end) {
                slot = th[i] / tpb;
                end = (slot + 1) * tpb;
            }
            acc[i].flat = slot * S->shared_stride + (int64_t)a;
            acc[i].ptr = S->shared + acc[i].flat;
        } else if (k == SP_LOCAL) {
            if (a + (uint64_t)nbytes > (uint64_t)S->local_bytes) return resolve_ordered(S, ins, space, th, n, addr, nbytes, acc);
            acc[i].ptr = S->local + (int64_t)th[i] * S->local_stride + (int64_t)a;
        } else {
            if (a + (uint64_t)nbytes > (uint64_t)S->param_size) return resolve_ordered(S, ins, space, th, n, addr, nbytes, acc);
            acc[i].ptr = S->param + a;
        }
    }
    return 0;
}

/* the interpreter's order: misalignment over all accesses, then out of bounds per space */
static int resolve_ordered(rt_state *S, int32_t ins, int32_t space, const int32_t *th, int32_t n,
                           const uint64_t *addr, int64_t nbytes, rt_access *acc) {
    if (nbytes > 1)
        for (int32_t i = 0; i < n; i++)
            if (addr[i] % (uint64_t)nbytes) return fault(S, E_MISALIGNED, ins, th[i], addr[i], nbytes, space);
    int32_t sp = space == SP_CONST ? SP_GLOBAL : space;
    for (int32_t i = 0; i < n; i++) {
        uint64_t a = addr[i];
        int32_t k = sp;
        if (sp == SP_GENERIC) {
            if (a >= RT_SHARED_WINDOW && a < RT_SHARED_WINDOW + RT_WINDOW_BYTES) {
                k = SP_SHARED;
                a -= RT_SHARED_WINDOW;
            } else if (a >= RT_LOCAL_WINDOW && a < RT_LOCAL_WINDOW + RT_WINDOW_BYTES) {
                k = SP_LOCAL;
                a -= RT_LOCAL_WINDOW;
            } else {
                k = SP_GLOBAL;
            }
        }
        acc[i].kind = k;
        acc[i].flat = (int64_t)a;                       /* the space's own address, for now */
    }
    for (int32_t i = 0; i < n; i++) {
        if (acc[i].kind != SP_GLOBAL) continue;
        uint64_t a = (uint64_t)acc[i].flat;
        int64_t b = locate(S, a, nbytes);
        if (b < 0) return fault(S, E_OOB_GLOBAL, ins, th[i], a, nbytes, SP_GLOBAL);
        acc[i].buf = (int32_t)b;
        acc[i].ptr = S->gptr[b] + (a - S->gbase[b]);
    }
    for (int32_t i = 0; i < n; i++) {
        if (acc[i].kind != SP_SHARED) continue;
        uint64_t a = (uint64_t)acc[i].flat;
        if (a + (uint64_t)nbytes > (uint64_t)S->shared_size) return fault(S, E_OOB_SHARED, ins, th[i], a, nbytes, SP_SHARED);
        acc[i].flat = (th[i] / S->tpb) * S->shared_stride + (int64_t)a;
        acc[i].ptr = S->shared + acc[i].flat;
    }
    for (int32_t i = 0; i < n; i++) {
        if (acc[i].kind != SP_LOCAL) continue;
        uint64_t a = (uint64_t)acc[i].flat;
        if (a + (uint64_t)nbytes > (uint64_t)S->local_bytes) return fault(S, E_OOB_LOCAL, ins, th[i], a, nbytes, SP_LOCAL);
        acc[i].ptr = S->local + (int64_t)th[i] * S->local_stride + (int64_t)a;
    }
    for (int32_t i = 0; i < n; i++) {
        if (acc[i].kind != SP_PARAM) continue;
        uint64_t a = (uint64_t)acc[i].flat;
        if (a + (uint64_t)nbytes > (uint64_t)S->param_size) return fault(S, E_OOB_PARAM, ins, th[i], a, nbytes, SP_PARAM);
        acc[i].ptr = S->param + a;
    }
    return 0;
}

static int cmp_i64(const void *x, const void *y) {
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

/* Launch._count_wavefronts for the shared accesses of one step: per warp and phase (the lanes whose
   accesses fit 128 bytes: 32 lanes for <= 4-byte, 16 for 8-byte, 8 for 16-byte accesses), the
   largest number of distinct 4-byte words one of the 32 banks delivers. Words are counted per bank
   in small buckets (a warp-phase has at most 128 words). */
static void count_wavefronts(rt_state *S, const int32_t *th, int32_t n, const rt_access *acc, int64_t nbytes) {
    int64_t words_per = nbytes / 4 > 1 ? nbytes / 4 : 1;
    int64_t lanes_per_phase = 128 / (nbytes > 4 ? nbytes : 4);
    if (lanes_per_phase < 1) lanes_per_phase = 1;
    int nphase = (int)((32 + lanes_per_phase - 1) / lanes_per_phase);
    int32_t i = 0;
    while (i < n) {
        int64_t w = th[i] >> 5;
        int32_t j = i;
        while (j < n && (th[j] >> 5) == w) j++;
        int has = 0;
        for (int ph = 0; ph < nphase; ph++) {
            int64_t bucket[32][32];
            int cnt[32] = {0}, mx = 0;
            for (int32_t q = i; q < j; q++) {
                if (acc[q].kind != SP_SHARED || (th[q] & 31) / lanes_per_phase != ph) continue;
                has = 1;
                for (int64_t k = 0; k < words_per; k++) {
                    int64_t word = acc[q].flat / 4 + k;
                    int b = (int)(word & 31);
                    int c = cnt[b], seen = 0;
                    for (int e = 0; e < c; e++) seen |= bucket[b][e] == word;
                    if (seen) continue;
                    if (c < 32) bucket[b][c] = word;
                    cnt[b] = c + 1;
                    mx = cnt[b] > mx ? cnt[b] : mx;
                }
            }
            S->shared_wavefronts += mx;
        }
        S->shared_requests += has;
        i = j;
    }
}

/* Launch._race_read over the shared accesses (vectorised semantics: every test against the state
   before this instruction, then the reader marks scattered in thread order) */
static int race_read(rt_state *S, int32_t ins, const int32_t *th, int32_t n, const rt_access *acc, int64_t nbytes) {
    for (int32_t i = 0; i < n; i++) {
        if (acc[i].kind != SP_SHARED) continue;
        for (int64_t b = 0; b < nbytes; b++)
            if (S->pending[acc[i].flat + b] > 0) {
                S->err_ins = ins;
                S->err_thread = th[i];
                return E_RACE_PENDING;
            }
    }
    for (int32_t i = 0; i < n; i++) {
        if (acc[i].kind != SP_SHARED) continue;
        for (int64_t b = 0; b < nbytes; b++) {
            int64_t w = S->race_w[acc[i].flat + b];
            if (w >= 0 && w != th[i]) {
                S->err_ins = ins;
                S->err_thread = th[i];
                S->err_thread2 = w;
                return E_RACE_READ;
            }
        }
    }
    int64_t *nv = (int64_t *)S->u64d;   /* new reader marks, n * nbytes (<= T * 4 entries of 8 bytes) */
    int64_t k = 0;
    for (int32_t i = 0; i < n; i++) {
        if (acc[i].kind != SP_SHARED) continue;
        for (int64_t b = 0; b < nbytes; b++) {
            int64_t r = S->race_r[acc[i].flat + b];
            nv[k++] = (r == -1 || r == th[i]) ? th[i] : -2;
        }
    }
    k = 0;
    for (int32_t i = 0; i < n; i++) {
        if (acc[i].kind != SP_SHARED) continue;
        for (int64_t b = 0; b < nbytes; b++) S->race_r[acc[i].flat + b] = nv[k++];
    }
    return 0;
}

static int race_write(rt_state *S, int32_t ins, const int32_t *th, int32_t n, const rt_access *acc, int64_t nbytes) {
    int32_t nsh = 0;
    for (int32_t i = 0; i < n; i++) {
        if (acc[i].kind != SP_SHARED) continue;
        nsh++;
        for (int64_t b = 0; b < nbytes; b++) {
            int64_t w = S->race_w[acc[i].flat + b], r = S->race_r[acc[i].flat + b];
            if ((w >= 0 && w != th[i]) || (r != -1 && r != th[i])) {
                S->err_ins = ins;
                S->err_thread = th[i];
                return E_RACE_WRITE;
            }
        }
    }
    if (nsh > 1) {
        int64_t *bytes = (int64_t *)S->u64d, k = 0;
        for (int32_t i = 0; i < n; i++)
            if (acc[i].kind == SP_SHARED)
                for (int64_t b = 0; b < nbytes; b++) bytes[k++] = acc[i].flat + b;
        qsort(bytes, (size_t)k, sizeof(int64_t), cmp_i64);
        for (int64_t j = 1; j < k; j++)
            if (bytes[j] == bytes[j - 1]) {
                S->err_ins = ins;
                S->err_aux = bytes[j] % S->shared_stride;
                return E_RACE_SAME_BYTE;
            }
    }
    for (int32_t i = 0; i < n; i++)
        if (acc[i].kind == SP_SHARED)
            for (int64_t b = 0; b < nbytes; b++) S->race_w[acc[i].flat + b] = th[i];
    return 0;
}

static int poison_shared(rt_state *S, int32_t ins, const int32_t *th, int32_t n, const rt_access *acc, int64_t nbytes) {
    for (int32_t i = 0; i < n; i++) {
        if (acc[i].kind != SP_SHARED) continue;
        for (int64_t b = 0; b < nbytes; b++)
            if (!S->shared_init[acc[i].flat + b]) {
                S->err_ins = ins;
                S->err_thread = th[i];
                return E_UNINIT_SHARED;
            }
    }
    return 0;
}

/* Launch._spin_check: a warp yields when every one of its threads read what it read last time here */
static void spin_check(rt_state *S, int32_t slot, const int32_t *th, int32_t n, const uint64_t *v) {
    uint64_t *val = S->spin_val[slot];
    uint8_t *seen = S->spin_seen[slot];
    int32_t i = 0;
    while (i < n) {
        int64_t w = th[i] >> 5;
        int all = 1;
        for (; i < n && (th[i] >> 5) == w; i++) {
            int32_t t = th[i];
            all &= seen[t] && val[t] == v[i];
            val[t] = v[i];
            seen[t] = 1;
        }
        if (all) S->yielding[w] = 1;
    }
}

static uint64_t load_le(const uint8_t *p, int64_t esize) {
    uint64_t v = 0;
    memcpy(&v, p, (size_t)esize);
    return v;
}

static rt_access *access_buf(rt_state *S) { return (rt_access *)S->bytes; }

/* ld / ldu (Launch._op_ld): out gets n * esize * vec bytes, little-endian elements */
static int rt_ld(rt_state *S, const rt_mem *m, const int32_t *th, int32_t n, const uint64_t *addr, uint8_t *out) {
    int64_t nbytes = (int64_t)m->esize * m->vec;
    rt_access *acc = access_buf(S);
    int r = resolve(S, m->ins, m->space, th, n, addr, nbytes, acc);
    if (r) return r;
    int has_shared = 0;
    for (int32_t i = 0; i < n; i++) {
        if (acc[i].kind == SP_GLOBAL) S->global_bytes_read += nbytes;
        has_shared |= acc[i].kind == SP_SHARED;
    }
    if (has_shared) {
        if (S->poison && (r = poison_shared(S, m->ins, th, n, acc, nbytes))) return r;
        if (S->race && (r = race_read(S, m->ins, th, n, acc, nbytes))) return r;
        count_wavefronts(S, th, n, acc, nbytes);
    }
    for (int32_t i = 0; i < n; i++) memcpy(out + i * nbytes, acc[i].ptr, (size_t)nbytes);
    if (m->spin >= 0) {
        uint64_t *v = S->u64c;
        for (int32_t i = 0; i < n; i++) {
            if (m->vec == 1) {
                v[i] = load_le(out + i * nbytes, m->esize);
            } else {
                uint64_t h = 0;
                for (int j = 0; j < m->vec; j++)
                    h += load_le(out + i * nbytes + j * m->esize, m->esize) * ((uint64_t)(j + 1) * 0x9E3779B97F4A7C15ull);
                v[i] = h;
            }
        }
        spin_check(S, m->spin, th, n, v);
    }
    return 0;
}

/* st (Launch._op_st): val holds n * esize * vec bytes */
static int rt_st(rt_state *S, const rt_mem *m, const int32_t *th, int32_t n, const uint64_t *addr, const uint8_t *val) {
    int64_t nbytes = (int64_t)m->esize * m->vec;
    rt_access *acc = access_buf(S);
    int r = resolve(S, m->ins, m->space, th, n, addr, nbytes, acc);
    if (r) return r;
    for (int32_t i = 0; i < n; i++) {                                  /* global parts first */
        if (acc[i].kind != SP_GLOBAL) continue;
        if (!S->gwritable[acc[i].buf]) {
            S->err_ins = m->ins;
            return E_READONLY;
        }
    }
    for (int32_t i = 0; i < n; i++) {
        if (acc[i].kind != SP_GLOBAL) continue;
        S->global_bytes_written += nbytes;
        memcpy(acc[i].ptr, val + i * nbytes, (size_t)nbytes);
    }
    int has_shared = 0;
    for (int32_t i = 0; i < n; i++) has_shared |= acc[i].kind == SP_SHARED;
    if (has_shared) {
        if (S->race && (r = race_write(S, m->ins, th, n, acc, nbytes))) return r;
        if (S->poison)
            for (int32_t i = 0; i < n; i++)
                if (acc[i].kind == SP_SHARED) memset(S->shared_init + acc[i].flat, 1, (size_t)nbytes);
        count_wavefronts(S, th, n, acc, nbytes);
    }
    for (int32_t i = 0; i < n; i++)
        if (acc[i].kind == SP_SHARED || acc[i].kind == SP_LOCAL) memcpy(acc[i].ptr, val + i * nbytes, (size_t)nbytes);
    S->progress++;
    return 0;
}

/* ============================================================================================
   atomics: refsim.ptx.semantics.atomic.atom_apply, applied one access at a time in thread order
   (the interpreter's rounds serialise each address in thread order; distinct addresses commute) */

static uint32_t flush_f32(uint32_t u) { return (u & 0x7F800000u) == 0 ? (u & 0x80000000u) : u; }

static uint64_t atom_apply(int aop, int atype, uint64_t old, uint64_t b, uint64_t c, int shared_space) {
    switch (atype) {
    case RT_AT_F32: {
        int ftz = !shared_space;
        uint32_t x = (uint32_t)old, y = (uint32_t)b;
        if (ftz) {
            x = flush_f32(x);
            y = flush_f32(y);
        }
        uint32_t r = rt_f_canon(rt_f32(x) + rt_f32(y));
        return ftz && r != 0x7FFFFFFFu ? flush_f32(r) : r;
    }
    case RT_AT_F16: {
        double s = (double)rt_h2f((uint16_t)old) + (double)rt_h2f((uint16_t)b);   /* exact */
        return rt_h_canon(rt_d2h(s));
    }
    case RT_AT_F16X2: {
        uint32_t lo = rt_h_canon(rt_d2h((double)rt_h2f((uint16_t)old) + (double)rt_h2f((uint16_t)b)));
        uint32_t hi = rt_h_canon(rt_d2h((double)rt_h2f((uint16_t)(old >> 16)) + (double)rt_h2f((uint16_t)(b >> 16))));
        return lo | (hi << 16);
    }
    default: break;
    }
    int w64 = atype == RT_AT_B64 || atype == RT_AT_U64 || atype == RT_AT_S64;
    uint64_t mask = w64 ? ~0ull : 0xFFFFFFFFull;
    old &= mask;
    b &= mask;
    int sgn = atype == RT_AT_S32 || atype == RT_AT_S64;
    int64_t so = w64 ? (int64_t)old : (int64_t)(int32_t)(uint32_t)old, sb = w64 ? (int64_t)b : (int64_t)(int32_t)(uint32_t)b;
    uint64_t r;
    switch (aop) {
    case RT_AOP_AND: r = old & b; break;
    case RT_AOP_OR: r = old | b; break;
    case RT_AOP_XOR: r = old ^ b; break;
    case RT_AOP_EXCH: r = b; break;
    case RT_AOP_CAS: r = old == b ? (c & mask) : old; break;
    case RT_AOP_ADD: r = old + b; break;
    case RT_AOP_MIN: r = (sgn ? so < sb : old < b) ? old : b; break;
    case RT_AOP_MAX: r = (sgn ? so > sb : old > b) ? old : b; break;
    case RT_AOP_INC: r = old >= b ? 0 : old + 1; break;
    default: r = (old == 0 || old > b) ? b : old - 1; break;
    }
    return r & mask;
}

/* one atomic access: the old value out, the new one stored; statistics and poison marks */
static int atom_one(rt_state *S, const rt_mem *m, rt_access *a, uint64_t b, uint64_t c, uint64_t *old) {
    int64_t es = m->esize;
    uint64_t o = load_le(a->ptr, es);
    uint64_t nv = atom_apply(m->aop, m->atype, o, b, c, a->kind == SP_SHARED);
    memcpy(a->ptr, &nv, (size_t)es);
    *old = o;
    if (a->kind == SP_GLOBAL) {
        S->global_bytes_read += es;
        S->global_bytes_written += es;
    } else if (a->kind == SP_SHARED && S->poison) {
        memset(S->shared_init + a->flat, 1, (size_t)es);
    }
    return nv != o;
}

static __thread const rt_access *ACC_SORT;     /* the comparator's accesses (per thread: launches may run concurrently) */
static int cmp_access(const void *x, const void *y) {      /* by address, then thread order */
    int32_t i = *(const int32_t *)x, j = *(const int32_t *)y;
    const uint8_t *p = ACC_SORT[i].ptr, *q = ACC_SORT[j].ptr;
    return p != q ? (p < q ? -1 : 1) : (i > j) - (i < j);
}

/* atom / red (memory_ops._atomic): the accesses to one address serialised in thread order (distinct
   addresses commute). A float add's result depends on that order: the most contenders one address
   saw in one step is float_atomic_contention, and with atomic_order the contenders of an address land
   in that permutation of their thread-order ranks (ranks beyond it follow, in order). */
static int rt_atom(rt_state *S, const rt_mem *m, const int32_t *th, int32_t n, const uint64_t *addr,
                   const uint64_t *b, const uint64_t *c, uint64_t *old) {
    rt_access *acc = access_buf(S);
    int r = resolve(S, m->ins, m->space, th, n, addr, m->esize, acc);
    if (r) return r;
    for (int32_t i = 0; i < n; i++)
        if (acc[i].kind == SP_GLOBAL && !S->gwritable[acc[i].buf]) {
            S->err_ins = m->ins;
            return E_READONLY_ATOM;
        }
    int changed = 0;
    int order_dependent = m->aop == RT_AOP_ADD &&
        (m->atype == RT_AT_F32 || m->atype == RT_AT_F16 || m->atype == RT_AT_F16X2);
    if (!order_dependent) {
        for (int32_t i = 0; i < n; i++) changed |= atom_one(S, m, &acc[i], b[i], c ? c[i] : 0, &old[i]);
    } else if (n > 0) {
        int32_t *ix = S->act2;
        for (int32_t i = 0; i < n; i++) ix[i] = i;
        ACC_SORT = acc;
        qsort(ix, (size_t)n, sizeof(int32_t), cmp_access);
        for (int32_t g = 0; g < n;) {
            int32_t e = g;
            while (e < n && acc[ix[e]].ptr == acc[ix[g]].ptr) e++;
            int64_t cnt = e - g, lim = cnt < S->naorder ? cnt : S->naorder;
            if (cnt > S->float_atomic_contention) S->float_atomic_contention = cnt;
            if (cnt > 1 && S->naorder) {
                for (int64_t j = 0; j < S->naorder; j++)
                    if (S->aorder[j] < lim) {
                        int32_t i = ix[g + S->aorder[j]];
                        changed |= atom_one(S, m, &acc[i], b[i], c ? c[i] : 0, &old[i]);
                    }
                for (int64_t k = lim; k < cnt; k++) {
                    int32_t i = ix[g + k];
                    changed |= atom_one(S, m, &acc[i], b[i], c ? c[i] : 0, &old[i]);
                }
            } else {
                for (int32_t k = g; k < e; k++) {
                    int32_t i = ix[k];
                    changed |= atom_one(S, m, &acc[i], b[i], c ? c[i] : 0, &old[i]);
                }
            }
            g = e;
        }
    }
    if (changed) S->progress++;
    if (m->spin >= 0) spin_check(S, m->spin, th, n, old);
    return 0;
}

/* ============================================================================================
   cp.async copy (Launch._op_cp): source read now, bytes land at the covering wait_group */

static int rt_cp_async(rt_state *S, const rt_mem *m, const int32_t *th, int32_t n, const uint64_t *dst,
                       const uint64_t *src, const int64_t *srcsize, int32_t size) {
    int64_t *ss = (int64_t *)S->u64d;
    for (int32_t i = 0; i < n; i++) {
        ss[i] = srcsize ? srcsize[i] : size;
        if (ss[i] > size) {
            S->err_ins = m->ins;
            S->err_aux = size;
            return E_SRC_SIZE;
        }
    }
    int32_t *rd = S->act2, nrd = 0;
    uint64_t *rsrc = S->u64b;
    int full = 1;
    for (int32_t i = 0; i < n; i++)
        if (ss[i] > 0) {
            rd[nrd] = th[i];
            rsrc[nrd++] = src[i];
            full &= ss[i] == size;
        }
    rt_access *acc = access_buf(S);
    uint8_t *data = S->bytes + (size_t)S->T * 32;       /* second half of the scratch: n * 16 bytes */
    memset(data, 0, (size_t)n * 16);
    if (nrd) {
        int r = resolve(S, m->ins, SP_GLOBAL, rd, nrd, rsrc, full ? size : 1, acc);
        if (r) return r;
        int32_t q = 0;
        for (int32_t i = 0; i < n; i++) {
            if (ss[i] <= 0) continue;
            int64_t b = acc[q].buf;
            uint64_t off = (uint64_t)(acc[q].ptr - S->gptr[b]);
            if (off + (uint64_t)ss[i] > S->gsize[b])
                return fault(S, E_OOB_GLOBAL, m->ins, th[i], rsrc[q], ss[i], SP_GLOBAL);
            memcpy(data + i * 16, acc[q].ptr, (size_t)ss[i]);
            S->global_bytes_read += ss[i];
            q++;
        }
    }
    int r = resolve(S, m->ins, SP_SHARED, th, n, dst, size, acc);
    if (r) return r;
    if (S->race) {
        S->stamp_now++;
        for (int32_t i = 0; i < n; i++)
            for (int b = 0; b < size; b++) {
                int64_t byte = acc[i].flat + b;
                if (S->stamp[byte] == S->stamp_now) continue;   /* NumPy's fancy-index += counts once */
                S->stamp[byte] = S->stamp_now;
                S->pending[byte] += 1;
            }
    }
    for (int32_t i = 0; i < n; i++) {
        rt_async a;
        a.t = th[i];
        a.size = size;
        a.gid = S->group[th[i]];
        a.dst = acc[i].flat;
        a.rec = S->n_records;
        memcpy(a.data, data + i * 16, 16);
        if ((r = fifo_push(&S->fifo[th[i] / S->tpb], &a))) return r;
    }
    S->n_records++;
    return 0;
}

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

/* ldmatrix.sync.aligned.m8n8.x{num}{.trans}.b16 (Launch._op_ldmatrix; refsim.arith.fragments):
   th holds whole warps; addr the row addresses of lanes 0 .. 8 num - 1 of each warp; out gets
   register j of lane l of warp w at out[(w * 32 + l) * num + j]. Register j of lane l holds
   M_j[l / 4][2 (l % 4) + h] (h = 0 low half, 1 high half), with .trans M_j[2 (l % 4) + h][l / 4]. */
static int rt_ldmatrix(rt_state *S, const rt_mem *m, int32_t num, int32_t trans, const int32_t *th, int32_t n,
                       const uint64_t *addr, uint32_t *out) {
    int32_t W = n / 32, rows = 8 * num;
    int32_t *src = S->act2;
    for (int32_t w = 0; w < W; w++)
        for (int32_t l = 0; l < rows; l++) src[w * rows + l] = th[w * 32 + l];
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
        uint16_t M[4][8][8];
        for (int32_t j = 0; j < num; j++)
            for (int32_t rr = 0; rr < 8; rr++) memcpy(M[j][rr], acc[w * rows + j * 8 + rr].ptr, 16);
        for (int32_t l = 0; l < 32; l++)
            for (int32_t j = 0; j < num; j++) {
                uint32_t lo, hi;
                if (trans) {
                    lo = M[j][2 * (l % 4)][l / 4];
                    hi = M[j][2 * (l % 4) + 1][l / 4];
                } else {
                    lo = M[j][l / 4][2 * (l % 4)];
                    hi = M[j][l / 4][2 * (l % 4) + 1];
                }
                out[(w * 32 + l) * num + j] = lo | (hi << 16);
            }
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

static tc_dec tc_dec16(uint16_t u) {
    tc_dec d;
    int32_t eb = (u >> 10) & 31, f = u & 1023;
    d.special = eb == 31;
    d.frac_nz = f != 0;
    d.m = d.special ? 0 : (eb ? (f | 1024) : f);
    d.e = eb ? eb - 15 : -14;
    d.neg = (u >> 15) & 1;
    return d;
}

static tc_dec tc_dec32(uint32_t u) {
    tc_dec d;
    int32_t eb = (u >> 23) & 255, f = u & 0x7FFFFF;
    d.special = eb == 255;
    d.frac_nz = f != 0;
    d.m = d.special ? 0 : (eb ? (f | 0x800000) : f);
    d.e = eb ? eb - 127 : -126;
    d.neg = (u >> 31) & 1;
    return d;
}

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
               (tensor_core.mma_k16_f32), whose compiled twin is emulators.c's refsim_mma_k16_f32 */
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

/* ============================================================================================
   scheduling (Launch.run, _converged_step, _scheduled_step, _digest) */

static uint64_t mix64(uint64_t h, uint64_t v) {
    h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    h *= 0xBF58476D1CE4E5B9ull;
    return h ^ (h >> 31);
}

/* a 128-bit hash of every PC and of the registers of the runnable warps' threads */
static void digest(rt_state *S, uint64_t out[2]) {
    uint64_t h1 = 0x243F6A8885A308D3ull, h2 = 0x13198A2E03707344ull;
    for (int64_t t = 0; t < S->T; t++) {
        h1 = mix64(h1, (uint64_t)(uint32_t)S->pc[t]);
        h2 = mix64(h2, (uint64_t)(uint32_t)S->pc[t] * 0x94D049BB133111EBull + 1);
    }
    for (int64_t r = 0; r < S->nregs; r++) {
        int bytes = S->reg_bits[r] <= 8 ? 1 : S->reg_bits[r] / 8;
        const uint8_t *base = (const uint8_t *)S->reg[r];
        for (int64_t w = 0; w < S->NW; w++) {
            if (S->wmin[w] >= S->END) continue;
            for (int64_t t = w * 32; t < w * 32 + 32; t++) {
                uint64_t v = 0;
                memcpy(&v, base + t * bytes, (size_t)bytes);
                h1 = mix64(h1, v);
                h2 = mix64(h2, v * 0x94D049BB133111EBull + 7);
            }
        }
    }
    out[0] = h1;
    out[1] = h2;
}

/* the next step: p and its threads (ascending) in S->th_buf; RT_DONE when every block finished */
static int choose(rt_state *S, int32_t *p_out, int32_t *n_out, int64_t *nw_out) {
    const int32_t END = (int32_t)S->END;
    int32_t p = END;
    int any_cand = 0, any_pick = 0;
    for (int64_t w = 0; w < S->NW; w++) {
        int32_t m = S->wmin[w];
        if (m >= END) continue;
        any_cand = 1;
        if (S->yielding[w]) continue;
        any_pick = 1;
        p = m < p ? m : p;
    }
    if (!any_cand) {
        int64_t ex = 0;
        for (int64_t s = 0; s < S->nslots; s++) ex += S->n_exited[s];
        if (ex == S->T && S->next_block >= S->nblocks) return RT_DONE;
        return E_DEADLOCK_BARRIER;
    }
    if (!any_pick) {
        /* every runnable warp yielded: a deadlock only after DEADLOCK_ROUNDS such rounds with no
           change at all (memory writes, exits, barrier releases, registers, PCs) */
        if (S->progress == S->last_progress) {
            uint64_t dg[2];
            digest(S, dg);
            int same = S->has_digest && dg[0] == S->last_digest[0] && dg[1] == S->last_digest[1];
            S->stall_rounds = same ? S->stall_rounds + 1 : 0;
            S->last_digest[0] = dg[0];
            S->last_digest[1] = dg[1];
            S->has_digest = 1;
            if (S->stall_rounds >= S->deadlock_rounds) return E_DEADLOCK_SPIN;
        } else {
            S->stall_rounds = 0;
            S->has_digest = 0;
        }
        S->last_progress = S->progress;
        memset(S->yielding, 0, (size_t)S->NW);
        for (int64_t w = 0; w < S->NW; w++) p = S->wmin[w] < p ? S->wmin[w] : p;
    }
    uint8_t *chosen = S->mark + S->T;                 /* NW flags after the T thread marks */
    int64_t nw = 0;
    if (S->random) {
        int64_t npick = 0;
        for (int64_t w = 0; w < S->NW; w++) npick += S->wmin[w] < END && !S->yielding[w];
        uint64_t k = pcg_integers(S, (uint64_t)npick);
        int64_t w0 = -1;
        for (int64_t w = 0; w < S->NW; w++)
            if (S->wmin[w] < END && !S->yielding[w] && k-- == 0) {
                w0 = w;
                break;
            }
        p = S->wmin[w0];
        for (int64_t w = 0; w < S->NW; w++) {
            double u = pcg_double(S);
            chosen[w] = S->wmin[w] == p && !S->yielding[w] && u < 0.5;
        }
        chosen[w0] = 1;
    } else {
        for (int64_t w = 0; w < S->NW; w++) chosen[w] = S->wmin[w] == p && !S->yielding[w];
    }
    int32_t n = 0;
    int32_t *th = S->th_buf;
    for (int64_t w = 0; w < S->NW; w++) {
        if (!chosen[w]) continue;
        S->wlist[nw++] = (int32_t)w;
        uint32_t mask = S->wmask[w];
        if (mask == 0xFFFFFFFFu) {
            for (int l = 0; l < 32; l++) th[n + l] = (int32_t)(w * 32 + l);
            n += 32;
        } else {
            for (; mask; mask &= mask - 1) th[n++] = (int32_t)(w * 32 + __builtin_ctz(mask));
        }
    }
    *p_out = p;
    *n_out = n;
    *nw_out = nw;
    S->nwlist = nw;
    return RT_OK;
}

/* after a step: the per-warp minimum PCs of the warps it ran (S->wlist) and of the slots it changed */
static void after_step(rt_state *S) {
    for (int64_t j = 0; j < S->nwlist; j++) warp_refresh(S, S->wlist[j]);
    if (!S->any_dirty) return;
    S->any_dirty = 0;
    for (int64_t s = 0; s < S->nslots; s++)
        if (S->slot_dirty[s]) {
            slot_refresh(S, s);
            S->slot_dirty[s] = 0;
        }
}

int refsim_rt_run(rt_state *S) {
    if (S->resume) {                       /* Python executed the step handed to it */
        S->resume = 0;
        after_step(S);
    }
    for (;;) {
        int32_t p, n;
        int64_t nw;
        int r = choose(S, &p, &n, &nw);
        if (r == RT_DONE) {
            for (int64_t t = 0; t < S->T; t++) S->act[t] = (int32_t)t;
            complete_async(S, S->act, (int32_t)S->T, -1);
            return RT_DONE;
        }
        if (r) return r;
        S->steps++;
        S->warp_instructions += nw;
        S->thread_instructions += n;
        if (S->op_count[p] == 0) S->op_first[p] = S->steps;
        S->op_count[p] += nw;
        if (S->warp_instructions > S->max_wi) {
            S->err_ins = p;
            return E_LIMIT;
        }
        r = S->exec(S, p, S->th_buf, n);
        if (r == RT_CALLBACK) {
            S->cb_p = p;
            S->cb_n = n;
            S->resume = 1;
            return RT_CALLBACK;
        }
        if (r) return r;
        after_step(S);
    }
}

/* Launch.__init__'s block placement: every slot gets a block, every warp its minimum PC */
void refsim_rt_start(rt_state *S) {
    for (int64_t s = 0; s < S->nslots; s++) start_block(S, s);
    for (int64_t w = 0; w < S->NW; w++) warp_refresh(S, w);
    memset(S->slot_dirty, 0, (size_t)S->nslots);
    S->any_dirty = 0;
}

void refsim_rt_free(rt_state *S) {
    if (!S->fifo) return;
    for (int64_t s = 0; s < S->nslots; s++) free(S->fifo[s].e);
    memset(S->fifo, 0, (size_t)S->nslots * sizeof(rt_fifo));
}

static const rt_api API = {rt_ld, rt_st, rt_atom, rt_cp_async, rt_cp_wait, rt_bar, rt_exit_threads, rt_ldmatrix,
                           rt_mma_run, rt_check_init, rt_check_init_warps, rt_partial_warp};

const rt_api *refsim_rt_api(void) { return &API; }
int64_t refsim_rt_sizeof_state(void) { return (int64_t)sizeof(rt_state); }
int64_t refsim_rt_sizeof_fifo(void) { return (int64_t)sizeof(rt_fifo); }
