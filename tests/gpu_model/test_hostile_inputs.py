"""Hostile inputs to refsim.gpu_model: every wrong argument is a named RefsimError or the right
result, and results are Python numbers whatever NumPy scalar types came in."""

import dataclasses
import math

import numpy as np
import pytest

from refsim.errors import FormatRuleError, RefsimError
from refsim.gpu_model import conditions, roofline
from refsim.gpu_model.kernels import KERNELS, predict, predict_many, predict_reference
from refsim.gpu_model.roofline import Breakdown, ModelParams
from refsim.gpu_model.specs import GPUS, get_gpu

G = get_gpu("a10")


@pytest.mark.parametrize("params", [float("nan"), 1.0, "fitted", [1e-6, 0.5], np.float32(1.0), {"overlap": 0.5}])
def test_params_of_the_wrong_type_are_named_errors(params):
    for call in (predict, predict_reference):
        with pytest.raises(FormatRuleError, match="^params: must be a refsim.gpu_model.roofline.ModelParams or None"):
            call("a10", "marlin", 16, 4096, 4096, params=params)


@pytest.mark.parametrize("kw", [{"launch_overhead_s": float("nan")}, {"overlap": 1.5}, {"overlap": -0.1},
                                {"launch_overhead_s": np.array([1e-6])}, {"overlap": True}, {"overlap": "0.5"}])
def test_model_params_check_their_fields(kw):
    with pytest.raises(FormatRuleError, match="^ModelParams\\."):
        ModelParams(**kw)
    p = ModelParams(launch_overhead_s=np.float32(2e-6), overlap=np.float64(0.5))
    assert type(p.launch_overhead_s) is float and type(p.overlap) is float


@pytest.mark.parametrize("field, value", [("dram_peak_bytes_per_s", 0.0), ("sm_count", np.array([72])),
                                          ("dram_latency_s", float("inf")), ("sm_count", 72.5), ("l2_bytes", -1),
                                          ("ecc", "maybe"), ("dram_achievable_fraction", 1.5), ("name", 3),
                                          ("boost_clock_hz", 1e3), ("sm_count", True)])
def test_a_spec_with_a_bad_field_is_refused_by_name(field, value):
    with pytest.raises(FormatRuleError, match=f"GPUSpec.{field}|GPUSpec clocks"):
        dataclasses.replace(G, **{field: value})


def test_numpy_scalars_in_a_spec_are_stored_as_python_numbers():
    g = dataclasses.replace(G, name="np-a10", sm_count=np.int64(72), dram_peak_bytes_per_s=np.float32(6e11))
    assert type(g.sm_count) is int and type(g.dram_peak_bytes_per_s) is float
    bd = predict(g, "marlin", 16, 4096, 4096)
    assert type(bd.latency_s) is float and hash(g) == hash(dataclasses.replace(g))


@pytest.mark.parametrize("kernel", KERNELS)
def test_numpy_integer_sizes_bits_and_groups_are_legal(kernel):
    from refsim.gpu_model.kernels import kernel_module
    mod = kernel_module(kernel)
    bits = np.int64(mod.DEFAULT_BITS)
    group = None if mod.GROUPS is None or mod.DEFAULT_GROUP is None else np.int32(mod.DEFAULT_GROUP)
    a = predict("a10", kernel, np.int64(16), np.int32(4096), np.uint16(4096), bits, group)
    b = predict("a10", kernel, 16, 4096, 4096, mod.DEFAULT_BITS, mod.DEFAULT_GROUP)
    assert a == b and type(a.m) is int and type(a.bits) is int and type(a.latency_s) is float


def test_numpy_float_clock_gives_python_floats():
    bd = predict("a10", "cublas-fp16", 1, 4096, 4096, clock=np.float32(1.2e9))
    assert all(type(v) is float for v in bd.terms.values()) and type(bd.latency_s) is float


@pytest.mark.parametrize("call", [
    lambda: roofline.dram_roofline_s(1e6, np.float32(1e9), G),
    lambda: roofline.dram_roofline_s(np.uint8(200), 1e9, G),
    lambda: roofline.dram_time(np.float32(8e6), G, np.int64(72), np.uint8(2), np.float32(4096)),
    lambda: roofline.stream_bandwidth(G, np.float32(1e6)),
    lambda: roofline.writeback_bytes(conditions.dirty_l2(G), np.float32(1e6)),
    lambda: roofline.waves(np.int64(144), np.uint8(1), G),
    lambda: conditions.l2_hit_fraction(G, np.float32(7e6)),
    lambda: roofline.combine("x", G, 1, 2, 3, 4, {"dram": np.float32(1e-6)}, roofline.FITTED,
                             bytes_dram=np.float32(10.0)).latency_s,
])
def test_results_are_python_floats_whatever_numpy_scalars_came_in(call):
    out = call()
    assert type(out) is float and math.isfinite(out)


@pytest.mark.parametrize("bad", [float("nan"), -1.0, np.array([1.0]), "1e6", None, True])
def test_amounts_are_checked(bad):
    for call in (lambda: roofline.dram_roofline_s(bad, 1.0, G), lambda: roofline.stream_bandwidth(G, bad),
                 lambda: roofline.writeback_bytes(G, bad)):
        with pytest.raises(FormatRuleError):
            call()


def test_roofline_of_a_missing_tensor_path_is_a_named_error():
    with pytest.raises(FormatRuleError, match="no int4 tensor path"):
        roofline.dram_roofline_s(1e6, 1e9, get_gpu("h100-sxm"), "int4")


@pytest.mark.parametrize("kw", [{"cache": "Warm"}, {"timing": ["events"]}, {"ecc": 1},
                                {"clock": float("nan")}, {"clock": np.array([1e9])}, {"group_size": 128.0},
                                {"bits": 4.0}, {"bits": np.bool_(True)}])
def test_other_wrong_arguments_are_refsim_errors(kw):
    with pytest.raises(RefsimError):
        predict("a10", "marlin", 16, 4096, 4096, **kw)
    with pytest.raises(RefsimError):
        predict_many("a10", "marlin", [16], 4096, 4096, **kw)


def test_every_gpu_and_kernel_answers_or_names_a_rule():
    # no foreign exception anywhere in the table, including the sm_90 INT4 emulation and sm_75 refusals
    for gpu in GPUS:
        for kernel in KERNELS:
            for m in (1, 8, 9, 129):
                try:
                    bd = predict(gpu, kernel, m, 4096, 4096)
                except RefsimError:
                    continue
                assert isinstance(bd, Breakdown) and bd.latency_s > 0
