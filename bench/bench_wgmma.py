"""Benchmark: what one ``wgmma.mma_async.m64n128k32.f32.e4m3.e4m3`` costs in refsim, and the projection
to DeepGEMM's FP8 GEMM at M = 128, N = K = 4096 (8,192 such instructions: 32 N-blocks x 2 m64
warpgroups x 128 k32 steps), whose whole launch must run in under 5 s CPU on the compiled executor.

Printed (best of ``--repeats`` CPU times, with the load):
- the arithmetic alone: refsim.arith.wgmma on ``--tiles`` independent tiles, the compiled twin
  (``native=None``) and the NumPy definition (``native=False``), per instruction;
- through refsim.ptx: tests/ptx/kernels/wgmma.cu's ``wgmma_e4m3_loop`` (``--steps`` x 4 wgmmas per
  warpgroup, one warpgroup per block, ``--blocks`` blocks) on the compiled executor and, with
  ``--interpreter``, the interpreter; per wgmma instruction (the launch's CPU time less that of the
  same launch with 0 steps, divided by the wgmma count: the loop's fence/commit/wait included) and the
  projected 8,192-instruction total. Block 0's result is checked
  against refsim.arith.wgmma on the operands read back from the shared-memory image.
Nothing is asserted.

Run: python bench/bench_wgmma.py [--repeats 3] [--blocks 64] [--steps 8] [--tiles 64] [--interpreter]
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np
from _timing import repeat_timed  # bench/_timing.py (scripts run as python bench/NAME.py)

KERNELS = Path(__file__).resolve().parents[1] / "tests" / "ptx" / "kernels"
DEEPGEMM_WGMMAS = 8192
TARGET_S = 5.0
SMEM = 24576


def _best_cpu(fn, repeats: int):
    t = repeat_timed(fn, repeats)
    return min(t.cpus), t.result


def arithmetic(tiles: int, repeats: int) -> None:
    from refsim.arith import wgmma as aw
    from refsim.native import emulators

    rng = np.random.default_rng(0)
    A = rng.integers(0, 0x7E, (tiles, 64, 32)).astype(np.uint8)
    B = rng.integers(0, 0x7E, (tiles, 32, 128)).astype(np.uint8)
    C = rng.standard_normal((tiles, 64, 128)).astype(np.float32)
    print(f"arithmetic, {tiles} tiles per call ({emulators.status()}):")
    for native in (None, False):
        cpu, _ = _best_cpu(lambda: aw.wgmma("f32.e4m3.e4m3", A, B, C, native=native), repeats)
        per = cpu / tiles
        print(f"  native={native!s:5}  {per * 1e6:9.1f} us per wgmma   x {DEEPGEMM_WGMMAS} = {per * DEEPGEMM_WGMMAS:7.2f} s")


def through_ptx(blocks: int, steps: int, repeats: int, executors) -> None:
    from refsim import ptx
    from refsim.arith import wgmma as aw
    from refsim.formats import smem_layouts as sl

    m = ptx.Module((KERNELS / "wgmma.ptx").read_text())
    rng = np.random.default_rng(1)
    A = rng.integers(0, 0x7E, (64, 128)).astype(np.uint8)            # one 128-deep K block, K-major rows
    B = rng.integers(0, 0x7E, (128, 128)).astype(np.uint8)           # (N, K)
    da = sl.encode_descriptor(0, 0, 1024, swizzle="128B")
    db = sl.encode_descriptor(8192, 0, 1024, swizzle="128B")
    # a 128B swizzle row holds the whole 128-byte K block of a row
    img = sl.smem_from_matrix(A, da, smem_size=SMEM) | sl.smem_from_matrix(B, db, smem_size=SMEM)
    n = blocks * steps * 4
    print(f"through refsim.ptx: wgmma_e4m3_loop, {blocks} blocks x {steps} steps x 4 = {n} wgmmas:")
    for ex in executors:
        D = np.zeros(blocks * 64 * 128, np.float32)

        def run(s):
            return m.launch("wgmma_e4m3_loop", (blocks, 1, 1), (128, 1, 1), [img, SMEM, da, db, D, s],
                            arch="sm_90a", shared_bytes=SMEM, executor=ex)
        run(0)                                                       # the first build is not timed
        base, _ = _best_cpu(lambda: run(0), repeats)                 # the launch without its loop
        cpu, _ = _best_cpu(lambda: run(steps), repeats)
        per = (cpu - base) / n
        # block 0: steps x the four k32 slices, each through refsim.arith.wgmma on the bytes read back
        acc = np.zeros((64, 128), np.float32)
        for _ in range(steps):
            for k in range(4):
                a = sl.matrix_from_smem(img, da + 2 * k, 64, 32, np.uint8)
                b = sl.matrix_from_smem(img, db + 2 * k, 128, 32, np.uint8)
                acc = aw.wgmma("f32.e4m3.e4m3", a, np.ascontiguousarray(b.T), acc)
        same = D[:8192].view(np.uint32).tobytes() == acc.view(np.uint32).tobytes()
        print(f"  {ex:11}  {cpu:7.3f} s CPU ({base:.3f} s without the loop)   {per * 1e6:9.1f} us per wgmma   "
              f"x {DEEPGEMM_WGMMAS} = "
              f"{per * DEEPGEMM_WGMMAS:7.2f} s (target for the whole GEMM {TARGET_S} s)   block 0 equals "
              f"refsim.arith.wgmma: {same}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--blocks", type=int, default=64)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--tiles", type=int, default=64)
    p.add_argument("--interpreter", action="store_true")
    a = p.parse_args()
    print(f"load: {os.getloadavg()}")
    arithmetic(a.tiles, a.repeats)
    through_ptx(a.blocks, a.steps, a.repeats, ["compiled"] + (["interpreter"] if a.interpreter else []))


if __name__ == "__main__":
    main()
