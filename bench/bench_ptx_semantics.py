"""Throughput of the PTX instruction handlers (refsim.ptx.semantics).

What it measures, in one run: for the instructions the project's CUDA kernels execute most (Marlin-style
dequant and GEMM), the handler's thread-instructions per second on T threads at once, and the ratio to
the issue's whole-engine target of 10^6 thread-instructions per second (a handler far below 1.0 would
bound the engine by itself). mma is reported per warp-instruction.

Run:  python bench/bench_ptx_semantics.py [--threads 8192] [--reps 20]
Napkin math: one handler call is a fixed number of NumPy passes over T elements (lop3: up to 8 minterms
x 4 ops; fma.rn.f16x2: 2 halves x (decode, float64 product, round-to-odd sum, float16 cast));
at ~1-5 ns per element and pass the integer ops reach 10^7-10^8 thread-instr/s, the float ones 10^6-10^7.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from refsim.ptx.semantics import Op, lookup

TARGET = 1e6  # thread-instructions per second for the whole engine


def _time(fn, args, reps: int) -> float:
    fn(*args)
    t0 = time.perf_counter()
    for _ in range(reps):
        fn(*args)
    return (time.perf_counter() - t0) / reps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=8192)
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    T = args.threads
    rng = np.random.default_rng(0)
    r32 = lambda: rng.integers(0, 2**32, T, dtype=np.uint64).astype(np.uint32)  # noqa: E731
    cases = [
        (Op("lop3", (), ("b32",)), (r32(), r32(), r32(), np.uint32(0xEA))),
        (Op("prmt", (), ("b32",)), (r32(), r32(), np.uint32(0x5250))),
        (Op("shr", (), ("u32",)), (r32(), np.uint32(8))),
        (Op("mad", ("lo",), ("s32",)), (r32(), r32(), r32())),
        (Op("setp", ("lt",), ("s32",)), (r32(), r32())),
        (Op("sub", (), ("f16x2",)), (r32(), r32())),
        (Op("mul", ("rn",), ("f16x2",)), (r32(), r32())),
        (Op("fma", ("rn",), ("f16x2",)), (r32(), r32(), r32())),
        (Op("fma", ("rn",), ("f32",)), (r32(), r32(), r32())),
        (Op("add", ("rz",), ("f32",)), (r32(), r32())),
        (Op("cvt", ("rn",), ("f16", "f32")), (r32(),)),
        (Op("cvt", ("rn",), ("f32", "s32")), (r32(),)),
        (Op("cvt", (), ("f32", "f16")), (r32().astype(np.uint16),)),
        (Op("add", ("rn",), ("f32",)), (r32(), r32())),
    ]
    print(f"{'instruction':24s} {'us/call':>9s} {'thread-instr/s':>15s} {'ratio to 1e6':>13s}   (T = {T})")
    for op, srcs in cases:
        dt = _time(lookup(op).fn, srcs, args.reps)
        print(f"{str(op):24s} {dt * 1e6:9.0f} {T / dt:15.3g} {T / dt / TARGET:13.1f}")
    W = max(T // 32, 1)
    a = rng.integers(0, 2**32, (W, 32, 4), dtype=np.uint64).astype(np.uint32) & np.uint32(0x3BFF3BFF)
    b = a[:, :, :2].copy()
    c = np.zeros((W, 32, 4), np.uint32)
    mma = lookup(Op("mma", ("sync", "aligned", "m16n8k16", "row", "col"), ("f32", "f16", "f16", "f32"))).fn
    dt = _time(mma, (a, b, c), max(args.reps // 10, 1))
    print(f"{'mma m16n8k16 f16->f32':24s} {dt * 1e6:9.0f} {W / dt:15.3g} warp-instr/s ({dt / W * 1e6:.0f} us each, W = {W})")


if __name__ == "__main__":
    main()
