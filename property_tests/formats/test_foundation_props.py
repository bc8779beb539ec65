"""Property tests of the foundation formats over hypothesis-drawn legal shapes and codes."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from refsim.formats import awq, gptq, uniform
from refsim.testing import assert_bitexact


@st.composite
def gptq_codes(draw):
    """(q uint8 (K, N), bits) with K a multiple of 32: the qweight packing rule."""
    bits = draw(st.sampled_from(gptq.BITS))
    k = 32 * draw(st.integers(1, 4))
    n = draw(st.integers(1, 6))
    q = draw(arrays(np.uint8, (k, n), elements=st.integers(0, (1 << bits) - 1)))
    return q, bits


@given(gptq_codes())
def test_unpack_qweight_inverts_pack_qweight(case):
    q, bits = case
    packed = gptq.pack_qweight(q, bits)
    assert packed.shape == (q.shape[0] * bits // 32, q.shape[1]) and packed.dtype == np.int32
    assert_bitexact(gptq.unpack_qweight(packed, bits, q.shape[0]), q)
    assert_bitexact(packed, gptq.pack_qweight_reference(q, bits))


@st.composite
def gptq_zeros(draw):
    bits = draw(st.sampled_from(gptq.BITS))
    g = draw(st.integers(1, 3))
    n = 32 * draw(st.integers(1, 2))
    z = draw(arrays(np.int32, (g, n), elements=st.integers(1, (1 << bits) - 1)))  # v1 needs zero >= 1
    fmt = draw(st.sampled_from(gptq.CHECKPOINT_FORMATS))
    return z, bits, fmt


@given(gptq_zeros())
def test_unpack_qzeros_inverts_pack_qzeros_for_nonzero_points(case):
    z, bits, fmt = case
    assert_bitexact(gptq.unpack_qzeros(gptq.pack_qzeros(z, bits, fmt), bits, z.shape[1], fmt), z)


@given(st.integers(1, 5).flatmap(lambda r: st.integers(1, 4).flatmap(
    lambda w: arrays(np.uint8, (r, 8 * w), elements=st.integers(0, 15)))))
def test_awq_unpack_inverts_pack(q):
    assert_bitexact(awq.unpack_columns(awq.pack_columns(q), q.shape[1]), q)


finite_f32 = st.floats(-1e4, 1e4, allow_nan=False, allow_infinity=False, allow_subnormal=False, width=32)


@given(
    st.sampled_from(["gptq_asym", "awq", "marlin"]),
    st.sampled_from([2, 3, 4, 8]),
    st.sampled_from(uniform.ROUNDING_MODES),
    st.integers(1, 4).flatmap(lambda g: arrays(np.float32, (4 * g, 3), elements=finite_f32)),
)
def test_dequantize_quantize_is_within_half_a_step(scheme, bits, rounding, w):
    uq = uniform.quantize(w, bits, scheme=scheme, granularity="group", group_size=4, rounding=rounding)
    if scheme == "awq":  # AutoAWQ's zero clamps for ranges far from 0 (documented quirk): skip those groups
        lo = w.reshape(-1, 4, 3).min(axis=1) / uq.scale
        keep = np.repeat((-np.rint(lo) >= 0) & (-np.rint(lo) <= (1 << bits) - 1), 4, axis=0)
        w = np.where(keep, w, uq.dequantize())
    step = uniform.expand_groups(uq.scale, 4, w.shape[0]).astype(np.float64)
    err = np.abs(uq.dequantize().astype(np.float64) - w)
    eps = float(np.finfo(np.float32).eps)
    assert (err <= step / 2 + 4 * eps * (np.abs(w) + step)).all()


@given(st.sampled_from(uniform.SCHEMES), st.sampled_from([2, 4, 8]),
       st.integers(1, 3).flatmap(lambda g: arrays(np.float32, (2 * g, 2), elements=finite_f32)))
def test_vectorised_quantize_equals_reference(scheme, bits, w):
    a = uniform.quantize(w, bits, scheme=scheme, granularity="group", group_size=2)
    b = uniform.quantize_reference(w, bits, scheme=scheme, granularity="group", group_size=2)
    assert_bitexact(a.q, b.q)
    assert_bitexact(a.scale, b.scale)
