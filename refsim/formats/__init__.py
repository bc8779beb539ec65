"""Golden NumPy implementations of every packed layout, one module per format.

    uniform         the affine quantizer every format instantiates (named schemes per paper)
    gptq, awq       the checkpoints users have (AutoGPTQ v1/v2, AutoAWQ GEMM)
    marlin          Marlin FP16xINT4 tiles, 64207531 interleave, scale permutations, GPTQ repack
    dequant_tricks  INT4/INT8 -> FP16 register bit tricks (lop3/prmt/magic numbers)
    swizzle         CuTe-style swizzles, Marlin's A-tile swizzle, bank-conflict counting
    stripes         Marlin's tile configuration and striped SM partitioning
    sparse_marlin   2:4 Sparse-Marlin values + metadata
    bitplane        Any-Precision bitplanes with the coalescing byte permutation
    bit_transpose   bit-matrix transposes and merged table lookups, with operation counts
    anyprec_plan    what the Any-Precision GEMV reads and computes; anyprec_memory: its Table 1
    atom            Atom W4A4: reorder, INT4 groups, INT8 outlier tail, KV cache, fused group GEMM
    mixed_2_4_16    2/4-bit groups in one matrix, second-order scales, CSR FP16 outliers
    qigen           QIGen's blocked CPU layout built from a GPTQ checkpoint
    bnb4            bitsandbytes NF4/FP4 blocks with double-quantized absmax (QLoRA)
    gguf            llama.cpp's GGUF tensors: gguf_legacy (Q4_0..Q8_0, IQ4_NL, F16/BF16), gguf_kquants (Q2_K..Q6_K, IQ4_XS)
    minifloat       FP8/FP6/FP4 element formats: rounding, overflow and NaN rules, decoding (ml_dtypes)
    fp8             FP8 casts and scaling schemes (compressed-tensors per tensor/channel/token, DeepGEMM 128x128)
    mx              MXFP4/6/8 (E8M0 block scales) and NVFP4 (E4M3 block scales x fp32), as torchao
    smem_layouts    Hopper shared memory: the wgmma matrix descriptor, 32B/64B/128B swizzles, operand layouts
    tensor_map      the TMA tensor map (cuTensorMapEncodeTiled rules, fmha_v2's 128-byte image, tile boxes)
    hopper_w4a16    refsim's Hopper W4A16 kernel's int4 words: one per thread, its wgmma A fragment

Every module uses the same verbs (``pack``, ``unpack``, ``dequantize``, ``permute``) and opens
with a spec block and a layout diagram; see docs/conventions.md.
"""
