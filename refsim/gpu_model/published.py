"""The seed papers' published kernel numbers side by side with :mod:`refsim.gpu_model`.

``refsim/data/timings/published.csv`` holds every kernel-level number the papers (and, for
numbers a paper shows only as a figure, the authors' own result files) publish that the model can
predict: one row per number, with the paper, the figure/table/section, the GPU, the kernel and
the measurement conditions (SM clock, ECC, timing method). Its header comment names the sources.

:func:`load` reads and validates it; :func:`compare` predicts every row under the row's
conditions (:func:`conditions` is the one place a row's conditions become ``predict`` keywords)
with the model and with the plain DRAM roofline and returns the errors; :func:`summary` gives
per-GPU median/max absolute errors. ``bench/paper_table.py`` prints the markdown table that
``docs/perf_model.md`` ("Published numbers side by side") shows.

Units of a row (``unit``)::

    us                 kernel latency in microseconds
    x                  speedup = latency(baseline) / latency(kernel), both predicted under the
                       row's conditions (the model's speedup is predict(baseline)/predict(kernel))
    us-over-baseline   latency(kernel) - latency(baseline) in microseconds

``shape`` is ``NxK`` (N output features, K input features; the model's n, k). ``A+B+...`` sums
the latencies of several layers (a model's layer set, as Marlin's Fig. 9 bench sums them);
``A|B|...`` (and ``gpu`` ``g1|g2``) lists alternatives whose model values are reduced by the
row's ``aggregate`` (``min`` or ``max``) — for papers that publish only a range.
"""

from __future__ import annotations

import csv
import math
import statistics
from dataclasses import dataclass
from pathlib import Path

from refsim._validate import (plain_scalar, read_utf8_text, require_bool, require_choice, require_fields,
                              require_instance, require_path)
from refsim.errors import FormatRuleError, UntrustedModelError
from refsim.gpu_model.kernels import KERNELS, predict
from refsim.gpu_model.problem import check_m, problem, solve
from refsim.gpu_model.roofline import dram_roofline_s
from refsim.gpu_model.specs import MAX_CLOCK_HZ, MIN_CLOCK_HZ, get_gpu

__all__ = ["PublishedRow", "Comparison", "COLUMNS", "default_csv_path", "load", "in_sample_rows",
           "conditions", "compare", "summary"]

COLUMNS = ("id", "paper", "source", "value_kind", "gpu", "kernel", "baseline", "m", "shape", "bits",
           "group_size", "unit", "value", "aggregate", "clock", "ecc", "timing", "in_sample", "note")
PAPERS = ("marlin", "any-precision-llm", "atom", "two-four-sixteen-bit", "qigen")
VALUE_KINDS = ("table", "figure-data", "figure-read", "text")
UNITS = ("us", "x", "us-over-baseline")
AGGREGATES = ("", "min", "max")
CLOCK_NAMES = ("base", "boost", "sustained")
ECC = ("on", "off", "n/a", "not-stated")
TIMINGS_FIXED = ("nsight-compute", "nvbench", "not-stated")
# Tensor peak the plain roofline uses for a kernel (dram_roofline_s ``kind``); FP16 otherwise.
ROOFLINE_KIND = {"atom-w4a4": "int4", "atom-w8a8": "int8", "int8-w8a8": "int8"}


@dataclass(frozen=True)
class PublishedRow:
    """One published number. ``alternatives`` is a tuple of (gpu, layers) pairs, ``layers`` a
    tuple of (n, k); a row without ``aggregate`` has exactly one alternative. ``clock`` is a name
    ('base' / 'boost' / 'sustained') or an SM clock in Hz (float). ``bits`` / ``group_size`` are
    None where the CSV cell is empty (the kernel's default)."""

    id: str
    paper: str
    source: str
    value_kind: str
    gpu: str
    kernel: str
    baseline: str | None
    m: int
    shape: str
    bits: int | None
    group_size: int | None
    unit: str
    value: float
    aggregate: str
    clock: str | float
    ecc: str
    timing: str
    in_sample: bool
    note: str
    alternatives: tuple = ()

    def __post_init__(self) -> None:
        require_fields(self)
        object.__setattr__(self, "clock", plain_scalar(self.clock))    # a name or Hz, as Python types


@dataclass(frozen=True)
class Comparison:
    """A row with the model's and the plain roofline's value in the row's unit, and the signed
    relative errors (value / published - 1). ``refused`` is "" or the UntrustedModelError message
    ``predict`` gives for the row (then ``model`` is the refused model's value, computed anyway to
    show how far off it is)."""

    row: PublishedRow
    model: float
    roofline: float
    refused: str = ""

    def __post_init__(self) -> None:
        require_fields(self)

    @property
    def model_error(self) -> float:
        return self.model / self.row.value - 1.0

    @property
    def roofline_error(self) -> float:
        return self.roofline / self.row.value - 1.0


def default_csv_path() -> Path:
    """``refsim/data/timings/published.csv``."""
    return Path(__file__).resolve().parents[1] / "data" / "timings" / "published.csv"


def _fail(path, line, column, rule, got) -> FormatRuleError:
    return FormatRuleError(f"{path}:{line}: column {column}: {rule}; got {got!r}")


def _choice(path, line, column, text, choices):
    if text not in choices:
        raise _fail(path, line, column, f"must be one of {list(choices)}", text)
    return text


def _int(path, line, column, text, *, optional=False):
    if optional and text == "":
        return None
    try:
        v = int(text)
    except ValueError:
        raise _fail(path, line, column, "must be an integer >= 1" + (" or empty" if optional else ""), text) from None
    if v < 1:
        raise _fail(path, line, column, "must be an integer >= 1", text)
    return v


def _shape(path, line, text, aggregate):
    if "+" in text and "|" in text:
        raise _fail(path, line, "shape", "must not mix '+' (summed layers) and '|' (alternatives)", text)
    if "|" in text and not aggregate:
        raise _fail(path, line, "shape", "alternatives ('|') need aggregate min or max", text)
    groups = text.split("|") if "|" in text else [text]
    out = []
    for g in groups:
        layers = []
        for part in g.split("+"):
            nk = part.strip().split("x")
            if len(nk) != 2 or not all(s.isascii() and s.isdigit() and int(s) >= 1 for s in nk):
                raise _fail(path, line, "shape", "must be NxK with positive integers (layers joined by '+', "
                                                 "alternatives by '|')", text)
            layers.append((int(nk[0]), int(nk[1])))
        out.append(tuple(layers))
    return tuple(out)


def _clock(path, line, text):
    if text in CLOCK_NAMES:
        return text
    try:
        hz = float(text) * 1e6
    except ValueError:
        hz = math.nan
    if not (math.isfinite(hz) and MIN_CLOCK_HZ <= hz <= MAX_CLOCK_HZ):
        raise _fail(path, line, "clock", f"must be one of {list(CLOCK_NAMES)} or an SM clock in MHz within "
                                         f"[{MIN_CLOCK_HZ / 1e6:.0f}, {MAX_CLOCK_HZ / 1e6:.0f}]", text)
    return hz


def _row(path, line, cells: dict) -> PublishedRow:
    c = cells
    if not c["id"]:
        raise _fail(path, line, "id", "must be non-empty", c["id"])
    paper = _choice(path, line, "paper", c["paper"], PAPERS)
    if not c["source"]:
        raise _fail(path, line, "source", "every row must name its source (figure, table or section)", c["source"])
    kind = _choice(path, line, "value_kind", c["value_kind"], VALUE_KINDS)
    aggregate = _choice(path, line, "aggregate", c["aggregate"], AGGREGATES)
    gpus = c["gpu"].split("|")
    if len(gpus) > 1 and not aggregate:
        raise _fail(path, line, "gpu", "alternatives ('|') need aggregate min or max", c["gpu"])
    for g in gpus:
        try:
            get_gpu(g)
        except FormatRuleError:
            raise _fail(path, line, "gpu", "must name GPUs refsim models (refsim.gpu_model.specs.gpu_names)",
                        c["gpu"]) from None
    kernel = _choice(path, line, "kernel", c["kernel"], KERNELS)
    unit = _choice(path, line, "unit", c["unit"], UNITS)
    if unit == "us":
        if c["baseline"]:
            raise _fail(path, line, "baseline", "must be empty for a latency row (unit us)", c["baseline"])
        baseline = None
    else:
        baseline = _choice(path, line, "baseline", c["baseline"], KERNELS)
    m = _int(path, line, "m", c["m"])
    alts_shape = _shape(path, line, c["shape"], aggregate)
    bits = _int(path, line, "bits", c["bits"], optional=True)
    group_size = _int(path, line, "group_size", c["group_size"], optional=True)
    try:
        value = float(c["value"])
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise _fail(path, line, "value", "must be a finite number > 0", c["value"])
    clock = _clock(path, line, c["clock"])
    ecc = _choice(path, line, "ecc", c["ecc"], ECC)
    timing = c["timing"]
    if timing not in TIMINGS_FIXED and not (timing.startswith("wallclock-mean-")
                                            and timing[len("wallclock-mean-"):].isdigit()):
        raise _fail(path, line, "timing", f"must be one of {list(TIMINGS_FIXED)} or wallclock-mean-N", timing)
    in_sample = _choice(path, line, "in_sample", c["in_sample"], ("yes", "no")) == "yes"
    alternatives = tuple((g, layers) for g in gpus for layers in alts_shape)
    return PublishedRow(id=c["id"], paper=paper, source=c["source"], value_kind=kind, gpu=c["gpu"], kernel=kernel,
                        baseline=baseline, m=m, shape=c["shape"], bits=bits, group_size=group_size, unit=unit,
                        value=value, aggregate=aggregate, clock=clock, ecc=ecc, timing=timing, in_sample=in_sample,
                        note=c["note"], alternatives=alternatives)


def load(path: str | Path | None = None) -> list[PublishedRow]:
    """Rows of the published-numbers CSV (default :func:`default_csv_path`; UTF-8, lines starting
    with ``#`` are comments, then a header with :data:`COLUMNS`). Any broken rule — a missing
    column, an unknown GPU/kernel/unit, a row without a source, a malformed shape or clock, a
    duplicate id — is a :class:`~refsim.errors.FormatRuleError` naming file, line and column."""
    path = require_path("path", path) if path is not None else default_csv_path()
    try:
        text = read_utf8_text(path)               # a binary byte: refused naming its line
    except OSError as err:
        raise FormatRuleError(f"published CSV: must be a readable file; got {str(path)!r} ({err.strerror})") from None
    lines = text.splitlines()
    numbered = [(i + 1, ln) for i, ln in enumerate(lines) if ln.strip() and not ln.lstrip().startswith("#")]
    if not numbered:
        raise FormatRuleError(f"{path}: must have a header with columns {list(COLUMNS)}; got no data lines")
    parsed = []
    for line, text_line in numbered:
        try:
            parsed.append(next(csv.reader([text_line], strict=True)))
        except (csv.Error, StopIteration) as err:
            raise FormatRuleError(f"{path}:{line}: must be one well-formed CSV record per line; got {err}") from None
    header = [h.strip() for h in parsed[0]]
    if header != list(COLUMNS):
        raise FormatRuleError(f"{path}:{numbered[0][0]}: header must be exactly {list(COLUMNS)}; got {header}")
    rows, seen = [], set()
    for (line, _), cells in zip(numbered[1:], parsed[1:]):
        if len(cells) != len(COLUMNS):
            raise FormatRuleError(f"{path}:{line}: row must have {len(COLUMNS)} cells; got {len(cells)}")
        row = _row(path, line, dict(zip(COLUMNS, (x.strip() for x in cells))))
        if row.id in seen:
            raise _fail(path, line, "id", "must be unique", row.id)
        seen.add(row.id)
        rows.append(row)
    return rows


def in_sample_rows() -> list[PublishedRow]:
    """The Any-Precision RTX 4070 Laptop rows (Tables 9 and 11) refsim is calibrated on, as
    in-sample :class:`PublishedRow` latencies (Nsight Compute: base clock)."""
    from refsim.gpu_model.calibrate import load_rows
    out = []
    for r in load_rows():
        bits = None if r.kernel == "cublas-fp16" else r.bits
        out.append(PublishedRow(
            id=f"anyprec-cal-{r.kernel}-{r.n}x{r.k}-b{r.bits}-m{r.m}", paper="any-precision-llm",
            source=f"{r.source} (refsim calibration CSV)", value_kind="table", gpu=r.gpu, kernel=r.kernel,
            baseline=None, m=r.m, shape=f"{r.n}x{r.k}", bits=bits, group_size=None, unit="us",
            value=r.latency_us, aggregate="", clock="base", ecc="n/a", timing="nsight-compute", in_sample=True,
            note="calibration data", alternatives=((r.gpu, ((r.n, r.k),)),)))
    return out


def conditions(row: PublishedRow) -> dict:
    """The keyword arguments for ``kernels.predict`` that state ``row``'s measurement conditions —
    the single place they are translated: the SM clock (``"base"`` where the paper's tool locked
    clocks to base (Nsight Compute), an explicit clock in Hz where the paper states one, else
    ``"sustained"``) and the ECC state where the source states it (``on`` / ``off``; ``n/a`` and
    ``not-stated`` leave the card's default). L2 stays cold: no row's source says its timing loop
    ran warm on a working set that fits in L2. NVBench's cold measurement zeroes an L2-sized buffer
    with ``cudaMemsetAsync`` before every sample and times the launch between CUDA events behind a
    blocking kernel (NVIDIA/nvbench ``nvbench/detail/l2flush.cuh``, ``measure_cold.cu``): the H100
    tables' method, ``cache="dirty"`` and ``timing="events"``."""
    require_instance("row", row, PublishedRow)
    kw = {"clock": row.clock}
    if row.ecc in ("on", "off"):
        kw["ecc"] = row.ecc
    if row.timing == "nvbench":
        kw.update(cache="dirty", timing="events")
    return kw


def _latencies(row: PublishedRow, kernel: str, gpu: str, layers, bits, group_size) -> tuple[float, float, str]:
    """(model, plain roofline) latency in µs of ``kernel`` summed over ``layers`` on ``gpu``, and ""
    or the UntrustedModelError ``predict`` raised (the model's value is then computed past it)."""
    kw = conditions(row)
    g = get_gpu(gpu)
    kind = ROOFLINE_KIND.get(kernel, "fp16_f32acc")
    model = roof = 0.0
    refused = ""
    for n, k in layers:
        try:
            bd = predict(gpu, kernel, row.m, n, k, bits, group_size, **kw)
        except UntrustedModelError as err:
            pb = problem(gpu, kernel, n, k, bits, group_size, **kw)
            bd, refused = solve(pb, check_m(pb, row.m, trusted_only=False)), str(err)
        model += bd.latency_us
        roof += dram_roofline_s(bd.bytes_dram, bd.flops, g, kind) * 1e6
    return model, roof, refused


def _values(row: PublishedRow) -> tuple[float, float, str]:
    """(model, roofline) value of ``row`` in its unit, and "" or the refusal of a model in it."""
    vals, refused = [], ""
    for gpu, layers in row.alternatives:
        km, kr, why = _latencies(row, row.kernel, gpu, layers, row.bits, row.group_size)
        refused = refused or why
        if row.unit == "us":
            vals.append((km, kr))
            continue
        bm, br, why = _latencies(row, row.baseline, gpu, layers, None, None)
        refused = refused or why
        vals.append((bm / km, br / kr) if row.unit == "x" else (km - bm, kr - br))
    if row.aggregate == "min":
        return min(v[0] for v in vals), min(v[1] for v in vals), refused
    if row.aggregate == "max":
        return max(v[0] for v in vals), max(v[1] for v in vals), refused
    return vals[0] + (refused,)


def _items(name: str, values, kind) -> list:
    """``values`` as a list whose items are all ``kind`` (a list or tuple; anything else is refused)."""
    require_instance(name, values, (list, tuple))
    for i, v in enumerate(values):
        require_instance(f"{name}[{i}]", v, kind)
    return list(values)


def compare(rows: list[PublishedRow] | None = None, *, include_in_sample: bool = True) -> list[Comparison]:
    """One :class:`Comparison` per row, in order: ``rows`` (default :func:`load`) followed, when
    ``include_in_sample``, by :func:`in_sample_rows`. Each row is predicted under
    :func:`conditions`; speedup rows divide two predictions made under the same conditions. A row
    the model refuses (UntrustedModelError) is still compared, with the refused model's value and
    the refusal in ``Comparison.refused``: the error that made it refuse stays visible."""
    rows = load() if rows is None else _items("rows", rows, PublishedRow)
    include_in_sample = require_bool("include_in_sample", include_in_sample)
    if include_in_sample:
        rows = rows + in_sample_rows()
    out = []
    for row in rows:
        model, roof, refused = _values(row)
        out.append(Comparison(row=row, model=model, roofline=roof, refused=refused))
    return out


def summary(comparisons: list[Comparison], by: str = "gpu") -> dict:
    """Absolute relative errors (fractions: 0.05 = 5 %) grouped by the row's ``by`` field
    (``"gpu"`` — the row's gpu cell —, ``"kernel"`` or ``"paper"``) and its in-sample flag:
    ``{(group, in_sample): dict(rows, model_median, model_max, roofline_median, roofline_max)}``,
    out-of-sample groups first."""
    require_choice("by", by, ("gpu", "kernel", "paper"))
    comparisons = _items("comparisons", comparisons, Comparison)
    groups: dict = {}
    for c in comparisons:
        groups.setdefault((getattr(c.row, by), c.row.in_sample), []).append(c)
    out = {}
    for key in sorted(groups, key=lambda k: (k[1], k[0])):
        cs = groups[key]
        me = [abs(c.model_error) for c in cs]
        re = [abs(c.roofline_error) for c in cs]
        out[key] = {"rows": len(cs), "model_median": statistics.median(me), "model_max": max(me),
                    "roofline_median": statistics.median(re), "roofline_max": max(re)}
    return out
