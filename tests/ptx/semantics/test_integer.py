"""Conformance tables for the integer arithmetic instructions (refsim.ptx.semantics.integer) and mov
pack/unpack, transcribed from the PTX ISA text.

Sources (PTX ISA 9.x): Integer Arithmetic Instructions: mul/mad (.lo/.hi/.wide), add/sub .sat, div/rem,
min/max, popc/clz/brev/bfind, dp4a, sad; Logic and Shift Instructions: and/not/cnot/xor; Comparison and
Selection Instructions: slct; Data Movement and Conversion Instructions: mov.
"""

from __future__ import annotations

import numpy as np
import pytest

from refsim.ptx import PtxUnsupportedError
from refsim.ptx.semantics import Op, lookup, mov_pack, mov_unpack
from refsim.ptx.semantics import integer

RNG = np.random.default_rng(14)


def run(opcode, mods, types, *srcs):
    return lookup(Op(opcode, tuple(mods), tuple(types))).fn(*srcs)


def u32(*v):
    return np.array([x & 0xFFFFFFFF for x in v], np.uint32)


# ---------------------------------------------------------------------------------------------
# arithmetic against Python integers

INT_TYPES = ["s16", "u16", "s32", "u32", "s64", "u64"]
DT = {16: np.uint16, 32: np.uint32, 64: np.uint64}


def _signed(x, w):
    return x - (1 << w) if x >> (w - 1) else x


def _edge_values(w):
    return [0, 1, 2, (1 << w) - 1, 1 << (w - 1), (1 << (w - 1)) - 1, (1 << (w - 1)) + 1, 3, 0x5A5A5A5A5A5A5A5A & ((1 << w) - 1)]


@pytest.mark.parametrize("t, part", [(t, p) for t in INT_TYPES for p in ("lo", "hi", "wide")
                                     if not (p == "wide" and t.endswith("64"))])  # no 64-bit .wide
def test_mul_and_mad_parts_match_python_integers(t, part):
    w = int(t[1:])
    ev = _edge_values(w)
    a = np.array([x for x in ev for _ in ev] + list(RNG.integers(0, 2**w, 50, dtype=np.uint64)), DT[w])
    b = np.array([y for _ in ev for y in ev] + list(RNG.integers(0, 2**w, 50, dtype=np.uint64)), DT[w])
    dw = 2 * w if part == "wide" else w
    c = RNG.integers(0, 2**dw if dw < 64 else 2**64, a.size, dtype=np.uint64).astype(DT[dw])
    (d,) = run("mul", (part,), (t,), a, b)
    (m,) = run("mad", (part,), (t,), a, b, c)
    for i in range(a.size):
        x, y = int(a[i]), int(b[i])
        if t[0] == "s":
            x, y = _signed(x, w), _signed(y, w)
        prod = (x * y) % (1 << (2 * w))
        want = {"lo": prod & ((1 << w) - 1), "hi": prod >> w, "wide": prod}[part]
        hi, lo = integer.mul_reference(int(a[i]), int(b[i]), t[0], w)
        assert {"lo": lo, "hi": hi, "wide": (hi << w) | lo}[part] == want      # the plain twin agrees
        assert int(d[i]) == want, (t, part, hex(int(a[i])), hex(int(b[i])))
        assert int(m[i]) == (want + int(c[i])) % (1 << dw)


def test_add_sat_s32_saturates_and_plain_add_wraps():
    a, b = u32(0x7FFFFFFF, 0x80000000, 5), u32(1, 0xFFFFFFFF, 0xFFFFFFFE)
    (sat,) = run("add", ("sat",), ("s32",), a, b)
    (wrap,) = run("add", (), ("s32",), a, b)
    assert sat.tolist() == [0x7FFFFFFF, 0x80000000, 3]
    assert wrap.tolist() == [0x80000000, 0x7FFFFFFF, 3]


def test_div_rem_truncate_toward_zero_and_division_by_zero_is_documented():
    a, b = u32(7, (-7) & 0xFFFFFFFF, 7, 0x80000000, 9), u32(2, 2, (-2) & 0xFFFFFFFF, 0xFFFFFFFF, 0)
    (q,) = run("div", (), ("s32",), a, b)
    (r,) = run("rem", (), ("s32",), a, b)
    assert [_signed(int(x), 32) for x in q] == [3, -3, -3, -(2**31), -1]
    assert [_signed(int(x), 32) for x in r] == [1, -1, 1, 0, 9]
    (q,) = run("div", (), ("u32",), u32(7, 7), u32(2, 0))
    assert q.tolist() == [3, 0xFFFFFFFF]


@pytest.mark.parametrize("opcode, t, a, b, want", [
    ("min", "s32", 0xFFFFFFFF, 1, 0xFFFFFFFF), ("min", "u32", 0xFFFFFFFF, 1, 1),
    ("max", "s32", 0xFFFFFFFF, 1, 1), ("max", "u64", 2**63, 1, 2**63),
    ("max", "s16", 0x8000, 0x7FFF, 0x7FFF),
])
def test_min_max_compare_by_signedness(opcode, t, a, b, want):
    dt = DT[int(t[1:])]
    (d,) = run(opcode, (), (t,), np.array([a], dt), np.array([b], dt))
    assert int(d[0]) == want


def test_max_relu_and_packed_halves():
    (d,) = run("max", ("relu",), ("s32",), u32(0xFFFFFFF0), u32(0xFFFFFFFF))
    assert int(d[0]) == 0
    (d,) = run("min", (), ("s16x2",), u32(0x8000_0005), u32(0x0001_0007))
    assert int(d[0]) == 0x8000_0005
    (d,) = run("min", (), ("u16x2",), u32(0x8000_0005), u32(0x0001_0007))
    assert int(d[0]) == 0x0001_0005


def test_popc_clz_brev_bfind_match_python():
    vals = [0, 1, 0x80000000, 0xFFFFFFFF, 0x00F0F000, 0x7FFFFFFF] + [int(x) for x in RNG.integers(0, 2**32, 40)]
    a = np.array(vals, np.uint32)
    (p,), (z,), (r,) = (run(o, (), ("b32",), a) for o in ("popc", "clz", "brev"))
    (fu,) = run("bfind", (), ("u32",), a)
    (fs,) = run("bfind", (), ("s32",), a)
    (sa,) = run("bfind", ("shiftamt",), ("u32",), a)
    for i, v in enumerate(vals):
        assert int(p[i]) == bin(v).count("1")
        assert int(z[i]) == 32 - v.bit_length()
        assert int(r[i]) == int(f"{v:032b}"[::-1], 2)
        assert int(fu[i]) == (v.bit_length() - 1 if v else 0xFFFFFFFF)
        nonsign = (~v & 0xFFFFFFFF) if v >> 31 else v
        assert int(fs[i]) == (nonsign.bit_length() - 1 if nonsign else 0xFFFFFFFF)
        assert int(sa[i]) == (31 - (v.bit_length() - 1) if v else 0xFFFFFFFF)
    (z64,) = run("clz", (), ("b64",), np.array([1, 0, 2**63], np.uint64))
    assert z64.tolist() == [63, 64, 0] and z64.dtype == np.uint32


def test_dp4a_sums_four_byte_products():
    (d,) = run("dp4a", (), ("s32", "u32"), u32(0xFF02_0304 & 0xFFFFFFFF), u32(0x01010101), u32(10))
    assert _signed(int(d[0]), 32) == 10 + 4 + 3 + 2 - 1


# ---------------------------------------------------------------------------------------------
# ---------------------------------------------------------------------------------------------
# logic / mov


def test_logic_ops_on_words_and_predicates():
    (d,) = run("and", (), ("b32",), u32(0xF0F0), u32(0xFF00))
    assert int(d[0]) == 0xF000
    (d,) = run("not", (), ("b16",), np.array([0x00FF], np.uint16))
    assert int(d[0]) == 0xFF00 and d.dtype == np.uint16
    (d,) = run("cnot", (), ("b32",), u32(0, 7))
    assert d.tolist() == [1, 0]
    (p,) = run("xor", (), ("pred",), np.array([True, True]), np.array([True, False]))
    assert p.tolist() == [False, True]


def test_mov_pack_and_unpack_are_inverse_low_part_first():
    lo, hi = np.array([0x1111], np.uint16), np.array([0x2222], np.uint16)
    w = mov_pack([lo, hi], 32)
    assert w.dtype == np.uint32 and int(w[0]) == 0x22221111
    assert [int(x[0]) for x in mov_unpack(w, 32, 2)] == [0x1111, 0x2222]
    d = mov_pack([np.array([1], np.uint32), np.array([2], np.uint32)], 64)
    assert int(d[0]) == 0x0000000200000001


# ---------------------------------------------------------------------------------------------
# refusals name the instruction


@pytest.mark.parametrize("op, fragment", [
    (Op("frobnicate", (), ("b32",)), "frobnicate.b32: opcode 'frobnicate'"),
    (Op("add", ("cc",), ("u16",)), "add.cc.u16: extended-precision arithmetic takes .u32, .s32, .u64 or .s64"),
    (Op("addc", ("sat",), ("s32",)), "addc.sat.s32: modifier(s) .sat"),
    (Op("mad", ("wide", "cc"), ("u32",)), "mad.wide.cc.u32: modifier(s) .wide"),
    (Op("add", ("sat",), ("u32",)), "add.sat.u32: .sat applies to .s32 only"),
    (Op("mul", (), ("s32",)), "mul.s32: needs exactly one of .lo, .hi, .wide"),
    (Op("prmt", ("f4e", "rc8"), ("b32",)), "prmt.f4e.rc8.b32: at most one mode"),
    (Op("div", ("approx",), ("f32",)), "div.approx.f32:"),
    (Op("ex2", ("approx",), ("f32",)), "ex2.approx.f32:"),
    (Op("rsqrt", ("approx",), ("f64",)), "rsqrt.approx.f64:"),
    (Op("sin", ("approx",), ("f32",)), "sin.approx.f32:"),
])
def test_lookup_refuses_unsupported_instructions_naming_them(op, fragment):
    with pytest.raises(PtxUnsupportedError) as err:
        lookup(op)
    assert str(err.value).startswith(str(op)) and fragment in str(err.value)


def test_sad_and_slct():
    (d,) = run("sad", (), ("s32",), u32(-3), u32(4), u32(10))
    assert int(d[0]) == 17
    (d,) = run("sad", (), ("u32",), u32(0xFFFFFFFF), u32(1), u32(0))
    assert int(d[0]) == 0xFFFFFFFE
    (d,) = run("slct", (), ("b32", "s32"), u32(1, 1, 1), u32(2, 2, 2), u32(0, -1, 5))
    assert d.tolist() == [1, 2, 1]
    f = np.array([0.0, -0.0, -1.0, np.nan], np.float32).view(np.uint32)
    (d,) = run("slct", (), ("u32", "f32"), u32(1, 1, 1, 1), u32(2, 2, 2, 2), f)
    assert d.tolist() == [1, 1, 2, 2]


# ---------------------------------------------------------------------------------------------
# extended precision: add.cc addc sub.cc subc mad.cc madc (PTX ISA, Extended-Precision Integer
# Arithmetic Instructions: "d = a + b + CC.CF", "d = a - (b + CC.CF)", "d = t<..> + c + CC.CF"; the carry
# out is the unsigned carry of the addition, the borrow of the subtraction). Worked by hand.

M32, M64 = 2**32 - 1, 2**64 - 1
CARRY_TABLE = [  # (opcode, mods, type, a, b, c, carry in, d, carry out)
    ("add", ("cc",), "u32", M32, 1, None, None, 0, 1),
    ("add", ("cc",), "u32", 0x7FFFFFFF, 1, None, None, 0x80000000, 0),
    ("add", ("cc",), "s32", M32, M32, None, None, 0xFFFFFFFE, 1),          # -1 + -1: unsigned carry
    ("addc", ("cc",), "u32", M32, 0, None, 1, 0, 1),
    ("addc", (), "u32", 0, 0, None, 1, 1, None),
    ("addc", ("cc",), "u32", 5, 6, None, 0, 11, 0),
    ("sub", ("cc",), "u32", 0, 1, None, None, M32, 1),
    ("sub", ("cc",), "u32", 5, 5, None, None, 0, 0),
    ("subc", ("cc",), "u32", 5, 5, None, 1, M32, 1),
    ("subc", (), "u32", 0, M32, None, 1, 0, None),                          # 0 - 2^32
    ("subc", ("cc",), "s32", 7, 2, None, 1, 4, 0),
    ("add", ("cc",), "u64", M64, 1, None, None, 0, 1),
    ("addc", ("cc",), "u64", M64, M64, None, 1, M64, 1),
    ("subc", ("cc",), "u64", 0, M64, None, 1, 0, 1),
    ("sub", ("cc",), "s64", 2**63, 1, None, None, 2**63 - 1, 0),
    ("mad", ("lo", "cc"), "u32", M32, M32, 2, None, 3, 0),                   # t = 0xFFFFFFFE_00000001
    ("mad", ("hi", "cc"), "u32", M32, M32, 2, None, 0, 1),
    ("madc", ("hi",), "u32", M32, M32, 1, 1, 0, None),
    ("madc", ("hi", "cc"), "u32", M32, M32, 1, 1, 0, 1),
    ("mad", ("hi", "cc"), "s32", M32, M32, M32, None, M32, 0),              # (-1)(-1) = 1: hi 0
    ("mad", ("hi", "cc"), "s32", 0xFFFFFFFE, 3, 1, None, 0, 1),             # (-2)(3): hi 0xFFFFFFFF
    ("madc", ("lo", "cc"), "u64", 2**63, 2, M64, 1, 0, 1),                  # lo(2^64) = 0
    ("madc", ("hi", "cc"), "s64", M64, 2**63, 0, 0, 0, 0),                  # (-1)(-2^63) = 2^63: hi 0
]


@pytest.mark.parametrize("opcode, mods, t, a, b, c, cin, d, cout", CARRY_TABLE)
def test_carry_instructions_match_the_hand_worked_isa_table(opcode, mods, t, a, b, c, cin, d, cout):
    dt = {32: np.uint32, 64: np.uint64}[int(t[1:])]
    srcs = [np.array([a], dt), np.array([b], dt)] + ([np.array([c], dt)] if c is not None else [])
    srcs += [np.array([bool(cin)])] if cin is not None else []
    out = run(opcode, mods, (t,), *srcs)
    assert int(out[0][0]) == d and out[0].dtype == dt
    if cout is None:
        assert len(out) == 1
    else:
        assert bool(out[1][0]) is bool(cout)


@pytest.mark.parametrize("opcode, mods", [("add", ("cc",)), ("addc", ()), ("addc", ("cc",)), ("sub", ("cc",)),
                                          ("subc", ("cc",)), ("mad", ("lo", "cc")), ("mad", ("hi", "cc")),
                                          ("madc", ("lo",)), ("madc", ("hi", "cc"))])
@pytest.mark.parametrize("t", ["u32", "s32", "u64", "s64"])
def test_carry_instructions_match_their_plain_integer_twin(opcode, mods, t):
    w = int(t[1:])
    dt = {32: np.uint32, 64: np.uint64}[w]
    edges = [0, 1, 2**(w - 1) - 1, 2**(w - 1), 2**w - 2, 2**w - 1]
    vals = edges + [int(x) for x in RNG.integers(0, 2**w, 10, dtype=np.uint64 if w == 64 else np.int64)]
    a, b, c = (np.array([vals[i % len(vals)] for i in range(n, n + 64)], dt) for n in (0, 7, 13))
    cin = RNG.random(64) < 0.5
    srcs = [a, b] + ([c] if opcode.startswith("mad") else []) + ([cin] if opcode.endswith("c") else [])
    out = run(opcode, mods, (t,), *srcs)
    part = "hi" if "hi" in mods else "lo"
    for i in range(64):
        d, co = integer.carry_reference(opcode, int(a[i]), int(b[i]), int(c[i]), int(cin[i]), t[0], w, part)
        assert int(out[0][i]) == d
        if "cc" in mods:
            assert int(out[1][i]) == co
