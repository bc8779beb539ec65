"""Conformance tables for the bit and logic instructions (refsim.ptx.semantics.logic), transcribed from
the PTX ISA text.

Sources (PTX ISA 9.x): Logic and Shift Instructions: lop3 (immLut = F(0xF0, 0xCC, 0xAA) and its worked
examples), shl/shr ("shift amounts greater than the register width N are clamped to N"), shf; Data
Movement and Conversion Instructions: prmt (generic form and the mode table); Integer Arithmetic
Instructions: bfe / bfi (pseudocode).
"""

from __future__ import annotations

import numpy as np
import pytest

from refsim.ptx.semantics import Op, lookup
from refsim.ptx.semantics import logic
from refsim.testing import assert_bitexact

RNG = np.random.default_rng(14)


def run(opcode, mods, types, *srcs):
    return lookup(Op(opcode, tuple(mods), tuple(types))).fn(*srcs)


def u32(*v):
    return np.array([x & 0xFFFFFFFF for x in v], np.uint32)


# ---------------------------------------------------------------------------------------------
# lop3: all 256 immediates


@pytest.mark.parametrize("imm", range(256))
def test_lop3_reproduces_its_immlut_on_the_isa_constants(imm):
    # the ISA's definition: immLut = F(0xF0, 0xCC, 0xAA); replicated into every byte of a word
    a, b, c = u32(0xF0F0F0F0), u32(0xCCCCCCCC), u32(0xAAAAAAAA)
    (d,) = run("lop3", (), ("b32",), a, b, c, np.uint32(imm))
    assert int(d[0]) == imm * 0x01010101


def test_lop3_matches_its_plain_loop_twin_for_all_immediates_on_random_words():
    a, b, c = (RNG.integers(0, 2**32, 16, dtype=np.uint64).astype(np.uint32) for _ in range(3))
    for imm in range(256):
        got = logic.lop3(a, b, c, imm)
        want = np.array([logic.lop3_reference(int(x), int(y), int(z), imm) for x, y, z in zip(a, b, c)], np.uint32)
        assert_bitexact(got, want, f"lop3 0x{imm:02x}")


@pytest.mark.parametrize("imm, expr", [
    (0x80, lambda a, b, c: a & b & c),            # ISA examples
    (0xFE, lambda a, b, c: a | b | c),
    (0x40, lambda a, b, c: a & b & ~c),
    (0x1A, lambda a, b, c: ((a & b) | c) ^ a),
    (0xEA, lambda a, b, c: (a & b) | c),          # the INT4 -> fp16 magic-number dequant (refsim.formats.dequant_tricks)
    (0x96, lambda a, b, c: a ^ b ^ c),
])
def test_lop3_isa_examples_compute_their_functions(imm, expr):
    a, b, c = (RNG.integers(0, 2**32, 64, dtype=np.uint64) for _ in range(3))
    (d,) = run("lop3", (), ("b32",), a.astype(np.uint32), b.astype(np.uint32), c.astype(np.uint32), np.uint32(imm))
    assert_bitexact(d, (expr(a, b, c) & 0xFFFFFFFF).astype(np.uint32), f"lop3 0x{imm:02x}")


def test_lop3_boolop_sets_the_predicate_from_the_result():
    d, p = run("lop3", ("or",), ("b32",), u32(0, 0), u32(0, 0), u32(0, 1), np.uint32(0xAA), np.array([False, False]))
    assert d.tolist() == [0, 1] and p.tolist() == [False, True]
    _, p = run("lop3", ("and",), ("b32",), u32(1, 1), u32(0, 0), u32(0, 0), np.uint32(0xF0), np.array([True, False]))
    assert p.tolist() == [True, False]


# ---------------------------------------------------------------------------------------------
# prmt: every mode, every selector (table transcribed from the ISA: source byte for d.b3 d.b2 d.b1 d.b0)

ISA_PRMT_TABLE = {
    "f4e": ["3210", "4321", "5432", "6543"],
    "b4e": ["5670", "6701", "7012", "0123"],
    "rc8": ["0000", "1111", "2222", "3333"],
    "ecl": ["3210", "3211", "3222", "3333"],
    "ecr": ["0000", "1110", "2210", "3210"],
    "rc16": ["1010", "3232", "1010", "3232"],
}
A_IDX, B_IDX = 0x03020100, 0x07060504   # every byte holds its own index in {b, a}


@pytest.mark.parametrize("mode", sorted(ISA_PRMT_TABLE))
@pytest.mark.parametrize("sel", range(4))
def test_prmt_mode_selects_the_isa_table_bytes(mode, sel):
    # high selector bits are ignored by the modes: only c[1:0] counts
    c = u32(sel, sel | 0xFFFFFFFC & 0xFFFFFFFF, sel | 0x8880)
    (d,) = run("prmt", (mode,), ("b32",), u32(A_IDX, A_IDX, A_IDX), u32(B_IDX, B_IDX, B_IDX), c)
    digits = ISA_PRMT_TABLE[mode][sel]
    want = sum(int(ch) << (8 * (3 - j)) for j, ch in enumerate(digits))
    assert [hex(int(x)) for x in d] == [hex(want)] * 3


def test_prmt_modes_never_replicate_sign_bits():
    a, b = u32(0x83828180), u32(0x87868584)
    for mode, rows in ISA_PRMT_TABLE.items():
        for sel, digits in enumerate(rows):
            (d,) = run("prmt", (mode,), ("b32",), a, b, u32(sel))
            want = sum((0x80 + int(ch)) << (8 * (3 - j)) for j, ch in enumerate(digits))
            assert int(d[0]) == want, (mode, sel)


def test_prmt_generic_form_matches_the_isa_examples():
    (d,) = run("prmt", (), ("b32",), u32(A_IDX), u32(B_IDX), u32(0x7531))
    assert int(d[0]) == 0x07050301                       # cub::PRMT documentation example
    (d,) = run("prmt", (), ("b32",), u32(0xDDCCBBAA), u32(0x64646464), u32(0x5250, 0x5351))
    assert d.tolist() == [0x64CC64AA, 0x64DD64BB]        # INT8 -> fp16 magic-number bytes (refsim.formats.dequant_tricks)
    (d,) = run("prmt", (), ("b32",), u32(0x00800001), u32(0), u32(0x8A98))
    # nibble 8 = byte 0 (0x01) sign 0 -> 0x00; 9 = byte 1 (0x00) -> 0x00; A = byte 2 (0x80) -> 0xFF; 8 -> 0x00
    assert int(d[0]) == 0x00FF0000


def test_prmt_generic_form_matches_its_twin_for_every_selector():
    sels = np.arange(2**16, dtype=np.uint32)
    a, b = 0x8B7A6950, 0xF1E2D3C4
    (d,) = run("prmt", (), ("b32",), np.uint32(a), np.uint32(b), sels)
    want = np.array([logic.prmt_reference(a, b, int(s)) for s in sels], np.uint32)
    assert_bitexact(d, want, "prmt generic")


# ---------------------------------------------------------------------------------------------
# bfe / bfi edge cases (ISA pseudocode worked by hand)

BFE_TABLE = [  # (type, a, pos, len, expected)
    ("u32", 0x000000F0, 4, 4, 0xF),
    ("s32", 0x000000F0, 4, 4, 0xFFFFFFFF),         # field 1111 sign-extended
    ("s32", 0x00000070, 4, 4, 0x7),
    ("u32", 0xFFFFFFFF, 0, 0, 0),                  # length 0 -> 0
    ("s32", 0xFFFFFFFF, 7, 0, 0),                  # length 0 -> 0 even when signed
    ("u32", 0x80000000, 32, 4, 0),                 # position past the msb, unsigned -> 0
    ("s32", 0x80000000, 40, 4, 0xFFFFFFFF),        # position past the msb: sign bit a[31] replicated
    ("s32", 0x7FFFFFFF, 40, 4, 0),
    ("u32", 0x80000000, 28, 8, 0x8),               # field runs past the msb: missing bits are 0 ...
    ("s32", 0x80000000, 28, 8, 0xFFFFFFF8),        # ... or a[31] for signed
    ("u32", 0x00000F00, 0x108, 0x104, 0xF),        # pos, len & 0xff: 0x108 -> 8, 0x104 -> 4
    ("u32", 0x12345678, 0, 32, 0x12345678),
    ("u32", 0x12345678, 0, 255, 0x12345678),
    ("s64", 0x8000000000000000, 60, 8, 0xFFFFFFFFFFFFFFF8),
    ("u64", 0xF000000000000000, 64, 8, 0),
    ("s64", 0x0000000100000000, 32, 1, 0xFFFFFFFFFFFFFFFF),
]


@pytest.mark.parametrize("t, a, pos, length, want", BFE_TABLE)
def test_bfe_isa_edge_cases(t, a, pos, length, want):
    w = int(t[1:])
    dt = np.uint32 if w == 32 else np.uint64
    (d,) = run("bfe", (), (t,), np.array([a], dt), u32(pos), u32(length))
    assert int(d[0]) == want
    assert logic.bfe_reference(a, pos, length, signed=t[0] == "s", width=w) == want


BFI_TABLE = [  # (width, a, b, pos, len, expected)
    (32, 0xF, 0x00000000, 4, 4, 0x000000F0),
    (32, 0xF, 0xFFFFFFFF, 4, 0, 0xFFFFFFFF),          # length 0 -> b
    (32, 0xF, 0x12345678, 32, 4, 0x12345678),         # position past the msb -> b
    (32, 0xF, 0x00000000, 30, 4, 0xC0000000),         # nothing written past the msb
    (32, 0x0, 0xFFFFFFFF, 0x104, 0x108, 0xFFFFF00F),  # & 0xff: pos 4, len 8
    (32, 0xABCD, 0x0, 0, 255, 0xABCD),
    (64, 0xFF, 0x0, 60, 8, 0xF000000000000000),
]


@pytest.mark.parametrize("w, a, b, pos, length, want", BFI_TABLE)
def test_bfi_isa_edge_cases(w, a, b, pos, length, want):
    dt = np.uint32 if w == 32 else np.uint64
    (d,) = run("bfi", (), (f"b{w}",), np.array([a], dt), np.array([b], dt), u32(pos), u32(length))
    assert int(d[0]) == want
    assert logic.bfi_reference(a, b, pos, length, width=w) == want


@pytest.mark.parametrize("w", [32, 64])
def test_bfe_and_bfi_match_their_twins_over_positions_and_lengths(w):
    dt = np.uint32 if w == 32 else np.uint64
    grid = [*range(0, 70), 255, 256, 257, 511]
    pos, length = (np.array(g, np.uint32).ravel() for g in np.meshgrid(grid, grid))
    a = RNG.integers(0, 2**w, pos.size, dtype=np.uint64).astype(dt)
    b = RNG.integers(0, 2**w, pos.size, dtype=np.uint64).astype(dt)
    for signed in (False, True):
        got = logic.bfe(a, pos, length, signed=signed, width=w)
        want = [logic.bfe_reference(int(x), int(p), int(n), signed=signed, width=w) for x, p, n in zip(a, pos, length)]
        assert_bitexact(got, np.array(want, dt), f"bfe signed={signed}")
    got = logic.bfi(a, b, pos, length, width=w)
    want = [logic.bfi_reference(int(x), int(y), int(p), int(n), width=w) for x, y, p, n in zip(a, b, pos, length)]
    assert_bitexact(got, np.array(want, dt), "bfi")


# ---------------------------------------------------------------------------------------------
# shifts >= width


@pytest.mark.parametrize("t, opcode, a, n, want", [
    ("b32", "shl", 0x80000001, 1, 0x00000002),
    ("b32", "shl", 0xFFFFFFFF, 32, 0),
    ("b32", "shl", 0xFFFFFFFF, 33, 0),
    ("b32", "shl", 0xFFFFFFFF, 0xFFFFFFFF, 0),
    ("b16", "shl", 0xFFFF, 16, 0),
    ("b64", "shl", 1, 64, 0),
    ("b64", "shl", 1, 63, 0x8000000000000000),
    ("u32", "shr", 0x80000000, 31, 1),
    ("u32", "shr", 0x80000000, 32, 0),
    ("b32", "shr", 0x80000000, 100, 0),
    ("s32", "shr", 0x80000000, 31, 0xFFFFFFFF),
    ("s32", "shr", 0x80000000, 40, 0xFFFFFFFF),       # clamped to 32: sign fill
    ("s32", "shr", 0x7FFFFFFF, 0xFFFFFFFF, 0),
    ("s16", "shr", 0x8000, 16, 0xFFFF),
    ("s64", "shr", 0x8000000000000000, 64, 0xFFFFFFFFFFFFFFFF),
    ("u64", "shr", 0xFFFFFFFFFFFFFFFF, 64, 0),
])
def test_shifts_clamp_amounts_above_the_width(t, opcode, a, n, want):
    dt = {16: np.uint16, 32: np.uint32, 64: np.uint64}[int(t[1:])]
    (d,) = run(opcode, (), (t,), np.array([a], dt), u32(n))
    assert d.dtype == dt and int(d[0]) == want


@pytest.mark.parametrize("mods, c, want", [
    (("l", "clamp"), 4, 0x9ABCDEF0), (("l", "clamp"), 40, 0x01234567), (("l", "wrap"), 36, 0x9ABCDEF0),
    (("r", "clamp"), 4, 0xF0123456), (("r", "clamp"), 40, 0x89ABCDEF), (("r", "wrap"), 36, 0xF0123456),
])
def test_shf_funnel_shifts_clamp_or_wrap(mods, c, want):
    # {b, a} = 0x89ABCDEF_01234567
    (d,) = run("shf", mods, ("b32",), u32(0x01234567), u32(0x89ABCDEF), u32(c))
    assert int(d[0]) == want
