"""Sweeps of the kernel models over GPUs, kernels, layer shapes and batch sizes, as CSV and pictures.

``refsim sweep --gpu a10,rtx4090 --kernel marlin,anyprec --m 1..4096 --shape 4096:4096 --shape 11008:4096 --out DIR``
predicts every (GPU, kernel, shape, M), writes ``DIR/sweep.csv`` (one row per point, times in µs,
the measurement conditions in columns) and one PNG per GPU (``DIR/sweep_<gpu>.png``)::

    +-------------------------+-------------------------+-------------------------+
    | latency vs M (log-log)  | speedup over cublas-fp16| roofline: achieved      |
    | one line per kernel     | vs M, 1x dashed         | TFLOP/s vs intensity,   |
    | and shape; the marker   |                         | the points placed       |
    | is the bottleneck       |                         |                         |
    +-------------------------+-------------------------+-------------------------+
      legend (below the panels): kernel N x K = n x k (layers), "on top of ..." for series
      that coincide (drawn in distinct line styles), rooflines, bottleneck markers

Shapes are pairs (N, K): ``--shape N:K`` (repeatable), ``--model NAME`` (the distinct linear
shapes of a built-in model), or ``--n``/``--k`` lists whose every combination is taken
(:func:`grid_shapes`). Value grammar for ``--m``, ``--n``, ``--k`` (:func:`parse_values`): a
comma-separated list of

    INT          one value                           16
    A..B         A, 2A, 4A, ... (below B), then B    1..4096 -> 1, 2, 4, ..., 4096
    A..B:S       A, A+S, A+2S, ... up to B           128..512:128 -> 128, 256, 384, 512

The values of one axis are sorted and made unique. A point a kernel refuses (its rule, e.g. Marlin
on sm_75 or N not a multiple of 64) is a row with ``status`` = the rule, not an error: a sweep maps
where each kernel applies.
"""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass
from pathlib import Path

from refsim._validate import require_bool, require_choice, require_fields, require_int
from refsim.errors import FormatRuleError, RefsimError

__all__ = ["SweepRow", "parse_values", "parse_shape", "grid_shapes", "sweep", "write_csv", "plot", "CSV_FIELDS"]

MAX_VALUES_PER_AXIS = 10_000
MAX_POINTS = 1_000_000
MAX_VALUE = 2**31 - 1   # every kernel indexes with 32-bit integers
BASELINE = "cublas-fp16"

_ITEM = re.compile(r"^(\d+)(?:\.\.(\d+)(?::(\d+))?)?$")


def parse_values(text: str, name: str = "values") -> list[int]:
    """The sorted unique integers described by ``text`` (grammar in the module docstring).

    Raises FormatRuleError naming ``name``, the rule and the text for an empty item, a value
    below 1 or above 2**31 - 1, a range with B < A, a step below 1, or more than
    MAX_VALUES_PER_AXIS values."""
    if not isinstance(text, str) or not text.strip():
        raise FormatRuleError(f"{name}: must be a list like '1,2,4', '1..4096' or '128..512:128'; got {text!r}")
    out: set[int] = set()
    for item in text.replace(" ", "").split(","):
        m = _ITEM.match(item)
        if m is None:
            raise FormatRuleError(f"{name}: each item must be INT, A..B or A..B:S with integers; got {item!r} in {text!r}")
        a, b, s = (int(g) if g is not None else None for g in m.groups())
        for v in (a, b, s):
            if v is not None and not 1 <= v <= MAX_VALUE:
                raise FormatRuleError(f"{name}: values and steps must lie in [1, 2**31 - 1]; got {v} in {item!r}")
        if b is None:
            out.add(a)
        elif b < a:
            raise FormatRuleError(f"{name}: a range A..B needs B >= A; got {item!r}")
        else:
            count = (b - a) // s + 1 if s else int(math.log2(b // a)) + 2
            if len(out) + count > MAX_VALUES_PER_AXIS:
                raise FormatRuleError(f"{name}: at most {MAX_VALUES_PER_AXIS} values per axis; {item!r} gives {count}")
            if s:
                out.update(range(a, b + 1, s))
            else:
                v = a
                while v < b:
                    out.add(v)
                    v *= 2
                out.add(b)
        if len(out) > MAX_VALUES_PER_AXIS:
            raise FormatRuleError(f"{name}: at most {MAX_VALUES_PER_AXIS} values per axis; got more in {text!r}")
    return sorted(out)


def parse_shape(text: str) -> tuple[int, int]:
    """``"N:K"`` (two integers in [1, 2**31 - 1]) as ``(n, k)``; FormatRuleError naming the rule."""
    if not isinstance(text, str) or not re.fullmatch(r"\s*\d+\s*:\s*\d+\s*", text):
        raise FormatRuleError(f"shape: must be N:K with two integers (output features : input features); "
                              f"got {text!r:.80}")
    n, k = (int(x) for x in text.split(":"))
    for name, v in (("n", n), ("k", k)):
        if not 1 <= v <= MAX_VALUE:
            raise FormatRuleError(f"shape: {name} must lie in [1, 2**31 - 1]; got {v} in {text!r}")
    return n, k


def grid_shapes(ns, ks) -> list[tuple[int, int]]:
    """Every (n, k) of two value lists, n outer: the shapes of ``--n``/``--k``."""
    return [(n, k) for n in _ints("n", ns) for k in _ints("k", ks)]


@dataclass(frozen=True)
class SweepRow:
    """One predicted point. Times in µs; ``status`` "ok" or the rule that refused the point (then
    the numbers are NaN). ``roofline_us`` is the plain DRAM/tensor roofline of the same problem
    (:func:`refsim.gpu_model.roofline.dram_roofline_s`); ``roofline_fraction`` = roofline_us /
    latency_us (1 = at the roof). ``clock_mhz``, ``ecc``, ``cache``, ``timing``: the measurement
    conditions the point was predicted under. ``trust`` ('validated' / 'unvalidated'; '' for a
    refused point), ``trust_far_off`` and ``trust_statement``: what backs the prediction
    (:func:`refsim.gpu_model.trust.trust`). ``layer``: the model's linears of this (n, k) for a
    model's sweep (``"q_proj/k_proj/v_proj/o_proj"``), else empty."""

    gpu: str
    kernel: str
    m: int
    n: int
    k: int
    bits: int | None
    group_size: int | None
    clock_mhz: float
    ecc: str
    cache: str
    timing: str
    latency_us: float
    cublas_fp16_us: float
    speedup: float
    roofline_us: float
    roofline_fraction: float
    bottleneck: str
    flops: float
    bytes_dram: float
    status: str
    notes: str
    trust: str = ""
    trust_far_off: bool = False
    trust_statement: str = ""
    layer: str = ""

    def __post_init__(self) -> None:
        # a refused point holds NaN in the numbers it has no value for
        require_fields(self, nonfinite=("latency_us", "speedup", "roofline_us", "roofline_fraction", "flops",
                                        "bytes_dram"))


CSV_FIELDS = [f for f in SweepRow.__dataclass_fields__]


def _names(name: str, values) -> list[str]:
    if isinstance(values, str):
        values = [values]
    if not isinstance(values, (list, tuple)) or not values or not all(isinstance(v, str) for v in values):
        raise FormatRuleError(f"{name}: must be a non-empty list of names; got {values!r:.80}")
    return list(values)


def _ints(name: str, values) -> list[int]:
    if not isinstance(values, (list, tuple, range)) or len(values) == 0:
        raise FormatRuleError(f"{name}: must be a non-empty list of integers >= 1; got {values!r:.80}")
    if len(values) > MAX_VALUES_PER_AXIS:
        raise FormatRuleError(f"{name}: at most {MAX_VALUES_PER_AXIS} values per axis; got {len(values)}")
    out = [require_int(name, v, minimum=1) for v in values]
    for v in out:
        if v > MAX_VALUE:
            raise FormatRuleError(f"{name}: values must be <= 2**31 - 1; got {v}")
    return out


def _rows(rows) -> list[SweepRow]:
    if not isinstance(rows, (list, tuple)) or not all(isinstance(r, SweepRow) for r in rows):
        raise FormatRuleError(f"rows: must be a list of SweepRow (from sweep()); got {type(rows).__name__}")
    return list(rows)


def _path(name: str, value) -> Path:
    if not isinstance(value, (str, Path)) or not str(value):
        raise FormatRuleError(f"{name}: must be a path; got {value!r:.80}")
    return Path(value)


def sweep(gpus, kernels, ms, shapes, *, bits: int | None = None, group_size: int | None = None,
          clock: str | float = "sustained", ecc: str | None = None, cache: str = "cold", timing: str = "kernel",
          progress: bool = True, layers: dict | None = None) -> list[SweepRow]:
    """Predict every (gpu, kernel, shape, m) combination; rows in that nesting order.

    gpus: GPU names, aliases or GPUSpec objects (a spec file's GPU); kernels: names (both validated
    up front: an unknown name fails before any work, listing the names and aliases); ms: ints >= 1
    (e.g. from :func:`parse_values`); shapes: (n, k) pairs (:func:`parse_shape`, :func:`grid_shapes`,
    or a model's :func:`refsim.gpu_model.shapes.unique_layer_shapes`); bits/group_size as
    :func:`refsim.gpu_model.kernels.predict` takes them (None = the kernel's default), and so do the
    measurement conditions ``clock``, ``ecc``, ``cache``, ``timing``. A progress bar (tqdm) appears
    on stderr when the sweep runs longer than a second and ``progress`` is true. ``layers``: (n, k) ->
    layer names for the rows' ``layer`` column (:func:`refsim.gpu_model.shapes.shape_layers`), or None.
    At most MAX_POINTS points."""
    from tqdm import tqdm

    from refsim.gpu_model.conditions import CACHE_STATES, TIMINGS, with_ecc
    from refsim.gpu_model.kernels import kernel_module, predict_many
    from refsim.gpu_model.specs import GPUS, GPUSpec, get_gpu
    from refsim.gpu_model.trust import trust

    if isinstance(gpus, (str, GPUSpec)):
        gpus = [gpus]
    if not isinstance(gpus, (list, tuple)) or not gpus:
        raise FormatRuleError(f"gpus: must be a non-empty list of GPU names or specs; got {gpus!r:.80}")
    specs = [with_ecc(get_gpu(g), ecc) for g in gpus]      # unknown GPU / ECC state: refused up front
    kernels = [kernel_module(k).NAME for k in _names("kernels", kernels)]
    cache = require_choice("cache", cache, CACHE_STATES)      # the table's str for a np.str_
    progress = require_bool("progress", progress)
    timing = require_choice("timing", timing, TIMINGS)
    ms = _ints("m", ms)
    shapes = _shapes(shapes)
    layers = _layers(layers)
    bits = None if bits is None else require_int("bits", bits, minimum=1)
    group_size = None if group_size is None else require_int("group_size", group_size, minimum=1)
    total = len(specs) * len(kernels) * len(ms) * len(shapes)
    if total > MAX_POINTS:
        raise FormatRuleError(f"sweep: at most {MAX_POINTS} points; got {total}")
    for g in specs:
        g.clock_hz(clock)                  # a clock outside a card's range: refused before any work
    rows = []
    nan = math.nan
    with tqdm(total=total, delay=1.0, disable=not progress, unit="pt", desc="sweep") as bar:
        for g in specs:
            gpu = g.name if GPUS.get(g.name) is g else g
            cond = (g.clock_hz(clock) / 1e6, ecc or g.ecc, cache, timing)
            peaks = (g.dram_peak_bytes_per_s, g.tensor_flops("fp16_f32acc", "boost"))
            by_kernel: dict = {}
            for n, k in shapes:
                # one batched call per (GPU, kernel, N, K) over all of M (validated once; each entry
                # equals predict(..., m, ...))
                base = [_raised(b).latency_s for b in predict_many(gpu, BASELINE, ms, n, k, clock=clock, ecc=ecc,
                                                                   cache=cache, timing=timing, errors="return")]
                for kernel in kernels:
                    bds = predict_many(gpu, kernel, ms, n, k, bits=bits, group_size=group_size, clock=clock, ecc=ecc,
                                       cache=cache, timing=timing, errors="return")
                    by_kernel.setdefault(kernel, []).extend(
                        _row(g, kernel, m, n, k, bits, group_size, cond, bd, t_base, nan, peaks,
                             None if isinstance(bd, RefsimError) else trust(
                                 gpu, kernel, m, n, k, bits, clock=clock, ecc=ecc, cache=cache, timing=timing),
                             layers.get((n, k), ""))
                        for m, bd, t_base in zip(ms, bds, base))
                    bar.update(len(ms))
            for kernel in kernels:              # rows in (gpu, kernel, shape, m) order
                rows.extend(by_kernel[kernel])
    return rows


def _shapes(shapes) -> list[tuple[int, int]]:
    if not isinstance(shapes, (list, tuple)) or not shapes:
        raise FormatRuleError(f"shapes: must be a non-empty list of (n, k) pairs; got {shapes!r:.80}")
    if len(shapes) > MAX_VALUES_PER_AXIS:
        raise FormatRuleError(f"shapes: at most {MAX_VALUES_PER_AXIS}; got {len(shapes)}")
    out = []
    for i, s in enumerate(shapes):
        if not isinstance(s, (list, tuple)) or len(s) != 2:
            raise FormatRuleError(f"shapes[{i}]: must be an (n, k) pair; got {s!r:.80}")
        n, k = _ints("n", [s[0]])[0], _ints("k", [s[1]])[0]
        out.append((n, k))
    return list(dict.fromkeys(out))


def _layers(layers) -> dict:
    if layers is None:
        return {}
    if not isinstance(layers, dict) or not all(
            isinstance(key, tuple) and len(key) == 2 and isinstance(v, str) for key, v in layers.items()):
        raise FormatRuleError(f"layers: must be a dict (n, k) -> layer names (str), or None; got {layers!r:.80}")
    return dict(layers)


def _raised(bd):
    """A baseline prediction, or its refusal raised (the sweep needs the cuBLAS point)."""
    if isinstance(bd, RefsimError):
        raise bd
    return bd


_FIELDS = tuple(SweepRow.__dataclass_fields__)


def _new_row(*values) -> SweepRow:
    """``SweepRow(*values)`` (the fields in field order, ``layer`` optional) without the frozen dataclass ``__init__``
    (17 ``object.__setattr__`` calls): the instance dict is filled in field order, so equality, repr
    and ``dataclasses.asdict`` are those of the ``__init__``-built row (tested)."""
    row = object.__new__(SweepRow)
    fields = dict(zip(_FIELDS, values))
    if "layer" not in fields:               # the one field with a default
        fields["layer"] = ""
    object.__setattr__(row, "__dict__", fields)
    return row


def _row(g, kernel, m, n, k, bits, group_size, cond, bd, t_base, nan, peaks, tr, layer) -> SweepRow:
    """One :class:`SweepRow` from a prediction (or the refusal ``predict_many`` returned for it),
    its :class:`~refsim.gpu_model.trust.Trust` ``tr`` (None for a refusal) and the model's ``layer``
    names of the shape ('' outside a model's sweep).
    ``cond`` = (clock MHz, ecc, cache, timing); ``peaks`` = (g.dram_peak_bytes_per_s,
    g.tensor_flops("fp16_f32acc", "boost")): the roofline is
    :func:`~refsim.gpu_model.roofline.dram_roofline_s`'s expression on the model's own numbers."""
    base_us = t_base * 1e6
    if isinstance(bd, RefsimError):
        return _new_row(g.name, kernel, m, n, k, bits, group_size, *cond, nan, base_us, nan, nan, nan,
                        "", nan, nan, " ".join(str(bd).split()), "", "", False, "", layer)
    roof = max(bd.bytes_dram / peaks[0], bd.flops / peaks[1])
    return _new_row(g.name, kernel, m, n, k, bd.bits, group_size, *cond, bd.latency_s * 1e6, base_us,
                    t_base / bd.latency_s, roof * 1e6, roof / bd.latency_s, bd.bottleneck, bd.flops, bd.bytes_dram,
                    "ok", bd.notes, tr.status, tr.far_off, tr.statement, layer)


def write_csv(rows: list[SweepRow], path) -> Path:
    """Write ``rows`` to ``path`` as CSV with the header :data:`CSV_FIELDS` (times in µs, the
    conditions in columns); returns the path."""
    rows, path = _rows(rows), _path("path", path)
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(CSV_FIELDS)
        for r in rows:
            w.writerow(["" if v is None else v for v in (getattr(r, f) for f in CSV_FIELDS)])
    return path


# the marker of a point says its bottleneck (Breakdown.bottleneck)
MARKERS = {"dram": "o", "l2": "D", "tensor": "s", "alu": "^", "smem": "P", "latency": "v", "launch": "x",
           "serial": "*"}


def _log_axis(axis, base: int) -> None:
    """Readable ticks on a log axis: powers of two (base 2) or 1-2-5 per decade (base 10), plain
    numbers; enough labels for any range."""
    from matplotlib import ticker

    plain = ticker.FuncFormatter(lambda v, _: f"{v:g}")
    if base == 2:
        axis.set_major_locator(ticker.LogLocator(base=2, numticks=12))
    else:
        axis.set_major_locator(ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0), numticks=12))
    axis.set_major_formatter(plain)
    axis.set_minor_locator(ticker.NullLocator())


#: series whose every point lies within this relative distance of another's are drawn as coinciding:
#: on these log axes 1% is under a line width
COINCIDE_REL = 0.01
#: line styles for series that coincide on a panel: the first drawn solid and wide, each later one
#: narrower and dashed on top of it, so that every series stays visible
LINESTYLES = (("-", 2.6), ("--", 1.6), (":", 1.6), ("-.", 1.2))


def shape_label(n: int, k: int) -> str:
    """How plots name a layer shape: ``"N x K = 11008 x 4096"`` (N output features, K the reduction)."""
    return f"N x K = {n} x {k}"


def coincident(curves: list[tuple[list[float], list[float]]], rel: float = COINCIDE_REL) -> list[int | None]:
    """For each curve (xs, ys) (lists of floats), the index of the first earlier curve it lies on (equal xs,
    every y within a relative ``rel``; the earliest curve of such a group), else None: the series a plot
    would draw on top of each other."""
    out: list[int | None] = []
    for i, (xs, ys) in enumerate(curves):
        same = None
        for j in range(i):
            xj, yj = curves[j]
            if len(xs) == len(xj) and all(abs(a - b) <= rel * max(abs(a), abs(b)) for a, b in zip(xs, xj)) and all(abs(a - b) <= rel * max(abs(a), abs(b)) for a, b in zip(ys, yj)):
                same = out[j] if out[j] is not None else j
                break
        out.append(same)
    return out


def _styles(same: list[int | None]) -> list[tuple[str, float]]:
    """The (line style, width) of each curve: the k-th curve of a coincident group gets LINESTYLES[k]."""
    count: dict[int, int] = {}
    styles = []
    for i, s in enumerate(same):
        root = i if s is None else s
        k = count.get(root, 0)
        count[root] = k + 1
        styles.append(LINESTYLES[k % len(LINESTYLES)] if s is not None or any(x == i for x in same)
                      else ("-", 1.2))
    return styles


def _figure(gpu: str, ok: list[SweepRow], title: str):
    """The figure of one GPU's "ok" rows (layout in :func:`plot`); the caller saves and closes it."""
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    from refsim.gpu_model.specs import GPUS

    spec = GPUS.get(gpu)
    series: dict = {}
    for r in ok:
        series.setdefault((r.kernel, r.n, r.k), []).append(r)
    for pts in series.values():
        pts.sort(key=lambda r: r.m)
    keys = list(series)
    several = len({(n, k) for _, n, k in keys}) > 1

    def label(key):
        kernel, n, k = key
        layer = series[key][0].layer
        return f"{kernel} {shape_label(n, k)}" + (f" ({layer})" if layer else "") if several else kernel

    panels = {
        "latency": [([r.m for r in series[key]], [r.latency_us for r in series[key]]) for key in keys],
        "speedup": [([r.m for r in series[key]], [r.speedup for r in series[key]]) for key in keys],
        "roofline": [([r.flops / r.bytes_dram for r in series[key]],
                      [r.flops / (r.latency_us * 1e-6) / 1e12 for r in series[key]]) for key in keys]}
    same = {name: coincident(curves) for name, curves in panels.items()}
    styles = {name: _styles(s) for name, s in same.items()}
    colors = [f"C{i % 10}" for i in range(len(keys))]
    ncol = 3
    fig, (ax_l, ax_s, ax_r) = plt.subplots(1, 3, figsize=(16, 5.2))   # resized for the legend below
    seen = set()
    axes = {"latency": ax_l, "speedup": ax_s, "roofline": ax_r}
    for i, key in enumerate(keys):
        pts = series[key]
        for name, ax in axes.items():
            if name == "speedup" and key[0] == BASELINE:
                continue                      # 1x by definition: the dashed line
            xs, ys = panels[name][i]
            ls, lw = styles[name][i]
            ax.plot(xs, ys, ls=ls, lw=lw, color=colors[i], zorder=2 + 0.01 * i)
            for b in dict.fromkeys(r.bottleneck for r in pts):     # the marker: the points' bottleneck
                idx = [j for j, r in enumerate(pts) if r.bottleneck == b]
                seen.add(b)
                ax.plot([xs[j] for j in idx], [ys[j] for j in idx], MARKERS.get(b, "."), ms=5, color=colors[i],
                        mfc="none", ls="", zorder=3)
    handles, labels = [], []
    for i, key in enumerate(keys):
        ls, lw = styles["latency"][i]
        handles.append(Line2D([], [], ls=ls, lw=lw, color=colors[i]))
        twin = same["latency"][i]
        labels.append(label(key) + (f" (on top of {keys[twin][0]}"
                                    f"{' ' + shape_label(*keys[twin][1:]) if several else ''}, within 1%)"
                                    if twin is not None else ""))
    if spec is not None:
        xs = [2 ** (i / 4) for i in range(-8, 60)]
        bw = spec.dram_peak_bytes_per_s
        for kind, style in (("fp16_f32acc", "-"), ("int8", "--"), ("int4", ":")):
            peak = spec.tensor_flops(kind, "boost")
            if peak:
                ax_r.plot(xs, [min(bw * x, peak) / 1e12 for x in xs], style, color="black", lw=0.8)
                handles.append(Line2D([], [], ls=style, color="black", lw=0.8))
                labels.append(f"roofline {kind} (right)")
    ax_s.axhline(1.0, color="grey", lw=0.8, ls="--")
    handles.append(Line2D([], [], ls="--", color="grey", lw=0.8))
    labels.append(f"{BASELINE}: 1x (middle)")
    for b in MARKERS:
        if b in seen:
            handles.append(Line2D([], [], marker=MARKERS[b], ls="", color="black", mfc="none"))
            labels.append(f"bottleneck: {b}")
    for ax in (ax_l, ax_s, ax_r):
        ax.set_xscale("log", base=2)
        _log_axis(ax.xaxis, 2)
        ax.grid(True, lw=0.3, alpha=0.5)
        ax.tick_params(labelsize=9)
    for ax in (ax_l, ax_r):
        ax.set_yscale("log")
        _log_axis(ax.yaxis, 10)
    c = ok[0]
    ax_l.set_xlabel("M (batch / tokens)", fontsize=10)
    ax_l.set_ylabel("predicted latency (µs)", fontsize=10)
    ax_s.set_xlabel("M (batch / tokens)", fontsize=10)
    ax_s.set_ylabel(f"speedup over {BASELINE}", fontsize=10)
    ax_r.set_xlabel("arithmetic intensity (FLOP per DRAM byte)", fontsize=10)
    ax_r.set_ylabel("achieved TFLOP/s", fontsize=10)
    bottom_in = 0.75 + 0.2 * -(-len(handles) // ncol)   # the x labels, then the legend's rows
    height = 4.4 + bottom_in
    fig.set_size_inches(16, height)
    fig.legend(handles, labels, loc="lower center", ncol=ncol, fontsize=8, frameon=False,
               bbox_to_anchor=(0.5, 0.0))
    shape = "" if several else f", {shape_label(keys[0][1], keys[0][2])}" + \
        (f" ({series[keys[0]][0].layer})" if series[keys[0]][0].layer else "")
    fig.suptitle(title or f"{gpu}{shape}: predicted by refsim.gpu_model ({c.clock_mhz:g} MHz, ECC {c.ecc}, "
                 f"{c.cache} L2, {c.timing} timing)", fontsize=11)
    fig.subplots_adjust(left=0.05, right=0.99, bottom=(bottom_in + 0.05) / height, top=1 - 0.45 / height,
                        wspace=0.25)
    return fig


def plot(rows: list[SweepRow], out_dir, *, title: str = "") -> list[Path]:
    """One PNG per GPU in ``out_dir`` (``sweep_<gpu>.png``, layout in the module docstring) from
    the "ok" rows; returns the paths written (none for a GPU without an ok row).

    Series are (kernel, shape); shapes are labelled ``N x K = n x k`` (:func:`shape_label`), with the
    model's layer names when the rows carry them. Series that coincide on a panel (:func:`coincident`)
    (within :data:`COINCIDE_REL`) are drawn in distinct line styles, and the legend says "on top of ..."
    for the latency panel.
    The speedup panel leaves out cublas-fp16 itself (1x by definition, the dashed line). Legends sit
    below the three panels, outside the plot areas."""
    rows, out_dir = _rows(rows), _path("out_dir", out_dir)      # checked before the matplotlib import
    if not isinstance(title, str):
        raise FormatRuleError(f"title: must be a string; got {type(title).__name__}")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    for gpu in dict.fromkeys(r.gpu for r in rows):
        ok = [r for r in rows if r.gpu == gpu and r.status == "ok"]
        if not ok:
            continue
        fig = _figure(gpu, ok, title)
        path = out_dir / f"sweep_{gpu}.png"
        fig.savefig(path, dpi=100, pil_kwargs={"compress_level": 1})   # fast zlib level: same pixels
        plt.close(fig)
        written.append(path)
    return written
