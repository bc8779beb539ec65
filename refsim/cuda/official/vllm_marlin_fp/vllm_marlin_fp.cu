// Two instantiations of vLLM's Marlin template (csrc/quantization/marlin/marlin_template.h, vLLM 0.33.0):
// FP8 e4m3 weights, fp16 A/C/scales, per-channel (group_blocks -1); NVFP4 e2m1 weights, e4m3 group-16
// scales (group_blocks 1) + fp32 global scale. 256 threads, thread_m_blocks 1, 128x128 tile
// (thread_n_blocks 8, thread_k_blocks 8), 4 stages, m_block_size_8 false, is_zp_float false.
#include "kernel.h"
#include "marlin_template.h"

namespace MARLIN_NAMESPACE_NAME {
template __global__ void Marlin<vllm::kFloat16.id(), vllm::kFE4M3fn.id(), vllm::kFloat16.id(), vllm::kFloat16.id(),
                                256, 1, 8, 8, false, 4, -1, false>(MARLIN_KERNEL_PARAMS);
template __global__ void Marlin<vllm::kFloat16.id(), vllm::kFE2M1f.id(), vllm::kFloat16.id(), vllm::kFE4M3fn.id(),
                                256, 1, 8, 8, false, 4, 1, false>(MARLIN_KERNEL_PARAMS);
}
