"""Latency models of quantized-LLM kernels on real GPUs (see docs/perf_model.md).

    names       one name per GPU and kernel, and the one alias table
    specs       one frozen GPUSpec per GPU, every number with its source and provenance tag
    conditions  measurement conditions: clock, ECC, cache (cold / dirty / warm), timing (kernel / events)
    roofline    the shared terms: the Little's-law DRAM stream, L2, tensor, ALU, the overlap, Breakdown
    kernels/    one plain model(...) per kernel family, built on the kernel's real decomposition
    problem     what a prediction is: validation once, the kernel's model under the conditions
    evaluate    the fast path (result cache, batches over M), equal to problem.reference bit for bit
    layers      a kernel over a model's layers, with the cuBLAS baseline and the roofline share
    measured    timings measured on real GPUs and the model beside them
    microbench  per-GPU constants from microbenchmark results; measure runs them; gpufile stores them
    calibrate   the global fitted constants (launch cost, overlap) on the calibration table
    published   the papers' published numbers side by side; sweep: grids of predictions and plots
    cycle, loop, occupancy, shapes: the inner-loop cycle model, loop descriptions, occupancy, model shapes
"""
