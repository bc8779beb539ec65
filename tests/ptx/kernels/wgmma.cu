// Hopper wgmma test kernels of refsim.ptx (tests/ptx/hopper/test_wgmma.py): one warpgroup (128 threads)
// per block. Shared memory images are built on the host (refsim.formats.smem_layouts) and copied in;
// descriptors arrive as kernel parameters. Accumulators are loaded from / stored to row-major
// matrices through the PTX ISA's wgmma accumulator fragment layout, written out here:
//   warp w of the warpgroup holds rows 16w..16w+15; register i of lane l holds
//   row 16w + l/4 + 8*((i/2)%2), column 8*(i/4) + 2*(l%4) + i%2.
// Compiled by tests/ptx/kernels/regen.py (nvcc -arch=sm_90a -ptx -O3).
#include <stdint.h>

__device__ __forceinline__ void fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
__device__ __forceinline__ void proxy_fence() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

__device__ __forceinline__ int frag_row(int i) { return 16 * (threadIdx.x / 32) + (threadIdx.x % 32) / 4 + 8 * ((i / 2) % 2); }
__device__ __forceinline__ int frag_col(int i) { return 8 * (i / 4) + 2 * (threadIdx.x % 4) + i % 2; }

// the shared-memory image (nbytes, a multiple of 16) from global memory, then ordered for the async proxy
__device__ __forceinline__ void load_image(uint8_t *smem, const uint4 *img, int nbytes) {
    for (int i = threadIdx.x; i < nbytes / 16; i += blockDim.x) reinterpret_cast<uint4 *>(smem)[i] = img[i];
    __syncthreads();
    proxy_fence();
}

__device__ __forceinline__ void wg_f16_ss(float *d, uint64_t da, uint64_t db, int scale_d) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "l"(da), "l"(db), "r"(scale_d));
}
__device__ __forceinline__ void wg_f16_rs(float *d, uint32_t const *a, uint64_t db, int scale_d) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale_d));
}
__device__ __forceinline__ void wg_e4m3_ss(float *d, uint64_t da, uint64_t db, int scale_d) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "l"(da), "l"(db), "r"(scale_d));
}
__device__ __forceinline__ void wg_f16acc_ss(uint32_t *d, uint64_t da, uint64_t db, int scale_d) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f16.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, p, 1, 1, 0, 0;\n}\n"
                 : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15])
                 : "l"(da), "l"(db), "r"(scale_d));
}
__device__ __forceinline__ void wg_s8_ss(int *d, uint64_t da, uint64_t db, int scale_d) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p;\n}\n"
                 : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31])
                 : "l"(da), "l"(db), "r"(scale_d));
}

// D (64 x 64, f32) = A (64 x 16 f16, descriptor) . B (16 x 64 f16, descriptor) + C, scale-d = scale_d
extern "C" __global__ void wgmma_f16_ss(const uint4 *img, int nbytes, uint64_t da, uint64_t db, const float *C,
                                        float *D, int scale_d) {
    extern __shared__ __align__(1024) uint8_t smem[];
    load_image(smem, img, nbytes);
    float d[32];
    for (int i = 0; i < 32; i++) d[i] = C[frag_row(i) * 64 + frag_col(i)];
    fence();
    wg_f16_ss(d, da, db, scale_d);
    commit();
    wait<0>();
    for (int i = 0; i < 32; i++) D[frag_row(i) * 64 + frag_col(i)] = d[i];
}

// as wgmma_f16_ss with A (64 x 16 f16, row-major in global memory) from registers: register r of lane
// l holds A[16w + l/4 + 8*(r%2)][2*(l%4) + 8*(r/2) + {0, 1}] (low half first)
extern "C" __global__ void wgmma_f16_rs(const uint4 *img, int nbytes, const uint32_t *A, uint64_t db, const float *C,
                                        float *D, int scale_d) {
    extern __shared__ __align__(1024) uint8_t smem[];
    load_image(smem, img, nbytes);
    int w = threadIdx.x / 32, l = threadIdx.x % 32;
    uint32_t a[4];
    for (int r = 0; r < 4; r++) a[r] = A[((16 * w + l / 4 + 8 * (r % 2)) * 16 + 2 * (l % 4) + 8 * (r / 2)) / 2];
    float d[32];
    for (int i = 0; i < 32; i++) d[i] = C[frag_row(i) * 64 + frag_col(i)];
    fence();
    wg_f16_rs(d, a, db, scale_d);
    commit();
    wait<0>();
    for (int i = 0; i < 32; i++) D[frag_row(i) * 64 + frag_col(i)] = d[i];
}

// D (64 x 128, f32) = A (64 x 32 e4m3) . B (32 x 128 e4m3) + C, both from descriptors
extern "C" __global__ void wgmma_e4m3(const uint4 *img, int nbytes, uint64_t da, uint64_t db, const float *C,
                                      float *D, int scale_d) {
    extern __shared__ __align__(1024) uint8_t smem[];
    load_image(smem, img, nbytes);
    float d[64];
    for (int i = 0; i < 64; i++) d[i] = C[frag_row(i) * 128 + frag_col(i)];
    fence();
    wg_e4m3_ss(d, da, db, scale_d);
    commit();
    wait<0>();
    for (int i = 0; i < 64; i++) D[frag_row(i) * 128 + frag_col(i)] = d[i];
}

// D (64 x 64, s32) = A (64 x 32 s8) . B (32 x 64 s8) + C, both from descriptors
extern "C" __global__ void wgmma_s8(const uint4 *img, int nbytes, uint64_t da, uint64_t db, const int *C, int *D,
                                    int scale_d) {
    extern __shared__ __align__(1024) uint8_t smem[];
    load_image(smem, img, nbytes);
    int d[32];
    for (int i = 0; i < 32; i++) d[i] = C[frag_row(i) * 64 + frag_col(i)];
    fence();
    wg_s8_ss(d, da, db, scale_d);
    commit();
    wait<0>();
    for (int i = 0; i < 32; i++) D[frag_row(i) * 64 + frag_col(i)] = d[i];
}

// two commit groups: D1 = A . B1 (group 1), D2 = A . B2 (group 2); D1 is stored after wait_group 1
// (group 1 complete, group 2 may be pending), D2 after wait_group 0
extern "C" __global__ void wgmma_groups(const uint4 *img, int nbytes, uint64_t da, uint64_t db1, uint64_t db2,
                                        float *D1, float *D2) {
    extern __shared__ __align__(1024) uint8_t smem[];
    load_image(smem, img, nbytes);
    float d1[32], d2[32];
    for (int i = 0; i < 32; i++) d1[i] = d2[i] = 0.0f;
    fence();
    wg_f16_ss(d1, da, db1, 0);
    commit();
    wg_f16_ss(d2, da, db2, 0);
    commit();
    wait<1>();
    for (int i = 0; i < 32; i++) D1[frag_row(i) * 64 + frag_col(i)] = d1[i];
    wait<0>();
    for (int i = 0; i < 32; i++) D2[frag_row(i) * 64 + frag_col(i)] = d2[i];
}

// an f16 accumulator (m64n64k16.f16.f16.f16): 16 registers of f16x2 per thread, passed in and out
// raw (thread t's register r at C[16 t + r]) so that the test states the fragment layout itself
extern "C" __global__ void wgmma_f16acc(const uint4 *img, int nbytes, uint64_t da, uint64_t db, const uint32_t *C,
                                        uint32_t *D) {
    extern __shared__ __align__(1024) uint8_t smem[];
    load_image(smem, img, nbytes);
    uint32_t d[16];
    for (int r = 0; r < 16; r++) d[r] = C[16 * threadIdx.x + r];
    fence();
    wg_f16acc_ss(d, da, db, 1);
    commit();
    wait<0>();
    for (int r = 0; r < 16; r++) D[16 * threadIdx.x + r] = d[r];
}

// the inner loop of an FP8 GEMM (bench/bench_wgmma.py): `steps` times four m64n128k32 e4m3 wgmmas into
// one f32 accumulator (B advanced by 32 bytes of K through the 128B swizzle atom each time), a commit
// and a wait, as DeepGEMM's consumer warpgroups issue them per 128-deep K block
extern "C" __global__ void wgmma_e4m3_loop(const uint4 *img, int nbytes, uint64_t da, uint64_t db, float *D, int steps) {
    extern __shared__ __align__(1024) uint8_t smem[];
    load_image(smem, img, nbytes);
    float d[64];
    for (int i = 0; i < 64; i++) d[i] = 0.0f;
    for (int s = 0; s < steps; s++) {
        fence();
        for (int k = 0; k < 4; k++) wg_e4m3_ss(d, da + 2 * k, db + 2 * k, 1);
        commit();
        wait<0>();
    }
    for (int i = 0; i < 64; i++) D[blockIdx.x * 8192 + frag_row(i) * 128 + frag_col(i)] = d[i];
}

// a hazard: the accumulator is stored before the wgmma_group that writes it completes (no wait_group
// between commit and the stores); race=True names it
extern "C" __global__ void wgmma_early_read(const uint4 *img, int nbytes, uint64_t da, uint64_t db, float *D) {
    extern __shared__ __align__(1024) uint8_t smem[];
    load_image(smem, img, nbytes);
    float d[32];
    for (int i = 0; i < 32; i++) d[i] = 0.0f;
    fence();
    wg_f16_ss(d, da, db, 0);
    commit();
    for (int i = 0; i < 32; i++) D[frag_row(i) * 64 + frag_col(i)] = d[i];
    wait<0>();
}
