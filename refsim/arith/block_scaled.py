"""Models of Blackwell's block-scaled tensor-core instructions: ``mma.sync`` ``kind::f8f6f4``,
``kind::mxf8f6f4``, ``kind::mxf4``, ``kind::mxf4nvf4`` (sm_120a) and the same kinds of ``tcgen05.mma``
(sm_100a). Every model is ``verified=False``: refsim has no Blackwell measurement.

Spec
----
instruction     ``mma.sync.aligned.<shape>.row.col.kind::<kind>[.block_scale.scale_vec::<X>].f32.<a>.<b>.f32[.<stype>]
                d, a, b, c[, scale-a-data, {byte-id-a, thread-id-a}, scale-b-data, {byte-id-b, thread-id-b}]``
                (PTX ISA 9.x "Warp Level Matrix Multiply-Accumulate Instructions: mma", "with block scaling"):
                    kind       shape     a, b                         scale_vec  stype  block (K per scale)
                    f8f6f4     m16n8k32  e4m3 e5m2 e3m2 e2m3 e2m1     -          -      - (no scales)
                    mxf8f6f4   m16n8k32  e4m3 e5m2 e3m2 e2m3 e2m1     1X         ue8m0  32
                    mxf4       m16n8k64  e2m1                         2X         ue8m0  32
                    mxf4nvf4   m16n8k64  e2m1                         2X         ue8m0  32
                    mxf4nvf4   m16n8k64  e2m1                         4X         ue4m3  16
                a and b may differ (f8f6f4, mxf8f6f4). ``tcgen05.mma.cta_group::<1|2>.kind::<kind>.block_scale``
                (sm_100a, "TensorCore 5th Generation ... Block Scaling") takes the same kinds with A (M, K), B (K, N),
                scale_A (M, K/block), scale_B (K/block, N) read from Tensor Memory: :func:`tcgen05_mma_block_scaled`
                (M 128 or 256, N 8..256 in steps of 8; the arithmetic does not depend on M or N, and the ISA's finer
                per-cta_group rules on N are not enforced). :func:`modelled` lists every row.
operands        logical matrices, one element code per uint8, right-aligned as :mod:`refsim.formats.minifloat`
                stores them (fp4 unpacked: the register packing and the byte-id/thread-id selection of the scale
                registers choose where values are read, not the arithmetic). A (..., M, K), B (..., K, N), C float32
                (..., M, N); scale_a uint8 (..., M, K/block): row i of A, k in [b*block, (b+1)*block) is scaled by
                scale_a[i, b]; scale_b uint8 (..., K/block, N) likewise per column. Leading axes broadcast.
                Elements: :data:`refsim.arith.minifloat.FORMATS` (e4m3: S.1111.111 NaN; e5m2: IEEE Inf/NaN; fp6/fp4
                no specials). ue8m0: 2^(s - 127), s = 0xFF NaN. ue4m3: e4m3 with the sign bit ignored (|s|), 0x7F NaN.
datapath        per D[i, j], after MMA-Sim (arXiv:2511.10909) Blackwell / RTX Blackwell:
  mxf8          f8f6f4, mxf8f6f4 (K 32): ONE fused block of all 32 products and c (:func:`tensor_core.fdpa_terms`):
                    product k = a_k * b_k * 2^(sa + sb), exact, not renormalised; its alignment exponent
                    e_a + e_b + sa + sb (element exponents with subnormals at the format's emin; sa = s_a - 127);
                    c at its exponent (fp32 subnormals at -126); zero terms never set the alignment
                    E = the largest exponent; each term truncated toward zero to F = 25 fraction bits below E;
                    exact sum; one rounding toward zero to fp32 (overflow -> Inf). f8f6f4 is this with sa = sb = 0.
  mxf4          mxf4, mxf4nvf4 (K 64, e2m1): four groups of 16 k. Group g: G_g = sum of its 16 e2m1 products
                (exact); the term G_g * sig(sA) * sig(sB) at exponent exp(sA) + exp(sB), where sA, sB are the
                scales of the block holding group g and sig/exp the scale's significand and exponent
                (ue8m0: 1, s - 127; ue4m3: 1.mmm, e - 7, subnormal 0.mmm, -6). The term's exponent counts even
                when G_g = 0 (MMA-Sim: a zero block with a large scale still sets the alignment); a zero ue4m3
                scale makes its term zero and leaves the alignment. c as above. E = the largest exponent; each term
                truncated toward zero to F = 35 fraction bits below E; exact sum; one rounding toward zero to
                fp32 (overflow -> Inf).
specials        any NaN element, Inf x 0, +Inf with -Inf, a NaN scale of a block holding a product of D[i, j]
                (mxf4: any scale of row i / column j), or NaN c -> 0x7FFFFFFF. An Inf term (e5m2 element, c)
                decides over a finite sum. A zero result is +0, except -0 when c = -0 and every product is a -0.
evidence        ``verified=False`` everywhere: no Blackwell hardware data in refsim. F = 25 (mxf8), the unnormalised
                products, the 16-product groups and F = 35 (mxf4) are MMA-Sim's published Blackwell findings
                (measured there for e4m3/e5m2 mxf8f6f4 and e2m1 mxf4/mxf4nvf4; fp6/fp4 under mxf8f6f4 and mixed
                a/b types are assumed to share the mxf8 datapath). Assumed here: the zero-result sign (refsim's
                H100 rule; MMA-Sim returns +0), an Inf c in mxf4 passing through, and sm_100a sharing sm_120a's
                arithmetic (MMA-Sim models both alike).
reference       :func:`mma_block_scaled_reference`: plain loops over exact rationals, from this spec; tested equal.

mxf8f6f4 in one picture (e4m3, F = 25): c = 1, a0 = b0 = 1 under scales 2^-20 and 2^-10, so the one
product is 2^-30 (the block is all of K = 32, one scale pair per row and column)::

    c     1.0000000000000000000000000|           E = 0, grid 2^-25
    p0    0.0000000000000000000000000|00001      2^-30 truncated away -> D = 1
    (with c = 0: E = -30 and D = 2^-30 exactly)
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from refsim._validate import (MAX_ELEMENTS, require_array, require_bounded, require_choice, require_dtype,
                              require_fields, require_instance)
from refsim.arith import exact
from refsim.arith.minifloat import FORMATS
from refsim.arith.tensor_core import Terms, _round_out, _shift, fdpa_terms, ieee_terms
from refsim.errors import DtypeError, FormatRuleError, ShapeError

__all__ = ["ELEMENTS", "BlockScaledKind", "modelled", "kind_for", "element_terms", "mma_block_scaled",
           "tcgen05_mma_block_scaled", "mma_block_scaled_reference"]

#: element types of the f8f6f4 kinds (a name of :data:`refsim.arith.minifloat.FORMATS` each)
ELEMENTS: tuple[str, ...] = ("e4m3", "e5m2", "e3m2", "e2m3", "e2m1")
#: mma.sync rows: M x N per instruction
MMA_M, MMA_N = 16, 8
TCGEN05_M = (128, 256)
TCGEN05_N = tuple(range(8, 257, 8))
#: alignment exponent of a zero product: below every nonzero term (products reach 2^-282 at the least)
_E_ZERO = -400
_NAN32 = np.uint32(0x7FFFFFFF)


@dataclass(frozen=True)
class BlockScaledKind:
    """One block-scaled kind (module spec table): the instruction family, ``.kind``, ``.scale_vec`` ("" for
    f8f6f4), scale type ("" for f8f6f4), K, element types, K per scale, fraction bits F, and the evidence."""

    instruction: str    # "mma.sync" (sm_120a) or "tcgen05.mma" (sm_100a)
    arch: str
    kind: str           # "f8f6f4", "mxf8f6f4", "mxf4", "mxf4nvf4"
    scale_vec: str      # "", "1X", "2X", "4X"
    stype: str          # "", "ue8m0", "ue4m3"
    k: int
    types: tuple[str, ...]
    block: int
    frac_bits: int
    verified: bool
    evidence: str

    def __post_init__(self):
        require_fields(self)

    @property
    def datapath(self) -> str:
        """"mxf8" (one block of K products, F = 25) or "mxf4" (16-product groups, F = 35)."""
        return "mxf4" if self.kind.startswith("mxf4") else "mxf8"

    def ptx(self, atype: str, btype: str) -> str:
        """The instruction text without operands, e.g.
        ``mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e4m3.e2m1.f32.ue8m0``."""
        require_choice("atype", atype, self.types)
        require_choice("btype", btype, self.types)
        scaled = f".block_scale.scale_vec::{self.scale_vec}" if self.scale_vec else ""
        if self.instruction == "tcgen05.mma":
            return f"tcgen05.mma.cta_group::1.kind::{self.kind}{scaled} [idesc: a {atype}, b {btype}, K {self.k}]"
        tail = f".{self.stype}" if self.stype else ""
        return (f"mma.sync.aligned.m16n8k{self.k}.row.col.kind::{self.kind}{scaled}.f32.{atype}.{btype}.f32"
                f"{tail}")


_EVIDENCE = ("assumed: MMA-Sim (arXiv:2511.10909) Blackwell model, {what}; no measurement in refsim")


@functools.lru_cache(maxsize=None)
def modelled() -> tuple[BlockScaledKind, ...]:
    """Every block-scaled kind refsim models: the mma.sync rows (sm_120a) and the tcgen05.mma rows (sm_100a)
    of the module spec, all ``verified=False``."""
    rows = []
    for instruction, arch in (("mma.sync", "sm_120a"), ("tcgen05.mma", "sm_100a")):
        mxf8 = _EVIDENCE.format(what="one fused block of 32 products, F = 25")
        mxf4 = _EVIDENCE.format(what="16-product groups times the scales, F = 35")
        if instruction == "mma.sync":     # tcgen05's kind::f8f6f4 has no scales: not a block-scaled form
            rows.append(BlockScaledKind(instruction, arch, "f8f6f4", "", "", 32, ELEMENTS, 32, 25, False, mxf8))
        rows += [BlockScaledKind(instruction, arch, "mxf8f6f4", "1X", "ue8m0", 32, ELEMENTS, 32, 25, False, mxf8),
                 BlockScaledKind(instruction, arch, "mxf4", "2X", "ue8m0", 64, ("e2m1",), 32, 35, False, mxf4),
                 BlockScaledKind(instruction, arch, "mxf4nvf4", "2X", "ue8m0", 64, ("e2m1",), 32, 35, False, mxf4),
                 BlockScaledKind(instruction, arch, "mxf4nvf4", "4X", "ue4m3", 64, ("e2m1",), 16, 35, False, mxf4)]
    return tuple(rows)


def kind_for(instruction: str, kind: str, scale_vec: str | None = None) -> BlockScaledKind:
    """The :class:`BlockScaledKind` of ``instruction`` ("mma.sync" or "tcgen05.mma"), ``kind`` and ``scale_vec``
    ("1X", "2X", "4X"; None or "" for f8f6f4, and for the kinds with a single scale_vec)."""
    rows = [r for r in modelled() if r.instruction == require_choice("instruction", instruction,
                                                                    ("mma.sync", "tcgen05.mma"))]
    kind = require_choice("kind", kind, tuple(dict.fromkeys(r.kind for r in rows)))
    rows = [r for r in rows if r.kind == kind]
    if scale_vec is not None:
        require_instance("scale_vec", scale_vec, str, "str ('1X', '2X', '4X') or None")
    if scale_vec is None or scale_vec == "":
        if len(rows) > 1:
            raise FormatRuleError(f"scale_vec: kind::{kind} needs one of {[r.scale_vec for r in rows]}; got None")
        return rows[0]
    table = {r.scale_vec: r for r in rows}
    return table[require_choice("scale_vec", scale_vec, tuple(table))]


# ----------------------------------------------------------------------------------------------
# operands


def element_terms(t: str, codes: np.ndarray) -> Terms:
    """uint8 element codes of ``t`` (a name of :data:`ELEMENTS`, right-aligned) -> :class:`Terms`, from the
    format's row of :data:`refsim.arith.minifloat.FORMATS` (subnormals at emin; NaN/Inf per the row)."""
    f = FORMATS[require_choice("t", t, ELEMENTS)]
    codes = require_dtype("codes", codes, np.uint8)
    if codes.size and int(codes.max()) >> f.bits:
        raise FormatRuleError(f"codes: {t} codes are {f.bits} bits, right-aligned in a uint8; got {int(codes.max())}")
    if f.bias != (1 << (f.exp_bits - 1)) - 1:
        raise FormatRuleError(f"t: {t} has a non-IEEE bias")  # every ELEMENTS row has the IEEE bias
    if f.nan == "none":       # no specials: read the top binade as numbers (ieee_terms with Inf would not)
        u = codes.astype(np.int64)
        top_free = ieee_terms(u & ~np.int64(f.sign_bit), f.exp_bits, f.man_bits, has_inf=False)
        e_field = (u >> f.man_bits) & ((1 << f.exp_bits) - 1)
        frac = u & ((1 << f.man_bits) - 1)
        m = np.where(e_field == 0, frac, frac | (1 << f.man_bits))
        neg = ((u >> (f.bits - 1)) & 1).astype(bool)
        none = np.zeros(u.shape, bool)
        return Terms(neg, m, top_free.e, f.man_bits, none, none.copy())
    return ieee_terms(codes, f.exp_bits, f.man_bits, has_inf=f.has_inf)


def _scale_parts(stype: str, s: np.ndarray):
    """Scale codes -> (significand int64 ms, exponent int64 es, significand fraction bits, nan bool, zero bool):
    value = ms * 2^(es - frac). ue8m0: 1 * 2^(s - 127); ue4m3: |s| read as e4m3."""
    s = s.astype(np.int64)
    if stype == "ue8m0":
        return np.ones(s.shape, np.int64), s - 127, 0, s == 0xFF, np.zeros(s.shape, bool)
    t = ieee_terms(s & 0x7F, 4, 3, has_inf=False)
    return t.m, t.e, 3, t.nan, (t.m == 0) & ~t.nan


def _check(k: BlockScaledKind, atype, btype, A, B, C, scale_a, scale_b, ms, ns):
    """Checked operands (A, B, C, scale_a, scale_b, lead, M, N) before any arithmetic."""
    require_choice("atype", atype, k.types)
    require_choice("btype", btype, k.types)
    A, B = require_dtype("A", A, np.uint8), require_dtype("B", B, np.uint8)
    C = require_array("C", C)
    if C.dtype != np.float32:
        raise DtypeError(f"C: dtype must be float32 (fp32 accumulation); got {C.dtype}")
    K = k.k
    if A.ndim < 2 or A.shape[-1] != K or A.shape[-2] not in ms:
        raise ShapeError(f"A: trailing shape must be (M, {K}) with M in {list(ms)} for kind::{k.kind}; got {A.shape}")
    M = A.shape[-2]
    if B.ndim < 2 or B.shape[-2] != K or B.shape[-1] not in ns:
        raise ShapeError(f"B: trailing shape must be ({K}, N) with N in {list(ns)}; got {B.shape}")
    N = B.shape[-1]
    if C.ndim < 2 or C.shape[-2:] != (M, N):
        raise ShapeError(f"C: trailing shape must be ({M}, {N}) (M, N); got {C.shape}")
    shapes = [A.shape[:-2], B.shape[:-2], C.shape[:-2]]
    if k.stype:
        if scale_a is None or scale_b is None:
            raise FormatRuleError(f"scale_a, scale_b: kind::{k.kind} takes {k.stype} scales; got None")
        scale_a, scale_b = require_dtype("scale_a", scale_a, np.uint8), require_dtype("scale_b", scale_b, np.uint8)
        nb = K // k.block
        if scale_a.ndim < 2 or scale_a.shape[-2:] != (M, nb):
            raise ShapeError(f"scale_a: trailing shape must be ({M}, {nb}) (M, K/{k.block}); got {scale_a.shape}")
        if scale_b.ndim < 2 or scale_b.shape[-2:] != (nb, N):
            raise ShapeError(f"scale_b: trailing shape must be ({nb}, {N}) (K/{k.block}, N); got {scale_b.shape}")
        shapes += [scale_a.shape[:-2], scale_b.shape[:-2]]
    elif scale_a is not None or scale_b is not None:
        raise FormatRuleError(f"scale_a, scale_b: kind::{k.kind} takes no scales; got "
                              f"{type(scale_a).__name__}, {type(scale_b).__name__}")
    try:
        lead = np.broadcast_shapes(*shapes)
    except ValueError:
        raise ShapeError(f"A, B, C, scale_a, scale_b: leading axes must broadcast; got {shapes}") from None
    require_bounded("D", int(np.prod(lead, dtype=object)) * M * N * K, MAX_ELEMENTS, what="element count x K")
    for name, x, t in (("A", A, atype), ("B", B, btype)):
        bits = FORMATS[t].bits
        if x.size and int(x.max()) >> bits:
            raise FormatRuleError(f"{name}: {t} codes are {bits} bits, right-aligned in a uint8; got {int(x.max())}")
    return A, B, C, scale_a, scale_b, lead, M, N


# ----------------------------------------------------------------------------------------------
# the instruction

#: products per chunk of the mxf8 path (bounds the int64 temporaries)
_CHUNK = 1 << 20


def mma_block_scaled(kind: str, shape: str, atype: str, btype: str, A: np.ndarray, B: np.ndarray, C: np.ndarray,
                     scale_a: np.ndarray | None = None, scale_b: np.ndarray | None = None,
                     scale_vec: str | None = None) -> np.ndarray:
    """``mma.sync.aligned.<shape>.row.col.kind::<kind>[.block_scale.scale_vec::<X>].f32.<atype>.<btype>.f32``
    as the module spec models it on sm_120a (``verified=False``).

    kind: "f8f6f4", "mxf8f6f4", "mxf4" or "mxf4nvf4"; shape "m16n8k32" (f8f6f4, mxf8f6f4) or "m16n8k64" (mxf4*);
    scale_vec: "1X" / "2X" / "4X" (module table; None for f8f6f4 and the single-choice kinds).
    A uint8 (..., 16, K), B uint8 (..., K, 8): element codes, one per byte, right-aligned; C float32 (..., 16, 8);
    scale_a uint8 (..., 16, K/block), scale_b uint8 (..., K/block, 8) (None for f8f6f4). Leading axes broadcast.
    Returns D float32 (..., 16, 8).
    """
    k = kind_for("mma.sync", kind, scale_vec)
    require_choice("shape", shape, (f"m16n8k{k.k}",))
    return _run(k, atype, btype, A, B, C, scale_a, scale_b, (MMA_M,), (MMA_N,))


def tcgen05_mma_block_scaled(kind: str, atype: str, btype: str, A: np.ndarray, B: np.ndarray, C: np.ndarray,
                             scale_a: np.ndarray, scale_b: np.ndarray, scale_vec: str | None = None) -> np.ndarray:
    """``tcgen05.mma.cta_group::<1|2>.kind::<kind>.block_scale.scale_vec::<X>`` (sm_100a) as the module spec
    models it (``verified=False``): the arithmetic of :func:`mma_block_scaled` on tcgen05's operand shapes.

    kind: "mxf8f6f4" (K 32), "mxf4" or "mxf4nvf4" (K 64). A uint8 (..., M, K) with M 128 (cta_group::1) or
    256 (cta_group::2), B uint8 (..., K, N) with N in 8..256 step 8, C float32 (..., M, N) (the accumulator D
    in Tensor Memory, enable-input-d true), scale_a uint8 (..., M, K/block), scale_b uint8 (..., K/block, N).
    Returns D float32 (..., M, N).
    """
    k = kind_for("tcgen05.mma", kind, scale_vec)
    return _run(k, atype, btype, A, B, C, scale_a, scale_b, TCGEN05_M, TCGEN05_N)


def _run(k, atype, btype, A, B, C, scale_a, scale_b, ms, ns):
    A, B, C, scale_a, scale_b, lead, M, N = _check(k, atype, btype, A, B, C, scale_a, scale_b, ms, ns)
    K, nb = k.k, k.k // k.block
    A = np.broadcast_to(A, lead + (M, K)).reshape(-1, M, K)
    B = np.broadcast_to(B, lead + (K, N)).reshape(-1, K, N)
    Cb = np.broadcast_to(C, lead + (M, N)).reshape(-1, M, N)
    if k.stype:
        sa = np.broadcast_to(scale_a, lead + (M, nb)).reshape(-1, M, nb)
        sb = np.broadcast_to(scale_b, lead + (nb, N)).reshape(-1, nb, N)
    else:
        sa = np.full((A.shape[0], M, nb), 127, np.uint8)       # 2^0
        sb = np.full((A.shape[0], nb, N), 127, np.uint8)
    D = np.empty(Cb.shape, np.uint32)
    for t in range(Cb.shape[0]):
        if k.datapath == "mxf8":
            D[t] = _mxf8(k, atype, btype, A[t], B[t], Cb[t], sa[t], sb[t])
        else:
            D[t] = _mxf4(k, A[t], B[t], Cb[t], sa[t], sb[t])
    return D.reshape(lead + (M, N)).view(np.float32)


def _scaled(t: Terms, s: np.ndarray, block: int, axis: int) -> Terms:
    """Element terms with their block's ue8m0 exponent added and its NaN (0xFF) or-ed in."""
    s = np.repeat(s.astype(np.int64), block, axis=axis)
    return t._replace(e=t.e + s - 127, nan=t.nan | (s == 0xFF))


def _mxf8(k, atype, btype, A, B, C, sa, sb) -> np.ndarray:
    """One instruction of the mxf8 datapath: A (M, K), B (K, N), C (M, N), sa (M, nb), sb (nb, N) -> D bits."""
    M, K = A.shape
    N = B.shape[1]
    a_all = _scaled(element_terms(atype, A), sa, k.block, 1)                        # (M, K)
    b_all = _scaled(element_terms(btype, np.ascontiguousarray(B.T)), sb.T, k.block, 1)  # (N, K)
    D = np.empty((M, N), np.uint32)
    rows = max(1, min(M, _CHUNK // (N * K)))
    for r0 in range(0, M, rows):
        r1 = min(M, r0 + rows)
        full = (r1 - r0, N, K)
        a = Terms(*(np.broadcast_to(f[r0:r1, None, :], full) if isinstance(f, np.ndarray) else f for f in a_all))
        b = Terms(*(np.broadcast_to(f[None, :, :], full) if isinstance(f, np.ndarray) else f for f in b_all))
        D[r0:r1] = fdpa_terms(k.frac_bits, _E_ZERO, a, b, ieee_terms(C[r0:r1].view(np.uint32), 8, 23), "f32")
    return D


_GROUP = 16


def _mxf4(k, A, B, C, sa, sb) -> np.ndarray:
    """One instruction of the mxf4 datapath (module spec): A (M, 64), B (64, N) e2m1 codes -> D bits (M, N)."""
    M, K = A.shape
    N = B.shape[1]
    F, G = k.frac_bits, K // _GROUP
    ta, tb = element_terms("e2m1", A), element_terms("e2m1", B)
    # 2 x value, an exact integer: |value| = m * 2^(e - 1) with e in {0, 1, 2} (subnormals at e = 0)
    va = np.where(ta.neg, -1, 1) * (ta.m << ta.e)          # = 2 * value
    vb = np.where(tb.neg, -1, 1) * (tb.m << tb.e)
    gsum = np.einsum("mgk,gkn->mng", va.reshape(M, G, _GROUP), vb.reshape(G, _GROUP, N))  # 4 x group sum
    per = k.block // _GROUP                                # groups per scale block
    ams, aes, sfrac, anan, azero = _scale_parts(k.stype, np.repeat(sa, per, axis=1))     # (M, G)
    bms, bes, _, bnan, bzero = _scale_parts(k.stype, np.repeat(sb, per, axis=0))         # (G, N)
    sig = gsum * ams[:, None, :] * bms.T[None, :, :]        # (M, N, G): value * 2^(2 + 2 sfrac - e_g)
    eg = aes[:, None, :] + bes.T[None, :, :]
    live = ~(azero[:, None, :] | bzero.T[None, :, :])
    c = ieee_terms(C.view(np.uint32), 8, 23)
    c_live = (c.m != 0) & ~c.inf & ~c.nan
    low = np.int64(-(1 << 40))
    E = np.maximum(np.where(live, eg, low).max(axis=-1), np.where(c_live, c.e, low))      # (M, N)
    shift = F + eg - E[..., None] - 2 - 2 * sfrac
    T = np.where(live, _shift(np.abs(sig), np.maximum(shift, -64)), 0)
    Tc = np.where(c_live, _shift(c.m, np.maximum(F + c.e - E - 23, -64)), 0)
    S = np.where(sig < 0, -T, T).sum(axis=-1) + np.where(c.neg, -Tc, Tc)
    val = _round_out(S, np.where(E == low, 0, E - F), "f32")
    with np.errstate(over="ignore"):
        res = val.astype(np.float32)
    # -0 only when c = -0 and every product is a -0: count the k whose product is a zero of sign 1
    na, nb = ta.neg.astype(np.int64), tb.neg.astype(np.int64)
    nza, nzb = (ta.m != 0).astype(np.int64), (tb.m != 0).astype(np.int64)
    neg_zero = na @ (1 - nb) + (1 - na) @ nb - (na * nza) @ ((1 - nb) * nzb) - ((1 - na) * nza) @ (nb * nzb)
    all_neg_zero = (neg_zero == K) & c.neg & (c.m == 0) & ~c.inf & ~c.nan
    res = np.where(val == 0, np.where(all_neg_zero, np.float32(-0.0), np.float32(0.0)), res)
    res = np.where(c.inf, np.where(c.neg, np.float32(-np.inf), np.float32(np.inf)), res)
    nan = anan.any(axis=1)[:, None] | bnan.any(axis=0)[None, :] | c.nan
    return np.where(nan, _NAN32, res.astype(np.float32).view(np.uint32)).astype(np.uint32)


# ----------------------------------------------------------------------------------------------
# plain-loop reference with exact rationals


def _element(t: str, code: int) -> tuple[str, bool, Fraction, int]:
    """One element as the spec reads it: (kind 'num'/'inf'/'nan', sign, exact |value|, exponent with
    subnormals at emin), straight from the format's row."""
    f = FORMATS[t]
    neg = bool(code & f.sign_bit)
    mag = code & (f.sign_bit - 1)
    e_field, frac = mag >> f.man_bits, mag & ((1 << f.man_bits) - 1)
    top = (1 << f.exp_bits) - 1
    if f.nan == "all_ones" and mag == f.sign_bit - 1:
        return "nan", neg, Fraction(0), 0
    if f.nan == "ieee" and e_field == top:
        return ("nan" if frac else "inf"), neg, Fraction(0), 0
    e = max(e_field, 1) - f.bias
    sig = Fraction(frac + (1 << f.man_bits if e_field else 0), 1 << f.man_bits)
    return "num", neg, sig * Fraction(2) ** e, e


def _scale(stype: str, s: int) -> tuple[bool, Fraction, int]:
    """(is NaN, exact value, exponent with subnormals at emin) of one scale code."""
    if stype == "ue8m0":
        return s == 0xFF, Fraction(2) ** (s - 127), s - 127
    kind, _, v, e = _element("e4m3", s & 0x7F)
    return kind == "nan", v, e


def _trunc(v: Fraction, grid: Fraction) -> Fraction:
    """v truncated toward zero to a multiple of grid."""
    q = abs(v) // grid
    return (q if v >= 0 else -q) * grid


def _finish(S: Fraction, c: float, products_neg_zero: bool) -> float:
    r = exact.round_fraction(S, exact.F32, "rz_inf")
    if r == 0:
        return -0.0 if products_neg_zero and c == 0 and np.signbit(c) else 0.0
    return float(r)


def _ref_mxf8(k, atype, btype, arow, bcol, c, sa, sb) -> float:
    F = k.frac_bits
    terms, inf_signs, nan, all_neg_zero = [], set(), False, True
    for i, (x, y) in enumerate(zip(arow, bcol)):
        ka, na, va, ea = _element(atype, int(x))
        kb, nb, vb, eb = _element(btype, int(y))
        nsa, vsa, esa = _scale("ue8m0", int(sa[i // k.block]))
        nsb, vsb, esb = _scale("ue8m0", int(sb[i // k.block]))
        neg = na != nb
        if "nan" in (ka, kb) or nsa or nsb or (ka == "inf" and vb == 0 and kb == "num") or \
                (kb == "inf" and va == 0 and ka == "num"):
            nan = True
            continue
        if "inf" in (ka, kb):
            inf_signs.add(neg)
            continue
        p = va * vb * vsa * vsb
        all_neg_zero &= p == 0 and neg
        if p:
            terms.append(((-p if neg else p), ea + eb + esa + esb))
    if c != c or nan or len(inf_signs | ({c < 0} if abs(c) == float("inf") else set())) == 2:
        return float("nan")
    if abs(c) == float("inf"):
        return c
    if inf_signs:
        return float("-inf") if inf_signs.pop() else float("inf")
    return _sum_terms(terms, c, F, all_neg_zero)


def _sum_terms(terms, c: float, F: int, all_neg_zero: bool) -> float:
    """c and the (value, exponent) terms aligned at the largest exponent, truncated to F bits below it, summed,
    rounded toward zero to fp32."""
    cv = Fraction(c)
    if cv:
        terms = terms + [(cv, max(exact._floor_log2(abs(cv)), -126))]
    if not terms:
        return _finish(Fraction(0), c, all_neg_zero)
    E = max(e for _, e in terms)
    grid = Fraction(2) ** (E - F)
    return _finish(sum(_trunc(v, grid) for v, _ in terms), c, all_neg_zero)


def _ref_mxf4(k, arow, bcol, c, sa, sb) -> float:
    scales = [_scale(k.stype, int(s)) for s in list(sa) + list(sb)]
    if c != c or any(n for n, _, _ in scales):
        return float("nan")
    if abs(c) == float("inf"):
        return c
    terms, all_neg_zero = [], True
    for g in range(0, k.k, _GROUP):
        gsum = Fraction(0)
        for i in range(g, g + _GROUP):
            _, na, va, _ = _element("e2m1", int(arow[i]))
            _, nb, vb, _ = _element("e2m1", int(bcol[i]))
            all_neg_zero &= va * vb == 0 and na != nb
            gsum += -va * vb if na != nb else va * vb
        _, vsa, esa = _scale(k.stype, int(sa[g // k.block]))
        _, vsb, esb = _scale(k.stype, int(sb[g // k.block]))
        if vsa and vsb:                 # a zero scale: no term, no alignment
            terms.append((gsum * vsa * vsb, esa + esb))
    return _sum_terms(terms, c, k.frac_bits, all_neg_zero)


def mma_block_scaled_reference(instruction: str, kind: str, atype: str, btype: str, A: np.ndarray, B: np.ndarray,
                               C: np.ndarray, scale_a: np.ndarray | None = None, scale_b: np.ndarray | None = None,
                               scale_vec: str | None = None) -> np.ndarray:
    """Plain-loop twin of :func:`mma_block_scaled` (``instruction`` "mma.sync") and
    :func:`tcgen05_mma_block_scaled` ("tcgen05.mma") for one instruction (no leading axes): A uint8 (M, K),
    B uint8 (K, N), C float32 (M, N), scales uint8 (M, K/block) and (K/block, N); Fraction arithmetic written
    from the module spec. Returns D float32 (M, N), NaN as 0x7FFFFFFF."""
    k = kind_for(instruction, kind, scale_vec)
    ms, ns = ((MMA_M,), (MMA_N,)) if k.instruction == "mma.sync" else (TCGEN05_M, TCGEN05_N)
    A, B, C, scale_a, scale_b, lead, M, N = _check(k, atype, btype, A, B, C, scale_a, scale_b, ms, ns)
    if lead:
        raise ShapeError(f"A: the reference takes one instruction (M, {k.k}); got {A.shape}")
    nb = k.k // k.block
    sa = scale_a if k.stype else np.full((M, nb), 127, np.uint8)
    sb = scale_b if k.stype else np.full((nb, N), 127, np.uint8)
    D = np.empty((M, N), np.float32)
    for i in range(M):
        for j in range(N):
            c = float(C[i, j])
            if k.datapath == "mxf8":
                D[i, j] = _ref_mxf8(k, atype, btype, A[i], B[:, j], c, sa[i], sb[:, j])
            else:
                D[i, j] = _ref_mxf4(k, A[i], B[:, j], c, sa[i], sb[:, j])
    return np.where(np.isnan(D), _NAN32, D.view(np.uint32)).astype(np.uint32).view(np.float32)
