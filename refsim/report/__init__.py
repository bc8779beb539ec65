"""``refsim report``: the self-check and performance report.

Sections are plug-ins: every module in :mod:`refsim.report.sections` defines

    TITLE: str                 the section heading
    ORDER: int                 position in the report (lower first)
    checks() -> list[Check]    self-checks; each ``Check.run()`` returns a one-line detail
                               string, raises (any exception) on failure, or raises
                               :class:`SkipCheck` when it cannot run here (missing data);
                               bits are compared with :func:`refsim.testing.assert_bitexact`,
                               whose report (count, worst ULP, first coordinates) becomes the
                               failure's detail
    markdown(out_dir) -> str   optional free-form markdown (tables, links to PNGs written to
                               ``out_dir``), run after the checks

The runner times every check and writes ``report.md`` with a PASS/FAIL/SKIPPED table per section.
A skipped check is counted apart from passes (never shown as one). A failed check does not stop
the report; the exit status of ``refsim report`` is 1 if any failed.
"""

from __future__ import annotations

import importlib
import pkgutil
import platform
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import refsim
import refsim.report.sections
from refsim.errors import FormatRuleError
from refsim.testing.bits import BitMismatch

__all__ = ["Check", "CheckResult", "SectionResult", "SkipCheck", "run_report", "section_modules"]


#: lines of an assert_bitexact report kept in a failing check's one-line detail
_BIT_LINES = 4


class SkipCheck(Exception):
    """Raised by a check that cannot run here (its data is absent); the message says why."""


@dataclass(frozen=True)
class Check:
    """One self-check: ``run()`` returns a one-line detail and raises on failure."""

    name: str
    run: Callable[[], str]


@dataclass(frozen=True)
class CheckResult:
    name: str
    passed: bool
    detail: str
    seconds: float
    skipped: bool = False

    @property
    def status(self) -> str:
        return "SKIPPED" if self.skipped else ("PASS" if self.passed else "FAIL")


@dataclass
class SectionResult:
    title: str
    results: list[CheckResult] = field(default_factory=list)
    markdown: str = ""
    seconds: float = 0.0

    @property
    def failed(self) -> int:
        return sum(not r.passed and not r.skipped for r in self.results)

    @property
    def skipped(self) -> int:
        return sum(r.skipped for r in self.results)


def section_modules(only: str | None = None) -> list:
    """Imported section modules sorted by ``ORDER``; ``only`` keeps those whose module name or
    title contains it (case-insensitive). An ``only`` that matches no section is a
    :class:`~refsim.errors.FormatRuleError` listing the section names."""
    mods = []
    for info in pkgutil.iter_modules(refsim.report.sections.__path__):
        mod = importlib.import_module(f"refsim.report.sections.{info.name}")
        if only and only.lower() not in info.name.lower() and only.lower() not in mod.TITLE.lower():
            continue
        mods.append(mod)
    if only is not None and not mods:
        names = sorted(info.name for info in pkgutil.iter_modules(refsim.report.sections.__path__))
        raise FormatRuleError(f"only: must match a section name or title, one of {names}; got {only!r}")
    return sorted(mods, key=lambda m: (m.ORDER, m.__name__))


def _run_check(check: Check) -> CheckResult:
    t0 = time.perf_counter()
    skipped = False
    try:
        detail = check.run()
        passed = True
    except SkipCheck as why:
        detail, passed, skipped = f"skipped: {why}", False, True
    except BitMismatch as err:  # a bit comparison: its count, worst ULP and first coordinates
        detail, passed = "; ".join(str(err).splitlines()[:_BIT_LINES]), False
    except Exception as err:  # a failing check is reported, not raised
        tb = traceback.extract_tb(err.__traceback__)[-1]
        detail = f"{type(err).__name__}: {err} ({Path(tb.filename).name}:{tb.lineno})"
        passed = False
    return CheckResult(check.name, passed, " ".join(str(detail).split()), time.perf_counter() - t0, skipped)


def run_report(out_dir: Path | str = "refsim-report", only: str | None = None,
               progress: Callable[[str], None] | None = None) -> list[SectionResult]:
    """Run every section, write ``out_dir/report.md``, return the section results.

    Checked before any work: ``only`` must match a section (else FormatRuleError, and an existing
    report is left untouched) and ``out_dir`` must be a writable folder (else OSError)."""
    out_dir = Path(out_dir)
    modules = section_modules(only)
    out_dir.mkdir(parents=True, exist_ok=True)
    probe = out_dir / ".refsim-write-probe"
    probe.write_text("")  # raises OSError now, not after minutes of checks
    probe.unlink()
    from threadpoolctl import threadpool_limits

    sections = []
    # every problem here is small (matrices of a few hundred rows): a multi-threaded BLAS spends
    # more CPU waking and spinning its threads than computing (a 160 x 160 Cholesky: ~80 ms of CPU
    # with the default pool on a loaded 2-core machine, 0.5 ms on one thread), so BLAS/OpenMP
    # pools run one thread for the whole report (as refsim.quant.gptq already does for its fits)
    with threadpool_limits(limits=1):
        for mod in modules:
            sections.append(_run_section(mod, out_dir, progress))
    (out_dir / "report.md").write_text(_render(sections))
    return sections


def _run_section(mod, out_dir: Path, progress) -> SectionResult:
    t0 = time.perf_counter()
    sec = SectionResult(mod.TITLE)
    for check in mod.checks():
        res = _run_check(check)
        sec.results.append(res)
        if progress:
            progress(f"[{res.status}] {mod.TITLE} / {res.name} ({res.seconds:.2f} s)")
    if hasattr(mod, "markdown"):
        try:
            sec.markdown = mod.markdown(out_dir)
        except Exception as err:
            sec.results.append(CheckResult("markdown section", False, f"{type(err).__name__}: {err}", 0.0))
    sec.seconds = time.perf_counter() - t0
    return sec


def _render(sections: list[SectionResult]) -> str:
    n_checks = sum(len(s.results) for s in sections)
    n_failed = sum(s.failed for s in sections)
    n_skipped = sum(s.skipped for s in sections)
    lines = [
        "# refsim report",
        "",
        f"refsim {refsim.__version__} · Python {platform.python_version()} · NumPy {np.__version__} · "
        f"{platform.machine()} · {time.strftime('%Y-%m-%d %H:%M:%S')}",
        "",
        f"**{n_checks - n_failed - n_skipped} of {n_checks} self-checks passed**"
        + (f", **{n_failed} FAILED**" if n_failed else "")
        + (f", {n_skipped} SKIPPED (could not run here)" if n_skipped else "") + ".",
        "",
        "| section | checks | failed | skipped | seconds |",
        "|---|---:|---:|---:|---:|",
    ]
    lines += [f"| {s.title} | {len(s.results)} | {s.failed} | {s.skipped} | {s.seconds:.2f} |" for s in sections]
    for s in sections:
        lines += ["", f"## {s.title}", ""]
        if s.results:
            lines += ["| check | result | seconds | detail |", "|---|---|---:|---|"]
            for r in s.results:
                detail = r.detail.replace("|", "\\|")
                lines.append(f"| {r.name} | {'**FAIL**' if r.status == 'FAIL' else r.status} | {r.seconds:.3f} | {detail} |")
        if s.markdown:
            lines += ["", s.markdown.rstrip()]
    return "\n".join(lines) + "\n"
