// hopper_w4a16.cu -- an FP16 x INT4 GEMM for sm_90a in the Machete design, written for refsim.
//
// Spec
// ----
// computes     C (M, N) fp16 = X (M, K) fp16 @ W (K, N), W 4-bit codes q in 0..15 with the symmetric
//              zero point 8 and fp16 group scales s (K / 128, N) (group size 128):
//                  W[k, n] = fp16(q[k, n] - 8) * s[k / 128, n]     (one mul.rn.f16x2: scaled weights)
//              packed as refsim.formats.hopper_w4a16.pack (layout below); the scales are applied to
//              the weights in registers before the tensor core sees them, never to partial sums.
// equals       refsim.emulator.hopper_w4a16.hopper_w4a16_gemm(X, Wp, s) bit for bit.
// legal        M >= 1 (rows past M are zero-filled by TMA and never stored), N % 64 == 0,
//              K % 128 == 0 (a k-tile is 64, a scale group two k-tiles).
// swap AB      wgmma takes A from registers but B only from shared memory, so the converted
//              weights are the A operand: each block computes D = W^T X^T, a 64 (n) x 64 (m) tile,
//              with wgmma.mma_async.m64n64k16.f32.f16.f16 (A: registers, B: smem descriptor).
// launch       grid (N / 64, ceil(M / 64)), block 256 = 2 warpgroups, 41,984 bytes of static shared
//              memory, no dynamic shared memory. Parameters: X, Wp (the buffers the tensor maps
//              describe, passed so that they are device buffers of the launch; the kernel reads them
//              only through the maps), scales, C, the two tensor maps (__grid_constant__, 128 bytes
//              each, holding X's and Wp's global addresses), M, N, K.
//                warpgroup 0  producer: setmaxnreg.dec 40; thread 0 alone loops over k-tiles, waits
//                             for an empty stage, arms its full barrier (arrive.expect_tx 10,240
//                             bytes) and issues two 2-D TMA loads into it.
//                warpgroup 1  consumer: setmaxnreg.inc 216; per k-tile waits on the full barrier,
//                             converts its weights in registers, issues 4 wgmma (k16 steps in
//                             order), waits for them (wait_group 0), then arrives on the empty
//                             barrier (all 128 threads: its count is 128).
// pipeline     STAGES = 4 ring slots; k-tile kt uses slot kt % 4 with phase parity (kt / 4) & 1.
//              The producer refills slot s for kt >= 4 after the empty barrier's phase (kt / 4 - 1)
//              completed. Barriers are initialised by thread 0, published with
//              fence.mbarrier_init.release.cluster and __syncthreads before the roles split.
// tensor maps  X: float16, dims (K, M), row stride 2K bytes, box (64, 64), swizzle 128B: a slot's X
//              tile is 64 rows of 128 bytes (8,192 bytes, 1024-aligned), the canonical K-major
//              128B-swizzled wgmma B operand (descriptor: LBO 16 (unused), SBO 1024, the k16 step
//              kk at start + 32 kk). Wp: uint32, dims (128, N/64 * K/16), row stride 512 bytes,
//              box (128, 4), no swizzle: a slot's weights are 4 k16 steps x 128 words (2,048 bytes).
// weights      Wp (N/64 * K/16, 128) uint32: row (j * K/16 + t) is k16 step t of column tile j;
//              word l (l = 32 w + 4 g + c, warp w, lane 4 g + c of the consumer warpgroup) holds the
//              8 codes of that thread's wgmma A fragment: rows r = 16 w + g and r + 8 of the tile
//              (output columns 64 j + r), columns k = 16 t + 2 c (+1, +8, +9):
//                  element e0..e7 = (r, 2c) (r, 2c+1) (r+8, 2c) (r+8, 2c+1)
//                                   (r, 2c+8) (r, 2c+9) (r+8, 2c+8) (r+8, 2c+9)
//              in the interleaved nibble order of refsim.formats.dequant_tricks (nibble i holds
//              element INT4_INTERLEAVE[i] = 0 2 4 6 1 3 5 7), so FasterTransformer's converter
//              (lop3 0xEA with 0x64006400, sub.rn.f16x2 0x64086408, fma.rn.f16x2 by 1/16 and -72;
//              dequant_tricks.ft_int4_to_fp16) yields the four A registers a0..a3 directly.
// arithmetic   per output element, D starts at +0 (registers zeroed, scale-d = 1) and takes the
//              K / 16 wgmma steps in increasing k (refsim.arith.wgmma kind f32.f16.f16: one fused
//              block of 16 products and the accumulator per step); C[m, n] = cvt.rn.f16.f32(D).
//              The int4 -> fp16 conversion is exact; the only other rounding is the weight scale.
// registers    __maxnreg__(128) fixes the launch's count (.maxnreg 128), which setmaxnreg needs:
//              the producer gives back 128 - 40 = 88 per thread and the consumer takes 216 - 128 = 88,
//              so the warpgroups' new budgets (40 + 216 = 2 x 128) fit the registers the block holds.
// build        nvcc -gencode=arch=compute_90a,code=sm_90a -ptx hopper_w4a16.cu (nvcc 13.0.88;
//              python -m refsim.cuda.regenerate runs nvcc -arch=sm_90a -ptx, which writes the same
//              text; committed as ptx/hopper_w4a16.sm_90a.ptx)
//
// One k-tile through one ring slot:
//
//   producer thread 0                       slot s (X 8 KB | Wp 2 KB)        consumer warpgroup
//   wait empty[s] (kt >= 4) ───────────────────────────────────────────────── arrive empty[s] x128
//   arrive.expect_tx full[s], 10240 ──► full[s] ◄── complete_tx (TMA bytes)
//   TMA X  (64 k x 64 m, 128B swizzle) ─► X tile ─── descriptor ──────────► wgmma B
//   TMA Wp (4 x 128 words)             ─► Wp tile ── ld.shared 1 word ────► lop3/sub/fma -> q - 8
//                                                                            mul by scale -> wgmma A
//   wait full[s] (parity (kt/4)&1) ◄─────────────────────────────────────── consumer waits here
//
// The block's output tile (D = W^T X^T, rows n, columns m) and its owners (accumulator layout of
// wgmma m64n64: warp w holds rows 16 w .. 16 w + 15; lane 4 g + c holds rows 16 w + g, + 8 and
// columns 8 i + 2 c, + 1 for i = 0..7):
//
//           m 0 .. 63 (tokens, the wgmma N)
//   n  0-15   warp 0
//   n 16-31   warp 1          C[m, n] = fp16(D[n, m]), stored when m < M
//   n 32-47   warp 2
//   n 48-63   warp 3

#include <cuda_fp16.h>

#define TILE_N 64          // output columns per block (the wgmma M)
#define TILE_M 64          // tokens per block (the wgmma N)
#define TILE_K 64          // k per pipeline stage (4 wgmma k16 steps)
#define STAGES 4
#define GROUP 128
#define X_BYTES (TILE_M * TILE_K * 2)          // 8192
#define W_WORDS (TILE_K / 16 * 128)            // 512
#define TX_BYTES (X_BYTES + W_WORDS * 4)       // 10240

struct __align__(64) TensorMap {               // a CUtensorMap: 128 opaque bytes
  unsigned char bytes[128];
};

struct __align__(1024) Smem {
  __half x[STAGES][TILE_M * TILE_K];           // 1024-aligned: the 128B swizzle pattern repeats every 1 KB
  unsigned w[STAGES][W_WORDS];
  unsigned long long full[STAGES];
  unsigned long long empty[STAGES];
};

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return (unsigned)__cvta_generic_to_shared(p);
}

// ---- mbarrier -------------------------------------------------------------------------------------
__device__ __forceinline__ void bar_init(unsigned long long* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}

__device__ __forceinline__ void bar_arrive_expect_tx(unsigned long long* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes)
               : "memory");
}

__device__ __forceinline__ void bar_arrive(unsigned long long* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(bar)) : "memory");
}

__device__ __forceinline__ void bar_wait(unsigned long long* bar, unsigned parity) {
  unsigned done;
  do {
    asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}"
                 : "=r"(done) : "r"(smem_addr(bar)), "r"(parity) : "memory");
  } while (!done);
}

// ---- TMA: a 2-D tile of a tensor map into shared memory, completing on an mbarrier -----------------
__device__ __forceinline__ void tma_load_2d(void* dst, const TensorMap* map, int c0, int c1,
                                            unsigned long long* bar) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
               ::"r"(smem_addr(dst)), "l"((unsigned long long)map), "r"(c0), "r"(c1), "r"(smem_addr(bar))
               : "memory");
}

// ---- int4 -> fp16 in registers (dequant_tricks.ft_int4_to_fp16) and the group scale ----------------
__device__ __forceinline__ unsigned lop3_and_or(unsigned a, unsigned b, unsigned c) {
  unsigned d;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(d) : "r"(a), "r"(b), "r"(c));   // (a & b) | c
  return d;
}

__device__ __forceinline__ unsigned sub_f16x2(unsigned a, unsigned b) {
  unsigned d;
  asm("sub.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}

__device__ __forceinline__ unsigned fma_f16x2(unsigned a, unsigned b, unsigned c) {
  unsigned d;
  asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

__device__ __forceinline__ unsigned mul_f16x2(unsigned a, unsigned b) {
  unsigned d;
  asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}

// one packed word -> the four A registers (fp16 pairs of q - 8, exact), each times its row's scale
__device__ __forceinline__ void convert(unsigned q, unsigned s_lo, unsigned s_hi, unsigned a[4]) {
  const unsigned top = q >> 8;
  a[0] = sub_f16x2(lop3_and_or(q, 0x000F000Fu, 0x64006400u), 0x64086408u);              // (1024 + n) - 1032
  a[1] = fma_f16x2(lop3_and_or(q, 0x00F000F0u, 0x64006400u), 0x2C002C00u, 0xD480D480u);  // (1024 + 16 n) / 16 - 72
  a[2] = sub_f16x2(lop3_and_or(top, 0x000F000Fu, 0x64006400u), 0x64086408u);
  a[3] = fma_f16x2(lop3_and_or(top, 0x00F000F0u, 0x64006400u), 0x2C002C00u, 0xD480D480u);
  a[0] = mul_f16x2(a[0], s_lo);      // row r
  a[1] = mul_f16x2(a[1], s_hi);      // row r + 8
  a[2] = mul_f16x2(a[2], s_lo);
  a[3] = mul_f16x2(a[3], s_hi);
}

// ---- wgmma ------------------------------------------------------------------------------------------
// the smem descriptor of a K-major, 128B-swizzled operand: start >> 4, LBO 16 >> 4, SBO 1024 >> 4, mode 1
__device__ __forceinline__ unsigned long long desc_128b(unsigned addr) {
  return (unsigned long long)((addr & 0x3FFFF) >> 4) | (1ull << 16) | (64ull << 32) | (1ull << 62);
}

__device__ __forceinline__ void wgmma_m64n64k16(float d[32], const unsigned a[4], unsigned long long b_desc) {
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, %37, 0;\n"
      " wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "{%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(1));
}

extern "C" __global__ void __maxnreg__(128)
hopper_w4a16_gemm(const __half* x,                           // X (M, K) fp16: read only through x_map
                  const unsigned* wp,                        // Wp (N/64 * K/16, 128): only through w_map
                  const __half* __restrict__ scales,         // (K / 128, N) fp16
                  __half* __restrict__ c,                    // (M, N) fp16
                  const __grid_constant__ TensorMap x_map,   // X: float16 (K, M), box (64, 64), 128B swizzle
                  const __grid_constant__ TensorMap w_map,   // Wp: uint32 (128, N/64 * K/16), box (128, 4)
                  int M, int N, int K) {
  __shared__ Smem sm;
  const int n0 = blockIdx.x * TILE_N, m0 = blockIdx.y * TILE_M;
  const int k_tiles = K / TILE_K;
  const int warpgroup = threadIdx.x / 128, t = threadIdx.x % 128;

  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      bar_init(&sm.full[s], 1);         // the producer's arrive.expect_tx (+ the TMA bytes)
      bar_init(&sm.empty[s], 128);      // every consumer thread
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  if (warpgroup == 0) {                 // ---------------- producer
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    if (t == 0) {
      const int w_row0 = blockIdx.x * (K / 16);
      for (int kt = 0; kt < k_tiles; ++kt) {
        const int s = kt % STAGES;
        if (kt >= STAGES) bar_wait(&sm.empty[s], (kt / STAGES - 1) & 1);
        bar_arrive_expect_tx(&sm.full[s], TX_BYTES);
        tma_load_2d(sm.x[s], &x_map, kt * TILE_K, m0, &sm.full[s]);
        tma_load_2d(sm.w[s], &w_map, 0, w_row0 + kt * (TILE_K / 16), &sm.full[s]);
      }
    }
    return;
  }

  // ---------------------------------------------------- consumer
  asm volatile("setmaxnreg.inc.sync.aligned.u32 216;");
  const int warp = t / 32, g = (t % 32) / 4, cq = t % 4;
  const int r = 16 * warp + g;          // this thread's rows r and r + 8 of the tile (output columns n0 + r)
  float d[32];
#pragma unroll
  for (int i = 0; i < 32; ++i) d[i] = 0.0f;

  for (int kt = 0; kt < k_tiles; ++kt) {
    const int s = kt % STAGES;
    const int grp = kt * TILE_K / GROUP;
    const unsigned short s0 = __half_as_ushort(scales[(size_t)grp * N + n0 + r]);
    const unsigned short s8 = __half_as_ushort(scales[(size_t)grp * N + n0 + r + 8]);
    const unsigned s_lo = s0 | ((unsigned)s0 << 16), s_hi = s8 | ((unsigned)s8 << 16);
    bar_wait(&sm.full[s], (kt / STAGES) & 1);
    unsigned a[4][4];
#pragma unroll
    for (int kk = 0; kk < TILE_K / 16; ++kk) convert(sm.w[s][kk * 128 + t], s_lo, s_hi, a[kk]);
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
    const unsigned x_base = smem_addr(sm.x[s]);
#pragma unroll
    for (int kk = 0; kk < TILE_K / 16; ++kk) wgmma_m64n64k16(d, a[kk], desc_128b(x_base + 32 * kk));
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    bar_arrive(&sm.empty[s]);
  }

  // epilogue: D[row, col] -> C[m0 + col, n0 + row] in fp16
#pragma unroll
  for (int i = 0; i < 8; ++i) {
#pragma unroll
    for (int v = 0; v < 4; ++v) {
      const int row = r + 8 * (v >> 1), m = m0 + 8 * i + 2 * cq + (v & 1);
      if (m < M) c[(size_t)m * N + n0 + row] = __float2half_rn(d[4 * i + v]);
    }
  }
}
