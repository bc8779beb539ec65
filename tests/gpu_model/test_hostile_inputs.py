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
    m = 1 if kernel == "awq-w4a16" else 16          # awq-w4a16 refuses from M = 2 (untrusted)
    gpu = "h100-sxm" if kernel in ("deepgemm-fp8", "hopper-w4a16") else "a10"     # sm_90a-only kernels
    a = predict(gpu, kernel, np.int64(m), np.int32(4096), np.uint16(4096), bits, group)
    b = predict(gpu, kernel, m, 4096, 4096, mod.DEFAULT_BITS, mod.DEFAULT_GROUP)
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


# ---- np.str_ names, NumPy scalars and 0-d arrays: the Python call's result, type for type -------------
def test_a_numpy_str_gpu_or_kernel_name_gives_the_breakdown_of_the_str():
    from refsim.gpu_model import cycle, layers, problem
    from refsim.gpu_model.names import resolve
    want = predict("a10", "marlin", 16, 4096, 4096)
    got = predict(np.str_("a10"), np.str_("marlin"), 16, 4096, 4096)
    assert got == want and type(got.gpu) is str and type(got.kernel) is str
    assert get_gpu(np.str_("h100")) is get_gpu("h100-sxm")
    assert type(resolve(np.str_("kernel"), np.str_("Marlin-24"), KERNELS)) is str
    assert cycle.cycle_time(np.str_("a10"), np.str_("marlin"), 1, 4096, 4096) == cycle.cycle_time("a10", "marlin", 1,
                                                                                                 4096, 4096)
    assert layers.predict_layers(np.str_("a10"), np.str_("marlin"), 1, [("q", 4096, 4096, 1)]) == \
        layers.predict_layers("a10", "marlin", 1, [("q", 4096, 4096, 1)])
    pb = problem.problem("a10", "marlin", 4096, 4096, cache=np.str_("dirty"), timing=np.str_("events"))
    assert type(pb.cache) is str and type(pb.timing) is str


def test_numpy_scalars_in_spec_text_fields_and_gpu_files_are_stored_as_str():
    from refsim.gpu_model.gpufile import gpu_file_dict
    g = dataclasses.replace(G, name=np.str_("np-a10"), ecc=np.str_("none"))
    assert type(g.name) is str and type(g.ecc) is str
    assert gpu_file_dict(np.str_("a10"), np.str_("my-a10"), {}, {}) == gpu_file_dict("a10", "my-a10", {}, {})


def test_numpy_floats_in_the_l2_rules_give_python_results():
    big = 2.0 * G.l2_bytes
    assert type(conditions.fits_in_l2(G, np.float32(1e6))) is bool
    assert conditions.l2_hit_fraction(G, np.float32(big)) == conditions.l2_hit_fraction(G, float(np.float32(big)))
    assert type(conditions.l2_hit_fraction(G, np.float32(big))) is float


def test_numpy_lane_counts_and_flags_are_legal():
    from refsim.gpu_model import loop
    from refsim.gpu_model.kernels import resources
    assert loop.intervals(np.int8(64), np.uint8(128), np.float16(128)) == loop.intervals(64, 128, 128)
    assert resources.anyprec("8.6", 1, 4, np.bool_(False)) == resources.anyprec("8.6", 1, 4, False)


# ---- records normalise their fields on construction and on dataclasses.replace ------------------------
def test_a_breakdown_built_with_numpy_scalars_holds_python_types():
    bd = predict("a10", "marlin", 16, 4096, 4096)
    np_bd = dataclasses.replace(bd, kernel=np.str_(bd.kernel), m=np.int64(bd.m), latency_s=np.float32(1e-5),
                                ctas=np.uint16(bd.ctas), launches=np.int8(1))
    assert np_bd == dataclasses.replace(bd, latency_s=float(np.float32(1e-5)))
    assert [type(getattr(np_bd, f)) for f in ("kernel", "m", "latency_s", "ctas", "launches")] == \
        [str, int, float, int, int]
    with pytest.raises(FormatRuleError, match="^Breakdown.m: must be an integer"):
        dataclasses.replace(bd, m=16.0)


def test_every_gpu_model_record_refuses_a_wrong_type_by_field_name():
    from refsim.gpu_model import calibrate, layers, measured, shapes
    row = calibrate.load_rows()[0]
    for bad in ({"n": np.array([row.n])}, {"bits": 2**64 + 3}, {"k": None}, {"latency_us": float("nan")}):
        with pytest.raises(RefsimError, match="^CalibrationRow\\."):
            dataclasses.replace(row, **bad)
    assert dataclasses.replace(row, n=np.uint32(row.n), gpu=np.str_(row.gpu)) == row
    m = measured.load()[0]
    with pytest.raises(FormatRuleError, match="^MeasuredRow.table: must be one of"):
        dataclasses.replace(m, table="H100_MARLIN_CUBLAS.CSV")
    s = shapes.get_model("llama-2-7b")
    assert type(dataclasses.replace(s, layers=np.int8(32)).layers) is int
    lr = layers.LayerResult("q", np.int64(4096), 4096, np.uint8(1), predict("a10", "marlin", 1, 4096, 4096))
    assert (type(lr.n), type(lr.count)) == (int, int)


def test_occupancy_holds_python_ints_whether_built_or_replaced():
    from refsim.gpu_model.occupancy import Occupancy, occupancy
    occ = occupancy(G, 128, 48)
    assert Occupancy(np.int8(occ.ctas_per_sm), np.str_(occ.limiter), np.int64(occ.warps_per_sm), occ.limits) == occ
    assert type(occ._replace(ctas_per_sm=np.uint8(3)).ctas_per_sm) is int
    with pytest.raises(FormatRuleError, match="^ctas_per_sm: must be an integer"):
        occ._replace(ctas_per_sm=3.0)


def test_a_loop_body_is_a_tuple_of_instructions_that_wait_only_for_earlier_ones():
    from refsim.gpu_model.loop import Instr, Loop
    body = [Instr("dram", 0, dram_bytes=512.0), Instr("int", 4, deps=(0,))]
    assert Loop(body, np.bool_(True)) == Loop(tuple(body), True)
    assert type(Instr(np.str_("int"), np.int64(4), wavefronts=np.float32(2)).wavefronts) is float
    for bad, rule in (([], "non-empty"), ([Instr("int", 4, deps=(0,))], "deps: must hold indices in \\[0, 0\\)"),
                      ([Instr("int", 4, deps=(5,))], "deps"), ([Instr("warp", 4)], "pipe: must be one of"),
                      ([None], "body\\[0\\]: must be a Instr")):
        with pytest.raises(FormatRuleError, match=rule):
            Loop(bad, False)


# ---- zero, tiny or huge values that would divide by zero or overflow: named errors ------------------------
@pytest.mark.parametrize("call, name", [
    (lambda: roofline.stream_bandwidth(G, 1e308), "bytes_in_flight"),
    (lambda: roofline.dram_time(1e6, G, 100, 1, 5e-324), "bytes_in_flight_per_cta"),
])
def test_a_dram_stream_outside_double_precision_is_a_named_error(call, name):
    with pytest.raises(FormatRuleError, match=f"^{name}: the DRAM stream's bandwidth"):
        call()


def test_microbenchmark_constants_that_divide_by_zero_are_named_errors():
    from refsim.gpu_model import microbench
    args = dict(b=2**26, q=2**22, empty_s=3e-6, ramp_s=7e-7, bw_max=3e12, l0=5e-7, p=2.3, dirty=0.3, l2_bytes=5e7)
    assert microbench.read_time_s(**{**args, "b": np.int32(2**26)}) == microbench.read_time_s(**args)
    for bad in ({"bw_max": 5e-324}, {"l0": 1e308}, {"p": 1e308}):
        with pytest.raises(FormatRuleError, match="^q, bw_max, l0, p: the read model's bandwidth"):
            microbench.read_time_s(**{**args, **bad})
    fit = microbench.Fit(132, 3e-6, 7e-7, 3e12, 5e-7, 2.3, 0.3, math.nan, math.nan, 20, 0.01)
    for bad in ({"sms": 0}, {"dram_bw_max": 0.0}, {"sms": None}, {"l2_latency_s": -1.0}):
        with pytest.raises(FormatRuleError, match="^Fit\\."):
            dataclasses.replace(fit, **bad)
    assert microbench.spec_fields(fit, np.float32(3.35e12), np.float64(1.98e9)) == \
        microbench.spec_fields(fit, float(np.float32(3.35e12)), 1.98e9)


# ---- work bounded before it starts; malformed containers named ---------------------------------------
def test_a_cycle_simulation_beyond_its_work_bound_is_refused_before_it_runs():
    from refsim.gpu_model import cycle
    body = cycle.anyprec_body(8, 8)                      # 1382 instructions
    with pytest.raises(FormatRuleError, match=r"^warps \* iterations \* len\(body\): warp instructions simulated "
                                              r"must be <= 1048576"):
        cycle.simulate(body, 64, G, 1.5e9, iterations=4096)
    assert cycle.simulate(tuple(body[:115]), 2, "a10", np.float32(1.5e9), iterations=2) == \
        cycle.simulate(body[:115], 2, G, 1.5e9, iterations=2)


def test_malformed_comparisons_and_problems_are_named_errors():
    from refsim.gpu_model import measured, problem
    with pytest.raises(FormatRuleError, match="^comparisons\\[0\\]: must be a \\(MeasuredRow"):
        measured.summary([()])
    row = measured.load()[0]
    with pytest.raises(FormatRuleError, match="^comparisons\\[0\\]\\[1\\]: must be a real number"):
        measured.summary([(row, "1.0")])
    with pytest.raises(FormatRuleError, match="^pb: must be a refsim.gpu_model.problem.Problem"):
        problem.check_m(None, 16)
