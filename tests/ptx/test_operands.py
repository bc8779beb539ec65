"""refsim.ptx.operands: the operand widths of docs/ptx.md ("Operand widths") worked by hand: a wider
register read narrower is truncated, a narrower value widened is zero- or sign-extended by the
instruction's signedness; vectors and pairs flatten in order; and a register used against its kind
is refused naming the line."""

from __future__ import annotations

import numpy as np
import pytest

from refsim import ptx
from refsim.ptx.errors import PtxUnsupportedError
from refsim.ptx.operands import SINT, UINT, bits, convert, dtype, flatten


def test_type_widths_and_their_unsigned_containers():
    assert [bits(t) for t in ("pred", "b8", "s16", "f16x2", "u32", "f64")] == [1, 8, 16, 32, 32, 64]
    assert [dtype(n) for n in (1, 8, 16, 32, 64)] == [np.bool_, np.uint8, np.uint16, np.uint32, np.uint64]
    assert SINT[32] is np.int32 and UINT[64] is np.uint64


def test_convert_truncates_and_extends_the_bit_patterns():
    b64 = np.array([0x1_2345_6789, 0xFFFF_FFFF_8000_0000], np.uint64)
    assert convert(b64, 32, signed=True).tolist() == [0x2345_6789, 0x8000_0000]       # low 32 bits, any sign
    b32 = np.array([0x8000_0000, 0x7FFF_FFFF], np.uint32)
    assert convert(b32, 64, signed=True).tolist() == [0xFFFF_FFFF_8000_0000, 0x7FFF_FFFF]
    assert convert(b32, 64, signed=False).tolist() == [0x8000_0000, 0x7FFF_FFFF]
    u8 = np.array([0x80, 0x7F], np.uint8)
    assert convert(u8, 32, signed=True).tolist() == [0xFFFF_FF80, 0x7F]
    assert convert(u8, 32, signed=True).dtype == np.uint32
    same = np.array([5], np.uint16)
    assert convert(same, 16, signed=True) is same


def test_flatten_expands_vectors_and_pairs_in_order():
    ops = [("reg", "%r1"), ("vec", [("reg", "%f1"), ("vec", [("reg", "%f2"), ("imm", "1")])]),
           ("pair", [("reg", "%p1"), ("reg", "%p2")])]
    assert flatten(ops) == [("reg", "%r1"), ("reg", "%f1"), ("reg", "%f2"), ("imm", "1"), ("reg", "%p1"),
                            ("reg", "%p2")]


HEAD = ".version 8.0\n.target sm_80\n.address_size 64\n"


def _run_one(body: str, out_type: str = "u32") -> int:
    text = HEAD + f""".visible .entry k(.param .u64 pout)
{{
.reg .b32 %r<4>; .reg .b64 %rd<4>; .reg .pred %p<2>; .reg .b16 %h<2>;
ld.param.u64 %rd1, [pout]; cvta.to.global.u64 %rd2, %rd1;
{body}
st.global.{out_type} [%rd2], %r1;
}}
"""
    out = np.zeros(1, np.uint32)
    ptx.Module(text).launch("k", 1, 1, [out])
    return int(out[0])


def test_a_b64_register_read_as_u32_is_its_low_half_and_a_signed_byte_sign_extends():
    assert _run_one("mov.b64 %rd3, 0x123456789; mov.b64 {%r1, %r2}, %rd3;") == 0x23456789
    assert _run_one("mov.b64 %rd3, 0x1FFFFFFF0; cvt.u32.u64 %r1, %rd3;") == 0xFFFFFFF0
    assert _run_one("mov.b16 %h1, 0x80; cvt.s32.s8 %r1, %h1;") == 0xFFFFFF80
    assert _run_one("mov.b16 %h1, 0x80; cvt.u32.u8 %r1, %h1;") == 0x80


def test_a_predicate_read_as_an_integer_is_refused_naming_the_line():
    with pytest.raises(PtxUnsupportedError, match=r"PTX line 8 `add.u32 %r1, %p1, 1`: register %p1 \(.pred\) used as .u32"):
        _run_one("setp.eq.u32 %p1, 0, 0; add.u32 %r1, %p1, 1;")
