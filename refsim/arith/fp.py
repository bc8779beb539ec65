"""Exact scalar floating-point primitives of an NVIDIA GPU, vectorised over NumPy arrays.

Spec
----
element types   fp16 (binary16: 1 sign, 5 exponent, 10 fraction bits), fp32 (binary32),
                bf16 (1, 8, 7) as ``ml_dtypes.bfloat16``; fp64 only as an intermediate.
rounding        every result is the exact real result rounded once, round-to-nearest-even (RNE),
                subnormals kept (no ``.ftz``), overflow to ±Inf — the PTX ``.rn`` semantics of
                ``add/sub/mul/fma.rn.{f16,f32}`` and ``cvt.rn``.
NaN             every NaN an arithmetic instruction (add/sub/mul/fma, f16 and f32) produces is the
                canonical NaN of its type, :data:`CANONICAL_NAN` (0x7FFF / 0x7FFFFFFF: positive,
                all fraction bits set), whatever the operands' NaN payloads or signs; this is what
                NVIDIA GPUs write (the ISA leaves the bits unspecified; the H100 probes and the
                official Any-Precision kernel show 0x7FFF where NumPy's x86 arithmetic gives 0xFE00
                for Inf + -Inf). :func:`canonical_nan` applies the rule.
fused flag      every multiply-add takes ``fused=``: ``True`` is one rounding (``fma.rn``, HFMA2,
                FFMA), ``False`` is ``mul.rn`` then ``add.rn`` (two roundings). Which one a kernel
                executes is a property of its SASS, not of its source (check the SASS: ``refsim ptx stats --sass``): the
                caller must say.
how             fp16 add/sub/mul: NumPy float16 ufuncs (computed in float32 and rounded once more;
                innocuous because 24 >= 2·11 + 2, Figueroa 1995). fp16 fma: exact float64 product,
                float64 sum, one RNE to fp16 (the sum is exact or the rounding cannot matter:
                :func:`_f16_fma_fused`). fp32 fma: the product is exact in float64; the sum is
                rounded to float64 *to odd* (:func:`refsim.arith.rounding.two_sum` error term, then a
                one-ulp nudge: :func:`~refsim.arith.rounding.round_to_odd`) and then to
                the target with RNE — correct because 53 >= p + 2 (Boldo & Melquiond 2008). f64 -> bf16 goes through a round-to-odd
                float32 for the same reason (ml_dtypes rounds f64 -> f32 -> bf16 twice).
oracle          :mod:`refsim.arith.exact` (``fractions.Fraction``); the ``*_reference``
                functions here are plain loops over that oracle. ``bench/bench_emulator.py``
                checks >= 10^6 random bit patterns per primitive, the tests a sample plus every
                special case.
other modes     the directed modifiers (``.rz .rm .rp``) and f16/bf16/f32/f64 in any mode, as refsim.ptx
                executes them: :mod:`refsim.arith.rounding`.
source          PTX ISA 9.x, "Floating Point Instructions" (add/sub/mul/fma ``.rn``) and ``cvt``
                (float-to-integer conversions saturate, NaN -> 0; PTX ISA, cvt).

Round-to-odd in one picture (binary, the target keeps 3 fraction bits, the intermediate 5)::

    exact     1.011 01 1  (more bits)       RN to 5 bits: 1.01101  (ties could be faked)
    RO to 5   1.011 01|1 -> 1.01101 (odd: sticky bit folded into the last bit)
    RN to 3   1.011|01  -> 1.011            never a false tie, so one correct rounding
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from refsim._validate import require_array, require_choice, require_dtype, require_dtype_arg, require_float_array
from refsim.errors import DtypeError, FormatRuleError, ShapeError
from refsim.arith import exact, rounding

__all__ = [
    "CANONICAL_NAN", "canonical_nan",
    "f16_add", "f16_sub", "f16_mul", "f16_fma",
    "f32_add", "f32_sub", "f32_mul", "f32_fma",
    "cvt_f32_to_f16", "cvt_f64_to_f16", "cvt_f16_to_f32", "cvt_f32_to_bf16", "cvt_f64_to_bf16",
    "cvt_float_to_int", "cvt_int_to_f16", "cvt_int_to_f32",
    "f16_bits", "f32_bits", "f16_from_bits", "f32_from_bits",
    "add_reference", "mul_reference", "fma_reference", "fma_reference_scalar", "convert_reference",
    "ROUNDING_TO_INT",
]

_F16 = np.dtype(np.float16)
_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)


# the NaN bit pattern NVIDIA GPUs write for every NaN result of an arithmetic instruction, per PTX type
CANONICAL_NAN = {"f16": 0x7FFF, "bf16": 0x7FFF, "f32": 0x7FFFFFFF, "f64": 0x7FFFFFFFFFFFFFFF}
_CANONICAL_BY_DTYPE = {np.dtype(np.float16): (np.uint16, 0x7FFF), np.dtype(np.float32): (np.uint32, 0x7FFFFFFF)}


def canonical_nan(x: np.ndarray) -> np.ndarray:
    """``x`` (float16 or float32, any shape) with every NaN replaced by the canonical NaN of its
    type (:data:`CANONICAL_NAN`); a new array of the same dtype and shape, other elements' bits
    unchanged. The rule every fp16/fp32 arithmetic result here follows."""
    x = require_dtype("x", x, np.float16, np.float32)
    utype, bits = _CANONICAL_BY_DTYPE[x.dtype]
    nan = np.isnan(x)
    out = np.array(x, copy=True)
    if nan.any():
        out.view(utype)[nan] = utype(bits)
    return out


def _bf16():
    import ml_dtypes

    return np.dtype(ml_dtypes.bfloat16)


# ----------------------------------------------------------------------------------------------
# bit views


_UINT_OF_SIZE = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def raw_bits(x: np.ndarray) -> np.ndarray:
    """Any array's elements as unsigned integers of the same width: the bits of each VALUE in native
    byte order, C order, same shape (0-d stays 0-d). A big-endian ``>f2`` array holding the values of
    a native ``float16`` one gives the same integers (a view of the memory would give them
    byte-swapped). Exact comparisons of outputs compare these."""
    x = require_array("x", x)                       # a native-order copy of a big-endian array
    if x.dtype.itemsize not in _UINT_OF_SIZE or x.dtype.hasobject:
        raise DtypeError(f"x: elements must be 1, 2, 4 or 8 bytes wide; got {x.dtype}")
    if not x.flags.c_contiguous:
        x = x.copy(order="C")
    return x.view(_UINT_OF_SIZE[x.dtype.itemsize])


def f16_bits(x: np.ndarray) -> np.ndarray:
    """fp16 array -> uint16 bit patterns (a copy, same shape)."""
    return np.array(require_dtype("x", x, np.float16)).view(np.uint16)


def f32_bits(x: np.ndarray) -> np.ndarray:
    """fp32 array -> uint32 bit patterns (a copy, same shape)."""
    return np.array(require_dtype("x", x, np.float32)).view(np.uint32)


def f16_from_bits(u: np.ndarray) -> np.ndarray:
    """uint16 bit patterns -> fp16 array (a copy, same shape)."""
    return np.array(require_dtype("u", u, np.uint16)).view(np.float16)


def f32_from_bits(u: np.ndarray) -> np.ndarray:
    """uint32 bit patterns -> fp32 array (a copy, same shape)."""
    return np.array(require_dtype("u", u, np.uint32)).view(np.float32)


def _same_dtype(names: tuple[str, ...], arrays: tuple, dtype) -> tuple[np.ndarray, ...]:
    out = tuple(require_dtype(n, a, dtype) for n, a in zip(names, arrays))
    try:
        np.broadcast_shapes(*(a.shape for a in out))
    except ValueError as err:
        shapes = ", ".join(f"{n}{a.shape}" for n, a in zip(names, out))
        raise ShapeError(f"operands: shapes must broadcast; got {shapes}") from err
    return out


def _reference_operands(names: tuple[str, ...], arrays: tuple) -> tuple[np.ndarray, ...]:
    """The shared check of the ``*_reference`` twins: float16 or float32 (all the same dtype, the
    fast functions' rule), shapes broadcast; returns the broadcast operands (never truncates)."""
    first = require_dtype(names[0], arrays[0], np.float16, np.float32)
    return tuple(np.broadcast_arrays(*_same_dtype(names, arrays, first.dtype)))


def _rn(ufunc, dtype, a, b) -> np.ndarray:
    """One IEEE operation of ``dtype`` (float16/float32) on checked, broadcast operands: NumPy computes
    the exact result rounded once to nearest-even, as ``add/sub/mul.rn`` do; no warnings."""
    a, b = _same_dtype(("a", "b"), (a, b), dtype)
    with np.errstate(all="ignore"):
        return canonical_nan(ufunc(a, b, dtype=dtype))


def _require_flag(name: str, value) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise FormatRuleError(f"{name}: must be True or False (say which the SASS executes); got {value!r}")
    return bool(value)


# ----------------------------------------------------------------------------------------------
# fp16


def f16_add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``add.rn.f16``: a + b rounded once (RNE). a, b float16, broadcastable; returns float16."""
    return _rn(np.add, np.float16, a, b)


def f16_sub(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``sub.rn.f16``: a - b rounded once (RNE). a, b float16, broadcastable; returns float16."""
    return _rn(np.subtract, np.float16, a, b)


def f16_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``mul.rn.f16``: a · b rounded once (RNE). a, b float16, broadcastable; returns float16."""
    return _rn(np.multiply, np.float16, a, b)


def f16_fma(a: np.ndarray, b: np.ndarray, c: np.ndarray, *, fused: bool | None = None) -> np.ndarray:
    """a · b + c on fp16. ``fused=True``: ``fma.rn.f16`` / ``__hfma`` (one rounding);
    ``fused=False``: ``mul.rn.f16`` then ``add.rn.f16`` (two roundings).

    a, b, c float16, broadcastable; returns float16. The fused path computes the exact product in
    float64, the float64 sum (RNE) and one RNE conversion to fp16; see :func:`_f16_fma_fused`
    for why the float64 sum needs no round-to-odd here. ``fused`` must be given (True or False):
    leaving it out raises FormatRuleError (the caller says which instruction the SASS executes).
    """
    a, b, c = _same_dtype(("a", "b", "c"), (a, b, c), np.float16)
    fused = _require_flag("fused", fused)
    if not fused:
        return f16_add(f16_mul(a, b), c)
    return _f16_fma_fused(a, b, c)


def _f16_fma_fused(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``fma.rn.f16`` on checked float16 operands: ``fp16(float64(a*b) + float64(c))``.

    Why one float64 RNE sum suffices (no round-to-odd): p = a*b is exact in float64 (22
    significant bits, 2^-48 <= |p| < 2^32 or 0); c has 11 bits with its last bit >= 2^-24. The
    float64 sum is exact unless the two span more than 53 bit positions, which needs either
    (i) |p| >= 2^20, when the exact result and the float64 one both round to +-Inf in fp16
    (|c| <= 65504), or (ii) |p| < 2^-31 |c|, when |p| is below a quarter fp16 ulp of c: the exact
    sum rounds to c, and so does the float64 sum, which lies within one float64 ulp of c (not a
    tie). Specials follow IEEE float64 (Inf*0 -> NaN, signed zeros as fma). Checked against the
    exact-rational oracle in tests/arith/test_fp.py, including both boundary cases.
    """
    with np.errstate(all="ignore"):
        return canonical_nan((a.astype(np.float64) * b.astype(np.float64) + c.astype(np.float64)).astype(np.float16))


# ----------------------------------------------------------------------------------------------
# fp32


def f32_add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``add.rn.f32`` (FADD): a + b with one RNE. a, b float32, broadcastable; returns float32."""
    return _rn(np.add, np.float32, a, b)


def f32_sub(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``sub.rn.f32``: a - b with one RNE. a, b float32, broadcastable; returns float32."""
    return _rn(np.subtract, np.float32, a, b)


def f32_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``mul.rn.f32`` (FMUL): a · b with one RNE. a, b float32, broadcastable; returns float32."""
    return _rn(np.multiply, np.float32, a, b)


def f32_fma(a: np.ndarray, b: np.ndarray, c: np.ndarray, *, fused: bool | None = None) -> np.ndarray:
    """a · b + c on fp32. ``fused=True``: ``fma.rn.f32`` / FFMA / ``fmaf`` (one rounding);
    ``fused=False``: FMUL then FADD (two roundings).

    a, b, c float32, broadcastable; returns float32. Fused path: exact float64 product
    (24 + 24 bits), round-to-odd float64 sum, one RNE conversion (handles subnormals and
    overflow). A plain float64 ``a*b + c`` would double-round in rare cases. ``fused`` must be
    given (True or False); leaving it out raises FormatRuleError.
    """
    a, b, c = _same_dtype(("a", "b", "c"), (a, b, c), np.float32)
    fused = _require_flag("fused", fused)
    if not fused:
        return f32_add(f32_mul(a, b), c)
    with np.errstate(all="ignore"):
        p = a.astype(np.float64) * b.astype(np.float64)
        s = rounding.round_to_odd(*rounding.two_sum(p, c.astype(np.float64)))
        return canonical_nan(s.astype(np.float32))


# ----------------------------------------------------------------------------------------------
# conversions


def cvt_f32_to_f16(x: np.ndarray) -> np.ndarray:
    """``cvt.rn.f16.f32`` (``__float2half``): RNE, subnormals kept, overflow -> ±Inf, NaN -> the
    canonical NaN 0x7FFF. x float32 (any shape); returns float16."""
    x = require_dtype("x", x, np.float32)
    with np.errstate(all="ignore"):
        return canonical_nan(x.astype(np.float16))


def cvt_f64_to_f16(x: np.ndarray) -> np.ndarray:
    """float64 -> fp16 with a single RNE (NumPy converts directly, never through float32).
    x float64; returns float16."""
    x = require_dtype("x", x, np.float64)
    with np.errstate(all="ignore"):
        return x.astype(np.float16)


def cvt_f16_to_f32(x: np.ndarray) -> np.ndarray:
    """``cvt.f32.f16`` (``__half2float``): exact. x float16; returns float32."""
    x = require_dtype("x", x, np.float16)
    return x.astype(np.float32)


def cvt_f32_to_bf16(x: np.ndarray) -> np.ndarray:
    """``cvt.rn.bf16.f32`` (``__float2bfloat16``): RNE on the bit pattern, NaN -> quiet NaN.

    x float32; returns ``ml_dtypes.bfloat16``. Bits: ``(u + 0x7FFF + lsb) >> 16`` where lsb is
    bit 16 of u — the carry out of the low half rounds up, and a tie goes to the even result.
    """
    x = require_dtype("x", x, np.float32)
    u = np.array(x).view(np.uint32).astype(np.uint64)
    lsb = (u >> np.uint64(16)) & np.uint64(1)
    rounded = ((u + np.uint64(0x7FFF) + lsb) >> np.uint64(16)).astype(np.uint16)
    nan_bits = ((u >> np.uint64(16)).astype(np.uint16) | np.uint16(0x0040))
    out = np.where(np.isnan(x), nan_bits, rounded)
    return out.astype(np.uint16).view(_bf16())


def cvt_f64_to_bf16(x: np.ndarray) -> np.ndarray:
    """float64 -> bf16 with a single RNE: round to float32 *to odd*, then RNE to bf16.

    x float64; returns ``ml_dtypes.bfloat16``. (``x.astype(bfloat16)`` in ml_dtypes rounds twice.)
    """
    x = require_dtype("x", x, np.float64)
    with np.errstate(all="ignore"):
        f = x.astype(np.float32)
        back = f.astype(np.float64)
        inexact = np.isfinite(f) & (back != x)
        even = (np.array(f).view(np.uint32) & 1) == 0
        toward = np.where(x > back, np.inf, -np.inf).astype(np.float32)
        f = np.where(inexact & even, np.nextafter(f, toward), f)
    return cvt_f32_to_bf16(f.astype(np.float32))


ROUNDING_TO_INT = ("rni", "rzi", "rmi", "rpi")
_INT_DTYPES = (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32)


def cvt_float_to_int(x: np.ndarray, dtype, mode: str = "rni") -> np.ndarray:
    """``cvt.{rni,rzi,rmi,rpi}.{s,u}{8,16,32}.{f16,f32,f64}``: round to an integer, saturate.

    x float16/32/64 (any shape); dtype one of int8/uint8/int16/uint16/int32/uint32; mode
    ``rni`` nearest-even, ``rzi`` toward zero, ``rmi`` toward -Inf, ``rpi`` toward +Inf.
    PTX: float-to-integer conversions clamp to the destination range and NaN becomes 0.
    """
    x = require_float_array("x", x)
    mode = require_choice("mode", mode, ROUNDING_TO_INT)
    dtype = require_dtype_arg("dtype", dtype, _INT_DTYPES)
    info = np.iinfo(dtype)
    v = x.astype(np.float64)
    r = {"rni": np.rint, "rzi": np.trunc, "rmi": np.floor, "rpi": np.ceil}[mode](v)
    r = np.where(np.isnan(r), 0.0, np.clip(r, info.min, info.max))
    return r.astype(dtype)


def cvt_int_to_f16(x: np.ndarray) -> np.ndarray:
    """``cvt.rn.f16.s32`` / ``__int2half_rn``: RNE (exact for |x| <= 2048). x integer (<= 32-bit)."""
    x = require_array("x", x) if isinstance(x, np.ndarray) else x
    if not isinstance(x, np.ndarray) or x.dtype not in [np.dtype(d) for d in _INT_DTYPES]:
        got = x.dtype if isinstance(x, np.ndarray) else type(x).__name__
        raise DtypeError(f"x: dtype must be an integer type of at most 32 bits; got {got}")
    with np.errstate(all="ignore"):
        return x.astype(np.float64).astype(np.float16)  # int32 is exact in float64: one rounding


def cvt_int_to_f32(x: np.ndarray) -> np.ndarray:
    """``cvt.rn.f32.s32`` / ``__int2float_rn``: RNE (exact for |x| <= 2^24). x integer (<= 32-bit)."""
    x = require_array("x", x) if isinstance(x, np.ndarray) else x
    if not isinstance(x, np.ndarray) or x.dtype not in [np.dtype(d) for d in _INT_DTYPES]:
        got = x.dtype if isinstance(x, np.ndarray) else type(x).__name__
        raise DtypeError(f"x: dtype must be an integer type of at most 32 bits; got {got}")
    return x.astype(np.float64).astype(np.float32)


# ----------------------------------------------------------------------------------------------
# plain-loop references over the exact rational oracle

_FMT = {_F16: exact.F16, _F32: exact.F32}


def _special(result_float: float, dtype) -> np.generic:
    """An Inf or NaN result as a scalar of ``dtype`` (NaN: the canonical NaN)."""
    return canonical_nan(np.asarray(result_float, dtype=np.float64).astype(dtype))[()]


def _finish(exact_value, zero_negative: bool, fmt, dtype):
    r = exact.round_fraction(exact_value, fmt, "rn")
    if isinstance(r, float):
        return _special(r, dtype)
    if r == 0:
        negative = exact_value < 0 if exact_value != 0 else zero_negative
        return _special(-0.0 if negative else 0.0, dtype)
    return exact.from_fraction(r, dtype)


def add_reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Plain loop: each a + b from exact rationals, rounded once (RNE). Same dtype float16/float32,
    broadcastable shapes. IEEE signs: an exact zero sum is -0 only when both operands are -0."""
    a, b = _reference_operands(("a", "b"), (a, b))
    out = np.empty(a.shape, a.dtype)
    fmt = _FMT[a.dtype]
    for i in np.ndindex(a.shape):
        x, y = float(a[i]), float(b[i])
        if not (np.isfinite(x) and np.isfinite(y)):
            out[i] = _special(x + y, a.dtype)
            continue
        neg_zero = np.signbit(x) and np.signbit(y)
        out[i] = _finish(exact.to_fraction(x) + exact.to_fraction(y), neg_zero, fmt, a.dtype)
    return out


def mul_reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Plain loop: each a · b exactly, rounded once (RNE). Same dtype float16/float32, broadcastable."""
    a, b = _reference_operands(("a", "b"), (a, b))
    out = np.empty(a.shape, a.dtype)
    fmt = _FMT[a.dtype]
    for i in np.ndindex(a.shape):
        x, y = float(a[i]), float(b[i])
        if not (np.isfinite(x) and np.isfinite(y)):
            out[i] = _special(x * y, a.dtype)
            continue
        neg = bool(np.signbit(x)) != bool(np.signbit(y))
        out[i] = _finish(exact.to_fraction(x) * exact.to_fraction(y), neg, fmt, a.dtype)
    return out


def fma_reference(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Plain loop: each a · b + c exactly, rounded once (RNE) — the fused result.
    Same dtype float16/float32, broadcastable shapes."""
    a, b, c = _reference_operands(("a", "b", "c"), (a, b, c))
    out = np.empty(a.shape, a.dtype)
    fmt = _FMT[a.dtype]
    for i in np.ndindex(a.shape):
        out[i] = _fma_one(float(a[i]), float(b[i]), float(c[i]), fmt, a.dtype)
    return out


def fma_reference_scalar(a: np.floating, b: np.floating, c: np.floating) -> np.floating:
    """:func:`fma_reference` for three scalars of one dtype (np.float16 or np.float32): the same
    exact-rational fused result, without the array machinery (plain loops that chain one fma
    after another call this). Returns a scalar of that dtype."""
    dt = type(a)
    if dt not in (np.float16, np.float32) or type(b) is not dt or type(c) is not dt:
        raise DtypeError(f"a, b, c: must be np.float16 or np.float32 scalars of one dtype; got "
                         f"{type(a).__name__}, {type(b).__name__}, {type(c).__name__}")
    return _fma_one(float(a), float(b), float(c), _FMT[np.dtype(dt)], dt)


def _fma_one(x: float, y: float, z: float, fmt, dtype) -> np.generic:
    """One exact fused multiply-add of float values (the body of the two fma references)."""
    if not (math.isfinite(x) and math.isfinite(y) and math.isfinite(z)):
        return _special(x * y + z, dtype)
    p = Fraction(x) * Fraction(y)
    p_neg = math.copysign(1.0, x) != math.copysign(1.0, y)
    neg_zero = p == 0 and p_neg and math.copysign(1.0, z) < 0 and z == 0
    return _finish(p + Fraction(z), neg_zero, fmt, dtype)


def convert_reference(x: np.ndarray, target: str) -> np.ndarray:
    """Plain loop: float -> ``target`` ('float16', 'float32' or 'bfloat16') with one RNE.
    x float16/float32/float64 any shape; returns ``target`` dtype, same shape."""
    target = require_choice("target", target, ("float16", "float32", "bfloat16"))
    x = require_dtype("x", x, np.float16, np.float32, np.float64)
    fmt = {"float16": exact.F16, "float32": exact.F32, "bfloat16": exact.BF16}[target]
    dtype = _bf16() if target == "bfloat16" else np.dtype(target)
    out = np.empty(x.shape, dtype)
    for i in np.ndindex(x.shape):
        v = float(x[i])
        if not np.isfinite(v):
            out[i] = np.asarray(v, np.float32).astype(dtype)
            continue
        r = exact.round_fraction(exact.to_fraction(v), fmt, "rn")
        if isinstance(r, float):
            out[i] = np.asarray(r, np.float32).astype(dtype)
        elif r == 0:
            out[i] = np.asarray(-0.0 if np.signbit(v) else 0.0, np.float32).astype(dtype)
        else:
            out[i] = np.asarray(float(r), np.float64).astype(np.float32).astype(dtype)  # exact
    return out
