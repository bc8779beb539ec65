// sm_90a test kernels of refsim.ptx.hopper.registers: setmaxnreg in a warp-specialized block.
// __launch_bounds__(384, 1): the entry allocation is 65536 / 384 -> 168 registers per thread, so the
// CTA holds 168 x 384 = 64,512 registers; warpgroup 0 (producer) releases to DEC, warpgroups 1 and 2
// (consumers) request INC each. ws_balanced fits exactly (40 x 128 + 232 x 256 = 64,512); ws_over asks
// for 240 (40 x 128 + 240 x 256 = 66,560): the second consumer's .inc can never be satisfied.
// Compiled by regen.py with nvcc -arch=sm_90a -ptx -O3 (CUDA 13.0).
#include <cstdint>

template <int DEC, int INC>
__device__ __forceinline__ void specialized(uint32_t *out, int spin) {
    const int t = threadIdx.x, wg = t / 128;
    if (wg == 0) {
        for (volatile int i = 0; i < spin; i = i + 1) {}   // the producer releases late (the .inc waits)
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(DEC));
        out[t] = 3u * t + 1u;
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(INC));
        out[t] = 5u * t + wg;
    }
}

extern "C" __global__ void __launch_bounds__(384, 1) ws_balanced(uint32_t *out, int spin) {
    specialized<40, 232>(out, spin);
}

extern "C" __global__ void __launch_bounds__(384, 1) ws_over(uint32_t *out, int spin) {
    specialized<40, 240>(out, spin);
}
