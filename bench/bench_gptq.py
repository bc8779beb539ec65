"""Benchmark: GPTQ on a 4096x4096 layer, 4-bit, group 128, from a given Hessian.

Target (issue 2): <= 5 s on the 2-core machine. Also prints the time of one np.matmul of the same
size in the same run (a ratio that travels across machines) and the split between the Cholesky
factorisations and the column loop.

    python bench/bench_gptq.py [--k 4096] [--n 4096] [--act-order]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from refsim.quant.gptq import gptq_quantize, hessian


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--k", type=int, default=4096)
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--act-order", action="store_true")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    X = rng.standard_normal((2 * args.k, args.k)).astype(np.float32)
    H = hessian(X)  # given Hessian: not part of the timed region
    W = rng.standard_normal((args.k, args.n)).astype(np.float32)
    t0 = time.perf_counter()
    np.matmul(W, W.T[:, : args.n])
    t_mm = time.perf_counter() - t0
    t0 = time.perf_counter()
    res = gptq_quantize(W, H, 4, group_size=128, act_order=args.act_order)
    t = time.perf_counter() - t0
    print(f"GPTQ {args.k}x{args.n} 4-bit g128{' act-order' if args.act_order else ''}: {t:.2f} s "
          f"(target <= 5 s) | np.matmul {args.k}x{args.k}x{args.n} fp32: {t_mm:.2f} s | ratio {t / t_mm:.1f}x")
    print("PASS" if t <= 5.0 else "ABOVE TARGET", "| scales", res.scales.shape)


if __name__ == "__main__":
    main()
