"""refsim.ptx.compiled.instructions: the C body each instruction family emits, read from tiny kernels'
translations (no build) and written out by hand.

An ALU step reads each source as its type into ``s<j>``, computes ``v<j>`` with refsim.ptx.compiled.alu's
expression and stores it, for every active thread; the form that ALU leaves to the handler becomes a
callback; fences are no-ops that only step; branches, barriers, exits and loads call the runtime as shown.
test_conformance.py and test_kernels.py run these bodies against the interpreter.
"""

from __future__ import annotations

import pytest
from conftest_compiled import template, translated

from refsim.ptx.compiled.instructions import split_operands
from refsim.ptx.compiled.operands import Refuse

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
    assert template(tr, 0) == "    (void)S; (void)D; (void)th; (void)n;\n    return RT_CALLBACK;"
    assert tr.callbacks == frozenset({0})


def test_fences_only_step_and_exit_retires_the_active_threads():
    tr = translated("membar.gl;\nexit;")
    assert template(tr, 0) == "    int r = 0; (void)r;\n    const int32_t *act = th; const int32_t na = n;\n" + ADVANCE
    assert _lines(template(tr, 1)) == ["int r = 0; (void)r;", "const int32_t *act = th; const int32_t na = n;",
                                       "if (na) S->api->exit_threads(S, act, na);", "return 0;"]


def test_bar_sync_hands_the_runtime_each_threads_barrier_id():
    body = _lines(template(translated("bar.sync 3;\nexit;"), 0))
    assert "ids[i] = ((uint32_t)D->k[0]);" in body
    assert "if (na && (r = S->api->bar(S, D->idx, act, na, ids, NULL, 0, 0, NULL))) return r;" in body
    # the barrier decides when the threads move on: no step past it here
    assert "for (int32_t i = 0; i < n; i++) S->pc[th[i]] = (int32_t)D->idx + 1;" not in body


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
    assert tr.reason is None and tr.callbacks == frozenset(range(1, 5))
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
