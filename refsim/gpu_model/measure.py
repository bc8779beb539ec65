"""The microbenchmarks of ``refsim calibrate --measure``, run on the local GPU (the ``gpu`` extra).

Four benchmarks, about half a minute on a datacenter GPU, write the dict that
:func:`refsim.gpu_model.microbench.fit` reads (its spec block; ``h100_microbenchmarks.json`` is
the same measurement recorded on an H100 SXM)::

    empty            an empty kernel between two CUDA events, 20 launches
    read             sum of float4 loads, one load in flight per thread (the next address depends
                     on the loaded value, so the compiler cannot hoist it), 8 blocks of 256 threads
                     per SM, 256 KiB .. 1 GiB, cold (a 2 x L2 buffer zeroed before each launch)
                     and warm (back to back), median of 20
    read_occupancy   the 256 MiB read with 1..32 blocks of 128 / 256 / 512 threads per SM (cold)

Kernels are compiled with NVRTC through ``cuda.core`` and timed with its events; no host work
sits between the zeroing and the timed launch. A missing ``cuda.core`` or GPU is a ToolchainError.
"""

from __future__ import annotations

import statistics

from refsim.errors import ToolchainError

__all__ = ["measure", "SOURCE"]

SOURCE = r"""
extern "C" __global__ void empty_kernel() {}

extern "C" __global__ void zero(float4* p, unsigned long long n) {
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x)
        p[i] = make_float4(0.f, 0.f, 0.f, 0.f);
}

// one float4 in flight per thread: the stride of the next load depends on the loaded value (the
// buffers hold zeros, so it is always the grid stride, but the compiler cannot know)
extern "C" __global__ void read(const float4* p, unsigned long long n, float* out) {
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    float acc = 0.f;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;) {
        float4 v = p[i];
        acc += v.x + v.y + v.z + v.w;
        i += stride + (unsigned long long)(v.x != 0.f);
    }
    if (acc == 12345.f) out[0] = acc;
}
"""

SIZES = [1 << s for s in (18, 20, 22, 24, 26, 28, 30)]
OCCUPANCY = [(b, t) for b in (1, 2, 4, 8, 16, 32) for t in (128, 256, 512)]
REPS = 20


def measure() -> dict:
    """Run the benchmarks on CUDA device 0; the results dict of :mod:`refsim.gpu_model.microbench`
    plus ``device`` (name, compute capability, clock rate from the driver)."""
    try:
        import cuda.core as cc
    except ImportError as err:
        raise ToolchainError(f"refsim calibrate --measure needs cuda.core: pip install 'refsim[gpu]' ({err})") from err
    try:
        dev = cc.Device()
        dev.set_current()
        stream = dev.create_stream()
        arch = "sm_" + "".join(str(x) for x in dev.compute_capability)
        code = cc.Program(SOURCE, code_type="c++", options=cc.ProgramOptions(arch=arch)).compile("cubin")
        kernels = {name: code.get_kernel(name) for name in ("empty_kernel", "zero", "read")}
        sms = dev.properties.multiprocessor_count
        l2 = dev.properties.l2_cache_size
        flush_bytes = max(2 * l2, 256 << 20)
        flush = dev.allocate(flush_bytes, stream=stream)
        data = dev.allocate(max(SIZES), stream=stream)
        out = dev.allocate(64, stream=stream)
        timing = cc.EventOptions(enable_timing=True)

        def launch(name, grid, block, *args):
            cc.launch(stream, cc.LaunchConfig(grid=grid, block=block), kernels[name], *args)

        def zero(buf, nbytes):
            launch("zero", sms * 8, 256, buf, nbytes // 16)

        def timed(name, grid, block, *args, cold):
            times = []
            for _ in range(REPS):
                if cold:
                    zero(flush, flush_bytes)
                start = stream.record(options=timing)
                launch(name, grid, block, *args)
                stop = stream.record(options=timing)
                stop.sync()
                times.append((stop - start) * 1e3)          # ms -> us
            return {"median_us": statistics.median(times), "min_us": min(times),
                    "p90_us": sorted(times)[int(0.9 * (len(times) - 1))]}

        zero(data, max(SIZES))
        results = {"sms": sms, "empty": {c: timed("empty_kernel", 1, 32, cold=c == "cold") for c in ("cold", "warm")},
                   "read": [], "read_occupancy": []}
        for nbytes in SIZES:
            for cache in ("cold", "warm"):
                r = timed("read", sms * 8, 256, data, nbytes // 16, out, cold=cache == "cold")
                results["read"].append(dict(r, bytes=nbytes, cache=cache))
        for blocks, threads in OCCUPANCY:
            r = timed("read", sms * blocks, threads, data, (256 << 20) // 16, out, cold=True)
            results["read_occupancy"].append(dict(r, blocks_per_sm=blocks, threads=threads, bytes=256 << 20))
        results["device"] = {"name": dev.name, "compute_capability": arch, "l2_bytes": l2,
                             "clock_khz": dev.properties.clock_rate}
        return results
    except ToolchainError:
        raise
    except Exception as err:        # cuda.core raises driver and NVRTC errors as plain exceptions
        raise ToolchainError(f"refsim calibrate --measure: the GPU run failed: {err}") from err
