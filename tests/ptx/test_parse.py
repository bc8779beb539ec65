"""Parsing rules the engine depends on: {}-scoped registers and labels, barriers under divergence,
operand forms; and Module's static views (kernels, params, instruction mix)."""

from __future__ import annotations

import numpy as np
import pytest

from refsim import ptx
from refsim.ptx.parse import parse

HEAD = ".version 8.0\n.target sm_80\n.address_size 64\n"

# Marlin's cp_async4_pred declares `.reg .pred p` and cp_async4_stream `.reg .b64 p` in sibling
# inline-asm scopes; here an outer .b32 p, an inner .pred p and an inner .b64 p coexist.
SCOPED = HEAD + """.visible .entry k(.param .u64 out)
{
.reg .b32 p;
.reg .b64 %rd<4>;
ld.param.u64 %rd1, [out];
cvta.to.global.u64 %rd2, %rd1;
mov.u32 p, 7;
{
  .reg .pred p;
  setp.eq.u32 p, 1, 1;
  @p bra $L_in;
  st.global.u32 [%rd2], 99;
$L_in:
}
{
  .reg .b64 p;
  mov.u64 p, 0x100000005;
  st.global.u64 [%rd2+8], p;
$L_in:
}
st.global.u32 [%rd2+4], p;
}
"""


def test_registers_and_labels_are_scoped_by_braces():
    out = np.zeros(4, np.uint32)
    ptx.Module(SCOPED).launch("k", 1, 1, [out])
    assert out.tolist() == [0, 7, 5, 1]       # the branch on the inner predicate skipped the 99


DIVERGENT_BARRIER = HEAD + """.visible .entry k(.param .u64 out)
{
.reg .pred %p<2>;
.reg .b32 %r<4>;
.reg .b64 %rd<6>;
.shared .align 4 .b32 s;
ld.param.u64 %rd1, [out];
cvta.to.global.u64 %rd2, %rd1;
mov.u32 %r1, %tid.x;
setp.eq.u32 %p1, %r1, 0;
@%p1 bra $L_thread0;
$L_bar:
bar.sync 0;
ld.shared.u32 %r2, [s];
mul.wide.u32 %rd3, %r1, 4;
add.s64 %rd4, %rd2, %rd3;
st.global.u32 [%rd4], %r2;
ret;
$L_thread0:
st.shared.u32 [s], 42;
bra $L_bar;
}
"""


def test_barrier_waits_for_a_thread_whose_code_lies_after_it_in_program_order():
    out = np.zeros(64, np.uint32)
    stats = ptx.Module(DIVERGENT_BARRIER).launch("k", 1, 64, [out])
    assert (out == 42).all()
    assert stats.barriers == 1


def test_kernels_params_and_instruction_mix():
    m = ptx.Module(DIVERGENT_BARRIER)
    assert m.kernels == ("k",)
    assert m.params("k") == (("out", "u64", 8),)
    mix = m.instruction_mix("k")
    assert mix["bar.sync"] == 1 and mix["bra"] == 2 and mix["st.shared.u32"] == 1


def test_operand_forms():
    k = parse(HEAD + ".visible .entry k()\n{\n.reg .b32 %r<3>;\n.reg .pred %p<3>;\n.shared .align 4 .b8 s[8];\n"
              "setp.lt.and.s32 %p1|%p2, %r1, -0x10, !%p0;\nld.shared.v2.u32 {%r1, %r2}, [s+-0];\n"
              "mov.b32 %r0, 0f3F800000;\n@!%p1 st.shared.u32 [%r2+4], 0U;\n}\n").kernels["k"]
    setp, ld, mov, st = k.instructions[:4]
    assert setp.mods == ("lt", "and") and setp.types == ("s32",)
    assert setp.operands[0][0] == "pair" and setp.operands[2] == ("imm", -16, "int")
    assert setp.operands[3][0] == "reg" and setp.operands[3][2] is True            # !%p0 negated
    assert ld.operands[0][0] == "vec" and ld.operands[1] == ("addr", ("sym", "s"), 0)
    assert mov.operands[1] == ("imm", 0x3F800000, "f32")
    assert st.guard[2] is True and st.operands[0][2] == 4


def test_tensor_map_address_operand():
    # cp.async.bulk.tensor's [map, {coordinates}] parses as ("taddr", map address, coordinate vector)
    k = parse(HEAD + ".visible .entry k()\n{\n.reg .b32 %r<3>;\n.reg .b64 %rd<2>;\n.shared .align 128 .b8 s[64];\n"
              ".shared .align 8 .b8 b[8];\n"
              "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [s], [%rd1+64, {%r1, -2}], [b];\n"
              "}\n").kernels["k"]
    op = k.instructions[0].operands[1]
    assert op[0] == "taddr" and op[1][0] == "addr" and op[1][2] == 64
    assert op[2] == ("vec", (("reg", op[2][1][0][1], False), ("imm", -2, "int")))


def test_contractible_mul_add_pairs_are_listed():
    text = HEAD + (".visible .entry k()\n{\n.reg .f32 %f<6>;\n"
                   "mul.f32 %f1, %f2, %f3;\n"       # line 7: plain mul
                   "add.f32 %f4, %f1, %f5;\n"       # line 8: plain add of it -> contractible
                   "mul.rn.f32 %f1, %f2, %f3;\n"    # line 9: .rn mul
                   "add.f32 %f4, %f1, %f5;\n"       # line 10: not contractible
                   "}\n")
    assert ptx.Module(text).contractible("k") == ((7, 8),)


BAR_RED = HEAD + """.visible .entry k(.param .u64 out)
{
.reg .pred %p<4>;
.reg .b32 %r<6>;
.reg .b64 %rd<6>;
ld.param.u64 %rd1, [out];
cvta.to.global.u64 %rd2, %rd1;
mov.u32 %r1, %tid.x;
setp.lt.u32 %p1, %r1, 45;
bar.red.popc.u32 %r2, 0, %p1;
bar.red.or.pred %p2, 0, !%p1;
bar.red.and.pred %p3, 0, %p1;
selp.u32 %r3, 1, 0, %p2;
selp.u32 %r4, 1, 0, %p3;
mul.wide.u32 %rd3, %r1, 12;
add.s64 %rd4, %rd2, %rd3;
st.global.u32 [%rd4], %r2;
st.global.u32 [%rd4+4], %r3;
st.global.u32 [%rd4+8], %r4;
}
"""


def test_barrier_reductions_syncthreads_count_or_and():
    out = np.zeros((64, 3), np.uint32)
    ptx.Module(BAR_RED).launch("k", 1, 64, [out])
    assert (out == [45, 1, 0]).all()              # 45 of 64 below 45; some are not; not all are
    out = np.zeros((40, 3), np.uint32)
    ptx.Module(BAR_RED).launch("k", 1, 40, [out])
    assert (out == [40, 0, 1]).all()


def test_an_integer_constant_beyond_64_bits_is_refused_naming_kernel_and_line():
    body = ".visible .entry k()\n{{\n.reg .b32 %r<4>;\n.reg .b64 %rd<4>;\n{}\nret;\n}}\n"
    for ins in ("mov.u32 %r1, 99999999999999999999999;", "mov.u64 %rd1, 0x10000000000000000;",
                "add.s64 %rd1, %rd1, -9223372036854775809;", "ld.global.u32 %r1, [%rd1+18446744073709551616];"):
        with pytest.raises(ptx.PtxParseError, match=r"^kernel k, PTX line 8, column 1: .*does not fit 64 bits"):
            parse(HEAD + body.format(ins))
    # a constant that fits 64 bits is taken to the instruction's width (its low bits), as ptxas does
    for ins in ("mov.u64 %rd1, 18446744073709551615;", "mov.u64 %rd1, -9223372036854775808;",
                "mov.u32 %r1, 0x1FFFFFFFF;"):
        parse(HEAD + body.format(ins))
