"""The model against every measured table (refsim/data/timings/h100_*.csv), and where the model's
constants come from: never from the rows it is judged on."""

import json
import math

import pytest

from refsim.errors import FormatRuleError
from refsim.gpu_model import measured, microbench, published
from refsim.gpu_model.specs import SOURCES, get_gpu

# median / max |error| the model keeps on the H100 tables (rows with p90/min > 1.5 excluded); the
# closing targets are 8 % / 25 % - the rows that miss them are named in docs/perf_model.md
BOUNDS = {("cublas-fp16", "dirty"): (0.095, 0.155), ("cublas-fp16", "warm"): (0.085, 0.16),
          ("marlin", "dirty"): (0.09, 0.30), ("marlin", "warm"): (0.105, 0.31),
          ("anyprec", "dirty"): (0.065, 0.25), ("atom-w4a4", "dirty"): (0.02, 0.035)}


def test_tables_load_with_their_conditions():
    rows = measured.load()
    assert len(rows) == 80 + 54 + 18
    assert {r.kernel for r in rows} == {"cublas-fp16", "marlin", "anyprec", "atom-w4a4"}
    assert sum(not r.reliable for r in rows) == 2              # Marlin M = 64, 18432^2 cold; cuBLAS M = 64 warm
    cond = measured.conditions(rows[0])
    assert cond == {"clock": 1980e6, "ecc": "on", "timing": "events", "cache": "dirty"}
    assert all(r.cache in ("dirty", "warm") for r in rows)
    assert {r.group_size for r in rows if r.kernel == "marlin"} == {None, 128}


def test_model_against_every_measured_table(capsys):
    comparisons = measured.compare()
    summary = measured.summary(comparisons)
    with capsys.disabled():
        print("\ngpu, kernel, cache: rows, median |error|, max |error| (H100 SXM tables, model vs measured)")
        for (gpu, kernel, cache), s in summary.items():
            print(f"  {gpu} {kernel:12s} {cache:5s} {s['rows']:3d}  {s['median']:6.1%}  {s['max']:6.1%}"
                  f"  (bimodal excluded: {s['unreliable']})")
    for (gpu, kernel, cache), s in summary.items():
        assert s["refused"] == 0, (kernel, cache)        # every kernel the H100 ran is predicted
        med, worst = BOUNDS[(kernel, cache)]
        assert s["median"] <= med and s["max"] <= worst, (kernel, cache, s)


def test_bimodal_rows_are_listed_not_counted():
    rows = [r for r in measured.load() if not r.reliable]
    cmp_ = measured.compare(rows)
    s = measured.summary(cmp_)
    assert all(v["rows"] == 0 and v["unreliable"] >= 1 for v in s.values())


def test_a_malformed_table_row_is_a_named_error(tmp_path, monkeypatch):
    bad = tmp_path / "h100_atom.csv"
    bad.write_text("gpu,kernel,m,n,k,cache,median_us,min_us,p90_us\nh100-sxm,atom-official,16,4096,4096,cold,x,1,2\n")
    monkeypatch.setattr(measured, "_DIR", tmp_path)
    with pytest.raises(FormatRuleError, match=r"h100_atom.csv:2: column 'median_us'"):
        measured.load(["h100_atom.csv"])
    with pytest.raises(FormatRuleError, match="table"):
        measured.load(["nope.csv"])


# ---- leave one GPU out: the constants of a GPU never come from its judged rows ------------------
def _fit_h100():
    from pathlib import Path
    path = Path(measured.__file__).resolve().parents[1] / "data" / "timings" / "h100_microbenchmarks.json"
    return microbench.fit(json.loads(path.read_text()), get_gpu("h100-sxm").l2_bytes)


def test_h100_constants_are_the_microbenchmark_fit_not_the_timing_tables():
    g = get_gpu("h100-sxm")
    fields = microbench.spec_fields(_fit_h100(), g.dram_peak_bytes_per_s, 1980e6)
    for name in ("launch_events_s", "launch_ramp_s", "dram_achievable_fraction", "dram_latency_s",
                 "dram_curve_sharpness", "l2_dirty_fraction", "l2_bytes_per_clk_per_sm"):
        assert getattr(g, name) == pytest.approx(fields[name], rel=3e-3), name


@pytest.mark.parametrize("gpu", ["h100-sxm", "a10", "rtx4090", "orin-agx-64gb"])
def test_no_constant_of_a_judged_gpu_cites_its_judged_rows(gpu):
    # the tables a GPU is judged on (measured H100 timings, the papers' published rows) are never a source
    judged = ("h100_marlin_cublas", "h100_anyprec", "h100_atom", "published.csv", "timings_")
    for key, (tag, source) in get_gpu(gpu).provenance.items():
        assert not any(j in source for j in judged), (gpu, key, source)
        assert tag != "fitted" or gpu == "rtx4070-laptop" or key == "launch_overhead_s", (gpu, key)


def test_global_fitted_constants_read_only_the_calibration_gpu():
    # calibrate.fit sees only the RTX 4070 Laptop table: the judged GPUs' rows are not among its inputs
    from refsim.gpu_model import calibrate
    assert {r.gpu for r in calibrate.load_rows()} == {"rtx4070-laptop"}
    judged_gpus = {r.gpu for r in measured.load()} | {a for row in published.load() for a, _ in row.alternatives}
    assert "rtx4070-laptop" not in judged_gpus - {"rtx4070-laptop"}
    assert "h100-microbench" in SOURCES


def test_predictions_do_not_move_when_the_judged_rows_do():
    rows = measured.load()[:6]
    before = [p for _, p in measured.compare(rows)]
    doubled = [r.__class__(**{**r.__dict__, "median_us": 2 * r.median_us}) for r in rows]
    after = [p for _, p in measured.compare(doubled)]
    assert before == after and all(isinstance(p, float) for p in before)


def test_h100_medians_stay_inside_the_microbenchmark_fit_error():
    # the microbenchmark the constants come from is itself reproduced within 4 % (log error)
    f = _fit_h100()
    assert f.max_abs_log_error < math.log(1.04) and f.rows == 25
    assert f.sharpness == pytest.approx(2.30, abs=0.01)
