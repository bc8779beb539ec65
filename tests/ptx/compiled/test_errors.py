"""Every run-time error of refsim.ptx, raised by the compiled path with the interpreter's class and
message (the thread, address and PTX line they name): memory faults, misalignment, traps, read-only
stores, deadlocks, the warp-instruction limit, the race and poison checks, partial warps."""

from __future__ import annotations

import numpy as np
import pytest

from refsim import ptx
from conftest_compiled import needs_compiled, run_both

pytestmark = needs_compiled

HEAD = ".version 8.0\n.target sm_80\n.address_size 64\n"
LOAD_PTR = "ld.param.u64 %rd1, [p0];\ncvta.to.global.u64 %rd2, %rd1;\nmov.u32 %r1, %tid.x;\n"
REGS = ".reg .pred %p<4>;\n.reg .b32 %r<16>;\n.reg .b64 %rd<16>;\n.reg .b16 %h<4>;\n"


def kernel(body: str, params: str = ".param .u64 p0", shared: str = "") -> ptx.Module:
    return ptx.Module(HEAD + f".visible .entry k({params})\n{{\n{REGS}{shared}{body}\n}}\n")


def raises_same(m, grid, block, args, cls, match, **options):
    _, _, err = run_both(m, "k", grid, block, args, expect_error=True, **options)
    assert isinstance(err, cls), f"expected {cls.__name__}, got {err!r}"
    assert match in str(err)


STORE_TID = LOAD_PTR + "mul.wide.u32 %rd3, %r1, 4;\nadd.s64 %rd4, %rd2, %rd3;\nst.global.u32 [%rd4], %r1;"
SHARED_PAIR = ("mov.u32 %r1, %tid.x;\nshl.b32 %r2, %r1, 2;\nmov.u32 %r3, s;\nadd.s32 %r2, %r2, %r3;\n"
               "st.shared.u32 [%r2], %r1;\n{BARRIER}ld.shared.u32 %r4, [%r2+4];")
S256 = ".shared .align 4 .b8 s[256];\n"


def test_memory_faults_name_thread_address_and_line():
    raises_same(kernel(STORE_TID), 1, 41, [np.zeros(40, np.int32)], ptx.PtxMemoryError, "thread (40, 0, 0)")
    raises_same(kernel(LOAD_PTR + "ld.global.v2.u32 {%r2, %r3}, [%rd2+4];"), 1, 1, [np.zeros(8, np.int32)],
                ptx.PtxMisalignedError, "misaligned 8-byte .global")
    raises_same(kernel(LOAD_PTR + "ld.u32 %r2, [%rd2+2];"), 1, 1, [np.zeros(8, np.int32)],
                ptx.PtxMisalignedError, "misaligned 4-byte .generic")
    sh = "mov.u32 %r1, %tid.x;\nshl.b32 %r2, %r1, 2;\nmov.u32 %r3, s;\nadd.s32 %r2, %r2, %r3;\nst.shared.u32 [%r2], %r1;"
    raises_same(kernel(sh, "", ".shared .align 4 .b8 s[64];\n"), 1, 17, [], ptx.PtxMemoryError, "block has 64 bytes")
    raises_same(kernel("mov.u64 %rd1, 8;\nld.u32 %r1, [%rd1];"), 2, 32, [np.zeros(1)], ptx.PtxMemoryError,
                "no buffer holds it")
    raises_same(kernel(LOAD_PTR + "@%p1 trap;\nsetp.eq.u32 %p2, %r1, 5;\n@%p2 trap;"), 1, 32, [np.zeros(1)],
                ptx.PtxMemoryError, "trap executed by block (0, 0, 0) thread (5, 0, 0)")


@pytest.mark.parametrize("body, line", [
    (STORE_TID, "15 `st.global.u32 [%rd4], %r1`"),
    (LOAD_PTR + "atom.global.add.u32 %r2, [%rd2], %r1;", "13 `atom.global.add.u32 %r2, [%rd2], %r1`"),
    (LOAD_PTR + "red.global.add.u32 [%rd2], %r1;", "13 `red.global.add.u32 [%rd2], %r1`"),
    (LOAD_PTR + "atom.global.cas.b32 %r2, [%rd2], 0, %r1;", "13 `atom.global.cas.b32 %r2, [%rd2], 0, %r1`"),
], ids=["st", "atom.add", "red.add", "atom.cas"])
def test_a_write_to_a_read_only_array_names_kernel_line_and_array_and_writes_nothing(body, line):
    # run_both's copies are writeable, so each executor gets its own read-only array here
    for executor in ("interpreter", "compiled"):
        ro = np.arange(40, dtype=np.int32)
        ro.flags.writeable = False
        with pytest.raises(ptx.PtxMemoryError) as e:
            kernel(body).launch("k", 1, 8, [ro], executor=executor)
        assert str(e.value) == f"kernel k, PTX line {line}: writes to read-only array 'p0' (writeable=False)", \
            executor
        assert ro.tolist() == list(range(40))


def test_deadlocks_and_the_instruction_limit():
    raises_same(kernel("bar.sync 1, 64;"), 1, 32, [np.zeros(1)], ptx.PtxDeadlockError, "line 10")
    spin = LOAD_PTR + "$L_spin:\nld.volatile.global.u32 %r2, [%rd2];\nsetp.eq.s32 %p1, %r2, 0;\n@%p1 bra $L_spin;"
    raises_same(kernel(spin), 2, 32, [np.zeros(1, np.int32)], ptx.PtxDeadlockError, "spins")
    raises_same(kernel(spin), 3, 64, [np.zeros(1, np.int32)], ptx.PtxDeadlockError, "spins",
                schedule="random", seed=11)
    raises_same(kernel("$L_loop:\nadd.s32 %r1, %r1, 1;\nbra $L_loop;"), 1, 32, [np.zeros(1)], ptx.PtxLimitError,
                "max_warp_instructions=1000", max_warp_instructions=1000)
    raises_same(kernel("mov.u32 %r1, 17;\nbar.sync %r1;"), 1, 32, [np.zeros(1)], ptx.PtxUnsupportedError,
                "barrier id must be 0..15; got 17")


def test_race_checks():
    racy = kernel(SHARED_PAIR.replace("{BARRIER}", ""), "", S256)
    raises_same(racy, 1, 32, [], ptx.PtxRaceError, "written by", race=True)
    run_both(kernel(SHARED_PAIR.replace("{BARRIER}", "bar.sync 0;\n"), "", S256), "k", 1, 32, [], race=True)
    same_byte = "mov.u32 %r1, %tid.x;\nmov.u32 %r3, s;\nst.shared.u32 [%r3+8], %r1;"
    raises_same(kernel(same_byte, "", S256), 1, 32, [], ptx.PtxRaceError, "same shared byte (0x8)", race=True)
    write_after = "mov.u32 %r1, %tid.x;\nmov.u32 %r3, s;\nld.shared.u32 %r4, [%r3];\nst.shared.u32 [%r3], %r1;"
    raises_same(kernel(write_after, "", S256), 1, 32, [], ptx.PtxRaceError, "accessed since the last barrier", race=True)
    text = ("ld.param.u64 %rd1, [p0];\ncvta.to.global.u64 %rd2, %rd1;\nmov.u32 %r1, s;\n"
            "cp.async.cg.shared.global [%r1], [%rd2], 16;\ncp.async.commit_group;\nld.shared.u32 %r2, [%r1];\n"
            "st.global.u32 [%rd2], %r2;")
    raises_same(kernel(text, shared=".shared .align 16 .b8 s[16];\n"), 1, 1, [np.arange(4, dtype=np.int32)],
                ptx.PtxRaceError, "before its wait_group", race=True)


def test_poison_checks():
    m = kernel(LOAD_PTR + "add.s32 %r3, %r2, 1;\nst.global.u32 [%rd2], %r3;")
    raises_same(m, 1, 1, [np.zeros(1, np.int32)], ptx.PtxUninitializedError, "register %r2", poison=True)
    handler_step = kernel(LOAD_PTR + "add.rz.f32 %r3, %r2, %r1;\nst.global.u32 [%rd2], %r3;")
    raises_same(handler_step, 1, 1, [np.zeros(1, np.int32)], ptx.PtxUninitializedError, "register %r2", poison=True)
    raises_same(kernel("@%p1 bra $L;\n$L:\nret;"), 1, 1, [np.zeros(1)], ptx.PtxUninitializedError, "guard predicate",
                poison=True)
    sh = kernel(SHARED_PAIR.replace("{BARRIER}", "bar.sync 0;\n"), "", S256)
    raises_same(sh, 1, 32, [], ptx.PtxUninitializedError, "shared memory read before written by", poison=True)


WARP = ("mov.u32 %r1, %tid.x;\nsetp.lt.u32 %p1, %r1, 16;\nmov.u32 %r2, s;\n@%p1 bra $L_skip;\n{INS}\n$L_skip:\nret;")


@pytest.mark.parametrize("ins, what", [
    ("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%r3}, [%r2];", "ldmatrix executed by a partial warp"),
    ("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%r3, %r4, %r5, %r6}, {%r7, %r8, %r9, %r10}, "
     "{%r11, %r12}, {%r3, %r4, %r5, %r6};", "mma executed by a partial warp"),
])
def test_warp_wide_instructions_refuse_partial_warps(ins, what):
    raises_same(kernel(WARP.replace("{INS}", ins), "", S256), 1, 32, [], ptx.PtxUnsupportedError, what)


def test_ldmatrix_poison_reads_unwritten_shared_memory():
    ld = "mov.u32 %r2, s;\nldmatrix.sync.aligned.m8n8.x1.shared.b16 {%r3}, [%r2];"
    raises_same(kernel("mov.u32 %r1, %tid.x;\n" + ld, "", S256), 1, 32, [], ptx.PtxUninitializedError,
                "shared memory read before written", poison=True)
