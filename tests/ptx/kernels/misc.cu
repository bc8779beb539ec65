// misc.cu -- test kernel for refsim.ptx: local memory, a struct-by-value parameter, vote.sync,
// and 64-bit / f32 / f16 atomics.
//
// Spec (one warp, blockDim = 32)
//   misc(out, fo, u64, h, p, sel)
//     out[t]      = loc[(t + sel) & 15] with loc[i] = i * t + p.a   (a dynamically indexed per-thread
//                   array: nvcc puts it in the .local depot)
//     out[32]     = __ballot_sync of (t & 1)                        (= 0xAAAAAAAA)
//     out[33 + t] = 1 when every lane has t < 40 (__all_sync)
//     fo[0]      += p.b per thread (atomicAdd f32), u64[0] += 2^33 per thread (64-bit atomicAdd),
//     h[0]       += 0.5 per thread (atomicAdd on __half: atom.add.noftz.f16)
// Oracle: tests/ptx/test_kernels.py (NumPy).
//
//   struct P { int a; float b; }  ->  .param .align 4 .b8 misc_param_4[8]:  | a (s32) | b (f32) |
#include <cuda_fp16.h>

struct P {
  int a;
  float b;
};

extern "C" __global__ void misc(int *out, float *fo, unsigned long long *u64, __half *h, P p, int sel) {
  int t = threadIdx.x;
  int loc[16];
  for (int i = 0; i < 16; ++i) loc[i] = i * t + p.a;
  out[t] = loc[(t + sel) & 15];
  unsigned b = __ballot_sync(0xffffffffu, t & 1);
  if (t == 0) out[32] = b;
  atomicAdd(fo, p.b);
  atomicAdd(u64, 1ull << 33);
  atomicAdd(h, __float2half(0.5f));
  if (__all_sync(0xffffffffu, t < 40)) out[33 + t] = 1;
}
