"""Integer, bit-manipulation, comparison and select instructions of PTX, as pure NumPy handlers.

Spec
----
values          unsigned bit-pattern arrays (uint16/32/64); a signed type reads the same bits as two's
                complement. Every result is reduced modulo 2^width (wrap) unless ``.sat`` is given.
arithmetic      add/sub (``.sat`` only for s32), mul/mad ``.lo/.hi/.wide`` (the 2w-bit product ``t``:
                ``.lo`` = t[w-1:0], ``.hi`` = t[2w-1:w], ``.wide`` = t; ``mad`` adds c to that part
                with wrap, ``mad.hi.sat.s32`` saturates), div/rem (truncating; division by zero is
                unspecified in the ISA: refsim returns all ones for div and ``a`` for rem, documented),
                abs/neg (wrap: ``abs(MIN) = MIN``), min/max (``.relu`` on s32/s16x2; u16x2/s16x2),
                popc/clz/brev/bfind (``.shiftamt``; no bit found -> 0xFFFFFFFF), dp4a/dp2a.
bit fields      bfe/bfi: position and length are ``& 0xff``; bfe length 0 -> 0; bits past the msb read
                as the field's sign bit (signed) or 0; bfi writes nothing past the msb.
shifts          shl/shr: amount is an unsigned 32-bit register; amounts above the width clamp to the
                width (shl/shr.u -> 0, shr.s -> sign fill). shf.l/shf.r ``.clamp``: min(c, 32);
                ``.wrap``: c & 31.
logic           and/or/xor/not/cnot on pred/b16/b32/b64; lop3 ``immLut`` = F(0xF0, 0xCC, 0xAA):
                bit i of the result is bit (4·a_i + 2·b_i + c_i) of immLut; ``.or/.and`` BoolOp gives
                ``p = (d != 0) op q``. prmt: byte j of d = byte ``ctl_j & 7`` of {b, a} (sign-replicated
                if ``ctl_j & 8``, generic form only); the modes use the ISA's fixed selector table below.
compare         setp ``p = (a cmp b) BoolOp c``, ``q = !(a cmp b) BoolOp c`` (integer eq/ne/lt/le/gt/ge
                signed by type, lo/ls/hi/hs unsigned; float ordered and ``u`` unordered forms, num/nan,
                ``.ftz`` on f32); selp ``d = c ? a : b``.
source          PTX ISA 9.x, "Integer Arithmetic Instructions", "Logic and Shift Instructions",
                "Comparison and Selection Instructions", "Data Movement and Conversion Instructions: prmt";
                each handler's ``isa`` names its section and anchor.

``prmt`` mode table (selector c[1:0] -> the source byte placed in d.b3 d.b2 d.b1 d.b0), from the ISA::

    .f4e  3210 4321 5432 6543     forward 4 extract (a funnel window over {b, a})
    .b4e  5670 6701 7012 0123     backward 4 extract
    .rc8  0000 1111 2222 3333     replicate byte
    .ecl  3210 3211 3222 3333     edge clamp left
    .ecr  0000 1110 2210 3210     edge clamp right
    .rc16 1010 3232 1010 3232     replicate half-word

``lop3`` worked example: immLut 0xEA = (a & b) | c; a = 0b1100, b = 0b1010, c = 0b0001 ->
bit 3: a=1 b=1 c=0 -> index 6 -> (0xEA >> 6) & 1 = 1; bit 0: 0 0 1 -> index 1 -> 1; result 0b1001.
"""

from __future__ import annotations

import numpy as np

from refsim.ptx.semantics import Handler, Op, isa, register, unsupported

__all__ = ["PRMT_MODES", "lop3", "lop3_reference", "prmt", "prmt_reference", "bfe", "bfe_reference",
           "bfi", "bfi_reference"]

UINT = {16: np.uint16, 32: np.uint32, 64: np.uint64}
_INT_TYPES = {f"{k}{w}": (k, w) for k in "sub" for w in (16, 32, 64)}
_FLOAT_TYPES = ("f16", "bf16", "f32", "f64", "f16x2", "bf16x2")

PRMT_MODES = {
    "f4e": (0x3210, 0x4321, 0x5432, 0x6543),
    "b4e": (0x5670, 0x6701, 0x7012, 0x0123),
    "rc8": (0x0000, 0x1111, 0x2222, 0x3333),
    "ecl": (0x3210, 0x3211, 0x3222, 0x3333),
    "ecr": (0x0000, 0x1110, 0x2210, 0x3210),
    "rc16": (0x1010, 0x3232, 0x1010, 0x3232),
}


# ----------------------------------------------------------------------------------------------
# bit helpers


def _u(x, w: int) -> np.ndarray:
    """Bits of x as uint64, masked to w bits."""
    return np.asarray(x).astype(np.uint64) & np.uint64((1 << w) - 1) if w < 64 else np.asarray(x).astype(np.uint64)


def _s(x, w: int) -> np.ndarray:
    """Two's-complement value of the low w bits of x as int64."""
    u = _u(x, w)
    if w == 64:
        return u.view(np.int64) if u.ndim else np.int64(u.astype(np.int64))
    sign = np.uint64(1 << (w - 1))
    return (u ^ sign).astype(np.int64) - np.int64(1 << (w - 1))


def _out(v, w: int) -> np.ndarray:
    """An int64/uint64 array reduced modulo 2^w, as the w-bit unsigned dtype."""
    v = np.asarray(v)
    if v.dtype != np.uint64:
        v = v.astype(np.int64).astype(np.uint64)
    return (v & np.uint64((1 << w) - 1) if w < 64 else v).astype(UINT[w])


def _int_type(op: Op, t: str) -> tuple[str, int]:
    if t not in _INT_TYPES:
        raise unsupported(op, f"type .{t} is not an integer type of 16, 32 or 64 bits")
    return _INT_TYPES[t]


def _val(x, kind: str, w: int) -> np.ndarray:
    """Numeric value of bits under the type (int64 for s, uint64 for u/b)."""
    return _s(x, w) if kind == "s" else _u(x, w)


def _mods(op: Op, allowed: set[str]) -> set[str]:
    extra = set(op.mods) - allowed
    if extra:
        raise unsupported(op, f"modifier(s) {', '.join('.' + m for m in sorted(extra))} not supported here")
    return set(op.mods)


def _alu(fn, dst, src, isa) -> Handler:
    return Handler(fn=fn, dst_types=tuple(dst), src_types=tuple(src), kind="alu", isa=isa)


def _is_float(op: Op) -> bool:
    return bool(op.types) and op.types[-1] in _FLOAT_TYPES


def _floating():
    from refsim.ptx.semantics import floating

    return floating


# ----------------------------------------------------------------------------------------------
# add / sub / mul / mad


@register("add", "sub")
def _build_add(op: Op, arch: str) -> Handler:
    if _is_float(op):
        return _floating().build(op, arch)
    if len(op.types) != 1:
        raise unsupported(op, "expects one type")
    kind, w = _int_type(op, op.types[0])
    mods = _mods(op, {"sat"})
    if "sat" in mods and op.types[0] != "s32":
        raise unsupported(op, ".sat applies to .s32 only")
    sign = 1 if op.opcode == "add" else -1

    def fn(a, b):
        if mods:
            r = _s(a, 32) + sign * _s(b, 32)
            return (_out(np.clip(r, -(2**31), 2**31 - 1), 32),)
        ua, ub = _u(a, w), _u(b, w)
        return (_out(ua + ub if sign > 0 else ua - ub, w),)

    return _alu(fn, op.types, op.types * 2, isa("integer-arithmetic", op.opcode))


def _mul_full(a, b, kind: str, w: int) -> tuple[np.ndarray, np.ndarray]:
    """The 2w-bit product as (hi, lo) uint64 halves of w bits each (exact, vectorised)."""
    if w <= 32:  # the 2w-bit product fits 64 bits: exact in uint64 (unsigned) or int64 (signed)
        va, vb = _val(a, kind, w), _val(b, kind, w)
        t = va * vb if kind != "s" else (va * vb).astype(np.uint64)
        return (t >> np.uint64(w)) & np.uint64((1 << w) - 1), t & np.uint64((1 << w) - 1)
    ua, ub = _u(a, 64), _u(b, 64)
    m = np.uint64(0xFFFFFFFF)
    s32 = np.uint64(32)
    a0, a1, b0, b1 = ua & m, ua >> s32, ub & m, ub >> s32
    p00, p01, p10, p11 = a0 * b0, a0 * b1, a1 * b0, a1 * b1
    mid = (p00 >> s32) + (p01 & m) + (p10 & m)
    hi = p11 + (p01 >> s32) + (p10 >> s32) + (mid >> s32)
    lo = ua * ub
    if kind == "s":  # signed high half = unsigned high half - (a<0)*b - (b<0)*a  (mod 2^64)
        hi = hi - np.where(_s(a, 64) < 0, ub, np.uint64(0)) - np.where(_s(b, 64) < 0, ua, np.uint64(0))
    return hi, lo


def mul_reference(a: int, b: int, kind: str, w: int) -> tuple[int, int]:
    """Plain-integer twin of the 2w-bit product: (hi, lo) w-bit unsigned halves."""
    def val(x):
        x &= (1 << w) - 1
        return x - (1 << w) if kind == "s" and x >> (w - 1) else x
    t = (val(a) * val(b)) % (1 << (2 * w))
    return t >> w, t & ((1 << w) - 1)


@register("mul", "mad")
def _build_mul(op: Op, arch: str) -> Handler:
    if _is_float(op):
        return _floating().build(op, arch)
    if len(op.types) != 1:
        raise unsupported(op, "expects one type")
    kind, w = _int_type(op, op.types[0])
    mods = _mods(op, {"lo", "hi", "wide", "sat"})
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

    def fn(a, b, c=None):
        hi, lo = _mul_full(a, b, kind, w)
        if part == "wide":
            t = (hi << np.uint64(w)) | lo
        else:
            t = hi if part == "hi" else lo
        if mad:
            if sat:
                r = _s(t, 32) + _s(c, 32)
                return (_out(np.clip(r, -(2**31), 2**31 - 1), 32),)
            t = t + _u(c, dw)
        return (_out(t, dw),)

    src = (op.types[0],) * 2 + ((dtype,) if mad else ())
    return _alu(fn, (dtype,), src, isa("integer-arithmetic", op.opcode))


# ----------------------------------------------------------------------------------------------
# div / rem / abs / neg / min / max


@register("div", "rem")
def _build_div(op: Op, arch: str) -> Handler:
    if _is_float(op):
        return _floating().build(op, arch)
    kind, w = _int_type(op, op.types[0])
    _mods(op, set())
    is_div = op.opcode == "div"

    def fn(a, b):
        va, vb = _val(a, kind, w), _val(b, kind, w)
        zero = vb == 0
        safe = np.where(zero, 1, vb).astype(va.dtype)
        if kind == "s":  # C semantics: quotient truncated toward zero, remainder takes a's sign
            q = np.abs(va) // np.abs(safe) * np.where((va < 0) != (safe < 0), -1, 1)
            r = va - q * safe
        else:
            q, r = va // safe, va % safe
        res = np.where(zero, np.int64(-1) if kind == "s" else np.uint64((1 << w) - 1), q) if is_div \
            else np.where(zero, va, r)
        return (_out(res, w),)

    return _alu(fn, op.types, op.types * 2, isa("integer-arithmetic", op.opcode))


@register("abs", "neg")
def _build_absneg(op: Op, arch: str) -> Handler:
    if _is_float(op):
        return _floating().build(op, arch)
    kind, w = _int_type(op, op.types[0])
    if kind != "s":
        raise unsupported(op, "integer abs/neg are defined for signed types only")
    _mods(op, set())
    neg = op.opcode == "neg"

    def fn(a):
        v = _s(a, w)
        return (_out(-v if neg else np.abs(v), w),)

    return _alu(fn, op.types, op.types, isa("integer-arithmetic", op.opcode))


@register("min", "max")
def _build_minmax(op: Op, arch: str) -> Handler:
    if _is_float(op):
        return _floating().build(op, arch)
    t = op.types[0]
    mods = _mods(op, {"relu"})
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
                r = pick(_val(_u(a, 32) >> sh, kind, 16), _val(_u(b, 32) >> sh, kind, 16))
                if mods:
                    r = np.maximum(r, 0)
                out |= _u(_out(r, 16), 16) << sh
            return (out.astype(np.uint32),)

        return _alu(fn2, (t,), (t, t), isa("integer-arithmetic", op.opcode))
    kind, w = _int_type(op, t)
    if mods and t != "s32":
        raise unsupported(op, ".relu applies to s16x2/s32 only")

    def fn(a, b):
        r = pick(_val(a, kind, w), _val(b, kind, w))
        if mods:
            r = np.maximum(r, 0)
        return (_out(r, w),)

    return _alu(fn, (t,), (t, t), isa("integer-arithmetic", op.opcode))


# ----------------------------------------------------------------------------------------------
# popc / clz / brev / bfind / dp4a / dp2a


def _bitwidth_type(op: Op) -> int:
    t = op.types[0] if op.types else ""
    if t not in ("b32", "b64"):
        raise unsupported(op, "type must be .b32 or .b64")
    return int(t[1:])


def _popcount(u: np.ndarray) -> np.ndarray:
    u = u.astype(np.uint64)
    return np.bitwise_count(u).astype(np.uint64) if hasattr(np, "bitwise_count") else np.array(
        [bin(int(x)).count("1") for x in u.ravel()], np.uint64).reshape(u.shape)


def _bit_length(u: np.ndarray) -> np.ndarray:
    """Number of significant bits of each uint64 (0 for 0), exact for all 64-bit values."""
    u = u.astype(np.uint64)
    n = np.zeros(u.shape, np.uint64)
    for sh in (32, 16, 8, 4, 2, 1):
        big = (u >> np.uint64(sh)) != 0
        n = n + np.where(big, np.uint64(sh), np.uint64(0))
        u = np.where(big, u >> np.uint64(sh), u)
    return n + (u != 0).astype(np.uint64)


@register("popc", "clz", "brev")
def _build_bitcount(op: Op, arch: str) -> Handler:
    w = _bitwidth_type(op)
    _mods(op, set())
    name = op.opcode

    def fn(a):
        u = _u(a, w)
        if name == "popc":
            return (_out(_popcount(u), 32),)
        if name == "clz":
            return (_out(np.uint64(w) - _bit_length(u), 32),)
        r = np.zeros(u.shape, np.uint64)
        for i in range(w):
            r |= ((u >> np.uint64(i)) & np.uint64(1)) << np.uint64(w - 1 - i)
        return (_out(r, w),)

    dst = op.types if name == "brev" else ("u32",)
    sec = isa("integer-arithmetic", name)
    return _alu(fn, dst, op.types, sec)


@register("bfind")
def _build_bfind(op: Op, arch: str) -> Handler:
    kind, w = _int_type(op, op.types[0])
    if kind == "b":
        raise unsupported(op, "type must be .u32, .s32, .u64 or .s64")
    mods = _mods(op, {"shiftamt"})

    def fn(a):
        u = _u(a, w)
        if kind == "s":  # most significant non-sign bit: of ~a for negative a
            u = np.where(_s(a, w) < 0, ~u & np.uint64((1 << w) - 1 if w < 64 else 2**64 - 1), u)
        n = _bit_length(u)
        pos = n.astype(np.int64) - 1
        if "shiftamt" in mods:
            pos = np.where(n == 0, -1, (w - 1) - pos)
        return (_out(np.where(n == 0, np.int64(-1), pos), 32),)

    return _alu(fn, ("u32",), op.types, isa("integer-arithmetic", "bfind"))


@register("dp4a", "dp2a")
def _build_dp(op: Op, arch: str) -> Handler:
    if len(op.types) != 2 or any(t not in ("u32", "s32") for t in op.types):
        raise unsupported(op, "types must be .u32/.s32 for a and b")
    mods = _mods(op, {"lo", "hi"})
    ka, kb = op.types[0][0], op.types[1][0]
    signed = "s" in (ka, kb)
    dst = "s32" if signed else "u32"
    if op.opcode == "dp2a" and len(mods) != 1:
        raise unsupported(op, "dp2a needs .lo or .hi")

    def fn(a, b, c):
        acc = _val(c, dst[0], 32).astype(np.int64)
        if op.opcode == "dp4a":
            for i in range(4):
                acc = acc + _val(_u(a, 32) >> np.uint64(8 * i), ka, 8) * _val(_u(b, 32) >> np.uint64(8 * i), kb, 8)
        else:
            base = 2 if "hi" in mods else 0
            for i in range(2):
                acc = acc + (_val(_u(a, 32) >> np.uint64(16 * i), ka, 16)
                             * _val(_u(b, 32) >> np.uint64(8 * (base + i)), kb, 8))
        return (_out(acc, 32),)

    return _alu(fn, (dst,), (op.types[0], op.types[1], dst), isa("integer-arithmetic", op.opcode))


# ----------------------------------------------------------------------------------------------
# bit fields


def bfe(a: np.ndarray, pos: np.ndarray, length: np.ndarray, *, signed: bool, width: int) -> np.ndarray:
    """``bfe.{u,s}{32,64}``: a (width-bit unsigned bits), pos/length uint32 (only ``& 0xff`` counts).

    Returns width-bit unsigned bits: bit i = a[pos+i] for i < len and pos+i <= msb, else the sign bit
    (a[min(pos+len-1, msb)] for signed types with len > 0, otherwise 0).
    """
    msb = width - 1
    u = _u(a, width)
    p = _u(pos, 32) & np.uint64(0xFF)
    n = _u(length, 32) & np.uint64(0xFF)
    p_in = np.minimum(p, np.uint64(63))
    field = u >> p_in
    field = np.where(p > np.uint64(msb), np.uint64(0), field)
    avail = np.where(p > np.uint64(msb), np.uint64(0), np.uint64(msb + 1) - p)  # bits that exist
    take = np.minimum(n, avail)
    mask = np.where(take >= np.uint64(64), np.uint64(2**64 - 1),
                    (np.uint64(1) << np.minimum(take, np.uint64(63))) - np.uint64(1))
    out = field & mask
    if signed:
        sbit_pos = np.minimum(p + n - np.uint64(1), np.uint64(msb))
        sbit = np.where(n == 0, np.uint64(0), (u >> np.minimum(sbit_pos, np.uint64(63))) & np.uint64(1))
        fill = np.where(sbit == 1, ~mask, np.uint64(0))
        out = out | fill
    return _out(out, width)


def bfe_reference(a: int, pos: int, length: int, *, signed: bool, width: int) -> int:
    """Plain-loop twin of :func:`bfe`, transcribed from the ISA pseudocode (one value)."""
    msb = width - 1
    pos, length = pos & 0xFF, length & 0xFF
    bit = lambda i: (a >> i) & 1  # noqa: E731
    sbit = 0 if (not signed or length == 0) else bit(min(pos + length - 1, msb))
    d = 0
    for i in range(msb + 1):
        d |= (bit(pos + i) if (i < length and pos + i <= msb) else sbit) << i
    return d


def bfi(a: np.ndarray, b: np.ndarray, pos: np.ndarray, length: np.ndarray, *, width: int) -> np.ndarray:
    """``bfi.b{32,64} f, a, b, c, d``: b with bits [pos, pos+len) replaced by the low bits of a.

    pos, length uint32 (``& 0xff``); nothing is written past the msb; returns width-bit bits.
    """
    msb = width - 1
    ua, ub = _u(a, width), _u(b, width)
    p = _u(pos, 32) & np.uint64(0xFF)
    n = _u(length, 32) & np.uint64(0xFF)
    avail = np.where(p > np.uint64(msb), np.uint64(0), np.uint64(msb + 1) - p)
    take = np.minimum(n, avail)
    low = np.where(take >= np.uint64(64), np.uint64(2**64 - 1),
                   (np.uint64(1) << np.minimum(take, np.uint64(63))) - np.uint64(1))
    sh = np.minimum(p, np.uint64(63))
    mask = np.where(take == 0, np.uint64(0), low << sh)
    return _out((ub & ~mask) | ((ua << sh) & mask), width)


def bfi_reference(a: int, b: int, pos: int, length: int, *, width: int) -> int:
    """Plain-loop twin of :func:`bfi`, transcribed from the ISA pseudocode (one value)."""
    msb = width - 1
    pos, length = pos & 0xFF, length & 0xFF
    f = b
    i = 0
    while i < length and pos + i <= msb:
        f = (f & ~(1 << (pos + i))) | (((a >> i) & 1) << (pos + i))
        i += 1
    return f


@register("bfe")
def _build_bfe(op: Op, arch: str) -> Handler:
    kind, w = _int_type(op, op.types[0])
    if w == 16 or kind == "b":
        raise unsupported(op, "type must be .u32, .s32, .u64 or .s64")
    _mods(op, set())
    return _alu(lambda a, b, c: (bfe(a, b, c, signed=kind == "s", width=w),), op.types,
                (op.types[0], "u32", "u32"), isa("integer-arithmetic", "bfe"))


@register("bfi")
def _build_bfi(op: Op, arch: str) -> Handler:
    if op.types not in (("b32",), ("b64",)):
        raise unsupported(op, "type must be .b32 or .b64")
    w = int(op.types[0][1:])
    _mods(op, set())
    return _alu(lambda a, b, c, d: (bfi(a, b, c, d, width=w),), op.types,
                (op.types[0], op.types[0], "u32", "u32"), isa("integer-arithmetic", "bfi"))


# ----------------------------------------------------------------------------------------------
# shifts


@register("shl", "shr")
def _build_shift(op: Op, arch: str) -> Handler:
    kind, w = _int_type(op, op.types[0])
    if op.opcode == "shl" and kind != "b":
        raise unsupported(op, "shl takes .b16/.b32/.b64")
    _mods(op, set())
    left = op.opcode == "shl"

    def fn(a, b):
        n = np.minimum(_u(b, 32), np.uint64(w))  # amounts above the width clamp to the width
        if left:
            r = np.where(n >= 64, np.uint64(0), _u(a, w) << np.minimum(n, np.uint64(63)))
            return (_out(r, w),)
        if kind == "s":
            return (_out(_s(a, w) >> np.minimum(n, np.uint64(63)).astype(np.int64), w),)
        return (_out(np.where(n >= 64, np.uint64(0), _u(a, w) >> np.minimum(n, np.uint64(63))), w),)

    return _alu(fn, op.types, (op.types[0], "u32"), isa("logic-and-shift", op.opcode))


@register("shf")
def _build_shf(op: Op, arch: str) -> Handler:
    if op.types != ("b32",):
        raise unsupported(op, "type must be .b32")
    mods = _mods(op, {"l", "r", "clamp", "wrap"})
    if len(mods & {"l", "r"}) != 1 or len(mods & {"clamp", "wrap"}) != 1:
        raise unsupported(op, "needs one of .l/.r and one of .clamp/.wrap")
    left, clamp = "l" in mods, "clamp" in mods

    def fn(a, b, c):
        n = np.minimum(_u(c, 32), np.uint64(32)) if clamp else _u(c, 32) & np.uint64(31)
        v = (_u(b, 32) << np.uint64(32)) | _u(a, 32)  # 64-bit {b, a}
        if left:
            return (_out((v << n) >> np.uint64(32), 32),)
        return (_out(v >> n, 32),)

    return _alu(fn, ("b32",), ("b32", "b32", "u32"), isa("logic-and-shift", "shf"))


# ----------------------------------------------------------------------------------------------
# logic


@register("and", "or", "xor", "not", "cnot")
def _build_logic(op: Op, arch: str) -> Handler:
    t = op.types[0] if len(op.types) == 1 else ""
    _mods(op, set())
    name = op.opcode
    sec = isa("logic-and-shift", name)
    if t == "pred" and name != "cnot":
        f = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}.get(name)
        if name == "not":
            return _alu(lambda a: (np.logical_not(a),), ("pred",), ("pred",), sec)
        return _alu(lambda a, b: (f(a, b),), ("pred",), ("pred", "pred"), sec)
    if t not in ("b16", "b32", "b64"):
        raise unsupported(op, "type must be .pred, .b16, .b32 or .b64")
    w = int(t[1:])
    if name == "not":
        return _alu(lambda a: (_out(~_u(a, w), w),), (t,), (t,), sec)
    if name == "cnot":
        return _alu(lambda a: (_out((_u(a, w) == 0).astype(np.uint64), w),), (t,), (t,), sec)
    f = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[name]
    return _alu(lambda a, b: (_out(f(_u(a, w), _u(b, w)), w),), (t,), (t, t), sec)


def lop3(a: np.ndarray, b: np.ndarray, c: np.ndarray, imm_lut: int) -> np.ndarray:
    """``lop3.b32``: uint32 a, b, c (broadcastable), immLut in [0, 256). Returns uint32.

    Vectorised as a sum of minterms: for every index k = 4·a_i + 2·b_i + c_i with immLut bit k set,
    OR in the bits where (a, b, c) match k.
    """
    ua, ub, uc = _u(a, 32), _u(b, 32), _u(c, 32)
    full = np.uint64(0xFFFFFFFF)
    out = np.zeros(np.broadcast_shapes(ua.shape, ub.shape, uc.shape), np.uint64)
    for k in range(8):
        if (imm_lut >> k) & 1:
            ta = ua if k & 4 else ua ^ full
            tb = ub if k & 2 else ub ^ full
            tc = uc if k & 1 else uc ^ full
            out |= ta & tb & tc
    return out.astype(np.uint32)


def lop3_reference(a: int, b: int, c: int, imm_lut: int) -> int:
    """Plain-loop twin of :func:`lop3`: bit i of d = bit (4·a_i + 2·b_i + c_i) of immLut."""
    d = 0
    for i in range(32):
        k = 4 * ((a >> i) & 1) + 2 * ((b >> i) & 1) + ((c >> i) & 1)
        d |= ((imm_lut >> k) & 1) << i
    return d


@register("lop3")
def _build_lop3(op: Op, arch: str) -> Handler:
    if op.types != ("b32",):
        raise unsupported(op, "type must be .b32")
    mods = _mods(op, {"or", "and"})
    boolop = next(iter(mods), None)

    def fn(a, b, c, lut, q=None):
        arr = np.asarray(lut)
        imm = int(arr.flat[0])
        if not 0 <= imm < 256 or (arr.ndim and not (arr == arr.flat[0]).all()):
            raise unsupported(op, f"immLut must be one constant in [0, 256); got {arr.ravel()[:4].tolist()}")
        d = lop3(a, b, c, imm)
        if boolop is None:
            return (d,)
        nz = d != 0
        return d, (np.logical_or(nz, q) if boolop == "or" else np.logical_and(nz, q))

    dst = ("b32",) if boolop is None else ("b32", "pred")
    src = ("b32", "b32", "b32", "b32") + (("pred",) if boolop else ())
    return _alu(fn, dst, src, isa("logic-and-shift", "lop3"))


def prmt(a: np.ndarray, b: np.ndarray, c: np.ndarray, mode: str | None = None) -> np.ndarray:
    """``prmt.b32{.mode} d, a, b, c``: uint32 a, b, c (broadcastable) -> uint32 d.

    Generic form: selector nibble j of c picks byte ``n & 7`` of {b, a} (a = bytes 0..3), and bit 3
    replicates that byte's sign bit. Modes: :data:`PRMT_MODES` indexed by ``c & 3`` (no sign bits).
    """
    src = (_u(b, 32) << np.uint64(32)) | _u(a, 32)
    cc = _u(c, 32)
    if mode is None:
        ctl = [(cc >> np.uint64(4 * j)) & np.uint64(0xF) for j in range(4)]
    else:
        table = np.array(PRMT_MODES[mode], np.uint64)
        sel = table[(cc & np.uint64(3)).astype(np.int64)]
        ctl = [(sel >> np.uint64(4 * j)) & np.uint64(0xF) for j in range(4)]
    out = np.zeros(np.broadcast_shapes(src.shape, cc.shape), np.uint64)
    for j in range(4):
        byte = (src >> ((ctl[j] & np.uint64(7)) * np.uint64(8))) & np.uint64(0xFF)
        if mode is None:
            byte = np.where((ctl[j] & np.uint64(8)) != 0,
                            np.where(byte & np.uint64(0x80), np.uint64(0xFF), np.uint64(0)), byte)
        out |= byte << np.uint64(8 * j)
    return out.astype(np.uint32)


def prmt_reference(a: int, b: int, c: int, mode: str | None = None) -> int:
    """Plain-loop twin of :func:`prmt`, from the ISA pseudocode and mode table (one value)."""
    src = [((b << 32 | a) >> (8 * k)) & 0xFF for k in range(8)]
    d = 0
    for j in range(4):
        if mode is None:
            n = (c >> (4 * j)) & 0xF
            byte = src[n & 7]
            if n & 8:
                byte = 0xFF if byte & 0x80 else 0
        else:
            byte = src[(PRMT_MODES[mode][c & 3] >> (4 * j)) & 0xF]
        d |= byte << (8 * j)
    return d


@register("prmt")
def _build_prmt(op: Op, arch: str) -> Handler:
    if op.types != ("b32",):
        raise unsupported(op, "type must be .b32")
    mods = _mods(op, set(PRMT_MODES))
    if len(mods) > 1:
        raise unsupported(op, "at most one mode")
    mode = next(iter(mods), None)
    return _alu(lambda a, b, c: (prmt(a, b, c, mode),), ("b32",), ("b32", "b32", "b32"), isa("data-movement-and-conversion", "prmt"))


# ----------------------------------------------------------------------------------------------
# setp / selp

_INT_CMP = {"eq", "ne", "lt", "le", "gt", "ge", "lo", "ls", "hi", "hs"}
_FLOAT_CMP = {"eq", "ne", "lt", "le", "gt", "ge", "equ", "neu", "ltu", "leu", "gtu", "geu", "num", "nan"}
_BOOL = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}


def _compare(cmp: str, x, y):
    return {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
            "gt": np.greater, "ge": np.greater_equal}[cmp](x, y)


@register("setp")
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
        fl = _floating()
        ftz = "ftz" in op.mods

        def raw(a, b):
            x, y = fl.decode(a, t, ftz=ftz), fl.decode(b, t, ftz=ftz)
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
        kind, w = _int_type(op, t)
        if cmp not in _INT_CMP or "ftz" in op.mods:
            raise unsupported(op, f".{cmp} is not an integer comparison")

        def raw(a, b):
            if cmp in ("lo", "ls", "hi", "hs"):
                x, y = _u(a, w), _u(b, w)
                return _compare({"lo": "lt", "ls": "le", "hi": "gt", "hs": "ge"}[cmp], x, y)
            return _compare(cmp, _val(a, kind, w), _val(b, kind, w))
        sec = isa("comparison-and-selection", "setp")

    def fn(a, b, c=None):
        r = np.asarray(raw(a, b), bool)
        if boolop is None:
            return r, ~r
        return boolop(r, c), boolop(~r, c)

    src = (t, t) + (("pred",) if boolop else ())
    return _alu(fn, ("pred", "pred"), src, sec)


@register("selp")
def _build_selp(op: Op, arch: str) -> Handler:
    t = op.types[0] if len(op.types) == 1 else ""
    widths = {**{k: w for k, (_, w) in _INT_TYPES.items()}, "f32": 32, "f64": 64, "f16": 16, "bf16": 16}
    if t not in widths:
        raise unsupported(op, "type must be a 16/32/64-bit integer, .f16, .bf16, .f32 or .f64")
    _mods(op, set())
    w = widths[t]
    return _alu(lambda a, b, c: (_out(np.where(c, _u(a, w), _u(b, w)), w),), (t,), (t, t, "pred"),
                isa("comparison-and-selection", "selp"))


# ----------------------------------------------------------------------------------------------
# sad / slct


@register("sad")
def _build_sad(op: Op, arch: str) -> Handler:
    kind, w = _int_type(op, op.types[0] if len(op.types) == 1 else "")
    if kind == "b":
        raise unsupported(op, "type must be .u16/.u32/.u64/.s16/.s32/.s64")
    _mods(op, set())

    def fn(a, b, c):  # d = c + |a - b| (the difference is exact in the wider integer), wrap
        va, vb = _val(a, kind, w), _val(b, kind, w)
        diff = np.where(va >= vb, va - vb, vb - va)
        return (_out(_u(diff, w) + _u(c, w), w),)

    return _alu(fn, op.types, op.types * 3, isa("integer-arithmetic", "sad"))


@register("slct")
def _build_slct(op: Op, arch: str) -> Handler:
    if len(op.types) != 2 or op.types[1] not in ("s32", "f32"):
        raise unsupported(op, "slct needs a data type and a .s32 or .f32 selector type")
    t, ct = op.types
    widths = {**{k: w for k, (_, w) in _INT_TYPES.items()}, "f32": 32, "f64": 64}
    if t not in widths:
        raise unsupported(op, "data type must be a 16/32/64-bit integer, .f32 or .f64")
    mods = _mods(op, {"ftz"} if ct == "f32" else set())
    w = widths[t]

    def fn(a, b, c):  # d = c >= 0 ? a : b (a NaN selector compares false: b)
        if ct == "s32":
            sel = _s(c, 32) >= 0
        else:
            sel = _floating().decode(c, "f32", ftz="ftz" in mods) >= 0
        return (_out(np.where(sel, _u(a, w), _u(b, w)), w),)

    return _alu(fn, (t,), (t, t, ct), isa("comparison-and-selection", "slct"))
