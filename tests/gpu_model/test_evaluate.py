"""The fast path (refsim.gpu_model.evaluate: predict's result cache, predict_many's batches) equals the
plain definition (refsim.gpu_model.problem.reference) exactly: floats bit for bit via repr and ==,
notes, terms and their order; a refused entry gives predict's error with its index named."""

import dataclasses
import itertools
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refsim.errors import FormatRuleError, RefsimError, ShapeError
from refsim.gpu_model import evaluate
from refsim.gpu_model.kernels import KERNELS, kernel_module, predict, predict_many, predict_reference
from refsim.gpu_model.roofline import ModelParams
from refsim.gpu_model.specs import GPUS, get_gpu
from refsim.testing import examples

# unsorted, with duplicates, across every path switch (GEMV/GEMM at 2 and 8, Marlin's tile at 16 and
# its launch kinds at 64 / 1024 rows, Atom's 128-row tiles, anyprec's fused/dequant at 8)
MS = [256, 1, 2, 16, 3, 8, 9, 17, 1, 64, 65, 100, 128, 129, 1000, 1024, 1025, 4097, 16, 5000]
SHAPES = [(4096, 4096), (11008, 4096), (4096, 11008), (4224, 4096), (12288, 1536)]


def _bits(x: float) -> int:
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def _float_bits(bd) -> list:
    """Every float of a Breakdown (fields and terms) as its raw 64-bit pattern."""
    out = []
    for f in dataclasses.fields(bd):
        v = getattr(bd, f.name)
        if isinstance(v, float):
            out.append((f.name, _bits(v)))
    out += [(key, _bits(v)) for key, v in bd.terms.items()]
    return out


def _one(gpu, kernel, m, n, k, **kw):
    try:
        return predict(gpu, kernel, m, n, k, **kw)
    except RefsimError as err:
        return err


def assert_same(got, want):
    if isinstance(want, RefsimError):
        assert type(got) is type(want) and str(got) == str(want), (got, want)
        return
    assert type(got) is type(want)
    assert got == want
    assert repr(got) == repr(want)
    assert dataclasses.asdict(got) == dataclasses.asdict(want)
    assert list(got.terms) == list(want.terms)
    assert _float_bits(got) == _float_bits(want)
    assert type(got.m) is int and got.m == want.m


def _reference(gpu, kernel, m, n, k, **kw):
    try:
        return predict_reference(gpu, kernel, m, n, k, **kw)
    except RefsimError as err:
        return err


def check(gpu, kernel, ms, n, k, **kw):
    """predict_many, predict (through its result cache) and the plain reference agree entry by entry."""
    got = predict_many(gpu, kernel, ms, n, k, errors="return", **kw)
    assert isinstance(got, list) and len(got) == len(ms)
    for m, g in zip(ms, got):
        want = _reference(gpu, kernel, m, n, k, **kw)
        assert_same(g, want)
        assert_same(_one(gpu, kernel, m, n, k, **kw), want)
    return got


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("gpu", sorted(GPUS))
def test_every_gpu_and_kernel_equals_predict(gpu, kernel):
    for n, k in SHAPES:
        check(gpu, kernel, MS, n, k)


@pytest.mark.slow
@pytest.mark.parametrize("kernel", KERNELS)
def test_options_equal_predict(kernel):
    mod = kernel_module(kernel)
    groups = mod.GROUPS or (None,)
    # every (gpu, bits, group) meets 3 of the 12 (clock, ecc, cache) settings, rotating so that every setting
    # meets every GPU (CI time: a quarter of the full product)
    settings_ = list(itertools.product(("sustained", "base", 1.3e9), (None, "off"), ("cold", "warm")))
    for i, (gpu, bits, group) in enumerate(itertools.product(
            ("a10", "rtx4090", "orin-agx-64gb", "h100-sxm"), (None,) + tuple(mod.BITS), tuple(groups) + (None, 16))):
        for clock, ecc, cache in settings_[i % 4::4]:
            for n, k in ((4096, 4096), (1024, 2048)):      # M = 256, 2, 3, 9, 64, 100: batched, small, odd, tile edges
                check(gpu, kernel, MS[:12:2], n, k, bits=bits, group_size=group, clock=clock, ecc=ecc, cache=cache)


def test_ecc_on_and_params():
    p = ModelParams(launch_overhead_s=4e-6, overlap=0.5)
    for kernel in KERNELS:
        check("a10", kernel, MS, 4096, 4096, ecc="on", cache="warm")
        check("orin-agx-64gb", kernel, MS[:6], 4096, 4096, ecc="off")
        check("rtx3090", kernel, MS, 4096, 4096, params=p)
        check(get_gpu("rtx4090"), kernel, MS, 4096, 4096)          # a spec object, not a name


def test_refused_gpu_per_entry():
    # ecc 'on' on a card without a switch, Marlin/Atom on sm_75, Atom on Hopper: predict's error, unprefixed
    for gpu, kernel, kw in (("orin-agx-64gb", "marlin", {"ecc": "on"}), ("rtx2080", "marlin", {}),
                            ("rtx2080", "atom-w4a4", {}), ("a10", "no-such-kernel", {}), ("no-gpu", "marlin", {})):
        try:
            predict(gpu, kernel, 16, 4096, 4096, **kw)
        except RefsimError as err:
            want = err
        with pytest.raises(type(want)) as info:
            predict_many(gpu, kernel, [16, 32], 4096, 4096, **kw)
        assert want.args[0] in str(info.value)


def test_results_are_independent_objects():
    out = predict_many("a10", "cublas-fp16", [4, 4, 4], 4096, 4096)
    out[0].terms["dram"] = -1.0
    assert out[1].terms["dram"] > 0 and out[2] == predict("a10", "cublas-fp16", 4, 4096, 4096)
    with pytest.raises(dataclasses.FrozenInstanceError):
        out[1].m = 3


def test_sequence_kinds():
    want = [predict("a10", "marlin", m, 4096, 4096) for m in (1, 2, 3, 4)]
    for ms in ([1, 2, 3, 4], (1, 2, 3, 4), range(1, 5), np.arange(1, 5), np.arange(1, 5, dtype=np.int32),
               [np.int64(1), 2, np.int16(3), 4]):
        got = predict_many("a10", "marlin", ms, 4096, 4096)
        for g, w in zip(got, want):
            assert_same(g, w)


def test_numpy_n_and_k():
    got = predict_many("a10", "anyprec", [1, 16], np.int64(4096), np.int32(4096), bits=3)
    assert got == [predict("a10", "anyprec", m, 4096, 4096, bits=3) for m in (1, 16)]
    assert type(got[0].n) is int and type(got[0].k) is int


@pytest.mark.parametrize("bad, cls", [(0, FormatRuleError), (-3, FormatRuleError), (2**31, ShapeError),
                                      (1.5, FormatRuleError), (True, FormatRuleError), ("4", FormatRuleError),
                                      (None, FormatRuleError), (np.float64(2.0), FormatRuleError)])
def test_bad_m_names_the_index(bad, cls):
    ms = [1, 16, bad, 0, 32]
    try:
        predict("a10", "cublas-fp16", bad, 4096, 4096)
    except RefsimError as err:
        want = err
    assert type(want) is cls
    with pytest.raises(cls) as info:
        predict_many("a10", "cublas-fp16", ms, 4096, 4096)
    assert str(info.value) == f"ms[2] = {bad!r}: {want}"
    assert info.value.__cause__ is not None and str(info.value.__cause__) == str(want)
    got = predict_many("a10", "cublas-fp16", ms, 4096, 4096, errors="return")
    assert_same(got[2], want)
    assert_same(got[3], _one("a10", "cublas-fp16", 0, 4096, 4096))
    assert_same(got[4], predict("a10", "cublas-fp16", 32, 4096, 4096))


def test_kernel_rule_that_depends_on_m():
    # Marlin: N = 4224 is a multiple of thread_n = 128 (M <= 16) but not of 256 (M > 16)
    got = check("a10", "marlin", [1, 16, 17, 2], 4224, 4096)
    assert isinstance(got[2], ShapeError) and not isinstance(got[3], RefsimError)
    with pytest.raises(ShapeError, match=r"^ms\[2\] = 17: n: kernel marlin needs n to be a multiple of 256"):
        predict_many("a10", "marlin", [1, 16, 17, 2], 4224, 4096)
    # anyprec: N % 4 at M = 1, N % 16 above
    got = check("a10", "anyprec", [1, 2, 9], 4100, 4096)
    assert not isinstance(got[0], RefsimError) and isinstance(got[1], ShapeError) and isinstance(got[2], ShapeError)


def test_marlin_int32_index_limit_per_entry():
    # rows*K/8 of one launch: 16 rows fit at K = 2^25, 1024 rows (M >= 1024) do not
    got = check("a10", "marlin", [1, 2048, 16], 256, 2**25)
    assert isinstance(got[1], ShapeError) and "rows*K/8" in str(got[1])
    with pytest.raises(ShapeError, match=r"^ms\[1\] = 2048: rows\*K/8"):
        predict_many("a10", "marlin", [1, 2048, 16], 256, 2**25)


def test_bad_arguments_once():
    for kw, cls in (({"n": 0}, FormatRuleError), ({"k": 2**31}, ShapeError), ({"n": 1.0}, FormatRuleError)):
        args = {"n": 4096, "k": 4096, **kw}
        with pytest.raises(cls, match=r"^[nk]: "):
            predict_many("a10", "marlin", [1, 2], args["n"], args["k"])
    with pytest.raises(FormatRuleError, match="cache"):
        predict_many("a10", "marlin", [1], 4096, 4096, cache="hot")
    with pytest.raises(FormatRuleError, match="errors"):
        predict_many("a10", "marlin", [1], 4096, 4096, errors="ignore")
    with pytest.raises(FormatRuleError, match=r"^ms\[0\] = 1: bits: kernel marlin runs bit-widths \[4\]; got 3"):
        predict_many("a10", "marlin", [1, 2], 4096, 4096, bits=3)


@pytest.mark.parametrize("ms", [[], (), range(0), np.zeros(0, dtype=np.int64)])
def test_empty_batch_refused(ms):
    with pytest.raises(FormatRuleError, match="^ms: must hold at least one batch size"):
        predict_many("a10", "marlin", ms, 4096, 4096)


@pytest.mark.parametrize("ms", [5, "1,2", {1, 2}, None, np.ones((2, 2), dtype=np.int64), (m for m in [1]),
                                {1: 2}])
def test_not_a_sequence_refused(ms):
    with pytest.raises(FormatRuleError, match="^ms: must be a list, tuple, range or 1-D array"):
        predict_many("a10", "marlin", ms, 4096, 4096)


def test_not_from_or_into_the_result_cache():
    evaluate._cached.cache_clear()
    predict_many("a10", "marlin", [1, 2, 3], 4096, 4096)
    assert evaluate._cached.cache_info().currsize == 0


def test_pinned_values_through_predict_many():
    # the values typed into tests/gpu_model/test_problem.py (recorded before the hot-path work)
    import importlib.util
    from pathlib import Path
    spec = importlib.util.spec_from_file_location("_pinned", Path(__file__).with_name("test_problem.py"))
    pinned = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pinned)
    assert len(pinned.PINNED) >= 10
    for (gpu, kernel, m, n, k), kw, want in pinned.PINNED:
        got = predict_many(gpu, kernel, [m, 1, m], n, k, **kw)
        for bd in (got[0], got[2]):
            for name, value in want.items():
                assert getattr(bd, name) == value, (gpu, kernel, m, name)
            assert repr(bd.latency_s) == repr(want["latency_s"])


def test_short_k_gemm_runs_split_k_1():
    # found by the predict_many property test: K < 4 k-slices (cuBLAS K < 128, INT8 K < 256) left no
    # tile candidate and predict crashed with TypeError; split-K 1 is always a candidate now
    from refsim.gpu_model.kernels._common import best_gemm_config
    for kernel, k in (("cublas-fp16", 64), ("cublas-fp16", 96), ("int8-w8a8", 192)):
        bd = predict("a10", kernel, 2, 64, k)
        assert bd.latency_s > 0 and bd.terms["tensor"] > 0
        check("a10", kernel, [1, 2, 9, 2], 64, k)
    assert best_gemm_config(get_gpu("a10"), 1.695e9, 2, 64, 64, 256.0)["split"] == 1


def test_batch_size_limit_and_bool_array():
    with pytest.raises(FormatRuleError, match=f"^ms: at most {evaluate.MAX_BATCH_VALUES} batch sizes"):
        predict_many("a10", "cublas-fp16", range(1, evaluate.MAX_BATCH_VALUES + 2), 4096, 4096)
    with pytest.raises(FormatRuleError, match=r"^ms\[0\] = np.True_: m: must be an integer"):
        predict_many("a10", "cublas-fp16", np.array([True, False]), 4096, 4096)


def test_partly_refused_long_batch_keeps_order_and_indices():
    # Marlin at N = 4224: M <= 16 accepted, M > 16 refused, each refusal with its own index
    ms = list(range(1, 17)) + list(range(17, 60, 3)) + [16, 1, 2] + [100, 3000] + list(range(5, 12))
    got = check("a10", "marlin", ms, 4224, 4096)
    first = next(i for i, m in enumerate(ms) if m > 16)
    assert isinstance(got[first], ShapeError) and not isinstance(got[first - 1], RefsimError)
    with pytest.raises(ShapeError, match=rf"^ms\[{first}\] = {ms[first]}: n: kernel marlin"):
        predict_many("a10", "marlin", ms, 4224, 4096)
    # every entry refused (sm_75): each one is predict's refusal
    got = check("rtx2080", "atom-w4a4", list(range(1, 40)), 4096, 4096)
    assert all(isinstance(g, FormatRuleError) for g in got)
    with pytest.raises(FormatRuleError, match=r"^ms\[0\] = 1: gpu: kernel atom-w4a4 needs compute capability"):
        predict_many("rtx2080", "atom-w4a4", list(range(1, 40)), 4096, 4096)


# --------------------------------------------------- property: predict_many equals predict element by element
gpus = st.sampled_from(sorted(GPUS))
kernels = st.sampled_from(KERNELS)
# batch sizes around every path switch, plus anything up to 20,000; unsorted, with repeats
m_values = st.one_of(st.sampled_from([1, 2, 3, 7, 8, 9, 15, 16, 17, 63, 64, 65, 128, 129, 1024, 1025]),
                     st.integers(1, 20_000))
ms_lists = st.lists(m_values, min_size=1, max_size=24)
# N and K multiples of 64 (most shapes every kernel takes, some refused by the 128/256-tile rules)
dims = st.integers(1, 256).map(lambda x: 64 * x)


@st.composite
def options(draw, kernel):
    mod = kernel_module(kernel)
    return {"bits": draw(st.sampled_from((None,) + tuple(mod.BITS))),
            "group_size": draw(st.sampled_from(tuple(mod.GROUPS or ()) + (None,))),
            "clock": draw(st.sampled_from(["sustained", "base", "boost", 1.2e9])),
            "cache": draw(st.sampled_from(["cold", "warm"])),
            "ecc": draw(st.sampled_from([None, "on", "off"])),
            "params": draw(st.one_of(st.none(), st.builds(ModelParams, st.floats(0.0, 1e-5), st.floats(0.0, 1.0))))}


@settings(max_examples=examples(150), deadline=None)
@given(st.data(), gpus, kernels, ms_lists, dims, dims)
def test_predict_many_equals_predict(data, gpu, kernel, ms, n, k):
    kw = data.draw(options(kernel))
    try:
        got = predict_many(gpu, kernel, ms, n, k, errors="return", **kw)
    except RefsimError as err:        # refused for every entry (ECC 'on' on a card without a switch)
        for m in ms:
            try:
                predict(gpu, kernel, m, n, k, **kw)
            except RefsimError as want:
                assert type(err) is type(want) and str(err) == str(want)
            else:
                raise AssertionError("predict_many refused what predict accepts")
        return
    assert len(got) == len(ms)
    for m, g in zip(ms, got):
        try:
            want = predict(gpu, kernel, m, n, k, **kw)
        except RefsimError as err:
            want = err
        assert_same(g, want)
    first_bad = next((i for i, g in enumerate(got) if isinstance(g, RefsimError)), None)
    try:
        raised = predict_many(gpu, kernel, ms, n, k, **kw)
    except RefsimError as err:
        assert first_bad is not None
        assert type(err) is type(got[first_bad])
        assert str(err) == f"ms[{first_bad}] = {ms[first_bad]!r}: {got[first_bad]}"
    else:
        assert first_bad is None and raised == got
