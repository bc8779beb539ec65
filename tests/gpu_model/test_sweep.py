"""refsim.gpu_model.sweep and `refsim sweep`: the value grammar, the rows, the CSV, the PNGs, the CLI errors."""

import csv
import math

import pytest

from refsim.cli import main
from refsim.errors import FormatRuleError
from refsim.gpu_model import sweep as sw
from refsim.gpu_model.kernels import predict


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
    rows = sw.sweep(["a10", "rtx4090"], ["marlin", "cublas-fp16"], [1, 16], [4096], [4096, 11008], progress=False)
    assert len(rows) == 2 * 2 * 2 * 1 * 2
    assert [(r.gpu, r.kernel, r.k, r.m) for r in rows[:4]] == [
        ("a10", "marlin", 4096, 1), ("a10", "marlin", 4096, 16), ("a10", "marlin", 11008, 1), ("a10", "marlin", 11008, 16)]
    for r in rows:
        assert r.status == "ok"
        assert r.latency_s == predict(r.gpu, r.kernel, r.m, r.n, r.k).latency_s
        assert r.flops == 2 * r.m * r.n * r.k
        assert r.roofline_fraction == r.roofline_s / r.latency_s
        if r.kernel == "cublas-fp16":
            assert r.speedup == 1.0   # the baseline against itself


def test_a_point_a_kernel_refuses_is_a_row_with_the_rule():
    # Marlin needs sm_80 (cp.async, m16n8k16 mma): on the RTX 2080 (sm_75) every point is refused
    rows = sw.sweep(["rtx2080"], ["marlin", "cublas-fp16"], [1], [4096], [4096], progress=False)
    marlin, fp16 = rows
    assert marlin.status != "ok" and "marlin" in marlin.status.lower()
    assert math.isnan(marlin.latency_s) and math.isnan(marlin.speedup)
    assert fp16.status == "ok" and fp16.latency_s > 0


@pytest.mark.parametrize("kwargs,fragment", [
    ({"gpus": ["no-such-gpu"]}, "no-such-gpu"),
    ({"kernels": ["nope"]}, "kernel: must be one of"),
    ({"kernels": []}, "kernels: must be a non-empty list"),
    ({"ms": [0]}, "m:"),
    ({"ms": [True]}, "m:"),
    ({"ks": []}, "k: must be a non-empty list"),
    ({"ns": [2**31]}, "n: values must be <= 2**31 - 1"),
    ({"ms": list(range(1, 200)), "ns": list(range(1, 200)), "ks": list(range(1, 200))}, "at most 1000000 points"),
])
def test_sweep_refuses_bad_arguments_before_any_work(kwargs, fragment):
    args = {"gpus": ["a10"], "kernels": ["marlin"], "ms": [1], "ns": [4096], "ks": [4096]} | kwargs
    with pytest.raises(Exception) as err:
        sw.sweep(args.pop("gpus"), args.pop("kernels"), args.pop("ms"), args.pop("ns"), args.pop("ks"), progress=False)
    assert err.type.__module__.startswith("refsim"), err.type
    assert fragment in str(err.value)


def test_csv_has_the_header_and_one_row_per_point(tmp_path):
    rows = sw.sweep(["a10"], ["marlin", "anyprec"], [1, 2, 4], [4096], [4096], progress=False)
    path = sw.write_csv(rows, tmp_path / "s.csv")
    with path.open() as fh:
        table = list(csv.DictReader(fh))
    assert list(table[0]) == sw.CSV_FIELDS
    assert len(table) == 6
    assert [int(r["m"]) for r in table] == [1, 2, 4, 1, 2, 4]
    assert float(table[0]["latency_s"]) == rows[0].latency_s   # repr round-trips a float exactly
    assert table[0]["group_size"] == ""                          # None is an empty cell


def test_plot_writes_one_readable_png_per_gpu_with_ok_rows(tmp_path):
    from matplotlib.image import imread
    rows = sw.sweep(["a10", "rtx2080"], ["marlin"], [1, 16], [4096], [4096], progress=False)
    paths = sw.plot(rows, tmp_path)
    assert [p.name for p in paths] == ["sweep_a10.png"]          # rtx2080: every point refused
    img = imread(paths[0])
    assert img.ndim == 3 and img.shape[0] > 300 and img.shape[1] > 900


def test_cli_writes_csv_and_png(tmp_path, capsys):
    out = tmp_path / "sw"
    assert main(["sweep", "--gpu", "A10", "--kernel", "marlin,cublas-fp16", "--m", "1..64", "--n", "4096",
                 "--k", "4096", "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["sweep.csv", "sweep_a10.png"]
    assert "14 points (14 predicted" in capsys.readouterr().out


@pytest.mark.parametrize("argv,fragment", [
    (["--m", "0..4"], "m: values and steps must lie in"),
    (["--m", "x"], "m: each item must be"),
    (["--gpu", "nope"], "nope"),
    (["--kernel", "nope"], "kernel: must be one of"),
])
def test_cli_errors_are_one_line_exit_2_and_write_nothing(tmp_path, capsys, argv, fragment):
    base = {"--gpu": "a10", "--kernel": "marlin", "--m": "1", "--n": "4096", "--k": "4096"}
    base.update(dict(zip(argv[::2], argv[1::2])))
    out = tmp_path / "sw"
    rc = main(["sweep", *[x for kv in base.items() for x in kv], "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and fragment in err
    assert not out.exists()


def test_cli_refuses_a_non_empty_out_folder_before_any_work(tmp_path, capsys):
    (tmp_path / "keep.txt").write_text("mine")
    rc = main(["sweep", "--gpu", "a10", "--kernel", "marlin", "--m", "1", "--n", "4096", "--k", "4096",
               "--out", str(tmp_path)])
    assert rc == 2 and "new or empty folder" in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]


def _plain_rows(gpus, kernels, ms, ns, ks, **kw):
    """The sweep as a plain loop over points with the per-point predict (the form sweep() had before
    it called predict_many): the reference its rows must equal exactly."""
    from refsim.errors import RefsimError
    from refsim.gpu_model.roofline import dram_roofline_s
    from refsim.gpu_model.specs import get_gpu
    cond = {key: kw[key] for key in ("clock", "ecc", "cache") if key in kw}
    opts = {key: kw.get(key) for key in ("bits", "group_size")}
    rows = []
    for gpu in gpus:
        g = get_gpu(gpu)
        for kernel in kernels:
            for n in ns:
                for k in ks:
                    for m in ms:
                        base = predict(gpu, "cublas-fp16", m, n, k, **cond).latency_s
                        try:
                            bd = predict(gpu, kernel, m, n, k, **opts, **cond)
                        except RefsimError as err:
                            rows.append(sw.SweepRow(g.name, kernel, m, n, k, opts["bits"], opts["group_size"], math.nan,
                                                    base, math.nan, math.nan, math.nan, "", math.nan, math.nan,
                                                    " ".join(str(err).split()), ""))
                            continue
                        roof = dram_roofline_s(bd.bytes_dram, bd.flops, g)
                        rows.append(sw.SweepRow(g.name, kernel, m, n, k, bd.bits, opts["group_size"], bd.latency_s,
                                                base, base / bd.latency_s, roof, roof / bd.latency_s, bd.bottleneck,
                                                bd.flops, bd.bytes_dram, "ok", bd.notes))
    return rows


@pytest.mark.parametrize("kw", [{}, {"clock": "base", "cache": "warm"}, {"ecc": "off", "group_size": 128},
                                {"bits": 4}])
def test_sweep_rows_equal_the_per_point_loop(kw):
    # sweep() predicts each (gpu, kernel, n, k) over all of M with kernels.predict_many
    args = (["a10", "rtx2080", "h100-sxm"] if "ecc" not in kw else ["a10", "rtx4090"],
            ["marlin", "anyprec", "atom-w4a4", "cublas-fp16", "awq-w4a16"], [1, 2, 8, 9, 16, 17, 300],
            [4096, 4224], [4096, 11008])
    got = sw.sweep(*args, progress=False, **kw)
    want = _plain_rows(*args, **kw)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert repr(g) == repr(w)            # NaN rows: repr compares them (nan != nan under ==)
    assert any(r.status != "ok" for r in got) and any(r.status == "ok" for r in got)


def test_fast_row_is_the_dataclass_row():
    import dataclasses
    import pickle
    vals = ("a10", "marlin", 16, 4096, 4096, None, 128, 2e-5, 3e-5, 1.5, 1e-5, 0.5, "dram", 5e8, 9e6, "ok", "tile")
    fast, plain = sw._new_row(*vals), sw.SweepRow(*vals)
    assert fast == plain and repr(fast) == repr(plain) and hash(fast) == hash(plain)
    assert dataclasses.asdict(fast) == dataclasses.asdict(plain)
    assert pickle.dumps(fast) == pickle.dumps(plain)
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.m = 3
