// sm_90a test kernel of refsim.ptx.hopper.bulk: the floating-point forms of cp.reduce.async.bulk
// (PTX ISA, "cp.reduce.async.bulk": .add on .f32/.f64, .add.noftz on .f16/.bf16, .min/.max on .f16/.bf16).
// Compiled by regen.py with nvcc -arch=sm_90a -ptx -O3 (CUDA 13.0).
#include <cstdint>

__device__ __forceinline__ uint32_t sa(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

// Thread 0 copies n bytes of src into shared memory (cp.async.bulk on an mbarrier), then reduces them
// into acc with the form `kind` selects: 0 add.f32, 1 add.f64, 2 add.noftz.f16, 3 add.noftz.bf16,
// 4 min.f16, 5 max.f16, 6 min.bf16, 7 max.bf16.
extern "C" __global__ void bulk_reduce_float(const void *src, void *acc, int n, int kind) {
    __shared__ alignas(128) unsigned char buf[512];
    __shared__ alignas(8) uint64_t bar;
    if (threadIdx.x != 0) return;
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(sa(&bar)));
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(sa(&bar)), "r"(n) : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 ::"r"(sa(buf)), "l"(src), "r"(n), "r"(sa(&bar)) : "memory");
    uint32_t ok = 0;
    while (!ok)
        asm volatile("{\n .reg .pred P;\n mbarrier.try_wait.parity.shared::cta.b64 P, [%1], 0;\n selp.u32 %0, 1, 0, P;\n}\n"
                     : "=r"(ok) : "r"(sa(&bar)) : "memory");
#define RED(form) asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group." form " [%0], [%1], %2;" \
                               ::"l"(acc), "r"(sa(buf)), "r"(n) : "memory")
    switch (kind) {
    case 0: RED("add.f32"); break;
    case 1: RED("add.f64"); break;
    case 2: RED("add.noftz.f16"); break;
    case 3: RED("add.noftz.bf16"); break;
    case 4: RED("min.f16"); break;
    case 5: RED("max.f16"); break;
    case 6: RED("min.bf16"); break;
    default: RED("max.bf16"); break;
    }
    asm volatile("cp.async.bulk.commit_group;");
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}
