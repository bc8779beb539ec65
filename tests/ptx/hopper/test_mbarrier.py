"""refsim.ptx.hopper.mbarrier: phases, transaction counts, tokens, the named errors and deadlocks,
through both executors (word for word)."""

from pathlib import Path

import numpy as np
import pytest

from conftest_compiled import needs_compiled, run_both
from refsim import ptx

pytestmark = needs_compiled

_PTX = Path(__file__).parents[1] / "kernels" / "hopper_async.ptx"


@pytest.fixture(scope="module")
def mod():
    return ptx.Module(_PTX.read_text())


def test_expect_tx_pipeline_runs(mod):
    src = np.arange(64, dtype=np.int32) * 7
    _, arrays, _ = run_both(mod, "expect_tx_bug", 1, 32, [src, np.zeros(32, np.int32), 1], arch="sm_90a")
    assert np.array_equal(arrays[1], src[:32] + src[32:])


def test_missing_expect_tx_is_a_named_deadlock(mod):
    src = np.arange(64, dtype=np.int32)
    _, _, err = run_both(mod, "expect_tx_bug", 1, 32, [src, np.zeros(32, np.int32), 0], arch="sm_90a",
                         expect_error=True)
    assert isinstance(err, ptx.PtxDeadlockError)
    assert ("mbarrier _ZZ13expect_tx_bugE3bar (.shared 0x80) of block (0, 0, 0) in phase 1 "
            "(0 of 1 arrivals pending, tx-count -256) waited on by warp(s) 0") in str(err)


def test_phase_parity_error_is_a_named_deadlock(mod):
    _, _, err = run_both(mod, "parity_bug", 1, 64, [np.zeros(32, np.int32), np.zeros(32, np.int32)], arch="sm_90a",
                         expect_error=True)
    msg = str(err)
    assert isinstance(err, ptx.PtxDeadlockError)
    assert "_ZZ10parity_bugE4full (.shared 0x80)" in msg and "waited on by warp(s) 1" in msg
    assert "_ZZ10parity_bugE5empty (.shared 0x88)" in msg and "waited on by warp(s) 0" in msg


_HEAD = """.version 8.0
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 pout) {
 .reg .b32 %r<8>; .reg .b64 %rd<8>; .reg .pred %p<4>;
 .shared .align 8 .b8 bar[24];
 ld.param.u64 %rd1, [pout];
 mov.u32 %r1, %tid.x;
 mul.wide.u32 %rd2, %r1, 8;
 add.s64 %rd3, %rd1, %rd2;
 setp.eq.u32 %p3, %r1, 0;
"""


def _run(body, nthreads=4, expect_error=False):
    m = ptx.Module(_HEAD + body + "\n ret;\n}\n")
    out = np.zeros(64, np.uint64)
    _, arrays, err = run_both(m, "k", 1, nthreads, [out], arch="sm_90a", expect_error=expect_error)
    return err if expect_error else arrays[0]


def test_arrive_tokens_phase_and_pending_count():
    # 4 threads arrive on a count-3 barrier: tokens (phase | pending << 32) in thread order; the third
    # arrival completes phase 0, the fourth counts toward phase 1
    out = _run("""
 @%p3 mbarrier.init.shared::cta.b64 [bar], 3;
 mbarrier.arrive.shared::cta.b64 %rd4, [bar];
 mbarrier.pending_count.b64 %r2, %rd4;
 st.global.u64 [%rd3], %rd4;
 cvt.u64.u32 %rd5, %r2;
 st.global.u64 [%rd3+64], %rd5;
 mbarrier.test_wait.parity.shared::cta.b64 %p1, [bar], 0;
 selp.u64 %rd6, 1, 0, %p1;
 st.global.u64 [%rd3+128], %rd6;
 mbarrier.test_wait.shared::cta.b64 %p2, [bar], %rd4;
 selp.u64 %rd6, 1, 0, %p2;
 st.global.u64 [%rd3+192], %rd6;""")
    assert out[:4].tolist() == [3 << 32, 2 << 32, 1 << 32, (3 << 32) | 1]
    assert out[8:12].tolist() == [3, 2, 1, 3]
    assert out[16:20].tolist() == [1, 1, 1, 1]           # phase 0 (parity 0) completed
    assert out[24:28].tolist() == [1, 1, 1, 0]           # the fourth token's phase 1 has not


def test_expect_tx_and_complete_tx_gate_the_phase():
    out = _run("""
 @%p3 mbarrier.init.shared::cta.b64 [bar], 4;
 mbarrier.arrive.expect_tx.shared::cta.b64 _, [bar], 64;
 mbarrier.test_wait.parity.shared::cta.b64 %p1, [bar], 0;
 selp.u64 %rd6, 1, 0, %p1;
 st.global.u64 [%rd3], %rd6;
 mbarrier.complete_tx.shared::cta.b64 [bar], 64;
 mbarrier.test_wait.parity.shared::cta.b64 %p1, [bar], 0;
 selp.u64 %rd6, 1, 0, %p1;
 st.global.u64 [%rd3+64], %rd6;""")
    assert out[:4].tolist() == [0, 0, 0, 0]              # tx-count 256 outstanding
    assert out[8:12].tolist() == [1, 1, 1, 1]            # the four complete_tx (one step) end it


def test_arrive_drop_lowers_later_phases():
    # thread 0 drops out of a count-4 barrier: phase 1 expects 3 arrivals, so the fourth of the
    # second round of arrivals already counts toward phase 2
    out = _run("""
 @%p3 mbarrier.init.shared::cta.b64 [bar], 4;
 @%p3 mbarrier.arrive_drop.shared::cta.b64 _, [bar];
 @!%p3 mbarrier.arrive.shared::cta.b64 _, [bar];
 mbarrier.arrive.release.cluster.shared::cta.b64 %rd4, [bar];
 st.global.u64 [%rd3], %rd4;""")
    assert out[:4].tolist() == [(3 << 32) | 1, (2 << 32) | 1, (1 << 32) | 1, (3 << 32) | 2]


@pytest.mark.parametrize("body, cls, words", [
    ("@%p3 mbarrier.init.shared::cta.b64 [bar+4], 1;", ptx.PtxMisalignedError, "not 8-byte aligned"),
    ("mbarrier.arrive.shared::cta.b64 _, [bar+8];", ptx.PtxBarrierError, "no initialised mbarrier at bar+8"),
    ("@%p3 mbarrier.init.shared::cta.b64 [bar], 2;\n mbarrier.arrive.shared::cta.b64 _, [bar], 3;",
     ptx.PtxBarrierError, "3 arrival(s) on the mbarrier at bar (.shared 0x0) with 2 pending"),
    ("@%p3 mbarrier.init.shared::cta.b64 [bar], 1;\n mbarrier.expect_tx.shared::cta.b64 [bar], 1048575;",
     ptx.PtxBarrierError, "would be 2097150, outside [-1048575, 1048575]"),
    ("@%p3 mbarrier.init.shared::cta.b64 [bar], 0;", ptx.PtxBarrierError, "count must be in [1, 1048575]; got 0"),
    ("@%p3 mbarrier.init.shared::cta.b64 [bar+24], 1;", ptx.PtxMemoryError, "outside the block's"),
    ("mbarrier.arrive.shared::cluster.b64 %rd4, [bar];", ptx.PtxUnsupportedError, "with the sink _ as state"),
    ("mbarrier.try_wait.parity.shared::cluster.b64 %p1, [bar], 0;", ptx.PtxUnsupportedError, "with the sink _ as state"),
    ("@%p3 mbarrier.init.shared::cta.b64 [bar], 1;\n mbarrier.inval.shared::cta.b64 [bar];\n"
     " mbarrier.arrive.shared::cta.b64 _, [bar];", ptx.PtxBarrierError, "no initialised mbarrier at bar (.shared 0x0)"),
])
def test_named_errors(body, cls, words):
    err = _run(body, nthreads=2, expect_error=True)
    assert isinstance(err, cls) and words in str(err) and "PTX line" in str(err), str(err)


# ------------------------------------------------- arrivals on another CTA's barrier (hopper_multicast.cu)
_HANDOFF = ptx.Module((Path(__file__).parents[1] / "kernels" / "hopper_multicast.ptx").read_text())


@pytest.mark.parametrize("schedule,seed", [("lockstep", 0), ("random", 5)])
def test_remote_arrive_completes_the_target_ctas_phase(schedule, seed):
    # CTA 1 stores into CTA 0's buf, then arrives twice on CTA 0's count-2 barrier; CTA 0's waiting warp wakes
    _, arrays, _ = run_both(_HANDOFF, "handoff", 2, 32, [np.zeros(32, np.int32), 2], arch="sm_90a", cluster=2,
                            schedule=schedule, seed=seed)
    assert arrays[0].tolist() == [100 + 3 * i for i in range(32)]


def test_remote_arrive_errors_are_the_local_ones():
    _, _, err = run_both(_HANDOFF, "handoff", 2, 32, [np.zeros(32, np.int32), 3], arch="sm_90a", cluster=2,
                         expect_error=True)
    assert type(err) is ptx.PtxBarrierError, repr(err)
    assert ("3 arrival(s) on the mbarrier at _ZZ7handoffE4full (.shared 0x80) with 2 pending in phase 0 "
            "(by block (1, 0, 0) thread (0, 0, 0)" in str(err)), str(err)
    _, _, err = run_both(_HANDOFF, "handoff", 2, 32, [np.zeros(32, np.int32), 1], arch="sm_90a", cluster=2,
                         expect_error=True)
    assert type(err) is ptx.PtxDeadlockError, repr(err)
    assert ("mbarrier _ZZ7handoffE4full (.shared 0x80) of block (0, 0, 0) in phase 0 (1 of 2 arrivals pending, "
            "tx-count 0) waited on by warp(s) 0") in str(err), str(err)


_REMOTE = _HEAD.replace(".shared .align 8 .b8 bar[24];", ".shared .align 8 .b8 bar[24];\n .reg .b16 %h<2>;") + """
 @%p3 mbarrier.init.shared::cta.b64 [bar], 1;
 barrier.cluster.arrive.aligned;
 barrier.cluster.wait.aligned;
 mov.u32 %r2, %cluster_ctarank;
 xor.b32 %r3, %r2, 1;
 mov.u32 %r4, bar;
 mapa.shared::cluster.u32 %r5, %r4, %r3;
 add.u32 %r5, %r5, OFF;
 @%p3 BODY
 barrier.cluster.arrive.aligned;
 barrier.cluster.wait.aligned;
 ret;
}
"""


def _remote(off: int, body: str) -> str:
    return _REMOTE.replace("OFF", str(off)).replace("BODY", body)


@pytest.mark.parametrize("off, body, cls, words", [
    (0, "mbarrier.arrive.expect_tx.release.cluster.shared::cluster.b64 _, [%r5], 1048575;\n"
        " @%p3 mbarrier.expect_tx.relaxed.cluster.shared::cluster.b64 [%r5], 1;",
     ptx.PtxBarrierError, "tx-count of the mbarrier at bar (.shared 0x0) would be 1048576"),
    (8, "mbarrier.arrive.shared::cluster.b64 _, [%r5];", ptx.PtxBarrierError, "no initialised mbarrier at bar+8"),
    (4, "mbarrier.arrive.shared::cluster.b64 _, [%r5];", ptx.PtxMisalignedError,
     "mbarrier at .shared::cluster address 0x2000004 is not 8-byte aligned"),
    (1 << 25, "mbarrier.arrive.shared::cluster.b64 _, [%r5];", ptx.PtxMemoryError,
     "names CTA rank 3 of the cluster, which has 2 CTA(s)"),
])
def test_remote_forms_and_their_named_errors(off, body, cls, words):
    # thread 0 of each CTA acts on the other CTA's barrier through its mapa'd address
    _, _, err = run_both(ptx.Module(_remote(off, body)), "k", 2, 32, [np.zeros(64, np.uint64)],
                         arch="sm_90a", cluster=2, expect_error=True)
    assert type(err) is cls and words in str(err) and "PTX line" in str(err), str(err)


def test_remote_expect_tx_and_complete_tx_run():
    # each CTA's thread 0: arrive.expect_tx(16) then complete_tx(16) on the other CTA's barrier: both phases complete
    body = ("mbarrier.arrive.expect_tx.shared::cluster.b64 _, [%r5], 16;\n"
            " @%p3 mbarrier.complete_tx.shared::cluster.b64 [%r5], 16;\n"
            " barrier.cluster.arrive.aligned;\n barrier.cluster.wait.aligned;\n"
            " @%p3 mbarrier.test_wait.parity.shared::cta.b64 %p1, [bar], 0;\n"
            " selp.u64 %rd4, 1, 2, %p1;\n st.global.u64 [%rd3], %rd4;")
    mod = ptx.Module(_remote(0, body).replace("mov.u32 %r1, %tid.x;",
                                                              "mov.u32 %r1, %tid.x;\n mov.u32 %r6, %ctaid.x;\n"
                                                              " mad.lo.u32 %r1, %r6, 32, %r1;")
                     .replace("setp.eq.u32 %p3, %r1, 0;", "and.b32 %r7, %r1, 31;\n setp.eq.u32 %p3, %r7, 0;"))
    _, arrays, _ = run_both(mod, "k", 2, 32, [np.zeros(64, np.uint64)], arch="sm_90a", cluster=2)
    assert arrays[0][[0, 32]].tolist() == [1, 1]
