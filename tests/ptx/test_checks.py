"""refsim.ptx.checks: the verdicts of ``race=True`` and ``poison=True`` on tiny kernels, each finding
named with the line and both threads worked out by hand; the clean variant of each kernel passes.

Race: between two barriers a shared byte may be written by one thread and read by that thread only,
or read by any number of threads; a barrier starts a new interval. Poison: a register or shared byte
read before anything wrote it in this block. Launches name the interpreter, whose checker this is."""

from __future__ import annotations

import pytest

from refsim import ptx
from refsim.ptx import engine
from refsim.ptx.errors import PtxRaceError, PtxUninitializedError

HEAD = ".version 8.0\n.target sm_80\n.address_size 64\n"


def _launch(body: str, threads: int = 32, blocks: int = 1, **checks) -> None:
    """Thread t: %r1 = t, %r4 = address of s[t] (u32 words of a 256-byte shared array)."""
    ptx.Module(HEAD + f""".visible .entry k()
{{
.reg .b32 %r<8>; .reg .pred %p<4>;
.shared .align 4 .b8 s[256];
mov.u32 %r1, %tid.x; shl.b32 %r2, %r1, 2; mov.u32 %r3, s; add.s32 %r4, %r3, %r2;
{body}
}}
""").launch("k", blocks, threads, [], executor="interpreter", **checks)


NEIGHBOUR_READ = "st.shared.u32 [%r4], %r1; {sync}xor.b32 %r5, %r2, 4; add.s32 %r5, %r3, %r5; ld.shared.u32 %r6, [%r5];"


def test_reading_a_neighbours_write_without_a_barrier_is_a_race_naming_both_threads():
    racy = NEIGHBOUR_READ.format(sync="")
    _launch(racy)                                                      # unchecked: runs
    with pytest.raises(PtxRaceError, match=r"PTX line 9 `ld.shared.u32 %r6, \[%r5\]`: shared-memory read by "
                       r"block \(0, 0, 0\) thread \(0, 0, 0\) of a byte written by block \(0, 0, 0\) thread "
                       r"\(1, 0, 0\) since the last barrier"):
        _launch(racy, race=True)
    _launch(NEIGHBOUR_READ.format(sync="bar.sync 0; "), race=True)


def test_a_thread_rereading_its_own_write_and_many_readers_of_one_byte_are_not_races():
    _launch("st.shared.u32 [%r4], %r1; ld.shared.u32 %r5, [%r4]; ld.shared.u32 %r6, [%r3+128];", race=True)


def test_writing_a_byte_another_thread_read_in_the_same_interval_is_a_race():
    # every thread reads s[0]; then thread 0 writes it
    body = "ld.shared.u32 %r5, [%r3]; setp.eq.u32 %p1, %r1, 0; @%p1 st.shared.u32 [%r3], %r1;"
    with pytest.raises(PtxRaceError, match=r"shared-memory write by block \(0, 0, 0\) thread \(0, 0, 0\) to a "
                       r"byte another thread accessed since the last barrier"):
        _launch(body, race=True)
    _launch(body.replace("setp", "bar.sync 0; setp"), race=True)


def test_two_threads_writing_one_byte_in_one_instruction_is_a_race_naming_the_offset():
    # threads t and t + 16 write word t % 16: the first shared byte written twice is 0x0
    body = "and.b32 %r5, %r2, 63; add.s32 %r5, %r3, %r5; st.shared.u32 [%r5], %r1;"
    with pytest.raises(PtxRaceError, match=r"several threads write the same shared byte \(0x0\) in one instruction"):
        _launch(body, race=True)
    _launch(body.replace("63", "127"), race=True)                      # 32 distinct words


def test_a_register_read_before_any_write_is_named_with_the_first_thread():
    body = "setp.gt.u32 %p1, %r1, 4; @%p1 mov.u32 %r5, 7; add.u32 %r6, %r5, 1;"
    _launch(body)
    with pytest.raises(PtxUninitializedError, match=r"PTX line 9 `add.u32 %r6, %r5, 1`: register %r5 read before "
                       r"written by block \(0, 0, 0\) thread \(0, 0, 0\)"):
        _launch(body, poison=True)
    _launch(body.replace("@%p1 ", ""), poison=True)


def test_a_guard_predicate_read_before_any_write_is_named():
    with pytest.raises(PtxUninitializedError, match=r"`@%p2 mov.u32 %r5, 1`: guard predicate read before written"):
        _launch("@%p2 mov.u32 %r5, 1;", poison=True)


def test_a_shared_read_of_a_byte_no_thread_wrote_is_named_with_the_thread():
    # threads write s[t] for t < 31 only; thread 30 then reads s[31]
    body = "setp.lt.u32 %p1, %r1, 31; @%p1 st.shared.u32 [%r4], %r1; bar.sync 0; @%p1 ld.shared.u32 %r5, [%r4+4];"
    with pytest.raises(PtxUninitializedError, match=r"shared memory read before written by block \(0, 0, 0\) "
                       r"thread \(30, 0, 0\)"):
        _launch(body, poison=True)
    _launch(body.replace("[%r4+4]", "[%r4]"), poison=True)


def test_a_block_refilling_a_slot_starts_with_nothing_written(monkeypatch):
    monkeypatch.setattr(engine, "RESIDENT_THREADS", 32)                 # one slot: block 1 follows block 0 there
    # block 0 writes s[0]; block 1 reads it: the bytes block 0 left are not block 1's writes
    body = ("mov.u32 %r5, %ctaid.x; setp.eq.u32 %p1, %r5, 0; @%p1 st.shared.u32 [%r3], %r5; bar.sync 0;"
            "ld.shared.u32 %r6, [%r3];")
    _launch(body, blocks=1, poison=True)
    with pytest.raises(PtxUninitializedError, match=r"shared memory read before written by block \(1, 0, 0\)"):
        _launch(body, blocks=2, poison=True)
