// anyprec.cu -- Any-Precision LLM bitplane GEMV (fp16 activations x b-bit table-lookup weights).
//
// Spec
// ----
// computes      out (M, N) fp16 = x (M, K) fp16 @ W.T, W[r, k] = lut[r, code[r, k]], codes of b bits
//               read from the first b bitplanes of qweight (refsim.formats.bitplane, int32 (p, N, K/32)),
//               lut fp16 (N, 2**b); b in 3..8, M in 1..8, K % 32 == 0.
// equals        refsim.emulator.anyprec_kernel.anyprec_gemv(x, qweight, lut, bits, ksplit_order="ascending"
//               when the plan splits K), bit for bit: same fp16 chains, same partial adds, same shuffle
//               tree. Written here from the paper and the emulator's spec block, not from official code.
// launch        grid ceil(N / 4), block 128 (4 warps); warp w of block g owns output row r = 4 g + w for
//               all M batch rows; dynamic shared memory 4 * 2**b fp16 (the block's 4 table rows).
// per lane t    for each 1024-weight chunk i (tail chunk: only lanes t < eff = (K % 1024) / 32):
//   and chunk     read word 32 i + t of each of the b planes; for byte j = 3, 2, 1, 0 and pair s = 0..3
//                 build the codes of weights (1024 i + 8 eff j + 8 t + 2 s, + 1) bit by bit (plane 0 =
//                 MSB), look both up in shared memory, and per batch row m
//                 sum[m] = __hfma2(half2(w0, w1), half2(x[m, k0], x[m, k0 + 1]), sum[m])  (fma.rn.f16x2:
//                 two fp16 chains, even and odd k); then partial[m] = partial[m] + (sum.x + sum.y) (add.rn.f16).
// reduction     per m: v = partial; for d = 16, 8, 4, 2, 1: v = v + shfl.down(v, d) (fp16 add.rn; a lane
//               whose source t + d >= 32 reads its own value); lane 0 writes out[m, r].
// K-split       when the host passes chunks_per_slice < chunks (the official dispatcher's K-split: M = 1,
//               K > 4096, b >= 7) each slice of chunks gets its own partials and tree, and lane 0 adds the
//               slice totals to a running fp16 sum that starts at +0, in ascending slice order -- the
//               order refsim's emulator assumes (ksplit_order="ascending"), made deterministic here.
// build         nvcc -arch=sm_80 -ptx anyprec.cu   (refsim.cuda.ptx("anyprec") does it, cached)
// run           refsim.cuda.anyprec_gemv(x, qweight, lut, bits)  (backend="ptx": on a CPU through refsim.ptx)
//
// One chunk of one plane, lane t's word (bit 31 - 8 j - e holds weight 1024 i + 8 eff j + 8 t + e):
//
//     bits 31..24     23..16            15..8             7..0
//     j = 0: k=8t..   j = 1: 8 eff+8t.. j = 2: 16 eff+8t.. j = 3: 24 eff + 8t ..
//     (the loop walks j = 3, 2, 1, 0 so the chains run in the emulator's step order)

#include <cuda_fp16.h>

#define MAX_M 8
#define ROWS_PER_BLOCK 4
#define CHUNK 1024

// the b-bit code of the weight at bit position `bit` (31 = first weight of byte 0) of lane words w[]
__device__ __forceinline__ unsigned code_at(const unsigned* w, int bits, int bit) {
  unsigned c = 0;
#pragma unroll
  for (int p = 0; p < 8; ++p)  // unrolled so w[] stays in registers
    if (p < bits) c = (c << 1) | ((w[p] >> bit) & 1u);  // plane 0 is the MSB
  return c;
}

extern "C" __global__ void anyprec_gemv(const __half* __restrict__ x,        // (M, K)
                                        const unsigned* __restrict__ qweight, // (p, N, K/32)
                                        const __half* __restrict__ lut,       // (N, 2**bits)
                                        __half* __restrict__ out,             // (M, N)
                                        int M, int N, int K, int bits, int chunks_per_slice) {
  extern __shared__ __half table[];  // (4, 2**bits): the block's table rows
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int entries = 1 << bits;
  for (int e = threadIdx.x; e < ROWS_PER_BLOCK * entries; e += blockDim.x) {
    const int row = blockIdx.x * ROWS_PER_BLOCK + e / entries;
    if (row < N) table[e] = lut[(size_t)row * entries + e % entries];
  }
  __syncthreads();
  const int r = blockIdx.x * ROWS_PER_BLOCK + warp;
  if (r >= N) return;
  const __half* trow = table + warp * entries;
  const int words = K / 32, chunks = (K + CHUNK - 1) / CHUNK, full = K / CHUNK;
  const size_t plane = (size_t)N * words;
  const bool split = chunks_per_slice < chunks;
  const __half zero = __ushort_as_half(0);

  __half total[MAX_M];
#pragma unroll
  for (int m = 0; m < MAX_M; ++m) total[m] = zero;

  for (int c0 = 0; c0 < chunks; c0 += chunks_per_slice) {
    __half partial[MAX_M];
#pragma unroll
    for (int m = 0; m < MAX_M; ++m) partial[m] = zero;
    const int c1 = min(c0 + chunks_per_slice, chunks);
    for (int i = c0; i < c1; ++i) {
      const int eff = i < full ? 32 : (K % CHUNK) / 32;
      if (lane >= eff) break;  // tail chunk: this lane holds no weights (and i is the last chunk)
      unsigned w[8];
#pragma unroll
      for (int p = 0; p < 8; ++p) w[p] = p < bits ? qweight[p * plane + (size_t)r * words + 32 * i + lane] : 0u;
      __half2 sum[MAX_M];
#pragma unroll
      for (int m = 0; m < MAX_M; ++m) sum[m] = __halves2half2(zero, zero);
      for (int j = 3; j >= 0; --j) {
        for (int s = 0; s < 4; ++s) {
          const int bit = 31 - 8 * j - 2 * s;
          const __half2 wv = __halves2half2(trow[code_at(w, bits, bit)], trow[code_at(w, bits, bit - 1)]);
          const int k0 = CHUNK * i + 8 * eff * j + 8 * lane + 2 * s;
#pragma unroll
          for (int m = 0; m < MAX_M; ++m)
            if (m < M) sum[m] = __hfma2(wv, *(const __half2*)(x + (size_t)m * K + k0), sum[m]);
        }
      }
#pragma unroll
      for (int m = 0; m < MAX_M; ++m)
        if (m < M) partial[m] = __hadd_rn(partial[m], __hadd_rn(__low2half(sum[m]), __high2half(sum[m])));
    }
#pragma unroll
    for (int m = 0; m < MAX_M; ++m) {
      if (m < M) {
        __half v = partial[m];
        for (int d = 16; d >= 1; d /= 2)  // 32-bit shuffle of the fp16 bits: shfl.sync.down.b32, clamp 31
          v = __hadd_rn(v, __ushort_as_half((unsigned short)__shfl_down_sync(0xffffffffu, (unsigned)__half_as_ushort(v), d)));
        total[m] = split ? __hadd_rn(total[m], v) : v;
      }
    }
  }
  if (lane == 0) {
#pragma unroll
    for (int m = 0; m < MAX_M; ++m)
      if (m < M) out[(size_t)m * N + r] = total[m];
  }
}
