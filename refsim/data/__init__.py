"""The data refsim reads, each file with its provenance beside it.

    minilm          real test weights (all-MiniLM-L6-v2), fetched on first use, SHA-256 pinned, never committed
    calibration     calibration text and activations for the quantizers
    timings/        measured kernel latencies (published papers, RTX 4070 Laptop), CSV + README
    tensor_core_hw/ tensor-core outputs measured on A100 / H100 / V100 (fp16 blocks) and the H100 mma.sync
                    probes (bf16, tf32, fp8, fp16 tiles), npz + README + licence
    gguf_iq_grids/  ggml's IQ lattice tables (IQ1_S..IQ3_S), copied from the gguf package 0.19.0, npz + README
"""
