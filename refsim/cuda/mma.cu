// mma.cu -- one mma.sync per warp on registers read from memory: the tensor-core probes of `refsim validate`.
//
// Spec
// ----
// computes      for tile w (warp w of the grid) and lane l: d[w][l][0..ND) = mma.sync.aligned.<shape>.row.col
//               {.satfinite}.<d>.<a>.<b>.<c> of a[w][l][0..NA), b[w][l][0..NB), c[w][l][0..NC): the raw
//               32-bit registers the instruction reads and writes, in the PTX ISA's fragment layouts
//               (refsim.arith.fragments: which lane holds which matrix element). Nothing else touches the
//               values: every register goes straight from a 32-bit load into the instruction.
// equals        refsim.cuda.mma.mma_reference: refsim's tensor-core model of the arch (refsim.arith.tensor_core
//               for f16 and s8/u8/s4/u4, refsim.arith.tensor_core_types for bf16/tf32/e4m3/e5m2) on the
//               matrices the registers hold.
// launch        grid ceil(tiles / 4), block 128 (4 warps); warps with w >= tiles return. Arguments
//               (a, b, c, d: uint32 (tiles, 32, NA|NB|NC|ND), tiles: int).
// entries       probe_<shape>_<d>_<a>_<b>_<c>[_satfinite], e.g. probe_m16n8k16_f32_f16_f16_f32: one per form
//               refsim models, refsim.cuda.mma.forms() (refsim.arith.tensor_core_types.modelled(), integer forms
//               also with .satfinite; a test keeps the two equal). C and D are of one type: ptxas refuses
//               f16 m16n8k8/k16 with .ctype != .dtype. fp8 (e4m3/e5m2) entries exist only where the target
//               has them (sm_89+): they are in mma.sm_89.ptx, not in the sm_80 PTX.
// build / run   nvcc -arch=sm_80 -ptx mma.cu (and -arch=sm_89);  refsim.cuda.mma.mma_probe(kind, ...)
//
// Registers per lane (NA, NB, NC, ND): A and B hold 16*K and K*8 elements over 32 lanes, C and D 16*8:
//
//     m16n8k16 f16/bf16: A 4 (8 halves), B 2, C/D 4 (.f32) or 2 (.f16x2)
//     m16n8k8  f16/bf16: A 2,            B 1, C/D as above
//     m16n8k32 s8/u8/e4m3/e5m2: A 4 (16 bytes), B 2;  m16n8k16 s8/u8: A 2, B 1;  C/D 4 (.s32 / .f32)
//     m16n8k64 s4/u4:    A 4 (32 nibbles),      B 2;  m16n8k32 s4/u4: A 2, B 1
//     m16n8k8  tf32:     A 4 (one .tf32 each),  B 2

#define PROLOGUE(NA, NB, NC)                                                                    \
  const int w = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, l = threadIdx.x % 32;        \
  if (w >= tiles) return;                                                                      \
  unsigned ra[NA], rb[NB], rc[NC];                                                             \
  for (int i = 0; i < NA; ++i) ra[i] = a[(w * 32 + l) * NA + i];                               \
  for (int i = 0; i < NB; ++i) rb[i] = b[(w * 32 + l) * NB + i];                               \
  for (int i = 0; i < NC; ++i) rc[i] = c[(w * 32 + l) * NC + i];

#define EPILOGUE(ND) for (int i = 0; i < ND; ++i) d[(w * 32 + l) * ND + i] = rd[i];

#define SIGNATURE(NAME) \
  extern "C" __global__ void NAME(const unsigned *a, const unsigned *b, const unsigned *c, unsigned *d, int tiles)

// A in 4 registers, B in 2; C and D in 4 or 2
#define PROBE_4_2_4_4(NAME, MMA)                                                                \
  SIGNATURE(NAME) {                                                                            \
    PROLOGUE(4, 2, 4) unsigned rd[4];                                                          \
    asm volatile(MMA " {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};\n"             \
                 : "=r"(rd[0]), "=r"(rd[1]), "=r"(rd[2]), "=r"(rd[3])                           \
                 : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "r"(rb[0]), "r"(rb[1]),      \
                   "r"(rc[0]), "r"(rc[1]), "r"(rc[2]), "r"(rc[3]));                             \
    EPILOGUE(4)                                                                                \
  }
#define PROBE_4_2_2_2(NAME, MMA)                                                                \
  SIGNATURE(NAME) {                                                                            \
    PROLOGUE(4, 2, 2) unsigned rd[2];                                                          \
    asm volatile(MMA " {%0,%1}, {%2,%3,%4,%5}, {%6,%7}, {%8,%9};\n"                             \
                 : "=r"(rd[0]), "=r"(rd[1])                                                     \
                 : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "r"(rb[0]), "r"(rb[1]),      \
                   "r"(rc[0]), "r"(rc[1]));                                                     \
    EPILOGUE(2)                                                                                \
  }
// A in 2 registers, B in 1
#define PROBE_2_1_4_4(NAME, MMA)                                                                \
  SIGNATURE(NAME) {                                                                            \
    PROLOGUE(2, 1, 4) unsigned rd[4];                                                          \
    asm volatile(MMA " {%0,%1,%2,%3}, {%4,%5}, {%6}, {%7,%8,%9,%10};\n"                         \
                 : "=r"(rd[0]), "=r"(rd[1]), "=r"(rd[2]), "=r"(rd[3])                           \
                 : "r"(ra[0]), "r"(ra[1]), "r"(rb[0]), "r"(rc[0]), "r"(rc[1]), "r"(rc[2]),      \
                   "r"(rc[3]));                                                                 \
    EPILOGUE(4)                                                                                \
  }
#define PROBE_2_1_2_2(NAME, MMA)                                                                \
  SIGNATURE(NAME) {                                                                            \
    PROLOGUE(2, 1, 2) unsigned rd[2];                                                          \
    asm volatile(MMA " {%0,%1}, {%2,%3}, {%4}, {%5,%6};\n"                                      \
                 : "=r"(rd[0]), "=r"(rd[1])                                                     \
                 : "r"(ra[0]), "r"(ra[1]), "r"(rb[0]), "r"(rc[0]), "r"(rc[1]));                 \
    EPILOGUE(2)                                                                                \
  }

// f16 inputs: f32 and f16 accumulation (C and D of one type: the only forms ptxas takes for these shapes)
PROBE_4_2_4_4(probe_m16n8k16_f32_f16_f16_f32, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32")
PROBE_4_2_2_2(probe_m16n8k16_f16_f16_f16_f16, "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16")
PROBE_2_1_4_4(probe_m16n8k8_f32_f16_f16_f32, "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32")
PROBE_2_1_2_2(probe_m16n8k8_f16_f16_f16_f16, "mma.sync.aligned.m16n8k8.row.col.f16.f16.f16.f16")

// bf16 and tf32 inputs (f32 accumulation only, as the ISA defines them)
PROBE_4_2_4_4(probe_m16n8k16_f32_bf16_bf16_f32, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32")
PROBE_2_1_4_4(probe_m16n8k8_f32_bf16_bf16_f32, "mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32")
PROBE_4_2_4_4(probe_m16n8k8_f32_tf32_tf32_f32, "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32")

// integers: s8/u8 at k16 and k32, s4/u4 at k32 and k64, signed/unsigned in every pairing, each with and
// without .satfinite (clamp to the int32 range instead of wrapping)
PROBE_2_1_4_4(probe_m16n8k16_s32_s8_s8_s32,
              "mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32")
PROBE_2_1_4_4(probe_m16n8k16_s32_s8_s8_s32_satfinite,
              "mma.sync.aligned.m16n8k16.row.col.satfinite.s32.s8.s8.s32")
PROBE_2_1_4_4(probe_m16n8k16_s32_u8_u8_s32,
              "mma.sync.aligned.m16n8k16.row.col.s32.u8.u8.s32")
PROBE_2_1_4_4(probe_m16n8k16_s32_u8_u8_s32_satfinite,
              "mma.sync.aligned.m16n8k16.row.col.satfinite.s32.u8.u8.s32")
PROBE_2_1_4_4(probe_m16n8k16_s32_s8_u8_s32,
              "mma.sync.aligned.m16n8k16.row.col.s32.s8.u8.s32")
PROBE_2_1_4_4(probe_m16n8k16_s32_s8_u8_s32_satfinite,
              "mma.sync.aligned.m16n8k16.row.col.satfinite.s32.s8.u8.s32")
PROBE_2_1_4_4(probe_m16n8k16_s32_u8_s8_s32,
              "mma.sync.aligned.m16n8k16.row.col.s32.u8.s8.s32")
PROBE_2_1_4_4(probe_m16n8k16_s32_u8_s8_s32_satfinite,
              "mma.sync.aligned.m16n8k16.row.col.satfinite.s32.u8.s8.s32")
PROBE_4_2_4_4(probe_m16n8k32_s32_s8_s8_s32,
              "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32")
PROBE_4_2_4_4(probe_m16n8k32_s32_s8_s8_s32_satfinite,
              "mma.sync.aligned.m16n8k32.row.col.satfinite.s32.s8.s8.s32")
PROBE_4_2_4_4(probe_m16n8k32_s32_u8_u8_s32,
              "mma.sync.aligned.m16n8k32.row.col.s32.u8.u8.s32")
PROBE_4_2_4_4(probe_m16n8k32_s32_u8_u8_s32_satfinite,
              "mma.sync.aligned.m16n8k32.row.col.satfinite.s32.u8.u8.s32")
PROBE_4_2_4_4(probe_m16n8k32_s32_s8_u8_s32,
              "mma.sync.aligned.m16n8k32.row.col.s32.s8.u8.s32")
PROBE_4_2_4_4(probe_m16n8k32_s32_s8_u8_s32_satfinite,
              "mma.sync.aligned.m16n8k32.row.col.satfinite.s32.s8.u8.s32")
PROBE_4_2_4_4(probe_m16n8k32_s32_u8_s8_s32,
              "mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32")
PROBE_4_2_4_4(probe_m16n8k32_s32_u8_s8_s32_satfinite,
              "mma.sync.aligned.m16n8k32.row.col.satfinite.s32.u8.s8.s32")

PROBE_2_1_4_4(probe_m16n8k32_s32_s4_s4_s32,
              "mma.sync.aligned.m16n8k32.row.col.s32.s4.s4.s32")
PROBE_2_1_4_4(probe_m16n8k32_s32_s4_s4_s32_satfinite,
              "mma.sync.aligned.m16n8k32.row.col.satfinite.s32.s4.s4.s32")
PROBE_2_1_4_4(probe_m16n8k32_s32_u4_u4_s32,
              "mma.sync.aligned.m16n8k32.row.col.s32.u4.u4.s32")
PROBE_2_1_4_4(probe_m16n8k32_s32_u4_u4_s32_satfinite,
              "mma.sync.aligned.m16n8k32.row.col.satfinite.s32.u4.u4.s32")
PROBE_2_1_4_4(probe_m16n8k32_s32_s4_u4_s32,
              "mma.sync.aligned.m16n8k32.row.col.s32.s4.u4.s32")
PROBE_2_1_4_4(probe_m16n8k32_s32_s4_u4_s32_satfinite,
              "mma.sync.aligned.m16n8k32.row.col.satfinite.s32.s4.u4.s32")
PROBE_2_1_4_4(probe_m16n8k32_s32_u4_s4_s32,
              "mma.sync.aligned.m16n8k32.row.col.s32.u4.s4.s32")
PROBE_2_1_4_4(probe_m16n8k32_s32_u4_s4_s32_satfinite,
              "mma.sync.aligned.m16n8k32.row.col.satfinite.s32.u4.s4.s32")
PROBE_4_2_4_4(probe_m16n8k64_s32_s4_s4_s32,
              "mma.sync.aligned.m16n8k64.row.col.s32.s4.s4.s32")
PROBE_4_2_4_4(probe_m16n8k64_s32_s4_s4_s32_satfinite,
              "mma.sync.aligned.m16n8k64.row.col.satfinite.s32.s4.s4.s32")
PROBE_4_2_4_4(probe_m16n8k64_s32_u4_u4_s32,
              "mma.sync.aligned.m16n8k64.row.col.s32.u4.u4.s32")
PROBE_4_2_4_4(probe_m16n8k64_s32_u4_u4_s32_satfinite,
              "mma.sync.aligned.m16n8k64.row.col.satfinite.s32.u4.u4.s32")
PROBE_4_2_4_4(probe_m16n8k64_s32_s4_u4_s32,
              "mma.sync.aligned.m16n8k64.row.col.s32.s4.u4.s32")
PROBE_4_2_4_4(probe_m16n8k64_s32_s4_u4_s32_satfinite,
              "mma.sync.aligned.m16n8k64.row.col.satfinite.s32.s4.u4.s32")
PROBE_4_2_4_4(probe_m16n8k64_s32_u4_s4_s32,
              "mma.sync.aligned.m16n8k64.row.col.s32.u4.s4.s32")
PROBE_4_2_4_4(probe_m16n8k64_s32_u4_s4_s32_satfinite,
              "mma.sync.aligned.m16n8k64.row.col.satfinite.s32.u4.s4.s32")

// fp8 inputs (sm_89 and later): m16n8k32, f32 accumulation
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
PROBE_4_2_4_4(probe_m16n8k32_f32_e4m3_e4m3_f32, "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32")
PROBE_4_2_4_4(probe_m16n8k32_f32_e5m2_e5m2_f32, "mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e5m2.f32")
PROBE_4_2_4_4(probe_m16n8k32_f32_e4m3_e5m2_f32, "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e5m2.f32")
PROBE_4_2_4_4(probe_m16n8k32_f32_e5m2_e4m3_f32, "mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e4m3.f32")
#endif
