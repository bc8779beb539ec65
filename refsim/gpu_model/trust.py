"""How far to trust a prediction: what backs it, computed from the tables in refsim/data/timings/.

Every prediction carries a :class:`Trust`: the tables whose rows cover it and the model's error on
them, or "unvalidated" with the GPU constants that are estimates; the known deviations that apply;
and ``far_off`` when rows there are off by more than 2x. The evidence::

    table                         rows                                          how predicted
    h100_*.csv                    measured on an H100 SXM (measured.TABLES)      measured.compare
    published.csv                 the seed papers' numbers (out of sample)      published.compare
    anyprec_rtx4070_laptop.csv    the calibration table (in sample)             published.compare
    known_deviations.csv          regimes shown off by rows kept elsewhere       (ranges as stated)

A **regime** is one (table, GPU, kernel, bits, cache state, timing) and the M values its rows cover
(``m_min`` .. ``m_max``); clocks and ECC states are listed with it, not matched. A prediction is
*validated* by every regime with its GPU, kernel, bits, cache state and timing whose M range holds
its M; the statement gives that regime's median / max |error| and the *local* error: the rows at the
nearest covered M at or below and at or above the prediction's M. error = predicted / measured - 1
(a published row in its own unit: a latency, a speedup or a difference). Bimodal measured rows
(p90 > 1.5 x min) are listed with their regime, never counted; rows a model refuses as untrusted
are counted with the refused model's value (that is why it refuses).

The regimes are computed by :func:`build_regimes` (every row of every table, ~1 s) and kept in
``refsim/data/timings/trust_regimes.json`` (``python bench/trust_table.py --write``;
tests/gpu_model/test_trust.py fails when the file differs from a fresh computation), read once per
process; :func:`trust` caches its answers, so a sweep pays a dictionary look-up per point.
"""

from __future__ import annotations

import copy
import csv
import json
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType

from refsim._validate import require_choice, require_fields, require_instance
from refsim.errors import FormatRuleError, RefsimError
from refsim.gpu_model.problem import _bits, check_size, problem
from refsim.gpu_model.specs import GPUSpec, get_gpu

__all__ = ["Trust", "trust", "build_regimes", "known_deviations", "clock_label", "FAR_OFF", "CACHE_PATH",
           "DEVIATIONS_PATH"]

_DIR = Path(__file__).resolve().parents[1] / "data" / "timings"
CACHE_PATH = _DIR / "trust_regimes.json"
DEVIATIONS_PATH = _DIR / "known_deviations.csv"
#: a prediction whose rows are off by more than this factor (either way) is flagged far off
FAR_OFF = 2.0
_DIGITS = 6          # errors kept to 1e-6 (0.0001 %) in the cache, so a fresh computation compares equal
_NEAREST = 3        # regimes named in an unvalidated statement (same GPU first)
IN_SAMPLE_TABLE = "anyprec_rtx4070_laptop.csv"
PUBLISHED_TABLE = "published.csv"


# ---- evidence ----------------------------------------------------------------------------------
def _mhz(clock) -> str:
    return clock if isinstance(clock, str) else f"{clock / 1e6:.0f} MHz"


def _points() -> list[dict]:
    """One dict per (row, GPU): the regime key, the row's M and where it is, its ratio
    predicted / measured (None when not counted) and its status ('ok', 'bimodal', 'refused')."""
    from refsim.gpu_model import measured, published
    from refsim.gpu_model.problem import kernel_module
    out = []
    for row, pred in measured.compare():
        cond = measured.conditions(row)
        status = "refused" if isinstance(pred, RefsimError) else "ok" if row.reliable else "bimodal"
        out.append(dict(table=row.table, gpu=row.gpu, kernel=row.kernel,
                        bits=_bits(kernel_module(row.kernel), row.bits), cache=cond["cache"],
                        timing=cond["timing"], clock=_mhz(cond["clock"]), ecc=cond["ecc"], m=row.m,
                        where=row.where, ratio=None if status != "ok" else pred / row.median_us, status=status,
                        refused=status == "refused"))
    for c in published.compare(include_in_sample=True):
        r = c.row
        kw = published.conditions(r)
        for gpu in dict.fromkeys(g for g, _ in r.alternatives):
            out.append(dict(table=IN_SAMPLE_TABLE if r.in_sample else PUBLISHED_TABLE, gpu=gpu, kernel=r.kernel,
                            bits=_bits(kernel_module(r.kernel), r.bits), cache=kw.get("cache", "cold"),
                            timing=kw.get("timing", "kernel"), clock=_mhz(r.clock), ecc=r.ecc, m=r.m, where=r.id,
                            ratio=c.model / r.value, status="ok", refused=bool(c.refused)))
    return out


def build_regimes() -> dict:
    """The regimes of every table, computed now (what ``trust_regimes.json`` holds):
    ``{"regimes": [dict(table, gpu, kernel, bits, cache, timing, in_sample, clocks, m_min, m_max,
    ecc, rows, median, max, worst, bimodal, refused, by_m)]}``; ``median`` / ``max`` are |error|
    fractions over the counted rows, ``by_m`` one dict(m, rows, max, low, high, worst) per M
    (``low`` / ``high``: the smallest and largest ratio predicted / measured)."""
    groups: dict = {}
    for p in _points():
        key = (p["table"], p["gpu"], p["kernel"], p["bits"], p["cache"], p["timing"])
        groups.setdefault(key, []).append(p)
    out = []
    for key in sorted(groups, key=lambda t: tuple(str(x) for x in t)):
        ps = groups[key]
        counted = [p for p in ps if p["ratio"] is not None]
        errs = [abs(p["ratio"] - 1.0) for p in counted]
        by_m = []
        for m in sorted({p["m"] for p in counted}):
            at = [p for p in counted if p["m"] == m]
            worst = max(at, key=lambda p: abs(p["ratio"] - 1.0))
            by_m.append({"m": m, "rows": len(at), "max": round(abs(worst["ratio"] - 1.0), _DIGITS),
                         "low": round(min(p["ratio"] for p in at), _DIGITS),
                         "high": round(max(p["ratio"] for p in at), _DIGITS), "worst": worst["where"]})
        worst = max(counted, key=lambda p: abs(p["ratio"] - 1.0)) if counted else None
        table, gpu, kernel, bits, cache, timing = key
        out.append({"table": table, "gpu": gpu, "kernel": kernel, "bits": bits, "cache": cache, "timing": timing,
                    "in_sample": table == IN_SAMPLE_TABLE, "clocks": sorted({p["clock"] for p in ps}),
                    "ecc": sorted({p["ecc"] for p in ps}),
                    "m_min": min(p["m"] for p in ps), "m_max": max(p["m"] for p in ps), "rows": len(counted),
                    "median": round(statistics.median(errs), _DIGITS) if errs else None,
                    "max": round(max(errs), _DIGITS) if errs else None,
                    "worst": worst["where"] if worst else None,
                    "bimodal": [[p["where"], p["m"]] for p in ps if p["status"] == "bimodal"],
                    "refused": sum(p["refused"] for p in ps), "by_m": by_m})
    return {"regimes": out}


def cache_text(doc: dict) -> str:
    """``doc`` (from :func:`build_regimes`) as the text of ``trust_regimes.json``."""
    head = {"generated_by": "python bench/trust_table.py --write (refsim.gpu_model.trust.build_regimes); "
                            "never edit by hand"}
    return json.dumps({**head, **doc}, indent=1, sort_keys=True) + "\n"


@lru_cache(maxsize=1)
def _regimes() -> tuple:
    """The regimes of ``trust_regimes.json`` (as :func:`build_regimes` gives them), read once."""
    try:
        doc = json.loads(CACHE_PATH.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise FormatRuleError(f"{CACHE_PATH.name}: must be the JSON bench/trust_table.py --write writes; got {err}") \
            from None
    return tuple(doc["regimes"])


@lru_cache(maxsize=1)
def _index() -> dict:
    """{(gpu, kernel): [regime]} and {kernel: [regime]} (key (None, kernel))."""
    out: dict = {}
    for r in _regimes():
        out.setdefault((r["gpu"], r["kernel"]), []).append(r)
        out.setdefault((None, r["kernel"]), []).append(r)
    return out


_DEV_COLUMNS = ("id", "compute_capability", "kernel", "bits_min", "bits_max", "m_min", "m_max", "n_min", "n_max",
                "error_min_pct", "error_max_pct", "source", "note")


@lru_cache(maxsize=1)
def known_deviations() -> tuple:
    """The rows of ``known_deviations.csv`` as dicts (ints for the ranges, None where empty; floats
    for the error range in %); a malformed cell is a FormatRuleError naming file, line and column."""
    from refsim.gpu_model.problem import kernel_module
    lines = DEVIATIONS_PATH.read_text(encoding="utf-8").splitlines()
    numbered = [(i + 1, ln) for i, ln in enumerate(lines) if ln.strip() and not ln.startswith("#")]
    parsed = [(i, next(csv.reader([ln]))) for i, ln in numbered]
    if not parsed or tuple(parsed[0][1]) != _DEV_COLUMNS:
        raise FormatRuleError(f"{DEVIATIONS_PATH.name}: header must be {list(_DEV_COLUMNS)}")
    out = []
    for line, cells in parsed[1:]:
        where = f"{DEVIATIONS_PATH.name}:{line}"
        if len(cells) != len(_DEV_COLUMNS):
            raise FormatRuleError(f"{where}: row must have {len(_DEV_COLUMNS)} cells; got {len(cells)}")
        row = dict(zip(_DEV_COLUMNS, (c.strip() for c in cells)))
        for col in ("bits_min", "bits_max", "m_min", "m_max", "n_min", "n_max"):
            text = row[col]
            if text and not (text.isdigit() and int(text) >= 1):
                raise FormatRuleError(f"{where}: column {col}: must be an integer >= 1 or empty; got {text!r}")
            row[col] = int(text) if text else None
        for col in ("error_min_pct", "error_max_pct"):
            try:
                row[col] = float(row[col])
            except ValueError:
                raise FormatRuleError(f"{where}: column {col}: must be a number; got {row[col]!r}") from None
        if not row["source"]:
            raise FormatRuleError(f"{where}: column source: every row must name its source")
        row["kernel"] = kernel_module(row["kernel"]).NAME            # an unknown kernel is refused
        out.append(MappingProxyType(row))
    return tuple(out)


def _in(value: int, lo, hi) -> bool:
    return (lo is None or value >= lo) and (hi is None or value <= hi)


# ---- the statement -----------------------------------------------------------------------------
def _ratio_far(low: float, high: float) -> bool:
    return low < 1.0 / FAR_OFF or high > FAR_OFF


def _pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def _regime_label(r: dict) -> str:
    bits = "" if r["bits"] is None else f" {r['bits']}-bit"
    return (f"{r['gpu']}, {r['kernel']}{bits}, {r['cache']} L2, {r['timing']} timing, clock {'/'.join(r['clocks'])}, "
            f"ECC {'/'.join(r['ecc'])}, M {r['m_min']}..{r['m_max']}" + (", in-sample" if r["in_sample"] else ""))


@dataclass(frozen=True)
class Trust:
    """What backs one prediction. ``status``: 'validated' (a regime covers it) or 'unvalidated'.
    ``validated_on``: one dict per covering regime (table, gpu, kernel, bits, cache, timing, clocks,
    m_min, m_max, rows, median, max, local_m, local_rows, local_max; errors as fractions).
    ``deviations``: the matching rows of known_deviations.csv. ``estimates``: {field: source} of the
    GPU constants this prediction uses that are estimates, then the kernel model's own (its ``ESTIMATES``). The dicts are read-only views (a cached
    Trust is shared); :meth:`as_dict` gives plain copies. ``nearest``: for an unvalidated
    prediction, the regimes of its kernel (labels). ``far_off``: rows here are off by more than
    :data:`FAR_OFF` either way."""

    status: str
    far_off: bool
    validated_on: tuple[Mapping, ...] = ()
    deviations: tuple[Mapping, ...] = ()
    estimates: Mapping = field(default_factory=dict)
    nearest: tuple[str, ...] = ()
    subject: str = ""

    def __post_init__(self) -> None:
        require_fields(self)
        require_choice("Trust.status", self.status, ("validated", "unvalidated"))
        for name in ("validated_on", "deviations"):
            for i, item in enumerate(getattr(self, name)):
                require_instance(f"Trust.{name}[{i}]", item, Mapping)
        for i, item in enumerate(self.nearest):
            require_instance(f"Trust.nearest[{i}]", item, str)
        require_instance("Trust.estimates", self.estimates, Mapping)
        for key, value in self.estimates.items():
            if type(key) is not str or type(value) is not str:
                raise FormatRuleError(f"Trust.estimates: must map field names to sources (str to str); got "
                                      f"{key!r:.40}: {value!r:.40}")

    def lines(self, *, nearest: bool = True, estimates: bool = True) -> list[str]:
        """The statement as lines of text (no prefix); ``nearest`` / ``estimates`` False leave out the
        list of the kernel's tables (unvalidated) and the estimated constants (a report states those
        once per GPU)."""
        out = []
        for v in self.validated_on:
            local = (f"; at M = {'/'.join(map(str, v['local_m']))}: max {_pct(v['local_max'])} "
                     f"({v['local_rows']} rows)")
            if v["local_bimodal"]:
                local += (f"; not counted there: {len(v['local_bimodal'])} bimodal row(s) (p90 > 1.5 x min, "
                          f"the median unreliable): {', '.join(v['local_bimodal'])}")
            refused = (f", {v['refused']} of them refused by the model (counted with its value)"
                       if v["refused"] else "")
            out.append(f"validated on {v['table']} ({v['label']}; {v['rows']} rows{refused}): median "
                       f"{_pct(v['median'])}, max {_pct(v['max'])}{local}")
        if self.status == "unvalidated":
            near = "; ".join(self.nearest) if self.nearest else "none"
            out.append(f"unvalidated: outside every validated regime ({self.subject})"
                       + (f"; tables for this kernel: {near}" if nearest else ""))
        for d in self.deviations:
            out.append(f"known deviation {d['id']}: rows outside this repository are {d['error_min_pct']:+g} to "
                       f"{d['error_max_pct']:+g} % off here (predicted / measured - 1; {d['source']})")
        if self.estimates and estimates:
            out.append("estimated constants (not measured on this GPU): " + ", ".join(self.estimates))
        if self.far_off:
            out.append(f"FAR OFF: rows here are off by more than {FAR_OFF:g}x; do not rank this prediction")
        return out

    @property
    def statement(self) -> str:
        """:meth:`lines` joined with '; '."""
        return "; ".join(self.lines())

    def as_dict(self) -> dict:
        """The fields as JSON-ready values (``--json`` output's ``trust``)."""
        return copy.deepcopy({"status": self.status, "far_off": self.far_off, "statement": self.statement,
                              "validated_on": [dict(v) for v in self.validated_on],
                              "known_deviations": [dict(d) for d in self.deviations],
                              "estimated_constants": dict(self.estimates), "nearest": list(self.nearest)})


def _estimates_used(gpu: GPUSpec, clock="sustained", ecc=None, cache: str = "cold", timing: str = "kernel") -> dict:
    """``{field: source}`` of ``gpu``'s constants tagged ``estimate`` that a prediction under these
    conditions uses: the clock named (an explicit Hz uses none), ``l2_dirty_fraction`` only with a
    dirty L2, ``launch_events_s`` / ``launch_ramp_s`` only with CUDA-event timing, the ECC-toggled
    DRAM fraction instead of the default one when ``ecc`` differs from the card's state."""
    from refsim.gpu_model.specs import estimated_fields
    toggled = ecc is not None and ecc != gpu.ecc
    used = {"l2_dirty_fraction": cache == "dirty", "launch_events_s": timing == "events",
            "launch_ramp_s": timing == "events", "dram_fraction_ecc_toggled": toggled,
            "dram_achievable_fraction": not toggled, "l2_dirty_bytes": False,
            "base_clock_hz": clock == "base", "boost_clock_hz": clock == "boost",
            "sustained_clock_hz": clock == "sustained"}
    return {name: src for name, src in estimated_fields(gpu).items() if used.get(name, True)}


def clock_label(gpu, clock="sustained") -> str:
    """How a prediction's clock is printed: ``sustained clock 2040 MHz (estimated)`` — the SM clock
    and the provenance of the number (estimated, measured, datasheet, whitepaper, fitted); an
    explicit clock (the caller gave it) is ``1500 MHz clock``."""
    g = get_gpu(gpu)
    hz = g.clock_hz(clock)
    if not isinstance(clock, str):
        return f"{hz / 1e6:g} MHz clock"
    tag = g.provenance.get(f"{clock}_clock_hz", ("not stated", ""))[0]
    word = {"estimate": "estimated", "microbenchmark": "measured"}.get(tag, tag)
    return f"{clock} clock {hz / 1e6:g} MHz ({word})"


def trust(gpu, kernel, m, n, k, bits=None, *, clock="sustained", ecc=None, cache="cold",
          timing="kernel") -> Trust:
    """The :class:`Trust` of ``predict(gpu, kernel, m, n, k, bits, clock=..., ecc=..., cache=...,
    timing=...)``: arguments as :func:`refsim.gpu_model.evaluate.predict` takes them (validated the
    same way; ``group_size`` does not change what backs a prediction). Cached for plain arguments."""
    if (type(gpu) is str and type(kernel) is str and type(m) is int and type(n) is int and type(k) is int
            and type(bits) in (int, type(None)) and type(clock) in (str, int, float)
            and type(ecc) in (str, type(None)) and type(cache) is str and type(timing) is str):
        return _cached(gpu, kernel, m, n, k, bits, clock, ecc, cache, timing)
    return _trust(gpu, kernel, m, n, k, bits, clock, ecc, cache, timing)


@lru_cache(maxsize=1 << 16, typed=True)
def _cached(gpu, kernel, m, n, k, bits, clock, ecc, cache, timing) -> Trust:
    return _trust(gpu, kernel, m, n, k, bits, clock, ecc, cache, timing)


def _setting(gpu, kernel, bits, clock, ecc, cache, timing) -> tuple:
    """What does not depend on the shape, validated once (as :func:`problem` validates it):
    (gpu name, kernel name, bits, cache, timing, the regimes with these bits / cache / timing, the
    known deviations of this compute capability, kernel and bits, the estimates used, the nearest
    regimes of the kernel)."""
    pb = problem(gpu, kernel, 1, 1, clock=clock, ecc=ecc, cache=cache, timing=timing)
    name, kern, bits = pb.gpu.name, pb.kernel.NAME, _bits(pb.kernel, bits)
    g = get_gpu(gpu)
    index = _index()
    regimes_here = tuple(r for r in index.get((name, kern), ())
                         if (r["bits"], r["cache"], r["timing"]) == (bits, pb.cache, pb.timing) and r["rows"])
    deviations = tuple(d for d in known_deviations() if d["kernel"] == kern and _in(bits, d["bits_min"], d["bits_max"])
                       and d["compute_capability"] == g.compute_capability)
    mine = sorted(index.get((None, kern), ()), key=lambda r: (r["gpu"] != name, r["bits"] != bits,
                                                               r["cache"] != pb.cache, r["in_sample"]))
    nearest = tuple(f"{_regime_label(r)} [{r['table']}]" for r in mine[:_NEAREST])
    if len(mine) > _NEAREST:
        nearest += (f"{len(mine) - _NEAREST} more (docs/perf_model.md, 'How far to trust a prediction')",)
    estimates = {**_estimates_used(g, clock, ecc, pb.cache, pb.timing), **getattr(pb.kernel, "ESTIMATES", {})}
    return (name, kern, bits, pb.cache, pb.timing, regimes_here, deviations, MappingProxyType(estimates), nearest)


_setting_cached = lru_cache(maxsize=4096, typed=True)(_setting)


def _trust(gpu, kernel, m, n, k, bits, clock, ecc, cache, timing) -> Trust:
    try:
        setting = _setting_cached(gpu, kernel, bits, clock, ecc, cache, timing)
    except TypeError:                    # an unhashable argument: validated (and refused) uncached
        setting = _setting(gpu, kernel, bits, clock, ecc, cache, timing)
    name, kern, bits, cache, timing, regimes_here, deviations_here, estimates, nearest = setting
    m, n, k = check_size("m", m), check_size("n", n), check_size("k", k)
    validated, far = [], False
    for r in regimes_here:
        if not r["m_min"] <= m <= r["m_max"]:
            continue
        below = [e for e in r["by_m"] if e["m"] <= m]
        above = [e for e in r["by_m"] if e["m"] >= m]
        local = ([below[-1]] if below else []) + ([above[0]] if above and (not below or above[0] is not below[-1])
                                                  else [])
        local_m = [e["m"] for e in local]
        far = far or any(_ratio_far(e["low"], e["high"]) for e in local)
        validated.append(MappingProxyType({"table": r["table"], "label": _regime_label(r), "gpu": r["gpu"], "kernel": r["kernel"],
                          "bits": r["bits"], "cache": r["cache"], "timing": r["timing"], "clocks": tuple(r["clocks"]),
                          "m_min": r["m_min"], "m_max": r["m_max"], "rows": r["rows"], "median": r["median"],
                          "max": r["max"], "local_m": tuple(local_m),
                          "local_rows": sum(e["rows"] for e in local), "local_max": max(e["max"] for e in local),
                          "refused": r["refused"],
                          "local_bimodal": tuple(where for where, at in r["bimodal"] if at in local_m)}))
    deviations = []
    for d in deviations_here:
        if _in(m, d["m_min"], d["m_max"]) and _in(n, d["n_min"], d["n_max"]):
            deviations.append(d)
            far = far or _ratio_far(1 + min(d["error_min_pct"], d["error_max_pct"]) / 100,
                                    1 + max(d["error_min_pct"], d["error_max_pct"]) / 100)
    bits_text = f" {bits}-bit" if bits is not None else ""
    subject = f"{kern}{bits_text} on {name}, {cache} L2, {timing} timing, M = {m}"
    # built without __post_init__'s checks (every value here is made by this module; the checks cost
    # as much as the look-up itself): the same object Trust(...) gives
    out = object.__new__(Trust)
    object.__setattr__(out, "__dict__", {
        "status": "validated" if validated else "unvalidated", "far_off": far, "validated_on": tuple(validated),
        "deviations": tuple(deviations), "estimates": estimates, "nearest": nearest if not validated else (),
        "subject": subject})
    return out
