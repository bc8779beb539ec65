"""Bit-exact models of the NVIDIA tensor-core dot product (HMMA with fp16 inputs), per architecture.

Spec
----
operation       one hardware block: ``d = rho(c + sum_{i<L} a_i * b_i)`` — a *truncated fused
                dot-product-add* (T-FDPA), not IEEE arithmetic:
                1. products a_i*b_i exact, alignment exponent ep_i = e(a_i) + e(b_i) (the product
                   significand in [0, 4) is NOT renormalised); a zero product has ep = e_zero;
                2. c's exponent e(c) (its own format's emin for subnormals; e_zero when c == 0);
                3. E = max(all ep_i, e(c));
                4. every term truncated toward zero (sign-magnitude) onto the grid 2^(E - F);
                5. exact integer sum S;
                6. one conversion rho: fp32 output round-toward-zero (subnormals kept; |d| >= 2^128
                   gives ±Inf), fp16 output round-to-nearest-even (overflow ±Inf).
                NaN in, Inf·0, or +Inf with -Inf -> canonical NaN (0x7FFF / 0x7FFFFFFF); one Inf
                sign -> that Inf; a zero result (exact cancellation, or a nonzero S rounded to zero)
                is +0, except -0 when every product is -0 and c is -0.
                :func:`fdpa_terms` is this block on decomposed operands of any format (:class:`Terms`);
                bf16, tf32 and fp8 inputs build on it in :mod:`refsim.arith.tensor_core_types`.
chaining        ``mma.sync.m16n8k16``: d = c; for each block of L along k (low k first):
                d = T-FDPA(a[k0:k0+L], b[k0:k0+L], d), d rounded to the D type between blocks.
                Ampere/Ada: two blocks of 8; Hopper mma.sync: one block of 16.
                ``mma.sync.m16n8k8``: one block of the 8 products on every arch (Hopper: its
                16-product datapath fed 8 products). Every kind refsim models:
                :func:`refsim.arith.tensor_core_types.modelled`.
neighbours      integer ``mma`` (exact, wrap or ``.satfinite``): :mod:`refsim.arith.integer_mma`; the kernel
                emulators' fast path for finite fp16 k16 steps with fp32 accumulators, tested equal
                to :func:`mma_m16n8k16`: :mod:`refsim.arith.mma_steps`.
parameters      (L, F, e_zero f32-acc, e_zero f16-acc); L and F as in MMA-Sim (``nv_ptx.py``) and Khattak & Mikaitis
                (arXiv:2512.07004). The zero rules (e_zero, the -0 sum) are refsim's own, not MMA-Sim's, and
                not measured: :mod:`refsim.arith.tensor_core_rules`.
                    sm_70 (4, 23, -131, -20)      Volta, reference only (m8n8k4 datapath)
                    sm_80/86/89 (8, 24, -132, -21) Ampere, Ampere GA10x, Ada
                    sm_87 = sm_80 parameters, UNVERIFIED (no public hardware data for Orin)
                    sm_90 (16, 25, -133, -22)      Hopper ``mma.sync`` (not ``wgmma``)
implementation  integers only (docs/emulator.md, "Tensor cores"): operands split into (sign, integer significand,
                exponent); shifts and the sum in int64; the single output rounding done on the
                integer. No host floating-point mode or contraction can change a bit.
validation      bit-exact on 5000 hardware rows each of A100 (sm_80), H100 (sm_90), V100 (sm_70)
                for fp32 and fp16 output (``tests/arith/test_tensor_core.py``, data from
                north-numerical-computing/MATLAB-tensor-core ``model_validation``, BSD-2-Clause;
                Khattak & Mikaitis, arXiv:2512.07004); on the H100 ``mma.sync`` probes
                (refsim/data/tensor_core_hw/h100_probes.npz) m16n8k16 and m16n8k8 with fp32 accumulation,
                18,432 outputs each (``tests/arith/test_tensor_core_types.py``). Parameters as in MMA-Sim
                (microsoft/MMA-Sim ``mmasim/simulator/nv_ptx.py``) and Khattak–Mikaitis ``models/*.m``.
                Not covered by hardware data: the split order inside m16n8k16 (MMA-Sim's
                randomized testing), NaN/Inf rules, the zero rules of :mod:`refsim.arith.tensor_core_rules`.

Alignment and truncation of one Ampere block (F = 24) in a picture; E = 3 here::

    grid 2^(E-F) = 2^-21:   |<------ 24 fraction bits kept below 2^E ------>|
    p0 = 1.1010 x 2^3       1101 0000 0000 0000 0000 0000 000
    p1 = 1.0110 x 2^-20     0000 0000 0000 0000 0000 0010 110|xx  <- bits below the grid dropped
    c  = -1.1 x 2^-22       0000 0000 0000 0000 0000 0000 000|11  <- toward zero: becomes 0
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import NamedTuple

import numpy as np

from refsim._validate import (require_array, require_bool, require_choice, require_dtype, require_dtype_arg,
                              require_fields, require_int, require_integer_array)
from refsim.errors import DtypeError, FormatRuleError, ShapeError
from refsim.arith import exact
from refsim import archs as _archs

__all__ = [
    "TensorCoreModel", "MODELS", "ARCHS", "MMA_ARCHS", "model", "fdpa", "fdpa_reference",
    "mma_m16n8k16", "mma_m16n8k16_reference", "mma_m16n8k8", "mma_m16n8k8_reference",
    "Terms", "ieee_terms", "fdpa_terms",
]


@dataclass(frozen=True)
class TensorCoreModel:
    """Parameters of one architecture's fp16-input HMMA datapath (see the module spec)."""

    arch: str
    block: int            # L: products per hardware block
    frac_bits: int        # F: fraction bits kept below the largest exponent
    e_zero_f32: int       # alignment exponent of a zero term, fp32 accumulation
    e_zero_f16: int       # alignment exponent of a zero term, fp16 accumulation
    verified: bool        # validated bit for bit on published hardware data
    note: str

    def __post_init__(self):
        require_fields(self)


MODELS: dict[str, TensorCoreModel] = {
    "sm_70": TensorCoreModel("sm_70", 4, 23, -131, -20, True, "V100 data (5000 rows)"),
    "sm_80": TensorCoreModel("sm_80", 8, 24, -132, -21, True, "A100 data (5000 rows)"),
    "sm_86": TensorCoreModel("sm_86", 8, 24, -132, -21, True, "A2 (sm_86): the A100's parameters, checked on published A2 rows; not in refsim/data/tensor_core_hw"),
    "sm_87": TensorCoreModel("sm_87", 8, 24, -132, -21, False,
                             "UNVERIFIED: Orin has no public hardware data; sm_80 parameters assumed"),
    "sm_89": TensorCoreModel("sm_89", 8, 24, -132, -21, True, "L40S/RTX-1000 (sm_89): the A100's parameters, checked on published rows; not in refsim/data/tensor_core_hw"),
    "sm_90": TensorCoreModel("sm_90", 16, 25, -133, -22, True, "H100 data (5000 rows); mma.sync only"),
}
#: the archs with a tensor-core model, in the order of the architecture table (:mod:`refsim.archs`)
ARCHS = tuple(a for a in _archs.ARCHS if a in MODELS)
assert set(ARCHS) == set(MODELS), "every tensor-core model is of an architecture in refsim.archs"
#: the archs with the ``mma.sync`` m16n8k* shapes (PTX ISA: sm_80 and later; Volta has m8n8k4 only)
MMA_ARCHS = tuple(a for a in ARCHS if _archs.ARCHS[a].sm >= 80)


def model(arch: str) -> TensorCoreModel:
    """The :class:`TensorCoreModel` for ``arch`` (one of :data:`ARCHS`, or an architecture-specific
    target such as ``"sm_90a"``: its architecture's model, :data:`refsim.archs.ARCH_SPECIFIC`)."""
    base = _archs.base_arch(arch)
    return MODELS[require_choice("arch", base if base in MODELS else arch, ARCHS)]


# ----------------------------------------------------------------------------------------------
# operand decomposition (integers only)

_OUT = {np.dtype(np.float32): "f32", np.dtype(np.float16): "f16"}


class Terms(NamedTuple):
    """Operands decomposed for the integer datapath: ``|x| = m * 2^(e - frac)``.

    neg bool, m int64 (0 for Inf/NaN), e int64 (subnormals take the format's minimum exponent),
    inf, nan bool; all of one shape. frac: the format's fraction bits (an int).
    """

    neg: np.ndarray
    m: np.ndarray
    e: np.ndarray
    frac: int
    inf: np.ndarray
    nan: np.ndarray


def ieee_terms(u: np.ndarray, exp_bits: int, frac_bits: int, *, has_inf: bool = True) -> Terms:
    """IEEE-style bit patterns (any unsigned/int dtype) -> :class:`Terms`.

    ``has_inf=False`` is the OCP e4m3 rule: no Inf, and only S.1111.111 is NaN (exponent 1111 is an
    ordinary binade otherwise). u: integer array of codes in [0, 2^(1 + exp_bits + frac_bits));
    exp_bits in [2, 8], frac_bits in [1, 23] (the formats the int64 datapath holds)."""
    exp_bits = require_int("exp_bits", exp_bits, minimum=2)
    frac_bits = require_int("frac_bits", frac_bits, minimum=1)
    if exp_bits > 8 or frac_bits > 23:
        raise FormatRuleError(f"exp_bits, frac_bits: must be at most 8 and 23; got {exp_bits}, {frac_bits}")
    has_inf = require_bool("has_inf", has_inf)
    u = require_integer_array("u", u).astype(np.int64)
    if u.size and (int(u.min()) < 0 or int(u.max()) >> (1 + exp_bits + frac_bits)):
        raise FormatRuleError(f"u: codes must lie in [0, 2^{1 + exp_bits + frac_bits}); got "
                              f"{int(u.min()) if int(u.min()) < 0 else int(u.max())}")
    bias = (1 << (exp_bits - 1)) - 1
    top = (1 << exp_bits) - 1
    neg = ((u >> (exp_bits + frac_bits)) & 1).astype(bool)
    eb = (u >> frac_bits) & top
    f = u & ((1 << frac_bits) - 1)
    if has_inf:
        inf, nan = (eb == top) & (f == 0), (eb == top) & (f != 0)
    else:
        inf, nan = np.zeros(u.shape, bool), (eb == top) & (f == (1 << frac_bits) - 1)
    m = np.where(eb == 0, f, f | (1 << frac_bits))
    m = np.where(inf | nan, 0, m)
    e = np.where(eb == 0, 1 - bias, eb - bias)
    return Terms(np.asarray(neg), np.asarray(m), np.asarray(e), frac_bits, np.asarray(inf), np.asarray(nan))


def _shift(x: np.ndarray, s: np.ndarray) -> np.ndarray:
    """x * 2^s truncated toward zero, for x >= 0 int64: left shift (s > 0) or right shift."""
    left = np.left_shift(x, np.clip(s, 0, 62))
    right = np.right_shift(x, np.clip(-s, 0, 63))
    return np.where(s >= 0, left, right)


#: output conversions: (fraction bits kept, minimum normal exponent, round to nearest even?)
_ROUNDING = {"f32": (23, -126, False), "f16": (10, -14, True), "e8m13": (13, -126, False)}


def _round_out(S: np.ndarray, scale: np.ndarray, out: str) -> np.ndarray:
    """Round the exact value S * 2^scale (S int64, |S| < 2^53) once to the output format.

    f32: toward zero to 24 significant bits (quantum >= 2^-149), >= 2^128 -> Inf.
    e8m13: the same with 14 significant bits (an fp32 value whose 10 low fraction bits are 0).
    f16: to nearest even with 11 significant bits (quantum >= 2^-24), >= 65520 -> Inf.
    Returns float64 values that are exactly representable in the output dtype (or ±Inf).
    """
    frac, emin, nearest = _ROUNDING[out]
    mag = np.abs(S)
    _, nbits = np.frexp(mag.astype(np.float64))  # |S| < 2^nbits, exact since |S| < 2^53
    ex = nbits.astype(np.int64) - 1 + scale       # exponent of the leading bit
    q = np.maximum(ex, emin) - frac
    r = np.clip(q - scale, 0, 60)                 # bits to drop
    kept = mag >> r
    if nearest:
        rem = mag - (kept << r)
        half = np.where(r > 0, np.left_shift(np.int64(1), np.maximum(r - 1, 0)), 0)
        up = (r > 0) & ((rem > half) | ((rem == half) & ((kept & 1) == 1)))
        kept = kept + up
    with np.errstate(over="ignore"):
        val = np.ldexp(kept.astype(np.float64), (scale + r).astype(np.int32))
    return np.where(S < 0, -val, val)


def _require_terms(name: str, t, shape: tuple | None = None) -> None:
    """``t`` must be a :class:`Terms` of int64 m/e and bool neg/inf/nan arrays of one shape (``shape``
    if given, at least one axis for a, b), frac an int in [1, 23]."""
    if not isinstance(t, Terms):
        raise FormatRuleError(f"{name}: must be a Terms (see ieee_terms); got {type(t).__name__}")
    arrays = (t.neg, t.m, t.e, t.inf, t.nan)
    if not all(isinstance(x, np.ndarray) for x in arrays):
        raise DtypeError(f"{name}: Terms fields must be numpy arrays; got {[type(x).__name__ for x in arrays]}")
    kinds = [x.dtype == np.bool_ for x in (t.neg, t.inf, t.nan)] + [x.dtype == np.int64 for x in (t.m, t.e)]
    if not all(kinds):
        raise DtypeError(f"{name}: Terms neg/inf/nan must be bool and m/e int64; got "
                         f"{[str(x.dtype) for x in arrays]}")
    want = t.m.shape if shape is None else shape
    if any(x.shape != want for x in arrays) or (shape is None and t.m.ndim < 1):
        raise ShapeError(f"{name}: Terms arrays must share the shape {want} (a, b: (..., L)); got "
                         f"{[x.shape for x in arrays]}")
    if isinstance(t.frac, bool) or not isinstance(t.frac, int) or not 1 <= t.frac <= 23:
        raise FormatRuleError(f"{name}: Terms frac must be an int in [1, 23]; got {t.frac!r}")


def fdpa_terms(F: int, e_zero: int, a: Terms, b: Terms, c: Terms, out: str) -> np.ndarray:
    """The T-FDPA of the module spec on decomposed operands, any input format.

    a, b: :class:`Terms` (..., L); c: :class:`Terms` (...); F: fraction bits kept below the
    largest alignment exponent; e_zero: alignment exponent of a zero term; out: "f32" (RZ),
    "e8m13" (RZ to 13 fraction bits, stored as fp32) or "f16" (RNE). Returns the result bits,
    uint32 for f32/e8m13 and uint16 for f16, shape (...).
    """
    F = require_int("F", F, minimum=1)
    e_zero = require_int("e_zero", e_zero)
    if F > 30 or not -400 <= e_zero <= 0:
        raise FormatRuleError(f"F, e_zero: must lie in [1, 30] and [-400, 0]; got {F}, {e_zero}")
    require_choice("out", out, tuple(_ROUNDING))
    _require_terms("a", a)
    _require_terms("b", b, a.m.shape)
    _require_terms("c", c, a.m.shape[:-1])
    P = a.m * b.m                                     # exact: <= 22 bits
    pn = a.neg ^ b.neg
    ep = np.where(P == 0, e_zero, a.e + b.e)          # not renormalised
    ec = np.where(c.m == 0, e_zero, c.e)
    E = np.maximum(ep.max(axis=-1), ec)               # (...)
    T = _shift(P, ep - E[..., None] + F - (a.frac + b.frac))
    Tc = _shift(c.m, ec - E + F - c.frac)
    S = np.where(pn, -T, T).sum(axis=-1) + np.where(c.neg, -Tc, Tc)
    val = _round_out(S, E - F, out)

    out_dtype = np.float16 if out == "f16" else np.float32
    with np.errstate(over="ignore", invalid="ignore"):
        res = val.astype(out_dtype)
    # a zero result (exact cancellation, or a nonzero sum rounded to zero) is +0, except -0 when
    # every product is a (negative) zero and c is -0
    all_neg_zero = (pn & (P == 0)).all(axis=-1) & c.neg & (c.m == 0)
    res = np.where(val == 0, np.where(all_neg_zero, out_dtype(-0.0), out_dtype(0.0)), res)
    # specials: NaN inputs, Inf*0, +Inf with -Inf; any Inf term decides over an overflowed sum
    a_zero = ~a.inf & ~a.nan & (a.m == 0)
    b_zero = ~b.inf & ~b.nan & (b.m == 0)
    p_nan = a.nan | b.nan | (a.inf & b_zero) | (b.inf & a_zero)
    p_inf = (a.inf | b.inf) & ~p_nan
    pos_inf = (p_inf & ~pn).any(axis=-1) | (c.inf & ~c.neg)
    neg_inf = (p_inf & pn).any(axis=-1) | (c.inf & c.neg)
    nan = p_nan.any(axis=-1) | c.nan | (pos_inf & neg_inf)
    res = np.where(pos_inf, out_dtype(np.inf), res)
    res = np.where(neg_inf, out_dtype(-np.inf), res)
    ubits = np.uint16 if out == "f16" else np.uint32
    bits = np.asarray(res, dtype=out_dtype).view(ubits)
    canonical = ubits(0x7FFF) if out == "f16" else ubits(0x7FFFFFFF)
    return np.where(nan, canonical, bits).astype(ubits)


def _c_terms(c_bits: np.ndarray, c_kind: str) -> Terms:
    """The accumulator operand: fp32 (8, 23) or fp16 (5, 10) bits."""
    return ieee_terms(c_bits, 8, 23) if c_kind == "f32" else ieee_terms(c_bits, 5, 10)


def _fdpa_core(arch_model, a_bits, b_bits, c_bits, c_kind: str, out: str):
    """Vectorised T-FDPA on fp16 bit patterns. a_bits, b_bits uint16 (..., L); c_bits uint16/uint32 (...).
    Returns the result bits (uint32 for f32 output, uint16 for f16 output), shape (...)."""
    e_zero = arch_model.e_zero_f32 if out == "f32" else arch_model.e_zero_f16
    return fdpa_terms(arch_model.frac_bits, e_zero, ieee_terms(a_bits, 5, 10), ieee_terms(b_bits, 5, 10),
                      _c_terms(c_bits, c_kind), out)


def _check_fdpa_args(arch, a, b, c, out_dtype):
    m = model(arch)
    a = require_dtype("a", a, np.float16)
    b = require_dtype("b", b, np.float16)
    c = require_array("c", c)
    if c.dtype not in (np.dtype(np.float32), np.dtype(np.float16)):
        raise DtypeError(f"c: dtype must be float32 or float16; got {c.dtype}")
    try:
        od = np.dtype(out_dtype)
    except TypeError as err:
        raise DtypeError(f"out_dtype: must be numpy.float32 or numpy.float16; got {out_dtype!r}") from err
    if od not in _OUT:
        raise DtypeError(f"out_dtype: must be numpy.float32 or numpy.float16; got {out_dtype!r}")
    if a.ndim < 1 or not 1 <= a.shape[-1] <= m.block:
        raise ShapeError(f"a: last axis must be 1 to the {arch} block length {m.block}; got shape {a.shape}")
    if b.shape != a.shape:
        raise ShapeError(f"b: shape must equal a's {a.shape}; got {b.shape}")
    if c.shape != a.shape[:-1]:
        raise ShapeError(f"c: shape must be a.shape[:-1] = {a.shape[:-1]}; got {c.shape}")
    return m, a, b, c, od


def fdpa(arch: str, a: np.ndarray, b: np.ndarray, c: np.ndarray, out_dtype) -> np.ndarray:
    """One tensor-core hardware block: ``d = c + sum(a * b, axis=-1)`` as ``arch`` computes it.

    arch: one of 'sm_70', 'sm_80', 'sm_86', 'sm_87', 'sm_89', 'sm_90' ('sm_87' is sm_80's model,
    unverified). a, b: float16 (..., L), L at most the block length 4, 8, 8, 8, 8, 16 respectively
    (fewer products take the same datapath: Hopper's ``m16n8k8`` feeds 8 products to its 16-product
    block, measured on the H100). c: float32 or float16,
    shape (...). out_dtype: np.float32 (round toward zero) or np.float16 (round to nearest even).
    Returns out_dtype (...). Zero terms use the e_zero of the *output* (accumulator) type; c is
    decoded in its own format. Hardware-validated combinations: (c f32, out f32), (c f16, out f16).
    """
    m, a, b, c, od = _check_fdpa_args(arch, a, b, c, out_dtype)
    c_kind = "f32" if c.dtype == np.float32 else "f16"
    c_bits = np.array(c).view(np.uint32 if c_kind == "f32" else np.uint16)
    bits = _fdpa_core(m, np.array(a).view(np.uint16), np.array(b).view(np.uint16), c_bits, c_kind, _OUT[od])
    return bits.view(od)


# ----------------------------------------------------------------------------------------------
# plain-loop reference with exact rationals (straight from the spec, one block at a time)


def _e_of(x: float, emin: int) -> int:
    return max(exact._floor_log2(abs(Fraction(x))), emin)


def fdpa_reference(arch: str, a: np.ndarray, b: np.ndarray, c: np.ndarray, out_dtype) -> np.ndarray:
    """Plain-loop twin of :func:`fdpa` with :class:`fractions.Fraction` arithmetic; same contract."""
    m, a, b, c, od = _check_fdpa_args(arch, a, b, c, out_dtype)
    out = _OUT[od]
    e_zero = m.e_zero_f32 if out == "f32" else m.e_zero_f16
    c_emin = -126 if c.dtype == np.float32 else -14
    fmt = exact.F32 if out == "f32" else exact.F16
    res = np.empty(c.shape, od)
    for idx in np.ndindex(c.shape):
        av = [float(x) for x in a[idx]]
        bv = [float(x) for x in b[idx]]
        cv = float(c[idx])
        prods = [x * y for x, y in zip(av, bv)]  # Python float: only used for the special cases
        if any(np.isnan(v) for v in av + bv + [cv]) or any(
            (np.isinf(x) and y == 0) or (np.isinf(y) and x == 0) for x, y in zip(av, bv)
        ):
            res[idx] = np.nan
            continue
        infs = [v for v in prods + [cv] if np.isinf(v)]
        if infs:
            res[idx] = np.nan if (min(infs) < 0 < max(infs)) else infs[0]
            continue
        terms, exps = [], []
        for x, y in zip(av, bv):
            p = Fraction(x) * Fraction(y)
            terms.append(p)
            exps.append(e_zero if p == 0 else _e_of(x, -14) + _e_of(y, -14))
        terms.append(Fraction(cv))
        exps.append(e_zero if cv == 0 else _e_of(cv, c_emin))
        E = max(exps)
        grid = Fraction(2) ** (E - m.frac_bits)
        S = Fraction(0)
        for t in terms:
            q = abs(t) / grid
            S += (1 if t >= 0 else -1) * (q.numerator // q.denominator) * grid
        if S == 0:
            negzero = all(np.signbit(x) != np.signbit(y) for x, y in zip(av, bv) if x * y == 0) and all(
                x * y == 0 for x, y in zip(av, bv)) and cv == 0 and np.signbit(cv)
            res[idx] = -0.0 if negzero else 0.0
            continue
        r = exact.round_fraction(S, fmt, "rz_inf" if out == "f32" else "rn")
        res[idx] = r if isinstance(r, float) else exact.from_fraction(r, od)
    if out == "f32":
        bits = res.view(np.uint32)
        return np.where(np.isnan(res), np.uint32(0x7FFFFFFF), bits).astype(np.uint32).view(np.float32)
    bits = res.view(np.uint16)
    return np.where(np.isnan(res), np.uint16(0x7FFF), bits).astype(np.uint16).view(np.float16)


# ----------------------------------------------------------------------------------------------
# the full instruction


def _check_mma(A, B, C, K: int = 16):
    A = require_dtype("A", A, np.float16)
    B = require_dtype("B", B, np.float16)
    C = require_array("C", C)
    if C.dtype not in (np.dtype(np.float32), np.dtype(np.float16)):
        raise DtypeError(f"C: dtype must be float32 or float16; got {C.dtype}")
    if A.shape[-2:] != (16, K):
        raise ShapeError(f"A: trailing shape must be (16, {K}) (M, K); got {A.shape}")
    if B.shape[-2:] != (K, 8):
        raise ShapeError(f"B: trailing shape must be ({K}, 8) (K, N); got {B.shape}")
    if C.shape[-2:] != (16, 8):
        raise ShapeError(f"C: trailing shape must be (16, 8) (M, N); got {C.shape}")
    return A, B, C


def _mma_f16(arch, A, B, C, out_dtype, K):
    A, B, C = _check_mma(A, B, C, K)
    m = model(arch)
    od = C.dtype if out_dtype is None else require_dtype_arg("out_dtype", out_dtype, _OUT)
    lead = np.broadcast_shapes(A.shape[:-2], B.shape[:-2], C.shape[:-2])
    A = np.broadcast_to(A, lead + (16, K))
    Bt = np.broadcast_to(np.swapaxes(B, -1, -2), lead + (8, K))   # (..., N, K)
    d = np.broadcast_to(C, lead + (16, 8))
    for k0 in range(0, K, m.block):
        L = min(m.block, K - k0)
        a = np.broadcast_to(A[..., :, None, k0:k0 + L], lead + (16, 8, L))
        b = np.broadcast_to(Bt[..., None, :, k0:k0 + L], lead + (16, 8, L))
        d = fdpa(arch, a, b, np.ascontiguousarray(d), od)
    return d


def _mma_f16_reference(arch, A, B, C, out_dtype, K):
    A, B, C = _check_mma(A, B, C, K)
    m = model(arch)
    od = C.dtype if out_dtype is None else require_dtype_arg("out_dtype", out_dtype, _OUT)
    D = np.empty((16, 8), od)
    for i in range(16):
        for j in range(8):
            d = np.asarray(C[i, j])
            for k0 in range(0, K, m.block):
                d = fdpa_reference(arch, A[i, k0:k0 + m.block], B[k0:k0 + m.block, j], d, od)
            D[i, j] = d
    return D


def mma_m16n8k16(arch: str, A: np.ndarray, B: np.ndarray, C: np.ndarray, out_dtype=None) -> np.ndarray:
    """``mma.sync.aligned.m16n8k16.row.col.{f32,f16}.f16.f16.{f32,f16}`` as ``arch`` computes it.

    A float16 (..., 16, 16) (M, K), B float16 (..., 16, 8) (K, N), C float32 or float16
    (..., 16, 8) (M, N); leading axes broadcast (vectorise over many instructions).
    out_dtype defaults to C's dtype. Returns D (..., 16, 8). Each D[i, j] is the chain of
    ``16 // L`` :func:`fdpa` blocks over k, lowest k first, rounded to the D type in between.
    (sm_70 has no m16n8k16; there the chain of four 4-blocks is a reference, not an instruction.)
    """
    return _mma_f16(arch, A, B, C, out_dtype, 16)


def mma_m16n8k16_reference(arch: str, A: np.ndarray, B: np.ndarray, C: np.ndarray, out_dtype=None):
    """Plain-loop twin of :func:`mma_m16n8k16` for one instruction (A (16,16), B (16,8), C (16,8))."""
    return _mma_f16_reference(arch, A, B, C, out_dtype, 16)


def mma_m16n8k8(arch: str, A: np.ndarray, B: np.ndarray, C: np.ndarray, out_dtype=None) -> np.ndarray:
    """``mma.sync.aligned.m16n8k8.row.col.{f32,f16}.f16.f16.{f32,f16}``: ONE :func:`fdpa` block of
    the 8 products — the whole block on sm_80/86/87/89; on sm_90 the 16-product datapath (F = 25)
    fed 8 products (every output of the H100 ``f16_k8_f32`` probes equal). A float16 (..., 16, 8)
    (M, K), B float16 (..., 8, 8) (K, N), C float32/float16 (..., 16, 8); returns D (..., 16, 8).
    (sm_70 has no m16n8k8; there two 4-blocks are chained, a reference only.)"""
    return _mma_f16(arch, A, B, C, out_dtype, 8)


def mma_m16n8k8_reference(arch: str, A: np.ndarray, B: np.ndarray, C: np.ndarray, out_dtype=None):
    """Plain-loop twin of :func:`mma_m16n8k8` for one instruction (A (16,8), B (8,8), C (16,8))."""
    return _mma_f16_reference(arch, A, B, C, out_dtype, 8)
