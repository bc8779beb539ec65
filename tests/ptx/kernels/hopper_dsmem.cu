// sm_90a test kernels of refsim.ptx.hopper.dsmem: distributed shared memory in a cluster.
// exchange: each CTA fills buf with its values; after barrier.cluster (if sync) every thread reads the next
// CTA's buf through cooperative_groups (generic mapa + ld), the previous CTA's through mapa.shared::cluster
// (.u32 with a .v2 load, .u64 with a scalar load), stores into the next CTA's mail (st.shared::cluster), adds
// into rank 0's counter (generic atom.add and red.shared::cluster.add), max/min into rank 0's / the last rank's,
// and thread 0 exchanges and compares-and-swaps into the next CTA's words; after a second barrier.cluster each
// CTA writes what it received. remote_word: thread 0 reads word `word` of CTA `rank`'s buf (bad ranks and
// offsets are named errors).
// Compiled by regen.py with nvcc -arch=sm_90a -ptx -O3 (CUDA 13.0).
#include <cooperative_groups.h>
#include <cstdint>

namespace cg = cooperative_groups;

__device__ __forceinline__ uint32_t smem(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

__device__ __forceinline__ uint32_t mapa32(uint32_t a, uint32_t rank) {
    uint32_t d;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(rank));
    return d;
}

__device__ __forceinline__ uint32_t atom32(const char *op, uint32_t a, uint32_t v);

extern "C" __global__ void exchange(uint32_t *out, uint32_t *words, int sync) {
    __shared__ uint32_t buf[64], mail[64], counter[5];
    cg::cluster_group c = cg::this_cluster();
    const uint32_t rank = c.block_rank(), n = c.num_blocks(), t = threadIdx.x;
    const uint32_t next = (rank + 1) % n, prev = (rank + n - 1) % n;
    buf[t] = 1000u * blockIdx.x + t;
    if (t < 5) counter[t] = t == 2 ? 0xffffffffu : 0u;
    if (sync) c.sync();
    uint32_t *o = out + 4 * 64 * blockIdx.x;
    o[t] = c.map_shared_rank(buf, next)[t];                                  // generic mapa + ld
    uint32_t x, y;
    asm volatile("ld.shared::cluster.v2.u32 {%0, %1}, [%2];" : "=r"(x), "=r"(y)
                 : "r"(mapa32(smem(&buf[t & ~1u]), prev)));
    o[64 + t] = (t & 1) ? y : x;
    uint64_t a64 = smem(&buf[(t + 1) % 64]), d64;
    asm volatile("mapa.shared::cluster.u64 %0, %1, %2;" : "=l"(d64) : "l"(a64), "r"(prev));
    asm volatile("ld.shared::cluster.u32 %0, [%1];" : "=r"(o[128 + t]) : "l"(d64));
    asm volatile("st.shared::cluster.u32 [%0], %1;" :: "r"(mapa32(smem(&mail[t]), next)), "r"(7u * blockIdx.x + t));
    atomicAdd(c.map_shared_rank(&counter[0], 0), t + 1);                     // generic atom.add
    asm volatile("red.shared::cluster.add.u32 [%0], %1;" :: "r"(mapa32(smem(&counter[0]), 0)), "r"(1000u));
    uint32_t old;  // atom needs a destination; the values are order-dependent, unused
    asm volatile("atom.shared::cluster.max.u32 %0, [%1], %2;" : "=r"(old)
                 : "r"(mapa32(smem(&counter[1]), 0)), "r"(64u * blockIdx.x + t));
    asm volatile("atom.shared::cluster.min.u32 %0, [%1], %2;" : "=r"(old)
                 : "r"(mapa32(smem(&counter[2]), n - 1)), "r"(64u * blockIdx.x + t + 5u));
    if (t == 0) {
        uint32_t e, c1, c2;
        asm volatile("atom.shared::cluster.exch.b32 %0, [%1], %2;" : "=r"(e)
                     : "r"(mapa32(smem(&counter[3]), next)), "r"(100u + rank));
        asm volatile("atom.shared::cluster.cas.b32 %0, [%1], %2, %3;" : "=r"(c1)
                     : "r"(mapa32(smem(&counter[4]), next)), "r"(0u), "r"(200u + rank));
        asm volatile("atom.shared::cluster.cas.b32 %0, [%1], %2, %3;" : "=r"(c2)
                     : "r"(mapa32(smem(&counter[4]), next)), "r"(0u), "r"(999u));
        words[8 * blockIdx.x + 5] = e + 0u * old;
        words[8 * blockIdx.x + 6] = c1;
        words[8 * blockIdx.x + 7] = c2;
    }
    if (sync) c.sync();
    o[192 + t] = mail[t];
    if (t < 5) words[8 * blockIdx.x + t] = counter[t];
}

extern "C" __global__ void remote_word(uint32_t *out, uint32_t rank, uint32_t word) {
    __shared__ uint32_t buf[64];
    cg::cluster_group c = cg::this_cluster();
    buf[threadIdx.x] = threadIdx.x;
    c.sync();
    if (threadIdx.x == 0) {
        uint32_t v;
        asm volatile("ld.shared::cluster.u32 %0, [%1];" : "=r"(v) : "r"(mapa32(smem(&buf[0]) + 4u * word, rank)));
        out[blockIdx.x] = v;
    }
    c.sync();
}
