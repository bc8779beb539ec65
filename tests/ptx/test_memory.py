"""State spaces and the address map: generic addresses into shared/global, null pointers, views
written through to their base, buffers that keep contents between launches, read-only arrays."""

from __future__ import annotations

import numpy as np
import pytest

from refsim import ptx
from refsim.ptx.memory import read_only_error

HEAD = ".version 8.0\n.target sm_80\n.address_size 64\n"

# thread t: s[t] = t + 100 through a generic pointer to shared; out[t] = s[31 - t] read generically
GENERIC = HEAD + """.visible .entry k(.param .u64 out)
{
.reg .b32 %r<6>;
.reg .b64 %rd<10>;
.shared .align 4 .b8 s[128];
ld.param.u64 %rd1, [out];
mov.u32 %r1, %tid.x;
mov.u64 %rd2, s;
cvta.shared.u64 %rd3, %rd2;
mul.wide.u32 %rd4, %r1, 4;
add.s64 %rd5, %rd3, %rd4;
add.s32 %r2, %r1, 100;
st.u32 [%rd5], %r2;
bar.sync 0;
sub.s32 %r3, 31, %r1;
mul.wide.u32 %rd6, %r3, 4;
add.s64 %rd7, %rd3, %rd6;
ld.u32 %r4, [%rd7];
add.s64 %rd8, %rd1, %rd4;
st.u32 [%rd8], %r4;
}
"""


def test_generic_addresses_reach_shared_and_global():
    out = np.zeros(32, np.int32)
    ptx.Module(GENERIC).launch("k", 1, 32, [out])
    assert out.tolist() == [131 - t for t in range(32)]


def test_a_view_is_written_through_to_its_base_and_buffers_persist():
    base = np.full(40, -1, np.int32)
    m = ptx.Module(GENERIC)
    m.launch("k", 1, 32, [base.reshape(-1)[8:]])
    assert (base[:8] == -1).all() and base[8:].tolist() == [131 - t for t in range(32)]
    m.launch("k", 1, 32, [base[:32]])                # a second launch on overlapping memory
    assert base[:32].tolist() == [131 - t for t in range(32)]
    assert base[32:].tolist() == [131 - t for t in range(24, 32)]   # the first launch's values stay


def test_null_pointer_faults():
    with pytest.raises(ptx.PtxMemoryError, match="address 0x0 "):
        ptx.Module(GENERIC.replace("ld.param.u64 %rd1, [out];", "mov.u64 %rd1, 0;")).launch(
            "k", 1, 1, [np.zeros(1, np.int32)])


def test_store_to_a_read_only_array_is_an_error():
    out = np.zeros(32, np.int32)
    out.setflags(write=False)
    with pytest.raises(ptx.PtxMemoryError, match="read-only array 'out'"):
        ptx.Module(GENERIC).launch("k", 1, 32, [out])
    assert not out.any()


def test_the_read_only_error_names_where_and_the_array():
    e = read_only_error("kernel k, PTX line 7 `st.u32 [%rd1], 1`", "out")
    assert isinstance(e, ptx.PtxMemoryError)
    assert str(e) == "kernel k, PTX line 7 `st.u32 [%rd1], 1`: writes to read-only array 'out' (writeable=False)"


def test_dynamic_shared_memory_is_the_extern_array():
    text = HEAD + """.extern .shared .align 16 .b8 dyn[];
.visible .entry k(.param .u64 out)
{
.reg .b32 %r<4>;
.reg .b64 %rd<4>;
ld.param.u64 %rd1, [out];
mov.u32 %r1, dyn;
st.shared.u32 [%r1+1020], 77;
ld.shared.u32 %r2, [%r1+1020];
st.global.u32 [%rd1], %r2;
}
"""
    out = np.zeros(1, np.int32)
    m = ptx.Module(text)
    m.launch("k", 1, 1, [out], shared_bytes=1024)
    assert out[0] == 77
    with pytest.raises(ptx.PtxMemoryError, match="block has 1020 bytes"):
        m.launch("k", 1, 1, [out], shared_bytes=1020)


def test_createpolicy_and_l2_cache_hint_are_accepted_without_effect_on_values():
    text = HEAD + """.visible .entry k(.param .u64 p0)
{
.reg .b32 %r<4>;
.reg .b64 %rd<6>;
.shared .align 16 .b8 s[16];
ld.param.u64 %rd1, [p0];
cvta.to.global.u64 %rd2, %rd1;
createpolicy.fractional.L2::evict_first.b64 %rd5, 1.0;
mov.u32 %r1, s;
cp.async.cg.shared.global.L2::cache_hint [%r1], [%rd2], 16, %rd5;
cp.async.commit_group;
cp.async.wait_group 0;
ld.shared.v4.u32 {%r0, %r1, %r2, %r3}, [s];
st.global.v4.u32 [%rd2+16], {%r0, %r1, %r2, %r3};
}
"""
    x = np.array([1, 2, 3, 4, 0, 0, 0, 0], np.int32)
    ptx.Module(text).launch("k", 1, 1, [x], race=True, poison=True)
    assert x.tolist() == [1, 2, 3, 4, 1, 2, 3, 4]


# ---------------------------------------------------------------- extra buffers (launch(buffers=...))
_GATHER = """.version 8.0
.target sm_80
.address_size 64
.global .align 4 .b8 pad[8];
.visible .entry gather(.param .u64 table, .param .u64 out, .param .u64 inout)
{
 .reg .b32 %r<6>; .reg .b64 %rd<8>;
 ld.param.u64 %rd1, [table];
 ld.param.u64 %rd2, [out];
 ld.param.u64 %rd6, [inout];
 mov.u32 %r1, %tid.x;
 mul.wide.u32 %rd3, %r1, 4;
 add.s64 %rd4, %rd1, %rd3;
 ld.global.u32 %r2, [%rd4];
 add.s64 %rd5, %rd2, %rd3;
 st.global.u32 [%rd5], %r2;
 add.s64 %rd7, %rd6, %rd3;
 ld.global.u32 %r3, [%rd7];
 add.u32 %r3, %r3, %r2;
 st.global.u32 [%rd7], %r3;
 ret;
}
"""


def test_buffer_addresses_are_placed_from_buffer_base_in_order():
    from refsim.ptx.memory import BUFFER_BASE

    big, small = np.zeros(5000, np.uint8), np.zeros(16, np.uint32)
    view = np.zeros(64, np.uint8)[3:]                       # 3 bytes into its allocation: 3 bytes off
    got = ptx.buffer_addresses([("big", big), ("small", small), ("view", view)])
    # big ends at BUFFER_BASE + 5000; the next 4 KiB boundary at least 4 KiB on is BUFFER_BASE + 12288
    assert got == {"big": BUFFER_BASE, "small": BUFFER_BASE + 12288, "view": BUFFER_BASE + 12288 + 8192 + 3}
    assert BUFFER_BASE == 0x0200_0000_0000


@pytest.mark.parametrize("executor", ["interpreter", "compiled"])
def test_extra_buffers_are_reached_through_host_computed_addresses(executor):
    if executor == "compiled":
        from refsim.ptx import compiled

        if compiled.unavailable() is not None:
            pytest.skip(compiled.unavailable())
    m = ptx.Module(_GATHER)
    table = np.arange(100, 132, dtype=np.uint32)
    acc = np.arange(32, dtype=np.uint32)
    buffers = [("table", table), ("acc", acc)]
    at = ptx.buffer_addresses(buffers)
    out = np.zeros(32, np.uint32)
    # the kernel's pointers are plain integers: it reaches the buffers only through the addresses given
    m.launch("gather", 1, 32, [at["table"], out, at["acc"]], buffers=buffers, executor=executor)
    assert np.array_equal(out, np.arange(100, 132, dtype=np.uint32))
    assert np.array_equal(acc, np.arange(32, dtype=np.uint32) + np.arange(100, 132, dtype=np.uint32))   # in place
    ro = table.copy()
    ro.flags.writeable = False
    with pytest.raises(ptx.PtxMemoryError, match="writes to read-only array 'acc'"):
        acc.flags.writeable = False
        m.launch("gather", 1, 32, [at["table"], out, at["acc"]], buffers=[("table", ro), ("acc", acc)],
                 executor=executor)
    with pytest.raises(ptx.PtxMemoryError, match="no buffer holds it"):      # not mapped without buffers=
        m.launch("gather", 1, 32, [at["table"], out, at["acc"]], executor=executor)


@pytest.mark.parametrize("buffers,rule", [
    ({"a": np.zeros(4)}, "must be a list or tuple of \\(name, array\\) pairs"),
    ([("a", np.zeros(4)), ("a", np.zeros(4))], "name 'a' given twice"),
    ([("", np.zeros(4))], "non-empty str name"),
    ([("a", np.zeros((4, 4))[:, 0])], "C-contiguous"),
    ([("a", np.zeros(4, ">f4"))], "native byte order"),
    ([("a", [1, 2])], "must be a NumPy array"),
])
def test_bad_buffers_are_refused(buffers, rule):
    with pytest.raises(ptx.PtxLaunchError, match=rule):
        ptx.buffer_addresses(buffers)
    with pytest.raises(ptx.PtxLaunchError, match=rule):
        ptx.Module(_GATHER).launch("gather", 1, 32, [0, np.zeros(32, np.uint32), 0], buffers=buffers)


def test_a_buffer_placed_below_the_mapped_ones_is_refused():
    from refsim.ptx.memory import GLOBAL_BASE, GlobalMemory

    g = GlobalMemory()
    g.add(np.zeros(8192, np.uint8), "arg")
    with pytest.raises(ptx.PtxLimitError, match="'extra' at 0x10000001000: the buffers mapped before it"):
        g.add(np.zeros(4, np.uint8), "extra", at=GLOBAL_BASE + 4096)
