// sm_90a test kernels of refsim.ptx.hopper.matrix: stmatrix.sync.aligned.m8n8.{x1,x2,x4}{.trans}.shared.b16.
// One warp: lane l holds registers r_j = (2v | (2v + 1) << 16) + 0x0100 j with v = 4l + j; lanes 0..8num-1
// give the row addresses of the num 8x8 matrices, rows permuted (row p of the 8num rows lands in slot
// 5p mod 8num); the shared tile (0xFFFF where nothing is stored) is copied to rows, then read back with
// ldmatrix of the same form and addresses into regs.
// Compiled by regen.py with nvcc -arch=sm_90a -ptx -O3 (CUDA 13.0).
#include <cstdint>

template <int NUM, bool TRANS> struct Matrix;
template <> struct Matrix<1, false> {
    static __device__ __forceinline__ void st(uint32_t a, const uint32_t *r) {
        asm volatile("stmatrix.sync.aligned.m8n8.x1.shared.b16 [%0], {%1};" ::"r"(a), "r"(r[0]) : "memory");
    }
    static __device__ __forceinline__ void ld(uint32_t a, uint32_t *q) {
        asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];" : "=r"(q[0]) : "r"(a) : "memory");
    }
};
template <> struct Matrix<1, true> {
    static __device__ __forceinline__ void st(uint32_t a, const uint32_t *r) {
        asm volatile("stmatrix.sync.aligned.m8n8.x1.trans.shared.b16 [%0], {%1};" ::"r"(a), "r"(r[0]) : "memory");
    }
    static __device__ __forceinline__ void ld(uint32_t a, uint32_t *q) {
        asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];" : "=r"(q[0]) : "r"(a) : "memory");
    }
};
template <> struct Matrix<2, false> {
    static __device__ __forceinline__ void st(uint32_t a, const uint32_t *r) {
        asm volatile("stmatrix.sync.aligned.m8n8.x2.shared.b16 [%0], {%1, %2};" ::"r"(a), "r"(r[0]), "r"(r[1]) : "memory");
    }
    static __device__ __forceinline__ void ld(uint32_t a, uint32_t *q) {
        asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];" : "=r"(q[0]), "=r"(q[1]) : "r"(a) : "memory");
    }
};
template <> struct Matrix<2, true> {
    static __device__ __forceinline__ void st(uint32_t a, const uint32_t *r) {
        asm volatile("stmatrix.sync.aligned.m8n8.x2.trans.shared.b16 [%0], {%1, %2};" ::"r"(a), "r"(r[0]), "r"(r[1]) : "memory");
    }
    static __device__ __forceinline__ void ld(uint32_t a, uint32_t *q) {
        asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];" : "=r"(q[0]), "=r"(q[1]) : "r"(a) : "memory");
    }
};
template <> struct Matrix<4, false> {
    static __device__ __forceinline__ void st(uint32_t a, const uint32_t *r) {
        asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(a), "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]) : "memory");
    }
    static __device__ __forceinline__ void ld(uint32_t a, uint32_t *q) {
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];" : "=r"(q[0]), "=r"(q[1]), "=r"(q[2]), "=r"(q[3]) : "r"(a) : "memory");
    }
};
template <> struct Matrix<4, true> {
    static __device__ __forceinline__ void st(uint32_t a, const uint32_t *r) {
        asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(a), "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]) : "memory");
    }
    static __device__ __forceinline__ void ld(uint32_t a, uint32_t *q) {
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];" : "=r"(q[0]), "=r"(q[1]), "=r"(q[2]), "=r"(q[3]) : "r"(a) : "memory");
    }
};

template <int NUM, bool TRANS>
__device__ __forceinline__ void roundtrip(uint16_t *rows, uint32_t *regs) {
    __shared__ __align__(16) uint16_t s[4 * 64];
    const int l = threadIdx.x;
    uint32_t r[4], q[4] = {0, 0, 0, 0};
    for (int j = 0; j < 4; ++j) {
        const uint32_t v = 4u * l + j;
        r[j] = ((2u * v) | ((2u * v + 1u) << 16)) + 0x0100u * j;
    }
    for (int i = l; i < 4 * 64; i += 32) s[i] = 0xFFFF;
    __syncthreads();
    const uint32_t a = (uint32_t)__cvta_generic_to_shared(s + (5 * l) % (8 * NUM) * 8);
    Matrix<NUM, TRANS>::st(a, r);
    __syncthreads();
    for (int i = l; i < 4 * 64; i += 32) rows[i] = s[i];
    Matrix<NUM, TRANS>::ld(a, q);
    for (int j = 0; j < 4; ++j) regs[4 * l + j] = q[j];
}

extern "C" __global__ void stm_x1(uint16_t *rows, uint32_t *regs) { roundtrip<1, false>(rows, regs); }
extern "C" __global__ void stm_x1_trans(uint16_t *rows, uint32_t *regs) { roundtrip<1, true>(rows, regs); }
extern "C" __global__ void stm_x2(uint16_t *rows, uint32_t *regs) { roundtrip<2, false>(rows, regs); }
extern "C" __global__ void stm_x2_trans(uint16_t *rows, uint32_t *regs) { roundtrip<2, true>(rows, regs); }
extern "C" __global__ void stm_x4(uint16_t *rows, uint32_t *regs) { roundtrip<4, false>(rows, regs); }
extern "C" __global__ void stm_x4_trans(uint16_t *rows, uint32_t *regs) { roundtrip<4, true>(rows, regs); }
