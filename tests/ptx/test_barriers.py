"""refsim.ptx.barriers: bar.sync / bar.arrive / bar.red on tiny kernels, results worked by hand.

A barrier completes when its arrivals reach its count (``bar.sync a, b``: b threads; plain
``bar.sync a``: the block's live threads, exited ones counted as arrived); ``bar.arrive`` counts
without waiting; ``bar.red`` hands every released thread the popcount / AND / OR of the arrived
threads' predicates; a barrier id outside 0..15 and an unknown variant are named errors. Every launch
names the interpreter; tests/ptx/compiled/test_barriers.py runs such kernels through both executors
(the compiled one runs this module's definition over a LaunchView)."""

from __future__ import annotations

import numpy as np
import pytest

from refsim import ptx
from refsim.ptx.errors import PtxDeadlockError, PtxUnsupportedError

HEAD = ".version 8.0\n.target sm_80\n.address_size 64\n"


def _kernel(body: str) -> ptx.Module:
    """Thread t of a block: %r1 = t, %rd4 = &out[t] (u32); ``s`` is 512 bytes of shared memory."""
    return ptx.Module(HEAD + f""".visible .entry k(.param .u64 pout)
{{
.reg .b32 %r<8>; .reg .b64 %rd<8>; .reg .pred %p<4>;
.shared .align 4 .b8 s[512];
ld.param.u64 %rd1, [pout]; cvta.to.global.u64 %rd2, %rd1;
mov.u32 %r1, %tid.x; mul.wide.u32 %rd3, %r1, 4; add.s64 %rd4, %rd2, %rd3;
{body}
}}
""")


def _run(body: str, threads: int, blocks: int = 1, **kw):
    out = np.full(threads, 0xDEAD, np.uint32)
    stats = _kernel(body).launch("k", blocks, threads, [out], executor="interpreter", **kw)
    return out.tolist(), stats


def test_bar_red_gives_every_thread_the_popcount_and_the_and_or_of_the_block_predicates():
    # 96 threads, predicate t % 3 == 0: 32 of them true (t = 0, 3, ..., 93)
    pred = "rem.u32 %r3, %r1, 3; setp.eq.u32 %p1, %r3, 0;"
    out, _ = _run(pred + "bar.red.popc.u32 %r2, 0, %p1; st.global.u32 [%rd4], %r2;", 96)
    assert out == [32] * 96
    out, _ = _run(pred + "bar.red.or.pred %p2, 0, %p1; selp.u32 %r2, 1, 0, %p2; st.global.u32 [%rd4], %r2;", 96)
    assert out == [1] * 96
    out, _ = _run(pred + "bar.red.and.pred %p2, 0, %p1; selp.u32 %r2, 1, 0, %p2; st.global.u32 [%rd4], %r2;", 96)
    assert out == [0] * 96
    # every predicate true (t < 96): the AND is true
    out, _ = _run("setp.lt.u32 %p1, %r1, 96; bar.red.and.pred %p2, 0, %p1; selp.u32 %r2, 1, 0, %p2;"
                  "st.global.u32 [%rd4], %r2;", 96)
    assert out == [1] * 96


def test_bar_arrive_counts_without_waiting():
    # warp 1 writes s[t - 32] = t + 100, arrives at barrier 1 (64 threads) and goes on to barrier 2;
    # warp 0 waits at barrier 2 first, then at barrier 1, which warp 1's arrival completes, and reads
    # s[t]. Were bar.arrive to wait, warp 1 would sit at barrier 1 and warp 0 at barrier 2: a deadlock.
    body = """setp.lt.u32 %p1, %r1, 32; and.b32 %r3, %r1, 31; shl.b32 %r3, %r3, 2; mov.u32 %r4, s;
add.s32 %r4, %r4, %r3;
@%p1 bra $L_wait;
add.u32 %r2, %r1, 100; st.shared.u32 [%r4], %r2; bar.arrive 1, 64; bar.sync 2, 64; st.global.u32 [%rd4], %r1;
exit;
$L_wait:
bar.sync 2, 64; bar.sync 1, 64; ld.shared.u32 %r2, [%r4]; st.global.u32 [%rd4], %r2;"""
    out, stats = _run(body, 64, race=True)
    assert out == [t + 132 for t in range(32)] + list(range(32, 64))
    assert stats.barriers == 2
    with pytest.raises(PtxDeadlockError):
        _run(body.replace("bar.arrive 1, 64", "bar.sync 1, 64"), 64)


def test_exited_threads_count_as_arrived_and_each_completed_barrier_is_counted_per_block():
    # threads 40..63 exit; the 40 others pass two block barriers; 3 blocks: 6 completed barriers
    body = """setp.ge.u32 %p1, %r1, 40; @%p1 exit;
bar.sync 0; add.u32 %r2, %r1, 1; bar.sync 0; st.global.u32 [%rd4], %r2;"""
    out, stats = _run(body, 64, blocks=3)
    assert out == list(range(1, 41)) + [0xDEAD] * 24
    assert stats.barriers == 6


def test_a_thread_count_larger_than_the_arrivals_never_completes():
    with pytest.raises(PtxDeadlockError, match="barrier"):
        _run("bar.sync 2, 64; st.global.u32 [%rd4], %r1;", 32)


def test_bar_warp_sync_and_membar_change_no_value():
    out, stats = _run("bar.warp.sync -1; membar.gl; fence.acq_rel.cta; st.global.u32 [%rd4], %r1;", 32)
    assert out == list(range(32)) and stats.barriers == 0


@pytest.mark.parametrize("body, match", [
    ("bar.sync 16;", r"PTX line 10 `bar.sync 16`: barrier id must be 0..15; got 16"),
    ("bar.sync %r1;", r"barrier id must be 0..15; got 31"),          # thread 31's register
])
def test_a_barrier_id_beyond_15_is_refused_with_the_id(body, match):
    with pytest.raises(PtxUnsupportedError, match=match):
        _run(body, 32)


@pytest.mark.parametrize("body, match", [
    ("bar.foo 0;", r"PTX line 10 `bar.foo 0`: barrier variant bar.foo is not supported"),
    ("bar.red.xor.u32 %r2, 0, %p1;", r"barrier reduction bar.red.xor.u32 is not supported"),
])
def test_an_unknown_barrier_variant_refuses_its_kernel_at_load(body, match):
    m = _kernel(body)
    assert m.kernels == ("k",)
    assert m.unsupported["k"].startswith("kernel k, PTX line 10")
    with pytest.raises(PtxUnsupportedError, match=match):
        m.launch("k", 1, 32, [np.zeros(32, np.uint32)], executor="interpreter")
