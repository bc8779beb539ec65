// sm_90a test kernels of refsim.ptx.hopper: mbarrier, cp.async.bulk(.tensor), elect.sync, fence.proxy.async.
// The tensor a map describes is passed as the first pointer argument (so refsim maps it at
// refsim.ptx.memory.GLOBAL_BASE, the address the host writes into the map).
// Compiled by regen.py with nvcc -arch=sm_90a -ptx -O3 (CUDA 13.0).
#include <cuda.h>
#include <cstdint>

__device__ __forceinline__ uint32_t sa(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void bar_init(uint64_t *b, uint32_t n) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(sa(b)), "r"(n));
}
__device__ __forceinline__ void arrive_tx(uint64_t *b, uint32_t tx) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(sa(b)), "r"(tx) : "memory");
}
__device__ __forceinline__ uint64_t arrive(uint64_t *b) {
    uint64_t s;
    asm volatile("mbarrier.arrive.shared::cta.b64 %0, [%1];" : "=l"(s) : "r"(sa(b)) : "memory");
    return s;
}
__device__ __forceinline__ bool try_wait(uint64_t *b, uint32_t parity) {
    uint32_t ok;
    asm volatile("{\n .reg .pred P;\n mbarrier.try_wait.parity.shared::cta.b64 P, [%1], %2;\n selp.u32 %0, 1, 0, P;\n}\n"
                 : "=r"(ok) : "r"(sa(b)), "r"(parity) : "memory");
    return ok;
}
__device__ __forceinline__ void wait(uint64_t *b, uint32_t parity) { while (!try_wait(b, parity)) {} }
__device__ __forceinline__ bool elect() {
    uint32_t is;
    asm volatile("{\n .reg .pred P;\n elect.sync _|P, 0xffffffff;\n selp.u32 %0, 1, 0, P;\n}\n" : "=r"(is));
    return is;
}
__device__ __forceinline__ void tma_load_2d(void *dst, const CUtensorMap *m, int x, int y, uint64_t *b) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
                 ::"r"(sa(dst)), "l"(m), "r"(x), "r"(y), "r"(sa(b)) : "memory");
}

// A 3-stage ring: warp 0 produces (elect.sync, TMA 2-D tiles of 8 x 8 int32), warps 1-2 consume
// (each thread sums one column pair of every tile); the empty barriers count the two consumer warps.
extern "C" __global__ void tma_ring(const __grid_constant__ CUtensorMap tmap, const int *tensor, int ntiles, int *out) {
    __shared__ alignas(128) int tiles[3][64];
    __shared__ alignas(8) uint64_t full[3], empty[3];
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (threadIdx.x == 0)
        for (int s = 0; s < 3; s++) { bar_init(&full[s], 1); bar_init(&empty[s], 2); }
    asm volatile("fence.proxy.async.shared::cta;");
    __syncthreads();
    if (warp == 0) {
        for (int k = 0; k < ntiles; k++) {
            int s = k % 3;
            wait(&empty[s], ((k / 3) & 1) ^ 1);
            if (elect()) { arrive_tx(&full[s], 256); tma_load_2d(tiles[s], &tmap, 0, 8 * k, &full[s]); }
            __syncwarp();
        }
    } else {
        int acc = 0, c = (warp - 1) * 32 + lane;
        for (int k = 0; k < ntiles; k++) {
            int s = k % 3;
            wait(&full[s], (k / 3) & 1);
            acc += tiles[s][c] * (k + 1);
            __syncwarp();
            if (elect()) arrive(&empty[s]);
        }
        out[c] = acc;
    }
}

// One 8 x 8 tile at (x, y): the out-of-bounds part of the box is filled with zero.
extern "C" __global__ void tma_tile(const __grid_constant__ CUtensorMap tmap, const int *tensor, int x, int y, int *out) {
    __shared__ alignas(128) int tile[64];
    __shared__ alignas(8) uint64_t bar;
    if (threadIdx.x == 0) bar_init(&bar, 1);
    asm volatile("fence.proxy.async.shared::cta;");
    __syncthreads();
    if (threadIdx.x == 0) { arrive_tx(&bar, 256); tma_load_2d(tile, &tmap, x, y, &bar); }
    wait(&bar, 0);
    out[threadIdx.x] = tile[threadIdx.x];
    out[threadIdx.x + 32] = tile[threadIdx.x + 32];
}

// A TMA store of an 8 x 8 tile written by the threads; fence = 0 leaves out fence.proxy.async (a race).
extern "C" __global__ void tma_store(const __grid_constant__ CUtensorMap tmap, int *tensor, int x, int y, int fence) {
    __shared__ alignas(128) int tile[64];
    tile[threadIdx.x] = threadIdx.x * 3 + 1;
    tile[threadIdx.x + 32] = threadIdx.x * 5 + 2;
    if (fence) asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    if (threadIdx.x == 0) {
        asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%0, {%1, %2}], [%3];"
                     ::"l"(&tmap), "r"(x), "r"(y), "r"(sa(tile)) : "memory");
        asm volatile("cp.async.bulk.commit_group;");
        asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
    }
}

// A bulk copy of n bytes global -> shared (mbarrier), then shared -> global (dst) and a reduce-add
// of the same bytes into acc (bulk groups).
extern "C" __global__ void bulk_copy_reduce(const int *src, int *dst, unsigned *acc, int n) {
    __shared__ alignas(128) int buf[256];
    __shared__ alignas(8) uint64_t bar;
    if (threadIdx.x == 0) bar_init(&bar, 1);
    asm volatile("fence.proxy.async.shared::cta;");
    __syncthreads();
    if (threadIdx.x == 0) {
        arrive_tx(&bar, n);
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                     ::"r"(sa(buf)), "l"(src), "r"(n), "r"(sa(&bar)) : "memory");
    }
    wait(&bar, 0);
    if (threadIdx.x == 0) {
        asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst), "r"(sa(buf)), "r"(n) : "memory");
        asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.u32 [%0], [%1], %2;"
                     ::"l"(acc), "r"(sa(buf)), "r"(n) : "memory");
        asm volatile("cp.async.bulk.commit_group;");
        asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
    }
}

// Two rounds of a one-stage copy pipeline; expect = 0 arrives without expect_tx (the bug): the
// copy's complete_tx then leaves the next phase a negative tx-count and the second wait never ends.
extern "C" __global__ void expect_tx_bug(const int *src, int *out, int expect) {
    __shared__ alignas(128) int buf[32];
    __shared__ alignas(8) uint64_t bar;
    if (threadIdx.x == 0) bar_init(&bar, 1);
    asm volatile("fence.proxy.async.shared::cta;");
    __syncthreads();
    int acc = 0;
    for (int k = 0; k < 2; k++) {
        if (threadIdx.x == 0) {
            if (expect) arrive_tx(&bar, 128); else arrive(&bar);
            asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], 128, [%2];"
                         ::"r"(sa(buf)), "l"(src + 32 * k), "r"(sa(&bar)) : "memory");
        }
        wait(&bar, k & 1);
        acc += buf[threadIdx.x];
        __syncthreads();
    }
    out[threadIdx.x] = acc;
}

// The producer's first wait on the empty barrier with parity 0 instead of 1: it waits for a phase
// the consumer can only complete after the producer has filled the buffer (a deadlock).
extern "C" __global__ void parity_bug(const int *src, int *out) {
    __shared__ alignas(128) int buf[32];
    __shared__ alignas(8) uint64_t full, empty;
    if (threadIdx.x == 0) { bar_init(&full, 1); bar_init(&empty, 1); }
    asm volatile("fence.proxy.async.shared::cta;");
    __syncthreads();
    if (threadIdx.x < 32) {
        wait(&empty, 0);
        if (elect()) {
            arrive_tx(&full, 128);
            asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], 128, [%2];"
                         ::"r"(sa(buf)), "l"(src), "r"(sa(&full)) : "memory");
        }
    } else {
        wait(&full, 0);
        out[threadIdx.x - 32] = buf[threadIdx.x - 32];
        if (elect()) arrive(&empty);
    }
}
