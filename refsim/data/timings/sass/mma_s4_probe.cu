#include <cstdint>
extern "C" __global__ void k(const uint32_t* a, const uint32_t* b, int* c, int iters) {
  int t = threadIdx.x;
  uint32_t a0 = a[t], a1 = a[t+32], a2 = a[t+64], a3 = a[t+96];
  uint32_t b0 = b[t], b1 = b[t+32];
  int c0 = 0, c1 = 0, c2 = 0, c3 = 0;
  for (int i = 0; i < iters; i++) {
    asm volatile("mma.sync.aligned.m16n8k64.row.col.s32.s4.s4.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+r"(c0), "+r"(c1), "+r"(c2), "+r"(c3) : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  }
  c[t] = c0; c[t+32] = c1; c[t+64] = c2; c[t+96] = c3;
}
