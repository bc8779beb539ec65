"""``cvt``: every PTX conversion between integer and floating types, in every rounding mode.

Spec
----
types           integers u8/u16/u32/u64/s8/s16/s32/s64; floats f16, bf16, f32, f64; packed
                ``cvt.{rn,rz}{.relu}{.satfinite}.{f16x2,bf16x2}.f32 d, a, b`` (d.hi = cvt(a), d.lo = cvt(b)).
                8-bit destinations come back as uint32 sign-/zero-extended from 8 bits; 8-bit sources
                read the low 8 bits of the register.
int -> int      value of the source type, then modulo 2^w of the destination (wrap), or clamped to the
                destination range with ``.sat``. No rounding modifier.
int -> float    ``.rn/.rz/.rm/.rp`` required; exact value (64-bit included) rounded once
                (:func:`refsim.arith.rounding.int_to_float`).
float -> int    ``.rni/.rzi/.rmi/.rpi`` required: round to an integral value (nearest-even, toward zero,
                toward -Inf, toward +Inf), then clamp to the destination range (saturation is the
                default, ``.sat`` is redundant). NaN: 0 when the source is not f64 *and* the destination
                is not 64-bit; otherwise ``1 << (w - 1)`` (e.g. ``cvt.rni.s64.f32`` of NaN gives
                0x8000000000000000). ``.ftz`` flushes a subnormal f32 source first.
float -> float  widening is exact (a rounding modifier is accepted and changes nothing); narrowing needs
                ``.rn/.rz/.rm/.rp`` and rounds once with the IEEE overflow rule of the mode
                (``cvt.rz.f16.f32`` of a finite overflow gives ±65504, ±Inf stays ±Inf; ``.rn`` gives ±Inf).
                Same type: an integer rounding ``.rni/...`` rounds to an integral value in the format.
modifiers       ``.ftz`` (f32 source or destination: subnormals -> sign-preserving zero), ``.sat``
                (float destination: clamp to [0, 1], NaN -> +0; integer destination: clamp),
                ``.relu`` (f16/bf16 destination: negative results and -0 -> +0, NaN -> canonical NaN),
                ``.satfinite`` (NaN stays NaN, ±Inf and overflow -> ±max finite).
NaN             float results follow refsim.ptx.semantics.floating: canonical NaN for f16/bf16/f32.
source          PTX ISA 9.x, "Data Movement and Conversion Instructions: cvt" (rounding-modifier rules,
                "float-to-int saturates by default", the NaN-to-integer rule, ``.relu``, ``.satfinite``).
"""

from __future__ import annotations

import numpy as np

from refsim.arith import fp, rounding
from refsim.ptx.semantics.cexpr import cast, int_bits, int_value
from refsim.ptx.semantics.handler import Handler, Op, isa, unsupported
from refsim.ptx.semantics.floating import decode, encode, flush_subnormal

__all__ = ["convert", "INT_TYPES", "FLOAT_TYPES", "BUILDERS", "C_FORMS"]

INT_TYPES = {f"{k}{w}": (k, w) for k in "su" for w in (8, 16, 32, 64)}
FLOAT_TYPES = ("f16", "bf16", "f32", "f64")
_PRECISION = {"f16": (11, 5), "bf16": (8, 8), "f32": (24, 8), "f64": (53, 11)}   # (p, exponent bits)
_MAX = {"f16": 65504.0, "bf16": float.fromhex("0x1.fep127"), "f32": float(np.finfo(np.float32).max),
        "f64": float(np.finfo(np.float64).max)}
IRND = {"rni": np.rint, "rzi": np.trunc, "rmi": np.floor, "rpi": np.ceil}
FRND = ("rn", "rz", "rm", "rp")
_CONTAINER = {8: np.uint32, 16: np.uint16, 32: np.uint32, 64: np.uint64}


def _int_value(bits, kind: str, w: int) -> np.ndarray:
    """Exact value of the low w bits as int64 (signed) or uint64 (unsigned)."""
    u = np.asarray(bits).astype(np.uint64)
    if w < 64:
        u = u & np.uint64((1 << w) - 1)
    if kind == "u":
        return u
    if w == 64:
        return u.view(np.int64)
    return (u ^ np.uint64(1 << (w - 1))).astype(np.int64) - np.int64(1 << (w - 1))


def _int_bits(v: np.ndarray, kind: str, w: int) -> np.ndarray:
    """Integer value (already in range or to be wrapped) -> container bits (8-bit: extended to 32)."""
    u = np.asarray(v).astype(np.int64).astype(np.uint64) if np.asarray(v).dtype != np.uint64 else np.asarray(v)
    if w == 64:
        return u.astype(np.uint64)
    u = u & np.uint64((1 << w) - 1)
    if w == 8:
        if kind == "s":
            u = np.where(u & np.uint64(0x80), u | np.uint64(0xFFFFFF00), u)
        return u.astype(np.uint32)
    return u.astype(_CONTAINER[w])


def _widening(src: str, dst: str) -> bool:
    (ps, es), (pd, ed) = _PRECISION[src], _PRECISION[dst]
    return pd >= ps and ed >= es


def float_to_int(x: np.ndarray, src: str, kind: str, w: int, irnd: str) -> np.ndarray:
    """float64 values (exact values of ``src``) -> integer container bits of ``{kind}{w}``."""
    lo, hi = (-(2 ** (w - 1)), 2 ** (w - 1) - 1) if kind == "s" else (0, 2**w - 1)
    with np.errstate(invalid="ignore"):
        r = IRND[irnd](x)
    nan = np.isnan(r)
    safe = np.where(nan, 0.0, r)
    below, above = safe < lo, safe >= float(hi) + 1.0     # float(hi)+1 = 2^k exactly
    inside = np.where(below | above, 0.0, safe)
    if kind == "s":
        val = np.where(below, np.int64(lo), np.where(above, np.int64(hi), inside.astype(np.int64)))
    else:
        val = np.where(below, np.uint64(0), np.where(above, np.uint64(hi), inside.astype(np.uint64)))
    if src != "f64" and w < 64:
        nan_value = np.int64(0)
    else:  # the bit pattern 1 << (w - 1): MIN for signed, 2^(w-1) for unsigned destinations
        nan_value = np.int64(lo) if kind == "s" else np.uint64(1 << (w - 1))
    bits = _int_bits(val, kind, w)
    return np.where(nan, _int_bits(np.asarray(nan_value), kind, w), bits)


def convert(op: Op) -> Handler:
    """The handler of one ``cvt`` instruction (see the module spec)."""
    if len(op.types) != 2:
        raise unsupported(op, "cvt needs a destination and a source type")
    dst, src = op.types
    mods = set(op.mods)
    irnd = [m for m in op.mods if m in IRND]
    frnd = [m for m in op.mods if m in FRND]
    extra = mods - set(IRND) - set(FRND) - {"ftz", "sat", "relu", "satfinite"}
    if extra or len(irnd) + len(frnd) > 1:
        raise unsupported(op, f"modifier(s) {sorted(extra) or op.mods} not executed (e.g. .rna/.rs, tf32, fp8)")
    ftz, sat, relu, satfinite = ("ftz" in mods, "sat" in mods, "relu" in mods, "satfinite" in mods)
    sec = isa("data-movement-and-conversion", "cvt")

    if dst in ("f16x2", "bf16x2"):
        st = dst[:-2]
        if src != "f32" or sat or ftz or irnd or (frnd and frnd[0] not in ("rn", "rz")) or not frnd:
            raise unsupported(op, "packed cvt is cvt.{rn,rz}{.relu}{.satfinite}.{f16x2,bf16x2}.f32 d, a, b")
        one = _float_to_float(op, "f32", st, frnd[0], False, False, relu, satfinite)

        def packed(a, b):
            ha, hb = one(a).astype(np.uint32), one(b).astype(np.uint32)
            return (((ha << np.uint32(16)) | hb).astype(np.uint32),)

        return Handler(fn=packed, dst_types=(dst,), src_types=("f32", "f32"), kind="alu", isa=sec)

    if relu or satfinite:
        if not (dst in ("f16", "bf16") and src == "f32"):
            raise unsupported(op, ".relu/.satfinite are executed for .f16/.bf16 destinations of .f32 only")

    if dst in INT_TYPES and src in INT_TYPES:
        if irnd or frnd or ftz:
            raise unsupported(op, "integer-to-integer conversions take no rounding or .ftz modifier")
        (dk, dw), (sk, sw) = INT_TYPES[dst], INT_TYPES[src]
        lo, hi = (-(2 ** (dw - 1)), 2 ** (dw - 1) - 1) if dk == "s" else (0, 2**dw - 1)

        def i2i(a):
            v = _int_value(a, sk, sw)
            if sat:
                if sk == "u":
                    v = np.minimum(v, np.uint64(hi))
                else:
                    v = np.clip(v, max(lo, -(2**63)), min(hi, 2**63 - 1))
            return (_int_bits(v, dk, dw),)

        return Handler(fn=i2i, dst_types=(dst,), src_types=(src,), kind="alu", isa=sec)

    if dst in FLOAT_TYPES and src in INT_TYPES:
        if not frnd or ftz and dst != "f32":
            raise unsupported(op, "integer-to-float conversions need .rn/.rz/.rm/.rp")
        sk, sw = INT_TYPES[src]

        native = {"f32": fp.cvt_int_to_f32, "f16": fp.cvt_int_to_f16}.get(dst)
        if native is not None and frnd[0] == "rn" and sw <= 32 and not sat:   # arith.fp's RN primitives
            idt = np.dtype(f"{'int' if sk == 's' else 'uint'}{sw}")
            utype = np.uint32 if dst == "f32" else np.uint16
            return Handler(fn=lambda a: (native(_int_value(a, sk, sw).astype(idt)).view(utype),),
                           dst_types=(dst,), src_types=(src,), kind="alu", isa=sec)

        def i2f(a):
            x = rounding.int_to_float(_int_value(a, sk, sw), sk == "s", dst, frnd[0])
            return (encode(_saturate(x, sat), dst),)

        return Handler(fn=i2f, dst_types=(dst,), src_types=(src,), kind="alu", isa=sec)

    if dst in INT_TYPES and src in FLOAT_TYPES:
        if not irnd:
            raise unsupported(op, "float-to-integer conversions need .rni/.rzi/.rmi/.rpi")
        if ftz and src != "f32":
            raise unsupported(op, ".ftz applies to .f32 sources")
        dk, dw = INT_TYPES[dst]
        return Handler(fn=lambda a: (float_to_int(decode(a, src, ftz=ftz), src, dk, dw, irnd[0]),),
                       dst_types=(dst,), src_types=(src,), kind="alu", isa=sec)

    if dst in FLOAT_TYPES and src in FLOAT_TYPES:
        if ftz and "f32" not in (dst, src):
            raise unsupported(op, ".ftz applies when the source or destination is .f32")
        if dst == src:
            if frnd:
                raise unsupported(op, "same-type float conversions take an integer rounding (.rni ...) or none")

            def same(a):
                x = decode(a, src, ftz=ftz)
                if irnd:
                    x = IRND[irnd[0]](x)
                if ftz:
                    x = flush_subnormal(x, src)
                return (encode(_saturate(x, sat), dst),)

            return Handler(fn=same, dst_types=(dst,), src_types=(src,), kind="alu", isa=sec)
        if irnd:
            raise unsupported(op, "integer rounding applies to same-type float conversions only")
        if not frnd and not _widening(src, dst):
            raise unsupported(op, f"narrowing .{src} -> .{dst} needs .rn/.rz/.rm/.rp")
        mode = frnd[0] if frnd else "rn"
        native = {("f32", "f16"): (fp.cvt_f32_to_f16, np.float32, np.uint16),
                  ("f32", "bf16"): (fp.cvt_f32_to_bf16, np.float32, np.uint16)}.get((src, dst))
        if native is not None and mode == "rn" and not (ftz or sat or relu or satfinite):
            prim, ftype, utype = native                      # arith.fp's RN conversions, NaN canonical

            def fast(a):
                x = np.asarray(a).astype(np.uint32).view(ftype)
                r = prim(x).view(utype)
                return (np.where(np.isnan(x), utype(0x7FFF), r).astype(utype),)

            return Handler(fn=fast, dst_types=(dst,), src_types=(src,), kind="alu", isa=sec)
        one = _float_to_float(op, src, dst, mode, ftz, sat, relu, satfinite)
        return Handler(fn=lambda a: (one(a),), dst_types=(dst,), src_types=(src,), kind="alu", isa=sec)

    raise unsupported(op, f"conversion .{src} -> .{dst} is not executed by refsim")


def _saturate(x: np.ndarray, sat: bool) -> np.ndarray:
    if not sat:
        return x
    x = np.where(np.isnan(x), 0.0, np.clip(x, 0.0, 1.0))
    return np.where(x == 0, 0.0, x)


def _float_to_float(op: Op, src: str, dst: str, mode: str, ftz: bool, sat: bool, relu: bool, satfinite: bool):
    """bits of ``src`` -> bits of ``dst``: one rounding, then the modifiers in ISA order."""
    widening = _widening(src, dst)

    def fn(a):
        x = decode(a, src, ftz=ftz and src == "f32")
        r = x if widening else rounding.round_float64(x, dst, mode)   # widening is exact: nothing to round
        if satfinite:
            r = np.where(np.isinf(r), np.copysign(_MAX[dst], r), r)
        if relu:
            r = np.where(np.isnan(r), np.nan, np.where(r <= 0, 0.0, r))
        if ftz and dst == "f32":
            r = flush_subnormal(r, dst)
        return encode(_saturate(r, sat), dst)

    return fn


def _build_cvt(op: Op, arch: str) -> Handler:
    return convert(op)


#: opcode -> handler builder of this family (refsim.ptx.semantics.table assembles the one table)
BUILDERS = {
    "cvt": _build_cvt,
}


# ----------------------------------------------------------------------------------------------
# the C form of cvt (refsim.ptx.semantics.cexpr): what the compiled executor emits for the handler
# above, form by form; None leaves a form to its handler

#: the integer rounding modes as ptx_runtime.h's rt_f2i numbers them
_C_IRND = {"rni": 0, "rzi": 1, "rmi": 2, "rpi": 3}


def _c_cvt(op, s, _):
    dst, src = op.types
    mods = set(op.mods)
    irnd = [m for m in op.mods if m in _C_IRND]
    frnd = [m for m in op.mods if m in FRND]
    a = s[0]
    if dst in ("f16x2", "bf16x2"):
        if mods != {"rn"}:
            return None
        one = "rt_h_canon(rt_f2h(rt_f32({x})))" if dst == "f16x2" else "rt_bf_canon_f32({x})"
        return [(f"(((uint32_t){one.format(x=s[0])} << 16) | (uint32_t){one.format(x=s[1])})", 32)]
    if dst in INT_TYPES and src in INT_TYPES:
        (dk, dw), (sk, sw) = INT_TYPES[dst], INT_TYPES[src]
        v = int_value(a, sk, sw)
        if "sat" in mods:
            lo, hi = (-(2 ** (dw - 1)), 2 ** (dw - 1) - 1) if dk == "s" else (0, 2**dw - 1)
            if sk == "u":
                v = f"({v} < {hi}ull ? {v} : {hi}ull)"
            else:
                lo_c = "INT64_MIN" if lo <= -(2**63) else f"{lo}LL"
                v = f"rt_clamp_s64({v}, {lo_c}, {min(hi, 2**63 - 1)}LL)"
        return [int_bits(v, dk, dw)]
    if dst in ("f32", "f16", "f64") and src in INT_TYPES:
        sk, sw = INT_TYPES[src]
        if frnd != ["rn"] or mods != {"rn"} or sw > 32:
            return None
        v = f"(double){int_value(a, sk, sw)}"
        return [{"f32": (f"rt_u32f((float){v})", 32), "f16": (f"rt_d2h({v})", 16),
                 "f64": (f"rt_u64d({v})", 64)}[dst]]
    if dst in INT_TYPES and src in ("f16", "f32", "f64"):
        if len(irnd) != 1 or mods - {irnd[0], "ftz", "sat"} or ("ftz" in mods and src != "f32"):
            return None
        dk, dw = INT_TYPES[dst]
        x = {"f32": f"rt_dec_f32({a}, {int('ftz' in mods)})", "f16": f"rt_dec_f16({a}, 0)",
             "f64": f"rt_f64({a})"}[src]
        return [(cast(32 if dw == 8 else dw, f"rt_f2i({x}, {_C_IRND[irnd[0]]}, {int(dk == 's')}, {dw}, {int(src == 'f64')})"),
                 32 if dw == 8 else dw)]
    if mods - {"rn"}:
        return None
    if (src, dst) == ("f32", "f16") and frnd:
        return [(f"rt_h_canon(rt_f2h(rt_f32({a})))", 16)]
    if (src, dst) == ("f32", "bf16") and frnd:
        return [(f"rt_bf_canon_f32({a})", 16)]
    if (src, dst) == ("f16", "f32"):
        return [(f"rt_f_canon(rt_h2f({a}))", 32)]
    if (src, dst) == ("bf16", "f32"):
        return [(f"rt_f_canon(rt_f32((uint32_t){a} << 16))", 32)]
    if (src, dst) == ("f64", "f32") and frnd:
        return [(f"rt_f_canon((float)rt_f64({a}))", 32)]
    return None


#: opcode -> (the modifiers its C reads, its C form)
C_FORMS = {
    "cvt": (set(_C_IRND) | set(FRND) | {"ftz", "sat", "relu", "satfinite"}, _c_cvt),
}
