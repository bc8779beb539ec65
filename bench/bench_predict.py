"""Throughput of the analytical model: predictions per second (target >= 10,000/s).

    python bench/bench_predict.py

Times ``refsim.gpu_model.kernels.predict`` over a fixed mix (3 target GPUs × 8 kernels × Llama-2-7B
layer shapes × batch 1..256), after one warm-up pass (the per-shape caches: stripe plans, tile
choices, LUT conflict degrees). Also prints the calibration accuracy and leave-one-shape-out
error so the numbers in docs/perf_model.md can be regenerated from one run.
"""

from __future__ import annotations

import time

from refsim.gpu_model import calibrate
from refsim.gpu_model.kernels import kernel_names, predict
from refsim.gpu_model.shapes import unique_layer_shapes

TARGET_PER_S = 10_000


def workload():
    jobs = []
    for gpu in ("a10", "rtx4090", "orin-agx-64gb"):
        for kernel in kernel_names():
            if kernel == "atom-w4a4" and gpu.startswith("h"):
                continue
            for n, k in unique_layer_shapes("llama-2-7b"):
                for m in (1, 2, 4, 8, 16, 32, 64, 128, 256):
                    jobs.append((gpu, kernel, m, n, k))
    return jobs


def main() -> None:
    jobs = workload()
    for j in jobs:                       # warm-up: fills the per-shape caches
        predict(*j)
    reps = 5
    t0 = time.perf_counter()
    for _ in range(reps):
        for j in jobs:
            predict(*j)
    dt = time.perf_counter() - t0
    rate = reps * len(jobs) / dt
    print(f"predictions: {reps * len(jobs)} in {dt:.3f} s -> {rate:,.0f} per second "
          f"(target >= {TARGET_PER_S:,}): {'OK' if rate >= TARGET_PER_S else 'BELOW TARGET'}")
    # cold (no cache) cost of one new shape, for reference
    t0 = time.perf_counter()
    predict("a10", "marlin", 16, 12288, 12288 + 128 * 7)
    print(f"one cold Marlin prediction (new shape, stripe plan computed): {1e6 * (time.perf_counter() - t0):.0f} us")
    if calibrate.default_csv_path().exists():
        acc = calibrate.accuracy()
        print(f"calibration (RTX 4070 Laptop, {acc['n_rows']} rows, base clock, cold L2): model median APE "
              f"{acc['model_median_ape']:.1%}, max {acc['model_max_ape']:.1%} (target <= 8% / 25%); plain DRAM "
              f"roofline {acc['baseline_median_ape']:.1%} / {acc['baseline_max_ape']:.1%}")
        t0 = time.perf_counter()
        loso = calibrate.leave_one_shape_out()
        print(f"leave-one-shape-out ({loso['n_shapes']} shapes): median {loso['median_ape']:.1%}, max "
              f"{loso['max_ape']:.1%} (worst: {loso['worst_row']}) [{time.perf_counter() - t0:.1f} s]")


if __name__ == "__main__":
    main()
