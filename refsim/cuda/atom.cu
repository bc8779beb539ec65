// atom.cu -- Atom's W4A4 group GEMM: INT4 tensor-core groups, an INT8 outlier block, fp32 dequant epilogue.
//
// Spec
// ----
// computes      D (M, N) fp16 from reordered, quantized activations and weights (refsim.formats.atom):
//               INT4 body of G groups of 128 along K (a.q4 (M, Kb), w.q4 (Kb, N)), INT8 keeper block of
//               `keeper` channels (a.q8 (M, keeper), w.q8 (keeper, N)), fp16 scales a.scale4 (M, G),
//               w.scale4 (G, N), a.scale8 (M,), w.scale8 (N,). M >= 1, N even, keeper % 32 == 0.
// equals        refsim.emulator.atom_kernel.atom_group_gemm(a, w) bit for bit, for ANY weight-scale arrays:
//               like Atom's kernel, the epilogue reads the weight scales of a column pair as one half2
//               and multiplies it by the half2 (row scale of tile row g, of tile row g + 8), so output
//               (r, n) uses weight scale [2 (n / 2) + (r % 16) / 8] (body and keeper alike). Pair-equal
//               scales (what refsim.formats.atom.quantize_weights produces) make that the plain per-column
//               product. The dataflow is written from the paper and refsim's emulator, not official code.
// launch        grid (ceil(N / 32), ceil(M / 16)), block 128: warp w computes the 16 x 8 tile rows
//               16 blockIdx.y .., columns 32 blockIdx.x + 8 w ..; rows >= M / columns >= N read zeros
//               and are not written.
// operands      a4 uint8 (M, Kb/2) = pack_int4(a.q4), w4 uint8 (N, Kb/2) = pack_int4(w.q4.T) (K-major
//               per column, the "col" operand), a8 int8 (M, keeper), w8 int8 (N, keeper) = w.q8.T.
//               Fragments straight from global memory with 32-bit loads (the PTX ISA's m16n8k64 .s4 and
//               m16n8k32 .s8 layouts: lane (g = lane / 4, t = lane % 4) holds A rows g, g + 8 at k = 8t..
//               (+32) in nibbles, B column g at k = 8t.. (+32); C rows g, g + 8, columns 2t, 2t + 1).
// order         per group (ascending): c = 0; two mma.sync.m16n8k64.row.col.s32.s4.s4.s32 (k 0..63, 64..127:
//               exact int32); rs = __hmul2_rn(row pair, weight-scale pair) (mul.rn.f16x2); acc = fma.rn.f32(
//               (float)c, (float)rs, acc). Then the keeper: c = 0; keeper / 32 x m16n8k32 .s8; the same
//               epilogue with a.scale8 / w.scale8. Finally D = __float2half_rn(acc). acc starts at +0.
// build / run   nvcc -arch=sm_80 -ptx atom.cu;  refsim.cuda.atom_group_gemm(a, w)
//
// The epilogue of one lane (g, t) and one group, in half2 lanes:
//
//     row pair  (sa[r0+g], sa[r0+g+8])          weight pair (sw[2p], sw[2p+1]),  2p = n0 + 2t
//     rs = __hmul2(row pair, weight pair) = (sa[r0+g] sw[2p], sa[r0+g+8] sw[2p+1])
//     C:  c0 (r0+g, 2p)   c1 (r0+g, 2p+1)   -> rs.x
//         c2 (r0+g+8, 2p) c3 (r0+g+8, 2p+1) -> rs.y      acc_i = fmaf((float)c_i, rs, acc_i)

#include <cuda_fp16.h>

#define TILE_M 16
#define TILE_N 8
#define WARPS 4

__device__ __forceinline__ unsigned load_u32(const unsigned char* __restrict__ base, size_t offset, bool ok) {
  return ok ? *(const unsigned*)(base + offset) : 0u;
}

__device__ __forceinline__ void mma_s4(int* c, const unsigned* a, const unsigned* b) {
  asm volatile("mma.sync.aligned.m16n8k64.row.col.s32.s4.s4.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
               "{%0, %1, %2, %3};\n"
               : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ __forceinline__ void mma_s8(int* c, const unsigned* a, const unsigned* b) {
  asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
               "{%0, %1, %2, %3};\n"
               : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// acc_i = fma.rn.f32((float)c_i, (float)s_i, acc_i), s = __hmul2(row pair, weight pair): rs.x rows g, rs.y rows g+8
__device__ __forceinline__ void epilogue(float* acc, const int* c, __half2 row_pair, __half2 weight_pair) {
  const __half2 rs = __hmul2_rn(row_pair, weight_pair);
  const float lo = __low2float(rs), hi = __high2float(rs);
  acc[0] = __fmaf_rn((float)c[0], lo, acc[0]);
  acc[1] = __fmaf_rn((float)c[1], lo, acc[1]);
  acc[2] = __fmaf_rn((float)c[2], hi, acc[2]);
  acc[3] = __fmaf_rn((float)c[3], hi, acc[3]);
}

extern "C" __global__ void atom_group_gemm(const unsigned char* __restrict__ a4,  // (M, Kb/2) packed int4
                                           const unsigned char* __restrict__ w4,  // (N, Kb/2) packed int4
                                           const signed char* __restrict__ a8,    // (M, keeper)
                                           const signed char* __restrict__ w8,    // (N, keeper)
                                           const __half* __restrict__ sa4,        // (M, G)
                                           const __half* __restrict__ sw4,        // (G, N)
                                           const __half* __restrict__ sa8,        // (M,)
                                           const __half* __restrict__ sw8,        // (N,)
                                           __half* __restrict__ out,              // (M, N)
                                           int M, int N, int G, int keeper) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int g = lane / 4, t = lane % 4;
  const int r0 = blockIdx.y * TILE_M, n0 = (blockIdx.x * WARPS + warp) * TILE_N;
  const int ra = r0 + g, rb = r0 + g + 8, nb = n0 + g, p2 = n0 + 2 * t;  // A rows, B column, C column pair
  const bool ra_ok = ra < M, rb_ok = rb < M, nb_ok = nb < N, p_ok = p2 < N;
  const size_t row4 = (size_t)G * 64;  // bytes per packed int4 row: Kb / 2 = 128 G / 2
  const __half zero = __ushort_as_half(0);
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};

  for (int grp = 0; grp < G; ++grp) {
    int c[4] = {0, 0, 0, 0};
    for (int half = 0; half < 2; ++half) {
      const size_t kb = (size_t)(128 * grp + 64 * half) / 2 + 4 * t;  // byte of k = 128 grp + 64 half + 8t
      const unsigned a[4] = {load_u32(a4, ra * row4 + kb, ra_ok), load_u32(a4, rb * row4 + kb, rb_ok),
                             load_u32(a4, ra * row4 + kb + 16, ra_ok), load_u32(a4, rb * row4 + kb + 16, rb_ok)};
      const unsigned b[2] = {load_u32(w4, nb * row4 + kb, nb_ok), load_u32(w4, nb * row4 + kb + 16, nb_ok)};
      mma_s4(c, a, b);
    }
    const __half2 rows = __halves2half2(ra_ok ? sa4[(size_t)ra * G + grp] : zero, rb_ok ? sa4[(size_t)rb * G + grp] : zero);
    const __half2 cols = p_ok ? *(const __half2*)(sw4 + (size_t)grp * N + p2) : __halves2half2(zero, zero);
    epilogue(acc, c, rows, cols);
  }
  if (keeper > 0) {
    int c[4] = {0, 0, 0, 0};
    const unsigned char* a8b = (const unsigned char*)a8;
    const unsigned char* w8b = (const unsigned char*)w8;
    for (int k0 = 0; k0 < keeper; k0 += 32) {
      const size_t kb = k0 + 4 * t;
      const unsigned a[4] = {load_u32(a8b, (size_t)ra * keeper + kb, ra_ok), load_u32(a8b, (size_t)rb * keeper + kb, rb_ok),
                             load_u32(a8b, (size_t)ra * keeper + kb + 16, ra_ok),
                             load_u32(a8b, (size_t)rb * keeper + kb + 16, rb_ok)};
      const unsigned b[2] = {load_u32(w8b, (size_t)nb * keeper + kb, nb_ok), load_u32(w8b, (size_t)nb * keeper + kb + 16, nb_ok)};
      mma_s8(c, a, b);
    }
    const __half2 rows = __halves2half2(ra_ok ? sa8[ra] : zero, rb_ok ? sa8[rb] : zero);
    const __half2 cols = p_ok ? *(const __half2*)(sw8 + p2) : __halves2half2(zero, zero);
    epilogue(acc, c, rows, cols);
  }
  if (p_ok) {
    if (ra_ok) {
      out[(size_t)ra * N + p2] = __float2half_rn(acc[0]);
      out[(size_t)ra * N + p2 + 1] = __float2half_rn(acc[1]);
    }
    if (rb_ok) {
      out[(size_t)rb * N + p2] = __float2half_rn(acc[2]);
      out[(size_t)rb * N + p2 + 1] = __float2half_rn(acc[3]);
    }
  }
}
