"""Time check_kernel with default settings on each realistic bug kernel (and a correct port),
over several seeds: how long until the report, and whether the bug was caught.

    python bench/bench_harness.py [--seeds 0,1,2]

Prints one line per (kernel, seed): seconds to the report (or to a pass) and the verdict line.
The bug kernels live in tests/emulator/harness_bug_kernels.py.
"""

from __future__ import annotations

import argparse
import importlib.util
import time
from pathlib import Path

from refsim.emulator import harness

_path = Path(__file__).resolve().parents[1] / "tests" / "emulator" / "harness_bug_kernels.py"
_spec = importlib.util.spec_from_file_location("harness_bug_kernels", _path)
bugs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bugs)

CASES = [
    ("marlin correct port", "marlin", lambda A, B, s: bugs.marlin_port(A, B, s)),
    ("marlin planned for 72 SMs", "marlin", lambda A, B, s: bugs.marlin_port(A, B, s, sms=72)),
    ("marlin k-warp reduce ((a0+a1)+a2)+a3", "marlin", lambda A, B, s: bugs.marlin_port(A, B, s, reduce_assoc="left")),
    ("marlin fp32 global reduction", "marlin", lambda A, B, s: bugs.marlin_port(A, B, s, global_fp32=True)),
    ("marlin last group's scale from previous", "marlin",
     lambda A, B, s: bugs.marlin_port(A, B, s, last_scale_from_previous=True)),
    ("marlin nibbles of a byte swapped", "marlin", lambda A, B, s: bugs.marlin_port(A, B, s, nibbles_swapped=True)),
    ("marlin fp32 accumulation", "marlin", lambda A, B, s: bugs.marlin_port(A, B, s, fp32_accumulate=True)),
    ("anyprec fp32 lane partials", "anyprec", bugs.anyprec_fp32_partials),
    ("mixed_2_4_16 outliers after fp16 rounding", "mixed_2_4_16", bugs.mixed_outliers_after_rounding),
    ("mma_m16n8k16 fp32 FFMA chain", "mma_m16n8k16", bugs.mma_fp32_chain),
    ("atom fp32 scale product", "atom", bugs.atom_fp32_scale_product),
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", default="0,1,2")
    seeds = [int(x) for x in ap.parse_args().seeds.split(",")]
    for name, fmt, kernel in CASES:
        for seed in seeds:
            t0 = time.perf_counter()
            try:
                res = harness.check_kernel(kernel, fmt, sms=108, seed=seed, progress=False)
                outcome = f"passed ({res.pinned} pinned + {res.drawn} drawn)"
            except harness.KernelMismatch as err:
                lines = str(err).splitlines()
                where = lines[0].split(" on ")[-1]
                verdict = next(x for x in lines if x.startswith("  verdict:")).strip()
                outcome = f"CAUGHT on {where}; {verdict[:110]}"
            print(f"{name:42s} seed {seed}: {time.perf_counter() - t0:5.1f} s  {outcome}", flush=True)


if __name__ == "__main__":
    main()
