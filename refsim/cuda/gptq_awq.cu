// gptq_awq.cu -- W4A16 dequant-GEMV for GPTQ (AutoGPTQ v1/v2) and AWQ (AutoAWQ GEMM) checkpoints.
//
// Spec
// ----
// computes      y (M, N) fp16 = x (M, K) fp16 @ W (K, N), W the checkpoint's fp16 dequantized weights
//               w = fp16(q - z) * s (one mul.rn.f16: the integer difference is exact), M in 1..8.
//                 gptq_gemv: qweight int32 (K/8, N) packed along K (row k at bits 4 (k % 8) of word
//                            k / 8), qzeros (G, N/8) packed along N, scales fp16 (G, N), g_idx int32 (K,)
//                            (any group map: act-order included); z = field + zero_offset
//                            (1 for "gptq" v1 read as AutoGPTQ's torch path reads it, 0 for "gptq_v2")
//                 awq_gemv:  qweight int32 (K, N/8) packed along N in AWQ's order: column c of a word
//                            sits in nibble (c >> 1) + 4 (c & 1); qzeros (G, N/8) likewise; scales
//                            fp16 (G, N); group g = k / group_size
// equals        refsim.emulator.gptq_awq_kernel.gptq_gemv / awq_gemv, bit for bit (the emulator is the
//               definition of this design's arithmetic; its plain-loop twin is tested against it).
// launch        grid ceil(N / 128), block 128: thread n owns output column n for every batch row
//               (a thread per column reads consecutive columns of one qweight row: coalesced, the
//               "AutoGPTQ/awq gemv" access pattern without their K split, so no atomics are needed).
// reduction     per batch row m, per 8-row slab k0 = 8 b (b ascending):
//                 h = half2(0); i = 0..3: h = __hfma2(half2(w[k0+2i], w[k0+2i+1]), half2(x[m,k0+2i], ..), h)
//                 acc[m] = acc[m] + float(h.x + h.y)            (fma.rn.f16x2, add.rn.f16, add.rn.f32)
//               y[m, n] = __float2half_rn(acc[m]). Nothing crosses threads: no shuffles, no barriers.
// build / run   nvcc -arch=sm_80 -ptx gptq_awq.cu;  refsim.cuda.gptq_gemv(x, ckpt), refsim.cuda.awq_gemv(x, ckpt)
//
// One thread, one batch row, one slab of 8 weights (k0 .. k0 + 7) of column n:
//
//     w: [w0 w1][w2 w3][w4 w5][w6 w7]   fp16 pairs       x: [x0 x1][x2 x3][x4 x5][x6 x7]
//     h.x = fma(w6,x6, fma(w4,x4, fma(w2,x2, fma(w0,x0, +0))))   (h.y the same over odd k)
//     acc = acc + float(h.x + h.y)

#include <cuda_fp16.h>

#define MAX_M 8

// one slab of 8 dequantized weights against every batch row
__device__ __forceinline__ void slab_dot(const __half* wv, const __half* __restrict__ x, int M, int K, int k0,
                                         float* acc) {
  const __half zero = __ushort_as_half(0);
#pragma unroll
  for (int m = 0; m < MAX_M; ++m) {
    if (m < M) {
      __half2 h = __halves2half2(zero, zero);
#pragma unroll
      for (int i = 0; i < 4; ++i)
        h = __hfma2(__halves2half2(wv[2 * i], wv[2 * i + 1]), *(const __half2*)(x + (size_t)m * K + k0 + 2 * i), h);
      acc[m] = __fadd_rn(acc[m], __half2float(__hadd_rn(__low2half(h), __high2half(h))));
    }
  }
}

__device__ __forceinline__ void store(__half* __restrict__ y, const float* acc, int M, int N, int n) {
#pragma unroll
  for (int m = 0; m < MAX_M; ++m)
    if (m < M) y[(size_t)m * N + n] = __float2half_rn(acc[m]);
}

extern "C" __global__ void gptq_gemv(const __half* __restrict__ x,          // (M, K)
                                     const unsigned* __restrict__ qweight,  // (K/8, N)
                                     const unsigned* __restrict__ qzeros,   // (G, N/8)
                                     const __half* __restrict__ scales,     // (G, N)
                                     const int* __restrict__ g_idx,         // (K,)
                                     __half* __restrict__ y,                // (M, N)
                                     int M, int N, int K, int zero_offset) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x;
  if (n >= N) return;
  float acc[MAX_M];
#pragma unroll
  for (int m = 0; m < MAX_M; ++m) acc[m] = 0.0f;
  for (int k0 = 0; k0 < K; k0 += 8) {
    const unsigned word = qweight[(size_t)(k0 / 8) * N + n];
    __half wv[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const int g = g_idx[k0 + e];
      const int z = ((qzeros[(size_t)g * (N / 8) + n / 8] >> (4 * (n % 8))) & 0xF) + zero_offset;
      wv[e] = __hmul_rn(__int2half_rn((int)((word >> (4 * e)) & 0xF) - z), scales[(size_t)g * N + n]);
    }
    slab_dot(wv, x, M, K, k0, acc);
  }
  store(y, acc, M, N, n);
}

extern "C" __global__ void awq_gemv(const __half* __restrict__ x,          // (M, K)
                                    const unsigned* __restrict__ qweight,  // (K, N/8)
                                    const unsigned* __restrict__ qzeros,   // (G, N/8)
                                    const __half* __restrict__ scales,     // (G, N)
                                    __half* __restrict__ y,                // (M, N)
                                    int M, int N, int K, int group_size) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x;
  if (n >= N) return;
  const int shift = 4 * ((n % 8) / 2 + 4 * (n % 2));  // AWQ order (0, 2, 4, 6, 1, 3, 5, 7) inverted
  float acc[MAX_M];
#pragma unroll
  for (int m = 0; m < MAX_M; ++m) acc[m] = 0.0f;
  for (int k0 = 0; k0 < K; k0 += 8) {
    __half wv[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const int k = k0 + e, g = k / group_size;
      const int q = (qweight[(size_t)k * (N / 8) + n / 8] >> shift) & 0xF;
      const int z = (qzeros[(size_t)g * (N / 8) + n / 8] >> shift) & 0xF;
      wv[e] = __hmul_rn(__int2half_rn(q - z), scales[(size_t)g * N + n]);
    }
    slab_dot(wv, x, M, K, k0, acc);
  }
  store(y, acc, M, N, n);
}
