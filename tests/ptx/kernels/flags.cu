// flags.cu -- test kernel for refsim.ptx: blocks synchronised through global flags (split-k style).
//
// Spec
//   chain(x, out, lock, nblocks)  block b waits until lock[0] == nblocks - 1 - b (the LAST block
//                                 goes first), adds the sum of its 64 inputs x[b*64 : b*64+64] to
//                                 out[0] with a plain load/store (correct only because of the lock
//                                 order), then releases lock[0] = nblocks - b. Result:
//                                 out[0] = sum(x), lock[0] = nblocks. blockDim = 64.
// The wait is an ld.acquire.gpu spin loop like Marlin's split-k lock: a scheduler that runs
// block 0 until it finishes never terminates; refsim yields spinning warps.
// Oracle: tests/ptx/test_kernels.py (NumPy).
//
//   lock:  0 ---block n-1---> 1 ---block n-2---> 2 ... ---block 0---> n
__device__ __forceinline__ int load_acquire(const int *p) {
  int v;
  asm volatile("ld.global.acquire.gpu.b32 %0, [%1];" : "=r"(v) : "l"(p));
  return v;
}

extern "C" __global__ void chain(const int *x, int *out, int *lock, int nblocks) {
  __shared__ int s[64];
  int t = threadIdx.x, b = blockIdx.x;
  s[t] = x[b * 64 + t];
  __syncthreads();
  for (int w = 32; w > 0; w >>= 1) {
    if (t < w) s[t] += s[t + w];
    __syncthreads();
  }
  if (t == 0) {
    while (load_acquire(lock) != nblocks - 1 - b) {
    }
    out[0] = out[0] + s[0];
    __threadfence();
    atomicExch(lock, nblocks - b);
  }
}
