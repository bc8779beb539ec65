/* refsim native: the declarations shared by the compiled PTX runtime (ptx_runtime.c) and the C that
   refsim.ptx.compiled generates for one kernel. Both are built from this text followed by their own.

   The state of one launch (rt_state) mirrors refsim.ptx's interpreter state field by field: per-thread
   arrays of T = slots x padded block threads (thread t = lane t % 32 of warp t / 32), one array of T
   elements per declared register (uint8 0/1 for predicates), the block slots' shared memory, the
   threads' local memory and the global buffers at their virtual addresses. Every array is allocated by
   Python (NumPy) and handed over as a pointer in a config vector (RT_CFG_*), so Python reads the state
   back for messages. The generated code executes one static instruction for a list of threads (one
   scheduler step); memory, barriers, cp.async, warp-wide and tensor-core instructions call the runtime
   through S->api.

   one step:     runtime picks p and the threads th[0..n) (ascending) -> exec(S, p, th, n)
                 -> generated i_<p>(): guard, operands, body, pc update   (or a runtime call)
                 -> runtime refreshes the per-warp minimum PC of the warps it touched */
#ifndef REFSIM_PTX_RUNTIME_H
#define REFSIM_PTX_RUNTIME_H
#include <stdint.h>
#include <string.h>
#include <stdlib.h>
#include <math.h>

#define RT_INLINE static inline __attribute__((always_inline))
#define RT_NOINLINE static __attribute__((noinline))

/* state spaces (as in refsim.ptx.memory) */
enum { SP_GENERIC = 0, SP_GLOBAL, SP_SHARED, SP_LOCAL, SP_PARAM, SP_CONST };
#define RT_SHARED_WINDOW 0x100000000ull
#define RT_LOCAL_WINDOW 0x200000000ull
#define RT_WINDOW_BYTES 0x100000000ull

/* status codes: 0 = ok; RT_CALLBACK = Python executes this step; the rest are errors whose message
   refsim.ptx.compiled.runner writes (the interpreter's words) from S->err_* */
enum {
    RT_OK = 0, RT_DONE, RT_CALLBACK,
    E_LIMIT, E_DEADLOCK_BARRIER, E_DEADLOCK_SPIN, E_MISALIGNED, E_OOB_GLOBAL, E_OOB_SHARED, E_OOB_LOCAL,
    E_OOB_PARAM, E_READONLY, E_TRAP, E_RACE_READ, E_RACE_WRITE, E_RACE_SAME_BYTE, E_RACE_PENDING,
    E_UNINIT_REG, E_UNINIT_GUARD, E_UNINIT_SHARED, E_UNINIT_SHARED_NOWHO, E_PARTIAL_MMA, E_PARTIAL_LDMATRIX,
    E_BARRIER_ID, E_SRC_SIZE, E_NOMEM, E_DEADLOCK_LOOP, E_MBAR_ACCESS, E_RACE_ASYNC, E_RACE_WGMMA,
    E_RACE_WGMMA_SMEM
};

/* one memory instruction's static shape (ld, st, atom, red, cp.async, ldmatrix) */
typedef struct rt_mem {
    int32_t ins;        /* static instruction index (for messages) */
    int32_t space;      /* SP_*: the instruction's state space (generic when none is written) */
    int32_t esize;      /* element bytes */
    int32_t vec;        /* vector width (1, 2, 4) */
    int32_t spin;       /* index of this instruction's spin-check slot, or -1 (not a flag load) */
    int32_t ordered;    /* atomics: the result depends on the order of the accesses (float adds) */
    /* atomics: the new value of one access (old, b, c, to shared memory), the kernel's C generated from
       refsim.ptx.semantics.atomic.c_apply; NULL for the other instructions */
    uint64_t (*apply)(uint64_t old, uint64_t b, uint64_t c, int32_t shared);
} rt_mem;

/* the mma forms compiled, each through its declared compiled twin in emulators.c
   (refsim.ptx.compiled.instructions.TWINS): where each lane's register elements sit in A (M x K),
   B (K x N), C/D (M x N), and how the registers hold them */
enum { RT_MMA_F16_F32 = 0,   /* m16n8k16 f16 x f16 + f32: refsim_mma_k16_f32 */
       RT_MMA_INT };         /* s8/u8 (k16, k32), s4/u4 (k32, k64) -> s32: refsim_mma_int */
typedef struct rt_mma {
    int32_t ins;
    int32_t M, N, K;
    int32_t na, nb, nc, nd;  /* registers per lane */
    const int16_t *a_at, *b_at, *c_at;      /* (32, elements): row * cols + col of each lane's elements */
    int32_t kind;            /* RT_MMA_* */
    int32_t bits;            /* bits of an A / B element (16, 8 or 4), packed from bit 0 up */
    int32_t a_signed, b_signed;             /* integer elements: sign-extended (s8, s4) or not */
    int32_t satfinite;       /* integer: .satfinite, passed to the twin */
} rt_mma;

typedef struct rt_async {        /* one pending cp.async copy of one thread */
    int32_t t;
    int32_t size;
    int64_t gid;
    int64_t rec;                 /* the issuing cp.async execution */
    int64_t dst;                 /* flat byte offset in the shared array */
    uint8_t data[16];
} rt_async;

typedef struct rt_fifo { rt_async *e; int64_t n, cap; } rt_fifo;

typedef struct rt_state rt_state;
typedef int (*rt_exec_fn)(rt_state *S, int32_t p, const int32_t *th, int32_t n);

typedef struct rt_api {
    int (*ld)(rt_state *S, const rt_mem *m, const int32_t *th, int32_t n, const uint64_t *addr, uint8_t *out);
    int (*st)(rt_state *S, const rt_mem *m, const int32_t *th, int32_t n, const uint64_t *addr, const uint8_t *val);
    int (*atom)(rt_state *S, const rt_mem *m, const int32_t *th, int32_t n, const uint64_t *addr,
                const uint64_t *b, const uint64_t *c, uint64_t *old);
    int (*cp_async)(rt_state *S, const rt_mem *m, const int32_t *th, int32_t n, const uint64_t *dst,
                    const uint64_t *src, const int64_t *srcsize, int32_t size);
    int (*ldmatrix)(rt_state *S, const rt_mem *m, int32_t num, const int16_t *rl, const int16_t *lay,
                    const int32_t *th, int32_t n, const uint64_t *addr, uint32_t *out);
    int (*mma)(rt_state *S, const rt_mma *d, const int32_t *th, int32_t n, const uint32_t *a, const uint32_t *b,
               const uint32_t *c, uint32_t *out);
    int (*check_init)(rt_state *S, int32_t ins, int32_t slot, const int32_t *th, int32_t n);
    int (*check_init_warps)(rt_state *S, int32_t ins, int32_t slot, const int32_t *th, int32_t n);
    int (*partial_warp)(rt_state *S, int32_t code, int32_t ins, const int32_t *th, int32_t n);
} rt_api;

struct rt_state {
    const rt_api *api;
    /* geometry */
    int64_t T, NW, tpb, nslots, nthreads, END, nblocks, next_block, nins;
    int64_t grid[3], block[3];
    /* per thread (T) */
    int32_t *pc;
    uint8_t *exited, *bar_wait, *bar_pred;
    int64_t *bar_id, *group;
    int32_t *bar_pc;
    uint32_t *tid[3];
    /* per slot */
    int64_t *slot_block, *bar_count, *bar_need;                 /* bar_count, bar_need: (nslots, 16) */
    int64_t any_dirty;
    uint32_t *ctaid;                                             /* (nslots, 3) */
    uint8_t *slot_dirty;
    /* per warp */
    int32_t *wmin;
    uint32_t *wmask;                                             /* lanes whose pc is wmin */
    int32_t *wlist;                                              /* the warps of the current step */
    int64_t nwlist;
    uint8_t *yielding;
    /* registers */
    int64_t nregs;
    void **reg;
    int32_t *reg_bits;
    uint8_t **reg_init;                                          /* poison only */
    /* memory */
    uint8_t *shared;
    int64_t shared_stride, shared_size, dyn_offset, dyn_bytes;
    uint8_t *local;
    int64_t local_stride, local_bytes;
    uint8_t *param;
    int64_t param_size;
    int64_t nbuf;
    uint64_t *gbase, *gsize;
    uint8_t **gptr;
    uint8_t *gwritable;
    uint64_t *sym;                                               /* symbol addresses, translator order */
    uint8_t *shared_init;                                        /* poison only */
    int64_t *race_w, *race_r;                                    /* race only */
    int32_t *pending;                                            /* race only */
    int64_t *stamp;                                              /* race only: per shared byte */
    uint8_t *wg_pending;     /* race + wgmma: [slot * T + t] = 1 while an incomplete wgmma's accumulator */
    int32_t *wg_smem;        /* race + wgmma: per shared byte, incomplete wgmmas reading it */
    int64_t stamp_now, n_records;
    uint8_t *hbytes;                                             /* refsim.ptx.hopper: per shared byte, 1 = a live mbarrier's */
    int64_t *gen_w;                                              /* race + hopper: unfenced generic writer per shared byte */
    int32_t *async_bid, *async_phase;                            /* race + hopper, per shared byte: the barrier (block-local
                                                                    id, -1: none) and phase completing the copy that wrote it */
    int32_t *async_obs;                                          /* (nslots, max_mbar, tpb): latest phase each thread saw complete */
    int64_t max_mbar;
    /* options */
    int64_t race, poison, random, max_wi, deadlock_rounds;
    int32_t *aorder;                                             /* atomic_order: a permutation of ranks */
    int64_t naorder;                                             /* its length (0: thread order) */
    int64_t tc_L, tc_F, tc_ez32;           /* the architecture's tensor-core model, for refsim_mma_k16_f32 */
    /* numpy's PCG64 (Generator.integers / random) */
    uint64_t pcg_hi, pcg_lo, pcg_inc_hi, pcg_inc_lo;
    int64_t pcg_has32;
    uint32_t pcg_u32;
    /* statistics */
    int64_t warp_instructions, thread_instructions, shared_wavefronts, shared_requests;
    int64_t global_bytes_read, global_bytes_written, barriers, blocks, steps, float_atomic_contention;
    int64_t *op_count, *op_first;                                /* per static instruction */
    /* progress and deadlock detection */
    int64_t progress, last_progress, stall_rounds, has_digest;
    uint64_t last_digest[2];
    /* spin (flag-load) checks */
    int64_t nspin;
    uint64_t **spin_val;
    uint8_t **spin_seen;
    /* pure loops (refsim.ptx.loops): per instruction 0 pure, 1 impure, 2 pure backward branch; per warp
       the branch last visited, an impure instruction since, clean visits, the kept state, looping */
    uint8_t *loop_kind;
    int32_t *loop_roff, *loop_regs;                              /* W(p): loop_regs[loop_roff[p] .. loop_roff[p + 1]) */
    int64_t loop_cap;                                            /* values of one kept state: 32 (max |W(p)| + 1) */
    int32_t *loop_head, *loop_miss;                              /* per warp; miss: where the last comparison failed */
    uint8_t *loop_dirty, *loop_hit;
    int64_t *loop_count;
    uint64_t **loop_ref;                                         /* per warp, allocated at its first use */
    /* cp.async: pending copies per slot, in issue order */
    rt_fifo *fifo;
    /* scratch of T (or T * 32 bytes) entries, for the generated code and the runtime */
    int32_t *th_buf, *act, *act2;
    uint64_t *u64a, *u64b, *u64c, *u64d;
    uint8_t *bytes;                                              /* T * 64 */
    uint32_t *u32a;                                              /* T * 8 */
    uint8_t *mark;                                               /* T */
    /* the step handed to Python (RT_CALLBACK) */
    int64_t cb_p, cb_n, resume;
    /* error */
    int64_t err_code, err_ins, err_thread, err_thread2, err_aux;
    uint64_t err_addr;
    rt_exec_fn exec;
};

/* ----------------------------------------------------------------------------------------------
   bit views and the exact fp conversions the semantics use (refsim.ptx.semantics.floating, arith.fp):
   NaN results of f16/bf16/f32 instructions are canonical (0x7FFF, 0x7FFF, 0x7FFFFFFF). */
RT_INLINE float rt_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
RT_INLINE uint32_t rt_u32f(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
RT_INLINE double rt_f64(uint64_t u) { double f; memcpy(&f, &u, 8); return f; }
RT_INLINE uint64_t rt_u64d(double f) { uint64_t u; memcpy(&u, &f, 8); return u; }

/* fp16 bits -> float (exact; NaN payloads are never observed: every NaN result is made canonical) */
RT_INLINE float rt_h2f(uint16_t h) {
    uint32_t s = (uint32_t)(h & 0x8000u) << 16, e = h & 0x7C00u, m = h & 0x3FFu;
    uint32_t normal = s | ((((uint32_t)h & 0x7FFFu) << 13) + 0x38000000u);     /* rebias 15 -> 127 */
    uint32_t special = s | 0x7F800000u | (m << 13);
    float sub = (float)m * 0x1p-24f;                                            /* exact: m < 2^10 */
    uint32_t b = e == 0x7C00u ? special : normal;
    return e == 0 ? (s ? -sub : sub) : rt_f32(b);
}

/* float -> fp16 bits, one round-to-nearest-even (subnormals kept, >= 65520 -> Inf, NaN -> quiet NaN):
   normal halves round at bit 13 of the float's bits (the carry moves into the exponent); subnormal
   halves are |x| + 0.5, whose float grid near 0.5 is exactly the fp16 subnormal grid 2^-24 */
RT_INLINE uint16_t rt_f2h(float x) {
    uint32_t u = rt_u32f(x), s = (u >> 16) & 0x8000u, a = u & 0x7FFFFFFFu;
    uint32_t normal = ((a + 0xFFFu + ((a >> 13) & 1u)) - 0x38000000u) >> 13;
    uint32_t sub = rt_u32f(rt_f32(a) + 0.5f) - 0x3F000000u;
    uint32_t big = a > 0x7F800000u ? 0x7E00u : 0x7C00u;
    uint32_t r = a >= 0x477FF000u ? big : (a >= 0x38800000u ? normal : sub);
    return (uint16_t)(s | r);
}

/* double -> fp16 bits, one round-to-nearest-even (NumPy's float64 -> float16 cast), the same way
   (rounding at bit 42; subnormal halves through |x| + 2^28, whose double grid is 2^-24) */
RT_INLINE uint16_t rt_d2h(double x) {
    uint64_t u = rt_u64d(x), a = u & 0x7FFFFFFFFFFFFFFFull;
    uint32_t s = (uint32_t)(u >> 48) & 0x8000u;
    uint64_t normal = ((a + 0x1FFFFFFFFFFull + ((a >> 42) & 1u)) - 0x3F00000000000000ull) >> 42;
    uint64_t sub = rt_u64d(rt_f64(a) + 0x1p28) - 0x41B0000000000000ull;      /* double grid 2^-24 near 2^28 */
    uint64_t big = a > 0x7FF0000000000000ull ? 0x7E00u : 0x7C00u;
    uint64_t r = a >= 0x40EFFE0000000000ull ? big : (a >= 0x3F10000000000000ull ? normal : sub);
    return (uint16_t)(s | (uint32_t)r);
}


/* float -> bf16 bits RNE (refsim.arith.fp.cvt_f32_to_bf16; NaN handled by the caller) */
RT_INLINE uint16_t rt_f2bf(uint32_t u) {
    return (uint16_t)(((uint64_t)u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

RT_INLINE int rt_isnan_f(float x) { return x != x; }
RT_INLINE int rt_isnan_d(double x) { return x != x; }

/* .rn f16 arithmetic as NumPy's float16 ufuncs (float32 then one rounding; innocuous, Figueroa) */
RT_INLINE uint16_t rt_h_canon(uint16_t h) { return ((h & 0x7C00u) == 0x7C00u && (h & 1023u)) ? 0x7FFFu : h; }
RT_INLINE uint16_t rt_hadd(uint16_t a, uint16_t b) { return rt_h_canon(rt_f2h(rt_h2f(a) + rt_h2f(b))); }
RT_INLINE uint16_t rt_hsub(uint16_t a, uint16_t b) { return rt_h_canon(rt_f2h(rt_h2f(a) - rt_h2f(b))); }
RT_INLINE uint16_t rt_hmul(uint16_t a, uint16_t b) { return rt_h_canon(rt_f2h(rt_h2f(a) * rt_h2f(b))); }
/* fma.rn.f16: fp16(float64(a) * float64(b) + float64(c)) (refsim.arith.fp._f16_fma_fused) */
RT_INLINE uint16_t rt_hfma(uint16_t a, uint16_t b, uint16_t c) {
    double p = (double)rt_h2f(a) * (double)rt_h2f(b);
    return rt_h_canon(rt_d2h(p + (double)rt_h2f(c)));
}
#define RT_X3(f, a, b, c) ((uint32_t)f((uint16_t)(a), (uint16_t)(b), (uint16_t)(c)) | \
    ((uint32_t)f((uint16_t)((a) >> 16), (uint16_t)((b) >> 16), (uint16_t)((c) >> 16)) << 16))
#define RT_X2(f, a, b) ((uint32_t)f((uint16_t)(a), (uint16_t)(b)) | ((uint32_t)f((uint16_t)((a) >> 16), (uint16_t)((b) >> 16)) << 16))

RT_INLINE uint32_t rt_f_canon(float r) { return r != r ? 0x7FFFFFFFu : rt_u32f(r); }
RT_INLINE uint32_t rt_fadd(uint32_t a, uint32_t b) { return rt_f_canon(rt_f32(a) + rt_f32(b)); }
RT_INLINE uint32_t rt_fsub(uint32_t a, uint32_t b) { return rt_f_canon(rt_f32(a) - rt_f32(b)); }
RT_INLINE uint32_t rt_fmul(uint32_t a, uint32_t b) { return rt_f_canon(rt_f32(a) * rt_f32(b)); }
RT_INLINE uint32_t rt_fdiv(uint32_t a, uint32_t b) { return rt_f_canon(rt_f32(a) / rt_f32(b)); }
RT_INLINE uint32_t rt_fsqrt(uint32_t a) { return rt_f_canon(sqrtf(rt_f32(a))); }
/* fma.rn.f32 as refsim.arith.fp.f32_fma: exact double product, the double sum rounded to odd
   (TwoSum error term, one-ulp nudge), one RNE to float (Boldo & Melquiond) */
RT_INLINE uint32_t rt_ffma(uint32_t a, uint32_t b, uint32_t c) {
    double p = (double)rt_f32(a) * (double)rt_f32(b), cc = (double)rt_f32(c);
    double s = p + cc, bb = s - p, e = (p - (s - bb)) + (cc - bb);
    if (isfinite(s) && e != 0 && (rt_u64d(s) & 1) == 0) s = nextafter(s, e > 0 ? INFINITY : -INFINITY);
    return rt_f_canon((float)s);
}

/* integer helpers */
RT_INLINE uint64_t rt_mulhi_u64(uint64_t a, uint64_t b) { return (uint64_t)(((unsigned __int128)a * b) >> 64); }
RT_INLINE uint64_t rt_mulhi_s64(uint64_t a, uint64_t b) {
    return (uint64_t)(((__int128)(int64_t)a * (__int128)(int64_t)b) >> 64);
}
RT_INLINE int rt_bitlen64(uint64_t x) { return x ? 64 - __builtin_clzll(x) : 0; }


/* ----------------------------------------------------------------------------------------------
   per-instruction helpers of the generated code (refsim.ptx.semantics, handler by handler); `w` is
   the instruction width, constant at every call site. Values are unsigned bit patterns. */
#define RT_MASK(w) ((w) >= 64 ? ~0ull : ((1ull << (w)) - 1))
RT_INLINE int64_t rt_sext(uint64_t x, int w) {              /* two's-complement value of the low w bits */
    if (w >= 64) return (int64_t)x;
    uint64_t m = 1ull << (w - 1);
    return (int64_t)(((x & RT_MASK(w)) ^ m) - m);
}

RT_INLINE uint32_t rt_sat_s32(int64_t v) { return (uint32_t)(v < INT32_MIN ? INT32_MIN : (v > INT32_MAX ? INT32_MAX : v)); }
RT_INLINE int64_t rt_clamp_s64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : (v > hi ? hi : v); }

/* bfe.{u,s}{32,64} (integer.bfe) */
RT_INLINE uint64_t rt_bfe(uint64_t a, uint32_t pos, uint32_t len, int sgn, int w) {
    uint64_t msb = (uint64_t)w - 1, u = a & RT_MASK(w), p = pos & 0xFFu, n = len & 0xFFu;
    uint64_t field = p > msb ? 0 : u >> (p < 63 ? p : 63);
    uint64_t avail = p > msb ? 0 : msb + 1 - p, take = n < avail ? n : avail;
    uint64_t mask = take >= 64 ? ~0ull : (1ull << (take < 63 ? take : 63)) - 1;
    uint64_t out = field & mask;
    if (sgn) {
        uint64_t sp = p + n - 1;
        sp = sp < msb ? sp : msb;
        uint64_t sbit = n == 0 ? 0 : (u >> (sp < 63 ? sp : 63)) & 1;
        out |= sbit ? ~mask : 0;
    }
    return out & RT_MASK(w);
}

/* bfi.b{32,64} (integer.bfi) */
RT_INLINE uint64_t rt_bfi(uint64_t a, uint64_t b, uint32_t pos, uint32_t len, int w) {
    uint64_t msb = (uint64_t)w - 1, p = pos & 0xFFu, n = len & 0xFFu;
    uint64_t ua = a & RT_MASK(w), ub = b & RT_MASK(w);
    uint64_t avail = p > msb ? 0 : msb + 1 - p, take = n < avail ? n : avail;
    uint64_t low = take >= 64 ? ~0ull : (1ull << (take < 63 ? take : 63)) - 1;
    uint64_t sh = p < 63 ? p : 63;
    uint64_t mask = take == 0 ? 0 : low << sh;
    return ((ub & ~mask) | ((ua << sh) & mask)) & RT_MASK(w);
}

/* shl / shr (amounts above the width clamp to it) and shf */
RT_INLINE uint64_t rt_shl(uint64_t a, uint32_t b, int w) {
    uint64_t n = b < (uint32_t)w ? b : (uint64_t)w;
    return n >= 64 ? 0 : ((a & RT_MASK(w)) << n) & RT_MASK(w);
}
RT_INLINE uint64_t rt_shr_u(uint64_t a, uint32_t b, int w) {
    uint64_t n = b < (uint32_t)w ? b : (uint64_t)w;
    return n >= 64 ? 0 : (a & RT_MASK(w)) >> n;
}
RT_INLINE uint64_t rt_shr_s(uint64_t a, uint32_t b, int w) {
    uint64_t n = b < (uint32_t)w ? b : (uint64_t)w;
    return (uint64_t)(rt_sext(a, w) >> (n < 63 ? n : 63)) & RT_MASK(w);
}
RT_INLINE uint32_t rt_shf(uint32_t a, uint32_t b, uint32_t c, int left, int clamp) {
    uint64_t n = clamp ? (c < 32u ? c : 32u) : (c & 31u), v = ((uint64_t)b << 32) | a;
    return left ? (uint32_t)((v << n) >> 32) : (uint32_t)(v >> n);
}

/* prmt.b32{.mode} (integer.prmt); mode 0 = generic, 1..6 = f4e b4e rc8 ecl ecr rc16 */
RT_INLINE uint32_t rt_prmt(uint32_t a, uint32_t b, uint32_t c, int mode) {
    static const uint16_t T[6][4] = {{0x3210, 0x4321, 0x5432, 0x6543}, {0x5670, 0x6701, 0x7012, 0x0123},
                                     {0x0000, 0x1111, 0x2222, 0x3333}, {0x3210, 0x3211, 0x3222, 0x3333},
                                     {0x0000, 0x1110, 0x2210, 0x3210}, {0x1010, 0x3232, 0x1010, 0x3232}};
    uint64_t src = ((uint64_t)b << 32) | a;
    uint32_t sel = mode ? T[mode - 1][c & 3] : c, out = 0;
    for (int j = 0; j < 4; j++) {
        uint32_t n = (sel >> (4 * j)) & 15u, byte = (uint32_t)(src >> ((n & 7) * 8)) & 0xFFu;
        if (!mode && (n & 8)) byte = (byte & 0x80u) ? 0xFFu : 0;
        out |= byte << (8 * j);
    }
    return out;
}

RT_INLINE uint32_t rt_brev(uint64_t a, int w) {
    uint64_t r = 0;
    for (int i = 0; i < w; i++) r |= ((a >> i) & 1) << (w - 1 - i);
    return (uint32_t)r;
}
RT_INLINE uint64_t rt_brev64(uint64_t a) {
    uint64_t r = 0;
    for (int i = 0; i < 64; i++) r |= ((a >> i) & 1) << (63 - i);
    return r;
}
RT_INLINE uint32_t rt_bfind(uint64_t a, int sgn, int shiftamt, int w) {
    uint64_t u = a & RT_MASK(w);
    if (sgn && rt_sext(a, w) < 0) u = ~u & RT_MASK(w);
    int n = rt_bitlen64(u);
    if (n == 0) return 0xFFFFFFFFu;
    return (uint32_t)(shiftamt ? (w - 1) - (n - 1) : n - 1);
}

/* unsigned / signed division and remainder for widths <= 32 (exact in int64); x / 0 = all ones,
   x % 0 = x (refsim's documented choice) */
RT_INLINE uint64_t rt_div(uint64_t a, uint64_t b, int sgn, int w, int rem) {
    if (sgn) {
        int64_t x = rt_sext(a, w), y = rt_sext(b, w);
        if (y == 0) return rem ? (uint64_t)x & RT_MASK(w) : RT_MASK(w);
        return (uint64_t)(rem ? x % y : x / y) & RT_MASK(w);
    }
    uint64_t x = a & RT_MASK(w), y = b & RT_MASK(w);
    if (y == 0) return rem ? x : RT_MASK(w);
    return rem ? x % y : x / y;
}

/* float decode for comparisons (exact), with .ftz: subnormals -> signed zero */
RT_INLINE double rt_dec_f32(uint32_t u, int ftz) {
    if (ftz && (u & 0x7F800000u) == 0) u &= 0x80000000u;
    return (double)rt_f32(u);
}
RT_INLINE double rt_dec_f16(uint16_t u, int ftz) {
    if (ftz && (u & 0x7C00u) == 0) u &= 0x8000u;
    return (double)rt_h2f(u);
}
RT_INLINE double rt_dec_bf16(uint16_t u) { return (double)rt_f32((uint32_t)u << 16); }

/* setp on floats: cmp 0 eq 1 ne 2 lt 3 le 4 gt 5 ge, +6 for the unordered forms, 12 num, 13 nan */
RT_INLINE uint8_t rt_fcmp(double x, double y, int cmp) {
    int un = x != x || y != y;
    if (cmp == 12) return (uint8_t)!un;
    if (cmp == 13) return (uint8_t)un;
    int c = cmp % 6, r;
    switch (c) {
    case 0: r = x == y; break;
    case 1: r = x != y; break;
    case 2: r = x < y; break;
    case 3: r = x <= y; break;
    case 4: r = x > y; break;
    default: r = x >= y; break;
    }
    return (uint8_t)(cmp >= 6 ? (un || r) : (r && !un));
}

/* min/max.{f32,f16} without .ftz/.NaN: one NaN -> the other, -0 below +0, both NaN -> canonical */
RT_INLINE uint32_t rt_fminmax(uint32_t a, uint32_t b, int is_max, int f16) {
    double x = f16 ? (double)rt_h2f((uint16_t)a) : (double)rt_f32(a);
    double y = f16 ? (double)rt_h2f((uint16_t)b) : (double)rt_f32(b);
    int nx = x != x, ny = y != y;
    uint32_t nan = f16 ? 0x7FFFu : 0x7FFFFFFFu;
    if (nx && ny) return nan;
    if (nx) return b;
    if (ny) return a;
    int a_less = x < y || (x == y && signbit(x) && !signbit(y));
    return (a_less != is_max) ? a : b;
}

/* cvt float -> integer (convert.float_to_int): round to an integral value, saturate, NaN rule */
RT_INLINE uint64_t rt_f2i(double x, int irnd, int sgn, int w, int src_f64) {
    double r = irnd == 0 ? rint(x) : irnd == 1 ? trunc(x) : irnd == 2 ? floor(x) : ceil(x);
    if (r != r) {
        if (!src_f64 && w < 64) return 0;
        uint64_t v = 1ull << (w - 1);
        return (sgn && w == 8) ? 0xFFFFFF80ull : v;
    }
    double lo = sgn ? -ldexp(1.0, w - 1) : 0.0, hi1 = sgn ? ldexp(1.0, w - 1) : ldexp(1.0, w);
    uint64_t v;
    if (r < lo) v = sgn ? (uint64_t)rt_sext(1ull << (w - 1), w) : 0;
    else if (r >= hi1) v = sgn ? RT_MASK(w - 1) : RT_MASK(w);
    else v = sgn ? (uint64_t)(int64_t)r : (uint64_t)r;
    v &= RT_MASK(w);
    if (w == 8 && sgn && (v & 0x80u)) v |= 0xFFFFFF00ull;    /* 8-bit results extend to 32 bits */
    return v;
}

/* double -> bf16 bits RNE for values that are floats (f32 sources) */
RT_INLINE uint16_t rt_bf_canon_f32(uint32_t u) { return ((u & 0x7F800000u) == 0x7F800000u && (u & 0x7FFFFFu)) ? 0x7FFFu : rt_f2bf(u); }

/* the warp-instruction counter, read by %clock, %clock64, %globaltimer */
#define RT_CLOCK(S) ((uint64_t)(S)->warp_instructions)

#endif
