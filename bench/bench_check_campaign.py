"""Cases per second of a check campaign on 1 and 2 workers (refsim.testing.campaign), measured in one run.

Run: python bench/bench_check_campaign.py [--cases N] [--fmt gptq]

A correct kernel (refsim's own emulator, standing in for the user's) checked on N drawn cases
serially, then on a dask LocalCluster of 1 and of 2 single-threaded workers; printed: wall seconds,
cases per second and the ratio to the serial run. The cluster's start-up is included (it is what a
user pays); on a 2-core machine that is shared, two workers cannot be twice one.
"""

from __future__ import annotations

import argparse
import sys
import time

from refsim.testing import harness


def _kernel(fmt):
    spec = harness.FORMATS[fmt]

    def kernel(*inputs):
        out = spec.emulate(inputs, "sm_80", 108)
        return getattr(out, "reference", out)
    return kernel


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--cases", type=int, default=60)
    p.add_argument("--fmt", default="gptq")
    args = p.parse_args(argv)
    kernel = _kernel(args.fmt)
    runs = [("serial", None), ("dask-local:1", "dask-local:1"), ("dask-local:2", "dask-local:2")]
    base = None
    print(f"{args.fmt}: {args.cases} drawn cases + the pinned ones")
    for label, executor in runs:
        t0 = time.perf_counter()
        res = harness.check_kernel(kernel, args.fmt, seed=0, max_examples=args.cases, executor=executor,
                                   progress=False)
        wall = time.perf_counter() - t0
        n = res.pinned + res.drawn
        base = base or wall
        print(f"  {label:>13}: {wall:6.1f} s, {n / wall:6.2f} cases/s, {base / wall:4.2f}x the serial run")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
