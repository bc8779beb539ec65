"""refsim.ptx.control: branches, exits, traps, calls, moves and address-space conversions on tiny
kernels, every stored value worked by hand.

Each launch names the interpreter (the compiled executor derives its C from control's FORMS and
EFFECTS: tests/ptx/compiled/test_conformance.py and test_instructions.py run and read it): four
threads, thread t writes its 64-bit result to ``out[t]``."""

from __future__ import annotations

import numpy as np
import pytest

from refsim import ptx
from refsim.ptx.errors import PtxMemoryError, PtxUnsupportedError
from refsim.ptx.memory import LOCAL_WINDOW, SHARED_WINDOW

HEAD = ".version 8.0\n.target sm_80\n.address_size 64\n"


def _kernel(body: str) -> ptx.Module:
    """%r1 = t, %rd4 = &out[t] (u64); shared ``s`` (64 bytes) and local ``l`` (16 bytes) at offset 0."""
    return ptx.Module(HEAD + f""".visible .entry k(.param .u64 pout)
{{
.reg .b32 %r<8>; .reg .b64 %rd<8>; .reg .pred %p<4>; .reg .b16 %h<4>;
.shared .align 8 .b8 s[64]; .local .align 8 .b8 l[16];
ld.param.u64 %rd1, [pout]; cvta.to.global.u64 %rd2, %rd1;
mov.u32 %r1, %tid.x; mul.wide.u32 %rd3, %r1, 8; add.s64 %rd4, %rd2, %rd3;
{body}
}}
""")


def _run(body: str) -> list[int]:
    out = np.full(4, 0xAA, np.uint64)
    _kernel(body).launch("k", 1, 4, [out], executor="interpreter")
    return out.tolist()


def test_a_guarded_branch_sends_each_thread_its_own_way():
    # odd threads jump over the "+ 10": out = t for odd t, t + 10 for even t
    body = """and.b32 %r2, %r1, 1; setp.eq.u32 %p1, %r2, 1; mov.u32 %r3, %r1;
@%p1 bra $L_skip;
add.u32 %r3, %r3, 10;
$L_skip:
cvt.u64.u32 %rd5, %r3; st.global.u64 [%rd4], %rd5;"""
    assert _run(body) == [10, 1, 12, 3]


def test_exit_and_ret_end_the_thread_before_its_store():
    assert _run("setp.lt.u32 %p1, %r1, 2; @%p1 exit; st.global.u64 [%rd4], %rd3;") == [0xAA, 0xAA, 16, 24]
    assert _run("setp.ge.u32 %p1, %r1, 1; @%p1 ret; st.global.u64 [%rd4], %rd3;") == [0, 0xAA, 0xAA, 0xAA]


def test_trap_is_a_launch_failure_naming_the_first_thread_that_ran_it():
    with pytest.raises(PtxMemoryError, match=r"PTX line 11 `@%p1 trap`: trap executed by block \(0, 0, 0\) "
                       r"thread \(2, 0, 0\)"):
        _run("setp.ge.u32 %p1, %r1, 2;\n@%p1 trap;")


@pytest.mark.parametrize("body, match", [
    ("call.uni foo, ();", r"PTX line 10 `call.uni foo, \(\)`: calls of non-inlined device functions are not supported"),
    ("bra %r1;", r"PTX line 10 `bra %r1`: indirect branches are not supported"),
])
def test_calls_and_indirect_branches_refuse_their_kernel(body, match):
    m = _kernel(body)
    assert list(m.unsupported) == ["k"]
    with pytest.raises(PtxUnsupportedError, match=match):
        m.launch("k", 1, 4, [np.zeros(4, np.uint64)], executor="interpreter")


def test_mov_copies_special_registers_and_packs_and_unpacks_vectors():
    assert _run("mov.u32 %r2, %ntid.x; mul.lo.u32 %r2, %r2, 100; add.u32 %r2, %r2, %laneid;"
                "cvt.u64.u32 %rd5, %r2; st.global.u64 [%rd4], %rd5;") == [400, 401, 402, 403]
    # {low, high}: %r1 is the low word, 0x12345678 the high one
    assert _run("mov.u32 %r2, 0x12345678; mov.b64 %rd5, {%r1, %r2}; st.global.u64 [%rd4], %rd5;") == \
        [0x12345678_00000000 + t for t in range(4)]
    # unpack 0xBBBBAAAA into two halves, swap them, repack
    assert _run("mov.u32 %r2, 0xBBBBAAAA; mov.b32 {%h1, %h2}, %r2; mov.b32 %r3, {%h2, %h1};"
                "cvt.u64.u32 %rd5, %r3; st.global.u64 [%rd4], %rd5;") == [0xAAAABBBB] * 4


def test_cvta_moves_shared_and_local_addresses_in_and_out_of_their_generic_windows():
    shared = "mov.u64 %rd5, s; add.u64 %rd5, %rd5, 8; cvta.shared.u64 %rd6, %rd5; "
    assert _run(shared + "st.global.u64 [%rd4], %rd6;") == [SHARED_WINDOW + 8] * 4
    assert _run(shared + "cvta.to.shared.u64 %rd6, %rd6; st.global.u64 [%rd4], %rd6;") == [8] * 4
    assert _run("mov.u64 %rd5, l; cvta.local.u64 %rd6, %rd5; st.global.u64 [%rd4], %rd6;") == [LOCAL_WINDOW] * 4
    assert _run("cvta.global.u64 %rd6, %rd3; st.global.u64 [%rd4], %rd6;") == [0, 8, 16, 24]   # identity


@pytest.mark.parametrize("space, expected", [("shared", 1), ("local", 0), ("global", 0), ("param", 0)])
def test_isspacep_says_which_window_a_generic_shared_address_lies_in(space, expected):
    body = (f"mov.u64 %rd5, s; cvta.shared.u64 %rd5, %rd5; isspacep.{space} %p1, %rd5; selp.u64 %rd6, 1, 0, %p1;"
            "st.global.u64 [%rd4], %rd6;")
    assert _run(body) == [expected] * 4


def test_isspacep_global_holds_for_a_global_pointer():
    assert _run("isspacep.global %p1, %rd4; selp.u64 %rd6, 1, 0, %p1; st.global.u64 [%rd4], %rd6;") == [1] * 4


def test_nanosleep_and_createpolicy_change_no_value():
    assert _run("nanosleep.u32 100; createpolicy.fractional.L2::evict_last.b64 %rd5, 1.0;"
                "add.u64 %rd5, %rd5, %rd3; st.global.u64 [%rd4], %rd5;") == [0, 8, 16, 24]


def test_every_no_effect_instruction_only_steps_and_brkpt_traps_like_trap():
    from refsim.ptx.control import EFFECTS, Effect

    assert {op for op, e in EFFECTS.items() if e is Effect.NONE} == {
        "membar", "fence", "prefetch", "prefetchu", "applypriority", "discard"}
    assert (EFFECTS["nanosleep"], EFFECTS["trap"], EFFECTS["brkpt"]) == (Effect.YIELD, Effect.TRAP, Effect.TRAP)
    hints = ("membar.gl; fence.sc.cta; prefetch.global.L2 [%rd4]; prefetchu.L1 [%rd4]; "
             "applypriority.global.L2::evict_normal [%rd4], 128; discard.global.L2 [%rd4], 128;")
    assert _run("mov.u64 %rd5, 7;" + hints + "add.u64 %rd5, %rd5, %rd3; st.global.u64 [%rd4], %rd5;") == [7, 15, 23, 31]
    with pytest.raises(PtxMemoryError, match=r"PTX line 11 `@%p1 brkpt`: trap executed by block \(0, 0, 0\) "
                       r"thread \(1, 0, 0\)"):
        _run("setp.ge.u32 %p1, %r1, 1;\n@%p1 brkpt;")


def test_cvta_to_of_an_address_below_the_window_wraps_at_the_instruction_width():
    # 0x10 - SHARED_WINDOW: mod 2^64 for .u64; for .u32 the window base is 0 mod 2^32, so the low word stays
    assert _run("mov.u64 %rd5, 0x10; cvta.to.shared.u64 %rd6, %rd5; st.global.u64 [%rd4], %rd6;") == \
        [0xFFFFFFFF_00000010] * 4
    assert _run("mov.u32 %r2, 0x10; cvta.to.local.u32 %r3, %r2; cvt.u64.u32 %rd6, %r3; st.global.u64 [%rd4], %rd6;") \
        == [0x10] * 4


def test_a_vector_mov_form_ptx_does_not_have_and_an_unknown_isspacep_space_refuse_their_kernel():
    m = _kernel("mov.b32 {%h1, %h2, %h3}, %r1;")
    assert m.unsupported["k"] == ("kernel k, PTX line 10 `mov.b32 {%h1, %h2, %h3}, %r1`: "
                                  "mov.b32: unpacking into 3 parts is not a PTX mov form")
    m = _kernel("isspacep.texture %p1, %rd4;")
    assert m.unsupported["k"].startswith("kernel k, PTX line 10 `isspacep.texture %p1, %rd4`: isspacep needs a state "
                                         "space of shared, local, global, const, param")
