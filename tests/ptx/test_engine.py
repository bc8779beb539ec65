"""refsim.ptx.engine: what one launch counts (warp and thread instructions, opcodes, blocks), the
special registers it gives each thread, and blocks beyond the resident slots run in refilled slots,
on tiny kernels worked by hand. Launches name the interpreter, which is this engine."""

from __future__ import annotations

import numpy as np
import pytest

from refsim import ptx
from refsim.errors import RefsimError
from refsim.ptx import engine
from refsim.ptx.engine import LaunchStats

HEAD = ".version 8.0\n.target sm_80\n.address_size 64\n"


def _kernel(body: str) -> ptx.Module:
    """%r1 = the thread's linear index in the grid, %rd4 = &out[%r1] (u32)."""
    return ptx.Module(HEAD + f""".visible .entry k(.param .u64 pout)
{{
.reg .b32 %r<10>; .reg .b64 %rd<8>; .reg .pred %p<2>;
ld.param.u64 %rd1, [pout]; cvta.to.global.u64 %rd2, %rd1;
mov.u32 %r1, %tid.x; mov.u32 %r2, %tid.y; mov.u32 %r3, %tid.z; mov.u32 %r4, %ntid.x; mov.u32 %r5, %ntid.y;
mad.lo.u32 %r6, %r3, %r5, %r2; mad.lo.u32 %r6, %r6, %r4, %r1;
mov.u32 %r7, %ntid.z; mul.lo.u32 %r7, %r7, %r5; mul.lo.u32 %r7, %r7, %r4;
mov.u32 %r8, %ctaid.z; mov.u32 %r9, %nctaid.x; mov.u32 %r5, %ctaid.x; mad.lo.u32 %r8, %r8, %r9, %r5;
mad.lo.u32 %r1, %r8, %r7, %r6; mul.wide.u32 %rd3, %r1, 4; add.s64 %rd4, %rd2, %rd3;
{body}
}}
""")


def _run(body: str, grid, block, n: int, **kw):
    out = np.full(n, 0xEEEE, np.uint32)
    stats = _kernel(body).launch("k", grid, block, [out], executor="interpreter", **kw)
    return out.tolist(), stats


def test_counts_are_per_warp_and_per_thread_with_guard_false_threads_included():
    # 2 blocks of 40 threads = 2 warps each (the second one 8 lanes); 19 instructions before the body
    # (9 of them mov.u32), 2 in it and the implicit ret: 22 per warp
    body = "setp.lt.u32 %p1, %r1, 3;\n@%p1 st.global.u32 [%rd4], %r1;"
    out, stats = _run(body, 2, 40, 80)
    assert out[:4] == [0, 1, 2, 0xEEEE]
    assert stats.warp_instructions == 22 * 4
    assert stats.thread_instructions == 22 * 80                       # padded lanes not counted
    assert stats.opcodes["st.global.u32"] == 4 and stats.opcodes["ret"] == 4 and stats.opcodes["mov.u32"] == 4 * 9
    assert sum(stats.opcodes.values()) == stats.warp_instructions
    assert stats.blocks == 2 and stats.global_bytes_written == 12


def test_special_registers_of_a_3d_block_in_a_2d_grid():
    # block (2, 3, 2), grid (2, 1, 2): thread (x, y, z) of block (bx, 0, bz) writes
    # x | y << 4 | z << 8 | bx << 12 | bz << 16 at its linear index
    body = """mov.u32 %r2, %tid.y; mov.u32 %r3, %tid.z; mov.u32 %r4, %ctaid.x; mov.u32 %r5, %ctaid.z; mov.u32 %r6, %tid.x;
shl.b32 %r2, %r2, 4; shl.b32 %r3, %r3, 8; shl.b32 %r4, %r4, 12; shl.b32 %r5, %r5, 16;
or.b32 %r6, %r6, %r2; or.b32 %r6, %r6, %r3; or.b32 %r6, %r6, %r4; or.b32 %r6, %r6, %r5; st.global.u32 [%rd4], %r6;"""
    out, _ = _run(body, (2, 1, 2), (2, 3, 2), 48)
    expected = [x | y << 4 | z << 8 | bx << 12 | bz << 16
                for bz in range(2) for bx in range(2) for z in range(2) for y in range(3) for x in range(2)]
    assert out == expected


def test_lane_warp_and_lane_mask_registers():
    body = """mov.u32 %r2, %laneid; mov.u32 %r3, %warpid; mov.u32 %r4, %lanemask_lt; popc.b32 %r4, %r4;
mov.u32 %r5, %lanemask_ge; popc.b32 %r5, %r5; shl.b32 %r3, %r3, 8; shl.b32 %r4, %r4, 16; shl.b32 %r5, %r5, 24;
or.b32 %r2, %r2, %r3; or.b32 %r2, %r2, %r4; or.b32 %r2, %r2, %r5; st.global.u32 [%rd4], %r2;"""
    out, _ = _run(body, 1, 40, 40)
    # lane l of warp w: l, w, l lanes below it, 32 - l lanes at or above it
    assert out == [(t % 32) | (t // 32) << 8 | (t % 32) << 16 | (32 - t % 32) << 24 for t in range(40)]


def test_blocks_beyond_the_resident_slots_take_the_slot_a_finished_block_left(monkeypatch):
    monkeypatch.setattr(engine, "RESIDENT_THREADS", 64)                # two 32-thread slots
    body = ("mov.u32 %r2, %smid; mov.u32 %r3, %nsmid; shl.b32 %r3, %r3, 8; or.b32 %r2, %r2, %r3;"
            "st.global.u32 [%rd4], %r2;")
    out, stats = _run(body, 5, 32, 160)
    # blocks 0 and 1 fill slots 0 and 1 and end together; 2 and 3 follow them, then 4 in slot 0
    assert out[::32] == [0x200, 0x201, 0x200, 0x201, 0x200]
    assert stats.blocks == 5


def test_launch_stats_hold_python_ints_and_refuse_other_fields():
    s = LaunchStats(warp_instructions=np.int64(3), opcodes={"ret": 1})
    assert type(s.warp_instructions) is int and s.warp_instructions == 3
    with pytest.raises(RefsimError, match="LaunchStats.opcodes: must be a dict; got list"):
        LaunchStats(opcodes=[("ret", 1)])
    with pytest.raises(RefsimError, match="LaunchStats.barriers"):
        LaunchStats(barriers=1.5)


def test_zero_registers_are_separate_zero_rows_of_each_dtype():
    from refsim.ptx.engine import zero_registers

    regs = zero_registers([np.uint32, np.bool_, np.uint32, np.uint64], 8)
    assert [r.dtype for r in regs] == [np.uint32, np.bool_, np.uint32, np.uint64]
    assert all(r.shape == (8,) and r.flags.c_contiguous and not r.any() for r in regs)
    regs[0][3] = 7                                     # rows of one block: a write stays in its register
    assert regs[0][3] == 7 and not regs[2].any()
    with pytest.raises(RefsimError, match="T: must be >= 0"):
        zero_registers([np.uint32], -1)
