"""Kernel timings measured on real GPUs, beside the model: the tables the model is judged against.

``refsim/data/timings/`` holds each table with its conditions (README there). A measured row is
one kernel, one shape, one cache state, with the median, minimum and 90th percentile of its
launches. :func:`conditions` is the one place a row's measurement conditions become ``predict``
keywords; :func:`compare` predicts every row; :func:`summary` gives median / max |error| per GPU,
kernel and cache state. Nothing is fitted to these rows: the model's per-GPU constants come from
microbenchmarks (:mod:`refsim.gpu_model.microbench`), never from a table here.

    table                      GPU       kernels (refsim name <- the table's)           conditions
    h100_marlin_cublas.csv     h100-sxm  cublas-fp16, marlin <- marlin-official         1980 MHz, ECC on,
    h100_anyprec.csv           h100-sxm  anyprec <- anyprec-official                   CUDA events;
    h100_atom.csv              h100-sxm  atom-w4a4 <- atom-official                    cold = dirty L2

A row whose 90th percentile exceeds 1.5 x its minimum is bimodal (:data:`UNRELIABLE_SPREAD`): it
is listed, never counted in the error statistics.
"""

from __future__ import annotations

import csv
import statistics
from dataclasses import dataclass
from pathlib import Path

from refsim._validate import require_choice, require_fields, require_instance, require_real
from refsim.errors import FormatRuleError, RefsimError
from refsim.gpu_model.evaluate import predict

__all__ = ["MeasuredRow", "TABLES", "load", "conditions", "compare", "summary", "UNRELIABLE_SPREAD"]

UNRELIABLE_SPREAD = 1.5
_DIR = Path(__file__).resolve().parents[1] / "data" / "timings"
# table -> (GPU, the conditions every row of it was measured under)
TABLES = {
    "h100_marlin_cublas.csv": ("h100-sxm", {"clock": 1980e6, "ecc": "on", "timing": "events"}),
    "h100_anyprec.csv": ("h100-sxm", {"clock": 1980e6, "ecc": "on", "timing": "events"}),
    "h100_atom.csv": ("h100-sxm", {"clock": 1980e6, "ecc": "on", "timing": "events"}),
}
# the tables' kernel names -> refsim's
_KERNELS = {"cublas-fp16": "cublas-fp16", "marlin-official": "marlin", "anyprec-official": "anyprec",
            "atom-official": "atom-w4a4", "deepgemm-fp8": "deepgemm-fp8", "hopper-w4a16": "hopper-w4a16"}
# the tables' cache labels -> conditions.CACHE_STATES: the H100 tables' "cold" zeroed a 512 MiB buffer
# before each launch (dirty L2)
_CACHE = {"cold": "dirty", "warm": "warm"}


@dataclass(frozen=True)
class MeasuredRow:
    """One measured kernel time (µs) with the conditions of its table; ``where`` is file:line."""

    table: str
    gpu: str
    kernel: str
    m: int
    n: int
    k: int
    bits: int | None
    group_size: int | None
    cache: str
    median_us: float
    min_us: float
    p90_us: float
    where: str

    def __post_init__(self) -> None:
        require_fields(self)
        require_choice("MeasuredRow.table", self.table, tuple(TABLES))   # its conditions come from the table

    @property
    def reliable(self) -> bool:
        """False for a bimodal row (p90 / min above :data:`UNRELIABLE_SPREAD`)."""
        return self.p90_us <= UNRELIABLE_SPREAD * self.min_us


def _cell(where, header, cells, name, kind, optional=False):
    if name not in header:
        if optional:
            return None
        raise FormatRuleError(f"{where}: column {name!r} missing; got {header}")
    text = cells[header.index(name)].strip()
    if optional and text in ("", "per-channel"):
        return None
    try:
        value = kind(text)
    except ValueError:
        raise FormatRuleError(f"{where}: column {name!r} must be {kind.__name__}; got {text!r}") from None
    if kind is float and not value > 0:
        raise FormatRuleError(f"{where}: column {name!r} must be > 0; got {text!r}")
    if kind is int and value < 1:
        raise FormatRuleError(f"{where}: column {name!r} must be >= 1; got {text!r}")
    return value


def _load_table(name: str) -> list[MeasuredRow]:
    gpu, _ = TABLES[name]
    path = _DIR / name
    with path.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    header = [h.strip() for h in rows[0]]
    out = []
    for line, cells in enumerate(rows[1:], 2):
        if not cells:
            continue
        where = f"{name}:{line}"
        if len(cells) != len(header):
            raise FormatRuleError(f"{where}: row must have {len(header)} cells; got {len(cells)}")
        kernel = cells[header.index("kernel")].strip()
        if kernel not in _KERNELS:
            raise FormatRuleError(f"{where}: column 'kernel' must be one of {sorted(_KERNELS)}; got {kernel!r}")
        cache = cells[header.index("cache")].strip()
        if cache not in _CACHE:
            raise FormatRuleError(f"{where}: column 'cache' must be one of {sorted(_CACHE)}; got {cache!r}")
        if cells[header.index("gpu")].strip() != gpu:
            raise FormatRuleError(f"{where}: column 'gpu' must be {gpu!r} for this table")
        out.append(MeasuredRow(
            table=name, gpu=gpu, kernel=_KERNELS[kernel], m=_cell(where, header, cells, "m", int),
            n=_cell(where, header, cells, "n", int), k=_cell(where, header, cells, "k", int),
            bits=_cell(where, header, cells, "bits", int, optional=True),
            group_size=_cell(where, header, cells, "group_size", int, optional=True), cache=_CACHE[cache],
            median_us=_cell(where, header, cells, "median_us", float),
            min_us=_cell(where, header, cells, "min_us", float), p90_us=_cell(where, header, cells, "p90_us", float),
            where=where))
    return out


def load(tables=None) -> list[MeasuredRow]:
    """Rows of the measured tables (default: all of :data:`TABLES`), in file order. A malformed
    cell is a FormatRuleError naming the file, the line and the column."""
    names = list(TABLES) if tables is None else tables
    require_instance("tables", names, (list, tuple))
    out = []
    for name in names:
        require_choice("table", name, tuple(TABLES))
        out.extend(_load_table(name))
    return out


def conditions(row: MeasuredRow) -> dict:
    """The ``predict`` keywords of ``row``'s measurement conditions (clock, ECC, cache, timing) —
    the one place they are translated."""
    require_instance("row", row, MeasuredRow)
    return dict(TABLES[row.table][1], cache=row.cache)


def compare(rows=None) -> list[tuple[MeasuredRow, float | RefsimError]]:
    """``[(row, predicted µs or the model's refusal)]`` for ``rows`` (default :func:`load`), each
    predicted under :func:`conditions`."""
    rows = load() if rows is None else list(require_instance("rows", rows, (list, tuple)))
    out = []
    for row in rows:
        require_instance("row", row, MeasuredRow)
        try:
            bd = predict(row.gpu, row.kernel, row.m, row.n, row.k, row.bits, row.group_size, **conditions(row))
            out.append((row, bd.latency_us))
        except RefsimError as err:
            out.append((row, err))
    return out


def summary(comparisons) -> dict:
    """``{(gpu, kernel, cache): dict(rows, median, max, unreliable, refused)}``: absolute relative
    errors (fractions) of the reliable, predicted rows; bimodal rows and refusals only counted."""
    require_instance("comparisons", comparisons, (list, tuple))
    groups: dict = {}
    for i, item in enumerate(comparisons):
        if not isinstance(item, (list, tuple)) or len(item) != 2 or not isinstance(item[0], MeasuredRow):
            raise FormatRuleError(f"comparisons[{i}]: must be a (MeasuredRow, predicted µs or RefsimError) pair as "
                                  f"compare() returns; got {item!r:.80}")
        row, pred = item
        if not isinstance(pred, RefsimError):
            pred = require_real(f"comparisons[{i}][1]", pred)
        g = groups.setdefault((row.gpu, row.kernel, row.cache), {"errors": [], "unreliable": 0, "refused": 0})
        if isinstance(pred, RefsimError):
            g["refused"] += 1
        elif not row.reliable:
            g["unreliable"] += 1
        else:
            g["errors"].append(abs(pred / row.median_us - 1.0))
    out = {}
    for key in sorted(groups):
        e = groups[key]["errors"]
        out[key] = {"rows": len(e), "median": statistics.median(e) if e else float("nan"),
                    "max": max(e) if e else float("nan"), "unreliable": groups[key]["unreliable"],
                    "refused": groups[key]["refused"]}
    return out


def predicted_vs_measured() -> dict:
    """Every kernel latency measured on a real GPU that the model predicts, grouped by GPU:
    ``{gpu: [(kernel, source, measured µs, predicted µs), ...]}`` from the measured tables (reliable
    rows, under their conditions), the papers' published latencies (``published.csv`` rows in µs,
    one GPU and one layer set, under the row's conditions) and the calibration table (its GPU's
    panel, source ``calibration``: in-sample). For the report's predicted-vs-measured figure."""
    from refsim.gpu_model import published
    out: dict = {}
    for row, pred in compare():
        if row.reliable and not isinstance(pred, RefsimError):
            out.setdefault(row.gpu, []).append((row.kernel, row.table, row.median_us, pred))
    rows = [r for r in published.load() if r.unit == "us" and len(r.alternatives) == 1]
    for c in published.compare(rows, include_in_sample=True):
        gpu = c.row.alternatives[0][0]
        source = "calibration" if c.row.in_sample else "published"
        out.setdefault(gpu, []).append((c.row.kernel, source, c.row.value, c.model))
    return out


def error_stats(points) -> tuple[float, float, int]:
    """(median, max) absolute relative error and the count of ``(kernel, source, measured, predicted)``
    points."""
    require_instance("points", points, (list, tuple))
    e = [abs(p / m - 1.0) for _, _, m, p in points]
    if not e:
        raise FormatRuleError("points: must hold at least one (kernel, source, measured, predicted) point")
    return statistics.median(e), max(e), len(e)
