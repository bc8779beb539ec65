"""refsim.ptx.compiled.instructions: the C body each instruction family emits, read from tiny kernels'
translations (no build) and written out by hand.

An ALU step reads each source as its type into ``s<j>``, computes ``v<j>`` with refsim.ptx.compiled.alu's
expression and stores it, for every active thread; the form that ALU leaves to the handler becomes a
callback; fences are no-ops that only step; branches set the pc; loads call the runtime as shown; barriers
and exits are callbacks (their one definition is the interpreter's Python, run over a LaunchView).
test_conformance.py and test_kernels.py run these bodies against the interpreter.
"""

from __future__ import annotations

import pytest
from conftest_compiled import template, translated

from refsim.ptx.compiled.instructions import split_operands
from refsim.ptx.compiled.translate import HEADER
from refsim.ptx.compiled.operands import Refuse

CALLBACK = "    (void)S; (void)D; (void)th; (void)n;\n    return RT_CALLBACK;"
ADVANCE = "    for (int32_t i = 0; i < n; i++) S->pc[th[i]] = (int32_t)D->idx + 1;\n    return 0;"


def _lines(body: str) -> list[str]:
    return [ln.strip() for ln in body.splitlines()]


def test_an_alu_step_reads_computes_and_stores_per_active_thread():
    body = template(translated("add.s32 %r6, %r5, 9;\nexit;"), 0)
    assert _lines(body) == [
        "int r = 0; (void)r;",
        "uint32_t *const R0 = (uint32_t *)S->reg[D->k[0]];",          # %r5, descriptor slot 0
        "uint32_t *const R2 = (uint32_t *)S->reg[D->k[2]];",          # %r6, slot 2 (slot 1: the immediate)
        "const int32_t *act = th; const int32_t na = n;",
        "if (S->poison) {", "if ((r = S->api->check_init(S, D->idx, D->k[0], act, na))) return r;", "}",
        "for (int32_t i = 0; i < na; i++) {",
        "const int32_t t = act[i]; (void)t;",
        "const uint32_t s0 = R0[t];",
        "const uint32_t s1 = ((uint32_t)D->k[1]);",
        "const uint32_t v0 = ((uint32_t)((uint64_t)s0 + (uint64_t)s1));",
        "R2[t] = v0;",
        "}",
        "if (S->poison) {", "for (int32_t i = 0; i < na; i++) S->reg_init[D->k[2]][act[i]] = 1;", "}",
        "for (int32_t i = 0; i < n; i++) S->pc[th[i]] = (int32_t)D->idx + 1;",
        "return 0;"]


def test_a_predicate_destination_is_stored_as_a_byte():
    body = _lines(template(translated("setp.lt.u32 %p1, %r3, 4;\nexit;"), 0))
    assert "uint8_t *const R2 = (uint8_t *)S->reg[D->k[2]];" in body
    assert "const uint8_t v0 = ((uint8_t)((uint64_t)s0 < (uint64_t)s1));" in body and "R2[t] = v0;" in body


def test_a_form_alu_leaves_to_the_handler_is_a_callback_step():
    tr = translated("div.s64 %rd5, %rd3, %rd4;\nexit;")
    assert template(tr, 0) == CALLBACK
    assert tr.callbacks == frozenset({0, 1, 2})                    # and the two exits (Python's definition)


def test_fences_only_step_and_exit_is_a_callback_step():
    tr = translated("membar.gl;\nexit;")
    assert template(tr, 0) == "    int r = 0; (void)r;\n    const int32_t *act = th; const int32_t na = n;\n" + ADVANCE
    assert template(tr, 1) == CALLBACK and tr.callbacks == frozenset({1, 2})      # Launch.exit_threads runs


def test_the_engine_forms_of_control_are_their_expressions_in_c():
    # refsim.ptx.control.FORMS: sources read into s<j>, each result's expression stored (windows of docs/ptx.md)
    tr = translated("cvta.to.shared.u32 %r2, %r1;\nisspacep.local %p1, %rd1;\nmov.b64 {%r3, %r4}, %rd2;\n"
                    "mov.b32 %r5, {%r3, %r4};\nexit;")
    assert not [i for i in tr.callbacks if i < 4]                      # (the exit is a callback step)
    assert "R1[t] = ((uint32_t)((uint64_t)s0 - 0x100000000ull));" in _lines(template(tr, 0))
    assert "R1[t] = ((uint8_t)((0x200000000ull <= (uint64_t)s0) & ((uint64_t)s0 < 0x300000000ull)));" in \
        _lines(template(tr, 1))
    body = _lines(template(tr, 2))
    assert body[body.index("const uint64_t s0 = R0[t];") + 1:][:2] == ["R1[t] = ((uint32_t)((uint64_t)s0 >> 0));",
                                                                     "R2[t] = ((uint32_t)((uint64_t)s0 >> 32));"]
    body = _lines(template(tr, 3))      # the parts read as .b16: each register's low half
    assert "const uint16_t s1 = ((uint16_t)(R1[t]));" in body
    assert "R2[t] = ((uint32_t)((((uint64_t)s0 & 65535) << 0) | (((uint64_t)s1 & 65535) << 16)));" in body


def test_the_effects_of_control_are_one_c_each():
    tr = translated("nanosleep.u32 5;\n@%p1 brkpt;\nprefetch.global.L2 [%rd1];\ntrap;\nexit;")
    assert "S->yielding[t >> 5] = 1;" in _lines(template(tr, 0))
    trap = "if (na) { S->err_ins = D->idx; S->err_thread = act[0]; return E_TRAP; }"
    assert trap in _lines(template(tr, 1)) and trap in _lines(template(tr, 3))
    assert template(tr, 2) == "    int r = 0; (void)r;\n    const int32_t *act = th; const int32_t na = n;\n" + ADVANCE


@pytest.mark.parametrize("line", ["bar.sync 3;", "barrier.sync.aligned 1, 64;", "bar.arrive 2, 32;",
                                  "bar.red.popc.u32 %r1, 0, %p1;", "bar.warp.sync -1;", "@%p1 ret;",
                                  "cp.async.commit_group;", "cp.async.wait_group 1;", "cp.async.wait_all;"])
def test_barriers_exits_and_cp_async_groups_are_callback_steps_with_no_c_of_their_own(line):
    tr = translated(line + "\nexit;")
    assert template(tr, 0) == CALLBACK and 0 in tr.callbacks          # refsim/ptx/barriers.py's definition runs
    kernel = tr.source[len(HEADER):]
    assert "api->bar" not in kernel and "exit_threads" not in kernel and "group" not in kernel


def test_a_jump_moves_its_active_threads_to_the_target_its_declaration_names():
    from refsim.ptx import control, dispatch

    tr = translated("@%p1 bra $L_end;\nadd.s32 %r1, %r2, 1;\n$L_end:\nexit;")
    body = _lines(template(tr, 0))
    assert dispatch.OPCODES["bra"].jump is control.bra_target
    # the target (instruction 2, the first exit) is the descriptor's constant after the guard's slot
    assert "S->pc[t] = (int32_t)D->k[1];" in body and "{0, {17LL, 2LL}}  /* line 7 */" in tr.source
    assert body[-2].endswith("S->pc[th[i]] = (int32_t)D->idx + 1; }")          # guarded-out threads step on


def test_ld_param_copies_the_bytes_of_the_parameter_once():
    body = _lines(template(translated("ld.param.u32 %r3, [n];\nexit;"), 0))
    assert "uint32_t p0; memcpy(&p0, S->param + D->k[1], 4);" in body and "R0[t] = p0;" in body


def test_split_operands_allows_only_the_optional_destinations_to_be_absent():
    from types import SimpleNamespace

    h = SimpleNamespace(dst_types=("pred", "pred"), src_types=("u32", "u32"))
    ins = SimpleNamespace(operands=[("reg", "%p1"), ("reg", "%r1"), ("imm", 4, "int")])
    assert split_operands(ins, h) == ([("reg", "%p1")], [("reg", "%r1"), ("imm", 4, "int")])
    with pytest.raises(Refuse, match="operand count"):
        split_operands(SimpleNamespace(operands=[("reg", "%r1"), ("imm", 4, "int")]), h)


_MMA_FORMS = [          # (form, D, A, B, C register counts)
    ("m16n8k16.row.col.f32.f16.f16.f32", 4, 4, 2, 4), ("m16n8k16.row.col.f16.f16.f16.f16", 2, 4, 2, 2),
    ("m16n8k8.row.col.f32.f16.f16.f32", 4, 2, 1, 4), ("m16n8k8.row.col.f16.f16.f16.f16", 2, 2, 1, 2),
    ("m16n8k16.row.col.f32.bf16.bf16.f32", 4, 4, 2, 4), ("m16n8k16.row.col.s32.s8.u8.s32", 4, 2, 1, 4),
    ("m16n8k32.row.col.satfinite.s32.s8.s8.s32", 4, 4, 2, 4), ("m16n8k64.row.col.s32.s4.s4.s32", 4, 4, 2, 4),
]


def test_only_the_twins_mma_forms_have_c_and_that_c_calls_the_runtime():
    # f16 x f16 + f32 k16 (refsim_mma_k16_f32) and the integer forms (refsim_mma_int) reach the runtime with
    # their kind and layouts as data; every other form (f16 accumulation, k8, bf16) runs the handler
    def regs(n, first):
        return "{" + ", ".join(f"%m{first + j}" for j in range(n)) + "}"

    body = ".reg .b32 %m<16>;\n" + "".join(
        f"mma.sync.aligned.{form} {regs(nd, 0)}, {regs(na, 4)}, {regs(nb, 8)}, {regs(nc, 10)};\n"
        for form, nd, na, nb, nc in _MMA_FORMS) + "exit;"
    tr = translated(body)
    assert tr.reason is None and tr.callbacks == frozenset({1, 2, 3, 4, 8, 9})      # (8, 9: the exits, Python's)
    calls = []
    for idx in (0, 5, 6, 7):
        lines = _lines(template(tr, idx))
        assert "if ((r = S->api->partial_warp(S, E_PARTIAL_MMA, D->idx, act, na))) return r;" in lines
        (call,) = [ln for ln in lines if "api->mma" in ln]
        calls.append(call.split("&")[1].split(",")[0])
    statics = dict(ln.removeprefix("static const rt_mma ").rstrip(";").split(" = ") for ln in tr.source.splitlines()
                   if ln.startswith("static const rt_mma "))
    rows = [statics[c].strip("{}").split(", ") for c in calls]
    # (M, N, K, registers of A B C D) then (kind, element bits, A signed, B signed, .satfinite)
    assert [r[1:8] + r[11:] for r in rows] == [
        ["16", "8", "16", "4", "2", "4", "4", "RT_MMA_F16_F32", "16", "0", "0", "0"],
        ["16", "8", "16", "2", "1", "4", "4", "RT_MMA_INT", "8", "1", "0", "0"],     # s32.s8.u8.s32
        ["16", "8", "32", "4", "2", "4", "4", "RT_MMA_INT", "8", "1", "1", "1"],     # .satfinite s8.s8
        ["16", "8", "64", "4", "2", "4", "4", "RT_MMA_INT", "4", "1", "1", "0"]]     # s4.s4
