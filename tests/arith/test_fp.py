"""refsim.arith.fp against exact rational arithmetic: a random sample plus every special case, and the
fused fp16/fp32 FMA equal to one exact rounding on hypothesis-drawn operands.

The >= 10^6-input sweep lives in bench/bench_emulator.py; here a few thousand random bit patterns per
primitive, adversarial cancellations, and the full cross product of special values.
"""

from __future__ import annotations

import itertools

from hypothesis import given, settings, strategies as st
import ml_dtypes
import numpy as np
import pytest

from refsim.arith import fp
from refsim.errors import DtypeError, FormatRuleError, ShapeError
from refsim.testing import assert_bitexact, examples

SPECIAL_F16 = [0.0, -0.0, np.inf, -np.inf, np.nan, 2.0**-24, -(2.0**-24), 2.0**-14, 65504.0, -65504.0,
               1.0, -1.0, 1.0 + 2.0**-10, 0.5, 2.0**-14 - 2.0**-24]
SPECIAL_F32 = [0.0, -0.0, np.inf, -np.inf, np.nan, 2.0**-149, -(2.0**-149), 2.0**-126,
               float(np.finfo(np.float32).max), -float(np.finfo(np.float32).max), 1.0, -1.0,
               1.0 + 2.0**-23, 1.0 - 2.0**-24, 2.0**-126 - 2.0**-149]

FP = {
    np.float16: (np.uint16, fp.f16_add, fp.f16_sub, fp.f16_mul, fp.f16_fma, SPECIAL_F16),
    np.float32: (np.uint32, fp.f32_add, fp.f32_sub, fp.f32_mul, fp.f32_fma, SPECIAL_F32),
}


def _random(dtype, n, seed):
    utype = FP[dtype][0]
    rng = np.random.default_rng(seed)
    return rng.integers(0, np.iinfo(utype).max, n, dtype=utype, endpoint=True).view(dtype)


def _canonical_nan(x):
    """NaN payloads are not part of the claim: map every NaN to one pattern before comparing."""
    x = x.copy()
    x[np.isnan(x)] = np.nan
    return x


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_add_sub_mul_equal_exact_rounding_on_random_bits(dtype):
    _, add, sub, mul, _, _ = FP[dtype]
    a, b = _random(dtype, 1500, 1), _random(dtype, 1500, 2)
    assert_bitexact(_canonical_nan(add(a, b)), _canonical_nan(fp.add_reference(a, b)), "add")
    assert_bitexact(_canonical_nan(sub(a, b)), _canonical_nan(fp.add_reference(a, -b)), "sub")
    assert_bitexact(_canonical_nan(mul(a, b)), _canonical_nan(fp.mul_reference(a, b)), "mul")


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_fused_fma_equals_exact_single_rounding_including_cancellation(dtype):
    fma = FP[dtype][4]
    a, b, c = _random(dtype, 1500, 3), _random(dtype, 1500, 4), _random(dtype, 1500, 5)
    with np.errstate(all="ignore"):
        # c close to -a*b: the sum cancels, the rounding of the product matters
        c_cancel = (-(a.astype(np.float64) * b.astype(np.float64))).astype(dtype)
        c_cancel = np.nextafter(c_cancel, np.zeros_like(c_cancel))
    for cc in (c, c_cancel):
        assert_bitexact(_canonical_nan(fma(a, b, cc, fused=True)),
                        _canonical_nan(fp.fma_reference(a, b, cc)), "fma")


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_unfused_fma_is_mul_then_add(dtype):
    fma = FP[dtype][4]
    a, b, c = _random(dtype, 800, 6), _random(dtype, 800, 7), _random(dtype, 800, 8)
    expected = fp.add_reference(fp.mul_reference(a, b), c)
    assert_bitexact(_canonical_nan(fma(a, b, c, fused=False)), _canonical_nan(expected), "mul+add")


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_all_special_value_triples(dtype):
    _, add, _, mul, fma, specials = FP[dtype]
    triples = np.array(list(itertools.product(specials, repeat=3)), dtype=np.float64).astype(dtype)
    a, b, c = triples[:, 0].copy(), triples[:, 1].copy(), triples[:, 2].copy()
    assert_bitexact(_canonical_nan(add(a, b)), _canonical_nan(fp.add_reference(a, b)), "add")
    assert_bitexact(_canonical_nan(mul(a, b)), _canonical_nan(fp.mul_reference(a, b)), "mul")
    assert_bitexact(_canonical_nan(fma(a, b, c, fused=True)), _canonical_nan(fp.fma_reference(a, b, c)), "fma")


def test_fp32_fma_double_rounding_counterexample_is_correct():
    # exact a*b + c = 1 + 2^-24 + 2^-70: just above the midpoint, so RN gives 1 + 2^-23.
    # A float64 evaluation rounds to the midpoint 1 + 2^-24 first and then ties to 1.0.
    a = np.array([1 + 2.0**-23], np.float32)
    b = np.array([1 - 2.0**-24], np.float32)
    c = np.array([2.0**-47 * (1 + 2.0**-23)], np.float32)
    naive = (a.astype(np.float64) * b + c).astype(np.float32)
    assert naive[0] == np.float32(1.0)
    assert_bitexact(fp.f32_fma(a, b, c, fused=True), np.array([1 + 2.0**-23], np.float32), "fmaf")


def test_fp16_fma_fused_and_unfused_differ_where_the_product_rounds():
    # (1 + 2^-10)^2 = 1 + 2^-9 + 2^-20: fused keeps the 2^-20 against c = -(1 + 2^-9)
    a = np.array([1 + 2.0**-10], np.float16)
    c = np.array([-(1 + 2.0**-9)], np.float16)
    assert_bitexact(fp.f16_fma(a, a, c, fused=True), np.array([2.0**-20], np.float16), "fused")
    assert_bitexact(fp.f16_fma(a, a, c, fused=False), np.array([0.0], np.float16), "unfused")


def test_conversions_round_once():
    x32 = _random(np.float32, 2000, 9)
    assert_bitexact(_canonical_nan(fp.cvt_f32_to_f16(x32)), _canonical_nan(fp.convert_reference(x32, "float16")))
    # f64 -> f16 without going through f32: 1 + 2^-11 + 2^-40 is above the f16 midpoint
    assert_bitexact(fp.cvt_f64_to_f16(np.array([1 + 2.0**-11 + 2.0**-40])), np.array([1 + 2.0**-10], np.float16))
    finite = x32[np.isfinite(x32)]
    got = fp.cvt_f32_to_bf16(finite).view(np.uint16)
    want = fp.convert_reference(finite, "bfloat16").view(np.uint16)
    assert_bitexact(got, want, "f32->bf16")
    # f64 -> bf16: ml_dtypes double-rounds 1 + 2^-8 + 2^-40 to 1.0; correct is 1 + 2^-7
    got = fp.cvt_f64_to_bf16(np.array([1 + 2.0**-8 + 2.0**-40, -(1 + 2.0**-8 + 2.0**-40), 1 + 2.0**-8]))
    want = np.array([1 + 2.0**-7, -(1 + 2.0**-7), 1.0], np.float32).astype(ml_dtypes.bfloat16)
    assert_bitexact(got.view(np.uint16), want.view(np.uint16), "f64->bf16")
    # bf16 ties to even and NaN stays NaN
    ties = np.array([1 + 2.0**-8, 1 + 3 * 2.0**-8, np.nan], np.float32)
    got = fp.cvt_f32_to_bf16(ties).astype(np.float32)
    assert got[0] == 1.0 and got[1] == 1 + 2.0**-6 and np.isnan(got[2])


def test_float_to_int_modes_saturate_and_map_nan_to_zero():
    x = np.array([2.5, -2.5, 3.5, -0.5, 1e10, -1e10, np.nan, np.inf], np.float32)
    assert fp.cvt_float_to_int(x, np.int32, "rni").tolist() == [2, -2, 4, 0, 2**31 - 1, -(2**31), 0, 2**31 - 1]
    assert fp.cvt_float_to_int(x, np.int32, "rzi").tolist()[:4] == [2, -2, 3, 0]
    assert fp.cvt_float_to_int(x, np.int32, "rmi").tolist()[:4] == [2, -3, 3, -1]
    assert fp.cvt_float_to_int(x, np.int32, "rpi").tolist()[:4] == [3, -2, 4, 0]
    assert fp.cvt_float_to_int(x, np.uint8, "rni").tolist() == [2, 0, 4, 0, 255, 0, 0, 255]
    assert fp.cvt_int_to_f16(np.array([2049, 2051, -4097], np.int32)).tolist() == [2048.0, 2052.0, -4096.0]
    assert fp.cvt_int_to_f32(np.array([2**24 + 1, 2**24 + 3], np.int32)).tolist() == [2.0**24, 2.0**24 + 4]


def test_inputs_are_not_modified():
    a, b, c = _random(np.float32, 64, 10), _random(np.float32, 64, 11), _random(np.float32, 64, 12)
    before = [x.copy() for x in (a, b, c)]
    fp.f32_fma(a, b, c, fused=True)
    fp.cvt_f32_to_bf16(a)
    for x, y in zip((a, b, c), before):
        assert_bitexact(x, y)


def test_bad_input_raises_named_errors():
    with pytest.raises(DtypeError, match="a: dtype must be float16; got float32"):
        fp.f16_add(np.ones(2, np.float32), np.ones(2, np.float16))
    with pytest.raises(FormatRuleError, match="fused: must be True or False"):
        fp.f32_fma(np.ones(2, np.float32), np.ones(2, np.float32), np.ones(2, np.float32), fused="yes")
    with pytest.raises(ShapeError, match="shapes must broadcast"):
        fp.f32_add(np.ones(2, np.float32), np.ones(3, np.float32))
    with pytest.raises(FormatRuleError, match="mode: must be one of"):
        fp.cvt_float_to_int(np.ones(2, np.float32), np.int32, "rn")


def test_fp16_fma_where_the_float64_sum_is_inexact_still_rounds_once():
    # the two cases of fp._f16_fma_fused where float64(p) + float64(c) is not exact:
    # (i) a tiny product against a large c right beside an fp16 tie, (ii) a huge product
    rng = np.random.default_rng(21)
    n = 4000
    big = (rng.integers(1024, 2048, n) * 2.0 ** rng.integers(-10, 5, n)).astype(np.float16)  # c, normal
    tiny_a = (rng.choice([-1, 1], n) * rng.integers(1, 2048, n) * 2.0**-24).astype(np.float16)
    tiny_b = (rng.integers(1, 2048, n) * 2.0 ** rng.integers(-24, -14, n)).astype(np.float16)
    huge = np.full(n, 255.9, np.float16) * rng.choice([-1, 1], n).astype(np.float16)
    a = np.concatenate([tiny_a, huge, np.float16([65504, -65504, 2.0**-24])])
    b = np.concatenate([tiny_b, huge, np.float16([65504, 65504, 2.0**-24])])
    c = np.concatenate([big, np.float16(2.0**-24) * rng.integers(-3, 4, n).astype(np.float16),
                        np.float16([-65504, 2.0**-24, -0.0])])
    assert_bitexact(_canonical_nan(fp.f16_fma(a, b, c, fused=True)),
                    _canonical_nan(fp.fma_reference(a, b, c)), "fp16 fma, inexact float64 sums")


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_fma_reference_scalar_equals_array_reference(dtype):
    """The scalar twin gives the array reference's bits on the special-value triples (signed
    zeros, Inf, NaN) and on random bits; mixed or non-scalar operands are refused."""
    specials = FP[dtype][5]
    triples = np.array(list(itertools.product(specials, repeat=3)), dtype=np.float64).astype(dtype)
    a = np.concatenate([triples[:, 0], _random(dtype, 300, 11)])
    b = np.concatenate([triples[:, 1], _random(dtype, 300, 12)])
    c = np.concatenate([triples[:, 2], _random(dtype, 300, 13)])
    got = np.array([fp.fma_reference_scalar(x, y, z) for x, y, z in zip(a, b, c)], dtype)
    assert_bitexact(_canonical_nan(got), _canonical_nan(fp.fma_reference(a, b, c)), "scalar fma")
    with pytest.raises(DtypeError, match="one dtype"):
        fp.fma_reference_scalar(np.float16(1), np.float32(1), np.float16(1))
    with pytest.raises(DtypeError, match="one dtype"):
        fp.fma_reference_scalar(1.0, 1.0, 1.0)


# --------------------------------------------------------------------------- properties (hypothesis)
@pytest.mark.parametrize("dtype, fma", [(np.float32, fp.f32_fma), (np.float16, fp.f16_fma)], ids=["f32", "f16"])
@settings(max_examples=examples(50))
@given(abc=st.data())
def test_fused_fma_equals_exact_single_rounding(dtype, fma, abc):
    width = np.dtype(dtype).itemsize * 8
    a, b, c = (np.array([abc.draw(st.floats(width=width))], dtype) for _ in range(3))
    got, want = fma(a, b, c, fused=True), fp.fma_reference(a, b, c)
    if np.isnan(want[0]):
        assert np.isnan(got[0])
    else:
        assert_bitexact(got, want)


def test_every_nan_result_is_the_gpus_canonical_nan():
    # Inf - Inf, 0 * Inf and NaN operands of any sign and payload: 0x7FFF / 0x7FFFFFFF (what NVIDIA GPUs
    # write; NumPy on x86 gives the negative default NaN 0xFE00 / 0xFFC00000 for Inf + -Inf)
    h = np.array([np.inf, 0.0, 1.0], np.float16)
    g = np.array([-np.inf, np.inf, 1.0], np.float16)
    neg_nan16 = np.array([0xFE01], np.uint16).view(np.float16)
    assert fp.f16_add(h[:1], g[:1]).view(np.uint16).tolist() == [0x7FFF]
    assert fp.f16_sub(h[:1], h[:1]).view(np.uint16).tolist() == [0x7FFF]
    assert fp.f16_mul(h[1:2], g[1:2]).view(np.uint16).tolist() == [0x7FFF]
    for fused in (True, False):
        assert fp.f16_fma(h[1:2], g[1:2], h[2:], fused=fused).view(np.uint16).tolist() == [0x7FFF]
        assert fp.f16_fma(neg_nan16, h[2:], h[2:], fused=fused).view(np.uint16).tolist() == [0x7FFF]
    f = np.array([np.inf], np.float32)
    neg_nan32 = np.array([0xFFC00001], np.uint32).view(np.float32)
    assert fp.f32_add(f, -f).view(np.uint32).tolist() == [0x7FFFFFFF]
    assert fp.f32_mul(np.zeros(1, np.float32), f).view(np.uint32).tolist() == [0x7FFFFFFF]
    assert fp.f32_fma(neg_nan32, f, f, fused=True).view(np.uint32).tolist() == [0x7FFFFFFF]
    assert fp.cvt_f32_to_f16(neg_nan32).view(np.uint16).tolist() == [0x7FFF]
    assert fp.add_reference(h[:1], g[:1]).view(np.uint16).tolist() == [0x7FFF]     # the oracle twins too
    assert fp.fma_reference(h[1:2], g[1:2], h[2:]).view(np.uint16).tolist() == [0x7FFF]


def test_canonical_nan_changes_only_nans_and_not_its_input():
    u = np.array([0x0001, 0x7C00, 0xFC00, 0x7E00, 0xFE00, 0x7C01, 0x8000, 0x3C00], np.uint16)
    x = u.view(np.float16)
    x.setflags(write=False)
    out = fp.canonical_nan(x)
    assert out.view(np.uint16).tolist() == [0x0001, 0x7C00, 0xFC00, 0x7FFF, 0x7FFF, 0x7FFF, 0x8000, 0x3C00]
    assert u.tolist() == [0x0001, 0x7C00, 0xFC00, 0x7E00, 0xFE00, 0x7C01, 0x8000, 0x3C00]
    f = np.array([0xFFC00000, 0x3F800000], np.uint32).view(np.float32)
    assert fp.canonical_nan(f).view(np.uint32).tolist() == [0x7FFFFFFF, 0x3F800000]
    with pytest.raises(DtypeError):
        fp.canonical_nan(np.zeros(2, np.float64))
