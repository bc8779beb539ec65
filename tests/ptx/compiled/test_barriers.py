"""The block barriers, thread exit and cp.async groups through both executors: the compiled executor
runs the interpreter's definitions (refsim/ptx/barriers.py, Launch.exit_threads, memory_ops.cp) over a
LaunchView, so memory, statistics and errors must agree bit for bit and word for word."""

from __future__ import annotations

import numpy as np
import pytest

from conftest_compiled import needs_compiled, run_both
from refsim import ptx

pytestmark = needs_compiled

HEAD = ".version 8.0\n.target sm_80\n.address_size 64\n"


def _module(body: str) -> ptx.Module:
    """Thread t of a block: %r1 = t, %rd4 = &out[ctaid * ntid + t] (u32); ``s``: 512 shared bytes."""
    return ptx.Module(HEAD + f""".visible .entry k(.param .u64 pout)
{{
.reg .b32 %r<8>; .reg .b64 %rd<8>; .reg .pred %p<4>;
.shared .align 4 .b8 s[512];
ld.param.u64 %rd1, [pout]; cvta.to.global.u64 %rd2, %rd1;
mov.u32 %r1, %tid.x; mov.u32 %r5, %ctaid.x; mov.u32 %r6, %ntid.x; mad.lo.s32 %r7, %r5, %r6, %r1;
mul.wide.u32 %rd3, %r7, 4; add.s64 %rd4, %rd2, %rd3;
{body}
}}
""")


PRED = "rem.u32 %r3, %r1, 3; setp.eq.u32 %p1, %r3, 0;"
ARRIVE = """setp.lt.u32 %p1, %r1, 32; and.b32 %r3, %r1, 31; shl.b32 %r3, %r3, 2; mov.u32 %r4, s;
add.s32 %r4, %r4, %r3;
@%p1 bra $L_wait;
add.u32 %r2, %r1, 100; st.shared.u32 [%r4], %r2; bar.arrive 1, 64; bar.sync 2, 64; st.global.u32 [%rd4], %r1;
exit;
$L_wait:
bar.sync 2, 64; bar.sync 1, 64; ld.shared.u32 %r2, [%r4]; st.global.u32 [%rd4], %r2;"""


@pytest.mark.parametrize("body, blocks, threads, options", [
    (PRED + "bar.red.popc.u32 %r2, 0, %p1; st.global.u32 [%rd4], %r2;", 2, 96, {}),
    (PRED + "bar.red.and.pred %p2, 0, %p1; bar.red.or.pred %p3, 0, %p1; selp.u32 %r2, 1, 0, %p2;"
     "selp.u32 %r3, 2, 0, %p3; add.u32 %r2, %r2, %r3; st.global.u32 [%rd4], %r2;", 2, 96, {"poison": True}),
    (ARRIVE, 3, 64, {"race": True}),
    (ARRIVE, 3, 64, {"schedule": "random", "seed": 5}),
    # exits release the barrier the others wait at (exited threads count as arrived)
    ("setp.ge.u32 %p1, %r1, 40; @%p1 exit; bar.sync 0; add.u32 %r2, %r1, 1; bar.sync 0; st.global.u32 [%rd4], %r2;",
     3, 64, {}),
    # a thread that arrives and exits: the barrier completes when the last live thread has exited
    ("setp.eq.u32 %p1, %r1, 0; @%p1 bar.arrive 3, 64; @%p1 exit; bar.sync 0; st.global.u32 [%rd4], %r1;", 2, 64, {}),
    # 65 blocks of 1024 threads: more than the resident 65,536, so exits refill the slots with new blocks
    ("bar.sync 0; add.u32 %r2, %r7, 7; bar.sync 0; st.global.u32 [%rd4], %r2;", 65, 1024, {}),
    # cp.async groups: copies land at the covering wait_group (2 groups, wait 1 then 0) and at exit
    ("""shl.b32 %r3, %r1, 2; mov.u32 %r4, s; add.s32 %r4, %r4, %r3; cvta.to.shared.u64 %rd5, %rd2;
cp.async.ca.shared.global [%r4], [%rd4], 4; cp.async.commit_group;
cp.async.ca.shared.global [%r4+256], [%rd4], 4; cp.async.commit_group;
cp.async.wait_group 1; ld.shared.u32 %r2, [%r4]; cp.async.wait_all; ld.shared.u32 %r3, [%r4+256];
add.u32 %r2, %r2, %r3; add.u32 %r2, %r2, %r1; bar.sync 0; st.global.u32 [%rd4], %r2;""", 2, 64, {"race": True}),
], ids=["red-popc", "red-and-or-poison", "arrive-race", "arrive-random", "exit-releases", "arrive-then-exit",
        "refill", "cp-async-groups"])
def test_barriers_exits_and_cp_async_groups_agree_bit_for_bit(body, blocks, threads, options):
    out = np.arange(blocks * threads, dtype=np.uint32) * 3
    stats, (res,), _ = run_both(_module(body), "k", blocks, threads, [out], **options)
    assert not np.array_equal(res, out) and stats.blocks == blocks


@pytest.mark.parametrize("body", [
    "bar.sync 2, 96; st.global.u32 [%rd4], %r1;",                       # the count is never reached
    ARRIVE.replace("bar.arrive 1, 64", "bar.sync 1, 64"),              # two warps wait on each other
    "bar.sync %r1;",                                                     # barrier id 31 of thread 31
    "setp.eq.u32 %p1, %r1, 5; @%p1 bar.sync 16;",
], ids=["count", "crossed", "id-register", "id-16"])
def test_deadlocks_and_barrier_errors_are_worded_alike(body):
    run_both(_module(body), "k", 2, 64, [np.zeros(128, np.uint32)], expect_error=True)
