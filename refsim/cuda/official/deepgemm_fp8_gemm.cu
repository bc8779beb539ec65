// DeepGEMM's sm_90 FP8 GEMM (1x128 activation scales, 128x128 weight scales, bf16 output): two instantiations
// of the JIT template `sm90_fp8_gemm_1d2d_impl`, written as DeepGEMM's JIT writes its kernel.cu
// (csrc/jit_kernels/impls/sm90_fp8_gemm_1d2d.hpp, SM90FP8Gemm1D2DRuntime::generate_impl) for `fp8_gemm_nt`
// (compiled_dims "nk": SHAPE_M = 0, GemmType::Normal, major_sfb K, EpilogueIdentity), with the block sizes
// DeepGEMM's heuristics (csrc/jit_kernels/heuristics/sm90.hpp) pick.
#include <deep_gemm/impls/sm90_fp8_gemm_1d2d.cuh>

using namespace deep_gemm;

static void __instantiate_kernel() {
    // M = 128, N = K = 4096 on 132 SMs: BLOCK_M 64, BLOCK_N 64, BLOCK_K 128, 13 stages,
    // 128 TMA + 128 math threads, no multicast (cluster 1).
    auto layer = reinterpret_cast<void*>(&sm90_fp8_gemm_1d2d_impl<
        cute::UMMA::Major::K,
        0, 4096, 4096,
        1,
        64, 64, 128,
        128, 128, 128,
        13,
        128, 128,
        1, false,
        132, GemmType::Normal,
        cutlass::bfloat16_t,
        epilogue::transform::EpilogueIdentity
    >);
    // M = 64, N = 256, K = 512 on 4 SMs (deep_gemm.set_num_sms(4)): the same block sizes, 13 stages.
    auto small = reinterpret_cast<void*>(&sm90_fp8_gemm_1d2d_impl<
        cute::UMMA::Major::K,
        0, 256, 512,
        1,
        64, 64, 128,
        128, 128, 128,
        13,
        128, 128,
        1, false,
        4, GemmType::Normal,
        cutlass::bfloat16_t,
        epilogue::transform::EpilogueIdentity
    >);
    (void)layer, (void)small;
}
