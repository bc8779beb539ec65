"""Time check_kernel with default settings on each realistic bug kernel (and a correct port),
over several seeds: how long until the report, and whether the bug was caught.

    python bench/bench_harness.py [--seeds 0,1,2]
    python bench/bench_harness.py --layer      # Llama-2-7B layer sizes instead
    python bench/bench_harness.py --costs      # accuracy mode / bit-exact, refsim check / in-process

Prints one line per (kernel, seed): seconds to the report (or to a pass) and the verdict line.
The bug kernels live in tests/testing/harness_bug_kernels.py.

``--layer``: for each format, building one layer-sized case (``make``: the format's quantizers)
and emulating it, then ``check_kernel`` with the emulator as the kernel on those shapes
(``shapes=LAYER[fmt]``, ``max_size=2**30``, 2 drawn cases): the cost of testing a kernel at the
sizes it ships at (docs/harness.md, "Layer sizes").
"""

from __future__ import annotations

import argparse
import importlib.util
import time
from pathlib import Path

from refsim.testing import harness

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
    ("gptq correct port", "gptq", bugs.gptq_port),
    ("gptq v1 zeros read as v2", "gptq", lambda *i: bugs.gptq_port(*i, zero_plus_one=False)),
    ("gptq act-order g_idx ignored", "gptq", lambda *i: bugs.gptq_port(*i, ignore_g_idx=True)),
    ("gptq fp16 accumulator across slabs", "gptq", lambda *i: bugs.gptq_port(*i, accumulate="fp16")),
    ("gptq one fp32 FMA chain (legitimate)", "gptq", lambda *i: bugs.gptq_port(*i, accumulate="fp32_chain")),
    ("awq interleave ignored", "awq", lambda *i: bugs.awq_port(*i, interleave_ignored=True)),
]


LAYER = {   # Llama-2-7B projections (4096 <-> 11008), each format's decode / prefill batch
    "marlin": [{"m": 16, "k": 4096, "n": 11008, "group_size": 128}],
    "anyprec": [{"m": 1, "k": 4096, "n": 11008, "bits": 4}, {"m": 8, "k": 11008, "n": 4096, "bits": 3}],
    "atom": [{"m": 16, "k4": 4096, "n": 11008, "keeper": 128}],
    "mixed_2_4_16": [{"k": 4096, "n": 11008, "alpha": 0.25, "outlier_ratio": 0.005},
                     {"k": 11008, "n": 4096, "alpha": 0.25, "outlier_ratio": 0.005}],
    "gptq": [{"m": 1, "k": 4096, "n": 11008, "group_size": 128, "act_order": True}],
}


def accuracy_and_isolation() -> None:
    """Two costs measured in one run: accuracy mode (the exact product and its bound on every case)
    over bit-exact mode, and ``refsim check`` (the kernel in a process of its own, its inputs and
    output through a pipe on every call) over ``check_kernel`` in the same process, on the same
    kernel and seed."""
    import subprocess
    import sys
    import tempfile

    for fmt, kernel in (("gptq", bugs.gptq_port), ("anyprec", None)):
        if kernel is None:
            from refsim.testing.cases import FORMATS
            kernel = lambda *a, _s=FORMATS[fmt]: _s.emulate(a, "sm_80", 108)   # noqa: E731
        times = {}
        for mode in ("bitexact", "accuracy"):
            t0 = time.perf_counter()
            harness.check_kernel(kernel, fmt, seed=0, mode=mode, accumulation="fp16", order="any", progress=False)
            times[mode] = time.perf_counter() - t0
        print(f"{fmt:8s} accuracy mode {times['accuracy']:5.2f} s / bit-exact {times['bitexact']:5.2f} s = "
              f"{times['accuracy'] / times['bitexact']:4.2f}x", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "k.py"
        src.write_text("from refsim.emulator import anyprec_kernel as ek\n"
                       "def gemv(x, qweight, lut):\n    return ek.anyprec_gemv(x, qweight, lut, qweight.shape[0])\n")
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "refsim", "check", f"{src}:gemv", "--fmt", "anyprec", "--seed", "0"],
                       check=True, capture_output=True)
        cli = time.perf_counter() - t0
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import refsim.testing.harness as h; from refsim.emulator import "
                        "anyprec_kernel as ek; h.check_kernel(lambda x, q, l: ek.anyprec_gemv(x, q, l, q.shape[0]), "
                        "'anyprec', seed=0, progress=False)"], check=True, capture_output=True)
        inproc = time.perf_counter() - t0
    print(f"refsim check (kernel process) {cli:5.2f} s / check_kernel in one process {inproc:5.2f} s = "
          f"{cli / inproc:4.2f}x (both from a fresh interpreter)", flush=True)


def layer_sizes() -> None:
    from refsim.testing.cases import FORMATS
    for fmt, shapes in LAYER.items():
        spec = FORMATS[fmt]
        for shape in shapes:
            case = {**shape, "kind": "normal", "seed": 3}
            t0 = time.perf_counter()
            inputs = spec.make(case)
            t1 = time.perf_counter()
            spec.emulate(inputs, "sm_80", 108)
            t2 = time.perf_counter()
            print(f"{fmt:13s} {shape}: make {t1 - t0:5.2f} s, emulate {t2 - t1:5.2f} s", flush=True)
        t0 = time.perf_counter()
        res = harness.check_kernel(lambda *a, _s=spec: _s.emulate(a, "sm_80", 108), fmt, sms=108, seed=0,
                                   shapes=shapes, max_size=1 << 30, max_examples=2, progress=False)
        print(f"{fmt:13s} check_kernel on these shapes: {res.pinned} pinned + {res.drawn} drawn in "
              f"{time.perf_counter() - t0:5.1f} s", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--layer", action="store_true", help="layer-sized cases instead (see the docstring)")
    ap.add_argument("--costs", action="store_true", help="accuracy mode and refsim check's child process, as ratios")
    args = ap.parse_args()
    if args.layer:
        layer_sizes()
        return
    if args.costs:
        accuracy_and_isolation()
        return
    seeds = [int(x) for x in args.seeds.split(",")]
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
