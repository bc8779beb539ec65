"""``refsim report`` performance section: Llama-2-7B linear layers on A10, RTX 4090 and Jetson AGX
Orin for every kernel family and batch 1..256 — latency, speedup over cuBLAS FP16, the batch at
which each kernel turns compute-bound (cells where the latency drops with batch or the plan switches
carry a numbered note saying why), and the pictures: per GPU latency / speedup / roofline vs batch
(the ``refsim sweep`` plot) and predicted vs measured on every GPU with measured rows. Checks: calibration accuracy and paper anchors (prediction speed is
measured by ``bench/bench_predict.py``, never asserted here)."""

from __future__ import annotations

import functools
import re
from pathlib import Path

from refsim.report import Check

TITLE = "Performance model (gpu_model)"
ORDER = 70

GPUS = ("a10", "rtx4090", "orin-agx-64gb")
BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
PLOT_GPU = "a10"        # the one GPU whose sweep is drawn in the report (the Marlin paper's GPU)
COMPUTE = {"tensor", "alu", "smem"}


def _kernels():
    from refsim.gpu_model.kernels import kernel_names
    return kernel_names()


@functools.lru_cache(maxsize=None)
def _layer(gpu, kernel, n, k) -> dict:
    """{m: Breakdown or None (the kernel refuses)} for every batch of :data:`BATCHES` on one layer
    shape: one ``kernels.predict_many`` call (validated once, per-shape work shared; each entry equals
    ``predict(gpu, kernel, m, n, k)``); cached: a Llama block repeats shapes (q/k/v/o are one
    4096 x 4096 problem), so 7 layers are 3 calls."""
    from refsim.errors import RefsimError
    from refsim.gpu_model.kernels import predict_many
    out = predict_many(gpu, kernel, BATCHES, n, k, errors="return")
    return {m: None if isinstance(bd, RefsimError) else bd for m, bd in zip(BATCHES, out)}


def _predict(gpu, kernel, m, n, k):
    """predict() or None where the kernel refuses the shape (batches of :data:`BATCHES` from
    :func:`_layer`)."""
    if m in BATCHES:
        return _layer(gpu, kernel, n, k)[m]
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
    # the paper's "72k x 18k" matrix as its bench builds it: (k, n) = (4*256*72, 256*72); ECC off as the
    # authors ran the A10 (refsim/data/timings/published.csv, marlin_artifact README)
    n, k = 256 * 72, 4 * 256 * 72
    s = [predict("a10", "cublas-fp16", m, n, k, ecc="off").latency_s
         / predict("a10", "marlin", m, n, k, group_size=128, ecc="off").latency_s for m in (1, 16, 32, 128)]
    assert all(3.5 < x < 3.95 for x in s[:3]), s
    return "A10 (ECC off) N=18432 K=73728 speedup over FP16 at batch 1/16/32/128: " + \
        " / ".join(f"{x:.2f}x" for x in s) + " (paper: ~3.87x to 16-32, ~1.5x at 128)"


def _check_atom_anchor():
    from refsim.gpu_model.kernels import predict
    measured = {16: 26.7, 64: 27.2, 256: 27.5, 512: 31.5, 1024: 54.5, 2048: 96.3, 4096: 177.8}
    errs = {m: predict("rtx4090", "atom-w4a4", m, 4096, 4096).latency_us / t - 1 for m, t in measured.items()}
    assert max(abs(e) for e in errs.values()) < 0.2, errs
    sp = predict("rtx4090", "cublas-fp16", 512, 4096, 4096).latency_s / predict("rtx4090", "atom-w4a4", 512, 4096, 4096).latency_s
    return ("vs Atom NVBench (4090, 4096x4096): " + ", ".join(f"b{m} {e:+.0%}" for m, e in errs.items())
            + f"; speedup over FP16 at 512: {sp:.2f}x (paper 3.42x)")


def _check_measured():
    # the H100 tables (refsim/data/timings/h100_*.csv) under their conditions; bimodal rows not counted
    from refsim.gpu_model import measured
    summary = measured.summary(measured.compare())
    assert all(v["refused"] == 0 for v in summary.values()), summary     # every kernel the H100 ran
    assert summary[("h100-sxm", "atom-w4a4", "dirty")]["max"] < 0.08, summary
    return "H100 SXM: " + "; ".join(f"{k} {c} {v['rows']} rows median {v['median']:.1%} max {v['max']:.1%}"
                                    for (_, k, c), v in summary.items())


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
            Check("measured H100 tables (cold = memset-flushed L2, warm; CUDA events)", _check_measured),
            Check("cycle model vs analytical model (same loop structure)", _check_reconcile)]


# ---- markdown ----------------------------------------------------------------------------------
def _sweep_png(gpu: str, out_dir: Path) -> str:
    """Latency, speedup over cublas-fp16 and roofline vs batch for the 11008 x 4096 layer
    (:func:`refsim.gpu_model.sweep.plot`, the same picture ``refsim sweep`` draws)."""
    from refsim.gpu_model import sweep as sw
    rows = sw.sweep([gpu], _kernels(), list(BATCHES), [(11008, 4096)], progress=False)
    (path,) = sw.plot(rows, out_dir, title=f"{gpu}: 11008 x 4096 layer, batch 1..256 (sustained clock, cold L2)")
    return path.name


def _measured_png(out_dir: Path) -> tuple[str, str]:
    """Predicted vs measured latency on every GPU with measured rows (the H100 tables, the papers'
    published latencies, the calibration table), one log-log panel per GPU with the 1:1 line and a
    +-25 % band; returns (file name, caption with median / max |error| per GPU)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib import ticker

    from refsim.gpu_model import measured
    panels = measured.predicted_vs_measured()
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 4.3))
    plain = ticker.FuncFormatter(lambda v, _: f"{v:g}")
    caption = []
    for ax, (gpu, pts) in zip(axes, panels.items()):
        med, worst, n = measured.error_stats(pts)
        sources = sorted({s for _, s, _, _ in pts})
        for kernel in sorted({k for k, _, _, _ in pts}):
            sel = [(m, p) for k, _, m, p in pts if k == kernel]
            ax.plot([m for m, _ in sel], [p for _, p in sel], "o", ms=3, label=kernel, mfc="none")
        lo = min(min(m, p) for _, _, m, p in pts) / 1.3
        hi = max(max(m, p) for _, _, m, p in pts) * 1.3
        ax.plot([lo, hi], [lo, hi], "-", color="black", lw=0.8)
        ax.fill_between([lo, hi], [lo * 0.75, hi * 0.75], [lo * 1.25, hi * 1.25], color="grey", alpha=0.15, lw=0)
        ax.set_xscale("log")
        ax.set_yscale("log")
        for axis in (ax.xaxis, ax.yaxis):
            axis.set_major_locator(ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0), numticks=10))
            axis.set_major_formatter(plain)
            axis.set_minor_locator(ticker.NullLocator())
        ax.set_title(f"{gpu}: {n} rows, median {med:.1%}, max {worst:.0%}", fontsize=9)
        ax.set_xlabel("measured latency (µs)", fontsize=9)
        ax.grid(True, lw=0.3, alpha=0.5)
        ax.legend(fontsize=7, loc="upper left")
        caption.append(f"{gpu} ({', '.join(sources)}): {n} rows, median {med:.1%}, max {worst:.1%}")
    axes[0].set_ylabel("predicted latency (µs)", fontsize=9)
    fig.subplots_adjust(left=0.05, right=0.99, bottom=0.13, top=0.9, wspace=0.22)
    name = "predicted_vs_measured.png"
    fig.savefig(out_dir / name, dpi=90, pil_kwargs={"compress_level": 1})   # fast zlib level: same pixels
    plt.close(fig)
    return name, "; ".join(caption)


def _footnote(prev, cur, m_prev, m):
    """Why a cell looks surprising, or None: the block's latency drops with batch, or the slowest
    layer switches plan (tile, split, launches) between batch ``m_prev`` and ``m``."""
    (t0, w0), (t1, w1) = prev, cur
    why = []
    if t1 < t0:
        why.append(f"latency drops from b{m_prev} to b{m} ({t0 * 1e6:.1f} → {t1 * 1e6:.1f} µs)")
    p0, p1 = _path(w0.notes), _path(w1.notes)
    if p0 != p1:
        why.append(f"from b{m_prev} to b{m} the slowest layer switches path: {' '.join(p0) or '-'} → "
                   f"{' '.join(p1) or '-'} ({w1.bottleneck}-bound)")
    return "; ".join(why) or None


_PATH_TOKEN = re.compile(r"tile \d+x\d+|dequant kernel \+ cuBLAS FP16|multi_row=\d+|ksplit=\d+|split\w*=\d+|\((?:regs|smem|warps|slots|grid)\)")


def _path(notes: str) -> tuple[str, ...]:
    """The path a model chose, from its notes: tile shape, rows per CTA, k-split and the limit
    that binds occupancy (the numbers that follow M, like launch sizes, are not a path)."""
    return tuple(_PATH_TOKEN.findall(notes or ""))


def _backing(gpu, kernel) -> list[str]:
    """What backs each of ``kernel``'s block predictions on ``gpu``: the distinct trust lines over
    the block's layers (refsim.gpu_model.trust), batches with the same lines joined
    (``b1-b128: ...``); a batch the kernel refuses is left out (its cell says n/a)."""
    from refsim.gpu_model.shapes import get_model
    from refsim.gpu_model.trust import trust
    runs: list = []
    for m in BATCHES:
        if _block(gpu, kernel, m)[0] is None:
            continue
        said = tuple(dict.fromkeys(line for _, n, k, _ in get_model("llama-2-7b").linears
                                   for line in trust(gpu, kernel, m, n, k).lines(nearest=False, estimates=False)))
        if runs and runs[-1][2] == said:
            runs[-1][1] = m
        else:
            runs.append([m, m, said])
    return [f"{kernel} b{lo}" + (f"-b{hi}" if hi != lo else "") + ": " + "; ".join(said) for lo, hi, said in runs]


def markdown(out_dir) -> str:
    from refsim.gpu_model.shapes import get_model
    out_dir = Path(out_dir)
    kernels = _kernels()
    shapes = ", ".join(f"{name} {n}x{k}" for name, n, k, _ in get_model("llama-2-7b").linears)
    lines = ["Analytical model (refsim.gpu_model), sustained clocks, cold L2. One Llama-2-7B transformer "
             f"block's linear layers ({shapes}); default bits/groups per kernel (anyprec 4-bit, marlin "
             "per-channel, mixed-2-4-16 2/4 + 0.2 % outliers). n/a = the kernel does not support a shape or "
             "refuses it as untrusted (its rule or its reason is raised by `refsim predict`). Under each GPU, "
             "what backs every prediction: the tables that validate it and the error there, or why it is "
             "unvalidated (refsim.gpu_model.trust).", ""]
    for gpu in GPUS:
        head = "| kernel | " + " | ".join(f"b{m}" for m in BATCHES) + " | compute-bound from |"
        sep = "|---|" + "---:|" * len(BATCHES) + "---|"
        lat, spd = [head, sep], [head, sep]
        base = {m: _block(gpu, "cublas-fp16", m)[0] for m in BATCHES}
        notes = []
        for kernel in kernels:
            cells_l, cells_s, turn, prev = [], [], None, None
            for m_prev, m in zip((None,) + BATCHES, BATCHES):
                t, worst = _block(gpu, kernel, m)
                if t is None:
                    cells_l.append("n/a")
                    cells_s.append("n/a")
                    prev = None
                    continue
                why = _footnote(prev, (t, worst), m_prev, m) if prev is not None else None
                mark = ""
                if why:
                    notes.append(f"{kernel}: {why}")
                    mark = f" [{len(notes)}]"
                cells_l.append(f"{t * 1e6:.1f}{mark}")
                cells_s.append(f"{base[m] / t:.2f}x")
                if turn is None and worst.bottleneck in COMPUTE:
                    turn = f"b{m} ({worst.bottleneck})"
                prev = (t, worst)
            lat.append(f"| {kernel} | " + " | ".join(cells_l) + f" | {turn or '> b256'} |")
            spd.append(f"| {kernel} | " + " | ".join(cells_s) + f" | {turn or '> b256'} |")
        lines += [f"### {gpu}: latency per block (µs)", ""] + lat + [""]
        if notes:
            lines += ["Why the marked cells look surprising:", ""] + [f"[{i}] {n}" for i, n in enumerate(notes, 1)] + [""]
        lines += [f"### {gpu}: speedup over cublas-fp16", ""] + spd + [""]
        from refsim.gpu_model.trust import trust
        est = ", ".join(trust(gpu, "cublas-fp16", 1, 4096, 4096).estimates) or "none"   # the same for every kernel
        lines += [f"What backs the {gpu} predictions (its constants that are estimates: {est}):", ""] \
            + [f"- {line}" for kernel in kernels for line in _backing(gpu, kernel)] + [""]
        if gpu == PLOT_GPU:
            lines += [f"![latency, speedup and roofline vs batch on {gpu}]({_sweep_png(gpu, out_dir)})", ""]
        else:
            lines += [f"The same three panels for {gpu} (not drawn here: each figure costs ~0.4 s of the "
                      f"report's time): `refsim sweep --gpu {gpu} --kernel {','.join(kernels)} "
                      f"--m {','.join(map(str, BATCHES))} --n 11008 --k 4096 --out DIR`.", ""]
    name, caption = _measured_png(out_dir)
    lines += ["### Predicted vs measured, every GPU with measured rows", "",
              f"![predicted vs measured latency per GPU]({name})", "",
              f"Median / max |error| per GPU (grey band: +-25 %; H100 under its tables' conditions: 1980 MHz, "
              f"ECC on, CUDA events, memset-flushed or warm L2; published rows under each paper's conditions; "
              f"rtx4070-laptop is the calibration table, in-sample): {caption}.", ""]
    lines.append("'compute-bound from' = smallest batch at which the slowest layer's binding term is tensor, "
                 "ALU or shared memory.")
    return "\n".join(lines)
