/* refsim native, PTX runtime part 2 of 4: address resolution and the memory instructions (ld, st,
   atom/red, cp.async), the shared-memory wavefront count, the race and poison checks, spin loads. */

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
    if (S->wg_smem)                  /* a byte an incomplete wgmma reads (refsim.ptx.hopper.wgmma.smem_check) */
        for (int32_t i = 0; i < n; i++) {
            if (acc[i].kind != SP_SHARED) continue;
            for (int64_t b = 0; b < nbytes; b++)
                if (S->wg_smem[acc[i].flat + b] > 0) {
                    S->err_ins = ins;
                    S->err_thread = th[i];
                    S->err_aux = (acc[i].flat + b) % S->shared_stride;
                    return E_RACE_WGMMA_SMEM;
                }
        }
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

/* checks.hopper_access: a generic access to a live mbarrier's bytes (every thread, then), under race,
   to bytes an async-proxy copy wrote before the accessing thread observed the phase completing it */
static int hopper_access(rt_state *S, int32_t ins, const int32_t *th, int32_t n, const rt_access *acc, int64_t nbytes) {
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1 && !S->async_bid) break;
        for (int32_t i = 0; i < n; i++) {
            if (acc[i].kind != SP_SHARED) continue;
            for (int64_t b = 0; b < nbytes; b++) {
                int64_t f = acc[i].flat + b;
                int bad;
                if (pass == 0) {
                    bad = S->hbytes[f] != 0;
                } else {
                    int32_t d = S->async_bid[f];
                    int64_t row = (f / S->shared_stride) * S->max_mbar + d;
                    bad = d >= 0 && S->async_obs[row * S->tpb + th[i] % S->tpb] < S->async_phase[f];
                }
                if (bad) {
                    S->err_ins = ins;
                    S->err_thread = th[i];
                    S->err_addr = (uint64_t)(f % S->shared_stride);
                    return pass == 0 ? E_MBAR_ACCESS : E_RACE_ASYNC;
                }
            }
        }
    }
    return 0;
}

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
        if (S->hbytes && (r = hopper_access(S, m->ins, th, n, acc, nbytes))) return r;
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
        if (!S->gwritable[acc[i].buf]) {                             /* memory.read_only_error */
            S->err_ins = m->ins;
            S->err_aux = acc[i].buf;
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
        if (S->hbytes && (r = hopper_access(S, m->ins, th, n, acc, nbytes))) return r;
        if (S->race && (r = race_write(S, m->ins, th, n, acc, nbytes))) return r;
        if (S->gen_w)
            for (int32_t i = 0; i < n; i++)
                if (acc[i].kind == SP_SHARED)
                    for (int64_t b = 0; b < nbytes; b++) S->gen_w[acc[i].flat + b] = th[i];
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
   atomics: the memory side of refsim.ptx.memory_ops._atomic, applied one access at a time in thread
   order (the interpreter's rounds serialise each address in thread order; distinct addresses commute).
   The arithmetic is the instruction's m->apply, generated from refsim.ptx.semantics.atomic. */

/* one atomic access: the old value out, the new one stored; statistics and poison marks */
static int atom_one(rt_state *S, const rt_mem *m, rt_access *a, uint64_t b, uint64_t c, uint64_t *old) {
    int64_t es = m->esize;
    uint64_t o = load_le(a->ptr, es);
    uint64_t nv = m->apply(o, b, c, a->kind == SP_SHARED);
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
        if (acc[i].kind == SP_GLOBAL && !S->gwritable[acc[i].buf]) {   /* memory.read_only_error */
            S->err_ins = m->ins;
            S->err_aux = acc[i].buf;
            return E_READONLY;
        }
    int changed = 0;
    if (!m->ordered) {
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
