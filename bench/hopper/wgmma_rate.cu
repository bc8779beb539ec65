// wgmma_rate.cu: the issue rate of wgmma.mma_async on one SM, per N, per warpgroup count -- the number the
// performance model takes from the datasheet (the tensor peak at every N; refsim.gpu_model's cuBLAS sm_90
// family, DeepGEMM and the W4A16 wgmma kernel). bench/measure_hopper.py (part `wgmma`) launches it on an
// H100/H200; refsim never needs a GPU for it: its PTX is committed beside it and tests/test_bench_hopper.py
// runs that PTX through refsim.ptx (the sums it writes equal NumPy's).
//
// Spec
// ----
// entries     wgmma_rate_<kind>_n<N>: kind f16 (wgmma.mma_async.sync.aligned.m64n<N>k16.f32.f16.f16, N = 8, 16,
//             32, 64, 128, 256) and e4m3 (m64n<N>k32.f32.e4m3.e4m3, N = 64, 128, 256: DeepGEMM's instruction);
//             both operands from shared memory (descriptors), f32 accumulators in registers.
// launch      grid = the SM count, block = 128 x WG threads (WG warpgroups, 1 or 2), no dynamic shared memory;
//             arguments (init: uint4 [128 + 2N] the A and B bytes, cycles: u64 [grid], ns: u64 [grid],
//             sink: f32 [grid x block], iters: int).
// loop        per iteration each warpgroup issues wgmma.fence, GROUP = 4 wgmmas into the same accumulators
//             (a 64-deep K tile of f16, 128-deep of e4m3), commit_group, wait_group 0 -- CUTLASS's mainloop
//             step without the loads; with 2 warpgroups one's wait overlaps the other's MMAs.
// output      cycles[b]: the slowest warp's clock64 cycles over the loop; ns[b]: warp 0's %globaltimer
//             nanoseconds (cycles / ns = the SM clock under this load); sink[thread] = the sum of its
//             accumulators (over a warpgroup: iters x GROUP x sum(A @ B)).
// shared      A (64 x 32 bytes) at 0 and B (N x 32 bytes, B^T K-major) at 2,048 in the canonical K-major
//             layout without swizzle: core matrices of 8 rows x 16 bytes, LBO 128, SBO 256 (as
//             refsim/cuda/wgmma.cu); init chunk i (16 bytes) of an operand is row i / 2, k-bytes 16 (i % 2).
// build       nvcc -arch=sm_90a -ptx -O3 wgmma_rate.cu -o wgmma_rate.ptx && gzip -9 -n wgmma_rate.ptx
//
//   init ──16-byte chunks──► smem A, B ──desc──► [fence, 4 x wgmma, commit, wait 0] x iters ──► sink, cycles
#include <stdint.h>

#define SMEM_B 2048
#define SMEM_BYTES 10240
#define LBO 128
#define SBO 256
#define GROUP 4

__device__ __forceinline__ uint32_t smem_addr(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

__device__ __forceinline__ uint64_t descriptor(uint32_t addr) {
  return (uint64_t)((addr & 0x3FFFF) >> 4) | (uint64_t)(LBO >> 4) << 16 | (uint64_t)(SBO >> 4) << 32;
}

__device__ __forceinline__ unsigned long long globaltimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// 16-byte chunk i of an operand (row i / 2, k-bytes 16 (i % 2) ..) into its core-matrix place
__device__ __forceinline__ void put(uint8_t *base, int i, uint4 v) {
  const int row = i / 2;
  *reinterpret_cast<uint4 *>(base + (row / 8) * SBO + (i % 2) * LBO + (row % 8) * 16) = v;
}

template <int N> __device__ __forceinline__ void stage(uint8_t *smem, const uint4 *init) {
  for (int i = threadIdx.x; i < 128; i += blockDim.x) put(smem, i, init[i]);
  for (int i = threadIdx.x; i < 2 * N; i += blockDim.x) put(smem + SMEM_B, i, init[128 + i]);
  __syncthreads();
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

#define ACC_4 "{" "%0, %1, %2, %3" "}"
#define SS_4 "%4, %5, p"  // a-desc, b-desc, scale-d
#define SCALE_4 "%6"
#define ACC_8 "{" "%0, %1, %2, %3, %4, %5, %6, %7" "}"
#define SS_8 "%8, %9, p"  // a-desc, b-desc, scale-d
#define SCALE_8 "%10"
#define ACC_16 "{" "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15" "}"
#define SS_16 "%16, %17, p"  // a-desc, b-desc, scale-d
#define SCALE_16 "%18"
#define ACC_32 "{" "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31" "}"
#define SS_32 "%32, %33, p"  // a-desc, b-desc, scale-d
#define SCALE_32 "%34"
#define ACC_64 "{" "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63" "}"
#define SS_64 "%64, %65, p"  // a-desc, b-desc, scale-d
#define SCALE_64 "%66"
#define ACC_128 "{" "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, " \
    "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
    "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, " \
    "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
    "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127" "}"
#define SS_128 "%128, %129, p"  // a-desc, b-desc, scale-d
#define SCALE_128 "%130"
#define OUT8(o) "+f"(d[o]), "+f"(d[o + 1]), "+f"(d[o + 2]), "+f"(d[o + 3]), "+f"(d[o + 4]), "+f"(d[o + 5]), \
                "+f"(d[o + 6]), "+f"(d[o + 7])
#define OUT_4 "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
#define OUT_8 OUT8(0)
#define OUT_16 OUT8(0), OUT8(8)
#define OUT_32 OUT_16, OUT8(16), OUT8(24)
#define OUT_64 OUT_32, OUT8(32), OUT8(40), OUT8(48), OUT8(56)
#define OUT_128 OUT_64, OUT8(64), OUT8(72), OUT8(80), OUT8(88), OUT8(96), OUT8(104), OUT8(112), OUT8(120)

// one entry: GROUP wgmmas of INSTR (IMM: its immediates) per iteration into ND f32 accumulators
#define RATE(NAME, INSTR, N, ND, IMM)                                                                 \
  extern "C" __global__ void __launch_bounds__(256) NAME(const uint4 *init, unsigned long long *cycles,  \
                                                        unsigned long long *ns, float *sink, int iters) { \
    __shared__ __align__(128) uint8_t smem[SMEM_BYTES];                                              \
    stage<N>(smem, init);                                                                            \
    float d[ND];                                                                                     \
    _Pragma("unroll") for (int i = 0; i < ND; ++i) d[i] = 0.f;                                       \
    const uint64_t da = descriptor(smem_addr(smem)), db = descriptor(smem_addr(smem + SMEM_B));      \
    const int one = 1;                                                                               \
    __syncthreads();                                                                                 \
    const unsigned long long g0 = globaltimer(), t0 = clock64();                                     \
    for (int it = 0; it < iters; ++it) {                                                             \
      asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");                                      \
      asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, " SCALE_##ND ", 0;\n"                       \
                   INSTR " " ACC_##ND ", " SS_##ND IMM ";\n" INSTR " " ACC_##ND ", " SS_##ND IMM ";\n" \
                   INSTR " " ACC_##ND ", " SS_##ND IMM ";\n" INSTR " " ACC_##ND ", " SS_##ND IMM ";\n}\n" \
                   : OUT_##ND : "l"(da), "l"(db), "r"(one) : "memory");                              \
      asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");                               \
      asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");                               \
    }                                                                                                \
    const unsigned long long t1 = clock64(), g1 = globaltimer();                                     \
    float total = 0.f;                                                                               \
    _Pragma("unroll") for (int i = 0; i < ND; ++i) total += d[i];                                    \
    sink[blockIdx.x * blockDim.x + threadIdx.x] = total;                                             \
    if (threadIdx.x % 32 == 0) atomicMax(&cycles[blockIdx.x], t1 - t0);                              \
    if (threadIdx.x == 0) ns[blockIdx.x] = g1 - g0;                                                  \
  }

RATE(wgmma_rate_f16_n8, "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16", 8, 4, ", 1, 1, 0, 0")
RATE(wgmma_rate_f16_n16, "wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16", 16, 8, ", 1, 1, 0, 0")
RATE(wgmma_rate_f16_n32, "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16", 32, 16, ", 1, 1, 0, 0")
RATE(wgmma_rate_f16_n64, "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16", 64, 32, ", 1, 1, 0, 0")
RATE(wgmma_rate_f16_n128, "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16", 128, 64, ", 1, 1, 0, 0")
RATE(wgmma_rate_f16_n256, "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16", 256, 128, ", 1, 1, 0, 0")
RATE(wgmma_rate_e4m3_n64, "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3", 64, 32, ", 1, 1")
RATE(wgmma_rate_e4m3_n128, "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3", 128, 64, ", 1, 1")
RATE(wgmma_rate_e4m3_n256, "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3", 256, 128, ", 1, 1")
