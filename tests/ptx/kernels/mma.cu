// mma.cu -- test kernel for refsim.ptx: ldmatrix + mma.sync m16n8k16 (f16 x f16 -> f32), sm_80.
//
// Spec
//   tile_gemm(A, B, C)   one warp; A float16 (16, 16) row-major (M, K), B float16 (8, 16)
//                        row-major = B^T, i.e. column-major (K, N) as mma's .col wants;
//                        C float32 (16, 8) = A @ B as mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
//                        computes it from a zero accumulator (refsim.arith.tensor_core model).
//                        A is loaded with ldmatrix.x4, B with ldmatrix.x2 (rows of B^T = columns of B).
// Oracle: refsim.arith.tensor_core.mma_m16n8k16 (tests/ptx/test_kernels.py).
//
//   smem A 16x16 --ldmatrix.x4--> a0..a3 (4 x f16x2 per lane)   smem B^T 8x16 --ldmatrix.x2--> b0,b1
//   mma: {c0..c3} (lane l holds C[l/4 + 8*(i/2)][2*(l%4) + i%2])
#include <cuda_fp16.h>

extern "C" __global__ void tile_gemm(const half *A, const half *Bt, float *C) {
  __shared__ __align__(16) half sa[16 * 16];
  __shared__ __align__(16) half sb[8 * 16];
  int l = threadIdx.x;
  for (int i = l; i < 256; i += 32) sa[i] = A[i];
  for (int i = l; i < 128; i += 32) sb[i] = Bt[i];
  __syncthreads();
  unsigned a[4], b[2];
  float c[4] = {0.f, 0.f, 0.f, 0.f};
  // ldmatrix.x4: lanes 0-15 address rows 0-15 of columns 0-7, lanes 16-31 rows 0-15 of columns 8-15
  unsigned pa = static_cast<unsigned>(__cvta_generic_to_shared(&sa[(l % 16) * 16 + (l / 16) * 8]));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3]) : "r"(pa));
  // ldmatrix.x2: lanes 0-7 address rows n of k 0-7, lanes 8-15 rows n of k 8-15
  unsigned pb = static_cast<unsigned>(__cvta_generic_to_shared(&sb[(l % 8) * 16 + ((l / 8) % 2) * 8]));
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n" : "=r"(b[0]), "=r"(b[1]) : "r"(pb));
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%10,%11,%12,%13};\n"
               : "=f"(c[0]), "=f"(c[1]), "=f"(c[2]), "=f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
                 "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
  int g = l / 4, q = l % 4;
  C[g * 8 + 2 * q] = c[0];
  C[g * 8 + 2 * q + 1] = c[1];
  C[(g + 8) * 8 + 2 * q] = c[2];
  C[(g + 8) * 8 + 2 * q + 1] = c[3];
}
