"""How far to trust a prediction, per kernel and table: the regimes of refsim.gpu_model.trust.

    python bench/trust_table.py            # print the markdown table of docs/perf_model.md
    python bench/trust_table.py --write    # recompute refsim/data/timings/trust_regimes.json

Predicts every row of every table the model is judged on (refsim/data/timings/: the H100 tables,
published.csv, the calibration table) under the row's conditions and prints, per kernel, table,
GPU and conditions: the M range, the rows counted, the median and max |error| and the worst row.
This is the regeneration command of docs/perf_model.md, section "How far to trust a prediction"
(tests/gpu_model/test_trust.py pins both the section and the JSON to a fresh computation).
"""

from __future__ import annotations

import argparse

from refsim.gpu_model.trust import CACHE_PATH, build_regimes, cache_text


def _pct(x) -> str:
    return "–" if x is None else f"{100 * x:.1f} %"


def markdown(doc: dict) -> list[str]:
    """One line per regime, grouped by kernel (the table of docs/perf_model.md)."""
    lines = ["| kernel | table | GPU | bits | cache, timing | M | rows | median | max | worst row | not counted |",
             "|---|---|---|---:|---|---|---:|---:|---:|---|---|"]
    for r in sorted(doc["regimes"], key=lambda r: (r["kernel"], r["table"], r["gpu"], str(r["bits"]), r["cache"])):
        skipped = []
        if r["bimodal"]:
            skipped.append(f"{len(r['bimodal'])} bimodal")
        if r["refused"]:
            skipped.append(f"{r['refused']} refused (counted with the refused model's value)")
        table = r["table"] + (" (in-sample)" if r["in_sample"] else "")
        lines.append(f"| {r['kernel']} | {table} | {r['gpu']} | {r['bits'] if r['bits'] is not None else '–'} | "
                     f"{r['cache']}, {r['timing']} | {r['m_min']}..{r['m_max']} | {r['rows']} | {_pct(r['median'])} | "
                     f"{_pct(r['max'])} | {r['worst'] or '–'} | {', '.join(skipped) or '–'} |")
    return lines


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help=f"rewrite {CACHE_PATH.name}")
    args = ap.parse_args(argv)
    doc = build_regimes()
    if args.write:
        CACHE_PATH.write_text(cache_text(doc), encoding="utf-8")
        print(f"wrote {CACHE_PATH} ({len(doc['regimes'])} regimes)")
        return
    print("\n".join(markdown(doc)))


if __name__ == "__main__":
    main()
