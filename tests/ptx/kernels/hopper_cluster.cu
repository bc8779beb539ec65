// sm_90a test kernels of refsim.ptx.hopper.cluster: the cluster special registers and barrier.cluster.
// ids: each thread stores its block's 16 cluster registers; fixed_ids: the same with __cluster_dims__(2, 1, 1)
// (.reqnctapercluster and .explicitcluster in the PTX). handoff: thread 0 of every CTA but the cluster's last
// writes its value after `spin` iterations, then the whole cluster meets at barrier.cluster and every thread
// stores the sum of its cluster's values: only a barrier that waits for every CTA of the cluster gives the sum.
// Compiled by regen.py with nvcc -arch=sm_90a -ptx -O3 (CUDA 13.0).
#include <cstdint>

#define SREG(name) ({ uint32_t v; asm volatile("mov.u32 %0, " name ";" : "=r"(v)); v; })

#define EXPLICIT() ({ uint32_t v; asm volatile("{\n .reg .pred p;\n mov.pred p, %%is_explicit_cluster;\n selp.u32 %0, 1, 0, p;\n}" : "=r"(v)); v; })

__device__ __forceinline__ void store_ids(uint32_t *out) {
    const uint32_t b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    if (threadIdx.x != 0) return;
    uint32_t *o = out + 16 * b;
    o[0] = SREG("%clusterid.x"); o[1] = SREG("%clusterid.y"); o[2] = SREG("%clusterid.z");
    o[3] = SREG("%nclusterid.x"); o[4] = SREG("%nclusterid.y"); o[5] = SREG("%nclusterid.z");
    o[6] = SREG("%cluster_ctaid.x"); o[7] = SREG("%cluster_ctaid.y"); o[8] = SREG("%cluster_ctaid.z");
    o[9] = SREG("%cluster_nctaid.x"); o[10] = SREG("%cluster_nctaid.y"); o[11] = SREG("%cluster_nctaid.z");
    o[12] = SREG("%cluster_ctarank"); o[13] = SREG("%cluster_nctarank"); o[14] = EXPLICIT();
    o[15] = b;
}

extern "C" __global__ void ids(uint32_t *out) { store_ids(out); }

extern "C" __global__ void __cluster_dims__(2, 1, 1) fixed_ids(uint32_t *out) { store_ids(out); }

extern "C" __global__ void handoff(volatile uint32_t *vals, uint32_t *out, int spin) {
    const uint32_t rank = SREG("%cluster_ctarank"), n = SREG("%cluster_nctarank"), c = SREG("%clusterid.x");
    if (threadIdx.x == 0 && rank + 1 < n) {
        for (volatile int i = 0; i < spin; i = i + 1) {}
        vals[blockIdx.x] = 10u * blockIdx.x + 1u;
    }
    asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
    asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
    uint32_t sum = 0;
    for (uint32_t r = 0; r + 1 < n; ++r) sum += vals[c * n + r];
    out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}
