"""The refsim/cuda kernels through refsim.ptx: a wider bit-exactness sweep than the test suite, and the
interpreter's time per kernel call (the cost of one property-test example).

Run: python bench/bench_cuda_kernels.py [--quick] [--backend gpu]

``--backend gpu`` runs the same cases on the current CUDA device (refsim.cuda.gpu) and bit-compares them
with the same oracles; the seconds then include the host copies, and no instruction counts are printed.

For each case: one launch through refsim.ptx (lockstep schedule), bit-compared with the emulator
function the kernel equals; printed: seconds per call, dynamic warp-instructions, warp-instructions
per second (= 32 x thread-instructions / s when every lane is active). A mismatch raises.
Napkin math: a call costs (warp-instructions) / (interpreter rate); the rate grows with the warps
executed together (more blocks per wave), so small test shapes run at the low end.
"""

from __future__ import annotations

import sys
import time

import numpy as np

import refsim.cuda as rc
from refsim.cuda import launch as cuda_launch
from refsim.cuda import mma as rmma
from refsim.emulator import anyprec_kernel, atom_kernel, gptq_awq_kernel, mixed_2_4_16_kernel
from refsim.formats import atom, awq, bitplane, gptq
from refsim.formats import mixed_2_4_16 as m2416
from refsim.quant import mixed_2_4_16 as q2416
from refsim.testing import assert_bitexact


class _Counter:
    """Wraps refsim.cuda.launch.run to add up the warp-instructions of the launches it makes."""

    def __init__(self):
        self.total = 0
        self._run = cuda_launch.run

    def __call__(self, *a, **k):
        stats = self._run(*a, **k)
        self.total += sum(st.warp_instructions for st in stats)
        return stats


def _anyprec(rng, m, n, k, bits, order=None):
    qweight = bitplane.pack(rng.integers(0, 2**bits, (n, k)).astype(np.uint8), bits)
    lut = rng.standard_normal((n, 2**bits)).astype(np.float16)
    x = rng.standard_normal((m, k)).astype(np.float16)
    return (lambda b: rc.anyprec_gemv(x, qweight, lut, bits, order, backend=b),
            lambda: anyprec_kernel.anyprec_gemv(x, qweight, lut, bits, order))


def _mixed(rng, k, n):
    X = rng.standard_normal((2 * k, k))
    p = m2416.pack(q2416.quantize((rng.standard_normal((k, n)) * 0.05).astype(np.float32), (X.T @ X) / k))
    x = rng.standard_normal(k).astype(np.float16)
    return lambda b: rc.mixed_gemv(p, x, backend=b), lambda: mixed_2_4_16_kernel.mixed_gemv(p, x)


def _gptq(rng, m, k, n, group):
    g = k // group
    ckpt = gptq.pack(rng.integers(0, 16, (k, n)), rng.random((g, n)) * 0.02, rng.integers(1, 16, (g, n)), 4,
                     group_size=group)
    x = rng.standard_normal((m, k)).astype(np.float16)
    return lambda b: rc.gptq_gemv(x, ckpt, backend=b), lambda: gptq_awq_kernel.gptq_gemv(x, ckpt)


def _awq(rng, m, k, n, group):
    g = k // group
    ckpt = awq.pack(rng.integers(0, 16, (k, n)), rng.random((g, n)) * 0.02, rng.integers(0, 16, (g, n)), group_size=group)
    x = rng.standard_normal((m, k)).astype(np.float16)
    return lambda b: rc.awq_gemv(x, ckpt, backend=b), lambda: gptq_awq_kernel.awq_gemv(x, ckpt)


def _atom(rng, m, k, n, keeper):
    x = rng.standard_normal((m, k)).astype(np.float16)
    w = (rng.standard_normal((k, n)) * 0.05).astype(np.float16)
    a = atom.quantize_activations(x, "kernel", keeper=keeper)
    wq = atom.quantize_weights(w, "kernel", keeper=keeper)
    return lambda b: rc.atom_group_gemm(a, wq, backend=b), lambda: atom_kernel.atom_group_gemm(a, wq)


def _mma(rng, tiles):
    kind = rmma.kind_of("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32")
    regs = rmma.pack(kind, *rmma.probe_inputs(kind, "random", tiles, rng))
    arch = "sm_90"                                   # the GPU backend's bits are the device's: compare there
    return lambda b: rc.mma_probe(kind, *regs, backend=b, arch=arch), lambda: rmma.mma_reference(kind, arch, *regs)


CASES = [
    ("anyprec M=1 N=4 K=1024 b=3", lambda r: _anyprec(r, 1, 4, 1024, 3), True),
    ("anyprec M=4 N=16 K=1312 b=5 (tail)", lambda r: _anyprec(r, 4, 16, 1312, 5), True),
    ("anyprec M=8 N=16 K=2048 b=8", lambda r: _anyprec(r, 8, 16, 2048, 8), False),
    ("anyprec M=1 N=4 K=5120 b=7 (K-split)", lambda r: _anyprec(r, 1, 4, 5120, 7, "ascending"), False),
    ("mixed K=128 N=16", lambda r: _mixed(r, 128, 16), True),
    ("mixed K=1024 N=64", lambda r: _mixed(r, 1024, 64), False),
    ("gptq M=1 K=32 N=32", lambda r: _gptq(r, 1, 32, 32, 32), True),
    ("gptq M=8 K=256 N=128 g=128", lambda r: _gptq(r, 8, 256, 128, 128), False),
    ("awq M=2 K=64 N=64 g=32", lambda r: _awq(r, 2, 64, 64, 32), True),
    ("atom M=16 K=384 N=16 keeper=128", lambda r: _atom(r, 16, 384, 16, 128), True),
    ("atom M=64 K=1152 N=128 keeper=128", lambda r: _atom(r, 64, 1152, 128, 128), False),
    ("mma m16n8k16 f32 x 64 tiles", lambda r: _mma(r, 64), True),
]


def main(argv: list[str]) -> int:
    quick = "--quick" in argv
    backend = "gpu" if "--backend" in argv and argv[argv.index("--backend") + 1:][:1] == ["gpu"] else "ptx"
    counter = _Counter()
    if backend == "ptx":
        cuda_launch.run = counter        # every refsim.cuda kernel launches through this one function
    print(f"backend {backend}")
    print(f"{'case':40s} {'s/call':>8s} {'warp-instr':>11s} {'warp-instr/s':>13s}")
    for name, make, small in CASES:
        if quick and not small:
            continue
        kernel, oracle = make(np.random.default_rng(0))
        kernel(backend)                                            # parse / load the module once (cached)
        counter.total = 0
        t = time.perf_counter()
        got = kernel(backend)
        dt = time.perf_counter() - t
        assert_bitexact(got, oracle(), name=name)
        rate = f"{counter.total / dt:13.0f}" if backend == "ptx" else f"{'-':>13s}"
        print(f"{name:40s} {dt:8.2f} {counter.total if backend == 'ptx' else '-':>11} {rate}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
