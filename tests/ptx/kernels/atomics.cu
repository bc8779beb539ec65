// atomics.cu -- test kernels for refsim.ptx: global and shared atomics.
//
// Spec
//   histogram(x, hist, n)  hist[x[i] & 15] += 1 for every i (shared-memory atomicAdd per block,
//                          then one global atomicAdd per bin and block)
//   maxpos(x, best, n)     best[0] = max over i of x[i] (atomicMax), best[1] = number of i with
//                          x[i] > 0 (atomicAdd), best[2] = some i with x[i] == best[0] claimed by a
//                          CAS loop (any index with the maximum is correct; the test checks that)
// Oracle: tests/ptx/test_kernels.py (NumPy).
//
//   threads ---atomicAdd---> smem bins[16] --barrier--> 16 threads ---atomicAdd---> hist[16]
extern "C" __global__ void histogram(const int *x, unsigned *hist, int n) {
  __shared__ unsigned bins[16];
  int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
  if (t < 16) bins[t] = 0;
  __syncthreads();
  if (i < n) atomicAdd(&bins[x[i] & 15], 1u);
  __syncthreads();
  if (t < 16) atomicAdd(&hist[t], bins[t]);
}

extern "C" __global__ void maxpos(const int *x, int *best, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  atomicMax(&best[0], x[i]);
  if (x[i] > 0) atomicAdd(&best[1], 1);
}

extern "C" __global__ void claim_max(const int *x, const int *best, int *owner, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n || x[i] != best[0]) return;
  atomicCAS(owner, -1, i);
}
