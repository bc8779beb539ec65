"""Pure loops (refsim/ptx/loops.py): which instructions are pure, the registers of a loop, and the
deadlock a warp's return to an earlier state raises, on tiny hand-written kernels (the interpreter;
tests/ptx/compiled/test_loops.py runs the same kernels through both executors)."""

from __future__ import annotations

import numpy as np
import pytest

from refsim import ptx
from refsim.ptx import loops
from refsim.ptx.dispatch import load
from refsim.ptx.parse import parse

HEAD = ".version 8.0\n.target sm_80\n.address_size 64\n"
# line 4 the header, 5 '{', 6-8 the registers, the body from line 9; register slots in declaration
# order: %p0..%p3 -> 0..3, %r0..%r15 -> 4..19, %rd0..%rd15 -> 20..35
REGS = ".reg .pred %p<4>;\n.reg .b32 %r<16>;\n.reg .b64 %rd<16>;\n"
LOAD_PTR = "ld.param.u64 %rd1, [p0];\ncvta.to.global.u64 %rd2, %rd1;\n"


def text(body: str) -> str:
    return HEAD + f".visible .entry k(.param .u64 p0)\n{{\n{REGS}{body}\n}}\n"


def run(body: str, grid: int, block: int, args: list, **options):
    """One launch of kernel ``k`` on the interpreter."""
    return ptx.Module(text(body)).launch("k", grid, block, args, executor="interpreter", **options)


SPIN = "mov.u32 %r1, %tid.x;\n$L_spin:\nbra $L_spin;\nret;"          # bra at line 11
# nvcc's wait on a non-volatile flag: the load is hoisted, the loop is one guarded branch (line 14)
GUARDED_SPIN = LOAD_PTR + "ld.global.u32 %r2, [%rd2];\nsetp.eq.s32 %p1, %r2, 0;\n$L_wait:\n@%p1 bra $L_wait;\nret;"
# block 0 waits for a volatile flag that block 1 sets after a 40-iteration counted loop (lines 22-25)
FLAG = LOAD_PTR + """mov.u32 %r1, %ctaid.x;
setp.ne.u32 %p1, %r1, 0;
@%p1 bra $SET;
$WAIT:
ld.volatile.global.u32 %r3, [%rd2];
setp.eq.u32 %p2, %r3, 0;
@%p2 bra $WAIT;
st.global.u32 [%rd2+4], %r3;
ret;
$SET:
mov.u32 %r4, 0;
$COUNT:
add.u32 %r4, %r4, 1;
setp.lt.u32 %p3, %r4, 40;
@%p3 bra $COUNT;
st.volatile.global.u32 [%rd2], %r4;
ret;"""
# three registers rotating: the state repeats every 3 visits (lines 13-17)
ROTATE = "mov.u32 %r3, 1;\nmov.u32 %r4, 2;\nmov.u32 %r5, 3;\n$L_rot:\nmov.u32 %r6, %r3;\nmov.u32 %r3, %r4;\n" \
         "mov.u32 %r4, %r5;\nmov.u32 %r5, %r6;\nbra $L_rot;"
COUNTED = LOAD_PTR + "mov.u32 %r4, 0;\n$L_count:\nadd.u32 %r4, %r4, 1;\nsetp.lt.u32 %p1, %r4, 1000;\n" \
          "@%p1 bra $L_count;\nst.global.u32 [%rd2], %r4;\nret;"

LOOPING = "in a state it had at an earlier visit, with no memory, barrier or other side-effecting instruction " \
          "in between, so it loops forever; looping: "


def test_kinds_mark_memory_barrier_clock_and_warp_instructions_impure():
    k = parse(text("ld.param.u64 %rd1, [p0];\nmov.u32 %r1, %tid.x;\n$L:\nadd.s32 %r2, %r2, 1;\nmov.u32 %r3, %clock;\n"
               "bar.sync 0;\nshfl.sync.idx.b32 %r4, %r1, 0, 31, 0xffffffff;\n@%p1 bra $L;\nbra $E;\n$E:\nret;")).kernels["k"]
    kind = loops.kinds(k, load(k, "sm_80"))
    I, P, B = loops.IMPURE, loops.PURE, loops.BACKWARD
    #        ld.param mov add mov %clock bar shfl @p bra(back) bra(forward) ret, the closing brace (an exit)
    assert kind.tolist() == [I, P, P, I, I, I, B, P, I, I]
    # W(6): add %r2 | mov %r3 | shfl %r4, %r1 | the guard %p1 -> slots 6, 7, 8, 5, 1
    assert loops.registers(k, kind) == [(), (), (), (), (), (), (1, 5, 6, 7, 8), (), (), ()]


def test_a_pure_spin_is_a_deadlock_naming_the_line_and_every_warp():
    with pytest.raises(ptx.PtxDeadlockError) as e:
        run(SPIN, 2, 64, [np.zeros(1)])
    assert str(e.value) == ("kernel k: deadlock: a warp loops at PTX line 11 `bra $L_spin` " + LOOPING
                            + "block (0, 0, 0) warp 0; block (0, 0, 0) warp 1; block (1, 0, 0) warp 0; "
                              "block (1, 0, 0) warp 1")


def test_a_pure_spin_is_found_on_its_third_visit():
    # 64 warps: the mov (64 warp-instructions), then visits of the bra, 64 each, counted before the
    # check: a limit of 64 + 2 x 64 stops the third visit first; at 64 + 3 x 64 the third visit raises
    with pytest.raises(ptx.PtxLimitError):
        run(SPIN, 32, 64, [np.zeros(1)], max_warp_instructions=64 + 2 * 64)
    with pytest.raises(ptx.PtxDeadlockError):
        run(SPIN, 32, 64, [np.zeros(1)], max_warp_instructions=64 + 3 * 64)


def test_a_guarded_spin_on_a_hoisted_flag_is_a_deadlock_only_while_the_flag_is_clear():
    with pytest.raises(ptx.PtxDeadlockError, match=r"PTX line 14 `@%p1 bra \$L_wait` .*block \(0, 0, 0\) warp 0$"):
        run(GUARDED_SPIN, 1, 32, [np.zeros(1, np.int32)])
    run(GUARDED_SPIN, 1, 32, [np.ones(1, np.int32)])


def test_a_spin_on_a_volatile_flag_another_block_sets_completes_and_a_counted_loop_is_no_deadlock():
    buf = np.zeros(2, np.int32)
    run(FLAG, 2, 32, [buf])
    assert buf.tolist() == [40, 40]
    buf = np.zeros(1, np.int32)
    run(COUNTED, 1, 32, [buf])
    assert buf.tolist() == [1000]


def test_a_loop_whose_state_repeats_every_third_visit_is_found():
    # Brent: kept at visits 1, 2, 4; visit 4 equals visit 1 (4 - 1 = 3)
    with pytest.raises(ptx.PtxDeadlockError, match=r"PTX lines 13-17 \(`mov.u32 %r6, %r3` \.\.\. `bra \$L_rot`\)"):
        run(ROTATE, 1, 32, [np.zeros(1)])


def test_past_the_walk_limit_every_loop_uses_every_register_the_kernel_names(monkeypatch):
    k = parse(text(ROTATE)).kernels["k"]
    kind = loops.kinds(k, load(k, "sm_80"))
    # the loop (instructions 3-7) names %r3 %r4 %r5 %r6 -> slots 7, 8, 9, 10; the kernel names no others
    assert loops.registers(k, kind)[7] == (7, 8, 9, 10)
    monkeypatch.setattr(loops, "MAX_LOOP_WALK", 4)
    assert loops.registers(k, kind)[7] == (7, 8, 9, 10)
    k2 = parse(text("mov.u32 %r9, 5;\n" + ROTATE)).kernels["k"]
    kind2 = loops.kinds(k2, load(k2, "sm_80"))
    assert loops.registers(k2, kind2)[8] == (7, 8, 9, 10, 13)      # %r9 joins: named outside the loop
    monkeypatch.setattr(loops, "MAX_LOOP_WALK", 1 << 22)
    assert loops.registers(k2, kind2)[8] == (7, 8, 9, 10)
