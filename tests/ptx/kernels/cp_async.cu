// cp_async.cu -- test kernel for refsim.ptx: a cp.async double-buffered pipeline (sm_80).
//
// Spec
//   pipeline(x, y, tiles)  blockDim = 32; each thread copies 16 bytes (4 int32) per tile from
//                          x into one of two shared stages with cp.async.cg.shared.global, commits
//                          a group per tile, waits with cp.async.wait_group 1 for the older tile,
//                          and writes y[tile*128 + j] = 2 * stage[j] + tile for the 128 ints of the
//                          tile. Tiles are read in order 0..tiles-1; x and y hold tiles*128 ints.
// Oracle: tests/ptx/test_kernels.py (NumPy).
//
//   issue tile 0 | issue tile 1, wait(1): tile 0 ready, use | issue tile 2, wait(1): tile 1 ...
__device__ __forceinline__ void cp_async16(void *smem, const void *gmem) {
  unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem));
}
__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void wait_group() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

extern "C" __global__ void pipeline(const int *x, int *y, int tiles) {
  __shared__ __align__(16) int stage[2][128];
  int t = threadIdx.x;
  cp_async16(&stage[0][4 * t], x + 4 * t);
  commit();
  for (int k = 0; k < tiles; ++k) {
    if (k + 1 < tiles) cp_async16(&stage[(k + 1) & 1][4 * t], x + (k + 1) * 128 + 4 * t);
    commit();
    wait_group<1>();
    __syncthreads();
    for (int j = t; j < 128; j += 32) y[k * 128 + j] = 2 * stage[k & 1][j] + k;
    __syncthreads();
  }
}
