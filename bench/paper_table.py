"""The seed papers' published kernel numbers side by side with the model.

    python bench/paper_table.py [--in-sample-rows]

Prints, as markdown: one line per row of ``refsim/data/timings/published.csv`` (published value,
refsim's prediction under the paper's stated conditions — marked "(refused)" where the model
refuses as untrusted, with the value it would give —, the plain DRAM roofline, signed errors),
then median/max absolute error per GPU and per kernel, for the model and for the plain roofline.
The Any-Precision RTX 4070 Laptop rows refsim is calibrated on are counted in the summaries as a
separate, in-sample group (listed line by line only with ``--in-sample-rows``). This is the
regeneration command of docs/perf_model.md, section "Published numbers side by side".
"""

from __future__ import annotations

import argparse
import math

from refsim.gpu_model.published import compare, summary

PIPE = " \\| "   # a literal | inside a markdown table cell
UNIT_TEXT = {"us": "µs", "x": "× over {b}", "us-over-baseline": "µs over {b}"}


def _clock(c) -> str:
    return c if isinstance(c, str) else f"{c / 1e6:.0f} MHz"


def _shape(shape: str) -> str:
    if "+" in shape:
        return f"{shape.count('+') + 1} layers (Σ)"
    return shape.replace("|", PIPE)


def _num(v: float) -> str:
    return f"{v:.3g}" if abs(v) < 100 else f"{v:.0f}"


def _pct(e: float) -> str:
    return f"{e * 100:+.1f} %" if math.isfinite(e) else "–"


def row_table(comparisons) -> list[str]:
    lines = ["| id | paper, source | GPU | kernel | M | shape (N×K) | unit | clock | ECC | kind | published | "
             "refsim | err | roofline | err |",
             "|---|---|---|---|---:|---|---|---|---|---|---:|---:|---:|---:|---:|"]
    for c in comparisons:
        r = c.row
        unit = UNIT_TEXT[r.unit].format(b=r.baseline)
        if r.aggregate:
            unit = f"{r.aggregate} of {unit}"
        gpu = r.gpu.replace("|", PIPE)
        lines.append(f"| {r.id} | {r.paper}, {r.source} | {gpu} | {r.kernel} | {r.m} | "
                     f"{_shape(r.shape)} | {unit} | {_clock(r.clock)} | {r.ecc} | {r.value_kind} | "
                     f"{_num(r.value)} | {_num(c.model)}{' (refused)' if c.refused else ''} | {_pct(c.model_error)} | {_num(c.roofline)} | "
                     f"{_pct(c.roofline_error)} |")
    return lines


def summary_table(comparisons, by: str) -> list[str]:
    lines = [f"| {by} | rows | refsim median | refsim max | roofline median | roofline max |",
             "|---|---:|---:|---:|---:|---:|"]
    for (group, in_sample), s in summary(comparisons, by=by).items():
        name = str(group).replace("|", PIPE) + (" (in-sample: calibration)" if in_sample else "")
        lines.append(f"| {name} | {s['rows']} | {s['model_median'] * 100:.1f} % | {s['model_max'] * 100:.1f} % | "
                     f"{s['roofline_median'] * 100:.1f} % | {s['roofline_max'] * 100:.1f} % |")
    return lines


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--in-sample-rows", action="store_true", help="also list the 142 calibration rows")
    args = ap.parse_args(argv)
    comps = compare(include_in_sample=True)
    shown = comps if args.in_sample_rows else [c for c in comps if not c.row.in_sample]
    print("\n".join(row_table(shown)))
    print()
    print("\n".join(summary_table(comps, "gpu")))
    print()
    print("\n".join(summary_table(comps, "kernel")))


if __name__ == "__main__":
    main()
