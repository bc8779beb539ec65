// wgmma.cu -- one wgmma.mma_async per warpgroup on matrices staged in shared memory: the wgmma probes of
// `refsim validate`.
//
// Spec
// ----
// computes      for tile t (block t of the grid, one warpgroup of 128 threads): D[t] (64 x N) =
//               wgmma.mma_async.sync.aligned.m64n<N>k<K>[.satfinite].<d>.<a>.<b>[.and.popc] of A[t] (64 x K),
//               B[t] (K x N) and C[t] (64 x N), with scale-d = (scale_d != 0) and imm-scale-a = imm-scale-b
//               = -1 in the _neg entries (+1 else), imm-trans-a = imm-trans-b = 0 (both K-major).
// equals        refsim.arith.wgmma.wgmma (refsim.cuda.wgmma.wgmma_reference) bit for bit.
// operands      a: (tiles, 64, 32) bytes, row i = A[t][i][0..K) as raw elements (K-major: 16 f16/bf16, 8 tf32,
//               32 fp8/s8/u8, 256 b1 bits with element k at bit k % 8 of byte k / 8); b: (tiles, N, 32) bytes,
//               row j = column j of B (B^T, K-major) in the same encoding; c, d: (tiles, 64, N) row-major
//               matrices of the accumulator type read and written as 32-bit words (an f16 pair per word).
//               Every row of every operand is 32 bytes: K x element bits = 256 for every kind.
// shared        a static 10,240-byte buffer: A at 0 (2,048 bytes), B at 2,048 (N x 32 bytes, at most 8,192).
//               Layout: the canonical K-major layout without swizzle (PTX ISA "Shared Memory Matrix
//               Layout", CuTe's INTERLEAVE ((8,m),(T,2k)):((1T,SBO),(1,LBO))): core matrices of 8 rows x 16
//               bytes (128 contiguous bytes, row r of the core at +16 r); the two core matrices of an 8-row
//               group along K are LBO = 128 bytes apart, consecutive 8-row groups SBO = 256 bytes apart:
//                   byte (row, k-byte) of an operand at (row / 8) * 256 + (k-byte / 16) * 128 + (row % 8) * 16
//                                                       + k-byte % 16
//               Descriptor (refsim.formats.smem_layouts.encode_descriptor): start address >> 4 in bits 0-13,
//               LBO >> 4 = 8 in bits 16-29, SBO >> 4 = 16 in bits 32-45, base offset 0, swizzle none.
// order         stage A, B (generic stores) -> __syncthreads -> fence.proxy.async.shared::cta (the async proxy
//               sees them) -> C into the accumulator registers -> wgmma.fence -> wgmma.mma_async ->
//               commit_group -> wait_group 0 -> D from the accumulator registers.
// registers     the accumulator fragment of the PTX ISA (wgmma "Register Fragments"): warp w of the
//               warpgroup holds rows 16w..16w+15; with l the lane, 32-bit register i (f32/s32) holds
//               row 16w + l/4 + 8((i/2)%2), column 8(i/4) + 2(l%4) + i%2; f16 register r holds elements
//               2r (low half) and 2r+1 (high half) of that numbering, adjacent columns of one row.
//               The _rs entries (f32.f16.f16) take A from registers instead, read from global a: register r
//               (of 4) holds row 16w + l/4 + 8(r%2), columns 2(l%4) + 8(r/2) + {0, 1} (low half first).
// launch        grid tiles, block 128, no dynamic shared memory. Arguments (a, b: uint8 as above,
//               c: uint32 (tiles, 64, N) or (tiles, 64, N/2) words, d: as c (written), scale_d: int).
// entries       probe_m64n<N>k<K>_<d>_<a>_<b>[_satfinite][_neg][_rs] for N = 8 and N = 256 (the smallest and
//               largest N of every kind) and every kind of refsim.arith.wgmma.modelled(): float kinds with and
//               without _neg, s8/u8 with and without .satfinite, b1 (.and.popc); f32.f16.f16 also _rs.
//               refsim.cuda.wgmma.entries() lists them (a test keeps the two equal).
// build / run   nvcc -arch=sm_90a -ptx wgmma.cu (python -m refsim.cuda.regenerate; committed as
//               ptx/wgmma.sm_90a.ptx);  refsim.cuda.wgmma.wgmma_probe(kind, n, A, B, C, ...)
//
//   a (64 x 32 B) ──16-byte chunks──► smem A (core matrices) ─┐ desc(A)
//   b (N x 32 B)  ──16-byte chunks──► smem B (core matrices) ─┤ desc(B)   wgmma.mma_async ──► registers ──► d
//   c (64 x N) ──fragment layout──► accumulator registers ────┘ (scale-d)

#include <stdint.h>

#define SMEM_A 0
#define SMEM_B 2048
#define SMEM_BYTES 10240
#define LBO 128
#define SBO 256

// the operand lists of the inline asm: accumulators %0..%ND-1, then the descriptors (or A's registers and
// B's descriptor) and scale-d
#define ACC_2 "{%0, %1}"
#define ACC_4 "{%0, %1, %2, %3}"
#define ACC_64 \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
#define ACC_128 \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, " \
    "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
    "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, " \
    "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
    "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}"
#define SS_2 "%2, %3"  // a-desc, b-desc
#define SS_SCALE_2 "%4"
#define SS_4 "%4, %5"  // a-desc, b-desc
#define SS_SCALE_4 "%6"
#define SS_64 "%64, %65"  // a-desc, b-desc
#define SS_SCALE_64 "%66"
#define SS_128 "%128, %129"  // a-desc, b-desc
#define SS_SCALE_128 "%130"
#define RS_2 "{%2, %3, %4, %5}, %6"  // a0..a3, b-desc
#define RS_SCALE_2 "%7"
#define RS_4 "{%4, %5, %6, %7}, %8"  // a0..a3, b-desc
#define RS_SCALE_4 "%9"
#define RS_64 "{%64, %65, %66, %67}, %68"  // a0..a3, b-desc
#define RS_SCALE_64 "%69"
#define RS_128 "{%128, %129, %130, %131}, %132"  // a0..a3, b-desc
#define RS_SCALE_128 "%133"
#define OUT8(o) "+r"(d[o]), "+r"(d[o + 1]), "+r"(d[o + 2]), "+r"(d[o + 3]), "+r"(d[o + 4]), "+r"(d[o + 5]), \
                "+r"(d[o + 6]), "+r"(d[o + 7])
#define OUT_2 "+r"(d[0]), "+r"(d[1])
#define OUT_4 "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
#define OUT_64 OUT8(0), OUT8(8), OUT8(16), OUT8(24), OUT8(32), OUT8(40), OUT8(48), OUT8(56)
#define OUT_128 OUT_64, OUT8(64), OUT8(72), OUT8(80), OUT8(88), OUT8(96), OUT8(104), OUT8(112), OUT8(120)

__device__ __forceinline__ uint32_t smem_addr(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

__device__ __forceinline__ uint64_t descriptor(uint32_t addr) {
  return (uint64_t)((addr & 0x3FFFF) >> 4) | (uint64_t)(LBO >> 4) << 16 | (uint64_t)(SBO >> 4) << 32;
}

// 16-byte chunk i of an operand (row i / 2, k-bytes 16 (i % 2) ..) into its core-matrix place
__device__ __forceinline__ void put(uint8_t *base, int i, uint4 v) {
  const int row = i / 2;
  *reinterpret_cast<uint4 *>(base + (row / 8) * SBO + (i % 2) * LBO + (row % 8) * 16) = v;
}

template <int N> __device__ __forceinline__ void stage(uint8_t *smem, const uint4 *a, const uint4 *b) {
  const int t = blockIdx.x;
  put(smem + SMEM_A, threadIdx.x, a[t * 128 + threadIdx.x]);         // 64 rows x 2 chunks = 128
  for (int i = threadIdx.x; i < 2 * N; i += 128) put(smem + SMEM_B, i, b[t * 2 * N + i]);
  __syncthreads();
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// the word of c/d that accumulator register i of this thread holds (ND = N/2: 32-bit elements; N/4: f16 pairs)
template <int N, int ND> __device__ __forceinline__ int word(int i) {
  const int w = threadIdx.x / 32, l = threadIdx.x % 32;
  const int e = ND * 2 == N ? i : 2 * i;                             // element of the fragment numbering
  const int row = 16 * w + l / 4 + 8 * ((e / 2) % 2), col = 8 * (e / 4) + 2 * (l % 4) + e % 2;
  return ND * 2 == N ? blockIdx.x * 64 * N + row * N + col : (blockIdx.x * 64 * N + row * N + col) / 2;
}

template <int N, int ND> __device__ __forceinline__ void load_acc(uint32_t *d, const uint32_t *c) {
#pragma unroll
  for (int i = 0; i < ND; ++i) d[i] = c[word<N, ND>(i)];
}
template <int N, int ND> __device__ __forceinline__ void store_acc(const uint32_t *d, uint32_t *out) {
#pragma unroll
  for (int i = 0; i < ND; ++i) out[word<N, ND>(i)] = d[i];
}

#define SIGNATURE(NAME) \
  extern "C" __global__ void __launch_bounds__(128) NAME(const uint4 *a, const uint4 *b, const uint32_t *c, \
                                                         uint32_t *out, int scale_d)

// A and B from shared memory (descriptors)
#define WG_SS(NAME, INSTR, N, ND, IMM)                                                               \
  SIGNATURE(NAME) {                                                                                 \
    __shared__ __align__(128) uint8_t smem[SMEM_BYTES];                                             \
    stage<N>(smem, a, b);                                                                           \
    uint32_t d[ND];                                                                                 \
    load_acc<N, ND>(d, c);                                                                          \
    const uint64_t da = descriptor(smem_addr(smem + SMEM_A)), db = descriptor(smem_addr(smem + SMEM_B)); \
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");                                       \
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, " SS_SCALE_##ND ", 0;\n" INSTR " " ACC_##ND ", "  \
                 SS_##ND ", p" IMM ";\n}\n"                                                          \
                 : OUT_##ND : "l"(da), "l"(db), "r"(scale_d) : "memory");                           \
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");                                \
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");                                \
    store_acc<N, ND>(d, out);                                                                       \
  }

// A (f16, 64 x 16) from registers read from global a, B from shared memory
#define WG_RS(NAME, INSTR, N, ND, IMM)                                                               \
  SIGNATURE(NAME) {                                                                                 \
    __shared__ __align__(128) uint8_t smem[SMEM_BYTES];                                             \
    stage<N>(smem, a, b);                                                                           \
    const int w = threadIdx.x / 32, l = threadIdx.x % 32;                                           \
    const uint32_t *a32 = reinterpret_cast<const uint32_t *>(a) + blockIdx.x * 512;                 \
    uint32_t ra[4];                                                                                 \
    for (int r = 0; r < 4; ++r) ra[r] = a32[(16 * w + l / 4 + 8 * (r % 2)) * 8 + l % 4 + 4 * (r / 2)]; \
    uint32_t d[ND];                                                                                 \
    load_acc<N, ND>(d, c);                                                                          \
    const uint64_t db = descriptor(smem_addr(smem + SMEM_B));                                       \
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");                                       \
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, " RS_SCALE_##ND ", 0;\n" INSTR " " ACC_##ND ", "  \
                 RS_##ND ", p" IMM ";\n}\n"                                                          \
                 : OUT_##ND : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "l"(db), "r"(scale_d)   \
                 : "memory");                                                                       \
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");                                \
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");                                \
    store_acc<N, ND>(d, out);                                                                       \
  }

// f16/bf16 (imm-scale-a, imm-scale-b, imm-trans-a, imm-trans-b), tf32/fp8 (imm-scale-a, imm-scale-b),
// s8/u8 and b1 (no immediates)
WG_SS(probe_m64n8k16_f16_f16_f16, "wgmma.mma_async.sync.aligned.m64n8k16.f16.f16.f16", 8, 2, ", 1, 1, 0, 0")
WG_SS(probe_m64n8k16_f16_f16_f16_neg, "wgmma.mma_async.sync.aligned.m64n8k16.f16.f16.f16", 8, 2, ", -1, -1, 0, 0")
WG_SS(probe_m64n256k16_f16_f16_f16, "wgmma.mma_async.sync.aligned.m64n256k16.f16.f16.f16", 256, 64, ", 1, 1, 0, 0")
WG_SS(probe_m64n256k16_f16_f16_f16_neg, "wgmma.mma_async.sync.aligned.m64n256k16.f16.f16.f16", 256, 64, ", -1, -1, 0, 0")
WG_SS(probe_m64n8k16_f32_f16_f16, "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16", 8, 4, ", 1, 1, 0, 0")
WG_SS(probe_m64n8k16_f32_f16_f16_neg, "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16", 8, 4, ", -1, -1, 0, 0")
WG_SS(probe_m64n256k16_f32_f16_f16, "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16", 256, 128, ", 1, 1, 0, 0")
WG_SS(probe_m64n256k16_f32_f16_f16_neg, "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16", 256, 128, ", -1, -1, 0, 0")
WG_SS(probe_m64n8k16_f32_bf16_bf16, "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16", 8, 4, ", 1, 1, 0, 0")
WG_SS(probe_m64n8k16_f32_bf16_bf16_neg, "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16", 8, 4, ", -1, -1, 0, 0")
WG_SS(probe_m64n256k16_f32_bf16_bf16, "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16", 256, 128, ", 1, 1, 0, 0")
WG_SS(probe_m64n256k16_f32_bf16_bf16_neg, "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16", 256, 128, ", -1, -1, 0, 0")
WG_SS(probe_m64n8k8_f32_tf32_tf32, "wgmma.mma_async.sync.aligned.m64n8k8.f32.tf32.tf32", 8, 4, ", 1, 1")
WG_SS(probe_m64n8k8_f32_tf32_tf32_neg, "wgmma.mma_async.sync.aligned.m64n8k8.f32.tf32.tf32", 8, 4, ", -1, -1")
WG_SS(probe_m64n256k8_f32_tf32_tf32, "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32", 256, 128, ", 1, 1")
WG_SS(probe_m64n256k8_f32_tf32_tf32_neg, "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32", 256, 128, ", -1, -1")
WG_SS(probe_m64n8k32_f16_e4m3_e4m3, "wgmma.mma_async.sync.aligned.m64n8k32.f16.e4m3.e4m3", 8, 2, ", 1, 1")
WG_SS(probe_m64n8k32_f16_e4m3_e4m3_neg, "wgmma.mma_async.sync.aligned.m64n8k32.f16.e4m3.e4m3", 8, 2, ", -1, -1")
WG_SS(probe_m64n256k32_f16_e4m3_e4m3, "wgmma.mma_async.sync.aligned.m64n256k32.f16.e4m3.e4m3", 256, 64, ", 1, 1")
WG_SS(probe_m64n256k32_f16_e4m3_e4m3_neg, "wgmma.mma_async.sync.aligned.m64n256k32.f16.e4m3.e4m3", 256, 64, ", -1, -1")
WG_SS(probe_m64n8k32_f16_e4m3_e5m2, "wgmma.mma_async.sync.aligned.m64n8k32.f16.e4m3.e5m2", 8, 2, ", 1, 1")
WG_SS(probe_m64n8k32_f16_e4m3_e5m2_neg, "wgmma.mma_async.sync.aligned.m64n8k32.f16.e4m3.e5m2", 8, 2, ", -1, -1")
WG_SS(probe_m64n256k32_f16_e4m3_e5m2, "wgmma.mma_async.sync.aligned.m64n256k32.f16.e4m3.e5m2", 256, 64, ", 1, 1")
WG_SS(probe_m64n256k32_f16_e4m3_e5m2_neg, "wgmma.mma_async.sync.aligned.m64n256k32.f16.e4m3.e5m2", 256, 64, ", -1, -1")
WG_SS(probe_m64n8k32_f16_e5m2_e4m3, "wgmma.mma_async.sync.aligned.m64n8k32.f16.e5m2.e4m3", 8, 2, ", 1, 1")
WG_SS(probe_m64n8k32_f16_e5m2_e4m3_neg, "wgmma.mma_async.sync.aligned.m64n8k32.f16.e5m2.e4m3", 8, 2, ", -1, -1")
WG_SS(probe_m64n256k32_f16_e5m2_e4m3, "wgmma.mma_async.sync.aligned.m64n256k32.f16.e5m2.e4m3", 256, 64, ", 1, 1")
WG_SS(probe_m64n256k32_f16_e5m2_e4m3_neg, "wgmma.mma_async.sync.aligned.m64n256k32.f16.e5m2.e4m3", 256, 64, ", -1, -1")
WG_SS(probe_m64n8k32_f16_e5m2_e5m2, "wgmma.mma_async.sync.aligned.m64n8k32.f16.e5m2.e5m2", 8, 2, ", 1, 1")
WG_SS(probe_m64n8k32_f16_e5m2_e5m2_neg, "wgmma.mma_async.sync.aligned.m64n8k32.f16.e5m2.e5m2", 8, 2, ", -1, -1")
WG_SS(probe_m64n256k32_f16_e5m2_e5m2, "wgmma.mma_async.sync.aligned.m64n256k32.f16.e5m2.e5m2", 256, 64, ", 1, 1")
WG_SS(probe_m64n256k32_f16_e5m2_e5m2_neg, "wgmma.mma_async.sync.aligned.m64n256k32.f16.e5m2.e5m2", 256, 64, ", -1, -1")
WG_SS(probe_m64n8k32_f32_e4m3_e4m3, "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3", 8, 4, ", 1, 1")
WG_SS(probe_m64n8k32_f32_e4m3_e4m3_neg, "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3", 8, 4, ", -1, -1")
WG_SS(probe_m64n256k32_f32_e4m3_e4m3, "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3", 256, 128, ", 1, 1")
WG_SS(probe_m64n256k32_f32_e4m3_e4m3_neg, "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3", 256, 128, ", -1, -1")
WG_SS(probe_m64n8k32_f32_e4m3_e5m2, "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e5m2", 8, 4, ", 1, 1")
WG_SS(probe_m64n8k32_f32_e4m3_e5m2_neg, "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e5m2", 8, 4, ", -1, -1")
WG_SS(probe_m64n256k32_f32_e4m3_e5m2, "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e5m2", 256, 128, ", 1, 1")
WG_SS(probe_m64n256k32_f32_e4m3_e5m2_neg, "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e5m2", 256, 128, ", -1, -1")
WG_SS(probe_m64n8k32_f32_e5m2_e4m3, "wgmma.mma_async.sync.aligned.m64n8k32.f32.e5m2.e4m3", 8, 4, ", 1, 1")
WG_SS(probe_m64n8k32_f32_e5m2_e4m3_neg, "wgmma.mma_async.sync.aligned.m64n8k32.f32.e5m2.e4m3", 8, 4, ", -1, -1")
WG_SS(probe_m64n256k32_f32_e5m2_e4m3, "wgmma.mma_async.sync.aligned.m64n256k32.f32.e5m2.e4m3", 256, 128, ", 1, 1")
WG_SS(probe_m64n256k32_f32_e5m2_e4m3_neg, "wgmma.mma_async.sync.aligned.m64n256k32.f32.e5m2.e4m3", 256, 128, ", -1, -1")
WG_SS(probe_m64n8k32_f32_e5m2_e5m2, "wgmma.mma_async.sync.aligned.m64n8k32.f32.e5m2.e5m2", 8, 4, ", 1, 1")
WG_SS(probe_m64n8k32_f32_e5m2_e5m2_neg, "wgmma.mma_async.sync.aligned.m64n8k32.f32.e5m2.e5m2", 8, 4, ", -1, -1")
WG_SS(probe_m64n256k32_f32_e5m2_e5m2, "wgmma.mma_async.sync.aligned.m64n256k32.f32.e5m2.e5m2", 256, 128, ", 1, 1")
WG_SS(probe_m64n256k32_f32_e5m2_e5m2_neg, "wgmma.mma_async.sync.aligned.m64n256k32.f32.e5m2.e5m2", 256, 128, ", -1, -1")
WG_SS(probe_m64n8k32_s32_s8_s8, "wgmma.mma_async.sync.aligned.m64n8k32.s32.s8.s8", 8, 4, "")
WG_SS(probe_m64n8k32_s32_s8_s8_satfinite, "wgmma.mma_async.sync.aligned.m64n8k32.satfinite.s32.s8.s8", 8, 4, "")
WG_SS(probe_m64n256k32_s32_s8_s8, "wgmma.mma_async.sync.aligned.m64n256k32.s32.s8.s8", 256, 128, "")
WG_SS(probe_m64n256k32_s32_s8_s8_satfinite, "wgmma.mma_async.sync.aligned.m64n256k32.satfinite.s32.s8.s8", 256, 128, "")
WG_SS(probe_m64n8k32_s32_s8_u8, "wgmma.mma_async.sync.aligned.m64n8k32.s32.s8.u8", 8, 4, "")
WG_SS(probe_m64n8k32_s32_s8_u8_satfinite, "wgmma.mma_async.sync.aligned.m64n8k32.satfinite.s32.s8.u8", 8, 4, "")
WG_SS(probe_m64n256k32_s32_s8_u8, "wgmma.mma_async.sync.aligned.m64n256k32.s32.s8.u8", 256, 128, "")
WG_SS(probe_m64n256k32_s32_s8_u8_satfinite, "wgmma.mma_async.sync.aligned.m64n256k32.satfinite.s32.s8.u8", 256, 128, "")
WG_SS(probe_m64n8k32_s32_u8_s8, "wgmma.mma_async.sync.aligned.m64n8k32.s32.u8.s8", 8, 4, "")
WG_SS(probe_m64n8k32_s32_u8_s8_satfinite, "wgmma.mma_async.sync.aligned.m64n8k32.satfinite.s32.u8.s8", 8, 4, "")
WG_SS(probe_m64n256k32_s32_u8_s8, "wgmma.mma_async.sync.aligned.m64n256k32.s32.u8.s8", 256, 128, "")
WG_SS(probe_m64n256k32_s32_u8_s8_satfinite, "wgmma.mma_async.sync.aligned.m64n256k32.satfinite.s32.u8.s8", 256, 128, "")
WG_SS(probe_m64n8k32_s32_u8_u8, "wgmma.mma_async.sync.aligned.m64n8k32.s32.u8.u8", 8, 4, "")
WG_SS(probe_m64n8k32_s32_u8_u8_satfinite, "wgmma.mma_async.sync.aligned.m64n8k32.satfinite.s32.u8.u8", 8, 4, "")
WG_SS(probe_m64n256k32_s32_u8_u8, "wgmma.mma_async.sync.aligned.m64n256k32.s32.u8.u8", 256, 128, "")
WG_SS(probe_m64n256k32_s32_u8_u8_satfinite, "wgmma.mma_async.sync.aligned.m64n256k32.satfinite.s32.u8.u8", 256, 128, "")
WG_SS(probe_m64n8k256_s32_b1_b1, "wgmma.mma_async.sync.aligned.m64n8k256.s32.b1.b1.and.popc", 8, 4, "")
WG_SS(probe_m64n256k256_s32_b1_b1, "wgmma.mma_async.sync.aligned.m64n256k256.s32.b1.b1.and.popc", 256, 128, "")

// f32.f16.f16 with A from registers (imm-scale-a, imm-scale-b, imm-trans-b)
WG_RS(probe_m64n8k16_f32_f16_f16_rs, "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16", 8, 4, ", 1, 1, 0")
WG_RS(probe_m64n8k16_f32_f16_f16_neg_rs, "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16", 8, 4, ", -1, -1, 0")
WG_RS(probe_m64n256k16_f32_f16_f16_rs, "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16", 256, 128, ", 1, 1, 0")
WG_RS(probe_m64n256k16_f32_f16_f16_neg_rs, "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16", 256, 128, ", -1, -1, 0")
