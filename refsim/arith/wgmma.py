"""Models of Hopper's warpgroup ``wgmma.mma_async`` arithmetic, every dense kind of the PTX ISA.

Spec
----
instruction     ``wgmma.mma_async.sync.aligned.m64n<N>k<K>.<d>.<a>.<b>  d, a(-desc), b-desc, scale-d,
                imm-scale-a, imm-scale-b[, imm-trans-a, imm-trans-b]`` (PTX ISA 9.x, "Asynchronous Warpgroup
                Level Matrix Multiply-Accumulate Instructions"; PTX target sm_90a, :data:`PTX_TARGET`):
                    a, b         K   d (= the accumulator C)   N
                    f16          16  f16, f32                  8, 16, ..., 256 (multiples of 8)
                    bf16         16  f32                       8, 16, ..., 256
                    tf32          8  f32                       8, 16, ..., 256
                    e4m3/e5m2    32  f16, f32 (a, b mixed)     8, 16, ..., 256
                    s8/u8        32  s32 (.satfinite too)      8, 16, 24, 32, 48, 64, ..., 256 (then steps of 16)
                    b1 (.and.popc) 256 s32                     8, 16, 24, 32, 48, 64, ..., 256
                :func:`modelled` lists them as :class:`WgmmaKind` rows (the twin of
                :func:`refsim.arith.tensor_core_types.modelled` for ``mma.sync``).
operands        A (..., 64, K) (M, K) and B (..., K, N) (K, N) as logical matrices: raw bits (uint16 f16/bf16,
                uint32 tf32, uint8 fp8), float16, ml_dtypes, float32 for tf32; integers for s8/u8; 0/1 for b1.
                C (..., 64, N) float32 / float16 / int32 as d says. Leading axes broadcast.
what counts     ``imm-scale-a/b = -1`` negates every element of A / B (the sign bit flips, zeros too);
                ``scale-d = 0`` gives D = A·B: C is replaced by +0 (assumed: "no addend" and "+0 addend" differ
                only in the sign of an all -0 sum and in where the f16 zero floor lies). ``imm-trans-a/b``
                and A from registers or shared memory choose where the matrices are read, not the arithmetic:
                A and B here are the matrices after that choice. Integer kinds have no imm-scale.
datapath        per output element D[i, j], one :func:`refsim.arith.tensor_core.fdpa_terms` block over all K
                products and C (:class:`WgmmaModel`, :func:`model`):
                    f16/bf16 (K 16), tf32 (K 8)  L = K, F = 25, e_zero -133 (f32) / -22 (f16), fp32 RZ or
                        fp16 RNE: refsim's H100-verified sm_90 ``mma.sync`` block (the parameters are read
                        from ``tensor_core.model("sm_90")``), tf32 operands with their 13 low bits truncated;
                    e4m3/e5m2 (K 32)  L = 32, F = 13: the 32 products and C aligned to the largest exponent
                        E and truncated to 13 fraction bits below it, then the f32 result rounded toward zero
                        to 13 fraction bits (e8m13: an fp32 whose 10 low fraction bits are 0), or fp16 RNE;
                    s8/u8 exact, int32 wrap or .satfinite clamp (:func:`refsim.arith.integer_mma.mma_int`);
                    b1 D = C + popc(A_i AND B_j) per element, int32 wrap.
evidence        NO hardware data of refsim's own: every float row is ``verified=False``.
                f16/bf16/tf32: the assumption that wgmma and ``mma.sync`` share the sm_90 datapath
                (MMA-Sim, arXiv:2511.10909, publishes one model for both on Hopper: one fused block, F = 25).
                fp8: the reduced accumulation precision of Hopper FP8 wgmma — DeepSeek-V3 technical report
                §3.3.2 "Increasing Accumulation Precision" (about 14 bits kept), MMA-Sim's Hopper wgmma model
                (F = 13, e8m13 output); e_zero is the sm_90 value (assumed; fp8 products never reach it).
                Integer kinds are exact by the ISA's definition.
reference       :func:`wgmma_reference`: plain loops, exact rationals (the T-FDPA block of
                :mod:`refsim.arith.tensor_core_types`' reference), Python integers; tested equal.

FP8 accumulation in one picture (F = 13, E = 0: the grid is 2^-13)::

    c  = 1.0                  1.0000000000000|
    p0 = 2^-12 (e4m3 2^-6 x 2^-6)   0.0000000000010|        kept (on the grid)
    p1 = 2^-14 (2^-7 x 2^-7)        0.0000000000000|01      dropped (below the grid)
    D  = 1 + 2^-12            fp32 accumulation (F = 25) would give 1 + 2^-12 + 2^-14
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from refsim._validate import (MAX_ELEMENTS, require_array, require_bool, require_bounded, require_choice,
                              require_dtype, require_fields, require_instance, require_optional_bool)
from refsim.arith import integer_mma
from refsim.arith import tensor_core as tc
from refsim.arith import tensor_core_types as tct
from refsim.arith.tensor_core import Terms, fdpa_terms, ieee_terms
# the exact-rational T-FDPA block and operand reader of the mma.sync reference: one definition for both
from refsim.arith.tensor_core_types import _fdpa_fraction, _value
from refsim.errors import DtypeError, FormatRuleError, ShapeError, ToolchainError

__all__ = ["PTX_TARGET", "M", "WgmmaKind", "WgmmaModel", "MODELS", "modelled", "kind_of", "model", "wgmma",
           "wgmma_reference"]

#: the PTX target wgmma needs (the arch-specific sm_90a features); the arithmetic model is sm_90's
PTX_TARGET = "sm_90a"
ARCH = "sm_90"
#: rows of A and D: every wgmma shape is m64
M = 64

_N_ALL = tuple(range(8, 257, 8))
_N_INT = (8, 16, 24, 32) + tuple(range(48, 257, 16))
_FLOAT_BITS = {"f16": 16, "bf16": 16, "tf32": 32, "e4m3": 8, "e5m2": 8}
_SIGN = {"f16": 0x8000, "bf16": 0x8000, "tf32": 0x80000000, "e4m3": 0x80, "e5m2": 0x80}
_FAMILY = {"f16": "f16", "bf16": "bf16", "tf32": "tf32", "e4m3": "fp8", "e5m2": "fp8", "s8": "int8", "u8": "int8",
           "b1": "b1"}
_D_DTYPE = {"f32": np.float32, "f16": np.float16, "s32": np.int32}


@dataclass(frozen=True)
class WgmmaKind:
    """One ``wgmma.mma_async`` kind: K, the A/B/D types (C is D), the legal N, the archs with a model and the
    archs where it is confirmed (measured, or exact integer arithmetic)."""

    k: int
    a: str
    b: str
    d: str
    ns: tuple[int, ...]
    archs: tuple[str, ...]
    verified: tuple[str, ...]

    def __post_init__(self):
        require_fields(self)

    @property
    def types(self) -> str:
        """``"<d>.<a>.<b>"``, e.g. ``"f32.e4m3.e5m2"`` (what :func:`kind_of` takes)."""
        return f"{self.d}.{self.a}.{self.b}"

    def ptx(self, n: int, satfinite: bool = False) -> str:
        """The instruction text for N = ``n`` without operands, e.g.
        ``wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16``."""
        n = _require_n(self, n)
        sat = ".satfinite" if require_bool("satfinite", satfinite) else ""
        if sat and _FAMILY[self.a] != "int8":
            raise FormatRuleError(f"satfinite: only s8/u8 wgmma takes .satfinite; got {self.types}")
        tail = ".and.popc" if self.a == "b1" else ""
        return f"wgmma.mma_async.sync.aligned.m64n{n}k{self.k}{sat}.{self.d}.{self.a}.{self.b}{tail}"


@dataclass(frozen=True)
class WgmmaModel:
    """The datapath of one input family (module spec): a T-FDPA block of all K products (F fraction bits
    below the largest exponent, zero terms at e_zero, f32 output rounding ``out_f32``), or exact integers."""

    family: str          # "f16", "bf16", "tf32", "fp8", "int8", "b1"
    datapath: str        # "fdpa" or "exact"
    frac_bits: int       # F (0 for exact)
    e_zero_f32: int      # alignment exponent of a zero term, f32 accumulator
    e_zero_f16: int      # ... f16 accumulator
    out_f32: str         # "f32" (RZ to 23 fraction bits) or "e8m13" (RZ to 13)
    verified: bool
    evidence: str

    def __post_init__(self):
        require_fields(self)


_SM90 = tc.model(ARCH)
_SHARED = ("assumed: wgmma shares the H100-verified sm_90 mma.sync datapath (one block of K products, "
           "F = 25; MMA-Sim publishes this model for Hopper wgmma); no wgmma measurement in refsim")
_FP8 = ("assumed: Hopper FP8 wgmma keeps 13 fraction bits (DeepSeek-V3 report 3.3.2: about 14 bits; MMA-Sim "
        "arXiv:2511.10909: F = 13, e8m13 output); no wgmma measurement in refsim")
MODELS: dict[str, WgmmaModel] = {
    f: WgmmaModel(f, "fdpa", _SM90.frac_bits, _SM90.e_zero_f32, _SM90.e_zero_f16, "f32", False, _SHARED)
    for f in ("f16", "bf16", "tf32")
}
MODELS["fp8"] = WgmmaModel("fp8", "fdpa", 13, _SM90.e_zero_f32, _SM90.e_zero_f16, "e8m13", False, _FP8)
MODELS["int8"] = WgmmaModel("int8", "exact", 0, 0, 0, "f32", True, "exact integer arithmetic (PTX ISA)")
MODELS["b1"] = WgmmaModel("b1", "exact", 0, 0, 0, "f32", True, "exact integer arithmetic (PTX ISA)")


@functools.lru_cache(maxsize=None)
def modelled() -> tuple[WgmmaKind, ...]:
    """Every dense ``wgmma.mma_async`` kind (module spec table), each modelled at sm_90 (PTX target
    :data:`PTX_TARGET`); ``verified`` holds sm_90 only for the exact integer kinds."""
    rows = [(16, "f16", "f16", d, _N_ALL) for d in ("f16", "f32")]
    rows += [(16, "bf16", "bf16", "f32", _N_ALL), (8, "tf32", "tf32", "f32", _N_ALL)]
    rows += [(32, a, b, d, _N_ALL) for d in ("f16", "f32") for a in ("e4m3", "e5m2") for b in ("e4m3", "e5m2")]
    rows += [(32, a, b, "s32", _N_INT) for a in ("s8", "u8") for b in ("s8", "u8")]
    rows += [(256, "b1", "b1", "s32", _N_INT)]
    return tuple(WgmmaKind(k, a, b, d, ns, (ARCH,), (ARCH,) if MODELS[_FAMILY[a]].verified else ())
                 for k, a, b, d, ns in rows)


def kind_of(types: str) -> WgmmaKind:
    """The :class:`WgmmaKind` whose ``types`` (``"<d>.<a>.<b>"``, e.g. ``"f32.bf16.bf16"``) is given."""
    table = {k.types: k for k in modelled()}
    return table[require_choice("types", types, tuple(table))]


def model(kind: WgmmaKind | str) -> WgmmaModel:
    """The :class:`WgmmaModel` (datapath parameters) of ``kind`` (a :class:`WgmmaKind` or its types)."""
    return MODELS[_FAMILY[_kind(kind).a]]


def _kind(kind) -> WgmmaKind:
    if isinstance(kind, str):
        return kind_of(kind)
    kind = require_instance("kind", kind, WgmmaKind, "WgmmaKind (see modelled, kind_of)")
    if kind not in modelled():
        raise FormatRuleError(f"kind: must be one of modelled() (wgmma kinds of the PTX ISA); got {kind.types}")
    return kind


def _require_n(kind: WgmmaKind, n) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or int(n) not in kind.ns:
        raise ShapeError(f"N: wgmma {kind.types} takes N in {list(kind.ns)}; got {n!r}")
    return int(n)


# ----------------------------------------------------------------------------------------------
# operands


def _float_bits(name: str, x, t: str) -> np.ndarray:
    """Raw bits of float operand ``x`` of type ``t`` (f16: uint16 or float16; others as mma.sync takes them)."""
    if t != "f16":
        return tct._bits(name, x, t)
    x = require_array(name, x)
    if x.dtype not in (np.dtype(np.uint16), np.dtype(np.float16)):
        raise DtypeError(f"{name}: dtype must be uint16 (raw f16 bits) or float16; got {x.dtype}")
    return x.view(np.uint16)


def _negated(bits: np.ndarray, t: str, scale: int) -> np.ndarray:
    """imm-scale = -1: every element's sign bit flipped (zeros and NaNs too)."""
    return bits ^ bits.dtype.type(_SIGN[t]) if scale == -1 else bits


def _check(kind, A, B, C, scale_d, scale_a, scale_b, satfinite):
    """Checked operands: (kind, A, B, C, lead, N, flags) before any arithmetic."""
    kind = _kind(kind)
    fam = _FAMILY[kind.a]
    scale_d, satfinite = require_bool("scale_d", scale_d), require_bool("satfinite", satfinite)
    for name, s in (("scale_a", scale_a), ("scale_b", scale_b)):
        if isinstance(s, bool) or s not in (1, -1):
            raise FormatRuleError(f"{name}: imm-scale must be 1 or -1; got {s!r}")
        if s == -1 and fam in ("int8", "b1"):
            raise FormatRuleError(f"{name}: integer wgmma ({kind.types}) has no imm-scale operand; got -1")
    if satfinite and fam != "int8":
        raise FormatRuleError(f"satfinite: only s8/u8 wgmma takes .satfinite; got {kind.types}")
    if fam in ("int8", "b1"):
        A, B = require_array("A", A), require_array("B", B)
        for name, x in (("A", A), ("B", B)):
            if not np.issubdtype(x.dtype, np.integer) and x.dtype != np.bool_:
                raise DtypeError(f"{name}: dtype must be an integer type for {kind.types}; got {x.dtype}")
    else:
        A, B = _float_bits("A", A, kind.a), _float_bits("B", B, kind.b)
    C = require_dtype("C", C, _D_DTYPE[kind.d])
    if A.ndim < 2 or A.shape[-2:] != (M, kind.k):
        raise ShapeError(f"A: trailing shape must be ({M}, {kind.k}) (M, K) for {kind.types}; got {A.shape}")
    if B.ndim < 2 or B.shape[-2] != kind.k:
        raise ShapeError(f"B: trailing shape must be ({kind.k}, N) (K, N) for {kind.types}; got {B.shape}")
    N = _require_n(kind, B.shape[-1])
    if C.ndim < 2 or C.shape[-2:] != (M, N):
        raise ShapeError(f"C: trailing shape must be ({M}, {N}) (M, N); got {C.shape}")
    try:
        lead = np.broadcast_shapes(A.shape[:-2], B.shape[:-2], C.shape[:-2])
    except ValueError:
        raise ShapeError(f"A, B, C: leading axes must broadcast; got {A.shape}, {B.shape}, {C.shape}") from None
    require_bounded("D", int(np.prod(lead, dtype=object)) * M * N * kind.k, MAX_ELEMENTS, what="element count x K")
    if fam in ("int8", "b1"):
        for name, x, t in (("A", A, kind.a), ("B", B, kind.b)):
            lo, hi = (0, 1) if t == "b1" else integer_mma.INT_RANGES[t]
            if x.size and (int(x.min()) < lo or int(x.max()) > hi):
                raise FormatRuleError(f"{name}: {t} values must lie in [{lo}, {hi}]; got "
                                      f"{int(x.min()) if int(x.min()) < lo else int(x.max())}")
    return kind, A, B, C, lead, N, scale_d


# ----------------------------------------------------------------------------------------------
# the instruction

#: products per fdpa_terms call (bounds the int64 temporaries of one chunk: 8 MiB each)
_CHUNK = 1 << 20


def wgmma(kind, A: np.ndarray, B: np.ndarray, C: np.ndarray, *, scale_d: bool = True, scale_a: int = 1,
          scale_b: int = 1, satfinite: bool = False, native: bool | None = None) -> np.ndarray:
    """``wgmma.mma_async.sync.aligned.m64n<N>k<K>.<d>.<a>.<b>`` as refsim models it on sm_90 (module spec).

    kind: a :class:`WgmmaKind` of :func:`modelled` or its types string (``"f32.e4m3.e4m3"``). A (..., 64, K)
    (M, K), B (..., K, N) (K, N): bits or values as the module spec lists; N must be legal for the kind.
    C (..., 64, N): float32 / float16 / int32 per d; read only when ``scale_d`` (``scale-d = 0``: D = A·B).
    scale_a, scale_b: the ``imm-scale-a/b`` operands (1, or -1 to negate; float kinds only); satfinite:
    s8/u8 only. Leading axes broadcast. Returns D (..., 64, N) of C's dtype. native: None = the compiled
    twin of :mod:`refsim.native.emulators` where one exists (fp8 -> f32; f16 -> f32 with finite
    operands) and it is available, else NumPy; False = NumPy (the readable definition); True = compiled
    where a twin exists (ToolchainError when it is unavailable). The twins are tested equal.
    """
    native = require_optional_bool("native", native)
    kind, A, B, C, lead, N, scale_d = _check(kind, A, B, C, scale_d, scale_a, scale_b, satfinite)
    fam = _FAMILY[kind.a]
    if not scale_d:
        C = np.zeros(C.shape, C.dtype)
    if fam == "int8":
        return integer_mma.mma_int(A.astype(np.int64), B.astype(np.int64), C, atype=kind.a, btype=kind.b,
                                   satfinite=satfinite)
    if fam == "b1":
        acc = C.astype(np.int64) + np.matmul(A.astype(np.int64), B.astype(np.int64))
        return ((acc + 2**31) % 2**32 - 2**31).astype(np.int32)
    m = model(kind)
    K = kind.k
    A = np.broadcast_to(_negated(A, kind.a, scale_a), lead + (M, K)).reshape(-1, M, K)      # (T, 64, K)
    B = np.broadcast_to(_negated(B, kind.b, scale_b), lead + (K, N)).reshape(-1, K, N)      # (T, K, N)
    c_kind = "f16" if kind.d == "f16" else "f32"
    ubits = np.uint16 if c_kind == "f16" else np.uint32
    Cb = np.broadcast_to(np.ascontiguousarray(C).view(ubits), lead + (M, N)).reshape(-1, M, N)  # (T, 64, N)
    if native is not False and c_kind == "f32" and kind.a in ("e4m3", "e5m2", "f16"):
        D = _native(kind, m, A, B, Cb, native)
        if D is not None:
            return D.reshape(lead + (M, N)).view(np.float32)
    out = "f16" if c_kind == "f16" else m.out_f32
    e_zero = m.e_zero_f16 if c_kind == "f16" else m.e_zero_f32
    D = np.empty(Cb.shape, ubits)
    rows = max(1, min(M, _CHUNK // (N * K)))
    for t in range(Cb.shape[0]):
        a_all, b_all = _terms(kind.a, A[t]), _terms(kind.b, np.ascontiguousarray(B[t].T))  # (64, K), (N, K)
        for r0 in range(0, M, rows):
            r1 = min(M, r0 + rows)
            shape = (r1 - r0, N, K)
            a = Terms(*(np.broadcast_to(f[r0:r1, None, :], shape) if isinstance(f, np.ndarray) else f for f in a_all))
            b = Terms(*(np.broadcast_to(f[None, :, :], shape) if isinstance(f, np.ndarray) else f for f in b_all))
            c = ieee_terms(Cb[t, r0:r1], *((5, 10) if c_kind == "f16" else (8, 23)))
            D[t, r0:r1] = fdpa_terms(m.frac_bits, e_zero, a, b, c, out)
    return D.reshape(lead + (M, N)).view(_D_DTYPE[kind.d])


def _native(kind: WgmmaKind, m: WgmmaModel, A: np.ndarray, B: np.ndarray, Cb: np.ndarray, native):
    """D bits (T, 64, N) uint32 from the compiled twins of :mod:`refsim.native.emulators`, or None where
    none applies (the NumPy path then runs): fp8 -> f32 (``wgmma_fp8_f32``, every code), f16 -> f32
    with finite A, B and C (``mma_k16_f32_blocks``: sm_90's one block of 16 products is this model)."""
    from refsim.native import emulators as nat

    if not nat.available():
        if native:
            raise ToolchainError(f"native: the compiled wgmma twin is unavailable ({nat.status()}); use native=None "
                                 f"or False for the NumPy path")
        return None
    if kind.a != "f16":
        return nat.wgmma_fp8_f32(kind.a == "e5m2", kind.b == "e5m2", m.frac_bits, m.e_zero_f32,
                                 np.ascontiguousarray(A), np.ascontiguousarray(np.swapaxes(B, -1, -2)), Cb)
    if (((A >> 10) & 31) == 31).any() or (((B >> 10) & 31) == 31).any() or (((Cb >> 23) & 255) == 255).any():
        return None
    if _SM90.block != kind.k or m.frac_bits != _SM90.frac_bits:       # the twin is sm_90's 16-product block
        return None
    D = np.array(Cb.view(np.float32), order="C", copy=True)
    kcol = np.zeros(1, np.int64)
    for t in range(D.shape[0]):
        nat.mma_k16_f32_blocks(_SM90.block, m.frac_bits, m.e_zero_f32, np.ascontiguousarray(A[t]),
                               np.ascontiguousarray(B[t]), kcol, D[t:t + 1])
    return D.view(np.uint32)


def _terms(t: str, bits: np.ndarray) -> Terms:
    return ieee_terms(bits, 5, 10) if t == "f16" else tct.decode(t, bits)


# ----------------------------------------------------------------------------------------------
# plain-loop reference with exact rationals


def wgmma_reference(kind, A: np.ndarray, B: np.ndarray, C: np.ndarray, *, scale_d: bool = True, scale_a: int = 1,
                    scale_b: int = 1, satfinite: bool = False) -> np.ndarray:
    """Plain-loop twin of :func:`wgmma` for one instruction (A (64, K), B (K, N), C (64, N)), written from
    the module spec: Fraction arithmetic for float kinds, Python integers for integer kinds."""
    kind, A, B, C, lead, N, scale_d = _check(kind, A, B, C, scale_d, scale_a, scale_b, satfinite)
    if lead:
        raise ShapeError(f"A: the reference takes one instruction ({M}, {kind.k}); got {A.shape}")
    fam, K = _FAMILY[kind.a], kind.k
    D = np.empty((M, N), _D_DTYPE[kind.d])
    if fam in ("int8", "b1"):
        for i in range(M):
            for j in range(N):
                s = (int(C[i, j]) if scale_d else 0) + sum(int(A[i, k]) * int(B[k, j]) for k in range(K))
                if satfinite:
                    s = min(max(s, -(2**31)), 2**31 - 1)
                D[i, j] = (s + 2**31) % 2**32 - 2**31
        return D
    m = model(kind)
    sa = _SIGN[kind.a] if scale_a == -1 else 0
    sb = _SIGN[kind.b] if scale_b == -1 else 0
    f16_acc = kind.d == "f16"
    cols = [[_value(kind.b, int(B[k, j]) ^ sb) for k in range(K)] for j in range(N)]
    for i in range(M):
        a = [_value(kind.a, int(A[i, k]) ^ sa) for k in range(K)]
        for j, b in enumerate(cols):
            c = float(C[i, j]) if scale_d else 0.0
            D[i, j] = _fdpa_fraction(a, b, c, m.frac_bits, m.e_zero_f16 if f16_acc else m.e_zero_f32,
                                     "f16" if f16_acc else m.out_f32, -14 if f16_acc else -126)
    ubits, nan = (np.uint16, 0x7FFF) if f16_acc else (np.uint32, 0x7FFFFFFF)
    return np.where(np.isnan(D), ubits(nan), D.view(ubits)).astype(ubits).view(D.dtype)

