"""Comparison and selection instructions of PTX (setp, selp, slct), as pure NumPy handlers.

Spec
----
setp            ``p = (a cmp b) BoolOp c``, ``q = !(a cmp b) BoolOp c``: integer eq/ne/lt/le/gt/ge signed
                by type, lo/ls/hi/hs unsigned; float ordered and ``u`` unordered forms, num/nan,
                ``.ftz`` on f32/f16 (floats decoded by refsim.ptx.semantics.floating).
selp            ``d = c ? a : b``.
slct            ``d = c >= 0 ? a : b`` with an s32 or f32 selector (a NaN selector picks b).
source          PTX ISA 9.x, "Comparison and Selection Instructions", "Half Precision Comparison
                Instructions: setp".
"""

from __future__ import annotations

import numpy as np

from refsim.ptx.semantics import expr, floating
from refsim.ptx.semantics.handler import Handler, Op, isa, unsupported
from refsim.ptx.semantics.words import INT_TYPES, alu, check_mods, int_type, sval, ubits, wrap

__all__ = ["BUILDERS", "C_FORMS"]


# ----------------------------------------------------------------------------------------------
# setp / selp

_INT_CMP = {"eq", "ne", "lt", "le", "gt", "ge", "lo", "ls", "hi", "hs"}
_FLOAT_CMP = {"eq", "ne", "lt", "le", "gt", "ge", "equ", "neu", "ltu", "leu", "gtu", "geu", "num", "nan"}
_BOOL = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}


def _compare(cmp: str, x, y):
    return {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
            "gt": np.greater, "ge": np.greater_equal}[cmp](x, y)


def _build_setp(op: Op, arch: str) -> Handler:
    if len(op.types) != 1:
        raise unsupported(op, "expects one type")
    t = op.types[0]
    cmps = [m for m in op.mods if m in _INT_CMP | _FLOAT_CMP]
    bools = [m for m in op.mods if m in _BOOL]
    extra = set(op.mods) - set(cmps) - set(bools) - {"ftz"}
    if len(cmps) != 1 or len(bools) > 1 or extra:
        raise unsupported(op, "needs one comparison, at most one of .and/.or/.xor (and .ftz for floats)")
    cmp = cmps[0]
    boolop = _BOOL[bools[0]] if bools else None
    if t in ("f16", "bf16", "f32", "f64"):
        if cmp not in _FLOAT_CMP:
            raise unsupported(op, f".{cmp} is not a floating-point comparison")
        if "ftz" in op.mods and t not in ("f32", "f16", "bf16"):
            raise unsupported(op, ".ftz applies to .f32/.f16")
        ftz = "ftz" in op.mods

        def raw(a, b):
            x, y = floating.decode(a, t, ftz=ftz), floating.decode(b, t, ftz=ftz)
            unordered = np.isnan(x) | np.isnan(y)
            if cmp == "num":
                return ~unordered
            if cmp == "nan":
                return unordered
            if cmp.endswith("u"):
                return unordered | _compare(cmp[:-1], x, y)
            with np.errstate(invalid="ignore"):
                return _compare(cmp, x, y) & ~unordered
        sec = isa("half-precision-comparison" if t in ("f16", "bf16") else "comparison-and-selection", "setp")
    else:
        kind, w = int_type(op, t)
        if cmp not in _INT_CMP or "ftz" in op.mods:
            raise unsupported(op, f".{cmp} is not an integer comparison")

        raw = expr.numpy_pred(_int_compare(cmp, kind), w)
        sec = isa("comparison-and-selection", "setp")

    def fn(a, b, c=None):
        r = np.asarray(raw(a, b), bool)
        if boolop is None:
            return r, ~r
        return boolop(r, c), boolop(~r, c)

    src = (t, t) + (("pred",) if boolop else ())
    return alu(fn, ("pred", "pred"), src, sec)


def _build_selp(op: Op, arch: str) -> Handler:
    t = op.types[0] if len(op.types) == 1 else ""
    widths = {**{k: w for k, (_, w) in INT_TYPES.items()}, "f32": 32, "f64": 64, "f16": 16, "bf16": 16}
    if t not in widths:
        raise unsupported(op, "type must be a 16/32/64-bit integer, .f16, .bf16, .f32 or .f64")
    check_mods(op, set())
    return alu(expr.numpy_fn(_SELP, widths[t]), (t,), (t, t, "pred"), isa("comparison-and-selection", "selp"))


#: selp and the integer comparisons of setp, defined once for both executors (refsim.ptx.semantics.expr)
_SELP = expr.select(expr.src(2), expr.src(0), expr.src(1))
_C_CMP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_C_UCMP = {"lo": "<", "ls": "<=", "hi": ">", "hs": ">="}


def _int_compare(cmp: str, kind: str) -> expr.Expr:
    """``a cmp b`` on integers: eq..ge signed by type, lo/ls/hi/hs unsigned."""
    if cmp in _C_UCMP:
        return expr.compare(_C_UCMP[cmp], expr.src(0), expr.src(1))
    return expr.compare(_C_CMP[cmp], expr.src(0), expr.src(1), signed=kind == "s")



def _build_slct(op: Op, arch: str) -> Handler:
    if len(op.types) != 2 or op.types[1] not in ("s32", "f32"):
        raise unsupported(op, "slct needs a data type and a .s32 or .f32 selector type")
    t, ct = op.types
    widths = {**{k: w for k, (_, w) in INT_TYPES.items()}, "f32": 32, "f64": 64}
    if t not in widths:
        raise unsupported(op, "data type must be a 16/32/64-bit integer, .f32 or .f64")
    mods = check_mods(op, {"ftz"} if ct == "f32" else set())
    w = widths[t]

    def fn(a, b, c):  # d = c >= 0 ? a : b (a NaN selector compares false: b)
        if ct == "s32":
            sel = sval(c, 32) >= 0
        else:
            sel = floating.decode(c, "f32", ftz="ftz" in mods) >= 0
        return (wrap(np.where(sel, ubits(a, w), ubits(b, w)), w),)

    return alu(fn, (t,), (t, t, ct), isa("comparison-and-selection", "slct"))


#: opcode -> handler builder of this family (refsim.ptx.semantics.table assembles the one table)
BUILDERS = {
    "setp": _build_setp, "selp": _build_selp, "slct": _build_slct,
}


# ----------------------------------------------------------------------------------------------
# the C forms of this family (refsim.ptx.semantics.cexpr): what the compiled executor emits for the
# handlers above, form by form; None leaves a form to its handler

#: the float comparisons as ptx_runtime.h's rt_fcmp numbers them
_C_FCMP = {"eq": 0, "ne": 1, "lt": 2, "le": 3, "gt": 4, "ge": 5, "equ": 6, "neu": 7, "ltu": 8, "leu": 9,
           "gtu": 10, "geu": 11, "num": 12, "nan": 13}
_C_BOOL = {"and": "&", "or": "|", "xor": "^"}


def _c_setp(op, s, _):
    t = op.types[0]
    cmp = next(m for m in op.mods if m in _C_FCMP or m in _C_UCMP)
    boolop = next((m for m in op.mods if m in _C_BOOL), None)
    if t in ("f16", "bf16", "f32", "f64"):
        ftz = int("ftz" in op.mods)
        dec = {"f32": "rt_dec_f32({x}, %d)" % ftz, "f16": "rt_dec_f16({x}, %d)" % ftz,
               "bf16": "rt_dec_bf16({x})", "f64": "rt_f64({x})"}[t]
        if t == "bf16" and ftz:
            return None
        raw = f"rt_fcmp({dec.format(x=s[0])}, {dec.format(x=s[1])}, {_C_FCMP[cmp]})"
        raw = f"((uint8_t){raw})"
    else:
        kind, w = INT_TYPES[t]
        raw = expr.c_pred(_int_compare(cmp, kind), w, s)
    if boolop is None:
        return [(raw, 1), (f"((uint8_t)!{raw})", 1)]
    o = _C_BOOL[boolop]
    return [(f"((uint8_t)({raw} {o} {s[2]}))", 1), (f"((uint8_t)((uint8_t)!{raw} {o} {s[2]}))", 1)]


def _c_selp(op, s, _):
    w = {"f32": 32, "f64": 64, "f16": 16, "bf16": 16}.get(op.types[0]) or INT_TYPES[op.types[0]][1]
    return [(expr.c(_SELP, w, s), w)]


#: opcode -> (the modifiers its C reads, its C form); slct runs its handler
C_FORMS = {
    "setp": (set(_C_FCMP) | set(_C_UCMP) | set(_C_BOOL) | {"ftz"}, _c_setp), "selp": (set(), _c_selp),
}
