"""``refsim report``: run every self-check (and later, performance section) and write report.md."""

from __future__ import annotations

import sys


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "report",
        help="run all self-checks and write refsim-report/report.md",
        description="Run the self-checks of every format (round trips, conformance cases, "
        "quantizer error on a built-in deterministic workload) and the performance sections, "
        "timing each, and write a markdown report.",
    )
    p.add_argument("--out", default="refsim-report", help="output folder (default: refsim-report)")
    p.add_argument("--only", default=None, help="run only sections whose name contains this")
    p.add_argument("--quiet", action="store_true", help="do not print progress lines")
    p.set_defaults(func=_run)


def _run(args) -> int:
    from refsim.report import run_report

    progress = None if args.quiet else (lambda line: print(line, flush=True))
    sections = run_report(args.out, only=args.only, progress=progress)
    n = sum(len(s.results) for s in sections)
    failed = sum(s.failed for s in sections)
    skipped = sum(s.skipped for s in sections)
    print(f"wrote {args.out}/report.md: {n - failed - skipped} of {n} checks passed"
          + (f", {skipped} skipped" if skipped else ""), file=sys.stdout)
    return 1 if failed else 0
