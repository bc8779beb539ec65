"""kernels.predict_many over drawn (gpu, kernel, ms, n, k, options): element i equals
predict(..., ms[i], ...) exactly (repr, ==, float bits of every field and term), or is the same
refusal (class and message) for a shape or entry the kernel refuses."""

import dataclasses
import struct

from hypothesis import given, settings, strategies as st

from refsim.errors import RefsimError
from refsim.gpu_model.kernels import KERNELS, kernel_module, predict, predict_many
from refsim.gpu_model.roofline import ModelParams
from refsim.gpu_model.specs import GPUS
from refsim.testing import examples

gpus = st.sampled_from(sorted(GPUS))
kernels = st.sampled_from(KERNELS)
# batch sizes around every path switch, plus anything up to 20,000; unsorted, with repeats
m_values = st.one_of(st.sampled_from([1, 2, 3, 7, 8, 9, 15, 16, 17, 63, 64, 65, 128, 129, 1024, 1025]),
                     st.integers(1, 20_000))
ms_lists = st.lists(m_values, min_size=1, max_size=24)
# N and K multiples of 64 (most shapes every kernel takes, some refused by the 128/256-tile rules)
dims = st.integers(1, 256).map(lambda x: 64 * x)


def _bits(v: float) -> int:
    return struct.unpack("<Q", struct.pack("<d", v))[0]


def _same(got, want) -> None:
    if isinstance(want, RefsimError):
        assert type(got) is type(want) and str(got) == str(want)
        return
    assert got == want and repr(got) == repr(want)
    for f in dataclasses.fields(want):
        v = getattr(want, f.name)
        if isinstance(v, float):
            assert _bits(getattr(got, f.name)) == _bits(v), f.name
    assert [(key, _bits(v)) for key, v in got.terms.items()] == [(key, _bits(v)) for key, v in want.terms.items()]


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
        _same(g, want)
    first_bad = next((i for i, g in enumerate(got) if isinstance(g, RefsimError)), None)
    try:
        raised = predict_many(gpu, kernel, ms, n, k, **kw)
    except RefsimError as err:
        assert first_bad is not None
        assert type(err) is type(got[first_bad])
        assert str(err) == f"ms[{first_bad}] = {ms[first_bad]!r}: {got[first_bad]}"
    else:
        assert first_bad is None and raised == got
