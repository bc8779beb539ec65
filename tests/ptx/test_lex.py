"""refsim.ptx.lex: comments blanked in place (lines and columns kept), text split into statements,
labels, scopes and headers with their positions, top-level splitting, and PTX's integer and
initializer literals (PTX ISA 8.x, section 4.5 "Constants")."""

from __future__ import annotations

import pytest

from refsim.ptx.errors import PtxParseError
from refsim.ptx.lex import (decl_quals, initializer_bytes, parse_int, split_top, statements, strip_comments)


def test_strip_comments_keeps_lines_columns_and_strings():
    text = 'add.s32 %r1, %r2, 1; // one\n/* two\nlines */ ret;\n.file 1 "a//b.cu"'
    out = strip_comments(text)
    assert len(out) == len(text) and out.count("\n") == text.count("\n")
    assert out.splitlines() == ["add.s32 %r1, %r2, 1;       ", "      ", "         ret;", '.file 1 "a//b.cu"']


def test_statements_give_kind_text_line_and_column():
    text = (".version 8.0\n.target sm_80\n.visible .entry k(.param .u64 p)\n{\n"
            "  .reg .b32 %r<3>;\nL1:\n  mov.u32 %r1,\n     7; @%p bra L1;\n  { add.s32 %r2, %r1, 1; }\n  ret;\n}\n")
    got = list(statements(text))
    assert got == [
        ("line", ".version 8.0", 1, 1), ("line", ".target sm_80", 2, 1),
        ("header", ".visible .entry k(.param .u64 p)", 3, 1),          # its body's "{" is the header's end
        ("stmt", ".reg .b32 %r<3>", 5, 3), ("label", "L1", 6, 1),
        ("stmt", "mov.u32 %r1,      7", 7, 3), ("stmt", "@%p bra L1", 8, 9),
        ("open", "{", 9, 3), ("stmt", "add.s32 %r2, %r1, 1", 9, 5), ("close", "}", 9, 26),
        ("stmt", "ret", 10, 3), ("close", "}", 11, 1),
    ]


def test_braces_inside_a_statement_are_part_of_it():
    got = list(statements("mov.b64 %rd1, {%r1, %r2};\n.global .u32 t[2] = {1, 2};"))
    assert got == [("stmt", "mov.b64 %rd1, {%r1, %r2}", 1, 1), ("stmt", ".global .u32 t[2] = {1, 2}", 2, 1)]


def test_an_unterminated_statement_is_named_with_its_line_and_column():
    with pytest.raises(PtxParseError, match=r"PTX line 2, column 3: `add.s32 %r1, %r2, 1`: statement not "
                                            r"terminated by ';' at end of text"):
        list(statements("ret;\n  add.s32 %r1, %r2, 1"))
    with pytest.raises(PtxParseError, match=r"PTX line 1, column 3: `mov.u32 %r1, 0`: statement not terminated"):
        list(statements("{ mov.u32 %r1, 0 }"))


def test_split_top_splits_only_outside_brackets():
    assert split_top("%r1, [%rd1+4], {%f1, %f2}, f(%r2, %r3)") == ["%r1", "[%rd1+4]", "{%f1, %f2}", "f(%r2, %r3)"]
    assert split_top("a, , b") == ["a", "b"]
    assert split_top("a|b|c", "|") == ["a", "b", "c"]


@pytest.mark.parametrize("tok, value", [
    ("42", 42), ("-42", -42), ("0x1F", 31), ("0XfF", 255), ("0b101", 5), ("017", 15), ("0", 0), ("7U", 7),
    ("0xFFFFFFFFU", 4294967295), ("- 3", -3), ("1.5", None), ("%r1", None), ("0x", None), ("09", None),
])
def test_parse_int_reads_ptx_integer_literals(tok, value):
    assert parse_int(tok) == value


def test_initializer_bytes_are_little_endian_with_zeros_after_the_items_given():
    assert initializer_bytes("{1, 0x102, -1}", 2, 4) == bytes([1, 0, 2, 1, 0xFF, 0xFF, 0, 0])
    assert initializer_bytes("{0f3F800000}", 4, 1) == bytes([0, 0, 0x80, 0x3F])          # 1.0f
    assert initializer_bytes("{0d3FF0000000000000}", 8, 1) == bytes([0] * 6 + [0xF0, 0x3F])  # 1.0
    with pytest.raises(ValueError, match="x: not a literal"):
        initializer_bytes("{1, x}", 4, 2)


@pytest.mark.parametrize("init, width, count, rule", [
    ("{0x1FF}", 1, 1, "0x1FF: does not fit a 8-bit element"),         # 511 would wrap to 0xFF
    ("{-129}", 1, 1, "-129: does not fit a 8-bit element"),            # below the signed range
    ("{65536}", 2, 1, "65536: does not fit a 16-bit element"),
    ("{0f3F800000}", 2, 1, "a 32-bit float literal in a 16-bit element"),
    ("{0d3FF0000000000000}", 4, 1, "a 64-bit float literal in a 32-bit element"),
    ("{1, 2, 3}", 4, 2, "3 initializer items for 2 element"),
])
def test_initializer_values_that_do_not_fit_are_refused_not_wrapped(init, width, count, rule):
    with pytest.raises(ValueError, match=rule):
        initializer_bytes(init, width, count)
    # the extremes that do fit: -128 and 255 in a byte, both as their byte
    assert initializer_bytes("{-128, 255}", 1, 2) == bytes([0x80, 0xFF])


def test_a_module_with_an_oversized_initializer_names_the_line_and_the_value():
    from refsim import ptx
    from refsim.ptx.errors import PtxParseError

    text = ".version 7.0\n.target sm_80\n.address_size 64\n.global .b8 tbl[2] = {1, 0x1FF};\n"
    with pytest.raises(PtxParseError, match=r"line 4.*0x1FF: does not fit a 8-bit element"):
        ptx.Module(text)


def test_decl_quals_reads_alignment_vector_width_and_type():
    assert decl_quals(".align 16 .v4 .f32 ") == (16, 4, "f32")
    assert decl_quals(".b8") == (None, 1, "b8")
    assert decl_quals(".ptr .u64") == (None, 1, "u64")
