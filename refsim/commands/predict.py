"""``refsim predict``: latency of one kernel on one GPU from the analytical model.

    refsim predict --gpu a10 --kernel marlin --m 16 --n 4096 --k 4096 [--bits 4] [--group-size 128] [--json]
    refsim predict --gpu rtx4090 --kernel anyprec --bits 3 --m 1 --model llama-2-7b

m = batch/tokens, n = output features, k = input features (the papers write weights as n × k).
Human output: latency in the unit that fits (µs, ms or s), speedup over cublas-fp16 on the same
problem, the share of the plain roofline bound reached (DRAM bytes / peak bandwidth vs FLOPs / peak
tensor rate, the LLM-Viewer-style bound), the breakdown and the model's notes (why a path was
chosen). ``--clock`` takes base, boost, sustained or a frequency (1500, 1500MHz, 1.5GHz);
``--ecc on|off`` (default: the card's own state) and ``--cache cold|warm`` (default cold, as Nsight
Compute measures) are the other measurement conditions (refsim.gpu_model.conditions).
``--json`` prints exactly one JSON object (``latency_us``, ``bottleneck``, ``speedup_vs_cublas_fp16``,
``roofline_us``, ``fraction_of_roofline``, ``terms_us``, ...). ``--model`` sums the model's linear layers (per block × layers) instead of one
(n, k) problem.
"""

from __future__ import annotations

from refsim.commands import add_condition_args, clock_arg, positive_int, positive_float  # noqa: F401

import json
import sys


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "predict", help="predict a quantized GEMV/GEMM kernel's latency on a GPU",
        description="Analytical latency model (refsim.gpu_model): bytes, tensor/ALU/shared-memory "
        "time, waves, launch cost and the binding bottleneck.")
    p.add_argument("--gpu", required=True, help="GPU name (unknown names list the valid ones)")
    p.add_argument("--kernel", required=True, help="kernel family (unknown names list the valid ones)")
    p.add_argument("--m", type=positive_int, required=True, help="batch / tokens (M)")
    p.add_argument("--n", type=positive_int, default=None, help="output features (N)")
    p.add_argument("--k", type=positive_int, default=None, help="input features, the reduction (K)")
    p.add_argument("--bits", type=positive_int, default=None, help="weight bit-width (kernel default if omitted)")
    p.add_argument("--group-size", type=positive_int, default=None, help="quantization group size along K")
    p.add_argument("--model", default=None, help="sum a built-in model's linear layers (e.g. llama-2-7b)")
    p.add_argument("--clock", default="sustained", type=clock_arg,
                   help="SM clock: sustained (default), boost, base, or a frequency (1500, 1500MHz, 1.5GHz)")
    add_condition_args(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=_run)


def _run(args) -> int:
    from refsim.errors import FormatRuleError
    from refsim.gpu_model.kernels import predict
    from refsim.gpu_model.roofline import dram_roofline_s
    from refsim.gpu_model.shapes import get_model
    from refsim.gpu_model.specs import get_gpu

    gpu = get_gpu(args.gpu)
    if args.model is None:
        if args.n is None or args.k is None:
            raise FormatRuleError("n, k: --n and --k are required unless --model is given; got "
                                  f"n={args.n}, k={args.k}")
        problems = [("layer", args.n, args.k, 1)]
        layers = 1
    else:
        spec = get_model(args.model)
        problems = spec.per_block()
        layers = spec.layers
    total = base = roof = 0.0
    terms: dict = {}
    per_layer = []
    worst = None
    for name, n, k, count in problems:
        cond = {"clock": args.clock, "ecc": args.ecc, "cache": args.cache}
        bd = predict(gpu.name, args.kernel, args.m, n, k, bits=args.bits, group_size=args.group_size, **cond)
        fp = predict(gpu.name, "cublas-fp16", args.m, n, k, **cond)
        mult = count * layers
        total += bd.latency_s * mult
        base += fp.latency_s * mult
        roof += dram_roofline_s(bd.bytes_dram, bd.flops, gpu) * mult
        for key, v in bd.terms.items():
            terms[key] = terms.get(key, 0.0) + v * mult
        per_layer.append({"name": name, "n": n, "k": k, "count": mult, "latency_us": bd.latency_us,
                          "bottleneck": bd.bottleneck})
        if worst is None or bd.latency_s * mult > worst[0]:
            worst = (bd.latency_s * mult, bd)
    bottleneck = worst[1].bottleneck if args.model else worst[1].bottleneck
    out = {
        "gpu": gpu.name, "kernel": args.kernel, "m": args.m, "n": args.n, "k": args.k,
        "bits": worst[1].bits, "group_size": args.group_size, "model": args.model, "clock": args.clock,
        "ecc": args.ecc or gpu.ecc, "cache": args.cache,
        "latency_us": total * 1e6, "bottleneck": bottleneck,
        "cublas_fp16_latency_us": base * 1e6, "speedup_vs_cublas_fp16": base / total,
        "roofline_us": roof * 1e6, "fraction_of_roofline": roof / total,
        "terms_us": {key: v * 1e6 for key, v in terms.items()},
    }
    if args.model:
        out["layers"] = per_layer
    else:
        out.update({"bytes_dram": worst[1].bytes_dram, "ctas": worst[1].ctas, "waves": worst[1].waves,
                    "launches": worst[1].launches, "notes": worst[1].notes})
    if args.json:
        print(json.dumps(out))
        return 0
    what = f"{args.model} linear layers" if args.model else f"M={args.m} N={args.n} K={args.k}"
    clock = args.clock if isinstance(args.clock, str) else f"{args.clock / 1e6:g} MHz"
    lines = [f"{args.kernel} on {gpu.name} ({clock} clock, ECC {out['ecc']}, {args.cache} L2), {what}, "
             f"bits={out['bits']}",
             f"  latency      {format_time(total)}",
             f"  cublas-fp16  {format_time(base)}  -> speedup {out['speedup_vs_cublas_fp16']:.2f}x",
             f"  roofline     {format_time(roof)}  (plain DRAM/tensor bound: the model reaches "
             f"{100 * roof / total:.0f} % of it" + ("; a warm L2 serves the bytes faster than DRAM)" if roof > total
                                                    else ")"),
             f"  bottleneck   {bottleneck}",
             "  breakdown (dram/l2/tensor/alu/smem/latency overlap, launch/tail/serial add):"]
    for key in ("dram", "l2", "tensor", "alu", "smem", "latency", "launch", "tail", "serial"):
        if key in terms:
            lines.append(f"    {key:<8} {format_time(terms[key]):>12}")
    if not args.model and worst[1].notes:
        lines.append(f"  notes        {worst[1].notes}")
    if args.model:
        lines.append("  per layer (one block x layers):")
        for row in per_layer:
            lines.append(f"    {row['name']:<10} {row['n']:>6} x {row['k']:<6} x{row['count']:<4} "
                         f"{format_time(row['latency_us'] * 1e-6):>12}  {row['bottleneck']}")
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


def format_time(seconds: float) -> str:
    """A duration in the unit that fits: ``12.34 us`` below 1 ms, ``1.234 ms`` below 1 s, else
    ``1.234 s`` (4 significant digits; ASCII "us" so every terminal shows it)."""
    if seconds < 1e-3:
        return f"{seconds * 1e6:.2f} us"
    if seconds < 1.0:
        return f"{seconds * 1e3:.3f} ms"
    return f"{seconds:.3f} s"
