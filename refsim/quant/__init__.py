"""Quantization algorithms that produce the formats in :mod:`refsim.formats`.

    gptq        GPTQ (Hessian, lazy block updates, act-order, static groups) -> GPTQ checkpoints
    rtn         round-to-nearest with a (Hessian-weighted) clipping grid search
    squeezellm  sensitivity-weighted 1-D k-means seed model (Any-Precision)
    upscale     incremental upscaling of the seed model to 8 bits (Any-Precision)
    fisher      Fisher-diagonal sensitivity of a linear layer
    atom        Atom's calibration -> reorder -> RTN/GPTQ -> fake-quant pipeline
    marlin      Marlin's symmetric absmax scales and round-to-nearest codes (offset 8)
    mixed_2_4_16  the 2/4/16-bit quantizer: eq. 9 sensitivity, 2/4-bit groups, FP16 outliers
    fp8         llm-compressor's FP8 / FP8_DYNAMIC / FP8_BLOCK weight presets and their checkpoint tensors
"""
