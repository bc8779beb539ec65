"""Floating-point instruction handlers against refsim.arith.fp (the .rn primitives validated on
hardware-derived data) and against the plain-Fraction twin for every rounding mode.

Sources: PTX ISA 9.x, Floating Point Instructions (add/sub/mul/fma/div/sqrt/min/max/neg/abs/testp/
copysign for f32/f64), Half Precision Floating Point Instructions (add/sub/mul/fma/min/max, .rn only), IEEE 754-2019 §6.3 (signs of exact
zero sums), §7.4 (overflow).
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, strategies as st

from refsim.arith import fp, rounding
from refsim.ptx import PtxUnsupportedError
from refsim.ptx.semantics import Op, lookup
from refsim.testing import assert_bitexact

RNG = np.random.default_rng(2026)


def op(opcode, mods, t, *srcs):
    return lookup(Op(opcode, tuple(mods), (t,))).fn(*srcs)[0]


def canon16(x16: np.ndarray) -> np.ndarray:
    bits = x16.view(np.uint16)
    return np.where(np.isnan(x16), np.uint16(0x7FFF), bits).astype(np.uint16)


def canon32(x32: np.ndarray) -> np.ndarray:
    bits = x32.view(np.uint32)
    return np.where(np.isnan(x32), np.uint32(0x7FFFFFFF), bits).astype(np.uint32)


SPECIAL16 = [0x0000, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0x0001, 0x8001, 0x03FF, 0x0400, 0x3C00, 0xBC00, 0x7BFF,
             0xFBFF, 0x3C01, 0x6400, 0x2C00, 0xD480]


def random16(n):
    return np.concatenate([np.array(SPECIAL16, np.uint16), RNG.integers(0, 2**16, n, dtype=np.uint16)])


# ---------------------------------------------------------------------------------------------
# .rn forms against refsim.arith.fp


def test_fma_rn_f16x2_matches_emulator_fp_on_both_halves():
    n = 3000
    a, b, c = (random16(n) for _ in range(3))
    b, c = np.roll(b, 5), np.roll(c, 11)
    pack = lambda lo, hi: lo.astype(np.uint32) | (hi.astype(np.uint32) << np.uint32(16))  # noqa: E731
    A, B, C = pack(a, a[::-1]), pack(b, b[::-1]), pack(c, c[::-1])
    d = op("fma", ("rn",), "f16x2", A, B, C)
    want_lo = canon16(fp.f16_fma(a.view(np.float16), b.view(np.float16), c.view(np.float16), fused=True))
    want_hi = canon16(fp.f16_fma(a[::-1].view(np.float16), b[::-1].view(np.float16), c[::-1].view(np.float16),
                                 fused=True))
    assert_bitexact(d, pack(want_lo, want_hi), "fma.rn.f16x2")


@pytest.mark.parametrize("opcode, ref", [("add", fp.f16_add), ("sub", fp.f16_sub), ("mul", fp.f16_mul)])
def test_half_add_sub_mul_rn_match_emulator_fp(opcode, ref):
    a, b = random16(3000), np.roll(random16(3000), 7)
    got = op(opcode, ("rn",), "f16", a, b)
    assert_bitexact(got, canon16(ref(a.view(np.float16), b.view(np.float16))), f"{opcode}.rn.f16")


@pytest.mark.parametrize("opcode, ref", [("add", fp.f32_add), ("sub", fp.f32_sub), ("mul", fp.f32_mul)])
def test_f32_add_sub_mul_rn_match_emulator_fp(opcode, ref):
    a = RNG.integers(0, 2**32, 4000, dtype=np.uint64).astype(np.uint32)
    b = RNG.integers(0, 2**32, 4000, dtype=np.uint64).astype(np.uint32)
    got = op(opcode, ("rn",), "f32", a, b)
    assert_bitexact(got, canon32(ref(a.view(np.float32), b.view(np.float32))), f"{opcode}.rn.f32")


def test_fma_rn_f32_matches_emulator_fp_including_the_double_rounding_trap():
    a = np.array([1 + 2.0**-23] + list(RNG.standard_normal(2000)), np.float32)
    b = np.array([1 - 2.0**-24] + list(RNG.standard_normal(2000)), np.float32)
    c = np.array([2.0**-47 * (1 + 2.0**-23)] + list(-a[1:] * b[1:]), np.float32)  # heavy cancellation
    got = op("fma", ("rn",), "f32", a.view(np.uint32), b.view(np.uint32), c.view(np.uint32))
    assert_bitexact(got, canon32(fp.f32_fma(a, b, c, fused=True)), "fma.rn.f32")
    assert int(got[0]) == int(np.float32(1 + 2.0**-23).view(np.uint32))  # double rounding's counter-example: fma.rn.f32 rounds once


# ---------------------------------------------------------------------------------------------
# every rounding mode against the Fraction twin (hypothesis)

MODES = st.sampled_from(["rn", "rz", "rm", "rp"])


def _as(t, vals):
    if t == "f32":
        return np.array(vals, np.float32)
    return np.array(vals, np.float64)


@given(st.lists(st.tuples(st.floats(width=32), st.floats(width=32), st.floats(width=32)), min_size=1, max_size=12),
       MODES, st.sampled_from(["add", "sub", "mul", "fma"]))
def test_f32_arithmetic_in_every_mode_matches_the_fraction_twin(triples, mode, opcode):
    a, b, c = (np.array([t[i] for t in triples], np.float32) for i in range(3))
    srcs = [a.view(np.uint32), b.view(np.uint32)] + ([c.view(np.uint32)] if opcode == "fma" else [])
    got = op(opcode, (mode,), "f32", *srcs)
    args = [a.astype(np.float64), (-b if opcode == "sub" else b).astype(np.float64)]
    name = {"sub": "add"}.get(opcode, opcode)
    if opcode == "fma":
        args.append(c.astype(np.float64))
    want = rounding.fp_reference(name, tuple(args), "f32", mode).astype(np.float32)
    assert_bitexact(got, canon32(want), f"{opcode}.{mode}.f32")


@given(st.lists(st.tuples(st.floats(), st.floats()), min_size=1, max_size=12), MODES, st.sampled_from(["add", "mul"]))
def test_f64_arithmetic_in_every_mode_matches_the_fraction_twin(pairs, mode, opcode):
    a, b = (np.array([t[i] for t in pairs], np.float64) for i in range(2))
    got = op(opcode, (mode,), "f64", a.view(np.uint64), b.view(np.uint64)).view(np.float64)
    want = rounding.fp_reference(opcode, (a, b), "f64", mode)
    same = (got.view(np.uint64) == want.view(np.uint64)) | (np.isnan(got) & np.isnan(want))
    assert same.all(), (a[~same], b[~same], got[~same], want[~same])   # f64 NaN payloads: IEEE propagation


@given(st.lists(st.tuples(st.integers(0, 2**16 - 1), st.integers(0, 2**16 - 1), st.integers(0, 2**16 - 1)),
                min_size=1, max_size=12))
def test_bf16_fma_rn_matches_the_fraction_twin(triples):
    a, b, c = (np.array([t[i] for t in triples], np.uint16) for i in range(3))
    got = op("fma", ("rn",), "bf16", a, b, c)
    with np.errstate(invalid="ignore"):   # signalling-NaN patterns
        dec = lambda u: u.view(ml_dtypes.bfloat16).astype(np.float32).astype(np.float64)  # noqa: E731
        da, db, dc = dec(a), dec(b), dec(c)
    want = rounding.fp_reference("fma", (da, db, dc), "bf16", "rn")
    wb = want.astype(np.float32).view(np.uint32) >> np.uint32(16)
    assert_bitexact(got, np.where(np.isnan(want), 0x7FFF, wb).astype(np.uint16), "fma.rn.bf16")


# ---------------------------------------------------------------------------------------------
# tables: signed zeros, overflow, ftz, sat, min/max, neg/abs, div/sqrt/rcp, testp


def f32(*v):
    return np.array(v, np.float32).view(np.uint32)


@pytest.mark.parametrize("mode, a, b, want", [
    ("rn", 1.0, -1.0, 0x00000000), ("rz", 1.0, -1.0, 0x00000000), ("rp", 1.0, -1.0, 0x00000000),
    ("rm", 1.0, -1.0, 0x80000000),                       # x - x = -0 only toward -Inf
    ("rn", -0.0, -0.0, 0x80000000), ("rm", 0.0, 0.0, 0x00000000), ("rm", 0.0, -0.0, 0x80000000),
    ("rn", 3e38, 3e38, 0x7F800000), ("rz", 3e38, 3e38, 0x7F7FFFFF), ("rm", 3e38, 3e38, 0x7F7FFFFF),
    ("rp", -3e38, -3e38, 0xFF7FFFFF), ("rm", -3e38, -3e38, 0xFF800000),
    ("rz", 1.0, 2.0**-24, 0x3F800000), ("rp", 1.0, 2.0**-30, 0x3F800001), ("rm", -1.0, -(2.0**-30), 0xBF800001),
])
def test_add_f32_signed_zero_and_overflow_rules(mode, a, b, want):
    assert hex(int(op("add", (mode,), "f32", f32(a), f32(b))[0])) == hex(want)


def test_ftz_and_sat_modifiers():
    sub = float(np.float32(2.0**-130))
    assert op("add", ("ftz",), "f32", f32(sub), f32(0.0)).tolist() == [0]                 # input flushed
    assert op("mul", ("rn", "ftz"), "f32", f32(2.0**-100), f32(2.0**-30)).tolist() == [0]  # result flushed
    assert op("mul", ("rn",), "f32", f32(2.0**-100), f32(2.0**-30)).tolist() == list(f32(2.0**-130))
    assert op("add", ("sat",), "f32", f32(0.75, -2.0, np.nan), f32(0.5, 0.0, 1.0)).tolist() == list(f32(1.0, 0.0, 0.0))
    assert op("add", ("rn", "ftz"), "f16", np.array([0x0001], np.uint16), np.array([0x0000], np.uint16)).tolist() == [0]


@pytest.mark.parametrize("opcode, mods, a, b, want", [
    ("min", (), 1.0, np.nan, 1.0), ("min", (), np.nan, 1.0, 1.0), ("max", (), np.nan, np.nan, np.nan),
    ("min", ("NaN",), 1.0, np.nan, np.nan), ("max", ("NaN",), np.nan, 2.0, np.nan),
    ("min", (), -0.0, 0.0, -0.0), ("min", (), 0.0, -0.0, -0.0), ("max", (), -0.0, 0.0, 0.0),
    ("max", (), 0.0, -0.0, 0.0), ("max", (), -np.inf, -1e38, -1e38),
])
def test_min_max_nan_and_signed_zero_rules(opcode, mods, a, b, want):
    got = op(opcode, mods, "f32", f32(a), f32(b))
    assert hex(int(got[0])) == hex(int(f32(want)[0]) if not math.isnan(want) else 0x7FFFFFFF)


def test_neg_abs_flip_and_clear_the_sign_bit_including_packed_halves():
    assert op("neg", (), "f32", f32(0.0, -2.0, np.nan)).tolist() == [0x80000000, 0x40000000, 0xFFC00000]
    assert op("abs", (), "f32", f32(-0.0, -2.0)).tolist() == [0, 0x40000000]
    assert op("neg", (), "f16x2", np.array([0x3C00BC00], np.uint32)).tolist() == [0xBC003C00]
    assert op("abs", (), "bf16x2", np.array([0xBF80BF80], np.uint32)).tolist() == [0x3F803F80]
    assert op("neg", ("ftz",), "f32", np.array([0x00000001], np.uint32)).tolist() == [0x80000000]


def test_div_rcp_sqrt_rn_are_correctly_rounded():
    a = RNG.standard_normal(3000).astype(np.float32)
    b = RNG.standard_normal(3000).astype(np.float32)
    got = op("div", ("rn",), "f32", a.view(np.uint32), b.view(np.uint32))
    from fractions import Fraction
    from refsim.arith import exact
    for i in range(0, 3000, 37):   # every 37th quotient exactly, from rationals
        r = exact.round_fraction(Fraction(float(a[i])) / Fraction(float(b[i])), exact.F32, "rn")
        assert float(got[i:i + 1].view(np.float32)[0]) == float(r)
    sq = op("sqrt", ("rn",), "f32", np.abs(a).view(np.uint32))
    assert_bitexact(sq, np.sqrt(np.abs(a)).view(np.uint32), "sqrt.rn.f32")   # IEEE sqrtf is correctly rounded
    rc = op("rcp", ("rn",), "f64", np.array([3.0, 0.0, -0.0], np.float64).view(np.uint64)).view(np.float64)
    assert rc[0] == 1 / 3 and rc[1] == np.inf and rc[2] == -np.inf


def test_testp_and_copysign():
    (p,) = lookup(Op("testp", ("subnormal",), ("f32",))).fn(f32(2.0**-140, 0.0, 1.0))
    assert p.tolist() == [True, False, False]
    (p,) = lookup(Op("testp", ("notanumber",), ("f64",))).fn(np.array([np.nan, 1.0]).view(np.uint64))
    assert p.tolist() == [True, False]
    assert op("copysign", (), "f32", f32(-1.0), f32(2.0)).tolist() == list(f32(-2.0))


@pytest.mark.parametrize("o", [
    Op("add", ("rz",), ("f16",)), Op("fma", ("rm",), ("bf16x2",)), Op("div", ("full",), ("f32",)),
    Op("div", ("rz",), ("f32",)), Op("sqrt", ("approx",), ("f32",)), Op("rcp", ("approx", "ftz"), ("f64",)),
    Op("tanh", ("approx",), ("f32",)), Op("mad", (), ("f32",)), Op("min", ("xorsign", "abs"), ("f32",)),
])
def test_approximate_and_non_isa_float_forms_are_refused_by_name(o):
    with pytest.raises(PtxUnsupportedError, match="^" + str(o).replace(".", r"\.") + ":"):
        lookup(o)


@pytest.mark.parametrize("fmt, ftype, utype, prims", [
    ("f16", np.float16, np.uint16, (fp.f16_add, fp.f16_mul, lambda a, b, c: fp.f16_fma(a, b, c, fused=True))),
    ("f32", np.float32, np.uint32, (fp.f32_add, fp.f32_mul, lambda a, b, c: fp.f32_fma(a, b, c, fused=True))),
])
def test_directed_rounding_path_in_rn_mode_equals_the_native_rn_primitives(fmt, ftype, utype, prims):
    # the handlers use the native primitives for plain .rn and the float64 path for every other mode:
    # both must agree where they overlap
    bits = np.iinfo(utype).max
    a, b, c = (RNG.integers(0, bits, 5000, dtype=np.uint64).astype(utype).view(ftype) for _ in range(3))
    with np.errstate(invalid="ignore"):
        a64, b64, c64 = (x.astype(np.float64) for x in (a, b, c))
    canon = canon16 if fmt == "f16" else canon32
    enc = lambda x: canon(x.astype(ftype))  # noqa: E731  (values are representable: exact cast)
    add, mul, fma = prims
    assert_bitexact(enc(rounding.fp_add(a64, b64, fmt, "rn")), canon(add(a, b)), f"fp_add {fmt}")
    assert_bitexact(enc(rounding.fp_mul(a64, b64, fmt, "rn")), canon(mul(a, b)), f"fp_mul {fmt}")
    assert_bitexact(enc(rounding.fp_fma(a64, b64, c64, fmt, "rn")), canon(fma(a, b, c)), f"fp_fma {fmt}")
