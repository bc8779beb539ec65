// control.cu -- test kernels for refsim.ptx: divergence, data-dependent loops, early exit.
//
// Spec
//   branchy(x, y, n)     y[i] = (x[i] & 1) ? 3*x[i] + 1 : x[i] >> 1, with a nested branch on
//                        lane parity inside each side (threads of one warp take all four paths)
//   collatz(x, steps, n) steps[i] = number of Collatz steps from x[i] to 1 (a loop whose trip
//                        count differs per lane; x[i] >= 1, capped at 1000 steps)
//   early_exit(x, y, n)  threads with x[i] < 0 return before the barrier; the others store
//                        x[i] * 2 after a __syncthreads() that the exited threads never reach
// Oracle: tests/ptx/test_kernels.py (NumPy). Compiled with nvcc -arch=sm_80 -ptx (regen.py).
//
//   warp lanes:  0 1 2 3 ... 31
//   x odd?       T F T F      -> if/else paths interleave inside the warp, reconverge at the store
extern "C" __global__ void branchy(const int *x, int *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int v = x[i], r;
  if (v & 1) {
    r = 3 * v + 1;
    if (threadIdx.x & 1) r += 7; else r -= 5;
  } else {
    r = v >> 1;
    if (threadIdx.x & 2) r ^= 0x55; else r = -r;
  }
  y[i] = r;
}

extern "C" __global__ void collatz(const unsigned *x, int *steps, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  unsigned v = x[i];
  int s = 0;
  while (v != 1 && s < 1000) {
    v = (v & 1) ? 3 * v + 1 : v >> 1;
    ++s;
  }
  steps[i] = s;
}

extern "C" __global__ void early_exit(const int *x, int *y, int n) {
  __shared__ int buf[256];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n || x[i] < 0) return;
  buf[threadIdx.x] = x[i] * 2;
  __syncthreads();
  y[i] = buf[threadIdx.x];
}
