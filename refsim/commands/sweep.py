"""``refsim sweep``: many predictions at once, written as CSV and one PNG per GPU.

    refsim sweep --gpu a10,rtx4090 --kernel marlin,cublas-fp16 --m 1..4096 --n 4096 --k 4096 --out sweep-a10

``--m``, ``--n``, ``--k`` take lists and ranges (``1,2,4``; ``1..4096`` doubles from 1 to 4096;
``128..512:128`` steps by 128; see :func:`refsim.gpu_model.sweep.parse_values`). ``--gpu`` and
``--kernel`` take comma-separated names. ``--out`` must be a new or empty folder (checked before
any work); it receives ``sweep.csv`` and ``sweep_<gpu>.png``. A progress bar appears when the
sweep takes longer than a second.
"""

from __future__ import annotations

import sys

from refsim.commands import add_condition_args, clock_arg


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "sweep", help="predict kernels over GPUs and M/N/K grids; write CSV and plots",
        description="Runs refsim.gpu_model's predictions over every combination and writes "
        "sweep.csv and one PNG per GPU (latency vs M, speedup over cublas-fp16, roofline).")
    p.add_argument("--gpu", required=True, help="GPU names, comma-separated (aliases accepted)")
    p.add_argument("--kernel", required=True, help="kernel families, comma-separated")
    p.add_argument("--m", required=True, help="batch / tokens: list or range, e.g. 1..4096")
    p.add_argument("--n", required=True, help="output features: list or range")
    p.add_argument("--k", required=True, help="input features (the reduction): list or range")
    p.add_argument("--bits", type=int, default=None, help="weight bit-width (kernel default if omitted)")
    p.add_argument("--group-size", type=int, default=None, help="quantization group size along K")
    p.add_argument("--clock", default="sustained", type=clock_arg,
                   help="SM clock: sustained (default), boost, base, or a frequency (1500, 1500MHz, 1.5GHz)")
    add_condition_args(p)
    p.add_argument("--out", required=True, help="output folder (new or empty)")
    p.add_argument("--no-plot", action="store_true", help="write the CSV only")
    p.set_defaults(func=_run)


def _run(args) -> int:
    from refsim.gpu_model import sweep as sw
    from refsim.io.output import atomic_output_dir

    ms = sw.parse_values(args.m, "m")
    ns = sw.parse_values(args.n, "n")
    ks = sw.parse_values(args.k, "k")
    gpus = [g for g in args.gpu.split(",") if g]
    kernels = [k for k in args.kernel.split(",") if k]
    with atomic_output_dir(args.out) as tmp:       # refuses an existing non-empty --out up front
        rows = sw.sweep(gpus, kernels, ms, ns, ks, bits=args.bits, group_size=args.group_size,
                        clock=args.clock, ecc=args.ecc, cache=args.cache, progress=sys.stderr.isatty())
        sw.write_csv(rows, tmp / "sweep.csv")
        pngs = [] if args.no_plot else sw.plot(rows, tmp)
    ok = sum(r.status == "ok" for r in rows)
    print(f"wrote {args.out}/sweep.csv: {len(rows)} points ({ok} predicted, {len(rows) - ok} refused by a "
          f"kernel rule)" + "".join(f"; {args.out}/{p.name}" for p in pngs))
    return 0
