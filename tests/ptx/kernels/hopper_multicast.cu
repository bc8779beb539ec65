// sm_90a test kernels of TMA multicast and remote mbarrier arrivals in a cluster (refsim.ptx.hopper.bulk,
// refsim.ptx.hopper.mbarrier). The tensor a map describes is the second argument (refsim maps the first
// pointer argument at refsim.ptx.memory.GLOBAL_BASE, the address the host writes into the map).
// multicast: CTA 0's thread 0 loads one 8 x 8 int32 box (tensor = 1: cp.async.bulk.tensor.2d; else the first
// 256 bytes with cp.async.bulk) into tile of every CTA whose rank bit is set in mask; each such CTA arms its own
// mbarrier with expect_tx, waits (CTAs other than 0 skip the wait when skip_wait: a race on the landed bytes),
// and writes the tile to its 64 words of out; the others write -1.
// handoff: CTA 1 stores 32 words into CTA 0's buf (st.shared::cluster) and its thread 0 arrives `count` times on
// CTA 0's barrier (count 2) through the mapa'd address (mbarrier.arrive.release.cluster.shared::cluster); CTA 0
// waits on its barrier and copies buf to out (CTA 1 may exit first: nothing touches its shared memory).
// Compiled by regen.py with nvcc -arch=sm_90a -ptx -O3 (CUDA 13.0).
#include <cuda.h>
#include <cstdint>

__device__ __forceinline__ uint32_t sa(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ uint32_t rank() {
    uint32_t r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}
__device__ __forceinline__ uint32_t mapa(uint32_t a, uint32_t r) {
    uint32_t d;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(r));
    return d;
}
__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\n barrier.cluster.wait.acquire.aligned;" ::: "memory");
}
__device__ __forceinline__ void bar_init(uint64_t *b, uint32_t n) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(sa(b)), "r"(n));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
__device__ __forceinline__ void wait(uint64_t *b, uint32_t parity) {
    uint32_t ok = 0;
    while (!ok)
        asm volatile("{\n .reg .pred P;\n mbarrier.try_wait.parity.shared::cta.b64 P, [%1], %2;\n selp.u32 %0, 1, 0, P;\n}\n"
                     : "=r"(ok) : "r"(sa(b)), "r"(parity) : "memory");
}

extern "C" __global__ void multicast(const __grid_constant__ CUtensorMap tmap, const int *tensor, uint32_t mask,
                                     int tensor_copy, int skip_wait, int *out) {
    __shared__ alignas(128) int tile[64];
    __shared__ alignas(8) uint64_t bar;
    const uint32_t r = rank();
    const bool mine = (mask >> r) & 1;
    if (threadIdx.x == 0) bar_init(&bar, 1);
    cluster_sync();
    if (threadIdx.x == 0 && mine)
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], 256;" ::"r"(sa(&bar)) : "memory");
    if (threadIdx.x == 0 && r == 0) {
        if (tensor_copy)
            asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
                         " [%0], [%1, {%2, %3}], [%4], %5;"
                         ::"r"(sa(tile)), "l"(&tmap), "r"(0), "r"(0), "r"(sa(&bar)), "h"((uint16_t)mask) : "memory");
        else
            asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
                         " [%0], [%1], 256, [%2], %3;"
                         ::"r"(sa(tile)), "l"(tensor), "r"(sa(&bar)), "h"((uint16_t)mask) : "memory");
    }
    int *o = out + 64 * blockIdx.x;
    if (mine) {
        if (!skip_wait || r == 0) wait(&bar, 0);
        o[threadIdx.x] = tile[threadIdx.x];
        o[threadIdx.x + 32] = tile[threadIdx.x + 32];
    } else {
        o[threadIdx.x] = o[threadIdx.x + 32] = -1;
    }
    cluster_sync();
}

extern "C" __global__ void handoff(int *out, uint32_t count) {
    __shared__ int buf[32];
    __shared__ alignas(8) uint64_t full;
    const uint32_t r = rank();
    if (threadIdx.x == 0) bar_init(&full, 2);
    cluster_sync();
    if (r == 1) {
        asm volatile("st.shared::cluster.u32 [%0], %1;" ::"r"(mapa(sa(&buf[threadIdx.x]), 0)), "r"(100 + 3 * threadIdx.x)
                     : "memory");
        __syncwarp();
        if (threadIdx.x == 0)
            asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0], %1;"
                         ::"r"(mapa(sa(&full), 0)), "r"(count) : "memory");
    } else {
        wait(&full, 0);
        out[threadIdx.x] = buf[threadIdx.x];
    }
}
