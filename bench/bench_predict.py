"""Throughput of the analytical model: predictions per second (target >= 50,000 new points/s batched),
and the cost of one prediction at a huge batch (O(1) in M).

    python bench/bench_predict.py

Four rates, each over a fixed mix (3 target GPUs × 8 kernels × Llama-2-7B layer shapes × batch
1..256, less awq-w4a16 from M = 2, which refuses: 576 predictions), measured in this one run (no speed assertion: the machine is shared):

* **repeated** — the mix asked again (a report or sweep re-asking a point): served by
  ``kernels.predict``'s result cache (a copy of the stored Breakdown; refsim.gpu_model.evaluate);
* **new points, warm per-shape caches** — every prediction computed (result cache emptied before
  each pass) while the per-shape building blocks (stripe partitions, GEMM tile choices, loop
  descriptions) stay cached, as in a sweep over M of a few layer shapes;
* **new points, batched** — the same 648 new predictions through ``kernels.predict_many``, one call
  per (GPU, kernel, N, K) with the 9 batch sizes (the way ``refsim sweep`` and the report's tables
  call the model); result cache emptied before each pass, per-shape caches warm; every element
  checked equal to the per-point result before timing;
* **cold** — one new Marlin shape with every cache empty;

and the trust look-ups (refsim.gpu_model.trust.trust) over the same mix, new and repeated.

The two new-point rates are measured interleaved (per-point, batched, per-point, ...) so a load
change on the shared machine hits both; the ratio batched / per-point is printed from the same run.

Also prints the calibration accuracy and leave-one-shape-out error so the numbers in
docs/perf_model.md can be regenerated from one run.
"""

from __future__ import annotations

import time

from refsim.gpu_model import calibrate, evaluate
from refsim.gpu_model import kernels as _kernels
from refsim.gpu_model.kernels import kernel_names, predict, predict_many
from refsim.gpu_model.shapes import unique_layer_shapes

TARGET_PER_S = 50_000


def workload():
    """The mix, less the points a kernel refuses as untrusted (awq-w4a16 from M = 2): 576 predictions."""
    jobs = []
    for gpu in ("a10", "rtx4090", "orin-agx-64gb"):
        for kernel in kernel_names():
            for n, k in unique_layer_shapes("llama-2-7b"):
                for m in (1, 2, 4, 8, 16, 32, 64, 128, 256):
                    if kernel == "awq-w4a16" and m >= 2:
                        continue
                    jobs.append((gpu, kernel, m, n, k))
    return jobs


def _trust_rates(jobs) -> None:
    """Trust look-ups per second over the mix: new (the look-up cache emptied; the regimes file
    already read) and repeated (a sweep or report asking again)."""
    try:
        from refsim.gpu_model import trust
    except ImportError:                  # a checkout without refsim.gpu_model.trust
        return
    trust.trust(*jobs[0])                # reads trust_regimes.json once
    rates = {}
    for name, clear in (("new", True), ("repeated", False)):
        best = 0.0
        for _ in range(5):
            if clear:
                trust._cached.cache_clear()
            t0 = time.perf_counter()
            for j in jobs:
                trust.trust(*j)
            best = max(best, len(jobs) / (time.perf_counter() - t0))
        rates[name] = best
    print(f"trust look-ups: new {rates['new']:,.0f}/s, repeated (cached) {rates['repeated']:,.0f}/s "
          f"(best of 5 passes of {len(jobs)})")


def _rate(jobs, reps, clear) -> float:
    best = 0.0
    for _ in range(reps):
        if clear:
            evaluate._cached.cache_clear()
        t0 = time.perf_counter()
        for j in jobs:
            predict(*j)
        best = max(best, len(jobs) / (time.perf_counter() - t0))
    return best


def groups(jobs):
    """The jobs as predict_many calls: {(gpu, kernel, n, k): [m, ...]} in job order."""
    out: dict = {}
    for gpu, kernel, m, n, k in jobs:
        out.setdefault((gpu, kernel, n, k), []).append(m)
    return [(gpu, kernel, ms, n, k) for (gpu, kernel, n, k), ms in out.items()]


def _batched_pass(calls) -> float:
    evaluate._cached.cache_clear()
    count = 0
    t0 = time.perf_counter()
    for gpu, kernel, ms, n, k in calls:
        count += len(predict_many(gpu, kernel, ms, n, k))
    return count / (time.perf_counter() - t0)


def main() -> None:
    jobs = workload()
    calls = groups(jobs)
    for j in jobs:                       # warm-up: fills the per-shape caches and the result cache
        predict(*j)
    for gpu, kernel, ms, n, k in calls:  # the batched results are the per-point ones, exactly
        got = predict_many(gpu, kernel, ms, n, k)
        want = [predict(gpu, kernel, m, n, k) for m in ms]
        assert got == want and repr(got) == repr(want), (gpu, kernel, n, k)
    repeated = _rate(jobs, 5, clear=False)
    fresh = batched = 0.0
    for _ in range(7):                   # interleaved: per-point and batched passes share the load
        fresh = max(fresh, _rate(jobs, 1, clear=True))
        batched = max(batched, _batched_pass(calls))
    for name, rate in (("repeated points (result cache)", repeated),
                       ("new points, warm per-shape caches", fresh),
                       (f"new points, batched ({len(calls)} calls)", batched)):
        print(f"{name:<36} {rate:>10,.0f} predictions/s (best of {5 if rate is repeated else 7} passes of {len(jobs)}; target >= "
              f"{TARGET_PER_S:,}: {'met' if rate >= TARGET_PER_S else 'not met'})")
    print(f"batched / per-point new points: {batched / fresh:.2f}x")
    _trust_rates(jobs)
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
