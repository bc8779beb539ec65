// reduce.cu -- test kernels for refsim.ptx: shared-memory reduction and warp shuffles.
//
// Spec
//   block_sum(x, out, n)  out[b] = sum of x[b*256 : b*256+256] (int32, wrapping), tree reduction
//                         in shared memory with __syncthreads() between levels; blockDim = 256
//   shuffles(x, y)        per warp of 32 int32: y[4*i+0] = warp sum via __shfl_down_sync,
//                         y[4*i+1] = xor-butterfly max via __shfl_xor_sync,
//                         y[4*i+2] = x of lane (lane*5+3)%32 via __shfl_sync,
//                         y[4*i+3] = x of lane-3 (or own x for lanes 0..2) via __shfl_up_sync,
//                         where i is the global thread index
// Oracle: tests/ptx/test_kernels.py (NumPy).
//
//   level:  s[t] += s[t + 128]  (t < 128)  |barrier|  s[t] += s[t + 64]  ...  s[0] = block sum
extern "C" __global__ void block_sum(const int *x, int *out, int n) {
  __shared__ int s[256];
  int t = threadIdx.x, i = blockIdx.x * 256 + t;
  s[t] = i < n ? x[i] : 0;
  __syncthreads();
  for (int w = 128; w > 0; w >>= 1) {
    if (t < w) s[t] += s[t + w];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = s[0];
}

extern "C" __global__ void shuffles(const int *x, int *y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int lane = threadIdx.x & 31;
  int v = x[i];
  int sum = v;
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_down_sync(0xffffffffu, sum, o);
  sum = __shfl_sync(0xffffffffu, sum, 0);
  int mx = v;
  for (int o = 16; o > 0; o >>= 1) mx = max(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  int g = __shfl_sync(0xffffffffu, v, (lane * 5 + 3) & 31);
  int u = __shfl_up_sync(0xffffffffu, v, 3);
  y[4 * i + 0] = sum;
  y[4 * i + 1] = mx;
  y[4 * i + 2] = g;
  y[4 * i + 3] = u;
}
