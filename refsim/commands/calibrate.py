"""``refsim calibrate``: measure the few per-GPU constants of the performance model on your own GPU.

    refsim calibrate --measure --base h100-sxm --out my-h100.json          # needs a GPU (refsim[gpu])
    refsim calibrate --results microbenchmarks.json --base h100-sxm --clock 1980 --out my-h100.json
    refsim predict --gpu-file my-h100.json --kernel marlin --m 16 --n 4096 --k 4096

``--measure`` runs the benchmarks of :mod:`refsim.gpu_model.measure` (an empty kernel, a streaming
read over sizes and occupancies, cold and warm: about half a minute); ``--results`` analyses a
recorded run instead (the same JSON). Either way :func:`refsim.gpu_model.microbench.fit` turns it
into the GPU's DRAM curve (bandwidth, latency, sharpness), launch costs (empty kernel, ramp), the
share of L2 a memset flush leaves dirty and the L2 bandwidth, and ``--out`` receives a GPU spec file
(:mod:`refsim.gpu_model.gpufile`): the ``--base`` row with those constants replaced, each with its
provenance. ``--clock`` is the SM clock the benchmark ran at in MHz (default: what the driver
reports with ``--measure``, the base row's sustained clock with ``--results``).
"""

from __future__ import annotations

import json
import math
from datetime import date

from refsim.commands import clock_arg


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "calibrate", help="measure the performance model's per-GPU constants and write a GPU spec file",
        description="Fits the DRAM curve, launch costs, dirty-flush share and L2 bandwidth of one GPU from "
        "microbenchmarks (run here with --measure, or a recorded run with --results) and writes a spec file "
        "that refsim predict --gpu-file and refsim sweep --gpu-file read.")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--measure", action="store_true", help="run the microbenchmarks on CUDA device 0")
    src.add_argument("--results", default=None, help="a recorded microbenchmark run (JSON) to analyse")
    p.add_argument("--base", required=True, help="the GPU of the table the file starts from (name or alias)")
    p.add_argument("--name", default=None, help="name of the calibrated GPU (default: BASE-calibrated)")
    p.add_argument("--clock", default=None, type=clock_arg, help="SM clock during the benchmark (1980, 1.98GHz)")
    p.add_argument("--out", required=True, help="GPU spec file to write (must not exist)")
    p.set_defaults(func=_run)


def _run(args) -> int:
    from pathlib import Path

    from refsim.errors import FormatRuleError
    from refsim.gpu_model import gpufile, microbench
    from refsim.gpu_model.specs import get_gpu

    base = get_gpu(args.base)
    out = Path(args.out)
    if out.exists():
        raise FormatRuleError(f"--out: must not exist (a spec file is never overwritten); got {args.out!r}")
    if args.measure:
        from refsim.gpu_model.measure import measure
        results = measure()
        how = f"refsim calibrate --measure on {results['device']['name']}, {date.today().isoformat()}"
        clock = args.clock if args.clock is not None else results["device"]["clock_khz"] * 1e3
    else:
        try:
            results = json.loads(Path(args.results).read_text(encoding="utf-8"))
        except OSError as err:
            raise FormatRuleError(f"--results: must be a readable JSON file; got {args.results!r} ({err.strerror})") from None
        except (UnicodeDecodeError, ValueError) as err:
            raise FormatRuleError(f"--results: must be UTF-8 JSON; got {err}") from None
        how = f"refsim calibrate --results {Path(args.results).name}"
        clock = args.clock if args.clock is not None else base.sustained_clock_hz
    if isinstance(clock, str):
        clock = base.clock_hz(clock)
    fit = microbench.fit(results, base.l2_bytes)
    values = microbench.spec_fields(fit, base.dram_peak_bytes_per_s, clock)
    prov = {key: ["microbenchmark", f"{how} (SM clock {clock / 1e6:g} MHz)"] for key in values}
    name = args.name or f"{base.name}-calibrated"
    gpufile.write_gpu_file(out, base.name, name, values, prov, measured=results)
    print(f"{name}: DRAM {fit.dram_bw_max / 1e12:.3f} TB/s, L0 {fit.dram_latency_s * 1e9:.0f} ns, sharpness "
          f"{fit.sharpness:.2f}; empty kernel {fit.empty_s * 1e6:.2f} us + ramp {fit.ramp_s * 1e6:.2f} us; "
          f"{fit.dirty_fraction:.0%} of L2 dirty after a flush; L2 {fit.l2_bytes_per_s / 1e12:.2f} TB/s "
          f"(fit within {100 * math.expm1(fit.max_abs_log_error):.1f} % on {fit.rows} reads)")
    print(f"wrote {out}: use refsim predict --gpu-file {out} ...")
    return 0
