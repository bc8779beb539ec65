"""refsim.gpu_model.sweep: the value grammar, the rows, the CSV and the PNGs (`refsim sweep` is in tests/commands/test_sweep.py)."""

import csv
import math

import pytest

from refsim.errors import FormatRuleError
from refsim.gpu_model import sweep as sw
from refsim.gpu_model.kernels import predict
from refsim.gpu_model.specs import get_gpu


@pytest.mark.parametrize("text,expected", [
    ("16", [16]),
    ("1..4096", [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096]),
    ("1..100", [1, 2, 4, 8, 16, 32, 64, 100]),          # doubling below B, then B itself
    ("3..3", [3]),
    ("128..512:128", [128, 256, 384, 512]),
    ("100..350:100", [100, 200, 300]),                   # a step that does not land on B stops below it
    ("64, 1,16,1..2", [1, 2, 16, 64]),                   # sorted, unique, spaces ignored
])
def test_parse_values_grammar(text, expected):
    assert sw.parse_values(text, "m") == expected


@pytest.mark.parametrize("text,fragment", [
    ("", "must be a list"),
    ("0", "[1, 2**31 - 1]"),
    ("4..2", "B >= A"),
    ("1..8:0", "[1, 2**31 - 1]"),
    ("a", "INT, A..B or A..B:S"),
    ("1,,2", "INT, A..B or A..B:S"),
    ("-4", "INT, A..B or A..B:S"),
    ("1.5", "INT, A..B or A..B:S"),
    ("1..20000:1", "at most 10000 values"),
    ("2147483648", "[1, 2**31 - 1]"),
])
def test_parse_values_refuses_with_the_rule(text, fragment):
    with pytest.raises(FormatRuleError, match="^n: ") as err:
        sw.parse_values(text, "n")
    assert fragment in str(err.value)


def test_sweep_rows_cover_every_combination_in_nesting_order():
    shapes = sw.grid_shapes([4096], [4096, 11008])
    rows = sw.sweep(["a10", "rtx4090"], ["marlin", "cublas-fp16"], [1, 16], shapes, progress=False)
    assert len(rows) == 2 * 2 * 2 * 1 * 2
    assert [(r.gpu, r.kernel, r.k, r.m) for r in rows[:4]] == [
        ("a10", "marlin", 4096, 1), ("a10", "marlin", 4096, 16), ("a10", "marlin", 11008, 1), ("a10", "marlin", 11008, 16)]
    for r in rows:
        assert r.status == "ok"
        assert r.latency_us == predict(r.gpu, r.kernel, r.m, r.n, r.k).latency_s * 1e6
        assert r.flops == 2 * r.m * r.n * r.k
        assert r.roofline_fraction == pytest.approx(r.roofline_us / r.latency_us, rel=1e-12)
        assert (r.clock_mhz, r.cache, r.timing) == (get_gpu(r.gpu).sustained_clock_hz / 1e6, "cold", "kernel")
        if r.kernel == "cublas-fp16":
            assert r.speedup == 1.0   # the baseline against itself


def test_paired_shapes_take_only_the_pairs_given():
    rows = sw.sweep(["a10"], ["cublas-fp16"], [1], [(4096, 4096), (11008, 4096), (4096, 11008)], progress=False)
    assert [(r.n, r.k) for r in rows] == [(4096, 4096), (11008, 4096), (4096, 11008)]   # no 11008 x 11008
    assert sw.parse_shape(" 11008 : 4096 ") == (11008, 4096)
    for bad in ("4096", "4096x4096", "0:1", "1:2:3", "a:b", f"{2**31}:1"):
        with pytest.raises(FormatRuleError, match="shape"):
            sw.parse_shape(bad)


def test_a_point_a_kernel_refuses_is_a_row_with_the_rule():
    # Marlin needs sm_80 (cp.async, m16n8k16 mma): on the RTX 2080 (sm_75) every point is refused
    rows = sw.sweep(["rtx2080"], ["marlin", "cublas-fp16"], [1], [(4096, 4096)], progress=False)
    marlin, fp16 = rows
    assert marlin.status != "ok" and "marlin" in marlin.status.lower()
    assert math.isnan(marlin.latency_us) and math.isnan(marlin.speedup)
    assert fp16.status == "ok" and fp16.latency_us > 0


@pytest.mark.parametrize("kwargs,fragment", [
    ({"gpus": ["no-such-gpu"]}, "no-such-gpu"),
    ({"gpus": ["h1000"]}, "h100 -> h100-sxm"),                  # the aliases are listed
    ({"kernels": ["nope"]}, "kernel: must be one of"),
    ({"kernels": []}, "kernels: must be a non-empty list"),
    ({"ms": [0]}, "m:"),
    ({"ms": [True]}, "m:"),
    ({"shapes": []}, "shapes: must be a non-empty list"),
    ({"shapes": [(4096,)]}, "shapes[0]"),
    ({"shapes": [(2**31, 1)]}, "n: values must be <= 2**31 - 1"),
    ({"clock": 5e9}, "a10 runs its SMs between 100 and 2034 MHz"),
    ({"timing": "wall"}, "timing"),
    ({"ms": list(range(1, 200)), "shapes": sw.grid_shapes(range(1, 80), range(1, 80))}, "at most 1000000 points"),
    ({"shapes": sw.grid_shapes(range(1, 200), range(1, 200))}, "shapes: at most 10000"),
])
def test_sweep_refuses_bad_arguments_before_any_work(kwargs, fragment):
    args = {"gpus": ["a10"], "kernels": ["marlin"], "ms": [1], "shapes": [(4096, 4096)]} | kwargs
    with pytest.raises(Exception) as err:
        sw.sweep(args.pop("gpus"), args.pop("kernels"), args.pop("ms"), args.pop("shapes"), progress=False, **args)
    assert err.type.__module__.startswith("refsim"), err.type
    assert fragment in str(err.value)


def test_csv_is_in_microseconds_with_the_conditions(tmp_path):
    rows = sw.sweep(["a10"], ["marlin", "anyprec"], [1, 2, 4], [(4096, 4096)], ecc="off", cache="dirty",
                    timing="events", progress=False)
    path = sw.write_csv(rows, tmp_path / "s.csv")
    with path.open() as fh:
        table = list(csv.DictReader(fh))
    assert list(table[0]) == sw.CSV_FIELDS
    assert {"latency_us", "cublas_fp16_us", "roofline_us", "clock_mhz", "ecc", "cache", "timing"} <= set(table[0])
    assert len(table) == 6
    assert [int(r["m"]) for r in table] == [1, 2, 4, 1, 2, 4]
    assert float(table[0]["latency_us"]) == rows[0].latency_us   # repr round-trips a float exactly
    assert 10 < float(table[0]["latency_us"]) < 1000             # microseconds, not seconds
    assert (table[0]["clock_mhz"], table[0]["ecc"], table[0]["cache"], table[0]["timing"]) == (
        "1695.0", "off", "dirty", "events")
    assert table[0]["group_size"] == ""                          # None is an empty cell


@pytest.mark.slow
def test_plot_writes_one_readable_png_per_gpu_with_ok_rows(tmp_path):
    from matplotlib.image import imread
    rows = sw.sweep(["a10", "rtx2080"], ["marlin"], [1, 16], [(4096, 4096)], progress=False)
    paths = sw.plot(rows, tmp_path)
    assert [p.name for p in paths] == ["sweep_a10.png"]          # rtx2080: every point refused
    img = imread(paths[0])
    assert img.ndim == 3 and img.shape[0] > 300 and img.shape[1] > 900


def test_log_axes_carry_several_labelled_ticks():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots()
    ax.plot([1, 256], [20.0, 45.0])
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    sw._log_axis(ax.xaxis, 2)
    sw._log_axis(ax.yaxis, 10)
    fig.canvas.draw()
    ylabels = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
    xlabels = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    plt.close(fig)
    assert len([y for y in ylabels if 20 <= float(y) <= 45]) >= 2       # a narrow range still gets labels
    assert len(xlabels) >= 5


def _plain_rows(gpus, kernels, ms, shapes, **kw):
    """The sweep as a plain loop over points with the per-point predict: the reference its rows must
    equal exactly."""
    from refsim.errors import RefsimError
    from refsim.gpu_model.roofline import dram_roofline_s
    from refsim.gpu_model.trust import trust
    cond = {key: kw[key] for key in ("clock", "ecc", "cache", "timing") if key in kw}
    opts = {key: kw.get(key) for key in ("bits", "group_size")}
    rows = []
    for gpu in gpus:
        g = get_gpu(gpu)
        c = (g.clock_hz(kw.get("clock", "sustained")) / 1e6, kw.get("ecc") or g.ecc, kw.get("cache", "cold"),
             kw.get("timing", "kernel"))
        for kernel in kernels:
            for n, k in shapes:
                for m in ms:
                    base = predict(gpu, "cublas-fp16", m, n, k, **cond).latency_s
                    try:
                        bd = predict(gpu, kernel, m, n, k, **opts, **cond)
                    except RefsimError as err:
                        rows.append(sw.SweepRow(g.name, kernel, m, n, k, opts["bits"], opts["group_size"], *c,
                                                math.nan, base * 1e6, math.nan, math.nan, math.nan, "", math.nan,
                                                math.nan, " ".join(str(err).split()), ""))
                        continue
                    roof = dram_roofline_s(bd.bytes_dram, bd.flops, g)
                    tr = trust(gpu, kernel, m, n, k, opts["bits"], **cond)
                    rows.append(sw.SweepRow(g.name, kernel, m, n, k, bd.bits, opts["group_size"], *c,
                                            bd.latency_s * 1e6, base * 1e6, base / bd.latency_s, roof * 1e6,
                                            roof / bd.latency_s, bd.bottleneck, bd.flops, bd.bytes_dram, "ok", bd.notes,
                                            tr.status, tr.far_off, tr.statement))
    return rows


@pytest.mark.parametrize("kw", [{}, {"clock": "base", "cache": "warm"}, {"ecc": "off", "group_size": 128},
                                {"bits": 4, "cache": "dirty", "timing": "events"}])
def test_sweep_rows_equal_the_per_point_loop(kw):
    # sweep() predicts each (gpu, kernel, n, k) over all of M with kernels.predict_many
    args = (["a10", "rtx2080", "h100-sxm"] if "ecc" not in kw else ["a10", "rtx4090"],
            ["marlin", "anyprec", "atom-w4a4", "cublas-fp16", "awq-w4a16"], [1, 2, 8, 9, 16, 17, 300],
            sw.grid_shapes([4096, 4224], [4096, 11008]))
    got = sw.sweep(*args, progress=False, **kw)
    want = _plain_rows(*args, **kw)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert repr(g) == repr(w)            # NaN rows: repr compares them (nan != nan under ==)
    assert any(r.status != "ok" for r in got) and any(r.status == "ok" for r in got)


def test_fast_row_is_the_dataclass_row():
    import dataclasses
    import pickle
    vals = ("a10", "marlin", 16, 4096, 4096, None, 128, 1695.0, "on", "cold", "kernel", 20.0, 30.0, 1.5, 10.0, 0.5,
            "dram", 5e8, 9e6, "ok", "tile", "validated", False, "validated on published.csv")
    fast, plain = sw._new_row(*vals), sw.SweepRow(*vals)
    assert fast == plain and repr(fast) == repr(plain) and hash(fast) == hash(plain)
    assert dataclasses.asdict(fast) == dataclasses.asdict(plain)
    assert pickle.dumps(fast) == pickle.dumps(plain)
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.m = 3


def test_progress_must_be_a_bool():
    import numpy as np

    with pytest.raises(FormatRuleError, match=r"progress: must be True or False; got array"):
        sw.sweep(["a10"], ["cublas-fp16"], [1], [(4096, 4096)], progress=np.array([True, False]))


def test_coincident_names_the_first_curve_each_curve_lies_on():
    a = ([1, 2, 4], [10.0, 20.0, 40.0])
    near = ([1, 2, 4], [10.05, 20.0, 39.9])        # within 1% everywhere
    apart = ([1, 2, 4], [10.0, 20.0, 44.0])        # 10% off at one point
    other_x = ([1, 2, 8], [10.0, 20.0, 40.0])
    assert sw.coincident([a, near, apart, other_x, a]) == [None, 0, None, None, 0]
    assert sw.coincident([a, near], rel=1e-9) == [None, None]
    assert sw.coincident([([1], [0.0]), ([1], [0.0])]) == [None, 0]


def test_the_plot_labels_shapes_n_by_k_marks_coinciding_series_and_keeps_legends_outside_the_axes():
    import matplotlib.pyplot as plt

    rows = sw.sweep(["a10"], ["marlin", "cublas-fp16"], [1, 16, 256], [(11008, 4096), (4096, 11008)], progress=False)
    fig = sw._figure("a10", rows, "")
    try:
        (legend,) = fig.legends
        labels = [t.get_text() for t in legend.get_texts()]
        assert labels[:2] == ["marlin N x K = 11008 x 4096", "marlin N x K = 4096 x 11008"]
        # cuBLAS predicts the two transposed shapes within 1%: the second is drawn dashed on the first
        assert labels[3] == "cublas-fp16 N x K = 4096 x 11008 (on top of cublas-fp16 N x K = 11008 x 4096, within 1%)"
        lat = fig.axes[0].get_lines()
        styles = {ln.get_linestyle() for ln in lat if ln.get_marker() in ("None", "")}
        assert {"-", "--"} <= styles
        fig.canvas.draw()
        box = legend.get_window_extent()
        assert all(box.y1 < ax.get_window_extent().y0 for ax in fig.axes)    # below every panel, not over one
        speedup_lines = [ln for ln in fig.axes[1].get_lines() if ln.get_marker() in ("None", "")]
        assert len(speedup_lines) == 2 + 1          # the two marlin series and the 1x line, no cuBLAS (1x itself)
    finally:
        plt.close(fig)


def test_a_single_shape_is_named_in_the_title_and_a_model_sweep_fills_the_layer_column(tmp_path):
    import matplotlib.pyplot as plt

    from refsim.gpu_model.shapes import shape_layers, unique_layer_shapes

    rows = sw.sweep(["a10"], ["marlin"], [1, 2], unique_layer_shapes("llama-2-7b"), progress=False,
                    layers=shape_layers("llama-2-7b"))
    assert [(r.n, r.k, r.layer) for r in rows[::2]] == [(4096, 4096, "q_proj/k_proj/v_proj/o_proj"),
                                                         (11008, 4096, "gate_proj/up_proj"), (4096, 11008, "down_proj")]
    with (sw.write_csv(rows, tmp_path / "s.csv")).open() as fh:
        assert [r["layer"] for r in csv.DictReader(fh)][::2] == [r.layer for r in rows[::2]]
    one = sw.sweep(["a10"], ["marlin"], [1, 2], [(11008, 4096)], progress=False)
    assert one[0].layer == ""
    fig = sw._figure("a10", one, "")
    try:
        assert fig._suptitle.get_text().startswith("a10, N x K = 11008 x 4096: predicted by refsim.gpu_model")
    finally:
        plt.close(fig)
    with pytest.raises(FormatRuleError, match=r"layers: must be a dict \(n, k\) -> layer names"):
        sw.sweep(["a10"], ["marlin"], [1], [(4096, 4096)], progress=False, layers={"q": 1})
