"""``cvt`` conformance: the ISA's edge rules as a table, every rounding mode over special values against
an exact rational oracle (the primitive against its plain-loop twin: tests/arith/test_rounding.py).

Sources: PTX ISA 9.x, Data Movement and Conversion Instructions: cvt — rounding modifiers (.rn/.rz/.rm/.rp for float results, .rni/.rzi/
.rmi/.rpi for integral results), float-to-integer saturation by default, the NaN-to-integer rule ("zero
if source is not .f64 and destination is not .s64/.u64; otherwise 1 << (BitWidth(dst) - 1)"), .relu,
.satfinite, .ftz; IEEE 754 §7.4 for overflow under directed rounding.
"""

from __future__ import annotations

from fractions import Fraction
import math

import ml_dtypes
import numpy as np
import pytest

from refsim.arith import exact
from refsim.ptx import PtxUnsupportedError
from refsim.ptx.semantics import Op, lookup
from refsim.testing import assert_bitexact

F = {"f16": exact.F16, "bf16": exact.BF16, "f32": exact.F32, "f64": exact.F64}
NAN_BITS = {"f16": 0x7FFF, "bf16": 0x7FFF, "f32": 0x7FFFFFFF}
UNSIGNED = {"f16": np.uint16, "bf16": np.uint16, "f32": np.uint32, "f64": np.uint64}


def bits_of(values, t):
    """Exactly representable float64 values -> bit patterns of t (NaN -> canonical), test side."""
    v = np.asarray(values, np.float64)
    if t == "f64":
        return v.view(np.uint64)
    dt = {"f16": np.float16, "f32": np.float32, "bf16": ml_dtypes.bfloat16}[t]
    b = v.astype(dt).view(UNSIGNED[t])
    return np.where(np.isnan(v), UNSIGNED[t](NAN_BITS[t]), b).astype(UNSIGNED[t])


def cvt(mods, dst, src, *srcs):
    return lookup(Op("cvt", tuple(mods), (dst, src))).fn(*srcs)[0]


def f32(*v):
    return np.array(v, np.float32).view(np.uint32)


def f64(*v):
    return np.array(v, np.float64).view(np.uint64)


# ---------------------------------------------------------------------------------------------
# the edge rules of the issue and the ISA, as a table

NAN_TO_INT = [  # (irnd, dst, src bits maker, expected)
    ("rni", "s64", f32, 0x8000000000000000),   # 64-bit destination: 1 << 63
    ("rzi", "u64", f32, 0x8000000000000000),
    ("rni", "s32", f32, 0),                    # non-64-bit destination, non-f64 source: 0
    ("rni", "u32", f32, 0),
    ("rni", "s16", f32, 0),
    ("rmi", "s8", f32, 0),
    ("rzi", "s32", f64, 0x80000000),           # f64 source: 1 << 31
    ("rzi", "u32", f64, 0x80000000),
    ("rzi", "u16", f64, 0x8000),
    ("rzi", "s64", f64, 0x8000000000000000),
]


@pytest.mark.parametrize("irnd, dst, maker, want", NAN_TO_INT)
def test_nan_to_integer_follows_the_isa_rule(irnd, dst, maker, want):
    src = "f32" if maker is f32 else "f64"
    assert int(cvt((irnd,), dst, src, maker(np.nan))[0]) == want


def test_nan_to_integer_from_half_types_is_zero():
    assert int(cvt(("rni",), "s32", "f16", np.array([0x7E00], np.uint16))[0]) == 0
    assert int(cvt(("rni",), "s64", "f16", np.array([0x7E00], np.uint16))[0]) == 0x8000000000000000


@pytest.mark.parametrize("mode, x, want", [
    ("rz", 1e6, 0x7BFF), ("rz", -1e6, 0xFBFF),             # finite overflow toward zero: ±max
    ("rz", np.inf, 0x7C00), ("rz", -np.inf, 0xFC00),       # Inf stays Inf
    ("rn", 65519.0, 0x7BFF), ("rn", 65520.0, 0x7C00),      # the tie at 65520 rounds to even = overflow
    ("rm", 65520.0, 0x7BFF), ("rm", -65520.0, 0xFC00),
    ("rp", 65505.0, 0x7C00), ("rp", -1e6, 0xFBFF),
    ("rn", 2.0**-25, 0x0000), ("rn", 1.5 * 2.0**-25, 0x0001),   # subnormal tie to even / above it
    ("rp", 2.0**-30, 0x0001), ("rm", -(2.0**-30), 0x8001), ("rz", -(2.0**-30), 0x8000),
    ("rn", 1.0 + 2.0**-11, 0x3C00), ("rn", 1.0 + 3 * 2.0**-11, 0x3C02),       # ties to even
    ("rz", -(1.0 + 2.0**-11 + 2.0**-20), 0xBC00), ("rm", -(1.0 + 2.0**-20), 0xBC01),
    ("rn", -0.0, 0x8000), ("rn", np.nan, 0x7FFF),
])
def test_f32_to_f16_edge_rules(mode, x, want):
    assert hex(int(cvt((mode,), "f16", "f32", f32(x))[0])) == hex(want)


@pytest.mark.parametrize("irnd, x, want", [
    ("rni", 2.5, 2), ("rni", 3.5, 4), ("rni", -2.5, -2), ("rni", -0.5, 0), ("rzi", -2.7, -2),
    ("rmi", -2.1, -3), ("rpi", 2.1, 3), ("rpi", -0.5, 0), ("rni", 3e9, 2**31 - 1), ("rni", -3e9, -(2**31)),
    ("rni", np.inf, 2**31 - 1), ("rni", -np.inf, -(2**31)), ("rzi", 2.0**-149, 0),
])
def test_float_to_s32_rounds_then_saturates(irnd, x, want):
    got = int(cvt((irnd,), "s32", "f32", f32(x))[0])
    assert got - (1 << 32) * (got >> 31) == want


def test_float_to_unsigned_and_64_bit_saturate():
    assert cvt(("rni",), "u32", "f32", f32(-1.0, 5e9)).tolist() == [0, 0xFFFFFFFF]
    assert cvt(("rni",), "s64", "f64", f64(1e19, -1e19, 2.0**62)).tolist() == [2**63 - 1, 2**63, 2**62]
    assert cvt(("rzi",), "u64", "f32", f32(1e20, 2.0**63)).tolist() == [2**64 - 1, 2**63]


def test_integer_conversions_wrap_or_saturate():
    s32 = lambda *v: np.array([x & 0xFFFFFFFF for x in v], np.uint32)  # noqa: E731
    assert cvt((), "u8", "s32", s32(300, -1)).tolist() == [44, 255]
    assert cvt(("sat",), "u8", "s32", s32(300, -1)).tolist() == [255, 0]
    assert cvt((), "s8", "s32", s32(200)).tolist() == [0xFFFFFFC8]          # -56 sign-extended
    assert cvt(("sat",), "s16", "s32", s32(40000, -40000)).tolist() == [0x7FFF, 0x8000]
    assert cvt((), "s64", "s32", s32(-2)).tolist() == [2**64 - 2]
    assert cvt((), "u64", "u32", s32(-2)).tolist() == [2**32 - 2]
    assert cvt(("sat",), "u32", "s64", np.array([2**63], np.uint64)).tolist() == [0]


def test_float_modifiers_sat_ftz_relu_satfinite():
    assert cvt(("sat",), "f32", "f32", f32(1.5, -0.5, np.nan, 0.25)).tolist() == list(f32(1.0, 0.0, 0.0, 0.25))
    sub = float(np.float32(2.0**-140))
    assert cvt(("ftz",), "f32", "f32", f32(sub, -sub)).tolist() == [0, 0x80000000]
    assert cvt(("rn", "ftz"), "f16", "f32", f32(sub)).tolist() == [0]
    assert cvt(("rn", "relu"), "f16", "f32", f32(-1.0, np.nan, -0.0, 2.0)).tolist() == [0, 0x7FFF, 0, 0x4000]
    assert cvt(("rn", "satfinite"), "f16", "f32", f32(np.inf, -1e6, np.nan)).tolist() == [0x7BFF, 0xFBFF, 0x7FFF]
    assert cvt(("rn",), "f16x2", "f32", f32(1.0), f32(2.0)).tolist() == [0x3C004000]   # a high, b low
    assert cvt(("rz",), "bf16x2", "f32", f32(-1.0), f32(1.0 + 2.0**-8)).tolist() == [0xBF803F80]
    assert cvt(("rni",), "f32", "f32", f32(2.5, -1.5)).tolist() == list(f32(2.0, -2.0))


def test_missing_or_misplaced_rounding_modifiers_are_refused():
    for op in (Op("cvt", (), ("f16", "f32")), Op("cvt", (), ("s32", "f32")), Op("cvt", (), ("f32", "s32")),
               Op("cvt", ("rn",), ("s32", "s16")), Op("cvt", ("rna",), ("tf32", "f32")),
               Op("cvt", ("rn", "relu"), ("f32", "f64"))):
        with pytest.raises(PtxUnsupportedError, match=str(op).replace(".", r"\.")):
            lookup(op)


# ---------------------------------------------------------------------------------------------
# every rounding mode over special values, against the Fraction oracle

SPECIALS = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 2.0**-149, -(2.0**-149), 2.0**-126, 2.0**-24,
            2.0**-25, 3 * 2.0**-26, 2.0**-14, 65504.0, 65519.99, 65520.0, -65536.0, 1e38, 3.4028235e38,
            -3.4028235e38, 1.0 + 2.0**-11, 1.0 + 3 * 2.0**-11, 1.0 + 2.0**-8, 1.0 + 3 * 2.0**-8, 1.0 - 2.0**-12,
            1.0 + 2.0**-24, 1.0 + 2.0**-23 + 2.0**-24, 0.1, -0.1, 1 / 3, 2.0**-133, 2.0**-130 * 1.75,
            1e300, -1e-300, 5e-324]


def oracle(x: float, dst: str, mode: str) -> float:
    if not math.isfinite(x) or x == 0:
        return x
    r = exact.round_fraction(Fraction(x), F[dst], mode)
    if isinstance(r, float):
        return r
    return math.copysign(float(r), x) if r == 0 else float(r)


@pytest.mark.parametrize("src, dst", [(s, d) for s in ("f64", "f32", "f16", "bf16") for d in ("f32", "f16", "bf16")
                                      if s != d])
@pytest.mark.parametrize("mode", ["rn", "rz", "rm", "rp"])
def test_float_to_float_every_mode_matches_the_exact_oracle(src, dst, mode):
    rng = np.random.default_rng(7)
    vals = np.array(SPECIALS + list(rng.standard_normal(40) * 2.0 ** rng.integers(-150, 130, 40)), np.float64)
    src_vals = vals if src == "f64" else np.array(
        [oracle(v, src, "rn") for v in vals], np.float64)            # exact values of the source type
    src_bits = bits_of(src_vals, src)
    got = cvt((mode,), dst, src, src_bits)
    want = bits_of([oracle(float(v), dst, mode) for v in src_vals], dst)
    assert_bitexact(got, want, f"cvt.{mode}.{dst}.{src}")


@pytest.mark.parametrize("src", ["s64", "u64", "s32", "u32", "s16"])
@pytest.mark.parametrize("dst", ["f64", "f32", "f16", "bf16"])
@pytest.mark.parametrize("mode", ["rn", "rz", "rm", "rp"])
def test_int_to_float_every_mode_matches_the_exact_oracle(src, dst, mode):
    w = int(src[1:])
    lo, hi = (-(2 ** (w - 1)), 2 ** (w - 1) - 1) if src[0] == "s" else (0, 2**w - 1)
    rng = np.random.default_rng(w)
    vals = sorted({lo, hi, 0, 1, -1 if lo else 2, 2**24 + 1, 2**53 + 1, 2**53 + 3, 2**63 - 1, -(2**63),
                   2049, 65520, -65520} | {int(v) for v in rng.integers(0, 2**62, 20)})
    vals = [v for v in vals if lo <= v <= hi]
    dt = {16: np.uint16, 32: np.uint32, 64: np.uint64}[w]
    a = np.array([v & ((1 << w) - 1) for v in vals], dt)
    got = cvt((mode,), dst, src, a)
    want = bits_of([0.0 if v == 0 else (lambda r: r if isinstance(r, float) else float(r))(
        exact.round_fraction(Fraction(v), F[dst], mode)) for v in vals], dst)
    assert_bitexact(got, want, f"cvt.{mode}.{dst}.{src}")


@pytest.mark.parametrize("irnd, rule", [("rni", lambda q: round(q)), ("rzi", lambda q: math.trunc(q)),
                                        ("rmi", math.floor), ("rpi", math.ceil)])
def test_float_to_int_every_mode_matches_python_rounding(irnd, rule):
    vals = [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4999999, 1e9 + 0.5, -7.75, 123456.5, 2.0**-140, 8388607.5]
    got = cvt((irnd,), "s32", "f64", f64(*vals))
    want = [rule(Fraction(v)) & 0xFFFFFFFF for v in vals]   # Python round() is half-to-even on Fractions
    assert got.tolist() == want
