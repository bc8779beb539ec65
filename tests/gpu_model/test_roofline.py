"""Roofline terms on hand-computed cases."""

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refsim.errors import FormatRuleError
from refsim.gpu_model.roofline import (FITTED, ModelParams, combine, dram_roofline_s, dram_time, stream_bandwidth,
                                      writeback_bytes, waves)
from refsim.gpu_model.specs import GPUS, get_gpu
from refsim.testing import examples

G4090 = get_gpu("rtx4090")


def test_dram_time_full_wave_runs_at_achievable_bandwidth():
    bw = 1008e9 * 0.91                                      # 917.28 GB/s
    slots = 128 * 4
    t = dram_time(bw * 1e-3, G4090, ctas=slots, ctas_per_sm=4, bytes_in_flight_per_cta=1e6)
    assert t == pytest.approx(1e-3)


def test_dram_time_is_littles_law_when_too_few_bytes_are_in_flight():
    # one CTA with 1000 B in flight and 500 ns latency -> 2 GB/s -> 2 MB take 1 ms
    t = dram_time(2e6, G4090, ctas=1, ctas_per_sm=1, bytes_in_flight_per_cta=1000)
    assert t == pytest.approx(1e-3)


def test_dram_time_partial_wave_is_slower_per_byte_when_latency_bound():
    g = dataclasses.replace(G4090, sm_count=1)
    # 3 CTAs on 2 slots: wave 1 has 2 CTAs (4 GB/s), wave 2 has 1 CTA (2 GB/s); 1 MB per CTA
    t = dram_time(3e6, g, ctas=3, ctas_per_sm=2, bytes_in_flight_per_cta=1000)
    assert t == pytest.approx(2e6 / 4e9 + 1e6 / 2e9)


def test_waves_counts_resident_slots():
    assert waves(1024, 1, get_gpu("a10")) == pytest.approx(1024 / 72)


def test_combine_overlaps_the_second_pipe_and_adds_fixed_costs():
    p = ModelParams(launch_overhead_s=1e-6, overlap=0.5)
    bd = combine("x", G4090, 1, 8, 8, 4, {"dram": 10e-6, "alu": 4e-6, "smem": 1e-6}, p, n_waves=1.5)
    # T0 1 + tail one DRAM latency 0.5 us (once per launch, not per wave: 1.5 waves) + 10 + 0.5 x 4
    assert bd.latency_s == pytest.approx(1e-6 + 0.5e-6 + 10e-6 + 2e-6)
    assert bd.bottleneck == "dram"
    assert bd.terms["launch"] == 1e-6 and bd.terms["tail"] == pytest.approx(0.5e-6)


def test_combine_names_launch_when_fixed_cost_dominates():
    p = ModelParams(launch_overhead_s=5e-6, overlap=1.0)
    assert combine("x", G4090, 1, 8, 8, 4, {"dram": 1e-6}, p).bottleneck == "launch"


# ----------------------------------------------- one path: the kernel models' calls are checked like anyone's
@pytest.mark.parametrize("call, rule", [
    (lambda: dram_time(1e6, G4090, 3.7, 1, 4096), "ctas: must be an integer"),
    (lambda: dram_time(1e6, G4090, 72, -1, 4096), "ctas_per_sm: must be >= 0"),
    (lambda: dram_time(1e6, G4090, 72, 1, math.nan), "bytes_in_flight_per_cta: must be a finite number"),
    (lambda: dram_time(math.inf, G4090, 72, 1, 4096), "bytes_dram: must be a finite number"),
    (lambda: dram_time(1e6, G4090, 72, 1, 0), "bytes_in_flight_per_cta: must be > 0"),
    (lambda: stream_bandwidth(G4090, 0.0), "bytes_in_flight: must be > 0"),
    (lambda: stream_bandwidth(G4090, 5e-324), "bytes_in_flight: the DRAM stream's bandwidth"),
    (lambda: writeback_bytes(G4090, 10 ** 400), "bytes_dram: must be a finite number"),
    (lambda: combine("x", G4090, 0, 8, 8, 4, {"dram": 1e-6}, FITTED), "m: must be >= 1"),
    (lambda: combine("x", G4090, 1, 8, 8, 4, {"dram": -1e-6}, FITTED), "pipes['dram']: must be a finite number"),
    (lambda: combine("x", G4090, 1, 8, 8, 4, {"dram": 1e-6}, FITTED, n_waves=math.nan), "n_waves: must be"),
    (lambda: combine("x", G4090, 1, 8, 8, 4, {"dram": 1e-6}, FITTED, ctas=-1), "ctas: must be >= 0"),
])
def test_the_roofline_terms_refuse_what_breaks_their_rule(call, rule):
    with pytest.raises(FormatRuleError, match="^" + rule.replace("[", r"\[").replace("]", r"\]")):
        call()


def test_numpy_and_plain_arguments_give_the_same_result_in_python_types():
    assert dram_time(np.float32(8e6), G4090, np.int64(72), np.uint8(2), np.int32(4096)) \
        == dram_time(8e6, G4090, 72, 2, 4096) == dram_time(8000000, G4090, 72, 2, 4096.0)
    plain = combine("x", G4090, 1, 8, 8, 4, {"dram": 1e-6, "alu": 0.0}, FITTED, bytes_dram=64.0, ctas=3)
    mixed = combine(np.str_("x"), G4090, np.int64(1), 8, 8, 4, {"dram": np.float64(1e-6), "alu": 0}, FITTED, bytes_dram=64,
                    ctas=np.int16(3))
    assert mixed == plain and type(mixed.terms["alu"]) is float and type(mixed.bytes_dram) is float
    assert type(mixed.kernel) is str and type(mixed.m) is int and type(mixed.ctas) is int


def test_plain_roofline_is_bytes_over_peak():
    assert dram_roofline_s(1008e6, 0.0, G4090) == pytest.approx(1e-3)


# ----------------------------------------------- property: more bytes never faster at a fixed launch geometry
gpus = st.sampled_from(sorted(GPUS))


@settings(max_examples=examples(50))
@given(gpus, st.floats(1e3, 1e9), st.floats(1.0, 4.0), st.integers(1, 5000), st.integers(1, 16),
       st.floats(256, 65536))
def test_more_bytes_never_faster_at_fixed_launch_geometry(gpu, nbytes, factor, ctas, ctas_per_sm, bif):
    g = get_gpu(gpu)
    assert dram_time(nbytes * factor, g, ctas, ctas_per_sm, bif) >= dram_time(nbytes, g, ctas, ctas_per_sm, bif)
