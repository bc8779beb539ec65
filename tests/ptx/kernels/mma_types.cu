// mma_types.cu -- test kernels for refsim.ptx: one mma.sync per warp for every input type beyond
// the f16 m16n8k16 of mma.cu: bf16 (m16n8k16, m16n8k8), tf32 (m16n8k8), e4m3/e5m2 (m16n8k32, mixed
// too) and f16 m16n8k8, all with f32 accumulation. Built for sm_89 (fp8 mma needs sm_89+).
//
// Spec
//   <kind>(A, Bt, C, D)  one warp; A (16, K) row-major raw element bits (M, K); Bt (8, K) row-major
//                        = B^T, i.e. B column-major (K, N) as mma's .col wants; C, D float32 (16, 8)
//                        row-major. D = mma(A, B, C) as refsim.arith.tensor_core_types.mma (bf16, tf32,
//                        fp8) or refsim.arith.tensor_core.mma_m16n8k8 (f16) computes it for the launch
//                        arch. Fragments are gathered element by element with the PTX ISA maps
//                        (g = lane / 4, t = lane % 4), so the kernel itself tests the maps:
//     16-bit A (m16n8k16): a[i] = A[g + 8*((i/2)%2)][2t + i%2 + 8*(i/4)], 2 per register, low first
//     16-bit B (m16n8k16): b[i] = B[2t + i%2 + 8*(i/2)][g];  m16n8k8: a[i] (i < 4), b[i] (i < 2) the same
//     tf32 A (m16n8k8):    a[i] = A[g + 8*(i%2)][t + 4*(i/2)], one per register;  b[i] = B[t + 4i][g]
//     fp8 A (m16n8k32):    a[i] = A[g + 8*((i/4)%2)][4t + i%4 + 16*(i/8)], 4 per register, low first
//     fp8 B (m16n8k32):    b[i] = B[4t + i%4 + 16*(i/4)][g]
//     C/D:                 c[i] = C[g + 8*(i/2)][2t + i%2]
// Oracle: tests/ptx/test_kernels.py (test_mma_types_kernels_equal_the_tensor_core_models).
#include <cstdint>

__device__ void load_c(const float *C, float c[4]) {
  int g = threadIdx.x / 4, t = threadIdx.x % 4;
  for (int i = 0; i < 4; i++) c[i] = C[(g + 8 * (i / 2)) * 8 + 2 * t + i % 2];
}

__device__ void store_d(float *D, const float d[4]) {
  int g = threadIdx.x / 4, t = threadIdx.x % 4;
  for (int i = 0; i < 4; i++) D[(g + 8 * (i / 2)) * 8 + 2 * t + i % 2] = d[i];
}

// 16-bit elements (f16, bf16): K = 16 gives 4 A and 2 B registers, K = 8 gives 2 and 1
template <int K>
__device__ void load_16bit(const uint16_t *A, const uint16_t *Bt, uint32_t *a, uint32_t *b) {
  int g = threadIdx.x / 4, t = threadIdx.x % 4;
  for (int i = 0; i < K / 2; i++) {
    int col = 2 * t + i % 2 + 8 * (i / 4);
    uint32_t v = A[(g + 8 * ((i / 2) % 2)) * K + col];
    a[i / 2] = (i % 2) ? (a[i / 2] | (v << 16)) : v;
  }
  for (int i = 0; i < K / 4; i++) {
    uint32_t v = Bt[g * K + 2 * t + i % 2 + 8 * (i / 2)];
    b[i / 2] = (i % 2) ? (b[i / 2] | (v << 16)) : v;
  }
}

extern "C" __global__ void bf16_k16(const uint16_t *A, const uint16_t *Bt, const float *C, float *D) {
  uint32_t a[4], b[2];
  float c[4];
  load_16bit<16>(A, Bt, a, b);
  load_c(C, c);
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%0,%1,%2,%3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  store_d(D, c);
}

#define K8_16BIT_KERNEL(NAME, T)                                                                          \
  extern "C" __global__ void NAME(const uint16_t *A, const uint16_t *Bt, const float *C, float *D) {    \
    uint32_t a[2], b[1];                                                                                \
    float c[4];                                                                                         \
    load_16bit<8>(A, Bt, a, b);                                                                         \
    load_c(C, c);                                                                                       \
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32." T "." T ".f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, "    \
                 "{%0,%1,%2,%3};\n"                                                                    \
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])                                       \
                 : "r"(a[0]), "r"(a[1]), "r"(b[0]));                                                    \
    store_d(D, c);                                                                                      \
  }

K8_16BIT_KERNEL(bf16_k8, "bf16")
K8_16BIT_KERNEL(f16_k8, "f16")

extern "C" __global__ void tf32_k8(const uint32_t *A, const uint32_t *Bt, const float *C, float *D) {
  int g = threadIdx.x / 4, t = threadIdx.x % 4;
  uint32_t a[4], b[2];
  float c[4];
  for (int i = 0; i < 4; i++) a[i] = A[(g + 8 * (i % 2)) * 8 + t + 4 * (i / 2)];
  for (int i = 0; i < 2; i++) b[i] = Bt[g * 8 + t + 4 * i];
  load_c(C, c);
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%0,%1,%2,%3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  store_d(D, c);
}

__device__ void load_fp8(const uint8_t *A, const uint8_t *Bt, uint32_t a[4], uint32_t b[2]) {
  int g = threadIdx.x / 4, t = threadIdx.x % 4;
  for (int r = 0; r < 4; r++) a[r] = 0;
  for (int r = 0; r < 2; r++) b[r] = 0;
  for (int i = 0; i < 16; i++)
    a[i / 4] |= uint32_t(A[(g + 8 * ((i / 4) % 2)) * 32 + 4 * t + i % 4 + 16 * (i / 8)]) << (8 * (i % 4));
  for (int i = 0; i < 8; i++) b[i / 4] |= uint32_t(Bt[g * 32 + 4 * t + i % 4 + 16 * (i / 4)]) << (8 * (i % 4));
}

#define FP8_KERNEL(NAME, AT, BT)                                                                          \
  extern "C" __global__ void NAME(const uint8_t *A, const uint8_t *Bt, const float *C, float *D) {      \
    uint32_t a[4], b[2];                                                                                \
    float c[4];                                                                                         \
    load_fp8(A, Bt, a, b);                                                                              \
    load_c(C, c);                                                                                       \
    asm volatile("mma.sync.aligned.m16n8k32.row.col.f32." AT "." BT ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, " \
                 "{%8,%9}, {%0,%1,%2,%3};\n"                                                            \
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])                                       \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));                   \
    store_d(D, c);                                                                                      \
  }

FP8_KERNEL(e4m3_k32, "e4m3", "e4m3")
FP8_KERNEL(e5m2_k32, "e5m2", "e5m2")
FP8_KERNEL(e4m3_e5m2_k32, "e4m3", "e5m2")
