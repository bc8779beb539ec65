// marlin.cu -- an FP16 x INT4 GEMM in Marlin's design, written for refsim.
//
// Spec
// ----
// computes     C (M, N) fp16 = A (M, K) fp16 @ W (K, N), W in Marlin's packed format
//              (refsim.formats.marlin: B int32 (K/16, 2N), s fp16 (G, N); grouped iff G > 1,
//              group size 128; per-channel iff G == 1).
// equals       refsim.emulator.marlin_kernel.marlin_gemm(A, B, s, arch=..., sms=...) bit for bit
//              (the emulator models IST-DASLab/marlin; this file follows the same dataflow and
//              association order but is written from refsim's spec, not from that source).
// launch       host code: refsim/cuda/marlin.py. One launch per step of the host M loop
//              (refsim.formats.stripes.stripes): grid = sms blocks, 256 threads (8 warps),
//              dynamic shared memory STAGES * stage bytes (shared_bytes() below, mirrored on the
//              host). Arguments: A rows of this launch (prob_m rows, several 16*MB-row problems
//              side by side when prob_m > 16*MB), B, C rows of this launch, s, locks (int32,
//              n_tiles * problems, all zero, left all zero), prob_m, prob_n, prob_k.
// tiles        M <= 16: thread_k = thread_n = 128 (TKB = 8, TNB = 8, MB = 1), else thread_k = 64,
//              thread_n = 256 (TKB = 4, TNB = 16, MB = 1..4); one entry point per (MB, TNB, TKB,
//              grouped), extern "C" names refsim_marlin_m<MB>_n<TNB>_k<TKB>_<grouped|channel>.
// dataflow     per block, per slice of its stripe (a run of k-tiles of one tile column):
//   1. cp.async 4-stage pipeline global -> shared: A tile (XOR-swizzled 16-byte units, rows past
//      prob_m re-read the last row, their results are never stored), B tile, and (grouped) the
//      scale row of the tile's group;
//   2. warp w = kw * WN + nw: n-warp nw owns 64 columns, k-warp kw the k16 blocks kw + WK*s
//      (s = 0 .. TKB/WK - 1) of every tile; A fragments by ldmatrix.x4, B words dequantised by
//      lop3 (0xEA) + sub.rn.f16x2 / fma.rn.f16x2 (exact), grouped: mul.rn.f16x2 by the scale
//      (one fp16 rounding); mma.sync.m16n8k16 with fp32 accumulators chained over the slice's
//      k16 blocks in increasing order from +0;
//   3. k-warp reduction in fp32 through shared memory: WK = 4: a0 + (a1 + (a3 + a2)),
//      WK = 2: a0 + a1 (add.rn.f32);
//   4. global reduction when a column has several slices, serialised by locks[column]
//      (ld.acquire.gpu spin, fence.acq_rel + red.relaxed.gpu.add): slice_idx 0 (highest k) stores
//      fp16(P0) into C; each next slice reads H (ld.global.cg), forms P + f32(H) (add.rn.f32) and,
//      unless it is the top slice, stores fp16 of it; the top slice resets the lock to 0;
//   5. the top slice writes fp16(final) (cvt.rn), per-channel times s[n] (mul.rn.f16x2).
// rounding     every fp operation is spelled with an explicit rounding modifier (inline PTX or
//              __fadd_rn), so ptxas cannot contract or reassociate anything.
// design       the dataflow of IST-DASLab/marlin marlin/marlin_cuda_kernel.cu (commit 2f6d7c1, as
//              refsim.emulator.marlin_kernel models it): the same tiles, stripes, k-warp split,
//              reduction association and fp16 lock-serialised global reduction. Simpler where bits
//              do not depend on it: no register double buffering of fragments, results and fp16
//              partials stored straight from the fragments (half2 words, no shared-memory staging),
//              the scale row fetched with every tile, padded A rows re-read instead of predicated
//              off, no L2 evict-first hint on B, only k-warp 0's warps take part in step 4.
//
// Stripes for a 3 x 3 tile grid on 5 blocks (k-tiles down, n-tiles across, digit = block;
// iters = ceil(9 / 5) = 2; slices of a column reduce bottom to top, the top one writes C):
//
//     n-tile:  0   1   2
//     k 0      0   1   3        column 0: block 1 (k 2)   -> block 0 (k 0-1) writes
//     k 1      0   2   3        column 1: block 2 (k 1-2) -> block 1 (k 0)   writes
//     k 2      1   2   4        column 2: block 4 (k 2)   -> block 3 (k 0-1) writes
//
// Warps of one block for the M <= 16 tile (thread_k = thread_n = 128, WN = 2, WK = 4):
//
//                   n 0..63   n 64..127
//     k16 0, 4      warp 0    warp 1       k-warp 0  (holds P after the reduction)
//     k16 1, 5      warp 2    warp 3       k-warp 1
//     k16 2, 6      warp 4    warp 5       k-warp 2
//     k16 3, 7      warp 6    warp 7       k-warp 3
//
// Build: nvcc -arch=sm_80 -ptx refsim/cuda/marlin.cu (no headers beyond the compiler's own);
// the committed PTX is refsim/cuda/ptx/marlin.sm_80.ptx (regenerate: python -m refsim.cuda.regenerate).
// Run/check: tests/cuda/test_marlin.py (examples and hypothesis properties).

namespace refsim_marlin {

constexpr int THREADS = 256;
constexpr int STAGES = 4;
constexpr int GROUP_BLOCKS = 8;  // group size 128 = 8 k16 blocks

typedef unsigned int u32;

__device__ __forceinline__ int ceildiv(int a, int b) { return (a + b - 1) / b; }

// ---- memory: cp.async, ldmatrix, acquire/release ------------------------------------------
__device__ __forceinline__ u32 smem(const void* p) {
  return static_cast<u32>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared, bypassing L1, completed at the next wait_group that covers it
__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem(dst)), "l"(src));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int pending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(pending));
}

// four 8x8 b16 matrices; lane 8i + r gives the address of row r of matrix i
__device__ __forceinline__ void ldsm4(u32 (&a)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3])
               : "r"(smem(p)));
}

__device__ __forceinline__ int ld_acquire(const int* p) {
  int v;
  asm volatile("ld.global.acquire.gpu.b32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void release_add(int* p, int v) {
  asm volatile("fence.acq_rel.gpu;\n red.relaxed.gpu.global.add.s32 [%0], %1;\n" ::"l"(p), "r"(v)
               : "memory");
}
// C partials: read at L2 (another block wrote them), never from a stale L1 line
__device__ __forceinline__ u32 ld_cg(const u32* p) {
  u32 v;
  asm volatile("ld.global.cg.b32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// ---- arithmetic with explicit rounding ------------------------------------------------------
template <int lut>
__device__ __forceinline__ u32 lop3(u32 a, u32 b, u32 c) {
  u32 d;
  asm("lop3.b32 %0, %1, %2, %3, %4;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c), "n"(lut));
  return d;
}
__device__ __forceinline__ u32 hsub2_rn(u32 a, u32 b) {
  u32 d;
  asm("sub.rn.f16x2 %0, %1, %2;\n" : "=r"(d) : "r"(a), "r"(b));
  return d;
}
__device__ __forceinline__ u32 hmul2_rn(u32 a, u32 b) {
  u32 d;
  asm("mul.rn.f16x2 %0, %1, %2;\n" : "=r"(d) : "r"(a), "r"(b));
  return d;
}
__device__ __forceinline__ u32 hfma2_rn(u32 a, u32 b, u32 c) {
  u32 d;
  asm("fma.rn.f16x2 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}
// (lo, hi) fp32 -> half2 word, each half round-to-nearest-even
__device__ __forceinline__ u32 f32x2_to_f16x2_rn(float lo, float hi) {
  unsigned short l, h;
  asm("cvt.rn.f16.f32 %0, %1;\n" : "=h"(l) : "f"(lo));
  asm("cvt.rn.f16.f32 %0, %1;\n" : "=h"(h) : "f"(hi));
  return static_cast<u32>(l) | (static_cast<u32>(h) << 16);
}
__device__ __forceinline__ float f16_to_f32(u32 half_bits) {
  float x;
  unsigned short h = static_cast<unsigned short>(half_bits & 0xffffu);
  asm("cvt.f32.f16 %0, %1;\n" : "=f"(x) : "h"(h));
  return x;
}

// One packed word -> the B fragments (b0, b1) of an m16n8k16 for the word's low nibble pair set.
// Nibbles 0 and 4 (low nibble of bytes 0 and 2) become the two halves of b0, nibbles 1 and 5
// (high nibble of bytes 0 and 2) those of b1; shifting the word right by 8 first gives nibbles
// 2, 6 / 3, 7 (the second n8 half). Bits, one 16-bit half shown:
//     (q & 0x000f) | 0x6400 = 0 11001 000000 nnnn = 1024 + n   ; - 1032      = n - 8   (exact)
//     (q & 0x00f0) | 0x6400 = 0 11001 00 nnnn 0000 = 1024 + 16n ; / 16 - 72   = n - 8   (exact)
__device__ __forceinline__ void dequant(u32 q, u32 (&b)[2]) {
  constexpr int AND_OR = (0xf0 & 0xcc) | 0xaa;  // lop3 immediate of (a & b) | c
  const u32 lo = lop3<AND_OR>(q, 0x000f000fu, 0x64006400u);
  const u32 hi = lop3<AND_OR>(q, 0x00f000f0u, 0x64006400u);
  b[0] = hsub2_rn(lo, 0x64086408u);               // 1032
  b[1] = hfma2_rn(hi, 0x2c002c00u, 0xd480d480u);  // 1/16, -72
}

__device__ __forceinline__ void mma16816(float (&c)[4], const u32 (&a)[4], const u32 (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// ---- shapes of one configuration --------------------------------------------------------------
template <int MB, int TNB, int TKB, bool GROUPED>
struct Config {
  static constexpr int WN = TNB / 4;              // n-warps, 64 columns each
  static constexpr int WK = 8 / WN;               // k-warps
  static constexpr int KSTEPS = TKB / WK;         // k16 blocks per warp per tile
  static constexpr int A_ROW = 2 * TKB;           // int4 per A row of a tile (thread_k / 8)
  static constexpr int A_STAGE = 16 * MB * A_ROW; // int4
  static constexpr int B_ROW = 8 * TNB;           // int4 per k16 row of a B tile (thread_n / 2)
  static constexpr int B_STAGE = TKB * B_ROW;
  static constexpr int S_STAGE = GROUPED ? 2 * TNB : 0;  // one scale row: thread_n / 8 int4
  static constexpr int STAGE = A_STAGE + B_STAGE + S_STAGE;
  static constexpr int GROUP_TILES = GROUPED ? GROUP_BLOCKS / TKB : 1;  // stripe quantum
};

// XOR swizzle of an A stage (16-byte units): unit i is stored at i ^ (i / A_ROW), so the eight
// rows an ldmatrix phase reads (same logical column) land in eight different bank groups.
// Same map as refsim.formats.swizzle.marlin_transform_a.
template <int A_ROW>
__device__ __forceinline__ int swizzle_a(int i) { return i ^ (i / A_ROW); }

template <int MB, int TNB, int TKB, bool GROUPED>
__device__ __forceinline__ void marlin_body(const int4* __restrict__ A, const int4* __restrict__ B,
                                            u32* C, const int4* __restrict__ s, int* locks,
                                            int prob_m, int prob_n, int prob_k) {
  typedef Config<MB, TNB, TKB, GROUPED> Cfg;
  extern __shared__ int4 sh[];

  const int tid = threadIdx.x;
  const int warp = tid / 32, lane = tid % 32;
  const int kw = warp / Cfg::WN, nw = warp % Cfg::WN;
  const int g = lane / 4, t = lane % 4;  // mma fragment groupID / threadID_in_group

  // several independent 16*MB-row problems side by side (host M loop, "parallel")
  int problems = 1;
  if (prob_m > 16 * MB) {
    problems = prob_m / (16 * MB);
    prob_m = 16 * MB;
  }
  const int k_tiles = prob_k / (16 * TKB);
  const int n_tiles = prob_n / (16 * TNB);
  const int a_stride = prob_k / 8;  // int4 per A row
  const int b_stride = prob_n / 2;  // int4 per k16 row of B
  const int c_stride = prob_n / 2;  // half2 words per C row

  // stripe of this block: tiles [iters * b, iters * (b + 1)) in column-major tile order
  int iters = ceildiv(k_tiles * n_tiles * problems, gridDim.x);
  if (Cfg::GROUP_TILES > 1) iters = Cfg::GROUP_TILES * ceildiv(iters, Cfg::GROUP_TILES);
  int k_row = (iters * blockIdx.x) % k_tiles;
  int col_par = (iters * blockIdx.x) / k_tiles;

  while (true) {
    // ---- the next slice: k-tiles [k_row, k_row + slice_iters) of column col_par --------------
    int slice_iters = iters * (blockIdx.x + 1) - (k_tiles * col_par + k_row);
    if (slice_iters <= 0 || col_par >= n_tiles * problems) break;
    slice_iters = min(slice_iters, k_tiles - k_row);
    // blocks sharing the column and this block's rank counted from the bottom (highest k)
    int slice_count = 1, slice_idx = 0;
    const int col_first = iters * ceildiv(k_tiles * col_par, iters);  // first stripe start in it
    if (col_first <= k_tiles * (col_par + 1)) {
      const int col_off = col_first - k_tiles * col_par;
      slice_count = ceildiv(k_tiles - col_off, iters) + (col_off > 0 ? 1 : 0);
      const int delta = iters * blockIdx.x - col_first;
      if (delta < 0 || (col_off == 0 && delta == 0))
        slice_idx = slice_count - 1;
      else
        slice_idx = slice_count - 1 - delta / iters - (col_off > 0 ? 1 : 0);
    }
    const int problem = col_par / n_tiles, n_tile = col_par % n_tiles;
    const int row0 = problem * 16 * MB;  // first A / C row of this problem

    // ---- 1. pipeline: tile kt of the slice -> stage st -------------------------------------
    auto fetch = [&](int st, int kt) {
      int4* stage = sh + st * Cfg::STAGE;
#pragma unroll
      for (int it = 0; it < ceildiv(Cfg::A_STAGE, THREADS); it++) {
        const int i = it * THREADS + tid;
        if (i < Cfg::A_STAGE) {
          const int r = i / Cfg::A_ROW, c = i % Cfg::A_ROW;
          const int gr = row0 + min(r, prob_m - 1);  // padded rows re-read a real row
          cp_async16(stage + swizzle_a<Cfg::A_ROW>(i), A + gr * a_stride + kt * Cfg::A_ROW + c);
        }
      }
#pragma unroll
      for (int it = 0; it < Cfg::B_STAGE / THREADS; it++) {
        const int i = it * THREADS + tid;
        const int r = i / Cfg::B_ROW, c = i % Cfg::B_ROW;
        cp_async16(stage + Cfg::A_STAGE + i, B + (kt * TKB + r) * b_stride + n_tile * Cfg::B_ROW + c);
      }
      if (GROUPED && tid < Cfg::S_STAGE) {
        const int group = kt * TKB / GROUP_BLOCKS;
        cp_async16(stage + Cfg::A_STAGE + Cfg::B_STAGE + tid,
                   s + group * (prob_n / 8) + n_tile * Cfg::S_STAGE + tid);
      }
    };

    float acc[MB][4][2][4];  // [m-block][16-column sub-tile j][n8 half][c0..c3]
#pragma unroll
    for (int mb = 0; mb < MB; mb++)
#pragma unroll
      for (int j = 0; j < 4; j++)
#pragma unroll
        for (int h = 0; h < 2; h++)
#pragma unroll
          for (int e = 0; e < 4; e++) acc[mb][j][h][e] = 0.0f;

#pragma unroll
    for (int p = 0; p < STAGES - 1; p++) {
      if (p < slice_iters) fetch(p, k_row + p);
      cp_async_commit();  // one group per tile, empty ones included, keeps wait counts exact
    }

    for (int i = 0; i < slice_iters; i++) {
      cp_async_wait<STAGES - 2>();  // this thread's copies of tile i have landed
      __syncthreads();              // ... everyone's; and tile i - 1 is no longer being read
      const int next = i + STAGES - 1;
      if (next < slice_iters) fetch(next % STAGES, k_row + next);
      cp_async_commit();

      // ---- 2. this warp's k16 blocks of tile i ----------------------------------------------
      const int4* stage = sh + (i % STAGES) * Cfg::STAGE;
#pragma unroll
      for (int ks = 0; ks < Cfg::KSTEPS; ks++) {
        const int kb = kw + Cfg::WK * ks;  // k16 block inside the tile
        u32 a[MB][4];
#pragma unroll
        for (int mb = 0; mb < MB; mb++) {
          // lanes 0-15: rows 0-15, k 0-7 (matrices a0, a1); lanes 16-31: k 8-15 (a2, a3)
          const int unit = Cfg::A_ROW * (16 * mb + lane % 16) + 2 * kb + lane / 16;
          ldsm4(a[mb], stage + swizzle_a<Cfg::A_ROW>(unit));
        }
        const int4 bw = stage[Cfg::A_STAGE + kb * Cfg::B_ROW + nw * 32 + lane];
        int4 sc = make_int4(0, 0, 0, 0);
        if (GROUPED) sc = stage[Cfg::A_STAGE + Cfg::B_STAGE + nw * 8 + g];  // columns g, g+8, .., g+56
        const u32 words[4] = {u32(bw.x), u32(bw.y), u32(bw.z), u32(bw.w)};
        const u32 scales[4] = {u32(sc.x), u32(sc.y), u32(sc.z), u32(sc.w)};
#pragma unroll
        for (int j = 0; j < 4; j++) {
          u32 b0[2], b1[2];
          dequant(words[j], b0);                                  // column 16j + g
          dequant(static_cast<u32>(static_cast<int>(words[j]) >> 8), b1);  // column 16j + 8 + g
          if (GROUPED) {
            const u32 s0 = (scales[j] & 0xffffu) * 0x10001u;      // (s, s) of column 16j + g
            const u32 s1 = (scales[j] >> 16) * 0x10001u;          // (s, s) of column 16j + 8 + g
            b0[0] = hmul2_rn(b0[0], s0);
            b0[1] = hmul2_rn(b0[1], s0);
            b1[0] = hmul2_rn(b1[0], s1);
            b1[1] = hmul2_rn(b1[1], s1);
          }
#pragma unroll
          for (int mb = 0; mb < MB; mb++) {
            mma16816(acc[mb][j][0], a[mb], b0);
            mma16816(acc[mb][j][1], a[mb], b1);
          }
        }
      }
    }
    cp_async_wait<0>();
    __syncthreads();  // the stages are free: the reduction below reuses them

    // ---- 3. k-warp reduction, fp32, through shared memory ----------------------------------
    // slot (sl, nw) holds one warp's 32 accumulators of one m-block as 8 float4 per lane
    float4* red = reinterpret_cast<float4*>(sh);
    auto slot = [&](int sl, int e4) -> float4& { return red[((sl * Cfg::WN + nw) * 8 + e4) * 32 + lane]; };
#pragma unroll
    for (int mb = 0; mb < MB; mb++) {
      float* mine = &acc[mb][0][0][0];  // 32 floats: j, half, c
      if (Cfg::WK == 4) {
        if (kw >= 2) {
#pragma unroll
          for (int e4 = 0; e4 < 8; e4++)
            slot(kw - 2, e4) = make_float4(mine[4 * e4], mine[4 * e4 + 1], mine[4 * e4 + 2], mine[4 * e4 + 3]);
        }
        __syncthreads();
        if (kw == 1) {  // a1 + (a3 + a2)
#pragma unroll
          for (int e4 = 0; e4 < 8; e4++) {
            const float4 a2 = slot(0, e4), a3 = slot(1, e4);
            const float4 u = make_float4(__fadd_rn(mine[4 * e4], __fadd_rn(a3.x, a2.x)),
                                         __fadd_rn(mine[4 * e4 + 1], __fadd_rn(a3.y, a2.y)),
                                         __fadd_rn(mine[4 * e4 + 2], __fadd_rn(a3.z, a2.z)),
                                         __fadd_rn(mine[4 * e4 + 3], __fadd_rn(a3.w, a2.w)));
            slot(0, e4) = u;
          }
        }
        __syncthreads();
      } else if (Cfg::WK == 2) {
        if (kw == 1) {
#pragma unroll
          for (int e4 = 0; e4 < 8; e4++)
            slot(0, e4) = make_float4(mine[4 * e4], mine[4 * e4 + 1], mine[4 * e4 + 2], mine[4 * e4 + 3]);
        }
        __syncthreads();
      }
      if (Cfg::WK > 1 && kw == 0) {  // a0 + (the rest)
#pragma unroll
        for (int e4 = 0; e4 < 8; e4++) {
          const float4 r = slot(0, e4);
          mine[4 * e4] = __fadd_rn(mine[4 * e4], r.x);
          mine[4 * e4 + 1] = __fadd_rn(mine[4 * e4 + 1], r.y);
          mine[4 * e4 + 2] = __fadd_rn(mine[4 * e4 + 2], r.z);
          mine[4 * e4 + 3] = __fadd_rn(mine[4 * e4 + 3], r.w);
        }
      }
      __syncthreads();  // slots are rewritten by the next m-block / reused by the next slice
    }

    // every half2 of C this thread holds after the reduction (k-warp 0 only): rows g, g+8 of each
    // m-block (rows past prob_m skipped), columns 2t, 2t+1 of each n8 block 16 j + 8 h of the warp
    const int col_base = n_tile * 16 * TNB + nw * 64 + 2 * t;
    auto for_each_c_word = [&](auto&& f) {
#pragma unroll
      for (int mb = 0; mb < MB; mb++)
#pragma unroll
        for (int rr = 0; rr < 2; rr++) {
          const int r = 16 * mb + g + 8 * rr;
          if (r < prob_m) {
#pragma unroll
            for (int j = 0; j < 4; j++)
#pragma unroll
              for (int h = 0; h < 2; h++)
                f(C + (row0 + r) * c_stride + (col_base + 16 * j + 8 * h) / 2, acc[mb][j][h][2 * rr],
                  acc[mb][j][h][2 * rr + 1], j, h);
          }
        }
    };

    // ---- 4. global reduction through C, serialised by the column's lock ----------------------
    const bool top = slice_idx == slice_count - 1;
    if (slice_count > 1) {
      if (tid == 0)
        while (ld_acquire(&locks[col_par]) != slice_idx) {
        }
      __syncthreads();
      if (kw == 0)
        for_each_c_word([&](u32* p, float& v0, float& v1, int, int) {
          if (slice_idx > 0) {  // P + f32(H)
            const u32 held = ld_cg(p);
            v0 = __fadd_rn(v0, f16_to_f32(held));
            v1 = __fadd_rn(v1, f16_to_f32(held >> 16));
          }
          if (!top) *p = f32x2_to_f16x2_rn(v0, v1);  // H for the next slice
        });
      __syncthreads();  // every partial of this block is in C before the lock moves on
      if (tid == 0) release_add(&locks[col_par], top ? -(slice_count - 1) : 1);
    }

    // ---- 5. the top slice writes the result ------------------------------------------------------
    if (top && kw == 0)
      for_each_c_word([&](u32* p, float& v0, float& v1, int j, int h) {
        u32 out = f32x2_to_f16x2_rn(v0, v1);
        if (!GROUPED) {
          // per-channel scales are stored per 32 columns so that thread t's int4 holds its
          // columns 2t, 2t+1 of the four n8 blocks: n8 block 2 (j % 2) + h of chunk j / 2
          const int4 s4 = s[(n_tile * 16 * TNB + nw * 64 + 32 * (j / 2)) / 8 + t];
          const int w = 2 * (j % 2) + h;
          out = hmul2_rn(out, u32(w == 0 ? s4.x : w == 1 ? s4.y : w == 2 ? s4.z : s4.w));
        }
        *p = out;
      });

    k_row = 0;
    col_par++;
  }
}

}  // namespace refsim_marlin

// ---- entry points: the compiled tile shapes x {grouped (group 128), per-channel} --------------
#define REFSIM_MARLIN_ENTRY(MB, TNB, TKB, GROUPED, NAME)                                          \
  extern "C" __global__ void __launch_bounds__(refsim_marlin::THREADS)                            \
      NAME(const int4* __restrict__ A, const int4* __restrict__ B, unsigned int* C,               \
           const int4* __restrict__ s, int* locks, int prob_m, int prob_n, int prob_k) {          \
    refsim_marlin::marlin_body<MB, TNB, TKB, GROUPED>(A, B, C, s, locks, prob_m, prob_n, prob_k); \
  }

REFSIM_MARLIN_ENTRY(1, 8, 8, true, refsim_marlin_m1_n8_k8_grouped)
REFSIM_MARLIN_ENTRY(1, 8, 8, false, refsim_marlin_m1_n8_k8_channel)
REFSIM_MARLIN_ENTRY(1, 16, 4, true, refsim_marlin_m1_n16_k4_grouped)
REFSIM_MARLIN_ENTRY(1, 16, 4, false, refsim_marlin_m1_n16_k4_channel)
REFSIM_MARLIN_ENTRY(2, 16, 4, true, refsim_marlin_m2_n16_k4_grouped)
REFSIM_MARLIN_ENTRY(2, 16, 4, false, refsim_marlin_m2_n16_k4_channel)
REFSIM_MARLIN_ENTRY(3, 16, 4, true, refsim_marlin_m3_n16_k4_grouped)
REFSIM_MARLIN_ENTRY(3, 16, 4, false, refsim_marlin_m3_n16_k4_channel)
REFSIM_MARLIN_ENTRY(4, 16, 4, true, refsim_marlin_m4_n16_k4_grouped)
REFSIM_MARLIN_ENTRY(4, 16, 4, false, refsim_marlin_m4_n16_k4_channel)
