"""The published-numbers table (refsim/data/timings/published.csv) and its comparison with the
model: the file loads and cites a source per row, malformed rows are named errors, compare()
gives one finite row per published number, and hand-checked rows carry the papers' values."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from refsim.errors import FormatRuleError, RefsimError
from refsim.gpu_model import published
from refsim.gpu_model.kernels import predict
from refsim.gpu_model.roofline import dram_roofline_s
from refsim.gpu_model.specs import get_gpu
from refsim.testing import examples

HEADER = ",".join(published.COLUMNS) + "\n"
ROW = ("atom-nvbench-m512,atom,efeslab/Atom figures/bench_gemm.png,figure-read,rtx4090,atom-w4a4,,512,"
       "4096x4096,4,128,us,31.5,,sustained,n/a,nvbench,no,hidden 4096\n")


def _write(tmp_path, text, name="pub.csv"):
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return path


@pytest.fixture(scope="module")
def rows():
    return published.load()


@pytest.fixture(scope="module")
def comparisons():
    return published.compare()


def test_the_committed_table_loads_and_every_row_names_a_source(rows):
    assert published.default_csv_path().name == "published.csv"
    assert len(rows) >= 100
    assert len({r.id for r in rows}) == len(rows)
    for r in rows:
        assert r.source.strip() and r.paper in published.PAPERS
        assert r.ecc in published.ECC and r.value > 0
    # every seed paper with GPU kernel numbers is represented; QIGen (CPU only) has none
    assert {r.paper for r in rows} == {"marlin", "atom", "any-precision-llm", "two-four-sixteen-bit"}
    assert not any(r.in_sample for r in rows)          # in-sample rows come only from the calibration CSV


def test_header_comment_names_the_sources():
    head = [ln for ln in published.default_csv_path().read_text(encoding="utf-8").splitlines() if ln.startswith("#")]
    text = "\n".join(head)
    for fragment in ("marlin_artifact", "efeslab/Atom", "held out", "two-four-sixteen-bit", "qigen"):
        assert fragment in text


def test_a_well_formed_row_parses_to_the_typed_values(tmp_path):
    [r] = published.load(_write(tmp_path, "# comment\n" + HEADER + ROW))
    assert (r.id, r.gpu, r.kernel, r.baseline, r.m, r.bits, r.group_size, r.unit, r.value, r.clock) == \
        ("atom-nvbench-m512", "rtx4090", "atom-w4a4", None, 512, 4, 128, "us", 31.5, "sustained")
    assert r.alternatives == (("rtx4090", ((4096, 4096),)),)


def _swap(field, value, row=ROW):
    cells = row.rstrip("\n").split(",")
    cells[published.COLUMNS.index(field)] = value
    return ",".join(cells) + "\n"


@pytest.mark.parametrize("text,fragment", [
    (HEADER + _swap("source", ""), ":3: column source: every row must name its source"),
    (HEADER + _swap("gpu", "rtx9090"), ":3: column gpu: must name GPUs refsim models"),
    (HEADER + _swap("kernel", "exllama"), ":3: column kernel: must be one of"),
    (HEADER + _swap("shape", "4096*4096"), ":3: column shape: must be NxK"),
    (HEADER + _swap("shape", "4096x4096|4096x11008"), ":3: column shape: alternatives ('|') need aggregate"),
    (HEADER + _swap("gpu", "rtx4090|a10"), ":3: column gpu: alternatives ('|') need aggregate"),
    (HEADER + _swap("shape", "4096x4096+1x1|2x2").replace(",,sustained", ",min,sustained"),
     ":3: column shape: must not mix"),
    (HEADER + _swap("clock", "fast"), ":3: column clock: must be one of ['base', 'boost', 'sustained'] or an SM clock"),
    (HEADER + _swap("clock", "50"), ":3: column clock"),
    (HEADER + _swap("value", "-3"), ":3: column value: must be a finite number > 0"),
    (HEADER + _swap("value", "nan"), ":3: column value"),
    (HEADER + _swap("unit", "ms"), ":3: column unit"),
    (HEADER + _swap("baseline", "cublas-fp16"), ":3: column baseline: must be empty for a latency row"),
    (HEADER + _swap("unit", "x"), ":3: column baseline: must be one of"),
    (HEADER + _swap("m", "0"), ":3: column m: must be an integer >= 1"),
    (HEADER + _swap("ecc", "maybe"), ":3: column ecc"),
    (HEADER + _swap("timing", "stopwatch"), ":3: column timing"),
    (HEADER + _swap("in_sample", "y"), ":3: column in_sample"),
    (HEADER + ROW + ROW, ":4: column id: must be unique"),
    (HEADER + ROW.rsplit(",", 1)[0] + "\n", ":3: row must have 19 cells; got 18"),
    (HEADER.replace("timing,", "") + ROW, "header must be exactly"),
    ("# only a comment\n", "got no data lines"),
], ids=["no-source", "unknown-gpu", "unknown-kernel", "bad-shape", "alternatives-without-aggregate",
        "gpu-alternatives-without-aggregate", "mixed-sum-and-alternatives", "bad-clock", "clock-too-low",
        "negative-value", "nan-value", "bad-unit", "baseline-on-latency", "speedup-without-baseline", "zero-m",
        "bad-ecc", "bad-timing", "bad-in-sample", "duplicate-id", "short-row", "bad-header", "no-data"])
def test_malformed_rows_name_file_line_column_and_rule(tmp_path, text, fragment):
    path = _write(tmp_path, "# c\n" + text)
    with pytest.raises(RefsimError) as info:
        published.load(path)
    assert isinstance(info.value, FormatRuleError)
    assert fragment in str(info.value) and str(path) in str(info.value)


def test_missing_file_and_non_utf8_are_named_errors(tmp_path):
    with pytest.raises(FormatRuleError, match="readable file"):
        published.load(tmp_path / "absent.csv")
    with pytest.raises(FormatRuleError, match="UTF-8"):
        published.load(_write(tmp_path, HEADER.encode() + b"\xff\xfe\x00bad\n"))


@settings(max_examples=examples(60))
@given(st.binary(max_size=300), st.integers(0, len(HEADER + ROW)))
def test_truncated_and_random_files_give_rows_or_a_named_error(tmp_path_factory, junk, cut):
    tmp = tmp_path_factory.mktemp("pub")
    for data in ((HEADER + ROW).encode()[:cut], junk, HEADER.encode() + junk):
        path = tmp / "f.csv"
        path.write_bytes(data)
        try:
            got = published.load(path)
        except FormatRuleError as err:
            assert str(path) in str(err)
        else:
            assert all(r.value > 0 and r.source for r in got)


def test_compare_returns_one_finite_row_per_published_number(rows, comparisons):
    n_in = len(published.in_sample_rows())
    assert n_in == 142
    assert len(comparisons) == len(rows) + n_in
    assert [c.row.id for c in comparisons[:len(rows)]] == [r.id for r in rows]
    assert all(c.row.in_sample for c in comparisons[len(rows):])
    for c in comparisons:
        assert math.isfinite(c.model) and math.isfinite(c.roofline)
        assert math.isfinite(c.model_error) and math.isfinite(c.roofline_error)
    only = published.compare(rows[:3], include_in_sample=False)
    assert [c.row.id for c in only] == [r.id for r in rows[:3]]


def _by_id(comparisons):
    return {c.row.id: c for c in comparisons}


# Values typed from the sources (not computed): Marlin artifact result/marlin.csv and
# marlin_sustained.csv (A10, 72k x 18k, g128), Atom Sec. 5.3.1 and its NVBench table, Any-Precision
# Sec. 6.2 (Fig. 11), 2/4/16 Sec. 6.3.
HAND_CHECKED = {
    "marlin-f1-marlin-x-m1": (3.87, "x", "sustained", "off"),
    "marlin-f1-marlin-x-m128": (1.55, "x", "sustained", "off"),
    "marlin-f1-marlin24-x-m16": (5.15, "x", "sustained", "off"),
    "marlin-f1-marlin-us-m64": (1540.0, "us", "sustained", "off"),
    "marlin-f10-marlin-x-m128": (1.01, "x", 885e6, "off"),
    "marlin-f10-awq-x-m1": (2.96, "x", 885e6, "off"),
    "marlin-f9-a10-llama7b": (3.61, "x", "sustained", "off"),
    "marlin-f9-a100-80gb-llama7b": (2.22, "x", "sustained", "not-stated"),
    "atom-s531-fp16-m512": (3.42, "x", "sustained", "n/a"),
    "atom-s531-int8-m512": (1.92, "x", "sustained", "n/a"),
    "atom-nvbench-m4096": (177.8, "us", "sustained", "n/a"),
    "anyprec-f11-gap-m16": (100.0, "us-over-baseline", "base", "n/a"),
    "mixed-2-4-16-s63-min": (1.16, "x", "sustained", "not-stated"),
    "mixed-2-4-16-s63-max": (3.23, "x", "sustained", "not-stated"),
}


@pytest.mark.parametrize("rid", sorted(HAND_CHECKED))
def test_hand_checked_rows_carry_the_papers_values_and_conditions(rows, rid):
    value, unit, clock, ecc = HAND_CHECKED[rid]
    [r] = [r for r in rows if r.id == rid]
    assert (r.value, r.unit, r.clock, r.ecc) == (value, unit, clock, ecc)
    # the clock always; ECC only where the source states it; NVBench's cold measurement is a
    # memset-flushed (dirty) L2 timed between CUDA events
    want = {"clock": clock, "ecc": ecc} if ecc in ("on", "off") else {"clock": clock}
    if r.timing == "nvbench":
        want.update(cache="dirty", timing="events")
    assert published.conditions(r) == want


def test_marlin_shapes_are_the_benchmarks(rows):
    r = _by_id(published.compare(rows, include_in_sample=False))
    # marlin_bench.py: (k, n) = (4*256*72, 256*72) for the "ideal" A10 matrix; Llama7B's four layers
    assert r["marlin-f1-marlin-x-m1"].row.alternatives == (("a10", ((18432, 73728),)),)
    assert r["marlin-f9-a10-llama7b"].row.alternatives == \
        (("a10", ((12288, 4096), (4096, 4096), (21504, 4096), (4096, 10752))),)


def test_speedup_row_is_baseline_over_kernel_under_the_same_conditions(comparisons):
    c = _by_id(comparisons)["marlin-f10-marlin-x-m64"]
    kernel = predict("a10", "marlin", 64, 18432, 73728, 4, 128, clock=885e6, ecc="off")   # artifact: ECC off
    base = predict("a10", "cublas-fp16", 64, 18432, 73728, clock=885e6, ecc="off")
    assert c.model == base.latency_us / kernel.latency_us
    g = get_gpu("a10")
    assert c.roofline == dram_roofline_s(base.bytes_dram, base.flops, g) / dram_roofline_s(kernel.bytes_dram, kernel.flops, g)


def test_layer_sets_are_summed_and_ranges_aggregated(comparisons):
    by = _by_id(comparisons)
    layers = ((12288, 4096), (4096, 4096), (21504, 4096), (4096, 10752))
    base = sum(predict("rtx3090", "cublas-fp16", 16, n, k).latency_us for n, k in layers)
    kern = sum(predict("rtx3090", "marlin", 16, n, k, 4, 128).latency_us for n, k in layers)
    assert by["marlin-f9-rtx3090-llama7b"].model == pytest.approx(base / kern, rel=1e-12)
    ratios = [predict(g, "cublas-fp16", 1, n, k).latency_us / predict(g, "mixed-2-4-16", 1, n, k, 2, 16).latency_us
              for g in ("rtx2080", "rtx3090", "a100-80gb") for n, k in ((4096, 4096), (11008, 4096), (4096, 11008))]
    assert by["mixed-2-4-16-s63-min"].model == min(ratios) and by["mixed-2-4-16-s63-max"].model == max(ratios)


def test_difference_row_and_latency_row(comparisons):
    by = _by_id(comparisons)
    k = predict("rtx4090", "anyprec", 16, 11008, 4096, 4, None, clock="base").latency_us
    b = predict("rtx4090", "cublas-fp16", 16, 11008, 4096, clock="base").latency_us
    assert by["anyprec-f11-gap-m16"].model == k - b
    atom = predict("rtx4090", "atom-w4a4", 4096, 4096, 4096, 4, 128, cache="dirty", timing="events")
    assert by["atom-nvbench-m4096"].model == atom.latency_us
    # NVBench times a launch between CUDA events after zeroing an L2-sized buffer: the event
    # launch cost and the dirty L2's write-back make it slower than the Nsight Compute figure
    assert atom.latency_us > predict("rtx4090", "atom-w4a4", 4096, 4096, 4096, 4, 128).latency_us
    # Atom's plain roofline uses the INT4 tensor peak
    assert by["atom-nvbench-m4096"].roofline == \
        dram_roofline_s(atom.bytes_dram, atom.flops, get_gpu("rtx4090"), "int4") * 1e6


def test_in_sample_rows_use_the_calibration_conditions():
    rows = published.in_sample_rows()
    first = rows[0]
    # refsim/data/timings/anyprec_rtx4070_laptop.csv line 2 (any-precision-llm table 9)
    assert (first.gpu, first.kernel, first.shape, first.bits, first.m, first.value) == \
        ("rtx4070-laptop", "anyprec", "2048x2048", 3, 1, 9.64)
    assert all(r.in_sample and r.clock == "base" and r.timing == "nsight-compute" for r in rows)


def test_summary_medians_and_maxima_by_hand():
    row = published.load(Path(published.default_csv_path()))[0]
    fake = [published.Comparison(row=row, model=row.value * f, roofline=row.value * g)
            for f, g in ((1.10, 0.5), (0.95, 1.0), (1.30, 2.0))]
    s = published.summary(fake)
    [(key, got)] = s.items()
    assert key == (row.gpu, False) and got["rows"] == 3
    assert got["model_median"] == pytest.approx(0.10) and got["model_max"] == pytest.approx(0.30)
    assert got["roofline_median"] == pytest.approx(0.5) and got["roofline_max"] == pytest.approx(1.0)
    with pytest.raises(FormatRuleError, match="by: must be one of"):
        published.summary(fake, by="clock")


def test_summary_covers_every_row_once(comparisons):
    for by in ("gpu", "kernel", "paper"):
        assert sum(v["rows"] for v in published.summary(comparisons, by=by).values()) == len(comparisons)


def test_paper_table_script_prints_a_row_per_published_number(rows, capsys):
    path = Path(__file__).resolve().parents[2] / "bench" / "paper_table.py"
    spec = importlib.util.spec_from_file_location("paper_table", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.main([])
    out = capsys.readouterr().out
    for r in rows:
        assert f"| {r.id} |" in out
    assert "| rtx4070-laptop (in-sample: calibration) | 142 |" in out


def test_docs_show_the_current_summaries(comparisons):
    """docs/perf_model.md carries the summary tables bench/paper_table.py prints today; when this
    fails, rerun ``PYTHONPATH=$PWD python bench/paper_table.py`` and paste its output into the
    section "Published numbers side by side"."""
    path = Path(__file__).resolve().parents[2] / "bench" / "paper_table.py"
    spec = importlib.util.spec_from_file_location("paper_table_doc", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    doc = (Path(__file__).resolve().parents[2] / "docs" / "perf_model.md").read_text(encoding="utf-8")
    section = doc.split("## Published numbers side by side", 1)[1].split("\n## ", 1)[0]
    out_of_sample = [c for c in comparisons if not c.row.in_sample]
    for line in mod.summary_table(comparisons, "gpu") + mod.summary_table(comparisons, "kernel") \
            + mod.row_table(out_of_sample):
        assert line in section


@pytest.mark.parametrize("junk, byte", [(b"\xff\xfe\x00bad\n", "0xff"), (b"x,\x00,1\n", "0x00")])
def test_a_binary_byte_is_refused_naming_the_file_and_its_line(tmp_path, junk, byte):
    path = _write(tmp_path, HEADER.encode() + ROW.encode() + junk)
    with pytest.raises(FormatRuleError, match=rf"{path.name}:3: must be .*text.*got byte {byte}"):
        published.load(path)


def test_a_row_the_model_refuses_keeps_the_refused_models_value_and_says_so(comparisons):
    # awq-w4a16 refuses from M = 2 (UntrustedModelError); its published rows stay in the comparison
    awq = [c for c in comparisons if c.row.kernel == "awq-w4a16"]
    assert {c.row.m for c in awq if c.refused} == {2, 4, 8, 16, 32, 64, 128}
    assert all(c.refused.startswith("no trustworthy model: kernel awq-w4a16") for c in awq if c.row.m >= 2)
    assert all(c.refused == "" for c in comparisons if c.row.kernel != "awq-w4a16" or c.row.m == 1)
    path = Path(__file__).resolve().parents[2] / "bench" / "paper_table.py"
    spec = importlib.util.spec_from_file_location("paper_table_refused", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    lines = mod.row_table(awq)
    assert sum("(refused)" in line for line in lines) == sum(bool(c.refused) for c in awq) == 14
