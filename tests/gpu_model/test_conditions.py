"""Measurement conditions as prediction inputs: ECC, L2 cache state, int32 size limits, the result cache."""

import math

import numpy as np

import pytest

from refsim.errors import FormatRuleError, ShapeError
from refsim.gpu_model import conditions
from refsim.gpu_model.kernels import INT32_MAX, clear_caches, kernel_names, predict
from refsim.gpu_model.kernels import predict_reference
from refsim.gpu_model.roofline import FITTED
from refsim.gpu_model.specs import GPUS, get_gpu


# ---- ECC ---------------------------------------------------------------------------------------
def test_a10_ecc_states_use_the_sourced_fractions():
    a10 = get_gpu("a10")
    assert a10.ecc == "on" and a10.dram_achievable_fraction == 0.85          # the A10's default
    off = conditions.with_ecc(a10, "off")
    assert off.dram_achievable_fraction == 0.977 and off.ecc == "off"       # A40 stream read (same die)
    assert conditions.with_ecc(off, "on").dram_achievable_fraction == 0.85   # and back
    assert conditions.with_ecc(a10, None) is a10 and conditions.with_ecc(a10, "on") is a10


def test_ecc_off_speeds_up_a_memory_bound_gemv_toward_the_bandwidth_ratio():
    on = predict("a10", "cublas-fp16", 1, 16384, 16384, ecc="on")
    off = predict("a10", "cublas-fp16", 1, 16384, 16384, ecc="off")
    assert on.bottleneck == off.bottleneck == "dram"
    # a saturated stream scales with the achievable bandwidth; the Little's-law knee costs the same
    # share of each, so the ratio lies between the bandwidth ratio and 1
    ratio = off.terms["dram"] / on.terms["dram"]
    assert 0.85 / 0.977 <= ratio < 0.9


@pytest.mark.parametrize("gpu", ["a100-80gb", "h100-sxm", "h200"])
def test_hbm_ecc_is_side_band_and_changes_nothing(gpu):
    assert predict(gpu, "marlin", 16, 8192, 8192, ecc="off").latency_s == \
        predict(gpu, "marlin", 16, 8192, 8192, ecc="on").latency_s


@pytest.mark.parametrize("gpu", [g for g in GPUS if GPUS[g].ecc == "none"])
def test_cards_without_ecc_refuse_on_and_accept_their_own_state(gpu):
    with pytest.raises(FormatRuleError, match="no ECC switch"):
        predict(gpu, "cublas-fp16", 1, 4096, 4096, ecc="on")
    assert predict(gpu, "cublas-fp16", 1, 4096, 4096, ecc="off").latency_s == \
        predict(gpu, "cublas-fp16", 1, 4096, 4096).latency_s


@pytest.mark.parametrize("bad", ["ON", "yes", True, 1, ""])
def test_ecc_takes_on_off_or_none_only(bad):
    with pytest.raises(FormatRuleError, match="ecc"):
        predict("a10", "marlin", 1, 4096, 4096, ecc=bad)


# ---- cache -------------------------------------------------------------------------------------
def test_warm_l2_streams_a_fitting_working_set_at_l2_bandwidth():
    g = get_gpu("rtx4090")                       # 72 MiB L2: a 4096^2 fp16 matrix (32 MiB) fits
    cold = predict("rtx4090", "cublas-fp16", 1, 4096, 4096)
    warm = predict("rtx4090", "cublas-fp16", 1, 4096, 4096, cache="warm")
    l2_rate = g.l2_bytes_per_clk_per_sm * g.sm_count * g.sustained_clock_hz
    assert warm.latency_s < cold.latency_s
    assert warm.bytes_dram == cold.bytes_dram and "L2-resident" in warm.notes
    # the stream term is the bytes over the L2 rate (plus Little's-law limits, which only slow it)
    assert warm.terms["dram"] >= cold.bytes_dram / l2_rate
    assert warm.terms["dram"] < cold.terms["dram"]


def test_warm_l2_changes_nothing_when_the_working_set_is_far_beyond_the_l2():
    cold = predict("a10", "cublas-fp16", 1, 4096, 4096)        # 32 MiB >> 6 MiB L2: ~0 % survives
    warm = predict("a10", "cublas-fp16", 1, 4096, 4096, cache="warm")
    assert warm.latency_s == cold.latency_s and "changes nothing" in warm.notes


def test_warm_l2_partial_residency_beyond_the_resident_share():
    # h100-sxm keeps 25 MiB for one stream (half of its partitioned 50 MiB L2): a 32 MiB GEMV gets
    # the random-replacement share, between all-DRAM and all-L2
    cold = predict("h100-sxm", "cublas-fp16", 1, 4096, 4096)
    warm = predict("h100-sxm", "cublas-fp16", 1, 4096, 4096, cache="warm")
    small = predict("h100-sxm", "cublas-fp16", 1, 2048, 4096, cache="warm")     # 16 MiB: fully resident
    assert warm.latency_s < cold.latency_s and "random replacement" in warm.notes
    assert "L2-resident" in small.notes


def test_hit_fraction_fixed_point():
    from refsim.gpu_model.conditions import l2_hit_fraction
    g = GPUS["h100-sxm"]
    c = g.l2_resident_bytes
    assert l2_hit_fraction(g, c) == 1.0 and l2_hit_fraction(g, 0.5 * c) == 1.0
    for r in (1.1, 1.28, 2.0, 4.0):
        h = l2_hit_fraction(g, r * c)
        assert 0.0 <= h < 1.0 and h == pytest.approx(math.exp(-r * (1.0 - h)), abs=1e-9)
    assert 0.55 < l2_hit_fraction(g, 1.28 * c) < 0.65
    assert l2_hit_fraction(g, 4.0 * c) < 0.03


def test_dirty_l2_adds_the_write_back_to_a_memory_bound_stream():
    clean = predict("h100-sxm", "cublas-fp16", 1, 8192, 8192)
    dirty = predict("h100-sxm", "cublas-fp16", 1, 8192, 8192, cache="dirty")
    g = GPUS["h100-sxm"]
    extra = g.l2_dirty_fraction * g.l2_bytes           # the 128 MiB stream evicts a whole L2
    assert dirty.terms["dram"] > clean.terms["dram"]
    assert dirty.terms["dram"] / clean.terms["dram"] == pytest.approx(1 + extra / clean.bytes_dram, rel=1e-9)


def test_event_timing_replaces_the_fitted_launch_cost_with_the_measured_one():
    g = GPUS["h100-sxm"]
    k = predict("h100-sxm", "cublas-fp16", 1, 4096, 4096)
    e = predict("h100-sxm", "cublas-fp16", 1, 4096, 4096, timing="events")
    assert e.terms["launch"] == g.launch_events_s + g.launch_ramp_s and k.terms["launch"] == FITTED.launch_overhead_s
    with pytest.raises(FormatRuleError, match="timing"):
        predict("h100-sxm", "cublas-fp16", 1, 4096, 4096, timing="wallclock")


def test_cache_takes_cold_dirty_or_warm_only():
    with pytest.raises(FormatRuleError, match="cache"):
        predict("a10", "marlin", 1, 4096, 4096, cache="hot")


# ---- sizes: O(1) in M and int32 limits ---------------------------------------------------------
@pytest.mark.parametrize("kernel", ["cublas-fp16", "marlin", "sparse-marlin", "int8-w8a8", "atom-w4a4", "anyprec"])
def test_huge_batches_are_predicted_not_refused(kernel):
    bd = predict("a10", kernel, 10**8, 4096, 4096)
    assert math.isfinite(bd.latency_s) and bd.latency_s > 1.0      # ~0.3 PFLOP at A10 rates: seconds


def test_a_huge_batch_of_an_untrusted_kernel_is_refused_as_untrusted_not_by_size():
    from refsim.errors import UntrustedModelError
    with pytest.raises(UntrustedModelError, match="no trustworthy model: kernel awq-w4a16 at M = 100000000"):
        predict("a10", "awq-w4a16", 10**8, 4096, 4096)


def test_marlin_at_a_huge_batch_counts_every_launch():
    bd = predict("a10", "marlin", 10**8, 4096, 4096)
    assert bd.launches == 97657                                  # 97,656 launches of 1024 rows + 256 rows
    assert "97656 x (m_blocks 4, parallel 16, rows 1024)" in bd.notes


@pytest.mark.parametrize("axis", ["m", "n", "k"])
def test_sizes_beyond_int32_are_refused(axis):
    dims = {"m": 16, "n": 4096, "k": 4096}
    dims[axis] = INT32_MAX + 1
    with pytest.raises(ShapeError, match=f"{axis}: the kernels' host APIs take int32"):
        predict("a10", "cublas-fp16", dims["m"], dims["n"], dims["k"])


def test_marlin_refuses_a_weight_index_that_wraps_int32():
    # N*K/32 int4 vectors: 2^20 x 2^16 / 32 = 2^31 > INT32_MAX
    with pytest.raises(ShapeError, match=r"N\*K/32: kernel marlin indexes it with int32"):
        predict("a10", "marlin", 1, 1 << 20, 1 << 16)
    predict("a10", "marlin", 1, 1 << 20, (1 << 16) - 128)        # one k-tile less fits


# ---- result cache ------------------------------------------------------------------------------
def test_cached_results_are_copies_equal_to_a_fresh_computation():
    clear_caches()
    a = predict("a10", "marlin", 16, 4096, 4096)
    a.terms["dram"] = -1.0                                       # a caller scribbling on its result
    b = predict("a10", "marlin", 16, 4096, 4096)
    fresh = predict_reference("a10", "marlin", 16, 4096, 4096)
    assert b is not a and b.terms["dram"] > 0
    assert b == fresh


@pytest.mark.parametrize("kernel", kernel_names())
def test_non_plain_arguments_bypass_the_cache_and_are_still_checked(kernel):
    with pytest.raises(FormatRuleError, match="m: must be an integer"):
        predict("a10", kernel, 16.0, 4096, 4096)
    with pytest.raises(FormatRuleError, match="m: must be an integer"):
        predict("a10", kernel, True, 4096, 4096)


# ---- sweeps take the same conditions -------------------------------------------------------------
def test_sweep_rows_carry_the_conditions_they_were_asked_for():
    from refsim.gpu_model import sweep
    rows = sweep.sweep(["a10"], ["marlin"], [1, 16], [(4096, 4096)], ecc="off", progress=False)
    for r in rows:
        off = predict("a10", "marlin", r.m, 4096, 4096, ecc="off")
        base = predict("a10", "cublas-fp16", r.m, 4096, 4096, ecc="off")
        assert r.latency_us == off.latency_s * 1e6 and r.cublas_fp16_us == base.latency_s * 1e6 and r.ecc == "off"
    with pytest.raises(FormatRuleError, match="no ECC switch"):
        sweep.sweep(["orin"], ["marlin"], [1], [(4096, 4096)], ecc="on", progress=False)
    with pytest.raises(FormatRuleError, match="cache"):
        sweep.sweep(["a10"], ["marlin"], [1], [(4096, 4096)], cache="lukewarm", progress=False)


@pytest.mark.parametrize("kw", [{"cache": np.array(["cold", "warm"])}, {"ecc": np.array(["on"])}, {"cache": None}])
def test_condition_arguments_of_the_wrong_type_are_refused_by_name(kw):
    with pytest.raises(FormatRuleError, match=next(iter(kw))):
        predict("a10", "marlin", 16, 4096, 4096, **kw)
