"""Bit-exact models of ``mma.sync`` with bf16, tf32 and fp8 (e4m3, e5m2) inputs and fp32 accumulation.

Spec
----
operands        bf16  (1, 8, 7)  uint16 bit patterns or ``ml_dtypes.bfloat16``; subnormals kept.
                tf32  an fp32 register (uint32 bits or float32): the tensor core reads sign, exponent
                      and the top 10 fraction bits; the 13 low bits are IGNORED (truncated, not
                      rounded: an fp32 NaN whose payload lies only there is read as Inf).
                e4m3  (1, 4, 3) OCP FP8, uint8 or ``ml_dtypes.float8_e4m3fn``: no Inf, only S.1111.111
                      is NaN, max 448.   e5m2 (1, 5, 2), uint8 or ``ml_dtypes.float8_e5m2``: IEEE specials.
                Accumulator C and result D: float32 (..., 16, 8). Mixed fp8 (e4m3 x e5m2) is allowed.
datapath fdpa   the T-FDPA of :mod:`refsim.arith.tensor_core` (products exact and not renormalised,
                aligned to the largest exponent E of products and c, each term truncated to F bits
                below E, exact sum, one rounding) chained over contiguous blocks of L products, lowest
                k first, the block result rounded toward zero to fp32 (or to e8m13, below) in between.
datapath        sm_90 fp8: Hopper has no fp8 ``mma.sync`` unit; ptxas (13.0, ``-arch=sm_90``) emits
  f16-hmma      F2FP.F16.E4M3.UNPACK_B (or .E5M2) x 12   fp8 -> f16, exact
                HMMA.16816.F32 p = A[:, S0] B[S0, :] + 0   S0 = {k : k & 2 == 0} = 0,1,4,5,8,9,...
                HMMA.16816.F32 q = A[:, S1] B[S1, :] + p   S1 = {k : k & 2 == 2} = 2,3,6,7,...
                FADD           d = c + q                   round to nearest even, canonical NaN
                (each F2FP unpacks the low or high byte pair of an fp8 register into an f16x2
                register, so the first HMMA gets the low pairs of every 4-element group). Each HMMA
                is refsim's sm_90 fp16 model (one 16-product block, F = 25).
models          shape     inputs  arch            datapath  L   F   e_zero  out    evidence
                m16n8k16  bf16    sm_80/86/87/89  fdpa      8   24  -132    f32    assumed
                m16n8k16  bf16    sm_90           fdpa      16  25  -133    f32    H100
                m16n8k8   bf16    sm_80/86/87/89  fdpa      8   24  -132    f32    assumed
                m16n8k8   bf16    sm_90           fdpa      8   25  -133    f32    H100
                m16n8k8   tf32    sm_80/86/87/89  fdpa      4   24  -132    f32    assumed
                m16n8k8   tf32    sm_90           fdpa      8   25  -133    f32    H100
                m16n8k32  fp8     sm_89           fdpa      16  13  -132    e8m13  assumed
                m16n8k32  fp8     sm_90           f16-hmma  (2 x 16, the S0/S1 split)  H100 + SASS
                e8m13: toward zero to 13 fraction bits (an fp32 value whose 10 low fraction bits are 0).
                "H100": every output of the H100 probes (``refsim/data/tensor_core_hw/README.md``) equals
                the model bit for bit. "assumed": no measurement in refsim; the arch's fp16 datapath
                (Ampere/Ada: 8 fp16 = 4 tf32 products per block, F = 24, as refsim's sm_80 model) and,
                for sm_89 fp8 (a native QMMA), MMA-Sim's published Ada model (F = 13, e8m13 output,
                two k16 halves) — ``TypeModel.verified`` is False there.
specials        NaN in, Inf x 0, +Inf with -Inf -> NaN 0x7FFFFFFF; an Inf term decides over an
                overflowed finite sum; a zero result is +0 unless every product and c are -0 (fdpa).
source          PTX ISA 9.x "Warp Level Matrix Multiply-Accumulate Instructions: mma" (types and
                archs: bf16/tf32 sm_80+, e4m3/e5m2 m16n8k32 sm_89+); SASS from ptxas 13.0.88.

Worked examples (each checked in ``tests/arith/test_tensor_core_types.py``)::

    bf16 sm_90, one block of 16, F = 25: a = [1, 2^-12 x4 at k = 8..11], b = [1, 2^-13 x4], c = 0
        E = 0, grid 2^-25: the four products 2^-25 all survive, S = 1 + 2^-23 -> D = 1 + 2^-23.
        sm_80 (blocks k0..7, k8..15, F = 24): block 1 gives 1; block 2 aligns at E = 0 on the grid
        2^-24 and drops every 2^-25 -> D = 1.
    tf32: A[0,0] = 0x3F801800 = 1 + 2^-11 + 2^-12 as fp32, B[0,0] = 1, rest 0, c = 0
        read as tf32 the low 13 bits go: a = 1 -> D = 1 (rounding would give 1 + 2^-10, the
        full fp32 value 1 + 2^-11 + 2^-12).
    fp8 sm_90: products +2^16 at k = 0 (in S0), -2^16 at k = 2 and 2^-18 at k = 18 (both in S1), c = 0
        p = 2^16; q = T-FDPA(2^16 - 2^16 + 2^-18) aligns at E = 16, grid 2^-9: 2^-18 dropped -> 0;
        D = 0 + 0 = 0. Contiguous halves (k < 16, k >= 16) would give 2^-18.
    fp8 sm_90, the final FADD: c = 128, product 3*2^-9 x 2^-9 = 0.75 ulp(128) -> q = 3*2^-18,
        D = RN(128 + 0.75 ulp) = 128 + 2^-16 (a fused sum rounded toward zero would give 128).
    fp8 sm_89 (assumed): c = 1 + 2^-20, one product 2^-7 x 2^-7 = 2^-14: E = 0, grid 2^-13 drops the
        product and c's low bits -> D = 1 (e8m13).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from refsim._validate import require_array, require_choice, require_dtype, require_fields
from refsim.arith import exact
from refsim.arith import tensor_core as tc
from refsim.arith.tensor_core import Terms, fdpa_terms, ieee_terms
from refsim.errors import DtypeError, FormatRuleError, ShapeError

__all__ = ["TypeModel", "MODELS", "TYPES", "model_for", "decode", "fp8_to_f16", "mma", "mma_with_model",
           "mma_reference", "MmaKind", "modelled"]

#: input type -> (exponent bits, fraction bits the tensor core reads, container dtype, ml_dtypes name)
TYPES: dict[str, tuple[int, int, type, str | None]] = {
    "bf16": (8, 7, np.uint16, "bfloat16"),
    "tf32": (8, 10, np.uint32, None),
    "e4m3": (4, 3, np.uint8, "float8_e4m3fn"),
    "e5m2": (5, 2, np.uint8, "float8_e5m2"),
}
_FAMILY = {"bf16": "bf16", "tf32": "tf32", "e4m3": "fp8", "e5m2": "fp8"}
_K = {"m16n8k16": 16, "m16n8k8": 8, "m16n8k32": 32}


@dataclass(frozen=True)
class TypeModel:
    """One (input family, shape, arch) row of the module's model table."""

    arch: str
    shape: str          # "m16n8k16", "m16n8k8" or "m16n8k32"
    family: str         # "bf16", "tf32" or "fp8" (e4m3/e5m2, either operand)
    datapath: str       # "fdpa" or "f16-hmma"
    block: int          # L: products per T-FDPA block (fdpa)
    frac_bits: int      # F: fraction bits kept below the largest alignment exponent
    e_zero: int         # alignment exponent of a zero term
    out: str            # block output rounding: "f32" (RZ) or "e8m13" (RZ to 13 fraction bits)
    verified: bool      # every measured output equals the model
    evidence: str

    def __post_init__(self):
        require_fields(self)  # Python ints, bools and strs, whatever NumPy scalars came in


#: Ampere and Ada: the m16n8k* archs whose fp16 datapath adds blocks of 8 products
_AMPERE_ADA = tuple(a for a in tc.MMA_ARCHS if tc.MODELS[a].block == 8)
_ASSUMED = "assumed: the arch's fp16 datapath (refsim's sm_80 model; MMA-Sim Ampere/Ada), no measurement here"
_H100 = "H100 probes (refsim/data/tensor_core_hw/h100_probes.npz): every output equal"


def _rows() -> dict[tuple[str, str, str], TypeModel]:
    rows = []
    for arch in _AMPERE_ADA:
        rows += [TypeModel(arch, "m16n8k16", "bf16", "fdpa", 8, 24, -132, "f32", False, _ASSUMED),
                 TypeModel(arch, "m16n8k8", "bf16", "fdpa", 8, 24, -132, "f32", False, _ASSUMED),
                 TypeModel(arch, "m16n8k8", "tf32", "fdpa", 4, 24, -132, "f32", False, _ASSUMED)]
    rows += [TypeModel("sm_90", "m16n8k16", "bf16", "fdpa", 16, 25, -133, "f32", True, _H100),
             TypeModel("sm_90", "m16n8k8", "bf16", "fdpa", 8, 25, -133, "f32", True, _H100),
             TypeModel("sm_90", "m16n8k8", "tf32", "fdpa", 8, 25, -133, "f32", True, _H100),
             TypeModel("sm_89", "m16n8k32", "fp8", "fdpa", 16, 13, -132, "e8m13", False,
                       "assumed: MMA-Sim's Ada QMMA model (two k16 halves, F = 13, e8m13), no measurement here"),
             TypeModel("sm_90", "m16n8k32", "fp8", "f16-hmma", 16, 25, -133, "f32", True,
                       _H100 + "; the lowering read from ptxas 13.0 SASS")]
    return {(r.family, r.shape, r.arch): r for r in rows}


MODELS: dict[tuple[str, str, str], TypeModel] = _rows()


def model_for(arch: str, shape: str, atype: str, btype: str) -> TypeModel:
    """The :class:`TypeModel` of ``mma.sync.aligned.<shape>.row.col.f32.<atype>.<btype>.f32`` on ``arch``."""
    require_choice("atype", atype, tuple(TYPES))
    require_choice("btype", btype, tuple(TYPES))
    fa, fb = _FAMILY[atype], _FAMILY[btype]
    if fa != fb:
        raise FormatRuleError(f"btype: must be of atype's family ({fa}); got {btype}")
    shapes = sorted({s for (f, s, _) in MODELS if f == fa})
    require_choice("shape", shape, shapes)
    archs = [a for (f, s, a) in MODELS if f == fa and s == shape]
    require_choice("arch", arch, archs)
    return MODELS[(fa, shape, arch)]


# ----------------------------------------------------------------------------------------------
# operands


def _bits(name: str, x, t: str) -> np.ndarray:
    """The raw bit patterns of operand ``x`` of type ``t`` (container dtype, ml_dtypes or float32)."""
    x = require_array(name, x)
    container, mld = TYPES[t][2], TYPES[t][3]
    if x.dtype == np.dtype(container):
        return x
    if t == "tf32" and x.dtype == np.dtype(np.float32):
        return x.view(np.uint32)
    if mld is not None and x.dtype.name == mld:
        return x.view(container)
    alt = "float32" if t == "tf32" else f"ml_dtypes.{mld}"
    raise DtypeError(f"{name}: dtype must be {np.dtype(container)} (raw {t} bits) or {alt}; got {x.dtype}")


def decode(t: str, bits: np.ndarray) -> Terms:
    """Raw ``t`` bit patterns -> :class:`refsim.arith.tensor_core.Terms` as the tensor core reads them
    (tf32: the fp32 pattern with its 13 low fraction bits cleared)."""
    eb, fb = TYPES[require_choice("type", t, tuple(TYPES))][:2]
    if t == "tf32":
        u = np.asarray(bits).astype(np.int64)
        return ieee_terms((u & 0xFFFFFFFF) >> 13, 8, 10)
    return ieee_terms(bits, eb, fb, has_inf=(t != "e4m3"))


def _f16_table(t: str) -> np.ndarray:
    """uint16 (256,): the fp16 bits of every fp8 code (F2FP.F16.*.UNPACK_B; exact, NaN -> 0x7FFF)."""
    d = decode(t, np.arange(256))
    with np.errstate(over="ignore"):
        val = np.ldexp(d.m.astype(np.float64), (d.e - d.frac).astype(np.int32)).astype(np.float16)
    val = np.where(d.inf, np.float16(np.inf), val)
    val = np.where(d.neg, -val, val).astype(np.float16).view(np.uint16)
    return np.where(d.nan, np.uint16(0x7FFF), val).astype(np.uint16)


_F16_OF = {t: _f16_table(t) for t in ("e4m3", "e5m2")}


def fp8_to_f16(bits: np.ndarray, t: str) -> np.ndarray:
    """fp8 codes (uint8, any shape) of type ``t`` ('e4m3' or 'e5m2') -> float16, exact (NaN -> 0x7FFF)."""
    t = require_choice("t", t, ("e4m3", "e5m2"))
    bits = require_dtype("bits", bits, np.uint8)
    return _F16_OF[t][bits.astype(np.intp)].view(np.float16)


# ----------------------------------------------------------------------------------------------
# the instruction


def _check_operands(shape, atype, btype, A, B, C):
    K = _K[shape]
    A, B = _bits("A", A, atype), _bits("B", B, btype)
    C = require_array("C", C)
    if C.dtype != np.float32:
        raise DtypeError(f"C: dtype must be float32 (fp32 accumulation); got {C.dtype}")
    if A.ndim < 2 or A.shape[-2:] != (16, K):
        raise ShapeError(f"A: trailing shape must be (16, {K}) (M, K) for {shape}; got {A.shape}")
    if B.ndim < 2 or B.shape[-2:] != (K, 8):
        raise ShapeError(f"B: trailing shape must be ({K}, 8) (K, N) for {shape}; got {B.shape}")
    if C.ndim < 2 or C.shape[-2:] != (16, 8):
        raise ShapeError(f"C: trailing shape must be (16, 8) (M, N); got {C.shape}")
    try:
        lead = np.broadcast_shapes(A.shape[:-2], B.shape[:-2], C.shape[:-2])
    except ValueError:
        raise ShapeError(f"A, B, C: leading axes must broadcast; got {A.shape}, {B.shape}, {C.shape}") from None
    return A, B, C, lead


def mma(arch: str, shape: str, atype: str, btype: str, A: np.ndarray, B: np.ndarray, C: np.ndarray) -> np.ndarray:
    """``mma.sync.aligned.<shape>.row.col.f32.<atype>.<btype>.f32`` as ``arch`` computes it.

    shape: 'm16n8k16' / 'm16n8k8' (bf16), 'm16n8k8' (tf32), 'm16n8k32' (e4m3/e5m2, mixed allowed);
    A (..., 16, K) (M, K) and B (..., K, 8) (K, N) as raw bits (uint16 bf16, uint32 tf32, uint8
    fp8) or ml_dtypes arrays (float32 for tf32); C float32 (..., 16, 8). Leading axes broadcast.
    Returns D float32 (..., 16, 8) per the module's model table (:func:`model_for`).
    """
    return mma_with_model(model_for(arch, shape, atype, btype), atype, btype, A, B, C)


def mma_with_model(m: TypeModel, atype: str, btype: str, A: np.ndarray, B: np.ndarray, C: np.ndarray) -> np.ndarray:
    """The instruction ``m.shape`` computed under the :class:`TypeModel` ``m`` — :func:`mma` for the
    model of the table, or a what-if (``dataclasses.replace(model_for(...), frac_bits=24)``). Same
    operands and result as :func:`mma`; ``m.block`` must divide K."""
    if not isinstance(m, TypeModel):
        raise FormatRuleError(f"m: must be a TypeModel (see model_for); got {type(m).__name__}")
    require_choice("shape", m.shape, tuple(_K))
    require_choice("datapath", m.datapath, ("fdpa", "f16-hmma"))
    require_choice("out", m.out, ("f32", "e8m13"))
    for t in (atype, btype):
        require_choice("type", t, tuple(TYPES))
    K = _K[m.shape]
    if not (isinstance(m.block, int) and 1 <= m.block <= K and K % m.block == 0):
        raise FormatRuleError(f"block: must divide K = {K}; got {m.block!r}")
    A, B, C, lead = _check_operands(m.shape, atype, btype, A, B, C)
    if m.datapath == "f16-hmma":
        if {atype, btype} - {"e4m3", "e5m2"} or K != 32:
            raise FormatRuleError(f"datapath: f16-hmma is the sm_90 fp8 m16n8k32 lowering; got {m.shape} {atype}.{btype}")
        return _f16_hmma(fp8_to_f16(A, atype), fp8_to_f16(B, btype), C, lead)
    full = lead + (16, 8, K)
    a = decode(atype, A)                                       # (..., 16, K)
    b = decode(btype, B)                                       # (..., K, 8)
    a = Terms(*(np.broadcast_to(f[..., :, None, :], full) if isinstance(f, np.ndarray) else f for f in a))
    b = Terms(*(np.broadcast_to(np.swapaxes(f, -1, -2)[..., None, :, :], full) if isinstance(f, np.ndarray)
                else f for f in b))
    d = np.broadcast_to(C, lead + (16, 8)).view(np.uint32)
    for k0 in range(0, K, m.block):
        blk = slice(k0, k0 + m.block)
        ab = Terms(*(f[..., blk] if isinstance(f, np.ndarray) else f for f in a))
        bb = Terms(*(f[..., blk] if isinstance(f, np.ndarray) else f for f in b))
        d = fdpa_terms(m.frac_bits, m.e_zero, ab, bb, ieee_terms(d, 8, 23), m.out)
    return d.view(np.float32)


_S0 = (np.arange(32) & 2) == 0                                 # k = 0,1,4,5,...: the first HMMA


def _f16_hmma(A16: np.ndarray, B16: np.ndarray, C: np.ndarray, lead) -> np.ndarray:
    """sm_90 fp8: two sm_90 fp16 HMMAs over the S0 / S1 halves of k, then FADD with C (module spec)."""
    zero = np.zeros(lead + (16, 8), np.float32)
    p = tc.mma_m16n8k16("sm_90", A16[..., _S0], B16[..., _S0, :], zero)
    q = tc.mma_m16n8k16("sm_90", A16[..., ~_S0], B16[..., ~_S0, :], p)
    with np.errstate(all="ignore"):
        d = np.add(np.broadcast_to(C, q.shape), q, dtype=np.float32)
    return np.where(np.isnan(d), np.uint32(0x7FFFFFFF), d.view(np.uint32)).astype(np.uint32).view(np.float32)


# ----------------------------------------------------------------------------------------------
# plain-loop reference with exact rationals


def _value(t: str, bits: int) -> tuple[str, bool, Fraction, int]:
    """One operand as the tensor core reads it: (kind 'num'/'inf'/'nan', sign bit, exact |value|,
    alignment exponent = the exponent field's, subnormals at emin). ``t`` may also be 'f16'."""
    eb, fb = (5, 10) if t == "f16" else TYPES[t][:2]
    if t == "tf32":
        bits = (bits & 0xFFFFFFFF) >> 13
    neg = bool((bits >> (eb + fb)) & 1)
    e_field, f = (bits >> fb) & ((1 << eb) - 1), bits & ((1 << fb) - 1)
    top = (1 << eb) - 1
    if t == "e4m3" and e_field == top and f == (1 << fb) - 1:
        return "nan", neg, Fraction(0), 0
    if t != "e4m3" and e_field == top:
        return ("nan" if f else "inf"), neg, Fraction(0), 0
    bias = (1 << (eb - 1)) - 1
    e = max(e_field - bias, 1 - bias)
    m = f | (1 << fb) if e_field else f
    return "num", neg, Fraction(m) * Fraction(2) ** (e - fb), e


def _fdpa_fraction(a, b, c: float, F: int, e_zero: int, out: str, c_emin: int = -126) -> float:
    """One T-FDPA block written from the spec: a, b lists of :func:`_value` tuples, c a value of the
    accumulator format (its minimum normal exponent ``c_emin``: -126 fp32, -14 fp16); out "f32" or
    "e8m13" (toward zero) or "f16" (nearest even). Shared with :mod:`refsim.arith.wgmma`'s reference."""
    prods = []                                      # (kind, negative, |a*b|, alignment exponent)
    for (ka, na, va, ea), (kb, nb, vb, eb) in zip(a, b):
        if "nan" in (ka, kb) or (ka == "inf" and kb == "num" and vb == 0) or (kb == "inf" and ka == "num" and va == 0):
            kind = "nan"
        else:
            kind = "inf" if "inf" in (ka, kb) else "num"
        prods.append((kind, na != nb, va * vb, e_zero if va * vb == 0 else ea + eb))
    inf_signs = {neg for kind, neg, _, _ in prods if kind == "inf"}
    if abs(c) == float("inf"):
        inf_signs.add(c < 0)
    if c != c or any(kind == "nan" for kind, *_ in prods) or len(inf_signs) == 2:
        return float("nan")
    if inf_signs:
        return float("-inf") if inf_signs.pop() else float("inf")
    cv = Fraction(c)
    ec = e_zero if c == 0 else max(exact._floor_log2(abs(cv)), c_emin)
    E = max([e for *_, e in prods] + [ec])
    grid = Fraction(2) ** (E - F)
    S = sum((-1 if neg else 1) * (v // grid) * grid for _, neg, v, _ in prods)
    S += (-1 if cv < 0 else 1) * (abs(cv) // grid) * grid
    fmt = {"f32": exact.F32, "f16": exact.F16}.get(out) or exact.FloatFormat("e8m13", 14, -126, 127, None)
    r = exact.round_fraction(S, fmt, "rn" if out == "f16" else "rz_inf")
    if r == 0:
        every_neg_zero = all(neg and v == 0 for _, neg, v, _ in prods) and c == 0 and bool(np.signbit(c))
        return -0.0 if every_neg_zero else 0.0
    return float(r)


def mma_reference(arch: str, shape: str, atype: str, btype: str, A: np.ndarray, B: np.ndarray,
                  C: np.ndarray) -> np.ndarray:
    """Plain-loop twin of :func:`mma` for one instruction (A (16, K), B (K, 8), C (16, 8) float32),
    in :class:`fractions.Fraction` arithmetic straight from the module spec."""
    m = model_for(arch, shape, atype, btype)
    A, B, C, lead = _check_operands(shape, atype, btype, A, B, C)
    if lead:
        raise ShapeError(f"A: the reference takes one instruction (16, K); got {A.shape}")
    K = _K[shape]
    D = np.empty((16, 8), np.float32)
    for i in range(16):
        for j in range(8):
            if m.datapath == "f16-hmma":
                a = [_value("f16", int(h)) for h in fp8_to_f16(A[i], atype).view(np.uint16)]
                b = [_value("f16", int(h)) for h in fp8_to_f16(B[:, j], btype).view(np.uint16)]
                s0 = [k for k in range(K) if k & 2 == 0]
                s1 = [k for k in range(K) if k & 2]
                p = _fdpa_fraction([a[k] for k in s0], [b[k] for k in s0], 0.0, 25, -133, "f32")
                q = _fdpa_fraction([a[k] for k in s1], [b[k] for k in s1], p, 25, -133, "f32")
                D[i, j] = _fadd_rn(float(C[i, j]), q)
                continue
            d = float(C[i, j])
            for k0 in range(0, K, m.block):
                a = [_value(atype, int(A[i, k])) for k in range(k0, k0 + m.block)]
                b = [_value(btype, int(B[k, j])) for k in range(k0, k0 + m.block)]
                d = _fdpa_fraction(a, b, d, m.frac_bits, m.e_zero, m.out)
            D[i, j] = d
    bits = D.view(np.uint32)
    return np.where(np.isnan(D), np.uint32(0x7FFFFFFF), bits).astype(np.uint32).view(np.float32)


def _fadd_rn(c: float, q: float) -> float:
    """``add.rn.f32`` written with exact rationals: IEEE specials, one RNE, +0 unless both are -0."""
    if c != c or q != q or (abs(c) == abs(q) == float("inf") and (c > 0) != (q > 0)):
        return float("nan")
    if abs(c) == float("inf") or abs(q) == float("inf"):
        return c if abs(c) == float("inf") else q
    s = Fraction(c) + Fraction(q)
    if s == 0:
        return -0.0 if np.signbit(c) and np.signbit(q) else 0.0
    r = exact.round_fraction(s, exact.F32, "rn")
    return float(r)


# ----------------------------------------------------------------------------------------------
# every mma kind refsim models, as data (for validators that enumerate them)


@dataclass(frozen=True)
class MmaKind:
    """One ``mma.sync.aligned.<shape>.row.col.<d>.<a>.<b>.<c>`` refsim executes (refsim.ptx included).

    archs: the architectures with a model; verified: those where refsim's result is confirmed —
    measured hardware outputs equal the model, or the arithmetic is exact (integer kinds, which
    also take ``.satfinite``).
    """

    shape: str
    a: str
    b: str
    c: str
    d: str
    archs: tuple[str, ...]
    verified: tuple[str, ...]

    def __post_init__(self):
        require_fields(self)

    @property
    def ptx(self) -> str:
        """The instruction text without operands, e.g. ``mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32``."""
        return f"mma.sync.aligned.{self.shape}.row.col.{self.d}.{self.a}.{self.b}.{self.c}"


_MMA_ARCHS = tc.MMA_ARCHS     # archs with m16n8k* (Volta has m8n8k4 only)


@functools.lru_cache(maxsize=None)
def modelled() -> tuple[MmaKind, ...]:
    """Every mma kind refsim models, with its archs: fp16 (:mod:`refsim.arith.tensor_core`), bf16/tf32/fp8
    (this module) and integer. Evidence per arch in ``verified``: the fp16 hardware rows (f32/f32 and
    f16/f16 blocks, ``tensor_core.MODELS[arch].verified``), the H100 probes (m16n8k8 f16 -> f32 and this
    module's ``verified`` rows), exact arithmetic (integers)."""
    kinds = []
    block_rows = tuple(a for a in _MMA_ARCHS if tc.MODELS[a].verified)
    # C and D of one type: the ISA's m16n8k8/m16n8k16 forms with .ctype != .dtype are refused by ptxas
    # (".dtype must be '.f16' when .ctype is '.f16'"), so no hardware runs them.
    for acc in ("f32", "f16"):
        kinds.append(MmaKind("m16n8k16", "f16", "f16", acc, acc, _MMA_ARCHS, block_rows))
        k8 = tuple(a for a in block_rows if a != "sm_90" or acc == "f32")
        kinds.append(MmaKind("m16n8k8", "f16", "f16", acc, acc, _MMA_ARCHS, k8))
    groups: dict[tuple[str, str], list] = {}
    for m in MODELS.values():
        groups.setdefault((m.family, m.shape), []).append(m)
    for (family, shape), rows in groups.items():
        archs = tuple(sorted(m.arch for m in rows))
        verified = tuple(sorted(m.arch for m in rows if m.verified))
        names = ("e4m3", "e5m2") if family == "fp8" else (family,)
        kinds += [MmaKind(shape, a, b, "f32", "f32", archs, verified) for a in names for b in names]
    for shape, bits in (("m16n8k16", 8), ("m16n8k32", 8), ("m16n8k32", 4), ("m16n8k64", 4)):
        for a in ("s", "u"):
            for b in ("s", "u"):
                kinds.append(MmaKind(shape, f"{a}{bits}", f"{b}{bits}", "s32", "s32", _MMA_ARCHS, _MMA_ARCHS))
    return tuple(kinds)
