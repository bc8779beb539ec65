"""Latency models of quantized-LLM kernels on real GPUs (see docs/perf_model.md).

    specs      one frozen dataclass per GPU, every number with its source and provenance tag
    roofline   DRAM / L2 / tensor / ALU / shared-memory terms, waves, tail, the binding bottleneck
    kernels/   one model per kernel family, built on the kernel's real decomposition
    cycle      an inner-loop cycle model (warps issuing the kernel's instruction mix)
    calibrate  the few fitted constants and the accuracy report; shapes: built-in model shapes
"""
