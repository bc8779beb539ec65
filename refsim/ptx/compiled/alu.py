"""C expressions for the ALU instructions of refsim.ptx.semantics, handler by handler.

Spec
----
contract        ``alu(op, srcs, operands) -> [(C expression, value bits), ...]`` — one entry per
                destination type of the instruction's :class:`refsim.ptx.semantics.Handler`, each the
                unsigned bit pattern the handler returns (same width: 8-bit ``cvt`` results are 32-bit
                values extended from 8 bits, as the handler returns them). ``srcs`` are the sources
                already read as the handler's ``src_types``. ``None``: not compiled here — the step
                runs the handler itself through Python (bit-identical by construction, slower).
compiled        integer add/sub(.sat)/mul/mad(.lo/.hi/.wide)/div/rem (<= 32 bits, and unsigned 64)/
                abs/neg/min/max(.relu)/popc/clz/brev/bfind/bfe/bfi/shl/shr/shf/and/or/xor/not/cnot/
                lop3(.or/.and)/prmt/setp/selp; float add/sub/mul/fma(.rn, no .ftz/.sat) on f32, f16,
                f16x2, mad.rn.f32, div/rcp/sqrt.rn.f32, neg/abs (.ftz), min/max on f32/f16/f16x2,
                setp on f16/bf16/f32/f64; cvt between integers (.sat), integer <-> f16/f32 (.rn / .rni,
                .rzi, .rmi, .rpi), f32 -> f16/bf16 .rn, f16/bf16 -> f32, f64 -> f32 .rn, packed
                cvt.rn.{f16x2,bf16x2}.f32. The C helpers live in refsim/native/ptx_runtime.h.
oracle          the handlers themselves: tests/ptx/compiled/test_conformance.py runs each form on
                tables of bit patterns (specials included) through both executors.
"""

from __future__ import annotations

from refsim.ptx.compiled.operands import CT, ST
from refsim.ptx.semantics import Op

__all__ = ["alu"]

_INT = {f"{k}{w}": (k, w) for k in "sub" for w in (16, 32, 64)}
_CMP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_FCMP = {"eq": 0, "ne": 1, "lt": 2, "le": 3, "gt": 4, "ge": 5, "equ": 6, "neu": 7, "ltu": 8, "leu": 9,
         "gtu": 10, "geu": 11, "num": 12, "nan": 13}
_PRMT = {None: 0, "f4e": 1, "b4e": 2, "rc8": 3, "ecl": 4, "ecr": 5, "rc16": 6}
_IRND = {"rni": 0, "rzi": 1, "rmi": 2, "rpi": 3}
_FRND = ("rn", "rz", "rm", "rp")
_CVT_INT = {f"{k}{w}": (k, w) for k in "su" for w in (8, 16, 32, 64)}


def _mask(w: int) -> str:
    return "0xFFFFFFFFFFFFFFFFull" if w == 64 else f"0x{(1 << w) - 1:X}ull"


def _c(w: int, expr: str) -> str:
    return f"(({CT[w]})({expr}))"


#: the modifiers each family's C reads; any other (``.cc`` carry chains, forms added to the semantics
#: later) leaves the instruction to its handler
_KNOWN_MODS = {
    "add": {"sat", "rn"}, "sub": {"sat", "rn"}, "mul": {"lo", "hi", "wide", "rn"}, "mad": {"lo", "hi", "wide", "sat", "rn"},
    "div": {"rn"}, "rem": set(), "abs": {"ftz"}, "neg": {"ftz"}, "min": {"relu"}, "max": {"relu"},
    "popc": set(), "clz": set(), "brev": set(), "bfind": {"shiftamt"}, "bfe": set(), "bfi": set(), "shl": set(),
    "shr": set(), "shf": {"l", "r", "clamp", "wrap"}, "and": set(), "or": set(), "xor": set(), "not": set(),
    "cnot": set(), "lop3": {"or", "and"}, "prmt": {"f4e", "b4e", "rc8", "ecl", "ecr", "rc16"},
    "setp": set(_FCMP) | {"lo", "ls", "hi", "hs", "and", "or", "xor", "ftz"}, "selp": set(),
    "cvt": set(_IRND) | set(_FRND) | {"ftz", "sat", "relu", "satfinite"}, "fma": {"rn"}, "rcp": {"rn"},
    "sqrt": {"rn"},
}


def alu(op: Op, srcs: list[str], operands) -> list[tuple[str, int]] | None:
    """The destinations of ``op`` as C expressions (see the module spec), or None. ``operands``: the
    source operand tuples (for constants the C text does not show, lop3's immLut)."""
    fn = _FAMILIES.get(op.opcode)
    if fn is None or set(op.mods) - _KNOWN_MODS[op.opcode]:
        return None
    return fn(op, srcs, operands)


# ----------------------------------------------------------------------------------------------
# integers

def _float_type(op: Op) -> bool:
    return bool(op.types) and op.types[-1] in ("f16", "bf16", "f32", "f64", "f16x2", "bf16x2")


def _add(op, s, _):
    if _float_type(op):
        return _float(op, s)
    t = op.types[0]
    kind, w = _INT[t]
    if "sat" in op.mods:
        sign = "+" if op.opcode == "add" else "-"
        return [(f"rt_sat_s32((int64_t)(int32_t){s[0]} {sign} (int64_t)(int32_t){s[1]})", 32)]
    o = "+" if op.opcode == "add" else "-"
    return [(_c(w, f"(uint64_t){s[0]} {o} (uint64_t){s[1]}"), w)]


def _mul(op, s, _):
    if _float_type(op):
        return _float(op, s)
    kind, w = _INT[op.types[0]]
    part = next(m for m in ("lo", "hi", "wide") if m in op.mods)
    dw = 2 * w if part == "wide" else w
    if w <= 32:
        if kind == "s":
            prod = f"((uint64_t)((int64_t)({ST[w]}){s[0]} * (int64_t)({ST[w]}){s[1]}))"
        else:
            prod = f"((uint64_t){s[0]} * (uint64_t){s[1]})"
        t = {"lo": f"({prod} & {_mask(w)})", "hi": f"(({prod} >> {w}) & {_mask(w)})",
             "wide": f"({prod} & {_mask(2 * w)})"}[part]
    else:
        t = {"lo": f"((uint64_t){s[0]} * (uint64_t){s[1]})",
             "hi": f"rt_mulhi_{'s' if kind == 's' else 'u'}64({s[0]}, {s[1]})"}[part]
    if op.opcode == "mad":
        if "sat" in op.mods:
            return [(f"rt_sat_s32((int64_t)(int32_t){t} + (int64_t)(int32_t){s[2]})", 32)]
        t = f"({t} + (uint64_t){s[2]})"
    return [(_c(dw, t), dw)]


def _div(op, s, _):
    if _float_type(op):
        return _float(op, s)
    kind, w = _INT[op.types[0]]
    if kind == "s" and w == 64:
        return None                # NumPy's int64 |MIN| wraps: the handler's own arithmetic decides
    rem = int(op.opcode == "rem")
    return [(_c(w, f"rt_div({s[0]}, {s[1]}, {int(kind == 's')}, {w}, {rem})"), w)]


def _absneg(op, s, _):
    if _float_type(op):
        return _float(op, s)
    kind, w = _INT[op.types[0]]
    if op.opcode == "neg":
        return [(_c(w, f"0 - (uint64_t){s[0]}"), w)]
    return [(_c(w, f"rt_sext({s[0]}, {w}) < 0 ? 0 - (uint64_t){s[0]} : (uint64_t){s[0]}"), w)]


def _minmax(op, s, _):
    if _float_type(op):
        return _float(op, s)
    t = op.types[0]
    if t not in _INT:
        return None
    kind, w = _INT[t]
    o = ">" if op.opcode == "max" else "<"
    if kind == "s":
        r = f"(rt_sext({s[0]}, {w}) {o} rt_sext({s[1]}, {w}) ? {s[0]} : {s[1]})"
    else:
        r = f"((uint64_t){s[0]} {o} (uint64_t){s[1]} ? {s[0]} : {s[1]})"
    if "relu" in op.mods:
        r = f"(rt_sext({r}, {w}) < 0 ? 0 : {r})"
    return [(_c(w, r), w)]


def _bitcount(op, s, _):
    w = int(op.types[0][1:])
    if op.opcode == "popc":
        return [(f"((uint32_t)__builtin_popcountll((uint64_t){s[0]}))", 32)]
    if op.opcode == "clz":
        return [(f"((uint32_t)({w} - rt_bitlen64((uint64_t){s[0]})))", 32)]
    return [(f"rt_brev64({s[0]})", 64)] if w == 64 else [(f"rt_brev({s[0]}, 32)", 32)]


def _bfind(op, s, _):
    kind, w = _INT[op.types[0]]
    return [(f"rt_bfind({s[0]}, {int(kind == 's')}, {int('shiftamt' in op.mods)}, {w})", 32)]


def _bfe(op, s, _):
    kind, w = _INT[op.types[0]]
    return [(_c(w, f"rt_bfe({s[0]}, {s[1]}, {s[2]}, {int(kind == 's')}, {w})"), w)]


def _bfi(op, s, _):
    w = int(op.types[0][1:])
    return [(_c(w, f"rt_bfi({s[0]}, {s[1]}, {s[2]}, {s[3]}, {w})"), w)]


def _shift(op, s, _):
    kind, w = _INT[op.types[0]]
    f = "rt_shl" if op.opcode == "shl" else ("rt_shr_s" if kind == "s" else "rt_shr_u")
    return [(_c(w, f"{f}({s[0]}, {s[1]}, {w})"), w)]


def _shf(op, s, _):
    return [(f"rt_shf({s[0]}, {s[1]}, {s[2]}, {int('l' in op.mods)}, {int('clamp' in op.mods)})", 32)]


def _logic(op, s, _):
    t = op.types[0]
    name = op.opcode
    if t == "pred":
        if name == "not":
            return [(f"((uint8_t)!{s[0]})", 1)]
        o = {"and": "&", "or": "|", "xor": "^"}[name]
        return [(f"((uint8_t)({s[0]} {o} {s[1]}))", 1)]
    w = int(t[1:])
    if name == "not":
        return [(_c(w, f"~(uint64_t){s[0]}"), w)]
    if name == "cnot":
        return [(_c(w, f"{s[0]} == 0"), w)]
    o = {"and": "&", "or": "|", "xor": "^"}[name]
    return [(_c(w, f"(uint64_t){s[0]} {o} (uint64_t){s[1]}"), w)]


def _lop3(op, s, operands):
    lut = operands[3] if len(operands) > 3 else None
    if lut is None or lut[0] != "imm" or lut[2] != "int" or not 0 <= lut[1] < 256:
        return None                # the handler checks a non-constant immLut per thread
    imm = lut[1]
    terms = []
    for k in range(8):
        if (imm >> k) & 1:
            x = [(s[i] if k & bit else f"~{s[i]}") for i, bit in ((0, 4), (1, 2), (2, 1))]
            terms.append(f"({x[0]} & {x[1]} & {x[2]})")
    d = f"((uint32_t)({' | '.join(terms) if terms else '0'}))"
    if "or" in op.mods:
        return [(d, 32), (f"((uint8_t)(({d} != 0) | {s[4]}))", 1)]
    if "and" in op.mods:
        return [(d, 32), (f"((uint8_t)(({d} != 0) & {s[4]}))", 1)]
    return [(d, 32)]


def _prmt(op, s, _):
    mode = next((m for m in op.mods if m in _PRMT), None)
    return [(f"rt_prmt({s[0]}, {s[1]}, {s[2]}, {_PRMT[mode]})", 32)]


def _setp(op, s, _):
    t = op.types[0]
    cmp = next(m for m in op.mods if m in _FCMP or m in ("lo", "ls", "hi", "hs"))
    boolop = next((m for m in op.mods if m in ("and", "or", "xor")), None)
    if t in ("f16", "bf16", "f32", "f64"):
        ftz = int("ftz" in op.mods)
        dec = {"f32": "rt_dec_f32({x}, %d)" % ftz, "f16": "rt_dec_f16({x}, %d)" % ftz,
               "bf16": "rt_dec_bf16({x})", "f64": "rt_f64({x})"}[t]
        if t == "bf16" and ftz:
            return None
        raw = f"rt_fcmp({dec.format(x=s[0])}, {dec.format(x=s[1])}, {_FCMP[cmp]})"
    else:
        kind, w = _INT[t]
        if cmp in ("lo", "ls", "hi", "hs"):
            o = {"lo": "<", "ls": "<=", "hi": ">", "hs": ">="}[cmp]
            raw = f"((uint64_t){s[0]} {o} (uint64_t){s[1]})"
        elif kind == "s":
            raw = f"(rt_sext({s[0]}, {w}) {_CMP[cmp]} rt_sext({s[1]}, {w}))"
        else:
            raw = f"((uint64_t){s[0]} {_CMP[cmp]} (uint64_t){s[1]})"
    raw = f"((uint8_t){raw})"
    if boolop is None:
        return [(raw, 1), (f"((uint8_t)!{raw})", 1)]
    o = {"and": "&", "or": "|", "xor": "^"}[boolop]
    return [(f"((uint8_t)({raw} {o} {s[2]}))", 1), (f"((uint8_t)((uint8_t)!{raw} {o} {s[2]}))", 1)]


def _selp(op, s, _):
    w = {"f32": 32, "f64": 64, "f16": 16, "bf16": 16}.get(op.types[0]) or _INT[op.types[0]][1]
    return [(_c(w, f"{s[2]} ? {s[0]} : {s[1]}"), w)]


# ----------------------------------------------------------------------------------------------
# floating point (the .rn paths without .ftz/.sat; everything else runs the handler)

def _float(op: Op, s):
    t = op.types[0]
    mods = set(op.mods)
    name = op.opcode
    if name in ("neg", "abs"):
        return _negabs(t, name, "ftz" in mods, s[0])
    if name in ("min", "max"):
        return None if mods else _minmax_f(t, name, s)
    rnd = mods & set(_FRND)
    if mods - {"rn"} or t not in ("f32", "f16", "f16x2"):
        return None
    f = {"f32": "rt_f", "f16": "rt_h", "f16x2": "rt_h"}[t]
    if name in ("add", "sub", "mul"):
        fn = f"{f}{name}"
        if t == "f16x2":
            return [(f"RT_X2({fn}, {s[0]}, {s[1]})", 32)]
        return [(f"{fn}({s[0]}, {s[1]})", 32 if t == "f32" else 16)]
    if name in ("fma", "mad") and rnd == {"rn"}:
        if name == "mad" and t != "f32":
            return None
        if t == "f32":
            return [(f"rt_ffma({s[0]}, {s[1]}, {s[2]})", 32)]
        if t == "f16":
            return [(f"rt_hfma({s[0]}, {s[1]}, {s[2]})", 16)]
        return [(f"RT_X3(rt_hfma, {s[0]}, {s[1]}, {s[2]})", 32)]
    if t == "f32" and rnd == {"rn"}:
        if name == "div":
            return [(f"rt_fdiv({s[0]}, {s[1]})", 32)]
        if name == "rcp":
            return [(f"rt_fdiv(0x3F800000u, {s[0]})", 32)]
        if name == "sqrt":
            return [(f"rt_fsqrt({s[0]})", 32)]
    return None


def _negabs(t: str, name: str, ftz: bool, a: str):
    lanes, st = (2, t[:-2]) if t.endswith("x2") else (1, t)
    if st not in ("f16", "bf16", "f32", "f64"):
        return None
    sb = {"f16": 16, "bf16": 16, "f32": 32, "f64": 64}[st]
    w = sb * lanes
    exp = {"f16": 0x7C00, "bf16": 0x7F80, "f32": 0x7F800000, "f64": 0x7FF0000000000000}[st]
    sign = sum(1 << (sb * (i + 1) - 1) for i in range(lanes))
    v = f"((uint64_t){a})"
    if ftz:               # a lane whose exponent field is zero keeps only its sign bit
        for i in range(lanes):
            lane_exp, lane = exp << (sb * i), ((1 << sb) - 1) << (sb * i)
            keep = (1 << (sb * (i + 1) - 1)) | (((1 << w) - 1) & ~lane)
            v = f"(({v} & {lane_exp:#x}ull) == 0 ? ({v} & {keep:#x}ull) : {v})"
    r = f"{v} ^ {sign:#x}ull" if name == "neg" else f"{v} & {((1 << w) - 1) & ~sign:#x}ull"
    return [(_c(w, r), w)]


def _minmax_f(t: str, name: str, s):
    is_max = int(name == "max")
    if t == "f32":
        return [(f"rt_fminmax({s[0]}, {s[1]}, {is_max}, 0)", 32)]
    if t == "f16":
        return [(f"((uint16_t)rt_fminmax({s[0]}, {s[1]}, {is_max}, 1))", 16)]
    if t == "f16x2":
        lo = f"rt_fminmax((uint16_t){s[0]}, (uint16_t){s[1]}, {is_max}, 1)"
        hi = f"rt_fminmax((uint16_t)({s[0]} >> 16), (uint16_t)({s[1]} >> 16), {is_max}, 1)"
        return [(f"((uint32_t)({lo} | ({hi} << 16)))", 32)]
    return None


# ----------------------------------------------------------------------------------------------
# cvt

def _int_value(x: str, kind: str, w: int) -> str:
    """The exact value of the low w bits of x, as int64_t (signed) or uint64_t (unsigned)."""
    if kind == "s":
        return f"rt_sext((uint64_t){x}, {w})"
    return f"((uint64_t){x} & {_mask(w)})"


def _int_bits(v: str, kind: str, w: int) -> tuple[str, int]:
    """``convert._int_bits``: a value wrapped to w bits; 8-bit results extend to 32 bits."""
    if w == 8:
        ext = f"((uint64_t)({v}) & 0xFF)"
        if kind == "s":
            ext = f"(({ext} & 0x80) ? ({ext} | 0xFFFFFF00ull) : {ext})"
        return f"((uint32_t){ext})", 32
    return _c(w, f"(uint64_t)({v})"), w


def _cvt(op, s, _):
    dst, src = op.types
    mods = set(op.mods)
    irnd = [m for m in op.mods if m in _IRND]
    frnd = [m for m in op.mods if m in _FRND]
    a = s[0]
    if dst in ("f16x2", "bf16x2"):
        if mods != {"rn"}:
            return None
        one = "rt_h_canon(rt_f2h(rt_f32({x})))" if dst == "f16x2" else "rt_bf_canon_f32({x})"
        return [(f"(((uint32_t){one.format(x=s[0])} << 16) | (uint32_t){one.format(x=s[1])})", 32)]
    if dst in _CVT_INT and src in _CVT_INT:
        (dk, dw), (sk, sw) = _CVT_INT[dst], _CVT_INT[src]
        v = _int_value(a, sk, sw)
        if "sat" in mods:
            lo, hi = (-(2 ** (dw - 1)), 2 ** (dw - 1) - 1) if dk == "s" else (0, 2**dw - 1)
            if sk == "u":
                v = f"({v} < {hi}ull ? {v} : {hi}ull)"
            else:
                lo_c = "INT64_MIN" if lo <= -(2**63) else f"{lo}LL"
                v = f"rt_clamp_s64({v}, {lo_c}, {min(hi, 2**63 - 1)}LL)"
        return [_int_bits(v, dk, dw)]
    if dst in ("f32", "f16", "f64") and src in _CVT_INT:
        sk, sw = _CVT_INT[src]
        if frnd != ["rn"] or mods != {"rn"} or sw > 32:
            return None
        v = f"(double){_int_value(a, sk, sw)}"
        return [{"f32": (f"rt_u32f((float){v})", 32), "f16": (f"rt_d2h({v})", 16),
                 "f64": (f"rt_u64d({v})", 64)}[dst]]
    if dst in _CVT_INT and src in ("f16", "f32", "f64"):
        if len(irnd) != 1 or mods - {irnd[0], "ftz", "sat"} or ("ftz" in mods and src != "f32"):
            return None
        dk, dw = _CVT_INT[dst]
        x = {"f32": f"rt_dec_f32({a}, {int('ftz' in mods)})", "f16": f"rt_dec_f16({a}, 0)",
             "f64": f"rt_f64({a})"}[src]
        return [(_c(32 if dw == 8 else dw, f"rt_f2i({x}, {_IRND[irnd[0]]}, {int(dk == 's')}, {dw}, {int(src == 'f64')})"),
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


_FAMILIES = {
    "add": _add, "sub": _add, "mul": _mul, "mad": _mul, "div": _div, "rem": _div, "abs": _absneg,
    "neg": _absneg, "min": _minmax, "max": _minmax, "popc": _bitcount, "clz": _bitcount, "brev": _bitcount,
    "bfind": _bfind, "bfe": _bfe, "bfi": _bfi, "shl": _shift, "shr": _shift, "shf": _shf, "and": _logic,
    "or": _logic, "xor": _logic, "not": _logic, "cnot": _logic, "lop3": _lop3, "prmt": _prmt, "setp": _setp,
    "selp": _selp, "cvt": _cvt, "fma": lambda op, s, _: _float(op, s), "rcp": lambda op, s, _: _float(op, s),
    "sqrt": lambda op, s, _: _float(op, s),
}
