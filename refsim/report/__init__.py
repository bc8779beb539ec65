"""``refsim report``: the self-check and performance report.

Sections are plug-ins: every module in :mod:`refsim.report.sections` defines

    TITLE: str                 the section heading
    ORDER: int                 position in the report (lower first)
    checks() -> list[Check]    self-checks; each ``Check.run()`` returns a one-line detail
                               string and raises (any exception) on failure
    markdown(out_dir) -> str   optional free-form markdown (tables, links to PNGs written to
                               ``out_dir``), run after the checks

The runner times every check and writes ``report.md`` with a PASS/FAIL table per section.
A failed check does not stop the report; the exit status of ``refsim report`` is 1 if any failed.
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

__all__ = ["Check", "CheckResult", "SectionResult", "run_report", "section_modules"]


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


@dataclass
class SectionResult:
    title: str
    results: list[CheckResult] = field(default_factory=list)
    markdown: str = ""
    seconds: float = 0.0

    @property
    def failed(self) -> int:
        return sum(not r.passed for r in self.results)


def section_modules(only: str | None = None) -> list:
    """Imported section modules sorted by ``ORDER``; ``only`` keeps those whose module name or
    title contains it (case-insensitive)."""
    mods = []
    for info in pkgutil.iter_modules(refsim.report.sections.__path__):
        mod = importlib.import_module(f"refsim.report.sections.{info.name}")
        if only and only.lower() not in info.name.lower() and only.lower() not in mod.TITLE.lower():
            continue
        mods.append(mod)
    return sorted(mods, key=lambda m: (m.ORDER, m.__name__))


def _run_check(check: Check) -> CheckResult:
    t0 = time.perf_counter()
    try:
        detail = check.run()
        passed = True
    except Exception as err:  # a failing check is reported, not raised
        tb = traceback.extract_tb(err.__traceback__)[-1]
        detail = f"{type(err).__name__}: {err} ({Path(tb.filename).name}:{tb.lineno})"
        passed = False
    return CheckResult(check.name, passed, " ".join(str(detail).split()), time.perf_counter() - t0)


def run_report(out_dir: Path | str = "refsim-report", only: str | None = None,
               progress: Callable[[str], None] | None = None) -> list[SectionResult]:
    """Run every section, write ``out_dir/report.md``, return the section results."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    sections = []
    for mod in section_modules(only):
        t0 = time.perf_counter()
        sec = SectionResult(mod.TITLE)
        for check in mod.checks():
            res = _run_check(check)
            sec.results.append(res)
            if progress:
                progress(f"[{'PASS' if res.passed else 'FAIL'}] {mod.TITLE} / {res.name} ({res.seconds:.2f} s)")
        if hasattr(mod, "markdown"):
            try:
                sec.markdown = mod.markdown(out_dir)
            except Exception as err:
                sec.results.append(CheckResult("markdown section", False, f"{type(err).__name__}: {err}", 0.0))
        sec.seconds = time.perf_counter() - t0
        sections.append(sec)
    (out_dir / "report.md").write_text(_render(sections))
    return sections


def _render(sections: list[SectionResult]) -> str:
    n_checks = sum(len(s.results) for s in sections)
    n_failed = sum(s.failed for s in sections)
    lines = [
        "# refsim report",
        "",
        f"refsim {refsim.__version__} · Python {platform.python_version()} · NumPy {np.__version__} · "
        f"{platform.machine()} · {time.strftime('%Y-%m-%d %H:%M:%S')}",
        "",
        f"**{n_checks - n_failed} of {n_checks} self-checks passed**"
        + (f", **{n_failed} FAILED**" if n_failed else "") + ".",
        "",
        "| section | checks | failed | seconds |",
        "|---|---:|---:|---:|",
    ]
    lines += [f"| {s.title} | {len(s.results)} | {s.failed} | {s.seconds:.2f} |" for s in sections]
    for s in sections:
        lines += ["", f"## {s.title}", ""]
        if s.results:
            lines += ["| check | result | seconds | detail |", "|---|---|---:|---|"]
            for r in s.results:
                detail = r.detail.replace("|", "\\|")
                lines.append(f"| {r.name} | {'PASS' if r.passed else '**FAIL**'} | {r.seconds:.3f} | {detail} |")
        if s.markdown:
            lines += ["", s.markdown.rstrip()]
    return "\n".join(lines) + "\n"
