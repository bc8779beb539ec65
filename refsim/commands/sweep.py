"""``refsim sweep``: many predictions at once, written as CSV and one PNG per GPU.

    refsim sweep --gpu a10,rtx4090 --kernel marlin,cublas-fp16 --m 1..4096 --shape 4096:4096 --shape 11008:4096 --out DIR
    refsim sweep --gpu h100 --kernel marlin --m 1..256 --model llama-2-7b --cache dirty --timing events --out DIR
    refsim sweep --gpu-file my-h100.json --kernel anyprec --bits 3 --m 1,4,8 --n 4096 --k 4096,11008 --out DIR

Shapes are (N, K) pairs: ``--shape N:K`` (repeatable), ``--model`` (a built-in model's distinct
linear shapes), or ``--n`` and ``--k`` lists whose every combination is taken. ``--m``, ``--n``,
``--k`` take lists and ranges (``1,2,4``; ``1..4096`` doubles from 1 to 4096; ``128..512:128``
steps by 128; :func:`refsim.gpu_model.sweep.parse_values`). ``--gpu`` and ``--kernel`` take
comma-separated names or aliases (unknown ones are refused, listing the names and aliases);
``--gpu-file`` a spec file from ``refsim calibrate``. ``--clock`` must lie in the card's range.
``--out`` must be a new or empty folder (checked before any work); it receives ``sweep.csv`` (times
in µs, the conditions in columns, what backs each prediction in ``trust``, ``trust_far_off`` and
``trust_statement``: refsim.gpu_model.trust; with ``--model`` the ``layer`` column names the model's
linears of each shape) and ``sweep_<gpu>.png``. A progress bar appears when the sweep
takes longer than a second.
"""

from __future__ import annotations

import sys

from refsim.commands import add_kernel_options, add_target_args


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "sweep", help="predict kernels over GPUs and M/N/K grids; write CSV and plots",
        description="Runs refsim.gpu_model's predictions over every combination and writes "
        "sweep.csv and one PNG per GPU (latency vs M, speedup over cublas-fp16, roofline).")
    add_target_args(p, many=True)
    p.add_argument("--m", required=True, help="batch / tokens: list or range, e.g. 1..4096")
    p.add_argument("--shape", action="append", default=None, help="one layer shape N:K (repeatable)")
    p.add_argument("--model", default=None, help="the linear shapes of a built-in model (e.g. llama-2-7b)")
    p.add_argument("--n", default=None, help="output features: list or range (every combination with --k)")
    p.add_argument("--k", default=None, help="input features (the reduction): list or range")
    add_kernel_options(p)
    p.add_argument("--out", required=True, help="output folder (new or empty)")
    p.add_argument("--no-plot", action="store_true", help="write the CSV only")
    p.set_defaults(func=_run)


def _run(args) -> int:
    from refsim.errors import FormatRuleError
    from refsim.gpu_model import sweep as sw
    from refsim.gpu_model.shapes import shape_layers, unique_layer_shapes
    from refsim.io.output import atomic_output_dir

    given = [name for name, v in (("--shape", args.shape), ("--model", args.model), ("--n/--k", args.n or args.k))
             if v]
    if len(given) != 1:
        raise FormatRuleError(f"shapes: give exactly one of --shape N:K (repeatable), --model NAME or --n with --k; "
                              f"got {given or 'none'}")
    layers = None
    if args.shape:
        shapes = [sw.parse_shape(t) for t in args.shape]
    elif args.model:
        shapes = unique_layer_shapes(args.model)
        layers = shape_layers(args.model)
    else:
        if args.n is None or args.k is None:
            raise FormatRuleError(f"n, k: --n and --k go together; got n={args.n!r}, k={args.k!r}")
        shapes = sw.grid_shapes(sw.parse_values(args.n, "n"), sw.parse_values(args.k, "k"))
    ms = sw.parse_values(args.m, "m")
    if args.gpu_file is not None:
        from refsim.gpu_model.gpufile import load_gpu_file
        gpus = [load_gpu_file(args.gpu_file)]
    else:
        gpus = [g for g in args.gpu.split(",") if g]
    kernels = [k for k in args.kernel.split(",") if k]
    with atomic_output_dir(args.out) as tmp:       # refuses an existing non-empty --out up front
        rows = sw.sweep(gpus, kernels, ms, shapes, bits=args.bits, group_size=args.group_size, clock=args.clock,
                        ecc=args.ecc, cache=args.cache, timing=args.timing, progress=sys.stderr.isatty(),
                        layers=layers)
        sw.write_csv(rows, tmp / "sweep.csv")
        pngs = [] if args.no_plot else sw.plot(rows, tmp)
    ok = sum(r.status == "ok" for r in rows)
    valid = sum(r.trust == "validated" for r in rows)
    far = sum(r.trust_far_off for r in rows)
    print(f"wrote {args.out}/sweep.csv: {len(rows)} points ({ok} predicted, {len(rows) - ok} refused by a "
          f"kernel rule or as untrusted; trust: {valid} validated on a measured or published table, {ok - valid} "
          f"unvalidated, {far} far off (columns trust, trust_far_off, trust_statement))"
          + "".join(f"; {args.out}/{p.name}" for p in pngs))
    return 0
