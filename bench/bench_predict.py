"""Throughput of the analytical model: predictions per second (issue 13: >= 100,000/s; issue 15:
>= 50,000/s), and the cost of one prediction at a huge batch (O(1) in M).

    python bench/bench_predict.py

Three rates, each over a fixed mix (3 target GPUs × 8 kernels × Llama-2-7B layer shapes × batch
1..256 = 648 predictions), measured in this one run (no assertion: the machine is shared):

* **repeated** — the mix asked again (a report or sweep re-asking a point): served by
  ``kernels.predict``'s result cache (a copy of the stored Breakdown);
* **new points, warm per-shape caches** — every prediction computed (result cache emptied before
  each pass) while the per-shape building blocks (stripe partitions, GEMM tile choices, loop
  descriptions) stay cached, as in a sweep over M of a few layer shapes;
* **cold** — one new Marlin shape with every cache empty.

Also prints the calibration accuracy and leave-one-shape-out error so the numbers in
docs/perf_model.md can be regenerated from one run.
"""

from __future__ import annotations

import time

from refsim.gpu_model import calibrate
from refsim.gpu_model import kernels as _kernels
from refsim.gpu_model.kernels import kernel_names, predict
from refsim.gpu_model.shapes import unique_layer_shapes

TARGET_PER_S = 100_000


def workload():
    jobs = []
    for gpu in ("a10", "rtx4090", "orin-agx-64gb"):
        for kernel in kernel_names():
            for n, k in unique_layer_shapes("llama-2-7b"):
                for m in (1, 2, 4, 8, 16, 32, 64, 128, 256):
                    jobs.append((gpu, kernel, m, n, k))
    return jobs


def _rate(jobs, reps, clear) -> float:
    best = 0.0
    for _ in range(reps):
        if clear:
            _kernels._cached.cache_clear()
        t0 = time.perf_counter()
        for j in jobs:
            predict(*j)
        best = max(best, len(jobs) / (time.perf_counter() - t0))
    return best


def main() -> None:
    jobs = workload()
    for j in jobs:                       # warm-up: fills the per-shape caches and the result cache
        predict(*j)
    repeated = _rate(jobs, 5, clear=False)
    fresh = _rate(jobs, 5, clear=True)
    for name, rate in (("repeated points (result cache)", repeated),
                       ("new points, warm per-shape caches", fresh)):
        print(f"{name:<36} {rate:>10,.0f} predictions/s (best of 5 passes of {len(jobs)}; target >= "
              f"{TARGET_PER_S:,}: {'met' if rate >= TARGET_PER_S else 'not met'})")
    _kernels.clear_caches()
    t0 = time.perf_counter()
    predict("a10", "marlin", 16, 12288, 12288 + 128 * 7)
    print(f"one cold Marlin prediction (new shape, partition computed): {1e6 * (time.perf_counter() - t0):.0f} us")
    t0 = time.perf_counter()
    bd = predict("a10", "marlin", 10**8, 4096, 4096)
    print(f"Marlin at M = 10^8 ({bd.launches:,} launches, 3 kinds): {1e3 * (time.perf_counter() - t0):.1f} ms")
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
