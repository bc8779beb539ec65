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
``roofline_us``, ``fraction_of_roofline``, ``terms_us``, ``clock_text``, ``trust``, ...). ``--model`` sums the model's linear layers (per block × layers) instead of one
(n, k) problem.

Every prediction says what backs it (refsim.gpu_model.trust): ``trust`` lines "validated on
<table> (<regime>): median/max error there" and the error at the nearest measured M, or
"unvalidated: ..." with the tables that exist for the kernel; the known deviations that apply; the
GPU constants that are estimates; "FAR OFF" where rows are off by more than 2x. The clock is
printed with the provenance of its number ("sustained clock 2040 MHz (estimated)"). A kernel model
known to be far off for the problem refuses: "no trustworthy model: ..." on stderr, exit 2.
"""

from __future__ import annotations

import json
import sys

from refsim.commands import add_kernel_options, add_target_args, positive_int


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "predict", help="predict a quantized GEMV/GEMM kernel's latency on a GPU",
        description="Analytical latency model (refsim.gpu_model): bytes, tensor/ALU/shared-memory "
        "time, waves, launch cost and the binding bottleneck.")
    add_target_args(p, many=False)
    p.add_argument("--m", type=positive_int, required=True, help="batch / tokens (M)")
    p.add_argument("--n", type=positive_int, default=None, help="output features (N)")
    p.add_argument("--k", type=positive_int, default=None, help="input features, the reduction (K)")
    p.add_argument("--model", default=None, help="sum a built-in model's linear layers (e.g. llama-2-7b)")
    add_kernel_options(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=_run)


def _run(args) -> int:
    from refsim.errors import FormatRuleError
    from refsim.gpu_model.layers import predict_layers

    if args.model is None:
        if args.n is None or args.k is None:
            raise FormatRuleError("n, k: --n and --k are required unless --model is given; got "
                                  f"n={args.n}, k={args.k}")
        layers = [("layer", args.n, args.k, 1)]
    else:
        layers = args.model
    gpu = args.gpu
    if args.gpu_file is not None:
        from refsim.gpu_model.gpufile import load_gpu_file
        gpu = load_gpu_file(args.gpu_file)
    res = predict_layers(gpu, args.kernel, args.m, layers, args.bits, args.group_size,
                         clock=args.clock, ecc=args.ecc, cache=args.cache, timing=args.timing)
    worst = res.slowest.breakdown
    from refsim.gpu_model.specs import get_gpu
    from refsim.gpu_model.trust import clock_label, trust
    spec = gpu if args.gpu_file is not None else get_gpu(res.gpu)
    ecc = args.ecc or spec.ecc
    cond = {"clock": args.clock, "ecc": args.ecc, "cache": args.cache, "timing": args.timing}
    trusts = [trust(gpu, args.kernel, args.m, r.n, r.k, args.bits, **cond) for r in res.layers]
    backing = trusts[[r is res.slowest for r in res.layers].index(True)]
    far_off = any(t.far_off for t in trusts)
    out = {
        "gpu": res.gpu, "kernel": res.kernel, "m": args.m, "n": args.n, "k": args.k,
        "bits": worst.bits, "group_size": args.group_size, "model": args.model, "clock": args.clock,
        "ecc": ecc, "cache": args.cache, "timing": args.timing,
        "latency_us": res.latency_s * 1e6, "bottleneck": res.bottleneck,
        "cublas_fp16_latency_us": res.cublas_fp16_s * 1e6, "speedup_vs_cublas_fp16": res.speedup_vs_cublas_fp16,
        "roofline_us": res.roofline_s * 1e6, "fraction_of_roofline": res.fraction_of_roofline,
        "terms_us": {key: v * 1e6 for key, v in res.terms.items()},
        "clock_text": clock_label(spec, args.clock),
        "trust": dict(backing.as_dict(), far_off=far_off),
    }
    if args.model:
        out["layers"] = [{"name": r.name, "n": r.n, "k": r.k, "count": r.count,
                          "latency_us": r.breakdown.latency_us, "bottleneck": r.breakdown.bottleneck,
                          "trust": t.as_dict()} for r, t in zip(res.layers, trusts)]
    else:
        out.update({"bytes_dram": worst.bytes_dram, "ctas": worst.ctas, "waves": worst.waves,
                    "launches": worst.launches, "notes": worst.notes})
    if args.json:
        print(json.dumps(out))
        return 0
    what = f"{args.model} linear layers" if args.model else f"M={args.m} N={args.n} K={args.k}"
    total, roof = res.latency_s, res.roofline_s
    lines = [f"{res.kernel} on {res.gpu} ({out['clock_text']}, ECC {ecc}, {args.cache} L2, {args.timing} timing), "
             f"{what}, bits={out['bits']}",
             f"  latency      {format_time(total)}",
             f"  cublas-fp16  {format_time(res.cublas_fp16_s)}  -> speedup {res.speedup_vs_cublas_fp16:.2f}x",
             f"  roofline     {format_time(roof)}  (plain DRAM/tensor bound: the model reaches "
             f"{100 * roof / total:.0f} % of it" + ("; a warm L2 serves the bytes faster than DRAM)" if roof > total
                                                    else ")"),
             f"  bottleneck   {res.bottleneck}",
             "  breakdown (dram/l2/tensor/alu/smem/latency overlap, launch/tail/serial add):"]
    for key in ("dram", "l2", "tensor", "alu", "smem", "latency", "launch", "tail", "serial"):
        if key in res.terms:
            lines.append(f"    {key:<8} {format_time(res.terms[key]):>12}")
    if not args.model and worst.notes:
        lines.append(f"  notes        {worst.notes}")
    statements = dict.fromkeys(line for t in trusts for line in t.lines())     # distinct, in layer order
    for line in statements:
        lines.append(f"  trust        {line}")
    if args.model:
        lines.append("  per layer (one block x layers):")
        for r in res.layers:
            lines.append(f"    {r.name:<10} {r.n:>6} x {r.k:<6} x{r.count:<4} "
                         f"{format_time(r.breakdown.latency_s):>12}  {r.breakdown.bottleneck}")
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
