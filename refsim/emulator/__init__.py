"""Kernel emulators: what each seed system's GPU kernel writes, bit for bit (see docs/emulator.md).

    marlin_kernel        Marlin GEMM dataflow (partition, k-warps, reductions, epilogue)
    anyprec_kernel       Any-Precision fused GEMV (hfma2 chains, shuffle tree)
    atom_kernel          Atom W4A4 group GEMM (int mma + fp32 epilogue)
    mixed_2_4_16_kernel  2/4/16-bit GEMV + fused outlier SpMV (refsim's documented kernel design)
    gptq_awq_kernel      the GPTQ / AWQ W4A16 GEMV (fp32 dot products of dequantized fp16 weights)
    dequant_gemm         the weight-only GEMM stated for the block-scaled formats' kernel checks
    hopper_w4a16         refsim's sm_90a W4A16 GEMM (fp16-scaled weights, chained wgmma m64n64k16 steps)

Each is built on the arithmetic floor :mod:`refsim.arith` (exact rounding, fp16/fp32 instructions,
tensor-core models, fragment maps) and on the layouts of :mod:`refsim.formats`.

Modules are imported explicitly (``from refsim.emulator import marlin_kernel``); nothing is loaded here.
"""
