"""refsim.ptx.compiled.alu: the C expression each ALU instruction compiles to, written out by hand from the
module's rules, the forms it leaves to the handler (None), and the plain-C ones compiled and run on a
few bit patterns worked by hand (one tiny C program, a fraction of a second). Every form is also run
against the interpreter on tables of bit patterns in test_conformance.py.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from refsim.ptx.compiled.alu import alu
from refsim.ptx.semantics import Op

REG = ("reg", "%r1")


def _c(opcode: str, mods=(), types=(), srcs=("a", "b", "c"), operands=(REG, REG, REG)):
    return alu(Op(opcode, tuple(mods), tuple(types)), list(srcs), list(operands))


ADD_U32 = "((uint32_t)((uint64_t)a + (uint64_t)b))"
MUL_WIDE_S16 = "((uint32_t)((((uint64_t)((int64_t)(int16_t)a * (int64_t)(int16_t)b)) & 0xFFFFFFFFull)))"
LOP3_F0 = "((uint32_t)((a & ~b & ~c) | (a & ~b & c) | (a & b & ~c) | (a & b & c)))"
NEG_F32 = "((uint32_t)(((uint64_t)a) ^ 0x80000000ull))"
ABS_F16X2 = "((uint32_t)(((uint64_t)a) & 0x7fff7fffull))"
CVT_U8_U32 = "((uint32_t)((uint64_t)(((uint64_t)a & 0xFFFFFFFFull)) & 0xFF))"
SELP_F32 = "((uint32_t)((uint64_t)p ? (uint64_t)a : (uint64_t)b))"


def test_integer_forms_are_wrapped_c_arithmetic_at_the_instructions_width():
    assert _c("add", types=["u32"]) == [(ADD_U32, 32)]
    assert _c("sub", types=["s64"]) == [("((uint64_t)((uint64_t)a - (uint64_t)b))", 64)]
    # .sat: the exact sum in 64 bits, clamped by the runtime
    assert _c("add", ["sat"], ["s32"]) == [("rt_sat_s32((int64_t)(int32_t)a + (int64_t)(int32_t)b)", 32)]
    # .wide doubles the width: the 16-bit signed operands multiply exactly, the low 32 bits are kept
    assert _c("mul", ["wide"], ["s16"]) == [(MUL_WIDE_S16, 32)]
    assert _c("shr", types=["s32"]) == [("((uint32_t)(rt_shr_s(a, b, 32)))", 32)]
    assert _c("not", types=["pred"]) == [("((uint8_t)!a)", 1)]


def test_lop3_is_the_sum_of_the_minterms_its_immediate_selects():
    # immLut 0xF0 selects minterms 4..7: the ones where a (weight 4) is set, so d = a
    assert _c("lop3", types=["b32"], operands=(REG, REG, REG, ("imm", 0xF0, "int"))) == [(LOP3_F0, 32)]
    assert _c("lop3", types=["b32"], operands=(REG, REG, REG, ("imm", 0, "int"))) == [("((uint32_t)(0))", 32)]
    # the .or form also writes the predicate (d != 0) | p
    got = _c("lop3", ["or"], ["b32"], srcs=("a", "b", "c", "x", "p"),
             operands=(REG, REG, REG, ("imm", 0x80, "int"), REG))
    assert got == [("((uint32_t)((a & b & c)))", 32), ("((uint8_t)((((uint32_t)((a & b & c))) != 0) | p))", 1)]


def test_setp_writes_the_comparison_and_its_complement():
    raw = "((uint8_t)(rt_sext((uint64_t)a, 32) < rt_sext((uint64_t)b, 32)))"
    assert _c("setp", ["lt"], ["s32"]) == [(raw, 1), (f"((uint8_t)!{raw})", 1)]
    raw = "((uint8_t)((uint64_t)a <= (uint64_t)b))"
    assert _c("setp", ["ls"], ["u32"]) == [(raw, 1), (f"((uint8_t)!{raw})", 1)]
    # a float compare goes through the runtime's decoder and IEEE compare (le is code 3)
    raw = "((uint8_t)rt_fcmp(rt_dec_f32(a, 0), rt_dec_f32(b, 0), 3))"
    assert _c("setp", ["le", "and"], ["f32"]) == [(f"((uint8_t)({raw} & c))", 1), (f"((uint8_t)((uint8_t)!{raw} & c))", 1)]


def test_float_forms_call_the_runtimes_correctly_rounded_helpers_or_flip_bits():
    assert _c("add", ["rn"], ["f32"]) == [("rt_fadd(a, b)", 32)]
    assert _c("mul", [], ["f16x2"]) == [("RT_X2(rt_hmul, a, b)", 32)]
    assert _c("fma", ["rn"], ["f16"]) == [("rt_hfma(a, b, c)", 16)]
    assert _c("rcp", ["rn"], ["f32"]) == [("rt_fdiv(0x3F800000u, a)", 32)]
    # neg flips the sign bit, abs clears it in each lane; no arithmetic
    assert _c("neg", types=["f32"]) == [(NEG_F32, 32)]
    assert _c("abs", types=["f16x2"]) == [(ABS_F16X2, 32)]
    assert _c("selp", types=["f32"], srcs=("a", "b", "p")) == [(SELP_F32, 32)]


def test_cvt_forms():
    # an 8-bit result is returned as the 32-bit value the handler gives: zero-extended for .u8
    assert _c("cvt", types=["u8", "u32"], srcs=["a"]) == [(CVT_U8_U32, 32)]
    assert _c("cvt", ["rn"], ["f16", "f32"], srcs=["a"]) == [("rt_h_canon(rt_f2h(rt_f32(a)))", 16)]
    assert _c("cvt", [], ["f32", "bf16"], srcs=["a"]) == [("rt_f_canon(rt_f32((uint32_t)a << 16))", 32)]
    assert _c("cvt", ["rzi"], ["s32", "f32"], srcs=["a"]) == [("((uint32_t)(rt_f2i(rt_dec_f32(a, 0), 1, 1, 32, 0)))", 32)]


@pytest.mark.parametrize("opcode, mods, types, operands", [
    ("add", ["cc"], ["u32"], (REG, REG)),                    # carry chains run the handler
    ("div", [], ["s64"], (REG, REG)),                        # NumPy's int64 |MIN| wrap decides
    ("add", ["rz"], ["f32"], (REG, REG)),                    # only .rn is compiled
    ("add", ["rn"], ["f64"], (REG, REG)),
    ("min", ["ftz"], ["f32"], (REG, REG)),
    ("lop3", [], ["b32"], (REG, REG, REG, REG)),             # a register immLut: checked per thread
    ("cvt", ["rn", "sat"], ["f16x2", "f32"], (REG, REG)),
    ("setp", ["lt", "ftz"], ["bf16"], (REG, REG)),
    ("tex", [], ["f32"], (REG,)),                            # not an ALU family
])
def test_forms_not_compiled_here_are_left_to_the_handler(opcode, mods, types, operands):
    assert _c(opcode, mods, types, operands=operands) is None


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler on PATH")
def test_the_plain_c_forms_compute_the_bits_worked_by_hand(tmp_path):
    cases = [  # (expression, a, b, c, p, expected) — the sources are uint32_t, p uint8_t
        (ADD_U32, 0xFFFFFFFF, 2, 0, 0, 1),                    # wraps modulo 2^32
        (MUL_WIDE_S16, 0xFFFF, 3, 0, 0, 0xFFFFFFFD),          # -1 * 3 = -3 in 32 bits
        (MUL_WIDE_S16, 0x7FFF, 0x7FFF, 0, 0, 0x3FFF0001),     # 32767^2
        (LOP3_F0, 0x12345678, 0xFFFF0000, 0x0F0F0F0F, 0, 0x12345678),
        (NEG_F32, 0x3F800000, 0, 0, 0, 0xBF800000),           # 1.0 -> -1.0
        (ABS_F16X2, 0xBC00BC00, 0, 0, 0, 0x3C003C00),         # (-1, -1) -> (1, 1)
        (CVT_U8_U32, 0x1234, 0, 0, 0, 0x34),
        (SELP_F32, 7, 9, 0, 0, 9),
    ]
    body = "\n".join(f"  {{ uint32_t a = {a}u, b = {b}u, c = {c}u; uint8_t p = {p}; (void)b; (void)c; (void)p;\n"
                     f"    printf(\"%u\\n\", (unsigned)({expr})); }}" for expr, a, b, c, p, _ in cases)
    src = tmp_path / "alu.c"
    src.write_text(f"#include <stdint.h>\n#include <stdio.h>\nint main(void) {{\n{body}\n  return 0;\n}}\n")
    subprocess.run(["cc", "-std=c99", "-o", str(tmp_path / "alu"), str(src)], check=True, capture_output=True, timeout=60)
    out = subprocess.run([str(tmp_path / "alu")], check=True, capture_output=True, text=True, timeout=60).stdout
    assert [int(x) for x in out.split()] == [want for *_, want in cases]
