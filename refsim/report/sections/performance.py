"""``refsim report`` performance section: Llama-2-7B linear layers on A10, RTX 4090 and Jetson AGX
Orin for every kernel family and batch 1..256 — latency, speedup over cuBLAS FP16, the batch at
which each kernel turns compute-bound, and a roofline PNG per GPU (matplotlib if importable; the
tables are written either way). Checks: calibration accuracy and paper anchors (prediction speed is
measured by ``bench/bench_predict.py``, never asserted here)."""

from __future__ import annotations

from pathlib import Path

from refsim.report import Check

TITLE = "Performance model (gpu_model)"
ORDER = 70

GPUS = ("a10", "rtx4090", "orin-agx-64gb")
BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
COMPUTE = {"tensor", "alu", "smem"}


def _kernels():
    from refsim.gpu_model.kernels import kernel_names
    return kernel_names()


def _predict(gpu, kernel, m, n, k):
    from refsim.errors import RefsimError
    from refsim.gpu_model.kernels import predict
    try:
        return predict(gpu, kernel, m, n, k)
    except RefsimError:
        return None


def _block(gpu, kernel, m):
    """Sum over one Llama-2-7B block's linear layers; None if any layer is unsupported."""
    from refsim.gpu_model.shapes import get_model
    total = 0.0
    worst = None
    for _, n, k, count in get_model("llama-2-7b").linears:
        bd = _predict(gpu, kernel, m, n, k)
        if bd is None:
            return None, None
        total += bd.latency_s * count
        if worst is None or bd.latency_s > worst.latency_s:
            worst = bd
    return total, worst


# ---- checks ------------------------------------------------------------------------------------
def _check_calibration():
    from refsim.gpu_model import calibrate
    acc = calibrate.accuracy()
    assert acc["model_median_ape"] <= 0.08 and acc["model_max_ape"] <= 0.25, acc
    return (f"model median APE {acc['model_median_ape']:.1%}, max {acc['model_max_ape']:.1%} on "
            f"{acc['n_rows']} rows; plain DRAM roofline {acc['baseline_median_ape']:.1%} / {acc['baseline_max_ape']:.1%}")


def _check_marlin_anchor():
    from refsim.gpu_model.kernels import predict
    s = [predict("a10", "cublas-fp16", m, 72 * 1024, 18 * 1024).latency_s
         / predict("a10", "marlin", m, 72 * 1024, 18 * 1024, group_size=128).latency_s for m in (1, 16, 32, 128)]
    assert all(3.5 < x < 3.95 for x in s[:3]), s
    return "A10 72k x 18k speedup over FP16 at batch 1/16/32/128: " + " / ".join(f"{x:.2f}x" for x in s) + \
        " (paper: ~3.87x to 16-32, ~1.5x at 128)"


def _check_atom_anchor():
    from refsim.gpu_model.kernels import predict
    measured = {16: 26.7, 64: 27.2, 256: 27.5, 512: 31.5, 1024: 54.5, 2048: 96.3, 4096: 177.8}
    errs = {m: predict("rtx4090", "atom-w4a4", m, 4096, 4096).latency_us / t - 1 for m, t in measured.items()}
    assert max(abs(e) for e in errs.values()) < 0.2, errs
    sp = predict("rtx4090", "cublas-fp16", 512, 4096, 4096).latency_s / predict("rtx4090", "atom-w4a4", 512, 4096, 4096).latency_s
    return ("vs Atom NVBench (4090, 4096x4096): " + ", ".join(f"b{m} {e:+.0%}" for m, e in errs.items())
            + f"; speedup over FP16 at 512: {sp:.2f}x (paper 3.42x)")


def _check_reconcile():
    # the cycle simulation and the analytical model read one loop description per kernel
    # (refsim.gpu_model.loop.Loop: body, prefetch); their inner-loop times must agree within a third
    from refsim.gpu_model import cycle
    cases = (("rtx4070-laptop", "anyprec", 1, 4096, 4096, 3, "base"), ("rtx4090", "marlin", 1, 4096, 4096, 4, "sustained"))
    parts = []
    for gpu, kernel, m, n, k, bits, clock in cases:
        r = cycle.reconcile(gpu, kernel, m, n, k, bits=bits, clock=clock)
        assert 0.75 < r["ratio"] < 1.33, (gpu, kernel, r)
        parts.append(f"{kernel} {gpu} M={m} {n}x{k}: cycle/analytical {r['ratio']:.2f} "
                     f"(prefetch {'yes' if r['prefetch'] else 'no'}, {r['warps_per_smsp']} warps/SMSP)")
    return "cycle.reconcile(): " + "; ".join(parts)


def checks() -> list[Check]:
    return [Check("calibration accuracy (4070 Laptop, base clock, cold L2)", _check_calibration),
            Check("Marlin paper anchor (A10)", _check_marlin_anchor),
            Check("Atom NVBench anchor (RTX 4090)", _check_atom_anchor),
            Check("cycle model vs analytical model (same loop structure)", _check_reconcile)]


# ---- markdown ----------------------------------------------------------------------------------
def _roofline_png(gpu: str, out_dir: Path) -> str | None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib import ticker
    except ImportError:
        return None
    from refsim.gpu_model.specs import get_gpu
    g = get_gpu(gpu)
    n, k = 11008, 4096
    fig, ax = plt.subplots(figsize=(7, 4.5))
    xs = [2 ** (i / 4) for i in range(-8, 52)]
    bw = g.dram_eff_bytes_per_s
    for kind, style in (("fp16_f32acc", "-"), ("int8", "--"), ("int4", ":")):
        peak = g.tensor_flops(kind)
        if peak:
            ax.plot(xs, [min(bw * x, peak) / 1e12 for x in xs], style, color="black", lw=1,
                    label=f"roof {kind} ({peak / 1e12:.0f} T)")
    for kernel in _kernels():
        pts = [(bd.intensity_flop_per_byte, bd.flops / bd.latency_s / 1e12)
               for m in BATCHES if (bd := _predict(gpu, kernel, m, n, k)) is not None]
        if pts:
            ax.plot(*zip(*pts), "o-", ms=3, lw=0.8, label=kernel)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    # plain-text tick labels: the default log formatters typeset every label with mathtext, and
    # tight_layout renders the figure once more to measure it (issue 13: 7-11 s for three PNGs)
    plain = ticker.FuncFormatter(lambda v, _: f"{v:g}")
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(plain)
        axis.set_minor_locator(ticker.NullLocator())        # no minor tick artists to build
    ax.xaxis.set_major_locator(ticker.LogLocator(base=2, numticks=9))
    ax.grid(True, which="major", lw=0.3, alpha=0.5)
    ax.set_xlabel("arithmetic intensity (FLOP per DRAM byte)")
    ax.set_ylabel("achieved TFLOP/s (2·M·N·K / latency)")
    ax.set_title(f"{gpu}: {n} x {k} layer, batch 1..256")
    ax.legend(fontsize=6, loc="lower right")
    fig.subplots_adjust(left=0.1, right=0.98, bottom=0.11, top=0.93)   # fixed margins, no layout pass
    name = f"roofline_{gpu}.png"
    fig.savefig(out_dir / name, dpi=110)
    plt.close(fig)
    return name


def markdown(out_dir) -> str:
    from refsim.gpu_model.shapes import get_model
    out_dir = Path(out_dir)
    kernels = _kernels()
    shapes = ", ".join(f"{name} {n}x{k}" for name, n, k, _ in get_model("llama-2-7b").linears)
    lines = ["Analytical model (refsim.gpu_model), sustained clocks, cold L2. One Llama-2-7B transformer "
             f"block's linear layers ({shapes}); default bits/groups per kernel (anyprec 4-bit, marlin "
             "per-channel, twobit-mixed 2/4 + 0.2 % outliers). n/a = the kernel does not support a shape "
             "(its rule is raised by `refsim predict`).", ""]
    for gpu in GPUS:
        head = "| kernel | " + " | ".join(f"b{m}" for m in BATCHES) + " | compute-bound from |"
        sep = "|---|" + "---:|" * len(BATCHES) + "---|"
        lat, spd = [head, sep], [head, sep]
        base = {m: _block(gpu, "cublas-fp16", m)[0] for m in BATCHES}
        for kernel in kernels:
            cells_l, cells_s, turn = [], [], None
            for m in BATCHES:
                t, worst = _block(gpu, kernel, m)
                if t is None:
                    cells_l.append("n/a")
                    cells_s.append("n/a")
                    continue
                cells_l.append(f"{t * 1e6:.1f}")
                cells_s.append(f"{base[m] / t:.2f}x")
                if turn is None and worst.bottleneck in COMPUTE:
                    turn = f"b{m} ({worst.bottleneck})"
            lat.append(f"| {kernel} | " + " | ".join(cells_l) + f" | {turn or '> b256'} |")
            spd.append(f"| {kernel} | " + " | ".join(cells_s) + f" | {turn or '> b256'} |")
        lines += [f"### {gpu}: latency per block (µs)", ""] + lat + ["", f"### {gpu}: speedup over cublas-fp16", ""] + spd + [""]
        png = _roofline_png(gpu, out_dir)
        lines += [f"![roofline {gpu}]({png})" if png else "(matplotlib not importable: roofline plot skipped)", ""]
    lines.append("'compute-bound from' = smallest batch at which the slowest layer's binding term is tensor, "
                 "ALU or shared memory.")
    return "\n".join(lines)
