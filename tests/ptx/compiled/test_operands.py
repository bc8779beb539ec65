"""refsim.ptx.compiled.operands: the C the compiled path writes for operand widths and immediates,
each rule the interpreter's (docs/ptx.md, operand widths), worked by hand as text and bit patterns."""

from __future__ import annotations

import pytest

from refsim.ptx.compiled.operands import CT, ST, Refuse, bits_of, convert, immediate_bits, literal


def test_bits_of_is_the_stored_width_one_for_predicates():
    assert [bits_of(t) for t in ("pred", "b8", "s16", "f16x2", "u32", "f64")] == [1, 8, 16, 32, 32, 64]
    assert CT[1] == CT[8] == "uint8_t" and ST[64] == "int64_t"
    with pytest.raises(Refuse, match=r"type .b128 has no register width the compiled path stores"):
        bits_of("b128")


def test_literals_carry_their_unsigned_type():
    assert literal(7, 32) == "((uint32_t)7u)"
    assert literal(2**64 - 1, 64) == "((uint64_t)18446744073709551615ull)"


def test_convert_truncates_zero_or_sign_extends_as_c_casts():
    assert convert("x", 32, 32, True) == "x"
    assert convert("x", 64, 32, True) == "((uint32_t)(x))"                      # truncation, any sign
    assert convert("x", 8, 32, False) == "((uint32_t)(x))"                      # zero extension
    assert convert("x", 8, 32, True) == "((uint32_t)(int32_t)(int8_t)(x))"     # sign extension
    assert convert("p", 1, 32, True) == "((uint32_t)(p))"                       # a predicate is 0 or 1
    with pytest.raises(Refuse, match="a non-predicate value read as a predicate"):
        convert("x", 32, 1, False)


@pytest.mark.parametrize("op, ptx_type, bits", [
    (("imm", -1, "int"), "u32", 0xFFFF_FFFF),                 # integers modulo 2^width
    (("imm", 2**40 + 5, "int"), "b16", 5),
    (("imm", 3, "int"), "pred", 1),
    (("imm", 0, "int"), "pred", 0),
    (("imm", 1.5, "float"), "f32", 0x3FC0_0000),              # an exact decimal float
    (("imm", 1, "int"), "f64", 0x3FF0_0000_0000_0000),
    (("imm", 0x3F80_0000, "f32"), "f64", 0x3FF0_0000_0000_0000),   # 0f literal widened exactly
    (("imm", 0x3F80_0000, "f32"), "f32", 0x3F80_0000),        # 0f bits kept
])
def test_immediate_bits_follow_the_interpreters_rules(op, ptx_type, bits):
    assert immediate_bits(op, ptx_type) == bits


@pytest.mark.parametrize("op, ptx_type, match", [
    (("imm", 0.1, "float"), "f32", r"immediate 0.1 is not exact in .f32"),
    (("imm", 1.5, "float"), "f16", r"decimal immediate for .f16"),
    (("imm", 1.5, "float"), "u32", r"immediate 1.5 does not fit .u32"),
    (("imm", 0x3FF0_0000_0000_0000, "f64"), "f32", r"does not fit .f32"),
])
def test_an_immediate_the_path_cannot_place_exactly_is_refused(op, ptx_type, match):
    with pytest.raises(Refuse, match=match):
        immediate_bits(op, ptx_type)
