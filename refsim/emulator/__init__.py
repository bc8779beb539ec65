"""Numerically exact emulation of what GPU kernels write, bit for bit (see docs/emulator.md).

    exact          exact rational rounding: the oracle for everything below
    fp             fp16/fp32 scalar primitives (RNE, fused/unfused multiply-add, conversions)
    tensor_core    per-architecture tensor-core models: fdpa, mma_m16n8k16, integer mma
    fragments      mma / ldmatrix register layouts as index data
    marlin_kernel  Marlin GEMM dataflow (partition, k-warps, reductions, epilogue)
    anyprec_kernel Any-Precision fused GEMV (hfma2 chains, shuffle tree)
    atom_kernel    Atom W4A4 group GEMM (int mma + fp32 epilogue)
    mixed_2_4_16_kernel  2/4/16-bit GEMV + fused outlier SpMV (refsim's documented kernel design)
    harness        check_kernel: the bit-exact harness for kernel authors (harness_formats: its formats)

Modules are imported explicitly (``from refsim.emulator import tensor_core``); nothing is loaded here.
"""
