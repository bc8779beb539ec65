// marlin_issue.cu: Marlin's per-tile inner loop (IST-DASLab/marlin @ 2f6d7c1, marlin_cuda_kernel.cu:
// the 4-bit dequant of `dequant`/`scale` feeding mma.sync m16n8k16 f16 x f16 -> f32) with no global
// memory traffic, so that one SM's issue of that loop can be timed alone. bench/measure_hopper.py
// launches it; refsim never runs it (its PTX is committed beside it, tests do not need a GPU).
//
// One CTA per SM of WARPS warps (8 warps = 2 per SM sub-partition, as Marlin's 256 threads). Each warp
// runs `tiles` tiles; a tile is, per warp, 2 k16 steps (Marlin's 64 x 256 tile split over 8 warps:
// 4 column groups of 64 x 2 k halves) of:
//   LDS.128 of 4 packed B words, one ldmatrix.x4 of A per m-block (from a small shared buffer),
//   per word: 2 LOP3 (nibbles into fp16 exponent), HSUB2 + HFMA2 (the bias), 4 HMUL2 when grouped,
//   8 * M_BLOCKS mma.sync m16n8k16 (4 words x 2 n8 halves x M_BLOCKS), f32 accumulators kept live.
// MODE bits: 1 = the mma.sync, 2 = the dequant (without it the raw words feed the MMA), 4 = a
// __syncthreads per tile (Marlin's wait_for_stage barrier), 8 = group scales (4 HMUL2 per word).
// Output: per CTA the cycles (clock64) its slowest warp took for all tiles and the nanoseconds
// (%globaltimer) warp 0 took, so cycles / ns is the SM clock under this load; `sink` keeps the results
// live. Compiled by: nvcc -arch=sm_80 -ptx -O3 marlin_issue.cu (see bench/hopper/README.md).
#include <cuda_fp16.h>

__device__ __forceinline__ int lop3_and_or(int a, int b, int c) {
    int r;  // (a & b) | c, Marlin's lop3<(0xf0 & 0xcc) | 0xaa>
    asm volatile("lop3.b32 %0, %1, %2, %3, 0xea;\n" : "=r"(r) : "r"(a), "r"(b), "r"(c));
    return r;
}

__device__ __forceinline__ void dequant4(int q, half2 out[2]) {
    const int LO = 0x000f000f, HI = 0x00f000f0, EX = 0x64006400;
    const int SUB = 0x64086408, MUL = 0x2c002c00, ADD = 0xd480d480;
    int lo = lop3_and_or(q, LO, EX);
    int hi = lop3_and_or(q, HI, EX);
    out[0] = __hsub2(*reinterpret_cast<half2*>(&lo), *reinterpret_cast<const half2*>(&SUB));
    out[1] = __hfma2(*reinterpret_cast<half2*>(&hi), *reinterpret_cast<const half2*>(&MUL),
                     *reinterpret_cast<const half2*>(&ADD));
}

__device__ __forceinline__ void mma16816(const unsigned a[4], const half2 b[2], float c[4]) {
    const unsigned* bb = reinterpret_cast<const unsigned*>(b);
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(bb[0]), "r"(bb[1]));
}

__device__ __forceinline__ unsigned long long globaltimer() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
    return t;
}

template <int M_BLOCKS, int MODE>
__device__ void run(const int* __restrict__ q_in, unsigned long long* cycles, unsigned long long* ns, float* sink,
                    int tiles) {
    __shared__ int4 sh_b[64];
    __shared__ int4 sh_a[256];
    const int lane = threadIdx.x % 32;
    for (int i = threadIdx.x; i < 64; i += blockDim.x) sh_b[i] = reinterpret_cast<const int4*>(q_in)[i];
    for (int i = threadIdx.x; i < 256; i += blockDim.x) sh_a[i] = reinterpret_cast<const int4*>(q_in)[i % 64];
    __syncthreads();
    float acc[M_BLOCKS][4][2][4];
#pragma unroll
    for (int i = 0; i < M_BLOCKS; i++)
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int h = 0; h < 2; h++)
#pragma unroll
                for (int r = 0; r < 4; r++) acc[i][j][h][r] = 0.f;
    const half2 s = __floats2half2_rn(1.f, 1.f);
    int dead = 0;
    __syncthreads();
    unsigned long long g0 = globaltimer();
    unsigned long long t0 = clock64();
    for (int t = 0; t < tiles; t++) {
#pragma unroll
        for (int k = 0; k < 2; k++) {
            int4 bq = sh_b[(lane + 32 * k + t) & 63];             // LDS.128: 4 packed words
            unsigned a[M_BLOCKS][4];
#pragma unroll
            for (int i = 0; i < M_BLOCKS; i++) {                  // ldmatrix.x4 per m-block
                unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(&sh_a[(lane + 64 * i + t) & 255]));
                asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                             : "=r"(a[i][0]), "=r"(a[i][1]), "=r"(a[i][2]), "=r"(a[i][3]) : "r"(addr));
            }
            const int words[4] = {bq.x, bq.y, bq.z, bq.w};
#pragma unroll
            for (int j = 0; j < 4; j++) {
                half2 b0[2], b1[2];
                if (MODE & 2) {
                    dequant4(words[j], b0);
                    dequant4(words[j] >> 8, b1);
                    if (MODE & 8) {
                        b0[0] = __hmul2(b0[0], s); b0[1] = __hmul2(b0[1], s);
                        b1[0] = __hmul2(b1[0], s); b1[1] = __hmul2(b1[1], s);
                    }
                } else {
                    b0[0] = *reinterpret_cast<const half2*>(&words[j]); b0[1] = b0[0];
                    b1[0] = b0[0]; b1[1] = b0[0];
                }
                if (MODE & 1) {
#pragma unroll
                    for (int i = 0; i < M_BLOCKS; i++) {
                        mma16816(a[i], b0, acc[i][j][0]);
                        mma16816(a[i], b1, acc[i][j][1]);
                    }
                } else {
                    dead ^= *reinterpret_cast<int*>(&b0[0]) ^ *reinterpret_cast<int*>(&b0[1])
                          ^ *reinterpret_cast<int*>(&b1[0]) ^ *reinterpret_cast<int*>(&b1[1]) ^ a[0][j & 3];
                }
            }
        }
        if (MODE & 4) __syncthreads();
    }
    unsigned long long t1 = clock64();
    unsigned long long g1 = globaltimer();
    float total = static_cast<float>(dead);
#pragma unroll
    for (int i = 0; i < M_BLOCKS; i++)
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int h = 0; h < 2; h++)
#pragma unroll
                for (int r = 0; r < 4; r++) total += acc[i][j][h][r];
    sink[blockIdx.x * blockDim.x + threadIdx.x] = total;
    if (lane == 0) atomicMax(&cycles[blockIdx.x], t1 - t0);
    if (threadIdx.x == 0) ns[blockIdx.x] = g1 - g0;
}

// one extern "C" entry per (m_blocks, mode): marlin_issue_m<M>_<mode>
#define ENTRY(M, MODE)                                                                               \
    extern "C" __global__ void marlin_issue_m##M##_##MODE(const int* q, unsigned long long* cycles, \
                                                         unsigned long long* ns, float* sink,      \
                                                         int tiles) {                              \
        run<M, MODE>(q, cycles, ns, sink, tiles);                                                    \
    }
#define ENTRIES(M) ENTRY(M, 1) ENTRY(M, 2) ENTRY(M, 3) ENTRY(M, 7) ENTRY(M, 11) ENTRY(M, 15)
ENTRIES(1)
ENTRIES(2)
ENTRIES(4)
