// block_scaled_mma.cu -- test kernels for refsim.ptx: one sm_120a mma.sync of each .kind per warp
// (kind::f8f6f4, kind::mxf8f6f4 scale_vec::1X, kind::mxf4 scale_vec::2X, kind::mxf4nvf4 scale_vec::2X
// and 4X), every warp of the launch with its own registers. Built for sm_120a (regen.py: ARCH_OF).
//
// Spec
//   <kind>(a, b, c, sf, d)  thread t (of the whole grid) holds registers a[4t..4t+3] (A fragment),
//                           b[2t..2t+1] (B fragment), c[4t..4t+3] (C, f32 bits), scale-a-data sf[2t],
//                           scale-b-data sf[2t+1]; it writes its D fragment to d[4t..4t+3].
//   The registers are raw: the test scatters them into A, B, C and the scale matrices with the PTX ISA's
//   fragment maps and its "Block Scaling" selector rules, and compares d bit for bit with
//   refsim.arith.block_scaled.mma_block_scaled (tests/ptx/semantics/test_block_scaled_mma.py).
//   The selectors {byte-id, thread-id} are immediates, different in each kernel; mxf4nvf4_2x passes them
//   in .b16 registers as CUTLASS's SM120 atoms do ("h" constraints).
#include <cstdint>

#define LOAD                                                                                     \
  const int t = blockIdx.x * blockDim.x + threadIdx.x;                                           \
  uint32_t ra0 = a[4 * t], ra1 = a[4 * t + 1], ra2 = a[4 * t + 2], ra3 = a[4 * t + 3];           \
  uint32_t rb0 = b[2 * t], rb1 = b[2 * t + 1], sfa = sf[2 * t], sfb = sf[2 * t + 1];             \
  float d0 = c[4 * t], d1 = c[4 * t + 1], d2 = c[4 * t + 2], d3 = c[4 * t + 3];                  \
  (void)sfa; (void)sfb;

#define STORE d[4 * t] = d0; d[4 * t + 1] = d1; d[4 * t + 2] = d2; d[4 * t + 3] = d3;

#define OUTS "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
#define INS "r"(ra0), "r"(ra1), "r"(ra2), "r"(ra3), "r"(rb0), "r"(rb1), "r"(sfa), "r"(sfb)

#define ARGS const uint32_t *a, const uint32_t *b, const float *c, const uint32_t *sf, float *d

// kind::f8f6f4, no scales: e3m2 A (lower 6 bits of each byte) times e2m1 B (bits 5:2)
extern "C" __global__ void f8f6f4_e3m2_e2m1(ARGS) {
  LOAD
  asm volatile("mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f32.e3m2.e2m1.f32 "
               "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n" : OUTS : INS);
  STORE
}

// kind::mxf8f6f4 scale_vec::1X ue8m0: e2m3 A times e4m3 B; SF_A byte 3 of the upper thread-pair,
// SF_B byte 1 of thread 2 of each quad
extern "C" __global__ void mxf8f6f4_e2m3_e4m3(ARGS) {
  LOAD
  asm volatile("mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e2m3.e4m3.f32.ue8m0 "
               "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3}, %10, {3, 1}, %11, {1, 2};\n" : OUTS : INS);
  STORE
}

// kind::mxf4 scale_vec::2X ue8m0 (packed e2m1): SF_A bytes 2-3 of the lower pair, SF_B bytes 0-1 of thread 3
extern "C" __global__ void mxf4_2x(ARGS) {
  LOAD
  asm volatile("mma.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale.scale_vec::2X.f32.e2m1.e2m1.f32.ue8m0 "
               "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3}, %10, {2, 0}, %11, {0, 3};\n" : OUTS : INS);
  STORE
}

// kind::mxf4nvf4 scale_vec::2X ue8m0, selectors in .b16 registers: SF_A bytes 0-1 of the upper pair,
// SF_B bytes 2-3 of thread 1
extern "C" __global__ void mxf4nvf4_2x(ARGS) {
  LOAD
  uint16_t bida = 0, tida = 1, bidb = 2, tidb = 1;
  asm volatile("mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::2X.f32.e2m1.e2m1.f32.ue8m0 "
               "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3}, %10, {%12, %13}, %11, {%14, %15};\n"
               : OUTS : INS, "h"(bida), "h"(tida), "h"(bidb), "h"(tidb));
  STORE
}

// kind::mxf4nvf4 scale_vec::4X ue4m3 (NVFP4): all four bytes; SF_A of the lower pair, SF_B of thread 0
extern "C" __global__ void mxf4nvf4_4x(ARGS) {
  LOAD
  asm volatile("mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3 "
               "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3}, %10, {0, 0}, %11, {0, 0};\n" : OUTS : INS);
  STORE
}
