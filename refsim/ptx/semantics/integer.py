"""Integer arithmetic instructions of PTX, as pure NumPy handlers.

Spec
----
values          unsigned bit-pattern arrays (uint16/32/64); a signed type reads the same bits as two's
                complement (refsim.ptx.semantics.words). Every result is reduced modulo 2^width (wrap)
                unless ``.sat`` is given.
arithmetic      add/sub (``.sat`` only for s32), mul/mad ``.lo/.hi/.wide`` (the 2w-bit product ``t``:
                ``.lo`` = t[w-1:0], ``.hi`` = t[2w-1:w], ``.wide`` = t; ``mad`` adds c to that part
                with wrap, ``mad.hi.sat.s32`` saturates), div/rem (truncating; division by zero is
                unspecified in the ISA: refsim returns all ones for div and ``a`` for rem, documented),
                abs/neg (wrap: ``abs(MIN) = MIN``), min/max (``.relu`` on s32/s16x2; u16x2/s16x2),
                dp4a/dp2a, sad (``c + |a - b|``).
carry chains    add.cc/addc/sub.cc/subc/mad.cc/madc (.u32/.s32/.u64/.s64; the carry is unsigned for
                every type): ``.cc`` writes CC.CF (the carry of add/mad, the borrow of sub), the ``c``
                forms read it: ``addc`` d = a + b + CF, ``subc`` d = a - (b + CF), ``madc``
                d = t<hi|lo> + c + CF. CC.CF is one bit of per-thread state, an implicit pred operand
                (refsim.ptx.parse appends it); worked example, 64-bit add from 32-bit halves:
                    add.cc.u32 lo, 0xFFFFFFFF, 1  -> lo = 0, CF = 1;  addc.u32 hi, 0, 0 -> hi = 1
floats          add/sub/mul/mad/div/abs/neg/min/max with a float type go to refsim.ptx.semantics.floating.
source          PTX ISA 9.x, "Integer Arithmetic Instructions", "Extended-Precision Integer Arithmetic
                Instructions"; each handler's ``isa`` names its section.
"""

from __future__ import annotations

import numpy as np

from refsim.ptx.semantics import expr, floating
from refsim.ptx.semantics.cexpr import ST, cast, mask
from refsim.ptx.semantics.handler import Handler, Op, isa, unsupported
from refsim.ptx.semantics.words import INT_TYPES, alu, check_mods, int_type, is_float, sval, ubits, value, wrap

__all__ = ["mul_reference", "add_carry", "sub_borrow", "carry_reference", "BUILDERS", "C_FORMS"]


# ----------------------------------------------------------------------------------------------
# add / sub / mul / mad

#: the forms that are wrapped w-bit arithmetic, defined once for both executors (refsim.ptx.semantics.expr):
#: add/sub without .sat (any integer type: two's complement gives signed and unsigned the same bits), neg,
#: the low half of a product (the same bits for signed and unsigned operands): mul.lo, mad.lo; abs
_WRAPPED = {"add": expr.src(0) + expr.src(1), "sub": expr.src(0) - expr.src(1), "neg": expr.ZERO - expr.src(0),
            "mul.lo": expr.src(0) * expr.src(1), "mad.lo": expr.src(0) * expr.src(1) + expr.src(2),
            "abs": expr.select(expr.compare("<", expr.src(0), expr.ZERO, signed=True), expr.ZERO - expr.src(0),
                               expr.src(0))}


def _build_add(op: Op, arch: str) -> Handler:
    if is_float(op):
        return floating.build(op, arch)
    if "cc" in op.mods:
        return _build_carry(op, arch)
    if len(op.types) != 1:
        raise unsupported(op, "expects one type")
    kind, w = int_type(op, op.types[0])
    mods = check_mods(op, {"sat"})
    if "sat" in mods and op.types[0] != "s32":
        raise unsupported(op, ".sat applies to .s32 only")
    sign = 1 if op.opcode == "add" else -1

    def sat(a, b):
        r = sval(a, 32) + sign * sval(b, 32)
        return (wrap(np.clip(r, -(2**31), 2**31 - 1), 32),)

    fn = sat if mods else expr.numpy_fn(_WRAPPED[op.opcode], w)
    return alu(fn, op.types, op.types * 2, isa("integer-arithmetic", op.opcode))


def _mul_full(a, b, kind: str, w: int) -> tuple[np.ndarray, np.ndarray]:
    """The 2w-bit product as (hi, lo) uint64 halves of w bits each (exact, vectorised)."""
    if w <= 32:  # the 2w-bit product fits 64 bits: exact in uint64 (unsigned) or int64 (signed)
        va, vb = value(a, kind, w), value(b, kind, w)
        t = va * vb if kind != "s" else (va * vb).astype(np.uint64)
        return (t >> np.uint64(w)) & np.uint64((1 << w) - 1), t & np.uint64((1 << w) - 1)
    ua, ub = ubits(a, 64), ubits(b, 64)
    m = np.uint64(0xFFFFFFFF)
    s32 = np.uint64(32)
    a0, a1, b0, b1 = ua & m, ua >> s32, ub & m, ub >> s32
    p00, p01, p10, p11 = a0 * b0, a0 * b1, a1 * b0, a1 * b1
    mid = (p00 >> s32) + (p01 & m) + (p10 & m)
    hi = p11 + (p01 >> s32) + (p10 >> s32) + (mid >> s32)
    lo = ua * ub
    if kind == "s":  # signed high half = unsigned high half - (a<0)*b - (b<0)*a  (mod 2^64)
        hi = hi - np.where(sval(a, 64) < 0, ub, np.uint64(0)) - np.where(sval(b, 64) < 0, ua, np.uint64(0))
    return hi, lo


def mul_reference(a: int, b: int, kind: str, w: int) -> tuple[int, int]:
    """Plain-integer twin of the 2w-bit product: (hi, lo) w-bit unsigned halves."""
    def val(x):
        x &= (1 << w) - 1
        return x - (1 << w) if kind == "s" and x >> (w - 1) else x
    t = (val(a) * val(b)) % (1 << (2 * w))
    return t >> w, t & ((1 << w) - 1)


def _build_mul(op: Op, arch: str) -> Handler:
    if is_float(op):
        return floating.build(op, arch)
    if "cc" in op.mods:
        return _build_carry(op, arch)
    if len(op.types) != 1:
        raise unsupported(op, "expects one type")
    kind, w = int_type(op, op.types[0])
    mods = check_mods(op, {"lo", "hi", "wide", "sat"})
    part = [m for m in ("lo", "hi", "wide") if m in mods]
    if len(part) != 1:
        raise unsupported(op, "needs exactly one of .lo, .hi, .wide")
    part = part[0]
    sat = "sat" in mods
    if sat and not (op.opcode == "mad" and part == "hi" and op.types[0] == "s32"):
        raise unsupported(op, ".sat applies to mad.hi.s32 only")
    if part == "wide" and w == 64:
        raise unsupported(op, ".wide is defined for 16- and 32-bit types only")
    dw = 2 * w if part == "wide" else w
    dtype = f"{kind}{dw}"
    mad = op.opcode == "mad"

    if part == "lo" and not sat:
        return alu(expr.numpy_fn(_WRAPPED[op.opcode + ".lo"], w), (dtype,), (op.types[0],) * (3 if mad else 2),
                   isa("integer-arithmetic", op.opcode))

    def fn(a, b, c=None):
        hi, lo = _mul_full(a, b, kind, w)
        if part == "wide":
            t = (hi << np.uint64(w)) | lo
        else:
            t = hi if part == "hi" else lo
        if mad:
            if sat:
                r = sval(t, 32) + sval(c, 32)
                return (wrap(np.clip(r, -(2**31), 2**31 - 1), 32),)
            t = t + ubits(c, dw)
        return (wrap(t, dw),)

    src = (op.types[0],) * 2 + ((dtype,) if mad else ())
    return alu(fn, (dtype,), src, isa("integer-arithmetic", op.opcode))


# ----------------------------------------------------------------------------------------------
# extended precision: add.cc addc sub.cc subc mad.cc madc (the carry flag CC.CF)


def add_carry(a, b, cin, w: int) -> tuple[np.ndarray, np.ndarray]:
    """(a + b + cin) mod 2^w and its carry out: a, b w-bit unsigned bits, cin bool. Returns
    (uint64 sum bits, bool carry)."""
    ua, ub = ubits(a, w), ubits(b, w)
    ci = np.asarray(cin).astype(np.uint64)
    with np.errstate(over="ignore"):
        if w < 64:
            s = ua + ub + ci                          # at most 2^(w+1) - 1: exact in uint64
            return s & np.uint64((1 << w) - 1), (s >> np.uint64(w)) != 0
        s1 = ua + ub                                  # wraps modulo 2^64
        s = s1 + ci
    return s, (s1 < ua) | (s < s1)


def sub_borrow(a, b, bin_, w: int) -> tuple[np.ndarray, np.ndarray]:
    """(a - (b + bin)) mod 2^w and its borrow out (a < b + bin as unsigned integers)."""
    ua, ub = ubits(a, w), ubits(b, w)
    bi = np.asarray(bin_).astype(bool)
    with np.errstate(over="ignore"):
        d = ua - ub - bi.astype(np.uint64)
    return d & np.uint64((1 << w) - 1) if w < 64 else d, (ua < ub) | ((ua == ub) & bi)


def carry_reference(opcode: str, a: int, b: int, c: int, cin: int, kind: str, w: int, part: str = "lo"):
    """Plain-integer twin of the carry instructions, straight from the ISA's semantics lines:
    add: d = a + b (+ CC.CF for addc); sub: d = a - (b (+ CC.CF for subc)); mad: t = a * b,
    d = t<part> + c (+ CC.CF for madc). Returns (d as w-bit unsigned, carry or borrow out)."""
    m = 1 << w
    cf = cin if opcode.endswith("c") else 0
    if opcode.startswith("sub"):
        x = (a % m) - (b % m) - cf
        return x % m, int(x < 0)
    if opcode.startswith("mad"):
        def val(v):
            v %= m
            return v - m if kind == "s" and v >> (w - 1) else v
        t = (val(a) * val(b)) % (m * m)
        a, b = (t >> w) if part == "hi" else t % m, c
    x = (a % m) + (b % m) + cf
    return x % m, x >> w


def _build_carry(op: Op, arch: str) -> Handler:
    """The six extended-precision opcodes: ``.cc`` writes the carry (borrow for sub) to CC.CF,
    the ``c`` forms read it. The engine passes CC.CF as a pred operand (refsim.ptx.parse adds it):
    sources (a, b{, c}{, CC.CF in}), destinations (d{, CC.CF out})."""
    name = op.opcode
    base = name[:-1] if name in ("addc", "subc", "madc") else name
    carry_in = base != name
    carry_out = "cc" in op.mods
    t = op.types[0] if len(op.types) == 1 else ""
    if t not in ("u32", "s32", "u64", "s64"):
        raise unsupported(op, "extended-precision arithmetic takes .u32, .s32, .u64 or .s64")
    kind, w = int_type(op, t)
    parts = [m for m in ("hi", "lo") if m in op.mods]
    if base == "mad":
        check_mods(op, {"hi", "lo", "cc"})
        if len(parts) != 1:
            raise unsupported(op, "needs exactly one of .hi, .lo")
    else:
        check_mods(op, {"cc"})
    hi = parts == ["hi"]

    def fn(a, b, *rest):
        if base == "mad":
            c, rest = rest[0], rest[1:]
            h, lo = _mul_full(a, b, kind, w)
            a, b = (h if hi else lo), c
        cin = rest[0] if carry_in else False
        d, cout = (sub_borrow if base == "sub" else add_carry)(a, b, cin, w)
        return (wrap(d, w), np.asarray(cout, bool)) if carry_out else (wrap(d, w),)

    src = (t,) * (3 if base == "mad" else 2) + (("pred",) if carry_in else ())
    dst = (t,) + (("pred",) if carry_out else ())
    return alu(fn, dst, src, isa("extended-precision-integer-arithmetic", name))


# ----------------------------------------------------------------------------------------------
# div / rem / abs / neg / min / max


def _build_div(op: Op, arch: str) -> Handler:
    if is_float(op):
        return floating.build(op, arch)
    kind, w = int_type(op, op.types[0])
    check_mods(op, set())
    is_div = op.opcode == "div"

    def fn(a, b):
        va, vb = value(a, kind, w), value(b, kind, w)
        zero = vb == 0
        safe = np.where(zero, 1, vb).astype(va.dtype)
        if kind == "s":  # C semantics: quotient truncated toward zero, remainder takes a's sign
            q = np.abs(va) // np.abs(safe) * np.where((va < 0) != (safe < 0), -1, 1)
            r = va - q * safe
        else:
            q, r = va // safe, va % safe
        res = np.where(zero, np.int64(-1) if kind == "s" else np.uint64((1 << w) - 1), q) if is_div \
            else np.where(zero, va, r)
        return (wrap(res, w),)

    return alu(fn, op.types, op.types * 2, isa("integer-arithmetic", op.opcode))


def _build_absneg(op: Op, arch: str) -> Handler:
    if is_float(op):
        return floating.build(op, arch)
    kind, w = int_type(op, op.types[0])
    if kind != "s":
        raise unsupported(op, "integer abs/neg are defined for signed types only")
    check_mods(op, set())
    return alu(expr.numpy_fn(_WRAPPED[op.opcode], w), op.types, op.types, isa("integer-arithmetic", op.opcode))


def _build_minmax(op: Op, arch: str) -> Handler:
    if is_float(op):
        return floating.build(op, arch)
    t = op.types[0]
    mods = check_mods(op, {"relu"})
    is_max = op.opcode == "max"
    pick = np.maximum if is_max else np.minimum
    if t in ("u16x2", "s16x2"):
        kind = t[0]
        if mods and kind != "s":
            raise unsupported(op, ".relu applies to s16x2/s32 only")

        def fn2(a, b):
            out = np.zeros(np.shape(a), np.uint64)
            for h in range(2):
                sh = np.uint64(16 * h)
                r = pick(value(ubits(a, 32) >> sh, kind, 16), value(ubits(b, 32) >> sh, kind, 16))
                if mods:
                    r = np.maximum(r, 0)
                out |= ubits(wrap(r, 16), 16) << sh
            return (out.astype(np.uint32),)

        return alu(fn2, (t,), (t, t), isa("integer-arithmetic", op.opcode))
    kind, w = int_type(op, t)
    if mods and t != "s32":
        raise unsupported(op, ".relu applies to s16x2/s32 only")
    return alu(expr.numpy_fn(_minmax(op.opcode, kind, bool(mods)), w), (t,), (t, t), isa("integer-arithmetic", op.opcode))


def _minmax(name: str, kind: str, relu: bool) -> expr.Expr:
    """min/max of two integers (signed by type), with ``.relu`` clamping a negative result to 0: one
    definition for both executors (refsim.ptx.semantics.expr)."""
    a, b = expr.src(0), expr.src(1)
    r = expr.select(expr.compare(">" if name == "max" else "<", a, b, signed=kind == "s"), a, b)
    return expr.select(expr.compare("<", r, expr.ZERO, signed=True), expr.ZERO, r) if relu else r


def _build_dp(op: Op, arch: str) -> Handler:
    if len(op.types) != 2 or any(t not in ("u32", "s32") for t in op.types):
        raise unsupported(op, "types must be .u32/.s32 for a and b")
    mods = check_mods(op, {"lo", "hi"})
    ka, kb = op.types[0][0], op.types[1][0]
    signed = "s" in (ka, kb)
    dst = "s32" if signed else "u32"
    if op.opcode == "dp2a" and len(mods) != 1:
        raise unsupported(op, "dp2a needs .lo or .hi")

    def fn(a, b, c):
        acc = value(c, dst[0], 32).astype(np.int64)
        if op.opcode == "dp4a":
            for i in range(4):
                acc = acc + value(ubits(a, 32) >> np.uint64(8 * i), ka, 8) * value(ubits(b, 32) >> np.uint64(8 * i), kb, 8)
        else:
            base = 2 if "hi" in mods else 0
            for i in range(2):
                acc = acc + (value(ubits(a, 32) >> np.uint64(16 * i), ka, 16)
                             * value(ubits(b, 32) >> np.uint64(8 * (base + i)), kb, 8))
        return (wrap(acc, 32),)

    return alu(fn, (dst,), (op.types[0], op.types[1], dst), isa("integer-arithmetic", op.opcode))


# ----------------------------------------------------------------------------------------------
# sad


def _build_sad(op: Op, arch: str) -> Handler:
    kind, w = int_type(op, op.types[0] if len(op.types) == 1 else "")
    if kind == "b":
        raise unsupported(op, "type must be .u16/.u32/.u64/.s16/.s32/.s64")
    check_mods(op, set())

    def fn(a, b, c):  # d = c + |a - b| (the difference is exact in the wider integer), wrap
        va, vb = value(a, kind, w), value(b, kind, w)
        diff = np.where(va >= vb, va - vb, vb - va)
        return (wrap(ubits(diff, w) + ubits(c, w), w),)

    return alu(fn, op.types, op.types * 3, isa("integer-arithmetic", "sad"))


#: opcode -> handler builder of this family (refsim.ptx.semantics.table assembles the one table)
BUILDERS = {
    "add": _build_add, "sub": _build_add, "mul": _build_mul, "mad": _build_mul, "div": _build_div,
    "rem": _build_div, "abs": _build_absneg, "neg": _build_absneg, "min": _build_minmax, "max": _build_minmax,
    "dp4a": _build_dp, "dp2a": _build_dp, "sad": _build_sad, "addc": _build_carry, "subc": _build_carry,
    "madc": _build_carry,
}


# ----------------------------------------------------------------------------------------------
# the C forms of this family (refsim.ptx.semantics.cexpr): what the compiled executor emits for the
# handlers above, form by form; None leaves a form to its handler


def _c_add(op, s, _):
    if is_float(op):
        return floating.c_form(op, s)
    kind, w = INT_TYPES[op.types[0]]
    o = "+" if op.opcode == "add" else "-"
    if "sat" in op.mods:
        return [(f"rt_sat_s32((int64_t)(int32_t){s[0]} {o} (int64_t)(int32_t){s[1]})", 32)]
    return [(expr.c(_WRAPPED[op.opcode], w, s), w)]


def _c_mul(op, s, _):
    if is_float(op):
        return floating.c_form(op, s)
    kind, w = INT_TYPES[op.types[0]]
    part = next(m for m in ("lo", "hi", "wide") if m in op.mods)
    dw = 2 * w if part == "wide" else w
    if part == "lo" and "sat" not in op.mods:
        return [(expr.c(_WRAPPED[op.opcode + ".lo"], w, s), w)]
    if w <= 32:
        if kind == "s":
            prod = f"((uint64_t)((int64_t)({ST[w]}){s[0]} * (int64_t)({ST[w]}){s[1]}))"
        else:
            prod = f"((uint64_t){s[0]} * (uint64_t){s[1]})"
        t = {"lo": f"({prod} & {mask(w)})", "hi": f"(({prod} >> {w}) & {mask(w)})",
             "wide": f"({prod} & {mask(2 * w)})"}[part]
    else:
        t = {"lo": f"((uint64_t){s[0]} * (uint64_t){s[1]})",
             "hi": f"rt_mulhi_{'s' if kind == 's' else 'u'}64({s[0]}, {s[1]})"}[part]
    if op.opcode == "mad":
        if "sat" in op.mods:
            return [(f"rt_sat_s32((int64_t)(int32_t){t} + (int64_t)(int32_t){s[2]})", 32)]
        t = f"({t} + (uint64_t){s[2]})"
    return [(cast(dw, t), dw)]


def _c_div(op, s, _):
    if is_float(op):
        return floating.c_form(op, s)
    kind, w = INT_TYPES[op.types[0]]
    if kind == "s" and w == 64:
        return None                # NumPy's int64 |MIN| wraps: the handler's own arithmetic decides
    rem = int(op.opcode == "rem")
    return [(cast(w, f"rt_div({s[0]}, {s[1]}, {int(kind == 's')}, {w}, {rem})"), w)]


def _c_absneg(op, s, _):
    if is_float(op):
        return floating.c_form(op, s)
    kind, w = INT_TYPES[op.types[0]]
    return [(expr.c(_WRAPPED[op.opcode], w, s), w)]


def _c_minmax(op, s, _):
    if is_float(op):
        return floating.c_form(op, s)
    t = op.types[0]
    if t not in INT_TYPES:
        return None
    kind, w = INT_TYPES[t]
    return [(expr.c(_minmax(op.opcode, kind, "relu" in op.mods), w, s), w)]


#: opcode -> (the modifiers its C reads, its C form); ``.cc`` carry chains, dp4a/dp2a and sad run their
#: handlers
C_FORMS = {
    "add": ({"sat", "rn"}, _c_add), "sub": ({"sat", "rn"}, _c_add), "mul": ({"lo", "hi", "wide", "rn"}, _c_mul),
    "mad": ({"lo", "hi", "wide", "sat", "rn"}, _c_mul), "div": ({"rn"}, _c_div), "rem": (set(), _c_div),
    "abs": ({"ftz"}, _c_absneg), "neg": ({"ftz"}, _c_absneg), "min": ({"relu"}, _c_minmax),
    "max": ({"relu"}, _c_minmax),
}
