"""The microbenchmark analysis (refsim.gpu_model.microbench) on a recorded output: the H100 SXM's
h100_microbenchmarks.json, and hostile inputs to it."""

import copy
import json
import math
from pathlib import Path

import pytest

from refsim.errors import FormatRuleError
from refsim.gpu_model import microbench

PATH = Path(microbench.__file__).resolve().parents[1] / "data" / "timings" / "h100_microbenchmarks.json"
RESULTS = json.loads(PATH.read_text())
L2 = 50 * 2**20


def test_fit_reproduces_every_cold_read_within_four_percent():
    f = microbench.fit(RESULTS, L2)
    assert f.rows == 7 + 18
    for r in RESULTS["read"]:
        if r["cache"] != "cold":
            continue
        t = microbench.read_time_s(r["bytes"], 132 * 2048 * 16, f.empty_s, f.ramp_s, f.dram_bw_max,
                                   f.dram_latency_s, f.sharpness, f.dirty_fraction, L2)
        assert abs(math.log(t / (r["median_us"] * 1e-6))) < math.log(1.04), r["bytes"]


def test_fit_values_are_physical():
    f = microbench.fit(RESULTS, L2)
    assert 2.9e12 < f.dram_bw_max < 3.35e12                # below the 3.35 TB/s pin rate
    assert 300e-9 < f.dram_latency_s < 500e-9               # pointer-chase range of HBM3 parts
    assert f.empty_s == RESULTS["empty"]["cold"]["median_us"] * 1e-6
    assert 0.0 < f.dirty_fraction < 1.0 and 0.0 < f.ramp_s < 2e-6
    assert 6e12 < f.l2_bytes_per_s < 12e12


def test_spec_fields_are_per_clock_at_the_benchmark_clock():
    f = microbench.fit(RESULTS, L2)
    out = microbench.spec_fields(f, 3350e9, 1980e6)
    assert out["dram_achievable_fraction"] == f.dram_bw_max / 3350e9
    assert out["l2_bytes_per_clk_per_sm"] == pytest.approx(f.l2_bytes_per_s / (132 * 1980e6))
    with pytest.raises(FormatRuleError, match="clock_hz"):
        microbench.spec_fields(f, 3350e9, float("nan"))


@pytest.mark.parametrize("edit, match", [
    (lambda d: d.pop("read"), "must have the key 'read'"),
    (lambda d: d.__setitem__("sms", 0), r"results\['sms'\]"),
    (lambda d: d.__setitem__("sms", True), r"results\['sms'\]"),
    (lambda d: d["read"][0].__setitem__("median_us", float("inf")), "median_us"),
    (lambda d: d["read"][0].__setitem__("cache", "lukewarm"), "cache"),
    (lambda d: d["read_occupancy"][0].__setitem__("threads", "128"), "threads"),
    (lambda d: d.__setitem__("read_occupancy", []), "non-empty"),
    (lambda d: d["empty"].__setitem__("cold", 3.0), "empty"),
])
def test_malformed_results_are_named_errors(edit, match):
    d = copy.deepcopy(RESULTS)
    edit(d)
    with pytest.raises(FormatRuleError, match=match):
        microbench.fit(d, L2)


@pytest.mark.parametrize("bad", [None, [], "x", 3])
def test_results_must_be_a_dict(bad):
    with pytest.raises(FormatRuleError):
        microbench.fit(bad, L2)
    with pytest.raises(FormatRuleError, match="l2_bytes"):
        microbench.fit(RESULTS, 0)
