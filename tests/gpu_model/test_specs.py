"""GPU spec table: vendor peaks reproduced from per-SM rates, provenance on every number."""

import dataclasses

import pytest

from refsim.errors import FormatRuleError
from refsim.gpu_model.specs import GPUS, estimated_fields, expand_provenance, get_gpu, gpu_names

TAGS = {"datasheet", "whitepaper", "microbenchmark", "estimate", "fitted"}


@pytest.mark.parametrize("name, kind, clock, vendor", [
    ("a10", "fp16_f32acc", "boost", 125e12),        # A10 datasheet
    ("rtx4090", "fp16_f32acc", "boost", 165.2e12),  # GeForce: FP32 accumulate at half rate
    ("rtx4090", "fp16_f16acc", "boost", 330.3e12),
    ("rtx4090", "int4", "boost", 1321.2e12),
    ("a100-80gb", "fp16_f32acc", "boost", 312e12),
    ("h100-sxm", "fp16_f32acc", 1830e6, 989.4e12),  # peaks quoted at 1830 MHz (it sustains 1980 under load)
    ("h100-pcie", "fp16_f32acc", 1620e6, 756.5e12),  # 1513 sparse / 2, quoted at 1620 MHz
    ("a100-40gb", "fp16_f32acc", "boost", 312e12),
    ("l4", "fp16_f32acc", "boost", 121e12),          # 242 sparse / 2
    ("l40s", "fp16_f32acc", 2490e6, 362.05e12),      # the datasheet's dense FP16 (FP32 accumulate: full rate)
    ("orin-agx-64gb", "int8", "boost", 85e12),       # 170 sparse / 2
    ("rtx-a6000", "fp16_f32acc", "boost", 154.8e12),
])
def test_tensor_peaks_reproduce_vendor_numbers_within_half_a_percent(name, kind, clock, vendor):
    got = get_gpu(name).tensor_flops(kind, clock)
    assert abs(got - vendor) / vendor < 0.005, (name, kind, got)


def test_the_table_holds_the_targets_and_the_gpus_users_asked_for():
    assert len(GPUS) == 14
    for name in ("a10", "rtx4090", "orin-agx-64gb", "rtx4070-laptop", "h100-sxm", "h100-pcie", "a100-40gb", "l4",
                 "l40s"):
        assert name in gpu_names()


def test_every_number_of_every_gpu_has_its_own_tagged_source():
    # per field, not per group: the trust statement names the fields that are estimates
    state = {"name", "arch", "compute_capability", "provenance", "l2_dirty_bytes"}   # l2_dirty_bytes: a state
    for g in GPUS.values():
        for f in dataclasses.fields(g):
            if f.name in state:
                continue
            assert f.name in g.provenance, (g.name, f.name)
            tag, source = g.provenance[f.name]
            assert tag in TAGS and source, (g.name, f.name, tag)
        assert set(g.provenance) <= {f.name for f in dataclasses.fields(g)}, g.name


def test_a_rows_own_source_wins_over_the_default_and_the_narrower_key_wins():
    h100, l4 = get_gpu("h100-sxm"), get_gpu("l4")
    # the defaults call l2_latency_clk and launch_ramp_s estimates; the H100 SXM row measured them
    assert h100.provenance["l2_latency_clk"][0] == "microbenchmark"
    assert h100.provenance["launch_ramp_s"][0] == "microbenchmark"
    # "sm_count/clocks/dram/l2" is a datasheet; the L4 row's own "sustained_clock_hz" is an estimate
    assert l4.provenance["boost_clock_hz"][0] == "datasheet"
    assert l4.provenance["sustained_clock_hz"][0] == "estimate"
    got = expand_provenance({"sm_count/clocks": ("datasheet", "a"), "sustained_clock_hz": ("estimate", "b"),
                             "tc_*": ("whitepaper", "c")})
    assert got["base_clock_hz"] == ("datasheet", "a") and got["sustained_clock_hz"] == ("estimate", "b")
    assert got["tc_int4_op_per_clk_per_sm"] == ("whitepaper", "c") and "l2_bytes" not in got


@pytest.mark.parametrize("bad, rule", [({"no_such_field": ("datasheet", "x")}, "names no GPUSpec field"),
                                       ({"sm_count": ("guess", "x")}, "tag in"),
                                       ({"sm_count": "datasheet"}, "tag in")])
def test_a_provenance_key_naming_no_field_or_a_bad_tag_is_refused(bad, rule):
    with pytest.raises(FormatRuleError, match=rule):
        expand_provenance(bad)


def test_estimated_fields_are_the_fields_tagged_estimate():
    assert {"sustained_clock_hz", "dram_achievable_fraction"} <= set(estimated_fields(get_gpu("l4")))
    assert "sustained_clock_hz" in estimated_fields(get_gpu("l40s"))
    assert "sustained_clock_hz" not in estimated_fields(get_gpu("h100-sxm"))
    assert estimated_fields(get_gpu("h100-sxm")) == {}
    assert set(estimated_fields(get_gpu("h100-pcie"))) == {"sustained_clock_hz", "launch_events_s", "launch_ramp_s",
                                                           "l2_dirty_fraction"}


def test_specs_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        get_gpu("a10").sm_count = 80


def test_effective_bandwidth_is_derived_from_peak_and_fraction():
    g = get_gpu("orin-agx-64gb")
    assert g.dram_eff_bytes_per_s == pytest.approx(204.8e9 * 0.746)  # ApxInf: 152.8 GB/s measured
    assert abs(g.dram_eff_bytes_per_s - 152.8e9) < 0.2e9


def test_unknown_gpu_lists_the_valid_names():
    with pytest.raises(FormatRuleError, match="rtx4090"):
        get_gpu("rtx5090")


def test_clock_names_and_explicit_frequency():
    g = get_gpu("a10")
    assert g.clock_hz("base") == 885e6 and g.clock_hz("boost") == 1695e6
    assert g.clock_hz(1.0e9) == 1.0e9
    with pytest.raises(FormatRuleError):
        g.clock_hz("turbo")


def test_spec_hash_is_cached_consistent_and_survives_pickling():
    import pickle
    from dataclasses import replace

    from refsim.gpu_model.specs import get_gpu
    g = get_gpu("a10")
    same = replace(g)
    other = replace(g, dram_achievable_fraction=0.9)      # e.g. calibrate's fitted variants
    assert same == g and hash(same) == hash(g)
    assert other != g and hash(other) != hash(g)          # variants do not pile into one bucket
    back = pickle.loads(pickle.dumps(g))
    assert back == g and hash(back) == hash(g) and {g: 1}[back] == 1
