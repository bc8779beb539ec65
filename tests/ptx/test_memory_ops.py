"""refsim.ptx.memory_ops: ld/st in every state space, the alignment and bounds faults with the
address and thread, atomics applied in thread order, cp.async groups landing at their wait, and the
traffic counts, on tiny kernels worked by hand. Launches name the interpreter, whose memory side this
is."""

from __future__ import annotations

import numpy as np
import pytest

from refsim import ptx
from refsim.ptx.errors import PtxMemoryError, PtxMisalignedError

HEAD = ".version 8.0\n.target sm_80\n.address_size 64\n.const .align 4 .u32 c[2] = {7, 9};\n"


def _kernel(body: str) -> ptx.Module:
    """Thread t: %r1 = t, %rd4 = &out[t] (u32), %r7 = the value parameter; shared ``s`` (256 bytes),
    local ``l`` (16 bytes)."""
    return ptx.Module(HEAD + f""".visible .entry k(.param .u64 pout, .param .u32 pval)
{{
.reg .b32 %r<10>; .reg .b64 %rd<8>; .reg .pred %p<4>; .reg .f32 %f<4>;
.shared .align 16 .b8 s[256]; .local .align 8 .b8 l[16];
ld.param.u64 %rd1, [pout]; ld.param.u32 %r7, [pval]; cvta.to.global.u64 %rd2, %rd1;
mov.u32 %r1, %tid.x; mul.wide.u32 %rd3, %r1, 4; add.s64 %rd4, %rd2, %rd3;
{body}
}}
""")


def _run(body: str, threads: int = 4, out=None, val: int = 5, **kw):
    out = np.zeros(threads, np.uint32) if out is None else out
    stats = _kernel(body).launch("k", 1, threads, [out, val], executor="interpreter", **kw)
    return out.tolist(), stats


# ------------------------------------------------------------------------------- state spaces
def test_each_state_space_stores_and_loads_its_own_bytes():
    # shared: s[t] = t + 1, read back by thread 3 - t; local: per thread, so no thread sees another's
    shared = ("add.u32 %r2, %r1, 1; shl.b32 %r3, %r1, 2; mov.u32 %r4, s; add.u32 %r4, %r4, %r3; st.shared.u32 [%r4], %r2;"
              "bar.sync 0; sub.u32 %r5, 12, %r3; mov.u32 %r4, s; add.u32 %r4, %r4, %r5; ld.shared.u32 %r6, [%r4];"
              "st.global.u32 [%rd4], %r6;")
    assert _run(shared)[0] == [4, 3, 2, 1]
    local = "mul.lo.u32 %r2, %r1, 11; st.local.u32 [l+4], %r2; ld.local.u32 %r6, [l+4]; st.global.u32 [%rd4], %r6;"
    assert _run(local)[0] == [0, 11, 22, 33]
    assert _run("ld.const.u32 %r6, [c+4]; add.u32 %r6, %r6, %r7; st.global.u32 [%rd4], %r6;", val=100)[0] == [109] * 4
    assert _run("ld.param.u32 %r6, [pval]; st.global.u32 [%rd4], %r6;", val=0xFFFFFFFF)[0] == [0xFFFFFFFF] * 4


def test_generic_loads_and_stores_reach_global_shared_and_local_through_their_windows():
    body = """mov.u64 %rd5, l; cvta.local.u64 %rd5, %rd5; st.u32 [%rd5], %r1;
mov.u64 %rd6, s; cvta.shared.u64 %rd6, %rd6; add.s64 %rd6, %rd6, %rd3; ld.u32 %r2, [%rd5]; add.u32 %r2, %r2, 40;
st.u32 [%rd6], %r2; ld.u32 %r3, [%rd6]; st.u32 [%rd4], %r3;"""
    assert _run(body)[0] == [40, 41, 42, 43]


def test_vector_accesses_move_their_elements_in_order():
    body = ("mov.u32 %r2, 10; mov.u32 %r3, 20; st.local.v2.u32 [l+8], {%r2, %r3}; ld.local.v2.u32 {%r4, %r5}, [l+8];"
            "sub.u32 %r6, %r5, %r4; st.global.u32 [%rd4], %r6;")
    assert _run(body)[0] == [10] * 4


# ------------------------------------------------------------------------------- faults
@pytest.mark.parametrize("body, cls, match", [
    ("mov.u32 %r2, s; add.u32 %r2, %r2, 2; ld.shared.u32 %r3, [%r2];", PtxMisalignedError,
     r"`ld.shared.u32 %r3, \[%r2\]`: misaligned 4-byte .shared access at address 0x2 by block \(0, 0, 0\) thread \(0, 0, 0\)"),
    ("st.local.v2.u32 [l+4], {%r1, %r1};", PtxMisalignedError, r"misaligned 8-byte .local access at address 0x4"),
    ("mov.u32 %r2, s; shl.b32 %r3, %r1, 8; add.u32 %r2, %r2, %r3; ld.shared.u32 %r3, [%r2];", PtxMemoryError,
     r"out-of-bounds 4-byte .shared access \(the block has 256 bytes\) at address 0x100 by block \(0, 0, 0\) "
     r"thread \(1, 0, 0\)"),
    ("ld.local.u32 %r3, [l+16];", PtxMemoryError, r"out-of-bounds 4-byte .local access at address 0x10"),
    ("ld.param.u32 %r3, [pval+4];", PtxMemoryError, r"`ld.param.u32 %r3, \[pval\+4\]`: .param access at 0xc outside the parameters"),
    ("st.global.u32 [%rd4+16], %r1;", PtxMemoryError,
     r"out-of-bounds 4-byte .global access \(no buffer holds it\) at address 0x[0-9a-f]+ by block \(0, 0, 0\) "
     r"thread \(0, 0, 0\)"),
])
def test_a_misaligned_or_out_of_bounds_access_names_space_address_and_thread(body, cls, match):
    with pytest.raises(cls, match=match):
        _run(body)


def test_a_symbol_used_in_another_state_space_refuses_the_kernel():
    m = _kernel("ld.global.u32 %r3, [s];")
    assert "symbol s is in .shared, not .global" in m.unsupported["k"]


# ------------------------------------------------------------------------------- atomics
def test_atomics_on_one_address_apply_in_thread_order_and_return_the_old_value():
    # out[0] starts at 100; thread t adds t + 1: thread t sees 100 + (0 + 1 + ... + t)
    out = np.array([100, 0, 0, 0, 0], np.uint32)
    _run("add.u32 %r2, %r1, 1; atom.global.add.u32 %r3, [%rd2], %r2; st.global.u32 [%rd4+4], %r3;", out=out)
    assert out.tolist() == [110, 100, 101, 103, 106]
    # exch: each thread gets its predecessor's value, the last one stays
    out = np.array([99, 0, 0, 0, 0], np.uint32)
    _run("atom.global.exch.b32 %r3, [%rd2], %r1; st.global.u32 [%rd4+4], %r3;", out=out)
    assert out.tolist() == [3, 99, 0, 1, 2]


def test_shared_atomics_cas_max_and_red_without_a_result():
    # cas(s[0], t, t + 1) in thread order: 0 -> 1 -> 2 -> 3 -> 4, every thread succeeds
    body = ("mov.u32 %r4, s; st.shared.u32 [%r4], 0; bar.sync 0; add.u32 %r2, %r1, 1;"
            "atom.shared.cas.b32 %r3, [%r4], %r1, %r2; mul.lo.u32 %r5, %r1, 7; atom.shared.max.u32 %r6, [%r4+4], %r5;"
            "red.shared.add.u32 [%r4+8], %r1; bar.sync 0; ld.shared.u32 %r5, [%r4+4]; ld.shared.u32 %r6, [%r4+8];"
            "shl.b32 %r5, %r5, 8; or.b32 %r5, %r5, %r6; shl.b32 %r5, %r5, 8; or.b32 %r3, %r5, %r3; st.global.u32 [%rd4], %r3;")
    # s[4] = max(0, 7, 14, 21) = 21, s[8] = 0 + 1 + 2 + 3 = 6, cas old value = t
    assert _run(body)[0] == [(21 << 16) | (6 << 8) | t for t in range(4)]


def test_float_atomic_adds_land_in_thread_order_or_in_the_order_given():
    # f32: 1e8 + 1 rounds back to 1e8 (spacing 8 there); thread values 1e8, 1, -1e8, 1
    body = "ld.global.f32 %f1, [%rd4+16]; atom.global.add.f32 %f2, [%rd2], %f1;"
    xs = np.array([0, 0, 0, 0, 1e8, 1, -1e8, 1], np.float32)
    out = xs.copy()
    _, stats = _run(body, out=out.view(np.uint32))
    assert out[0] == 1.0 and stats.float_atomic_contention == 4      # ((1e8 + 1) - 1e8) + 1
    out = xs.copy()
    _run(body, out=out.view(np.uint32), atomic_order=(2, 0, 1, 3))   # -1e8 + 1e8 + 1 + 1
    assert out[0] == 2.0


# ------------------------------------------------------------------------------- cp.async
def test_cp_async_groups_land_at_the_wait_that_covers_them():
    # group 0 copies out[4:8] to s[0:16], group 1 copies out[8:12] to s[16:32]; wait_group 1 lets only
    # group 0 land: thread 0 reads s[0] (landed: 14) and s[16] (not yet: 0)
    body = """setp.eq.u32 %p1, %r1, 0; @!%p1 exit; mov.u32 %r4, s;
cp.async.cg.shared.global [%r4], [%rd2+16], 16; cp.async.commit_group;
cp.async.cg.shared.global [%r4+16], [%rd2+32], 16; cp.async.commit_group;
cp.async.wait_group 1; ld.shared.u32 %r2, [%r4]; ld.shared.u32 %r3, [%r4+16]; st.global.u32 [%rd2], %r2;
st.global.u32 [%rd2+4], %r3; cp.async.wait_all; ld.shared.u32 %r3, [%r4+16]; st.global.u32 [%rd2+8], %r3;"""
    out = np.arange(12, dtype=np.uint32) + 10
    _run(body, out=out)
    assert out[:3].tolist() == [14, 0, 18]


def test_cp_size_other_than_4_8_or_16_refuses_the_kernel():
    m = _kernel("mov.u32 %r4, s; cp.async.ca.shared.global [%r4], [%rd2], 2;")
    assert "cp-size must be 4, 8 or 16" in m.unsupported["k"]


# ------------------------------------------------------------------------------- traffic
def test_global_bytes_and_shared_wavefronts_are_counted_per_access():
    _, stats = _run("ld.global.u32 %r2, [%rd4]; st.global.u32 [%rd4], %r2;")
    assert (stats.global_bytes_read, stats.global_bytes_written) == (16, 16)
    # 32 threads reading u32 word t: one wavefront; word 2t: banks 0, 2, .., 30 hit twice: two;
    # every thread word 0: a broadcast, one
    for stride, wavefronts in ((4, 1), (8, 2), (0, 1)):
        _, stats = _run(f"mul.lo.u32 %r3, %r1, {stride}; mov.u32 %r4, s; add.u32 %r4, %r4, %r3; ld.shared.u32 %r2, [%r4];",
                        threads=32)
        assert (stats.shared_wavefronts, stats.shared_requests) == (wavefronts, 1), stride


# ------------------------------------------------------------------------------- the one decode
def test_form_decodes_space_element_vector_operation_and_spin_once_for_both_executors():
    from refsim.ptx.errors import PtxUnsupportedError
    from refsim.ptx.memory_ops import Access, form
    from refsim.ptx.parse import parse

    text = HEAD + """.visible .entry k()
{
.reg .b32 %r<9>; .reg .b64 %rd<4>; .reg .b16 %h<2>;
ld.volatile.global.v4.u32 {%r1, %r2, %r3, %r4}, [%rd1+16];
st.shared.u16 [%r5], %h1;
atom.acquire.gpu.cas.b32 %r6, [%rd2], %r7, %r8;
red.global.add.noftz.f16x2 [%rd3], %r1;
atom.relaxed.global.add.u64 %rd1, [%rd2], %rd3;
red.relaxed.global.add.u64 [%rd2], %rd3;
ld.global.v2.u32 {%r1, %r2, %r3}, [%rd1];
atom.global.add.f16 %h1, [%rd1], %h0;
cp.async.cg.shared.global.L2::cache_hint [%r1], [%rd1], 16, %r2, %rd3;
cp.async.ca.shared.global [%r1], [%rd1], 2;
ret;
}
"""
    ins = parse(text).kernels["k"].instructions
    ld, st, cas, red, add, red64 = (form(i) for i in ins[:6])
    assert (ld.space, ld.type, ld.esize, ld.vec, ld.nbytes, ld.spin, ld.op) == ("global", "u32", 4, 4, 16, True, None)
    assert ld.addr == ins[0].operands[1] and len(ld.data) == 4
    assert (st.space, st.esize, st.vec, st.spin, st.addr) == ("shared", 2, 1, False, ins[1].operands[0])
    assert isinstance(cas, Access) and (cas.space, cas.op, cas.spin, cas.ordered, len(cas.data)) == \
        ("generic", "cas", True, False, 2)
    assert cas.result == ins[2].operands[0]
    assert (red.op, red.noftz, red.esize, red.ordered, red.result, red.spin) == ("add", True, 4, True, None, False)
    assert (add.spin, add.ordered, red64.spin) == (True, False, False)     # an ordered atom with a result spins
    with pytest.raises(PtxUnsupportedError, match="^2 destinations expected$"):
        form(ins[6])
    with pytest.raises(PtxUnsupportedError, match="requires .noftz") as e:
        form(ins[7])
    assert "atom.add.f16" in str(e.value)
    cp = form(ins[8])                                                       # the cache policy is not data
    assert (cp.space, cp.esize, cp.nbytes, cp.addr, cp.data) == ("shared", 16, 16, ins[8].operands[0],
                                                                 tuple(ins[8].operands[1:2] + ins[8].operands[3:4]))
    with pytest.raises(PtxUnsupportedError, match="^cp-size must be 4, 8 or 16$"):
        form(ins[9])
