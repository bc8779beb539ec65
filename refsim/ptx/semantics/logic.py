"""Bit-manipulation, shift and logic instructions of PTX, as pure NumPy handlers.

Spec
----
counting        popc/clz/brev/bfind (``.shiftamt``; no bit found -> 0xFFFFFFFF).
bit fields      bfe/bfi: position and length are ``& 0xff``; bfe length 0 -> 0; bits past the msb read
                as the field's sign bit (signed) or 0; bfi writes nothing past the msb.
shifts          shl/shr: amount is an unsigned 32-bit register; amounts above the width clamp to the
                width (shl/shr.u -> 0, shr.s -> sign fill). shf.l/shf.r ``.clamp``: min(c, 32);
                ``.wrap``: c & 31.
logic           and/or/xor/not/cnot on pred/b16/b32/b64; lop3 ``immLut`` = F(0xF0, 0xCC, 0xAA):
                bit i of the result is bit (4·a_i + 2·b_i + c_i) of immLut; ``.or/.and`` BoolOp gives
                ``p = (d != 0) op q``. prmt: byte j of d = byte ``ctl_j & 7`` of {b, a} (sign-replicated
                if ``ctl_j & 8``, generic form only); the modes use the ISA's fixed selector table below.
source          PTX ISA 9.x, "Integer Arithmetic Instructions" (popc, clz, bfind, brev, bfe, bfi),
                "Logic and Shift Instructions", "Data Movement and Conversion Instructions: prmt";
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

from refsim.ptx.semantics import expr
from refsim.ptx.semantics.cexpr import cast
from refsim.ptx.semantics.handler import Handler, Op, isa, unsupported
from refsim.ptx.semantics.words import INT_TYPES, alu, check_mods, int_type, sval, ubits, wrap

__all__ = ["PRMT_MODES", "lop3", "lop3_reference", "prmt", "prmt_reference", "bfe", "bfe_reference",
           "bfi", "bfi_reference", "BUILDERS", "C_FORMS"]

PRMT_MODES = {
    "f4e": (0x3210, 0x4321, 0x5432, 0x6543),
    "b4e": (0x5670, 0x6701, 0x7012, 0x0123),
    "rc8": (0x0000, 0x1111, 0x2222, 0x3333),
    "ecl": (0x3210, 0x3211, 0x3222, 0x3333),
    "ecr": (0x0000, 0x1110, 0x2210, 0x3210),
    "rc16": (0x1010, 0x3232, 0x1010, 0x3232),
}


# ----------------------------------------------------------------------------------------------
# popc / clz / brev / bfind


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


def _build_bitcount(op: Op, arch: str) -> Handler:
    w = _bitwidth_type(op)
    check_mods(op, set())
    name = op.opcode

    def fn(a):
        u = ubits(a, w)
        if name == "popc":
            return (wrap(_popcount(u), 32),)
        if name == "clz":
            return (wrap(np.uint64(w) - _bit_length(u), 32),)
        r = np.zeros(u.shape, np.uint64)
        for i in range(w):
            r |= ((u >> np.uint64(i)) & np.uint64(1)) << np.uint64(w - 1 - i)
        return (wrap(r, w),)

    dst = op.types if name == "brev" else ("u32",)
    sec = isa("integer-arithmetic", name)
    return alu(fn, dst, op.types, sec)


def _build_bfind(op: Op, arch: str) -> Handler:
    kind, w = int_type(op, op.types[0])
    if kind == "b":
        raise unsupported(op, "type must be .u32, .s32, .u64 or .s64")
    mods = check_mods(op, {"shiftamt"})

    def fn(a):
        u = ubits(a, w)
        if kind == "s":  # most significant non-sign bit: of ~a for negative a
            u = np.where(sval(a, w) < 0, ~u & np.uint64((1 << w) - 1 if w < 64 else 2**64 - 1), u)
        n = _bit_length(u)
        pos = n.astype(np.int64) - 1
        if "shiftamt" in mods:
            pos = np.where(n == 0, -1, (w - 1) - pos)
        return (wrap(np.where(n == 0, np.int64(-1), pos), 32),)

    return alu(fn, ("u32",), op.types, isa("integer-arithmetic", "bfind"))


# ----------------------------------------------------------------------------------------------
# bit fields


def bfe(a: np.ndarray, pos: np.ndarray, length: np.ndarray, *, signed: bool, width: int) -> np.ndarray:
    """``bfe.{u,s}{32,64}``: a (width-bit unsigned bits), pos/length uint32 (only ``& 0xff`` counts).

    Returns width-bit unsigned bits: bit i = a[pos+i] for i < len and pos+i <= msb, else the sign bit
    (a[min(pos+len-1, msb)] for signed types with len > 0, otherwise 0).
    """
    msb = width - 1
    u = ubits(a, width)
    p = ubits(pos, 32) & np.uint64(0xFF)
    n = ubits(length, 32) & np.uint64(0xFF)
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
    return wrap(out, width)


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
    ua, ub = ubits(a, width), ubits(b, width)
    p = ubits(pos, 32) & np.uint64(0xFF)
    n = ubits(length, 32) & np.uint64(0xFF)
    avail = np.where(p > np.uint64(msb), np.uint64(0), np.uint64(msb + 1) - p)
    take = np.minimum(n, avail)
    low = np.where(take >= np.uint64(64), np.uint64(2**64 - 1),
                   (np.uint64(1) << np.minimum(take, np.uint64(63))) - np.uint64(1))
    sh = np.minimum(p, np.uint64(63))
    mask = np.where(take == 0, np.uint64(0), low << sh)
    return wrap((ub & ~mask) | ((ua << sh) & mask), width)


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


def _build_bfe(op: Op, arch: str) -> Handler:
    kind, w = int_type(op, op.types[0])
    if w == 16 or kind == "b":
        raise unsupported(op, "type must be .u32, .s32, .u64 or .s64")
    check_mods(op, set())
    return alu(lambda a, b, c: (bfe(a, b, c, signed=kind == "s", width=w),), op.types,
                (op.types[0], "u32", "u32"), isa("integer-arithmetic", "bfe"))


def _build_bfi(op: Op, arch: str) -> Handler:
    if op.types not in (("b32",), ("b64",)):
        raise unsupported(op, "type must be .b32 or .b64")
    w = int(op.types[0][1:])
    check_mods(op, set())
    return alu(lambda a, b, c, d: (bfi(a, b, c, d, width=w),), op.types,
                (op.types[0], op.types[0], "u32", "u32"), isa("integer-arithmetic", "bfi"))


# ----------------------------------------------------------------------------------------------


# ----------------------------------------------------------------------------------------------
# shifts


def _build_shift(op: Op, arch: str) -> Handler:
    kind, w = int_type(op, op.types[0])
    if op.opcode == "shl" and kind != "b":
        raise unsupported(op, "shl takes .b16/.b32/.b64")
    check_mods(op, set())
    left = op.opcode == "shl"

    def fn(a, b):
        n = np.minimum(ubits(b, 32), np.uint64(w))  # amounts above the width clamp to the width
        if left:
            r = np.where(n >= 64, np.uint64(0), ubits(a, w) << np.minimum(n, np.uint64(63)))
            return (wrap(r, w),)
        if kind == "s":
            return (wrap(sval(a, w) >> np.minimum(n, np.uint64(63)).astype(np.int64), w),)
        return (wrap(np.where(n >= 64, np.uint64(0), ubits(a, w) >> np.minimum(n, np.uint64(63))), w),)

    return alu(fn, op.types, (op.types[0], "u32"), isa("logic-and-shift", op.opcode))


def _build_shf(op: Op, arch: str) -> Handler:
    if op.types != ("b32",):
        raise unsupported(op, "type must be .b32")
    mods = check_mods(op, {"l", "r", "clamp", "wrap"})
    if len(mods & {"l", "r"}) != 1 or len(mods & {"clamp", "wrap"}) != 1:
        raise unsupported(op, "needs one of .l/.r and one of .clamp/.wrap")
    left, clamp = "l" in mods, "clamp" in mods

    def fn(a, b, c):
        n = np.minimum(ubits(c, 32), np.uint64(32)) if clamp else ubits(c, 32) & np.uint64(31)
        v = (ubits(b, 32) << np.uint64(32)) | ubits(a, 32)  # 64-bit {b, a}
        if left:
            return (wrap((v << n) >> np.uint64(32), 32),)
        return (wrap(v >> n, 32),)

    return alu(fn, ("b32",), ("b32", "b32", "u32"), isa("logic-and-shift", "shf"))


# ----------------------------------------------------------------------------------------------
# logic


def _build_logic(op: Op, arch: str) -> Handler:
    t = op.types[0] if len(op.types) == 1 else ""
    check_mods(op, set())
    name = op.opcode
    sec = isa("logic-and-shift", name)
    if t == "pred" and name != "cnot":
        f = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}.get(name)
        if name == "not":
            return alu(lambda a: (np.logical_not(a),), ("pred",), ("pred",), sec)
        return alu(lambda a, b: (f(a, b),), ("pred",), ("pred", "pred"), sec)
    if t not in ("b16", "b32", "b64"):
        raise unsupported(op, "type must be .pred, .b16, .b32 or .b64")
    w = int(t[1:])
    e = _BITWISE[name]
    return alu(expr.numpy_fn(e, w), (t,), (t,) * e.sources(), sec)


#: and/or/xor/not/cnot on .b16/.b32/.b64, defined once for both executors (refsim.ptx.semantics.expr)
_BITWISE = {"and": expr.src(0) & expr.src(1), "or": expr.src(0) | expr.src(1), "xor": expr.src(0) ^ expr.src(1),
            "not": ~expr.src(0), "cnot": expr.compare("==", expr.src(0), expr.ZERO)}


def lop3(a: np.ndarray, b: np.ndarray, c: np.ndarray, imm_lut: int) -> np.ndarray:
    """``lop3.b32``: uint32 a, b, c (broadcastable), immLut in [0, 256). Returns uint32.

    Vectorised as a sum of minterms: for every index k = 4·a_i + 2·b_i + c_i with immLut bit k set,
    OR in the bits where (a, b, c) match k.
    """
    ua, ub, uc = ubits(a, 32), ubits(b, 32), ubits(c, 32)
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


def _build_lop3(op: Op, arch: str) -> Handler:
    if op.types != ("b32",):
        raise unsupported(op, "type must be .b32")
    mods = check_mods(op, {"or", "and"})
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
    return alu(fn, dst, src, isa("logic-and-shift", "lop3"))


def prmt(a: np.ndarray, b: np.ndarray, c: np.ndarray, mode: str | None = None) -> np.ndarray:
    """``prmt.b32{.mode} d, a, b, c``: uint32 a, b, c (broadcastable) -> uint32 d.

    Generic form: selector nibble j of c picks byte ``n & 7`` of {b, a} (a = bytes 0..3), and bit 3
    replicates that byte's sign bit. Modes: :data:`PRMT_MODES` indexed by ``c & 3`` (no sign bits).
    """
    src = (ubits(b, 32) << np.uint64(32)) | ubits(a, 32)
    cc = ubits(c, 32)
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


def _build_prmt(op: Op, arch: str) -> Handler:
    if op.types != ("b32",):
        raise unsupported(op, "type must be .b32")
    mods = check_mods(op, set(PRMT_MODES))
    if len(mods) > 1:
        raise unsupported(op, "at most one mode")
    mode = next(iter(mods), None)
    return alu(lambda a, b, c: (prmt(a, b, c, mode),), ("b32",), ("b32", "b32", "b32"), isa("data-movement-and-conversion", "prmt"))


#: opcode -> handler builder of this family (refsim.ptx.semantics.table assembles the one table)
BUILDERS = {
    "popc": _build_bitcount, "clz": _build_bitcount, "brev": _build_bitcount, "bfind": _build_bfind,
    "bfe": _build_bfe, "bfi": _build_bfi, "shl": _build_shift, "shr": _build_shift, "shf": _build_shf,
    "and": _build_logic, "or": _build_logic, "xor": _build_logic, "not": _build_logic, "cnot": _build_logic,
    "lop3": _build_lop3, "prmt": _build_prmt,
}


# ----------------------------------------------------------------------------------------------
# the C forms of this family (refsim.ptx.semantics.cexpr): what the compiled executor emits for the
# handlers above, form by form; None leaves a form to its handler

#: prmt's mode field as ptx_runtime.h's rt_prmt numbers it
_C_PRMT = {None: 0, "f4e": 1, "b4e": 2, "rc8": 3, "ecl": 4, "ecr": 5, "rc16": 6}


def _c_bitcount(op, s, _):
    w = int(op.types[0][1:])
    if op.opcode == "popc":
        return [(f"((uint32_t)__builtin_popcountll((uint64_t){s[0]}))", 32)]
    if op.opcode == "clz":
        return [(f"((uint32_t)({w} - rt_bitlen64((uint64_t){s[0]})))", 32)]
    return [(f"rt_brev64({s[0]})", 64)] if w == 64 else [(f"rt_brev({s[0]}, 32)", 32)]


def _c_bfind(op, s, _):
    kind, w = INT_TYPES[op.types[0]]
    return [(f"rt_bfind({s[0]}, {int(kind == 's')}, {int('shiftamt' in op.mods)}, {w})", 32)]


def _c_bfe(op, s, _):
    kind, w = INT_TYPES[op.types[0]]
    return [(cast(w, f"rt_bfe({s[0]}, {s[1]}, {s[2]}, {int(kind == 's')}, {w})"), w)]


def _c_bfi(op, s, _):
    w = int(op.types[0][1:])
    return [(cast(w, f"rt_bfi({s[0]}, {s[1]}, {s[2]}, {s[3]}, {w})"), w)]


def _c_shift(op, s, _):
    kind, w = INT_TYPES[op.types[0]]
    f = "rt_shl" if op.opcode == "shl" else ("rt_shr_s" if kind == "s" else "rt_shr_u")
    return [(cast(w, f"{f}({s[0]}, {s[1]}, {w})"), w)]


def _c_shf(op, s, _):
    return [(f"rt_shf({s[0]}, {s[1]}, {s[2]}, {int('l' in op.mods)}, {int('clamp' in op.mods)})", 32)]


def _c_logic(op, s, _):
    t = op.types[0]
    name = op.opcode
    if t == "pred":
        if name == "not":
            return [(f"((uint8_t)!{s[0]})", 1)]
        o = {"and": "&", "or": "|", "xor": "^"}[name]
        return [(f"((uint8_t)({s[0]} {o} {s[1]}))", 1)]
    w = int(t[1:])
    return [(expr.c(_BITWISE[name], w, s), w)]


def _c_lop3(op, s, operands):
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


def _c_prmt(op, s, _):
    mode = next((m for m in op.mods if m in _C_PRMT), None)
    return [(f"rt_prmt({s[0]}, {s[1]}, {s[2]}, {_C_PRMT[mode]})", 32)]


#: opcode -> (the modifiers its C reads, its C form)
C_FORMS = {
    "popc": (set(), _c_bitcount), "clz": (set(), _c_bitcount), "brev": (set(), _c_bitcount),
    "bfind": ({"shiftamt"}, _c_bfind), "bfe": (set(), _c_bfe), "bfi": (set(), _c_bfi), "shl": (set(), _c_shift),
    "shr": (set(), _c_shift), "shf": ({"l", "r", "clamp", "wrap"}, _c_shf), "and": (set(), _c_logic),
    "or": (set(), _c_logic), "xor": (set(), _c_logic), "not": (set(), _c_logic), "cnot": (set(), _c_logic),
    "lop3": ({"or", "and"}, _c_lop3), "prmt": (set(PRMT_MODES), _c_prmt),
}
