"""refsim.gpu_model.trust: every prediction says what backs it.

The cache file equals a fresh computation over every table; every row of every measured or
published table that the model misses by more than 2x is flagged by the trust of that prediction
(or refused); the statement's numbers are those of the table's rows (recomputed here from
measured.compare, not read from the module); regimes, M ranges, known deviations and estimated
constants select what they say; docs/perf_model.md shows the current per-kernel table.
"""

import importlib.util
import json
import statistics
from pathlib import Path

import pytest

from refsim.errors import FormatRuleError, RefsimError, UntrustedModelError
from refsim.gpu_model import measured, published, trust
from refsim.gpu_model.kernels import predict

ROOT = Path(__file__).resolve().parents[2]


def _bench():
    spec = importlib.util.spec_from_file_location("trust_table", ROOT / "bench" / "trust_table.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def fresh():
    return trust.build_regimes()


def test_the_cache_file_equals_a_fresh_computation(fresh):
    """When this fails, the model or a table changed: run ``python bench/trust_table.py --write``
    and paste ``python bench/trust_table.py`` into docs/perf_model.md."""
    on_disk = json.loads(trust.CACHE_PATH.read_text(encoding="utf-8"))
    assert on_disk == json.loads(trust.cache_text(fresh))


def test_docs_show_the_current_per_kernel_table(fresh):
    doc = (ROOT / "docs" / "perf_model.md").read_text(encoding="utf-8")
    section = doc.split("## How far to trust a prediction", 1)[1].split("\n## ", 1)[0]
    lines = _bench().markdown(fresh)
    assert len(lines) == 2 + len(fresh["regimes"])
    for line in lines:
        assert line in section


def _far(ratio: float) -> bool:
    return ratio > 2.0 or ratio < 0.5


def test_every_row_off_by_more_than_2x_is_flagged_by_its_prediction():
    flagged = 0
    for row, pred in measured.compare():
        if isinstance(pred, RefsimError) or not _far(pred / row.median_us):
            continue
        t = trust.trust(row.gpu, row.kernel, row.m, row.n, row.k, row.bits, **measured.conditions(row))
        if row.reliable:
            assert t.far_off and "FAR OFF" in t.statement, row.where
        else:       # a bimodal row (its median unreliable): named in the statement at its M
            assert row.where in t.statement and "bimodal" in t.statement, row.where
        flagged += 1
    for c in published.compare(include_in_sample=True):
        r = c.row
        if not _far(c.model / r.value):
            continue
        flagged += 1
        if c.refused:              # no answer at all: the refusal is the flag
            assert c.refused.startswith("no trustworthy model")
            with pytest.raises(UntrustedModelError):
                predict(r.alternatives[0][0], r.kernel, r.m, *r.alternatives[0][1][0], r.bits, r.group_size,
                        **published.conditions(r))
            continue
        for gpu, layers in r.alternatives:
            for n, k in layers:
                t = trust.trust(gpu, r.kernel, r.m, n, k, r.bits, **published.conditions(r))
                assert t.far_off, (r.id, gpu)
    assert flagged >= 15           # the 14 awq-w4a16 rows from M = 2 and the bimodal Marlin row


def test_a_far_off_row_in_a_regime_flags_its_prediction(monkeypatch):
    # the same look-up on a regime whose rows at M = 16 are 2.5x off: FAR OFF there, not at M = 1
    regimes = json.loads(json.dumps(trust._regimes()))
    for r in regimes:
        if (r["table"], r["kernel"], r["cache"]) == ("h100_marlin_cublas.csv", "marlin", "dirty"):
            for e in r["by_m"]:
                if e["m"] == 16:
                    e["high"] = 2.5
    monkeypatch.setattr(trust, "_regimes", lambda: tuple(regimes))
    for fn in (trust._index, trust._cached, trust._setting_cached):
        fn.cache_clear()
    try:
        at16 = trust.trust("h100-sxm", "marlin", 16, 4096, 4096, cache="dirty", timing="events")
        at1 = trust.trust("h100-sxm", "marlin", 1, 4096, 4096, cache="dirty", timing="events")
        between = trust.trust("h100-sxm", "marlin", 24, 4096, 4096, cache="dirty", timing="events")
    finally:
        monkeypatch.undo()
        for fn in (trust._index, trust._cached, trust._setting_cached):
            fn.cache_clear()
    assert at16.far_off and at16.lines()[-1].startswith("FAR OFF")
    assert between.far_off and between.validated_on[0]["local_m"] == (16, 32)
    assert not at1.far_off and "FAR OFF" not in at1.statement


def test_the_statement_gives_the_tables_median_max_and_local_error():
    rows = [(r, p) for r, p in measured.compare(measured.load(["h100_marlin_cublas.csv"]))
            if r.kernel == "marlin" and r.cache == "dirty"]
    errs = [abs(p / r.median_us - 1) for r, p in rows if r.reliable]
    local = [abs(p / r.median_us - 1) for r, p in rows if r.reliable and r.m == 32]
    t = trust.trust("h100-sxm", "marlin", 32, 11008, 4096, cache="dirty", timing="events", clock=1980e6)
    assert t.status == "validated" and len(t.validated_on) == 1
    v = t.validated_on[0]
    assert v["table"] == "h100_marlin_cublas.csv" and (v["m_min"], v["m_max"]) == (1, 128)
    assert v["rows"] == len(errs) == 19
    assert v["median"] == round(statistics.median(errs), 6) and v["max"] == round(max(errs), 6)
    assert v["local_m"] == (32,) and v["local_rows"] == len(local) and v["local_max"] == round(max(local), 6)
    assert f"median {100 * statistics.median(errs):.1f} %, max {100 * max(errs):.1f} %" in t.statement


def test_regimes_match_gpu_kernel_bits_cache_timing_and_the_m_range():
    base = dict(cache="dirty", timing="events")
    assert trust.trust("h100-sxm", "anyprec", 4, 4096, 4096, 3, **base).status == "validated"
    assert trust.trust("h100-sxm", "anyprec", 16, 4096, 4096, 3, **base).status == "unvalidated"   # M > 8
    assert trust.trust("h100-sxm", "marlin", 256, 4096, 4096, **base).status == "unvalidated"      # M > 128
    assert trust.trust("h100-sxm", "marlin", 16, 4096, 4096).status == "unvalidated"   # cold L2, kernel timing
    assert trust.trust("h100-pcie", "marlin", 16, 4096, 4096, **base).status == "unvalidated"      # other GPU
    t = trust.trust("l4", "marlin", 16, 4096, 4096)
    assert t.status == "unvalidated" and t.statement.startswith("unvalidated: outside every validated regime")
    assert "tables for this kernel: a10, marlin 4-bit, cold L2" in t.statement   # where it is validated
    published_a10 = trust.trust("a10", "marlin", 16, 4096, 4096)
    assert [v["table"] for v in published_a10.validated_on] == ["published.csv"]


@pytest.mark.parametrize("gpu, kernel, m, n, bits, want", [
    ("h100-sxm", "cublas-fp16", 256, 8192, None, ["sm90-cublas-fp16-m256"]),
    ("h200", "cublas-fp16", 512, 4096, None, ["sm90-cublas-fp16-m256"]),     # every sm_90 GPU
    ("h100-sxm", "cublas-fp16", 128, 8192, None, []),
    ("a100-80gb", "cublas-fp16", 256, 8192, None, []),
    ("h100-pcie", "marlin", 128, 4096, None, ["sm90-marlin-m128"]),
    ("h100-sxm", "marlin", 64, 4096, None, []),
    ("h100-sxm", "anyprec", 1, 28672, 8, ["sm90-anyprec-b7-8-large-n"]),
    ("h100-sxm", "anyprec", 4, 13824, 7, ["sm90-anyprec-b7-8-large-n"]),
    ("h100-sxm", "anyprec", 1, 28672, 6, []),
    ("h100-sxm", "anyprec", 1, 11008, 8, []),
])
def test_known_deviations_apply_by_compute_capability_kernel_bits_m_and_n(gpu, kernel, m, n, bits, want):
    t = trust.trust(gpu, kernel, m, n, 8192, bits)
    assert [d["id"] for d in t.deviations] == want
    for d in t.deviations:
        assert f"known deviation {d['id']}: " in t.statement and "refsim issue 36" in t.statement


def test_known_deviations_are_data_with_a_source_per_row():
    rows = trust.known_deviations()
    assert {r["id"] for r in rows} == {"sm90-cublas-fp16-m256", "sm90-marlin-m128", "sm90-anyprec-b7-8-large-n"}
    for r in rows:
        assert r["source"] and r["error_min_pct"] <= r["error_max_pct"]


def test_a_malformed_known_deviation_is_refused_naming_file_line_and_column(tmp_path, monkeypatch):
    good = trust.DEVIATIONS_PATH.read_text(encoding="utf-8")
    bad = tmp_path / "known_deviations.csv"
    bad.write_text(good.replace(",256,512,", ",256,many,", 1), encoding="utf-8")
    monkeypatch.setattr(trust, "DEVIATIONS_PATH", bad)
    trust.known_deviations.cache_clear()
    try:
        with pytest.raises(FormatRuleError, match=r"known_deviations.csv:\d+: column m_max: .*'many'"):
            trust.known_deviations()
    finally:
        monkeypatch.undo()
        trust.known_deviations.cache_clear()


@pytest.mark.parametrize("gpu, kw, present, absent", [
    ("l4", {}, {"sustained_clock_hz", "dram_achievable_fraction"}, {"launch_events_s", "l2_dirty_fraction"}),
    ("l4", {"clock": "base"}, {"dram_achievable_fraction"}, {"sustained_clock_hz"}),
    ("l4", {"ecc": "off"}, {"dram_fraction_ecc_toggled"}, {"dram_achievable_fraction"}),
    ("h100-pcie", {"timing": "events", "cache": "dirty"}, {"launch_events_s", "launch_ramp_s", "l2_dirty_fraction"},
     set()),
    ("h100-pcie", {}, {"sustained_clock_hz"}, {"launch_events_s", "l2_dirty_fraction"}),
    ("h100-sxm", {"timing": "events", "cache": "dirty"}, set(), {"launch_events_s", "l2_dirty_fraction"}),
])
def test_the_estimated_constants_are_those_the_prediction_uses(gpu, kw, present, absent):
    t = trust.trust(gpu, "marlin", 16, 4096, 4096, **kw)
    assert present <= set(t.estimates) and not absent & set(t.estimates)
    if present:
        assert "estimated constants (not measured on this GPU): " in t.statement


@pytest.mark.parametrize("gpu, clock, want", [
    ("l4", "sustained", "sustained clock 2040 MHz (estimated)"),
    ("l40s", "sustained", "sustained clock 2520 MHz (estimated)"),
    ("h100-pcie", "sustained", "sustained clock 1755 MHz (estimated)"),
    ("h100-sxm", "sustained", "sustained clock 1980 MHz (measured)"),
    ("a10", "base", "base clock 885 MHz (datasheet)"),
    ("a10", 1.2e9, "1200 MHz clock"),
])
def test_the_clock_is_printed_with_the_provenance_of_its_number(gpu, clock, want):
    assert trust.clock_label(gpu, clock) == want


def test_bad_arguments_are_named_errors_and_a_cached_answer_is_not_shared():
    with pytest.raises(FormatRuleError, match="m: must be >= 1"):
        trust.trust("a10", "marlin", 0, 4096, 4096)
    with pytest.raises(FormatRuleError, match="gpu"):
        trust.trust("no-such-gpu", "marlin", 1, 4096, 4096)
    with pytest.raises(FormatRuleError, match="bits"):
        trust.trust("a10", "anyprec", 1, 4096, 4096, 4.0)
    with pytest.raises(FormatRuleError, match="Trust.status"):
        trust.Trust("trusted", False)
    first = trust.trust("a10", "marlin", 16, 4096, 4096).as_dict()
    first["validated_on"][0]["median"] = 99.0
    first["estimated_constants"].clear()
    again = trust.trust("a10", "marlin", 16, 4096, 4096).as_dict()
    assert again["validated_on"][0]["median"] < 1 and again["estimated_constants"]


def test_a_looked_up_trust_is_the_validated_dataclass():
    import dataclasses
    t = trust.trust("h100-sxm", "marlin", 128, 11008, 4096, cache="dirty", timing="events")
    plain = trust.Trust(**{f.name: getattr(t, f.name) for f in dataclasses.fields(t)})
    assert t == plain and repr(t) == repr(plain) and t.lines() == plain.lines()
