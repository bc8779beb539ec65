/* refsim native: the runtime of refsim.ptx's compiled execution path (refsim.ptx.compiled),
   part 4 of 4: the scheduler and the run loop. Built as one unit: ptx_runtime.h, emulators.c,
   ptx_threads.c, ptx_memory.c, ptx_tensor.c, this file.

   Oracle: refsim.ptx's NumPy interpreter (refsim/ptx/engine.py), rule for rule. Every function here
   names the interpreter method it reproduces; the tests run every kernel through both and compare
   memory, statistics and errors bit for bit (tests/ptx/compiled/).

   scheduler     one step = (p, threads): p = the lowest per-warp minimum PC among warps that are not
                 yielding (lockstep) or a seeded random warp's (numpy's PCG64 stream, drawn as
                 Generator.integers / Generator.random draw it); the threads are those at p in the
                 chosen warps, in ascending order. Statistics are counted before the instruction runs.
   instructions  the generated kernel code executes ALU instructions itself and calls the runtime's
                 (through S->api) for memory, the cp.async copy, ldmatrix and mma, each
                 vectorised over the step's threads exactly as the interpreter: every check over all
                 threads first (in the interpreter's order), then the effects. Steps whose one
                 definition is Python (barriers, exit, cp.async groups, refsim.ptx.hopper) return
                 RT_CALLBACK and run over a LaunchView (refsim/ptx/compiled/view.py).
   arithmetic    fp16/fp32 as refsim.arith.fp (ptx_runtime.h); no tensor-core model of its own: mma's
                 finite f16 x f16 + f32 k16 steps call emulators.c's refsim_mma_k16_f32 (the declared
                 twin of refsim.arith.mma_steps.mma_k16_f32), its integer steps refsim_mma_int (the
                 declared twin of refsim.arith.integer_mma.mma_int), every other mma step runs in
                 Python (RT_CALLBACK). Built with -ffp-contract=off. */

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

/* refsim.ptx.loops.LoopState.visit: value j of warp w's state at backward branch p (j < |W(p)|:
   register W(p)[j]; j = |W(p)|: the pcs), lane l */
static uint64_t loop_value(const rt_state *S, int32_t p, int32_t j, int64_t t) {
    int32_t nw = S->loop_roff[p + 1] - S->loop_roff[p];
    if (j == nw) return (uint64_t)(uint32_t)S->pc[t];
    int32_t r = S->loop_regs[S->loop_roff[p] + j];
    switch (S->reg_bits[r]) {
    case 64: return ((const uint64_t *)S->reg[r])[t];
    case 32: return ((const uint32_t *)S->reg[r])[t];
    case 16: return ((const uint16_t *)S->reg[r])[t];
    default: return ((const uint8_t *)S->reg[r])[t];          /* 8-bit registers and predicates */
    }
}

/* whether warp w's state at p equals the kept one: exact, value by value (value v: j = v / 32, lane
   v % 32), starting at the value that differed last time, so a changing loop usually costs one */
static int loop_same(rt_state *S, int32_t w, int32_t p) {
    const uint64_t *ref = S->loop_ref[w];
    int64_t n = ((int64_t)S->loop_roff[p + 1] - S->loop_roff[p] + 1) * 32;
    int64_t v = S->loop_miss[w] < n ? S->loop_miss[w] : 0;
    for (int64_t k = 0; k < n; k++, v = v + 1 == n ? 0 : v + 1)
        if (loop_value(S, p, (int32_t)(v / 32), (int64_t)w * 32 + v % 32) != ref[v]) {
            S->loop_miss[w] = (int32_t)v;
            return 0;
        }
    return 1;
}

/* the warps of the step (S->wlist) at the pure backward branch p, before it runs: Brent's cycle
   finding on each warp's state over its clean visits of p */
static int loop_visit(rt_state *S, int32_t p) {
    int any = 0;
    for (int64_t i = 0; i < S->nwlist; i++) {
        int32_t w = S->wlist[i];
        if (S->loop_dirty[w] || S->loop_head[w] != p) {
            S->loop_head[w] = p;
            S->loop_dirty[w] = 0;
            S->loop_count[w] = 0;
            continue;
        }
        int64_t c = ++S->loop_count[w];
        if (c >= 2 && loop_same(S, w, p)) {
            S->loop_hit[w] = 1;
            any = 1;
        }
        if ((c & (c - 1)) == 0) {
            if (!S->loop_ref[w] && !(S->loop_ref[w] = (uint64_t *)malloc((size_t)S->loop_cap * 8))) return E_NOMEM;
            int32_t n = S->loop_roff[p + 1] - S->loop_roff[p] + 1;
            for (int32_t j = 0; j < n; j++)
                for (int64_t l = 0; l < 32; l++) S->loop_ref[w][(int64_t)j * 32 + l] = loop_value(S, p, j, (int64_t)w * 32 + l);
        }
    }
    return any ? E_DEADLOCK_LOOP : 0;
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
        for (int64_t t = 0; t < S->T; t++) ex += S->exited[t];
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
        if (S->loop_kind[p] == 1) {
            for (int64_t j = 0; j < nw; j++) S->loop_dirty[S->wlist[j]] = 1;
        } else if (S->loop_kind[p] == 2 && (r = loop_visit(S, p))) {
            S->err_ins = p;
            return r;
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
    if (S->loop_ref)
        for (int64_t w = 0; w < S->NW; w++) {
            free(S->loop_ref[w]);
            S->loop_ref[w] = NULL;
        }
    if (!S->fifo) return;
    for (int64_t s = 0; s < S->nslots; s++) free(S->fifo[s].e);
    memset(S->fifo, 0, (size_t)S->nslots * sizeof(rt_fifo));
}

static const rt_api API = {rt_ld, rt_st, rt_atom, rt_cp_async, rt_ldmatrix,
                           rt_mma_run, rt_check_init, rt_check_init_warps, rt_partial_warp};

const rt_api *refsim_rt_api(void) { return &API; }
int64_t refsim_rt_sizeof_state(void) { return (int64_t)sizeof(rt_state); }
int64_t refsim_rt_sizeof_fifo(void) { return (int64_t)sizeof(rt_fifo); }
